#!/usr/bin/env bash
# Sets up, builds, and runs the test suite (everything but the "heavy" label).
#   scripts/test.sh                 # the CI suite
#   scripts/test.sh -L heavy        # extra ctest arguments: here, only the heavy checks
#   BUILD_DIR=build-asan CMAKE_ARGS="-DOCR_SANITIZE=ON" scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
cd "$BUILD_DIR"
if [ $# -eq 0 ]; then
    set -- -LE heavy
fi
ctest --output-on-failure -j "${JOBS:-$(nproc)}" "$@"

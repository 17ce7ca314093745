#!/usr/bin/env bash
# Installs the build dependencies from Debian packages (idempotent, quiet when all are
# present) and configures + builds ocrtrain in Release into ./build.
#   BUILD_DIR=build-asan CMAKE_ARGS="-DOCR_SANITIZE=ON" scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(build-essential cmake pkg-config libpng-dev libjpeg62-turbo-dev libcjson-dev check
          libsubunit-dev libopenblas-dev libfreetype-dev fonts-dejavu-core fonts-liberation2
          fonts-wqy-microhei wamerican fortunes-min)

missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} ${CMAKE_ARGS:-} >"$BUILD_DIR.configure.log" 2>&1 \
    || { cat "$BUILD_DIR.configure.log"; exit 1; }
cmake --build "$BUILD_DIR" -j "$JOBS" 2>&1 | grep -E "warning:|error:|Error " || true
cmake --build "$BUILD_DIR" -j "$JOBS" >/dev/null
echo "setup: built $BUILD_DIR/ocrtrain"

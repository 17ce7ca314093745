#!/usr/bin/env bash
# Installs the build dependencies from Debian packages (idempotent, quiet when all are
# present) and configures + builds ocrtrain in Release into ./build.
#   BUILD_DIR=build-asan CMAKE_ARGS="-DOCR_SANITIZE=ON" scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(build-essential cmake pkg-config libpng-dev libjpeg62-turbo-dev libcjson-dev check
          libsubunit-dev libopenblas-dev libfreetype-dev fonts-dejavu-core fonts-liberation2
          fonts-wqy-microhei wamerican fortunes-min libyaml-dev liblmdb-dev
          libopenmpi-dev openmpi-bin)  # data parallelism (-DOCR_MPI=AUTO) and its tests/dist checks

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

# oneDNN (BF16/FP16 GEMMs on AMX, AVX512-BF16, AVX512-FP16) from PyPI into the build tree:
# the GNU-OpenMP build, so it shares ocrtrain's OpenMP threads (Debian's libdnnl 2.6 predates
# its AMX paths). Without pip or network the build goes on without it (today's paths).
# OCR_ONEDNN=0 skips it.
ONEDNN_VERSION=2023.2.0
ONEDNN_DIR="$BUILD_DIR/_deps/onednn"
if [ "${OCR_ONEDNN:-1}" != 0 ] && [ ! -f "$ONEDNN_DIR/include/oneapi/dnnl/dnnl.h" ]; then
    mkdir -p "$BUILD_DIR/_deps"
    if python3 -m pip install --quiet --disable-pip-version-check --no-deps --ignore-installed \
            --no-warn-script-location --prefix "$ONEDNN_DIR" \
            "onednn-cpu-gomp==$ONEDNN_VERSION" "onednn-devel-cpu-gomp==$ONEDNN_VERSION" >"$BUILD_DIR/_deps/onednn.log" 2>&1; then
        # The wheel carries three copies of the 52 MiB library; keep one.
        for f in "$ONEDNN_DIR"/lib/libdnnl.so "$ONEDNN_DIR"/lib/libdnnl.so.3; do
            [ -f "$f" ] && [ ! -L "$f" ] && ln -sf libdnnl.so.3.2 "$f"
        done
        echo "setup: oneDNN $ONEDNN_VERSION in $ONEDNN_DIR"
    else
        echo "setup: oneDNN wheel not installed (see $BUILD_DIR/_deps/onednn.log): building without it"
        rm -rf "$ONEDNN_DIR"
    fi
fi
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} ${CMAKE_ARGS:-} >"$BUILD_DIR.configure.log" 2>&1 \
    || { cat "$BUILD_DIR.configure.log"; exit 1; }
cmake --build "$BUILD_DIR" -j "$JOBS" 2>&1 | grep -E "warning:|error:|Error " || true
cmake --build "$BUILD_DIR" -j "$JOBS" >/dev/null
echo "setup: built $BUILD_DIR/ocrtrain"

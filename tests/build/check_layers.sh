#!/bin/sh
# Fails when an #include goes against the layering of DESIGN.md: data flows one way,
#   core <- kernels <- amp <- models <- app,   core <- data <- app,   core, kernels <- eval <- app,
#   core <- dist <- app (the data-parallel transports),
# and the CUDA backend's headers (kernels/cuda/) are included only inside kernels/. A folder may
# include its own headers and those of the folders to its left, nothing else.
# Usage: check_layers.sh SOURCE_DIR
set -eu
src=${1:?usage: check_layers.sh SOURCE_DIR}
cd "$src"
# Files of app/ that still drive the CUDA backend themselves (the GPU training step's streams,
# events, pinned buffers and graphs); each is a known exception until that step moves below app/.
CUDA_IN_APP_ALLOWED="app/feed.c app/step.c"
allowed() {
    case $1 in
    core) echo "core" ;;
    kernels) echo "core kernels" ;;
    amp) echo "core kernels amp" ;;
    data) echo "core data" ;;
    eval) echo "core kernels eval" ;;
    models) echo "core kernels amp models" ;;
    dist) echo "core dist" ;;
    app) echo "core kernels amp models data eval dist app" ;;
    esac
}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
checked=0
for layer in core kernels amp data eval dist models app; do
    [ -d "$layer" ] || continue
    ok=$(allowed "$layer")
    for f in $(find "$layer" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort); do
        checked=$((checked + 1))
        # Project includes only: "folder/..." with a folder of this project.
        grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[a-z_]*/' "$f" | while IFS= read -r line; do
            inc=$(echo "$line" | sed 's/.*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/')
            top=${inc%%/*}
            case " core kernels amp data eval dist models app " in *" $top "*) ;; *) continue ;; esac
            case " $ok " in
            *" $top "*) ;;
            *) echo "$f:${line%%:*}: $layer/ must not include $inc ($layer may include: $ok)" ;;
            esac
            case $inc in
            kernels/cuda/*)
                if [ "$layer" != kernels ]; then
                    case " $CUDA_IN_APP_ALLOWED " in
                    *" $f "*) ;;
                    *) echo "$f:${line%%:*}: $inc is the CUDA backend's own header; outside kernels/ use kernels/backend.h" ;;
                    esac
                fi
                ;;
            esac
        done
    done
done > "$out" 2>&1
if [ -s "$out" ]; then
    echo "includes against the layering (DESIGN.md, \"Layout\"):"
    cat "$out"
    exit 1
fi
echo "$checked files: every include follows the layering (core <- kernels <- amp <- models <- app)"

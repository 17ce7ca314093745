#!/bin/sh
# Fails when a kernel library (libocr_kernels.a, libocr_cuda.a) defines a global function whose
# name does not start with ocr_. Every program links these archives next to BLAS, oneDNN, cuDNN,
# MPI and the C library, so an unprefixed op name (gemm, accumulate, ...) can clash with a
# library's or be taken for one; and with one prefix, `grep ocr_<name>` finds an op everywhere.
# File-local functions (CUDA kernels and helpers included) are static and do not count.
#
# The one exception is kernels/cuda/cublas_loader.cu, which defines cuBLAS's own entry points
# (cublas*) on purpose: the backend calls cuBLAS through them and they load the library on
# first use (see that file).
# Usage: check_op_prefix.sh LIB.a ...
set -eu
command -v nm >/dev/null 2>&1 || { echo "SKIP: nm not found"; exit 0; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
count=0
for lib in "$@"; do
    # nm -A: "archive:member.o:address type name"; -C demangles C++ names to name(args).
    nm -A -g --defined-only -C "$lib" 2>/dev/null > "$out.syms" || { echo "nm failed on $lib"; rm -f "$out.syms"; exit 1; }
    count=$((count + $(awk '$2 ~ /^[TWi]$/' "$out.syms" | wc -l)))
    awk -v lib="$(basename "$lib")" '
        $2 ~ /^[TWi]$/ {
            member = $1; sub(/:[^:]*$/, "", member); sub(/^.*:/, "", member)
            name = $0; sub(/^[^ ]+ +[^ ]+ +/, "", name)           # everything after the type letter
            base = name; sub(/\(.*/, "", base)                    # C++: drop the argument list
            if (base ~ /^ocr_/) next
            if (member == "cublas_loader.cu.o" && base ~ /^cublas[A-Za-z_0-9]*$/) next
            print lib " (" member "): " name
        }' "$out.syms" >> "$out"
    rm -f "$out.syms"
done
if [ -s "$out" ]; then
    echo "global functions without the ocr_ prefix (rename them ocr_..., or make them static when file-local):"
    cat "$out"
    exit 1
fi
echo "$count global functions in $# kernel libraries, all prefixed ocr_"

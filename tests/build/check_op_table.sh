#!/bin/sh
# Fails when a row of the op table (kernels/op_table.h) points somewhere its kernels are not:
# the row's family says ocr_cpu_<kernel> is defined in kernels/cpu/<family>.c and
# ocr_cuda_<kernel> in kernels/cuda/<family>.cu, which is how kernels/ops.h tells a reader to
# find an op. The compiler checks the rest of a row (names and signatures) when it expands the
# table in kernels/dispatch.c.
# Usage: check_op_table.sh SOURCE_DIR
set -eu
src=${1:?usage: check_op_table.sh SOURCE_DIR}
cd "$src/kernels"
[ -f op_table.h ] || { echo "kernels/op_table.h is missing"; exit 1; }
out=$(mktemp)
rows=$(mktemp)
trap 'rm -f "$out" "$rows"' EXIT
# "family kernel" per row: OCR_OP(family, name, ...), OCR_OP_AS(family, name, kernel, ...),
# OCR_OP_RET(family, ret, name, ...); each row's first line holds these arguments.
sed -n 's/^OCR_OP(\([a-z_0-9]*\), *\([a-z_0-9]*\),.*/\1 \2/p;
        s/^OCR_OP_AS(\([a-z_0-9]*\), *[a-z_0-9]*, *\([a-z_0-9]*\),.*/\1 \2/p;
        s/^OCR_OP_RET(\([a-z_0-9]*\), *[a-z_0-9]*, *\([a-z_0-9]*\),.*/\1 \2/p' op_table.h > "$rows"
total=$(grep -c '^OCR_OP' op_table.h)
[ "$(wc -l < "$rows")" -eq "$total" ] ||
    { echo "kernels/op_table.h: $total rows, $(wc -l < "$rows") of them readable (family and name on the row's first line)"; exit 1; }
while read -r family kernel; do
    for side in cpu cuda; do
        if [ $side = cpu ]; then f=cpu/$family.c; else f=cuda/$family.cu; fi
        if [ ! -f "$f" ]; then
            echo "op_table.h: $kernel's family $family has no kernels/$f" >> "$out"
            continue
        fi
        # A definition: the name after a return type at the start of a line (extern "C" on CUDA).
        grep -Eq "^(extern \"C\" )?[A-Za-z].*[ *]ocr_${side}_${kernel}\(" "$f" ||
            echo "op_table.h: ocr_${side}_${kernel} is not defined in kernels/$f (family $family)" >> "$out"
    done
done < "$rows"
if [ -s "$out" ]; then
    cat "$out"
    exit 1
fi
echo "$total op table rows, each with its kernels in kernels/cpu/<family>.c and kernels/cuda/<family>.cu"

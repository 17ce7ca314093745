#!/bin/sh
# Fails when two of the project's static libraries define the same global symbol. A static
# link takes whichever archive member the linker meets first, so such a clash silently calls
# the wrong function (it once made every eval metric pair compare "equal").
# Usage: check_symbols.sh LIB.a ...
set -eu
command -v nm >/dev/null 2>&1 || { echo "SKIP: nm not found"; exit 0; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for lib in "$@"; do
    nm -g --defined-only "$lib" 2>/dev/null |
        awk -v lib="$(basename "$lib")" 'NF == 3 && $2 ~ /^[TDBR]$/ { print $3, lib }'
done | sort -u > "$tmp"
dups=$(awk '{ n[$1]++; l[$1] = l[$1] " " $2 } END { for (s in n) if (n[s] > 1) print s ":" l[s] }' "$tmp")
if [ -n "$dups" ]; then
    echo "global symbols defined in more than one library:"
    echo "$dups"
    exit 1
fi
echo "$(wc -l < "$tmp") global symbols, no clashes across $# libraries"

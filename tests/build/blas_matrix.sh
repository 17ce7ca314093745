#!/bin/sh
# Runs the CTest suite of a build directory once per OpenBLAS kernel family and thread count,
# to show that no tolerance depends on the CPU the suite happens to run on (docs/RELIABILITY.md,
# "Portable tolerances"). OpenBLAS built with DYNAMIC_ARCH (Debian's) honours OPENBLAS_CORETYPE;
# a core type it does not know falls back to the CPU's own and says "Core not found", which this
# script reports instead of counting the run.
# Usage: tests/build/blas_matrix.sh BUILD_DIR [CORETYPES] [THREADS] [ctest args...]
#   e.g. tests/build/blas_matrix.sh build "Haswell SkylakeX Zen Sandybridge" "1 2" -LE heavy
set -u
build=${1:?usage: blas_matrix.sh BUILD_DIR [CORETYPES] [THREADS] [ctest args...]}
cores=${2:-"Haswell SkylakeX Zen Sandybridge"}
threads=${3:-"1 2"}
[ $# -ge 3 ] && shift 3 || shift $#
[ $# -eq 0 ] && set -- -LE heavy
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
cat > "$probe/core.c" <<'C'
#include <stdio.h>
char *openblas_get_corename(void);
int main(void) { printf("%s\n", openblas_get_corename()); return 0; }
C
cc "$probe/core.c" -o "$probe/core" -lopenblas 2>/dev/null || { echo "cannot link a probe against OpenBLAS"; exit 1; }
fail=0
printf '%-12s %-12s %-7s %-8s %s\n' coretype openblas threads result "failed tests"
for c in $cores; do
    got=$(OPENBLAS_CORETYPE=$c "$probe/core")
    for t in $threads; do
        log="$build/Testing/blas_matrix_${c}_${t}.log"
        mkdir -p "$build/Testing"
        if [ "$got" != "$c" ]; then
            printf '%-12s %-12s %-7s %-8s %s\n' "$c" "$got" "$t" unsupported "(OpenBLAS runs $got instead)"
            continue
        fi
        ( cd "$build" && OPENBLAS_CORETYPE=$c OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t OCR_TEST_THREADS=$t \
              ctest --output-on-failure "$@" ) > "$log" 2>&1
        rc=$?
        failed=$(sed -n 's/^[[:space:]]*[0-9]* - \([A-Za-z0-9_]*\) (.*/\1/p' "$log" | tr '\n' ' ')
        summary=$(grep -E "tests passed" "$log" | tail -1)
        [ $rc -eq 0 ] && r=pass || { r=FAIL; fail=1; }
        printf '%-12s %-12s %-7s %-8s %s %s\n' "$c" "$got" "$t" "$r" "$summary" "$failed"
    done
done
exit $fail

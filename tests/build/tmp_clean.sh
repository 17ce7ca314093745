#!/bin/sh
# The suite's private temporary folder (CTest gives every test TMPDIR=DIR): "setup" empties it
# before the tests, "check" after them fails, listing what is left, when a test did not remove
# its own temporary files (tests/common/test_util.h: ocr_test_tmpdir, ocr_test_tmpfile), and
# then empties it so the next run starts clean.
# Usage: tmp_clean.sh DIR setup|check
set -eu
dir=${1:?usage: tmp_clean.sh DIR setup|check}
case ${2:?usage: tmp_clean.sh DIR setup|check} in
setup)
    rm -rf "$dir"
    mkdir -p "$dir"
    echo "temporary folder $dir is empty"
    ;;
check)
    [ -d "$dir" ] || { echo "temporary folder $dir is missing (was the setup test run?)"; exit 1; }
    left=$(ls -A "$dir")
    if [ -n "$left" ]; then
        echo "the tests left these in the temporary folder $dir:"
        ls -lA "$dir"
        rm -rf "$dir"
        mkdir -p "$dir"
        exit 1
    fi
    echo "temporary folder $dir is as clean as before the tests"
    ;;
*)
    echo "usage: tmp_clean.sh DIR setup|check"; exit 2 ;;
esac

#!/usr/bin/env bash
# Runs one libFuzzer campaign of a given CPU time and merges what it found into the
# committed corpus.
#   fuzz/run_campaign.sh NAME CPU_SECONDS [SEED_DIR...]
# Needs the clang build (FUZZ_BUILD, default build-fuzz):
#   CC=clang cmake -S . -B build-fuzz -DOCR_FUZZ=ON -DOCR_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
#   cmake --build build-fuzz --target fuzz_NAME
# Work files go to FUZZ_WORK (default /tmp/ocr_fuzz_work):
#   work/NAME/        the growing corpus (seeded from fuzz/corpus/NAME and the SEED_DIRs)
#   artifacts/NAME/   crash-*, leak-*, timeout-*, oom-* inputs
#   logs/NAME.<k>.log libFuzzer's output of round k, final stats (cov, ft, corpus, execs) at the end
#   logs/NAME.summary one line per round: CPU seconds, executions, cov, ft, corpus
# The fuzzer runs at nice 19 on one core, so on a busy machine it gets less CPU than wall
# time: it runs in rounds of at most 120 s until the rounds' CPU time (user + sys, from
# /usr/bin/time) reaches CPU_SECONDS, and stops at the first crash. Then `-merge=1` adds to
# fuzz/corpus/NAME only the inputs that reach new coverage, so the committed corpus stays small.
# FUZZ_RESUME=1 continues the rounds (and the CPU count) of the last campaign of NAME, e.g.
# after a crash was fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
name=$1
target=$2
shift 2
build=${FUZZ_BUILD:-build-fuzz}
work=${FUZZ_WORK:-/tmp/ocr_fuzz_work}
bin=$build/fuzz/fuzz_$name
[ -x "$bin" ] || { echo "run_campaign: $bin not built (cmake --build $build --target fuzz_$name)" >&2; exit 2; }
mkdir -p "$work/work/$name" "$work/artifacts/$name" "$work/logs" "fuzz/corpus/$name"
for seeds in "$@"; do cp -n "$seeds"/* "$work/work/$name"/ 2>/dev/null || true; done
summary=$work/logs/$name.summary
cpu=0
round=0
rc=0
if [ "${FUZZ_RESUME:-0}" = 1 ] && [ -s "$summary" ]; then  # continue a campaign stopped by a fixed bug
    round=$(wc -l <"$summary")
    cpu=$(tail -1 "$summary" | awk '{ print $6 }')
else
    : >"$summary"
fi
while awk -v c="$cpu" -v t="$target" 'BEGIN { exit !(c < t) }'; do
    round=$((round + 1))
    log=$work/logs/$name.$round.log
    left=$(awk -v c="$cpu" -v t="$target" 'BEGIN { l = t - c; print (l < 120 ? int(l) + 1 : 120) }')
    # -timeout: one input may take 30 s (a legal 124 Mpx JPEG of 225 bytes takes 4 s under ASan,
    # more on a busy machine); -rss_limit_mb: the image size limits allow ~400 MB
    # of pixels, ASan's quarantine adds its share; more means a leak or unbounded allocation.
    set +e
    /usr/bin/time -f "%U %S" -o "$work/logs/$name.$round.time" nice -n 19 "$bin" "$work/work/$name" \
        "fuzz/corpus/$name" -max_total_time="$left" -print_final_stats=1 -timeout=30 -rss_limit_mb=2560 \
        -artifact_prefix="$work/artifacts/$name/" >"$log" 2>&1
    rc=$?
    set -e
    used=$(tail -1 "$work/logs/$name.$round.time" | awk '{ print $1 + $2 }')
    cpu=$(awk -v c="$cpu" -v u="$used" 'BEGIN { print c + u }')
    execs=$(grep -oE "stat::number_of_executed_units: *[0-9]+" "$log" | grep -oE "[0-9]+$" || echo 0)
    last=$(grep -E "^#[0-9]+" "$log" | tail -1 | grep -oE "cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9a-zA-Z]+" || true)
    echo "round $round cpu_s $used total_cpu_s $cpu execs $execs $last rc $rc" | tee -a "$summary"
    [ "$rc" -eq 0 ] || break
done
total=$(awk '{ s += $8 } END { print s }' "$summary")
echo "run_campaign: $name: $round rounds, $cpu CPU s, $total executions, exit $rc"
ls "$work/artifacts/$name" | head -20
# Merge: the new coverage only, into the committed corpus.
nice -n 19 "$bin" -merge=1 "fuzz/corpus/$name" "$work/work/$name" -rss_limit_mb=2560 -timeout=30 \
    >"$work/logs/$name.merge.log" 2>&1 || echo "run_campaign: merge failed, see $work/logs/$name.merge.log"
echo "run_campaign: fuzz/corpus/$name: $(ls "fuzz/corpus/$name" | wc -l) files, $(du -sk "fuzz/corpus/$name" | cut -f1) KiB"
exit $rc

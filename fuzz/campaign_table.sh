#!/usr/bin/env bash
# Prints the docs/RELIABILITY.md campaign table from run_campaign.sh's logs:
#   fuzz/campaign_table.sh [NAME...]      (FUZZ_WORK as for run_campaign.sh)
# CPU seconds and executions are summed over the rounds; exec/s is executions per CPU second;
# cov/ft are libFuzzer's last status line (coverage of our instrumented code only: libpng,
# libjpeg, libyaml and cJSON are Debian's uninstrumented libraries); the corpus is the
# committed, merged fuzz/corpus/NAME.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${FUZZ_WORK:-/tmp/ocr_fuzz_work}
names=("$@")
[ ${#names[@]} -gt 0 ] || names=($(ls "$work/logs" | sed -n 's/\.summary$//p'))
echo "| harness | rounds | CPU s | executions | exec/s | cov | ft | corpus files | corpus KiB |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for n in "${names[@]}"; do
    s=$work/logs/$n.summary
    [ -s "$s" ] || continue
    awk -v n="$n" -v files="$(ls "fuzz/corpus/$n" | wc -l)" -v kib="$(( $(du -sb "fuzz/corpus/$n" | cut -f1) / 1024 ))" '
        { rounds++; cpu += $4; execs += $8; for (i = 1; i < NF; i++) { if ($i == "cov:") cov = $(i + 1); if ($i == "ft:") ft = $(i + 1) } }
        END { printf "| %s | %d | %.0f | %d | %.0f | %s | %s | %d | %d |\n", n, rounds, cpu, execs, (cpu > 0 ? execs / cpu : 0), cov, ft, files, kib }' "$s"
done

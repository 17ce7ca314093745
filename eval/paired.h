// Paired comparison of two recognizers evaluated on the same lines (FP32 baseline vs an AMP
// run): per-line agreement, the accuracy and CER deltas with 95 % confidence intervals, a
// verdict against a tolerance, and how many lines would make an undecided verdict conclusive.
// Pure statistics on counts (no model, no app state).
//
// Accuracy (exact match per line). The 2×2 table of the lines:
//                    run right   run wrong
//   baseline right   both_right  base_only
//   baseline wrong   run_only    both_wrong
// delta = (run_only − base_only) / n (run − baseline). Only the discordant lines move it; the
// interval is Newcombe's hybrid score interval for paired proportions (Stat Med 1998;17:2635,
// method 10): Wilson score intervals of both accuracies combined with the table's phi
// correlation. It is defined for every table (zero cells, n = 1), never leaves [−1, 1], and,
// unlike the exact interval conditional on the discordant pairs, it is not of zero width when no
// line differs: 0 discordant lines out of n still leave ±≈3.84/n of doubt, so a 20-line eval set
// cannot pass a ±0.005 gate. The exact McNemar test (two-sided binomial on the discordant lines)
// is reported next to it as a p-value.
//
// CER (characters). Per line i: reference characters r_i, edits of the baseline e_i and of the
// run f_i; deltaCER = Σ(f − e) / Σ r (0 references: Σ(f − e), the metrics' convention). Its
// interval is a seeded paired bootstrap: B resamples of the n lines with replacement (the same
// resampled lines for both runs), the percentile interval of the resampled deltas. The
// generator is SplitMix64 from the seed, line index = next() mod n (bias < n / 2^64), so
// tools/paired_reference.py reproduces the interval exactly. When no line's edits differ every
// resample gives the same delta and the interval has zero width: the accuracy interval is the
// one that guards small sets.
//
// Verdict against a tolerance tol > 0 (both deltas are absolute fractions: 0.005 is half a
// percentage point). With the interval mapped so that "worse" is negative (accuracy as is, CER
// negated):
//   REGRESSION    hi < −tol: worse by more than the tolerance;
//   BETTER        lo > tol: better by more than the tolerance (not a regression);
//   PASS          −tol <= lo (and lo <= tol): not worse by more than the tolerance, at the
//                 interval's confidence (a non-inferiority test: what a regression gate asks;
//                 how much better the run might be does not hold the gate up);
//   INCONCLUSIVE  lo < −tol <= hi: the data cannot rule out a loss beyond the tolerance.
#ifndef OCR_EVAL_PAIRED_H
#define OCR_EVAL_PAIRED_H

#include <stdint.h>

#include "core/error.h"

// The normal quantile of a two-sided 95 % interval.
#define PAIRED_Z95 1.959963984540054
// Bootstrap resamples of the CER interval.
#define PAIRED_BOOTSTRAP_B 2000

typedef struct {
    int64_t both_right, base_only, run_only, both_wrong;
} PairedTable;

typedef struct {
    double lo, hi;
} PairedInterval;

typedef enum { PAIRED_PASS = 0, PAIRED_INCONCLUSIVE, PAIRED_REGRESSION, PAIRED_BETTER } paired_verdict_t;

static inline int64_t paired_n(const PairedTable *t) {
    return t->both_right + t->base_only + t->run_only + t->both_wrong;
}
// Adds one line: whether the baseline and the run read it correctly.
void paired_table_add(PairedTable *t, int base_correct, int run_correct);

// Wilson score interval of x successes in n trials (real-valued counts allowed); n = 0: [0, 1].
PairedInterval paired_wilson(double x, double n, double z);

// (run_only − base_only) / n; 0 for an empty table.
double paired_acc_delta(const PairedTable *t);
// Newcombe's method 10 interval of the accuracy delta at normal quantile z; [−1, 1] for n = 0.
PairedInterval paired_acc_interval(const PairedTable *t, double z);
// The same on real-valued cells (for the lines-needed search; cells >= 0).
PairedInterval paired_acc_interval_d(double both_right, double base_only, double run_only, double both_wrong, double z);
// Exact two-sided McNemar p-value: min(1, 2 · P(Binomial(d, 1/2) <= min(run_only, base_only))),
// d the discordant lines; 1 when d = 0.
double paired_mcnemar_p(const PairedTable *t);

// The verdict of an interval of a delta (run − baseline). higher_is_better: 1 for accuracy,
// 0 for CER.
paired_verdict_t paired_verdict(PairedInterval ci, double tol, int higher_is_better);
// "pass", "inconclusive", "regression", "better".
const char *paired_verdict_name(paired_verdict_t v);

// Accuracy: the smallest eval set (lines) on which a table with the same cell proportions
// reaches a conclusive verdict (PASS, REGRESSION or BETTER) under paired_acc_interval; the
// current n when it already is. −1 when no size up to 10^12 lines does (the observed delta sits
// on −tol, or the table is empty).
int64_t paired_acc_lines_needed(const PairedTable *t, double tol, double z);

// CER delta Σ(run_edits − base_edits) / Σ ref_chars over n lines.
double paired_cer_delta(const int32_t *ref_chars, const int32_t *base_edits, const int32_t *run_edits, int64_t n);
// Percentile bootstrap interval (resamples B >= 1, confidence 1 − alpha) of paired_cer_delta
// over the n lines, from seed (see above). n = 0: [−1, 1] (nothing measured). OCR_ERR_OOM when
// the B deltas cannot be allocated; OCR_ERR_INVALID_ARG for B < 1 or alpha outside (0, 1).
ocr_status_t paired_cer_bootstrap(PairedInterval *ci, const int32_t *ref_chars, const int32_t *base_edits,
                                  const int32_t *run_edits, int64_t n, int B, double alpha, uint64_t seed);
// CER: the eval set size that would make the verdict conclusive if the interval's half-widths
// shrink as 1/√n around the same delta (the usual bootstrap scaling); n when it already is;
// −1 when no size does (a delta on −tol, or n = 0).
int64_t paired_scaled_lines_needed(int64_t n, double delta, PairedInterval ci, double tol, int higher_is_better);

// SplitMix64 (Steele, Lea, Flood 2014), the bootstrap's generator: *state += 0x9E3779B97F4A7C15,
// then the output mix.
uint64_t paired_splitmix64(uint64_t *state);

#endif

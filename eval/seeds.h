// The seed-aware regression verdict: a baseline and a candidate trained at S seeds (pair s: the
// baseline's and the candidate's run at seed s share initialisation, data order and
// augmentation), every run scored on the same n eval lines. The question is the one of
// eval/paired.h — is the candidate worse than the baseline by more than a tolerance? — but the
// interval now covers both sources of doubt: which seeds were trained (training noise: the FP32
// demo alone moves ±1 point of accuracy from seed to seed) and which lines were drawn. Pure
// statistics on per-line outcomes; docs/AMP.md ("The seed-aware verdict") has the reasoning and
// the simulations behind every choice below.
//
// The model. Per metric, the per-line differences form a seeds × lines table
//   accuracy  d[s][i] = cand_correct[s][i] − base_correct[s][i]            (−1, 0, 1)
//   CER       z[s][i] = (g[s][i] − Δ·r[i]) · n / R,  g = cand_edits − base_edits,
//             R = Σ r (reference characters), Δ = Σ g / (S·R) the mean CER delta
// (the CER table is the ratio estimator's linearisation: mean over lines of z[s][·] is seed s's
// CER delta minus Δ, and the r[i] term carries the spread of line lengths; with R = 0, metrics.h's
// convention, CER deltas are edit counts and z = n·g). Both are modelled as
// crossed random effects, x[s][i] = μ + a_s + b_i + e_si: a seed effect (training noise of the
// pair), a line effect (lines the candidate systematically reads better or worse) and a residual
// (the seed × line interaction: which lines flip in which run). The delta reported is the grand
// mean, whose variance is σa²/S + σb²/n + σe²/(S·n). Two-way ANOVA mean squares estimate it:
//   MS_seed  = n·Σ_s (x̄_s − x̄)² / (S − 1)                    E = σe² + n·σa²
//   MS_line  = S·Σ_i (x̄_i − x̄)² / (n − 1)                    E = σe² + S·σb²
//   MS_resid = Σ (x − x̄_s − x̄_i + x̄)² / ((S − 1)(n − 1))    E = σe²
// and Var(mean) = (MS_seed + MS_line − MS_resid) / (S·n) unbiasedly.
//
// The interval (S >= 2): the textbook choice, a Satterthwaite t interval on that combination,
// is anti-conservative at the seed counts people run (simulated one-sided miss rate up to 6.4 %
// at S = 2, 4.4 % at S = 3, 3.4 % at S = 4 against the nominal 2.5 %: docs/AMP.md). So the
// variance is split into its seed part and its line part, each with its own t quantile, added in
// quadrature (Banerjee's conservative combination for a sum of separately estimated variances,
// Sankhyā A 23 (1961) 359):
//   half = √( t(S−1)² · MS_seed/(S·n)  +  t(f)² · L/(S·n) ),   L = max(MS_line − MS_resid, 0),
//   f = L² / (MS_line²/(n − 1) + MS_resid²/((S − 1)(n − 1)))    (Satterthwaite, line part only)
// t(ν) the 97.5 % quantile of Student's t; f below 1 (only when L is within noise of 0, where its
// share is negligible) counts as 1, so a near-zero estimate never meets a near-infinite quantile.
// With one line (n = 1) there is no line or residual mean square: the seed part alone. MS_seed holds the seed and the residual parts with
// exactly S − 1 degrees of freedom (the S per-seed deltas), so the interval is never narrower
// than the t interval on the per-seed deltas; the line part (the only one that more seeds do not
// shrink) gets its own, usually large, degrees of freedom, which keeps the power when a candidate
// is consistently worse on some lines. With few eval lines the S per-seed deltas can coincide by
// discreteness (MS_seed = 0); the interval is therefore floored: never narrower than the pooled
// interval that treats all S·n line pairs as one paired sample (accuracy: Newcombe's interval of
// eval/paired.h on the pooled 2×2 table, which also keeps a zero-discordance table from a
// zero-width interval; CER: the normal interval of the pooled linearised values). Simulated (2, 3,
// 4 and 6 seeds; 30 to 800 lines; seed, line and pairing effects from none to large; 4000 tables
// each) the worst one-sided miss rate is 2.6 %, the nominal 2.5 % within the simulation's 0.25 %
// standard error (tools/seeds_reference.py simulate; tests/eval/test_seeds_calibration.c checks it).
//
// One seed (S = 1): training noise is not measured. The interval is the per-line paired interval
// (accuracy: Newcombe's, eval/paired.h; CER: the normal interval of the linearised values, the
// large-n form of paired.h's bootstrap) with each half-width widened in quadrature by an assumed
// training noise, z·√2·σ, σ an assumed seed-to-seed SD of one run's metric (the delta of two runs
// at unrelated seeds has SD √2·σ; paired seeds share their start, so this is an upper bound).
// Defaults: σ = 1.5 points of accuracy and 0.2 points of CER — the upper 95 % confidence bounds of
// the SDs measured over 12 FP32 seeds of the demo recipe (SD 0.97 and 0.11 points, bounds 1.50 and
// 0.17, the latter rounded up). A diverged
// candidate (0.05 against 0.85) stays a REGRESSION; an ordinary one-seed difference of a couple of
// points is INCONCLUSIVE ("training noise not measured: run more seeds").
//
// Verdicts: paired_verdict() of eval/paired.h on each interval with its tolerance; overall as
// `ocrtrain compare` combines them: REGRESSION if either metric is, else INCONCLUSIVE if either is,
// else PASS.
//
// What would decide (when a verdict is INCONCLUSIVE): the components estimated now (truncated at
// 0: σa² = max(MS_seed − MS_resid, 0)/n, σb² = L/S, σe² = MS_resid) give the expected mean squares
// at S' seeds and n' lines, hence the interval there around the same delta; seeds_needed is the
// smallest S' (at n lines) and lines_needed the smallest n' (at S seeds) whose interval is
// conclusive, −1 when none up to SEEDS_NEEDED_LIMIT seeds / SEEDS_LINES_LIMIT lines is (the line
// component alone can keep an interval across −tol whatever the seeds, the seed component whatever
// the lines). With one seed the components are not separable: the prediction takes the assumed
// 2σ² as the whole variance of a pair's delta and the line-to-line differences as seed-specific
// (σb² = 0, σe² = their variance, σa² = max(2σ² − σe²/n, 0)), as between FP32 runs at different
// seeds; a systematic line effect, which only S >= 2 can measure, would raise the count. A
// conclusive verdict has seeds_needed = S and lines_needed = n.
#ifndef OCR_EVAL_SEEDS_H
#define OCR_EVAL_SEEDS_H

#include <stdint.h>

#include "core/error.h"
#include "eval/paired.h"

// The most seed pairs one comparison takes (the result holds per-seed arrays of this size).
#define SEEDS_MAX 64
// Assumed seed-to-seed SDs of one run's metric used with one seed (absolute fractions).
#define SEEDS_PRIOR_SD_ACC 0.015
#define SEEDS_PRIOR_SD_CER 0.002
// The searches of "what would decide" stop here (and answer −1).
#define SEEDS_NEEDED_LIMIT 100000
#define SEEDS_LINES_LIMIT 1000000000000LL

typedef enum {
    SEEDS_METHOD_ONE_SEED = 0,  // S = 1: paired interval widened by the assumed training noise
    SEEDS_METHOD_CROSSED,       // S >= 2: seeds × lines mean squares, Banerjee t, pooled floor
} seeds_method_t;

typedef struct {
    double acc_tol;            // accuracy tolerance (absolute: 0.005 = half a point), >= 0
    double cer_tol;            // CER tolerance, >= 0
    double prior_seed_sd_acc;  // S = 1 only: assumed seed-to-seed SD of a run's accuracy, >= 0
    double prior_seed_sd_cer;  // S = 1 only: the same for CER, >= 0
} SeedsOptions;

// Tolerances 0.005 (compare's defaults), priors SEEDS_PRIOR_SD_ACC / SEEDS_PRIOR_SD_CER.
SeedsOptions seeds_default_options(void);

// One metric (candidate − baseline; for CER higher is worse). NAN marks what S or n leaves
// undefined (test with isnan); degrees of freedom are INFINITY where a normal quantile is used.
typedef struct {
    double delta;        // mean over seeds of the per-seed deltas
    PairedInterval ci;   // 95 % interval of delta (accuracy clipped to [−1, 1])
    double se;           // √(share_seed + share_line + share_resid): the standard error behind ci
                         // (at S = 1 for accuracy the line part is Newcombe's, not this normal se)
    double dof_seed;     // S − 1 (INFINITY at S = 1: the assumed noise is taken as known)
    double dof_line;     // f above; INFINITY when the line part is 0 or S = 1
    double ms_seed, ms_line, ms_resid;  // mean squares of the table (S = 1: ms_line only, the
                                        // variance over lines; n = 1: ms_seed only)
    double var_seed, var_line, var_resid;  // components σa², σb², σe² (truncated at 0). S = 1:
                                           // var_seed = 2σ² assumed, var_line = ms_line (line and
                                           // residual together), var_resid NAN. n = 1: var_seed =
                                           // ms_seed (seed and residual together), the others 0
    double share_seed, share_line, share_resid;  // their parts of se²: max(MS_seed − MS_resid, 0)
                                                 // /(S·n), L/(S·n), min(MS_seed, MS_resid)/(S·n);
                                                 // what dominated the doubt
    int floored;         // 1 when the pooled interval set an edge of ci
    double base_mean, cand_mean;  // the metric averaged over seeds
    double base_sd, cand_sd;      // its seed-to-seed SD (S − 1 denominator): the noise floor; NAN at S = 1
    paired_verdict_t verdict;
    int64_t seeds_needed;  // seeds (at n lines) for a conclusive verdict; S when conclusive; −1: none
    int64_t lines_needed;  // lines (at S seeds); n when conclusive; −1: none
} SeedsMetric;

typedef struct {
    int seeds;        // S
    int64_t lines;    // n
    int64_t ref_chars;  // Σ reference characters of the n lines
    seeds_method_t method;
    double prior_seed_sd_acc, prior_seed_sd_cer;  // the options' priors (applied only at S = 1)
    // Per seed pair s < S: accuracy = correct / n (exact, without PaddleOCR's 1e-5), CER = Σ edits
    // / R (Σ edits when R = 0, eval/metrics.h's convention), deltas candidate − baseline.
    double base_acc[SEEDS_MAX], cand_acc[SEEDS_MAX], acc_delta[SEEDS_MAX];
    double base_cer[SEEDS_MAX], cand_cer[SEEDS_MAX], cer_delta[SEEDS_MAX];
    SeedsMetric acc, cer;
    paired_verdict_t verdict;  // overall
} SeedsResult;

// The verdict of S >= 1 complete seed pairs on n >= 1 lines (S <= SEEDS_MAX). Arrays are
// row-major (S, n): element [s·n + i] is seed pair s, line i; correct is 0 or nonzero, edits >= 0;
// ref_chars (n) is shared by all runs. The caller owns out. OCR_ERR_INVALID_ARG for sizes, NULL
// arrays, negative counts or options out of range; OCR_ERR_OOM when the n-line scratch cannot be
// allocated. out is undefined on error.
ocr_status_t seeds_compare(SeedsResult *out, int S, int64_t n, const uint8_t *base_correct, const uint8_t *cand_correct,
                           const int32_t *base_edits, const int32_t *cand_edits, const int32_t *ref_chars,
                           const SeedsOptions *opt);

// "one_seed" / "crossed" (for JSON), and a one-line description for reports.
const char *seeds_method_name(seeds_method_t m);
const char *seeds_method_description(seeds_method_t m);

// The p-quantile of Student's t with dof > 0 degrees of freedom (real; INFINITY: the normal
// quantile), p in (0, 1); NAN otherwise. Newton on the incomplete beta function below 1000
// degrees of freedom, the Cornish–Fisher series of Abramowitz & Stegun 26.7.5 above; against
// 50-digit arithmetic the relative error is below 1e-14 for 0.005 <= p <= 0.995 (1e-13 further out).
double seeds_t_quantile(double p, double dof);

#endif

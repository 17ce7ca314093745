// Regression runs: two or more trainings from the same start, each at the same seeds, scored line
// by line on the same eval lines, and judged against the baseline with a verdict that separates
// what the change did from what training noise did (eval/seeds.h). `ocrtrain compare` is a thin
// CLI over compare_run.
//
//   legs:  the baseline and the candidates. Either FP32 against AMP settings (dtype × level of
//          one config: what mixed precision costs), or a baseline config against a candidate
//          config (other data, augmentation, learning rate, ...: any change a user gates on).
//   seeds: every leg trains at each seed; leg A and leg B at seed s share initialisation, data
//          order and augmentation (Global.seed = s), so pair s differs only by the change.
//   runs:  OUT/runs/<leg>/seed-<s>/ holds each training's checkpoints, metrics.jsonl and
//          run.json (its summary and per-line results). A comparison started again on the same
//          OUT reuses every run whose run.json is there (an interrupted comparison resumes at the
//          first missing run) after checking that the configuration is the one OUT was made
//          with (OUT/compare.json); a changed key is refused, naming the key.
//   failures: a seed whose training fails (an error) or diverges (a non-finite loss) is
//          reported with its error and counted, never dropped. A failed or diverged candidate
//          seed makes the verdict REGRESSION (the change broke training there); a failed
//          baseline seed leaves that pair out of the statistics and is reported.
#ifndef OCR_TRAINING_COMPARE_H
#define OCR_TRAINING_COMPARE_H

#include <stdint.h>
#include <stdio.h>

#include "core/config.h"
#include "core/error.h"
#include "training/report.h"
#include "training/run_config.h"

#define COMPARE_MAX_SEEDS REPORT_MAX_SEEDS

typedef struct {
    const char *out_dir;
    // FP32 against AMP (candidate == NULL): the AMP dtypes ("float16", "bfloat16") and levels
    // ("O1", "O2"); none given: the config's Global.amp_dtype / amp_level, else float16 / O2.
    const char *const *dtypes, *const *levels;
    int n_dtypes, n_levels;
    // A baseline config against a candidate config: the candidate (validated like the baseline;
    // NULL: FP32 against AMP). Its runs are named "candidate", the baseline's "baseline".
    const OcrConfig *candidate;
    const char *candidate_path;
    int batch_max;          // --batch max: each leg at the largest batch its precision fits
    int batch_fixed;        // --batch N (0: the config's)
    int64_t memory;         // the budget for batch_max (bytes)
    int64_t max_steps;      // stop every run after this many iterations (0: the schedule)
    int n_seeds;            // 1..COMPARE_MAX_SEEDS
    uint64_t seeds[COMPARE_MAX_SEEDS];
    // One seed: the training noise that is not measured is assumed to have this seed-to-seed
    // standard deviation of accuracy (fraction; Global.compare_seed_sd). eval/seeds.h says how.
    double assumed_seed_sd;
    // The candidate's run k trains at seeds[k] + candidate_seed_offset (0: the same seed as the
    // baseline's run k). An offset makes the baseline-against-itself check of the verdict's
    // calibration (an A/A run: the same config at other seeds must not read as a regression).
    uint64_t candidate_seed_offset;
    FILE *progress;         // NULL: silent
    const char *command;    // the command line, for the report
    const char *config_path;
} CompareOptions;

// The seeds of `--seeds ARG` / Global.compare_seeds: "N" is N seeds starting at base_seed
// (base_seed, base_seed + 1, ...); "a,b,c" is that list. N < 1, N over COMPARE_MAX_SEEDS,
// anything that is not a non-negative integer, and a list with a repeated seed are
// OCR_ERR_INVALID_ARG naming `what` (the flag or key).
ocr_status_t compare_parse_seeds(const char *arg, uint64_t base_seed, const char *what, uint64_t *seeds, int *n);

// Runs the comparison (cfg/rc: the baseline, validated with RUN_NEED_TRAIN | RUN_NEED_EVAL) and
// fills rep (caller-allocated, zeroed; free with compare_report_free). Nothing is trained before
// every leg's config, the seeds and OUT's earlier configuration have been checked. Under
// mpirun every rank trains every run (data parallel); rank 0 writes run.json and the report.
// --batch max without --memory: on a GPU 90 % of its free memory; on the CPU OCR_ERR_INVALID_ARG
// (a budget must be named).
ocr_status_t compare_default_memory(const RunConfig *rc, int64_t *memory);

ocr_status_t compare_run(const OcrConfig *cfg, const RunConfig *rc, const CompareOptions *o, Report *rep);
void compare_report_free(Report *rep);

// Two trained models on the same eval lines (`ocrtrain eval --baseline`): both are scored line by
// line (in FP32, or under the config's AMP policy with with_amp), and the candidate is judged
// against the baseline per line (eval/paired.h: no training noise enters, the models are fixed;
// the question is whether these two models differ on lines like these). rep gets two runs
// ("baseline", "candidate") with one seed each and the paired verdict; report_exit_code tells
// PASS / REGRESSION / INCONCLUSIVE. cfg's Eval section and dictionary serve both models.
ocr_status_t compare_models(const OcrConfig *cfg, const RunConfig *rc, const char *baseline_weights,
                            const char *candidate_weights, int with_amp, FILE *progress, Report *rep);

#endif

// The FP32-vs-AMP comparison report: report.json (versioned schema, docs/REPORT.md),
// report.md and report.html (one self-contained file with inline SVG charts). The Report, its
// verdict and report_write: report.c; one writer per file: report_json.c, report_markdown.c,
// report_html.c (its charts: report_svg.c).
#ifndef OCR_TRAINING_REPORT_H
#define OCR_TRAINING_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "training/evaluate.h"
#include "training/trainer.h"
#include "core/error.h"
#include "eval/paired.h"
#include "eval/seeds.h"

#define REPORT_SCHEMA "ocrtrain-compare-report"
// 2: the verdict is paired per line with 95 % intervals (pass / regression / inconclusive).
// 3: runs at several seeds; the verdict includes training noise (eval/seeds.h).
// 4: exact and spaces-ignored accuracy beside the configured one; the general set (EvalGeneral):
//    its scores per seed, its seed-aware verdicts, the pretrained start on both sets.
#define REPORT_SCHEMA_VERSION 4
#define REPORT_MAX_RUNS 8
#define REPORT_MAX_SEEDS 32

// Exit codes of `ocrtrain compare` (and every gate built on the report).
#define REPORT_EXIT_PASS 0
#define REPORT_EXIT_REGRESSION 3
#define REPORT_EXIT_INCONCLUSIVE 4

// An AMP run against the baseline on the lines both scored (eval/paired.h).
typedef struct {
    int has;                       // per-line results were paired
    int64_t lines;                 // lines scored by both runs
    PairedTable table;
    double acc_delta, mcnemar_p;
    PairedInterval acc_ci;         // Newcombe hybrid score, 95 %
    paired_verdict_t acc_verdict;
    int64_t acc_lines_needed;      // -1: no eval set size makes it conclusive
    double cer_delta;
    PairedInterval cer_ci;         // paired bootstrap percentile, 95 %
    paired_verdict_t cer_verdict;
    int64_t cer_lines_needed;
    paired_verdict_t verdict;      // REGRESSION if either metric regresses, else INCONCLUSIVE if either
                                   // is, else PASS (BETTER counts as PASS: not a regression)
} ReportPaired;

// One training of a leg at one seed.
typedef enum { REPORT_SEED_OK = 0, REPORT_SEED_DIVERGED, REPORT_SEED_FAILED } report_seed_status_t;
typedef struct {
    uint64_t seed;
    report_seed_status_t status;
    char error[512];          // why it failed or diverged ("" when ok)
    int reused;               // finished by an earlier invocation on the same --out (run.json)
    double acc, cer, norm_edit_dis;  // on the eval lines (FAILED: not scored)
    double acc_exact, acc_nospace;   // exact match; spaces ignored (evaluate.h)
    int has_general;                 // the general set (EvalGeneral) was scored
    double general_acc, general_acc_exact, general_acc_nospace, general_cer;
    int64_t general_lines;
    double samples_per_s, final_loss;
    int64_t peak_bytes, skipped_steps, recomputed_steps, steps, eval_lines;
} ReportSeedRun;

// A leg against the baseline over the seeds both trained (eval/seeds.h): the change's effect
// with an interval that holds training noise (between seeds) and eval-line sampling.
typedef struct {
    int has;                    // res holds the statistics of `pairs` seed pairs
    int pairs;                  // seeds where the baseline trained and this leg finished (ok or diverged)
    int pair_seed[REPORT_MAX_SEEDS];  // their indices into the comparison's seeds
    int failed_runs;            // this leg's seeds that FAILED (an error) or DIVERGED
    int failed_baseline;        // seeds left out because the baseline's run failed or diverged
    SeedsResult res;            // the statistics (per-seed deltas, intervals, components, needs)
    paired_verdict_t verdict;   // res.verdict, or REGRESSION when a run of this leg failed or diverged
    char reason[512];           // in words, when a failure decided the verdict or nothing could be paired
} ReportSeeded;

typedef struct {
    char name[32];       // "fp32", "fp16-o2", "bf16-o2", "fp16-o1"; "baseline", "candidate"
    double base_lr;      // the schedule's peak rate after batch scaling
    TrainResult r;       // the first seed's training (charts, memory, throughput)
    EvalPaths eval_paths;  // how the final evaluation scored the Eval lines
    ReportPaired paired;   // runs[i > 0] against runs[0], per line at the first seed both finished
    int n_seeds;
    ReportSeedRun seeds[REPORT_MAX_SEEDS];  // every seed, in the comparison's order
    ReportSeeded seeded;   // runs[i > 0] against runs[0] over the seeds: the verdict
    // The general set (Report.has_general), runs[i > 0] against runs[0] over the seeds, counting
    // exact matches / matches with spaces ignored as correct (CER is the same in both). What the
    // change does to forgetting; it does not enter the exit code.
    EvalPaths general_paths;
    ReportSeeded general_exact, general_nospace;
} ReportRun;

typedef struct {
    const char *config_path;
    char command[2048];
    char created_utc[32];
    const char *version;
    double tolerance;      // Global.accuracy_tolerance (fraction)
    double cer_tolerance;  // Global.cer_tolerance (fraction)
    uint64_t bootstrap_seed;  // the CER bootstrap's seed (Global.seed)
    int batch_max;         // --batch max
    int64_t memory_bytes;  // the budget --batch max planned for (0: none)
    int64_t epochs;
    uint64_t seed;
    int threads;
    char device[32];
    // model and data
    char algorithm[32], backbone[64];
    int64_t params;
    int in_channels, height, width, seq_len, classes;
    int64_t train_samples, eval_samples;
    int n_runs;
    ReportRun runs[REPORT_MAX_RUNS];  // runs[0] is the baseline (FP32, or the baseline config)
    int candidate_mode;               // 1: a baseline config against a candidate config
    char candidate_path[1024];
    int n_seeds;
    uint64_t seeds[REPORT_MAX_SEEDS];
    double assumed_seed_sd;
    // The pretrained weights every run started from (Global.pretrained_model), scored in FP32 on
    // the same eval lines before any training: what fine-tuning changed. has_start 0: no
    // pretrained model (training from scratch).
    int has_start;
    char start_weights[1024];
    double start_acc, start_cer, start_norm_edit_dis;
    double start_acc_exact, start_acc_nospace;
    int64_t start_samples;
    // The general set (EvalGeneral): every run scored on it as on Eval (general_samples lines);
    // with has_start, the pretrained weights' scores on it too.
    int has_general;
    int64_t general_samples;
    double start_general_acc, start_general_acc_exact, start_general_acc_nospace, start_general_cer;
} Report;

// Pairs the per-line results of the baseline and a run (the same n lines, in the same order):
// the table, both deltas with their intervals and verdicts, the lines-needed estimates.
// Lines that either run did not score are left out of the pair (they are the same lines for
// both: unreadable images). OCR_ERR_OOM only.
ocr_status_t report_pair(ReportPaired *out, const EvalLine *base, const EvalLine *run, int64_t n, double acc_tol,
                         double cer_tol, uint64_t seed);
// Judges every leg i > 0 against the baseline once the runs are done: lines[i][k] holds leg i's
// per-line results at seed k (rep->runs[i].seeds[k]; ignored for a FAILED run). Fills each
// run's seeded verdict (eval/seeds.h over the seeds where both finished, tolerances and the
// one-seed allowance from rep) and its per-line pairing at the first such seed. OCR_ERR_OOM only.
ocr_status_t report_judge(Report *rep, EvalLine *lines[][REPORT_MAX_SEEDS], int64_t n);
// The same for the general set (lines: the EvalGeneral lines), into each run's general_exact and
// general_nospace. OCR_ERR_OOM only.
ocr_status_t report_judge_general(Report *rep, EvalLine *lines[][REPORT_MAX_SEEDS], int64_t n);
// Run i's mean over its finished seeds of: target accuracy (exact, spaces ignored) and general
// accuracy (exact, spaces ignored). 0 when no seed finished.
int report_run_means(const Report *rep, int i, double *acc_exact, double *acc_nospace, double *general_exact,
                     double *general_nospace);
// The gain and the forgetting in one plain sentence per run (exact match, mean over seeds, in
// points from the pretrained weights when there are some): "fp32: target set (Eval) +12.3 points,
// general text (EvalGeneral) -2.1 points." "" without a general set.
void report_forgetting_line(const Report *rep, int i, char *buf, size_t cap);

// The verdict of run i (> 0) against the baseline: the seeded verdict (REGRESSION when a run of
// the leg failed or diverged); INCONCLUSIVE when nothing could be paired.
paired_verdict_t report_run_verdict(const Report *rep, int i);
// REPORT_EXIT_REGRESSION when some run regresses, else REPORT_EXIT_INCONCLUSIVE when some run is
// inconclusive, else REPORT_EXIT_PASS.
int report_exit_code(const Report *rep);
// The largest lines-needed estimate over the inconclusive runs and both metrics, at the seeds
// run (-1: none known).
int64_t report_lines_needed(const Report *rep);
// The largest seeds-needed estimate over the inconclusive runs and both metrics, at the lines
// scored (-1: none known).
int64_t report_seeds_needed(const Report *rep);

// The verdict in one sentence (what report.md and report.html lead with), into buf (cap bytes).
void report_verdict_line(const Report *rep, char *buf, size_t cap);

// The three files into dir (atomically each).
ocr_status_t report_write(const Report *rep, const char *dir);
// report.json's text (caller frees).
char *report_json(const Report *rep);

// Machine description for the report (hostname, OS, CPU model, cores, memory).
typedef struct {
    char hostname[128], os[256], cpu_model[256];
    int cpu_cores;
    int64_t memory_bytes;
    int gpus;
    char backends[64];
    char compiler[128];
    char build_type[32];
} MachineInfo;
void report_machine_info(MachineInfo *mi);

// Set once by main (the CMake project version).
void training_set_version(const char *version);
const char *training_version(void);

#endif

// The FP32-vs-AMP comparison report: report.json (versioned schema, docs/REPORT.md),
// report.md and report.html (one self-contained file, inline SVG charts drawn here).
#ifndef OCR_TRAINING_REPORT_H
#define OCR_TRAINING_REPORT_H

#include <stdint.h>

#include "training/evaluate.h"
#include "training/trainer.h"
#include "core/error.h"
#include "eval/paired.h"

#define REPORT_SCHEMA "ocrtrain-compare-report"
// 2: the verdict is paired per line with 95 % intervals (pass / regression / inconclusive).
#define REPORT_SCHEMA_VERSION 2
#define REPORT_MAX_RUNS 8

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

typedef struct {
    char name[32];       // "fp32", "fp16-o2", "bf16-o2", "fp16-o1"
    double base_lr;      // the schedule's peak rate after batch scaling
    TrainResult r;
    EvalPaths eval_paths;  // how the final evaluation scored the Eval lines
    ReportPaired paired;   // runs[i > 0] against runs[0]
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
    ReportRun runs[REPORT_MAX_RUNS];  // runs[0] is the FP32 baseline
    // The pretrained weights every run started from (Global.pretrained_model), scored in FP32 on
    // the same eval lines before any training: what fine-tuning changed. has_start 0: no
    // pretrained model (training from scratch).
    int has_start;
    char start_weights[1024];
    double start_acc, start_cer, start_norm_edit_dis;
    int64_t start_samples;
} Report;

// Pairs the per-line results of the baseline and a run (the same n lines, in the same order):
// the table, both deltas with their intervals and verdicts, the lines-needed estimates.
// Lines that either run did not score are left out of the pair (they are the same lines for
// both: unreadable images). OCR_ERR_OOM only.
ocr_status_t report_pair(ReportPaired *out, const EvalLine *base, const EvalLine *run, int64_t n, double acc_tol,
                         double cer_tol, uint64_t seed);
// The verdict of run i (> 0) against the baseline; INCONCLUSIVE when it has no paired results.
paired_verdict_t report_run_verdict(const Report *rep, int i);
// REPORT_EXIT_REGRESSION when some run regresses, else REPORT_EXIT_INCONCLUSIVE when some run is
// inconclusive, else REPORT_EXIT_PASS.
int report_exit_code(const Report *rep);
// The largest lines-needed estimate over the inconclusive runs and both metrics (-1: none known).
int64_t report_lines_needed(const Report *rep);

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

// The FP32-vs-AMP comparison report: report.json (versioned schema, docs/REPORT.md),
// report.md and report.html (one self-contained file, inline SVG charts drawn here).
#ifndef OCR_APP_REPORT_H
#define OCR_APP_REPORT_H

#include <stdint.h>

#include "app/trainer.h"
#include "core/error.h"

#define REPORT_SCHEMA "ocrtrain-compare-report"
#define REPORT_SCHEMA_VERSION 1
#define REPORT_MAX_RUNS 8

typedef struct {
    char name[32];       // "fp32", "fp16-o2", "bf16-o2", "fp16-o1"
    double base_lr;      // the schedule's peak rate after batch scaling
    TrainResult r;
} ReportRun;

typedef struct {
    const char *config_path;
    char command[2048];
    char created_utc[32];
    const char *version;
    double tolerance;
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
} Report;

// Verdict of one AMP run against the baseline: |accuracy delta| <= tolerance.
int report_run_within_tolerance(const Report *rep, int i);
// 1 when some run is outside the tolerance (compare exits 3).
int report_regression(const Report *rep);

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
void app_set_version(const char *version);
const char *app_version(void);

#endif

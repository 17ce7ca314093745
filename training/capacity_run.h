// `ocrtrain capacity`: the largest training batch of every precision for a budget, optionally
// checked against one real training step per precision (training/capacity.h plans one).
#ifndef OCR_TRAINING_CAPACITY_RUN_H
#define OCR_TRAINING_CAPACITY_RUN_H

#include <stdint.h>

#include "core/config.h"
#include "core/error.h"
#include "training/capacity.h"

// The budget a GPU gives when none is asked for: its free memory now (device: a resolved name,
// "cuda:0"). 0 on the CPU, and in a build without CUDA.
int64_t capacity_default_budget(const char *device);

// A plan off the real step's peak by more than this fraction is a planner bug.
#define CAPACITY_VERIFY_TOLERANCE 0.05

typedef struct {
    CapacityPrecision cp[CAPACITY_PRECISIONS];  // in capacity_precision_name order
    int verified;                               // the real steps ran
    int batch[CAPACITY_PRECISIONS];             // the batch of each real step: min(max_batch, verify), at least 1
    int64_t planned[CAPACITY_PRECISIONS];       // the plan for that batch
    int64_t measured[CAPACITY_PRECISIONS];      // what the real step allocated at its peak
    int disagree;                               // some plan is off its step by more than the tolerance
} CapacityRun;

// Plans every precision for `memory` bytes; with verify > 0, runs one real step per precision
// at min(max_batch, verify) (at least 1) and compares.
ocr_status_t capacity_run(const OcrConfig *cfg, int64_t memory, int verify, CapacityRun *out);

#endif

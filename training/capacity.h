// Batch-size planning: how many samples of the config's input size fit in a memory budget
// for each precision (fp32, fp16-o1, fp16-o2, bf16-o2).
//
// Training memory at batch B is fixed + B · per_sample, where
//   fixed      = parameters (in their working dtype) + gradients + BN statistics + optimizer
//                moments (2 × f32) + O2 masters (f32) + O1 cast cache + the AMP BN snapshot +
//                the batch-independent part of activations and op scratch;
//                the Eval loader's batch buffers;
//   per_sample = activations (the model's exact plan: the normalised batch, saved tensors, their
//                gradients, dlogits) + the input batch (the Train loader's prefetch + 1 uint8
//                batch buffers, which the step reads in place) + the f32 loss logits and their
//                gradient when the network's logits are low precision + op scratch.
// Everything but op scratch comes from the plan (ocr_model_plan_u8, the tables and the loader
// settings; nothing is allocated for it). The ops size their scratch (im2col buffers, f32
// views of f16 tensors) themselves, so the planner measures it with probe steps at
// CAPACITY_PROBES batches and takes the line above every probe: the steepest slope between
// neighbouring probes (never below 0), through the highest point. Scratch need not grow
// monotonically: a kernel may take another path on a larger map (bf16 convolutions emulated on
// an AVX2-only CPU measured 5.2 MiB at batch 4 and 3.3 MiB at 16 on a small network, growing again
// from there), and a line through two probes alone would then under-plan the batches between
// them and beyond. capacity_measure runs a real step and the tests check the total.
#ifndef OCR_TRAINING_CAPACITY_H
#define OCR_TRAINING_CAPACITY_H

#include <stdint.h>

#include "training/run_config.h"
#include "core/config.h"
#include "core/memory.h"

#define CAPACITY_PRECISIONS 4
// The batches of the scratch probes (small enough to be cheap, large enough to leave the 1 MiB
// minimum scratch block of core/memory.c behind), in increasing order.
#define CAPACITY_PROBES {4, 16, 32}
#define CAPACITY_PROBE_COUNT 3

typedef struct {
    char name[16];              // "fp32", "fp16-o1", "fp16-o2", "bf16-o2"
    int64_t fixed_bytes;
    int64_t bytes_per_sample;
    int64_t max_batch;          // for the budget (0 when not even one sample fits)
    // breakdown (for --json and the report)
    int64_t fixed_by_category[OCR_MEM_CATEGORY_COUNT];
    int64_t per_sample_by_category[OCR_MEM_CATEGORY_COUNT];
    int channels, height, width;  // the planned input (the largest scale under MultiScaleSampler)
    // Distillation configs (training/distill.h): the frozen networks' (the teacher's) weights with
    // their BN statistics and O1 cast caches, and their forward passes' activation arenas (fixed
    // part and per sample); the networks trained beside the scored one (mutual learning). In
    // fixed_bytes and bytes_per_sample, not in the categories above (the trained network's).
    int teacher_networks, peer_networks;
    int64_t teacher_weights_bytes, teacher_activations_fixed, teacher_activations_per_sample;
    int64_t peer_fixed_bytes, peer_per_sample;
} CapacityPrecision;

// The config overrides of a precision name ("Global.use_amp=true" ...); NULL-terminated,
// static. NULL for an unknown name.
const char *const *capacity_precision_overrides(const char *name);
// "fp32", "fp16-o1", "fp16-o2", "bf16-o2".
const char *capacity_precision_name(int i);

// Plans one precision for the config's training input (Train RecResizeImg H×W, or the largest
// scale of a MultiScaleSampler) and budget.
// budget_bytes 0: max_batch is left 0.
ocr_status_t capacity_plan(const OcrConfig *cfg, const char *precision, int64_t budget_bytes, CapacityPrecision *out);

// Runs one real training step at `batch` for a precision and returns its peak memory
// (total and by category) in *measured.
ocr_status_t capacity_measure(const OcrConfig *cfg, const char *precision, int batch, OcrMemStats *measured);

// The planned total for a batch: fixed + batch · per_sample.
static inline int64_t capacity_bytes(const CapacityPrecision *p, int64_t batch) {
    return p->fixed_bytes + batch * p->bytes_per_sample;
}

#endif

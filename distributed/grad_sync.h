// Data-parallel gradient synchronisation for one model: the gradients are cut into buckets of
// at most Distributed.bucket_mb (consecutive parameters of one dtype, in backward order: the
// head's last parameter first), and a bucket's all-reduce starts the moment the backward has
// finished every op owning one of its parameters (ocr_model_set_grad_ready_hook), so the
// communication runs while the earlier layers' backward still computes. Each rank's loss
// gradient is pre-divided by the world size (the step's CTC/MultiLoss scale), so the summed
// gradients are the batch mean over all N·B samples: N ranks of batch B step exactly like one
// process of batch N·B would, in the gradient dtype (f16/bf16 under O2: half the bytes of f32).
//
// Buckets are started in the same order on every rank (the backward's order is a property of
// the network), which MPI and NCCL require of collectives; a bucket whose parameters no op
// reports (none today) starts when the backward ends.
#ifndef OCR_DISTRIBUTED_GRAD_SYNC_H
#define OCR_DISTRIBUTED_GRAD_SYNC_H

#include <stdint.h>

#include "distributed/dist.h"
#include "models/model.h"

typedef struct {
    int first, last;       // parameter indices (first <= last), contiguous in the gradient buffer
    void *data;            // the gradient bytes of parameters first..last (padding included)
    int64_t count;         // elements of dtype
    ocr_dtype_t dtype;
    int n_params, ready;   // parameters in it; those whose op has finished its backward
    int started;
    OcrDistRequest req;
    double t_start, t_done;
} GradBucket;

// What the all-reduces of the steps so far cost (rank-local).
typedef struct {
    int64_t steps;
    int64_t bytes;              // payload bytes started (per step: bytes / steps)
    int64_t calls;
    double comm_seconds;        // per step: union of [first start, last completion] of its buckets
    double exposed_seconds;     // per step: after the backward ended, waiting for the last bucket
    double backward_seconds;    // per step: the backward itself (hook installed to its end)
    int64_t early_buckets;      // buckets started from the hook, before the backward ended
} GradSyncStats;

typedef struct {
    OcrDist *dist;
    OcrModel *m;
    int world;
    GradBucket *buckets;
    int n_buckets;
    int *param_bucket;     // parameter -> bucket (-1: none)
    int *op_param_start;   // op -> its parameters: op_params[op_param_start[op] .. op_param_start[op + 1])
    int *op_params;
    int n_ops;
    int started_in_order;  // buckets started so far this step
    double t_backward_start, t_first_start;
    ocr_status_t error;    // the first failure inside the hook (reported by grad_sync_finish)
    GradSyncStats stats;
} GradSync;

// bucket_bytes >= 1. The gradient buffer must exist (ocr_params_alloc_grads) and keep its
// parameters' dtypes from here on (attach the AMP engine first).
ocr_status_t grad_sync_init(GradSync *g, OcrDist *dist, OcrModel *m, int64_t bucket_bytes);
void grad_sync_free(GradSync *g);
// Before the backward: installs the hook and resets the buckets.
void grad_sync_begin(GradSync *g);
// After the backward: starts what is left, waits for every bucket (Distributed.timeout_s),
// removes the hook. The gradients are then the sums over the ranks.
ocr_status_t grad_sync_finish(GradSync *g);
// Bucket bytes of the largest bucket and the number of buckets (reports).
int64_t grad_sync_total_bytes(const GradSync *g);

#endif

// One training step on a prepared batch, shared by the trainer and the capacity probe:
//   forward (under the AMP policy) → f32 logits → CTC loss and gradient × loss scale →
//   backward → fused unscale + finite check → clip → Adam (masters under O2), skipped on
//   overflow → scaler update.
#ifndef OCR_TRAINING_STEP_H
#define OCR_TRAINING_STEP_H

#include <stdint.h>

#include "amp/engine.h"
#include "training/feed.h"
#include "distributed/grad_sync.h"
#include "training/optim.h"
#include "core/tensor.h"
#include "models/model.h"

typedef struct StepDevice StepDevice;  // the GPU step's state (training/step.c)

typedef struct {
    OcrModel *m;
    AmpEngine *amp;
    Optimizer *optim;
    int capacity;  // largest batch
    int focal;     // Loss.use_focal_loss
    OcrTensor dl32, logits_buf;
    float *losses, *clip;
    int32_t *infeasible;
    OcrTensor *grad_views;
    OcrTensor **grads;
    StepDevice *dev;  // NULL on the CPU (step_device_init)
    // Keep an f32 copy of each step's logits for the caller (Global.cal_metric_during_train):
    // the model's own logits do not outlive the backward. Set keep_logits before the first step.
    int keep_logits;
    OcrTensor kept_logits_buf, kept_logits;  // buffer (grows) and a (B, T, classes) view of it
    OcrTensor gtc_loss;  // MultiHead: the guidance loss's mean (1 f32 on the model's device)
    // Data parallelism (NULL: one process): the loss gradient is divided by the world size, the
    // gradients are all-reduced in buckets during the backward, the loss and counters are
    // averaged, and the found-inf flag is the maximum over the ranks (every rank skips alike).
    GradSync *sync;
} StepCtx;

typedef struct {
    double loss;         // PaddleOCR's reduction: batch mean of the per-sample NLL
    double grad_norm;    // of the true (unscaled) gradients; NaN when skipped
    float scale;         // the loss scale this step used
    int skipped;         // inf/NaN gradients: no update
    int infeasible;      // samples whose label needs more frames than the sequence has (loss zeroed)
    // MultiHead (MultiLoss): loss = loss_ctc + loss_gtc, each already multiplied by its weight
    // (weight_1, weight_2) as PaddleOCR logs CTCLoss and NRTRLoss; 0 for a CTC head.
    double loss_ctc, loss_gtc;
} StepOutcome;

ocr_status_t step_ctx_init(StepCtx *s, OcrModel *m, AmpEngine *amp, Optimizer *optim, int capacity, int focal);
void step_ctx_free(StepCtx *s);

// images (B, H, W, C) f32 normalised; labels (B, max_len) zero-padded; lengths (B). lr: this
// iteration's rate (per-parameter multipliers are applied inside).
ocr_status_t step_run(StepCtx *s, const OcrTensor *images, int32_t *labels, int32_t *lengths, int max_len, double lr,
                      StepOutcome *out);

// The last step's logits (B, T, classes) f32 on the model's device when keep_logits is set,
// else NULL. Valid until the next step.
const OcrTensor *step_kept_logits(const StepCtx *s);

// ---- the GPU step --------------------------------------------------------------------------------
// On a CUDA device a step is only enqueued: the model's device gets a compute stream of its own
// (made current for the device), the loss scale, found-inf flag, Adam's counter and the step's
// learning rate live in device memory (kernels/cuda/train_step.h), and the host reads each
// step's outcome (loss, found-inf, scale, norm, per-parameter flags) through a pinned buffer and
// an event, one step later. With cuda_graph on and a step shape (batch, height, width) seen on
// the previous (eager) step, the whole step (forward, CTC, backward, fused optimizer, scale
// update, BN restore) is captured once as a CUDA graph and replayed while the shape stays; a new
// shape runs eagerly (and is captured on its second step). Graphs need the stochastic-rounding
// seed and dropout offsets from device memory, which train_step.h provides; activation
// statistics (Global.amp_activation_stats_every) keep a run eager.
typedef struct {
    int cuda_graph;        // Global.cuda_graph
    int64_t max_updates;   // the schedule's iterations (bias-correction table; later steps still work)
} StepDeviceOptions;

typedef enum { STEP_EAGER = 0, STEP_CAPTURED, STEP_REPLAYED } step_mode_t;

// After step_ctx_init, with the model, the AMP engine and the optimizer on one CUDA device.
// OCR_ERR_UNSUPPORTED without CUDA in the build.
ocr_status_t step_device_init(StepCtx *s, const StepDeviceOptions *o);
// Data parallelism on the GPU step (after step_device_init): the gradient buckets all-reduce
// with NCCL on device buffers during the backward, the loss gradient is divided by the world
// size and the reported loss is the mean over the ranks. CUDA graphs are turned off.
// OCR_ERR_UNSUPPORTED when the transport is not NCCL in a world of more than one.
ocr_status_t step_device_attach_sync(StepCtx *s, GradSync *g);
// Enqueues one step on the device (nothing waits for it). At most two steps are in flight:
// a third waits for the oldest one's readback first (collect it with step_collect before).
ocr_status_t step_run_device(StepCtx *s, const FeedDeviceBatch *b, double lr, step_mode_t *mode);
// Steps enqueued and not yet collected.
int step_pending(const StepCtx *s);
// Waits for the oldest pending step and returns its outcome; records it in the AMP engine
// (statistics, skip bookkeeping, scaler mirror) and the optimizer's update counter.
ocr_status_t step_collect(StepCtx *s, StepOutcome *out);
// The captured graph refers to the activation arena and scratch of its shape: anything that
// re-plans the model (an evaluation pass) must drop it; the next steps capture it again.
void step_invalidate_graph(StepCtx *s);
// Graph captures and replays so far (reports, tests).
void step_graph_counts(const StepCtx *s, int64_t *captures, int64_t *replays);

#endif

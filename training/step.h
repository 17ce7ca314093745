// One training step on a batch, the same on every device; the trainer, the capacity probe and the
// benchmarks run it:
//   the model's guidance state from the batch (MultiHead) → forward of the uint8 batch, normalised
//   and padded on the model's device (models/model.h, ocr_model_forward_u8) under the AMP policy
//   → f32 logits → CTC loss (and the guidance loss) with its gradient × loss scale ÷ world size →
//   backward (gradient buckets all-reduced during it under data parallelism) → unscale + finite
//   check → clip → Adam (masters under O2), skipped on overflow → scaler update.
//
// A step is enqueued, and its outcome collected later (step_enqueue, step_collect; at most
// STEP_MAX_IN_FLIGHT steps apart), on every device. What differs is who drives the update:
// - The CPU runs every op when it is called: the host drives the update (amp/engine.h) and the
//   outcome is known when step_enqueue returns; step_collect hands it out without waiting.
// - A GPU only enqueues (kernels/backend.h, "the device-resident training step"): the loss
//   scale, found-inf flag, Adam's counter and the step's learning rate live in device memory,
//   the model's device gets a compute stream of its own (made current for the device), and the
//   host reads each step's outcome (loss, found-inf, scale, norm, per-parameter flags) through a
//   page-locked buffer and an event when it collects it. With cuda_graph on and a step shape
//   (batch, height, width) seen on the previous (eager) step, the whole step (forward, CTC,
//   backward, fused optimizer, scale update, BN restore) is captured once as a graph and
//   replayed while the shape stays; a new shape runs eagerly (and is captured on its second
//   step). Graphs take the stochastic-rounding seed and dropout offsets from device memory;
//   activation statistics (Global.amp_activation_stats_every) keep a run eager.
// A caller writes one loop for both: keep step_in_flight(s) steps in flight, collect the oldest.
//
// Overflowed steps (Global.amp_overflow, docs/AMP.md "Overflowed steps: recompute or skip"): in
// recompute mode a step whose gradients overflowed runs again inside step_enqueue, on the same
// batch at the backed-off scale, until they are finite (amp_engine_can_recompute), and only then
// updates; each attempt leaves the model, the optimizer and the scaler as a run started at the
// lowered scale would have them (BN statistics restored, the dropout counter set back, the same
// stochastic-rounding seed). On a GPU step_enqueue then waits for each step's readback (the
// outcome decides whether the batch runs again), so the host no longer prepares the next batch
// while the device computes. Skip mode (PaddleOCR's and PyTorch's) skips the update instead.
#ifndef OCR_TRAINING_STEP_H
#define OCR_TRAINING_STEP_H

#include <stdint.h>

#include "amp/engine.h"
#include "training/feed.h"
#include "distributed/grad_sync.h"
#include "training/optim.h"
#include "core/tensor.h"
#include "models/model.h"

// Steps enqueued and not yet collected, at most.
#define STEP_MAX_IN_FLIGHT 2

typedef struct StepDevice StepDevice;  // the device-resident step's state (training/step.c)

typedef struct {
    double loss;         // PaddleOCR's reduction: batch mean of the per-sample NLL
    double grad_norm;    // of the true (unscaled) gradients; NaN when skipped
    float scale;         // the loss scale this step used
    int skipped;         // inf/NaN gradients: no update
    int overflow_layer;  // skipped: the op index of the first layer with inf/NaN gradients (-1: unknown)
    int infeasible;      // samples whose label needs more frames than the sequence has (loss zeroed)
    // MultiHead (MultiLoss): loss = loss_ctc + loss_gtc, each already multiplied by its weight
    // (weight_1, weight_2) as PaddleOCR logs CTCLoss and NRTRLoss; 0 for a CTC head.
    double loss_ctc, loss_gtc;
    // An extra loss (distillation, training/distill.h): its weighted sum, included in loss.
    double loss_distill;
    // Recompute mode: overflowed attempts of this step that ran again at a lower scale, their
    // wall time (the host's, up to each attempt's outcome), and the first one's first layer with
    // inf/NaN gradients (-1: none or unknown).
    int recomputed;
    double recompute_seconds;
    int recompute_layer;
} StepOutcome;

typedef struct StepCtx StepCtx;

// An extra loss over the step's outputs (distillation, training/distill.h). fn runs after the CTC
// loss wrote its f32 gradient dl32 (× grad_scale; before it is rounded or scaled into the
// model's dlogits) and the guidance loss its gradient, before the backward: it adds the gradients
// of its terms, each × its weight × grad_scale, into dl32 and (through step_add_grad) into the
// guidance dlogits, and returns their weighted sum in *loss (host). grad_scale is the CPU's loss
// scale over the world size, 1/world on a GPU (whose scale is applied on the device).
typedef struct {
    ocr_status_t (*fn)(void *user, StepCtx *s, const FeedDeviceBatch *b, const OcrTensor *logits, OcrTensor *dl32,
                       float grad_scale, double *loss);
    void *user;
} StepExtraLoss;

struct StepCtx {
    OcrModel *m;
    AmpEngine *amp;
    Optimizer *optim;
    int capacity;  // largest batch
    int focal;     // Loss.use_focal_loss
    OcrTensor dl32, logits_buf;
    float *losses, *clip;  // the CPU step's per-sample losses (capacity) and clip factors (per parameter)
    int32_t *infeasible;
    OcrTensor *grad_views;
    OcrTensor **grads;
    StepDevice *dev;  // the device-resident step (step_device_init); NULL on the CPU
    // Keep an f32 copy of each step's logits for the caller (Global.cal_metric_during_train):
    // the model's own logits do not outlive the backward. Set keep_logits before the first step.
    int keep_logits;
    OcrTensor kept_logits_buf, kept_logits;  // buffer (grows) and a (B, T, classes) view of it
    OcrTensor gtc_loss;  // MultiHead: the guidance loss's mean (1 f32 on the model's device)
    // Data parallelism (NULL: one process; step_attach_sync): the loss gradient is divided by the
    // world size, the gradients are all-reduced in buckets during the backward, the loss and
    // counters are averaged, and the found-inf flag is the maximum over the ranks (every rank
    // skips alike).
    GradSync *sync;
    // Steps in flight, by slot: the next slot, how many are pending, the outcomes the host
    // already knows (the CPU's) and the ranks' summed guidance losses (a GPU's, read at once).
    int slot_next, npend;
    // The CPU step's recompute loop: the attempt being run (0: the first) and host_update's verdict
    // that it overflowed and runs again.
    int attempt, retry;
    StepOutcome done[STEP_MAX_IN_FLIGHT];
    double gtc_sum[STEP_MAX_IN_FLIGHT];
    // The extra loss (set before step_device_init; a GPU then runs eagerly), its value this step
    // (the CPU's) and per readback slot (a GPU's), and the scratch of step_add_grad.
    StepExtraLoss extra;
    double distill_cur, distill_sum[STEP_MAX_IN_FLIGHT];
    double lr_cur;  // the learning rate of the step being run (the extra loss's own updates read it)
    OcrTensor extra_tmp;
};

ocr_status_t step_ctx_init(StepCtx *s, OcrModel *m, AmpEngine *amp, Optimizer *optim, int capacity, int focal);
void step_ctx_free(StepCtx *s);

// ---- the device-resident step (GPUs) ---------------------------------------------------------------
typedef struct {
    int cuda_graph;        // Global.cuda_graph
    int64_t max_updates;   // the schedule's iterations (bias-correction table; later steps still work)
} StepDeviceOptions;

typedef enum { STEP_EAGER = 0, STEP_CAPTURED, STEP_REPLAYED } step_mode_t;

// After step_ctx_init, with the model, the AMP engine and the optimizer on one GPU device
// (ocr_backend_is_async): the device state, the compute stream and the readback buffers.
// OCR_ERR_UNSUPPORTED without a GPU backend in the build; OCR_ERR_INVALID_ARG for a CPU model
// (whose step needs no set-up).
ocr_status_t step_device_init(StepCtx *s, const StepDeviceOptions *o);
// The captured graph refers to the activation arena and scratch of its shape: anything that
// re-plans the model (an evaluation pass) must drop it; the next steps capture it again.
void step_invalidate_graph(StepCtx *s);
// Graph captures and replays so far (reports, tests); 0 on the CPU.
void step_graph_counts(const StepCtx *s, int64_t *captures, int64_t *replays);

// ---- the CPU's host-driven update, shared with a network trained beside (training/distill.c) -----------
// Every rank decides alike whether to skip: *skipped becomes the maximum of the ranks' flags (a
// reduction over more than two ranks need not round alike everywhere); a rank that skips only
// because another found inf/NaN records it in amp. sync NULL: nothing to do. `what` names the
// collective in a timeout message.
ocr_status_t step_world_skip(GradSync *sync, AmpEngine *amp, int *skipped, const char *what);
// Clip factors (Optimizer.clip_norm / clip_norm_global) and Adam over every parameter that is not
// frozen, then the optimizer's update count; views, grads and clip have one entry per parameter
// (scratch). Returns the global norm of the true gradients.
double step_adam_update(Optimizer *o, AmpEngine *amp, OcrParamTable *params, double lr, OcrTensor *views,
                        OcrTensor **grads, float *clip);

// ---- every device -----------------------------------------------------------------------------------
// Data parallelism (after step_device_init on a GPU): the step divides the loss gradient by the
// world size, all-reduces the gradient buckets during the backward and reports the mean loss over
// the ranks. On a GPU the buckets are all-reduced with NCCL on device buffers and CUDA graphs are
// turned off; OCR_ERR_UNSUPPORTED there when the transport is not NCCL in a world of more than one.
ocr_status_t step_attach_sync(StepCtx *s, GradSync *g);
// The steps a loop keeps in flight: 2 on a GPU (the host prepares and uploads batch n+1 while
// the device computes step n), 1 on the CPU (a step has run when step_enqueue returns, so a
// second one in flight gains nothing; STEP_MAX_IN_FLIGHT works there too).
int step_in_flight(const StepCtx *s);
// Enqueues one step on the batch (b: feed_upload's, on the model's device; its host_* arrays
// feed the guidance branch). lr: this iteration's rate (per-parameter multipliers are applied
// inside). At most STEP_MAX_IN_FLIGHT steps pending: collect one first. *mode: how a GPU ran it.
ocr_status_t step_enqueue(StepCtx *s, const FeedDeviceBatch *b, double lr, step_mode_t *mode);
// Steps enqueued and not yet collected.
int step_pending(const StepCtx *s);
// The outcome of the oldest pending step. On a GPU it waits for the step's readback and records
// it in the AMP engine (statistics, skip bookkeeping, scaler mirror) and the optimizer's update
// counter; the CPU's step did that when it ran.
ocr_status_t step_collect(StepCtx *s, StepOutcome *out);
// step_enqueue and step_collect at once, with nothing else in flight (probes, tests, benchmarks).
ocr_status_t step_run(StepCtx *s, const FeedDeviceBatch *b, double lr, StepOutcome *out);

// The last enqueued step's logits (B, T, classes) f32 on the model's device when keep_logits is
// set, else NULL. Valid until the next step (on a GPU, once the device got there).
const OcrTensor *step_kept_logits(const StepCtx *s);
// dst += g32 (an f32 gradient already × weight × grad_scale) × the device-held loss scale on a
// GPU, rounded into dst's dtype: what an extra loss adds to a gradient the step does not scale
// after it (the guidance dlogits). On the CPU dst += g32.
ocr_status_t step_add_grad(StepCtx *s, OcrTensor *dst, const OcrTensor *g32);

#endif

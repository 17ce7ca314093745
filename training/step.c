#include "training/step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/timer.h"
#include "kernels/backend.h"
#include "kernels/ctc.h"

// The device-resident step of a GPU (kernels/backend.h): its state lives in device memory and the
// host learns each step's outcome through a page-locked readback one step later.
struct StepDevice {
    ocr_device_t dev;
    OcrStream *stream, *prev_stream;  // our compute stream; the device's stream before it
    OcrDevStep *state;                // device memory
    OcrFusedAdam *fa;
    OcrDevScalerConfig scaler;
    int nparams;
    // Host → device per-step inputs and device → host readbacks, one page-locked slot per step
    // in flight (readbacks by StepCtx.slot_next).
    OcrDevStepInput *in_pinned[STEP_MAX_IN_FLIGHT];
    OcrEvent *in_done[STEP_MAX_IN_FLIGHT];
    int in_used[STEP_MAX_IN_FLIGHT];
    int in_next;
    char *rb_pinned[STEP_MAX_IN_FLIGHT];  // OcrDevStep, then nonfinite (n ints), then amax bits (n)
    size_t rb_bytes;
    OcrEvent *rb_done[STEP_MAX_IN_FLIGHT];
    // Per-step device tensors (capacity B) and the graph's static inputs.
    OcrTensor losses, loss, infeas;
    OcrTensor g_images, g_widths, g_labels, g_lengths;
    int cap_h, cap_w, cap_c, cap_len;
    AmpSnapshot bn;
    // Graph.
    int graphs_allowed;
    OcrGraph *graph;
    int gB, gH, gW, gL;       // the graph's shape
    int wB, wH, wW, wL;       // the last eager step's shape (a capture needs one warm-up)
    int64_t captures, replays;
    // MultiHead: the f32 gradient of the guidance logits before the loss scale.
    OcrTensor gtc_dl32;
    // Recompute mode, per readback slot: the attempts of its step that overflowed and ran again
    // (bad tensors and first bad layer of each, for the host mirror when the step is collected)
    // and their time.
    int attempts[STEP_MAX_IN_FLIGHT];
    int attempt_bad[STEP_MAX_IN_FLIGHT][AMP_MAX_RECOMPUTES], attempt_layer[STEP_MAX_IN_FLIGHT][AMP_MAX_RECOMPUTES];
    double attempt_seconds[STEP_MAX_IN_FLIGHT];
};

ocr_status_t step_ctx_init(StepCtx *s, OcrModel *m, AmpEngine *amp, Optimizer *optim, int capacity, int focal) {
    memset(s, 0, sizeof *s);
    s->m = m;
    s->amp = amp;
    s->optim = optim;
    s->capacity = capacity;
    s->focal = focal;
    int np = ocr_model_params(m)->count;
    size_t pn = (size_t)(np ? np : 1);
    s->losses = malloc((size_t)capacity * sizeof *s->losses);
    s->infeasible = malloc((size_t)capacity * sizeof *s->infeasible);
    s->clip = malloc(pn * sizeof *s->clip);
    s->grad_views = calloc(pn, sizeof *s->grad_views);
    s->grads = calloc(pn, sizeof *s->grads);
    if (!s->losses || !s->infeasible || !s->clip || !s->grad_views || !s->grads) {
        step_ctx_free(s);
        return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    }
    // The gradient buffer lives as long as the step, so it is held from the first forward pass
    // on: allocated lazily by the first backward, it would be missing from a first step whose
    // peak falls in the forward, and capacity's probes (no gradient buckets) would then measure
    // one gradient buffer less than a training run (whose buckets allocate it at set-up).
    ocr_status_t st = ocr_params_alloc_grads(ocr_model_params(m));
    if (st != OCR_OK) step_ctx_free(s);
    return st;
}

static void step_device_free(StepCtx *s);

void step_ctx_free(StepCtx *s) {
    step_device_free(s);
    ocr_tensor_free(&s->dl32);
    ocr_tensor_free(&s->logits_buf);
    ocr_tensor_free(&s->kept_logits_buf);
    ocr_tensor_free(&s->gtc_loss);
    ocr_tensor_free(&s->extra_tmp);
    free(s->losses);
    free(s->infeasible);
    free(s->clip);
    free(s->grad_views);
    free(s->grads);
    memset(s, 0, sizeof *s);
}

static int multihead(const StepCtx *s) { return ocr_model_arch(s->m)->multihead.kind != OCR_GUIDE_NONE; }
static int world_size(const StepCtx *s) { return s->sync ? s->sync->world : 1; }

// ---- the loss, for every device ----------------------------------------------------------------------

// The factors the loss gradients are multiplied by. host_scale: the loss scale where the host
// applies it (the CPU step), 1 where the device multiplies by its own scale afterwards. Data
// parallelism: each rank's batch mean is divided by the world size before the sum over the
// ranks, so the summed gradient is the mean over all of their samples (a power-of-two world
// divides exactly). MultiLoss: loss = weight_1 · CTC + weight_2 · guidance; each gradient
// carries its weight.
typedef struct {
    float ctc, gtc;
} LossGradScale;

static LossGradScale loss_grad_scales(const StepCtx *s, float host_scale) {
    const MultiHeadSpec *mh = &ocr_model_arch(s->m)->multihead;
    const float g = host_scale / (float)world_size(s);
    if (!multihead(s)) return (LossGradScale){g, 0.0f};
    return (LossGradScale){g * (float)mh->weight_ctc, g * (float)mh->weight_gtc};
}

// The factor an extra loss multiplies its gradients by on the CPU: the loss scale over the world.
static float gs_base(const StepCtx *s, AmpEngine *amp) { return amp_engine_loss_scale(amp) / (float)world_size(s); }

// The step's reported losses from their sums over the ranks: ctc_sum of the ranks' CTC batch
// means (unweighted), gtc_sum of their guidance means times weight_2. The loss is the ranks'
// mean; MultiHead: loss = loss_ctc + loss_gtc, each already weighted.
// An extra loss (s->extra, distillation) adds its weighted sum over the ranks, distill_sum.
static void reported_losses(const StepCtx *s, double ctc_sum, double gtc_sum, double distill_sum, StepOutcome *out) {
    const int world = world_size(s);
    out->loss = ctc_sum / world;
    out->loss_ctc = out->loss_gtc = 0;
    out->loss_distill = distill_sum / world;
    if (multihead(s)) {
        out->loss_ctc = ocr_model_arch(s->m)->multihead.weight_ctc * out->loss;
        out->loss_gtc = gtc_sum / world;
        out->loss = out->loss_ctc + out->loss_gtc;
    }
    out->loss += out->loss_distill;
}

// Where the loss writes its gradient: the model's dlogits when they are f32, else an f32
// buffer (the loss works in f32; its gradient is rounded into dlogits afterwards).
static ocr_status_t loss_grad_f32(StepCtx *s, OcrTensor *dl, const OcrTensor *logits, OcrTensor **dl32) {
    *dl32 = dl;
    if (dl->dtype == OCR_F32) return OCR_OK;
    if (!s->dl32.data || !ocr_tensor_same_shape(&s->dl32, logits)) {
        ocr_tensor_free(&s->dl32);
        OCR_TRY(ocr_tensor_alloc(&s->dl32, OCR_F32, logits->device, 3, logits->shape, OCR_MEM_ACTIVATIONS));
    }
    *dl32 = &s->dl32;
    return OCR_OK;
}

ocr_status_t step_add_grad(StepCtx *s, OcrTensor *dst, const OcrTensor *g32) {
    StepDevice *d = s->dev;
    if (!d) {
        ocr_accumulate(dst, g32);
        return OCR_OK;
    }
    int64_t n = ocr_tensor_numel(dst);
    if (!s->extra_tmp.data || ocr_tensor_numel(&s->extra_tmp) < n || !ocr_device_equal(s->extra_tmp.device, dst->device)) {
        ocr_tensor_free(&s->extra_tmp);
        OCR_TRY(ocr_tensor_alloc(&s->extra_tmp, OCR_F32, dst->device, 1, (int64_t[]){n}, OCR_MEM_ACTIVATIONS));
    }
    OcrTensor t = ocr_tensor_view(s->extra_tmp.data, dst->dtype, dst->device, dst->ndim, dst->shape);
    ocr_backend_scale_by_loss_scale(&t, g32, d->state);
    ocr_accumulate(dst, &t);
    return OCR_OK;
}

const OcrTensor *step_kept_logits(const StepCtx *s) { return s->keep_logits && s->kept_logits.data ? &s->kept_logits : NULL; }

// Copies the step's f32 logits into kept_logits (an op on the logits' stream, so a captured
// step copies in its replays too). The buffer only grows; it is allocated before a capture
// needs it because a shape change drops the graph and the next step runs eagerly.
static ocr_status_t keep_logits(StepCtx *s, const OcrTensor *logits) {
    if (!s->keep_logits) return OCR_OK;
    int64_t n = ocr_tensor_numel(logits);
    if (!s->kept_logits_buf.data || ocr_tensor_numel(&s->kept_logits_buf) < n ||
        !ocr_device_equal(s->kept_logits_buf.device, logits->device)) {
        ocr_tensor_free(&s->kept_logits_buf);
        OCR_TRY(ocr_tensor_alloc(&s->kept_logits_buf, OCR_F32, logits->device, 1, (int64_t[]){n}, OCR_MEM_ACTIVATIONS));
    }
    s->kept_logits = ocr_tensor_view(s->kept_logits_buf.data, OCR_F32, logits->device, 3, logits->shape);
    ocr_cast_forward(&s->kept_logits, logits);
    return OCR_OK;
}

// MultiHead: the guidance branch's loss (NRTRLoss / SARLoss) and its gradient × grad_scale
// (loss_grad_scales' gtc), on the model's device; *loss = weight_2 × its mean, read back at once.
// On a GPU the gradient is computed in f32 and then multiplied by the device-held loss scale,
// rounded once into the guidance dlogits' dtype (as the CTC gradient is), so a small f16
// gradient is not flushed before it is scaled; the host waits for the device here.
static ocr_status_t guide_loss(StepCtx *s, float grad_scale, double *loss) {
    StepDevice *d = s->dev;
    const OcrTensor *logits = ocr_model_guide_logits(s->m), *targets = ocr_model_guide_targets(s->m);
    OcrTensor *dlogits = ocr_model_guide_dlogits(s->m);
    OCR_ASSERT(logits && targets && dlogits, "MultiHead: no guidance outputs after a training forward");
    if (!s->gtc_loss.data || !ocr_device_equal(s->gtc_loss.device, logits->device)) {
        ocr_tensor_free(&s->gtc_loss);
        OCR_TRY(ocr_tensor_alloc(&s->gtc_loss, OCR_F32, logits->device, 1, (int64_t[]){1}, OCR_MEM_ACTIVATIONS));
    }
    CrossEntropyParams p = ocr_model_guide_loss_params(s->m, grad_scale);
    ocr_cross_entropy_forward(NULL, &s->gtc_loss, NULL, logits, targets, p);
    if (!d) {
        ocr_cross_entropy_backward(dlogits, logits, targets, p);
    } else {
        if (!d->gtc_dl32.data || ocr_tensor_numel(&d->gtc_dl32) < ocr_tensor_numel(dlogits)) {
            ocr_tensor_free(&d->gtc_dl32);
            OCR_TRY(
                ocr_tensor_alloc(&d->gtc_dl32, OCR_F32, d->dev, dlogits->ndim, dlogits->shape, OCR_MEM_ACTIVATIONS));
        }
        OcrTensor dl32 = ocr_tensor_view(d->gtc_dl32.data, OCR_F32, d->dev, dlogits->ndim, dlogits->shape);
        ocr_cross_entropy_backward(&dl32, logits, targets, p);
        ocr_backend_scale_by_loss_scale(dlogits, &dl32, d->state);
        if (ocr_backend_stream_synchronize(d->dev, d->stream) != OCR_OK)
            return ocr_wrap_error(OCR_ERR_CUDA, "MultiHead guidance loss");
    }
    float v;
    ocr_copy_bytes(ocr_cpu(), &v, s->gtc_loss.device, s->gtc_loss.data, sizeof v);
    *loss = ocr_model_arch(s->m)->multihead.weight_gtc * (double)v;
    return OCR_OK;
}

// The batch's labels and widths become the model's guidance state (MultiHead; the SAR branch's
// valid ratios come from the widths). On a GPU the forward copies them into buffers the previous
// step's kernels may still read: the step waits for those first.
static ocr_status_t set_guide_batch(StepCtx *s, const FeedDeviceBatch *b) {
    if (!multihead(s)) return OCR_OK;
    if (s->dev && s->npend > 0 && ocr_backend_stream_synchronize(s->dev->dev, s->dev->stream) != OCR_OK)
        return ocr_wrap_error(OCR_ERR_CUDA, "MultiHead step");
    return ocr_model_set_guide_batch(s->m, b->host_labels, b->host_lengths, b->host_widths, b->count, b->max_len,
                                     (int)b->images.shape[2]);
}

// ---- the step's body ----------------------------------------------------------------------------------

// The update's start: on the CPU the AMP engine's (BN statistics snapshot, O1 cast cache); on a
// GPU the fused pass's reset, the O1 recast and the snapshot, enqueued.
static ocr_status_t update_begin(StepCtx *s) {
    StepDevice *d = s->dev;
    if (!d) return amp_engine_begin_step(s->amp);
    OcrParamTable *params = ocr_model_params(s->m), *stats = ocr_model_stats(s->m);
    AmpEngine *amp = s->amp;
    ocr_backend_fused_adam_begin(d->fa, d->state);
    if (amp->cfg.policy.level == OCR_AMP_O1) {
        // Recast every step on the device: the host does not know yet whether the last step
        // was skipped, and a recast of unchanged weights gives the same copies.
        for (int i = 0; i < params->count; i++) amp->param_views[i] = ocr_params_tensor(params, i);
        amp_cast_cache_refresh(&amp->cache, amp->param_views);
    }
    if (stats->data && stats->bytes) OCR_TRY(amp_snapshot_take_on(&d->bn, d->dev, stats->data, stats->bytes));
    return OCR_OK;
}

ocr_status_t step_world_skip(GradSync *sync, AmpEngine *amp, int *skipped, const char *what) {
    if (!sync) return OCR_OK;
    int32_t found = *skipped;
    OCR_TRY(ocr_dist_max_i32(sync->dist, &found, 1, what));
    if (found && !*skipped) amp->last.found_inf = 1;
    *skipped = found;
    return OCR_OK;
}

double step_adam_update(Optimizer *o, AmpEngine *amp, OcrParamTable *params, double lr, OcrTensor *views,
                        OcrTensor **grads, float *clip) {
    for (int i = 0; i < params->count; i++) {
        views[i] = ocr_params_grad(params, i);
        grads[i] = &views[i];
    }
    const double norm = optim_clip_factors(o, grads, amp->grad_scale, clip);
    for (int i = 0; i < params->count; i++) {
        if (o->frozen[i]) continue;
        OcrTensor w = ocr_params_tensor(params, i);
        AdamParams p = {0};
        optim_fill(o, i, lr, &p);
        amp_engine_adam_params(amp, i, &p);
        p.grad_scale *= clip[i];
        ocr_adam_update(&w, amp_engine_master(amp, i), &o->m[i], &o->v[i], &views[i], p);
    }
    o->updates++;
    return norm;
}

// The CPU's update, driven from the host after the backward: the step's figures over the ranks,
// frozen gradients cleared, the finite check (every rank skips alike), clip, Adam, the scaler.
static ocr_status_t host_update(StepCtx *s, double ctc, double gtc, int ninf, double lr, StepOutcome *out) {
    OcrParamTable *params = ocr_model_params(s->m);
    AmpEngine *amp = s->amp;
    if (s->sync) {
        // The step's figures are those of the whole global batch.
        double v[4] = {ctc, gtc, (double)ninf, s->distill_cur};
        OCR_TRY(ocr_dist_sum_f64(s->sync->dist, v, 4, "the step's loss all-reduce"));
        ctc = v[0], gtc = v[1], ninf = (int)v[2], s->distill_cur = v[3];
    }
    reported_losses(s, ctc, gtc, s->distill_cur, out);
    out->infeasible = ninf;
    // Frozen parameters (Global.freeze_params) take no part in the step: their gradients are
    // cleared before the finite check and the clip norm (the GPU step leaves them out of its
    // table), and the update below skips them.
    for (int i = 0; s->optim->n_frozen && i < params->count; i++) {
        if (!s->optim->frozen[i]) continue;
        OcrTensor g = ocr_params_grad(params, i);
        ocr_zero_tensor(&g);
    }

    out->skipped = amp_engine_check_grads(amp);
    OCR_TRY(step_world_skip(s->sync, amp, &out->skipped, "the found-inf all-reduce"));
    out->grad_norm = NAN;
    if (out->skipped && amp_engine_can_recompute(amp, amp_engine_loss_scale(amp), out->loss, s->attempt)) {
        // Recompute mode: nothing of this attempt stays (amp_engine_end_attempt restores the BN
        // statistics and backs the scale off); step_enqueue runs the batch again. Every rank
        // decides alike: the flag and the loss are the reduced ones.
        out->scale = amp_engine_loss_scale(amp);
        out->overflow_layer = amp->last_layer;
        amp_engine_end_attempt(amp);
        s->retry = 1;
        return OCR_OK;
    }
    if (!out->skipped) out->grad_norm = step_adam_update(s->optim, amp, params, lr, s->grad_views, s->grads, s->clip);
    out->scale = amp_engine_loss_scale(amp);
    amp_engine_end_step(amp);
    out->overflow_layer = out->skipped ? amp->last_layer : -1;
    return OCR_OK;
}

// One step on any device. On the CPU everything has run when it returns and *out holds the
// outcome; on a GPU everything is only enqueued, with no host wait and no allocation once warm
// (capturable; MultiHead, which reads its loss back here, runs eagerly), and the outcome is read
// back from the device state by step_collect (slot: this step's readback slot).
static ocr_status_t step_body(StepCtx *s, const FeedDeviceBatch *b, double lr, int slot, StepOutcome *out) {
    StepDevice *d = s->dev;
    OcrParamTable *params = ocr_model_params(s->m);
    AmpEngine *amp = s->amp;
    const int B = b->count;
    s->lr_cur = lr;
    OCR_TRY(update_begin(s));
    ocr_params_zero_grads(params);
    // The CPU's CTC loss without an extra loss reads the model's logits in their own dtype and
    // writes its gradient straight into the model's dlogits, rounded once to their dtype (the
    // rounding amp_loss_dlogits would apply to an f32 gradient): no f32 copy of either. Nothing
    // reads the logits after that loss (kept_logits are copied before it), so the model's dlogits
    // are the logits' own memory. An extra loss (distillation) reads the logits after the CTC loss
    // and adds to its f32 gradient; a GPU scales an f32 gradient by its device-held loss scale:
    // both keep the f32 logits and gradient apart.
    const int direct = !d && !s->extra.fn;
    ocr_model_share_dlogits(s->m, direct);
    OCR_TRY(ocr_model_forward_u8(s->m, &b->images, &b->widths, 1));
    amp_engine_after_forward(amp);
    const OcrTensor *logits =
        direct ? ocr_model_logits(s->m) : amp_loss_logits(ocr_model_logits(s->m), &s->logits_buf);
    OCR_TRY(keep_logits(s, logits));
    OcrTensor *dl = ocr_model_dlogits(s->m), *dl32 = dl;
    if (!direct) OCR_TRY(loss_grad_f32(s, dl, logits, &dl32));
    // zero_infinity: one label longer than the sequence (with its adjacent repeats) would make
    // the whole gradient NaN and the step look like an AMP overflow; it is zeroed and counted.
    // The CPU multiplies the loss scale into the gradient as the loss writes it; a GPU writes
    // the gradient of the loss itself and then multiplies it by the device-held scale, rounded
    // once into the model's dlogits.
    const LossGradScale gs = loss_grad_scales(s, d ? 1.0f : amp_engine_loss_scale(amp));
    const CtcParams cp = {OCR_CTC_REDUCTION_PADDLE, 1, s->focal, gs.ctc};
    OcrTensor losses, infeas;
    double ctc = 0, gtc = 0;
    int ninf = 0;
    if (d) {
        losses = ocr_tensor_view(d->losses.data, OCR_F32, d->dev, 1, (int64_t[]){B});
        infeas = ocr_tensor_view(d->infeas.data, OCR_I32, d->dev, 1, (int64_t[]){B});
        ocr_backend_ctc_loss_enqueue(&losses, &d->loss, dl32, &infeas, logits, &b->labels, &b->lengths, NULL, cp);
    } else {
        losses = ocr_tensor_view(s->losses, OCR_F32, ocr_cpu(), 1, (int64_t[]){B});
        infeas = ocr_tensor_view(s->infeasible, OCR_I32, ocr_cpu(), 1, (int64_t[]){B});
        ctc = ocr_ctc_loss_forward(&losses, NULL, dl32, &infeas, logits, &b->labels, &b->lengths, NULL, cp);
        for (int i = 0; i < B; i++) ninf += s->infeasible[i] != 0;
    }
    if (multihead(s)) OCR_TRY(guide_loss(s, gs.gtc, &gtc));
    // An extra loss (distillation) adds its gradients to the f32 CTC gradient before it is scaled
    // (a GPU) or rounded (the CPU) into dlogits, and to the guidance gradient.
    double distill = 0;
    if (s->extra.fn)
        OCR_TRY(s->extra.fn(s->extra.user, s, b, logits, dl32, d ? 1.0f / (float)world_size(s) : gs_base(s, amp), &distill));
    s->distill_cur = distill;
    if (d)
        ocr_backend_scale_by_loss_scale(dl, dl32, d->state);
    else if (dl32 != dl)
        amp_loss_dlogits(dl, dl32);
    if (d) {
        // The figures a GPU step reports, summed over the ranks now (the guidance loss on the
        // host, the CTC loss in device memory); step_collect divides by the world size.
        if (s->sync && multihead(s)) OCR_TRY(ocr_dist_sum_f64(s->sync->dist, &gtc, 1, "the guidance loss all-reduce"));
        if (s->sync && s->extra.fn) OCR_TRY(ocr_dist_sum_f64(s->sync->dist, &distill, 1, "the extra loss all-reduce"));
        s->gtc_sum[slot] = gtc;
        s->distill_sum[slot] = distill;
        if (s->sync) {
            OcrDistRequest req;
            OCR_TRY(
                ocr_dist_allreduce_start(s->sync->dist, d->loss.data, 1, OCR_F32, "the step's loss all-reduce", &req));
            OCR_TRY(ocr_dist_wait(s->sync->dist, &req));
        }
        ocr_backend_step_record(d->state, &d->loss, &infeas);
    }
    // Data parallelism: the buckets' all-reduces start as the backward finishes each layer (on
    // a GPU with NCCL, on a stream of their own, which the fused optimizer below waits for on
    // the device). Every rank then holds the same sums (NCCL reduces each element once and
    // broadcasts it), so a GPU's found-inf and scale update agree on every rank without a host
    // round trip.
    if (s->sync) grad_sync_begin(s->sync);
    OCR_TRY(ocr_model_backward(s->m));
    if (s->sync) OCR_TRY(grad_sync_finish(s->sync));
    if (!d) return host_update(s, ctc, gtc, ninf, lr, out);
    OcrParamTable *stats = ocr_model_stats(s->m);
    ocr_backend_fused_adam_step(d->fa, d->state, d->scaler);
    if (stats->data && stats->bytes)
        ocr_backend_restore_if_inf(d->dev, stats->data, d->bn.saved, stats->bytes, d->state);
    return OCR_OK;
}

// ---- the device-resident step: set-up ------------------------------------------------------------------

static void step_device_free(StepCtx *s) {
    StepDevice *d = s->dev;
    if (!d) return;
    ocr_device_t dev = d->dev;
    if (d->stream) ocr_backend_stream_synchronize(dev, d->stream);
    ocr_backend_graph_destroy(dev, d->graph);
    ocr_backend_fused_adam_free(d->fa);
    for (int k = 0; k < STEP_MAX_IN_FLIGHT; k++) {
        ocr_backend_host_free(dev, d->in_pinned[k]);
        ocr_backend_host_free(dev, d->rb_pinned[k]);
        ocr_backend_event_destroy(dev, d->in_done[k]);
        ocr_backend_event_destroy(dev, d->rb_done[k]);
    }
    ocr_mem_free(d->state);
    ocr_tensor_free(&d->losses);
    ocr_tensor_free(&d->loss);
    ocr_tensor_free(&d->infeas);
    ocr_tensor_free(&d->gtc_dl32);
    ocr_tensor_free(&d->g_images);
    ocr_tensor_free(&d->g_widths);
    ocr_tensor_free(&d->g_labels);
    ocr_tensor_free(&d->g_lengths);
    amp_snapshot_free(&d->bn);
    // The device's stream goes back to what it was before the trainer's (the legacy default).
    if (d->stream) {
        ocr_backend_set_stream(dev, d->prev_stream);
        ocr_backend_stream_destroy(dev, d->stream);
    }
    free(d);
    s->dev = NULL;
}

static int graphs_possible(const StepCtx *s) {
    // Activation statistics are host reads in the middle of the step.
    return s->amp->cfg.activation_stats_every == 0;
}

ocr_status_t step_device_init(StepCtx *s, const StepDeviceOptions *o) {
    if (!ocr_backend_have_gpu())
        return ocr_set_error(OCR_ERR_UNSUPPORTED, "the GPU training step: this build has no CUDA backend");
    OcrParamTable *params = ocr_model_params(s->m);
    OCR_ASSERT(!s->dev, "step_device_init twice");
    if (!ocr_backend_is_async(params->device))
        return ocr_set_error(OCR_ERR_INVALID_ARG, "step_device_init: the model is not on a CUDA device");
    StepDevice *d = calloc(1, sizeof *d);
    if (!d) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    s->dev = d;
    d->dev = params->device;
    d->nparams = params->count;
    d->prev_stream = ocr_backend_get_stream(d->dev);
    if (ocr_backend_stream_create(d->dev, &d->stream) != OCR_OK) return ocr_wrap_error(OCR_ERR_CUDA, "compute stream");
    // Everything before (weights, masters) was enqueued on the old stream: finish it first.
    if (ocr_backend_synchronize(d->dev) != OCR_OK) return ocr_wrap_error(OCR_ERR_CUDA, "device set-up");
    ocr_backend_set_stream(d->dev, d->stream);

    // The fused optimizer's table: the parameters in table order (stream = index, as on the CPU).
    OCR_TRY(ocr_params_alloc_grads(params));
    int n = params->count;
    OcrFusedTensor *ft = calloc((size_t)(n ? n : 1), sizeof *ft);
    if (!ft) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    for (int i = 0; i < n; i++) {
        OcrTensor w = ocr_params_tensor(params, i), g = ocr_params_grad(params, i);
        OcrTensor *mw = amp_engine_master(s->amp, i);
        ft[i].param = w.data;
        ft[i].master = mw ? (float *)mw->data : NULL;
        ft[i].m = (float *)s->optim->m[i].data;
        ft[i].v = (float *)s->optim->v[i].data;
        ft[i].grad = g.data;
        // A frozen parameter (Global.freeze_params) is a tensor of no elements to the fused pass:
        // not checked, not in the norm, never updated (indices, and so rounding streams, stay).
        ft[i].numel = s->optim->frozen[i] ? 0 : ocr_tensor_numel(&w);
        ft[i].param_dtype = w.dtype;
        ft[i].grad_dtype = g.dtype;
        ft[i].lr_mult = s->optim->lr_mult[i];
        ft[i].decay = s->optim->decay[i];
        ft[i].decoupled = s->optim->decoupled[i];
        ft[i].grad_scaled = g.dtype != OCR_F32;
    }
    const OptimConfig *oc = &s->optim->cfg;
    OcrFusedAdamConfig fc = {(float)oc->beta1, (float)oc->beta2, (float)oc->epsilon, oc->clip_norm,
                             oc->clip_norm_global, s->amp->cfg.stochastic_rounding};
    d->fa = ocr_backend_fused_adam_create(d->dev, ft, n, fc, o->max_updates);
    free(ft);
    if (!d->fa) return ocr_wrap_error(OCR_ERR_CUDA, "fused optimizer");

    const AmpScalerConfig *sc = &s->amp->scaler.cfg;
    d->scaler = (OcrDevScalerConfig){sc->enabled, sc->dynamic, sc->incr_ratio, sc->decr_ratio,
                                     sc->incr_every_n_steps, sc->decr_every_n_nan_or_inf, sc->min_scale,
                                     sc->max_scale};
    // The device state starts from the host's scaler and counters (a resumed run's included).
    OcrDevStep st0;
    memset(&st0, 0, sizeof st0);
    const AmpScaler *as = &s->amp->scaler;
    const AmpScalerState ss = amp_scaler_state(as);
    st0.scale = amp_scaler_scale(as);
    st0.inv_scale = amp_scaler_inv_scale(as);
    st0.scale_used = st0.scale;
    st0.good_steps = ss.good_steps;
    st0.bad_steps = ss.bad_steps;
    st0.steps = ss.steps;
    st0.overflow_steps = ss.overflow_steps;
    st0.updates = s->optim->updates;
    d->state = ocr_mem_alloc(d->dev, OCR_MEM_OPTIMIZER, sizeof(OcrDevStep));
    if (!d->state) return ocr_wrap_error(OCR_ERR_OOM, "device step state");
    ocr_copy_bytes(d->dev, d->state, ocr_cpu(), &st0, sizeof st0);

    d->rb_bytes = sizeof(OcrDevStep) + 2 * (size_t)(n ? n : 1) * sizeof(int);
    for (int k = 0; k < STEP_MAX_IN_FLIGHT; k++) {
        d->in_pinned[k] = ocr_backend_host_alloc(d->dev, sizeof(OcrDevStepInput));
        d->rb_pinned[k] = ocr_backend_host_alloc(d->dev, d->rb_bytes);
        if (!d->in_pinned[k] || !d->rb_pinned[k]) return ocr_wrap_error(OCR_ERR_OOM, "pinned step buffers");
        if (ocr_backend_event_create(d->dev, &d->in_done[k]) != OCR_OK ||
            ocr_backend_event_create(d->dev, &d->rb_done[k]) != OCR_OK)
            return ocr_wrap_error(OCR_ERR_CUDA, "step events");
    }
    int B = s->capacity;
    OCR_TRY(ocr_tensor_alloc(&d->losses, OCR_F32, d->dev, 1, (int64_t[]){B}, OCR_MEM_DATA));
    OCR_TRY(ocr_tensor_alloc(&d->loss, OCR_F32, d->dev, 1, (int64_t[]){1}, OCR_MEM_DATA));
    OCR_TRY(ocr_tensor_alloc(&d->infeas, OCR_I32, d->dev, 1, (int64_t[]){B}, OCR_MEM_DATA));
    d->graphs_allowed = o->cuda_graph && graphs_possible(s);
    if (o->cuda_graph && !d->graphs_allowed)
        ocr_log(OCR_LOG_INFO, "cuda graph: off (Global.amp_activation_stats_every reads activations on the host)");
    if (s->extra.fn) {
        // The extra loss (distillation) runs other networks and reads its value back in the step.
        if (d->graphs_allowed) ocr_log(OCR_LOG_INFO, "cuda graph: off with an extra loss (distillation)");
        d->graphs_allowed = 0;
    }
    if (multihead(s)) {
        // The guidance labels reach the device by synchronous copies inside the forward and its
        // loss is read back within the step: MultiHead steps run eagerly, one at a time.
        if (d->graphs_allowed) ocr_log(OCR_LOG_INFO, "cuda graph: off for MultiHead (per-step guidance labels)");
        d->graphs_allowed = 0;
    }
    return OCR_OK;
}

ocr_status_t step_attach_sync(StepCtx *s, GradSync *g) {
    StepDevice *d = s->dev;
    if (d) {
        if (ocr_dist_world_size(g->dist) > 1 && ocr_dist_backend(g->dist) != OCR_DIST_NCCL)
            return ocr_set_error(OCR_ERR_UNSUPPORTED, "data parallelism on GPUs all-reduces device buffers with NCCL; "
                                 "the transport here is %s (a CUDA build with NCCL and MPI picks nccl; "
                                 "Distributed.backend mpi is for Global.device cpu)",
                                 ocr_dist_backend_name(ocr_dist_backend(g->dist)));
        // The transport's NCCL calls are ordered against the compute stream (the backend's own handle).
        ocr_dist_set_stream(g->dist, (void *)d->stream);
        // The collectives are issued from the host per bucket (and their order is part of the
        // protocol): the step runs eagerly.
        if (d->graphs_allowed) ocr_log(OCR_LOG_INFO, "cuda graph: off under data parallelism (NCCL calls per bucket)");
        d->graphs_allowed = 0;
    }
    s->sync = g;
    return OCR_OK;
}

void step_invalidate_graph(StepCtx *s) {
    StepDevice *d = s->dev;
    if (!d) return;
    if (d->graph) {
        // A graph may still be running: its exec object is released after the stream is done.
        ocr_backend_stream_synchronize(d->dev, d->stream);
        ocr_backend_graph_destroy(d->dev, d->graph);
        d->graph = NULL;
    }
    d->wB = d->wH = d->wW = d->wL = 0;
}

void step_graph_counts(const StepCtx *s, int64_t *captures, int64_t *replays) {
    *captures = s->dev ? s->dev->captures : 0;
    *replays = s->dev ? s->dev->replays : 0;
}

// The static graph inputs, at the largest batch of the run (allocated on the first capture).
static ocr_status_t ensure_static_inputs(StepDevice *d, const FeedDeviceBatch *b, int capacity) {
    int H = (int)b->images.shape[1], W = (int)b->images.shape[2], C = (int)b->images.shape[3];
    if (d->g_images.data && H <= d->cap_h && W <= d->cap_w && C == d->cap_c && b->max_len <= d->cap_len)
        return OCR_OK;
    ocr_tensor_free(&d->g_images);
    ocr_tensor_free(&d->g_widths);
    ocr_tensor_free(&d->g_labels);
    ocr_tensor_free(&d->g_lengths);
    OCR_TRY(ocr_tensor_alloc(&d->g_images, OCR_U8, d->dev, 1, (int64_t[]){(int64_t)capacity * H * W * C},
                             OCR_MEM_DATA));
    OCR_TRY(ocr_tensor_alloc(&d->g_widths, OCR_I32, d->dev, 1, (int64_t[]){capacity}, OCR_MEM_DATA));
    OCR_TRY(ocr_tensor_alloc(&d->g_lengths, OCR_I32, d->dev, 1, (int64_t[]){capacity}, OCR_MEM_DATA));
    OCR_TRY(ocr_tensor_alloc(&d->g_labels, OCR_I32, d->dev, 1, (int64_t[]){(int64_t)capacity * b->max_len},
                             OCR_MEM_DATA));
    d->cap_h = H, d->cap_w = W, d->cap_c = C, d->cap_len = b->max_len;
    return OCR_OK;
}

// Device-to-device copies of the batch into the static inputs (on the compute stream, before
// the graph launch); returns views of the batch's shape.
static void copy_to_static(StepDevice *d, const FeedDeviceBatch *b, FeedDeviceBatch *g) {
    *g = *b;
    g->images = ocr_tensor_view(d->g_images.data, OCR_U8, d->dev, 4, b->images.shape);
    g->widths = ocr_tensor_view(d->g_widths.data, OCR_I32, d->dev, 1, b->widths.shape);
    g->lengths = ocr_tensor_view(d->g_lengths.data, OCR_I32, d->dev, 1, b->lengths.shape);
    g->labels = ocr_tensor_view(d->g_labels.data, OCR_I32, d->dev, 2, b->labels.shape);
    ocr_copy_bytes(d->dev, g->images.data, d->dev, b->images.data, ocr_tensor_bytes(&b->images));
    ocr_copy_bytes(d->dev, g->widths.data, d->dev, b->widths.data, ocr_tensor_bytes(&b->widths));
    ocr_copy_bytes(d->dev, g->lengths.data, d->dev, b->lengths.data, ocr_tensor_bytes(&b->lengths));
    ocr_copy_bytes(d->dev, g->labels.data, d->dev, b->labels.data, ocr_tensor_bytes(&b->labels));
}

// ---- the device-resident step: enqueue and readback ------------------------------------------------------

// This step's inputs: lr, stochastic-rounding seed, dropout counter (page-locked slot → device).
static ocr_status_t device_inputs(StepCtx *s, double lr) {
    StepDevice *d = s->dev;
    AmpEngine *amp = s->amp;
    int k = d->in_next;
    if (d->in_used[k] && ocr_backend_event_synchronize(d->dev, d->in_done[k]) != OCR_OK)
        return ocr_wrap_error(OCR_ERR_CUDA, "step inputs");
    OcrDevStepInput *in = d->in_pinned[k];
    in->lr = lr;
    // The engine counts a step when its outcome is recorded: the ones still in flight count too.
    in->sr_seed = amp->cfg.stochastic_rounding ? amp_stochastic_round_seed(amp->cfg.seed, amp->step + s->npend) : 0;
    in->dropout_step = ocr_model_get_step(s->m) + 1;  // what the training forward of this step counts
    if (ocr_backend_memcpy_async(d->dev, &d->state->in, in, sizeof *in, d->stream) != OCR_OK ||
        ocr_backend_event_record(d->dev, d->in_done[k], d->stream) != OCR_OK)
        return ocr_wrap_error(OCR_ERR_CUDA, "step inputs");
    d->in_used[k] = 1;
    d->in_next = (k + 1) % STEP_MAX_IN_FLIGHT;
    return OCR_OK;
}

// The step on the device: a graph replay, a capture (the second step of a shape), or eager.
static ocr_status_t device_run(StepCtx *s, const FeedDeviceBatch *b, double lr, int slot, step_mode_t *mode) {
    StepDevice *d = s->dev;
    AmpEngine *amp = s->amp;
    int B = b->count, H = (int)b->images.shape[1], W = (int)b->images.shape[2], L = b->max_len;
    uint64_t model_step = ocr_model_get_step(s->m);
    int same_graph = d->graph && B == d->gB && H == d->gH && W == d->gW && L == d->gL;
    if (d->graph && !same_graph) step_invalidate_graph(s);
    int warm = B == d->wB && H == d->wH && W == d->wW && L == d->wL;
    if (same_graph) {
        FeedDeviceBatch g;
        copy_to_static(d, b, &g);
        if (ocr_backend_graph_launch(d->dev, d->graph, d->stream) != OCR_OK)
            return ocr_wrap_error(OCR_ERR_CUDA, "graph replay");
        // What the eager forward does on the host: its step counter and op-call statistics.
        ocr_model_set_step(s->m, model_step + 1);
        amp_engine_after_forward(amp);
        d->replays++;
        *mode = STEP_REPLAYED;
        return OCR_OK;
    }
    if (!(d->graphs_allowed && warm)) {
        OCR_TRY(step_body(s, b, lr, slot, NULL));
        d->wB = B, d->wH = H, d->wW = W, d->wL = L;
        return OCR_OK;
    }
    OCR_TRY(ensure_static_inputs(d, b, s->capacity));
    FeedDeviceBatch g;
    copy_to_static(d, b, &g);
    // Captured with the model's dropout counter at 0; the kernels add the device's
    // in.dropout_step (kernels/backend.h), so every replay draws its own step's masks.
    ocr_model_set_step(s->m, UINT64_MAX);
    ocr_backend_set_dropout_step_source(d->dev, &d->state->in.dropout_step);
    ocr_status_t st = OCR_OK;
    OcrGraph *ge = NULL;
    if (ocr_backend_graph_capture_begin(d->dev, d->stream) != OCR_OK) {
        st = ocr_wrap_error(OCR_ERR_CUDA, "graph capture");
    } else {
        st = step_body(s, &g, lr, slot, NULL);
        if (ocr_backend_graph_capture_end(d->dev, d->stream, &ge) != OCR_OK && st == OCR_OK)
            st = ocr_wrap_error(OCR_ERR_CUDA, "graph capture");
    }
    ocr_backend_set_dropout_step_source(d->dev, NULL);
    ocr_model_set_step(s->m, model_step + 1);
    if (st == OCR_OK && ocr_backend_graph_launch(d->dev, ge, d->stream) != OCR_OK)
        st = ocr_wrap_error(OCR_ERR_CUDA, "graph launch");
    if (st != OCR_OK) {
        // Nothing of the failed capture ran: the step runs eagerly, and so do the next ones.
        ocr_backend_graph_destroy(d->dev, ge);
        ocr_log(OCR_LOG_WARN, "cuda graph: capture failed (%s); running eager launches", ocr_last_error());
        d->graphs_allowed = 0;
        ocr_model_set_step(s->m, model_step);
        return step_body(s, b, lr, slot, NULL);
    }
    d->graph = ge;
    d->gB = B, d->gH = H, d->gW = W, d->gL = L;
    d->captures++;
    *mode = STEP_CAPTURED;
    return OCR_OK;
}

// The readback of the step just enqueued into slot r: state, per-parameter flags and amax, one event.
static ocr_status_t device_readback(StepCtx *s, int r) {
    StepDevice *d = s->dev;
    char *rb = d->rb_pinned[r];
    size_t n = (size_t)d->nparams;
    if (ocr_backend_memcpy_async(d->dev, rb, d->state, sizeof(OcrDevStep), d->stream) != OCR_OK ||
        ocr_backend_memcpy_async(d->dev, rb + sizeof(OcrDevStep), ocr_backend_fused_adam_nonfinite(d->fa),
                                 n * sizeof(int), d->stream) != OCR_OK ||
        ocr_backend_memcpy_async(d->dev, rb + sizeof(OcrDevStep) + n * sizeof(int),
                                 ocr_backend_fused_adam_amax_bits(d->fa), n * sizeof(unsigned), d->stream) != OCR_OK ||
        ocr_backend_event_record(d->dev, d->rb_done[r], d->stream) != OCR_OK)
        return ocr_wrap_error(OCR_ERR_CUDA, "step readback");
    return OCR_OK;
}

// The host waits for slot r's readback.
static ocr_status_t device_wait_readback(StepCtx *s, int r) {
    StepDevice *d = s->dev;
    // Data parallelism: the readback follows the step's NCCL all-reduces, so a peer that hangs
    // would hold it forever; this wait gives up after Distributed.timeout_s and ends the job.
    if (s->sync)
        OCR_TRY(ocr_dist_wait_device_event(s->sync->dist, (void *)d->rb_done[r],
                                           "the GPU step (its gradient all-reduce)"));
    if (ocr_backend_event_synchronize(d->dev, d->rb_done[r]) != OCR_OK)
        return ocr_wrap_error(OCR_ERR_CUDA, "step readback");
    return OCR_OK;
}

// Recompute mode on a GPU: the step just enqueued into slot r is waited for; while it overflowed
// and can be recomputed (amp_engine_can_recompute on the device's figures, which already include
// the steps still in flight before it), the device state is put back as it was before the attempt
// but at the lowered scale, and the same batch runs again (it is still in its upload slot; the
// device-held inputs, and with them the stochastic-rounding seed and the dropout offset of a
// graph, are this step's). The device's own update skipped the attempt's Adam update (its
// counter did not move) and restored the BN statistics; what its scaler did is overwritten:
// the scale becomes one backoff of the attempt's, good and bad counters 0, the step and overflow
// counters as before. The host mirror learns the attempts when the step is collected (in order).
// model_step: the model's dropout counter before the first attempt; t0: when that attempt began.
static ocr_status_t device_recompute(StepCtx *s, const FeedDeviceBatch *b, double lr, int slot, step_mode_t *mode,
                                     uint64_t model_step, double t0) {
    StepDevice *d = s->dev;
    AmpEngine *amp = s->amp;
    d->attempts[slot] = 0;
    d->attempt_seconds[slot] = 0;
    for (;;) {
        OCR_TRY(device_wait_readback(s, slot));
        OcrDevStep *st = (OcrDevStep *)d->rb_pinned[slot];
        const int *nonfinite = (const int *)(d->rb_pinned[slot] + sizeof(OcrDevStep));
        const int k = d->attempts[slot];
        if (!st->found_inf || !amp_engine_can_recompute(amp, st->scale_used,
                                                      (double)st->loss + s->gtc_sum[slot] + s->distill_sum[slot], k))
            return OCR_OK;
        int bad = 0;
        for (int i = 0; i < d->nparams; i++) bad += nonfinite[i] != 0;
        d->attempt_bad[slot][k] = bad;
        d->attempt_layer[slot][k] = amp_engine_bad_layer(amp, nonfinite);
        d->attempts[slot] = k + 1;
        st->scale = amp_scaler_lowered(&amp->scaler.cfg, st->scale_used);
        st->inv_scale = (float)(1.0 / (double)st->scale);
        st->found_inf = 0;
        st->event = 0;
        st->good_steps = 0;
        st->bad_steps = 0;
        st->steps -= 1;
        st->overflow_steps -= 1;
        // Ordered on the compute stream before the attempt; the pinned slot is not touched again
        // until the attempt's own readback, which the stream orders after this copy.
        if (ocr_backend_memcpy_async(d->dev, d->state, st, sizeof *st, d->stream) != OCR_OK)
            return ocr_wrap_error(OCR_ERR_CUDA, "step recompute");
        const double now = ocr_now_seconds();
        d->attempt_seconds[slot] += now - t0;
        t0 = now;
        ocr_model_set_step(s->m, model_step);
        OCR_TRY(device_run(s, b, lr, slot, mode));
        OCR_TRY(device_readback(s, slot));
    }
}

// Waits for slot r's readback and records the step in the AMP engine and the optimizer.
static ocr_status_t device_collect(StepCtx *s, int r, StepOutcome *out) {
    StepDevice *d = s->dev;
    OCR_TRY(device_wait_readback(s, r));
    // Recompute mode: the attempts that ran again come first in the host mirror (their backoffs).
    for (int k = 0; k < d->attempts[r]; k++)
        amp_engine_record_device_attempt(s->amp, d->attempt_bad[r][k], d->attempt_layer[r][k]);
    out->recomputed = d->attempts[r];
    out->recompute_seconds = d->attempt_seconds[r];
    out->recompute_layer = d->attempts[r] ? d->attempt_layer[r][0] : -1;
    d->attempts[r] = 0;
    const char *rb = d->rb_pinned[r];
    OcrDevStep st;
    memcpy(&st, rb, sizeof st);
    int n = d->nparams;
    const int *nonfinite = (const int *)(rb + sizeof(OcrDevStep));
    const unsigned *bits = (const unsigned *)(rb + sizeof(OcrDevStep) + (size_t)n * sizeof(int));
    float *amax = malloc((size_t)(n ? n : 1) * sizeof *amax);
    if (!amax) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    for (int i = 0; i < n; i++) memcpy(&amax[i], &bits[i], sizeof(float));
    float host_scale = amp_engine_loss_scale(s->amp);
    amp_engine_record_device_step(s->amp, st.found_inf, nonfinite, amax);
    free(amax);
    if (!st.found_inf) s->optim->updates++;
    // The host mirror of the scaler must follow the device exactly (same state machine).
    if (host_scale != st.scale_used || amp_engine_loss_scale(s->amp) != (s->amp->scaler.cfg.enabled ? st.scale : 1.0f) ||
        s->optim->updates != st.updates)
        return ocr_set_error(OCR_ERR_INTERNAL,
                             "GPU step: host and device disagree (scale %g/%g, next %g/%g, updates %lld/%lld)",
                             (double)host_scale, (double)st.scale_used, (double)amp_engine_loss_scale(s->amp),
                             (double)st.scale, (long long)s->optim->updates, (long long)st.updates);
    // The device recorded the ranks' summed (unweighted) CTC mean.
    reported_losses(s, st.loss, s->gtc_sum[r], s->distill_sum[r], out);
    out->grad_norm = st.found_inf ? NAN : st.grad_norm;
    out->scale = st.scale_used;
    out->skipped = st.found_inf;
    out->overflow_layer = st.found_inf ? s->amp->last_layer : -1;
    out->infeasible = st.infeasible;
    return OCR_OK;
}

// ---- every device ----------------------------------------------------------------------------------------

int step_in_flight(const StepCtx *s) { return s->dev ? STEP_MAX_IN_FLIGHT : 1; }

// Whether an overflowed step may run again (recompute mode with a dynamic loss scale).
static int recompute_mode(const StepCtx *s) {
    const AmpEngine *a = s->amp;
    return a->cfg.overflow_recompute && a->scaler.cfg.enabled && a->scaler.cfg.dynamic;
}

// The CPU's step: while host_update finds that the attempt overflowed and can be recomputed, the
// batch runs again from the state it started from (the AMP engine restored the BN statistics and
// lowered the scale; the dropout counter is set back here).
static ocr_status_t cpu_step(StepCtx *s, const FeedDeviceBatch *b, double lr, int slot) {
    StepOutcome *o = &s->done[slot];
    const uint64_t model_step = ocr_model_get_step(s->m);
    int recomputed = 0, layer = -1;
    double seconds = 0;
    for (s->attempt = 0;; s->attempt++) {
        const double t0 = ocr_now_seconds();
        memset(o, 0, sizeof *o);
        s->retry = 0;
        // A MultiHead pass consumes its labels: a recomputed attempt sets them again.
        if (s->attempt > 0) OCR_TRY(set_guide_batch(s, b));
        OCR_TRY(step_body(s, b, lr, slot, o));
        if (!s->retry) break;
        if (!recomputed) layer = o->overflow_layer;
        recomputed++;
        seconds += ocr_now_seconds() - t0;
        ocr_model_set_step(s->m, model_step);
    }
    o->recomputed = recomputed;
    o->recompute_seconds = seconds;
    o->recompute_layer = layer;
    return OCR_OK;
}

int step_pending(const StepCtx *s) { return s->npend; }

ocr_status_t step_enqueue(StepCtx *s, const FeedDeviceBatch *b, double lr, step_mode_t *mode) {
    OCR_ASSERT(b->count <= s->capacity, "batch of %d above the step capacity %d", b->count, s->capacity);
    OCR_ASSERT(s->npend < STEP_MAX_IN_FLIGHT, "%d steps in flight: collect one first", s->npend);
    OCR_ASSERT(ocr_device_equal(b->images.device, ocr_model_params(s->m)->device),
               "the batch is not on the model's device (feed_upload)");
    *mode = STEP_EAGER;
    OCR_TRY(set_guide_batch(s, b));
    const int slot = s->slot_next;
    if (s->dev) {
        const uint64_t model_step = ocr_model_get_step(s->m);
        const double t0 = ocr_now_seconds();
        OCR_TRY(device_inputs(s, lr));
        OCR_TRY(device_run(s, b, lr, slot, mode));
        OCR_TRY(device_readback(s, slot));
        if (recompute_mode(s)) OCR_TRY(device_recompute(s, b, lr, slot, mode, model_step, t0));
    } else {
        OCR_TRY(cpu_step(s, b, lr, slot));
    }
    s->npend++;
    s->slot_next = (slot + 1) % STEP_MAX_IN_FLIGHT;
    return OCR_OK;
}

ocr_status_t step_collect(StepCtx *s, StepOutcome *out) {
    memset(out, 0, sizeof *out);
    OCR_ASSERT(s->npend > 0, "step_collect: no step in flight");
    const int r = (s->slot_next - s->npend + STEP_MAX_IN_FLIGHT) % STEP_MAX_IN_FLIGHT;  // the oldest
    s->npend--;
    if (s->dev) return device_collect(s, r, out);
    *out = s->done[r];
    return OCR_OK;
}

ocr_status_t step_run(StepCtx *s, const FeedDeviceBatch *b, double lr, StepOutcome *out) {
    OCR_ASSERT(s->npend == 0, "step_run with %d steps in flight", s->npend);
    step_mode_t mode;
    OCR_TRY(step_enqueue(s, b, lr, &mode));
    return step_collect(s, out);
}

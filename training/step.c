#include "training/step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ctc.h"
#ifdef OCR_HAVE_CUDA
#include "kernels/cuda/ctc.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/train_step.h"
#endif

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
    return OCR_OK;
}

static void step_device_free(StepCtx *s);

void step_ctx_free(StepCtx *s) {
    step_device_free(s);
    ocr_tensor_free(&s->dl32);
    ocr_tensor_free(&s->logits_buf);
    ocr_tensor_free(&s->kept_logits_buf);
    ocr_tensor_free(&s->gtc_loss);
    free(s->losses);
    free(s->infeasible);
    free(s->clip);
    free(s->grad_views);
    free(s->grads);
    memset(s, 0, sizeof *s);
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
    cast_forward(&s->kept_logits, logits);
    return OCR_OK;
}

// MultiHead: the guidance branch's loss (NRTRLoss) and its gradient × weight_2 × the loss scale,
// on the model's device; the mean comes back to the host.
static ocr_status_t guide_loss(StepCtx *s, float loss_scale, double weight, double *loss) {
    const OcrTensor *logits = ocr_model_guide_logits(s->m), *targets = ocr_model_guide_targets(s->m);
    OcrTensor *dlogits = ocr_model_guide_dlogits(s->m);
    OCR_ASSERT(logits && targets && dlogits, "MultiHead: no guidance outputs after a training forward");
    if (!s->gtc_loss.data || !ocr_device_equal(s->gtc_loss.device, logits->device)) {
        ocr_tensor_free(&s->gtc_loss);
        OCR_TRY(ocr_tensor_alloc(&s->gtc_loss, OCR_F32, logits->device, 1, (int64_t[]){1}, OCR_MEM_ACTIVATIONS));
    }
    CrossEntropyParams p = ocr_model_guide_loss_params(s->m, loss_scale * (float)weight);
    cross_entropy_forward(NULL, &s->gtc_loss, NULL, logits, targets, p);
    cross_entropy_backward(dlogits, logits, targets, p);
    float v;
    copy_bytes(ocr_cpu(), &v, s->gtc_loss.device, s->gtc_loss.data, sizeof v);
    *loss = weight * (double)v;
    return OCR_OK;
}

ocr_status_t step_run(StepCtx *s, const OcrTensor *images, int32_t *labels, int32_t *lengths, int max_len, double lr,
                      StepOutcome *out) {
    int B = (int)images->shape[0];
    OCR_ASSERT(B <= s->capacity);
    OcrParamTable *params = ocr_model_params(s->m);
    AmpEngine *amp = s->amp;
    memset(out, 0, sizeof *out);

    const MultiHeadSpec *mh = &ocr_model_arch(s->m)->multihead;
    const int multi = mh->kind != OCR_GUIDE_NONE;
    OCR_TRY(amp_engine_begin_step(amp));
    ocr_params_zero_grads(params);
    if (multi) OCR_TRY(ocr_model_set_guide_labels(s->m, labels, lengths, B, max_len));
    OCR_TRY(ocr_model_forward(s->m, images, 1));
    amp_engine_after_forward(amp);
    const OcrTensor *logits = amp_loss_logits(ocr_model_logits(s->m), &s->logits_buf);
    OCR_TRY(keep_logits(s, logits));
    OcrTensor *dl = ocr_model_dlogits(s->m), *dl32;
    OCR_TRY(loss_grad_f32(s, dl, logits, &dl32));
    OcrTensor targets = ocr_tensor_view(labels, OCR_I32, ocr_cpu(), 2, (int64_t[]){B, max_len});
    OcrTensor lens = ocr_tensor_view(lengths, OCR_I32, ocr_cpu(), 1, (int64_t[]){B});
    OcrTensor losses = ocr_tensor_view(s->losses, OCR_F32, ocr_cpu(), 1, (int64_t[]){B});
    OcrTensor infeas = ocr_tensor_view(s->infeasible, OCR_I32, ocr_cpu(), 1, (int64_t[]){B});
    // zero_infinity: one label longer than the sequence (with its adjacent repeats) would make
    // the whole gradient NaN and the step look like an AMP overflow; it is zeroed and counted.
    // MultiLoss: loss = weight_1 · CTC + weight_2 · guidance; each gradient carries its weight.
    // Data parallelism: each rank's batch mean is divided by the world size before the sum over
    // the ranks, so the summed gradient is the mean over all of their samples (a power-of-two
    // world divides exactly).
    const int world = s->sync ? s->sync->world : 1;
    const float loss_scale = amp_engine_loss_scale(amp);
    const float grad_mult = loss_scale / (float)world;
    CtcParams cp = {OCR_CTC_REDUCTION_PADDLE, 1, s->focal, multi ? grad_mult * (float)mh->weight_ctc : grad_mult};
    out->loss = ctc_loss_forward(&losses, NULL, dl32, &infeas, logits, &targets, &lens, NULL, cp);
    if (multi) {
        out->loss_ctc = mh->weight_ctc * out->loss;
        OCR_TRY(guide_loss(s, grad_mult, mh->weight_gtc, &out->loss_gtc));
        out->loss = out->loss_ctc + out->loss_gtc;
    }
    for (int i = 0; i < B; i++) out->infeasible += s->infeasible[i] != 0;
    if (dl32 != dl) amp_loss_dlogits(dl, dl32);
    if (s->sync) grad_sync_begin(s->sync);
    OCR_TRY(ocr_model_backward(s->m));
    if (s->sync) {
        OCR_TRY(grad_sync_finish(s->sync));
        // The step's figures are those of the whole global batch: rank means averaged.
        double v[4] = {out->loss, out->loss_ctc, out->loss_gtc, (double)out->infeasible};
        OCR_TRY(ocr_dist_sum_f64(s->sync->dist, v, 4, "the step's loss all-reduce"));
        out->loss = v[0] / world;
        out->loss_ctc = v[1] / world;
        out->loss_gtc = v[2] / world;
        out->infeasible = (int)v[3];
    }
    // Frozen parameters (Global.freeze_params) take no part in the step: their gradients are
    // cleared before the finite check and the clip norm (the GPU step leaves them out of its
    // table), and the update below skips them.
    for (int i = 0; s->optim->n_frozen && i < params->count; i++) {
        if (!s->optim->frozen[i]) continue;
        OcrTensor g = ocr_params_grad(params, i);
        zero_tensor(&g);
    }

    out->skipped = amp_engine_check_grads(amp);
    if (s->sync) {
        // Every rank holds the same sums, but a reduction need not round identically on every
        // rank for more than two: the maximum of the flags makes all of them skip together.
        int32_t found = out->skipped;
        OCR_TRY(ocr_dist_max_i32(s->sync->dist, &found, 1, "the found-inf all-reduce"));
        if (found && !out->skipped) amp->last.found_inf = 1;
        out->skipped = found;
    }
    out->grad_norm = NAN;
    if (!out->skipped) {
        for (int i = 0; i < params->count; i++) {
            s->grad_views[i] = ocr_params_grad(params, i);
            s->grads[i] = &s->grad_views[i];
        }
        out->grad_norm = optim_clip_factors(s->optim, s->grads, amp->grad_scale, s->clip);
        for (int i = 0; i < params->count; i++) {
            if (s->optim->frozen[i]) continue;
            OcrTensor w = ocr_params_tensor(params, i);
            AdamParams p = {0};
            optim_fill(s->optim, i, lr, &p);
            amp_engine_adam_params(amp, i, &p);
            p.grad_scale *= s->clip[i];
            adam_update(&w, amp_engine_master(amp, i), &s->optim->m[i], &s->optim->v[i], &s->grad_views[i], p);
        }
        s->optim->updates++;
    }
    out->scale = amp_engine_loss_scale(amp);
    amp_engine_end_step(amp);
    return OCR_OK;
}

// ---- the GPU step --------------------------------------------------------------------------------------

#ifdef OCR_HAVE_CUDA

#define STEP_SLOTS 2

struct StepDevice {
    int device;
    ocr_device_t dev;
    ocr_stream_t stream, prev_stream;  // our compute stream; the device's stream before it
    OcrDevStep *state;                  // device memory
    OcrFusedAdam *fa;
    OcrDevScalerConfig scaler;
    int nparams;
    // Host → device per-step inputs and device → host readbacks, two pinned slots each.
    OcrDevStepInput *in_pinned[STEP_SLOTS];
    ocr_event_t in_done[STEP_SLOTS];
    int in_used[STEP_SLOTS];
    int in_next;
    char *rb_pinned[STEP_SLOTS];  // OcrDevStep, then nonfinite (n ints), then amax bits (n)
    size_t rb_bytes;
    ocr_event_t rb_done[STEP_SLOTS];
    int npend, rb_next;  // steps in flight; the slot the next readback uses (the oldest: rb_next − npend)
    // Per-step device tensors (capacity B) and the graph's static inputs.
    OcrTensor losses, loss, infeas;
    OcrTensor g_images, g_widths, g_labels, g_lengths;
    int cap_h, cap_w, cap_c, cap_len;
    AmpSnapshot bn;
    // Graph.
    int graphs_allowed;
    ocr_graph_exec_t graph;
    int gB, gH, gW, gL;       // the graph's shape
    int wB, wH, wW, wL;       // the last eager step's shape (a capture needs one warm-up)
    int64_t captures, replays;
    // MultiHead: the guidance loss of the steps in flight (weighted, the ranks' mean), by
    // readback slot, and the f32 gradient of the guidance logits before the loss scale.
    double gtc_loss[STEP_SLOTS];
    OcrTensor gtc_dl32;
};

static void step_device_free(StepCtx *s) {
    StepDevice *d = s->dev;
    if (!d) return;
    if (d->stream) ocr_cuda_stream_synchronize(d->stream);
    ocr_cuda_graph_destroy(d->graph);
    ocr_fused_adam_free(d->fa);
    for (int k = 0; k < STEP_SLOTS; k++) {
        ocr_cuda_host_free(d->in_pinned[k]);
        ocr_cuda_host_free(d->rb_pinned[k]);
        ocr_cuda_event_destroy(d->in_done[k]);
        ocr_cuda_event_destroy(d->rb_done[k]);
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
    ocr_cuda_set_stream(d->device, d->prev_stream);
    ocr_cuda_stream_destroy(d->stream);
    free(d);
    s->dev = NULL;
}

static int graphs_possible(const StepCtx *s) {
    // Activation statistics are host reads in the middle of the step.
    return s->amp->cfg.activation_stats_every == 0;
}

ocr_status_t step_device_init(StepCtx *s, const StepDeviceOptions *o) {
    OcrParamTable *params = ocr_model_params(s->m);
    OCR_ASSERT(!s->dev, "step_device_init twice");
    if (params->device.type != OCR_DEVICE_CUDA)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "step_device_init: the model is not on a CUDA device");
    StepDevice *d = calloc(1, sizeof *d);
    if (!d) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    s->dev = d;
    d->device = params->device.index;
    d->dev = params->device;
    d->nparams = params->count;
    d->prev_stream = ocr_cuda_get_stream(d->device);
    if (ocr_cuda_stream_create(d->device, &d->stream)) return ocr_wrap_error(OCR_ERR_CUDA, "compute stream");
    // Everything before (weights, masters) was enqueued on the old stream: finish it first.
    if (ocr_cuda_synchronize(d->device)) return ocr_wrap_error(OCR_ERR_CUDA, "device set-up");
    ocr_cuda_set_stream(d->device, d->stream);

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
    d->fa = ocr_fused_adam_create(d->device, ft, n, fc, o->max_updates);
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
    st0.scale = amp_scaler_scale(as);
    st0.inv_scale = amp_scaler_inv_scale(as);
    st0.scale_used = st0.scale;
    st0.good_steps = as->good_steps;
    st0.bad_steps = as->bad_steps;
    st0.steps = as->steps;
    st0.overflow_steps = as->overflow_steps;
    st0.updates = s->optim->updates;
    d->state = ocr_mem_alloc(d->dev, OCR_MEM_OPTIMIZER, sizeof(OcrDevStep));
    if (!d->state) return ocr_wrap_error(OCR_ERR_OOM, "device step state");
    copy_bytes(d->dev, d->state, ocr_cpu(), &st0, sizeof st0);

    d->rb_bytes = sizeof(OcrDevStep) + 2 * (size_t)(n ? n : 1) * sizeof(int);
    for (int k = 0; k < STEP_SLOTS; k++) {
        d->in_pinned[k] = ocr_cuda_host_alloc(sizeof(OcrDevStepInput));
        d->rb_pinned[k] = ocr_cuda_host_alloc(d->rb_bytes);
        if (!d->in_pinned[k] || !d->rb_pinned[k]) return ocr_wrap_error(OCR_ERR_OOM, "pinned step buffers");
        if (ocr_cuda_event_create(d->device, &d->in_done[k]) || ocr_cuda_event_create(d->device, &d->rb_done[k]))
            return ocr_wrap_error(OCR_ERR_CUDA, "step events");
    }
    int B = s->capacity;
    OCR_TRY(ocr_tensor_alloc(&d->losses, OCR_F32, d->dev, 1, (int64_t[]){B}, OCR_MEM_DATA));
    OCR_TRY(ocr_tensor_alloc(&d->loss, OCR_F32, d->dev, 1, (int64_t[]){1}, OCR_MEM_DATA));
    OCR_TRY(ocr_tensor_alloc(&d->infeas, OCR_I32, d->dev, 1, (int64_t[]){B}, OCR_MEM_DATA));
    d->graphs_allowed = o->cuda_graph && graphs_possible(s);
    if (o->cuda_graph && !d->graphs_allowed)
        ocr_log(OCR_LOG_INFO, "cuda graph: off (Global.amp_activation_stats_every reads activations on the host)");
    if (ocr_model_arch(s->m)->multihead.kind != OCR_GUIDE_NONE) {
        // The guidance labels reach the device by synchronous copies inside the forward and its
        // loss is read back within the step: MultiHead steps run eagerly, one at a time.
        if (d->graphs_allowed) ocr_log(OCR_LOG_INFO, "cuda graph: off for MultiHead (per-step guidance labels)");
        d->graphs_allowed = 0;
    }
    return OCR_OK;
}

ocr_status_t step_device_attach_sync(StepCtx *s, GradSync *g) {
    StepDevice *d = s->dev;
    OCR_ASSERT(d, "step_device_attach_sync before step_device_init");
    if (ocr_dist_world_size(g->dist) > 1 && ocr_dist_backend(g->dist) != OCR_DIST_NCCL)
        return ocr_set_error(OCR_ERR_UNSUPPORTED, "data parallelism on GPUs all-reduces device buffers with NCCL; the "
                             "transport here is %s (a CUDA build with NCCL and MPI picks nccl; Distributed.backend mpi "
                             "is for Global.device cpu)", ocr_dist_backend_name(ocr_dist_backend(g->dist)));
    s->sync = g;
    ocr_dist_set_stream(g->dist, d->stream);
    // The collectives are issued from the host per bucket (and their order is part of the
    // protocol): the step runs eagerly.
    if (d->graphs_allowed) ocr_log(OCR_LOG_INFO, "cuda graph: off under data parallelism (NCCL calls per bucket)");
    d->graphs_allowed = 0;
    return OCR_OK;
}

void step_invalidate_graph(StepCtx *s) {
    StepDevice *d = s->dev;
    if (!d) return;
    if (d->graph) {
        // A graph may still be running: its exec object is released after the stream is done.
        ocr_cuda_stream_synchronize(d->stream);
        ocr_cuda_graph_destroy(d->graph);
        d->graph = NULL;
    }
    d->wB = d->wH = d->wW = d->wL = 0;
}

void step_graph_counts(const StepCtx *s, int64_t *captures, int64_t *replays) {
    *captures = s->dev ? s->dev->captures : 0;
    *replays = s->dev ? s->dev->replays : 0;
}

int step_pending(const StepCtx *s) { return s->dev ? s->dev->npend : 0; }

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
    copy_bytes(d->dev, g->images.data, d->dev, b->images.data, ocr_tensor_bytes(&b->images));
    copy_bytes(d->dev, g->widths.data, d->dev, b->widths.data, ocr_tensor_bytes(&b->widths));
    copy_bytes(d->dev, g->lengths.data, d->dev, b->lengths.data, ocr_tensor_bytes(&b->lengths));
    copy_bytes(d->dev, g->labels.data, d->dev, b->labels.data, ocr_tensor_bytes(&b->labels));
}

// The body of one step: enqueue-only, no host wait, no allocation once warm (capturable).
// MultiHead on the device: the guidance loss (NRTRLoss / SARLoss) and its gradient. The gradient
// is computed in f32 with weight_2 / world and then multiplied by the device-held loss scale,
// rounded once into the guidance dlogits' dtype (as the CTC gradient is), so a small f16 gradient
// is not flushed before it is scaled. The loss comes back to the host at once (the step waits for
// the device here) and is kept for step_collect under the readback slot this step will use.
static ocr_status_t guide_loss_device(StepCtx *s, int world) {
    StepDevice *d = s->dev;
    const MultiHeadSpec *mh = &ocr_model_arch(s->m)->multihead;
    const OcrTensor *logits = ocr_model_guide_logits(s->m), *targets = ocr_model_guide_targets(s->m);
    OcrTensor *dlogits = ocr_model_guide_dlogits(s->m);
    OCR_ASSERT(logits && targets && dlogits, "MultiHead: no guidance outputs after a training forward");
    if (!s->gtc_loss.data) OCR_TRY(ocr_tensor_alloc(&s->gtc_loss, OCR_F32, d->dev, 1, (int64_t[]){1}, OCR_MEM_ACTIVATIONS));
    if (!d->gtc_dl32.data || ocr_tensor_numel(&d->gtc_dl32) < ocr_tensor_numel(dlogits)) {
        ocr_tensor_free(&d->gtc_dl32);
        OCR_TRY(ocr_tensor_alloc(&d->gtc_dl32, OCR_F32, d->dev, dlogits->ndim, dlogits->shape, OCR_MEM_ACTIVATIONS));
    }
    OcrTensor dl32 = ocr_tensor_view(d->gtc_dl32.data, OCR_F32, d->dev, dlogits->ndim, dlogits->shape);
    CrossEntropyParams p = ocr_model_guide_loss_params(s->m, (float)mh->weight_gtc / (float)world);
    cross_entropy_forward(NULL, &s->gtc_loss, NULL, logits, targets, p);
    cross_entropy_backward(&dl32, logits, targets, p);
    ocr_dev_scale_by_loss_scale(dlogits, &dl32, d->state);
    if (ocr_cuda_stream_synchronize(d->stream)) return ocr_wrap_error(OCR_ERR_CUDA, "MultiHead guidance loss");
    float v;
    copy_bytes(ocr_cpu(), &v, s->gtc_loss.device, s->gtc_loss.data, sizeof v);
    double loss = mh->weight_gtc * (double)v;
    if (s->sync) {  // the ranks' mean, as the CTC loss is reported
        OCR_TRY(ocr_dist_sum_f64(s->sync->dist, &loss, 1, "the guidance loss all-reduce"));
        loss /= world;
    }
    d->gtc_loss[d->rb_next] = loss;
    return OCR_OK;
}

static ocr_status_t enqueue_body(StepCtx *s, const FeedDeviceBatch *b) {
    StepDevice *d = s->dev;
    OcrParamTable *params = ocr_model_params(s->m), *stats = ocr_model_stats(s->m);
    AmpEngine *amp = s->amp;
    int B = b->count;
    ocr_fused_adam_begin(d->fa, d->state);
    if (amp->cfg.policy.level == OCR_AMP_O1) {
        // Recast every step on the device: the host does not know yet whether the last step
        // was skipped, and a recast of unchanged weights gives the same copies.
        for (int i = 0; i < params->count; i++) amp->param_views[i] = ocr_params_tensor(params, i);
        amp_cast_cache_refresh(&amp->cache, amp->param_views);
    }
    if (stats->data && stats->bytes) OCR_TRY(amp_snapshot_take_on(&d->bn, d->dev, stats->data, stats->bytes));
    ocr_params_zero_grads(params);
    OCR_TRY(ocr_model_forward_u8(s->m, &b->images, &b->widths, 1));
    amp_engine_after_forward(amp);
    const OcrTensor *logits = amp_loss_logits(ocr_model_logits(s->m), &s->logits_buf);
    OCR_TRY(keep_logits(s, logits));
    OcrTensor *dl = ocr_model_dlogits(s->m), *dl32;
    OCR_TRY(loss_grad_f32(s, dl, logits, &dl32));
    OcrTensor losses = ocr_tensor_view(d->losses.data, OCR_F32, d->dev, 1, (int64_t[]){B});
    OcrTensor infeas = ocr_tensor_view(d->infeas.data, OCR_I32, d->dev, 1, (int64_t[]){B});
    // The gradient of the loss itself (grad_scale 1, or 1/world: data parallelism sums the
    // ranks' gradients into the mean over all their samples), then times the device-held loss
    // scale, rounded once into the model's dlogits.
    const int world = s->sync ? s->sync->world : 1;
    const MultiHeadSpec *mh = &ocr_model_arch(s->m)->multihead;
    const int multi = mh->kind != OCR_GUIDE_NONE;
    // MultiLoss: loss = weight_1 · CTC + weight_2 · guidance; each gradient carries its weight.
    CtcParams cp = {OCR_CTC_REDUCTION_PADDLE, 1, s->focal, (multi ? (float)mh->weight_ctc : 1.0f) / (float)world};
    ctc_loss_forward_async_cuda(&losses, &d->loss, dl32, &infeas, logits, &b->labels, &b->lengths, NULL, cp);
    ocr_dev_scale_by_loss_scale(dl, dl32, d->state);
    if (multi) OCR_TRY(guide_loss_device(s, world));
    if (s->sync) {
        // The sum of the ranks' batch means (step_collect divides it by the world size).
        OcrDistRequest req;
        OCR_TRY(ocr_dist_allreduce_start(s->sync->dist, d->loss.data, 1, OCR_F32, "the step's loss all-reduce", &req));
        OCR_TRY(ocr_dist_wait(s->sync->dist, &req));
    }
    ocr_dev_step_record(d->state, &d->loss, &infeas);
    // NCCL: the buckets' all-reduces start on their own stream as the backward enqueues each
    // layer; the fused optimizer below waits for all of them on the device. Every rank then
    // holds the same sums (NCCL reduces each element once and broadcasts it), so the fused
    // pass's found-inf and the scale update agree on every rank without a host round trip.
    if (s->sync) grad_sync_begin(s->sync);
    OCR_TRY(ocr_model_backward(s->m));
    if (s->sync) OCR_TRY(grad_sync_finish(s->sync));
    ocr_fused_adam_step(d->fa, d->state, d->scaler);
    if (stats->data && stats->bytes) ocr_dev_restore_if_inf(d->device, stats->data, d->bn.saved, stats->bytes, d->state);
    return OCR_OK;
}

ocr_status_t step_run_device(StepCtx *s, const FeedDeviceBatch *b, double lr, step_mode_t *mode) {
    StepDevice *d = s->dev;
    OCR_ASSERT(d, "step_run_device before step_device_init");
    OCR_ASSERT(b->count <= s->capacity, "batch of %d above the step capacity %d", b->count, s->capacity);
    OCR_ASSERT(d->npend < STEP_SLOTS, "two steps in flight: collect one first");
    AmpEngine *amp = s->amp;
    int B = b->count, H = (int)b->images.shape[1], W = (int)b->images.shape[2], L = b->max_len;
    *mode = STEP_EAGER;
    // MultiHead: the forward copies this step's guidance labels (set by the caller with
    // ocr_model_set_guide_labels) into buffers the previous step's kernels may still read.
    if (ocr_model_arch(s->m)->multihead.kind != OCR_GUIDE_NONE && d->npend > 0 &&
        ocr_cuda_stream_synchronize(d->stream))
        return ocr_wrap_error(OCR_ERR_CUDA, "MultiHead step");

    // This step's inputs: lr, stochastic-rounding seed, dropout counter (pinned slot → device).
    int k = d->in_next;
    if (d->in_used[k] && ocr_cuda_event_synchronize(d->in_done[k])) return ocr_wrap_error(OCR_ERR_CUDA, "step inputs");
    uint64_t model_step = ocr_model_get_step(s->m);
    OcrDevStepInput *in = d->in_pinned[k];
    in->lr = lr;
    // The engine counts a step when its outcome is recorded: the one still in flight counts too.
    in->sr_seed =
        amp->cfg.stochastic_rounding ? amp_stochastic_round_seed(amp->cfg.seed, amp->step + d->npend) : 0;
    in->dropout_step = model_step + 1;  // what the training forward of this step counts
    if (ocr_cuda_memcpy_async(&d->state->in, in, sizeof *in, d->stream) || ocr_cuda_event_record(d->in_done[k], d->stream))
        return ocr_wrap_error(OCR_ERR_CUDA, "step inputs");
    d->in_used[k] = 1;
    d->in_next = (k + 1) % STEP_SLOTS;

    int same_graph = d->graph && B == d->gB && H == d->gH && W == d->gW && L == d->gL;
    if (d->graph && !same_graph) step_invalidate_graph(s);
    int warm = B == d->wB && H == d->wH && W == d->wW && L == d->wL;
    if (same_graph) {
        FeedDeviceBatch g;
        copy_to_static(d, b, &g);
        if (ocr_cuda_graph_launch(d->graph, d->stream)) return ocr_wrap_error(OCR_ERR_CUDA, "graph replay");
        // What the eager forward does on the host: its step counter and op-call statistics.
        ocr_model_set_step(s->m, model_step + 1);
        amp_engine_after_forward(amp);
        d->replays++;
        *mode = STEP_REPLAYED;
    } else if (d->graphs_allowed && warm) {
        OCR_TRY(ensure_static_inputs(d, b, s->capacity));
        FeedDeviceBatch g;
        copy_to_static(d, b, &g);
        // Captured with the model's dropout counter at 0; the kernels add the device's
        // in.dropout_step (train_step.h), so every replay draws its own step's masks.
        ocr_model_set_step(s->m, UINT64_MAX);
        ocr_cuda_set_dropout_step_source(d->device, &d->state->in.dropout_step);
        ocr_status_t st = OCR_OK;
        ocr_graph_exec_t ge = NULL;
        if (ocr_cuda_graph_capture_begin(d->stream)) {
            st = ocr_wrap_error(OCR_ERR_CUDA, "graph capture");
        } else {
            st = enqueue_body(s, &g);
            if (ocr_cuda_graph_capture_end(d->stream, &ge) && st == OCR_OK) st = ocr_wrap_error(OCR_ERR_CUDA, "graph capture");
        }
        ocr_cuda_set_dropout_step_source(d->device, NULL);
        ocr_model_set_step(s->m, model_step + 1);
        if (st == OCR_OK) st = ocr_cuda_graph_launch(ge, d->stream) ? ocr_wrap_error(OCR_ERR_CUDA, "graph launch") : OCR_OK;
        if (st != OCR_OK) {
            // Nothing of the failed capture ran: the step runs eagerly, and so do the next ones.
            ocr_cuda_graph_destroy(ge);
            ocr_log(OCR_LOG_WARN, "cuda graph: capture failed (%s); running eager launches", ocr_last_error());
            d->graphs_allowed = 0;
            ocr_model_set_step(s->m, model_step);
            OCR_TRY(enqueue_body(s, b));
        } else {
            d->graph = ge;
            d->gB = B, d->gH = H, d->gW = W, d->gL = L;
            d->captures++;
            *mode = STEP_CAPTURED;
        }
    } else {
        OCR_TRY(enqueue_body(s, b));
        d->wB = B, d->wH = H, d->wW = W, d->wL = L;
    }

    // The readback of this step: state, per-parameter flags and amax, one event.
    int r = d->rb_next;
    char *rb = d->rb_pinned[r];
    size_t n = (size_t)d->nparams;
    if (ocr_cuda_memcpy_async(rb, d->state, sizeof(OcrDevStep), d->stream) ||
        ocr_cuda_memcpy_async(rb + sizeof(OcrDevStep), ocr_fused_adam_nonfinite(d->fa), n * sizeof(int), d->stream) ||
        ocr_cuda_memcpy_async(rb + sizeof(OcrDevStep) + n * sizeof(int), ocr_fused_adam_amax_bits(d->fa),
                              n * sizeof(unsigned), d->stream) ||
        ocr_cuda_event_record(d->rb_done[r], d->stream))
        return ocr_wrap_error(OCR_ERR_CUDA, "step readback");
    d->npend++;
    d->rb_next = (r + 1) % STEP_SLOTS;
    return OCR_OK;
}

ocr_status_t step_collect(StepCtx *s, StepOutcome *out) {
    StepDevice *d = s->dev;
    memset(out, 0, sizeof *out);
    OCR_ASSERT(d && d->npend > 0, "step_collect: no step in flight");
    int r = (d->rb_next - d->npend + STEP_SLOTS) % STEP_SLOTS;  // the oldest
    // Data parallelism: the readback follows the step's NCCL all-reduces, so a peer that hangs
    // would hold it forever; this wait gives up after Distributed.timeout_s and ends the job.
    if (s->sync)
        OCR_TRY(ocr_dist_wait_device_event(s->sync->dist, d->rb_done[r], "the GPU step (its gradient all-reduce)"));
    if (ocr_cuda_event_synchronize(d->rb_done[r])) return ocr_wrap_error(OCR_ERR_CUDA, "step readback");
    d->npend--;
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
    out->loss = s->sync ? st.loss / s->sync->world : st.loss;
    const MultiHeadSpec *mh = &ocr_model_arch(s->m)->multihead;
    if (mh->kind != OCR_GUIDE_NONE) {  // the device recorded the unweighted CTC mean
        out->loss_ctc = mh->weight_ctc * out->loss;
        out->loss_gtc = d->gtc_loss[r];
        out->loss = out->loss_ctc + out->loss_gtc;
    }
    out->grad_norm = st.found_inf ? NAN : st.grad_norm;
    out->scale = st.scale_used;
    out->skipped = st.found_inf;
    out->infeasible = st.infeasible;
    return OCR_OK;
}

#else  // no CUDA in this build

struct StepDevice {
    int unused;
};

static void step_device_free(StepCtx *s) {
    free(s->dev);
    s->dev = NULL;
}

ocr_status_t step_device_init(StepCtx *s, const StepDeviceOptions *o) {
    (void)s, (void)o;
    return ocr_set_error(OCR_ERR_UNSUPPORTED, "the GPU training step: this build has no CUDA backend");
}

ocr_status_t step_device_attach_sync(StepCtx *s, GradSync *g) {
    (void)s, (void)g;
    return ocr_set_error(OCR_ERR_UNSUPPORTED, "the GPU training step: this build has no CUDA backend");
}

ocr_status_t step_run_device(StepCtx *s, const FeedDeviceBatch *b, double lr, step_mode_t *mode) {
    (void)s, (void)b, (void)lr, (void)mode;
    return ocr_set_error(OCR_ERR_UNSUPPORTED, "the GPU training step: this build has no CUDA backend");
}

int step_pending(const StepCtx *s) {
    (void)s;
    return 0;
}

ocr_status_t step_collect(StepCtx *s, StepOutcome *out) {
    (void)s, (void)out;
    return ocr_set_error(OCR_ERR_UNSUPPORTED, "the GPU training step: this build has no CUDA backend");
}

void step_invalidate_graph(StepCtx *s) { (void)s; }

void step_graph_counts(const StepCtx *s, int64_t *captures, int64_t *replays) {
    (void)s;
    *captures = *replays = 0;
}
#endif

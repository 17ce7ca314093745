// The recognition network (models/model.h): building it from an OcrArch, moving it between devices,
// planning and running its passes, fusing the rep layers into the deploy form, and freezing BN for
// fine-tuning. Its weights on disk are models/weights_io.c.
#include "models/model.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/timer.h"
#include "kernels/input.h"
#include "kernels/ops.h"
#include "models/model_internal.h"

static ocr_status_t check_arch(const OcrArch *a) {
    if (a->in_channels < 1 || a->num_classes < 2)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "architecture: %d input channels, %d classes", a->in_channels,
                             a->num_classes);
    if (a->backbone == OCR_BACKBONE_SVTRNET && !a->svtr.last_stage && a->neck_svtr)
        return ocr_set_error(OCR_ERR_UNSUPPORTED, "architecture: SVTRNet without its last stage feeds no SVTR neck");
    return OCR_OK;
}

static void build(OcrModel *m) {
    OcrBuilder b = {&m->params, &m->stats, &m->ops};
    const OcrArch *a = &m->arch;
    int feat = 0;
    switch (a->backbone) {
    case OCR_BACKBONE_MV1E:
        mv1e_build(&b, &m->mv1e, "backbone", a->in_channels, a->mv1e);
        feat = m->mv1e.out_channels;
        break;
    case OCR_BACKBONE_LCNETV3:
        lcnet_build(&b, &m->lcnet, "backbone", a->in_channels, a->lcnet);
        feat = m->lcnet.out_channels;
        break;
    case OCR_BACKBONE_SVTRNET:
        svtrnet_build(&b, &m->svtr, "backbone", a->in_channels, a->svtr);
        feat = m->svtr.out_channels;
        break;
    case OCR_BACKBONE_LCNETV4:
        lcnet4_build(&b, &m->lcnet4, "backbone", a->in_channels, a->lcnet4);
        feat = m->lcnet4.out_channels;
        break;
    case OCR_BACKBONE_HGNETV2:
        hgnet2_build(&b, &m->hgnet2, "backbone", a->in_channels, a->hgnet2);
        feat = m->hgnet2.out_channels;
        break;
    }
    // MultiHead keeps PaddleOCR's names: head.ctc_encoder.encoder.*, head.ctc_head.fc.*, then
    // the guidance branch (head.before_gtc.*, head.gtc_head.*).
    const int multi = a->multihead.kind != OCR_GUIDE_NONE;
    const int backbone_channels = feat;
    if (a->neck_svtr) {
        SvtrNeckSpec s = a->neck;
        s.in_channels = feat;
        svtrneck_build(&b, &m->neck, multi ? "head.ctc_encoder.encoder" : "neck.encoder", s);
        feat = s.dims;
    }
    if (a->neck_light) {
        LightSvtrSpec s = a->light;
        s.in_channels = feat;
        lightsvtr_build(&b, &m->light, multi ? "head.ctc_encoder.encoder" : "neck.encoder", s);
        feat = s.dims;
    }
    if (a->head_guide) ctcguide_build(&b, &m->ctc_guide, multi ? "head.ctc_head.guide_layer" : "head.guide_layer", feat);
    ctchead_build(&b, &m->head, multi ? "head.ctc_head" : "head",
                  (CtcHeadSpec){.in = feat, .classes = a->num_classes, .mid = a->head_mid,
                                .fc_decay = (float)a->fc_decay});
    if (multi) guide_build(&b, &m->guide, &a->multihead, backbone_channels, a->num_classes);
}

ocr_status_t ocr_model_create(OcrModel **out, const OcrArch *arch) {
    *out = NULL;
    OCR_TRY(check_arch(arch));
    OcrModel *m = calloc(1, sizeof *m);
    if (!m) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    m->arch = *arch;
    ocr_params_init_table(&m->params, OCR_MEM_PARAMS);
    ocr_params_init_table(&m->stats, OCR_MEM_PARAMS);
    m->arena.device = m->params.device;
    build(m);
    ocr_status_t st = ocr_params_alloc(&m->params, arch->seed);
    if (st == OCR_OK) st = ocr_params_alloc(&m->stats, arch->seed);
    if (st != OCR_OK) {
        ocr_model_free(m);
        return st;
    }
    *out = m;
    return OCR_OK;
}

ocr_status_t ocr_model_from_config(OcrModel **out, const OcrConfig *cfg) {
    OcrArch a;
    *out = NULL;
    OCR_TRY(ocr_arch_from_config(&a, cfg));
    return ocr_model_create(out, &a);
}

void ocr_model_free(OcrModel *m) {
    if (!m) return;
    ocr_params_free(&m->params);
    ocr_params_free(&m->stats);
    ocr_ops_free(&m->ops);
    svtrnet_free(&m->svtr);
    svtrneck_free(&m->neck);
    lightsvtr_free(&m->light);
    if (m->arch.multihead.kind != OCR_GUIDE_NONE) guide_free(&m->guide);
    free(m->guide_ratios);
    ocr_arena_release(&m->arena);
    free(m);
}

const OcrArch *ocr_model_arch(const OcrModel *m) { return &m->arch; }

ocr_device_t ocr_model_device(const OcrModel *m) { return m->params.device; }

ocr_status_t ocr_model_to_device(OcrModel *m, ocr_device_t device) {
    if (ocr_device_equal(device, m->params.device)) return OCR_OK;
    char name[16];
    ocr_device_name(device, name, sizeof name);
    if (device.type == OCR_DEVICE_CUDA) {
#ifndef OCR_HAVE_CUDA
        return ocr_set_error(OCR_ERR_UNSUPPORTED, "model to %s: this build has no CUDA backend", name);
#else
        int n = ocr_cuda_device_count();
        if (device.index < 0 || device.index >= n)
            return ocr_set_error(OCR_ERR_NOT_FOUND, "model to %s: %d CUDA device(s) usable", name, n);
#endif
    }
    if (m->cast_cache)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "model to %s: move the model before attaching the AMP engine", name);
    m->pass_valid = 0;
    m->plan_valid = 0;
    ocr_arena_release(&m->arena);
    OCR_TRY(ocr_params_to_device(&m->params, device));
    OCR_TRY(ocr_params_to_device(&m->stats, device));
    m->arena.device = device;
    return OCR_OK;
}
OcrParamTable *ocr_model_params(OcrModel *m) { return &m->params; }
OcrParamTable *ocr_model_stats(OcrModel *m) { return &m->stats; }
OcrOpTable *ocr_model_ops(OcrModel *m) { return &m->ops; }
const Mv1e *ocr_model_layers_mv1e(const OcrModel *m) { return m->arch.backbone == OCR_BACKBONE_MV1E ? &m->mv1e : NULL; }
const Lcnet *ocr_model_layers_lcnet(const OcrModel *m) {
    return m->arch.backbone == OCR_BACKBONE_LCNETV3 ? &m->lcnet : NULL;
}
const SvtrNeck *ocr_model_layers_neck(const OcrModel *m) { return m->arch.neck_svtr ? &m->neck : NULL; }
const CtcHead *ocr_model_layers_head(const OcrModel *m) { return &m->head; }
const Lcnet4 *ocr_model_layers_lcnet4(const OcrModel *m) {
    return m->arch.backbone == OCR_BACKBONE_LCNETV4 ? &m->lcnet4 : NULL;
}
const LightSvtr *ocr_model_layers_light(const OcrModel *m) { return m->arch.neck_light ? &m->light : NULL; }
const CtcGuide *ocr_model_layers_guide(const OcrModel *m) { return m->arch.head_guide ? &m->ctc_guide : NULL; }
const Hgnet2 *ocr_model_layers_hgnet2(const OcrModel *m) {
    return m->arch.backbone == OCR_BACKBONE_HGNETV2 ? &m->hgnet2 : NULL;
}
int64_t ocr_model_param_count(const OcrModel *m) {
    int64_t n = 0;
    for (int i = 0; i < m->params.count; i++) n += m->params.items[i].numel;
    return n;
}

int ocr_model_set_compute_dtype(OcrModel *m, const char *pattern, const char *type, ocr_dtype_t dtype) {
    OCR_ASSERT(ocr_dtype_is_float(dtype));
    int n = 0;
    for (int i = 0; i < m->ops.count; i++) {
        OcrOpInfo *o = &m->ops.items[i];
        if (fnmatch(pattern, o->name, 0) != 0) continue;
        if (type && strcmp(type, o->type) != 0) continue;
        o->compute_dtype = dtype;
        n++;
    }
    m->plan_valid = 0;
    return n;
}

// ---- passes ----------------------------------------------------------------------------------------

static void ctx_setup(OcrModel *m, int training, int plan) {
    OcrCtx *c = &m->ctx;
    memset(c, 0, sizeof *c);
    c->params = &m->params;
    c->stats = &m->stats;
    c->ops = &m->ops;
    c->arena = &m->arena;
    c->plan = plan;
    c->training = training;
    c->seed = m->arch.seed;
    c->step = m->step;
    c->bn_momentum = -1.0f;
    c->keep_all = m->keep_all;
    c->profile = m->profile && !plan;
    c->t_last = ocr_now_seconds();
    c->cast_cache = plan ? NULL : m->cast_cache;
    c->bwd_hook = plan ? NULL : m->grad_ready_fn;
    c->bwd_hook_user = m->grad_ready_user;
    c->bn_sync = plan || !training ? NULL : m->bn_sync;
    for (int i = 0; i < m->ops.count; i++) {
        memset(&m->ops.items[i].out, 0, sizeof m->ops.items[i].out);
        m->ops.items[i].flops = 0;
        m->ops.items[i].out_ndim = 0;
    }
    m->logits = m->probs = NULL;
    memset(&m->dlogits, 0, sizeof m->dlogits);
    memset(&m->dinput, 0, sizeof m->dinput);
    memset(&m->xin, 0, sizeof m->xin);
    m->dinput_valid = 0;
}

// A training pass of a MultiHead model runs the guidance branch (calibration passes do not).
static int guided_pass(const OcrModel *m) {
    return m->arch.multihead.kind != OCR_GUIDE_NONE && m->ctx.training && !m->guide_off;
}

static ocr_status_t forward_body(OcrModel *m, const OcrTensor *x) {
    OcrCtx *c = &m->ctx;
    OcrTensor *f = NULL;
    switch (m->arch.backbone) {
    case OCR_BACKBONE_MV1E: f = mv1e_forward(c, &m->mv1e, x); break;
    case OCR_BACKBONE_LCNETV3: f = lcnet_forward(c, &m->lcnet, x); break;
    case OCR_BACKBONE_SVTRNET: f = svtrnet_forward(c, &m->svtr, x); break;
    case OCR_BACKBONE_LCNETV4: f = lcnet4_forward(c, &m->lcnet4, x); break;
    case OCR_BACKBONE_HGNETV2: f = hgnet2_forward(c, &m->hgnet2, x); break;
    }
    m->xin = *x;
    if (f->data != x->data) ocr_ctx_release(c, &m->xin);  // inference: only arena memory is released
    if (!c->failed && f->shape[1] != 1) {
        ocr_ctx_fail(c, "the backbone's output map has %lld rows and Im2Seq needs 1 (is the input height right?)",
                     (long long)f->shape[1]);
    }
    if (c->failed)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "input %lldx%lld: %s", (long long)x->shape[1],
                             (long long)x->shape[2], c->error);
    OcrTensor *backbone_out = f;
    m->backbone_out = *f;
    if (m->arch.neck_svtr) {
        OcrTensor *g = svtrneck_forward(c, &m->neck, f);
        ocr_ctx_release(c, f);
        f = g;
    }
    if (m->arch.neck_light) {
        OcrTensor *g = lightsvtr_forward(c, &m->light, f);
        ocr_ctx_release(c, f);
        f = g;
    }
    if (m->arch.head_guide) {
        OcrTensor *g = ctcguide_forward(c, &m->ctc_guide, f);
        ocr_ctx_release(c, f);
        f = g;
    }
    if (c->failed)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "input %lldx%lld: %s", (long long)x->shape[1],
                             (long long)x->shape[2], c->error);
    m->seq = ocr_tensor_reshape(f, 3, (int64_t[]){f->shape[0], f->shape[2], f->shape[3]});
    m->logits = ctchead_forward(c, &m->head, &m->seq);
    m->probs = m->head.probs;
    OcrTensor feat = m->seq;
    ocr_ctx_release(c, &feat);
    if (c->training) m->dlogits = m->dlogits_shared ? *m->logits : ocr_ctx_like(c, m->logits);
    // MultiHead: the guidance branch reads the backbone map itself (not detached) in training.
    if (guided_pass(m)) guide_forward(c, &m->guide, backbone_out);
    return OCR_OK;
}

// Frees the normalised batch of a uint8 pass once the first layer's backward has run.
static void release_input(OcrModel *m) {
    OcrArena *a = &m->arena;
    uintptr_t p = (uintptr_t)m->xin.data;
    if (p && p >= a->base && p < a->base + a->top) ocr_ctx_free(&m->ctx, &m->xin);
    memset(&m->xin, 0, sizeof m->xin);
}

static void backward_body(OcrModel *m) {
    OcrCtx *c = &m->ctx;
    OcrTensor dseq = ctchead_backward(c, &m->head, &m->dlogits, 1);
    // Shared: the head's backward has freed the logits, which were the gradient too.
    if (!m->dlogits_shared) ocr_ctx_free(c, &m->dlogits);
    memset(&m->dlogits, 0, sizeof m->dlogits);
    OcrTensor dfeat = ocr_tensor_reshape(&dseq, 4, (int64_t[]){dseq.shape[0], 1, dseq.shape[1], dseq.shape[2]});
    if (m->arch.head_guide) {
        OcrTensor d = ctcguide_backward(c, &m->ctc_guide, &dfeat, 1);
        ocr_ctx_free(c, &dfeat);
        dfeat = d;
    }
    if (m->arch.neck_light) {
        OcrTensor d = lightsvtr_backward(c, &m->light, &dfeat, 1);
        ocr_ctx_free(c, &dfeat);
        dfeat = d;
    }
    if (m->arch.neck_svtr) {
        OcrTensor d = svtrneck_backward(c, &m->neck, &dfeat, 1);
        ocr_ctx_free(c, &dfeat);
        dfeat = d;
    }
    if (guided_pass(m)) {
        // The guidance branch's gradient of the backbone map joins the CTC branch's (none with
        // use_guide): the backbone's backward sees their sum.
        OcrTensor dg = guide_backward(c, &m->guide);
        OcrTensor dg4 = ocr_tensor_reshape(&dg, 4, (int64_t[]){dg.shape[0], 1, dg.shape[1], dg.shape[2]});
        ocr_ctx_accumulate(c, &dfeat, &dg4);
    }
    // Distillation on backbone features (ocr_model_set_backbone_grad): its gradient joins.
    if (m->backbone_extra_grad && dfeat.data && !c->plan) ocr_accumulate(&dfeat, m->backbone_extra_grad);
    m->backbone_extra_grad = NULL;
    if (!dfeat.data) {
        // use_guide: the backbone gets no gradient; its saved activations are simply dropped
        // with the rest of the arena.
        return;
    }
    OcrTensor dx = {0};
    int need = m->want_dinput;
    switch (m->arch.backbone) {
    case OCR_BACKBONE_MV1E: dx = mv1e_backward(c, &m->mv1e, &dfeat, need); break;
    case OCR_BACKBONE_LCNETV3: dx = lcnet_backward(c, &m->lcnet, &dfeat, need); break;
    case OCR_BACKBONE_SVTRNET: dx = svtrnet_backward(c, &m->svtr, &dfeat, need); break;
    case OCR_BACKBONE_LCNETV4: dx = lcnet4_backward(c, &m->lcnet4, &dfeat, need); break;
    case OCR_BACKBONE_HGNETV2: dx = hgnet2_backward(c, &m->hgnet2, &dfeat, need); break;
    }
    ocr_ctx_free(c, &dfeat);
    release_input(m);
    // The input gradient stays in the arena until the next pass.
    m->dinput = dx;
    m->dinput_valid = need && dx.data != NULL;
}

const OcrTensor *ocr_model_backbone_out(const OcrModel *m) {
    return m->pass_valid && m->pass_training && m->backbone_out.data ? &m->backbone_out : NULL;
}

void ocr_model_set_backbone_grad(OcrModel *m, const OcrTensor *g) { m->backbone_extra_grad = g; }

void ocr_model_want_input_grad(OcrModel *m, int on) {
    m->want_dinput = on;
    m->plan_valid = 0;
}

void ocr_model_share_dlogits(OcrModel *m, int on) {
    if (m->dlogits_shared == (on != 0)) return;
    m->dlogits_shared = on != 0;
    m->plan_valid = 0;
}

const OcrTensor *ocr_model_input_grad(const OcrModel *m) { return m->dinput_valid ? &m->dinput : NULL; }

// The network's input: float images as they are, or a uint8 batch normalised into the arena
// (in the first op's compute dtype, so autocast has nothing left to round).
static OcrTensor network_input(OcrModel *m, const OcrTensor *images, const OcrTensor *widths) {
    if (images->dtype != OCR_U8) return *images;
    OcrCtx *c = &m->ctx;
    OcrTensor x = ocr_ctx_new(c, m->ops.items[0].compute_dtype, 4, images->shape);
    if (!c->plan) ocr_input_normalize_padded_forward(&x, images, widths);
    return x;
}

// A training pass of a MultiHead NRTR model has as many decoder positions as its batch's longest
// text + 1, so the plan depends on the labels too; 0 for every other pass.
static int plan_guide_steps(const OcrModel *m) {
    return m->arch.multihead.kind == OCR_GUIDE_NRTR ? guide_pass_steps(&m->guide) : 0;
}

static ocr_status_t plan_pass(OcrModel *m, int batch, int height, int width, int training, ocr_dtype_t in_dtype,
                              OcrMemPlan *plan) {
    memset(plan, 0, sizeof *plan);
    if (batch < 1 || height < 1 || width < 1)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "plan: batch %d, height %d and width %d must be positive", batch,
                             height, width);
    m->pass_valid = 0;
    ctx_setup(m, training, 1);
    ocr_arena_begin_plan(&m->arena);
    OcrTensor images = ocr_tensor_view(NULL, in_dtype, m->params.device, 4,
                                       (int64_t[]){batch, height, width, m->arch.in_channels});
    OcrTensor x = network_input(m, &images, NULL);
    ocr_status_t st = forward_body(m, &x);
    if (st != OCR_OK) {
        ocr_arena_reset(&m->arena);
        m->plan_valid = 0;
        return st;
    }
    double flops = 0;
    for (int i = 0; i < m->ops.count; i++) flops += m->ops.items[i].flops;
    plan->seq_len = (int)m->logits->shape[1];
    plan->classes = (int)m->logits->shape[2];
    if (training) backward_body(m);
    plan->batch = batch;
    plan->height = height;
    plan->width = width;
    plan->training = training;
    plan->params_bytes = (int64_t)m->params.bytes;
    plan->grads_bytes = (int64_t)m->params.bytes;
    plan->stats_bytes = (int64_t)m->stats.bytes;
    plan->activations_bytes = (int64_t)m->arena.peak;
    plan->flops = flops;
    plan->input_u8 = in_dtype == OCR_U8;
    ocr_arena_reset(&m->arena);
    m->plan = *plan;
    m->plan_input = in_dtype;
    m->plan_guide_steps = plan_guide_steps(m);
    m->plan_valid = 1;
    return OCR_OK;
}

ocr_status_t ocr_model_plan(OcrModel *m, int batch, int height, int width, int training, OcrMemPlan *plan) {
    return plan_pass(m, batch, height, width, training, m->input_dtype, plan);
}

ocr_status_t ocr_model_plan_u8(OcrModel *m, int batch, int height, int width, int training, OcrMemPlan *plan) {
    return plan_pass(m, batch, height, width, training, OCR_U8, plan);
}

static const char *device_str(ocr_device_t d, char *buf) { return ocr_device_name(d, buf, 16); }

// O1: a cache made stale by an optimizer step (or a weight load) is refreshed from the
// parameters before the pass reads it, so passes outside a training step (evaluation) see the
// current weights in low precision, as autocast would.
static ocr_status_t refresh_cast_cache(OcrModel *m) {
    AmpCastCache *cc = m->cast_cache;
    if (!cc || cc->valid) return OCR_OK;
    OcrTensor *views = malloc((size_t)(m->params.count ? m->params.count : 1) * sizeof *views);
    if (!views) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    for (int i = 0; i < m->params.count; i++) views[i] = ocr_params_tensor(&m->params, i);
    amp_cast_cache_refresh(cc, views);
    free(views);
    return OCR_OK;
}

// Plans when the step's shape differs from the current plan, then starts the real pass.
static ocr_status_t begin_pass(OcrModel *m, const OcrTensor *images, int training) {
    int B = (int)images->shape[0], H = (int)images->shape[1], W = (int)images->shape[2];
    ocr_dtype_t in = images->dtype;
    if (!m->plan_valid || m->plan.batch != B || m->plan.height != H || m->plan.width != W ||
        m->plan.training != training || m->plan_input != in ||
        (training && m->plan_guide_steps != plan_guide_steps(m))) {
        if (in != OCR_U8) m->input_dtype = in;
        OcrMemPlan p;
        OCR_TRY(plan_pass(m, B, H, W, training, in, &p));
    }
    OCR_TRY(refresh_cast_cache(m));
    return ocr_arena_begin_run(&m->arena, (size_t)m->plan.activations_bytes);
}

// Shape, dtype and device of a batch (widths: (B) int32 or NULL).
static ocr_status_t check_images(const OcrModel *m, const OcrTensor *images, const OcrTensor *widths, int u8) {
    char d[96], a[16], b[16];
    if (images->ndim != 4 || images->shape[3] != m->arch.in_channels ||
        (u8 ? images->dtype != OCR_U8 : !ocr_dtype_is_float(images->dtype)))
        return ocr_set_error(OCR_ERR_INVALID_ARG, "forward: images must be (B, H, W, %d) %s, got %s",
                             m->arch.in_channels, u8 ? "uint8" : "float", ocr_tensor_describe(images, d, sizeof d));
    if (!ocr_device_equal(images->device, m->params.device))
        return ocr_set_error(OCR_ERR_INVALID_ARG, "forward: the images are on %s, the model's parameters on %s",
                             device_str(images->device, a), device_str(m->params.device, b));
    if (widths) {
        if (widths->dtype != OCR_I32 || ocr_tensor_numel(widths) != images->shape[0])
            return ocr_set_error(OCR_ERR_INVALID_ARG, "forward: widths must be %lld int32 values, got %s",
                                 (long long)images->shape[0], ocr_tensor_describe(widths, d, sizeof d));
        if (!ocr_device_equal(widths->device, images->device))
            return ocr_set_error(OCR_ERR_INVALID_ARG, "forward: the widths are on %s, the images on %s",
                                 device_str(widths->device, a), device_str(images->device, b));
    }
    return OCR_OK;
}

static ocr_status_t forward_pass(OcrModel *m, const OcrTensor *images, const OcrTensor *widths, int training) {
    if (training && m->arch.multihead.kind != OCR_GUIDE_NONE &&
        (!m->guide.labels_set || m->guide.h_batch != images->shape[0]))
        return ocr_set_error(OCR_ERR_INVALID_ARG,
                             "MultiHead: a training pass of %lld images needs that batch's labels first "
                             "(ocr_model_set_guide_labels)",
                             (long long)images->shape[0]);
    OCR_TRY(begin_pass(m, images, training));
    if (training) m->step++;
    ctx_setup(m, training, 0);
    OcrTensor x = network_input(m, images, widths);
    OCR_TRY(forward_body(m, &x));
    m->pass_valid = 1;
    m->pass_training = training;
    return OCR_OK;
}

ocr_status_t ocr_model_forward(OcrModel *m, const OcrTensor *images, int training) {
    m->pass_valid = 0;
    OCR_TRY(check_images(m, images, NULL, 0));
    return forward_pass(m, images, NULL, training);
}

ocr_status_t ocr_model_forward_u8(OcrModel *m, const OcrTensor *images, const OcrTensor *widths, int training) {
    m->pass_valid = 0;
    OCR_TRY(check_images(m, images, widths, 1));
    return forward_pass(m, images, widths, training);
}

ocr_status_t ocr_model_set_cast_cache(OcrModel *m, AmpCastCache *cache) {
    if (cache && cache->count != m->params.count)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "cast cache: built for %d parameters, the model has %d",
                             cache->count, m->params.count);
    m->cast_cache = cache;
    return OCR_OK;
}

uint64_t ocr_model_get_step(const OcrModel *m) { return m->step; }
void ocr_model_set_step(OcrModel *m, uint64_t step) { m->step = step; }

ocr_status_t ocr_model_calibrate_bn(OcrModel *m, const OcrTensor *images) {
    OCR_TRY(check_images(m, images, NULL, 0));
    OCR_TRY(begin_pass(m, images, 1));
    uint64_t step = m->step;
    ctx_setup(m, 1, 0);
    m->ctx.bn_momentum = 0.0f;
    m->guide_off = 1;  // BN statistics come from the backbone and the CTC neck alone
    ocr_status_t st = forward_body(m, images);
    m->guide_off = 0;
    m->step = step;
    m->pass_valid = 0;
    ocr_arena_reset(&m->arena);
    return st;
}

const OcrTensor *ocr_model_logits(const OcrModel *m) { return m->pass_valid ? m->logits : NULL; }
const OcrTensor *ocr_model_probs(const OcrModel *m) { return m->pass_valid ? m->probs : NULL; }
OcrTensor *ocr_model_dlogits(OcrModel *m) { return m->pass_valid && m->pass_training ? &m->dlogits : NULL; }

ocr_status_t ocr_model_set_guide_labels(OcrModel *m, const int32_t *labels, const int32_t *lengths, int batch,
                                        int max_len) {
    if (m->arch.multihead.kind == OCR_GUIDE_NONE)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "guidance labels: the model has no MultiHead");
    return guide_set_labels(&m->guide, labels, lengths, batch, max_len);
}

ocr_status_t ocr_model_set_guide_valid_ratios(OcrModel *m, const float *valid_ratios, int batch) {
    if (m->arch.multihead.kind != OCR_GUIDE_SAR) return OCR_OK;
    return guide_set_valid_ratios(&m->guide, valid_ratios, batch);
}

ocr_status_t ocr_model_set_guide_batch(OcrModel *m, const int32_t *labels, const int32_t *lengths,
                                       const int32_t *widths, int batch, int max_len, int width) {
    if (m->arch.multihead.kind == OCR_GUIDE_NONE) return OCR_OK;
    OCR_TRY(ocr_model_set_guide_labels(m, labels, lengths, batch, max_len));
    if (m->arch.multihead.kind != OCR_GUIDE_SAR) return OCR_OK;
    // SAR: its attention and its holistic feature read only the image columns of each line
    // (PaddleOCR's valid_ratio = min(1, width_i / W), RecResizeImg's); the padding is masked.
    if (m->guide_ratios_cap < batch) {
        float *v = realloc(m->guide_ratios, (size_t)batch * sizeof *v);
        if (!v) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
        m->guide_ratios = v;
        m->guide_ratios_cap = batch;
    }
    for (int i = 0; i < batch; i++)
        m->guide_ratios[i] = widths[i] >= width ? 1.0f : (float)widths[i] / (float)width;
    return ocr_model_set_guide_valid_ratios(m, m->guide_ratios, batch);
}

static int guide_valid(const OcrModel *m) {
    return m->pass_valid && m->pass_training && m->arch.multihead.kind != OCR_GUIDE_NONE;
}
const OcrTensor *ocr_model_guide_logits(const OcrModel *m) { return guide_valid(m) ? m->guide.logits : NULL; }
const OcrTensor *ocr_model_guide_targets(const OcrModel *m) { return guide_valid(m) ? &m->guide.targets : NULL; }
OcrTensor *ocr_model_guide_dlogits(OcrModel *m) { return guide_valid(m) ? &m->guide.dlogits : NULL; }
CrossEntropyParams ocr_model_guide_loss_params(const OcrModel *m, float grad_scale) {
    return guide_loss_params(&m->guide, grad_scale);
}

ocr_status_t ocr_model_backward(OcrModel *m) {
    if (!m->pass_valid || !m->pass_training)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "backward needs a training forward pass first");
    OCR_TRY(ocr_params_alloc_grads(&m->params));
    m->ctx.t_last = ocr_now_seconds();
    backward_body(m);
    m->pass_valid = 0;
    if (m->arch.neck_svtr && m->arch.neck.use_guide && m->arch.multihead.kind == OCR_GUIDE_NONE)
        ocr_arena_reset(&m->arena);
    return OCR_OK;
}

void ocr_model_keep_activations(OcrModel *m, int on) {
    m->keep_all = on;
    m->plan_valid = 0;
}

const OcrTensor *ocr_model_op_output(const OcrModel *m, const char *op_name) {
    if (!m->pass_valid || (!m->pass_training && !m->keep_all)) return NULL;
    for (int i = 0; i < m->ops.count; i++)
        if (strcmp(m->ops.items[i].name, op_name) == 0) return m->ops.items[i].out.data ? &m->ops.items[i].out : NULL;
    return NULL;
}

void ocr_model_set_profile(OcrModel *m, int on) { m->profile = on; }

void ocr_model_set_grad_ready_hook(OcrModel *m, ocr_grad_ready_fn fn, void *user) {
    m->grad_ready_fn = fn;
    m->grad_ready_user = user;
    // The pass already under way (a forward done, its backward next) takes it too.
    if (!m->ctx.plan) {
        m->ctx.bwd_hook = fn;
        m->ctx.bwd_hook_user = user;
    }
}

void ocr_model_set_bn_sync(OcrModel *m, const OcrBnSync *sync) { m->bn_sync = sync; }

void ocr_model_reset_profile(OcrModel *m) {
    for (int i = 0; i < m->ops.count; i++) m->ops.items[i].time_fwd = m->ops.items[i].time_bwd = 0;
}

void ocr_model_arena_usage(const OcrModel *m, int64_t *peak, int64_t *live) {
    if (peak) *peak = (int64_t)m->arena.peak;
    if (live) *live = (int64_t)m->arena.in_use;
}

// ---- fusion ------------------------------------------------------------------------------------------

static ocr_status_t copy_table(OcrParamTable *dst, const OcrParamTable *src) {
    for (int i = 0; i < dst->count; i++) {
        int j = ocr_params_find(src, dst->items[i].name);
        if (j < 0) continue;
        if (src->items[j].numel != dst->items[i].numel)
            return ocr_set_error(OCR_ERR_INTERNAL, "fuse: %s changed size", dst->items[i].name);
        OcrTensor s = ocr_params_tensor(src, j), d = ocr_params_tensor(dst, i);
        float *tmp = malloc((size_t)ocr_tensor_numel(&s) * sizeof(float));
        if (!tmp) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
        ocr_tensor_to_f32(&s, tmp);
        ocr_tensor_from_f32(&d, tmp);
        free(tmp);
    }
    return OCR_OK;
}

// t_params / t_stats: host views of the training model's tables.
static ocr_status_t fuse_rep(OcrModel *d, const RepLayer *dl, const OcrParamTable *t_params,
                             const OcrParamTable *t_stats, const RepLayer *tl) {
    OcrTensor w = ocr_params_tensor(&d->params, dl->reparam.w), b = ocr_params_tensor(&d->params, dl->reparam.b);
    float *k = malloc((size_t)ocr_tensor_numel(&w) * sizeof(float)), *bias = malloc((size_t)tl->cout * sizeof(float));
    if (!k || !bias) {
        free(k);
        free(bias);
        return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    }
    rep_fuse(tl, t_params, t_stats, k, bias);
    ocr_tensor_from_f32(&w, k);
    ocr_tensor_from_f32(&b, bias);
    free(k);
    free(bias);
    return OCR_OK;
}

ocr_status_t ocr_model_fuse(OcrModel **out, const OcrModel *t) {
    *out = NULL;
    const int v4 = t->arch.backbone == OCR_BACKBONE_LCNETV4;
    // PPHGNetV2: no rep layers; the deploy form is the same network without the unused classifier.
    const int hg = t->arch.backbone == OCR_BACKBONE_HGNETV2;
    if (t->arch.backbone != OCR_BACKBONE_LCNETV3 && !v4 && !hg)
        return ocr_set_error(OCR_ERR_INVALID_ARG,
                             "fuse: only PPLCNetV3, PPLCNetV4 and PPHGNetV2_B4 have a deploy form (this is %s)",
                             backbone_name(t->arch.backbone));
    if (hg ? t->arch.hgnet2.deploy : v4 ? t->arch.lcnet4.deploy : t->arch.lcnet.deploy)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "fuse: the model is already in deploy form");
    OcrArch a = t->arch;
    if (hg)
        a.hgnet2.deploy = 1;
    else if (v4)
        a.lcnet4.deploy = 1;
    else
        a.lcnet.deploy = 1;
    OcrModel *d;
    OCR_TRY(ocr_model_create(&d, &a));
    // The deploy model is built on the CPU from host copies and then moved to t's device.
    OcrParamTable hp, hs;
    ocr_status_t st = ocr_params_host_copy(&t->params, &hp);
    if (st == OCR_OK) {
        st = ocr_params_host_copy(&t->stats, &hs);
        if (st != OCR_OK) ocr_params_host_release(&hp);
    }
    if (st != OCR_OK) {
        ocr_model_free(d);
        return st;
    }
    st = copy_table(&d->params, &hp);
    if (st == OCR_OK) st = copy_table(&d->stats, &hs);
    // PPLCNetV4: Conv2D_BN, ConvBNAct and RepDWConv layers fused as PPLCNetV4.rep() does.
    if (st == OCR_OK && v4) lcnet4_fuse(&t->lcnet4, &hp, &hs, &d->lcnet4, &d->params);
    for (int i = 0; st == OCR_OK && !v4 && !hg && i < t->lcnet.nblocks; i++) {
        st = fuse_rep(d, &d->lcnet.blocks[i].dw, &hp, &hs, &t->lcnet.blocks[i].dw);
        if (st == OCR_OK) st = fuse_rep(d, &d->lcnet.blocks[i].pw, &hp, &hs, &t->lcnet.blocks[i].pw);
    }
    ocr_params_host_release(&hp);
    ocr_params_host_release(&hs);
    if (st == OCR_OK) st = ocr_model_to_device(d, t->params.device);
    for (int i = 0; i < d->ops.count; i++)
        for (int j = 0; j < t->ops.count; j++)
            if (strcmp(d->ops.items[i].name, t->ops.items[j].name) == 0)
                d->ops.items[i].compute_dtype = t->ops.items[j].compute_dtype;
    if (st != OCR_OK) {
        ocr_model_free(d);
        return st;
    }
    *out = d;
    return OCR_OK;
}

// ---- fine-tuning: frozen BN ------------------------------------------------------------------------

int ocr_model_freeze_norm(OcrModel *m, const char *pattern, int on_off) {
    int n = 0;
    for (int i = 0; i < m->ops.count; i++) {
        OcrOpInfo *o = &m->ops.items[i];
        if (strcmp(o->type, "batchnorm") != 0) continue;
        if (pattern && fnmatch(pattern, o->name, 0) != 0) continue;
        o->bn_frozen = on_off;
        n++;
    }
    // The plan does not depend on the mode (a frozen BN saves the same statistics), but a
    // captured GPU step replays the mode it was captured with: freeze before training.
    return n;
}

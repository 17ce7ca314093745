#include "models/svtr/nn.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/timer.h"

// ---- op table and builder --------------------------------------------------------------

void ocr_ops_free(OcrOpTable *t) {
    for (int i = 0; i < t->count; i++) free(t->items[i].name);
    free(t->items);
    memset(t, 0, sizeof *t);
}

int ocr_build_op(OcrBuilder *b, const char *name, const char *type) {
    OcrOpTable *t = b->ops;
    if (t->count == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 128;
        t->items = realloc(t->items, (size_t)t->cap * sizeof *t->items);
        OCR_ASSERT(t->items, "out of host memory");
    }
    OcrOpInfo *o = &t->items[t->count];
    memset(o, 0, sizeof *o);
    o->name = strdup(name);
    OCR_ASSERT(o->name);
    o->type = type;
    o->compute_dtype = OCR_F32;
    return t->count++;
}

int ocr_build_param(OcrBuilder *b, int op, const char *name, int ndim, const int64_t *shape, OcrInit init,
                    ocr_param_role_t role, OcrParamAttr attr) {
    OcrParamTable *t = role == OCR_ROLE_STAT ? b->stats : b->params;
    int i = ocr_params_add(t, name, ndim, shape, init, role);
    t->items[i].lr_mult = attr.lr_mult;
    t->items[i].decay_kind = attr.decay_kind;
    t->items[i].decay = attr.decay;
    t->items[i].op = op;
    t->ops_recorded = 1;
    if (role != OCR_ROLE_STAT && op >= 0) b->ops->items[op].params += t->items[i].numel;
    return i;
}

OcrInit ocr_init_const(float v) { OcrInit i = {OCR_INIT_CONST, v, 0.0f}; return i; }
OcrInit ocr_init_kaiming_normal(int64_t fan_in) {
    OcrInit i = {OCR_INIT_NORMAL, 0.0f, (float)sqrt(2.0 / (double)fan_in)};
    return i;
}
OcrInit ocr_init_kaiming_uniform(int64_t fan_in) {
    float lim = (float)sqrt(6.0 / (double)fan_in);
    OcrInit i = {OCR_INIT_UNIFORM, -lim, lim};
    return i;
}
OcrInit ocr_init_uniform(float lo, float hi) { OcrInit i = {OCR_INIT_UNIFORM, lo, hi}; return i; }
OcrInit ocr_init_trunc_normal(float std) { OcrInit i = {OCR_INIT_TRUNC_NORMAL, 0.0f, std}; return i; }

char *ocr_name(char *buf, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    OCR_ASSERT(n >= 0 && (size_t)n < size, "layer name too long: %s...", buf);
    return buf;
}

static char *join(char *buf, size_t n, const char *a, const char *b) { return ocr_name(buf, n, "%s.%s", a, b); }

// ---- context helpers ----------------------------------------------------------------------

OcrTensor ocr_ctx_param(const OcrCtx *c, int i) { return ocr_params_tensor(c->params, i); }
OcrTensor ocr_ctx_weight(const OcrCtx *c, int i) {
    const OcrTensor *low = c->cast_cache ? amp_cast_cache_get(c->cast_cache, i) : NULL;
    return low ? *low : ocr_params_tensor(c->params, i);
}
OcrTensor ocr_ctx_grad(const OcrCtx *c, int i) { return ocr_params_grad(c->params, i); }
OcrTensor ocr_ctx_stat(const OcrCtx *c, int i) { return ocr_params_tensor(c->stats, i); }
ocr_dtype_t ocr_ctx_dtype(const OcrCtx *c, int op) { return c->ops->items[op].compute_dtype; }

OcrTensor ocr_ctx_new(OcrCtx *c, ocr_dtype_t dtype, int ndim, const int64_t *shape) {
    return ocr_arena_tensor(c->arena, dtype, ndim, shape);
}
OcrTensor ocr_ctx_like(OcrCtx *c, const OcrTensor *t) { return ocr_arena_tensor(c->arena, t->dtype, t->ndim, t->shape); }
void ocr_ctx_free(OcrCtx *c, OcrTensor *t) { ocr_arena_free(c->arena, t); }

static int in_arena(const OcrCtx *c, const OcrTensor *t) {
    uintptr_t p = (uintptr_t)t->data;
    return t->data && p >= c->arena->base && p < c->arena->base + c->arena->top;
}

void ocr_ctx_release(OcrCtx *c, OcrTensor *t) {
    if (c->training || c->keep_all || !in_arena(c, t)) return;
    ocr_arena_free(c->arena, t);
}

// Op-table entries showing t's memory: their values are gone (freed or overwritten).
static void forget_outputs(OcrCtx *c, const OcrTensor *t) {
    for (int i = 0; i < c->ops->count; i++)
        if (c->ops->items[i].out.data == t->data) memset(&c->ops->items[i].out, 0, sizeof c->ops->items[i].out);
}

void ocr_ctx_drop(OcrCtx *c, OcrTensor *t) {
    if (c->keep_all || !in_arena(c, t)) return;
    forget_outputs(c, t);
    ocr_arena_free(c->arena, t);
}

void ocr_ctx_fail(OcrCtx *c, const char *fmt, ...) {
    if (c->failed) return;
    c->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->error, sizeof c->error, fmt, ap);
    va_end(ap);
}

static void prof_mark(OcrCtx *c, int op, int bwd) {
    if (!c->profile || c->plan) return;
    double now = ocr_now_seconds();
    OcrOpInfo *o = &c->ops->items[op];
    if (bwd) o->time_bwd += now - c->t_last;
    else o->time_fwd += now - c->t_last;
    c->t_last = now;
}

void ocr_ctx_bwd_done(OcrCtx *c, int op) {
    prof_mark(c, op, 1);
    if (c->bwd_hook && !c->plan) c->bwd_hook(c->bwd_hook_user, op);
}

void ocr_ctx_bwd_time(OcrCtx *c, int op) { prof_mark(c, op, 1); }

void ocr_ctx_record(OcrCtx *c, int op, const OcrTensor *out, double flops) {
    prof_mark(c, op, 0);
    OcrOpInfo *o = &c->ops->items[op];
    o->out_ndim = out->ndim;
    for (int d = 0; d < OCR_MAX_DIMS; d++) o->out_shape[d] = out->shape[d];
    o->flops = flops;
    o->out = *out;
}

void ocr_ctx_accumulate(OcrCtx *c, OcrTensor *dst, OcrTensor *src) {
    if (!src->data) return;
    if (!dst->data) {
        *dst = *src;
        memset(src, 0, sizeof *src);
        return;
    }
    if (!c->plan) ocr_accumulate(dst, src);
    ocr_ctx_free(c, src);
}

static int out_size(int64_t in, int k, int s, int p) {
    int64_t num = in + 2 * (int64_t)p - k;
    if (num < 0) return 0;
    return (int)(num / s + 1);
}

// ---- autocast (see nn.h) ------------------------------------------------------------------------

// The input op `op` runs on: x itself, or (*cast = 1) a new arena copy in the op's compute
// dtype when that dtype would round x.
OcrTensor ocr_ctx_autocast_input(OcrCtx *c, int op, const OcrTensor *x, int widen, int *cast) {
    ocr_dtype_t d = ocr_ctx_dtype(c, op);
    *cast = x->dtype != d && (widen || d != OCR_F32);
    if (!*cast) return *x;
    OcrTensor t = ocr_ctx_new(c, d, x->ndim, x->shape);
    if (!c->plan) ocr_cast_forward(&t, x);
    return t;
}
static OcrTensor autocast_input(OcrCtx *c, int op, const OcrTensor *x, int *cast) {
    return ocr_ctx_autocast_input(c, op, x, 0, cast);
}

OcrTensor ocr_ctx_cast_grad(OcrCtx *c, OcrTensor *dx, ocr_dtype_t in_dtype) {
    if (dx->dtype == in_dtype) return *dx;
    OcrTensor g = ocr_ctx_new(c, in_dtype, dx->ndim, dx->shape);
    if (!c->plan) ocr_cast_backward(&g, dx);
    ocr_ctx_free(c, dx);
    return g;
}

// Inference: the copy is dead once the op has run.
static void autocast_done(OcrCtx *c, OcrTensor *x, int cast) {
    if (cast) ocr_ctx_release(c, x);
}

// Backward of the cast: the input gradient in the input's dtype (frees *dx); then the copy goes.
static OcrTensor autocast_backward(OcrCtx *c, OcrTensor *dx, OcrTensor *x, int cast, ocr_dtype_t in_dtype) {
    if (!cast) return *dx;
    OcrTensor g = {0};
    if (dx->data) {
        g = ocr_ctx_new(c, in_dtype, dx->ndim, dx->shape);
        if (!c->plan) ocr_cast_backward(&g, dx);
        ocr_ctx_free(c, dx);
    }
    ocr_ctx_free(c, x);
    return g;
}

static OcrTensor shaped(const OcrTensor *x, int64_t last) {
    int64_t shape[OCR_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) shape[d] = x->shape[d];
    shape[x->ndim - 1] = last;
    return ocr_tensor_view(NULL, x->dtype, x->device, x->ndim, shape);
}

// ---- convolution ----------------------------------------------------------------------------

// A weight initialiser left at zero (constant 0) is a spec with its winit forgotten: no layer
// starts a weight at zero.
static int init_is_unset(OcrInit i) { return i.kind == OCR_INIT_CONST && i.a == 0.0f && i.b == 0.0f; }

void lconv_build(OcrBuilder *b, LConv *l, const char *name, LConvSpec s) {
    char buf[256];
    memset(l, 0, sizeof *l);
    OCR_ASSERT(s.kh > 0 && s.kw > 0, "%s: LConvSpec.kh and .kw must be set", name);
    OCR_ASSERT(s.sh > 0 && s.sw > 0, "%s: LConvSpec.sh and .sw must be set", name);
    OCR_ASSERT(s.groups >= 1, "%s: LConvSpec.groups must be set (1 for a dense conv)", name);
    OCR_ASSERT(!init_is_unset(s.winit), "%s: LConvSpec.winit must be set", name);
    OCR_ASSERT(s.cin % s.groups == 0 && s.cout % s.groups == 0);
    l->cin = s.cin;
    l->cout = s.cout;
    l->kh = s.kh;
    l->kw = s.kw;
    l->p.stride_h = s.sh;
    l->p.stride_w = s.sw;
    l->p.pad_h = s.ph;
    l->p.pad_w = s.pw;
    l->p.groups = s.groups;
    l->op = ocr_build_op(b, name, "conv2d");
    OcrOpInfo *o = &b->ops->items[l->op];
    o->conv_stride[0] = s.sh;
    o->conv_stride[1] = s.sw;
    o->conv_pad[0] = s.ph;
    o->conv_pad[1] = s.pw;
    o->conv_groups = s.groups;
    l->w = ocr_build_param(b, l->op, join(buf, sizeof buf, name, "weight"), 4,
                           (int64_t[]){s.cout, s.kh, s.kw, s.cin / s.groups}, s.winit, OCR_ROLE_WEIGHT, s.attr);
    l->b = s.bias ? ocr_build_param(b, l->op, join(buf, sizeof buf, name, "bias"), 1, (int64_t[]){s.cout}, s.binit,
                                    OCR_ROLE_BIAS, s.attr)
                  : -1;
}

OcrTensor *lconv_forward(OcrCtx *c, LConv *l, const OcrTensor *x) {
    OCR_ASSERT(x->ndim == 4 && x->shape[3] == l->cin, "%s: expected %d input channels, got %lld",
               c->ops->items[l->op].name, l->cin, (long long)x->shape[3]);
    int64_t n = x->shape[0];
    int ho = out_size(x->shape[1], l->kh, l->p.stride_h, l->p.pad_h);
    int wo = out_size(x->shape[2], l->kw, l->p.stride_w, l->p.pad_w);
    if (ho <= 0 || wo <= 0) {
        ocr_ctx_fail(c, "%s: its input map %lldx%lld is too small for a %dx%d kernel", c->ops->items[l->op].name,
                     (long long)x->shape[1], (long long)x->shape[2], l->kh, l->kw);
        if (ho <= 0) ho = 1;
        if (wo <= 0) wo = 1;
    }
    l->in_dtype = x->dtype;
    l->x = autocast_input(c, l->op, x, &l->xcast);
    l->y = ocr_ctx_new(c, ocr_ctx_dtype(c, l->op), 4, (int64_t[]){n, ho, wo, l->cout});
    if (!c->plan) {
        OcrTensor w = ocr_ctx_weight(c, l->w), bias;
        if (l->b >= 0) bias = ocr_ctx_weight(c, l->b);
        ocr_conv2d_forward(&l->y, &l->x, &w, l->b >= 0 ? &bias : NULL, l->p);
    }
    double pos = (double)n * ho * wo * l->cout;
    ocr_ctx_record(c, l->op, &l->y, 2.0 * pos * l->kh * l->kw * (l->cin / l->p.groups) + (l->b >= 0 ? pos : 0));
    autocast_done(c, &l->x, l->xcast);
    return &l->y;
}

OcrTensor lconv_backward(OcrCtx *c, LConv *l, const OcrTensor *dy, int need_dx) {
    OcrTensor dx = {0};
    if (need_dx) dx = ocr_ctx_like(c, &l->x);
    if (!c->plan) {
        OcrTensor w = ocr_ctx_weight(c, l->w), dw = ocr_ctx_grad(c, l->w), db;
        if (l->b >= 0) db = ocr_ctx_grad(c, l->b);
        ocr_conv2d_backward(need_dx ? &dx : NULL, &dw, l->b >= 0 ? &db : NULL, dy, &l->x, &w, l->p);
    }
    ocr_ctx_free(c, &l->y);
    dx = autocast_backward(c, &dx, &l->x, l->xcast, l->in_dtype);
    ocr_ctx_bwd_done(c, l->op);
    return dx;
}

void lconv_forward_again(OcrCtx *c, LConv *l) {
    OCR_ASSERT(!l->xcast && l->x.data && !l->y.data, "%s: no dropped output to form again", c->ops->items[l->op].name);
    const OcrTensor *x = &l->x;
    l->y = ocr_ctx_new(c, ocr_ctx_dtype(c, l->op), 4,
                       (int64_t[]){x->shape[0], out_size(x->shape[1], l->kh, l->p.stride_h, l->p.pad_h),
                                   out_size(x->shape[2], l->kw, l->p.stride_w, l->p.pad_w), l->cout});
    if (!c->plan) {
        OcrTensor w = ocr_ctx_weight(c, l->w), bias;
        if (l->b >= 0) bias = ocr_ctx_weight(c, l->b);
        ocr_conv2d_forward(&l->y, x, &w, l->b >= 0 ? &bias : NULL, l->p);
    }
}

OcrTensor lconv_backward_input(OcrCtx *c, LConv *l, const OcrTensor *dy) {
    OCR_ASSERT(!l->xcast, "%s: the split backward is not for an autocast input", c->ops->items[l->op].name);
    OcrTensor dx = ocr_ctx_like(c, &l->x);
    if (!c->plan) {
        // The input's header without its memory (it may be gone): only its shape is read.
        OcrTensor x = ocr_tensor_view(NULL, l->x.dtype, l->x.device, l->x.ndim, l->x.shape);
        OcrTensor w = ocr_ctx_weight(c, l->w);
        ocr_conv2d_backward(&dx, NULL, NULL, dy, &x, &w, l->p);
    }
    ocr_ctx_bwd_time(c, l->op);
    return dx;
}

void lconv_backward_weight(OcrCtx *c, LConv *l, const OcrTensor *dy) {
    OCR_ASSERT(!l->xcast, "%s: the split backward is not for an autocast input", c->ops->items[l->op].name);
    if (!c->plan) {
        OCR_ASSERT(l->x.data, "%s: the weight gradient needs the input back", c->ops->items[l->op].name);
        OcrTensor dw = ocr_ctx_grad(c, l->w), db;
        if (l->b >= 0) db = ocr_ctx_grad(c, l->b);
        OcrTensor w = ocr_ctx_weight(c, l->w);
        ocr_conv2d_backward(NULL, &dw, l->b >= 0 ? &db : NULL, dy, &l->x, &w, l->p);
    }
    ocr_ctx_free(c, &l->y);
    ocr_ctx_bwd_done(c, l->op);
}

// ---- batch norm ------------------------------------------------------------------------------

void lbn_build(OcrBuilder *b, LBN *l, const char *name, int channels, OcrParamAttr attr) {
    char buf[256];
    memset(l, 0, sizeof *l);
    l->channels = channels;
    l->momentum = 0.9f;
    l->eps = 1e-5f;
    l->op = ocr_build_op(b, name, "batchnorm");
    int64_t shape[1] = {channels};
    l->g = ocr_build_param(b, l->op, join(buf, sizeof buf, name, "weight"), 1, shape, ocr_init_const(1.0f),
                           OCR_ROLE_NORM, attr);
    l->b = ocr_build_param(b, l->op, join(buf, sizeof buf, name, "bias"), 1, shape, ocr_init_const(0.0f),
                           OCR_ROLE_NORM, attr);
    l->mean = ocr_build_param(b, l->op, join(buf, sizeof buf, name, "_mean"), 1, shape, ocr_init_const(0.0f),
                              OCR_ROLE_STAT, ocr_attr_default());
    l->var = ocr_build_param(b, l->op, join(buf, sizeof buf, name, "_variance"), 1, shape, ocr_init_const(1.0f),
                             OCR_ROLE_STAT, ocr_attr_default());
}

// Batch statistics in a training pass unless the op is frozen (a calibration pass asks for
// them on every layer).
static int bn_uses_batch_stats(const OcrCtx *c, const LBN *l) {
    return c->training && (!c->ops->items[l->op].bn_frozen || c->bn_momentum >= 0.0f);
}

// The world's statistics for a BN in training mode under synchronised BN; a calibration pass
// (bn_momentum >= 0) re-estimates each rank's own.
static const OcrBnSync *bn_sync(const OcrCtx *c, const LBN *l) {
    return l->training && c->bn_momentum < 0.0f ? c->bn_sync : NULL;
}

// An op of a fused pass: its table entry gets the shape and FLOPs, not an output (the values in
// that tensor are a later op's, so the entry would misreport them).
static void record_fused(OcrCtx *c, int op, const OcrTensor *like, double flops) {
    ocr_ctx_record(c, op, like, flops);
    memset(&c->ops->items[op].out, 0, sizeof c->ops->items[op].out);
}

// What every BN forward does first: keep the input, pick the mode, allocate the saved statistics.
static void bn_begin(OcrCtx *c, LBN *l, const OcrTensor *x) {
    OCR_ASSERT(x->ndim == 4 && x->shape[3] == l->channels);
    l->x = *x;
    l->training = bn_uses_batch_stats(c, l);
    l->save_mean = ocr_ctx_new(c, OCR_F32, 1, (int64_t[]){l->channels});
    l->save_rstd = ocr_ctx_new(c, OCR_F32, 1, (int64_t[]){l->channels});
    memset(&l->save_scale, 0, sizeof l->save_scale);  // not an earlier pass's (lbn_backward frees it)
}

static float bn_momentum(const OcrCtx *c, const LBN *l) { return c->bn_momentum >= 0.0f ? c->bn_momentum : l->momentum; }

static OcrTensor *bn_forward(OcrCtx *c, LBN *l, const OcrTensor *x, int rebuildable) {
    l->y = ocr_ctx_new(c, ocr_ctx_dtype(c, l->op), 4, x->shape);
    bn_begin(c, l, x);
    if (rebuildable) l->save_scale = ocr_ctx_new(c, OCR_F32, 1, (int64_t[]){l->channels});
    if (!c->plan) {
        OcrTensor g = ocr_ctx_param(c, l->g), bb = ocr_ctx_param(c, l->b);
        OcrTensor rm = ocr_ctx_stat(c, l->mean), rv = ocr_ctx_stat(c, l->var);
        // The fused kernel with act NONE and no sync is batchnorm2d_forward, bit for bit (kernels/ops.h).
        ocr_batchnorm2d_act_forward_sync(&l->y, &l->save_mean, &l->save_rstd, rebuildable ? &l->save_scale : NULL, &rm,
                                         &rv, x, &g, &bb, OCR_ACT_NONE, bn_momentum(c, l), l->eps, l->training,
                                         bn_sync(c, l));
    }
    ocr_ctx_record(c, l->op, &l->y, 2.0 * (double)ocr_tensor_numel(x));
    ocr_ctx_release(c, &l->save_rstd);
    ocr_ctx_release(c, &l->save_mean);
    return &l->y;
}

OcrTensor *lbn_forward(OcrCtx *c, LBN *l, const OcrTensor *x) { return bn_forward(c, l, x, 0); }
OcrTensor *lbn_forward_rebuildable(OcrCtx *c, LBN *l, const OcrTensor *x) { return bn_forward(c, l, x, 1); }

int lbn_can_accumulate(const OcrCtx *c, const LBN *l, const OcrTensor *sum) {
    return !c->keep_all && !bn_sync(c, l) && sum->data && sum->dtype == ocr_ctx_dtype(c, l->op);
}

void lbn_forward_accumulate(OcrCtx *c, LBN *l, const OcrTensor *x, OcrTensor *sum) {
    OCR_ASSERT(lbn_can_accumulate(c, l, sum), "%s: cannot add into this sum", c->ops->items[l->op].name);
    OCR_ASSERT(ocr_tensor_same_shape(x, sum), "%s: the sum's shape differs", c->ops->items[l->op].name);
    memset(&l->y, 0, sizeof l->y);
    bn_begin(c, l, x);
    if (!c->plan) {
        OcrTensor g = ocr_ctx_param(c, l->g), bb = ocr_ctx_param(c, l->b);
        OcrTensor rm = ocr_ctx_stat(c, l->mean), rv = ocr_ctx_stat(c, l->var);
        ocr_batchnorm2d_forward_accumulate(sum, &l->save_mean, &l->save_rstd, &rm, &rv, x, &g, &bb, bn_momentum(c, l),
                                           l->eps, l->training);
    }
    // Shape and FLOPs; not the output (the sum's values are not this op's).
    record_fused(c, l->op, sum, 3.0 * (double)ocr_tensor_numel(x));
    ocr_ctx_release(c, &l->save_rstd);
    ocr_ctx_release(c, &l->save_mean);
}

OcrTensor lbn_backward(OcrCtx *c, LBN *l, const OcrTensor *dy, int need_dx) {
    OcrTensor dx = {0};
    if (need_dx) dx = ocr_ctx_like(c, &l->x);
    if (!c->plan) {
        OcrTensor g = ocr_ctx_param(c, l->g), dg = ocr_ctx_grad(c, l->g), db = ocr_ctx_grad(c, l->b);
        if (bn_sync(c, l))
            ocr_batchnorm2d_act_backward_sync(need_dx ? &dx : NULL, &dg, &db, dy, &l->x, &g, NULL, &l->save_mean,
                                              &l->save_rstd, NULL, OCR_ACT_NONE, need_dx ? dx.dtype : OCR_F32,
                                              l->training, bn_sync(c, l));
        else
            ocr_batchnorm2d_backward(need_dx ? &dx : NULL, &dg, &db, dy, &l->x, &g, &l->save_mean, &l->save_rstd,
                                     l->training);
    }
    ocr_ctx_free(c, &l->save_scale);  // lbn_forward_rebuildable's
    ocr_ctx_free(c, &l->save_rstd);
    ocr_ctx_free(c, &l->save_mean);
    ocr_ctx_free(c, &l->y);
    ocr_ctx_bwd_done(c, l->op);
    return dx;
}

// ---- activation ----------------------------------------------------------------------------------

void lact_build(OcrBuilder *b, LAct *l, const char *name, ocr_activation_t act) {
    memset(l, 0, sizeof *l);
    l->act = act;
    l->op = ocr_build_op(b, name, "activation");
}

static const double act_cost[OCR_ACT_COUNT] = {0, 1, 4, 3, 4, 8};

OcrTensor *lact_forward(OcrCtx *c, LAct *l, const OcrTensor *x) {
    l->inplace = 0;
    l->x = *x;
    l->y = ocr_ctx_new(c, ocr_ctx_dtype(c, l->op), x->ndim, x->shape);
    if (!c->plan) ocr_activation_forward(&l->y, x, l->act);
    ocr_ctx_record(c, l->op, &l->y, act_cost[l->act] * (double)ocr_tensor_numel(x));
    return &l->y;
}

OcrTensor lact_backward(OcrCtx *c, LAct *l, const OcrTensor *dy, int need_dx) {
    OcrTensor dx = {0};
    if (need_dx) {
        OCR_ASSERT(l->x.data && !l->inplace, "%s: the backward of a fused activation belongs to its fused op",
                   c->ops->items[l->op].name);
        dx = ocr_ctx_like(c, &l->x);
        if (!c->plan) ocr_activation_backward(&dx, dy, &l->x, l->act);
    }
    ocr_ctx_free(c, &l->y);
    ocr_ctx_bwd_done(c, l->op);
    return dx;
}

// ---- batch norm + activation, fused ------------------------------------------------------------------

OcrTensor *lbn_act_forward(OcrCtx *c, LBN *bn, LAct *act, const OcrTensor *x) {
    const ocr_dtype_t dt = ocr_ctx_dtype(c, bn->op);
    OCR_ASSERT(ocr_ctx_dtype(c, act->op) == dt, "%s: a fused activation keeps the batch norm's dtype",
               c->ops->items[act->op].name);
    OcrTensor y = ocr_ctx_new(c, dt, 4, x->shape);
    bn_begin(c, bn, x);
    bn->save_scale = ocr_ctx_new(c, OCR_F32, 1, (int64_t[]){bn->channels});
    if (!c->plan) {
        OcrTensor g = ocr_ctx_param(c, bn->g), bb = ocr_ctx_param(c, bn->b);
        OcrTensor rm = ocr_ctx_stat(c, bn->mean), rv = ocr_ctx_stat(c, bn->var);
        ocr_batchnorm2d_act_forward_sync(&y, &bn->save_mean, &bn->save_rstd, &bn->save_scale, &rm, &rv, x, &g, &bb,
                                         act->act, bn_momentum(c, bn), bn->eps, bn->training, bn_sync(c, bn));
    }
    // The BN's entry: shape and FLOPs, but not the output (its values are the activation's).
    record_fused(c, bn->op, &y, 2.0 * (double)ocr_tensor_numel(x));
    memset(&bn->y, 0, sizeof bn->y);
    ocr_ctx_release(c, &bn->save_scale);
    ocr_ctx_release(c, &bn->save_rstd);
    ocr_ctx_release(c, &bn->save_mean);
    act->inplace = 1;
    act->y = y;
    memset(&act->x, 0, sizeof act->x);
    ocr_ctx_record(c, act->op, &act->y, act_cost[act->act] * (double)ocr_tensor_numel(x));
    return &act->y;
}

// The end of a fused BN + activation backward: the kernel is batch norm's backward with act'
// folded into its passes, so its time is the BN's, as the forward's is (lbn_act_forward records
// the BN op after the kernel); the activation's entry gets only what follows. The saved statistics
// go (act->y is the caller's to free).
static void lbn_act_backward_end(OcrCtx *c, LBN *bn, LAct *act) {
    ocr_ctx_bwd_done(c, bn->op);
    ocr_ctx_free(c, &bn->save_scale);
    ocr_ctx_free(c, &bn->save_rstd);
    ocr_ctx_free(c, &bn->save_mean);
    ocr_ctx_bwd_done(c, act->op);
}

OcrTensor lbn_act_backward(OcrCtx *c, LBN *bn, LAct *act, const OcrTensor *dy, int need_dx) {
    // act->y may be gone already (ocr_ctx_drop: the backward never reads it), so the dtype the
    // value was rounded to (mid) is the forward's own, not act->y's (a freed tensor reads as f32);
    // save_scale is lbn_act_forward's alone.
    OCR_ASSERT(act->inplace && bn->save_scale.data && !bn->y.data, "%s: not the output of lbn_act_forward",
               c->ops->items[act->op].name);
    OcrTensor dx = {0};
    if (need_dx) dx = ocr_ctx_like(c, &bn->x);
    if (!c->plan) {
        OcrTensor g = ocr_ctx_param(c, bn->g), bb = ocr_ctx_param(c, bn->b);
        OcrTensor dg = ocr_ctx_grad(c, bn->g), db = ocr_ctx_grad(c, bn->b);
        ocr_batchnorm2d_act_backward_sync(need_dx ? &dx : NULL, &dg, &db, dy, &bn->x, &g, &bb, &bn->save_mean,
                                          &bn->save_rstd, &bn->save_scale, act->act, ocr_ctx_dtype(c, bn->op),
                                          bn->training, bn_sync(c, bn));
    }
    ocr_ctx_free(c, &act->y);
    lbn_act_backward_end(c, bn, act);
    return dx;
}

OcrTensor lbn_act_backward_rebuilding_output(OcrCtx *c, LBN *bn, LAct *act, OcrTensor *dy) {
    OCR_ASSERT(act->inplace && !act->y.data && bn->x.data && bn->save_scale.data && bn->save_mean.data && !bn->y.data,
               "%s: no dropped output of lbn_act_forward to rebuild", c->ops->items[act->op].name);
    act->y = ocr_ctx_new(c, ocr_ctx_dtype(c, bn->op), 4, bn->x.shape);
    // The kernel reads each element of its dout before it writes that element of dinp.
    const int in_place = dy->dtype == bn->x.dtype && ocr_tensor_same_shape(dy, &bn->x);
    OcrTensor dx = in_place ? *dy : ocr_ctx_like(c, &bn->x);
    if (!c->plan) {
        OcrTensor g = ocr_ctx_param(c, bn->g), bb = ocr_ctx_param(c, bn->b);
        OcrTensor dg = ocr_ctx_grad(c, bn->g), db = ocr_ctx_grad(c, bn->b);
        ocr_batchnorm2d_act_backward_rebuild(&act->y, &dx, &dg, &db, in_place ? &dx : dy, &bn->x, &g, &bb,
                                             &bn->save_mean, &bn->save_rstd, &bn->save_scale, act->act, bn->training,
                                             bn_sync(c, bn));
    }
    if (in_place)
        memset(dy, 0, sizeof *dy);
    else
        ocr_ctx_free(c, dy);
    lbn_act_backward_end(c, bn, act);  // act->y stays: the caller frees it
    return dx;
}

void lbn_act_output_again(OcrCtx *c, LBN *bn, LAct *act) {
    OcrTensor *y = act ? &act->y : &bn->y;
    OCR_ASSERT((!act || act->inplace) && !y->data && bn->x.data && bn->save_scale.data && bn->save_mean.data,
               "%s: no dropped output to form again", c->ops->items[act ? act->op : bn->op].name);
    *y = ocr_ctx_new(c, ocr_ctx_dtype(c, bn->op), 4, bn->x.shape);
    if (!c->plan) {
        OcrTensor bb = ocr_ctx_param(c, bn->b);
        ocr_batchnorm2d_act_apply(y, &bn->x, &bn->save_mean, &bn->save_scale, &bb, act ? act->act : OCR_ACT_NONE);
    }
}

// ---- learnable affine block -------------------------------------------------------------------------

void llab_build(OcrBuilder *b, LLab *l, const char *name, float lr_mult) {
    char buf[256];
    memset(l, 0, sizeof *l);
    l->op = ocr_build_op(b, name, "affine");
    OcrParamAttr attr = {lr_mult, OCR_DECAY_GLOBAL, 0.0f};
    l->s = ocr_build_param(b, l->op, join(buf, sizeof buf, name, "scale"), 1, (int64_t[]){1}, ocr_init_const(1.0f),
                           OCR_ROLE_SCALAR, attr);
    l->b = ocr_build_param(b, l->op, join(buf, sizeof buf, name, "bias"), 1, (int64_t[]){1}, ocr_init_const(0.0f),
                           OCR_ROLE_SCALAR, attr);
}

OcrTensor *llab_forward(OcrCtx *c, LLab *l, const OcrTensor *x) {
    l->inplace = 0;
    l->x = *x;
    l->y = ocr_ctx_new(c, ocr_ctx_dtype(c, l->op), x->ndim, x->shape);
    if (!c->plan) {
        OcrTensor s = ocr_ctx_param(c, l->s), b = ocr_ctx_param(c, l->b);
        ocr_scalar_affine_forward(&l->y, x, &s, &b);
    }
    ocr_ctx_record(c, l->op, &l->y, 2.0 * (double)ocr_tensor_numel(x));
    return &l->y;
}

OcrTensor llab_backward(OcrCtx *c, LLab *l, const OcrTensor *dy, int need_dx) {
    OcrTensor dx = {0};
    OCR_ASSERT(l->x.data && !l->inplace, "%s: the backward of a fused affine belongs to its fused op",
               c->ops->items[l->op].name);
    if (need_dx) dx = ocr_ctx_like(c, &l->x);
    if (!c->plan) {
        OcrTensor s = ocr_ctx_param(c, l->s), ds = ocr_ctx_grad(c, l->s), db = ocr_ctx_grad(c, l->b);
        ocr_scalar_affine_backward(need_dx ? &dx : NULL, &ds, &db, dy, &l->x, &s);
    }
    ocr_ctx_free(c, &l->y);
    ocr_ctx_bwd_done(c, l->op);
    return dx;
}

// ---- LAB → activation → LAB, fused ------------------------------------------------------------------

OcrTensor *llab_act_forward(OcrCtx *c, LLab *lab1, LAct *act, LLab *lab2, const OcrTensor *x) {
    const ocr_dtype_t dt = ocr_ctx_dtype(c, lab1->op);
    OCR_ASSERT(ocr_ctx_dtype(c, act->op) == dt && ocr_ctx_dtype(c, lab2->op) == dt,
               "%s: a fused affine → activation → affine keeps one dtype", c->ops->items[act->op].name);
    const double n = (double)ocr_tensor_numel(x);
    lab1->inplace = 0;
    lab1->x = *x;
    OcrTensor y = ocr_ctx_new(c, dt, x->ndim, x->shape);
    if (!c->plan) {
        OcrTensor s1 = ocr_ctx_param(c, lab1->s), b1 = ocr_ctx_param(c, lab1->b);
        OcrTensor s2 = ocr_ctx_param(c, lab2->s), b2 = ocr_ctx_param(c, lab2->b);
        ocr_affine_act_affine_forward(&y, x, &s1, &b1, act->act, &s2, &b2);
    }
    // The first two entries: shape and FLOPs, not the output (its values are lab2's).
    record_fused(c, lab1->op, &y, 2.0 * n);
    memset(&lab1->y, 0, sizeof lab1->y);
    record_fused(c, act->op, &y, act_cost[act->act] * n);
    act->inplace = 1;
    memset(&act->x, 0, sizeof act->x);
    memset(&act->y, 0, sizeof act->y);
    lab2->inplace = 1;
    memset(&lab2->x, 0, sizeof lab2->x);
    lab2->y = y;
    ocr_ctx_record(c, lab2->op, &lab2->y, 2.0 * n);
    return &lab2->y;
}

OcrTensor llab_act_backward(OcrCtx *c, LLab *lab1, LAct *act, LLab *lab2, const OcrTensor *dy, int need_dx) {
    OCR_ASSERT(lab2->inplace && act->inplace && lab2->y.data && lab1->x.data,
               "%s: not the output of llab_act_forward", c->ops->items[lab2->op].name);
    OcrTensor dx = {0};
    if (need_dx) dx = ocr_ctx_like(c, &lab1->x);
    if (!c->plan) {
        OcrTensor s1 = ocr_ctx_param(c, lab1->s), b1 = ocr_ctx_param(c, lab1->b), s2 = ocr_ctx_param(c, lab2->s);
        OcrTensor ds1 = ocr_ctx_grad(c, lab1->s), db1 = ocr_ctx_grad(c, lab1->b);
        OcrTensor ds2 = ocr_ctx_grad(c, lab2->s), db2 = ocr_ctx_grad(c, lab2->b);
        ocr_affine_act_affine_backward(need_dx ? &dx : NULL, &ds1, &db1, &ds2, &db2, dy, &lab1->x, &s1, &b1, act->act,
                                       &s2, lab2->y.dtype);
    }
    ocr_ctx_free(c, &lab2->y);
    lab2->inplace = 0;
    act->inplace = 0;
    ocr_ctx_bwd_done(c, lab2->op);
    ocr_ctx_bwd_done(c, act->op);
    ocr_ctx_bwd_done(c, lab1->op);
    return dx;
}

// ---- linear ---------------------------------------------------------------------------------------------

void llinear_build(OcrBuilder *b, LLinear *l, const char *name, LLinearSpec s) {
    char buf[256];
    memset(l, 0, sizeof *l);
    OCR_ASSERT(!init_is_unset(s.winit), "%s: LLinearSpec.winit must be set", name);
    l->in = s.in;
    l->out = s.out;
    l->op = ocr_build_op(b, name, "linear");
    l->w = ocr_build_param(b, l->op, join(buf, sizeof buf, name, "weight"), 2, (int64_t[]){s.in, s.out}, s.winit,
                           OCR_ROLE_WEIGHT, s.attr);
    l->b = s.bias ? ocr_build_param(b, l->op, join(buf, sizeof buf, name, "bias"), 1, (int64_t[]){s.out}, s.binit,
                                    OCR_ROLE_BIAS, s.attr)
                  : -1;
}

OcrTensor *llinear_forward(OcrCtx *c, LLinear *l, const OcrTensor *x) {
    OCR_ASSERT(x->shape[x->ndim - 1] == l->in, "%s: expected %d input features", c->ops->items[l->op].name, l->in);
    l->in_dtype = x->dtype;
    l->x = autocast_input(c, l->op, x, &l->xcast);
    OcrTensor d = shaped(x, l->out);
    l->y = ocr_ctx_new(c, ocr_ctx_dtype(c, l->op), d.ndim, d.shape);
    if (!c->plan) {
        OcrTensor w = ocr_ctx_weight(c, l->w), b;
        if (l->b >= 0) b = ocr_ctx_weight(c, l->b);
        ocr_linear_forward(&l->y, &l->x, &w, l->b >= 0 ? &b : NULL);
    }
    double rows = (double)ocr_tensor_numel(x) / l->in;
    ocr_ctx_record(c, l->op, &l->y, 2.0 * rows * l->in * l->out + (l->b >= 0 ? rows * l->out : 0));
    autocast_done(c, &l->x, l->xcast);
    return &l->y;
}

OcrTensor llinear_backward(OcrCtx *c, LLinear *l, const OcrTensor *dy, int need_dx) {
    OcrTensor dx = {0};
    if (need_dx) dx = ocr_ctx_like(c, &l->x);
    if (!c->plan) {
        OcrTensor w = ocr_ctx_weight(c, l->w), dw = ocr_ctx_grad(c, l->w), db;
        if (l->b >= 0) db = ocr_ctx_grad(c, l->b);
        ocr_linear_backward(need_dx ? &dx : NULL, &dw, l->b >= 0 ? &db : NULL, dy, &l->x, &w);
    }
    ocr_ctx_free(c, &l->y);
    dx = autocast_backward(c, &dx, &l->x, l->xcast, l->in_dtype);
    ocr_ctx_bwd_done(c, l->op);
    return dx;
}

// ---- layer norm ----------------------------------------------------------------------------------------

void lln_build(OcrBuilder *b, LLN *l, const char *name, int channels, float eps) {
    char buf[256];
    memset(l, 0, sizeof *l);
    l->channels = channels;
    l->eps = eps;
    l->op = ocr_build_op(b, name, "layernorm");
    int64_t shape[1] = {channels};
    l->g = ocr_build_param(b, l->op, join(buf, sizeof buf, name, "weight"), 1, shape, ocr_init_const(1.0f),
                           OCR_ROLE_NORM, ocr_attr_default());
    l->b = ocr_build_param(b, l->op, join(buf, sizeof buf, name, "bias"), 1, shape, ocr_init_const(0.0f),
                           OCR_ROLE_NORM, ocr_attr_default());
}

OcrTensor *lln_forward(OcrCtx *c, LLN *l, const OcrTensor *x) {
    OCR_ASSERT(x->shape[x->ndim - 1] == l->channels);
    int64_t rows = ocr_tensor_numel(x) / l->channels;
    l->x = *x;
    l->y = ocr_ctx_new(c, ocr_ctx_dtype(c, l->op), x->ndim, x->shape);
    l->mean = ocr_ctx_new(c, OCR_F32, 1, (int64_t[]){rows});
    l->rstd = ocr_ctx_new(c, OCR_F32, 1, (int64_t[]){rows});
    if (!c->plan) {
        OcrTensor g = ocr_ctx_param(c, l->g), b = ocr_ctx_param(c, l->b);
        ocr_layernorm_forward(&l->y, &l->mean, &l->rstd, x, &g, &b, l->eps);
    }
    ocr_ctx_record(c, l->op, &l->y, 5.0 * (double)ocr_tensor_numel(x));
    ocr_ctx_release(c, &l->rstd);
    ocr_ctx_release(c, &l->mean);
    return &l->y;
}

OcrTensor lln_backward(OcrCtx *c, LLN *l, const OcrTensor *dy, int need_dx) {
    OcrTensor dx = {0};
    if (need_dx) dx = ocr_ctx_like(c, &l->x);
    if (!c->plan) {
        OcrTensor g = ocr_ctx_param(c, l->g), dg = ocr_ctx_grad(c, l->g), db = ocr_ctx_grad(c, l->b);
        ocr_layernorm_backward(need_dx ? &dx : NULL, &dg, &db, dy, &l->x, &g, &l->mean, &l->rstd);
    }
    ocr_ctx_free(c, &l->rstd);
    ocr_ctx_free(c, &l->mean);
    ocr_ctx_free(c, &l->y);
    ocr_ctx_bwd_done(c, l->op);
    return dx;
}

// ---- attention ------------------------------------------------------------------------------------------

void lattn_build(OcrBuilder *b, LAttn *l, const char *name, LAttnSpec s) {
    memset(l, 0, sizeof *l);
    OCR_ASSERT(s.dim > 0 && s.heads > 0, "%s: LAttnSpec.dim and .heads must be set", name);
    OCR_ASSERT(s.dim % s.heads == 0);
    l->dim = s.dim;
    l->heads = s.heads;
    // Paddle computes head_dim ** -0.5 in double and stores it as a float32 constant.
    l->scale = (float)pow((double)(s.dim / s.heads), -0.5);
    l->attn_drop = s.attn_drop;
    l->local_hk = s.local_hk;
    l->local_wk = s.local_wk;
    l->op = ocr_build_op(b, name, "attention");
    l->stream = ocr_params_stream(name);
}

// PaddleOCR's local mixer masks keys outside a window centred on the query (attention_local_mask).
OcrTensor *lattn_forward(OcrCtx *c, LAttn *l, const OcrTensor *qkv, int grid_h, int grid_w) {
    OCR_ASSERT(qkv->ndim == 3 && qkv->shape[2] == 3 * l->dim);
    int64_t B = qkv->shape[0], T = qkv->shape[1];
    l->in_dtype = qkv->dtype;
    l->x = autocast_input(c, l->op, qkv, &l->xcast);
    l->y = ocr_ctx_new(c, ocr_ctx_dtype(c, l->op), 3, (int64_t[]){B, T, l->dim});
    l->probs = ocr_ctx_new(c, OCR_F32, 4, (int64_t[]){B, l->heads, T, T});
    memset(&l->mask, 0, sizeof l->mask);
    if (l->local_hk > 0) {
        OCR_ASSERT((int64_t)grid_h * grid_w == T, "local mixer needs the token grid");
        l->grid_h = grid_h;
        l->grid_w = grid_w;
        l->mask = ocr_ctx_new(c, OCR_F32, 2, (int64_t[]){T, T});
        if (!c->plan) ocr_attention_local_mask(&l->mask, grid_h, grid_w, l->local_hk, l->local_wk);
    }
    DropoutParams d = {l->attn_drop, OCR_DROPOUT_UPSCALE_IN_TRAIN, c->training, c->seed, l->stream, c->step << 32};
    l->d = d;
    if (!c->plan)
        ocr_attention_forward(&l->y, &l->probs, &l->x, l->mask.data ? &l->mask : NULL, l->heads, l->scale, l->d);
    double tt = (double)B * T * T;
    ocr_ctx_record(c, l->op, &l->y, 4.0 * tt * l->dim + 5.0 * tt * l->heads);
    ocr_ctx_release(c, &l->mask);
    ocr_ctx_release(c, &l->probs);
    autocast_done(c, &l->x, l->xcast);
    return &l->y;
}

OcrTensor lattn_backward(OcrCtx *c, LAttn *l, const OcrTensor *dy, int need_dx) {
    OcrTensor dx = {0};
    if (need_dx) {
        dx = ocr_ctx_like(c, &l->x);
        if (!c->plan) ocr_attention_backward(&dx, dy, &l->x, &l->probs, l->heads, l->scale, l->d);
    }
    ocr_ctx_free(c, &l->mask);
    ocr_ctx_free(c, &l->probs);
    ocr_ctx_free(c, &l->y);
    dx = autocast_backward(c, &dx, &l->x, l->xcast, l->in_dtype);
    ocr_ctx_bwd_done(c, l->op);
    return dx;
}

// ---- pooling ---------------------------------------------------------------------------------------------

void lpool_build(OcrBuilder *b, LPool *l, const char *name, lpool_kind_t kind, Pool2dParams p) {
    memset(l, 0, sizeof *l);
    l->kind = kind;
    l->p = p;
    l->op = ocr_build_op(b, name, "pool");
}

OcrTensor *lpool_forward(OcrCtx *c, LPool *l, const OcrTensor *x, lpool_kind_t kind, int out_h, int out_w) {
    OCR_ASSERT(x->ndim == 4);
    int ho = out_h, wo = out_w;
    if (kind != LPOOL_ADAPTIVE) {
        ho = out_size(x->shape[1], l->p.kernel_h, l->p.stride_h, l->p.pad_h);
        wo = out_size(x->shape[2], l->p.kernel_w, l->p.stride_w, l->p.pad_w);
    }
    if (ho <= 0 || wo <= 0) {
        ocr_ctx_fail(c, "%s: its input map %lldx%lld is too small to pool", c->ops->items[l->op].name,
                     (long long)x->shape[1], (long long)x->shape[2]);
        if (ho <= 0) ho = 1;
        if (wo <= 0) wo = 1;
    }
    l->last_kind = kind;
    l->x = *x;
    l->y = ocr_ctx_new(c, ocr_ctx_dtype(c, l->op), 4, (int64_t[]){x->shape[0], ho, wo, x->shape[3]});
    if (!c->plan) {
        if (kind == LPOOL_AVG) ocr_avgpool2d_forward(&l->y, x, l->p);
        else if (kind == LPOOL_MAX) ocr_maxpool2d_forward(&l->y, x, l->p);
        else ocr_adaptive_avgpool2d_forward(&l->y, x);
    }
    ocr_ctx_record(c, l->op, &l->y, (double)ocr_tensor_numel(x));
    return &l->y;
}

OcrTensor *lpool_rec_forward(OcrCtx *c, LPool *l, OcrTensor *x) {
    int64_t h = x->shape[1], w = x->shape[2];
    int t = (int)(w / 2);
    if (t < 1) t = 1;
    OcrTensor *p = !c->training && h >= 3 && h <= 5 ? lpool_forward(c, l, x, LPOOL_AVG, 0, 0)
                                                    : lpool_forward(c, l, x, LPOOL_ADAPTIVE, 1, t);
    ocr_ctx_release(c, x);
    return p;
}

OcrTensor lpool_backward(OcrCtx *c, LPool *l, const OcrTensor *dy, int need_dx) {
    OcrTensor dx = {0};
    if (need_dx) {
        dx = ocr_ctx_like(c, &l->x);
        if (!c->plan) {
            if (l->last_kind == LPOOL_AVG) ocr_avgpool2d_backward(&dx, dy, l->p);
            else if (l->last_kind == LPOOL_MAX) ocr_maxpool2d_backward(&dx, dy, &l->x, l->p);
            else ocr_adaptive_avgpool2d_backward(&dx, dy);
        }
    }
    ocr_ctx_free(c, &l->y);
    ocr_ctx_bwd_done(c, l->op);
    return dx;
}

// ---- dropout / drop path -----------------------------------------------------------------------------------

void ldrop_build(OcrBuilder *b, LDrop *l, const char *name, float p, ocr_dropout_mode_t mode, int per_sample) {
    memset(l, 0, sizeof *l);
    l->p = p;
    l->mode = mode;
    l->per_sample = per_sample;
    l->op = ocr_build_op(b, name, per_sample ? "droppath" : "dropout");
    l->stream = ocr_params_stream(name);
}

OcrTensor *ldrop_forward(OcrCtx *c, LDrop *l, const OcrTensor *x) {
    DropoutParams d = {l->p, l->mode, c->training, c->seed, l->stream, c->step << 32};
    l->d = d;
    int active = l->p > 0.0f && (c->training || (!l->per_sample && l->mode == OCR_DROPOUT_DOWNSCALE_IN_INFER));
    l->identity = !active;
    if (l->identity) {
        l->y = *x;  // a view: nothing to allocate or free
    } else {
        l->y = ocr_ctx_new(c, ocr_ctx_dtype(c, l->op), x->ndim, x->shape);
        if (!c->plan) {
            if (l->per_sample) ocr_droppath_forward(&l->y, x, l->d);
            else ocr_dropout_forward(&l->y, x, l->d);
        }
    }
    ocr_ctx_record(c, l->op, &l->y, l->identity ? 0.0 : (double)ocr_tensor_numel(x));
    return &l->y;
}

OcrTensor ldrop_backward(OcrCtx *c, LDrop *l, const OcrTensor *dy, int need_dx) {
    OcrTensor dx = {0};
    OCR_ASSERT(!l->identity, "identity dropout has no backward of its own (pass the gradient through)");
    if (need_dx) {
        dx = ocr_ctx_like(c, dy);
        if (!c->plan) {
            if (l->per_sample) ocr_droppath_backward(&dx, dy, l->d);
            else ocr_dropout_backward(&dx, dy, l->d);
        }
    }
    ocr_ctx_free(c, &l->y);
    ocr_ctx_bwd_done(c, l->op);
    return dx;
}

// ---- add ----------------------------------------------------------------------------------------------------

void ladd_build(OcrBuilder *b, LAdd *l, const char *name) {
    memset(l, 0, sizeof *l);
    l->op = ocr_build_op(b, name, "add");
}

OcrTensor *ladd_forward(OcrCtx *c, LAdd *l, const OcrTensor *a, const OcrTensor *x) {
    OCR_ASSERT(ocr_tensor_same_shape(a, x));
    l->y = ocr_ctx_new(c, ocr_ctx_dtype(c, l->op), a->ndim, a->shape);
    if (!c->plan) ocr_add_forward(&l->y, a, x);
    ocr_ctx_record(c, l->op, &l->y, (double)ocr_tensor_numel(a));
    return &l->y;
}

int ladd_can_reuse(const OcrCtx *c, const LAdd *l, const OcrTensor *buf) {
    return !c->keep_all && in_arena(c, buf) && buf->dtype == ocr_ctx_dtype(c, l->op);
}

OcrTensor *ladd_forward_into(OcrCtx *c, LAdd *l, const OcrTensor *a, const OcrTensor *x, OcrTensor *buf) {
    OCR_ASSERT(buf == a || buf == x, "%s: the sum goes over one of its operands", c->ops->items[l->op].name);
    OCR_ASSERT(ladd_can_reuse(c, l, buf), "%s: cannot write the sum over this operand", c->ops->items[l->op].name);
    OCR_ASSERT(ocr_tensor_same_shape(a, x));
    l->y = *buf;
    if (!c->plan) ocr_add_forward(&l->y, a, x);  // in place: each element is read before it is written
    forget_outputs(c, &l->y);
    memset(buf, 0, sizeof *buf);
    ocr_ctx_record(c, l->op, &l->y, (double)ocr_tensor_numel(&l->y));
    return &l->y;
}

void ladd_record_fused(OcrCtx *c, LAdd *l, const OcrTensor *sum) {
    memset(&l->y, 0, sizeof l->y);
    record_fused(c, l->op, sum, (double)ocr_tensor_numel(sum));
}

void ladd_backward(OcrCtx *c, LAdd *l) {
    ocr_ctx_free(c, &l->y);
    ocr_ctx_bwd_done(c, l->op);
}

// ---- positional embedding -------------------------------------------------------------------------------------

void lposadd_build(OcrBuilder *b, LPosAdd *l, const char *name, int tokens, int dim) {
    memset(l, 0, sizeof *l);
    l->op = ocr_build_op(b, name, "add");
    l->pos = ocr_build_param(b, l->op, name, 3, (int64_t[]){1, tokens, dim}, ocr_init_trunc_normal(0.02f),
                             OCR_ROLE_EMBED, ocr_attr_default());
}

OcrTensor *lposadd_forward(OcrCtx *c, LPosAdd *l, const OcrTensor *x) {
    l->y = ocr_ctx_new(c, ocr_ctx_dtype(c, l->op), x->ndim, x->shape);
    if (!c->plan) {
        OcrTensor pos = ocr_ctx_weight(c, l->pos);
        ocr_batch_broadcast_add_forward(&l->y, x, &pos);
    }
    ocr_ctx_record(c, l->op, &l->y, (double)ocr_tensor_numel(x));
    return &l->y;
}

OcrTensor lposadd_backward(OcrCtx *c, LPosAdd *l, const OcrTensor *dy, int need_dx) {
    OcrTensor dx = {0};
    if (need_dx) dx = ocr_ctx_like(c, dy);
    if (!c->plan) {
        OcrTensor dpos = ocr_ctx_grad(c, l->pos);
        ocr_batch_broadcast_add_backward(need_dx ? &dx : NULL, &dpos, dy);
    }
    ocr_ctx_free(c, &l->y);
    ocr_ctx_bwd_done(c, l->op);
    return dx;
}

// ---- concat -----------------------------------------------------------------------------------------------------

void lconcat_build(OcrBuilder *b, LConcat *l, const char *name) {
    memset(l, 0, sizeof *l);
    l->op = ocr_build_op(b, name, "concat");
}

OcrTensor *lconcat_forward(OcrCtx *c, LConcat *l, const OcrTensor *a, const OcrTensor *x) {
    OCR_ASSERT(a->ndim == x->ndim);
    l->c0 = a->shape[a->ndim - 1];
    l->c1 = x->shape[x->ndim - 1];
    l->t0 = a->dtype;
    l->t1 = x->dtype;
    OcrTensor d = shaped(a, l->c0 + l->c1);
    l->y = ocr_ctx_new(c, ocr_ctx_dtype(c, l->op), d.ndim, d.shape);
    if (!c->plan) {
        const OcrTensor *in[2] = {a, x};
        ocr_concat_forward(&l->y, in, 2);
    }
    ocr_ctx_record(c, l->op, &l->y, 0.0);
    return &l->y;
}

void lconcat_backward(OcrCtx *c, LConcat *l, const OcrTensor *dy, OcrTensor *da, OcrTensor *db) {
    OcrTensor d0 = shaped(dy, l->c0), d1 = shaped(dy, l->c1);
    memset(da, 0, sizeof *da);
    memset(db, 0, sizeof *db);
    *da = ocr_ctx_new(c, l->t0, d0.ndim, d0.shape);
    *db = ocr_ctx_new(c, l->t1, d1.ndim, d1.shape);
    if (!c->plan) {
        OcrTensor *out[2] = {da, db};
        ocr_concat_backward(out, 2, dy);
    }
    ocr_ctx_free(c, &l->y);
    ocr_ctx_bwd_done(c, l->op);
}

// ---- SE multiply ---------------------------------------------------------------------------------------------------

void lmul_build(OcrBuilder *b, LMul *l, const char *name) {
    memset(l, 0, sizeof *l);
    l->op = ocr_build_op(b, name, "mul");
}

OcrTensor *lmul_forward(OcrCtx *c, LMul *l, const OcrTensor *x, const OcrTensor *s) {
    l->x = *x;
    l->s = *s;
    l->y = ocr_ctx_new(c, ocr_ctx_dtype(c, l->op), x->ndim, x->shape);
    if (!c->plan) ocr_channel_scale_forward(&l->y, x, s);
    ocr_ctx_record(c, l->op, &l->y, (double)ocr_tensor_numel(x));
    return &l->y;
}

void lmul_backward(OcrCtx *c, LMul *l, const OcrTensor *dy, OcrTensor *dx, OcrTensor *ds) {
    *dx = ocr_ctx_like(c, &l->x);
    *ds = ocr_ctx_like(c, &l->s);
    if (!c->plan) ocr_channel_scale_backward(dx, ds, dy, &l->x, &l->s);
    ocr_ctx_free(c, &l->y);
    ocr_ctx_bwd_done(c, l->op);
}

// ---- softmax -----------------------------------------------------------------------------------------------------------

void lsoftmax_build(OcrBuilder *b, LSoftmax *l, const char *name) {
    memset(l, 0, sizeof *l);
    l->op = ocr_build_op(b, name, "softmax");
}

OcrTensor *lsoftmax_forward(OcrCtx *c, LSoftmax *l, const OcrTensor *x) {
    l->y = ocr_ctx_new(c, ocr_ctx_dtype(c, l->op), x->ndim, x->shape);
    if (!c->plan) ocr_softmax_forward(&l->y, x);
    ocr_ctx_record(c, l->op, &l->y, 3.0 * (double)ocr_tensor_numel(x));
    return &l->y;
}

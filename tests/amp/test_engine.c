// The engine on a small network built from ops (conv3x3 - BN - hardswish - average pool over
// the height - linear - CTC), held in hand-made op and parameter tables shaped like the
// model's: O2 table conversion and masters, an injected overflow (step skipped, weights,
// masters, moments and BN statistics unchanged, the layer named in the log), a natural f16
// overflow, op statistics, and a few hundred training steps in FP32, FP16-O1, FP16-O2 and
// BF16-O2 whose losses must agree.
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "amp/engine.h"
#include "core/rng.h"
#include "kernels/ctc.h"
#include "kernels/ops.h"
#include "tests/common/test_util.h"
#include "models/amp_view.h"

enum { B = 8, H = 4, W = 12, C = 3, F = 16, K = 5, S = 4 };
enum { OP_CONV, OP_BN, OP_ACT, OP_POOL, OP_FC, NOPS };
enum { P_CW, P_CB, P_G, P_BETA, P_FW, P_FB, NPARAMS };

typedef struct {
    OcrOpTable ops;
    OcrParamTable params, stats;
    OcrTensor m[NPARAMS], v[NPARAMS];
    OcrTensor images, targets, tlen;
    OcrTensor logits_buf;
} Net;

// ---- hand-made tables (the layout rule of models/params.c) ----------------------------------
static void table_add(OcrParamTable *t, const char *name, int ndim, const int64_t *shape, ocr_param_role_t role) {
    OcrParamInfo *p = &t->items[t->count++];
    memset(p, 0, sizeof *p);
    p->name = strdup(name);
    p->ndim = ndim;
    p->numel = 1;
    for (int d = 0; d < OCR_MAX_DIMS; d++) p->shape[d] = d < ndim ? shape[d] : 1;
    for (int d = 0; d < ndim; d++) p->numel *= shape[d];
    p->dtype = OCR_F32;
    p->role = role;
    p->lr_mult = 1.0f;
}

static void table_alloc(OcrParamTable *t) {
    size_t off = 0;
    for (int i = 0; i < t->count; i++) {
        t->items[i].offset = off;
        off = (off + (size_t)t->items[i].numel * 4 + OCR_PARAM_ALIGN - 1) / OCR_PARAM_ALIGN * OCR_PARAM_ALIGN;
        t->numel += t->items[i].numel;
    }
    t->bytes = off;
    t->device = ocr_cpu();
    t->data = ocr_mem_calloc(t->device, t->category, off);
    ck_assert_ptr_nonnull(t->data);
}

static void table_free(OcrParamTable *t) {
    for (int i = 0; i < t->count; i++) free(t->items[i].name);
    free(t->items);
    ocr_mem_free(t->data);
    ocr_mem_free(t->grad);
    memset(t, 0, sizeof *t);
}

static OcrTensor at(const OcrParamTable *t, void *base, int i) {
    const OcrParamInfo *p = &t->items[i];
    return ocr_tensor_view((char *)base + p->offset, p->dtype, ocr_cpu(), p->ndim, p->shape);
}

// Images whose columns spell the label: each character is 3 columns of its class colour, then
// a blank column; the network must learn a per-column classifier that CTC can align.
static void make_data(Net *n) {
    static const float colour[K][C] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1, 1, -1}};
    float img[B * H * W * C];
    int32_t tg[B * S], tl[B];
    OcrRng r = ocr_rng_make(5, 1);
    memset(tg, 0, sizeof tg);
    for (int b = 0; b < B; b++) {
        tl[b] = 1 + b % 3;
        for (int j = 0; j < tl[b]; j++) tg[b * S + j] = (int32_t)ocr_rng_next_int(&r, 1, K - 1);
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                int ch = x / 4, inside = x % 4 != 3 && ch < tl[b];
                for (int c = 0; c < C; c++) {
                    float v = inside ? colour[tg[b * S + ch]][c] : 0.0f;
                    img[((b * H + y) * W + x) * C + c] = v + 0.2f * (ocr_rng_next_uniform(&r) - 0.5f);
                }
            }
    }
    n->images = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(B, H, W, C), img);
    ck_assert_int_eq(ocr_tensor_alloc(&n->targets, OCR_I32, ocr_cpu(), 2, OCR_SHAPE(B, S), OCR_MEM_DATA), OCR_OK);
    ck_assert_int_eq(ocr_tensor_alloc(&n->tlen, OCR_I32, ocr_cpu(), 1, OCR_SHAPE(B), OCR_MEM_DATA), OCR_OK);
    memcpy(n->targets.data, tg, sizeof tg);
    memcpy(n->tlen.data, tl, sizeof tl);
}

static void net_build(Net *n) {
    memset(n, 0, sizeof *n);
    static const char *names[NOPS] = {"net.conv", "net.bn", "net.act", "net.pool", "head.fc"};
    static const char *types[NOPS] = {"conv2d", "batchnorm", "activation", "pool", "linear"};
    n->ops.items = calloc(NOPS, sizeof *n->ops.items);
    n->ops.count = n->ops.cap = NOPS;
    for (int i = 0; i < NOPS; i++) {
        n->ops.items[i].name = strdup(names[i]);
        n->ops.items[i].type = types[i];
        n->ops.items[i].compute_dtype = OCR_F32;
    }
    n->params.category = n->stats.category = OCR_MEM_PARAMS;
    n->params.items = calloc(NPARAMS, sizeof *n->params.items);
    n->params.cap = NPARAMS;
    table_add(&n->params, "net.conv.weight", 4, OCR_SHAPE(F, 3, 3, C), OCR_ROLE_WEIGHT);
    table_add(&n->params, "net.conv.bias", 1, OCR_SHAPE(F), OCR_ROLE_BIAS);
    table_add(&n->params, "net.bn.weight", 1, OCR_SHAPE(F), OCR_ROLE_NORM);
    table_add(&n->params, "net.bn.bias", 1, OCR_SHAPE(F), OCR_ROLE_NORM);
    table_add(&n->params, "head.fc.weight", 2, OCR_SHAPE(F, K), OCR_ROLE_WEIGHT);
    table_add(&n->params, "head.fc.bias", 1, OCR_SHAPE(K), OCR_ROLE_BIAS);
    table_alloc(&n->params);
    n->stats.items = calloc(2, sizeof *n->stats.items);
    n->stats.cap = 2;
    table_add(&n->stats, "net.bn._mean", 1, OCR_SHAPE(F), OCR_ROLE_STAT);
    table_add(&n->stats, "net.bn._variance", 1, OCR_SHAPE(F), OCR_ROLE_STAT);
    table_alloc(&n->stats);
    float buf[F * 9 * C];
    OcrTensor t = at(&n->params, n->params.data, P_CW);
    ocr_rng_fill_normal(buf, F * 9 * C, 3, 1, 0, 0.0f, sqrtf(2.0f / (9 * C)));
    ocr_tensor_from_f32(&t, buf);
    t = at(&n->params, n->params.data, P_G);
    ocr_tensor_fill(&t, 1.0f);
    t = at(&n->params, n->params.data, P_FW);
    ocr_rng_fill_uniform(buf, F * K, 3, 2, 0, -0.25f, 0.25f);
    ocr_tensor_from_f32(&t, buf);
    t = at(&n->stats, n->stats.data, 1);
    ocr_tensor_fill(&t, 1.0f);
    make_data(n);
}

// After the engine is attached (O2 may have changed the table): gradients and moments.
static void net_prepare(Net *n) {
    n->params.grad = ocr_mem_calloc(ocr_cpu(), OCR_MEM_GRADS, n->params.bytes);
    ck_assert_ptr_nonnull(n->params.grad);
    for (int i = 0; i < NPARAMS; i++) {
        const OcrParamInfo *p = &n->params.items[i];
        ck_assert_int_eq(ocr_tensor_alloc(&n->m[i], OCR_F32, ocr_cpu(), p->ndim, p->shape, OCR_MEM_OPTIMIZER), OCR_OK);
        ck_assert_int_eq(ocr_tensor_alloc(&n->v[i], OCR_F32, ocr_cpu(), p->ndim, p->shape, OCR_MEM_OPTIMIZER), OCR_OK);
        ocr_tensor_fill(&n->m[i], 0.0f);
        ocr_tensor_fill(&n->v[i], 0.0f);
    }
}

static void net_free(Net *n) {
    for (int i = 0; i < NOPS; i++) free(n->ops.items[i].name);
    free(n->ops.items);
    table_free(&n->params);
    table_free(&n->stats);
    for (int i = 0; i < NPARAMS; i++) ocr_tensor_free(&n->m[i]), ocr_tensor_free(&n->v[i]);
    ocr_tensor_free(&n->images);
    ocr_tensor_free(&n->targets);
    ocr_tensor_free(&n->tlen);
    ocr_tensor_free(&n->logits_buf);
}

// ---- one training step ------------------------------------------------------------------------
typedef struct {
    int param;  // -1: none
    int64_t index;
    float value;
} Inject;

typedef struct {
    double loss;
    int skipped;
    int bn_stats_moved;  // the forward changed the running statistics
} StepOut;

static OcrTensor new_t(ocr_dtype_t d, int ndim, const int64_t *shape) {
    OcrTensor t;
    ck_assert_int_eq(ocr_tensor_alloc(&t, d, ocr_cpu(), ndim, shape, OCR_MEM_ACTIVATIONS), OCR_OK);
    return t;
}

// The weight an op reads: the O1 cast-cache copy when there is one.
static OcrTensor weight(const AmpEngine *e, const Net *n, int i) {
    const OcrTensor *c = amp_cast_cache_get(&e->cache, i);
    return c ? *c : at(&n->params, n->params.data, i);
}

static void record(Net *n, int op, const OcrTensor *y) {
    n->ops.items[op].out = *y;
    n->ops.items[op].out_ndim = y->ndim;
}

static void adam_fill(void *user, int i, AdamParams *p) {
    const AmpEngine *e = user;
    (void)i;
    p->lr = 1e-2f;
    p->beta1 = 0.9f;
    p->beta2 = 0.999f;
    p->eps = 1e-8f;
    p->step = e->step + 1;
}

// 1: an overflowed net_step ends with amp_engine_end_attempt (recompute mode's) instead of end_step.
static int g_end_attempt;

static StepOut net_step(Net *n, AmpEngine *e, const Inject *inj, int ninj) {
    StepOut out = {0};
    ocr_dtype_t dt[NOPS];
    for (int i = 0; i < NOPS; i++) {
        dt[i] = n->ops.items[i].compute_dtype;
        n->ops.items[i].out_ndim = 0;
    }
    ck_assert_int_eq(amp_engine_begin_step(e), OCR_OK);
    float stats_before[2 * F];
    for (int s = 0; s < 2; s++) {
        OcrTensor st = at(&n->stats, n->stats.data, s);
        ocr_tensor_to_f32(&st, stats_before + s * F);
    }
    memset(n->params.grad, 0, n->params.bytes);
    Conv2dParams cp = {1, 1, 1, 1, 1};
    Pool2dParams pp = {H, 1, H, 1, 0, 0};
    // forward: white ops cast their input to their dtype (autocast); the others take it as is
    OcrTensor x0 = n->images, x0c = {0};
    if (dt[OP_CONV] != OCR_F32) x0c = new_t(dt[OP_CONV], 4, x0.shape), ocr_cast_forward(&x0c, &x0);
    const OcrTensor *xin = x0c.data ? &x0c : &x0;
    OcrTensor cw = weight(e, n, P_CW), cb = weight(e, n, P_CB);
    OcrTensor y1 = new_t(dt[OP_CONV], 4, OCR_SHAPE(B, H, W, F));
    ocr_conv2d_forward(&y1, xin, &cw, &cb, cp);
    record(n, OP_CONV, &y1);
    OcrTensor g = at(&n->params, n->params.data, P_G), beta = at(&n->params, n->params.data, P_BETA);
    OcrTensor rm = at(&n->stats, n->stats.data, 0), rv = at(&n->stats, n->stats.data, 1);
    OcrTensor smean = new_t(OCR_F32, 1, OCR_SHAPE(F)), srstd = new_t(OCR_F32, 1, OCR_SHAPE(F));
    OcrTensor y2 = new_t(dt[OP_BN], 4, y1.shape);
    ocr_batchnorm2d_forward(&y2, &smean, &srstd, &rm, &rv, &y1, &g, &beta, 0.9f, 1e-5f, 1);
    record(n, OP_BN, &y2);
    OcrTensor y3 = new_t(dt[OP_ACT], 4, y1.shape);
    ocr_activation_forward(&y3, &y2, OCR_ACT_HARDSWISH);
    record(n, OP_ACT, &y3);
    OcrTensor y4 = new_t(dt[OP_POOL], 4, OCR_SHAPE(B, 1, W, F));
    ocr_avgpool2d_forward(&y4, &y3, pp);
    record(n, OP_POOL, &y4);
    OcrTensor x5 = ocr_tensor_reshape(&y4, 3, OCR_SHAPE(B, W, F)), x5c = {0};
    if (dt[OP_FC] != x5.dtype) x5c = new_t(dt[OP_FC], 3, x5.shape), ocr_cast_forward(&x5c, &x5);
    const OcrTensor *fin = x5c.data ? &x5c : &x5;
    OcrTensor fw = weight(e, n, P_FW), fb = weight(e, n, P_FB);
    OcrTensor logits = new_t(dt[OP_FC], 3, OCR_SHAPE(B, W, K));
    ocr_linear_forward(&logits, fin, &fw, &fb);
    record(n, OP_FC, &logits);
    amp_engine_after_forward(e);
    for (int s = 0; s < 2; s++) {
        OcrTensor st = at(&n->stats, n->stats.data, s);
        for (int c = 0; c < F; c++) out.bn_stats_moved |= ocr_tensor_get_f32(&st, c) != stats_before[s * F + c];
    }

    // loss in f32 on f32 logits, its gradient carrying the loss scale
    const OcrTensor *l32 = amp_loss_logits(&logits, &n->logits_buf);
    ck_assert_int_eq(l32->dtype, OCR_F32);
    OcrTensor dl32 = new_t(OCR_F32, 3, logits.shape), dlogits = new_t(dt[OP_FC], 3, logits.shape);
    CtcParams ctc = {0};
    ctc.grad_scale = amp_engine_loss_scale(e);
    out.loss = ocr_ctc_loss_forward(NULL, NULL, &dl32, NULL, l32, &n->targets, &n->tlen, NULL, ctc);
    amp_loss_dlogits(&dlogits, &dl32);

    // backward: activation gradients in their activation's dtype, weight gradients in the table's
    OcrTensor gfw = at(&n->params, n->params.grad, P_FW), gfb = at(&n->params, n->params.grad, P_FB);
    OcrTensor dfin = new_t(fin->dtype, 3, fin->shape);
    ocr_linear_backward(&dfin, &gfw, &gfb, &dlogits, fin, &fw);
    OcrTensor dy4 = new_t(y4.dtype, 4, y4.shape);
    OcrTensor dx5 = ocr_tensor_reshape(&dy4, 3, x5.shape);
    ocr_cast_backward(&dx5, &dfin);
    OcrTensor dy3 = new_t(y3.dtype, 4, y3.shape);
    ocr_avgpool2d_backward(&dy3, &dy4, pp);
    OcrTensor dy2 = new_t(y2.dtype, 4, y2.shape);
    ocr_activation_backward(&dy2, &dy3, &y2, OCR_ACT_HARDSWISH);
    OcrTensor dy1 = new_t(y1.dtype, 4, y1.shape);
    OcrTensor gg = at(&n->params, n->params.grad, P_G), gbeta = at(&n->params, n->params.grad, P_BETA);
    ocr_batchnorm2d_backward(&dy1, &gg, &gbeta, &dy2, &y1, &g, &smean, &srstd, 1);
    OcrTensor gcw = at(&n->params, n->params.grad, P_CW), gcb = at(&n->params, n->params.grad, P_CB);
    ocr_conv2d_backward(NULL, &gcw, &gcb, &dy1, xin, &cw, cp);
    for (int k = 0; k < ninj; k++) {
        OcrTensor gi = at(&n->params, n->params.grad, inj[k].param);
        ocr_tensor_set_f32(&gi, inj[k].index, inj[k].value);
    }

    out.skipped = amp_engine_check_grads(e);
    int ran = amp_engine_adam_step(e, n->m, n->v, adam_fill, e);
    ck_assert_int_eq(ran, !out.skipped);
    if (out.skipped && g_end_attempt)
        amp_engine_end_attempt(e);
    else
        amp_engine_end_step(e);

    OcrTensor *tmp[] = {&x0c, &y1, &smean, &srstd, &y2, &y3, &y4, &x5c, &logits, &dl32, &dlogits, &dfin, &dy4, &dy3,
                        &dy2, &dy1};
    for (size_t i = 0; i < sizeof tmp / sizeof tmp[0]; i++) ocr_tensor_free(tmp[i]);
    return out;
}

static void attach(Net *n, AmpEngine *e, ocr_amp_level_t level, ocr_dtype_t dtype, AmpScalerConfig sc) {
    AmpConfig cfg;
    amp_config_init_off(&cfg);
    ck_assert_int_eq(amp_policy_make(&cfg.policy, level, dtype, NULL, NULL, NULL), OCR_OK);
    cfg.scaler = sc;
    amp_engine_init(e, &cfg);
    ck_assert_msg(ocr_amp_attach(e, &n->ops, &n->params, &n->stats) == OCR_OK, "%s", ocr_last_error());
    net_prepare(n);
}

// ---- tests ---------------------------------------------------------------------------------------

START_TEST(attach_o2_converts_tables) {
    Net n;
    net_build(&n);
    float conv_w[F * 9 * C];
    OcrTensor t = at(&n.params, n.params.data, P_CW);
    ocr_tensor_to_f32(&t, conv_w);
    size_t f32_bytes = n.params.bytes;
    OcrMemStats m0 = ocr_mem_stats(ocr_cpu());
    AmpEngine e;
    attach(&n, &e, OCR_AMP_O2, OCR_F16, amp_scaler_config_default());
    for (int i = 0; i < NOPS; i++) ck_assert_int_eq(n.ops.items[i].compute_dtype, OCR_F16);
    ck_assert_int_eq(n.params.items[P_CW].dtype, OCR_F16);
    ck_assert_int_eq(n.params.items[P_CB].dtype, OCR_F16);
    ck_assert_int_eq(n.params.items[P_G].dtype, OCR_F32);  // BN parameters stay f32
    ck_assert_int_eq(n.params.items[P_BETA].dtype, OCR_F32);
    ck_assert_int_eq(n.params.items[P_FW].dtype, OCR_F16);
    ck_assert_int_lt(n.params.bytes, f32_bytes);
    for (int i = 0; i < NPARAMS; i++) ck_assert_int_eq(n.params.items[i].offset % OCR_PARAM_ALIGN, 0);
    AmpManaged mg;
    ocr_amp_managed(&mg, &n.ops, &n.params, &n.stats);
    ck_assert_int_eq(amp_param_owner(&mg, "net.bn.bias"), OP_BN);
    ck_assert_int_eq(amp_param_owner(&mg, "head.fc.weight"), OP_FC);
    ck_assert_int_eq(amp_param_owner(&mg, "nothing.weight"), -1);
    // masters hold the f32 values, the working weights their f16 rounding
    OcrTensor *mw = amp_engine_master(&e, P_CW);
    ck_assert_ptr_nonnull(mw);
    ck_assert_ptr_null(amp_engine_master(&e, P_G));
    ck_assert_mem_eq(mw->data, conv_w, sizeof conv_w);
    t = at(&n.params, n.params.data, P_CW);
    for (int i = 0; i < F * 9 * C; i++)
        ck_assert_float_eq(ocr_tensor_get_f32(&t, i), ocr_f16_to_f32(ocr_f32_to_f16(conv_w[i])));
    OcrMemStats m1 = ocr_mem_stats(ocr_cpu());
    AmpMemory am = amp_engine_memory(&e);
    ck_assert_int_eq(m1.current[OCR_MEM_MASTER] - m0.current[OCR_MEM_MASTER], am.master_bytes);
    ck_assert_int_eq(am.master_bytes, (int64_t)(F * 9 * C * 4 + 64 + F * K * 4 + 64));  // each entry 64-aligned
    ck_assert_int_eq(m1.current[OCR_MEM_PARAMS] - m0.current[OCR_MEM_PARAMS],
                     (int64_t)n.params.bytes - (int64_t)f32_bytes);
    amp_engine_free(&e);
    net_free(&n);

    // O1: table untouched, a cast cache for the low-precision ops' weights and biases.
    net_build(&n);
    attach(&n, &e, OCR_AMP_O1, OCR_BF16, amp_scaler_config_off());
    for (int i = 0; i < NPARAMS; i++) ck_assert_int_eq(n.params.items[i].dtype, OCR_F32);
    ck_assert_int_eq(n.ops.items[OP_BN].compute_dtype, OCR_BF16);  // follows the conv
    ck_assert_int_gt(e.cache.bytes, 0);
    ck_assert_int_eq(amp_engine_memory(&e).master_bytes, 0);
    ck_assert_int_eq(amp_engine_begin_step(&e), OCR_OK);
    ck_assert_ptr_nonnull(amp_cast_cache_get(&e.cache, P_CW));
    ck_assert_ptr_null(amp_cast_cache_get(&e.cache, P_G));
    amp_engine_free(&e);
    net_free(&n);
}
END_TEST

// Runs fn with stderr going to a buffer; returns what was written (static storage).
static const char *capture_stderr_begin(int *saved) {
    fflush(stderr);
    *saved = dup(2);
    char path[1024];
    int fd = ocr_test_tmpfile(path, sizeof path, "amp_test_log_");
    unlink(path);
    dup2(fd, 2);
    close(fd);
    return NULL;
}

static char *capture_stderr_end(int saved) {
    static char buf[16384];
    fflush(stderr);
    off_t len = lseek(2, 0, SEEK_END);
    lseek(2, 0, SEEK_SET);
    ssize_t got = read(2, buf, len < (off_t)sizeof buf - 1 ? (size_t)len : sizeof buf - 1);
    buf[got > 0 ? got : 0] = 0;
    dup2(saved, 2);
    close(saved);
    return buf;
}

static void copy_state(Net *n, AmpEngine *e, char **params, char **master, float **mv, float **bn) {
    *params = malloc(n->params.bytes);
    memcpy(*params, n->params.data, n->params.bytes);
    *master = malloc(e->master.bytes + 1);
    if (e->master.bytes) memcpy(*master, e->master.buffer, e->master.bytes);
    int64_t tot = 0;
    for (int i = 0; i < NPARAMS; i++) tot += 2 * ocr_tensor_numel(&n->m[i]);
    *mv = malloc((size_t)tot * sizeof(float));
    int64_t o = 0;
    for (int i = 0; i < NPARAMS; i++) {
        ocr_tensor_to_f32(&n->m[i], *mv + o), o += ocr_tensor_numel(&n->m[i]);
        ocr_tensor_to_f32(&n->v[i], *mv + o), o += ocr_tensor_numel(&n->v[i]);
    }
    *bn = malloc(n->stats.bytes);
    memcpy(*bn, n->stats.data, n->stats.bytes);
}

static void expect_unchanged(Net *n, AmpEngine *e, const char *params, const char *master, const float *mv,
                             const float *bn) {
    ck_assert_msg(memcmp(params, n->params.data, n->params.bytes) == 0, "weights changed on a skipped step");
    if (e->master.bytes) ck_assert_msg(memcmp(master, e->master.buffer, e->master.bytes) == 0, "masters changed");
    int64_t o = 0;
    for (int i = 0; i < NPARAMS; i++) {
        for (int64_t k = 0; k < ocr_tensor_numel(&n->m[i]); k++)
            ck_assert_msg(ocr_tensor_get_f32(&n->m[i], k) == mv[o + k], "moment m of %d changed", i);
        o += ocr_tensor_numel(&n->m[i]);
        for (int64_t k = 0; k < ocr_tensor_numel(&n->v[i]); k++)
            ck_assert_msg(ocr_tensor_get_f32(&n->v[i], k) == mv[o + k], "moment v of %d changed", i);
        o += ocr_tensor_numel(&n->v[i]);
    }
    ck_assert_msg(memcmp(bn, n->stats.data, n->stats.bytes) == 0, "BN running statistics not restored");
}

START_TEST(injected_overflow_skips_and_names_layer) {
    static const struct {
        ocr_amp_level_t level;
        Inject inj[2];
        int ninj;
        int layer;
        const char *name;
    } cases[] = {
        // NaN in the conv weight gradient and inf in a BN parameter gradient: the BN layer comes
        // first in backward order.
        {OCR_AMP_O2, {{P_CW, 5, NAN}, {P_BETA, 1, INFINITY}}, 2, OP_BN, "net.bn"},
        {OCR_AMP_O1, {{P_CW, 0, -INFINITY}}, 1, OP_CONV, "net.conv"},
        {OCR_AMP_O2, {{P_FB, 2, INFINITY}}, 1, OP_FC, "head.fc"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        Net n;
        net_build(&n);
        AmpEngine e;
        // 1024: low enough that the clean steps do not overflow the f16 weight gradients
        // (with 65536 the first steps of this net overflow, as training_agrees shows).
        AmpScalerConfig sc = amp_scaler_config_default();
        sc.init_scale = 1024.0f;
        attach(&n, &e, cases[c].level, OCR_F16, sc);
        for (int s = 0; s < 3; s++) ck_assert(!net_step(&n, &e, NULL, 0).skipped);
        char *params, *master;
        float *mv, *bn;
        copy_state(&n, &e, &params, &master, &mv, &bn);
        int saved;
        capture_stderr_begin(&saved);
        StepOut o = net_step(&n, &e, cases[c].inj, cases[c].ninj);
        char *log = capture_stderr_end(saved);
        ck_assert(o.skipped);
        ck_assert_msg(o.bn_stats_moved, "the forward did not move the BN statistics: the restore test is void");
        expect_unchanged(&n, &e, params, master, mv, bn);
        ck_assert_int_eq(e.last_layer, cases[c].layer);
        ck_assert_int_eq(e.stats.last_overflow_layer, cases[c].layer);
        ck_assert_int_eq(e.stats.skipped_steps, 1);
        ck_assert_int_eq(e.stats.last_skipped_step, 3);
        ck_assert_int_eq(e.stats.overflows[cases[c].layer], 1);
        ck_assert(e.stats.grad_nonfinite[cases[c].layer]);
        ck_assert_float_eq(amp_engine_loss_scale(&e), 512.0f);
        ck_assert_msg(strstr(log, "step 3 skipped") && strstr(log, cases[c].name) && strstr(log, "1024 -> 512"),
                      "log: %s", log);
        // Per-layer gradient amax of the same pass: finite and positive for the head.
        ck_assert(e.stats.grad_amax[OP_FC] > 0.0f && isfinite(e.stats.grad_amax[OP_FC]));
        // The next clean step trains again.
        ck_assert(!net_step(&n, &e, NULL, 0).skipped);
        ck_assert(memcmp(params, n.params.data, n.params.bytes) != 0);
        ck_assert_int_eq(e.stats.consecutive_skipped, 0);
        char *json = amp_stats_json(&e.stats, 1);
        ck_assert_msg(strstr(json, "\"skipped_steps\":1") && strstr(json, cases[c].name), "%s", json);
        free(json);
        free(params), free(master), free(mv), free(bn);
        amp_engine_free(&e);
        net_free(&n);
    }
}
END_TEST

// Recompute mode (Global.amp_overflow): when an overflowed step may run again, and an attempt
// that does leaves nothing behind: weights, masters, moments and BN statistics as before, the
// step counter (the stochastic-rounding seed) and the skip statistics unmoved, the scale backed
// off once with the scaler's counters those of a scaler started there; counted and logged.
START_TEST(recompute_attempt_leaves_nothing) {
    Net n;
    net_build(&n);
    AmpEngine e;
    AmpScalerConfig sc = amp_scaler_config_default();  // floor 1
    sc.init_scale = 1024.0f;
    attach(&n, &e, OCR_AMP_O2, OCR_F16, sc);
    ck_assert(!amp_engine_can_recompute(&e, 1024.0f, 1.0, 0));  // skip mode (amp_config_init_off)
    e.cfg.overflow_recompute = 1;
    ck_assert(amp_engine_can_recompute(&e, 1024.0f, 1.0, 0));
    ck_assert(!amp_engine_can_recompute(&e, 1024.0f, NAN, 0));       // the forward's, not the scale's
    ck_assert(!amp_engine_can_recompute(&e, 1024.0f, INFINITY, 0));
    ck_assert(!amp_engine_can_recompute(&e, 1024.0f, 1.0, AMP_MAX_RECOMPUTES));
    ck_assert(!amp_engine_can_recompute(&e, 1.0f, 1.0, 0));          // at the floor
    for (int s = 0; s < 3; s++) ck_assert(!net_step(&n, &e, NULL, 0).skipped);
    char *params, *master;
    float *mv, *bn;
    copy_state(&n, &e, &params, &master, &mv, &bn);
    const AmpScalerState before = amp_scaler_state(&e.scaler);
    const int64_t step = e.step;
    const Inject inj = {P_CW, 3, INFINITY};
    int saved;
    capture_stderr_begin(&saved);
    g_end_attempt = 1;
    StepOut o = net_step(&n, &e, &inj, 1);
    g_end_attempt = 0;
    char *log = capture_stderr_end(saved);
    ck_assert(o.skipped && o.bn_stats_moved);
    expect_unchanged(&n, &e, params, master, mv, bn);
    ck_assert_int_eq(e.step, step);
    ck_assert_int_eq(e.stats.steps, step);
    ck_assert_int_eq(e.stats.skipped_steps, 0);
    ck_assert_int_eq(e.stats.recomputed_steps, 1);
    ck_assert_float_eq(amp_engine_loss_scale(&e), 512.0f);
    ck_assert(e.scaler.good_steps == 0 && e.scaler.bad_steps == 0 && e.scaler.steps == before.steps &&
              e.scaler.overflow_steps == before.overflow_steps);
    ck_assert_msg(strstr(log, "step 3: inf/NaN gradients") && strstr(log, "net.conv") &&
                      strstr(log, "recomputed at 512"),
                  "log: %s", log);
    // The step again, clean: it trains, and is step 3.
    ck_assert(!net_step(&n, &e, NULL, 0).skipped);
    ck_assert_int_eq(e.step, step + 1);
    // The count survives a checkpoint; a state without it (an older checkpoint) reads as 0.
    AmpEngineState st = amp_engine_state(&e), back;
    ck_assert_int_eq(st.recomputed_steps, 1);
    cJSON *j = cJSON_CreateObject();
    amp_engine_state_to_json(&st, j);
    ck_assert_int_eq(amp_engine_state_from_json(&back, j, "state.json"), OCR_OK);
    ck_assert_int_eq(back.recomputed_steps, 1);
    cJSON_DeleteItemFromObject(j, "recomputed_steps");
    ck_assert_int_eq(amp_engine_state_from_json(&back, j, "state.json"), OCR_OK);
    ck_assert_int_eq(back.recomputed_steps, 0);
    cJSON_Delete(j);
    free(params), free(master), free(mv), free(bn);
    amp_engine_free(&e);
    net_free(&n);
}
END_TEST

// A static scale far too large overflows the f16 loss gradient itself: every gradient is
// non-finite and the head, the first layer in backward order, is named.
START_TEST(natural_f16_overflow) {
    Net n;
    net_build(&n);
    AmpEngine e;
    AmpScalerConfig sc = amp_scaler_config_default();
    sc.dynamic = 0;
    sc.init_scale = 16777216.0f;
    attach(&n, &e, OCR_AMP_O2, OCR_F16, sc);
    int saved;
    capture_stderr_begin(&saved);
    StepOut o = net_step(&n, &e, NULL, 0);
    capture_stderr_end(saved);
    ck_assert(o.skipped);
    ck_assert_int_eq(e.last_layer, OP_FC);
    ck_assert_float_eq(amp_engine_loss_scale(&e), 16777216.0f);  // static: kept
    amp_engine_free(&e);
    net_free(&n);

    // The same scale in bf16 is no problem (and bf16 does not scale at all).
    net_build(&n);
    attach(&n, &e, OCR_AMP_O2, OCR_BF16, amp_scaler_config_off());
    ck_assert(!net_step(&n, &e, NULL, 0).skipped);
    ck_assert_float_eq(amp_engine_loss_scale(&e), 1.0f);
    amp_engine_free(&e);
    net_free(&n);
}
END_TEST

typedef struct {
    const char *name;
    ocr_amp_level_t level;
    ocr_dtype_t dtype;
} Mode;

static void train(const Mode *m, int steps, double *losses, AmpStats *stats_out, int sr) {
    Net n;
    net_build(&n);
    AmpEngine e;
    AmpConfig cfg;
    amp_config_init_off(&cfg);
    ck_assert_int_eq(amp_policy_make(&cfg.policy, m->level, m->dtype, NULL, NULL, NULL), OCR_OK);
    cfg.scaler = m->level != OCR_AMP_O0 && m->dtype == OCR_F16 ? amp_scaler_config_default() : amp_scaler_config_off();
    cfg.stochastic_rounding = sr;
    cfg.seed = 99;
    cfg.activation_stats_every = 100;
    amp_engine_init(&e, &cfg);
    ck_assert_int_eq(ocr_amp_attach(&e, &n.ops, &n.params, &n.stats), OCR_OK);
    net_prepare(&n);
    for (int s = 0; s < steps; s++) losses[s] = net_step(&n, &e, NULL, 0).loss;
    if (sr) {
        // Stochastic rounding: every working weight is one of the two bf16 neighbours of its
        // master, and not always the nearest one.
        int64_t not_nearest = 0, total = 0;
        for (int i = 0; i < NPARAMS; i++) {
            OcrTensor *mw = amp_engine_master(&e, i);
            if (!mw) continue;
            OcrTensor p = at(&n.params, n.params.data, i);
            for (int64_t k = 0; k < ocr_tensor_numel(&p); k++) {
                float x = ((float *)mw->data)[k], w = ocr_tensor_get_f32(&p, k);
                uint32_t u = ocr_f32_bits(x) & 0xffff0000u;
                float lo = ocr_bits_f32(u), hi = ocr_bf16_to_f32((ocr_bf16_t)((u >> 16) + 1));
                ck_assert_msg(w == lo || w == hi, "%g is not a neighbour of %g", (double)w, (double)x);
                not_nearest += w != ocr_bf16_to_f32(ocr_f32_to_bf16(x));
                total++;
            }
        }
        ck_assert_int_gt(not_nearest, total / 20);
    }
    *stats_out = e.stats;
    memset(&e.stats, 0, sizeof e.stats);  // handed to the caller
    amp_engine_free(&e);
    net_free(&n);
}

START_TEST(training_agrees_across_precisions) {
    enum { STEPS = 300, TAIL = 50 };
    static const Mode modes[] = {{"FP32", OCR_AMP_O0, OCR_F32},
                                 {"FP16-O1", OCR_AMP_O1, OCR_F16},
                                 {"FP16-O2", OCR_AMP_O2, OCR_F16},
                                 {"BF16-O2", OCR_AMP_O2, OCR_BF16}};
    double losses[4][STEPS], tail[4];
    for (int k = 0; k < 4; k++) {
        AmpStats st;
        train(&modes[k], STEPS, losses[k], &st, 0);
        tail[k] = 0;
        for (int s = STEPS - TAIL; s < STEPS; s++) tail[k] += losses[k][s] / TAIL;
        printf("%-8s loss %.4f -> %.4f (mean of the last %d: %.4f), skipped %lld, scale %g\n", modes[k].name,
               losses[k][0], losses[k][STEPS - 1], TAIL, tail[k], (long long)st.skipped_steps, (double)st.scale);
        // every mode learns: the loss falls to a small fraction of its start
        ck_assert_msg(tail[k] < 0.1 * losses[k][0], "%s did not train: %g -> %g", modes[k].name, losses[k][0], tail[k]);
        // op statistics: each op ran once per step in its dtype
        ocr_dtype_t low = modes[k].level == OCR_AMP_O0 ? OCR_F32 : modes[k].dtype;
        ck_assert_int_eq(amp_stats_calls(&st, "conv2d", low), STEPS);
        ck_assert_int_eq(amp_stats_calls(&st, "linear", low), STEPS);
        ck_assert_int_eq(amp_stats_calls(&st, "batchnorm", low), STEPS);
        ck_assert_int_eq(st.steps, STEPS);
        ck_assert_int_eq(st.act_amax_step, 200);
        ck_assert(st.act_amax[OP_FC] > 0.0f);
        amp_stats_free(&st);
    }
    // Agreement (stated tolerance): the first loss within 2 % of FP32's (same weights, f16/bf16
    // rounding only), and the mean loss of the last 50 steps within 0.05 + 25 % of FP32's.
    for (int k = 1; k < 4; k++) {
        ck_assert_msg(fabs(losses[k][0] - losses[0][0]) <= 0.02 * losses[0][0], "%s first loss %g vs %g",
                      modes[k].name, losses[k][0], losses[0][0]);
        ck_assert_msg(fabs(tail[k] - tail[0]) <= 0.05 + 0.25 * tail[0], "%s final loss %g vs FP32 %g", modes[k].name,
                      tail[k], tail[0]);
    }
}
END_TEST

START_TEST(bf16_stochastic_rounding_trains) {
    enum { STEPS = 150 };
    Mode m = {"BF16-O2-SR", OCR_AMP_O2, OCR_BF16};
    double losses[STEPS];
    AmpStats st;
    train(&m, STEPS, losses, &st, 1);
    ck_assert_msg(losses[STEPS - 1] < 0.3 * losses[0], "%g -> %g", losses[0], losses[STEPS - 1]);
    amp_stats_free(&st);
}
END_TEST

int main(void) {
    Suite *s = suite_create("amp_engine");
    TCase *tc = tcase_create("engine");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, attach_o2_converts_tables);
    tcase_add_test(tc, injected_overflow_skips_and_names_layer);
    tcase_add_test(tc, natural_f16_overflow);
    tcase_add_test(tc, recompute_attempt_leaves_nothing);
    tcase_add_test(tc, training_agrees_across_precisions);
    tcase_add_test(tc, bf16_stochastic_rounding_trains);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

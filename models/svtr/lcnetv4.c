#include "models/svtr/lcnetv4.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/svtr/grad.h"

#define NAME OCR_NAME

// Paddle's default conv initialiser: N(0, sqrt(2 / fan_in)).
static OcrInit conv_init(int cin, int groups, int kh, int kw) {
    return ocr_init_kaiming_normal((int64_t)(cin / groups) * kh * kw);
}

// ---- pad ------------------------------------------------------------------------------------------------

void lpad_build(OcrBuilder *b, LPad *l, const char *name, int top, int bottom, int left, int right, float value) {
    memset(l, 0, sizeof *l);
    l->op = ocr_build_op(b, name, "pad");
    l->top = top;
    l->bottom = bottom;
    l->left = left;
    l->right = right;
    l->value = value;
}

// The output keeps the input's dtype: a copy rounds nothing, whatever the op's class.
OcrTensor *lpad_forward(OcrCtx *c, LPad *l, const OcrTensor *x) {
    OCR_ASSERT(x->ndim == 4);
    l->in_dtype = x->dtype;
    l->y = ocr_ctx_new(c, x->dtype, 4,
                       (int64_t[]){x->shape[0], x->shape[1] + l->top + l->bottom, x->shape[2] + l->left + l->right,
                                   x->shape[3]});
    if (!c->plan) ocr_pad2d_forward(&l->y, x, l->top, l->left, l->value);
    ocr_ctx_record(c, l->op, &l->y, 0.0);
    return &l->y;
}

OcrTensor lpad_backward(OcrCtx *c, LPad *l, const OcrTensor *dy, int need_dx) {
    OcrTensor dx = {0};
    if (need_dx) {
        dx = ocr_ctx_new(c, dy->dtype, 4,
                         (int64_t[]){dy->shape[0], dy->shape[1] - l->top - l->bottom,
                                     dy->shape[2] - l->left - l->right, dy->shape[3]});
        if (!c->plan) ocr_pad2d_backward(&dx, dy, l->top, l->left);
    }
    ocr_ctx_free(c, &l->y);
    ocr_ctx_bwd_done(c, l->op);
    return dx;
}

// ---- Conv2D_BN / ConvBNAct ----------------------------------------------------------------------------------

void v4convbn_build(OcrBuilder *b, V4ConvBN *l, const char *prefix, V4ConvBNSpec s) {
    char buf[256];
    memset(l, 0, sizeof *l);
    OCR_ASSERT(s.cin > 0 && s.cout > 0 && s.kh > 0 && s.kw > 0 && s.sh > 0 && s.sw > 0 && s.groups > 0,
               "%s: V4ConvBNSpec geometry must be set", prefix);
    l->deploy = s.deploy;
    l->has_act = s.act != OCR_ACT_NONE;
    OcrInit winit = conv_init(s.cin, s.groups, s.kh, s.kw);
    if (!s.deploy) {
        OcrParamAttr bnattr = s.bn_no_decay ? ocr_attr_no_decay(1.0f) : ocr_attr_default();
        convbn_build(b, &l->cb, prefix, (ConvBNNames){"conv", "bn", "act"},
                     (ConvBNSpec){.cin = s.cin, .cout = s.cout, .kh = s.kh, .kw = s.kw, .sh = s.sh, .sw = s.sw,
                                  .ph = s.ph, .pw = s.pw, .groups = s.groups, .conv_bias = 0, .winit = winit,
                                  .wattr = ocr_attr_default(), .bnattr = bnattr, .act = s.act});
        // bn_weight_init 0: a residual block starts as the identity (Constant(0.0) on bn.weight).
        if (s.bn_zero) b->params->items[l->cb.bn.g].init = ocr_init_const(0.0f);
        return;
    }
    lconv_build(b, &l->conv, s.fused_conv_name ? NAME(buf, "%s.conv", prefix) : prefix,
                (LConvSpec){.cin = s.cin, .cout = s.cout, .kh = s.kh, .kw = s.kw, .sh = s.sh, .sw = s.sw, .ph = s.ph,
                            .pw = s.pw, .groups = s.groups, .bias = 1, .winit = winit, .binit = ocr_init_const(0.0f),
                            .attr = ocr_attr_default()});
    if (l->has_act) lact_build(b, &l->act, NAME(buf, "%s.act", prefix), s.act);
}

OcrTensor *v4convbn_forward(OcrCtx *c, V4ConvBN *l, const OcrTensor *x) {
    if (!l->deploy) return convbn_forward(c, &l->cb, x);
    OcrTensor *y = lconv_forward(c, &l->conv, x);
    if (!l->has_act) return y;
    OcrTensor *a = lact_forward(c, &l->act, y);
    ocr_ctx_release(c, y);
    return a;
}

OcrTensor v4convbn_backward(OcrCtx *c, V4ConvBN *l, const OcrTensor *dy, int need_dx) {
    if (!l->deploy) return convbn_backward(c, &l->cb, dy, need_dx);
    Grad g = borrowed(dy);
    if (l->has_act) grad_set(c, &g, lact_backward(c, &l->act, &g.t, 1));
    OcrTensor dx = lconv_backward(c, &l->conv, &g.t, need_dx);
    grad_drop(c, &g);
    return dx;
}

// BN (gamma, beta, running mean/var, eps) folded into a kernel of `per_out` values per output
// channel, in double: kernel·t and beta − mean·t with t = gamma / sqrt(var + eps).
static void fold(const LBN *bn, const OcrParamTable *params, const OcrParamTable *stats, const double *k, int per_out,
                 int cout, const double *kbias, double *kernel, double *bias) {
    OcrTensor g = ocr_params_tensor(params, bn->g), b = ocr_params_tensor(params, bn->b);
    OcrTensor m = ocr_params_tensor(stats, bn->mean), v = ocr_params_tensor(stats, bn->var);
    for (int o = 0; o < cout; o++) {
        double t = ocr_tensor_get_f32(&g, o) / sqrt((double)ocr_tensor_get_f32(&v, o) + (double)bn->eps);
        for (int i = 0; i < per_out; i++) kernel[(size_t)o * per_out + i] = k[(size_t)o * per_out + i] * t;
        bias[o] = ocr_tensor_get_f32(&b, o) + ((kbias ? kbias[o] : 0.0) - ocr_tensor_get_f32(&m, o)) * t;
    }
}

static double *weights_f64(const OcrParamTable *params, int idx, size_t *n) {
    OcrTensor w = ocr_params_tensor(params, idx);
    *n = (size_t)ocr_tensor_numel(&w);
    double *d = malloc(*n * sizeof *d);
    OCR_ASSERT(d, "out of host memory");
    for (size_t i = 0; i < *n; i++) d[i] = ocr_tensor_get_f32(&w, (int64_t)i);
    return d;
}

// Double-precision fused kernel and bias of a training-form Conv2D_BN (the caller frees both).
static void fuse_f64(const V4ConvBN *l, const OcrParamTable *params, const OcrParamTable *stats, double **kernel,
                     double **bias) {
    OCR_ASSERT(!l->deploy, "fusing needs the training form");
    size_t n;
    double *w = weights_f64(params, l->cb.conv.w, &n);
    int cout = l->cb.conv.cout;
    *kernel = malloc(n * sizeof **kernel);
    *bias = malloc((size_t)cout * sizeof **bias);
    OCR_ASSERT(*kernel && *bias, "out of host memory");
    fold(&l->cb.bn, params, stats, w, (int)(n / (size_t)cout), cout, NULL, *kernel, *bias);
    free(w);
}

void v4convbn_fuse(const V4ConvBN *l, const OcrParamTable *params, const OcrParamTable *stats, float *kernel,
                   float *bias) {
    double *k, *b;
    fuse_f64(l, params, stats, &k, &b);
    int cout = l->cb.conv.cout;
    size_t n = (size_t)cout * (size_t)(l->cb.conv.kh * l->cb.conv.kw * (l->cb.conv.cin / l->cb.conv.p.groups));
    for (size_t i = 0; i < n; i++) kernel[i] = (float)k[i];
    for (int o = 0; o < cout; o++) bias[o] = (float)b[o];
    free(k);
    free(b);
}

// ---- RepDWConv -----------------------------------------------------------------------------------------------

void repdw_build(OcrBuilder *b, RepDW *l, const char *prefix, int channels, int k, int deploy) {
    char buf[256];
    memset(l, 0, sizeof *l);
    l->deploy = deploy;
    l->channels = channels;
    l->k = k;
    if (deploy) {
        lconv_build(b, &l->reparam, NAME(buf, "%s.reparam_conv", prefix),
                    (LConvSpec){.cin = channels, .cout = channels, .kh = k, .kw = k, .sh = 1, .sw = 1, .ph = k / 2,
                                .pw = k / 2, .groups = channels, .bias = 1, .winit = conv_init(1, 1, k, k),
                                .binit = ocr_init_const(0.0f), .attr = ocr_attr_default()});
        return;
    }
    v4convbn_build(b, &l->conv, NAME(buf, "%s.conv", prefix),
                   (V4ConvBNSpec){.cin = channels, .cout = channels, .kh = k, .kw = k, .sh = 1, .sw = 1, .ph = k / 2,
                                  .pw = k / 2, .groups = channels});
    lconv_build(b, &l->conv1, NAME(buf, "%s.conv1", prefix),
                (LConvSpec){.cin = channels, .cout = channels, .kh = 1, .kw = 1, .sh = 1, .sw = 1, .groups = channels,
                            .winit = conv_init(1, 1, 1, 1), .attr = ocr_attr_default()});
    ladd_build(b, &l->add1, NAME(buf, "%s.add1", prefix));
    ladd_build(b, &l->add2, NAME(buf, "%s.add2", prefix));
    lbn_build(b, &l->bn, NAME(buf, "%s.bn", prefix), channels, ocr_attr_default());
}

// bn(conv(x)) + conv1(x) + x formed in conv1's output: the kxk branch's BN is added into it as it
// is computed (lbn_forward_accumulate), then x (ladd_forward_into), so of the three branch outputs
// and two sums only the conv's output (the BN's input) and the final sum (the outer BN's input)
// are kept. The bits of add1 (a + p, commuted) and add2 (s + x).
static int repdw_can_fuse(const OcrCtx *c, const RepDW *l, const OcrTensor *p) {
    return lbn_can_accumulate(c, &l->conv.cb.bn, p) && ladd_can_reuse(c, &l->add2, p) &&
           p->dtype == ocr_ctx_dtype(c, l->add1.op);
}

// The final BN of a training pass keeps the scale that forms its output again (v4block_forward
// may drop that output).
static OcrTensor *repdw_bn_forward(OcrCtx *c, RepDW *l, const OcrTensor *s2) {
    return c->training && !c->keep_all ? lbn_forward_rebuildable(c, &l->bn, s2) : lbn_forward(c, &l->bn, s2);
}

OcrTensor *repdw_forward(OcrCtx *c, RepDW *l, const OcrTensor *x) {
    l->k_recompute = 0;
    if (l->deploy) return lconv_forward(c, &l->reparam, x);
    OCR_ASSERT(!l->conv.deploy && !l->conv.cb.has_act);
    OcrTensor *p = lconv_forward(c, &l->conv1, x);
    if (repdw_can_fuse(c, l, p)) {
        OcrTensor *k = lconv_forward(c, &l->conv.cb.conv, x);
        lbn_forward_accumulate(c, &l->conv.cb.bn, k, p);
        // k, the 3x3 depthwise conv's output, is read again only by its BN's backward.
        l->k_recompute = convbn_drop_conv_output(c, &l->conv.cb);
        ocr_ctx_release(c, k);
        ladd_record_fused(c, &l->add1, p);
        OcrTensor *s2 = ladd_forward_into(c, &l->add2, p, x, p);
        OcrTensor *y = repdw_bn_forward(c, l, s2);
        ocr_ctx_release(c, s2);
        return y;
    }
    OcrTensor *a = v4convbn_forward(c, &l->conv, x);
    OcrTensor *s = ladd_forward(c, &l->add1, a, p);
    ocr_ctx_release(c, a);
    ocr_ctx_release(c, p);
    OcrTensor *s2 = ladd_forward(c, &l->add2, s, x);
    ocr_ctx_release(c, s);
    OcrTensor *y = repdw_bn_forward(c, l, s2);
    ocr_ctx_release(c, s2);
    return y;
}

OcrTensor repdw_backward(OcrCtx *c, RepDW *l, const OcrTensor *dy, int need_dx) {
    if (l->deploy) return lconv_backward(c, &l->reparam, dy, need_dx);
    OcrTensor ds = lbn_backward(c, &l->bn, dy, 1);  // d(conv + conv1 + x), shared by the three branches
    ladd_backward(c, &l->add2);
    ladd_backward(c, &l->add1);
    OcrTensor d1 = lconv_backward(c, &l->conv1, &ds, need_dx);
    if (l->k_recompute) convbn_conv_output_again(c, &l->conv.cb);
    l->k_recompute = 0;
    OcrTensor d3 = v4convbn_backward(c, &l->conv, &ds, need_dx);
    if (!need_dx) {
        ocr_ctx_free(c, &ds);
        return d3;
    }
    ocr_ctx_accumulate(c, &ds, &d1);
    ocr_ctx_accumulate(c, &ds, &d3);
    return ds;
}

void repdw_fuse(const RepDW *l, const OcrParamTable *params, const OcrParamTable *stats, float *kernel, float *bias) {
    OCR_ASSERT(!l->deploy, "repdw_fuse needs the training form");
    int C = l->channels, k = l->k, ctr = (k / 2) * k + k / 2;
    double *w, *bconv;
    fuse_f64(&l->conv, params, stats, &w, &bconv);  // (C, k, k, 1)
    size_t n1;
    double *w1 = weights_f64(params, l->conv1.w, &n1);  // (C, 1, 1, 1)
    for (int o = 0; o < C; o++) w[(size_t)o * k * k + ctr] += w1[o] + 1.0;  // 1x1 branch and identity at the centre
    double *kd = malloc((size_t)C * k * k * sizeof *kd), *bd = malloc((size_t)C * sizeof *bd);
    OCR_ASSERT(kd && bd, "out of host memory");
    fold(&l->bn, params, stats, w, k * k, C, bconv, kd, bd);
    for (size_t i = 0; i < (size_t)C * k * k; i++) kernel[i] = (float)kd[i];
    for (int o = 0; o < C; o++) bias[o] = (float)bd[o];
    free(w);
    free(bconv);
    free(w1);
    free(kd);
    free(bd);
}

// ---- LCNetV4Block ----------------------------------------------------------------------------------------------

void v4block_build(OcrBuilder *b, V4Block *l, const char *prefix, V4BlockSpec s) {
    char buf[256];
    memset(l, 0, sizeof *l);
    OCR_ASSERT(s.cin > 0 && s.cout > 0 && s.k > 0 && s.sh > 0 && s.sw > 0, "%s: V4BlockSpec must be set", prefix);
    l->residual = s.cin == s.cout && s.sh == 1 && s.sw == 1;
    l->use_rep = l->residual;
    l->use_se = s.use_se;
    if (l->use_rep) {
        repdw_build(b, &l->rep, NAME(buf, "%s.token_mixer.rep_dw", prefix), s.cin, s.k, s.deploy);
    } else {
        v4convbn_build(b, &l->dw, NAME(buf, "%s.token_mixer.dw_conv", prefix),
                       (V4ConvBNSpec){.cin = s.cin, .cout = s.cin, .kh = s.k, .kw = s.k, .sh = s.sh, .sw = s.sw,
                                      .ph = (s.k - 1) / 2, .pw = (s.k - 1) / 2, .groups = s.cin, .deploy = s.deploy});
    }
    if (s.use_se) se_build(b, &l->se, NAME(buf, "%s.token_mixer.se", prefix), s.cin, s.lr_mult);
    int hid = s.cin * 2;  // expand_ratio 2
    v4convbn_build(b, &l->expand, NAME(buf, "%s.channel_mixer.expand", prefix),
                   (V4ConvBNSpec){.cin = s.cin, .cout = hid, .kh = 1, .kw = 1, .sh = 1, .sw = 1, .groups = 1,
                                  .act = OCR_ACT_GELU, .deploy = s.deploy});
    v4convbn_build(b, &l->compress, NAME(buf, "%s.channel_mixer.compress", prefix),
                   (V4ConvBNSpec){.cin = hid, .cout = s.cout, .kh = 1, .kw = 1, .sh = 1, .sw = 1, .groups = 1,
                                  .bn_zero = l->residual, .deploy = s.deploy});
    if (l->residual) ladd_build(b, &l->add, NAME(buf, "%s.add", prefix));
}

static LConv *expand_conv(V4Block *l) { return l->expand.deploy ? &l->expand.conv : &l->expand.cb.conv; }

// A training-form conv + BN without activation (the compress layer, the simple stem's conv1.2)
// whose input x is the output of a fused BN + activation, src (lbn_act_forward: src_act->inplace).
// Only the conv's backward reads x again (its weight gradient; src's backward reads its own BN
// input and statistics), so in a training pass x goes as soon as the conv has run, and
// *recompute says whether it must be rebuilt for that backward (lbn_act_backward_rebuilding_output):
// not when the conv saved an autocast copy instead, nor with keep_all, which keeps x. Otherwise
// this is v4convbn_forward.
static OcrTensor *convbn_forward_dropping_input(OcrCtx *c, V4ConvBN *l, OcrTensor *x, const LAct *src_act,
                                                int *recompute) {
    *recompute = 0;
    if (!c->training || l->deploy || l->cb.has_act || !src_act->inplace) return v4convbn_forward(c, l, x);
    OcrTensor *y = lconv_forward(c, &l->cb.conv, x);
    const int saved = !l->cb.conv.xcast;
    ocr_ctx_drop(c, x);
    *recompute = saved && !x->data;
    OcrTensor *z = lbn_forward(c, &l->cb.bn, y);
    ocr_ctx_release(c, y);
    return z;
}

// Backward of convbn_forward_dropping_input: when x was dropped, convbn_backward_rebuilding_input
// (blocks.h), whose gradient is at src's BN input with src's BN + activation backward done
// (*src_done = 1); otherwise v4convbn_backward, the gradient at x (*src_done = 0, nothing of src
// has run).
static OcrTensor v4convbn_backward_rebuilding_input(OcrCtx *c, V4ConvBN *l, const OcrTensor *dy, LBN *src_bn,
                                                    LAct *src_act, int *recompute, int *src_done) {
    *src_done = 0;
    if (!*recompute) return v4convbn_backward(c, l, dy, 1);
    OcrTensor dsrc = convbn_backward_rebuilding_input(c, &l->cb, dy, src_bn, src_act);
    *recompute = 0;
    *src_done = 1;
    return dsrc;
}

OcrTensor *v4block_forward(OcrCtx *c, V4Block *l, const OcrTensor *x) {
    l->se_recompute = 0;
    l->mixer_recompute = 0;
    OcrTensor *t = l->use_rep ? repdw_forward(c, &l->rep, x) : v4convbn_forward(c, &l->dw, x);
    OcrTensor *mixed = t;
    if (l->use_se) {
        OcrTensor *s = se_forward(c, &l->se, t);
        ocr_ctx_release(c, t);
        t = s;
    }
    OcrTensor *e = v4convbn_forward(c, &l->expand, t);
    // e (2·cin channels) goes after the compress conv in training (expand_recompute).
    OcrTensor *o = convbn_forward_dropping_input(c, &l->compress, e, &l->expand.cb.act, &l->expand_recompute);
    ocr_ctx_release(c, e);
    OcrTensor *y = o;
    if (l->residual) {
        // The compress output only feeds the sum (its backward reads its input, not its
        // output): the sum goes over it.
        y = ladd_can_reuse(c, &l->add, o) ? ladd_forward_into(c, &l->add, t, o, o) : ladd_forward(c, &l->add, t, o);
        ocr_ctx_release(c, o);
    }
    // The SE output t = x·s is read again only by the expand conv's backward (as its input, unless
    // that conv saved an autocast copy instead): it goes now, and se_recompute forms it again then.
    if (l->use_se && c->training) {
        const int saved = !expand_conv(l)->xcast;
        ocr_ctx_drop(c, t);
        l->se_recompute = saved && !t->data;  // not with keep_all, which keeps it
    }
    ocr_ctx_release(c, t);
    // The RepDW output is read again by the SE multiply's backward (as the input it scaled) or,
    // without SE, by the expand conv's weight gradient, and by nothing else (the residual sum and
    // the SE's average pool are done with it): it goes too, and mixer_output_again forms it from
    // the RepDW's last BN (its saved input and scale) before either backward runs.
    if (l->use_rep && !l->rep.deploy && c->training && l->rep.bn.save_scale.data &&
        (l->use_se ? l->se.mul.x.data == mixed->data : !expand_conv(l)->xcast)) {
        ocr_ctx_drop(c, mixed);
        l->mixer_recompute = !mixed->data;
    }
    return y;
}

static void mixer_output_again(OcrCtx *c, V4Block *l) {
    lbn_act_output_again(c, &l->rep.bn, NULL);
    if (l->use_se)
        l->se.mul.x = l->rep.bn.y;
    else
        expand_conv(l)->x = l->rep.bn.y;
    l->mixer_recompute = 0;
}

// The SE output again, from the multiply's saved input and scale (the forward's kernel: the same
// bits), as the expand conv's input; the multiply's backward frees it, after the expand's.
static void se_output_again(OcrCtx *c, V4Block *l) {
    LMul *mul = &l->se.mul;
    OcrTensor u = ocr_ctx_new(c, ocr_ctx_dtype(c, mul->op), mul->x.ndim, mul->x.shape);
    if (!c->plan) ocr_channel_scale_forward(&u, &mul->x, &mul->s);
    OCR_ASSERT(!mul->y.data);
    mul->y = u;
    expand_conv(l)->x = u;
    l->se_recompute = 0;
}

OcrTensor v4block_backward(OcrCtx *c, V4Block *l, const OcrTensor *dy, int need_dx) {
    if (l->residual) ladd_backward(c, &l->add);
    Grad g = borrowed(dy);
    int expand_bn_done;
    grad_set(c, &g, v4convbn_backward_rebuilding_input(c, &l->compress, &g.t, &l->expand.cb.bn, &l->expand.cb.act,
                                                     &l->expand_recompute, &expand_bn_done));
    if (l->mixer_recompute) mixer_output_again(c, l);
    if (l->se_recompute) se_output_again(c, l);
    if (expand_bn_done)
        grad_set(c, &g, lconv_backward(c, expand_conv(l), &g.t, 1));
    else
        grad_set(c, &g, v4convbn_backward(c, &l->expand, &g.t, 1));
    // The token mixer's output feeds both the channel mixer and the sum.
    if (l->residual && !c->plan) ocr_accumulate(&g.t, dy);
    if (l->use_se) grad_set(c, &g, se_backward(c, &l->se, &g.t, 1));
    OcrTensor dx = l->use_rep ? repdw_backward(c, &l->rep, &g.t, need_dx) : v4convbn_backward(c, &l->dw, &g.t, need_dx);
    grad_drop(c, &g);
    return dx;
}

// ---- PPLCNetV4 -------------------------------------------------------------------------------------------------

const char *ocr_lcnetv4_size_name(ocr_lcnetv4_size_t s) {
    return s == OCR_LCNETV4_TINY ? "tiny" : s == OCR_LCNETV4_SMALL ? "small" : "medium";
}

// NET_CONFIG_REC of rec_lcnetv4.py: stem (mid, out, branch) and per stage blocks2..blocks6
// (k, in, out, stride h, se); the stride is (s, 1) for s = 2, else 1.
typedef struct {
    int stem_mid, stem_out, branch;
    int nblocks[5];
    int blocks[5][8][5];
} V4Config;
static const V4Config V4_CONFIGS[3] = {
    {24, 48, 0, {1, 1, 3, 4, 0},
     {{{3, 48, 48, 1, 1}},
      {{3, 48, 48, 1, 0}},
      {{3, 48, 96, 2, 0}, {3, 96, 96, 1, 1}, {3, 96, 96, 1, 0}},
      {{3, 96, 160, 2, 0}, {3, 160, 160, 1, 1}, {3, 160, 160, 1, 0}, {3, 160, 160, 1, 0}},
      {{0}}}},
    {48, 96, 1, {1, 2, 7, 3, 0},
     {{{3, 96, 96, 1, 1}},
      {{3, 96, 96, 1, 0}, {3, 96, 96, 1, 0}},
      {{3, 96, 192, 2, 0}, {3, 192, 192, 1, 1}, {3, 192, 192, 1, 0}, {3, 192, 192, 1, 1}, {3, 192, 192, 1, 0},
       {3, 192, 192, 1, 1}, {3, 192, 192, 1, 0}},
      {{3, 192, 384, 2, 0}, {3, 384, 384, 1, 1}, {3, 384, 384, 1, 0}},
      {{0}}}},
    {64, 128, 1, {1, 3, 7, 3, 0},
     {{{3, 128, 128, 1, 1}},
      {{3, 128, 256, 1, 0}, {3, 256, 256, 1, 0}, {3, 256, 256, 1, 1}},
      {{3, 256, 512, 2, 0}, {3, 512, 512, 1, 1}, {3, 512, 512, 1, 0}, {3, 512, 512, 1, 1}, {3, 512, 512, 1, 0},
       {3, 512, 512, 1, 1}, {3, 512, 512, 1, 0}},
      {{3, 512, 768, 2, 0}, {3, 768, 768, 1, 1}, {3, 768, 768, 1, 0}},
      {{0}}}},
};

void lcnet4_build(OcrBuilder *b, Lcnet4 *m, const char *prefix, int in_channels, Lcnet4Spec s) {
    char buf[256];
    memset(m, 0, sizeof *m);
    m->s = s;
    OCR_ASSERT(s.size >= OCR_LCNETV4_TINY && s.size <= OCR_LCNETV4_MEDIUM);
    const V4Config *cfg = &V4_CONFIGS[s.size];
    int mid = cfg->stem_mid, out = cfg->stem_out;
    m->branch_stem = cfg->branch;
    if (!cfg->branch) {
        // nn.Sequential(Conv2D_BN, GELU, Conv2D_BN): PPLCNetV4.rep() leaves it as it is (no rep()).
        v4convbn_build(b, &m->stem[0], NAME(buf, "%s.conv1.0", prefix),
                       (V4ConvBNSpec){.cin = in_channels, .cout = mid, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1,
                                      .pw = 1, .groups = 1});
        lact_build(b, &m->stem_gelu, NAME(buf, "%s.conv1.1", prefix), OCR_ACT_GELU);
        v4convbn_build(b, &m->stem[1], NAME(buf, "%s.conv1.2", prefix),
                       (V4ConvBNSpec){.cin = mid, .cout = out, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1,
                                      .groups = 1});
    } else {
        // StemBlock: ConvBNAct layers (ReLU, BN without decay); the 2x2 convs and the max pool
        // pad "SAME" (0 before, 1 after).
        V4ConvBNSpec cs = {.groups = 1, .sh = 1, .sw = 1, .act = OCR_ACT_RELU, .bn_no_decay = 1, .fused_conv_name = 1,
                           .deploy = s.deploy};
        V4ConvBNSpec s1 = cs, s2a = cs, s2b = cs, s3 = cs, s4 = cs;
        s1.cin = in_channels, s1.cout = mid, s1.kh = s1.kw = 3, s1.sh = s1.sw = 2, s1.ph = s1.pw = 1;
        s2a.cin = mid, s2a.cout = mid / 2, s2a.kh = s2a.kw = 2;
        s2b.cin = mid / 2, s2b.cout = mid, s2b.kh = s2b.kw = 2;
        s3.cin = mid * 2, s3.cout = mid, s3.kh = s3.kw = 3, s3.sh = s3.sw = 2, s3.ph = s3.pw = 1;
        s4.cin = mid, s4.cout = out, s4.kh = s4.kw = 1;
        v4convbn_build(b, &m->stem[0], NAME(buf, "%s.conv1.stem1", prefix), s1);
        lpad_build(b, &m->pad2a, NAME(buf, "%s.conv1.stem2a.pad", prefix), 0, 1, 0, 1, 0.0f);
        v4convbn_build(b, &m->stem[1], NAME(buf, "%s.conv1.stem2a", prefix), s2a);
        lpad_build(b, &m->pad2b, NAME(buf, "%s.conv1.stem2b.pad", prefix), 0, 1, 0, 1, 0.0f);
        v4convbn_build(b, &m->stem[2], NAME(buf, "%s.conv1.stem2b", prefix), s2b);
        lpad_build(b, &m->pad_pool, NAME(buf, "%s.conv1.pool.pad", prefix), 0, 1, 0, 1, -INFINITY);
        lpool_build(b, &m->stem_pool, NAME(buf, "%s.conv1.pool", prefix), LPOOL_MAX, (Pool2dParams){2, 2, 1, 1, 0, 0});
        lconcat_build(b, &m->stem_cat, NAME(buf, "%s.conv1.concat", prefix));
        v4convbn_build(b, &m->stem[3], NAME(buf, "%s.conv1.stem3", prefix), s3);
        v4convbn_build(b, &m->stem[4], NAME(buf, "%s.conv1.stem4", prefix), s4);
        // StemBlock(lr_mult = lr_mult_list[0]): the conv weight and BN parameters of its ConvBNActs.
        // rep() replaces each by a fresh Conv2D without multiplier, so the deploy form has none.
        for (int i = 0; i < 5 && !s.deploy; i++) {
            const V4ConvBN *l = &m->stem[i];
            const int idx[3] = {l->cb.conv.w, l->cb.bn.g, l->cb.bn.b};
            for (int k = 0; k < 3; k++) b->params->items[idx[k]].lr_mult = (float)s.lr_mult_list[0];
        }
    }
    int n = 0, last = out;
    for (int st = 0; st < 5; st++) {
        for (int i = 0; i < cfg->nblocks[st]; i++) {
            const int *t = cfg->blocks[st][i];
            OCR_ASSERT(n < OCR_LCNETV4_MAX_BLOCKS);
            v4block_build(b, &m->blocks[n++], NAME(buf, "%s.blocks%d.%d", prefix, st + 2, i),
                          (V4BlockSpec){.cin = t[1], .cout = t[2], .k = t[0], .sh = t[3], .sw = 1, .use_se = t[4],
                                        .deploy = s.deploy, .lr_mult = (float)s.lr_mult_list[st + 1]});
            last = t[2];
        }
    }
    m->nblocks = n;
    m->out_channels = last;
    lpool_build(b, &m->pool, NAME(buf, "%s.pool", prefix), LPOOL_AVG, (Pool2dParams){3, 2, 3, 2, 0, 0});
}

static OcrTensor *stem_forward(OcrCtx *c, Lcnet4 *m, const OcrTensor *x) {
    if (!m->branch_stem) {
        m->stem_recompute = 0;
        ConvBN *cb = &m->stem[0].cb;
        if (c->keep_all || m->stem[0].deploy || ocr_ctx_dtype(c, cb->bn.op) != ocr_ctx_dtype(c, m->stem_gelu.op)) {
            OcrTensor *a = v4convbn_forward(c, &m->stem[0], x);
            OcrTensor *g = lact_forward(c, &m->stem_gelu, a);
            ocr_ctx_release(c, a);
            OcrTensor *y = v4convbn_forward(c, &m->stem[1], g);
            ocr_ctx_release(c, g);
            return y;
        }
        // conv1.0's BN and the GELU as one fused op (convbn_forward's condition; the bits of BN
        // then GELU): no BN output map, and the GELU output goes after conv1.2's conv.
        OcrTensor *a = lconv_forward(c, &cb->conv, x);
        OcrTensor *g = lbn_act_forward(c, &cb->bn, &m->stem_gelu, a);
        ocr_ctx_release(c, a);
        OcrTensor *y = convbn_forward_dropping_input(c, &m->stem[1], g, &m->stem_gelu, &m->stem_recompute);
        ocr_ctx_release(c, g);
        return y;
    }
    // x1, a, x2 and the pooled map only feed pads and the concat, which keep copies (the convs
    // and the max pool save those), and no backward reads them: each goes once its last reader
    // has run, in training too.
    OcrTensor *x1 = v4convbn_forward(c, &m->stem[0], x);
    OcrTensor *p = lpad_forward(c, &m->pad2a, x1);
    OcrTensor *a = v4convbn_forward(c, &m->stem[1], p);
    ocr_ctx_release(c, p);
    p = lpad_forward(c, &m->pad2b, a);
    ocr_ctx_drop(c, a);
    OcrTensor *x2 = v4convbn_forward(c, &m->stem[2], p);
    ocr_ctx_release(c, p);
    p = lpad_forward(c, &m->pad_pool, x1);
    ocr_ctx_drop(c, x1);
    OcrTensor *xp = lpool_forward(c, &m->stem_pool, p, LPOOL_MAX, 0, 0);
    ocr_ctx_release(c, p);
    OcrTensor *cat = lconcat_forward(c, &m->stem_cat, xp, x2);  // paddle.concat([x1 (pooled), x2])
    ocr_ctx_drop(c, xp);
    ocr_ctx_drop(c, x2);
    OcrTensor *y3 = v4convbn_forward(c, &m->stem[3], cat);
    ocr_ctx_release(c, cat);
    OcrTensor *y = v4convbn_forward(c, &m->stem[4], y3);
    ocr_ctx_release(c, y3);
    return y;
}

static OcrTensor stem_backward(OcrCtx *c, Lcnet4 *m, const OcrTensor *dy, int need_dx) {
    if (!m->branch_stem) {
        Grad g = borrowed(dy);
        ConvBN *cb = &m->stem[0].cb;
        int gelu_done;
        grad_set(c, &g, v4convbn_backward_rebuilding_input(c, &m->stem[1], &g.t, &cb->bn, &m->stem_gelu,
                                                         &m->stem_recompute, &gelu_done));
        OcrTensor dx;
        if (gelu_done) {
            dx = lconv_backward(c, &cb->conv, &g.t, need_dx);
        } else if (m->stem_gelu.inplace) {
            grad_set(c, &g, lbn_act_backward(c, &cb->bn, &m->stem_gelu, &g.t, 1));
            dx = lconv_backward(c, &cb->conv, &g.t, need_dx);
        } else {
            grad_set(c, &g, lact_backward(c, &m->stem_gelu, &g.t, 1));
            dx = v4convbn_backward(c, &m->stem[0], &g.t, need_dx);
        }
        grad_drop(c, &g);
        return dx;
    }
    Grad g = borrowed(dy);
    grad_set(c, &g, v4convbn_backward(c, &m->stem[4], &g.t, 1));
    grad_set(c, &g, v4convbn_backward(c, &m->stem[3], &g.t, 1));
    OcrTensor dpool, dx2;
    lconcat_backward(c, &m->stem_cat, &g.t, &dpool, &dx2);
    grad_drop(c, &g);
    Grad a = {dpool, 1};
    grad_set(c, &a, lpool_backward(c, &m->stem_pool, &a.t, 1));
    grad_set(c, &a, lpad_backward(c, &m->pad_pool, &a.t, 1));
    Grad bb = {dx2, 1};
    grad_set(c, &bb, v4convbn_backward(c, &m->stem[2], &bb.t, 1));
    grad_set(c, &bb, lpad_backward(c, &m->pad2b, &bb.t, 1));
    grad_set(c, &bb, v4convbn_backward(c, &m->stem[1], &bb.t, 1));
    grad_set(c, &bb, lpad_backward(c, &m->pad2a, &bb.t, 1));
    OcrTensor d1 = a.t;
    a.owned = 0;
    OcrTensor d2 = bb.t;
    bb.owned = 0;
    ocr_ctx_accumulate(c, &d1, &d2);
    OcrTensor dx = v4convbn_backward(c, &m->stem[0], &d1, need_dx);
    ocr_ctx_free(c, &d1);
    return dx;
}

OcrTensor *lcnet4_forward(OcrCtx *c, Lcnet4 *m, const OcrTensor *x) {
    OcrTensor *y = stem_forward(c, m, x);
    for (int i = 0; i < m->nblocks; i++) {
        OcrTensor *n = v4block_forward(c, &m->blocks[i], y);
        ocr_ctx_release(c, y);
        y = n;
    }
    OcrTensor *p = lpool_rec_forward(c, &m->pool, y);
    // The average pools' backward reads only their input's shape: the last map goes.
    ocr_ctx_drop(c, y);
    return p;
}

OcrTensor lcnet4_backward(OcrCtx *c, Lcnet4 *m, const OcrTensor *dy, int need_dx) {
    OcrTensor g = lpool_backward(c, &m->pool, dy, 1);
    for (int i = m->nblocks - 1; i >= 0; i--) {
        OcrTensor n = v4block_backward(c, &m->blocks[i], &g, 1);
        ocr_ctx_free(c, &g);
        g = n;
    }
    OcrTensor dx = stem_backward(c, m, &g, need_dx);
    ocr_ctx_free(c, &g);
    return dx;
}

static void put(OcrParamTable *dst, int idx, const float *v) {
    OcrTensor t = ocr_params_tensor(dst, idx);
    ocr_tensor_from_f32(&t, v);
}

static void fuse_into(const V4ConvBN *tl, const OcrParamTable *tp, const OcrParamTable *ts, const V4ConvBN *dl,
                      OcrParamTable *dp) {
    OcrTensor w = ocr_params_tensor(dp, dl->conv.w);
    float *k = malloc((size_t)ocr_tensor_numel(&w) * sizeof *k), *bias = malloc((size_t)dl->conv.cout * sizeof *bias);
    OCR_ASSERT(k && bias, "out of host memory");
    v4convbn_fuse(tl, tp, ts, k, bias);
    put(dp, dl->conv.w, k);
    put(dp, dl->conv.b, bias);
    free(k);
    free(bias);
}

void lcnet4_fuse(const Lcnet4 *t, const OcrParamTable *tparams, const OcrParamTable *tstats, const Lcnet4 *d,
                 OcrParamTable *dparams) {
    OCR_ASSERT(!t->s.deploy && d->s.deploy && t->s.size == d->s.size, "lcnet4_fuse: training form into deploy form");
    if (t->branch_stem)
        for (int i = 0; i < 5; i++) fuse_into(&t->stem[i], tparams, tstats, &d->stem[i], dparams);
    for (int i = 0; i < t->nblocks; i++) {
        const V4Block *tb = &t->blocks[i], *db = &d->blocks[i];
        if (tb->use_rep) {
            int C = tb->rep.channels, k = tb->rep.k;
            float *kk = malloc((size_t)C * k * k * sizeof *kk), *bias = malloc((size_t)C * sizeof *bias);
            OCR_ASSERT(kk && bias, "out of host memory");
            repdw_fuse(&tb->rep, tparams, tstats, kk, bias);
            put(dparams, db->rep.reparam.w, kk);
            put(dparams, db->rep.reparam.b, bias);
            free(kk);
            free(bias);
        } else {
            fuse_into(&tb->dw, tparams, tstats, &db->dw, dparams);
        }
        fuse_into(&tb->expand, tparams, tstats, &db->expand, dparams);
        fuse_into(&tb->compress, tparams, tstats, &db->compress, dparams);
    }
}

// ---- CTC guide layer ----------------------------------------------------------------------------------------------

void ctcguide_build(OcrBuilder *b, CtcGuide *l, const char *prefix, int channels) {
    memset(l, 0, sizeof *l);
    // Conv1D(C, C, 5, padding 2, groups C, no bias) and Conv1D(C, C, 1, no bias) on (B, C, T): on our
    // (B, 1, T, C) map a (1 x 5) depthwise and a 1x1 conv. BatchNorm1D: PaddleOCR's default attributes.
    convbn_build(b, &l->dw, prefix, (ConvBNNames){"0", "1", "2"},
                 (ConvBNSpec){.cin = channels, .cout = channels, .kh = 1, .kw = 5, .sh = 1, .sw = 1, .ph = 0, .pw = 2,
                              .groups = channels, .winit = conv_init(1, 1, 1, 5), .wattr = ocr_attr_default(),
                              .bnattr = ocr_attr_default(), .act = OCR_ACT_HARDSWISH});
    convbn_build(b, &l->pw, prefix, (ConvBNNames){"3", "4", "5"},
                 (ConvBNSpec){.cin = channels, .cout = channels, .kh = 1, .kw = 1, .sh = 1, .sw = 1, .groups = 1,
                              .winit = conv_init(channels, 1, 1, 1), .wattr = ocr_attr_default(),
                              .bnattr = ocr_attr_default(), .act = OCR_ACT_HARDSWISH});
}

OcrTensor *ctcguide_forward(OcrCtx *c, CtcGuide *l, const OcrTensor *x) {
    OcrTensor *a = convbn_forward(c, &l->dw, x);
    OcrTensor *y = convbn_forward(c, &l->pw, a);
    ocr_ctx_release(c, a);
    return y;
}

OcrTensor ctcguide_backward(OcrCtx *c, CtcGuide *l, const OcrTensor *dy, int need_dx) {
    OcrTensor d = convbn_backward(c, &l->pw, dy, 1);
    OcrTensor dx = convbn_backward(c, &l->dw, &d, need_dx);
    ocr_ctx_free(c, &d);
    return dx;
}

// ---- EncoderWithLightSVTR ------------------------------------------------------------------------------------------

void lightsvtr_build(OcrBuilder *b, LightSvtr *l, const char *prefix, LightSvtrSpec s) {
    char buf[256];
    memset(l, 0, sizeof *l);
    OCR_ASSERT(s.in_channels > 0 && s.dims > 0 && s.heads > 0 && s.local_kernel > 0, "%s: LightSvtrSpec must be set",
               prefix);
    l->s = s;
    OcrParamAttr attr = ocr_attr_default();
    const ConvBNNames svtr_names = {"conv", "norm", "act"};
    // The svtrnet ConvBNLayer: conv without bias, BatchNorm2D, Swish.
    convbn_build(b, &l->reduce, NAME(buf, "%s.conv_reduce", prefix), svtr_names,
                 (ConvBNSpec){.cin = s.in_channels, .cout = s.dims, .kh = 1, .kw = 1, .sh = 1, .sw = 1, .groups = 1,
                              .winit = ocr_init_kaiming_uniform(s.in_channels), .wattr = attr, .bnattr = attr,
                              .act = OCR_ACT_SWISH});
    convbn_build(b, &l->local, NAME(buf, "%s.local_conv", prefix), (ConvBNNames){"0", "1", "2"},
                 (ConvBNSpec){.cin = s.dims, .cout = s.dims, .kh = 1, .kw = s.local_kernel, .sh = 1, .sw = 1, .ph = 0,
                              .pw = s.local_kernel / 2, .groups = s.dims, .winit = conv_init(1, 1, 1, s.local_kernel),
                              .wattr = attr, .bnattr = attr, .act = OCR_ACT_SWISH});
    ladd_build(b, &l->add_local, NAME(buf, "%s.local_add", prefix));
    l->blocks = calloc((size_t)(s.depth > 0 ? s.depth : 1), sizeof *l->blocks);
    OCR_ASSERT(l->blocks);
    SvtrBlockSpec bs = {.dim = s.dims, .heads = s.heads, .hidden = (int)(s.dims * s.mlp_ratio), .eps = 1e-5f,
                        .drop = s.drop, .attn_drop = s.attn_drop, .drop_path = 0.0f, .act = OCR_ACT_SWISH};
    for (int i = 0; i < s.depth; i++) svtrblock_build(b, &l->blocks[i], NAME(buf, "%s.svtr_block.%d", prefix, i), bs);
    lln_build(b, &l->norm, NAME(buf, "%s.norm", prefix), s.dims, 1e-6f);
    convbn_build(b, &l->skip, NAME(buf, "%s.skip_conv", prefix), svtr_names,
                 (ConvBNSpec){.cin = s.in_channels, .cout = s.dims, .kh = 1, .kw = 1, .sh = 1, .sw = 1, .groups = 1,
                              .winit = ocr_init_kaiming_uniform(s.in_channels), .wattr = attr, .bnattr = attr,
                              .act = OCR_ACT_SWISH});
    ladd_build(b, &l->add_skip, NAME(buf, "%s.skip_add", prefix));
}

void lightsvtr_free(LightSvtr *l) {
    free(l->blocks);
    l->blocks = NULL;
}

OcrTensor *lightsvtr_forward(OcrCtx *c, LightSvtr *l, const OcrTensor *x) {
    int64_t B = x->shape[0], H = x->shape[1], W = x->shape[2];
    OcrTensor *z = convbn_forward(c, &l->reduce, x);
    OcrTensor *loc = convbn_forward(c, &l->local, z);
    OcrTensor *z2 = ladd_forward(c, &l->add_local, z, loc);
    ocr_ctx_release(c, z);
    ocr_ctx_release(c, loc);
    OcrTensor seq = ocr_tensor_reshape(z2, 3, (int64_t[]){B, H * W, l->s.dims});
    OcrTensor *h = &seq;
    for (int i = 0; i < l->s.depth; i++) {
        OcrTensor *n = svtrblock_forward(c, &l->blocks[i], h, (int)H, (int)W);
        ocr_ctx_release(c, h);
        h = n;
    }
    OcrTensor *nrm = lln_forward(c, &l->norm, h);
    ocr_ctx_release(c, h);
    OcrTensor map = ocr_tensor_reshape(nrm, 4, (int64_t[]){B, H, W, l->s.dims});
    OcrTensor *skip = convbn_forward(c, &l->skip, x);
    OcrTensor *y = ladd_forward(c, &l->add_skip, &map, skip);
    ocr_ctx_release(c, &map);
    ocr_ctx_release(c, skip);
    return y;
}

OcrTensor lightsvtr_backward(OcrCtx *c, LightSvtr *l, const OcrTensor *dy, int need_dx) {
    int to_input = need_dx && !l->s.use_guide;
    ladd_backward(c, &l->add_skip);
    OcrTensor dskip = convbn_backward(c, &l->skip, dy, to_input);
    int64_t B = dy->shape[0], H = dy->shape[1], W = dy->shape[2];
    OcrTensor dseq = ocr_tensor_reshape(dy, 3, (int64_t[]){B, H * W, l->s.dims});
    Grad g = borrowed(&dseq);
    grad_set(c, &g, lln_backward(c, &l->norm, &g.t, 1));
    for (int i = l->s.depth - 1; i >= 0; i--) grad_set(c, &g, svtrblock_backward(c, &l->blocks[i], &g.t, 1));
    OcrTensor dz2 = ocr_tensor_reshape(&g.t, 4, (int64_t[]){B, H, W, l->s.dims});
    g.owned = 0;
    ladd_backward(c, &l->add_local);
    OcrTensor dloc = convbn_backward(c, &l->local, &dz2, 1);
    ocr_ctx_accumulate(c, &dz2, &dloc);  // z feeds local_conv and the sum
    OcrTensor dx = convbn_backward(c, &l->reduce, &dz2, to_input);
    ocr_ctx_free(c, &dz2);
    if (to_input) ocr_ctx_accumulate(c, &dx, &dskip);
    return dx;
}

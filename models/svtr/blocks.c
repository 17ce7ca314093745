#include "models/svtr/blocks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME OCR_NAME

#include "models/svtr/grad.h"

// ---- ConvBN ----------------------------------------------------------------------------------------

void convbn_build(OcrBuilder *b, ConvBN *l, const char *prefix, ConvBNNames names, ConvBNSpec s) {
    char buf[256];
    memset(l, 0, sizeof *l);
    lconv_build(b, &l->conv, NAME(buf, "%s.%s", prefix, names.conv),
                (LConvSpec){.cin = s.cin, .cout = s.cout, .kh = s.kh, .kw = s.kw, .sh = s.sh, .sw = s.sw, .ph = s.ph,
                            .pw = s.pw, .groups = s.groups, .bias = s.conv_bias, .winit = s.winit,
                            .binit = ocr_init_const(0.0f), .attr = s.wattr});
    lbn_build(b, &l->bn, NAME(buf, "%s.%s", prefix, names.bn), s.cout, s.bnattr);
    l->has_act = s.act != OCR_ACT_NONE;
    if (l->has_act) lact_build(b, &l->act, NAME(buf, "%s.%s", prefix, names.act), s.act);
}

OcrTensor *convbn_forward(OcrCtx *c, ConvBN *l, const OcrTensor *x) {
    OcrTensor *y = lconv_forward(c, &l->conv, x);
    if (l->has_act && !c->keep_all && ocr_ctx_dtype(c, l->bn.op) == ocr_ctx_dtype(c, l->act.op)) {
        OcrTensor *a = lbn_act_forward(c, &l->bn, &l->act, y);
        ocr_ctx_release(c, y);
        return a;
    }
    OcrTensor *z = lbn_forward(c, &l->bn, y);
    ocr_ctx_release(c, y);
    if (!l->has_act) return z;
    OcrTensor *a = lact_forward(c, &l->act, z);
    ocr_ctx_release(c, z);
    return a;
}

// The activation and BN part of convbn_backward: g becomes the gradient at the conv's output.
static void convbn_backward_bn(OcrCtx *c, ConvBN *l, Grad *g) {
    if (l->has_act && l->act.inplace) {
        grad_set(c, g, lbn_act_backward(c, &l->bn, &l->act, &g->t, 1));
    } else {
        if (l->has_act) grad_set(c, g, lact_backward(c, &l->act, &g->t, 1));
        grad_set(c, g, lbn_backward(c, &l->bn, &g->t, 1));
    }
}

OcrTensor convbn_backward(OcrCtx *c, ConvBN *l, const OcrTensor *dy, int need_dx) {
    Grad g = borrowed(dy);
    convbn_backward_bn(c, l, &g);
    OcrTensor dx = lconv_backward(c, &l->conv, &g.t, need_dx);
    grad_drop(c, &g);
    return dx;
}

OcrTensor convbn_backward_rebuilding_input(OcrCtx *c, ConvBN *l, const OcrTensor *dy, LBN *src_bn, LAct *src_act) {
    Grad g = borrowed(dy);
    convbn_backward_bn(c, l, &g);
    OcrTensor dx = lconv_backward_input(c, &l->conv, &g.t);
    OcrTensor dsrc = lbn_act_backward_rebuilding_output(c, src_bn, src_act, &dx);
    l->conv.x = src_act->y;
    lconv_backward_weight(c, &l->conv, &g.t);
    memset(&l->conv.x, 0, sizeof l->conv.x);
    ocr_ctx_free(c, &src_act->y);
    grad_drop(c, &g);
    return dsrc;
}

int convbn_drop_conv_output(OcrCtx *c, ConvBN *l) {
    if (!c->training || l->conv.xcast) return 0;
    ocr_ctx_drop(c, &l->conv.y);
    return !l->conv.y.data;  // kept with keep_all
}

void convbn_conv_output_again(OcrCtx *c, ConvBN *l) {
    lconv_forward_again(c, &l->conv);
    l->bn.x = l->conv.y;
}

// ---- SE ---------------------------------------------------------------------------------------------

void se_build(OcrBuilder *b, SEBlock *l, const char *prefix, int channels, float lr_mult) {
    char buf[256];
    memset(l, 0, sizeof *l);
    int mid = channels / 4;
    Pool2dParams none = {0};
    OcrParamAttr attr = {lr_mult, OCR_DECAY_GLOBAL, 0.0f};
    lpool_build(b, &l->pool, NAME(buf, "%s.avg_pool", prefix), LPOOL_ADAPTIVE, none);
    // Paddle's default conv initialiser: N(0, sqrt(2 / (k·k·in))); zero bias.
    lconv_build(b, &l->conv1, NAME(buf, "%s.conv1", prefix),
                (LConvSpec){.cin = channels, .cout = mid, .kh = 1, .kw = 1, .sh = 1, .sw = 1, .groups = 1, .bias = 1,
                            .winit = ocr_init_kaiming_normal(channels), .binit = ocr_init_const(0.0f), .attr = attr});
    lact_build(b, &l->relu, NAME(buf, "%s.relu", prefix), OCR_ACT_RELU);
    lconv_build(b, &l->conv2, NAME(buf, "%s.conv2", prefix),
                (LConvSpec){.cin = mid, .cout = channels, .kh = 1, .kw = 1, .sh = 1, .sw = 1, .groups = 1, .bias = 1,
                            .winit = ocr_init_kaiming_normal(mid), .binit = ocr_init_const(0.0f), .attr = attr});
    lact_build(b, &l->hsig, NAME(buf, "%s.hardsigmoid", prefix), OCR_ACT_HARDSIGMOID);
    lmul_build(b, &l->mul, NAME(buf, "%s.mul", prefix));
}

OcrTensor *se_forward(OcrCtx *c, SEBlock *l, const OcrTensor *x) {
    OcrTensor *p = lpool_forward(c, &l->pool, x, LPOOL_ADAPTIVE, 1, 1);
    OcrTensor *s1 = lconv_forward(c, &l->conv1, p);
    ocr_ctx_release(c, p);
    OcrTensor *s2 = lact_forward(c, &l->relu, s1);
    ocr_ctx_release(c, s1);
    OcrTensor *s3 = lconv_forward(c, &l->conv2, s2);
    ocr_ctx_release(c, s2);
    OcrTensor *s4 = lact_forward(c, &l->hsig, s3);
    ocr_ctx_release(c, s3);
    OcrTensor *y = lmul_forward(c, &l->mul, x, s4);
    ocr_ctx_release(c, s4);
    return y;
}

OcrTensor se_backward(OcrCtx *c, SEBlock *l, const OcrTensor *dy, int need_dx) {
    OcrTensor dx, ds;
    lmul_backward(c, &l->mul, dy, &dx, &ds);
    Grad g = {ds, 1};
    grad_set(c, &g, lact_backward(c, &l->hsig, &g.t, 1));
    grad_set(c, &g, lconv_backward(c, &l->conv2, &g.t, 1));
    grad_set(c, &g, lact_backward(c, &l->relu, &g.t, 1));
    grad_set(c, &g, lconv_backward(c, &l->conv1, &g.t, 1));
    OcrTensor dpool = lpool_backward(c, &l->pool, &g.t, need_dx);
    grad_drop(c, &g);
    if (!need_dx) {
        ocr_ctx_free(c, &dx);
        return dx;
    }
    ocr_ctx_accumulate(c, &dx, &dpool);
    return dx;
}

// ---- DepthwiseSeparable ----------------------------------------------------------------------------------

static const ConvBNNames MV1_NAMES = {"_conv", "_batch_norm", "act"};

void dwsep_build(OcrBuilder *b, DWSeparable *l, const char *prefix, DWSepSpec s) {
    char buf[256];
    memset(l, 0, sizeof *l);
    OCR_ASSERT(s.cin > 0 && s.cmid > 0 && s.cout > 0, "%s: DWSepSpec.cin, .cmid and .cout must be set", prefix);
    OCR_ASSERT(s.dw_size > 0 && s.sh > 0 && s.sw > 0, "%s: DWSepSpec.dw_size, .sh and .sw must be set", prefix);
    OcrParamAttr bn_attr = ocr_attr_no_decay(1.0f);
    ConvBNSpec dw = {.cin = s.cin, .cout = s.cmid, .kh = s.dw_size, .kw = s.dw_size, .sh = s.sh, .sw = s.sw,
                     .ph = s.dw_size / 2, .pw = s.dw_size / 2, .groups = s.cin, .conv_bias = 0,
                     .winit = ocr_init_kaiming_normal((int64_t)s.dw_size * s.dw_size * (s.cin / s.cin)),
                     .wattr = ocr_attr_default(), .bnattr = bn_attr, .act = OCR_ACT_HARDSWISH};
    OCR_ASSERT(s.cin == s.cmid, "depthwise conv keeps the channel count");
    convbn_build(b, &l->dw, NAME(buf, "%s._depthwise_conv", prefix), MV1_NAMES, dw);
    l->use_se = s.use_se;
    if (s.use_se) se_build(b, &l->se, NAME(buf, "%s._se", prefix), s.cmid, 1.0f);
    ConvBNSpec pw = {.cin = s.cmid, .cout = s.cout, .kh = 1, .kw = 1, .sh = 1, .sw = 1, .groups = 1, .conv_bias = 0,
                     .winit = ocr_init_kaiming_normal(s.cmid), .wattr = ocr_attr_default(), .bnattr = bn_attr,
                     .act = OCR_ACT_HARDSWISH};
    convbn_build(b, &l->pw, NAME(buf, "%s._pointwise_conv", prefix), MV1_NAMES, pw);
}

OcrTensor *dwsep_forward(OcrCtx *c, DWSeparable *l, const OcrTensor *x) {
    OcrTensor *y = convbn_forward(c, &l->dw, x);
    if (l->use_se) {
        OcrTensor *s = se_forward(c, &l->se, y);
        ocr_ctx_release(c, y);
        y = s;
    }
    OcrTensor *out = convbn_forward(c, &l->pw, y);
    ocr_ctx_release(c, y);
    return out;
}

OcrTensor dwsep_backward(OcrCtx *c, DWSeparable *l, const OcrTensor *dy, int need_dx) {
    Grad g = borrowed(dy);
    grad_set(c, &g, convbn_backward(c, &l->pw, &g.t, 1));
    if (l->use_se) grad_set(c, &g, se_backward(c, &l->se, &g.t, 1));
    OcrTensor dx = convbn_backward(c, &l->dw, &g.t, need_dx);
    grad_drop(c, &g);
    return dx;
}

// ---- LearnableRepLayer ------------------------------------------------------------------------------------

static const ConvBNNames LC_NAMES = {"conv", "bn", "act"};

void rep_build(OcrBuilder *b, RepLayer *l, const char *prefix, RepSpec s) {
    char buf[256];
    memset(l, 0, sizeof *l);
    OCR_ASSERT(s.cin > 0 && s.cout > 0 && s.k > 0, "%s: RepSpec.cin, .cout and .k must be set", prefix);
    OCR_ASSERT(s.sh > 0 && s.sw > 0, "%s: RepSpec.sh and .sw must be set", prefix);
    OCR_ASSERT(s.groups >= 1, "%s: RepSpec.groups must be set (1 for a dense layer)", prefix);
    OCR_ASSERT(s.nkxk >= 1 && s.nkxk <= OCR_REP_MAX_BRANCHES, "%s: RepSpec.nkxk must be 1..%d", prefix,
               OCR_REP_MAX_BRANCHES);
    l->deploy = s.deploy;
    l->cin = s.cin;
    l->cout = s.cout;
    l->k = s.k;
    l->sh = s.sh;
    l->sw = s.sw;
    l->groups = s.groups;
    int pad = (s.k - 1) / 2;
    int64_t fan_in = (int64_t)(s.cin / s.groups) * s.k * s.k;
    OcrParamAttr wattr = {s.lr_mult, OCR_DECAY_GLOBAL, 0.0f};
    if (s.deploy) {
        lconv_build(b, &l->reparam, NAME(buf, "%s.reparam_conv", prefix),
                    (LConvSpec){.cin = s.cin, .cout = s.cout, .kh = s.k, .kw = s.k, .sh = s.sh, .sw = s.sw, .ph = pad,
                                .pw = pad, .groups = s.groups, .bias = 1, .winit = ocr_init_kaiming_normal(fan_in),
                                .binit = ocr_init_const(0.0f), .attr = wattr});
    } else {
        // The identity branch exists only for a plain stride 1 (a tuple stride never equals 1 in Python).
        l->has_identity = s.cin == s.cout && s.sh == 1 && s.sw == 1;
        l->has_1x1 = s.k > 1;
        l->nkxk = s.nkxk;
        OcrParamAttr bn_attr = ocr_attr_no_decay(s.lr_mult);
        if (l->has_identity) {
            // No regularizer on the identity BN: it takes the optimizer's global L2.
            lbn_build(b, &l->identity, NAME(buf, "%s.identity", prefix), s.cin, wattr);
        }
        for (int i = 0; i < s.nkxk; i++) {
            ConvBNSpec cs = {.cin = s.cin, .cout = s.cout, .kh = s.k, .kw = s.k, .sh = s.sh, .sw = s.sw, .ph = pad,
                             .pw = pad, .groups = s.groups, .conv_bias = 0, .winit = ocr_init_kaiming_normal(fan_in),
                             .wattr = wattr, .bnattr = bn_attr, .act = OCR_ACT_NONE};
            convbn_build(b, &l->kxk[i], NAME(buf, "%s.conv_kxk.%d", prefix, i), LC_NAMES, cs);
        }
        if (l->has_1x1) {
            ConvBNSpec cs = {.cin = s.cin, .cout = s.cout, .kh = 1, .kw = 1, .sh = s.sh, .sw = s.sw, .ph = 0, .pw = 0,
                             .groups = s.groups, .conv_bias = 0, .winit = ocr_init_kaiming_normal(s.cin / s.groups),
                             .wattr = wattr, .bnattr = bn_attr, .act = OCR_ACT_NONE};
            convbn_build(b, &l->c1x1, NAME(buf, "%s.conv_1x1", prefix), LC_NAMES, cs);
        }
        l->sum_op = ocr_build_op(b, NAME(buf, "%s.add", prefix), "add");
    }
    llab_build(b, &l->lab, NAME(buf, "%s.lab", prefix), s.lr_mult * s.lab_lr);
    // Act runs whenever stride != 2, which holds for every layer of the recognition net.
    lact_build(b, &l->act, NAME(buf, "%s.act", prefix), OCR_ACT_HARDSWISH);
    llab_build(b, &l->act_lab, NAME(buf, "%s.act.lab", prefix), s.lr_mult * s.lab_lr);
}

// Adds a branch's output into the running sum (the sum takes over the first branch's buffer).
static void sum_branch(OcrCtx *c, RepLayer *l, OcrTensor *branch_out) {
    if (!l->sum.data) {
        l->sum = *branch_out;
    } else {
        if (!c->plan) ocr_accumulate(&l->sum, branch_out);
        ocr_ctx_free(c, branch_out);
    }
    memset(branch_out, 0, sizeof *branch_out);
}

// The branch BN of input x into the running sum: the first one's output becomes the sum, later
// ones add into it directly (lbn_forward_accumulate) or, where they cannot, through sum_branch.
static void add_branch(OcrCtx *c, RepLayer *l, LBN *bn, const OcrTensor *x) {
    if (lbn_can_accumulate(c, bn, &l->sum))
        lbn_forward_accumulate(c, bn, x, &l->sum);
    else
        sum_branch(c, l, lbn_forward(c, bn, x));
}

OcrTensor *rep_forward(OcrCtx *c, RepLayer *l, const OcrTensor *x) {
    OcrTensor *y;
    if (l->deploy) {
        y = lconv_forward(c, &l->reparam, x);
    } else {
        // The BN outputs are not needed by any backward, so after the first branch's each one
        // is added into the sum as it is formed (never stored), or folded in right away where
        // it cannot be; only the conv outputs (the BN inputs) stay saved.
        memset(&l->sum, 0, sizeof l->sum);
        int branches = 0;
        if (l->has_identity) {
            add_branch(c, l, &l->identity, x);
            branches++;
        }
        if (l->has_1x1) {
            lconv_forward(c, &l->c1x1.conv, x);
            add_branch(c, l, &l->c1x1.bn, &l->c1x1.conv.y);
            ocr_ctx_release(c, &l->c1x1.conv.y);
            branches++;
        }
        for (int i = 0; i < l->nkxk; i++) {
            lconv_forward(c, &l->kxk[i].conv, x);
            add_branch(c, l, &l->kxk[i].bn, &l->kxk[i].conv.y);
            ocr_ctx_release(c, &l->kxk[i].conv.y);
            branches++;
        }
        ocr_ctx_record(c, l->sum_op, &l->sum, (double)(branches - 1) * (double)ocr_tensor_numel(&l->sum));
        y = &l->sum;
    }
    ocr_dtype_t dt = ocr_ctx_dtype(c, l->lab.op);
    l->tail_fused = !c->keep_all && ocr_ctx_dtype(c, l->act.op) == dt && ocr_ctx_dtype(c, l->act_lab.op) == dt;
    if (l->tail_fused) {
        OcrTensor *out = llab_act_forward(c, &l->lab, &l->act, &l->act_lab, y);
        ocr_ctx_release(c, y);
        return out;
    }
    OcrTensor *a = llab_forward(c, &l->lab, y);
    ocr_ctx_release(c, y);
    OcrTensor *h = lact_forward(c, &l->act, a);
    ocr_ctx_release(c, a);
    OcrTensor *out = llab_forward(c, &l->act_lab, h);
    ocr_ctx_release(c, h);
    return out;
}

OcrTensor rep_backward(OcrCtx *c, RepLayer *l, const OcrTensor *dy, int need_dx) {
    Grad g = borrowed(dy);
    if (l->tail_fused) {
        grad_set(c, &g, llab_act_backward(c, &l->lab, &l->act, &l->act_lab, &g.t, 1));
    } else {
        grad_set(c, &g, llab_backward(c, &l->act_lab, &g.t, 1));
        grad_set(c, &g, lact_backward(c, &l->act, &g.t, 1));
        grad_set(c, &g, llab_backward(c, &l->lab, &g.t, 1));
    }
    OcrTensor dx = {0};
    if (l->deploy) {
        dx = lconv_backward(c, &l->reparam, &g.t, need_dx);
    } else {
        // Reverse order of the forward so the arena sees the mirror image of the allocations.
        for (int i = l->nkxk - 1; i >= 0; i--) {
            OcrTensor d = convbn_backward(c, &l->kxk[i], &g.t, need_dx);
            ocr_ctx_accumulate(c, &dx, &d);
        }
        if (l->has_1x1) {
            OcrTensor d = convbn_backward(c, &l->c1x1, &g.t, need_dx);
            ocr_ctx_accumulate(c, &dx, &d);
        }
        if (l->has_identity) {
            OcrTensor d = lbn_backward(c, &l->identity, &g.t, need_dx);
            ocr_ctx_accumulate(c, &dx, &d);
        }
        ocr_ctx_free(c, &l->sum);
        ocr_ctx_bwd_done(c, l->sum_op);
    }
    grad_drop(c, &g);
    return dx;
}

// Folds a BN (gamma, beta, running mean/var, eps 1e-5) into a kernel of `per_out` values per
// output channel, adding kernel·t into `kernel` and beta − mean·t into `bias` (double sums, so
// the fused weights are rounded once).
static void fold_bn(const LBN *bn, const OcrParamTable *params, const OcrParamTable *stats, const float *k,
                    int per_out, int cout, double *kernel, double *bias) {
    OcrTensor g = ocr_params_tensor(params, bn->g), b = ocr_params_tensor(params, bn->b);
    OcrTensor m = ocr_params_tensor(stats, bn->mean), v = ocr_params_tensor(stats, bn->var);
    for (int o = 0; o < cout; o++) {
        double std = sqrt((double)ocr_tensor_get_f32(&v, o) + (double)bn->eps);
        double t = ocr_tensor_get_f32(&g, o) / std;
        for (int i = 0; i < per_out; i++) kernel[(size_t)o * per_out + i] += k[(size_t)o * per_out + i] * t;
        bias[o] += ocr_tensor_get_f32(&b, o) - ocr_tensor_get_f32(&m, o) * t;
    }
}

void rep_fuse(const RepLayer *l, const OcrParamTable *params, const OcrParamTable *stats, float *kernel, float *bias) {
    OCR_ASSERT(!l->deploy, "rep_fuse needs the training form");
    int cg = l->cin / l->groups, k = l->k;
    int per_out = k * k * cg;
    size_t n = (size_t)l->cout * per_out;
    double *kd = calloc(n, sizeof(double)), *bd = calloc((size_t)l->cout, sizeof(double));
    float *tmp = calloc(n, sizeof(float));
    OCR_ASSERT(kd && bd && tmp, "out of host memory");
    for (int i = 0; i < l->nkxk; i++) {
        OcrTensor w = ocr_params_tensor(params, l->kxk[i].conv.w);
        ocr_tensor_to_f32(&w, tmp);
        fold_bn(&l->kxk[i].bn, params, stats, tmp, per_out, l->cout, kd, bd);
    }
    int c = k / 2;
    if (l->has_1x1) {
        // (OC, 1, 1, cg) placed at the kernel centre of (OC, k, k, cg).
        float *w1 = malloc((size_t)l->cout * cg * sizeof(float));
        OCR_ASSERT(w1);
        OcrTensor w = ocr_params_tensor(params, l->c1x1.conv.w);
        ocr_tensor_to_f32(&w, w1);
        memset(tmp, 0, n * sizeof(float));
        for (int o = 0; o < l->cout; o++)
            for (int ci = 0; ci < cg; ci++)
                tmp[(size_t)o * per_out + ((size_t)c * k + c) * cg + ci] = w1[(size_t)o * cg + ci];
        free(w1);
        fold_bn(&l->c1x1.bn, params, stats, tmp, per_out, l->cout, kd, bd);
    }
    if (l->has_identity) {
        // Output channel o reads input channel o, which is index o % cg inside its group.
        memset(tmp, 0, n * sizeof(float));
        for (int o = 0; o < l->cout; o++) tmp[(size_t)o * per_out + ((size_t)c * k + c) * cg + (o % cg)] = 1.0f;
        fold_bn(&l->identity, params, stats, tmp, per_out, l->cout, kd, bd);
    }
    for (size_t i = 0; i < n; i++) kernel[i] = (float)kd[i];
    for (int o = 0; o < l->cout; o++) bias[o] = (float)bd[o];
    free(kd);
    free(bd);
    free(tmp);
}

// ---- LCNetV3 block ----------------------------------------------------------------------------------------

void lcblock_build(OcrBuilder *b, LCBlock *l, const char *prefix, LCBlockSpec s) {
    char buf[256];
    memset(l, 0, sizeof *l);
    // Checked here so that a failure names this spec; rep_build checks the rest.
    OCR_ASSERT(s.cin > 0 && s.cout > 0, "%s: LCBlockSpec.cin and .cout must be set", prefix);
    rep_build(b, &l->dw, NAME(buf, "%s.dw_conv", prefix),
              (RepSpec){.cin = s.cin, .cout = s.cin, .k = s.dw_size, .sh = s.sh, .sw = s.sw, .groups = s.cin,
                        .nkxk = s.nkxk, .lr_mult = s.lr_mult, .lab_lr = s.lab_lr, .deploy = s.deploy});
    l->use_se = s.use_se;
    if (s.use_se) se_build(b, &l->se, NAME(buf, "%s.se", prefix), s.cin, s.lr_mult);
    rep_build(b, &l->pw, NAME(buf, "%s.pw_conv", prefix),
              (RepSpec){.cin = s.cin, .cout = s.cout, .k = 1, .sh = 1, .sw = 1, .groups = 1, .nkxk = s.nkxk,
                        .lr_mult = s.lr_mult, .lab_lr = s.lab_lr, .deploy = s.deploy});
}

OcrTensor *lcblock_forward(OcrCtx *c, LCBlock *l, const OcrTensor *x) {
    OcrTensor *y = rep_forward(c, &l->dw, x);
    if (l->use_se) {
        OcrTensor *s = se_forward(c, &l->se, y);
        ocr_ctx_release(c, y);
        y = s;
    }
    OcrTensor *out = rep_forward(c, &l->pw, y);
    ocr_ctx_release(c, y);
    return out;
}

OcrTensor lcblock_backward(OcrCtx *c, LCBlock *l, const OcrTensor *dy, int need_dx) {
    Grad g = borrowed(dy);
    grad_set(c, &g, rep_backward(c, &l->pw, &g.t, 1));
    if (l->use_se) grad_set(c, &g, se_backward(c, &l->se, &g.t, 1));
    OcrTensor dx = rep_backward(c, &l->dw, &g.t, need_dx);
    grad_drop(c, &g);
    return dx;
}

// ---- SVTR block ----------------------------------------------------------------------------------------------

void svtrblock_build(OcrBuilder *b, SvtrBlock *l, const char *prefix, SvtrBlockSpec s) {
    char buf[256];
    memset(l, 0, sizeof *l);
    OcrInit tn = ocr_init_trunc_normal(0.02f), zero = ocr_init_const(0.0f);
    OcrParamAttr attr = ocr_attr_default();
    l->conv_mixer = s.conv_mixer;
    l->post_norm = s.post_norm;
    lln_build(b, &l->norm1, NAME(buf, "%s.norm1", prefix), s.dim, s.eps);
    if (s.conv_mixer) {
        // ConvMixer: Conv2D(dim, dim, k, stride 1, padding k/2, groups = heads), KaimingNormal
        // weight (fan_in = dim/heads · kh · kw), bias (Paddle's default, zeros).
        OCR_ASSERT(s.local_hk > 0 && s.local_wk > 0 && s.dim % s.heads == 0, "%s: ConvMixer kernel", prefix);
        lconv_build(b, &l->mixconv, NAME(buf, "%s.mixer.local_mixer", prefix),
                    (LConvSpec){.cin = s.dim, .cout = s.dim, .kh = s.local_hk, .kw = s.local_wk, .sh = 1, .sw = 1,
                                .ph = s.local_hk / 2, .pw = s.local_wk / 2, .groups = s.heads, .bias = 1,
                                .winit = ocr_init_kaiming_normal((int64_t)(s.dim / s.heads) * s.local_hk * s.local_wk),
                                .binit = zero, .attr = attr});
    } else {
        llinear_build(b, &l->qkv, NAME(buf, "%s.mixer.qkv", prefix),
                      (LLinearSpec){.in = s.dim, .out = 3 * s.dim, .bias = 1, .winit = tn, .binit = zero, .attr = attr});
        lattn_build(b, &l->attn, NAME(buf, "%s.mixer.attn", prefix),
                    (LAttnSpec){.dim = s.dim, .heads = s.heads, .attn_drop = s.attn_drop, .local_hk = s.local_hk,
                                .local_wk = s.local_wk});
        llinear_build(b, &l->proj, NAME(buf, "%s.mixer.proj", prefix),
                      (LLinearSpec){.in = s.dim, .out = s.dim, .bias = 1, .winit = tn, .binit = zero, .attr = attr});
        ldrop_build(b, &l->proj_drop, NAME(buf, "%s.mixer.proj_drop", prefix), s.drop, OCR_DROPOUT_UPSCALE_IN_TRAIN, 0);
    }
    ldrop_build(b, &l->dp1, NAME(buf, "%s.drop_path1", prefix), s.drop_path, OCR_DROPOUT_UPSCALE_IN_TRAIN, 1);
    ladd_build(b, &l->add1, NAME(buf, "%s.add1", prefix));
    lln_build(b, &l->norm2, NAME(buf, "%s.norm2", prefix), s.dim, s.eps);
    llinear_build(b, &l->fc1, NAME(buf, "%s.mlp.fc1", prefix),
                  (LLinearSpec){.in = s.dim, .out = s.hidden, .bias = 1, .winit = tn, .binit = zero, .attr = attr});
    lact_build(b, &l->act, NAME(buf, "%s.mlp.act", prefix), s.act);
    ldrop_build(b, &l->drop1, NAME(buf, "%s.mlp.drop1", prefix), s.drop, OCR_DROPOUT_UPSCALE_IN_TRAIN, 0);
    llinear_build(b, &l->fc2, NAME(buf, "%s.mlp.fc2", prefix),
                  (LLinearSpec){.in = s.hidden, .out = s.dim, .bias = 1, .winit = tn, .binit = zero, .attr = attr});
    ldrop_build(b, &l->drop2, NAME(buf, "%s.mlp.drop2", prefix), s.drop, OCR_DROPOUT_UPSCALE_IN_TRAIN, 0);
    ldrop_build(b, &l->dp2, NAME(buf, "%s.drop_path2", prefix), s.drop_path, OCR_DROPOUT_UPSCALE_IN_TRAIN, 1);
    ladd_build(b, &l->add2, NAME(buf, "%s.add2", prefix));
}

// Inference: y = op(x), then x is released (unless y is x itself, an identity dropout).
static OcrTensor *then_release(OcrCtx *c, OcrTensor *y, OcrTensor *x) {
    if (y->data != x->data) ocr_ctx_release(c, x);
    return y;
}

// The token mixer and the first drop path on h (B, T, C), which is not released.
static OcrTensor *mixer_forward(OcrCtx *c, SvtrBlock *l, OcrTensor *h, int grid_h, int grid_w) {
    OcrTensor *a;
    if (l->conv_mixer) {
        OCR_ASSERT((int64_t)grid_h * grid_w == h->shape[1]);
        OcrTensor map = ocr_tensor_reshape(h, 4, (int64_t[]){h->shape[0], grid_h, grid_w, h->shape[2]});
        OcrTensor *y = lconv_forward(c, &l->mixconv, &map);
        l->mix_seq = ocr_tensor_reshape(y, 3, (int64_t[]){h->shape[0], h->shape[1], h->shape[2]});
        a = &l->mix_seq;
    } else {
        a = llinear_forward(c, &l->qkv, h);
        a = then_release(c, lattn_forward(c, &l->attn, a, grid_h, grid_w), a);
        a = then_release(c, llinear_forward(c, &l->proj, a), a);
        a = then_release(c, ldrop_forward(c, &l->proj_drop, a), a);
    }
    return then_release(c, ldrop_forward(c, &l->dp1, a), a);
}

// The MLP and the second drop path on h, which is not released.
static OcrTensor *mlp_forward(OcrCtx *c, SvtrBlock *l, OcrTensor *h) {
    OcrTensor *a = llinear_forward(c, &l->fc1, h);
    a = then_release(c, lact_forward(c, &l->act, a), a);
    a = then_release(c, ldrop_forward(c, &l->drop1, a), a);
    a = then_release(c, llinear_forward(c, &l->fc2, a), a);
    a = then_release(c, ldrop_forward(c, &l->drop2, a), a);
    return then_release(c, ldrop_forward(c, &l->dp2, a), a);
}

OcrTensor *svtrblock_forward(OcrCtx *c, SvtrBlock *l, const OcrTensor *x, int grid_h, int grid_w) {
    OcrTensor *xin = (OcrTensor *)x;  // never released here (the caller's)
    if (l->post_norm) {
        OcrTensor *h = mixer_forward(c, l, xin, grid_h, grid_w);
        OcrTensor *s1 = then_release(c, ladd_forward(c, &l->add1, x, h), h);
        OcrTensor *x1 = then_release(c, lln_forward(c, &l->norm1, s1), s1);
        h = mlp_forward(c, l, x1);
        OcrTensor *s2 = then_release(c, ladd_forward(c, &l->add2, x1, h), h);
        ocr_ctx_release(c, x1);
        return then_release(c, lln_forward(c, &l->norm2, s2), s2);
    }
    OcrTensor *n = lln_forward(c, &l->norm1, x);
    OcrTensor *h = then_release(c, mixer_forward(c, l, n, grid_h, grid_w), n);
    OcrTensor *x1 = then_release(c, ladd_forward(c, &l->add1, x, h), h);
    n = lln_forward(c, &l->norm2, x1);
    h = then_release(c, mlp_forward(c, l, n), n);
    OcrTensor *y = then_release(c, ladd_forward(c, &l->add2, x1, h), h);
    ocr_ctx_release(c, x1);
    return y;
}

// Backward of mlp_forward: the gradient at the MLP's input (need_dx 1 always).
static OcrTensor mlp_backward(OcrCtx *c, SvtrBlock *l, const OcrTensor *dy) {
    Grad g = borrowed(dy);
    drop_back(c, &l->dp2, &g);
    drop_back(c, &l->drop2, &g);
    grad_set(c, &g, llinear_backward(c, &l->fc2, &g.t, 1));
    drop_back(c, &l->drop1, &g);
    grad_set(c, &g, lact_backward(c, &l->act, &g.t, 1));
    OcrTensor d = llinear_backward(c, &l->fc1, &g.t, 1);
    grad_drop(c, &g);
    return d;
}

// Backward of mixer_forward: the gradient at the mixer's input, or empty without need_dx.
static OcrTensor mixer_backward(OcrCtx *c, SvtrBlock *l, const OcrTensor *dy, int need_dx) {
    Grad a = borrowed(dy);
    drop_back(c, &l->dp1, &a);
    OcrTensor d;
    if (l->conv_mixer) {
        // The input's (B, H, W, C), read before the backward (it frees an autocast copy).
        int64_t sh[4];
        memcpy(sh, l->mixconv.x.shape, sizeof sh);
        OcrTensor map = ocr_tensor_reshape(&a.t, 4, sh);
        d = lconv_backward(c, &l->mixconv, &map, need_dx);
        if (need_dx) d = ocr_tensor_reshape(&d, 3, (int64_t[]){sh[0], sh[1] * sh[2], sh[3]});
    } else {
        drop_back(c, &l->proj_drop, &a);
        grad_set(c, &a, llinear_backward(c, &l->proj, &a.t, 1));
        grad_set(c, &a, lattn_backward(c, &l->attn, &a.t, 1));
        d = llinear_backward(c, &l->qkv, &a.t, need_dx);
    }
    grad_drop(c, &a);
    return d;
}

OcrTensor svtrblock_backward(OcrCtx *c, SvtrBlock *l, const OcrTensor *dy, int need_dx) {
    if (l->post_norm) {
        // y = LN2(s2), s2 = x1 + MLP(x1), x1 = LN1(s1), s1 = x + mixer(x).
        OcrTensor ds2 = lln_backward(c, &l->norm2, dy, 1);
        ladd_backward(c, &l->add2);
        OcrTensor dx1 = mlp_backward(c, l, &ds2);
        if (!c->plan) ocr_accumulate(&dx1, &ds2);
        ocr_ctx_free(c, &ds2);
        OcrTensor ds1 = lln_backward(c, &l->norm1, &dx1, 1);
        ocr_ctx_free(c, &dx1);
        ladd_backward(c, &l->add1);
        OcrTensor dx = mixer_backward(c, l, &ds1, need_dx);
        if (need_dx && !c->plan) ocr_accumulate(&dx, &ds1);
        ocr_ctx_free(c, &ds1);
        return dx;
    }
    // MLP branch: dy flows to both x1 (residual) and the branch.
    OcrTensor dm = mlp_backward(c, l, dy);
    OcrTensor dx1 = lln_backward(c, &l->norm2, &dm, 1);
    ocr_ctx_free(c, &dm);
    if (!c->plan) ocr_accumulate(&dx1, dy);
    ladd_backward(c, &l->add2);
    // Mixer branch.
    OcrTensor da = mixer_backward(c, l, &dx1, 1);
    OcrTensor dx = lln_backward(c, &l->norm1, &da, need_dx);
    ocr_ctx_free(c, &da);
    if (need_dx && !c->plan) ocr_accumulate(&dx, &dx1);
    ocr_ctx_free(c, &dx1);
    ladd_backward(c, &l->add1);
    return dx;
}

// ---- EncoderWithSVTR ------------------------------------------------------------------------------------------

static const ConvBNNames SVTR_NAMES = {"conv", "norm", "act"};

void svtrneck_build(OcrBuilder *b, SvtrNeck *l, const char *prefix, SvtrNeckSpec s) {
    char buf[256];
    memset(l, 0, sizeof *l);
    l->s = s;
    int cin = s.in_channels, c8 = cin / 8;
    int kh = s.kernel[0], kw = s.kernel[1];
    OcrParamAttr attr = ocr_attr_default();
    // The svtrnet ConvBNLayer: KaimingUniform conv without bias, BatchNorm2D, Swish.
    ConvBNSpec s1 = {.cin = cin, .cout = c8, .kh = kh, .kw = kw, .sh = 1, .sw = 1, .ph = kh / 2, .pw = kw / 2,
                     .groups = 1, .conv_bias = 0, .winit = ocr_init_kaiming_uniform((int64_t)cin * kh * kw),
                     .wattr = attr, .bnattr = attr, .act = OCR_ACT_SWISH};
    convbn_build(b, &l->conv1, NAME(buf, "%s.conv1", prefix), SVTR_NAMES, s1);
    ConvBNSpec s2 = {.cin = c8, .cout = s.hidden, .kh = 1, .kw = 1, .sh = 1, .sw = 1, .groups = 1, .conv_bias = 0,
                     .winit = ocr_init_kaiming_uniform(c8), .wattr = attr, .bnattr = attr, .act = OCR_ACT_SWISH};
    convbn_build(b, &l->conv2, NAME(buf, "%s.conv2", prefix), SVTR_NAMES, s2);
    l->blocks = calloc((size_t)s.depth, sizeof *l->blocks);
    OCR_ASSERT(l->blocks || s.depth == 0);
    SvtrBlockSpec bs = {.dim = s.hidden, .heads = s.heads, .hidden = (int)(s.hidden * s.mlp_ratio), .eps = 1e-5f,
                        .drop = s.drop, .attn_drop = s.attn_drop, .drop_path = 0.0f, .local_hk = 0, .local_wk = 0,
                        .act = OCR_ACT_SWISH};
    for (int i = 0; i < s.depth; i++) svtrblock_build(b, &l->blocks[i], NAME(buf, "%s.svtr_block.%d", prefix, i), bs);
    lln_build(b, &l->norm, NAME(buf, "%s.norm", prefix), s.hidden, 1e-6f);
    ConvBNSpec s3 = {.cin = s.hidden, .cout = cin, .kh = 1, .kw = 1, .sh = 1, .sw = 1, .groups = 1, .conv_bias = 0,
                     .winit = ocr_init_kaiming_uniform(s.hidden), .wattr = attr, .bnattr = attr, .act = OCR_ACT_SWISH};
    convbn_build(b, &l->conv3, NAME(buf, "%s.conv3", prefix), SVTR_NAMES, s3);
    lconcat_build(b, &l->cat, NAME(buf, "%s.concat", prefix));
    ConvBNSpec s4 = {.cin = 2 * cin, .cout = c8, .kh = kh, .kw = kw, .sh = 1, .sw = 1, .ph = kh / 2, .pw = kw / 2,
                     .groups = 1, .conv_bias = 0, .winit = ocr_init_kaiming_uniform((int64_t)2 * cin * kh * kw),
                     .wattr = attr, .bnattr = attr, .act = OCR_ACT_SWISH};
    convbn_build(b, &l->conv4, NAME(buf, "%s.conv4", prefix), SVTR_NAMES, s4);
    ConvBNSpec s5 = {.cin = c8, .cout = s.dims, .kh = 1, .kw = 1, .sh = 1, .sw = 1, .groups = 1, .conv_bias = 0,
                     .winit = ocr_init_kaiming_uniform(c8), .wattr = attr, .bnattr = attr, .act = OCR_ACT_SWISH};
    convbn_build(b, &l->conv1x1, NAME(buf, "%s.conv1x1", prefix), SVTR_NAMES, s5);
}

void svtrneck_free(SvtrNeck *l) {
    free(l->blocks);
    l->blocks = NULL;
}

OcrTensor *svtrneck_forward(OcrCtx *c, SvtrNeck *l, const OcrTensor *x) {
    int64_t B = x->shape[0], H = x->shape[1], W = x->shape[2];
    OcrTensor *z1 = convbn_forward(c, &l->conv1, x);
    OcrTensor *z2 = convbn_forward(c, &l->conv2, z1);
    ocr_ctx_release(c, z1);
    OcrTensor seq = ocr_tensor_reshape(z2, 3, (int64_t[]){B, H * W, l->s.hidden});
    OcrTensor *z = &seq;
    for (int i = 0; i < l->s.depth; i++) z = then_release(c, svtrblock_forward(c, &l->blocks[i], z, (int)H, (int)W), z);
    z = then_release(c, lln_forward(c, &l->norm, z), z);
    OcrTensor map = ocr_tensor_reshape(z, 4, (int64_t[]){B, H, W, l->s.hidden});
    OcrTensor *c3 = convbn_forward(c, &l->conv3, &map);
    ocr_ctx_release(c, &map);
    z = then_release(c, lconcat_forward(c, &l->cat, x, c3), c3);  // [shortcut, conv3]
    z = then_release(c, convbn_forward(c, &l->conv4, z), z);
    return then_release(c, convbn_forward(c, &l->conv1x1, z), z);
}

OcrTensor svtrneck_backward(OcrCtx *c, SvtrNeck *l, const OcrTensor *dy, int need_dx) {
    int to_input = need_dx && !l->s.use_guide;
    Grad g = borrowed(dy);
    grad_set(c, &g, convbn_backward(c, &l->conv1x1, &g.t, 1));
    grad_set(c, &g, convbn_backward(c, &l->conv4, &g.t, 1));
    OcrTensor dshort, dz;
    lconcat_backward(c, &l->cat, &g.t, &dshort, &dz);
    grad_drop(c, &g);
    if (!to_input) ocr_ctx_free(c, &dshort);
    Grad z = {dz, 1};
    grad_set(c, &z, convbn_backward(c, &l->conv3, &z.t, 1));
    int64_t B = z.t.shape[0], H = z.t.shape[1], W = z.t.shape[2];
    z.t = ocr_tensor_reshape(&z.t, 3, (int64_t[]){B, H * W, l->s.hidden});
    grad_set(c, &z, lln_backward(c, &l->norm, &z.t, 1));
    for (int i = l->s.depth - 1; i >= 0; i--) grad_set(c, &z, svtrblock_backward(c, &l->blocks[i], &z.t, 1));
    z.t = ocr_tensor_reshape(&z.t, 4, (int64_t[]){B, H, W, l->s.hidden});
    grad_set(c, &z, convbn_backward(c, &l->conv2, &z.t, 1));
    OcrTensor dx = convbn_backward(c, &l->conv1, &z.t, to_input);
    grad_drop(c, &z);
    if (to_input) ocr_ctx_accumulate(c, &dx, &dshort);
    return dx;
}

// ---- CTC head ---------------------------------------------------------------------------------------------------

void ctchead_build(OcrBuilder *b, CtcHead *l, const char *prefix, CtcHeadSpec s) {
    char buf[256];
    memset(l, 0, sizeof *l);
    OCR_ASSERT(s.in > 0 && s.classes > 0, "%s: CtcHeadSpec.in and .classes must be set", prefix);
    l->mid = s.mid;
    // Weight and bias: Uniform(±1/sqrt(fan_in)) with L2Decay(fc_decay).
    OcrParamAttr attr = {1.0f, OCR_DECAY_FIXED, s.fc_decay};
    if (s.mid <= 0) {
        float k = 1.0f / sqrtf((float)s.in);
        llinear_build(b, &l->fc, NAME(buf, "%s.fc", prefix),
                      (LLinearSpec){.in = s.in, .out = s.classes, .bias = 1, .winit = ocr_init_uniform(-k, k),
                                    .binit = ocr_init_uniform(-k, k), .attr = attr});
    } else {
        float k1 = 1.0f / sqrtf((float)s.in), k2 = 1.0f / sqrtf((float)s.mid);
        llinear_build(b, &l->fc1, NAME(buf, "%s.fc1", prefix),
                      (LLinearSpec){.in = s.in, .out = s.mid, .bias = 1, .winit = ocr_init_uniform(-k1, k1),
                                    .binit = ocr_init_uniform(-k1, k1), .attr = attr});
        llinear_build(b, &l->fc2, NAME(buf, "%s.fc2", prefix),
                      (LLinearSpec){.in = s.mid, .out = s.classes, .bias = 1, .winit = ocr_init_uniform(-k2, k2),
                                    .binit = ocr_init_uniform(-k2, k2), .attr = attr});
    }
    lsoftmax_build(b, &l->softmax, NAME(buf, "%s.softmax", prefix));
}

OcrTensor *ctchead_forward(OcrCtx *c, CtcHead *l, const OcrTensor *x) {
    if (l->mid <= 0) {
        l->logits = llinear_forward(c, &l->fc, x);
    } else {
        OcrTensor *h = llinear_forward(c, &l->fc1, x);
        l->logits = llinear_forward(c, &l->fc2, h);
        ocr_ctx_release(c, h);
    }
    l->probs = c->training ? NULL : lsoftmax_forward(c, &l->softmax, l->logits);
    return l->logits;
}

OcrTensor ctchead_backward(OcrCtx *c, CtcHead *l, const OcrTensor *dlogits, int need_dx) {
    if (l->mid <= 0) return llinear_backward(c, &l->fc, dlogits, need_dx);
    OcrTensor dh = llinear_backward(c, &l->fc2, dlogits, 1);
    OcrTensor dx = llinear_backward(c, &l->fc1, &dh, need_dx);
    ocr_ctx_free(c, &dh);
    return dx;
}

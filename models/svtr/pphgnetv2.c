#include "models/svtr/pphgnetv2.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "models/svtr/grad.h"

#define NAME OCR_NAME

// ---- concat of N inputs along channels ---------------------------------------------------------------------

static void lconcatn_build(OcrBuilder *b, LConcatN *l, const char *name) {
    memset(l, 0, sizeof *l);
    l->op = ocr_build_op(b, name, "concat");
}

static OcrTensor *lconcatn_forward(OcrCtx *c, LConcatN *l, const OcrTensor *const *in, int count) {
    OCR_ASSERT(count >= 1 && count <= OCR_HGNET2_MAX_LAYERS + 1);
    l->count = count;
    int64_t total = 0;
    for (int i = 0; i < count; i++) {
        OCR_ASSERT(in[i]->ndim == 4);
        l->channels[i] = in[i]->shape[3];
        l->dtypes[i] = in[i]->dtype;
        total += l->channels[i];
    }
    l->y = ocr_ctx_new(c, ocr_ctx_dtype(c, l->op), 4, (int64_t[]){in[0]->shape[0], in[0]->shape[1], in[0]->shape[2], total});
    if (!c->plan) ocr_concat_forward(&l->y, in, count);
    ocr_ctx_record(c, l->op, &l->y, 0.0);
    return &l->y;
}

// The input gradients (new arena tensors, in the inputs' dtypes), allocated in input order.
static void lconcatn_backward(OcrCtx *c, LConcatN *l, const OcrTensor *dy, OcrTensor *dx) {
    ocr_ctx_free(c, &l->y);  // read by the next conv's weight gradient only, done by now
    OcrTensor *out[OCR_HGNET2_MAX_LAYERS + 1];
    for (int i = 0; i < l->count; i++) {
        dx[i] = ocr_ctx_new(c, l->dtypes[i], 4, (int64_t[]){dy->shape[0], dy->shape[1], dy->shape[2], l->channels[i]});
        out[i] = &dx[i];
    }
    if (!c->plan) ocr_concat_backward(out, l->count, dy);
    ocr_ctx_bwd_done(c, l->op);
}

// ---- ConvBNAct ---------------------------------------------------------------------------------------------

// ConvBNAct(in, out, k, stride, padding (k - 1) / 2 unless SAME, groups, use_act, lr_mult): conv without
// bias, weight N(0, sqrt(2 / fan_in)) (KaimingNormal) with learning_rate lr_mult; BN with L2Decay(0)
// and learning_rate lr_mult on weight and bias; ReLU.
typedef struct {
    int cin, cout, k, sh, sw, pad, groups, act;
    float lr_mult;
} CbaSpec;

static void cba_build(OcrBuilder *b, ConvBN *l, const char *prefix, CbaSpec s) {
    convbn_build(b, l, prefix, (ConvBNNames){"conv", "bn", "act"},
                 (ConvBNSpec){.cin = s.cin, .cout = s.cout, .kh = s.k, .kw = s.k, .sh = s.sh, .sw = s.sw, .ph = s.pad,
                              .pw = s.pad, .groups = s.groups, .conv_bias = 0,
                              .winit = ocr_init_kaiming_normal((int64_t)(s.cin / s.groups) * s.k * s.k),
                              .wattr = (OcrParamAttr){s.lr_mult, OCR_DECAY_GLOBAL, 0.0f},
                              .bnattr = ocr_attr_no_decay(s.lr_mult), .act = s.act ? OCR_ACT_RELU : OCR_ACT_NONE});
}

// ---- HGV2_Block ---------------------------------------------------------------------------------------------

typedef struct {
    int cin, mid, cout, k, nlayers, identity, light;
    float lr_mult;
} HgBlockSpec;

static void hgblock_build(OcrBuilder *b, HgBlock *l, const char *prefix, HgBlockSpec s) {
    char buf[256];
    memset(l, 0, sizeof *l);
    OCR_ASSERT(s.nlayers >= 1 && s.nlayers <= OCR_HGNET2_MAX_LAYERS);
    l->nlayers = s.nlayers;
    l->identity = s.identity;
    for (int i = 0; i < s.nlayers; i++) {
        HgLayer *y = &l->layers[i];
        int cin = i == 0 ? s.cin : s.mid;
        y->light = s.light;
        if (!s.light) {
            cba_build(b, &y->conv, NAME(buf, "%s.layers.%d", prefix, i),
                      (CbaSpec){.cin = cin, .cout = s.mid, .k = s.k, .sh = 1, .sw = 1, .pad = (s.k - 1) / 2,
                                .groups = 1, .act = 1, .lr_mult = s.lr_mult});
        } else {
            cba_build(b, &y->conv1, NAME(buf, "%s.layers.%d.conv1", prefix, i),
                      (CbaSpec){.cin = cin, .cout = s.mid, .k = 1, .sh = 1, .sw = 1, .pad = 0, .groups = 1, .act = 0,
                                .lr_mult = s.lr_mult});
            cba_build(b, &y->conv2, NAME(buf, "%s.layers.%d.conv2", prefix, i),
                      (CbaSpec){.cin = s.mid, .cout = s.mid, .k = s.k, .sh = 1, .sw = 1, .pad = (s.k - 1) / 2,
                                .groups = s.mid, .act = 1, .lr_mult = s.lr_mult});
        }
    }
    lconcatn_build(b, &l->cat, NAME(buf, "%s.concat", prefix));
    int total = s.cin + s.nlayers * s.mid;
    cba_build(b, &l->squeeze, NAME(buf, "%s.aggregation_squeeze_conv", prefix),
              (CbaSpec){.cin = total, .cout = s.cout / 2, .k = 1, .sh = 1, .sw = 1, .pad = 0, .groups = 1, .act = 1,
                        .lr_mult = s.lr_mult});
    cba_build(b, &l->excitation, NAME(buf, "%s.aggregation_excitation_conv", prefix),
              (CbaSpec){.cin = s.cout / 2, .cout = s.cout, .k = 1, .sh = 1, .sw = 1, .pad = 0, .groups = 1, .act = 1,
                        .lr_mult = s.lr_mult});
    if (s.identity) ladd_build(b, &l->add, NAME(buf, "%s.add", prefix));
}

// The ConvBN whose fused BN + ReLU output is the layer's output, and the conv that reads its input.
static ConvBN *layer_last(HgLayer *y) { return y->light ? &y->conv2 : &y->conv; }
static LConv *layer_first_conv(HgLayer *y) { return y->light ? &y->conv1.conv : &y->conv.conv; }

static OcrTensor *hglayer_forward(OcrCtx *c, HgLayer *y, const OcrTensor *x) {
    if (!y->light) return convbn_forward(c, &y->conv, x);
    OcrTensor *a;
    if (c->training && !c->keep_all) {
        // conv1's BN output only feeds conv2, which saves it for its weight gradient: its BN keeps
        // the scale that forms it again, in case hgblock_forward drops it.
        OcrTensor *t = lconv_forward(c, &y->conv1.conv, x);
        a = lbn_forward_rebuildable(c, &y->conv1.bn, t);
    } else {
        a = convbn_forward(c, &y->conv1, x);
    }
    OcrTensor *o = convbn_forward(c, &y->conv2, a);
    ocr_ctx_release(c, a);
    return o;
}

// Whether a training pass may drop the maps that block_drop frees: every layer output, the
// squeeze's output and the light layers' conv1 outputs come from fused or rebuildable BNs, and
// no conv saved an autocast copy of its input (then the conv reads the dropped map itself).
static int block_can_drop(const OcrCtx *c, HgBlock *l) {
    if (!c->training || c->keep_all) return 0;
    for (int i = 0; i < l->nlayers; i++) {
        HgLayer *y = &l->layers[i];
        ConvBN *last = layer_last(y);
        if (!last->act.inplace || last->conv.xcast || layer_first_conv(y)->xcast) return 0;
        if (y->light && !y->conv1.bn.save_scale.data) return 0;
    }
    return l->squeeze.act.inplace && !l->squeeze.conv.xcast && !l->excitation.conv.xcast;
}

// A block saves, besides each conv's output (its BN's input), four kinds of maps that only its
// own convs' weight gradients read again: each layer output (the next layer's input), their
// concatenation with x (the squeeze conv's input), the squeeze's output (the excitation's input)
// and, in light layers, conv1's BN output (conv2's input): more than the BN inputs, on every
// stage of PPHGNetV2_B4. In a training pass they go once the block's forward is done, and the
// backward forms each again from its BN's saved input and statistics (the forward's bits, so
// every gradient is unchanged) just before the conv that reads it: the squeeze's output inside
// its BN's backward (convbn_backward_rebuilding_input), the layer outputs and the concatenation
// before the squeeze's backward, which reads the concatenation, and kept until each layer's
// backward has read its input. A light layer's conv2 output (its BN's input) goes too: the
// backward runs the depthwise conv again on conv1's output, formed again first (a 5x5 depthwise
// conv costs 25 multiply-adds per value, against the 1x1 conv1's hundreds). Only x stays: the
// block's input is the previous block's output.
static void block_drop(OcrCtx *c, HgBlock *l) {
    for (int i = 0; i < l->nlayers; i++) {
        HgLayer *y = &l->layers[i];
        ocr_ctx_drop(c, &layer_last(y)->act.y);
        if (y->light) {
            ocr_ctx_drop(c, &y->conv1.bn.y);
            ocr_ctx_drop(c, &y->conv2.conv.y);
        }
    }
    ocr_ctx_drop(c, &l->cat.y);
    ocr_ctx_drop(c, &l->squeeze.act.y);
}

static OcrTensor *hgblock_forward(OcrCtx *c, HgBlock *l, const OcrTensor *x) {
    const OcrTensor *outs[OCR_HGNET2_MAX_LAYERS + 1];
    outs[0] = x;
    for (int i = 0; i < l->nlayers; i++) outs[i + 1] = hglayer_forward(c, &l->layers[i], outs[i]);
    OcrTensor *cat = lconcatn_forward(c, &l->cat, outs, l->nlayers + 1);
    for (int i = 1; i <= l->nlayers; i++) ocr_ctx_release(c, (OcrTensor *)outs[i]);
    OcrTensor *s = convbn_forward(c, &l->squeeze, cat);
    ocr_ctx_release(c, cat);
    OcrTensor *e = convbn_forward(c, &l->excitation, s);
    ocr_ctx_release(c, s);
    l->dropped = block_can_drop(c, l);
    if (l->dropped) block_drop(c, l);
    if (!l->identity) return e;
    // The excitation's output only feeds the sum (its backward reads its BN input): the sum goes over it.
    OcrTensor *y = ladd_can_reuse(c, &l->add, e) ? ladd_forward_into(c, &l->add, e, x, e) : ladd_forward(c, &l->add, e, x);
    ocr_ctx_release(c, e);
    return y;
}

// The layer outputs and their concatenation with x again (block_drop), in the order the forward
// made them (a light layer's from its conv2 output, formed again first and kept for its BN's
// backward); each layer's first conv reads its input from them again. x, the block's input, is
// the one layer 0's conv saved (no autocast copy when the block dropped).
static void block_outputs_again(OcrCtx *c, HgBlock *l) {
    const OcrTensor *x = &layer_first_conv(&l->layers[0])->x;
    const OcrTensor *outs[OCR_HGNET2_MAX_LAYERS + 1];
    outs[0] = x;
    for (int i = 0; i < l->nlayers; i++) {
        HgLayer *y = &l->layers[i];
        ConvBN *last = layer_last(y);
        if (y->light) {
            // conv2's output (its BN's input) from conv1's, formed again for the moment.
            lbn_act_output_again(c, &y->conv1.bn, NULL);
            y->conv2.conv.x = y->conv1.bn.y;
            convbn_conv_output_again(c, &y->conv2);
            ocr_ctx_free(c, &y->conv1.bn.y);
        }
        lbn_act_output_again(c, &last->bn, &last->act);
        outs[i + 1] = &last->act.y;
        if (i + 1 < l->nlayers) layer_first_conv(&l->layers[i + 1])->x = last->act.y;
    }
    OcrTensor *cat = &l->cat.y;
    *cat = ocr_ctx_new(c, ocr_ctx_dtype(c, l->cat.op), 4,
                       (int64_t[]){x->shape[0], x->shape[1], x->shape[2], l->squeeze.conv.cin});
    if (!c->plan) ocr_concat_forward(cat, outs, l->nlayers + 1);
    l->squeeze.conv.x = *cat;
}

static OcrTensor hglayer_backward(OcrCtx *c, HgLayer *y, const OcrTensor *dy, int need_dx, int dropped) {
    if (!y->light) return convbn_backward(c, &y->conv, dy, need_dx);
    if (dropped) {
        // conv1's output again for conv2's weight gradient (block_drop; block_outputs_again
        // formed conv2's output from it).
        lbn_act_output_again(c, &y->conv1.bn, NULL);
        y->conv2.conv.x = y->conv1.bn.y;
    }
    OcrTensor d = convbn_backward(c, &y->conv2, dy, 1);
    ocr_ctx_free(c, &y->conv1.bn.y);  // read by conv2's weight gradient only
    OcrTensor dx = convbn_backward(c, &y->conv1, &d, need_dx);
    ocr_ctx_free(c, &d);
    return dx;
}

static OcrTensor hgblock_backward(OcrCtx *c, HgBlock *l, const OcrTensor *dy, int need_dx) {
    if (l->identity) ladd_backward(c, &l->add);
    Grad g = borrowed(dy);
    if (l->dropped) {
        grad_set(c, &g, convbn_backward_rebuilding_input(c, &l->excitation, &g.t, &l->squeeze.bn, &l->squeeze.act));
        block_outputs_again(c, l);
        // The weight gradient first: the concatenation goes before the input gradient is made.
        lconv_backward_weight(c, &l->squeeze.conv, &g.t);
        ocr_ctx_free(c, &l->cat.y);
        grad_set(c, &g, lconv_backward_input(c, &l->squeeze.conv, &g.t));
    } else {
        grad_set(c, &g, convbn_backward(c, &l->excitation, &g.t, 1));
        grad_set(c, &g, convbn_backward(c, &l->squeeze, &g.t, 1));
    }
    OcrTensor d[OCR_HGNET2_MAX_LAYERS + 1];
    lconcatn_backward(c, &l->cat, &g.t, d);
    grad_drop(c, &g);
    // Layer i's output feeds the concat (d[i + 1]) and layer i + 1: walk back accumulating both.
    for (int i = l->nlayers - 1; i >= 0; i--) {
        int to_input = i > 0 || need_dx;
        OcrTensor dprev = hglayer_backward(c, &l->layers[i], &d[i + 1], to_input, l->dropped);
        ocr_ctx_free(c, &d[i + 1]);
        ocr_ctx_accumulate(c, &d[i], &dprev);
    }
    l->dropped = 0;
    if (!need_dx) {
        ocr_ctx_free(c, &d[0]);
        return (OcrTensor){0};
    }
    if (l->identity && !c->plan) ocr_accumulate(&d[0], dy);
    return d[0];
}

// ---- PPHGNetV2_B4 (text_rec) ---------------------------------------------------------------------------------

// stage_config_rec of PPHGNetV2_B4: in, mid, out, blocks, downsample, light, kernel, layers, stride (h, w).
static const int B4_REC[4][10] = {
    {48, 48, 128, 1, 1, 0, 3, 6, 2, 1},
    {128, 96, 512, 1, 1, 0, 3, 6, 1, 2},
    {512, 192, 1024, 3, 1, 1, 5, 6, 2, 1},
    {1024, 384, 2048, 1, 1, 1, 5, 6, 2, 1},
};
static const int B4_STEM[3] = {3, 32, 48};  // in, mid, out

void hgnet2_build(OcrBuilder *b, Hgnet2 *m, const char *prefix, int in_channels, Hgnet2Spec s) {
    char buf[256];
    memset(m, 0, sizeof *m);
    m->s = s;
    OCR_ASSERT(in_channels == B4_STEM[0], "PPHGNetV2_B4's stem takes 3 channels");
    const int mid = B4_STEM[1], out = B4_STEM[2];
    const float lr0 = (float)s.lr_mult_list[0];
    CbaSpec c1 = {.cin = in_channels, .cout = mid, .k = 3, .sh = 2, .sw = 2, .pad = 1, .groups = 1, .act = 1, .lr_mult = lr0};
    CbaSpec c2a = {.cin = mid, .cout = mid / 2, .k = 2, .sh = 1, .sw = 1, .pad = 0, .groups = 1, .act = 1, .lr_mult = lr0};
    CbaSpec c2b = {.cin = mid / 2, .cout = mid, .k = 2, .sh = 1, .sw = 1, .pad = 0, .groups = 1, .act = 1, .lr_mult = lr0};
    // text_rec: stem3 keeps the resolution (stride 1 instead of 2).
    CbaSpec c3 = {.cin = mid * 2, .cout = mid, .k = 3, .sh = 1, .sw = 1, .pad = 1, .groups = 1, .act = 1, .lr_mult = lr0};
    CbaSpec c4 = {.cin = mid, .cout = out, .k = 1, .sh = 1, .sw = 1, .pad = 0, .groups = 1, .act = 1, .lr_mult = lr0};
    cba_build(b, &m->stem[0], NAME(buf, "%s.stem.stem1", prefix), c1);
    lpad_build(b, &m->pad2a, NAME(buf, "%s.stem.stem2a.pad", prefix), 0, 1, 0, 1, 0.0f);
    cba_build(b, &m->stem[1], NAME(buf, "%s.stem.stem2a", prefix), c2a);
    lpad_build(b, &m->pad2b, NAME(buf, "%s.stem.stem2b.pad", prefix), 0, 1, 0, 1, 0.0f);
    cba_build(b, &m->stem[2], NAME(buf, "%s.stem.stem2b", prefix), c2b);
    lpad_build(b, &m->pad_pool, NAME(buf, "%s.stem.pool.pad", prefix), 0, 1, 0, 1, -INFINITY);
    lpool_build(b, &m->stem_pool, NAME(buf, "%s.stem.pool", prefix), LPOOL_MAX, (Pool2dParams){2, 2, 1, 1, 0, 0});
    lconcat_build(b, &m->stem_cat, NAME(buf, "%s.stem.concat", prefix));
    cba_build(b, &m->stem[3], NAME(buf, "%s.stem.stem3", prefix), c3);
    cba_build(b, &m->stem[4], NAME(buf, "%s.stem.stem4", prefix), c4);
    for (int i = 0; i < 4; i++) {
        const int *t = B4_REC[i];
        HgStage *st = &m->stages[i];
        const float lr = (float)s.lr_mult_list[i + 1];
        OCR_ASSERT(t[4] && t[3] <= OCR_HGNET2_MAX_BLOCKS);
        cba_build(b, &st->downsample, NAME(buf, "%s.stages.%d.downsample", prefix, i),
                  (CbaSpec){.cin = t[0], .cout = t[0], .k = 3, .sh = t[8], .sw = t[9], .pad = 1, .groups = t[0],
                            .act = 0, .lr_mult = lr});
        st->nblocks = t[3];
        for (int j = 0; j < t[3]; j++)
            hgblock_build(b, &st->blocks[j], NAME(buf, "%s.stages.%d.blocks.%d", prefix, i, j),
                          (HgBlockSpec){.cin = j == 0 ? t[0] : t[2], .mid = t[1], .cout = t[2], .k = t[6],
                                        .nlayers = t[7], .identity = j > 0, .light = t[5], .lr_mult = lr});
        m->out_channels = t[2];
    }
    lpool_build(b, &m->pool, NAME(buf, "%s.pool", prefix), LPOOL_AVG, (Pool2dParams){3, 2, 3, 2, 0, 0});
    if (s.deploy) return;
    // The classifier PaddleOCR builds and never runs here (see the header): Conv2D 1x1 without bias,
    // KaimingNormal; Linear with Paddle's default XavierUniform weight and a zero bias. No decay.
    int fc_in = m->out_channels;
    if (s.use_last_conv) {
        m->has_last_conv = 1;
        lconv_build(b, &m->last_conv, NAME(buf, "%s.last_conv", prefix),
                    (LConvSpec){.cin = m->out_channels, .cout = s.class_expand, .kh = 1, .kw = 1, .sh = 1, .sw = 1,
                                .groups = 1, .winit = ocr_init_kaiming_normal(m->out_channels),
                                .attr = ocr_attr_no_decay(1.0f)});
        fc_in = s.class_expand;
    }
    m->has_fc = 1;
    float bound = sqrtf(6.0f / (float)(fc_in + s.class_num));
    llinear_build(b, &m->fc, NAME(buf, "%s.fc", prefix),
                  (LLinearSpec){.in = fc_in, .out = s.class_num, .bias = 1, .winit = ocr_init_uniform(-bound, bound),
                                .binit = ocr_init_const(0.0f), .attr = ocr_attr_no_decay(1.0f)});
}

// The stem's maps that only pads, the max pool (as its output) and the concat read go once read,
// in training passes too (ocr_ctx_drop): no backward reads them (the activations' backwards read
// their BN's input, the pool's its input, the pads and the concat nothing).
static OcrTensor *stem_forward(OcrCtx *c, Hgnet2 *m, const OcrTensor *x) {
    OcrTensor *x1 = convbn_forward(c, &m->stem[0], x);
    OcrTensor *p = lpad_forward(c, &m->pad2a, x1);
    OcrTensor *a = convbn_forward(c, &m->stem[1], p);
    ocr_ctx_release(c, p);
    p = lpad_forward(c, &m->pad2b, a);
    ocr_ctx_drop(c, a);
    OcrTensor *x2 = convbn_forward(c, &m->stem[2], p);
    ocr_ctx_release(c, p);
    p = lpad_forward(c, &m->pad_pool, x1);
    ocr_ctx_drop(c, x1);
    OcrTensor *xp = lpool_forward(c, &m->stem_pool, p, LPOOL_MAX, 0, 0);
    ocr_ctx_release(c, p);
    OcrTensor *cat = lconcat_forward(c, &m->stem_cat, xp, x2);  // paddle.concat([pooled, x2], 1)
    ocr_ctx_drop(c, xp);
    ocr_ctx_drop(c, x2);
    OcrTensor *y3 = convbn_forward(c, &m->stem[3], cat);
    ocr_ctx_release(c, cat);
    OcrTensor *y = convbn_forward(c, &m->stem[4], y3);
    ocr_ctx_release(c, y3);
    return y;
}

static OcrTensor stem_backward(OcrCtx *c, Hgnet2 *m, const OcrTensor *dy, int need_dx) {
    Grad g = borrowed(dy);
    grad_set(c, &g, convbn_backward(c, &m->stem[4], &g.t, 1));
    grad_set(c, &g, convbn_backward(c, &m->stem[3], &g.t, 1));
    OcrTensor dpool, dx2;
    lconcat_backward(c, &m->stem_cat, &g.t, &dpool, &dx2);
    grad_drop(c, &g);
    Grad a = {dpool, 1};
    grad_set(c, &a, lpool_backward(c, &m->stem_pool, &a.t, 1));
    grad_set(c, &a, lpad_backward(c, &m->pad_pool, &a.t, 1));
    Grad bb = {dx2, 1};
    grad_set(c, &bb, convbn_backward(c, &m->stem[2], &bb.t, 1));
    grad_set(c, &bb, lpad_backward(c, &m->pad2b, &bb.t, 1));
    grad_set(c, &bb, convbn_backward(c, &m->stem[1], &bb.t, 1));
    grad_set(c, &bb, lpad_backward(c, &m->pad2a, &bb.t, 1));
    OcrTensor d1 = a.t, d2 = bb.t;
    ocr_ctx_accumulate(c, &d1, &d2);  // stem1's output feeds the pool and stem2a
    OcrTensor dx = convbn_backward(c, &m->stem[0], &d1, need_dx);
    ocr_ctx_free(c, &d1);
    return dx;
}

OcrTensor *hgnet2_forward(OcrCtx *c, Hgnet2 *m, const OcrTensor *x) {
    OcrTensor *y = stem_forward(c, m, x);
    for (int i = 0; i < 4; i++) {
        HgStage *st = &m->stages[i];
        OcrTensor *n = convbn_forward(c, &st->downsample, y);
        // Its depthwise conv's output is read again only by its BN's backward.
        st->downsample_recompute = convbn_drop_conv_output(c, &st->downsample);
        ocr_ctx_release(c, y);
        y = n;
        for (int j = 0; j < st->nblocks; j++) {
            n = hgblock_forward(c, &st->blocks[j], y);
            ocr_ctx_release(c, y);
            y = n;
        }
    }
    // The last block's output feeds only the pool, whose backward reads its shape alone.
    OcrTensor *pooled = lpool_rec_forward(c, &m->pool, y);
    ocr_ctx_drop(c, y);
    return pooled;
}

OcrTensor hgnet2_backward(OcrCtx *c, Hgnet2 *m, const OcrTensor *dy, int need_dx) {
    OcrTensor g = lpool_backward(c, &m->pool, dy, 1);
    for (int i = 3; i >= 0; i--) {
        HgStage *st = &m->stages[i];
        for (int j = st->nblocks - 1; j >= 0; j--) {
            OcrTensor n = hgblock_backward(c, &st->blocks[j], &g, 1);
            ocr_ctx_free(c, &g);
            g = n;
        }
        if (st->downsample_recompute) convbn_conv_output_again(c, &st->downsample);
        st->downsample_recompute = 0;
        OcrTensor n = convbn_backward(c, &st->downsample, &g, 1);
        ocr_ctx_free(c, &g);
        g = n;
    }
    OcrTensor dx = stem_backward(c, m, &g, need_dx);
    ocr_ctx_free(c, &g);
    return dx;
}

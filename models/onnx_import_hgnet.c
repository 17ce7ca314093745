// PP-OCRv5 server (PPHGNetV2_B4 text_rec + SVTR neck + CTC) from ONNX: the walker, the variant
// and the pairing, on the shared machinery of onnx_import.c (onnx_import_internal.h).
//
// What PaddleOCR's export (and ours, models/onnx_export.c) computes, in forward order; every
// ConvBNAct is conv without bias + BN [+ ReLU]:
//   stem      stem1 3x3 s2 + ReLU; stem2a, stem2b 2x2 convs + ReLU with "SAME" pads (0 before,
//             1 after); a 2x2 max pool at stride 1 (same pads; ceil_mode changes nothing there)
//             of stem1's output; Concat([pool, stem2b]); stem3 3x3 s1 + ReLU; stem4 1x1 + ReLU;
//   stages    4 x: downsample (depthwise 3x3 + BN, no activation); HG blocks: 6 layers in a chain
//             (3x3 conv + ReLU, or light: 1x1 conv without activation then depthwise 5x5 + ReLU),
//             Concat([block input, layer outputs], axis 1), squeeze 1x1 + ReLU, excitation 1x1 +
//             ReLU, + the block input after a stage's first block;
//   pool      AveragePool (3, 2);
//   neck      EncoderWithSVTR (conv1, conv2, SVTR blocks, LayerNorm, conv3, Concat with the
//             backbone output, conv4, conv1x1; conv + BN + swish);
//   head      one linear layer (MatMul or Gemm), softmax.
// Each pattern is matched whatever the exporter's spelling (onnx_import.c): SAME pads as auto_pad,
// explicit pads or a Pad node (constant 0) in front; weights as initializers or Constant nodes;
// linear layers as MatMul or Gemm; LayerNorm fused or decomposed; Identity / Dropout seen through.
// The network built is configs/rec_ppocrv5_server.json's CTC branch in deploy form (without the
// classifier PaddleOCR builds and never runs), with the CTC-only names (neck.encoder.*, head.fc.*)
// that the v5 mobile and v6 imports write; it loads into the MultiHead config by the CTC-only ->
// MultiHead name mapping (models/weights_names.h).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/onnx_import_internal.h"

#define HG_MAX_UNITS 128
#define HG_MAX_SVTR 8
_Static_assert(HG_MAX_SVTR <= OI_MAX_SVTR, "oi_pair_deploy holds OI_MAX_SVTR blocks");
#define HG_STAGES 4

typedef struct {
    int cat, add;  // nodes (-1: no residual Add)
    int nlayers, light;
    int first, squeeze, excitation;  // unit indices (layers: first .. squeeze - 1)
} HgBlk;

typedef struct {
    Unit units[HG_MAX_UNITS];
    int nunits;
    int stem[5];
    int stem_pool, stem_cat;
    int nstages;
    struct {
        int down;
        HgBlk blocks[OCR_HGNET2_MAX_BLOCKS];
        int nblocks;
    } stages[HG_STAGES];
    int pool_node, backbone_out;
    int neck[5];  // conv1, conv2, conv3, conv4, conv1x1
    Blk svtr[HG_MAX_SVTR];
    int depth;
    Ln norm;
    int neck_cat;
    Lin head;
    int softmax_node;
    int output;
} NetHg;

static int op_is(const G *g, int i, const char *op) { return i >= 0 && !g->skip[i] && strcmp(N(g, i)->op_type, op) == 0; }

int oi_is_hgnet(const G *g) {
    // StemBlock's max pool runs at stride 1 (PP-OCRv3's last MaxPool runs at stride 2; v4 / v5
    // mobile have none), and HG blocks concatenate more than two tensors.
    int pool = 0, wide_cat = 0;
    for (int i = 0; i < g->m->nnodes; i++) {
        if (op_is(g, i, "MaxPool")) {
            int s[2];
            oi_attr_pair(N(g, i), "strides", 1, s);
            pool |= s[0] == 1 && s[1] == 1;
        }
        if (op_is(g, i, "Concat") && N(g, i)->ninputs > 2) wide_cat = 1;
    }
    return pool && wide_cat;
}

static ocr_status_t push(G *g, NetHg *n, int t, int conv, const char *what, int *idx) {
    if (n->nunits == HG_MAX_UNITS)
        return oi_fail_tensor(g, t, "more than %d convolutions: not a PP-OCRv5 server recognizer", HG_MAX_UNITS);
    Unit *u = &n->units[n->nunits];
    OCR_TRY(conv >= 0 ? oi_match_unit_at(g, conv, u, what) : oi_match_unit(g, t, u, what));
    *idx = n->nunits++;
    return OCR_OK;
}

static const Unit *U(const NetHg *n, int idx) { return &n->units[idx]; }

static int cat_axis_ok(const G *g, int cat) {
    int64_t ax = oi_attr_i(N(g, cat), "axis", 0);
    return ax == 1 || ax == -3;
}

// A Pad node in front of a 2x2 conv or the max pool (F.pad(x, [0, 1, 0, 1]) as PyTorch-style
// exports write it): constant mode, value 0, spatial pads only, from attributes (opset < 11) or
// inputs; its pads are added to the conv's / pool's own. Zeros pad the max pool as -inf does since
// its input is stem1's ReLU output (check_hg makes sure of that).
static ocr_status_t read_pad(G *g, int pn, int pad[4]) {
    const OcrOnnxNode *nd = N(g, pn);
    const OcrOnnxAttr *mode = ocr_onnx_attr(nd, "mode");
    if (mode && mode->s && strcmp(mode->s, "constant") != 0) return oi_fail_node(g, pn, "a Pad in %s mode, not constant", mode->s);
    float v = oi_attr_f(nd, "value", 0.0f);
    if (nd->ninputs > 2 && g->in[pn][2] >= 0 && !oi_scalar_of(g, g->in[pn][2], &v))
        return oi_fail_node(g, pn, "the Pad value is not a constant scalar");
    if (v != 0.0f) return oi_fail_node(g, pn, "pads with %g, not 0", v);
    if (nd->ninputs > 3 && g->in[pn][3] >= 0) return oi_fail_node(g, pn, "a Pad with axes");
    const OcrOnnxAttr *pa = ocr_onnx_attr(nd, "pads");
    const OcrOnnxTensor *pt = !pa && nd->ninputs > 1 ? K(g, g->in[pn][1]) : NULL;
    const int64_t *p = pa ? pa->ints : pt ? pt->i64 : NULL;
    int np = pa ? pa->nints : pt && pt->i64 ? (int)pt->numel : 0;
    if (!p || np != 8) return oi_fail_node(g, pn, "the Pad's pads are not 8 constant integers (N, C, H, W before and after)");
    if (p[0] || p[1] || p[4] || p[5]) return oi_fail_node(g, pn, "pads the batch or channel axis");
    const int64_t q[4] = {p[2], p[3], p[6], p[7]};
    for (int d = 0; d < 4; d++) {
        if (q[d] < 0 || q[d] > 8) return oi_fail_node(g, pn, "pads %lld on a spatial side", (long long)q[d]);
        pad[d] = (int)q[d];
    }
    oi_use(g, pn);
    return OCR_OK;
}

// The node of type `op` reading t, directly or through a Pad (whose pads go to `pad`).
static ocr_status_t through_pad(G *g, int t, const char *op, int *node, int pad[4]) {
    memset(pad, 0, 4 * sizeof *pad);
    *node = oi_consumer(g, t, op, 0);
    if (*node >= 0) return OCR_OK;
    FOR_READERS(g, t, i) {
        if (*node < 0 && op_is(g, i, "Pad") && g->in[i][0] == t) {
            int c = oi_consumer(g, O(g, i), op, 0);
            if (c >= 0) {
                OCR_TRY(read_pad(g, i, pad));
                *node = c;
            }
        }
    }
    return OCR_OK;
}

// A 2x2 SAME conv reading t, directly or through a Pad.
static ocr_status_t push_padded(G *g, NetHg *n, int t, const char *what, int *idx) {
    int conv, pad[4];
    OCR_TRY(through_pad(g, t, "Conv", &conv, pad));
    if (conv < 0) return oi_fail_tensor(g, t, "expected a Conv (%s), found none reading it", what);
    if (g->in[conv][0] == t) return push(g, n, t, -1, what, idx);  // the only Conv reading t
    OCR_TRY(push(g, n, t, conv, what, idx));
    for (int d = 0; d < 4; d++) n->units[*idx].pad[d] += pad[d];
    return OCR_OK;
}

static ocr_status_t walk_stem(G *g, NetHg *n, int x, int *out) {
    OCR_TRY(push(g, n, x, -1, "the stem's stem1", &n->stem[0]));
    int x1 = U(n, n->stem[0])->out;
    int pool, ppad[4];
    OCR_TRY(through_pad(g, x1, "MaxPool", &pool, ppad));
    if (pool < 0) return oi_fail_tensor(g, x1, "expected PPHGNetV2's StemBlock: a MaxPool and a 2x2 Conv reading stem1");
    OCR_TRY(push_padded(g, n, x1, "the stem's stem2a", &n->stem[1]));
    OCR_TRY(push_padded(g, n, U(n, n->stem[1])->out, "the stem's stem2b", &n->stem[2]));
    oi_use(g, pool);
    n->stem_pool = pool;
    int k[2], s[2], pad[4];
    oi_attr_pair(N(g, pool), "kernel_shape", 1, k);
    oi_attr_pair(N(g, pool), "strides", 1, s);
    int pads_ok = oi_pool_pads(N(g, pool), k, s, pad);
    for (int d = 0; d < 4; d++) pad[d] += ppad[d];
    // At stride 1 with these pads the output size is exact: ceil_mode (Paddle's ceil_mode=True) is
    // the same pool.
    if (k[0] != 2 || k[1] != 2 || s[0] != 1 || s[1] != 1 || !pads_ok || pad[0] != 0 ||
        pad[1] != 0 || pad[2] != 1 || pad[3] != 1)
        return oi_fail_node(g, pool,
                            "StemBlock's pool is a 2x2 MaxPool at stride 1 padded 0 before and 1 after (Paddle's SAME); this "
                            "one has kernel (%d,%d) strides (%d,%d) pads (%d,%d,%d,%d)",
                            k[0], k[1], s[0], s[1], pad[0], pad[1], pad[2], pad[3]);
    int d[2];
    oi_attr_pair(N(g, pool), "dilations", 1, d);
    if (d[0] != 1 || d[1] != 1) return oi_fail_node(g, pool, "a dilated max pool");
    int cat = oi_consumer(g, O(g, pool), "Concat", -1);
    if (cat < 0) return oi_fail_tensor(g, O(g, pool), "expected StemBlock's Concat of the pool and stem2b");
    oi_use(g, cat);
    n->stem_cat = cat;
    if (N(g, cat)->ninputs != 2 || g->in[cat][0] != O(g, pool) || g->in[cat][1] != U(n, n->stem[2])->out || !cat_axis_ok(g, cat))
        return oi_fail_node(g, cat, "expected Concat([pool output %s, stem2b output %s], axis 1)", TN(g, O(g, pool)),
                            TN(g, U(n, n->stem[2])->out));
    OCR_TRY(push(g, n, O(g, cat), -1, "the stem's stem3", &n->stem[3]));
    OCR_TRY(push(g, n, U(n, n->stem[3])->out, -1, "the stem's stem4", &n->stem[4]));
    *out = U(n, n->stem[4])->out;
    return OCR_OK;
}

// One HG block reading x: its layers up to the Concat that reads x, the aggregation convs and the
// residual Add.
static ocr_status_t walk_block(G *g, NetHg *n, HgBlk *b, int x, int *out) {
    int cat = oi_consumer(g, x, "Concat", -1);
    if (cat < 0) return oi_fail_tensor(g, x, "expected an HG block: a Concat of its input and its layers' outputs");
    oi_use(g, cat);
    b->cat = cat;
    const int ni = N(g, cat)->ninputs;
    if (ni < 2 || ni > OCR_HGNET2_MAX_LAYERS + 1 || g->in[cat][0] != x || !cat_axis_ok(g, cat))
        return oi_fail_node(g, cat, "expected Concat([block input %s, 1 to %d layer outputs], axis 1) (%d inputs)", TN(g, x),
                            OCR_HGNET2_MAX_LAYERS, ni);
    b->nlayers = ni - 1;
    b->first = n->nunits;
    int t = x;
    for (int l = 0; l < b->nlayers; l++) {
        int u1 = -1;
        OCR_TRY(push(g, n, t, -1, "an HG block layer's convolution", &u1));
        int light = U(n, u1)->out != g->in[cat][l + 1];
        if (light) {
            // LightConvBNAct: 1x1 conv + BN, then depthwise conv + BN + ReLU.
            int u2 = -1;
            OCR_TRY(push(g, n, U(n, u1)->out, -1, "a light HG layer's depthwise convolution", &u2));
            if (U(n, u2)->out != g->in[cat][l + 1])
                return oi_fail_tensor(g, U(n, u2)->out, "HG layer %d's output is not the block Concat's input %d (%s)", l, l + 1,
                                      TN(g, g->in[cat][l + 1]));
            t = U(n, u2)->out;
        } else {
            t = U(n, u1)->out;
        }
        if (l == 0)
            b->light = light;
        else if (light != b->light)
            return oi_fail_node(g, U(n, u1)->conv, "HG layer %d is %s, layer 0 %s", l, light ? "light" : "a plain conv",
                                b->light ? "light" : "a plain conv");
    }
    OCR_TRY(push(g, n, O(g, cat), -1, "the block's aggregation_squeeze_conv", &b->squeeze));
    OCR_TRY(push(g, n, U(n, b->squeeze)->out, -1, "the block's aggregation_excitation_conv", &b->excitation));
    int y = U(n, b->excitation)->out;
    b->add = oi_residual_add(g, y, x);
    *out = b->add >= 0 ? O(g, b->add) : y;
    return OCR_OK;
}

static ocr_status_t walk_neck(G *g, NetHg *n, int t) {
    OCR_TRY(push(g, n, t, -1, "the neck's conv1", &n->neck[0]));
    OCR_TRY(push(g, n, U(n, n->neck[0])->out, -1, "the neck's conv2", &n->neck[1]));
    int h = oi_follow_shape_ops(g, U(n, n->neck[1])->out);
    OCR_TRY(oi_walk_svtr(g, h, n->svtr, HG_MAX_SVTR, &n->depth, &n->norm));
    if (n->depth < 1) return oi_fail_node(g, n->norm.node, "the SVTR neck has no blocks");
    OCR_TRY(push(g, n, oi_follow_shape_ops(g, n->norm.out), -1, "the neck's conv3", &n->neck[2]));
    int c3 = U(n, n->neck[2])->out;
    int cat = oi_consumer(g, c3, "Concat", -1);
    if (cat < 0) return oi_fail_tensor(g, c3, "expected the neck's channel Concat");
    oi_use(g, cat);
    n->neck_cat = cat;
    if (N(g, cat)->ninputs != 2 || g->in[cat][0] != n->backbone_out || g->in[cat][1] != c3 || !cat_axis_ok(g, cat))
        return oi_fail_node(g, cat, "expected Concat([backbone output %s, conv3 output], axis 1)", TN(g, n->backbone_out));
    OCR_TRY(push(g, n, O(g, cat), -1, "the neck's conv4", &n->neck[3]));
    OCR_TRY(push(g, n, U(n, n->neck[3])->out, -1, "the neck's conv1x1", &n->neck[4]));
    return OCR_OK;
}

static ocr_status_t walk_hg(G *g, NetHg *n) {
    memset(n, 0, sizeof *n);
    n->softmax_node = -1;
    int x = -1;
    OCR_TRY(oi_image_input(g, &x));
    int t = -1;
    OCR_TRY(walk_stem(g, n, x, &t));
    // Stages: a depthwise downsample conv, then HG blocks while a Concat reads the map.
    while (oi_is_depthwise(g, oi_consumer(g, t, "Conv", 0))) {
        if (n->nstages == HG_STAGES)
            return oi_fail_node(g, oi_consumer(g, t, "Conv", 0), "a fifth stage: PPHGNetV2_B4 has %d", HG_STAGES);
        int si = n->nstages++;
        OCR_TRY(push(g, n, t, -1, "a stage's downsample convolution", &n->stages[si].down));
        t = U(n, n->stages[si].down)->out;
        while (oi_consumer(g, t, "Concat", -1) >= 0) {
            if (n->stages[si].nblocks == OCR_HGNET2_MAX_BLOCKS)
                return oi_fail_node(g, oi_consumer(g, t, "Concat", -1), "stage %d has more than %d HG blocks", si,
                                    OCR_HGNET2_MAX_BLOCKS);
            OCR_TRY(walk_block(g, n, &n->stages[si].blocks[n->stages[si].nblocks++], t, &t));
        }
        if (n->stages[si].nblocks == 0) return oi_fail_tensor(g, t, "stage %d has no HG block after its downsample conv", si);
    }
    if (n->nstages == 0) return oi_fail_tensor(g, t, "expected PPHGNetV2's stages (a depthwise downsample Conv) after the stem");
    int pool = oi_consumer(g, t, "AveragePool", 0);
    if (pool < 0) return oi_fail_tensor(g, t, "expected PPHGNetV2's last AveragePool (F.avg_pool2d [3, 2])");
    oi_use(g, pool);
    n->pool_node = pool;
    int k[2], s[2];
    oi_attr_pair(N(g, pool), "kernel_shape", 1, k);
    oi_attr_pair(N(g, pool), "strides", 1, s);
    const OcrOnnxAttr *pp = ocr_onnx_attr(N(g, pool), "pads");
    for (int d = 0; pp && d < pp->nints; d++)
        if (pp->ints[d]) return oi_fail_node(g, pool, "the last pool is padded");
    const OcrOnnxAttr *ap = ocr_onnx_attr(N(g, pool), "auto_pad");
    if (ap && ap->s && strcmp(ap->s, "NOTSET") != 0 && strcmp(ap->s, "VALID") != 0)
        return oi_fail_node(g, pool, "the last pool is padded (auto_pad %s)", ap->s);
    if (k[0] != 3 || k[1] != 2 || s[0] != 3 || s[1] != 2 || oi_attr_i(N(g, pool), "ceil_mode", 0))
        return oi_fail_node(g, pool,
                            "PPHGNetV2's exported pool is AveragePool kernel and stride (3, 2) without ceil_mode; this one has "
                            "(%d,%d) (%d,%d)",
                            k[0], k[1], s[0], s[1]);
    t = n->backbone_out = O(g, pool);
    if (oi_consumer(g, t, "Conv", 0) < 0) return oi_fail_tensor(g, t, "expected the SVTR neck's conv1 after the backbone pool");
    OCR_TRY(walk_neck(g, n, t));
    t = oi_follow_shape_ops(g, U(n, n->neck[4])->out);
    OCR_TRY(oi_match_linear(g, t, &n->head, "the CTC head"));
    t = oi_follow_shape_ops(g, n->head.out);
    int after = oi_consumer(g, t, "MatMul", 0);
    if (after < 0) after = oi_consumer(g, t, "Gemm", 0);
    if (after >= 0) return oi_fail_node(g, after, "a second linear layer after the CTC head (PP-OCRv5 server's head has one)");
    return oi_walk_output(g, t, &n->softmax_node, &n->output);
}

// ---- the variant ----------------------------------------------------------------------------------------------

// Every ConvBNAct: conv without bias + BN; ReLU unless it is a downsample conv or a light layer's
// 1x1; the neck's convs end in swish.
static ocr_status_t check_hg(const G *g, const NetHg *n) {
    static const char *const stem_names[5] = {"stem1", "stem2a", "stem2b", "stem3", "stem4"};
    char what[96];
    for (int k = 0; k < 5; k++) {
        snprintf(what, sizeof what, "the stem's %s (conv + BN + ReLU)", stem_names[k]);
        OCR_TRY(oi_expect_unit(g, U(n, n->stem[k]), what, 1, 0, 0, ACT_RELU, 0));
    }
    for (int s = 0; s < n->nstages; s++) {
        snprintf(what, sizeof what, "stage %d's downsample conv (depthwise conv + BN)", s);
        OCR_TRY(oi_expect_unit(g, U(n, n->stages[s].down), what, 1, 0, 0, ACT_NONE, 0));
        for (int b = 0; b < n->stages[s].nblocks; b++) {
            const HgBlk *k = &n->stages[s].blocks[b];
            for (int u = k->first; u < k->squeeze; u++) {
                int pos = u - k->first, first_of_light = k->light && pos % 2 == 0;
                snprintf(what, sizeof what, "stage %d block %d's layer %d%s", s, b, k->light ? pos / 2 : pos,
                         !k->light ? "" : first_of_light ? " conv1 (1x1 + BN)" : " conv2 (depthwise + BN + ReLU)");
                OCR_TRY(oi_expect_unit(g, U(n, u), what, 1, 0, 0, first_of_light ? ACT_NONE : ACT_RELU, 0));
            }
            snprintf(what, sizeof what, "stage %d block %d's aggregation_squeeze_conv", s, b);
            OCR_TRY(oi_expect_unit(g, U(n, k->squeeze), what, 1, 0, 0, ACT_RELU, 0));
            snprintf(what, sizeof what, "stage %d block %d's aggregation_excitation_conv", s, b);
            OCR_TRY(oi_expect_unit(g, U(n, k->excitation), what, 1, 0, 0, ACT_RELU, 0));
        }
    }
    static const char *const neck_names[5] = {"the neck's conv1", "conv2", "conv3", "conv4", "conv1x1"};
    for (int k = 0; k < 5; k++) OCR_TRY(oi_expect_unit(g, U(n, n->neck[k]), neck_names[k], 1, 0, 0, ACT_SWISH, 0));
    return OCR_OK;
}

static ocr_status_t identify_hg(const G *g, const NetHg *n, OcrArch *a, OcrOnnxImportInfo *info, const char *dict) {
    memset(a, 0, sizeof *a);
    snprintf(a->algorithm, sizeof a->algorithm, "SVTR_HGNet");
    const Unit *s0 = U(n, n->stem[0]);
    a->in_channels = (int)s0->w->dims[1];
    if (a->in_channels != 3) return oi_fail_node(g, s0->conv, "the stem reads %d channels; PPHGNetV2_B4's reads 3", a->in_channels);
    a->img_h = 48;
    a->img_w = 320;
    a->seed = 1024;
    a->fc_decay = 1e-5;
    a->backbone = OCR_BACKBONE_HGNETV2;
    for (int i = 0; i < 5; i++) a->hgnet2.lr_mult_list[i] = 1.0;
    a->hgnet2.use_last_conv = 1;
    a->hgnet2.class_expand = 2048;
    a->hgnet2.class_num = 1000;
    a->hgnet2.deploy = 1;
    a->neck_svtr = 1;
    SvtrNeckSpec *s = &a->neck;
    const Unit *c1 = U(n, n->neck[0]);
    s->dims = (int)U(n, n->neck[4])->w->dims[0];
    s->hidden = (int)U(n, n->neck[1])->w->dims[0];
    s->kernel[0] = (int)c1->w->dims[2];
    s->kernel[1] = (int)c1->w->dims[3];
    s->depth = n->depth;
    float sc = n->svtr[0].scale;
    int hd = sc > 0 ? (int)lrint(1.0 / ((double)sc * sc)) : 0;
    if (hd <= 0 || s->hidden % hd)
        return oi_fail_node(g, n->svtr[0].scale_node, "attention scale %.9g: no head size divides %d", sc, s->hidden);
    s->heads = s->hidden / hd;
    s->mlp_ratio = (float)n->svtr[0].fc1.w->dims[1] / (float)s->hidden;
    s->drop = 0.1f;
    s->attn_drop = 0.1f;
    a->num_classes = (int)n->head.w->dims[1];
    if (a->num_classes < 2) return oi_fail_node(g, n->head.node, "the head has %d classes", a->num_classes);
    info->version = "PP-OCRv5";
    info->language = "server";
    info->deploy = 1;
    uint64_t h = dict ? oi_dict_fnv(dict) : 0;
    info->dictionary_known = h && h == OCR_PPOCRV5_DICT_FNV ? "ppocrv5_dict" : NULL;
    char dict_note[128];
    oi_dict_note(dict_note, sizeof dict_note, dict, OCR_PPOCRV5_DICT_FNV, "ppocrv5_dict");
    snprintf(info->variant, sizeof info->variant,
             "PP-OCRv5 server: PPHGNetV2_B4 text_rec (%d stages) + SVTR neck (dims %d, hidden %d, kernel %dx%d, depth %d, %d "
             "heads) + CTC head (%d classes)%s",
             n->nstages, s->dims, s->hidden, s->kernel[0], s->kernel[1], s->depth, s->heads, a->num_classes, dict_note);
    return OCR_OK;
}

// ---- pairing with the network --------------------------------------------------------------------------------

// The graph's stages and blocks against the network's: a missing or extra block or layer is named at
// its node before it surfaces as a shape mismatch further on.
static ocr_status_t match_structure(const G *g, const NetHg *n, const Hgnet2 *m) {
    if (n->nstages != HG_STAGES)
        return oi_fail_node(g, U(n, n->stages[n->nstages - 1].down)->conv, "%d stages, PPHGNetV2_B4 has %d (this is the last)",
                            n->nstages, HG_STAGES);
    for (int s = 0; s < HG_STAGES; s++) {
        const HgStage *st = &m->stages[s];
        if (n->stages[s].nblocks != st->nblocks)
            return oi_fail_node(g, U(n, n->stages[s].down)->conv, "stage %d has %d HG blocks, PPHGNetV2_B4's has %d", s,
                                n->stages[s].nblocks, st->nblocks);
        for (int b = 0; b < st->nblocks; b++) {
            const HgBlk *k = &n->stages[s].blocks[b];
            const HgBlock *w = &st->blocks[b];
            if (k->nlayers != w->nlayers || k->light != w->layers[0].light)
                return oi_fail_node(g, k->cat, "stage %d block %d concatenates %d %s layers, PPHGNetV2_B4's %d %s ones", s, b,
                                    k->nlayers, k->light ? "light" : "plain", w->nlayers, w->layers[0].light ? "light" : "plain");
            if ((k->add >= 0) != w->identity)
                return oi_fail_node(g, k->add >= 0 ? k->add : k->cat, "stage %d block %d %s the residual Add, PPHGNetV2_B4's %s",
                                    s, b, k->add >= 0 ? "has" : "lacks", w->identity ? "has one" : "has none");
        }
    }
    return OCR_OK;
}

static ocr_status_t pair_hg(Ctx *c, const NetHg *n, const OcrArch *a) {
    const OiDeployNet p = {.units = n->units,
                           .nunits = n->nunits,
                           .svtr = n->svtr,
                           .depth = n->depth,
                           .norm = &n->norm,
                           .head = &n->head,
                           .nhead = 1,
                           .output = n->output,
                           .backbone = "PPHGNetV2",
                           .heads = a->neck.heads,
                           .attn_width = a->neck.hidden};
    return oi_pair_deploy(c, &p);
}

ocr_status_t oi_import_hgnet(G *g, const char *dict, Ctx *c, OcrArch *arch, OcrOnnxImportInfo *info) {
    NetHg *n = calloc(1, sizeof *n);
    OCR_ASSERT(n, "out of host memory");
    ocr_status_t st = walk_hg(g, n);
    if (st == OCR_OK) st = check_hg(g, n);
    if (st == OCR_OK) st = identify_hg(g, n, arch, info, dict);
    if (st == OCR_OK) st = oi_ctx_create(c, arch);
    if (st == OCR_OK) st = match_structure(g, n, ocr_model_layers_hgnet2(c->model));
    if (st == OCR_OK) st = pair_hg(c, n, arch);
    if (st == OCR_OK) info->softmax_output = n->softmax_node >= 0;
    free(n);
    return st;
}

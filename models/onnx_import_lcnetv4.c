// PP-OCRv6 recognizers (PPLCNetV4 tiny / small / medium) from ONNX: the walker, the variant and
// the pairing, on the shared machinery of onnx_import.c (onnx_import_internal.h).
//
// What PaddleOCR's export computes, in forward order (deploy form: each RepDW / Conv2D_BN of a
// block one conv with bias; the tiny's stem and every neck / guide conv keep conv + BN):
//   stem      tiny: conv 3x3 s2 + BN, GELU, conv 3x3 s2 + BN;
//             small/medium (StemBlock): stem1 conv + ReLU; stem2a, stem2b 2x2 convs + ReLU with
//             "SAME" pads (0 before, 1 after); a 2x2 max pool (same pads) of stem1's output;
//             Concat([pool, stem2b]); stem3 3x3 s2 + ReLU; stem4 1x1 + ReLU;
//   blocks    depthwise conv [SE: mean, conv + ReLU, conv + HardSigmoid, Mul]; expand 1x1 + GELU;
//             compress 1x1; + the token mixer's output when the block is residual;
//   pool      AveragePool (3, 2);
//   neck      small/medium (LightSVTR): skip_conv and conv_reduce (1x1 + BN + swish) both read
//             the pool; local_conv (1 x k depthwise + BN + swish) added to conv_reduce; SVTR
//             blocks; LayerNorm; + skip; tiny: none;
//   head      tiny: the guide layer (depthwise Conv1D k5 + BN + hardswish, 1x1 Conv1D + BN +
//             hardswish, as Unsqueeze / Conv / Squeeze); one linear layer, or two (mid_channels);
//             softmax.
// Each pattern is matched whatever the exporter's spelling (onnx_import.c): GELU as Erf
// arithmetic or the Gelu op, hardswish as HardSwish, Add/Clip/Mul/Div or x · HardSigmoid(x),
// SAME pads as auto_pad or explicit pads, weights as initializers or Constant nodes, linear
// layers as MatMul or Gemm.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/onnx_import_internal.h"

#define V6_MAX_UNITS 96
#define V6_MAX_SVTR 8
_Static_assert(V6_MAX_SVTR <= OI_MAX_SVTR, "oi_pair_deploy holds OI_MAX_SVTR blocks");

// PaddleOCR's dictionaries (FNV-1a 64 of the text, CR before LF dropped, no final newline):
// ppocrv6_dict.txt (18,708 lines: small and medium, 18,710 classes) and ppocrv6_tiny_dict.txt
// (6,904 lines: tiny, 6,906 classes).
#define PPOCRV6_DICT_FNV 0xdfe074e6e9fcc53bull
#define PPOCRV6_TINY_DICT_FNV 0x5e2e7c1492282116ull
#define PPOCRV6_CLASSES 18710
#define PPOCRV6_TINY_CLASSES 6906

typedef struct {
    Unit units[V6_MAX_UNITS];  // in the network's order of convolutions
    int nunits;
    int branch_stem;  // StemBlock (small, medium) rather than conv, GELU, conv (tiny)
    int stem[5], nstem;
    int nblocks;
    struct {
        int dw, se1, se2, expand, compress, residual;
    } blocks[OCR_LCNETV4_MAX_BLOCKS];
    int pool_node;
    int light;  // LightSVTR neck
    int reduce, local, skip;
    Blk svtr[V6_MAX_SVTR];
    int depth;
    Ln norm;
    int guide, guide_dw, guide_pw;
    Lin fc[2];
    int nfc;
    int softmax_node;
    int output;
} Net6;

int oi_is_lcnetv4(const G *g) {
    for (int i = 0; i < g->m->nnodes; i++)
        if (!g->skip[i] && (strcmp(N(g, i)->op_type, "Erf") == 0 || strcmp(N(g, i)->op_type, "Gelu") == 0)) return 1;
    return 0;
}

static ocr_status_t push(G *g, Net6 *n, int t, int conv, const char *what, int *idx) {
    if (n->nunits == V6_MAX_UNITS)
        return oi_fail_tensor(g, t, "more than %d convolutions: not a PP-OCRv6 recognizer", V6_MAX_UNITS);
    Unit *u = &n->units[n->nunits];
    OCR_TRY(conv >= 0 ? oi_match_unit_at(g, conv, u, what) : oi_match_unit(g, t, u, what));
    *idx = n->nunits++;
    return OCR_OK;
}

static const Unit *U(const Net6 *n, int idx) { return &n->units[idx]; }

static ocr_status_t walk_stem(G *g, Net6 *n, int x, int *out) {
    int s0 = -1;
    OCR_TRY(push(g, n, x, -1, "the stem's first convolution", &s0));
    n->stem[n->nstem++] = s0;
    const Unit *u0 = U(n, s0);
    if (u0->act == ACT_GELU) {
        // tiny: conv + BN, GELU, conv + BN
        int s1 = -1;
        OCR_TRY(push(g, n, u0->out, -1, "the stem's second convolution", &s1));
        n->stem[n->nstem++] = s1;
        *out = U(n, s1)->out;
        return OCR_OK;
    }
    // StemBlock
    n->branch_stem = 1;
    int x1 = u0->out, a = -1, b = -1;
    int pool = oi_consumer(g, x1, "MaxPool", 0);
    if (pool < 0) return oi_fail_tensor(g, x1, "expected PPLCNetV4's StemBlock: a MaxPool and a 2x2 Conv reading stem1");
    OCR_TRY(push(g, n, x1, -1, "the stem's stem2a", &a));
    n->stem[n->nstem++] = a;
    OCR_TRY(push(g, n, U(n, a)->out, -1, "the stem's stem2b", &b));
    n->stem[n->nstem++] = b;
    oi_use(g, pool);
    int k[2], s[2], pad[4];
    oi_attr_pair(N(g, pool), "kernel_shape", 1, k);
    oi_attr_pair(N(g, pool), "strides", 1, s);
    if (k[0] != 2 || k[1] != 2 || s[0] != 1 || s[1] != 1 || !oi_pool_pads(N(g, pool), k, s, pad) || pad[0] != 0 ||
        pad[1] != 0 || pad[2] != 1 || pad[3] != 1 || oi_attr_i(N(g, pool), "ceil_mode", 0))
        return oi_fail_node(g, pool,
                            "StemBlock's pool is a 2x2 MaxPool at stride 1 padded 0 before and 1 after (Paddle's SAME); this "
                            "one has kernel (%d,%d) strides (%d,%d)",
                            k[0], k[1], s[0], s[1]);
    int cat = oi_consumer(g, O(g, pool), "Concat", -1);
    if (cat < 0) return oi_fail_tensor(g, O(g, pool), "expected StemBlock's Concat of the pool and stem2b");
    oi_use(g, cat);
    if (N(g, cat)->ninputs != 2 || g->in[cat][0] != O(g, pool) || g->in[cat][1] != U(n, b)->out ||
        oi_attr_i(N(g, cat), "axis", 0) != 1)
        return oi_fail_node(g, cat, "expected Concat([pool output %s, stem2b output %s], axis 1)", TN(g, O(g, pool)),
                            TN(g, U(n, b)->out));
    int s3 = -1, s4 = -1;
    OCR_TRY(push(g, n, O(g, cat), -1, "the stem's stem3", &s3));
    n->stem[n->nstem++] = s3;
    OCR_TRY(push(g, n, U(n, s3)->out, -1, "the stem's stem4", &s4));
    n->stem[n->nstem++] = s4;
    *out = U(n, s4)->out;
    return OCR_OK;
}

static ocr_status_t walk_blocks(G *g, Net6 *n, int *tp) {
    int t = *tp;
    for (;;) {
        int c = oi_consumer(g, t, "Conv", 0);
        if (!oi_is_depthwise(g, c)) break;
        if (n->nblocks == OCR_LCNETV4_MAX_BLOCKS) return oi_fail_node(g, c, "more than %d blocks", OCR_LCNETV4_MAX_BLOCKS);
        int bi = n->nblocks++;
        n->blocks[bi].se1 = n->blocks[bi].se2 = -1;
        OCR_TRY(push(g, n, t, -1, "a block's depthwise convolution", &n->blocks[bi].dw));
        int tm = U(n, n->blocks[bi].dw)->out;
        int gap = oi_consumer(g, tm, "GlobalAveragePool", 0);
        if (gap < 0) {
            // ReduceMean over (2, 3), the axes an attribute (before opset 18) or a constant input.
            int rm = oi_consumer(g, tm, "ReduceMean", 0);
            const OcrOnnxAttr *ax = rm >= 0 ? ocr_onnx_attr(N(g, rm), "axes") : NULL;
            const OcrOnnxTensor *axt = rm >= 0 && !ax && N(g, rm)->ninputs > 1 ? K(g, g->in[rm][1]) : NULL;
            const int64_t *v = ax ? ax->ints : axt ? axt->i64 : NULL;
            int nv = ax ? ax->nints : axt && axt->i64 ? (int)axt->numel : 0;
            if (v && nv == 2 && (v[0] == 2 || v[0] == -2) && (v[1] == 3 || v[1] == -1) && oi_attr_i(N(g, rm), "keepdims", 1))
                gap = rm;
        }
        if (gap >= 0) {
            oi_use(g, gap);
            OCR_TRY(push(g, n, O(g, gap), -1, "the SE gate's first convolution", &n->blocks[bi].se1));
            OCR_TRY(push(g, n, U(n, n->blocks[bi].se1)->out, -1, "the SE gate's second convolution", &n->blocks[bi].se2));
            int gate = U(n, n->blocks[bi].se2)->out, mul = -1;
            FOR_READERS(g, gate, i) {
                if (mul < 0 && !g->skip[i] && strcmp(N(g, i)->op_type, "Mul") == 0 && oi_other_input(g, i, gate) == tm) mul = i;
            }
            if (mul < 0) return oi_fail_tensor(g, gate, "the SE gate is not multiplied into the block's feature map");
            oi_use(g, mul);
            tm = O(g, mul);
        }
        OCR_TRY(push(g, n, tm, -1, "a block's expand convolution", &n->blocks[bi].expand));
        const Unit *ex = U(n, n->blocks[bi].expand);
        if (ex->act != ACT_GELU)
            return oi_fail_tensor(g, ex->out,
                                  "block %d's expand conv is followed by %s, not GELU (x·(1 + erf(x/√2))/2, or the Gelu op)",
                                  bi, ex->act == ACT_NONE ? "no activation recognised" : oi_act_names[ex->act]);
        OCR_TRY(push(g, n, U(n, n->blocks[bi].expand)->out, -1, "a block's compress convolution", &n->blocks[bi].compress));
        t = U(n, n->blocks[bi].compress)->out;
        int add = oi_residual_add(g, t, tm);
        n->blocks[bi].residual = add >= 0;
        if (add >= 0) t = O(g, add);
    }
    if (n->nblocks == 0) return oi_fail_tensor(g, t, "expected PPLCNetV4's blocks (a depthwise Conv first) after the stem");
    *tp = t;
    return OCR_OK;
}

static ocr_status_t walk_light(G *g, Net6 *n, int *tp) {
    int t = *tp, convs[3], nc = 0;
    FOR_READERS(g, t, i) {
        if (!g->skip[i] && strcmp(N(g, i)->op_type, "Conv") == 0 && g->in[i][0] == t && nc < 3) convs[nc++] = i;
    }
    if (nc != 2) return oi_fail_tensor(g, t, "%d Convs read the backbone output; LightSVTR's skip_conv and conv_reduce are 2", nc);
    Unit a, b;
    OCR_TRY(oi_match_unit_at(g, convs[0], &a, "the neck's conv_reduce or skip_conv"));
    OCR_TRY(oi_match_unit_at(g, convs[1], &b, "the neck's conv_reduce or skip_conv"));
    // conv_reduce is the one that feeds the depthwise local_conv.
    int first_reduces = oi_is_depthwise(g, oi_consumer(g, a.out, "Conv", 0));
    if (first_reduces == oi_is_depthwise(g, oi_consumer(g, b.out, "Conv", 0)))
        return oi_fail_tensor(g, t, "of the two Convs reading it, exactly one must feed LightSVTR's depthwise local_conv");
    if (n->nunits + 3 > V6_MAX_UNITS) return oi_fail_tensor(g, t, "more than %d convolutions", V6_MAX_UNITS);
    n->reduce = n->nunits++;
    n->units[n->reduce] = first_reduces ? a : b;
    const Unit skip = first_reduces ? b : a;
    int z = U(n, n->reduce)->out;
    OCR_TRY(push(g, n, z, -1, "the neck's local_conv", &n->local));
    int la = oi_residual_add(g, U(n, n->local)->out, z);
    if (la < 0) return oi_fail_tensor(g, U(n, n->local)->out, "local_conv's output is not added to conv_reduce's %s", TN(g, z));
    int h = oi_follow_shape_ops(g, O(g, la));
    OCR_TRY(oi_walk_svtr(g, h, n->svtr, V6_MAX_SVTR, &n->depth, &n->norm));
    if (n->depth < 1) return oi_fail_node(g, n->norm.node, "the LightSVTR neck has no SVTR blocks");
    int back = oi_follow_shape_ops(g, n->norm.out);
    n->skip = n->nunits++;
    n->units[n->skip] = skip;
    int sa = oi_residual_add(g, back, skip.out);
    if (sa < 0) return oi_fail_tensor(g, back, "the neck's output is not added to skip_conv's %s", TN(g, skip.out));
    *tp = O(g, sa);
    return OCR_OK;
}

static ocr_status_t walk6(G *g, Net6 *n) {
    memset(n, 0, sizeof *n);
    n->softmax_node = -1;
    int x = -1;
    OCR_TRY(oi_image_input(g, &x));
    int t = -1;
    OCR_TRY(walk_stem(g, n, x, &t));
    OCR_TRY(walk_blocks(g, n, &t));
    int pool = oi_consumer(g, t, "AveragePool", 0);
    if (pool < 0) return oi_fail_tensor(g, t, "expected PPLCNetV4's last AveragePool");
    oi_use(g, pool);
    n->pool_node = pool;
    int k[2], s[2];
    oi_attr_pair(N(g, pool), "kernel_shape", 1, k);
    oi_attr_pair(N(g, pool), "strides", 1, s);
    const OcrOnnxAttr *pp = ocr_onnx_attr(N(g, pool), "pads");
    for (int d = 0; pp && d < pp->nints; d++)
        if (pp->ints[d]) return oi_fail_node(g, pool, "the last pool is padded");
    if (k[0] != 3 || k[1] != 2 || s[0] != 3 || s[1] != 2 || oi_attr_i(N(g, pool), "ceil_mode", 0))
        return oi_fail_node(g, pool, "PPLCNetV4's exported pool is AveragePool kernel and stride (3, 2); this one has (%d,%d) (%d,%d)",
                            k[0], k[1], s[0], s[1]);
    t = O(g, pool);
    int convs = 0;
    FOR_READERS(g, t, i) {
        convs += !g->skip[i] && strcmp(N(g, i)->op_type, "Conv") == 0;
    }
    if (convs >= 2) {
        n->light = 1;
        OCR_TRY(walk_light(g, n, &t));
    }
    // The tiny's guide layer: a depthwise Conv1D on the sequence.
    int tg = oi_follow_shape_ops(g, t);
    if (oi_is_depthwise(g, oi_consumer(g, tg, "Conv", 0))) {
        n->guide = 1;
        OCR_TRY(push(g, n, tg, -1, "the guide layer's depthwise Conv1D", &n->guide_dw));
        OCR_TRY(push(g, n, oi_follow_shape_ops(g, U(n, n->guide_dw)->out), -1, "the guide layer's 1x1 Conv1D", &n->guide_pw));
        tg = oi_follow_shape_ops(g, U(n, n->guide_pw)->out);
    }
    OCR_TRY(oi_match_linear(g, tg, &n->fc[0], "the CTC head"));
    n->nfc = 1;
    t = oi_follow_shape_ops(g, n->fc[0].out);
    if (oi_consumer(g, t, "MatMul", 0) >= 0 || oi_consumer(g, t, "Gemm", 0) >= 0) {
        OCR_TRY(oi_match_linear(g, t, &n->fc[1], "the CTC head's fc2"));
        n->nfc = 2;
        t = oi_follow_shape_ops(g, n->fc[1].out);
        int after = oi_consumer(g, t, "MatMul", 0);
        if (after < 0) after = oi_consumer(g, t, "Gemm", 0);
        if (after >= 0) return oi_fail_node(g, after, "a third linear layer after the CTC head");
    }
    return oi_walk_output(g, t, &n->softmax_node, &n->output);
}

// ---- the variant ----------------------------------------------------------------------------------------------

static ocr_status_t check6(const G *g, const Net6 *n) {
    for (int k = 0; k < n->nstem; k++) {
        const Unit *u = U(n, n->stem[k]);
        if (!n->branch_stem)
            OCR_TRY(oi_expect_unit(g, u, k ? "the stem's second conv" : "the stem's first conv", 1, 0, 0, k ? ACT_NONE : ACT_GELU, 0));
        else
            OCR_TRY(oi_expect_unit(g, u, "a StemBlock conv (deploy form: conv with bias + ReLU)", 0, 1, 0, ACT_RELU, 0));
    }
    for (int b = 0; b < n->nblocks; b++) {
        char what[80];
        snprintf(what, sizeof what, "block %d's depthwise conv", b);
        OCR_TRY(oi_expect_unit(g, U(n, n->blocks[b].dw), what, 0, 1, 0, ACT_NONE, 0));
        if (n->blocks[b].se1 >= 0) {
            OCR_TRY(oi_expect_unit(g, U(n, n->blocks[b].se1), "the SE gate's conv1", 0, 1, 0, ACT_RELU, 0));
            OCR_TRY(oi_expect_unit(g, U(n, n->blocks[b].se2), "the SE gate's conv2", 0, 1, 0, ACT_HSIG, 0));
        }
        snprintf(what, sizeof what, "block %d's expand conv", b);
        OCR_TRY(oi_expect_unit(g, U(n, n->blocks[b].expand), what, 0, 1, 0, ACT_GELU, 0));
        snprintf(what, sizeof what, "block %d's compress conv", b);
        OCR_TRY(oi_expect_unit(g, U(n, n->blocks[b].compress), what, 0, 1, 0, ACT_NONE, 0));
    }
    if (n->light) {
        OCR_TRY(oi_expect_unit(g, U(n, n->reduce), "the neck's conv_reduce", 1, 0, 0, ACT_SWISH, 0));
        OCR_TRY(oi_expect_unit(g, U(n, n->local), "the neck's local_conv", 1, 0, 0, ACT_SWISH, 0));
        OCR_TRY(oi_expect_unit(g, U(n, n->skip), "the neck's skip_conv", 1, 0, 0, ACT_SWISH, 0));
    }
    if (n->guide) {
        OCR_TRY(oi_expect_unit(g, U(n, n->guide_dw), "the guide layer's depthwise conv", 1, 0, 0, ACT_HSWISH, 0));
        OCR_TRY(oi_expect_unit(g, U(n, n->guide_pw), "the guide layer's 1x1 conv", 1, 0, 0, ACT_HSWISH, 0));
    }
    return OCR_OK;
}

static ocr_status_t identify6(const G *g, const Net6 *n, OcrArch *a, OcrOnnxImportInfo *info, const char *dict) {
    memset(a, 0, sizeof *a);
    snprintf(a->algorithm, sizeof a->algorithm, "SVTR_LCNet");
    const Unit *s0 = U(n, n->stem[0]);
    a->in_channels = (int)s0->w->dims[1];
    if (a->in_channels != 3) return oi_fail_node(g, s0->conv, "the stem reads %d channels; PPLCNetV4's reads 3", a->in_channels);
    a->img_h = 48;
    a->img_w = 320;
    a->seed = 1024;
    a->fc_decay = 1e-5;
    a->backbone = OCR_BACKBONE_LCNETV4;
    if (!n->branch_stem) {
        a->lcnet4.size = OCR_LCNETV4_TINY;
    } else {
        const Unit *s4 = U(n, n->stem[n->nstem - 1]);
        int64_t oc = s4->w->dims[0];
        if (oc != 96 && oc != 128)
            return oi_fail_node(g, s4->conv, "StemBlock ends in %lld channels: PPLCNetV4 small has 96, medium 128", (long long)oc);
        a->lcnet4.size = oc == 96 ? OCR_LCNETV4_SMALL : OCR_LCNETV4_MEDIUM;
    }
    for (int i = 0; i < 6; i++) a->lcnet4.lr_mult_list[i] = 1.0;
    a->lcnet4.deploy = 1;
    char neck[160] = "no neck";
    if (n->light) {
        LightSvtrSpec *s = &a->light;
        a->neck_light = 1;
        s->dims = (int)U(n, n->reduce)->w->dims[0];
        s->depth = n->depth;
        s->local_kernel = (int)U(n, n->local)->w->dims[3];
        if (U(n, n->local)->w->dims[2] != 1 || s->local_kernel % 2 == 0)
            return oi_fail_node(g, U(n, n->local)->conv, "local_conv is %lldx%lld; LightSVTR's is 1 x an odd kernel",
                                (long long)U(n, n->local)->w->dims[2], (long long)U(n, n->local)->w->dims[3]);
        float sc = n->svtr[0].scale;
        int hd = sc > 0 ? (int)lrint(1.0 / ((double)sc * sc)) : 0;
        if (hd <= 0 || s->dims % hd)
            return oi_fail_node(g, n->svtr[0].scale_node, "attention scale %.9g: no head size divides %d", sc, s->dims);
        s->heads = s->dims / hd;
        s->mlp_ratio = (float)n->svtr[0].fc1.w->dims[1] / (float)s->dims;
        s->drop = 0.1f;
        s->attn_drop = 0.1f;
        snprintf(neck, sizeof neck, "LightSVTR neck (dims %d, depth %d, %d heads, local kernel %d)", s->dims, s->depth, s->heads,
                 s->local_kernel);
    }
    a->head_guide = n->guide;
    a->head_mid = n->nfc == 2 ? (int)n->fc[0].w->dims[1] : 0;
    a->num_classes = (int)n->fc[n->nfc - 1].w->dims[1];
    if (a->num_classes < 2) return oi_fail_node(g, n->fc[n->nfc - 1].node, "the head has %d classes", a->num_classes);
    info->version = "PP-OCRv6";
    info->language = ocr_lcnetv4_size_name(a->lcnet4.size);
    info->deploy = 1;
    // The dictionary, when known, must be the one of this size for the name to hold.
    const int tiny = a->lcnet4.size == OCR_LCNETV4_TINY;
    const uint64_t want = tiny ? PPOCRV6_TINY_DICT_FNV : PPOCRV6_DICT_FNV;
    const char *want_name = tiny ? "ppocrv6_tiny_dict" : "ppocrv6_dict";
    uint64_t h = dict ? oi_dict_fnv(dict) : 0;
    info->dictionary_known = !dict                             ? NULL
                             : h == PPOCRV6_DICT_FNV            ? "ppocrv6_dict"
                             : h == PPOCRV6_TINY_DICT_FNV       ? "ppocrv6_tiny_dict"
                             : h == OCR_PPOCRV5_DICT_FNV        ? "ppocrv5_dict"
                                                                : NULL;
    char dict_note[128];
    oi_dict_note(dict_note, sizeof dict_note, dict, want, want_name);
    char head[64];
    if (a->head_mid)
        snprintf(head, sizeof head, "CTC head (mid %d, %d classes)", a->head_mid, a->num_classes);
    else
        snprintf(head, sizeof head, "CTC head (%d classes)", a->num_classes);
    snprintf(info->variant, sizeof info->variant, "PP-OCRv6 %s: PPLCNetV4 %s (deploy-fused, %d blocks) + %s%s + %s%s",
             info->language, info->language, n->nblocks, neck, n->guide ? " + guide layer" : "", head, dict_note);
    return OCR_OK;
}

// ---- pairing with the network --------------------------------------------------------------------------------

static ocr_status_t pair6(Ctx *c, const Net6 *n, const OcrArch *a) {
    const G *g = c->g;
    const OcrOpTable *ops = ocr_model_ops(c->model);
    // The network's block count first: a missing or extra block would otherwise surface as a
    // shape mismatch somewhere after it.
    int blocks = 0;
    for (int i = 0; i < ops->count; i++) {
        size_t l = strlen(ops->items[i].name);
        const char *suf = ".channel_mixer.expand";
        blocks += strcmp(ops->items[i].type, "conv2d") == 0 && l > strlen(suf) && strcmp(ops->items[i].name + l - strlen(suf), suf) == 0;
    }
    if (blocks != n->nblocks)
        return oi_fail_node(g, U(n, n->blocks[n->nblocks < blocks ? n->nblocks - 1 : blocks].dw)->conv,
                            "PPLCNetV4 %s has %d blocks, the graph %d (this is block %d)", ocr_lcnetv4_size_name(a->lcnet4.size),
                            blocks, n->nblocks, n->nblocks < blocks ? n->nblocks - 1 : blocks);
    const OiDeployNet p = {.units = n->units,
                           .nunits = n->nunits,
                           .svtr = n->svtr,
                           .depth = n->depth,
                           .norm = n->light ? &n->norm : NULL,  // the tiny has no neck
                           .head = n->fc,
                           .nhead = n->nfc,
                           .output = n->output,
                           .backbone = "PPLCNetV4",
                           .heads = a->light.heads,
                           .attn_width = a->light.dims};
    return oi_pair_deploy(c, &p);
}

ocr_status_t oi_import_lcnetv4(G *g, const char *dict, Ctx *c, OcrArch *arch, OcrOnnxImportInfo *info) {
    Net6 *n = calloc(1, sizeof *n);
    OCR_ASSERT(n, "out of host memory");
    ocr_status_t st = walk6(g, n);
    if (st == OCR_OK) st = check6(g, n);
    if (st == OCR_OK) st = identify6(g, n, arch, info, dict);
    if (st == OCR_OK) st = oi_ctx_create(c, arch);
    if (st == OCR_OK) st = pair6(c, n, arch);
    if (st == OCR_OK) info->softmax_output = n->softmax_node >= 0;
    free(n);
    return st;
}

#include "models/svtr/backbones.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME OCR_NAME

// ---- MobileNetV1Enhance ----------------------------------------------------------------------------

void mv1e_build(OcrBuilder *b, Mv1e *m, const char *prefix, int in_channels, Mv1eSpec s) {
    char buf[256];
    memset(m, 0, sizeof *m);
    m->s = s;
    double sc = s.scale;
    ConvBNNames names = {"_conv", "_batch_norm", "act"};
    int c1 = (int)(32 * sc);
    ConvBNSpec cs = {.cin = in_channels, .cout = c1, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .groups = 1,
                     .conv_bias = 0, .winit = ocr_init_kaiming_normal((int64_t)in_channels * 9),
                     .wattr = ocr_attr_default(), .bnattr = ocr_attr_no_decay(1.0f), .act = OCR_ACT_HARDSWISH};
    convbn_build(b, &m->conv1, NAME(buf, "%s.conv1", prefix), names, cs);
    // (num_channels, num_filters1, num_filters2, stride h, stride w, dw_size, use_se), before scaling
    // except num_channels, exactly as rec_mv1_enhance.py lists them.
    const int table[13][7] = {
        {32, 32, 64, 1, 1, 3, 0},     {64, 64, 128, 1, 1, 3, 0},    {128, 128, 128, 1, 1, 3, 0},
        {128, 128, 256, 2, 1, 3, 0},  {256, 256, 256, 1, 1, 3, 0},  {256, 256, 512, 2, 1, 3, 0},
        {512, 512, 512, 1, 1, 5, 0},  {512, 512, 512, 1, 1, 5, 0},  {512, 512, 512, 1, 1, 5, 0},
        {512, 512, 512, 1, 1, 5, 0},  {512, 512, 512, 1, 1, 5, 0},  {512, 512, 1024, 2, 1, 5, 1},
        {1024, 1024, 1024, -1, -1, 5, 1},
    };
    m->nblocks = 13;
    for (int i = 0; i < 13; i++) {
        const int *t = table[i];
        int sh = t[3], sw = t[4];
        if (sh < 0) {
            sh = s.last_conv_stride[0];
            sw = s.last_conv_stride[1];
        }
        dwsep_build(b, &m->blocks[i], NAME(buf, "%s.block_list.%d", prefix, i),
                    (DWSepSpec){.cin = (int)(t[0] * sc), .cmid = (int)(t[1] * sc), .cout = (int)(t[2] * sc),
                                .dw_size = t[5], .sh = sh, .sw = sw, .use_se = t[6]});
    }
    m->out_channels = (int)(1024 * sc);
    Pool2dParams pp = {0};
    if (s.last_pool_avg) {
        pp.kernel_h = pp.stride_h = s.last_pool_kernel[0];
        pp.kernel_w = pp.stride_w = s.last_pool_kernel[1];
    } else {
        pp.kernel_h = pp.kernel_w = pp.stride_h = pp.stride_w = 2;
    }
    lpool_build(b, &m->pool, NAME(buf, "%s.pool", prefix), s.last_pool_avg ? LPOOL_AVG : LPOOL_MAX, pp);
}

OcrTensor *mv1e_forward(OcrCtx *c, Mv1e *m, const OcrTensor *x) {
    OcrTensor *y = convbn_forward(c, &m->conv1, x);
    for (int i = 0; i < m->nblocks; i++) {
        OcrTensor *n = dwsep_forward(c, &m->blocks[i], y);
        ocr_ctx_release(c, y);
        y = n;
    }
    OcrTensor *p = lpool_forward(c, &m->pool, y, m->pool.kind, 0, 0);
    ocr_ctx_release(c, y);
    return p;
}

OcrTensor mv1e_backward(OcrCtx *c, Mv1e *m, const OcrTensor *dy, int need_dx) {
    OcrTensor g = lpool_backward(c, &m->pool, dy, 1);
    for (int i = m->nblocks - 1; i >= 0; i--) {
        OcrTensor n = dwsep_backward(c, &m->blocks[i], &g, 1);
        ocr_ctx_free(c, &g);
        g = n;
    }
    OcrTensor dx = convbn_backward(c, &m->conv1, &g, need_dx);
    ocr_ctx_free(c, &g);
    return dx;
}

// ---- PPLCNetV3 ------------------------------------------------------------------------------------------

int ocr_lcnet_make_divisible(double v) {
    const int divisor = 16;
    int nv = (int)(v + divisor / 2.0) / divisor * divisor;
    if (nv < divisor) nv = divisor;
    if (nv < 0.9 * v) nv += divisor;
    return nv;
}

void lcnet_build(OcrBuilder *b, Lcnet *m, const char *prefix, int in_channels, LcnetSpec s) {
    char buf[256];
    memset(m, 0, sizeof *m);
    m->s = s;
    ConvBNNames names = {"conv", "bn", "act"};
    int c1 = ocr_lcnet_make_divisible(16 * s.scale);
    float lr0 = (float)s.lr_mult_list[0];
    OcrParamAttr wattr = {lr0, OCR_DECAY_GLOBAL, 0.0f};
    ConvBNSpec cs = {.cin = in_channels, .cout = c1, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .groups = 1,
                     .conv_bias = 0, .winit = ocr_init_kaiming_normal((int64_t)in_channels * 9), .wattr = wattr,
                     .bnattr = ocr_attr_no_decay(lr0), .act = OCR_ACT_NONE};
    convbn_build(b, &m->conv1, NAME(buf, "%s.conv1", prefix), names, cs);
    // NET_CONFIG_rec of rec_lcnetv3.py: (k, in, out, stride h, stride w, se) per stage.
    static const int stages[5][5][6] = {
        {{3, 16, 32, 1, 1, 0}},
        {{3, 32, 64, 1, 1, 0}, {3, 64, 64, 1, 1, 0}},
        {{3, 64, 128, 2, 1, 0}, {3, 128, 128, 1, 1, 0}},
        {{3, 128, 256, 1, 2, 0}, {5, 256, 256, 1, 1, 0}, {5, 256, 256, 1, 1, 0}, {5, 256, 256, 1, 1, 0},
         {5, 256, 256, 1, 1, 0}},
        {{5, 256, 512, 2, 1, 1}, {5, 512, 512, 1, 1, 1}, {5, 512, 512, 2, 1, 0}, {5, 512, 512, 1, 1, 0}},
    };
    static const int counts[5] = {1, 2, 2, 5, 4};
    int n = 0;
    for (int st = 0; st < 5; st++) {
        float lr = (float)s.lr_mult_list[st + 1];
        for (int i = 0; i < counts[st]; i++) {
            const int *t = stages[st][i];
            lcblock_build(b, &m->blocks[n], NAME(buf, "%s.blocks%d.%d", prefix, st + 2, i),
                          (LCBlockSpec){.cin = ocr_lcnet_make_divisible(t[1] * s.scale),
                                        .cout = ocr_lcnet_make_divisible(t[2] * s.scale), .dw_size = t[0],
                                        .sh = t[3], .sw = t[4], .use_se = t[5], .nkxk = s.conv_kxk_num,
                                        .lr_mult = lr, .lab_lr = (float)s.lab_lr, .deploy = s.deploy});
            n++;
        }
        m->stage_end[st] = n;
    }
    m->nblocks = n;
    m->out_channels = ocr_lcnet_make_divisible(512 * s.scale);
    Pool2dParams pp = {3, 2, 3, 2, 0, 0};
    lpool_build(b, &m->pool, NAME(buf, "%s.pool", prefix), LPOOL_AVG, pp);
}

OcrTensor *lcnet_forward(OcrCtx *c, Lcnet *m, const OcrTensor *x) {
    OcrTensor *y = convbn_forward(c, &m->conv1, x);
    for (int i = 0; i < m->nblocks; i++) {
        OcrTensor *n = lcblock_forward(c, &m->blocks[i], y);
        ocr_ctx_release(c, y);
        y = n;
    }
    return lpool_rec_forward(c, &m->pool, y);
}

OcrTensor lcnet_backward(OcrCtx *c, Lcnet *m, const OcrTensor *dy, int need_dx) {
    OcrTensor g = lpool_backward(c, &m->pool, dy, 1);
    for (int i = m->nblocks - 1; i >= 0; i--) {
        OcrTensor n = lcblock_backward(c, &m->blocks[i], &g, 1);
        ocr_ctx_free(c, &g);
        g = n;
    }
    OcrTensor dx = convbn_backward(c, &m->conv1, &g, need_dx);
    ocr_ctx_free(c, &g);
    return dx;
}

// ---- SVTRNet ---------------------------------------------------------------------------------------------

void svtrnet_build(OcrBuilder *b, SvtrNet *m, const char *prefix, int in_channels, SvtrNetSpec s) {
    char buf[256];
    memset(m, 0, sizeof *m);
    m->s = s;
    ConvBNNames names = {"conv", "norm", "act"};
    int e0 = s.embed_dim[0];
    OcrParamAttr attr = ocr_attr_default();
    // PatchEmbed "pope" with sub_num 2: two 3x3 stride-2 ConvBN (conv with bias) + GELU.
    ConvBNSpec p0 = {.cin = in_channels, .cout = e0 / 2, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1,
                     .groups = 1, .conv_bias = 1, .winit = ocr_init_kaiming_uniform((int64_t)in_channels * 9),
                     .wattr = attr, .bnattr = attr, .act = OCR_ACT_GELU};
    convbn_build(b, &m->pe[0], NAME(buf, "%s.patch_embed.proj.0", prefix), names, p0);
    ConvBNSpec p1 = {.cin = e0 / 2, .cout = e0, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .groups = 1,
                     .conv_bias = 1, .winit = ocr_init_kaiming_uniform((int64_t)(e0 / 2) * 9), .wattr = attr,
                     .bnattr = attr, .act = OCR_ACT_GELU};
    convbn_build(b, &m->pe[1], NAME(buf, "%s.patch_embed.proj.1", prefix), names, p1);
    int gh = s.img_size[0] / 4, gw = s.img_size[1] / 4;
    lposadd_build(b, &m->pos, NAME(buf, "%s.pos_embed", prefix), gh * gw, e0);
    ldrop_build(b, &m->pos_drop, NAME(buf, "%s.pos_drop", prefix), (float)s.drop_rate, OCR_DROPOUT_UPSCALE_IN_TRAIN, 0);
    int total = s.depth[0] + s.depth[1] + s.depth[2];
    OCR_ASSERT(total <= OCR_SVTR_MAX_BLOCKS);
    m->nblocks = total;
    m->blocks = calloc((size_t)total, sizeof *m->blocks);
    OCR_ASSERT(m->blocks);
    int bi = 0;
    for (int st = 0; st < 3; st++) {
        if (st > 0 && s.patch_merging) {
            int cin = s.embed_dim[st - 1], cout = s.embed_dim[st];
            lconv_build(b, &m->sub_conv[st - 1], NAME(buf, "%s.sub_sample%d.conv", prefix, st),
                        (LConvSpec){.cin = cin, .cout = cout, .kh = 3, .kw = 3, .sh = 2, .sw = 1, .ph = 1, .pw = 1,
                                    .groups = 1, .bias = 1, .winit = ocr_init_kaiming_normal((int64_t)cin * 9),
                                    .binit = ocr_init_const(0.0f), .attr = attr});
            lln_build(b, &m->sub_norm[st - 1], NAME(buf, "%s.sub_sample%d.norm", prefix, st), cout, 1e-5f);
        }
        for (int i = 0; i < s.depth[st]; i++, bi++) {
            double dpr = total > 1 ? s.drop_path_rate * bi / (total - 1) : 0.0;
            int dim = s.embed_dim[st];
            SvtrBlockSpec bs = {.dim = dim,
                                .heads = s.num_heads[st],
                                .hidden = (int)(dim * s.mlp_ratio),
                                .eps = (float)s.epsilon,
                                .drop = (float)s.drop_rate,
                                .attn_drop = (float)s.attn_drop_rate,
                                .drop_path = (float)dpr,
                                .local_hk = s.local[bi] || s.conv[bi] ? s.local_mixer[st][0] : 0,
                                .local_wk = s.local[bi] || s.conv[bi] ? s.local_mixer[st][1] : 0,
                                .act = OCR_ACT_GELU,
                                .conv_mixer = s.conv[bi],
                                .post_norm = s.prenorm};
            svtrblock_build(b, &m->blocks[bi], NAME(buf, "%s.blocks%d.%d", prefix, st + 1, i), bs);
        }
    }
    if (!s.prenorm) lln_build(b, &m->norm, NAME(buf, "%s.norm", prefix), s.embed_dim[2], (float)s.epsilon);
    m->out_channels = s.embed_dim[2];
    if (s.last_stage) {
        Pool2dParams none = {0};
        lpool_build(b, &m->pool, NAME(buf, "%s.avg_pool", prefix), LPOOL_ADAPTIVE, none);
        lconv_build(b, &m->last_conv, NAME(buf, "%s.last_conv", prefix),
                    (LConvSpec){.cin = s.embed_dim[2], .cout = s.out_channels, .kh = 1, .kw = 1, .sh = 1, .sw = 1,
                                .groups = 1, .bias = 0, .winit = ocr_init_kaiming_normal(s.embed_dim[2]),
                                .attr = attr});
        lact_build(b, &m->hswish, NAME(buf, "%s.hardswish", prefix), OCR_ACT_HARDSWISH);
        ldrop_build(b, &m->last_drop, NAME(buf, "%s.dropout", prefix), (float)s.last_drop,
                    OCR_DROPOUT_DOWNSCALE_IN_INFER, 0);
        m->out_channels = s.out_channels;
    }
}

void svtrnet_free(SvtrNet *m) {
    free(m->blocks);
    m->blocks = NULL;
}

// Inference: y = op(x), then x is released (unless y is x itself, an identity dropout).
static OcrTensor *rel(OcrCtx *c, OcrTensor *y, OcrTensor *x) {
    if (y->data != x->data) ocr_ctx_release(c, x);
    return y;
}

static OcrTensor as_seq(const OcrTensor *t) {
    return ocr_tensor_reshape(t, 3, (int64_t[]){t->shape[0], t->shape[1] * t->shape[2], t->shape[3]});
}

OcrTensor *svtrnet_forward(OcrCtx *c, SvtrNet *m, const OcrTensor *x) {
    const SvtrNetSpec *s = &m->s;
    if (x->shape[1] != s->img_size[0] || x->shape[2] != s->img_size[1]) {
        ocr_ctx_fail(c, "SVTRNet takes %dx%d inputs (Backbone.img_size, its positional embedding), got %lldx%lld",
                     s->img_size[0], s->img_size[1], (long long)x->shape[1], (long long)x->shape[2]);
        return (OcrTensor *)x;
    }
    OcrTensor *y0 = convbn_forward(c, &m->pe[0], x);
    OcrTensor *y = convbn_forward(c, &m->pe[1], y0);
    ocr_ctx_release(c, y0);
    int64_t B = y->shape[0], H = y->shape[1], W = y->shape[2];
    OcrTensor seq = as_seq(y);
    y = lposadd_forward(c, &m->pos, &seq);
    ocr_ctx_release(c, &seq);
    y = rel(c, ldrop_forward(c, &m->pos_drop, y), y);
    int bi = 0;
    for (int st = 0; st < 3; st++) {
        if (st > 0 && s->patch_merging) {
            OcrTensor map = ocr_tensor_reshape(y, 4, (int64_t[]){B, H, W, s->embed_dim[st - 1]});
            OcrTensor *sc = lconv_forward(c, &m->sub_conv[st - 1], &map);
            ocr_ctx_release(c, &map);
            H = sc->shape[1];
            W = sc->shape[2];
            seq = as_seq(sc);
            y = lln_forward(c, &m->sub_norm[st - 1], &seq);
            ocr_ctx_release(c, &seq);
        }
        m->grid_h[st] = H;
        m->grid_w[st] = W;
        for (int i = 0; i < s->depth[st]; i++, bi++) y = rel(c, svtrblock_forward(c, &m->blocks[bi], y, (int)H, (int)W), y);
    }
    if (!s->prenorm) y = rel(c, lln_forward(c, &m->norm, y), y);
    OcrTensor map = ocr_tensor_reshape(y, 4, (int64_t[]){B, H, W, s->embed_dim[2]});
    if (!s->last_stage) {
        // Without the last stage the map is returned as is (H must be 1 for Im2Seq).
        m->out_map = map;
        return &m->out_map;
    }
    y = lpool_forward(c, &m->pool, &map, LPOOL_ADAPTIVE, 1, s->out_char_num);
    ocr_ctx_release(c, &map);
    y = rel(c, lconv_forward(c, &m->last_conv, y), y);
    y = rel(c, lact_forward(c, &m->hswish, y), y);
    return rel(c, ldrop_forward(c, &m->last_drop, y), y);
}

OcrTensor svtrnet_backward(OcrCtx *c, SvtrNet *m, const OcrTensor *dy, int need_dx) {
    const SvtrNetSpec *s = &m->s;
    OcrTensor g;
    int64_t B = dy->shape[0];
    if (s->last_stage) {
        OcrTensor d = {0};
        const OcrTensor *cur = dy;
        if (!m->last_drop.identity) {
            d = ldrop_backward(c, &m->last_drop, dy, 1);
            cur = &d;
        }
        OcrTensor a = lact_backward(c, &m->hswish, cur, 1);
        ocr_ctx_free(c, &d);
        OcrTensor b2 = lconv_backward(c, &m->last_conv, &a, 1);
        ocr_ctx_free(c, &a);
        g = lpool_backward(c, &m->pool, &b2, 1);
        ocr_ctx_free(c, &b2);
    } else {
        g = ocr_ctx_like(c, dy);
        if (!c->plan) {
            ocr_zero_tensor(&g);
            ocr_accumulate(&g, dy);
        }
    }
    OcrTensor seq = as_seq(&g), n;
    if (!s->prenorm) {
        n = lln_backward(c, &m->norm, &seq, 1);
        ocr_ctx_free(c, &seq);
        g = n;
    } else {
        g = seq;
    }
    for (int st = 2; st >= 0; st--) {
        int first = 0;
        for (int k = 0; k < st; k++) first += s->depth[k];
        for (int i = s->depth[st] - 1; i >= 0; i--) {
            n = svtrblock_backward(c, &m->blocks[first + i], &g, 1);
            ocr_ctx_free(c, &g);
            g = n;
        }
        if (st > 0 && s->patch_merging) {
            n = lln_backward(c, &m->sub_norm[st - 1], &g, 1);
            ocr_ctx_free(c, &g);
            OcrTensor map = ocr_tensor_reshape(&n, 4, (int64_t[]){B, m->grid_h[st], m->grid_w[st], s->embed_dim[st]});
            g = lconv_backward(c, &m->sub_conv[st - 1], &map, 1);
            ocr_ctx_free(c, &map);
            g = as_seq(&g);
        }
    }
    if (!m->pos_drop.identity) {
        n = ldrop_backward(c, &m->pos_drop, &g, 1);
        ocr_ctx_free(c, &g);
        g = n;
    }
    n = lposadd_backward(c, &m->pos, &g, 1);
    ocr_ctx_free(c, &g);
    OcrTensor map = ocr_tensor_reshape(&n, 4, (int64_t[]){B, m->grid_h[0], m->grid_w[0], s->embed_dim[0]});
    g = convbn_backward(c, &m->pe[1], &map, 1);
    ocr_ctx_free(c, &map);
    OcrTensor dx = convbn_backward(c, &m->pe[0], &g, need_dx);
    ocr_ctx_free(c, &g);
    return dx;
}

// PPLCNetV4, the PP-OCRv6 backbone (recognition form, PaddleOCR's rec_lcnetv4.py), in its
// training form (Conv2D_BN layers with BN statistics, RepDWConv's three branches) or its fused
// deploy form (each Conv2D_BN / ConvBNAct one conv with bias, each RepDWConv one 3x3 depthwise
// conv), with PaddleOCR's parameter names in both. Input NHWC images, output the pooled map
// (B, 1, T, C) that Im2Seq reads.
#ifndef OCR_MODELS_SVTR_LCNETV4_H
#define OCR_MODELS_SVTR_LCNETV4_H

#include "models/svtr/blocks.h"

// ---- zero (or -inf) padding with different amounts per side ---------------------------------
// Paddle's padding="SAME" of an even kernel at stride 1 pads (k - 1) / 2 before and the rest
// after: 0 and 1 for StemBlock's 2x2 convs and max pool. The conv/pool kernels pad
// symmetrically, so this layer pads first and the conv/pool runs unpadded.
typedef struct {
    int op;
    int top, bottom, left, right;
    float value;
    OcrTensor y;
    ocr_dtype_t in_dtype;
} LPad;
void lpad_build(OcrBuilder *b, LPad *l, const char *name, int top, int bottom, int left, int right, float value);
OcrTensor *lpad_forward(OcrCtx *c, LPad *l, const OcrTensor *x);
OcrTensor lpad_backward(OcrCtx *c, LPad *l, const OcrTensor *dy, int need_dx);

// ---- conv + BN (+ activation), or in deploy form one conv with bias (+ activation) ----------------
// Conv2D_BN (sub-layers "conv", "bn"; fused: the conv at the layer's own name) and StemBlock's
// ConvBNAct (fused: the conv keeps the name "conv"). BN eps 1e-5, momentum 0.9.
typedef struct {
    int deploy;
    ConvBN cb;   // training form
    LConv conv;  // deploy form
    LAct act;
    int has_act;
} V4ConvBN;
typedef struct {
    int cin, cout, kh, kw, sh, sw, ph, pw, groups;
    ocr_activation_t act;   // OCR_ACT_NONE: none
    int bn_zero;            // bn_weight_init 0 (the compress layer of a residual block)
    int bn_no_decay;        // ConvBNAct's BN: L2Decay(0) on weight and bias
    int fused_conv_name;    // deploy form: the conv is "<prefix>.conv" (ConvBNAct) instead of "<prefix>"
    int deploy;
} V4ConvBNSpec;
void v4convbn_build(OcrBuilder *b, V4ConvBN *l, const char *prefix, V4ConvBNSpec s);
OcrTensor *v4convbn_forward(OcrCtx *c, V4ConvBN *l, const OcrTensor *x);
OcrTensor v4convbn_backward(OcrCtx *c, V4ConvBN *l, const OcrTensor *dy, int need_dx);
// Fused kernel (OC, KH, KW, C/groups) and bias (OC) of a training-form layer (BN folded).
void v4convbn_fuse(const V4ConvBN *l, const OcrParamTable *params, const OcrParamTable *stats, float *kernel,
                   float *bias);

// ---- RepDWConv: bn(conv(x) + conv1(x) + x), conv a 3x3 depthwise Conv2D_BN, conv1 a 1x1 depthwise
// conv without bias; deploy form: reparam_conv, one k x k depthwise conv with bias --------------------
typedef struct {
    int deploy, channels, k;
    V4ConvBN conv;
    LConv conv1;
    LAdd add1, add2;
    LBN bn;
    LConv reparam;
    // Training: the 3x3 branch's conv output (its BN's input) was freed after the forward and the
    // depthwise conv runs again on x before that BN's backward (repdw_forward).
    int k_recompute;
} RepDW;
void repdw_build(OcrBuilder *b, RepDW *l, const char *prefix, int channels, int k, int deploy);
OcrTensor *repdw_forward(OcrCtx *c, RepDW *l, const OcrTensor *x);
OcrTensor repdw_backward(OcrCtx *c, RepDW *l, const OcrTensor *dy, int need_dx);
void repdw_fuse(const RepDW *l, const OcrParamTable *params, const OcrParamTable *stats, float *kernel, float *bias);

// ---- LCNetV4Block: token mixer (RepDW when stride 1 and in == out, else a depthwise Conv2D_BN)
// → [SE] → expand 1x1 (x2) → GELU → compress 1x1 (+ x when residual) ------------------------------------
typedef struct {
    int residual, use_rep, use_se;
    RepDW rep;
    V4ConvBN dw;
    SEBlock se;
    V4ConvBN expand, compress;
    LAdd add;
    // Training: the SE output (the expand conv's saved input) was freed after the forward and is
    // formed again, bit for bit, from the SE multiply's saved operands before the expand's backward.
    int se_recompute;
    // Training: the expand's GELU output (the compress conv's saved input, the block's widest map)
    // was freed after the compress conv's forward and is rebuilt, bit for bit, from the expand BN's
    // saved input and statistics just before the compress conv's backward.
    int expand_recompute;
    // Training: the RepDW output (the SE's or the expand conv's saved input) was freed after the
    // forward and is formed again from its BN's saved input and statistics before the SE's
    // output is (v4block_forward).
    int mixer_recompute;
} V4Block;
typedef struct {
    int cin, cout, k, sh, sw, use_se, deploy;
    float lr_mult;  // the SE convs' (PaddleOCR passes lr_mult only to them)
} V4BlockSpec;
void v4block_build(OcrBuilder *b, V4Block *l, const char *prefix, V4BlockSpec s);
OcrTensor *v4block_forward(OcrCtx *c, V4Block *l, const OcrTensor *x);
OcrTensor v4block_backward(OcrCtx *c, V4Block *l, const OcrTensor *dy, int need_dx);

// ---- PPLCNetV4 (det=False) ---------------------------------------------------------------------------------
typedef enum { OCR_LCNETV4_TINY = 0, OCR_LCNETV4_SMALL, OCR_LCNETV4_MEDIUM } ocr_lcnetv4_size_t;
typedef struct {
    ocr_lcnetv4_size_t size;  // model_size
    double lr_mult_list[6];
    int deploy;
} Lcnet4Spec;
#define OCR_LCNETV4_MAX_BLOCKS 16
typedef struct {
    Lcnet4Spec s;
    int branch_stem;
    V4ConvBN stem[5];  // simple: conv1.0, conv1.2; branch: stem1, stem2a, stem2b, stem3, stem4
    LAct stem_gelu;    // simple stem: conv1.1 (fused into conv1.0's BN unless every output is kept)
    int stem_recompute;  // simple stem, training: conv1.1's output dropped, rebuilt for conv1.2's backward
    LPad pad2a, pad2b, pad_pool;
    LPool stem_pool;
    LConcat stem_cat;
    V4Block blocks[OCR_LCNETV4_MAX_BLOCKS];
    int nblocks;
    LPool pool;
    int out_channels;
} Lcnet4;
const char *ocr_lcnetv4_size_name(ocr_lcnetv4_size_t s);
void lcnet4_build(OcrBuilder *b, Lcnet4 *m, const char *prefix, int in_channels, Lcnet4Spec s);
// Pool as PPLCNetV3's (backbones.h): training → adaptive average to (1, floor(W/2)) of the last
// map (PaddleOCR's [1, 40] at width 320); inference → AvgPool (3, 2) when the map is 3..5 rows high.
OcrTensor *lcnet4_forward(OcrCtx *c, Lcnet4 *m, const OcrTensor *x);
OcrTensor lcnet4_backward(OcrCtx *c, Lcnet4 *m, const OcrTensor *dy, int need_dx);
// Training form (params/stats of `t`) → deploy form `d` (built with deploy = 1): every fused
// layer's kernel and bias written into d's parameter table `dparams` (host tables).
void lcnet4_fuse(const Lcnet4 *t, const OcrParamTable *tparams, const OcrParamTable *tstats, const Lcnet4 *d,
                 OcrParamTable *dparams);

// ---- the tiny's CTC guide layer (CTCHead use_guide): on the sequence (B, 1, T, C), a depthwise
// Conv1D k5 → BN → hardswish → 1x1 Conv1D → BN → hardswish (guide_layer.0/.1/.3/.4), no biases ----------
typedef struct {
    ConvBN dw, pw;
} CtcGuide;
void ctcguide_build(OcrBuilder *b, CtcGuide *l, const char *prefix, int channels);
OcrTensor *ctcguide_forward(OcrCtx *c, CtcGuide *l, const OcrTensor *x);
OcrTensor ctcguide_backward(OcrCtx *c, CtcGuide *l, const OcrTensor *dy, int need_dx);

// ---- EncoderWithLightSVTR (PP-OCRv6 small/medium CTC neck) --------------------------------------------------
// skip = skip_conv(x); z = conv_reduce(x); z = z + local_conv(z); z = norm(svtr_blocks(z)); out = z + skip.
// skip_conv, conv_reduce: 1x1 ConvBNLayer + swish; local_conv: (1 x local_kernel) depthwise conv, BN,
// swish (local_conv.0/.1); blocks: SVTR Global-mixer blocks (pre-LN, eps 1e-5, swish MLP), norm eps 1e-6.
typedef struct {
    int in_channels, dims, depth, heads, local_kernel, use_guide;
    float mlp_ratio, drop, attn_drop;
} LightSvtrSpec;
typedef struct {
    LightSvtrSpec s;
    ConvBN reduce, local, skip;
    LAdd add_local, add_skip;
    SvtrBlock *blocks;
    LLN norm;
} LightSvtr;
void lightsvtr_build(OcrBuilder *b, LightSvtr *l, const char *prefix, LightSvtrSpec s);
void lightsvtr_free(LightSvtr *l);
// x (B, 1, W, Cin) -> (B, 1, W, dims).
OcrTensor *lightsvtr_forward(OcrCtx *c, LightSvtr *l, const OcrTensor *x);
// With use_guide the input gradient is never computed (PaddleOCR's detach).
OcrTensor lightsvtr_backward(OcrCtx *c, LightSvtr *l, const OcrTensor *dy, int need_dx);

#endif

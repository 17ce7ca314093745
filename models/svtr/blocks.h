// Composite layers built from the primitives in nn.h, in PaddleOCR's structure and naming.
// Same forward/backward contract as nn.h: backward takes a borrowed dy, accumulates parameter
// gradients and returns a new input gradient (or an empty tensor when need_dx is 0).
#ifndef OCR_MODELS_SVTR_BLOCKS_H
#define OCR_MODELS_SVTR_BLOCKS_H

#include "models/svtr/nn.h"

// ---- ConvBN(+activation): conv (no bias unless asked) → BN → activation -----------------------
typedef struct {
    const char *conv, *bn, *act;  // sub-module names ("_conv", "_batch_norm" in MobileNetV1Enhance)
} ConvBNNames;
// Memory and passes: BN and activation run as one fused op (lbn_act_forward, when their dtypes
// agree and the pass does not keep every activation), so a training step saves two maps per
// ConvBN, the conv output (BN's input) and the activation output, instead of three. The fused
// backward (lbn_act_backward) rebuilds each BN output value from the conv output on the fly
// for the activation's derivative, bit-identically, without materialising the BN output or
// the activation's gradient.
typedef struct {
    LConv conv;
    LBN bn;
    LAct act;
    int has_act;
} ConvBN;
// The conv's fields are LConvSpec's (kh, kw, sh, sw, groups and winit asserted there; cin, cout
// must be set); wattr and bnattr must be set (not checkable). Zero: ph/pw no padding, conv_bias
// none (a bias starts at 0), act OCR_ACT_NONE (no activation).
typedef struct {
    int cin, cout, kh, kw, sh, sw, ph, pw, groups;
    int conv_bias;
    OcrInit winit;
    OcrParamAttr wattr, bnattr;
    ocr_activation_t act;
} ConvBNSpec;
void convbn_build(OcrBuilder *b, ConvBN *l, const char *prefix, ConvBNNames names, ConvBNSpec s);
OcrTensor *convbn_forward(OcrCtx *c, ConvBN *l, const OcrTensor *x);
OcrTensor convbn_backward(OcrCtx *c, ConvBN *l, const OcrTensor *dy, int need_dx);
// convbn_backward (need_dx) for a ConvBN whose input x the training pass dropped after this conv's
// forward (ocr_ctx_drop), x being the output of src, a fused BN + activation (lbn_act_forward).
// Only the conv's weight gradient
// reads x again, while src's backward needs the conv's input gradient: so that input gradient
// comes first (it reads only dy and the weight), then src's backward, which forms x again in the
// same pass (the forward's bits, so the weight gradient is unchanged), then the weight gradient
// from x, which is freed after it. Returns the gradient at src's BN input: src's backward is done.
// Not for a conv that saved an autocast copy of x (it has no need of x).
OcrTensor convbn_backward_rebuilding_input(OcrCtx *c, ConvBN *l, const OcrTensor *dy, LBN *src_bn, LAct *src_act);
// For a ConvBN whose conv is cheap to run again (depthwise: 9 or 25 multiply-adds per value):
// in a training pass its output, read again only as the BN's saved input, goes after the forward
// (not with keep_all, nor when the conv saved an autocast copy); returns whether it went.
// convbn_conv_output_again runs the conv again on its saved input (the forward's bits) and
// gives the BN its input back, before the BN's backward.
int convbn_drop_conv_output(OcrCtx *c, ConvBN *l);
void convbn_conv_output_again(OcrCtx *c, ConvBN *l);

// ---- squeeze-and-excitation: x · hardsigmoid(conv2(relu(conv1(avgpool(x))))) ------------------
typedef struct {
    LPool pool;
    LConv conv1, conv2;
    LAct relu, hsig;
    LMul mul;
} SEBlock;
void se_build(OcrBuilder *b, SEBlock *l, const char *prefix, int channels, float lr_mult);
OcrTensor *se_forward(OcrCtx *c, SEBlock *l, const OcrTensor *x);
OcrTensor se_backward(OcrCtx *c, SEBlock *l, const OcrTensor *dy, int need_dx);

// ---- MobileNetV1Enhance DepthwiseSeparable: dw ConvBN → [SE] → pw ConvBN ---------------------
typedef struct {
    ConvBN dw, pw;
    SEBlock se;
    int use_se;
} DWSeparable;
// Must be set (asserted): cin, cmid (= cin: the depthwise conv keeps the channel count), cout,
// dw_size, sh, sw. Zero: use_se no SE block.
typedef struct {
    int cin, cmid, cout;
    int dw_size;  // the depthwise kernel (padding dw_size / 2)
    int sh, sw;   // the depthwise conv's stride
    int use_se;
} DWSepSpec;
void dwsep_build(OcrBuilder *b, DWSeparable *l, const char *prefix, DWSepSpec s);
OcrTensor *dwsep_forward(OcrCtx *c, DWSeparable *l, const OcrTensor *x);
OcrTensor dwsep_backward(OcrCtx *c, DWSeparable *l, const OcrTensor *dy, int need_dx);

// ---- PPLCNetV3 LearnableRepLayer -----------------------------------------------------------------
// Training form: Σ [identity BN] + [1×1 ConvBN] + conv_kxk_num × k×k ConvBN → LAB → hardswish →
// LAB. Deploy form: one k×k conv with bias (reparam_conv) → LAB → hardswish → LAB.
// Memory and passes: when the three tail ops share a dtype (and the pass does not keep
// everything), the tail runs as one fused op (llab_act_forward / _backward): it saves its input
// (the sum or the conv output) and its output instead of four maps, reads and writes each once
// per pass, and gives the bits of the three ops run one after another.
#define OCR_REP_MAX_BRANCHES 8
typedef struct {
    int deploy;
    int cin, cout, k, sh, sw, groups;
    int has_identity, has_1x1, nkxk;
    LBN identity;
    ConvBN kxk[OCR_REP_MAX_BRANCHES];
    ConvBN c1x1;
    LConv reparam;
    int sum_op;
    OcrTensor sum;
    LLab lab, act_lab;
    LAct act;
    int tail_fused;  // the last forward ran the tail as one fused op
} RepLayer;
// Must be set (asserted): cin, cout, k, sh, sw, groups (1 for a dense layer), nkxk (1 ..
// OCR_REP_MAX_BRANCHES). Must be set, not checkable: lr_mult, lab_lr (0 is a valid multiplier).
// Zero: deploy the training form.
typedef struct {
    int cin, cout, k, sh, sw, groups;
    int nkxk;       // conv_kxk_num: parallel k×k ConvBN branches (training form)
    float lr_mult;  // every parameter's learning-rate multiplier
    float lab_lr;   // the LABs' multiplier on top of lr_mult
    int deploy;     // 1: the deploy form (one reparameterised conv)
} RepSpec;
void rep_build(OcrBuilder *b, RepLayer *l, const char *prefix, RepSpec s);
OcrTensor *rep_forward(OcrCtx *c, RepLayer *l, const OcrTensor *x);
OcrTensor rep_backward(OcrCtx *c, RepLayer *l, const OcrTensor *dy, int need_dx);
// Fuses the branches of a training-form layer (params/stats of `src`) into the k×k kernel
// (OC, K, K, C/groups) and bias (OC) of the deploy form: BN folded into each branch
// (eps 1e-5), the 1×1 kernel padded to k×k, the identity BN as a centred one-hot kernel.
void rep_fuse(const RepLayer *l, const OcrParamTable *params, const OcrParamTable *stats, float *kernel, float *bias);

// ---- PPLCNetV3 block: dw RepLayer → [SE] → pw RepLayer ---------------------------------------------
typedef struct {
    RepLayer dw, pw;
    SEBlock se;
    int use_se;
} LCBlock;
// Must be set (asserted; the last four by rep_build): cin, cout, dw_size, sh, sw, nkxk. Must be
// set, not checkable: lr_mult, lab_lr. Zero: use_se no SE block, deploy the training form.
typedef struct {
    int cin, cout;
    int dw_size;  // the depthwise RepLayer's kernel
    int sh, sw;   // the depthwise RepLayer's stride
    int use_se;
    int nkxk;
    float lr_mult, lab_lr;
    int deploy;
} LCBlockSpec;
void lcblock_build(OcrBuilder *b, LCBlock *l, const char *prefix, LCBlockSpec s);
OcrTensor *lcblock_forward(OcrCtx *c, LCBlock *l, const OcrTensor *x);
OcrTensor lcblock_backward(OcrCtx *c, LCBlock *l, const OcrTensor *dy, int need_dx);

// ---- SVTR block (pre-LN): x += DP(drop(proj(attn(qkv(LN1 x))))); x += DP(MLP(LN2 x)) ------------------
typedef struct {
    int dim, heads, hidden;
    float eps, drop, attn_drop, drop_path;
    int local_hk, local_wk;  // 0 for a global mixer; the ConvMixer's kernel with conv_mixer
    ocr_activation_t act;
    // Zero: the attention mixer, pre-LN. conv_mixer: PaddleOCR's ConvMixer (mixer "Conv"), a
    // local_hk x local_wk conv over the token grid (padding k/2, groups = heads, with bias), named
    // mixer.local_mixer. post_norm: PaddleOCR's prenorm=True, x = LN1(x + DP(mixer(x))),
    // x = LN2(x + DP(MLP(x))).
    int conv_mixer, post_norm;
} SvtrBlockSpec;
typedef struct {
    LLN norm1, norm2;
    LLinear qkv, proj, fc1, fc2;
    LAttn attn;
    LConv mixconv;  // conv_mixer
    OcrTensor mix_seq;  // the ConvMixer's output as (B, T, C)
    int conv_mixer, post_norm;
    LDrop proj_drop, dp1, drop1, drop2, dp2;
    LAct act;
    LAdd add1, add2;
} SvtrBlock;
void svtrblock_build(OcrBuilder *b, SvtrBlock *l, const char *prefix, SvtrBlockSpec s);
// x (B, T, C); grid_h · grid_w = T (the local mixer's token grid).
OcrTensor *svtrblock_forward(OcrCtx *c, SvtrBlock *l, const OcrTensor *x, int grid_h, int grid_w);
OcrTensor svtrblock_backward(OcrCtx *c, SvtrBlock *l, const OcrTensor *dy, int need_dx);

// ---- EncoderWithSVTR neck (spec §4) --------------------------------------------------------------------
typedef struct {
    int in_channels, dims, depth, hidden, kernel[2], heads, use_guide;
    float mlp_ratio, drop, attn_drop;
} SvtrNeckSpec;
typedef struct {
    SvtrNeckSpec s;
    ConvBN conv1, conv2, conv3, conv4, conv1x1;
    SvtrBlock *blocks;
    LLN norm;
    LConcat cat;
} SvtrNeck;
void svtrneck_build(OcrBuilder *b, SvtrNeck *l, const char *prefix, SvtrNeckSpec s);
void svtrneck_free(SvtrNeck *l);
// x (B, H, W, Cin) -> (B, H, W, dims).
OcrTensor *svtrneck_forward(OcrCtx *c, SvtrNeck *l, const OcrTensor *x);
// With use_guide the input gradient is never computed (PaddleOCR's stop_gradient).
OcrTensor svtrneck_backward(OcrCtx *c, SvtrNeck *l, const OcrTensor *dy, int need_dx);

// ---- CTC head: Linear (or Linear → Linear with mid_channels); softmax in inference --------------------------
typedef struct {
    int mid;
    LLinear fc, fc1, fc2;
    LSoftmax softmax;
    OcrTensor *logits, *probs;
} CtcHead;
// Must be set (asserted): in, classes. Zero: mid one Linear (no mid_channels), fc_decay a fixed
// L2 coefficient of 0.
typedef struct {
    int in, classes;
    int mid;         // mid_channels: > 0 puts a second Linear in between
    float fc_decay;  // L2Decay of both weights and biases
} CtcHeadSpec;
void ctchead_build(OcrBuilder *b, CtcHead *l, const char *prefix, CtcHeadSpec s);
// x (B, T, C) -> logits (B, T, classes); probs too when not training.
OcrTensor *ctchead_forward(OcrCtx *c, CtcHead *l, const OcrTensor *x);
OcrTensor ctchead_backward(OcrCtx *c, CtcHead *l, const OcrTensor *dlogits, int need_dx);

#endif

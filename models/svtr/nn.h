// Layer primitives: one struct per op instance, each with a build function (registers its
// parameters and its op-table entry), a forward and a backward.
//
// Conventions (the same as kernels/ops.h, one level up):
// - Tensors are NHWC images or (B, T, C) sequences; a reshape between the two is free.
// - forward(ctx, layer, x) saves what the backward needs in the layer and returns the
//   output, allocated from the activation arena in the op's compute dtype.
// - backward(ctx, layer, dy, need_dx) ACCUMULATES parameter gradients (+=) and returns the
//   input gradient (a new arena tensor, assigned), or an empty tensor when need_dx is 0.
//   The caller frees dy; the layer frees its own output at the end of its backward (every
//   consumer of that output has run its backward by then).
// - In a planning pass (ctx->plan) the same code runs without touching any data: only the
//   arena allocations and the op table's shapes and FLOPs are recorded.
// - Autocast (AMP, docs/AMP.md): the GEMM layers (conv2d, linear, attention) run on a copy of
//   their input in their compute dtype when that dtype would round the input (an f32 map into
//   an f16 conv); the copy comes from the arena (planned like any activation), is what the
//   backward reads, and the input gradient is cast back to the input's dtype. Widening into
//   f32 is exact and makes no copy: the kernels read any dtype.
#ifndef OCR_MODELS_SVTR_NN_H
#define OCR_MODELS_SVTR_NN_H

#include <stdint.h>

#include "amp/weights.h"
#include "core/tensor.h"
#include "kernels/ops.h"
#include "models/arena.h"
#include "models/params.h"

// ---- op table: one entry per op instance (what `ocrtrain info` lists, what AMP assigns) --
typedef struct {
    char *name;                 // "backbone.conv1.conv"
    const char *type;           // "conv2d", "batchnorm", "activation", "linear", ...
    ocr_dtype_t compute_dtype;  // the dtype the op runs in and stores its output in
    int64_t params;             // trainable parameters the op owns
    int out_ndim;
    int64_t out_shape[OCR_MAX_DIMS];  // from the last pass (batch included)
    double flops;                     // forward FLOPs of the last pass (whole batch)
    OcrTensor out;                    // the output of the last pass (valid until the arena is reused)
    double time_fwd, time_bwd;        // seconds accumulated while profiling
    int conv_stride[2], conv_pad[2], conv_groups;  // convolutions: geometry (for import checks)
    int bn_frozen;  // batchnorm: training passes normalise with the running statistics and do not
                    // update them (Global.freeze_norm); the backward treats them as constants
} OcrOpInfo;

typedef struct {
    OcrOpInfo *items;
    int count, cap;
} OcrOpTable;

void ocr_ops_free(OcrOpTable *t);

// Optimizer attributes of a parameter (PaddleOCR's ParamAttr).
typedef struct {
    float lr_mult;
    ocr_decay_kind_t decay_kind;
    float decay;
} OcrParamAttr;
static inline OcrParamAttr ocr_attr_default(void) { OcrParamAttr a = {1.0f, OCR_DECAY_GLOBAL, 0.0f}; return a; }
static inline OcrParamAttr ocr_attr_no_decay(float lr_mult) { OcrParamAttr a = {lr_mult, OCR_DECAY_NONE, 0.0f}; return a; }

typedef struct {
    OcrParamTable *params;  // trainable
    OcrParamTable *stats;   // BN running statistics
    OcrOpTable *ops;
} OcrBuilder;

int ocr_build_op(OcrBuilder *b, const char *name, const char *type);
// printf into buf (asserts that the name fits); returns buf.
char *ocr_name(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define OCR_NAME(buf, ...) ocr_name((buf), sizeof(buf), __VA_ARGS__)
int ocr_build_param(OcrBuilder *b, int op, const char *name, int ndim, const int64_t *shape, OcrInit init,
                    ocr_param_role_t role, OcrParamAttr attr);

// Paddle's initialisers.
OcrInit ocr_init_const(float v);
OcrInit ocr_init_kaiming_normal(int64_t fan_in);   // N(0, sqrt(2 / fan_in))
OcrInit ocr_init_kaiming_uniform(int64_t fan_in);  // U(±sqrt(6 / fan_in))
OcrInit ocr_init_uniform(float lo, float hi);
OcrInit ocr_init_trunc_normal(float std);

// ---- run context ----------------------------------------------------------------------
typedef struct {
    OcrParamTable *params, *stats;
    OcrOpTable *ops;
    OcrArena *arena;
    int plan;      // planning pass: allocations and shapes only
    int training;  // BN batch statistics, dropout active, training-form pooling
    uint64_t seed; // dropout randomness: (seed, per-site stream, step-based offset)
    uint64_t step;
    float bn_momentum;  // >= 0: overrides every BN's momentum for this pass (calibration)
    int keep_all;       // inference: keep every activation (debugging, parity) instead of releasing
    int profile;      // accumulate wall time per op (time since the previous op finished)
    double t_last;
    int failed;       // an input too small for some layer (shapes are clamped to go on)
    char error[256];  // the first such message
    const AmpCastCache *cast_cache;  // O1: low-precision copies of parameters (NULL: none)
    // Called at the end of each op's backward in a real (not planning) pass: that op's
    // parameter gradients are complete (data parallelism starts their all-reduce early).
    void (*bwd_hook)(void *user, int op);
    void *bwd_hook_user;
    // Synchronised batch norm (data parallelism, Global.use_sync_bn): batch statistics are the
    // world's (kernels/ops.h). NULL: per-rank statistics. Set only for training passes.
    const OcrBnSync *bn_sync;
} OcrCtx;

// Records the first shape error of a pass (the model turns it into a status).
void ocr_ctx_fail(OcrCtx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

OcrTensor ocr_ctx_param(const OcrCtx *c, int i);
// The tensor an op computes with for parameter i: its low-precision copy in the O1 cast cache
// when the cache has one (conv/linear weights and biases, embeddings of low-precision ops),
// else the parameter itself. Gradients always go to ocr_ctx_grad (f32 at O1).
OcrTensor ocr_ctx_weight(const OcrCtx *c, int i);
OcrTensor ocr_ctx_grad(const OcrCtx *c, int i);
OcrTensor ocr_ctx_stat(const OcrCtx *c, int i);
ocr_dtype_t ocr_ctx_dtype(const OcrCtx *c, int op);
OcrTensor ocr_ctx_new(OcrCtx *c, ocr_dtype_t dtype, int ndim, const int64_t *shape);
// Autocast for layers outside nn.c (NRTR, SAR): the input op `op` runs on, x itself or (*cast = 1)
// a new arena copy in the op's compute dtype, when that dtype would round x or, with `widen`, also
// when it is f32 (ops kept f32 under O1: the LSTMs, SAR's attention).
OcrTensor ocr_ctx_autocast_input(OcrCtx *c, int op, const OcrTensor *x, int widen, int *cast);
// The input gradient in the input's dtype `in_dtype`: *dx itself, or a cast copy (*dx freed).
OcrTensor ocr_ctx_cast_grad(OcrCtx *c, OcrTensor *dx, ocr_dtype_t in_dtype);
OcrTensor ocr_ctx_like(OcrCtx *c, const OcrTensor *t);  // same shape and dtype
void ocr_ctx_free(OcrCtx *c, OcrTensor *t);
// Inference passes only: frees an activation that nothing reads any more (clears *t). A no-op
// in training passes (the backward needs what the forward saved), with keep_all, and for
// memory outside the arena (the input images).
void ocr_ctx_release(OcrCtx *c, OcrTensor *t);
// Frees an activation whose consumers have all run and that no backward reads (an op's output
// that only fed another op's forward: a pad's or a concat's input, the BN output of a fused
// BN + activation), in training passes too; clears *t and every op-table entry that shows it.
// A no-op with keep_all and for memory outside the arena. The owning layer's backward then
// finds its output field empty and frees nothing.
void ocr_ctx_drop(OcrCtx *c, OcrTensor *t);
void ocr_ctx_record(OcrCtx *c, int op, const OcrTensor *out, double flops);
// Marks the end of an op's backward (profiling; the data-parallel hook: its gradients are final).
void ocr_ctx_bwd_done(OcrCtx *c, int op);
// Profiling only: the time since the last mark is op's backward, whose gradients are not final
// yet (a backward run in two parts, the hook fires at its ocr_ctx_bwd_done).
void ocr_ctx_bwd_time(OcrCtx *c, int op);
// dst += src, or dst = src when dst is empty (the first branch of a sum of gradients).
void ocr_ctx_accumulate(OcrCtx *c, OcrTensor *dst, OcrTensor *src);

// ---- convolution (weight (OC, KH, KW, C/groups), optional bias) ------------------------
typedef struct {
    int op, w, b;  // b = -1 without bias
    int cin, cout, kh, kw;
    Conv2dParams p;
    OcrTensor x, y;          // x: the input the op ran on (the autocast copy when xcast)
    int xcast;               // x is this layer's own autocast copy of its input
    ocr_dtype_t in_dtype;    // the input's dtype (its gradient's dtype)
} LConv;
// Build with designated initialisers: (LConvSpec){.cin = 3, .cout = 16, .kh = 3, .kw = 3, ...}.
// Must be set (asserted, a zero is never meant): kh, kw, sh, sw, groups (1 for a dense conv),
// winit (not constant 0). Must be set, not checkable: cin, cout (0 builds an empty layer, which
// a config can ask for: the SVTR neck's cin / 8 below 8 input channels) and attr (0 is a valid
// lr_mult). Zero means what it says: ph/pw no padding, bias none, binit constant 0.
typedef struct {
    int cin, cout, kh, kw, sh, sw, ph, pw, groups;
    int bias;            // 1: a bias parameter after the weight
    OcrInit winit;       // weight (OC, KH, KW, C/groups)
    OcrInit binit;       // bias (OC); only with bias
    OcrParamAttr attr;   // optimizer attributes of the weight and the bias
} LConvSpec;
void lconv_build(OcrBuilder *b, LConv *l, const char *name, LConvSpec s);
OcrTensor *lconv_forward(OcrCtx *c, LConv *l, const OcrTensor *x);
OcrTensor lconv_backward(OcrCtx *c, LConv *l, const OcrTensor *dy, int need_dx);
// lconv_backward in two parts, for an input the training pass dropped and rebuilds only once its
// gradient exists (lbn_act_backward_rebuilding_output): _input returns dx from dy and the weight
// (a convolution's input gradient never reads the input's values, only its shape); _weight, with
// l->x back, adds the weight and bias gradients and ends the backward as lconv_backward does.
// The same bits as lconv_backward (the two products are independent). Either order: _weight
// first lets a caller free an input it formed again before _input allocates dx (HGNetV2's
// concatenation). Not for an autocast copy.
OcrTensor lconv_backward_input(OcrCtx *c, LConv *l, const OcrTensor *dy);
// l->y again, the output of the last lconv_forward that a training pass dropped (a cheap
// convolution's output, its BN's saved input), from l->x, which the caller has put back: the
// forward's kernel on the forward's input and weight, so the forward's bits. lconv_backward
// frees it as usual. Not for an autocast copy.
void lconv_forward_again(OcrCtx *c, LConv *l);
void lconv_backward_weight(OcrCtx *c, LConv *l, const OcrTensor *dy);

// ---- batch norm (Paddle: momentum 0.9, eps 1e-5) ---------------------------------------
// Three modes: training (batch statistics, running ones updated), inference (running
// statistics), and frozen (the op's bn_frozen flag in a training pass): the inference
// arithmetic — bit-identical outputs to an eval pass, running statistics untouched — with a
// backward through constant statistics that still accumulates dgamma/dbeta (whether those
// train is the optimizer's business). A calibration pass (ctx bn_momentum >= 0) re-estimates
// frozen layers too: it is asked for explicitly.
typedef struct {
    int op, g, b, mean, var;  // mean/var index the stats table
    int channels;
    float momentum, eps;
    int training;  // mode of the last forward: 1 batch statistics, 0 running ones (inference or frozen)
    OcrTensor x, y, save_mean, save_rstd;
    OcrTensor save_scale;  // lbn_act_forward only: gamma·rstd as it normalised (C, f32)
} LBN;
void lbn_build(OcrBuilder *b, LBN *l, const char *name, int channels, OcrParamAttr attr);
OcrTensor *lbn_forward(OcrCtx *c, LBN *l, const OcrTensor *x);
// lbn_forward that also saves save_scale (C, f32, as lbn_act_forward does), so that a training
// pass can drop the output once its readers' forwards have run (ocr_ctx_drop) and
// lbn_act_output_again forms it again, bit for bit. The output and statistics are
// lbn_forward's; lbn_backward is its backward too.
OcrTensor *lbn_forward_rebuildable(OcrCtx *c, LBN *l, const OcrTensor *x);
// sum += bn(x) without storing bn(x) (batchnorm2d_forward_accumulate: the bits of lbn_forward
// followed by accumulate). The backward is lbn_backward's (it never reads the output). Only when
// lbn_can_accumulate: a sum of the op's dtype, per-rank statistics, and a pass that does not keep
// every op's output.
int lbn_can_accumulate(const OcrCtx *c, const LBN *l, const OcrTensor *sum);
void lbn_forward_accumulate(OcrCtx *c, LBN *l, const OcrTensor *x, OcrTensor *sum);
OcrTensor lbn_backward(OcrCtx *c, LBN *l, const OcrTensor *dy, int need_dx);

// ---- elementwise activation -----------------------------------------------------------
typedef struct {
    int op;
    ocr_activation_t act;
    int inplace;  // the last forward was fused into another op's (lbn_act / llab_act), which owns y
    OcrTensor x, y;
} LAct;
void lact_build(OcrBuilder *b, LAct *l, const char *name, ocr_activation_t act);
OcrTensor *lact_forward(OcrCtx *c, LAct *l, const OcrTensor *x);
OcrTensor lact_backward(OcrCtx *c, LAct *l, const OcrTensor *dy, int need_dx);

// ---- batch norm + activation, fused (batchnorm2d_act_forward / _backward) ---------------------
// act(bn(x)) in one op pair, for a BN whose output only feeds the activation. Same memory plan
// as lbn_forward + an activation in place over its output: the output buffer is the BN's
// allocation, owned by the activation layer (act->inplace = 1) and freed at the backward; the
// BN keeps its input and statistics. The op table records both ops (the BN's entry forgets the
// output, whose values are the activation's). The activation's dtype must be the BN's. One
// more (C) f32 statistic than lbn_forward is saved: save_scale, which rebuilds each BN output
// value exactly in the backward.
OcrTensor *lbn_act_forward(OcrCtx *c, LBN *bn, LAct *act, const OcrTensor *x);
// Backward of lbn_act_forward from dy, the gradient of the activation output: no BN output is
// recomputed and no activation gradient is stored (bit-identical to recomputing the BN output
// with batchnorm2d_forward, then lact_backward + lbn_backward). Frees the output and the
// statistics; returns the BN input's gradient (empty when need_dx is 0).
OcrTensor lbn_act_backward(OcrCtx *c, LBN *bn, LAct *act, const OcrTensor *dy, int need_dx);
// lbn_act_backward (need_dx) for the output of lbn_act_forward that a training pass dropped
// (ocr_ctx_drop) once its readers' forwards had run, and that the next op's backward reads after
// this one (a conv's saved input, for its weight gradient): the output comes back (act->y, the forward's bits) from the same pass that forms act'
// (batchnorm2d_act_backward_rebuild), so the activation is evaluated once for both, not once to
// rebuild and once to differentiate. dy is consumed: its memory becomes the returned gradient
// when the dtypes allow, else it is freed. act->y stays for the caller, who frees it after that
// backward; the statistics are freed here.
OcrTensor lbn_act_backward_rebuilding_output(OcrCtx *c, LBN *bn, LAct *act, OcrTensor *dy);
// act->y again, a dropped output of lbn_act_forward, by batchnorm2d_act_apply from the saved
// input and statistics (the forward's bits), for readers whose backward runs before this BN's
// (a concat of several such outputs, HGNetV2's aggregation); lbn_act_backward frees it as usual.
// act NULL: bn->y, the dropped output of lbn_forward_rebuildable (lbn_backward frees it).
void lbn_act_output_again(OcrCtx *c, LBN *bn, LAct *act);

// ---- LearnableAffineBlock: y = scale · x + bias with two learned scalars ----------------
typedef struct {
    int op, s, b;
    int inplace;  // lab2 of the last llab_act_forward: it owns y, and x is not kept
    OcrTensor x, y;
} LLab;
void llab_build(OcrBuilder *b, LLab *l, const char *name, float lr_mult);
OcrTensor *llab_forward(OcrCtx *c, LLab *l, const OcrTensor *x);
OcrTensor llab_backward(OcrCtx *c, LLab *l, const OcrTensor *dy, int need_dx);

// ---- LAB → activation → LAB, fused (affine_act_affine_forward / _backward) --------------------
// lab2(act(lab1(x))) in one op pair, for the LearnableRepLayer's tail. All three ops must share
// one dtype (their outputs' values are rounded into it as the unfused ops would store them).
// Memory: the input x (saved by lab1, as llab_forward does) and the output (owned by lab2,
// inplace = 1, freed at the backward); the two inner maps are never stored. The op table records
// all three ops (the first two entries forget the output, whose values are lab2's).
OcrTensor *llab_act_forward(OcrCtx *c, LLab *lab1, LAct *act, LLab *lab2, const OcrTensor *x);
// Backward from dy, the gradient of lab2's output: the four scalar gradients and x's gradient in
// one pass over x and dy, bit-identical to llab_backward, lact_backward and llab_backward on
// recomputed inner maps. Frees the output; returns x's gradient (empty when need_dx is 0).
OcrTensor llab_act_backward(OcrCtx *c, LLab *lab1, LAct *act, LLab *lab2, const OcrTensor *dy, int need_dx);

// ---- linear (weight (IN, OUT)) -------------------------------------------------------------
typedef struct {
    int op, w, b;
    int in, out;
    OcrTensor x, y;  // as LConv
    int xcast;
    ocr_dtype_t in_dtype;
} LLinear;
// Must be set (asserted): winit (not constant 0). Must be set, not checkable: in, out (0 builds
// an empty layer, which a config can ask for: an MLP of dim · mlp_ratio < 1) and attr. Zero:
// bias none, binit constant 0.
typedef struct {
    int in, out;
    int bias;            // 1: a bias parameter (OUT) after the weight
    OcrInit winit, binit;
    OcrParamAttr attr;   // weight and bias
} LLinearSpec;
void llinear_build(OcrBuilder *b, LLinear *l, const char *name, LLinearSpec s);
OcrTensor *llinear_forward(OcrCtx *c, LLinear *l, const OcrTensor *x);
OcrTensor llinear_backward(OcrCtx *c, LLinear *l, const OcrTensor *dy, int need_dx);

// ---- layer norm -----------------------------------------------------------------------------
typedef struct {
    int op, g, b;
    int channels;
    float eps;
    OcrTensor x, y, mean, rstd;
} LLN;
void lln_build(OcrBuilder *b, LLN *l, const char *name, int channels, float eps);
OcrTensor *lln_forward(OcrCtx *c, LLN *l, const OcrTensor *x);
OcrTensor lln_backward(OcrCtx *c, LLN *l, const OcrTensor *dy, int need_dx);

// ---- attention core: qkv (B, T, 3C) -> (B, T, C); optional local window mask ------------
typedef struct {
    int op;
    int heads, dim;
    float scale;
    float attn_drop;
    int local_hk, local_wk;  // 0: global mixer
    int grid_h, grid_w;      // token grid of the last forward (for the local mask)
    uint64_t stream;
    DropoutParams d;
    OcrTensor x, y, probs, mask;  // x: qkv as the op ran on it (autocast, as LConv)
    int xcast;
    ocr_dtype_t in_dtype;
} LAttn;
// Must be set (asserted): dim, heads (dividing dim). Zero: attn_drop none, local_hk/local_wk a
// global mixer.
typedef struct {
    int dim, heads;
    float attn_drop;         // dropout on the attention probabilities
    int local_hk, local_wk;  // the local mixer's window (0: global)
} LAttnSpec;
void lattn_build(OcrBuilder *b, LAttn *l, const char *name, LAttnSpec s);
// grid_h · grid_w must equal T (only used by the local mixer).
OcrTensor *lattn_forward(OcrCtx *c, LAttn *l, const OcrTensor *qkv, int grid_h, int grid_w);
OcrTensor lattn_backward(OcrCtx *c, LAttn *l, const OcrTensor *dy, int need_dx);

// ---- pooling ----------------------------------------------------------------------------------
typedef enum { LPOOL_AVG = 0, LPOOL_MAX, LPOOL_ADAPTIVE } lpool_kind_t;
typedef struct {
    int op;
    lpool_kind_t kind;
    Pool2dParams p;
    int last_kind;  // kind used by the last forward
    OcrTensor x, y;
} LPool;
void lpool_build(OcrBuilder *b, LPool *l, const char *name, lpool_kind_t kind, Pool2dParams p);
// out_h/out_w are used by the adaptive kind.
OcrTensor *lpool_forward(OcrCtx *c, LPool *l, const OcrTensor *x, lpool_kind_t kind, int out_h, int out_w);
OcrTensor lpool_backward(OcrCtx *c, LPool *l, const OcrTensor *dy, int need_dx);
// The text-recognition backbones' last pool (PPLCNetV3/V4, PPHGNetV2), as PaddleOCR writes it:
// F.adaptive_avg_pool2d(x, [1, W/2]) in training, F.avg_pool2d(x, [3, 2]) in inference when the
// map is 3 to 5 rows high (the pool's layer is built with that 3x2 kernel). Releases x.
OcrTensor *lpool_rec_forward(OcrCtx *c, LPool *l, OcrTensor *x);

// ---- dropout and drop path ------------------------------------------------------------------
typedef struct {
    int op;
    float p;
    ocr_dropout_mode_t mode;
    int per_sample;  // drop path
    uint64_t stream;
    int identity;    // the last forward passed x through as a view
    DropoutParams d;
    OcrTensor y;
} LDrop;
void ldrop_build(OcrBuilder *b, LDrop *l, const char *name, float p, ocr_dropout_mode_t mode, int per_sample);
OcrTensor *ldrop_forward(OcrCtx *c, LDrop *l, const OcrTensor *x);
OcrTensor ldrop_backward(OcrCtx *c, LDrop *l, const OcrTensor *dy, int need_dx);

// ---- residual add (backward passes dy through to both inputs) ----------------------------------
typedef struct {
    int op;
    OcrTensor y;
} LAdd;
void ladd_build(OcrBuilder *b, LAdd *l, const char *name);
OcrTensor *ladd_forward(OcrCtx *c, LAdd *l, const OcrTensor *a, const OcrTensor *x);
void ladd_backward(OcrCtx *c, LAdd *l);  // frees the output
// The sum a + x written over one of its operands, buf (a or x: an arena output no backward reads,
// owned by the layer that made it), which the add takes over as its output: that layer's field
// is cleared and its op-table entry forgotten. The bits of ladd_forward (same operand order) and
// one map fewer. Only when ladd_can_reuse(buf): the add's dtype is buf's, and the pass does not
// keep every op's output.
int ladd_can_reuse(const OcrCtx *c, const LAdd *l, const OcrTensor *buf);
OcrTensor *ladd_forward_into(OcrCtx *c, LAdd *l, const OcrTensor *a, const OcrTensor *x, OcrTensor *buf);
// An add computed by another op into a sum it does not own (lbn_forward_accumulate): the op
// table gets its shape and FLOPs, the layer no output (its backward frees nothing).
void ladd_record_fused(OcrCtx *c, LAdd *l, const OcrTensor *sum);

// ---- positional embedding add: x (B, N, C) + pos (1, N, C) ------------------------------------
typedef struct {
    int op, pos;
    OcrTensor y;
} LPosAdd;
void lposadd_build(OcrBuilder *b, LPosAdd *l, const char *name, int tokens, int dim);
OcrTensor *lposadd_forward(OcrCtx *c, LPosAdd *l, const OcrTensor *x);
OcrTensor lposadd_backward(OcrCtx *c, LPosAdd *l, const OcrTensor *dy, int need_dx);

// ---- channel concat (two inputs) ------------------------------------------------------------------
typedef struct {
    int op;
    OcrTensor y;
    int64_t c0, c1;
    ocr_dtype_t t0, t1;  // input dtypes (their gradients take them)
} LConcat;
void lconcat_build(OcrBuilder *b, LConcat *l, const char *name);
OcrTensor *lconcat_forward(OcrCtx *c, LConcat *l, const OcrTensor *a, const OcrTensor *x);
// Returns the two input gradients (either may be skipped).
void lconcat_backward(OcrCtx *c, LConcat *l, const OcrTensor *dy, OcrTensor *da, OcrTensor *db);

// ---- SE gating: y = x · s (s (N, 1, 1, C)) --------------------------------------------------------
typedef struct {
    int op;
    OcrTensor x, s, y;
} LMul;
void lmul_build(OcrBuilder *b, LMul *l, const char *name);
OcrTensor *lmul_forward(OcrCtx *c, LMul *l, const OcrTensor *x, const OcrTensor *s);
void lmul_backward(OcrCtx *c, LMul *l, const OcrTensor *dy, OcrTensor *dx, OcrTensor *ds);

// ---- softmax over the last axis (the CTC head in inference) ----------------------------------------
typedef struct {
    int op;
    OcrTensor y;
} LSoftmax;
void lsoftmax_build(OcrBuilder *b, LSoftmax *l, const char *name);
OcrTensor *lsoftmax_forward(OcrCtx *c, LSoftmax *l, const OcrTensor *x);

#endif

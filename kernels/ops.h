// The op library: one forward and one backward function per op.
//
// Finding an op. Every function the kernel libraries export starts with ocr_ (checked by
// tests/build/check_op_prefix.sh); an op `name` is:
// - ocr_<name>: the public function, declared here (kernels/ctc.h, kernels/input.h for the
//   CTC loss and the input normalisation) with its contract.
// - a row of kernels/op_table.h: its family and the tensors whose device runs it.
//   kernels/dispatch.c expands the table into the ocr_<name> functions.
// - ocr_cpu_<name> in kernels/cpu/<family>.c (declared in kernels/cpu/cpu_ops.h) and
//   ocr_cuda_<name> in kernels/cuda/<family>.cu (declared in kernels/cuda/cuda_ops.h): the two
//   backends' kernels, same file name on both sides. Files without a twin are helpers, not
//   ops, and say so at their top: cpu/cpu_common.c, cpu/isa.c, cpu/onednn.c;
//   cuda/device.cu (devices, streams, scratch, error checks), cuda/cublas_loader.cu and
//   cuda/train_step.cu (the GPU training step's device side).
// - Shared between the backends: kernels/activation_math.h (the activation formulas, compiled
//   by both) and kernels/distill_math.h (the distillation losses' per-element formulas).
//   Composed of other ops, so on either device: kernels/lstm_layer.c.
//
// Conventions (read these before adding an op):
// - Outputs first, then inputs, then parameters. Shapes are in the comment above each pair.
// - Images are NHWC; sequences (B, T, C); a "row" op works on the last dimension.
// - Any float tensor may be f32, f16 or bf16, independently of the others. Low-precision
//   values are computed in fp32 and rounded (nearest even) into the output's dtype, exactly
//   as a GPU stores them; GEMMs and convolutions always accumulate in fp32.
// - Accumulation rule: gradients of weights (dweight, dbias, dgamma, ...) ACCUMULATE
//   (+=), so a parameter used twice just works and the trainer zeroes them once per step.
//   Gradients of activations (dinp) are ASSIGNED (=). Any gradient output may be NULL when
//   the caller does not need it.
// - Ops dispatch on the tensors' device. Shape/dtype mismatches are programming errors and
//   abort with a message (OCR_ASSERT); ops do not return a status.
// - CPU: OpenMP across cores with static partitions, so results are deterministic for a
//   fixed thread count. Scratch comes from the workspace (core/memory.h).
#ifndef OCR_KERNELS_OPS_H
#define OCR_KERNELS_OPS_H

#include <stdint.h>

#include "core/tensor.h"

// ---- GEMM, linear, batched matmul --------------------------------------------------
// c (M, N) = alpha · op(a) · op(b) + beta · c, op(x) = x or xᵀ; a is (M, K) or (K, M), b is
// (K, N) or (N, K). beta = 0 ignores c's previous contents (NaN included).
void ocr_gemm(OcrTensor *c, const OcrTensor *a, const OcrTensor *b, int trans_a, int trans_b, float alpha, float beta);

// out (..., OUT) = inp (..., IN) · weight (IN, OUT) + bias (OUT). Weight is stored (IN, OUT)
// as in Paddle. bias may be NULL.
void ocr_linear_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *weight, const OcrTensor *bias);
// dinp (..., IN) = dout · weightᵀ; dweight (IN, OUT) += inpᵀ · dout; dbias (OUT) += Σ dout.
void ocr_linear_backward(OcrTensor *dinp, OcrTensor *dweight, OcrTensor *dbias, const OcrTensor *dout,
                         const OcrTensor *inp, const OcrTensor *weight);

// out (B, M, N) = alpha · op(a) · op(b) per batch entry; a (B, M, K) or (B, K, M); b (B, K, N) or (B, N, K).
void ocr_matmul_batched_forward(OcrTensor *out, const OcrTensor *a, const OcrTensor *b, int trans_a, int trans_b,
                                float alpha);
// da, db assigned (activation gradients).
void ocr_matmul_batched_backward(OcrTensor *da, OcrTensor *db, const OcrTensor *dout, const OcrTensor *a,
                                 const OcrTensor *b, int trans_a, int trans_b, float alpha);

// ---- convolution --------------------------------------------------------------------
typedef struct {
    int stride_h, stride_w;
    int pad_h, pad_w;  // zero padding on both sides
    int groups;        // 1 = dense; == in channels == out channels: depthwise
} Conv2dParams;

// Output spatial size: (H + 2·pad_h − KH) / stride_h + 1 (floor).
int ocr_conv2d_out_size(int in_size, int kernel, int stride, int pad);

// out (N, Ho, Wo, OC) = conv(inp (N, H, W, C), weight (OC, KH, KW, C / groups)) + bias (OC).
// Weight layout is "KRSC" (cuDNN's NHWC filter layout). bias may be NULL. General
// convolutions use im2col + GEMM; depthwise (groups == C == OC) runs direct loops.
void ocr_conv2d_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *weight, const OcrTensor *bias,
                        Conv2dParams p);
// dinp assigned; dweight, dbias accumulated.
void ocr_conv2d_backward(OcrTensor *dinp, OcrTensor *dweight, OcrTensor *dbias, const OcrTensor *dout,
                         const OcrTensor *inp, const OcrTensor *weight, Conv2dParams p);

// ---- normalisation -------------------------------------------------------------------
// Batch norm over N·H·W per channel of inp (N, H, W, C). Training: batch mean and biased
// variance normalise; running = momentum · running + (1 − momentum) · batch (Paddle's
// convention, momentum 0.9); the running variance takes the biased batch variance, as
// Paddle's kernel does (PyTorch would take the unbiased one). Inference: running statistics normalise and nothing
// updates. save_mean / save_rstd (C, f32) receive what was used (running ones in inference)
// for the backward. gamma, beta, running_* are f32 (C).
void ocr_batchnorm2d_forward(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd, OcrTensor *running_mean,
                             OcrTensor *running_var, const OcrTensor *inp, const OcrTensor *gamma,
                             const OcrTensor *beta, float momentum, float eps, int training);
// out += bn(inp): batchnorm2d_forward's statistics, running update and value, the value rounded
// into out's dtype and added to out's element (rounded once more): the bits of batchnorm2d_forward
// into a new tensor of out's dtype followed by ocr_accumulate(out, it), without that tensor's write
// and read. The LearnableRepLayer adds its branches' batch norms into their sum this way.
// Per-rank statistics only (no synchronised variant).
void ocr_batchnorm2d_forward_accumulate(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd,
                                        OcrTensor *running_mean, OcrTensor *running_var, const OcrTensor *inp,
                                        const OcrTensor *gamma, const OcrTensor *beta, float momentum, float eps,
                                        int training);
// training = 1: gradient through the batch statistics; 0: through fixed statistics.
// Frozen BN (Global.freeze_norm, fine-tuning) is training = 0 in both calls of a training pass:
// the running statistics normalise and stay untouched, the output is the eval pass's bit for
// bit, and the backward treats them as constants while dgamma/dbeta still accumulate. The same
// holds for batchnorm2d_act_forward / _backward below and for the CUDA twins.
void ocr_batchnorm2d_backward(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                              const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *save_mean,
                              const OcrTensor *save_rstd, int training);

// Layer norm over the last dimension C of inp (..., C); mean, rstd (rows) f32; gamma, beta (C) f32.
void ocr_layernorm_forward(OcrTensor *out, OcrTensor *mean, OcrTensor *rstd, const OcrTensor *inp,
                           const OcrTensor *gamma, const OcrTensor *beta, float eps);
void ocr_layernorm_backward(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                            const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *mean, const OcrTensor *rstd);

// ---- activations ----------------------------------------------------------------------
typedef enum {
    OCR_ACT_NONE = 0,
    OCR_ACT_RELU,
    OCR_ACT_HARDSWISH,    // x · clip(x + 3, 0, 6) / 6
    OCR_ACT_HARDSIGMOID,  // clip(x · 0.1666667 + 0.5, 0, 1)  (Paddle's slope constant)
    OCR_ACT_SWISH,        // x · sigmoid(x)
    OCR_ACT_GELU,         // exact: x · Φ(x) with erf
    OCR_ACT_COUNT
} ocr_activation_t;
const char *ocr_activation_name(ocr_activation_t act);
int ocr_activation_from_name(const char *name, ocr_activation_t *out);

// out = act(inp), any shape; out may alias inp.
void ocr_activation_forward(OcrTensor *out, const OcrTensor *inp, ocr_activation_t act);
// dinp = dout · act'(inp); dinp may alias dout.
void ocr_activation_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *inp, ocr_activation_t act);

// ---- batch norm + activation, fused --------------------------------------------------------
// out (N, H, W, C) = act(bn(inp)): ocr_batchnorm2d_forward (the same statistics, save_mean /
// save_rstd, running update and per-element expression) followed by activation_forward, in
// one pass over the output after the statistics pass. The pre-activation value is rounded to
// out's dtype before the activation, as the unfused pair storing BN's output there does, so
// out and every statistic are bit-identical to batchnorm2d_forward into out followed by
// activation_forward in place over it. save_scale (C, f32) receives the per-channel scale the
// value was computed with, a = gamma·rstd rounded once from double (the f32 save_rstd cannot
// rebuild it exactly); the value is (inp − save_mean)·save_scale + beta. Any save_* may be NULL.
void ocr_batchnorm2d_act_forward(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd, OcrTensor *save_scale,
                                 OcrTensor *running_mean, OcrTensor *running_var, const OcrTensor *inp,
                                 const OcrTensor *gamma, const OcrTensor *beta, ocr_activation_t act, float momentum,
                                 float eps, int training);
// out (N, H, W, C) = act(value), value = (inp − save_mean)·save_scale + beta rounded to out's
// dtype: batchnorm2d_act_forward's output pass alone, forward-only, from the save_mean and
// save_scale (f32) that forward stored. With the forward's inp, beta, act and out dtype the
// result is bit-identical to that forward's out (training or inference alike), so a training
// pass can drop the output and rebuild it when a later backward reads it. beta may be NULL (0).
void ocr_batchnorm2d_act_apply(OcrTensor *out, const OcrTensor *inp, const OcrTensor *save_mean,
                               const OcrTensor *save_scale, const OcrTensor *beta, ocr_activation_t act);
// Backward of batchnorm2d_act_forward from dout (N, H, W, C), the gradient of the ACTIVATION
// output, without materialising BN's output: per element the pre-activation value is rebuilt
// from inp, save_mean, save_scale (both f32) and beta with the forward's expression, rounded to
// mid, then g = dout · act'(value) is rounded to mid and goes through batchnorm2d_backward's
// formulas (save_mean / save_rstd as there). mid is the dtype the unfused pair stores BN's
// output and the activation's input gradient in (the forward's out dtype); the results are then
// bit-identical to recomputing BN's output into a mid tensor, activation_backward into a mid
// tensor and batchnorm2d_backward. act = NONE is ocr_batchnorm2d_backward (dout used as it is;
// save_scale may be NULL). dinp assigned; dgamma, dbeta accumulated.
void ocr_batchnorm2d_act_backward(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                                  const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta,
                                  const OcrTensor *save_mean, const OcrTensor *save_rstd, const OcrTensor *save_scale,
                                  ocr_activation_t act, ocr_dtype_t mid, int training);

// ---- synchronised batch norm (data parallelism) -----------------------------------------------
// With N ranks each normalising its own B samples, a BN's batch statistics are those of B
// samples (PaddleOCR's default). Synchronised BN (Global.use_sync_bn, PyTorch's SyncBatchNorm)
// normalises every rank with the statistics of all N·B samples, so N ranks of batch B compute
// what one process of batch N·B would. The kernels know nothing of the transport: the caller
// passes `sum`, which replaces n doubles by their sum over the world, in place (host memory for
// CPU tensors; device memory for CUDA tensors, ordered on the op's stream) and returns 0, or
// nonzero with the error set. Every rank must make the same calls in the same order: the
// forward sums in training mode, the backward in training mode when dinp is wanted.
//   forward:  (count, count·mean) per rank, then Σ count·var + count·(mean − world mean)²
//             (the pairwise combination of means and variances as two sums: no raw second
//             moment, so nothing cancels when |mean| >> std);
//   backward: (count, Σ g, Σ g·(x − mean)) for dinp's coefficients; dgamma and dbeta take this
//             rank's own sums, since the gradient all-reduce adds the ranks' parameter
//             gradients afterwards (the world's sums there would count every rank N times).
typedef struct {
    int (*sum)(void *user, double *v, int64_t n);
    void *user;
} OcrBnSync;

// batchnorm2d_act_forward / _backward with the statistics of the whole world when sync is not
// NULL and the op is in training mode (NULL: exactly the functions above). act = OCR_ACT_NONE
// is plain batch norm (save_scale may then be NULL).
void ocr_batchnorm2d_act_forward_sync(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd, OcrTensor *save_scale,
                                      OcrTensor *running_mean, OcrTensor *running_var, const OcrTensor *inp,
                                      const OcrTensor *gamma, const OcrTensor *beta, ocr_activation_t act,
                                      float momentum, float eps, int training, const OcrBnSync *sync);
void ocr_batchnorm2d_act_backward_sync(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                                       const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta,
                                       const OcrTensor *save_mean, const OcrTensor *save_rstd,
                                       const OcrTensor *save_scale, ocr_activation_t act, ocr_dtype_t mid, int training,
                                       const OcrBnSync *sync);
// batchnorm2d_act_backward_sync (mid = out's dtype) that also writes out = act(value), the
// forward's output: bit-identical to batchnorm2d_act_apply with the same arguments. A training
// pass that dropped that output and needs it again after this backward has its gradient (the
// next convolution's weight gradient reads it, its input gradient is dout) gets it from the pass
// that forms act'(value) anyway: the activation is evaluated once, not once per op (GELU's
// exponential and Φ serve both). out must not share memory with the other tensors; dinp may be
// dout's memory, as in the backward.
void ocr_batchnorm2d_act_backward_rebuild(OcrTensor *out, OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta,
                                          const OcrTensor *dout, const OcrTensor *inp, const OcrTensor *gamma,
                                          const OcrTensor *beta, const OcrTensor *save_mean, const OcrTensor *save_rstd,
                                          const OcrTensor *save_scale, ocr_activation_t act, int training,
                                          const OcrBnSync *sync);

// ---- pooling ---------------------------------------------------------------------------
typedef struct {
    int kernel_h, kernel_w;
    int stride_h, stride_w;
    int pad_h, pad_w;  // average pools exclude padding from the divisor (Paddle exclusive=True)
} Pool2dParams;

// out (N, Ho, Wo, C) from inp (N, H, W, C).
void ocr_avgpool2d_forward(OcrTensor *out, const OcrTensor *inp, Pool2dParams p);
void ocr_avgpool2d_backward(OcrTensor *dinp, const OcrTensor *dout, Pool2dParams p);
void ocr_maxpool2d_forward(OcrTensor *out, const OcrTensor *inp, Pool2dParams p);
// Gradient goes to the first maximum of each window (recomputed from inp).
void ocr_maxpool2d_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *inp, Pool2dParams p);
// Adaptive average: output size from out's shape; bin i covers [floor(i·H/Ho), ceil((i+1)·H/Ho)).
// Global average pooling is the Ho = Wo = 1 case.
void ocr_adaptive_avgpool2d_forward(OcrTensor *out, const OcrTensor *inp);
void ocr_adaptive_avgpool2d_backward(OcrTensor *dinp, const OcrTensor *dout);

// ---- elementwise and layout ------------------------------------------------------------
// SE gating: out (N, H, W, C) = inp (N, H, W, C) · scale (N, 1, 1, C).
void ocr_channel_scale_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *scale);
// dinp, dscale assigned.
void ocr_channel_scale_backward(OcrTensor *dinp, OcrTensor *dscale, const OcrTensor *dout, const OcrTensor *inp,
                                const OcrTensor *scale);

// out = a + b (same shapes); out may alias a or b.
void ocr_add_forward(OcrTensor *out, const OcrTensor *a, const OcrTensor *b);
// da = dout, db = dout (assigned; either may be NULL).
void ocr_add_backward(OcrTensor *da, OcrTensor *db, const OcrTensor *dout);
// dst += src (same shape): residual paths and gradient accumulation across branches.
void ocr_accumulate(OcrTensor *dst, const OcrTensor *src);
// out = alpha · inp (any dtypes, same shape); out may alias inp.
void ocr_scale_forward(OcrTensor *out, const OcrTensor *inp, float alpha);
// Sets every element to zero (any dtype, any device).
void ocr_zero_tensor(OcrTensor *t);

// LearnableAffineBlock (PPLCNetV3): out = scale · inp + bias, any shape, with scale and bias
// 1-element tensors on the same device (read there: no host round trip). Two roundings, as
// Paddle's `scale * x + bias` (the product is not fused into the add). out may alias inp.
void ocr_scalar_affine_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *scale, const OcrTensor *bias);
// dinp = scale · dout (assigned); dscale += Σ dout·inp, dbias += Σ dout (1 element each,
// accumulated). The sums run in double over fixed chunks of 2048 elements in a fixed order
// (see kernels/cpu/affine.c), so they do not depend on the thread count or the device.
void ocr_scalar_affine_backward(OcrTensor *dinp, OcrTensor *dscale, OcrTensor *dbias, const OcrTensor *dout,
                                const OcrTensor *inp, const OcrTensor *scale);
// The LearnableRepLayer's tail in one pass: out = s2·act(s1·inp + b1) + b2, the bits of
// scalar_affine_forward into a tensor of out's dtype, activation_forward in place over it and
// scalar_affine_forward in place again (each intermediate rounded into out's dtype). out may
// alias inp. All four scalars are 1-element tensors on the op's device.
void ocr_affine_act_affine_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *s1, const OcrTensor *b1,
                                   ocr_activation_t act, const OcrTensor *s2, const OcrTensor *b2);
// Its backward from dout, recomputing a = s1·inp + b1 and h = act(a) per chunk (rounded into mid,
// the forward's out dtype): ds2 += Σ dout·h, db2 += Σ dout, ds1 += Σ da·inp, db1 += Σ da and
// dinp = s1·da (assigned) with da = mid(act'(a)·mid(s2·dout)) — the bits of scalar_affine_backward,
// activation_backward and scalar_affine_backward in a row with mid-dtype gradients between
// them, the sums in scalar_affine's fixed shape. Any gradient may be NULL; dinp may alias dout.
void ocr_affine_act_affine_backward(OcrTensor *dinp, OcrTensor *ds1, OcrTensor *db1, OcrTensor *ds2, OcrTensor *db2,
                                    const OcrTensor *dout, const OcrTensor *inp, const OcrTensor *s1,
                                    const OcrTensor *b1, ocr_activation_t act, const OcrTensor *s2, ocr_dtype_t mid);

// A positional embedding added to every batch entry: out (B, ...) = inp (B, ...) + pos (1, ...)
// (SVTRNet: (B, T, C) + (1, T, C)). out may alias inp.
void ocr_batch_broadcast_add_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *pos);
// dinp = dout (assigned; may be NULL); dpos (1, ...) += Σ_b dout[b] (summed in double in
// batch order, accumulated).
void ocr_batch_broadcast_add_backward(OcrTensor *dinp, OcrTensor *dpos, const OcrTensor *dout);

// Concatenation along the last (channel) dimension: out (..., ΣC_i) from inputs (..., C_i).
void ocr_concat_forward(OcrTensor *out, const OcrTensor *const *inputs, int count);
// Splits dout back into the dinputs (assigned; NULL entries skipped).
void ocr_concat_backward(OcrTensor *const *dinputs, int count, const OcrTensor *dout);

// out = inp with dimensions permuted: out.shape[i] = inp.shape[perm[i]] (up to 4 dims).
// Reshapes between NHWC maps and (B, T, C) sequences are free (ocr_tensor_reshape); this op
// is for real transposes.
void ocr_permute_forward(OcrTensor *out, const OcrTensor *inp, const int *perm);
void ocr_permute_backward(OcrTensor *dinp, const OcrTensor *dout, const int *perm);

// out (N, Ho, Wo, C) = inp (N, H, W, C) placed at row `top`, column `left`, `value` elsewhere
// (Ho >= top + H, Wo >= left + W; the other sides' padding is what the shapes leave). One float
// dtype for both; elements are copied as raw bits. Paddle's padding="SAME" of even kernels.
void ocr_pad2d_forward(OcrTensor *out, const OcrTensor *inp, int top, int left, float value);
// dinp (assigned) = the (H, W) window of dout at (top, left).
void ocr_pad2d_backward(OcrTensor *dinp, const OcrTensor *dout, int top, int left);

// ---- softmax, attention ----------------------------------------------------------------
// Over the last dimension; out may alias inp.
void ocr_softmax_forward(OcrTensor *out, const OcrTensor *inp);
// dinp = out · (dout − Σ dout·out).
void ocr_softmax_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *out);
void ocr_log_softmax_forward(OcrTensor *out, const OcrTensor *inp);
// dinp = dout − exp(out) · Σ dout.
void ocr_log_softmax_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *out);

// Dropout configuration shared by the dropout ops and the attention op. The keep mask of
// element i is uniform(seed, stream, offset + i) >= p, regenerated in the backward.
typedef enum {
    OCR_DROPOUT_UPSCALE_IN_TRAIN = 0,  // train: x·mask/(1−p); infer: x
    OCR_DROPOUT_DOWNSCALE_IN_INFER,    // train: x·mask;       infer: x·(1−p)
} ocr_dropout_mode_t;
typedef struct {
    float p;  // drop probability; 0 disables
    ocr_dropout_mode_t mode;
    int training;
    uint64_t seed, stream, offset;
} DropoutParams;

// Multi-head self-attention core. qkv (B, T, 3·C) is the output of Linear(C, 3C), laid out
// [q | k | v] along the last axis, each as (heads, head_dim). For each batch and head:
// S = scale · q·kᵀ + mask; P = softmax(S); P' = dropout(P); o = P'·v. out (B, T, C) holds
// the heads concatenated. probs (B, heads, T, T) receives P (pre-dropout) for the backward.
// mask (T, T) f32 is additive (0 or −inf) and may be NULL. Softmax runs in fp32.
void ocr_attention_forward(OcrTensor *out, OcrTensor *probs, const OcrTensor *qkv, const OcrTensor *mask,
                           int num_heads, float scale, DropoutParams dropout);
// dqkv (B, T, 3·C) assigned.
void ocr_attention_backward(OcrTensor *dqkv, const OcrTensor *dout, const OcrTensor *qkv, const OcrTensor *probs,
                            int num_heads, float scale, DropoutParams dropout);
// Multi-head cross-attention core (NRTR's decoder reading the encoder's memory): q (B, Tq, C), kv
// (B, Tk, 2·C) = [k | v] along the last axis, each (heads, head_dim); no mask. Per batch and head
// as above with S (Tq, Tk); out (B, Tq, C); probs (B, heads, Tq, Tk) receives P (pre-dropout).
// Dropout draw of P element (b, h, i, j): offset + ((b·heads + h)·Tq + i)·Tk + j.
void ocr_attention_cross_forward(OcrTensor *out, OcrTensor *probs, const OcrTensor *q, const OcrTensor *kv,
                                 int num_heads, float scale, DropoutParams dropout);
// dq (B, Tq, C) and dkv (B, Tk, 2·C) assigned.
void ocr_attention_cross_backward(OcrTensor *dq, OcrTensor *dkv, const OcrTensor *dout, const OcrTensor *q,
                                  const OcrTensor *kv, const OcrTensor *probs, int num_heads, float scale,
                                  DropoutParams dropout);

// The additive mask (T, T) f32, T = grid_h · grid_w, of PaddleOCR's local mixer: query (h, w)
// sees the keys in rows h − window_h/2 .. h + window_h − 1 − window_h/2 and columns
// w − window_w/2 .. w + window_w − 1 − window_w/2 (0 there, −inf elsewhere). Written on the
// mask's device, so a model on the GPU builds it without a host copy.
void ocr_attention_local_mask(OcrTensor *mask, int grid_h, int grid_w, int window_h, int window_w);

// ---- embedding lookup, cross-entropy (MultiHead's attention branches) --------------------------
// out (..., D) = table[ids] (V, D) row by row; ids (...) int32 on the tensors' device. A row
// whose id is padding_idx is zero (padding_idx < 0: none), as Paddle's nn.Embedding. Ids must
// lie in [0, V): the callers build them from encoded labels (the CPU asserts; the GPU writes
// zeros for an id outside and the backward skips it).
void ocr_embedding_forward(OcrTensor *out, const OcrTensor *ids, const OcrTensor *table, int padding_idx);
// dtable (V, D) += Σ over the rows n with ids[n] = v of dout[n], for v != padding_idx (that
// row gets no gradient). Each column is summed in row order: deterministic on both devices.
void ocr_embedding_backward(OcrTensor *dtable, const OcrTensor *dout, const OcrTensor *ids, int padding_idx);

typedef struct {
    float smoothing;   // ε: the target class gets 1 − ε, every other class ε/(C − 1) (NRTRLoss: 0.1)
    int ignore_index;  // rows whose target is this contribute nothing (< 0: none)
    float grad_scale;  // the backward multiplies the gradient by this (the AMP loss scale)
} CrossEntropyParams;
// Softmax cross-entropy over rows of logits (N, C), any float dtype, computed in fp32 with
// the log-sum-exp in double; targets (N) int32 in [0, C) (or ignore_index). losses (N) f32
// (may be NULL): row n's −Σ_j q_j · log_softmax(logits_n)_j, 0 for an ignored row. loss (1) f32
// (may be NULL): the mean over the rows not ignored (0 when every row is), summed in double in
// row order. counted (1) int32 (may be NULL): the number of such rows.
void ocr_cross_entropy_forward(OcrTensor *losses, OcrTensor *loss, OcrTensor *counted, const OcrTensor *logits,
                               const OcrTensor *targets, CrossEntropyParams p);
// dlogits (N, C) = grad_scale / count · (softmax(logits) − q) for the rows not ignored, 0 for the
// others (assigned): the gradient of the mean loss.
void ocr_cross_entropy_backward(OcrTensor *dlogits, const OcrTensor *logits, const OcrTensor *targets,
                                CrossEntropyParams p);

// ---- distillation losses (PaddleOCR's ppocr/losses: DML, KL, CTC-logit KL, DKD, distance) ------
// The losses a distillation run adds between two networks' outputs; docs/DISTILLATION.md maps each
// to its PaddleOCR class and config key. Every loss reads its logits in fp32 (any float dtype) and
// computes softmax, logs and every sum in double whatever the AMP level (op type "distill_loss",
// black in amp/policy.c), so the only roundings are the f32 loss and the gradient's dtype. The
// formulas, the small epsilons and the reductions are PaddleOCR's, quirks included (noted per op).
// Rows are the last dimension; B is the first dimension (PaddleOCR's "batch mean" divides by it,
// not by the row count, where it says so). loss (1 or B values) is f32 on the op's device. A
// backward computes the gradient of grad_scale · loss (grad_scale: the loss weight times the AMP
// loss scale), assigned into any float dtype; any gradient may be NULL.

// DistillationDMLLoss (DMLLoss, act "softmax"): mutual learning between two networks' logits
// x1, x2 (B, ..., C), both trainable. With q = softmax(x) + 1e-10:
//   use_log = 1 (recognition): loss (1) = Σ_rows Σ_j [q2·(log(q2 + 1e-10) − log q1) +
//                                q1·(log(q1 + 1e-10) − log q2)] / (2·B);
//   use_log = 0 (KLJSLoss "kl", detection): e = ½[q2·log((q2 + 1e-5)/(q1 + 1e-5) + 1e-5) +
//                                q1·log((q1 + 1e-5)/(q2 + 1e-5) + 1e-5)], loss (B) = per-sample
//                                mean of e (x must be 3-D); the backward is that of Σ_b loss_b.
typedef struct {
    int use_log;
    float grad_scale;
} DmlLossParams;
void ocr_dml_loss_forward(OcrTensor *loss, const OcrTensor *x1, const OcrTensor *x2, DmlLossParams p);
// dx1, dx2 (B, ..., C): the gradients through both softmaxes (each side's q is both a target
// and a prediction, as in PaddleOCR, where neither is detached).
void ocr_dml_loss_backward(OcrTensor *dx1, OcrTensor *dx2, const OcrTensor *x1, const OcrTensor *x2, DmlLossParams p);

// DistillationKLDivLoss (KLDivLoss): KL(teacher || student) on logits s, t (B, ..., C), with
// ps = softmax(s/T), pt = softmax(t/T): a row's value is Σ_j pt_j·(log(pt_j + 1e-10) − log ps_j);
// loss (1) = T²·Σ_rows / B (no mask) or T²·mean over the rows whose targets (rows, int32) entry is
// not pad_id (pad_id >= 0: PaddleOCR's NRTR non-pad mask; 0 when every row is padding, where
// PaddleOCR's empty mean is NaN). PaddleOCR has no temperature: T = 1 is its loss exactly.
typedef struct {
    float temperature;
    int pad_id;  // < 0: no mask (targets may be NULL)
    float grad_scale;
} KlDivLossParams;
void ocr_kl_div_loss_forward(OcrTensor *loss, const OcrTensor *student, const OcrTensor *teacher,
                             const OcrTensor *targets, KlDivLossParams p);
// dstudent (B, ..., C) only: the teacher is a constant.
void ocr_kl_div_loss_backward(OcrTensor *dstudent, const OcrTensor *student, const OcrTensor *teacher,
                              const OcrTensor *targets, KlDivLossParams p);

// DistillCTCLogits (KLCTCLogits, mode "mean", PP-OCRv4): the CTC heads' logits s, t (B, L, C).
// The blank column's logit is NEGATED (PaddleOCR multiplies it by −1, its "blank mask"), then
// S = mean over the L steps of softmax(s'/T), P likewise for t (T = 0.5 there), and
// loss (1) = Σ_b Σ_c P·log((P + 1e-6)/(S + 1e-6) + 1e-6) / B (no T² factor).
typedef struct {
    float temperature;  // PaddleOCR: 0.5
    int blank;          // the negated column (PaddleOCR: 0); < 0: none
    float grad_scale;
} CtcLogitsKlParams;
void ocr_ctc_logits_kl_forward(OcrTensor *loss, const OcrTensor *student, const OcrTensor *teacher,
                               CtcLogitsKlParams p);
// dstudent (B, L, C) only (the teacher is frozen in PP-OCRv4's config).
void ocr_ctc_logits_kl_backward(OcrTensor *dstudent, const OcrTensor *student, const OcrTensor *teacher,
                                CtcLogitsKlParams p);

// DistillationDKDLoss (DKDLoss, decoupled KD on the NRTR head): per row n of s, t (N = rows, C)
// with target g = targets[n] (int32 in [0, C)), ps = softmax(s/T), pt = softmax(t/T):
//   TCKD_n = KL of the binary split [p_g, Σ_{j≠g} p_j] (teacher || student), +1e-10 in the
//            teacher's log;
//   NCKD_n = KL(pt2 || ps2), p2 = softmax(x/T − 1000·onehot(g)) (PaddleOCR's way of removing the
//            target class), +1e-10 in the teacher's log;
//   loss (1) = T²·(α·mean_n TCKD_n + β·mean_n NCKD_n), the mean over every row (pad_id < 0:
//   PaddleOCR, whose DKDLoss receives the non-pad mask and does not use it) or over the rows
//   whose target is not pad_id (0 when none is).
typedef struct {
    float temperature, alpha, beta;
    int pad_id;
    float grad_scale;
} DkdLossParams;
void ocr_dkd_loss_forward(OcrTensor *loss, const OcrTensor *student, const OcrTensor *teacher,
                          const OcrTensor *targets, DkdLossParams p);
// dstudent (N, C) only (PP-OCRv4's teacher is frozen).
void ocr_dkd_loss_backward(OcrTensor *dstudent, const OcrTensor *student, const OcrTensor *teacher,
                           const OcrTensor *targets, DkdLossParams p);

// DistillationDistanceLoss (DistanceLoss: Paddle's MSELoss / L1Loss / SmoothL1Loss, reduction
// "mean"): loss (1) = mean over every element of f(x − y), x, y any equal shapes (the backbone
// features for PP-OCRv3). l2: d²; l1: |d|; smooth_l1: ½d² when |d| < delta, else
// delta·(|d| − ½delta) (Paddle's form, delta 1.0 by default).
typedef enum { OCR_DISTANCE_L2 = 0, OCR_DISTANCE_L1, OCR_DISTANCE_SMOOTH_L1 } ocr_distance_mode_t;
typedef struct {
    ocr_distance_mode_t mode;
    float delta;
    float grad_scale;
} DistanceLossParams;
void ocr_distance_loss_forward(OcrTensor *loss, const OcrTensor *x, const OcrTensor *y, DistanceLossParams p);
// dx = grad_scale·f'(x − y)/n, dy = −dx (both networks trainable in PP-OCRv3; |d|' at 0 is 0).
void ocr_distance_loss_backward(OcrTensor *dx, OcrTensor *dy, const OcrTensor *x, const OcrTensor *y,
                                DistanceLossParams p);

// ---- LSTM cell (SAR's encoder and decoder; Paddle's nn.LSTM step) ------------------------------
// The elementwise part of one LSTM step; the GEMMs are the caller's linears: gates (B, 4H) =
// x·W_ihᵀ + b_ih + h_prev·W_hhᵀ + b_hh, laid out [i | f | g | o] (Paddle's gate order).
// c (B, H) = σ(f)·c_prev + σ(i)·tanh(g); h (B, H) = σ(o)·tanh(c). The nonlinearities and the
// cell update run in fp32 whatever the storage dtypes; c_prev may be NULL (a zero state).
void ocr_lstm_cell_forward(OcrTensor *h, OcrTensor *c, const OcrTensor *gates, const OcrTensor *c_prev);
// From dh (B, H) and dc (B, H), the gradients of this step's h and c from later steps (dc may be
// NULL: zero), recomputing the activations from gates and c_prev: dgates (B, 4H) and dc_prev
// (B, H), both assigned (either may be NULL).
void ocr_lstm_cell_backward(OcrTensor *dgates, OcrTensor *dc_prev, const OcrTensor *dh, const OcrTensor *dc,
                            const OcrTensor *gates, const OcrTensor *c_prev);

// ---- dropout, drop path -----------------------------------------------------------------
void ocr_dropout_forward(OcrTensor *out, const OcrTensor *inp, DropoutParams d);
void ocr_dropout_backward(OcrTensor *dinp, const OcrTensor *dout, DropoutParams d);
// Drop path (stochastic depth): per sample (first dimension) keep with 1 − p and scale by
// 1/(1 − p) in training; identity in inference. Sample n's keep draw is index offset + n.
void ocr_droppath_forward(OcrTensor *out, const OcrTensor *inp, DropoutParams d);
void ocr_droppath_backward(OcrTensor *dinp, const OcrTensor *dout, DropoutParams d);

// ---- casts and AMP support --------------------------------------------------------------
// Converts between f32, f16 and bf16 (same shape). The backward of a cast is a cast back.
void ocr_cast_forward(OcrTensor *out, const OcrTensor *inp);
void ocr_cast_backward(OcrTensor *dinp, const OcrTensor *dout);

// One fused pass over a list of gradient tensors: multiplies each by inv_scale in place
// and finds non-finite values. Per tensor (arrays may be NULL): amax[i] = max |g| after
// unscaling over the finite values, nonfinite[i] = 1 when tensor i held inf/NaN.
// Returns 1 when any value was inf or NaN.
int ocr_unscale_and_check(OcrTensor *const *grads, int count, float inv_scale, float *amax, int *nonfinite);

typedef struct {
    float lr;            // already multiplied by the parameter's lr multiplier
    float beta1, beta2;
    float eps;
    float weight_decay;  // this parameter's decay coefficient
    int decoupled;       // 0: L2 added to the gradient (Adam + L2, Paddle's regularizer); 1: AdamW
    int64_t step;        // 1-based step for bias correction
    float grad_scale;    // gradients are multiplied by this first (1 = already unscaled)
    // O2 with bf16 working weights: round master -> param stochastically with this seed
    // (stream = tensor index); 0 = round to nearest even. Draws depend only on (seed, stream,
    // element index), so the caller must change the seed every step (e.g. hash(base, step)).
    uint64_t stochastic_round_seed;
    uint64_t stochastic_round_stream;
} AdamParams;

// Adam/AdamW on one tensor. With master (f32) non-NULL (AMP O2) the update is applied to
// master and param (f16/bf16) receives the rounded result; otherwise param (f32) is
// updated in place. m, v are f32. grad may be any float dtype.
// m̂ = m/(1−β1^t), v̂ = v/(1−β2^t), w −= lr · m̂ / (√v̂ + ε)  (equivalent to Paddle's form).
void ocr_adam_update(OcrTensor *param, OcrTensor *master, OcrTensor *m, OcrTensor *v, const OcrTensor *grad,
                     AdamParams p);

// sqrt(Σ over all tensors of Σ g²), accumulated in double.
double ocr_grad_global_norm(OcrTensor *const *grads, int count);
// When the global norm exceeds max_norm, scales every gradient by max_norm / (norm + 1e-6).
// Returns the norm before clipping.
double ocr_clip_grad_global_norm(OcrTensor *const *grads, int count, float max_norm);

// ---- memory movement ------------------------------------------------------------------------
// Copies `bytes` from src (on src_device) to dst (on dst_device), any pair of devices. CPU to
// CPU is memcpy. A copy that touches a CUDA device is enqueued on that device's current stream
// (the destination's when both are devices), so it follows the work enqueued before it; it
// waits for completion when one side is host memory (the host buffer may be reused or read on
// return) and returns at once for device-to-device copies. A CUDA failure aborts.
void ocr_copy_bytes(ocr_device_t dst_device, void *dst, ocr_device_t src_device, const void *src, size_t bytes);

// ---- LSTM layer (SAR's encoder and decoder: one layer of Paddle's nn.LSTM) ------------------------
// Forward direction, zero initial state, time-major: x (T, B, I) → y (T, B, H). w_ih (4H, I),
// w_hh (4H, H), b_ih, b_hh (4H) in Paddle's layout (weight_ih_l{k} etc.), gate order i, f, g, o.
// gates (T, B, 4H) and cells (T, B, H) receive the pre-activations and cell states for the
// backward. Composed of gemm, batch_broadcast_add and lstm_cell (runs on the tensors' device);
// the nonlinearities run in fp32 (lstm_cell).
void ocr_lstm_layer_forward(OcrTensor *y, OcrTensor *gates, OcrTensor *cells, const OcrTensor *x, const OcrTensor *w_ih,
                            const OcrTensor *w_hh, const OcrTensor *b_ih, const OcrTensor *b_hh);
// Backpropagation through time from dy (T, B, H): dx (T, B, I) assigned (may be NULL); dw_ih,
// dw_hh, db_ih, db_hh accumulated (each may be NULL). dgates (T, B, 4H) and state (3, B, H, f32)
// are scratch the caller provides (dgates holds every step's gate gradient on return).
void ocr_lstm_layer_backward(OcrTensor *dx, OcrTensor *dw_ih, OcrTensor *dw_hh, OcrTensor *db_ih, OcrTensor *db_hh,
                             OcrTensor *dgates, OcrTensor *state, const OcrTensor *dy, const OcrTensor *x,
                             const OcrTensor *y, const OcrTensor *gates, const OcrTensor *cells, const OcrTensor *w_ih,
                             const OcrTensor *w_hh);

// ---- SAR's 2-D attention score (ParallelSARDecoder._2d_attention) --------------------------------
// scores (B, T, P) f32 = Σ_d w[d]·tanh(key[b, p, d] + query[b, t, d]) + bias[0], the additive
// attention of every decoder step t over the P = H·W map positions (row-major (h, w)), with
// PaddleOCR's valid_ratio mask: positions whose column p % grid_w is >= valid_w[b] get −inf.
// key (B, P, D), query (B, T, D), w (D) any float dtype; bias (1) may be NULL; valid_w (B) int32
// in [1, grid_w] on the tensors' device (NULL: no mask). tanh and the sum run in fp32; the
// (B, T, P, D) tanh tensor is never stored.
void ocr_sar_attention_score_forward(OcrTensor *scores, const OcrTensor *key, const OcrTensor *query,
                                     const OcrTensor *w, const OcrTensor *bias, const OcrTensor *valid_w, int grid_w);
// From dscores (B, T, P) f32 (masked positions are skipped): dkey, dquery assigned; dw (D),
// dbias (1) accumulated; each may be NULL. The tanh values are recomputed from key and query.
void ocr_sar_attention_score_backward(OcrTensor *dkey, OcrTensor *dquery, OcrTensor *dw, OcrTensor *dbias,
                                      const OcrTensor *dscores, const OcrTensor *key, const OcrTensor *query,
                                      const OcrTensor *w, const OcrTensor *valid_w, int grid_w);

#endif

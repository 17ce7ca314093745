// The CUDA backend's op launchers: ocr_cuda_<op> is ocr_<op> of kernels/ops.h (kernels/ctc.h,
// kernels/input.h) for CUDA tensors, with the contract written there. kernels/op_table.h lists
// the ops and kernels/dispatch.c routes each public function here or to its CPU twin
// (kernels/cpu/cpu_ops.h). An op of family F is defined in kernels/cuda/F.cu, as its CPU twin
// is in kernels/cpu/F.c; the sections below are the families.
//
// Each launcher enqueues its kernels on the current stream of its tensors' device and returns
// without waiting, except where a host value must be returned (noted below; those synchronise).
// No CUDA types appear here: C code includes this header; the .cu files define the launchers
// with extern "C" linkage.
#ifndef OCR_KERNELS_CUDA_OPS_H
#define OCR_KERNELS_CUDA_OPS_H

// The core headers are C: included with C linkage from the .cu files too.
#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/ctc.h"
#include "kernels/input.h"
#include "kernels/ops.h"

// ---- gemm.cu: GEMM, linear, batched matmul ------------------------------------------------------
void ocr_cuda_gemm(OcrTensor *c, const OcrTensor *a, const OcrTensor *b, int trans_a, int trans_b, float alpha,
                   float beta);
void ocr_cuda_linear_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *weight, const OcrTensor *bias);
void ocr_cuda_linear_backward(OcrTensor *dinp, OcrTensor *dweight, OcrTensor *dbias, const OcrTensor *dout,
                              const OcrTensor *inp, const OcrTensor *weight);
void ocr_cuda_matmul_batched_forward(OcrTensor *out, const OcrTensor *a, const OcrTensor *b, int trans_a, int trans_b,
                                     float alpha);
void ocr_cuda_matmul_batched_backward(OcrTensor *da, OcrTensor *db, const OcrTensor *dout, const OcrTensor *a,
                                      const OcrTensor *b, int trans_a, int trans_b, float alpha);

// ---- conv2d.cu (depthwise: conv2d_depthwise.cu): convolution ----------------------------------------
void ocr_cuda_conv2d_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *weight, const OcrTensor *bias,
                             Conv2dParams p);
void ocr_cuda_conv2d_backward(OcrTensor *dinp, OcrTensor *dweight, OcrTensor *dbias, const OcrTensor *dout,
                              const OcrTensor *inp, const OcrTensor *weight, Conv2dParams p);
// Test and benchmark hook: 1 runs depthwise convolutions through cuDNN (grouped) instead of
// the own kernel; returns the previous setting. Ignored without cuDNN.
int ocr_cuda_conv2d_depthwise_cudnn(int on);

// ---- batchnorm.cu -------------------------------------------------------------------------------------
void ocr_cuda_batchnorm2d_forward(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd, OcrTensor *running_mean,
                                  OcrTensor *running_var, const OcrTensor *inp, const OcrTensor *gamma,
                                  const OcrTensor *beta, float momentum, float eps, int training);
void ocr_cuda_batchnorm2d_backward(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                                   const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *save_mean,
                                   const OcrTensor *save_rstd, int training);

// ---- layernorm.cu -------------------------------------------------------------------------------------
void ocr_cuda_layernorm_forward(OcrTensor *out, OcrTensor *mean, OcrTensor *rstd, const OcrTensor *inp,
                                const OcrTensor *gamma, const OcrTensor *beta, float eps);
void ocr_cuda_layernorm_backward(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                                 const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *mean,
                                 const OcrTensor *rstd);

// ---- bn_act.cu: batch norm + activation, fused (sync: synchronised BN, its sums on device memory
// in the op's stream; NULL: per-rank statistics) -----------------------------------------------------
void ocr_cuda_batchnorm2d_act_forward(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd,
                                      OcrTensor *save_scale, OcrTensor *running_mean, OcrTensor *running_var,
                                      const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta,
                                      ocr_activation_t act, float momentum, float eps, int training,
                                      const OcrBnSync *sync);
void ocr_cuda_batchnorm2d_forward_accumulate(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd,
                                             OcrTensor *running_mean, OcrTensor *running_var, const OcrTensor *inp,
                                             const OcrTensor *gamma, const OcrTensor *beta, float momentum, float eps,
                                             int training);
void ocr_cuda_batchnorm2d_act_apply(OcrTensor *out, const OcrTensor *inp, const OcrTensor *save_mean,
                                    const OcrTensor *save_scale, const OcrTensor *beta, ocr_activation_t act);
void ocr_cuda_batchnorm2d_act_backward(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                                       const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta,
                                       const OcrTensor *save_mean, const OcrTensor *save_rstd,
                                       const OcrTensor *save_scale, ocr_activation_t act, ocr_dtype_t mid, int training,
                                       const OcrBnSync *sync);
void ocr_cuda_batchnorm2d_act_backward_rebuild(OcrTensor *out, OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta,
                                               const OcrTensor *dout, const OcrTensor *inp, const OcrTensor *gamma,
                                               const OcrTensor *beta, const OcrTensor *save_mean,
                                               const OcrTensor *save_rstd, const OcrTensor *save_scale,
                                               ocr_activation_t act, int training, const OcrBnSync *sync);

// ---- activation.cu ------------------------------------------------------------------------------------
void ocr_cuda_activation_forward(OcrTensor *out, const OcrTensor *inp, ocr_activation_t act);
void ocr_cuda_activation_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *inp, ocr_activation_t act);

// ---- pool.cu ------------------------------------------------------------------------------------------
void ocr_cuda_avgpool2d_forward(OcrTensor *out, const OcrTensor *inp, Pool2dParams p);
void ocr_cuda_avgpool2d_backward(OcrTensor *dinp, const OcrTensor *dout, Pool2dParams p);
void ocr_cuda_maxpool2d_forward(OcrTensor *out, const OcrTensor *inp, Pool2dParams p);
void ocr_cuda_maxpool2d_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *inp, Pool2dParams p);
void ocr_cuda_adaptive_avgpool2d_forward(OcrTensor *out, const OcrTensor *inp);
void ocr_cuda_adaptive_avgpool2d_backward(OcrTensor *dinp, const OcrTensor *dout);

// ---- elementwise.cu: elementwise and layout -----------------------------------------------------------
void ocr_cuda_channel_scale_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *scale);
void ocr_cuda_channel_scale_backward(OcrTensor *dinp, OcrTensor *dscale, const OcrTensor *dout, const OcrTensor *inp,
                                     const OcrTensor *scale);
void ocr_cuda_add_forward(OcrTensor *out, const OcrTensor *a, const OcrTensor *b);
void ocr_cuda_add_backward(OcrTensor *da, OcrTensor *db, const OcrTensor *dout);
void ocr_cuda_accumulate(OcrTensor *dst, const OcrTensor *src);
void ocr_cuda_scale_forward(OcrTensor *out, const OcrTensor *inp, float alpha);
void ocr_cuda_zero_tensor(OcrTensor *t);
void ocr_cuda_concat_forward(OcrTensor *out, const OcrTensor *const *inputs, int count);
void ocr_cuda_concat_backward(OcrTensor *const *dinputs, int count, const OcrTensor *dout);
void ocr_cuda_permute_forward(OcrTensor *out, const OcrTensor *inp, const int *perm);
void ocr_cuda_permute_backward(OcrTensor *dinp, const OcrTensor *dout, const int *perm);
// kernels/cuda/pad.cu
void ocr_cuda_pad2d_forward(OcrTensor *out, const OcrTensor *inp, int top, int left, float value);
void ocr_cuda_pad2d_backward(OcrTensor *dinp, const OcrTensor *dout, int top, int left);

// ---- affine.cu: scalar affine (LearnableAffineBlock) and its fused affine → activation → affine,
// batch broadcast add (positional embedding) -------------------------------------------------------
void ocr_cuda_scalar_affine_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *scale,
                                    const OcrTensor *bias);
void ocr_cuda_scalar_affine_backward(OcrTensor *dinp, OcrTensor *dscale, OcrTensor *dbias, const OcrTensor *dout,
                                     const OcrTensor *inp, const OcrTensor *scale);
void ocr_cuda_affine_act_affine_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *s1, const OcrTensor *b1,
                                        ocr_activation_t act, const OcrTensor *s2, const OcrTensor *b2);
void ocr_cuda_affine_act_affine_backward(OcrTensor *dinp, OcrTensor *ds1, OcrTensor *db1, OcrTensor *ds2,
                                         OcrTensor *db2, const OcrTensor *dout, const OcrTensor *inp,
                                         const OcrTensor *s1, const OcrTensor *b1, ocr_activation_t act,
                                         const OcrTensor *s2, ocr_dtype_t mid);
void ocr_cuda_batch_broadcast_add_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *pos);
void ocr_cuda_batch_broadcast_add_backward(OcrTensor *dinp, OcrTensor *dpos, const OcrTensor *dout);

// ---- softmax.cu ---------------------------------------------------------------------------------------
void ocr_cuda_softmax_forward(OcrTensor *out, const OcrTensor *inp);
void ocr_cuda_softmax_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *out);
void ocr_cuda_log_softmax_forward(OcrTensor *out, const OcrTensor *inp);
void ocr_cuda_log_softmax_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *out);

// ---- attention.cu -------------------------------------------------------------------------------------
void ocr_cuda_attention_forward(OcrTensor *out, OcrTensor *probs, const OcrTensor *qkv, const OcrTensor *mask,
                                int num_heads, float scale, DropoutParams dropout);
void ocr_cuda_attention_backward(OcrTensor *dqkv, const OcrTensor *dout, const OcrTensor *qkv, const OcrTensor *probs,
                                 int num_heads, float scale, DropoutParams dropout);
void ocr_cuda_attention_cross_forward(OcrTensor *out, OcrTensor *probs, const OcrTensor *q, const OcrTensor *kv,
                                     int num_heads, float scale, DropoutParams dropout);
void ocr_cuda_attention_cross_backward(OcrTensor *dq, OcrTensor *dkv, const OcrTensor *dout, const OcrTensor *q,
                                      const OcrTensor *kv, const OcrTensor *probs, int num_heads, float scale, DropoutParams dropout);
void ocr_cuda_attention_local_mask(OcrTensor *mask, int grid_h, int grid_w, int window_h, int window_w);

// ---- dropout.cu: dropout, drop path -------------------------------------------------------------------
void ocr_cuda_dropout_forward(OcrTensor *out, const OcrTensor *inp, DropoutParams d);
void ocr_cuda_dropout_backward(OcrTensor *dinp, const OcrTensor *dout, DropoutParams d);
void ocr_cuda_droppath_forward(OcrTensor *out, const OcrTensor *inp, DropoutParams d);
void ocr_cuda_droppath_backward(OcrTensor *dinp, const OcrTensor *dout, DropoutParams d);

// ---- embedding.cu -------------------------------------------------------------------------------------
void ocr_cuda_embedding_forward(OcrTensor *out, const OcrTensor *ids, const OcrTensor *table, int padding_idx);
void ocr_cuda_embedding_backward(OcrTensor *dtable, const OcrTensor *dout, const OcrTensor *ids, int padding_idx);

// ---- cross_entropy.cu ---------------------------------------------------------------------------------
void ocr_cuda_cross_entropy_forward(OcrTensor *losses, OcrTensor *loss, OcrTensor *counted, const OcrTensor *logits,
                                    const OcrTensor *targets, CrossEntropyParams p);
void ocr_cuda_cross_entropy_backward(OcrTensor *dlogits, const OcrTensor *logits, const OcrTensor *targets,
                                     CrossEntropyParams p);

// ---- distill.cu: the distillation losses ------------------------------------------------------------
void ocr_cuda_dml_loss_forward(OcrTensor *loss, const OcrTensor *x1, const OcrTensor *x2, DmlLossParams p);
void ocr_cuda_dml_loss_backward(OcrTensor *dx1, OcrTensor *dx2, const OcrTensor *x1, const OcrTensor *x2,
                                DmlLossParams p);
void ocr_cuda_kl_div_loss_forward(OcrTensor *loss, const OcrTensor *student, const OcrTensor *teacher,
                                  const OcrTensor *targets, KlDivLossParams p);
void ocr_cuda_kl_div_loss_backward(OcrTensor *dstudent, const OcrTensor *student, const OcrTensor *teacher,
                                   const OcrTensor *targets, KlDivLossParams p);
void ocr_cuda_ctc_logits_kl_forward(OcrTensor *loss, const OcrTensor *student, const OcrTensor *teacher,
                                    CtcLogitsKlParams p);
void ocr_cuda_ctc_logits_kl_backward(OcrTensor *dstudent, const OcrTensor *student, const OcrTensor *teacher,
                                     CtcLogitsKlParams p);
void ocr_cuda_dkd_loss_forward(OcrTensor *loss, const OcrTensor *student, const OcrTensor *teacher,
                               const OcrTensor *targets, DkdLossParams p);
void ocr_cuda_dkd_loss_backward(OcrTensor *dstudent, const OcrTensor *student, const OcrTensor *teacher,
                                const OcrTensor *targets, DkdLossParams p);
void ocr_cuda_distance_loss_forward(OcrTensor *loss, const OcrTensor *x, const OcrTensor *y, DistanceLossParams p);
void ocr_cuda_distance_loss_backward(OcrTensor *dx, OcrTensor *dy, const OcrTensor *x, const OcrTensor *y,
                                     DistanceLossParams p);

// ---- lstm.cu: the LSTM cell ---------------------------------------------------------------------------
void ocr_cuda_lstm_cell_forward(OcrTensor *h, OcrTensor *c, const OcrTensor *gates, const OcrTensor *c_prev);
void ocr_cuda_lstm_cell_backward(OcrTensor *dgates, OcrTensor *dc_prev, const OcrTensor *dh, const OcrTensor *dc,
                                 const OcrTensor *gates, const OcrTensor *c_prev);

// ---- sar_attention.cu: SAR's 2-D attention score ------------------------------------------------------
void ocr_cuda_sar_attention_score_forward(OcrTensor *scores, const OcrTensor *key, const OcrTensor *query,
                                          const OcrTensor *w, const OcrTensor *bias, const OcrTensor *valid_w,
                                          int grid_w);
void ocr_cuda_sar_attention_score_backward(OcrTensor *dkey, OcrTensor *dquery, OcrTensor *dw, OcrTensor *dbias,
                                           const OcrTensor *dscores, const OcrTensor *key, const OcrTensor *query,
                                           const OcrTensor *w, const OcrTensor *valid_w, int grid_w);

// ---- cast.cu: casts and the AMP unscale/finite check ----------------------------------------------------
void ocr_cuda_cast_forward(OcrTensor *out, const OcrTensor *inp);
void ocr_cuda_cast_backward(OcrTensor *dinp, const OcrTensor *dout);
// ops.h semantics; reads the results back, so it synchronises the stream.
int ocr_cuda_unscale_and_check(OcrTensor *const *grads, int count, float inv_scale, float *amax, int *nonfinite);
// The same pass without a host wait, for a step that never waits for the host. All result
// pointers are DEVICE memory of the tensors' device: inv_scale (1 float) is read on the device
// (the scaler's value); amax (count floats) and nonfinite (count ints) may be NULL, found_inf
// (1 int) may be NULL. The results are max-ed / or-ed into what is there, so the caller zeroes
// them once before a step (cudaMemsetAsync or zero_tensor), which also lets several calls
// share them.
void ocr_cuda_unscale_and_check_async(OcrTensor *const *grads, int count, const float *inv_scale, float *amax,
                                      int *nonfinite, int *found_inf);

// ---- optim.cu: Adam/AdamW, gradient norms ---------------------------------------------------------------
void ocr_cuda_adam_update(OcrTensor *param, OcrTensor *master, OcrTensor *m, OcrTensor *v, const OcrTensor *grad,
                          AdamParams p);
// These return host values, so they synchronise the stream.
double ocr_cuda_grad_global_norm(OcrTensor *const *grads, int count);
double ocr_cuda_clip_grad_global_norm(OcrTensor *const *grads, int count, float max_norm);

// ---- ctc.cu: the CTC loss of kernels/ctc.h --------------------------------------------------------------
// kernels/ctc.h's contract with every tensor on one CUDA device (targets and lengths
// included). Differences, both forced by not waiting for the host:
// - The return value needs the result on the host: it synchronises the stream, except while
//   the stream is being captured into a graph, where it returns NaN (read `loss` instead).
// - Invalid targets or lengths cannot abort from the device: the sample's loss (and so the
//   reduced loss) and its gradient rows become NaN, which the overflow check reports.
double ocr_cuda_ctc_loss_forward(OcrTensor *losses, OcrTensor *loss, OcrTensor *dlogits, OcrTensor *infeasible,
                                 const OcrTensor *logits, const OcrTensor *targets, const OcrTensor *target_lengths,
                                 const OcrTensor *input_lengths, CtcParams p);
// The same computation without the return value: only enqueued, never waits (read `loss`).
void ocr_cuda_ctc_loss_forward_async(OcrTensor *losses, OcrTensor *loss, OcrTensor *dlogits, OcrTensor *infeasible,
                                     const OcrTensor *logits, const OcrTensor *targets, const OcrTensor *target_lengths,
                                     const OcrTensor *input_lengths, CtcParams p);

// ---- input.cu: the uint8 input normalisation of kernels/input.h ------------------------------------------
// out = (p / 255 − 0.5) / 0.5 from a uint8 batch, bit-identical to the CPU; with widths (N) int32
// on the device, columns x >= widths[b] are 0 (widths may be NULL).
void ocr_cuda_input_normalize_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *widths);

#ifdef __cplusplus
}
#endif
#endif

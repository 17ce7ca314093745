// The CPU kernels behind the op interface: ocr_cpu_<op> has the contract of ocr_<op> in
// kernels/ops.h (kernels/ctc.h, kernels/input.h) for CPU tensors. kernels/dispatch.c routes
// the public names here or to the CUDA twins (kernels/cuda/cuda_ops.h), as the op table
// (kernels/op_table.h) lists them. An op of family F is defined in kernels/cpu/F.c, its CUDA twin
// in kernels/cuda/F.cu; the sections below are the families, with the helpers the CPU files
// share.
#ifndef OCR_KERNELS_CPU_OPS_H
#define OCR_KERNELS_CPU_OPS_H

#include "kernels/cpu/cpu_common.h"
#include "kernels/ctc.h"
#include "kernels/input.h"
#include "kernels/ops.h"

// kernels/cpu/gemm.c
// c (M, N; row stride ldc) = alpha · A · B on one thread, for products too small for sgemm's
// per-call overhead (attention heads): A (M, K) and B (K, N) through element strides (row,
// column), so transposed and interleaved operands need no copy; bpack holds
// K·ocr_cpu_small_gemm_padded(N) floats. Each element is 0 + Σ_k (alpha·a[m,k])·b[k,n] in k order,
// the same bits at every vector level.
static inline int64_t ocr_cpu_small_gemm_padded(int64_t N) { return (N + 7) / 8 * 8; }
void ocr_cpu_small_gemm(float *c, int64_t ldc, const float *a, int64_t a_rs, int64_t a_cs, const float *b,
                        int64_t b_rs, int64_t b_cs, int64_t M, int64_t N, int64_t K, float alpha, float *bpack);
void ocr_cpu_gemm(OcrTensor *c, const OcrTensor *a, const OcrTensor *b, int trans_a, int trans_b, float alpha,
                  float beta);
void ocr_cpu_linear_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *weight, const OcrTensor *bias);
void ocr_cpu_linear_backward(OcrTensor *dinp, OcrTensor *dweight, OcrTensor *dbias, const OcrTensor *dout,
                             const OcrTensor *inp, const OcrTensor *weight);
void ocr_cpu_matmul_batched_forward(OcrTensor *out, const OcrTensor *a, const OcrTensor *b, int trans_a, int trans_b,
                                    float alpha);
void ocr_cpu_matmul_batched_backward(OcrTensor *da, OcrTensor *db, const OcrTensor *dout, const OcrTensor *a,
                                     const OcrTensor *b, int trans_a, int trans_b, float alpha);

// kernels/cpu/conv2d.c
void ocr_cpu_conv2d_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *weight, const OcrTensor *bias,
                            Conv2dParams p);
void ocr_cpu_conv2d_backward(OcrTensor *dinp, OcrTensor *dweight, OcrTensor *dbias, const OcrTensor *dout,
                             const OcrTensor *inp, const OcrTensor *weight, Conv2dParams p);

// kernels/cpu/batchnorm.c
void ocr_cpu_batchnorm2d_forward(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd, OcrTensor *running_mean,
                                 OcrTensor *running_var, const OcrTensor *inp, const OcrTensor *gamma,
                                 const OcrTensor *beta, float momentum, float eps, int training);
void ocr_cpu_batchnorm2d_backward(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                                  const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *save_mean,
                                  const OcrTensor *save_rstd, int training);
// Shared with kernels/cpu/bn_act.c, which must reproduce batch norm bit for bit: the fixed
// number of row chunks the per-channel sums use (the statistics and row-tile loops are in
// kernels/cpu/rowwise.h).
int64_t ocr_cpu_bn_chunks(int64_t rows);
// The backward's per-channel sums, sdy = Σ g and sdx = Σ g·(x − mean), over the chunks in chunk
// order (part: 2·C doubles per chunk, from ocr_cpu_bn_sums_tile).
static inline void cpu_bn_reduce_chunks(double *sdy, double *sdx, const double *part, int64_t nch, int64_t C) {
    for (int64_t c = 0; c < C; c++) {
        double t1 = 0.0, t2 = 0.0;
        for (int64_t k = 0; k < nch; k++) {
            t1 += part[2 * k * C + c];
            t2 += part[2 * k * C + C + c];
        }
        sdy[c] = t1;
        sdx[c] = t2;
    }
}
void ocr_cpu_bn_param_grads(CpuScratch *s, OcrTensor *dgamma, OcrTensor *dbeta, const double *sdy, const double *sdx,
                            const float *rstd, int64_t C);
void ocr_cpu_bn_dx_coefs(CpuScratch *s, float **a_out, float **b_out, float **k_out, const float *g, const float *rstd,
                         const double *sdy, const double *sdx, int64_t C, int64_t M, int training);

// kernels/cpu/bn_act.c
void ocr_cpu_batchnorm2d_act_forward(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd,
                                     OcrTensor *save_scale, OcrTensor *running_mean, OcrTensor *running_var,
                                     const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta,
                                     ocr_activation_t act, float momentum, float eps, int training,
                                     const OcrBnSync *sync);
void ocr_cpu_batchnorm2d_forward_accumulate(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd,
                                            OcrTensor *running_mean, OcrTensor *running_var, const OcrTensor *inp,
                                            const OcrTensor *gamma, const OcrTensor *beta, float momentum, float eps,
                                            int training);
void ocr_cpu_batchnorm2d_act_apply(OcrTensor *out, const OcrTensor *inp, const OcrTensor *save_mean,
                                   const OcrTensor *save_scale, const OcrTensor *beta, ocr_activation_t act);
void ocr_cpu_batchnorm2d_act_backward(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                                      const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta,
                                      const OcrTensor *save_mean, const OcrTensor *save_rstd,
                                      const OcrTensor *save_scale, ocr_activation_t act, ocr_dtype_t mid, int training,
                                      const OcrBnSync *sync);
void ocr_cpu_batchnorm2d_act_backward_rebuild(OcrTensor *out, OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta,
                                              const OcrTensor *dout, const OcrTensor *inp, const OcrTensor *gamma,
                                              const OcrTensor *beta, const OcrTensor *save_mean,
                                              const OcrTensor *save_rstd, const OcrTensor *save_scale,
                                              ocr_activation_t act, int training, const OcrBnSync *sync);

// kernels/cpu/layernorm.c
void ocr_cpu_layernorm_forward(OcrTensor *out, OcrTensor *mean, OcrTensor *rstd, const OcrTensor *inp,
                               const OcrTensor *gamma, const OcrTensor *beta, float eps);
void ocr_cpu_layernorm_backward(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                                const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *mean,
                                const OcrTensor *rstd);

// kernels/cpu/activation.c
void ocr_cpu_activation_forward(OcrTensor *out, const OcrTensor *inp, ocr_activation_t act);
void ocr_cpu_activation_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *inp, ocr_activation_t act);
// The f32 loops behind them over whole arrays, in parallel blocks (y may equal x, dx may equal
// dy); the one-thread tile forms are in kernels/cpu/rowwise.h.
void ocr_cpu_act_forward_f32(float *y, const float *x, int64_t n, ocr_activation_t act);
void ocr_cpu_act_backward_f32(float *dx, const float *dy, const float *x, int64_t n, ocr_activation_t act);
// GELU of every bf16 value (index: its 16 bits), evaluated once by the loops' formula at hw_fma
// (built on first use; thread-safe): value = GELU(v) rounded to bf16, slope = GELU'(v), so a
// lookup gives the formula's bits (kernels/cpu/activation.c says why it pays).
typedef struct {
    float value[65536];
    float slope[65536];
} OcrGeluBf16Table;
const OcrGeluBf16Table *ocr_cpu_gelu_bf16_table(int hw_fma);
// out (n) = tab[k], k the bf16 bits of v[i] (bf16 values held as floats) or of x[i]; out may be v.
void ocr_cpu_table_lookup_f32(float *out, const float *v, const float *tab, int64_t n);
void ocr_cpu_table_lookup_bf16(float *out, const uint16_t *x, const float *tab, int64_t n);

// kernels/cpu/pool.c
void ocr_cpu_avgpool2d_forward(OcrTensor *out, const OcrTensor *inp, Pool2dParams p);
void ocr_cpu_avgpool2d_backward(OcrTensor *dinp, const OcrTensor *dout, Pool2dParams p);
void ocr_cpu_maxpool2d_forward(OcrTensor *out, const OcrTensor *inp, Pool2dParams p);
void ocr_cpu_maxpool2d_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *inp, Pool2dParams p);
void ocr_cpu_adaptive_avgpool2d_forward(OcrTensor *out, const OcrTensor *inp);
void ocr_cpu_adaptive_avgpool2d_backward(OcrTensor *dinp, const OcrTensor *dout);

// kernels/cpu/elementwise.c
void ocr_cpu_channel_scale_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *scale);
void ocr_cpu_channel_scale_backward(OcrTensor *dinp, OcrTensor *dscale, const OcrTensor *dout, const OcrTensor *inp,
                                    const OcrTensor *scale);
void ocr_cpu_add_forward(OcrTensor *out, const OcrTensor *a, const OcrTensor *b);
void ocr_cpu_add_backward(OcrTensor *da, OcrTensor *db, const OcrTensor *dout);
void ocr_cpu_accumulate(OcrTensor *dst, const OcrTensor *src);
void ocr_cpu_scale_forward(OcrTensor *out, const OcrTensor *inp, float alpha);
void ocr_cpu_zero_tensor(OcrTensor *t);
void ocr_cpu_concat_forward(OcrTensor *out, const OcrTensor *const *inputs, int count);
void ocr_cpu_concat_backward(OcrTensor *const *dinputs, int count, const OcrTensor *dout);
void ocr_cpu_permute_forward(OcrTensor *out, const OcrTensor *inp, const int *perm);
void ocr_cpu_permute_backward(OcrTensor *dinp, const OcrTensor *dout, const int *perm);

// kernels/cpu/pad.c
void ocr_cpu_pad2d_forward(OcrTensor *out, const OcrTensor *inp, int top, int left, float value);
void ocr_cpu_pad2d_backward(OcrTensor *dinp, const OcrTensor *dout, int top, int left);

// kernels/cpu/softmax.c
void ocr_cpu_softmax_forward(OcrTensor *out, const OcrTensor *inp);
void ocr_cpu_softmax_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *out);
void ocr_cpu_log_softmax_forward(OcrTensor *out, const OcrTensor *inp);
void ocr_cpu_log_softmax_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *out);

// kernels/cpu/attention.c
void ocr_cpu_attention_forward(OcrTensor *out, OcrTensor *probs, const OcrTensor *qkv, const OcrTensor *mask,
                               int num_heads, float scale, DropoutParams dropout);
void ocr_cpu_attention_backward(OcrTensor *dqkv, const OcrTensor *dout, const OcrTensor *qkv, const OcrTensor *probs,
                                int num_heads, float scale, DropoutParams dropout);
void ocr_cpu_attention_cross_forward(OcrTensor *out, OcrTensor *probs, const OcrTensor *q, const OcrTensor *kv,
                                    int num_heads, float scale, DropoutParams dropout);
void ocr_cpu_attention_cross_backward(OcrTensor *dq, OcrTensor *dkv, const OcrTensor *dout, const OcrTensor *q,
                                     const OcrTensor *kv, const OcrTensor *probs, int num_heads, float scale, DropoutParams dropout);
void ocr_cpu_attention_local_mask(OcrTensor *mask, int grid_h, int grid_w, int window_h, int window_w);

// kernels/cpu/dropout.c
void ocr_cpu_dropout_forward(OcrTensor *out, const OcrTensor *inp, DropoutParams d);
void ocr_cpu_dropout_backward(OcrTensor *dinp, const OcrTensor *dout, DropoutParams d);
// mult (n) = dropout's per-element factor for draw indices d->offset + first + k (keep_scale or 0
// in training, 1 − p in downscale-in-infer inference); 0 when it is 1 everywhere (mult untouched).
int ocr_cpu_dropout_factors(float *mult, int64_t n, uint64_t first, const DropoutParams *d);
void ocr_cpu_droppath_forward(OcrTensor *out, const OcrTensor *inp, DropoutParams d);
void ocr_cpu_droppath_backward(OcrTensor *dinp, const OcrTensor *dout, DropoutParams d);

// kernels/cpu/embedding.c
void ocr_cpu_embedding_forward(OcrTensor *out, const OcrTensor *ids, const OcrTensor *table, int padding_idx);
void ocr_cpu_embedding_backward(OcrTensor *dtable, const OcrTensor *dout, const OcrTensor *ids, int padding_idx);

// kernels/cpu/cross_entropy.c
void ocr_cpu_cross_entropy_forward(OcrTensor *losses, OcrTensor *loss, OcrTensor *counted, const OcrTensor *logits,
                                   const OcrTensor *targets, CrossEntropyParams p);
void ocr_cpu_cross_entropy_backward(OcrTensor *dlogits, const OcrTensor *logits, const OcrTensor *targets,
                                    CrossEntropyParams p);

// kernels/cpu/distill.c
void ocr_cpu_dml_loss_forward(OcrTensor *loss, const OcrTensor *x1, const OcrTensor *x2, DmlLossParams p);
void ocr_cpu_dml_loss_backward(OcrTensor *dx1, OcrTensor *dx2, const OcrTensor *x1, const OcrTensor *x2,
                               DmlLossParams p);
void ocr_cpu_kl_div_loss_forward(OcrTensor *loss, const OcrTensor *student, const OcrTensor *teacher,
                                 const OcrTensor *targets, KlDivLossParams p);
void ocr_cpu_kl_div_loss_backward(OcrTensor *dstudent, const OcrTensor *student, const OcrTensor *teacher,
                                  const OcrTensor *targets, KlDivLossParams p);
void ocr_cpu_ctc_logits_kl_forward(OcrTensor *loss, const OcrTensor *student, const OcrTensor *teacher,
                                   CtcLogitsKlParams p);
void ocr_cpu_ctc_logits_kl_backward(OcrTensor *dstudent, const OcrTensor *student, const OcrTensor *teacher,
                                    CtcLogitsKlParams p);
void ocr_cpu_dkd_loss_forward(OcrTensor *loss, const OcrTensor *student, const OcrTensor *teacher,
                              const OcrTensor *targets, DkdLossParams p);
void ocr_cpu_dkd_loss_backward(OcrTensor *dstudent, const OcrTensor *student, const OcrTensor *teacher,
                               const OcrTensor *targets, DkdLossParams p);
void ocr_cpu_distance_loss_forward(OcrTensor *loss, const OcrTensor *x, const OcrTensor *y, DistanceLossParams p);
void ocr_cpu_distance_loss_backward(OcrTensor *dx, OcrTensor *dy, const OcrTensor *x, const OcrTensor *y,
                                    DistanceLossParams p);

// kernels/cpu/lstm.c
void ocr_cpu_lstm_cell_forward(OcrTensor *h, OcrTensor *c, const OcrTensor *gates, const OcrTensor *c_prev);
void ocr_cpu_lstm_cell_backward(OcrTensor *dgates, OcrTensor *dc_prev, const OcrTensor *dh, const OcrTensor *dc,
                                const OcrTensor *gates, const OcrTensor *c_prev);

// kernels/cpu/cast.c
void ocr_cpu_cast_forward(OcrTensor *out, const OcrTensor *inp);
void ocr_cpu_cast_backward(OcrTensor *dinp, const OcrTensor *dout);
int ocr_cpu_unscale_and_check(OcrTensor *const *grads, int count, float inv_scale, float *amax, int *nonfinite);

// kernels/cpu/optim.c
void ocr_cpu_adam_update(OcrTensor *param, OcrTensor *master, OcrTensor *m, OcrTensor *v, const OcrTensor *grad,
                         AdamParams p);
double ocr_cpu_grad_global_norm(OcrTensor *const *grads, int count);
double ocr_cpu_clip_grad_global_norm(OcrTensor *const *grads, int count, float max_norm);

// kernels/cpu/ctc.c
double ocr_cpu_ctc_loss_forward(OcrTensor *losses, OcrTensor *loss, OcrTensor *dlogits, OcrTensor *infeasible,
                                const OcrTensor *logits, const OcrTensor *targets, const OcrTensor *target_lengths,
                                const OcrTensor *input_lengths, CtcParams p);

// kernels/cpu/input.c (widths may be NULL: every column is an image column)
void ocr_cpu_input_normalize_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *widths);

// kernels/cpu/affine.c
void ocr_cpu_scalar_affine_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *scale, const OcrTensor *bias);
void ocr_cpu_scalar_affine_backward(OcrTensor *dinp, OcrTensor *dscale, OcrTensor *dbias, const OcrTensor *dout,
                                    const OcrTensor *inp, const OcrTensor *scale);
void ocr_cpu_affine_act_affine_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *s1, const OcrTensor *b1,
                                       ocr_activation_t act, const OcrTensor *s2, const OcrTensor *b2);
void ocr_cpu_affine_act_affine_backward(OcrTensor *dinp, OcrTensor *ds1, OcrTensor *db1, OcrTensor *ds2, OcrTensor *db2,
                                        const OcrTensor *dout, const OcrTensor *inp, const OcrTensor *s1,
                                        const OcrTensor *b1, ocr_activation_t act, const OcrTensor *s2,
                                        ocr_dtype_t mid);
void ocr_cpu_batch_broadcast_add_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *pos);
void ocr_cpu_batch_broadcast_add_backward(OcrTensor *dinp, OcrTensor *dpos, const OcrTensor *dout);

// kernels/cpu/sar_attention.c
void ocr_cpu_sar_attention_score_forward(OcrTensor *scores, const OcrTensor *key, const OcrTensor *query,
                                         const OcrTensor *w, const OcrTensor *bias, const OcrTensor *valid_w,
                                         int grid_w);
void ocr_cpu_sar_attention_score_backward(OcrTensor *dkey, OcrTensor *dquery, OcrTensor *dw, OcrTensor *dbias,
                                          const OcrTensor *dscores, const OcrTensor *key, const OcrTensor *query,
                                          const OcrTensor *w, const OcrTensor *valid_w, int grid_w);

#endif

// The CPU kernels behind the op interface: <op>_cpu has the contract of <op> in
// kernels/ops.h (kernels/ctc.h, kernels/input.h) for CPU tensors. kernels/dispatch.c routes
// the public names here or to the CUDA twins (kernels/cuda/*.h).
#ifndef OCR_KERNELS_CPU_OPS_H
#define OCR_KERNELS_CPU_OPS_H

#include "kernels/cpu/cpu_common.h"
#include "kernels/ctc.h"
#include "kernels/input.h"
#include "kernels/ops.h"

// kernels/cpu/gemm.c
void gemm_cpu(OcrTensor *c, const OcrTensor *a, const OcrTensor *b, int trans_a, int trans_b, float alpha, float beta);
void linear_forward_cpu(OcrTensor *out, const OcrTensor *inp, const OcrTensor *weight, const OcrTensor *bias);
void linear_backward_cpu(OcrTensor *dinp, OcrTensor *dweight, OcrTensor *dbias, const OcrTensor *dout,
                         const OcrTensor *inp, const OcrTensor *weight);
void matmul_batched_forward_cpu(OcrTensor *out, const OcrTensor *a, const OcrTensor *b, int trans_a, int trans_b,
                                float alpha);
void matmul_batched_backward_cpu(OcrTensor *da, OcrTensor *db, const OcrTensor *dout, const OcrTensor *a,
                                 const OcrTensor *b, int trans_a, int trans_b, float alpha);

// kernels/cpu/conv2d.c
void conv2d_forward_cpu(OcrTensor *out, const OcrTensor *inp, const OcrTensor *weight, const OcrTensor *bias,
                        Conv2dParams p);
void conv2d_backward_cpu(OcrTensor *dinp, OcrTensor *dweight, OcrTensor *dbias, const OcrTensor *dout,
                         const OcrTensor *inp, const OcrTensor *weight, Conv2dParams p);

// kernels/cpu/batchnorm.c
void batchnorm2d_forward_cpu(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd, OcrTensor *running_mean,
                             OcrTensor *running_var, const OcrTensor *inp, const OcrTensor *gamma,
                             const OcrTensor *beta, float momentum, float eps, int training);
void batchnorm2d_backward_cpu(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                              const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *save_mean,
                              const OcrTensor *save_rstd, int training);
// Shared with kernels/cpu/bn_act.c, which must reproduce batch norm bit for bit: the fixed
// number of row chunks the per-channel sums use (the statistics and row-tile loops are in
// kernels/cpu/rowwise.h).
int64_t cpu_bn_chunks(int64_t rows);
// The backward's per-channel sums, sdy = Σ g and sdx = Σ g·(x − mean), over the chunks in chunk
// order (part: 2·C doubles per chunk, from cpu_bn_sums_tile).
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
void cpu_bn_param_grads(CpuScratch *s, OcrTensor *dgamma, OcrTensor *dbeta, const double *sdy, const double *sdx,
                        const float *rstd, int64_t C);
void cpu_bn_dx_coefs(CpuScratch *s, float **a_out, float **b_out, float **k_out, const float *g, const float *rstd,
                     const double *sdy, const double *sdx, int64_t C, int64_t M, int training);

// kernels/cpu/bn_act.c
void batchnorm2d_act_forward_cpu(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd,
                                 OcrTensor *save_scale, OcrTensor *running_mean, OcrTensor *running_var,
                                 const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta,
                                 ocr_activation_t act, float momentum, float eps, int training,
                                 const OcrBnSync *sync);
void batchnorm2d_forward_accumulate_cpu(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd,
                                        OcrTensor *running_mean, OcrTensor *running_var, const OcrTensor *inp,
                                        const OcrTensor *gamma, const OcrTensor *beta, float momentum, float eps,
                                        int training);
void batchnorm2d_act_backward_cpu(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                                  const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta,
                                  const OcrTensor *save_mean, const OcrTensor *save_rstd,
                                  const OcrTensor *save_scale, ocr_activation_t act, ocr_dtype_t mid, int training,
                                  const OcrBnSync *sync);

// kernels/cpu/layernorm.c
void layernorm_forward_cpu(OcrTensor *out, OcrTensor *mean, OcrTensor *rstd, const OcrTensor *inp,
                           const OcrTensor *gamma, const OcrTensor *beta, float eps);
void layernorm_backward_cpu(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                            const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *mean, const OcrTensor *rstd);

// kernels/cpu/activation.c
void activation_forward_cpu(OcrTensor *out, const OcrTensor *inp, ocr_activation_t act);
void activation_backward_cpu(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *inp, ocr_activation_t act);
// The f32 loops behind them over whole arrays, in parallel blocks (y may equal x, dx may equal
// dy); the one-thread tile forms are in kernels/cpu/rowwise.h.
void cpu_act_forward_f32(float *y, const float *x, int64_t n, ocr_activation_t act);
void cpu_act_backward_f32(float *dx, const float *dy, const float *x, int64_t n, ocr_activation_t act);

// kernels/cpu/pool.c
void avgpool2d_forward_cpu(OcrTensor *out, const OcrTensor *inp, Pool2dParams p);
void avgpool2d_backward_cpu(OcrTensor *dinp, const OcrTensor *dout, Pool2dParams p);
void maxpool2d_forward_cpu(OcrTensor *out, const OcrTensor *inp, Pool2dParams p);
void maxpool2d_backward_cpu(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *inp, Pool2dParams p);
void adaptive_avgpool2d_forward_cpu(OcrTensor *out, const OcrTensor *inp);
void adaptive_avgpool2d_backward_cpu(OcrTensor *dinp, const OcrTensor *dout);

// kernels/cpu/elementwise.c
void channel_scale_forward_cpu(OcrTensor *out, const OcrTensor *inp, const OcrTensor *scale);
void channel_scale_backward_cpu(OcrTensor *dinp, OcrTensor *dscale, const OcrTensor *dout, const OcrTensor *inp,
                                const OcrTensor *scale);
void add_forward_cpu(OcrTensor *out, const OcrTensor *a, const OcrTensor *b);
void add_backward_cpu(OcrTensor *da, OcrTensor *db, const OcrTensor *dout);
void accumulate_cpu(OcrTensor *dst, const OcrTensor *src);
void scale_forward_cpu(OcrTensor *out, const OcrTensor *inp, float alpha);
void zero_tensor_cpu(OcrTensor *t);
void concat_forward_cpu(OcrTensor *out, const OcrTensor *const *inputs, int count);
void concat_backward_cpu(OcrTensor *const *dinputs, int count, const OcrTensor *dout);
void permute_forward_cpu(OcrTensor *out, const OcrTensor *inp, const int *perm);
void permute_backward_cpu(OcrTensor *dinp, const OcrTensor *dout, const int *perm);

// kernels/cpu/softmax.c
void softmax_forward_cpu(OcrTensor *out, const OcrTensor *inp);
void softmax_backward_cpu(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *out);
void log_softmax_forward_cpu(OcrTensor *out, const OcrTensor *inp);
void log_softmax_backward_cpu(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *out);

// kernels/cpu/attention.c
void attention_forward_cpu(OcrTensor *out, OcrTensor *probs, const OcrTensor *qkv, const OcrTensor *mask,
                           int num_heads, float scale, DropoutParams dropout);
void attention_backward_cpu(OcrTensor *dqkv, const OcrTensor *dout, const OcrTensor *qkv, const OcrTensor *probs,
                            int num_heads, float scale, DropoutParams dropout);

// kernels/cpu/dropout.c
void dropout_forward_cpu(OcrTensor *out, const OcrTensor *inp, DropoutParams d);
void dropout_backward_cpu(OcrTensor *dinp, const OcrTensor *dout, DropoutParams d);
void droppath_forward_cpu(OcrTensor *out, const OcrTensor *inp, DropoutParams d);
void droppath_backward_cpu(OcrTensor *dinp, const OcrTensor *dout, DropoutParams d);

// kernels/cpu/embedding.c
void embedding_forward_cpu(OcrTensor *out, const OcrTensor *ids, const OcrTensor *table, int padding_idx);
void embedding_backward_cpu(OcrTensor *dtable, const OcrTensor *dout, const OcrTensor *ids, int padding_idx);

// kernels/cpu/cross_entropy.c
void cross_entropy_forward_cpu(OcrTensor *losses, OcrTensor *loss, OcrTensor *counted, const OcrTensor *logits,
                               const OcrTensor *targets, CrossEntropyParams p);
void cross_entropy_backward_cpu(OcrTensor *dlogits, const OcrTensor *logits, const OcrTensor *targets,
                                CrossEntropyParams p);

// kernels/cpu/lstm.c
void lstm_cell_forward_cpu(OcrTensor *h, OcrTensor *c, const OcrTensor *gates, const OcrTensor *c_prev);
void lstm_cell_backward_cpu(OcrTensor *dgates, OcrTensor *dc_prev, const OcrTensor *dh, const OcrTensor *dc,
                            const OcrTensor *gates, const OcrTensor *c_prev);

// kernels/cpu/cast.c
void cast_forward_cpu(OcrTensor *out, const OcrTensor *inp);
void cast_backward_cpu(OcrTensor *dinp, const OcrTensor *dout);
int unscale_and_check_cpu(OcrTensor *const *grads, int count, float inv_scale, float *amax, int *nonfinite);

// kernels/cpu/optim.c
void adam_update_cpu(OcrTensor *param, OcrTensor *master, OcrTensor *m, OcrTensor *v, const OcrTensor *grad,
                     AdamParams p);
double grad_global_norm_cpu(OcrTensor *const *grads, int count);
double clip_grad_global_norm_cpu(OcrTensor *const *grads, int count, float max_norm);

// kernels/cpu/ctc.c
double ctc_loss_forward_cpu(OcrTensor *losses, OcrTensor *loss, OcrTensor *dlogits, OcrTensor *infeasible,
                            const OcrTensor *logits, const OcrTensor *targets, const OcrTensor *target_lengths,
                            const OcrTensor *input_lengths, CtcParams p);

// kernels/cpu/input.c (widths may be NULL: every column is an image column)
void input_normalize_forward_cpu(OcrTensor *out, const OcrTensor *inp, const OcrTensor *widths);

// kernels/cpu/affine.c
void scalar_affine_forward_cpu(OcrTensor *out, const OcrTensor *inp, const OcrTensor *scale, const OcrTensor *bias);
void scalar_affine_backward_cpu(OcrTensor *dinp, OcrTensor *dscale, OcrTensor *dbias, const OcrTensor *dout,
                                const OcrTensor *inp, const OcrTensor *scale);
void affine_act_affine_forward_cpu(OcrTensor *out, const OcrTensor *inp, const OcrTensor *s1, const OcrTensor *b1,
                                   ocr_activation_t act, const OcrTensor *s2, const OcrTensor *b2);
void affine_act_affine_backward_cpu(OcrTensor *dinp, OcrTensor *ds1, OcrTensor *db1, OcrTensor *ds2, OcrTensor *db2,
                                    const OcrTensor *dout, const OcrTensor *inp, const OcrTensor *s1,
                                    const OcrTensor *b1, ocr_activation_t act, const OcrTensor *s2, ocr_dtype_t mid);
void batch_broadcast_add_forward_cpu(OcrTensor *out, const OcrTensor *inp, const OcrTensor *pos);
void batch_broadcast_add_backward_cpu(OcrTensor *dinp, OcrTensor *dpos, const OcrTensor *dout);
void attention_local_mask_cpu(OcrTensor *mask, int grid_h, int grid_w, int window_h, int window_w);

// kernels/cpu/sar_attention.c
void sar_attention_score_forward_cpu(OcrTensor *scores, const OcrTensor *key, const OcrTensor *query, const OcrTensor *w,
                                     const OcrTensor *bias, const OcrTensor *valid_w, int grid_w);
void sar_attention_score_backward_cpu(OcrTensor *dkey, OcrTensor *dquery, OcrTensor *dw, OcrTensor *dbias,
                                      const OcrTensor *dscores, const OcrTensor *key, const OcrTensor *query,
                                      const OcrTensor *w, const OcrTensor *valid_w, int grid_w);

#endif

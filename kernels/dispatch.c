// The op interface's entry points (kernels/ops.h, kernels/ctc.h, kernels/input.h): each
// checks that its tensors share one device and runs the CPU kernel (kernels/cpu, <op>_cpu)
// or the CUDA one (kernels/cuda, <op>_cuda). The check is a short loop over the op's tensor
// pointers, so the CPU path costs a few comparisons per call.
#include <string.h>

#include "core/error.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/ctc.h"
#include "kernels/input.h"
#include "kernels/ops.h"

#ifdef OCR_HAVE_CUDA
#include "kernels/cuda/activation.h"
#include "kernels/cuda/affine.h"
#include "kernels/cuda/bn_act.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/conv.h"
#include "kernels/cuda/ctc.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/lstm.h"
#include "kernels/cuda/sar_attention.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/optim.h"
#include "kernels/cuda/pool.h"
#include "kernels/cuda/softmax_attention.h"
#endif

// Aborts naming the op and both devices.
static void device_mismatch(const char *op, const OcrTensor *a, const OcrTensor *b) {
    char da[32], db[32];
    ocr_device_name(a->device, da, sizeof da);
    ocr_device_name(b->device, db, sizeof db);
    ocr_abort_("tensors on one device", __FILE__, __LINE__, " %s: tensors on %s and %s", op, da, db);
}

// 1 when the op runs on CUDA. Every non-NULL tensor must be on the device of the first.
static int route(const char *op, int n, const OcrTensor *const *ts) {
    const OcrTensor *first = NULL;
    for (int i = 0; i < n; i++) {
        const OcrTensor *t = ts[i];
        if (!t) continue;
        if (!first)
            first = t;
        else if (t->device.type != first->device.type || t->device.index != first->device.index)
            device_mismatch(op, first, t);
    }
    if (!first || first->device.type == OCR_DEVICE_CPU) return 0;
#ifndef OCR_HAVE_CUDA
    OCR_ASSERT(0, "%s: tensors on cuda:%d, but this build has no CUDA backend", op, first->device.index);
#endif
    return 1;
}

// Same for a list of tensors (NULL entries skipped) and one more tensor (may be NULL).
static int route_list(const char *op, const OcrTensor *const *list, int count, const OcrTensor *extra) {
    const OcrTensor *first = extra;
    for (int i = 0; i < count; i++) {
        const OcrTensor *t = list[i];
        if (!t) continue;
        if (!first)
            first = t;
        else if (t->device.type != first->device.type || t->device.index != first->device.index)
            device_mismatch(op, first, t);
    }
    return route(op, 1, &first);
}

#define ON_CUDA(op, ...) \
    route(op, (int)(sizeof((const OcrTensor *const[]){__VA_ARGS__}) / sizeof(const OcrTensor *)), \
          (const OcrTensor *const[]){__VA_ARGS__})

// Runs the CUDA call in CUDA builds; route() has already aborted in the others.
#ifdef OCR_HAVE_CUDA
#define CUDA_CALL(call) call
#else
#define CUDA_CALL(call) ((void)0)
#endif

// ---- GEMM, linear, batched matmul ------------------------------------------------------------

void gemm(OcrTensor *c, const OcrTensor *a, const OcrTensor *b, int trans_a, int trans_b, float alpha, float beta) {
    if (ON_CUDA("gemm", c, a, b))
        CUDA_CALL(gemm_cuda(c, a, b, trans_a, trans_b, alpha, beta));
    else
        gemm_cpu(c, a, b, trans_a, trans_b, alpha, beta);
}

void linear_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *weight, const OcrTensor *bias) {
    if (ON_CUDA("linear_forward", out, inp, weight, bias))
        CUDA_CALL(linear_forward_cuda(out, inp, weight, bias));
    else
        linear_forward_cpu(out, inp, weight, bias);
}

void linear_backward(OcrTensor *dinp, OcrTensor *dweight, OcrTensor *dbias, const OcrTensor *dout,
                     const OcrTensor *inp, const OcrTensor *weight) {
    if (ON_CUDA("linear_backward", dinp, dweight, dbias, dout, inp, weight))
        CUDA_CALL(linear_backward_cuda(dinp, dweight, dbias, dout, inp, weight));
    else
        linear_backward_cpu(dinp, dweight, dbias, dout, inp, weight);
}

void matmul_batched_forward(OcrTensor *out, const OcrTensor *a, const OcrTensor *b, int trans_a, int trans_b,
                            float alpha) {
    if (ON_CUDA("matmul_batched_forward", out, a, b))
        CUDA_CALL(matmul_batched_forward_cuda(out, a, b, trans_a, trans_b, alpha));
    else
        matmul_batched_forward_cpu(out, a, b, trans_a, trans_b, alpha);
}

void matmul_batched_backward(OcrTensor *da, OcrTensor *db, const OcrTensor *dout, const OcrTensor *a,
                             const OcrTensor *b, int trans_a, int trans_b, float alpha) {
    if (ON_CUDA("matmul_batched_backward", da, db, dout, a, b))
        CUDA_CALL(matmul_batched_backward_cuda(da, db, dout, a, b, trans_a, trans_b, alpha));
    else
        matmul_batched_backward_cpu(da, db, dout, a, b, trans_a, trans_b, alpha);
}

// ---- convolution ---------------------------------------------------------------------------------

void conv2d_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *weight, const OcrTensor *bias,
                    Conv2dParams p) {
    if (ON_CUDA("conv2d_forward", out, inp, weight, bias))
        CUDA_CALL(conv2d_forward_cuda(out, inp, weight, bias, p));
    else
        conv2d_forward_cpu(out, inp, weight, bias, p);
}

void conv2d_backward(OcrTensor *dinp, OcrTensor *dweight, OcrTensor *dbias, const OcrTensor *dout,
                     const OcrTensor *inp, const OcrTensor *weight, Conv2dParams p) {
    if (ON_CUDA("conv2d_backward", dinp, dweight, dbias, dout, inp, weight))
        CUDA_CALL(conv2d_backward_cuda(dinp, dweight, dbias, dout, inp, weight, p));
    else
        conv2d_backward_cpu(dinp, dweight, dbias, dout, inp, weight, p);
}

// ---- normalisation --------------------------------------------------------------------------------

void batchnorm2d_forward(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd, OcrTensor *running_mean,
                         OcrTensor *running_var, const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta,
                         float momentum, float eps, int training) {
    if (ON_CUDA("batchnorm2d_forward", out, save_mean, save_rstd, running_mean, running_var, inp, gamma, beta))
        CUDA_CALL(batchnorm2d_forward_cuda(out, save_mean, save_rstd, running_mean, running_var, inp, gamma, beta,
                                           momentum, eps, training));
    else
        batchnorm2d_forward_cpu(out, save_mean, save_rstd, running_mean, running_var, inp, gamma, beta, momentum, eps,
                                training);
}

void batchnorm2d_forward_accumulate(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd,
                                    OcrTensor *running_mean, OcrTensor *running_var, const OcrTensor *inp,
                                    const OcrTensor *gamma, const OcrTensor *beta, float momentum, float eps,
                                    int training) {
    if (ON_CUDA("batchnorm2d_forward_accumulate", out, save_mean, save_rstd, running_mean, running_var, inp, gamma,
                beta))
        CUDA_CALL(batchnorm2d_forward_accumulate_cuda(out, save_mean, save_rstd, running_mean, running_var, inp, gamma,
                                                      beta, momentum, eps, training));
    else
        batchnorm2d_forward_accumulate_cpu(out, save_mean, save_rstd, running_mean, running_var, inp, gamma, beta,
                                           momentum, eps, training);
}

void batchnorm2d_backward(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                          const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *save_mean,
                          const OcrTensor *save_rstd, int training) {
    if (ON_CUDA("batchnorm2d_backward", dinp, dgamma, dbeta, dout, inp, gamma, save_mean, save_rstd))
        CUDA_CALL(batchnorm2d_backward_cuda(dinp, dgamma, dbeta, dout, inp, gamma, save_mean, save_rstd, training));
    else
        batchnorm2d_backward_cpu(dinp, dgamma, dbeta, dout, inp, gamma, save_mean, save_rstd, training);
}

void layernorm_forward(OcrTensor *out, OcrTensor *mean, OcrTensor *rstd, const OcrTensor *inp,
                       const OcrTensor *gamma, const OcrTensor *beta, float eps) {
    if (ON_CUDA("layernorm_forward", out, mean, rstd, inp, gamma, beta))
        CUDA_CALL(layernorm_forward_cuda(out, mean, rstd, inp, gamma, beta, eps));
    else
        layernorm_forward_cpu(out, mean, rstd, inp, gamma, beta, eps);
}

void layernorm_backward(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                        const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *mean, const OcrTensor *rstd) {
    if (ON_CUDA("layernorm_backward", dinp, dgamma, dbeta, dout, inp, gamma, mean, rstd))
        CUDA_CALL(layernorm_backward_cuda(dinp, dgamma, dbeta, dout, inp, gamma, mean, rstd));
    else
        layernorm_backward_cpu(dinp, dgamma, dbeta, dout, inp, gamma, mean, rstd);
}

// ---- batch norm + activation, fused --------------------------------------------------------------

void batchnorm2d_act_forward_sync(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd, OcrTensor *save_scale,
                                  OcrTensor *running_mean, OcrTensor *running_var, const OcrTensor *inp,
                                  const OcrTensor *gamma, const OcrTensor *beta, ocr_activation_t act, float momentum,
                                  float eps, int training, const OcrBnSync *sync) {
    if (ON_CUDA("batchnorm2d_act_forward", out, save_mean, save_rstd, save_scale, running_mean, running_var, inp,
                gamma, beta))
        CUDA_CALL(batchnorm2d_act_forward_cuda(out, save_mean, save_rstd, save_scale, running_mean, running_var, inp,
                                               gamma, beta, act, momentum, eps, training, sync));
    else
        batchnorm2d_act_forward_cpu(out, save_mean, save_rstd, save_scale, running_mean, running_var, inp, gamma, beta,
                                    act, momentum, eps, training, sync);
}

void batchnorm2d_act_forward(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd, OcrTensor *save_scale,
                             OcrTensor *running_mean, OcrTensor *running_var, const OcrTensor *inp,
                             const OcrTensor *gamma, const OcrTensor *beta, ocr_activation_t act, float momentum,
                             float eps, int training) {
    batchnorm2d_act_forward_sync(out, save_mean, save_rstd, save_scale, running_mean, running_var, inp, gamma, beta,
                                 act, momentum, eps, training, NULL);
}

void batchnorm2d_act_backward_sync(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                                   const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta,
                                   const OcrTensor *save_mean, const OcrTensor *save_rstd, const OcrTensor *save_scale,
                                   ocr_activation_t act, ocr_dtype_t mid, int training, const OcrBnSync *sync) {
    if (ON_CUDA("batchnorm2d_act_backward", dinp, dgamma, dbeta, dout, inp, gamma, beta, save_mean, save_rstd,
                save_scale))
        CUDA_CALL(batchnorm2d_act_backward_cuda(dinp, dgamma, dbeta, dout, inp, gamma, beta, save_mean, save_rstd,
                                                save_scale, act, mid, training, sync));
    else
        batchnorm2d_act_backward_cpu(dinp, dgamma, dbeta, dout, inp, gamma, beta, save_mean, save_rstd, save_scale,
                                     act, mid, training, sync);
}

void batchnorm2d_act_backward(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                              const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta,
                              const OcrTensor *save_mean, const OcrTensor *save_rstd, const OcrTensor *save_scale,
                              ocr_activation_t act, ocr_dtype_t mid, int training) {
    batchnorm2d_act_backward_sync(dinp, dgamma, dbeta, dout, inp, gamma, beta, save_mean, save_rstd, save_scale, act,
                                  mid, training, NULL);
}

// ---- activations ---------------------------------------------------------------------------------------

void activation_forward(OcrTensor *out, const OcrTensor *inp, ocr_activation_t act) {
    if (ON_CUDA("activation_forward", out, inp))
        CUDA_CALL(activation_forward_cuda(out, inp, act));
    else
        activation_forward_cpu(out, inp, act);
}

void activation_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *inp, ocr_activation_t act) {
    if (ON_CUDA("activation_backward", dinp, dout, inp))
        CUDA_CALL(activation_backward_cuda(dinp, dout, inp, act));
    else
        activation_backward_cpu(dinp, dout, inp, act);
}

// ---- pooling -------------------------------------------------------------------------------------------

void avgpool2d_forward(OcrTensor *out, const OcrTensor *inp, Pool2dParams p) {
    if (ON_CUDA("avgpool2d_forward", out, inp))
        CUDA_CALL(avgpool2d_forward_cuda(out, inp, p));
    else
        avgpool2d_forward_cpu(out, inp, p);
}

void avgpool2d_backward(OcrTensor *dinp, const OcrTensor *dout, Pool2dParams p) {
    if (ON_CUDA("avgpool2d_backward", dinp, dout))
        CUDA_CALL(avgpool2d_backward_cuda(dinp, dout, p));
    else
        avgpool2d_backward_cpu(dinp, dout, p);
}

void maxpool2d_forward(OcrTensor *out, const OcrTensor *inp, Pool2dParams p) {
    if (ON_CUDA("maxpool2d_forward", out, inp))
        CUDA_CALL(maxpool2d_forward_cuda(out, inp, p));
    else
        maxpool2d_forward_cpu(out, inp, p);
}

void maxpool2d_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *inp, Pool2dParams p) {
    if (ON_CUDA("maxpool2d_backward", dinp, dout, inp))
        CUDA_CALL(maxpool2d_backward_cuda(dinp, dout, inp, p));
    else
        maxpool2d_backward_cpu(dinp, dout, inp, p);
}

void adaptive_avgpool2d_forward(OcrTensor *out, const OcrTensor *inp) {
    if (ON_CUDA("adaptive_avgpool2d_forward", out, inp))
        CUDA_CALL(adaptive_avgpool2d_forward_cuda(out, inp));
    else
        adaptive_avgpool2d_forward_cpu(out, inp);
}

void adaptive_avgpool2d_backward(OcrTensor *dinp, const OcrTensor *dout) {
    if (ON_CUDA("adaptive_avgpool2d_backward", dinp, dout))
        CUDA_CALL(adaptive_avgpool2d_backward_cuda(dinp, dout));
    else
        adaptive_avgpool2d_backward_cpu(dinp, dout);
}

// ---- elementwise and layout -------------------------------------------------------------------------------

void channel_scale_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *scale) {
    if (ON_CUDA("channel_scale_forward", out, inp, scale))
        CUDA_CALL(channel_scale_forward_cuda(out, inp, scale));
    else
        channel_scale_forward_cpu(out, inp, scale);
}

void channel_scale_backward(OcrTensor *dinp, OcrTensor *dscale, const OcrTensor *dout, const OcrTensor *inp,
                            const OcrTensor *scale) {
    if (ON_CUDA("channel_scale_backward", dinp, dscale, dout, inp, scale))
        CUDA_CALL(channel_scale_backward_cuda(dinp, dscale, dout, inp, scale));
    else
        channel_scale_backward_cpu(dinp, dscale, dout, inp, scale);
}

void add_forward(OcrTensor *out, const OcrTensor *a, const OcrTensor *b) {
    if (ON_CUDA("add_forward", out, a, b))
        CUDA_CALL(add_forward_cuda(out, a, b));
    else
        add_forward_cpu(out, a, b);
}

void add_backward(OcrTensor *da, OcrTensor *db, const OcrTensor *dout) {
    if (ON_CUDA("add_backward", da, db, dout))
        CUDA_CALL(add_backward_cuda(da, db, dout));
    else
        add_backward_cpu(da, db, dout);
}

void accumulate(OcrTensor *dst, const OcrTensor *src) {
    if (ON_CUDA("accumulate", dst, src))
        CUDA_CALL(accumulate_cuda(dst, src));
    else
        accumulate_cpu(dst, src);
}

void scale_forward(OcrTensor *out, const OcrTensor *inp, float alpha) {
    if (ON_CUDA("scale_forward", out, inp))
        CUDA_CALL(scale_forward_cuda(out, inp, alpha));
    else
        scale_forward_cpu(out, inp, alpha);
}

void zero_tensor(OcrTensor *t) {
    if (ON_CUDA("zero_tensor", t))
        CUDA_CALL(zero_tensor_cuda(t));
    else
        zero_tensor_cpu(t);
}

void scalar_affine_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *scale, const OcrTensor *bias) {
    if (ON_CUDA("scalar_affine_forward", out, inp, scale, bias))
        CUDA_CALL(scalar_affine_forward_cuda(out, inp, scale, bias));
    else
        scalar_affine_forward_cpu(out, inp, scale, bias);
}

void scalar_affine_backward(OcrTensor *dinp, OcrTensor *dscale, OcrTensor *dbias, const OcrTensor *dout,
                            const OcrTensor *inp, const OcrTensor *scale) {
    if (ON_CUDA("scalar_affine_backward", dinp, dscale, dbias, dout, inp, scale))
        CUDA_CALL(scalar_affine_backward_cuda(dinp, dscale, dbias, dout, inp, scale));
    else
        scalar_affine_backward_cpu(dinp, dscale, dbias, dout, inp, scale);
}

void affine_act_affine_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *s1, const OcrTensor *b1,
                               ocr_activation_t act, const OcrTensor *s2, const OcrTensor *b2) {
    if (ON_CUDA("affine_act_affine_forward", out, inp, s1, b1, s2, b2))
        CUDA_CALL(affine_act_affine_forward_cuda(out, inp, s1, b1, act, s2, b2));
    else
        affine_act_affine_forward_cpu(out, inp, s1, b1, act, s2, b2);
}

void affine_act_affine_backward(OcrTensor *dinp, OcrTensor *ds1, OcrTensor *db1, OcrTensor *ds2, OcrTensor *db2,
                                const OcrTensor *dout, const OcrTensor *inp, const OcrTensor *s1, const OcrTensor *b1,
                                ocr_activation_t act, const OcrTensor *s2, ocr_dtype_t mid) {
    if (ON_CUDA("affine_act_affine_backward", dinp, ds1, db1, ds2, db2, dout, inp, s1, b1, s2))
        CUDA_CALL(affine_act_affine_backward_cuda(dinp, ds1, db1, ds2, db2, dout, inp, s1, b1, act, s2, mid));
    else
        affine_act_affine_backward_cpu(dinp, ds1, db1, ds2, db2, dout, inp, s1, b1, act, s2, mid);
}

void batch_broadcast_add_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *pos) {
    if (ON_CUDA("batch_broadcast_add_forward", out, inp, pos))
        CUDA_CALL(batch_broadcast_add_forward_cuda(out, inp, pos));
    else
        batch_broadcast_add_forward_cpu(out, inp, pos);
}

void batch_broadcast_add_backward(OcrTensor *dinp, OcrTensor *dpos, const OcrTensor *dout) {
    if (ON_CUDA("batch_broadcast_add_backward", dinp, dpos, dout))
        CUDA_CALL(batch_broadcast_add_backward_cuda(dinp, dpos, dout));
    else
        batch_broadcast_add_backward_cpu(dinp, dpos, dout);
}

void concat_forward(OcrTensor *out, const OcrTensor *const *inputs, int count) {
    if (route_list("concat_forward", inputs, count, out))
        CUDA_CALL(concat_forward_cuda(out, inputs, count));
    else
        concat_forward_cpu(out, inputs, count);
}

void concat_backward(OcrTensor *const *dinputs, int count, const OcrTensor *dout) {
    if (route_list("concat_backward", (const OcrTensor *const *)dinputs, count, dout))
        CUDA_CALL(concat_backward_cuda(dinputs, count, dout));
    else
        concat_backward_cpu(dinputs, count, dout);
}

void permute_forward(OcrTensor *out, const OcrTensor *inp, const int *perm) {
    if (ON_CUDA("permute_forward", out, inp))
        CUDA_CALL(permute_forward_cuda(out, inp, perm));
    else
        permute_forward_cpu(out, inp, perm);
}

void permute_backward(OcrTensor *dinp, const OcrTensor *dout, const int *perm) {
    if (ON_CUDA("permute_backward", dinp, dout))
        CUDA_CALL(permute_backward_cuda(dinp, dout, perm));
    else
        permute_backward_cpu(dinp, dout, perm);
}

// ---- softmax, attention ----------------------------------------------------------------------------------

void softmax_forward(OcrTensor *out, const OcrTensor *inp) {
    if (ON_CUDA("softmax_forward", out, inp))
        CUDA_CALL(softmax_forward_cuda(out, inp));
    else
        softmax_forward_cpu(out, inp);
}

void softmax_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *out) {
    if (ON_CUDA("softmax_backward", dinp, dout, out))
        CUDA_CALL(softmax_backward_cuda(dinp, dout, out));
    else
        softmax_backward_cpu(dinp, dout, out);
}

void log_softmax_forward(OcrTensor *out, const OcrTensor *inp) {
    if (ON_CUDA("log_softmax_forward", out, inp))
        CUDA_CALL(log_softmax_forward_cuda(out, inp));
    else
        log_softmax_forward_cpu(out, inp);
}

void log_softmax_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *out) {
    if (ON_CUDA("log_softmax_backward", dinp, dout, out))
        CUDA_CALL(log_softmax_backward_cuda(dinp, dout, out));
    else
        log_softmax_backward_cpu(dinp, dout, out);
}

void attention_forward(OcrTensor *out, OcrTensor *probs, const OcrTensor *qkv, const OcrTensor *mask, int num_heads,
                       float scale, DropoutParams dropout) {
    if (ON_CUDA("attention_forward", out, probs, qkv, mask))
        CUDA_CALL(attention_forward_cuda(out, probs, qkv, mask, num_heads, scale, dropout));
    else
        attention_forward_cpu(out, probs, qkv, mask, num_heads, scale, dropout);
}

void attention_backward(OcrTensor *dqkv, const OcrTensor *dout, const OcrTensor *qkv, const OcrTensor *probs,
                        int num_heads, float scale, DropoutParams dropout) {
    if (ON_CUDA("attention_backward", dqkv, dout, qkv, probs))
        CUDA_CALL(attention_backward_cuda(dqkv, dout, qkv, probs, num_heads, scale, dropout));
    else
        attention_backward_cpu(dqkv, dout, qkv, probs, num_heads, scale, dropout);
}

void attention_local_mask(OcrTensor *mask, int grid_h, int grid_w, int window_h, int window_w) {
    if (ON_CUDA("attention_local_mask", mask))
        CUDA_CALL(attention_local_mask_cuda(mask, grid_h, grid_w, window_h, window_w));
    else
        attention_local_mask_cpu(mask, grid_h, grid_w, window_h, window_w);
}

// ---- dropout, drop path -------------------------------------------------------------------------------------

void dropout_forward(OcrTensor *out, const OcrTensor *inp, DropoutParams d) {
    if (ON_CUDA("dropout_forward", out, inp))
        CUDA_CALL(dropout_forward_cuda(out, inp, d));
    else
        dropout_forward_cpu(out, inp, d);
}

void dropout_backward(OcrTensor *dinp, const OcrTensor *dout, DropoutParams d) {
    if (ON_CUDA("dropout_backward", dinp, dout))
        CUDA_CALL(dropout_backward_cuda(dinp, dout, d));
    else
        dropout_backward_cpu(dinp, dout, d);
}

void droppath_forward(OcrTensor *out, const OcrTensor *inp, DropoutParams d) {
    if (ON_CUDA("droppath_forward", out, inp))
        CUDA_CALL(droppath_forward_cuda(out, inp, d));
    else
        droppath_forward_cpu(out, inp, d);
}

void droppath_backward(OcrTensor *dinp, const OcrTensor *dout, DropoutParams d) {
    if (ON_CUDA("droppath_backward", dinp, dout))
        CUDA_CALL(droppath_backward_cuda(dinp, dout, d));
    else
        droppath_backward_cpu(dinp, dout, d);
}

// ---- casts and AMP support --------------------------------------------------------------------------------------

void cast_forward(OcrTensor *out, const OcrTensor *inp) {
    if (ON_CUDA("cast_forward", out, inp))
        CUDA_CALL(cast_forward_cuda(out, inp));
    else
        cast_forward_cpu(out, inp);
}

void cast_backward(OcrTensor *dinp, const OcrTensor *dout) {
    if (ON_CUDA("cast_backward", dinp, dout))
        CUDA_CALL(cast_backward_cuda(dinp, dout));
    else
        cast_backward_cpu(dinp, dout);
}

int unscale_and_check(OcrTensor *const *grads, int count, float inv_scale, float *amax, int *nonfinite) {
    if (route_list("unscale_and_check", (const OcrTensor *const *)grads, count, NULL)) {
#ifdef OCR_HAVE_CUDA
        return unscale_and_check_cuda(grads, count, inv_scale, amax, nonfinite);
#endif
    }
    return unscale_and_check_cpu(grads, count, inv_scale, amax, nonfinite);
}

void adam_update(OcrTensor *param, OcrTensor *master, OcrTensor *m, OcrTensor *v, const OcrTensor *grad,
                 AdamParams p) {
    if (ON_CUDA("adam_update", param, master, m, v, grad))
        CUDA_CALL(adam_update_cuda(param, master, m, v, grad, p));
    else
        adam_update_cpu(param, master, m, v, grad, p);
}

double grad_global_norm(OcrTensor *const *grads, int count) {
    if (route_list("grad_global_norm", (const OcrTensor *const *)grads, count, NULL)) {
#ifdef OCR_HAVE_CUDA
        return grad_global_norm_cuda(grads, count);
#endif
    }
    return grad_global_norm_cpu(grads, count);
}

double clip_grad_global_norm(OcrTensor *const *grads, int count, float max_norm) {
    if (route_list("clip_grad_global_norm", (const OcrTensor *const *)grads, count, NULL)) {
#ifdef OCR_HAVE_CUDA
        return clip_grad_global_norm_cuda(grads, count, max_norm);
#endif
    }
    return clip_grad_global_norm_cpu(grads, count, max_norm);
}

// ---- CTC loss, input normalisation ------------------------------------------------------------------------------

double ctc_loss_forward(OcrTensor *losses, OcrTensor *loss, OcrTensor *dlogits, OcrTensor *infeasible,
                        const OcrTensor *logits, const OcrTensor *targets, const OcrTensor *target_lengths,
                        const OcrTensor *input_lengths, CtcParams p) {
    if (ON_CUDA("ctc_loss_forward", logits, losses, loss, dlogits, infeasible, targets, target_lengths,
                input_lengths)) {
#ifdef OCR_HAVE_CUDA
        return ctc_loss_forward_cuda(losses, loss, dlogits, infeasible, logits, targets, target_lengths,
                                     input_lengths, p);
#endif
    }
    return ctc_loss_forward_cpu(losses, loss, dlogits, infeasible, logits, targets, target_lengths, input_lengths, p);
}

void input_normalize_forward(OcrTensor *out, const OcrTensor *inp) { input_normalize_padded_forward(out, inp, NULL); }

void input_normalize_padded_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *widths) {
    if (ON_CUDA("input_normalize_forward", out, inp, widths))
        CUDA_CALL(input_normalize_forward_cuda(out, inp, widths));
    else
        input_normalize_forward_cpu(out, inp, widths);
}

// ---- copies ----------------------------------------------------------------------------------------

void copy_bytes(ocr_device_t dst_device, void *dst, ocr_device_t src_device, const void *src, size_t bytes) {
    if (bytes == 0) return;
    if (dst_device.type == OCR_DEVICE_CPU && src_device.type == OCR_DEVICE_CPU) {
        memmove(dst, src, bytes);
        return;
    }
#ifdef OCR_HAVE_CUDA
    int d = dst_device.type == OCR_DEVICE_CUDA ? dst_device.index : -1;
    int s = src_device.type == OCR_DEVICE_CUDA ? src_device.index : -1;
    if (ocr_cuda_copy_bytes(d, dst, s, src, bytes) != 0)
        ocr_abort_("copy_bytes", __FILE__, __LINE__, " %zu bytes: %s", bytes, ocr_last_error());
#else
    OCR_ASSERT(0, "copy_bytes: a CUDA device, but this build has no CUDA backend");
#endif
}

// ---- embedding lookup, cross-entropy ------------------------------------------------------------------

void embedding_forward(OcrTensor *out, const OcrTensor *ids, const OcrTensor *table, int padding_idx) {
    if (ON_CUDA("embedding_forward", out, ids, table))
        CUDA_CALL(embedding_forward_cuda(out, ids, table, padding_idx));
    else
        embedding_forward_cpu(out, ids, table, padding_idx);
}

void embedding_backward(OcrTensor *dtable, const OcrTensor *dout, const OcrTensor *ids, int padding_idx) {
    if (ON_CUDA("embedding_backward", dtable, dout, ids))
        CUDA_CALL(embedding_backward_cuda(dtable, dout, ids, padding_idx));
    else
        embedding_backward_cpu(dtable, dout, ids, padding_idx);
}

void cross_entropy_forward(OcrTensor *losses, OcrTensor *loss, OcrTensor *counted, const OcrTensor *logits,
                           const OcrTensor *targets, CrossEntropyParams p) {
    if (ON_CUDA("cross_entropy_forward", logits, targets, losses, loss, counted))
        CUDA_CALL(cross_entropy_forward_cuda(losses, loss, counted, logits, targets, p));
    else
        cross_entropy_forward_cpu(losses, loss, counted, logits, targets, p);
}

void cross_entropy_backward(OcrTensor *dlogits, const OcrTensor *logits, const OcrTensor *targets,
                            CrossEntropyParams p) {
    if (ON_CUDA("cross_entropy_backward", dlogits, logits, targets))
        CUDA_CALL(cross_entropy_backward_cuda(dlogits, logits, targets, p));
    else
        cross_entropy_backward_cpu(dlogits, logits, targets, p);
}

// ---- LSTM cell ----------------------------------------------------------------------------------------------

void lstm_cell_forward(OcrTensor *h, OcrTensor *c, const OcrTensor *gates, const OcrTensor *c_prev) {
    if (ON_CUDA("lstm_cell_forward", h, c, gates, c_prev))
        CUDA_CALL(lstm_cell_forward_cuda(h, c, gates, c_prev));
    else
        lstm_cell_forward_cpu(h, c, gates, c_prev);
}

void lstm_cell_backward(OcrTensor *dgates, OcrTensor *dc_prev, const OcrTensor *dh, const OcrTensor *dc,
                        const OcrTensor *gates, const OcrTensor *c_prev) {
    if (ON_CUDA("lstm_cell_backward", dgates, dc_prev, dh, dc, gates, c_prev))
        CUDA_CALL(lstm_cell_backward_cuda(dgates, dc_prev, dh, dc, gates, c_prev));
    else
        lstm_cell_backward_cpu(dgates, dc_prev, dh, dc, gates, c_prev);
}

// ---- SAR's 2-D attention score ------------------------------------------------------------------------

void sar_attention_score_forward(OcrTensor *scores, const OcrTensor *key, const OcrTensor *query, const OcrTensor *w,
                                 const OcrTensor *bias, const OcrTensor *valid_w, int grid_w) {
    if (ON_CUDA("sar_attention_score_forward", scores, key, query, w, bias, valid_w))
        CUDA_CALL(sar_attention_score_forward_cuda(scores, key, query, w, bias, valid_w, grid_w));
    else
        sar_attention_score_forward_cpu(scores, key, query, w, bias, valid_w, grid_w);
}

void sar_attention_score_backward(OcrTensor *dkey, OcrTensor *dquery, OcrTensor *dw, OcrTensor *dbias,
                                  const OcrTensor *dscores, const OcrTensor *key, const OcrTensor *query,
                                  const OcrTensor *w, const OcrTensor *valid_w, int grid_w) {
    if (ON_CUDA("sar_attention_score_backward", dkey, dquery, dw, dbias, dscores, key, query, w, valid_w))
        CUDA_CALL(sar_attention_score_backward_cuda(dkey, dquery, dw, dbias, dscores, key, query, w, valid_w, grid_w));
    else
        sar_attention_score_backward_cpu(dkey, dquery, dw, dbias, dscores, key, query, w, valid_w, grid_w);
}

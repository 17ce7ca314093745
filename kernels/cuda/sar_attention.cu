// SAR's 2-D attention score on the GPU (see kernels/cpu/sar_attention.c for the math).
//
// Forward: one thread per score (b, t, p), the sum over d in the CPU's order. Backward without
// atomics: dquery one thread per (b, t, d) summing over p, dkey one thread per (b, p, d) summing
// over t (both in the CPU's order: same fp32 sums), and the weight/bias gradients one block per
// d (plus one for the bias) with a fixed-shape tree reduction in double, so the results are
// deterministic. tanhf differs from glibc's by an ulp or two.
#include <math.h>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_ops.h"

#define SAR_THREADS 256

struct SarArgs {
    int64_t B, T, P, D, W;
};

__device__ __forceinline__ int64_t sar_valid(const int32_t *vw, int64_t b, int64_t W) { return vw ? vw[b] : W; }

static __global__ void sar_fwd_kernel(float *s, const void *k, int kdt, const void *q, int qdt, const void *w, int wdt,
                               const void *bias, int bdt, const int32_t *vw, SarArgs a) {
    const int64_t n = a.B * a.T * a.P;
    const float b0 = bias ? ld(bias, bdt, 0) : 0.0f;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t p = i % a.P, bt = i / a.P, b = bt / a.T;
        if (p % a.W >= sar_valid(vw, b, a.W)) {
            s[i] = -INFINITY;
            continue;
        }
        const int64_t kb = (b * a.P + p) * a.D, qb = bt * a.D;
        float acc = 0.0f;
        for (int64_t d = 0; d < a.D; d++) acc += ld(w, wdt, d) * tanhf(ld(k, kdt, kb + d) + ld(q, qdt, qb + d));
        s[i] = acc + b0;
    }
}

static __global__ void sar_dq_kernel(void *dq, int dqdt, const float *ds, const void *k, int kdt, const void *q,
                                     int qdt, const void *w, int wdt, const int32_t *vw, SarArgs a) {
    const int64_t n = a.B * a.T * a.D;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t d = i % a.D, bt = i / a.D, b = bt / a.T, valid = sar_valid(vw, b, a.W);
        const float qv = ld(q, qdt, i), wd = ld(w, wdt, d);
        float acc = 0.0f;
        for (int64_t p = 0; p < a.P; p++) {
            if (p % a.W >= valid) continue;
            const float e = tanhf(ld(k, kdt, (b * a.P + p) * a.D + d) + qv);
            acc += ds[bt * a.P + p] * wd * (1.0f - e * e);
        }
        st(dq, dqdt, i, acc);
    }
}

static __global__ void sar_dk_kernel(void *dk, int dkdt, const float *ds, const void *k, int kdt, const void *q,
                                     int qdt, const void *w, int wdt, const int32_t *vw, SarArgs a) {
    const int64_t n = a.B * a.P * a.D;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t d = i % a.D, bp = i / a.D, b = bp / a.P, p = bp % a.P;
        float acc = 0.0f;
        if (p % a.W < sar_valid(vw, b, a.W)) {
            const float kv = ld(k, kdt, i), wd = ld(w, wdt, d);
            for (int64_t t = 0; t < a.T; t++) {
                const float e = tanhf(kv + ld(q, qdt, (b * a.T + t) * a.D + d));
                acc += ds[(b * a.T + t) * a.P + p] * wd * (1.0f - e * e);
            }
        }
        st(dk, dkdt, i, acc);
    }
}

// Block d < D: dw[d] += Σ ds·tanh(k_d + q_d); block D: dbias += Σ ds (valid positions only).
static __global__ void sar_dw_kernel(void *dw, int dwdt, void *dbias, int dbdt, const float *ds, const void *k, int kdt,
                              const void *q, int qdt, const int32_t *vw, SarArgs a) {
    __shared__ double red[SAR_THREADS];
    const int64_t d = blockIdx.x, n = a.B * a.T * a.P;
    double acc = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += SAR_THREADS) {
        const int64_t p = i % a.P, bt = i / a.P, b = bt / a.T;
        if (p % a.W >= sar_valid(vw, b, a.W)) continue;
        if (d == a.D)
            acc += ds[i];
        else
            acc += (double)ds[i] * tanhf(ld(k, kdt, (b * a.P + p) * a.D + d) + ld(q, qdt, bt * a.D + d));
    }
    red[threadIdx.x] = acc;
    __syncthreads();
    for (int s = SAR_THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        if (d == a.D) {
            if (dbias) st(dbias, dbdt, 0, ld(dbias, dbdt, 0) + (float)red[0]);
        } else if (dw) {
            st(dw, dwdt, d, ld(dw, dwdt, d) + (float)red[0]);
        }
    }
}

static SarArgs sar_args(const OcrTensor *scores, const OcrTensor *key, const OcrTensor *query, const OcrTensor *w,
                        const OcrTensor *valid_w, int grid_w, const char *op) {
    CUDA_ASSERT_FLOAT(key);
    CUDA_ASSERT_FLOAT(query);
    CUDA_ASSERT_FLOAT(w);
    OCR_ASSERT(key->ndim == 3 && query->ndim == 3 && key->shape[0] == query->shape[0] &&
                   key->shape[2] == query->shape[2],
               "%s: key (B, P, D) and query (B, T, D) must agree", op);
    SarArgs a = {key->shape[0], query->shape[1], key->shape[1], key->shape[2], grid_w};
    OCR_ASSERT(ocr_tensor_numel(w) == a.D, "%s: w must hold D values", op);
    OCR_ASSERT(grid_w >= 1 && a.P % grid_w == 0, "%s: positions are not rows of %d columns", op, grid_w);
    OCR_ASSERT(scores->device.type == OCR_DEVICE_CUDA && scores->dtype == OCR_F32 && scores->ndim == 3 &&
                   scores->shape[0] == a.B && scores->shape[1] == a.T && scores->shape[2] == a.P,
               "%s: scores must be CUDA f32 (B, T, P)", op);
    OCR_ASSERT(!valid_w || (valid_w->dtype == OCR_I32 && ocr_tensor_numel(valid_w) == a.B),
               "%s: valid_w must be B int32 values", op);
    return a;
}

extern "C" void ocr_cuda_sar_attention_score_forward(OcrTensor *scores, const OcrTensor *key, const OcrTensor *query,
                                                     const OcrTensor *w, const OcrTensor *bias,
                                                     const OcrTensor *valid_w, int grid_w) {
    SarArgs a = sar_args(scores, key, query, w, valid_w, grid_w, "sar_attention_score");
    CudaCtx ctx = ocr_cuda_enter(key);
    const int64_t n = a.B * a.T * a.P;
    if (n == 0) return;
    sar_fwd_kernel<<<cuda_blocks(n, SAR_THREADS), SAR_THREADS, 0, ctx.stream>>>(
        (float *)scores->data, key->data, key->dtype, query->data, query->dtype, w->data, w->dtype, opt_data(bias),
        opt_dtype(bias), valid_w ? (const int32_t *)valid_w->data : NULL, a);
    OCR_CUDA_LAUNCHED();
}

extern "C" void ocr_cuda_sar_attention_score_backward(OcrTensor *dkey, OcrTensor *dquery, OcrTensor *dw,
                                                      OcrTensor *dbias, const OcrTensor *dscores, const OcrTensor *key,
                                                      const OcrTensor *query, const OcrTensor *w,
                                                      const OcrTensor *valid_w, int grid_w) {
    SarArgs a = sar_args(dscores, key, query, w, valid_w, grid_w, "sar_attention_score_backward");
    if (dkey) OCR_ASSERT(ocr_tensor_same_shape(dkey, key), "sar_attention_score_backward: dkey must be (B, P, D)");
    if (dquery) OCR_ASSERT(ocr_tensor_same_shape(dquery, query), "sar_attention_score_backward: dquery must be (B, T, D)");
    if (dw) OCR_ASSERT(ocr_tensor_numel(dw) == a.D, "sar_attention_score_backward: dw must hold D values");
    if (dbias) OCR_ASSERT(ocr_tensor_numel(dbias) == 1, "sar_attention_score_backward: dbias must hold 1 value");
    CudaCtx ctx = ocr_cuda_enter(key);
    const float *ds = (const float *)dscores->data;
    const int32_t *vw = valid_w ? (const int32_t *)valid_w->data : NULL;
    if (dquery && a.B * a.T * a.D > 0) {
        sar_dq_kernel<<<cuda_blocks(a.B * a.T * a.D, SAR_THREADS), SAR_THREADS, 0, ctx.stream>>>(
            dquery->data, dquery->dtype, ds, key->data, key->dtype, query->data, query->dtype, w->data, w->dtype, vw, a);
        OCR_CUDA_LAUNCHED();
    }
    if (dkey && a.B * a.P * a.D > 0) {
        sar_dk_kernel<<<cuda_blocks(a.B * a.P * a.D, SAR_THREADS), SAR_THREADS, 0, ctx.stream>>>(
            dkey->data, dkey->dtype, ds, key->data, key->dtype, query->data, query->dtype, w->data, w->dtype, vw, a);
        OCR_CUDA_LAUNCHED();
    }
    if (dw || dbias) {
        sar_dw_kernel<<<(unsigned)(a.D + 1), SAR_THREADS, 0, ctx.stream>>>(opt_data(dw), opt_dtype(dw), opt_data(dbias),
                                                                          opt_dtype(dbias), ds, key->data, key->dtype,
                                                                          query->data, query->dtype, vw, a);
        OCR_CUDA_LAUNCHED();
    }
}

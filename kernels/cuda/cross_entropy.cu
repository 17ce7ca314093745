// Softmax cross-entropy with label smoothing and an ignored class on the GPU (the CPU twin is
// kernels/cpu/cross_entropy.c; the same formulas, fp32 loads, double sums).
//
// Forward: one warp per row computes the log-sum-exp and the smoothed loss in double and
// stores the row's loss; one thread then adds the rows in order (the CPU's order) into the
// mean and the count. Backward: one block counts the rows not ignored, then one warp per row
// writes grad_scale / count · (softmax − q). Deterministic: no atomics.
#include <math.h>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_internal.h"

#define CE_THREADS 256

struct CeArgs {
    int64_t N, C;
    double on, off;
    int ignore;
    float grad_scale;
};

__device__ __forceinline__ bool ce_ignored(int32_t t, const CeArgs &a) { return a.ignore >= 0 && t == a.ignore; }
__device__ __forceinline__ bool ce_bad(int32_t t, const CeArgs &a) { return t < 0 || t >= a.C; }

// Warp-wide log-sum-exp of row r in double.
static __device__ double ce_row_lse(const void *x, int xdt, int64_t base, int64_t C, int lane) {
    float mx = -INFINITY;
    for (int64_t j = lane; j < C; j += 32) mx = fmaxf(mx, ld(x, xdt, base + j));
    mx = warp_max(mx);
    double s = 0.0;
    for (int64_t j = lane; j < C; j += 32) s += exp((double)ld(x, xdt, base + j) - mx);
    s = warp_sum(s);
    return mx + log(s);
}

static __global__ void ce_fwd_rows_kernel(double *row, const void *x, int xdt, const int32_t *tg, CeArgs a) {
    const int lane = threadIdx.x & 31;
    const int64_t wpb = blockDim.x >> 5;
    for (int64_t r = blockIdx.x * wpb + (threadIdx.x >> 5); r < a.N; r += (int64_t)gridDim.x * wpb) {
        const int32_t t = tg[r];
        if (ce_ignored(t, a) || ce_bad(t, a)) {  // a bad target: NaN, the CPU asserts
            if (lane == 0) row[r] = ce_ignored(t, a) ? 0.0 : (double)NAN;
            continue;
        }
        const int64_t base = r * a.C;
        const double lse = ce_row_lse(x, xdt, base, a.C, lane);
        double sum_lp = 0.0;
        if (a.off != 0.0) {
            for (int64_t j = lane; j < a.C; j += 32) sum_lp += (double)ld(x, xdt, base + j) - lse;
            sum_lp = warp_sum(sum_lp);
        }
        const double lp_t = (double)ld(x, xdt, base + t) - lse;
        if (lane == 0) row[r] = -(a.on * lp_t + a.off * (sum_lp - lp_t));
    }
}

static __global__ void ce_fwd_reduce_kernel(float *losses, float *loss, int32_t *counted, const double *row,
                                     const int32_t *tg, CeArgs a) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    double total = 0.0;
    int64_t cnt = 0;
    for (int64_t n = 0; n < a.N; n++) {
        if (losses) losses[n] = (float)row[n];
        if (ce_ignored(tg[n], a)) continue;
        total += row[n];
        cnt++;
    }
    if (loss) loss[0] = cnt ? (float)(total / (double)cnt) : 0.0f;
    if (counted) counted[0] = (int32_t)cnt;
}

static __global__ void ce_count_kernel(int64_t *count, const int32_t *tg, CeArgs a) {
    __shared__ int64_t part[CE_THREADS];
    int64_t c = 0;
    for (int64_t n = threadIdx.x; n < a.N; n += blockDim.x) c += !ce_ignored(tg[n], a);
    part[threadIdx.x] = c;
    __syncthreads();
    if (threadIdx.x == 0) {
        int64_t s = 0;
        for (int i = 0; i < (int)blockDim.x; i++) s += part[i];
        count[0] = s;
    }
}

static __global__ void ce_bwd_kernel(void *dx, int dxdt, const void *x, int xdt, const int32_t *tg,
                                     const int64_t *count, CeArgs a) {
    const int lane = threadIdx.x & 31;
    const int64_t wpb = blockDim.x >> 5;
    const double g = count[0] ? (double)a.grad_scale / (double)count[0] : 0.0;
    for (int64_t r = blockIdx.x * wpb + (threadIdx.x >> 5); r < a.N; r += (int64_t)gridDim.x * wpb) {
        const int32_t t = tg[r];
        const int64_t base = r * a.C;
        if (ce_ignored(t, a) || ce_bad(t, a)) {
            const float v = ce_ignored(t, a) ? 0.0f : NAN;
            for (int64_t j = lane; j < a.C; j += 32) st(dx, dxdt, base + j, v);
            continue;
        }
        const double lse = ce_row_lse(x, xdt, base, a.C, lane);
        for (int64_t j = lane; j < a.C; j += 32) {
            const double q = j == t ? a.on : a.off;
            st(dx, dxdt, base + j, (float)(g * (exp((double)ld(x, xdt, base + j) - lse) - q)));
        }
    }
}

static CeArgs ce_args(const OcrTensor *logits, const OcrTensor *targets, CrossEntropyParams p, const char *op) {
    CUDA_ASSERT_FLOAT(logits);
    CeArgs a;
    a.C = ocr_tensor_dim(logits, -1);
    a.N = a.C ? ocr_tensor_numel(logits) / a.C : 0;
    OCR_ASSERT(a.C >= 2, "%s: %lld classes (need at least 2)", op, (long long)a.C);
    OCR_ASSERT(targets->device.type == OCR_DEVICE_CUDA && targets->dtype == OCR_I32 &&
                   ocr_tensor_numel(targets) == a.N,
               "%s: targets must be %lld CUDA int32 values", op, (long long)a.N);
    a.on = 1.0 - (double)p.smoothing;
    a.off = (double)p.smoothing / (double)(a.C - 1);
    a.ignore = p.ignore_index;
    a.grad_scale = p.grad_scale;
    return a;
}

extern "C" void ocr_cuda_cross_entropy_forward(OcrTensor *losses, OcrTensor *loss, OcrTensor *counted,
                                               const OcrTensor *logits, const OcrTensor *targets,
                                               CrossEntropyParams p) {
    CeArgs a = ce_args(logits, targets, p, "cross_entropy");
    OCR_ASSERT(!losses || (losses->dtype == OCR_F32 && ocr_tensor_numel(losses) == a.N),
               "cross_entropy: losses must be %lld f32 values", (long long)a.N);
    OCR_ASSERT(!loss || (loss->dtype == OCR_F32 && ocr_tensor_numel(loss) == 1), "cross_entropy: loss must be one f32");
    OCR_ASSERT(!counted || (counted->dtype == OCR_I32 && ocr_tensor_numel(counted) == 1),
               "cross_entropy: counted must be one int32");
    CudaCtx ctx = ocr_cuda_enter(logits);
    double *row = (double *)ocr_cuda_scratch(ctx, (size_t)(a.N ? a.N : 1) * sizeof(double));
    if (a.N)
        ce_fwd_rows_kernel<<<cuda_blocks(a.N, CE_THREADS / 32), CE_THREADS, 0, ctx.stream>>>(
            row, logits->data, logits->dtype, (const int32_t *)targets->data, a);
    ce_fwd_reduce_kernel<<<1, 32, 0, ctx.stream>>>(losses ? (float *)losses->data : NULL,
                                                  loss ? (float *)loss->data : NULL,
                                                  counted ? (int32_t *)counted->data : NULL, row,
                                                  (const int32_t *)targets->data, a);
    OCR_CUDA_LAUNCHED();
}

extern "C" void ocr_cuda_cross_entropy_backward(OcrTensor *dlogits, const OcrTensor *logits, const OcrTensor *targets,
                                                CrossEntropyParams p) {
    if (!dlogits) return;
    CeArgs a = ce_args(logits, targets, p, "cross_entropy_backward");
    CUDA_ASSERT_FLOAT(dlogits);
    OCR_ASSERT(ocr_tensor_same_shape(dlogits, logits), "cross_entropy_backward: dlogits and logits shapes differ");
    CudaCtx ctx = ocr_cuda_enter(dlogits);
    if (a.N == 0) return;
    int64_t *count = (int64_t *)ocr_cuda_scratch(ctx, sizeof(int64_t));
    ce_count_kernel<<<1, CE_THREADS, 0, ctx.stream>>>(count, (const int32_t *)targets->data, a);
    OCR_CUDA_LAUNCHED();
    ce_bwd_kernel<<<cuda_blocks(a.N, CE_THREADS / 32), CE_THREADS, 0, ctx.stream>>>(
        dlogits->data, dlogits->dtype, logits->data, logits->dtype, (const int32_t *)targets->data, count, a);
    OCR_CUDA_LAUNCHED();
}

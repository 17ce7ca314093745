// What the normalisation kernels share (batchnorm.cu, layernorm.cu; batchnorm.cu also forms the
// bias gradients of linear and convolution layers with it): the deterministic column reductions
// and the per-channel vector check. CUDA backend internal, included by those .cu files only.
//
// Column reductions (per channel over all rows) are deterministic two-level sums: the rows
// are cut into FIXED chunks of COL_ROWS (a function of the shape only, not of the GPU), each
// block sums one chunk for 32 channels in fp32 (each thread a strided subset of the rows,
// then a fixed tree over the threads), and a second kernel adds the chunk sums per channel in
// chunk order in double (col_total). Templates and static functions: each .cu compiles the
// reductions it uses.
#ifndef OCR_KERNELS_CUDA_NORM_INTERNAL_CUH
#define OCR_KERNELS_CUDA_NORM_INTERNAL_CUH

#include "kernels/cuda/cuda_internal.h"

#define COL_TX 32
#define COL_TY 8
#define COL_ROWS 256
#define NORM_THREADS 256

enum { COL_SUM = 0, COL_CENTERED = 1, COL_BN_BWD = 2, COL_LN_BWD = 3 };

// part[k][chunk][c] (k < 2 accumulators, chunk < gridDim.x, c < C):
//   COL_SUM:      Σ a
//   COL_CENTERED: Σ (a − cmean[c]),        Σ (a − cmean[c])²
//   COL_BN_BWD:   Σ b,                     Σ b·(a − cmean[c])          (a = x, b = dy)
//   COL_LN_BWD:   Σ b·(a − rmean[r])·rrstd[r],  Σ b                    (a = x, b = dy)
template <int OP>
static __global__ void __launch_bounds__(COL_TX *COL_TY)
    col_partial_kernel(float *part, const void *a, int adt, const void *b, int bdt, const float *cmean,
                       const float *rmean, const float *rrstd, int64_t R, int64_t C) {
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t c = (int64_t)blockIdx.y * COL_TX + tx;
    const int64_t chunk = blockIdx.x;
    const int64_t r0 = chunk * COL_ROWS, r1 = r0 + COL_ROWS < R ? r0 + COL_ROWS : R;
    float s1 = 0.0f, s2 = 0.0f;
    if (c < C) {
        const float cm = (OP == COL_CENTERED || OP == COL_BN_BWD) ? cmean[c] : 0.0f;
        for (int64_t r = r0 + ty; r < r1; r += COL_TY) {
            const int64_t e = r * C + c;
            if (OP == COL_SUM) {
                s1 += ld(a, adt, e);
            } else if (OP == COL_CENTERED) {
                const float d = ld(a, adt, e) - cm;
                s1 += d;
                s2 += d * d;
            } else if (OP == COL_BN_BWD) {
                const float g = ld(b, bdt, e);
                s1 += g;
                s2 += g * (ld(a, adt, e) - cm);
            } else {
                const float g = ld(b, bdt, e);
                const float xh = (ld(a, adt, e) - rmean[r]) * rrstd[r];
                s1 += g * xh;
                s2 += g;
            }
        }
    }
    __shared__ float sh[2][COL_TY][COL_TX + 1];
    sh[0][ty][tx] = s1;
    sh[1][ty][tx] = s2;
    __syncthreads();
    if (ty == 0 && c < C) {
        float t1 = 0.0f, t2 = 0.0f;
        for (int y = 0; y < COL_TY; y++) {
            t1 += sh[0][y][tx];
            t2 += sh[1][y][tx];
        }
        part[chunk * C + c] = t1;
        if (OP != COL_SUM) part[((int64_t)gridDim.x + chunk) * C + c] = t2;
    }
}

static inline int64_t col_chunks(int64_t R) { return (R + COL_ROWS - 1) / COL_ROWS; }

// Floats of partial sums col_partial needs for R rows, C channels and `acc` accumulators.
static inline size_t col_part_floats(int64_t R, int64_t C, int acc) { return (size_t)(col_chunks(R) * C * acc); }

template <int OP>
static void col_partial(const CudaCtx &ctx, float *part, const void *a, int adt, const void *b, int bdt,
                        const float *cmean, const float *rmean, const float *rrstd, int64_t R, int64_t C) {
    const int64_t nch = col_chunks(R);
    if (nch == 0 || C == 0) return;
    OCR_ASSERT(nch <= 0x7fffffff && (C + COL_TX - 1) / COL_TX <= 65535, "column reduction too large (%lld x %lld)",
               (long long)R, (long long)C);
    dim3 grid((unsigned)nch, (unsigned)((C + COL_TX - 1) / COL_TX));
    col_partial_kernel<OP><<<grid, dim3(COL_TX, COL_TY), 0, ctx.stream>>>(part, a, adt, b, bdt, cmean, rmean, rrstd, R,
                                                                          C);
    OCR_CUDA_LAUNCHED();
}

// Σ over chunks of accumulator k, channel c, in chunk order, in double.
__device__ __forceinline__ double col_total(const float *part, int64_t nch, int64_t C, int k, int64_t c) {
    const float *p = part + (int64_t)k * nch * C + c;
    double t = 0.0;
    for (int64_t i = 0; i < nch; i++) t += (double)p[i * C];
    return t;
}

#define PER_CHANNEL(c, C) \
    for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < (C); c += (int64_t)gridDim.x * blockDim.x)

// A per-channel (or per-row) vector of n elements, CUDA float.
static inline void vec_check(const OcrTensor *t, int64_t n, const char *op, const char *what) {
    CUDA_ASSERT_FLOAT(t);
    OCR_ASSERT(ocr_tensor_numel(t) == n, "%s: %s has %lld elements, expected %lld", op, what,
               (long long)ocr_tensor_numel(t), (long long)n);
}

#endif

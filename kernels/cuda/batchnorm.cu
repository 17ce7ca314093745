// Batch norm, layer norm and the column reductions they share (also the bias gradients of
// linear and convolution layers), on the GPU.
//
// Column reductions (per channel over all rows) are deterministic two-level sums: the rows
// are cut into FIXED chunks of COL_ROWS (a function of the shape only, not of the GPU), each
// block sums one chunk for 32 channels in fp32 (each thread a strided subset of the rows,
// then a fixed tree over the threads), and a second kernel adds the chunk sums per channel in
// chunk order in double. Batch-norm statistics are two-pass: the mean first, then the sums of
// (x − mean) and (x − mean)² (the first term corrects for the mean's rounding), so the
// variance does not cancel when |mean| >> std. The per-channel arithmetic after the sums
// follows kernels/cpu/batchnorm.c in double. Layer norm keeps one warp per row with its sums
// in double, as the CPU does.
#include <math.h>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/norm.h"

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
__global__ void __launch_bounds__(COL_TX *COL_TY)
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

static int64_t col_chunks(int64_t R) { return (R + COL_ROWS - 1) / COL_ROWS; }

// Floats of partial sums col_partial needs for R rows, C channels and `acc` accumulators.
static size_t col_part_floats(int64_t R, int64_t C, int acc) { return (size_t)(col_chunks(R) * C * acc); }

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

// ---- bias gradients ---------------------------------------------------------------------------

__global__ void bias_grad_finalize_kernel(void *db, int dbdt, const float *part, int64_t nch, int64_t C) {
    PER_CHANNEL(c, C) { st(db, dbdt, c, (float)((double)ld(db, dbdt, c) + col_total(part, nch, C, 0, c))); }
}

void cuda_bias_grad(const CudaCtx &ctx, const OcrTensor *dbias, const void *d, int ddt, int64_t rows, int64_t C) {
    OCR_ASSERT(ocr_tensor_numel(dbias) == C, "bias gradient: dbias has %lld elements, expected %lld",
               (long long)ocr_tensor_numel(dbias), (long long)C);
    if (C == 0 || rows == 0) return;
    float *part = (float *)cuda_scratch(ctx, col_part_floats(rows, C, 1) * sizeof(float), 1);
    col_partial<COL_SUM>(ctx, part, d, ddt, NULL, 0, NULL, NULL, NULL, rows, C);
    bias_grad_finalize_kernel<<<cuda_blocks(C, NORM_THREADS), NORM_THREADS, 0, ctx.stream>>>(
        dbias->data, dbias->dtype, part, col_chunks(rows), C);
    OCR_CUDA_LAUNCHED();
}

// ---- batch norm ---------------------------------------------------------------------------------

struct BnVecs {
    void *save_mean, *save_rstd, *rmean, *rvar;
    const void *gamma, *beta;
    int sm_dt, sr_dt, rm_dt, rv_dt, g_dt, b_dt;
};

// coef[c] = fp32 batch mean (the centre of the second pass).
__global__ void bn_mean_kernel(float *coef, const float *part, int64_t nch, int64_t C, int64_t M) {
    PER_CHANNEL(c, C) { coef[c] = (float)(col_total(part, nch, C, 0, c) / (double)M); }
}

// Statistics, the normalisation coefficients coef = (mean, a, b) (3·C floats), save_*, and
// the running statistics (training only), all per channel in double as on the CPU.
__global__ void bn_stats_kernel(float *coef, const float *part, int64_t nch, int64_t C, int64_t M, BnVecs v,
                                float momentum, float eps, int training) {
    PER_CHANNEL(c, C) {
        double mean, var;
        if (training) {
            const double m1 = col_total(part, nch, C, 0, c) / (double)M;
            const double t = col_total(part, nch, C, 1, c) / (double)M - m1 * m1;
            mean = (double)coef[c] + m1;
            var = t > 0.0 ? t : 0.0;
        } else {
            mean = ld(v.rmean, v.rm_dt, c);
            var = ld(v.rvar, v.rv_dt, c);
        }
        const double r = 1.0 / sqrt(var + (double)eps);
        const float mf = (float)mean, rstd = (float)r;
        coef[c] = mf;
        coef[C + c] = (float)((v.gamma ? (double)ld(v.gamma, v.g_dt, c) : 1.0) * r);
        coef[2 * C + c] = v.beta ? ld(v.beta, v.b_dt, c) : 0.0f;
        if (v.save_mean) st(v.save_mean, v.sm_dt, c, mf);
        if (v.save_rstd) st(v.save_rstd, v.sr_dt, c, rstd);
        if (training && v.rmean)
            st(v.rmean, v.rm_dt, c, (float)(momentum * (double)ld(v.rmean, v.rm_dt, c) + (1.0 - momentum) * mean));
        // Paddle keeps the biased batch variance in the running estimate (PyTorch: unbiased).
        if (training && v.rvar)
            st(v.rvar, v.rv_dt, c, (float)(momentum * (double)ld(v.rvar, v.rv_dt, c) + (1.0 - momentum) * var));
    }
}

// y = (x − mean)·a + b per channel.
__global__ void bn_apply_kernel(void *y, int ydt, const void *x, int xdt, const float *coef, int64_t n, int64_t C) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = i % C;
        st(y, ydt, i, (ld(x, xdt, i) - coef[c]) * coef[C + c] + coef[2 * C + c]);
    }
}

static void vec_check(const OcrTensor *t, int64_t n, const char *op, const char *what) {
    CUDA_ASSERT_FLOAT(t);
    OCR_ASSERT(ocr_tensor_numel(t) == n, "%s: %s has %lld elements, expected %lld", op, what,
               (long long)ocr_tensor_numel(t), (long long)n);
}

extern "C" void batchnorm2d_forward_cuda(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd,
                                         OcrTensor *running_mean, OcrTensor *running_var, const OcrTensor *inp,
                                         const OcrTensor *gamma, const OcrTensor *beta, float momentum, float eps,
                                         int training) {
    CUDA_ASSERT_FLOAT(out);
    CUDA_ASSERT_FLOAT(inp);
    OCR_ASSERT(ocr_tensor_same_shape(out, inp), "batchnorm: out and inp shapes differ");
    const int64_t C = ocr_tensor_dim(inp, -1);
    OCR_ASSERT(C > 0, "batchnorm: zero channels");
    const int64_t M = ocr_tensor_numel(inp) / C;
    if (gamma) vec_check(gamma, C, "batchnorm", "gamma");
    if (beta) vec_check(beta, C, "batchnorm", "beta");
    if (save_mean) vec_check(save_mean, C, "batchnorm", "save_mean");
    if (save_rstd) vec_check(save_rstd, C, "batchnorm", "save_rstd");
    if (running_mean) vec_check(running_mean, C, "batchnorm", "running_mean");
    if (running_var) vec_check(running_var, C, "batchnorm", "running_var");
    if (training)
        OCR_ASSERT(M > 0, "batchnorm: training on an empty batch");
    else
        OCR_ASSERT(running_mean && running_var, "batchnorm: inference needs the running statistics");
    CudaCtx ctx = cuda_enter(out);

    const size_t part_floats = training ? col_part_floats(M, C, 2) : 0;
    float *coef = (float *)cuda_scratch(ctx, (3 * (size_t)C + part_floats) * sizeof(float));
    float *part = coef + 3 * C;
    BnVecs v;
    v.save_mean = opt_data(save_mean);
    v.sm_dt = opt_dtype(save_mean);
    v.save_rstd = opt_data(save_rstd);
    v.sr_dt = opt_dtype(save_rstd);
    v.rmean = opt_data(running_mean);
    v.rm_dt = opt_dtype(running_mean);
    v.rvar = opt_data(running_var);
    v.rv_dt = opt_dtype(running_var);
    v.gamma = opt_data(gamma);
    v.g_dt = opt_dtype(gamma);
    v.beta = opt_data(beta);
    v.b_dt = opt_dtype(beta);
    const unsigned cb = cuda_blocks(C, NORM_THREADS);
    const int64_t nch = col_chunks(M);
    if (training) {
        col_partial<COL_SUM>(ctx, part, inp->data, inp->dtype, NULL, 0, NULL, NULL, NULL, M, C);
        bn_mean_kernel<<<cb, NORM_THREADS, 0, ctx.stream>>>(coef, part, nch, C, M);
        OCR_CUDA_LAUNCHED();
        col_partial<COL_CENTERED>(ctx, part, inp->data, inp->dtype, NULL, 0, coef, NULL, NULL, M, C);
    }
    bn_stats_kernel<<<cb, NORM_THREADS, 0, ctx.stream>>>(coef, part, nch, C, M, v, momentum, eps, training);
    OCR_CUDA_LAUNCHED();
    const int64_t n = M * C;
    if (n > 0) {
        bn_apply_kernel<<<cuda_blocks(n, NORM_THREADS), NORM_THREADS, 0, ctx.stream>>>(out->data, out->dtype, inp->data,
                                                                                      inp->dtype, coef, n, C);
        OCR_CUDA_LAUNCHED();
    }
}

struct BnGrads {
    void *dgamma, *dbeta;
    const void *gamma;
    int dg_dt, db_dt, g_dt;
};

// coef = (a, b, k) with dx = a·dy + b·(x − mean) + k; dgamma/dbeta accumulate.
__global__ void bn_backward_coef_kernel(float *coef, const float *part, int64_t nch, const float *rstd, int64_t C,
                                        int64_t M, BnGrads g, int have_sums, int training) {
    PER_CHANNEL(c, C) {
        const double sdy = have_sums ? col_total(part, nch, C, 0, c) : 0.0;
        const double sdx = have_sums ? col_total(part, nch, C, 1, c) : 0.0;
        if (g.dbeta) st(g.dbeta, g.db_dt, c, (float)((double)ld(g.dbeta, g.db_dt, c) + sdy));
        if (g.dgamma) st(g.dgamma, g.dg_dt, c, (float)((double)ld(g.dgamma, g.dg_dt, c) + sdx * (double)rstd[c]));
        // Through fixed statistics only a = gamma·rstd survives; through batch statistics the
        // mean and variance terms add b = −gamma·rstd³·sdx/M and k = −gamma·rstd·sdy/M.
        const double a = (g.gamma ? (double)ld(g.gamma, g.g_dt, c) : 1.0) * (double)rstd[c];
        coef[c] = (float)a;
        if (training && M > 0) {
            const double r = rstd[c];
            coef[C + c] = (float)(-a * r * r * sdx / (double)M);
            coef[2 * C + c] = (float)(-a * sdy / (double)M);
        } else {
            coef[C + c] = 0.0f;
            coef[2 * C + c] = 0.0f;
        }
    }
}

__global__ void bn_backward_dx_kernel(void *dx, int dxdt, const void *dy, int dydt, const void *x, int xdt,
                                      const float *mean, const float *coef, int64_t n, int64_t C) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = i % C;
        st(dx, dxdt, i, coef[c] * ld(dy, dydt, i) + coef[C + c] * (ld(x, xdt, i) - mean[c]) + coef[2 * C + c]);
    }
}

extern "C" void batchnorm2d_backward_cuda(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                                          const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *save_mean,
                                          const OcrTensor *save_rstd, int training) {
    CUDA_ASSERT_FLOAT(dout);
    CUDA_ASSERT_FLOAT(inp);
    OCR_ASSERT(ocr_tensor_same_shape(dout, inp), "batchnorm: dout and inp shapes differ");
    if (dinp) {
        CUDA_ASSERT_FLOAT(dinp);
        OCR_ASSERT(ocr_tensor_same_shape(dinp, inp), "batchnorm: dinp and inp shapes differ");
    }
    const int64_t C = ocr_tensor_dim(inp, -1);
    OCR_ASSERT(C > 0, "batchnorm: zero channels");
    const int64_t M = ocr_tensor_numel(inp) / C;
    if (gamma) vec_check(gamma, C, "batchnorm", "gamma");
    if (dgamma) vec_check(dgamma, C, "batchnorm", "dgamma");
    if (dbeta) vec_check(dbeta, C, "batchnorm", "dbeta");
    vec_check(save_mean, C, "batchnorm", "save_mean");
    vec_check(save_rstd, C, "batchnorm", "save_rstd");
    CudaCtx ctx = cuda_enter(dout);

    const int need_sums = (dgamma || dbeta || (training && dinp)) && M > 0;
    const size_t part_floats = need_sums ? col_part_floats(M, C, 2) : 0;
    float *mean = (float *)cuda_scratch(ctx, (5 * (size_t)C + part_floats) * sizeof(float));
    float *rstd = mean + C, *coef = rstd + C, *part = coef + 3 * C;
    cuda_copy_2d(ctx, mean, OCR_F32, C, save_mean->data, save_mean->dtype, C, 1, C);
    cuda_copy_2d(ctx, rstd, OCR_F32, C, save_rstd->data, save_rstd->dtype, C, 1, C);
    if (need_sums) col_partial<COL_BN_BWD>(ctx, part, inp->data, inp->dtype, dout->data, dout->dtype, mean, NULL, NULL, M, C);
    BnGrads g;
    g.dgamma = dgamma ? dgamma->data : NULL;
    g.dg_dt = dgamma ? dgamma->dtype : OCR_F32;
    g.dbeta = dbeta ? dbeta->data : NULL;
    g.db_dt = dbeta ? dbeta->dtype : OCR_F32;
    g.gamma = gamma ? gamma->data : NULL;
    g.g_dt = gamma ? gamma->dtype : OCR_F32;
    bn_backward_coef_kernel<<<cuda_blocks(C, NORM_THREADS), NORM_THREADS, 0, ctx.stream>>>(
        coef, part, col_chunks(M), rstd, C, M, g, need_sums, training);
    OCR_CUDA_LAUNCHED();
    const int64_t n = M * C;
    if (dinp && n > 0) {
        bn_backward_dx_kernel<<<cuda_blocks(n, NORM_THREADS), NORM_THREADS, 0, ctx.stream>>>(
            dinp->data, dinp->dtype, dout->data, dout->dtype, inp->data, inp->dtype, mean, coef, n, C);
        OCR_CUDA_LAUNCHED();
    }
}

// ---- layer norm ---------------------------------------------------------------------------------------

// One warp per row: mean and variance in double (two passes over the row), then
// y = (x − mean)·rstd·gamma + beta in fp32 as the CPU writes it.
__global__ void ln_forward_kernel(void *y, int ydt, void *mean, int mdt, void *rstd, int rdt, const void *x, int xdt,
                                  const void *g, int gdt, const void *b, int bdt, int64_t R, int64_t C, float eps) {
    const int lane = threadIdx.x & 31;
    const int64_t wpb = blockDim.x >> 5;
    for (int64_t r = blockIdx.x * wpb + (threadIdx.x >> 5); r < R; r += (int64_t)gridDim.x * wpb) {
        const int64_t base = r * C;
        double s = 0.0;
        for (int64_t j = lane; j < C; j += 32) s += (double)ld(x, xdt, base + j);
        const double m = warp_sum(s) / (double)C;
        double ss = 0.0;
        for (int64_t j = lane; j < C; j += 32) {
            const double d = (double)ld(x, xdt, base + j) - m;
            ss += d * d;
        }
        const double v = warp_sum(ss) / (double)C;
        const float mf = (float)m, rf = (float)(1.0 / sqrt(v + (double)eps));
        for (int64_t j = lane; j < C; j += 32) {
            const float gj = g ? ld(g, gdt, j) : 1.0f, bj = b ? ld(b, bdt, j) : 0.0f;
            st(y, ydt, base + j, (ld(x, xdt, base + j) - mf) * rf * gj + bj);
        }
        if (lane == 0) {
            if (mean) st(mean, mdt, r, mf);
            if (rstd) st(rstd, rdt, r, rf);
        }
    }
}

// dx = rstd·(dxhat − mean(dxhat) − xhat·mean(dxhat·xhat)), dxhat = dy·gamma; one warp per row.
__global__ void ln_backward_dx_kernel(void *dx, int dxdt, const void *dy, int dydt, const void *x, int xdt,
                                      const void *g, int gdt, const float *mean, const float *rstd, int64_t R,
                                      int64_t C) {
    const int lane = threadIdx.x & 31;
    const int64_t wpb = blockDim.x >> 5;
    for (int64_t r = blockIdx.x * wpb + (threadIdx.x >> 5); r < R; r += (int64_t)gridDim.x * wpb) {
        const int64_t base = r * C;
        const float m = mean[r], rr = rstd[r];
        double a1 = 0.0, a2 = 0.0;
        for (int64_t j = lane; j < C; j += 32) {
            const float d = ld(dy, dydt, base + j) * (g ? ld(g, gdt, j) : 1.0f);
            a1 += (double)d;
            a2 += (double)d * (double)((ld(x, xdt, base + j) - m) * rr);
        }
        const float m1 = (float)(warp_sum(a1) / (double)C);
        const float m2 = (float)(warp_sum(a2) / (double)C);
        for (int64_t j = lane; j < C; j += 32) {
            const float d = ld(dy, dydt, base + j) * (g ? ld(g, gdt, j) : 1.0f);
            st(dx, dxdt, base + j, rr * (d - m1 - (ld(x, xdt, base + j) - m) * rr * m2));
        }
    }
}

__global__ void ln_param_finalize_kernel(void *dg, int dgdt, void *db, int dbdt, const float *part, int64_t nch,
                                         int64_t C) {
    PER_CHANNEL(c, C) {
        if (dg) st(dg, dgdt, c, (float)((double)ld(dg, dgdt, c) + col_total(part, nch, C, 0, c)));
        if (db) st(db, dbdt, c, (float)((double)ld(db, dbdt, c) + col_total(part, nch, C, 1, c)));
    }
}

extern "C" void layernorm_forward_cuda(OcrTensor *out, OcrTensor *mean, OcrTensor *rstd, const OcrTensor *inp,
                                       const OcrTensor *gamma, const OcrTensor *beta, float eps) {
    CUDA_ASSERT_FLOAT(out);
    CUDA_ASSERT_FLOAT(inp);
    OCR_ASSERT(ocr_tensor_same_shape(out, inp), "layernorm: out and inp shapes differ");
    const int64_t C = ocr_tensor_dim(inp, -1);
    OCR_ASSERT(C > 0, "layernorm: zero-width rows");
    const int64_t R = ocr_tensor_numel(inp) / C;
    if (gamma) vec_check(gamma, C, "layernorm", "gamma");
    if (beta) vec_check(beta, C, "layernorm", "beta");
    if (mean) vec_check(mean, R, "layernorm", "mean");
    if (rstd) vec_check(rstd, R, "layernorm", "rstd");
    CudaCtx ctx = cuda_enter(out);
    if (R == 0) return;
    ln_forward_kernel<<<cuda_blocks(R, NORM_THREADS / 32), NORM_THREADS, 0, ctx.stream>>>(
        out->data, out->dtype, mean ? mean->data : NULL, mean ? mean->dtype : OCR_F32, rstd ? rstd->data : NULL,
        rstd ? rstd->dtype : OCR_F32, inp->data, inp->dtype, gamma ? gamma->data : NULL,
        gamma ? gamma->dtype : OCR_F32, beta ? beta->data : NULL, beta ? beta->dtype : OCR_F32, R, C, eps);
    OCR_CUDA_LAUNCHED();
}

extern "C" void layernorm_backward_cuda(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                                        const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *mean,
                                        const OcrTensor *rstd) {
    CUDA_ASSERT_FLOAT(dout);
    CUDA_ASSERT_FLOAT(inp);
    OCR_ASSERT(ocr_tensor_same_shape(dout, inp), "layernorm: dout and inp shapes differ");
    if (dinp) {
        CUDA_ASSERT_FLOAT(dinp);
        OCR_ASSERT(ocr_tensor_same_shape(dinp, inp), "layernorm: dinp and inp shapes differ");
    }
    const int64_t C = ocr_tensor_dim(inp, -1);
    OCR_ASSERT(C > 0, "layernorm: zero-width rows");
    const int64_t R = ocr_tensor_numel(inp) / C;
    if (gamma) vec_check(gamma, C, "layernorm", "gamma");
    if (dgamma) vec_check(dgamma, C, "layernorm", "dgamma");
    if (dbeta) vec_check(dbeta, C, "layernorm", "dbeta");
    vec_check(mean, R, "layernorm", "mean");
    vec_check(rstd, R, "layernorm", "rstd");
    CudaCtx ctx = cuda_enter(dout);
    if (R == 0) return;
    const int want_params = dgamma || dbeta;
    const size_t part_floats = want_params ? col_part_floats(R, C, 2) : 0;
    float *mu = (float *)cuda_scratch(ctx, (2 * (size_t)R + part_floats) * sizeof(float));
    float *rs = mu + R, *part = rs + R;
    cuda_copy_2d(ctx, mu, OCR_F32, R, mean->data, mean->dtype, R, 1, R);
    cuda_copy_2d(ctx, rs, OCR_F32, R, rstd->data, rstd->dtype, R, 1, R);
    if (dinp) {
        ln_backward_dx_kernel<<<cuda_blocks(R, NORM_THREADS / 32), NORM_THREADS, 0, ctx.stream>>>(
            dinp->data, dinp->dtype, dout->data, dout->dtype, inp->data, inp->dtype, gamma ? gamma->data : NULL,
            gamma ? gamma->dtype : OCR_F32, mu, rs, R, C);
        OCR_CUDA_LAUNCHED();
    }
    if (want_params) {
        col_partial<COL_LN_BWD>(ctx, part, inp->data, inp->dtype, dout->data, dout->dtype, NULL, mu, rs, R, C);
        ln_param_finalize_kernel<<<cuda_blocks(C, NORM_THREADS), NORM_THREADS, 0, ctx.stream>>>(
            dgamma ? dgamma->data : NULL, dgamma ? dgamma->dtype : OCR_F32, dbeta ? dbeta->data : NULL,
            dbeta ? dbeta->dtype : OCR_F32, part, col_chunks(R), C);
        OCR_CUDA_LAUNCHED();
    }
}

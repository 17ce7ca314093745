// Batch norm on the GPU, and the bias gradients of linear and convolution layers
// (ocr_cuda_bias_grad: a column sum).
//
// Batch-norm statistics are two-pass column reductions (norm_internal.cuh): the mean first, then
// the sums of (x − mean) and (x − mean)² (the first term corrects for the mean's rounding), so
// the variance does not cancel when |mean| >> std. The per-channel arithmetic after the sums
// follows kernels/cpu/batchnorm.c in double.
#include <math.h>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/norm_internal.cuh"

// ---- bias gradients ---------------------------------------------------------------------------

static __global__ void bias_grad_finalize_kernel(void *db, int dbdt, const float *part, int64_t nch, int64_t C) {
    PER_CHANNEL(c, C) { st(db, dbdt, c, (float)((double)ld(db, dbdt, c) + col_total(part, nch, C, 0, c))); }
}

void ocr_cuda_bias_grad(const CudaCtx &ctx, const OcrTensor *dbias, const void *d, int ddt, int64_t rows, int64_t C) {
    OCR_ASSERT(ocr_tensor_numel(dbias) == C, "bias gradient: dbias has %lld elements, expected %lld",
               (long long)ocr_tensor_numel(dbias), (long long)C);
    if (C == 0 || rows == 0) return;
    float *part = (float *)ocr_cuda_scratch(ctx, col_part_floats(rows, C, 1) * sizeof(float), 1);
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
static __global__ void bn_mean_kernel(float *coef, const float *part, int64_t nch, int64_t C, int64_t M) {
    PER_CHANNEL(c, C) { coef[c] = (float)(col_total(part, nch, C, 0, c) / (double)M); }
}

// Statistics, the normalisation coefficients coef = (mean, a, b) (3·C floats), save_*, and
// the running statistics (training only), all per channel in double as on the CPU.
static __global__ void bn_stats_kernel(float *coef, const float *part, int64_t nch, int64_t C, int64_t M, BnVecs v,
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
static __global__ void bn_apply_kernel(void *y, int ydt, const void *x, int xdt, const float *coef, int64_t n,
                                       int64_t C) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = i % C;
        st(y, ydt, i, (ld(x, xdt, i) - coef[c]) * coef[C + c] + coef[2 * C + c]);
    }
}

extern "C" void ocr_cuda_batchnorm2d_forward(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd,
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
    CudaCtx ctx = ocr_cuda_enter(out);

    const size_t part_floats = training ? col_part_floats(M, C, 2) : 0;
    float *coef = (float *)ocr_cuda_scratch(ctx, (3 * (size_t)C + part_floats) * sizeof(float));
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
static __global__ void bn_backward_coef_kernel(float *coef, const float *part, int64_t nch, const float *rstd,
                                               int64_t C, int64_t M, BnGrads g, int have_sums, int training) {
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

static __global__ void bn_backward_dx_kernel(void *dx, int dxdt, const void *dy, int dydt, const void *x, int xdt,
                                      const float *mean, const float *coef, int64_t n, int64_t C) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = i % C;
        st(dx, dxdt, i, coef[c] * ld(dy, dydt, i) + coef[C + c] * (ld(x, xdt, i) - mean[c]) + coef[2 * C + c]);
    }
}

extern "C" void ocr_cuda_batchnorm2d_backward(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta,
                                              const OcrTensor *dout, const OcrTensor *inp, const OcrTensor *gamma,
                                              const OcrTensor *save_mean, const OcrTensor *save_rstd, int training) {
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
    CudaCtx ctx = ocr_cuda_enter(dout);

    const int need_sums = (dgamma || dbeta || (training && dinp)) && M > 0;
    const size_t part_floats = need_sums ? col_part_floats(M, C, 2) : 0;
    float *mean = (float *)ocr_cuda_scratch(ctx, (5 * (size_t)C + part_floats) * sizeof(float));
    float *rstd = mean + C, *coef = rstd + C, *part = coef + 3 * C;
    ocr_cuda_copy_2d(ctx, mean, OCR_F32, C, save_mean->data, save_mean->dtype, C, 1, C);
    ocr_cuda_copy_2d(ctx, rstd, OCR_F32, C, save_rstd->data, save_rstd->dtype, C, 1, C);
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

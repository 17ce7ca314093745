// Layer norm on the GPU: one warp per row with its sums in double, as the CPU does
// (kernels/cpu/layernorm.c); the gradients of gamma and beta are column reductions
// (norm_internal.cuh).
#include <math.h>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/norm_internal.cuh"

// One warp per row: mean and variance in double (two passes over the row), then
// y = (x − mean)·rstd·gamma + beta in fp32 as the CPU writes it.
static __global__ void ln_forward_kernel(void *y, int ydt, void *mean, int mdt, void *rstd, int rdt, const void *x,
                                         int xdt, const void *g, int gdt, const void *b, int bdt, int64_t R, int64_t C,
                                         float eps) {
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
static __global__ void ln_backward_dx_kernel(void *dx, int dxdt, const void *dy, int dydt, const void *x, int xdt,
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

static __global__ void ln_param_finalize_kernel(void *dg, int dgdt, void *db, int dbdt, const float *part, int64_t nch,
                                         int64_t C) {
    PER_CHANNEL(c, C) {
        if (dg) st(dg, dgdt, c, (float)((double)ld(dg, dgdt, c) + col_total(part, nch, C, 0, c)));
        if (db) st(db, dbdt, c, (float)((double)ld(db, dbdt, c) + col_total(part, nch, C, 1, c)));
    }
}

extern "C" void ocr_cuda_layernorm_forward(OcrTensor *out, OcrTensor *mean, OcrTensor *rstd, const OcrTensor *inp,
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
    CudaCtx ctx = ocr_cuda_enter(out);
    if (R == 0) return;
    ln_forward_kernel<<<cuda_blocks(R, NORM_THREADS / 32), NORM_THREADS, 0, ctx.stream>>>(
        out->data, out->dtype, mean ? mean->data : NULL, mean ? mean->dtype : OCR_F32, rstd ? rstd->data : NULL,
        rstd ? rstd->dtype : OCR_F32, inp->data, inp->dtype, gamma ? gamma->data : NULL,
        gamma ? gamma->dtype : OCR_F32, beta ? beta->data : NULL, beta ? beta->dtype : OCR_F32, R, C, eps);
    OCR_CUDA_LAUNCHED();
}

extern "C" void ocr_cuda_layernorm_backward(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
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
    CudaCtx ctx = ocr_cuda_enter(dout);
    if (R == 0) return;
    const int want_params = dgamma || dbeta;
    const size_t part_floats = want_params ? col_part_floats(R, C, 2) : 0;
    float *mu = (float *)ocr_cuda_scratch(ctx, (2 * (size_t)R + part_floats) * sizeof(float));
    float *rs = mu + R, *part = rs + R;
    ocr_cuda_copy_2d(ctx, mu, OCR_F32, R, mean->data, mean->dtype, R, 1, R);
    ocr_cuda_copy_2d(ctx, rs, OCR_F32, R, rstd->data, rstd->dtype, R, 1, R);
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

// Batch normalisation over N·H·W per channel of an NHWC tensor (Paddle's BatchNorm2D).
//
// The data is viewed as M = N·H·W rows of C channels, so every inner loop runs over the
// contiguous channel dimension. Statistics accumulate in double: per-chunk partial sums over
// a FIXED number of row chunks (not one per thread), combined in chunk order, so the
// statistics are bitwise identical for any thread count.
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/ops.h"

#define BN_MAX_CHUNKS 32
// Below this many elements an OpenMP team costs more than it saves.
#define BN_PAR_MIN 16384

int64_t cpu_bn_chunks(int64_t rows) { return rows < BN_MAX_CHUNKS ? rows : BN_MAX_CHUNKS; }

// A (C,) parameter/statistics tensor: any float dtype, exactly C elements.
static void bn_check_vec(const OcrTensor *t, int64_t C, const char *what) {
    CPU_ASSERT_FLOAT(t);
    OCR_ASSERT(ocr_tensor_numel(t) == C, "batchnorm: %s has %lld elements, expected C = %lld", what,
               (long long)ocr_tensor_numel(t), (long long)C);
}

// mean, var (C) = batch mean and biased variance of x (M, C). The sums are shifted by the
// first row, which keeps the one-pass variance accurate when |mean| >> std.
void cpu_bn_batch_stats(double *mean, double *var, const float *x, int64_t M, int64_t C, CpuScratch *s) {
    const int64_t nch = cpu_bn_chunks(M);
    double *part = cpu_scratch_bytes(s, (size_t)(2 * nch * C) * sizeof(double));
    const float *shift = x;
#pragma omp parallel for schedule(static) if (M * C >= BN_PAR_MIN)
    for (int64_t k = 0; k < nch; k++) {
        double *s1 = part + 2 * k * C, *s2 = s1 + C;
        for (int64_t c = 0; c < C; c++) s1[c] = s2[c] = 0.0;
        const int64_t r0 = k * M / nch, r1 = (k + 1) * M / nch;
        for (int64_t r = r0; r < r1; r++) {
            const float *xr = x + r * C;
            for (int64_t c = 0; c < C; c++) {
                double d = (double)xr[c] - (double)shift[c];
                s1[c] += d;
                s2[c] += d * d;
            }
        }
    }
    for (int64_t c = 0; c < C; c++) {
        double t1 = 0.0, t2 = 0.0;
        for (int64_t k = 0; k < nch; k++) {
            t1 += part[2 * k * C + c];
            t2 += part[2 * k * C + C + c];
        }
        double m1 = t1 / (double)M;
        double v = t2 / (double)M - m1 * m1;
        mean[c] = (double)shift[c] + m1;
        var[c] = v > 0.0 ? v : 0.0;
    }
}

void batchnorm2d_forward_cpu(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd, OcrTensor *running_mean,
                         OcrTensor *running_var, const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta,
                         float momentum, float eps, int training) {
    CPU_ASSERT_FLOAT(out);
    CPU_ASSERT_FLOAT(inp);
    OCR_ASSERT(ocr_tensor_same_shape(out, inp), "batchnorm: out and inp shapes differ");
    const int64_t C = ocr_tensor_dim(inp, -1);
    OCR_ASSERT(C > 0, "batchnorm: zero channels");
    const int64_t M = ocr_tensor_numel(inp) / C;
    if (gamma) bn_check_vec(gamma, C, "gamma");
    if (beta) bn_check_vec(beta, C, "beta");
    if (save_mean) bn_check_vec(save_mean, C, "save_mean");
    if (save_rstd) bn_check_vec(save_rstd, C, "save_rstd");
    if (running_mean) bn_check_vec(running_mean, C, "running_mean");
    if (running_var) bn_check_vec(running_var, C, "running_var");

    CpuScratch s = {0};
    const float *x = cpu_f32_in(&s, inp);
    double *mean = cpu_scratch_bytes(&s, (size_t)C * sizeof(double));
    double *var = cpu_scratch_bytes(&s, (size_t)C * sizeof(double));
    if (training) {
        OCR_ASSERT(M > 0, "batchnorm: training on an empty batch");
        cpu_bn_batch_stats(mean, var, x, M, C, &s);
    } else {
        OCR_ASSERT(running_mean && running_var, "batchnorm: inference needs the running statistics");
        const float *rm = cpu_f32_in(&s, running_mean), *rv = cpu_f32_in(&s, running_var);
        for (int64_t c = 0; c < C; c++) {
            mean[c] = rm[c];
            var[c] = rv[c];
        }
    }

    // out = (x − mean) · a + beta with a = gamma · rstd, all per channel.
    const float *g = gamma ? cpu_f32_in(&s, gamma) : NULL;
    const float *b = beta ? cpu_f32_in(&s, beta) : NULL;
    float *mf = cpu_scratch_floats(&s, (size_t)C);
    float *af = cpu_scratch_floats(&s, (size_t)C);
    float *bf = cpu_scratch_floats(&s, (size_t)C);
    float *rstd = cpu_scratch_floats(&s, (size_t)C);
    for (int64_t c = 0; c < C; c++) {
        double r = 1.0 / sqrt(var[c] + (double)eps);
        rstd[c] = (float)r;
        mf[c] = (float)mean[c];
        af[c] = (float)((g ? (double)g[c] : 1.0) * r);
        bf[c] = b ? b[c] : 0.0f;
    }

    float *y = cpu_f32_out(&s, out, 0);
#pragma omp parallel for schedule(static) if (M * C >= BN_PAR_MIN)
    for (int64_t r = 0; r < M; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C;
        for (int64_t c = 0; c < C; c++) yr[c] = (xr[c] - mf[c]) * af[c] + bf[c];
    }
    cpu_f32_store(out, y);

    if (save_mean) {
        float *sm = cpu_f32_out(&s, save_mean, 0);
        memcpy(sm, mf, (size_t)C * sizeof(float));
        cpu_f32_store(save_mean, sm);
    }
    if (save_rstd) {
        float *sr = cpu_f32_out(&s, save_rstd, 0);
        memcpy(sr, rstd, (size_t)C * sizeof(float));
        cpu_f32_store(save_rstd, sr);
    }
    if (training && running_mean) {
        float *rm = cpu_f32_out(&s, running_mean, 1);
        for (int64_t c = 0; c < C; c++) rm[c] = (float)(momentum * (double)rm[c] + (1.0 - momentum) * mean[c]);
        cpu_f32_store(running_mean, rm);
    }
    if (training && running_var) {
        // Paddle keeps the biased batch variance in the running estimate (PyTorch: unbiased).
        float *rv = cpu_f32_out(&s, running_var, 1);
        for (int64_t c = 0; c < C; c++) rv[c] = (float)(momentum * (double)rv[c] + (1.0 - momentum) * var[c]);
        cpu_f32_store(running_var, rv);
    }
    cpu_scratch_free(&s);
}

// BN's parameter gradients from the per-channel sums sdy = Σ dy and sdx = Σ dy·(x − mean):
// dbeta += sdy, dgamma += sdx·rstd (either may be NULL). Shared with bn_act.c.
void cpu_bn_param_grads(CpuScratch *s, OcrTensor *dgamma, OcrTensor *dbeta, const double *sdy, const double *sdx,
                        const float *rstd, int64_t C) {
    if (dbeta) {
        float *db = cpu_f32_out(s, dbeta, 1);
        for (int64_t c = 0; c < C; c++) db[c] = (float)((double)db[c] + sdy[c]);
        cpu_f32_store(dbeta, db);
    }
    if (dgamma) {
        float *dg = cpu_f32_out(s, dgamma, 1);
        for (int64_t c = 0; c < C; c++) dg[c] = (float)((double)dg[c] + sdx[c] * (double)rstd[c]);
        cpu_f32_store(dgamma, dg);
    }
}

// The input gradient's per-channel coefficients, dx = a·dy + b·(x − mean) + k (C floats each,
// from s). Through fixed statistics only a = gamma·rstd survives; through batch statistics the
// mean and variance terms add b = −gamma·rstd³·sdx/M and k = −gamma·rstd·sdy/M.
void cpu_bn_dx_coefs(CpuScratch *s, float **a_out, float **b_out, float **k_out, const float *g, const float *rstd,
                     const double *sdy, const double *sdx, int64_t C, int64_t M, int training) {
    float *af = cpu_scratch_floats(s, (size_t)C);
    float *bf = cpu_scratch_floats(s, (size_t)C);
    float *kf = cpu_scratch_floats(s, (size_t)C);
    for (int64_t c = 0; c < C; c++) {
        double a = (g ? (double)g[c] : 1.0) * (double)rstd[c];
        af[c] = (float)a;
        if (training && M > 0) {
            double r = rstd[c];
            bf[c] = (float)(-a * r * r * sdx[c] / (double)M);
            kf[c] = (float)(-a * sdy[c] / (double)M);
        } else {
            bf[c] = 0.0f;
            kf[c] = 0.0f;
        }
    }
    *a_out = af;
    *b_out = bf;
    *k_out = kf;
}

void batchnorm2d_backward_cpu(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                          const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *save_mean,
                          const OcrTensor *save_rstd, int training) {
    CPU_ASSERT_FLOAT(dout);
    CPU_ASSERT_FLOAT(inp);
    OCR_ASSERT(ocr_tensor_same_shape(dout, inp), "batchnorm: dout and inp shapes differ");
    if (dinp) {
        CPU_ASSERT_FLOAT(dinp);
        OCR_ASSERT(ocr_tensor_same_shape(dinp, inp), "batchnorm: dinp and inp shapes differ");
    }
    const int64_t C = ocr_tensor_dim(inp, -1);
    OCR_ASSERT(C > 0, "batchnorm: zero channels");
    const int64_t M = ocr_tensor_numel(inp) / C;
    if (gamma) bn_check_vec(gamma, C, "gamma");
    if (dgamma) bn_check_vec(dgamma, C, "dgamma");
    if (dbeta) bn_check_vec(dbeta, C, "dbeta");
    bn_check_vec(save_mean, C, "save_mean");
    bn_check_vec(save_rstd, C, "save_rstd");

    CpuScratch s = {0};
    const float *x = cpu_f32_in(&s, inp);
    const float *dy = cpu_f32_in(&s, dout);
    const float *mean = cpu_f32_in(&s, save_mean);
    const float *rstd = cpu_f32_in(&s, save_rstd);
    const float *g = gamma ? cpu_f32_in(&s, gamma) : NULL;

    // Per channel: sdy = Σ dy, sdx = Σ dy · (x − mean), in double over fixed chunks.
    double *sdy = cpu_scratch_bytes(&s, (size_t)C * sizeof(double));
    double *sdx = cpu_scratch_bytes(&s, (size_t)C * sizeof(double));
    const int need_sums = dgamma || dbeta || (training && dinp);
    if (need_sums) {
        const int64_t nch = M > 0 ? cpu_bn_chunks(M) : 0;
        double *part = cpu_scratch_bytes(&s, (size_t)(2 * nch * C + 1) * sizeof(double));
#pragma omp parallel for schedule(static) if (M * C >= BN_PAR_MIN)
        for (int64_t k = 0; k < nch; k++) {
            double *p1 = part + 2 * k * C, *p2 = p1 + C;
            for (int64_t c = 0; c < C; c++) p1[c] = p2[c] = 0.0;
            const int64_t r0 = k * M / nch, r1 = (k + 1) * M / nch;
            cpu_bn_accumulate_rows(p1, p2, x + r0 * C, dy + r0 * C, mean, r1 - r0, C);
        }
        cpu_bn_reduce_chunks(sdy, sdx, part, nch, C);
    }

    cpu_bn_param_grads(&s, dgamma, dbeta, sdy, sdx, rstd, C);

    if (dinp) {
        float *af, *bf, *kf;
        cpu_bn_dx_coefs(&s, &af, &bf, &kf, g, rstd, sdy, sdx, C, M, training);
        float *dx = cpu_f32_out(&s, dinp, 0);
#pragma omp parallel for schedule(static) if (M * C >= BN_PAR_MIN)
        for (int64_t r = 0; r < M; r++) {
            const float *xr = x + r * C, *gr = dy + r * C;
            float *dr = dx + r * C;
            for (int64_t c = 0; c < C; c++) dr[c] = af[c] * gr[c] + bf[c] * (xr[c] - mean[c]) + kf[c];
        }
        cpu_f32_store(dinp, dx);
    }
    cpu_scratch_free(&s);
}

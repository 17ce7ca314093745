// Layer normalisation over the last dimension (rows of C).
//
// Row sums use eight double lanes: a plain `s += x[i]` reduction would not vectorise
// without -ffast-math, and the fixed lane order keeps the result deterministic. The
// dgamma/dbeta reduction over rows uses a FIXED number of row chunks combined in chunk
// order, so it does not depend on the thread count.
//
// f16/bf16 maps (inp, out, dout, dinp) are read and written in their own dtype: each thread
// widens a tile of rows into a buffer, computes it in fp32 and rounds its results once, instead
// of whole-tensor fp32 copies. Per row the same operations in the same order, so the results
// are the bits of the whole-tensor path, which Global.cpu_exact_numerics keeps as the reference
// (ocr_cpu_tiled_in / ocr_cpu_tiled_out). The small per-row statistics and per-channel parameters are
// converted whole.
#include <math.h>
#include <omp.h>
#include <string.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/rowwise.h"
#include "kernels/ops.h"

#define LN_MAX_CHUNKS 32
#define LN_PAR_MIN 16384
#define LN_LANES 8

static double ln_lanes_total(const double *acc) {
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// Σ x
static double ln_sum(const float *x, int64_t n) {
    double acc[LN_LANES] = {0};
    int64_t i = 0;
    for (; i + LN_LANES <= n; i += LN_LANES)
        for (int j = 0; j < LN_LANES; j++) acc[j] += (double)x[i + j];
    double tail = 0.0;
    for (; i < n; i++) tail += (double)x[i];
    return ln_lanes_total(acc) + tail;
}

// Σ (x − m)²
static double ln_sumsq_centered(const float *x, double m, int64_t n) {
    double acc[LN_LANES] = {0};
    int64_t i = 0;
    for (; i + LN_LANES <= n; i += LN_LANES)
        for (int j = 0; j < LN_LANES; j++) {
            double d = (double)x[i + j] - m;
            acc[j] += d * d;
        }
    double tail = 0.0;
    for (; i < n; i++) {
        double d = (double)x[i] - m;
        tail += d * d;
    }
    return ln_lanes_total(acc) + tail;
}

static void ln_check_vec(const OcrTensor *t, int64_t n, const char *what) {
    CPU_ASSERT_FLOAT(t);
    OCR_ASSERT(ocr_tensor_numel(t) == n, "layernorm: %s has %lld elements, expected %lld", what,
               (long long)ocr_tensor_numel(t), (long long)n);
}

void ocr_cpu_layernorm_forward(OcrTensor *out, OcrTensor *mean, OcrTensor *rstd, const OcrTensor *inp,
                       const OcrTensor *gamma, const OcrTensor *beta, float eps) {
    CPU_ASSERT_FLOAT(out);
    CPU_ASSERT_FLOAT(inp);
    OCR_ASSERT(ocr_tensor_same_shape(out, inp), "layernorm: out and inp shapes differ");
    const int64_t C = ocr_tensor_dim(inp, -1);
    OCR_ASSERT(C > 0, "layernorm: zero-width rows");
    const int64_t R = ocr_tensor_numel(inp) / C;
    if (gamma) ln_check_vec(gamma, C, "gamma");
    if (beta) ln_check_vec(beta, C, "beta");
    if (mean) ln_check_vec(mean, R, "mean");
    if (rstd) ln_check_vec(rstd, R, "rstd");

    CpuScratch s = {0};
    OcrTensor vx, vy;
    float *whole;
    const OcrTensor *X = ocr_cpu_tiled_in(&s, inp, &vx);
    OcrTensor *Y = ocr_cpu_tiled_out(&s, out, &vy, 0, &whole);
    const float *g = gamma ? ocr_cpu_f32_in(&s, gamma) : NULL;
    const float *b = beta ? ocr_cpu_f32_in(&s, beta) : NULL;
    float *ones = NULL, *zeros = NULL;
    if (!g || !b) {
        ones = ocr_cpu_scratch_floats(&s, (size_t)C);
        zeros = ocr_cpu_scratch_floats(&s, (size_t)C);
        for (int64_t c = 0; c < C; c++) {
            ones[c] = 1.0f;
            zeros[c] = 0.0f;
        }
        if (!g) g = ones;
        if (!b) b = zeros;
    }
    float *mu_out = mean ? ocr_cpu_f32_out(&s, mean, 0) : NULL;
    float *rs_out = rstd ? ocr_cpu_f32_out(&s, rstd, 0) : NULL;
    // Row tiles; per thread two buffers of a tile (used only where the maps are not f32).
    const int64_t tr = cpu_tile_rows(C), ntiles = (R + tr - 1) / tr;
    const int par = R * C >= LN_PAR_MIN;
    const size_t per = (size_t)(tr * C);
    float *bufs = ocr_cpu_scratch_floats(&s, (size_t)(par ? omp_get_max_threads() : 1) * 2 * per);

#pragma omp parallel for schedule(static) if (par)
    for (int64_t t = 0; t < ntiles; t++) {
        const int64_t r0 = t * tr, nr = r0 + tr <= R ? tr : R - r0;
        float *bx = bufs + (size_t)omp_get_thread_num() * 2 * per, *by = bx + per;
        const float *x = ocr_cpu_rows_in(X, C, r0, nr, bx);
        float *y = ocr_cpu_rows_dst(Y, C, r0, by);
        for (int64_t i = 0; i < nr; i++) {
            const int64_t r = r0 + i;
            const float *xr = x + i * C;
            float *yr = y + i * C;
            double m = ln_sum(xr, C) / (double)C;
            double v = ln_sumsq_centered(xr, m, C) / (double)C;
            const float mf = (float)m, rf = (float)(1.0 / sqrt(v + (double)eps));
            for (int64_t c = 0; c < C; c++) yr[c] = (xr[c] - mf) * rf * g[c] + b[c];
            if (mu_out) mu_out[r] = mf;
            if (rs_out) rs_out[r] = rf;
        }
        ocr_cpu_rows_out(Y, C, r0, nr, y);
    }
    if (whole) ocr_cpu_f32_store(out, whole);
    if (mean) ocr_cpu_f32_store(mean, mu_out);
    if (rstd) ocr_cpu_f32_store(rstd, rs_out);
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_layernorm_backward(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                        const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *mean, const OcrTensor *rstd) {
    CPU_ASSERT_FLOAT(dout);
    CPU_ASSERT_FLOAT(inp);
    OCR_ASSERT(ocr_tensor_same_shape(dout, inp), "layernorm: dout and inp shapes differ");
    if (dinp) {
        CPU_ASSERT_FLOAT(dinp);
        OCR_ASSERT(ocr_tensor_same_shape(dinp, inp), "layernorm: dinp and inp shapes differ");
    }
    const int64_t C = ocr_tensor_dim(inp, -1);
    OCR_ASSERT(C > 0, "layernorm: zero-width rows");
    const int64_t R = ocr_tensor_numel(inp) / C;
    if (gamma) ln_check_vec(gamma, C, "gamma");
    if (dgamma) ln_check_vec(dgamma, C, "dgamma");
    if (dbeta) ln_check_vec(dbeta, C, "dbeta");
    ln_check_vec(mean, R, "mean");
    ln_check_vec(rstd, R, "rstd");

    CpuScratch s = {0};
    OcrTensor vx, vdy, vdx;
    float *whole = NULL;
    const OcrTensor *X = ocr_cpu_tiled_in(&s, inp, &vx);
    const OcrTensor *DY = ocr_cpu_tiled_in(&s, dout, &vdy);
    OcrTensor *DX = dinp ? ocr_cpu_tiled_out(&s, dinp, &vdx, 0, &whole) : NULL;
    const float *mu = ocr_cpu_f32_in(&s, mean);
    const float *rs = ocr_cpu_f32_in(&s, rstd);
    const float *g = gamma ? ocr_cpu_f32_in(&s, gamma) : NULL;
    if (!g) {
        float *ones = ocr_cpu_scratch_floats(&s, (size_t)C);
        for (int64_t c = 0; c < C; c++) ones[c] = 1.0f;
        g = ones;
    }
    const int want_params = dgamma || dbeta;
    const int64_t nch = R < LN_MAX_CHUNKS ? R : LN_MAX_CHUNKS;
    // Per chunk: partial Σ dy·xhat and Σ dy (double), plus one float row of dy·gamma.
    double *part = want_params ? ocr_cpu_scratch_bytes(&s, (size_t)(2 * nch * C + 1) * sizeof(double)) : NULL;
    float *dxh_all = ocr_cpu_scratch_floats(&s, (size_t)(nch * C + 1));
    const double inv_c = 1.0 / (double)C;
    // Each chunk's rows in tiles; per thread three buffers of a tile (x, dy, dx).
    const int64_t tr = cpu_tile_rows(C);
    const int par = R * C >= LN_PAR_MIN;
    const size_t per = (size_t)(tr * C);
    float *bufs = ocr_cpu_scratch_floats(&s, (size_t)(par ? omp_get_max_threads() : 1) * 3 * per);

#pragma omp parallel for schedule(static) if (par)
    for (int64_t k = 0; k < nch; k++) {
        double *pg = want_params ? part + 2 * k * C : NULL;
        double *pb = want_params ? pg + C : NULL;
        float *dxh = dxh_all + k * C;
        float *bx = bufs + (size_t)omp_get_thread_num() * 3 * per, *bg = bx + per, *bd = bg + per;
        if (want_params)
            for (int64_t c = 0; c < C; c++) pg[c] = pb[c] = 0.0;
        const int64_t r0 = k * R / nch, r1 = (k + 1) * R / nch;
        for (int64_t t0 = r0; t0 < r1; t0 += tr) {
            const int64_t nr = t0 + tr <= r1 ? tr : r1 - t0;
            const float *x = ocr_cpu_rows_in(X, C, t0, nr, bx), *dy = ocr_cpu_rows_in(DY, C, t0, nr, bg);
            float *dx = DX ? ocr_cpu_rows_dst(DX, C, t0, bd) : NULL;
            for (int64_t r = t0; r < t0 + nr; r++) {
                const float *xr = x + (r - t0) * C, *gr = dy + (r - t0) * C;
                const float m = mu[r], rr = rs[r];
                if (want_params)
                    for (int64_t c = 0; c < C; c++) {
                        double xh = (double)((xr[c] - m) * rr);
                        pg[c] += (double)gr[c] * xh;
                        pb[c] += (double)gr[c];
                    }
                if (!dx) continue;
                // dx = rstd · (dxhat − mean(dxhat) − xhat · mean(dxhat · xhat)), dxhat = dy · gamma.
                double a1[LN_LANES] = {0}, a2[LN_LANES] = {0};
                int64_t c = 0;
                for (; c + LN_LANES <= C; c += LN_LANES)
                    for (int j = 0; j < LN_LANES; j++) {
                        float d = gr[c + j] * g[c + j];
                        dxh[c + j] = d;
                        a1[j] += (double)d;
                        a2[j] += (double)d * (double)((xr[c + j] - m) * rr);
                    }
                double t1 = 0.0, t2 = 0.0;
                for (; c < C; c++) {
                    float d = gr[c] * g[c];
                    dxh[c] = d;
                    t1 += (double)d;
                    t2 += (double)d * (double)((xr[c] - m) * rr);
                }
                const float m1 = (float)((ln_lanes_total(a1) + t1) * inv_c);
                const float m2 = (float)((ln_lanes_total(a2) + t2) * inv_c);
                float *dr = dx + (r - t0) * C;
                for (c = 0; c < C; c++) dr[c] = rr * (dxh[c] - m1 - (xr[c] - m) * rr * m2);
            }
            if (dx) ocr_cpu_rows_out(DX, C, t0, nr, dx);
        }
    }
    if (whole) ocr_cpu_f32_store(dinp, whole);

    if (want_params) {
        float *dg = dgamma ? ocr_cpu_f32_out(&s, dgamma, 1) : NULL;
        float *db = dbeta ? ocr_cpu_f32_out(&s, dbeta, 1) : NULL;
        for (int64_t c = 0; c < C; c++) {
            double tg = 0.0, tb = 0.0;
            for (int64_t k = 0; k < nch; k++) {
                tg += part[2 * k * C + c];
                tb += part[2 * k * C + C + c];
            }
            if (dg) dg[c] = (float)((double)dg[c] + tg);
            if (db) db[c] = (float)((double)db[c] + tb);
        }
        if (dg) ocr_cpu_f32_store(dgamma, dg);
        if (db) ocr_cpu_f32_store(dbeta, db);
    }
    ocr_cpu_scratch_free(&s);
}

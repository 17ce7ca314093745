// Batch normalisation over N·H·W per channel of an NHWC tensor (Paddle's BatchNorm2D).
//
// The data is viewed as M = N·H·W rows of C channels, so every inner loop runs over the
// contiguous channel dimension. Statistics accumulate in double: per-chunk partial sums over
// a FIXED number of row chunks (not one per thread), combined in chunk order, so the
// statistics are bitwise identical for any thread count.
//
// The forward and backward are bn_act.c's fused kernels with no activation (the same
// arithmetic); this file holds the shared pieces: the statistics, the row-tile loops at the
// CPU's vector width (rowwise.h) and the per-channel coefficients. f16/bf16 data is widened and
// rounded a tile at a time, never as a whole-tensor fp32 copy.
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/half.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/rowwise.h"
#include "kernels/ops.h"

#define BN_MAX_CHUNKS 32
// Below this many elements an OpenMP team costs more than it saves.
#define BN_PAR_MIN 16384

int64_t ocr_cpu_bn_chunks(int64_t rows) { return rows < BN_MAX_CHUNKS ? rows : BN_MAX_CHUNKS; }

// A (C,) parameter/statistics tensor: any float dtype, exactly C elements.
static void bn_check_vec(const OcrTensor *t, int64_t C, const char *what) {
    CPU_ASSERT_FLOAT(t);
    OCR_ASSERT(ocr_tensor_numel(t) == C, "batchnorm: %s has %lld elements, expected C = %lld", what,
               (long long)ocr_tensor_numel(t), (long long)C);
}

// ---- row-tile kernels (rowwise.h) -------------------------------------------------------------

// The statistics of a tile: s1 (C) += Σ (x − shift), s2 (C) += Σ (x − shift)², in double, rows
// in order. Rows outer and channels inner, every row would load and store each channel's two
// accumulators; instead STATS_ROWS rows go by per pass along the channels, their terms added to
// the accumulators in registers, stored once per pass. Each channel adds the same terms in the
// same order: the same bits. Channels stay the inner loop (a group of channels walked down all
// of a tile's rows reads with a stride of C, which measured slower on maps that come from
// memory), and each pass prefetches the next pass's rows: a few rows read side by side are short
// streams that the hardware prefetchers pick up late (without it the pass measured slower than
// the row-at-a-time loop on maps larger than the cache; 8 rows per pass measured slower than 4).
// The gradient sums (sums_tile) measured no faster in this form and keep the row loop.
#define STATS_ROWS 4

// Element i of x (f32, or bf16 when bf16 is set; a constant after inlining) widened to double.
CPU_INLINE double stats_load(const void *x, int64_t i, int bf16) {
    if (!bf16) return (double)((const float *)x)[i];
    return (double)ocr_bf16_to_f32(((const uint16_t *)x)[i]);
}

// Rows r..r+nr−1 of the tile (nr a constant after inlining).
CPU_INLINE void stats_rows(double *restrict s1, double *restrict s2, const void *x, const float *restrict shift,
                           int64_t r, int nr, int64_t C, int bf16) {
    for (int64_t c = 0; c < C; c++) {
        double a = s1[c], q = s2[c];
        const double h = (double)shift[c];
        for (int k = 0; k < nr; k++) {
            const double d = stats_load(x, (r + k) * C + c, bf16) - h;
            a += d;
            q += d * d;
        }
        s1[c] = a;
        s2[c] = q;
    }
}

// The tile (rows, C); the prefetches stay inside it (the caller's next tile may not exist).
CPU_INLINE void stats_tile_rows(double *restrict s1, double *restrict s2, const void *x, const float *restrict shift,
                                int64_t rows, int64_t C, int bf16) {
    const int64_t row_bytes = C * (bf16 ? 2 : 4);
    int64_t r = 0;
    for (; r + STATS_ROWS <= rows; r += STATS_ROWS) {
        if (r + 2 * STATS_ROWS <= rows) {
            const char *next = (const char *)x + (r + STATS_ROWS) * row_bytes;
            for (int64_t b = 0; b < STATS_ROWS * row_bytes; b += 64) __builtin_prefetch(next + b);
        }
        stats_rows(s1, s2, x, shift, r, STATS_ROWS, C, bf16);
    }
    for (; r < rows; r++) stats_rows(s1, s2, x, shift, r, 1, C, bf16);
}

CPU_INLINE void stats_tile_body(double *restrict s1, double *restrict s2, const float *restrict x,
                                const float *restrict shift, int64_t rows, int64_t C) {
    stats_tile_rows(s1, s2, x, shift, rows, C, 0);
}
CPU_VEC_CLONES(stats_tile, (double *s1, double *s2, const float *x, const float *shift, int64_t rows, int64_t C),
               (s1, s2, x, shift, rows, C))

CPU_INLINE void value_tile_body(float *restrict v, const float *restrict x, const float *restrict mf,
                                const float *restrict af, const float *restrict bf, int64_t rows, int64_t C) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * C;
        float *vr = v + r * C;
        for (int64_t c = 0; c < C; c++) vr[c] = (xr[c] - mf[c]) * af[c] + bf[c];
    }
}
CPU_VEC_CLONES(value_tile, (float *v, const float *x, const float *mf, const float *af, const float *bf, int64_t rows,
                            int64_t C),
               (v, x, mf, af, bf, rows, C))
void ocr_cpu_bn_value_tile(float *v, const float *x, const float *mf, const float *af, const float *bf, int64_t rows,
                           int64_t C) {
    value_tile(v, x, mf, af, bf, rows, C);
}

CPU_INLINE void sums_tile_body(double *restrict p1, double *restrict p2, const float *restrict x,
                               const float *restrict g, const float *restrict mean, int64_t rows, int64_t C) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * C, *gr = g + r * C;
        for (int64_t c = 0; c < C; c++) {
            p1[c] += (double)gr[c];
            p2[c] += (double)gr[c] * ((double)xr[c] - (double)mean[c]);
        }
    }
}
CPU_VEC_CLONES(sums_tile, (double *p1, double *p2, const float *x, const float *g, const float *mean, int64_t rows,
                           int64_t C),
               (p1, p2, x, g, mean, rows, C))
void ocr_cpu_bn_sums_tile(double *p1, double *p2, const float *x, const float *g, const float *mean, int64_t rows,
                          int64_t C) {
    sums_tile(p1, p2, x, g, mean, rows, C);
}

// dx may equal g (the parked gradient turns into dx in place), so no restrict on those two.
CPU_INLINE void dx_tile_body(float *dx, const float *g, const float *restrict x, const float *restrict mean,
                             const float *restrict a, const float *restrict b, const float *restrict k, int64_t rows,
                             int64_t C) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * C, *gr = g + r * C;
        float *dr = dx + r * C;
        for (int64_t c = 0; c < C; c++) dr[c] = a[c] * gr[c] + b[c] * (xr[c] - mean[c]) + k[c];
    }
}
CPU_VEC_CLONES(dx_tile, (float *dx, const float *g, const float *x, const float *mean, const float *a, const float *b,
                         const float *k, int64_t rows, int64_t C),
               (dx, g, x, mean, a, b, k, rows, C))
void ocr_cpu_bn_dx_tile(float *dx, const float *g, const float *x, const float *mean, const float *a, const float *b,
                        const float *k, int64_t rows, int64_t C) {
    dx_tile(dx, g, x, mean, a, b, k, rows, C);
}

// dx_tile on bf16 maps with the conversions in registers (BF16-O2's maps): g and x are widened
// as they are loaded (exact) and dx rounded as it is stored, with ocr_f32_to_bf16's
// round-to-nearest-even and NaN quieting, the rounding the bulk converters do: the bits of
// widening into a buffer, dx_tile, rounding back, without the buffer's extra stores and loads.
// dx may equal g (the parked gradient turns into dx in place).
CPU_INLINE void dx_tile_bf16_body(uint16_t *dx, const uint16_t *g, const uint16_t *restrict x,
                                  const float *restrict mean, const float *restrict a, const float *restrict b,
                                  const float *restrict k, int64_t rows, int64_t C) {
    int64_t r = 0;
    const int64_t grp = cpu_group_rows(C);
    if (grp > 1 && rows >= grp) {
        // Groups of rows as one flat loop where C leaves a partial vector per row (rowwise.h).
        const int64_t L = grp * C;
        float m2[CPU_GROUP_MAX], a2[CPU_GROUP_MAX], b2[CPU_GROUP_MAX], k2[CPU_GROUP_MAX];
        cpu_repeat_coefs(m2, mean, C, L), cpu_repeat_coefs(a2, a, C, L);
        cpu_repeat_coefs(b2, b, C, L), cpu_repeat_coefs(k2, k, C, L);
        for (; r + grp <= rows; r += grp) {
            const uint16_t *xr = x + r * C, *gr = g + r * C;
            uint16_t *dr = dx + r * C;
            for (int64_t j = 0; j < L; j++) {
                const float v = a2[j] * ocr_bf16_to_f32(gr[j]) + b2[j] * (ocr_bf16_to_f32(xr[j]) - m2[j]) + k2[j];
                dr[j] = ocr_f32_to_bf16(v);
            }
        }
    }
    for (; r < rows; r++) {
        const uint16_t *xr = x + r * C, *gr = g + r * C;
        uint16_t *dr = dx + r * C;
        for (int64_t c = 0; c < C; c++) {
            const float v = a[c] * ocr_bf16_to_f32(gr[c]) + b[c] * (ocr_bf16_to_f32(xr[c]) - mean[c]) + k[c];
            dr[c] = ocr_f32_to_bf16(v);
        }
    }
}
CPU_VEC_CLONES(dx_tile_bf16, (uint16_t *dx, const uint16_t *g, const uint16_t *x, const float *mean, const float *a,
                              const float *b, const float *k, int64_t rows, int64_t C),
               (dx, g, x, mean, a, b, k, rows, C))
void ocr_cpu_bn_dx_tile_bf16(uint16_t *dx, const uint16_t *g, const uint16_t *x, const float *mean, const float *a,
                             const float *b, const float *k, int64_t rows, int64_t C) {
    dx_tile_bf16(dx, g, x, mean, a, b, k, rows, C);
}

// mean, var (C) = batch mean and biased variance of x (M, C). The sums are shifted by the
// first row, which keeps the one-pass variance accurate when |mean| >> std. Each chunk's rows
// are widened a tile at a time into the thread's buffer.
// stats_tile on a bf16 map, widened in registers (exact: the same sums).
CPU_INLINE void stats_tile_bf16_body(double *restrict s1, double *restrict s2, const uint16_t *restrict x,
                                     const float *restrict shift, int64_t rows, int64_t C) {
    stats_tile_rows(s1, s2, x, shift, rows, C, 1);
}
CPU_VEC_CLONES(stats_tile_bf16, (double *s1, double *s2, const uint16_t *x, const float *shift, int64_t rows,
                                 int64_t C),
               (s1, s2, x, shift, rows, C))

// sums_tile with g = dy (no activation) on bf16 maps, widened in registers.
CPU_INLINE void sums_tile_bf16_body(double *restrict p1, double *restrict p2, const uint16_t *restrict x,
                                    const uint16_t *restrict g, const float *restrict mean, int64_t rows, int64_t C) {
    for (int64_t r = 0; r < rows; r++) {
        const uint16_t *xr = x + r * C, *gr = g + r * C;
        for (int64_t c = 0; c < C; c++) {
            const double gv = (double)ocr_bf16_to_f32(gr[c]);
            p1[c] += gv;
            p2[c] += gv * ((double)ocr_bf16_to_f32(xr[c]) - (double)mean[c]);
        }
    }
}
CPU_VEC_CLONES(sums_tile_bf16, (double *p1, double *p2, const uint16_t *x, const uint16_t *g, const float *mean,
                                int64_t rows, int64_t C),
               (p1, p2, x, g, mean, rows, C))
void ocr_cpu_bn_sums_tile_bf16(double *p1, double *p2, const uint16_t *x, const uint16_t *g, const float *mean,
                               int64_t rows, int64_t C) {
    sums_tile_bf16(p1, p2, x, g, mean, rows, C);
}

void ocr_cpu_bn_batch_stats_rows(double *mean, double *var, const OcrTensor *x, int64_t M, int64_t C, CpuScratch *s) {
    const int64_t nch = ocr_cpu_bn_chunks(M);
    const int par = M * C >= BN_PAR_MIN;
    const int nthr = par ? omp_get_max_threads() : 1;
    const int64_t tr = cpu_tile_rows(C);
    double *part = ocr_cpu_scratch_bytes(s, (size_t)(2 * nch * C) * sizeof(double));
    float *shift_buf = ocr_cpu_scratch_floats(s, (size_t)C);
    float *tiles =
        x->dtype == OCR_F32 || x->dtype == OCR_BF16 ? NULL : ocr_cpu_scratch_floats(s, (size_t)nthr * (size_t)(tr * C));
    const float *shift = ocr_cpu_rows_in(x, C, 0, 1, shift_buf);
#pragma omp parallel for schedule(static) if (par)
    for (int64_t k = 0; k < nch; k++) {
        float *buf = tiles ? tiles + (size_t)omp_get_thread_num() * (size_t)(tr * C) : NULL;
        double *s1 = part + 2 * k * C, *s2 = s1 + C;
        for (int64_t c = 0; c < C; c++) s1[c] = s2[c] = 0.0;
        const int64_t r0 = k * M / nch, r1 = (k + 1) * M / nch;
        for (int64_t t0 = r0; t0 < r1; t0 += tr) {
            const int64_t rows = t0 + tr <= r1 ? tr : r1 - t0;
            if (x->dtype == OCR_BF16)
                stats_tile_bf16(s1, s2, (const uint16_t *)x->data + (size_t)(t0 * C), shift, rows, C);
            else
                stats_tile(s1, s2, ocr_cpu_rows_in(x, C, t0, rows, buf), shift, rows, C);
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

void ocr_cpu_batchnorm2d_forward(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd, OcrTensor *running_mean,
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

    OCR_ASSERT(!training || M > 0, "batchnorm: training on an empty batch");
    OCR_ASSERT(training || (running_mean && running_var), "batchnorm: inference needs the running statistics");
    // The fused kernel with no activation is this op exactly: the value rounded into out.
    ocr_cpu_batchnorm2d_act_forward(out, save_mean, save_rstd, NULL, running_mean, running_var, inp, gamma, beta,
                                    OCR_ACT_NONE, momentum, eps, training, NULL);
}

// BN's parameter gradients from the per-channel sums sdy = Σ dy and sdx = Σ dy·(x − mean):
// dbeta += sdy, dgamma += sdx·rstd (either may be NULL). Shared with bn_act.c.
void ocr_cpu_bn_param_grads(CpuScratch *s, OcrTensor *dgamma, OcrTensor *dbeta, const double *sdy, const double *sdx,
                            const float *rstd, int64_t C) {
    if (dbeta) {
        float *db = ocr_cpu_f32_out(s, dbeta, 1);
        for (int64_t c = 0; c < C; c++) db[c] = (float)((double)db[c] + sdy[c]);
        ocr_cpu_f32_store(dbeta, db);
    }
    if (dgamma) {
        float *dg = ocr_cpu_f32_out(s, dgamma, 1);
        for (int64_t c = 0; c < C; c++) dg[c] = (float)((double)dg[c] + sdx[c] * (double)rstd[c]);
        ocr_cpu_f32_store(dgamma, dg);
    }
}

// The input gradient's per-channel coefficients, dx = a·dy + b·(x − mean) + k (C floats each,
// from s). Through fixed statistics only a = gamma·rstd survives; through batch statistics the
// mean and variance terms add b = −gamma·rstd³·sdx/M and k = −gamma·rstd·sdy/M.
void ocr_cpu_bn_dx_coefs(CpuScratch *s, float **a_out, float **b_out, float **k_out, const float *g, const float *rstd,
                         const double *sdy, const double *sdx, int64_t C, int64_t M, int training) {
    float *af = ocr_cpu_scratch_floats(s, (size_t)C);
    float *bf = ocr_cpu_scratch_floats(s, (size_t)C);
    float *kf = ocr_cpu_scratch_floats(s, (size_t)C);
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

void ocr_cpu_batchnorm2d_backward(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
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
    if (gamma) bn_check_vec(gamma, C, "gamma");
    if (dgamma) bn_check_vec(dgamma, C, "dgamma");
    if (dbeta) bn_check_vec(dbeta, C, "dbeta");
    bn_check_vec(save_mean, C, "save_mean");
    bn_check_vec(save_rstd, C, "save_rstd");

    // The fused backward with no activation: the sums over dout, then dx a tile at a time.
    ocr_cpu_batchnorm2d_act_backward(dinp, dgamma, dbeta, dout, inp, gamma, NULL, save_mean, save_rstd, NULL,
                                     OCR_ACT_NONE, dinp ? dinp->dtype : OCR_F32, training, NULL);
}

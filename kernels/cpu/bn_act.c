// Batch norm followed by an activation, fused (NHWC, viewed as M = N·H·W rows of C channels).
//
// Bit-identical to the unfused pair by construction: the statistics come from batchnorm.c's
// own routine (cpu_bn_batch_stats, same fixed row chunks), the per-channel coefficients and the
// per-element expression are batchnorm.c's, the pre-activation value is rounded to the dtype
// the unfused pair stores it in, and the activation runs through activation.c's own loops
// (cpu_act_forward_f32 / cpu_act_backward_f32) on row tiles small enough to stay in cache.
// The backward's sums visit the rows of each chunk in order, as batchnorm.c's do.
//
// Passes over the map: forward = statistics + one fused normalise/activate pass; backward = the
// sums of g and g·(x − mean) (the value rebuilt from save_mean, save_scale and beta),
// g = dout·act'(value) formed per tile and parked in dinp's buffer + one elementwise pass that
// turns g into dx in place. No BN output and no separate activation gradient map.
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "core/half.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/ops.h"

// Below this many elements an OpenMP team costs more than it saves (batchnorm.c's threshold).
#define BNA_PAR_MIN 16384
// Elements per row tile: small enough that the tile is still in L1/L2 when the activation
// reads it back, and below activation.c's own parallel thresholds, so its loops run serially
// inside our parallel loop.
#define BNA_TILE 4096

static void bna_check_vec(const OcrTensor *t, int64_t C, const char *what) {
    CPU_ASSERT_FLOAT(t);
    OCR_ASSERT(ocr_tensor_numel(t) == C, "batchnorm_act: %s has %lld elements, expected C = %lld", what,
               (long long)ocr_tensor_numel(t), (long long)C);
}

static int64_t bna_tile_rows(int64_t C) { return C >= BNA_TILE ? 1 : BNA_TILE / C; }

// v (n) = v rounded to dt and back (nearest even, the bulk conversions cpu_f32_store uses).
static void round_through(float *v, int64_t n, ocr_dtype_t dt, uint16_t *tmp) {
    if (dt == OCR_F16) {
        ocr_f32_to_f16_array(tmp, v, (size_t)n);
        ocr_f16_to_f32_array(v, tmp, (size_t)n);
    } else if (dt == OCR_BF16) {
        ocr_f32_to_bf16_array(tmp, v, (size_t)n);
        ocr_bf16_to_f32_array(v, tmp, (size_t)n);
    }
}

// Normalisation coefficients, as batchnorm2d_forward_cpu computes them: the value is
// (x − mf)·af + bf with mf = (float)mean, af = (float)(gamma·rstd) in double, bf = beta.
// mean, var (C, double) are the statistics used; rstd (C) their f32 1/sqrt(var + eps).
typedef struct {
    double *mean, *var;
    const float *mf, *af, *bf;
    float *rstd;
} BnaCoef;

static BnaCoef bna_coef(CpuScratch *s, const float *x, int64_t M, int64_t C, const OcrTensor *running_mean,
                        const OcrTensor *running_var, const OcrTensor *gamma, const OcrTensor *beta, float eps,
                        int training) {
    BnaCoef k;
    k.mean = cpu_scratch_bytes(s, (size_t)C * sizeof(double));
    k.var = cpu_scratch_bytes(s, (size_t)C * sizeof(double));
    if (training) {
        OCR_ASSERT(M > 0, "batchnorm_act: training on an empty batch");
        cpu_bn_batch_stats(k.mean, k.var, x, M, C, s);
    } else {
        OCR_ASSERT(running_mean && running_var, "batchnorm_act: inference needs the running statistics");
        const float *rm = cpu_f32_in(s, running_mean), *rv = cpu_f32_in(s, running_var);
        for (int64_t c = 0; c < C; c++) {
            k.mean[c] = rm[c];
            k.var[c] = rv[c];
        }
    }
    const float *g = gamma ? cpu_f32_in(s, gamma) : NULL;
    const float *b = beta ? cpu_f32_in(s, beta) : NULL;
    float *mf = cpu_scratch_floats(s, (size_t)C);
    float *af = cpu_scratch_floats(s, (size_t)C);
    float *bf = cpu_scratch_floats(s, (size_t)C);
    k.rstd = cpu_scratch_floats(s, (size_t)C);
    for (int64_t c = 0; c < C; c++) {
        double r = 1.0 / sqrt(k.var[c] + (double)eps);
        k.rstd[c] = (float)r;
        mf[c] = (float)k.mean[c];
        af[c] = (float)((g ? (double)g[c] : 1.0) * r);
        bf[c] = b ? b[c] : 0.0f;
    }
    k.mf = mf, k.af = af, k.bf = bf;
    return k;
}

// v (rows, C) = the pre-activation values of x rows, rounded to mid.
static inline void bna_value_tile(float *v, const float *x, int64_t rows, int64_t C, const BnaCoef *k,
                                  ocr_dtype_t mid, uint16_t *tmp) {
    const float *mf = k->mf, *af = k->af, *bf = k->bf;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * C;
        float *vr = v + r * C;
        for (int64_t c = 0; c < C; c++) vr[c] = (xr[c] - mf[c]) * af[c] + bf[c];
    }
    round_through(v, rows * C, mid, tmp);
}

void batchnorm2d_act_forward_cpu(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd,
                                 OcrTensor *save_scale, OcrTensor *running_mean, OcrTensor *running_var,
                                 const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta,
                                 ocr_activation_t act, float momentum, float eps, int training) {
    CPU_ASSERT_FLOAT(out);
    CPU_ASSERT_FLOAT(inp);
    OCR_ASSERT(ocr_tensor_same_shape(out, inp), "batchnorm_act: out and inp shapes differ");
    OCR_ASSERT((unsigned)act < OCR_ACT_COUNT, "unknown activation %d", (int)act);
    const int64_t C = ocr_tensor_dim(inp, -1);
    OCR_ASSERT(C > 0, "batchnorm_act: zero channels");
    const int64_t M = ocr_tensor_numel(inp) / C;
    if (gamma) bna_check_vec(gamma, C, "gamma");
    if (beta) bna_check_vec(beta, C, "beta");
    if (save_mean) bna_check_vec(save_mean, C, "save_mean");
    if (save_rstd) bna_check_vec(save_rstd, C, "save_rstd");
    if (save_scale) bna_check_vec(save_scale, C, "save_scale");
    if (running_mean) bna_check_vec(running_mean, C, "running_mean");
    if (running_var) bna_check_vec(running_var, C, "running_var");

    CpuScratch s = {0};
    const float *x = cpu_f32_in(&s, inp);
    const BnaCoef k = bna_coef(&s, x, M, C, running_mean, running_var, gamma, beta, eps, training);

    const ocr_dtype_t mid = out->dtype;
    const int64_t tr = bna_tile_rows(C), ntiles = (M + tr - 1) / tr;
    const int par = M * C >= BNA_PAR_MIN;
    const int nthr = par ? omp_get_max_threads() : 1;
    // Per-thread tiles: the values (read by the activation into y, not in place, so that its
    // loop needs no overlap check) and the rounding buffer.
    float *tv = cpu_scratch_floats(&s, (size_t)(nthr * tr * C));
    uint16_t *tmp = mid == OCR_F32 ? NULL : cpu_scratch_bytes(&s, (size_t)(nthr * tr * C) * sizeof(uint16_t));
    float *y = cpu_f32_out(&s, out, 0);
#pragma omp parallel for schedule(static) if (par)
    for (int64_t t = 0; t < ntiles; t++) {
        const int64_t r0 = t * tr, rows = (r0 + tr <= M ? tr : M - r0);
        const size_t off = (size_t)omp_get_thread_num() * (size_t)(tr * C);
        bna_value_tile(tv + off, x + r0 * C, rows, C, &k, mid, tmp ? tmp + off : NULL);
        cpu_act_forward_f32(y + r0 * C, tv + off, rows * C, act);
    }
    cpu_f32_store(out, y);

    if (save_mean) {
        float *sm = cpu_f32_out(&s, save_mean, 0);
        memcpy(sm, k.mf, (size_t)C * sizeof(float));
        cpu_f32_store(save_mean, sm);
    }
    if (save_rstd) {
        float *sr = cpu_f32_out(&s, save_rstd, 0);
        memcpy(sr, k.rstd, (size_t)C * sizeof(float));
        cpu_f32_store(save_rstd, sr);
    }
    if (save_scale) {
        float *sa = cpu_f32_out(&s, save_scale, 0);
        memcpy(sa, k.af, (size_t)C * sizeof(float));
        cpu_f32_store(save_scale, sa);
    }
    if (training && running_mean) {
        float *rm = cpu_f32_out(&s, running_mean, 1);
        for (int64_t c = 0; c < C; c++) rm[c] = (float)(momentum * (double)rm[c] + (1.0 - momentum) * k.mean[c]);
        cpu_f32_store(running_mean, rm);
    }
    if (training && running_var) {
        // Paddle keeps the biased batch variance in the running estimate (as batchnorm.c).
        float *rv = cpu_f32_out(&s, running_var, 1);
        for (int64_t c = 0; c < C; c++) rv[c] = (float)(momentum * (double)rv[c] + (1.0 - momentum) * k.var[c]);
        cpu_f32_store(running_var, rv);
    }
    cpu_scratch_free(&s);
}

// Per-thread tile buffers of the backward.
typedef struct {
    float *v, *g;
    uint16_t *tmp;
} BnaTile;

// g (rows, C) = dout · act'(value) rounded to mid, for rows starting at row r0, into gout (rows,
// C) or, when gout is NULL, the thread's tile; returns g (dout itself for OCR_ACT_NONE).
static inline const float *bna_grad_tile(const BnaTile *b, float *gout, const float *x, const float *dy, int64_t r0,
                                         int64_t rows, int64_t C, const BnaCoef *k, ocr_activation_t act,
                                         ocr_dtype_t mid) {
    if (act == OCR_ACT_NONE) return dy + r0 * C;
    float *g = gout ? gout : b->g;
    bna_value_tile(b->v, x + r0 * C, rows, C, k, mid, b->tmp);
    cpu_act_backward_f32(g, dy + r0 * C, b->v, rows * C, act);
    round_through(g, rows * C, mid, b->tmp);
    return g;
}

void batchnorm2d_act_backward_cpu(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                                  const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta,
                                  const OcrTensor *save_mean, const OcrTensor *save_rstd,
                                  const OcrTensor *save_scale, ocr_activation_t act, ocr_dtype_t mid, int training) {
    CPU_ASSERT_FLOAT(dout);
    CPU_ASSERT_FLOAT(inp);
    OCR_ASSERT(ocr_tensor_same_shape(dout, inp), "batchnorm_act: dout and inp shapes differ");
    OCR_ASSERT((unsigned)act < OCR_ACT_COUNT, "unknown activation %d", (int)act);
    OCR_ASSERT(ocr_dtype_is_float(mid), "batchnorm_act: mid must be a float dtype");
    if (dinp) {
        CPU_ASSERT_FLOAT(dinp);
        OCR_ASSERT(ocr_tensor_same_shape(dinp, inp), "batchnorm_act: dinp and inp shapes differ");
    }
    const int64_t C = ocr_tensor_dim(inp, -1);
    OCR_ASSERT(C > 0, "batchnorm_act: zero channels");
    const int64_t M = ocr_tensor_numel(inp) / C;
    if (gamma) bna_check_vec(gamma, C, "gamma");
    if (beta) bna_check_vec(beta, C, "beta");
    if (dgamma) bna_check_vec(dgamma, C, "dgamma");
    if (dbeta) bna_check_vec(dbeta, C, "dbeta");
    bna_check_vec(save_mean, C, "save_mean");
    bna_check_vec(save_rstd, C, "save_rstd");
    if (act != OCR_ACT_NONE) {
        OCR_ASSERT(save_scale, "batchnorm_act: the backward of an activation needs save_scale");
        bna_check_vec(save_scale, C, "save_scale");
        OCR_ASSERT(save_mean->dtype == OCR_F32 && save_scale->dtype == OCR_F32,
                   "batchnorm_act: save_mean and save_scale must be f32 (the value is rebuilt from them)");
    }

    const int need_sums = dgamma || dbeta || (training && dinp);
    if (!need_sums && !dinp) return;

    CpuScratch s = {0};
    const float *x = cpu_f32_in(&s, inp);
    const float *dy = cpu_f32_in(&s, dout);
    const float *mean = cpu_f32_in(&s, save_mean);
    const float *rstd = cpu_f32_in(&s, save_rstd);
    const float *g = gamma ? cpu_f32_in(&s, gamma) : NULL;
    // The value's coefficients, exactly the forward's: mf = save_mean, af = save_scale, bf = beta.
    BnaCoef k = {0};
    if (act != OCR_ACT_NONE) {
        float *bf = cpu_scratch_floats(&s, (size_t)C);
        const float *be = beta ? cpu_f32_in(&s, beta) : NULL;
        for (int64_t c = 0; c < C; c++) bf[c] = be ? be[c] : 0.0f;
        k.mf = mean;
        k.af = cpu_f32_in(&s, save_scale);
        k.bf = bf;
    }

    const int64_t tr = bna_tile_rows(C);
    const int par = M * C >= BNA_PAR_MIN;
    const int nthr = par ? omp_get_max_threads() : 1;
    float *tv = NULL, *tg = NULL;
    uint16_t *tt = NULL;
    if (act != OCR_ACT_NONE) {
        tv = cpu_scratch_floats(&s, (size_t)(nthr * tr * C));
        tg = cpu_scratch_floats(&s, (size_t)(nthr * tr * C));
        tt = cpu_scratch_bytes(&s, (size_t)(nthr * tr * C) * sizeof(uint16_t));
    }
#define BNA_THREAD_TILE()                                                                     \
    BnaTile b = {0};                                                                          \
    if (tv) {                                                                                 \
        const size_t off_ = (size_t)omp_get_thread_num() * (size_t)(tr * C);                  \
        b.v = tv + off_;                                                                      \
        b.g = tg + off_;                                                                      \
        b.tmp = tt + off_;                                                                    \
    }

    // With an activation and dinp wanted, the sum pass parks g in dinp's f32 buffer, where the
    // elementwise pass reads it back and overwrites it with dx (the one map the op writes anyway),
    // so value and act' are evaluated once per element.
    float *dx = dinp ? cpu_f32_out(&s, dinp, 0) : NULL;
    float *gbuf = act != OCR_ACT_NONE && dx ? dx : NULL;
    int g_parked = 0;

    // Per channel: sdy = Σ g, sdx = Σ g · (x − mean), in double over batchnorm.c's chunks.
    double *sdy = cpu_scratch_bytes(&s, (size_t)C * sizeof(double));
    double *sdx = cpu_scratch_bytes(&s, (size_t)C * sizeof(double));
    if (need_sums) {
        const int64_t nch = M > 0 ? cpu_bn_chunks(M) : 0;
        double *part = cpu_scratch_bytes(&s, (size_t)(2 * nch * C + 1) * sizeof(double));
#pragma omp parallel for schedule(static) if (par)
        for (int64_t ch = 0; ch < nch; ch++) {
            BNA_THREAD_TILE();
            double *p1 = part + 2 * ch * C, *p2 = p1 + C;
            for (int64_t c = 0; c < C; c++) p1[c] = p2[c] = 0.0;
            const int64_t r0 = ch * M / nch, r1 = (ch + 1) * M / nch;
            for (int64_t t0 = r0; t0 < r1; t0 += tr) {
                const int64_t rows = t0 + tr <= r1 ? tr : r1 - t0;
                const float *gt = bna_grad_tile(&b, gbuf ? gbuf + t0 * C : NULL, x, dy, t0, rows, C, &k, act, mid);
                cpu_bn_accumulate_rows(p1, p2, x + t0 * C, gt, mean, rows, C);
            }
        }
        cpu_bn_reduce_chunks(sdy, sdx, part, nch, C);
        g_parked = gbuf != NULL;
    }

    cpu_bn_param_grads(&s, dgamma, dbeta, sdy, sdx, rstd, C);

    if (dinp) {
        // dx = a·g + b·(x − mean) + k, batchnorm.c's coefficients.
        float *af, *bf, *kf;
        cpu_bn_dx_coefs(&s, &af, &bf, &kf, g, rstd, sdy, sdx, C, M, training);
        const int64_t ntiles = (M + tr - 1) / tr;
#pragma omp parallel for schedule(static) if (par)
        for (int64_t t = 0; t < ntiles; t++) {
            BNA_THREAD_TILE();
            const int64_t r0 = t * tr, rows = r0 + tr <= M ? tr : M - r0;
            // g from the sum pass, or (no sums needed) formed here; with an activation it lies
            // in dx's rows already and turns into dx in place.
            if (!g_parked && gbuf) bna_grad_tile(&b, gbuf + r0 * C, x, dy, r0, rows, C, &k, act, mid);
            if (gbuf) {
                for (int64_t r = 0; r < rows; r++) {
                    const float *xr = x + (r0 + r) * C;
                    float *dr = dx + (r0 + r) * C;
                    for (int64_t c = 0; c < C; c++) dr[c] = af[c] * dr[c] + bf[c] * (xr[c] - mean[c]) + kf[c];
                }
            } else {
                for (int64_t r = 0; r < rows; r++) {
                    const float *xr = x + (r0 + r) * C, *gr = dy + (r0 + r) * C;
                    float *dr = dx + (r0 + r) * C;
                    for (int64_t c = 0; c < C; c++) dr[c] = af[c] * gr[c] + bf[c] * (xr[c] - mean[c]) + kf[c];
                }
            }
        }
        cpu_f32_store(dinp, dx);
    }
#undef BNA_THREAD_TILE
    cpu_scratch_free(&s);
}

// Softmax cross-entropy with label smoothing and an ignored class (PaddleOCR's NRTRLoss and
// SARLoss) on the CPU.
//
// With q the smoothed target distribution (1 − ε on the target, ε/(C − 1) elsewhere; ε = 0 is
// the plain one-hot) and lp = log_softmax(x), a row's loss is −Σ_j q_j·lp_j and its gradient
// softmax(x) − q (Σ q = 1). The mean runs over the rows whose target is not ignore_index, so
// the gradient of the mean divides by that count. The log-sum-exp and the loss sums are kept
// in double: with thousands of classes (6629 for PP-OCRv4 ch) a float sum of the ε/(C − 1)·lp_j
// terms would lose the small ones. The exponentials are activation_math.h's vexpf in fp32 (within
// ~1e-7 relative, far inside what the double sums then carry), so the row loops vectorise: libm's
// scalar double exp, three per logit, had made this loss a tenth of a v6 MultiHead step (its NRTR
// branch scores 6,910–18,714 classes). The sums keep CE_LANES partial sums in double, lane k taking
// the elements j ≡ k (mod CE_LANES) in order, folded in lane order: the same bits at every vector
// level and thread count.
#include <math.h>

#include "kernels/activation_math.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/ops.h"

#define CE_LANES 16

static void check_targets(const OcrTensor *logits, const OcrTensor *targets, int64_t *N, int64_t *C, const char *op) {
    CPU_ASSERT_FLOAT(logits);
    OCR_ASSERT(logits->ndim >= 1, "%s: logits need a class dimension", op);
    *C = ocr_tensor_dim(logits, -1);
    *N = *C ? ocr_tensor_numel(logits) / *C : 0;
    OCR_ASSERT(*C >= 2, "%s: %lld classes (need at least 2)", op, (long long)*C);
    OCR_ASSERT(targets->device.type == OCR_DEVICE_CPU && targets->dtype == OCR_I32 && ocr_tensor_numel(targets) == *N,
               "%s: targets must be %lld CPU int32 values", op, (long long)*N);
}

static int row_ignored(int32_t t, CrossEntropyParams p) { return p.ignore_index >= 0 && t == p.ignore_index; }

static void check_target(int32_t t, int64_t n, int64_t C, CrossEntropyParams p, const char *op) {
    OCR_ASSERT(row_ignored(t, p) || (t >= 0 && t < C), "%s: target %d at row %lld is outside [0, %lld)", op, t,
               (long long)n, (long long)C);
}

// st[0] = lse = max + log Σ exp(x − max) (NaNs skipped by the max, as fmaxf does) and, with
// want_sum, st[1] = Σ x, both in double over CE_LANES lanes.
CPU_INLINE void row_stats_body(double *restrict st, const float *restrict x, int64_t C, int want_sum) {
    float m[CE_LANES];
    double e[CE_LANES], sx[CE_LANES];
    for (int k = 0; k < CE_LANES; k++) m[k] = -INFINITY, e[k] = 0.0, sx[k] = 0.0;
    const int64_t full = C / CE_LANES * CE_LANES;
    for (int64_t j = 0; j < full; j += CE_LANES)
        for (int k = 0; k < CE_LANES; k++) m[k] = x[j + k] > m[k] ? x[j + k] : m[k];
    for (int64_t j = full; j < C; j++) m[j - full] = x[j] > m[j - full] ? x[j] : m[j - full];
    float mx = -INFINITY;
    for (int k = 0; k < CE_LANES; k++) mx = m[k] > mx ? m[k] : mx;
    // The sum of x in a loop of its own: a conditional sum in the exponentials' loop kept it
    // from vectorising (4x slower).
    for (int64_t j = 0; j < full; j += CE_LANES)
        for (int k = 0; k < CE_LANES; k++) e[k] += (double)vexpf(x[j + k] - mx);
    for (int64_t j = full; j < C; j++) e[j - full] += (double)vexpf(x[j] - mx);
    if (want_sum) {
        for (int64_t j = 0; j < full; j += CE_LANES)
            for (int k = 0; k < CE_LANES; k++) sx[k] += (double)x[j + k];
        for (int64_t j = full; j < C; j++) sx[j - full] += (double)x[j];
    }
    double es = 0.0, xs = 0.0;
    for (int k = 0; k < CE_LANES; k++) es += e[k], xs += sx[k];
    st[0] = (double)mx + log(es);
    st[1] = xs;
}
CPU_VEC_CLONES(row_stats, (double *st, const float *x, int64_t C, int want_sum), (st, x, C, want_sum))

// dr (C) = g · (exp(x − lse) − q) with q = on at the target t, off elsewhere.
CPU_INLINE void row_grad_body(float *restrict dr, const float *restrict x, int64_t C, double lse, int64_t t, double g,
                              double on, double off) {
    for (int64_t j = 0; j < C; j++) {
        const double q = j == t ? on : off;
        dr[j] = (float)(g * ((double)vexpf((float)((double)x[j] - lse)) - q));
    }
}
CPU_VEC_CLONES(row_grad, (float *dr, const float *x, int64_t C, double lse, int64_t t, double g, double on, double off),
               (dr, x, C, lse, t, g, on, off))

void ocr_cpu_cross_entropy_forward(OcrTensor *losses, OcrTensor *loss, OcrTensor *counted, const OcrTensor *logits,
                                   const OcrTensor *targets, CrossEntropyParams p) {
    int64_t N, C;
    check_targets(logits, targets, &N, &C, "cross_entropy");
    const int32_t *t = targets->data;
    for (int64_t n = 0; n < N; n++) check_target(t[n], n, C, p, "cross_entropy");
    OCR_ASSERT(!losses || (losses->device.type == OCR_DEVICE_CPU && losses->dtype == OCR_F32 &&
                           ocr_tensor_numel(losses) == N),
               "cross_entropy: losses must be %lld CPU f32 values", (long long)N);
    OCR_ASSERT(!loss || (loss->device.type == OCR_DEVICE_CPU && loss->dtype == OCR_F32 && ocr_tensor_numel(loss) == 1),
               "cross_entropy: loss must be one CPU f32 value");
    OCR_ASSERT(!counted || (counted->device.type == OCR_DEVICE_CPU && counted->dtype == OCR_I32 &&
                            ocr_tensor_numel(counted) == 1),
               "cross_entropy: counted must be one CPU int32 value");
    CpuScratch s = {0};
    const float *x = ocr_cpu_f32_in(&s, logits);
    double *row = ocr_cpu_scratch_bytes(&s, (size_t)(N ? N : 1) * sizeof(double));
    const double eps = p.smoothing, off = eps / (double)(C - 1), on = 1.0 - eps;
#pragma omp parallel for schedule(static) if (N * C > 16384)
    for (int64_t n = 0; n < N; n++) {
        if (row_ignored(t[n], p)) {
            row[n] = 0.0;
            continue;
        }
        const float *xr = x + n * C;
        double st[2];
        row_stats(st, xr, C, off != 0.0);
        const double lse = st[0];
        const double sum_lp = off != 0.0 ? st[1] - (double)C * lse : 0.0;  // Σ_j (x_j − lse)
        const double lp_t = (double)xr[t[n]] - lse;
        // −[(1 − ε)·lp_t + ε/(C − 1)·Σ_{j≠t} lp_j]
        row[n] = -(on * lp_t + off * (sum_lp - lp_t));
    }
    double total = 0.0;
    int64_t cnt = 0;
    for (int64_t n = 0; n < N; n++) {
        if (losses) ((float *)losses->data)[n] = (float)row[n];
        if (row_ignored(t[n], p)) continue;
        total += row[n];
        cnt++;
    }
    if (loss) ((float *)loss->data)[0] = cnt ? (float)(total / (double)cnt) : 0.0f;
    if (counted) ((int32_t *)counted->data)[0] = (int32_t)cnt;
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_cross_entropy_backward(OcrTensor *dlogits, const OcrTensor *logits, const OcrTensor *targets,
                                    CrossEntropyParams p) {
    if (!dlogits) return;
    int64_t N, C;
    check_targets(logits, targets, &N, &C, "cross_entropy_backward");
    CPU_ASSERT_FLOAT(dlogits);
    OCR_ASSERT(ocr_tensor_same_shape(dlogits, logits), "cross_entropy_backward: dlogits and logits shapes differ");
    const int32_t *t = targets->data;
    int64_t cnt = 0;
    for (int64_t n = 0; n < N; n++) {
        check_target(t[n], n, C, p, "cross_entropy_backward");
        cnt += !row_ignored(t[n], p);
    }
    CpuScratch s = {0};
    const float *x = ocr_cpu_f32_in(&s, logits);
    float *dx = ocr_cpu_f32_out(&s, dlogits, 0);
    const double eps = p.smoothing, off = eps / (double)(C - 1), on = 1.0 - eps;
    const double g = cnt ? (double)p.grad_scale / (double)cnt : 0.0;
#pragma omp parallel for schedule(static) if (N * C > 16384)
    for (int64_t n = 0; n < N; n++) {
        float *dr = dx + n * C;
        if (row_ignored(t[n], p)) {
            for (int64_t j = 0; j < C; j++) dr[j] = 0.0f;
            continue;
        }
        double st[2];
        row_stats(st, x + n * C, C, 0);
        row_grad(dr, x + n * C, C, st[0], t[n], g, on, off);
    }
    ocr_cpu_f32_store(dlogits, dx);
    ocr_cpu_scratch_free(&s);
}

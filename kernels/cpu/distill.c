// The distillation losses on the CPU (kernels/ops.h, "distillation losses"; the GPU twin is
// kernels/cuda/distill.cu, the per-element formulas kernels/distill_math.h).
//
// Every row's softmax is recomputed from the logits in double (max, log-sum-exp, then
// exp(z − lse) per use) rather than stored: the losses read a few passes over rows of a few
// thousand classes, and keeping no (rows, C) buffer costs nothing in memory. Row results go to a
// double array and are added in row order, so the value does not depend on the thread count.
#include <math.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/distill_math.h"
#include "kernels/ops.h"

// z_j = x_j·inv_t, with column `neg` negated first (CTC blank) and DISTILL_DKD_SHIFT taken from
// column `sub` (DKD's target removal); neg, sub < 0: none.
static inline double zval(const float *x, int64_t j, double inv_t, int64_t neg, int64_t sub) {
    double v = (double)x[j];
    if (j == neg) v = -v;
    v *= inv_t;
    if (j == sub) v -= DISTILL_DKD_SHIFT;
    return v;
}

static double row_lse(const float *x, int64_t C, double inv_t, int64_t neg, int64_t sub) {
    double mx = -INFINITY;
    for (int64_t j = 0; j < C; j++) mx = fmax(mx, zval(x, j, inv_t, neg, sub));
    double s = 0.0;
    for (int64_t j = 0; j < C; j++) s += exp(zval(x, j, inv_t, neg, sub) - mx);
    return mx + log(s);
}

static void check_pair(const OcrTensor *a, const OcrTensor *b, int64_t *rows, int64_t *C, const char *op) {
    CPU_ASSERT_FLOAT(a);
    CPU_ASSERT_FLOAT(b);
    OCR_ASSERT(a->ndim >= 2 && ocr_tensor_same_shape(a, b), "%s: the two logits must have one shape of >= 2 dims", op);
    *C = ocr_tensor_dim(a, -1);
    *rows = *C ? ocr_tensor_numel(a) / *C : 0;
    OCR_ASSERT(*C >= 2, "%s: %lld classes (need at least 2)", op, (long long)*C);
}

static void check_loss(const OcrTensor *loss, int64_t n, const char *op) {
    OCR_ASSERT(!loss || (loss->device.type == OCR_DEVICE_CPU && loss->dtype == OCR_F32 && ocr_tensor_numel(loss) == n),
               "%s: loss must be %lld CPU f32 value(s)", op, (long long)n);
}

static void check_grad(const OcrTensor *g, const OcrTensor *like, const char *op) {
    if (!g) return;
    CPU_ASSERT_FLOAT(g);
    OCR_ASSERT(ocr_tensor_same_shape(g, like), "%s: gradient and logits shapes differ", op);
}

// Row targets (int32, `rows` values) when a pad id is in use; checks them against [0, C) when
// in_range (DKD's one-hot).
static const int32_t *check_targets(const OcrTensor *t, int64_t rows, int64_t C, int needed, int in_range,
                                    const char *op) {
    if (!t) {
        OCR_ASSERT(!needed, "%s: targets are required", op);
        return NULL;
    }
    OCR_ASSERT(t->device.type == OCR_DEVICE_CPU && t->dtype == OCR_I32 && ocr_tensor_numel(t) == rows,
               "%s: targets must be %lld CPU int32 values", op, (long long)rows);
    const int32_t *v = t->data;
    if (in_range)
        for (int64_t n = 0; n < rows; n++)
            OCR_ASSERT(v[n] >= 0 && v[n] < C, "%s: target %d at row %lld is outside [0, %lld)", op, v[n],
                       (long long)n, (long long)C);
    return v;
}

// Row mask count: rows whose target is not pad_id (every row when pad_id < 0 or no targets).
static int64_t kept_rows(const int32_t *t, int64_t rows, int pad_id) {
    if (pad_id < 0 || !t) return rows;
    int64_t k = 0;
    for (int64_t n = 0; n < rows; n++) k += t[n] != pad_id;
    return k;
}

static inline int row_kept(const int32_t *t, int64_t n, int pad_id) { return pad_id < 0 || !t || t[n] != pad_id; }

// ---- DML -------------------------------------------------------------------------------------

void ocr_cpu_dml_loss_forward(OcrTensor *loss, const OcrTensor *x1, const OcrTensor *x2, DmlLossParams p) {
    int64_t rows, C;
    check_pair(x1, x2, &rows, &C, "dml_loss");
    const int64_t B = x1->shape[0];
    OCR_ASSERT(p.use_log || x1->ndim == 3, "dml_loss: use_log false (KLJSLoss) needs (B, T, C) inputs");
    check_loss(loss, p.use_log ? 1 : B, "dml_loss");
    if (!loss) return;
    CpuScratch s = {0};
    const float *a = ocr_cpu_f32_in(&s, x1), *b = ocr_cpu_f32_in(&s, x2);
    double *row = ocr_cpu_scratch_bytes(&s, (size_t)(rows ? rows : 1) * sizeof(double));
#pragma omp parallel for schedule(static) if (rows * C > 16384)
    for (int64_t n = 0; n < rows; n++) {
        const float *ar = a + n * C, *br = b + n * C;
        const double l1 = row_lse(ar, C, 1.0, -1, -1), l2 = row_lse(br, C, 1.0, -1, -1);
        double acc = 0.0;
        for (int64_t j = 0; j < C; j++) {
            const double p1 = exp((double)ar[j] - l1), p2 = exp((double)br[j] - l2);
            acc += p.use_log ? dml_term(p1, p2) : kljs_term(p1, p2);
        }
        row[n] = acc;
    }
    float *out = loss->data;
    if (p.use_log) {
        double total = 0.0;
        for (int64_t n = 0; n < rows; n++) total += row[n];
        out[0] = B ? (float)(total / (2.0 * (double)B)) : 0.0f;
    } else {
        const int64_t per = B ? rows / B : 0;  // rows of one sample
        for (int64_t i = 0; i < B; i++) {
            double total = 0.0;
            for (int64_t n = i * per; n < (i + 1) * per; n++) total += row[n];
            out[i] = (float)(total / ((double)per * (double)C));
        }
    }
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_dml_loss_backward(OcrTensor *dx1, OcrTensor *dx2, const OcrTensor *x1, const OcrTensor *x2,
                               DmlLossParams p) {
    if (!dx1 && !dx2) return;
    int64_t rows, C;
    check_pair(x1, x2, &rows, &C, "dml_loss_backward");
    check_grad(dx1, x1, "dml_loss_backward");
    check_grad(dx2, x1, "dml_loss_backward");
    const int64_t B = x1->shape[0];
    OCR_ASSERT(p.use_log || x1->ndim == 3, "dml_loss_backward: use_log false (KLJSLoss) needs (B, T, C) inputs");
    CpuScratch s = {0};
    const float *a = ocr_cpu_f32_in(&s, x1), *b = ocr_cpu_f32_in(&s, x2);
    float *g1 = dx1 ? ocr_cpu_f32_out(&s, dx1, 0) : NULL, *g2 = dx2 ? ocr_cpu_f32_out(&s, dx2, 0) : NULL;
    // d loss / d q per element times this: 1/(2B) (use_log) or 1/(per-sample count) (KLJSLoss mean)
    const double scale =
        (double)p.grad_scale / (p.use_log ? 2.0 * (double)B : (double)(B ? rows / B : 1) * (double)C);
#pragma omp parallel for schedule(static) if (rows * C > 16384)
    for (int64_t n = 0; n < rows; n++) {
        const float *ar = a + n * C, *br = b + n * C;
        const double l1 = row_lse(ar, C, 1.0, -1, -1), l2 = row_lse(br, C, 1.0, -1, -1);
        // softmax backward: dx_i = p_i·(g_i − Σ_j g_j·p_j)
        double s1 = 0.0, s2 = 0.0;
        for (int64_t j = 0; j < C; j++) {
            const double p1 = exp((double)ar[j] - l1), p2 = exp((double)br[j] - l2);
            s1 += p1 * (p.use_log ? dml_dq1(p1, p2) : kljs_dq1(p1, p2));
            s2 += p2 * (p.use_log ? dml_dq1(p2, p1) : kljs_dq1(p2, p1));
        }
        for (int64_t j = 0; j < C; j++) {
            const double p1 = exp((double)ar[j] - l1), p2 = exp((double)br[j] - l2);
            if (g1) g1[n * C + j] = (float)(scale * p1 * ((p.use_log ? dml_dq1(p1, p2) : kljs_dq1(p1, p2)) - s1));
            if (g2) g2[n * C + j] = (float)(scale * p2 * ((p.use_log ? dml_dq1(p2, p1) : kljs_dq1(p2, p1)) - s2));
        }
    }
    if (g1) ocr_cpu_f32_store(dx1, g1);
    if (g2) ocr_cpu_f32_store(dx2, g2);
    ocr_cpu_scratch_free(&s);
}

// ---- KL divergence ---------------------------------------------------------------------------

// The divisor of the summed rows: B without a mask, the kept rows with one (0: nothing kept).
static double kl_denominator(const OcrTensor *student, const int32_t *t, int64_t rows, int pad_id) {
    return pad_id < 0 ? (double)student->shape[0] : (double)kept_rows(t, rows, pad_id);
}

void ocr_cpu_kl_div_loss_forward(OcrTensor *loss, const OcrTensor *student, const OcrTensor *teacher,
                                 const OcrTensor *targets, KlDivLossParams p) {
    int64_t rows, C;
    check_pair(student, teacher, &rows, &C, "kl_div_loss");
    check_loss(loss, 1, "kl_div_loss");
    const int32_t *t = check_targets(targets, rows, C, p.pad_id >= 0, 0, "kl_div_loss");
    if (!loss) return;
    CpuScratch s = {0};
    const float *xs = ocr_cpu_f32_in(&s, student), *xt = ocr_cpu_f32_in(&s, teacher);
    double *row = ocr_cpu_scratch_bytes(&s, (size_t)(rows ? rows : 1) * sizeof(double));
    const double inv_t = 1.0 / (double)p.temperature;
#pragma omp parallel for schedule(static) if (rows * C > 16384)
    for (int64_t n = 0; n < rows; n++) {
        row[n] = 0.0;
        if (!row_kept(t, n, p.pad_id)) continue;
        const float *sr = xs + n * C, *tr = xt + n * C;
        const double ls = row_lse(sr, C, inv_t, -1, -1), lt = row_lse(tr, C, inv_t, -1, -1);
        double acc = 0.0;
        for (int64_t j = 0; j < C; j++) acc += kl_term(exp((double)tr[j] * inv_t - lt), (double)sr[j] * inv_t - ls);
        row[n] = acc;
    }
    double total = 0.0;
    for (int64_t n = 0; n < rows; n++) total += row[n];
    const double den = kl_denominator(student, t, rows, p.pad_id);
    const double T = p.temperature;
    ((float *)loss->data)[0] = den > 0 ? (float)(T * T * total / den) : 0.0f;
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_kl_div_loss_backward(OcrTensor *dstudent, const OcrTensor *student, const OcrTensor *teacher,
                                  const OcrTensor *targets, KlDivLossParams p) {
    if (!dstudent) return;
    int64_t rows, C;
    check_pair(student, teacher, &rows, &C, "kl_div_loss_backward");
    check_grad(dstudent, student, "kl_div_loss_backward");
    const int32_t *t = check_targets(targets, rows, C, p.pad_id >= 0, 0, "kl_div_loss_backward");
    CpuScratch s = {0};
    const float *xs = ocr_cpu_f32_in(&s, student), *xt = ocr_cpu_f32_in(&s, teacher);
    float *g = ocr_cpu_f32_out(&s, dstudent, 0);
    const double inv_t = 1.0 / (double)p.temperature, den = kl_denominator(student, t, rows, p.pad_id);
    // d(T²·Σ/den)/dx = T²/den · (1/T) · (ps·Σpt − pt)
    const double scale = den > 0 ? (double)p.grad_scale * (double)p.temperature / den : 0.0;
#pragma omp parallel for schedule(static) if (rows * C > 16384)
    for (int64_t n = 0; n < rows; n++) {
        float *gr = g + n * C;
        if (!row_kept(t, n, p.pad_id) || scale == 0.0) {
            for (int64_t j = 0; j < C; j++) gr[j] = 0.0f;
            continue;
        }
        const float *sr = xs + n * C, *tr = xt + n * C;
        const double ls = row_lse(sr, C, inv_t, -1, -1), lt = row_lse(tr, C, inv_t, -1, -1);
        double st = 0.0;
        for (int64_t j = 0; j < C; j++) st += exp((double)tr[j] * inv_t - lt);
        for (int64_t j = 0; j < C; j++)
            gr[j] = (float)(scale * (exp((double)sr[j] * inv_t - ls) * st - exp((double)tr[j] * inv_t - lt)));
    }
    ocr_cpu_f32_store(dstudent, g);
    ocr_cpu_scratch_free(&s);
}

// ---- CTC-logit KL (time-averaged, blank negated) ---------------------------------------------------

static void check_ctc(const OcrTensor *s, const OcrTensor *t, int64_t *B, int64_t *L, int64_t *C, CtcLogitsKlParams p,
                      const char *op) {
    int64_t rows;
    check_pair(s, t, &rows, C, op);
    OCR_ASSERT(s->ndim == 3, "%s: logits must be (B, L, C)", op);
    *B = s->shape[0];
    *L = s->shape[1];
    OCR_ASSERT(p.blank < *C, "%s: blank %d is not a class of %lld", op, p.blank, (long long)*C);
}

// S (or P) of sample b: mean over the L steps of softmax(x'/T), into m (C).
static void ctc_time_mean(double *m, const float *x, int64_t L, int64_t C, double inv_t, int64_t blank) {
    for (int64_t c = 0; c < C; c++) m[c] = 0.0;
    for (int64_t l = 0; l < L; l++) {
        const float *r = x + l * C;
        const double lse = row_lse(r, C, inv_t, blank, -1);
        for (int64_t c = 0; c < C; c++) m[c] += exp(zval(r, c, inv_t, blank, -1) - lse);
    }
    for (int64_t c = 0; c < C; c++) m[c] /= (double)L;
}

void ocr_cpu_ctc_logits_kl_forward(OcrTensor *loss, const OcrTensor *student, const OcrTensor *teacher,
                                   CtcLogitsKlParams p) {
    int64_t B, L, C;
    check_ctc(student, teacher, &B, &L, &C, p, "ctc_logits_kl");
    check_loss(loss, 1, "ctc_logits_kl");
    if (!loss) return;
    CpuScratch s = {0};
    const float *xs = ocr_cpu_f32_in(&s, student), *xt = ocr_cpu_f32_in(&s, teacher);
    double *SP = ocr_cpu_scratch_bytes(&s, (size_t)(B ? 2 * B * C + B : 1) * sizeof(double));
    double *per = SP + 2 * B * C;
    const double inv_t = 1.0 / (double)p.temperature;
#pragma omp parallel for schedule(static) if (B * L * C > 16384)
    for (int64_t b = 0; b < B; b++) {
        double *S = SP + 2 * b * C, *P = S + C;
        ctc_time_mean(S, xs + b * L * C, L, C, inv_t, p.blank);
        ctc_time_mean(P, xt + b * L * C, L, C, inv_t, p.blank);
        double acc = 0.0;
        for (int64_t c = 0; c < C; c++) acc += ctc_kl_term(P[c], S[c]);
        per[b] = acc;
    }
    double total = 0.0;
    for (int64_t b = 0; b < B; b++) total += per[b];
    ((float *)loss->data)[0] = B ? (float)(total / (double)B) : 0.0f;
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_ctc_logits_kl_backward(OcrTensor *dstudent, const OcrTensor *student, const OcrTensor *teacher,
                                    CtcLogitsKlParams p) {
    if (!dstudent) return;
    int64_t B, L, C;
    check_ctc(student, teacher, &B, &L, &C, p, "ctc_logits_kl_backward");
    check_grad(dstudent, student, "ctc_logits_kl_backward");
    CpuScratch s = {0};
    const float *xs = ocr_cpu_f32_in(&s, student), *xt = ocr_cpu_f32_in(&s, teacher);
    float *g = ocr_cpu_f32_out(&s, dstudent, 0);
    double *SP = ocr_cpu_scratch_bytes(&s, (size_t)(B ? 2 * B * C : 1) * sizeof(double));
    const double inv_t = 1.0 / (double)p.temperature;
    // h = ∂loss/∂softmax at each step: ∂/∂S / (B·L), the same for every step of a sample
    const double hs = B && L ? (double)p.grad_scale / ((double)B * (double)L) : 0.0;
#pragma omp parallel for schedule(static) if (B * L * C > 16384)
    for (int64_t b = 0; b < B; b++) {
        double *S = SP + 2 * b * C, *P = S + C;
        ctc_time_mean(S, xs + b * L * C, L, C, inv_t, p.blank);
        ctc_time_mean(P, xt + b * L * C, L, C, inv_t, p.blank);
        for (int64_t c = 0; c < C; c++) S[c] = hs * ctc_kl_dS(P[c], S[c]);  // S now holds h
    }
#pragma omp parallel for schedule(static) if (B * L * C > 16384)
    for (int64_t n = 0; n < B * L; n++) {
        const double *h = SP + 2 * (n / L) * C;
        const float *r = xs + n * C;
        float *gr = g + n * C;
        const double lse = row_lse(r, C, inv_t, p.blank, -1);
        double sh = 0.0;
        for (int64_t c = 0; c < C; c++) sh += h[c] * exp(zval(r, c, inv_t, p.blank, -1) - lse);
        for (int64_t c = 0; c < C; c++) {
            // through the softmax, the 1/T of z = x'/T and the sign of the negated blank column
            const double dz = exp(zval(r, c, inv_t, p.blank, -1) - lse) * (h[c] - sh) * inv_t;
            gr[c] = (float)(c == p.blank ? -dz : dz);
        }
    }
    ocr_cpu_f32_store(dstudent, g);
    ocr_cpu_scratch_free(&s);
}

// ---- DKD -------------------------------------------------------------------------------------

// One row's TCKD and NCKD (forward) or its gradient (backward, into gr when not NULL, times
// `scale`). sr, tr: the row's logits; gt its target.
static void dkd_row(double *tckd, double *nckd, float *gr, double scale, const float *sr, const float *tr, int64_t C,
                    int64_t gt, double inv_t, double alpha, double beta) {
    const double ls = row_lse(sr, C, inv_t, -1, -1), lt = row_lse(tr, C, inv_t, -1, -1);
    const double ls2 = row_lse(sr, C, inv_t, -1, gt), lt2 = row_lse(tr, C, inv_t, -1, gt);
    double so = 0.0, to = 0.0;  // the non-target mass, summed (1 − p_g would lose it when p_g ≈ 1)
    for (int64_t j = 0; j < C; j++)
        if (j != gt) {
            so += exp((double)sr[j] * inv_t - ls);
            to += exp((double)tr[j] * inv_t - lt);
        }
    const double sg = exp((double)sr[gt] * inv_t - ls), tg = exp((double)tr[gt] * inv_t - lt);
    if (!gr) {
        *tckd = kl_term(tg, log(sg)) + kl_term(to, log(so));
        double acc = 0.0;
        for (int64_t j = 0; j < C; j++)
            acc += kl_term(exp(zval(tr, j, inv_t, -1, gt) - lt2), zval(sr, j, inv_t, -1, gt) - ls2);
        *nckd = acc;
        return;
    }
    // TCKD: w_g = −tg/sg on the target, w_o = −to/so elsewhere; ∂/∂z_i = p_i·(w_i − Σ w·p).
    const double wg = -tg / sg, wo = -to / so, sw = wg * sg + wo * so;
    double st2 = 0.0;
    for (int64_t j = 0; j < C; j++) st2 += exp(zval(tr, j, inv_t, -1, gt) - lt2);
    for (int64_t j = 0; j < C; j++) {
        const double ps = exp((double)sr[j] * inv_t - ls);
        const double dt = ps * ((j == gt ? wg : wo) - sw);
        // NCKD: softmax(z2_s)·Σpt2 − pt2 (z2 = z − shift·onehot, ∂z2/∂z = 1)
        const double dn = exp(zval(sr, j, inv_t, -1, gt) - ls2) * st2 - exp(zval(tr, j, inv_t, -1, gt) - lt2);
        gr[j] = (float)(scale * (alpha * dt + beta * dn));
    }
}

void ocr_cpu_dkd_loss_forward(OcrTensor *loss, const OcrTensor *student, const OcrTensor *teacher,
                              const OcrTensor *targets, DkdLossParams p) {
    int64_t rows, C;
    check_pair(student, teacher, &rows, &C, "dkd_loss");
    check_loss(loss, 1, "dkd_loss");
    const int32_t *t = check_targets(targets, rows, C, 1, 1, "dkd_loss");
    if (!loss) return;
    CpuScratch s = {0};
    const float *xs = ocr_cpu_f32_in(&s, student), *xt = ocr_cpu_f32_in(&s, teacher);
    double *row = ocr_cpu_scratch_bytes(&s, (size_t)(rows ? 2 * rows : 1) * sizeof(double));
    const double inv_t = 1.0 / (double)p.temperature;
#pragma omp parallel for schedule(static) if (rows * C > 4096)
    for (int64_t n = 0; n < rows; n++) {
        row[2 * n] = row[2 * n + 1] = 0.0;
        if (!row_kept(t, n, p.pad_id)) continue;
        dkd_row(&row[2 * n], &row[2 * n + 1], NULL, 0.0, xs + n * C, xt + n * C, C, t[n], inv_t, p.alpha, p.beta);
    }
    double tc = 0.0, nc = 0.0;
    for (int64_t n = 0; n < rows; n++) {
        tc += row[2 * n];
        nc += row[2 * n + 1];
    }
    const double den = (double)kept_rows(t, rows, p.pad_id), T = p.temperature;
    ((float *)loss->data)[0] = den > 0 ? (float)(T * T * ((double)p.alpha * tc + (double)p.beta * nc) / den) : 0.0f;
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_dkd_loss_backward(OcrTensor *dstudent, const OcrTensor *student, const OcrTensor *teacher,
                               const OcrTensor *targets, DkdLossParams p) {
    if (!dstudent) return;
    int64_t rows, C;
    check_pair(student, teacher, &rows, &C, "dkd_loss_backward");
    check_grad(dstudent, student, "dkd_loss_backward");
    const int32_t *t = check_targets(targets, rows, C, 1, 1, "dkd_loss_backward");
    CpuScratch s = {0};
    const float *xs = ocr_cpu_f32_in(&s, student), *xt = ocr_cpu_f32_in(&s, teacher);
    float *g = ocr_cpu_f32_out(&s, dstudent, 0);
    const double inv_t = 1.0 / (double)p.temperature, den = (double)kept_rows(t, rows, p.pad_id);
    // T²/den, and 1/T for z = x/T
    const double scale = den > 0 ? (double)p.grad_scale * (double)p.temperature / den : 0.0;
#pragma omp parallel for schedule(static) if (rows * C > 4096)
    for (int64_t n = 0; n < rows; n++) {
        float *gr = g + n * C;
        if (!row_kept(t, n, p.pad_id) || scale == 0.0) {
            for (int64_t j = 0; j < C; j++) gr[j] = 0.0f;
            continue;
        }
        dkd_row(NULL, NULL, gr, scale, xs + n * C, xt + n * C, C, t[n], inv_t, p.alpha, p.beta);
    }
    ocr_cpu_f32_store(dstudent, g);
    ocr_cpu_scratch_free(&s);
}

// ---- feature distance --------------------------------------------------------------------------

#define DISTANCE_CHUNK 4096  // fixed chunks, added in order: the same sum at any thread count

static void check_distance(const OcrTensor *x, const OcrTensor *y, const char *op) {
    CPU_ASSERT_FLOAT(x);
    CPU_ASSERT_FLOAT(y);
    OCR_ASSERT(ocr_tensor_same_shape(x, y), "%s: x and y shapes differ", op);
}

void ocr_cpu_distance_loss_forward(OcrTensor *loss, const OcrTensor *x, const OcrTensor *y, DistanceLossParams p) {
    check_distance(x, y, "distance_loss");
    check_loss(loss, 1, "distance_loss");
    if (!loss) return;
    const int64_t n = ocr_tensor_numel(x), chunks = (n + DISTANCE_CHUNK - 1) / DISTANCE_CHUNK;
    CpuScratch s = {0};
    const float *a = ocr_cpu_f32_in(&s, x), *b = ocr_cpu_f32_in(&s, y);
    double *part = ocr_cpu_scratch_bytes(&s, (size_t)(chunks ? chunks : 1) * sizeof(double));
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t k = 0; k < chunks; k++) {
        double acc = 0.0;
        const int64_t end = (k + 1) * DISTANCE_CHUNK < n ? (k + 1) * DISTANCE_CHUNK : n;
        for (int64_t i = k * DISTANCE_CHUNK; i < end; i++)
            acc += distance_term((int)p.mode, (double)a[i] - (double)b[i], (double)p.delta);
        part[k] = acc;
    }
    double total = 0.0;
    for (int64_t k = 0; k < chunks; k++) total += part[k];
    ((float *)loss->data)[0] = n ? (float)(total / (double)n) : 0.0f;
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_distance_loss_backward(OcrTensor *dx, OcrTensor *dy, const OcrTensor *x, const OcrTensor *y,
                                    DistanceLossParams p) {
    if (!dx && !dy) return;
    check_distance(x, y, "distance_loss_backward");
    check_grad(dx, x, "distance_loss_backward");
    check_grad(dy, x, "distance_loss_backward");
    const int64_t n = ocr_tensor_numel(x);
    CpuScratch s = {0};
    const float *a = ocr_cpu_f32_in(&s, x), *b = ocr_cpu_f32_in(&s, y);
    float *ga = dx ? ocr_cpu_f32_out(&s, dx, 0) : NULL, *gb = dy ? ocr_cpu_f32_out(&s, dy, 0) : NULL;
    const double scale = n ? (double)p.grad_scale / (double)n : 0.0;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++) {
        const double v = scale * distance_grad((int)p.mode, (double)a[i] - (double)b[i], (double)p.delta);
        if (ga) ga[i] = (float)v;
        if (gb) gb[i] = (float)-v;
    }
    if (ga) ocr_cpu_f32_store(dx, ga);
    if (gb) ocr_cpu_f32_store(dy, gb);
    ocr_cpu_scratch_free(&s);
}

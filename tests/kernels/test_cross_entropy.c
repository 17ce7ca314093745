// cross_entropy_forward / _backward (NRTRLoss: smoothing 0.1, padding 0 ignored; SARLoss: no
// smoothing, the PAD id ignored): per-row losses and the mean against a double reference,
// the gradient against central finite differences of the reference's mean loss (times
// grad_scale), in every logits dtype; ignored rows give 0 and 0 gradient; all rows ignored
// gives a mean of 0 and a zero gradient; rows thousands of classes wide at every vector level.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "tests/common/test_util.h"

#define N 8
#define C 11

static const int32_t kTargets[N] = {3, 0, 10, 0, 7, 1, 0, 5};  // 0 doubles as the ignored id

static const ocr_dtype_t kDts[3] = {OCR_F32, OCR_F16, OCR_BF16};

typedef struct {
    double smoothing;
    int ignore;
} RefCtx;

static int ignored(int32_t t, const RefCtx *c) { return c->ignore >= 0 && t == c->ignore; }

// Row losses (double) and the mean over rows not ignored.
static double ref_loss_rows(double *rows, const double *x, const RefCtx *c) {
    double total = 0;
    int cnt = 0;
    for (int n = 0; n < N; n++) {
        rows[n] = 0;
        if (ignored(kTargets[n], c)) continue;
        const double *xr = x + n * C;
        double mx = -INFINITY, s = 0;
        for (int j = 0; j < C; j++) mx = fmax(mx, xr[j]);
        for (int j = 0; j < C; j++) s += exp(xr[j] - mx);
        double lse = mx + log(s), L = 0;
        for (int j = 0; j < C; j++) {
            double q = j == kTargets[n] ? 1 - c->smoothing : c->smoothing / (C - 1);
            L -= q * (xr[j] - lse);
        }
        rows[n] = L;
        total += L;
        cnt++;
    }
    return cnt ? total / cnt : 0;
}

static double ref_mean(const double *x, void *vctx) {
    double rows[N];
    return ref_loss_rows(rows, x, vctx);
}

static void run_case(ocr_dtype_t dt, double smoothing, int ignore, float grad_scale) {
    char what[96];
    snprintf(what, sizeof what, "%s smoothing %g ignore %d scale %g", ocr_dtype_name(dt), smoothing, ignore,
             (double)grad_scale);
    float xs[N * C];
    ocr_test_fill_uniform(xs, N * C, 101 + (uint64_t)(smoothing * 10) + (uint64_t)ignore + 3 * dt, -5.0f, 5.0f);
    OcrTensor x = ocr_test_tensor(dt, 3, OCR_SHAPE(2, 4, C), xs);
    OcrTensor t = ocr_test_tensor(OCR_I32, 2, OCR_SHAPE(2, 4), NULL);
    for (int n = 0; n < N; n++) ((int32_t *)t.data)[n] = kTargets[n];
    OcrTensor losses = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(N), NULL);
    OcrTensor loss = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), NULL);
    OcrTensor cnt = ocr_test_tensor(OCR_I32, 1, OCR_SHAPE(1), NULL);
    CrossEntropyParams p = {(float)smoothing, ignore, grad_scale};
    ocr_cross_entropy_forward(&losses, &loss, &cnt, &x, &t, p);
    double xd[N * C], rows[N];
    for (int i = 0; i < N * C; i++) xd[i] = ocr_tensor_get_f32(&x, i);  // the rounded inputs
    RefCtx rc = {(float)smoothing, ignore};
    double mean = ref_loss_rows(rows, xd, &rc);
    int want_cnt = 0;
    for (int n = 0; n < N; n++) want_cnt += !ignored(kTargets[n], &rc);
    ck_assert_int_eq(((int32_t *)cnt.data)[0], want_cnt);
    // fp32 loads, double arithmetic, one rounding to f32 per stored value.
    double tol = 4 * ocr_test_dtype_eps(OCR_F32);
    ck_assert_msg(ocr_test_allclose_f64(losses.data, rows, N, 1e-7, tol, what), "%s: row losses", what);
    ck_assert_msg(fabs(((float *)loss.data)[0] - mean) <= 1e-7 + tol * fabs(mean), "%s: mean %g, want %g", what,
                  ((float *)loss.data)[0], mean);

    OcrTensor dx = ocr_test_tensor(dt, 3, OCR_SHAPE(2, 4, C), NULL);
    ocr_cross_entropy_backward(&dx, &x, &t, p);
    double num[N * C];
    ocr_test_numeric_grad(num, xd, N * C, ref_mean, &rc, 1e-6);
    for (int i = 0; i < N * C; i++) num[i] *= grad_scale;
    float got[N * C];
    ocr_tensor_to_f32(&dx, got);
    // Each element is computed in double and rounded once into dx's dtype; the finite
    // difference of a smooth loss at h = 1e-6 is good to ~1e-9 relative.
    // f16 stores values below 2^-14 as subnormals, spaced 2^-24: half a spacing absolute.
    double eps = ocr_test_dtype_eps(dt), sub = dt == OCR_F16 ? ldexp(1.0, -25) : 0.0;
    ck_assert_msg(ocr_test_allclose_f64(got, num, N * C, 1e-8 * grad_scale + sub, 2 * eps + 1e-7, what),
                  "%s: gradient", what);
    for (int n = 0; n < N; n++)
        if (ignored(kTargets[n], &rc))
            for (int j = 0; j < C; j++) ck_assert_msg(got[n * C + j] == 0.0f, "%s: ignored row %d", what, n);
    ocr_tensor_free(&x);
    ocr_tensor_free(&t);
    ocr_tensor_free(&losses);
    ocr_tensor_free(&loss);
    ocr_tensor_free(&cnt);
    ocr_tensor_free(&dx);
}

START_TEST(test_cross_entropy_cases) {
    for (int k = 0; k < 3; k++) {
        run_case(kDts[k], 0.1, 0, 1.0f);   // NRTRLoss
        run_case(kDts[k], 0.0, 10, 1.0f);  // SARLoss (PAD = the last class)
        run_case(kDts[k], 0.0, -1, 1.0f);  // plain mean cross-entropy
        run_case(kDts[k], 0.1, -1, 1024.0f);
    }
}
END_TEST

// With every row ignored the mean is 0 (not NaN) and so is the gradient.
START_TEST(test_cross_entropy_all_ignored) {
    OcrTensor x = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(3, C), NULL);
    float xs[3 * C];
    ocr_test_fill_uniform(xs, 3 * C, 7, -1, 1);
    ocr_tensor_from_f32(&x, xs);
    OcrTensor t = ocr_test_tensor(OCR_I32, 1, OCR_SHAPE(3), NULL);
    for (int n = 0; n < 3; n++) ((int32_t *)t.data)[n] = 4;
    OcrTensor loss = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), NULL);
    OcrTensor cnt = ocr_test_tensor(OCR_I32, 1, OCR_SHAPE(1), NULL);
    CrossEntropyParams p = {0.1f, 4, 1.0f};
    ocr_cross_entropy_forward(NULL, &loss, &cnt, &x, &t, p);
    ck_assert(((float *)loss.data)[0] == 0.0f);
    ck_assert_int_eq(((int32_t *)cnt.data)[0], 0);
    OcrTensor dx = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(3, C), NULL);
    ocr_cross_entropy_backward(&dx, &x, &t, p);
    for (int i = 0; i < 3 * C; i++) ck_assert(((float *)dx.data)[i] == 0.0f);
    ocr_tensor_free(&x);
    ocr_tensor_free(&t);
    ocr_tensor_free(&loss);
    ocr_tensor_free(&cnt);
    ocr_tensor_free(&dx);
}
END_TEST

int ocr_cpu_vec_select(const char *name);  // kernels/cpu/cpu_common.h (test hook)

// Rows as wide as the NRTR heads' (6,910 classes for PP-OCRv6 tiny) and ragged ones (37: two full
// lane groups of 16 and a tail), with smoothing: the row losses against the double reference
// (log-sum-exp, Σ q·lp) and the gradient against g·(softmax − q) in double, at every vector level,
// each level's bits equal to the others'.
START_TEST(test_cross_entropy_wide_every_level) {
    static const char *const levels[3] = {"sse2", "avx2", "avx512"};
    static const int64_t widths[2] = {6910, 37};
    for (int w = 0; w < 2; w++) {
        const int64_t R = 5, W = widths[w];
        float *xs = malloc(sizeof(float) * (size_t)(R * W));
        ocr_test_fill_uniform(xs, R * W, 900 + (uint64_t)w, -8.0f, 6.0f);
        OcrTensor x = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(R, W), xs);
        OcrTensor t = ocr_test_tensor(OCR_I32, 1, OCR_SHAPE(R), NULL);
        const int32_t tv[5] = {3, 0, (int32_t)(W - 1), 17, 0};  // 0 ignored
        for (int n = 0; n < R; n++) ((int32_t *)t.data)[n] = tv[n];
        const CrossEntropyParams p = {0.1f, 0, 2.0f};
        float *first_rows = NULL, *first_dx = NULL;
        for (int lv = 0; lv < 3; lv++) {
            if (!ocr_cpu_vec_select(levels[lv])) {
                printf("cross_entropy: this CPU has no %s; that level not checked\n", levels[lv]);
                continue;
            }
            OcrTensor rows = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(R), NULL);
            OcrTensor dx = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(R, W), NULL);
            ocr_test_poison(&dx);
            ocr_cross_entropy_forward(&rows, NULL, NULL, &x, &t, p);
            ocr_cross_entropy_backward(&dx, &x, &t, p);
            const float *rv = rows.data, *dv = dx.data;
            int counted = 0;
            for (int n = 0; n < R; n++) counted += tv[n] != 0;
            for (int n = 0; n < R; n++) {
                const float *xr = xs + n * W;
                double mx = -INFINITY, se = 0.0;
                for (int64_t j = 0; j < W; j++) mx = fmax(mx, xr[j]);
                for (int64_t j = 0; j < W; j++) se += exp(xr[j] - mx);
                const double lse = mx + log(se), on = 1.0 - 0.1, off = 0.1 / (double)(W - 1);
                double L = 0.0;
                for (int64_t j = 0; j < W; j++) L -= (j == tv[n] ? on : off) * (xr[j] - lse);
                if (tv[n] == 0) L = 0.0;
                ck_assert_msg(fabs(rv[n] - L) <= 1e-5 * fabs(L) + 1e-6, "%s W %lld row %d loss %.9g, expected %.9g",
                              levels[lv], (long long)W, n, (double)rv[n], L);
                for (int64_t j = 0; j < W; j++) {
                    const double g = tv[n] == 0 ? 0.0 : 2.0 / counted * (exp(xr[j] - lse) - (j == tv[n] ? on : off));
                    ck_assert_msg(fabs(dv[n * W + j] - g) <= 1e-6 * fabs(g) + 1e-9,
                                  "%s W %lld dlogits[%d, %lld] = %.9g, expected %.9g", levels[lv], (long long)W, n,
                                  (long long)j, (double)dv[n * W + j], g);
                }
            }
            if (!first_rows) {
                first_rows = malloc(sizeof(float) * (size_t)R), first_dx = malloc(sizeof(float) * (size_t)(R * W));
                memcpy(first_rows, rv, sizeof(float) * (size_t)R), memcpy(first_dx, dv, sizeof(float) * (size_t)(R * W));
            } else {
                ck_assert_msg(memcmp(first_rows, rv, sizeof(float) * (size_t)R) == 0, "%s: row losses differ in bits",
                              levels[lv]);
                ck_assert_msg(memcmp(first_dx, dv, sizeof(float) * (size_t)(R * W)) == 0, "%s: dlogits differ in bits",
                              levels[lv]);
            }
            ocr_tensor_free(&rows), ocr_tensor_free(&dx);
        }
        ocr_cpu_vec_select(NULL);
        free(first_rows), free(first_dx), free(xs);
        ocr_tensor_free(&x), ocr_tensor_free(&t);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("kernels_cross_entropy");
    TCase *tc = tcase_create("cross_entropy");
    tcase_add_test(tc, test_cross_entropy_cases);
    tcase_add_test(tc, test_cross_entropy_all_ignored);
    tcase_add_test(tc, test_cross_entropy_wide_every_level);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

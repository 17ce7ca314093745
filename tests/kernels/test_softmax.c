// softmax / log_softmax over the last axis: forward against a double reference, backward
// against central finite differences of the reference's loss Σ dout·y, in every dtype.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/ops.h"
#include "tests/common/test_util.h"

#define ROWS 6
#define COLS 7
#define N (ROWS * COLS)

static const ocr_dtype_t kPairs[][2] = {
    {OCR_F32, OCR_F32}, {OCR_F16, OCR_F16}, {OCR_BF16, OCR_BF16}, {OCR_F32, OCR_BF16}, {OCR_F16, OCR_F32},
};
#define NPAIRS ((int)(sizeof kPairs / sizeof kPairs[0]))

static double dmax(double a, double b) { return a > b ? a : b; }

// y = softmax(x) or log_softmax(x) per row, in double.
static void ref_forward(double *y, const double *x, int rows, int cols, int log_form) {
    for (int r = 0; r < rows; r++) {
        const double *xr = x + r * cols;
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < cols; j++) mx = dmax(mx, xr[j]);
        for (int j = 0; j < cols; j++) sum += exp(xr[j] - mx);
        for (int j = 0; j < cols; j++)
            y[r * cols + j] = log_form ? xr[j] - mx - log(sum) : exp(xr[j] - mx) / sum;
    }
}

typedef struct {
    const double *dout;
    int log_form;
} LossCtx;

static double ref_loss(const double *x, void *vctx) {
    LossCtx *c = vctx;
    double y[N], L = 0;
    ref_forward(y, x, ROWS, COLS, c->log_form);
    for (int i = 0; i < N; i++) L += c->dout[i] * y[i];
    return L;
}

static void tensor_to_double(double *dst, const OcrTensor *t) {
    for (int64_t i = 0; i < ocr_tensor_numel(t); i++) dst[i] = ocr_tensor_get_f32(t, i);
}

static void check_forward(int log_form) {
    for (int k = 0; k < NPAIRS; k++) {
        ocr_dtype_t din = kPairs[k][0], dout = kPairs[k][1];
        float xs[N];
        ocr_test_fill_uniform(xs, N, 11 + k, -4.0f, 4.0f);
        OcrTensor x = ocr_test_tensor(din, 3, OCR_SHAPE(2, 3, COLS), xs);
        OcrTensor y = ocr_test_tensor(dout, 3, OCR_SHAPE(2, 3, COLS), NULL);
        double xd[N], yref[N];
        tensor_to_double(xd, &x);  // the reference sees the rounded inputs
        ref_forward(yref, xd, ROWS, COLS, log_form);
        if (log_form)
            ocr_log_softmax_forward(&y, &x);
        else
            ocr_softmax_forward(&y, &x);
        float got[N];
        ocr_tensor_to_f32(&y, got);
        double eps = ocr_test_dtype_eps(dout);
        // log-softmax values reach |8|: their absolute rounding error scales with that.
        double atol = log_form ? 16 * eps + 1e-6 : 2 * eps + 1e-7;
        char what[64];
        snprintf(what, sizeof what, "%s %s->%s", log_form ? "log_softmax" : "softmax", ocr_dtype_name(din),
                 ocr_dtype_name(dout));
        ck_assert_msg(ocr_test_allclose_f64(got, yref, N, atol, 2 * eps + 1e-6, what), "%s forward", what);
        if (!log_form) {
            for (int r = 0; r < ROWS; r++) {
                double s = 0;
                for (int j = 0; j < COLS; j++) s += got[r * COLS + j];
                ck_assert_msg(fabs(s - 1) < COLS * 2 * eps + 1e-6, "%s row %d sums to %g", what, r, s);
            }
        }
        ocr_tensor_free(&x);
        ocr_tensor_free(&y);
    }
}

static void check_backward(int log_form) {
    for (int k = 0; k < NPAIRS; k++) {
        ocr_dtype_t dt = kPairs[k][0], dto = kPairs[k][1];
        float xs[N], gs[N];
        ocr_test_fill_uniform(xs, N, 21 + k, -3.0f, 3.0f);
        ocr_test_fill_uniform(gs, N, 31 + k, -1.0f, 1.0f);
        OcrTensor x = ocr_test_tensor(dt, 2, OCR_SHAPE(ROWS, COLS), xs);
        OcrTensor y = ocr_test_tensor(dto, 2, OCR_SHAPE(ROWS, COLS), NULL);
        OcrTensor dy = ocr_test_tensor(dto, 2, OCR_SHAPE(ROWS, COLS), gs);
        OcrTensor dx = ocr_test_tensor(dt, 2, OCR_SHAPE(ROWS, COLS), NULL);
        if (log_form) {
            ocr_log_softmax_forward(&y, &x);
            ocr_log_softmax_backward(&dx, &dy, &y);
        } else {
            ocr_softmax_forward(&y, &x);
            ocr_softmax_backward(&dx, &dy, &y);
        }
        double xd[N], dyd[N], num[N];
        tensor_to_double(xd, &x);
        tensor_to_double(dyd, &dy);
        LossCtx ctx = {dyd, log_form};
        ocr_test_numeric_grad(num, xd, N, ref_loss, &ctx, 1e-6);
        float got[N];
        ocr_tensor_to_f32(&dx, got);
        double eps = fmax(ocr_test_dtype_eps(dt), ocr_test_dtype_eps(dto));
        double err = ocr_test_rel_error(got, num, N);
        // log-softmax's backward reads exp(out) with out rounded at |out| up to ~7: more slack.
        double tol = (log_form ? 24 : 8) * eps + 1e-6;
        ck_assert_msg(err < tol, "%s backward %s/%s: rel error %g > %g", log_form ? "log_softmax" : "softmax",
                      ocr_dtype_name(dt), ocr_dtype_name(dto), err, tol);
        for (int i = 0; i < N; i++) ck_assert_msg(isfinite(got[i]), "dinp[%d] not written", i);
        ocr_tensor_free(&x);
        ocr_tensor_free(&y);
        ocr_tensor_free(&dy);
        ocr_tensor_free(&dx);
    }
}

START_TEST(test_softmax_forward) { check_forward(0); }
END_TEST

START_TEST(test_log_softmax_forward) { check_forward(1); }
END_TEST

START_TEST(test_softmax_backward) { check_backward(0); }
END_TEST

START_TEST(test_log_softmax_backward) { check_backward(1); }
END_TEST

// out aliasing inp gives the same result as separate buffers (f32 and f16 storage).
START_TEST(test_in_place) {
    ocr_dtype_t dts[2] = {OCR_F32, OCR_F16};
    for (int k = 0; k < 2; k++) {
        for (int log_form = 0; log_form < 2; log_form++) {
            float xs[N];
            ocr_test_fill_uniform(xs, N, 41, -5.0f, 5.0f);
            OcrTensor a = ocr_test_tensor(dts[k], 2, OCR_SHAPE(ROWS, COLS), xs);
            OcrTensor b = ocr_test_tensor(dts[k], 2, OCR_SHAPE(ROWS, COLS), xs);
            OcrTensor y = ocr_test_tensor(dts[k], 2, OCR_SHAPE(ROWS, COLS), NULL);
            if (log_form) {
                ocr_log_softmax_forward(&y, &a);
                ocr_log_softmax_forward(&b, &b);
            } else {
                ocr_softmax_forward(&y, &a);
                ocr_softmax_forward(&b, &b);
            }
            for (int i = 0; i < N; i++)
                ck_assert_msg(ocr_tensor_get_f32(&y, i) == ocr_tensor_get_f32(&b, i), "in-place %s differs at %d",
                              ocr_dtype_name(dts[k]), i);
            ocr_tensor_free(&a);
            ocr_tensor_free(&b);
            ocr_tensor_free(&y);
        }
    }
}
END_TEST

// Logits of magnitude 1000 must not overflow exp: the row maximum is subtracted first.
START_TEST(test_large_logits) {
    float xs[COLS] = {1000.0f, 999.0f, -1000.0f, 998.0f, 0.0f, 1000.0f, 500.0f};
    OcrTensor x = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(1, COLS), xs);
    OcrTensor y = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(1, COLS), NULL);
    OcrTensor ly = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(1, COLS), NULL);
    double xd[COLS], ref[COLS], lref[COLS];
    for (int j = 0; j < COLS; j++) xd[j] = xs[j];
    ref_forward(ref, xd, 1, COLS, 0);
    ref_forward(lref, xd, 1, COLS, 1);
    ocr_softmax_forward(&y, &x);
    ocr_log_softmax_forward(&ly, &x);
    ck_assert(ocr_test_allclose_f64(y.data, ref, COLS, 1e-7, 1e-6, "softmax large"));
    ck_assert(ocr_test_allclose_f64(ly.data, lref, COLS, 1e-4, 1e-6, "log_softmax large"));
    ocr_tensor_free(&x);
    ocr_tensor_free(&y);
    ocr_tensor_free(&ly);
}
END_TEST

// A fully masked row (all −inf) gives zeros / −inf, not NaN; a single column gives 1 / 0.
START_TEST(test_degenerate_rows) {
    float xs[2 * 3] = {-INFINITY, -INFINITY, -INFINITY, 1.0f, -INFINITY, 2.0f};
    OcrTensor x = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(2, 3), xs);
    OcrTensor y = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(2, 3), NULL);
    ocr_softmax_forward(&y, &x);
    const float *yd = y.data;
    for (int j = 0; j < 3; j++) ck_assert_msg(yd[j] == 0.0f, "masked row softmax[%d] = %g", j, yd[j]);
    ck_assert(yd[4] == 0.0f);
    ck_assert(fabs(yd[3] - 1 / (1 + exp(1.0))) < 1e-6);
    ocr_log_softmax_forward(&y, &x);
    for (int j = 0; j < 3; j++) ck_assert_msg(isinf(yd[j]) && yd[j] < 0, "masked row log_softmax[%d] = %g", j, yd[j]);
    ck_assert(isinf(yd[4]) && yd[4] < 0);

    float one[4] = {3.0f, -2.0f, 0.5f, 7.0f};
    OcrTensor x1 = ocr_test_tensor(OCR_BF16, 2, OCR_SHAPE(4, 1), one);
    OcrTensor y1 = ocr_test_tensor(OCR_BF16, 2, OCR_SHAPE(4, 1), NULL);
    ocr_softmax_forward(&y1, &x1);
    for (int i = 0; i < 4; i++) ck_assert(ocr_tensor_get_f32(&y1, i) == 1.0f);
    ocr_log_softmax_forward(&y1, &x1);
    for (int i = 0; i < 4; i++) ck_assert(ocr_tensor_get_f32(&y1, i) == 0.0f);
    ocr_tensor_free(&x);
    ocr_tensor_free(&y);
    ocr_tensor_free(&x1);
    ocr_tensor_free(&y1);
}
END_TEST

int main(void) {
    Suite *s = suite_create("kernels_softmax");
    TCase *tc = tcase_create("softmax");
    tcase_add_test(tc, test_softmax_forward);
    tcase_add_test(tc, test_log_softmax_forward);
    tcase_add_test(tc, test_softmax_backward);
    tcase_add_test(tc, test_log_softmax_backward);
    tcase_add_test(tc, test_in_place);
    tcase_add_test(tc, test_large_logits);
    tcase_add_test(tc, test_degenerate_rows);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

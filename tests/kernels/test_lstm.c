// lstm_cell_forward / _backward (Paddle's gate order i, f, g, o): the forward against a double
// reference, the backward against central finite differences of the reference's loss
// Σ wh·h + Σ wc·c (the gradients a later step would send), with and without c_prev and dc, in
// every dtype; gradient outputs that are not asked for stay untouched.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/ops.h"
#include "tests/common/test_util.h"

#define NB 3
#define NH 5
#define NG (4 * NH)

static const ocr_dtype_t kDts[3] = {OCR_F32, OCR_F16, OCR_BF16};

static double sg(double x) { return 1.0 / (1.0 + exp(-x)); }

// h, c from gates (NB, 4NH) and c_prev (NULL: zeros), in double.
static void ref(double *h, double *c, const double *a, const double *cp) {
    for (int b = 0; b < NB; b++)
        for (int j = 0; j < NH; j++) {
            const double *ab = a + b * NG;
            double i = sg(ab[j]), f = sg(ab[NH + j]), g = tanh(ab[2 * NH + j]), o = sg(ab[3 * NH + j]);
            double cn = f * (cp ? cp[b * NH + j] : 0.0) + i * g;
            c[b * NH + j] = cn;
            h[b * NH + j] = o * tanh(cn);
        }
}

typedef struct {
    const double *wh, *wc;  // dL/dh, dL/dc (wc NULL: 0)
    double *cp;             // NULL: no previous state
    int wrt_cp;             // differentiate with respect to c_prev instead of the gates
    const double *a;
} Ctx;

static double loss(const double *x, void *v) {
    Ctx *c = v;
    double h[NB * NH], cc[NB * NH];
    ref(h, cc, c->wrt_cp ? c->a : x, c->wrt_cp ? x : c->cp);
    double L = 0;
    for (int k = 0; k < NB * NH; k++) L += c->wh[k] * h[k] + (c->wc ? c->wc[k] * cc[k] : 0.0);
    return L;
}

static void to_double(double *d, const OcrTensor *t) {
    for (int64_t i = 0; i < ocr_tensor_numel(t); i++) d[i] = ocr_tensor_get_f32(t, i);
}

START_TEST(test_lstm_forward) {
    for (int k = 0; k < 3; k++)
        for (int with_cp = 0; with_cp < 2; with_cp++) {
            float av[NB * NG], cv[NB * NH];
            ocr_test_fill_uniform(av, NB * NG, 3 + k, -3.0f, 3.0f);
            ocr_test_fill_uniform(cv, NB * NH, 13 + k, -2.0f, 2.0f);
            OcrTensor a = ocr_test_tensor(kDts[k], 2, OCR_SHAPE(NB, NG), av);
            OcrTensor cp = ocr_test_tensor(kDts[k], 2, OCR_SHAPE(NB, NH), cv);
            OcrTensor h = ocr_test_tensor(kDts[k], 2, OCR_SHAPE(NB, NH), NULL);
            OcrTensor c = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(NB, NH), NULL);
            ocr_lstm_cell_forward(&h, &c, &a, with_cp ? &cp : NULL);
            double ad[NB * NG], cpd[NB * NH], hr[NB * NH], cr[NB * NH];
            to_double(ad, &a);
            to_double(cpd, &cp);
            ref(hr, cr, ad, with_cp ? cpd : NULL);
            float hg[NB * NH], cg[NB * NH];
            ocr_tensor_to_f32(&h, hg);
            ocr_tensor_to_f32(&c, cg);
            // fp32 arithmetic: a few ulps of |c| <= 3 (expf/tanhf and three products); h rounds
            // once more into its dtype.
            double e = ocr_test_dtype_eps(kDts[k]);
            char what[64];
            snprintf(what, sizeof what, "lstm %s c_prev %d", ocr_dtype_name(kDts[k]), with_cp);
            ck_assert_msg(ocr_test_allclose_f64(cg, cr, NB * NH, 3 * 16 * ocr_test_dtype_eps(OCR_F32), 0, what), "%s: c",
                          what);
            ck_assert_msg(ocr_test_allclose_f64(hg, hr, NB * NH, 16 * ocr_test_dtype_eps(OCR_F32), 2 * e, what), "%s: h",
                          what);
            ocr_tensor_free(&a), ocr_tensor_free(&cp), ocr_tensor_free(&h), ocr_tensor_free(&c);
        }
}
END_TEST

START_TEST(test_lstm_backward) {
    for (int k = 0; k < 3; k++)
        for (int variant = 0; variant < 3; variant++) {  // 0: c_prev and dc; 1: no c_prev; 2: no dc
            const int with_cp = variant != 1, with_dc = variant != 2;
            float av[NB * NG], cv[NB * NH], whv[NB * NH], wcv[NB * NH];
            ocr_test_fill_uniform(av, NB * NG, 23 + k, -2.5f, 2.5f);
            ocr_test_fill_uniform(cv, NB * NH, 33 + k, -2.0f, 2.0f);
            ocr_test_fill_uniform(whv, NB * NH, 43 + k, -1.0f, 1.0f);
            ocr_test_fill_uniform(wcv, NB * NH, 53 + k, -1.0f, 1.0f);
            OcrTensor a = ocr_test_tensor(kDts[k], 2, OCR_SHAPE(NB, NG), av);
            OcrTensor cp = ocr_test_tensor(kDts[k], 2, OCR_SHAPE(NB, NH), cv);
            OcrTensor dh = ocr_test_tensor(kDts[k], 2, OCR_SHAPE(NB, NH), whv);
            OcrTensor dc = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(NB, NH), wcv);
            OcrTensor da = ocr_test_tensor(kDts[k], 2, OCR_SHAPE(NB, NG), NULL);
            OcrTensor dcp = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(NB, NH), NULL);
            ocr_lstm_cell_backward(&da, with_cp ? &dcp : NULL, &dh, with_dc ? &dc : NULL, &a, with_cp ? &cp : NULL);
            double ad[NB * NG], cpd[NB * NH], whd[NB * NH], wcd[NB * NH], num[NB * NG];
            to_double(ad, &a);
            to_double(cpd, &cp);
            to_double(whd, &dh);
            to_double(wcd, &dc);
            Ctx c = {whd, with_dc ? wcd : NULL, with_cp ? cpd : NULL, 0, ad};
            ocr_test_numeric_grad(num, ad, NB * NG, loss, &c, 1e-6);
            float got[NB * NG];
            ocr_tensor_to_f32(&da, got);
            double eps = ocr_test_dtype_eps(kDts[k]);
            double err = ocr_test_rel_error(got, num, NB * NG);
            // Each element is a product of 3–4 fp32 factors rounded once into da's dtype.
            double tol = 4 * eps + 1e-6;
            ck_assert_msg(err < tol, "lstm %s variant %d: dgates rel error %g > %g", ocr_dtype_name(kDts[k]), variant,
                          err, tol);
            if (with_cp) {
                double numc[NB * NH];
                c.wrt_cp = 1;
                ocr_test_numeric_grad(numc, cpd, NB * NH, loss, &c, 1e-6);
                float gc[NB * NH];
                ocr_tensor_to_f32(&dcp, gc);
                err = ocr_test_rel_error(gc, numc, NB * NH);
                ck_assert_msg(err < 4 * ocr_test_dtype_eps(OCR_F32) * 8 + 1e-6, "lstm %s: dc_prev rel error %g",
                              ocr_dtype_name(kDts[k]), err);
            } else {
                for (int i = 0; i < NB * NH; i++) ck_assert(isnan(((float *)dcp.data)[i]));  // not asked: untouched
            }
            ocr_tensor_free(&a), ocr_tensor_free(&cp), ocr_tensor_free(&dh), ocr_tensor_free(&dc);
            ocr_tensor_free(&da), ocr_tensor_free(&dcp);
        }
}
END_TEST

int main(void) {
    Suite *s = suite_create("kernels_lstm");
    TCase *tc = tcase_create("lstm");
    tcase_add_test(tc, test_lstm_forward);
    tcase_add_test(tc, test_lstm_backward);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

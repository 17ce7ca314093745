// lstm_layer_forward / _backward (one layer of Paddle's nn.LSTM over a time-major sequence,
// zero initial state): the forward against a double reference of Paddle's recurrence
// (gates = x·W_ihᵀ + b_ih + h·W_hhᵀ + b_hh, order i, f, g, o), and BPTT against central finite
// differences of the double reference's loss Σ wy·y with respect to x and all four parameters;
// parameter gradients ocr_accumulate (+=), dx is assigned.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/ops.h"
#include "tests/common/test_util.h"

#define NT 4
#define NB 2
#define NI 3
#define NH 5
#define NG (4 * NH)

static double sg(double x) { return 1.0 / (1.0 + exp(-x)); }

typedef struct {
    double x[NT * NB * NI], wi[NG * NI], wh[NG * NH], bi[NG], bh[NG];
    const double *wy;
    int which;  // 0 x, 1 w_ih, 2 w_hh, 3 b_ih, 4 b_hh
} Ref;

static void ref_forward(const Ref *r, double *y) {
    double h[NB * NH] = {0}, c[NB * NH] = {0};
    for (int t = 0; t < NT; t++)
        for (int b = 0; b < NB; b++) {
            double a[NG];
            for (int g = 0; g < NG; g++) {
                double s = r->bi[g] + r->bh[g];
                for (int i = 0; i < NI; i++) s += r->x[(t * NB + b) * NI + i] * r->wi[g * NI + i];
                for (int j = 0; j < NH; j++) s += h[b * NH + j] * r->wh[g * NH + j];
                a[g] = s;
            }
            for (int j = 0; j < NH; j++) {
                double ig = sg(a[j]), fg = sg(a[NH + j]), gg = tanh(a[2 * NH + j]);
                c[b * NH + j] = fg * c[b * NH + j] + ig * gg;
            }
            for (int j = 0; j < NH; j++) {
                double og = sg(a[3 * NH + j]);
                h[b * NH + j] = og * tanh(c[b * NH + j]);
                y[(t * NB + b) * NH + j] = h[b * NH + j];
            }
        }
}

static double loss(const double *v, void *ctx) {
    Ref r = *(const Ref *)ctx;
    double *dst[5] = {r.x, r.wi, r.wh, r.bi, r.bh};
    const int n[5] = {NT * NB * NI, NG * NI, NG * NH, NG, NG};
    memcpy(dst[r.which], v, (size_t)n[r.which] * sizeof(double));
    double y[NT * NB * NH], L = 0;
    ref_forward(&r, y);
    for (int i = 0; i < NT * NB * NH; i++) L += r.wy[i] * y[i];
    return L;
}

typedef struct {
    OcrTensor x, wi, wh, bi, bh;
} Inputs;

static Inputs make_inputs(Ref *r, uint64_t seed) {
    float x[NT * NB * NI], wi[NG * NI], wh[NG * NH], bi[NG], bh[NG];
    ocr_test_fill_uniform(x, NT * NB * NI, seed, -1.5f, 1.5f);
    ocr_test_fill_uniform(wi, NG * NI, seed + 1, -0.8f, 0.8f);
    ocr_test_fill_uniform(wh, NG * NH, seed + 2, -0.8f, 0.8f);
    ocr_test_fill_uniform(bi, NG, seed + 3, -0.5f, 0.5f);
    ocr_test_fill_uniform(bh, NG, seed + 4, -0.5f, 0.5f);
    Inputs in = {ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(NT, NB, NI), x), ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(NG, NI), wi),
                 ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(NG, NH), wh), ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(NG), bi),
                 ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(NG), bh)};
    for (int i = 0; i < NT * NB * NI; i++) r->x[i] = x[i];
    for (int i = 0; i < NG * NI; i++) r->wi[i] = wi[i];
    for (int i = 0; i < NG * NH; i++) r->wh[i] = wh[i];
    for (int i = 0; i < NG; i++) r->bi[i] = bi[i], r->bh[i] = bh[i];
    return in;
}

static void free_inputs(Inputs *in) {
    ocr_tensor_free(&in->x), ocr_tensor_free(&in->wi), ocr_tensor_free(&in->wh), ocr_tensor_free(&in->bi),
        ocr_tensor_free(&in->bh);
}

START_TEST(test_lstm_layer_forward) {
    Ref r;
    Inputs in = make_inputs(&r, 7);
    OcrTensor y = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(NT, NB, NH), NULL);
    OcrTensor gates = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(NT, NB, NG), NULL);
    OcrTensor cells = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(NT, NB, NH), NULL);
    ocr_lstm_layer_forward(&y, &gates, &cells, &in.x, &in.wi, &in.wh, &in.bi, &in.bh);
    double want[NT * NB * NH];
    ref_forward(&r, want);
    // Each gate sums I + H + 2 = 10 fp32 products; the error carried through NT steps of the
    // recurrence stays a few times that (|h| < 1, the cell's gradient factors are < 1).
    ck_assert(ocr_test_allclose_f64(y.data, want, NT * NB * NH, 16 * NT * (NI + NH + 2) * ocr_test_dtype_eps(OCR_F32), 0,
                                    "lstm_layer y"));
    ocr_tensor_free(&y), ocr_tensor_free(&gates), ocr_tensor_free(&cells);
    free_inputs(&in);
}
END_TEST

START_TEST(test_lstm_layer_backward) {
    Ref r;
    Inputs in = make_inputs(&r, 17);
    float wyv[NT * NB * NH];
    ocr_test_fill_uniform(wyv, NT * NB * NH, 27, -1.0f, 1.0f);
    double wy[NT * NB * NH];
    for (int i = 0; i < NT * NB * NH; i++) wy[i] = wyv[i];
    r.wy = wy;
    OcrTensor y = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(NT, NB, NH), NULL);
    OcrTensor gates = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(NT, NB, NG), NULL);
    OcrTensor cells = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(NT, NB, NH), NULL);
    ocr_lstm_layer_forward(&y, &gates, &cells, &in.x, &in.wi, &in.wh, &in.bi, &in.bh);
    OcrTensor dy = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(NT, NB, NH), wyv);
    OcrTensor dx = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(NT, NB, NI), NULL);
    // Parameter gradients start from non-zero values: they accumulate.
    float g0[NG * NH];
    ocr_test_fill_uniform(g0, NG * NH, 37, -0.3f, 0.3f);
    OcrTensor dwi = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(NG, NI), g0), dwh = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(NG, NH), g0);
    OcrTensor dbi = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(NG), g0), dbh = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(NG), g0);
    OcrTensor dg = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(NT, NB, NG), NULL);
    OcrTensor st = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(3, NB, NH), NULL);
    ocr_lstm_layer_backward(&dx, &dwi, &dwh, &dbi, &dbh, &dg, &st, &dy, &in.x, &y, &gates, &cells, &in.wi, &in.wh);
    struct {
        const char *name;
        OcrTensor *t;
        int n, accumulated;
    } cases[5] = {{"dx", &dx, NT * NB * NI, 0},
                  {"dw_ih", &dwi, NG * NI, 1},
                  {"dw_hh", &dwh, NG * NH, 1},
                  {"db_ih", &dbi, NG, 1},
                  {"db_hh", &dbh, NG, 1}};
    double *xs[5] = {r.x, r.wi, r.wh, r.bi, r.bh};
    for (int c = 0; c < 5; c++) {
        double num[NG * NH], at[NG * NH];
        memcpy(at, xs[c], (size_t)cases[c].n * sizeof(double));
        r.which = c;
        ocr_test_numeric_grad(num, at, cases[c].n, loss, &r, 1e-6);
        float got[NG * NH];
        for (int i = 0; i < cases[c].n; i++) got[i] = ocr_tensor_get_f32(cases[c].t, i) - (cases[c].accumulated ? g0[i] : 0.0f);
        double err = ocr_test_rel_error(got, num, cases[c].n);
        // fp32 BPTT over NT steps (sums of NT·NB terms for the weights) against double finite
        // differences (h = 1e-6: ~1e-9 truncation, ~1e-10 rounding of the double loss).
        double tol = 64 * NT * NB * (NI + NH) * ocr_test_dtype_eps(OCR_F32);
        printf("%s: rel error %.3g (tolerance %.3g)\n", cases[c].name, err, tol);
        ck_assert_msg(err < tol, "%s rel error %g > %g", cases[c].name, err, tol);
    }
    ocr_tensor_free(&y), ocr_tensor_free(&gates), ocr_tensor_free(&cells), ocr_tensor_free(&dy), ocr_tensor_free(&dx);
    ocr_tensor_free(&dwi), ocr_tensor_free(&dwh), ocr_tensor_free(&dbi), ocr_tensor_free(&dbh), ocr_tensor_free(&dg),
        ocr_tensor_free(&st);
    free_inputs(&in);
}
END_TEST

int main(void) {
    Suite *s = suite_create("kernels_lstm_layer");
    TCase *tc = tcase_create("lstm_layer");
    tcase_add_test(tc, test_lstm_layer_forward);
    tcase_add_test(tc, test_lstm_layer_backward);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

// sar_attention_score_forward / _backward (SAR's 2-D attention score with the valid_ratio mask):
// the forward against a double reference (masked columns −inf, every key/query dtype, with and
// without a mask); the backward against central finite differences of the double reference's
// loss Σ g·s over the unmasked scores, with respect to key, query, w and the bias; the weight and
// bias gradients ocr_accumulate (+=); outputs not asked for stay untouched; and the result does not
// depend on the thread count.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/ops.h"
#include "tests/common/test_util.h"

#define NB 2
#define NT 3
#define NH 2
#define NW 3
#define NP (NH * NW)
#define ND 4

static const int32_t kValid[NB] = {3, 2};  // sample 1: column 2 masked
static const ocr_dtype_t kDts[3] = {OCR_F32, OCR_F16, OCR_BF16};

typedef struct {
    const double *g;  // dL/ds (NB, NT, NP)
    int masked;
    int which;  // 0 key, 1 query, 2 w, 3 bias
    double *k, *q, *w, *b;
} Ref;

static int is_masked(const Ref *r, int b, int p) { return r->masked && p % NW >= kValid[b]; }

static double score(const Ref *r, int b, int t, int p) {
    double s = r->b[0];
    for (int d = 0; d < ND; d++) s += r->w[d] * tanh(r->k[(b * NP + p) * ND + d] + r->q[(b * NT + t) * ND + d]);
    return s;
}

static double loss(const double *x, void *v) {
    Ref r = *(Ref *)v;
    if (r.which == 0) r.k = (double *)x;
    if (r.which == 1) r.q = (double *)x;
    if (r.which == 2) r.w = (double *)x;
    if (r.which == 3) r.b = (double *)x;
    double L = 0;
    for (int b = 0; b < NB; b++)
        for (int t = 0; t < NT; t++)
            for (int p = 0; p < NP; p++)
                if (!is_masked(&r, b, p)) L += r.g[(b * NT + t) * NP + p] * score(&r, b, t, p);
    return L;
}

static void to_double(double *d, const OcrTensor *t) {
    for (int64_t i = 0; i < ocr_tensor_numel(t); i++) d[i] = ocr_tensor_get_f32(t, i);
}

START_TEST(test_forward) {
    for (int k = 0; k < 3; k++)
        for (int masked = 0; masked < 2; masked++) {
            float kv[NB * NP * ND], qv[NB * NT * ND], wv[ND], bv[1] = {0.3f};
            ocr_test_fill_uniform(kv, NB * NP * ND, 1 + k, -1.5f, 1.5f);
            ocr_test_fill_uniform(qv, NB * NT * ND, 11 + k, -1.5f, 1.5f);
            ocr_test_fill_uniform(wv, ND, 21 + k, -1.0f, 1.0f);
            OcrTensor key = ocr_test_tensor(kDts[k], 3, OCR_SHAPE(NB, NP, ND), kv);
            OcrTensor q = ocr_test_tensor(kDts[k], 3, OCR_SHAPE(NB, NT, ND), qv);
            OcrTensor w = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(ND, 1), wv);
            OcrTensor bias = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), bv);
            OcrTensor vw = ocr_test_tensor(OCR_I32, 1, OCR_SHAPE(NB), NULL);
            for (int b = 0; b < NB; b++) ((int32_t *)vw.data)[b] = kValid[b];
            OcrTensor s = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(NB, NT, NP), NULL);
            ocr_sar_attention_score_forward(&s, &key, &q, &w, &bias, masked ? &vw : NULL, NW);
            double kd[NB * NP * ND], qd[NB * NT * ND], wd[ND], bd[1] = {bv[0]};
            to_double(kd, &key), to_double(qd, &q), to_double(wd, &w);
            Ref r = {NULL, masked, 0, kd, qd, wd, bd};
            for (int b = 0; b < NB; b++)
                for (int t = 0; t < NT; t++)
                    for (int p = 0; p < NP; p++) {
                        const float got = ((float *)s.data)[(b * NT + t) * NP + p];
                        if (is_masked(&r, b, p)) {
                            ck_assert_msg(isinf(got) && got < 0, "%s: masked score (%d, %d, %d) = %g",
                                          ocr_dtype_name(kDts[k]), b, t, p, got);
                            continue;
                        }
                        // fp32: D tanh values (a few ulps each) times |w| <= 1, summed: a few
                        // f32 ulps of the D + 1 magnitudes summed.
                        const double want = score(&r, b, t, p);
                        ck_assert_msg(fabs(got - want) <= 8.0 * (ND + 1) * ocr_test_dtype_eps(OCR_F32),
                                      "%s masked %d: score (%d, %d, %d) = %.9g, want %.9g", ocr_dtype_name(kDts[k]),
                                      masked, b, t, p, got, want);
                    }
            ocr_tensor_free(&key), ocr_tensor_free(&q), ocr_tensor_free(&w), ocr_tensor_free(&bias);
            ocr_tensor_free(&vw), ocr_tensor_free(&s);
        }
}
END_TEST

START_TEST(test_backward) {
    for (int k = 0; k < 3; k++)
        for (int masked = 0; masked < 2; masked++) {
            float kv[NB * NP * ND], qv[NB * NT * ND], wv[ND], bv[1] = {-0.2f}, gv[NB * NT * NP];
            float w0[ND], b0[1] = {0.25f};
            ocr_test_fill_uniform(kv, NB * NP * ND, 31 + k, -1.5f, 1.5f);
            ocr_test_fill_uniform(qv, NB * NT * ND, 41 + k, -1.5f, 1.5f);
            ocr_test_fill_uniform(wv, ND, 51 + k, -1.0f, 1.0f);
            ocr_test_fill_uniform(gv, NB * NT * NP, 61 + k, -1.0f, 1.0f);
            ocr_test_fill_uniform(w0, ND, 71 + k, -0.5f, 0.5f);
            OcrTensor key = ocr_test_tensor(kDts[k], 3, OCR_SHAPE(NB, NP, ND), kv);
            OcrTensor q = ocr_test_tensor(kDts[k], 3, OCR_SHAPE(NB, NT, ND), qv);
            OcrTensor w = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(ND), wv);
            OcrTensor vw = ocr_test_tensor(OCR_I32, 1, OCR_SHAPE(NB), NULL);
            for (int b = 0; b < NB; b++) ((int32_t *)vw.data)[b] = kValid[b];
            OcrTensor g = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(NB, NT, NP), gv);
            OcrTensor dk = ocr_test_tensor(kDts[k], 3, OCR_SHAPE(NB, NP, ND), NULL);
            OcrTensor dq = ocr_test_tensor(kDts[k], 3, OCR_SHAPE(NB, NT, ND), NULL);
            OcrTensor dw = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(ND), w0);
            OcrTensor db = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), b0);
            ocr_sar_attention_score_backward(&dk, &dq, &dw, &db, &g, &key, &q, &w, masked ? &vw : NULL, NW);
            double kd[NB * NP * ND], qd[NB * NT * ND], wd[ND], bd[1] = {bv[0]}, gd[NB * NT * NP];
            to_double(kd, &key), to_double(qd, &q), to_double(wd, &w), to_double(gd, &g);
            Ref r = {gd, masked, 0, kd, qd, wd, bd};
            // Each gradient element is a sum of at most max(T, P, B·T·P) = 36 fp32 products of
            // three or four factors, rounded once into its dtype.
            const double tol = 4 * ocr_test_dtype_eps(kDts[k]) + 64 * 36 * ocr_test_dtype_eps(OCR_F32);
            struct {
                const char *name;
                OcrTensor *t;
                double *x;
                int n;
                const float *base;
            } cases[4] = {{"dkey", &dk, kd, NB * NP * ND, NULL},
                          {"dquery", &dq, qd, NB * NT * ND, NULL},
                          {"dw", &dw, wd, ND, w0},
                          {"dbias", &db, bd, 1, b0}};
            for (int c = 0; c < 4; c++) {
                double num[NB * NP * ND];
                r.which = c;
                ocr_test_numeric_grad(num, cases[c].x, cases[c].n, loss, &r, 1e-6);
                float got[NB * NP * ND];
                for (int i = 0; i < cases[c].n; i++)
                    got[i] = ocr_tensor_get_f32(cases[c].t, i) - (cases[c].base ? cases[c].base[i] : 0.0f);
                double err = ocr_test_rel_error(got, num, cases[c].n);
                ck_assert_msg(err < tol, "%s masked %d: %s rel error %g > %g", ocr_dtype_name(kDts[k]), masked,
                              cases[c].name, err, tol);
            }
            // A masked key position gets exactly zero.
            if (masked)
                for (int d = 0; d < ND; d++) ck_assert(ocr_tensor_get_f32(&dk, (1 * NP + 2) * ND + d) == 0.0f);
            // Outputs not asked for: untouched (NULL accepted).
            OcrTensor dq2 = ocr_test_tensor(kDts[k], 3, OCR_SHAPE(NB, NT, ND), NULL);
            ocr_sar_attention_score_backward(NULL, &dq2, NULL, NULL, &g, &key, &q, &w, masked ? &vw : NULL, NW);
            for (int i = 0; i < NB * NT * ND; i++)
                ck_assert(ocr_tensor_get_f32(&dq2, i) == ocr_tensor_get_f32(&dq, i));
            ocr_tensor_free(&dq2);
            ocr_tensor_free(&key), ocr_tensor_free(&q), ocr_tensor_free(&w), ocr_tensor_free(&vw);
            ocr_tensor_free(&g), ocr_tensor_free(&dk), ocr_tensor_free(&dq), ocr_tensor_free(&dw), ocr_tensor_free(&db);
        }
}
END_TEST

// Larger than the OpenMP threshold: 1 thread and every thread give the same bits.
START_TEST(test_threads) {
    const int B = 4, T = 26, P = 40, D = 64;
    float *kv = malloc(sizeof(float) * B * P * D), *qv = malloc(sizeof(float) * B * T * D), wv[64];
    float *gv = malloc(sizeof(float) * B * T * P);
    ocr_test_fill_uniform(kv, B * P * D, 81, -1, 1);
    ocr_test_fill_uniform(qv, B * T * D, 82, -1, 1);
    ocr_test_fill_uniform(wv, D, 83, -1, 1);
    ocr_test_fill_uniform(gv, B * T * P, 84, -1, 1);
    OcrTensor key = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, P, D), kv), q = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, D), qv);
    OcrTensor w = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(D), wv), g = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, P), gv);
    OcrTensor vw = ocr_test_tensor(OCR_I32, 1, OCR_SHAPE(B), NULL);
    for (int b = 0; b < B; b++) ((int32_t *)vw.data)[b] = 10 - 2 * b;  // 4 rows of 10 columns
    OcrTensor s[2], dk[2], dq[2], dw[2];
    const int threads[2] = {1, 3};
    for (int r = 0; r < 2; r++) {
        omp_set_num_threads(threads[r]);
        s[r] = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, P), NULL);
        dk[r] = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, P, D), NULL);
        dq[r] = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, D), NULL);
        dw[r] = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(D), NULL);
        ocr_zero_tensor(&dw[r]);
        ocr_sar_attention_score_forward(&s[r], &key, &q, &w, NULL, &vw, 10);
        ocr_sar_attention_score_backward(&dk[r], &dq[r], &dw[r], NULL, &g, &key, &q, &w, &vw, 10);
    }
    omp_set_num_threads(threads[1]);
    ck_assert(memcmp(s[0].data, s[1].data, ocr_tensor_bytes(&s[0])) == 0);
    ck_assert(memcmp(dk[0].data, dk[1].data, ocr_tensor_bytes(&dk[0])) == 0);
    ck_assert(memcmp(dq[0].data, dq[1].data, ocr_tensor_bytes(&dq[0])) == 0);
    ck_assert(memcmp(dw[0].data, dw[1].data, ocr_tensor_bytes(&dw[0])) == 0);
    for (int r = 0; r < 2; r++) ocr_tensor_free(&s[r]), ocr_tensor_free(&dk[r]), ocr_tensor_free(&dq[r]), ocr_tensor_free(&dw[r]);
    ocr_tensor_free(&key), ocr_tensor_free(&q), ocr_tensor_free(&w), ocr_tensor_free(&g), ocr_tensor_free(&vw);
    free(kv), free(qv), free(gv);
}
END_TEST

int main(void) {
    Suite *s = suite_create("kernels_sar_attention");
    TCase *tc = tcase_create("sar_attention");
    tcase_add_test(tc, test_forward);
    tcase_add_test(tc, test_backward);
    tcase_add_test(tc, test_threads);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

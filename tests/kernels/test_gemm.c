// ocr_gemm(): all transposes, odd sizes, alpha/beta, NaN in c with beta = 0, K = 0, and
// f16/bf16 storage, against a double-precision reference.
#include <math.h>
#include <stdlib.h>

#include "kernels/ops.h"
#include "tests/common/test_util.h"

typedef struct {
    int M, N, K, ta, tb;
    float alpha, beta;
} GemmCase;

// c (M, N) = alpha·op(a)·op(b) + beta·c0 in double; with absval, every term is replaced by
// its absolute value (a bound on what rounding errors can scale with).
static void gemm_ref(double *c, const float *a, const float *b, const float *c0, const GemmCase *g, int absval) {
    for (int i = 0; i < g->M; i++)
        for (int j = 0; j < g->N; j++) {
            double s = 0;
            for (int k = 0; k < g->K; k++) {
                double x = g->ta ? a[k * g->M + i] : a[i * g->K + k];
                double y = g->tb ? b[j * g->K + k] : b[k * g->N + j];
                s += absval ? fabs(x * y) : x * y;
            }
            s *= absval ? fabs(g->alpha) : g->alpha;
            if (g->beta != 0.0f) s += absval ? fabs((double)g->beta * c0[i * g->N + j]) : (double)g->beta * c0[i * g->N + j];
            c[i * g->N + j] = s;
        }
}

// Runs one case in `dt` storage and checks it against the double reference computed from the
// values as stored. Tolerance: one rounding into dt plus fp32 accumulation over K terms.
static void run_case(const GemmCase *g, ocr_dtype_t dt) {
    int64_t na = (int64_t)g->M * g->K, nb = (int64_t)g->K * g->N, nc = (int64_t)g->M * g->N;
    float *va = malloc(sizeof(float) * (size_t)(na + 1)), *vb = malloc(sizeof(float) * (size_t)(nb + 1));
    float *vc = malloc(sizeof(float) * (size_t)(nc + 1)), *got = malloc(sizeof(float) * (size_t)(nc + 1));
    double *ref = malloc(sizeof(double) * (size_t)(nc + 1)), *bound = malloc(sizeof(double) * (size_t)(nc + 1));
    ocr_test_fill_uniform(va, na, 1 + (uint64_t)g->M, -1.0f, 1.0f);
    ocr_test_fill_uniform(vb, nb, 2 + (uint64_t)g->N, -1.0f, 1.0f);
    ocr_test_fill_uniform(vc, nc, 3 + (uint64_t)g->K, -1.0f, 1.0f);
    OcrTensor a = ocr_test_tensor(dt, 2, g->ta ? OCR_SHAPE(g->K, g->M) : OCR_SHAPE(g->M, g->K), va);
    OcrTensor b = ocr_test_tensor(dt, 2, g->tb ? OCR_SHAPE(g->N, g->K) : OCR_SHAPE(g->K, g->N), vb);
    OcrTensor c = ocr_test_tensor(dt, 2, OCR_SHAPE(g->M, g->N), g->beta != 0.0f ? vc : NULL);  // NaN when beta = 0
    // The reference sees the stored (rounded) values.
    ocr_tensor_to_f32(&a, va);
    ocr_tensor_to_f32(&b, vb);
    if (g->beta != 0.0f) ocr_tensor_to_f32(&c, vc);
    gemm_ref(ref, va, vb, vc, g, 0);
    gemm_ref(bound, va, vb, vc, g, 1);

    ocr_gemm(&c, &a, &b, g->ta, g->tb, g->alpha, g->beta);
    ocr_tensor_to_f32(&c, got);
    double eps = ocr_test_dtype_eps(dt), u = ldexp(1.0, -24);
    for (int64_t i = 0; i < nc; i++) {
        double tol = eps * fabs(ref[i]) + 2.0 * (g->K + 2) * u * bound[i] + 1e-30;
        ck_assert_msg(fabs(got[i] - ref[i]) <= tol,
                      "gemm %dx%dx%d ta=%d tb=%d alpha=%g beta=%g %s: c[%lld] = %.9g, expected %.9g (tol %.3g)", g->M,
                      g->N, g->K, g->ta, g->tb, g->alpha, g->beta, ocr_dtype_name(dt), (long long)i, got[i], ref[i], tol);
    }
    ocr_tensor_free(&a);
    ocr_tensor_free(&b);
    ocr_tensor_free(&c);
    free(va), free(vb), free(vc), free(got), free(ref), free(bound);
}

static const GemmCase cases[] = {
    {1, 1, 1, 0, 0, 1.0f, 0.0f},      {7, 5, 3, 0, 0, 1.0f, 0.0f},    {7, 5, 3, 1, 0, 1.0f, 0.0f},
    {7, 5, 3, 0, 1, 1.0f, 0.0f},      {7, 5, 3, 1, 1, 1.0f, 0.0f},    {33, 17, 65, 0, 0, 0.5f, 0.0f},
    {33, 17, 65, 1, 1, -1.5f, 0.75f}, {33, 17, 65, 0, 1, 1.0f, 1.0f}, {64, 48, 129, 1, 0, 1.0f, -0.5f},
    {3, 2, 0, 0, 0, 1.0f, 0.0f},      {3, 2, 0, 1, 1, 1.0f, 2.0f},    {5, 4, 6, 0, 0, 0.0f, 0.5f},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

START_TEST(test_gemm_f32) { run_case(&cases[_i], OCR_F32); }
END_TEST

START_TEST(test_gemm_f16) { run_case(&cases[_i], OCR_F16); }
END_TEST

START_TEST(test_gemm_bf16) { run_case(&cases[_i], OCR_BF16); }
END_TEST

// Mixed storage: f16 a, bf16 b, f32 c.
START_TEST(test_gemm_mixed_dtypes) {
    const int M = 9, N = 11, K = 13;
    float va[9 * 13], vb[13 * 11], got[9 * 11];
    double ref[9 * 11], bound[9 * 11];
    ocr_test_fill_uniform(va, M * K, 41, -2.0f, 2.0f);
    ocr_test_fill_uniform(vb, K * N, 42, -2.0f, 2.0f);
    OcrTensor a = ocr_test_tensor(OCR_F16, 2, OCR_SHAPE(M, K), va);
    OcrTensor b = ocr_test_tensor(OCR_BF16, 2, OCR_SHAPE(K, N), vb);
    OcrTensor c = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(M, N), NULL);
    ocr_tensor_to_f32(&a, va);
    ocr_tensor_to_f32(&b, vb);
    GemmCase g = {M, N, K, 0, 0, 1.0f, 0.0f};
    gemm_ref(ref, va, vb, NULL, &g, 0);
    gemm_ref(bound, va, vb, NULL, &g, 1);
    ocr_gemm(&c, &a, &b, 0, 0, 1.0f, 0.0f);
    ocr_tensor_to_f32(&c, got);
    for (int i = 0; i < M * N; i++)
        ck_assert_msg(fabs(got[i] - ref[i]) <= 2.0 * (K + 2) * ldexp(1.0, -24) * bound[i] + 1e-30,
                      "mixed: %d: %g vs %g", i, got[i], ref[i]);
    ocr_tensor_free(&a);
    ocr_tensor_free(&b);
    ocr_tensor_free(&c);
}
END_TEST

int main(void) {
    Suite *s = suite_create("kernels_gemm");
    TCase *tc = tcase_create("gemm");
    tcase_add_loop_test(tc, test_gemm_f32, 0, NCASES);
    tcase_add_loop_test(tc, test_gemm_f16, 0, NCASES);
    tcase_add_loop_test(tc, test_gemm_bf16, 0, NCASES);
    tcase_add_test(tc, test_gemm_mixed_dtypes);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

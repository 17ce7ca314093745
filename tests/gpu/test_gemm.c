// GEMM, linear and batched matmul on the GPU against the CPU twins: every transpose
// combination, f32/f16/bf16 and mixed dtypes, beta = 0 over poisoned outputs and beta != 0,
// K = 0, bias, NULL gradients, accumulation into existing weight gradients, and FP32 that is
// really FP32 (no TF32) unless allowed.
#include "tests/gpu/gpu_test.h"

#ifdef OCR_HAVE_CUDA

// fp32 GEMMs with different summation orders: a few ulps of the largest value.
#define GEMM_RTOL 1e-5
#define GEMM_ATOL 1e-5

typedef struct {
    ocr_dtype_t a, b, c;
} Dts;

static const Dts DTYPES[] = {
    {OCR_F32, OCR_F32, OCR_F32},  {OCR_F16, OCR_F16, OCR_F16}, {OCR_BF16, OCR_BF16, OCR_BF16},
    {OCR_F16, OCR_F16, OCR_F32},  {OCR_BF16, OCR_BF16, OCR_F32}, {OCR_F32, OCR_F32, OCR_F16},
    {OCR_F16, OCR_BF16, OCR_F32}, {OCR_F32, OCR_F16, OCR_BF16},  {OCR_BF16, OCR_BF16, OCR_F16},
};
#define NDTYPES ((int)(sizeof DTYPES / sizeof DTYPES[0]))

START_TEST(test_gemm_all_cases) {
    const int64_t M = 37, N = 53, K = 29;
    for (int k = 0; k < NDTYPES; k++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int with_beta = 0; with_beta < 2; with_beta++) {
                    Twin a = ta ? twin_uniform(DTYPES[k].a, 2, OCR_SHAPE(K, M), -1, 1)
                                : twin_uniform(DTYPES[k].a, 2, OCR_SHAPE(M, K), -1, 1);
                    Twin b = tb ? twin_uniform(DTYPES[k].b, 2, OCR_SHAPE(N, K), -1, 1)
                                : twin_uniform(DTYPES[k].b, 2, OCR_SHAPE(K, N), -1, 1);
                    Twin c = with_beta ? twin_uniform(DTYPES[k].c, 2, OCR_SHAPE(M, N), -1, 1)
                                       : twin_new(DTYPES[k].c, 2, OCR_SHAPE(M, N));
                    const float beta = with_beta ? 0.5f : 0.0f;
                    ocr_gemm(&c.h, &a.h, &b.h, ta, tb, 0.75f, beta);
                    ocr_gemm(&c.d, &a.d, &b.d, ta, tb, 0.75f, beta);
                    char what[128];
                    snprintf(what, sizeof what, "gemm %s x %s -> %s ta %d tb %d beta %g", dtn(DTYPES[k].a),
                             dtn(DTYPES[k].b), dtn(DTYPES[k].c), ta, tb, (double)beta);
                    ck_assert_msg(twin_close(&c, GEMM_RTOL, GEMM_ATOL, what), "%s", what);
                    twin_free(&a);
                    twin_free(&b);
                    twin_free(&c);
                }
}
END_TEST

// K = 0: beta = 0 gives zeros over a poisoned c, beta != 0 scales c.
START_TEST(test_gemm_empty_k) {
    for (int k = 0; k < 3; k++) {
        Twin a = twin_new(DTYPES[k].a, 2, OCR_SHAPE(5, 0));
        Twin b = twin_new(DTYPES[k].b, 2, OCR_SHAPE(0, 7));
        Twin c = twin_new(DTYPES[k].c, 2, OCR_SHAPE(5, 7));
        ocr_gemm(&c.h, &a.h, &b.h, 0, 0, 1.0f, 0.0f);
        ocr_gemm(&c.d, &a.d, &b.d, 0, 0, 1.0f, 0.0f);
        ck_assert(twin_bits(&c, "gemm K = 0, beta = 0"));
        Twin c2 = twin_uniform(DTYPES[k].c, 2, OCR_SHAPE(5, 7), -2, 2);
        ocr_gemm(&c2.h, &a.h, &b.h, 0, 0, 1.0f, 2.0f);
        ocr_gemm(&c2.d, &a.d, &b.d, 0, 0, 1.0f, 2.0f);
        ck_assert(twin_bits(&c2, "gemm K = 0, beta = 2"));
        twin_free(&a);
        twin_free(&b);
        twin_free(&c);
        twin_free(&c2);
    }
}
END_TEST

// f32 GEMMs are true FP32 by default. With positive inputs (no cancellation) and K = 64, a
// TF32 product (operands rounded to 10-bit mantissas, 2^-11 relative each) is off by ~1e-4
// relative; FP32 stays within ~1e-6 of the CPU, so 1e-5 per element tells them apart. With
// TF32 allowed the result only has to be close.
START_TEST(test_gemm_fp32_is_not_tf32) {
    const int64_t M = 128, N = 128, K = 64;
    Twin a = twin_uniform(OCR_F32, 2, OCR_SHAPE(M, K), 0.5f, 1.5f);
    Twin b = twin_uniform(OCR_F32, 2, OCR_SHAPE(K, N), 0.5f, 1.5f);
    Twin c = twin_new(OCR_F32, 2, OCR_SHAPE(M, N));
    ck_assert_int_eq(ocr_cuda_allow_tf32(), 0);
    ocr_gemm(&c.h, &a.h, &b.h, 0, 0, 1.0f, 0.0f);
    ocr_gemm(&c.d, &a.d, &b.d, 0, 0, 1.0f, 0.0f);
    ck_assert(twin_close(&c, 1e-5, 0.0, "fp32 gemm, TF32 off"));
    ocr_cuda_set_allow_tf32(1);
    twin_poison(&c);
    ocr_gemm(&c.h, &a.h, &b.h, 0, 0, 1.0f, 0.0f);
    ocr_gemm(&c.d, &a.d, &b.d, 0, 0, 1.0f, 0.0f);
    ocr_cuda_set_allow_tf32(0);
    ck_assert(twin_close(&c, 5e-3, 5e-3, "fp32 gemm, TF32 allowed"));
    twin_free(&a);
    twin_free(&b);
    twin_free(&c);
}
END_TEST

START_TEST(test_linear) {
    const int64_t B = 3, T = 11, IN = 24, OUT = 40;
    for (int k = 0; k < NDTYPES; k++)
        for (int with_bias = 0; with_bias < 3; with_bias++) {  // none, the weight's dtype, f32
            const ocr_dtype_t xt = DTYPES[k].a, wt = DTYPES[k].b, yt = DTYPES[k].c;
            Twin x = twin_uniform(xt, 3, OCR_SHAPE(B, T, IN), -1, 1);
            Twin w = twin_uniform(wt, 2, OCR_SHAPE(IN, OUT), -0.5f, 0.5f);
            Twin bias = twin_uniform(with_bias == 1 ? wt : OCR_F32, 1, OCR_SHAPE(OUT), -1, 1);
            Twin y = twin_new(yt, 3, OCR_SHAPE(B, T, OUT));
            ocr_linear_forward(&y.h, &x.h, &w.h, with_bias ? &bias.h : NULL);
            ocr_linear_forward(&y.d, &x.d, &w.d, with_bias ? &bias.d : NULL);
            char what[128];
            snprintf(what, sizeof what, "linear forward %s x %s -> %s bias %d", dtn(xt), dtn(wt), dtn(yt), with_bias);
            ck_assert_msg(twin_close(&y, GEMM_RTOL, GEMM_ATOL, what), "%s", what);

            // Backward: dinp assigned (poisoned first), dweight and dbias accumulate into
            // random existing values.
            Twin dy = twin_uniform(yt, 3, OCR_SHAPE(B, T, OUT), -1, 1);
            Twin dx = twin_new(xt, 3, OCR_SHAPE(B, T, IN));
            Twin dw = twin_uniform(wt, 2, OCR_SHAPE(IN, OUT), -1, 1);
            Twin db = twin_uniform(OCR_F32, 1, OCR_SHAPE(OUT), -1, 1);
            ocr_linear_backward(&dx.h, &dw.h, &db.h, &dy.h, &x.h, &w.h);
            ocr_linear_backward(&dx.d, &dw.d, &db.d, &dy.d, &x.d, &w.d);
            snprintf(what, sizeof what, "linear backward %s/%s/%s", dtn(xt), dtn(wt), dtn(yt));
            ck_assert_msg(twin_close(&dx, GEMM_RTOL, GEMM_ATOL, what), "%s dinp", what);
            ck_assert_msg(twin_close(&dw, GEMM_RTOL, GEMM_ATOL, what), "%s dweight", what);
            ck_assert_msg(twin_close(&db, GEMM_RTOL, GEMM_ATOL, what), "%s dbias", what);
            // Only some gradients: the others stay untouched.
            twin_poison(&dx);
            ocr_linear_backward(NULL, &dw.h, NULL, &dy.h, &x.h, &w.h);
            ocr_linear_backward(NULL, &dw.d, NULL, &dy.d, &x.d, &w.d);
            ck_assert_msg(twin_close(&dw, GEMM_RTOL, GEMM_ATOL, what), "%s dweight only", what);
            ck_assert_msg(twin_close(&dx, 0, 0, "dinp untouched (still NaN)"), "%s", what);
            twin_free(&x), twin_free(&w), twin_free(&bias), twin_free(&y);
            twin_free(&dy), twin_free(&dx), twin_free(&dw), twin_free(&db);
        }
}
END_TEST

START_TEST(test_matmul_batched) {
    const int64_t B = 6, M = 13, N = 9, K = 17;
    const float alpha = 0.3f;
    for (int k = 0; k < NDTYPES; k++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                Twin a = ta ? twin_uniform(DTYPES[k].a, 3, OCR_SHAPE(B, K, M), -1, 1)
                            : twin_uniform(DTYPES[k].a, 3, OCR_SHAPE(B, M, K), -1, 1);
                Twin b = tb ? twin_uniform(DTYPES[k].b, 3, OCR_SHAPE(B, N, K), -1, 1)
                            : twin_uniform(DTYPES[k].b, 3, OCR_SHAPE(B, K, N), -1, 1);
                Twin y = twin_new(DTYPES[k].c, 3, OCR_SHAPE(B, M, N));
                ocr_matmul_batched_forward(&y.h, &a.h, &b.h, ta, tb, alpha);
                ocr_matmul_batched_forward(&y.d, &a.d, &b.d, ta, tb, alpha);
                char what[128];
                snprintf(what, sizeof what, "matmul_batched %s x %s -> %s ta %d tb %d", dtn(DTYPES[k].a),
                         dtn(DTYPES[k].b), dtn(DTYPES[k].c), ta, tb);
                ck_assert_msg(twin_close(&y, GEMM_RTOL, GEMM_ATOL, what), "%s forward", what);
                Twin dy = twin_uniform(DTYPES[k].c, 3, OCR_SHAPE(B, M, N), -1, 1);
                Twin da = twin_new(DTYPES[k].a, a.h.ndim, a.h.shape);
                Twin db = twin_new(DTYPES[k].b, b.h.ndim, b.h.shape);
                ocr_matmul_batched_backward(&da.h, &db.h, &dy.h, &a.h, &b.h, ta, tb, alpha);
                ocr_matmul_batched_backward(&da.d, &db.d, &dy.d, &a.d, &b.d, ta, tb, alpha);
                ck_assert_msg(twin_close(&da, GEMM_RTOL, GEMM_ATOL, what), "%s da", what);
                ck_assert_msg(twin_close(&db, GEMM_RTOL, GEMM_ATOL, what), "%s db", what);
                twin_free(&a), twin_free(&b), twin_free(&y), twin_free(&dy), twin_free(&da), twin_free(&db);
            }
}
END_TEST

// Larger products, where cuBLAS picks tensor-core kernels (and split-K would tempt it to
// reduce in half precision): still within one rounding of the fp32-accumulated CPU result.
START_TEST(test_gemm_large_half) {
    const int64_t M = 256, N = 192, K = 2048;
    const ocr_dtype_t dts[2] = {OCR_F16, OCR_BF16};
    for (int k = 0; k < 2; k++) {
        Twin a = twin_uniform(dts[k], 2, OCR_SHAPE(M, K), -1, 1);
        Twin b = twin_uniform(dts[k], 2, OCR_SHAPE(K, N), -1, 1);
        Twin c = twin_new(dts[k], 2, OCR_SHAPE(M, N));
        ocr_gemm(&c.h, &a.h, &b.h, 0, 0, 1.0f, 0.0f);
        ocr_gemm(&c.d, &a.d, &b.d, 0, 0, 1.0f, 0.0f);
        ck_assert_msg(twin_close(&c, 1e-5, 1e-5, "large half gemm"), "%s", dtn(dts[k]));
        twin_free(&a), twin_free(&b), twin_free(&c);
    }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("gpu_gemm");
    TCase *tc = tcase_create("gemm");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_gemm_all_cases);
    tcase_add_test(tc, test_gemm_empty_k);
    tcase_add_test(tc, test_gemm_fp32_is_not_tf32);
    tcase_add_test(tc, test_linear);
    tcase_add_test(tc, test_matmul_batched);
    tcase_add_test(tc, test_gemm_large_half);
    suite_add_tcase(s, tc);
    return s;
}

#endif

GPU_TEST_MAIN("gpu_gemm", suite)

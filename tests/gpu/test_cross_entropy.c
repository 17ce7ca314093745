// Cross-entropy with label smoothing and an ignored class on the GPU against the CPU twin: row
// losses, the mean and the count, and the gradient; NRTRLoss (ε 0.1, padding 0) and SARLoss (no
// smoothing, PAD = last class) settings, logits in every dtype, widths below and far above a
// warp (PP-OCRv4 ch's 6629 classes), a loss scale, and every row ignored.
// Both sides load fp32 and sum in double; only the summation order differs (warp tree vs
// sequential), so the f32 outputs agree to a few f32 ulps and the gradients, rounded once into
// their dtype, to one unit of that dtype.
#include "tests/gpu/gpu_test.h"

#ifdef OCR_HAVE_CUDA

static const ocr_dtype_t DTS[3] = {OCR_F32, OCR_F16, OCR_BF16};

static void ce_case(int64_t N, int64_t C, float smoothing, int ignore, float scale, ocr_dtype_t dt, int all_ignored) {
    char what[160];
    snprintf(what, sizeof what, "cross_entropy N %lld C %lld eps %g ignore %d scale %g %s%s", (long long)N,
             (long long)C, (double)smoothing, ignore, (double)scale, dtn(dt), all_ignored ? " all ignored" : "");
    int32_t *t = malloc((size_t)N * sizeof *t);
    float *u = malloc((size_t)N * sizeof *u);
    ocr_test_fill_uniform(u, N, gpu_next_seed(), 0.0f, (float)C);
    for (int64_t i = 0; i < N; i++) t[i] = (int32_t)u[i] < C ? (int32_t)u[i] : (int32_t)C - 1;
    if (ignore >= 0)
        for (int64_t i = 0; i < N; i += 3) t[i] = ignore;
    if (all_ignored)
        for (int64_t i = 0; i < N; i++) t[i] = ignore;
    Twin tg = twin_i32(1, OCR_SHAPE(N), t);
    Twin x = twin_uniform(dt, 2, OCR_SHAPE(N, C), -6, 6);
    Twin losses = twin_new(OCR_F32, 1, OCR_SHAPE(N));
    Twin loss = twin_new(OCR_F32, 1, OCR_SHAPE(1));
    Twin cnt = twin_new(OCR_I32, 1, OCR_SHAPE(1));
    CrossEntropyParams p = {smoothing, ignore, scale};
    ocr_cross_entropy_forward(&losses.h, &loss.h, &cnt.h, &x.h, &tg.h, p);
    ocr_cross_entropy_forward(&losses.d, &loss.d, &cnt.d, &x.d, &tg.d, p);
    ck_assert_msg(twin_close(&losses, 4e-7, 1e-7, what), "%s: row losses", what);
    ck_assert_msg(twin_close(&loss, 4e-7, 1e-7, what), "%s: mean", what);
    ck_assert_msg(twin_bits(&cnt, what), "%s: count", what);
    Twin dx = twin_new(dt, 2, OCR_SHAPE(N, C));
    ocr_cross_entropy_backward(&dx.h, &x.h, &tg.h, p);
    ocr_cross_entropy_backward(&dx.d, &x.d, &tg.d, p);
    ck_assert_msg(twin_close(&dx, 1e-6, 1e-7, what), "%s: gradient", what);
    twin_free(&tg), twin_free(&x), twin_free(&losses), twin_free(&loss), twin_free(&cnt), twin_free(&dx);
    free(t);
    free(u);
}

START_TEST(test_cross_entropy) {
    for (int k = 0; k < 3; k++) {
        ce_case(37, 11, 0.1f, 0, 1.0f, DTS[k], 0);
        ce_case(37, 101, 0.1f, 0, 1024.0f, DTS[k], 0);   // NRTR en
        ce_case(48, 98, 0.0f, 98, 1.0f, DTS[k], 0);      // SAR en: 98 predicted classes, PAD 98 ignored
        ce_case(5, 6629, 0.1f, 0, 1.0f, DTS[k], 0);      // NRTR ch
        ce_case(20, 33, 0.0f, -1, 1.0f, DTS[k], 0);
        ce_case(8, 33, 0.1f, 2, 1.0f, DTS[k], 1);
    }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("gpu_cross_entropy");
    TCase *tc = tcase_create("cross_entropy");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_cross_entropy);
    suite_add_tcase(s, tc);
    return s;
}

#endif

GPU_TEST_MAIN("gpu_cross_entropy", suite)

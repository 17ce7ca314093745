// Activations on the GPU against the CPU twins: every activation forward and backward over
// random values plus the kinks and specials (±3 for hardswish, 0, ±inf, NaN, large
// magnitudes), f32/f16/bf16 and mixed dtypes, in place (out aliasing inp).
#include "tests/gpu/gpu_test.h"

#ifdef OCR_HAVE_CUDA

// The GPU evaluates the CPU's formulas (same exp and normal-CDF approximations) and may only
// contract a multiply-add differently: a few fp32 ulps.
#define ACT_RTOL 2e-6
#define ACT_ATOL 1e-7

static Twin act_input(ocr_dtype_t dt, int64_t n) {
    Twin t = twin_uniform(dt, 2, OCR_SHAPE(1, n), -8, 8);
    const float specials[] = {-3.0f, 3.0f, 0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e30f, -1e30f, 88.5f, -90.0f,
                              -2.999999f, 2.999999f, 1e-40f, 5.0f, -5.0f, 0.5f, -0.5f};
    const int ns = (int)(sizeof specials / sizeof specials[0]);
    for (int i = 0; i < ns && i < n; i++) ocr_tensor_set_f32(&t.h, i * 3, specials[i]);
    twin_sync_up(&t);
    return t;
}

START_TEST(test_activations) {
    const int64_t n = 4099;
    const ocr_dtype_t dts[4][2] = {{OCR_F32, OCR_F32}, {OCR_F16, OCR_F16}, {OCR_BF16, OCR_BF16}, {OCR_F16, OCR_F32}};
    for (int act = 0; act < OCR_ACT_COUNT; act++)
        for (int k = 0; k < 4; k++) {
            char what[96];
            snprintf(what, sizeof what, "%s %s -> %s", ocr_activation_name((ocr_activation_t)act), dtn(dts[k][0]),
                     dtn(dts[k][1]));
            Twin x = act_input(dts[k][0], n);
            Twin y = twin_new(dts[k][1], 2, OCR_SHAPE(1, n));
            ocr_activation_forward(&y.h, &x.h, (ocr_activation_t)act);
            ocr_activation_forward(&y.d, &x.d, (ocr_activation_t)act);
            ck_assert_msg(twin_close(&y, ACT_RTOL, ACT_ATOL, what), "%s forward", what);
            Twin dy = twin_uniform(dts[k][1], 2, OCR_SHAPE(1, n), -1, 1);
            Twin dx = twin_new(dts[k][0], 2, OCR_SHAPE(1, n));
            ocr_activation_backward(&dx.h, &dy.h, &x.h, (ocr_activation_t)act);
            ocr_activation_backward(&dx.d, &dy.d, &x.d, (ocr_activation_t)act);
            ck_assert_msg(twin_close(&dx, ACT_RTOL, ACT_ATOL, what), "%s backward", what);
            twin_free(&x), twin_free(&y), twin_free(&dy), twin_free(&dx);
        }
}
END_TEST

// In place: out aliases inp (forward), dinp aliases dout (backward).
START_TEST(test_activations_in_place) {
    const int64_t n = 1000;
    for (int act = 0; act < OCR_ACT_COUNT; act++) {
        Twin x = act_input(OCR_F32, n);
        Twin ref = twin_new(OCR_F32, 2, OCR_SHAPE(1, n));
        Twin dy = twin_uniform(OCR_F32, 2, OCR_SHAPE(1, n), -1, 1);
        ocr_activation_backward(&dy.h, &dy.h, &x.h, (ocr_activation_t)act);
        ocr_activation_backward(&dy.d, &dy.d, &x.d, (ocr_activation_t)act);
        ck_assert_msg(twin_close(&dy, ACT_RTOL, ACT_ATOL, "activation backward in place"), "%d", act);
        ocr_activation_forward(&x.h, &x.h, (ocr_activation_t)act);
        ocr_activation_forward(&x.d, &x.d, (ocr_activation_t)act);
        ck_assert_msg(twin_close(&x, ACT_RTOL, ACT_ATOL, "activation forward in place"), "%d", act);
        twin_free(&x), twin_free(&ref), twin_free(&dy);
    }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("gpu_activation");
    TCase *tc = tcase_create("activation");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_activations);
    tcase_add_test(tc, test_activations_in_place);
    suite_add_tcase(s, tc);
    return s;
}

#endif

GPU_TEST_MAIN("gpu_activation", suite)

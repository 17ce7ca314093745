// The pad op on the GPU against its CPU twin, bit for bit (pure data movement): forward with a
// zero and a -inf border and asymmetric amounts (PPLCNetV4's "SAME" padding pads 0 before and 1
// after), backward (the crop), f32/f16/bf16.
#include "tests/gpu/gpu_test.h"

#ifdef OCR_HAVE_CUDA

static const ocr_dtype_t DTS[3] = {OCR_F32, OCR_F16, OCR_BF16};

START_TEST(test_pad) {
    const int64_t cases[][7] = {{2, 24, 160, 48, 0, 1, 0}, {1, 3, 5, 7, 2, 1, 3}, {3, 1, 9, 33, 0, 0, 2}};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 3; k++) {
            const int64_t N = cases[i][0], H = cases[i][1], W = cases[i][2], C = cases[i][3];
            const int top = (int)cases[i][4], left = (int)cases[i][6];
            const int64_t Ho = H + top + cases[i][5], Wo = W + left + 1;
            char what[96];
            snprintf(what, sizeof what, "pad case %d %s", i, dtn(DTS[k]));
            Twin x = twin_uniform(DTS[k], 4, OCR_SHAPE(N, H, W, C), -2, 2);
            Twin y = twin_new(DTS[k], 4, OCR_SHAPE(N, Ho, Wo, C));
            for (int v = 0; v < 2; v++) {
                twin_poison(&y);
                float value = v ? -INFINITY : 0.0f;
                ocr_pad2d_forward(&y.h, &x.h, top, left, value);
                ocr_pad2d_forward(&y.d, &x.d, top, left, value);
                ck_assert_msg(twin_bits(&y, what), "%s forward (border %g)", what, value);
            }
            Twin dy = twin_uniform(DTS[k], 4, OCR_SHAPE(N, Ho, Wo, C), -1, 1);
            Twin dx = twin_new(DTS[k], 4, OCR_SHAPE(N, H, W, C));
            ocr_pad2d_backward(&dx.h, &dy.h, top, left);
            ocr_pad2d_backward(&dx.d, &dy.d, top, left);
            ck_assert_msg(twin_bits(&dx, what), "%s backward", what);
            twin_free(&x), twin_free(&y), twin_free(&dy), twin_free(&dx);
        }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("gpu_pad");
    TCase *tc = tcase_create("pad");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_pad);
    suite_add_tcase(s, tc);
    return s;
}

#endif

GPU_TEST_MAIN("gpu_pad", suite)

// Dropout and drop path on the GPU against the CPU twins, bit for bit: the same Philox draws
// (offsets that do not start on a Philox block, several streams and seeds), both modes,
// training and inference, p = 0 and p = 1, f32/f16/bf16 and mixed dtypes.
#include "tests/gpu/gpu_test.h"

#ifdef OCR_HAVE_CUDA

static const ocr_dtype_t DTS[3] = {OCR_F32, OCR_F16, OCR_BF16};

START_TEST(test_dropout) {
    const int64_t n = 3 * 4096 + 37;
    const float ps[4] = {0.0f, 0.1f, 0.5f, 1.0f};
    const uint64_t offsets[3] = {0, 5, 0x100000003ull};
    for (int k = 0; k < 3; k++)
        for (int ip = 0; ip < 4; ip++)
            for (int mode = 0; mode < 2; mode++)
                for (int training = 0; training < 2; training++)
                    for (int io = 0; io < 3; io++) {
                        DropoutParams d = {ps[ip], (ocr_dropout_mode_t)mode, training, 0xfeedull + (uint64_t)io,
                                           (uint64_t)(7 + k), offsets[io]};
                        char what[128];
                        snprintf(what, sizeof what, "dropout %s p %g mode %d train %d offset %llu", dtn(DTS[k]),
                                 (double)ps[ip], mode, training, (unsigned long long)offsets[io]);
                        Twin x = twin_uniform(DTS[k], 2, OCR_SHAPE(3, n / 3 + 1), -2, 2);
                        Twin y = twin_new(DTS[(k + io) % 3], 2, OCR_SHAPE(3, n / 3 + 1));
                        ocr_dropout_forward(&y.h, &x.h, d);
                        ocr_dropout_forward(&y.d, &x.d, d);
                        ck_assert_msg(twin_bits(&y, what), "%s forward", what);
                        twin_poison(&y);
                        ocr_dropout_backward(&y.h, &x.h, d);
                        ocr_dropout_backward(&y.d, &x.d, d);
                        ck_assert_msg(twin_bits(&y, what), "%s backward", what);
                        twin_free(&x), twin_free(&y);
                    }
}
END_TEST

START_TEST(test_droppath) {
    const int64_t N = 67, T = 12, C = 10;
    const float ps[3] = {0.0f, 0.25f, 1.0f};
    for (int k = 0; k < 3; k++)
        for (int ip = 0; ip < 3; ip++)
            for (int training = 0; training < 2; training++) {
                DropoutParams d = {ps[ip], OCR_DROPOUT_UPSCALE_IN_TRAIN, training, 99, 3, 11};
                char what[96];
                snprintf(what, sizeof what, "droppath %s p %g train %d", dtn(DTS[k]), (double)ps[ip], training);
                Twin x = twin_uniform(DTS[k], 3, OCR_SHAPE(N, T, C), -2, 2);
                ocr_tensor_set_f32(&x.h, 5, NAN);  // a dropped sample gives 0 even for NaN
                ocr_tensor_set_f32(&x.h, T * C + 7, INFINITY);
                twin_sync_up(&x);
                Twin y = twin_new(DTS[k], 3, OCR_SHAPE(N, T, C));
                ocr_droppath_forward(&y.h, &x.h, d);
                ocr_droppath_forward(&y.d, &x.d, d);
                ck_assert_msg(twin_bits(&y, what), "%s forward", what);
                twin_poison(&y);
                ocr_droppath_backward(&y.h, &x.h, d);
                ocr_droppath_backward(&y.d, &x.d, d);
                ck_assert_msg(twin_bits(&y, what), "%s backward", what);
                twin_free(&x), twin_free(&y);
            }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("gpu_dropout");
    TCase *tc = tcase_create("dropout");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_dropout);
    tcase_add_test(tc, test_droppath);
    suite_add_tcase(s, tc);
    return s;
}

#endif

GPU_TEST_MAIN("gpu_dropout", suite)

// The LSTM cell step on the GPU against the CPU twin: forward (h, c) and backward (dgates,
// dc_prev), with and without c_prev and dc, every dtype, widths below and above a block (SAR's
// hidden size 512). Both compute in fp32 with the same expressions; expf/tanhf of the GPU and of
// glibc differ by an ulp or two, which the next products carry: a few f32 ulps relative, plus
// one unit of the storage dtype (twin_close).
#include "tests/gpu/gpu_test.h"

#ifdef OCR_HAVE_CUDA

#define LSTM_RTOL 1e-6
#define LSTM_ATOL 1e-6

static const ocr_dtype_t DTS[3] = {OCR_F32, OCR_F16, OCR_BF16};

static void lstm_case(int64_t B, int64_t H, ocr_dtype_t dt, int with_cp, int with_dc) {
    char what[128];
    snprintf(what, sizeof what, "lstm B %lld H %lld %s c_prev %d dc %d", (long long)B, (long long)H, dtn(dt), with_cp,
             with_dc);
    Twin a = twin_uniform(dt, 2, OCR_SHAPE(B, 4 * H), -4, 4);
    Twin cp = twin_uniform(dt, 2, OCR_SHAPE(B, H), -2, 2);
    Twin h = twin_new(dt, 2, OCR_SHAPE(B, H)), c = twin_new(OCR_F32, 2, OCR_SHAPE(B, H));
    ocr_lstm_cell_forward(&h.h, &c.h, &a.h, with_cp ? &cp.h : NULL);
    ocr_lstm_cell_forward(&h.d, &c.d, &a.d, with_cp ? &cp.d : NULL);
    ck_assert_msg(twin_close(&h, LSTM_RTOL, LSTM_ATOL, what), "%s: h", what);
    ck_assert_msg(twin_close(&c, LSTM_RTOL, LSTM_ATOL, what), "%s: c", what);
    Twin dh = twin_uniform(dt, 2, OCR_SHAPE(B, H), -1, 1), dc = twin_uniform(OCR_F32, 2, OCR_SHAPE(B, H), -1, 1);
    Twin da = twin_new(dt, 2, OCR_SHAPE(B, 4 * H)), dcp = twin_new(OCR_F32, 2, OCR_SHAPE(B, H));
    ocr_lstm_cell_backward(&da.h, &dcp.h, &dh.h, with_dc ? &dc.h : NULL, &a.h, with_cp ? &cp.h : NULL);
    ocr_lstm_cell_backward(&da.d, &dcp.d, &dh.d, with_dc ? &dc.d : NULL, &a.d, with_cp ? &cp.d : NULL);
    ck_assert_msg(twin_close(&da, LSTM_RTOL, LSTM_ATOL, what), "%s: dgates", what);
    ck_assert_msg(twin_close(&dcp, LSTM_RTOL, LSTM_ATOL, what), "%s: dc_prev", what);
    twin_free(&a), twin_free(&cp), twin_free(&h), twin_free(&c);
    twin_free(&dh), twin_free(&dc), twin_free(&da), twin_free(&dcp);
}

START_TEST(test_lstm) {
    for (int k = 0; k < 3; k++)
        for (int v = 0; v < 4; v++) {
            lstm_case(3, 5, DTS[k], v & 1, v >> 1);
            lstm_case(16, 512, DTS[k], v & 1, v >> 1);
        }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("gpu_lstm");
    TCase *tc = tcase_create("lstm");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_lstm);
    suite_add_tcase(s, tc);
    return s;
}

#endif

GPU_TEST_MAIN("gpu_lstm", suite)

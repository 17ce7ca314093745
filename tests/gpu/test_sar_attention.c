// SAR's 2-D attention score and the LSTM layer on the GPU against the CPU: the score forward
// (masked columns −inf on both), its backward (dkey, dquery assigned; dw, dbias accumulated onto
// a start value), every key/query dtype, a small shape and SAR's (26 steps over 40 positions,
// d_k 512); the LSTM layer (composed of gemm, batch_broadcast_add and lstm_cell, which run on the
// device) forward and BPTT at SAR's widths. Bounds: fp32 on both sides with the same sums in the
// same order for the score ops (tanhf differs by an ulp or two; the weight gradient sums in
// double in another grouping): 1e-5 relative; the LSTM layer's GEMMs run in cuBLAS's order, and
// the recurrence carries the differences over the steps: 1e-4 of each tensor's largest value.
#include "tests/gpu/gpu_test.h"

#ifdef OCR_HAVE_CUDA

static const ocr_dtype_t DTS[3] = {OCR_F32, OCR_F16, OCR_BF16};

static void score_case(int64_t B, int64_t T, int64_t H, int64_t W, int64_t D, ocr_dtype_t dt, int masked) {
    char what[128];
    snprintf(what, sizeof what, "sar score B %lld T %lld P %lldx%lld D %lld %s mask %d", (long long)B, (long long)T,
             (long long)H, (long long)W, (long long)D, dtn(dt), masked);
    const int64_t P = H * W;
    Twin k = twin_uniform(dt, 3, OCR_SHAPE(B, P, D), -1.5f, 1.5f), q = twin_uniform(dt, 3, OCR_SHAPE(B, T, D), -1.5f, 1.5f);
    Twin w = twin_uniform(OCR_F32, 1, OCR_SHAPE(D), -1, 1), bias = twin_uniform(OCR_F32, 1, OCR_SHAPE(1), -1, 1);
    int32_t vw[64];
    for (int64_t b = 0; b < B; b++) vw[b] = (int32_t)(W - (b * 7) % W);
    Twin valid = twin_i32(1, OCR_SHAPE(B), vw);
    Twin s = twin_new(OCR_F32, 3, OCR_SHAPE(B, T, P));
    ocr_sar_attention_score_forward(&s.h, &k.h, &q.h, &w.h, &bias.h, masked ? &valid.h : NULL, (int)W);
    ocr_sar_attention_score_forward(&s.d, &k.d, &q.d, &w.d, &bias.d, masked ? &valid.d : NULL, (int)W);
    ck_assert_msg(twin_close(&s, 1e-5, 1e-6, what), "%s: scores", what);
    Twin g = twin_uniform(OCR_F32, 3, OCR_SHAPE(B, T, P), -1, 1);
    Twin dk = twin_new(dt, 3, OCR_SHAPE(B, P, D)), dq = twin_new(dt, 3, OCR_SHAPE(B, T, D));
    Twin dw = twin_uniform(OCR_F32, 1, OCR_SHAPE(D), -0.5f, 0.5f), db = twin_uniform(OCR_F32, 1, OCR_SHAPE(1), -0.5f, 0.5f);
    ocr_sar_attention_score_backward(&dk.h, &dq.h, &dw.h, &db.h, &g.h, &k.h, &q.h, &w.h, masked ? &valid.h : NULL,
                                     (int)W);
    ocr_sar_attention_score_backward(&dk.d, &dq.d, &dw.d, &db.d, &g.d, &k.d, &q.d, &w.d, masked ? &valid.d : NULL,
                                     (int)W);
    ck_assert_msg(twin_close(&dk, 1e-5, 1e-6, what), "%s: dkey", what);
    ck_assert_msg(twin_close(&dq, 1e-5, 1e-6, what), "%s: dquery", what);
    ck_assert_msg(twin_close(&dw, 1e-5, 1e-6, what), "%s: dw", what);
    ck_assert_msg(twin_close(&db, 1e-5, 1e-6, what), "%s: dbias", what);
    twin_free(&k), twin_free(&q), twin_free(&w), twin_free(&bias), twin_free(&valid), twin_free(&s);
    twin_free(&g), twin_free(&dk), twin_free(&dq), twin_free(&dw), twin_free(&db);
}

START_TEST(test_sar_score) {
    for (int k = 0; k < 3; k++)
        for (int masked = 0; masked < 2; masked++) {
            score_case(2, 3, 2, 3, 4, DTS[k], masked);
            score_case(3, 26, 1, 40, 512, DTS[k], masked);
        }
}
END_TEST

static void lstm_layer_case(int64_t T, int64_t B, int64_t I, int64_t H) {
    char what[128];
    snprintf(what, sizeof what, "lstm layer T %lld B %lld I %lld H %lld", (long long)T, (long long)B, (long long)I,
             (long long)H);
    const float a = 1.0f / sqrtf((float)H);
    Twin x = twin_uniform(OCR_F32, 3, OCR_SHAPE(T, B, I), -1, 1);
    Twin wi = twin_uniform(OCR_F32, 2, OCR_SHAPE(4 * H, I), -a, a), wh = twin_uniform(OCR_F32, 2, OCR_SHAPE(4 * H, H), -a, a);
    Twin bi = twin_uniform(OCR_F32, 1, OCR_SHAPE(4 * H), -a, a), bh = twin_uniform(OCR_F32, 1, OCR_SHAPE(4 * H), -a, a);
    Twin y = twin_new(OCR_F32, 3, OCR_SHAPE(T, B, H)), gates = twin_new(OCR_F32, 3, OCR_SHAPE(T, B, 4 * H));
    Twin cells = twin_new(OCR_F32, 3, OCR_SHAPE(T, B, H));
    ocr_lstm_layer_forward(&y.h, &gates.h, &cells.h, &x.h, &wi.h, &wh.h, &bi.h, &bh.h);
    ocr_lstm_layer_forward(&y.d, &gates.d, &cells.d, &x.d, &wi.d, &wh.d, &bi.d, &bh.d);
    ck_assert_msg(twin_close(&y, 1e-4, 1e-4, what), "%s: y", what);
    ck_assert_msg(twin_close(&cells, 1e-4, 1e-4, what), "%s: cells", what);
    Twin dy = twin_uniform(OCR_F32, 3, OCR_SHAPE(T, B, H), -1, 1), dx = twin_new(OCR_F32, 3, OCR_SHAPE(T, B, I));
    Twin dwi = twin_uniform(OCR_F32, 2, OCR_SHAPE(4 * H, I), -0.1f, 0.1f);
    Twin dwh = twin_uniform(OCR_F32, 2, OCR_SHAPE(4 * H, H), -0.1f, 0.1f);
    Twin dbi = twin_uniform(OCR_F32, 1, OCR_SHAPE(4 * H), -0.1f, 0.1f), dbh = twin_uniform(OCR_F32, 1, OCR_SHAPE(4 * H), -0.1f, 0.1f);
    Twin dg = twin_new(OCR_F32, 3, OCR_SHAPE(T, B, 4 * H)), st = twin_new(OCR_F32, 3, OCR_SHAPE(3, B, H));
    // Both sides start from the CPU's forward state, so only the backward's differences count.
    twin_sync_up(&y), twin_sync_up(&gates), twin_sync_up(&cells);
    ocr_lstm_layer_backward(&dx.h, &dwi.h, &dwh.h, &dbi.h, &dbh.h, &dg.h, &st.h, &dy.h, &x.h, &y.h, &gates.h, &cells.h,
                            &wi.h, &wh.h);
    ocr_lstm_layer_backward(&dx.d, &dwi.d, &dwh.d, &dbi.d, &dbh.d, &dg.d, &st.d, &dy.d, &x.d, &y.d, &gates.d, &cells.d,
                            &wi.d, &wh.d);
    ck_assert_msg(twin_close(&dx, 1e-4, 1e-4, what), "%s: dx", what);
    ck_assert_msg(twin_close(&dwi, 1e-4, 1e-4, what), "%s: dw_ih", what);
    ck_assert_msg(twin_close(&dwh, 1e-4, 1e-4, what), "%s: dw_hh", what);
    ck_assert_msg(twin_close(&dbi, 1e-4, 1e-4, what), "%s: db_ih", what);
    ck_assert_msg(twin_close(&dbh, 1e-4, 1e-4, what), "%s: db_hh", what);
    twin_free(&x), twin_free(&wi), twin_free(&wh), twin_free(&bi), twin_free(&bh), twin_free(&y), twin_free(&gates);
    twin_free(&cells), twin_free(&dy), twin_free(&dx), twin_free(&dwi), twin_free(&dwh), twin_free(&dbi);
    twin_free(&dbh), twin_free(&dg), twin_free(&st);
}

START_TEST(test_lstm_layer) {
    lstm_layer_case(4, 3, 5, 6);
    lstm_layer_case(40, 8, 512, 512);  // SAR's encoder layer 0
    lstm_layer_case(26, 8, 512, 512);  // SAR's decoder
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("gpu_sar_attention");
    TCase *tc = tcase_create("sar_attention");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_sar_score);
    tcase_add_test(tc, test_lstm_layer);
    suite_add_tcase(s, tc);
    return s;
}

#endif

GPU_TEST_MAIN("gpu_sar_attention", suite)

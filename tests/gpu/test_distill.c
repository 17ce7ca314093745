// The distillation losses on the GPU against the CPU twin (kernels/cuda/distill.cu vs
// kernels/cpu/distill.c): DML (use_log and KLJSLoss), KL with and without the pad mask and a
// temperature, the CTC-logit KL (PP-OCRv4's T 0.5, blank 0), DKD (all rows and masked) and the
// three distances; logits in every dtype, rows below and far above a warp (PP-OCRv4 ch's 6625
// CTC classes, 40 steps), a loss scale, and every row masked.
// Both sides load fp32 and compute the same double expressions (kernels/distill_math.h); only the
// summation order differs (warp trees and a block tree vs sequential), so the f32 losses agree to
// a few f32 ulps and the gradients, rounded once into their dtype, to one unit of that dtype.
#include "tests/gpu/gpu_test.h"

#ifdef OCR_HAVE_CUDA

static const ocr_dtype_t DTS[3] = {OCR_F32, OCR_F16, OCR_BF16};

// Row targets in [0, C) with every third row set to pad (when pad >= 0), or all pad.
static Twin targets_twin(int64_t rows, int64_t C, int pad, int all_pad) {
    int32_t *t = malloc((size_t)rows * sizeof *t);
    float *u = malloc((size_t)rows * sizeof *u);
    ocr_test_fill_uniform(u, rows, gpu_next_seed(), 0.0f, (float)C);
    for (int64_t i = 0; i < rows; i++) t[i] = (int32_t)u[i] < C ? (int32_t)u[i] : (int32_t)C - 1;
    if (pad >= 0)
        for (int64_t i = 0; i < rows; i += 3) t[i] = pad;
    if (all_pad)
        for (int64_t i = 0; i < rows; i++) t[i] = pad;
    Twin tw = twin_i32(1, OCR_SHAPE(rows), t);
    free(t);
    free(u);
    return tw;
}

static void dml_case(int64_t B, int64_t T, int64_t C, int use_log, float scale, ocr_dtype_t dt) {
    char what[128];
    snprintf(what, sizeof what, "dml (%lld, %lld, %lld) use_log %d scale %g %s", (long long)B, (long long)T,
             (long long)C, use_log, (double)scale, dtn(dt));
    Twin a = twin_uniform(dt, 3, OCR_SHAPE(B, T, C), -6, 6), b = twin_uniform(dt, 3, OCR_SHAPE(B, T, C), -6, 6);
    Twin loss = twin_new(OCR_F32, 1, OCR_SHAPE(use_log ? 1 : B));
    Twin da = twin_new(dt, 3, OCR_SHAPE(B, T, C)), db = twin_new(dt, 3, OCR_SHAPE(B, T, C));
    DmlLossParams p = {use_log, scale};
    ocr_dml_loss_forward(&loss.h, &a.h, &b.h, p);
    ocr_dml_loss_forward(&loss.d, &a.d, &b.d, p);
    ck_assert_msg(twin_close(&loss, 4e-7, 1e-7, what), "%s: loss", what);
    ocr_dml_loss_backward(&da.h, &db.h, &a.h, &b.h, p);
    ocr_dml_loss_backward(&da.d, &db.d, &a.d, &b.d, p);
    ck_assert_msg(twin_close(&da, 1e-6, 1e-7, what), "%s: dx1", what);
    ck_assert_msg(twin_close(&db, 1e-6, 1e-7, what), "%s: dx2", what);
    twin_free(&a), twin_free(&b), twin_free(&loss), twin_free(&da), twin_free(&db);
}

// kind 0: KL, 1: DKD
static void kl_dkd_case(int kind, int64_t B, int64_t L, int64_t C, float T, int pad, int all_pad, float scale,
                        ocr_dtype_t dt) {
    char what[160];
    snprintf(what, sizeof what, "%s (%lld, %lld, %lld) T %g pad %d%s scale %g %s", kind ? "dkd" : "kl", (long long)B,
             (long long)L, (long long)C, (double)T, pad, all_pad ? " all" : "", (double)scale, dtn(dt));
    Twin s = twin_uniform(dt, 3, OCR_SHAPE(B, L, C), -6, 6), t = twin_uniform(dt, 3, OCR_SHAPE(B, L, C), -6, 6);
    Twin tg = targets_twin(B * L, C, pad, all_pad);
    Twin loss = twin_new(OCR_F32, 1, OCR_SHAPE(1)), ds = twin_new(dt, 3, OCR_SHAPE(B, L, C));
    if (kind == 0) {
        KlDivLossParams p = {T, pad, scale};
        ocr_kl_div_loss_forward(&loss.h, &s.h, &t.h, &tg.h, p);
        ocr_kl_div_loss_forward(&loss.d, &s.d, &t.d, &tg.d, p);
        ocr_kl_div_loss_backward(&ds.h, &s.h, &t.h, &tg.h, p);
        ocr_kl_div_loss_backward(&ds.d, &s.d, &t.d, &tg.d, p);
    } else {
        DkdLossParams p = {T, 1.0f, 2.0f, pad, scale};
        ocr_dkd_loss_forward(&loss.h, &s.h, &t.h, &tg.h, p);
        ocr_dkd_loss_forward(&loss.d, &s.d, &t.d, &tg.d, p);
        ocr_dkd_loss_backward(&ds.h, &s.h, &t.h, &tg.h, p);
        ocr_dkd_loss_backward(&ds.d, &s.d, &t.d, &tg.d, p);
    }
    ck_assert_msg(twin_close(&loss, 4e-7, 1e-7, what), "%s: loss", what);
    ck_assert_msg(twin_close(&ds, 1e-6, 1e-7, what), "%s: gradient", what);
    twin_free(&s), twin_free(&t), twin_free(&tg), twin_free(&loss), twin_free(&ds);
}

static void ctc_case(int64_t B, int64_t L, int64_t C, float T, int blank, ocr_dtype_t dt) {
    char what[128];
    snprintf(what, sizeof what, "ctc_logits_kl (%lld, %lld, %lld) T %g blank %d %s", (long long)B, (long long)L,
             (long long)C, (double)T, blank, dtn(dt));
    Twin s = twin_uniform(dt, 3, OCR_SHAPE(B, L, C), -8, 8), t = twin_uniform(dt, 3, OCR_SHAPE(B, L, C), -8, 8);
    Twin loss = twin_new(OCR_F32, 1, OCR_SHAPE(1)), ds = twin_new(dt, 3, OCR_SHAPE(B, L, C));
    CtcLogitsKlParams p = {T, blank, 1.0f};
    ocr_ctc_logits_kl_forward(&loss.h, &s.h, &t.h, p);
    ocr_ctc_logits_kl_forward(&loss.d, &s.d, &t.d, p);
    ck_assert_msg(twin_close(&loss, 4e-7, 1e-7, what), "%s: loss", what);
    ocr_ctc_logits_kl_backward(&ds.h, &s.h, &t.h, p);
    ocr_ctc_logits_kl_backward(&ds.d, &s.d, &t.d, p);
    ck_assert_msg(twin_close(&ds, 1e-6, 1e-7, what), "%s: gradient", what);
    twin_free(&s), twin_free(&t), twin_free(&loss), twin_free(&ds);
}

static void distance_case(int64_t n, ocr_distance_mode_t mode, ocr_dtype_t dt) {
    char what[96];
    snprintf(what, sizeof what, "distance %lld mode %d %s", (long long)n, (int)mode, dtn(dt));
    Twin x = twin_uniform(dt, 2, OCR_SHAPE(n / 8, 8), -2, 2), y = twin_uniform(dt, 2, OCR_SHAPE(n / 8, 8), -2, 2);
    Twin loss = twin_new(OCR_F32, 1, OCR_SHAPE(1));
    Twin dx = twin_new(dt, 2, OCR_SHAPE(n / 8, 8)), dy = twin_new(dt, 2, OCR_SHAPE(n / 8, 8));
    DistanceLossParams p = {mode, 1.0f, 1.0f};
    ocr_distance_loss_forward(&loss.h, &x.h, &y.h, p);
    ocr_distance_loss_forward(&loss.d, &x.d, &y.d, p);
    ck_assert_msg(twin_close(&loss, 4e-7, 1e-7, what), "%s: loss", what);
    ocr_distance_loss_backward(&dx.h, &dy.h, &x.h, &y.h, p);
    ocr_distance_loss_backward(&dx.d, &dy.d, &x.d, &y.d, p);
    // elementwise: the same double expression rounded once on both sides
    ck_assert_msg(twin_bits(&dx, what), "%s: dx", what);
    ck_assert_msg(twin_bits(&dy, what), "%s: dy", what);
    twin_free(&x), twin_free(&y), twin_free(&loss), twin_free(&dx), twin_free(&dy);
}

START_TEST(test_distill) {
    for (int k = 0; k < 3; k++) {
        const ocr_dtype_t dt = DTS[k];
        dml_case(3, 7, 11, 1, 1.0f, dt);
        dml_case(4, 40, 6625, 1, 1024.0f, dt);  // PP-OCRv3's CTC head (ch)
        dml_case(2, 26, 97, 1, 1.0f, dt);       // its SAR head (en)
        dml_case(3, 5, 40, 0, 2.0f, dt);
        kl_dkd_case(0, 3, 9, 33, 1.0f, -1, 0, 1.0f, dt);
        kl_dkd_case(0, 2, 26, 6627, 2.0f, 0, 0, 512.0f, dt);
        kl_dkd_case(0, 2, 5, 12, 1.0f, 0, 1, 1.0f, dt);
        kl_dkd_case(1, 3, 26, 6627, 1.0f, -1, 0, 1.0f, dt);  // PP-OCRv4's NRTR head (ch)
        kl_dkd_case(1, 4, 9, 37, 2.0f, 0, 0, 64.0f, dt);
        kl_dkd_case(1, 2, 5, 12, 1.0f, 0, 1, 1.0f, dt);
        ctc_case(4, 40, 6625, 0.5f, 0, dt);  // PP-OCRv4's CTC head
        ctc_case(3, 7, 19, 1.5f, -1, dt);
        for (int m = 0; m < 3; m++) {
            distance_case(40, (ocr_distance_mode_t)m, dt);
            distance_case(4 * 512 * 40, (ocr_distance_mode_t)m, dt);  // PP-OCRv3's backbone_out
        }
    }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("gpu_distill");
    TCase *tc = tcase_create("distill");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_distill);
    suite_add_tcase(s, tc);
    return s;
}

#endif

GPU_TEST_MAIN("gpu_distill", suite)

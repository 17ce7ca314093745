// kernels/cuda/affine.cu and the padded input normalisation against the CPU twins, bit for bit:
// scalar_affine (each element one rounded multiply and add; the scalar gradients in the
// documented fixed reduction shape, in double, on both sides), the fused affine → activation →
// affine (within the activations' tolerances), batch_broadcast_add (the
// batch summed in order in double), the local attention mask, and input_normalize_padded
// (exact zeros past each sample's width).
#include "kernels/input.h"
#include "tests/gpu/gpu_test.h"

#ifdef OCR_HAVE_CUDA

static const ocr_dtype_t DTS[3] = {OCR_F32, OCR_F16, OCR_BF16};

START_TEST(test_scalar_affine) {
    // Sizes: one partial chunk, many chunks plus a tail.
    const int64_t sizes[2] = {1000, 2048 * 41 + 77};
    for (int z = 0; z < 2; z++)
        for (int k = 0; k < 3; k++) {
            const int64_t n = sizes[z];
            char what[64];
            snprintf(what, sizeof what, "%s, n %lld", dtn(DTS[k]), (long long)n);
            Twin x = twin_uniform(DTS[k], 1, OCR_SHAPE(n), -3, 3), dy = twin_uniform(DTS[k], 1, OCR_SHAPE(n), -1, 1);
            Twin s = twin_uniform(OCR_F32, 1, OCR_SHAPE(1), 0.5f, 1.5f), b = twin_uniform(OCR_F32, 1, OCR_SHAPE(1), -1, 1);
            Twin y = twin_new(DTS[k], 1, OCR_SHAPE(n)), dx = twin_new(DTS[k], 1, OCR_SHAPE(n));
            Twin ds = twin_uniform(OCR_F32, 1, OCR_SHAPE(1), -1, 1), db = twin_uniform(OCR_F32, 1, OCR_SHAPE(1), -1, 1);
            ocr_scalar_affine_forward(&y.h, &x.h, &s.h, &b.h);
            ocr_scalar_affine_forward(&y.d, &x.d, &s.d, &b.d);
            ck_assert_msg(twin_bits(&y, "scalar_affine forward"), "%s", what);
            for (int call = 0; call < 2; call++) {  // the scalars accumulate
                ocr_scalar_affine_backward(&dx.h, &ds.h, &db.h, &dy.h, &x.h, &s.h);
                ocr_scalar_affine_backward(&dx.d, &ds.d, &db.d, &dy.d, &x.d, &s.d);
                ck_assert_msg(twin_bits(&dx, "scalar_affine dinp"), "%s", what);
                ck_assert_msg(twin_bits(&ds, "scalar_affine dscale"), "%s call %d", what, call);
                ck_assert_msg(twin_bits(&db, "scalar_affine dbias"), "%s call %d", what, call);
            }
            // One gradient at a time.
            ocr_scalar_affine_backward(NULL, NULL, &db.h, &dy.h, NULL, NULL);
            ocr_scalar_affine_backward(NULL, NULL, &db.d, &dy.d, NULL, NULL);
            ck_assert_msg(twin_bits(&db, "scalar_affine dbias alone"), "%s", what);
            ck_assert_msg(twin_bits(&ds, "scalar_affine dscale untouched"), "%s", what);
            twin_free(&x), twin_free(&dy), twin_free(&s), twin_free(&b), twin_free(&y), twin_free(&dx), twin_free(&ds),
                twin_free(&db);
        }
}
END_TEST

START_TEST(test_affine_act_affine) {
    // The fused LAB → activation → LAB tail. The activations' device formulas may contract into
    // FMAs where the CPU's do not (kernels/activation_math.h), so the values are compared
    // within the activation suite's fp32 tolerances, widened for an f16/bf16 intermediate to a
    // few units of its rounding (one fp32 ulp apart, an intermediate can round to the
    // neighbouring f16/bf16 value, which the next op then scales); the reduction shape of the
    // four scalar sums is the CPU's.
    const int64_t sizes[2] = {1000, 2048 * 41 + 77};
    for (int z = 0; z < 2; z++)
        for (int k = 0; k < 3; k++)
            for (int act = 0; act < OCR_ACT_COUNT; act++) {
                const int64_t n = sizes[z];
                const ocr_dtype_t dt = DTS[k];
                const double eps = dt == OCR_F32 ? 0.0 : dt == OCR_F16 ? 1.0 / 1024 : 1.0 / 128;
                const double rtol = 2e-6 + 4 * eps, atol = 1e-7 + 4 * eps;
                char what[64];
                snprintf(what, sizeof what, "%s, n %lld, act %d", dtn(dt), (long long)n, act);
                Twin x = twin_uniform(dt, 1, OCR_SHAPE(n), -5, 5), dy = twin_uniform(dt, 1, OCR_SHAPE(n), -1, 1);
                Twin s1 = twin_uniform(OCR_F32, 1, OCR_SHAPE(1), 0.5f, 1.5f), b1 = twin_uniform(OCR_F32, 1, OCR_SHAPE(1), -1, 1);
                Twin s2 = twin_uniform(OCR_F32, 1, OCR_SHAPE(1), 0.5f, 1.5f), b2 = twin_uniform(OCR_F32, 1, OCR_SHAPE(1), -1, 1);
                Twin y = twin_new(dt, 1, OCR_SHAPE(n)), dx = twin_new(dt, 1, OCR_SHAPE(n));
                Twin g[4];
                for (int j = 0; j < 4; j++) g[j] = twin_uniform(OCR_F32, 1, OCR_SHAPE(1), -1, 1);
                ocr_affine_act_affine_forward(&y.h, &x.h, &s1.h, &b1.h, (ocr_activation_t)act, &s2.h, &b2.h);
                ocr_affine_act_affine_forward(&y.d, &x.d, &s1.d, &b1.d, (ocr_activation_t)act, &s2.d, &b2.d);
                ck_assert_msg(twin_close(&y, rtol, atol, "affine_act_affine forward"), "%s", what);
                ocr_affine_act_affine_backward(&dx.h, &g[0].h, &g[1].h, &g[2].h, &g[3].h, &dy.h, &x.h, &s1.h, &b1.h,
                                               (ocr_activation_t)act, &s2.h, dt);
                ocr_affine_act_affine_backward(&dx.d, &g[0].d, &g[1].d, &g[2].d, &g[3].d, &dy.d, &x.d, &s1.d, &b1.d,
                                               (ocr_activation_t)act, &s2.d, dt);
                ck_assert_msg(twin_close(&dx, rtol, atol, "affine_act_affine dinp"), "%s", what);
                for (int j = 0; j < 4; j++) ck_assert_msg(twin_close(&g[j], rtol, atol, "affine_act_affine scalar"), "%s, %d", what, j);
                // dinp alone, in place over dout; the scalars untouched.
                ocr_affine_act_affine_backward(&dy.h, NULL, NULL, NULL, NULL, &dy.h, &x.h, &s1.h, &b1.h,
                                               (ocr_activation_t)act, &s2.h, dt);
                ocr_affine_act_affine_backward(&dy.d, NULL, NULL, NULL, NULL, &dy.d, &x.d, &s1.d, &b1.d,
                                               (ocr_activation_t)act, &s2.d, dt);
                ck_assert_msg(twin_close(&dy, rtol, atol, "affine_act_affine dinp in place"), "%s", what);
                twin_free(&x), twin_free(&dy), twin_free(&s1), twin_free(&b1), twin_free(&s2), twin_free(&b2);
                twin_free(&y), twin_free(&dx);
                for (int j = 0; j < 4; j++) twin_free(&g[j]);
            }
}
END_TEST

START_TEST(test_batch_broadcast_add) {
    const int64_t B = 5, T = 64, C = 96;
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 3; j++) {
            char what[64];
            snprintf(what, sizeof what, "%s + %s", dtn(DTS[k]), dtn(DTS[j]));
            Twin x = twin_uniform(DTS[k], 3, OCR_SHAPE(B, T, C), -2, 2), pos = twin_uniform(DTS[j], 3, OCR_SHAPE(1, T, C), -1, 1);
            Twin y = twin_new(DTS[k], 3, OCR_SHAPE(B, T, C));
            ocr_batch_broadcast_add_forward(&y.h, &x.h, &pos.h);
            ocr_batch_broadcast_add_forward(&y.d, &x.d, &pos.d);
            ck_assert_msg(twin_bits(&y, "batch_broadcast_add forward"), "%s", what);
            Twin dy = twin_uniform(DTS[k], 3, OCR_SHAPE(B, T, C), -1, 1), dx = twin_new(DTS[k], 3, OCR_SHAPE(B, T, C));
            Twin dpos = twin_uniform(DTS[j], 3, OCR_SHAPE(1, T, C), -1, 1);
            ocr_batch_broadcast_add_backward(&dx.h, &dpos.h, &dy.h);
            ocr_batch_broadcast_add_backward(&dx.d, &dpos.d, &dy.d);
            ck_assert_msg(twin_bits(&dx, "batch_broadcast_add dinp"), "%s", what);
            ck_assert_msg(twin_bits(&dpos, "batch_broadcast_add dpos"), "%s", what);
            ocr_batch_broadcast_add_backward(NULL, &dpos.h, &dy.h);
            ocr_batch_broadcast_add_backward(NULL, &dpos.d, &dy.d);
            ck_assert_msg(twin_bits(&dpos, "batch_broadcast_add dpos again"), "%s", what);
            twin_free(&x), twin_free(&pos), twin_free(&y), twin_free(&dy), twin_free(&dx), twin_free(&dpos);
        }
}
END_TEST

START_TEST(test_local_mask) {
    const int cases[3][4] = {{3, 80, 7, 11}, {1, 25, 7, 11}, {4, 6, 3, 5}};
    for (int c = 0; c < 3; c++) {
        const int64_t T = (int64_t)cases[c][0] * cases[c][1];
        Twin m = twin_new(OCR_F32, 2, OCR_SHAPE(T, T));
        ocr_attention_local_mask(&m.h, cases[c][0], cases[c][1], cases[c][2], cases[c][3]);
        ocr_attention_local_mask(&m.d, cases[c][0], cases[c][1], cases[c][2], cases[c][3]);
        ck_assert_msg(twin_bits(&m, "attention_local_mask"), "case %d", c);
        twin_free(&m);
    }
}
END_TEST

START_TEST(test_input_normalize_padded) {
    const int64_t N = 4, H = 8, W = 50, C = 3;
    Twin p = twin_new(OCR_U8, 4, OCR_SHAPE(N, H, W, C));
    uint8_t *v = p.h.data;
    for (int64_t i = 0; i < N * H * W * C; i++) v[i] = (uint8_t)((i * 37 + 11) & 255);
    twin_sync_up(&p);
    const int32_t widths[4] = {50, 13, 0, 999};
    Twin w = twin_i32(1, OCR_SHAPE(N), widths);
    for (int k = 0; k < 3; k++) {
        Twin y = twin_new(DTS[k], 4, OCR_SHAPE(N, H, W, C));
        ocr_input_normalize_padded_forward(&y.h, &p.h, &w.h);
        ocr_input_normalize_padded_forward(&y.d, &p.d, &w.d);
        ck_assert_msg(twin_bits(&y, "input_normalize_padded"), "%s", dtn(DTS[k]));
        ocr_input_normalize_padded_forward(&y.h, &p.h, NULL);
        ocr_input_normalize_padded_forward(&y.d, &p.d, NULL);
        ck_assert_msg(twin_bits(&y, "input_normalize_padded without widths"), "%s", dtn(DTS[k]));
        twin_free(&y);
    }
    twin_free(&p), twin_free(&w);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("gpu_affine");
    TCase *tc = tcase_create("affine");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_scalar_affine);
    tcase_add_test(tc, test_affine_act_affine);
    tcase_add_test(tc, test_batch_broadcast_add);
    tcase_add_test(tc, test_local_mask);
    tcase_add_test(tc, test_input_normalize_padded);
    suite_add_tcase(s, tc);
    return s;
}

#endif

GPU_TEST_MAIN("gpu_affine", suite)

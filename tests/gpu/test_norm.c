// Batch norm and layer norm on the GPU against the CPU twins: training, inference and frozen, the
// saved and running statistics, NULL gamma/beta/outputs, accumulation into dgamma/dbeta,
// f32/f16/bf16 storage, a large mean (the two-pass variance), and bitwise-repeatable runs.
#include "tests/gpu/gpu_test.h"

#ifdef OCR_HAVE_CUDA

#define NORM_TOL 1e-5

static const ocr_dtype_t DTS[3] = {OCR_F32, OCR_F16, OCR_BF16};

static void bn_case(int64_t N, int64_t H, int64_t W, int64_t C, ocr_dtype_t dt, int training, int affine, float mean,
                    float spread, int backward) {
    char what[128];
    snprintf(what, sizeof what, "batchnorm %lldx%lldx%lldx%lld %s train %d affine %d mean %g", (long long)N,
             (long long)H, (long long)W, (long long)C, dtn(dt), training, affine, (double)mean);
    Twin x = twin_uniform(dt, 4, OCR_SHAPE(N, H, W, C), mean - spread, mean + spread);
    Twin g = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), 0.5f, 1.5f);
    Twin b = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), -0.5f, 0.5f);
    Twin rm = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), mean - 0.1f, mean + 0.1f);
    Twin rv = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), 0.5f, 2.0f);
    Twin sm = twin_new(OCR_F32, 1, OCR_SHAPE(C)), sr = twin_new(OCR_F32, 1, OCR_SHAPE(C));
    Twin y = twin_new(dt, 4, OCR_SHAPE(N, H, W, C));
    ocr_batchnorm2d_forward(&y.h, &sm.h, &sr.h, &rm.h, &rv.h, &x.h, affine ? &g.h : NULL, affine ? &b.h : NULL, 0.9f,
                            1e-5f, training);
    ocr_batchnorm2d_forward(&y.d, &sm.d, &sr.d, &rm.d, &rv.d, &x.d, affine ? &g.d : NULL, affine ? &b.d : NULL, 0.9f,
                            1e-5f, training);
    ck_assert_msg(twin_close(&y, NORM_TOL, NORM_TOL, what), "%s: out", what);
    ck_assert_msg(twin_close(&sm, 1e-6, 1e-6, what), "%s: save_mean", what);
    ck_assert_msg(twin_close(&sr, NORM_TOL, 0, what), "%s: save_rstd", what);
    ck_assert_msg(twin_close(&rm, 1e-6, 1e-6, what), "%s: running_mean", what);
    ck_assert_msg(twin_close(&rv, NORM_TOL, 0, what), "%s: running_var", what);
    if (!backward) {
        twin_free(&x), twin_free(&g), twin_free(&b), twin_free(&rm), twin_free(&rv), twin_free(&sm), twin_free(&sr);
        twin_free(&y);
        return;
    }

    Twin dy = twin_uniform(dt, 4, OCR_SHAPE(N, H, W, C), -1, 1);
    Twin dx = twin_new(dt, 4, OCR_SHAPE(N, H, W, C));
    Twin dg = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), -1, 1), db = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), -1, 1);
    ocr_batchnorm2d_backward(&dx.h, affine ? &dg.h : NULL, affine ? &db.h : NULL, &dy.h, &x.h, affine ? &g.h : NULL,
                             &sm.h, &sr.h, training);
    ocr_batchnorm2d_backward(&dx.d, affine ? &dg.d : NULL, affine ? &db.d : NULL, &dy.d, &x.d, affine ? &g.d : NULL,
                             &sm.d, &sr.d, training);
    // dinp through the batch statistics subtracts nearly equal terms: scale-relative tolerance.
    ck_assert_msg(twin_close(&dx, NORM_TOL, 1e-4, what), "%s: dinp", what);
    ck_assert_msg(twin_close(&dg, NORM_TOL, NORM_TOL, what), "%s: dgamma", what);
    ck_assert_msg(twin_close(&db, NORM_TOL, NORM_TOL, what), "%s: dbeta", what);
    twin_free(&x), twin_free(&g), twin_free(&b), twin_free(&rm), twin_free(&rv), twin_free(&sm), twin_free(&sr);
    twin_free(&y), twin_free(&dy), twin_free(&dx), twin_free(&dg), twin_free(&db);
}

START_TEST(test_batchnorm) {
    for (int k = 0; k < 3; k++)
        for (int training = 0; training < 2; training++)
            for (int affine = 0; affine < 2; affine++) bn_case(3, 7, 11, 24, DTS[k], training, affine, 0.3f, 2.0f, 1);
    // Many rows (several chunks of the column reduction), odd channel count.
    bn_case(8, 24, 40, 37, OCR_F32, 1, 1, -0.5f, 1.0f, 1);
    // |mean| >> std: a one-pass variance would cancel.
    bn_case(4, 6, 30, 16, OCR_F32, 1, 1, 1000.0f, 1.0f, 1);
    // One row: the batch variance is 0 (the backward is all cancellation there: not compared).
    bn_case(1, 1, 1, 8, OCR_F32, 1, 1, 0.0f, 1.0f, 0);
}
END_TEST

// Frozen BN (Global.freeze_norm): a training step moves the running statistics, then training
// passes run the inference mode on them. On the device the frozen passes leave the statistics
// bit for bit as they were, equal an eval pass bit for bit, and follow the CPU twin (forward and
// the backward through constant statistics, dgamma/dbeta accumulating) in f32, f16 and bf16.
START_TEST(test_batchnorm_frozen_sequence) {
    const int64_t N = 2, H = 3, W = 9, C = 20;
    for (int k = 0; k < 3; k++) {
        ocr_dtype_t dt = DTS[k];
        char what[96];
        snprintf(what, sizeof what, "frozen bn %s", dtn(dt));
        Twin x0 = twin_uniform(dt, 4, OCR_SHAPE(N, H, W, C), -1.0f, 2.0f);
        Twin x = twin_uniform(dt, 4, OCR_SHAPE(N, H, W, C), -1.5f, 2.5f);
        Twin g = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), 0.5f, 1.5f), b = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), -0.5f, 0.5f);
        Twin rm = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), -0.1f, 0.1f), rv = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), 0.5f, 2.0f);
        Twin sm = twin_new(OCR_F32, 1, OCR_SHAPE(C)), sr = twin_new(OCR_F32, 1, OCR_SHAPE(C));
        Twin y = twin_new(dt, 4, OCR_SHAPE(N, H, W, C)), ye = twin_new(dt, 4, OCR_SHAPE(N, H, W, C));
        ocr_batchnorm2d_forward(&y.h, &sm.h, &sr.h, &rm.h, &rv.h, &x0.h, &g.h, &b.h, 0.9f, 1e-5f, 1);
        ocr_batchnorm2d_forward(&y.d, &sm.d, &sr.d, &rm.d, &rv.d, &x0.d, &g.d, &b.d, 0.9f, 1e-5f, 1);
        OcrTensor rm_before = twin_fetch(&rm), rv_before = twin_fetch(&rv);
        for (int step = 0; step < 2; step++) {
            ocr_batchnorm2d_forward(&y.h, &sm.h, &sr.h, &rm.h, &rv.h, &x.h, &g.h, &b.h, 0.9f, 1e-5f, 0);
            ocr_batchnorm2d_forward(&y.d, &sm.d, &sr.d, &rm.d, &rv.d, &x.d, &g.d, &b.d, 0.9f, 1e-5f, 0);
            ck_assert_msg(twin_close(&y, NORM_TOL, NORM_TOL, what), "%s: out", what);
            OcrTensor a = twin_fetch(&rm), v = twin_fetch(&rv);
            ck_assert_msg(memcmp(a.data, rm_before.data, ocr_tensor_bytes(&a)) == 0, "%s: running_mean moved", what);
            ck_assert_msg(memcmp(v.data, rv_before.data, ocr_tensor_bytes(&v)) == 0, "%s: running_var moved", what);
            ocr_tensor_free(&a), ocr_tensor_free(&v);
        }
        // An eval pass on the device gives the frozen training pass's output bit for bit.
        ocr_batchnorm2d_forward(&ye.d, NULL, NULL, &rm.d, &rv.d, &x.d, &g.d, &b.d, 0.9f, 1e-5f, 0);
        OcrTensor yf = twin_fetch(&y), yv = twin_fetch(&ye);
        ck_assert_msg(memcmp(yf.data, yv.data, ocr_tensor_bytes(&yf)) == 0, "%s: eval output differs", what);
        ocr_tensor_free(&yf), ocr_tensor_free(&yv);
        Twin dy = twin_uniform(dt, 4, OCR_SHAPE(N, H, W, C), -1, 1), dx = twin_new(dt, 4, OCR_SHAPE(N, H, W, C));
        Twin dg = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), -1, 1), db = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), -1, 1);
        for (int call = 0; call < 2; call++) {
            ocr_batchnorm2d_backward(&dx.h, &dg.h, &db.h, &dy.h, &x.h, &g.h, &sm.h, &sr.h, 0);
            ocr_batchnorm2d_backward(&dx.d, &dg.d, &db.d, &dy.d, &x.d, &g.d, &sm.d, &sr.d, 0);
        }
        ck_assert_msg(twin_close(&dx, NORM_TOL, NORM_TOL, what), "%s: dinp", what);
        ck_assert_msg(twin_close(&dg, NORM_TOL, NORM_TOL, what), "%s: dgamma", what);
        ck_assert_msg(twin_close(&db, NORM_TOL, NORM_TOL, what), "%s: dbeta", what);
        ocr_tensor_free(&rm_before), ocr_tensor_free(&rv_before);
        twin_free(&x0), twin_free(&x), twin_free(&g), twin_free(&b), twin_free(&rm), twin_free(&rv);
        twin_free(&sm), twin_free(&sr), twin_free(&y), twin_free(&ye), twin_free(&dy), twin_free(&dx);
        twin_free(&dg), twin_free(&db);
    }
}
END_TEST

// Outputs may be NULL; statistics of other dtypes.
START_TEST(test_batchnorm_optional_outputs) {
    const int64_t N = 2, H = 5, W = 6, C = 10;
    Twin x = twin_uniform(OCR_F16, 4, OCR_SHAPE(N, H, W, C), -2, 2);
    Twin y = twin_new(OCR_F16, 4, OCR_SHAPE(N, H, W, C));
    Twin sm = twin_new(OCR_BF16, 1, OCR_SHAPE(C)), sr = twin_new(OCR_F16, 1, OCR_SHAPE(C));
    ocr_batchnorm2d_forward(&y.h, &sm.h, &sr.h, NULL, NULL, &x.h, NULL, NULL, 0.9f, 1e-5f, 1);
    ocr_batchnorm2d_forward(&y.d, &sm.d, &sr.d, NULL, NULL, &x.d, NULL, NULL, 0.9f, 1e-5f, 1);
    ck_assert(twin_close(&y, NORM_TOL, NORM_TOL, "bn no running stats"));
    ck_assert(twin_close(&sm, 1e-6, 1e-6, "bn bf16 save_mean"));
    ck_assert(twin_close(&sr, NORM_TOL, 0, "bn f16 save_rstd"));
    twin_poison(&y);
    ocr_batchnorm2d_forward(&y.h, NULL, NULL, NULL, NULL, &x.h, NULL, NULL, 0.9f, 1e-5f, 1);
    ocr_batchnorm2d_forward(&y.d, NULL, NULL, NULL, NULL, &x.d, NULL, NULL, 0.9f, 1e-5f, 1);
    ck_assert(twin_close(&y, NORM_TOL, NORM_TOL, "bn no saved stats"));
    Twin dy = twin_uniform(OCR_F16, 4, OCR_SHAPE(N, H, W, C), -1, 1);
    Twin dg = twin_uniform(OCR_BF16, 1, OCR_SHAPE(C), -1, 1);
    ocr_batchnorm2d_backward(NULL, &dg.h, NULL, &dy.h, &x.h, NULL, &sm.h, &sr.h, 1);
    ocr_batchnorm2d_backward(NULL, &dg.d, NULL, &dy.d, &x.d, NULL, &sm.d, &sr.d, 1);
    ck_assert(twin_close(&dg, NORM_TOL, NORM_TOL, "bn dgamma alone (bf16)"));
    twin_free(&x), twin_free(&y), twin_free(&sm), twin_free(&sr), twin_free(&dy), twin_free(&dg);
}
END_TEST

static void ln_case(int64_t R, int64_t C, ocr_dtype_t dt, int affine, float mean) {
    char what[128];
    snprintf(what, sizeof what, "layernorm %lldx%lld %s affine %d mean %g", (long long)R, (long long)C, dtn(dt), affine,
             (double)mean);
    Twin x = twin_uniform(dt, 3, OCR_SHAPE(2, R / 2, C), mean - 1.5f, mean + 1.5f);
    Twin g = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), 0.5f, 1.5f), b = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), -1, 1);
    Twin mu = twin_new(OCR_F32, 1, OCR_SHAPE(R)), rs = twin_new(OCR_F32, 1, OCR_SHAPE(R));
    Twin y = twin_new(dt, 3, OCR_SHAPE(2, R / 2, C));
    ocr_layernorm_forward(&y.h, &mu.h, &rs.h, &x.h, affine ? &g.h : NULL, affine ? &b.h : NULL, 1e-6f);
    ocr_layernorm_forward(&y.d, &mu.d, &rs.d, &x.d, affine ? &g.d : NULL, affine ? &b.d : NULL, 1e-6f);
    ck_assert_msg(twin_close(&y, NORM_TOL, NORM_TOL, what), "%s: out", what);
    ck_assert_msg(twin_close(&mu, 1e-6, 1e-6, what), "%s: mean", what);
    ck_assert_msg(twin_close(&rs, 1e-6, 0, what), "%s: rstd", what);
    Twin dy = twin_uniform(dt, 3, OCR_SHAPE(2, R / 2, C), -1, 1);
    Twin dx = twin_new(dt, 3, OCR_SHAPE(2, R / 2, C));
    Twin dg = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), -1, 1), db = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), -1, 1);
    ocr_layernorm_backward(&dx.h, affine ? &dg.h : NULL, affine ? &db.h : NULL, &dy.h, &x.h, affine ? &g.h : NULL,
                           &mu.h, &rs.h);
    ocr_layernorm_backward(&dx.d, affine ? &dg.d : NULL, affine ? &db.d : NULL, &dy.d, &x.d, affine ? &g.d : NULL,
                           &mu.d, &rs.d);
    ck_assert_msg(twin_close(&dx, NORM_TOL, 1e-4, what), "%s: dinp", what);
    ck_assert_msg(twin_close(&dg, NORM_TOL, NORM_TOL, what), "%s: dgamma", what);
    ck_assert_msg(twin_close(&db, NORM_TOL, NORM_TOL, what), "%s: dbeta", what);
    // Parameter gradients alone.
    ocr_layernorm_backward(NULL, affine ? &dg.h : NULL, &db.h, &dy.h, &x.h, affine ? &g.h : NULL, &mu.h, &rs.h);
    ocr_layernorm_backward(NULL, affine ? &dg.d : NULL, &db.d, &dy.d, &x.d, affine ? &g.d : NULL, &mu.d, &rs.d);
    ck_assert_msg(twin_close(&db, NORM_TOL, NORM_TOL, what), "%s: dbeta alone", what);
    twin_free(&x), twin_free(&g), twin_free(&b), twin_free(&mu), twin_free(&rs), twin_free(&y);
    twin_free(&dy), twin_free(&dx), twin_free(&dg), twin_free(&db);
}

START_TEST(test_layernorm) {
    for (int k = 0; k < 3; k++)
        for (int affine = 0; affine < 2; affine++) {
            ln_case(2 * 37, 64, DTS[k], affine, 0.0f);
            ln_case(2 * 20, 120, DTS[k], affine, 0.5f);
        }
    ln_case(2 * 700, 384, OCR_F32, 1, 0.0f);  // several chunks of the dgamma reduction
    ln_case(2 * 9, 7, OCR_F32, 1, 0.0f);      // rows narrower than a warp
    ln_case(2 * 16, 48, OCR_F32, 1, 300.0f);  // large mean
}
END_TEST

// Running the same backward twice gives identical bits.
START_TEST(test_norm_deterministic) {
    const int64_t N = 8, H = 16, W = 40, C = 48;
    Twin x = twin_uniform(OCR_F32, 4, OCR_SHAPE(N, H, W, C), -2, 2);
    Twin dy = twin_uniform(OCR_F32, 4, OCR_SHAPE(N, H, W, C), -1, 1);
    Twin y = twin_new(OCR_F32, 4, OCR_SHAPE(N, H, W, C));
    Twin sm = twin_new(OCR_F32, 1, OCR_SHAPE(C)), sr = twin_new(OCR_F32, 1, OCR_SHAPE(C));
    ocr_batchnorm2d_forward(&y.d, &sm.d, &sr.d, NULL, NULL, &x.d, NULL, NULL, 0.9f, 1e-5f, 1);
    Twin dg = twin_new(OCR_F32, 1, OCR_SHAPE(C)), dg2 = twin_new(OCR_F32, 1, OCR_SHAPE(C));
    ocr_zero_tensor(&dg.d), ocr_zero_tensor(&dg2.d);
    ocr_batchnorm2d_backward(NULL, &dg.d, NULL, &dy.d, &x.d, NULL, &sm.d, &sr.d, 1);
    ocr_batchnorm2d_backward(NULL, &dg2.d, NULL, &dy.d, &x.d, NULL, &sm.d, &sr.d, 1);
    OcrTensor h = twin_fetch(&dg2);
    memcpy(dg.h.data, h.data, ocr_tensor_bytes(&h));
    ocr_tensor_free(&h);
    ck_assert(twin_bits(&dg, "batchnorm dgamma rerun"));
    twin_free(&x), twin_free(&dy), twin_free(&y), twin_free(&sm), twin_free(&sr), twin_free(&dg), twin_free(&dg2);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("gpu_norm");
    TCase *tc = tcase_create("norm");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_batchnorm);
    tcase_add_test(tc, test_batchnorm_frozen_sequence);
    tcase_add_test(tc, test_batchnorm_optional_outputs);
    tcase_add_test(tc, test_layernorm);
    tcase_add_test(tc, test_norm_deterministic);
    suite_add_tcase(s, tc);
    return s;
}

#endif

GPU_TEST_MAIN("gpu_norm", suite)

// Fused batch norm + activation on the GPU against the CPU twin (kernels/cpu/bn_act.c): every
// activation, training and inference, f32/f16/bf16 storage, NULL gamma/beta, the saved and
// running statistics and save_scale, dgamma/dbeta accumulation, dinp alone, and bitwise-
// repeatable runs; batchnorm2d_act_apply bit for bit against each side's forward;
// batchnorm2d_act_backward_rebuild (its output each side's forward's bit for bit, its gradients
// the CPU's, dinp in dout's memory or apart);
// batchnorm2d_forward_accumulate; synchronised BN (the _sync ops) with a stand-in world on both sides.
#include "tests/gpu/gpu_test.h"

#ifdef OCR_HAVE_CUDA

#define BA_TOL 1e-5

static const ocr_dtype_t DTS[3] = {OCR_F32, OCR_F16, OCR_BF16};
static const ocr_activation_t ACTS[] = {OCR_ACT_NONE,        OCR_ACT_RELU,  OCR_ACT_HARDSWISH,
                                        OCR_ACT_HARDSIGMOID, OCR_ACT_SWISH, OCR_ACT_GELU};

static void ba_case(int64_t N, int64_t H, int64_t W, int64_t C, ocr_dtype_t dt, ocr_activation_t act, int training,
                    int affine) {
    char what[160];
    snprintf(what, sizeof what, "bn_act %lldx%lldx%lldx%lld %s %s train %d affine %d", (long long)N, (long long)H,
             (long long)W, (long long)C, dtn(dt), ocr_activation_name(act), training, affine);
    const int64_t *shape = OCR_SHAPE(N, H, W, C);
    Twin x = twin_uniform(dt, 4, shape, -1.5f, 2.5f);
    Twin g = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), 0.5f, 2.0f);
    Twin b = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), -0.5f, 0.5f);
    Twin rm = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), 0.4f, 0.6f);
    Twin rv = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), 0.5f, 2.0f);
    Twin sm = twin_new(OCR_F32, 1, OCR_SHAPE(C)), sr = twin_new(OCR_F32, 1, OCR_SHAPE(C));
    Twin sa = twin_new(OCR_F32, 1, OCR_SHAPE(C));
    Twin y = twin_new(dt, 4, shape);
    OcrTensor *gh = affine ? &g.h : NULL, *bh = affine ? &b.h : NULL, *gd = affine ? &g.d : NULL,
              *bd = affine ? &b.d : NULL;
    ocr_batchnorm2d_act_forward(&y.h, &sm.h, &sr.h, &sa.h, &rm.h, &rv.h, &x.h, gh, bh, act, 0.9f, 1e-5f, training);
    ocr_batchnorm2d_act_forward(&y.d, &sm.d, &sr.d, &sa.d, &rm.d, &rv.d, &x.d, gd, bd, act, 0.9f, 1e-5f, training);
    ck_assert_msg(twin_close(&y, BA_TOL, BA_TOL, what), "%s: out", what);
    ck_assert_msg(twin_close(&sm, 1e-6, 1e-6, what), "%s: save_mean", what);
    ck_assert_msg(twin_close(&sr, BA_TOL, 0, what), "%s: save_rstd", what);
    ck_assert_msg(twin_close(&sa, BA_TOL, 0, what), "%s: save_scale", what);
    ck_assert_msg(twin_close(&rm, 1e-6, 1e-6, what), "%s: running_mean", what);
    ck_assert_msg(twin_close(&rv, BA_TOL, 0, what), "%s: running_var", what);
    // batchnorm2d_act_apply from each side's own saved coefficients: that side's forward output,
    // bit for bit (the model drops the output and rebuilds it this way).
    {
        Twin y2 = twin_new(dt, 4, shape);
        twin_poison(&y2);
        ocr_batchnorm2d_act_apply(&y2.h, &x.h, &sm.h, &sa.h, bh, act);
        ocr_batchnorm2d_act_apply(&y2.d, &x.d, &sm.d, &sa.d, bd, act);
        ck_assert_msg(memcmp(y2.h.data, y.h.data, ocr_tensor_bytes(&y.h)) == 0, "%s: CPU apply != CPU forward", what);
        OcrTensor f = twin_fetch(&y), a = twin_fetch(&y2);
        ck_assert_msg(memcmp(f.data, a.data, ocr_tensor_bytes(&f)) == 0, "%s: GPU apply != GPU forward", what);
        ocr_tensor_free(&f), ocr_tensor_free(&a);
        twin_free(&y2);
    }

    // The GPU backward reads the GPU's statistics, the CPU's its own (they agree to BA_TOL).
    Twin dy = twin_uniform(dt, 4, shape, -1, 1);
    Twin dx = twin_new(dt, 4, shape);
    Twin dg = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), -1, 1), db = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), -1, 1);
    ocr_batchnorm2d_act_backward(&dx.h, affine ? &dg.h : NULL, affine ? &db.h : NULL, &dy.h, &x.h, gh, bh, &sm.h, &sr.h,
                                 &sa.h, act, dt, training);
    ocr_batchnorm2d_act_backward(&dx.d, affine ? &dg.d : NULL, affine ? &db.d : NULL, &dy.d, &x.d, gd, bd, &sm.d, &sr.d,
                                 &sa.d, act, dt, training);
    // dinp through the batch statistics subtracts nearly equal terms: scale-relative tolerance.
    ck_assert_msg(twin_close(&dx, BA_TOL, 1e-4, what), "%s: dinp", what);
    ck_assert_msg(twin_close(&dg, 1e-4, 1e-4, what), "%s: dgamma", what);
    ck_assert_msg(twin_close(&db, 1e-4, 1e-4, what), "%s: dbeta", what);
    // dinp alone.
    twin_poison(&dx);
    ocr_batchnorm2d_act_backward(&dx.h, NULL, NULL, &dy.h, &x.h, gh, bh, &sm.h, &sr.h, &sa.h, act, dt, training);
    ocr_batchnorm2d_act_backward(&dx.d, NULL, NULL, &dy.d, &x.d, gd, bd, &sm.d, &sr.d, &sa.d, act, dt, training);
    ck_assert_msg(twin_close(&dx, BA_TOL, 1e-4, what), "%s: dinp alone", what);
    // The backward that rebuilds the output: each side's rebuilt output is its own forward's bit
    // for bit, the GPU's gradients the CPU's to the tolerances above (the CPU's equal its plain
    // backward's bit for bit: tests/kernels/test_bn_act.c), with dinp in dout's memory (the
    // model's use) and apart.
    for (int in_place = 0; in_place < 2; in_place++) {
        Twin y2 = twin_new(dt, 4, shape), dy2 = twin_uniform(dt, 4, shape, -1, 1), dx2 = twin_new(dt, 4, shape);
        Twin dg2 = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), -1, 1), db2 = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), -1, 1);
        twin_poison(&y2), twin_poison(&dx2);
        Twin *dxr = in_place ? &dy2 : &dx2;
        ocr_batchnorm2d_act_backward_rebuild(&y2.h, &dxr->h, affine ? &dg2.h : NULL, affine ? &db2.h : NULL, &dy2.h,
                                             &x.h, gh, bh, &sm.h, &sr.h, &sa.h, act, training, NULL);
        ocr_batchnorm2d_act_backward_rebuild(&y2.d, &dxr->d, affine ? &dg2.d : NULL, affine ? &db2.d : NULL, &dy2.d,
                                             &x.d, gd, bd, &sm.d, &sr.d, &sa.d, act, training, NULL);
        ck_assert_msg(memcmp(y2.h.data, y.h.data, ocr_tensor_bytes(&y.h)) == 0, "%s: CPU rebuild != CPU forward",
                      what);
        OcrTensor f = twin_fetch(&y), r = twin_fetch(&y2);
        ck_assert_msg(memcmp(f.data, r.data, ocr_tensor_bytes(&f)) == 0, "%s: GPU rebuild != GPU forward", what);
        ocr_tensor_free(&f), ocr_tensor_free(&r);
        ck_assert_msg(twin_close(dxr, BA_TOL, 1e-4, what), "%s: rebuild dinp (in place %d)", what, in_place);
        if (affine) {
            ck_assert_msg(twin_close(&dg2, 1e-4, 1e-4, what), "%s: rebuild dgamma", what);
            ck_assert_msg(twin_close(&db2, 1e-4, 1e-4, what), "%s: rebuild dbeta", what);
        }
        twin_free(&y2), twin_free(&dy2), twin_free(&dx2), twin_free(&dg2), twin_free(&db2);
    }
    twin_free(&x), twin_free(&g), twin_free(&b), twin_free(&rm), twin_free(&rv), twin_free(&sm), twin_free(&sr);
    twin_free(&sa), twin_free(&y), twin_free(&dy), twin_free(&dx), twin_free(&dg), twin_free(&db);
}

START_TEST(test_bn_act) {
    for (size_t a = 0; a < sizeof ACTS / sizeof ACTS[0]; a++)
        for (int k = 0; k < 3; k++)
            for (int training = 0; training < 2; training++)
                for (int affine = 0; affine < 2; affine++) ba_case(3, 5, 7, 24, DTS[k], ACTS[a], training, affine);
    // Several chunks of the column sums, odd channel count.
    ba_case(8, 24, 40, 37, OCR_F32, OCR_ACT_HARDSWISH, 1, 1);
    ba_case(8, 24, 40, 37, OCR_BF16, OCR_ACT_SWISH, 1, 1);
}
END_TEST

// The same backward twice gives identical bits.
START_TEST(test_bn_act_deterministic) {
    const int64_t N = 8, H = 16, W = 40, C = 48;
    Twin x = twin_uniform(OCR_F32, 4, OCR_SHAPE(N, H, W, C), -2, 2);
    Twin dy = twin_uniform(OCR_F32, 4, OCR_SHAPE(N, H, W, C), -1, 1);
    Twin y = twin_new(OCR_F32, 4, OCR_SHAPE(N, H, W, C));
    Twin sm = twin_new(OCR_F32, 1, OCR_SHAPE(C)), sr = twin_new(OCR_F32, 1, OCR_SHAPE(C));
    Twin sa = twin_new(OCR_F32, 1, OCR_SHAPE(C));
    ocr_batchnorm2d_act_forward(&y.d, &sm.d, &sr.d, &sa.d, NULL, NULL, &x.d, NULL, NULL, OCR_ACT_HARDSWISH, 0.9f, 1e-5f,
                                1);
    Twin dx = twin_new(OCR_F32, 4, OCR_SHAPE(N, H, W, C)), dx2 = twin_new(OCR_F32, 4, OCR_SHAPE(N, H, W, C));
    ocr_batchnorm2d_act_backward(&dx.d, NULL, NULL, &dy.d, &x.d, NULL, NULL, &sm.d, &sr.d, &sa.d, OCR_ACT_HARDSWISH,
                                 OCR_F32, 1);
    ocr_batchnorm2d_act_backward(&dx2.d, NULL, NULL, &dy.d, &x.d, NULL, NULL, &sm.d, &sr.d, &sa.d, OCR_ACT_HARDSWISH,
                                 OCR_F32, 1);
    OcrTensor h = twin_fetch(&dx2);
    memcpy(dx.h.data, h.data, ocr_tensor_bytes(&h));
    ocr_tensor_free(&h);
    ck_assert(twin_bits(&dx, "bn_act dinp rerun"));
    twin_free(&x), twin_free(&dy), twin_free(&y), twin_free(&sm), twin_free(&sr), twin_free(&sa);
    twin_free(&dx), twin_free(&dx2);
}
END_TEST

// ---- synchronised BN ---------------------------------------------------------------------------
// The stand-in world: a second rank of `other` rows with per-channel mean 0.3 + 0.01c and
// variance 0.5 (forward), and gradient sums 0.1c and −0.05 (backward), added to what this rank
// sums; the CPU's callback gets host memory, the GPU's device memory (copied through the host
// here, after the op's stream is done: the callback is called between its kernels).
typedef struct {
    int64_t other;
    int calls;
    int device;
} StandIn;

static void stand_in_add(StandIn *w, double *v, int64_t n) {
    const int call = w->calls++ % 3;
    const int64_t C = call == 0 ? n - 1 : call == 1 ? n : (n - 1) / 2;
    const double M = (double)w->other;
    for (int64_t c = 0; c < C; c++) {
        if (call == 0) v[1 + c] += M * (0.3 + 0.01 * (double)c);
        if (call == 1) v[c] += M * 0.5;
        if (call == 2) v[1 + c] += 0.1 * (double)c, v[1 + C + c] += -0.05;
    }
    if (call != 1) v[0] += M;
}

static int stand_in_sum(void *user, double *v, int64_t n) {
    StandIn *w = user;
    if (!w->device) {
        stand_in_add(w, v, n);
        return 0;
    }
    double *h = malloc(sizeof(double) * (size_t)n);
    if (ocr_cuda_synchronize(0) != 0 || ocr_cuda_memcpy(h, v, sizeof(double) * (size_t)n) != 0) return -1;
    stand_in_add(w, h, n);
    int rc = ocr_cuda_memcpy(v, h, sizeof(double) * (size_t)n);
    free(h);
    return rc;
}

static void sync_case(int64_t N, int64_t H, int64_t W, int64_t C, ocr_dtype_t dt, ocr_activation_t act) {
    char what[160];
    snprintf(what, sizeof what, "sync bn_act %lldx%lldx%lldx%lld %s %s", (long long)N, (long long)H, (long long)W,
             (long long)C, dtn(dt), ocr_activation_name(act));
    const int64_t *shape = OCR_SHAPE(N, H, W, C);
    Twin x = twin_uniform(dt, 4, shape, -1.5f, 2.5f);
    Twin g = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), 0.5f, 2.0f);
    Twin b = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), -0.5f, 0.5f);
    Twin rm = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), 0.4f, 0.6f);
    Twin rv = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), 0.5f, 2.0f);
    Twin sm = twin_new(OCR_F32, 1, OCR_SHAPE(C)), sr = twin_new(OCR_F32, 1, OCR_SHAPE(C));
    Twin sa = twin_new(OCR_F32, 1, OCR_SHAPE(C));
    Twin y = twin_new(dt, 4, shape);
    StandIn wh = {N * H * W + 17, 0, 0}, wd = {N * H * W + 17, 0, 1};
    OcrBnSync sh = {stand_in_sum, &wh}, sd = {stand_in_sum, &wd};
    ocr_batchnorm2d_act_forward_sync(&y.h, &sm.h, &sr.h, &sa.h, &rm.h, &rv.h, &x.h, &g.h, &b.h, act, 0.9f, 1e-5f, 1,
                                     &sh);
    ocr_batchnorm2d_act_forward_sync(&y.d, &sm.d, &sr.d, &sa.d, &rm.d, &rv.d, &x.d, &g.d, &b.d, act, 0.9f, 1e-5f, 1,
                                     &sd);
    ck_assert_int_eq(wh.calls, 2);
    ck_assert_int_eq(wd.calls, 2);
    ck_assert_msg(twin_close(&y, BA_TOL, BA_TOL, what), "%s: out", what);
    ck_assert_msg(twin_close(&sm, 1e-6, 1e-6, what), "%s: save_mean", what);
    ck_assert_msg(twin_close(&sr, BA_TOL, 0, what), "%s: save_rstd", what);
    ck_assert_msg(twin_close(&rm, 1e-6, 1e-6, what), "%s: running_mean", what);
    ck_assert_msg(twin_close(&rv, BA_TOL, 0, what), "%s: running_var", what);
    // The stand-in moved the statistics away from this rank's own: the plain op differs.
    Twin yp = twin_new(dt, 4, shape), smp = twin_new(OCR_F32, 1, OCR_SHAPE(C));
    ocr_batchnorm2d_act_forward(&yp.h, &smp.h, NULL, NULL, NULL, NULL, &x.h, &g.h, &b.h, act, 0.9f, 1e-5f, 1);
    ck_assert_msg(fabsf(((float *)smp.h.data)[0] - ((float *)sm.h.data)[0]) > 1e-3f, "%s: the world did not count",
                  what);

    Twin dy = twin_uniform(dt, 4, shape, -1, 1);
    Twin dx = twin_new(dt, 4, shape);
    Twin dg = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), -1, 1), db = twin_uniform(OCR_F32, 1, OCR_SHAPE(C), -1, 1);
    ocr_batchnorm2d_act_backward_sync(&dx.h, &dg.h, &db.h, &dy.h, &x.h, &g.h, &b.h, &sm.h, &sr.h, &sa.h, act, dt, 1,
                                      &sh);
    ocr_batchnorm2d_act_backward_sync(&dx.d, &dg.d, &db.d, &dy.d, &x.d, &g.d, &b.d, &sm.d, &sr.d, &sa.d, act, dt, 1,
                                      &sd);
    ck_assert_int_eq(wh.calls, 3);
    ck_assert_int_eq(wd.calls, 3);
    ck_assert_msg(twin_close(&dx, BA_TOL, 1e-4, what), "%s: dinp", what);
    ck_assert_msg(twin_close(&dg, 1e-4, 1e-4, what), "%s: dgamma", what);
    ck_assert_msg(twin_close(&db, 1e-4, 1e-4, what), "%s: dbeta", what);
    twin_free(&x), twin_free(&g), twin_free(&b), twin_free(&rm), twin_free(&rv), twin_free(&sm), twin_free(&sr);
    twin_free(&sa), twin_free(&y), twin_free(&yp), twin_free(&smp), twin_free(&dy), twin_free(&dx), twin_free(&dg);
    twin_free(&db);
}

START_TEST(test_bn_act_sync) {
    for (int k = 0; k < 3; k++) sync_case(3, 5, 7, 24, DTS[k], OCR_ACT_HARDSWISH);
    sync_case(8, 24, 40, 37, OCR_F32, OCR_ACT_NONE);
    sync_case(4, 9, 11, 40, OCR_BF16, OCR_ACT_RELU);
}
END_TEST

// batchnorm2d_forward_accumulate: out += bn(x) on both sides from the same starting sum, the
// sum within the batch norm's tolerances (plus the dtype's rounding, twin_close's allowance).
START_TEST(test_bn_forward_accumulate) {
    for (int k = 0; k < 3; k++)
        for (int training = 0; training < 2; training++) {
            char what[96];
            snprintf(what, sizeof what, "bn forward accumulate %s train %d", dtn(DTS[k]), training);
            const int64_t *shape = OCR_SHAPE(3, 7, 13, 37);
            Twin x = twin_uniform(DTS[k], 4, shape, -1.5f, 2.5f), sum = twin_uniform(DTS[k], 4, shape, -2.0f, 2.0f);
            Twin g = twin_uniform(OCR_F32, 1, OCR_SHAPE(37), 0.5f, 2.0f), b = twin_uniform(OCR_F32, 1, OCR_SHAPE(37), -0.5f, 0.5f);
            Twin rm = twin_uniform(OCR_F32, 1, OCR_SHAPE(37), 0.4f, 0.6f), rv = twin_uniform(OCR_F32, 1, OCR_SHAPE(37), 0.5f, 2.0f);
            Twin sm = twin_new(OCR_F32, 1, OCR_SHAPE(37)), sr = twin_new(OCR_F32, 1, OCR_SHAPE(37));
            ocr_batchnorm2d_forward_accumulate(&sum.h, &sm.h, &sr.h, &rm.h, &rv.h, &x.h, &g.h, &b.h, 0.9f, 1e-5f,
                                               training);
            ocr_batchnorm2d_forward_accumulate(&sum.d, &sm.d, &sr.d, &rm.d, &rv.d, &x.d, &g.d, &b.d, 0.9f, 1e-5f,
                                               training);
            ck_assert_msg(twin_close(&sum, BA_TOL, BA_TOL, what), "%s: sum", what);
            ck_assert_msg(twin_close(&rm, 1e-6, 1e-6, what), "%s: running_mean", what);
            ck_assert_msg(twin_close(&rv, BA_TOL, 0, what), "%s: running_var", what);
            if (training) {
                ck_assert_msg(twin_close(&sm, 1e-6, 1e-6, what), "%s: save_mean", what);
                ck_assert_msg(twin_close(&sr, BA_TOL, 0, what), "%s: save_rstd", what);
            }
            twin_free(&x), twin_free(&sum), twin_free(&g), twin_free(&b), twin_free(&rm), twin_free(&rv);
            twin_free(&sm), twin_free(&sr);
        }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("gpu_bn_act");
    TCase *tc = tcase_create("bn_act");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_bn_act);
    tcase_add_test(tc, test_bn_forward_accumulate);
    tcase_add_test(tc, test_bn_act_deterministic);
    tcase_add_test(tc, test_bn_act_sync);
    suite_add_tcase(s, tc);
    return s;
}

#endif

GPU_TEST_MAIN("gpu_bn_act", suite)

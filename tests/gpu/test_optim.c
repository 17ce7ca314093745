// Adam/AdamW and the global gradient norm on the GPU against the CPU twins. The Adam update is
// the same sequence of IEEE operations on both, so master weights, moments and working weights
// (nearest-even or stochastically rounded to f16/bf16) must agree bit for bit, over several
// steps; the norm (double sums in another order) within 1e-12.
#include "tests/gpu/gpu_test.h"

#ifdef OCR_HAVE_CUDA

typedef struct {
    ocr_dtype_t param, grad;
    int master, decoupled;
    uint64_t sr_seed;
} AdamCase;

START_TEST(test_adam) {
    const AdamCase cases[] = {
        {OCR_F32, OCR_F32, 0, 0, 0},  {OCR_F32, OCR_F32, 0, 1, 0},     {OCR_F32, OCR_F16, 0, 1, 0},
        {OCR_F16, OCR_F16, 1, 1, 0},  {OCR_BF16, OCR_BF16, 1, 1, 0},   {OCR_BF16, OCR_BF16, 1, 1, 777},
        {OCR_F16, OCR_F16, 1, 0, 31}, {OCR_BF16, OCR_F32, 1, 0, 5},    {OCR_F32, OCR_BF16, 1, 1, 9},
    };
    const int64_t n = 10007;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const AdamCase *k = &cases[c];
        char what[128];
        snprintf(what, sizeof what, "adam param %s grad %s master %d adamw %d sr %llu", dtn(k->param), dtn(k->grad),
                 k->master, k->decoupled, (unsigned long long)k->sr_seed);
        Twin w = twin_uniform(k->param, 1, OCR_SHAPE(n), -1, 1);
        Twin master = twin_uniform(OCR_F32, 1, OCR_SHAPE(n), -1, 1);
        Twin m = twin_uniform(OCR_F32, 1, OCR_SHAPE(n), -0.01f, 0.01f);
        Twin v = twin_uniform(OCR_F32, 1, OCR_SHAPE(n), 0.0f, 1e-4f);
        for (int64_t step = 1; step <= 4; step++) {
            Twin g = twin_uniform(k->grad, 1, OCR_SHAPE(n), -0.5f, 0.5f);
            AdamParams p = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.05f, k->decoupled, step, step == 2 ? 0.125f : 1.0f,
                            k->sr_seed ? k->sr_seed * 1000 + (uint64_t)step : 0, (uint64_t)c};
            ocr_adam_update(&w.h, k->master ? &master.h : NULL, &m.h, &v.h, &g.h, p);
            ocr_adam_update(&w.d, k->master ? &master.d : NULL, &m.d, &v.d, &g.d, p);
            ck_assert_msg(twin_bits(&m, what), "%s step %lld: m", what, (long long)step);
            ck_assert_msg(twin_bits(&v, what), "%s step %lld: v", what, (long long)step);
            ck_assert_msg(twin_bits(&w, what), "%s step %lld: param", what, (long long)step);
            if (k->master) ck_assert_msg(twin_bits(&master, what), "%s step %lld: master", what, (long long)step);
            twin_free(&g);
        }
        twin_free(&w), twin_free(&master), twin_free(&m), twin_free(&v);
    }
}
END_TEST

// Stochastic rounding on the GPU is unbiased: the mean of many rounded copies of one value
// approaches the value (the bit-exact test above already ties it to the CPU's draws).
START_TEST(test_adam_sr_unbiased) {
    const int64_t n = 1 << 16;
    Twin w = twin_new(OCR_BF16, 1, OCR_SHAPE(n));
    Twin master = twin_new(OCR_F32, 1, OCR_SHAPE(n));
    Twin m = twin_new(OCR_F32, 1, OCR_SHAPE(n)), v = twin_new(OCR_F32, 1, OCR_SHAPE(n));
    Twin g = twin_new(OCR_F32, 1, OCR_SHAPE(n));
    const float x = 1.0f + 1.0f / 3.0f;  // between two bf16 values
    for (int64_t i = 0; i < n; i++) ((float *)master.h.data)[i] = x;
    twin_sync_up(&master);
    ocr_zero_tensor(&m.d), ocr_zero_tensor(&v.d), ocr_zero_tensor(&g.d);
    AdamParams p = {0.0f, 0.9f, 0.999f, 1e-8f, 0.0f, 1, 1, 1.0f, 4242, 1};  // lr 0: only the rounding
    ocr_adam_update(&w.d, &master.d, &m.d, &v.d, &g.d, p);
    OcrTensor h = twin_fetch(&w);
    double mean = 0.0;
    for (int64_t i = 0; i < n; i++) mean += ocr_bf16_to_f32(((const ocr_bf16_t *)h.data)[i]);
    mean /= (double)n;
    ck_assert_msg(fabs(mean - x) < 2e-4, "stochastic rounding mean %.7f, value %.7f", mean, (double)x);
    ocr_tensor_free(&h);
    twin_free(&w), twin_free(&master), twin_free(&m), twin_free(&v), twin_free(&g);
}
END_TEST

START_TEST(test_global_norm) {
    const int64_t sizes[4] = {100000, 17, 0, 8193};
    const ocr_dtype_t dts[4] = {OCR_F32, OCR_F16, OCR_BF16, OCR_BF16};
    Twin g[4];
    OcrTensor *gh[5], *gd[5];
    for (int i = 0; i < 4; i++) {
        g[i] = twin_uniform(dts[i], 1, OCR_SHAPE(sizes[i]), -3, 3);
        gh[i] = &g[i].h;
        gd[i] = &g[i].d;
    }
    gh[4] = gd[4] = NULL;
    const double nh = ocr_grad_global_norm(gh, 5), nd = ocr_grad_global_norm(gd, 5);
    ck_assert_msg(fabs(nh - nd) <= 1e-12 * nh, "norm gpu %.17g cpu %.17g", nd, nh);
    // Clipping: below the norm scales every tensor (one rounding each), above leaves them.
    const double ch = ocr_clip_grad_global_norm(gh, 5, (float)(nh / 3)),
                 cd = ocr_clip_grad_global_norm(gd, 5, (float)(nh / 3));
    ck_assert_msg(fabs(ch - cd) <= 1e-12 * ch, "clip norm gpu %.17g cpu %.17g", cd, ch);
    for (int i = 0; i < 4; i++) ck_assert_msg(twin_close(&g[i], 3e-7, 0, "clipped gradient"), "tensor %d", i);
    ocr_clip_grad_global_norm(gh, 5, 1e30f);
    ocr_clip_grad_global_norm(gd, 5, 1e30f);
    for (int i = 0; i < 4; i++) ck_assert_msg(twin_close(&g[i], 3e-7, 0, "unclipped gradient"), "tensor %d", i);
    ck_assert(ocr_grad_global_norm(gd, 0) == 0.0);
    for (int i = 0; i < 4; i++) twin_free(&g[i]);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("gpu_optim");
    TCase *tc = tcase_create("optim");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_adam);
    tcase_add_test(tc, test_adam_sr_unbiased);
    tcase_add_test(tc, test_global_norm);
    suite_add_tcase(s, tc);
    return s;
}

#endif

GPU_TEST_MAIN("gpu_optim", suite)

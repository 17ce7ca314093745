// 2-D convolution on the GPU against the CPU twin: dense, strided (also PP-OCR's (2, 1)
// strides), pointwise, grouped and depthwise (own kernel, and through cuDNN with the hook),
// f32/f16/bf16 and mixed dtypes, with and without bias; the backward with poisoned dinp and
// dweight/dbias accumulating into existing values; runs repeat bit for bit.
#include "kernels/cuda/cuda_ops.h"
#include "tests/gpu/gpu_test.h"

#ifdef OCR_HAVE_CUDA

typedef struct {
    int64_t N, H, W, C, OC, KH, KW;
    int sh, sw, ph, pw, groups;
} Case;

static const Case CASES[] = {
    {2, 9, 13, 8, 12, 3, 3, 1, 1, 1, 1, 1},    // dense 3x3
    {2, 10, 15, 6, 10, 3, 3, 2, 2, 1, 1, 1},   // dense 3x3 stride 2
    {2, 8, 12, 8, 16, 3, 3, 2, 1, 1, 1, 1},    // dense, stride (2, 1)
    {3, 5, 7, 16, 24, 1, 1, 1, 1, 0, 0, 1},    // pointwise
    {2, 8, 8, 8, 12, 3, 3, 1, 1, 1, 1, 4},     // grouped
    {2, 9, 11, 40, 40, 3, 3, 1, 1, 1, 1, 40},  // depthwise 3x3
    {2, 12, 17, 24, 24, 5, 5, 2, 2, 2, 2, 24}, // depthwise 5x5 stride 2
    {2, 8, 20, 16, 16, 3, 3, 2, 1, 1, 1, 16},  // depthwise stride (2, 1)
    {1, 6, 9, 33, 33, 3, 3, 1, 1, 0, 0, 33},   // depthwise, odd channels, no padding
};
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

typedef struct {
    ocr_dtype_t x, w, y;
} Dts;
static const Dts DTYPES[] = {
    {OCR_F32, OCR_F32, OCR_F32}, {OCR_F16, OCR_F16, OCR_F16}, {OCR_BF16, OCR_BF16, OCR_BF16}, {OCR_F16, OCR_F32, OCR_F32}};
#define NDTYPES ((int)(sizeof DTYPES / sizeof DTYPES[0]))

static int is_dw(const Case *c) { return c->groups == c->C && c->OC == c->C; }

static void run_case(const Case *c, Dts dt, int with_bias, double tol) {
    Conv2dParams p = {c->sh, c->sw, c->ph, c->pw, c->groups};
    const int64_t Ho = ocr_conv2d_out_size((int)c->H, (int)c->KH, c->sh, c->ph);
    const int64_t Wo = ocr_conv2d_out_size((int)c->W, (int)c->KW, c->sw, c->pw);
    char what[160];
    snprintf(what, sizeof what, "conv %lldx%lldx%lldx%lld -> %lld k%lldx%lld s%d,%d p%d,%d g%d %s/%s/%s bias %d",
             (long long)c->N, (long long)c->H, (long long)c->W, (long long)c->C, (long long)c->OC, (long long)c->KH,
             (long long)c->KW, c->sh, c->sw, c->ph, c->pw, c->groups, dtn(dt.x), dtn(dt.w), dtn(dt.y), with_bias);
    Twin x = twin_uniform(dt.x, 4, OCR_SHAPE(c->N, c->H, c->W, c->C), -1, 1);
    Twin w = twin_uniform(dt.w, 4, OCR_SHAPE(c->OC, c->KH, c->KW, c->C / c->groups), -0.5f, 0.5f);
    Twin b = twin_uniform(dt.w, 1, OCR_SHAPE(c->OC), -1, 1);
    Twin y = twin_new(dt.y, 4, OCR_SHAPE(c->N, Ho, Wo, c->OC));
    ocr_conv2d_forward(&y.h, &x.h, &w.h, with_bias ? &b.h : NULL, p);
    ocr_conv2d_forward(&y.d, &x.d, &w.d, with_bias ? &b.d : NULL, p);
    ck_assert_msg(twin_close(&y, tol, tol, what), "%s: forward", what);

    Twin dy = twin_uniform(dt.y, 4, OCR_SHAPE(c->N, Ho, Wo, c->OC), -1, 1);
    Twin dx = twin_new(dt.x, 4, OCR_SHAPE(c->N, c->H, c->W, c->C));
    Twin dw = twin_uniform(dt.w, 4, OCR_SHAPE(c->OC, c->KH, c->KW, c->C / c->groups), -1, 1);
    Twin db = twin_uniform(dt.w, 1, OCR_SHAPE(c->OC), -1, 1);
    ocr_conv2d_backward(&dx.h, &dw.h, with_bias ? &db.h : NULL, &dy.h, &x.h, &w.h, p);
    ocr_conv2d_backward(&dx.d, &dw.d, with_bias ? &db.d : NULL, &dy.d, &x.d, &w.d, p);
    ck_assert_msg(twin_close(&dx, tol, tol, what), "%s: dinp", what);
    ck_assert_msg(twin_close(&dw, tol, tol, what), "%s: dweight", what);
    ck_assert_msg(twin_close(&db, tol, tol, what), "%s: dbias", what);

    // One gradient at a time.
    twin_poison(&dx);
    ocr_conv2d_backward(&dx.h, NULL, NULL, &dy.h, &x.h, &w.h, p);
    ocr_conv2d_backward(&dx.d, NULL, NULL, &dy.d, &x.d, &w.d, p);
    ck_assert_msg(twin_close(&dx, tol, tol, what), "%s: dinp alone", what);
    ocr_conv2d_backward(NULL, &dw.h, NULL, &dy.h, &x.h, &w.h, p);
    ocr_conv2d_backward(NULL, &dw.d, NULL, &dy.d, &x.d, &w.d, p);
    ck_assert_msg(twin_close(&dw, tol, tol, what), "%s: dweight alone", what);
    twin_free(&x), twin_free(&w), twin_free(&b), twin_free(&y);
    twin_free(&dy), twin_free(&dx), twin_free(&dw), twin_free(&db);
}

// cuDNN picks any fp32 algorithm (Winograd and FFT ones transform the operands), so its
// results get a little more room than the own depthwise kernels, which sum the taps in the
// CPU's order.
#define TOL_OWN 1e-5
#define TOL_CUDNN 5e-5

START_TEST(test_conv_cases) {
    for (int i = 0; i < NCASES; i++)
        for (int k = 0; k < NDTYPES; k++)
            for (int bias = 0; bias < 2; bias++) {
                if (!ocr_cuda_have_cudnn() && !is_dw(&CASES[i])) continue;
                run_case(&CASES[i], DTYPES[k], bias, is_dw(&CASES[i]) ? TOL_OWN : TOL_CUDNN);
            }
    if (!ocr_cuda_have_cudnn()) printf("SKIP: this build has no cuDNN: dense and grouped convolutions not checked\n");
}
END_TEST

START_TEST(test_depthwise_through_cudnn) {
    if (!ocr_cuda_have_cudnn()) {
        printf("SKIP: this build has no cuDNN\n");
        return;
    }
    int old = ocr_cuda_conv2d_depthwise_cudnn(1);
    for (int i = 0; i < NCASES; i++)
        if (is_dw(&CASES[i]))
            for (int k = 0; k < NDTYPES; k++) run_case(&CASES[i], DTYPES[k], 1, TOL_CUDNN);
    ocr_cuda_conv2d_depthwise_cudnn(old);
}
END_TEST

// The same backward twice gives the same bits (deterministic algorithms and reductions).
START_TEST(test_conv_deterministic) {
    for (int i = 0; i < NCASES; i++) {
        const Case *c = &CASES[i];
        if (!ocr_cuda_have_cudnn() && !is_dw(c)) continue;
        Conv2dParams p = {c->sh, c->sw, c->ph, c->pw, c->groups};
        const int64_t Ho = ocr_conv2d_out_size((int)c->H, (int)c->KH, c->sh, c->ph);
        const int64_t Wo = ocr_conv2d_out_size((int)c->W, (int)c->KW, c->sw, c->pw);
        Twin x = twin_uniform(OCR_F32, 4, OCR_SHAPE(c->N, c->H, c->W, c->C), -1, 1);
        Twin w = twin_uniform(OCR_F32, 4, OCR_SHAPE(c->OC, c->KH, c->KW, c->C / c->groups), -1, 1);
        Twin dy = twin_uniform(OCR_F32, 4, OCR_SHAPE(c->N, Ho, Wo, c->OC), -1, 1);
        Twin dw1 = twin_new(OCR_F32, 4, w.h.shape), dw2 = twin_new(OCR_F32, 4, w.h.shape);
        Twin db1 = twin_new(OCR_F32, 1, OCR_SHAPE(c->OC)), db2 = twin_new(OCR_F32, 1, OCR_SHAPE(c->OC));
        Twin dx1 = twin_new(OCR_F32, 4, x.h.shape), dx2 = twin_new(OCR_F32, 4, x.h.shape);
        ocr_zero_tensor(&dw1.d), ocr_zero_tensor(&dw2.d), ocr_zero_tensor(&db1.d), ocr_zero_tensor(&db2.d);
        ocr_conv2d_backward(&dx1.d, &dw1.d, &db1.d, &dy.d, &x.d, &w.d, p);
        ocr_conv2d_backward(&dx2.d, &dw2.d, &db2.d, &dy.d, &x.d, &w.d, p);
        // Compare run 1 against run 2 through the host side of run 2.
        OcrTensor h = twin_fetch(&dw2);
        memcpy(dw1.h.data, h.data, ocr_tensor_bytes(&h));
        ocr_tensor_free(&h);
        h = twin_fetch(&db2);
        memcpy(db1.h.data, h.data, ocr_tensor_bytes(&h));
        ocr_tensor_free(&h);
        h = twin_fetch(&dx2);
        memcpy(dx1.h.data, h.data, ocr_tensor_bytes(&h));
        ocr_tensor_free(&h);
        ck_assert_msg(twin_bits(&dw1, "conv dweight rerun"), "case %d", i);
        ck_assert_msg(twin_bits(&db1, "conv dbias rerun"), "case %d", i);
        ck_assert_msg(twin_bits(&dx1, "conv dinp rerun"), "case %d", i);
        twin_free(&x), twin_free(&w), twin_free(&dy), twin_free(&dw1), twin_free(&dw2);
        twin_free(&db1), twin_free(&db2), twin_free(&dx1), twin_free(&dx2);
    }
}
END_TEST

// A batch of PP-OCR's size through the stem convolution and a depthwise block, f16.
START_TEST(test_conv_ppocr_sizes) {
    const Case cs[2] = {{16, 48, 320, 3, 16, 3, 3, 2, 2, 1, 1, 1}, {16, 24, 160, 32, 32, 3, 3, 1, 1, 1, 1, 32}};
    for (int i = 0; i < 2; i++) {
        if (!ocr_cuda_have_cudnn() && !is_dw(&cs[i])) continue;
        run_case(&cs[i], DTYPES[1], 0, is_dw(&cs[i]) ? TOL_OWN : TOL_CUDNN);
    }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("gpu_conv");
    TCase *tc = tcase_create("conv");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_conv_cases);
    tcase_add_test(tc, test_depthwise_through_cudnn);
    tcase_add_test(tc, test_conv_deterministic);
    tcase_add_test(tc, test_conv_ppocr_sizes);
    suite_add_tcase(s, tc);
    return s;
}

#endif

GPU_TEST_MAIN("gpu_conv", suite)

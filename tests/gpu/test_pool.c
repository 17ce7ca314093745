// Pooling on the GPU against the CPU twins, bit for bit: the GPU sums and divides in the CPU's
// order without contraction. Average (with padding excluded from the divisor), max (ties on
// quantised inputs: the first maximum takes the gradient), adaptive (non-divisible bins and
// global), forward and backward, f32/f16/bf16.
#include "tests/gpu/gpu_test.h"

#ifdef OCR_HAVE_CUDA

typedef struct {
    int64_t N, H, W, C;
    Pool2dParams p;
} PoolCase;

static const PoolCase CASES[] = {
    {2, 9, 13, 5, {3, 3, 2, 2, 1, 1}},
    {3, 8, 20, 16, {2, 2, 2, 2, 0, 0}},
    {2, 6, 40, 8, {3, 2, 2, 1, 1, 0}},
    {1, 5, 5, 33, {5, 5, 1, 1, 2, 2}},
};
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))
static const ocr_dtype_t DTS[3] = {OCR_F32, OCR_F16, OCR_BF16};

static int64_t osz(int64_t in, int k, int s, int p) { return (in + 2 * p - k) / s + 1; }

// Values on a coarse grid so that windows hold ties.
static Twin quantised(ocr_dtype_t dt, const int64_t *shape) {
    Twin t = twin_uniform(dt, 4, shape, -4, 4);
    const int64_t n = ocr_tensor_numel(&t.h);
    for (int64_t i = 0; i < n; i++) ocr_tensor_set_f32(&t.h, i, floorf(ocr_tensor_get_f32(&t.h, i)));
    twin_sync_up(&t);
    return t;
}

START_TEST(test_pool_windows) {
    for (int i = 0; i < NCASES; i++)
        for (int k = 0; k < 3; k++) {
            const PoolCase *c = &CASES[i];
            const int64_t Ho = osz(c->H, c->p.kernel_h, c->p.stride_h, c->p.pad_h);
            const int64_t Wo = osz(c->W, c->p.kernel_w, c->p.stride_w, c->p.pad_w);
            char what[96];
            snprintf(what, sizeof what, "pool case %d %s", i, dtn(DTS[k]));
            Twin x = twin_uniform(DTS[k], 4, OCR_SHAPE(c->N, c->H, c->W, c->C), -2, 2);
            Twin y = twin_new(DTS[k], 4, OCR_SHAPE(c->N, Ho, Wo, c->C));
            ocr_avgpool2d_forward(&y.h, &x.h, c->p);
            ocr_avgpool2d_forward(&y.d, &x.d, c->p);
            ck_assert_msg(twin_bits(&y, what), "%s avg forward", what);
            Twin dy = twin_uniform(DTS[k], 4, OCR_SHAPE(c->N, Ho, Wo, c->C), -1, 1);
            Twin dx = twin_new(DTS[k], 4, OCR_SHAPE(c->N, c->H, c->W, c->C));
            ocr_avgpool2d_backward(&dx.h, &dy.h, c->p);
            ocr_avgpool2d_backward(&dx.d, &dy.d, c->p);
            ck_assert_msg(twin_bits(&dx, what), "%s avg backward", what);

            Twin q = quantised(DTS[k], OCR_SHAPE(c->N, c->H, c->W, c->C));
            twin_poison(&y);
            ocr_maxpool2d_forward(&y.h, &q.h, c->p);
            ocr_maxpool2d_forward(&y.d, &q.d, c->p);
            ck_assert_msg(twin_bits(&y, what), "%s max forward", what);
            twin_poison(&dx);
            ocr_maxpool2d_backward(&dx.h, &dy.h, &q.h, c->p);
            ocr_maxpool2d_backward(&dx.d, &dy.d, &q.d, c->p);
            ck_assert_msg(twin_bits(&dx, what), "%s max backward", what);
            twin_free(&x), twin_free(&y), twin_free(&dy), twin_free(&dx), twin_free(&q);
        }
}
END_TEST

START_TEST(test_pool_adaptive) {
    const int64_t sizes[][4] = {{7, 13, 3, 5}, {8, 40, 1, 1}, {5, 9, 5, 9}, {6, 25, 4, 7}, {3, 4, 5, 7}};
    for (int i = 0; i < 5; i++)
        for (int k = 0; k < 3; k++) {
            const int64_t N = 2, C = 12, H = sizes[i][0], W = sizes[i][1], Ho = sizes[i][2], Wo = sizes[i][3];
            char what[96];
            snprintf(what, sizeof what, "adaptive %lldx%lld -> %lldx%lld %s", (long long)H, (long long)W,
                     (long long)Ho, (long long)Wo, dtn(DTS[k]));
            Twin x = twin_uniform(DTS[k], 4, OCR_SHAPE(N, H, W, C), -2, 2);
            Twin y = twin_new(DTS[k], 4, OCR_SHAPE(N, Ho, Wo, C));
            ocr_adaptive_avgpool2d_forward(&y.h, &x.h);
            ocr_adaptive_avgpool2d_forward(&y.d, &x.d);
            ck_assert_msg(twin_bits(&y, what), "%s forward", what);
            Twin dy = twin_uniform(DTS[k], 4, OCR_SHAPE(N, Ho, Wo, C), -1, 1);
            Twin dx = twin_new(DTS[k], 4, OCR_SHAPE(N, H, W, C));
            ocr_adaptive_avgpool2d_backward(&dx.h, &dy.h);
            ocr_adaptive_avgpool2d_backward(&dx.d, &dy.d);
            ck_assert_msg(twin_bits(&dx, what), "%s backward", what);
            twin_free(&x), twin_free(&y), twin_free(&dy), twin_free(&dx);
        }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("gpu_pool");
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_pool_windows);
    tcase_add_test(tc, test_pool_adaptive);
    suite_add_tcase(s, tc);
    return s;
}

#endif

GPU_TEST_MAIN("gpu_pool", suite)

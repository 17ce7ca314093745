// Elementwise and layout ops on the GPU against the CPU twins, bit for bit (each element is the
// same single IEEE operation or the same conversion on both): SE channel scale (its dscale sums
// in double in the CPU's order), add, accumulate, scale, zero (float and integer), concat with
// mixed dtypes and a NULL gradient, permute of every 3-d and 4-d order, the uint8 input
// normalisation.
#include "kernels/input.h"
#include "tests/gpu/gpu_test.h"

#ifdef OCR_HAVE_CUDA

static const ocr_dtype_t DTS[3] = {OCR_F32, OCR_F16, OCR_BF16};

START_TEST(test_channel_scale) {
    const int64_t N = 3, H = 5, W = 7, C = 19;
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 3; j++) {
            Twin x = twin_uniform(DTS[k], 4, OCR_SHAPE(N, H, W, C), -2, 2);
            Twin s = twin_uniform(DTS[j], 4, OCR_SHAPE(N, 1, 1, C), 0, 1);
            Twin y = twin_new(DTS[k], 4, OCR_SHAPE(N, H, W, C));
            ocr_channel_scale_forward(&y.h, &x.h, &s.h);
            ocr_channel_scale_forward(&y.d, &x.d, &s.d);
            ck_assert_msg(twin_bits(&y, "channel_scale forward"), "%s/%s", dtn(DTS[k]), dtn(DTS[j]));
            Twin dy = twin_uniform(DTS[k], 4, OCR_SHAPE(N, H, W, C), -1, 1);
            Twin dx = twin_new(DTS[k], 4, OCR_SHAPE(N, H, W, C));
            Twin ds = twin_new(DTS[j], 4, OCR_SHAPE(N, 1, 1, C));
            ocr_channel_scale_backward(&dx.h, &ds.h, &dy.h, &x.h, &s.h);
            ocr_channel_scale_backward(&dx.d, &ds.d, &dy.d, &x.d, &s.d);
            ck_assert_msg(twin_bits(&dx, "channel_scale dinp"), "%s/%s", dtn(DTS[k]), dtn(DTS[j]));
            ck_assert_msg(twin_bits(&ds, "channel_scale dscale"), "%s/%s", dtn(DTS[k]), dtn(DTS[j]));
            twin_free(&x), twin_free(&s), twin_free(&y), twin_free(&dy), twin_free(&dx), twin_free(&ds);
        }
}
END_TEST

START_TEST(test_add_accumulate_scale) {
    const int64_t n = 5003;
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 3; j++) {
            char what[64];
            snprintf(what, sizeof what, "%s, %s", dtn(DTS[k]), dtn(DTS[j]));
            Twin a = twin_uniform(DTS[k], 1, OCR_SHAPE(n), -3, 3), b = twin_uniform(DTS[j], 1, OCR_SHAPE(n), -3, 3);
            Twin y = twin_new(DTS[(k + j) % 3], 1, OCR_SHAPE(n));
            ocr_add_forward(&y.h, &a.h, &b.h);
            ocr_add_forward(&y.d, &a.d, &b.d);
            ck_assert_msg(twin_bits(&y, "add"), "%s", what);
            ocr_accumulate(&a.h, &b.h);
            ocr_accumulate(&a.d, &b.d);
            ck_assert_msg(twin_bits(&a, "accumulate"), "%s", what);
            ocr_scale_forward(&y.h, &b.h, -0.37f);
            ocr_scale_forward(&y.d, &b.d, -0.37f);
            ck_assert_msg(twin_bits(&y, "scale"), "%s", what);
            ocr_scale_forward(&b.h, &b.h, 3.5f);  // in place
            ocr_scale_forward(&b.d, &b.d, 3.5f);
            ck_assert_msg(twin_bits(&b, "scale in place"), "%s", what);
            ocr_add_forward(&b.h, &b.h, &a.h);  // out aliases an input
            ocr_add_forward(&b.d, &b.d, &a.d);
            ck_assert_msg(twin_bits(&b, "add in place"), "%s", what);
            Twin da = twin_new(DTS[j], 1, OCR_SHAPE(n)), db = twin_new(DTS[k], 1, OCR_SHAPE(n));
            ocr_add_backward(&da.h, &db.h, &a.h);
            ocr_add_backward(&da.d, &db.d, &a.d);
            ck_assert_msg(twin_bits(&da, "add_backward da"), "%s", what);
            ck_assert_msg(twin_bits(&db, "add_backward db"), "%s", what);
            twin_free(&a), twin_free(&b), twin_free(&y), twin_free(&da), twin_free(&db);
        }
}
END_TEST

START_TEST(test_zero) {
    const ocr_dtype_t all[5] = {OCR_F32, OCR_F16, OCR_BF16, OCR_I32, OCR_U8};
    for (int k = 0; k < 5; k++) {
        Twin t = twin_new(all[k], 2, OCR_SHAPE(17, 33));
        ocr_zero_tensor(&t.h);
        ocr_zero_tensor(&t.d);
        ck_assert_msg(twin_bits(&t, "zero_tensor"), "%s", dtn(all[k]));
        twin_free(&t);
    }
}
END_TEST

START_TEST(test_concat) {
    const int64_t R0 = 4, R1 = 9;
    const int64_t widths[3] = {5, 16, 3};
    for (int k = 0; k < 3; k++) {
        Twin parts[3];
        for (int i = 0; i < 3; i++) parts[i] = twin_uniform(DTS[(k + i) % 3], 3, OCR_SHAPE(R0, R1, widths[i]), -2, 2);
        Twin y = twin_new(DTS[k], 3, OCR_SHAPE(R0, R1, 24));
        const OcrTensor *hin[3] = {&parts[0].h, &parts[1].h, &parts[2].h};
        const OcrTensor *din[3] = {&parts[0].d, &parts[1].d, &parts[2].d};
        ocr_concat_forward(&y.h, hin, 3);
        ocr_concat_forward(&y.d, din, 3);
        ck_assert_msg(twin_bits(&y, "concat forward"), "%s", dtn(DTS[k]));
        Twin dy = twin_uniform(DTS[k], 3, OCR_SHAPE(R0, R1, 24), -1, 1);
        Twin g[3];
        for (int i = 0; i < 3; i++) g[i] = twin_new(DTS[(k + 2 * i) % 3], 3, OCR_SHAPE(R0, R1, widths[i]));
        OcrTensor *hg[3] = {&g[0].h, &g[1].h, &g[2].h}, *dg[3] = {&g[0].d, &g[1].d, &g[2].d};
        ocr_concat_backward(hg, 3, &dy.h);
        ocr_concat_backward(dg, 3, &dy.d);
        for (int i = 0; i < 3; i++) ck_assert_msg(twin_bits(&g[i], "concat backward"), "%s part %d", dtn(DTS[k]), i);
        // The middle gradient not wanted.
        for (int i = 0; i < 3; i++) twin_poison(&g[i]);
        hg[1] = dg[1] = NULL;
        ocr_concat_backward(hg, 3, &dy.h);
        ocr_concat_backward(dg, 3, &dy.d);
        ck_assert(twin_bits(&g[0], "concat backward, NULL middle, first"));
        ck_assert(twin_bits(&g[2], "concat backward, NULL middle, last"));
        for (int i = 0; i < 3; i++) twin_free(&parts[i]), twin_free(&g[i]);
        twin_free(&y), twin_free(&dy);
    }
}
END_TEST

START_TEST(test_permute) {
    const int64_t shape4[4] = {3, 5, 7, 4};
    int perm[4];
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 4; c++)
                for (int d = 0; d < 4; d++) {
                    if (a == b || a == c || a == d || b == c || b == d || c == d) continue;
                    perm[0] = a, perm[1] = b, perm[2] = c, perm[3] = d;
                    const int k = (a + b) % 3, j = (c + 2 * d) % 3;
                    Twin x = twin_uniform(DTS[k], 4, shape4, -2, 2);
                    int64_t os[4] = {shape4[a], shape4[b], shape4[c], shape4[d]};
                    Twin y = twin_new(DTS[j], 4, os);
                    ocr_permute_forward(&y.h, &x.h, perm);
                    ocr_permute_forward(&y.d, &x.d, perm);
                    ck_assert_msg(twin_bits(&y, "permute forward"), "perm %d%d%d%d", a, b, c, d);
                    Twin dx = twin_new(DTS[k], 4, shape4);
                    ocr_permute_backward(&dx.h, &y.h, perm);
                    ocr_permute_backward(&dx.d, &y.d, perm);
                    ck_assert_msg(twin_bits(&dx, "permute backward"), "perm %d%d%d%d", a, b, c, d);
                    twin_free(&x), twin_free(&y), twin_free(&dx);
                }
    // 3-d: (B, T, C) <-> (T, B, C) style.
    const int p3[3] = {1, 0, 2};
    Twin x = twin_uniform(OCR_F16, 3, OCR_SHAPE(6, 40, 9), -1, 1);
    Twin y = twin_new(OCR_F16, 3, OCR_SHAPE(40, 6, 9));
    ocr_permute_forward(&y.h, &x.h, p3);
    ocr_permute_forward(&y.d, &x.d, p3);
    ck_assert(twin_bits(&y, "permute 3-d"));
    twin_free(&x), twin_free(&y);
}
END_TEST

// NaN payloads survive pure data movement when the dtypes agree.
START_TEST(test_nan_payloads_move_exactly) {
    const int64_t n = 64;
    Twin x = twin_new(OCR_F32, 2, OCR_SHAPE(2, n / 2));
    uint32_t *bits = x.h.data;
    for (int64_t i = 0; i < n; i++) bits[i] = 0x7f800001u + (uint32_t)i * 977u;  // signalling and quiet NaNs
    twin_sync_up(&x);
    Twin y = twin_new(OCR_F32, 2, OCR_SHAPE(2, n));
    const OcrTensor *hin[2] = {&x.h, &x.h}, *din[2] = {&x.d, &x.d};
    ocr_concat_forward(&y.h, hin, 2);
    ocr_concat_forward(&y.d, din, 2);
    ck_assert(twin_bits(&y, "concat of NaN payloads"));
    twin_free(&x), twin_free(&y);
}
END_TEST

START_TEST(test_input_normalize) {
    const int64_t N = 3, H = 8, W = 50, C = 3;
    Twin p = twin_new(OCR_U8, 4, OCR_SHAPE(N, H, W, C));
    uint8_t *v = p.h.data;
    for (int64_t i = 0; i < N * H * W * C; i++) v[i] = (uint8_t)((i * 37 + 11) & 255);
    for (int i = 0; i < 256; i++) v[i] = (uint8_t)i;
    twin_sync_up(&p);
    for (int k = 0; k < 3; k++) {
        Twin y = twin_new(DTS[k], 4, OCR_SHAPE(N, H, W, C));
        ocr_input_normalize_forward(&y.h, &p.h);
        ocr_input_normalize_forward(&y.d, &p.d);
        ck_assert_msg(twin_bits(&y, "input_normalize"), "%s", dtn(DTS[k]));
        twin_free(&y);
    }
    twin_free(&p);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("gpu_elementwise");
    TCase *tc = tcase_create("elementwise");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_channel_scale);
    tcase_add_test(tc, test_add_accumulate_scale);
    tcase_add_test(tc, test_zero);
    tcase_add_test(tc, test_concat);
    tcase_add_test(tc, test_permute);
    tcase_add_test(tc, test_nan_payloads_move_exactly);
    tcase_add_test(tc, test_input_normalize);
    suite_add_tcase(s, tc);
    return s;
}

#endif

GPU_TEST_MAIN("gpu_elementwise", suite)

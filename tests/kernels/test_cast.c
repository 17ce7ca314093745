// cast_forward/backward and unscale_and_check.
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "kernels/ops.h"
#include "tests/common/test_util.h"

// Every f16 and bf16 bit pattern survives a round trip through f32 (NaNs stay NaN).
START_TEST(test_cast_round_trip_all_patterns) {
    const ocr_dtype_t lows[2] = {OCR_F16, OCR_BF16};
    for (int k = 0; k < 2; k++) {
        OcrTensor h = ocr_test_tensor(lows[k], 1, OCR_SHAPE(65536), NULL);
        OcrTensor f = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(65536), NULL);
        OcrTensor back = ocr_test_tensor(lows[k], 1, OCR_SHAPE(65536), NULL);
        uint16_t *hb = h.data, *bb = back.data;
        for (int i = 0; i < 65536; i++) hb[i] = (uint16_t)i;
        ocr_cast_forward(&f, &h);
        ocr_cast_backward(&back, &f);  // the backward of a cast to f32 is a cast back
        for (int i = 0; i < 65536; i++) {
            float v = ((float *)f.data)[i];
            float want = lows[k] == OCR_F16 ? ocr_f16_to_f32(hb[i]) : ocr_bf16_to_f32(hb[i]);
            int is_nan = lows[k] == OCR_F16 ? ((hb[i] & 0x7c00) == 0x7c00 && (hb[i] & 0x3ff))
                                            : ((hb[i] & 0x7f80) == 0x7f80 && (hb[i] & 0x7f));
            if (is_nan) {
                ck_assert_msg(isnan(v), "%s 0x%04x -> %g", ocr_dtype_name(lows[k]), i, v);
                ck_assert_msg(isnan(lows[k] == OCR_F16 ? ocr_f16_to_f32(bb[i]) : ocr_bf16_to_f32(bb[i])),
                              "NaN 0x%04x did not come back as NaN", i);
            } else {
                ck_assert_msg(memcmp(&v, &want, 4) == 0, "%s 0x%04x -> %g, want %g", ocr_dtype_name(lows[k]), i, v,
                              want);
                ck_assert_msg(bb[i] == hb[i], "%s 0x%04x came back as 0x%04x", ocr_dtype_name(lows[k]), i, bb[i]);
            }
        }
        ocr_tensor_free(&h);
        ocr_tensor_free(&f);
        ocr_tensor_free(&back);
    }
}
END_TEST

// f32 -> f16 / bf16 rounds to nearest even, with overflow to inf and subnormals handled;
// f16 <-> bf16 rounds once (through the exact f32 value).
START_TEST(test_cast_rounding) {
    float xs[] = {
        1.0f + ldexpf(1, -11),      // f16 tie: to even (1)
        1.0f + 3 * ldexpf(1, -11),  // f16 tie: to even (1 + 2^-9)
        1.0f + ldexpf(1, -11) + ldexpf(1, -20),  // just above the tie: up
        1.0f + ldexpf(1, -8),       // bf16 tie: to even (1)
        1.0f + 3 * ldexpf(1, -8),   // bf16 tie: up
        65519.0f, 65520.0f, -70000.0f,  // f16: largest that rounds to 65504, first to inf
        ldexpf(1, -24), ldexpf(1, -25), ldexpf(3, -26), ldexpf(3, -25),  // f16 subnormal edge: 1, ½, ¾, 1½ units
        -0.0f, INFINITY, -INFINITY, 3.0e38f,
    };
    const uint16_t want_f16[] = {0x3c00, 0x3c02, 0x3c01, 0x3c04, 0x3c0c, 0x7bff, 0x7c00, 0xfc00,
                                 0x0001, 0x0000, 0x0001, 0x0002, 0x8000, 0x7c00, 0xfc00, 0x7c00};
    const uint16_t want_bf16[] = {0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f82, 0x4780, 0x4780, 0xc789,
                                  0x3380, 0x3300, 0x3340, 0x33c0, 0x8000, 0x7f80, 0xff80, 0x7f62};
    const int n = (int)(sizeof xs / sizeof xs[0]);
    OcrTensor f = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), xs);
    OcrTensor h = ocr_test_tensor(OCR_F16, 1, OCR_SHAPE(n), NULL);
    OcrTensor b = ocr_test_tensor(OCR_BF16, 1, OCR_SHAPE(n), NULL);
    ocr_cast_forward(&h, &f);
    ocr_cast_forward(&b, &f);
    for (int i = 0; i < n; i++) {
        ck_assert_msg(((uint16_t *)h.data)[i] == want_f16[i], "f16(%a) = 0x%04x want 0x%04x", (double)xs[i],
                      ((uint16_t *)h.data)[i], want_f16[i]);
        ck_assert_msg(((uint16_t *)b.data)[i] == want_bf16[i], "bf16(%a) = 0x%04x want 0x%04x", (double)xs[i],
                      ((uint16_t *)b.data)[i], want_bf16[i]);
    }
    // f16 -> bf16 (bf16 ulp at 1 is 2^-7): 0.375 ulp rounds down, 0.75 up, 1.5 ties to even.
    uint16_t hv[3] = {0x3c03, 0x3c06, 0x3c0c};  // 1+3·2^-10, 1+6·2^-10, 1+12·2^-10
    const uint16_t bw[3] = {0x3f80, 0x3f81, 0x3f82};
    OcrTensor h3 = ocr_test_tensor(OCR_F16, 1, OCR_SHAPE(3), NULL);
    OcrTensor b3 = ocr_test_tensor(OCR_BF16, 1, OCR_SHAPE(3), NULL);
    OcrTensor h3b = ocr_test_tensor(OCR_F16, 1, OCR_SHAPE(3), NULL);
    memcpy(h3.data, hv, sizeof hv);
    ocr_cast_forward(&b3, &h3);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(((uint16_t *)b3.data)[i] == bw[i], "f16 0x%04x -> bf16 0x%04x want 0x%04x", hv[i],
                      ((uint16_t *)b3.data)[i], bw[i]);
    ocr_cast_backward(&h3b, &b3);  // bf16 -> f16 is exact for these
    for (int i = 0; i < 3; i++)
        ck_assert(ocr_f16_to_f32(((uint16_t *)h3b.data)[i]) == ocr_bf16_to_f32(((uint16_t *)b3.data)[i]));
    ocr_tensor_free(&f);
    ocr_tensor_free(&h);
    ocr_tensor_free(&b);
    ocr_tensor_free(&h3);
    ocr_tensor_free(&b3);
    ocr_tensor_free(&h3b);
}
END_TEST

// A large tensor (several parallel chunks) matches element-wise scalar conversion; same-dtype
// casts copy exactly, and a cast onto itself leaves the data alone.
START_TEST(test_cast_bulk_and_same_dtype) {
    const int64_t n = 20000;
    float *xs = malloc((size_t)n * sizeof(float));
    ocr_test_fill_uniform(xs, n, 3, -70000.0f, 70000.0f);
    for (int64_t i = 0; i < n; i += 7) xs[i] *= 1e-9f;  // some tiny values
    OcrTensor f = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(100, 200), xs);
    OcrTensor h = ocr_test_tensor(OCR_F16, 2, OCR_SHAPE(100, 200), NULL);
    OcrTensor b = ocr_test_tensor(OCR_BF16, 2, OCR_SHAPE(200, 100), NULL);
    OcrTensor f2 = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(100, 200), NULL);
    ocr_cast_forward(&h, &f);
    ocr_cast_forward(&b, &h);
    ocr_cast_forward(&f2, &f);
    for (int64_t i = 0; i < n; i++) {
        ck_assert(((uint16_t *)h.data)[i] == ocr_f32_to_f16(xs[i]));
        ck_assert(((uint16_t *)b.data)[i] == ocr_f32_to_bf16(ocr_f16_to_f32(ocr_f32_to_f16(xs[i]))));
        ck_assert(((float *)f2.data)[i] == xs[i]);
    }
    ocr_cast_forward(&f2, &f2);
    ck_assert(memcmp(f2.data, xs, (size_t)n * 4) == 0);
    free(xs);
    ocr_tensor_free(&f);
    ocr_tensor_free(&h);
    ocr_tensor_free(&b);
    ocr_tensor_free(&f2);
}
END_TEST

// ---- unscale_and_check ----------------------------------------------------------------------
START_TEST(test_unscale_finite) {
    const ocr_dtype_t dts[3] = {OCR_F32, OCR_F16, OCR_BF16};
    const int64_t sizes[3] = {50, 40000, 7};  // the middle one runs the parallel path
    OcrTensor g[3];
    float *orig[3];
    for (int k = 0; k < 3; k++) {
        orig[k] = malloc((size_t)sizes[k] * sizeof(float));
        ocr_test_fill_uniform(orig[k], sizes[k], 10 + k, -512.0f, 512.0f);
        g[k] = ocr_test_tensor(dts[k], 1, OCR_SHAPE(sizes[k]), orig[k]);
        for (int64_t i = 0; i < sizes[k]; i++) orig[k][i] = ocr_tensor_get_f32(&g[k], i);  // as stored
    }
    OcrTensor *list[3] = {&g[0], &g[1], &g[2]};
    float amax[3] = {NAN, NAN, NAN};
    int nonfinite[3] = {-1, -1, -1};
    const float inv_scale = 1.0f / 1024.0f;
    int any = ocr_unscale_and_check(list, 3, inv_scale, amax, nonfinite);
    ck_assert_int_eq(any, 0);
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(nonfinite[k], 0);
        double want_amax = 0;
        for (int64_t i = 0; i < sizes[k]; i++) {
            // Multiplying by a power of two is exact in every dtype (no subnormals here).
            float want = orig[k][i] * inv_scale;
            float got = ocr_tensor_get_f32(&g[k], i);
            ck_assert_msg(got == want, "%s[%lld] = %g want %g", ocr_dtype_name(dts[k]), (long long)i, got, want);
            want_amax = fmax(want_amax, fabs(want));
        }
        ck_assert_msg(amax[k] == (float)want_amax, "amax[%d] = %g want %g", k, amax[k], want_amax);
        free(orig[k]);
        ocr_tensor_free(&g[k]);
    }
}
END_TEST

// inf in one tensor and NaN in another of several: flags per tensor, return 1, amax over the
// finite values only; NULL output arrays are allowed.
START_TEST(test_unscale_nonfinite) {
    const ocr_dtype_t dts[4] = {OCR_F16, OCR_F32, OCR_BF16, OCR_F32};
    OcrTensor g[4];
    for (int k = 0; k < 4; k++) {
        float xs[9];
        for (int i = 0; i < 9; i++) xs[i] = (float)(i - 4) * (k + 1);  // amax 4·(k+1)
        g[k] = ocr_test_tensor(dts[k], 1, OCR_SHAPE(9), xs);
    }
    ocr_tensor_set_f32(&g[0], 3, INFINITY);
    ocr_tensor_set_f32(&g[0], 8, -INFINITY);  // replaces the +4 entry: amax comes from the -4
    ocr_tensor_set_f32(&g[2], 5, NAN);
    OcrTensor *list[4] = {&g[0], &g[1], &g[2], &g[3]};
    float amax[4];
    int nonfinite[4];
    int any = ocr_unscale_and_check(list, 4, 0.5f, amax, nonfinite);
    ck_assert_int_eq(any, 1);
    ck_assert_int_eq(nonfinite[0], 1);
    ck_assert_int_eq(nonfinite[1], 0);
    ck_assert_int_eq(nonfinite[2], 1);
    ck_assert_int_eq(nonfinite[3], 0);
    // g0's finite values are -4, -3, -2, 0, 1, 2, 3: amax 4 · 0.5.
    ck_assert_msg(amax[0] == 2.0f, "amax0 %g", amax[0]);
    ck_assert_msg(amax[1] == 4.0f, "amax1 %g", amax[1]);
    ck_assert_msg(amax[2] == 6.0f, "amax2 %g", amax[2]);
    ck_assert_msg(amax[3] == 8.0f, "amax3 %g", amax[3]);
    ck_assert(isinf(ocr_tensor_get_f32(&g[0], 3)));
    ck_assert(isnan(ocr_tensor_get_f32(&g[2], 5)));
    ck_assert(ocr_tensor_get_f32(&g[3], 0) == -8.0f);  // finite tensors are still unscaled

    // An f16 value that only overflows when unscaled upwards (inv_scale > 1) counts as overflow.
    OcrTensor h = ocr_test_tensor(OCR_F16, 1, OCR_SHAPE(2), (float[]){40000.0f, 1.0f});
    OcrTensor *one[1] = {&h};
    ck_assert_int_eq(ocr_unscale_and_check(one, 1, 2.0f, NULL, NULL), 1);
    // And the plain finite case with NULL arrays returns 0.
    ocr_tensor_fill(&h, 3.0f);
    ck_assert_int_eq(ocr_unscale_and_check(one, 1, 0.25f, NULL, NULL), 0);
    ck_assert(ocr_tensor_get_f32(&h, 1) == 0.75f);
    for (int k = 0; k < 4; k++) ocr_tensor_free(&g[k]);
    ocr_tensor_free(&h);
}
END_TEST

// A NaN deep inside a large tensor (parallel path) is found.
START_TEST(test_unscale_large_nan) {
    const int64_t n = 100003;
    OcrTensor g = ocr_test_tensor(OCR_BF16, 1, OCR_SHAPE(n), NULL);
    ocr_tensor_fill(&g, 2.0f);
    ocr_tensor_set_f32(&g, n - 2, NAN);
    ocr_tensor_set_f32(&g, 17, -6.0f);
    OcrTensor *list[1] = {&g};
    float amax;
    int nf;
    ck_assert_int_eq(ocr_unscale_and_check(list, 1, 0.5f, &amax, &nf), 1);
    ck_assert_int_eq(nf, 1);
    ck_assert(amax == 3.0f);
    ocr_tensor_free(&g);
}
END_TEST

// f16 / bf16 at inv_scale 1, the AMP engine's call (Adam applies the scale): the values stay as
// they are, bit for bit (subnormals and negative zero included), amax is the largest finite
// magnitude, and a NaN or infinity anywhere (here past the parallel threshold) is flagged with
// amax still over the finite values only.
START_TEST(test_unscale_unit_scale_half) {
    const ocr_dtype_t dts[2] = {OCR_F16, OCR_BF16};
    const int64_t n = 40001;
    for (int k = 0; k < 2; k++) {
        OcrTensor g = ocr_test_tensor(dts[k], 1, OCR_SHAPE(n), NULL);
        uint16_t *x = g.data;
        for (int64_t i = 0; i < n; i++) x[i] = (uint16_t)((i * 7919u) & 0x7fffu);  // every magnitude class
        for (int64_t i = 0; i < n; i++)
            if ((x[i] & 0x7fffu) >= (dts[k] == OCR_F16 ? 0x7c00u : 0x7f80u)) x[i] = (uint16_t)(x[i] & 0x03ffu);
        for (int64_t i = 1; i < n; i += 3) x[i] |= 0x8000u;  // negatives
        x[5] = 0x8000u;                                       // −0
        uint16_t *before = malloc((size_t)n * sizeof *before);
        memcpy(before, x, (size_t)n * sizeof *before);
        double want = 0;
        for (int64_t i = 0; i < n; i++) want = fmax(want, fabs(ocr_tensor_get_f32(&g, i)));
        OcrTensor *list[1] = {&g};
        float amax = NAN;
        int nf = -1;
        ck_assert_int_eq(ocr_unscale_and_check(list, 1, 1.0f, &amax, &nf), 0);
        ck_assert_int_eq(nf, 0);
        ck_assert_msg(amax == (float)want, "%s amax %g want %g", ocr_dtype_name(dts[k]), amax, want);
        ck_assert(memcmp(before, x, (size_t)n * sizeof *before) == 0);

        ocr_tensor_set_f32(&g, n - 3, NAN);
        ocr_tensor_set_f32(&g, 11, -INFINITY);
        ck_assert_int_eq(ocr_unscale_and_check(list, 1, 1.0f, &amax, &nf), 1);
        ck_assert_int_eq(nf, 1);
        double want_finite = 0;
        for (int64_t i = 0; i < n; i++) {
            float v = ocr_tensor_get_f32(&g, i);
            if (isfinite(v)) want_finite = fmax(want_finite, fabs(v));
        }
        ck_assert_msg(amax == (float)want_finite, "%s amax with a NaN %g want %g", ocr_dtype_name(dts[k]), amax,
                      want_finite);
        ck_assert(isnan(ocr_tensor_get_f32(&g, n - 3)) && isinf(ocr_tensor_get_f32(&g, 11)));
        free(before);
        ocr_tensor_free(&g);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("kernels_cast");
    TCase *tc = tcase_create("cast");
    tcase_add_test(tc, test_cast_round_trip_all_patterns);
    tcase_add_test(tc, test_cast_rounding);
    tcase_add_test(tc, test_cast_bulk_and_same_dtype);
    tcase_add_test(tc, test_unscale_finite);
    tcase_add_test(tc, test_unscale_nonfinite);
    tcase_add_test(tc, test_unscale_large_nan);
    tcase_add_test(tc, test_unscale_unit_scale_half);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

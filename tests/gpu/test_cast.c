// Casts and the AMP unscale/finite check on the GPU against the CPU twins, bit for bit: every
// dtype pair over random values plus the specials (NaN payloads, ±inf, subnormals, values at
// rounding ties and at the f16 overflow threshold); unscale_and_check's gradients, amax,
// per-tensor flags and result, including an overflow that only appears when writing back into
// f16, NULL entries, and the asynchronous device-side form.
#include "kernels/cuda/cuda_ops.h"
#include "tests/gpu/gpu_test.h"

#ifdef OCR_HAVE_CUDA

static const ocr_dtype_t DTS[3] = {OCR_F32, OCR_F16, OCR_BF16};

static Twin special_f32(int64_t n) {
    Twin t = twin_uniform(OCR_F32, 1, OCR_SHAPE(n), -70000.0f, 70000.0f);
    uint32_t *u = t.h.data;
    const uint32_t specials[] = {0x7fc00000u, 0x7f800001u, 0xffa00001u, 0x7fffe000u, 0x7f800000u, 0xff800000u,
                                 0x00000001u, 0x80000010u, 0x33000000u, 0x33000001u, 0x387fc000u, 0x477ff000u,
                                 0x477fefffu, 0xc77ff000u, 0x3f808000u, 0x3f818000u, 0x3f800fffu, 0x3f801000u,
                                 0x3f803000u, 0x7f7fffffu, 0x00800000u, 0x38800000u, 0x337fffffu};
    const int ns = (int)(sizeof specials / sizeof specials[0]);
    for (int i = 0; i < ns; i++) u[i * 7] = specials[i];
    for (int64_t i = 200; i < n; i += 5) u[i] = (u[i] & 0xffff0000u) | 0x8000u;  // bf16 ties
    for (int64_t i = 201; i < n; i += 5) u[i] = (u[i] & 0xffffe000u) | 0x1000u;  // f16 ties
    twin_sync_up(&t);
    return t;
}

START_TEST(test_casts) {
    const int64_t n = 4000;
    Twin src = special_f32(n);
    for (int a = 0; a < 3; a++) {
        Twin x = twin_new(DTS[a], 1, OCR_SHAPE(n));
        ocr_cast_forward(&x.h, &src.h);
        ocr_cast_forward(&x.d, &src.d);
        ck_assert_msg(twin_bits(&x, "cast from f32"), "-> %s", dtn(DTS[a]));
        for (int b = 0; b < 3; b++) {
            Twin y = twin_new(DTS[b], 1, OCR_SHAPE(n));
            ocr_cast_forward(&y.h, &x.h);
            ocr_cast_forward(&y.d, &x.d);
            ck_assert_msg(twin_bits(&y, "cast"), "%s -> %s", dtn(DTS[a]), dtn(DTS[b]));
            twin_poison(&y);
            ocr_cast_backward(&y.h, &x.h);
            ocr_cast_backward(&y.d, &x.d);
            ck_assert_msg(twin_bits(&y, "cast_backward"), "%s -> %s", dtn(DTS[a]), dtn(DTS[b]));
            twin_free(&y);
        }
        // Every 16-bit pattern of the half dtypes, widened and narrowed again.
        if (DTS[a] != OCR_F32) {
            Twin h = twin_new(DTS[a], 1, OCR_SHAPE(65536));
            for (uint32_t i = 0; i < 65536; i++) ((uint16_t *)h.h.data)[i] = (uint16_t)i;
            twin_sync_up(&h);
            Twin f = twin_new(OCR_F32, 1, OCR_SHAPE(65536));
            ocr_cast_forward(&f.h, &h.h);
            ocr_cast_forward(&f.d, &h.d);
            ck_assert_msg(twin_bits(&f, "widen every pattern"), "%s", dtn(DTS[a]));
            Twin o = twin_new(DTS[3 - a], 1, OCR_SHAPE(65536));
            ocr_cast_forward(&o.h, &h.h);
            ocr_cast_forward(&o.d, &h.d);
            ck_assert_msg(twin_bits(&o, "half to half, every pattern"), "%s", dtn(DTS[a]));
            twin_free(&h), twin_free(&f), twin_free(&o);
        }
        twin_free(&x);
    }
    twin_free(&src);
}
END_TEST

START_TEST(test_unscale_and_check) {
    // Four tensors: clean f32, f16 that overflows only after unscaling by 4 (inv_scale > 1),
    // bf16 with a NaN, NULL, clean f16.
    const int64_t sizes[5] = {1000, 3000, 777, 0, 70000};
    const ocr_dtype_t dts[5] = {OCR_F32, OCR_F16, OCR_BF16, OCR_F32, OCR_F16};
    const float invs[3] = {0.25f, 4.0f, 1.0f};
    for (int is = 0; is < 3; is++) {
        Twin g[5];
        OcrTensor *gh[5], *gd[5];
        for (int i = 0; i < 5; i++) {
            if (i == 3) {
                gh[i] = gd[i] = NULL;
                continue;
            }
            g[i] = twin_uniform(dts[i], 1, OCR_SHAPE(sizes[i]), -100, 100);
            gh[i] = &g[i].h;
            gd[i] = &g[i].d;
        }
        ocr_tensor_set_f32(&g[1].h, 17, 30000.0f);  // × 4 overflows f16
        ocr_tensor_set_f32(&g[2].h, 5, NAN);
        twin_sync_up(&g[1]);
        twin_sync_up(&g[2]);
        float ah[5], ad[5];
        int nh[5], nd[5];
        memset(ad, 0xff, sizeof ad);
        memset(nd, 0xff, sizeof nd);
        int rh = ocr_unscale_and_check(gh, 5, invs[is], ah, nh);
        int rd = ocr_unscale_and_check(gd, 5, invs[is], ad, nd);
        ck_assert_int_eq(rh, rd);
        for (int i = 0; i < 5; i++) {
            ck_assert_msg(memcmp(&ah[i], &ad[i], sizeof(float)) == 0, "amax[%d] gpu %g cpu %g (inv %g)", i,
                          (double)ad[i], (double)ah[i], (double)invs[is]);
            ck_assert_msg(nh[i] == nd[i], "nonfinite[%d] gpu %d cpu %d", i, nd[i], nh[i]);
            if (i != 3) ck_assert_msg(twin_bits(&g[i], "unscaled gradient"), "tensor %d inv %g", i, (double)invs[is]);
        }
        // NULL result arrays.
        ck_assert_int_eq(ocr_unscale_and_check(gd, 5, 1.0f, NULL, NULL),
                         ocr_unscale_and_check(gh, 5, 1.0f, NULL, NULL));

        // The asynchronous form: inverse scale, amax, flags and found-inf on the device.
        for (int i = 0; i < 5; i++)
            if (i != 3) twin_sync_up(&g[i]);
        Twin dev = twin_new(OCR_F32, 1, OCR_SHAPE(16));
        ocr_zero_tensor(&dev.d);
        float *dp = dev.d.data;
        ck_assert_int_eq(ocr_cuda_memcpy(dp, &invs[is], sizeof(float)), 0);
        ocr_cuda_unscale_and_check_async(gd, 5, dp, dp + 1, (int *)(dp + 6), (int *)(dp + 11));
        ocr_unscale_and_check(gh, 5, invs[is], ah, nh);
        float back[16];
        ck_assert_int_eq(ocr_cuda_synchronize(0), 0);
        ck_assert_int_eq(ocr_cuda_memcpy(back, dp, sizeof back), 0);
        int any = 0;
        for (int i = 0; i < 5; i++) {
            int flag;
            memcpy(&flag, &back[6 + i], sizeof flag);
            ck_assert_msg(memcmp(&back[1 + i], &ah[i], sizeof(float)) == 0, "async amax[%d]", i);
            ck_assert_msg(flag == nh[i], "async nonfinite[%d]", i);
            any |= nh[i];
            if (i != 3) ck_assert_msg(twin_bits(&g[i], "async unscaled gradient"), "tensor %d", i);
        }
        int found;
        memcpy(&found, &back[11], sizeof found);
        ck_assert_int_eq(found, any);
        twin_free(&dev);
        for (int i = 0; i < 5; i++)
            if (i != 3) twin_free(&g[i]);
    }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("gpu_cast");
    TCase *tc = tcase_create("cast");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_casts);
    tcase_add_test(tc, test_unscale_and_check);
    suite_add_tcase(s, tc);
    return s;
}

#endif

GPU_TEST_MAIN("gpu_cast", suite)

// The model's uint8 input path (ocr_model_forward_u8): the loader's batch with per-sample
// widths, normalised into the activation arena. It must give exactly what the float path gives
// on images normalised PaddleOCR's way (real pixels bit-exact, padding exactly 0), in f32 and
// in f16 (where the float path's first conv rounds its f32 input: autocast), plan exactly, and
// reject bad batches with a message.
#include "kernels/input.h"
#include "tests/models/model_test_util.h"

static const char *const SMALL[] = {"Global.character_dict_path=\"\"", "Architecture.Head.out_channels=11", NULL};

enum { B = 3, H = 32, W = 40, C = 3 };
static const int32_t WIDTHS[B] = {40, 13, 1};

// A loader-style batch: random pixels, byte 128 past each width.
static OcrTensor u8_batch(uint64_t seed) {
    OcrTensor t = ocr_test_tensor(OCR_U8, 4, OCR_SHAPE(B, H, W, C), NULL);
    uint8_t *p = t.data;
    for (int64_t i = 0; i < (int64_t)B * H * W * C; i++) {
        int64_t b = i / ((int64_t)H * W * C), x = i / C % W;
        p[i] = x < WIDTHS[b] ? (uint8_t)(ocr_rng_uniform(seed, 3, (uint64_t)i) * 256.0f) : 128;
    }
    return t;
}

// PaddleOCR on the host: (p/255 − 0.5)/0.5 in float32, then the padding set to 0.
static OcrTensor host_normalised(const OcrTensor *u8) {
    float lut[256];
    ocr_input_normalize_lut(lut);
    OcrTensor t = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(B, H, W, C), NULL);
    const uint8_t *p = u8->data;
    float *v = t.data;
    for (int64_t i = 0; i < (int64_t)B * H * W * C; i++) {
        int64_t b = i / ((int64_t)H * W * C), x = i / C % W;
        v[i] = x < WIDTHS[b] ? lut[p[i]] : 0.0f;
    }
    return t;
}

static OcrTensor widths_tensor(void) {
    OcrTensor w = ocr_test_tensor(OCR_I32, 1, OCR_SHAPE(B), NULL);
    memcpy(w.data, WIDTHS, sizeof WIDTHS);
    return w;
}

static int same_tensor(const OcrTensor *a, const OcrTensor *b) {
    return a->dtype == b->dtype && ocr_tensor_same_shape(a, b) && memcmp(a->data, b->data, ocr_tensor_bytes(a)) == 0;
}

// u8 path on model a, float path on model b (built alike): the same logits and, after a
// training step, the same gradients, bit for bit.
static void compare_paths(const char *cfg, const char *const *ov, ocr_dtype_t compute) {
    OcrModel *a = tm_model(cfg, ov), *b = tm_model(cfg, ov);
    if (compute != OCR_F32) {
        ocr_model_set_compute_dtype(a, "*", NULL, compute);
        ocr_model_set_compute_dtype(b, "*", NULL, compute);
    }
    OcrTensor u8 = u8_batch(5), wt = widths_tensor(), f = host_normalised(&u8);
    for (int training = 0; training < 2; training++) {
        ck_assert_msg(ocr_model_forward_u8(a, &u8, &wt, training) == OCR_OK, "%s", ocr_last_error());
        ck_assert_msg(ocr_model_forward(b, &f, training) == OCR_OK, "%s", ocr_last_error());
        ck_assert_msg(same_tensor(ocr_model_logits(a), ocr_model_logits(b)), "%s %s training %d: logits differ", cfg,
                      ocr_dtype_name(compute), training);
        if (!training) continue;
        OcrTensor *da = ocr_model_dlogits(a), *db = ocr_model_dlogits(b);
        float *g = malloc((size_t)ocr_tensor_numel(da) * sizeof(float));
        ocr_test_fill_uniform(g, ocr_tensor_numel(da), 9, -0.01f, 0.01f);
        ocr_tensor_from_f32(da, g);
        ocr_tensor_from_f32(db, g);
        free(g);
        ck_assert(ocr_model_backward(a) == OCR_OK);
        ck_assert(ocr_model_backward(b) == OCR_OK);
        OcrParamTable *pa = ocr_model_params(a), *pb = ocr_model_params(b);
        ck_assert_msg(memcmp(pa->grad, pb->grad, pa->bytes) == 0, "%s %s: gradients differ", cfg,
                      ocr_dtype_name(compute));
    }
    ocr_tensor_free(&u8), ocr_tensor_free(&wt), ocr_tensor_free(&f);
    ocr_model_free(a);
    ocr_model_free(b);
}

START_TEST(test_u8_equals_paddle_normalisation) {
    compare_paths("rec_ppocrv3_en.json", SMALL, OCR_F32);
    compare_paths("rec_ppocrv3_en.json", SMALL, OCR_F16);
}
END_TEST

START_TEST(test_padding_is_zero_not_128) {
    // Without the widths the pad bytes become (128/255 − 0.5)/0.5 ≠ 0: a different result.
    OcrModel *m = tm_model("rec_ppocrv3_en.json", SMALL);
    OcrTensor u8 = u8_batch(6), wt = widths_tensor();
    ck_assert(ocr_model_forward_u8(m, &u8, &wt, 0) == OCR_OK);
    float *a = tm_copy_f32(ocr_model_logits(m));
    ck_assert(ocr_model_forward_u8(m, &u8, NULL, 0) == OCR_OK);
    float *b = tm_copy_f32(ocr_model_logits(m));
    const int64_t n = ocr_tensor_numel(ocr_model_logits(m)), per = n / B;
    // Sample 0 has no padding: identical; samples 1 and 2 differ.
    ck_assert_int_eq(memcmp(a, b, (size_t)per * sizeof(float)), 0);
    ck_assert_int_ne(memcmp(a + per, b + per, (size_t)per * sizeof(float)), 0);
    ck_assert_int_ne(memcmp(a + 2 * per, b + 2 * per, (size_t)per * sizeof(float)), 0);
    free(a), free(b);
    ocr_tensor_free(&u8), ocr_tensor_free(&wt);
    ocr_model_free(m);
}
END_TEST

START_TEST(test_u8_plan_is_exact) {
    static const char *const svtr_ov[] = {"Global.character_dict_path=\"\"", "Architecture.Head.out_channels=11",
                                          "Architecture.Backbone.img_size=[32, 40]", "Architecture.Backbone.out_char_num=5",
                                          NULL};
    const char *cfgs[2] = {"rec_ppocrv3_en.json", "rec_svtr_tiny.json"};
    for (int k = 0; k < 2; k++) {
        OcrModel *m = tm_model(cfgs[k], k ? svtr_ov : SMALL);
        OcrTensor u8 = u8_batch(7), wt = widths_tensor();
        for (int training = 1; training >= 0; training--) {
            OcrMemPlan pf, pu;
            ck_assert_msg(ocr_model_plan(m, B, H, W, training, &pf) == OCR_OK, "%s", ocr_last_error());
            ck_assert_msg(ocr_model_plan_u8(m, B, H, W, training, &pu) == OCR_OK, "%s", ocr_last_error());
            ck_assert(pu.input_u8 && !pf.input_u8);
            // Training keeps the normalised batch for the first layer's backward: it costs memory.
            if (training) ck_assert_int_ge(pu.activations_bytes, pf.activations_bytes + (int64_t)B * H * W * C * 4);
            ck_assert(ocr_model_forward_u8(m, &u8, &wt, training) == OCR_OK);
            int64_t peak, live;
            ocr_model_arena_usage(m, &peak, &live);
            // The pass reaches exactly the planned high-water mark (a real pass aborts past it).
            if (!training) ck_assert_int_eq(peak, pu.activations_bytes);
            if (training) {
                ck_assert_int_lt(peak, pu.activations_bytes);  // the backward needs more
                ocr_tensor_fill(ocr_model_dlogits(m), 1e-3f);
                ck_assert(ocr_model_backward(m) == OCR_OK);
                ocr_model_arena_usage(m, &peak, &live);
                ck_assert_int_eq(peak, pu.activations_bytes);
                ck_assert_int_eq(live, 0);
            }
        }
        ocr_tensor_free(&u8), ocr_tensor_free(&wt);
        ocr_model_free(m);
    }
}
END_TEST

START_TEST(test_bad_batches) {
    OcrModel *m = tm_model("rec_ppocrv3_en.json", SMALL);
    OcrTensor u8 = u8_batch(8), wt = widths_tensor(), f = host_normalised(&u8);
    ck_assert_int_eq(ocr_model_forward_u8(m, &f, &wt, 0), OCR_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "uint8"));
    ck_assert_int_eq(ocr_model_forward(m, &u8, 0), OCR_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "float"));
    OcrTensor w2 = ocr_test_tensor(OCR_I32, 1, OCR_SHAPE(B - 1), NULL);
    ck_assert_int_eq(ocr_model_forward_u8(m, &u8, &w2, 0), OCR_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "widths"));
    OcrTensor wf = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(B), NULL);
    ck_assert_int_eq(ocr_model_forward_u8(m, &u8, &wf, 0), OCR_ERR_INVALID_ARG);
    // A batch on another device than the parameters (a view: nothing is read).
    OcrTensor gpu = ocr_tensor_view(NULL, OCR_F32, ocr_cuda_device(0), 4, OCR_SHAPE(B, H, W, C));
    ck_assert_int_eq(ocr_model_forward(m, &gpu, 0), OCR_ERR_INVALID_ARG);
    ck_assert_msg(strstr(ocr_last_error(), "cuda:0") && strstr(ocr_last_error(), "cpu"), "%s", ocr_last_error());
    OcrTensor gw = ocr_tensor_view(NULL, OCR_I32, ocr_cuda_device(0), 1, OCR_SHAPE(B));
    ck_assert_int_eq(ocr_model_forward_u8(m, &u8, &gw, 0), OCR_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "widths"));
    ck_assert_ptr_null(ocr_model_logits(m));
    // Still usable after the rejections.
    ck_assert(ocr_model_forward_u8(m, &u8, &wt, 0) == OCR_OK);
    ocr_tensor_free(&u8), ocr_tensor_free(&wt), ocr_tensor_free(&f), ocr_tensor_free(&w2), ocr_tensor_free(&wf);
    ocr_model_free(m);
}
END_TEST

int main(void) {
    Suite *s = suite_create("models_input");
    TCase *tc = tcase_create("input");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_u8_equals_paddle_normalisation);
    tcase_add_test(tc, test_padding_is_zero_not_128);
    tcase_add_test(tc, test_u8_plan_is_exact);
    tcase_add_test(tc, test_bad_batches);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

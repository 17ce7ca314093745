// Softmax, log-softmax and the attention core on the GPU against the CPU twins: row widths
// below, at and far above a warp (a CTC head's 6625 classes), fully masked rows, in place,
// f32/f16/bf16; attention with and without mask (including a fully masked row), probs kept
// or not, dropout in training (both modes, the CPU's Philox draws) and downscale-in-infer,
// K/V in shared memory and (long sequences) in scratch.
#include <math.h>

#include "tests/gpu/gpu_test.h"

#ifdef OCR_HAVE_CUDA

#define SM_RTOL 1e-5
#define SM_ATOL 1e-6
#define ATT_TOL 2e-5

static const ocr_dtype_t DTS[3] = {OCR_F32, OCR_F16, OCR_BF16};

START_TEST(test_softmax_family) {
    const int64_t widths[4] = {7, 32, 97, 6625};
    for (int w = 0; w < 4; w++)
        for (int k = 0; k < 3; k++)
            for (int mode = 0; mode < 2; mode++) {
                const int64_t R = w == 3 ? 5 : 37, C = widths[w];
                char what[96];
                snprintf(what, sizeof what, "%s width %lld %s", mode ? "log_softmax" : "softmax", (long long)C,
                         dtn(DTS[k]));
                Twin x = twin_uniform(DTS[k], 2, OCR_SHAPE(R, C), -6, 6);
                // Row 1 fully masked, row 2 partly.
                for (int64_t j = 0; j < C; j++) ocr_tensor_set_f32(&x.h, C + j, -INFINITY);
                for (int64_t j = 0; j < C; j += 2) ocr_tensor_set_f32(&x.h, 2 * C + j, -INFINITY);
                twin_sync_up(&x);
                Twin y = twin_new(DTS[k], 2, OCR_SHAPE(R, C));
                if (mode) {
                    ocr_log_softmax_forward(&y.h, &x.h);
                    ocr_log_softmax_forward(&y.d, &x.d);
                } else {
                    ocr_softmax_forward(&y.h, &x.h);
                    ocr_softmax_forward(&y.d, &x.d);
                }
                ck_assert_msg(twin_close(&y, SM_RTOL, SM_ATOL, what), "%s forward", what);
                Twin dy = twin_uniform(DTS[k], 2, OCR_SHAPE(R, C), -1, 1);
                Twin dx = twin_new(DTS[k], 2, OCR_SHAPE(R, C));
                // The backward reads the forward's output: use the CPU's on both sides so the
                // comparison is of the backward alone (masked rows excluded: −inf·0).
                Twin yy = twin_uniform(DTS[k], 2, OCR_SHAPE(R, C), mode ? -8.0f : 0.0f, mode ? 0.0f : 1.0f);
                if (mode) {
                    ocr_log_softmax_backward(&dx.h, &dy.h, &yy.h);
                    ocr_log_softmax_backward(&dx.d, &dy.d, &yy.d);
                } else {
                    ocr_softmax_backward(&dx.h, &dy.h, &yy.h);
                    ocr_softmax_backward(&dx.d, &dy.d, &yy.d);
                }
                ck_assert_msg(twin_close(&dx, SM_RTOL, SM_ATOL, what), "%s backward", what);
                // In place.
                if (mode) {
                    ocr_log_softmax_forward(&x.h, &x.h);
                    ocr_log_softmax_forward(&x.d, &x.d);
                } else {
                    ocr_softmax_forward(&x.h, &x.h);
                    ocr_softmax_forward(&x.d, &x.d);
                }
                ck_assert_msg(twin_close(&x, SM_RTOL, SM_ATOL, what), "%s in place", what);
                twin_free(&x), twin_free(&y), twin_free(&dy), twin_free(&dx), twin_free(&yy);
            }
}
END_TEST

static DropoutParams drop(float p, ocr_dropout_mode_t mode, int training) {
    DropoutParams d = {p, mode, training, 0x1234abcdull, 17, 5};
    return d;
}

static void attn_case(int64_t B, int64_t T, int64_t H, int64_t D, ocr_dtype_t dt, int masked, int keep_probs,
                      DropoutParams dp) {
    const int64_t C = H * D;
    char what[160];
    snprintf(what, sizeof what, "attention B%lld T%lld H%lld D%lld %s mask %d probs %d drop p%g mode %d train %d",
             (long long)B, (long long)T, (long long)H, (long long)D, dtn(dt), masked, keep_probs, (double)dp.p,
             (int)dp.mode, dp.training);
    Twin qkv = twin_uniform(dt, 3, OCR_SHAPE(B, T, 3 * C), -1.5f, 1.5f);
    Twin mask = twin_new(OCR_F32, 2, OCR_SHAPE(T, T));
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < T; j++)
            ocr_tensor_set_f32(&mask.h, i * T + j, (i == 1 || (j > i + 3 && i % 3 == 0)) ? -INFINITY : 0.0f);
    twin_sync_up(&mask);
    Twin out = twin_new(dt, 3, OCR_SHAPE(B, T, C));
    Twin probs = twin_new(dt, 4, OCR_SHAPE(B, H, T, T));
    const float scale = 1.0f / sqrtf((float)D);
    ocr_attention_forward(&out.h, keep_probs ? &probs.h : NULL, &qkv.h, masked ? &mask.h : NULL, (int)H, scale, dp);
    ocr_attention_forward(&out.d, keep_probs ? &probs.d : NULL, &qkv.d, masked ? &mask.d : NULL, (int)H, scale, dp);
    ck_assert_msg(twin_close(&out, ATT_TOL, ATT_TOL, what), "%s: out", what);
    if (keep_probs) {
        ck_assert_msg(twin_close(&probs, SM_RTOL, SM_ATOL, what), "%s: probs", what);
        // The backward on the CPU's probs (both sides), to compare the backward alone.
        twin_sync_up(&probs);
        Twin dout = twin_uniform(dt, 3, OCR_SHAPE(B, T, C), -1, 1);
        Twin dqkv = twin_new(dt, 3, OCR_SHAPE(B, T, 3 * C));
        ocr_attention_backward(&dqkv.h, &dout.h, &qkv.h, &probs.h, (int)H, scale, dp);
        ocr_attention_backward(&dqkv.d, &dout.d, &qkv.d, &probs.d, (int)H, scale, dp);
        ck_assert_msg(twin_close(&dqkv, ATT_TOL, ATT_TOL, what), "%s: dqkv", what);
        twin_free(&dout), twin_free(&dqkv);
    }
    twin_free(&qkv), twin_free(&mask), twin_free(&out), twin_free(&probs);
}

START_TEST(test_attention) {
    const DropoutParams none = drop(0.0f, OCR_DROPOUT_UPSCALE_IN_TRAIN, 1);
    for (int k = 0; k < 3; k++) {
        attn_case(3, 40, 8, 8, DTS[k], 0, 1, none);   // PP-OCRv3 neck: 40 tokens, head dim 8
        attn_case(2, 13, 3, 12, DTS[k], 1, 1, none);  // mask with a fully masked row
        attn_case(2, 37, 2, 40, DTS[k], 0, 0, none);  // probs not kept
    }
    attn_case(2, 40, 4, 16, OCR_F32, 0, 1, drop(0.1f, OCR_DROPOUT_UPSCALE_IN_TRAIN, 1));
    attn_case(2, 40, 4, 16, OCR_F32, 1, 1, drop(0.3f, OCR_DROPOUT_DOWNSCALE_IN_INFER, 1));
    attn_case(2, 40, 4, 16, OCR_F16, 0, 1, drop(0.3f, OCR_DROPOUT_DOWNSCALE_IN_INFER, 0));
    attn_case(2, 40, 4, 16, OCR_F32, 0, 1, drop(0.3f, OCR_DROPOUT_UPSCALE_IN_TRAIN, 0));
    attn_case(1, 70, 2, 33, OCR_BF16, 1, 1, drop(0.2f, OCR_DROPOUT_UPSCALE_IN_TRAIN, 1));
}
END_TEST

// A long sequence: K and V (forward) and Q, K, V, dO (backward) do not fit in shared memory
// and go through scratch.
START_TEST(test_attention_long) {
    attn_case(1, 600, 2, 64, OCR_F32, 0, 1, drop(0.1f, OCR_DROPOUT_UPSCALE_IN_TRAIN, 1));
}
END_TEST

// Cross-attention (q and kv apart, Tq != Tk), CUDA against the CPU.
static void cross_case(int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t D, ocr_dtype_t dt, DropoutParams dp) {
    const int64_t C = H * D;
    char what[160];
    snprintf(what, sizeof what, "cross attention B%lld Tq%lld Tk%lld H%lld D%lld %s drop p%g", (long long)B,
             (long long)Tq, (long long)Tk, (long long)H, (long long)D, dtn(dt), (double)dp.p);
    Twin q = twin_uniform(dt, 3, OCR_SHAPE(B, Tq, C), -1.5f, 1.5f);
    Twin kv = twin_uniform(dt, 3, OCR_SHAPE(B, Tk, 2 * C), -1.5f, 1.5f);
    Twin out = twin_new(dt, 3, OCR_SHAPE(B, Tq, C));
    Twin probs = twin_new(OCR_F32, 4, OCR_SHAPE(B, H, Tq, Tk));
    const float scale = 1.0f / sqrtf((float)D);
    ocr_attention_cross_forward(&out.h, &probs.h, &q.h, &kv.h, (int)H, scale, dp);
    ocr_attention_cross_forward(&out.d, &probs.d, &q.d, &kv.d, (int)H, scale, dp);
    ck_assert_msg(twin_close(&out, ATT_TOL, ATT_TOL, what), "%s: out", what);
    ck_assert_msg(twin_close(&probs, SM_RTOL, SM_ATOL, what), "%s: probs", what);
    twin_sync_up(&probs);
    Twin dout = twin_uniform(dt, 3, OCR_SHAPE(B, Tq, C), -1, 1);
    Twin dq = twin_new(dt, 3, OCR_SHAPE(B, Tq, C));
    Twin dkv = twin_new(dt, 3, OCR_SHAPE(B, Tk, 2 * C));
    ocr_attention_cross_backward(&dq.h, &dkv.h, &dout.h, &q.h, &kv.h, &probs.h, (int)H, scale, dp);
    ocr_attention_cross_backward(&dq.d, &dkv.d, &dout.d, &q.d, &kv.d, &probs.d, (int)H, scale, dp);
    ck_assert_msg(twin_close(&dq, ATT_TOL, ATT_TOL, what), "%s: dq", what);
    ck_assert_msg(twin_close(&dkv, ATT_TOL, ATT_TOL, what), "%s: dkv", what);
    twin_free(&q), twin_free(&kv), twin_free(&out), twin_free(&probs), twin_free(&dout), twin_free(&dq),
        twin_free(&dkv);
}

START_TEST(test_attention_cross) {
    const DropoutParams none = drop(0.0f, OCR_DROPOUT_UPSCALE_IN_TRAIN, 1);
    for (int k = 0; k < 3; k++) cross_case(4, 11, 40, 12, 32, DTS[k], none);  // NRTR decoder over the memory
    cross_case(2, 26, 7, 3, 16, OCR_F32, drop(0.2f, OCR_DROPOUT_UPSCALE_IN_TRAIN, 1));
    cross_case(1, 5, 700, 2, 64, OCR_F32, none);  // K, V through scratch
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("gpu_softmax_attention");
    TCase *tc = tcase_create("softmax_attention");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_softmax_family);
    tcase_add_test(tc, test_attention);
    tcase_add_test(tc, test_attention_long);
    tcase_add_test(tc, test_attention_cross);
    suite_add_tcase(s, tc);
    return s;
}

#endif

GPU_TEST_MAIN("gpu_softmax_attention", suite)

// CTC loss on the GPU against the CPU twin: repeated labels, empty targets, input lengths
// shorter than T, an infeasible sample (with and without zero_infinity), every reduction,
// focal weighting, grad_scale, f16 gradients, optional outputs, a wide class count (PP-OCRv4's
// 6625), and the GPU's answer to invalid targets (NaN instead of an abort).
#include "core/rng.h"
#include "kernels/ctc.h"
#include "tests/gpu/gpu_test.h"

#ifdef OCR_HAVE_CUDA

#define CTC_TOL 1e-6

typedef struct {
    Twin logits, targets, tlen, ilen;
    int64_t B, T, C, S;
} CtcInputs;

// Sample 0: repeats; 1: empty target; 2: full width; 3: infeasible (too short for its
// repeats); 4: shorter input; the rest random.
static CtcInputs make_inputs(int64_t B, int64_t T, int64_t C, int64_t S, ocr_dtype_t dt) {
    CtcInputs in;
    in.B = B, in.T = T, in.C = C, in.S = S;
    in.logits = twin_uniform(dt, 3, OCR_SHAPE(B, T, C), -4, 4);
    int32_t *tg = calloc((size_t)(B * S), sizeof(int32_t));
    int32_t *tl = calloc((size_t)B, sizeof(int32_t)), *il = calloc((size_t)B, sizeof(int32_t));
    OcrRng r = ocr_rng_make(gpu_next_seed(), 3);
    for (int64_t b = 0; b < B; b++) {
        int64_t L = ocr_rng_next_int(&r, 1, S < T / 2 ? S : T / 2);
        il[b] = (int32_t)T;
        if (b == 1) L = 0;
        if (b == 2) L = S < T / 2 ? S : T / 2;
        for (int64_t j = 0; j < L; j++) tg[b * S + j] = (int32_t)ocr_rng_next_int(&r, 1, C - 1);
        if (b == 0 && L >= 3) tg[b * S + 1] = tg[b * S + 2] = tg[b * S];
        if (b == 3) {
            L = 4;
            for (int64_t j = 0; j < L; j++) tg[b * S + j] = 1;
            il[b] = 6;  // needs 4 + 3 = 7 frames
        }
        if (b == 4) il[b] = (int32_t)(T - 3);
        tl[b] = (int32_t)L;
    }
    in.targets = twin_i32(2, OCR_SHAPE(B, S), tg);
    in.tlen = twin_i32(1, OCR_SHAPE(B), tl);
    in.ilen = twin_i32(1, OCR_SHAPE(B), il);
    free(tg), free(tl), free(il);
    return in;
}

static void free_inputs(CtcInputs *in) {
    twin_free(&in->logits), twin_free(&in->targets), twin_free(&in->tlen), twin_free(&in->ilen);
}

static void compare(CtcInputs *in, CtcParams p, ocr_dtype_t gdt, int with_ilen, const char *tag) {
    char what[160];
    snprintf(what, sizeof what, "ctc %s B%lld T%lld C%lld red %d zinf %d focal %d scale %g grad %s ilen %d", tag,
             (long long)in->B, (long long)in->T, (long long)in->C, (int)p.reduction, p.zero_infinity,
             p.use_focal_loss, (double)p.grad_scale, dtn(gdt), with_ilen);
    Twin losses = twin_new(OCR_F32, 1, OCR_SHAPE(in->B)), loss = twin_new(OCR_F32, 1, OCR_SHAPE(1));
    Twin inf = twin_new(OCR_I32, 1, OCR_SHAPE(in->B));
    Twin g = twin_new(gdt, 3, OCR_SHAPE(in->B, in->T, in->C));
    const double rh = ocr_ctc_loss_forward(&losses.h, &loss.h, &g.h, &inf.h, &in->logits.h, &in->targets.h, &in->tlen.h,
                                           with_ilen ? &in->ilen.h : NULL, p);
    const double rd = ocr_ctc_loss_forward(&losses.d, &loss.d, &g.d, &inf.d, &in->logits.d, &in->targets.d, &in->tlen.d,
                                           with_ilen ? &in->ilen.d : NULL, p);
    ck_assert_msg((isnan(rh) && isnan(rd)) || (isinf(rh) && rh == rd) || fabs(rh - rd) <= 1e-6 * fabs(rh),
                  "%s: returned gpu %.12g cpu %.12g", what, rd, rh);
    ck_assert_msg(twin_close(&losses, CTC_TOL, 0, what), "%s: losses", what);
    ck_assert_msg(twin_close(&loss, CTC_TOL, 0, what), "%s: loss", what);
    ck_assert_msg(twin_bits(&inf, what), "%s: infeasible", what);
    ck_assert_msg(twin_close(&g, CTC_TOL, CTC_TOL, what), "%s: dlogits", what);
    twin_free(&losses), twin_free(&loss), twin_free(&inf), twin_free(&g);
}

START_TEST(test_ctc_variants) {
    CtcInputs in = make_inputs(7, 24, 13, 9, OCR_F32);
    for (int red = 0; red < 4; red++)
        for (int zinf = 0; zinf < 2; zinf++)
            for (int focal = 0; focal < 2; focal++) {
                CtcParams p = {(CtcReduction)red, zinf, focal, red == 1 ? 256.0f : 0.0f};
                compare(&in, p, OCR_F32, 1, "variants");
            }
    CtcParams p = {OCR_CTC_REDUCTION_PADDLE, 1, 0, 1.0f};
    compare(&in, p, OCR_F16, 1, "f16 gradient");
    compare(&in, p, OCR_F32, 0, "no input lengths");
    free_inputs(&in);
    // Half-precision logits.
    in = make_inputs(5, 16, 9, 6, OCR_BF16);
    compare(&in, p, OCR_F32, 1, "bf16 logits");
    free_inputs(&in);
}
END_TEST

// PP-OCR sizes: T = 40 frames, 6625 classes, 25-label targets.
START_TEST(test_ctc_wide) {
    CtcInputs in = make_inputs(6, 40, 6625, 25, OCR_F32);
    CtcParams p = {OCR_CTC_REDUCTION_PADDLE, 1, 0, 1024.0f};
    compare(&in, p, OCR_F32, 1, "wide");
    free_inputs(&in);
}
END_TEST

// The gradient written over the logits (dlogits == logits) has the bits of the gradient written
// elsewhere, in f32 and bf16, with NaN rows (an infeasible sample without zero_infinity) and
// zeroed rows (a shorter input).
START_TEST(test_ctc_in_place) {
    const ocr_dtype_t dts[2] = {OCR_F32, OCR_BF16};
    for (int k = 0; k < 2; k++)
        for (int zinf = 0; zinf < 2; zinf++) {
            CtcInputs in = make_inputs(7, 24, 13, 9, dts[k]);
            CtcParams p = {OCR_CTC_REDUCTION_PADDLE, zinf, 1, 128.0f};
            Twin g = twin_new(dts[k], 3, OCR_SHAPE(in.B, in.T, in.C));
            Twin l1 = twin_new(OCR_F32, 1, OCR_SHAPE(in.B)), l2 = twin_new(OCR_F32, 1, OCR_SHAPE(in.B));
            ocr_ctc_loss_forward(&l1.d, NULL, &g.d, NULL, &in.logits.d, &in.targets.d, &in.tlen.d, &in.ilen.d, p);
            ocr_ctc_loss_forward(&l2.d, NULL, &in.logits.d, NULL, &in.logits.d, &in.targets.d, &in.tlen.d, &in.ilen.d,
                                 p);
            OcrTensor a = twin_fetch(&g), b = twin_fetch(&in.logits), la = twin_fetch(&l1), lb = twin_fetch(&l2);
            ck_assert_msg(memcmp(a.data, b.data, ocr_tensor_bytes(&a)) == 0, "in-place %s zinf %d: dlogits differ",
                          dtn(dts[k]), zinf);
            ck_assert_msg(memcmp(la.data, lb.data, ocr_tensor_bytes(&la)) == 0, "in-place %s zinf %d: losses differ",
                          dtn(dts[k]), zinf);
            ocr_tensor_free(&a), ocr_tensor_free(&b), ocr_tensor_free(&la), ocr_tensor_free(&lb);
            twin_free(&g), twin_free(&l1), twin_free(&l2);
            free_inputs(&in);
        }
}
END_TEST

// Optional outputs: the loss alone, no gradient.
START_TEST(test_ctc_optional_outputs) {
    CtcInputs in = make_inputs(4, 12, 7, 5, OCR_F32);
    CtcParams p = {OCR_CTC_REDUCTION_MEAN, 1, 0, 1.0f};
    Twin loss = twin_new(OCR_F32, 1, OCR_SHAPE(1));
    const double rh = ocr_ctc_loss_forward(NULL, &loss.h, NULL, NULL, &in.logits.h, &in.targets.h, &in.tlen.h, NULL, p);
    const double rd = ocr_ctc_loss_forward(NULL, &loss.d, NULL, NULL, &in.logits.d, &in.targets.d, &in.tlen.d, NULL, p);
    ck_assert_msg(fabs(rh - rd) <= 1e-6 * fabs(rh), "loss only: gpu %.12g cpu %.12g", rd, rh);
    ck_assert(twin_close(&loss, CTC_TOL, 0, "loss only"));
    const double rn = ocr_ctc_loss_forward(NULL, NULL, NULL, NULL, &in.logits.d, &in.targets.d, &in.tlen.d, NULL, p);
    ck_assert_msg(fabs(rh - rn) <= 1e-6 * fabs(rh), "no outputs: gpu %.12g cpu %.12g", rn, rh);
    twin_free(&loss);
    free_inputs(&in);
}
END_TEST

// A label outside [1, C) cannot abort on the device: that sample's loss and gradient are NaN.
START_TEST(test_ctc_invalid_target_gives_nan) {
    CtcInputs in = make_inputs(3, 10, 6, 4, OCR_F32);
    int32_t *tg = in.targets.h.data, *tl = in.tlen.h.data;
    tl[1] = 2;
    tg[1 * 4 + 0] = 6;  // == C
    twin_sync_up(&in.targets);
    twin_sync_up(&in.tlen);
    CtcParams p = {OCR_CTC_REDUCTION_SUM, 1, 0, 1.0f};
    Twin losses = twin_new(OCR_F32, 1, OCR_SHAPE(3));
    Twin g = twin_new(OCR_F32, 3, OCR_SHAPE(3, 10, 6));
    const double r =
        ocr_ctc_loss_forward(&losses.d, NULL, &g.d, NULL, &in.logits.d, &in.targets.d, &in.tlen.d, NULL, p);
    ck_assert_msg(isnan(r), "reduced loss %g, expected NaN", r);
    OcrTensor lh = twin_fetch(&losses), gh = twin_fetch(&g);
    const float *lv = lh.data, *gv = gh.data;
    ck_assert(isnan(lv[1]) && isfinite(lv[0]) && isfinite(lv[2]));
    for (int i = 0; i < 60; i++) ck_assert(isnan(gv[60 + i]) && isfinite(gv[i]) && isfinite(gv[120 + i]));
    ocr_tensor_free(&lh), ocr_tensor_free(&gh);
    twin_free(&losses), twin_free(&g);
    free_inputs(&in);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("gpu_ctc");
    TCase *tc = tcase_create("ctc");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_ctc_variants);
    tcase_add_test(tc, test_ctc_wide);
    tcase_add_test(tc, test_ctc_in_place);
    tcase_add_test(tc, test_ctc_optional_outputs);
    tcase_add_test(tc, test_ctc_invalid_target_gives_nan);
    suite_add_tcase(s, tc);
    return s;
}

#endif

GPU_TEST_MAIN("gpu_ctc", suite)

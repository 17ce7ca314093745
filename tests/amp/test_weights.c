// The weights side on plain tensors: O1 cast cache, O2 master weights, snapshots, the fused
// unscale + check with per-tensor flags, an O2 Adam update against the f32 one, and the
// underflow case loss scaling exists for.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "amp/check.h"
#include "amp/weights.h"
#include "kernels/ops.h"
#include "tests/common/test_util.h"

static float f16r(float x) { return ocr_f16_to_f32(ocr_f32_to_f16(x)); }
static float bf16r(float x) { return ocr_bf16_to_f32(ocr_f32_to_bf16(x)); }

START_TEST(cast_cache) {
    float a[6], b[4], c[3];
    ocr_test_fill_uniform(a, 6, 1, -3.0f, 3.0f);
    ocr_test_fill_uniform(b, 4, 2, -1e-3f, 1e-3f);
    ocr_test_fill_uniform(c, 3, 3, -1.0f, 1.0f);
    OcrTensor p[3] = {ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(2, 3), a), ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(4), b),
                      ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(3), c)};
    ocr_dtype_t want[3] = {OCR_F16, OCR_F32, OCR_BF16};
    int64_t before = ocr_mem_stats(ocr_cpu()).current[OCR_MEM_PARAMS];
    AmpCastCache cc;
    ck_assert_int_eq(amp_cast_cache_init(&cc, p, want, 3), OCR_OK);
    ck_assert_int_eq(ocr_mem_stats(ocr_cpu()).current[OCR_MEM_PARAMS] - before, (int64_t)cc.bytes);
    ck_assert_int_ge(cc.bytes, 6 * 2 + 3 * 2);
    amp_cast_cache_refresh(&cc, p);
    const OcrTensor *c0 = amp_cast_cache_get(&cc, 0), *c2 = amp_cast_cache_get(&cc, 2);
    ck_assert_ptr_nonnull(c0);
    ck_assert_ptr_null(amp_cast_cache_get(&cc, 1));
    ck_assert_int_eq(c0->dtype, OCR_F16);
    ck_assert_int_eq(c2->dtype, OCR_BF16);
    ck_assert(ocr_tensor_same_shape(c0, &p[0]));
    for (int i = 0; i < 6; i++) ck_assert_float_eq(ocr_tensor_get_f32(c0, i), f16r(a[i]));
    for (int i = 0; i < 3; i++) ck_assert_float_eq(ocr_tensor_get_f32(c2, i), bf16r(c[i]));
    // An optimizer step changes the weights: after invalidate + refresh the copies follow.
    ocr_tensor_set_f32(&p[0], 4, 1234.5f);
    amp_cast_cache_invalidate(&cc);
    amp_cast_cache_refresh(&cc, p);
    ck_assert_float_eq(ocr_tensor_get_f32(amp_cast_cache_get(&cc, 0), 4), f16r(1234.5f));
    ck_assert_int_eq(cc.refreshes, 2);
    amp_cast_cache_free(&cc);
    ck_assert_int_eq(ocr_mem_stats(ocr_cpu()).current[OCR_MEM_PARAMS], before);
    for (int i = 0; i < 3; i++) ocr_tensor_free(&p[i]);
}
END_TEST

START_TEST(master_and_snapshot) {
    float a[5] = {0.1f, -2.5f, 3.0e-6f, 1e5f, 7.0f}, b[2] = {1.0f, 2.0f};
    OcrTensor v[2] = {ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(5), a), ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(2), b)};
    int has[2] = {1, 0};
    int64_t before = ocr_mem_stats(ocr_cpu()).current[OCR_MEM_MASTER];
    AmpMaster m;
    ck_assert_int_eq(amp_master_init(&m, v, has, 2), OCR_OK);
    ck_assert_int_ge(ocr_mem_stats(ocr_cpu()).current[OCR_MEM_MASTER] - before, 5 * 4);
    OcrTensor *m0 = amp_master_get(&m, 0);
    ck_assert_ptr_nonnull(m0);
    ck_assert_ptr_null(amp_master_get(&m, 1));
    ck_assert_int_eq(m0->dtype, OCR_F32);
    ck_assert_ptr_ne(m0->data, v[0].data);
    ck_assert_mem_eq(m0->data, a, sizeof a);
    amp_master_free(&m);
    ck_assert_int_eq(ocr_mem_stats(ocr_cpu()).current[OCR_MEM_MASTER], before);

    // Seeds differ per step and are never 0.
    ck_assert(amp_stochastic_round_seed(7, 0) != amp_stochastic_round_seed(7, 1));
    ck_assert(amp_stochastic_round_seed(7, 3) != amp_stochastic_round_seed(8, 3));
    for (int s = 0; s < 100; s++) ck_assert(amp_stochastic_round_seed(0, s) != 0);

    AmpSnapshot snap = {0};
    float stats[8] = {1, 2, 3, 4, 5, 6, 7, 8}, orig[8];
    memcpy(orig, stats, sizeof stats);
    ck_assert_int_eq(amp_snapshot_take(&snap, stats, sizeof stats), OCR_OK);
    stats[3] = INFINITY;
    stats[5] = NAN;
    amp_snapshot_restore(&snap, stats, sizeof stats);
    ck_assert_mem_eq(stats, orig, sizeof stats);
    amp_snapshot_free(&snap);
    for (int i = 0; i < 2; i++) ocr_tensor_free(&v[i]);
}
END_TEST

START_TEST(unscale_check_split_by_dtype) {
    const float S = 1024.0f;
    float g0[4] = {1.0f, -2048.0f, 0.5f, 3.0f}, g1[3] = {512.0f, -4.0f, 8.0f}, g2[2] = {1.0f, 2.0f};
    OcrTensor t[4] = {ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(4), g0), ocr_test_tensor(OCR_F16, 1, OCR_SHAPE(3), g1),
                      ocr_test_tensor(OCR_BF16, 1, OCR_SHAPE(2), g2), ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(2), g2)};
    OcrTensor *list[5] = {&t[0], &t[1], NULL, &t[2], &t[3]};
    float amax[5], gs[5];
    int bad[5];
    AmpCheckResult r = amp_unscale_check(list, 5, S, amax, bad, gs);
    ck_assert_int_eq(r.found_inf, 0);
    ck_assert_int_eq(r.first_bad, -1);
    ck_assert_float_eq(r.inv_scale, 1.0f / 1024.0f);
    // f32: unscaled in place; f16/bf16: left scaled, the optimizer applies 1/S.
    ck_assert_float_eq(ocr_tensor_get_f32(&t[0], 1), -2.0f);
    ck_assert_float_eq(ocr_tensor_get_f32(&t[1], 0), 512.0f);
    ck_assert_float_eq(gs[0], 1.0f);
    ck_assert_float_eq(gs[1], 1.0f / 1024.0f);
    ck_assert_float_eq(gs[3], 1.0f / 1024.0f);
    ck_assert_float_eq(gs[4], 1.0f);
    ck_assert_float_eq(gs[2], 1.0f);
    // amax is the true (unscaled) magnitude either way.
    ck_assert_float_eq(amax[0], 2.0f);
    ck_assert_float_eq(amax[1], 0.5f);
    ck_assert_float_eq(amax[3], 2.0f / 1024.0f);

    // inf in the f16 tensor (index 1) and NaN in the last f32 one (index 4): the first bad
    // tensor in backward order is 4; the finite values still give amax.
    ocr_tensor_set_f32(&t[1], 2, INFINITY);
    ocr_tensor_set_f32(&t[3], 0, NAN);
    r = amp_unscale_check(list, 5, S, amax, bad, gs);
    ck_assert_int_eq(r.found_inf, 1);
    ck_assert_int_eq(r.bad_count, 2);
    ck_assert_int_eq(r.first_bad, 4);
    ck_assert(bad[1] && bad[4] && !bad[0] && !bad[3] && !bad[2]);
    ck_assert_float_eq(amax[1], 0.5f);
    // Only tensor 1 bad: it is named.
    ocr_tensor_set_f32(&t[3], 0, 1.0f);
    r = amp_unscale_check(list, 5, S, NULL, bad, NULL);
    ck_assert_int_eq(r.first_bad, 1);
    for (int i = 0; i < 4; i++) ocr_tensor_free(&t[i]);
}
END_TEST

// O2: f16 working weights + f32 master + f16 gradients that carry the loss scale, against
// the plain f32 update on the same (unscaled) gradients, several steps. No L2 term: where
// g ≈ −λ·w the sign of the sum, and so Adam's step, would hinge on the gradient's f16 rounding.
START_TEST(o2_update_matches_fp32) {
    enum { N = 4096, STEPS = 5 };
    const float S = 32768.0f;
    float *w0 = malloc(N * sizeof(float)), *g = malloc(N * sizeof(float)), *ref = malloc(N * sizeof(float));
    ocr_test_fill_uniform(w0, N, 11, -1.0f, 1.0f);
    OcrTensor w32 = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(N), w0);
    OcrTensor values = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(N), w0);
    OcrTensor w16 = ocr_test_tensor(OCR_F16, 1, OCR_SHAPE(N), w0);
    OcrTensor m32 = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(N), NULL), v32 = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(N), NULL);
    OcrTensor m16 = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(N), NULL), v16 = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(N), NULL);
    ocr_tensor_fill(&m32, 0), ocr_tensor_fill(&v32, 0), ocr_tensor_fill(&m16, 0), ocr_tensor_fill(&v16, 0);
    int has = 1;
    AmpMaster master;
    ck_assert_int_eq(amp_master_init(&master, &values, &has, 1), OCR_OK);
    for (int t = 1; t <= STEPS; t++) {
        ocr_test_fill_uniform(g, N, 100 + t, -1e-3f, 1e-3f);
        OcrTensor gf = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(N), g);
        float *gs_vals = malloc(N * sizeof(float));
        for (int i = 0; i < N; i++) gs_vals[i] = g[i] * S;
        OcrTensor gh = ocr_test_tensor(OCR_F16, 1, OCR_SHAPE(N), gs_vals);
        free(gs_vals);
        OcrTensor *list = &gh;
        float gscale;
        AmpCheckResult r = amp_unscale_check(&list, 1, S, NULL, NULL, &gscale);
        ck_assert(!r.found_inf);
        // eps near |g| makes the step depend on the gradient's magnitude, so a missing
        // unscale would show; decoupled decay exercises the master path too.
        AdamParams p = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-4f, .weight_decay = 0.05f,
                        .decoupled = 1, .step = t, .grad_scale = 1.0f};
        ocr_adam_update(&w32, NULL, &m32, &v32, &gf, p);
        p.grad_scale = gscale;
        ocr_adam_update(&w16, amp_master_get(&master, 0), &m16, &v16, &gh, p);
        ocr_tensor_free(&gf);
        ocr_tensor_free(&gh);
    }
    ocr_tensor_to_f32(&w32, ref);
    const float *mw = amp_master_get(&master, 0)->data;
    double worst_master = 0, worst_param = 0;
    for (int i = 0; i < N; i++) {
        float p16 = ocr_tensor_get_f32(&w16, i);
        // The working weight is the master rounded to nearest.
        ck_assert_float_eq(p16, f16r(mw[i]));
        // Master vs f32: only the f16 rounding of the gradients differs (Adam normalises it).
        worst_master = fmax(worst_master, fabs((double)mw[i] - ref[i]));
        // Working weight vs f32 update: within half an f16 ulp of the result, plus this
        // element's master difference.
        double ulp = fmax(ldexp(1.0, (int)floor(log2(fabs(ref[i]) + 1e-30)) - 10), ldexp(1.0, -24));
        double excess = fabs((double)p16 - ref[i]) - fabs((double)mw[i] - ref[i]);
        worst_param = fmax(worst_param, excess / ulp);
    }
    ck_assert_msg(worst_master < 2e-6, "master drifted from the f32 update by %g", worst_master);
    ck_assert_msg(worst_param <= 0.5 + 1e-2, "working weight off the f32 update by %g f16 ulps", worst_param);
    amp_master_free(&master);
    OcrTensor *all[] = {&w32, &values, &w16, &m32, &v32, &m16, &v16};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ocr_tensor_free(all[i]);
    free(w0), free(g), free(ref);
}
END_TEST

// Small loss gradients (|dy| ~ 1e-8, below half the smallest f16 subnormal 2^-25) flush to
// zero in an f16 backward; scaled by 65536 they survive, and the unscaled weight gradient
// matches the double reference.
START_TEST(underflow_survives_scaling) {
    enum { B = 16, IN = 8, OUT = 4 };
    float x[B * IN], w[IN * OUT], dy[B * OUT];
    ocr_test_fill_uniform(x, B * IN, 21, -1.0f, 1.0f);
    ocr_test_fill_uniform(w, IN * OUT, 22, -0.5f, 0.5f);
    ocr_test_fill_uniform(dy, B * OUT, 23, -2.5e-8f, 2.5e-8f);
    for (int i = 0; i < B * IN; i++) x[i] = f16r(x[i]);  // the saved f16 activation
    double ref[IN * OUT];
    for (int i = 0; i < IN; i++)
        for (int o = 0; o < OUT; o++) {
            double s = 0;
            for (int b = 0; b < B; b++) s += (double)x[b * IN + i] * dy[b * OUT + o];
            ref[i * OUT + o] = s;
        }
    OcrTensor xi = ocr_test_tensor(OCR_F16, 2, OCR_SHAPE(B, IN), x);
    OcrTensor wi = ocr_test_tensor(OCR_F16, 2, OCR_SHAPE(IN, OUT), w);
    for (int scaled = 0; scaled < 2; scaled++) {
        float S = scaled ? 65536.0f : 1.0f, d[B * OUT];
        for (int i = 0; i < B * OUT; i++) d[i] = dy[i] * S;
        OcrTensor dyi = ocr_test_tensor(OCR_F16, 2, OCR_SHAPE(B, OUT), d);  // the f16 activation gradient
        int zeros = 0;
        for (int i = 0; i < B * OUT; i++) zeros += ocr_tensor_get_f32(&dyi, i) == 0.0f;
        OcrTensor dw = ocr_test_tensor(OCR_F16, 2, OCR_SHAPE(IN, OUT), NULL);  // O2: f16 gradient
        ocr_tensor_fill(&dw, 0.0f);
        ocr_linear_backward(NULL, &dw, NULL, &dyi, &xi, &wi);
        OcrTensor *list = &dw;
        float amax, gs;
        int bad;
        AmpCheckResult r = amp_unscale_check(&list, 1, S, &amax, &bad, &gs);
        ck_assert(!r.found_inf);
        float got[IN * OUT];
        for (int i = 0; i < IN * OUT; i++) got[i] = ocr_tensor_get_f32(&dw, i) * gs;  // what Adam sees
        if (!scaled) {
            ck_assert_int_eq(zeros, B * OUT);
            for (int i = 0; i < IN * OUT; i++) ck_assert_float_eq(got[i], 0.0f);
        } else {
            ck_assert_int_eq(zeros, 0);
            double rel = ocr_test_rel_error(got, ref, IN * OUT);
            ck_assert_msg(rel < 5e-3, "scaled f16 weight gradient off by %g", rel);
            ck_assert(amax > 0.0f);
        }
        ocr_tensor_free(&dyi);
        ocr_tensor_free(&dw);
    }
    ocr_tensor_free(&xi);
    ocr_tensor_free(&wi);
}
END_TEST

int main(void) {
    Suite *s = suite_create("amp_weights");
    TCase *tc = tcase_create("weights");
    tcase_add_test(tc, cast_cache);
    tcase_add_test(tc, master_and_snapshot);
    tcase_add_test(tc, unscale_check_split_by_dtype);
    tcase_add_test(tc, o2_update_matches_fp32);
    tcase_add_test(tc, underflow_survives_scaling);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

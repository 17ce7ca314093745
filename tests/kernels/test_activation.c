// Activations: forward against a double reference, backward against finite differences of
// Σ dout·act(x), f16/bf16 against the f32 result, in-place use, the documented derivative
// at the kinks, names, and thread-count invariance on a tensor large enough to go parallel.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "tests/common/test_util.h"

static const ocr_activation_t ALL_ACTS[] = {OCR_ACT_NONE,  OCR_ACT_RELU,  OCR_ACT_HARDSWISH,
                                            OCR_ACT_HARDSIGMOID, OCR_ACT_SWISH, OCR_ACT_GELU};
#define NUM_ACTS ((int)(sizeof ALL_ACTS / sizeof ALL_ACTS[0]))

static double ref_act(double x, ocr_activation_t act) {
    switch (act) {
        case OCR_ACT_NONE: return x;
        case OCR_ACT_RELU: return x > 0 ? x : 0;
        case OCR_ACT_HARDSWISH: return x * fmin(fmax(x + 3, 0), 6) / 6;
        case OCR_ACT_HARDSIGMOID: return fmin(fmax(x * (double)0.1666667f + 0.5, 0), 1);
        case OCR_ACT_SWISH: return x / (1 + exp(-x));
        case OCR_ACT_GELU: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
        default: ck_abort_msg("bad act"); return 0;
    }
}

// Σ dout·act(x) over a vector (the finite-difference helper perturbs every entry; n is small).
typedef struct {
    const double *dout;
    int64_t n;
    ocr_activation_t act;
} VecCtx;

static double vec_loss(const double *x, void *vctx) {
    const VecCtx *c = vctx;
    double l = 0;
    for (int64_t i = 0; i < c->n; i++) l += c->dout[i] * ref_act(x[i], c->act);
    return l;
}

// Values in [-5, 5] kept at least 0.02 away from the kinks (0, ±3) so that neither the
// finite differences nor float rounding straddle one.
static void sample_away_from_kinks(float *v, int64_t n, uint64_t seed) {
    ocr_test_fill_uniform(v, n, seed, -5.0f, 5.0f);
    const float kinks[3] = {0.0f, -3.0f, 3.0f};
    for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++)
            if (fabsf(v[i] - kinks[k]) < 0.02f) v[i] = kinks[k] + (v[i] >= kinks[k] ? 0.02f : -0.02f);
}

static void fetch_all(float *dst, const OcrTensor *t) { ocr_tensor_to_f32(t, dst); }

static void round_to(float *v, int64_t n, ocr_dtype_t dt) {
    OcrTensor t = ocr_test_tensor(dt, 1, OCR_SHAPE(n), v);
    ocr_tensor_to_f32(&t, v);
    ocr_tensor_free(&t);
}

START_TEST(test_forward_f32_reference) {
    const int64_t shape[4] = {2, 3, 5, 11};
    const int64_t n = 2 * 3 * 5 * 11;
    float *xs = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    double *ref = malloc(n * sizeof(double));
    sample_away_from_kinks(xs, n, 11);
    xs[0] = -1e-3f;  // a small negative: relu must give 0, not x
    for (int a = 0; a < NUM_ACTS; a++) {
        ocr_activation_t act = ALL_ACTS[a];
        OcrTensor x = ocr_test_tensor(OCR_F32, 4, shape, xs);
        OcrTensor y = ocr_test_tensor(OCR_F32, 4, shape, NULL);
        ocr_activation_forward(&y, &x, act);
        ocr_tensor_to_f32(&y, got);
        for (int64_t i = 0; i < n; i++) ref[i] = ref_act(xs[i], act);
        ck_assert_msg(ocr_test_allclose_f64(got, ref, n, 2e-7, 4e-6, ocr_activation_name(act)), "%s forward",
                      ocr_activation_name(act));
        ocr_tensor_free(&x);
        ocr_tensor_free(&y);
    }
    free(xs);
    free(got);
    free(ref);
}
END_TEST

START_TEST(test_backward_finite_differences) {
    const int64_t n = 3 * 7 * 13;
    float *xs = malloc(n * sizeof(float)), *dys = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    double *xd = malloc(n * sizeof(double)), *dyd = malloc(n * sizeof(double)), *num = malloc(n * sizeof(double));
    sample_away_from_kinks(xs, n, 21);
    ocr_test_fill_uniform(dys, n, 22, -1.0f, 1.0f);
    for (int64_t i = 0; i < n; i++) {
        xd[i] = xs[i];
        dyd[i] = dys[i];
    }
    for (int a = 0; a < NUM_ACTS; a++) {
        ocr_activation_t act = ALL_ACTS[a];
        VecCtx ctx = {dyd, n, act};
        ocr_test_numeric_grad(num, xd, n, vec_loss, &ctx, 1e-6);
        OcrTensor x = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(3, 7, 13), xs);
        OcrTensor dy = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(3, 7, 13), dys);
        OcrTensor dx = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(3, 7, 13), NULL);
        ocr_activation_backward(&dx, &dy, &x, act);
        ocr_tensor_to_f32(&dx, got);
        double err = ocr_test_rel_error(got, num, n);
        ck_assert_msg(err < 1e-5, "%s backward rel error %g", ocr_activation_name(act), err);
        ck_assert_msg(ocr_test_allclose_f64(got, num, n, 1e-6, 1e-4, ocr_activation_name(act)), "%s backward",
                      ocr_activation_name(act));
        // dinp is assigned: a second call over a re-poisoned output gives the same values.
        float *again = malloc(n * sizeof(float));
        ocr_test_poison(&dx);
        ocr_activation_backward(&dx, &dy, &x, act);
        ocr_tensor_to_f32(&dx, again);
        ck_assert_msg(memcmp(again, got, n * sizeof(float)) == 0, "%s backward not assigned", ocr_activation_name(act));
        free(again);
        ocr_tensor_free(&x);
        ocr_tensor_free(&dy);
        ocr_tensor_free(&dx);
    }
    free(xs);
    free(dys);
    free(got);
    free(xd);
    free(dyd);
    free(num);
}
END_TEST

// f16/bf16 tensors (and mixed dtypes) give the f32 result of the same rounded inputs,
// rounded once into the output dtype.
START_TEST(test_low_precision_matches_f32) {
    const int64_t n = 2 * 4 * 3 * 9;
    const int64_t *shape = OCR_SHAPE(2, 4, 3, 9);
    const ocr_dtype_t combos[][4] = {
        // inp, out, dout, dinp
        {OCR_F16, OCR_F16, OCR_F16, OCR_F16},
        {OCR_BF16, OCR_BF16, OCR_BF16, OCR_BF16},
        {OCR_F16, OCR_F32, OCR_BF16, OCR_F32},
        {OCR_BF16, OCR_F16, OCR_F32, OCR_BF16},
    };
    float *xs = malloc(n * sizeof(float)), *dys = malloc(n * sizeof(float));
    float *ref = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    for (size_t k = 0; k < sizeof combos / sizeof combos[0]; k++) {
        const ocr_dtype_t *dt = combos[k];
        sample_away_from_kinks(xs, n, 31 + k);
        ocr_test_fill_uniform(dys, n, 41 + k, -2.0f, 2.0f);
        round_to(xs, n, dt[0]);
        round_to(dys, n, dt[2]);
        for (int a = 0; a < NUM_ACTS; a++) {
            ocr_activation_t act = ALL_ACTS[a];
            char what[96];
            OcrTensor x32 = ocr_test_tensor(OCR_F32, 4, shape, xs);
            OcrTensor dy32 = ocr_test_tensor(OCR_F32, 4, shape, dys);
            OcrTensor y32 = ocr_test_tensor(OCR_F32, 4, shape, NULL);
            OcrTensor x = ocr_test_tensor(dt[0], 4, shape, xs);
            OcrTensor y = ocr_test_tensor(dt[1], 4, shape, NULL);
            OcrTensor dy = ocr_test_tensor(dt[2], 4, shape, dys);
            OcrTensor dx = ocr_test_tensor(dt[3], 4, shape, NULL);

            ocr_activation_forward(&y32, &x32, act);
            ocr_tensor_to_f32(&y32, ref);
            ocr_activation_forward(&y, &x, act);
            ocr_tensor_to_f32(&y, got);
            snprintf(what, sizeof what, "%s forward %s->%s", ocr_activation_name(act), ocr_dtype_name(dt[0]),
                     ocr_dtype_name(dt[1]));
            double u = ocr_test_dtype_eps(dt[1]);
            ck_assert_msg(ocr_test_allclose_f32(got, ref, n, 1e-7, 1.01 * u, what), "%s", what);

            ocr_test_poison(&y32);
            ocr_activation_backward(&y32, &dy32, &x32, act);
            ocr_tensor_to_f32(&y32, ref);
            ocr_activation_backward(&dx, &dy, &x, act);
            ocr_tensor_to_f32(&dx, got);
            snprintf(what, sizeof what, "%s backward dout %s dinp %s", ocr_activation_name(act),
                     ocr_dtype_name(dt[2]), ocr_dtype_name(dt[3]));
            u = ocr_test_dtype_eps(dt[3]);
            ck_assert_msg(ocr_test_allclose_f32(got, ref, n, 1e-7, 1.01 * u, what), "%s", what);

            ocr_tensor_free(&x32);
            ocr_tensor_free(&dy32);
            ocr_tensor_free(&y32);
            ocr_tensor_free(&x);
            ocr_tensor_free(&y);
            ocr_tensor_free(&dy);
            ocr_tensor_free(&dx);
        }
    }
    free(xs);
    free(dys);
    free(ref);
    free(got);
}
END_TEST

// out may alias inp, dinp may alias dout (f32 and f16 storage).
START_TEST(test_in_place) {
    const int64_t n = 5 * 13;
    float *xs = malloc(n * sizeof(float)), *dys = malloc(n * sizeof(float));
    float *ref = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    sample_away_from_kinks(xs, n, 51);
    ocr_test_fill_uniform(dys, n, 52, -1.0f, 1.0f);
    const ocr_dtype_t dts[2] = {OCR_F32, OCR_F16};
    for (int k = 0; k < 2; k++) {
        round_to(xs, n, dts[k]);
        round_to(dys, n, dts[k]);
        for (int a = 0; a < NUM_ACTS; a++) {
            ocr_activation_t act = ALL_ACTS[a];
            OcrTensor x = ocr_test_tensor(dts[k], 2, OCR_SHAPE(5, 13), xs);
            OcrTensor y = ocr_test_tensor(dts[k], 2, OCR_SHAPE(5, 13), NULL);
            ocr_activation_forward(&y, &x, act);
            ocr_tensor_to_f32(&y, ref);
            ocr_activation_forward(&x, &x, act);
            ocr_tensor_to_f32(&x, got);
            ck_assert_msg(memcmp(ref, got, n * sizeof(float)) == 0, "%s in-place forward differs (%s)",
                          ocr_activation_name(act), ocr_dtype_name(dts[k]));

            OcrTensor xin = ocr_test_tensor(dts[k], 2, OCR_SHAPE(5, 13), xs);
            OcrTensor dy = ocr_test_tensor(dts[k], 2, OCR_SHAPE(5, 13), dys);
            ocr_test_poison(&y);
            ocr_activation_backward(&y, &dy, &xin, act);
            ocr_tensor_to_f32(&y, ref);
            ocr_activation_backward(&dy, &dy, &xin, act);
            ocr_tensor_to_f32(&dy, got);
            ck_assert_msg(memcmp(ref, got, n * sizeof(float)) == 0, "%s in-place backward differs (%s)",
                          ocr_activation_name(act), ocr_dtype_name(dts[k]));
            ocr_tensor_free(&x);
            ocr_tensor_free(&y);
            ocr_tensor_free(&xin);
            ocr_tensor_free(&dy);
        }
    }
    free(xs);
    free(dys);
    free(ref);
    free(got);
}
END_TEST

// The derivative conventions documented in activation.c (Paddle's): relu'(0) = 0,
// hardswish'(−3) = 0 (left side), hardswish'(3) = 1 (right side), hardsigmoid' = 0 at and
// beyond its clip points; and the forward at the same points.
START_TEST(test_kinks_convention) {
    const float xs[8] = {0.0f, -3.0f, 3.0f, -2.9999993f, 2.9999995f, -10.0f, 10.0f, 1.5f};
    const int64_t n = 8;
    float ones[8], got[8];
    for (int i = 0; i < 8; i++) ones[i] = 1.0f;
    OcrTensor x = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), xs);
    OcrTensor dy = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), ones);
    OcrTensor dx = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), NULL);

    ocr_activation_backward(&dx, &dy, &x, OCR_ACT_RELU);
    ocr_tensor_to_f32(&dx, got);
    ck_assert_float_eq(got[0], 0.0f);
    ck_assert_float_eq(got[7], 1.0f);

    ocr_test_poison(&dx);
    ocr_activation_backward(&dx, &dy, &x, OCR_ACT_HARDSWISH);
    ocr_tensor_to_f32(&dx, got);
    ck_assert_float_eq(got[1], 0.0f);
    ck_assert_float_eq(got[2], 1.0f);
    ck_assert_float_eq(got[5], 0.0f);
    ck_assert_float_eq(got[6], 1.0f);
    ck_assert_float_eq_tol(got[0], 0.5f, 1e-7f);
    ck_assert_float_eq_tol(got[7], (2 * 1.5f + 3) / 6, 1e-7f);

    // Hardsigmoid: x·0.1666667 + 0.5 reaches 0 and 1 slightly inside ±3 (the slope is a bit
    // above 1/6), so ±3 are already clipped: derivative 0, value exactly 0 and 1.
    ocr_test_poison(&dx);
    ocr_activation_backward(&dx, &dy, &x, OCR_ACT_HARDSIGMOID);
    ocr_tensor_to_f32(&dx, got);
    ck_assert_float_eq(got[1], 0.0f);
    ck_assert_float_eq(got[2], 0.0f);
    ck_assert_float_eq(got[0], 0.1666667f);
    ck_assert_float_eq(got[7], 0.1666667f);
    OcrTensor y = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), NULL);
    ocr_activation_forward(&y, &x, OCR_ACT_HARDSIGMOID);
    ocr_tensor_to_f32(&y, got);
    ck_assert_float_eq(got[1], 0.0f);
    ck_assert_float_eq(got[2], 1.0f);
    ck_assert_float_eq(got[0], 0.5f);
    // Paddle's slope, not 1/6: at x = 1.5 the result is 1.5·0.1666667 + 0.5, not 0.75.
    ck_assert_float_eq(got[7], 1.5f * 0.1666667f + 0.5f);
    ck_assert_float_ne(got[7], 0.75f);

    ocr_tensor_free(&x);
    ocr_tensor_free(&dy);
    ocr_tensor_free(&dx);
    ocr_tensor_free(&y);
}
END_TEST

START_TEST(test_names) {
    for (int a = 0; a < OCR_ACT_COUNT; a++) {
        ocr_activation_t back = OCR_ACT_COUNT;
        const char *name = ocr_activation_name((ocr_activation_t)a);
        ck_assert_msg(ocr_activation_from_name(name, &back) == 1, "%s does not parse", name);
        ck_assert_int_eq(back, a);
    }
    ocr_activation_t act = OCR_ACT_NONE;
    ck_assert_int_eq(ocr_activation_from_name("hard_swish", &act), 1);
    ck_assert_int_eq(act, OCR_ACT_HARDSWISH);
    ck_assert_int_eq(ocr_activation_from_name("HardSigmoid", &act), 1);
    ck_assert_int_eq(act, OCR_ACT_HARDSIGMOID);
    ck_assert_int_eq(ocr_activation_from_name("silu", &act), 1);
    ck_assert_int_eq(act, OCR_ACT_SWISH);
    act = OCR_ACT_GELU;
    ck_assert_int_eq(ocr_activation_from_name("tanh", &act), 0);
    ck_assert_int_eq(ocr_activation_from_name(NULL, &act), 0);
    ck_assert_int_eq(act, OCR_ACT_GELU);  // untouched on failure
    ck_assert_str_eq(ocr_activation_name(OCR_ACT_COUNT), "?");
    ck_assert_str_eq(ocr_activation_name(OCR_ACT_HARDSWISH), "hardswish");
}
END_TEST

static double ref_act_grad(double x, ocr_activation_t act) {
    if (act == OCR_ACT_SWISH) {
        double sg = 1 / (1 + exp(-x));
        return sg * (1 + x * (1 - sg));
    }
    // gelu: Φ(x) + x·φ(x)
    return 0.5 * erfc(-x / sqrt(2.0)) + x * exp(-0.5 * x * x) / sqrt(2 * M_PI);
}

// Swish and GELU use their own branch-free exp and normal CDF: check them over a wide range,
// tails included, against double precision, forward and backward (relative accuracy where
// the values are not negligible).
START_TEST(test_swish_gelu_wide_range) {
    const int64_t n = 9601;
    float *xs = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float)), *ones = malloc(n * sizeof(float));
    double *ref = malloc(n * sizeof(double));
    for (int64_t i = 0; i < n; i++) {
        xs[i] = -24.0f + 48.0f * (float)i / (float)(n - 1);
        ones[i] = 1.0f;
    }
    const ocr_activation_t acts[2] = {OCR_ACT_SWISH, OCR_ACT_GELU};
    OcrTensor x = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), xs);
    OcrTensor dy = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), ones);
    OcrTensor y = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), NULL);
    for (int k = 0; k < 2; k++) {
        ocr_test_poison(&y);
        ocr_activation_forward(&y, &x, acts[k]);
        fetch_all(got, &y);
        for (int64_t i = 0; i < n; i++) ref[i] = ref_act(xs[i], acts[k]);
        ck_assert_msg(ocr_test_allclose_f64(got, ref, n, 1e-10, 6e-6, ocr_activation_name(acts[k])), "%s wide",
                      ocr_activation_name(acts[k]));
        ocr_test_poison(&y);
        ocr_activation_backward(&y, &dy, &x, acts[k]);
        fetch_all(got, &y);
        for (int64_t i = 0; i < n; i++) ref[i] = ref_act_grad(xs[i], acts[k]);
        // The slopes cross zero (swish at x ≈ −1.28, gelu at x ≈ −0.75): absolute slack there.
        ck_assert_msg(ocr_test_allclose_f64(got, ref, n, 2e-7, 6e-6, ocr_activation_name(acts[k])),
                      "%s' wide", ocr_activation_name(acts[k]));
    }
    // Saturation: far tails give exact 0 / x and slopes 0 / 1, never NaN.
    const float ext[4] = {-200.0f, -90.0f, 90.0f, 200.0f};
    OcrTensor xe = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(4), ext);
    OcrTensor ye = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(4), NULL);
    OcrTensor de = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(4), ones);
    for (int k = 0; k < 2; k++) {
        ocr_activation_forward(&ye, &xe, acts[k]);
        for (int i = 0; i < 4; i++) {
            float v = ocr_tensor_get_f32(&ye, i);
            ck_assert_msg(ext[i] < 0 ? fabsf(v) < 1e-30f : v == ext[i], "%s(%g) = %g", ocr_activation_name(acts[k]),
                          ext[i], v);
        }
        ocr_activation_backward(&ye, &de, &xe, acts[k]);
        for (int i = 0; i < 4; i++) {
            float v = ocr_tensor_get_f32(&ye, i);
            ck_assert_msg(ext[i] < 0 ? fabsf(v) < 1e-30f : v == 1.0f, "%s'(%g) = %g", ocr_activation_name(acts[k]),
                          ext[i], v);
        }
    }
    ocr_tensor_free(&x); ocr_tensor_free(&dy); ocr_tensor_free(&y);
    ocr_tensor_free(&xe); ocr_tensor_free(&ye); ocr_tensor_free(&de);
    free(xs); free(got); free(ones); free(ref);
}
END_TEST

// Large enough to run the OpenMP path: 1 thread and 3 threads give identical bits, and the
// result matches the double reference.
START_TEST(test_threads_invariant) {
    const int64_t n = 4 * 16 * 40 * 24;
    float *xs = malloc(n * sizeof(float)), *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    double *ref = malloc(n * sizeof(double));
    ocr_test_fill_uniform(xs, n, 61, -6.0f, 6.0f);
    int saved = omp_get_max_threads();
    for (int k = 0; k < NUM_ACTS; k++) {
        ocr_activation_t act = ALL_ACTS[k];
        OcrTensor x = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(4, 16, 40, 24), xs);
        OcrTensor y = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(4, 16, 40, 24), NULL);
        omp_set_num_threads(1);
        ocr_activation_forward(&y, &x, act);
        ocr_tensor_to_f32(&y, a);
        omp_set_num_threads(3);
        ocr_test_poison(&y);
        ocr_activation_forward(&y, &x, act);
        ocr_tensor_to_f32(&y, b);
        ck_assert_msg(memcmp(a, b, n * sizeof(float)) == 0, "%s depends on the thread count", ocr_activation_name(act));
        for (int64_t i = 0; i < n; i++) ref[i] = ref_act(xs[i], act);
        ck_assert_msg(ocr_test_allclose_f64(b, ref, n, 2e-7, 4e-6, ocr_activation_name(act)), "%s parallel forward",
                      ocr_activation_name(act));
        // backward with dout = x: compare threads
        omp_set_num_threads(1);
        ocr_activation_backward(&y, &x, &x, act);
        ocr_tensor_to_f32(&y, a);
        omp_set_num_threads(3);
        ocr_test_poison(&y);
        ocr_activation_backward(&y, &x, &x, act);
        ocr_tensor_to_f32(&y, b);
        ck_assert_msg(memcmp(a, b, n * sizeof(float)) == 0, "%s backward depends on the thread count",
                      ocr_activation_name(act));
        ocr_tensor_free(&x);
        ocr_tensor_free(&y);
    }
    omp_set_num_threads(saved);
    free(xs);
    free(a);
    free(b);
    free(ref);
}
END_TEST

int main(void) {
    Suite *s = suite_create("kernels_activation");
    TCase *tc = tcase_create("activation");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_forward_f32_reference);
    tcase_add_test(tc, test_backward_finite_differences);
    tcase_add_test(tc, test_low_precision_matches_f32);
    tcase_add_test(tc, test_in_place);
    tcase_add_test(tc, test_kinks_convention);
    tcase_add_test(tc, test_names);
    tcase_add_test(tc, test_swish_gelu_wide_range);
    tcase_add_test(tc, test_threads_invariant);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

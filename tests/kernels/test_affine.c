// kernels/cpu/affine.c: scalar_affine (LearnableAffineBlock), its fused affine → activation →
// affine (bit-identical to the three ops, and against finite differences), batch_broadcast_add (positional
// embedding), attention_local_mask; and kernels/cpu/input.c's padded input normalisation.
// Forward against double references, backward against finite differences of Σ dout·out,
// accumulation (+=) of the parameter gradients, NULL gradients, f16/bf16 against the f32
// kernel on rounded inputs, the fixed reduction order against an independent re-statement,
// and thread-count invariance.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "kernels/input.h"
#include "kernels/ops.h"
#include "tests/common/test_util.h"

int ocr_cpu_vec_select(const char *name);  // kernels/cpu/cpu_common.h (test hook)

static float *fvec(int64_t n) { return malloc((size_t)(n > 0 ? n : 1) * sizeof(float)); }
static double *dvec(int64_t n) { return malloc((size_t)(n > 0 ? n : 1) * sizeof(double)); }
static void fetch(float *dst, const OcrTensor *t) { ocr_tensor_to_f32(t, dst); }
static float get1(const OcrTensor *t) { return ocr_tensor_get_f32(t, 0); }
static void round_to(float *v, int64_t n, ocr_dtype_t dt) {
    OcrTensor t = ocr_test_tensor(dt, 1, OCR_SHAPE(n), v);
    ocr_tensor_to_f32(&t, v);
    ocr_tensor_free(&t);
}
static const ocr_dtype_t DTS[3] = {OCR_F32, OCR_F16, OCR_BF16};

// ---- scalar affine ------------------------------------------------------------------------

// p = [x (n) | s | b]; loss = Σ dout · (s·x + b).
typedef struct {
    int64_t n;
    const double *dout;
} AffRef;

static double affine_loss(const double *p, void *vctx) {
    const AffRef *r = vctx;
    double l = 0;
    for (int64_t i = 0; i < r->n; i++) l += r->dout[i] * (p[r->n] * p[i] + p[r->n + 1]);
    return l;
}

START_TEST(test_scalar_affine_f32) {
    const int64_t n = 3 * 5 * 7 * 11;
    float *xs = fvec(n), *dys = fvec(n), *got = fvec(n);
    double *p = dvec(n + 2), *dyd = dvec(n), *num = dvec(n + 2), *ref = dvec(n);
    ocr_test_fill_uniform(xs, n, 1, -3.0f, 3.0f);
    ocr_test_fill_uniform(dys, n, 2, -1.0f, 1.0f);
    const float sv = 1.37f, bv = -0.21f;
    for (int64_t i = 0; i < n; i++) p[i] = xs[i], dyd[i] = dys[i];
    p[n] = sv;
    p[n + 1] = bv;
    OcrTensor x = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(3, 5, 7, 11), xs);
    OcrTensor y = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(3, 5, 7, 11), NULL);
    OcrTensor s = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), &sv), b = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), &bv);
    ocr_scalar_affine_forward(&y, &x, &s, &b);
    fetch(got, &y);
    for (int64_t i = 0; i < n; i++) {
        ref[i] = (double)sv * xs[i] + bv;
        float two = sv * xs[i];  // the two fp32 roundings of Paddle's scale * x + bias
        ck_assert_msg(got[i] == two + bv, "element %lld: %.9g vs %.9g", (long long)i, got[i], two + bv);
    }
    ck_assert(ocr_test_allclose_f64(got, ref, n, 1e-6, 1e-6, "scalar_affine forward"));

    // Backward: finite differences; dscale/dbias accumulate, dinp is assigned.
    OcrTensor dy = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(3, 5, 7, 11), dys);
    OcrTensor dx = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(3, 5, 7, 11), NULL);
    const float zero = 0.0f, start = 0.75f;
    OcrTensor ds = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), &zero), db = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), &start);
    AffRef r = {n, dyd};
    ocr_test_numeric_grad(num, p, n + 2, affine_loss, &r, 1e-6);
    ocr_scalar_affine_backward(&dx, &ds, &db, &dy, &x, &s);
    fetch(got, &dx);
    ck_assert(ocr_test_allclose_f64(got, num, n, 1e-6, 1e-6, "scalar_affine dinp"));
    for (int64_t i = 0; i < n; i++) ck_assert_float_eq(got[i], sv * dys[i]);
    double sum_s = 0, sum_b = 0;
    for (int64_t i = 0; i < n; i++) sum_s += (double)dys[i] * xs[i], sum_b += dys[i];
    ck_assert_msg(fabs(get1(&ds) - num[n]) <= 1e-5 * fabs(num[n]) + 1e-6, "dscale %.9g vs %.9g", get1(&ds), num[n]);
    ck_assert_msg(fabs(get1(&db) - start - num[n + 1]) <= 1e-5 * fabs(num[n + 1]) + 1e-6, "dbias %.9g vs %.9g",
                  get1(&db) - start, num[n + 1]);
    ck_assert_float_eq(get1(&ds), 0.0f + (float)sum_s);
    ck_assert_float_eq(get1(&db), start + (float)sum_b);
    // Second call: += again.
    float ds1 = get1(&ds), db1 = get1(&db);
    ocr_test_poison(&dx);
    ocr_scalar_affine_backward(&dx, &ds, &db, &dy, &x, &s);
    ck_assert_float_eq(get1(&ds), ds1 + (float)sum_s);
    ck_assert_float_eq(get1(&db), db1 + (float)sum_b);
    // Any gradient alone; the others untouched.
    ocr_test_poison(&dx);
    float ds2 = get1(&ds), db2 = get1(&db);
    ocr_scalar_affine_backward(&dx, NULL, NULL, &dy, NULL, &s);
    fetch(got, &dx);
    for (int64_t i = 0; i < n; i++) ck_assert_float_eq(got[i], sv * dys[i]);
    ocr_scalar_affine_backward(NULL, &ds, NULL, &dy, &x, &s);
    ck_assert_float_eq(get1(&ds), ds2 + (float)sum_s);
    ck_assert_float_eq(get1(&db), db2);
    ocr_scalar_affine_backward(NULL, NULL, &db, &dy, NULL, NULL);
    ck_assert_float_eq(get1(&db), db2 + (float)sum_b);
    // In place forward.
    ocr_scalar_affine_forward(&x, &x, &s, &b);
    fetch(got, &x);
    for (int64_t i = 0; i < n; i++) ck_assert_float_eq(got[i], sv * xs[i] + bv);
    free(xs), free(dys), free(got), free(p), free(dyd), free(num), free(ref);
    ocr_tensor_free(&x), ocr_tensor_free(&y), ocr_tensor_free(&s), ocr_tensor_free(&b);
    ocr_tensor_free(&dy), ocr_tensor_free(&dx), ocr_tensor_free(&ds), ocr_tensor_free(&db);
}
END_TEST

// The documented reduction, re-stated: chunks of 2048, lane t sums t + 256·j, halving tree.
static double documented_sum(const float *a, const float *b, int64_t n) {
    double total = 0.0;
    for (int64_t base = 0; base < n; base += 2048) {
        double lane[256];
        for (int t = 0; t < 256; t++) {
            lane[t] = 0.0;
            for (int j = 0; j < 8; j++) {
                int64_t i = base + t + 256 * j;
                if (i < n) lane[t] += b ? (double)a[i] * b[i] : a[i];
            }
        }
        for (int s = 128; s > 0; s >>= 1)
            for (int t = 0; t < s; t++) lane[t] += lane[t + s];
        total += lane[0];
    }
    return total;
}

START_TEST(test_scalar_affine_reduction_and_threads) {
    // Large enough for many chunks and the OpenMP paths; values spanning magnitudes so a
    // different summation order would show in the float result.
    const int64_t n = 2048 * 37 + 999;
    float *xs = fvec(n), *dys = fvec(n), *got[2];
    ocr_test_fill_uniform(xs, n, 11, -1.0f, 1.0f);
    ocr_test_fill_uniform(dys, n, 12, -1.0f, 1.0f);
    for (int64_t i = 0; i < n; i += 7) xs[i] *= 4096.0f, dys[i] *= 1e-3f;
    // Cancelling giants in one chunk: any other order of the additions changes the result.
    xs[0] = 0x1p60f, dys[0] = 1.0f, xs[2] = -0x1p60f, dys[2] = 1.0f;
    xs[5] = 1.0f, dys[5] = 0x1p60f, xs[7] = 1.0f, dys[7] = -0x1p60f;
    const double ws = documented_sum(dys, xs, n), wb = documented_sum(dys, NULL, n);
    int saved = omp_get_max_threads();
    float dsv[2], dbv[2];
    for (int q = 0; q < 2; q++) {
        omp_set_num_threads(q ? 3 : 1);
        const float one = 1.0f, zero = 0.0f;
        OcrTensor x = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), xs), dy = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), dys);
        OcrTensor s = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), &one);
        OcrTensor ds = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), &zero), db = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), &zero);
        OcrTensor dx = ocr_test_tensor(OCR_BF16, 1, OCR_SHAPE(n), NULL);
        ocr_scalar_affine_backward(&dx, &ds, &db, &dy, &x, &s);
        dsv[q] = get1(&ds);
        dbv[q] = get1(&db);
        got[q] = fvec(n);
        fetch(got[q], &dx);
        ocr_tensor_free(&x), ocr_tensor_free(&dy), ocr_tensor_free(&s), ocr_tensor_free(&ds), ocr_tensor_free(&db),
            ocr_tensor_free(&dx);
    }
    omp_set_num_threads(saved);
    for (int q = 0; q < 2; q++) {
        ck_assert_msg(dsv[q] == (float)ws, "dscale %.9g vs documented %.9g (threads %d)", dsv[q], (float)ws, q ? 3 : 1);
        ck_assert_msg(dbv[q] == (float)wb, "dbias %.9g vs documented %.9g", dbv[q], (float)wb);
    }
    ck_assert(memcmp(got[0], got[1], (size_t)n * sizeof(float)) == 0);
    free(got[0]), free(got[1]), free(xs), free(dys);
}
END_TEST

START_TEST(test_scalar_affine_low_precision) {
    // f16/bf16 tensors (and scalars of another dtype) = the f32 kernel on the rounded values,
    // rounded once into each output.
    const int64_t n = 4099;
    for (int k = 1; k < 3; k++) {
        ocr_dtype_t dt = DTS[k], pt = DTS[3 - k];
        float *xs = fvec(n), *dys = fvec(n), *a = fvec(n), *bb = fvec(n);
        ocr_test_fill_uniform(xs, n, 20 + k, -4.0f, 4.0f);
        ocr_test_fill_uniform(dys, n, 30 + k, -1.0f, 1.0f);
        round_to(xs, n, dt);
        round_to(dys, n, dt);
        float sv = 0.8125f, bv = 0.0625f, z = 0.0f;  // exact in every dtype
        OcrTensor x[2], y[2], dy[2], dx[2], s[2], b[2], ds[2], db[2];
        for (int q = 0; q < 2; q++) {
            ocr_dtype_t d = q ? dt : OCR_F32, e = q ? pt : OCR_F32;
            x[q] = ocr_test_tensor(d, 1, OCR_SHAPE(n), xs);
            dy[q] = ocr_test_tensor(d, 1, OCR_SHAPE(n), dys);
            y[q] = ocr_test_tensor(d, 1, OCR_SHAPE(n), NULL);
            dx[q] = ocr_test_tensor(d, 1, OCR_SHAPE(n), NULL);
            s[q] = ocr_test_tensor(e, 1, OCR_SHAPE(1), &sv);
            b[q] = ocr_test_tensor(e, 1, OCR_SHAPE(1), &bv);
            ds[q] = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), &z);
            db[q] = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), &z);
            ocr_scalar_affine_forward(&y[q], &x[q], &s[q], &b[q]);
            ocr_scalar_affine_backward(&dx[q], &ds[q], &db[q], &dy[q], &x[q], &s[q]);
        }
        fetch(a, &y[0]);
        round_to(a, n, dt);
        fetch(bb, &y[1]);
        ck_assert_msg(memcmp(a, bb, (size_t)n * sizeof(float)) == 0, "%s forward", ocr_dtype_name(dt));
        fetch(a, &dx[0]);
        round_to(a, n, dt);
        fetch(bb, &dx[1]);
        ck_assert_msg(memcmp(a, bb, (size_t)n * sizeof(float)) == 0, "%s dinp", ocr_dtype_name(dt));
        ck_assert_float_eq(get1(&ds[0]), get1(&ds[1]));
        ck_assert_float_eq(get1(&db[0]), get1(&db[1]));
        for (int q = 0; q < 2; q++)
            ocr_tensor_free(&x[q]), ocr_tensor_free(&y[q]), ocr_tensor_free(&dy[q]), ocr_tensor_free(&dx[q]),
                ocr_tensor_free(&s[q]), ocr_tensor_free(&b[q]), ocr_tensor_free(&ds[q]), ocr_tensor_free(&db[q]);
        free(xs), free(dys), free(a), free(bb);
    }
}
END_TEST

// ---- affine → activation → affine, fused ------------------------------------------------------

// The three ops one after another, intermediates in mid tensors: forward into y, backward into
// dx and the four scalars (scalars[0..3] = ds1, db1, ds2, db2).
static void aaa_unfused(OcrTensor *y, OcrTensor *dx, OcrTensor *sc_grads, const OcrTensor *x, const OcrTensor *dy,
                        const OcrTensor *s1, const OcrTensor *b1, ocr_activation_t act, const OcrTensor *s2,
                        const OcrTensor *b2, ocr_dtype_t mid) {
    const int64_t n = ocr_tensor_numel(x);
    OcrTensor a = ocr_test_tensor(mid, 1, OCR_SHAPE(n), NULL), h = ocr_test_tensor(mid, 1, OCR_SHAPE(n), NULL);
    OcrTensor dh = ocr_test_tensor(mid, 1, OCR_SHAPE(n), NULL), da = ocr_test_tensor(mid, 1, OCR_SHAPE(n), NULL);
    ocr_scalar_affine_forward(&a, x, s1, b1);
    ocr_activation_forward(&h, &a, act);
    ocr_scalar_affine_forward(y, &h, s2, b2);
    ocr_scalar_affine_backward(&dh, &sc_grads[2], &sc_grads[3], dy, &h, s2);
    ocr_activation_backward(&da, &dh, &a, act);
    ocr_scalar_affine_backward(dx, &sc_grads[0], &sc_grads[1], &da, x, s1);
    ocr_tensor_free(&a), ocr_tensor_free(&h), ocr_tensor_free(&dh), ocr_tensor_free(&da);
}

static int same_bits(const OcrTensor *a, const OcrTensor *b) {
    return a->dtype == b->dtype && ocr_tensor_numel(a) == ocr_tensor_numel(b) &&
           memcmp(a->data, b->data, (size_t)ocr_tensor_numel(a) * ocr_dtype_size(a->dtype)) == 0;
}

START_TEST(test_affine_act_affine_matches_the_three_ops) {
    // The fused pair gives the bits of scalar_affine → activation → scalar_affine for every
    // activation, dtype mix, thread count, chunk tail and aliasing, and accumulates its scalars.
    const int64_t sizes[2] = {1000, 2048 * 17 + 77};  // one partial chunk; parallel chunks and a tail
    const ocr_dtype_t mixes[5][2] = {{OCR_F32, OCR_F32}, {OCR_BF16, OCR_BF16}, {OCR_F16, OCR_F16},
                                     {OCR_F32, OCR_BF16}, {OCR_BF16, OCR_F32}};  // {inp and dout, mid}
    static const char *const levels[3] = {"sse2", "avx2", "avx512"};  // the kernels' loops per vector level
    for (int lv = 0; lv < 3; lv++) {
        if (!ocr_cpu_vec_select(levels[lv])) {
            printf("affine_act_affine: this CPU has no %s; that level not checked\n", levels[lv]);
            continue;
        }
        for (int z = 0; z < 2; z++)
            for (int q = 0; q < 5; q++)
                for (int act = 0; act < OCR_ACT_COUNT; act++)
                    for (int threads = 1; threads <= 2; threads++) {
                        omp_set_num_threads(threads);
                        const int64_t n = sizes[z];
                        const ocr_dtype_t dt = mixes[q][0], mid = mixes[q][1];
                        char what[128];
                        snprintf(what, sizeof what, "%s, n %lld, %s/%s, act %d, %d threads", levels[lv], (long long)n,
                                 ocr_dtype_name(dt), ocr_dtype_name(mid), act, threads);
                        float *xs = fvec(n), *dys = fvec(n);
                        ocr_test_fill_uniform(xs, n, 40 + z + q, -5.0f, 5.0f);  // both sides of hardswish's ±3
                        ocr_test_fill_uniform(dys, n, 50 + z + q, -1.0f, 1.0f);
                        const float sv1 = 1.13f, bv1 = -0.37f, sv2 = 0.81f, bv2 = 0.23f, start[4] = {0.5f, -0.25f, 0.0f, 1.0f};
                        OcrTensor x = ocr_test_tensor(dt, 1, OCR_SHAPE(n), xs), dy = ocr_test_tensor(dt, 1, OCR_SHAPE(n), dys);
                        OcrTensor s1 = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), &sv1);
                        OcrTensor b1 = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), &bv1);
                        OcrTensor s2 = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), &sv2);
                        OcrTensor b2 = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), &bv2);
                        OcrTensor y[2], dx[2], g[2][4];
                        for (int k = 0; k < 2; k++) {
                            y[k] = ocr_test_tensor(mid, 1, OCR_SHAPE(n), NULL);
                            dx[k] = ocr_test_tensor(dt, 1, OCR_SHAPE(n), NULL);
                            ocr_test_poison(&y[k]);
                            ocr_test_poison(&dx[k]);
                            for (int j = 0; j < 4; j++) g[k][j] = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), &start[j]);
                        }
                        aaa_unfused(&y[0], &dx[0], g[0], &x, &dy, &s1, &b1, (ocr_activation_t)act, &s2, &b2, mid);
                        ocr_affine_act_affine_forward(&y[1], &x, &s1, &b1, (ocr_activation_t)act, &s2, &b2);
                        ocr_affine_act_affine_backward(&dx[1], &g[1][0], &g[1][1], &g[1][2], &g[1][3], &dy, &x, &s1,
                                                       &b1, (ocr_activation_t)act, &s2, mid);
                        ck_assert_msg(same_bits(&y[0], &y[1]), "forward, %s", what);
                        ck_assert_msg(same_bits(&dx[0], &dx[1]), "dinp, %s", what);
                        for (int j = 0; j < 4; j++)
                            ck_assert_msg(get1(&g[0][j]) == get1(&g[1][j]), "scalar %d: %.9g vs %.9g, %s", j,
                                          get1(&g[0][j]), get1(&g[1][j]), what);
                        if (z == 1 && threads == 2) {
                            // Accumulation: a second call adds the same sums again (the unfused ops too).
                            aaa_unfused(&y[0], &dx[0], g[0], &x, &dy, &s1, &b1, (ocr_activation_t)act, &s2, &b2, mid);
                            ocr_affine_act_affine_backward(&dx[1], &g[1][0], &g[1][1], &g[1][2], &g[1][3], &dy, &x, &s1,
                                                           &b1, (ocr_activation_t)act, &s2, mid);
                            for (int j = 0; j < 4; j++) ck_assert_msg(get1(&g[0][j]) == get1(&g[1][j]), "again %d, %s", j, what);
                            // NULL gradients leave the others untouched; dinp alone over dout (in place).
                            const float kept = get1(&g[1][0]);
                            ocr_affine_act_affine_backward(NULL, NULL, &g[1][1], NULL, NULL, &dy, &x, &s1, &b1,
                                                           (ocr_activation_t)act, &s2, mid);
                            ck_assert_float_eq(get1(&g[1][0]), kept);
                            OcrTensor dyc = ocr_test_tensor(dt, 1, OCR_SHAPE(n), dys);
                            ocr_affine_act_affine_backward(&dyc, NULL, NULL, NULL, NULL, &dyc, &x, &s1, &b1,
                                                           (ocr_activation_t)act, &s2, mid);
                            ck_assert_msg(same_bits(&dyc, &dx[1]), "dinp in place over dout, %s", what);
                            ocr_tensor_free(&dyc);
                            if (dt == mid) {  // forward in place over inp
                                OcrTensor xc = ocr_test_tensor(dt, 1, OCR_SHAPE(n), xs);
                                ocr_affine_act_affine_forward(&xc, &xc, &s1, &b1, (ocr_activation_t)act, &s2, &b2);
                                ck_assert_msg(same_bits(&xc, &y[1]), "forward in place, %s", what);
                                ocr_tensor_free(&xc);
                            }
                        }
                        for (int k = 0; k < 2; k++) {
                            ocr_tensor_free(&y[k]), ocr_tensor_free(&dx[k]);
                            for (int j = 0; j < 4; j++) ocr_tensor_free(&g[k][j]);
                        }
                        ocr_tensor_free(&x), ocr_tensor_free(&dy), ocr_tensor_free(&s1), ocr_tensor_free(&b1);
                        ocr_tensor_free(&s2), ocr_tensor_free(&b2);
                        free(xs), free(dys);
                    }
    }
    ocr_cpu_vec_select(NULL);
    omp_set_num_threads(2);
}
END_TEST

// p = [x (n) | s1 | b1 | s2 | b2]; loss = Σ dout · (s2·act(s1·x + b1) + b2) in double.
typedef struct {
    int64_t n;
    const double *dout;
    ocr_activation_t act;
} AaaRef;

static double act_double(double v, ocr_activation_t act) {
    switch (act) {
        case OCR_ACT_HARDSWISH: return v * fmin(fmax(v + 3.0, 0.0), 6.0) / 6.0;
        case OCR_ACT_SWISH: return v / (1.0 + exp(-v));
        case OCR_ACT_GELU: return v * 0.5 * erfc(-v / sqrt(2.0));
        default: return v;
    }
}

static double aaa_loss(const double *p, void *vctx) {
    const AaaRef *r = vctx;
    const int64_t n = r->n;
    double l = 0;
    for (int64_t i = 0; i < n; i++) l += r->dout[i] * (p[n + 2] * act_double(p[n] * p[i] + p[n + 1], r->act) + p[n + 3]);
    return l;
}

START_TEST(test_affine_act_affine_gradients) {
    // f32 against central differences of the double-precision loss. Tolerances: every fp32
    // operation rounds at 6e-8 relative; the approximations of e^x (1e-7) and Φ (1.4e-6 for the
    // x > −4 used here, kernels/activation_math.h) bound the activation's error, so each
    // element's gradient is within ~3e-6 relative of the exact one, and the scalar sums within
    // 3e-6 of Σ|term|; central differences with h = 1e-6 on a smooth double loss add < 1e-8.
    // hardswish's inputs are kept 0.05 away from its kinks at ±3 so h never straddles one.
    const int64_t n = 2048 * 2 + 333;
    const ocr_activation_t acts[3] = {OCR_ACT_HARDSWISH, OCR_ACT_SWISH, OCR_ACT_GELU};
    for (int k = 0; k < 3; k++) {
        float *xs = fvec(n), *dys = fvec(n), *got = fvec(n);
        double *p = dvec(n + 4), *dyd = dvec(n), *num = dvec(n + 4);
        const float sv1 = 1.07f, bv1 = -0.31f, sv2 = 0.87f, bv2 = 0.19f, zero = 0.0f;
        ocr_test_fill_uniform(xs, n, 60 + k, -3.5f, 3.5f);
        ocr_test_fill_uniform(dys, n, 70 + k, -1.0f, 1.0f);
        for (int64_t i = 0; i < n; i++) {
            const double a = (double)sv1 * xs[i] + bv1;
            if (fabs(fabs(a) - 3.0) < 0.05) xs[i] = 0.0f;  // away from hardswish's kinks
            p[i] = xs[i];
            dyd[i] = dys[i];
        }
        p[n] = sv1, p[n + 1] = bv1, p[n + 2] = sv2, p[n + 3] = bv2;
        AaaRef r = {n, dyd, acts[k]};
        ocr_test_numeric_grad(num, p, n + 4, aaa_loss, &r, 1e-6);
        OcrTensor x = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), xs), dy = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), dys);
        OcrTensor y = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), NULL), dx = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), NULL);
        OcrTensor s1 = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), &sv1), b1 = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), &bv1);
        OcrTensor s2 = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), &sv2), b2 = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), &bv2);
        OcrTensor g[4];
        for (int j = 0; j < 4; j++) g[j] = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), &zero);
        ocr_affine_act_affine_forward(&y, &x, &s1, &b1, acts[k], &s2, &b2);
        fetch(got, &y);
        double *ref = dvec(n);
        for (int64_t i = 0; i < n; i++) ref[i] = sv2 * act_double((double)sv1 * xs[i] + bv1, acts[k]) + bv2;
        ck_assert(ocr_test_allclose_f64(got, ref, n, 3e-6, 3e-6, "affine_act_affine forward"));
        ocr_affine_act_affine_backward(&dx, &g[0], &g[1], &g[2], &g[3], &dy, &x, &s1, &b1, acts[k], &s2, OCR_F32);
        fetch(got, &dx);
        ck_assert(ocr_test_allclose_f64(got, num, n, 3e-6, 3e-6, "affine_act_affine dinp"));
        // Σ|term| bounds each scalar's rounding: |dout|·|∂out/∂scalar| summed over the elements.
        double mag[4] = {0, 0, 0, 0};
        for (int64_t i = 0; i < n; i++) {
            const double a = (double)sv1 * xs[i] + bv1, e = 1e-6;
            const double dact = (act_double(a + e, acts[k]) - act_double(a - e, acts[k])) / (2 * e);
            mag[0] += fabs(dyd[i] * sv2 * dact * xs[i]);
            mag[1] += fabs(dyd[i] * sv2 * dact);
            mag[2] += fabs(dyd[i] * act_double(a, acts[k]));
            mag[3] += fabs(dyd[i]);
        }
        for (int j = 0; j < 4; j++)
            ck_assert_msg(fabs(get1(&g[j]) - num[n + j]) <= 3e-6 * mag[j] + 1e-6, "act %d scalar %d: %.9g vs %.9g",
                          (int)acts[k], j, get1(&g[j]), num[n + j]);
        for (int j = 0; j < 4; j++) ocr_tensor_free(&g[j]);
        ocr_tensor_free(&x), ocr_tensor_free(&dy), ocr_tensor_free(&y), ocr_tensor_free(&dx);
        ocr_tensor_free(&s1), ocr_tensor_free(&b1), ocr_tensor_free(&s2), ocr_tensor_free(&b2);
        free(xs), free(dys), free(got), free(p), free(dyd), free(num), free(ref);
    }
}
END_TEST

// ---- batch broadcast add ------------------------------------------------------------------------

// p = [x (B·P) | pos (P)]; loss = Σ dout · (x + pos).
typedef struct {
    int64_t B, P;
    const double *dout;
} BcRef;

static double bcast_loss(const double *p, void *vctx) {
    const BcRef *r = vctx;
    double l = 0;
    for (int64_t b = 0; b < r->B; b++)
        for (int64_t j = 0; j < r->P; j++) l += r->dout[b * r->P + j] * (p[b * r->P + j] + p[r->B * r->P + j]);
    return l;
}

START_TEST(test_batch_broadcast_add) {
    const int64_t B = 3, T = 10, C = 12, P = T * C, n = B * P;
    float *xs = fvec(n), *ps = fvec(P), *dys = fvec(n), *got = fvec(n), *start = fvec(P);
    double *p = dvec(n + P), *dyd = dvec(n), *num = dvec(n + P);
    ocr_test_fill_uniform(xs, n, 41, -2.0f, 2.0f);
    ocr_test_fill_uniform(ps, P, 42, -0.1f, 0.1f);
    ocr_test_fill_uniform(dys, n, 43, -1.0f, 1.0f);
    ocr_test_fill_uniform(start, P, 44, -1.0f, 1.0f);
    for (int64_t i = 0; i < n; i++) p[i] = xs[i], dyd[i] = dys[i];
    for (int64_t j = 0; j < P; j++) p[n + j] = ps[j];
    OcrTensor x = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, C), xs), pos = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(1, T, C), ps);
    OcrTensor y = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, C), NULL);
    ocr_batch_broadcast_add_forward(&y, &x, &pos);
    fetch(got, &y);
    for (int64_t i = 0; i < n; i++) ck_assert_float_eq(got[i], xs[i] + ps[i % P]);

    BcRef r = {B, P, dyd};
    ocr_test_numeric_grad(num, p, n + P, bcast_loss, &r, 1e-6);
    OcrTensor dy = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, C), dys), dx = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, C), NULL);
    OcrTensor dpos = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(1, T, C), start);
    ocr_batch_broadcast_add_backward(&dx, &dpos, &dy);
    fetch(got, &dx);
    ck_assert(ocr_test_allclose_f64(got, num, n, 1e-6, 1e-6, "batch_broadcast_add dinp"));
    ck_assert(memcmp(got, dys, (size_t)n * sizeof(float)) == 0);
    float *dp = fvec(P);
    fetch(dp, &dpos);
    for (int64_t j = 0; j < P; j++) {
        double acc = 0;
        for (int64_t b = 0; b < B; b++) acc += dys[b * P + j];
        ck_assert_float_eq(dp[j], start[j] + (float)acc);
        ck_assert_msg(fabs(dp[j] - start[j] - num[n + j]) < 1e-5, "dpos %lld", (long long)j);
    }
    // dinp NULL: dpos accumulates again.
    ocr_batch_broadcast_add_backward(NULL, &dpos, &dy);
    float *dp2 = fvec(P);
    fetch(dp2, &dpos);
    for (int64_t j = 0; j < P; j++) {
        double acc = 0;
        for (int64_t b = 0; b < B; b++) acc += dys[b * P + j];
        ck_assert_float_eq(dp2[j], dp[j] + (float)acc);
    }
    // Low precision: bf16 activations, f32 embedding (O2 keeps the embedding in amp_dtype; any mix works).
    OcrTensor xb = ocr_test_tensor(OCR_BF16, 3, OCR_SHAPE(B, T, C), xs), yb = ocr_test_tensor(OCR_BF16, 3, OCR_SHAPE(B, T, C), NULL);
    OcrTensor ph = ocr_test_tensor(OCR_F16, 3, OCR_SHAPE(1, T, C), ps);
    ocr_batch_broadcast_add_forward(&yb, &xb, &ph);
    float *xr = fvec(n), *pr = fvec(P);
    memcpy(xr, xs, (size_t)n * sizeof(float));
    memcpy(pr, ps, (size_t)P * sizeof(float));
    round_to(xr, n, OCR_BF16);
    round_to(pr, P, OCR_F16);
    fetch(got, &yb);
    for (int64_t i = 0; i < n; i++) ck_assert_float_eq(got[i], ocr_bf16_to_f32(ocr_f32_to_bf16(xr[i] + pr[i % P])));
    // In place.
    ocr_batch_broadcast_add_forward(&x, &x, &pos);
    fetch(got, &x);
    for (int64_t i = 0; i < n; i++) ck_assert_float_eq(got[i], xs[i] + ps[i % P]);
    free(xs), free(ps), free(dys), free(got), free(start), free(p), free(dyd), free(num), free(dp), free(dp2), free(xr),
        free(pr);
    ocr_tensor_free(&x), ocr_tensor_free(&pos), ocr_tensor_free(&y), ocr_tensor_free(&dy), ocr_tensor_free(&dx),
        ocr_tensor_free(&dpos), ocr_tensor_free(&xb), ocr_tensor_free(&yb), ocr_tensor_free(&ph);
}
END_TEST

// ---- local attention mask -------------------------------------------------------------------------

START_TEST(test_attention_local_mask) {
    // PaddleOCR's local mixer builds the mask by writing zeros into an (H + hk − 1, W + wk − 1)
    // padded window per query and cropping; re-stated here that way.
    const int cases[3][4] = {{3, 10, 7, 11}, {1, 25, 7, 11}, {4, 6, 3, 5}};
    for (int c = 0; c < 3; c++) {
        const int gh = cases[c][0], gw = cases[c][1], hk = cases[c][2], wk = cases[c][3];
        const int64_t T = (int64_t)gh * gw;
        OcrTensor m = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(T, T), NULL);
        ocr_attention_local_mask(&m, gh, gw, hk, wk);
        const float *v = m.data;
        const int ph = gh + hk - 1, pw = gw + wk - 1;
        float *pad = fvec((int64_t)ph * pw);
        for (int h = 0; h < gh; h++)
            for (int w = 0; w < gw; w++) {
                for (int i = 0; i < ph * pw; i++) pad[i] = 1.0f;
                for (int i = 0; i < hk; i++)
                    for (int j = 0; j < wk; j++) pad[(h + i) * pw + w + j] = 0.0f;
                const int64_t q = (int64_t)h * gw + w;
                for (int kh = 0; kh < gh; kh++)
                    for (int kw = 0; kw < gw; kw++) {
                        float want = pad[(kh + hk / 2) * pw + kw + wk / 2] == 0.0f ? 0.0f : -INFINITY;
                        float have = v[q * T + (int64_t)kh * gw + kw];
                        ck_assert_msg(have == want, "case %d: query (%d, %d) key (%d, %d): %g", c, h, w, kh, kw, have);
                    }
            }
        free(pad);
        ocr_tensor_free(&m);
    }
}
END_TEST

// ---- padded input normalisation -------------------------------------------------------------------------

START_TEST(test_input_normalize_padded) {
    const int64_t N = 3, H = 4, W = 37, C = 3, n = N * H * W * C;
    OcrTensor p = ocr_test_tensor(OCR_U8, 4, OCR_SHAPE(N, H, W, C), NULL);
    uint8_t *px = p.data;
    for (int64_t i = 0; i < n; i++) px[i] = (uint8_t)((i * 37 + 11) & 255);
    for (int i = 0; i < 256; i++) px[i] = (uint8_t)i;
    float lut[256];
    ocr_input_normalize_lut(lut);
    // Widths: full, partial, beyond W (clamped), and then 0 and negative (all padding).
    const int32_t wsets[2][3] = {{37, 20, 1000}, {1, 0, -5}};
    for (int k = 0; k < 3; k++)
        for (int ws = 0; ws < 2; ws++) {
            OcrTensor wt = ocr_test_tensor(OCR_I32, 1, OCR_SHAPE(N), NULL);
            memcpy(wt.data, wsets[ws], sizeof wsets[ws]);
            OcrTensor y = ocr_test_tensor(DTS[k], 4, OCR_SHAPE(N, H, W, C), NULL), full = ocr_test_tensor(DTS[k], 4, OCR_SHAPE(N, H, W, C), NULL);
            ocr_input_normalize_padded_forward(&y, &p, &wt);
            ocr_input_normalize_forward(&full, &p);
            for (int64_t i = 0; i < n; i++) {
                const int64_t b = i / (H * W * C), x = i / C % W;
                int64_t wb = wsets[ws][b] < 0 ? 0 : wsets[ws][b] > W ? W : wsets[ws][b];
                const float v = ocr_tensor_get_f32(&y, i);
                if (x >= wb) {
                    ck_assert_msg(v == 0.0f && !signbit(v), "%s: padding at %lld is %g", ocr_dtype_name(DTS[k]), (long long)i, v);
                } else {
                    // Real pixels: the float32 recipe rounded into the dtype, and equal to the unpadded op.
                    float want = lut[px[i]];
                    if (DTS[k] == OCR_F16) want = ocr_f16_to_f32(ocr_f32_to_f16(want));
                    if (DTS[k] == OCR_BF16) want = ocr_bf16_to_f32(ocr_f32_to_bf16(want));
                    ck_assert_msg(ocr_f32_bits(v) == ocr_f32_bits(want), "%s: pixel %lld", ocr_dtype_name(DTS[k]), (long long)i);
                    ck_assert(ocr_f32_bits(v) == ocr_f32_bits(ocr_tensor_get_f32(&full, i)));
                }
            }
            // NULL widths = the plain op, bit for bit.
            ocr_input_normalize_padded_forward(&y, &p, NULL);
            ck_assert(memcmp(y.data, full.data, ocr_tensor_bytes(&y)) == 0);
            ocr_tensor_free(&wt), ocr_tensor_free(&y), ocr_tensor_free(&full);
        }
    // The loader's pad byte (128) becomes 0.0039..., not PaddleOCR's 0: only the widths give 0.
    ck_assert(lut[128] != 0.0f && lut[127] != 0.0f);
    ocr_tensor_free(&p);
}
END_TEST

START_TEST(test_input_normalize_threads) {
    const int64_t N = 5, H = 32, W = 100, C = 3, n = N * H * W * C;
    OcrTensor p = ocr_test_tensor(OCR_U8, 4, OCR_SHAPE(N, H, W, C), NULL);
    for (int64_t i = 0; i < n; i++) ((uint8_t *)p.data)[i] = (uint8_t)((i * 131 + 7) & 255);
    OcrTensor wt = ocr_test_tensor(OCR_I32, 1, OCR_SHAPE(N), NULL);
    for (int b = 0; b < N; b++) ((int32_t *)wt.data)[b] = 17 + 19 * b;
    OcrTensor y[2];
    int saved = omp_get_max_threads();
    for (int q = 0; q < 2; q++) {
        omp_set_num_threads(q ? 3 : 1);
        y[q] = ocr_test_tensor(OCR_F16, 4, OCR_SHAPE(N, H, W, C), NULL);
        ocr_input_normalize_padded_forward(&y[q], &p, &wt);
    }
    omp_set_num_threads(saved);
    ck_assert(memcmp(y[0].data, y[1].data, ocr_tensor_bytes(&y[0])) == 0);
    ocr_tensor_free(&p), ocr_tensor_free(&wt), ocr_tensor_free(&y[0]), ocr_tensor_free(&y[1]);
}
END_TEST

int main(void) {
    Suite *s = suite_create("kernels_affine");
    TCase *tc = tcase_create("affine");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_scalar_affine_f32);
    tcase_add_test(tc, test_scalar_affine_reduction_and_threads);
    tcase_add_test(tc, test_scalar_affine_low_precision);
    tcase_add_test(tc, test_affine_act_affine_matches_the_three_ops);
    tcase_add_test(tc, test_affine_act_affine_gradients);
    tcase_add_test(tc, test_batch_broadcast_add);
    tcase_add_test(tc, test_attention_local_mask);
    tcase_add_test(tc, test_input_normalize_padded);
    tcase_add_test(tc, test_input_normalize_threads);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

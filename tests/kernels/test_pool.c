// Pooling on NHWC maps: average (padding excluded from the divisor, Paddle exclusive=True),
// max (gradient to the first maximum) and adaptive average (floor/ceil bins, global pooling
// included). Forward against a double reference, backward against finite differences of
// Σ dout·out, hand-computed cases, ties, f16/bf16 against f32, and thread-count invariance.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "tests/common/test_util.h"

enum { POOL_AVG, POOL_MAX, POOL_ADAPTIVE };
static const char *const KIND_NAMES[3] = {"avgpool", "maxpool", "adaptive_avgpool"};

typedef struct {
    int kind;
    int64_t N, H, W, C, Ho, Wo;
    Pool2dParams p;
    const double *dout;
} PoolRef;

// The input window of output (oh, ow), clipped to the map.
static void ref_window(const PoolRef *r, int64_t oh, int64_t ow, int64_t *h0, int64_t *h1, int64_t *w0, int64_t *w1) {
    if (r->kind == POOL_ADAPTIVE) {
        *h0 = (int64_t)floor((double)oh * r->H / r->Ho);
        *h1 = (int64_t)ceil((double)(oh + 1) * r->H / r->Ho);
        *w0 = (int64_t)floor((double)ow * r->W / r->Wo);
        *w1 = (int64_t)ceil((double)(ow + 1) * r->W / r->Wo);
        return;
    }
    int64_t hs = oh * r->p.stride_h - r->p.pad_h, ws = ow * r->p.stride_w - r->p.pad_w;
    *h0 = hs < 0 ? 0 : hs;
    *w0 = ws < 0 ? 0 : ws;
    *h1 = hs + r->p.kernel_h < r->H ? hs + r->p.kernel_h : r->H;
    *w1 = ws + r->p.kernel_w < r->W ? ws + r->p.kernel_w : r->W;
}

static void ref_forward(double *y, const double *x, const PoolRef *r) {
    for (int64_t n = 0; n < r->N; n++)
        for (int64_t oh = 0; oh < r->Ho; oh++)
            for (int64_t ow = 0; ow < r->Wo; ow++)
                for (int64_t c = 0; c < r->C; c++) {
                    int64_t h0, h1, w0, w1;
                    ref_window(r, oh, ow, &h0, &h1, &w0, &w1);
                    double acc = r->kind == POOL_MAX ? -INFINITY : 0.0;
                    for (int64_t h = h0; h < h1; h++)
                        for (int64_t w = w0; w < w1; w++) {
                            double v = x[((n * r->H + h) * r->W + w) * r->C + c];
                            if (r->kind == POOL_MAX)
                                acc = v > acc ? v : acc;
                            else
                                acc += v;
                        }
                    if (r->kind != POOL_MAX) acc /= (double)((h1 - h0) * (w1 - w0));
                    y[((n * r->Ho + oh) * r->Wo + ow) * r->C + c] = acc;
                }
}

// The max-pool gradient by the first-maximum rule (row-major scan, strict >), in double.
static void ref_max_backward(double *dx, const double *x, const double *dy, const PoolRef *r) {
    memset(dx, 0, (size_t)(r->N * r->H * r->W * r->C) * sizeof(double));
    for (int64_t n = 0; n < r->N; n++)
        for (int64_t oh = 0; oh < r->Ho; oh++)
            for (int64_t ow = 0; ow < r->Wo; ow++)
                for (int64_t c = 0; c < r->C; c++) {
                    int64_t h0, h1, w0, w1, best = -1;
                    ref_window(r, oh, ow, &h0, &h1, &w0, &w1);
                    double m = -INFINITY;
                    for (int64_t h = h0; h < h1; h++)
                        for (int64_t w = w0; w < w1; w++) {
                            int64_t i = ((n * r->H + h) * r->W + w) * r->C + c;
                            if (x[i] > m) {
                                m = x[i];
                                best = i;
                            }
                        }
                    dx[best] += dy[((n * r->Ho + oh) * r->Wo + ow) * r->C + c];
                }
}

static double ref_loss(const double *x, void *vctx) {
    const PoolRef *r = vctx;
    const int64_t n = r->N * r->Ho * r->Wo * r->C;
    double *y = malloc(n * sizeof(double));
    ref_forward(y, x, r);
    double l = 0;
    for (int64_t i = 0; i < n; i++) l += r->dout[i] * y[i];
    free(y);
    return l;
}

static float *fvec(int64_t n) { return malloc((size_t)(n > 0 ? n : 1) * sizeof(float)); }
static double *dvec(int64_t n) { return malloc((size_t)(n > 0 ? n : 1) * sizeof(double)); }
static void to_double(double *d, const float *f, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = f[i];
}
static void fetch(float *dst, const OcrTensor *t) { ocr_tensor_to_f32(t, dst); }
static void round_to(float *v, int64_t n, ocr_dtype_t dt) {
    OcrTensor t = ocr_test_tensor(dt, 1, OCR_SHAPE(n), v);
    ocr_tensor_to_f32(&t, v);
    ocr_tensor_free(&t);
}

static void run_forward(OcrTensor *out, const OcrTensor *inp, const PoolRef *r) {
    if (r->kind == POOL_AVG)
        ocr_avgpool2d_forward(out, inp, r->p);
    else if (r->kind == POOL_MAX)
        ocr_maxpool2d_forward(out, inp, r->p);
    else
        ocr_adaptive_avgpool2d_forward(out, inp);
}

static void run_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *inp, const PoolRef *r) {
    if (r->kind == POOL_AVG)
        ocr_avgpool2d_backward(dinp, dout, r->p);
    else if (r->kind == POOL_MAX)
        ocr_maxpool2d_backward(dinp, dout, inp, r->p);
    else
        ocr_adaptive_avgpool2d_backward(dinp, dout);
}

static PoolRef window_case(int kind, int64_t N, int64_t H, int64_t W, int64_t C, int kh, int kw, int sh, int sw, int ph,
                           int pw) {
    PoolRef r = {kind, N, H, W, C, 0, 0, {kh, kw, sh, sw, ph, pw}, NULL};
    r.Ho = (H + 2 * ph - kh) / sh + 1;
    r.Wo = (W + 2 * pw - kw) / sw + 1;
    return r;
}

static PoolRef adaptive_case(int64_t N, int64_t H, int64_t W, int64_t C, int64_t Ho, int64_t Wo) {
    PoolRef r = {POOL_ADAPTIVE, N, H, W, C, Ho, Wo, {0, 0, 0, 0, 0, 0}, NULL};
    return r;
}

// Forward against the reference, backward against finite differences; dinp is assigned.
static void check_case(PoolRef r, uint64_t seed) {
    const int64_t ni = r.N * r.H * r.W * r.C, no = r.N * r.Ho * r.Wo * r.C;
    float *xs = fvec(ni), *dys = fvec(no), *got = fvec(ni > no ? ni : no), *first = fvec(ni);
    double *xd = dvec(ni), *dyd = dvec(no), *yref = dvec(no), *num = dvec(ni);
    ocr_test_fill_uniform(xs, ni, seed, -2.0f, 2.0f);
    ocr_test_fill_uniform(dys, no, seed + 1, -1.0f, 1.0f);
    to_double(xd, xs, ni);
    to_double(dyd, dys, no);
    r.dout = dyd;
    char what[160];
    snprintf(what, sizeof what, "%s N%lld H%lld W%lld C%lld -> %lldx%lld k%dx%d s%dx%d p%dx%d", KIND_NAMES[r.kind],
             (long long)r.N, (long long)r.H, (long long)r.W, (long long)r.C, (long long)r.Ho, (long long)r.Wo,
             r.p.kernel_h, r.p.kernel_w, r.p.stride_h, r.p.stride_w, r.p.pad_h, r.p.pad_w);

    OcrTensor x = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(r.N, r.H, r.W, r.C), xs);
    OcrTensor y = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(r.N, r.Ho, r.Wo, r.C), NULL);
    OcrTensor dy = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(r.N, r.Ho, r.Wo, r.C), dys);
    OcrTensor dx = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(r.N, r.H, r.W, r.C), NULL);
    run_forward(&y, &x, &r);
    ref_forward(yref, xd, &r);
    fetch(got, &y);
    ck_assert_msg(ocr_test_allclose_f64(got, yref, no, 1e-6, 1e-6, what), "forward %s", what);

    ocr_test_numeric_grad(num, xd, ni, ref_loss, &r, 1e-6);
    run_backward(&dx, &dy, &x, &r);
    fetch(first, &dx);
    double err = ocr_test_rel_error(first, num, ni);
    ck_assert_msg(err < 1e-6, "backward %s: rel error %g", what, err);
    ck_assert_msg(ocr_test_allclose_f64(first, num, ni, 1e-6, 1e-5, what), "backward %s", what);
    ocr_test_poison(&dx);
    run_backward(&dx, &dy, &x, &r);
    fetch(got, &dx);
    ck_assert_msg(memcmp(got, first, ni * sizeof(float)) == 0, "backward %s is not assigned", what);

    ocr_tensor_free(&x); ocr_tensor_free(&y); ocr_tensor_free(&dy); ocr_tensor_free(&dx);
    free(xs); free(dys); free(got); free(first); free(xd); free(dyd); free(yref); free(num);
}

static PoolRef window_cases(int kind, int i) {
    switch (i) {
        case 0: return window_case(kind, 2, 7, 6, 11, 3, 3, 2, 2, 1, 1);  // overlapping, padded
        case 1: return window_case(kind, 2, 5, 7, 13, 2, 2, 2, 2, 0, 0);  // last row/col dropped
        case 2: return window_case(kind, 3, 6, 5, 9, 3, 2, 2, 1, 1, 0);   // anisotropic
        case 3: return window_case(kind, 1, 4, 5, 8, 3, 3, 1, 1, 1, 1);   // "same" size
        default: return window_case(kind, 2, 3, 8, 5, 3, 2, 2, 2, 0, 0);  // v3 last-pool-like: 3 rows -> 1
    }
}

START_TEST(test_avgpool) {
    for (int i = 0; i < 5; i++) check_case(window_cases(POOL_AVG, i), 100 + 10 * i);
}
END_TEST

START_TEST(test_maxpool) {
    for (int i = 0; i < 5; i++) check_case(window_cases(POOL_MAX, i), 200 + 10 * i);
}
END_TEST

START_TEST(test_adaptive_avgpool) {
    check_case(adaptive_case(2, 7, 5, 11, 3, 2), 300);   // uneven, overlapping bins
    check_case(adaptive_case(3, 6, 7, 13, 1, 1), 310);   // global average pooling
    check_case(adaptive_case(2, 3, 4, 9, 5, 6), 320);    // more bins than rows (upsampling)
    check_case(adaptive_case(1, 4, 6, 8, 4, 6), 330);    // identity
    check_case(adaptive_case(2, 7, 12, 5, 1, 4), 340);   // PPLCNetV3's [1, W/..] shape
}
END_TEST

// Hand-computed: padding is excluded from the divisor, and adaptive bins overlap as
// [floor(i·H/Ho), ceil((i+1)·H/Ho)).
START_TEST(test_hand_cases) {
    // 2×2 map, 3×3 window, stride 1, pad 1: every window covers all four values -> 2.5
    // (an inclusive divisor would give 10/9).
    OcrTensor x = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(1, 2, 2, 1), (float[]){1, 2, 3, 4});
    OcrTensor y = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(1, 2, 2, 1), NULL);
    Pool2dParams p = {3, 3, 1, 1, 1, 1};
    ocr_avgpool2d_forward(&y, &x, p);
    for (int i = 0; i < 4; i++) ck_assert_float_eq(ocr_tensor_get_f32(&y, i), 2.5f);
    // Backward: each input gets 4 windows × 1/4.
    OcrTensor g = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(1, 2, 2, 1), (float[]){1, 1, 1, 1});
    OcrTensor dx = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(1, 2, 2, 1), NULL);
    ocr_avgpool2d_backward(&dx, &g, p);
    for (int i = 0; i < 4; i++) ck_assert_float_eq(ocr_tensor_get_f32(&dx, i), 1.0f);

    // Adaptive, H = 5 -> 3: bins [0,2) [1,4) [3,5) over a column 0..4: 0.5, 2, 3.5.
    OcrTensor col = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(1, 5, 1, 1), (float[]){0, 1, 2, 3, 4});
    OcrTensor a = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(1, 3, 1, 1), NULL);
    ocr_adaptive_avgpool2d_forward(&a, &col);
    ck_assert_float_eq(ocr_tensor_get_f32(&a, 0), 0.5f);
    ck_assert_float_eq(ocr_tensor_get_f32(&a, 1), 2.0f);
    ck_assert_float_eq(ocr_tensor_get_f32(&a, 2), 3.5f);
    // Backward with dout = (2, 3, 4): row 0 gets 2/2, row 1 2/2 + 3/3, row 3 3/3 + 4/2.
    OcrTensor ga = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(1, 3, 1, 1), (float[]){2, 3, 4});
    OcrTensor dcol = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(1, 5, 1, 1), NULL);
    ocr_adaptive_avgpool2d_backward(&dcol, &ga);
    const float expect[5] = {1, 2, 1, 3, 2};
    for (int i = 0; i < 5; i++) ck_assert_float_eq(ocr_tensor_get_f32(&dcol, i), expect[i]);
    ocr_tensor_free(&x); ocr_tensor_free(&y); ocr_tensor_free(&g); ocr_tensor_free(&dx);
    ocr_tensor_free(&col); ocr_tensor_free(&a); ocr_tensor_free(&ga); ocr_tensor_free(&dcol);
}
END_TEST

// Ties: the gradient goes to the first maximum in row-major window order only.
START_TEST(test_maxpool_ties) {
    for (int i = 0; i < 5; i++) {
        PoolRef r = window_cases(POOL_MAX, i);
        const int64_t ni = r.N * r.H * r.W * r.C, no = r.N * r.Ho * r.Wo * r.C;
        float *xs = fvec(ni), *dys = fvec(no), *got = fvec(ni);
        double *xd = dvec(ni), *dyd = dvec(no), *ref = dvec(ni);
        ocr_test_fill_uniform(xs, ni, 400 + i, 0.0f, 3.0f);
        for (int64_t j = 0; j < ni; j++) xs[j] = floorf(xs[j]);  // values 0, 1, 2: many ties
        if (i == 0)
            for (int64_t j = 0; j < ni; j++) xs[j] = 1.0f;  // everything ties
        ocr_test_fill_uniform(dys, no, 410 + i, 0.5f, 1.5f);
        to_double(xd, xs, ni);
        to_double(dyd, dys, no);
        ref_max_backward(ref, xd, dyd, &r);
        OcrTensor x = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(r.N, r.H, r.W, r.C), xs);
        OcrTensor dy = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(r.N, r.Ho, r.Wo, r.C), dys);
        OcrTensor dx = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(r.N, r.H, r.W, r.C), NULL);
        ocr_maxpool2d_backward(&dx, &dy, &x, r.p);
        fetch(got, &dx);
        ck_assert_msg(ocr_test_allclose_f64(got, ref, ni, 1e-6, 1e-6, "maxpool ties"), "ties case %d", i);
        ocr_tensor_free(&x); ocr_tensor_free(&dy); ocr_tensor_free(&dx);
        free(xs); free(dys); free(got); free(xd); free(dyd); free(ref);
    }
}
END_TEST

// f16/bf16 and mixed dtypes: the f32 result on the same rounded inputs, rounded once. Max
// pooling moves values, so its forward is exact.
START_TEST(test_low_precision) {
    const ocr_dtype_t combos[][4] = {
        {OCR_F16, OCR_F16, OCR_F16, OCR_F16},
        {OCR_BF16, OCR_BF16, OCR_BF16, OCR_BF16},
        {OCR_F16, OCR_F32, OCR_BF16, OCR_F32},
        {OCR_BF16, OCR_F16, OCR_F32, OCR_BF16},
    };
    PoolRef cases[3] = {window_cases(POOL_AVG, 0), window_cases(POOL_MAX, 2), adaptive_case(2, 7, 5, 11, 3, 2)};
    for (int ci = 0; ci < 3; ci++) {
        const PoolRef r = cases[ci];
        const int64_t ni = r.N * r.H * r.W * r.C, no = r.N * r.Ho * r.Wo * r.C;
        float *xs = fvec(ni), *dys = fvec(no), *ref = fvec(ni), *got = fvec(ni);
        for (size_t k = 0; k < sizeof combos / sizeof combos[0]; k++) {
            const ocr_dtype_t *dt = combos[k];
            ocr_test_fill_uniform(xs, ni, 500 + k, -2.0f, 2.0f);
            ocr_test_fill_uniform(dys, no, 510 + k, -1.0f, 1.0f);
            round_to(xs, ni, dt[0]);
            round_to(dys, no, dt[2]);
            OcrTensor t[2][4];
            for (int q = 0; q < 2; q++) {
                t[q][0] = ocr_test_tensor(q ? dt[0] : OCR_F32, 4, OCR_SHAPE(r.N, r.H, r.W, r.C), xs);
                t[q][1] = ocr_test_tensor(q ? dt[1] : OCR_F32, 4, OCR_SHAPE(r.N, r.Ho, r.Wo, r.C), NULL);
                t[q][2] = ocr_test_tensor(q ? dt[2] : OCR_F32, 4, OCR_SHAPE(r.N, r.Ho, r.Wo, r.C), dys);
                t[q][3] = ocr_test_tensor(q ? dt[3] : OCR_F32, 4, OCR_SHAPE(r.N, r.H, r.W, r.C), NULL);
                run_forward(&t[q][1], &t[q][0], &r);
                run_backward(&t[q][3], &t[q][2], &t[q][0], &r);
            }
            char what[128];
            snprintf(what, sizeof what, "%s out %s<-%s", KIND_NAMES[r.kind], ocr_dtype_name(dt[1]),
                     ocr_dtype_name(dt[0]));
            fetch(ref, &t[0][1]);
            fetch(got, &t[1][1]);
            double u = ocr_test_dtype_eps(dt[1]);
            if (r.kind == POOL_MAX && ocr_test_dtype_eps(dt[0]) >= u) u = 0;  // the max is representable
            ck_assert_msg(ocr_test_allclose_f32(got, ref, no, u ? 1e-7 : 0, 1.01 * u, what), "%s", what);
            snprintf(what, sizeof what, "%s dinp %s<-%s", KIND_NAMES[r.kind], ocr_dtype_name(dt[3]),
                     ocr_dtype_name(dt[2]));
            fetch(ref, &t[0][3]);
            fetch(got, &t[1][3]);
            ck_assert_msg(ocr_test_allclose_f32(got, ref, ni, 1e-7, 1.01 * ocr_test_dtype_eps(dt[3]), what), "%s",
                          what);
            for (int q = 0; q < 2; q++)
                for (int j = 0; j < 4; j++) ocr_tensor_free(&t[q][j]);
        }
        free(xs); free(dys); free(ref); free(got);
    }
}
END_TEST

// Large enough for the OpenMP paths: 1 and 3 threads agree bit for bit, and match the reference.
START_TEST(test_threads_invariant) {
    PoolRef cases[3] = {window_case(POOL_AVG, 4, 24, 40, 16, 3, 3, 2, 2, 1, 1),
                        window_case(POOL_MAX, 4, 24, 40, 16, 3, 3, 2, 2, 1, 1), adaptive_case(4, 24, 40, 16, 1, 10)};
    int saved = omp_get_max_threads();
    for (int ci = 0; ci < 3; ci++) {
        const PoolRef r = cases[ci];
        const int64_t ni = r.N * r.H * r.W * r.C, no = r.N * r.Ho * r.Wo * r.C;
        float *xs = fvec(ni), *dys = fvec(no), *y[2] = {fvec(no), fvec(no)}, *dx[2] = {fvec(ni), fvec(ni)};
        double *xd = dvec(ni), *yref = dvec(no);
        ocr_test_fill_uniform(xs, ni, 600 + ci, -2.0f, 2.0f);
        ocr_test_fill_uniform(dys, no, 610 + ci, -1.0f, 1.0f);
        OcrTensor x = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(r.N, r.H, r.W, r.C), xs);
        OcrTensor dy = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(r.N, r.Ho, r.Wo, r.C), dys);
        OcrTensor yt = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(r.N, r.Ho, r.Wo, r.C), NULL);
        OcrTensor dxt = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(r.N, r.H, r.W, r.C), NULL);
        for (int q = 0; q < 2; q++) {
            omp_set_num_threads(q ? 3 : 1);
            ocr_test_poison(&yt);
            ocr_test_poison(&dxt);
            run_forward(&yt, &x, &r);
            run_backward(&dxt, &dy, &x, &r);
            fetch(y[q], &yt);
            fetch(dx[q], &dxt);
        }
        omp_set_num_threads(saved);
        ck_assert_msg(memcmp(y[0], y[1], no * sizeof(float)) == 0, "%s forward depends on threads", KIND_NAMES[r.kind]);
        ck_assert_msg(memcmp(dx[0], dx[1], ni * sizeof(float)) == 0, "%s backward depends on threads",
                      KIND_NAMES[r.kind]);
        to_double(xd, xs, ni);
        ref_forward(yref, xd, &r);
        ck_assert_msg(ocr_test_allclose_f64(y[1], yref, no, 1e-6, 1e-6, KIND_NAMES[r.kind]), "parallel %s",
                      KIND_NAMES[r.kind]);
        ocr_tensor_free(&x); ocr_tensor_free(&dy); ocr_tensor_free(&yt); ocr_tensor_free(&dxt);
        free(xs); free(dys); free(y[0]); free(y[1]); free(dx[0]); free(dx[1]); free(xd); free(yref);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("kernels_pool");
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_avgpool);
    tcase_add_test(tc, test_maxpool);
    tcase_add_test(tc, test_adaptive_avgpool);
    tcase_add_test(tc, test_hand_cases);
    tcase_add_test(tc, test_maxpool_ties);
    tcase_add_test(tc, test_low_precision);
    tcase_add_test(tc, test_threads_invariant);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

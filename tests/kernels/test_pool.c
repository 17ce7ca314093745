// Pooling on NHWC maps: average (padding excluded from the divisor, Paddle exclusive=True),
// max (gradient to the first maximum) and adaptive average (floor/ceil bins, global pooling
// included). Forward against a double reference, backward against finite differences of
// Σ dout·out, hand-computed cases, ties, f16/bf16 against f32, thread-count invariance, and the
// max pool bit for bit against a whole-tensor fp32 reference at every vector level.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "kernels/cpu/isa.h"
#include "kernels/ops.h"
#include "tests/common/test_util.h"

int ocr_cpu_vec_select(const char *name);  // kernels/cpu/cpu_common.h (test hook)

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

// ---- max pool bit for bit --------------------------------------------------------------------
// The reference is the whole-tensor fp32 path the kernel had before it read f16/bf16 maps in
// their own dtype: widen every map with the bulk converters, take each window's max in fp32
// (first element, then v > m ? v : m in row-major window order), gather each pixel's gradient in
// fp32 (0, then + (argmax == pixel ? dy : 0) over the windows covering it, oh then ow ascending)
// and round every output once with the bulk converters. The inputs are a small palette (many
// ties, +0 next to −0, ±inf) with a few NaNs (signalling ones with payloads too), so the tie
// rule, the sign of a zero maximum and what becomes of a NaN are all visible in the bits.

static void bits_widen(float *dst, const OcrTensor *t) {
    const size_t n = (size_t)ocr_tensor_numel(t);
    if (t->dtype == OCR_F32) memcpy(dst, t->data, n * sizeof(float));
    else if (t->dtype == OCR_F16) ocr_f16_to_f32_array(dst, t->data, n);
    else ocr_bf16_to_f32_array(dst, t->data, n);
}

// src rounded to dt into dst (numel·size bytes).
static void bits_round(void *dst, const float *src, size_t n, ocr_dtype_t dt) {
    if (dt == OCR_F32) memcpy(dst, src, n * sizeof(float));
    else if (dt == OCR_F16) ocr_f32_to_f16_array(dst, src, n);
    else ocr_f32_to_bf16_array(dst, src, n);
}

static uint32_t lcg_next(uint64_t *st) {
    *st = *st * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*st >> 33);
}

// Fills t with palette values: integers −3..3 (ties), ±0, ±inf, and NaNs in about 1/nan_every
// of the elements (0: none), of either sign, quiet and signalling with payloads.
static void bits_fill(OcrTensor *t, uint64_t seed, int nan_every, int smooth) {
    static const float palette[] = {-3, -2, -1, -0.0f, 0.0f, 1, 2, 3, -2.5f, 1.5f};
    static const uint32_t nan32[] = {0x7fc00000u, 0xffc00001u, 0x7f800001u, 0xffa5a5a5u};
    static const uint16_t nan16[] = {0x7e00u, 0xfe01u, 0x7c01u, 0xfd55u};
    static const uint16_t nanbf[] = {0x7fc0u, 0xffc1u, 0x7f81u, 0xffa5u};
    const int64_t n = ocr_tensor_numel(t);
    const size_t es = ocr_dtype_size(t->dtype);
    float *v = malloc((size_t)n * sizeof(float) + 1);
    uint64_t st = seed;
    for (int64_t i = 0; i < n; i++) {
        const uint32_t u = lcg_next(&st);
        if (smooth) v[i] = ((float)(u % 2001u) - 1000.0f) / 337.0f;
        else v[i] = (u % 41u == 0) ? ((u >> 8) & 1 ? INFINITY : -INFINITY) : palette[(u >> 8) % 10u];
    }
    bits_round(t->data, v, (size_t)n, t->dtype);
    for (int64_t i = 0; nan_every && i < n; i++) {
        const uint32_t u = lcg_next(&st);
        if (u % (uint32_t)nan_every) continue;
        const int k = (int)((u >> 8) & 3);
        char *dst = (char *)t->data + (size_t)i * es;
        if (t->dtype == OCR_F32) memcpy(dst, &nan32[k], 4);
        else memcpy(dst, t->dtype == OCR_F16 ? &nan16[k] : &nanbf[k], 2);
    }
    free(v);
}

// y and arg (flat input pixel of the first maximum) of every output, in fp32.
static void bits_ref_forward(float *y, int32_t *arg, const float *x, const PoolRef *r) {
    for (int64_t n = 0; n < r->N; n++)
        for (int64_t oh = 0; oh < r->Ho; oh++)
            for (int64_t ow = 0; ow < r->Wo; ow++) {
                int64_t h0, h1, w0, w1;
                ref_window(r, oh, ow, &h0, &h1, &w0, &w1);
                for (int64_t c = 0; c < r->C; c++) {
                    float m = x[((n * r->H + h0) * r->W + w0) * r->C + c];
                    int32_t a = (int32_t)(h0 * r->W + w0);
                    for (int64_t h = h0; h < h1; h++)
                        for (int64_t w = w0; w < w1; w++) {
                            const float v = x[((n * r->H + h) * r->W + w) * r->C + c];
                            if (v > m) m = v, a = (int32_t)(h * r->W + w);
                        }
                    const int64_t o = ((n * r->Ho + oh) * r->Wo + ow) * r->C + c;
                    y[o] = m;
                    arg[o] = a;
                }
            }
}

// loose[i] is set where two or more NaN gradients meet in dx[i]: which one's payload the sum keeps
// depends on the operand order the compiler picks for +, which C leaves open, so those elements
// are only required to be NaN.
static void bits_ref_backward(float *dx, char *loose, const int32_t *arg, const float *dy, const PoolRef *r) {
    for (int64_t n = 0; n < r->N; n++)
        for (int64_t h = 0; h < r->H; h++)
            for (int64_t w = 0; w < r->W; w++)
                for (int64_t c = 0; c < r->C; c++) {
                    float acc = 0.0f;
                    int nans = 0;
                    for (int64_t oh = 0; oh < r->Ho; oh++)
                        for (int64_t ow = 0; ow < r->Wo; ow++) {
                            int64_t h0, h1, w0, w1;
                            ref_window(r, oh, ow, &h0, &h1, &w0, &w1);
                            if (h < h0 || h >= h1 || w < w0 || w >= w1) continue;
                            const int64_t o = ((n * r->Ho + oh) * r->Wo + ow) * r->C + c;
                            const int hit = arg[o] == (int32_t)(h * r->W + w);
                            acc += hit ? dy[o] : 0.0f;
                            nans += hit && isnan(dy[o]);
                        }
                    dx[((n * r->H + h) * r->W + w) * r->C + c] = acc;
                    loose[((n * r->H + h) * r->W + w) * r->C + c] = nans > 1;
                }
}

// t's elements equal want's bits (where loose is set: both are NaN).
static void bits_expect(const OcrTensor *t, const void *want, const char *loose, const char *what, const char *name) {
    const size_t es = ocr_dtype_size(t->dtype);
    const int64_t n = ocr_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        const char *a = (const char *)t->data + (size_t)i * es, *b = (const char *)want + (size_t)i * es;
        if (memcmp(a, b, es) == 0) continue;
        if (loose && loose[i] && isnan(ocr_tensor_get_f32(t, i))) continue;
        uint32_t ga = 0, gb = 0;
        memcpy(&ga, a, es);
        memcpy(&gb, b, es);
        ck_abort_msg("%s: %s (%s)[%lld] has bits 0x%x, expected 0x%x", what, name, ocr_dtype_name(t->dtype),
                     (long long)i, ga, gb);
    }
}

static const char *const VEC_LEVELS[3] = {"sse2", "avx2", "avx512"};

// One case in one dtype combination {x, y, dy, dx}: the reference, then the kernel at every
// vector level, with 1 and 3 threads and under Global.cpu_exact_numerics, each bit for bit.
static void bits_case(PoolRef r, const ocr_dtype_t dt[4], uint64_t seed, int nan_every, int smooth) {
    const int64_t ni = r.N * r.H * r.W * r.C, no = r.N * r.Ho * r.Wo * r.C;
    OcrTensor x = ocr_test_tensor(dt[0], 4, OCR_SHAPE(r.N, r.H, r.W, r.C), NULL);
    OcrTensor y = ocr_test_tensor(dt[1], 4, OCR_SHAPE(r.N, r.Ho, r.Wo, r.C), NULL);
    OcrTensor dy = ocr_test_tensor(dt[2], 4, OCR_SHAPE(r.N, r.Ho, r.Wo, r.C), NULL);
    OcrTensor dx = ocr_test_tensor(dt[3], 4, OCR_SHAPE(r.N, r.H, r.W, r.C), NULL);
    bits_fill(&x, seed, nan_every, smooth);
    bits_fill(&dy, seed + 1, nan_every ? 4 * nan_every : 0, 1);
    float *xf = fvec(ni), *yf = fvec(no), *dyf = fvec(no), *dxf = fvec(ni);
    int32_t *arg = malloc((size_t)no * sizeof(int32_t) + 1);
    char *loose = malloc((size_t)ni + 1);
    void *ywant = malloc(ocr_tensor_bytes(&y) + 1), *dxwant = malloc(ocr_tensor_bytes(&dx) + 1);
    bits_widen(xf, &x);
    bits_widen(dyf, &dy);
    bits_ref_forward(yf, arg, xf, &r);
    bits_ref_backward(dxf, loose, arg, dyf, &r);
    bits_round(ywant, yf, (size_t)no, dt[1]);
    bits_round(dxwant, dxf, (size_t)ni, dt[3]);

    const int saved = omp_get_max_threads();
    int ran = 0;
    for (int li = 0; li < 3; li++) {
        if (!ocr_cpu_vec_select(VEC_LEVELS[li])) continue;
        for (int q = 0; q < 3; q++) {
            omp_set_num_threads(q == 1 ? 3 : 1);
            ocr_cpu_set_exact_numerics(q == 2);
            char what[200];
            snprintf(what, sizeof what, "maxpool %s N%lld H%lld W%lld C%lld k%dx%d s%dx%d p%dx%d x %s dy %s, %s%s",
                     VEC_LEVELS[li], (long long)r.N, (long long)r.H, (long long)r.W, (long long)r.C, r.p.kernel_h,
                     r.p.kernel_w, r.p.stride_h, r.p.stride_w, r.p.pad_h, r.p.pad_w, ocr_dtype_name(dt[0]),
                     ocr_dtype_name(dt[2]), q == 1 ? "3 threads" : "1 thread", q == 2 ? ", exact numerics" : "");
            ocr_test_poison(&y);
            ocr_test_poison(&dx);
            ocr_maxpool2d_forward(&y, &x, r.p);
            ocr_maxpool2d_backward(&dx, &dy, &x, r.p);
            bits_expect(&y, ywant, NULL, what, "y");
            bits_expect(&dx, dxwant, loose, what, "dx");
            ran++;
        }
    }
    ocr_cpu_set_exact_numerics(0);
    omp_set_num_threads(saved);
    ocr_cpu_vec_select(NULL);
    ck_assert(ran >= 3);
    ocr_tensor_free(&x); ocr_tensor_free(&y); ocr_tensor_free(&dy); ocr_tensor_free(&dx);
    free(xf); free(yf); free(dyf); free(dxf); free(arg); free(loose); free(ywant); free(dxwant);
}

START_TEST(test_maxpool_bits) {
    const PoolRef cases[] = {
        window_case(POOL_MAX, 2, 25, 33, 48, 2, 2, 1, 1, 0, 0),  // the PP-OCR stems' pool (parallel)
        window_case(POOL_MAX, 3, 9, 11, 3, 3, 3, 1, 1, 1, 1),    // "same" size, C = 3
        window_case(POOL_MAX, 2, 7, 6, 17, 3, 3, 2, 2, 1, 1),    // overlapping, padded
        window_case(POOL_MAX, 2, 8, 9, 17, 2, 3, 1, 2, 0, 1),    // anisotropic
        window_case(POOL_MAX, 1, 5, 7, 5, 3, 2, 2, 1, 1, 0),
        window_case(POOL_MAX, 4, 7, 5, 48, 2, 2, 2, 2, 0, 0),    // last row and column dropped
        window_case(POOL_MAX, 2, 4, 6, 17, 4, 6, 1, 1, 0, 0),    // one window over the whole map
        window_case(POOL_MAX, 2, 12, 13, 64, 3, 3, 1, 1, 1, 1),  // parallel, 3×3
        window_case(POOL_MAX, 1, 30, 20, 24, 2, 2, 1, 1, 0, 0),  // parallel, one image in blocks
    };
    const ocr_dtype_t combos[][4] = {
        {OCR_F32, OCR_F32, OCR_F32, OCR_F32},
        {OCR_BF16, OCR_BF16, OCR_BF16, OCR_BF16},
        {OCR_F16, OCR_F16, OCR_F16, OCR_F16},
        {OCR_BF16, OCR_F32, OCR_F16, OCR_F32},
        {OCR_F32, OCR_BF16, OCR_F32, OCR_F16},
    };
    const int ncases = (int)(sizeof cases / sizeof cases[0]), ncombos = (int)(sizeof combos / sizeof combos[0]);
    for (int ci = 0; ci < ncases; ci++)
        for (int k = 0; k < ncombos; k++) {
            bits_case(cases[ci], combos[k], 800 + 10 * (uint64_t)ci + (uint64_t)k, 0, 0);   // ties, ±0, ±inf
            bits_case(cases[ci], combos[k], 900 + 10 * (uint64_t)ci + (uint64_t)k, 23, 0);  // and NaNs
            bits_case(cases[ci], combos[k], 700 + 10 * (uint64_t)ci + (uint64_t)k, 0, 1);   // few ties
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
    tcase_add_test(tc, test_maxpool_bits);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

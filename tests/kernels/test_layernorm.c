// LayerNorm over the last dimension: forward (out, mean, rstd) against a double reference,
// backward against finite differences of Σ dout·out, dgamma/dbeta accumulation, optional
// tensors, f16/bf16 against the f32 result, and thread-count invariance.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "tests/common/test_util.h"

// Problem in double: p = [x (R·C) | gamma (C) | beta (C)].
typedef struct {
    int64_t R, C;
    double eps;
    const double *dout;
} LnRef;

static void ref_forward(double *y, double *mean, double *rstd, const double *p, const LnRef *r) {
    const int64_t R = r->R, C = r->C;
    const double *x = p, *g = p + R * C, *b = g + C;
    for (int64_t i = 0; i < R; i++) {
        const double *xr = x + i * C;
        double m = 0, v = 0;
        for (int64_t c = 0; c < C; c++) m += xr[c];
        m /= C;
        for (int64_t c = 0; c < C; c++) v += (xr[c] - m) * (xr[c] - m);
        v /= C;
        double rs = 1.0 / sqrt(v + r->eps);
        if (mean) mean[i] = m;
        if (rstd) rstd[i] = rs;
        if (y)
            for (int64_t c = 0; c < C; c++) y[i * C + c] = (xr[c] - m) * rs * g[c] + b[c];
    }
}

static double ref_loss(const double *p, void *vctx) {
    const LnRef *r = vctx;
    const int64_t n = r->R * r->C;
    double *y = malloc(n * sizeof(double));
    ref_forward(y, NULL, NULL, p, r);
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

// Rows with their own offsets (within ±2: a float mean rounds with error ~u·|mean|, which
// the normalised output magnifies by rstd) and scales.
static void make_input(float *x, int64_t R, int64_t C, uint64_t seed) {
    ocr_test_fill_uniform(x, R * C, seed, -1.0f, 1.0f);
    for (int64_t i = 0; i < R; i++)
        for (int64_t c = 0; c < C; c++)
            x[i * C + c] = x[i * C + c] * (1.0f + 0.3f * (float)(i % 5)) + 0.5f * (float)(i % 9) - 2.0f;
}

// C = 5 (below one 8-lane block), 13 and 37 (blocks plus a tail), two eps values.
START_TEST(test_forward_reference) {
    const int64_t Cs[3] = {5, 13, 37};
    const float epss[2] = {1e-5f, 1e-6f};
    for (int k = 0; k < 3; k++) {
        const int64_t B = 2, T = 5, C = Cs[k], R = B * T, n = R * C;
        float *xs = fvec(n), *gs = fvec(C), *bs = fvec(C), *got = fvec(n);
        double *p = dvec(n + 2 * C), *y = dvec(n), *m = dvec(R), *rs = dvec(R);
        make_input(xs, R, C, 100 + k);
        ocr_test_fill_uniform(gs, C, 110 + k, 0.5f, 1.5f);
        ocr_test_fill_uniform(bs, C, 120 + k, -0.5f, 0.5f);
        to_double(p, xs, n);
        to_double(p + n, gs, C);
        to_double(p + n + C, bs, C);
        for (int e = 0; e < 2; e++) {
            OcrTensor x = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, C), xs);
            OcrTensor g = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), gs);
            OcrTensor b = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), bs);
            OcrTensor out = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, C), NULL);
            OcrTensor mt = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(B, T), NULL);
            OcrTensor rt = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(B, T), NULL);
            ocr_layernorm_forward(&out, &mt, &rt, &x, &g, &b, epss[e]);
            LnRef ref = {R, C, epss[e], NULL};
            ref_forward(y, m, rs, p, &ref);
            fetch(got, &out);
            ck_assert_msg(ocr_test_allclose_f64(got, y, n, 2e-6, 2e-6, "ln out"), "C %lld eps %g", (long long)C,
                          epss[e]);
            fetch(got, &mt);
            ck_assert_msg(ocr_test_allclose_f64(got, m, R, 1e-6, 1e-6, "ln mean"), "C %lld", (long long)C);
            fetch(got, &rt);
            ck_assert_msg(ocr_test_allclose_f64(got, rs, R, 0, 1e-6, "ln rstd"), "C %lld", (long long)C);

            // Without gamma/beta (identity affine) and without the saved statistics.
            OcrTensor out2 = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, C), NULL);
            ocr_layernorm_forward(&out2, NULL, NULL, &x, NULL, NULL, epss[e]);
            double *p1 = dvec(n + 2 * C);
            memcpy(p1, p, n * sizeof(double));
            for (int64_t c = 0; c < C; c++) {
                p1[n + c] = 1;
                p1[n + C + c] = 0;
            }
            ref_forward(y, NULL, NULL, p1, &ref);
            fetch(got, &out2);
            ck_assert(ocr_test_allclose_f64(got, y, n, 2e-6, 2e-6, "ln out without affine"));
            free(p1);
            ocr_tensor_free(&x); ocr_tensor_free(&g); ocr_tensor_free(&b); ocr_tensor_free(&out);
            ocr_tensor_free(&mt); ocr_tensor_free(&rt); ocr_tensor_free(&out2);
        }
        free(xs); free(gs); free(bs); free(got); free(p); free(y); free(m); free(rs);
    }
}
END_TEST

START_TEST(test_backward_finite_differences) {
    const int64_t Cs[2] = {13, 37};
    for (int k = 0; k < 2; k++) {
        const int64_t B = 3, T = 4, C = Cs[k], R = B * T, n = R * C, np = n + 2 * C;
        float *xs = fvec(n), *dys = fvec(n), *gs = fvec(C), *bs = fvec(C), *got = fvec(n), *full = fvec(n);
        double *p = dvec(np), *num = dvec(np), *dyd = dvec(n), *scaled = dvec(2 * C);
        make_input(xs, R, C, 200 + k);
        ocr_test_fill_uniform(dys, n, 210 + k, -1.0f, 1.0f);
        ocr_test_fill_uniform(gs, C, 220 + k, 0.5f, 1.5f);
        ocr_test_fill_uniform(bs, C, 230 + k, -0.5f, 0.5f);
        to_double(p, xs, n);
        to_double(p + n, gs, C);
        to_double(p + n + C, bs, C);
        to_double(dyd, dys, n);
        LnRef ref = {R, C, 1e-5, dyd};
        ocr_test_numeric_grad(num, p, np, ref_loss, &ref, 1e-6);

        const int64_t *shape = OCR_SHAPE(B, T, C);
        OcrTensor x = ocr_test_tensor(OCR_F32, 3, shape, xs);
        OcrTensor dy = ocr_test_tensor(OCR_F32, 3, shape, dys);
        OcrTensor g = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), gs);
        OcrTensor b = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), bs);
        OcrTensor out = ocr_test_tensor(OCR_F32, 3, shape, NULL);
        OcrTensor mt = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(B, T), NULL);
        OcrTensor rt = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(B, T), NULL);
        OcrTensor dx = ocr_test_tensor(OCR_F32, 3, shape, NULL);
        OcrTensor dg = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), NULL);
        OcrTensor db = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), NULL);
        ocr_tensor_fill(&dg, 0.0f);
        ocr_tensor_fill(&db, 0.0f);
        ocr_layernorm_forward(&out, &mt, &rt, &x, &g, &b, 1e-5f);
        for (int call = 1; call <= 2; call++) {
            ocr_test_poison(&dx);
            ocr_layernorm_backward(&dx, &dg, &db, &dy, &x, &g, &mt, &rt);
            fetch(got, &dx);
            double err = ocr_test_rel_error(got, num, n);
            ck_assert_msg(err < 1e-5, "C %lld call %d: dinp rel error %g", (long long)C, call, err);
            ck_assert(ocr_test_allclose_f64(got, num, n, 1e-5, 1e-4, "ln dinp"));
            for (int64_t c = 0; c < 2 * C; c++) scaled[c] = call * num[n + c];
            fetch(got, &dg);
            ck_assert_msg(ocr_test_allclose_f64(got, scaled, C, 1e-5, 1e-5, "ln dgamma"), "call %d dgamma", call);
            fetch(got, &db);
            ck_assert_msg(ocr_test_allclose_f64(got, scaled + C, C, 1e-5, 1e-5, "ln dbeta"), "call %d dbeta", call);
        }
        // dinp alone, then the parameter gradients alone.
        fetch(full, &dx);
        ocr_test_poison(&dx);
        ocr_layernorm_backward(&dx, NULL, NULL, &dy, &x, &g, &mt, &rt);
        fetch(got, &dx);
        ck_assert_msg(memcmp(got, full, n * sizeof(float)) == 0, "dinp alone differs");
        ocr_tensor_fill(&db, 0.0f);
        ocr_layernorm_backward(NULL, NULL, &db, &dy, &x, &g, &mt, &rt);
        fetch(got, &db);
        ck_assert(ocr_test_allclose_f64(got, num + n + C, C, 1e-5, 1e-5, "ln dbeta alone"));

        ocr_tensor_free(&x); ocr_tensor_free(&dy); ocr_tensor_free(&g); ocr_tensor_free(&b);
        ocr_tensor_free(&out); ocr_tensor_free(&mt); ocr_tensor_free(&rt); ocr_tensor_free(&dx);
        ocr_tensor_free(&dg); ocr_tensor_free(&db);
        free(xs); free(dys); free(gs); free(bs); free(got); free(full); free(p); free(num); free(dyd); free(scaled);
    }
}
END_TEST

// Low-precision activations with f32 parameters and statistics: the f32 kernel's result on
// the same rounded inputs, rounded once; mean/rstd and dgamma/dbeta bit-identical.
START_TEST(test_low_precision) {
    const int64_t B = 2, T = 6, C = 21, R = B * T, n = R * C;
    const int64_t *shape = OCR_SHAPE(B, T, C);
    const ocr_dtype_t combos[][4] = {
        {OCR_F16, OCR_F16, OCR_F16, OCR_F16},
        {OCR_BF16, OCR_BF16, OCR_BF16, OCR_BF16},
        {OCR_F16, OCR_F32, OCR_BF16, OCR_F32},
        {OCR_BF16, OCR_F16, OCR_F32, OCR_BF16},
    };
    float *xs = fvec(n), *dys = fvec(n), *gs = fvec(C), *bs = fvec(C), *ref = fvec(n), *got = fvec(n);
    ocr_test_fill_uniform(gs, C, 301, 0.5f, 1.5f);
    ocr_test_fill_uniform(bs, C, 302, -0.5f, 0.5f);
    for (size_t k = 0; k < sizeof combos / sizeof combos[0]; k++) {
        const ocr_dtype_t *dt = combos[k];
        make_input(xs, R, C, 310 + k);
        ocr_test_fill_uniform(dys, n, 320 + k, -1.0f, 1.0f);
        round_to(xs, n, dt[0]);
        round_to(dys, n, dt[2]);
        OcrTensor g = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), gs);
        OcrTensor b = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), bs);
        OcrTensor t[2][8];  // x y dy dx mean rstd dg db
        for (int r = 0; r < 2; r++) {
            t[r][0] = ocr_test_tensor(r ? dt[0] : OCR_F32, 3, shape, xs);
            t[r][1] = ocr_test_tensor(r ? dt[1] : OCR_F32, 3, shape, NULL);
            t[r][2] = ocr_test_tensor(r ? dt[2] : OCR_F32, 3, shape, dys);
            t[r][3] = ocr_test_tensor(r ? dt[3] : OCR_F32, 3, shape, NULL);
            t[r][4] = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(B, T), NULL);
            t[r][5] = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(B, T), NULL);
            t[r][6] = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), NULL);
            t[r][7] = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), NULL);
            ocr_tensor_fill(&t[r][6], 0.0f);
            ocr_tensor_fill(&t[r][7], 0.0f);
            ocr_layernorm_forward(&t[r][1], &t[r][4], &t[r][5], &t[r][0], &g, &b, 1e-5f);
            ocr_layernorm_backward(&t[r][3], &t[r][6], &t[r][7], &t[r][2], &t[r][0], &g, &t[r][4], &t[r][5]);
        }
        char what[96];
        snprintf(what, sizeof what, "ln out %s<-%s", ocr_dtype_name(dt[1]), ocr_dtype_name(dt[0]));
        fetch(ref, &t[0][1]);
        fetch(got, &t[1][1]);
        ck_assert_msg(ocr_test_allclose_f32(got, ref, n, 1e-7, 1.01 * ocr_test_dtype_eps(dt[1]), what), "%s", what);
        snprintf(what, sizeof what, "ln dinp %s<-%s", ocr_dtype_name(dt[3]), ocr_dtype_name(dt[2]));
        fetch(ref, &t[0][3]);
        fetch(got, &t[1][3]);
        ck_assert_msg(ocr_test_allclose_f32(got, ref, n, 1e-7, 1.01 * ocr_test_dtype_eps(dt[3]), what), "%s", what);
        for (int j = 4; j < 8; j++) {
            int64_t m = j < 6 ? R : C;
            fetch(ref, &t[0][j]);
            fetch(got, &t[1][j]);
            ck_assert_msg(memcmp(got, ref, m * sizeof(float)) == 0, "f32 tensor %d differs (combo %zu)", j, k);
        }
        for (int r = 0; r < 2; r++)
            for (int j = 0; j < 8; j++) ocr_tensor_free(&t[r][j]);
        ocr_tensor_free(&g);
        ocr_tensor_free(&b);
    }
    free(xs); free(dys); free(gs); free(bs); free(ref); free(got);
}
END_TEST

// Large enough for the OpenMP paths: 1 and 3 threads agree bit for bit, and the parallel
// forward matches the reference.
START_TEST(test_threads_invariant) {
    const int64_t B = 8, T = 64, C = 40, R = B * T, n = R * C;
    const int64_t *shape = OCR_SHAPE(B, T, C);
    float *xs = fvec(n), *dys = fvec(n), *gs = fvec(C), *bs = fvec(C);
    float *res[2][2] = {{fvec(n), fvec(n)}, {fvec(n), fvec(n)}};
    float par[2][2 * 40 + 2 * 512];
    make_input(xs, R, C, 400);
    ocr_test_fill_uniform(dys, n, 401, -1.0f, 1.0f);
    ocr_test_fill_uniform(gs, C, 402, 0.5f, 1.5f);
    ocr_test_fill_uniform(bs, C, 403, -0.5f, 0.5f);
    OcrTensor x = ocr_test_tensor(OCR_F32, 3, shape, xs);
    OcrTensor dy = ocr_test_tensor(OCR_F32, 3, shape, dys);
    OcrTensor g = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), gs);
    OcrTensor b = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), bs);
    int saved = omp_get_max_threads();
    for (int r = 0; r < 2; r++) {
        omp_set_num_threads(r ? 3 : 1);
        OcrTensor y = ocr_test_tensor(OCR_F32, 3, shape, NULL);
        OcrTensor dx = ocr_test_tensor(OCR_F32, 3, shape, NULL);
        OcrTensor mt = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(B, T), NULL);
        OcrTensor rt = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(B, T), NULL);
        OcrTensor dg = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), NULL);
        OcrTensor db = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), NULL);
        ocr_tensor_fill(&dg, 0.0f);
        ocr_tensor_fill(&db, 0.0f);
        ocr_layernorm_forward(&y, &mt, &rt, &x, &g, &b, 1e-6f);
        ocr_layernorm_backward(&dx, &dg, &db, &dy, &x, &g, &mt, &rt);
        fetch(res[r][0], &y);
        fetch(res[r][1], &dx);
        fetch(par[r], &dg);
        fetch(par[r] + C, &db);
        fetch(par[r] + 2 * C, &mt);
        fetch(par[r] + 2 * C + R, &rt);
        ocr_tensor_free(&y); ocr_tensor_free(&dx); ocr_tensor_free(&mt); ocr_tensor_free(&rt);
        ocr_tensor_free(&dg); ocr_tensor_free(&db);
    }
    omp_set_num_threads(saved);
    ck_assert_msg(memcmp(res[0][0], res[1][0], n * sizeof(float)) == 0, "out depends on the thread count");
    ck_assert_msg(memcmp(res[0][1], res[1][1], n * sizeof(float)) == 0, "dinp depends on the thread count");
    ck_assert_msg(memcmp(par[0], par[1], sizeof par[0]) == 0, "statistics or dgamma/dbeta depend on the thread count");
    double *p = dvec(n + 2 * C), *y = dvec(n);
    to_double(p, xs, n);
    to_double(p + n, gs, C);
    to_double(p + n + C, bs, C);
    LnRef ref = {R, C, 1e-6, NULL};
    ref_forward(y, NULL, NULL, p, &ref);
    ck_assert(ocr_test_allclose_f64(res[1][0], y, n, 2e-6, 2e-6, "parallel ln out"));
    ocr_tensor_free(&x); ocr_tensor_free(&dy); ocr_tensor_free(&g); ocr_tensor_free(&b);
    free(xs); free(dys); free(gs); free(bs); free(p); free(y);
    for (int r = 0; r < 2; r++) {
        free(res[r][0]);
        free(res[r][1]);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("kernels_layernorm");
    TCase *tc = tcase_create("layernorm");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_forward_reference);
    tcase_add_test(tc, test_backward_finite_differences);
    tcase_add_test(tc, test_low_precision);
    tcase_add_test(tc, test_threads_invariant);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

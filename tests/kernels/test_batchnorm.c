// BatchNorm2d (NHWC, Paddle semantics): forward against a double reference in training and
// inference, running statistics over two consecutive steps, backward (through batch and
// through fixed statistics) against finite differences of Σ dout·out, accumulation of
// dgamma/dbeta, f16/bf16 tensors against the f32 result, and thread-count invariance.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "tests/common/test_util.h"

#define MOMENTUM 0.9f
#define EPS 1e-5f

// Problem in double: p = [x (M·C) | gamma (C) | beta (C)].
typedef struct {
    int64_t M, C;
    int training;
    const double *rmean, *rvar;  // inference statistics
    const double *dout;          // for the loss
} BnRef;

static void ref_forward(double *y, double *mean, double *var, const double *p, const BnRef *r) {
    const int64_t M = r->M, C = r->C;
    const double *x = p, *g = p + M * C, *b = g + C;
    for (int64_t c = 0; c < C; c++) {
        double m, v;
        if (r->training) {
            m = 0;
            for (int64_t i = 0; i < M; i++) m += x[i * C + c];
            m /= M;
            v = 0;
            for (int64_t i = 0; i < M; i++) v += (x[i * C + c] - m) * (x[i * C + c] - m);
            v /= M;
        } else {
            m = r->rmean[c];
            v = r->rvar[c];
        }
        if (mean) mean[c] = m;
        if (var) var[c] = v;
        double rs = 1.0 / sqrt(v + (double)EPS);
        if (y)
            for (int64_t i = 0; i < M; i++) y[i * C + c] = (x[i * C + c] - m) * rs * g[c] + b[c];
    }
}

static double ref_loss(const double *p, void *vctx) {
    const BnRef *r = vctx;
    const int64_t n = r->M * r->C;
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

static void round_to(float *v, int64_t n, ocr_dtype_t dt) {
    OcrTensor t = ocr_test_tensor(dt, 1, OCR_SHAPE(n), v);
    ocr_tensor_to_f32(&t, v);
    ocr_tensor_free(&t);
}

// Inputs with a per-channel offset, so channel means are far from zero.
static void make_input(float *x, int64_t M, int64_t C, uint64_t seed) {
    ocr_test_fill_uniform(x, M * C, seed, -1.0f, 2.0f);
    for (int64_t i = 0; i < M; i++)
        for (int64_t c = 0; c < C; c++) x[i * C + c] += 0.7f * (float)c - 3.0f;
}

static void fetch(float *dst, const OcrTensor *t) { ocr_tensor_to_f32(t, dst); }

// Two training steps: outputs and saved statistics per step, running statistics after each.
START_TEST(test_forward_training_two_steps) {
    const int64_t N = 2, H = 3, W = 5, C = 11, M = N * H * W, n = M * C;
    const int64_t *shape = OCR_SHAPE(N, H, W, C);
    float *xs = fvec(n), *gs = fvec(C), *bs = fvec(C), *rm0 = fvec(C), *rv0 = fvec(C), *got = fvec(n);
    ocr_test_fill_uniform(gs, C, 2, 0.5f, 1.5f);
    ocr_test_fill_uniform(bs, C, 3, -0.5f, 0.5f);
    ocr_test_fill_uniform(rm0, C, 4, -1.0f, 1.0f);
    ocr_test_fill_uniform(rv0, C, 5, 0.5f, 2.0f);
    OcrTensor g = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), gs);
    OcrTensor b = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), bs);
    OcrTensor rm = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), rm0);
    OcrTensor rv = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), rv0);
    OcrTensor sm = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), NULL);
    OcrTensor sr = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), NULL);
    OcrTensor y = ocr_test_tensor(OCR_F32, 4, shape, NULL);

    double *p = dvec(n + 2 * C), *yref = dvec(n), *mean = dvec(C), *var = dvec(C);
    double *run_m = dvec(C), *run_v = dvec(C), *tmp = dvec(C);
    to_double(run_m, rm0, C);
    to_double(run_v, rv0, C);
    BnRef ref = {M, C, 1, NULL, NULL, NULL};
    for (int step = 0; step < 2; step++) {
        make_input(xs, M, C, 10 + step);
        OcrTensor x = ocr_test_tensor(OCR_F32, 4, shape, xs);
        ocr_test_poison(&y);
        ocr_test_poison(&sm);
        ocr_test_poison(&sr);
        ocr_batchnorm2d_forward(&y, &sm, &sr, &rm, &rv, &x, &g, &b, MOMENTUM, EPS, 1);

        to_double(p, xs, n);
        to_double(p + n, gs, C);
        to_double(p + n + C, bs, C);
        ref_forward(yref, mean, var, p, &ref);
        fetch(got, &y);
        ck_assert_msg(ocr_test_allclose_f64(got, yref, n, 2e-6, 2e-6, "bn train out"), "step %d out", step);
        fetch(got, &sm);
        ck_assert_msg(ocr_test_allclose_f64(got, mean, C, 1e-6, 1e-6, "save_mean"), "step %d save_mean", step);
        for (int64_t c = 0; c < C; c++) tmp[c] = 1.0 / sqrt(var[c] + EPS);
        fetch(got, &sr);
        ck_assert_msg(ocr_test_allclose_f64(got, tmp, C, 0, 1e-6, "save_rstd"), "step %d save_rstd", step);
        // Paddle: running = 0.9·running + 0.1·batch, with the BIASED batch variance.
        for (int64_t c = 0; c < C; c++) {
            run_m[c] = 0.9 * run_m[c] + 0.1 * mean[c];
            run_v[c] = 0.9 * run_v[c] + 0.1 * var[c];
        }
        fetch(got, &rm);
        ck_assert_msg(ocr_test_allclose_f64(got, run_m, C, 1e-6, 1e-6, "running_mean"), "step %d running_mean", step);
        fetch(got, &rv);
        ck_assert_msg(ocr_test_allclose_f64(got, run_v, C, 1e-6, 1e-6, "running_var"), "step %d running_var", step);
        ocr_tensor_free(&x);
    }
    ocr_tensor_free(&g);
    ocr_tensor_free(&b);
    ocr_tensor_free(&rm);
    ocr_tensor_free(&rv);
    ocr_tensor_free(&sm);
    ocr_tensor_free(&sr);
    ocr_tensor_free(&y);
    free(xs); free(gs); free(bs); free(rm0); free(rv0); free(got);
    free(p); free(yref); free(mean); free(var); free(run_m); free(run_v); free(tmp);
}
END_TEST

// Inference: running statistics normalise, nothing updates, the saved statistics are the
// running ones.
START_TEST(test_forward_inference) {
    const int64_t N = 3, H = 2, W = 7, C = 9, M = N * H * W, n = M * C;
    const int64_t *shape = OCR_SHAPE(N, H, W, C);
    float *xs = fvec(n), *gs = fvec(C), *bs = fvec(C), *rm0 = fvec(C), *rv0 = fvec(C), *got = fvec(n);
    make_input(xs, M, C, 20);
    ocr_test_fill_uniform(gs, C, 21, 0.5f, 1.5f);
    ocr_test_fill_uniform(bs, C, 22, -0.5f, 0.5f);
    ocr_test_fill_uniform(rm0, C, 23, -1.0f, 1.0f);
    ocr_test_fill_uniform(rv0, C, 24, 0.5f, 2.0f);
    OcrTensor x = ocr_test_tensor(OCR_F32, 4, shape, xs);
    OcrTensor g = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), gs);
    OcrTensor b = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), bs);
    OcrTensor rm = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), rm0);
    OcrTensor rv = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), rv0);
    OcrTensor sm = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), NULL);
    OcrTensor sr = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), NULL);
    OcrTensor y = ocr_test_tensor(OCR_F32, 4, shape, NULL);
    ocr_batchnorm2d_forward(&y, &sm, &sr, &rm, &rv, &x, &g, &b, 0.5f, EPS, 0);

    double *p = dvec(n + 2 * C), *yref = dvec(n), *rmd = dvec(C), *rvd = dvec(C), *rs = dvec(C);
    to_double(p, xs, n);
    to_double(p + n, gs, C);
    to_double(p + n + C, bs, C);
    to_double(rmd, rm0, C);
    to_double(rvd, rv0, C);
    BnRef ref = {M, C, 0, rmd, rvd, NULL};
    ref_forward(yref, NULL, NULL, p, &ref);
    fetch(got, &y);
    ck_assert(ocr_test_allclose_f64(got, yref, n, 2e-6, 2e-6, "bn infer out"));
    fetch(got, &rm);
    ck_assert_msg(memcmp(got, rm0, C * sizeof(float)) == 0, "inference changed running_mean");
    fetch(got, &rv);
    ck_assert_msg(memcmp(got, rv0, C * sizeof(float)) == 0, "inference changed running_var");
    fetch(got, &sm);
    ck_assert_msg(memcmp(got, rm0, C * sizeof(float)) == 0, "save_mean is not the running mean");
    for (int64_t c = 0; c < C; c++) rs[c] = 1.0 / sqrt(rvd[c] + EPS);
    fetch(got, &sr);
    ck_assert(ocr_test_allclose_f64(got, rs, C, 0, 1e-6, "save_rstd (inference)"));

    ocr_tensor_free(&x); ocr_tensor_free(&g); ocr_tensor_free(&b); ocr_tensor_free(&rm);
    ocr_tensor_free(&rv); ocr_tensor_free(&sm); ocr_tensor_free(&sr); ocr_tensor_free(&y);
    free(xs); free(gs); free(bs); free(rm0); free(rv0); free(got);
    free(p); free(yref); free(rmd); free(rvd); free(rs);
}
END_TEST

// A mean thousands of standard deviations away from zero: the variance must still be right.
START_TEST(test_statistics_large_offset) {
    const int64_t M = 2 * 5 * 7, C = 3, n = M * C;
    float *xs = fvec(n), *got = fvec(C);
    ocr_test_fill_uniform(xs, n, 30, -0.01f, 0.01f);
    for (int64_t i = 0; i < n; i++) xs[i] += 1000.0f;
    OcrTensor x = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(2, 5, 7, C), xs);
    OcrTensor y = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(2, 5, 7, C), NULL);
    OcrTensor g = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), (float[]){1, 1, 1});
    OcrTensor b = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), (float[]){0, 0, 0});
    OcrTensor sr = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), NULL);
    ocr_batchnorm2d_forward(&y, NULL, &sr, NULL, NULL, &x, &g, &b, MOMENTUM, 0.0f, 1);
    double *p = dvec(n + 2 * C), *var = dvec(C), *rs = dvec(C);
    to_double(p, xs, n);
    BnRef ref = {M, C, 1, NULL, NULL, NULL};
    ref_forward(NULL, NULL, var, p, &ref);
    for (int64_t c = 0; c < C; c++) rs[c] = 1.0 / sqrt(var[c]);
    fetch(got, &sr);
    ck_assert(ocr_test_allclose_f64(got, rs, C, 0, 1e-4, "rstd with a large offset"));
    ocr_tensor_free(&x); ocr_tensor_free(&y); ocr_tensor_free(&g); ocr_tensor_free(&b); ocr_tensor_free(&sr);
    free(xs); free(got); free(p); free(var); free(rs);
}
END_TEST

// Backward against finite differences, training (through the batch statistics) and
// inference (fixed statistics). dinp is assigned, dgamma/dbeta ocr_accumulate (two calls = 2×).
static void check_backward(int training) {
    const int64_t N = 2, H = 3, W = 4, C = 13, M = N * H * W, n = M * C;
    const int64_t *shape = OCR_SHAPE(N, H, W, C);
    float *xs = fvec(n), *dys = fvec(n), *gs = fvec(C), *bs = fvec(C), *rm0 = fvec(C), *rv0 = fvec(C);
    float *got = fvec(n);
    make_input(xs, M, C, 40 + training);
    ocr_test_fill_uniform(dys, n, 42, -1.0f, 1.0f);
    ocr_test_fill_uniform(gs, C, 43, 0.5f, 1.5f);
    ocr_test_fill_uniform(bs, C, 44, -0.5f, 0.5f);
    ocr_test_fill_uniform(rm0, C, 45, -1.0f, 1.0f);
    for (int64_t c = 0; c < C; c++) rm0[c] += 0.7f * (float)c - 3.0f;
    ocr_test_fill_uniform(rv0, C, 46, 0.5f, 2.0f);

    OcrTensor x = ocr_test_tensor(OCR_F32, 4, shape, xs);
    OcrTensor dy = ocr_test_tensor(OCR_F32, 4, shape, dys);
    OcrTensor g = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), gs);
    OcrTensor b = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), bs);
    OcrTensor rm = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), rm0);
    OcrTensor rv = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), rv0);
    OcrTensor sm = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), NULL);
    OcrTensor sr = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), NULL);
    OcrTensor y = ocr_test_tensor(OCR_F32, 4, shape, NULL);
    OcrTensor dx = ocr_test_tensor(OCR_F32, 4, shape, NULL);
    OcrTensor dg = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), NULL);
    OcrTensor db = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), NULL);
    ocr_tensor_fill(&dg, 0.0f);
    ocr_tensor_fill(&db, 0.0f);
    ocr_batchnorm2d_forward(&y, &sm, &sr, &rm, &rv, &x, &g, &b, MOMENTUM, EPS, training);

    // The numeric gradient of Σ dout·BN(x; gamma, beta). In inference the reference uses the
    // running statistics the forward used (unchanged by it).
    double *p = dvec(n + 2 * C), *num = dvec(n + 2 * C), *dyd = dvec(n), *rmd = dvec(C), *rvd = dvec(C);
    to_double(p, xs, n);
    to_double(p + n, gs, C);
    to_double(p + n + C, bs, C);
    to_double(dyd, dys, n);
    to_double(rmd, rm0, C);
    to_double(rvd, rv0, C);
    BnRef ref = {M, C, training, rmd, rvd, dyd};
    ocr_test_numeric_grad(num, p, n + 2 * C, ref_loss, &ref, 1e-6);

    for (int call = 1; call <= 2; call++) {
        ocr_test_poison(&dx);
        ocr_batchnorm2d_backward(&dx, &dg, &db, &dy, &x, &g, &sm, &sr, training);
        fetch(got, &dx);
        double err = ocr_test_rel_error(got, num, n);
        ck_assert_msg(err < 1e-5, "training %d call %d: dinp rel error %g", training, call, err);
        ck_assert_msg(ocr_test_allclose_f64(got, num, n, 1e-5, 1e-4, "dinp"), "training %d dinp", training);
        double *scaled = dvec(2 * C);
        for (int64_t c = 0; c < 2 * C; c++) scaled[c] = call * num[n + c];
        fetch(got, &dg);
        ck_assert_msg(ocr_test_allclose_f64(got, scaled, C, 1e-5, 1e-5, "dgamma"), "training %d call %d dgamma",
                      training, call);
        fetch(got, &db);
        ck_assert_msg(ocr_test_allclose_f64(got, scaled + C, C, 1e-5, 1e-5, "dbeta"), "training %d call %d dbeta",
                      training, call);
        free(scaled);
    }

    // Optional outputs: dinp alone and the parameter gradients alone give the same values.
    float *full = fvec(n);
    fetch(full, &dx);
    ocr_test_poison(&dx);
    ocr_batchnorm2d_backward(&dx, NULL, NULL, &dy, &x, &g, &sm, &sr, training);
    fetch(got, &dx);
    ck_assert_msg(memcmp(got, full, n * sizeof(float)) == 0, "dinp alone differs (training %d)", training);
    ocr_tensor_fill(&dg, 0.0f);
    ocr_batchnorm2d_backward(NULL, &dg, NULL, &dy, &x, &g, &sm, &sr, training);
    fetch(got, &dg);
    ck_assert(ocr_test_allclose_f64(got, num + n, C, 1e-5, 1e-5, "dgamma alone"));

    ocr_tensor_free(&x); ocr_tensor_free(&dy); ocr_tensor_free(&g); ocr_tensor_free(&b);
    ocr_tensor_free(&rm); ocr_tensor_free(&rv); ocr_tensor_free(&sm); ocr_tensor_free(&sr);
    ocr_tensor_free(&y); ocr_tensor_free(&dx); ocr_tensor_free(&dg); ocr_tensor_free(&db);
    free(xs); free(dys); free(gs); free(bs); free(rm0); free(rv0); free(got); free(full);
    free(p); free(num); free(dyd); free(rmd); free(rvd);
}

START_TEST(test_backward_training) { check_backward(1); }
END_TEST

START_TEST(test_backward_inference) { check_backward(0); }
END_TEST

// Low-precision activations (parameters and statistics stay f32): the results equal the f32
// kernel's on the same rounded inputs, rounded once; statistics and dgamma/dbeta match bit for bit.
START_TEST(test_low_precision) {
    const int64_t N = 2, H = 3, W = 5, C = 10, M = N * H * W, n = M * C;
    const int64_t *shape = OCR_SHAPE(N, H, W, C);
    const ocr_dtype_t combos[][4] = {
        // inp, out, dout, dinp
        {OCR_F16, OCR_F16, OCR_F16, OCR_F16},
        {OCR_BF16, OCR_BF16, OCR_BF16, OCR_BF16},
        {OCR_F16, OCR_F32, OCR_BF16, OCR_F32},
        {OCR_BF16, OCR_F16, OCR_F32, OCR_BF16},
    };
    float *xs = fvec(n), *dys = fvec(n), *gs = fvec(C), *bs = fvec(C), *ref = fvec(n), *got = fvec(n);
    ocr_test_fill_uniform(gs, C, 51, 0.5f, 1.5f);
    ocr_test_fill_uniform(bs, C, 52, -0.5f, 0.5f);
    for (size_t k = 0; k < sizeof combos / sizeof combos[0]; k++) {
        const ocr_dtype_t *dt = combos[k];
        for (int training = 0; training <= 1; training++) {
            make_input(xs, M, C, 53 + k);
            ocr_test_fill_uniform(dys, n, 63 + k, -1.0f, 1.0f);
            round_to(xs, n, dt[0]);
            round_to(dys, n, dt[2]);
            OcrTensor g = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), gs);
            OcrTensor b = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), bs);
            OcrTensor t[2][10];  // [f32 run, low-precision run]: x y dy dx rm rv sm sr dg db
            for (int r = 0; r < 2; r++) {
                t[r][0] = ocr_test_tensor(r ? dt[0] : OCR_F32, 4, shape, xs);
                t[r][1] = ocr_test_tensor(r ? dt[1] : OCR_F32, 4, shape, NULL);
                t[r][2] = ocr_test_tensor(r ? dt[2] : OCR_F32, 4, shape, dys);
                t[r][3] = ocr_test_tensor(r ? dt[3] : OCR_F32, 4, shape, NULL);
                for (int j = 4; j < 10; j++) t[r][j] = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), NULL);
                ocr_tensor_fill(&t[r][4], 0.25f);
                ocr_tensor_fill(&t[r][5], 1.5f);
                ocr_tensor_fill(&t[r][8], 0.0f);
                ocr_tensor_fill(&t[r][9], 0.0f);
                ocr_batchnorm2d_forward(&t[r][1], &t[r][6], &t[r][7], &t[r][4], &t[r][5], &t[r][0], &g, &b, MOMENTUM,
                                        EPS, training);
                ocr_batchnorm2d_backward(&t[r][3], &t[r][8], &t[r][9], &t[r][2], &t[r][0], &g, &t[r][6], &t[r][7],
                                         training);
            }
            char what[128];
            snprintf(what, sizeof what, "bn train %d out %s<-%s", training, ocr_dtype_name(dt[1]),
                     ocr_dtype_name(dt[0]));
            fetch(ref, &t[0][1]);
            fetch(got, &t[1][1]);
            ck_assert_msg(ocr_test_allclose_f32(got, ref, n, 1e-7, 1.01 * ocr_test_dtype_eps(dt[1]), what), "%s",
                          what);
            snprintf(what, sizeof what, "bn train %d dinp %s<-%s", training, ocr_dtype_name(dt[3]),
                     ocr_dtype_name(dt[2]));
            fetch(ref, &t[0][3]);
            fetch(got, &t[1][3]);
            ck_assert_msg(ocr_test_allclose_f32(got, ref, n, 1e-7, 1.01 * ocr_test_dtype_eps(dt[3]), what), "%s",
                          what);
            for (int j = 4; j < 10; j++) {
                fetch(ref, &t[0][j]);
                fetch(got, &t[1][j]);
                ck_assert_msg(memcmp(got, ref, C * sizeof(float)) == 0, "f32 tensor %d differs (combo %zu train %d)",
                              j, k, training);
            }
            for (int r = 0; r < 2; r++)
                for (int j = 0; j < 10; j++) ocr_tensor_free(&t[r][j]);
            ocr_tensor_free(&g);
            ocr_tensor_free(&b);
        }
    }
    free(xs); free(dys); free(gs); free(bs); free(ref); free(got);
}
END_TEST

// Large enough for the OpenMP paths: 1 and 3 threads give identical bits everywhere, and the
// parallel result matches the reference.
START_TEST(test_threads_invariant) {
    const int64_t N = 4, H = 16, W = 32, C = 13, M = N * H * W, n = M * C;
    const int64_t *shape = OCR_SHAPE(N, H, W, C);
    float *xs = fvec(n), *dys = fvec(n), *gs = fvec(C), *bs = fvec(C), *a = fvec(n), *bb = fvec(n);
    float *dx0 = fvec(n), *dx1 = fvec(n);
    make_input(xs, M, C, 70);
    ocr_test_fill_uniform(dys, n, 71, -1.0f, 1.0f);
    ocr_test_fill_uniform(gs, C, 72, 0.5f, 1.5f);
    ocr_test_fill_uniform(bs, C, 73, -0.5f, 0.5f);
    OcrTensor x = ocr_test_tensor(OCR_F32, 4, shape, xs);
    OcrTensor dy = ocr_test_tensor(OCR_F32, 4, shape, dys);
    OcrTensor g = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), gs);
    OcrTensor b = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), bs);
    float res[2][4 * 13];
    int saved = omp_get_max_threads();
    for (int r = 0; r < 2; r++) {
        omp_set_num_threads(r ? 3 : 1);
        OcrTensor y = ocr_test_tensor(OCR_F32, 4, shape, NULL);
        OcrTensor dx = ocr_test_tensor(OCR_F32, 4, shape, NULL);
        OcrTensor rm = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), NULL);
        OcrTensor rv = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), NULL);
        OcrTensor sm = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), NULL);
        OcrTensor sr = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), NULL);
        OcrTensor dg = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), NULL);
        OcrTensor db = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), NULL);
        ocr_tensor_fill(&rm, 0.0f);
        ocr_tensor_fill(&rv, 1.0f);
        ocr_tensor_fill(&dg, 0.0f);
        ocr_tensor_fill(&db, 0.0f);
        ocr_batchnorm2d_forward(&y, &sm, &sr, &rm, &rv, &x, &g, &b, MOMENTUM, EPS, 1);
        ocr_batchnorm2d_backward(&dx, &dg, &db, &dy, &x, &g, &sm, &sr, 1);
        fetch(r ? bb : a, &y);
        fetch(r ? dx1 : dx0, &dx);
        if (r) {
            ck_assert_msg(memcmp(a, bb, n * sizeof(float)) == 0, "out depends on the thread count");
            ck_assert_msg(memcmp(dx0, dx1, n * sizeof(float)) == 0, "dinp depends on the thread count");
        }
        fetch(res[r], &sm);
        fetch(res[r] + C, &sr);
        fetch(res[r] + 2 * C, &dg);
        fetch(res[r] + 3 * C, &db);
        ocr_tensor_free(&y); ocr_tensor_free(&dx); ocr_tensor_free(&rm); ocr_tensor_free(&rv);
        ocr_tensor_free(&sm); ocr_tensor_free(&sr); ocr_tensor_free(&dg); ocr_tensor_free(&db);
    }
    omp_set_num_threads(saved);
    ck_assert_msg(memcmp(res[0], res[1], sizeof res[0]) == 0, "statistics or dgamma/dbeta depend on the thread count");
    // The parallel forward against the double reference.
    double *p = dvec(n + 2 * C), *yref = dvec(n);
    to_double(p, xs, n);
    to_double(p + n, gs, C);
    to_double(p + n + C, bs, C);
    BnRef ref = {M, C, 1, NULL, NULL, NULL};
    ref_forward(yref, NULL, NULL, p, &ref);
    OcrTensor y = ocr_test_tensor(OCR_F32, 4, shape, NULL);
    omp_set_num_threads(3);
    ocr_batchnorm2d_forward(&y, NULL, NULL, NULL, NULL, &x, &g, &b, MOMENTUM, EPS, 1);
    omp_set_num_threads(saved);
    fetch(a, &y);
    ck_assert(ocr_test_allclose_f64(a, yref, n, 2e-6, 2e-6, "parallel bn out"));
    ocr_tensor_free(&y); ocr_tensor_free(&x); ocr_tensor_free(&dy); ocr_tensor_free(&g); ocr_tensor_free(&b);
    free(xs); free(dys); free(gs); free(bs); free(a); free(bb); free(dx0); free(dx1); free(p); free(yref);
}
END_TEST

int main(void) {
    Suite *s = suite_create("kernels_batchnorm");
    TCase *tc = tcase_create("batchnorm");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_forward_training_two_steps);
    tcase_add_test(tc, test_forward_inference);
    tcase_add_test(tc, test_statistics_large_offset);
    tcase_add_test(tc, test_backward_training);
    tcase_add_test(tc, test_backward_inference);
    tcase_add_test(tc, test_low_precision);
    tcase_add_test(tc, test_threads_invariant);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

// Synchronised batch norm (batchnorm2d_act_forward_sync / _backward_sync, kernels/ops.h) in a
// world of two ranks played by two threads: each normalises its half of the batch, and the sum
// callback adds the two ranks' vectors in rank order (so both see the same bits, as an
// all-reduce gives them), meeting at a barrier.
//   - forward: each half's output, the saved and the running statistics are those of the whole
//     batch (the plain op on all rows, and a double reference), both ranks' statistics
//     bit-identical; with |mean| >> std the combination stays accurate;
//   - backward: each rank's dinp is the gradient of Σ dout·BN(x) over the WHOLE batch for its rows
//     (central differences in double through the reference), and the ranks' dgamma / dbeta add
//     up to the whole batch's (each rank keeps its own: the gradient all-reduce sums them);
//   - with an activation, and f16/bf16 storage against the plain op on the whole batch;
//   - a world of one (the callback is the identity) is the plain op bit for bit.
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "tests/common/test_util.h"

#define MOMENTUM 0.9f
#define EPS 1e-5f
#define RANKS 2

// ---- a world of two threads --------------------------------------------------------------------

typedef struct {
    pthread_barrier_t barrier;
    double *slot[RANKS];
    int64_t n[RANKS];
    int calls[RANKS];
} World;

typedef struct {
    World *w;
    int rank;
} RankLink;

// v = v(rank 0) + v(rank 1), computed alike on both ranks.
static int world_sum(void *user, double *v, int64_t n) {
    RankLink *l = user;
    World *w = l->w;
    w->slot[l->rank] = v;
    w->n[l->rank] = n;
    w->calls[l->rank]++;
    pthread_barrier_wait(&w->barrier);
    if (w->n[0] != w->n[1]) return -1;  // the ranks disagree on the collective: a bug
    double *sum = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) sum[i] = w->slot[0][i] + w->slot[1][i];
    pthread_barrier_wait(&w->barrier);  // both have read both slots
    memcpy(v, sum, sizeof(double) * (size_t)n);
    free(sum);
    return 0;
}

static int identity_sum(void *user, double *v, int64_t n) {
    (void)v, (void)n;
    ++*(int *)user;
    return 0;
}

// One rank's tensors: rows [r0, r0 + M) of the batch.
typedef struct {
    int64_t M, C;
    ocr_dtype_t dt;
    ocr_activation_t act;
    int training;
    OcrTensor x, y, dy, dx, sm, sr, sa, rm, rv, g, b, dg, db;
    OcrBnSync sync;
    RankLink link;
} Rank;

static void *rank_forward_backward(void *arg) {
    Rank *r = arg;
    ocr_batchnorm2d_act_forward_sync(&r->y, &r->sm, &r->sr, &r->sa, &r->rm, &r->rv, &r->x, &r->g, &r->b, r->act,
                                     MOMENTUM, EPS, r->training, &r->sync);
    ocr_batchnorm2d_act_backward_sync(&r->dx, &r->dg, &r->db, &r->dy, &r->x, &r->g, &r->b, &r->sm, &r->sr, &r->sa,
                                      r->act, r->dt, r->training, &r->sync);
    return NULL;
}

// The whole batch: x, dy (M·C), gamma, beta, running statistics (C), all as f32 values.
typedef struct {
    int64_t M, C;
    float *x, *dy, *g, *b, *rm, *rv;
} Batch;

static Batch batch_new(int64_t M, int64_t C, uint64_t seed, float offset) {
    Batch p = {M, C, malloc(sizeof(float) * M * C), malloc(sizeof(float) * M * C), malloc(sizeof(float) * C),
               malloc(sizeof(float) * C), malloc(sizeof(float) * C), malloc(sizeof(float) * C)};
    ocr_test_fill_uniform(p.x, M * C, seed, -1.5f, 2.5f);
    for (int64_t i = 0; i < M * C; i++) p.x[i] += offset + 0.25f * (float)(i % C);
    ocr_test_fill_uniform(p.dy, M * C, seed + 1, -1.0f, 1.0f);
    ocr_test_fill_uniform(p.g, C, seed + 2, 0.5f, 2.0f);
    ocr_test_fill_uniform(p.b, C, seed + 3, -0.5f, 0.5f);
    ocr_test_fill_uniform(p.rm, C, seed + 4, -0.2f, 0.2f);
    ocr_test_fill_uniform(p.rv, C, seed + 5, 0.5f, 2.0f);
    return p;
}

static void batch_free(Batch *p) { free(p->x), free(p->dy), free(p->g), free(p->b), free(p->rm), free(p->rv); }

static OcrTensor vec(const float *v, int64_t C) { return ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), v); }

// Rank tensors for rows [r0, r0 + M) (a 4-D (1, 1, M, C) map).
static void rank_init(Rank *r, const Batch *p, int64_t r0, int64_t M, ocr_dtype_t dt, ocr_activation_t act,
                      int training) {
    memset(r, 0, sizeof *r);
    r->M = M, r->C = p->C, r->dt = dt, r->act = act, r->training = training;
    const int64_t *shape = OCR_SHAPE(1, 1, M, p->C);
    r->x = ocr_test_tensor(dt, 4, shape, p->x + r0 * p->C);
    r->dy = ocr_test_tensor(dt, 4, shape, p->dy + r0 * p->C);
    r->y = ocr_test_tensor(dt, 4, shape, NULL);
    r->dx = ocr_test_tensor(dt, 4, shape, NULL);
    r->sm = vec(NULL, p->C), r->sr = vec(NULL, p->C), r->sa = vec(NULL, p->C);
    r->rm = vec(p->rm, p->C), r->rv = vec(p->rv, p->C);
    r->g = vec(p->g, p->C), r->b = vec(p->b, p->C);
    r->dg = vec(NULL, p->C), r->db = vec(NULL, p->C);
    ocr_tensor_fill(&r->dg, 0.0f);
    ocr_tensor_fill(&r->db, 0.0f);
}

static void rank_free(Rank *r) {
    OcrTensor *all[] = {&r->x, &r->y, &r->dy, &r->dx, &r->sm, &r->sr, &r->sa,
                        &r->rm, &r->rv, &r->g, &r->b, &r->dg, &r->db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ocr_tensor_free(all[i]);
}

// Runs the two ranks on rows [0, split) and [split, M).
static void run_world(Rank rk[RANKS], const Batch *p, int64_t split, ocr_dtype_t dt, ocr_activation_t act,
                      int training, World *w) {
    memset(w, 0, sizeof *w);
    pthread_barrier_init(&w->barrier, NULL, RANKS);
    rank_init(&rk[0], p, 0, split, dt, act, training);
    rank_init(&rk[1], p, split, p->M - split, dt, act, training);
    pthread_t th[RANKS];
    for (int i = 0; i < RANKS; i++) {
        rk[i].link = (RankLink){w, i};
        rk[i].sync = (OcrBnSync){world_sum, &rk[i].link};
        ck_assert_int_eq(pthread_create(&th[i], NULL, rank_forward_backward, &rk[i]), 0);
    }
    for (int i = 0; i < RANKS; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&w->barrier);
}

// The plain op on the whole batch.
static void run_whole(Rank *r, const Batch *p, ocr_dtype_t dt, ocr_activation_t act, int training) {
    rank_init(r, p, 0, p->M, dt, act, training);
    ocr_batchnorm2d_act_forward(&r->y, &r->sm, &r->sr, &r->sa, &r->rm, &r->rv, &r->x, &r->g, &r->b, act, MOMENTUM, EPS,
                                training);
    ocr_batchnorm2d_act_backward(&r->dx, &r->dg, &r->db, &r->dy, &r->x, &r->g, &r->b, &r->sm, &r->sr, &r->sa, act, dt,
                                 training);
}

static float *values(const OcrTensor *t) {
    float *v = malloc(sizeof(float) * (size_t)(ocr_tensor_numel(t) + 1));
    ocr_tensor_to_f32(t, v);
    return v;
}

// The ranks' rows of a map, concatenated in rank order.
static float *gathered(Rank rk[RANKS], int which) {
    const int64_t C = rk[0].C, n = (rk[0].M + rk[1].M) * C;
    float *all = malloc(sizeof(float) * (size_t)n);
    int64_t off = 0;
    for (int i = 0; i < RANKS; i++) {
        const OcrTensor *t = which == 0 ? &rk[i].y : &rk[i].dx;
        float *v = values(t);
        memcpy(all + off, v, sizeof(float) * (size_t)(rk[i].M * C));
        off += rk[i].M * C;
        free(v);
    }
    return all;
}

// ---- the double reference: Σ dout·act(BN(x)) over the whole batch ----------------------------------

typedef struct {
    int64_t M, C;
    ocr_activation_t act;
    const double *dout;
} Ref;

static double act_d(double v, ocr_activation_t act) {
    switch (act) {
    case OCR_ACT_RELU: return v > 0 ? v : 0;
    case OCR_ACT_HARDSWISH: return v * fmin(fmax(v + 3, 0), 6) / 6;
    default: return v;
    }
}

// p = [x (M·C) | gamma (C) | beta (C)]
static double ref_loss(const double *p, void *ctx) {
    const Ref *r = ctx;
    const int64_t M = r->M, C = r->C;
    const double *x = p, *g = p + M * C, *b = g + C;
    double loss = 0;
    for (int64_t c = 0; c < C; c++) {
        double m = 0, v = 0;
        for (int64_t i = 0; i < M; i++) m += x[i * C + c];
        m /= M;
        for (int64_t i = 0; i < M; i++) v += (x[i * C + c] - m) * (x[i * C + c] - m);
        v /= M;
        const double rs = 1 / sqrt(v + (double)EPS);
        for (int64_t i = 0; i < M; i++) loss += r->dout[i * C + c] * act_d((x[i * C + c] - m) * rs * g[c] + b[c], r->act);
    }
    return loss;
}

// ---- tests ------------------------------------------------------------------------------------------

// Forward statistics and output against the plain op on the whole batch. The world's mean and
// variance are double sums combined in another order than the whole batch's, so they agree to
// a few double ulps and, rounded to f32, to one f32 ulp at most; the output then differs by at
// most an ulp of each coefficient times its operand plus one rounding of the output:
// |Δy| <= 2^-23 (|a|·|x − mean| + |a|·|mean|) + 2^-24 |y|, checked with 2x that.
static void check_forward(Rank rk[RANKS], const Rank *whole, const Batch *p) {
    const int64_t C = p->C, n = p->M * C;
    float *sm0 = values(&rk[0].sm), *sm1 = values(&rk[1].sm), *sr0 = values(&rk[0].sr), *sr1 = values(&rk[1].sr);
    float *smw = values(&whole->sm), *srw = values(&whole->sr), *saw = values(&whole->sa);
    ck_assert_msg(memcmp(sm0, sm1, sizeof(float) * C) == 0 && memcmp(sr0, sr1, sizeof(float) * C) == 0,
                  "the two ranks saved different statistics");
    for (int64_t c = 0; c < C; c++) {
        ck_assert_msg(fabsf(sm0[c] - smw[c]) <= ldexpf(fabsf(smw[c]), -23) + 1e-30f, "save_mean[%lld] %.9g vs %.9g",
                      (long long)c, sm0[c], smw[c]);
        ck_assert_msg(fabsf(sr0[c] - srw[c]) <= ldexpf(fabsf(srw[c]), -23), "save_rstd[%lld] %.9g vs %.9g",
                      (long long)c, sr0[c], srw[c]);
    }
    float *y = gathered(rk, 0), *yw = values(&whole->y), *xs = values(&whole->x);
    const double ulp_out = ldexp(1.0, rk[0].dt == OCR_F32 ? -24 : rk[0].dt == OCR_F16 ? -11 : -8);
    for (int64_t i = 0; i < n; i++) {
        const int64_t c = i % C;
        const double a = fabs((double)saw[c]), d = fabs((double)xs[i] - smw[c]);
        // An activation is 1-Lipschitz (relu, hardswish: up to 1.5): the BN bound carries through.
        const double tol = 2 * (1.5 * ldexp(a * d + a * fabs((double)smw[c]), -23) + 2 * ulp_out * fabs((double)yw[i]));
        ck_assert_msg(fabs((double)y[i] - yw[i]) <= tol + 1e-30, "out[%lld] %.9g vs %.9g (tolerance %.3g)",
                      (long long)i, y[i], yw[i], tol);
    }
    // Running statistics: momentum · old + (1 − momentum) · the world's, as the whole batch's.
    for (int k = 0; k < 2; k++) {
        float *r0 = values(k ? &rk[0].rv : &rk[0].rm), *r1 = values(k ? &rk[1].rv : &rk[1].rm);
        float *rw = values(k ? &whole->rv : &whole->rm);
        ck_assert_msg(memcmp(r0, r1, sizeof(float) * C) == 0, "the ranks' running statistics differ");
        for (int64_t c = 0; c < C; c++)
            ck_assert_msg(fabsf(r0[c] - rw[c]) <= ldexpf(fabsf(rw[c]), -22) + 1e-30f, "running %s[%lld] %.9g vs %.9g",
                          k ? "var" : "mean", (long long)c, r0[c], rw[c]);
        free(r0), free(r1), free(rw);
    }
    free(sm0), free(sm1), free(sr0), free(sr1), free(smw), free(srw), free(saw), free(y), free(yw), free(xs);
}

static void check_backward_fd(ocr_activation_t act, int64_t M, int64_t C, int64_t split) {
    Batch p = batch_new(M, C, 700 + (uint64_t)act, 0.0f);
    Rank rk[RANKS];
    World w;
    run_world(rk, &p, split, OCR_F32, act, 1, &w);
    ck_assert_int_eq(w.calls[0], 3);  // forward: counts and means, squared deviations; backward: sums
    ck_assert_int_eq(w.calls[1], 3);
    const int64_t n = M * C, np = n + 2 * C;
    double *pd = malloc(sizeof(double) * np), *num = malloc(sizeof(double) * np), *dyd = malloc(sizeof(double) * n);
    for (int64_t i = 0; i < n; i++) pd[i] = p.x[i], dyd[i] = p.dy[i];
    for (int64_t c = 0; c < C; c++) pd[n + c] = p.g[c], pd[n + C + c] = p.b[c];
    Ref ref = {M, C, act, dyd};
    ocr_test_numeric_grad(num, pd, np, ref_loss, &ref, 1e-6);
    float *dx = gathered(rk, 1);
    double err = ocr_test_rel_error(dx, num, n);
    ck_assert_msg(err < 1e-4, "%s: dinp of the world rel error %g", ocr_activation_name(act), err);
    ck_assert_msg(ocr_test_allclose_f64(dx, num, n, 1e-4, 1e-3, "dinp"), "%s: dinp", ocr_activation_name(act));
    // Each rank's dgamma/dbeta are its own rows' share; the two add up to the world's.
    float *dg0 = values(&rk[0].dg), *dg1 = values(&rk[1].dg), *db0 = values(&rk[0].db), *db1 = values(&rk[1].db);
    float *sg = malloc(sizeof(float) * C), *sb = malloc(sizeof(float) * C);
    for (int64_t c = 0; c < C; c++) sg[c] = dg0[c] + dg1[c], sb[c] = db0[c] + db1[c];
    ck_assert_msg(ocr_test_allclose_f64(sg, num + n, C, 1e-4, 1e-4, "dgamma"), "dgamma: ranks' sum");
    ck_assert_msg(ocr_test_allclose_f64(sb, num + n + C, C, 1e-4, 1e-4, "dbeta"), "dbeta: ranks' sum");
    double share = 0;
    for (int64_t c = 0; c < C; c++) share += fabs((double)db0[c] - num[n + C + c]);
    ck_assert_msg(share > 1e-3, "rank 0's dbeta is the world's: the gradient all-reduce would count it twice");
    Rank whole;
    run_whole(&whole, &p, OCR_F32, act, 1);
    check_forward(rk, &whole, &p);
    free(pd), free(num), free(dyd), free(dx), free(dg0), free(dg1), free(db0), free(db1), free(sg), free(sb);
    rank_free(&rk[0]), rank_free(&rk[1]), rank_free(&whole);
    batch_free(&p);
}

START_TEST(test_backward_fd_plain) { check_backward_fd(OCR_ACT_NONE, 12, 5, 5); }
END_TEST

START_TEST(test_backward_fd_activation) { check_backward_fd(OCR_ACT_HARDSWISH, 10, 4, 6); }
END_TEST

// Tens of thousands of rows in several chunks and threads per rank, unequal halves, and a mean
// 3000 times the spread: the combination of the ranks' means and variances must not cancel.
START_TEST(test_forward_large_offset) {
    const int64_t M = 4 * 33 * 61, C = 19;
    Batch p = batch_new(M, C, 900, 3000.0f);
    Rank rk[RANKS], whole;
    World w;
    run_world(rk, &p, M / 3, OCR_F32, OCR_ACT_RELU, 1, &w);
    run_whole(&whole, &p, OCR_F32, OCR_ACT_RELU, 1);
    check_forward(rk, &whole, &p);
    // The variance against a double two-pass reference.
    float *sr = values(&rk[0].sr);
    for (int64_t c = 0; c < C; c++) {
        double m = 0, v = 0;
        for (int64_t i = 0; i < M; i++) m += p.x[i * C + c];
        m /= M;
        for (int64_t i = 0; i < M; i++) v += ((double)p.x[i * C + c] - m) * ((double)p.x[i * C + c] - m);
        v /= M;
        const double rs = 1 / sqrt(v + (double)EPS);
        ck_assert_msg(fabs(sr[c] - rs) <= 4 * ldexp(rs, -24), "rstd[%lld] %.9g vs %.9g", (long long)c, sr[c], rs);
    }
    free(sr);
    rank_free(&rk[0]), rank_free(&rk[1]), rank_free(&whole);
    batch_free(&p);
}
END_TEST

// bf16 and f16 maps: the same rows rounded the same way, against the plain op on the whole batch.
START_TEST(test_low_precision) {
    const ocr_dtype_t dts[] = {OCR_F16, OCR_BF16};
    for (int k = 0; k < 2; k++) {
        Batch p = batch_new(3 * 7 * 9, 24, 950 + (uint64_t)k, 0.0f);
        Rank rk[RANKS], whole;
        World w;
        run_world(rk, &p, 100, dts[k], OCR_ACT_HARDSWISH, 1, &w);
        run_whole(&whole, &p, dts[k], OCR_ACT_HARDSWISH, 1);
        check_forward(rk, &whole, &p);
        // dinp: the world's coefficients are the whole batch's within a few f32 ulps, the map
        // then rounds to its dtype: within two of its roundings of the gradient's scale.
        float *dx = gathered(rk, 1), *dxw = values(&whole.dx);
        double scale = 0;
        for (int64_t i = 0; i < p.M * p.C; i++) scale = fmax(scale, fabs((double)dxw[i]));
        const double tol = 2 * ldexp(scale, dts[k] == OCR_F16 ? -11 : -8);
        for (int64_t i = 0; i < p.M * p.C; i++)
            ck_assert_msg(fabs((double)dx[i] - dxw[i]) <= tol, "%s dinp[%lld] %.6g vs %.6g", ocr_dtype_name(dts[k]),
                          (long long)i, dx[i], dxw[i]);
        free(dx), free(dxw);
        rank_free(&rk[0]), rank_free(&rk[1]), rank_free(&whole);
        batch_free(&p);
    }
}
END_TEST

// A world of one: the sums are the rank's own, and the op is the plain one bit for bit; in
// inference (running statistics) nothing is summed.
START_TEST(test_world_of_one_is_plain) {
    Batch p = batch_new(5 * 11, 7, 990, 0.5f);
    for (int training = 0; training < 2; training++) {
        Rank one, plain;
        int calls = 0;
        rank_init(&one, &p, 0, p.M, OCR_F32, OCR_ACT_SWISH, training);
        one.sync = (OcrBnSync){identity_sum, &calls};
        rank_forward_backward(&one);
        run_whole(&plain, &p, OCR_F32, OCR_ACT_SWISH, training);
        ck_assert_int_eq(calls, training ? 3 : 0);
        OcrTensor *a[] = {&one.y, &one.dx, &one.sm, &one.sr, &one.rm, &one.rv, &one.dg, &one.db};
        OcrTensor *b[] = {&plain.y, &plain.dx, &plain.sm, &plain.sr, &plain.rm, &plain.rv, &plain.dg, &plain.db};
        for (int i = 0; i < 8; i++) {
            float *va = values(a[i]), *vb = values(b[i]);
            // The world's variance comes from M·var / M: equal to the plain op's to within a
            // double rounding, which the f32 results do not see except at a rounding tie.
            for (int64_t k = 0; k < ocr_tensor_numel(a[i]); k++)
                ck_assert_msg(fabsf(va[k] - vb[k]) <= ldexpf(fabsf(vb[k]), -23), "training %d tensor %d [%lld]: %.9g "
                              "vs %.9g", training, i, (long long)k, va[k], vb[k]);
            free(va), free(vb);
        }
        rank_free(&one), rank_free(&plain);
    }
    batch_free(&p);
}
END_TEST

int main(void) {
    Suite *s = suite_create("bn_sync");
    TCase *tc = tcase_create("world_of_two");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_backward_fd_plain);
    tcase_add_test(tc, test_backward_fd_activation);
    tcase_add_test(tc, test_forward_large_offset);
    tcase_add_test(tc, test_low_precision);
    tcase_add_test(tc, test_world_of_one_is_plain);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

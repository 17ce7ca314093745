// Fused batch norm + activation (batchnorm2d_act_forward / _backward): the forward and its
// save_scale against a double-precision reference (training and inference), both directions bit for bit against the
// unfused sequence they replace (batchnorm2d_forward → activation_forward in place; BN output
// recomputed into the storage dtype → activation_backward → batchnorm2d_backward) for every
// activation, f32/f16/bf16 storage, NULL gamma/beta and optional gradient outputs, the
// backward against central finite differences in double, low-precision storage against the f32
// result, and thread-count invariance; ocr_batchnorm2d_forward_accumulate (out += bn(x)) bit for bit
// against batchnorm2d_forward followed by accumulate, and its gradient; batchnorm2d_act_apply bit
// for bit against the forward's output (every case above, every vector level, mixed dtypes);
// batchnorm2d_act_backward_rebuild: its output the forward's, its gradients the backward's, bit
// for bit (every case above, every vector level; dinp apart, in dout's memory, absent).
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "tests/common/test_util.h"

#define MOMENTUM 0.9f
#define EPS 1e-5f
#define HSIG_SLOPE 0.1666667f

static const ocr_activation_t ACTS[] = {OCR_ACT_NONE,        OCR_ACT_RELU,  OCR_ACT_HARDSWISH,
                                        OCR_ACT_HARDSIGMOID, OCR_ACT_SWISH, OCR_ACT_GELU};
#define NACTS ((int)(sizeof ACTS / sizeof ACTS[0]))
static const ocr_dtype_t DTS[] = {OCR_F32, OCR_F16, OCR_BF16};

static float *fvec(int64_t n) { return malloc((size_t)(n > 0 ? n : 1) * sizeof(float)); }
static double *dvec(int64_t n) { return malloc((size_t)(n > 0 ? n : 1) * sizeof(double)); }
static void fetch(float *dst, const OcrTensor *t) { ocr_tensor_to_f32(t, dst); }

// act(v) and act'(v) in double (the derivative conventions at the kinks do not matter: the
// test values stay away from them).
static double ref_act(double v, ocr_activation_t act) {
    switch (act) {
        case OCR_ACT_RELU: return v > 0 ? v : 0;
        case OCR_ACT_HARDSWISH: return v * fmin(fmax(v + 3, 0), 6) / 6;
        case OCR_ACT_HARDSIGMOID: return fmin(fmax(v * (double)HSIG_SLOPE + 0.5, 0), 1);
        case OCR_ACT_SWISH: return v / (1 + exp(-v));
        case OCR_ACT_GELU: return v * 0.5 * (1 + erf(v / sqrt(2.0)));
        default: return v;
    }
}

// Inputs with a per-channel offset and spread, so the normalised values cover every piece of
// every activation (|value| up to about 4 with gamma up to 2).
static void make_input(float *x, int64_t M, int64_t C, uint64_t seed) {
    ocr_test_fill_uniform(x, M * C, seed, -1.0f, 2.0f);
    for (int64_t i = 0; i < M; i++)
        for (int64_t c = 0; c < C; c++)
            x[i * C + c] = x[i * C + c] * (1.0f + 0.1f * (float)(c % 5)) + 0.3f * (float)c - 2.0f;
}

// Problem in double: p = [x (M·C) | gamma (C) | beta (C)].
typedef struct {
    int64_t M, C;
    int training;
    ocr_activation_t act;
    const double *rmean, *rvar;  // inference statistics
    const double *dout;          // for the loss
} Ref;

static void ref_forward(double *y, const double *p, const Ref *r) {
    const int64_t M = r->M, C = r->C;
    const double *x = p, *g = p + M * C, *b = g + C;
    for (int64_t c = 0; c < C; c++) {
        double m = 0, v = 0;
        if (r->training) {
            for (int64_t i = 0; i < M; i++) m += x[i * C + c];
            m /= (double)M;
            for (int64_t i = 0; i < M; i++) v += (x[i * C + c] - m) * (x[i * C + c] - m);
            v /= (double)M;
        } else {
            m = r->rmean[c];
            v = r->rvar[c];
        }
        const double rs = 1.0 / sqrt(v + (double)EPS);
        for (int64_t i = 0; i < M; i++) y[i * C + c] = ref_act((x[i * C + c] - m) * rs * g[c] + b[c], r->act);
    }
}

static double ref_loss(const double *p, void *vctx) {
    const Ref *r = vctx;
    const int64_t n = r->M * r->C;
    double *y = dvec(n), l = 0;
    ref_forward(y, p, r);
    for (int64_t i = 0; i < n; i++) l += r->dout[i] * y[i];
    free(y);
    return l;
}

// ---- one problem: host values and the tensors of a fused and an unfused run -------------------

typedef struct {
    int64_t N, H, W, C, M, n;
    float *x, *dy, *g, *b, *rm, *rv, *dg0, *db0;
} Prob;

static Prob prob_new(int64_t N, int64_t H, int64_t W, int64_t C, uint64_t seed) {
    Prob p = {N, H, W, C, N * H * W, N * H * W * C, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    p.x = fvec(p.n), p.dy = fvec(p.n), p.g = fvec(C), p.b = fvec(C), p.rm = fvec(C), p.rv = fvec(C);
    p.dg0 = fvec(C), p.db0 = fvec(C);
    make_input(p.x, p.M, C, seed);
    ocr_test_fill_uniform(p.dy, p.n, seed + 1, -1.0f, 1.0f);
    ocr_test_fill_uniform(p.g, C, seed + 2, 0.5f, 2.0f);
    ocr_test_fill_uniform(p.b, C, seed + 3, -0.5f, 0.5f);
    ocr_test_fill_uniform(p.rm, C, seed + 4, -0.5f, 0.5f);
    for (int64_t c = 0; c < C; c++) p.rm[c] += 0.3f * (float)c - 1.5f;
    ocr_test_fill_uniform(p.rv, C, seed + 5, 0.5f, 2.0f);
    ocr_test_fill_uniform(p.dg0, C, seed + 6, -1.0f, 1.0f);
    ocr_test_fill_uniform(p.db0, C, seed + 7, -1.0f, 1.0f);
    return p;
}

static void prob_free(Prob *p) {
    free(p->x), free(p->dy), free(p->g), free(p->b), free(p->rm), free(p->rv), free(p->dg0), free(p->db0);
}

// Tensors of one run: x, y (the activation output), dy, dx in dtype dt; the rest f32.
typedef struct {
    OcrTensor x, y, dy, dx, g, b, rm, rv, sm, sr, sa, dg, db;
} Run;

static Run run_new(const Prob *p, ocr_dtype_t dt) {
    const int64_t *shape = OCR_SHAPE(p->N, p->H, p->W, p->C), *vs = OCR_SHAPE(p->C);
    Run r;
    r.x = ocr_test_tensor(dt, 4, shape, p->x);
    r.y = ocr_test_tensor(dt, 4, shape, NULL);
    r.dy = ocr_test_tensor(dt, 4, shape, p->dy);
    r.dx = ocr_test_tensor(dt, 4, shape, NULL);
    r.g = ocr_test_tensor(OCR_F32, 1, vs, p->g);
    r.b = ocr_test_tensor(OCR_F32, 1, vs, p->b);
    r.rm = ocr_test_tensor(OCR_F32, 1, vs, p->rm);
    r.rv = ocr_test_tensor(OCR_F32, 1, vs, p->rv);
    r.sm = ocr_test_tensor(OCR_F32, 1, vs, NULL);
    r.sr = ocr_test_tensor(OCR_F32, 1, vs, NULL);
    r.sa = ocr_test_tensor(OCR_F32, 1, vs, NULL);
    r.dg = ocr_test_tensor(OCR_F32, 1, vs, p->dg0);
    r.db = ocr_test_tensor(OCR_F32, 1, vs, p->db0);
    return r;
}

static void run_free(Run *r) {
    OcrTensor *ts[] = {&r->x,  &r->y,  &r->dy, &r->dx, &r->g,  &r->b, &r->rm,
                       &r->rv, &r->sm, &r->sr, &r->sa, &r->dg, &r->db};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) ocr_tensor_free(ts[i]);
}

static void fused_forward(Run *r, ocr_activation_t act, int training, int affine) {
    ocr_batchnorm2d_act_forward(&r->y, &r->sm, &r->sr, &r->sa, &r->rm, &r->rv, &r->x, affine ? &r->g : NULL,
                                affine ? &r->b : NULL, act, MOMENTUM, EPS, training);
}

static void fused_backward(Run *r, ocr_activation_t act, int training, int affine, int want_dx, int want_params) {
    ocr_batchnorm2d_act_backward(want_dx ? &r->dx : NULL, want_params ? &r->dg : NULL, want_params ? &r->db : NULL,
                                 &r->dy, &r->x, affine ? &r->g : NULL, affine ? &r->b : NULL, &r->sm, &r->sr, &r->sa,
                                 act, r->y.dtype, training);
}

// What ConvBN did before the fused op: BN into y, the activation in place over it.
static void unfused_forward(Run *r, ocr_activation_t act, int training, int affine) {
    ocr_batchnorm2d_forward(&r->y, &r->sm, &r->sr, &r->rm, &r->rv, &r->x, affine ? &r->g : NULL, affine ? &r->b : NULL,
                            MOMENTUM, EPS, training);
    ocr_activation_forward(&r->y, &r->y, act);
}

// ... and its backward: BN's output recomputed into y's dtype (batch statistics from x in
// training, running ones in inference), the activation's gradient into that dtype, then BN's.
static void unfused_backward(Run *r, ocr_activation_t act, int training, int affine, int want_dx, int want_params) {
    OcrTensor *g = affine ? &r->g : NULL, *b = affine ? &r->b : NULL;
    OcrTensor gact = ocr_test_tensor(r->y.dtype, 4, r->x.shape, NULL);
    if (act != OCR_ACT_NONE) {
        OcrTensor z = ocr_test_tensor(r->y.dtype, 4, r->x.shape, NULL);
        ocr_batchnorm2d_forward(&z, NULL, NULL, training ? NULL : &r->rm, training ? NULL : &r->rv, &r->x, g, b,
                                MOMENTUM, EPS, training);
        ocr_activation_backward(&gact, &r->dy, &z, act);
        ocr_tensor_free(&z);
    }
    ocr_batchnorm2d_backward(want_dx ? &r->dx : NULL, want_params ? &r->dg : NULL, want_params ? &r->db : NULL,
                             act != OCR_ACT_NONE ? &gact : &r->dy, &r->x, g, &r->sm, &r->sr, training);
    ocr_tensor_free(&gact);
}

static int same_bits(const OcrTensor *a, const OcrTensor *b, const char *what, const char *ctx) {
    const size_t bytes = (size_t)ocr_tensor_numel(a) * ocr_dtype_size(a->dtype);
    if (memcmp(a->data, b->data, bytes) == 0) return 1;
    printf("%s: %s differs from the unfused sequence\n", ctx, what);
    return 0;
}

// batchnorm2d_act_apply from the forward's save_mean / save_scale and beta rebuilds the
// forward's output r->y bit for bit, into a poisoned tensor; also from an input of each other
// dtype (the forward's output pass widens any input the same way).
static void check_apply(const Run *r, ocr_activation_t act, int affine, const char *ctx) {
    OcrTensor y = ocr_test_tensor(r->y.dtype, 4, r->x.shape, NULL);
    ocr_test_poison(&y);
    ocr_batchnorm2d_act_apply(&y, &r->x, &r->sm, &r->sa, affine ? &r->b : NULL, act);
    ck_assert_msg(same_bits(&y, &r->y, "apply", ctx), "%s: apply", ctx);
    ocr_tensor_free(&y);
}

// The backward that rebuilds the output (batchnorm2d_act_backward_rebuild) on a fresh forward
// of r's problem: out is the forward's output f->y bit for bit, dinp / dgamma / dbeta the plain
// backward's (u: the unfused sequence), with dinp in its own tensor, in dout's memory, and absent.
static void check_rebuild(const Prob *p, ocr_dtype_t dt, const Run *f, const Run *u, ocr_activation_t act,
                          int training, int affine, const char *ctx) {
    for (int form = 0; form < 3; form++) {  // 0: dinp apart, 1: dinp = dout, 2: no dinp
        char what[200];
        snprintf(what, sizeof what, "%s rebuild (%s)", ctx,
                 form == 0 ? "dinp apart" : form == 1 ? "dinp in dout's memory" : "no dinp");
        Run q = run_new(p, dt);
        fused_forward(&q, act, training, affine);
        OcrTensor y = ocr_test_tensor(dt, 4, q.x.shape, NULL);
        ocr_test_poison(&y);
        ocr_test_poison(&q.dx);
        OcrTensor *dinp = form == 0 ? &q.dx : form == 1 ? &q.dy : NULL;
        ocr_batchnorm2d_act_backward_rebuild(&y, dinp, &q.dg, &q.db, &q.dy, &q.x, affine ? &q.g : NULL,
                                             affine ? &q.b : NULL, &q.sm, &q.sr, &q.sa, act, training, NULL);
        ck_assert_msg(same_bits(&y, &f->y, "rebuilt out", what), "%s: rebuilt out", what);
        if (dinp) ck_assert_msg(same_bits(dinp, &u->dx, "dinp", what), "%s: dinp", what);
        ck_assert_msg(same_bits(&q.dg, &u->dg, "dgamma", what), "%s: dgamma", what);
        ck_assert_msg(same_bits(&q.db, &u->db, "dbeta", what), "%s: dbeta", what);
        ocr_tensor_free(&y);
        run_free(&q);
    }
}

// Fused against unfused, bit for bit, forward and backward.
static void check_unfused(int64_t N, int64_t H, int64_t W, int64_t C, uint64_t seed) {
    Prob p = prob_new(N, H, W, C, seed);
    for (int d = 0; d < 3; d++)
        for (int a = 0; a < NACTS; a++)
            for (int training = 0; training <= 1; training++)
                for (int affine = 0; affine <= 1; affine++) {
                    char ctx[160];
                    snprintf(ctx, sizeof ctx, "%lldx%lldx%lldx%lld %s %s training %d affine %d", (long long)N,
                             (long long)H, (long long)W, (long long)C, ocr_dtype_name(DTS[d]),
                             ocr_activation_name(ACTS[a]), training, affine);
                    Run f = run_new(&p, DTS[d]), u = run_new(&p, DTS[d]);
                    ocr_test_poison(&f.y), ocr_test_poison(&f.sm), ocr_test_poison(&f.sr), ocr_test_poison(&f.sa);
                    fused_forward(&f, ACTS[a], training, affine);
                    unfused_forward(&u, ACTS[a], training, affine);
                    ck_assert_msg(same_bits(&f.y, &u.y, "out", ctx), "%s: out", ctx);
                    ck_assert_msg(same_bits(&f.sm, &u.sm, "save_mean", ctx), "%s: save_mean", ctx);
                    ck_assert_msg(same_bits(&f.sr, &u.sr, "save_rstd", ctx), "%s: save_rstd", ctx);
                    ck_assert_msg(same_bits(&f.rm, &u.rm, "running_mean", ctx), "%s: running_mean", ctx);
                    ck_assert_msg(same_bits(&f.rv, &u.rv, "running_var", ctx), "%s: running_var", ctx);
                    check_apply(&f, ACTS[a], affine, ctx);
                    ocr_test_poison(&f.dx);
                    fused_backward(&f, ACTS[a], training, affine, 1, 1);
                    unfused_backward(&u, ACTS[a], training, affine, 1, 1);
                    ck_assert_msg(same_bits(&f.dx, &u.dx, "dinp", ctx), "%s: dinp", ctx);
                    ck_assert_msg(same_bits(&f.dg, &u.dg, "dgamma", ctx), "%s: dgamma", ctx);
                    ck_assert_msg(same_bits(&f.db, &u.db, "dbeta", ctx), "%s: dbeta", ctx);
                    check_rebuild(&p, DTS[d], &f, &u, ACTS[a], training, affine, ctx);
                    // Optional outputs: dinp alone, then the parameter gradients alone.
                    Run o = run_new(&p, DTS[d]);
                    fused_forward(&o, ACTS[a], training, affine);
                    ocr_test_poison(&o.dx);
                    fused_backward(&o, ACTS[a], training, affine, 1, 0);
                    ck_assert_msg(same_bits(&o.dx, &u.dx, "dinp alone", ctx), "%s: dinp alone", ctx);
                    fused_backward(&o, ACTS[a], training, affine, 0, 1);
                    ck_assert_msg(same_bits(&o.dg, &u.dg, "dgamma alone", ctx), "%s: dgamma alone", ctx);
                    ck_assert_msg(same_bits(&o.db, &u.db, "dbeta alone", ctx), "%s: dbeta alone", ctx);
                    run_free(&o);
                    run_free(&f);
                    run_free(&u);
                }
    prob_free(&p);
}

// Small (serial), several row tiles per statistics chunk with ragged ends, and wide channels
// (one row per tile) with enough elements for the parallel loops.
START_TEST(test_matches_unfused_small) { check_unfused(2, 3, 5, 11, 100); }
END_TEST

START_TEST(test_matches_unfused_tiles) { check_unfused(3, 7, 13, 37, 200); }
END_TEST

START_TEST(test_matches_unfused_wide) { check_unfused(2, 3, 3, 4100, 300); }
END_TEST

int ocr_cpu_vec_select(const char *name);  // kernels/cpu/cpu_common.h (test hook)

// The same at every vector level, with channel counts that leave a partial vector per row at
// each width (24 = 16 + 8 on AVX-512, 37 on all): the bf16 maps' in-register passes compute the
// activation over a whole tile in one flat loop, the unfused activation over the whole tensor,
// and the tile's values row by row; every level must still give the unfused sequence's bits.
START_TEST(test_matches_unfused_every_level) {
    static const char *const levels[3] = {"sse2", "avx2", "avx512"};
    for (int lv = 0; lv < 3; lv++) {
        if (!ocr_cpu_vec_select(levels[lv])) {
            printf("batchnorm2d_act: this CPU has no %s; that level not checked\n", levels[lv]);
            continue;
        }
        check_unfused(2, 5, 7, 24, 400 + lv);
        check_unfused(2, 3, 5, 37, 410 + lv);
    }
    ocr_cpu_vec_select(NULL);
}
END_TEST

// The forward and apply with an input dtype other than the output's (a conv in f32 feeding a
// bf16 BN, say): apply still gives the forward's bits, at every vector level and thread count.
START_TEST(test_apply_mixed_dtypes_every_level) {
    static const char *const levels[3] = {"sse2", "avx2", "avx512"};
    for (int lv = 0; lv < 3; lv++) {
        if (!ocr_cpu_vec_select(levels[lv])) {
            printf("batchnorm2d_act_apply: this CPU has no %s; that level not checked\n", levels[lv]);
            continue;
        }
        for (int xk = 0; xk < 3; xk++)
            for (int yk = 0; yk < 3; yk++)
                for (int threads = 1; threads <= 2; threads++) {
                    omp_set_num_threads(threads);
                    Prob p = prob_new(2, 5, 7, 37, 1000 + 10 * lv + xk);
                    Run r = run_new(&p, DTS[xk]);
                    const int64_t *shape = OCR_SHAPE(p.N, p.H, p.W, p.C);
                    ocr_tensor_free(&r.y);
                    r.y = ocr_test_tensor(DTS[yk], 4, shape, NULL);
                    for (int a = 0; a < NACTS; a++)
                        for (int training = 0; training <= 1; training++) {
                            char ctx[128];
                            snprintf(ctx, sizeof ctx, "%s x %s out %s %s training %d, %d threads", levels[lv],
                                     ocr_dtype_name(DTS[xk]), ocr_dtype_name(DTS[yk]), ocr_activation_name(ACTS[a]),
                                     training, threads);
                            fused_forward(&r, ACTS[a], training, 1);
                            check_apply(&r, ACTS[a], 1, ctx);
                        }
                    run_free(&r);
                    prob_free(&p);
                }
    }
    ocr_cpu_vec_select(NULL);
    omp_set_num_threads(2);
}
END_TEST

// The forward against the double reference; training updates the running statistics as
// Paddle does, inference leaves them alone.
static void check_reference(int training) {
    Prob p = prob_new(2, 3, 5, 13, 400 + training);
    double *pd = dvec(p.n + 2 * p.C), *yref = dvec(p.n), *rmd = dvec(p.C), *rvd = dvec(p.C);
    float *got = fvec(p.n);
    for (int64_t i = 0; i < p.n; i++) pd[i] = p.x[i];
    for (int64_t c = 0; c < p.C; c++) {
        pd[p.n + c] = p.g[c];
        pd[p.n + p.C + c] = p.b[c];
        rmd[c] = p.rm[c];
        rvd[c] = p.rv[c];
    }
    for (int a = 0; a < NACTS; a++) {
        Ref ref = {p.M, p.C, training, ACTS[a], rmd, rvd, NULL};
        ref_forward(yref, pd, &ref);
        Run r = run_new(&p, OCR_F32);
        ocr_test_poison(&r.y);
        fused_forward(&r, ACTS[a], training, 1);
        fetch(got, &r.y);
        // gelu's normal CDF is accurate to ~5e-6 relative in its far left tail.
        ck_assert_msg(ocr_test_allclose_f64(got, yref, p.n, 1e-5, 1e-5, ocr_activation_name(ACTS[a])),
                      "%s training %d: out", ocr_activation_name(ACTS[a]), training);
        // save_scale = gamma·rstd of the statistics used.
        double *scale = dvec(p.C);
        for (int64_t c = 0; c < p.C; c++) {
            double m = 0, v = 0;
            if (training) {
                for (int64_t i = 0; i < p.M; i++) m += pd[i * p.C + c];
                m /= (double)p.M;
                for (int64_t i = 0; i < p.M; i++) v += (pd[i * p.C + c] - m) * (pd[i * p.C + c] - m);
                v /= (double)p.M;
            } else {
                v = rvd[c];
            }
            scale[c] = (double)p.g[c] / sqrt(v + (double)EPS);
        }
        fetch(got, &r.sa);
        ck_assert_msg(ocr_test_allclose_f64(got, scale, p.C, 0, 2e-6, "save_scale"), "%s training %d: save_scale",
                      ocr_activation_name(ACTS[a]), training);
        free(scale);
        if (!training) {
            fetch(got, &r.rm);
            ck_assert_msg(memcmp(got, p.rm, (size_t)p.C * sizeof(float)) == 0, "inference changed running_mean");
            fetch(got, &r.rv);
            ck_assert_msg(memcmp(got, p.rv, (size_t)p.C * sizeof(float)) == 0, "inference changed running_var");
        } else {
            // running = 0.9·running + 0.1·batch (biased variance).
            double *m = dvec(p.C), *v = dvec(p.C);
            for (int64_t c = 0; c < p.C; c++) {
                double s = 0, q = 0;
                for (int64_t i = 0; i < p.M; i++) s += pd[i * p.C + c];
                s /= (double)p.M;
                for (int64_t i = 0; i < p.M; i++) q += (pd[i * p.C + c] - s) * (pd[i * p.C + c] - s);
                m[c] = 0.9 * rmd[c] + 0.1 * s;
                v[c] = 0.9 * rvd[c] + 0.1 * q / (double)p.M;
            }
            fetch(got, &r.rm);
            ck_assert(ocr_test_allclose_f64(got, m, p.C, 1e-6, 1e-6, "running_mean"));
            fetch(got, &r.rv);
            ck_assert(ocr_test_allclose_f64(got, v, p.C, 1e-6, 1e-6, "running_var"));
            free(m), free(v);
        }
        run_free(&r);
    }
    free(pd), free(yref), free(rmd), free(rvd), free(got);
    prob_free(&p);
}

START_TEST(test_forward_reference_training) { check_reference(1); }
END_TEST

START_TEST(test_forward_reference_inference) { check_reference(0); }
END_TEST

// Backward against central finite differences of Σ dout·act(bn(x)) in double; dgamma/dbeta
// accumulate onto their previous values.
static void check_fd(int training) {
    Prob p = prob_new(2, 3, 4, 7, 500 + training);
    const int64_t n = p.n, C = p.C, np = n + 2 * C;
    double *pd = dvec(np), *num = dvec(np), *dyd = dvec(n), *rmd = dvec(C), *rvd = dvec(C), *exp_p = dvec(C);
    float *got = fvec(n);
    for (int64_t i = 0; i < n; i++) pd[i] = p.x[i], dyd[i] = p.dy[i];
    for (int64_t c = 0; c < C; c++) pd[n + c] = p.g[c], pd[n + C + c] = p.b[c], rmd[c] = p.rm[c], rvd[c] = p.rv[c];
    for (int a = 0; a < NACTS; a++) {
        const char *an = ocr_activation_name(ACTS[a]);
        Ref ref = {p.M, C, training, ACTS[a], rmd, rvd, dyd};
        ocr_test_numeric_grad(num, pd, np, ref_loss, &ref, 1e-6);
        Run r = run_new(&p, OCR_F32);
        fused_forward(&r, ACTS[a], training, 1);
        ocr_test_poison(&r.dx);
        fused_backward(&r, ACTS[a], training, 1, 1, 1);
        fetch(got, &r.dx);
        double err = ocr_test_rel_error(got, num, n);
        ck_assert_msg(err < 1e-4, "%s training %d: dinp rel error %g", an, training, err);
        ck_assert_msg(ocr_test_allclose_f64(got, num, n, 1e-4, 1e-3, "dinp"), "%s training %d: dinp", an, training);
        for (int64_t c = 0; c < C; c++) exp_p[c] = (double)p.dg0[c] + num[n + c];
        fetch(got, &r.dg);
        ck_assert_msg(ocr_test_allclose_f64(got, exp_p, C, 1e-4, 1e-4, "dgamma"), "%s training %d: dgamma", an,
                      training);
        for (int64_t c = 0; c < C; c++) exp_p[c] = (double)p.db0[c] + num[n + C + c];
        fetch(got, &r.db);
        ck_assert_msg(ocr_test_allclose_f64(got, exp_p, C, 1e-4, 1e-4, "dbeta"), "%s training %d: dbeta", an,
                      training);
        run_free(&r);
    }
    free(pd), free(num), free(dyd), free(rmd), free(rvd), free(exp_p), free(got);
    prob_free(&p);
}

START_TEST(test_backward_fd_training) { check_fd(1); }
END_TEST

START_TEST(test_backward_fd_inference) { check_fd(0); }
END_TEST

// f16/bf16 storage against the f32 op on the same rounded inputs: the output within two
// roundings of its dtype, the gradients within a few roundings of their scale. hardswish is
// left out here: a pre-activation value rounded across its ±3 kinks changes the slope by 0.5
// (its low-precision results are pinned bit for bit against the unfused pair above).
START_TEST(test_low_precision) {
    const ocr_activation_t acts[] = {OCR_ACT_NONE, OCR_ACT_RELU, OCR_ACT_SWISH, OCR_ACT_GELU};
    for (int d = 1; d < 3; d++)
        for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++)
            for (int training = 0; training <= 1; training++) {
                Prob p = prob_new(2, 4, 5, 9, 600 + (uint64_t)(10 * d + a));
                Run lo = run_new(&p, DTS[d]);
                fetch(p.x, &lo.x);  // the rounded inputs
                fetch(p.dy, &lo.dy);
                Run hi = run_new(&p, OCR_F32);
                fused_forward(&lo, acts[a], training, 1);
                fused_forward(&hi, acts[a], training, 1);
                const double eps = ocr_test_dtype_eps(DTS[d]);
                float *gl = fvec(p.n), *gh = fvec(p.n);
                char what[96];
                snprintf(what, sizeof what, "%s %s training %d", ocr_dtype_name(DTS[d]), ocr_activation_name(acts[a]),
                         training);
                fetch(gl, &lo.y);
                fetch(gh, &hi.y);
                ck_assert_msg(ocr_test_allclose_f32(gl, gh, p.n, 4 * eps, 4 * eps, what), "%s: out", what);
                ck_assert_msg(same_bits(&lo.sm, &hi.sm, "save_mean", what), "%s: save_mean", what);
                fused_backward(&lo, acts[a], training, 1, 1, 1);
                fused_backward(&hi, acts[a], training, 1, 1, 1);
                double scale = 0;
                fetch(gh, &hi.dx);
                for (int64_t i = 0; i < p.n; i++) scale = fmax(scale, fabs(gh[i]));
                fetch(gl, &lo.dx);
                ck_assert_msg(ocr_test_allclose_f32(gl, gh, p.n, 16 * eps * scale, 8 * eps, what), "%s: dinp", what);
                fetch(gl, &lo.dg);
                fetch(gh, &hi.dg);
                ck_assert_msg(ocr_test_allclose_f32(gl, gh, p.C, 16 * eps * sqrt((double)p.M), 8 * eps, what),
                              "%s: dgamma", what);
                free(gl), free(gh);
                run_free(&lo), run_free(&hi);
                prob_free(&p);
            }
}
END_TEST

// One thread and three give the same bits (fixed statistics chunks, per-thread tiles).
START_TEST(test_threads_invariant) {
    const int saved = omp_get_max_threads();
    Prob p = prob_new(4, 8, 16, 40, 700);
    for (int d = 0; d < 3; d++) {
        Run r[2];
        for (int k = 0; k < 2; k++) {
            omp_set_num_threads(k ? 3 : 1);
            r[k] = run_new(&p, DTS[d]);
            fused_forward(&r[k], OCR_ACT_HARDSWISH, 1, 1);
            fused_backward(&r[k], OCR_ACT_HARDSWISH, 1, 1, 1, 1);
        }
        omp_set_num_threads(saved);
        const char *dn = ocr_dtype_name(DTS[d]);
        ck_assert_msg(same_bits(&r[0].y, &r[1].y, "out", dn), "%s: out depends on the thread count", dn);
        ck_assert_msg(same_bits(&r[0].rv, &r[1].rv, "running_var", dn), "%s: running_var", dn);
        ck_assert_msg(same_bits(&r[0].dx, &r[1].dx, "dinp", dn), "%s: dinp depends on the thread count", dn);
        ck_assert_msg(same_bits(&r[0].dg, &r[1].dg, "dgamma", dn), "%s: dgamma", dn);
        ck_assert_msg(same_bits(&r[0].db, &r[1].db, "dbeta", dn), "%s: dbeta", dn);
        run_free(&r[0]), run_free(&r[1]);
    }
    prob_free(&p);
}
END_TEST

// ---- batchnorm2d_forward_accumulate: out += bn(x) -------------------------------------------------

// The bits of batchnorm2d_forward into a tensor of the sum's dtype followed by accumulate, for
// f32/f16/bf16 sums over inputs of the same or another dtype, training and inference, one row
// tile and many, every vector level, both thread counts; save_mean/save_rstd and the running
// statistics as batchnorm2d_forward leaves them.
START_TEST(test_forward_accumulate_matches_forward_then_accumulate) {
    static const char *const levels[3] = {"sse2", "avx2", "avx512"};
    const int64_t shapes[2][4] = {{2, 3, 5, 11}, {3, 7, 13, 37}};
    for (int lv = 0; lv < 3; lv++) {
        if (!ocr_cpu_vec_select(levels[lv])) {
            printf("batchnorm2d_forward_accumulate: this CPU has no %s; that level not checked\n", levels[lv]);
            continue;
        }
        for (int z = 0; z < 2; z++)
            for (int k = 0; k < 3; k++)
                for (int xk = 0; xk < 3; xk++)
                    for (int training = 0; training < 2; training++)
                        for (int threads = 1; threads <= 2; threads++) {
                            omp_set_num_threads(threads);
                            const int64_t *sh = shapes[z];
                            Prob p = prob_new(sh[0], sh[1], sh[2], sh[3], 700 + 10 * z + k);
                            const ocr_dtype_t dt = DTS[k], xdt = DTS[xk];
                            char what[128];
                            snprintf(what, sizeof what, "%s, shape %d, sum %s, x %s, training %d, %d threads",
                                     levels[lv], z, ocr_dtype_name(dt), ocr_dtype_name(xdt), training, threads);
                            float *s0 = fvec(p.n);
                            ocr_test_fill_uniform(s0, p.n, 800 + z, -3.0f, 3.0f);
                            Run r[2] = {run_new(&p, xdt), run_new(&p, xdt)};
                            const int64_t *shape = OCR_SHAPE(p.N, p.H, p.W, p.C);
                            OcrTensor sum[2] = {ocr_test_tensor(dt, 4, shape, s0), ocr_test_tensor(dt, 4, shape, s0)};
                            OcrTensor y = ocr_test_tensor(dt, 4, shape, NULL);
                            ocr_batchnorm2d_forward(&y, &r[0].sm, &r[0].sr, &r[0].rm, &r[0].rv, &r[0].x, &r[0].g,
                                                    &r[0].b, MOMENTUM, EPS, training);
                            ocr_accumulate(&sum[0], &y);
                            ocr_batchnorm2d_forward_accumulate(&sum[1], &r[1].sm, &r[1].sr, &r[1].rm, &r[1].rv, &r[1].x,
                                                               &r[1].g, &r[1].b, MOMENTUM, EPS, training);
                            ck_assert_msg(same_bits(&sum[0], &sum[1], "sum", what), "%s", what);
                            if (training) {
                                ck_assert_msg(same_bits(&r[0].sm, &r[1].sm, "save_mean", what), "%s", what);
                                ck_assert_msg(same_bits(&r[0].sr, &r[1].sr, "save_rstd", what), "%s", what);
                            }
                            ck_assert_msg(same_bits(&r[0].rm, &r[1].rm, "running mean", what), "%s", what);
                            ck_assert_msg(same_bits(&r[0].rv, &r[1].rv, "running var", what), "%s", what);
                            ocr_tensor_free(&sum[0]), ocr_tensor_free(&sum[1]), ocr_tensor_free(&y);
                            run_free(&r[0]), run_free(&r[1]);
                            free(s0);
                            prob_free(&p);
                        }
    }
    ocr_cpu_vec_select(NULL);
    omp_set_num_threads(2);
}
END_TEST

// out0 + bn(x) has bn's gradient: batchnorm2d_backward against central differences of
// Σ dout·(out0 + bn(x)) in double, and the forward against the double reference (f32: the
// tolerances of the batch norm checks above).
START_TEST(test_forward_accumulate_gradients) {
    Prob p = prob_new(2, 3, 4, 7, 900);
    const int64_t n = p.n, C = p.C, np = n + 2 * C;
    double *pd = dvec(np), *num = dvec(np), *dyd = dvec(n), *rmd = dvec(C), *rvd = dvec(C), *ref = dvec(n);
    float *got = fvec(n), *s0 = fvec(n);
    ocr_test_fill_uniform(s0, n, 901, -2.0f, 2.0f);
    for (int64_t i = 0; i < n; i++) pd[i] = p.x[i], dyd[i] = p.dy[i];
    for (int64_t c = 0; c < C; c++) pd[n + c] = p.g[c], pd[n + C + c] = p.b[c], rmd[c] = p.rm[c], rvd[c] = p.rv[c];
    Ref rf = {p.M, C, 1, OCR_ACT_NONE, rmd, rvd, dyd};
    ocr_test_numeric_grad(num, pd, np, ref_loss, &rf, 1e-6);  // out0 is a constant of the loss
    ref_forward(ref, pd, &rf);
    for (int64_t i = 0; i < n; i++) ref[i] += s0[i];
    Run r = run_new(&p, OCR_F32);
    OcrTensor sum = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(p.N, p.H, p.W, p.C), s0);
    ocr_batchnorm2d_forward_accumulate(&sum, &r.sm, &r.sr, &r.rm, &r.rv, &r.x, &r.g, &r.b, MOMENTUM, EPS, 1);
    fetch(got, &sum);
    ck_assert(ocr_test_allclose_f64(got, ref, n, 1e-5, 1e-5, "accumulate forward"));
    ocr_test_poison(&r.dx);
    ocr_batchnorm2d_backward(&r.dx, &r.dg, &r.db, &r.dy, &r.x, &r.g, &r.sm, &r.sr, 1);
    fetch(got, &r.dx);
    ck_assert(ocr_test_allclose_f64(got, num, n, 1e-4, 1e-3, "accumulate dinp"));
    ocr_tensor_free(&sum);
    run_free(&r);
    free(pd), free(num), free(dyd), free(rmd), free(rvd), free(ref), free(got), free(s0);
    prob_free(&p);
}
END_TEST

int main(void) {
    Suite *s = suite_create("kernels_bn_act");
    TCase *tc = tcase_create("bn_act");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_matches_unfused_small);
    tcase_add_test(tc, test_matches_unfused_tiles);
    tcase_add_test(tc, test_matches_unfused_wide);
    tcase_add_test(tc, test_matches_unfused_every_level);
    tcase_add_test(tc, test_apply_mixed_dtypes_every_level);
    tcase_add_test(tc, test_forward_reference_training);
    tcase_add_test(tc, test_forward_reference_inference);
    tcase_add_test(tc, test_backward_fd_training);
    tcase_add_test(tc, test_backward_fd_inference);
    tcase_add_test(tc, test_low_precision);
    tcase_add_test(tc, test_threads_invariant);
    tcase_add_test(tc, test_forward_accumulate_matches_forward_then_accumulate);
    tcase_add_test(tc, test_forward_accumulate_gradients);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

// CTC loss: against PyTorch's F.ctc_loss (double precision, tests/data/ctc/), against a
// brute-force sum over all alignments with finite-difference gradients, hand-computed
// tiny cases, reductions, focal weighting, zero_infinity, thread-count independence.
#include <check.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ctc.h"
#include "tests/common/test_util.h"

// ---- helpers ---------------------------------------------------------------------------

// Check's ck_assert writes to a pipe even when it passes; loops over every element use
// this instead so the suite stays fast.
#define EXPECT(cond, ...)                                \
    do {                                                 \
        if (!(cond)) ck_abort_msg(__VA_ARGS__);           \
    } while (0)

static OcrTensor i32_tensor(int ndim, const int64_t *shape, const int32_t *values) {
    OcrTensor t;
    ck_assert(ocr_tensor_alloc(&t, OCR_I32, ocr_cpu(), ndim, shape, OCR_MEM_DATA) == OCR_OK);
    memcpy(t.data, values, ocr_tensor_bytes(&t));
    return t;
}

typedef struct {
    OcrTensor logits, dlogits, targets, tl, il, losses, loss, infeasible;
} CtcBufs;

// Allocates the tensors for B samples; logits from `z` (f32), dlogits and outputs poisoned.
static CtcBufs ctc_bufs(int B, int T, int C, int S, const float *z, const int32_t *targets, const int32_t *tl,
                        const int32_t *il) {
    CtcBufs k;
    k.logits = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, C), z);
    k.dlogits = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, C), NULL);
    k.targets = i32_tensor(2, OCR_SHAPE(B, S), targets);
    k.tl = i32_tensor(1, OCR_SHAPE(B), tl);
    k.il = i32_tensor(1, OCR_SHAPE(B), il);
    k.losses = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(B), NULL);
    k.loss = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), NULL);
    ck_assert(ocr_tensor_alloc(&k.infeasible, OCR_I32, ocr_cpu(), 1, OCR_SHAPE(B), OCR_MEM_DATA) == OCR_OK);
    ocr_test_poison(&k.infeasible);
    return k;
}

static void ctc_bufs_free(CtcBufs *k) {
    ocr_tensor_free(&k->logits);
    ocr_tensor_free(&k->dlogits);
    ocr_tensor_free(&k->targets);
    ocr_tensor_free(&k->tl);
    ocr_tensor_free(&k->il);
    ocr_tensor_free(&k->losses);
    ocr_tensor_free(&k->loss);
    ocr_tensor_free(&k->infeasible);
}

static double run(CtcBufs *k, CtcParams p) {
    ocr_test_poison(&k->dlogits);
    return ocr_ctc_loss_forward(&k->losses, &k->loss, &k->dlogits, &k->infeasible, &k->logits, &k->targets, &k->tl,
                                &k->il, p);
}

static int close_rel(double got, double want, double rtol) {
    if (isinf(want)) return isinf(got) && (got > 0) == (want > 0);
    return fabs(got - want) <= rtol * fabs(want) + 1e-12;
}

// ---- the PyTorch reference file ---------------------------------------------------------

static uint64_t splitmix64(uint64_t x) {
    uint64_t z = x + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Same values as logit_values() in make_ctc_reference.py.
static void ref_logits(float *dst, int64_t n, uint64_t seed, int scale_exp) {
    for (int64_t i = 0; i < n; i++) {
        uint64_t k = (splitmix64(seed * 0x100000001B3ull + (uint64_t)i) >> 40) % 2049;
        dst[i] = (float)(((double)((int64_t)k - 1024) / 1024.0) * ldexp(1.0, scale_exp));
    }
}

typedef struct {
    char name[33];
    int B, T, C, S, zero_infinity, scale_exp, ncols, has_focal;
    uint64_t seed;
    int32_t *targets, *tl, *il, *cols;
    double *loss_none;
    double loss_mean, loss_sum, loss_paddle, loss_focal;
    float *grad_none, *grad_focal;
} RefCase;

static void read_exact(FILE *f, void *dst, size_t bytes) {
    ck_assert_msg(fread(dst, 1, bytes, f) == bytes, "ctc_reference.bin is truncated");
}

static void *read_array(FILE *f, size_t n, size_t elem) {
    void *p = malloc(n * elem + 1);
    ck_assert(p != NULL);
    read_exact(f, p, n * elem);
    return p;
}

// Reads every case (the file is little-endian; so are the machines we build for).
static RefCase *load_reference(int *count) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/ctc/ctc_reference.bin", OCR_SOURCE_DIR);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    char magic[8];
    read_exact(f, magic, 8);
    ck_assert_msg(memcmp(magic, "OCRCTC01", 8) == 0, "%s: bad magic", path);
    uint32_t n;
    read_exact(f, &n, 4);
    ck_assert(n > 0 && n < 100);
    RefCase *cases = calloc(n, sizeof *cases);
    for (uint32_t i = 0; i < n; i++) {
        RefCase *c = &cases[i];
        read_exact(f, c->name, 32);
        int32_t h[8];
        read_exact(f, h, sizeof h);
        c->B = h[0], c->T = h[1], c->C = h[2], c->S = h[3], c->zero_infinity = h[4], c->scale_exp = h[5];
        c->ncols = h[6], c->has_focal = h[7];
        read_exact(f, &c->seed, 8);
        c->targets = read_array(f, (size_t)c->B * c->S, 4);
        c->tl = read_array(f, c->B, 4);
        c->il = read_array(f, c->B, 4);
        c->cols = read_array(f, c->ncols, 4);
        c->loss_none = read_array(f, c->B, 8);
        double r[4];
        read_exact(f, r, sizeof r);
        c->loss_mean = r[0], c->loss_sum = r[1], c->loss_paddle = r[2], c->loss_focal = r[3];
        size_t ng = (size_t)c->B * c->T * c->ncols;
        c->grad_none = read_array(f, ng, 4);
        c->grad_focal = c->has_focal ? read_array(f, ng, 4) : NULL;
    }
    ck_assert_msg(fgetc(f) == EOF, "trailing bytes in ctc_reference.bin");
    fclose(f);
    *count = (int)n;
    return cases;
}

static void free_reference(RefCase *cases, int n) {
    for (int i = 0; i < n; i++) {
        free(cases[i].targets), free(cases[i].tl), free(cases[i].il), free(cases[i].cols);
        free(cases[i].loss_none), free(cases[i].grad_none), free(cases[i].grad_focal);
    }
    free(cases);
}

// Compares dlogits at the stored columns with ref · weight[b] · scale. The tolerance is
// 1e-5 relative plus an absolute floor of 1e-6 of the sample's weight: gradients are
// softmax − occupancy, both in [0, 1], and fp32 output cannot resolve less than that.
static double check_grad(const RefCase *c, const float *g, const float *ref, const double *weight, double scale,
                         const char *what) {
    double worst = 0.0;
    for (int b = 0; b < c->B; b++) {
        double w = weight[b] * scale;
        for (int t = 0; t < c->T; t++)
            for (int k = 0; k < c->ncols; k++) {
                double want = (double)ref[((size_t)b * c->T + t) * c->ncols + k] * w;
                double got = g[((size_t)b * c->T + t) * c->C + c->cols[k]];
                if (isnan(want)) {
                    EXPECT(isnan(got), "%s %s: b=%d t=%d c=%d want NaN got %g", c->name, what, b, t,
                                  c->cols[k], got);
                    continue;
                }
                double err = fabs(got - want), tol = 1e-5 * fabs(want) + 1e-6 * fabs(w);
                EXPECT(err <= tol, "%s %s: b=%d t=%d c=%d got %.9g want %.9g", c->name, what, b, t, c->cols[k],
                              got, want);
                if (err / (fabs(w) + 1e-300) > worst) worst = err / fabs(w);
            }
        // Every row of a feasible sample sums to 0 (softmax and occupancy both sum to 1):
        // covers the columns that are not stored for the large-C cases.
        if (isfinite(c->loss_none[b]) || c->zero_infinity)
            for (int t = 0; t < c->T; t++) {
                double s = 0.0;
                for (int k = 0; k < c->C; k++) {
                    float v = g[((size_t)b * c->T + t) * c->C + k];
                    EXPECT(isfinite(v), "%s %s: non-finite gradient at b=%d t=%d c=%d", c->name, what, b, t, k);
                    s += v;
                }
                EXPECT(fabs(s) <= 1e-5 * fabs(w), "%s %s: row b=%d t=%d sums to %g", c->name, what, b, t, s);
            }
    }
    return worst;
}

START_TEST(test_against_pytorch) {
    int n;
    RefCase *cases = load_reference(&n);
    for (int i = 0; i < n; i++) {
        RefCase *c = &cases[i];
        size_t nz = (size_t)c->B * c->T * c->C;
        float *z = malloc(nz * sizeof *z);
        ref_logits(z, (int64_t)nz, c->seed, c->scale_exp);
        CtcBufs k = ctc_bufs(c->B, c->T, c->C, c->S, z, c->targets, c->tl, c->il);
        double *wt = malloc(c->B * sizeof *wt);
        const float *g = k.dlogits.data;

        struct {
            CtcReduction red;
            const char *name;
            double want;
        } reds[] = {{OCR_CTC_REDUCTION_NONE, "none", c->loss_sum},
                    {OCR_CTC_REDUCTION_SUM, "sum", c->loss_sum},
                    {OCR_CTC_REDUCTION_MEAN, "mean", c->loss_mean},
                    {OCR_CTC_REDUCTION_PADDLE, "paddle", c->loss_paddle}};
        double worst = 0.0;
        for (int r = 0; r < 4; r++) {
            // grad_scale as the AMP engine passes it (a power of two) on the PaddleOCR reduction.
            float gs = reds[r].red == OCR_CTC_REDUCTION_PADDLE ? 1024.0f : 0.0f;
            CtcParams p = {reds[r].red, c->zero_infinity, 0, gs};
            double got = run(&k, p);
            ck_assert_msg(close_rel(got, reds[r].want, 1e-5), "%s %s: loss %.12g want %.12g", c->name, reds[r].name,
                          got, reds[r].want);
            ck_assert(close_rel(((float *)k.loss.data)[0], reds[r].want, 1e-5));
            for (int b = 0; b < c->B; b++) {
                ck_assert_msg(close_rel(((float *)k.losses.data)[b], c->loss_none[b], 1e-5),
                              "%s: losses[%d] = %g want %g", c->name, b, ((float *)k.losses.data)[b], c->loss_none[b]);
                int min_frames = ocr_ctc_min_frames(c->targets + (size_t)b * c->S, c->tl[b]);
                ck_assert_int_eq(((int32_t *)k.infeasible.data)[b], min_frames > c->il[b]);
                int L = c->tl[b] > 1 ? c->tl[b] : 1;
                wt[b] = reds[r].red == OCR_CTC_REDUCTION_MEAN     ? 1.0 / ((double)c->B * L)
                        : reds[r].red == OCR_CTC_REDUCTION_PADDLE ? 1.0 / c->B
                                                                   : 1.0;
            }
            double e = check_grad(c, g, c->grad_none, wt, gs == 0.0f ? 1.0 : gs, reds[r].name);
            if (e > worst) worst = e;
        }
        if (c->has_focal) {
            CtcParams p = {OCR_CTC_REDUCTION_PADDLE, c->zero_infinity, 1, 1.0f};
            double got = run(&k, p);
            ck_assert_msg(close_rel(got, c->loss_focal, 1e-5), "%s focal: loss %.12g want %.12g", c->name, got,
                          c->loss_focal);
            for (int b = 0; b < c->B; b++) wt[b] = 1.0;
            check_grad(c, g, c->grad_focal, wt, 1.0, "focal");
        }
        printf("%-10s max |grad error| / weight = %.3g\n", c->name, worst);
        free(wt);
        free(z);
        ctc_bufs_free(&k);
    }
    free_reference(cases, n);
}
END_TEST

// ---- hand-computed cases ---------------------------------------------------------------------

START_TEST(test_tiny_hand) {
    // T=1, C=2, target [1]: p = softmax(z)_1, loss = log(1 + e^(z0 − z1)); grad = y − onehot(1).
    float z[2] = {0.3f, -0.5f};
    int32_t tg[1] = {1}, tl[1] = {1}, il[1] = {1};
    CtcBufs k = ctc_bufs(1, 1, 2, 1, z, tg, tl, il);
    double loss = run(&k, (CtcParams){0});
    double y0 = 1.0 / (1.0 + exp(-0.8)), y1 = 1.0 - y0;
    ck_assert(close_rel(loss, log(1.0 + exp(0.8)), 1e-6));
    float *g = k.dlogits.data;
    ck_assert(fabs(g[0] - y0) < 1e-6 && fabs(g[1] - (y1 - 1.0)) < 1e-6);

    // T=2, C=2, target [1]: paths (1,1), (1,b), (b,1).
    float z2[4] = {0.2f, 1.1f, -0.7f, 0.4f};
    int32_t il2[1] = {2};
    CtcBufs k2 = ctc_bufs(1, 2, 2, 1, z2, tg, tl, il2);
    double a1 = 1.0 / (1.0 + exp(0.2 - 1.1)), b1 = 1.0 / (1.0 + exp(-0.7 - 0.4));
    double a0 = 1.0 - a1, b0 = 1.0 - b1;
    double pr = a1 * b1 + a1 * b0 + a0 * b1;
    ck_assert(close_rel(run(&k2, (CtcParams){.reduction = OCR_CTC_REDUCTION_SUM}), -log(pr), 1e-6));
    // Empty target on the same logits: only (b, b).
    int32_t tl0[1] = {0};
    memcpy(k2.tl.data, tl0, sizeof tl0);
    ck_assert(close_rel(run(&k2, (CtcParams){.reduction = OCR_CTC_REDUCTION_SUM}), -log(a0 * b0), 1e-6));
    g = k2.dlogits.data;  // d(−log a0 − log b0)/dz: y − onehot(blank) per frame
    ck_assert(fabs(g[0] - (a0 - 1.0)) < 1e-6 && fabs(g[1] - a1) < 1e-6);
    ck_assert(fabs(g[2] - (b0 - 1.0)) < 1e-6 && fabs(g[3] - b1) < 1e-6);
    // PyTorch's mean divides an empty target's loss by 1, not 0.
    ck_assert(close_rel(run(&k2, (CtcParams){.reduction = OCR_CTC_REDUCTION_MEAN}), -log(a0 * b0), 1e-6));
    ctc_bufs_free(&k);
    ctc_bufs_free(&k2);
}
END_TEST

START_TEST(test_infeasible_and_defaults) {
    // T=3, target [2,2,2] needs 5 frames; sample 1 ([1]) is fine.
    const int B = 2, T = 3, C = 3, S = 3;
    float z[2 * 3 * 3];
    ocr_test_fill_uniform(z, B * T * C, 11, -2.0f, 2.0f);
    int32_t tg[6] = {2, 2, 2, 1, 0, 0}, tl[2] = {3, 1}, il[2] = {3, 3};
    CtcBufs k = ctc_bufs(B, T, C, S, z, tg, tl, il);
    ck_assert_int_eq(ocr_ctc_min_frames(tg, 3), 5);
    double l = run(&k, (CtcParams){0});
    ck_assert(isinf(l) && l > 0);
    ck_assert_int_eq(((int32_t *)k.infeasible.data)[0], 1);
    ck_assert_int_eq(((int32_t *)k.infeasible.data)[1], 0);
    float *g = k.dlogits.data;
    for (int i = 0; i < T * C; i++) ck_assert(isnan(g[i]));
    for (int i = T * C; i < B * T * C; i++) ck_assert(isfinite(g[i]));
    float g1[9];
    memcpy(g1, g + T * C, sizeof g1);

    double lz = run(&k, (CtcParams){.zero_infinity = 1});
    float l1 = ((float *)k.losses.data)[1];
    ck_assert_float_eq(((float *)k.losses.data)[0], 0.0f);
    ck_assert(close_rel(lz, l1 / 2.0, 1e-6));  // the zeroed sample still counts in the batch mean
    ck_assert_int_eq(((int32_t *)k.infeasible.data)[0], 1);
    for (int i = 0; i < T * C; i++) ck_assert_float_eq(g[i], 0.0f);
    for (int i = 0; i < T * C; i++) ck_assert(fabs(g[T * C + i] - g1[i]) <= 1e-7);

    // NULL input_lengths means T for everyone; NULL optional outputs are allowed.
    double lnull = ocr_ctc_loss_forward(NULL, NULL, NULL, NULL, &k.logits, &k.targets, &k.tl, NULL,
                                        (CtcParams){.zero_infinity = 1});
    ck_assert(lnull == lz);
    ctc_bufs_free(&k);
}
END_TEST

// ---- brute force over all alignments + finite differences ------------------------------------

typedef struct {
    int B, T, C, S;
    const int32_t *tg, *tl, *il;
    CtcReduction red;
    int focal;
} Brute;

// p(target | z) by summing over all C^Tb paths that collapse to the target.
static double brute_prob(const double *z, const int32_t *tgt, int L, int Tb, int C) {
    double lp[8][8];
    for (int t = 0; t < Tb; t++) {
        double m = z[t * C], s = 0.0;
        for (int c = 1; c < C; c++) m = z[t * C + c] > m ? z[t * C + c] : m;
        for (int c = 0; c < C; c++) s += exp(z[t * C + c] - m);
        for (int c = 0; c < C; c++) lp[t][c] = exp(z[t * C + c] - m) / s;
    }
    double total = 0.0;
    long npaths = 1;
    for (int t = 0; t < Tb; t++) npaths *= C;
    for (long code = 0; code < npaths; code++) {
        int path[8], out[8], n = 0;
        long x = code;
        for (int t = 0; t < Tb; t++) path[t] = (int)(x % C), x /= C;
        for (int t = 0; t < Tb; t++)
            if (path[t] != 0 && (t == 0 || path[t] != path[t - 1])) out[n++] = path[t];
        if (n != L) continue;
        int ok = 1;
        for (int j = 0; j < L; j++) ok &= out[j] == tgt[j];
        if (!ok) continue;
        double p = 1.0;
        for (int t = 0; t < Tb; t++) p *= lp[t][path[t]];
        total += p;
    }
    return total;
}

static double brute_loss(const double *x, void *vctx) {
    const Brute *q = vctx;
    double total = 0.0;
    for (int b = 0; b < q->B; b++) {
        double nll = -log(brute_prob(x + (size_t)b * q->T * q->C, q->tg + b * q->S, q->tl[b], q->il[b], q->C));
        if (q->focal) nll *= (1.0 - exp(-nll)) * (1.0 - exp(-nll));
        if (q->red == OCR_CTC_REDUCTION_MEAN) nll /= q->tl[b] > 1 ? q->tl[b] : 1;
        total += nll;
    }
    if (q->red == OCR_CTC_REDUCTION_MEAN || q->red == OCR_CTC_REDUCTION_PADDLE) total /= q->B;
    return total;
}

START_TEST(test_finite_difference) {
    // Small enough to enumerate every path: C=3, T<=6.
    const int B = 3, T = 6, C = 3, S = 3;
    int32_t tg[9] = {1, 2, 1, 2, 2, 0, 0, 0, 0}, tl[3] = {3, 2, 0}, il[3] = {6, 5, 4};
    float zf[3 * 6 * 3];
    ocr_test_fill_uniform(zf, B * T * C, 5, -1.5f, 1.5f);
    double zd[3 * 6 * 3], num[3 * 6 * 3];
    for (int i = 0; i < B * T * C; i++) zd[i] = zf[i];
    CtcBufs k = ctc_bufs(B, T, C, S, zf, tg, tl, il);
    const CtcReduction reds[3] = {OCR_CTC_REDUCTION_PADDLE, OCR_CTC_REDUCTION_MEAN, OCR_CTC_REDUCTION_SUM};
    for (int r = 0; r < 3; r++)
        for (int focal = 0; focal <= 1; focal++) {
            Brute q = {B, T, C, S, tg, tl, il, reds[r], focal};
            double got = run(&k, (CtcParams){.reduction = reds[r], .use_focal_loss = focal});
            double want = brute_loss(zd, &q);
            ck_assert_msg(close_rel(got, want, 1e-7), "red %d focal %d: %.15g vs brute force %.15g", r, focal, got,
                          want);
            ocr_test_numeric_grad(num, zd, B * T * C, brute_loss, &q, 1e-6);
            double rel = ocr_test_rel_error(k.dlogits.data, num, B * T * C);
            ck_assert_msg(rel < 1e-6, "red %d focal %d: gradient relative error %g", r, focal, rel);
            // Frames past the input length get exactly zero.
            const float *g = k.dlogits.data;
            for (int b = 0; b < B; b++)
                for (int t = il[b]; t < T; t++)
                    for (int c = 0; c < C; c++) EXPECT(g[(b * T + t) * C + c] == 0.0f, "b=%d t=%d not zero", b, t);
        }
    ctc_bufs_free(&k);
}
END_TEST

// ---- threads, dtypes ------------------------------------------------------------------------

START_TEST(test_thread_count_independent) {
    const int B = 7, T = 20, C = 50, S = 8;
    float *z = malloc(sizeof(float) * B * T * C);
    ocr_test_fill_uniform(z, B * T * C, 3, -4.0f, 4.0f);
    int32_t tg[7 * 8], tl[7], il[7];
    for (int b = 0; b < B; b++) {
        tl[b] = b;
        il[b] = T - b;
        for (int j = 0; j < S; j++) tg[b * S + j] = 1 + (b * 7 + j * 3) % (C - 1);
    }
    CtcBufs k = ctc_bufs(B, T, C, S, z, tg, tl, il);
    float *g1 = malloc(sizeof(float) * B * T * C);
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    double l1 = run(&k, (CtcParams){.use_focal_loss = 1});
    memcpy(g1, k.dlogits.data, sizeof(float) * B * T * C);
    omp_set_num_threads(3);
    double l3 = run(&k, (CtcParams){.use_focal_loss = 1});
    omp_set_num_threads(saved);
    ck_assert(l1 == l3);
    ck_assert(memcmp(g1, k.dlogits.data, sizeof(float) * B * T * C) == 0);
    free(g1);
    free(z);
    ctc_bufs_free(&k);
}
END_TEST

START_TEST(test_half_dtypes) {
    // f16 logits and dlogits: the same as the f32 op on the f16-rounded logits, rounded.
    const int B = 2, T = 5, C = 6, S = 3;
    float z[2 * 5 * 6];
    ocr_test_fill_uniform(z, B * T * C, 9, -2.0f, 2.0f);
    int32_t tg[6] = {1, 5, 5, 3, 0, 0}, tl[2] = {3, 1}, il[2] = {5, 4};
    CtcBufs k = ctc_bufs(B, T, C, S, z, tg, tl, il);
    OcrTensor zh = ocr_test_tensor(OCR_F16, 3, OCR_SHAPE(B, T, C), z);
    OcrTensor gh = ocr_test_tensor(OCR_F16, 3, OCR_SHAPE(B, T, C), NULL);
    ocr_tensor_to_f32(&zh, k.logits.data);  // f16-rounded values into the f32 logits
    double lf = run(&k, (CtcParams){0});
    double lh = ocr_ctc_loss_forward(NULL, NULL, &gh, NULL, &zh, &k.targets, &k.tl, &k.il, (CtcParams){0});
    ck_assert(lf == lh);
    float gf[2 * 5 * 6];
    ocr_tensor_to_f32(&gh, gf);
    ck_assert(ocr_test_allclose_f32(gf, k.dlogits.data, B * T * C, 1e-4, 1e-3, "f16 dlogits"));
    ocr_tensor_free(&zh);
    ocr_tensor_free(&gh);
    ctc_bufs_free(&k);
}
END_TEST

// ---- the gradient over the logits; f16/bf16 tensors without f32 copies ----------------------------

// A batch with every kind of sample: repeated labels, an empty target, a shorter input, an
// infeasible sample (NaN or zeroed gradient rows), no frames at all, plain random ones.
enum { MB = 6, MT = 12, MC = 37, MS = 5 };
static void mixed_batch(float *z, int32_t *tg, int32_t *tl, int32_t *il) {
    ocr_test_fill_uniform(z, MB * MT * MC, 17, -5.0f, 5.0f);
    memset(tg, 0, sizeof(int32_t) * MB * MS);
    for (int b = 0; b < MB; b++) {
        il[b] = MT;
        tl[b] = MS;
        for (int j = 0; j < MS; j++) tg[b * MS + j] = 1 + (b * 11 + j * 7) % (MC - 1);
    }
    tl[0] = 3, tg[0] = tg[1] = 4, tg[2] = 7;
    tl[1] = 0;
    il[2] = MT - 4;
    tl[3] = 4, il[3] = 5;  // four equal labels need 7 frames
    for (int j = 0; j < 4; j++) tg[3 * MS + j] = 2;
    tl[4] = 2, il[4] = 0;
}

static int same_bits(const OcrTensor *a, const OcrTensor *b) {
    return ocr_tensor_bytes(a) == ocr_tensor_bytes(b) && memcmp(a->data, b->data, ocr_tensor_bytes(a)) == 0;
}

START_TEST(test_in_place_same_bits) {
    // dlogits == logits: the gradient written over the logits has the bits of the gradient
    // written into another buffer, and the losses are the same, at any thread count.
    float z[MB * MT * MC];
    int32_t tg[MB * MS], tl[MB], il[MB];
    mixed_batch(z, tg, tl, il);
    CtcBufs k = ctc_bufs(MB, MT, MC, MS, z, tg, tl, il);
    OcrTensor zz = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(MB, MT, MC), NULL);
    OcrTensor losses = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(MB), NULL);
    OcrTensor loss = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), NULL);
    OcrTensor inf;
    ck_assert(ocr_tensor_alloc(&inf, OCR_I32, ocr_cpu(), 1, OCR_SHAPE(MB), OCR_MEM_DATA) == OCR_OK);
    const int saved = omp_get_max_threads();
    for (int threads = 1; threads <= 3; threads += 2)
        for (int v = 0; v < 8; v++) {
            CtcParams p = {(CtcReduction)(v & 3), (v >> 2) & 1, v & 1, v == 5 ? 64.0f : 0.0f};
            omp_set_num_threads(threads);
            double l1 = run(&k, p);
            memcpy(zz.data, z, sizeof z);
            ocr_test_poison(&inf);
            double l2 = ocr_ctc_loss_forward(&losses, &loss, &zz, &inf, &zz, &k.targets, &k.tl, &k.il, p);
            ck_assert_msg(memcmp(&l1, &l2, sizeof l1) == 0, "variant %d: loss %.17g vs %.17g", v, l1, l2);
            ck_assert_msg(same_bits(&zz, &k.dlogits), "variant %d, %d threads: in-place gradient differs", v, threads);
            ck_assert(same_bits(&losses, &k.losses) && same_bits(&loss, &k.loss) && same_bits(&inf, &k.infeasible));
        }
    omp_set_num_threads(saved);
    ocr_tensor_free(&zz);
    ocr_tensor_free(&losses);
    ocr_tensor_free(&loss);
    ocr_tensor_free(&inf);
    ctc_bufs_free(&k);
}
END_TEST

START_TEST(test_low_precision_same_bits) {
    // f16/bf16 logits and dlogits, apart or one tensor, and the mixed pairs: the op on the f32
    // values of the logits with its f32 gradient rounded once into dlogits' dtype, bit for bit
    // (the trainer's former path: whole f32 copies, then a cast).
    float z[MB * MT * MC], zf[MB * MT * MC], gf[MB * MT * MC];
    int32_t tg[MB * MS], tl[MB], il[MB];
    mixed_batch(z, tg, tl, il);
    const ocr_dtype_t dts[2] = {OCR_F16, OCR_BF16};
    const int saved = omp_get_max_threads();
    for (int d = 0; d < 2; d++)
        for (int zinf = 0; zinf < 2; zinf++) {
            const ocr_dtype_t dt = dts[d];
            const CtcParams p = {OCR_CTC_REDUCTION_PADDLE, zinf, 1, 1024.0f};
            omp_set_num_threads(1 + 2 * d);
            OcrTensor zh = ocr_test_tensor(dt, 3, OCR_SHAPE(MB, MT, MC), z);
            ocr_tensor_to_f32(&zh, zf);
            CtcBufs k = ctc_bufs(MB, MT, MC, MS, zf, tg, tl, il);
            const double lf = run(&k, p);
            memcpy(gf, k.dlogits.data, sizeof gf);
            OcrTensor want = ocr_test_tensor(dt, 3, OCR_SHAPE(MB, MT, MC), NULL);
            ocr_tensor_from_f32(&want, gf);  // rounded once, as the cast into dlogits does
            OcrTensor gh = ocr_test_tensor(dt, 3, OCR_SHAPE(MB, MT, MC), NULL);
            OcrTensor losses = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(MB), NULL);
            // Low precision in and out, apart.
            ocr_test_poison(&gh);
            double l = ocr_ctc_loss_forward(&losses, NULL, &gh, NULL, &zh, &k.targets, &k.tl, &k.il, p);
            ck_assert_msg(l == lf && same_bits(&gh, &want), "%s zinf %d: apart", ocr_dtype_name(dt), zinf);
            ck_assert(same_bits(&losses, &k.losses));
            // In place.
            OcrTensor zin = ocr_test_tensor(dt, 3, OCR_SHAPE(MB, MT, MC), z);
            l = ocr_ctc_loss_forward(&losses, NULL, &zin, NULL, &zin, &k.targets, &k.tl, &k.il, p);
            ck_assert_msg(l == lf && same_bits(&zin, &want), "%s zinf %d: in place", ocr_dtype_name(dt), zinf);
            ck_assert(same_bits(&losses, &k.losses));
            // Low-precision logits, f32 gradient: the f32 op's gradient itself.
            OcrTensor g32 = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(MB, MT, MC), NULL);
            l = ocr_ctc_loss_forward(NULL, NULL, &g32, NULL, &zh, &k.targets, &k.tl, &k.il, p);
            ck_assert_msg(l == lf && memcmp(g32.data, gf, sizeof gf) == 0, "%s: f32 gradient", ocr_dtype_name(dt));
            // f32 logits, low-precision gradient.
            ocr_test_poison(&gh);
            l = ocr_ctc_loss_forward(NULL, NULL, &gh, NULL, &k.logits, &k.targets, &k.tl, &k.il, p);
            ck_assert_msg(l == lf && same_bits(&gh, &want), "%s: f32 logits", ocr_dtype_name(dt));
            // The loss alone.
            l = ocr_ctc_loss_forward(&losses, NULL, NULL, NULL, &zh, &k.targets, &k.tl, &k.il, p);
            ck_assert(l == lf && same_bits(&losses, &k.losses));
            ocr_tensor_free(&zh);
            ocr_tensor_free(&want);
            ocr_tensor_free(&gh);
            ocr_tensor_free(&zin);
            ocr_tensor_free(&g32);
            ocr_tensor_free(&losses);
            ctc_bufs_free(&k);
        }
    omp_set_num_threads(saved);
}
END_TEST

// The frame loops run at the CPU's vector width (SSE2, AVX2, AVX-512): every level gives the
// same losses and gradient bits, with C = 37 (a partial vector at every width) and C = 300.
int ocr_cpu_vec_select(const char *name);  // kernels/cpu/cpu_common.h (test hook)
START_TEST(test_vector_levels_same_bits) {
    static const char *const levels[3] = {"sse2", "avx2", "avx512"};
    float z[MB * MT * MC];
    int32_t tg[MB * MS], tl[MB], il[MB];
    mixed_batch(z, tg, tl, il);
    const int wide_c = 300;
    float *zw = malloc(sizeof(float) * MB * MT * wide_c);
    ocr_test_fill_uniform(zw, MB * MT * wide_c, 23, -8.0f, 8.0f);
    const CtcParams p = {OCR_CTC_REDUCTION_PADDLE, 1, 0, 1.0f};
    for (int wide = 0; wide < 2; wide++) {
        const int C = wide ? wide_c : MC;
        CtcBufs ref = ctc_bufs(MB, MT, C, MS, wide ? zw : z, tg, tl, il);
        ck_assert(ocr_cpu_vec_select("sse2"));
        const double l0 = run(&ref, p);
        int compared = 0;
        for (int lv = 1; lv < 3; lv++) {
            if (!ocr_cpu_vec_select(levels[lv])) continue;
            CtcBufs k = ctc_bufs(MB, MT, C, MS, wide ? zw : z, tg, tl, il);
            const double l = run(&k, p);
            ck_assert_msg(l == l0 && same_bits(&k.losses, &ref.losses) && same_bits(&k.dlogits, &ref.dlogits),
                          "C = %d: %s differs from sse2", C, levels[lv]);
            ctc_bufs_free(&k);
            compared++;
        }
        if (!compared) printf("ctc: this CPU has only sse2; the levels were not compared\n");
        ctc_bufs_free(&ref);
    }
    ocr_cpu_vec_select(NULL);
    free(zw);
}
END_TEST

START_TEST(test_workspace_released) {
    float z[12];
    ocr_test_fill_uniform(z, 12, 1, -1.0f, 1.0f);
    int32_t tg[2] = {1, 2}, tl[1] = {2}, il[1] = {4};
    CtcBufs k = ctc_bufs(1, 4, 3, 2, z, tg, tl, il);
    run(&k, (CtcParams){0});
    OcrMemStats before = ocr_mem_stats(ocr_cpu());
    run(&k, (CtcParams){0});
    OcrMemStats after = ocr_mem_stats(ocr_cpu());
    // A second call reuses the cached workspace block: nothing new stays allocated.
    ck_assert_int_eq(after.current_total, before.current_total);
    ck_assert(ocr_ctc_loss_workspace_bytes(&k.logits, &k.dlogits, 2, 1) > 0);
    ctc_bufs_free(&k);
}
END_TEST

static Suite *ctc_suite(void) {
    Suite *s = suite_create("ctc");
    TCase *tc = tcase_create("ctc");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_against_pytorch);
    tcase_add_test(tc, test_tiny_hand);
    tcase_add_test(tc, test_infeasible_and_defaults);
    tcase_add_test(tc, test_finite_difference);
    tcase_add_test(tc, test_thread_count_independent);
    tcase_add_test(tc, test_half_dtypes);
    tcase_add_test(tc, test_in_place_same_bits);
    tcase_add_test(tc, test_low_precision_same_bits);
    tcase_add_test(tc, test_workspace_released);
    tcase_add_test(tc, test_vector_levels_same_bits);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(ctc_suite()); }

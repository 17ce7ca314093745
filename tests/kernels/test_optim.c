// adam_update against a double-precision reference (Adam + L2 and AdamW, several steps, lr
// schedule and grad scale), the O2 master-weight path, stochastic rounding, and the global
// gradient norm with clipping.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "kernels/ops.h"
#include "tests/common/test_util.h"

// ---- double reference -------------------------------------------------------------------
typedef struct {
    double *w, *m, *v;
    int64_t n;
} RefAdam;

static void ref_step(RefAdam *r, const double *g_raw, const AdamParams *p) {
    double bc1 = 1 - pow(p->beta1, (double)p->step), bc2 = 1 - pow(p->beta2, (double)p->step);
    for (int64_t i = 0; i < r->n; i++) {
        double g = g_raw[i] * p->grad_scale;
        if (!p->decoupled) g += p->weight_decay * r->w[i];
        else r->w[i] -= (double)p->lr * p->weight_decay * r->w[i];
        r->m[i] = p->beta1 * r->m[i] + (1 - (double)p->beta1) * g;
        r->v[i] = p->beta2 * r->v[i] + (1 - (double)p->beta2) * g * g;
        double mh = r->m[i] / bc1, vh = r->v[i] / bc2;
        r->w[i] -= p->lr * mh / (sqrt(vh) + p->eps);
    }
}

typedef struct {
    const char *name;
    int decoupled;
    float weight_decay;
    float lr0, lr_growth;  // lr at step t = lr0 · (1 + lr_growth · t): a schedule/multiplier change
    float grad_scale;
    ocr_dtype_t grad_dtype;
    int64_t n;
} AdamCase;

static AdamParams case_params(const AdamCase *c, int t) {
    AdamParams p = {0};
    p.lr = c->lr0 * (1.0f + c->lr_growth * (float)t);
    p.beta1 = 0.9f;
    p.beta2 = 0.999f;
    p.eps = 1e-8f;
    p.weight_decay = c->weight_decay;
    p.decoupled = c->decoupled;
    p.step = t;
    p.grad_scale = c->grad_scale;
    return p;
}

// Gradient of step t, as stored in the grad dtype (the raw gradient is multiplied by
// 1/grad_scale so that grad·grad_scale is O(1)).
static void make_grad(OcrTensor *g, const AdamCase *c, int t) {
    int64_t n = c->n;
    float *vals = malloc((size_t)n * sizeof(float));
    ocr_test_fill_uniform(vals, n, 1000 + (uint64_t)t, -1.0f, 1.0f);
    for (int64_t i = 0; i < n; i++) vals[i] = (vals[i] + (i % 3 == 0 ? 0.3f : 0.0f)) / c->grad_scale;
    ocr_tensor_from_f32(g, vals);
    free(vals);
}

static const AdamCase kCases[] = {
    {"adam+l2", 0, 0.01f, 1e-2f, 0.0f, 1.0f, OCR_F32, 37},
    {"adamw", 1, 0.05f, 1e-2f, 0.0f, 1.0f, OCR_F32, 37},
    {"adamw lr schedule, scaled bf16 grads", 1, 0.1f, 3e-3f, 0.5f, 1.0f / 256.0f, OCR_BF16, 37},
    {"adam+l2 lr schedule, f16 grads, several chunks", 0, 1e-3f, 5e-3f, -0.1f, 1.0f / 64.0f, OCR_F16, 9001},
    {"adam no decay", 0, 0.0f, 1e-1f, 0.0f, 1.0f, OCR_F32, 11},
};
#define NCASES ((int)(sizeof kCases / sizeof kCases[0]))
#define STEPS 6

START_TEST(test_adam_vs_reference) {
    for (int k = 0; k < NCASES; k++) {
        const AdamCase *c = &kCases[k];
        int64_t n = c->n;
        float *w0 = malloc((size_t)n * sizeof(float));
        ocr_test_fill_uniform(w0, n, 7 + k, -2.0f, 2.0f);
        OcrTensor w = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), w0);
        OcrTensor m = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), NULL);
        OcrTensor v = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), NULL);
        OcrTensor g = ocr_test_tensor(c->grad_dtype, 1, OCR_SHAPE(n), NULL);
        ocr_tensor_fill(&m, 0.0f);
        ocr_tensor_fill(&v, 0.0f);
        RefAdam r = {calloc((size_t)n, 8), calloc((size_t)n, 8), calloc((size_t)n, 8), n};
        double *gd = malloc((size_t)n * 8);
        for (int64_t i = 0; i < n; i++) r.w[i] = w0[i];
        for (int t = 1; t <= STEPS; t++) {
            AdamParams p = case_params(c, t);
            make_grad(&g, c, t);
            for (int64_t i = 0; i < n; i++) gd[i] = ocr_tensor_get_f32(&g, i);
            ocr_adam_update(&w, NULL, &m, &v, &g, p);
            ref_step(&r, gd, &p);
        }
        char what[128];
        snprintf(what, sizeof what, "%s: w", c->name);
        ck_assert_msg(ocr_test_allclose_f64(w.data, r.w, n, 2e-6, 1e-6, what), "%s", what);
        snprintf(what, sizeof what, "%s: m", c->name);
        ck_assert_msg(ocr_test_allclose_f64(m.data, r.m, n, 1e-7, 1e-5, what), "%s", what);
        snprintf(what, sizeof what, "%s: v", c->name);
        ck_assert_msg(ocr_test_allclose_f64(v.data, r.v, n, 1e-9, 1e-5, what), "%s", what);
        // The update moved the weights (guards against a no-op passing).
        double moved = 0;
        for (int64_t i = 0; i < n; i++) moved = fmax(moved, fabs(((float *)w.data)[i] - w0[i]));
        ck_assert_msg(moved > 1e-3, "%s: weights moved only %g", c->name, moved);
        free(w0);
        free(gd);
        free(r.w);
        free(r.m);
        free(r.v);
        ocr_tensor_free(&w);
        ocr_tensor_free(&m);
        ocr_tensor_free(&v);
        ocr_tensor_free(&g);
    }
}
END_TEST

// O2: f16/bf16 working weights with f32 master. The master follows the f32 path bit for bit
// and the working weights are the master rounded to nearest even.
START_TEST(test_adam_master_weights) {
    const ocr_dtype_t lows[2] = {OCR_BF16, OCR_F16};
    for (int k = 0; k < 2; k++) {
        for (int decoupled = 0; decoupled < 2; decoupled++) {
            AdamCase c = {"o2", decoupled, 0.02f, 1e-2f, 0.2f, 1.0f / 128.0f, lows[k], 5000};
            int64_t n = c.n;
            float *w0 = malloc((size_t)n * sizeof(float));
            ocr_test_fill_uniform(w0, n, 70 + k, -1.0f, 1.0f);
            OcrTensor wf = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), w0);
            OcrTensor master = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), w0);
            OcrTensor param = ocr_test_tensor(lows[k], 1, OCR_SHAPE(n), w0);
            OcrTensor m1 = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), NULL), v1 = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), NULL);
            OcrTensor m2 = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), NULL), v2 = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), NULL);
            OcrTensor g = ocr_test_tensor(lows[k], 1, OCR_SHAPE(n), NULL);
            ocr_tensor_fill(&m1, 0);
            ocr_tensor_fill(&v1, 0);
            ocr_tensor_fill(&m2, 0);
            ocr_tensor_fill(&v2, 0);
            for (int t = 1; t <= 4; t++) {
                AdamParams p = case_params(&c, t);
                make_grad(&g, &c, t);
                ocr_adam_update(&wf, NULL, &m1, &v1, &g, p);
                ocr_adam_update(&param, &master, &m2, &v2, &g, p);
            }
            ck_assert_msg(memcmp(wf.data, master.data, (size_t)n * 4) == 0, "%s: master differs from the f32 path",
                          ocr_dtype_name(lows[k]));
            ck_assert(memcmp(m1.data, m2.data, (size_t)n * 4) == 0);
            ck_assert(memcmp(v1.data, v2.data, (size_t)n * 4) == 0);
            double eps = ocr_test_dtype_eps(lows[k]);
            for (int64_t i = 0; i < n; i++) {
                float mw = ((float *)master.data)[i];
                uint16_t want = lows[k] == OCR_F16 ? ocr_f32_to_f16(mw) : ocr_f32_to_bf16(mw);
                ck_assert_msg(((uint16_t *)param.data)[i] == want, "%s param[%lld] not round(master)",
                              ocr_dtype_name(lows[k]), (long long)i);
                float pf = ocr_tensor_get_f32(&param, i), wfv = ((float *)wf.data)[i];
                ck_assert(fabs(pf - wfv) <= eps * fabs(wfv) + 1e-30);
            }
            free(w0);
            ocr_tensor_free(&wf);
            ocr_tensor_free(&master);
            ocr_tensor_free(&param);
            ocr_tensor_free(&m1);
            ocr_tensor_free(&v1);
            ocr_tensor_free(&m2);
            ocr_tensor_free(&v2);
            ocr_tensor_free(&g);
        }
    }
}
END_TEST

// ---- stochastic rounding ----------------------------------------------------------------------
// The two representable neighbours lo <= x <= hi of x in dtype (nearest-even rounding, then a step).
static void neighbours(ocr_dtype_t dt, float x, float *lo, float *hi) {
    uint16_t b = dt == OCR_F16 ? ocr_f32_to_f16(x) : ocr_f32_to_bf16(x);
    float r = dt == OCR_F16 ? ocr_f16_to_f32(b) : ocr_bf16_to_f32(b);
    if (r == x) {
        *lo = *hi = r;
        return;
    }
    // Moving the magnitude bits by one moves one ulp away from / towards zero.
    uint16_t other = (fabsf(r) > fabsf(x)) ? (uint16_t)(b - 1) : (uint16_t)(b + 1);
    float o = dt == OCR_F16 ? ocr_f16_to_f32(other) : ocr_bf16_to_f32(other);
    *lo = fminf(r, o);
    *hi = fmaxf(r, o);
}

// lr = 0 keeps the master exactly, so param receives SR(master) with the given seed.
static void sr_round(OcrTensor *param, OcrTensor *master, OcrTensor *m, OcrTensor *v, OcrTensor *g, uint64_t seed,
                     uint64_t stream) {
    AdamParams p = {0};
    p.lr = 0.0f;
    p.beta1 = 0.9f;
    p.beta2 = 0.999f;
    p.eps = 1e-8f;
    p.step = 1;
    p.grad_scale = 1.0f;
    p.stochastic_round_seed = seed;
    p.stochastic_round_stream = stream;
    ocr_adam_update(param, master, m, v, g, p);
}

#define SRN 64
START_TEST(test_stochastic_rounding_unbiased) {
    const ocr_dtype_t lows[2] = {OCR_BF16, OCR_F16};
    for (int k = 0; k < 2; k++) {
        float xs[SRN];
        ocr_test_fill_uniform(xs, SRN, 300 + k, -3.0f, 3.0f);
        xs[0] = 1.0f + 0.3f * (lows[k] == OCR_F16 ? ldexpf(1, -10) : ldexpf(1, -7));  // 0.3 ulp above 1
        xs[1] = -xs[0];
        xs[2] = 2.0f;  // exact: never moves
        xs[3] = 1e-3f;
        xs[4] = 3.3e-6f;  // f16 subnormal range
        xs[5] = -7.1e-7f;
        xs[6] = 65000.0f;
        OcrTensor master = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(SRN), xs);
        OcrTensor param = ocr_test_tensor(lows[k], 1, OCR_SHAPE(SRN), NULL);
        OcrTensor m = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(SRN), NULL), v = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(SRN), NULL);
        OcrTensor g = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(SRN), NULL);
        ocr_tensor_fill(&g, 0.0f);
        const int K = 3000;
        double sum[SRN] = {0};
        float lo[SRN], hi[SRN];
        for (int i = 0; i < SRN; i++) neighbours(lows[k], xs[i], &lo[i], &hi[i]);
        for (int s = 1; s <= K; s++) {
            ocr_tensor_fill(&m, 0.0f);
            ocr_tensor_fill(&v, 0.0f);
            sr_round(&param, &master, &m, &v, &g, (uint64_t)s * 7919u, 5);
            for (int i = 0; i < SRN; i++) {
                float pv = ocr_tensor_get_f32(&param, i);
                ck_assert_msg(pv == lo[i] || pv == hi[i], "%s SR(%a) = %a not a neighbour (%a, %a)",
                              ocr_dtype_name(lows[k]), (double)xs[i], (double)pv, (double)lo[i], (double)hi[i]);
                sum[i] += pv;
            }
        }
        ck_assert(memcmp(master.data, xs, sizeof xs) == 0);  // lr = 0: master unchanged
        for (int i = 0; i < SRN; i++) {
            double mean = sum[i] / K, ulp = (double)hi[i] - lo[i];
            // Var of one rounding <= ulp²/4: the mean is within 5 sd of x. Nearest rounding
            // would be off by up to ulp/2, far outside this for most values.
            ck_assert_msg(fabs(mean - xs[i]) <= 5 * ulp / (2 * sqrt((double)K)) + 1e-12,
                          "%s SR mean of %a is %a (ulp %g)", ocr_dtype_name(lows[k]), (double)xs[i], mean, ulp);
        }
        ocr_tensor_free(&master);
        ocr_tensor_free(&param);
        ocr_tensor_free(&m);
        ocr_tensor_free(&v);
        ocr_tensor_free(&g);
    }
}
END_TEST

// Same seed and stream: same bits; another seed or stream: other bits. The bf16 rule is pinned
// exactly (the CUDA twin must match it): add the low 16 bits of ocr_rng_u32(seed, stream, i).
START_TEST(test_stochastic_rounding_reproducible) {
    const int64_t n = 5000;  // crosses a kernel chunk
    float *xs = malloc((size_t)n * sizeof(float));
    ocr_test_fill_uniform(xs, n, 401, -1.0f, 1.0f);
    OcrTensor master = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), xs);
    OcrTensor a = ocr_test_tensor(OCR_BF16, 1, OCR_SHAPE(n), NULL), b = ocr_test_tensor(OCR_BF16, 1, OCR_SHAPE(n), NULL);
    OcrTensor m = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), NULL), v = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), NULL);
    OcrTensor g = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), NULL);
    ocr_tensor_fill(&g, 0.0f);
    ocr_tensor_fill(&m, 0.0f);
    ocr_tensor_fill(&v, 0.0f);
    sr_round(&a, &master, &m, &v, &g, 1234, 3);
    sr_round(&b, &master, &m, &v, &g, 1234, 3);
    ck_assert(memcmp(a.data, b.data, (size_t)n * 2) == 0);
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = ocr_f32_bits(xs[i]);
        uint32_t r = ocr_rng_u32(1234, 3, (uint64_t)i);
        uint16_t want = (uint16_t)(((u & 0x80000000u) | ((u & 0x7fffffffu) + (r & 0xffffu))) >> 16);
        ck_assert_msg(((uint16_t *)a.data)[i] == want, "bf16 SR bits at %lld", (long long)i);
    }
    int64_t diff_seed = 0, diff_stream = 0, diff_nearest = 0;
    sr_round(&b, &master, &m, &v, &g, 1235, 3);
    for (int64_t i = 0; i < n; i++) diff_seed += ((uint16_t *)a.data)[i] != ((uint16_t *)b.data)[i];
    sr_round(&b, &master, &m, &v, &g, 1234, 4);
    for (int64_t i = 0; i < n; i++) diff_stream += ((uint16_t *)a.data)[i] != ((uint16_t *)b.data)[i];
    sr_round(&b, &master, &m, &v, &g, 0, 3);  // seed 0: nearest even
    for (int64_t i = 0; i < n; i++) {
        ck_assert(((uint16_t *)b.data)[i] == ocr_f32_to_bf16(xs[i]));
        diff_nearest += ((uint16_t *)a.data)[i] != ((uint16_t *)b.data)[i];
    }
    ck_assert_msg(diff_seed > n / 10 && diff_stream > n / 10 && diff_nearest > n / 10,
                  "differences: seed %lld stream %lld nearest %lld", (long long)diff_seed, (long long)diff_stream,
                  (long long)diff_nearest);
    free(xs);
    ocr_tensor_free(&master);
    ocr_tensor_free(&a);
    ocr_tensor_free(&b);
    ocr_tensor_free(&m);
    ocr_tensor_free(&v);
    ocr_tensor_free(&g);
}
END_TEST

// ---- global norm and clipping ------------------------------------------------------------------
static void make_grads(OcrTensor g[3], uint64_t seed) {
    const ocr_dtype_t dts[3] = {OCR_F32, OCR_F16, OCR_BF16};
    const int64_t sizes[3] = {10007, 300, 20000};
    for (int k = 0; k < 3; k++) {
        float *xs = malloc((size_t)sizes[k] * sizeof(float));
        ocr_test_fill_uniform(xs, sizes[k], seed + (uint64_t)k, -0.5f, 0.5f);
        g[k] = ocr_test_tensor(dts[k], 1, OCR_SHAPE(sizes[k]), xs);
        free(xs);
    }
}

static double ref_norm(OcrTensor g[3]) {
    double s = 0;
    for (int k = 0; k < 3; k++)
        for (int64_t i = 0; i < ocr_tensor_numel(&g[k]); i++) {
            double x = ocr_tensor_get_f32(&g[k], i);
            s += x * x;
        }
    return sqrt(s);
}

START_TEST(test_global_norm) {
    OcrTensor g[3];
    make_grads(g, 90);
    OcrTensor *list[4] = {&g[0], NULL, &g[1], &g[2]};  // NULL entries are skipped
    double want = ref_norm(g);
    omp_set_num_threads(1);
    double n1 = ocr_grad_global_norm(list, 4);
    omp_set_num_threads(2);
    double n2 = ocr_grad_global_norm(list, 4);
    omp_set_num_threads(3);
    double n3 = ocr_grad_global_norm(list, 4);
    ck_assert_msg(fabs(n1 - want) <= 1e-12 * want, "norm %.17g want %.17g", n1, want);
    // The partition does not depend on the thread count: bit-identical results.
    ck_assert(memcmp(&n1, &n2, 8) == 0 && memcmp(&n1, &n3, 8) == 0);
    ck_assert(ocr_grad_global_norm(list, 0) == 0.0);
    for (int k = 0; k < 3; k++) ocr_tensor_free(&g[k]);
}
END_TEST

// Hooks (not in public headers): kernels/cpu/cpu_common.c.
int ocr_cpu_vec_select(const char *name);
static const char *const VEC_LEVELS[] = {"sse2", "avx2", "avx512"};

// Σ x² in long double (64-bit significand, the terms exact): a reference for the double sums.
static double ref_sum_squares_ld(const OcrTensor *t) {
    long double s = 0;
    for (int64_t i = 0; i < ocr_tensor_numel(t); i++) {
        const long double x = ocr_tensor_get_f32(t, i);
        s += x * x;
    }
    return (double)s;
}

// The norm keeps fixed lanes and chunks (kernels/cpu/optim.c): the same bits at every vector level
// and thread count, and within a few ulps of a long double sum. Sizes cover chunk tails, lane
// tails, one partial lane group, and several chunks per thread; values span many binades so the
// terms differ widely in size.
START_TEST(test_global_norm_levels_threads) {
    const ocr_dtype_t dts[3] = {OCR_F32, OCR_F16, OCR_BF16};
    const int64_t sizes[4] = {7, 16, 3 * 8192 + 13, 100003};
    int saved = omp_get_max_threads();
    for (int k = 0; k < 3; k++)
        for (int z = 0; z < 4; z++) {
            const int64_t n = sizes[z];
            float *xs = malloc((size_t)n * sizeof(float));
            ocr_test_fill_uniform(xs, n, 300 + (uint64_t)(k * 4 + z), -1.0f, 1.0f);
            for (int64_t i = 0; i < n; i++) xs[i] *= ldexpf(1.0f, (int)(i % 23) - 11);  // 2^-11 .. 2^11
            OcrTensor g = ocr_test_tensor(dts[k], 1, OCR_SHAPE(n), xs);
            OcrTensor *list[1] = {&g};
            const double want = sqrt(ref_sum_squares_ld(&g));
            double first = 0;
            int have_first = 0;
            for (int li = 0; li < 3; li++) {
                if (!ocr_cpu_vec_select(VEC_LEVELS[li])) {
                    printf("SKIP: this CPU has no %s path\n", VEC_LEVELS[li]);
                    continue;
                }
                for (int threads = 1; threads <= 3; threads++) {
                    omp_set_num_threads(threads);
                    const double got = ocr_grad_global_norm(list, 1);
                    ck_assert_msg(fabs(got - want) <= 1e-13 * want, "%s n=%lld at %s: norm %.17g, want %.17g",
                                  ocr_dtype_name(dts[k]), (long long)n, VEC_LEVELS[li], got, want);
                    if (!have_first) first = got, have_first = 1;
                    ck_assert_msg(memcmp(&got, &first, sizeof got) == 0,
                                  "%s n=%lld: %.17g at %s with %d threads, %.17g at the first level and count",
                                  ocr_dtype_name(dts[k]), (long long)n, got, VEC_LEVELS[li], threads, first);
                }
            }
            ocr_cpu_vec_select(NULL);
            ocr_tensor_free(&g);
            free(xs);
        }
    omp_set_num_threads(saved);
}
END_TEST

// Every f16 and bf16 bit pattern, widened in registers by the norm's loops: 17 copies of a value
// x fill one lane group (the vector loop) and one tail element, and 17·x² is exact in double, so
// the norm must be sqrt(17·x²) to the bit, at every vector level (NaN stays NaN, inf stays inf).
START_TEST(test_global_norm_every_half) {
    const int64_t n = 17;
    OcrTensor g[2] = {ocr_test_tensor(OCR_F16, 1, OCR_SHAPE(n), NULL),
                      ocr_test_tensor(OCR_BF16, 1, OCR_SHAPE(n), NULL)};
    for (int li = 0; li < 3; li++) {
        if (!ocr_cpu_vec_select(VEC_LEVELS[li])) continue;
        for (int d = 0; d < 2; d++) {
            OcrTensor *list[1] = {&g[d]};
            uint16_t *h = g[d].data;
            for (uint32_t b = 0; b < 65536; b++) {
                for (int64_t i = 0; i < n; i++) h[i] = (uint16_t)b;
                const double x = d ? ocr_bf16_to_f32((uint16_t)b) : ocr_f16_to_f32((uint16_t)b);
                const double want = sqrt(17.0 * x * x), got = ocr_grad_global_norm(list, 1);
                if (isnan(want)) {
                    ck_assert_msg(isnan(got), "%s 0x%04x at %s: %.17g, want NaN", ocr_dtype_name(g[d].dtype), b,
                                  VEC_LEVELS[li], got);
                    continue;
                }
                ck_assert_msg(memcmp(&got, &want, sizeof got) == 0, "%s 0x%04x at %s: %.17g, want %.17g",
                              ocr_dtype_name(g[d].dtype), b, VEC_LEVELS[li], got, want);
            }
        }
    }
    ocr_cpu_vec_select(NULL);
    ocr_tensor_free(&g[0]);
    ocr_tensor_free(&g[1]);
}
END_TEST

START_TEST(test_clip_global_norm) {
    OcrTensor g[3], before[3];
    make_grads(g, 91);
    make_grads(before, 91);
    OcrTensor *list[3] = {&g[0], &g[1], &g[2]};
    double norm0 = ref_norm(g);  // about 47
    // Below the threshold: nothing changes.
    double r = ocr_clip_grad_global_norm(list, 3, (float)(norm0 * 1.01));
    ck_assert(fabs(r - norm0) <= 1e-12 * norm0);
    for (int k = 0; k < 3; k++) ck_assert(memcmp(g[k].data, before[k].data, ocr_tensor_bytes(&g[k])) == 0);
    // Above: every gradient scaled by max_norm / (norm + 1e-6), in its own dtype.
    const float max_norm = 5.0f;
    r = ocr_clip_grad_global_norm(list, 3, max_norm);
    ck_assert(fabs(r - norm0) <= 1e-12 * norm0);
    float f = (float)(max_norm / (norm0 + 1e-6));
    for (int k = 0; k < 3; k++)
        for (int64_t i = 0; i < ocr_tensor_numel(&g[k]); i++) {
            float x = ocr_tensor_get_f32(&before[k], i) * f;
            float want = g[k].dtype == OCR_F16 ? ocr_f16_to_f32(ocr_f32_to_f16(x))
                         : g[k].dtype == OCR_BF16 ? ocr_bf16_to_f32(ocr_f32_to_bf16(x)) : x;
            ck_assert_msg(ocr_tensor_get_f32(&g[k], i) == want, "clipped %s[%lld]", ocr_dtype_name(g[k].dtype),
                          (long long)i);
        }
    double after = ref_norm(g);
    ck_assert_msg(fabs(after - max_norm) < 1e-3 * max_norm, "norm after clipping %g", after);
    for (int k = 0; k < 3; k++) {
        ocr_tensor_free(&g[k]);
        ocr_tensor_free(&before[k]);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("kernels_optim");
    TCase *tc = tcase_create("optim");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_adam_vs_reference);
    tcase_add_test(tc, test_adam_master_weights);
    tcase_add_test(tc, test_stochastic_rounding_unbiased);
    tcase_add_test(tc, test_stochastic_rounding_reproducible);
    tcase_add_test(tc, test_global_norm);
    tcase_add_test(tc, test_global_norm_levels_threads);
    tcase_add_test(tc, test_global_norm_every_half);
    tcase_add_test(tc, test_clip_global_norm);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

// The distillation losses (kernels/ops.h, "distillation losses"): DML, KL, CTC-logit KL, DKD and
// the feature distances.
// - Against PaddleOCR's own loss classes run by paddlepaddle (tests/kernels/data/
//   distill_reference.json, written by tools/distill_reference.py): the loss and the input
//   gradients of each case, PaddleOCR's code evaluated in float64 and in float32.
// - Against central finite differences of a double-precision reference written here from the
//   formulas (independent of kernels/distill_math.h), with inputs in f32, f16 and bf16.
// - Masks that keep no row, NULL gradients, grad_scale, and the two-sided gradients.
//
// Tolerances. Our kernels load the inputs exactly, compute in double and round once into the
// output (f32 loss, gradient in its dtype), so against PaddleOCR's float64 run they agree to that
// one rounding: 2^-23 relative (two f32 ulps; a value at a rounding boundary may go either way),
// plus 1e-9 of the tensor's largest gradient for the double arithmetic of the two programs (the
// softmax backward's Σ g·p cancels to below the largest term). PaddleOCR's float32 run carries its
// own float32 rounding: its distance from its float64 run, dev = |ref32 − ref64| (recorded per
// case by the tool), bounds how far from the exact value a PaddleOCR run lands; ours lies within
// the 2^-23 above of the exact value, so |ours − ref32| <= dev + 2^-23·|ref64| must hold and does
// (the margin asserted is 2·dev, for the rounding of the dev figure itself).
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "kernels/ops.h"
#include "tests/common/test_util.h"

#define EXPECT(cond, ...)                      \
    do {                                       \
        if (!(cond)) ck_abort_msg(__VA_ARGS__); \
    } while (0)

typedef enum { K_DML, K_KL, K_CTC, K_DKD, K_DIST } Kind;

typedef struct {
    Kind kind;
    int ndim;
    int64_t shape[4];
    int use_log;
    double temperature, alpha, beta;
    int pad_id, blank;
    ocr_distance_mode_t mode;
    double delta;
    const int32_t *targets;  // one per row (KL with a mask, DKD)
} Spec;

static int64_t spec_numel(const Spec *s) {
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= s->shape[i];
    return n;
}

// ---- the double-precision reference -------------------------------------------------------------

// p = softmax(z) with z = x·inv_t, column neg negated before, 1000 taken from column sub after.
static void dsoftmax(const double *x, int64_t C, double inv_t, int64_t neg, int64_t sub, double *p, double *logp) {
    double z[4096], mx = -INFINITY, s = 0;
    ck_assert(C <= 4096);
    for (int64_t j = 0; j < C; j++) {
        z[j] = (j == neg ? -x[j] : x[j]) * inv_t - (j == sub ? 1000.0 : 0.0);
        mx = fmax(mx, z[j]);
    }
    for (int64_t j = 0; j < C; j++) s += exp(z[j] - mx);
    for (int64_t j = 0; j < C; j++) {
        if (logp) logp[j] = z[j] - mx - log(s);
        if (p) p[j] = exp(z[j] - mx - log(s));
    }
}

static int kept(const Spec *s, int64_t n) { return s->pad_id < 0 || s->targets[n] != s->pad_id; }

// The loss (the sum of the per-sample values for DML without use_log: what its backward
// differentiates).
static double ref_loss(const Spec *s, const double *a, const double *b) {
    const int64_t n = spec_numel(s), C = s->shape[s->ndim - 1], rows = n / C, B = s->shape[0];
    const double T = s->temperature, e10 = 1e-10;
    double p1[4096], p2[4096], l1[4096];
    double total = 0;
    switch (s->kind) {
    case K_DML:
        for (int64_t r = 0; r < rows; r++) {
            dsoftmax(a + r * C, C, 1, -1, -1, p1, NULL);
            dsoftmax(b + r * C, C, 1, -1, -1, p2, NULL);
            for (int64_t j = 0; j < C; j++) {
                const double q1 = p1[j] + e10, q2 = p2[j] + e10;
                if (s->use_log)
                    total += (q2 * (log(q2 + e10) - log(q1)) + q1 * (log(q1 + e10) - log(q2))) / (2.0 * B);
                else  // KLJSLoss "kl", per-sample mean over T·C, summed over samples
                    total += 0.5 *
                             (q2 * log((q2 + 1e-5) / (q1 + 1e-5) + 1e-5) + q1 * log((q1 + 1e-5) / (q2 + 1e-5) + 1e-5)) /
                             (double)(rows / B * C);
            }
        }
        return total;
    case K_KL: {
        int64_t cnt = 0;
        for (int64_t r = 0; r < rows; r++) {
            if (!kept(s, r)) continue;
            cnt++;
            dsoftmax(a + r * C, C, 1 / T, -1, -1, NULL, l1);
            dsoftmax(b + r * C, C, 1 / T, -1, -1, p2, NULL);
            for (int64_t j = 0; j < C; j++) total += p2[j] * (log(p2[j] + e10) - l1[j]);
        }
        const double den = s->pad_id < 0 ? (double)B : (double)cnt;
        return den > 0 ? T * T * total / den : 0;
    }
    case K_CTC: {
        const int64_t L = s->shape[1];
        for (int64_t bb = 0; bb < B; bb++) {
            double S[4096] = {0}, P[4096] = {0};
            for (int64_t l = 0; l < L; l++) {
                dsoftmax(a + (bb * L + l) * C, C, 1 / T, s->blank, -1, p1, NULL);
                dsoftmax(b + (bb * L + l) * C, C, 1 / T, s->blank, -1, p2, NULL);
                for (int64_t j = 0; j < C; j++) {
                    S[j] += p1[j] / L;
                    P[j] += p2[j] / L;
                }
            }
            for (int64_t j = 0; j < C; j++) total += P[j] * log((P[j] + 1e-6) / (S[j] + 1e-6) + 1e-6) / B;
        }
        return total;
    }
    case K_DKD: {
        double tc = 0, nc = 0;
        int64_t cnt = 0;
        for (int64_t r = 0; r < rows; r++) {
            if (!kept(s, r)) continue;
            cnt++;
            const int64_t g = s->targets[r];
            dsoftmax(a + r * C, C, 1 / T, -1, -1, p1, NULL);
            dsoftmax(b + r * C, C, 1 / T, -1, -1, p2, NULL);
            double so = 0, to = 0;
            for (int64_t j = 0; j < C; j++)
                if (j != g) so += p1[j], to += p2[j];
            tc += p2[g] * (log(p2[g] + e10) - log(p1[g])) + to * (log(to + e10) - log(so));
            dsoftmax(a + r * C, C, 1 / T, -1, g, NULL, l1);
            dsoftmax(b + r * C, C, 1 / T, -1, g, p2, NULL);
            for (int64_t j = 0; j < C; j++) nc += p2[j] * (log(p2[j] + e10) - l1[j]);
        }
        return cnt ? T * T * (s->alpha * tc + s->beta * nc) / cnt : 0;
    }
    case K_DIST:
        for (int64_t i = 0; i < n; i++) {
            const double d = a[i] - b[i], ad = fabs(d);
            total += s->mode == OCR_DISTANCE_L2   ? d * d
                     : s->mode == OCR_DISTANCE_L1 ? ad
                     : ad < s->delta              ? 0.5 * d * d
                                                  : s->delta * (ad - 0.5 * s->delta);
        }
        return total / n;
    }
    return NAN;
}

typedef struct {
    const Spec *s;
    double *a, *b;
    int wrt_b;
} FdCtx;

static double fd_fn(const double *x, void *vctx) {
    FdCtx *c = vctx;
    return c->wrt_b ? ref_loss(c->s, c->a, x) : ref_loss(c->s, x, c->b);
}

// ---- running the ops ------------------------------------------------------------------------------

// Forward into loss (1 or B values) and backward into ga, gb (either may be NULL: not asked for).
// Inputs a, b are f32 values rounded into dtype dt.
static void run_op(const Spec *s, ocr_dtype_t dt, const float *a, const float *b, float *loss, float *ga, float *gb,
                   float grad_scale) {
    const int64_t n = spec_numel(s), C = s->shape[s->ndim - 1], rows = n / C;
    OcrTensor ta = ocr_test_tensor(dt, s->ndim, s->shape, a), tb = ocr_test_tensor(dt, s->ndim, s->shape, b);
    OcrTensor da = ocr_test_tensor(dt, s->ndim, s->shape, NULL), db = ocr_test_tensor(dt, s->ndim, s->shape, NULL);
    const int nloss = s->kind == K_DML && !s->use_log ? (int)s->shape[0] : 1;
    OcrTensor tl = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(nloss), NULL);
    OcrTensor tt = {0};
    if (s->targets) {
        ck_assert(ocr_tensor_alloc(&tt, OCR_I32, ocr_cpu(), 1, OCR_SHAPE(rows), OCR_MEM_DATA) == OCR_OK);
        memcpy(tt.data, s->targets, (size_t)rows * sizeof(int32_t));
    }
    const OcrTensor *targets = s->targets ? &tt : NULL;
    OcrTensor *pa = ga ? &da : NULL, *pb = gb ? &db : NULL;
    switch (s->kind) {
    case K_DML: {
        DmlLossParams p = {s->use_log, grad_scale};
        ocr_dml_loss_forward(&tl, &ta, &tb, p);
        ocr_dml_loss_backward(pa, pb, &ta, &tb, p);
        break;
    }
    case K_KL: {
        KlDivLossParams p = {(float)s->temperature, s->pad_id, grad_scale};
        ocr_kl_div_loss_forward(&tl, &ta, &tb, targets, p);
        ocr_kl_div_loss_backward(pa, &ta, &tb, targets, p);
        break;
    }
    case K_CTC: {
        CtcLogitsKlParams p = {(float)s->temperature, s->blank, grad_scale};
        ocr_ctc_logits_kl_forward(&tl, &ta, &tb, p);
        ocr_ctc_logits_kl_backward(pa, &ta, &tb, p);
        break;
    }
    case K_DKD: {
        DkdLossParams p = {(float)s->temperature, (float)s->alpha, (float)s->beta, s->pad_id, grad_scale};
        ocr_dkd_loss_forward(&tl, &ta, &tb, targets, p);
        ocr_dkd_loss_backward(pa, &ta, &tb, targets, p);
        break;
    }
    case K_DIST: {
        DistanceLossParams p = {s->mode, (float)s->delta, grad_scale};
        ocr_distance_loss_forward(&tl, &ta, &tb, p);
        ocr_distance_loss_backward(pa, pb, &ta, &tb, p);
        break;
    }
    }
    memcpy(loss, tl.data, (size_t)nloss * sizeof(float));
    if (ga) ocr_tensor_to_f32(&da, ga);
    if (gb) ocr_tensor_to_f32(&db, gb);
    ocr_tensor_free(&ta), ocr_tensor_free(&tb), ocr_tensor_free(&da), ocr_tensor_free(&db), ocr_tensor_free(&tl);
    if (s->targets) ocr_tensor_free(&tt);
}

// Which inputs get a gradient: both for DML and the distance, the student (a) for the others.
static int two_sided(const Spec *s) { return s->kind == K_DML || s->kind == K_DIST; }

// ---- against PaddleOCR ---------------------------------------------------------------------------

static double *json_doubles(const cJSON *c, const char *key, int64_t *n) {
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(c, key);
    ck_assert_msg(cJSON_IsArray(arr), "reference: %s missing", key);
    *n = cJSON_GetArraySize(arr);
    double *v = malloc((size_t)(*n ? *n : 1) * sizeof(double));
    int64_t i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) v[i++] = e->valuedouble;
    return v;
}

static double json_num(const cJSON *c, const char *key, double dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, key);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

START_TEST(test_distill_paddleocr_reference) {
    const char *path = OCR_SOURCE_DIR "/tests/kernels/data/distill_reference.json";
    char *text = NULL;
    size_t size = 0;
    ck_assert_msg(ocr_read_file(path, &text, &size) == OCR_OK, "%s: %s", path, ocr_last_error());
    cJSON *root = cJSON_ParseWithLength(text, size);
    ck_assert_msg(root, "%s: not JSON", path);
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases"), *c;
    int ncases = 0;
    const double u2 = ldexp(1.0, -23);
    cJSON_ArrayForEach(c, cases) {
        const char *name = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
        const char *kind = cJSON_GetObjectItemCaseSensitive(c, "loss")->valuestring;
        const cJSON *pj = cJSON_GetObjectItemCaseSensitive(c, "params");
        Spec s = {0};
        s.kind = !strcmp(kind, "dml") ? K_DML
                 : !strcmp(kind, "kl") ? K_KL
                 : !strcmp(kind, "ctc_kl") ? K_CTC
                 : !strcmp(kind, "dkd") ? K_DKD
                                        : K_DIST;
        int64_t nd;
        double *shape = json_doubles(c, "shape", &nd);
        s.ndim = (int)nd;
        for (int i = 0; i < s.ndim; i++) s.shape[i] = (int64_t)shape[i];
        free(shape);
        s.use_log = (int)json_num(pj, "use_log", 1);
        s.temperature = json_num(pj, "temperature", 1);
        s.alpha = json_num(pj, "alpha", 1);
        s.beta = json_num(pj, "beta", 1);
        s.pad_id = (int)json_num(pj, "pad_id", -1);
        s.blank = (int)json_num(pj, "blank", 0);
        s.delta = json_num(pj, "delta", 1);
        const cJSON *mode = cJSON_GetObjectItemCaseSensitive(pj, "mode");
        s.mode = !mode ? OCR_DISTANCE_L2
                 : !strcmp(mode->valuestring, "l1") ? OCR_DISTANCE_L1
                 : !strcmp(mode->valuestring, "smooth_l1") ? OCR_DISTANCE_SMOOTH_L1
                                                             : OCR_DISTANCE_L2;
        int32_t *targets = NULL;
        if (cJSON_GetObjectItemCaseSensitive(c, "targets")) {
            int64_t nt;
            double *tv = json_doubles(c, "targets", &nt);
            targets = malloc((size_t)nt * sizeof(int32_t));
            for (int64_t i = 0; i < nt; i++) targets[i] = (int32_t)tv[i];
            free(tv);
            s.targets = targets;
        }
        int64_t n, nl;
        double *a64 = json_doubles(c, "a", &n), *b64 = json_doubles(c, "b", &n);
        double *l64 = json_doubles(c, "loss64", &nl), *l32 = json_doubles(c, "loss32", &nl);
        float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
        for (int64_t i = 0; i < n; i++) a[i] = (float)a64[i], b[i] = (float)b64[i];
        float *g[2] = {malloc((size_t)n * sizeof(float)), malloc((size_t)n * sizeof(float))};
        float loss[64];
        ck_assert(nl <= 64);
        run_op(&s, OCR_F32, a, b, loss, g[0], two_sided(&s) ? g[1] : NULL, 1.0f);
        double worst64 = 0, worst32 = 0, rel64 = 0;
        for (int64_t i = 0; i < nl; i++) {
            const double e64 = fabs(loss[i] - l64[i]), e32 = fabs(loss[i] - l32[i]), dev = fabs(l32[i] - l64[i]);
            EXPECT(e64 <= u2 * fabs(l64[i]) + 1e-12, "%s: loss %.9g, PaddleOCR float64 %.12g", name, loss[i], l64[i]);
            EXPECT(e32 <= 2 * dev + u2 * fabs(l64[i]) + 1e-12,
                   "%s: loss %.9g, PaddleOCR float32 %.9g (its own error %.3g)", name, loss[i], l32[i], dev);
            worst64 = fmax(worst64, e64), worst32 = fmax(worst32, e32), rel64 = fmax(rel64, e64 / fabs(l64[i]));
        }
        printf("%-18s loss %.9g: |ours - paddle64| %.3g (rel %.3g), |ours - paddle32| %.3g (paddle32's own %.3g)\n",
               name, loss[0], worst64, rel64, worst32, fabs(l32[0] - l64[0]));
        for (int k = 0; k < (two_sided(&s) ? 2 : 1); k++) {
            char key[32];
            snprintf(key, sizeof key, "grad%d_64", k);
            double *g64 = json_doubles(c, key, &n);
            snprintf(key, sizeof key, "grad%d_dev32", k);
            const double dev = json_num(c, key, 0);
            double mx = 0, ea = 0, er = 0;
            for (int64_t i = 0; i < n; i++) mx = fmax(mx, fabs(g64[i]));
            for (int64_t i = 0; i < n; i++) {
                const double e = fabs(g[k][i] - g64[i]);
                EXPECT(e <= u2 * fabs(g64[i]) + 1e-9 * mx,
                       "%s: gradient %d element %lld: %.9g, PaddleOCR float64 %.12g", name, k, (long long)i, g[k][i],
                       g64[i]);
                ea = fmax(ea, e);
                if (fabs(g64[i]) > 1e-3 * mx) er = fmax(er, e / fabs(g64[i]));
            }
            // Our gradient is within rounding of the exact one, PaddleOCR's float32 one within dev.
            printf("%-18s   d%s: max |ours - paddle64| %.3g (rel %.3g where |g| > 1e-3 max), paddle32's own %.3g\n",
                   name, k ? "b" : "a", ea, er, dev);
            free(g64);
        }
        free(a64), free(b64), free(l64), free(l32), free(a), free(b), free(g[0]), free(g[1]), free(targets);
        ncases++;
    }
    ck_assert_int_ge(ncases, 13);
    cJSON_Delete(root);
    free(text);
}
END_TEST

// ---- finite differences --------------------------------------------------------------------------

static const int32_t kRowTargets[12] = {4, 9, 2, 0, 0, 7, 1, 3, 8, 0, 5, 6};

static Spec spec(Kind k, int ndim, const int64_t *shape) {
    Spec s = {0};
    s.kind = k;
    s.ndim = ndim;
    for (int i = 0; i < ndim; i++) s.shape[i] = shape[i];
    s.use_log = 1;
    s.temperature = s.alpha = s.beta = s.delta = 1;
    s.pad_id = -1;
    return s;
}

static void fd_case(const Spec *s, ocr_dtype_t dt, uint64_t seed, float grad_scale, const char *what) {
    const int64_t n = spec_numel(s);
    float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
    ocr_test_fill_uniform(a, n, seed, -4, 4);
    ocr_test_fill_uniform(b, n, seed + 1, -4, 4);
    if (s->kind == K_DIST)  // keep |a − b| away from 0 and delta, where L1 / smooth L1 bend
        for (int64_t i = 0; i < n; i++) {
            const double d = fabs((double)a[i] - b[i]);
            if (d < 0.01 || fabs(d - s->delta) < 0.01) a[i] += 0.05f;
        }
    // the values as the op sees them (rounded into dt)
    OcrTensor r = ocr_test_tensor(dt, s->ndim, s->shape, a);
    ocr_tensor_to_f32(&r, a);
    ocr_tensor_free(&r);
    r = ocr_test_tensor(dt, s->ndim, s->shape, b);
    ocr_tensor_to_f32(&r, b);
    ocr_tensor_free(&r);
    double *ad = malloc((size_t)n * sizeof(double)), *bd = malloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++) ad[i] = a[i], bd[i] = b[i];
    float *ga = malloc((size_t)n * sizeof(float)), *gb = malloc((size_t)n * sizeof(float)), loss[16];
    run_op(s, dt, a, b, loss, ga, two_sided(s) ? gb : NULL, grad_scale);
    // the forward: a double computation rounded once to f32
    double want = ref_loss(s, ad, bd), got = loss[0];
    if (s->kind == K_DML && !s->use_log)
        for (int64_t i = 1; i < s->shape[0]; i++) got += loss[i];
    EXPECT(fabs(got - want) <= 4 * ocr_test_dtype_eps(OCR_F32) * (fabs(want) + 1e-6), "%s: loss %.9g, reference %.12g",
           what, got, want);
    double *num = malloc((size_t)n * sizeof(double));
    const double eps = ocr_test_dtype_eps(dt), sub = dt == OCR_F16 ? ldexp(1.0, -25) : 0.0;
    for (int side = 0; side < (two_sided(s) ? 2 : 1); side++) {
        FdCtx fc = {s, ad, bd, side};
        ocr_test_numeric_grad(num, side ? bd : ad, n, fd_fn, &fc, 1e-6);
        double mx = 0;
        for (int64_t i = 0; i < n; i++) mx = fmax(mx, fabs(num[i] *= grad_scale));
        // each element is a double value rounded once into dt; the central difference of a smooth
        // loss at h = 1e-6 is good to ~1e-9 of the largest element
        const float *g = side ? gb : ga;
        for (int64_t i = 0; i < n; i++)
            EXPECT(fabs(g[i] - num[i]) <= 2 * eps * fabs(num[i]) + 1e-7 * mx + sub * grad_scale,
                   "%s: d%s[%lld] %.9g, finite difference %.9g", what, side ? "b" : "a", (long long)i, g[i], num[i]);
    }
    free(a), free(b), free(ad), free(bd), free(ga), free(gb), free(num);
}

START_TEST(test_distill_finite_differences) {
    static const ocr_dtype_t dts[3] = {OCR_F32, OCR_F16, OCR_BF16};
    for (int k = 0; k < 3; k++) {
        const ocr_dtype_t dt = dts[k];
        char what[128];
        Spec s = spec(K_DML, 3, OCR_SHAPE(2, 3, 11));
        snprintf(what, sizeof what, "dml use_log %s", ocr_dtype_name(dt));
        fd_case(&s, dt, 11 + k, 1.0f, what);
        s.use_log = 0;
        snprintf(what, sizeof what, "dml kljs %s", ocr_dtype_name(dt));
        fd_case(&s, dt, 21 + k, 3.0f, what);

        s = spec(K_KL, 3, OCR_SHAPE(2, 3, 11));
        snprintf(what, sizeof what, "kl %s", ocr_dtype_name(dt));
        fd_case(&s, dt, 31 + k, 1.0f, what);
        s.temperature = 2.5;
        s.pad_id = 0;
        s.targets = kRowTargets;
        snprintf(what, sizeof what, "kl T 2.5 masked %s", ocr_dtype_name(dt));
        fd_case(&s, dt, 41 + k, 512.0f, what);

        s = spec(K_CTC, 3, OCR_SHAPE(2, 5, 9));
        s.temperature = 0.5;
        snprintf(what, sizeof what, "ctc_logits_kl %s", ocr_dtype_name(dt));
        fd_case(&s, dt, 51 + k, 1.0f, what);
        s.blank = -1;
        s.temperature = 1.5;
        snprintf(what, sizeof what, "ctc_logits_kl no blank T 1.5 %s", ocr_dtype_name(dt));
        fd_case(&s, dt, 61 + k, 1.0f, what);

        s = spec(K_DKD, 3, OCR_SHAPE(3, 4, 10));
        s.beta = 2;
        s.targets = kRowTargets;
        snprintf(what, sizeof what, "dkd %s", ocr_dtype_name(dt));
        fd_case(&s, dt, 71 + k, 1.0f, what);
        s.temperature = 0.7;
        s.alpha = 0.3;
        s.pad_id = 0;
        snprintf(what, sizeof what, "dkd T 0.7 masked %s", ocr_dtype_name(dt));
        fd_case(&s, dt, 81 + k, 8.0f, what);

        for (int m = 0; m < 3; m++) {
            s = spec(K_DIST, 4, OCR_SHAPE(2, 2, 3, 5));
            s.mode = (ocr_distance_mode_t)m;
            s.delta = m == 2 ? 1.5 : 1.0;
            snprintf(what, sizeof what, "distance mode %d %s", m, ocr_dtype_name(dt));
            fd_case(&s, dt, 91 + 10 * m + k, 1.0f, what);
        }
    }
}
END_TEST

// ---- masks, NULL outputs ------------------------------------------------------------------------------

// Every row padding: loss 0 and zero gradient (PaddleOCR's empty mean would be NaN).
START_TEST(test_distill_all_masked) {
    static const int32_t pads[6] = {0, 0, 0, 0, 0, 0};
    float a[6 * 7], b[6 * 7], ga[6 * 7], loss[1];
    ocr_test_fill_uniform(a, 42, 5, -2, 2);
    ocr_test_fill_uniform(b, 42, 6, -2, 2);
    Spec s = spec(K_KL, 3, OCR_SHAPE(2, 3, 7));
    s.pad_id = 0;
    s.targets = pads;
    run_op(&s, OCR_F32, a, b, loss, ga, NULL, 1.0f);
    ck_assert(loss[0] == 0.0f);
    for (int i = 0; i < 42; i++) ck_assert(ga[i] == 0.0f);
    s.kind = K_DKD;
    run_op(&s, OCR_F32, a, b, loss, ga, NULL, 1.0f);
    ck_assert(loss[0] == 0.0f);
    for (int i = 0; i < 42; i++) ck_assert(ga[i] == 0.0f);
}
END_TEST

// The two-sided losses: NULL gradients are skipped; DML's gradients swap with its inputs; the
// distance's dy is −dx.
START_TEST(test_distill_two_sided) {
    float a[2 * 3 * 6], b[2 * 3 * 6], g1[36], g2[36], h1[36], h2[36], l1[1], l2[1];
    ocr_test_fill_uniform(a, 36, 7, -3, 3);
    ocr_test_fill_uniform(b, 36, 8, -3, 3);
    Spec s = spec(K_DML, 3, OCR_SHAPE(2, 3, 6));
    run_op(&s, OCR_F32, a, b, l1, g1, g2, 1.0f);
    run_op(&s, OCR_F32, b, a, l2, h1, h2, 1.0f);
    ck_assert(l1[0] == l2[0]);
    for (int i = 0; i < 36; i++) ck_assert(g1[i] == h2[i] && g2[i] == h1[i]);
    run_op(&s, OCR_F32, a, b, l1, NULL, h2, 1.0f);
    for (int i = 0; i < 36; i++) ck_assert(h2[i] == g2[i]);
    s = spec(K_DIST, 3, OCR_SHAPE(2, 3, 6));
    run_op(&s, OCR_F32, a, b, l1, g1, g2, 1.0f);
    for (int i = 0; i < 36; i++) ck_assert(g1[i] == -g2[i]);
}
END_TEST

int main(void) {
    Suite *s = suite_create("kernels_distill");
    TCase *tc = tcase_create("distill");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_distill_paddleocr_reference);
    tcase_add_test(tc, test_distill_finite_differences);
    tcase_add_test(tc, test_distill_all_masked);
    tcase_add_test(tc, test_distill_two_sided);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

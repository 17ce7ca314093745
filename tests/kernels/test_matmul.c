// matmul_batched_forward / _backward: all transposes, the small-matrix loops and the sgemm
// path, finite-difference gradients (small cases) and an analytic double reference (all),
// f16/bf16 storage.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/ops.h"
#include "tests/common/test_util.h"

typedef struct {
    int B, M, N, K, ta, tb;
    float alpha;
} MmCase;

// Cases with M·N·K >= 64³ take the sgemm path, as does B = 1.
static const MmCase cases[] = {
    {1, 1, 1, 1, 0, 0, 1.0f},    {3, 5, 4, 3, 0, 0, 1.0f},   {3, 5, 4, 3, 1, 0, 0.5f},  {3, 5, 4, 3, 0, 1, -1.0f},
    {3, 5, 4, 3, 1, 1, 2.0f},    {2, 7, 1, 6, 0, 1, 0.125f}, {1, 6, 5, 7, 1, 1, 1.0f},  {2, 70, 65, 66, 0, 0, 1.0f},
    {2, 70, 65, 66, 1, 1, 0.3f}, {2, 66, 70, 65, 0, 1, 1.0f}, {2, 65, 66, 70, 1, 0, -0.7f},
    // The small loops' register blocks: 32 columns, then 8, then single columns, rows in pairs
    // (odd M leaves one): NRTR cross-attention's shapes (Tq 11, Tk 40, head dim 32) and others.
    {3, 11, 40, 32, 0, 1, 0.25f}, {3, 11, 32, 40, 0, 0, 1.0f}, {2, 9, 45, 7, 1, 0, 0.5f}, {2, 4, 17, 5, 1, 1, -1.5f},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

typedef struct {
    const MmCase *c;
    double *a, *b, *dy;
} MmRef;

static double elem_a(const MmRef *r, int bi, int m, int k) {
    const MmCase *c = r->c;
    return r->a[(int64_t)bi * c->M * c->K + (c->ta ? k * c->M + m : m * c->K + k)];
}
static double elem_b(const MmRef *r, int bi, int k, int n) {
    const MmCase *c = r->c;
    return r->b[(int64_t)bi * c->K * c->N + (c->tb ? n * c->K + k : k * c->N + n)];
}

static void mm_ref(double *y, const MmRef *r, int absval) {
    const MmCase *c = r->c;
    for (int bi = 0; bi < c->B; bi++)
        for (int m = 0; m < c->M; m++)
            for (int n = 0; n < c->N; n++) {
                double s = 0;
                for (int k = 0; k < c->K; k++) {
                    double t = elem_a(r, bi, m, k) * elem_b(r, bi, k, n);
                    s += absval ? fabs(t) : t;
                }
                y[((int64_t)bi * c->M + m) * c->N + n] = (absval ? fabs(c->alpha) : c->alpha) * s;
            }
}

// Analytic gradients of L = Σ dy·y: dA'[m,k] = alpha Σ_n dy[m,n] B'[k,n], stored in a's layout;
// dB'[k,n] = alpha Σ_m A'[m,k] dy[m,n], stored in b's layout.
static void mm_grad_ref(double *ga, double *gb, const MmRef *r) {
    const MmCase *c = r->c;
    for (int bi = 0; bi < c->B; bi++) {
        const double *dy = r->dy + (int64_t)bi * c->M * c->N;
        for (int m = 0; m < c->M; m++)
            for (int k = 0; k < c->K; k++) {
                double s = 0;
                for (int n = 0; n < c->N; n++) s += dy[m * c->N + n] * elem_b(r, bi, k, n);
                ga[(int64_t)bi * c->M * c->K + (c->ta ? k * c->M + m : m * c->K + k)] = c->alpha * s;
            }
        for (int k = 0; k < c->K; k++)
            for (int n = 0; n < c->N; n++) {
                double s = 0;
                for (int m = 0; m < c->M; m++) s += elem_a(r, bi, m, k) * dy[m * c->N + n];
                gb[(int64_t)bi * c->K * c->N + (c->tb ? n * c->K + k : k * c->N + n)] = c->alpha * s;
            }
    }
}

static double mm_loss(const double *unused, void *ctx) {
    (void)unused;
    MmRef *r = ctx;
    int64_t ny = (int64_t)r->c->B * r->c->M * r->c->N;
    double *y = malloc(sizeof(double) * (size_t)ny);
    mm_ref(y, r, 0);
    double L = 0;
    for (int64_t i = 0; i < ny; i++) L += r->dy[i] * y[i];
    free(y);
    return L;
}

static double *to_double(const float *v, int64_t n) {
    double *d = malloc(sizeof(double) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++) d[i] = v[i];
    return d;
}

static const int64_t *a_shape(const MmCase *c, int64_t *s) {
    s[0] = c->B, s[1] = c->ta ? c->K : c->M, s[2] = c->ta ? c->M : c->K;
    return s;
}
static const int64_t *b_shape(const MmCase *c, int64_t *s) {
    s[0] = c->B, s[1] = c->tb ? c->N : c->K, s[2] = c->tb ? c->K : c->N;
    return s;
}

// Everything stored in dt; forward checked against double on the stored values, backward
// against the analytic double gradient with dt's rounding plus fp32 accumulation as tolerance.
static void run_case(const MmCase *c, ocr_dtype_t dt) {
    int64_t sa[3], sb[3];
    int64_t na = (int64_t)c->B * c->M * c->K, nb = (int64_t)c->B * c->K * c->N, ny = (int64_t)c->B * c->M * c->N;
    float *va = malloc(sizeof(float) * (size_t)na), *vb = malloc(sizeof(float) * (size_t)nb);
    float *vdy = malloc(sizeof(float) * (size_t)ny), *got = malloc(sizeof(float) * (size_t)(na + nb + ny));
    ocr_test_fill_uniform(va, na, 50 + (uint64_t)c->M, -1.0f, 1.0f);
    ocr_test_fill_uniform(vb, nb, 51 + (uint64_t)c->N, -1.0f, 1.0f);
    ocr_test_fill_uniform(vdy, ny, 52 + (uint64_t)c->K, -1.0f, 1.0f);
    OcrTensor a = ocr_test_tensor(dt, 3, a_shape(c, sa), va), b = ocr_test_tensor(dt, 3, b_shape(c, sb), vb);
    OcrTensor dy = ocr_test_tensor(dt, 3, OCR_SHAPE(c->B, c->M, c->N), vdy);
    OcrTensor y = ocr_test_tensor(dt, 3, OCR_SHAPE(c->B, c->M, c->N), NULL);
    OcrTensor da = ocr_test_tensor(dt, 3, sa, NULL), db = ocr_test_tensor(dt, 3, sb, NULL);
    ocr_tensor_to_f32(&a, va), ocr_tensor_to_f32(&b, vb), ocr_tensor_to_f32(&dy, vdy);
    MmRef r = {c, to_double(va, na), to_double(vb, nb), to_double(vdy, ny)};
    MmRef ra = {c, to_double(va, na), to_double(vb, nb), to_double(vdy, ny)};
    for (int64_t i = 0; i < na; i++) ra.a[i] = fabs(ra.a[i]);
    for (int64_t i = 0; i < nb; i++) ra.b[i] = fabs(ra.b[i]);
    for (int64_t i = 0; i < ny; i++) ra.dy[i] = fabs(ra.dy[i]);
    double eps = ocr_test_dtype_eps(dt), u = ldexp(1.0, -24);

    double *ref = malloc(sizeof(double) * (size_t)ny), *bound = malloc(sizeof(double) * (size_t)ny);
    mm_ref(ref, &r, 0);
    mm_ref(bound, &ra, 1);
    ocr_matmul_batched_forward(&y, &a, &b, c->ta, c->tb, c->alpha);
    ocr_tensor_to_f32(&y, got);
    for (int64_t i = 0; i < ny; i++) {
        double tol = eps * fabs(ref[i]) + 2.0 * (c->K + 2) * u * bound[i] + 1e-30;
        ck_assert_msg(fabs(got[i] - ref[i]) <= tol, "bmm fwd B%d %dx%dx%d ta%d tb%d %s: y[%lld] = %.9g, expected %.9g",
                      c->B, c->M, c->N, c->K, c->ta, c->tb, ocr_dtype_name(dt), (long long)i, got[i], ref[i]);
    }

    double *ga = malloc(sizeof(double) * (size_t)na), *gb = malloc(sizeof(double) * (size_t)nb);
    double *ba = malloc(sizeof(double) * (size_t)na), *bb = malloc(sizeof(double) * (size_t)nb);
    mm_grad_ref(ga, gb, &r);
    mm_grad_ref(ba, bb, &ra);
    for (int64_t i = 0; i < na; i++) ba[i] = fabs(ba[i]);
    for (int64_t i = 0; i < nb; i++) bb[i] = fabs(bb[i]);
    ocr_matmul_batched_backward(&da, &db, &dy, &a, &b, c->ta, c->tb, c->alpha);
    ocr_tensor_to_f32(&da, got);
    for (int64_t i = 0; i < na; i++) {
        double tol = eps * fabs(ga[i]) + 2.0 * (c->N + 2) * u * ba[i] + 1e-30;
        ck_assert_msg(fabs(got[i] - ga[i]) <= tol, "bmm da B%d %dx%dx%d ta%d tb%d %s: [%lld] = %.9g, expected %.9g",
                      c->B, c->M, c->N, c->K, c->ta, c->tb, ocr_dtype_name(dt), (long long)i, got[i], ga[i]);
    }
    ocr_tensor_to_f32(&db, got);
    for (int64_t i = 0; i < nb; i++) {
        double tol = eps * fabs(gb[i]) + 2.0 * (c->M + 2) * u * bb[i] + 1e-30;
        ck_assert_msg(fabs(got[i] - gb[i]) <= tol, "bmm db B%d %dx%dx%d ta%d tb%d %s: [%lld] = %.9g, expected %.9g",
                      c->B, c->M, c->N, c->K, c->ta, c->tb, ocr_dtype_name(dt), (long long)i, got[i], gb[i]);
    }

    // Small cases in f32: the analytic formulas themselves against central differences, and
    // da/db assigned (poisoned, recomputed, same values).
    if (dt == OCR_F32 && na + nb <= 400) {
        double *fa = malloc(sizeof(double) * (size_t)na), *fb = malloc(sizeof(double) * (size_t)nb);
        ocr_test_numeric_grad(fa, r.a, na, mm_loss, &r, 1e-3);
        ocr_test_numeric_grad(fb, r.b, nb, mm_loss, &r, 1e-3);
        ocr_test_poison(&da), ocr_test_poison(&db);
        ocr_matmul_batched_backward(&da, &db, &dy, &a, &b, c->ta, c->tb, c->alpha);
        double ea = ocr_test_rel_error(da.data, fa, na), eb = ocr_test_rel_error(db.data, fb, nb);
        ck_assert_msg(ea < 1e-4 && eb < 1e-4, "bmm finite differences: da rel err %g, db rel err %g", ea, eb);
        // Only one gradient requested.
        OcrTensor db2 = ocr_test_tensor(dt, 3, sb, NULL);
        ocr_matmul_batched_backward(NULL, &db2, &dy, &a, &b, c->ta, c->tb, c->alpha);
        ck_assert(ocr_test_allclose_f32(db2.data, db.data, nb, 0, 0, "db alone"));
        ocr_tensor_free(&db2);
        free(fa), free(fb);
    }

    ocr_tensor_free(&a), ocr_tensor_free(&b), ocr_tensor_free(&dy), ocr_tensor_free(&y);
    ocr_tensor_free(&da), ocr_tensor_free(&db);
    free(va), free(vb), free(vdy), free(got), free(ref), free(bound), free(ga), free(gb), free(ba), free(bb);
    free(r.a), free(r.b), free(r.dy), free(ra.a), free(ra.b), free(ra.dy);
}

START_TEST(test_matmul_f32) { run_case(&cases[_i], OCR_F32); }
END_TEST
START_TEST(test_matmul_f16) { run_case(&cases[_i], OCR_F16); }
END_TEST
START_TEST(test_matmul_bf16) { run_case(&cases[_i], OCR_BF16); }
END_TEST

#if defined(__x86_64__) && defined(__GNUC__)
// The small loops are compiled once per vector level (SSE2, AVX2, AVX-512) from one body with
// one multiply and one add per term in k order and no FMA contraction: every level this CPU
// has gives the bits of the best one, forward and backward.
START_TEST(test_small_levels_agree) {
    static const char *const levels[] = {"sse2", "avx2", "avx512"};
    const MmCase *c = &cases[_i];
    if ((int64_t)c->M * c->N * c->K >= 64 * 64 * 64 || c->B == 1) return;  // the sgemm path
    int64_t sa[3], sb[3];
    int64_t na = (int64_t)c->B * c->M * c->K, nb = (int64_t)c->B * c->K * c->N, ny = (int64_t)c->B * c->M * c->N;
    OcrTensor a = ocr_test_tensor(OCR_F32, 3, a_shape(c, sa), NULL), b = ocr_test_tensor(OCR_F32, 3, b_shape(c, sb), NULL);
    OcrTensor dy = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(c->B, c->M, c->N), NULL);
    ocr_test_fill_uniform(a.data, na, 60, -1.0f, 1.0f);
    ocr_test_fill_uniform(b.data, nb, 61, -1.0f, 1.0f);
    ocr_test_fill_uniform(dy.data, ny, 62, -1.0f, 1.0f);
    OcrTensor y[2], da[2], db[2];
    for (int k = 0; k < 2; k++) {
        y[k] = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(c->B, c->M, c->N), NULL);
        da[k] = ocr_test_tensor(OCR_F32, 3, sa, NULL), db[k] = ocr_test_tensor(OCR_F32, 3, sb, NULL);
    }
    ocr_cpu_vec_select(NULL);
    ocr_matmul_batched_forward(&y[0], &a, &b, c->ta, c->tb, c->alpha);
    ocr_matmul_batched_backward(&da[0], &db[0], &dy, &a, &b, c->ta, c->tb, c->alpha);
    for (int li = 0; li < 3; li++) {
        if (!ocr_cpu_vec_select(levels[li])) continue;
        ocr_matmul_batched_forward(&y[1], &a, &b, c->ta, c->tb, c->alpha);
        ocr_matmul_batched_backward(&da[1], &db[1], &dy, &a, &b, c->ta, c->tb, c->alpha);
        ck_assert_msg(!memcmp(y[0].data, y[1].data, (size_t)ny * sizeof(float)) &&
                          !memcmp(da[0].data, da[1].data, (size_t)na * sizeof(float)) &&
                          !memcmp(db[0].data, db[1].data, (size_t)nb * sizeof(float)),
                      "bmm B%d %dx%dx%d ta%d tb%d: %s differs from the best level", c->B, c->M, c->N, c->K, c->ta,
                      c->tb, levels[li]);
    }
    ocr_cpu_vec_select(NULL);
    for (int k = 0; k < 2; k++) ocr_tensor_free(&y[k]), ocr_tensor_free(&da[k]), ocr_tensor_free(&db[k]);
    ocr_tensor_free(&a), ocr_tensor_free(&b), ocr_tensor_free(&dy);
}
END_TEST
#endif

int main(void) {
    Suite *s = suite_create("kernels_matmul");
    TCase *tc = tcase_create("matmul_batched");
    tcase_add_loop_test(tc, test_matmul_f32, 0, NCASES);
    tcase_add_loop_test(tc, test_matmul_f16, 0, NCASES);
    tcase_add_loop_test(tc, test_matmul_bf16, 0, NCASES);
#if defined(__x86_64__) && defined(__GNUC__)
    tcase_add_loop_test(tc, test_small_levels_agree, 0, NCASES);
#endif
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

// linear_forward / linear_backward against a double-precision reference: leading dims,
// bias / no bias, finite-difference gradients, accumulation rules, f16/bf16 storage; f32 on both
// of its CPU paths (OpenBLAS sgemm and oneDNN's fp32 matmul).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "tests/common/test_util.h"

typedef struct {
    int ndim;
    int64_t lead[3];  // leading dims of inp (ndim − 1 of them)
    int IN, OUT;
    int bias;
} LinCase;

static const LinCase cases[] = {
    {2, {1}, 1, 1, 1},       {2, {7}, 5, 3, 1},      {3, {2, 3}, 5, 4, 0},
    {3, {3, 13}, 17, 9, 1},  {4, {2, 2, 3}, 8, 6, 1}, {3, {4, 40}, 64, 97, 1},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static int64_t case_rows(const LinCase *c) {
    int64_t r = 1;
    for (int i = 0; i < c->ndim - 1; i++) r *= c->lead[i];
    return r;
}

typedef struct {
    int64_t R;
    int IN, OUT;
    double *x, *w, *b, *dy;  // b may be NULL
} LinRef;

static void lin_ref(double *y, const LinRef *r, int absval) {
    for (int64_t i = 0; i < r->R; i++)
        for (int o = 0; o < r->OUT; o++) {
            double s = r->b ? (absval ? fabs(r->b[o]) : r->b[o]) : 0.0;
            for (int k = 0; k < r->IN; k++) {
                double t = r->x[i * r->IN + k] * r->w[k * r->OUT + o];
                s += absval ? fabs(t) : t;
            }
            y[i * r->OUT + o] = s;
        }
}

static double lin_loss(const double *unused, void *ctx) {
    (void)unused;
    LinRef *r = ctx;
    double *y = malloc(sizeof(double) * (size_t)(r->R * r->OUT));
    lin_ref(y, r, 0);
    double L = 0;
    for (int64_t i = 0; i < r->R * r->OUT; i++) L += r->dy[i] * y[i];
    free(y);
    return L;
}

static double *to_double(const float *v, int64_t n) {
    double *d = malloc(sizeof(double) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++) d[i] = v[i];
    return d;
}

static int64_t shape_of(const LinCase *c, int64_t *shape, int last) {
    for (int i = 0; i < c->ndim - 1; i++) shape[i] = c->lead[i];
    shape[c->ndim - 1] = last;
    return case_rows(c) * last;
}

// Forward in `dt` against the double reference on the stored values.
static void check_forward(const LinCase *c, ocr_dtype_t dt) {
    int64_t xs[4], ys[4];
    int64_t nx = shape_of(c, xs, c->IN), ny = shape_of(c, ys, c->OUT), nw = (int64_t)c->IN * c->OUT;
    float *vx = malloc(sizeof(float) * (size_t)nx), *vw = malloc(sizeof(float) * (size_t)nw);
    float *vb = malloc(sizeof(float) * (size_t)c->OUT), *got = malloc(sizeof(float) * (size_t)ny);
    ocr_test_fill_uniform(vx, nx, 10, -1.0f, 1.0f);
    ocr_test_fill_uniform(vw, nw, 11, -1.0f, 1.0f);
    ocr_test_fill_uniform(vb, c->OUT, 12, -1.0f, 1.0f);
    OcrTensor x = ocr_test_tensor(dt, c->ndim, xs, vx), w = ocr_test_tensor(dt, 2, OCR_SHAPE(c->IN, c->OUT), vw);
    OcrTensor b = ocr_test_tensor(dt, 1, OCR_SHAPE(c->OUT), vb), y = ocr_test_tensor(dt, c->ndim, ys, NULL);
    ocr_tensor_to_f32(&x, vx);
    ocr_tensor_to_f32(&w, vw);
    ocr_tensor_to_f32(&b, vb);
    LinRef r = {case_rows(c), c->IN, c->OUT, to_double(vx, nx), to_double(vw, nw), c->bias ? to_double(vb, c->OUT) : NULL,
                NULL};
    double *ref = malloc(sizeof(double) * (size_t)ny), *bound = malloc(sizeof(double) * (size_t)ny);
    lin_ref(ref, &r, 0);
    lin_ref(bound, &r, 1);
    ocr_linear_forward(&y, &x, &w, c->bias ? &b : NULL);
    ocr_tensor_to_f32(&y, got);
    double eps = ocr_test_dtype_eps(dt), u = ldexp(1.0, -24);
    for (int64_t i = 0; i < ny; i++) {
        double tol = eps * fabs(ref[i]) + 2.0 * (c->IN + 2) * u * bound[i] + 1e-30;
        ck_assert_msg(fabs(got[i] - ref[i]) <= tol, "linear fwd %s IN=%d OUT=%d: y[%lld] = %.9g, expected %.9g",
                      ocr_dtype_name(dt), c->IN, c->OUT, (long long)i, got[i], ref[i]);
    }
    ocr_tensor_free(&x), ocr_tensor_free(&w), ocr_tensor_free(&b), ocr_tensor_free(&y);
    free(vx), free(vw), free(vb), free(got), free(ref), free(bound);
    free(r.x), free(r.w), free(r.b);
}

int ocr_cpu_f32_linear_select(const char *name);  // kernels/cpu/isa.c (test hook)

// f32 runs on OpenBLAS's sgemm or oneDNN's fp32 matmul depending on the CPU
// (ocr_cpu_f32_linear_onednn): every f32 check runs on both, whatever this CPU's default is.
static const char *const F32_PATHS[2] = {"sgemm", "onednn"};
static int select_f32_path(int k) {
    if (ocr_cpu_f32_linear_select(F32_PATHS[k])) return 1;
    printf("SKIP: f32 linear path %s unavailable in this build\n", F32_PATHS[k]);
    return 0;
}

START_TEST(test_linear_forward_f32) {
    for (int k = 0; k < 2; k++)
        if (select_f32_path(k)) check_forward(&cases[_i], OCR_F32);
    ocr_cpu_f32_linear_select(NULL);
}
END_TEST
START_TEST(test_linear_forward_f16) { check_forward(&cases[_i], OCR_F16); }
END_TEST
START_TEST(test_linear_forward_bf16) { check_forward(&cases[_i], OCR_BF16); }
END_TEST

// f32 backward against central differences of L = Σ dout·out, called twice: dinp is
// assigned (same after the second call), dweight/dbias accumulate onto their start values.
static void check_backward_f32(const LinCase *c) {
    if (case_rows(c) * c->IN > 2000) return;  // finite differences stay cheap; the big case runs in the dtype test
    int64_t xs[4], ys[4];
    int64_t nx = shape_of(c, xs, c->IN), ny = shape_of(c, ys, c->OUT), nw = (int64_t)c->IN * c->OUT;
    float *vx = malloc(sizeof(float) * (size_t)nx), *vw = malloc(sizeof(float) * (size_t)nw);
    float *vb = malloc(sizeof(float) * (size_t)c->OUT), *vdy = malloc(sizeof(float) * (size_t)ny);
    float *w0 = malloc(sizeof(float) * (size_t)nw), *b0 = malloc(sizeof(float) * (size_t)c->OUT);
    ocr_test_fill_uniform(vx, nx, 20, -1.0f, 1.0f);
    ocr_test_fill_uniform(vw, nw, 21, -1.0f, 1.0f);
    ocr_test_fill_uniform(vb, c->OUT, 22, -1.0f, 1.0f);
    ocr_test_fill_uniform(vdy, ny, 23, -1.0f, 1.0f);
    ocr_test_fill_uniform(w0, nw, 24, -1.0f, 1.0f);
    ocr_test_fill_uniform(b0, c->OUT, 25, -1.0f, 1.0f);
    OcrTensor x = ocr_test_tensor(OCR_F32, c->ndim, xs, vx), w = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(c->IN, c->OUT), vw);
    OcrTensor dy = ocr_test_tensor(OCR_F32, c->ndim, ys, vdy), dx = ocr_test_tensor(OCR_F32, c->ndim, xs, NULL);
    OcrTensor dw = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(c->IN, c->OUT), w0);
    OcrTensor db = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(c->OUT), b0);

    LinRef r = {case_rows(c), c->IN, c->OUT, to_double(vx, nx), to_double(vw, nw), to_double(vb, c->OUT),
                to_double(vdy, ny)};
    double *gx = malloc(sizeof(double) * (size_t)nx), *gw = malloc(sizeof(double) * (size_t)nw);
    double *gb = malloc(sizeof(double) * (size_t)c->OUT);
    ocr_test_numeric_grad(gx, r.x, nx, lin_loss, &r, 1e-3);
    ocr_test_numeric_grad(gw, r.w, nw, lin_loss, &r, 1e-3);
    ocr_test_numeric_grad(gb, r.b, c->OUT, lin_loss, &r, 1e-3);

    ocr_linear_backward(&dx, &dw, &db, &dy, &x, &w);
    ocr_test_poison(&dx);
    ocr_linear_backward(&dx, &dw, &db, &dy, &x, &w);
    double *ew = malloc(sizeof(double) * (size_t)nw), *eb = malloc(sizeof(double) * (size_t)c->OUT);
    for (int64_t i = 0; i < nw; i++) ew[i] = w0[i] + 2.0 * gw[i];
    for (int i = 0; i < c->OUT; i++) eb[i] = b0[i] + 2.0 * gb[i];
    double ex = ocr_test_rel_error(dx.data, gx, nx), ewr = ocr_test_rel_error(dw.data, ew, nw);
    double ebr = ocr_test_rel_error(db.data, eb, c->OUT);
    ck_assert_msg(ex < 1e-4, "dinp rel err %g", ex);
    ck_assert_msg(ewr < 1e-4, "dweight (2 calls + start) rel err %g", ewr);
    ck_assert_msg(ebr < 1e-4, "dbias (2 calls + start) rel err %g", ebr);

    // NULL gradients are skipped and leave the others alone.
    OcrTensor dx2 = ocr_test_tensor(OCR_F32, c->ndim, xs, NULL);
    ocr_linear_backward(&dx2, NULL, NULL, &dy, &x, &w);
    ck_assert(ocr_test_allclose_f32(dx2.data, dx.data, nx, 0, 0, "dinp alone"));

    ocr_tensor_free(&x), ocr_tensor_free(&w), ocr_tensor_free(&dy), ocr_tensor_free(&dx), ocr_tensor_free(&dx2);
    ocr_tensor_free(&dw), ocr_tensor_free(&db);
    free(vx), free(vw), free(vb), free(vdy), free(w0), free(b0), free(gx), free(gw), free(gb), free(ew), free(eb);
    free(r.x), free(r.w), free(r.b), free(r.dy);
}

START_TEST(test_linear_backward_f32) {
    for (int k = 0; k < 2; k++)
        if (select_f32_path(k)) check_backward_f32(&cases[_i]);
    ocr_cpu_f32_linear_select(NULL);
}
END_TEST

// Backward with everything stored in dt against the f32 op on the same stored values:
// the results differ only by rounding into dt (and the accumulate's start value).
static void check_backward_lowp(const LinCase *c, ocr_dtype_t dt) {
    int64_t xs[4], ys[4];
    int64_t nx = shape_of(c, xs, c->IN), ny = shape_of(c, ys, c->OUT), nw = (int64_t)c->IN * c->OUT;
    float *vx = malloc(sizeof(float) * (size_t)nx), *vw = malloc(sizeof(float) * (size_t)nw);
    float *vdy = malloc(sizeof(float) * (size_t)ny), *w0 = malloc(sizeof(float) * (size_t)nw);
    float *b0 = malloc(sizeof(float) * (size_t)c->OUT);
    ocr_test_fill_uniform(vx, nx, 30, -1.0f, 1.0f);
    ocr_test_fill_uniform(vw, nw, 31, -1.0f, 1.0f);
    ocr_test_fill_uniform(vdy, ny, 32, -1.0f, 1.0f);
    ocr_test_fill_uniform(w0, nw, 33, -1.0f, 1.0f);
    ocr_test_fill_uniform(b0, c->OUT, 34, -1.0f, 1.0f);
    OcrTensor lx = ocr_test_tensor(dt, c->ndim, xs, vx), lw = ocr_test_tensor(dt, 2, OCR_SHAPE(c->IN, c->OUT), vw);
    OcrTensor ldy = ocr_test_tensor(dt, c->ndim, ys, vdy), ldx = ocr_test_tensor(dt, c->ndim, xs, NULL);
    OcrTensor ldw = ocr_test_tensor(dt, 2, OCR_SHAPE(c->IN, c->OUT), w0), ldb = ocr_test_tensor(dt, 1, OCR_SHAPE(c->OUT), b0);
    // f32 twins holding the stored values, and |·| twins for the error bound.
    ocr_tensor_to_f32(&lx, vx), ocr_tensor_to_f32(&lw, vw), ocr_tensor_to_f32(&ldy, vdy);
    ocr_tensor_to_f32(&ldw, w0), ocr_tensor_to_f32(&ldb, b0);
    OcrTensor fx = ocr_test_tensor(OCR_F32, c->ndim, xs, vx), fw = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(c->IN, c->OUT), vw);
    OcrTensor fdy = ocr_test_tensor(OCR_F32, c->ndim, ys, vdy), fdx = ocr_test_tensor(OCR_F32, c->ndim, xs, NULL);
    OcrTensor fdw = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(c->IN, c->OUT), w0);
    OcrTensor fdb = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(c->OUT), b0);
    for (int64_t i = 0; i < nx; i++) vx[i] = fabsf(vx[i]);
    for (int64_t i = 0; i < nw; i++) vw[i] = fabsf(vw[i]), w0[i] = fabsf(w0[i]);
    for (int64_t i = 0; i < ny; i++) vdy[i] = fabsf(vdy[i]);
    for (int i = 0; i < c->OUT; i++) b0[i] = fabsf(b0[i]);
    OcrTensor ax = ocr_test_tensor(OCR_F32, c->ndim, xs, vx), aw = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(c->IN, c->OUT), vw);
    OcrTensor ady = ocr_test_tensor(OCR_F32, c->ndim, ys, vdy), adx = ocr_test_tensor(OCR_F32, c->ndim, xs, NULL);
    OcrTensor adw = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(c->IN, c->OUT), w0);
    OcrTensor adb = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(c->OUT), b0);

    ocr_linear_backward(&ldx, &ldw, &ldb, &ldy, &lx, &lw);
    ocr_linear_backward(&fdx, &fdw, &fdb, &fdy, &fx, &fw);
    ocr_linear_backward(&adx, &adw, &adb, &ady, &ax, &aw);

    struct { OcrTensor *got, *ref, *bound; int K; const char *what; } chk[] = {
        {&ldx, &fdx, &adx, c->OUT, "dinp"}, {&ldw, &fdw, &adw, (int)case_rows(c), "dweight"},
        {&ldb, &fdb, &adb, (int)case_rows(c), "dbias"}};
    double eps = ocr_test_dtype_eps(dt), u = ldexp(1.0, -24);
    for (int k = 0; k < 3; k++) {
        int64_t n = ocr_tensor_numel(chk[k].ref);
        const float *ref = chk[k].ref->data, *bound = chk[k].bound->data;
        for (int64_t i = 0; i < n; i++) {
            double got = ocr_tensor_get_f32(chk[k].got, i);
            double tol = eps * fabs(ref[i]) + 2.0 * (chk[k].K + 2) * u * bound[i] + 1e-30;
            ck_assert_msg(fabs(got - ref[i]) <= tol, "linear bwd %s %s[%lld] = %.9g, f32 gives %.9g (tol %.3g)",
                          ocr_dtype_name(dt), chk[k].what, (long long)i, got, ref[i], tol);
        }
    }
    OcrTensor *all[] = {&lx, &lw, &ldy, &ldx, &ldw, &ldb, &fx, &fw, &fdy, &fdx, &fdw, &fdb,
                        &ax, &aw, &ady, &adx, &adw, &adb};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ocr_tensor_free(all[i]);
    free(vx), free(vw), free(vdy), free(w0), free(b0);
}

START_TEST(test_linear_backward_f16) { check_backward_lowp(&cases[_i], OCR_F16); }
END_TEST
START_TEST(test_linear_backward_bf16) { check_backward_lowp(&cases[_i], OCR_BF16); }
END_TEST

int main(void) {
    Suite *s = suite_create("kernels_linear");
    TCase *tc = tcase_create("linear");
    tcase_add_loop_test(tc, test_linear_forward_f32, 0, NCASES);
    tcase_add_loop_test(tc, test_linear_forward_f16, 0, NCASES);
    tcase_add_loop_test(tc, test_linear_forward_bf16, 0, NCASES);
    tcase_add_loop_test(tc, test_linear_backward_f32, 0, NCASES);
    tcase_add_loop_test(tc, test_linear_backward_f16, 0, NCASES);
    tcase_add_loop_test(tc, test_linear_backward_bf16, 0, NCASES);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

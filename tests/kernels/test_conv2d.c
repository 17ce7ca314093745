// conv2d_forward / ocr_conv2d_backward (NHWC, weight (OC, KH, KW, C/groups)) against a naive
// double-precision reference: dense, grouped, depthwise (3×3, 5×5, 1×3), 1×1 fast path,
// strides (2,1)/(1,2)/(2,2)/3, padding, bias or not; finite-difference gradients;
// accumulation rules; f16/bf16 storage; depthwise loops == grouped im2col path; chunking.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "tests/common/test_util.h"

// Test hooks defined in kernels/cpu/conv2d.c.
void ocr_conv2d_force_general(int force);
void ocr_conv2d_set_im2col_budget(size_t bytes);

typedef struct {
    int N, H, W, C, OC, KH, KW, sh, sw, ph, pw, G, bias;
} ConvCase;

static const ConvCase cases[] = {
    {2, 5, 7, 3, 4, 3, 3, 1, 1, 1, 1, 1, 1},       // dense 3×3, bias
    {1, 7, 6, 4, 5, 3, 3, 2, 2, 1, 1, 1, 0},       // stride (2,2)
    {2, 6, 5, 4, 6, 3, 3, 2, 1, 1, 1, 2, 1},       // stride (2,1), 2 groups
    {1, 6, 9, 8, 8, 5, 5, 1, 2, 2, 2, 4, 0},       // 5×5 stride (1,2), 4 groups
    {3, 4, 5, 5, 7, 1, 1, 1, 1, 0, 0, 1, 1},       // 1×1 fast path
    {2, 3, 4, 6, 4, 1, 1, 1, 1, 0, 0, 2, 0},       // 1×1 fast path, 2 groups
    {2, 5, 6, 3, 4, 1, 1, 2, 2, 0, 0, 1, 1},       // 1×1 stride 2: im2col, uncovered pixels
    {2, 5, 6, 3, 2, 2, 3, 1, 1, 0, 0, 1, 1},       // 2×3 kernel, no padding
    {2, 5, 6, 5, 5, 3, 3, 1, 1, 1, 1, 5, 1},       // depthwise 3×3 (channel tail only)
    {1, 6, 5, 40, 40, 3, 3, 2, 1, 1, 1, 40, 1},    // depthwise 3×3 stride (2,1), block + tail
    {1, 4, 7, 33, 33, 5, 5, 1, 2, 2, 2, 33, 0},    // depthwise 5×5 stride (1,2)
    {1, 5, 6, 64, 64, 5, 5, 2, 2, 2, 2, 64, 1},    // depthwise 5×5 stride (2,2), two blocks
    {2, 3, 5, 8, 8, 1, 3, 1, 1, 0, 1, 8, 1},       // depthwise 1×3
    {1, 6, 6, 4, 4, 3, 3, 2, 2, 0, 0, 4, 0},       // depthwise, last row/col uncovered
    {1, 3, 3, 2, 3, 3, 3, 1, 1, 2, 2, 1, 0},       // padding 2 on a 3×3 image
    {1, 7, 7, 2, 3, 2, 2, 3, 3, 0, 0, 1, 1},       // stride 3 > kernel 2
    {1, 4, 5, 3, 6, 3, 3, 1, 1, 1, 1, 3, 1},       // channel multiplier 2 (grouped, not depthwise)
    {2, 6, 160, 32, 32, 5, 5, 1, 1, 2, 2, 32, 1},  // depthwise, wide row (PP-OCR-like width)
    // PP-OCRv6 stem shapes (fewer images and columns), which take oneDNN's own convolution
    // kernels where it has them (kernels/cpu/conv2d.c: use_onednn_conv):
    {2, 16, 40, 3, 24, 3, 3, 2, 2, 1, 1, 1, 0},    // 3-channel first convolution, stride 2
    {2, 8, 20, 24, 48, 3, 3, 2, 2, 1, 1, 1, 1},    // 3×3 stride 2, bias
    {2, 9, 21, 48, 24, 2, 2, 1, 1, 0, 0, 1, 0},    // 2×2 stride 1 on a padded map
    {1, 8, 20, 96, 48, 3, 3, 2, 2, 1, 1, 1, 0},    // 3×3 stride 2 over 96 channels (K = 864)
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static int is_dw(const ConvCase *c) { return c->G == c->C && c->OC == c->C; }
static int out_h(const ConvCase *c) { return ocr_conv2d_out_size(c->H, c->KH, c->sh, c->ph); }
static int out_w(const ConvCase *c) { return ocr_conv2d_out_size(c->W, c->KW, c->sw, c->pw); }
static int64_t n_x(const ConvCase *c) { return (int64_t)c->N * c->H * c->W * c->C; }
static int64_t n_w(const ConvCase *c) { return (int64_t)c->OC * c->KH * c->KW * (c->C / c->G); }
static int64_t n_y(const ConvCase *c) { return (int64_t)c->N * out_h(c) * out_w(c) * c->OC; }
static Conv2dParams params(const ConvCase *c) {
    Conv2dParams p = {c->sh, c->sw, c->ph, c->pw, c->G};
    return p;
}

typedef struct {
    const ConvCase *c;
    double *x, *w, *b, *dy;  // b may be NULL
} ConvRef;

// y = conv(x, w) + b in double; with absval every term is |term| (error-bound scale).
static void conv_ref(double *y, const ConvRef *r, int absval) {
    const ConvCase *c = r->c;
    int Ho = out_h(c), Wo = out_w(c), Cg = c->C / c->G, OCg = c->OC / c->G;
    for (int n = 0; n < c->N; n++)
        for (int oh = 0; oh < Ho; oh++)
            for (int ow = 0; ow < Wo; ow++)
                for (int oc = 0; oc < c->OC; oc++) {
                    int grp = oc / OCg;
                    double s = r->b ? (absval ? fabs(r->b[oc]) : r->b[oc]) : 0.0;
                    for (int kh = 0; kh < c->KH; kh++) {
                        int ih = oh * c->sh - c->ph + kh;
                        if (ih < 0 || ih >= c->H) continue;
                        for (int kw = 0; kw < c->KW; kw++) {
                            int iw = ow * c->sw - c->pw + kw;
                            if (iw < 0 || iw >= c->W) continue;
                            for (int ci = 0; ci < Cg; ci++) {
                                double t = r->x[(((int64_t)n * c->H + ih) * c->W + iw) * c->C + grp * Cg + ci] *
                                           r->w[(((int64_t)oc * c->KH + kh) * c->KW + kw) * Cg + ci];
                                s += absval ? fabs(t) : t;
                            }
                        }
                    }
                    y[(((int64_t)n * Ho + oh) * Wo + ow) * c->OC + oc] = s;
                }
}

static double conv_loss(const double *unused, void *ctx) {
    (void)unused;
    ConvRef *r = ctx;
    int64_t ny = n_y(r->c);
    double *y = malloc(sizeof(double) * (size_t)(ny + 1));
    conv_ref(y, r, 0);
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

static float *random_floats(int64_t n, uint64_t seed) {
    float *v = malloc(sizeof(float) * (size_t)(n + 1));
    ocr_test_fill_uniform(v, n, seed, -1.0f, 1.0f);
    return v;
}

// The case's tensors in one dtype, initialised from f32 arrays (NULL: poisoned).
typedef struct {
    OcrTensor x, w, b, y, dy, dx, dw, db;
} ConvTensors;

static ConvTensors make_tensors(const ConvCase *c, ocr_dtype_t dt, const float *vx, const float *vw, const float *vb,
                                const float *vdy, const float *vdw0, const float *vdb0) {
    ConvTensors t;
    int Ho = out_h(c), Wo = out_w(c);
    t.x = ocr_test_tensor(dt, 4, OCR_SHAPE(c->N, c->H, c->W, c->C), vx);
    t.w = ocr_test_tensor(dt, 4, OCR_SHAPE(c->OC, c->KH, c->KW, c->C / c->G), vw);
    t.b = ocr_test_tensor(dt, 1, OCR_SHAPE(c->OC), vb);
    t.y = ocr_test_tensor(dt, 4, OCR_SHAPE(c->N, Ho, Wo, c->OC), NULL);
    t.dy = ocr_test_tensor(dt, 4, OCR_SHAPE(c->N, Ho, Wo, c->OC), vdy);
    t.dx = ocr_test_tensor(dt, 4, OCR_SHAPE(c->N, c->H, c->W, c->C), NULL);
    t.dw = ocr_test_tensor(dt, 4, OCR_SHAPE(c->OC, c->KH, c->KW, c->C / c->G), vdw0);
    t.db = ocr_test_tensor(dt, 1, OCR_SHAPE(c->OC), vdb0);
    return t;
}

static void free_tensors(ConvTensors *t) {
    OcrTensor *all[] = {&t->x, &t->w, &t->b, &t->y, &t->dy, &t->dx, &t->dw, &t->db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ocr_tensor_free(all[i]);
}

static void run_forward(const ConvCase *c, ConvTensors *t) {
    ocr_conv2d_forward(&t->y, &t->x, &t->w, c->bias ? &t->b : NULL, params(c));
}
static void run_backward(const ConvCase *c, ConvTensors *t) {
    ocr_conv2d_backward(&t->dx, &t->dw, c->bias ? &t->db : NULL, &t->dy, &t->x, &t->w, params(c));
}

// |got − ref| <= eps·|ref| + 2·(K + 2)·2⁻²⁴·bound elementwise.
static void check_close(const OcrTensor *got, const float *ref, const float *bound, double eps, int64_t K,
                        const char *what, int idx) {
    int64_t n = ocr_tensor_numel(got);
    double u = ldexp(1.0, -24);
    for (int64_t i = 0; i < n; i++) {
        double g = ocr_tensor_get_f32(got, i);
        double tol = eps * fabs(ref[i]) + 2.0 * (double)(K + 2) * u * bound[i] + 1e-30;
        ck_assert_msg(fabs(g - ref[i]) <= tol, "case %d %s %s[%lld] = %.9g, expected %.9g (tol %.3g)", idx,
                      ocr_dtype_name(got->dtype), what, (long long)i, g, ref[i], tol);
    }
}

// ---- forward against double ----------------------------------------------------------
static void check_forward(int idx, ocr_dtype_t dt) {
    const ConvCase *c = &cases[idx];
    float *vx = random_floats(n_x(c), 100), *vw = random_floats(n_w(c), 101), *vb = random_floats(c->OC, 102);
    ConvTensors t = make_tensors(c, dt, vx, vw, vb, NULL, NULL, NULL);
    ocr_tensor_to_f32(&t.x, vx), ocr_tensor_to_f32(&t.w, vw), ocr_tensor_to_f32(&t.b, vb);
    ConvRef r = {c, to_double(vx, n_x(c)), to_double(vw, n_w(c)), c->bias ? to_double(vb, c->OC) : NULL, NULL};
    int64_t ny = n_y(c);
    double *ref = malloc(sizeof(double) * (size_t)(ny + 1)), *bound = malloc(sizeof(double) * (size_t)(ny + 1));
    conv_ref(ref, &r, 0);
    conv_ref(bound, &r, 1);
    run_forward(c, &t);
    int64_t K = (int64_t)c->KH * c->KW * (c->C / c->G);
    double eps = ocr_test_dtype_eps(dt), u = ldexp(1.0, -24);
    for (int64_t i = 0; i < ny; i++) {
        double g = ocr_tensor_get_f32(&t.y, i);
        double tol = eps * fabs(ref[i]) + 2.0 * (double)(K + 2) * u * bound[i] + 1e-30;
        ck_assert_msg(fabs(g - ref[i]) <= tol, "case %d %s forward y[%lld] = %.9g, expected %.12g (tol %.3g)", idx,
                      ocr_dtype_name(dt), (long long)i, g, ref[i], tol);
    }
    free_tensors(&t);
    free(vx), free(vw), free(vb), free(ref), free(bound);
    free(r.x), free(r.w), free(r.b);
}

START_TEST(test_conv_forward_f32) { check_forward(_i, OCR_F32); }
END_TEST
START_TEST(test_conv_forward_f16) { check_forward(_i, OCR_F16); }
END_TEST
START_TEST(test_conv_forward_bf16) { check_forward(_i, OCR_BF16); }
END_TEST

// ---- f32 backward against finite differences -------------------------------------------
START_TEST(test_conv_backward_f32) {
    const ConvCase *c = &cases[_i];
    int64_t nx = n_x(c), nw = n_w(c), ny = n_y(c);
    if ((nx + nw) * ny * c->KH * c->KW > 40000000LL) return;  // keep finite differences cheap (covered by the other tests)
    float *vx = random_floats(nx, 110), *vw = random_floats(nw, 111), *vb = random_floats(c->OC, 112);
    float *vdy = random_floats(ny, 113), *w0 = random_floats(nw, 114), *b0 = random_floats(c->OC, 115);
    ConvTensors t = make_tensors(c, OCR_F32, vx, vw, vb, vdy, w0, b0);
    ConvRef r = {c, to_double(vx, nx), to_double(vw, nw), to_double(vb, c->OC), to_double(vdy, ny)};
    double *gx = malloc(sizeof(double) * (size_t)nx), *gw = malloc(sizeof(double) * (size_t)nw);
    double *gb = malloc(sizeof(double) * (size_t)c->OC);
    ocr_test_numeric_grad(gx, r.x, nx, conv_loss, &r, 1e-3);
    ocr_test_numeric_grad(gw, r.w, nw, conv_loss, &r, 1e-3);
    ocr_test_numeric_grad(gb, r.b, c->OC, conv_loss, &r, 1e-3);

    // Twice: dinp assigned (poisoned in between), dweight/dbias accumulate onto w0/b0.
    run_backward(c, &t);
    ocr_test_poison(&t.dx);
    run_backward(c, &t);
    double ex = ocr_test_rel_error(t.dx.data, gx, nx);
    for (int64_t i = 0; i < nw; i++) gw[i] = w0[i] + 2.0 * gw[i];
    for (int i = 0; i < c->OC; i++) gb[i] = b0[i] + 2.0 * gb[i];
    double ew = ocr_test_rel_error(t.dw.data, gw, nw);
    ck_assert_msg(ex < 1e-4, "case %d: dinp rel err %g", _i, ex);
    ck_assert_msg(ew < 1e-4, "case %d: dweight (start + 2 calls) rel err %g", _i, ew);
    if (c->bias) {
        double eb = ocr_test_rel_error(t.db.data, gb, c->OC);
        ck_assert_msg(eb < 1e-4, "case %d: dbias (start + 2 calls) rel err %g", _i, eb);
    } else {
        ck_assert(ocr_test_allclose_f32(t.db.data, b0, c->OC, 0, 0, "dbias untouched when not passed"));
    }

    // NULL outputs are skipped; dinp alone gives the same values.
    OcrTensor dx2 = ocr_test_tensor(OCR_F32, 4, t.x.shape, NULL);
    ocr_conv2d_backward(&dx2, NULL, NULL, &t.dy, &t.x, &t.w, params(c));
    ck_assert(ocr_test_allclose_f32(dx2.data, t.dx.data, nx, 0, 0, "dinp alone"));
    ocr_tensor_free(&dx2);
    // dweight alone and dbias alone (one call each from zero): half of what two calls added.
    OcrTensor dw2 = ocr_test_tensor(OCR_F32, 4, t.w.shape, NULL), db2 = ocr_test_tensor(OCR_F32, 1, t.b.shape, NULL);
    ocr_tensor_fill(&dw2, 0.0f), ocr_tensor_fill(&db2, 0.0f);
    ocr_conv2d_backward(NULL, &dw2, NULL, &t.dy, &t.x, &t.w, params(c));
    ocr_conv2d_backward(NULL, NULL, &db2, &t.dy, &t.x, &t.w, params(c));
    float *half_w = malloc(sizeof(float) * (size_t)nw), half_b[256];
    ck_assert(c->OC <= 256);
    for (int64_t i = 0; i < nw; i++) half_w[i] = 0.5f * (((float *)t.dw.data)[i] - w0[i]);
    for (int i = 0; i < c->OC; i++) half_b[i] = 0.5f * (((float *)t.db.data)[i] - b0[i]);
    ck_assert(ocr_test_allclose_f32(dw2.data, half_w, nw, 1e-5, 1e-4, "dweight alone"));
    if (c->bias) ck_assert(ocr_test_allclose_f32(db2.data, half_b, c->OC, 1e-5, 1e-4, "dbias alone"));
    ocr_tensor_free(&dw2), ocr_tensor_free(&db2);
    free(half_w);

    free_tensors(&t);
    free(vx), free(vw), free(vb), free(vdy), free(w0), free(b0), free(gx), free(gw), free(gb);
    free(r.x), free(r.w), free(r.b), free(r.dy);
}
END_TEST

// ---- low-precision storage against the f32 op on the same stored values ------------------
static void check_lowp(int idx, ocr_dtype_t dt) {
    const ConvCase *c = &cases[idx];
    int64_t nx = n_x(c), nw = n_w(c), ny = n_y(c);
    float *vx = random_floats(nx, 120), *vw = random_floats(nw, 121), *vb = random_floats(c->OC, 122);
    float *vdy = random_floats(ny, 123), *w0 = random_floats(nw, 124), *b0 = random_floats(c->OC, 125);
    ConvTensors lp = make_tensors(c, dt, vx, vw, vb, vdy, w0, b0);
    ocr_tensor_to_f32(&lp.x, vx), ocr_tensor_to_f32(&lp.w, vw), ocr_tensor_to_f32(&lp.b, vb);
    ocr_tensor_to_f32(&lp.dy, vdy), ocr_tensor_to_f32(&lp.dw, w0), ocr_tensor_to_f32(&lp.db, b0);
    ConvTensors f = make_tensors(c, OCR_F32, vx, vw, vb, vdy, w0, b0);
    float *arrs[] = {vx, vw, vb, vdy, w0, b0};
    int64_t lens[] = {nx, nw, c->OC, ny, nw, c->OC};
    for (int k = 0; k < 6; k++)
        for (int64_t i = 0; i < lens[k]; i++) arrs[k][i] = fabsf(arrs[k][i]);
    ConvTensors a = make_tensors(c, OCR_F32, vx, vw, vb, vdy, w0, b0);

    run_forward(c, &lp), run_forward(c, &f), run_forward(c, &a);
    run_backward(c, &lp), run_backward(c, &f), run_backward(c, &a);
    double eps = ocr_test_dtype_eps(dt);
    int64_t rows = (int64_t)c->N * out_h(c) * out_w(c);
    check_close(&lp.y, f.y.data, a.y.data, eps, (int64_t)c->KH * c->KW * (c->C / c->G), "y", idx);
    check_close(&lp.dx, f.dx.data, a.dx.data, eps, (int64_t)c->KH * c->KW * (c->OC / c->G), "dinp", idx);
    check_close(&lp.dw, f.dw.data, a.dw.data, eps, rows + 1, "dweight", idx);
    check_close(&lp.db, f.db.data, a.db.data, eps, rows + 1, "dbias", idx);
    free_tensors(&lp), free_tensors(&f), free_tensors(&a);
    free(vx), free(vw), free(vb), free(vdy), free(w0), free(b0);
}

START_TEST(test_conv_lowp_f16) { check_lowp(_i, OCR_F16); }
END_TEST
START_TEST(test_conv_lowp_bf16) { check_lowp(_i, OCR_BF16); }
END_TEST

// ---- depthwise loops == grouped im2col path ---------------------------------------------
START_TEST(test_conv_depthwise_matches_general) {
    const ConvCase *c = &cases[_i];
    if (!is_dw(c)) return;
    int64_t nx = n_x(c), nw = n_w(c), ny = n_y(c);
    float *vx = random_floats(nx, 130), *vw = random_floats(nw, 131), *vb = random_floats(c->OC, 132);
    float *vdy = random_floats(ny, 133), *w0 = random_floats(nw, 134), *b0 = random_floats(c->OC, 135);
    ConvTensors fast = make_tensors(c, OCR_F32, vx, vw, vb, vdy, w0, b0);
    ConvTensors gen = make_tensors(c, OCR_F32, vx, vw, vb, vdy, w0, b0);
    float *arrs[] = {vx, vw, vb, vdy, w0, b0};
    int64_t lens[] = {nx, nw, c->OC, ny, nw, c->OC};
    for (int k = 0; k < 6; k++)
        for (int64_t i = 0; i < lens[k]; i++) arrs[k][i] = fabsf(arrs[k][i]);
    ConvTensors a = make_tensors(c, OCR_F32, vx, vw, vb, vdy, w0, b0);
    run_forward(c, &fast), run_backward(c, &fast);
    run_forward(c, &a), run_backward(c, &a);
    ocr_conv2d_force_general(1);
    run_forward(c, &gen), run_backward(c, &gen);
    ocr_conv2d_force_general(0);
    int64_t rows = (int64_t)c->N * out_h(c) * out_w(c);
    check_close(&fast.y, gen.y.data, a.y.data, 0, c->KH * c->KW, "depthwise vs general y", _i);
    check_close(&fast.dx, gen.dx.data, a.dx.data, 0, c->KH * c->KW, "depthwise vs general dinp", _i);
    check_close(&fast.dw, gen.dw.data, a.dw.data, 0, rows + 1, "depthwise vs general dweight", _i);
    check_close(&fast.db, gen.db.data, a.db.data, 0, rows + 1, "depthwise vs general dbias", _i);
    free_tensors(&fast), free_tensors(&gen), free_tensors(&a);
    free(vx), free(vw), free(vb), free(vdy), free(w0), free(b0);
}
END_TEST

// ---- im2col batch chunking: a budget of about one image per chunk ------------------------
START_TEST(test_conv_chunked) {
    const ConvCase c = {5, 6, 7, 3, 4, 3, 3, 2, 1, 1, 1, 1, 1};
    int64_t nx = n_x(&c), nw = n_w(&c), ny = n_y(&c);
    float *vx = random_floats(nx, 140), *vw = random_floats(nw, 141), *vb = random_floats(c.OC, 142);
    float *vdy = random_floats(ny, 143), *w0 = random_floats(nw, 144), *b0 = random_floats(c.OC, 145);
    ConvTensors whole = make_tensors(&c, OCR_F32, vx, vw, vb, vdy, w0, b0);
    ConvTensors chunked = make_tensors(&c, OCR_F32, vx, vw, vb, vdy, w0, b0);
    run_forward(&c, &whole), run_backward(&c, &whole);
    size_t per_image = (size_t)out_h(&c) * out_w(&c) * c.KH * c.KW * c.C * sizeof(float);
    ocr_conv2d_set_im2col_budget(2 * per_image);  // chunks of 2, 2, 1 images
    run_forward(&c, &chunked), run_backward(&c, &chunked);
    ocr_conv2d_set_im2col_budget(0);
    ck_assert(ocr_test_allclose_f32(chunked.y.data, whole.y.data, ny, 1e-6, 1e-5, "chunked y"));
    ck_assert(ocr_test_allclose_f32(chunked.dx.data, whole.dx.data, nx, 1e-6, 1e-5, "chunked dinp"));
    ck_assert(ocr_test_allclose_f32(chunked.dw.data, whole.dw.data, nw, 1e-6, 1e-5, "chunked dweight"));
    ck_assert(ocr_test_allclose_f32(chunked.db.data, whole.db.data, c.OC, 1e-6, 1e-5, "chunked dbias"));
    // And against the double reference.
    ConvRef r = {&c, to_double(vx, nx), to_double(vw, nw), to_double(vb, c.OC), NULL};
    double *ref = malloc(sizeof(double) * (size_t)ny);
    conv_ref(ref, &r, 0);
    ck_assert(ocr_test_allclose_f64(chunked.y.data, ref, ny, 1e-5, 1e-5, "chunked y vs double"));
    free(ref), free(r.x), free(r.w), free(r.b);
    free_tensors(&whole), free_tensors(&chunked);
    free(vx), free(vw), free(vb), free(vdy), free(w0), free(b0);
}
END_TEST

START_TEST(test_conv_out_size) {
    ck_assert_int_eq(ocr_conv2d_out_size(48, 3, 2, 1), 24);
    ck_assert_int_eq(ocr_conv2d_out_size(24, 3, 1, 1), 24);
    ck_assert_int_eq(ocr_conv2d_out_size(6, 5, 2, 2), 3);
    ck_assert_int_eq(ocr_conv2d_out_size(160, 5, 2, 2), 80);
    ck_assert_int_eq(ocr_conv2d_out_size(7, 2, 3, 0), 2);
    ck_assert_int_eq(ocr_conv2d_out_size(2, 5, 1, 1), 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("kernels_conv2d");
    TCase *tc = tcase_create("conv2d");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_conv_out_size);
    tcase_add_loop_test(tc, test_conv_forward_f32, 0, NCASES);
    tcase_add_loop_test(tc, test_conv_forward_f16, 0, NCASES);
    tcase_add_loop_test(tc, test_conv_forward_bf16, 0, NCASES);
    tcase_add_loop_test(tc, test_conv_backward_f32, 0, NCASES);
    tcase_add_loop_test(tc, test_conv_lowp_f16, 0, NCASES);
    tcase_add_loop_test(tc, test_conv_lowp_bf16, 0, NCASES);
    tcase_add_loop_test(tc, test_conv_depthwise_matches_general, 0, NCASES);
    tcase_add_test(tc, test_conv_chunked);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

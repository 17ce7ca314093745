// GELU's fused multiply-adds (kernels/activation_math.h): the AVX2 and AVX-512 levels, which both
// use the FMA instruction, give the same bits through every op that evaluates GELU (the activation
// op in f32 and bf16, act and act' side by side, batch norm + GELU with its rebuilding backward,
// affine → GELU → affine) on special values, the erfc formula's a = 5 cut, the exponential's
// clamp, a dense sweep and random bit patterns; the SSE2 level, which rounds each multiply and add
// on its own, stays within the bound the two formulas' accuracy gives (Φ within 1.4e-6 relative
// of the true value at each level down to x = −7) and gives the same specials.
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "kernels/activation_math.h"
#include "kernels/cpu/rowwise.h"
#include "kernels/ops.h"
#include "tests/common/test_util.h"

int ocr_cpu_vec_select(const char *name);  // kernels/cpu/cpu_common.h (test hook)

static const char *const LEVELS[] = {"sse2", "avx2", "avx512"};
#define NLEVELS 3

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

// xorshift64*: the palette's random bit patterns (reproducible, independent of the library's RNG).
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rand32(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545f4914f6cdd1dull) >> 32);
}

// ---- GELU at every vector level -------------------------------------------------------------------

// The palette: ±0, ±inf, NaNs, the extremes, tiny and huge values, the floats around the erfc
// formula's cut (a = |x|/√2 = 5, x = ±7.0710678) and around the Gaussian kernel's clamp
// (v²/2 = 87, v = ±13.190906), a dense sweep of [−10, 10] and random bit patterns.
static int64_t gelu_palette(float *v, int64_t cap) {
    int64_t n = 0;
    const float specials[] = {0.0f,     -0.0f,    INFINITY, -INFINITY, NAN,        float_of(0x7fc12345u),
                              FLT_MAX,  -FLT_MAX, FLT_MIN,  -FLT_MIN,  0x1p-149f,  -0x1p-149f,
                              1e-20f,   -1e-20f,  1e30f,    -1e30f,    0x1p64f,    -0x1p64f,
                              1e-3f,    -1e-3f,   0.75f,    -0.75f,    0.7518f,    -0.7518f};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) v[n++] = specials[i];
    const float cuts[] = {7.0710678f, -7.0710678f, 13.190906f, -13.190906f, 5.0f, -5.0f};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        float below = cuts[i], above = cuts[i];
        v[n++] = cuts[i];
        for (int k = 0; k < 48; k++) {
            below = nextafterf(below, -INFINITY), above = nextafterf(above, INFINITY);
            v[n++] = below, v[n++] = above;
        }
    }
    for (int k = 0; k <= 20000; k++) v[n++] = -10.0f + 20.0f * (float)k / 20000.0f;
    while (n < cap) v[n++] = float_of(rand32());
    return n;
}

// One run of every op that evaluates GELU over x (and its gradient from dy): the outputs' bytes
// are concatenated into out (so that two levels can be compared with memcmp).
typedef struct {
    uint8_t *bytes;
    size_t len, cap;
} Bytes;

static void bytes_add(Bytes *b, const void *p, size_t n) {
    if (b->len + n > b->cap) {
        b->cap = 2 * (b->len + n);
        b->bytes = realloc(b->bytes, b->cap);
    }
    memcpy(b->bytes + b->len, p, n);
    b->len += n;
}
static void bytes_add_tensor(Bytes *b, const OcrTensor *t) {
    bytes_add(b, t->data, (size_t)ocr_tensor_numel(t) * ocr_dtype_size(t->dtype));
}

// The activation op (f32 and bf16: the in-register loops), the side-by-side tile, over the palette.
static void run_activation_ops(Bytes *out, const float *x, const float *dy, int64_t n) {
    float *y = malloc(sizeof(float) * (size_t)n), *dx = malloc(sizeof(float) * (size_t)n);
    ocr_cpu_act_forward_backward_tile(y, dx, dy, x, n, OCR_ACT_GELU);
    bytes_add(out, y, sizeof(float) * (size_t)n);
    bytes_add(out, dx, sizeof(float) * (size_t)n);
    free(y), free(dx);
    const ocr_dtype_t dts[2] = {OCR_F32, OCR_BF16};
    for (int k = 0; k < 2; k++) {
        OcrTensor tx = ocr_test_tensor(dts[k], 1, OCR_SHAPE(n), x), tdy = ocr_test_tensor(dts[k], 1, OCR_SHAPE(n), dy);
        OcrTensor ty = ocr_test_tensor(dts[k], 1, OCR_SHAPE(n), NULL);
        OcrTensor tdx = ocr_test_tensor(dts[k], 1, OCR_SHAPE(n), NULL);
        ocr_activation_forward(&ty, &tx, OCR_ACT_GELU);
        ocr_activation_backward(&tdx, &tdy, &tx, OCR_ACT_GELU);
        bytes_add_tensor(out, &ty);
        bytes_add_tensor(out, &tdx);
        ocr_tensor_free(&tx), ocr_tensor_free(&tdy), ocr_tensor_free(&ty), ocr_tensor_free(&tdx);
    }
}

// One float per channel, for the BN parameters, statistics and parameter gradients below.
static OcrTensor channel_tensor(int64_t C, const float *values) {
    return ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), values);
}

// Batch norm + GELU (forward, and the backward that rebuilds the output) and affine → GELU →
// affine (forward and backward), f32 and bf16, on random maps (finite: BN's statistics and the
// affine sums would carry a NaN everywhere).
static void run_fused_ops(Bytes *out) {
    const int64_t N = 2, H = 5, W = 29, C = 24, n = N * H * W * C;
    float *xs = malloc(sizeof(float) * (size_t)n), *gs = malloc(sizeof(float) * (size_t)n);
    float gam[24], bet[24], zeros[24], ones[24];
    for (int c = 0; c < C; c++) zeros[c] = 0.0f, ones[c] = 1.0f;
    ocr_test_fill_uniform(xs, n, 901, -6.0f, 6.0f);
    ocr_test_fill_uniform(gs, n, 902, -1.0f, 1.0f);
    ocr_test_fill_uniform(gam, C, 903, 0.5f, 3.0f);
    ocr_test_fill_uniform(bet, C, 904, -2.0f, 2.0f);
    const ocr_dtype_t dts[2] = {OCR_F32, OCR_BF16};
    for (int k = 0; k < 2; k++) {
        const int64_t *shape = OCR_SHAPE(N, H, W, C);
        OcrTensor x = ocr_test_tensor(dts[k], 4, shape, xs), dy = ocr_test_tensor(dts[k], 4, shape, gs);
        OcrTensor y = ocr_test_tensor(dts[k], 4, shape, NULL), y2 = ocr_test_tensor(dts[k], 4, shape, NULL);
        OcrTensor dx = ocr_test_tensor(dts[k], 4, shape, NULL);
        OcrTensor g = channel_tensor(C, gam), b = channel_tensor(C, bet);
        // save_mean, save_rstd, save_scale; running_mean, running_var; dgamma, dbeta
        OcrTensor sm = channel_tensor(C, NULL), sr = channel_tensor(C, NULL), ss = channel_tensor(C, NULL);
        OcrTensor rm = channel_tensor(C, zeros), rv = channel_tensor(C, ones);
        OcrTensor dg = channel_tensor(C, zeros), db = channel_tensor(C, zeros);
        ocr_batchnorm2d_act_forward(&y, &sm, &sr, &ss, &rm, &rv, &x, &g, &b, OCR_ACT_GELU, 0.9f, 1e-5f, 1);
        ocr_batchnorm2d_act_backward_rebuild(&y2, &dx, &dg, &db, &dy, &x, &g, &b, &sm, &sr, &ss, OCR_ACT_GELU, 1, NULL);
        bytes_add_tensor(out, &y), bytes_add_tensor(out, &y2), bytes_add_tensor(out, &dx);
        bytes_add_tensor(out, &dg), bytes_add_tensor(out, &db);

        const float s1v = 1.3f, b1v = -0.4f, s2v = 0.7f, b2v = 0.2f, zero = 0.0f;
        OcrTensor s1 = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), &s1v);
        OcrTensor b1 = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), &b1v);
        OcrTensor s2 = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), &s2v);
        OcrTensor b2 = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), &b2v);
        OcrTensor sums[4];
        for (int q = 0; q < 4; q++) sums[q] = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(1), &zero);
        ocr_affine_act_affine_forward(&y, &x, &s1, &b1, OCR_ACT_GELU, &s2, &b2);
        ocr_affine_act_affine_backward(&dx, &sums[0], &sums[1], &sums[2], &sums[3], &dy, &x, &s1, &b1, OCR_ACT_GELU,
                                       &s2, dts[k]);
        bytes_add_tensor(out, &y), bytes_add_tensor(out, &dx);
        for (int q = 0; q < 4; q++) bytes_add_tensor(out, &sums[q]), ocr_tensor_free(&sums[q]);
        OcrTensor *all[] = {&x, &dy, &y, &y2, &dx, &g, &b, &sm, &sr, &ss, &rm, &rv, &dg, &db, &s1, &b1, &s2, &b2};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ocr_tensor_free(all[i]);
    }
    free(xs), free(gs);
}

// The first byte where two runs differ, as an index into the concatenated outputs (-1: none).
static int64_t first_difference(const Bytes *a, const Bytes *b) {
    if (a->len != b->len) return 0;
    for (size_t i = 0; i < a->len; i++)
        if (a->bytes[i] != b->bytes[i]) return (int64_t)i;
    return -1;
}

START_TEST(test_gelu_fma_levels_same_bits) {
    const int64_t cap = 1 << 16;
    float *x = malloc(sizeof(float) * cap), *dy = malloc(sizeof(float) * cap);
    const int64_t n = gelu_palette(x, cap);
    for (int64_t i = 0; i < n; i++) dy[i] = 0.25f + (float)(i % 13) * 0.125f;  // finite, exact in bf16
    omp_set_num_threads(2);
    Bytes got[2] = {{0}, {0}};
    const int fma_levels[2] = {2, 1};  // avx512, avx2
    int have = 0;
    for (int k = 0; k < 2; k++) {
        if (!ocr_cpu_vec_select(LEVELS[fma_levels[k]])) {
            printf("SKIP: this CPU has no %s level\n", LEVELS[fma_levels[k]]);
            continue;
        }
        run_activation_ops(&got[have], x, dy, n);
        run_fused_ops(&got[have]);
        have++;
    }
    ocr_cpu_vec_select(NULL);
    if (have == 2) {
        const int64_t at = first_difference(&got[0], &got[1]);
        ck_assert_msg(at < 0, "GELU at avx2 differs from avx512 (byte %lld of the concatenated outputs)", (long long)at);
    }
    free(got[0].bytes), free(got[1].bytes);
    free(x), free(dy);
}
END_TEST

// SSE2 (multiply and add rounded apart) against the best level (fused): every value within the
// sum of the two formulas' errors. GELU(x) = x·Φ(x) with Φ within 1.4e-6 relative at either level
// (x > −7; below, both are x·Φ with Φ < 1e-12, far below the tolerance's absolute part), so
// |Δy| ≤ 3e-6·|y|; the slope g·(Φ + x·φ) can cancel (near x = −0.75), so its bound is absolute:
// |Δ| ≤ 3e-6·|g|·(Φ + |x|·φ) with φ's exponential within ~1e-7 relative. Non-finite results must
// be the same class.
START_TEST(test_gelu_sse2_within_bound) {
    const int64_t cap = 1 << 16;
    float *x = malloc(sizeof(float) * cap), *g = malloc(sizeof(float) * cap);
    const int64_t n = gelu_palette(x, cap);
    for (int64_t i = 0; i < n; i++) g[i] = 0.25f + (float)(i % 13) * 0.125f;
    float *y0 = malloc(sizeof(float) * n), *d0 = malloc(sizeof(float) * n);
    float *y1 = malloc(sizeof(float) * n), *d1 = malloc(sizeof(float) * n);
    ocr_cpu_vec_select(NULL);
    ocr_cpu_act_forward_backward_tile(y0, d0, g, x, n, OCR_ACT_GELU);
    ck_assert(ocr_cpu_vec_select("sse2"));
    ocr_cpu_act_forward_backward_tile(y1, d1, g, x, n, OCR_ACT_GELU);
    ocr_cpu_vec_select(NULL);
    int64_t differ = 0;
    for (int64_t i = 0; i < n; i++) {
        const double xv = x[i];
        if (!isfinite(y0[i]) || !isfinite(y1[i])) {
            ck_assert_msg(isnan(y0[i]) == isnan(y1[i]) && isinf(y0[i]) == isinf(y1[i]) &&
                              (isnan(y0[i]) || y0[i] == y1[i]),
                          "GELU(%a): %a at the best level, %a at sse2", xv, y0[i], y1[i]);
            continue;
        }
        differ += y0[i] != y1[i];
        ck_assert_msg(fabs((double)y0[i] - y1[i]) <= 3e-6 * fabs((double)y0[i]) + 1e-37,
                      "GELU(%a): %a at the best level, %a at sse2", xv, y0[i], y1[i]);
        if (!isfinite(d0[i]) || !isfinite(d1[i])) continue;
        const double phi = 0.5 * erfc(-xv / sqrt(2.0)), pdf = exp(-0.5 * xv * xv) / sqrt(2.0 * M_PI);
        const double bound = 3e-6 * fabs((double)g[i]) * (phi + fabs(xv) * pdf) + 1e-37;
        ck_assert_msg(fabs((double)d0[i] - d1[i]) <= bound, "GELU'(%a): %a at the best level, %a at sse2 (bound %g)",
                      xv, d0[i], d1[i], bound);
    }
    // The two formulas are not the same: a test that cannot see them differ would prove nothing.
    ck_assert_msg(differ > 0 || !ocr_cpu_vec_select("avx2"), "GELU at sse2 equals the FMA levels everywhere");
    ocr_cpu_vec_select(NULL);
    printf("GELU: sse2 differs from the best level in %lld of %lld values, within the bound\n", (long long)differ,
           (long long)n);
    free(x), free(g), free(y0), free(d0), free(y1), free(d1);
}
END_TEST

// What the palette's specials give at every level: GELU(±0) = ±0 with
// slope 1/2, GELU(+inf) = +inf, a NaN stays NaN, the far tails saturate, and just below and above
// the erfc cut the value is continuous (Φ ≈ 7.7e-13 there, below a float's resolution of GELU).
START_TEST(test_gelu_specials) {
    const float x[] = {0.0f, -0.0f, INFINITY, NAN, -7.0710673f, -7.0710683f, 7.0710673f, 7.0710683f, -1e30f, 1e30f};
    const int64_t n = (int64_t)(sizeof x / sizeof x[0]);
    float y[10], dx[10], ones[10];
    for (int i = 0; i < n; i++) ones[i] = 1.0f;
    for (int li = 0; li < NLEVELS; li++) {
        if (!ocr_cpu_vec_select(LEVELS[li])) continue;
        ocr_cpu_act_forward_backward_tile(y, dx, ones, x, n, OCR_ACT_GELU);
        ck_assert_uint_eq(bits_of(y[0]), 0u);
        ck_assert_uint_eq(bits_of(y[1]), 0x80000000u);
        ck_assert_float_eq(dx[0], 0.5f);
        ck_assert_float_eq(dx[1], 0.5f);
        ck_assert(isinf(y[2]) && y[2] > 0);
        ck_assert(y[3] != y[3] && dx[3] != dx[3]);
        for (int i = 4; i < 6; i++)
            ck_assert_msg(fabsf(y[i]) < 1e-11f && fabsf(dx[i]) < 1e-10f, "%s: %g %g", LEVELS[li], y[i], dx[i]);
        for (int i = 6; i < 8; i++) ck_assert_msg(y[i] == x[i] && dx[i] == 1.0f, "%s: %g %g", LEVELS[li], y[i], dx[i]);
        ck_assert_uint_eq(bits_of(y[8]), 0x80000000u);  // −1e30·0
        ck_assert_float_eq(y[9], 1e30f);
    }
    ocr_cpu_vec_select(NULL);
}
END_TEST

// GELU on bf16 values by table (kernels/cpu/activation.c): for every one of the 65,536 bf16 bit
// patterns x (NaNs, infinities and subnormals included) and gradients dy of several magnitudes and
// signs, the bf16 activation op (which looks GELU and its slope up) gives the bits of the f32
// formula loop on the widened values rounded to bf16, at every level. (Batch norm + GELU on bf16
// maps, which looks up the forward, the backward's slope and its rebuilt output, is pinned bit for
// bit against its f32 reference path at every level by kernels_cpu_tiles.)
START_TEST(test_gelu_bf16_table_every_pattern) {
    const int64_t n = 65536;
    const int64_t *shape = OCR_SHAPE(1, n);
    float *xf = malloc(sizeof(float) * n), *dyf = malloc(sizeof(float) * n);
    float *yref = malloc(sizeof(float) * n), *dref = malloc(sizeof(float) * n);
    uint16_t *xb = malloc(sizeof(uint16_t) * n), *dyb = malloc(sizeof(uint16_t) * n);
    const float gs[] = {1.0f, -0.375f, 3.0e-3f, -250.0f, 0.0f, INFINITY};
    omp_set_num_threads(2);
    for (int64_t k = 0; k < n; k++) xb[k] = (uint16_t)k, xf[k] = ocr_bf16_to_f32((ocr_bf16_t)k);
    int levels = 0;
    for (int li = 0; li < NLEVELS; li++) {
        if (!ocr_cpu_vec_select(LEVELS[li])) continue;
        levels++;
        for (size_t gi = 0; gi < sizeof gs / sizeof gs[0]; gi++) {
            for (int64_t k = 0; k < n; k++) {
                dyf[k] = ocr_bf16_to_f32(ocr_f32_to_bf16(gs[gi] * (1.0f + (float)(k % 7) * 0.0625f)));
                dyb[k] = ocr_f32_to_bf16(dyf[k]);
            }
            // The formula: the f32 op on the same values, rounded to bf16 afterwards.
            OcrTensor x32 = ocr_tensor_view(xf, OCR_F32, ocr_cpu(), 2, shape);
            OcrTensor dy32 = ocr_tensor_view(dyf, OCR_F32, ocr_cpu(), 2, shape);
            OcrTensor y32 = ocr_tensor_view(yref, OCR_F32, ocr_cpu(), 2, shape);
            OcrTensor d32 = ocr_tensor_view(dref, OCR_F32, ocr_cpu(), 2, shape);
            ocr_activation_forward(&y32, &x32, OCR_ACT_GELU);
            ocr_activation_backward(&d32, &dy32, &x32, OCR_ACT_GELU);
            // The table: bf16 maps in and out.
            OcrTensor x16 = ocr_test_tensor(OCR_BF16, 2, shape, NULL), dy16 = ocr_test_tensor(OCR_BF16, 2, shape, NULL);
            OcrTensor y16 = ocr_test_tensor(OCR_BF16, 2, shape, NULL), d16 = ocr_test_tensor(OCR_BF16, 2, shape, NULL);
            memcpy(x16.data, xb, sizeof(uint16_t) * n);
            memcpy(dy16.data, dyb, sizeof(uint16_t) * n);
            ocr_activation_forward(&y16, &x16, OCR_ACT_GELU);
            ocr_activation_backward(&d16, &dy16, &x16, OCR_ACT_GELU);
            const uint16_t *y = y16.data, *d = d16.data;
            for (int64_t k = 0; k < n; k++) {
                ck_assert_msg(y[k] == ocr_f32_to_bf16(yref[k]), "%s: GELU(bf16 0x%04x) = 0x%04x by table, 0x%04x by formula",
                              LEVELS[li], (unsigned)k, y[k], ocr_f32_to_bf16(yref[k]));
                ck_assert_msg(d[k] == ocr_f32_to_bf16(dref[k]),
                              "%s: %g·GELU'(bf16 0x%04x) = 0x%04x by table, 0x%04x by formula", LEVELS[li], dyf[k],
                              (unsigned)k, d[k], ocr_f32_to_bf16(dref[k]));
            }
            ocr_tensor_free(&x16), ocr_tensor_free(&dy16), ocr_tensor_free(&y16), ocr_tensor_free(&d16);
        }
    }
    ocr_cpu_vec_select(NULL);
    ck_assert_int_gt(levels, 0);
    free(xf), free(dyf), free(yref), free(dref), free(xb), free(dyb);
}
END_TEST

int main(void) {
    Suite *s = suite_create("kernels_gelu_fma");
    TCase *tc = tcase_create("gelu_fma");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_gelu_fma_levels_same_bits);
    tcase_add_test(tc, test_gelu_sse2_within_bound);
    tcase_add_test(tc, test_gelu_specials);
    tcase_add_test(tc, test_gelu_bf16_table_every_pattern);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

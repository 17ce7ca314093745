// The BF16/FP16 hardware paths (oneDNN: AMX, AVX512-BF16, AVX512-FP16) against the emulated
// reference (Global.cpu_exact_numerics: widen to fp32, sgemm, round once) for gemm, linear,
// batched matmul and conv2d (1×1, im2col, grouped; forward, backward-data, backward-weights,
// bias), with activation outputs in the low-precision dtype and weight gradients in it or f32.
//
// Both paths read the same f16/bf16 operands and accumulate in fp32, so they differ only in the
// order of the fp32 additions and in where that lands relative to the output's rounding:
//   |native − reference| <= 2·γ(n)·S + 2·u_out·max(|native|, |reference|)
// with n the number of terms summed into the element, γ(n) = n·u/(1 − n·u), u = 2^-24, S the
// same op on the absolute values (Σ|a·b| + |bias| + |old value|, computed by the op in fp32) and
// u_out the output dtype's unit roundoff (0 for f32): each fp32 sum is within γ(n)·S of the
// exact one, and rounding two values that close can differ by one ulp of the output. The
// inputs are uniform in [-1, 1): no subnormals, which AMX would flush.
// Without the hardware (or oneDNN) for a dtype, its cases print SKIP and pass. The emulated
// convolutions (widened operands on oneDNN's fp32 GEMMs) are checked against the same
// reference on every CPU, with the hardware paths switched off by a test hook.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/onednn.h"
#include "kernels/ops.h"
#include "tests/common/test_util.h"

#define MAX_T 4

// One op call: inputs and outputs; acc[i] marks outputs that ocr_accumulate (weight gradients).
typedef struct {
    const char *name;
    int n_in, n_out;
    OcrTensor in[MAX_T], out[MAX_T];
    int acc[MAX_T];
    int64_t terms[MAX_T];  // fp32 terms summed into each element of out[i]
    void (*run)(OcrTensor *out, const OcrTensor *in, const void *params);
    const void *params;
} OpCase;

static uint64_t seed_counter = 100;

static OcrTensor random_tensor(ocr_dtype_t dt, int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    float *v = malloc(sizeof(float) * (size_t)(n + 1));
    ocr_test_fill_uniform(v, n, seed_counter++, -1.0f, 1.0f);
    OcrTensor t = ocr_test_tensor(dt, ndim, shape, v);
    free(v);
    return t;
}

static float *to_f32(const OcrTensor *t) {
    float *v = malloc(sizeof(float) * (size_t)(ocr_tensor_numel(t) + 1));
    ocr_tensor_to_f32(t, v);
    return v;
}

// f32 tensor of |t|.
static OcrTensor abs_copy(const OcrTensor *t) {
    float *v = to_f32(t);
    for (int64_t i = 0; i < ocr_tensor_numel(t); i++) v[i] = fabsf(v[i]);
    OcrTensor a = ocr_test_tensor(OCR_F32, t->ndim, t->shape, v);
    free(v);
    return a;
}

// Runs the case under the reference and the native path and compares within the bound.
static void check_case(OpCase *c) {
    float *init[MAX_T] = {0}, *ref[MAX_T], *nat[MAX_T];
    for (int i = 0; i < c->n_out; i++)
        if (c->acc[i]) init[i] = to_f32(&c->out[i]);
    for (int pass = 0; pass < 2; pass++) {
        ocr_cpu_set_exact_numerics(pass == 0);
        for (int i = 0; i < c->n_out; i++) {
            if (c->acc[i])
                ocr_tensor_from_f32(&c->out[i], init[i]);
            else
                ocr_test_poison(&c->out[i]);
        }
        c->run(c->out, c->in, c->params);
        for (int i = 0; i < c->n_out; i++) (pass == 0 ? ref : nat)[i] = to_f32(&c->out[i]);
    }
    ocr_cpu_set_exact_numerics(0);
    // S: the op on absolute values in f32.
    OcrTensor ain[MAX_T], aout[MAX_T];
    for (int i = 0; i < c->n_in; i++) ain[i] = abs_copy(&c->in[i]);
    for (int i = 0; i < c->n_out; i++) {
        aout[i] = ocr_test_tensor(OCR_F32, c->out[i].ndim, c->out[i].shape, NULL);
        if (c->acc[i]) {
            float *v = malloc(sizeof(float) * (size_t)(ocr_tensor_numel(&aout[i]) + 1));
            for (int64_t j = 0; j < ocr_tensor_numel(&aout[i]); j++) v[j] = fabsf(init[i][j]);
            ocr_tensor_from_f32(&aout[i], v);
            free(v);
        }
    }
    c->run(aout, ain, c->params);
    const double u = ldexp(1.0, -24);
    for (int i = 0; i < c->n_out; i++) {
        float *S = to_f32(&aout[i]);
        double n = (double)c->terms[i] + (c->acc[i] ? 1 : 0) + 1;  // + old value, + bias
        double gamma = n * u / (1.0 - n * u);
        double u_out = c->out[i].dtype == OCR_F32 ? 0.0 : ocr_test_dtype_eps(c->out[i].dtype);
        int64_t m = ocr_tensor_numel(&c->out[i]);
        double worst = 0;
        for (int64_t j = 0; j < m; j++) {
            ck_assert_msg(isfinite(nat[i][j]), "%s out%d[%lld]: native result %g not finite (unwritten?)", c->name, i,
                          (long long)j, nat[i][j]);
            double big = fmax(fabs(nat[i][j]), fabs(ref[i][j]));
            // S is itself an fp32 sum of non-negative terms: within (1 + γ) of the exact one.
            double tol = 2.0 * gamma * fabs(S[j]) * (1.0 + gamma) + 2.0 * u_out * big;
            double d = fabs((double)nat[i][j] - (double)ref[i][j]);
            ck_assert_msg(d <= tol, "%s (%s) out%d[%lld]: native %.9g, reference %.9g, |diff| %.3g > tol %.3g (S %.4g, n %g)",
                          c->name, ocr_dtype_name(c->in[0].dtype), i, (long long)j, nat[i][j], ref[i][j], d, tol, S[j],
                          n);
            if (tol > 0 && d / tol > worst) worst = d / tol;
        }
        free(S);
        printf("%s %s out%d (%s): %lld elements, largest |diff|/tol %.3f\n", c->name, ocr_dtype_name(c->in[0].dtype),
               i, ocr_dtype_name(c->out[i].dtype), (long long)m, worst);
    }
    for (int i = 0; i < c->n_in; i++) ocr_tensor_free(&ain[i]), ocr_tensor_free(&c->in[i]);
    for (int i = 0; i < c->n_out; i++) {
        ocr_tensor_free(&aout[i]), ocr_tensor_free(&c->out[i]);
        free(init[i]), free(ref[i]), free(nat[i]);
    }
}

static int have(ocr_dtype_t dt) {
    ocr_cpu_set_exact_numerics(0);
    if (ocr_cpu_lp_native(dt)) return 1;
    printf("SKIP: %s GEMMs are emulated here (%s)\n", ocr_dtype_name(dt), ocr_cpu_isa_emulated_reason(dt));
    return 0;
}

// ---- gemm ------------------------------------------------------------------------------
typedef struct {
    int M, N, K, ta, tb;
    float alpha, beta;
} GemmP;

static void run_gemm(OcrTensor *out, const OcrTensor *in, const void *params) {
    const GemmP *p = params;
    ocr_gemm(&out[0], &in[0], &in[1], p->ta, p->tb, p->alpha, p->beta);
}

static const GemmP gemm_cases[] = {
    {37, 29, 53, 0, 0, 1.0f, 0.0f}, {37, 29, 53, 1, 0, 0.5f, 0.0f}, {37, 29, 53, 0, 1, 1.0f, 1.0f},
    {64, 48, 300, 1, 1, -1.5f, 1.0f}, {200, 16, 32, 0, 1, 1.0f, 0.0f},
};

static void gemm_case(ocr_dtype_t dt, const GemmP *p) {
    OpCase c = {.name = "gemm", .n_in = 2, .n_out = 1, .run = run_gemm, .params = p};
    c.in[0] = random_tensor(dt, 2, p->ta ? OCR_SHAPE(p->K, p->M) : OCR_SHAPE(p->M, p->K));
    c.in[1] = random_tensor(dt, 2, p->tb ? OCR_SHAPE(p->N, p->K) : OCR_SHAPE(p->K, p->N));
    c.out[0] = random_tensor(dt, 2, OCR_SHAPE(p->M, p->N));
    c.acc[0] = p->beta != 0.0f;
    c.terms[0] = p->K;
    check_case(&c);
}

START_TEST(test_gemm) {
    ocr_dtype_t dt = _i ? OCR_F16 : OCR_BF16;
    if (!have(dt)) return;
    for (size_t k = 0; k < sizeof gemm_cases / sizeof gemm_cases[0]; k++) gemm_case(dt, &gemm_cases[k]);
}
END_TEST

// ---- linear ----------------------------------------------------------------------------
typedef struct {
    int R, IN, OUT;
} LinP;

static void run_linear_fwd(OcrTensor *out, const OcrTensor *in, const void *params) {
    (void)params;
    ocr_linear_forward(&out[0], &in[0], &in[1], &in[2]);
}
static void run_linear_bwd(OcrTensor *out, const OcrTensor *in, const void *params) {
    (void)params;
    ocr_linear_backward(&out[0], &out[1], &out[2], &in[0], &in[1], &in[2]);
}

START_TEST(test_linear) {
    ocr_dtype_t dt = _i % 2 ? OCR_F16 : OCR_BF16;
    ocr_dtype_t gdt = _i / 2 ? OCR_F32 : dt;  // weight gradients in the dtype (O2) or f32 (O1)
    if (!have(dt)) return;
    LinP p = {75, 48, 40};
    OpCase f = {.name = "linear_forward", .n_in = 3, .n_out = 1, .run = run_linear_fwd, .params = &p};
    f.in[0] = random_tensor(dt, 3, OCR_SHAPE(3, 25, p.IN));
    f.in[1] = random_tensor(dt, 2, OCR_SHAPE(p.IN, p.OUT));
    f.in[2] = random_tensor(dt, 1, OCR_SHAPE(p.OUT));
    f.out[0] = random_tensor(dt, 3, OCR_SHAPE(3, 25, p.OUT));
    f.terms[0] = p.IN;
    check_case(&f);
    OpCase b = {.name = "linear_backward", .n_in = 3, .n_out = 3, .run = run_linear_bwd, .params = &p};
    b.in[0] = random_tensor(dt, 2, OCR_SHAPE(p.R, p.OUT));
    b.in[1] = random_tensor(dt, 2, OCR_SHAPE(p.R, p.IN));
    b.in[2] = random_tensor(dt, 2, OCR_SHAPE(p.IN, p.OUT));
    b.out[0] = random_tensor(dt, 2, OCR_SHAPE(p.R, p.IN));
    b.out[1] = random_tensor(gdt, 2, OCR_SHAPE(p.IN, p.OUT));
    b.out[2] = random_tensor(gdt, 1, OCR_SHAPE(p.OUT));
    b.acc[1] = b.acc[2] = 1;
    b.terms[0] = p.OUT, b.terms[1] = p.R, b.terms[2] = p.R;
    check_case(&b);
}
END_TEST

// ---- batched matmul --------------------------------------------------------------------
typedef struct {
    int B, M, N, K, ta, tb;
    float alpha;
} BmmP;

static void run_bmm_fwd(OcrTensor *out, const OcrTensor *in, const void *params) {
    const BmmP *p = params;
    ocr_matmul_batched_forward(&out[0], &in[0], &in[1], p->ta, p->tb, p->alpha);
}
static void run_bmm_bwd(OcrTensor *out, const OcrTensor *in, const void *params) {
    const BmmP *p = params;
    ocr_matmul_batched_backward(&out[0], &out[1], &in[0], &in[1], &in[2], p->ta, p->tb, p->alpha);
}

START_TEST(test_matmul_batched) {
    ocr_dtype_t dt = _i ? OCR_F16 : OCR_BF16;
    if (!have(dt)) return;
    // Attention's shapes: scores q·kᵀ·scale, then probabilities·v.
    const BmmP cases[] = {{16, 40, 40, 8, 0, 1, 0.35355339f}, {16, 40, 8, 40, 0, 0, 1.0f}, {6, 9, 13, 70, 1, 0, 1.0f},
                          {6, 9, 13, 70, 1, 1, 2.0f}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const BmmP *p = &cases[k];
        const int64_t *as = p->ta ? OCR_SHAPE(p->B, p->K, p->M) : OCR_SHAPE(p->B, p->M, p->K);
        const int64_t *bs = p->tb ? OCR_SHAPE(p->B, p->N, p->K) : OCR_SHAPE(p->B, p->K, p->N);
        OpCase f = {.name = "matmul_batched_forward", .n_in = 2, .n_out = 1, .run = run_bmm_fwd, .params = p};
        f.in[0] = random_tensor(dt, 3, as);
        f.in[1] = random_tensor(dt, 3, bs);
        f.out[0] = random_tensor(dt, 3, OCR_SHAPE(p->B, p->M, p->N));
        f.terms[0] = p->K;
        check_case(&f);
        OpCase b = {.name = "matmul_batched_backward", .n_in = 3, .n_out = 2, .run = run_bmm_bwd, .params = p};
        b.in[0] = random_tensor(dt, 3, OCR_SHAPE(p->B, p->M, p->N));
        b.in[1] = random_tensor(dt, 3, as);
        b.in[2] = random_tensor(dt, 3, bs);
        b.out[0] = random_tensor(dt, 3, as);
        b.out[1] = random_tensor(dt, 3, bs);
        b.terms[0] = p->N, b.terms[1] = p->M;
        check_case(&b);
    }
}
END_TEST

// ---- conv2d ----------------------------------------------------------------------------
typedef struct {
    int N, H, W, C, OC, KH, KW;
    Conv2dParams p;
    int bias;
} ConvP;

static void run_conv_fwd(OcrTensor *out, const OcrTensor *in, const void *params) {
    const ConvP *p = params;
    ocr_conv2d_forward(&out[0], &in[0], &in[1], p->bias ? &in[2] : NULL, p->p);
}
static void run_conv_bwd(OcrTensor *out, const OcrTensor *in, const void *params) {
    const ConvP *p = params;
    ocr_conv2d_backward(&out[0], &out[1], p->bias ? &out[2] : NULL, &in[0], &in[1], &in[2], p->p);
}

// Maps (x, y, dout, dinp) in dt, the weight in wdt, the weight gradient in gdt.
static void conv_case(ocr_dtype_t dt, ocr_dtype_t wdt, ocr_dtype_t gdt, const ConvP *p) {
    int Ho = ocr_conv2d_out_size(p->H, p->KH, p->p.stride_h, p->p.pad_h);
    int Wo = ocr_conv2d_out_size(p->W, p->KW, p->p.stride_w, p->p.pad_w);
    int Cg = p->C / p->p.groups, OCg = p->OC / p->p.groups;
    OpCase f = {.name = "conv2d_forward", .n_in = p->bias ? 3 : 2, .n_out = 1, .run = run_conv_fwd, .params = p};
    f.in[0] = random_tensor(dt, 4, OCR_SHAPE(p->N, p->H, p->W, p->C));
    f.in[1] = random_tensor(wdt, 4, OCR_SHAPE(p->OC, p->KH, p->KW, Cg));
    if (p->bias) f.in[2] = random_tensor(OCR_F32, 1, OCR_SHAPE(p->OC));
    f.out[0] = random_tensor(dt, 4, OCR_SHAPE(p->N, Ho, Wo, p->OC));
    f.terms[0] = (int64_t)p->KH * p->KW * Cg;
    check_case(&f);
    OpCase b = {.name = "conv2d_backward", .n_in = 3, .n_out = p->bias ? 3 : 2, .run = run_conv_bwd, .params = p};
    b.in[0] = random_tensor(dt, 4, OCR_SHAPE(p->N, Ho, Wo, p->OC));
    b.in[1] = random_tensor(dt, 4, OCR_SHAPE(p->N, p->H, p->W, p->C));
    b.in[2] = random_tensor(wdt, 4, OCR_SHAPE(p->OC, p->KH, p->KW, Cg));
    b.out[0] = random_tensor(dt, 4, OCR_SHAPE(p->N, p->H, p->W, p->C));
    b.out[1] = random_tensor(gdt, 4, OCR_SHAPE(p->OC, p->KH, p->KW, Cg));
    b.acc[1] = 1;
    if (p->bias) b.out[2] = random_tensor(OCR_F32, 1, OCR_SHAPE(p->OC)), b.acc[2] = 1;
    // dinp sums OCg·KH·KW products per element (the gather adds the column entries in fp32).
    b.terms[0] = (int64_t)OCg * p->KH * p->KW;
    b.terms[1] = (int64_t)p->N * Ho * Wo;
    b.terms[2] = (int64_t)p->N * Ho * Wo;
    check_case(&b);
}

static const ConvP conv_cases[] = {
        {2, 6, 20, 32, 48, 1, 1, {1, 1, 0, 0, 1}, 0},   // pointwise: the GEMM on the NHWC buffer itself
        {2, 9, 17, 16, 24, 3, 3, {2, 2, 1, 1, 1}, 1},   // im2col, stride 2, padding, bias
        {1, 8, 12, 12, 18, 3, 3, {1, 1, 1, 1, 3}, 0},   // grouped (strided group operands)
        {2, 5, 11, 24, 32, 1, 1, {1, 1, 0, 0, 2}, 1},   // grouped pointwise with bias
        {3, 12, 40, 3, 16, 3, 3, {2, 2, 1, 1, 1}, 0},   // the stem: 3 input channels
};

START_TEST(test_conv2d) {
    ocr_dtype_t dt = _i % 2 ? OCR_F16 : OCR_BF16;
    ocr_dtype_t gdt = _i / 2 ? OCR_F32 : dt;
    if (!have(dt)) return;
    for (size_t k = 0; k < sizeof conv_cases / sizeof conv_cases[0]; k++) conv_case(dt, dt, gdt, &conv_cases[k]);
}
END_TEST

// f16/bf16 maps with an f32 weight (a per-op compute dtype without AMP's weight casts): the
// forward and dinp widen and take fp32 GEMMs, the weight gradient (dout and inp only) takes the
// hardware GEMM into the f32 gradient. Every path sums fp32 products of the stored values, so
// the same bound holds against the widened sgemm reference.
START_TEST(test_conv2d_f32_weight) {
    ocr_dtype_t dt = _i ? OCR_F16 : OCR_BF16;
    if (!have(dt)) return;
    for (size_t k = 0; k < sizeof conv_cases / sizeof conv_cases[0]; k++)
        conv_case(dt, OCR_F32, OCR_F32, &conv_cases[k]);
}
END_TEST

// Without the hardware (forced here, so every CPU runs it) f16/bf16 convolutions widen their
// operands and take the fp32 run's oneDNN GEMMs, while the reference widens and takes sgemm:
// the same products of the same rounded values summed in fp32 in two orders, so the bound
// above holds unchanged. oneDNN must really run (it creates primitives for these shapes).
void ocr_cpu_force_emulated(int on);
START_TEST(test_conv2d_emulated) {
    ocr_dtype_t dt = _i % 2 ? OCR_F16 : OCR_BF16;
    ocr_dtype_t gdt = _i / 2 ? OCR_F32 : dt;
    ocr_cpu_set_exact_numerics(0);
    if (!ocr_cpu_f32_conv_onednn()) {
        printf("SKIP: fp32 convolutions take sgemm here (no oneDNN, or OCR_CPU_F32_CONV=sgemm)\n");
        return;
    }
    ocr_cpu_force_emulated(1);
    ck_assert(!ocr_cpu_lp_native(dt));
    ck_assert_str_eq(ocr_cpu_isa_name(dt), "emulated");
    int64_t before = ocr_onednn_primitives_created();
    for (size_t k = 0; k < sizeof conv_cases / sizeof conv_cases[0]; k++) conv_case(dt, dt, gdt, &conv_cases[k]);
    // Convolutions over more images than one slab of widened maps (conv2d.c: 16 MiB of them):
    // a pointwise one of 9.8 MiB per image and a 3x3 one of 7.9 MiB per image go in two slabs,
    // the weight gradient's sums running on over both.
    const ConvP slabs[] = {{2, 6, 320, 512, 256, 1, 1, {1, 1, 0, 0, 1}, 1},
                           {3, 24, 160, 256, 16, 3, 3, {1, 1, 1, 1, 1}, 0}};
    for (int k = 0; k < 2; k++) conv_case(dt, dt, gdt, &slabs[k]);
    ck_assert_int_gt(ocr_onednn_primitives_created(), before);
    ocr_cpu_force_emulated(0);
}
END_TEST

// Exact numerics really selects the reference, and the hardware path really runs elsewhere:
// the ISA names say so and oneDNN creates primitives only for the native calls.
// The fp32 name follows the vector level the loops run at (OCR_CPU_VEC / ocr_cpu_vec_select).
int ocr_cpu_vec_select(const char *name);
START_TEST(test_fp32_isa_follows_vector_level) {
    ck_assert(ocr_cpu_vec_select("sse2"));
    ck_assert_str_eq(ocr_cpu_isa_name(OCR_F32), "SSE2");
    if (ocr_cpu_vec_select("avx2")) ck_assert_str_eq(ocr_cpu_isa_name(OCR_F32), "AVX2");
    if (ocr_cpu_vec_select("avx512")) ck_assert_str_eq(ocr_cpu_isa_name(OCR_F32), "AVX-512");
    ocr_cpu_vec_select(NULL);
}
END_TEST

START_TEST(test_switch) {
    if (!have(OCR_BF16)) return;
    OcrTensor a = random_tensor(OCR_BF16, 2, OCR_SHAPE(33, 31)), b = random_tensor(OCR_BF16, 2, OCR_SHAPE(31, 29));
    OcrTensor c = ocr_test_tensor(OCR_BF16, 2, OCR_SHAPE(33, 29), NULL);
    ocr_cpu_set_exact_numerics(1);
    ck_assert_str_eq(ocr_cpu_isa_name(OCR_BF16), "emulated");
    ck_assert_ptr_nonnull(ocr_cpu_isa_emulated_reason(OCR_BF16));
    int64_t before = ocr_onednn_primitives_created();
    ocr_gemm(&c, &a, &b, 0, 0, 1.0f, 0.0f);
    ck_assert_int_eq(ocr_onednn_primitives_created(), before);
    ocr_cpu_set_exact_numerics(0);
    ck_assert_str_ne(ocr_cpu_isa_name(OCR_BF16), "emulated");
    ck_assert_ptr_null(ocr_cpu_isa_emulated_reason(OCR_BF16));
    ocr_gemm(&c, &a, &b, 0, 0, 1.0f, 0.0f);
    ck_assert_int_eq(ocr_onednn_primitives_created(), before + 1);
    ocr_gemm(&c, &a, &b, 0, 0, 1.0f, 0.0f);  // the cached primitive
    ck_assert_int_eq(ocr_onednn_primitives_created(), before + 1);
    char line[128];
    ocr_cpu_isa_summary(line, sizeof line);
    printf("%s\n", line);
    ocr_tensor_free(&a), ocr_tensor_free(&b), ocr_tensor_free(&c);
}
END_TEST

int main(void) {
    Suite *s = suite_create("lp_native");
    TCase *tc = tcase_create("native_vs_reference");
    tcase_add_loop_test(tc, test_gemm, 0, 2);
    tcase_add_loop_test(tc, test_linear, 0, 4);
    tcase_add_loop_test(tc, test_matmul_batched, 0, 2);
    tcase_add_loop_test(tc, test_conv2d, 0, 4);
    tcase_add_loop_test(tc, test_conv2d_emulated, 0, 4);
    tcase_add_loop_test(tc, test_conv2d_f32_weight, 0, 2);
    tcase_add_test(tc, test_switch);
    tcase_add_test(tc, test_fp32_isa_follows_vector_level);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

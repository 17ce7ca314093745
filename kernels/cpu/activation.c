// Pointwise activations and their derivatives.
//
// One loop per activation (the switch sits outside the loop), written so that GCC -O3
// vectorises every one of them without -ffast-math: clamps and selects that GCC will not
// if-convert (it keeps trapping float ops on one branch) are integer bit-mask blends, and
// swish/gelu use the branch-free exp and normal CDF of kernels/activation_math.h instead of libm's scalar
// expf/erff (2-2.5x faster on 4-wide SSE2, more with -march=native). The loops are compiled
// for SSE2, AVX2 and AVX-512 from one body and picked at run time (cpu_common.h); every level
// computes the same bits, except GELU at SSE2: GELU rounds each multiply-add once with the FMA
// instruction at AVX2 and AVX-512 and twice at SSE2, which has none (the bodies take hw_fma from
// CPU_VEC_CLONES_FMA; kernels/activation_math.h says why).
//
// Derivatives at the kinks follow Paddle's gradient kernels:
//   relu:        x > 0 → 1, else 0 (0 at x = 0).
//   hardswish:   x + 3 <= 0 → 0; x + 3 >= 6 → 1 (so x = −3 takes the left side, 0, and
//                x = 3 the right side, 1); else (2x + 3) / 6.
//   hardsigmoid: slope where 0 < x·slope + 0.5 < 1 strictly, 0 elsewhere (0 at both kinks).
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "core/half.h"
#include "kernels/activation_math.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/rowwise.h"
#include "kernels/ops.h"

#define ACT_PAR_MIN 32768

static const char *const act_names[OCR_ACT_COUNT] = {"none", "relu", "hardswish", "hardsigmoid", "swish", "gelu"};

const char *ocr_activation_name(ocr_activation_t act) {
    return ((unsigned)act < OCR_ACT_COUNT) ? act_names[act] : "?";
}

int ocr_activation_from_name(const char *name, ocr_activation_t *out) {
    // Canonical names plus the spellings PaddleOCR configs and layer code use.
    static const struct { const char *name; ocr_activation_t act; } table[] = {
        {"none", OCR_ACT_NONE},           {"identity", OCR_ACT_NONE},       {"linear", OCR_ACT_NONE},
        {"relu", OCR_ACT_RELU},           {"hardswish", OCR_ACT_HARDSWISH}, {"hard_swish", OCR_ACT_HARDSWISH},
        {"hardsigmoid", OCR_ACT_HARDSIGMOID}, {"hard_sigmoid", OCR_ACT_HARDSIGMOID},
        {"swish", OCR_ACT_SWISH},         {"silu", OCR_ACT_SWISH},          {"gelu", OCR_ACT_GELU},
    };
    if (!name) return 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcasecmp(name, table[i].name) == 0) {
            if (out) *out = table[i].act;
            return 1;
        }
    return 0;
}

// y (n) = act(x) on one thread; y may equal x.
CPU_INLINE void act_forward_serial_body(int hw_fma, float *y, const float *x, int64_t n, ocr_activation_t act) {
    if (act == OCR_ACT_NONE) {
        if (y != x) memcpy(y, x, (size_t)n * sizeof(float));
        return;
    }
#define ACT_FWD_LOOP(f) \
    for (int64_t i = 0; i < n; i++) y[i] = f(x[i]);
    CPU_ACT_SWITCH(act, hw_fma, ACT_FWD_LOOP, _forward_one)
#undef ACT_FWD_LOOP
}

// dx (n) = dy · act'(x) on one thread; dx may equal dy.
CPU_INLINE void act_backward_serial_body(int hw_fma, float *dx, const float *dy, const float *x, int64_t n,
                                         ocr_activation_t act) {
    if (act == OCR_ACT_NONE) {
        if (dx != dy) memcpy(dx, dy, (size_t)n * sizeof(float));
        return;
    }
#define ACT_BWD_LOOP(f) \
    for (int64_t i = 0; i < n; i++) dx[i] = f(dy[i], x[i]);
    CPU_ACT_SWITCH(act, hw_fma, ACT_BWD_LOOP, _backward_one)
#undef ACT_BWD_LOOP
}

// y (n) = act(x) and dx (n) = dy · act'(x) in one loop: the forward's and the backward's
// formulas side by side, so the compiler forms what they share once (GELU's Gaussian kernel and
// Φ, swish's exponential) while each result keeps its own expression's bits. dx may equal dy.
CPU_INLINE void act_forward_backward_serial_body(int hw_fma, float *restrict y, float *dx, const float *dy,
                                                 const float *restrict x, int64_t n, ocr_activation_t act) {
#define ACT_FWD_BWD_LOOP(f)              \
    for (int64_t i = 0; i < n; i++) {    \
        const float v = x[i], g = dy[i]; \
        y[i] = f##_forward_one(v);       \
        dx[i] = f##_backward_one(g, v);  \
    }
    CPU_ACT_SWITCH(act, hw_fma, ACT_FWD_BWD_LOOP, )
#undef ACT_FWD_BWD_LOOP
}

CPU_VEC_CLONES_FMA(act_forward_serial, (float *y, const float *x, int64_t n, ocr_activation_t act), (y, x, n, act))
CPU_VEC_CLONES_FMA(act_backward_serial, (float *dx, const float *dy, const float *x, int64_t n, ocr_activation_t act),
                   (dx, dy, x, n, act))
CPU_VEC_CLONES_FMA(act_forward_backward_serial,
                   (float *y, float *dx, const float *dy, const float *x, int64_t n, ocr_activation_t act),
                   (y, dx, dy, x, n, act))

void ocr_cpu_act_forward_tile(float *y, const float *x, int64_t n, ocr_activation_t act) {
    act_forward_serial(y, x, n, act);
}
void ocr_cpu_act_backward_tile(float *dx, const float *dy, const float *x, int64_t n, ocr_activation_t act) {
    act_backward_serial(dx, dy, x, n, act);
}
void ocr_cpu_act_forward_backward_tile(float *y, float *dx, const float *dy, const float *x, int64_t n,
                                       ocr_activation_t act) {
    act_forward_backward_serial(y, dx, dy, x, n, act);
}

// ---- GELU of bf16 values, looked up --------------------------------------------------------------
// Under BF16-O2 GELU's input is a bf16 value (a bf16 map, or the BN value rounded to bf16 before
// its activation), and there are only 65,536 of those: the formula is evaluated once per value
// into two tables, and the loops gather from them instead of evaluating it per element (about 30
// multiply-adds, a division and an exponential: 2 cycles per element at AVX-512 on Zen 4, against
// about a quarter of that for a gather from the few KB of the table a map touches). value[k] is
// GELU(v) rounded to bf16 (as a float) and slope[k] = GELU'(v), with v the bf16 value of bits k,
// each computed by the loops' own expression at the clone's hw_fma: GELU(v) rounded and g·slope are
// the very operations the formula loops do, so every lookup gives their bits, NaNs and infinities
// included. One table per hw_fma (the FMA levels agree bit for bit; SSE2 rounds twice).
static OcrGeluBf16Table gelu_bf16_tables[2];
static int gelu_bf16_ready[2];

CPU_INLINE void gelu_table_fill_body(int hw_fma, OcrGeluBf16Table *t) {
    for (int64_t k = 0; k < 65536; k++) {
        const float v = ocr_bf16_to_f32((uint16_t)k);
        t->value[k] = ocr_bf16_round(gelu_forward_fma(hw_fma, v));
        t->slope[k] = gelu_backward_fma(hw_fma, 1.0f, v);  // 1·slope is the slope, NaN payloads too
    }
}
static void gelu_table_fill_unfused(OcrGeluBf16Table *t) { gelu_table_fill_body(0, t); }
CPU_TARGET_AVX2 static void gelu_table_fill_hwfma(OcrGeluBf16Table *t) { gelu_table_fill_body(1, t); }

const OcrGeluBf16Table *ocr_cpu_gelu_bf16_table(int hw_fma) {
    hw_fma = hw_fma != 0;
    if (!__atomic_load_n(&gelu_bf16_ready[hw_fma], __ATOMIC_ACQUIRE)) {
#pragma omp critical(ocr_gelu_bf16_table)
        if (!__atomic_load_n(&gelu_bf16_ready[hw_fma], __ATOMIC_RELAXED)) {
            // hw_fma = 1 comes from an AVX2 or AVX-512 clone only, so this CPU has AVX2 and FMA3.
            if (hw_fma)
                gelu_table_fill_hwfma(&gelu_bf16_tables[1]);
            else
                gelu_table_fill_unfused(&gelu_bf16_tables[0]);
            __atomic_store_n(&gelu_bf16_ready[hw_fma], 1, __ATOMIC_RELEASE);
        }
    }
    return &gelu_bf16_tables[hw_fma];
}

// out (n) = tab[k] with k the bf16 bits of v[i] (bf16 values held as floats: the top 16 bits) or
// x[i]; out may be v. Gathers at AVX2 and AVX-512 (GCC does not vectorise a table lookup itself).
static void lookup_f32_sse2(float *out, const float *v, const float *tab, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &v[i], sizeof b);
        out[i] = tab[b >> 16];
    }
}
static void lookup_bf16_sse2(float *out, const uint16_t *x, const float *tab, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = tab[x[i]];
}
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
CPU_TARGET_AVX2 static void lookup_f32_avx2(float *out, const float *v, const float *tab, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i k = _mm256_srli_epi32(_mm256_loadu_si256((const __m256i *)(v + i)), 16);
        _mm256_storeu_ps(out + i, _mm256_i32gather_ps(tab, k, 4));
    }
    lookup_f32_sse2(out + i, v + i, tab, n - i);
}
CPU_TARGET_AVX2 static void lookup_bf16_avx2(float *out, const uint16_t *x, const float *tab, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i k = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + i)));
        _mm256_storeu_ps(out + i, _mm256_i32gather_ps(tab, k, 4));
    }
    lookup_bf16_sse2(out + i, x + i, tab, n - i);
}
CPU_TARGET_AVX512 static void lookup_f32_avx512(float *out, const float *v, const float *tab, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i k = _mm512_srli_epi32(_mm512_loadu_si512(v + i), 16);
        _mm512_storeu_ps(out + i, _mm512_i32gather_ps(k, tab, 4));
    }
    lookup_f32_sse2(out + i, v + i, tab, n - i);
}
CPU_TARGET_AVX512 static void lookup_bf16_avx512(float *out, const uint16_t *x, const float *tab, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i k = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(x + i)));
        _mm512_storeu_ps(out + i, _mm512_i32gather_ps(k, tab, 4));
    }
    lookup_bf16_sse2(out + i, x + i, tab, n - i);
}
#else
#define lookup_f32_avx2 lookup_f32_sse2
#define lookup_f32_avx512 lookup_f32_sse2
#define lookup_bf16_avx2 lookup_bf16_sse2
#define lookup_bf16_avx512 lookup_bf16_sse2
#endif
CPU_VEC_DISPATCH(lookup_f32, (float *out, const float *v, const float *tab, int64_t n), (out, v, tab, n))
CPU_VEC_DISPATCH(lookup_bf16, (float *out, const uint16_t *x, const float *tab, int64_t n), (out, x, tab, n))

void ocr_cpu_table_lookup_f32(float *out, const float *v, const float *tab, int64_t n) { lookup_f32(out, v, tab, n); }
void ocr_cpu_table_lookup_bf16(float *out, const uint16_t *x, const float *tab, int64_t n) {
    lookup_bf16(out, x, tab, n);
}

// Elements per parallel block of the whole-array forms; swish and gelu cost enough per element
// to go parallel four times earlier.
#define ACT_PAR_BLOCK 8192
static int act_parallel(int64_t n, ocr_activation_t act) {
    return n >= (act == OCR_ACT_SWISH || act == OCR_ACT_GELU ? ACT_PAR_MIN / 4 : ACT_PAR_MIN);
}

void ocr_cpu_act_forward_f32(float *y, const float *x, int64_t n, ocr_activation_t act) {
    const int64_t nblk = (n + ACT_PAR_BLOCK - 1) / ACT_PAR_BLOCK;
#pragma omp parallel for schedule(static) if (act_parallel(n, act))
    for (int64_t b = 0; b < nblk; b++) {
        const int64_t i0 = b * ACT_PAR_BLOCK, m = n - i0 < ACT_PAR_BLOCK ? n - i0 : ACT_PAR_BLOCK;
        act_forward_serial(y + i0, x + i0, m, act);
    }
}

void ocr_cpu_act_backward_f32(float *dx, const float *dy, const float *x, int64_t n, ocr_activation_t act) {
    const int64_t nblk = (n + ACT_PAR_BLOCK - 1) / ACT_PAR_BLOCK;
#pragma omp parallel for schedule(static) if (act_parallel(n, act))
    for (int64_t b = 0; b < nblk; b++) {
        const int64_t i0 = b * ACT_PAR_BLOCK, m = n - i0 < ACT_PAR_BLOCK ? n - i0 : ACT_PAR_BLOCK;
        act_backward_serial(dx + i0, dy + i0, x + i0, m, act);
    }
}

// f16/bf16 tensors go through in blocks: each block is widened into a buffer on the stack,
// computed in fp32 and rounded back while it is in cache, instead of three passes over the
// whole tensor (widen, compute, round); all-bf16 blocks convert in registers instead. Per element the same operations as the f32 loops, so
// the results are bit-identical to the whole-tensor conversion, which Global.cpu_exact_numerics
// keeps as the reference.
#define ACT_BLOCK 2048

static void block_in(float *dst, const OcrTensor *t, int64_t i0, int64_t m) {
    if (t->dtype == OCR_F32)
        memcpy(dst, (const float *)t->data + i0, (size_t)m * sizeof(float));
    else if (t->dtype == OCR_BF16)
        ocr_bf16_to_f32_array(dst, (const ocr_bf16_t *)t->data + i0, (size_t)m);
    else
        ocr_f16_to_f32_array(dst, (const ocr_f16_t *)t->data + i0, (size_t)m);
}

static void block_out(OcrTensor *t, int64_t i0, const float *src, int64_t m) {
    if (t->dtype == OCR_F32)
        memcpy((float *)t->data + i0, src, (size_t)m * sizeof(float));
    else if (t->dtype == OCR_BF16)
        ocr_f32_to_bf16_array((ocr_bf16_t *)t->data + i0, src, (size_t)m);
    else
        ocr_f32_to_f16_array((ocr_f16_t *)t->data + i0, src, (size_t)m);
}

// Elements per lookup of the bf16 GELU loops (a stack buffer of floats).
#define ACT_LOOKUP_CHUNK 512

// bf16 in and out (BF16-O2's maps): the same per-element arithmetic with the conversions in
// registers — widening is exact and ocr_f32_to_bf16 is the bulk converters' rounding — so these
// give block_in / the f32 loop / block_out's bits without the block buffers.
CPU_INLINE void act_forward_bf16_body(int hw_fma, uint16_t *y, const uint16_t *x, int64_t n, ocr_activation_t act) {
    if (act == OCR_ACT_NONE) {
        if (y != x) memcpy(y, x, (size_t)n * sizeof(uint16_t));
        return;
    }
    if (act == OCR_ACT_GELU) {
        // By table (ocr_cpu_gelu_bf16_table): GELU(x) rounded to bf16, the formula loop's bits.
        const float *tab = ocr_cpu_gelu_bf16_table(hw_fma)->value;
        float buf[ACT_LOOKUP_CHUNK];
        for (int64_t i0 = 0; i0 < n; i0 += ACT_LOOKUP_CHUNK) {
            const int64_t m = n - i0 < ACT_LOOKUP_CHUNK ? n - i0 : ACT_LOOKUP_CHUNK;
            ocr_cpu_table_lookup_bf16(buf, x + i0, tab, m);
            for (int64_t i = 0; i < m; i++) y[i0 + i] = ocr_f32_to_bf16(buf[i]);
        }
        return;
    }
#define ACT_FWD_BF16_LOOP(f) \
    for (int64_t i = 0; i < n; i++) y[i] = ocr_f32_to_bf16(f(ocr_bf16_to_f32(x[i])));
    CPU_ACT_SWITCH(act, hw_fma, ACT_FWD_BF16_LOOP, _forward_one)
#undef ACT_FWD_BF16_LOOP
}
CPU_INLINE void act_backward_bf16_body(int hw_fma, uint16_t *dx, const uint16_t *dy, const uint16_t *x, int64_t n,
                                       ocr_activation_t act) {
    if (act == OCR_ACT_NONE) {
        if (dx != dy) memcpy(dx, dy, (size_t)n * sizeof(uint16_t));
        return;
    }
    if (act == OCR_ACT_GELU) {
        // dy · GELU'(x) with the slope by table: the formula's product, the same bits.
        const float *tab = ocr_cpu_gelu_bf16_table(hw_fma)->slope;
        float buf[ACT_LOOKUP_CHUNK];
        for (int64_t i0 = 0; i0 < n; i0 += ACT_LOOKUP_CHUNK) {
            const int64_t m = n - i0 < ACT_LOOKUP_CHUNK ? n - i0 : ACT_LOOKUP_CHUNK;
            ocr_cpu_table_lookup_bf16(buf, x + i0, tab, m);
            for (int64_t i = 0; i < m; i++) dx[i0 + i] = ocr_f32_to_bf16(ocr_bf16_to_f32(dy[i0 + i]) * buf[i]);
        }
        return;
    }
#define ACT_BWD_BF16_LOOP(f) \
    for (int64_t i = 0; i < n; i++) dx[i] = ocr_f32_to_bf16(f(ocr_bf16_to_f32(dy[i]), ocr_bf16_to_f32(x[i])));
    CPU_ACT_SWITCH(act, hw_fma, ACT_BWD_BF16_LOOP, _backward_one)
#undef ACT_BWD_BF16_LOOP
}
CPU_VEC_CLONES_FMA(act_forward_bf16, (uint16_t *y, const uint16_t *x, int64_t n, ocr_activation_t act), (y, x, n, act))
CPU_VEC_CLONES_FMA(act_backward_bf16, (uint16_t *dx, const uint16_t *dy, const uint16_t *x, int64_t n,
                                       ocr_activation_t act),
                   (dx, dy, x, n, act))

void ocr_cpu_activation_forward(OcrTensor *out, const OcrTensor *inp, ocr_activation_t act) {
    CPU_ASSERT_FLOAT(out);
    CPU_ASSERT_FLOAT(inp);
    OCR_ASSERT(ocr_tensor_numel(out) == ocr_tensor_numel(inp), "activation: out and inp sizes differ");
    OCR_ASSERT((unsigned)act < OCR_ACT_COUNT, "unknown activation %d", (int)act);
    const int64_t n = ocr_tensor_numel(inp);
    if ((inp->dtype != OCR_F32 || out->dtype != OCR_F32) && !ocr_cpu_exact_numerics()) {
        const int in_registers = inp->dtype == OCR_BF16 && out->dtype == OCR_BF16;
        // out may be inp (in-place activations): each block is read before it is written.
#pragma omp parallel for schedule(static) if (n >= ACT_PAR_MIN / 4)
        for (int64_t i0 = 0; i0 < n; i0 += ACT_BLOCK) {
            float buf[ACT_BLOCK];
            int64_t m = n - i0 < ACT_BLOCK ? n - i0 : ACT_BLOCK;
            if (in_registers) {
                act_forward_bf16((uint16_t *)out->data + i0, (const uint16_t *)inp->data + i0, m, act);
                continue;
            }
            block_in(buf, inp, i0, m);
            act_forward_serial(buf, buf, m, act);
            block_out(out, i0, buf, m);
        }
        return;
    }
    CpuScratch s = {0};
    const float *x = ocr_cpu_f32_in(&s, inp);
    float *y = ocr_cpu_f32_out(&s, out, 0);
    ocr_cpu_act_forward_f32(y, x, n, act);
    ocr_cpu_f32_store(out, y);
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_activation_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *inp, ocr_activation_t act) {
    CPU_ASSERT_FLOAT(dinp);
    CPU_ASSERT_FLOAT(dout);
    CPU_ASSERT_FLOAT(inp);
    const int64_t n = ocr_tensor_numel(inp);
    OCR_ASSERT(ocr_tensor_numel(dinp) == n && ocr_tensor_numel(dout) == n, "activation: gradient sizes differ");
    OCR_ASSERT((unsigned)act < OCR_ACT_COUNT, "unknown activation %d", (int)act);
    if ((inp->dtype != OCR_F32 || dout->dtype != OCR_F32 || dinp->dtype != OCR_F32) && !ocr_cpu_exact_numerics()) {
        const int in_registers = inp->dtype == OCR_BF16 && dout->dtype == OCR_BF16 && dinp->dtype == OCR_BF16;
        // dinp may be dout (in-place gradients): each block is read before it is written.
#pragma omp parallel for schedule(static) if (n >= ACT_PAR_MIN / 4)
        for (int64_t i0 = 0; i0 < n; i0 += ACT_BLOCK) {
            float bx[ACT_BLOCK], bg[ACT_BLOCK];
            int64_t m = n - i0 < ACT_BLOCK ? n - i0 : ACT_BLOCK;
            if (in_registers) {
                act_backward_bf16((uint16_t *)dinp->data + i0, (const uint16_t *)dout->data + i0,
                                  (const uint16_t *)inp->data + i0, m, act);
                continue;
            }
            block_in(bx, inp, i0, m);
            block_in(bg, dout, i0, m);
            act_backward_serial(bg, bg, bx, m, act);
            block_out(dinp, i0, bg, m);
        }
        return;
    }
    CpuScratch s = {0};
    const float *x = ocr_cpu_f32_in(&s, inp);
    const float *dy = ocr_cpu_f32_in(&s, dout);
    float *dx = ocr_cpu_f32_out(&s, dinp, 0);
    ocr_cpu_act_backward_f32(dx, dy, x, n, act);
    ocr_cpu_f32_store(dinp, dx);
    ocr_cpu_scratch_free(&s);
}

// Depthwise 2-D convolution (groups == C == OC) on the CPU with direct loops.
//
// NHWC keeps channels contiguous, so all three computations (forward, data gradient,
// weight gradient) reduce to one primitive on a block of channels:
//     out[j] = init[j] + Σ_t a[aoff[t] + j] · b[boff[t] + j]
// with the accumulators in registers across all terms t (the taps of one output pixel,
// the taps that read one input pixel, or the output columns of one tap). The primitive is
// written with SSE intrinsics (the x86-64 baseline), AVX2+FMA and AVX-512, chosen at run time
// (ocr_cpu_vec_level(); AVX2 and AVX-512 give the same bits: one FMA per lane and term in the same
// order); other channels fall back to plain C. The weight (C, KH, KW, 1) is transposed once to
// (KH·KW, C) so a tap's weights are contiguous. Threads take static ranges of rows, and the
// weight gradient is reduced from per-thread partial sums in thread order, so results are
// deterministic for a fixed thread count (and a given CPU: FMA rounds differently).
//
// f16/bf16 maps are read and written in their own dtype. Outputs (the forward's map, the data
// gradient) are computed a block of rows at a time in fp32 and rounded once into the output.
// Inputs: bf16 maps are read where they lie by kernels that widen each operand as they load it
// (a shift, exact) when the CPU has AVX2+FMA — conv2d_depthwise_rows.h's bf16 instance; f16
// maps, and bf16 ones at the SSE level, are widened a block of rows at a time (ocr_cpu_rows_in)
// into a cache-sized buffer. Either way this is bit for bit the whole-tensor fp32 path (kept
// for Global.cpu_exact_numerics), without its fp32 copies of the maps; the in-register bf16
// kernels also skip the widening pass, which was most of what the bf16 maps saved in memory
// traffic (the buffer was written and read again for every block).
#include <omp.h>
#include <string.h>

#include "core/half.h"
#include "kernels/cpu/conv2d_depthwise.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/isa.h"
#include "kernels/ops.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DW_X86 1
#endif

// ---- the primitive --------------------------------------------------------------------------
// out[j] = (init ? init[j] : 0) + Σ_{t<n} a[aoff[t] + j] · b[boff[t] + j] for j < width, for
// three operand pairs: fp32·fp32 (ff), bf16·fp32 (hf: a bf16 map times the fp32 weights) and
// bf16·bf16 (hh: two maps, the weight gradient). init may equal out (accumulate). The bf16
// loads widen in registers; the arithmetic is the ff kernels', term for term.
#define DW_LD512_F32(p) _mm512_loadu_ps(p)
#define DW_LD256_F32(p) _mm256_loadu_ps(p)
#define DW_LD512_BF16(p) \
    _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))
#define DW_LD256_BF16(p) \
    _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
#define DW_SC_F32(v) (v)
#define DW_SC_BF16(v) ocr_bf16_to_f32(v)

// Plain C for the channels left over after the vector blocks (and the whole map without SSE).
#define DW_DOT_C(S, TA, TB, SA, SB)                                                                           \
    static void dot_scalar_##S(float *out, const float *init, const TA *a, const int64_t *aoff, const TB *b,  \
                               const int64_t *boff, int64_t n, int64_t width) {                               \
        for (int64_t j = 0; j < width; j++) {                                                                 \
            float acc = init ? init[j] : 0.0f;                                                                \
            for (int64_t t = 0; t < n; t++) acc += SA(a[aoff[t] + j]) * SB(b[boff[t] + j]);                   \
            out[j] = acc;                                                                                     \
        }                                                                                                     \
    }
DW_DOT_C(ff, float, float, DW_SC_F32, DW_SC_F32)
DW_DOT_C(hf, ocr_bf16_t, float, DW_SC_BF16, DW_SC_F32)
DW_DOT_C(hh, ocr_bf16_t, ocr_bf16_t, DW_SC_BF16, DW_SC_BF16)
// The whole fp32 map in plain C (no SSE: not x86-64).
static void dot32_c_ff(float *out, const float *init, const float *a, const int64_t *aoff, const float *b,
                       const int64_t *boff, int64_t n) {
    dot_scalar_ff(out, init, a, aoff, b, boff, n, 32);
}
static void dot8_c_ff(float *out, const float *init, const float *a, const int64_t *aoff, const float *b,
                      const int64_t *boff, int64_t n) {
    dot_scalar_ff(out, init, a, aoff, b, boff, n, 8);
}

#ifdef DW_X86
static void dot32_sse(float *out, const float *init, const float *a, const int64_t *aoff, const float *b,
                      const int64_t *boff, int64_t n) {
    __m128 s[8];
    for (int v = 0; v < 8; v++) s[v] = init ? _mm_loadu_ps(init + 4 * v) : _mm_setzero_ps();
    for (int64_t t = 0; t < n; t++) {
        const float *ap = a + aoff[t], *bp = b + boff[t];
        for (int v = 0; v < 8; v++)
            s[v] = _mm_add_ps(s[v], _mm_mul_ps(_mm_loadu_ps(ap + 4 * v), _mm_loadu_ps(bp + 4 * v)));
    }
    for (int v = 0; v < 8; v++) _mm_storeu_ps(out + 4 * v, s[v]);
}
static void dot8_sse(float *out, const float *init, const float *a, const int64_t *aoff, const float *b,
                     const int64_t *boff, int64_t n) {
    __m128 s0 = init ? _mm_loadu_ps(init) : _mm_setzero_ps(), s1 = init ? _mm_loadu_ps(init + 4) : _mm_setzero_ps();
    for (int64_t t = 0; t < n; t++) {
        const float *ap = a + aoff[t], *bp = b + boff[t];
        s0 = _mm_add_ps(s0, _mm_mul_ps(_mm_loadu_ps(ap), _mm_loadu_ps(bp)));
        s1 = _mm_add_ps(s1, _mm_mul_ps(_mm_loadu_ps(ap + 4), _mm_loadu_ps(bp + 4)));
    }
    _mm_storeu_ps(out, s0);
    _mm_storeu_ps(out + 4, s1);
}

// AVX2+FMA and AVX-512 kernels for one operand pair. The x2 forms compute two outputs sharing
// b: out1 = init1 + Σ a[aoff[t] + as + j] · b[boff[t] + j]; they halve the loads of the shared
// operand, which is what bounds these loops. AVX-512 runs the same sums in 16-lane registers
// (the same FMA per lane and term as AVX2).
#define DW_DOT_VEC(S, TA, TB, LA256, LB256, LA512, LB512)                                                       \
    __attribute__((target("avx2,fma"))) static void dot32_avx2_##S(float *out, const float *init, const TA *a,  \
                                                                   const int64_t *aoff, const TB *b,           \
                                                                   const int64_t *boff, int64_t n) {           \
        __m256 s0, s1, s2, s3;                                                                                  \
        if (init) {                                                                                             \
            s0 = _mm256_loadu_ps(init), s1 = _mm256_loadu_ps(init + 8);                                         \
            s2 = _mm256_loadu_ps(init + 16), s3 = _mm256_loadu_ps(init + 24);                                   \
        } else {                                                                                                \
            s0 = s1 = s2 = s3 = _mm256_setzero_ps();                                                            \
        }                                                                                                       \
        for (int64_t t = 0; t < n; t++) {                                                                       \
            const TA *ap = a + aoff[t];                                                                         \
            const TB *bp = b + boff[t];                                                                         \
            s0 = _mm256_fmadd_ps(LA256(ap), LB256(bp), s0);                                                     \
            s1 = _mm256_fmadd_ps(LA256(ap + 8), LB256(bp + 8), s1);                                             \
            s2 = _mm256_fmadd_ps(LA256(ap + 16), LB256(bp + 16), s2);                                           \
            s3 = _mm256_fmadd_ps(LA256(ap + 24), LB256(bp + 24), s3);                                           \
        }                                                                                                       \
        _mm256_storeu_ps(out, s0), _mm256_storeu_ps(out + 8, s1);                                               \
        _mm256_storeu_ps(out + 16, s2), _mm256_storeu_ps(out + 24, s3);                                         \
    }                                                                                                           \
    __attribute__((target("avx2,fma"))) static void dot8_avx2_##S(float *out, const float *init, const TA *a,   \
                                                                  const int64_t *aoff, const TB *b,            \
                                                                  const int64_t *boff, int64_t n) {            \
        __m256 s = init ? _mm256_loadu_ps(init) : _mm256_setzero_ps();                                          \
        for (int64_t t = 0; t < n; t++) s = _mm256_fmadd_ps(LA256(a + aoff[t]), LB256(b + boff[t]), s);         \
        _mm256_storeu_ps(out, s);                                                                               \
    }                                                                                                           \
    __attribute__((target("avx2,fma"))) static void dot32x2_avx2_##S(                                           \
        float *out0, float *out1, const float *init0, const float *init1, const TA *a, const int64_t *aoff,     \
        int64_t as, const TB *b, const int64_t *boff, int64_t n) {                                              \
        __m256 s00, s01, s02, s03, s10, s11, s12, s13;                                                          \
        if (init0) {                                                                                            \
            s00 = _mm256_loadu_ps(init0), s01 = _mm256_loadu_ps(init0 + 8);                                     \
            s02 = _mm256_loadu_ps(init0 + 16), s03 = _mm256_loadu_ps(init0 + 24);                               \
        } else {                                                                                                \
            s00 = s01 = s02 = s03 = _mm256_setzero_ps();                                                        \
        }                                                                                                       \
        if (init1) {                                                                                            \
            s10 = _mm256_loadu_ps(init1), s11 = _mm256_loadu_ps(init1 + 8);                                     \
            s12 = _mm256_loadu_ps(init1 + 16), s13 = _mm256_loadu_ps(init1 + 24);                               \
        } else {                                                                                                \
            s10 = s11 = s12 = s13 = _mm256_setzero_ps();                                                        \
        }                                                                                                       \
        for (int64_t t = 0; t < n; t++) {                                                                       \
            const TA *a0 = a + aoff[t], *a1 = a0 + as;                                                          \
            const TB *bp = b + boff[t];                                                                         \
            const __m256 b0 = LB256(bp), b1 = LB256(bp + 8);                                                    \
            const __m256 b2 = LB256(bp + 16), b3 = LB256(bp + 24);                                              \
            s00 = _mm256_fmadd_ps(LA256(a0), b0, s00);                                                          \
            s01 = _mm256_fmadd_ps(LA256(a0 + 8), b1, s01);                                                      \
            s02 = _mm256_fmadd_ps(LA256(a0 + 16), b2, s02);                                                     \
            s03 = _mm256_fmadd_ps(LA256(a0 + 24), b3, s03);                                                     \
            s10 = _mm256_fmadd_ps(LA256(a1), b0, s10);                                                          \
            s11 = _mm256_fmadd_ps(LA256(a1 + 8), b1, s11);                                                      \
            s12 = _mm256_fmadd_ps(LA256(a1 + 16), b2, s12);                                                     \
            s13 = _mm256_fmadd_ps(LA256(a1 + 24), b3, s13);                                                     \
        }                                                                                                       \
        _mm256_storeu_ps(out0, s00), _mm256_storeu_ps(out0 + 8, s01);                                           \
        _mm256_storeu_ps(out0 + 16, s02), _mm256_storeu_ps(out0 + 24, s03);                                     \
        _mm256_storeu_ps(out1, s10), _mm256_storeu_ps(out1 + 8, s11);                                           \
        _mm256_storeu_ps(out1 + 16, s12), _mm256_storeu_ps(out1 + 24, s13);                                     \
    }                                                                                                           \
    __attribute__((target("avx2,fma"))) static void dot8x2_avx2_##S(                                            \
        float *out0, float *out1, const float *init0, const float *init1, const TA *a, const int64_t *aoff,     \
        int64_t as, const TB *b, const int64_t *boff, int64_t n) {                                              \
        __m256 s0 = init0 ? _mm256_loadu_ps(init0) : _mm256_setzero_ps();                                       \
        __m256 s1 = init1 ? _mm256_loadu_ps(init1) : _mm256_setzero_ps();                                       \
        for (int64_t t = 0; t < n; t++) {                                                                       \
            const TA *a0 = a + aoff[t];                                                                         \
            const __m256 bv = LB256(b + boff[t]);                                                               \
            s0 = _mm256_fmadd_ps(LA256(a0), bv, s0);                                                            \
            s1 = _mm256_fmadd_ps(LA256(a0 + as), bv, s1);                                                       \
        }                                                                                                       \
        _mm256_storeu_ps(out0, s0);                                                                             \
        _mm256_storeu_ps(out1, s1);                                                                             \
    }                                                                                                           \
    CPU_TARGET_AVX512 __attribute__((target("fma"))) static void dot32_avx512_##S(                              \
        float *out, const float *init, const TA *a, const int64_t *aoff, const TB *b, const int64_t *boff,      \
        int64_t n) {                                                                                            \
        __m512 s0 = init ? _mm512_loadu_ps(init) : _mm512_setzero_ps();                                         \
        __m512 s1 = init ? _mm512_loadu_ps(init + 16) : _mm512_setzero_ps();                                    \
        for (int64_t t = 0; t < n; t++) {                                                                       \
            const TA *ap = a + aoff[t];                                                                         \
            const TB *bp = b + boff[t];                                                                         \
            s0 = _mm512_fmadd_ps(LA512(ap), LB512(bp), s0);                                                     \
            s1 = _mm512_fmadd_ps(LA512(ap + 16), LB512(bp + 16), s1);                                           \
        }                                                                                                       \
        _mm512_storeu_ps(out, s0), _mm512_storeu_ps(out + 16, s1);                                              \
    }                                                                                                           \
    CPU_TARGET_AVX512 __attribute__((target("fma"))) static void dot32x2_avx512_##S(                            \
        float *out0, float *out1, const float *init0, const float *init1, const TA *a, const int64_t *aoff,     \
        int64_t as, const TB *b, const int64_t *boff, int64_t n) {                                              \
        __m512 s00 = init0 ? _mm512_loadu_ps(init0) : _mm512_setzero_ps();                                      \
        __m512 s01 = init0 ? _mm512_loadu_ps(init0 + 16) : _mm512_setzero_ps();                                 \
        __m512 s10 = init1 ? _mm512_loadu_ps(init1) : _mm512_setzero_ps();                                      \
        __m512 s11 = init1 ? _mm512_loadu_ps(init1 + 16) : _mm512_setzero_ps();                                 \
        for (int64_t t = 0; t < n; t++) {                                                                       \
            const TA *a0 = a + aoff[t], *a1 = a0 + as;                                                          \
            const TB *bp = b + boff[t];                                                                         \
            const __m512 b0 = LB512(bp), b1 = LB512(bp + 16);                                                   \
            s00 = _mm512_fmadd_ps(LA512(a0), b0, s00);                                                          \
            s01 = _mm512_fmadd_ps(LA512(a0 + 16), b1, s01);                                                     \
            s10 = _mm512_fmadd_ps(LA512(a1), b0, s10);                                                          \
            s11 = _mm512_fmadd_ps(LA512(a1 + 16), b1, s11);                                                     \
        }                                                                                                       \
        _mm512_storeu_ps(out0, s00), _mm512_storeu_ps(out0 + 16, s01);                                          \
        _mm512_storeu_ps(out1, s10), _mm512_storeu_ps(out1 + 16, s11);                                          \
    }
DW_DOT_VEC(ff, float, float, DW_LD256_F32, DW_LD256_F32, DW_LD512_F32, DW_LD512_F32)
DW_DOT_VEC(hf, ocr_bf16_t, float, DW_LD256_BF16, DW_LD256_F32, DW_LD512_BF16, DW_LD512_F32)
DW_DOT_VEC(hh, ocr_bf16_t, ocr_bf16_t, DW_LD256_BF16, DW_LD256_BF16, DW_LD512_BF16, DW_LD512_BF16)
#endif

#define OFF(p, c) ((p) ? (p) + (c) : NULL)

typedef struct {
    int64_t N, H, W, C, KH, KW, Ho, Wo;
    int64_t sh, sw, ph, pw;
} DwGeom;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

// Kernel columns that read input column iw: kw = kw0 + j·sw for output column ow = q0 − j,
// with j in [j_lo, j_hi) keeping kw < KW and 0 <= ow < Wo.
static void column_taps(const DwGeom *g, int64_t iw, int64_t *kw0, int64_t *q0, int64_t *j_lo, int64_t *j_hi) {
    *kw0 = (iw + g->pw) % g->sw;
    *q0 = (iw + g->pw - *kw0) / g->sw;
    const int64_t nj = *kw0 < g->KW ? (g->KW - *kw0 + g->sw - 1) / g->sw : 0;
    *j_lo = max64(0, *q0 - (g->Wo - 1));
    *j_hi = min64(nj, *q0 + 1);
}

// Output columns [ow_lo, ow_hi) whose input column ow·sw − pw + kw lies inside the image.
static void tap_columns(const DwGeom *g, int64_t kw, int64_t *ow_lo, int64_t *ow_hi) {
    int64_t lo = g->pw - kw, hi = g->W + g->pw - kw;  // lo <= ow·sw < hi
    *ow_lo = lo <= 0 ? 0 : (lo + g->sw - 1) / g->sw;
    *ow_hi = hi <= 0 ? 0 : min64(g->Wo, (hi + g->sw - 1) / g->sw);
}


// ---- the row loops, for fp32 (or buffered) maps and for bf16 maps in place -------------------
#define DW_T float
#define DW_NAME(x) x##_f32
#define DW_ROWS_IN(t, row, r0, rows, buf) ocr_cpu_rows_in(t, row, r0, rows, buf)
#define DW_WIDEN(v) (v)
#include "kernels/cpu/conv2d_depthwise_rows.h"
#undef DW_T
#undef DW_NAME
#undef DW_ROWS_IN
#undef DW_WIDEN

#define DW_T ocr_bf16_t
#define DW_NAME(x) x##_bf16
#define DW_ROWS_IN(t, row, r0, rows, buf) ((const ocr_bf16_t *)(t)->data + (size_t)((r0) * (row)))
#define DW_WIDEN(v) ocr_bf16_to_f32(v)
#include "kernels/cpu/conv2d_depthwise_rows.h"
#undef DW_T
#undef DW_NAME
#undef DW_ROWS_IN
#undef DW_WIDEN

static Kernels_f32 kernels_f32(void) {
    Kernels_f32 k = {dot32_c_ff, dot8_c_ff, NULL, NULL, dot32_c_ff, dot8_c_ff, NULL, NULL, dot_scalar_ff, dot_scalar_ff};
#ifdef DW_X86
    const CpuVecLevel level = ocr_cpu_vec_level();
    if (level >= CPU_VEC_AVX2 && ocr_cpu_features()->fma) {
        k.mw32 = k.mm32 = dot32_avx2_ff, k.mw8 = k.mm8 = dot8_avx2_ff;
        k.mw32x2 = k.mm32x2 = dot32x2_avx2_ff, k.mw8x2 = k.mm8x2 = dot8x2_avx2_ff;
        if (level >= CPU_VEC_AVX512) k.mw32 = k.mm32 = dot32_avx512_ff, k.mw32x2 = k.mm32x2 = dot32x2_avx512_ff;
    } else {
        k.mw32 = k.mm32 = dot32_sse, k.mw8 = k.mm8 = dot8_sse;
    }
#endif
    return k;
}

// The bf16 kernels need AVX2+FMA (the SSE level, whose kernels round the product before the
// add, keeps widening into buffers so that it still matches its own fp32 path). Returns 0
// when they are not available.
static int kernels_bf16(Kernels_bf16 *k) {
#ifdef DW_X86
    const CpuVecLevel level = ocr_cpu_vec_level();
    if (level < CPU_VEC_AVX2 || !ocr_cpu_features()->fma) return 0;
    *k = (Kernels_bf16){dot32_avx2_hf, dot8_avx2_hf, dot32x2_avx2_hf, dot8x2_avx2_hf,
                        dot32_avx2_hh, dot8_avx2_hh, dot32x2_avx2_hh, dot8x2_avx2_hh,
                        dot_scalar_hf, dot_scalar_hh};
    if (level >= CPU_VEC_AVX512) {
        k->mw32 = dot32_avx512_hf, k->mw32x2 = dot32x2_avx512_hf;
        k->mm32 = dot32_avx512_hh, k->mm32x2 = dot32x2_avx512_hh;
    }
    return 1;
#else
    (void)k;
    return 0;
#endif
}

// ---- entry points ---------------------------------------------------------------------------
static DwGeom dw_geom(int64_t N, int64_t H, int64_t W, int64_t C, int64_t KH, int64_t KW, int64_t Ho, int64_t Wo,
                      Conv2dParams p) {
    DwGeom g = {N, H, W, C, KH, KW, Ho, Wo, p.stride_h, p.stride_w, p.pad_h, p.pad_w};
    return g;
}

// wt (KH·KW, C) from weight (C, KH·KW).
static void transpose_weight(float *wt, const float *w, int64_t C, int64_t taps) {
    for (int64_t c = 0; c < C; c++)
        for (int64_t t = 0; t < taps; t++) wt[t * C + c] = w[c * taps + t];
}

// Static partition of [0, total) for thread t of nt.
static void thread_range(int64_t total, int t, int nt, int64_t *r0, int64_t *r1) {
    int64_t per = total / nt, extra = total % nt;
    *r0 = t * per + (t < extra ? t : extra);
    *r1 = *r0 + per + (t < extra ? 1 : 0);
}

// Floats of one block's rows: 512 KiB, so a block's input span and its output rows (about
// 1 MiB per thread) stay in a 2 MiB L2 while the taps read them again. Neighbouring blocks'
// spans overlap by KH − sh rows, which are widened twice; with this budget the blocks of
// PP-OCR's maps at 48×320 hold whole images (e.g. 3 rows of 80×512 in the last stage), so
// every row is widened once. (At 128 KiB a 80×512 row made one-row blocks and each input row
// was widened KH times.)
#define DW_BLOCK_FLOATS 131072

// Test hook (not in ops.h): a smaller block budget (0 restores the default), so small tests
// cover images split into several blocks.
void ocr_conv2d_depthwise_set_block_floats(int64_t floats);
static int64_t block_floats = DW_BLOCK_FLOATS;
void ocr_conv2d_depthwise_set_block_floats(int64_t floats) { block_floats = floats > 0 ? floats : DW_BLOCK_FLOATS; }

// Rows per block for rows of row_floats each (at least one row).
static int64_t block_rows(int64_t row_floats) {
    return row_floats >= block_floats ? 1 : block_floats / (row_floats > 0 ? row_floats : 1);
}

// Thread t's two block buffers (NULL where its map is f32 and used in place).
static void thread_buffers(float *bufs, int t, size_t first, size_t second, float **a, float **b) {
    float *base = bufs + (size_t)t * (first + second);
    *a = first ? base : NULL;
    *b = second ? base + first : NULL;
}

void ocr_cpu_conv2d_depthwise_forward(OcrTensor *out, const OcrTensor *inp, const float *weight, const float *bias,
                                      int64_t N, int64_t H, int64_t W, int64_t C, int64_t KH, int64_t KW, int64_t Ho,
                                      int64_t Wo, Conv2dParams p) {
    const DwGeom g = dw_geom(N, H, W, C, KH, KW, Ho, Wo, p);
    const Kernels_f32 k = kernels_f32();
    Kernels_bf16 kh;
    const int in_place = inp->dtype == OCR_BF16 && kernels_bf16(&kh);  // bf16 input read where it lies
    const int64_t taps = KH * KW;
    const int maxt = omp_get_max_threads();
    const int64_t R = block_rows(g.sh * W * C);
    const size_t xper = inp->dtype == OCR_F32 || in_place ? 0 : (size_t)((R * g.sh + KH) * W * C);
    const size_t yper = out->dtype == OCR_F32 ? 0 : (size_t)(R * Wo * C);
    CpuScratch s = {0};
    float *wt = ocr_cpu_scratch_floats(&s, (size_t)(taps * C));
    int64_t *lists = ocr_cpu_scratch_bytes(&s, (size_t)maxt * 2 * (size_t)taps * sizeof(int64_t));
    float *bufs = ocr_cpu_scratch_floats(&s, (size_t)maxt * (xper + yper) + 1);
    transpose_weight(wt, weight, C, taps);
#pragma omp parallel
    {
        int t = omp_get_thread_num();
        int64_t r0, r1;
        float *xb, *yb;
        thread_range(N * Ho, t, omp_get_num_threads(), &r0, &r1);
        thread_buffers(bufs, t, xper, yper, &xb, &yb);
        int64_t *aoff = lists + 2 * t * taps, *boff = lists + (2 * t + 1) * taps;
        if (in_place)
            forward_rows_bf16(&kh, out, inp, wt, bias, &g, r0, r1, R, xb, yb, aoff, boff);
        else
            forward_rows_f32(&k, out, inp, wt, bias, &g, r0, r1, R, xb, yb, aoff, boff);
    }
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_conv2d_depthwise_backward(OcrTensor *dinp, float *dweight, float *dbias, const OcrTensor *dout,
                                       const OcrTensor *inp, const float *weight, int64_t N, int64_t H, int64_t W,
                                       int64_t C, int64_t KH, int64_t KW, int64_t Ho, int64_t Wo, Conv2dParams p) {
    const DwGeom g = dw_geom(N, H, W, C, KH, KW, Ho, Wo, p);
    const Kernels_f32 k = kernels_f32();
    Kernels_bf16 kh;
    const int have_bf16 = kernels_bf16(&kh);
    const int64_t taps = KH * KW;
    const int maxt = omp_get_max_threads();
    CpuScratch s = {0};
    if (dinp) {
        // Per thread: tap offset lists (2·taps) and the kernel-row lists (2·KH), and the blocks
        // (the output-gradient rows a block of R input rows receives from: at most R + KH).
        const int64_t per = 2 * taps + 2 * KH;
        const int64_t R = block_rows(W * C);
        // In place only where blocks would widen each output-gradient row more than twice (their
        // span of up to R + KH − 1 rows exceeds 2R): otherwise the buffer, read as fp32 KH·KW
        // times, measured faster for these loops (docs/BENCHMARKS.md, "in-register depthwise").
        const int in_place = have_bf16 && dout->dtype == OCR_BF16 && min64(R + KH - 1, Ho) > 2 * R;
        const size_t yper = dout->dtype == OCR_F32 || in_place ? 0 : (size_t)((R + KH) * Wo * C);
        const size_t xper = dinp->dtype == OCR_F32 ? 0 : (size_t)(R * W * C);
        float *wt = ocr_cpu_scratch_floats(&s, (size_t)(taps * C));
        int64_t *lists = ocr_cpu_scratch_bytes(&s, (size_t)maxt * (size_t)per * sizeof(int64_t));
        float *bufs = ocr_cpu_scratch_floats(&s, (size_t)maxt * (xper + yper) + 1);
        transpose_weight(wt, weight, C, taps);
#pragma omp parallel
        {
            int t = omp_get_thread_num();
            int64_t r0, r1, *l = lists + t * per;
            float *yb, *xb;
            thread_range(N * H, t, omp_get_num_threads(), &r0, &r1);
            thread_buffers(bufs, t, yper, xper, &yb, &xb);
            if (in_place)
                backward_data_rows_bf16(&kh, dinp, dout, wt, &g, r0, r1, R, yb, xb, l, l + taps, l + 2 * taps,
                                        l + 2 * taps + KH);
            else
                backward_data_rows_f32(&k, dinp, dout, wt, &g, r0, r1, R, yb, xb, l, l + taps, l + 2 * taps,
                                       l + 2 * taps + KH);
        }
    }
    if (dweight || dbias) {
        // Per-thread partial sums (taps·C weight, C bias) over static row ranges, reduced in
        // thread order below.
        const int64_t stride = taps * C + C;
        const int64_t R = block_rows(g.sh * W * C);
        // In place only when every map the pass reads is bf16 (the instance reads both as bf16).
        const int in_place = have_bf16 && dout->dtype == OCR_BF16 && (!dweight || inp->dtype == OCR_BF16);
        const size_t yper = dout->dtype == OCR_F32 || in_place ? 0 : (size_t)(R * Wo * C);
        const size_t xper =
            !dweight || inp->dtype == OCR_F32 || in_place ? 0 : (size_t)((R * g.sh + KH) * W * C);
        float *parts = ocr_cpu_scratch_floats(&s, (size_t)maxt * (size_t)stride);
        float *bufs = ocr_cpu_scratch_floats(&s, (size_t)maxt * (xper + yper) + 1);
        int64_t *steps = ocr_cpu_scratch_bytes(&s, 2 * (size_t)(Wo > 0 ? Wo : 1) * sizeof(int64_t));
        for (int64_t t = 0; t < Wo; t++) steps[t] = t * C, steps[Wo + t] = t * g.sw * C;
        int used = 1;
#pragma omp parallel
        {
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
            if (t == 0) used = nt;
            float *pw = parts + t * stride, *yb, *xb;
            memset(pw, 0, (size_t)stride * sizeof(float));
            int64_t r0, r1;
            thread_range(N * Ho, t, nt, &r0, &r1);
            thread_buffers(bufs, t, yper, xper, &yb, &xb);
            float *pwt = dweight ? pw : NULL, *pbt = dbias ? pw + taps * C : NULL;
            if (in_place)
                backward_weight_rows_bf16(&kh, pwt, pbt, dout, inp, &g, r0, r1, R, yb, xb, steps, steps + Wo);
            else
                backward_weight_rows_f32(&k, pwt, pbt, dout, inp, &g, r0, r1, R, yb, xb, steps, steps + Wo);
        }
        for (int t = 1; t < used; t++) {
            float *restrict p0 = parts;
            const float *restrict pt = parts + t * stride;
            for (int64_t i = 0; i < stride; i++) p0[i] += pt[i];
        }
        if (dweight)
            for (int64_t c = 0; c < C; c++)
                for (int64_t t = 0; t < taps; t++) dweight[c * taps + t] += parts[t * C + c];
        if (dbias)
            for (int64_t c = 0; c < C; c++) dbias[c] += parts[taps * C + c];
    }
    ocr_cpu_scratch_free(&s);
}

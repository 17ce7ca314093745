// Depthwise 2-D convolution (groups == C == OC) on the CPU with direct loops.
//
// NHWC keeps channels contiguous, so all three computations (forward, data gradient,
// weight gradient) reduce to one primitive on a block of channels:
//     out[j] = init[j] + Σ_t a[aoff[t] + j] · b[boff[t] + j]
// with the accumulators in registers across all terms t (the taps of one output pixel,
// the taps that read one input pixel, or the output columns of one tap). The primitive is
// written with SSE intrinsics (the x86-64 baseline), AVX2+FMA and AVX-512, chosen at run time
// (cpu_vec_level(); AVX2 and AVX-512 give the same bits: one FMA per lane and term in the same
// order); other channels fall back to plain C. The weight (C, KH, KW, 1) is transposed once to
// (KH·KW, C) so a tap's weights are contiguous. Threads take static ranges of rows, and the
// weight gradient is reduced from per-thread partial sums in thread order, so results are
// deterministic for a fixed thread count (and a given CPU: FMA rounds differently).
//
// f16/bf16 maps are read and written in their own dtype: each thread works through its rows in
// blocks, widening the input rows a block reads (cpu_rows_in) into a cache-sized buffer,
// computing the block's output rows in fp32 and rounding them once into the output. Widening
// is exact and the rounding the bulk converters', so this is bit for bit the whole-tensor
// fp32 path (kept for Global.cpu_exact_numerics), without its fp32 copies of the maps.
#include <omp.h>
#include <string.h>

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
// out[j] = (init ? init[j] : 0) + Σ_{t<n} a[aoff[t] + j] · b[boff[t] + j] for j < width.
// init may equal out (accumulate).
typedef void (*dot_fn)(float *out, const float *init, const float *a, const int64_t *aoff, const float *b,
                       const int64_t *boff, int64_t n);

static void dot_scalar(float *out, const float *init, const float *a, const int64_t *aoff, const float *b,
                       const int64_t *boff, int64_t n, int64_t width) {
    for (int64_t j = 0; j < width; j++) {
        float acc = init ? init[j] : 0.0f;
        for (int64_t t = 0; t < n; t++) acc += a[aoff[t] + j] * b[boff[t] + j];
        out[j] = acc;
    }
}
static void dot32_c(float *out, const float *init, const float *a, const int64_t *aoff, const float *b,
                    const int64_t *boff, int64_t n) {
    dot_scalar(out, init, a, aoff, b, boff, n, 32);
}
static void dot8_c(float *out, const float *init, const float *a, const int64_t *aoff, const float *b,
                   const int64_t *boff, int64_t n) {
    dot_scalar(out, init, a, aoff, b, boff, n, 8);
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
__attribute__((target("avx2,fma"))) static void dot32_avx2(float *out, const float *init, const float *a,
                                                           const int64_t *aoff, const float *b, const int64_t *boff,
                                                           int64_t n) {
    __m256 s0, s1, s2, s3;
    if (init) {
        s0 = _mm256_loadu_ps(init), s1 = _mm256_loadu_ps(init + 8);
        s2 = _mm256_loadu_ps(init + 16), s3 = _mm256_loadu_ps(init + 24);
    } else {
        s0 = s1 = s2 = s3 = _mm256_setzero_ps();
    }
    for (int64_t t = 0; t < n; t++) {
        const float *ap = a + aoff[t], *bp = b + boff[t];
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(ap), _mm256_loadu_ps(bp), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(ap + 8), _mm256_loadu_ps(bp + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(ap + 16), _mm256_loadu_ps(bp + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(ap + 24), _mm256_loadu_ps(bp + 24), s3);
    }
    _mm256_storeu_ps(out, s0), _mm256_storeu_ps(out + 8, s1);
    _mm256_storeu_ps(out + 16, s2), _mm256_storeu_ps(out + 24, s3);
}
__attribute__((target("avx2,fma"))) static void dot8_avx2(float *out, const float *init, const float *a,
                                                          const int64_t *aoff, const float *b, const int64_t *boff,
                                                          int64_t n) {
    __m256 s = init ? _mm256_loadu_ps(init) : _mm256_setzero_ps();
    for (int64_t t = 0; t < n; t++) s = _mm256_fmadd_ps(_mm256_loadu_ps(a + aoff[t]), _mm256_loadu_ps(b + boff[t]), s);
    _mm256_storeu_ps(out, s);
}
// Two outputs sharing b: out1 = init1 + Σ a[aoff[t] + as + j] · b[boff[t] + j]. Halves the
// loads of the shared operand, which is what bounds these loops.
__attribute__((target("avx2,fma"))) static void dot32x2_avx2(float *out0, float *out1, const float *init0,
                                                             const float *init1, const float *a, const int64_t *aoff,
                                                             int64_t as, const float *b, const int64_t *boff,
                                                             int64_t n) {
    __m256 s00, s01, s02, s03, s10, s11, s12, s13;
    if (init0) {
        s00 = _mm256_loadu_ps(init0), s01 = _mm256_loadu_ps(init0 + 8);
        s02 = _mm256_loadu_ps(init0 + 16), s03 = _mm256_loadu_ps(init0 + 24);
    } else {
        s00 = s01 = s02 = s03 = _mm256_setzero_ps();
    }
    if (init1) {
        s10 = _mm256_loadu_ps(init1), s11 = _mm256_loadu_ps(init1 + 8);
        s12 = _mm256_loadu_ps(init1 + 16), s13 = _mm256_loadu_ps(init1 + 24);
    } else {
        s10 = s11 = s12 = s13 = _mm256_setzero_ps();
    }
    for (int64_t t = 0; t < n; t++) {
        const float *a0 = a + aoff[t], *a1 = a0 + as, *bp = b + boff[t];
        const __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
        const __m256 b2 = _mm256_loadu_ps(bp + 16), b3 = _mm256_loadu_ps(bp + 24);
        s00 = _mm256_fmadd_ps(_mm256_loadu_ps(a0), b0, s00);
        s01 = _mm256_fmadd_ps(_mm256_loadu_ps(a0 + 8), b1, s01);
        s02 = _mm256_fmadd_ps(_mm256_loadu_ps(a0 + 16), b2, s02);
        s03 = _mm256_fmadd_ps(_mm256_loadu_ps(a0 + 24), b3, s03);
        s10 = _mm256_fmadd_ps(_mm256_loadu_ps(a1), b0, s10);
        s11 = _mm256_fmadd_ps(_mm256_loadu_ps(a1 + 8), b1, s11);
        s12 = _mm256_fmadd_ps(_mm256_loadu_ps(a1 + 16), b2, s12);
        s13 = _mm256_fmadd_ps(_mm256_loadu_ps(a1 + 24), b3, s13);
    }
    _mm256_storeu_ps(out0, s00), _mm256_storeu_ps(out0 + 8, s01);
    _mm256_storeu_ps(out0 + 16, s02), _mm256_storeu_ps(out0 + 24, s03);
    _mm256_storeu_ps(out1, s10), _mm256_storeu_ps(out1 + 8, s11);
    _mm256_storeu_ps(out1 + 16, s12), _mm256_storeu_ps(out1 + 24, s13);
}
__attribute__((target("avx2,fma"))) static void dot8x2_avx2(float *out0, float *out1, const float *init0,
                                                            const float *init1, const float *a, const int64_t *aoff,
                                                            int64_t as, const float *b, const int64_t *boff,
                                                            int64_t n) {
    __m256 s0 = init0 ? _mm256_loadu_ps(init0) : _mm256_setzero_ps();
    __m256 s1 = init1 ? _mm256_loadu_ps(init1) : _mm256_setzero_ps();
    for (int64_t t = 0; t < n; t++) {
        const float *a0 = a + aoff[t];
        const __m256 bv = _mm256_loadu_ps(b + boff[t]);
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a0), bv, s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a0 + as), bv, s1);
    }
    _mm256_storeu_ps(out0, s0);
    _mm256_storeu_ps(out1, s1);
}
// AVX-512: the same sums in 16-lane registers (the same FMA per lane and term as AVX2).
CPU_TARGET_AVX512 __attribute__((target("fma"))) static void dot32_avx512(float *out, const float *init,
                                                                        const float *a, const int64_t *aoff,
                                                                        const float *b, const int64_t *boff,
                                                                        int64_t n) {
    __m512 s0 = init ? _mm512_loadu_ps(init) : _mm512_setzero_ps();
    __m512 s1 = init ? _mm512_loadu_ps(init + 16) : _mm512_setzero_ps();
    for (int64_t t = 0; t < n; t++) {
        const float *ap = a + aoff[t], *bp = b + boff[t];
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(ap), _mm512_loadu_ps(bp), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(ap + 16), _mm512_loadu_ps(bp + 16), s1);
    }
    _mm512_storeu_ps(out, s0), _mm512_storeu_ps(out + 16, s1);
}
CPU_TARGET_AVX512 __attribute__((target("fma"))) static void dot32x2_avx512(float *out0, float *out1,
                                                                          const float *init0, const float *init1,
                                                                          const float *a, const int64_t *aoff,
                                                                          int64_t as, const float *b,
                                                                          const int64_t *boff, int64_t n) {
    __m512 s00 = init0 ? _mm512_loadu_ps(init0) : _mm512_setzero_ps();
    __m512 s01 = init0 ? _mm512_loadu_ps(init0 + 16) : _mm512_setzero_ps();
    __m512 s10 = init1 ? _mm512_loadu_ps(init1) : _mm512_setzero_ps();
    __m512 s11 = init1 ? _mm512_loadu_ps(init1 + 16) : _mm512_setzero_ps();
    for (int64_t t = 0; t < n; t++) {
        const float *a0 = a + aoff[t], *a1 = a0 + as, *bp = b + boff[t];
        const __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16);
        s00 = _mm512_fmadd_ps(_mm512_loadu_ps(a0), b0, s00);
        s01 = _mm512_fmadd_ps(_mm512_loadu_ps(a0 + 16), b1, s01);
        s10 = _mm512_fmadd_ps(_mm512_loadu_ps(a1), b0, s10);
        s11 = _mm512_fmadd_ps(_mm512_loadu_ps(a1 + 16), b1, s11);
    }
    _mm512_storeu_ps(out0, s00), _mm512_storeu_ps(out0 + 16, s01);
    _mm512_storeu_ps(out1, s10), _mm512_storeu_ps(out1 + 16, s11);
}
#endif

typedef void (*dot2_fn)(float *out0, float *out1, const float *init0, const float *init1, const float *a,
                        const int64_t *aoff, int64_t as, const float *b, const int64_t *boff, int64_t n);

typedef struct {
    dot_fn dot32, dot8;
    dot2_fn dot32x2, dot8x2;  // NULL: two single calls
} DotKernels;

static DotKernels dot_kernels(void) {
    DotKernels k = {dot32_c, dot8_c, NULL, NULL};
#ifdef DW_X86
    const CpuVecLevel level = cpu_vec_level();
    if (level >= CPU_VEC_AVX2 && ocr_cpu_features()->fma) {
        k.dot32 = dot32_avx2, k.dot8 = dot8_avx2, k.dot32x2 = dot32x2_avx2, k.dot8x2 = dot8x2_avx2;
        if (level >= CPU_VEC_AVX512) k.dot32 = dot32_avx512, k.dot32x2 = dot32x2_avx512;
    } else {
        k.dot32 = dot32_sse, k.dot8 = dot8_sse;
    }
#endif
    return k;
}

#define OFF(p, c) ((p) ? (p) + (c) : NULL)

// All channels of one pixel: blocks of 32, then of 8, then the scalar rest.
static inline void dot_channels(const DotKernels *k, int64_t C, float *out, const float *init, const float *a,
                                const int64_t *aoff, const float *b, const int64_t *boff, int64_t n) {
    int64_t c = 0;
    for (; c + 32 <= C; c += 32) k->dot32(out + c, OFF(init, c), a + c, aoff, b + c, boff, n);
    for (; c + 8 <= C; c += 8) k->dot8(out + c, OFF(init, c), a + c, aoff, b + c, boff, n);
    if (c < C) dot_scalar(out + c, OFF(init, c), a + c, aoff, b + c, boff, n, C - c);
}

// Two outputs whose terms differ only by a shift `as` of the a operand.
static inline void dot_channels2(const DotKernels *k, int64_t C, float *out0, float *out1, const float *init0,
                                 const float *init1, const float *a, const int64_t *aoff, int64_t as, const float *b,
                                 const int64_t *boff, int64_t n) {
    int64_t c = 0;
    if (k->dot32x2) {
        for (; c + 32 <= C; c += 32)
            k->dot32x2(out0 + c, out1 + c, OFF(init0, c), OFF(init1, c), a + c, aoff, as, b + c, boff, n);
        for (; c + 8 <= C; c += 8)
            k->dot8x2(out0 + c, out1 + c, OFF(init0, c), OFF(init1, c), a + c, aoff, as, b + c, boff, n);
    }
    if (c < C) {
        dot_channels(k, C - c, out0 + c, OFF(init0, c), a + c, aoff, b + c, boff, n);
        dot_channels(k, C - c, out1 + c, OFF(init1, c), a + as + c, aoff, b + c, boff, n);
    }
}

typedef struct {
    int64_t N, H, W, C, KH, KW, Ho, Wo;
    int64_t sh, sw, ph, pw;
} DwGeom;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

// ---- forward: output row oh of one image ---------------------------------------------------
// xs holds the image's input rows from row xs_row0 on (in fp32); y is the output row (Wo·C).
// The tap list of a pixel depends only on which kernel columns fall inside the image, so it
// is rebuilt only when that range changes (at the borders).
static void forward_row(const DotKernels *k, float *y, const float *xs, int64_t xs_row0, const float *wt,
                        const float *bias, const DwGeom *g, int64_t oh, int64_t *aoff, int64_t *boff) {
    const int64_t C = g->C, ih0 = oh * g->sh - g->ph;
    const int64_t kh_lo = max64(0, -ih0), kh_hi = min64(g->KH, g->H - ih0);
    int64_t cached_lo = -1, cached_hi = -1, nt = 0;
    for (int64_t ow = 0; ow < g->Wo; ow++) {
        const int64_t iw0 = ow * g->sw - g->pw;
        const int64_t kw_lo = max64(0, -iw0), kw_hi = min64(g->KW, g->W - iw0);
        float *yp = y + ow * C;
        if (kh_lo >= kh_hi || kw_lo >= kw_hi) {  // window entirely in the padding
            for (int64_t c = 0; c < C; c++) yp[c] = bias ? bias[c] : 0.0f;
            continue;
        }
        // The next pixel with the same tap columns shares the weight loads.
        const int pair = ow + 1 < g->Wo && max64(0, -(iw0 + g->sw)) == kw_lo &&
                         min64(g->KW, g->W - iw0 - g->sw) == kw_hi;
        if (kw_lo != cached_lo || kw_hi != cached_hi) {
            nt = 0;
            for (int64_t kh = kh_lo; kh < kh_hi; kh++)
                for (int64_t kw = kw_lo; kw < kw_hi; kw++, nt++) {
                    aoff[nt] = ((kh - kh_lo) * g->W + (kw - kw_lo)) * C;
                    boff[nt] = (kh * g->KW + kw) * C;
                }
            cached_lo = kw_lo, cached_hi = kw_hi;
        }
        const float *xbase = xs + ((ih0 + kh_lo - xs_row0) * g->W + iw0 + kw_lo) * C;
        if (pair) {
            dot_channels2(k, C, yp, yp + C, bias, bias, xbase, aoff, g->sw * C, wt, boff, nt);
            ow++;
        } else {
            dot_channels(k, C, yp, bias, xbase, aoff, wt, boff, nt);
        }
    }
}

// Output rows [r0, r1) of the N·Ho rows, in blocks of up to R rows of one image: the block's
// input rows are widened once (xbuf), its output rows computed into ybuf and rounded once
// (both NULL for f32 maps, which are used in place).
static void forward_rows(const DotKernels *k, OcrTensor *out, const OcrTensor *inp, const float *wt,
                         const float *bias, const DwGeom *g, int64_t r0, int64_t r1, int64_t R, float *xbuf,
                         float *ybuf, int64_t *aoff, int64_t *boff) {
    const int64_t xrow = g->W * g->C, yrow = g->Wo * g->C;
    for (int64_t r = r0; r < r1;) {
        const int64_t n = r / g->Ho, oh0 = r % g->Ho;
        const int64_t nb = min64(R, min64(g->Ho - oh0, r1 - r));
        const int64_t lo = max64(0, oh0 * g->sh - g->ph);
        const int64_t hi = min64(g->H, (oh0 + nb - 1) * g->sh - g->ph + g->KH);
        const float *xs = lo < hi ? cpu_rows_in(inp, xrow, n * g->H + lo, hi - lo, xbuf) : NULL;
        float *y = cpu_rows_dst(out, yrow, r, ybuf);
        for (int64_t j = 0; j < nb; j++) forward_row(k, y + j * yrow, xs, lo, wt, bias, g, oh0 + j, aoff, boff);
        cpu_rows_out(out, yrow, r, nb, y);
        r += nb;
    }
}

// Kernel columns that read input column iw: kw = kw0 + j·sw for output column ow = q0 − j,
// with j in [j_lo, j_hi) keeping kw < KW and 0 <= ow < Wo.
static void column_taps(const DwGeom *g, int64_t iw, int64_t *kw0, int64_t *q0, int64_t *j_lo, int64_t *j_hi) {
    *kw0 = (iw + g->pw) % g->sw;
    *q0 = (iw + g->pw - *kw0) / g->sw;
    const int64_t nj = *kw0 < g->KW ? (g->KW - *kw0 + g->sw - 1) / g->sw : 0;
    *j_lo = max64(0, *q0 - (g->Wo - 1));
    *j_hi = min64(nj, *q0 + 1);
}

// ---- data gradient: input row ih of one image (gather, assigned) ------------------------------
// dys holds the image's output-gradient rows from row dys_row0 on; dx is the input row (W·C).
// Input pixel (ih, iw) is read by kernel row kh of output row oh = (ih + ph − kh) / sh when
// that divides exactly and lands inside; likewise for columns.
static void backward_data_row(const DotKernels *k, float *dx, const float *dys, int64_t dys_row0, const float *wt,
                              const DwGeom *g, int64_t ih, int64_t *aoff, int64_t *boff, int64_t *khs, int64_t *ohs) {
    const int64_t C = g->C;
    int64_t nk = 0;
    for (int64_t kh = (ih + g->ph) % g->sh; kh < g->KH; kh += g->sh) {
        int64_t t = ih + g->ph - kh;
        if (t < 0) break;  // kh only grows
        if (t / g->sh >= g->Ho) continue;
        khs[nk] = kh, ohs[nk] = t / g->sh, nk++;
    }
    // Columns in classes of equal iw mod sw: pixel iw + sw reads the same taps as iw, one
    // output column on, so pairs of them share the weight loads.
    for (int64_t res = 0; res < g->sw && res < g->W; res++) {
        int64_t cached_jlo = -1, cached_jhi = -1, nt = 0;
        for (int64_t iw = res; iw < g->W; iw += g->sw) {
            float *dxp = dx + iw * C;
            // Columns: kw = kw0 + j·sw, ow = q0 − j, valid for j in [j_lo, j_hi).
            int64_t kw0, q0, j_lo, j_hi;
            column_taps(g, iw, &kw0, &q0, &j_lo, &j_hi);
            if (nk == 0 || j_lo >= j_hi) {
                memset(dxp, 0, (size_t)C * sizeof(float));
                continue;
            }
            int pair = 0;
            if (iw + g->sw < g->W) {
                int64_t kw0b, q0b, j_lob, j_hib;
                column_taps(g, iw + g->sw, &kw0b, &q0b, &j_lob, &j_hib);
                pair = kw0b == kw0 && j_lob == j_lo && j_hib == j_hi && q0b == q0 + 1;
            }
            if (j_lo != cached_jlo || j_hi != cached_jhi) {  // kw0 is fixed within the class
                nt = 0;
                for (int64_t a = 0; a < nk; a++)
                    for (int64_t j = j_lo; j < j_hi; j++, nt++) {
                        // Relative to the pixel (ohs[0], q0 − j_lo); ow = q0 − j.
                        aoff[nt] = ((ohs[a] - ohs[0]) * g->Wo - (j - j_lo)) * C;
                        boff[nt] = (khs[a] * g->KW + kw0 + j * g->sw) * C;
                    }
                cached_jlo = j_lo, cached_jhi = j_hi;
            }
            const float *dybase = dys + ((ohs[0] - dys_row0) * g->Wo + q0 - j_lo) * C;
            if (pair) {
                dot_channels2(k, C, dxp, dxp + g->sw * C, NULL, NULL, dybase, aoff, C, wt, boff, nt);
                iw += g->sw;
            } else {
                dot_channels(k, C, dxp, NULL, dybase, aoff, wt, boff, nt);
            }
        }
    }
}

// Input rows [r0, r1) of the N·H rows in blocks of up to R rows of one image (as forward_rows).
static void backward_data_rows(const DotKernels *k, OcrTensor *dinp, const OcrTensor *dout, const float *wt,
                               const DwGeom *g, int64_t r0, int64_t r1, int64_t R, float *dybuf, float *dxbuf,
                               int64_t *aoff, int64_t *boff, int64_t *khs, int64_t *ohs) {
    const int64_t xrow = g->W * g->C, yrow = g->Wo * g->C;
    for (int64_t r = r0; r < r1;) {
        const int64_t n = r / g->H, ih0 = r % g->H;
        const int64_t nb = min64(R, min64(g->H - ih0, r1 - r));
        // Output rows the block's input rows receive from: oh = (ih + ph − kh) / sh, kh < KH.
        const int64_t t_lo = ih0 + g->ph - g->KH + 1;
        const int64_t lo = t_lo <= 0 ? 0 : (t_lo + g->sh - 1) / g->sh;
        const int64_t hi = min64(g->Ho, (ih0 + nb - 1 + g->ph) / g->sh + 1);
        const float *dys = lo < hi ? cpu_rows_in(dout, yrow, n * g->Ho + lo, hi - lo, dybuf) : NULL;
        float *dx = cpu_rows_dst(dinp, xrow, r, dxbuf);
        for (int64_t j = 0; j < nb; j++)
            backward_data_row(k, dx + j * xrow, dys, lo, wt, g, ih0 + j, aoff, boff, khs, ohs);
        cpu_rows_out(dinp, xrow, r, nb, dx);
        r += nb;
    }
}

// Output columns [ow_lo, ow_hi) whose input column ow·sw − pw + kw lies inside the image.
static void tap_columns(const DwGeom *g, int64_t kw, int64_t *ow_lo, int64_t *ow_hi) {
    int64_t lo = g->pw - kw, hi = g->W + g->pw - kw;  // lo <= ow·sw < hi
    *ow_lo = lo <= 0 ? 0 : (lo + g->sw - 1) / g->sw;
    *ow_hi = hi <= 0 ? 0 : min64(g->Wo, (hi + g->sw - 1) / g->sw);
}

// pt (C) += Σ_{ow in [lo, hi)} dout[ow] · inp[ow·sw − pw + kw] on one input row.
static void weight_span(const DotKernels *k, const DwGeom *g, float *pt, const float *dyrow, const float *xrow,
                        int64_t kw, int64_t lo, int64_t hi, const int64_t *aoff, const int64_t *boff) {
    if (lo >= hi) return;
    dot_channels(k, g->C, pt, pt, dyrow + lo * g->C, aoff, xrow + (lo * g->sw - g->pw + kw) * g->C, boff, hi - lo);
}

// ---- weight/bias gradient: partial sums over one output row -----------------------------------
// pw (KH·KW, C) += Σ_ow dout[ow] · inp[ow·sw − pw + kw] per tap; pb (C) += Σ dout. dyrow is the
// output-gradient row, xs the image's input rows from row xs_row0 on.
// aoff/boff hold the fixed strides t·C and t·sw·C (t < Wo).
static void backward_weight_row(const DotKernels *k, float *pw, float *pb, const float *dyrow, const float *xs,
                                int64_t xs_row0, const DwGeom *g, int64_t oh, const int64_t *aoff,
                                const int64_t *boff) {
    const int64_t C = g->C, ih0 = oh * g->sh - g->ph;
    const int64_t kh_lo = max64(0, -ih0), kh_hi = min64(g->KH, g->H - ih0);
    if (pb) {
        for (int64_t ow = 0; ow < g->Wo; ow++) {
            const float *restrict d = dyrow + ow * C;
            float *restrict acc = pb;
            for (int64_t c = 0; c < C; c++) acc[c] += d[c];
        }
    }
    if (!pw) return;
    for (int64_t kh = kh_lo; kh < kh_hi; kh++) {
        const float *xrow = xs + (ih0 + kh - xs_row0) * g->W * C;
        // Taps in pairs (kw, kw+1): over the output columns both see, one call shares the
        // dout loads (the input operand of kw+1 is one pixel further, and tap kw+1's
        // partial sums are pt + C); border columns that only one of them sees go alone.
        for (int64_t kw = 0; kw < g->KW; kw += 2) {
            float *pt = pw + (kh * g->KW + kw) * C;
            int64_t lo0, hi0, lo1 = 0, hi1 = 0;
            tap_columns(g, kw, &lo0, &hi0);
            if (kw + 1 < g->KW) tap_columns(g, kw + 1, &lo1, &hi1);
            const int64_t lo = max64(lo0, lo1), hi = min64(hi0, hi1);
            if (kw + 1 < g->KW && lo < hi) {
                dot_channels2(k, C, pt, pt + C, pt, pt + C, xrow + (lo * g->sw - g->pw + kw) * C, boff, C,
                              dyrow + lo * C, aoff, hi - lo);
                weight_span(k, g, pt, dyrow, xrow, kw, lo0, lo, aoff, boff);
                weight_span(k, g, pt, dyrow, xrow, kw, hi, hi0, aoff, boff);
                weight_span(k, g, pt + C, dyrow, xrow, kw + 1, lo1, lo, aoff, boff);
                weight_span(k, g, pt + C, dyrow, xrow, kw + 1, hi, hi1, aoff, boff);
            } else {
                weight_span(k, g, pt, dyrow, xrow, kw, lo0, hi0, aoff, boff);
                if (kw + 1 < g->KW) weight_span(k, g, pt + C, dyrow, xrow, kw + 1, lo1, hi1, aoff, boff);
            }
        }
    }
}

// Output rows [r0, r1) of the N·Ho rows in blocks of up to R rows of one image: the block's
// output-gradient rows and the input rows they see are widened once per block.
static void backward_weight_rows(const DotKernels *k, float *pw, float *pb, const OcrTensor *dout,
                                 const OcrTensor *inp, const DwGeom *g, int64_t r0, int64_t r1, int64_t R,
                                 float *dybuf, float *xbuf, const int64_t *aoff, const int64_t *boff) {
    const int64_t xrow = g->W * g->C, yrow = g->Wo * g->C;
    for (int64_t r = r0; r < r1;) {
        const int64_t n = r / g->Ho, oh0 = r % g->Ho;
        const int64_t nb = min64(R, min64(g->Ho - oh0, r1 - r));
        const float *dy = cpu_rows_in(dout, yrow, r, nb, dybuf);
        const float *xs = NULL;
        int64_t lo = 0;
        if (pw) {
            lo = max64(0, oh0 * g->sh - g->ph);
            const int64_t hi = min64(g->H, (oh0 + nb - 1) * g->sh - g->ph + g->KH);
            if (lo < hi) xs = cpu_rows_in(inp, xrow, n * g->H + lo, hi - lo, xbuf);
        }
        for (int64_t j = 0; j < nb; j++)
            backward_weight_row(k, pw, pb, dy + j * yrow, xs, lo, g, oh0 + j, aoff, boff);
        r += nb;
    }
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

void cpu_conv2d_depthwise_forward(OcrTensor *out, const OcrTensor *inp, const float *weight, const float *bias,
                                  int64_t N, int64_t H, int64_t W, int64_t C, int64_t KH, int64_t KW, int64_t Ho,
                                  int64_t Wo, Conv2dParams p) {
    const DwGeom g = dw_geom(N, H, W, C, KH, KW, Ho, Wo, p);
    const DotKernels k = dot_kernels();
    const int64_t taps = KH * KW;
    const int maxt = omp_get_max_threads();
    const int64_t R = block_rows(g.sh * W * C);
    const size_t xper = inp->dtype == OCR_F32 ? 0 : (size_t)((R * g.sh + KH) * W * C);
    const size_t yper = out->dtype == OCR_F32 ? 0 : (size_t)(R * Wo * C);
    CpuScratch s = {0};
    float *wt = cpu_scratch_floats(&s, (size_t)(taps * C));
    int64_t *lists = cpu_scratch_bytes(&s, (size_t)maxt * 2 * (size_t)taps * sizeof(int64_t));
    float *bufs = cpu_scratch_floats(&s, (size_t)maxt * (xper + yper) + 1);
    transpose_weight(wt, weight, C, taps);
#pragma omp parallel
    {
        int t = omp_get_thread_num();
        int64_t r0, r1;
        float *xb, *yb;
        thread_range(N * Ho, t, omp_get_num_threads(), &r0, &r1);
        thread_buffers(bufs, t, xper, yper, &xb, &yb);
        forward_rows(&k, out, inp, wt, bias, &g, r0, r1, R, xb, yb, lists + 2 * t * taps, lists + (2 * t + 1) * taps);
    }
    cpu_scratch_free(&s);
}

void cpu_conv2d_depthwise_backward(OcrTensor *dinp, float *dweight, float *dbias, const OcrTensor *dout,
                                   const OcrTensor *inp, const float *weight, int64_t N, int64_t H, int64_t W,
                                   int64_t C, int64_t KH, int64_t KW, int64_t Ho, int64_t Wo, Conv2dParams p) {
    const DwGeom g = dw_geom(N, H, W, C, KH, KW, Ho, Wo, p);
    const DotKernels k = dot_kernels();
    const int64_t taps = KH * KW;
    const int maxt = omp_get_max_threads();
    CpuScratch s = {0};
    if (dinp) {
        // Per thread: tap offset lists (2·taps) and the kernel-row lists (2·KH), and the blocks
        // (the output-gradient rows a block of R input rows receives from: at most R + KH).
        const int64_t per = 2 * taps + 2 * KH;
        const int64_t R = block_rows(W * C);
        const size_t yper = dout->dtype == OCR_F32 ? 0 : (size_t)((R + KH) * Wo * C);
        const size_t xper = dinp->dtype == OCR_F32 ? 0 : (size_t)(R * W * C);
        float *wt = cpu_scratch_floats(&s, (size_t)(taps * C));
        int64_t *lists = cpu_scratch_bytes(&s, (size_t)maxt * (size_t)per * sizeof(int64_t));
        float *bufs = cpu_scratch_floats(&s, (size_t)maxt * (xper + yper) + 1);
        transpose_weight(wt, weight, C, taps);
#pragma omp parallel
        {
            int t = omp_get_thread_num();
            int64_t r0, r1, *l = lists + t * per;
            float *yb, *xb;
            thread_range(N * H, t, omp_get_num_threads(), &r0, &r1);
            thread_buffers(bufs, t, yper, xper, &yb, &xb);
            backward_data_rows(&k, dinp, dout, wt, &g, r0, r1, R, yb, xb, l, l + taps, l + 2 * taps,
                               l + 2 * taps + KH);
        }
    }
    if (dweight || dbias) {
        // Per-thread partial sums (taps·C weight, C bias) over static row ranges, reduced in
        // thread order below.
        const int64_t stride = taps * C + C;
        const int64_t R = block_rows(g.sh * W * C);
        const size_t yper = dout->dtype == OCR_F32 ? 0 : (size_t)(R * Wo * C);
        const size_t xper = !dweight || inp->dtype == OCR_F32 ? 0 : (size_t)((R * g.sh + KH) * W * C);
        float *parts = cpu_scratch_floats(&s, (size_t)maxt * (size_t)stride);
        float *bufs = cpu_scratch_floats(&s, (size_t)maxt * (xper + yper) + 1);
        int64_t *steps = cpu_scratch_bytes(&s, 2 * (size_t)(Wo > 0 ? Wo : 1) * sizeof(int64_t));
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
            backward_weight_rows(&k, dweight ? pw : NULL, dbias ? pw + taps * C : NULL, dout, inp, &g, r0, r1, R,
                                 yb, xb, steps, steps + Wo);
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
    cpu_scratch_free(&s);
}

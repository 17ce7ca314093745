// Depthwise 2-D convolution (groups == C == OC) on the CPU with direct loops.
//
// NHWC keeps channels contiguous, so all three computations (forward, data gradient,
// weight gradient) reduce to one primitive on a block of channels:
//     out[j] = init[j] + Σ_t a[aoff[t] + j] · b[boff[t] + j]
// with the accumulators in registers across all terms t (the taps of one output pixel,
// the taps that read one input pixel, or the output columns of one tap). The primitive is
// written with SSE intrinsics (the x86-64 baseline) and with AVX2+FMA, chosen once at run
// time; other channels fall back to plain C. The weight (C, KH, KW, 1) is transposed once to
// (KH·KW, C) so a tap's weights are contiguous. Threads take static ranges of rows, and the
// weight gradient is reduced from per-thread partial sums in thread order, so results are
// deterministic for a fixed thread count (and a given CPU: FMA rounds differently).
#include <omp.h>
#include <string.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/ops.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DW_X86 1
#endif

void cpu_conv2d_depthwise_forward(float *out, const float *inp, const float *weight, const float *bias, int64_t N,
                                  int64_t H, int64_t W, int64_t C, int64_t KH, int64_t KW, int64_t Ho, int64_t Wo,
                                  Conv2dParams p);
void cpu_conv2d_depthwise_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                                   const float *weight, int64_t N, int64_t H, int64_t W, int64_t C, int64_t KH,
                                   int64_t KW, int64_t Ho, int64_t Wo, Conv2dParams p);

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
#endif

typedef struct {
    dot_fn dot32, dot8;
} DotKernels;

static DotKernels dot_kernels(void) {
    DotKernels k = {dot32_c, dot8_c};
#ifdef DW_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        k.dot32 = dot32_avx2, k.dot8 = dot8_avx2;
    } else {
        k.dot32 = dot32_sse, k.dot8 = dot8_sse;
    }
#endif
    return k;
}

// All channels of one pixel: blocks of 32, then of 8, then the scalar rest.
static inline void dot_channels(const DotKernels *k, int64_t C, float *out, const float *init, const float *a,
                                const int64_t *aoff, const float *b, const int64_t *boff, int64_t n) {
    int64_t c = 0;
    for (; c + 32 <= C; c += 32) k->dot32(out + c, init ? init + c : NULL, a + c, aoff, b + c, boff, n);
    for (; c + 8 <= C; c += 8) k->dot8(out + c, init ? init + c : NULL, a + c, aoff, b + c, boff, n);
    if (c < C) dot_scalar(out + c, init ? init + c : NULL, a + c, aoff, b + c, boff, n, C - c);
}

typedef struct {
    int64_t N, H, W, C, KH, KW, Ho, Wo;
    int64_t sh, sw, ph, pw;
} DwGeom;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

// ---- forward: output rows [r0, r1) of the N·Ho rows ---------------------------------------
// The tap list of a pixel depends only on which kernel columns fall inside the image, so it
// is rebuilt only when that range changes (at the borders).
static void forward_rows(const DotKernels *k, float *y, const float *x, const float *wt, const float *bias,
                         const DwGeom *g, int64_t r0, int64_t r1, int64_t *aoff, int64_t *boff) {
    const int64_t C = g->C;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t n = r / g->Ho, oh = r % g->Ho, ih0 = oh * g->sh - g->ph;
        const int64_t kh_lo = max64(0, -ih0), kh_hi = min64(g->KH, g->H - ih0);
        const float *ximg = x + n * g->H * g->W * C;
        int64_t cached_lo = -1, cached_hi = -1, nt = 0;
        for (int64_t ow = 0; ow < g->Wo; ow++) {
            const int64_t iw0 = ow * g->sw - g->pw;
            const int64_t kw_lo = max64(0, -iw0), kw_hi = min64(g->KW, g->W - iw0);
            float *yp = y + (r * g->Wo + ow) * C;
            if (kh_lo >= kh_hi || kw_lo >= kw_hi) {  // window entirely in the padding
                for (int64_t c = 0; c < C; c++) yp[c] = bias ? bias[c] : 0.0f;
                continue;
            }
            if (kw_lo != cached_lo || kw_hi != cached_hi) {
                nt = 0;
                for (int64_t kh = kh_lo; kh < kh_hi; kh++)
                    for (int64_t kw = kw_lo; kw < kw_hi; kw++, nt++) {
                        aoff[nt] = ((kh - kh_lo) * g->W + (kw - kw_lo)) * C;
                        boff[nt] = (kh * g->KW + kw) * C;
                    }
                cached_lo = kw_lo, cached_hi = kw_hi;
            }
            const float *xbase = ximg + ((ih0 + kh_lo) * g->W + iw0 + kw_lo) * C;
            dot_channels(k, C, yp, bias, xbase, aoff, wt, boff, nt);
        }
    }
}

// ---- data gradient: input rows [r0, r1) of the N·H rows (gather, assigned) ----------------
// Input pixel (ih, iw) is read by kernel row kh of output row oh = (ih + ph − kh) / sh when
// that divides exactly and lands inside; likewise for columns.
static void backward_data_rows(const DotKernels *k, float *dx, const float *dy, const float *wt, const DwGeom *g,
                               int64_t r0, int64_t r1, int64_t *aoff, int64_t *boff, int64_t *khs, int64_t *ohs) {
    const int64_t C = g->C;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t n = r / g->H, ih = r % g->H;
        const float *dyimg = dy + n * g->Ho * g->Wo * C;
        int64_t nk = 0;
        for (int64_t kh = (ih + g->ph) % g->sh; kh < g->KH; kh += g->sh) {
            int64_t t = ih + g->ph - kh;
            if (t < 0) break;  // kh only grows
            if (t / g->sh >= g->Ho) continue;
            khs[nk] = kh, ohs[nk] = t / g->sh, nk++;
        }
        int64_t cached_kw0 = -1, cached_jlo = -1, cached_jhi = -1, nt = 0;
        for (int64_t iw = 0; iw < g->W; iw++) {
            float *dxp = dx + (r * g->W + iw) * C;
            // Columns: kw = kw0 + j·sw, ow = q0 − j, valid for j in [j_lo, j_hi).
            const int64_t kw0 = (iw + g->pw) % g->sw, q0 = (iw + g->pw - kw0) / g->sw;
            const int64_t nj = kw0 < g->KW ? (g->KW - kw0 + g->sw - 1) / g->sw : 0;
            const int64_t j_lo = max64(0, q0 - (g->Wo - 1)), j_hi = min64(nj, q0 + 1);
            if (nk == 0 || j_lo >= j_hi) {
                memset(dxp, 0, (size_t)C * sizeof(float));
                continue;
            }
            if (kw0 != cached_kw0 || j_lo != cached_jlo || j_hi != cached_jhi) {
                nt = 0;
                for (int64_t a = 0; a < nk; a++)
                    for (int64_t j = j_lo; j < j_hi; j++, nt++) {
                        // Relative to the pixel (ohs[0], q0 − j_lo); ow = q0 − j.
                        aoff[nt] = ((ohs[a] - ohs[0]) * g->Wo - (j - j_lo)) * C;
                        boff[nt] = (khs[a] * g->KW + kw0 + j * g->sw) * C;
                    }
                cached_kw0 = kw0, cached_jlo = j_lo, cached_jhi = j_hi;
            }
            const float *dybase = dyimg + (ohs[0] * g->Wo + q0 - j_lo) * C;
            dot_channels(k, C, dxp, NULL, dybase, aoff, wt, boff, nt);
        }
    }
}

// ---- weight/bias gradient: partial sums over output rows [r0, r1) -------------------------
// pw (KH·KW, C) += Σ_ow dout[ow] · inp[ow·sw − pw + kw] per tap; pb (C) += Σ dout.
// aoff/boff hold the fixed strides t·C and t·sw·C (t < Wo).
static void backward_weight_rows(const DotKernels *k, float *pw, float *pb, const float *dy, const float *x,
                                 const DwGeom *g, int64_t r0, int64_t r1, const int64_t *aoff, const int64_t *boff) {
    const int64_t C = g->C;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t n = r / g->Ho, oh = r % g->Ho, ih0 = oh * g->sh - g->ph;
        const int64_t kh_lo = max64(0, -ih0), kh_hi = min64(g->KH, g->H - ih0);
        const float *ximg = x + n * g->H * g->W * C;
        const float *dyrow = dy + r * g->Wo * C;
        if (pb) {
            for (int64_t ow = 0; ow < g->Wo; ow++) {
                const float *restrict d = dyrow + ow * C;
                float *restrict acc = pb;
                for (int64_t c = 0; c < C; c++) acc[c] += d[c];
            }
        }
        if (!pw) continue;
        for (int64_t kh = kh_lo; kh < kh_hi; kh++) {
            const float *xrow = ximg + (ih0 + kh) * g->W * C;
            for (int64_t kw = 0; kw < g->KW; kw++) {
                // Output columns whose input column ow·sw − pw + kw lies inside the image.
                int64_t lo = g->pw - kw, hi = g->W + g->pw - kw;  // lo <= ow·sw < hi
                int64_t ow_lo = lo <= 0 ? 0 : (lo + g->sw - 1) / g->sw;
                int64_t ow_hi = hi <= 0 ? 0 : min64(g->Wo, (hi + g->sw - 1) / g->sw);
                if (ow_lo >= ow_hi) continue;
                float *pt = pw + (kh * g->KW + kw) * C;
                dot_channels(k, C, pt, pt, dyrow + ow_lo * C, aoff, xrow + (ow_lo * g->sw - g->pw + kw) * C, boff,
                             ow_hi - ow_lo);
            }
        }
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

void cpu_conv2d_depthwise_forward(float *out, const float *inp, const float *weight, const float *bias, int64_t N,
                                  int64_t H, int64_t W, int64_t C, int64_t KH, int64_t KW, int64_t Ho, int64_t Wo,
                                  Conv2dParams p) {
    const DwGeom g = dw_geom(N, H, W, C, KH, KW, Ho, Wo, p);
    const DotKernels k = dot_kernels();
    const int64_t taps = KH * KW;
    const int maxt = omp_get_max_threads();
    CpuScratch s = {0};
    float *wt = cpu_scratch_floats(&s, (size_t)(taps * C));
    int64_t *lists = cpu_scratch_bytes(&s, (size_t)maxt * 2 * (size_t)taps * sizeof(int64_t));
    transpose_weight(wt, weight, C, taps);
#pragma omp parallel
    {
        int t = omp_get_thread_num();
        int64_t r0, r1;
        thread_range(N * Ho, t, omp_get_num_threads(), &r0, &r1);
        forward_rows(&k, out, inp, wt, bias, &g, r0, r1, lists + 2 * t * taps, lists + (2 * t + 1) * taps);
    }
    cpu_scratch_free(&s);
}

void cpu_conv2d_depthwise_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                                   const float *weight, int64_t N, int64_t H, int64_t W, int64_t C, int64_t KH,
                                   int64_t KW, int64_t Ho, int64_t Wo, Conv2dParams p) {
    const DwGeom g = dw_geom(N, H, W, C, KH, KW, Ho, Wo, p);
    const DotKernels k = dot_kernels();
    const int64_t taps = KH * KW;
    const int maxt = omp_get_max_threads();
    CpuScratch s = {0};
    if (dinp) {
        // Per thread: tap offset lists (2·taps) and the kernel-row lists (2·KH).
        const int64_t per = 2 * taps + 2 * KH;
        float *wt = cpu_scratch_floats(&s, (size_t)(taps * C));
        int64_t *lists = cpu_scratch_bytes(&s, (size_t)maxt * (size_t)per * sizeof(int64_t));
        transpose_weight(wt, weight, C, taps);
#pragma omp parallel
        {
            int t = omp_get_thread_num();
            int64_t r0, r1, *l = lists + t * per;
            thread_range(N * H, t, omp_get_num_threads(), &r0, &r1);
            backward_data_rows(&k, dinp, dout, wt, &g, r0, r1, l, l + taps, l + 2 * taps, l + 2 * taps + KH);
        }
    }
    if (dweight || dbias) {
        // Per-thread partial sums (taps·C weight, C bias) over static row ranges, reduced in
        // thread order below.
        const int64_t stride = taps * C + C;
        float *parts = cpu_scratch_floats(&s, (size_t)maxt * (size_t)stride);
        int64_t *steps = cpu_scratch_bytes(&s, 2 * (size_t)(Wo > 0 ? Wo : 1) * sizeof(int64_t));
        for (int64_t t = 0; t < Wo; t++) steps[t] = t * C, steps[Wo + t] = t * g.sw * C;
        int used = 1;
#pragma omp parallel
        {
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
            if (t == 0) used = nt;
            float *pw = parts + t * stride;
            memset(pw, 0, (size_t)stride * sizeof(float));
            int64_t r0, r1;
            thread_range(N * Ho, t, nt, &r0, &r1);
            backward_weight_rows(&k, dweight ? pw : NULL, dbias ? pw + taps * C : NULL, dout, inp, &g, r0, r1,
                                 steps, steps + Wo);
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

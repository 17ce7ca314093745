// Dropout and drop path (CPU). No mask is stored: element i keeps when
// uniform(seed, stream, offset + i) >= p, and the backward draws the same numbers again.
#include <math.h>
#include <string.h>

#include "core/rng.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/ops.h"

// Elements per parallel chunk; a multiple of 4 so chunks start on a Philox block.
#define DROPOUT_CHUNK 4096

// f16/bf16 tensors are read and written in their own dtype: each chunk is widened into a buffer
// on the stack, scaled and rounded back while it is in cache, instead of widening the whole
// tensor into an fp32 copy and rounding a second one back. Per element it is the same product,
// so the results are the bits of that whole-tensor path, which Global.cpu_exact_numerics keeps
// as the reference (ocr_cpu_tiled_in / ocr_cpu_tiled_out).

// ---- the keep mask of 64 elements, Philox blocks as vectors --------------------------------------
// A group is 16 consecutive Philox blocks, 64 draws. GCC does not vectorise the 32×32 → 64
// multiplies of the scalar rounds, and the scalar generator costs more per element than the
// rest of dropout, so AVX2 and AVX-512 run the 16 blocks as lanes with vpmuludq (one multiply
// for the even 32-bit lanes, one for the odd ones shifted down; blends put the high and low
// halves back). The draw u = (w >> 8)·2^−24 keeps when u >= p, i.e. exactly when the integer
// w >> 8 >= ceil(p·2^24), so the comparison runs on the integer lanes too. The result is the
// 64-bit keep mask in element order (bit 4·l + k: word k of block l), the bits the scalar
// generator gives.
#define LANES 16

static uint32_t keep_threshold(float p) { return (uint32_t)ceil((double)p * 16777216.0); }

// Bit l of m (l < 16) moves to bit 4·l.
static inline uint64_t spread4(uint64_t m) {
    m &= 0xFFFF;
    m = (m | (m << 24)) & 0x000000FF000000FFull;
    m = (m | (m << 12)) & 0x000F000F000F000Full;
    m = (m | (m << 6)) & 0x0303030303030303ull;
    m = (m | (m << 3)) & 0x1111111111111111ull;
    return m;
}

static uint64_t keep_mask_scalar(uint64_t first_block, uint64_t stream, uint64_t seed, uint32_t thr) {
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    uint64_t mask = 0;
    for (int l = 0; l < LANES; l++) {
        const uint64_t block = first_block + (uint64_t)l;
        const uint32_t ctr[4] = {(uint32_t)block, (uint32_t)(block >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)};
        uint32_t w[4];
        ocr_philox4x32_10(ctr, key, w);
        for (int k = 0; k < 4; k++) mask |= (uint64_t)((w[k] >> 8) >= thr) << (4 * l + k);
    }
    return mask;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

CPU_TARGET_AVX512 static inline void mulhilo16(__m512i x, __m512i m, __m512i *hi, __m512i *lo) {
    const __m512i even = _mm512_mul_epu32(x, m), odd = _mm512_mul_epu32(_mm512_srli_epi64(x, 32), m);
    *lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
    *hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
}

CPU_TARGET_AVX512 static uint64_t keep_mask_avx512(uint64_t first_block, uint64_t stream, uint64_t seed,
                                                   uint32_t thr) {
    uint32_t blo[LANES], bhi[LANES];
    for (int l = 0; l < LANES; l++) {
        const uint64_t block = first_block + (uint64_t)l;
        blo[l] = (uint32_t)block, bhi[l] = (uint32_t)(block >> 32);
    }
    __m512i c0 = _mm512_loadu_si512(blo), c1 = _mm512_loadu_si512(bhi);
    __m512i c2 = _mm512_set1_epi32((int)(uint32_t)stream), c3 = _mm512_set1_epi32((int)(uint32_t)(stream >> 32));
    const __m512i m0 = _mm512_set1_epi32((int)OCR_PHILOX_M0), m1 = _mm512_set1_epi32((int)OCR_PHILOX_M1);
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int round = 0; round < 10; round++) {
        __m512i hi0, lo0, hi1, lo1;
        mulhilo16(c0, m0, &hi0, &lo0);
        mulhilo16(c2, m1, &hi1, &lo1);
        c0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32((int)k0));
        c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32((int)k1));
        c1 = lo1, c3 = lo0;
        k0 += OCR_PHILOX_W0, k1 += OCR_PHILOX_W1;
    }
    const __m512i t = _mm512_set1_epi32((int)thr);
    const uint64_t w0 = _mm512_cmpge_epu32_mask(_mm512_srli_epi32(c0, 8), t);
    const uint64_t w1 = _mm512_cmpge_epu32_mask(_mm512_srli_epi32(c1, 8), t);
    const uint64_t w2 = _mm512_cmpge_epu32_mask(_mm512_srli_epi32(c2, 8), t);
    const uint64_t w3 = _mm512_cmpge_epu32_mask(_mm512_srli_epi32(c3, 8), t);
    return spread4(w0) | spread4(w1) << 1 | spread4(w2) << 2 | spread4(w3) << 3;
}

CPU_TARGET_AVX2 static inline void mulhilo8(__m256i x, __m256i m, __m256i *hi, __m256i *lo) {
    const __m256i even = _mm256_mul_epu32(x, m), odd = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), m);
    *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
    *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

// Bits of the 8 lanes where (w >> 8) >= thr; w >> 8 < 2^24, so the signed compare is exact.
CPU_TARGET_AVX2 static inline uint64_t keep8(__m256i w, uint32_t thr) {
    const __m256i gt = _mm256_cmpgt_epi32(_mm256_srli_epi32(w, 8), _mm256_set1_epi32((int)thr - 1));
    return (uint64_t)(unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(gt));
}

CPU_TARGET_AVX2 static uint64_t keep_mask_avx2(uint64_t first_block, uint64_t stream, uint64_t seed, uint32_t thr) {
    uint32_t blo[LANES], bhi[LANES];
    for (int l = 0; l < LANES; l++) {
        const uint64_t block = first_block + (uint64_t)l;
        blo[l] = (uint32_t)block, bhi[l] = (uint32_t)(block >> 32);
    }
    const __m256i m0 = _mm256_set1_epi32((int)OCR_PHILOX_M0), m1 = _mm256_set1_epi32((int)OCR_PHILOX_M1);
    uint64_t w[4] = {0, 0, 0, 0};
    for (int half = 0; half < 2; half++) {
        __m256i c0 = _mm256_loadu_si256((const __m256i *)(blo + 8 * half));
        __m256i c1 = _mm256_loadu_si256((const __m256i *)(bhi + 8 * half));
        __m256i c2 = _mm256_set1_epi32((int)(uint32_t)stream), c3 = _mm256_set1_epi32((int)(uint32_t)(stream >> 32));
        uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
        for (int round = 0; round < 10; round++) {
            __m256i hi0, lo0, hi1, lo1;
            mulhilo8(c0, m0, &hi0, &lo0);
            mulhilo8(c2, m1, &hi1, &lo1);
            c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32((int)k0));
            c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32((int)k1));
            c1 = lo1, c3 = lo0;
            k0 += OCR_PHILOX_W0, k1 += OCR_PHILOX_W1;
        }
        w[0] |= keep8(c0, thr) << (8 * half), w[1] |= keep8(c1, thr) << (8 * half);
        w[2] |= keep8(c2, thr) << (8 * half), w[3] |= keep8(c3, thr) << (8 * half);
    }
    return spread4(w[0]) | spread4(w[1]) << 1 | spread4(w[2]) << 2 | spread4(w[3]) << 3;
}
#endif

// y (64) = x · keep_scale where bit i of mask is set, +0 elsewhere (also for an infinite or NaN x):
// `keep ? x·s : 0` per element, branch-free. As a branch per element it cost more than the Philox
// rounds (10 % of the draws mispredict); AVX-512 zero-masks the multiply, AVX2 ands the products
// with lane masks made from the bits, SSE2 ands each product's bits with the bit's mask.
static void apply_keep64_scalar(float *y, const float *x, uint64_t mask, float keep_scale) {
    for (int i = 0; i < 64; i++) {
        const uint32_t keep = 0u - (uint32_t)((mask >> i) & 1);
        const float prod = x[i] * keep_scale;
        uint32_t b;
        memcpy(&b, &prod, sizeof b);
        b &= keep;
        memcpy(&y[i], &b, sizeof b);
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
CPU_TARGET_AVX512 static void apply_keep64_avx512(float *y, const float *x, uint64_t mask, float keep_scale) {
    const __m512 s = _mm512_set1_ps(keep_scale);
    for (int j = 0; j < 4; j++)
        _mm512_storeu_ps(y + 16 * j,
                         _mm512_maskz_mul_ps((__mmask16)(mask >> (16 * j)), _mm512_loadu_ps(x + 16 * j), s));
}

CPU_TARGET_AVX2 static void apply_keep64_avx2(float *y, const float *x, uint64_t mask, float keep_scale) {
    const __m256 s = _mm256_set1_ps(keep_scale);
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    for (int j = 0; j < 8; j++) {
        const __m256i m = _mm256_set1_epi32((int)((mask >> (8 * j)) & 0xff));
        const __m256 keep = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(m, bit), bit));
        _mm256_storeu_ps(y + 8 * j, _mm256_and_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * j), s), keep));
    }
}
#endif

static void apply_keep64(float *y, const float *x, uint64_t mask, float keep_scale) {
#if defined(__x86_64__) && defined(__GNUC__)
    switch (ocr_cpu_vec_level()) {
    case CPU_VEC_AVX512: apply_keep64_avx512(y, x, mask, keep_scale); return;
    case CPU_VEC_AVX2: apply_keep64_avx2(y, x, mask, keep_scale); return;
    default: break;
    }
#endif
    apply_keep64_scalar(y, x, mask, keep_scale);
}

static uint64_t keep_mask64(uint64_t first_block, uint64_t stream, uint64_t seed, uint32_t thr) {
#if defined(__x86_64__) && defined(__GNUC__)
    switch (ocr_cpu_vec_level()) {
    case CPU_VEC_AVX512: return keep_mask_avx512(first_block, stream, seed, thr);
    case CPU_VEC_AVX2: return keep_mask_avx2(first_block, stream, seed, thr);
    default: break;
    }
#endif
    return keep_mask_scalar(first_block, stream, seed, thr);
}

// y[i] = x[i] · (keep_i ? keep_scale : 0) for i < m, keep_i drawn at index offset + first + i.
// One Philox call yields four consecutive draws. The elements up to a group boundary and the
// tail take the scalar generator one block at a time; every whole group takes keep_mask64.
#define GROUP (4 * LANES)
// Elements [lo, hi) of the chunk, one Philox block at a time.
CPU_INLINE void masked_scale_scalar(float *y, const float *x, uint64_t idx0, int64_t lo, int64_t hi, float p,
                                    float keep_scale, const DropoutParams *d) {
    uint32_t blk[4];
    uint64_t cached = UINT64_MAX;
    for (int64_t i = lo; i < hi; i++) {
        uint64_t idx = idx0 + (uint64_t)i;
        if ((idx >> 2) != cached) {
            cached = idx >> 2;
            uint32_t ctr[4] = {(uint32_t)cached, (uint32_t)(cached >> 32), (uint32_t)d->stream,
                               (uint32_t)(d->stream >> 32)};
            uint32_t key[2] = {(uint32_t)d->seed, (uint32_t)(d->seed >> 32)};
            ocr_philox4x32_10(ctr, key, blk);
        }
        int keep = ocr_rng_u32_to_uniform(blk[idx & 3]) >= p;
        y[i] = keep ? x[i] * keep_scale : 0.0f;
    }
}

CPU_INLINE void masked_scale_body(float *y, const float *x, int64_t first, int64_t m, float p, float keep_scale,
                                  const DropoutParams *d) {
    const uint64_t idx0 = d->offset + (uint64_t)first;
    // Scalar up to the first index on a group boundary (a multiple of GROUP)...
    int64_t head = (int64_t)((GROUP - idx0 % GROUP) % GROUP);
    if (head > m) head = m;
    const int64_t groups = (m - head) / GROUP, tail = head + groups * GROUP;
    masked_scale_scalar(y, x, idx0, 0, head, p, keep_scale, d);
    // ...whole groups from their 64-bit keep masks...
    const uint32_t thr = keep_threshold(p);
    for (int64_t g = 0; g < groups; g++) {
        const int64_t i0 = head + g * GROUP;
        const uint64_t mask = keep_mask64((idx0 + (uint64_t)i0) >> 2, d->stream, d->seed, thr);
        apply_keep64(y + i0, x + i0, mask, keep_scale);
    }
    // ...and the tail scalar again.
    masked_scale_scalar(y, x, idx0, tail, m, p, keep_scale, d);
}
#undef GROUP
CPU_VEC_CLONES(masked_scale,
               (float *y, const float *x, int64_t first, int64_t m, float p, float keep_scale, const DropoutParams *d),
               (y, x, first, m, p, keep_scale, d))

// mult[k] (k < n) = the factor dropout applies to the element drawn at index d->offset + first + k:
// keep_scale or 0 in training, 1 − p in downscale-in-infer inference; returns 0 (mult untouched)
// when the factor is 1 everywhere. The attention op applies it to its probabilities; the keep
// masks are masked_scale's (whole 64-draw groups as vectors), so the draws are dropout's own.
int ocr_cpu_dropout_factors(float *mult, int64_t n, uint64_t first, const DropoutParams *d) {
    const int upscale = d->mode == OCR_DROPOUT_UPSCALE_IN_TRAIN;
    if (!d->training || d->p <= 0.0f) {
        if (upscale || d->p <= 0.0f) return 0;
        for (int64_t k = 0; k < n; k++) mult[k] = 1.0f - d->p;
        return 1;
    }
    const float keep_scale = d->p >= 1.0f ? 0.0f : (upscale ? 1.0f / (1.0f - d->p) : 1.0f);
    for (int64_t k = 0; k < n; k++) mult[k] = 1.0f;
    masked_scale(mult, mult, (int64_t)first, n, d->p, keep_scale, d);  // in place: 1 · factor
    return 1;
}

// What dropout_apply does to every element.
typedef enum { DROP_ALL, DROP_MASKED, DROP_SCALE } DropMode;

// Shared body of the forward and the backward: both apply the same elementwise factor.
static void dropout_apply(OcrTensor *y_t, const OcrTensor *x_t, const DropoutParams *d) {
    CPU_ASSERT_FLOAT(y_t);
    CPU_ASSERT_FLOAT(x_t);
    OCR_ASSERT(ocr_tensor_numel(y_t) == ocr_tensor_numel(x_t), "dropout: element counts differ");
    OCR_ASSERT(d->p >= 0.0f && d->p <= 1.0f, "dropout: p = %g outside [0, 1]", (double)d->p);
    const int64_t n = ocr_tensor_numel(x_t);
    CpuScratch s = {0};
    OcrTensor vx, vy;
    float *whole;
    const OcrTensor *X = ocr_cpu_tiled_in(&s, x_t, &vx);
    OcrTensor *Y = ocr_cpu_tiled_out(&s, y_t, &vy, 0, &whole);
    const int upscale = d->mode == OCR_DROPOUT_UPSCALE_IN_TRAIN;
    DropMode mode = DROP_SCALE;
    float keep_scale = 1.0f;
    if (d->training && d->p > 0.0f) {
        mode = d->p >= 1.0f ? DROP_ALL : DROP_MASKED;  // p = 1: every draw is < 1, all dropped
        keep_scale = upscale ? 1.0f / (1.0f - d->p) : 1.0f;
    } else {
        // Inference (or p = 0): identity, except downscale-in-infer multiplies by 1 − p.
        keep_scale = (!upscale && !d->training) ? 1.0f - d->p : 1.0f;
    }
    const int64_t chunks = (n + DROPOUT_CHUNK - 1) / DROPOUT_CHUNK;
    // y_t may be x_t (in place): each chunk is read before it is written.
#pragma omp parallel for schedule(static) if (mode == DROP_MASKED ? chunks > 1 : n > 32768)
    for (int64_t c = 0; c < chunks; c++) {
        float bx[DROPOUT_CHUNK], by[DROPOUT_CHUNK];
        const int64_t lo = c * DROPOUT_CHUNK, m = n - lo < DROPOUT_CHUNK ? n - lo : DROPOUT_CHUNK;
        float *y = ocr_cpu_rows_dst(Y, 1, lo, by);
        if (mode == DROP_ALL) {
            memset(y, 0, (size_t)m * sizeof(float));
        } else {
            const float *x = ocr_cpu_rows_in(X, 1, lo, m, bx);
            if (mode == DROP_MASKED)
                masked_scale(y, x, lo, m, d->p, keep_scale, d);
            else
                for (int64_t i = 0; i < m; i++) y[i] = x[i] * keep_scale;
        }
        ocr_cpu_rows_out(Y, 1, lo, m, y);
    }
    if (whole) ocr_cpu_f32_store(y_t, whole);
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_dropout_forward(OcrTensor *out, const OcrTensor *inp, DropoutParams d) { dropout_apply(out, inp, &d); }

void ocr_cpu_dropout_backward(OcrTensor *dinp, const OcrTensor *dout, DropoutParams d) {
    if (!dinp) return;
    dropout_apply(dinp, dout, &d);
}

// Drop path on (N, ...): sample n keeps with draw offset + n >= p and is scaled by 1/(1 − p)
// (Paddle divides by keep_prob whatever the dropout mode); identity in inference.
static void droppath_apply(OcrTensor *y_t, const OcrTensor *x_t, const DropoutParams *d) {
    CPU_ASSERT_FLOAT(y_t);
    CPU_ASSERT_FLOAT(x_t);
    OCR_ASSERT(ocr_tensor_same_shape(y_t, x_t), "droppath: shapes differ");
    OCR_ASSERT(d->p >= 0.0f && d->p <= 1.0f, "droppath: p = %g outside [0, 1]", (double)d->p);
    int64_t n = ocr_tensor_numel(x_t);
    int64_t N = x_t->shape[0];
    int64_t per = N > 0 ? n / N : 0;
    CpuScratch s = {0};
    OcrTensor vx, vy;
    float *whole;
    const OcrTensor *X = ocr_cpu_tiled_in(&s, x_t, &vx);
    OcrTensor *Y = ocr_cpu_tiled_out(&s, y_t, &vy, 0, &whole);
    int active = d->training && d->p > 0.0f;
    float keep_scale = d->p < 1.0f ? 1.0f / (1.0f - d->p) : 0.0f;
    // Each sample in chunks (widened and rounded as in dropout_apply).
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t b = 0; b < N; b++) {
        float f = 1.0f;
        if (active) f = ocr_rng_uniform(d->seed, d->stream, d->offset + (uint64_t)b) >= d->p ? keep_scale : 0.0f;
        for (int64_t i0 = 0; i0 < per; i0 += DROPOUT_CHUNK) {
            float bx[DROPOUT_CHUNK], by[DROPOUT_CHUNK];
            const int64_t lo = b * per + i0, m = per - i0 < DROPOUT_CHUNK ? per - i0 : DROPOUT_CHUNK;
            float *yb = ocr_cpu_rows_dst(Y, 1, lo, by);
            if (f == 0.0f) {
                for (int64_t i = 0; i < m; i++) yb[i] = 0.0f;  // a dropped sample gives zeros even for inf/NaN
            } else {
                const float *xb = ocr_cpu_rows_in(X, 1, lo, m, bx);
                for (int64_t i = 0; i < m; i++) yb[i] = xb[i] * f;
            }
            ocr_cpu_rows_out(Y, 1, lo, m, yb);
        }
    }
    if (whole) ocr_cpu_f32_store(y_t, whole);
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_droppath_forward(OcrTensor *out, const OcrTensor *inp, DropoutParams d) { droppath_apply(out, inp, &d); }

void ocr_cpu_droppath_backward(OcrTensor *dinp, const OcrTensor *dout, DropoutParams d) {
    if (!dinp) return;
    droppath_apply(dinp, dout, &d);
}

// Bulk f16/bf16 conversions with run-time dispatch.
//
// Every path must produce exactly the bits of the scalar functions in half.h, so a tensor
// converts the same on any machine. The vector instructions disagree with the scalar code
// on a few inputs, and those lanes are fixed up here:
// - F16C: VCVTPH2PS quiets signalling NaNs (the scalar code keeps the bits) and VCVTPS2PH
//   may quiet/truncate NaN payloads differently; blocks holding a NaN are redone in scalar.
// - AVX-512 BF16: VCVTNEPS2BF16 treats denormal inputs as zero, while the scalar code
//   rounds them exactly (0x007fffff becomes the smallest normal bf16, not 0); those lanes
//   take the integer rounding instead.
// Functions carry __attribute__((target)), so the library builds without -march flags and
// the instructions only run when __builtin_cpu_supports says the CPU (and OS) has them.
#include "core/half.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define OCR_HALF_X86 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define OCR_HALF_X86 0
#endif

enum { PATH_SCALAR = 0, PATH_F16C, PATH_AVX2, PATH_AVX512BF16 };
static const char *const path_names[] = {"scalar", "f16c", "avx2", "avx512bf16"};

static pthread_once_t detect_once = PTHREAD_ONCE_INIT;
static int have_f16c, have_avx2, have_avx512bf16, have_avx512f;
static atomic_int force_scalar;
static atomic_int f16_path = PATH_SCALAR, bf16_path = PATH_SCALAR;

#if OCR_HALF_X86
// CPUID.1:ECX bit 29. Asked directly because older Clang's __builtin_cpu_supports does not
// know "f16c"; the "avx" check covers the OS saving YMM state.
static int cpu_has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
#endif

static void detect(void) {
#if OCR_HALF_X86
    __builtin_cpu_init();
    have_f16c = __builtin_cpu_supports("avx") && cpu_has_f16c();
    have_avx2 = __builtin_cpu_supports("avx2");
    // The 16-wide forms of the same conversions (bit-identical per lane) inside the f16c and
    // avx512bf16 paths.
    have_avx512f = have_avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    have_avx512bf16 = have_avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512bf16");
#endif
    atomic_store(&f16_path, have_f16c ? PATH_F16C : PATH_SCALAR);
    atomic_store(&bf16_path, have_avx512bf16 ? PATH_AVX512BF16 : have_avx2 ? PATH_AVX2 : PATH_SCALAR);
}

static int active_f16(void) {
    pthread_once(&detect_once, detect);
    return atomic_load_explicit(&force_scalar, memory_order_relaxed)
               ? PATH_SCALAR
               : atomic_load_explicit(&f16_path, memory_order_relaxed);
}
static int active_bf16(void) {
    pthread_once(&detect_once, detect);
    return atomic_load_explicit(&force_scalar, memory_order_relaxed)
               ? PATH_SCALAR
               : atomic_load_explicit(&bf16_path, memory_order_relaxed);
}

void ocr_half_force_scalar(int force) { atomic_store(&force_scalar, force != 0); }
const char *ocr_half_f16_path(void) { return path_names[active_f16()]; }
const char *ocr_half_bf16_path(void) { return path_names[active_bf16()]; }

// Test hooks (not in half.h): select a path by name ("scalar", "f16c" / "avx2",
// "avx512bf16"), or NULL for the best one. Returns 0 and changes nothing when this CPU
// lacks the path or the name is not a path of that format.
static int path_index(const char *name) {
    for (int i = 0; i < 4; i++)
        if (strcmp(name, path_names[i]) == 0) return i;
    return -1;
}
int ocr_half_select_f16_path(const char *name) {
    pthread_once(&detect_once, detect);
    int p = name ? path_index(name) : (have_f16c ? PATH_F16C : PATH_SCALAR);
    if (p == PATH_SCALAR || (p == PATH_F16C && have_f16c)) {
        atomic_store(&f16_path, p);
        return 1;
    }
    return 0;
}
int ocr_half_select_bf16_path(const char *name) {
    pthread_once(&detect_once, detect);
    int p = name ? path_index(name) : have_avx512bf16 ? PATH_AVX512BF16 : have_avx2 ? PATH_AVX2 : PATH_SCALAR;
    if (p == PATH_SCALAR || (p == PATH_AVX2 && have_avx2) || (p == PATH_AVX512BF16 && have_avx512bf16)) {
        atomic_store(&bf16_path, p);
        return 1;
    }
    return 0;
}

// ---- scalar ------------------------------------------------------------------------
static void f32_to_f16_scalar(ocr_f16_t *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = ocr_f32_to_f16(src[i]);
}
static void f16_to_f32_scalar(float *dst, const ocr_f16_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = ocr_f16_to_f32(src[i]);
}
static void f32_to_bf16_scalar(ocr_bf16_t *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = ocr_f32_to_bf16(src[i]);
}
static void bf16_to_f32_scalar(float *dst, const ocr_bf16_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = ocr_bf16_to_f32(src[i]);
}

#if OCR_HALF_X86
// ---- F16C --------------------------------------------------------------------------
__attribute__((target("avx,f16c"))) static void f32_to_f16_f16c(ocr_f16_t *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(src + i);
        // NaN lanes: the hardware's quieting is not guaranteed to match ours; rare, so
        // the whole block goes through the scalar code.
        if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q))) {
            f32_to_f16_scalar(dst + i, src + i, 8);
            continue;
        }
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    }
    f32_to_f16_scalar(dst + i, src + i, n - i);
}

__attribute__((target("avx,f16c"))) static void f16_to_f32_f16c(float *dst, const ocr_f16_t *src, size_t n) {
    const __m128i abs_mask = _mm_set1_epi16(0x7fff), inf = _mm_set1_epi16(0x7c00);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(src + i));
        // |h| > 0x7c00 (as signed 16-bit, which |h| <= 0x7fff is) means NaN.
        if (_mm_movemask_epi8(_mm_cmpgt_epi16(_mm_and_si128(h, abs_mask), inf))) {
            f16_to_f32_scalar(dst + i, src + i, 8);
            continue;
        }
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    f16_to_f32_scalar(dst + i, src + i, n - i);
}

// ---- AVX-512 forms of the F16C conversions (used inside the f16c path when the CPU has
// AVX-512F: VCVTPH2PS/VCVTPS2PH on 16 lanes give what the 8-lane forms give per lane, with the
// same NaN blocks redone in scalar) ---------------------------------------------------------
__attribute__((target("avx512f,avx512bw,avx2,f16c"))) static size_t f32_to_f16_avx512(ocr_f16_t *dst, const float *src,
                                                                                     size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 x = _mm512_loadu_ps(src + i);
        if (_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q)) {
            f32_to_f16_scalar(dst + i, src + i, 16);
            continue;
        }
        _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    }
    return i;
}

__attribute__((target("avx512f,avx512bw,avx2,f16c"))) static size_t f16_to_f32_avx512(float *dst, const ocr_f16_t *src,
                                                                                     size_t n) {
    const __m256i abs_mask = _mm256_set1_epi16(0x7fff), inf = _mm256_set1_epi16(0x7c00);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(src + i));
        if (_mm256_movemask_epi8(_mm256_cmpgt_epi16(_mm256_and_si256(h, abs_mask), inf))) {
            f16_to_f32_scalar(dst + i, src + i, 16);
            continue;
        }
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(h));
    }
    return i;
}

// bf16 -> f32 is a 16-bit shift: 16 lanes at a time.
__attribute__((target("avx512f,avx512bw,avx2"))) static size_t bf16_to_f32_avx512(float *dst, const ocr_bf16_t *src,
                                                                                 size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + i)));
        _mm512_storeu_si512((void *)(dst + i), _mm512_slli_epi32(w, 16));
    }
    return i;
}

// ---- AVX2 bf16 ---------------------------------------------------------------------
// Round to nearest even with the integer bias trick, NaN lanes quieted as the scalar code
// does; returns 8 results in the low 16 bits of each 32-bit lane.
__attribute__((target("avx2"))) static inline __m256i bf16_round_avx2(__m256i x) {
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), one);
    __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(bias, lsb)), 16);
    __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
    __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), inf);  // both sides non-negative
    return _mm256_blendv_epi8(rounded, quiet, is_nan);
}

__attribute__((target("avx2"))) static void f32_to_bf16_avx2(ocr_bf16_t *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i a = bf16_round_avx2(_mm256_loadu_si256((const __m256i *)(src + i)));
        __m256i b = bf16_round_avx2(_mm256_loadu_si256((const __m256i *)(src + i + 8)));
        // packus works per 128-bit lane: (a0-3 b0-3 | a4-7 b4-7); reorder the quadwords.
        __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
        _mm256_storeu_si256((__m256i *)(dst + i), packed);
    }
    for (; i + 8 <= n; i += 8) {
        __m256i a = bf16_round_avx2(_mm256_loadu_si256((const __m256i *)(src + i)));
        __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, a), 0x08);
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_castsi256_si128(packed));
    }
    f32_to_bf16_scalar(dst + i, src + i, n - i);
}

__attribute__((target("avx2"))) static void bf16_to_f32_avx2(float *dst, const ocr_bf16_t *src, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        _mm256_storeu_si256((__m256i *)(dst + i), _mm256_slli_epi32(w, 16));
    }
    bf16_to_f32_scalar(dst + i, src + i, n - i);
}

// ---- AVX-512 BF16 ------------------------------------------------------------------
__attribute__((target("avx512bf16,avx512f,avx512vl,avx512bw,avx2"))) static void f32_to_bf16_avx512bf16(
    ocr_bf16_t *dst, const float *src, size_t n) {
    const __m512i exp_mask = _mm512_set1_epi32(0x7f800000), mant_mask = _mm512_set1_epi32(0x007fffff);
    const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 x = _mm512_loadu_ps(src + i);
        __m512i xi = _mm512_castps_si512(x);
        __m256i out = (__m256i)_mm512_cvtneps_pbh(x);
        // Denormal inputs (exponent 0, mantissa != 0) came out as zero; round them exactly.
        __mmask16 den = _mm512_testn_epi32_mask(xi, exp_mask) & _mm512_test_epi32_mask(xi, mant_mask);
        if (den) {
            __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(xi, 16), one);
            __m512i r = _mm512_srli_epi32(_mm512_add_epi32(xi, _mm512_add_epi32(bias, lsb)), 16);
            out = _mm256_mask_blend_epi16(den, out, _mm512_cvtepi32_epi16(r));
        }
        _mm256_storeu_si256((__m256i *)(dst + i), out);
    }
    f32_to_bf16_avx2(dst + i, src + i, n - i);
}
#endif

// ---- dispatch ----------------------------------------------------------------------
void ocr_f32_to_f16_array(ocr_f16_t *dst, const float *src, size_t n) {
#if OCR_HALF_X86
    if (active_f16() == PATH_F16C) {
        size_t done = have_avx512f ? f32_to_f16_avx512(dst, src, n) : 0;
        f32_to_f16_f16c(dst + done, src + done, n - done);
        return;
    }
#endif
    f32_to_f16_scalar(dst, src, n);
}

void ocr_f16_to_f32_array(float *dst, const ocr_f16_t *src, size_t n) {
#if OCR_HALF_X86
    if (active_f16() == PATH_F16C) {
        size_t done = have_avx512f ? f16_to_f32_avx512(dst, src, n) : 0;
        f16_to_f32_f16c(dst + done, src + done, n - done);
        return;
    }
#endif
    f16_to_f32_scalar(dst, src, n);
}

void ocr_f32_to_bf16_array(ocr_bf16_t *dst, const float *src, size_t n) {
#if OCR_HALF_X86
    int p = active_bf16();
    if (p == PATH_AVX512BF16) {
        f32_to_bf16_avx512bf16(dst, src, n);
        return;
    }
    if (p == PATH_AVX2) {
        f32_to_bf16_avx2(dst, src, n);
        return;
    }
#endif
    f32_to_bf16_scalar(dst, src, n);
}

void ocr_bf16_to_f32_array(float *dst, const ocr_bf16_t *src, size_t n) {
#if OCR_HALF_X86
    // Widening is a shift: AVX-512 on the avx512bf16 path, AVX2 on both for the tail.
    int p = active_bf16();
    if (p != PATH_SCALAR) {
        size_t done = p == PATH_AVX512BF16 ? bf16_to_f32_avx512(dst, src, n) : 0;
        bf16_to_f32_avx2(dst + done, src + done, n - done);
        return;
    }
#endif
    bf16_to_f32_scalar(dst, src, n);
}

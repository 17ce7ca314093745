// f16/bf16 conversions: exhaustive over every 16-bit pattern, every rounding boundary and
// millions of random f32 patterns. The expected values come from a reference written
// here in double precision from the IEEE field definitions, not from half.h; then every
// bulk path (scalar, F16C, AVX2, AVX-512 BF16) must give the scalar bits exactly.
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "tests/common/test_util.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define X86 1
#include <cpuid.h>
#include <xmmintrin.h>
#else
#define X86 0
#endif

// Test hooks defined in core/half.c (not in half.h): select a bulk path by name, NULL for
// the best; 0 when the CPU lacks it.
int ocr_half_select_f16_path(const char *name);
int ocr_half_select_bf16_path(const char *name);

// ck_assert_msg records the location of every passing check (a write per call); loops over
// millions of values use this instead.
#define EXPECT(cond, ...)                       \
    do {                                        \
        if (!(cond)) ck_abort_msg(__VA_ARGS__); \
    } while (0)

static const char *const f16_paths[] = {"scalar", "f16c"};
static const char *const bf16_paths[] = {"scalar", "avx2", "avx512bf16"};
#define N_F16_PATHS 2
#define N_BF16_PATHS 3

static int use_f16_path(const char *p) {
    if (ocr_half_select_f16_path(p)) {
        ck_assert_str_eq(ocr_half_f16_path(), p);
        return 1;
    }
    printf("SKIP: f16 path %s: this CPU lacks it (scalar and the available paths are still tested)\n", p);
    return 0;
}
static int use_bf16_path(const char *p) {
    if (ocr_half_select_bf16_path(p)) {
        ck_assert_str_eq(ocr_half_bf16_path(), p);
        return 1;
    }
    printf("SKIP: bf16 path %s: this CPU lacks it (scalar and the available paths are still tested)\n", p);
    return 0;
}

// ---- the double-precision reference --------------------------------------------------
// A binary format with `mbits` stored mantissa bits and `ebits` exponent bits:
// f16 = (10, 5), bf16 = (7, 8).
typedef struct {
    int mbits, ebits, bias, emin, emax;
    uint32_t sign_bit, inf_bits, max_finite_bits;
} Fmt;

static Fmt fmt_make(int mbits, int ebits) {
    Fmt f;
    f.mbits = mbits;
    f.ebits = ebits;
    f.bias = (1 << (ebits - 1)) - 1;
    f.emin = 1 - f.bias;  // exponent of the smallest normal
    f.emax = f.bias;      // exponent of the largest finite
    f.sign_bit = 1u << (mbits + ebits);
    f.inf_bits = ((1u << ebits) - 1) << mbits;
    f.max_finite_bits = f.inf_bits - 1;
    return f;
}
static Fmt F16, BF16;

// The value of a bit pattern: subnormal m·2^(emin−mbits), normal (2^mbits + m)·2^(e−bias−mbits).
static double ref_decode(const Fmt *f, uint32_t h) {
    uint32_t e = (h >> f->mbits) & ((1u << f->ebits) - 1), m = h & ((1u << f->mbits) - 1);
    double v;
    if (e == (1u << f->ebits) - 1)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp((double)m, f->emin - f->mbits);
    else
        v = ldexp((double)((1u << f->mbits) + m), (int)e - f->bias - f->mbits);
    return (h & f->sign_bit) ? -v : v;
}

// Rounds a finite or infinite double (an exact f32 value) to the nearest representable
// value, ties to the even significand, overflowing to inf as IEEE 754 does (rounding as if
// the exponent were unbounded, then inf when that exceeds the largest finite).
static uint32_t ref_round(const Fmt *f, double x) {
    uint32_t s = signbit(x) ? f->sign_bit : 0;
    double a = fabs(x);
    if (isinf(a)) return s | f->inf_bits;
    int e2 = 0;
    if (a > 0) frexp(a, &e2);  // a = frac·2^e2, frac in [0.5, 1): floor(log2 a) = e2 − 1
    int E = a > 0 && e2 - 1 > f->emin ? e2 - 1 : f->emin;
    double q = ldexp(1.0, E - f->mbits);  // spacing of representable values near a
    double k = a / q;                     // exact: q is a power of two
    double r = floor(k), frac = k - r;
    if (frac > 0.5 || (frac == 0.5 && fmod(r, 2.0) == 1.0)) r += 1.0;
    double v = r * q;
    double max_finite = ldexp(2.0 - ldexp(1.0, -f->mbits), f->emax);
    if (v > max_finite) return s | f->inf_bits;
    double min_normal = ldexp(1.0, f->emin);
    if (v < min_normal) return s | (uint32_t)(v / ldexp(1.0, f->emin - f->mbits));
    frexp(v, &e2);
    E = e2 - 1;
    uint32_t m = (uint32_t)(v / ldexp(1.0, E - f->mbits)) - (1u << f->mbits);
    return s | ((uint32_t)(E + f->bias) << f->mbits) | m;
}

// The expected conversion of an f32 bit pattern. NaN: quiet NaN with the sign and the top
// payload bits that fit (f16: bits 22..13, bf16: bits 22..16) and the quiet bit set.
static uint32_t ref_from_f32(const Fmt *f, uint32_t u) {
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        uint32_t payload = (u >> (23 - f->mbits)) & ((1u << f->mbits) - 1);
        uint32_t quiet = 1u << (f->mbits - 1);
        return ((u >> 31) ? f->sign_bit : 0) | f->inf_bits | quiet | payload;
    }
    return ref_round(f, (double)ocr_bits_f32(u));
}

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// ---- the reference itself ------------------------------------------------------------
START_TEST(test_reference_spot_values) {
    // Hand-derived values, so a wrong reference cannot agree with a wrong implementation.
    ck_assert_uint_eq(ref_round(&F16, 1.0), 0x3c00);
    ck_assert_uint_eq(ref_round(&F16, 65504.0), 0x7bff);
    ck_assert_uint_eq(ref_round(&F16, 65519.99609375), 0x7bff);  // just below the overflow midpoint
    ck_assert_uint_eq(ref_round(&F16, 65520.0), 0x7c00);         // tie: the even neighbour is 2^16 = inf
    ck_assert_uint_eq(ref_round(&F16, -65520.0), 0xfc00);
    ck_assert_uint_eq(ref_round(&F16, ldexp(1, -24)), 0x0001);            // smallest subnormal
    ck_assert_uint_eq(ref_round(&F16, ldexp(1, -25)), 0x0000);            // tie to even: 0
    ck_assert_uint_eq(ref_round(&F16, ldexp(3, -25)), 0x0002);            // 1.5 ulp: tie to even: 2
    ck_assert_uint_eq(ref_round(&F16, ldexp(1, -14)), 0x0400);            // smallest normal
    ck_assert_uint_eq(ref_round(&F16, ldexp(1023.5, -24)), 0x0400);       // rounds up into the normals
    ck_assert_uint_eq(ref_round(&F16, 1.0 + ldexp(1, -11)), 0x3c00);      // tie, even = down
    ck_assert_uint_eq(ref_round(&F16, 1.0 + 3 * ldexp(1, -11)), 0x3c02);  // tie, even = up
    ck_assert_uint_eq(ref_round(&F16, -0.0), 0x8000);
    ck_assert_uint_eq(ref_round(&BF16, 1.0 + ldexp(1, -8)), 0x3f80);
    ck_assert_uint_eq(ref_round(&BF16, 1.0 + 3 * ldexp(1, -8)), 0x3f82);
    ck_assert_uint_eq(ref_round(&BF16, (double)ocr_bits_f32(0x7f7f8000u)), 0x7f80);  // overflow tie
    ck_assert_uint_eq(ref_round(&BF16, (double)ocr_bits_f32(0x7f7f7fffu)), 0x7f7f);
    ck_assert_uint_eq(ref_round(&BF16, (double)ocr_bits_f32(0x007fffffu)), 0x0080);  // f32 subnormal rounds up
    ck_assert_uint_eq(ref_round(&BF16, (double)ocr_bits_f32(0x00008000u)), 0x0000);  // tie to even
    ck_assert_uint_eq(ref_round(&BF16, (double)ocr_bits_f32(0x00018000u)), 0x0002);
    ck_assert_uint_eq(ref_from_f32(&F16, 0x7f800001u), 0x7e00);  // signalling, payload lost: quiet
    ck_assert_uint_eq(ref_from_f32(&F16, 0xffc12345u), 0xfe09);
    ck_assert_uint_eq(ref_from_f32(&BF16, 0x7f800001u), 0x7fc0);
    ck_assert_uint_eq(ref_from_f32(&BF16, 0xff812345u), 0xffc1);
}
END_TEST

// ---- every 16-bit pattern ----------------------------------------------------------
static void check_all_patterns(const Fmt *f, int is_f16) {
    for (uint32_t h = 0; h < 65536; h++) {
        float x = is_f16 ? ocr_f16_to_f32((ocr_f16_t)h) : ocr_bf16_to_f32((ocr_bf16_t)h);
        uint32_t xb = ocr_f32_bits(x);
        double ref = ref_decode(f, h);
        int neg = (h & f->sign_bit) != 0;
        if (isnan(ref)) {
            EXPECT(isnan(x), "0x%04x -> 0x%08x should be NaN", h, xb);
            EXPECT((xb >> 31) == (uint32_t)neg, "0x%04x: NaN sign lost", h);
            uint32_t payload = h & ((1u << f->mbits) - 1);
            EXPECT(((xb >> (23 - f->mbits)) & ((1u << f->mbits) - 1)) == payload &&
                       (xb & ((1u << (23 - f->mbits)) - 1)) == 0,
                   "0x%04x -> 0x%08x: NaN payload changed", h, xb);
        } else {
            EXPECT((double)x == ref && (signbit(x) != 0) == neg, "0x%04x -> %.9g (0x%08x), expected %.17g", h,
                   (double)x, xb, ref);
            EXPECT(ref_round(f, ref) == h, "reference round trip of 0x%04x", h);  // the reference agrees with itself
        }
        uint32_t back = is_f16 ? ocr_f32_to_f16(x) : ocr_f32_to_bf16(x);
        uint32_t want = isnan(ref) ? (h | (1u << (f->mbits - 1))) : h;  // NaN comes back quiet, payload kept
        EXPECT(back == want, "round trip 0x%04x -> 0x%08x -> 0x%04x, expected 0x%04x", h, xb, back, want);
    }
}

START_TEST(test_f16_all_patterns) { check_all_patterns(&F16, 1); }
END_TEST

START_TEST(test_bf16_all_patterns) { check_all_patterns(&BF16, 0); }
END_TEST

// All 65,536 patterns through every bulk path, both directions, equal to the scalar bits.
START_TEST(test_all_patterns_bulk_paths) {
    ocr_f16_t *h = malloc(65536 * sizeof *h), *h2 = malloc(65536 * sizeof *h2);
    float *x = malloc(65536 * sizeof *x);
    for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    for (int p = 0; p < N_F16_PATHS; p++) {
        if (!use_f16_path(f16_paths[p])) continue;
        ocr_f16_to_f32_array(x, h, 65536);
        for (uint32_t i = 0; i < 65536; i++)
            EXPECT(ocr_f32_bits(x[i]) == ocr_f32_bits(ocr_f16_to_f32(h[i])), "%s f16->f32 0x%04x: 0x%08x vs 0x%08x",
                   f16_paths[p], i, ocr_f32_bits(x[i]), ocr_f32_bits(ocr_f16_to_f32(h[i])));
        ocr_f32_to_f16_array(h2, x, 65536);
        for (uint32_t i = 0; i < 65536; i++)
            EXPECT(h2[i] == ocr_f32_to_f16(x[i]), "%s f32->f16 of 0x%08x: 0x%04x vs 0x%04x", f16_paths[p],
                   ocr_f32_bits(x[i]), h2[i], ocr_f32_to_f16(x[i]));
    }
    for (int p = 0; p < N_BF16_PATHS; p++) {
        if (!use_bf16_path(bf16_paths[p])) continue;
        ocr_bf16_to_f32_array(x, h, 65536);
        for (uint32_t i = 0; i < 65536; i++)
            EXPECT(ocr_f32_bits(x[i]) == i << 16, "%s bf16->f32 0x%04x: 0x%08x", bf16_paths[p], i, ocr_f32_bits(x[i]));
        ocr_f32_to_bf16_array(h2, x, 65536);
        for (uint32_t i = 0; i < 65536; i++)
            EXPECT(h2[i] == ocr_f32_to_bf16(x[i]), "%s f32->bf16 of 0x%08x: 0x%04x vs 0x%04x", bf16_paths[p],
                   ocr_f32_bits(x[i]), h2[i], ocr_f32_to_bf16(x[i]));
    }
    free(h);
    free(h2);
    free(x);
}
END_TEST

// ---- rounding boundaries -----------------------------------------------------------
// For every pair of adjacent non-negative representable values (a, b), including 0 and
// the smallest subnormal and (max finite, 2^(emax+1)) whose midpoint is the overflow
// threshold: a, the midpoint, and its f32 neighbours below and above, with both signs.
static size_t boundary_inputs(const Fmt *f, float **out) {
    size_t cap = (size_t)(f->max_finite_bits + 1) * 8, n = 0;
    float *v = malloc(cap * sizeof *v);
    for (uint32_t k = 0; k <= f->max_finite_bits; k++) {
        double a = ref_decode(f, k);
        double b = k == f->max_finite_bits ? ldexp(1.0, f->emax + 1) : ref_decode(f, k + 1);
        double mid = 0.5 * (a + b);
        float midf = (float)mid;
        EXPECT((double)midf == mid, "midpoint %.17g is not an f32", mid);  // one more bit than the format
        float pts[4] = {(float)a, midf, nextafterf(midf, 0.0f), nextafterf(midf, INFINITY)};
        for (int j = 0; j < 4; j++) {
            v[n++] = pts[j];
            v[n++] = -pts[j];
        }
    }
    *out = v;
    return n;
}

static void check_boundaries(const Fmt *f, int is_f16) {
    float *v;
    size_t n = boundary_inputs(f, &v);
    uint16_t *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    for (size_t i = 0; i < n; i++) {
        want[i] = (uint16_t)ref_round(f, (double)v[i]);
        uint16_t s = is_f16 ? ocr_f32_to_f16(v[i]) : ocr_f32_to_bf16(v[i]);
        EXPECT(s == want[i], "%s(%.9g = 0x%08x) = 0x%04x, expected 0x%04x", is_f16 ? "f16" : "bf16", (double)v[i],
               ocr_f32_bits(v[i]), s, want[i]);
    }
    int np = is_f16 ? N_F16_PATHS : N_BF16_PATHS;
    for (int p = 0; p < np; p++) {
        const char *name = is_f16 ? f16_paths[p] : bf16_paths[p];
        if (!(is_f16 ? use_f16_path(name) : use_bf16_path(name))) continue;
        memset(got, 0xee, n * sizeof *got);
        if (is_f16)
            ocr_f32_to_f16_array(got, v, n);
        else
            ocr_f32_to_bf16_array(got, v, n);
        for (size_t i = 0; i < n; i++)
            EXPECT(got[i] == want[i], "%s path %s: 0x%08x -> 0x%04x, expected 0x%04x", is_f16 ? "f16" : "bf16", name,
                   ocr_f32_bits(v[i]), got[i], want[i]);
    }
    free(v);
    free(want);
    free(got);
}

START_TEST(test_f16_rounding_boundaries) { check_boundaries(&F16, 1); }
END_TEST

START_TEST(test_bf16_rounding_boundaries) { check_boundaries(&BF16, 0); }
END_TEST

// ---- random and special f32 patterns -----------------------------------------------
#define N_RANDOM (1u << 22)

static float *special_and_random(size_t *n_out) {
    size_t cap = N_RANDOM + 200000, n = 0;
    uint32_t *u = malloc(cap * sizeof *u);
    static const uint32_t specials[] = {
        0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u,
        0x7fbfffffu, 0x7fffffffu, 0xffffffffu, 0x7f801fffu, 0x7f802000u, 0x7f80ffffu, 0x7f810000u, 0x00000001u,
        0x807fffffu, 0x007fffffu, 0x00800000u, 0x7f7fffffu, 0xff7fffffu, 0x477fe000u, 0x477fefffu, 0x477ff000u,
        0x33000000u, 0x33000001u, 0x32ffffffu, 0x38800000u, 0x387fffffu, 0x3f808000u, 0x3f818000u, 0x7f7f8000u};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) u[n++] = specials[i];
    // Every 61st NaN payload with both signs: quiet and signalling, payloads that vanish.
    for (uint32_t m = 1; m < (1u << 23); m += 61) {
        u[n++] = 0x7f800000u | m;
        u[n++] = 0xff800000u | m;
    }
    uint64_t st = 0x5eed;
    while (n < cap) u[n++] = (uint32_t)splitmix64(&st);
    float *v = malloc(n * sizeof *v);
    memcpy(v, u, n * sizeof *v);
    free(u);
    *n_out = n;
    return v;
}

START_TEST(test_random_f32_patterns) {
    size_t n;
    float *v = special_and_random(&n);
    uint16_t *want16 = malloc(n * 2), *wantbf = malloc(n * 2), *got = malloc(n * 2);
    for (size_t i = 0; i < n; i++) {
        uint32_t u = ocr_f32_bits(v[i]);
        want16[i] = ocr_f32_to_f16(v[i]);
        wantbf[i] = ocr_f32_to_bf16(v[i]);
        // The scalar code against the reference (every 4th random input keeps this quick).
        if (i < 300000 || (i & 3) == 0) {
            EXPECT(want16[i] == ref_from_f32(&F16, u), "f16(0x%08x) = 0x%04x, reference 0x%04x", u, want16[i],
                   ref_from_f32(&F16, u));
            EXPECT(wantbf[i] == ref_from_f32(&BF16, u), "bf16(0x%08x) = 0x%04x, reference 0x%04x", u, wantbf[i],
                   ref_from_f32(&BF16, u));
        }
    }
    for (int p = 0; p < N_F16_PATHS; p++) {
        if (!use_f16_path(f16_paths[p])) continue;
        ocr_f32_to_f16_array(got, v, n);
        for (size_t i = 0; i < n; i++)
            EXPECT(got[i] == want16[i], "f16 path %s: 0x%08x -> 0x%04x, scalar 0x%04x", f16_paths[p],
                   ocr_f32_bits(v[i]), got[i], want16[i]);
    }
    for (int p = 0; p < N_BF16_PATHS; p++) {
        if (!use_bf16_path(bf16_paths[p])) continue;
        ocr_f32_to_bf16_array(got, v, n);
        for (size_t i = 0; i < n; i++)
            EXPECT(got[i] == wantbf[i], "bf16 path %s: 0x%08x -> 0x%04x, scalar 0x%04x", bf16_paths[p],
                   ocr_f32_bits(v[i]), got[i], wantbf[i]);
    }
#if X86
    // A caller may run with flush-to-zero and denormals-are-zero set (MXCSR bits 15 and 6);
    // the results must not change. (The expected values were computed before.)
    unsigned int csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u);
    for (int p = 0; p < N_F16_PATHS; p++) {
        if (!use_f16_path(f16_paths[p])) continue;
        ocr_f32_to_f16_array(got, v, n);
        for (size_t i = 0; i < n; i++)
            EXPECT(got[i] == want16[i], "FTZ/DAZ f16 path %s: 0x%08x -> 0x%04x, scalar 0x%04x", f16_paths[p],
                   ocr_f32_bits(v[i]), got[i], want16[i]);
    }
    for (int p = 0; p < N_BF16_PATHS; p++) {
        if (!use_bf16_path(bf16_paths[p])) continue;
        ocr_f32_to_bf16_array(got, v, n);
        for (size_t i = 0; i < n; i++)
            EXPECT(got[i] == wantbf[i], "FTZ/DAZ bf16 path %s: 0x%08x -> 0x%04x, scalar 0x%04x", bf16_paths[p],
                   ocr_f32_bits(v[i]), got[i], wantbf[i]);
    }
    // f16 -> f32 of every pattern (subnormal halves become normal floats) under the same flags.
    uint16_t *h = malloc(65536 * 2);
    float *x = malloc(65536 * sizeof *x);
    for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    for (int p = 0; p < N_F16_PATHS; p++) {
        if (!use_f16_path(f16_paths[p])) continue;
        ocr_f16_to_f32_array(x, h, 65536);
        for (uint32_t i = 0; i < 65536; i++)
            EXPECT(ocr_f32_bits(x[i]) == ocr_f32_bits(ocr_f16_to_f32(h[i])), "FTZ/DAZ f16 path %s: 0x%04x",
                   f16_paths[p], i);
    }
    _mm_setcsr(csr);
    free(h);
    free(x);
#endif
    free(v);
    free(want16);
    free(wantbf);
    free(got);
}
END_TEST

// ---- lengths and alignment -----------------------------------------------------------
// Every length 0..17 plus long ones, at every element offset 0..7 of a 64-byte aligned
// buffer on both sides; elements past n must stay untouched.
#define GUARD16 0xA5A5u
#define GUARD32 0xDEADBEEFu

static void check_tails(int is_f16, const char *path) {
    static const size_t lens[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 31, 33, 1000, 4099};
    const size_t maxn = 4099 + 8 + 16;
    uint64_t st = 77;
    float *src = aligned_alloc(64, 16384 * 4), *out32 = aligned_alloc(64, 16384 * 4);
    uint16_t *src16 = aligned_alloc(64, 16384 * 2), *out16 = aligned_alloc(64, 16384 * 2);
    for (size_t i = 0; i < maxn; i++) {
        uint32_t u = (uint32_t)splitmix64(&st);
        if (i % 5 == 0) u = (u & 0x807fffffu) | (i % 3 ? 0x7f800000u : 0x3f800000u);  // NaN/inf and plain values
        if (i % 7 == 0) u &= 0x807fffffu;                                             // f32 subnormals
        src[i] = ocr_bits_f32(u);
        src16[i] = (uint16_t)splitmix64(&st);
        if (i % 6 == 0) src16[i] |= 0x7c00;  // f16 NaN/inf; for bf16 ordinary values
    }
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        size_t n = lens[li];
        for (size_t so = 0; so < 8; so++) {
            for (size_t d = 0; d < 8; d++) {
                for (size_t i = 0; i < maxn; i++) out16[i] = GUARD16;
                for (size_t i = 0; i < maxn; i++) memcpy(&out32[i], &(uint32_t){GUARD32}, 4);
                if (is_f16) {
                    ocr_f32_to_f16_array(out16 + d, src + so, n);
                    ocr_f16_to_f32_array(out32 + d, src16 + so, n);
                } else {
                    ocr_f32_to_bf16_array(out16 + d, src + so, n);
                    ocr_bf16_to_f32_array(out32 + d, src16 + so, n);
                }
                for (size_t i = 0; i < maxn; i++) {
                    int inside = i >= d && i < d + n;
                    uint16_t w16 = inside
                                       ? (is_f16 ? ocr_f32_to_f16(src[so + i - d]) : ocr_f32_to_bf16(src[so + i - d]))
                                       : GUARD16;
                    uint32_t w32 = inside ? ocr_f32_bits(is_f16 ? ocr_f16_to_f32(src16[so + i - d])
                                                                : ocr_bf16_to_f32(src16[so + i - d]))
                                          : GUARD32;
                    EXPECT(out16[i] == w16, "%s %s to-16 n=%zu src+%zu dst+%zu: [%zu] 0x%04x want 0x%04x",
                           is_f16 ? "f16" : "bf16", path, n, so, d, i, out16[i], w16);
                    EXPECT(ocr_f32_bits(out32[i]) == w32, "%s %s to-32 n=%zu src+%zu dst+%zu: [%zu] 0x%08x want 0x%08x",
                           is_f16 ? "f16" : "bf16", path, n, so, d, i, ocr_f32_bits(out32[i]), w32);
                }
            }
        }
    }
    free(src);
    free(out32);
    free(src16);
    free(out16);
}

// ocr_bf16_round is the bf16 round trip, bit for bit, on every f32 pattern (NaNs, infinities,
// subnormals, both ties).
START_TEST(test_bf16_round_all_patterns) {
    uint64_t mismatches = 0;
    uint32_t first = 0;
    for (uint64_t w = 0; w <= 0xffffffffull; w++) {
        const uint32_t u = (uint32_t)w;
        const float f = ocr_bits_f32(u);
        if (ocr_f32_bits(ocr_bf16_round(f)) != ocr_f32_bits(ocr_bf16_to_f32(ocr_f32_to_bf16(f))) && !mismatches++)
            first = u;
    }
    ck_assert_msg(mismatches == 0, "ocr_bf16_round differs from the round trip on %llu patterns, first 0x%08x",
                  (unsigned long long)mismatches, first);
}
END_TEST

START_TEST(test_lengths_and_alignment) {
    for (int p = 0; p < N_F16_PATHS; p++)
        if (use_f16_path(f16_paths[p])) check_tails(1, f16_paths[p]);
    for (int p = 0; p < N_BF16_PATHS; p++)
        if (use_bf16_path(bf16_paths[p])) check_tails(0, bf16_paths[p]);
}
END_TEST

// ---- path selection ------------------------------------------------------------------
START_TEST(test_path_reporting) {
    ocr_half_select_f16_path(NULL);
    ocr_half_select_bf16_path(NULL);
    const char *f16 = ocr_half_f16_path(), *bf16 = ocr_half_bf16_path();
    printf("half paths on this CPU: f16 %s, bf16 %s\n", f16, bf16);
#if X86
    __builtin_cpu_init();
    unsigned a, b, c, d;
    int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));  // CPUID.1:ECX.F16C
    ck_assert_str_eq(f16, f16c && __builtin_cpu_supports("avx") ? "f16c" : "scalar");
    if (__builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw"))
        ck_assert_str_eq(bf16, "avx512bf16");
    else
        ck_assert_str_eq(bf16, __builtin_cpu_supports("avx2") ? "avx2" : "scalar");
#endif
    ocr_half_force_scalar(1);
    ck_assert_str_eq(ocr_half_f16_path(), "scalar");
    ck_assert_str_eq(ocr_half_bf16_path(), "scalar");
    ocr_half_force_scalar(0);
    ck_assert_str_eq(ocr_half_f16_path(), f16);
    ck_assert_str_eq(ocr_half_bf16_path(), bf16);
    // Unknown names and paths of the other format are refused and change nothing.
    ck_assert_int_eq(ocr_half_select_f16_path("avx2"), 0);
    ck_assert_int_eq(ocr_half_select_bf16_path("f16c"), 0);
    ck_assert_int_eq(ocr_half_select_bf16_path("nope"), 0);
    ck_assert_str_eq(ocr_half_f16_path(), f16);
    ck_assert_str_eq(ocr_half_bf16_path(), bf16);
}
END_TEST

static Suite *half_suite(void) {
    F16 = fmt_make(10, 5);
    BF16 = fmt_make(7, 8);
    Suite *s = suite_create("half");
    TCase *tc = tcase_create("half");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_reference_spot_values);
    tcase_add_test(tc, test_f16_all_patterns);
    tcase_add_test(tc, test_bf16_all_patterns);
    tcase_add_test(tc, test_all_patterns_bulk_paths);
    tcase_add_test(tc, test_f16_rounding_boundaries);
    tcase_add_test(tc, test_bf16_rounding_boundaries);
    tcase_add_test(tc, test_random_f32_patterns);
    tcase_add_test(tc, test_bf16_round_all_patterns);
    tcase_add_test(tc, test_lengths_and_alignment);
    tcase_add_test(tc, test_path_reporting);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(half_suite()); }

// Philox4x32-10 and the generators built on it.
//
// Known answers: the three philox4x32 R=10 vectors of the Random123 distribution
// (kat_vectors). They were checked against this independent Python model of the
// algorithm (Salmon et al., SC'11, section 3.3), run by hand, not in CI:
//
//   M0, M1 = 0xD2511F53, 0xCD9E8D57            # round multipliers
//   W0, W1 = 0x9E3779B9, 0xBB67AE85            # Weyl key increments
//   def philox4x32_10(c, k):
//       c = list(c); k0, k1 = k
//       for r in range(10):                    # round r uses key + r*W
//           p0, p1 = M0 * c[0], M1 * c[2]      # 64-bit products
//           c = [(p1 >> 32) ^ c[1] ^ k0, p1 & 0xffffffff,
//                (p0 >> 32) ^ c[3] ^ k1, p0 & 0xffffffff]
//           k0, k1 = (k0 + W0) & 0xffffffff, (k1 + W1) & 0xffffffff
//       return c
//   def u32(seed, stream, index):              # the mapping documented in rng.h
//       b = index >> 2
//       return philox4x32_10((b & 0xffffffff, b >> 32, stream & 0xffffffff, stream >> 32),
//                            (seed & 0xffffffff, seed >> 32))[index & 3]
//
// which prints 6627e8d5 e169c58d bc57ac4c 9b00dbd8 / 408f276d 41c83b0e a20bc7c6 6d5451fd /
// d16cfe09 94fdcceb 5001e420 24126ea1 for the three vectors (matching Random123 and the C
// code), u32(0x0123456789abcdef, 0xfedcba9876543210, 2**34 + 7) = 0x233050e4 and
// u32(42, 7, 5) = 0x600f6196.
//
// Statistical checks use fixed seeds (so they are reproducible) and bounds of 5-6 standard
// errors, far outside chance but well inside what a broken generator or transform produces.
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "tests/common/test_util.h"

#define EXPECT(cond, ...)                       \
    do {                                        \
        if (!(cond)) ck_abort_msg(__VA_ARGS__); \
    } while (0)

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

START_TEST(test_philox_known_answers) {
    static const struct {
        uint32_t ctr[4], key[2], out[4];
    } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
        {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
         {0xffffffffu, 0xffffffffu},
         {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
        {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
         {0xa4093822u, 0x299f31d0u},
         {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
    };
    for (size_t t = 0; t < sizeof kat / sizeof kat[0]; t++) {
        uint32_t out[4];
        ocr_philox4x32_10(kat[t].ctr, kat[t].key, out);
        for (int j = 0; j < 4; j++)
            ck_assert_msg(out[j] == kat[t].out[j], "vector %zu word %d: 0x%08x, expected 0x%08x", t, j, out[j],
                          kat[t].out[j]);
    }
}
END_TEST

// (seed, stream, index) -> key (seed lo, hi), counter (index/4 lo, hi, stream lo, hi), lane index%4.
START_TEST(test_index_mapping) {
    ck_assert_uint_eq(ocr_rng_u32(0x0123456789abcdefull, 0xfedcba9876543210ull, (1ull << 34) + 7), 0x233050e4u);
    ck_assert_uint_eq(ocr_rng_u32(42, 7, 5), 0x600f6196u);
    static const uint64_t seeds[] = {0, 1, 0x100000000ull, 0xdeadbeefcafef00dull};
    static const uint64_t streams[] = {0, 3, 0x500000000ull, UINT64_MAX};
    static const uint64_t indices[] = {0, 1, 2, 3, 4, 7, 0x3ffffffffull, 0x400000000ull, UINT64_MAX};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 9; c++) {
                uint64_t seed = seeds[a], stream = streams[b], idx = indices[c], blk = idx >> 2;
                uint32_t ctr[4] = {(uint32_t)blk, (uint32_t)(blk >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)};
                uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
                uint32_t out[4];
                ocr_philox4x32_10(ctr, key, out);
                ck_assert_uint_eq(ocr_rng_u32(seed, stream, idx), out[idx & 3]);
            }
}
END_TEST

// Fraction of equal values and the correlation of two uniform sequences.
static void check_independent(uint64_t seed_a, uint64_t stream_a, uint64_t seed_b, uint64_t stream_b) {
    const int n = 1 << 14;
    int equal = 0;
    double sa = 0, sb = 0, sab = 0, saa = 0, sbb = 0;
    for (int i = 0; i < n; i++) {
        uint32_t x = ocr_rng_u32(seed_a, stream_a, (uint64_t)i), y = ocr_rng_u32(seed_b, stream_b, (uint64_t)i);
        equal += x == y;
        double u = ocr_rng_u32_to_uniform(x) - 0.5, v = ocr_rng_u32_to_uniform(y) - 0.5;
        sa += u;
        sb += v;
        sab += u * v;
        saa += u * u;
        sbb += v * v;
    }
    double cov = sab / n - (sa / n) * (sb / n);
    double r = cov / sqrt((saa / n - (sa / n) * (sa / n)) * (sbb / n - (sb / n) * (sb / n)));
    ck_assert_msg(equal <= 2, "(%llx,%llx) vs (%llx,%llx): %d equal values", (unsigned long long)seed_a,
                  (unsigned long long)stream_a, (unsigned long long)seed_b, (unsigned long long)stream_b, equal);
    ck_assert_msg(fabs(r) < 5.0 / sqrt(n), "correlation %g between (%llx,%llx) and (%llx,%llx)", r,
                  (unsigned long long)seed_a, (unsigned long long)stream_a, (unsigned long long)seed_b,
                  (unsigned long long)stream_b);
}

START_TEST(test_determinism_and_streams) {
    for (uint64_t i = 0; i < 100; i++) ck_assert_uint_eq(ocr_rng_u32(9, 4, i), ocr_rng_u32(9, 4, i));
    // The sequential generator walks the same indices, and resumes from a saved offset.
    OcrRng r = ocr_rng_make(9, 4);
    for (uint64_t i = 0; i < 37; i++) ck_assert_uint_eq(ocr_rng_next_u32(&r), ocr_rng_u32(9, 4, i));
    ck_assert_uint_eq(r.offset, 37);
    OcrRng saved = r;
    uint32_t cont[10];
    for (int i = 0; i < 10; i++) cont[i] = ocr_rng_next_u32(&r);
    for (int i = 0; i < 10; i++) ck_assert_uint_eq(ocr_rng_next_u32(&saved), cont[i]);
    ck_assert(ocr_rng_next_uniform(&r) == ocr_rng_uniform(9, 4, 47));
    // Neighbouring streams and seeds, including ones that differ only in the high 32 bits.
    for (uint64_t s = 0; s < 6; s++) check_independent(1, s, 1, s + 1);
    check_independent(1, 1, 1, 1 + (1ull << 32));
    check_independent(1, 0, 2, 0);
    check_independent(1, 0, 1 + (1ull << 32), 0);
    check_independent(1, 0, 0, 1);  // seed and stream are not interchangeable
}
END_TEST

START_TEST(test_bulk_fills_match_elementwise) {
    static const uint64_t offsets[] = {0, 1, 2, 3, 5, 6, 0xfffffffdull, 0x400000001ull, (1ull << 62) + 3};
    static const size_t lens[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 13, 100};
    float buf[128], one[1];
    for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++) {
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
            uint64_t off = offsets[o];
            size_t n = lens[l];
            const float lo = -2.0f, hi = 3.0f;
            buf[n] = 1234.5f;
            ocr_rng_fill_uniform(buf, n, 77, 3, off, lo, hi);
            ck_assert(buf[n] == 1234.5f);  // nothing written past n
            for (size_t i = 0; i < n; i++) {
                float u = ocr_rng_uniform(77, 3, off + i);
                float w = hi - lo;
                float want = lo + w * u;
                ck_assert_msg(bits_of(buf[i]) == bits_of(want), "uniform offset %llu n %zu [%zu]: %.9g vs %.9g",
                              (unsigned long long)off, n, i, (double)buf[i], (double)want);
            }
            ocr_rng_fill_normal(buf, n, 77, 3, off, 0.5f, 2.0f);
            for (size_t i = 0; i < n; i++) {
                OcrRng r = {77, 3, off + 2 * (uint64_t)i};  // element i uses indices offset + 2i, + 2i + 1
                float want = ocr_rng_next_normal(&r, 0.5f, 2.0f);
                ck_assert_msg(bits_of(buf[i]) == bits_of(want), "normal offset %llu [%zu]: %.9g vs %.9g",
                              (unsigned long long)off, i, (double)buf[i], (double)want);
            }
            ocr_rng_fill_trunc_normal(buf, n, 77, 3, off, 0.5f, 2.0f);
            for (size_t i = 0; i < n; i++) {
                ocr_rng_fill_trunc_normal(one, 1, 77, 3, off + i, 0.5f, 2.0f);
                ck_assert_msg(bits_of(buf[i]) == bits_of(one[0]), "trunc normal offset %llu [%zu]",
                              (unsigned long long)off, i);
            }
        }
    }
    // A fill is reproducible and a different stream gives different values.
    float a[64], b[64];
    ocr_rng_fill_normal(a, 64, 77, 3, 10, 0, 1);
    ocr_rng_fill_normal(b, 64, 77, 3, 10, 0, 1);
    ck_assert(memcmp(a, b, sizeof a) == 0);
    ocr_rng_fill_normal(b, 64, 77, 4, 10, 0, 1);
    int same = 0;
    for (int i = 0; i < 64; i++) same += a[i] == b[i];
    ck_assert_int_le(same, 1);
}
END_TEST

START_TEST(test_uniform_statistics) {
    const size_t n = 1u << 20;
    float *v = malloc(n * sizeof *v);
    ocr_rng_fill_uniform(v, n, 2024, 1, 0, 0.0f, 1.0f);
    double sum = 0, sq = 0;
    long bins[256] = {0};
    for (size_t i = 0; i < n; i++) {
        EXPECT(v[i] >= 0.0f && v[i] < 1.0f, "uniform [%zu] = %.9g outside [0, 1)", i, (double)v[i]);
        sum += v[i];
        bins[(int)(v[i] * 256)]++;
    }
    double mean = sum / (double)n;
    for (size_t i = 0; i < n; i++) sq += (v[i] - mean) * (v[i] - mean);
    double var = sq / (double)(n - 1);
    // Uniform: mean 1/2 (sd 1/sqrt(12 n)); variance 1/12 (sd sqrt(1/180 n)).
    ck_assert_msg(fabs(mean - 0.5) < 5 * sqrt(1.0 / 12 / n), "mean %g", mean);
    ck_assert_msg(fabs(var - 1.0 / 12) < 5 * sqrt(1.0 / 180 / n), "variance %g", var);
    double chi2 = 0, expect = (double)n / 256;
    for (int b = 0; b < 256; b++) chi2 += (bins[b] - expect) * (bins[b] - expect) / expect;
    ck_assert_msg(chi2 < 255 + 6 * sqrt(2 * 255.0), "chi-square %g over 256 bins (255 dof)", chi2);
    // Each of the 32 raw bits is a fair coin.
    for (int bit = 0; bit < 32; bit++) {
        long ones = 0;
        for (uint64_t i = 0; i < 65536; i++) ones += (ocr_rng_u32(2024, 2, i) >> bit) & 1;
        ck_assert_msg(labs(ones - 32768) < 5 * 128, "bit %d set %ld times in 65536", bit, ones);
    }
    // The documented formula: 24 random bits.
    for (uint64_t i = 0; i < 1000; i++)
        ck_assert(ocr_rng_uniform(3, 3, i) == (float)(ocr_rng_u32(3, 3, i) >> 8) / 16777216.0f);
    ck_assert(ocr_rng_u32_to_uniform(0xffffffffu) < 1.0f);
    ck_assert(ocr_rng_u32_to_uniform(0) == 0.0f);
    // A scaled fill stays in [lo, hi]: lo + (hi - lo) * u can round up to hi itself.
    ocr_rng_fill_uniform(v, n, 2024, 5, 0, -0.25f, 0.75f);
    for (size_t i = 0; i < n; i++) EXPECT(v[i] >= -0.25f && v[i] <= 0.75f, "[%zu] = %.9g", i, (double)v[i]);
    free(v);
}
END_TEST

START_TEST(test_normal_statistics) {
    const size_t n = 1u << 20;
    const float mu = 3.0f, sigma = 2.0f;
    float *v = malloc(n * sizeof *v);
    ocr_rng_fill_normal(v, n, 11, 0, 0, mu, sigma);
    double sum = 0, sq = 0, quad = 0;
    long within1 = 0;
    for (size_t i = 0; i < n; i++) {
        EXPECT(isfinite(v[i]), "[%zu] not finite", i);
        sum += v[i];
        within1 += fabs(v[i] - mu) < sigma;
    }
    double mean = sum / (double)n;
    for (size_t i = 0; i < n; i++) {
        double d = v[i] - mean;
        sq += d * d;
        quad += d * d * d * d;
    }
    double var = sq / (double)(n - 1), kurt = (quad / (double)n) / ((sq / (double)n) * (sq / (double)n));
    ck_assert_msg(fabs(mean - mu) < 5 * sigma / sqrt((double)n), "mean %g", mean);
    // Sample variance of a normal: sd sigma^2 sqrt(2/n). Kurtosis 3 (sd sqrt(24/n)).
    ck_assert_msg(fabs(var - sigma * sigma) < 5 * sigma * sigma * sqrt(2.0 / n), "variance %g", var);
    ck_assert_msg(fabs(kurt - 3.0) < 6 * sqrt(24.0 / n), "kurtosis %g", kurt);
    double p1 = 0.682689492137086, frac = (double)within1 / (double)n;
    ck_assert_msg(fabs(frac - p1) < 5 * sqrt(p1 * (1 - p1) / n), "fraction within 1 sd %g", frac);
    // The sequential generator's normals come from the same transform.
    OcrRng r = ocr_rng_make(11, 0);
    for (int i = 0; i < 100; i++) ck_assert(bits_of(ocr_rng_next_normal(&r, mu, sigma)) == bits_of(v[i]));
    free(v);
}
END_TEST

START_TEST(test_trunc_normal) {
    const size_t n = 1u << 19;
    const float mu = -1.0f, sigma = 0.5f;
    float *v = malloc(n * sizeof *v);
    ocr_rng_fill_trunc_normal(v, n, 12, 9, 0, mu, sigma);
    const float lo = mu - 2 * sigma, hi = mu + 2 * sigma;
    double sum = 0, sq = 0;
    long tail = 0, at_mean = 0;
    for (size_t i = 0; i < n; i++) {
        EXPECT(v[i] >= lo && v[i] <= hi, "[%zu] = %.9g outside [%g, %g]", i, (double)v[i], (double)lo, (double)hi);
        sum += v[i];
        sq += (double)(v[i] - mu) * (v[i] - mu);
        tail += fabs(v[i] - mu) > 1.5 * sigma;
        at_mean += v[i] == mu;
    }
    // Standard normal truncated to [-2, 2]: variance 1 - 4 phi(2) / (2 Phi(2) - 1) = 0.773741;
    // P(|z| > 1.5) = 2 (Phi(2) - Phi(1.5)) / (2 Phi(2) - 1) = 0.092320.
    double mean = sum / (double)n, var = sq / (double)n / (sigma * sigma);
    ck_assert_msg(fabs(mean - mu) < 5 * sigma * sqrt(0.773741 / n), "mean %g", mean);
    ck_assert_msg(fabs(var - 0.773741) < 0.01, "variance of z %g", var);
    double pt = 0.092320, ft = (double)tail / (double)n;
    ck_assert_msg(fabs(ft - pt) < 5 * sqrt(pt * (1 - pt) / n), "tail fraction %g, expected %g", ft, pt);
    ck_assert_int_le(at_mean, 2);  // the give-up fallback (z = 0) is not hit in practice
    free(v);
}
END_TEST

START_TEST(test_next_int) {
    OcrRng r = ocr_rng_make(31, 2);
    // Small range: every value, and no others, with equal frequency.
    long counts[7] = {0};
    for (int i = 0; i < 70000; i++) {
        int64_t x = ocr_rng_next_int(&r, -3, 3);
        EXPECT(x >= -3 && x <= 3, "out of range: %lld", (long long)x);
        counts[x + 3]++;
    }
    double chi2 = 0;
    for (int k = 0; k < 7; k++) chi2 += (counts[k] - 10000.0) * (counts[k] - 10000.0) / 10000.0;
    ck_assert_msg(chi2 < 30, "chi-square %g for [-3, 3]", chi2);
    // Power-of-two range (no rejection needed).
    int seen[256] = {0};
    for (int i = 0; i < 20000; i++) seen[ocr_rng_next_int(&r, 0, 255)]++;
    for (int k = 0; k < 256; k++) ck_assert_msg(seen[k] > 0, "value %d never drawn", k);
    // Modulo bias would make the first third of [0, 3*2^30) twice as likely (1/2 instead of 1/3).
    const int n = 200000;
    const int64_t third = 1ll << 30;
    long low = 0;
    for (int i = 0; i < n; i++) {
        int64_t x = ocr_rng_next_int(&r, 0, 3 * third - 1);
        EXPECT(x >= 0 && x < 3 * third, "out of range: %lld", (long long)x);
        low += x < third;
    }
    ck_assert_msg(fabs((double)low / n - 1.0 / 3) < 5 * sqrt(2.0 / 9 / n), "fraction in the first third %g",
                  (double)low / n);
    // The 64-bit path, with a range wider than INT64_MAX: [INT64_MIN, 2^62 - 1] holds 3*2^62 values.
    low = 0;
    for (int i = 0; i < n; i++) {
        int64_t x = ocr_rng_next_int(&r, INT64_MIN, (1ll << 62) - 1);
        EXPECT(x <= (1ll << 62) - 1, "out of range: %lld", (long long)x);
        low += x < INT64_MIN + (1ll << 62);
    }
    ck_assert_msg(fabs((double)low / n - 1.0 / 3) < 5 * sqrt(2.0 / 9 / n), "64-bit fraction in the first third %g",
                  (double)low / n);
    // Exactly 2^32 values, and the full int64 range: the top bit is a fair coin.
    long top = 0, neg = 0;
    for (int i = 0; i < 20000; i++) {
        int64_t x = ocr_rng_next_int(&r, 0, 0xffffffffll);
        EXPECT(x >= 0 && x <= 0xffffffffll, "out of range: %lld", (long long)x);
        top += x >= 0x80000000ll;
        neg += ocr_rng_next_int(&r, INT64_MIN, INT64_MAX) < 0;
    }
    ck_assert_msg(labs(top - 10000) < 5 * 71, "upper half %ld of 20000", top);
    ck_assert_msg(labs(neg - 10000) < 5 * 71, "negative %ld of 20000", neg);
    // Empty or single ranges.
    ck_assert_int_eq(ocr_rng_next_int(&r, 5, 5), 5);
    ck_assert_int_eq(ocr_rng_next_int(&r, 5, 4), 5);
    // Reproducible.
    OcrRng a = ocr_rng_make(8, 8), b = ocr_rng_make(8, 8);
    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(ocr_rng_next_int(&a, -1000, 123456789), ocr_rng_next_int(&b, -1000, 123456789));
}
END_TEST

START_TEST(test_next_double) {
    OcrRng r = ocr_rng_make(4, 4);
    const int n = 100000;
    double sum = 0;
    long odd = 0;
    for (int i = 0; i < n; i++) {
        double x = ocr_rng_next_double(&r);
        EXPECT(x >= 0.0 && x < 1.0, "%g outside [0, 1)", x);
        double k = x * 9007199254740992.0;  // 2^53
        EXPECT(k == floor(k), "%.17g is not a multiple of 2^-53", x);
        odd += fmod(k, 2.0) == 1.0;  // the 53rd bit is random too
        sum += x;
    }
    ck_assert_msg(fabs(sum / n - 0.5) < 5 * sqrt(1.0 / 12 / n), "mean %g", sum / n);
    ck_assert_msg(labs(odd - n / 2) < 5 * 159, "lowest bit set %ld of %d", odd, n);
}
END_TEST

static int is_permutation(const int32_t *v, int n) {
    char *seen = calloc((size_t)n + 1, 1);
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        if (v[i] < 0 || v[i] >= n || seen[v[i]])
            ok = 0;
        else
            seen[v[i]] = 1;
    }
    free(seen);
    return ok;
}

START_TEST(test_shuffle) {
    enum { N = 1000 };
    int32_t a[N], b[N];
    for (int i = 0; i < N; i++) a[i] = b[i] = i;
    OcrRng ra = ocr_rng_make(21, 0), rb = ocr_rng_make(21, 0);
    ocr_rng_shuffle_i32(&ra, a, N);
    ocr_rng_shuffle_i32(&rb, b, N);
    ck_assert(is_permutation(a, N));
    ck_assert(memcmp(a, b, sizeof a) == 0);  // reproducible
    int fixed = 0;
    for (int i = 0; i < N; i++) fixed += a[i] == i;
    ck_assert_int_le(fixed, 10);  // expected about 1
    for (int i = 0; i < N; i++) b[i] = i;
    OcrRng rc = ocr_rng_make(22, 0);
    ocr_rng_shuffle_i32(&rc, b, N);
    ck_assert(memcmp(a, b, sizeof a) != 0);  // another seed, another order
    // n = 0 and 1 are no-ops and draw nothing.
    int32_t one = 7;
    OcrRng rd = ocr_rng_make(1, 1);
    ocr_rng_shuffle_i32(&rd, NULL, 0);
    ocr_rng_shuffle_i32(&rd, &one, 1);
    ck_assert_int_eq(one, 7);
    ck_assert_uint_eq(rd.offset, 0);
    // All 6 orders of 3 elements are equally likely (Fisher-Yates without bias).
    long counts[6] = {0};
    OcrRng re = ocr_rng_make(23, 0);
    for (int t = 0; t < 60000; t++) {
        int32_t v[3] = {0, 1, 2};
        ocr_rng_shuffle_i32(&re, v, 3);
        counts[v[0] * 2 + (v[1] > v[2])]++;  // first element and the order of the other two
    }
    double chi2 = 0;
    for (int k = 0; k < 6; k++) chi2 += (counts[k] - 10000.0) * (counts[k] - 10000.0) / 10000.0;
    ck_assert_msg(chi2 < 30, "chi-square %g over the 6 permutations of 3", chi2);
}
END_TEST

static Suite *rng_suite(void) {
    Suite *s = suite_create("rng");
    TCase *tc = tcase_create("rng");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_philox_known_answers);
    tcase_add_test(tc, test_index_mapping);
    tcase_add_test(tc, test_determinism_and_streams);
    tcase_add_test(tc, test_bulk_fills_match_elementwise);
    tcase_add_test(tc, test_uniform_statistics);
    tcase_add_test(tc, test_normal_statistics);
    tcase_add_test(tc, test_trunc_normal);
    tcase_add_test(tc, test_next_int);
    tcase_add_test(tc, test_next_double);
    tcase_add_test(tc, test_shuffle);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(rng_suite()); }

#include "core/rng.h"

#include <math.h>


void ocr_philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)OCR_PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)OCR_PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        uint32_t n3 = (uint32_t)p0;
        c0 = n0; c1 = n1; c2 = n2; c3 = n3;
        k0 += OCR_PHILOX_W0;
        k1 += OCR_PHILOX_W1;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

static void block_for(uint64_t seed, uint64_t stream, uint64_t block, uint32_t out[4]) {
    uint32_t ctr[4] = {(uint32_t)block, (uint32_t)(block >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    ocr_philox4x32_10(ctr, key, out);
}

uint32_t ocr_rng_u32(uint64_t seed, uint64_t stream, uint64_t index) {
    uint32_t out[4];
    block_for(seed, stream, index >> 2, out);
    return out[index & 3];
}

float ocr_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
    return ocr_rng_u32_to_uniform(ocr_rng_u32(seed, stream, index));
}

void ocr_rng_fill_uniform(float *dst, size_t n, uint64_t seed, uint64_t stream, uint64_t offset, float lo, float hi) {
    uint32_t blk[4];
    uint64_t cached = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        uint64_t idx = offset + i;
        if ((idx >> 2) != cached) {
            cached = idx >> 2;
            block_for(seed, stream, cached, blk);
        }
        dst[i] = lo + (hi - lo) * ocr_rng_u32_to_uniform(blk[idx & 3]);
    }
}

static float box_muller(uint32_t a, uint32_t b) {
    // u1 in (0, 1] so log never sees 0.
    double u1 = ((double)(a >> 8) + 1.0) / 16777216.0;
    double u2 = (double)(b >> 8) / 16777216.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2));
}

void ocr_rng_fill_normal(float *dst, size_t n, uint64_t seed, uint64_t stream, uint64_t offset, float mean, float std) {
    for (size_t i = 0; i < n; i++) {
        uint64_t idx = offset + 2 * (uint64_t)i;
        dst[i] = mean + std * box_muller(ocr_rng_u32(seed, stream, idx), ocr_rng_u32(seed, stream, idx + 1));
    }
}

void ocr_rng_fill_trunc_normal(float *dst, size_t n, uint64_t seed, uint64_t stream, uint64_t offset, float mean,
                               float std) {
    // Element i draws from its own sub-sequence so the result does not depend on how many
    // redraws other elements needed.
    for (size_t i = 0; i < n; i++) {
        uint64_t sub = stream ^ 0x5bd1e9955bd1e995ull;
        float z;
        uint64_t attempt = 0;
        do {
            uint64_t idx = ((offset + (uint64_t)i) << 6) + 2 * attempt;
            z = box_muller(ocr_rng_u32(seed, sub, idx), ocr_rng_u32(seed, sub, idx + 1));
            attempt++;
        } while (fabsf(z) > 2.0f && attempt < 32);
        if (fabsf(z) > 2.0f) z = 0.0f;
        dst[i] = mean + std * z;
    }
}

uint32_t ocr_rng_next_u32(OcrRng *rng) { return ocr_rng_u32(rng->seed, rng->stream, rng->offset++); }

float ocr_rng_next_uniform(OcrRng *rng) { return ocr_rng_u32_to_uniform(ocr_rng_next_u32(rng)); }

double ocr_rng_next_double(OcrRng *rng) {
    uint64_t hi = ocr_rng_next_u32(rng) >> 5;  // 27 bits
    uint64_t lo = ocr_rng_next_u32(rng) >> 6;  // 26 bits
    return (double)((hi << 26) | lo) * (1.0 / 9007199254740992.0);
}

float ocr_rng_next_normal(OcrRng *rng, float mean, float std) {
    uint32_t a = ocr_rng_next_u32(rng);
    uint32_t b = ocr_rng_next_u32(rng);
    return mean + std * box_muller(a, b);
}

// High word first. Written as two statements: the operands of `a() << 32 | b()` may be
// evaluated in either order, which would make results depend on the compiler.
static uint64_t next_u64(OcrRng *rng) {
    uint64_t hi = ocr_rng_next_u32(rng);
    uint64_t lo = ocr_rng_next_u32(rng);
    return (hi << 32) | lo;
}

int64_t ocr_rng_next_int(OcrRng *rng, int64_t lo, int64_t hi) {
    if (hi <= lo) return lo;
    // Unsigned arithmetic throughout: hi - lo and lo + offset overflow int64 for wide ranges.
    // (Converting the final value back to int64 wraps modulo 2^64 with GCC and Clang.)
    uint64_t range = (uint64_t)hi - (uint64_t)lo + 1;  // 0 means all 2^64 values
    if (range == 0) return (int64_t)next_u64(rng);
    uint64_t offset;
    if (range <= 0xffffffffull) {
        uint32_t r32 = (uint32_t)range;
        uint32_t limit = (uint32_t)(0x100000000ull - (0x100000000ull % r32));  // reject the biased tail
        uint32_t x;
        do x = ocr_rng_next_u32(rng);
        while (limit != 0 && x >= limit);
        offset = x % r32;
    } else {
        uint64_t limit = UINT64_MAX - (UINT64_MAX % range);
        uint64_t x;
        do x = next_u64(rng);
        while (x >= limit);
        offset = x % range;
    }
    return (int64_t)((uint64_t)lo + offset);
}

void ocr_rng_shuffle_i32(OcrRng *rng, int32_t *values, size_t n) {
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)ocr_rng_next_int(rng, 0, (int64_t)i - 1);
        int32_t t = values[i - 1];
        values[i - 1] = values[j];
        values[j] = t;
    }
}

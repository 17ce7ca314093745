// IEEE binary16 (f16) and bfloat16 (bf16) storage types and their exact conversions.
//
// f32 -> f16/bf16 rounds to nearest, ties to even; subnormals, infinities and NaN are
// handled exactly (NaN stays NaN with its sign and the top payload bits that fit, and is
// always made quiet, so a payload that truncates to zero cannot turn into inf).
// f16/bf16 -> f32 is exact and keeps NaN bits as they are (a signalling NaN stays signalling).
// The bulk functions pick F16C (f16; its 16-lane AVX-512 forms where the CPU has AVX-512) and
// AVX-512 BF16 / AVX2 (bf16) at run time when the CPU has them and fall back to the scalar
// code elsewhere; all paths give identical bits.
#ifndef OCR_CORE_HALF_H
#define OCR_CORE_HALF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef uint16_t ocr_f16_t;
typedef uint16_t ocr_bf16_t;

static inline uint32_t ocr_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float ocr_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float ocr_bf16_to_f32(ocr_bf16_t h) { return ocr_bits_f32((uint32_t)h << 16); }

static inline ocr_bf16_t ocr_f32_to_bf16(float f) {
    uint32_t u = ocr_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        // NaN: keep sign and top payload bits, force quiet so truncation cannot make it inf.
        return (ocr_bf16_t)((u >> 16) | 0x0040u);
    }
    uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
    return (ocr_bf16_t)((u + rounding_bias) >> 16);
}

// ocr_bf16_to_f32(ocr_f32_to_bf16(f)) bit for bit (NaNs included), computed without leaving
// 32 bits: vectorised loops that round an fp32 intermediate to bf16 and keep computing then
// stay in 32-bit lanes instead of packing to 16 bits and widening back (two cross-lane shuffles
// per vector at AVX2).
static inline float ocr_bf16_round(float f) {
    uint32_t u = ocr_f32_bits(f);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    uint32_t quiet_nan = (u & 0xffff0000u) | 0x00400000u;
    return ocr_bits_f32((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

static inline float ocr_f16_to_f32(ocr_f16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);  // inf or NaN (payload kept)
    } else if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {
            // Subnormal: value = mant * 2^-24; normalise into an f32.
            int shift = 0;
            while (!(mant & 0x400u)) { mant <<= 1; shift++; }
            mant &= 0x3ffu;
            bits = sign | ((uint32_t)(127 - 15 - shift + 1) << 23) | (mant << 13);
        }
    } else {
        bits = sign | ((exp + (127 - 15)) << 23) | (mant << 13);
    }
    return ocr_bits_f32(bits);
}

static inline ocr_f16_t ocr_f32_to_f16(float f) {
    uint32_t u = ocr_f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) {
        uint32_t payload = (abs >> 13) & 0x3ffu;
        return (ocr_f16_t)(sign | 0x7c00u | 0x200u | payload);  // quiet NaN, payload kept
    }
    if (abs >= 0x477ff000u) return (ocr_f16_t)(sign | 0x7c00u);  // rounds to >= 65520: inf
    if (abs < 0x38800000u) {
        // Result is subnormal or zero in f16 (|f| < 2^-14). Represent |f| as m * 2^e with the
        // implicit bit, then shift right with round-to-nearest-even.
        if (abs < 0x33000000u) return (ocr_f16_t)sign;  // < 2^-25: rounds to 0 (2^-25 itself ties to 0)
        uint32_t exp = abs >> 23;
        uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - exp;  // 2^-14 subnormal scale: result = mant >> (shift) in units of 2^-24
        uint32_t result = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (result & 1u))) result++;
        return (ocr_f16_t)(sign | result);
    }
    // Normal: rebias exponent and round the 13 dropped mantissa bits to nearest even.
    uint32_t h = ((abs - 0x38000000u) >> 13);
    uint32_t rem = abs & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return (ocr_f16_t)(sign | h);
}

// Bulk conversions (n elements). Safe for any n and any alignment.
void ocr_f32_to_f16_array(ocr_f16_t *dst, const float *src, size_t n);
void ocr_f16_to_f32_array(float *dst, const ocr_f16_t *src, size_t n);
void ocr_f32_to_bf16_array(ocr_bf16_t *dst, const float *src, size_t n);
void ocr_bf16_to_f32_array(float *dst, const ocr_bf16_t *src, size_t n);

// Which bulk path is active: "f16c", "avx512bf16", "avx2", "scalar".
const char *ocr_half_f16_path(void);
const char *ocr_half_bf16_path(void);
// Tests force the scalar path to compare it against the vector one.
void ocr_half_force_scalar(int force);
// Tests: select a bulk path by name ("scalar", "f16c" / "avx2", "avx512bf16"), NULL for the
// best one. Returns 0 and changes nothing when the CPU lacks the path.
int ocr_half_select_f16_path(const char *name);
int ocr_half_select_bf16_path(const char *name);

#endif

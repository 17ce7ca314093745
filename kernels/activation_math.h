// The activations' per-element formulas on the CPU, shared by activation.c's loops and the fused
// batch norm + activation kernels (bn_act.c), so that both compute the same bits. Everything is
// branch-free and vectorises under GCC -O3 without -ffast-math (see activation.c); the loops
// that call these hoist the switch over the activation out of the element loop. The CUDA
// formulas are kernels/cuda/activation_math.cuh.
#ifndef OCR_KERNELS_CPU_ACTIVATION_MATH_H
#define OCR_KERNELS_CPU_ACTIVATION_MATH_H

#include <stdint.h>
#include <string.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/ops.h"

// Paddle's hardsigmoid slope is the float literal 0.1666667, not 1/6.
#define HARDSIGMOID_SLOPE 0.1666667f
#define INV_SQRT_2PI 0.39894228040143267794f

// ---- branch-free math (vectorisable) -------------------------------------------------

// take_a ? a : b, as a bit blend so that loops around it stay vectorisable.
CPU_INLINE float blend(int take_a, float a, float b) {
    uint32_t m = 0u - (uint32_t)take_a, ua, ub;
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    ua = (ua & m) | (ub & ~m);
    memcpy(&a, &ua, sizeof a);
    return a;
}

// e^x within ~1e-7 relative for x in [−87, 88] (the input is clamped there, so the result
// never overflows or goes subnormal). x = n·ln2 + r with |r| <= ln2/2; e^r by its Taylor
// series to r^7 (truncation < 6e-9); 2^n assembled in the exponent bits.
CPU_INLINE float vexpf(float x) {
    x = blend(x < -87.0f, -87.0f, x);
    x = blend(x > 88.0f, 88.0f, x);
    const float round_magic = 12582912.0f;  // 1.5·2^23: adding and subtracting it rounds to an integer
    const float n = (x * 1.44269504088896341f + round_magic) - round_magic;
    // ln2 = 0.693359375 − 2.12194440e-4; the first part has few bits, so n·it is exact.
    float r = x - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

// Φ(x) = 0.5·(1 + erf(x/√2)), the standard normal CDF. With a = |x|/√2:
//   a < 1:      erf(a) = a·P(a²); P interpolates erf(a)/a at Chebyshev nodes in a² on [0, 1]
//               (degree 6, relative error 1.3e-9 in exact arithmetic).
//   1 <= a < 5: erfc(a) = e^(−a²)·S(1/a)/a; S interpolates a·e^(a²)·erfc(a) at Chebyshev nodes
//               in t = 1/a on [0.2, 1] (degree 9, relative error 1e-8). Computing the
//               upper tail from erfc keeps Φ relatively accurate for negative x, where
//               1 + erf would cancel.
//   a >= 5:     Φ = 0 or 1 (the tail is below 8e-13).
// Measured against double: Φ within 1e-7 relative for x >= 0, 1.4e-6 for x > −4 and 5e-6
// down to x = −7, where the float rounding of a² dominates (≈ a²·2^-23; 0.5·(1 + erff) loses
// far more there to cancellation).
CPU_INLINE float normal_cdf(float x) {
    const float z = x * 0.70710678118654752440f;
    const float a = blend(z < 0.0f, -z, z);

    const float s = 2.0f * (a * a) - 1.0f;  // a² mapped onto [−1, 1]
    float p = 1.230605476e-06f;
    p = p * s - 1.766906802e-05f;
    p = p * s + 2.175135417e-04f;
    p = p * s - 2.285419545e-03f;
    p = p * s + 1.985249714e-02f;
    p = p * s - 1.405360973e-01f;
    p = p * s + 9.654687387e-01f;
    const float e = a * p;
    const float central = 0.5f + 0.5f * blend(x < 0.0f, -e, e);

    float ac = blend(a < 1.0f, 1.0f, a);
    ac = blend(ac > 5.0f, 5.0f, ac);
    const float t = 1.0f / ac;
    const float q = (t - 0.6f) * 2.5f;  // t mapped onto [−1, 1]
    float w = -1.333063645e-05f;
    w = w * q + 4.347827961e-05f;
    w = w * q - 5.856742665e-05f;
    w = w * q - 2.485431115e-05f;
    w = w * q + 5.204922138e-04f;
    w = w * q - 2.157115485e-03f;
    w = w * q + 5.133897619e-03f;
    w = w * q - 1.120592530e-03f;
    w = w * q - 6.855230135e-02f;
    w = w * q + 4.938124656e-01f;
    const float erfc_a = blend(a < 5.0f, vexpf(-(ac * ac)) * (w * t), 0.0f);
    const float tail = blend(x < 0.0f, 0.5f * erfc_a, 1.0f - 0.5f * erfc_a);
    return blend(a < 1.0f, central, tail);
}

// ---- act(v) ------------------------------------------------------------------------------------

CPU_INLINE float act_none_forward_one(float v) { return v; }

CPU_INLINE float relu_forward_one(float v) { return v < 0.0f ? 0.0f : v; }  // NaN passes through

CPU_INLINE float hardswish_forward_one(float v) {
    float t = v + 3.0f;
    t = t < 0.0f ? 0.0f : t;
    t = t > 6.0f ? 6.0f : t;
    return v * t / 6.0f;
}

CPU_INLINE float hardsigmoid_forward_one(float v) {
    float t = v * HARDSIGMOID_SLOPE + 0.5f;
    t = t < 0.0f ? 0.0f : t;
    return t > 1.0f ? 1.0f : t;
}

CPU_INLINE float swish_forward_one(float v) { return v / (1.0f + vexpf(-v)); }

CPU_INLINE float gelu_forward_one(float v) { return v * normal_cdf(v); }

// ---- g · act'(v) ---------------------------------------------------------------------------------

CPU_INLINE float act_none_backward_one(float g, float v) { (void)v; return g; }

// g is loaded unconditionally by the callers so that the select vectorises.
CPU_INLINE float relu_backward_one(float g, float v) { return v > 0.0f ? g : 0.0f; }

CPU_INLINE float hardswish_backward_one(float g, float v) {
    // A select between the slope and a constant would not vectorise (GCC keeps the division
    // on one branch under -ftrapping-math), so the slope is masked with integer bits instead;
    // that also keeps v = ±inf from giving inf·0.
    float d = (2.0f * v + 3.0f) / 6.0f;
    uint32_t keep = ((v > -3.0f) & (v < 3.0f)) ? 0xffffffffu : 0u, bits;
    memcpy(&bits, &d, sizeof bits);
    bits &= keep;
    memcpy(&d, &bits, sizeof d);
    return g * (d + (v >= 3.0f ? 1.0f : 0.0f));
}

CPU_INLINE float hardsigmoid_backward_one(float g, float v) {
    float t = v * HARDSIGMOID_SLOPE + 0.5f;
    float d = (t > 0.0f && t < 1.0f) ? HARDSIGMOID_SLOPE : 0.0f;
    return g * d;
}

CPU_INLINE float swish_backward_one(float g, float v) {
    float sg = 1.0f / (1.0f + vexpf(-v));
    return g * sg * (1.0f + v * (1.0f - sg));
}

CPU_INLINE float gelu_backward_one(float g, float v) {
    float cdf = normal_cdf(v);
    float pdf = INV_SQRT_2PI * vexpf(-0.5f * v * v);
    return g * (cdf + v * pdf);
}

// The switch over the activation, outside the element loop: LOOP(f) is expanded once per
// activation with f = <activation><sfx> (sfx: _forward_one or _backward_one).
#define CPU_ACT_SWITCH(act, LOOP, sfx)                                  \
    switch (act) {                                                      \
        case OCR_ACT_NONE: LOOP(act_none##sfx) break;                   \
        case OCR_ACT_RELU: LOOP(relu##sfx) break;                       \
        case OCR_ACT_HARDSWISH: LOOP(hardswish##sfx) break;             \
        case OCR_ACT_HARDSIGMOID: LOOP(hardsigmoid##sfx) break;         \
        case OCR_ACT_SWISH: LOOP(swish##sfx) break;                     \
        case OCR_ACT_GELU: LOOP(gelu##sfx) break;                       \
        default: OCR_ASSERT(0, "unknown activation %d", (int)act);      \
    }

#endif

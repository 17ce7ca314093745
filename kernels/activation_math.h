// The activations' per-element formulas, one copy for both backends: the CPU's activation loops
// (kernels/cpu/activation.c), fused batch norm + activation (bn_act.c) and fused affine →
// activation → affine (affine.c), and the same three families on the GPU (kernels/cuda/
// activation.cu, bn_act.cu, affine.cu). Within a backend every op computes the same bits; across
// backends the formulas are the same expressions, but nvcc contracts a·b + c into one FMA where
// the CPU build (ISO C mode) rounds twice, so GPU and CPU values may differ in the last bits.
//
// The functions are OCR_HOST_DEVICE static inline: compiled into each file that uses them, so
// no relocatable device code is needed. On the CPU everything is branch-free and vectorises
// under GCC -O3 without -ffast-math (see activation.c); the loops that call these hoist the
// switch over the activation out of the element loop (CPU_ACT_SWITCH), while the GPU kernels
// switch per element (act_forward / act_backward, a uniform branch). Where the backends need a
// different spelling of the same value (a select, an unfused add, a bit cast) the #ifdef
// __CUDA_ARCH__ branches below say why: each backend keeps the bits it computed before the two
// copies of these formulas became this one.
#ifndef OCR_KERNELS_ACTIVATION_MATH_H
#define OCR_KERNELS_ACTIVATION_MATH_H

#include <stdint.h>
#include <string.h>

// The core headers are C: included with C linkage from the .cu files too.
#ifdef __cplusplus
extern "C" {
#endif
#include "kernels/ops.h"
#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
#define OCR_HOST_DEVICE __host__ __device__
#define OCR_MATH_INLINE static __forceinline__ OCR_HOST_DEVICE
#else
#define OCR_HOST_DEVICE
#define OCR_MATH_INLINE static inline __attribute__((always_inline)) OCR_HOST_DEVICE
#endif

// Paddle's hardsigmoid slope is the float literal 0.1666667, not 1/6.
#define HARDSIGMOID_SLOPE 0.1666667f
#define INV_SQRT_2PI 0.39894228040143267794f

// ---- branch-free math (vectorisable) -------------------------------------------------

// take_a ? a : b as a bit blend, so that CPU loops around it stay vectorisable (GCC does not
// if-convert a select between float expressions that may trap).
OCR_MATH_INLINE float blend(int take_a, float a, float b) {
    uint32_t m = 0u - (uint32_t)take_a, ua, ub;
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    ua = (ua & m) | (ub & ~m);
    memcpy(&a, &ua, sizeof a);
    return a;
}

// c ? a : b in the formulas below: blend() on the CPU; on the GPU the conditional expression
// itself, whose operands are evaluated only when chosen. That is part of the GPU's bits: nvcc
// contracts a multiply and an add into one FMA only when both sit in the same branch, so an
// operand evaluated eagerly (as a function argument) can round differently.
#ifdef __CUDA_ARCH__
#define ACT_SELECT(c, a, b) ((c) ? (a) : (b))
#else
#define ACT_SELECT(c, a, b) blend(c, a, b)
#endif

// a + b and a − b, each rounded on its own. nvcc contracts a·b + c into one FMA unless told
// not to, which would change the round-to-integer trick in vexpf; the CPU build never contracts.
OCR_MATH_INLINE float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
OCR_MATH_INLINE float sub_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

// e^x within ~1e-7 relative for x in [−87, 88] (the input is clamped there, so the result
// never overflows or goes subnormal). x = n·ln2 + r with |r| <= ln2/2; e^r by its Taylor
// series to r^7 (truncation < 6e-9); 2^n assembled in the exponent bits.
OCR_MATH_INLINE float vexpf(float x) {
    x = ACT_SELECT(x < -87.0f, -87.0f, x);
    x = ACT_SELECT(x > 88.0f, 88.0f, x);
    const float round_magic = 12582912.0f;  // 1.5·2^23: adding and subtracting it rounds to an integer
    const float n = sub_rn(add_rn(x * 1.44269504088896341f, round_magic), round_magic);
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
#ifdef __CUDA_ARCH__
    const float scale = __uint_as_float(bits);
#else
    float scale;
    memcpy(&scale, &bits, sizeof scale);
#endif
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
// Measured against double (CPU): Φ within 1e-7 relative for x >= 0, 1.4e-6 for x > −4 and 5e-6
// down to x = −7, where the float rounding of a² dominates (≈ a²·2^-23; 0.5·(1 + erff) loses
// far more there to cancellation).
OCR_MATH_INLINE float normal_cdf(float x) {
    const float z = x * 0.70710678118654752440f;
    const float a = ACT_SELECT(z < 0.0f, -z, z);

    const float s = 2.0f * (a * a) - 1.0f;  // a² mapped onto [−1, 1]
    float p = 1.230605476e-06f;
    p = p * s - 1.766906802e-05f;
    p = p * s + 2.175135417e-04f;
    p = p * s - 2.285419545e-03f;
    p = p * s + 1.985249714e-02f;
    p = p * s - 1.405360973e-01f;
    p = p * s + 9.654687387e-01f;
    const float e = a * p;
    const float central = 0.5f + 0.5f * ACT_SELECT(x < 0.0f, -e, e);

    float ac = ACT_SELECT(a < 1.0f, 1.0f, a);
    ac = ACT_SELECT(ac > 5.0f, 5.0f, ac);
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
    const float erfc_a = ACT_SELECT(a < 5.0f, vexpf(-(ac * ac)) * (w * t), 0.0f);
    const float tail = ACT_SELECT(x < 0.0f, 0.5f * erfc_a, 1.0f - 0.5f * erfc_a);
    return ACT_SELECT(a < 1.0f, central, tail);
}

// ---- act(v) ------------------------------------------------------------------------------------

OCR_MATH_INLINE float act_none_forward_one(float v) { return v; }

OCR_MATH_INLINE float relu_forward_one(float v) { return v < 0.0f ? 0.0f : v; }  // NaN passes through

OCR_MATH_INLINE float hardswish_forward_one(float v) {
    float t = v + 3.0f;
    t = t < 0.0f ? 0.0f : t;
    t = t > 6.0f ? 6.0f : t;
    return v * t / 6.0f;
}

OCR_MATH_INLINE float hardsigmoid_forward_one(float v) {
    float t = v * HARDSIGMOID_SLOPE + 0.5f;
    t = t < 0.0f ? 0.0f : t;
    return t > 1.0f ? 1.0f : t;
}

OCR_MATH_INLINE float swish_forward_one(float v) { return v / (1.0f + vexpf(-v)); }

OCR_MATH_INLINE float gelu_forward_one(float v) { return v * normal_cdf(v); }

// ---- g · act'(v) ---------------------------------------------------------------------------------
// The kink conventions are Paddle's gradient kernels' (kernels/cpu/activation.c lists them).

OCR_MATH_INLINE float act_none_backward_one(float g, float v) { (void)v; return g; }

// g is loaded unconditionally by the callers so that the select vectorises.
OCR_MATH_INLINE float relu_backward_one(float g, float v) { return v > 0.0f ? g : 0.0f; }

// 0 for v <= −3, 1 for v >= 3, (2v + 3)/6 strictly between (also keeps ±inf finite).
OCR_MATH_INLINE float hardswish_backward_one(float g, float v) {
#ifdef __CUDA_ARCH__
    float d = (v > -3.0f && v < 3.0f) ? (2.0f * v + 3.0f) / 6.0f : 0.0f;
#else
    // A select between the slope and a constant would not vectorise (GCC keeps the division
    // on one branch under -ftrapping-math), so the slope is masked with integer bits instead;
    // that also keeps v = ±inf from giving inf·0.
    float d = (2.0f * v + 3.0f) / 6.0f;
    uint32_t keep = ((v > -3.0f) & (v < 3.0f)) ? 0xffffffffu : 0u, bits;
    memcpy(&bits, &d, sizeof bits);
    bits &= keep;
    memcpy(&d, &bits, sizeof d);
#endif
    return g * (d + (v >= 3.0f ? 1.0f : 0.0f));
}

OCR_MATH_INLINE float hardsigmoid_backward_one(float g, float v) {
    float t = v * HARDSIGMOID_SLOPE + 0.5f;
    float d = (t > 0.0f && t < 1.0f) ? HARDSIGMOID_SLOPE : 0.0f;
    return g * d;
}

OCR_MATH_INLINE float swish_backward_one(float g, float v) {
    float sg = 1.0f / (1.0f + vexpf(-v));
    return g * sg * (1.0f + v * (1.0f - sg));
}

OCR_MATH_INLINE float gelu_backward_one(float g, float v) {
    float cdf = normal_cdf(v);
    float pdf = INV_SQRT_2PI * vexpf(-0.5f * v * v);
    return g * (cdf + v * pdf);
}

// ---- the switch over the activation ---------------------------------------------------------------

// CPU: outside the element loop. LOOP(f) is expanded once per activation with
// f = <activation><sfx> (sfx: _forward_one or _backward_one).
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

#ifdef __CUDACC__
// GPU: per element (every thread of a launch takes the same case).
__device__ __forceinline__ float act_forward(float v, int act) {
    switch (act) {
        case OCR_ACT_RELU: return relu_forward_one(v);
        case OCR_ACT_HARDSWISH: return hardswish_forward_one(v);
        case OCR_ACT_HARDSIGMOID: return hardsigmoid_forward_one(v);
        case OCR_ACT_SWISH: return swish_forward_one(v);
        case OCR_ACT_GELU: return gelu_forward_one(v);
        default: return v;  // OCR_ACT_NONE
    }
}

// g · act'(v).
__device__ __forceinline__ float act_backward(float g, float v, int act) {
    switch (act) {
        case OCR_ACT_RELU: return relu_backward_one(g, v);
        case OCR_ACT_HARDSWISH: return hardswish_backward_one(g, v);
        case OCR_ACT_HARDSIGMOID: return hardsigmoid_backward_one(g, v);
        case OCR_ACT_SWISH: return swish_backward_one(g, v);
        case OCR_ACT_GELU: return gelu_backward_one(g, v);
        default: return g;  // OCR_ACT_NONE
    }
}
#endif

#endif

// The activations' per-element formulas, one copy for both backends: the CPU's activation loops
// (kernels/cpu/activation.c), fused batch norm + activation (bn_act.c) and fused affine →
// activation → affine (affine.c), and the same three families on the GPU (kernels/cuda/
// activation.cu, bn_act.cu, affine.cu). Within a backend every op computes the same bits; across
// backends the formulas are the same expressions, but nvcc contracts a·b + c into one FMA where
// the CPU build (ISO C mode) rounds twice, so GPU and CPU values may differ in the last bits.
// GELU is the exception: its formula writes as explicit FMAs the multiply-adds that nvcc fused
// in the former unfused spelling (fused_mul_add below), so a CPU with FMA3 takes the GPU's
// sequence of roundings; the SSE2 level, which has no FMA, rounds them twice.
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
#ifndef __CUDACC__
#include <math.h>
#endif

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

// e^x within ~1e-7 relative for x in [−87, 88], without the clamp: x = n·ln2 + r with
// |r| <= ln2/2; e^r by its Taylor series to r^7 (truncation < 6e-9); 2^n assembled in the
// exponent bits (valid while n + 127 stays in 1..254, hence the callers' clamps).
OCR_MATH_INLINE float vexpf_unclamped(float x) {
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

// e^x, the input clamped to [−87, 88] (so the result never overflows or goes subnormal).
OCR_MATH_INLINE float vexpf(float x) {
    x = ACT_SELECT(x < -87.0f, -87.0f, x);
    x = ACT_SELECT(x > 88.0f, 88.0f, x);
    return vexpf_unclamped(x);
}

// ---- fused multiply-adds where the CPU has them ------------------------------------------------
// GELU's formulas below round each multiply-add once (fmaf) where the CPU has FMA3: fewer
// instructions (a quarter less time per element at AVX2 and AVX-512), one rounding instead of
// two, and the GPU's sequence of roundings (nvcc contracted these multiply-adds already). The
// AVX2 and AVX-512 levels require FMA3 (kernels/cpu/cpu_common.c) and compile fmaf into the
// instruction; they give the same bits. The SSE2 level has no FMA: fmaf() there would be a scalar
// libm call (glibc's software routine, ~25 ns a call, 17 or 18 per element) and an exact
// emulation in double measured ~15x slower than the unfused formula, so it rounds each multiply
// and each add on its own, as before: GELU's last bits at SSE2 differ from AVX2/AVX-512 (the
// depthwise convolution's FMA levels make the same trade), within the accuracy stated at
// normal_cdf_e_fma (tests/kernels/test_gelu_fma.c bounds the difference). Which one a loop uses
// is hw_fma, a literal that each clone passes down (CPU_VEC_CLONES_FMA in kernels/cpu/cpu_common.h,
// CPU_ACT_SWITCH below), so the other branch folds away. The GPU always has the instruction.

// a·b + c: rounded once (the FMA instruction) with hw_fma, else the multiply and the add each
// rounded.
OCR_MATH_INLINE float fused_mul_add(int hw_fma, float a, float b, float c) {
#ifdef __CUDACC__
    (void)hw_fma;
    return fmaf(a, b, c);
#else
    return hw_fma ? fmaf(a, b, c) : a * b + c;
#endif
}

// vexpf_unclamped with the reduction's second step and the Taylor series' Horner steps each
// rounded once (GELU's exponential; swish and cross entropy keep vexpf's bits). n is still
// x·log2e rounded and then rounded to an integer, unfused: any integer near x·log2e reduces
// correctly, and the GPU's formula, whose other steps nvcc already contracted into FMAs, keeps
// its bits.
OCR_MATH_INLINE float vexpf_unclamped_fma(int hw_fma, float x) {
    const float round_magic = 12582912.0f;  // 1.5·2^23: adding and subtracting it rounds to an integer
    const float n = sub_rn(add_rn(x * 1.44269504088896341f, round_magic), round_magic);
    // ln2 = 0.693359375 − 2.12194440e-4; the first part has few bits, so n·it is exact.
    float r = fused_mul_add(hw_fma, n, -0.693359375f, x);
    r = fused_mul_add(hw_fma, n, 2.12194440e-4f, r);
    float p = 1.0f / 5040.0f;
    p = fused_mul_add(hw_fma, p, r, 1.0f / 720.0f);
    p = fused_mul_add(hw_fma, p, r, 1.0f / 120.0f);
    p = fused_mul_add(hw_fma, p, r, 1.0f / 24.0f);
    p = fused_mul_add(hw_fma, p, r, 1.0f / 6.0f);
    p = fused_mul_add(hw_fma, p, r, 0.5f);
    p = fused_mul_add(hw_fma, p, r, 1.0f);
    p = fused_mul_add(hw_fma, p, r, 1.0f);
    const uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
#ifdef __CUDA_ARCH__
    const float scale = __uint_as_float(bits);
#else
    float scale;
    memcpy(&scale, &bits, sizeof scale);
#endif
    return p * scale;
}

// e^(−v²/2), the Gaussian kernel shared by Φ and GELU's slope Φ + v·φ (so the slope costs one
// exponential, not two). The argument is never positive: only the lower clamp is needed.
OCR_MATH_INLINE float gauss_kernel_fma(int hw_fma, float v) {
    float x = -0.5f * (v * v);
    x = ACT_SELECT(x < -87.0f, -87.0f, x);
    return vexpf_unclamped_fma(hw_fma, x);
}

// Φ(x) = 0.5·(1 + erf(x/√2)), the standard normal CDF, given e = gauss_kernel_fma(x). With
// a = |x|/√2 (so e = e^(−a²)): erfc(a) = e^(−a²)·t·S(t) with t = 1/(1 + 0.3125·a), one formula
// for every a in [0, 5]; S interpolates e^(a²)·erfc(a)/t at the Chebyshev nodes of u, t mapped
// from [0.3876, 1.0030] (t(5) = 0.3902) onto [−1, 1] (degree 8; relative error 2.3e-8 in exact
// arithmetic). Φ = 1 − erfc/2 for x >= 0 and erfc/2 below, so the lower tail keeps its relative
// accuracy (1 + erf would cancel); for a >= 5 Φ is 0 or 1 (the tail is below 8e-13). One formula
// for the whole range, so every vector lane evaluates one polynomial (a central series plus a
// tail series would cost both in every lane). Measured against double (every float in the
// range): Φ within 5.9e-7 relative for x > −4 (float rounding of t, u and the exponential, a few
// ulps; 6.2e-7 with every multiply-add rounded twice) and 1.3e-6 down to x = −7 (1.4e-6), where
// the rounding of v² in the exponent dominates.
OCR_MATH_INLINE float normal_cdf_e_fma(int hw_fma, float x, float e) {
    const float a = fabsf(x) * 0.70710678118654752440f;
    const float t = 1.0f / fused_mul_add(hw_fma, 0.3125f, a, 1.0f);
    // u = (t − 0.6953125)·3.25 rounded once: where erfc is used (a < 5, t > 0.39) the subtraction
    // is exact (Sterbenz) and 0.6953125·3.25 = 2.259765625 is a float, so t·3.25 − 2.259765625
    // fused is the same value, one instruction with FMA. (For a >= 5 u is not used.)
#ifdef __CUDACC__
    const float u = fmaf(t, 3.25f, -2.259765625f);
#else
    const float u = hw_fma ? fmaf(t, 3.25f, -2.259765625f) : (t - 0.6953125f) * 3.25f;
#endif
    float s = -2.304061354e-06f;
    s = fused_mul_add(hw_fma, s, u, -5.445373972e-05f);
    s = fused_mul_add(hw_fma, s, u, -7.990016456e-05f);
    s = fused_mul_add(hw_fma, s, u, 1.501491875e-03f);
    s = fused_mul_add(hw_fma, s, u, 1.201511547e-02f);
    s = fused_mul_add(hw_fma, s, u, 5.075160787e-02f);
    s = fused_mul_add(hw_fma, s, u, 1.466957927e-01f);
    s = fused_mul_add(hw_fma, s, u, 3.104530871e-01f);
    s = fused_mul_add(hw_fma, s, u, 4.866009355e-01f);
    const float erfc_a = ACT_SELECT(a < 5.0f, e * (t * s), 0.0f);
    // 0.5·erfc is exact (or, for a subnormal erfc, far below half an ulp of 1), so 1 − 0.5·erfc
    // rounds once either way.
    return ACT_SELECT(x < 0.0f, 0.5f * erfc_a, fused_mul_add(hw_fma, -0.5f, erfc_a, 1.0f));
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

// GELU's loops name hw_fma in the function (gelu_hwfma_* with the FMA instruction, gelu_unfused_*
// without; CPU_ACT_SWITCH picks one per clone).
OCR_MATH_INLINE float gelu_forward_fma(int hw_fma, float v) {
    return v * normal_cdf_e_fma(hw_fma, v, gauss_kernel_fma(hw_fma, v));
}
OCR_MATH_INLINE float gelu_hwfma_forward_one(float v) { return gelu_forward_fma(1, v); }

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

OCR_MATH_INLINE float gelu_backward_fma(int hw_fma, float g, float v) {
    const float e = gauss_kernel_fma(hw_fma, v);
    const float pdf = INV_SQRT_2PI * e;
    return g * fused_mul_add(hw_fma, v, pdf, normal_cdf_e_fma(hw_fma, v, e));
}
OCR_MATH_INLINE float gelu_hwfma_backward_one(float g, float v) { return gelu_backward_fma(1, g, v); }
#ifndef __CUDACC__
OCR_MATH_INLINE float gelu_unfused_forward_one(float v) { return gelu_forward_fma(0, v); }
OCR_MATH_INLINE float gelu_unfused_backward_one(float g, float v) { return gelu_backward_fma(0, g, v); }
#endif

// ---- the switch over the activation ---------------------------------------------------------------

// CPU: outside the element loop. LOOP(f) is expanded once per activation with
// f = <activation><sfx> (sfx: _forward_one or _backward_one). hw_fma is the clone's literal
// (CPU_VEC_CLONES_FMA): GELU's loop takes the FMA instruction or the unfused formula, and the
// branch not taken folds away.
#define CPU_ACT_SWITCH(act, hw_fma, LOOP, sfx)                          \
    switch (act) {                                                      \
        case OCR_ACT_NONE: LOOP(act_none##sfx) break;                   \
        case OCR_ACT_RELU: LOOP(relu##sfx) break;                       \
        case OCR_ACT_HARDSWISH: LOOP(hardswish##sfx) break;             \
        case OCR_ACT_HARDSIGMOID: LOOP(hardsigmoid##sfx) break;         \
        case OCR_ACT_SWISH: LOOP(swish##sfx) break;                     \
        case OCR_ACT_GELU:                                              \
            if (hw_fma) {                                               \
                LOOP(gelu_hwfma##sfx)                                   \
            } else {                                                    \
                LOOP(gelu_unfused##sfx)                                   \
            }                                                           \
            break;                                                      \
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
        case OCR_ACT_GELU: return gelu_hwfma_forward_one(v);
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
        case OCR_ACT_GELU: return gelu_hwfma_backward_one(g, v);
        default: return g;  // OCR_ACT_NONE
    }
}
#endif

#endif

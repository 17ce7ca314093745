// The activation functions and derivatives of kernels/cpu/activation.c as device functions,
// shared by the activation kernels (activation.cu) and the fused batch norm + activation
// (bn_act.cu). Inline device functions in a header: each .cu compiles its own copy, no
// relocatable device code needed. Include after kernels/cuda/cuda_internal.h.
#ifndef OCR_KERNELS_CUDA_ACTIVATION_MATH_CUH
#define OCR_KERNELS_CUDA_ACTIVATION_MATH_CUH

#include "kernels/ops.h"

#define HARDSIGMOID_SLOPE 0.1666667f
#define INV_SQRT_2PI 0.39894228040143267794f

// e^x within ~1e-7 relative on [−87, 88] (input clamped there): kernels/cpu/activation.c's vexpf.
__device__ __forceinline__ float act_exp(float x) {
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    const float round_magic = 12582912.0f;
    const float n = __fsub_rn(__fadd_rn(x * 1.44269504088896341f, round_magic), round_magic);
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
    return p * __uint_as_float(bits);
}

// Φ(x), the standard normal CDF: kernels/cpu/activation.c's normal_cdf (see the accuracy
// notes there).
__device__ __forceinline__ float act_normal_cdf(float x) {
    const float z = x * 0.70710678118654752440f;
    const float a = z < 0.0f ? -z : z;
    const float s = 2.0f * (a * a) - 1.0f;
    float p = 1.230605476e-06f;
    p = p * s - 1.766906802e-05f;
    p = p * s + 2.175135417e-04f;
    p = p * s - 2.285419545e-03f;
    p = p * s + 1.985249714e-02f;
    p = p * s - 1.405360973e-01f;
    p = p * s + 9.654687387e-01f;
    const float e = a * p;
    const float central = 0.5f + 0.5f * (x < 0.0f ? -e : e);
    float ac = a < 1.0f ? 1.0f : a;
    ac = ac > 5.0f ? 5.0f : ac;
    const float t = 1.0f / ac;
    const float q = (t - 0.6f) * 2.5f;
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
    const float erfc_a = a < 5.0f ? act_exp(-(ac * ac)) * (w * t) : 0.0f;
    const float tail = x < 0.0f ? 0.5f * erfc_a : 1.0f - 0.5f * erfc_a;
    return a < 1.0f ? central : tail;
}

__device__ __forceinline__ float act_forward(float v, int act) {
    switch (act) {
        case OCR_ACT_RELU: return v < 0.0f ? 0.0f : v;  // NaN passes through
        case OCR_ACT_HARDSWISH: {
            float t = v + 3.0f;
            t = t < 0.0f ? 0.0f : t;
            t = t > 6.0f ? 6.0f : t;
            return v * t / 6.0f;
        }
        case OCR_ACT_HARDSIGMOID: {
            float t = v * HARDSIGMOID_SLOPE + 0.5f;
            t = t < 0.0f ? 0.0f : t;
            return t > 1.0f ? 1.0f : t;
        }
        case OCR_ACT_SWISH: return v / (1.0f + act_exp(-v));
        case OCR_ACT_GELU: return v * act_normal_cdf(v);
        default: return v;  // OCR_ACT_NONE
    }
}

// dy · act'(v); the kink conventions of kernels/cpu/activation.c.
__device__ __forceinline__ float act_backward(float g, float v, int act) {
    switch (act) {
        case OCR_ACT_RELU: return v > 0.0f ? g : 0.0f;
        case OCR_ACT_HARDSWISH: {
            // 0 for v <= −3, 1 for v >= 3, (2v + 3)/6 strictly between (also keeps ±inf finite).
            float d = (v > -3.0f && v < 3.0f) ? (2.0f * v + 3.0f) / 6.0f : 0.0f;
            return g * (d + (v >= 3.0f ? 1.0f : 0.0f));
        }
        case OCR_ACT_HARDSIGMOID: {
            float t = v * HARDSIGMOID_SLOPE + 0.5f;
            return g * ((t > 0.0f && t < 1.0f) ? HARDSIGMOID_SLOPE : 0.0f);
        }
        case OCR_ACT_SWISH: {
            float sg = 1.0f / (1.0f + act_exp(-v));
            return g * sg * (1.0f + v * (1.0f - sg));
        }
        case OCR_ACT_GELU: {
            float cdf = act_normal_cdf(v);
            float pdf = INV_SQRT_2PI * act_exp(-0.5f * v * v);
            return g * (cdf + v * pdf);
        }
        default: return g;
    }
}

#endif

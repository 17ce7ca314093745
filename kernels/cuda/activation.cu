// Pointwise activations and their derivatives on the GPU, with the formulas and constants
// of kernels/cpu/activation.c: Paddle's hardsigmoid slope 0.1666667f, the derivative
// conventions at the kinks, and the same exp and normal-CDF approximations (not CUDA's
// expf/erff), so the two backends differ only by FMA contraction.
#include "kernels/cuda/activation.h"
#include "kernels/cuda/cuda_internal.h"

#define ACT_THREADS 256
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

__global__ void act_forward_kernel(void *y, int ydt, const void *x, int xdt, int64_t n, int act) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        st(y, ydt, i, act_forward(ld(x, xdt, i), act));
}

__global__ void act_backward_kernel(void *dx, int dxdt, const void *dy, int dydt, const void *x, int xdt, int64_t n,
                                    int act) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        st(dx, dxdt, i, act_backward(ld(dy, dydt, i), ld(x, xdt, i), act));
}

extern "C" void activation_forward_cuda(OcrTensor *out, const OcrTensor *inp, ocr_activation_t act) {
    CUDA_ASSERT_FLOAT(out);
    CUDA_ASSERT_FLOAT(inp);
    OCR_ASSERT(ocr_tensor_numel(out) == ocr_tensor_numel(inp), "activation: out and inp sizes differ");
    OCR_ASSERT((unsigned)act < OCR_ACT_COUNT, "unknown activation %d", (int)act);
    CudaCtx ctx = cuda_enter(out);
    const int64_t n = ocr_tensor_numel(inp);
    if (n == 0) return;
    if (act == OCR_ACT_NONE && out->data == inp->data && out->dtype == inp->dtype) return;
    act_forward_kernel<<<cuda_blocks(n, ACT_THREADS), ACT_THREADS, 0, ctx.stream>>>(out->data, out->dtype, inp->data,
                                                                                   inp->dtype, n, (int)act);
    OCR_CUDA_LAUNCHED();
}

extern "C" void activation_backward_cuda(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *inp,
                                         ocr_activation_t act) {
    CUDA_ASSERT_FLOAT(dinp);
    CUDA_ASSERT_FLOAT(dout);
    CUDA_ASSERT_FLOAT(inp);
    const int64_t n = ocr_tensor_numel(inp);
    OCR_ASSERT(ocr_tensor_numel(dinp) == n && ocr_tensor_numel(dout) == n, "activation: gradient sizes differ");
    OCR_ASSERT((unsigned)act < OCR_ACT_COUNT, "unknown activation %d", (int)act);
    CudaCtx ctx = cuda_enter(dinp);
    if (n == 0) return;
    act_backward_kernel<<<cuda_blocks(n, ACT_THREADS), ACT_THREADS, 0, ctx.stream>>>(
        dinp->data, dinp->dtype, dout->data, dout->dtype, inp->data, inp->dtype, n, (int)act);
    OCR_CUDA_LAUNCHED();
}

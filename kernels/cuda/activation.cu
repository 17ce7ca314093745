// Pointwise activations and their derivatives on the GPU, with the CPU's formulas and
// constants (kernels/activation_math.h, shared with kernels/cpu/activation.c): Paddle's
// hardsigmoid slope 0.1666667f, the derivative conventions at the kinks, and the same exp and
// normal-CDF approximations (not CUDA's expf/erff), so the two backends differ only by FMA
// contraction.
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_internal.h"

#include "kernels/activation_math.h"

#define ACT_THREADS 256

static __global__ void act_forward_kernel(void *y, int ydt, const void *x, int xdt, int64_t n, int act) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        st(y, ydt, i, act_forward(ld(x, xdt, i), act));
}

static __global__ void act_backward_kernel(void *dx, int dxdt, const void *dy, int dydt, const void *x, int xdt,
                                           int64_t n, int act) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        st(dx, dxdt, i, act_backward(ld(dy, dydt, i), ld(x, xdt, i), act));
}

extern "C" void ocr_cuda_activation_forward(OcrTensor *out, const OcrTensor *inp, ocr_activation_t act) {
    CUDA_ASSERT_FLOAT(out);
    CUDA_ASSERT_FLOAT(inp);
    OCR_ASSERT(ocr_tensor_numel(out) == ocr_tensor_numel(inp), "activation: out and inp sizes differ");
    OCR_ASSERT((unsigned)act < OCR_ACT_COUNT, "unknown activation %d", (int)act);
    CudaCtx ctx = ocr_cuda_enter(out);
    const int64_t n = ocr_tensor_numel(inp);
    if (n == 0) return;
    if (act == OCR_ACT_NONE && out->data == inp->data && out->dtype == inp->dtype) return;
    act_forward_kernel<<<cuda_blocks(n, ACT_THREADS), ACT_THREADS, 0, ctx.stream>>>(out->data, out->dtype, inp->data,
                                                                                   inp->dtype, n, (int)act);
    OCR_CUDA_LAUNCHED();
}

extern "C" void ocr_cuda_activation_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *inp,
                                             ocr_activation_t act) {
    CUDA_ASSERT_FLOAT(dinp);
    CUDA_ASSERT_FLOAT(dout);
    CUDA_ASSERT_FLOAT(inp);
    const int64_t n = ocr_tensor_numel(inp);
    OCR_ASSERT(ocr_tensor_numel(dinp) == n && ocr_tensor_numel(dout) == n, "activation: gradient sizes differ");
    OCR_ASSERT((unsigned)act < OCR_ACT_COUNT, "unknown activation %d", (int)act);
    CudaCtx ctx = ocr_cuda_enter(dinp);
    if (n == 0) return;
    act_backward_kernel<<<cuda_blocks(n, ACT_THREADS), ACT_THREADS, 0, ctx.stream>>>(
        dinp->data, dinp->dtype, dout->data, dout->dtype, inp->data, inp->dtype, n, (int)act);
    OCR_CUDA_LAUNCHED();
}

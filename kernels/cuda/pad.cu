// Spatial padding of NHWC maps with a constant (the CUDA twin of kernels/cpu/pad.c): raw bits
// copied inside, `value` rounded once into the dtype on the border.
#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_ops.h"

#define PAD_THREADS 256

static void pad_check(const OcrTensor *big, const OcrTensor *small, int top, int left, const char *what) {
    CUDA_ASSERT_FLOAT(big);
    CUDA_ASSERT_FLOAT(small);
    OCR_ASSERT(big->ndim == 4 && small->ndim == 4, "%s: NHWC maps expected", what);
    OCR_ASSERT(big->dtype == small->dtype, "%s: one dtype for both maps", what);
    OCR_ASSERT(big->shape[0] == small->shape[0] && big->shape[3] == small->shape[3], "%s: batch and channels differ",
               what);
    OCR_ASSERT(top >= 0 && left >= 0 && big->shape[1] >= small->shape[1] + top && big->shape[2] >= small->shape[2] + left,
               "%s: the small map does not fit at (%d, %d)", what, top, left);
}

static __global__ void pad_fwd_kernel(void *out, const void *inp, int dt, int64_t N, int64_t Ho, int64_t Wo,
                                      int64_t C, int64_t H, int64_t W, int top, int left, float value) {
    const int64_t total = N * Ho * Wo * C;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c = i % C, r = i / C;
        int64_t w = r % Wo;
        r /= Wo;
        int64_t h = r % Ho, n = r / Ho;
        int64_t hi = h - top, wi = w - left;
        if (hi >= 0 && hi < H && wi >= 0 && wi < W)
            copy_elem(out, dt, i, inp, dt, ((n * H + hi) * W + wi) * C + c);
        else
            st(out, dt, i, value);
    }
}

static __global__ void pad_bwd_kernel(void *dinp, const void *dout, int dt, int64_t N, int64_t Ho, int64_t Wo,
                                      int64_t C, int64_t H, int64_t W, int top, int left) {
    const int64_t total = N * H * W * C;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c = i % C, r = i / C;
        int64_t w = r % W;
        r /= W;
        int64_t h = r % H, n = r / H;
        copy_elem(dinp, dt, i, dout, dt, ((n * Ho + h + top) * Wo + w + left) * C + c);
    }
}

extern "C" void ocr_cuda_pad2d_forward(OcrTensor *out, const OcrTensor *inp, int top, int left, float value) {
    pad_check(out, inp, top, left, "pad2d");
    CudaCtx ctx = ocr_cuda_enter(out);
    const int64_t n = ocr_tensor_numel(out);
    if (n == 0) return;
    pad_fwd_kernel<<<cuda_blocks(n, PAD_THREADS), PAD_THREADS, 0, ctx.stream>>>(
        out->data, inp->data, out->dtype, out->shape[0], out->shape[1], out->shape[2], out->shape[3], inp->shape[1],
        inp->shape[2], top, left, value);
    OCR_CUDA_LAUNCHED();
}

extern "C" void ocr_cuda_pad2d_backward(OcrTensor *dinp, const OcrTensor *dout, int top, int left) {
    pad_check(dout, dinp, top, left, "pad2d_backward");
    CudaCtx ctx = ocr_cuda_enter(dinp);
    const int64_t n = ocr_tensor_numel(dinp);
    if (n == 0) return;
    pad_bwd_kernel<<<cuda_blocks(n, PAD_THREADS), PAD_THREADS, 0, ctx.stream>>>(
        dinp->data, dout->data, dinp->dtype, dout->shape[0], dout->shape[1], dout->shape[2], dout->shape[3],
        dinp->shape[1], dinp->shape[2], top, left);
    OCR_CUDA_LAUNCHED();
}

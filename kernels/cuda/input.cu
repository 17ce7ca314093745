// The uint8 input normalisation of kernels/input.h on the GPU, bit-identical to
// kernels/cpu/input.c.
#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_ops.h"

#define EW_THREADS 256

#define GRID_STRIDE(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

// (p / 255 − 0.5) / 0.5 in IEEE float32, each step rounded as written (no contraction), so the
// values equal kernels/cpu/input.c's table bit for bit. With widths, element i of row r (of W·C
// elements; H rows per sample) is padding when i >= clamp(widths[r / H], 0, W)·C: exactly 0.
static __global__ void input_normalize_kernel(void *y, int ydt, const uint8_t *p, int64_t n, const int32_t *widths,
                                       int64_t H, int64_t W, int64_t C) {
    const int64_t WC = W * C;
    GRID_STRIDE(i, n) {
        bool pad = false;
        if (widths) {
            const int64_t r = i / WC;
            int64_t w = widths[r / H];
            w = w < 0 ? 0 : w > W ? W : w;
            pad = i - r * WC >= w * C;
        }
        st(y, ydt, i, pad ? 0.0f : __fdiv_rn(__fsub_rn(__fdiv_rn((float)p[i], 255.0f), 0.5f), 0.5f));
    }
}

extern "C" void ocr_cuda_input_normalize_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *widths) {
    OCR_ASSERT(inp->dtype == OCR_U8 && inp->device.type == OCR_DEVICE_CUDA,
               "input_normalize: inp must be a CUDA uint8 tensor");
    CUDA_ASSERT_FLOAT(out);
    OCR_ASSERT(ocr_tensor_same_shape(out, inp), "input_normalize: out and inp shapes differ");
    OCR_ASSERT(inp->ndim == 4 || !widths, "input_normalize: widths need an (N, H, W, C) batch");
    const int64_t N = inp->shape[0];
    if (widths)
        OCR_ASSERT(widths->dtype == OCR_I32 && widths->device.type == OCR_DEVICE_CUDA && ocr_tensor_numel(widths) == N,
                   "input_normalize: widths must be a CUDA int32 tensor of %lld elements", (long long)N);
    CudaCtx ctx = ocr_cuda_enter(out);
    const int64_t n = ocr_tensor_numel(inp);
    if (n == 0) return;
    const int64_t H = inp->ndim == 4 ? inp->shape[1] : 1, W = inp->ndim == 4 ? inp->shape[2] : 1,
                  C = inp->ndim == 4 ? inp->shape[3] : 1;
    input_normalize_kernel<<<cuda_blocks(n, EW_THREADS), EW_THREADS, 0, ctx.stream>>>(
        out->data, out->dtype, (const uint8_t *)inp->data, n, widths ? (const int32_t *)widths->data : NULL, H, W, C);
    OCR_CUDA_LAUNCHED();
}

// Softmax and log-softmax over the last dimension on the GPU: one warp per row, fp32
// throughout, fully masked rows (all −inf) give zeros (softmax) or −inf (log-softmax) as on the
// CPU (kernels/cpu/softmax.c).
#include <math.h>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_ops.h"

#define SM_THREADS 256

static void row_shape(const OcrTensor *t, int64_t *rows, int64_t *C) {
    *C = ocr_tensor_dim(t, -1);
    *rows = *C > 0 ? ocr_tensor_numel(t) / *C : 0;
}

// mode 0: softmax, 1: log-softmax. out may alias inp (each lane reads its elements before
// writing them, and the last pass starts after the warp's sum).
static __global__ void softmax_rows_kernel(void *y, int ydt, const void *x, int xdt, int64_t rows, int64_t C,
                                           int mode) {
    const int lane = threadIdx.x & 31;
    const int64_t wpb = blockDim.x >> 5;
    for (int64_t r = blockIdx.x * wpb + (threadIdx.x >> 5); r < rows; r += (int64_t)gridDim.x * wpb) {
        const int64_t base = r * C;
        float mx = -INFINITY;
        for (int64_t j = lane; j < C; j += 32) mx = fmaxf(mx, ld(x, xdt, base + j));
        mx = warp_max(mx);
        if (mx == -INFINITY) {
            for (int64_t j = lane; j < C; j += 32) st(y, ydt, base + j, mode ? -INFINITY : 0.0f);
            continue;
        }
        float sum = 0.0f;
        for (int64_t j = lane; j < C; j += 32) sum += expf(ld(x, xdt, base + j) - mx);
        sum = warp_sum(sum);
        if (mode == 0) {
            const float inv = 1.0f / sum;
            for (int64_t j = lane; j < C; j += 32) st(y, ydt, base + j, expf(ld(x, xdt, base + j) - mx) * inv);
        } else {
            const float shift = mx + logf(sum);
            for (int64_t j = lane; j < C; j += 32) st(y, ydt, base + j, ld(x, xdt, base + j) - shift);
        }
    }
}

// mode 0: dx = y·(dy − Σ dy·y); mode 1: dx = dy − exp(y)·Σ dy.
static __global__ void softmax_rows_backward_kernel(void *dx, int dxdt, const void *dy, int dydt, const void *y,
                                                    int ydt, int64_t rows, int64_t C, int mode) {
    const int lane = threadIdx.x & 31;
    const int64_t wpb = blockDim.x >> 5;
    for (int64_t r = blockIdx.x * wpb + (threadIdx.x >> 5); r < rows; r += (int64_t)gridDim.x * wpb) {
        const int64_t base = r * C;
        float acc = 0.0f;
        for (int64_t j = lane; j < C; j += 32) {
            const float g = ld(dy, dydt, base + j);
            acc += mode ? g : g * ld(y, ydt, base + j);
        }
        acc = warp_sum(acc);
        for (int64_t j = lane; j < C; j += 32) {
            const float g = ld(dy, dydt, base + j), v = ld(y, ydt, base + j);
            st(dx, dxdt, base + j, mode ? g - expf(v) * acc : v * (g - acc));
        }
    }
}

static void softmax_fwd(OcrTensor *out, const OcrTensor *inp, int mode, const char *what) {
    CUDA_ASSERT_FLOAT(out);
    CUDA_ASSERT_FLOAT(inp);
    OCR_ASSERT(ocr_tensor_same_shape(out, inp), "%s: out and inp shapes differ", what);
    int64_t rows, C;
    row_shape(inp, &rows, &C);
    CudaCtx ctx = ocr_cuda_enter(out);
    if (rows == 0) return;
    softmax_rows_kernel<<<cuda_blocks(rows, SM_THREADS / 32), SM_THREADS, 0, ctx.stream>>>(
        out->data, out->dtype, inp->data, inp->dtype, rows, C, mode);
    OCR_CUDA_LAUNCHED();
}

static void softmax_bwd(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *out, int mode, const char *what) {
    if (!dinp) return;
    CUDA_ASSERT_FLOAT(dinp);
    CUDA_ASSERT_FLOAT(dout);
    CUDA_ASSERT_FLOAT(out);
    OCR_ASSERT(ocr_tensor_same_shape(dinp, out) && ocr_tensor_same_shape(dout, out), "%s: shapes differ", what);
    int64_t rows, C;
    row_shape(out, &rows, &C);
    CudaCtx ctx = ocr_cuda_enter(dinp);
    if (rows == 0) return;
    softmax_rows_backward_kernel<<<cuda_blocks(rows, SM_THREADS / 32), SM_THREADS, 0, ctx.stream>>>(
        dinp->data, dinp->dtype, dout->data, dout->dtype, out->data, out->dtype, rows, C, mode);
    OCR_CUDA_LAUNCHED();
}

extern "C" void ocr_cuda_softmax_forward(OcrTensor *out, const OcrTensor *inp) { softmax_fwd(out, inp, 0, "softmax"); }
extern "C" void ocr_cuda_log_softmax_forward(OcrTensor *out, const OcrTensor *inp) {
    softmax_fwd(out, inp, 1, "log_softmax");
}
extern "C" void ocr_cuda_softmax_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *out) {
    softmax_bwd(dinp, dout, out, 0, "softmax_backward");
}
extern "C" void ocr_cuda_log_softmax_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *out) {
    softmax_bwd(dinp, dout, out, 1, "log_softmax_backward");
}

// 2-D pooling on NHWC maps on the GPU: average (exclusive of padding), max, adaptive average.
//
// As in kernels/cpu/pool.c, each axis is a list of output bins [start, end) clipped to the
// input; fixed windows and adaptive bins share the kernels. Backward passes GATHER (one
// thread per input element sums the bins that cover it, in bin order), so nothing races
// and the sums are deterministic. The sums and divisions happen in the CPU's order without
// contraction, so results agree with the CPU bit for bit.
#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_ops.h"

#define POOL_THREADS 256

struct PoolAxis {
    int in, out;
    int kernel, stride, pad;
    int adaptive;
};

// Bin o covers inputs [start, end).
__device__ __forceinline__ int ax_start(const PoolAxis &a, int o) {
    if (a.adaptive) return (int)((int64_t)o * a.in / a.out);
    int s = o * a.stride - a.pad;
    return s < 0 ? 0 : s;
}
__device__ __forceinline__ int ax_end(const PoolAxis &a, int o) {
    if (a.adaptive) return (int)(((int64_t)(o + 1) * a.in + a.out - 1) / a.out);
    int e = o * a.stride - a.pad + a.kernel;
    return e > a.in ? a.in : e;
}
// Input i is covered by bins [lo, hi) (empty when lo >= hi).
__device__ __forceinline__ void ax_cover(const PoolAxis &a, int i, int *lo, int *hi) {
    if (a.adaptive) {
        // start(o) <= i  <=>  o < ceil((i+1)·out/in);  i < end(o)  <=>  o >= floor(i·out/in).
        *lo = (int)((int64_t)i * a.out / a.in);
        *hi = (int)(((int64_t)(i + 1) * a.out + a.in - 1) / a.in);
    } else {
        // o·s − p <= i  and  i < o·s − p + k.
        int num = i + a.pad - a.kernel + 1;
        *lo = num <= 0 ? 0 : (num + a.stride - 1) / a.stride;
        int h = (i + a.pad) / a.stride + 1;
        *hi = h < a.out ? h : a.out;
    }
}

static void pool_check_nhwc(const OcrTensor *a, const OcrTensor *b, const char *what) {
    CUDA_ASSERT_FLOAT(a);
    CUDA_ASSERT_FLOAT(b);
    OCR_ASSERT(a->ndim == 4 && b->ndim == 4, "%s: tensors must be NHWC (4-d)", what);
    OCR_ASSERT(a->shape[0] == b->shape[0] && a->shape[3] == b->shape[3], "%s: batch or channel sizes differ", what);
}

static PoolAxis axis_window(int out, int in, int kernel, int stride, int pad, const char *what) {
    OCR_ASSERT(kernel > 0 && stride > 0 && pad >= 0, "pool: bad %s window (kernel %d stride %d pad %d)", what, kernel,
               stride, pad);
    int expect = (in + 2 * pad - kernel) / stride + 1;
    OCR_ASSERT(in + 2 * pad >= kernel && out == expect,
               "pool: %s output size %d, expected %d (in %d kernel %d stride %d pad %d)", what, out, expect, in, kernel,
               stride, pad);
    for (int o = 0; o < out; o++) {
        int st0 = o * stride - pad, en = st0 + kernel;
        OCR_ASSERT((st0 < 0 ? 0 : st0) < (en > in ? in : en),
                   "pool: %s window %d lies entirely in the padding (pad %d >= kernel %d?)", what, o, pad, kernel);
    }
    PoolAxis a = {in, out, kernel, stride, pad, 0};
    return a;
}

static PoolAxis axis_adaptive(int out, int in) {
    OCR_ASSERT(out > 0 && in > 0, "adaptive pool: sizes in %d out %d", in, out);
    PoolAxis a = {in, out, 0, 1, 0, 1};
    return a;
}

// ---- average -----------------------------------------------------------------------------------

static __global__ void avg_forward_kernel(void *y, int ydt, const void *x, int xdt, int N, int C, PoolAxis ah,
                                          PoolAxis aw) {
    const int64_t total = (int64_t)N * ah.out * aw.out * C;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / C;
        const int c = (int)(i - r * C);
        const int ow = (int)(r % aw.out);
        r /= aw.out;
        const int oh = (int)(r % ah.out);
        const int n = (int)(r / ah.out);
        const int h0 = ax_start(ah, oh), h1 = ax_end(ah, oh), w0 = ax_start(aw, ow), w1 = ax_end(aw, ow);
        float acc = 0.0f;
        for (int h = h0; h < h1; h++)
            for (int w = w0; w < w1; w++) acc = __fadd_rn(acc, ld(x, xdt, (((int64_t)n * ah.in + h) * aw.in + w) * C + c));
        const float cnt = (float)((h1 - h0) * (w1 - w0));
        st(y, ydt, i, __fdiv_rn(acc, cnt));
    }
}

static __global__ void avg_backward_kernel(void *dx, int dxdt, const void *dy, int dydt, int N, int C, PoolAxis ah,
                                    PoolAxis aw) {
    const int64_t total = (int64_t)N * ah.in * aw.in * C;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / C;
        const int c = (int)(i - r * C);
        const int w = (int)(r % aw.in);
        r /= aw.in;
        const int h = (int)(r % ah.in);
        const int n = (int)(r / ah.in);
        int ohl, ohh, owl, owh;
        ax_cover(ah, h, &ohl, &ohh);
        ax_cover(aw, w, &owl, &owh);
        float acc = 0.0f;
        for (int oh = ohl; oh < ohh; oh++)
            for (int ow = owl; ow < owh; ow++) {
                // Scaled by the reciprocal, as Paddle's average-pool gradient (and the CPU) does.
                const float area = (float)((ax_end(ah, oh) - ax_start(ah, oh)) * (ax_end(aw, ow) - ax_start(aw, ow)));
                const float inv = __fdiv_rn(1.0f, area);
                const float g = ld(dy, dydt, (((int64_t)n * ah.out + oh) * aw.out + ow) * C + c);
                acc = __fadd_rn(acc, __fmul_rn(g, inv));
            }
        st(dx, dxdt, i, acc);
    }
}

static void avg_forward(OcrTensor *out, const OcrTensor *inp, PoolAxis ah, PoolAxis aw) {
    CudaCtx ctx = ocr_cuda_enter(out);
    const int64_t total = ocr_tensor_numel(out);
    if (total == 0) return;
    avg_forward_kernel<<<cuda_blocks(total, POOL_THREADS), POOL_THREADS, 0, ctx.stream>>>(
        out->data, out->dtype, inp->data, inp->dtype, (int)inp->shape[0], (int)inp->shape[3], ah, aw);
    OCR_CUDA_LAUNCHED();
}

static void avg_backward(OcrTensor *dinp, const OcrTensor *dout, PoolAxis ah, PoolAxis aw) {
    CudaCtx ctx = ocr_cuda_enter(dinp);
    const int64_t total = ocr_tensor_numel(dinp);
    if (total == 0) return;
    avg_backward_kernel<<<cuda_blocks(total, POOL_THREADS), POOL_THREADS, 0, ctx.stream>>>(
        dinp->data, dinp->dtype, dout->data, dout->dtype, (int)dinp->shape[0], (int)dinp->shape[3], ah, aw);
    OCR_CUDA_LAUNCHED();
}

extern "C" void ocr_cuda_avgpool2d_forward(OcrTensor *out, const OcrTensor *inp, Pool2dParams p) {
    pool_check_nhwc(out, inp, "avgpool2d");
    PoolAxis ah = axis_window((int)out->shape[1], (int)inp->shape[1], p.kernel_h, p.stride_h, p.pad_h, "height");
    PoolAxis aw = axis_window((int)out->shape[2], (int)inp->shape[2], p.kernel_w, p.stride_w, p.pad_w, "width");
    avg_forward(out, inp, ah, aw);
}

extern "C" void ocr_cuda_avgpool2d_backward(OcrTensor *dinp, const OcrTensor *dout, Pool2dParams p) {
    pool_check_nhwc(dout, dinp, "avgpool2d");
    PoolAxis ah = axis_window((int)dout->shape[1], (int)dinp->shape[1], p.kernel_h, p.stride_h, p.pad_h, "height");
    PoolAxis aw = axis_window((int)dout->shape[2], (int)dinp->shape[2], p.kernel_w, p.stride_w, p.pad_w, "width");
    avg_backward(dinp, dout, ah, aw);
}

extern "C" void ocr_cuda_adaptive_avgpool2d_forward(OcrTensor *out, const OcrTensor *inp) {
    pool_check_nhwc(out, inp, "adaptive_avgpool2d");
    PoolAxis ah = axis_adaptive((int)out->shape[1], (int)inp->shape[1]);
    PoolAxis aw = axis_adaptive((int)out->shape[2], (int)inp->shape[2]);
    avg_forward(out, inp, ah, aw);
}

extern "C" void ocr_cuda_adaptive_avgpool2d_backward(OcrTensor *dinp, const OcrTensor *dout) {
    pool_check_nhwc(dout, dinp, "adaptive_avgpool2d");
    PoolAxis ah = axis_adaptive((int)dout->shape[1], (int)dinp->shape[1]);
    PoolAxis aw = axis_adaptive((int)dout->shape[2], (int)dinp->shape[2]);
    avg_backward(dinp, dout, ah, aw);
}

// ---- max ---------------------------------------------------------------------------------------------

// y = max over each bin; arg (when non-NULL) receives the flat input pixel h·W + w of the
// FIRST maximum in row-major window order (a later equal value does not replace it).
static __global__ void max_forward_kernel(void *y, int ydt, int32_t *arg, const void *x, int xdt, int N, int C,
                                          PoolAxis ah, PoolAxis aw) {
    const int64_t total = (int64_t)N * ah.out * aw.out * C;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / C;
        const int c = (int)(i - r * C);
        const int ow = (int)(r % aw.out);
        r /= aw.out;
        const int oh = (int)(r % ah.out);
        const int n = (int)(r / ah.out);
        const int h0 = ax_start(ah, oh), h1 = ax_end(ah, oh), w0 = ax_start(aw, ow), w1 = ax_end(aw, ow);
        const int64_t img = (int64_t)n * ah.in * aw.in;
        float m = ld(x, xdt, (img + (int64_t)h0 * aw.in + w0) * C + c);
        int32_t best = h0 * aw.in + w0;
        for (int h = h0; h < h1; h++)
            for (int w = w0; w < w1; w++) {
                const float v = ld(x, xdt, (img + (int64_t)h * aw.in + w) * C + c);
                if (v > m) {
                    m = v;
                    best = h * aw.in + w;
                }
            }
        if (y) st(y, ydt, i, m);
        if (arg) arg[i] = best;
    }
}

static __global__ void max_backward_kernel(void *dx, int dxdt, const void *dy, int dydt, const int32_t *arg, int N,
                                           int C, PoolAxis ah, PoolAxis aw) {
    const int64_t total = (int64_t)N * ah.in * aw.in * C;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / C;
        const int c = (int)(i - r * C);
        const int w = (int)(r % aw.in);
        r /= aw.in;
        const int h = (int)(r % ah.in);
        const int n = (int)(r / ah.in);
        const int32_t pix = h * aw.in + w;
        int ohl, ohh, owl, owh;
        ax_cover(ah, h, &ohl, &ohh);
        ax_cover(aw, w, &owl, &owh);
        float acc = 0.0f;
        for (int oh = ohl; oh < ohh; oh++)
            for (int ow = owl; ow < owh; ow++) {
                const int64_t o = (((int64_t)n * ah.out + oh) * aw.out + ow) * C + c;
                const float g = ld(dy, dydt, o);
                acc = __fadd_rn(acc, arg[o] == pix ? g : 0.0f);
            }
        st(dx, dxdt, i, acc);
    }
}

extern "C" void ocr_cuda_maxpool2d_forward(OcrTensor *out, const OcrTensor *inp, Pool2dParams p) {
    pool_check_nhwc(out, inp, "maxpool2d");
    PoolAxis ah = axis_window((int)out->shape[1], (int)inp->shape[1], p.kernel_h, p.stride_h, p.pad_h, "height");
    PoolAxis aw = axis_window((int)out->shape[2], (int)inp->shape[2], p.kernel_w, p.stride_w, p.pad_w, "width");
    CudaCtx ctx = ocr_cuda_enter(out);
    const int64_t total = ocr_tensor_numel(out);
    if (total == 0) return;
    max_forward_kernel<<<cuda_blocks(total, POOL_THREADS), POOL_THREADS, 0, ctx.stream>>>(
        out->data, out->dtype, NULL, inp->data, inp->dtype, (int)inp->shape[0], (int)inp->shape[3], ah, aw);
    OCR_CUDA_LAUNCHED();
}

extern "C" void ocr_cuda_maxpool2d_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *inp,
                                            Pool2dParams p) {
    pool_check_nhwc(dout, inp, "maxpool2d");
    CUDA_ASSERT_FLOAT(dinp);
    OCR_ASSERT(ocr_tensor_same_shape(dinp, inp), "maxpool2d: dinp and inp shapes differ");
    PoolAxis ah = axis_window((int)dout->shape[1], (int)inp->shape[1], p.kernel_h, p.stride_h, p.pad_h, "height");
    PoolAxis aw = axis_window((int)dout->shape[2], (int)inp->shape[2], p.kernel_w, p.stride_w, p.pad_w, "width");
    OCR_ASSERT(inp->shape[1] * inp->shape[2] <= INT32_MAX, "maxpool2d: map too large");
    CudaCtx ctx = ocr_cuda_enter(dinp);
    const int64_t nout = ocr_tensor_numel(dout), nin = ocr_tensor_numel(dinp);
    if (nin == 0) return;
    int32_t *arg = (int32_t *)ocr_cuda_scratch(ctx, (size_t)(nout > 0 ? nout : 1) * sizeof(int32_t));
    const int N = (int)inp->shape[0], C = (int)inp->shape[3];
    if (nout > 0) {
        max_forward_kernel<<<cuda_blocks(nout, POOL_THREADS), POOL_THREADS, 0, ctx.stream>>>(NULL, OCR_F32, arg, inp->data,
                                                                                           inp->dtype, N, C, ah, aw);
        OCR_CUDA_LAUNCHED();
    }
    max_backward_kernel<<<cuda_blocks(nin, POOL_THREADS), POOL_THREADS, 0, ctx.stream>>>(
        dinp->data, dinp->dtype, dout->data, dout->dtype, arg, N, C, ah, aw);
    OCR_CUDA_LAUNCHED();
}

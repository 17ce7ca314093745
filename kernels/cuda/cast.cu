// Casts between float dtypes and the fused unscale + finite check + amax of AMP, on the GPU.
//
// Conversions are core/half.h's, bit for bit (round to nearest even, NaN payloads kept and
// quietened); f16 <-> bf16 goes through f32, which is exact for the widening step, so there
// is one rounding as on the CPU.
#include <stdlib.h>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_internal.h"

#define CAST_THREADS 256

extern "C" void ocr_cuda_cast_forward(OcrTensor *out, const OcrTensor *inp) {
    CUDA_ASSERT_FLOAT(out);
    CUDA_ASSERT_FLOAT(inp);
    OCR_ASSERT(ocr_tensor_numel(out) == ocr_tensor_numel(inp), "cast: element counts differ");
    CudaCtx ctx = ocr_cuda_enter(out);
    const int64_t n = ocr_tensor_numel(inp);
    if (out->data == inp->data && out->dtype == inp->dtype) return;
    OCR_ASSERT(out->data != inp->data, "cast: out may not alias inp of another dtype");
    ocr_cuda_copy_2d(ctx, out->data, out->dtype, n, inp->data, inp->dtype, n, 1, n);
}

extern "C" void ocr_cuda_cast_backward(OcrTensor *dinp, const OcrTensor *dout) {
    if (!dinp) return;
    ocr_cuda_cast_forward(dinp, dout);
}

// In-place unscale of one tensor in its own dtype. The finite test looks at the STORED value,
// so a value that only overflows when written back (inv_scale > 1 into f16) is caught too.
// amax_bits: max |g| over the finite values as float bits (non-negative floats order like
// their bits, so atomicMax on the bits is an exact, order-independent max).
static __global__ void unscale_kernel(void *g, int dt, int64_t n, float inv_host, const float *inv_dev,
                                      unsigned *amax_bits, int *nonfinite, int *found) {
    const float inv = inv_dev ? *inv_dev : inv_host;
    float amax = 0.0f;
    int bad = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        if (dt == OCR_F32) {
            float *x = (float *)g;
            const float v = x[i] * inv;
            x[i] = v;
            if (isfinite(v))
                amax = fmaxf(amax, fabsf(v));
            else
                bad = 1;
        } else if (dt == OCR_F16) {
            uint16_t *x = (uint16_t *)g;
            const uint16_t h = f32_to_f16(f16_to_f32(x[i]) * inv);
            x[i] = h;
            if ((h & 0x7c00u) == 0x7c00u)
                bad = 1;
            else
                amax = fmaxf(amax, fabsf(f16_to_f32(h)));
        } else {
            uint16_t *x = (uint16_t *)g;
            const uint16_t h = f32_to_bf16(bf16_to_f32(x[i]) * inv);
            x[i] = h;
            if ((h & 0x7f80u) == 0x7f80u)
                bad = 1;
            else
                amax = fmaxf(amax, fabsf(bf16_to_f32(h)));
        }
    }
    __shared__ float wmax[CAST_THREADS / 32];
    amax = warp_max(amax);
    if ((threadIdx.x & 31) == 0) wmax[threadIdx.x >> 5] = amax;
    bad = __syncthreads_or(bad);
    if (threadIdx.x == 0) {
        float m = 0.0f;
        for (int w = 0; w < (int)(blockDim.x >> 5); w++) m = fmaxf(m, wmax[w]);
        if (amax_bits && m > 0.0f) atomicMax(amax_bits, __float_as_uint(m));
        if (bad) {
            if (nonfinite) atomicOr(nonfinite, 1);
            if (found) atomicOr(found, 1);
        }
    }
}

static void launch_unscale(const CudaCtx &ctx, OcrTensor *g, float inv_host, const float *inv_dev, unsigned *amax_bits,
                           int *nonfinite, int *found) {
    const int64_t n = ocr_tensor_numel(g);
    if (n == 0) return;
    unsigned blocks = cuda_blocks(n, CAST_THREADS);
    if (blocks > 4096) blocks = 4096;
    unscale_kernel<<<blocks, CAST_THREADS, 0, ctx.stream>>>(g->data, g->dtype, n, inv_host, inv_dev, amax_bits,
                                                           nonfinite, found);
    OCR_CUDA_LAUNCHED();
}

static const OcrTensor *first_tensor(OcrTensor *const *grads, int count) {
    for (int i = 0; i < count; i++)
        if (grads[i]) return grads[i];
    return NULL;
}

extern "C" int ocr_cuda_unscale_and_check(OcrTensor *const *grads, int count, float inv_scale, float *amax,
                                          int *nonfinite) {
    const OcrTensor *t0 = first_tensor(grads, count);
    if (!t0) {
        for (int i = 0; i < count; i++) {
            if (amax) amax[i] = 0.0f;
            if (nonfinite) nonfinite[i] = 0;
        }
        return 0;
    }
    CudaCtx ctx = ocr_cuda_enter(t0);
    // Device results: count amax bits, count flags.
    const size_t bytes = 2 * (size_t)count * sizeof(int);
    unsigned *dev = (unsigned *)ocr_cuda_scratch(ctx, bytes);
    OCR_CUDA_CHECK(cudaMemsetAsync(dev, 0, bytes, ctx.stream));
    for (int i = 0; i < count; i++) {
        if (!grads[i]) continue;
        CUDA_ASSERT_FLOAT(grads[i]);
        OCR_ASSERT(ocr_device_equal(grads[i]->device, t0->device), "unscale_and_check: grads on different devices");
        launch_unscale(ctx, grads[i], inv_scale, NULL, dev + i, (int *)(dev + count) + i, NULL);
    }
    unsigned *host = (unsigned *)malloc(bytes);
    OCR_ASSERT(host, "unscale_and_check: out of host memory");
    OCR_CUDA_CHECK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, ctx.stream));
    OCR_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    int any = 0;
    for (int i = 0; i < count; i++) {
        float a;
        memcpy(&a, &host[i], sizeof a);
        const int bad = ((const int *)(host + count))[i] != 0;
        if (amax) amax[i] = a;
        if (nonfinite) nonfinite[i] = bad;
        any |= bad;
    }
    free(host);
    return any;
}

extern "C" void ocr_cuda_unscale_and_check_async(OcrTensor *const *grads, int count, const float *inv_scale,
                                                 float *amax, int *nonfinite, int *found_inf) {
    OCR_ASSERT(inv_scale, "unscale_and_check_async: inv_scale (device) is required");
    const OcrTensor *t0 = first_tensor(grads, count);
    if (!t0) return;
    CudaCtx ctx = ocr_cuda_enter(t0);
    for (int i = 0; i < count; i++) {
        if (!grads[i]) continue;
        CUDA_ASSERT_FLOAT(grads[i]);
        OCR_ASSERT(ocr_device_equal(grads[i]->device, t0->device), "unscale_and_check: grads on different devices");
        launch_unscale(ctx, grads[i], 1.0f, inv_scale, amax ? (unsigned *)amax + i : NULL,
                       nonfinite ? nonfinite + i : NULL, found_inf);
    }
}

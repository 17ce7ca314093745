// Dropout and drop path on the GPU with the CPU's Philox streams: element i keeps when
// uniform(seed, stream, offset + i) >= p (core/rng.h: (u32 >> 8)·2^-24), regenerated in the
// backward, so no mask is stored and the masks equal the CPU's bit for bit.
#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_ops.h"

#define DROP_THREADS 256

// Training with 0 < p < 1. One thread per Philox block (four consecutive draw indices):
// block k covers indices 4k .. 4k+3, i.e. elements 4k − offset .. (clipped to [0, n)).
static __global__ void dropout_kernel(void *y, int ydt, const void *x, int xdt, int64_t n, float p, float keep_scale,
                               uint64_t seed, uint64_t stream, uint64_t offset, const uint64_t *step_src) {
    // A replayed graph's offset: the launch's (step 0) plus this step's counter from the device.
    if (step_src) offset += *step_src << 32;
    const uint64_t first_blk = offset >> 2, last_blk = (offset + (uint64_t)n - 1) >> 2;
    const uint64_t nblk = last_blk - first_blk + 1;
    for (uint64_t t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; t < nblk; t += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t blk = first_blk + t;
        uint32_t r[4];
        philox_block(seed, stream, blk, r);
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const uint64_t idx = blk * 4 + l;
            if (idx < offset || idx - offset >= (uint64_t)n) continue;
            const int64_t i = (int64_t)(idx - offset);
            const int keep = u32_to_uniform(r[l]) >= p;
            st(y, ydt, i, keep ? ld(x, xdt, i) * keep_scale : 0.0f);
        }
    }
}

static __global__ void mul_kernel(void *y, int ydt, const void *x, int xdt, int64_t n, float f) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        st(y, ydt, i, ld(x, xdt, i) * f);
}

static void dropout_apply(OcrTensor *y, const OcrTensor *x, const DropoutParams &d) {
    CUDA_ASSERT_FLOAT(y);
    CUDA_ASSERT_FLOAT(x);
    OCR_ASSERT(ocr_tensor_numel(y) == ocr_tensor_numel(x), "dropout: element counts differ");
    OCR_ASSERT(d.p >= 0.0f && d.p <= 1.0f, "dropout: p = %g outside [0, 1]", (double)d.p);
    CudaCtx ctx = ocr_cuda_enter(y);
    const int64_t n = ocr_tensor_numel(x);
    if (n == 0) return;
    const int upscale = d.mode == OCR_DROPOUT_UPSCALE_IN_TRAIN;
    if (d.training && d.p > 0.0f) {
        if (d.p >= 1.0f) {  // every draw is < 1: all dropped
            OCR_CUDA_CHECK(cudaMemsetAsync(y->data, 0, ocr_tensor_bytes(y), ctx.stream));
            return;
        }
        const float keep_scale = upscale ? 1.0f / (1.0f - d.p) : 1.0f;
        const int64_t nblk = (int64_t)(((d.offset + (uint64_t)n - 1) >> 2) - (d.offset >> 2) + 1);
        dropout_kernel<<<cuda_blocks(nblk, DROP_THREADS), DROP_THREADS, 0, ctx.stream>>>(
            y->data, y->dtype, x->data, x->dtype, n, d.p, keep_scale, d.seed, d.stream, d.offset,
            ocr_cuda_dropout_step_source(ctx.device));
    } else {
        // Inference (or p = 0): identity, except downscale-in-infer multiplies by 1 − p.
        const float f = (!upscale && !d.training) ? 1.0f - d.p : 1.0f;
        mul_kernel<<<cuda_blocks(n, DROP_THREADS), DROP_THREADS, 0, ctx.stream>>>(y->data, y->dtype, x->data, x->dtype,
                                                                                 n, f);
    }
    OCR_CUDA_LAUNCHED();
}

extern "C" void ocr_cuda_dropout_forward(OcrTensor *out, const OcrTensor *inp, DropoutParams d) {
    dropout_apply(out, inp, d);
}

extern "C" void ocr_cuda_dropout_backward(OcrTensor *dinp, const OcrTensor *dout, DropoutParams d) {
    if (!dinp) return;
    dropout_apply(dinp, dout, d);
}

// Drop path on (N, ...): grid.y runs over samples (in chunks of 65535), grid.x over the
// sample's elements. Sample n keeps with draw offset + n >= p and is scaled by 1/(1 − p)
// (Paddle divides by keep_prob whatever the dropout mode); a dropped sample gives zeros,
// even for inf/NaN inputs.
static __global__ void droppath_kernel(void *y, int ydt, const void *x, int xdt, int64_t N, int64_t per, int n0,
                                       int active, float p, float keep_scale, uint64_t seed, uint64_t stream,
                                       uint64_t offset, const uint64_t *step_src) {
    if (step_src) offset += *step_src << 32;
    const int64_t n = n0 + (int64_t)blockIdx.y;
    if (n >= N) return;
    float f = 1.0f;
    if (active) f = u32_to_uniform(philox_u32(seed, stream, offset + (uint64_t)n)) >= p ? keep_scale : 0.0f;
    const int64_t base = n * per;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < per; i += (int64_t)gridDim.x * blockDim.x)
        st(y, ydt, base + i, f == 0.0f ? 0.0f : ld(x, xdt, base + i) * f);
}

static void droppath_apply(OcrTensor *y, const OcrTensor *x, const DropoutParams &d) {
    CUDA_ASSERT_FLOAT(y);
    CUDA_ASSERT_FLOAT(x);
    OCR_ASSERT(ocr_tensor_same_shape(y, x), "droppath: shapes differ");
    OCR_ASSERT(d.p >= 0.0f && d.p <= 1.0f, "droppath: p = %g outside [0, 1]", (double)d.p);
    CudaCtx ctx = ocr_cuda_enter(y);
    const int64_t n = ocr_tensor_numel(x), N = x->shape[0];
    if (n == 0 || N == 0) return;
    const int64_t per = n / N;
    const int active = d.training && d.p > 0.0f;
    const float keep_scale = d.p < 1.0f ? 1.0f / (1.0f - d.p) : 0.0f;
    unsigned gx = cuda_blocks(per, DROP_THREADS);
    if (gx > 1024) gx = 1024;
    for (int64_t n0 = 0; n0 < N; n0 += 65535) {
        const unsigned gy = (unsigned)(N - n0 < 65535 ? N - n0 : 65535);
        droppath_kernel<<<dim3(gx, gy), DROP_THREADS, 0, ctx.stream>>>(y->data, y->dtype, x->data, x->dtype, N, per,
                                                                       (int)n0, active, d.p, keep_scale, d.seed,
                                                                       d.stream, d.offset,
                                                                       ocr_cuda_dropout_step_source(ctx.device));
        OCR_CUDA_LAUNCHED();
    }
}

extern "C" void ocr_cuda_droppath_forward(OcrTensor *out, const OcrTensor *inp, DropoutParams d) {
    droppath_apply(out, inp, d);
}

extern "C" void ocr_cuda_droppath_backward(OcrTensor *dinp, const OcrTensor *dout, DropoutParams d) {
    if (!dinp) return;
    droppath_apply(dinp, dout, d);
}

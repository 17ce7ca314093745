// Adam / AdamW and the global gradient norm on the GPU.
//
// The Adam update is kernels/cpu/optim.c's, operation for operation, with round-to-nearest
// intrinsics that the compiler may not contract into FMAs: the GPU's master weights, moments
// and (stochastically) rounded working weights equal the CPU's bit for bit. Stochastic
// rounding draws ocr_rng_u32(seed, stream, element index) as the CPU does.
#include <math.h>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_ops.h"

#define OPT_THREADS 256
// Elements per partial sum of the norm (the CPU's chunk), and threads per chunk.
#define NORM_CHUNK 8192
#define NORM_THREADS 256

// One thread per group of four elements (one Philox block of draws): adam_group in
// cuda_internal.h, shared with the fused multi-tensor pass of train_step.cu.
static __global__ void adam_kernel(void *param, int pdt, float *w, float *m, float *v, const void *g, int gdt,
                                   int64_t n, int write_param, AdamConsts k) {
    const int64_t groups = (n + 3) / 4;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < groups; t += (int64_t)gridDim.x * blockDim.x)
        adam_group(param, pdt, w, m, v, g, gdt, n, write_param, k, t);
}

extern "C" void ocr_cuda_adam_update(OcrTensor *param, OcrTensor *master, OcrTensor *m, OcrTensor *v,
                                     const OcrTensor *grad, AdamParams p) {
    CUDA_ASSERT_FLOAT(param);
    CUDA_ASSERT_FLOAT(grad);
    OCR_ASSERT(m->dtype == OCR_F32 && v->dtype == OCR_F32, "adam_update: moments must be f32");
    OCR_ASSERT(m->device.type == OCR_DEVICE_CUDA && v->device.type == OCR_DEVICE_CUDA, "adam_update: CUDA tensors");
    const int64_t n = ocr_tensor_numel(param);
    OCR_ASSERT(ocr_tensor_numel(m) == n && ocr_tensor_numel(v) == n && ocr_tensor_numel(grad) == n,
               "adam_update: element counts differ");
    OCR_ASSERT(p.step >= 1, "adam_update: step is 1-based, got %lld", (long long)p.step);
    float *w;
    if (master) {
        OCR_ASSERT(master->dtype == OCR_F32 && master->device.type == OCR_DEVICE_CUDA && ocr_tensor_numel(master) == n,
                   "adam_update: master must be an f32 CUDA tensor like param");
        w = (float *)master->data;
    } else {
        OCR_ASSERT(param->dtype == OCR_F32, "adam_update: a %s param needs f32 master weights",
                   ocr_dtype_name(param->dtype));
        w = (float *)param->data;
    }
    CudaCtx ctx = ocr_cuda_enter(param);
    if (n == 0) return;
    // Host scalars exactly as kernels/cpu/optim.c forms them (bias corrections in double).
    const double bc1 = 1.0 - pow((double)p.beta1, (double)p.step);
    const double bc2 = 1.0 - pow((double)p.beta2, (double)p.step);
    AdamConsts k;
    k.step_size = (float)((double)p.lr / bc1);
    k.inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2));
    k.decay = p.decoupled ? 1.0f - p.lr * p.weight_decay : 1.0f;
    k.l2 = p.decoupled ? 0.0f : p.weight_decay;
    k.b1 = p.beta1;
    k.b2 = p.beta2;
    k.omb1 = 1.0f - p.beta1;
    k.omb2 = 1.0f - p.beta2;
    k.gs = p.grad_scale;
    k.eps = p.eps;
    k.sr_seed = p.stochastic_round_seed;
    k.sr_stream = p.stochastic_round_stream;
    adam_kernel<<<cuda_blocks((n + 3) / 4, OPT_THREADS), OPT_THREADS, 0, ctx.stream>>>(
        param->data, param->dtype, w, (float *)m->data, (float *)v->data, grad->data, grad->dtype, n, master != NULL, k);
    OCR_CUDA_LAUNCHED();
}

// ---- global norm ---------------------------------------------------------------------------------------

// partial[blockIdx.x] = Σ g² over chunk blockIdx.x (NORM_CHUNK elements), in double with a
// fixed reduction tree: the same result for every run.
static __global__ void __launch_bounds__(NORM_THREADS) sumsq_kernel(double *partial, const void *g, int dt, int64_t n) {
    const int64_t lo = (int64_t)blockIdx.x * NORM_CHUNK;
    const int64_t hi = lo + NORM_CHUNK < n ? lo + NORM_CHUNK : n;
    double acc = 0.0;
    for (int64_t i = lo + threadIdx.x; i < hi; i += NORM_THREADS) {
        const double x = ld(g, dt, i);
        acc += x * x;
    }
    __shared__ double s[NORM_THREADS / 32];
    acc = warp_sum(acc);
    if ((threadIdx.x & 31) == 0) s[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0.0;
        for (int w = 0; w < NORM_THREADS / 32; w++) t += s[w];
        partial[blockIdx.x] = t;
    }
}

// out[0] = Σ partial[0 .. n) in a fixed order (one block).
static __global__ void __launch_bounds__(NORM_THREADS)
    sum_partials_kernel(double *out, const double *partial, int64_t n) {
    double acc = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += NORM_THREADS) acc += partial[i];
    __shared__ double s[NORM_THREADS / 32];
    acc = warp_sum(acc);
    if ((threadIdx.x & 31) == 0) s[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0.0;
        for (int w = 0; w < NORM_THREADS / 32; w++) t += s[w];
        out[0] = t;
    }
}

extern "C" double ocr_cuda_grad_global_norm(OcrTensor *const *grads, int count) {
    const OcrTensor *t0 = NULL;
    int64_t chunks = 0;
    for (int i = 0; i < count; i++) {
        if (!grads[i]) continue;
        CUDA_ASSERT_FLOAT(grads[i]);
        if (!t0) t0 = grads[i];
        OCR_ASSERT(ocr_device_equal(grads[i]->device, t0->device), "grad_global_norm: grads on different devices");
        chunks += (ocr_tensor_numel(grads[i]) + NORM_CHUNK - 1) / NORM_CHUNK;
    }
    if (!t0 || chunks == 0) return 0.0;
    CudaCtx ctx = ocr_cuda_enter(t0);
    double *buf = (double *)ocr_cuda_scratch(ctx, (size_t)(chunks + 1) * sizeof(double));
    int64_t off = 0;
    for (int i = 0; i < count; i++) {
        if (!grads[i]) continue;
        const int64_t n = ocr_tensor_numel(grads[i]), c = (n + NORM_CHUNK - 1) / NORM_CHUNK;
        if (c == 0) continue;
        OCR_ASSERT(c <= 0x7fffffff, "grad_global_norm: tensor too large");
        sumsq_kernel<<<(unsigned)c, NORM_THREADS, 0, ctx.stream>>>(buf + 1 + off, grads[i]->data, grads[i]->dtype, n);
        OCR_CUDA_LAUNCHED();
        off += c;
    }
    sum_partials_kernel<<<1, NORM_THREADS, 0, ctx.stream>>>(buf, buf + 1, chunks);
    OCR_CUDA_LAUNCHED();
    double total = 0.0;
    OCR_CUDA_CHECK(cudaMemcpyAsync(&total, buf, sizeof total, cudaMemcpyDeviceToHost, ctx.stream));
    OCR_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    return sqrt(total);
}

static __global__ void scale_kernel(void *x, int dt, int64_t n, float f) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        st(x, dt, i, ld(x, dt, i) * f);
}

extern "C" double ocr_cuda_clip_grad_global_norm(OcrTensor *const *grads, int count, float max_norm) {
    const double norm = ocr_cuda_grad_global_norm(grads, count);
    if (norm > (double)max_norm) {
        const float f = (float)((double)max_norm / (norm + 1e-6));
        for (int i = 0; i < count; i++) {
            if (!grads[i]) continue;
            const int64_t n = ocr_tensor_numel(grads[i]);
            if (n == 0) continue;
            CudaCtx ctx = ocr_cuda_enter(grads[i]);
            scale_kernel<<<cuda_blocks(n, OPT_THREADS), OPT_THREADS, 0, ctx.stream>>>(grads[i]->data, grads[i]->dtype,
                                                                                     n, f);
            OCR_CUDA_LAUNCHED();
        }
    }
    return norm;
}

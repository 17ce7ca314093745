// The device-side loss scaler and the fused optimizer pass of a GPU training step
// (kernels/cuda/train_step.h). Nothing here waits for the host or allocates after
// ocr_fused_adam_create, so a step built from these calls can be captured into a CUDA graph.
//
// Layout of the fused pass: every parameter is cut into chunks of FUSED_CHUNK elements; the
// chunks of all parameters are numbered back to back (chunk_begin[t] is parameter t's first
// chunk) and one thread block handles one chunk, finding its parameter by binary search.
// Per-tensor sums of squares are summed chunk by chunk in a fixed order (double), so the
// global norm is the same on every run.
#include <math.h>
#include <stddef.h>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/train_step.h"

#define FUSED_CHUNK 8192
#define FUSED_THREADS 256

struct OcrFusedAdam {
    int device;
    int count;
    int64_t chunks;
    OcrFusedAdamConfig cfg;
    OcrFusedTensor *tensors;  // device (count)
    int64_t *chunk_begin;     // device (count + 1)
    double *partial;          // device (chunks): Σ g² of each chunk
    double *norms;            // device (count)
    float *factor;            // device (count): clip factors
    int *nonfinite;           // device (count)
    unsigned *amax_bits;      // device (count)
    double *bias_corr;        // device (2 · table_len): 1 − β1^t, 1 − β2^t for t = 1 ..
    int64_t table_len;
};

// ---- dropout step source ---------------------------------------------------------------------------------

static const uint64_t *g_dropout_step[OCR_MAX_DEVICES];

const uint64_t *ocr_cuda_dropout_step_source(int device) {
    return device >= 0 && device < OCR_MAX_DEVICES ? g_dropout_step[device] : NULL;
}

extern "C" void ocr_cuda_set_dropout_step_source(int device, const uint64_t *dropout_step) {
    OCR_ASSERT(device >= 0 && device < OCR_MAX_DEVICES, "device %d", device);
    g_dropout_step[device] = dropout_step;
}

// ---- creation --------------------------------------------------------------------------------------------

static CudaCtx ctx_of(int device) {
    const int64_t one = 1;
    OcrTensor probe = ocr_tensor_view(NULL, OCR_F32, ocr_cuda_device(device), 1, &one);
    return ocr_cuda_enter(&probe);
}

extern "C" void ocr_fused_adam_free(OcrFusedAdam *fa) {
    if (!fa) return;
    ocr_mem_free(fa->tensors);
    ocr_mem_free(fa->chunk_begin);
    ocr_mem_free(fa->partial);
    ocr_mem_free(fa->norms);
    ocr_mem_free(fa->factor);
    ocr_mem_free(fa->nonfinite);
    ocr_mem_free(fa->amax_bits);
    ocr_mem_free(fa->bias_corr);
    free(fa);
}

extern "C" OcrFusedAdam *ocr_fused_adam_create(int device, const OcrFusedTensor *t, int count, OcrFusedAdamConfig cfg,
                                               int64_t max_updates) {
    OcrFusedAdam *fa = (OcrFusedAdam *)calloc(1, sizeof *fa);
    if (!fa) {
        ocr_set_error(OCR_ERR_OOM, "fused optimizer: out of host memory");
        return NULL;
    }
    fa->device = device;
    fa->count = count;
    fa->cfg = cfg;
    fa->table_len = max_updates > 0 ? max_updates : 1;
    const size_t n = (size_t)(count > 0 ? count : 1);
    int64_t *begin = (int64_t *)malloc((n + 1) * sizeof *begin);
    double *bc = (double *)malloc((size_t)fa->table_len * 2 * sizeof *bc);
    if (!begin || !bc) {
        free(begin);
        free(bc);
        ocr_fused_adam_free(fa);
        ocr_set_error(OCR_ERR_OOM, "fused optimizer: out of host memory");
        return NULL;
    }
    int64_t chunks = 0;
    for (int i = 0; i < count; i++) {
        begin[i] = chunks;
        chunks += (t[i].numel + FUSED_CHUNK - 1) / FUSED_CHUNK;
    }
    begin[count] = chunks;
    fa->chunks = chunks;
    // As kernels/cpu/optim.c forms them: 1 − pow(β, t) in double.
    for (int64_t s = 1; s <= fa->table_len; s++) {
        bc[2 * (s - 1)] = 1.0 - pow((double)cfg.beta1, (double)s);
        bc[2 * (s - 1) + 1] = 1.0 - pow((double)cfg.beta2, (double)s);
    }
    const ocr_device_t dev = ocr_cuda_device(device);
    fa->tensors = (OcrFusedTensor *)ocr_mem_alloc(dev, OCR_MEM_OPTIMIZER, n * sizeof(OcrFusedTensor));
    fa->chunk_begin = (int64_t *)ocr_mem_alloc(dev, OCR_MEM_OPTIMIZER, (n + 1) * sizeof(int64_t));
    fa->partial = (double *)ocr_mem_alloc(dev, OCR_MEM_OPTIMIZER, (size_t)(chunks > 0 ? chunks : 1) * sizeof(double));
    fa->norms = (double *)ocr_mem_alloc(dev, OCR_MEM_OPTIMIZER, n * sizeof(double));
    fa->factor = (float *)ocr_mem_alloc(dev, OCR_MEM_OPTIMIZER, n * sizeof(float));
    fa->nonfinite = (int *)ocr_mem_alloc(dev, OCR_MEM_OPTIMIZER, n * sizeof(int));
    fa->amax_bits = (unsigned *)ocr_mem_alloc(dev, OCR_MEM_OPTIMIZER, n * sizeof(unsigned));
    fa->bias_corr = (double *)ocr_mem_alloc(dev, OCR_MEM_OPTIMIZER, (size_t)fa->table_len * 2 * sizeof(double));
    int ok = fa->tensors && fa->chunk_begin && fa->partial && fa->norms && fa->factor && fa->nonfinite &&
             fa->amax_bits && fa->bias_corr;
    if (ok) {
        (void)ctx_of(device);
        ok = ocr_cuda_memcpy(fa->tensors, t, (size_t)count * sizeof *t) == 0 &&
             ocr_cuda_memcpy(fa->chunk_begin, begin, (n + 1) * sizeof *begin) == 0 &&
             ocr_cuda_memcpy(fa->bias_corr, bc, (size_t)fa->table_len * 2 * sizeof *bc) == 0 &&
             ocr_cuda_memset(device, fa->nonfinite, 0, n * sizeof(int)) == 0 &&
             ocr_cuda_memset(device, fa->amax_bits, 0, n * sizeof(unsigned)) == 0 &&
             ocr_cuda_synchronize(device) == 0;
    } else {
        ocr_set_error(OCR_ERR_OOM, "fused optimizer: device tables for %d parameters", count);
    }
    free(begin);
    free(bc);
    if (!ok) {
        ocr_fused_adam_free(fa);
        return NULL;
    }
    return fa;
}

extern "C" const int *ocr_fused_adam_nonfinite(const OcrFusedAdam *fa) { return fa->nonfinite; }
extern "C" const unsigned *ocr_fused_adam_amax_bits(const OcrFusedAdam *fa) { return fa->amax_bits; }

// ---- kernels -----------------------------------------------------------------------------------------------

// The parameter that owns chunk c: the largest t with begin[t] <= c.
__device__ __forceinline__ int find_tensor(const int64_t *begin, int count, int64_t c) {
    int lo = 0, hi = count - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (begin[mid] <= c) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

// Unscale (f32 gradients by inv_scale, in place) + finite check + amax + Σ g² per chunk.
static __global__ void __launch_bounds__(FUSED_THREADS)
    check_kernel(const OcrFusedTensor *ts, const int64_t *begin, int count, OcrDevStep *state, double *partial,
                 int *nonfinite, unsigned *amax_bits) {
    const int64_t c = blockIdx.x;
    const int t = find_tensor(begin, count, c);
    const OcrFusedTensor T = ts[t];
    const int64_t lo = (c - begin[t]) * FUSED_CHUNK;
    const int64_t hi = lo + FUSED_CHUNK < T.numel ? lo + FUSED_CHUNK : T.numel;
    const float inv = T.grad_scaled ? 1.0f : state->inv_scale;
    double acc = 0.0;
    float amax = 0.0f;
    int bad = 0;
    for (int64_t i = lo + threadIdx.x; i < hi; i += FUSED_THREADS) {
        float v = ld(T.grad, T.grad_dtype, i);
        if (!isfinite(v)) {
            bad = 1;
            continue;
        }
        if (!T.grad_scaled) {
            v = __fmul_rn(v, inv);
            st(T.grad, T.grad_dtype, i, v);
        }
        amax = fmaxf(amax, fabsf(v));
        acc += (double)v * (double)v;
    }
    __shared__ double sacc[FUSED_THREADS / 32];
    __shared__ float smax[FUSED_THREADS / 32];
    __shared__ int sbad;
    if (threadIdx.x == 0) sbad = 0;
    __syncthreads();
    if (bad) sbad = 1;
    acc = warp_sum(acc);
    amax = warp_max(amax);
    if ((threadIdx.x & 31) == 0) {
        sacc[threadIdx.x >> 5] = acc;
        smax[threadIdx.x >> 5] = amax;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double s = 0.0;
        float m = 0.0f;
        for (int w = 0; w < FUSED_THREADS / 32; w++) {
            s += sacc[w];
            m = fmaxf(m, smax[w]);
        }
        partial[c] = s;
        if (m > 0.0f) atomicMax(&amax_bits[t], __float_as_uint(m));
        if (sbad) {
            nonfinite[t] = 1;
            state->found_inf = 1;
        }
    }
}

// Per-tensor norms of the true gradients, clip factors (training/optim.c optim_clip_factors) and
// the global norm. One block.
static __global__ void __launch_bounds__(FUSED_THREADS)
    clip_kernel(const OcrFusedTensor *ts, const int64_t *begin, int count, const double *partial, double *norms,
                float *factor, OcrDevStep *state, double clip_norm, double clip_global) {
    const float inv = state->inv_scale;
    for (int t = threadIdx.x; t < count; t += FUSED_THREADS) {
        double s = 0.0;
        for (int64_t c = begin[t]; c < begin[t + 1]; c++) s += partial[c];
        const float gs = ts[t].grad_scaled ? inv : 1.0f;
        const double n = sqrt(s) * fabs((double)gs);
        norms[t] = n;
        factor[t] = (clip_norm > 0 && n > clip_norm) ? (float)(clip_norm / n) : 1.0f;
    }
    __syncthreads();
    __shared__ float g;
    if (threadIdx.x == 0) {
        double total = 0.0;
        for (int t = 0; t < count; t++) total += norms[t] * norms[t];
        total = sqrt(total);
        state->grad_norm = total;
        g = (clip_global > 0 && total > clip_global) ? (float)(clip_global / (total + 1e-6)) : 1.0f;
    }
    __syncthreads();
    if (g != 1.0f)
        for (int t = threadIdx.x; t < count; t += FUSED_THREADS) factor[t] = __fmul_rn(factor[t], g);
}

// Adam/AdamW over every chunk, unless this step found inf/NaN.
static __global__ void __launch_bounds__(FUSED_THREADS)
    fused_adam_kernel(const OcrFusedTensor *ts, const int64_t *begin, int count, const float *factor,
                      const OcrDevStep *state, const double *bias_corr, int64_t table_len, float beta1, float beta2,
                      float eps, int stochastic_rounding) {
    if (state->found_inf) return;
    const int64_t c = blockIdx.x;
    const int t = find_tensor(begin, count, c);
    const OcrFusedTensor T = ts[t];
    // The scalars of kernels/cuda/optim.cu ocr_cuda_adam_update, formed from device values.
    const int64_t step = state->updates + 1;
    const float lr = (float)(state->in.lr * (double)T.lr_mult);
    double bc1, bc2;
    if (step <= table_len) {
        bc1 = bias_corr[2 * (step - 1)];
        bc2 = bias_corr[2 * (step - 1) + 1];
    } else {
        bc1 = 1.0 - pow((double)beta1, (double)step);
        bc2 = 1.0 - pow((double)beta2, (double)step);
    }
    AdamConsts k;
    k.step_size = (float)((double)lr / bc1);
    k.inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2));
    k.decay = T.decoupled ? __fsub_rn(1.0f, __fmul_rn(lr, T.decay)) : 1.0f;
    k.l2 = T.decoupled ? 0.0f : T.decay;
    k.b1 = beta1;
    k.b2 = beta2;
    k.omb1 = __fsub_rn(1.0f, beta1);
    k.omb2 = __fsub_rn(1.0f, beta2);
    k.gs = __fmul_rn(T.grad_scaled ? state->inv_scale : 1.0f, factor[t]);
    k.eps = eps;
    k.sr_seed = stochastic_rounding ? state->in.sr_seed : 0;
    k.sr_stream = (uint64_t)t;
    const int write_param = T.master != NULL;
    float *w = write_param ? T.master : (float *)T.param;
    const int64_t g0 = (c - begin[t]) * (FUSED_CHUNK / 4);
    const int64_t groups_total = (T.numel + 3) / 4;
    const int64_t g1 = g0 + FUSED_CHUNK / 4 < groups_total ? g0 + FUSED_CHUNK / 4 : groups_total;
    for (int64_t g = g0 + threadIdx.x; g < g1; g += FUSED_THREADS)
        adam_group(T.param, T.param_dtype, w, T.m, T.v, T.grad, T.grad_dtype, T.numel, write_param, k, g);
}

// amp/scaler.h amp_scaler_update on the device state, and Adam's counter; host and device (the
// host self-test compares it with amp_scaler_update: ocr_dev_step_finish_host).
OCR_HD void dev_step_finish(OcrDevStep *s, const OcrDevScalerConfig &c) {
    const int inf = s->found_inf;
    const float scale = c.enabled ? s->scale : 1.0f;
    s->scale_used = scale;
    if (!inf) s->updates++;
    s->steps++;
    if (inf) s->overflow_steps++;
    int ev = 0;  // AMP_SCALE_KEPT
    if (c.enabled && c.dynamic) {
        if (inf) {
            s->good_steps = 0;
            if (++s->bad_steps >= c.decr_every_n_nan_or_inf) {
                s->bad_steps = 0;
                const float next = (float)((double)s->scale * c.decr_ratio);
                if (c.min_scale > 0.0 && (double)next < c.min_scale) {
                    const float floor_ = (float)c.min_scale;
                    ev = floor_ < s->scale ? 2 : 3;  // BACKED_OFF : AT_FLOOR
                    s->scale = floor_;
                } else {
                    s->scale = next;
                    ev = 2;
                }
            }
        } else {
            s->bad_steps = 0;
            if (++s->good_steps >= c.incr_every_n_steps) {
                s->good_steps = 0;
                const float next = (float)((double)s->scale * c.incr_ratio);
                if (!isfinite(next)) {
                    ev = 4;  // AT_CEILING: keep the old scale
                } else if (c.max_scale > 0.0 && (double)next > c.max_scale) {
                    const float ceil_ = (float)c.max_scale;
                    ev = ceil_ > s->scale ? 1 : 4;  // GREW : AT_CEILING
                    s->scale = ceil_;
                } else {
                    s->scale = next;
                    ev = 1;
                }
            }
        }
    }
    s->event = ev;
    s->inv_scale = (float)(1.0 / (double)(c.enabled ? s->scale : 1.0f));
}

static __global__ void finish_kernel(OcrDevStep *s, OcrDevScalerConfig c) { dev_step_finish(s, c); }

extern "C" void ocr_dev_step_finish_host(OcrDevStep *state, OcrDevScalerConfig scaler) {
    dev_step_finish(state, scaler);
}

extern "C" void ocr_fused_adam_begin(OcrFusedAdam *fa, OcrDevStep *state) {
    CudaCtx ctx = ctx_of(fa->device);
    const size_t n = (size_t)(fa->count > 0 ? fa->count : 1);
    OCR_CUDA_CHECK(cudaMemsetAsync(fa->nonfinite, 0, n * sizeof(int), ctx.stream));
    OCR_CUDA_CHECK(cudaMemsetAsync(fa->amax_bits, 0, n * sizeof(unsigned), ctx.stream));
    OCR_CUDA_CHECK(cudaMemsetAsync((char *)state + offsetof(OcrDevStep, found_inf), 0, sizeof(int), ctx.stream));
}

extern "C" void ocr_fused_adam_step(OcrFusedAdam *fa, OcrDevStep *state, OcrDevScalerConfig scaler) {
    CudaCtx ctx = ctx_of(fa->device);
    if (fa->chunks > 0) {
        OCR_ASSERT(fa->chunks <= 0x7fffffff, "fused optimizer: %lld chunks", (long long)fa->chunks);
        check_kernel<<<(unsigned)fa->chunks, FUSED_THREADS, 0, ctx.stream>>>(
            fa->tensors, fa->chunk_begin, fa->count, state, fa->partial, fa->nonfinite, fa->amax_bits);
        OCR_CUDA_LAUNCHED();
        clip_kernel<<<1, FUSED_THREADS, 0, ctx.stream>>>(fa->tensors, fa->chunk_begin, fa->count, fa->partial,
                                                          fa->norms, fa->factor, state, fa->cfg.clip_norm,
                                                          fa->cfg.clip_norm_global);
        OCR_CUDA_LAUNCHED();
        fused_adam_kernel<<<(unsigned)fa->chunks, FUSED_THREADS, 0, ctx.stream>>>(
            fa->tensors, fa->chunk_begin, fa->count, fa->factor, state, fa->bias_corr, fa->table_len, fa->cfg.beta1,
            fa->cfg.beta2, fa->cfg.eps, fa->cfg.stochastic_rounding);
        OCR_CUDA_LAUNCHED();
    }
    finish_kernel<<<1, 1, 0, ctx.stream>>>(state, scaler);
    OCR_CUDA_LAUNCHED();
}

// ---- small helpers of the step -------------------------------------------------------------------------------

static __global__ void scale_by_state_kernel(void *y, int ydt, const void *x, int xdt, int64_t n, const OcrDevStep *s) {
    const float f = s->scale;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        st(y, ydt, i, __fmul_rn(ld(x, xdt, i), f));
}

extern "C" void ocr_dev_scale_by_loss_scale(OcrTensor *out, const OcrTensor *inp, const OcrDevStep *state) {
    CUDA_ASSERT_FLOAT(out);
    CUDA_ASSERT_FLOAT(inp);
    OCR_ASSERT(ocr_tensor_numel(out) == ocr_tensor_numel(inp), "scale by loss scale: element counts differ");
    CudaCtx ctx = ocr_cuda_enter(out);
    const int64_t n = ocr_tensor_numel(out);
    if (n == 0) return;
    scale_by_state_kernel<<<cuda_blocks(n, FUSED_THREADS), FUSED_THREADS, 0, ctx.stream>>>(
        out->data, out->dtype, inp->data, inp->dtype, n, state);
    OCR_CUDA_LAUNCHED();
}

static __global__ void restore_kernel(uint32_t *dst, const uint32_t *src, int64_t words, const OcrDevStep *s) {
    if (!s->found_inf) return;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < words; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

extern "C" void ocr_dev_restore_if_inf(int device, void *dst, const void *src, size_t bytes, const OcrDevStep *state) {
    OCR_ASSERT(bytes % 4 == 0, "restore: %zu bytes is not a whole number of words", bytes);
    if (bytes == 0) return;
    CudaCtx ctx = ctx_of(device);
    const int64_t words = (int64_t)(bytes / 4);
    restore_kernel<<<cuda_blocks(words, FUSED_THREADS), FUSED_THREADS, 0, ctx.stream>>>(
        (uint32_t *)dst, (const uint32_t *)src, words, state);
    OCR_CUDA_LAUNCHED();
}

static __global__ void record_kernel(OcrDevStep *s, const float *loss, const int *infeasible, int64_t n) {
    if (threadIdx.x != 0) return;
    s->loss = loss ? loss[0] : NAN;
    int k = 0;
    for (int64_t i = 0; infeasible && i < n; i++) k += infeasible[i] != 0;
    s->infeasible = k;
}

extern "C" void ocr_dev_step_record(OcrDevStep *state, const OcrTensor *loss, const OcrTensor *infeasible) {
    const OcrTensor *any = loss ? loss : infeasible;
    OCR_ASSERT(any, "step record: no tensor");
    OCR_ASSERT(!loss || (loss->dtype == OCR_F32 && loss->device.type == OCR_DEVICE_CUDA), "step record: f32 loss");
    OCR_ASSERT(!infeasible || (infeasible->dtype == OCR_I32 && infeasible->device.type == OCR_DEVICE_CUDA),
               "step record: int32 infeasible flags");
    CudaCtx ctx = ocr_cuda_enter(any);
    record_kernel<<<1, 32, 0, ctx.stream>>>(state, loss ? (const float *)loss->data : NULL,
                                            infeasible ? (const int *)infeasible->data : NULL,
                                            infeasible ? ocr_tensor_numel(infeasible) : 0);
    OCR_CUDA_LAUNCHED();
}

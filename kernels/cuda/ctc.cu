// CTC loss on the GPU: kernels/ctc.h's semantics, kernels/cpu/ctc.c's numerics.
//
// One block per sample. With L labels and S = 2L+1 states (even states blank):
//   1. per frame t < T_b: max and Σ exp(z − max) over the C logits (block reductions, the sum
//      in double), and the label log-probabilities lp(t, ·) in double;
//   2. alpha in log space (double), threads over states, one frame per step;
//   3. beta, two rows in shared memory, and at each frame the gradient: the softmax row scaled
//      by the reduction weight, then the label classes rewritten from double values
//      (softmax − occupancy cancels in double). The occupancy of a class sums its states in
//      ascending order, one thread per class, as the CPU does.
// alpha, lp and the frame statistics live in scratch (per sample T·(3S/2 + ...) doubles). A
// last single-thread kernel does the batch reduction serially, in the CPU's order.
// dlogits may be the logits themselves (same dtype), as on the CPU: a block touches only its
// sample's rows; step 1 only reads them (rows past T_b, zeroed first, are never read), and in
// step 3 each thread reads a frame's logit before it writes that element's gradient, the label
// classes being written after a barrier from double values that no longer need the logits.
// Everything stays on the device; only ocr_cuda_ctc_loss_forward's return value reads back.
#include <math.h>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_internal.h"

#define CTC_THREADS 256
#define CTC_NEG_INF (-INFINITY)

struct CtcArgs {
    const void *logits;
    int ldt;
    void *dlogits;  // NULL: no gradient
    int gdt;
    const int32_t *targets, *tlen, *ilen;  // ilen NULL: T for all
    double *work;                          // per sample: lp T·(Smax+1), alpha T·(2Smax+1), stats 2T
    int64_t per_sample;
    double *nll;  // B
    int B, T, C, Smax;
    int reduction, zero_infinity, focal;
    float grad_scale;
};

__device__ __forceinline__ double ctc_log_add(double a, double b) {
    if (a < b) {
        double t = a;
        a = b;
        b = t;
    }
    if (b == CTC_NEG_INF) return a;
    return a + log1p(exp(b - a));
}

__device__ __forceinline__ double ctc_log_add3(double a, double b, double c) {
    double m = a > b ? a : b;
    if (c > m) m = c;
    if (m == CTC_NEG_INF) return CTC_NEG_INF;
    return m + log(exp(a - m) + exp(b - m) + exp(c - m));
}

// d ℓ / d nll · base with ℓ = nll·q², q = 1 − e^(−nll) (PaddleOCR's focal weighting), or base.
__device__ __forceinline__ double ctc_weight(double nll, double base, int focal) {
    if (!focal) return base;
    const double q = -expm1(-nll);
    return base * (q * q + 2.0 * nll * q * (1.0 - q));
}

// Block reductions through a 32-entry shared buffer; every thread gets the result.
static __device__ double block_sum(double v, double *buf) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    if (lane == 0) buf[warp] = v;
    __syncthreads();
    if (warp == 0) {
        double t = lane < nw ? buf[lane] : 0.0;
        t = warp_sum(t);
        if (lane == 0) buf[0] = t;
    }
    __syncthreads();
    const double r = buf[0];
    __syncthreads();
    return r;
}

static __device__ float block_max(float v, double *buf) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_max(v);
    if (lane == 0) buf[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float t = lane < nw ? (float)buf[lane] : -INFINITY;
        t = warp_max(t);
        if (lane == 0) buf[0] = t;
    }
    __syncthreads();
    const float r = (float)buf[0];
    __syncthreads();
    return r;
}

extern __shared__ double ctc_smem[];

static __global__ void __launch_bounds__(CTC_THREADS) ctc_sample_kernel(CtcArgs a) {
    const int b = blockIdx.x, tid = threadIdx.x, nt = blockDim.x;
    const int T = a.T, C = a.C, Smax = a.Smax, Sx = 2 * Smax + 1;
    // Shared: beta (2 rows of Sx), occupancy (Smax+1), reduction buffer (32), scalars (4),
    // then targets (Smax) and slots (Smax+1) as ints.
    double *beta = ctc_smem;
    double *occ = beta + 2 * Sx;
    double *red = occ + Smax + 1;
    double *scal = red + 32;  // [0] nll, [1] lse / weight
    int *tgt = (int *)(scal + 4);
    int *slot = tgt + Smax;

    const int L = a.tlen[b];
    const int Tb = a.ilen ? a.ilen[b] : T;
    const int64_t row0 = (int64_t)b * T * C;  // first element of the sample
    int valid = L >= 0 && L <= Smax && Tb >= 0 && Tb <= T;
    int bad_label = 0;
    if (valid)
        for (int j = tid; j < L; j += nt) {
            const int c = a.targets[(int64_t)b * Smax + j];
            tgt[j] = c;
            bad_label |= c < 1 || c >= C;
        }
    const int any_bad = __syncthreads_or(bad_label);  // every thread reaches the barrier
    valid = valid && !any_bad;
    if (!valid) {  // cannot abort from the device: NaN loss and gradient, which the AMP check sees
        if (a.dlogits)
            for (int64_t i = tid; i < (int64_t)T * C; i += nt) st(a.dlogits, a.gdt, row0 + i, NAN);
        if (tid == 0) a.nll[b] = NAN;
        return;
    }
    if (a.dlogits)
        for (int64_t i = (int64_t)Tb * C + tid; i < (int64_t)T * C; i += nt) st(a.dlogits, a.gdt, row0 + i, 0.0f);
    if (Tb == 0) {
        if (tid == 0) a.nll[b] = L == 0 ? 0.0 : INFINITY;
        return;
    }
    const int S = 2 * L + 1, W = L + 1;
    double *lp = a.work + (size_t)b * a.per_sample;  // (T, W) with row stride Smax + 1
    double *al = lp + (size_t)T * (Smax + 1);         // (T, S) with row stride Sx
    double *fmx = al + (size_t)T * Sx;                // per frame: max
    double *finv = fmx + T;                           // per frame: 1 / Σ exp(z − max)
    const int lps = Smax + 1;

    // 1. Frame statistics and label log-probabilities.
    for (int t = 0; t < Tb; t++) {
        const int64_t zr = row0 + (int64_t)t * C;
        float mx = -INFINITY;
        for (int c = tid; c < C; c += nt) mx = fmaxf(mx, ld(a.logits, a.ldt, zr + c));
        mx = block_max(mx, red);
        double s = 0.0;
        for (int c = tid; c < C; c += nt) s += (double)expf(ld(a.logits, a.ldt, zr + c) - mx);
        s = block_sum(s, red);
        const double lse = (double)mx + log(s);
        for (int j = tid; j < W; j += nt) {
            const int cls = j == 0 ? 0 : tgt[j - 1];
            lp[(size_t)t * lps + j] = (double)ld(a.logits, a.ldt, zr + cls) - lse;
        }
        if (tid == 0) {
            fmx[t] = mx;
            finv[t] = 1.0 / s;
        }
    }
    __syncthreads();

    // 2. Alpha. State s uses lp column 0 (blank, even s) or 1 + (s−1)/2.
    for (int s = tid; s < S; s += nt) al[s] = CTC_NEG_INF;
    __syncthreads();
    if (tid == 0) {
        al[0] = lp[0];
        if (L > 0) al[1] = lp[1];
    }
    __syncthreads();
    for (int t = 1; t < Tb; t++) {
        const double *prev = al + (size_t)(t - 1) * Sx;
        double *cur = al + (size_t)t * Sx;
        const double *lpt = lp + (size_t)t * lps;
        for (int s = tid; s < S; s += nt) {
            double v = prev[s];
            if (s >= 1) {
                if ((s & 1) && s >= 3 && tgt[(s - 1) / 2] != tgt[(s - 3) / 2])
                    v = ctc_log_add3(v, prev[s - 1], prev[s - 2]);
                else
                    v = ctc_log_add(v, prev[s - 1]);
            }
            cur[s] = v == CTC_NEG_INF ? CTC_NEG_INF : v + lpt[(s & 1) ? 1 + (s - 1) / 2 : 0];
        }
        __syncthreads();
    }
    const double *last = al + (size_t)(Tb - 1) * Sx;
    const double ll = L > 0 ? ctc_log_add(last[S - 1], last[S - 2]) : last[0];
    const double nll = -ll;
    if (tid == 0) a.nll[b] = nll;
    if (!a.dlogits) return;

    if (ll == CTC_NEG_INF) {  // infeasible: zero_infinity zeroes the rows, else NaN (as PyTorch)
        const float fill = a.zero_infinity ? 0.0f : NAN;
        for (int64_t i = tid; i < (int64_t)Tb * C; i += nt) st(a.dlogits, a.gdt, row0 + i, fill);
        return;
    }
    double base = 1.0;
    if (a.reduction == OCR_CTC_REDUCTION_PADDLE) base = 1.0 / a.B;
    if (a.reduction == OCR_CTC_REDUCTION_MEAN) base = 1.0 / ((double)a.B * (L > 1 ? L : 1));
    const double wt = ctc_weight(nll, base * (double)a.grad_scale, a.focal);

    // Columns that repeat a class add their occupancy into the first column of that class.
    for (int j = tid; j < W; j += nt) {
        int sl = j;
        if (j > 0)
            for (int k = 1; k < j; k++)
                if (tgt[k - 1] == tgt[j - 1]) {
                    sl = k;
                    break;
                }
        slot[j] = sl;
    }
    __syncthreads();

    // 3. Beta, two rows alternating, and the gradient of each frame.
    double *b_cur = beta, *b_next = beta + Sx;
    for (int t = Tb - 1; t >= 0; t--) {
        const double *lpt = lp + (size_t)t * lps;
        for (int s = tid; s < S; s += nt) {
            double v;
            if (t == Tb - 1) {
                v = s == S - 1 ? lpt[0] : (L > 0 && s == S - 2 ? lpt[L] : CTC_NEG_INF);
            } else {
                v = b_next[s];
                if (s + 1 < S) {
                    if ((s & 1) && s + 2 < S && tgt[(s - 1) / 2] != tgt[(s + 1) / 2])
                        v = ctc_log_add3(v, b_next[s + 1], b_next[s + 2]);
                    else
                        v = ctc_log_add(v, b_next[s + 1]);
                }
                v = v == CTC_NEG_INF ? CTC_NEG_INF : v + lpt[(s & 1) ? 1 + (s - 1) / 2 : 0];
            }
            b_cur[s] = v;
        }
        __syncthreads();
        const double *at = al + (size_t)t * Sx;
        for (int j = tid; j < W; j += nt) {
            if (slot[j] != j) continue;
            double o = 0.0;
            for (int s = 0; s < S; s++) {
                const int col = (s & 1) ? 1 + (s - 1) / 2 : 0;
                if (slot[col] != j) continue;
                const double v = at[s] + b_cur[s];
                if (v == CTC_NEG_INF) continue;
                o += exp(v - lpt[col] + nll);
            }
            occ[j] = o;
        }
        // Softmax row scaled by the weight, then the label classes recomputed in double.
        const int64_t zr = row0 + (int64_t)t * C;
        const float mx = (float)fmx[t];
        const float sc = (float)(wt * finv[t]);
        for (int c = tid; c < C; c += nt) st(a.dlogits, a.gdt, zr + c, expf(ld(a.logits, a.ldt, zr + c) - mx) * sc);
        __syncthreads();
        for (int j = tid; j < W; j += nt) {
            if (slot[j] != j) continue;
            const int cls = j == 0 ? 0 : tgt[j - 1];
            st(a.dlogits, a.gdt, zr + cls, (float)(wt * (exp(lpt[j]) - occ[j])));
        }
        __syncthreads();
        double *tmp = b_cur;
        b_cur = b_next;
        b_next = tmp;
    }
}

// The batch reduction, serially in the CPU's order (one thread).
static __global__ void ctc_reduce_kernel(double *out, float *losses, float *loss, int32_t *infeasible,
                                         const double *nll, const int32_t *tlen, int B, int reduction,
                                         int zero_infinity, int focal) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    double total = 0.0;
    for (int b = 0; b < B; b++) {
        const double v = nll[b];
        const int bad = isinf(v) != 0;
        if (infeasible) infeasible[b] = bad;
        double l = bad && zero_infinity ? 0.0 : v;
        if (focal && !(bad && zero_infinity)) {
            if (bad) {
                l = INFINITY;
            } else {
                const double q = -expm1(-l);
                l = l * q * q;
            }
        }
        if (losses) losses[b] = (float)l;
        if (reduction == OCR_CTC_REDUCTION_MEAN) l /= (tlen[b] > 1 ? tlen[b] : 1);
        total += l;
    }
    double reduced = total;
    if ((reduction == OCR_CTC_REDUCTION_PADDLE || reduction == OCR_CTC_REDUCTION_MEAN) && B > 0) reduced = total / B;
    if (loss) loss[0] = (float)reduced;
    out[0] = reduced;
}

static void check_i32(const OcrTensor *t, int64_t n, const char *what) {
    OCR_ASSERT(t->device.type == OCR_DEVICE_CUDA && t->dtype == OCR_I32 && ocr_tensor_numel(t) == n,
               "%s must be a CUDA int32 tensor of %lld elements", what, (long long)n);
}

// Checks and enqueues both kernels; *scratch_out[0] receives the reduced loss (double).
static CudaCtx ctc_enqueue(double **scratch_out, OcrTensor *losses, OcrTensor *loss, OcrTensor *dlogits,
                           OcrTensor *infeasible, const OcrTensor *logits, const OcrTensor *targets,
                           const OcrTensor *target_lengths, const OcrTensor *input_lengths, CtcParams p) {
    CUDA_ASSERT_FLOAT(logits);
    OCR_ASSERT(logits->ndim == 3, "logits must be (B, T, C)");
    const int64_t B = logits->shape[0], T = logits->shape[1], C = logits->shape[2];
    OCR_ASSERT(C >= 1 && T >= 0 && B >= 0 && B <= INT32_MAX && T * C <= INT32_MAX && C <= INT32_MAX,
               "ctc: logits (%lld, %lld, %lld)", (long long)B, (long long)T, (long long)C);
    OCR_ASSERT(targets->device.type == OCR_DEVICE_CUDA && targets->dtype == OCR_I32 && targets->ndim == 2 &&
                   targets->shape[0] == B,
               "targets must be a CUDA (B, S) int32 tensor");
    const int64_t Smax = targets->shape[1];
    check_i32(target_lengths, B, "target_lengths");
    if (input_lengths) check_i32(input_lengths, B, "input_lengths");
    if (losses)
        OCR_ASSERT(losses->device.type == OCR_DEVICE_CUDA && losses->dtype == OCR_F32 && ocr_tensor_numel(losses) == B,
                   "losses must be a CUDA (B) f32 tensor");
    if (loss)
        OCR_ASSERT(loss->device.type == OCR_DEVICE_CUDA && loss->dtype == OCR_F32 && ocr_tensor_numel(loss) == 1,
                   "loss must be a CUDA (1) f32 tensor");
    if (infeasible) check_i32(infeasible, B, "infeasible");
    if (dlogits) {
        CUDA_ASSERT_FLOAT(dlogits);
        OCR_ASSERT(ocr_tensor_same_shape(dlogits, logits), "dlogits must have logits' shape");
        const char *lo = (const char *)logits->data, *go = (const char *)dlogits->data;
        const size_t lb = ocr_tensor_bytes(logits), gb = ocr_tensor_bytes(dlogits);
        OCR_ASSERT((lo == go && logits->dtype == dlogits->dtype) || go + gb <= lo || lo + lb <= go,
                   "dlogits must be the logits themselves (same dtype) or not overlap them");
    }
    OCR_ASSERT(p.reduction >= OCR_CTC_REDUCTION_PADDLE && p.reduction <= OCR_CTC_REDUCTION_NONE);
    CudaCtx ctx = ocr_cuda_enter(logits);

    const int64_t Sx = 2 * Smax + 1;
    const int64_t per_sample = T * (Smax + 1) + T * Sx + 2 * T;
    // Scratch: the reduced loss (1 double), nll (B doubles), then the per-sample work.
    double *scratch = (double *)ocr_cuda_scratch(ctx, (size_t)(1 + B + B * per_sample) * sizeof(double));
    CtcArgs a;
    a.logits = logits->data;
    a.ldt = logits->dtype;
    a.dlogits = dlogits ? dlogits->data : NULL;
    a.gdt = dlogits ? dlogits->dtype : OCR_F32;
    a.targets = (const int32_t *)targets->data;
    a.tlen = (const int32_t *)target_lengths->data;
    a.ilen = input_lengths ? (const int32_t *)input_lengths->data : NULL;
    a.nll = scratch + 1;
    a.work = scratch + 1 + B;
    a.per_sample = per_sample;
    a.B = (int)B, a.T = (int)T, a.C = (int)C, a.Smax = (int)Smax;
    a.reduction = (int)p.reduction;
    a.zero_infinity = p.zero_infinity;
    a.focal = p.use_focal_loss;
    a.grad_scale = p.grad_scale == 0.0f ? 1.0f : p.grad_scale;
    const size_t smem = (size_t)(2 * Sx + (Smax + 1) + 32 + 4) * sizeof(double) + (size_t)(2 * Smax + 1) * sizeof(int);
    OCR_ASSERT(smem <= 48 * 1024, "ctc: targets of width %lld are too wide for the GPU kernel", (long long)Smax);
    if (B > 0) {
        ctc_sample_kernel<<<(unsigned)B, CTC_THREADS, smem, ctx.stream>>>(a);
        OCR_CUDA_LAUNCHED();
    }
    ctc_reduce_kernel<<<1, 1, 0, ctx.stream>>>(scratch, losses ? (float *)losses->data : NULL,
                                               loss ? (float *)loss->data : NULL,
                                               infeasible ? (int32_t *)infeasible->data : NULL, a.nll, a.tlen, (int)B,
                                               a.reduction, a.zero_infinity, a.focal);
    OCR_CUDA_LAUNCHED();
    *scratch_out = scratch;
    return ctx;
}

extern "C" void ocr_cuda_ctc_loss_forward_async(OcrTensor *losses, OcrTensor *loss, OcrTensor *dlogits,
                                                OcrTensor *infeasible, const OcrTensor *logits,
                                                const OcrTensor *targets, const OcrTensor *target_lengths,
                                                const OcrTensor *input_lengths, CtcParams p) {
    double *scratch;
    (void)ctc_enqueue(&scratch, losses, loss, dlogits, infeasible, logits, targets, target_lengths, input_lengths, p);
}

extern "C" double ocr_cuda_ctc_loss_forward(OcrTensor *losses, OcrTensor *loss, OcrTensor *dlogits,
                                            OcrTensor *infeasible, const OcrTensor *logits, const OcrTensor *targets,
                                            const OcrTensor *target_lengths, const OcrTensor *input_lengths,
                                            CtcParams p) {
    double *scratch;
    CudaCtx ctx =
        ctc_enqueue(&scratch, losses, loss, dlogits, infeasible, logits, targets, target_lengths, input_lengths, p);
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    OCR_CUDA_CHECK(cudaStreamIsCapturing(ctx.stream, &cap));
    if (cap != cudaStreamCaptureStatusNone) return NAN;
    double reduced = 0.0;
    OCR_CUDA_CHECK(cudaMemcpyAsync(&reduced, scratch, sizeof reduced, cudaMemcpyDeviceToHost, ctx.stream));
    OCR_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    return reduced;
}

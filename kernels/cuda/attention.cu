// The multi-head attention cores on the GPU (self-attention on qkv; cross-attention on q and kv,
// read through the same kernels with other strides: AttnIO), and the local mixer's additive mask
// (attention_local_mask).
//
// One fused kernel per direction, one block per (batch, head), everything in
// fp32 whatever the storage dtypes (the CPU computes S, P and P' in fp32 too):
//   forward:  K and V of the head go to shared memory (or, when they do not fit, to a
//             block-private slice of scratch); each warp takes query rows: S row = scale·q·kᵀ
//             + mask, softmax, probs (pre-dropout) stored, dropout factors applied, o = P'·v.
//   backward: Q, K, V, dO of the head in shared memory (or scratch); each warp takes rows i:
//             dP = (dO·vᵀ)·factor, P' = P·factor, dS = P ⊙ (dP − Σ dP·P), dQ_i = scale·dS_i·K;
//             then each warp takes key rows j: dV_j = Σ_i P'_ij dO_i, dK_j = scale·Σ_i dS_ij Q_i.
//             P' and dS (T×T per head) live in scratch.
// Every output element is written by one thread in a fixed order: deterministic.
// Dropout draws use the CPU's indices: element (b, h, i, j) of P draws at
// offset + ((b·H + h)·Tq + i)·Tk + j from (seed, stream).
#include <math.h>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_ops.h"

#define ATT_WARPS 4
#define ATT_THREADS (ATT_WARPS * 32)

struct AttnDrop {
    float p, keep_scale, infer_factor;
    int active;  // training with p > 0: draw masks
    uint64_t seed, stream, offset;
    const uint64_t *step_src;  // graph replay: + (*step_src << 32) (train_step.h)
};

static AttnDrop attn_drop(const DropoutParams &d, int device) {
    AttnDrop a;
    const int upscale = d.mode == OCR_DROPOUT_UPSCALE_IN_TRAIN;
    a.p = d.p;
    a.active = d.training && d.p > 0.0f;
    a.keep_scale = d.p >= 1.0f ? 0.0f : (upscale ? 1.0f / (1.0f - d.p) : 1.0f);
    // Inference (or p = 0): identity, except downscale-in-infer multiplies by 1 − p.
    a.infer_factor = (!d.training && !upscale && d.p > 0.0f) ? 1.0f - d.p : 1.0f;
    a.seed = d.seed;
    a.stream = d.stream;
    a.offset = d.offset;
    a.step_src = ocr_cuda_dropout_step_source(device);
    return a;
}

// The factor P entry `idx` (its index within probs) is multiplied by.
__device__ __forceinline__ float attn_factor(const AttnDrop &d, uint64_t idx) {
    if (!d.active) return d.infer_factor;
    const uint64_t base = d.step_src ? d.offset + (*d.step_src << 32) : d.offset;
    return u32_to_uniform(philox_u32(d.seed, d.stream, base + idx)) >= d.p ? d.keep_scale : 0.0f;
}

// Where a head's rows live (the CPU's AttnIO): q rows of the q tensor (row stride ldq, column
// offset q_off), k and v rows of the kv tensor (row stride ldkv, offsets k_off and v_off); self-
// attention passes qkv as both with strides 3C and offsets 0, C, 2C. Head h adds h·D columns.
struct AttnIO {
    int Tq, Tk, C, H, D;
    int64_t ldq, ldkv, q_off, k_off, v_off;
};

struct AttnFwdArgs {
    void *out;
    int out_dt;
    void *probs;  // NULL: not stored
    int probs_dt;
    const void *q;
    int q_dt;
    const void *kv;
    int kv_dt;
    const float *mask;  // (Tq, Tk) or NULL
    float *kv_global;   // NULL: K, V in shared memory; else 2·Tk·D floats per block
    AttnIO io;
    float scale;
    AttnDrop drop;
};

extern __shared__ float att_smem[];

static __global__ void __launch_bounds__(ATT_THREADS) attention_forward_kernel(AttnFwdArgs a) {
    const AttnIO io = a.io;
    const int bh = blockIdx.x, b = bh / io.H, h = bh % io.H;
    const int Tq = io.Tq, Tk = io.Tk, D = io.D, C = io.C;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float *smem = att_smem;
    float *Ks, *Vs;
    if (a.kv_global) {
        Ks = a.kv_global + (size_t)bh * 2 * Tk * D;
    } else {
        Ks = smem;
        smem += 2 * Tk * D;
    }
    Vs = Ks + Tk * D;
    float *qbuf = smem + warp * (D + Tk);
    float *row = qbuf + D;
    const int64_t qbase = (int64_t)b * Tq * io.ldq + io.q_off + (int64_t)h * D;  // q of query 0 of this head
    const int64_t kvbase = (int64_t)b * Tk * io.ldkv + (int64_t)h * D;

    for (int e = threadIdx.x; e < Tk * D; e += blockDim.x) {
        const int j = e / D, d = e - j * D;
        Ks[e] = ld(a.kv, a.kv_dt, kvbase + j * io.ldkv + io.k_off + d);
        Vs[e] = ld(a.kv, a.kv_dt, kvbase + j * io.ldkv + io.v_off + d);
    }
    __syncthreads();

    for (int i = warp; i < Tq; i += ATT_WARPS) {
        for (int d = lane; d < D; d += 32) qbuf[d] = ld(a.q, a.q_dt, qbase + i * io.ldq + d);
        __syncwarp();
        float mx = -INFINITY;
        for (int j = lane; j < Tk; j += 32) {
            float s = 0.0f;
            for (int d = 0; d < D; d++) s += qbuf[d] * Ks[j * D + d];
            s = a.scale * s;
            if (a.mask) s += a.mask[(int64_t)i * Tk + j];
            row[j] = s;
            mx = fmaxf(mx, s);
        }
        mx = warp_max(mx);
        const uint64_t first = ((uint64_t)bh * Tq + i) * Tk;  // probs index of (i, 0)
        if (mx == -INFINITY) {  // fully masked row: attends to nothing
            for (int j = lane; j < Tk; j += 32) row[j] = 0.0f;
        } else {
            float sum = 0.0f;
            for (int j = lane; j < Tk; j += 32) {
                const float e = expf(row[j] - mx);
                row[j] = e;
                sum += e;
            }
            sum = warp_sum(sum);
            const float inv = 1.0f / sum;
            for (int j = lane; j < Tk; j += 32) row[j] *= inv;
        }
        for (int j = lane; j < Tk; j += 32) {
            if (a.probs) st(a.probs, a.probs_dt, (int64_t)(first + j), row[j]);
            row[j] *= attn_factor(a.drop, first + j);
        }
        __syncwarp();
        for (int d = lane; d < D; d += 32) {
            float o = 0.0f;
            for (int j = 0; j < Tk; j++) o += row[j] * Vs[j * D + d];
            st(a.out, a.out_dt, ((int64_t)b * Tq + i) * C + (int64_t)h * D + d, o);
        }
        __syncwarp();  // qbuf and row are rewritten for the next row
    }
}

struct AttnBwdArgs {
    void *dq;  // for self-attention dq and dkv are both dqkv
    int dq_dt;
    void *dkv;
    int dkv_dt;
    const void *dout;
    int dout_dt;
    const void *q;
    int q_dt;
    const void *kv;
    int kv_dt;
    const void *probs;
    int probs_dt;
    float *qkvo_global;  // NULL: Q, K, V, dO in shared memory; else (2·Tq + 2·Tk)·D floats per block
    float *mats;         // P' and dS: 2·Tq·Tk floats per block
    AttnIO io;
    float scale;
    AttnDrop drop;
};

static __global__ void __launch_bounds__(ATT_THREADS) attention_backward_kernel(AttnBwdArgs a) {
    const AttnIO io = a.io;
    const int bh = blockIdx.x, b = bh / io.H, h = bh % io.H;
    const int Tq = io.Tq, Tk = io.Tk, D = io.D, C = io.C;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float *Qs = a.qkvo_global ? a.qkvo_global + (size_t)bh * (2 * Tq + 2 * Tk) * D : att_smem;
    float *dOs = Qs + Tq * D, *Ks = dOs + Tq * D, *Vs = Ks + Tk * D;
    float *Pp = a.mats + (size_t)bh * 2 * Tq * Tk;
    float *dS = Pp + (size_t)Tq * Tk;
    const int64_t qbase = (int64_t)b * Tq * io.ldq + io.q_off + (int64_t)h * D;
    const int64_t kvbase = (int64_t)b * Tk * io.ldkv + (int64_t)h * D;
    const int64_t obase = (int64_t)b * Tq * C + (int64_t)h * D;

    for (int e = threadIdx.x; e < Tq * D; e += blockDim.x) {
        const int i = e / D, d = e - i * D;
        Qs[e] = ld(a.q, a.q_dt, qbase + i * io.ldq + d);
        dOs[e] = ld(a.dout, a.dout_dt, obase + (int64_t)i * C + d);
    }
    for (int e = threadIdx.x; e < Tk * D; e += blockDim.x) {
        const int j = e / D, d = e - j * D;
        Ks[e] = ld(a.kv, a.kv_dt, kvbase + j * io.ldkv + io.k_off + d);
        Vs[e] = ld(a.kv, a.kv_dt, kvbase + j * io.ldkv + io.v_off + d);
    }
    __syncthreads();

    // Query rows i: dP, P', dS, dQ.
    for (int i = warp; i < Tq; i += ATT_WARPS) {
        const uint64_t first = ((uint64_t)bh * Tq + i) * Tk;
        float dot = 0.0f;
        for (int j = lane; j < Tk; j += 32) {
            const float P = ld(a.probs, a.probs_dt, (int64_t)(first + j));
            float dp = 0.0f;
            for (int d = 0; d < D; d++) dp += dOs[i * D + d] * Vs[j * D + d];
            const float f = attn_factor(a.drop, first + j);
            dp *= f;
            Pp[(size_t)i * Tk + j] = P * f;
            dS[(size_t)i * Tk + j] = dp;
            dot += dp * P;
        }
        dot = warp_sum(dot);
        for (int j = lane; j < Tk; j += 32) {
            const float P = ld(a.probs, a.probs_dt, (int64_t)(first + j));
            dS[(size_t)i * Tk + j] = P * (dS[(size_t)i * Tk + j] - dot);
        }
        __syncwarp();
        for (int d = lane; d < D; d += 32) {
            float acc = 0.0f;
            for (int j = 0; j < Tk; j++) acc += dS[(size_t)i * Tk + j] * Ks[j * D + d];
            st(a.dq, a.dq_dt, qbase + i * io.ldq + d, a.scale * acc);
        }
    }
    __syncthreads();

    // Key rows j: dV, dK.
    for (int j = warp; j < Tk; j += ATT_WARPS) {
        for (int d = lane; d < D; d += 32) {
            float av = 0.0f, ak = 0.0f;
            for (int i = 0; i < Tq; i++) {
                av += Pp[(size_t)i * Tk + j] * dOs[i * D + d];
                ak += dS[(size_t)i * Tk + j] * Qs[i * D + d];
            }
            st(a.dkv, a.dkv_dt, kvbase + j * io.ldkv + io.k_off + d, a.scale * ak);
            st(a.dkv, a.dkv_dt, kvbase + j * io.ldkv + io.v_off + d, av);
        }
    }
}

struct AttnShape {
    int64_t B, T, C, H, D;
};

static AttnShape attn_shape(const OcrTensor *qkv, int num_heads) {
    OCR_ASSERT(qkv->ndim == 3, "attention: qkv must be (B, T, 3C)");
    AttnShape s = {qkv->shape[0], qkv->shape[1], qkv->shape[2] / 3, num_heads, 0};
    OCR_ASSERT(s.C * 3 == qkv->shape[2] && num_heads > 0 && s.C % num_heads == 0,
               "attention: qkv last dim %lld is not 3·heads·head_dim (heads %d)", (long long)qkv->shape[2], num_heads);
    s.D = s.C / s.H;
    return s;
}

// The kernels' int indexing: every size fits.
static void check_sizes(int64_t B, int64_t Tq, int64_t Tk, int64_t C, int64_t H, int64_t D) {
    OCR_ASSERT(Tq <= (1 << 20) && Tk <= (1 << 20) && C <= (1 << 24) && B * H <= 0x7fffffff &&
                   2 * (Tq + Tk) * D <= 0x7fffffff,
               "attention: sizes too large");
}

static AttnIO io_self(const AttnShape &s) {
    AttnIO io;
    io.Tq = io.Tk = (int)s.T, io.C = (int)s.C, io.H = (int)s.H, io.D = (int)s.D;
    io.ldq = io.ldkv = 3 * s.C, io.q_off = 0, io.k_off = s.C, io.v_off = 2 * s.C;
    return io;
}

static AttnIO io_cross(const OcrTensor *q, const OcrTensor *kv, int num_heads, int64_t *B) {
    OCR_ASSERT(q->ndim == 3 && kv->ndim == 3, "attention_cross: q must be (B, Tq, C) and kv (B, Tk, 2C)");
    const int64_t C = q->shape[2];
    OCR_ASSERT(kv->shape[0] == q->shape[0] && kv->shape[2] == 2 * C,
               "attention_cross: kv (%lld, %lld, %lld) does not pair with q (%lld, %lld, %lld)",
               (long long)kv->shape[0], (long long)kv->shape[1], (long long)kv->shape[2], (long long)q->shape[0],
               (long long)q->shape[1], (long long)C);
    OCR_ASSERT(num_heads > 0 && C % num_heads == 0, "attention_cross: C %lld is not a multiple of %d heads",
               (long long)C, num_heads);
    *B = q->shape[0];
    check_sizes(*B, q->shape[1], kv->shape[1], C, num_heads, C / num_heads);
    AttnIO io;
    io.Tq = (int)q->shape[1], io.Tk = (int)kv->shape[1], io.C = (int)C, io.H = num_heads, io.D = (int)(C / num_heads);
    io.ldq = C, io.ldkv = 2 * C, io.q_off = 0, io.k_off = 0, io.v_off = C;
    return io;
}

static void set_smem(const void *kernel, size_t bytes) {
    if (bytes > 48 * 1024)
        OCR_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

// The forward launch for q and kv laid out as io says.
static void forward_launch(CudaCtx ctx, OcrTensor *out, OcrTensor *probs, const OcrTensor *q, const OcrTensor *kv,
                           const OcrTensor *mask, int64_t B, const AttnIO &io, float scale,
                           const DropoutParams &dropout) {
    if (B * io.Tq == 0) return;
    AttnFwdArgs a;
    a.out = out->data;
    a.out_dt = out->dtype;
    a.probs = probs ? probs->data : NULL;
    a.probs_dt = probs ? probs->dtype : OCR_F32;
    a.q = q->data;
    a.q_dt = q->dtype;
    a.kv = kv->data;
    a.kv_dt = kv->dtype;
    a.mask = mask ? (const float *)mask->data : NULL;
    a.io = io;
    a.scale = scale;
    a.drop = attn_drop(dropout, ctx.device);
    const size_t rows_bytes = (size_t)ATT_WARPS * (size_t)(io.D + io.Tk) * sizeof(float);
    const size_t kv_bytes = 2 * (size_t)io.Tk * (size_t)io.D * sizeof(float);
    const size_t limit = (size_t)ocr_cuda_max_smem_optin(ctx);
    OCR_ASSERT(rows_bytes <= limit, "attention: Tk = %d, head_dim = %d need more shared memory than the GPU has",
               io.Tk, io.D);
    size_t smem = rows_bytes;
    a.kv_global = NULL;
    if (rows_bytes + kv_bytes <= limit) {
        smem += kv_bytes;
    } else {
        a.kv_global = (float *)ocr_cuda_scratch(ctx, (size_t)(B * io.H) * kv_bytes);
    }
    set_smem((const void *)attention_forward_kernel, smem);
    attention_forward_kernel<<<(unsigned)(B * io.H), ATT_THREADS, smem, ctx.stream>>>(a);
    OCR_CUDA_LAUNCHED();
}

static void backward_launch(CudaCtx ctx, OcrTensor *dq, OcrTensor *dkv, const OcrTensor *dout, const OcrTensor *q,
                            const OcrTensor *kv, const OcrTensor *probs, int64_t B, const AttnIO &io, float scale,
                            const DropoutParams &dropout) {
    if (B * io.Tq == 0) return;
    AttnBwdArgs a;
    a.dq = dq->data;
    a.dq_dt = dq->dtype;
    a.dkv = dkv->data;
    a.dkv_dt = dkv->dtype;
    a.dout = dout->data;
    a.dout_dt = dout->dtype;
    a.q = q->data;
    a.q_dt = q->dtype;
    a.kv = kv->data;
    a.kv_dt = kv->dtype;
    a.probs = probs->data;
    a.probs_dt = probs->dtype;
    a.io = io;
    a.scale = scale;
    a.drop = attn_drop(dropout, ctx.device);
    const size_t qkvo_bytes = 2 * (size_t)(io.Tq + io.Tk) * (size_t)io.D * sizeof(float);
    const size_t mats_bytes = 2 * (size_t)io.Tq * (size_t)io.Tk * sizeof(float);
    const size_t limit = (size_t)ocr_cuda_max_smem_optin(ctx);
    const int in_smem = qkvo_bytes <= limit;
    const size_t nbh = (size_t)(B * io.H);
    char *scratch = (char *)ocr_cuda_scratch(ctx, nbh * mats_bytes + (in_smem ? 0 : nbh * qkvo_bytes));
    a.mats = (float *)scratch;
    a.qkvo_global = in_smem ? NULL : (float *)(scratch + nbh * mats_bytes);
    const size_t smem = in_smem ? qkvo_bytes : 0;
    set_smem((const void *)attention_backward_kernel, smem);
    attention_backward_kernel<<<(unsigned)nbh, ATT_THREADS, smem, ctx.stream>>>(a);
    OCR_CUDA_LAUNCHED();
}

extern "C" void ocr_cuda_attention_forward(OcrTensor *out, OcrTensor *probs, const OcrTensor *qkv,
                                           const OcrTensor *mask, int num_heads, float scale, DropoutParams dropout) {
    CUDA_ASSERT_FLOAT(out);
    CUDA_ASSERT_FLOAT(qkv);
    AttnShape s = attn_shape(qkv, num_heads);
    const int64_t B = s.B, T = s.T, C = s.C, H = s.H, TT = s.T * s.T;
    check_sizes(B, T, T, C, H, s.D);
    OCR_ASSERT(ocr_tensor_numel(out) == B * T * C && ocr_tensor_dim(out, -1) == C, "attention: out must be (B, T, C)");
    if (probs) {
        CUDA_ASSERT_FLOAT(probs);
        OCR_ASSERT(ocr_tensor_numel(probs) == B * H * TT, "attention: probs must be (B, heads, T, T)");
    }
    if (mask)
        OCR_ASSERT(mask->dtype == OCR_F32 && mask->device.type == OCR_DEVICE_CUDA && ocr_tensor_numel(mask) == TT,
                   "attention: mask must be an f32 (T, T) CUDA tensor");
    CudaCtx ctx = ocr_cuda_enter(out);
    forward_launch(ctx, out, probs, qkv, qkv, mask, B, io_self(s), scale, dropout);
}

extern "C" void ocr_cuda_attention_backward(OcrTensor *dqkv, const OcrTensor *dout, const OcrTensor *qkv,
                                            const OcrTensor *probs, int num_heads, float scale, DropoutParams dropout) {
    if (!dqkv) return;
    CUDA_ASSERT_FLOAT(dqkv);
    CUDA_ASSERT_FLOAT(dout);
    CUDA_ASSERT_FLOAT(qkv);
    CUDA_ASSERT_FLOAT(probs);
    AttnShape s = attn_shape(qkv, num_heads);
    const int64_t B = s.B, T = s.T, C = s.C, H = s.H, TT = s.T * s.T;
    check_sizes(B, T, T, C, H, s.D);
    OCR_ASSERT(ocr_tensor_same_shape(dqkv, qkv), "attention_backward: dqkv must match qkv");
    OCR_ASSERT(ocr_tensor_numel(dout) == B * T * C, "attention_backward: dout must be (B, T, C)");
    OCR_ASSERT(ocr_tensor_numel(probs) == B * H * TT, "attention_backward: probs must be (B, heads, T, T)");
    CudaCtx ctx = ocr_cuda_enter(dqkv);
    backward_launch(ctx, dqkv, dqkv, dout, qkv, qkv, probs, B, io_self(s), scale, dropout);
}

extern "C" void ocr_cuda_attention_cross_forward(OcrTensor *out, OcrTensor *probs, const OcrTensor *q,
                                                 const OcrTensor *kv, int num_heads, float scale,
                                                 DropoutParams dropout) {
    CUDA_ASSERT_FLOAT(out);
    CUDA_ASSERT_FLOAT(q);
    CUDA_ASSERT_FLOAT(kv);
    int64_t B;
    const AttnIO io = io_cross(q, kv, num_heads, &B);
    OCR_ASSERT(ocr_tensor_same_shape(out, q), "attention_cross: out must be (B, Tq, C) like q");
    if (probs) {
        CUDA_ASSERT_FLOAT(probs);
        OCR_ASSERT(ocr_tensor_numel(probs) == B * io.H * (int64_t)io.Tq * io.Tk,
                   "attention_cross: probs must be (B, heads, Tq, Tk)");
    }
    CudaCtx ctx = ocr_cuda_enter(out);
    forward_launch(ctx, out, probs, q, kv, NULL, B, io, scale, dropout);
}

extern "C" void ocr_cuda_attention_cross_backward(OcrTensor *dq, OcrTensor *dkv, const OcrTensor *dout,
                                                  const OcrTensor *q, const OcrTensor *kv, const OcrTensor *probs,
                                                  int num_heads, float scale, DropoutParams dropout) {
    CUDA_ASSERT_FLOAT(dq);
    CUDA_ASSERT_FLOAT(dkv);
    CUDA_ASSERT_FLOAT(dout);
    CUDA_ASSERT_FLOAT(q);
    CUDA_ASSERT_FLOAT(kv);
    CUDA_ASSERT_FLOAT(probs);
    int64_t B;
    const AttnIO io = io_cross(q, kv, num_heads, &B);
    OCR_ASSERT(ocr_tensor_same_shape(dq, q) && ocr_tensor_same_shape(dkv, kv),
               "attention_cross_backward: dq and dkv must match q and kv");
    OCR_ASSERT(ocr_tensor_same_shape(dout, q), "attention_cross_backward: dout must be (B, Tq, C)");
    OCR_ASSERT(ocr_tensor_numel(probs) == B * io.H * (int64_t)io.Tq * io.Tk,
               "attention_cross_backward: probs must be (B, heads, Tq, Tk)");
    CudaCtx ctx = ocr_cuda_enter(dq);
    backward_launch(ctx, dq, dkv, dout, q, kv, probs, B, io, scale, dropout);
}

// ---- local attention mask ----------------------------------------------------------------------

#define MASK_THREADS 256

static __global__ void local_mask_kernel(float *m, int64_t T, int gw, int wh, int ww) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < T * T; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t q = i / T, k = i - q * T;
        const int64_t dh = k / gw - q / gw + wh / 2, dw = k % gw - q % gw + ww / 2;
        m[i] = (dh >= 0 && dh < wh && dw >= 0 && dw < ww) ? 0.0f : __int_as_float((int)0xff800000u);
    }
}

extern "C" void ocr_cuda_attention_local_mask(OcrTensor *mask, int grid_h, int grid_w, int window_h, int window_w) {
    const int64_t T = (int64_t)grid_h * grid_w;
    OCR_ASSERT(mask->device.type == OCR_DEVICE_CUDA && mask->dtype == OCR_F32 && mask->ndim == 2 &&
                   mask->shape[0] == T && mask->shape[1] == T,
               "attention_local_mask: mask must be a CUDA f32 (%lld, %lld) tensor", (long long)T, (long long)T);
    OCR_ASSERT(window_h > 0 && window_w > 0, "attention_local_mask: window %dx%d", window_h, window_w);
    if (T == 0) return;
    CudaCtx ctx = ocr_cuda_enter(mask);
    local_mask_kernel<<<cuda_blocks(T * T, MASK_THREADS), MASK_THREADS, 0, ctx.stream>>>((float *)mask->data, T,
                                                                                        grid_w, window_h, window_w);
    OCR_CUDA_LAUNCHED();
}

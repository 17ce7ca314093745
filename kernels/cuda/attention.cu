// The multi-head self-attention core on the GPU, and the local mixer's additive mask
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
// offset + ((b·H + h)·T + i)·T + j from (seed, stream).
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

struct AttnFwdArgs {
    void *out;
    int out_dt;
    void *probs;  // NULL: not stored
    int probs_dt;
    const void *qkv;
    int qkv_dt;
    const float *mask;  // (T, T) or NULL
    float *kv_global;   // NULL: K, V in shared memory; else 2·T·D floats per block
    int T, C, H, D;
    float scale;
    AttnDrop drop;
};

extern __shared__ float att_smem[];

static __global__ void __launch_bounds__(ATT_THREADS) attention_forward_kernel(AttnFwdArgs a) {
    const int bh = blockIdx.x, b = bh / a.H, h = bh % a.H;
    const int T = a.T, D = a.D, C = a.C;
    const int64_t C3 = 3 * (int64_t)C;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float *smem = att_smem;
    float *Ks, *Vs;
    if (a.kv_global) {
        Ks = a.kv_global + (size_t)bh * 2 * T * D;
    } else {
        Ks = smem;
        smem += 2 * T * D;
    }
    Vs = Ks + T * D;
    float *qbuf = smem + warp * (D + T);
    float *row = qbuf + D;
    const int64_t base = (int64_t)b * T * C3 + (int64_t)h * D;  // q of token 0 of this head

    for (int e = threadIdx.x; e < T * D; e += blockDim.x) {
        const int j = e / D, d = e - j * D;
        Ks[e] = ld(a.qkv, a.qkv_dt, base + j * C3 + C + d);
        Vs[e] = ld(a.qkv, a.qkv_dt, base + j * C3 + 2 * C + d);
    }
    __syncthreads();

    for (int i = warp; i < T; i += ATT_WARPS) {
        for (int d = lane; d < D; d += 32) qbuf[d] = ld(a.qkv, a.qkv_dt, base + i * C3 + d);
        __syncwarp();
        float mx = -INFINITY;
        for (int j = lane; j < T; j += 32) {
            float s = 0.0f;
            for (int d = 0; d < D; d++) s += qbuf[d] * Ks[j * D + d];
            s = a.scale * s;
            if (a.mask) s += a.mask[(int64_t)i * T + j];
            row[j] = s;
            mx = fmaxf(mx, s);
        }
        mx = warp_max(mx);
        const uint64_t first = ((uint64_t)bh * T + i) * T;  // probs index of (i, 0)
        if (mx == -INFINITY) {  // fully masked row: attends to nothing
            for (int j = lane; j < T; j += 32) row[j] = 0.0f;
        } else {
            float sum = 0.0f;
            for (int j = lane; j < T; j += 32) {
                const float e = expf(row[j] - mx);
                row[j] = e;
                sum += e;
            }
            sum = warp_sum(sum);
            const float inv = 1.0f / sum;
            for (int j = lane; j < T; j += 32) row[j] *= inv;
        }
        for (int j = lane; j < T; j += 32) {
            if (a.probs) st(a.probs, a.probs_dt, (int64_t)(first + j), row[j]);
            row[j] *= attn_factor(a.drop, first + j);
        }
        __syncwarp();
        for (int d = lane; d < D; d += 32) {
            float o = 0.0f;
            for (int j = 0; j < T; j++) o += row[j] * Vs[j * D + d];
            st(a.out, a.out_dt, ((int64_t)b * T + i) * C + (int64_t)h * D + d, o);
        }
        __syncwarp();  // qbuf and row are rewritten for the next row
    }
}

struct AttnBwdArgs {
    void *dqkv;
    int dqkv_dt;
    const void *dout;
    int dout_dt;
    const void *qkv;
    int qkv_dt;
    const void *probs;
    int probs_dt;
    float *qkvo_global;  // NULL: Q, K, V, dO in shared memory; else 4·T·D floats per block
    float *mats;         // P' and dS: 2·T·T floats per block
    int T, C, H, D;
    float scale;
    AttnDrop drop;
};

static __global__ void __launch_bounds__(ATT_THREADS) attention_backward_kernel(AttnBwdArgs a) {
    const int bh = blockIdx.x, b = bh / a.H, h = bh % a.H;
    const int T = a.T, D = a.D, C = a.C;
    const int64_t C3 = 3 * (int64_t)C;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float *Qs = a.qkvo_global ? a.qkvo_global + (size_t)bh * 4 * T * D : att_smem;
    float *Ks = Qs + T * D, *Vs = Ks + T * D, *dOs = Vs + T * D;
    float *Pp = a.mats + (size_t)bh * 2 * T * T;
    float *dS = Pp + (size_t)T * T;
    const int64_t base = (int64_t)b * T * C3 + (int64_t)h * D;
    const int64_t obase = (int64_t)b * T * C + (int64_t)h * D;

    for (int e = threadIdx.x; e < T * D; e += blockDim.x) {
        const int j = e / D, d = e - j * D;
        Qs[e] = ld(a.qkv, a.qkv_dt, base + j * C3 + d);
        Ks[e] = ld(a.qkv, a.qkv_dt, base + j * C3 + C + d);
        Vs[e] = ld(a.qkv, a.qkv_dt, base + j * C3 + 2 * C + d);
        dOs[e] = ld(a.dout, a.dout_dt, obase + (int64_t)j * C + d);
    }
    __syncthreads();

    // Rows i: dP, P', dS, dQ.
    for (int i = warp; i < T; i += ATT_WARPS) {
        const uint64_t first = ((uint64_t)bh * T + i) * T;
        float dot = 0.0f;
        for (int j = lane; j < T; j += 32) {
            const float P = ld(a.probs, a.probs_dt, (int64_t)(first + j));
            float dp = 0.0f;
            for (int d = 0; d < D; d++) dp += dOs[i * D + d] * Vs[j * D + d];
            const float f = attn_factor(a.drop, first + j);
            dp *= f;
            Pp[(size_t)i * T + j] = P * f;
            dS[(size_t)i * T + j] = dp;
            dot += dp * P;
        }
        dot = warp_sum(dot);
        for (int j = lane; j < T; j += 32) {
            const float P = ld(a.probs, a.probs_dt, (int64_t)(first + j));
            dS[(size_t)i * T + j] = P * (dS[(size_t)i * T + j] - dot);
        }
        __syncwarp();
        for (int d = lane; d < D; d += 32) {
            float acc = 0.0f;
            for (int j = 0; j < T; j++) acc += dS[(size_t)i * T + j] * Ks[j * D + d];
            st(a.dqkv, a.dqkv_dt, base + i * C3 + d, a.scale * acc);
        }
    }
    __syncthreads();

    // Key rows j: dV, dK.
    for (int j = warp; j < T; j += ATT_WARPS) {
        for (int d = lane; d < D; d += 32) {
            float av = 0.0f, ak = 0.0f;
            for (int i = 0; i < T; i++) {
                av += Pp[(size_t)i * T + j] * dOs[i * D + d];
                ak += dS[(size_t)i * T + j] * Qs[i * D + d];
            }
            st(a.dqkv, a.dqkv_dt, base + j * C3 + C + d, a.scale * ak);
            st(a.dqkv, a.dqkv_dt, base + j * C3 + 2 * C + d, av);
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
    OCR_ASSERT(s.T <= (1 << 20) && s.C <= (1 << 24) && s.B * s.H <= 0x7fffffff && 4 * s.T * s.D <= 0x7fffffff,
               "attention: sizes too large");
    return s;
}

static void set_smem(const void *kernel, size_t bytes) {
    if (bytes > 48 * 1024)
        OCR_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

extern "C" void ocr_cuda_attention_forward(OcrTensor *out, OcrTensor *probs, const OcrTensor *qkv,
                                           const OcrTensor *mask, int num_heads, float scale, DropoutParams dropout) {
    CUDA_ASSERT_FLOAT(out);
    CUDA_ASSERT_FLOAT(qkv);
    AttnShape s = attn_shape(qkv, num_heads);
    const int64_t B = s.B, T = s.T, C = s.C, H = s.H, D = s.D, TT = s.T * s.T;
    OCR_ASSERT(ocr_tensor_numel(out) == B * T * C && ocr_tensor_dim(out, -1) == C, "attention: out must be (B, T, C)");
    if (probs) {
        CUDA_ASSERT_FLOAT(probs);
        OCR_ASSERT(ocr_tensor_numel(probs) == B * H * TT, "attention: probs must be (B, heads, T, T)");
    }
    if (mask)
        OCR_ASSERT(mask->dtype == OCR_F32 && mask->device.type == OCR_DEVICE_CUDA && ocr_tensor_numel(mask) == TT,
                   "attention: mask must be an f32 (T, T) CUDA tensor");
    CudaCtx ctx = ocr_cuda_enter(out);
    if (B * T == 0) return;
    AttnFwdArgs a;
    a.out = out->data;
    a.out_dt = out->dtype;
    a.probs = probs ? probs->data : NULL;
    a.probs_dt = probs ? probs->dtype : OCR_F32;
    a.qkv = qkv->data;
    a.qkv_dt = qkv->dtype;
    a.mask = mask ? (const float *)mask->data : NULL;
    a.T = (int)T, a.C = (int)C, a.H = (int)H, a.D = (int)D;
    a.scale = scale;
    a.drop = attn_drop(dropout, ctx.device);
    const size_t rows_bytes = (size_t)ATT_WARPS * (size_t)(D + T) * sizeof(float);
    const size_t kv_bytes = 2 * (size_t)T * (size_t)D * sizeof(float);
    const size_t limit = (size_t)ocr_cuda_max_smem_optin(ctx);
    OCR_ASSERT(rows_bytes <= limit, "attention: T = %lld, head_dim = %lld need more shared memory than the GPU has",
               (long long)T, (long long)D);
    size_t smem = rows_bytes;
    a.kv_global = NULL;
    if (rows_bytes + kv_bytes <= limit) {
        smem += kv_bytes;
    } else {
        a.kv_global = (float *)ocr_cuda_scratch(ctx, (size_t)(B * H) * kv_bytes);
    }
    set_smem((const void *)attention_forward_kernel, smem);
    attention_forward_kernel<<<(unsigned)(B * H), ATT_THREADS, smem, ctx.stream>>>(a);
    OCR_CUDA_LAUNCHED();
}

extern "C" void ocr_cuda_attention_backward(OcrTensor *dqkv, const OcrTensor *dout, const OcrTensor *qkv,
                                            const OcrTensor *probs, int num_heads, float scale, DropoutParams dropout) {
    if (!dqkv) return;
    CUDA_ASSERT_FLOAT(dqkv);
    CUDA_ASSERT_FLOAT(dout);
    CUDA_ASSERT_FLOAT(qkv);
    CUDA_ASSERT_FLOAT(probs);
    AttnShape s = attn_shape(qkv, num_heads);
    const int64_t B = s.B, T = s.T, C = s.C, H = s.H, D = s.D, TT = s.T * s.T;
    OCR_ASSERT(ocr_tensor_same_shape(dqkv, qkv), "attention_backward: dqkv must match qkv");
    OCR_ASSERT(ocr_tensor_numel(dout) == B * T * C, "attention_backward: dout must be (B, T, C)");
    OCR_ASSERT(ocr_tensor_numel(probs) == B * H * TT, "attention_backward: probs must be (B, heads, T, T)");
    CudaCtx ctx = ocr_cuda_enter(dqkv);
    if (B * T == 0) return;
    AttnBwdArgs a;
    a.dqkv = dqkv->data;
    a.dqkv_dt = dqkv->dtype;
    a.dout = dout->data;
    a.dout_dt = dout->dtype;
    a.qkv = qkv->data;
    a.qkv_dt = qkv->dtype;
    a.probs = probs->data;
    a.probs_dt = probs->dtype;
    a.T = (int)T, a.C = (int)C, a.H = (int)H, a.D = (int)D;
    a.scale = scale;
    a.drop = attn_drop(dropout, ctx.device);
    const size_t qkvo_bytes = 4 * (size_t)T * (size_t)D * sizeof(float);
    const size_t mats_bytes = 2 * (size_t)TT * sizeof(float);
    const size_t limit = (size_t)ocr_cuda_max_smem_optin(ctx);
    const int in_smem = qkvo_bytes <= limit;
    const size_t nbh = (size_t)(B * H);
    char *scratch = (char *)ocr_cuda_scratch(ctx, nbh * mats_bytes + (in_smem ? 0 : nbh * qkvo_bytes));
    a.mats = (float *)scratch;
    a.qkvo_global = in_smem ? NULL : (float *)(scratch + nbh * mats_bytes);
    const size_t smem = in_smem ? qkvo_bytes : 0;
    set_smem((const void *)attention_backward_kernel, smem);
    attention_backward_kernel<<<(unsigned)nbh, ATT_THREADS, smem, ctx.stream>>>(a);
    OCR_CUDA_LAUNCHED();
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

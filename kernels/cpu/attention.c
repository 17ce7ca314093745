// Multi-head attention cores (CPU): per (batch, head) two products around an fp32 softmax, for
// self-attention (q, k, v from one qkv tensor) and cross-attention (q from the decoder, k and v
// from the encoder's memory); and the local mixer's additive mask (attention_local_mask).
//
// q, k and v are read in place: from qkv (B, T, 3C) with leading dimension 3C, or from q (B, Tq, C)
// and kv (B, Tk, 2C) (AttnIO), so nothing is copied out per head. OpenMP runs over (batch, head) (see ATTN_BLAS_THREADED_MACS); each
// thread owns its T×T fp32 buffers, and those heads' products run in the small-matrix loops
// (ocr_cpu_small_gemm) rather than one sgemm call each.
// f16/bf16 qkv (q, kv), out, dout and dqkv (dq, dkv) are read and written in their own dtype: a
// thread widens the (T, 3C) slice (the q and kv slices) of the batch element it is working on
// (once for all the heads it takes of it),
// and rounds each head's columns of its results once, instead of whole-tensor fp32 copies.
// The SGEMMs see the same operands with the same leading dimensions, so the results are the bits
// of the whole-tensor path, which Global.cpu_exact_numerics keeps as the reference.
// The dropout draw of probs element (b, h, i, j) has index offset + ((b·H + h)·Tq + i)·Tk + j.
#include <cblas.h>
#include <math.h>
#include <omp.h>

#include "core/rng.h"
#include "kernels/activation_math.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/ops.h"

// OpenBLAS (pthreads build) threads an sgemm of about this many multiply-adds or more. Such
// GEMMs run one (batch, head) at a time with BLAS's own threads; smaller ones run one per
// OpenMP thread, so the two thread pools never nest.
#define ATTN_BLAS_THREADED_MACS 262144
// Below this much total work a parallel region costs more than it saves.
#define ATTN_PAR_MIN_MACS 32768

typedef struct {
    int64_t B, T, C, H, D;
} AttnShape;

// One head's product c (M, N; row stride ldc) = alpha · op(a) · op(b), a and b row-major with
// leading dimensions lda and ldb. Heads small enough to run one per OpenMP thread take the
// small-matrix loops (sgemm's per-call overhead is most of the time there: an NRTR head is
// 11×11×32); larger ones, one at a time with BLAS's threads, take sgemm.
static void head_gemm(int small, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *a,
                      int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc, float *pack) {
    if (small) {
        ocr_cpu_small_gemm(c, ldc, a, ta ? 1 : lda, ta ? lda : 1, b, tb ? 1 : ldb, tb ? ldb : 1, M, N, K, alpha, pack);
        return;
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K,
                alpha, a, (int)lda, b, (int)ldb, 0.0f, c, (int)ldc);
}

static AttnShape attn_shape(const OcrTensor *qkv, int num_heads) {
    OCR_ASSERT(qkv->ndim == 3, "attention: qkv must be (B, T, 3C)");
    AttnShape s = {qkv->shape[0], qkv->shape[1], qkv->shape[2] / 3, num_heads, 0};
    OCR_ASSERT(s.C * 3 == qkv->shape[2] && num_heads > 0 && s.C % num_heads == 0,
               "attention: qkv last dim %lld is not 3·heads·head_dim (heads %d)", (long long)qkv->shape[2], num_heads);
    s.D = s.C / s.H;
    return s;
}

// Factor applied to P (and dP') per element: ocr_cpu_dropout_factors (dropout.c's keep masks, whole
// 64-draw groups as vectors), keep/(1 − p), keep, or a constant in inference.
static int dropout_factors(float *mult, int64_t n, uint64_t first, const DropoutParams *d) {
    return ocr_cpu_dropout_factors(mult, n, first, d);
}

// One head's Tq rows of S (Tq × Tk) turned into softmax(S + mask) in place, mask (Tq × Tk) or NULL.
// The maximum, the exponentials and the scaling run as vector loops (vexpf, activation_math.h:
// within ~1e-7 relative of e^x, the same bits at every vector level; libm's expf is a scalar call
// per element, most of this op's time at T = 40); each row's sum is added in index order. An
// exponent below −87 (a masked entry, −inf, or a weight below 1.6e-38 of the row's largest) gives
// exactly 0, so masked entries stay exact zeros. A row masked everywhere attends to nothing.
CPU_INLINE void softmax_rows_body(float *P, const float *mk, int64_t Tq, int64_t Tk) {
    for (int64_t i = 0; i < Tq; i++) {
        float *row = P + i * Tk;
        if (mk)
            for (int64_t j = 0; j < Tk; j++) row[j] += mk[i * Tk + j];
        float mx = -INFINITY;
        for (int64_t j = 0; j < Tk; j++) mx = row[j] > mx ? row[j] : mx;  // NaN never wins, as fmaxf
        if (mx == -INFINITY) {
            for (int64_t j = 0; j < Tk; j++) row[j] = 0.0f;
            continue;
        }
        for (int64_t j = 0; j < Tk; j++) {
            const float x = row[j] - mx;
            row[j] = ACT_SELECT(x < -87.0f, 0.0f, vexpf_unclamped(ACT_SELECT(x < -87.0f, -87.0f, x)));
        }
        float sum = 0.0f;
        for (int64_t j = 0; j < Tk; j++) sum += row[j];
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < Tk; j++) row[j] *= inv;
    }
}
CPU_VEC_CLONES(softmax_rows, (float *P, const float *mk, int64_t Tq, int64_t Tk), (P, mk, Tq, Tk))

// n values of t starting at element `first`, to/from fp32 (t of any float dtype).
static void slice_store(OcrTensor *t, int64_t first, const float *src, int64_t n) {
    switch (t->dtype) {
        case OCR_F32:
            for (int64_t k = 0; k < n; k++) ((float *)t->data)[first + k] = src[k];
            break;
        case OCR_F16: ocr_f32_to_f16_array((ocr_f16_t *)t->data + first, src, (size_t)n); break;
        default: ocr_f32_to_bf16_array((ocr_bf16_t *)t->data + first, src, (size_t)n); break;
    }
}

static void slice_load(float *dst, const OcrTensor *t, int64_t first, int64_t n) {
    switch (t->dtype) {
        case OCR_F32:
            for (int64_t k = 0; k < n; k++) dst[k] = ((const float *)t->data)[first + k];
            break;
        case OCR_F16: ocr_f16_to_f32_array(dst, (const ocr_f16_t *)t->data + first, (size_t)n); break;
        default: ocr_bf16_to_f32_array(dst, (const ocr_bf16_t *)t->data + first, (size_t)n); break;
    }
}

// Where a head's q, k and v rows live: self-attention reads all three from qkv (B, T, 3C) with
// row stride 3C at column offsets 0, C, 2C; cross-attention reads q from (B, Tq, C) and k, v from
// kv (B, Tk, 2C) at offsets 0 and C. Head h takes columns h·D.. of each.
typedef struct {
    int64_t B, Tq, Tk, C, H, D;
    int64_t ldq, ldkv;          // row strides of the q tensor and the kv tensor
    int64_t q_off, k_off, v_off;  // column offsets of q (in q's rows), k and v (in kv's rows)
    int same;                   // q and kv are one tensor (self-attention)
} AttnIO;

static AttnIO io_self(const AttnShape *s) {
    AttnIO io = {s->B, s->T, s->T, s->C, s->H, s->D, 3 * s->C, 3 * s->C, 0, s->C, 2 * s->C, 1};
    return io;
}

// The small-matrix loops' packed B operand, K · padded(N) floats, for the largest of the head
// products: (K, N) = (D, Tk) for S = q kᵀ and dP' = dO vᵀ, (Tk, D) for P'v and dS k, (Tq, D) for
// dV = P'ᵀ dO and dK = dSᵀ q.
static size_t head_pack_floats(const AttnIO *io) {
    const int64_t a = io->D * ocr_cpu_small_gemm_padded(io->Tk), pd = ocr_cpu_small_gemm_padded(io->D);
    const int64_t b = (io->Tk > io->Tq ? io->Tk : io->Tq) * pd;
    return (size_t)(a > b ? a : b);
}

static int io_parallel_over_heads(const AttnIO *io) {
    const int64_t per_head = io->Tq * io->Tk * io->D;
    return per_head < ATTN_BLAS_THREADED_MACS && io->B * io->H * per_head >= ATTN_PAR_MIN_MACS;
}

// out (B, Tq, C), probs (B, H, Tq, Tk) (NULL when no backward follows), q and kv as io says,
// mask (Tq, Tk) f32 or NULL.
static void attention_forward_io(OcrTensor *out, OcrTensor *probs, const OcrTensor *qt, const OcrTensor *kvt,
                                 const float *mk, const AttnIO *io, float scale, const DropoutParams *dropout) {
    const int64_t B = io->B, Tq = io->Tq, Tk = io->Tk, C = io->C, H = io->H, D = io->D, TT = Tq * Tk;
    if (B * Tq == 0) return;
    CpuScratch sc = {0};
    OcrTensor vq, vkv, vy;
    float *whole;
    const OcrTensor *Q = ocr_cpu_tiled_in(&sc, qt, &vq);
    const OcrTensor *KV = io->same ? Q : ocr_cpu_tiled_in(&sc, kvt, &vkv);
    OcrTensor *Y = ocr_cpu_tiled_out(&sc, out, &vy, 0, &whole);
    // Per thread: P and P' (Tq×Tk each), then the batch element's q, kv and out slices when they
    // are not f32 (f32 ones are used in place), then the small-matrix loops' packed operand.
    const int small = io_parallel_over_heads(io);
    const size_t qper = Q->dtype == OCR_F32 ? 0 : (size_t)(Tq * io->ldq);
    const size_t kvper = io->same || KV->dtype == OCR_F32 ? 0 : (size_t)(Tk * io->ldkv);
    const size_t yper = Y->dtype == OCR_F32 ? 0 : (size_t)(Tq * C);
    const size_t pper = small ? head_pack_floats(io) : 0;
    const size_t per = 2 * (size_t)TT + qper + kvper + yper + pper;
    int nthreads = omp_get_max_threads();
    float *bufs = ocr_cpu_scratch_floats(&sc, (size_t)nthreads * per);

#pragma omp parallel if (small)
    {
        float *P = bufs + (size_t)omp_get_thread_num() * per;
        float *Pd = P + TT, *qb = Pd + TT, *kvb = qb + qper, *yb = kvb + kvper, *pack = yb + yper;
        int64_t held = -1;  // the batch element whose slices qb and kvb hold
#pragma omp for schedule(static)
        for (int64_t bh = 0; bh < B * H; bh++) {
            int64_t b = bh / H, h = bh % H;
            if (held != b) {
                if (qper) ocr_cpu_rows_in(Q, Tq * io->ldq, b, 1, qb);
                if (kvper) ocr_cpu_rows_in(KV, Tk * io->ldkv, b, 1, kvb);
                held = b;
            }
            const float *xq = qper ? qb : (const float *)Q->data + b * Tq * io->ldq;
            const float *xkv = io->same ? xq : kvper ? kvb : (const float *)KV->data + b * Tk * io->ldkv;
            float *y = yper ? yb : (float *)Y->data + b * Tq * C;
            const float *q = xq + io->q_off + h * D;
            const float *k = xkv + io->k_off + h * D;
            const float *v = xkv + io->v_off + h * D;
            // S = scale · q kᵀ (Tq × Tk)
            head_gemm(small, 0, 1, Tq, Tk, D, scale, q, io->ldq, k, io->ldkv, P, Tk, pack);
            softmax_rows(P, mk, Tq, Tk);
            if (probs) slice_store(probs, bh * TT, P, TT);
            const float *Pv = P;
            if (dropout_factors(Pd, TT, (uint64_t)(bh * TT), dropout)) {
                for (int64_t e = 0; e < TT; e++) Pd[e] *= P[e];
                Pv = Pd;
            }
            // o = P' v (Tq × D), written into its head's columns of out
            head_gemm(small, 0, 0, Tq, D, Tk, 1.0f, Pv, Tk, v, io->ldkv, y + h * D, C, pack);
            if (yper)  // only this head's columns: another thread may hold the other heads of b
                for (int64_t i = 0; i < Tq; i++) slice_store(Y, (b * Tq + i) * C + h * D, y + i * C + h * D, D);
        }
    }
    if (whole) ocr_cpu_f32_store(out, whole);
    ocr_cpu_scratch_free(&sc);
}

// dq (as q) and dkv (as kv; the same tensor for self-attention) assigned from dout (B, Tq, C), q,
// kv and the saved probs (pre-dropout P).
static void attention_backward_io(OcrTensor *dqt, OcrTensor *dkvt, const OcrTensor *dout, const OcrTensor *qt,
                                  const OcrTensor *kvt, const OcrTensor *probs, const AttnIO *io, float scale,
                                  const DropoutParams *dropout) {
    const int64_t B = io->B, Tq = io->Tq, Tk = io->Tk, C = io->C, H = io->H, D = io->D, TT = Tq * Tk;
    if (B * Tq == 0) return;
    CpuScratch sc = {0};
    OcrTensor vq, vkv, vdy, vdq, vdkv;
    float *whole_q, *whole_kv = NULL;
    const OcrTensor *Q = ocr_cpu_tiled_in(&sc, qt, &vq);
    const OcrTensor *KV = io->same ? Q : ocr_cpu_tiled_in(&sc, kvt, &vkv);
    const OcrTensor *DY = ocr_cpu_tiled_in(&sc, dout, &vdy);
    OcrTensor *DQ = ocr_cpu_tiled_out(&sc, dqt, &vdq, 0, &whole_q);
    OcrTensor *DKV = io->same ? DQ : ocr_cpu_tiled_out(&sc, dkvt, &vdkv, 0, &whole_kv);
    // Per thread: three Tq×Tk buffers, then the batch element's q, kv, dout, dq and dkv slices
    // when they are not f32 (as in the forward), then the packed operand.
    const size_t qper = Q->dtype == OCR_F32 ? 0 : (size_t)(Tq * io->ldq);
    const size_t kvper = io->same || KV->dtype == OCR_F32 ? 0 : (size_t)(Tk * io->ldkv);
    const size_t gper = DY->dtype == OCR_F32 ? 0 : (size_t)(Tq * C);
    const size_t dqper = DQ->dtype == OCR_F32 ? 0 : (size_t)(Tq * io->ldq);
    const size_t dkvper = io->same || DKV->dtype == OCR_F32 ? 0 : (size_t)(Tk * io->ldkv);
    const int small = io_parallel_over_heads(io);
    const size_t pper = small ? head_pack_floats(io) : 0;
    const size_t per = 3 * (size_t)TT + qper + kvper + gper + dqper + dkvper + pper;
    int nthreads = omp_get_max_threads();
    float *bufs = ocr_cpu_scratch_floats(&sc, (size_t)nthreads * per);

#pragma omp parallel if (small)
    {
        float *P = bufs + (size_t)omp_get_thread_num() * per;
        float *F = P + TT;   // dropout factors, then P' = P · factor
        float *dP = F + TT;  // dP', then dP, then dS
        float *qb = dP + TT, *kvb = qb + qper, *gb = kvb + kvper, *dqb = gb + gper, *dkvb = dqb + dqper;
        float *pack = dkvb + dkvper;
        int64_t held = -1;  // the batch element whose slices qb, kvb and gb hold
#pragma omp for schedule(static)
        for (int64_t bh = 0; bh < B * H; bh++) {
            int64_t b = bh / H, h = bh % H;
            if (held != b) {
                if (qper) ocr_cpu_rows_in(Q, Tq * io->ldq, b, 1, qb);
                if (kvper) ocr_cpu_rows_in(KV, Tk * io->ldkv, b, 1, kvb);
                if (gper) ocr_cpu_rows_in(DY, Tq * C, b, 1, gb);
                held = b;
            }
            const float *xq = qper ? qb : (const float *)Q->data + b * Tq * io->ldq;
            const float *xkv = io->same ? xq : kvper ? kvb : (const float *)KV->data + b * Tk * io->ldkv;
            const float *dy = gper ? gb : (const float *)DY->data + b * Tq * C;
            float *dxq = dqper ? dqb : (float *)DQ->data + b * Tq * io->ldq;
            float *dxkv = io->same ? dxq : dkvper ? dkvb : (float *)DKV->data + b * Tk * io->ldkv;
            const float *q = xq + io->q_off + h * D;
            const float *k = xkv + io->k_off + h * D;
            const float *v = xkv + io->v_off + h * D;
            const float *dO = dy + h * D;
            float *dq = dxq + io->q_off + h * D;
            float *dk = dxkv + io->k_off + h * D;
            float *dv = dxkv + io->v_off + h * D;
            slice_load(P, probs, bh * TT, TT);
            // dP' = dO vᵀ (Tq × Tk)
            head_gemm(small, 0, 1, Tq, Tk, D, 1.0f, dO, C, v, io->ldkv, dP, Tk, pack);
            const float *Pv = P;
            if (dropout_factors(F, TT, (uint64_t)(bh * TT), dropout)) {
                // dP = dP' · factor, then F becomes P' = P · factor
                for (int64_t e = 0; e < TT; e++) {
                    dP[e] *= F[e];
                    F[e] *= P[e];
                }
                Pv = F;
            }
            // dV = P'ᵀ dO (Tk × D)
            head_gemm(small, 1, 0, Tk, D, Tq, 1.0f, Pv, Tk, dO, C, dv, io->ldkv, pack);
            // dS = P ⊙ (dP − Σ_j dP·P) per row
            for (int64_t i = 0; i < Tq; i++) {
                const float *pr = P + i * Tk;
                float *dr = dP + i * Tk;
                float dot = 0.0f;
                for (int64_t j = 0; j < Tk; j++) dot += dr[j] * pr[j];
                for (int64_t j = 0; j < Tk; j++) dr[j] = pr[j] * (dr[j] - dot);
            }
            // dQ = scale · dS k (Tq × D), dK = scale · dSᵀ q (Tk × D)
            head_gemm(small, 0, 0, Tq, D, Tk, scale, dP, Tk, k, io->ldkv, dq, io->ldq, pack);
            head_gemm(small, 1, 0, Tk, D, Tq, scale, dP, Tk, q, io->ldq, dk, io->ldkv, pack);
            // This head's columns only (another thread may hold the other heads of b).
            if (dqper)
                for (int64_t i = 0; i < Tq; i++) {
                    const int64_t col = i * io->ldq + io->q_off + h * D;
                    slice_store(DQ, b * Tq * io->ldq + col, dxq + col, D);
                }
            if (io->same ? dqper : dkvper)
                for (int64_t j = 0; j < Tk; j++)
                    for (int part = 0; part < 2; part++) {
                        const int64_t col = j * io->ldkv + (part ? io->v_off : io->k_off) + h * D;
                        slice_store(DKV, b * Tk * io->ldkv + col, dxkv + col, D);
                    }
        }
    }
    if (whole_q) ocr_cpu_f32_store(dqt, whole_q);
    if (whole_kv) ocr_cpu_f32_store(dkvt, whole_kv);
    ocr_cpu_scratch_free(&sc);
}

// out (B, T, C), probs (B, H, T, T) (may be NULL when no backward follows), qkv (B, T, 3C),
// mask (T, T) f32 or NULL.
void ocr_cpu_attention_forward(OcrTensor *out, OcrTensor *probs, const OcrTensor *qkv, const OcrTensor *mask,
                               int num_heads, float scale, DropoutParams dropout) {
    CPU_ASSERT_FLOAT(out);
    CPU_ASSERT_FLOAT(qkv);
    AttnShape s = attn_shape(qkv, num_heads);
    const int64_t B = s.B, T = s.T, C = s.C, H = s.H, TT = s.T * s.T;
    OCR_ASSERT(ocr_tensor_numel(out) == B * T * C && ocr_tensor_dim(out, -1) == C, "attention: out must be (B, T, C)");
    if (probs) {
        CPU_ASSERT_FLOAT(probs);
        OCR_ASSERT(ocr_tensor_numel(probs) == B * H * TT, "attention: probs must be (B, heads, T, T)");
    }
    const float *mk = NULL;
    if (mask) {
        OCR_ASSERT(mask->dtype == OCR_F32 && mask->device.type == OCR_DEVICE_CPU && ocr_tensor_numel(mask) == TT,
                   "attention: mask must be an f32 (T, T) CPU tensor");
        mk = mask->data;
    }
    const AttnIO io = io_self(&s);
    attention_forward_io(out, probs, qkv, qkv, mk, &io, scale, &dropout);
}

// dqkv (B, T, 3C) assigned from dout (B, T, C), qkv and the saved probs (pre-dropout P).
void ocr_cpu_attention_backward(OcrTensor *dqkv, const OcrTensor *dout, const OcrTensor *qkv, const OcrTensor *probs,
                                int num_heads, float scale, DropoutParams dropout) {
    if (!dqkv) return;
    CPU_ASSERT_FLOAT(dqkv);
    CPU_ASSERT_FLOAT(dout);
    CPU_ASSERT_FLOAT(qkv);
    CPU_ASSERT_FLOAT(probs);
    AttnShape s = attn_shape(qkv, num_heads);
    const int64_t B = s.B, T = s.T, C = s.C, H = s.H, TT = s.T * s.T;
    OCR_ASSERT(ocr_tensor_same_shape(dqkv, qkv), "attention_backward: dqkv must match qkv");
    OCR_ASSERT(ocr_tensor_numel(dout) == B * T * C, "attention_backward: dout must be (B, T, C)");
    OCR_ASSERT(ocr_tensor_numel(probs) == B * H * TT, "attention_backward: probs must be (B, heads, T, T)");
    const AttnIO io = io_self(&s);
    attention_backward_io(dqkv, dqkv, dout, qkv, qkv, probs, &io, scale, &dropout);
}

// Cross-attention's shapes: q (B, Tq, C), kv (B, Tk, 2C) = [k | v], C a multiple of num_heads.
static AttnIO io_cross(const OcrTensor *q, const OcrTensor *kv, int num_heads) {
    OCR_ASSERT(q->ndim == 3 && kv->ndim == 3, "attention_cross: q must be (B, Tq, C) and kv (B, Tk, 2C)");
    const int64_t B = q->shape[0], Tq = q->shape[1], C = q->shape[2], Tk = kv->shape[1];
    OCR_ASSERT(kv->shape[0] == B && kv->shape[2] == 2 * C,
               "attention_cross: kv (%lld, %lld, %lld) does not pair with q (%lld, %lld, %lld)",
               (long long)kv->shape[0], (long long)Tk, (long long)kv->shape[2], (long long)B, (long long)Tq,
               (long long)C);
    OCR_ASSERT(num_heads > 0 && C % num_heads == 0, "attention_cross: C %lld is not a multiple of %d heads",
               (long long)C, num_heads);
    AttnIO io = {B, Tq, Tk, C, num_heads, C / num_heads, C, 2 * C, 0, 0, C, 0};
    return io;
}

void ocr_cpu_attention_cross_forward(OcrTensor *out, OcrTensor *probs, const OcrTensor *q, const OcrTensor *kv,
                                     int num_heads, float scale, DropoutParams dropout) {
    CPU_ASSERT_FLOAT(out);
    CPU_ASSERT_FLOAT(q);
    CPU_ASSERT_FLOAT(kv);
    const AttnIO io = io_cross(q, kv, num_heads);
    OCR_ASSERT(ocr_tensor_same_shape(out, q), "attention_cross: out must be (B, Tq, C) like q");
    if (probs) {
        CPU_ASSERT_FLOAT(probs);
        OCR_ASSERT(ocr_tensor_numel(probs) == io.B * io.H * io.Tq * io.Tk,
                   "attention_cross: probs must be (B, heads, Tq, Tk)");
    }
    attention_forward_io(out, probs, q, kv, NULL, &io, scale, &dropout);
}

void ocr_cpu_attention_cross_backward(OcrTensor *dq, OcrTensor *dkv, const OcrTensor *dout, const OcrTensor *q,
                                      const OcrTensor *kv, const OcrTensor *probs, int num_heads, float scale,
                                      DropoutParams dropout) {
    CPU_ASSERT_FLOAT(dq);
    CPU_ASSERT_FLOAT(dkv);
    CPU_ASSERT_FLOAT(dout);
    CPU_ASSERT_FLOAT(q);
    CPU_ASSERT_FLOAT(kv);
    CPU_ASSERT_FLOAT(probs);
    const AttnIO io = io_cross(q, kv, num_heads);
    OCR_ASSERT(ocr_tensor_same_shape(dq, q) && ocr_tensor_same_shape(dkv, kv),
               "attention_cross_backward: dq and dkv must match q and kv");
    OCR_ASSERT(ocr_tensor_same_shape(dout, q), "attention_cross_backward: dout must be (B, Tq, C)");
    OCR_ASSERT(ocr_tensor_numel(probs) == io.B * io.H * io.Tq * io.Tk,
               "attention_cross_backward: probs must be (B, heads, Tq, Tk)");
    attention_backward_io(dq, dkv, dout, q, kv, probs, &io, scale, &dropout);
}

// ---- local attention mask ----------------------------------------------------------------------

// Below this many mask elements a parallel region costs more than it saves.
#define LOCAL_MASK_PAR_MIN 32768

void ocr_cpu_attention_local_mask(OcrTensor *mask, int grid_h, int grid_w, int window_h, int window_w) {
    const int64_t T = (int64_t)grid_h * grid_w;
    OCR_ASSERT(mask->device.type == OCR_DEVICE_CPU && mask->dtype == OCR_F32 && mask->ndim == 2 &&
                   mask->shape[0] == T && mask->shape[1] == T,
               "attention_local_mask: mask must be a CPU f32 (%lld, %lld) tensor", (long long)T, (long long)T);
    OCR_ASSERT(window_h > 0 && window_w > 0, "attention_local_mask: window %dx%d", window_h, window_w);
    float *m = mask->data;
#pragma omp parallel for schedule(static) if (T * T >= LOCAL_MASK_PAR_MIN)
    for (int64_t q = 0; q < T; q++) {
        const int64_t qh = q / grid_w, qw = q % grid_w;
        for (int64_t k = 0; k < T; k++) {
            const int64_t dh = k / grid_w - qh + window_h / 2, dw = k % grid_w - qw + window_w / 2;
            m[q * T + k] = (dh >= 0 && dh < window_h && dw >= 0 && dw < window_w) ? 0.0f : -INFINITY;
        }
    }
}

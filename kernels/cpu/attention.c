// Multi-head self-attention core (CPU): per (batch, head) two SGEMMs around an fp32 softmax; and
// the local mixer's additive mask (attention_local_mask).
//
// q, k and v are read in place from qkv (B, T, 3C) with leading dimension 3C, so nothing is
// copied out per head. OpenMP runs over (batch, head) (see ATTN_BLAS_THREADED_MACS); each
// thread owns its T×T fp32 buffers, and those heads' products run in the small-matrix loops
// (ocr_cpu_small_gemm) rather than one sgemm call each.
// f16/bf16 qkv, out, dout and dqkv are read and written in their own dtype: a thread widens the
// (T, 3C) slice of the batch element it is working on (once for all the heads it takes of it),
// and rounds each head's columns of its results once, instead of whole-tensor fp32 copies.
// The SGEMMs see the same operands with the same leading dimensions, so the results are the bits
// of the whole-tensor path, which Global.cpu_exact_numerics keeps as the reference.
// The dropout draw of probs element (b, h, i, j) has index offset + ((b·H + h)·T + i)·T + j.
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

static int attn_parallel_over_heads(const AttnShape *s) {
    int64_t per_head = s->T * s->T * s->D;
    return per_head < ATTN_BLAS_THREADED_MACS && s->B * s->H * per_head >= ATTN_PAR_MIN_MACS;
}

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

// The small-matrix loops' packed B operand, K · padded(N) floats, for the largest of the head
// products: (K, N) = (D, T) for S = q kᵀ and dP' = dO vᵀ, (T, D) for the other four.
static size_t head_pack_floats(int64_t T, int64_t D) {
    const int64_t a = D * ocr_cpu_small_gemm_padded(T), b = T * ocr_cpu_small_gemm_padded(D);
    return (size_t)(a > b ? a : b);
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

// One head's T rows of S (T × T) turned into softmax(S + mask) in place, mask (T × T) or NULL. The
// maximum, the exponentials and the scaling run as vector loops (vexpf, activation_math.h: within
// ~1e-7 relative of e^x, the same bits at every vector level; libm's expf is a scalar call per
// element, most of this op's time at T = 40); each row's sum is added in index order. An
// exponent below −87 (a masked entry, −inf, or a weight below 1.6e-38 of the row's largest) gives
// exactly 0, so masked entries stay exact zeros. A row masked everywhere attends to nothing.
CPU_INLINE void softmax_rows_body(float *P, const float *mk, int64_t T) {
    for (int64_t i = 0; i < T; i++) {
        float *row = P + i * T;
        if (mk)
            for (int64_t j = 0; j < T; j++) row[j] += mk[i * T + j];
        float mx = -INFINITY;
        for (int64_t j = 0; j < T; j++) mx = row[j] > mx ? row[j] : mx;  // NaN never wins, as fmaxf
        if (mx == -INFINITY) {
            for (int64_t j = 0; j < T; j++) row[j] = 0.0f;
            continue;
        }
        for (int64_t j = 0; j < T; j++) {
            const float x = row[j] - mx;
            row[j] = ACT_SELECT(x < -87.0f, 0.0f, vexpf_unclamped(ACT_SELECT(x < -87.0f, -87.0f, x)));
        }
        float sum = 0.0f;
        for (int64_t j = 0; j < T; j++) sum += row[j];
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < T; j++) row[j] *= inv;
    }
}
CPU_VEC_CLONES(softmax_rows, (float *P, const float *mk, int64_t T), (P, mk, T))

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

// out (B, T, C), probs (B, H, T, T) (may be NULL when no backward follows), qkv (B, T, 3C),
// mask (T, T) f32 or NULL.
void ocr_cpu_attention_forward(OcrTensor *out, OcrTensor *probs, const OcrTensor *qkv, const OcrTensor *mask,
                       int num_heads, float scale, DropoutParams dropout) {
    CPU_ASSERT_FLOAT(out);
    CPU_ASSERT_FLOAT(qkv);
    AttnShape s = attn_shape(qkv, num_heads);
    const int64_t B = s.B, T = s.T, C = s.C, H = s.H, D = s.D, TT = s.T * s.T;
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
    if (B * T == 0) return;
    CpuScratch sc = {0};
    OcrTensor vx, vy;
    float *whole;
    const OcrTensor *X = ocr_cpu_tiled_in(&sc, qkv, &vx);
    OcrTensor *Y = ocr_cpu_tiled_out(&sc, out, &vy, 0, &whole);
    // Per thread: P and P' (T×T each), then the batch element's qkv and out slices when they are
    // not f32 (f32 ones are used in place).
    // The small-matrix loops' packed operand (head_pack_floats).
    const int small = attn_parallel_over_heads(&s);
    const size_t xper = X->dtype == OCR_F32 ? 0 : (size_t)(T * 3 * C), yper = Y->dtype == OCR_F32 ? 0 : (size_t)(T * C);
    const size_t pper = small ? head_pack_floats(T, D) : 0;
    const size_t per = 2 * (size_t)TT + xper + yper + pper;
    int nthreads = omp_get_max_threads();
    float *bufs = ocr_cpu_scratch_floats(&sc, (size_t)nthreads * per);

#pragma omp parallel if (small)
    {
        float *P = bufs + (size_t)omp_get_thread_num() * per;
        float *Pd = P + TT, *xb = Pd + TT, *yb = xb + xper, *pack = yb + yper;
        int64_t held = -1;  // the batch element whose qkv slice xb holds
#pragma omp for schedule(static)
        for (int64_t bh = 0; bh < B * H; bh++) {
            int64_t b = bh / H, h = bh % H;
            if (xper && held != b) {
                ocr_cpu_rows_in(X, T * 3 * C, b, 1, xb);
                held = b;
            }
            const float *x = xper ? xb : (const float *)X->data + b * T * 3 * C;
            float *y = yper ? yb : (float *)Y->data + b * T * C;
            const float *q = x + h * D;
            const float *k = q + C;
            const float *v = q + 2 * C;
            // S = scale · q kᵀ (T × T)
            head_gemm(small, 0, 1, T, T, D, scale, q, 3 * C, k, 3 * C, P, T, pack);
            softmax_rows(P, mk, T);
            if (probs) slice_store(probs, bh * TT, P, TT);
            const float *Pv = P;
            if (dropout_factors(Pd, TT, (uint64_t)(bh * TT), &dropout)) {
                for (int64_t e = 0; e < TT; e++) Pd[e] *= P[e];
                Pv = Pd;
            }
            // o = P' v (T × D), written into its head's columns of out
            head_gemm(small, 0, 0, T, D, T, 1.0f, Pv, T, v, 3 * C, y + h * D, C, pack);
            if (yper)  // only this head's columns: another thread may hold the other heads of b
                for (int64_t i = 0; i < T; i++) slice_store(Y, (b * T + i) * C + h * D, y + i * C + h * D, D);
        }
    }
    if (whole) ocr_cpu_f32_store(out, whole);
    ocr_cpu_scratch_free(&sc);
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
    const int64_t B = s.B, T = s.T, C = s.C, H = s.H, D = s.D, TT = s.T * s.T;
    OCR_ASSERT(ocr_tensor_same_shape(dqkv, qkv), "attention_backward: dqkv must match qkv");
    OCR_ASSERT(ocr_tensor_numel(dout) == B * T * C, "attention_backward: dout must be (B, T, C)");
    OCR_ASSERT(ocr_tensor_numel(probs) == B * H * TT, "attention_backward: probs must be (B, heads, T, T)");
    if (B * T == 0) return;
    CpuScratch sc = {0};
    OcrTensor vx, vdy, vdx;
    float *whole;
    const OcrTensor *X = ocr_cpu_tiled_in(&sc, qkv, &vx);
    const OcrTensor *DY = ocr_cpu_tiled_in(&sc, dout, &vdy);
    OcrTensor *DX = ocr_cpu_tiled_out(&sc, dqkv, &vdx, 0, &whole);
    // Per thread: three T×T buffers, then the batch element's qkv, dout and dqkv slices when
    // they are not f32 (as in the forward).
    const size_t xper = X->dtype == OCR_F32 ? 0 : (size_t)(T * 3 * C);
    const size_t gper = DY->dtype == OCR_F32 ? 0 : (size_t)(T * C);
    const size_t dper = DX->dtype == OCR_F32 ? 0 : (size_t)(T * 3 * C);
    const int small = attn_parallel_over_heads(&s);
    const size_t pper = small ? head_pack_floats(T, D) : 0;
    const size_t per = 3 * (size_t)TT + xper + gper + dper + pper;
    int nthreads = omp_get_max_threads();
    float *bufs = ocr_cpu_scratch_floats(&sc, (size_t)nthreads * per);

#pragma omp parallel if (small)
    {
        float *P = bufs + (size_t)omp_get_thread_num() * per;
        float *F = P + TT;   // dropout factors, then P' = P · factor
        float *dP = F + TT;  // dP', then dP, then dS
        float *xb = dP + TT, *gb = xb + xper, *db = gb + gper, *pack = db + dper;
        int64_t held = -1;  // the batch element whose slices xb and gb hold
#pragma omp for schedule(static)
        for (int64_t bh = 0; bh < B * H; bh++) {
            int64_t b = bh / H, h = bh % H;
            if (held != b) {
                if (xper) ocr_cpu_rows_in(X, T * 3 * C, b, 1, xb);
                if (gper) ocr_cpu_rows_in(DY, T * C, b, 1, gb);
                held = b;
            }
            const float *x = xper ? xb : (const float *)X->data + b * T * 3 * C;
            const float *dy = gper ? gb : (const float *)DY->data + b * T * C;
            float *dx = dper ? db : (float *)DX->data + b * T * 3 * C;
            const float *q = x + h * D;
            const float *k = q + C;
            const float *v = q + 2 * C;
            const float *dO = dy + h * D;
            float *dq = dx + h * D;
            float *dk = dq + C;
            float *dv = dq + 2 * C;
            slice_load(P, probs, bh * TT, TT);
            // dP' = dO vᵀ (T × T)
            head_gemm(small, 0, 1, T, T, D, 1.0f, dO, C, v, 3 * C, dP, T, pack);
            const float *Pv = P;
            if (dropout_factors(F, TT, (uint64_t)(bh * TT), &dropout)) {
                // dP = dP' · factor, then F becomes P' = P · factor
                for (int64_t e = 0; e < TT; e++) {
                    dP[e] *= F[e];
                    F[e] *= P[e];
                }
                Pv = F;
            }
            // dV = P'ᵀ dO (T × D)
            head_gemm(small, 1, 0, T, D, T, 1.0f, Pv, T, dO, C, dv, 3 * C, pack);
            // dS = P ⊙ (dP − Σ_j dP·P) per row
            for (int64_t i = 0; i < T; i++) {
                const float *pr = P + i * T;
                float *dr = dP + i * T;
                float dot = 0.0f;
                for (int64_t j = 0; j < T; j++) dot += dr[j] * pr[j];
                for (int64_t j = 0; j < T; j++) dr[j] = pr[j] * (dr[j] - dot);
            }
            // dQ = scale · dS k, dK = scale · dSᵀ q (T × D each)
            head_gemm(small, 0, 0, T, D, T, scale, dP, T, k, 3 * C, dq, 3 * C, pack);
            head_gemm(small, 1, 0, T, D, T, scale, dP, T, q, 3 * C, dk, 3 * C, pack);
            if (dper)  // this head's dq, dk and dv columns only (as in the forward)
                for (int64_t i = 0; i < T; i++)
                    for (int part = 0; part < 3; part++) {
                        const int64_t col = i * 3 * C + part * C + h * D;
                        slice_store(DX, b * T * 3 * C + col, dx + col, D);
                    }
        }
    }
    if (whole) ocr_cpu_f32_store(dqkv, whole);
    ocr_cpu_scratch_free(&sc);
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

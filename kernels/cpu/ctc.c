// CTC loss on the CPU: see kernels/ctc.h for the semantics.
//
// Per sample, with L labels and the blank-extended label sequence l' of S = 2L+1 states
// (even states blank, state 2j+1 = label j):
//   1. one pass over each frame's C logits: max, exp(z − max) in fp32 (vectorised; kept
//      in the gradient row when a gradient is wanted) summed in double;
//   2. alpha in log space over (T_b, S) from the label log-probabilities lp(t, s);
//   3. beta in log space, two frames at a time, and at each frame the gradient
//      d nll / d z_c = softmax_c − Σ_{s: l'_s = c} exp(α_t(s) + β_t(s) − lp(t, s) + nll)
//      (α and β both include the frame's own lp, hence the − lp).
// The gradient rows are then scaled by the reduction's weight, the focal factor and
// grad_scale; the label classes are rewritten from double values so that the
// cancellation softmax − occupancy happens in double.
// dlogits may be the logits themselves (the trainer's gradient over its logits): step 1 reads
// a frame's logits before writing its exp terms over them, and nothing reads them afterwards.
// f16/bf16 tensors go through f32 a sample at a time (one T·C tile per thread), so the gradient
// is rounded once into dlogits' dtype, as a whole-tensor conversion would, with no B·T·C copy.
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/ctc.h"

#define CTC_NEG_INF (-INFINITY)

typedef union {
    float f;
    uint32_t u;
} CtcPunF;

// GCC treats the clamp's comparison as possibly trapping and then leaves the exp loop
// scalar; we never look at floating-point exception flags, so let it vectorise.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#endif

// e^x for x <= 0 in fp32, vectorisable (no calls, no branches): Cody-Waite reduction
// x = n·ln2 + r with |r| <= ln2/2 (ln2 split so that n·ln2_hi is exact), a degree-7 Taylor
// polynomial for e^r (truncation 5e-9), 2^n through the exponent bits. Within 2 ulp of
// e^x over [-87, 0]; below -87 (under 1.7e-38) it returns 0.
CPU_INLINE float ctc_expf_nonpos(float x) {
    const float shifter = 12582912.0f;  // 1.5·2^23: adding it rounds to an integer in the low bits
    float xc = x < -87.0f ? -87.0f : x;
    CtcPunF k;
    k.f = xc * 1.44269504f + shifter;
    float n = k.f - shifter;
    float r = xc - n * 0.693359375f - n * -2.12194440e-4f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    CtcPunF scale;  // the low bits of k.u hold n (two's complement); << 23 drops the shifter's bits
    scale.u = (k.u + 127u) << 23;
    float y = p * scale.f;
    return x < -87.0f ? 0.0f : y;
}

// e[c] = exp(z[c] − m) in fp32 and their sum in double. The sixteen partial sums (lane k takes
// the terms c ≡ k mod 16, folded in lane order) fix the summation order, so the result does not
// depend on how the compiler vectorises, and give the vector adds independent chains (four
// lanes had left the sum latency-bound); the sum is a separate loop because GCC leaves a fused
// loop with an in-order double sum scalar.
// Accuracy: z − m is rounded to fp32, so a term's relative error is about |z − m|·6e-8;
// weighted by the terms this is ~1e-7 on the sum for realistic rows.
#define CTC_SUM_LANES 16
CPU_INLINE double sum_lanes(const float *restrict e, int C) {
    double s[CTC_SUM_LANES] = {0};
    int c = 0;
    for (; c + CTC_SUM_LANES <= C; c += CTC_SUM_LANES)
        for (int k = 0; k < CTC_SUM_LANES; k++) s[k] += e[c + k];
    for (; c < C; c++) s[c % CTC_SUM_LANES] += e[c];
    double t = 0.0;
    for (int k = 0; k < CTC_SUM_LANES; k++) t += s[k];
    return t;
}

// Compiled for SSE2, AVX2 and AVX-512 (cpu_common.h: CPU_VEC_CLONES), the same bits at every
// level (no fused multiply-adds; the sum's sixteen lanes fix its order): at the baseline's 4 lanes
// these loops were most of the loss (~5 cycles per logit; 1,280 frames of 18,710 classes per
// PP-OCRv6 batch).
CPU_INLINE void exp_row_sum_v_body(double *sum, float *restrict e, const float *restrict z, int C, float m) {
    for (int c = 0; c < C; c++) e[c] = ctc_expf_nonpos(z[c] - m);
    *sum = sum_lanes(e, C);
}
CPU_VEC_CLONES(exp_row_sum_v, (double *sum, float *e, const float *z, int C, float m), (sum, e, z, C, m))
static double exp_row_sum(float *restrict e, const float *restrict z, int C, float m) {
    double sum;
    exp_row_sum_v(&sum, e, z, C, m);
    return sum;
}

// The same over the row itself (the gradient written over the logits): per element the same
// operations, so the same bits as exp_row_sum into another buffer.
CPU_INLINE void exp_row_sum_inplace_v_body(double *sum, float *restrict e, int C, float m) {
    for (int c = 0; c < C; c++) e[c] = ctc_expf_nonpos(e[c] - m);
    *sum = sum_lanes(e, C);
}
CPU_VEC_CLONES(exp_row_sum_inplace_v, (double *sum, float *e, int C, float m), (sum, e, C, m))
static double exp_row_sum_inplace(float *restrict e, int C, float m) {
    double sum;
    exp_row_sum_inplace_v(&sum, e, C, m);
    return sum;
}

// The frame's maximum (order-free) and the gradient row's scaling, at the CPU's width too.
CPU_INLINE void row_max_body(float *out, const float *restrict z, int C) {
    float mx = z[0];
#pragma omp simd reduction(max : mx)
    for (int c = 1; c < C; c++) mx = z[c] > mx ? z[c] : mx;
    *out = mx;
}
CPU_VEC_CLONES(row_max, (float *out, const float *z, int C), (out, z, C))
CPU_INLINE void row_scale_body(float *restrict g, int C, float sc) {
    for (int c = 0; c < C; c++) g[c] *= sc;
}
CPU_VEC_CLONES(row_scale, (float *g, int C, float sc), (g, C, sc))

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

static inline double log_add(double a, double b) {
    if (a < b) {
        double t = a;
        a = b;
        b = t;
    }
    if (b == CTC_NEG_INF) return a;
    return a + log1p(exp(b - a));
}

static inline double log_add3(double a, double b, double c) {
    double m = a > b ? a : b;
    if (c > m) m = c;
    if (m == CTC_NEG_INF) return CTC_NEG_INF;
    return m + log(exp(a - m) + exp(b - m) + exp(c - m));
}

int ocr_ctc_min_frames(const int32_t *target, int length) {
    int need = length;
    for (int j = 1; j < length; j++) need += target[j] == target[j - 1];
    return need;
}

// Per-thread scratch for one sample of up to Lmax labels and Tmax frames.
typedef struct {
    double *lp;     // (T, L+1): [t][0] = log p_t(blank), [t][1+j] = log p_t(target[j])
    double *alpha;  // (T, S)
    double *beta;   // (2, S)
    double *occ;    // (L+1) occupancy per distinct class, indexed like lp's columns
    double *inv_sum;  // (T) 1 / Σ exp(z − max) per frame
    float *erow;      // (C) exp terms of the current frame when there is no gradient row
    int *slot;      // (L+1) column of the first occurrence of the same class (dedup)
} CtcScratch;

static size_t ctc_scratch_doubles(int T, int C, int Lmax) {
    size_t S = 2 * (size_t)Lmax + 1;
    // erow (C floats) and slot (L+1 ints) are counted as doubles: a little slack, aligned.
    return (size_t)T * (Lmax + 1) + (size_t)T * S + 2 * S + (size_t)(Lmax + 1) + (size_t)T + (size_t)C +
           (size_t)(Lmax + 1);
}

static CtcScratch ctc_scratch_carve(double *base, int T, int C, int Lmax) {
    size_t S = 2 * (size_t)Lmax + 1;
    CtcScratch s;
    s.lp = base;
    s.alpha = s.lp + (size_t)T * (Lmax + 1);
    s.beta = s.alpha + (size_t)T * S;
    s.occ = s.beta + 2 * S;
    s.inv_sum = s.occ + (Lmax + 1);
    s.erow = (float *)(s.inv_sum + T);
    s.slot = (int *)(s.inv_sum + T + C);
    return s;
}

// Frame statistics: returns the log-sum-exp of the row and keeps exp(z − max) in e (the
// gradient row, or scratch; e == z overwrites the logits); *inv_sum receives 1/Σ.
static double frame_stats(float *e, const float *z, int C, double *inv_sum) {
    float mx;
    row_max(&mx, z, C);
    double sum = e == z ? exp_row_sum_inplace(e, C, mx) : exp_row_sum(e, z, C, mx);
    *inv_sum = 1.0 / sum;
    return (double)mx + log(sum);
}

// One sample. Writes the gradient rows (unscaled by w until the focal factor is known;
// see the caller) and returns nll (+inf when infeasible).
// g: (T, C) gradient rows of this sample or NULL; z: (T, C) logits. g == z is allowed: each
// frame's logits are read (max, label columns) before its row is overwritten, and nothing
// after step 1 reads them.
static double ctc_sample(float *g, const float *z, const int32_t *tgt, int L, int Tb, int T, int C,
                         const CtcScratch *w, double (*weight_fn)(double nll, void *ctx), void *ctx,
                         int zero_infinity) {
    const int S = 2 * L + 1;
    const int W = L + 1;  // lp columns
    if (g && Tb < T) memset(g + (size_t)Tb * C, 0, (size_t)(T - Tb) * C * sizeof(float));
    if (Tb == 0) return L == 0 ? 0.0 : INFINITY;

    // 1. Frame statistics and label log-probabilities. The label columns' logits are taken
    // before frame_stats may overwrite the row.
    for (int t = 0; t < Tb; t++) {
        const float *zr = z + (size_t)t * C;
        double *lpt = w->lp + (size_t)t * W;
        lpt[0] = (double)zr[0];
        for (int j = 0; j < L; j++) lpt[1 + j] = (double)zr[tgt[j]];
        double lse = frame_stats(g ? g + (size_t)t * C : w->erow, zr, C, &w->inv_sum[t]);
        for (int j = 0; j < W; j++) lpt[j] -= lse;
    }

    // 2. Alpha. State s uses lp column 0 (blank, even s) or 1 + (s−1)/2.
    double *al = w->alpha;
    for (int s = 0; s < S; s++) al[s] = CTC_NEG_INF;
    al[0] = w->lp[0];
    if (L > 0) al[1] = w->lp[1];
    for (int t = 1; t < Tb; t++) {
        const double *prev = al + (size_t)(t - 1) * S;
        double *cur = al + (size_t)t * S;
        const double *lpt = w->lp + (size_t)t * W;
        for (int s = 0; s < S; s++) {
            double a = prev[s];
            if (s >= 1) {
                if ((s & 1) && s >= 3 && tgt[(s - 1) / 2] != tgt[(s - 3) / 2])
                    a = log_add3(a, prev[s - 1], prev[s - 2]);
                else
                    a = log_add(a, prev[s - 1]);
            }
            cur[s] = a == CTC_NEG_INF ? CTC_NEG_INF : a + lpt[(s & 1) ? 1 + (s - 1) / 2 : 0];
        }
    }
    const double *last = al + (size_t)(Tb - 1) * S;
    double ll = L > 0 ? log_add(last[S - 1], last[S - 2]) : last[0];
    double nll = -ll;
    int feasible = ll != CTC_NEG_INF;
    if (!g) return nll;

    if (!feasible) {
        float fill = zero_infinity ? 0.0f : NAN;
        for (size_t i = 0; i < (size_t)Tb * C; i++) g[i] = fill;
        return nll;
    }
    double wt = weight_fn(nll, ctx);

    // Columns that repeat a class add their occupancy into the first column of that class.
    for (int j = 0; j < W; j++) {
        w->slot[j] = j;
        if (j == 0) continue;
        for (int k = 1; k < j; k++)
            if (tgt[k - 1] == tgt[j - 1]) {
                w->slot[j] = k;
                break;
            }
    }

    // 3. Beta, two rows alternating, and the gradient of each frame.
    double *b_cur = w->beta, *b_next = w->beta + S;
    for (int t = Tb - 1; t >= 0; t--) {
        const double *lpt = w->lp + (size_t)t * W;
        if (t == Tb - 1) {
            for (int s = 0; s < S; s++) b_cur[s] = CTC_NEG_INF;
            b_cur[S - 1] = lpt[0];               // ends in the final blank
            if (L > 0) b_cur[S - 2] = lpt[L];    // ends on the last label
        } else {
            for (int s = 0; s < S; s++) {
                double b = b_next[s];
                if (s + 1 < S) {
                    if ((s & 1) && s + 2 < S && tgt[(s - 1) / 2] != tgt[(s + 1) / 2])
                        b = log_add3(b, b_next[s + 1], b_next[s + 2]);
                    else
                        b = log_add(b, b_next[s + 1]);
                }
                b_cur[s] = b == CTC_NEG_INF ? CTC_NEG_INF : b + lpt[(s & 1) ? 1 + (s - 1) / 2 : 0];
            }
        }
        const double *at = al + (size_t)t * S;
        for (int j = 0; j < W; j++) w->occ[j] = 0.0;
        for (int s = 0; s < S; s++) {
            int col = (s & 1) ? 1 + (s - 1) / 2 : 0;
            double v = at[s] + b_cur[s];
            if (v == CTC_NEG_INF) continue;
            w->occ[w->slot[col]] += exp(v - lpt[col] + nll);
        }
        // Softmax row scaled by the weight, then the label classes recomputed in double.
        float *gr = g + (size_t)t * C;
        const float sc = (float)(wt * w->inv_sum[t]);
        row_scale(gr, C, sc);
        for (int j = 0; j < W; j++) {
            if (w->slot[j] != j) continue;
            int cls = j == 0 ? 0 : tgt[j - 1];
            double y = exp(lpt[j]);
            gr[cls] = (float)(wt * (y - w->occ[j]));
        }
        double *tmp = b_cur;
        b_cur = b_next;
        b_next = tmp;
    }
    return nll;
}

typedef struct {
    double base;  // grad_scale · reduction weight
    int focal;
} CtcWeightCtx;

static double focal_value(double nll) {
    double q = -expm1(-nll);  // 1 − e^(−nll)
    return nll * q * q;
}

// d ℓ / d nll · base, ℓ = nll·q², q = 1 − e^(−nll): q² + 2·nll·q·(1 − q).
static double ctc_weight(double nll, void *vctx) {
    const CtcWeightCtx *ctx = vctx;
    if (!ctx->focal) return ctx->base;
    double q = -expm1(-nll);
    return ctx->base * (q * q + 2.0 * nll * q * (1.0 - q));
}

static int max_target_length(const int32_t *tl, int B) {
    int m = 0;
    for (int b = 0; b < B; b++) m = tl[b] > m ? tl[b] : m;
    return m;
}

// A sample's rows pass through an f32 tile of T·C floats per thread when the gradient is
// low precision (computed in f32, rounded once into dlogits) or the logits are and there is no
// f32 gradient row to convert them into.
static int ctc_needs_tile(const OcrTensor *logits, const OcrTensor *dlogits) {
    return dlogits ? dlogits->dtype != OCR_F32 : logits->dtype != OCR_F32;
}

size_t ocr_ctc_loss_workspace_bytes(const OcrTensor *logits, const OcrTensor *dlogits, int max_target_length,
                                    int threads) {
    int64_t B = logits->shape[0], T = logits->shape[1], C = logits->shape[2];
    size_t bytes = (size_t)threads * ctc_scratch_doubles((int)T, (int)C, max_target_length) * sizeof(double) +
                   (size_t)B * sizeof(double);
    if (ctc_needs_tile(logits, dlogits)) bytes += (size_t)threads * (size_t)T * (size_t)C * sizeof(float);
    return bytes;
}

double ocr_cpu_ctc_loss_forward(OcrTensor *losses, OcrTensor *loss, OcrTensor *dlogits, OcrTensor *infeasible,
                        const OcrTensor *logits, const OcrTensor *targets, const OcrTensor *target_lengths,
                        const OcrTensor *input_lengths, CtcParams p) {
    CPU_ASSERT_FLOAT(logits);
    OCR_ASSERT(logits->ndim == 3, "logits must be (B, T, C)");
    const int B = (int)logits->shape[0], T = (int)logits->shape[1], C = (int)logits->shape[2];
    OCR_ASSERT(C >= 1 && T >= 0 && B >= 0);
    OCR_ASSERT(targets->device.type == OCR_DEVICE_CPU && targets->dtype == OCR_I32 && targets->ndim == 2 &&
                   targets->shape[0] == B,
               "targets must be a CPU (B, S) int32 tensor");
    const int Smax = (int)targets->shape[1];
    OCR_ASSERT(target_lengths->device.type == OCR_DEVICE_CPU && target_lengths->dtype == OCR_I32 &&
                   ocr_tensor_numel(target_lengths) == B,
               "target_lengths must be a CPU (B) int32 tensor");
    if (input_lengths)
        OCR_ASSERT(input_lengths->device.type == OCR_DEVICE_CPU && input_lengths->dtype == OCR_I32 &&
                       ocr_tensor_numel(input_lengths) == B,
                   "input_lengths must be a CPU (B) int32 tensor");
    if (losses) {
        OCR_ASSERT(losses->device.type == OCR_DEVICE_CPU && losses->dtype == OCR_F32 && ocr_tensor_numel(losses) == B,
                   "losses must be a CPU (B) f32 tensor");
    }
    if (loss)
        OCR_ASSERT(loss->device.type == OCR_DEVICE_CPU && loss->dtype == OCR_F32 && ocr_tensor_numel(loss) == 1,
                   "loss must be a CPU (1) f32 tensor");
    if (infeasible)
        OCR_ASSERT(infeasible->device.type == OCR_DEVICE_CPU && infeasible->dtype == OCR_I32 &&
                       ocr_tensor_numel(infeasible) == B,
                   "infeasible must be a CPU (B) int32 tensor");
    if (dlogits) {
        CPU_ASSERT_FLOAT(dlogits);
        OCR_ASSERT(ocr_tensor_same_shape(dlogits, logits), "dlogits must have logits' shape");
        // In place (the gradient over the logits) or apart: a partial overlap would let one
        // sample's gradient overwrite another's logits.
        const char *lo = logits->data, *go = dlogits->data;
        const size_t lb = ocr_tensor_bytes(logits), gb = ocr_tensor_bytes(dlogits);
        OCR_ASSERT((lo == go && logits->dtype == dlogits->dtype) || go + gb <= lo || lo + lb <= go,
                   "dlogits must be the logits themselves (same dtype) or not overlap them");
    }
    OCR_ASSERT(p.reduction >= OCR_CTC_REDUCTION_PADDLE && p.reduction <= OCR_CTC_REDUCTION_NONE);

    const int32_t *tg = targets->data, *tl = target_lengths->data;
    const int32_t *il = input_lengths ? input_lengths->data : NULL;
    for (int b = 0; b < B; b++) {
        OCR_ASSERT(tl[b] >= 0 && tl[b] <= Smax, "target_lengths[%d] = %d outside [0, %d]", b, tl[b], Smax);
        if (il) OCR_ASSERT(il[b] >= 0 && il[b] <= T, "input_lengths[%d] = %d outside [0, %d]", b, il[b], T);
        for (int j = 0; j < tl[b]; j++)
            OCR_ASSERT(tg[(size_t)b * Smax + j] >= 1 && tg[(size_t)b * Smax + j] < C,
                       "targets[%d][%d] = %d outside [1, %d) (0 is the blank)", b, j, tg[(size_t)b * Smax + j], C);
    }

    const float grad_scale = p.grad_scale == 0.0f ? 1.0f : p.grad_scale;
    const int Lmax = max_target_length(tl, B);
    const int nthreads = omp_get_max_threads();
    const size_t per_thread = ctc_scratch_doubles(T, C, Lmax);

    // Low-precision tensors are converted a sample at a time by the thread that owns it (into
    // its f32 dlogits rows, or a per-thread tile), never as a whole: no B·T·C f32 copy.
    const int in32 = logits->dtype == OCR_F32, out32 = dlogits && dlogits->dtype == OCR_F32;
    const int tiled = ctc_needs_tile(logits, dlogits);
    const size_t sample = (size_t)T * C;
    CpuScratch cs = {0};
    double *work = ocr_cpu_scratch_bytes(&cs, ((size_t)nthreads * per_thread + (size_t)B) * sizeof(double));
    double *nll_out = work + (size_t)nthreads * per_thread;
    float *tiles = tiled ? ocr_cpu_scratch_floats(&cs, (size_t)nthreads * sample) : NULL;

#pragma omp parallel num_threads(nthreads)
    {
        const int tid = omp_get_thread_num();
        CtcScratch w = ctc_scratch_carve(work + (size_t)tid * per_thread, T, C, Lmax);
#pragma omp for schedule(static)
        for (int b = 0; b < B; b++) {
            const int L = tl[b];
            const int Tb = il ? il[b] : T;
            const size_t off = (size_t)b * sample;
            double red = 1.0;
            if (p.reduction == OCR_CTC_REDUCTION_PADDLE) red = 1.0 / B;
            if (p.reduction == OCR_CTC_REDUCTION_MEAN) red = 1.0 / ((double)B * (L > 1 ? L : 1));
            CtcWeightCtx ctx = {red * grad_scale, p.use_focal_loss};
            const float *z;
            float *g;
            // The rows as one (1, n) strip each: ocr_cpu_rows_in/_out widen and round them as the
            // whole-tensor conversions would.
            if (tiled) {  // rows past Tb are never read; the gradient's are zeroed
                float *tile = tiles + (size_t)tid * sample;
                z = ocr_cpu_rows_in(logits, 1, (int64_t)off, (int64_t)Tb * C, tile);  // f32 logits: in place
                g = dlogits ? tile : NULL;
            } else if (in32) {
                z = (const float *)logits->data + off;
                g = dlogits ? (float *)dlogits->data + off : NULL;
            } else {  // low-precision logits, f32 gradient: converted into the gradient rows
                g = (float *)dlogits->data + off;
                z = ocr_cpu_rows_in(logits, 1, (int64_t)off, (int64_t)Tb * C, g);
            }
            nll_out[b] = ctc_sample(g, z, tg + (size_t)b * Smax, L, Tb, T, C, &w, ctc_weight, &ctx, p.zero_infinity);
            if (g && !out32) ocr_cpu_rows_out(dlogits, 1, (int64_t)off, (int64_t)sample, g);
        }
    }

    // Serial batch reduction: the same order whatever the thread count.
    double total = 0.0;
    for (int b = 0; b < B; b++) {
        double nll = nll_out[b];
        int bad = isinf(nll) != 0;
        if (infeasible) ((int32_t *)infeasible->data)[b] = bad;
        double l = bad && p.zero_infinity ? 0.0 : nll;
        if (p.use_focal_loss && !(bad && p.zero_infinity)) l = bad ? INFINITY : focal_value(l);
        if (losses) ((float *)losses->data)[b] = (float)l;
        if (p.reduction == OCR_CTC_REDUCTION_MEAN) l /= (tl[b] > 1 ? tl[b] : 1);
        total += l;
    }
    double reduced = total;
    if ((p.reduction == OCR_CTC_REDUCTION_PADDLE || p.reduction == OCR_CTC_REDUCTION_MEAN) && B > 0)
        reduced = total / B;
    if (loss) ((float *)loss->data)[0] = (float)reduced;

    ocr_cpu_scratch_free(&cs);
    return reduced;
}

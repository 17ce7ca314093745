// The distillation losses on the GPU (kernels/ops.h, "distillation losses"; the CPU twin is
// kernels/cpu/distill.c, the per-element formulas kernels/distill_math.h, compiled by both).
//
// Row losses: one warp per row loads fp32 and computes the log-sum-exps and the row's sums in
// double (warp trees), storing the row's value; one thread then adds the rows in row order into
// the loss, as the CPU does. Backward: the kept-row count first where a mask needs it, then one
// warp per row writes its gradient. The CTC-logit KL adds a thread per (sample, class) for the
// time means (steps added in order). The distance sums fixed chunks of 4096 elements, one block
// each (a fixed tree), then the chunks in order. No atomics: every result is deterministic.
#include <math.h>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_internal.h"
#include "kernels/distill_math.h"

#define DT_THREADS 256
#define DT_WPB (DT_THREADS / 32)
#define DT_CHUNK 4096

static __device__ __forceinline__ double warp_dmax(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// z_j = x_j·inv_t, column neg negated first, DISTILL_DKD_SHIFT taken from column sub (as the CPU's zval).
static __device__ __forceinline__ double dz_val(const void *x, int dt, int64_t base, int64_t j, double inv_t,
                                                int64_t neg, int64_t sub) {
    double v = (double)ld(x, dt, base + j);
    if (j == neg) v = -v;
    v *= inv_t;
    if (j == sub) v -= DISTILL_DKD_SHIFT;
    return v;
}

// Warp-wide log-sum-exp of the row at base.
static __device__ double dwarp_lse(const void *x, int dt, int64_t base, int64_t C, double inv_t, int64_t neg,
                                   int64_t sub, int lane) {
    double mx = -INFINITY;
    for (int64_t j = lane; j < C; j += 32) mx = fmax(mx, dz_val(x, dt, base, j, inv_t, neg, sub));
    mx = warp_dmax(mx);
    double s = 0.0;
    for (int64_t j = lane; j < C; j += 32) s += exp(dz_val(x, dt, base, j, inv_t, neg, sub) - mx);
    return mx + log(warp_sum(s));
}

#define FOR_WARP_ROWS(r, rows)                                                                            \
    const int lane = threadIdx.x & 31;                                                                    \
    for (int64_t r = (int64_t)blockIdx.x * DT_WPB + (threadIdx.x >> 5); r < (rows); r += (int64_t)gridDim.x * DT_WPB)

struct DtRows {
    const void *a, *b;
    int adt, bdt;
    int64_t rows, C;
    double inv_t;
};

static DtRows dt_rows(const OcrTensor *a, const OcrTensor *b, double inv_t, const char *op) {
    CUDA_ASSERT_FLOAT(a);
    CUDA_ASSERT_FLOAT(b);
    OCR_ASSERT(a->ndim >= 2 && ocr_tensor_same_shape(a, b), "%s: the two logits must have one shape of >= 2 dims", op);
    DtRows r;
    r.a = a->data;
    r.b = b->data;
    r.adt = a->dtype;
    r.bdt = b->dtype;
    r.C = ocr_tensor_dim(a, -1);
    r.rows = r.C ? ocr_tensor_numel(a) / r.C : 0;
    r.inv_t = inv_t;
    OCR_ASSERT(r.C >= 2, "%s: %lld classes (need at least 2)", op, (long long)r.C);
    return r;
}

static void dt_check_loss(const OcrTensor *loss, int64_t n, const char *op) {
    OCR_ASSERT(!loss || (loss->device.type == OCR_DEVICE_CUDA && loss->dtype == OCR_F32 && ocr_tensor_numel(loss) == n),
               "%s: loss must be %lld CUDA f32 value(s)", op, (long long)n);
}

static void dt_check_grad(const OcrTensor *g, const OcrTensor *like, const char *op) {
    if (!g) return;
    CUDA_ASSERT_FLOAT(g);
    OCR_ASSERT(ocr_tensor_same_shape(g, like), "%s: gradient and logits shapes differ", op);
}

static const int32_t *dt_targets(const OcrTensor *t, int64_t rows, int needed, const char *op) {
    if (!t) {
        OCR_ASSERT(!needed, "%s: targets are required", op);
        return NULL;
    }
    OCR_ASSERT(t->device.type == OCR_DEVICE_CUDA && t->dtype == OCR_I32 && ocr_tensor_numel(t) == rows,
               "%s: targets must be %lld CUDA int32 values", op, (long long)rows);
    return (const int32_t *)t->data;
}

static __device__ __forceinline__ bool dt_kept(const int32_t *t, int64_t n, int pad) {
    return pad < 0 || !t || t[n] != pad;
}

// den[0] = the kept rows (every row without a mask) as a double.
static __global__ void dt_count_kernel(double *den, const int32_t *t, int64_t rows, int pad) {
    __shared__ int64_t part[DT_THREADS];
    int64_t c = 0;
    for (int64_t n = threadIdx.x; n < rows; n += blockDim.x) c += dt_kept(t, n, pad);
    part[threadIdx.x] = c;
    __syncthreads();
    if (threadIdx.x == 0) {
        int64_t s = 0;
        for (int i = 0; i < (int)blockDim.x; i++) s += part[i];
        den[0] = (double)s;
    }
}

// loss[0] = mult · Σ_n row[n·stride + k] over k < parts weighted by w[k] / den (den <= 0: 0).
struct DtReduce {
    int64_t rows;
    int stride;
    double w0, w1, mult, den;  // den < 0: take the count from den_dev
};
static __global__ void dt_reduce_kernel(float *loss, const double *row, const double *den_dev, DtReduce a) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    double s0 = 0.0, s1 = 0.0;
    for (int64_t n = 0; n < a.rows; n++) {
        s0 += row[n * a.stride];
        if (a.stride > 1) s1 += row[n * a.stride + 1];
    }
    const double den = a.den >= 0 ? a.den : den_dev[0];
    loss[0] = den > 0 ? (float)(a.mult * (a.w0 * s0 + a.w1 * s1) / den) : 0.0f;
}

// ---- DML -------------------------------------------------------------------------------------

static __global__ void dml_fwd_kernel(double *row, DtRows a, int use_log) {
    FOR_WARP_ROWS(r, a.rows) {
        const int64_t base = r * a.C;
        const double l1 = dwarp_lse(a.a, a.adt, base, a.C, 1.0, -1, -1, lane);
        const double l2 = dwarp_lse(a.b, a.bdt, base, a.C, 1.0, -1, -1, lane);
        double acc = 0.0;
        for (int64_t j = lane; j < a.C; j += 32) {
            const double p1 = exp((double)ld(a.a, a.adt, base + j) - l1);
            const double p2 = exp((double)ld(a.b, a.bdt, base + j) - l2);
            acc += use_log ? dml_term(p1, p2) : kljs_term(p1, p2);
        }
        acc = warp_sum(acc);
        if (lane == 0) row[r] = acc;
    }
}

// KLJSLoss's per-sample mean: loss[i] = Σ of the sample's rows / (per·C).
static __global__ void dml_sample_kernel(float *loss, const double *row, int64_t B, int64_t per, int64_t C) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    for (int64_t i = 0; i < B; i++) {
        double s = 0.0;
        for (int64_t n = i * per; n < (i + 1) * per; n++) s += row[n];
        loss[i] = (float)(s / ((double)per * (double)C));
    }
}

static __global__ void dml_bwd_kernel(void *g1, int g1dt, void *g2, int g2dt, DtRows a, int use_log, double scale) {
    FOR_WARP_ROWS(r, a.rows) {
        const int64_t base = r * a.C;
        const double l1 = dwarp_lse(a.a, a.adt, base, a.C, 1.0, -1, -1, lane);
        const double l2 = dwarp_lse(a.b, a.bdt, base, a.C, 1.0, -1, -1, lane);
        double s1 = 0.0, s2 = 0.0;
        for (int64_t j = lane; j < a.C; j += 32) {
            const double p1 = exp((double)ld(a.a, a.adt, base + j) - l1);
            const double p2 = exp((double)ld(a.b, a.bdt, base + j) - l2);
            s1 += p1 * (use_log ? dml_dq1(p1, p2) : kljs_dq1(p1, p2));
            s2 += p2 * (use_log ? dml_dq1(p2, p1) : kljs_dq1(p2, p1));
        }
        s1 = warp_sum(s1);
        s2 = warp_sum(s2);
        for (int64_t j = lane; j < a.C; j += 32) {
            const double p1 = exp((double)ld(a.a, a.adt, base + j) - l1);
            const double p2 = exp((double)ld(a.b, a.bdt, base + j) - l2);
            if (g1) st(g1, g1dt, base + j, (float)(scale * p1 * ((use_log ? dml_dq1(p1, p2) : kljs_dq1(p1, p2)) - s1)));
            if (g2) st(g2, g2dt, base + j, (float)(scale * p2 * ((use_log ? dml_dq1(p2, p1) : kljs_dq1(p2, p1)) - s2)));
        }
    }
}

extern "C" void ocr_cuda_dml_loss_forward(OcrTensor *loss, const OcrTensor *x1, const OcrTensor *x2, DmlLossParams p) {
    DtRows a = dt_rows(x1, x2, 1.0, "dml_loss");
    const int64_t B = x1->shape[0];
    OCR_ASSERT(p.use_log || x1->ndim == 3, "dml_loss: use_log false (KLJSLoss) needs (B, T, C) inputs");
    dt_check_loss(loss, p.use_log ? 1 : B, "dml_loss");
    if (!loss) return;
    CudaCtx ctx = ocr_cuda_enter(x1);
    double *row = (double *)ocr_cuda_scratch(ctx, (size_t)(a.rows ? a.rows : 1) * sizeof(double));
    if (a.rows) {
        dml_fwd_kernel<<<cuda_blocks(a.rows, DT_WPB), DT_THREADS, 0, ctx.stream>>>(row, a, p.use_log);
        OCR_CUDA_LAUNCHED();
    }
    if (p.use_log) {
        DtReduce r = {a.rows, 1, 1.0, 0.0, 0.5, (double)B};
        dt_reduce_kernel<<<1, 32, 0, ctx.stream>>>((float *)loss->data, row, NULL, r);
    } else {
        dml_sample_kernel<<<1, 32, 0, ctx.stream>>>((float *)loss->data, row, B, B ? a.rows / B : 0, a.C);
    }
    OCR_CUDA_LAUNCHED();
}

extern "C" void ocr_cuda_dml_loss_backward(OcrTensor *dx1, OcrTensor *dx2, const OcrTensor *x1, const OcrTensor *x2,
                                           DmlLossParams p) {
    if (!dx1 && !dx2) return;
    DtRows a = dt_rows(x1, x2, 1.0, "dml_loss_backward");
    dt_check_grad(dx1, x1, "dml_loss_backward");
    dt_check_grad(dx2, x1, "dml_loss_backward");
    const int64_t B = x1->shape[0];
    OCR_ASSERT(p.use_log || x1->ndim == 3, "dml_loss_backward: use_log false (KLJSLoss) needs (B, T, C) inputs");
    const double scale =
        (double)p.grad_scale / (p.use_log ? 2.0 * (double)B : (double)(B ? a.rows / B : 1) * (double)a.C);
    CudaCtx ctx = ocr_cuda_enter(x1);
    if (!a.rows) return;
    dml_bwd_kernel<<<cuda_blocks(a.rows, DT_WPB), DT_THREADS, 0, ctx.stream>>>(
        opt_data(dx1), opt_dtype(dx1), opt_data(dx2), opt_dtype(dx2), a, p.use_log, scale);
    OCR_CUDA_LAUNCHED();
}

// ---- KL divergence ---------------------------------------------------------------------------

static __global__ void kl_fwd_kernel(double *row, DtRows a, const int32_t *t, int pad) {
    FOR_WARP_ROWS(r, a.rows) {
        if (!dt_kept(t, r, pad)) {
            if (lane == 0) row[r] = 0.0;
            continue;
        }
        const int64_t base = r * a.C;
        const double ls = dwarp_lse(a.a, a.adt, base, a.C, a.inv_t, -1, -1, lane);
        const double lt = dwarp_lse(a.b, a.bdt, base, a.C, a.inv_t, -1, -1, lane);
        double acc = 0.0;
        for (int64_t j = lane; j < a.C; j += 32)
            acc += kl_term(exp((double)ld(a.b, a.bdt, base + j) * a.inv_t - lt),
                           (double)ld(a.a, a.adt, base + j) * a.inv_t - ls);
        acc = warp_sum(acc);
        if (lane == 0) row[r] = acc;
    }
}

// scale_num / den[0] is the gradient's factor (den from dt_count_kernel, or `fixed` when >= 0).
static __global__ void kl_bwd_kernel(void *g, int gdt, DtRows a, const int32_t *t, int pad, double scale_num,
                                     const double *den_dev, double fixed) {
    const double den = fixed >= 0 ? fixed : den_dev[0];
    const double scale = den > 0 ? scale_num / den : 0.0;
    FOR_WARP_ROWS(r, a.rows) {
        const int64_t base = r * a.C;
        if (!dt_kept(t, r, pad) || scale == 0.0) {
            for (int64_t j = lane; j < a.C; j += 32) st(g, gdt, base + j, 0.0f);
            continue;
        }
        const double ls = dwarp_lse(a.a, a.adt, base, a.C, a.inv_t, -1, -1, lane);
        const double lt = dwarp_lse(a.b, a.bdt, base, a.C, a.inv_t, -1, -1, lane);
        double stt = 0.0;
        for (int64_t j = lane; j < a.C; j += 32) stt += exp((double)ld(a.b, a.bdt, base + j) * a.inv_t - lt);
        stt = warp_sum(stt);
        for (int64_t j = lane; j < a.C; j += 32)
            st(g, gdt, base + j,
               (float)(scale * (exp((double)ld(a.a, a.adt, base + j) * a.inv_t - ls) * stt -
                                exp((double)ld(a.b, a.bdt, base + j) * a.inv_t - lt))));
    }
}

extern "C" void ocr_cuda_kl_div_loss_forward(OcrTensor *loss, const OcrTensor *student, const OcrTensor *teacher,
                                             const OcrTensor *targets, KlDivLossParams p) {
    DtRows a = dt_rows(student, teacher, 1.0 / (double)p.temperature, "kl_div_loss");
    dt_check_loss(loss, 1, "kl_div_loss");
    const int32_t *t = dt_targets(targets, a.rows, p.pad_id >= 0, "kl_div_loss");
    if (!loss) return;
    CudaCtx ctx = ocr_cuda_enter(student);
    double *row = (double *)ocr_cuda_scratch(ctx, (size_t)(a.rows + 1) * sizeof(double));
    double *den = row + a.rows;
    if (a.rows) {
        kl_fwd_kernel<<<cuda_blocks(a.rows, DT_WPB), DT_THREADS, 0, ctx.stream>>>(row, a, t, p.pad_id);
        OCR_CUDA_LAUNCHED();
    }
    const double T = p.temperature;
    DtReduce r = {a.rows, 1, 1.0, 0.0, T * T, p.pad_id < 0 ? (double)student->shape[0] : -1.0};
    if (p.pad_id >= 0) {
        dt_count_kernel<<<1, DT_THREADS, 0, ctx.stream>>>(den, t, a.rows, p.pad_id);
        OCR_CUDA_LAUNCHED();
    }
    dt_reduce_kernel<<<1, 32, 0, ctx.stream>>>((float *)loss->data, row, den, r);
    OCR_CUDA_LAUNCHED();
}

extern "C" void ocr_cuda_kl_div_loss_backward(OcrTensor *dstudent, const OcrTensor *student, const OcrTensor *teacher,
                                              const OcrTensor *targets, KlDivLossParams p) {
    if (!dstudent) return;
    DtRows a = dt_rows(student, teacher, 1.0 / (double)p.temperature, "kl_div_loss_backward");
    dt_check_grad(dstudent, student, "kl_div_loss_backward");
    const int32_t *t = dt_targets(targets, a.rows, p.pad_id >= 0, "kl_div_loss_backward");
    CudaCtx ctx = ocr_cuda_enter(student);
    if (!a.rows) return;
    double *den = (double *)ocr_cuda_scratch(ctx, sizeof(double));
    if (p.pad_id >= 0) {
        dt_count_kernel<<<1, DT_THREADS, 0, ctx.stream>>>(den, t, a.rows, p.pad_id);
        OCR_CUDA_LAUNCHED();
    }
    kl_bwd_kernel<<<cuda_blocks(a.rows, DT_WPB), DT_THREADS, 0, ctx.stream>>>(
        dstudent->data, dstudent->dtype, a, t, p.pad_id, (double)p.grad_scale * (double)p.temperature, den,
        p.pad_id < 0 ? (double)student->shape[0] : -1.0);
    OCR_CUDA_LAUNCHED();
}

// ---- CTC-logit KL ------------------------------------------------------------------------------

struct CtcKlArgs {
    const void *s, *t;
    int sdt, tdt;
    int64_t B, L, C, blank;
    double inv_t;
};

static CtcKlArgs ctc_kl_args(const OcrTensor *s, const OcrTensor *t, CtcLogitsKlParams p, const char *op) {
    DtRows r = dt_rows(s, t, 1.0 / (double)p.temperature, op);
    OCR_ASSERT(s->ndim == 3, "%s: logits must be (B, L, C)", op);
    OCR_ASSERT(p.blank < r.C, "%s: blank %d is not a class of %lld", op, p.blank, (long long)r.C);
    CtcKlArgs a = {s->data, t->data, (int)s->dtype, (int)t->dtype, s->shape[0], s->shape[1], r.C, p.blank, r.inv_t};
    return a;
}

// lse[2n], lse[2n + 1]: the student's and the teacher's log-sum-exp of row n = (b, l).
static __global__ void ctc_kl_lse_kernel(double *lse, CtcKlArgs a) {
    FOR_WARP_ROWS(r, a.B * a.L) {
        const double ls = dwarp_lse(a.s, a.sdt, r * a.C, a.C, a.inv_t, a.blank, -1, lane);
        const double lt = dwarp_lse(a.t, a.tdt, r * a.C, a.C, a.inv_t, a.blank, -1, lane);
        if (lane == 0) {
            lse[2 * r] = ls;
            lse[2 * r + 1] = lt;
        }
    }
}

// SP[(2b)·C + c] = S, SP[(2b + 1)·C + c] = P: the time means (steps in order, as the CPU); with
// want_h the S slot receives h = hs·∂loss/∂S instead.
static __global__ void ctc_kl_mean_kernel(double *SP, const double *lse, CtcKlArgs a, int want_h, double hs) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.B * a.C; i += stride) {
        const int64_t b = i / a.C, c = i % a.C;
        double S = 0.0, P = 0.0;
        for (int64_t l = 0; l < a.L; l++) {
            const int64_t n = b * a.L + l;
            S += exp(dz_val(a.s, a.sdt, n * a.C, c, a.inv_t, a.blank, -1) - lse[2 * n]);
            P += exp(dz_val(a.t, a.tdt, n * a.C, c, a.inv_t, a.blank, -1) - lse[2 * n + 1]);
        }
        S /= (double)a.L;
        P /= (double)a.L;
        SP[2 * b * a.C + c] = want_h ? hs * ctc_kl_dS(P, S) : S;
        SP[(2 * b + 1) * a.C + c] = P;
    }
}

static __global__ void ctc_kl_sample_kernel(double *per, const double *SP, CtcKlArgs a) {
    FOR_WARP_ROWS(b, a.B) {
        const double *S = SP + 2 * b * a.C, *P = S + a.C;
        double acc = 0.0;
        for (int64_t c = lane; c < a.C; c += 32) acc += ctc_kl_term(P[c], S[c]);
        acc = warp_sum(acc);
        if (lane == 0) per[b] = acc;
    }
}

static __global__ void ctc_kl_bwd_kernel(void *g, int gdt, const double *SP, const double *lse, CtcKlArgs a) {
    FOR_WARP_ROWS(r, a.B * a.L) {
        const double *h = SP + 2 * (r / a.L) * a.C;
        const int64_t base = r * a.C;
        const double ls = lse[2 * r];
        double sh = 0.0;
        for (int64_t c = lane; c < a.C; c += 32)
            sh += h[c] * exp(dz_val(a.s, a.sdt, base, c, a.inv_t, a.blank, -1) - ls);
        sh = warp_sum(sh);
        for (int64_t c = lane; c < a.C; c += 32) {
            const double dz = exp(dz_val(a.s, a.sdt, base, c, a.inv_t, a.blank, -1) - ls) * (h[c] - sh) * a.inv_t;
            st(g, gdt, base + c, (float)(c == a.blank ? -dz : dz));
        }
    }
}

extern "C" void ocr_cuda_ctc_logits_kl_forward(OcrTensor *loss, const OcrTensor *student, const OcrTensor *teacher,
                                               CtcLogitsKlParams p) {
    CtcKlArgs a = ctc_kl_args(student, teacher, p, "ctc_logits_kl");
    dt_check_loss(loss, 1, "ctc_logits_kl");
    if (!loss) return;
    CudaCtx ctx = ocr_cuda_enter(student);
    const int64_t rows = a.B * a.L;
    double *lse = (double *)ocr_cuda_scratch(ctx, (size_t)(2 * rows + 2 * a.B * a.C + a.B + 1) * sizeof(double));
    double *SP = lse + 2 * rows, *per = SP + 2 * a.B * a.C;
    if (rows) {
        ctc_kl_lse_kernel<<<cuda_blocks(rows, DT_WPB), DT_THREADS, 0, ctx.stream>>>(lse, a);
        OCR_CUDA_LAUNCHED();
        ctc_kl_mean_kernel<<<cuda_blocks(a.B * a.C, DT_THREADS), DT_THREADS, 0, ctx.stream>>>(SP, lse, a, 0, 0.0);
        OCR_CUDA_LAUNCHED();
        ctc_kl_sample_kernel<<<cuda_blocks(a.B, DT_WPB), DT_THREADS, 0, ctx.stream>>>(per, SP, a);
        OCR_CUDA_LAUNCHED();
    }
    DtReduce r = {rows ? a.B : 0, 1, 1.0, 0.0, 1.0, (double)a.B};
    dt_reduce_kernel<<<1, 32, 0, ctx.stream>>>((float *)loss->data, per, NULL, r);
    OCR_CUDA_LAUNCHED();
}

extern "C" void ocr_cuda_ctc_logits_kl_backward(OcrTensor *dstudent, const OcrTensor *student,
                                                const OcrTensor *teacher, CtcLogitsKlParams p) {
    if (!dstudent) return;
    CtcKlArgs a = ctc_kl_args(student, teacher, p, "ctc_logits_kl_backward");
    dt_check_grad(dstudent, student, "ctc_logits_kl_backward");
    CudaCtx ctx = ocr_cuda_enter(student);
    const int64_t rows = a.B * a.L;
    if (!rows) return;
    double *lse = (double *)ocr_cuda_scratch(ctx, (size_t)(2 * rows + 2 * a.B * a.C) * sizeof(double));
    double *SP = lse + 2 * rows;
    // hs: 1/(B·L) of the mean over samples and steps
    const double hs = (double)p.grad_scale / ((double)a.B * (double)a.L);
    ctc_kl_lse_kernel<<<cuda_blocks(rows, DT_WPB), DT_THREADS, 0, ctx.stream>>>(lse, a);
    OCR_CUDA_LAUNCHED();
    ctc_kl_mean_kernel<<<cuda_blocks(a.B * a.C, DT_THREADS), DT_THREADS, 0, ctx.stream>>>(SP, lse, a, 1, hs);
    OCR_CUDA_LAUNCHED();
    ctc_kl_bwd_kernel<<<cuda_blocks(rows, DT_WPB), DT_THREADS, 0, ctx.stream>>>(dstudent->data, dstudent->dtype, SP,
                                                                                 lse, a);
    OCR_CUDA_LAUNCHED();
}

// ---- DKD -------------------------------------------------------------------------------------

struct DkdArgs {
    DtRows r;
    const int32_t *t;
    int pad;
    double alpha, beta;
};

// Forward (g == NULL): row[2r] = TCKD, row[2r + 1] = NCKD. Backward: the gradient times scale.
static __global__ void dkd_kernel(double *row, void *g, int gdt, DkdArgs k, double scale_num, const double *den_dev) {
    const DtRows &a = k.r;
    const double den = g ? den_dev[0] : 0.0;
    const double scale = den > 0 ? scale_num / den : 0.0;
    FOR_WARP_ROWS(r, a.rows) {
        const int64_t base = r * a.C;
        if (!dt_kept(k.t, r, k.pad) || (g && scale == 0.0)) {
            if (g)
                for (int64_t j = lane; j < a.C; j += 32) st(g, gdt, base + j, 0.0f);
            else if (lane == 0)
                row[2 * r] = row[2 * r + 1] = 0.0;
            continue;
        }
        const int64_t gt = k.t[r];
        if (gt < 0 || gt >= a.C) {  // the CPU asserts; NaN here
            if (g)
                for (int64_t j = lane; j < a.C; j += 32) st(g, gdt, base + j, NAN);
            else if (lane == 0)
                row[2 * r] = row[2 * r + 1] = NAN;
            continue;
        }
        const double ls = dwarp_lse(a.a, a.adt, base, a.C, a.inv_t, -1, -1, lane);
        const double lt = dwarp_lse(a.b, a.bdt, base, a.C, a.inv_t, -1, -1, lane);
        const double ls2 = dwarp_lse(a.a, a.adt, base, a.C, a.inv_t, -1, gt, lane);
        const double lt2 = dwarp_lse(a.b, a.bdt, base, a.C, a.inv_t, -1, gt, lane);
        double so = 0.0, to = 0.0;
        for (int64_t j = lane; j < a.C; j += 32)
            if (j != gt) {
                so += exp((double)ld(a.a, a.adt, base + j) * a.inv_t - ls);
                to += exp((double)ld(a.b, a.bdt, base + j) * a.inv_t - lt);
            }
        so = warp_sum(so);
        to = warp_sum(to);
        const double sg = exp((double)ld(a.a, a.adt, base + gt) * a.inv_t - ls);
        const double tg = exp((double)ld(a.b, a.bdt, base + gt) * a.inv_t - lt);
        if (!g) {
            double acc = 0.0;
            for (int64_t j = lane; j < a.C; j += 32)
                acc += kl_term(exp(dz_val(a.b, a.bdt, base, j, a.inv_t, -1, gt) - lt2),
                               dz_val(a.a, a.adt, base, j, a.inv_t, -1, gt) - ls2);
            acc = warp_sum(acc);
            if (lane == 0) {
                row[2 * r] = kl_term(tg, log(sg)) + kl_term(to, log(so));
                row[2 * r + 1] = acc;
            }
            continue;
        }
        const double wg = -tg / sg, wo = -to / so, sw = wg * sg + wo * so;
        double st2 = 0.0;
        for (int64_t j = lane; j < a.C; j += 32) st2 += exp(dz_val(a.b, a.bdt, base, j, a.inv_t, -1, gt) - lt2);
        st2 = warp_sum(st2);
        for (int64_t j = lane; j < a.C; j += 32) {
            const double ps = exp((double)ld(a.a, a.adt, base + j) * a.inv_t - ls);
            const double dt = ps * ((j == gt ? wg : wo) - sw);
            const double dn = exp(dz_val(a.a, a.adt, base, j, a.inv_t, -1, gt) - ls2) * st2 -
                              exp(dz_val(a.b, a.bdt, base, j, a.inv_t, -1, gt) - lt2);
            st(g, gdt, base + j, (float)(scale * (k.alpha * dt + k.beta * dn)));
        }
    }
}

static DkdArgs dkd_args(const OcrTensor *s, const OcrTensor *t, const OcrTensor *targets, DkdLossParams p,
                        const char *op) {
    DkdArgs k;
    k.r = dt_rows(s, t, 1.0 / (double)p.temperature, op);
    k.t = dt_targets(targets, k.r.rows, 1, op);
    k.pad = p.pad_id;
    k.alpha = p.alpha;
    k.beta = p.beta;
    return k;
}

extern "C" void ocr_cuda_dkd_loss_forward(OcrTensor *loss, const OcrTensor *student, const OcrTensor *teacher,
                                          const OcrTensor *targets, DkdLossParams p) {
    DkdArgs k = dkd_args(student, teacher, targets, p, "dkd_loss");
    dt_check_loss(loss, 1, "dkd_loss");
    if (!loss) return;
    CudaCtx ctx = ocr_cuda_enter(student);
    double *row = (double *)ocr_cuda_scratch(ctx, (size_t)(2 * k.r.rows + 1) * sizeof(double));
    double *den = row + 2 * k.r.rows;
    if (k.r.rows) {
        dkd_kernel<<<cuda_blocks(k.r.rows, DT_WPB), DT_THREADS, 0, ctx.stream>>>(row, NULL, 0, k, 0.0, NULL);
        OCR_CUDA_LAUNCHED();
    }
    dt_count_kernel<<<1, DT_THREADS, 0, ctx.stream>>>(den, k.t, k.r.rows, p.pad_id);
    OCR_CUDA_LAUNCHED();
    const double T = p.temperature;
    DtReduce r = {k.r.rows, 2, (double)p.alpha, (double)p.beta, T * T, -1.0};
    dt_reduce_kernel<<<1, 32, 0, ctx.stream>>>((float *)loss->data, row, den, r);
    OCR_CUDA_LAUNCHED();
}

extern "C" void ocr_cuda_dkd_loss_backward(OcrTensor *dstudent, const OcrTensor *student, const OcrTensor *teacher,
                                           const OcrTensor *targets, DkdLossParams p) {
    if (!dstudent) return;
    DkdArgs k = dkd_args(student, teacher, targets, p, "dkd_loss_backward");
    dt_check_grad(dstudent, student, "dkd_loss_backward");
    CudaCtx ctx = ocr_cuda_enter(student);
    if (!k.r.rows) return;
    double *den = (double *)ocr_cuda_scratch(ctx, sizeof(double));
    dt_count_kernel<<<1, DT_THREADS, 0, ctx.stream>>>(den, k.t, k.r.rows, p.pad_id);
    OCR_CUDA_LAUNCHED();
    dkd_kernel<<<cuda_blocks(k.r.rows, DT_WPB), DT_THREADS, 0, ctx.stream>>>(
        NULL, dstudent->data, dstudent->dtype, k, (double)p.grad_scale * (double)p.temperature, den);
    OCR_CUDA_LAUNCHED();
}

// ---- feature distance --------------------------------------------------------------------------

static __global__ void distance_chunk_kernel(double *part, const void *x, int xdt, const void *y, int ydt, int64_t n,
                                             int mode, double delta) {
    __shared__ double red[DT_THREADS];
    const int64_t k = blockIdx.x, begin = k * DT_CHUNK, end = begin + DT_CHUNK < n ? begin + DT_CHUNK : n;
    double acc = 0.0;
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
        acc += distance_term(mode, (double)ld(x, xdt, i) - (double)ld(y, ydt, i), delta);
    red[threadIdx.x] = acc;
    __syncthreads();
    for (int s = DT_THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) part[k] = red[0];
}

static __global__ void distance_bwd_kernel(void *gx, int gxdt, void *gy, int gydt, const void *x, int xdt,
                                           const void *y, int ydt, int64_t n, int mode, double delta, double scale) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const double v = scale * distance_grad(mode, (double)ld(x, xdt, i) - (double)ld(y, ydt, i), delta);
        if (gx) st(gx, gxdt, i, (float)v);
        if (gy) st(gy, gydt, i, (float)-v);
    }
}

static void distance_check(const OcrTensor *x, const OcrTensor *y, const char *op) {
    CUDA_ASSERT_FLOAT(x);
    CUDA_ASSERT_FLOAT(y);
    OCR_ASSERT(ocr_tensor_same_shape(x, y), "%s: x and y shapes differ", op);
}

extern "C" void ocr_cuda_distance_loss_forward(OcrTensor *loss, const OcrTensor *x, const OcrTensor *y,
                                               DistanceLossParams p) {
    distance_check(x, y, "distance_loss");
    dt_check_loss(loss, 1, "distance_loss");
    if (!loss) return;
    const int64_t n = ocr_tensor_numel(x), chunks = (n + DT_CHUNK - 1) / DT_CHUNK;
    CudaCtx ctx = ocr_cuda_enter(x);
    double *part = (double *)ocr_cuda_scratch(ctx, (size_t)(chunks ? chunks : 1) * sizeof(double));
    if (chunks) {
        distance_chunk_kernel<<<(unsigned)chunks, DT_THREADS, 0, ctx.stream>>>(part, x->data, x->dtype, y->data,
                                                                              y->dtype, n, (int)p.mode, p.delta);
        OCR_CUDA_LAUNCHED();
    }
    DtReduce r = {chunks, 1, 1.0, 0.0, 1.0, (double)n};
    dt_reduce_kernel<<<1, 32, 0, ctx.stream>>>((float *)loss->data, part, NULL, r);
    OCR_CUDA_LAUNCHED();
}

extern "C" void ocr_cuda_distance_loss_backward(OcrTensor *dx, OcrTensor *dy, const OcrTensor *x, const OcrTensor *y,
                                                DistanceLossParams p) {
    if (!dx && !dy) return;
    distance_check(x, y, "distance_loss_backward");
    dt_check_grad(dx, x, "distance_loss_backward");
    dt_check_grad(dy, x, "distance_loss_backward");
    const int64_t n = ocr_tensor_numel(x);
    CudaCtx ctx = ocr_cuda_enter(x);
    if (!n) return;
    distance_bwd_kernel<<<cuda_blocks(n, DT_THREADS), DT_THREADS, 0, ctx.stream>>>(
        opt_data(dx), opt_dtype(dx), opt_data(dy), opt_dtype(dy), x->data, x->dtype, y->data, y->dtype, n,
        (int)p.mode, p.delta, (double)p.grad_scale / (double)n);
    OCR_CUDA_LAUNCHED();
}

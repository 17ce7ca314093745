// Small ops of the networks that have no home in a larger family: the LearnableAffineBlock
// (scalar_affine), SVTRNet's positional embedding (batch_broadcast_add) and the local
// mixer's attention mask.
//
// The scalar gradients of scalar_affine_backward are sums over every element. They run in
// double with one fixed shape that kernels/cuda/affine.cu reproduces exactly, so the CPU and
// the GPU give the same bits and no result depends on the thread count:
//   chunk k = elements [k·2048, (k + 1)·2048); lane t of 256 sums elements k·2048 + t + 256·j,
//   j = 0..7, in order; the 256 lane sums are combined by a halving tree (lane t += lane
//   t + s for s = 128, 64, ..., 1); the chunk sums are added in chunk order.
// Products dout·inp of two fp32 values are exact in double, so only the additions round.
//
// scalar_affine reads and writes f16/bf16 tensors in their own dtype: a chunk at a time is
// widened into a buffer on the stack and its results rounded back while it is in cache (the
// backward forms both scalar sums and dinp in the same pass), instead of whole-tensor fp32
// copies; when every map is bf16 the chunk converts in registers, without the buffers. Per element and per chunk sum the same operations in the same order, so the results
// are the bits of the whole-tensor path, which Global.cpu_exact_numerics keeps as the reference
// (cpu_tiled_in / cpu_tiled_out).
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/ops.h"

#define AFFINE_LANES 256
#define AFFINE_PER_LANE 8
#define AFFINE_CHUNK (AFFINE_LANES * AFFINE_PER_LANE)
#define AFFINE_PAR_MIN 32768

// ---- scalar affine -------------------------------------------------------------------------

static float scalar_of(const OcrTensor *t, const char *what) {
    CPU_ASSERT_FLOAT(t);
    OCR_ASSERT(ocr_tensor_numel(t) == 1, "scalar_affine: %s must have one element", what);
    return ocr_tensor_get_f32(t, 0);
}

// y = bf16(s·x + b) on bf16 x, the conversions in registers: the bits of widening, the fp32
// loop below and rounding (ISO C: s·x rounded on its own, no FMA). y may equal x.
CPU_INLINE void affine_bf16_body(uint16_t *y, const uint16_t *x, float s, float b, int64_t m) {
    for (int64_t i = 0; i < m; i++) {
        const float t = s * ocr_bf16_to_f32(x[i]);
        y[i] = ocr_f32_to_bf16(t + b);
    }
}
CPU_VEC_CLONES(affine_bf16, (uint16_t *y, const uint16_t *x, float s, float b, int64_t m), (y, x, s, b, m))

// dx = bf16(s·dy) on bf16 dy (dx may equal dy).
CPU_INLINE void scale_bf16_body(uint16_t *dx, const uint16_t *dy, float s, int64_t m) {
    for (int64_t i = 0; i < m; i++) dx[i] = ocr_f32_to_bf16(s * ocr_bf16_to_f32(dy[i]));
}
CPU_VEC_CLONES(scale_bf16, (uint16_t *dx, const uint16_t *dy, float s, int64_t m), (dx, dy, s, m))

void scalar_affine_forward_cpu(OcrTensor *out, const OcrTensor *inp, const OcrTensor *scale, const OcrTensor *bias) {
    CPU_ASSERT_FLOAT(out);
    CPU_ASSERT_FLOAT(inp);
    const int64_t n = ocr_tensor_numel(inp);
    OCR_ASSERT(ocr_tensor_numel(out) == n, "scalar_affine: out and inp sizes differ");
    const float s = scalar_of(scale, "scale"), b = scalar_of(bias, "bias");
    CpuScratch sc = {0};
    OcrTensor vx, vy;
    float *whole;
    const OcrTensor *X = cpu_tiled_in(&sc, inp, &vx);
    OcrTensor *Y = cpu_tiled_out(&sc, out, &vy, 0, &whole);
    const int64_t chunks = (n + AFFINE_CHUNK - 1) / AFFINE_CHUNK;
    const int in_registers = X->dtype == OCR_BF16 && Y->dtype == OCR_BF16;
    // out may be inp (in place): each chunk is read before it is written.
#pragma omp parallel for schedule(static) if (n >= AFFINE_PAR_MIN)
    for (int64_t k = 0; k < chunks; k++) {
        float bx[AFFINE_CHUNK], by[AFFINE_CHUNK];
        const int64_t i0 = k * AFFINE_CHUNK, m = n - i0 < AFFINE_CHUNK ? n - i0 : AFFINE_CHUNK;
        if (in_registers) {
            affine_bf16((uint16_t *)Y->data + i0, (const uint16_t *)X->data + i0, s, b, m);
            continue;
        }
        const float *x = cpu_rows_in(X, 1, i0, m, bx);
        float *y = cpu_rows_dst(Y, 1, i0, by);
        for (int64_t i = 0; i < m; i++) {
            float t = s * x[i];  // rounded on its own (ISO C: no contraction into an FMA)
            y[i] = t + b;
        }
        cpu_rows_out(Y, 1, i0, m, y);
    }
    if (whole) cpu_f32_store(out, whole);
    cpu_scratch_free(&sc);
}

// lane[t] = Σ_j a_i·b_i (b == NULL: Σ_j a_i), i = t + 256·j < m, j in order. The loops run over
// the lanes innermost (contiguous elements, so they vectorise) and each lane still adds its
// terms in j order from 0.0: the sums of the one-lane-at-a-time form, bit for bit. Written once
// for fp32 and for bf16 operands (T, widened by WIDEN as they are loaded: exact, the same sums).
#define AFFINE_LANE_SUMS(T, WIDEN)                                                                    \
    for (int t = 0; t < AFFINE_LANES; t++) lane[t] = 0.0;                                            \
    for (int j = 0; j < AFFINE_PER_LANE; j++) {                                                      \
        const int64_t i0 = (int64_t)AFFINE_LANES * j;                                                \
        if (i0 >= m) break;                                                                          \
        const int64_t tn = m - i0 < AFFINE_LANES ? m - i0 : AFFINE_LANES;                            \
        const T *aj = a + i0;                                                                        \
        if (b) {                                                                                     \
            const T *bj = b + i0;                                                                    \
            for (int64_t t = 0; t < tn; t++) lane[t] += (double)WIDEN(aj[t]) * (double)WIDEN(bj[t]); \
        } else {                                                                                     \
            for (int64_t t = 0; t < tn; t++) lane[t] += (double)WIDEN(aj[t]);                        \
        }                                                                                            \
    }
#define AFFINE_F32(v) (v)
CPU_INLINE void lane_sums_body(double *restrict lane, const float *restrict a, const float *restrict b, int64_t m) {
    AFFINE_LANE_SUMS(float, AFFINE_F32)
}
CPU_VEC_CLONES(lane_sums, (double *lane, const float *a, const float *b, int64_t m), (lane, a, b, m))
CPU_INLINE void lane_sums_bf16_body(double *restrict lane, const uint16_t *restrict a, const uint16_t *restrict b,
                                    int64_t m) {
    AFFINE_LANE_SUMS(uint16_t, ocr_bf16_to_f32)
}
CPU_VEC_CLONES(lane_sums_bf16, (double *lane, const uint16_t *a, const uint16_t *b, int64_t m), (lane, a, b, m))

// The sum of one chunk, Σ a_i·b_i (b == NULL: Σ a_i) over its m elements, in the fixed shape
// described at the top.
static double lane_tree(double *lane) {
    for (int s = AFFINE_LANES / 2; s > 0; s >>= 1)
        for (int t = 0; t < s; t++) lane[t] += lane[t + s];
    return lane[0];
}
static double chunk_sum(const float *a, const float *b, int64_t m) {
    double lane[AFFINE_LANES];
    lane_sums(lane, a, b, m);
    return lane_tree(lane);
}
static double chunk_sum_bf16(const uint16_t *a, const uint16_t *b, int64_t m) {
    double lane[AFFINE_LANES];
    lane_sums_bf16(lane, a, b, m);
    return lane_tree(lane);
}

// The chunk sums added in chunk order.
static double chunks_total(const double *part, int64_t chunks) {
    double total = 0.0;
    for (int64_t k = 0; k < chunks; k++) total += part[k];
    return total;
}

// t[0] += (float)sum, rounded into t's dtype.
static void accumulate_scalar(OcrTensor *t, double sum, const char *what) {
    (void)scalar_of(t, what);
    ocr_tensor_set_f32(t, 0, ocr_tensor_get_f32(t, 0) + (float)sum);
}

void scalar_affine_backward_cpu(OcrTensor *dinp, OcrTensor *dscale, OcrTensor *dbias, const OcrTensor *dout,
                                const OcrTensor *inp, const OcrTensor *scale) {
    CPU_ASSERT_FLOAT(dout);
    const int64_t n = ocr_tensor_numel(dout);
    if (dscale) {
        CPU_ASSERT_FLOAT(inp);
        OCR_ASSERT(ocr_tensor_numel(inp) == n, "scalar_affine_backward: inp and dout sizes differ");
    }
    if (dinp) {
        CPU_ASSERT_FLOAT(dinp);
        OCR_ASSERT(ocr_tensor_numel(dinp) == n, "scalar_affine_backward: dinp and dout sizes differ");
    }
    const float s = dinp ? scalar_of(scale, "scale") : 0.0f;
    CpuScratch sc = {0};
    OcrTensor vdy, vx, vdx;
    float *whole = NULL;
    const OcrTensor *DY = cpu_tiled_in(&sc, dout, &vdy);
    const OcrTensor *X = dscale ? cpu_tiled_in(&sc, inp, &vx) : NULL;
    OcrTensor *DX = dinp ? cpu_tiled_out(&sc, dinp, &vdx, 0, &whole) : NULL;
    const int64_t chunks = (n + AFFINE_CHUNK - 1) / AFFINE_CHUNK;
    // Per chunk: its Σ dout·inp and Σ dout (combined in chunk order below), and dinp = scale·dout.
    // dinp may be dout (in place): each chunk's sums are formed before it is overwritten.
    double *part = cpu_scratch_bytes(&sc, (size_t)(2 * chunks + 1) * sizeof(double));
    double *part_s = part, *part_b = part + chunks;
    // Every map bf16: the chunk is read and written in registers (the same sums and dinp).
    const int in_registers = DY->dtype == OCR_BF16 && (!X || X->dtype == OCR_BF16) && (!DX || DX->dtype == OCR_BF16);
#pragma omp parallel for schedule(static) if (chunks > 4)
    for (int64_t k = 0; k < chunks; k++) {
        float bg[AFFINE_CHUNK], bx[AFFINE_CHUNK], bd[AFFINE_CHUNK];
        const int64_t i0 = k * AFFINE_CHUNK, m = n - i0 < AFFINE_CHUNK ? n - i0 : AFFINE_CHUNK;
        if (in_registers) {
            const uint16_t *dyh = (const uint16_t *)DY->data + i0;
            if (X) part_s[k] = chunk_sum_bf16(dyh, (const uint16_t *)X->data + i0, m);
            if (dbias) part_b[k] = chunk_sum_bf16(dyh, NULL, m);
            if (DX) scale_bf16((uint16_t *)DX->data + i0, dyh, s, m);
            continue;
        }
        const float *dy = cpu_rows_in(DY, 1, i0, m, bg);
        if (X) part_s[k] = chunk_sum(dy, cpu_rows_in(X, 1, i0, m, bx), m);
        if (dbias) part_b[k] = chunk_sum(dy, NULL, m);
        if (DX) {
            float *dx = cpu_rows_dst(DX, 1, i0, bd);
            for (int64_t i = 0; i < m; i++) dx[i] = s * dy[i];
            cpu_rows_out(DX, 1, i0, m, dx);
        }
    }
    if (dscale) accumulate_scalar(dscale, chunks_total(part_s, chunks), "dscale");
    if (dbias) accumulate_scalar(dbias, chunks_total(part_b, chunks), "dbias");
    if (whole) cpu_f32_store(dinp, whole);
    cpu_scratch_free(&sc);
}

// ---- batch broadcast add ---------------------------------------------------------------------

// Elements per batch entry; asserts pos is (1, ...) with inp's trailing dimensions.
static int64_t broadcast_per(const OcrTensor *inp, const OcrTensor *pos, const char *op) {
    OCR_ASSERT(inp->ndim == pos->ndim && pos->shape[0] == 1, "%s: pos must be (1, ...) with inp's rank", op);
    for (int d = 1; d < inp->ndim; d++)
        OCR_ASSERT(inp->shape[d] == pos->shape[d], "%s: dimension %d differs (%lld vs %lld)", op, d,
                   (long long)inp->shape[d], (long long)pos->shape[d]);
    return ocr_tensor_numel(pos);
}

void batch_broadcast_add_forward_cpu(OcrTensor *out, const OcrTensor *inp, const OcrTensor *pos) {
    CPU_ASSERT_FLOAT(out);
    CPU_ASSERT_FLOAT(inp);
    CPU_ASSERT_FLOAT(pos);
    OCR_ASSERT(ocr_tensor_same_shape(out, inp), "batch_broadcast_add: out and inp shapes differ");
    const int64_t per = broadcast_per(inp, pos, "batch_broadcast_add"), B = inp->shape[0];
    CpuScratch sc = {0};
    const float *x = cpu_f32_in(&sc, inp), *p = cpu_f32_in(&sc, pos);
    float *y = cpu_f32_out(&sc, out, 0);
#pragma omp parallel for schedule(static) if (B * per >= AFFINE_PAR_MIN)
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < per; j++) y[b * per + j] = x[b * per + j] + p[j];
    cpu_f32_store(out, y);
    cpu_scratch_free(&sc);
}

void batch_broadcast_add_backward_cpu(OcrTensor *dinp, OcrTensor *dpos, const OcrTensor *dout) {
    CPU_ASSERT_FLOAT(dout);
    if (dinp) {
        OCR_ASSERT(ocr_tensor_same_shape(dinp, dout), "batch_broadcast_add_backward: dinp and dout shapes differ");
        cast_forward_cpu(dinp, dout);  // a copy; raw bits when the dtypes agree
    }
    if (!dpos) return;
    CPU_ASSERT_FLOAT(dpos);
    const int64_t per = broadcast_per(dout, dpos, "batch_broadcast_add_backward"), B = dout->shape[0];
    CpuScratch sc = {0};
    const float *dy = cpu_f32_in(&sc, dout);
    float *dp = cpu_f32_out(&sc, dpos, 1);
#pragma omp parallel for schedule(static) if (B * per >= AFFINE_PAR_MIN)
    for (int64_t j = 0; j < per; j++) {
        double acc = 0.0;
        for (int64_t b = 0; b < B; b++) acc += dy[b * per + j];
        dp[j] = dp[j] + (float)acc;
    }
    cpu_f32_store(dpos, dp);
    cpu_scratch_free(&sc);
}

// ---- local attention mask ----------------------------------------------------------------------

void attention_local_mask_cpu(OcrTensor *mask, int grid_h, int grid_w, int window_h, int window_w) {
    const int64_t T = (int64_t)grid_h * grid_w;
    OCR_ASSERT(mask->device.type == OCR_DEVICE_CPU && mask->dtype == OCR_F32 && mask->ndim == 2 &&
                   mask->shape[0] == T && mask->shape[1] == T,
               "attention_local_mask: mask must be a CPU f32 (%lld, %lld) tensor", (long long)T, (long long)T);
    OCR_ASSERT(window_h > 0 && window_w > 0, "attention_local_mask: window %dx%d", window_h, window_w);
    float *m = mask->data;
#pragma omp parallel for schedule(static) if (T * T >= AFFINE_PAR_MIN)
    for (int64_t q = 0; q < T; q++) {
        const int64_t qh = q / grid_w, qw = q % grid_w;
        for (int64_t k = 0; k < T; k++) {
            const int64_t dh = k / grid_w - qh + window_h / 2, dw = k % grid_w - qw + window_w / 2;
            m[q * T + k] = (dh >= 0 && dh < window_h && dw >= 0 && dw < window_w) ? 0.0f : -INFINITY;
        }
    }
}

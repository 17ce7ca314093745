// Small ops of the networks that have no home in a larger family: the LearnableAffineBlock
// (scalar_affine) and its fused affine → activation → affine, and SVTRNet's positional
// embedding (batch_broadcast_add).
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
// (ocr_cpu_tiled_in / ocr_cpu_tiled_out).
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/activation_math.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/rowwise.h"
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

// y (m) = s·x + b, the product rounded on its own (ISO C: no FMA contraction); y may be x.
CPU_INLINE void affine_tile_body(float *y, const float *x, float s, float b, int64_t m) {
    for (int64_t i = 0; i < m; i++) {
        const float t = s * x[i];
        y[i] = t + b;
    }
}
CPU_VEC_CLONES(affine_tile, (float *y, const float *x, float s, float b, int64_t m), (y, x, s, b, m))

void ocr_cpu_scalar_affine_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *scale,
                                   const OcrTensor *bias) {
    CPU_ASSERT_FLOAT(out);
    CPU_ASSERT_FLOAT(inp);
    const int64_t n = ocr_tensor_numel(inp);
    OCR_ASSERT(ocr_tensor_numel(out) == n, "scalar_affine: out and inp sizes differ");
    const float s = scalar_of(scale, "scale"), b = scalar_of(bias, "bias");
    CpuScratch sc = {0};
    OcrTensor vx, vy;
    float *whole;
    const OcrTensor *X = ocr_cpu_tiled_in(&sc, inp, &vx);
    OcrTensor *Y = ocr_cpu_tiled_out(&sc, out, &vy, 0, &whole);
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
        const float *x = ocr_cpu_rows_in(X, 1, i0, m, bx);
        float *y = ocr_cpu_rows_dst(Y, 1, i0, by);
        affine_tile(y, x, s, b, m);
        ocr_cpu_rows_out(Y, 1, i0, m, y);
    }
    if (whole) ocr_cpu_f32_store(out, whole);
    ocr_cpu_scratch_free(&sc);
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

void ocr_cpu_scalar_affine_backward(OcrTensor *dinp, OcrTensor *dscale, OcrTensor *dbias, const OcrTensor *dout,
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
    const OcrTensor *DY = ocr_cpu_tiled_in(&sc, dout, &vdy);
    const OcrTensor *X = dscale ? ocr_cpu_tiled_in(&sc, inp, &vx) : NULL;
    OcrTensor *DX = dinp ? ocr_cpu_tiled_out(&sc, dinp, &vdx, 0, &whole) : NULL;
    const int64_t chunks = (n + AFFINE_CHUNK - 1) / AFFINE_CHUNK;
    // Per chunk: its Σ dout·inp and Σ dout (combined in chunk order below), and dinp = scale·dout.
    // dinp may be dout (in place): each chunk's sums are formed before it is overwritten.
    double *part = ocr_cpu_scratch_bytes(&sc, (size_t)(2 * chunks + 1) * sizeof(double));
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
        const float *dy = ocr_cpu_rows_in(DY, 1, i0, m, bg);
        if (X) part_s[k] = chunk_sum(dy, ocr_cpu_rows_in(X, 1, i0, m, bx), m);
        if (dbias) part_b[k] = chunk_sum(dy, NULL, m);
        if (DX) {
            float *dx = ocr_cpu_rows_dst(DX, 1, i0, bd);
            ocr_cpu_scale_tile(dx, dy, s, m);
            ocr_cpu_rows_out(DX, 1, i0, m, dx);
        }
    }
    if (dscale) accumulate_scalar(dscale, chunks_total(part_s, chunks), "dscale");
    if (dbias) accumulate_scalar(dbias, chunks_total(part_b, chunks), "dbias");
    if (whole) ocr_cpu_f32_store(dinp, whole);
    ocr_cpu_scratch_free(&sc);
}

// ---- affine → activation → affine, fused (the LearnableRepLayer's tail) -----------------------
// scalar_affine_forward, activation_forward and scalar_affine_forward over one chunk at a time
// in L1 buffers, each intermediate rounded into its dtype (ocr_cpu_round_tile) as the three ops'
// output tensors would hold it: the forward reads inp and writes out once instead of three
// reads and three writes, the backward reads inp and dout and writes dinp once instead of
// recomputing two maps and passing over five. Per element the operations are those of the
// three ops in the same order, and the four scalar sums use scalar_affine's fixed chunk and
// lane shape over the same values, so the results are the composition's bits.

// a (m) = mid(s1·x + b1), h (m) = mid(act(a)): the first affine's and the activation's outputs
// as mid tensors would hold them.
static void aaa_inner(float *a, float *h, const float *x, float s1, float b1, ocr_activation_t act, int64_t m,
                      ocr_dtype_t mid, uint16_t *tmp) {
    affine_tile(a, x, s1, b1, m);
    ocr_cpu_round_tile(a, m, mid, tmp);
    ocr_cpu_act_forward_tile(h, a, m, act);
    ocr_cpu_round_tile(h, m, mid, tmp);
}

// The same arithmetic with every step in registers, for maps that are all f32 or all bf16 (the
// FP32 and BF16-O2 cases): T the maps' type, WIDEN its exact widening, ROUND an intermediate's
// rounding into T and back, STORE the rounding of a result into T. f is the activation's name
// (activation_math.h: f##_forward_one, f##_backward_one).
#define AAA_FORWARD_LOOP(WIDEN, ROUND, STORE, f)                  \
    for (int64_t i = 0; i < m; i++) {                             \
        const float t = s1 * WIDEN(x[i]);                         \
        const float a = ROUND(t + b1);                            \
        const float u = s2 * ROUND(f##_forward_one(a));           \
        y[i] = STORE(u + b2);                                     \
    }
// lanes: Σ dy·h, Σ dy, Σ da·x, Σ da for lane t at lanes[q·256 + t], each lane adding its elements
// t + 256·j in j order from 0.0, as AFFINE_LANE_SUMS does.
#define AAA_BACKWARD_LOOP(WIDEN, ROUND, STORE, f)                                   \
    for (int j = 0; j < AFFINE_PER_LANE; j++) {                                     \
        const int64_t o = (int64_t)AFFINE_LANES * j;                                \
        if (o >= m) break;                                                          \
        const int64_t tn = m - o < AFFINE_LANES ? m - o : AFFINE_LANES;             \
        for (int64_t t = 0; t < tn; t++) {                                          \
            const float g = WIDEN(dy[o + t]), xv = WIDEN(x[o + t]);                 \
            const float p = s1 * xv;                                                \
            const float a = ROUND(p + b1);                                          \
            const float h = ROUND(f##_forward_one(a));                              \
            ls2[t] += (double)g * (double)h;                                        \
            lb2[t] += (double)g;                                                    \
            const float da = ROUND(f##_backward_one(ROUND(s2 * g), a));             \
            ls1[t] += (double)da * (double)xv;                                      \
            lb1[t] += (double)da;                                                   \
            dx[o + t] = STORE(s1 * da);                                             \
        }                                                                           \
    }
#define AAA_LANES_DECLARE                                                           \
    double *ls2 = lanes, *lb2 = lanes + AFFINE_LANES, *ls1 = lanes + 2 * AFFINE_LANES; \
    double *lb1 = lanes + 3 * AFFINE_LANES;                                         \
    for (int t = 0; t < 4 * AFFINE_LANES; t++) lanes[t] = 0.0;
#define AAA_FWD_F32(f) AAA_FORWARD_LOOP(AFFINE_F32, AFFINE_F32, AFFINE_F32, f)
#define AAA_FWD_BF16(f) AAA_FORWARD_LOOP(ocr_bf16_to_f32, ocr_bf16_round, ocr_f32_to_bf16, f)
#define AAA_BWD_F32(f) AAA_BACKWARD_LOOP(AFFINE_F32, AFFINE_F32, AFFINE_F32, f)
#define AAA_BWD_BF16(f) AAA_BACKWARD_LOOP(ocr_bf16_to_f32, ocr_bf16_round, ocr_f32_to_bf16, f)

CPU_INLINE void aaa_forward_f32_body(int hw_fma, float *y, const float *x, float s1, float b1, float s2,
                                     float b2, int64_t m, ocr_activation_t act) {
    CPU_ACT_SWITCH(act, hw_fma, AAA_FWD_F32, )
}
CPU_VEC_CLONES_FMA(aaa_forward_f32,
                   (float *y, const float *x, float s1, float b1, float s2, float b2, int64_t m, ocr_activation_t act),
                   (y, x, s1, b1, s2, b2, m, act))
CPU_INLINE void aaa_forward_bf16_body(int hw_fma, uint16_t *y, const uint16_t *x, float s1, float b1, float s2,
                                      float b2, int64_t m, ocr_activation_t act) {
    CPU_ACT_SWITCH(act, hw_fma, AAA_FWD_BF16, )
}
CPU_VEC_CLONES_FMA(aaa_forward_bf16,
                   (uint16_t *y, const uint16_t *x, float s1, float b1, float s2, float b2, int64_t m,
                    ocr_activation_t act),
                   (y, x, s1, b1, s2, b2, m, act))
CPU_INLINE void aaa_backward_f32_body(int hw_fma, double *restrict lanes, float *dx, const float *dy, const float *x,
                                      float s1, float b1, float s2, int64_t m, ocr_activation_t act) {
    AAA_LANES_DECLARE
    CPU_ACT_SWITCH(act, hw_fma, AAA_BWD_F32, )
}
CPU_VEC_CLONES_FMA(aaa_backward_f32,
                   (double *lanes, float *dx, const float *dy, const float *x, float s1, float b1, float s2, int64_t m,
                    ocr_activation_t act),
                   (lanes, dx, dy, x, s1, b1, s2, m, act))
CPU_INLINE void aaa_backward_bf16_body(int hw_fma, double *restrict lanes, uint16_t *dx, const uint16_t *dy,
                                       const uint16_t *x, float s1, float b1, float s2, int64_t m,
                                       ocr_activation_t act) {
    AAA_LANES_DECLARE
    CPU_ACT_SWITCH(act, hw_fma, AAA_BWD_BF16, )
}
CPU_VEC_CLONES_FMA(aaa_backward_bf16,
                   (double *lanes, uint16_t *dx, const uint16_t *dy, const uint16_t *x, float s1, float b1, float s2,
                    int64_t m, ocr_activation_t act),
                   (lanes, dx, dy, x, s1, b1, s2, m, act))

static void aaa_check(const OcrTensor *t, int64_t n, const char *what) {
    CPU_ASSERT_FLOAT(t);
    OCR_ASSERT(ocr_tensor_numel(t) == n, "affine_act_affine: %s has %lld elements, expected %lld", what,
               (long long)ocr_tensor_numel(t), (long long)n);
}

void ocr_cpu_affine_act_affine_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *s1, const OcrTensor *b1,
                                       ocr_activation_t act, const OcrTensor *s2, const OcrTensor *b2) {
    CPU_ASSERT_FLOAT(inp);
    const int64_t n = ocr_tensor_numel(inp);
    aaa_check(out, n, "out");
    const float sv1 = scalar_of(s1, "scale 1"), bv1 = scalar_of(b1, "bias 1");
    const float sv2 = scalar_of(s2, "scale 2"), bv2 = scalar_of(b2, "bias 2");
    const ocr_dtype_t mid = out->dtype;
    CpuScratch sc = {0};
    OcrTensor vx, vy;
    float *whole;
    const OcrTensor *X = ocr_cpu_tiled_in(&sc, inp, &vx);
    OcrTensor *Y = ocr_cpu_tiled_out(&sc, out, &vy, 0, &whole);
    const int64_t chunks = (n + AFFINE_CHUNK - 1) / AFFINE_CHUNK;
    // All f32 or all bf16: in registers; otherwise through fp32 buffers.
    const int same = X->dtype == Y->dtype, in_f32 = same && X->dtype == OCR_F32, in_bf16 = same && X->dtype == OCR_BF16;
    // out may be inp: each chunk is read into the buffers before it is written.
#pragma omp parallel for schedule(static) if (n >= AFFINE_PAR_MIN)
    for (int64_t k = 0; k < chunks; k++) {
        const int64_t i0 = k * AFFINE_CHUNK, m = n - i0 < AFFINE_CHUNK ? n - i0 : AFFINE_CHUNK;
        if (in_f32) {
            aaa_forward_f32((float *)Y->data + i0, (const float *)X->data + i0, sv1, bv1, sv2, bv2, m, act);
            continue;
        }
        if (in_bf16) {
            aaa_forward_bf16((uint16_t *)Y->data + i0, (const uint16_t *)X->data + i0, sv1, bv1, sv2, bv2, m, act);
            continue;
        }
        float bx[AFFINE_CHUNK], ba[AFFINE_CHUNK], bh[AFFINE_CHUNK], by[AFFINE_CHUNK];
        uint16_t tmp[AFFINE_CHUNK];
        aaa_inner(ba, bh, ocr_cpu_rows_in(X, 1, i0, m, bx), sv1, bv1, act, m, mid, tmp);
        float *y = ocr_cpu_rows_dst(Y, 1, i0, by);
        affine_tile(y, bh, sv2, bv2, m);
        ocr_cpu_rows_out(Y, 1, i0, m, y);
    }
    if (whole) ocr_cpu_f32_store(out, whole);
    ocr_cpu_scratch_free(&sc);
}

void ocr_cpu_affine_act_affine_backward(OcrTensor *dinp, OcrTensor *ds1, OcrTensor *db1, OcrTensor *ds2, OcrTensor *db2,
                                        const OcrTensor *dout, const OcrTensor *inp, const OcrTensor *s1,
                                        const OcrTensor *b1, ocr_activation_t act, const OcrTensor *s2,
                                        ocr_dtype_t mid) {
    CPU_ASSERT_FLOAT(dout);
    const int64_t n = ocr_tensor_numel(dout);
    aaa_check(inp, n, "inp");
    if (dinp) aaa_check(dinp, n, "dinp");
    OCR_ASSERT(ocr_dtype_is_float(mid), "affine_act_affine_backward: mid must be a float dtype");
    const float sv1 = scalar_of(s1, "scale 1"), bv1 = scalar_of(b1, "bias 1"), sv2 = scalar_of(s2, "scale 2");
    CpuScratch sc = {0};
    OcrTensor vdy, vx, vdx;
    float *whole = NULL;
    const OcrTensor *DY = ocr_cpu_tiled_in(&sc, dout, &vdy);
    const OcrTensor *X = ocr_cpu_tiled_in(&sc, inp, &vx);
    OcrTensor *DX = dinp ? ocr_cpu_tiled_out(&sc, dinp, &vdx, 0, &whole) : NULL;
    const int64_t chunks = (n + AFFINE_CHUNK - 1) / AFFINE_CHUNK;
    // Per chunk the four partial sums (combined in chunk order below): Σ dout·h, Σ dout for the
    // second affine, Σ da·inp, Σ da for the first, da = mid(mid(s2·dout)·act'(a)).
    double *part = ocr_cpu_scratch_bytes(&sc, (size_t)(4 * chunks + 1) * sizeof(double));
    double *p_s2 = part, *p_b2 = part + chunks, *p_s1 = part + 2 * chunks, *p_b1 = part + 3 * chunks;
    // Every map f32, or every map bf16 (mid included): in registers, dinp into a scratch chunk
    // when it is not wanted; otherwise through fp32 buffers.
    const ocr_dtype_t t0 = X->dtype;
    const int same = DY->dtype == t0 && mid == t0 && (!DX || DX->dtype == t0);
    const int in_f32 = same && t0 == OCR_F32, in_bf16 = same && t0 == OCR_BF16;
    // dinp may be dout or inp: each element is read before it is overwritten.
#pragma omp parallel for schedule(static) if (chunks > 4)
    for (int64_t k = 0; k < chunks; k++) {
        const int64_t i0 = k * AFFINE_CHUNK, m = n - i0 < AFFINE_CHUNK ? n - i0 : AFFINE_CHUNK;
        if (in_f32 || in_bf16) {
            double lanes[4 * AFFINE_LANES];
            if (in_f32) {
                float unused[AFFINE_CHUNK];
                float *dx = DX ? (float *)DX->data + i0 : unused;
                aaa_backward_f32(lanes, dx, (const float *)DY->data + i0, (const float *)X->data + i0, sv1, bv1, sv2,
                                 m, act);
            } else {
                uint16_t unused[AFFINE_CHUNK];
                uint16_t *dx = DX ? (uint16_t *)DX->data + i0 : unused;
                aaa_backward_bf16(lanes, dx, (const uint16_t *)DY->data + i0, (const uint16_t *)X->data + i0, sv1,
                                  bv1, sv2, m, act);
            }
            p_s2[k] = lane_tree(lanes);
            p_b2[k] = lane_tree(lanes + AFFINE_LANES);
            p_s1[k] = lane_tree(lanes + 2 * AFFINE_LANES);
            p_b1[k] = lane_tree(lanes + 3 * AFFINE_LANES);
            continue;
        }
        float bg[AFFINE_CHUNK], bx[AFFINE_CHUNK], ba[AFFINE_CHUNK], bh[AFFINE_CHUNK], bd[AFFINE_CHUNK];
        uint16_t tmp[AFFINE_CHUNK];
        const float *dy = ocr_cpu_rows_in(DY, 1, i0, m, bg);
        const float *x = ocr_cpu_rows_in(X, 1, i0, m, bx);
        aaa_inner(ba, bh, x, sv1, bv1, act, m, mid, tmp);
        if (ds2) p_s2[k] = chunk_sum(dy, bh, m);
        if (db2) p_b2[k] = chunk_sum(dy, NULL, m);
        ocr_cpu_scale_tile(bd, dy, sv2, m);  // the second affine's dinp, a mid tensor
        ocr_cpu_round_tile(bd, m, mid, tmp);
        ocr_cpu_act_backward_tile(bd, bd, ba, m, act);  // the activation's dinp, a mid tensor
        ocr_cpu_round_tile(bd, m, mid, tmp);
        if (ds1) p_s1[k] = chunk_sum(bd, x, m);
        if (db1) p_b1[k] = chunk_sum(bd, NULL, m);
        if (DX) {
            float *dx = ocr_cpu_rows_dst(DX, 1, i0, bh);  // bh is free again
            ocr_cpu_scale_tile(dx, bd, sv1, m);
            ocr_cpu_rows_out(DX, 1, i0, m, dx);
        }
    }
    if (ds2) accumulate_scalar(ds2, chunks_total(p_s2, chunks), "dscale 2");
    if (db2) accumulate_scalar(db2, chunks_total(p_b2, chunks), "dbias 2");
    if (ds1) accumulate_scalar(ds1, chunks_total(p_s1, chunks), "dscale 1");
    if (db1) accumulate_scalar(db1, chunks_total(p_b1, chunks), "dbias 1");
    if (whole) ocr_cpu_f32_store(dinp, whole);
    ocr_cpu_scratch_free(&sc);
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

void ocr_cpu_batch_broadcast_add_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *pos) {
    CPU_ASSERT_FLOAT(out);
    CPU_ASSERT_FLOAT(inp);
    CPU_ASSERT_FLOAT(pos);
    OCR_ASSERT(ocr_tensor_same_shape(out, inp), "batch_broadcast_add: out and inp shapes differ");
    const int64_t per = broadcast_per(inp, pos, "batch_broadcast_add"), B = inp->shape[0];
    CpuScratch sc = {0};
    const float *x = ocr_cpu_f32_in(&sc, inp), *p = ocr_cpu_f32_in(&sc, pos);
    float *y = ocr_cpu_f32_out(&sc, out, 0);
#pragma omp parallel for schedule(static) if (B * per >= AFFINE_PAR_MIN)
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < per; j++) y[b * per + j] = x[b * per + j] + p[j];
    ocr_cpu_f32_store(out, y);
    ocr_cpu_scratch_free(&sc);
}

void ocr_cpu_batch_broadcast_add_backward(OcrTensor *dinp, OcrTensor *dpos, const OcrTensor *dout) {
    CPU_ASSERT_FLOAT(dout);
    if (dinp) {
        OCR_ASSERT(ocr_tensor_same_shape(dinp, dout), "batch_broadcast_add_backward: dinp and dout shapes differ");
        ocr_cpu_cast_forward(dinp, dout);  // a copy; raw bits when the dtypes agree
    }
    if (!dpos) return;
    CPU_ASSERT_FLOAT(dpos);
    const int64_t per = broadcast_per(dout, dpos, "batch_broadcast_add_backward"), B = dout->shape[0];
    CpuScratch sc = {0};
    const float *dy = ocr_cpu_f32_in(&sc, dout);
    float *dp = ocr_cpu_f32_out(&sc, dpos, 1);
#pragma omp parallel for schedule(static) if (B * per >= AFFINE_PAR_MIN)
    for (int64_t j = 0; j < per; j++) {
        double acc = 0.0;
        for (int64_t b = 0; b < B; b++) acc += dy[b * per + j];
        dp[j] = dp[j] + (float)acc;
    }
    ocr_cpu_f32_store(dpos, dp);
    ocr_cpu_scratch_free(&sc);
}

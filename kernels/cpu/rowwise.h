// Row-tile kernels shared by batchnorm.c, bn_act.c and activation.c (CPU backend internal).
//
// Each works on one thread's tile of rows (rows × C, channels contiguous) in fp32 and runs at
// the vector level ocr_cpu_vec_level() names (cpu_common.h), with the same bits at every level.
// The callers widen their tiles from f16/bf16 and round their results back per tile
// (ocr_cpu_rows_in / ocr_cpu_rows_out), so no op makes a whole-tensor fp32 copy.
#ifndef OCR_KERNELS_CPU_ROWWISE_H
#define OCR_KERNELS_CPU_ROWWISE_H

#include <stdint.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/ops.h"

// Elements per row tile: small enough that a tile and its results stay in L1/L2 while the next
// step reads them back, and below the activations' parallel thresholds.
#define CPU_ROW_TILE 4096
static inline int64_t cpu_tile_rows(int64_t C) { return C >= CPU_ROW_TILE ? 1 : CPU_ROW_TILE / C; }

// Row groups for the per-channel elementwise loops: with C not a multiple of 16 a row leaves a
// partial vector that the compiler runs scalar (C = 24 on AVX-512: 16 lanes, then 8 scalar, which
// made the tiny stem's BN ~4× slower per element than C = 96's). g rows with g·C a multiple of 16
// run as one flat loop over coefficients repeated g times (cpu_repeat_coefs), every element's
// arithmetic unchanged. Returns 1 when C needs no grouping or g·C would exceed CPU_GROUP_MAX.
#define CPU_GROUP_MAX 512
static inline int64_t cpu_group_rows(int64_t C) {
    if (C <= 0 || C % 16 == 0) return 1;
    int64_t a = C, b = 16;
    while (b) {
        const int64_t t = a % b;
        a = b, b = t;
    }
    const int64_t g = 16 / a;
    return g * C <= CPU_GROUP_MAX ? g : 1;
}
// dst (L) = src repeated: dst[j] = src[j mod C].
static inline void cpu_repeat_coefs(float *dst, const float *src, int64_t C, int64_t L) {
    for (int64_t j = 0; j < L; j++) dst[j] = src[j % C];
}

// y (n) = act(x), dx (n) = dy · act'(x) on the calling thread (activation.c's loops); y may
// equal x and dx may equal dy.
void ocr_cpu_act_forward_tile(float *y, const float *x, int64_t n, ocr_activation_t act);
void ocr_cpu_act_backward_tile(float *dx, const float *dy, const float *x, int64_t n, ocr_activation_t act);
// Both at once (y = act(x), dx = dy · act'(x), each the bits of the call above), sharing what the
// two formulas compute alike; dx may equal dy.
void ocr_cpu_act_forward_backward_tile(float *y, float *dx, const float *dy, const float *x, int64_t n,
                                       ocr_activation_t act);

// y (n) = a + b and y (n) = alpha·x on the calling thread (elementwise.c's add and scale loops,
// the bits of accumulate and scale_forward); y may equal an input.
void ocr_cpu_add_tile(float *y, const float *a, const float *b, int64_t n);
void ocr_cpu_scale_tile(float *y, const float *x, float alpha, int64_t n);

// v (n) = v rounded to dt and back (nearest even, the bulk conversions ocr_cpu_f32_store uses; a
// no-op for f32); tmp holds n uint16 (used for f16 only). The intermediates of the fused ops
// (bn_act.c, affine.c) go through it so they carry the bits of a dt tensor between two ops.
void ocr_cpu_round_tile(float *v, int64_t n, ocr_dtype_t dt, uint16_t *tmp);

// mean, var (C, double) = batch mean and biased variance of x viewed as (M, C), any float dtype,
// widened a tile at a time; bitwise the same for any thread count and vector level.
void ocr_cpu_bn_batch_stats_rows(double *mean, double *var, const OcrTensor *x, int64_t M, int64_t C, CpuScratch *s);
// v (rows, C) = (x − mf)·af + bf per channel (BN's normalised value).
void ocr_cpu_bn_value_tile(float *v, const float *x, const float *mf, const float *af, const float *bf, int64_t rows,
                           int64_t C);
// p1 (C) += Σ_rows g, p2 (C) += Σ_rows g·(x − mean), in double, rows in order.
void ocr_cpu_bn_sums_tile(double *p1, double *p2, const float *x, const float *g, const float *mean, int64_t rows,
                          int64_t C);
// The same with g = dy on bf16 maps, converted in registers (same bits).
void ocr_cpu_bn_sums_tile_bf16(double *p1, double *p2, const uint16_t *x, const uint16_t *g, const float *mean,
                               int64_t rows, int64_t C);
// dx (rows, C) = a·g + b·(x − mean) + k per channel; dx may equal g.
// The same on bf16 maps, converted in registers (same bits); dx may equal g.
void ocr_cpu_bn_dx_tile_bf16(uint16_t *dx, const uint16_t *g, const uint16_t *x, const float *mean, const float *a,
                             const float *b, const float *k, int64_t rows, int64_t C);
void ocr_cpu_bn_dx_tile(float *dx, const float *g, const float *x, const float *mean, const float *a, const float *b,
                        const float *k, int64_t rows, int64_t C);

#endif

// Dropout and drop path (CPU). No mask is stored: element i keeps when
// uniform(seed, stream, offset + i) >= p, and the backward draws the same numbers again.
#include <string.h>

#include "core/rng.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/ops.h"

// Elements per parallel chunk; a multiple of 4 so chunks start on a Philox block.
#define DROPOUT_CHUNK 4096

// f16/bf16 tensors are read and written in their own dtype: each chunk is widened into a buffer
// on the stack, scaled and rounded back while it is in cache, instead of widening the whole
// tensor into an fp32 copy and rounding a second one back. Per element it is the same product,
// so the results are the bits of that whole-tensor path, which Global.cpu_exact_numerics keeps
// as the reference (ocr_cpu_tiled_in / ocr_cpu_tiled_out).

// y[i] = x[i] · (keep_i ? keep_scale : 0) for i < m, keep_i drawn at index offset + first + i.
// One Philox call yields four consecutive draws, so the block is cached.
static void masked_scale(float *y, const float *x, int64_t first, int64_t m, float p, float keep_scale,
                         const DropoutParams *d) {
    uint32_t blk[4];
    uint64_t cached = UINT64_MAX;
    for (int64_t i = 0; i < m; i++) {
        uint64_t idx = d->offset + (uint64_t)(first + i);
        if ((idx >> 2) != cached) {
            cached = idx >> 2;
            uint32_t ctr[4] = {(uint32_t)cached, (uint32_t)(cached >> 32), (uint32_t)d->stream,
                               (uint32_t)(d->stream >> 32)};
            uint32_t key[2] = {(uint32_t)d->seed, (uint32_t)(d->seed >> 32)};
            ocr_philox4x32_10(ctr, key, blk);
        }
        int keep = ocr_rng_u32_to_uniform(blk[idx & 3]) >= p;
        y[i] = keep ? x[i] * keep_scale : 0.0f;
    }
}

// What dropout_apply does to every element.
typedef enum { DROP_ALL, DROP_MASKED, DROP_SCALE } DropMode;

// Shared body of the forward and the backward: both apply the same elementwise factor.
static void dropout_apply(OcrTensor *y_t, const OcrTensor *x_t, const DropoutParams *d) {
    CPU_ASSERT_FLOAT(y_t);
    CPU_ASSERT_FLOAT(x_t);
    OCR_ASSERT(ocr_tensor_numel(y_t) == ocr_tensor_numel(x_t), "dropout: element counts differ");
    OCR_ASSERT(d->p >= 0.0f && d->p <= 1.0f, "dropout: p = %g outside [0, 1]", (double)d->p);
    const int64_t n = ocr_tensor_numel(x_t);
    CpuScratch s = {0};
    OcrTensor vx, vy;
    float *whole;
    const OcrTensor *X = ocr_cpu_tiled_in(&s, x_t, &vx);
    OcrTensor *Y = ocr_cpu_tiled_out(&s, y_t, &vy, 0, &whole);
    const int upscale = d->mode == OCR_DROPOUT_UPSCALE_IN_TRAIN;
    DropMode mode = DROP_SCALE;
    float keep_scale = 1.0f;
    if (d->training && d->p > 0.0f) {
        mode = d->p >= 1.0f ? DROP_ALL : DROP_MASKED;  // p = 1: every draw is < 1, all dropped
        keep_scale = upscale ? 1.0f / (1.0f - d->p) : 1.0f;
    } else {
        // Inference (or p = 0): identity, except downscale-in-infer multiplies by 1 − p.
        keep_scale = (!upscale && !d->training) ? 1.0f - d->p : 1.0f;
    }
    const int64_t chunks = (n + DROPOUT_CHUNK - 1) / DROPOUT_CHUNK;
    // y_t may be x_t (in place): each chunk is read before it is written.
#pragma omp parallel for schedule(static) if (mode == DROP_MASKED ? chunks > 1 : n > 32768)
    for (int64_t c = 0; c < chunks; c++) {
        float bx[DROPOUT_CHUNK], by[DROPOUT_CHUNK];
        const int64_t lo = c * DROPOUT_CHUNK, m = n - lo < DROPOUT_CHUNK ? n - lo : DROPOUT_CHUNK;
        float *y = ocr_cpu_rows_dst(Y, 1, lo, by);
        if (mode == DROP_ALL) {
            memset(y, 0, (size_t)m * sizeof(float));
        } else {
            const float *x = ocr_cpu_rows_in(X, 1, lo, m, bx);
            if (mode == DROP_MASKED)
                masked_scale(y, x, lo, m, d->p, keep_scale, d);
            else
                for (int64_t i = 0; i < m; i++) y[i] = x[i] * keep_scale;
        }
        ocr_cpu_rows_out(Y, 1, lo, m, y);
    }
    if (whole) ocr_cpu_f32_store(y_t, whole);
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_dropout_forward(OcrTensor *out, const OcrTensor *inp, DropoutParams d) { dropout_apply(out, inp, &d); }

void ocr_cpu_dropout_backward(OcrTensor *dinp, const OcrTensor *dout, DropoutParams d) {
    if (!dinp) return;
    dropout_apply(dinp, dout, &d);
}

// Drop path on (N, ...): sample n keeps with draw offset + n >= p and is scaled by 1/(1 − p)
// (Paddle divides by keep_prob whatever the dropout mode); identity in inference.
static void droppath_apply(OcrTensor *y_t, const OcrTensor *x_t, const DropoutParams *d) {
    CPU_ASSERT_FLOAT(y_t);
    CPU_ASSERT_FLOAT(x_t);
    OCR_ASSERT(ocr_tensor_same_shape(y_t, x_t), "droppath: shapes differ");
    OCR_ASSERT(d->p >= 0.0f && d->p <= 1.0f, "droppath: p = %g outside [0, 1]", (double)d->p);
    int64_t n = ocr_tensor_numel(x_t);
    int64_t N = x_t->shape[0];
    int64_t per = N > 0 ? n / N : 0;
    CpuScratch s = {0};
    OcrTensor vx, vy;
    float *whole;
    const OcrTensor *X = ocr_cpu_tiled_in(&s, x_t, &vx);
    OcrTensor *Y = ocr_cpu_tiled_out(&s, y_t, &vy, 0, &whole);
    int active = d->training && d->p > 0.0f;
    float keep_scale = d->p < 1.0f ? 1.0f / (1.0f - d->p) : 0.0f;
    // Each sample in chunks (widened and rounded as in dropout_apply).
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t b = 0; b < N; b++) {
        float f = 1.0f;
        if (active) f = ocr_rng_uniform(d->seed, d->stream, d->offset + (uint64_t)b) >= d->p ? keep_scale : 0.0f;
        for (int64_t i0 = 0; i0 < per; i0 += DROPOUT_CHUNK) {
            float bx[DROPOUT_CHUNK], by[DROPOUT_CHUNK];
            const int64_t lo = b * per + i0, m = per - i0 < DROPOUT_CHUNK ? per - i0 : DROPOUT_CHUNK;
            float *yb = ocr_cpu_rows_dst(Y, 1, lo, by);
            if (f == 0.0f) {
                for (int64_t i = 0; i < m; i++) yb[i] = 0.0f;  // a dropped sample gives zeros even for inf/NaN
            } else {
                const float *xb = ocr_cpu_rows_in(X, 1, lo, m, bx);
                for (int64_t i = 0; i < m; i++) yb[i] = xb[i] * f;
            }
            ocr_cpu_rows_out(Y, 1, lo, m, yb);
        }
    }
    if (whole) ocr_cpu_f32_store(y_t, whole);
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_droppath_forward(OcrTensor *out, const OcrTensor *inp, DropoutParams d) { droppath_apply(out, inp, &d); }

void ocr_cpu_droppath_backward(OcrTensor *dinp, const OcrTensor *dout, DropoutParams d) {
    if (!dinp) return;
    droppath_apply(dinp, dout, &d);
}

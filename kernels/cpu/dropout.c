// Dropout and drop path (CPU). No mask is stored: element i keeps when
// uniform(seed, stream, offset + i) >= p, and the backward draws the same numbers again.
#include <string.h>

#include "core/rng.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/ops.h"

// Elements per parallel chunk; a multiple of 4 so chunks start on a Philox block.
#define DROPOUT_CHUNK 4096

// y[i] = x[i] · (keep_i ? keep_scale : 0) for i in [lo, hi), keep_i drawn at index offset + i.
// One Philox call yields four consecutive draws, so the block is cached.
static void masked_scale(float *y, const float *x, int64_t lo, int64_t hi, float p, float keep_scale,
                         const DropoutParams *d) {
    uint32_t blk[4];
    uint64_t cached = UINT64_MAX;
    for (int64_t i = lo; i < hi; i++) {
        uint64_t idx = d->offset + (uint64_t)i;
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

// Shared body of the forward and the backward: both apply the same elementwise factor.
static void dropout_apply(OcrTensor *y_t, const OcrTensor *x_t, const DropoutParams *d) {
    CPU_ASSERT_FLOAT(y_t);
    CPU_ASSERT_FLOAT(x_t);
    OCR_ASSERT(ocr_tensor_numel(y_t) == ocr_tensor_numel(x_t), "dropout: element counts differ");
    OCR_ASSERT(d->p >= 0.0f && d->p <= 1.0f, "dropout: p = %g outside [0, 1]", (double)d->p);
    int64_t n = ocr_tensor_numel(x_t);
    CpuScratch s = {0};
    const float *x = cpu_f32_in(&s, x_t);
    float *y = cpu_f32_out(&s, y_t, 0);
    int upscale = d->mode == OCR_DROPOUT_UPSCALE_IN_TRAIN;
    if (d->training && d->p > 0.0f) {
        if (d->p >= 1.0f) {
            memset(y, 0, (size_t)n * sizeof(float));  // every draw is < 1: all dropped
        } else {
            float keep_scale = upscale ? 1.0f / (1.0f - d->p) : 1.0f;
            int64_t chunks = (n + DROPOUT_CHUNK - 1) / DROPOUT_CHUNK;
#pragma omp parallel for schedule(static) if (chunks > 1)
            for (int64_t c = 0; c < chunks; c++) {
                int64_t lo = c * DROPOUT_CHUNK, hi = lo + DROPOUT_CHUNK < n ? lo + DROPOUT_CHUNK : n;
                masked_scale(y, x, lo, hi, d->p, keep_scale, d);
            }
        }
    } else {
        // Inference (or p = 0): identity, except downscale-in-infer multiplies by 1 − p.
        float f = (!upscale && !d->training) ? 1.0f - d->p : 1.0f;
#pragma omp parallel for schedule(static) if (n > 32768)
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * f;
    }
    cpu_f32_store(y_t, y);
    cpu_scratch_free(&s);
}

void dropout_forward_cpu(OcrTensor *out, const OcrTensor *inp, DropoutParams d) { dropout_apply(out, inp, &d); }

void dropout_backward_cpu(OcrTensor *dinp, const OcrTensor *dout, DropoutParams d) {
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
    const float *x = cpu_f32_in(&s, x_t);
    float *y = cpu_f32_out(&s, y_t, 0);
    int active = d->training && d->p > 0.0f;
    float keep_scale = d->p < 1.0f ? 1.0f / (1.0f - d->p) : 0.0f;
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t b = 0; b < N; b++) {
        float f = 1.0f;
        if (active) f = ocr_rng_uniform(d->seed, d->stream, d->offset + (uint64_t)b) >= d->p ? keep_scale : 0.0f;
        const float *xb = x + b * per;
        float *yb = y + b * per;
        if (f == 0.0f) {
            for (int64_t i = 0; i < per; i++) yb[i] = 0.0f;  // a dropped sample gives zeros even for inf/NaN
        } else {
            for (int64_t i = 0; i < per; i++) yb[i] = xb[i] * f;
        }
    }
    cpu_f32_store(y_t, y);
    cpu_scratch_free(&s);
}

void droppath_forward_cpu(OcrTensor *out, const OcrTensor *inp, DropoutParams d) { droppath_apply(out, inp, &d); }

void droppath_backward_cpu(OcrTensor *dinp, const OcrTensor *dout, DropoutParams d) {
    if (!dinp) return;
    droppath_apply(dinp, dout, &d);
}

// Softmax and log-softmax over the last dimension (CPU, fp32 compute for any float dtype).
//
// A row whose entries are all −inf (a fully masked row) has no defined softmax; it gives
// zeros (softmax) or −inf (log-softmax) instead of NaN so one empty row cannot poison a batch.
#include <math.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/ops.h"

// rows × C view of a tensor whose last dimension is C.
static void row_shape(const OcrTensor *t, int64_t *rows, int64_t *C) {
    *C = ocr_tensor_dim(t, -1);
    *rows = *C > 0 ? ocr_tensor_numel(t) / *C : 0;
}

// out (..., C) = softmax(inp) over C; out may alias inp.
void ocr_cpu_softmax_forward(OcrTensor *out, const OcrTensor *inp) {
    CPU_ASSERT_FLOAT(out);
    CPU_ASSERT_FLOAT(inp);
    OCR_ASSERT(ocr_tensor_same_shape(out, inp), "softmax: out and inp shapes differ");
    int64_t rows, C;
    row_shape(inp, &rows, &C);
    CpuScratch s = {0};
    const float *x = ocr_cpu_f32_in(&s, inp);
    float *y = ocr_cpu_f32_out(&s, out, 0);
#pragma omp parallel for schedule(static) if (rows * C > 16384)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C;
        float mx = -INFINITY;
        for (int64_t j = 0; j < C; j++) mx = fmaxf(mx, xr[j]);
        if (mx == -INFINITY) {
            for (int64_t j = 0; j < C; j++) yr[j] = 0.0f;
            continue;
        }
        // The sum is kept in double: with one dominant term near 1 and thousands of tiny ones
        // (a confident step over 6625 classes), a float sum drops every term below half an ulp
        // of the running total and comes out ~3e-5 low, which scales every probability up.
        double sum = 0.0;
        for (int64_t j = 0; j < C; j++) {
            float e = expf(xr[j] - mx);  // reads xr[j] before the (possibly aliased) write
            yr[j] = e;
            sum += e;
        }
        double inv = 1.0 / sum;
        for (int64_t j = 0; j < C; j++) yr[j] = (float)(yr[j] * inv);
    }
    ocr_cpu_f32_store(out, y);
    ocr_cpu_scratch_free(&s);
}

// dinp (..., C) = out · (dout − Σ_C dout·out).
void ocr_cpu_softmax_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *out) {
    if (!dinp) return;
    CPU_ASSERT_FLOAT(dinp);
    CPU_ASSERT_FLOAT(dout);
    CPU_ASSERT_FLOAT(out);
    OCR_ASSERT(ocr_tensor_same_shape(dinp, out) && ocr_tensor_same_shape(dout, out), "softmax_backward: shapes differ");
    int64_t rows, C;
    row_shape(out, &rows, &C);
    CpuScratch s = {0};
    const float *y = ocr_cpu_f32_in(&s, out);
    const float *dy = ocr_cpu_f32_in(&s, dout);
    float *dx = ocr_cpu_f32_out(&s, dinp, 0);
#pragma omp parallel for schedule(static) if (rows * C > 16384)
    for (int64_t r = 0; r < rows; r++) {
        const float *yr = y + r * C, *dyr = dy + r * C;
        float *dxr = dx + r * C;
        float dot = 0.0f;
        for (int64_t j = 0; j < C; j++) dot += dyr[j] * yr[j];
        for (int64_t j = 0; j < C; j++) dxr[j] = yr[j] * (dyr[j] - dot);
    }
    ocr_cpu_f32_store(dinp, dx);
    ocr_cpu_scratch_free(&s);
}

// out (..., C) = inp − max − log Σ exp(inp − max); out may alias inp.
void ocr_cpu_log_softmax_forward(OcrTensor *out, const OcrTensor *inp) {
    CPU_ASSERT_FLOAT(out);
    CPU_ASSERT_FLOAT(inp);
    OCR_ASSERT(ocr_tensor_same_shape(out, inp), "log_softmax: out and inp shapes differ");
    int64_t rows, C;
    row_shape(inp, &rows, &C);
    CpuScratch s = {0};
    const float *x = ocr_cpu_f32_in(&s, inp);
    float *y = ocr_cpu_f32_out(&s, out, 0);
#pragma omp parallel for schedule(static) if (rows * C > 16384)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C;
        float mx = -INFINITY;
        for (int64_t j = 0; j < C; j++) mx = fmaxf(mx, xr[j]);
        if (mx == -INFINITY) {
            for (int64_t j = 0; j < C; j++) yr[j] = -INFINITY;
            continue;
        }
        double sum = 0.0;  // double for the same reason as in ocr_cpu_softmax_forward
        for (int64_t j = 0; j < C; j++) sum += expf(xr[j] - mx);
        float shift = mx + (float)log(sum);
        for (int64_t j = 0; j < C; j++) yr[j] = xr[j] - shift;
    }
    ocr_cpu_f32_store(out, y);
    ocr_cpu_scratch_free(&s);
}

// dinp (..., C) = dout − exp(out) · Σ_C dout.
void ocr_cpu_log_softmax_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *out) {
    if (!dinp) return;
    CPU_ASSERT_FLOAT(dinp);
    CPU_ASSERT_FLOAT(dout);
    CPU_ASSERT_FLOAT(out);
    OCR_ASSERT(ocr_tensor_same_shape(dinp, out) && ocr_tensor_same_shape(dout, out),
               "log_softmax_backward: shapes differ");
    int64_t rows, C;
    row_shape(out, &rows, &C);
    CpuScratch s = {0};
    const float *y = ocr_cpu_f32_in(&s, out);
    const float *dy = ocr_cpu_f32_in(&s, dout);
    float *dx = ocr_cpu_f32_out(&s, dinp, 0);
#pragma omp parallel for schedule(static) if (rows * C > 16384)
    for (int64_t r = 0; r < rows; r++) {
        const float *yr = y + r * C, *dyr = dy + r * C;
        float *dxr = dx + r * C;
        float sum = 0.0f;
        for (int64_t j = 0; j < C; j++) sum += dyr[j];
        for (int64_t j = 0; j < C; j++) dxr[j] = dyr[j] - expf(yr[j]) * sum;
    }
    ocr_cpu_f32_store(dinp, dx);
    ocr_cpu_scratch_free(&s);
}

// The uint8 input normalisation of kernels/input.h on the CPU: a 256-entry table of the float32
// values, so every pixel is one load (the CUDA twin, kernels/cuda/input.cu, computes them).
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/input.h"

void ocr_input_normalize_lut(float lut[256]) {
    // volatile keeps the three steps apart, exactly as written (no contraction, no reordering).
    for (int p = 0; p < 256; p++) {
        volatile float x = (float)p;
        volatile float a = x / 255.0f;
        volatile float b = a - 0.5f;
        lut[p] = b / 0.5f;
    }
}

// One image row of W·C pixels: the first `valid` columns through the table, the rest 0.
#define NORMALIZE_ROW(T, table, zero)                                        \
    do {                                                                     \
        T *y = (T *)out->data + r * WC;                                      \
        const uint8_t *x = p + r * WC;                                       \
        int64_t v = valid[r / H] * C;                                        \
        for (int64_t i = 0; i < v; i++) y[i] = table[x[i]];                  \
        for (int64_t i = v; i < WC; i++) y[i] = zero;                        \
    } while (0)

void ocr_cpu_input_normalize_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *widths) {
    OCR_ASSERT(inp->dtype == OCR_U8 && inp->device.type == OCR_DEVICE_CPU, "input_normalize: inp must be a CPU uint8 tensor");
    CPU_ASSERT_FLOAT(out);
    OCR_ASSERT(ocr_tensor_same_shape(out, inp), "input_normalize: out and inp shapes differ");
    OCR_ASSERT(inp->ndim == 4 || !widths, "input_normalize: widths need an (N, H, W, C) batch");
    const int64_t N = inp->shape[0];
    const int64_t H = inp->ndim == 4 ? inp->shape[1] : 1;
    const int64_t W = inp->ndim == 4 ? inp->shape[2] : ocr_tensor_numel(inp) / (N > 0 ? N : 1);
    const int64_t C = inp->ndim == 4 ? inp->shape[3] : 1;
    const int64_t WC = W * C, rows = N * H;
    if (rows == 0 || WC == 0) return;
    int64_t *valid = malloc((size_t)N * sizeof *valid);
    OCR_ASSERT(valid, "out of host memory");
    if (widths) {
        OCR_ASSERT(widths->dtype == OCR_I32 && widths->device.type == OCR_DEVICE_CPU && ocr_tensor_numel(widths) == N,
                   "input_normalize: widths must be a CPU int32 tensor of %lld elements", (long long)N);
        const int32_t *w = widths->data;
        for (int64_t b = 0; b < N; b++) valid[b] = w[b] < 0 ? 0 : w[b] > W ? W : w[b];
    } else {
        for (int64_t b = 0; b < N; b++) valid[b] = W;
    }
    float lut[256];
    ocr_input_normalize_lut(lut);
    const uint8_t *p = inp->data;
    if (out->dtype == OCR_F32) {
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; r++) NORMALIZE_ROW(float, lut, 0.0f);
    } else if (out->dtype == OCR_F16) {
        ocr_f16_t l16[256];
        for (int i = 0; i < 256; i++) l16[i] = ocr_f32_to_f16(lut[i]);
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; r++) NORMALIZE_ROW(ocr_f16_t, l16, (ocr_f16_t)0);
    } else {
        ocr_bf16_t lb[256];
        for (int i = 0; i < 256; i++) lb[i] = ocr_f32_to_bf16(lut[i]);
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; r++) NORMALIZE_ROW(ocr_bf16_t, lb, (ocr_bf16_t)0);
    }
    free(valid);
}

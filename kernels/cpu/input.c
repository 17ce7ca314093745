#include <string.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/input.h"

void input_normalize_lut(float lut[256]) {
    // volatile keeps the three steps apart, exactly as written (no contraction, no reordering).
    for (int p = 0; p < 256; p++) {
        volatile float x = (float)p;
        volatile float a = x / 255.0f;
        volatile float b = a - 0.5f;
        lut[p] = b / 0.5f;
    }
}

void input_normalize_forward_cpu(OcrTensor *out, const OcrTensor *inp) {
    OCR_ASSERT(inp->dtype == OCR_U8 && inp->device.type == OCR_DEVICE_CPU, "input_normalize: inp must be a CPU uint8 tensor");
    CPU_ASSERT_FLOAT(out);
    OCR_ASSERT(ocr_tensor_same_shape(out, inp), "input_normalize: out and inp shapes differ");
    float lut[256];
    input_normalize_lut(lut);
    const uint8_t *p = inp->data;
    int64_t n = ocr_tensor_numel(inp);
    if (out->dtype == OCR_F32) {
        float *y = out->data;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) y[i] = lut[p[i]];
    } else if (out->dtype == OCR_F16) {
        ocr_f16_t l16[256];
        for (int i = 0; i < 256; i++) l16[i] = ocr_f32_to_f16(lut[i]);
        ocr_f16_t *y = out->data;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) y[i] = l16[p[i]];
    } else {
        ocr_bf16_t lb[256];
        for (int i = 0; i < 256; i++) lb[i] = ocr_f32_to_bf16(lut[i]);
        ocr_bf16_t *y = out->data;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) y[i] = lb[p[i]];
    }
}

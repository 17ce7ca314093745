// Bulk f16/bf16 conversions. Scalar versions for now; a helper adds the SIMD paths.
#include "core/half.h"

static int force_scalar;
void ocr_half_force_scalar(int force) { force_scalar = force; }
const char *ocr_half_f16_path(void) { return "scalar"; }
const char *ocr_half_bf16_path(void) { return "scalar"; }

void ocr_f32_to_f16_array(ocr_f16_t *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = ocr_f32_to_f16(src[i]);
}
void ocr_f16_to_f32_array(float *dst, const ocr_f16_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = ocr_f16_to_f32(src[i]);
}
void ocr_f32_to_bf16_array(ocr_bf16_t *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = ocr_f32_to_bf16(src[i]);
}
void ocr_bf16_to_f32_array(float *dst, const ocr_bf16_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = ocr_bf16_to_f32(src[i]);
}

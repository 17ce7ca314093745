#include "kernels/cpu/cpu_common.h"

#include <omp.h>
#include <string.h>

// Conversions are per element, so splitting them across threads cannot change results;
// small tensors stay on one thread.
#define CONVERT_CHUNK ((size_t)1 << 16)

static void to_f32_parallel(const OcrTensor *t, float *dst) {
    const size_t n = (size_t)ocr_tensor_numel(t);
    if (t->dtype == OCR_F32 || n < 4 * CONVERT_CHUNK) {
        ocr_tensor_to_f32(t, dst);
        return;
    }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i += CONVERT_CHUNK) {
        size_t m = n - i < CONVERT_CHUNK ? n - i : CONVERT_CHUNK;
        if (t->dtype == OCR_F16)
            ocr_f16_to_f32_array(dst + i, (const ocr_f16_t *)t->data + i, m);
        else
            ocr_bf16_to_f32_array(dst + i, (const ocr_bf16_t *)t->data + i, m);
    }
}

static void from_f32_parallel(OcrTensor *t, const float *src) {
    const size_t n = (size_t)ocr_tensor_numel(t);
    if (t->dtype == OCR_F32 || n < 4 * CONVERT_CHUNK) {
        ocr_tensor_from_f32(t, src);
        return;
    }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i += CONVERT_CHUNK) {
        size_t m = n - i < CONVERT_CHUNK ? n - i : CONVERT_CHUNK;
        if (t->dtype == OCR_F16)
            ocr_f32_to_f16_array((ocr_f16_t *)t->data + i, src + i, m);
        else
            ocr_f32_to_bf16_array((ocr_bf16_t *)t->data + i, src + i, m);
    }
}

void *cpu_scratch_bytes(CpuScratch *s, size_t bytes) {
    OCR_ASSERT(s->count < CPU_SCRATCH_MAX, "too many scratch buffers in one op");
    void *p = ocr_workspace_push(bytes);
    s->ptrs[s->count++] = p;
    return p;
}

float *cpu_scratch_floats(CpuScratch *s, size_t n) { return cpu_scratch_bytes(s, n * sizeof(float)); }

const float *cpu_f32_in(CpuScratch *s, const OcrTensor *t) {
    CPU_ASSERT_FLOAT(t);
    if (t->dtype == OCR_F32) return (const float *)t->data;
    float *buf = cpu_scratch_floats(s, (size_t)ocr_tensor_numel(t));
    to_f32_parallel(t, buf);
    return buf;
}

float *cpu_f32_out(CpuScratch *s, OcrTensor *t, int load_existing) {
    CPU_ASSERT_FLOAT(t);
    if (t->dtype == OCR_F32) return (float *)t->data;
    float *buf = cpu_scratch_floats(s, (size_t)ocr_tensor_numel(t));
    if (load_existing) to_f32_parallel(t, buf);
    return buf;
}

void cpu_f32_store(OcrTensor *t, const float *buf) {
    if (buf == t->data) return;
    from_f32_parallel(t, buf);
}

void cpu_scratch_free(CpuScratch *s) {
    while (s->count > 0) ocr_workspace_pop(s->ptrs[--s->count]);
}

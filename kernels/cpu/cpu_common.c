#include "kernels/cpu/cpu_common.h"

#include <string.h>

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
    ocr_tensor_to_f32(t, buf);
    return buf;
}

float *cpu_f32_out(CpuScratch *s, OcrTensor *t, int load_existing) {
    CPU_ASSERT_FLOAT(t);
    if (t->dtype == OCR_F32) return (float *)t->data;
    float *buf = cpu_scratch_floats(s, (size_t)ocr_tensor_numel(t));
    if (load_existing) ocr_tensor_to_f32(t, buf);
    return buf;
}

void cpu_f32_store(OcrTensor *t, const float *buf) {
    if (buf == t->data) return;
    ocr_tensor_from_f32(t, buf);
}

void cpu_scratch_free(CpuScratch *s) {
    while (s->count > 0) ocr_workspace_pop(s->ptrs[--s->count]);
}

// Helpers shared by the CPU kernels: fp32 views of tensors of any float dtype.
//
// CPU kernels compute in fp32. An f32 tensor is used in place; an f16/bf16 one is converted
// into workspace scratch on the way in and rounded back on the way out, which is exactly
// what a GPU kernel storing low precision does.
//
//   CpuScratch s = {0};
//   const float *x = cpu_f32_in(&s, inp);
//   float *y = cpu_f32_out(&s, out, 0);
//   ... compute y from x ...
//   cpu_f32_store(out, y);
//   cpu_scratch_free(&s);
#ifndef OCR_KERNELS_CPU_COMMON_H
#define OCR_KERNELS_CPU_COMMON_H

#include <stddef.h>

#include "core/tensor.h"

#define CPU_SCRATCH_MAX 24
typedef struct {
    void *ptrs[CPU_SCRATCH_MAX];
    int count;
} CpuScratch;

// fp32 data of a float tensor (the tensor's own memory when it is f32).
const float *cpu_f32_in(CpuScratch *s, const OcrTensor *t);
// A buffer to compute t's values into; with load_existing the current values are loaded
// (for outputs that accumulate, like weight gradients).
float *cpu_f32_out(CpuScratch *s, OcrTensor *t, int load_existing);
// Writes buf back into t (rounding to t's dtype); nothing to do when buf is t's memory.
void cpu_f32_store(OcrTensor *t, const float *buf);
// Uninitialised scratch of n floats (or bytes, for the _bytes form).
float *cpu_scratch_floats(CpuScratch *s, size_t n);
void *cpu_scratch_bytes(CpuScratch *s, size_t bytes);
// Returns every buffer to the workspace (in reverse order).
void cpu_scratch_free(CpuScratch *s);

// Asserts that t lives on the CPU and has a float dtype.
#define CPU_ASSERT_FLOAT(t) \
    OCR_ASSERT((t)->device.type == OCR_DEVICE_CPU && ocr_dtype_is_float((t)->dtype), "%s must be a CPU float tensor", #t)

#endif

// CUDA twins of the optimizer ops of kernels/ops.h.
#ifndef OCR_KERNELS_CUDA_OPTIM_H
#define OCR_KERNELS_CUDA_OPTIM_H

// The core headers are C: included with C linkage from the .cu files too.
#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/ops.h"

void adam_update_cuda(OcrTensor *param, OcrTensor *master, OcrTensor *m, OcrTensor *v, const OcrTensor *grad,
                      AdamParams p);
// These return host values, so they synchronise the stream.
double grad_global_norm_cuda(OcrTensor *const *grads, int count);
double clip_grad_global_norm_cuda(OcrTensor *const *grads, int count, float max_norm);

#ifdef __cplusplus
}
#endif
#endif

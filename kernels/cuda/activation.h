// CUDA twins of the activation ops of kernels/ops.h.
#ifndef OCR_KERNELS_CUDA_ACTIVATION_H
#define OCR_KERNELS_CUDA_ACTIVATION_H

// The core headers are C: included with C linkage from the .cu files too.
#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/ops.h"

void activation_forward_cuda(OcrTensor *out, const OcrTensor *inp, ocr_activation_t act);
void activation_backward_cuda(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *inp, ocr_activation_t act);

#ifdef __cplusplus
}
#endif
#endif

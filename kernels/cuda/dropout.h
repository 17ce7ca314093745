// CUDA twins of the dropout and drop-path ops of kernels/ops.h.
#ifndef OCR_KERNELS_CUDA_DROPOUT_H
#define OCR_KERNELS_CUDA_DROPOUT_H

// The core headers are C: included with C linkage from the .cu files too.
#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/ops.h"

void dropout_forward_cuda(OcrTensor *out, const OcrTensor *inp, DropoutParams d);
void dropout_backward_cuda(OcrTensor *dinp, const OcrTensor *dout, DropoutParams d);
void droppath_forward_cuda(OcrTensor *out, const OcrTensor *inp, DropoutParams d);
void droppath_backward_cuda(OcrTensor *dinp, const OcrTensor *dout, DropoutParams d);

#ifdef __cplusplus
}
#endif
#endif

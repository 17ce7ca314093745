// CUDA twins of the pooling ops of kernels/ops.h.
#ifndef OCR_KERNELS_CUDA_POOL_H
#define OCR_KERNELS_CUDA_POOL_H

// The core headers are C: included with C linkage from the .cu files too.
#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/ops.h"

void avgpool2d_forward_cuda(OcrTensor *out, const OcrTensor *inp, Pool2dParams p);
void avgpool2d_backward_cuda(OcrTensor *dinp, const OcrTensor *dout, Pool2dParams p);
void maxpool2d_forward_cuda(OcrTensor *out, const OcrTensor *inp, Pool2dParams p);
void maxpool2d_backward_cuda(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *inp, Pool2dParams p);
void adaptive_avgpool2d_forward_cuda(OcrTensor *out, const OcrTensor *inp);
void adaptive_avgpool2d_backward_cuda(OcrTensor *dinp, const OcrTensor *dout);

#ifdef __cplusplus
}
#endif
#endif

// CUDA twins of the convolution ops of kernels/ops.h.
#ifndef OCR_KERNELS_CUDA_CONV_H
#define OCR_KERNELS_CUDA_CONV_H

// The core headers are C: included with C linkage from the .cu files too.
#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/ops.h"

void conv2d_forward_cuda(OcrTensor *out, const OcrTensor *inp, const OcrTensor *weight, const OcrTensor *bias,
                         Conv2dParams p);
void conv2d_backward_cuda(OcrTensor *dinp, OcrTensor *dweight, OcrTensor *dbias, const OcrTensor *dout,
                          const OcrTensor *inp, const OcrTensor *weight, Conv2dParams p);

// Test and benchmark hook: 1 runs depthwise convolutions through cuDNN (grouped) instead of
// the own kernel; returns the previous setting. Ignored without cuDNN.
int ocr_cuda_conv2d_depthwise_cudnn(int on);

#ifdef __cplusplus
}
#endif
#endif

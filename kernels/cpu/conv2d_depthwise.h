// Depthwise 2-D convolution loops (conv2d_depthwise.c), called by conv2d.c for groups == C == OC.
// Maps are tensors of any float dtype (f16/bf16 widened and rounded a block of rows at a time,
// bit for bit the fp32 computation); weight (C, KH, KW, 1), bias (C), dweight and dbias are fp32
// (dweight/dbias accumulate). Shapes: inp/dinp (N, H, W, C), out/dout (N, Ho, Wo, C).
#ifndef OCR_KERNELS_CPU_CONV2D_DEPTHWISE_H
#define OCR_KERNELS_CPU_CONV2D_DEPTHWISE_H

#include <stdint.h>

#include "core/tensor.h"
#include "kernels/ops.h"

void ocr_cpu_conv2d_depthwise_forward(OcrTensor *out, const OcrTensor *inp, const float *weight, const float *bias,
                                      int64_t N, int64_t H, int64_t W, int64_t C, int64_t KH, int64_t KW, int64_t Ho,
                                      int64_t Wo, Conv2dParams p);
void ocr_cpu_conv2d_depthwise_backward(OcrTensor *dinp, float *dweight, float *dbias, const OcrTensor *dout,
                                       const OcrTensor *inp, const float *weight, int64_t N, int64_t H, int64_t W,
                                       int64_t C, int64_t KH, int64_t KW, int64_t Ho, int64_t Wo, Conv2dParams p);

#endif

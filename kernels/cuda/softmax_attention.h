// CUDA twins of the softmax and attention ops of kernels/ops.h.
#ifndef OCR_KERNELS_CUDA_SOFTMAX_ATTENTION_H
#define OCR_KERNELS_CUDA_SOFTMAX_ATTENTION_H

// The core headers are C: included with C linkage from the .cu files too.
#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/ops.h"

void softmax_forward_cuda(OcrTensor *out, const OcrTensor *inp);
void softmax_backward_cuda(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *out);
void log_softmax_forward_cuda(OcrTensor *out, const OcrTensor *inp);
void log_softmax_backward_cuda(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *out);
void attention_forward_cuda(OcrTensor *out, OcrTensor *probs, const OcrTensor *qkv, const OcrTensor *mask,
                            int num_heads, float scale, DropoutParams dropout);
void attention_backward_cuda(OcrTensor *dqkv, const OcrTensor *dout, const OcrTensor *qkv, const OcrTensor *probs,
                             int num_heads, float scale, DropoutParams dropout);

#ifdef __cplusplus
}
#endif
#endif

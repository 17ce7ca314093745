// CUDA twins of the cross-entropy ops of kernels/ops.h.
#ifndef OCR_KERNELS_CUDA_CROSS_ENTROPY_H
#define OCR_KERNELS_CUDA_CROSS_ENTROPY_H

#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/ops.h"

void cross_entropy_forward_cuda(OcrTensor *losses, OcrTensor *loss, OcrTensor *counted, const OcrTensor *logits,
                                const OcrTensor *targets, CrossEntropyParams p);
void cross_entropy_backward_cuda(OcrTensor *dlogits, const OcrTensor *logits, const OcrTensor *targets,
                                 CrossEntropyParams p);

#ifdef __cplusplus
}
#endif
#endif

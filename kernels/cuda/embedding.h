// CUDA twins of the embedding ops of kernels/ops.h.
#ifndef OCR_KERNELS_CUDA_EMBEDDING_H
#define OCR_KERNELS_CUDA_EMBEDDING_H

#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/ops.h"

void embedding_forward_cuda(OcrTensor *out, const OcrTensor *ids, const OcrTensor *table, int padding_idx);
void embedding_backward_cuda(OcrTensor *dtable, const OcrTensor *dout, const OcrTensor *ids, int padding_idx);

#ifdef __cplusplus
}
#endif
#endif

// CUDA twins of SAR's 2-D attention score ops of kernels/ops.h.
#ifndef OCR_KERNELS_CUDA_SAR_ATTENTION_H
#define OCR_KERNELS_CUDA_SAR_ATTENTION_H

#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/ops.h"

void sar_attention_score_forward_cuda(OcrTensor *scores, const OcrTensor *key, const OcrTensor *query,
                                      const OcrTensor *w, const OcrTensor *bias, const OcrTensor *valid_w, int grid_w);
void sar_attention_score_backward_cuda(OcrTensor *dkey, OcrTensor *dquery, OcrTensor *dw, OcrTensor *dbias,
                                       const OcrTensor *dscores, const OcrTensor *key, const OcrTensor *query,
                                       const OcrTensor *w, const OcrTensor *valid_w, int grid_w);

#ifdef __cplusplus
}
#endif
#endif

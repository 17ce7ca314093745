// CUDA twins of the LSTM cell ops of kernels/ops.h.
#ifndef OCR_KERNELS_CUDA_LSTM_H
#define OCR_KERNELS_CUDA_LSTM_H

#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/ops.h"

void lstm_cell_forward_cuda(OcrTensor *h, OcrTensor *c, const OcrTensor *gates, const OcrTensor *c_prev);
void lstm_cell_backward_cuda(OcrTensor *dgates, OcrTensor *dc_prev, const OcrTensor *dh, const OcrTensor *dc,
                             const OcrTensor *gates, const OcrTensor *c_prev);

#ifdef __cplusplus
}
#endif
#endif

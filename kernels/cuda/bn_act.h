// CUDA twins of the fused batch norm + activation ops of kernels/ops.h (sync: synchronised BN,
// its sums on device memory in the op's stream; NULL: per-rank statistics).
#ifndef OCR_KERNELS_CUDA_BN_ACT_H
#define OCR_KERNELS_CUDA_BN_ACT_H

// The core headers are C: included with C linkage from the .cu files too.
#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/ops.h"

void batchnorm2d_act_forward_cuda(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd,
                                  OcrTensor *save_scale, OcrTensor *running_mean, OcrTensor *running_var,
                                  const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta,
                                  ocr_activation_t act, float momentum, float eps, int training,
                                  const OcrBnSync *sync);
void batchnorm2d_forward_accumulate_cuda(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd,
                                         OcrTensor *running_mean, OcrTensor *running_var, const OcrTensor *inp,
                                         const OcrTensor *gamma, const OcrTensor *beta, float momentum, float eps,
                                         int training);
void batchnorm2d_act_backward_cuda(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                                   const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta,
                                   const OcrTensor *save_mean, const OcrTensor *save_rstd,
                                   const OcrTensor *save_scale, ocr_activation_t act, ocr_dtype_t mid, int training,
                                   const OcrBnSync *sync);

#ifdef __cplusplus
}
#endif
#endif

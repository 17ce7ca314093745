// CUDA twins of the normalisation ops of kernels/ops.h.
#ifndef OCR_KERNELS_CUDA_NORM_H
#define OCR_KERNELS_CUDA_NORM_H

// The core headers are C: included with C linkage from the .cu files too.
#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/ops.h"

void batchnorm2d_forward_cuda(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd, OcrTensor *running_mean,
                              OcrTensor *running_var, const OcrTensor *inp, const OcrTensor *gamma,
                              const OcrTensor *beta, float momentum, float eps, int training);
void batchnorm2d_backward_cuda(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                               const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *save_mean,
                               const OcrTensor *save_rstd, int training);
void layernorm_forward_cuda(OcrTensor *out, OcrTensor *mean, OcrTensor *rstd, const OcrTensor *inp,
                            const OcrTensor *gamma, const OcrTensor *beta, float eps);
void layernorm_backward_cuda(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                             const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *mean,
                             const OcrTensor *rstd);

#ifdef __cplusplus
}
#endif
#endif

// CUDA twins of the GEMM, linear and batched-matmul ops of kernels/ops.h.
#ifndef OCR_KERNELS_CUDA_GEMM_H
#define OCR_KERNELS_CUDA_GEMM_H

// The core headers are C: included with C linkage from the .cu files too.
#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/ops.h"

void gemm_cuda(OcrTensor *c, const OcrTensor *a, const OcrTensor *b, int trans_a, int trans_b, float alpha,
               float beta);
void linear_forward_cuda(OcrTensor *out, const OcrTensor *inp, const OcrTensor *weight, const OcrTensor *bias);
void linear_backward_cuda(OcrTensor *dinp, OcrTensor *dweight, OcrTensor *dbias, const OcrTensor *dout,
                          const OcrTensor *inp, const OcrTensor *weight);
void matmul_batched_forward_cuda(OcrTensor *out, const OcrTensor *a, const OcrTensor *b, int trans_a, int trans_b,
                                 float alpha);
void matmul_batched_backward_cuda(OcrTensor *da, OcrTensor *db, const OcrTensor *dout, const OcrTensor *a,
                                  const OcrTensor *b, int trans_a, int trans_b, float alpha);

#ifdef __cplusplus
}
#endif
#endif

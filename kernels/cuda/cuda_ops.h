// CUDA twins of the elementwise and layout ops of kernels/ops.h and of the input
// normalisation of kernels/input.h (same contracts; CUDA tensors).
#ifndef OCR_KERNELS_CUDA_ELEMENTWISE_H
#define OCR_KERNELS_CUDA_ELEMENTWISE_H

// The core headers are C: included with C linkage from the .cu files too.
#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/ops.h"

void channel_scale_forward_cuda(OcrTensor *out, const OcrTensor *inp, const OcrTensor *scale);
void channel_scale_backward_cuda(OcrTensor *dinp, OcrTensor *dscale, const OcrTensor *dout, const OcrTensor *inp,
                                 const OcrTensor *scale);
void add_forward_cuda(OcrTensor *out, const OcrTensor *a, const OcrTensor *b);
void add_backward_cuda(OcrTensor *da, OcrTensor *db, const OcrTensor *dout);
void accumulate_cuda(OcrTensor *dst, const OcrTensor *src);
void scale_forward_cuda(OcrTensor *out, const OcrTensor *inp, float alpha);
void zero_tensor_cuda(OcrTensor *t);
void concat_forward_cuda(OcrTensor *out, const OcrTensor *const *inputs, int count);
void concat_backward_cuda(OcrTensor *const *dinputs, int count, const OcrTensor *dout);
void permute_forward_cuda(OcrTensor *out, const OcrTensor *inp, const int *perm);
void permute_backward_cuda(OcrTensor *dinp, const OcrTensor *dout, const int *perm);
// kernels/input.h: out = (p / 255 − 0.5) / 0.5 from a uint8 batch, bit-identical to the CPU;
// with widths (N) int32 on the device, columns x >= widths[b] are 0 (widths may be NULL).
void input_normalize_forward_cuda(OcrTensor *out, const OcrTensor *inp, const OcrTensor *widths);

#ifdef __cplusplus
}
#endif
#endif

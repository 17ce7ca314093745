// CUDA twins of the casts and the AMP unscale/finite check of kernels/ops.h, plus the
// asynchronous form of the check for a step that never waits for the host.
#ifndef OCR_KERNELS_CUDA_CAST_H
#define OCR_KERNELS_CUDA_CAST_H

// The core headers are C: included with C linkage from the .cu files too.
#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/ops.h"

void cast_forward_cuda(OcrTensor *out, const OcrTensor *inp);
void cast_backward_cuda(OcrTensor *dinp, const OcrTensor *dout);
// ops.h semantics; reads the results back, so it synchronises the stream.
int unscale_and_check_cuda(OcrTensor *const *grads, int count, float inv_scale, float *amax, int *nonfinite);

// The same pass without a host wait. All result pointers are DEVICE memory of the tensors'
// device: inv_scale (1 float) is read on the device (the scaler's value); amax (count floats)
// and nonfinite (count ints) may be NULL, found_inf (1 int) may be NULL. The results are
// max-ed / or-ed into what is there, so the caller zeroes them once before a step
// (cudaMemsetAsync or zero_tensor), which also lets several calls share them.
void unscale_and_check_async_cuda(OcrTensor *const *grads, int count, const float *inv_scale, float *amax,
                                  int *nonfinite, int *found_inf);

#ifdef __cplusplus
}
#endif
#endif

// CUDA twins of the small network ops of kernels/ops.h implemented in kernels/cpu/affine.c:
// scalar affine (LearnableAffineBlock) and its fused affine → activation → affine, batch broadcast add (positional embedding), and the
// local attention mask.
#ifndef OCR_KERNELS_CUDA_AFFINE_H
#define OCR_KERNELS_CUDA_AFFINE_H

// The core headers are C: included with C linkage from the .cu files too.
#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/ops.h"

void scalar_affine_forward_cuda(OcrTensor *out, const OcrTensor *inp, const OcrTensor *scale, const OcrTensor *bias);
void scalar_affine_backward_cuda(OcrTensor *dinp, OcrTensor *dscale, OcrTensor *dbias, const OcrTensor *dout,
                                 const OcrTensor *inp, const OcrTensor *scale);
void affine_act_affine_forward_cuda(OcrTensor *out, const OcrTensor *inp, const OcrTensor *s1, const OcrTensor *b1,
                                    ocr_activation_t act, const OcrTensor *s2, const OcrTensor *b2);
void affine_act_affine_backward_cuda(OcrTensor *dinp, OcrTensor *ds1, OcrTensor *db1, OcrTensor *ds2, OcrTensor *db2,
                                     const OcrTensor *dout, const OcrTensor *inp, const OcrTensor *s1,
                                     const OcrTensor *b1, ocr_activation_t act, const OcrTensor *s2, ocr_dtype_t mid);
void batch_broadcast_add_forward_cuda(OcrTensor *out, const OcrTensor *inp, const OcrTensor *pos);
void batch_broadcast_add_backward_cuda(OcrTensor *dinp, OcrTensor *dpos, const OcrTensor *dout);
void attention_local_mask_cuda(OcrTensor *mask, int grid_h, int grid_w, int window_h, int window_w);

#ifdef __cplusplus
}
#endif
#endif

// The fused unscale + finite check after the backward, on a plain list of gradients.
//
// One pass over every gradient element (kernels/ops.h unscale_and_check), split by dtype:
// - f32 gradients (O0, O1, and the f32 parameters of O2) are multiplied by 1/scale in place;
//   their optimizer grad_scale is 1.
// - f16/bf16 gradients (O2 working parameters) are only checked and stay scaled: unscaling
//   them in their own dtype would flush exactly the small values loss scaling exists to keep
//   (Paddle's O2 without master_grad has that problem). Their optimizer grad_scale is 1/scale,
//   applied in f32 inside adam_update.
// The finite test looks at the stored values (Paddle's order: a value that overflows only when
// unscaled, possible when the scale is below 1, is caught too). 1/scale is formed in double and
// rounded to f32 (PyTorch's inv_scale).
#ifndef OCR_AMP_CHECK_H
#define OCR_AMP_CHECK_H

#include "core/tensor.h"

typedef struct {
    int found_inf;    // some gradient held inf or NaN
    int bad_count;    // number of tensors that did
    int first_bad;    // the first such tensor in BACKWARD order (highest index), -1 when none
    float inv_scale;  // what the f32 gradients were multiplied by
} AmpCheckResult;

// grads in forward order (NULL entries are skipped); scale: the loss scale they carry.
// Per tensor (arrays of count; amax and nonfinite may be NULL): amax[i] = max |g| over the
// finite values, unscaled (the true magnitude, also for the gradients left scaled);
// nonfinite[i] = 1 when tensor i held inf/NaN; grad_scale[i] = the factor the optimizer must
// still apply (1 or 1/scale).
AmpCheckResult amp_unscale_check(OcrTensor *const *grads, int count, float scale, float *amax, int *nonfinite,
                                 float *grad_scale);

#endif

// The optimizer state of a run: Adam/AdamW moments per parameter, the per-parameter learning
// rate and decay rules (PaddleOCR's ParamAttr precedence, paddleocr_rec_spec.md §8), the
// update counter for bias correction, and gradient clipping folded into the update.
//
// The update itself is kernels/ops.h adam_update; the AMP engine supplies grad_scale and the
// O2 master weights (amp/engine.h). Clipping multiplies grad_scale, so gradients are never
// rewritten and O2's scaled f16 gradients clip by their true (unscaled) norm.
#ifndef OCR_TRAINING_OPTIM_H
#define OCR_TRAINING_OPTIM_H

#include <stdint.h>

#include "training/run_config.h"
#include "core/error.h"
#include "kernels/ops.h"
#include "models/params.h"

typedef struct {
    OptimConfig cfg;
    int count;
    float *m_buf, *v_buf;  // OCR_MEM_OPTIMIZER, numel floats each, parameters back to back
    OcrTensor *m, *v;      // per parameter, views (f32, the parameter's shape)
    float *decay;          // per parameter: coefficient
    int *decoupled;        // per parameter: 1 = AdamW-style
    float *lr_mult;
    int *frozen;           // per parameter: OcrParamInfo.frozen (Global.freeze_params): never updated,
                           // moments stay 0, no decay, its gradient takes no part in clipping
    int n_frozen;
    int64_t updates;       // optimizer updates applied (skipped steps excluded): Adam's t
} Optimizer;

// Sizes the moments from the table (zero-filled). Frozen entries get lr_mult 0 and decay 0 (and
// the step does not call the update for them at all). The per-parameter rules:
//   Adam:  decay GLOBAL -> regularizer.factor (L2 added to the gradient); NONE -> 0; FIXED ->
//          the entry's coefficient (e.g. the CTC head's fc_decay 1e-5).
//   AdamW: GLOBAL -> weight_decay, decoupled, except names containing a no_weight_decay_name
//          fragment and (one_dim_param_no_weight_decay) 1-D parameters; NONE -> 0; FIXED ->
//          the fixed coefficient as coupled L2 (a ParamAttr regularizer wins, as in Paddle).
ocr_status_t optim_init(Optimizer *o, const OptimConfig *cfg, const OcrParamTable *params);
void optim_free(Optimizer *o);
int64_t optim_state_bytes(const Optimizer *o);
// Bytes the moments of a table would take (for planning): 2 · 4 · numel.
int64_t optim_bytes_for(const OcrParamTable *params);

// Fills the optimizer fields of AdamParams for parameter i at learning rate `lr` (the
// schedule's value) and update number updates + 1. grad_scale is left as it is.
void optim_fill(const Optimizer *o, int i, double lr, AdamParams *p);

// Clip factors (1 when nothing is clipped) per parameter from the gradients and the factors
// they still need (grad_scale[i]: 1, or 1/loss scale for O2's scaled f16 gradients).
// Returns the global norm of the true gradients (before clipping).
double optim_clip_factors(const Optimizer *o, OcrTensor *const *grads, const float *grad_scale, float *factor);

#endif

// One training step on a prepared batch, shared by the trainer and the capacity probe:
//   forward (under the AMP policy) → f32 logits → CTC loss and gradient × loss scale →
//   backward → fused unscale + finite check → clip → Adam (masters under O2), skipped on
//   overflow → scaler update.
#ifndef OCR_APP_STEP_H
#define OCR_APP_STEP_H

#include <stdint.h>

#include "amp/engine.h"
#include "app/optim.h"
#include "core/tensor.h"
#include "models/model.h"

typedef struct {
    OcrModel *m;
    AmpEngine *amp;
    Optimizer *optim;
    int capacity;  // largest batch
    int focal;     // Loss.use_focal_loss
    OcrTensor dl32, logits_buf;
    float *losses, *clip;
    int32_t *infeasible;
    OcrTensor *grad_views;
    OcrTensor **grads;
} StepCtx;

typedef struct {
    double loss;         // PaddleOCR's reduction: batch mean of the per-sample NLL
    double grad_norm;    // of the true (unscaled) gradients; NaN when skipped
    float scale;         // the loss scale this step used
    int skipped;         // inf/NaN gradients: no update
    int infeasible;      // samples whose label needs more frames than the sequence has (loss zeroed)
} StepOutcome;

ocr_status_t step_ctx_init(StepCtx *s, OcrModel *m, AmpEngine *amp, Optimizer *optim, int capacity, int focal);
void step_ctx_free(StepCtx *s);

// images (B, H, W, C) f32 normalised; labels (B, max_len) zero-padded; lengths (B). lr: this
// iteration's rate (per-parameter multipliers are applied inside).
ocr_status_t step_run(StepCtx *s, const OcrTensor *images, int32_t *labels, int32_t *lengths, int max_len, double lr,
                      StepOutcome *out);

#endif

// Device-side pieces of a GPU training step that never waits for the host (docs/CUDA.md,
// "The GPU training step"): the loss scale, the found-inf flag, Adam's update counter and the
// step's learning rate live in device memory (OcrDevStep); one fused multi-tensor pass does
// unscale + finite check + per-tensor norms, one tiny kernel the clip factors, one the
// Adam/AdamW update of every parameter (skipped on the device when found_inf is set), and one
// the scale update (amp/scaler.h's state machine, statement for statement).
//
// Everything is enqueued on the current stream of the device (ocr_cuda_set_stream) without
// allocating or synchronising, so the whole step can be captured into a CUDA graph. No CUDA
// types appear here.
#ifndef OCR_KERNELS_CUDA_TRAIN_STEP_H
#define OCR_KERNELS_CUDA_TRAIN_STEP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// The step's types (OcrDevStep, OcrDevStepInput, OcrDevScalerConfig, OcrFusedTensor,
// OcrFusedAdamConfig, OcrFusedAdam) are the backend-neutral interface's: kernels/backend.h
// declares them, and the ocr_backend_* functions there call the ones below for a CUDA device.
#include "core/tensor.h"
#include "kernels/backend.h"

// Builds the device tables for `count` parameters on `device` (every pointer of t on it) and
// the bias-correction table 1 − β^t for t = 1 .. max_updates, formed on the host in double as
// kernels/cpu/optim.c forms them (beyond the table the device computes pow itself).
// Allocates from the tracked allocator (OCR_MEM_OPTIMIZER) and synchronises: call it before the
// loop. NULL with a message on failure.
OcrFusedAdam *ocr_fused_adam_create(int device, const OcrFusedTensor *t, int count, OcrFusedAdamConfig cfg,
                                    int64_t max_updates);
void ocr_fused_adam_free(OcrFusedAdam *fa);
// Per-tensor results of the last pass (device arrays of count): nonfinite flags and the max
// |g| over finite values as stored (scaled for grad_scaled tensors), as float bits.
const int *ocr_fused_adam_nonfinite(const OcrFusedAdam *fa);
const unsigned *ocr_fused_adam_amax_bits(const OcrFusedAdam *fa);

// Start of a step: clears found_inf and the per-tensor results (enqueued).
void ocr_fused_adam_begin(OcrFusedAdam *fa, OcrDevStep *state);
// After the backward: unscale (f32 gradients, in place by state->inv_scale) + finite check +
// per-tensor sums of squares; clip factors and state->grad_norm; Adam/AdamW on every parameter
// unless state->found_inf (read on the device); then the scale update and the update counter.
void ocr_fused_adam_step(OcrFusedAdam *fa, OcrDevStep *state, OcrDevScalerConfig scaler);

// out = inp · state->scale, rounded once into out's dtype (out may alias inp): the loss
// gradient times the device-held loss scale.
void ocr_dev_scale_by_loss_scale(OcrTensor *out, const OcrTensor *inp, const OcrDevStep *state);
// dst[0 .. bytes) = src when state->found_inf (BN running statistics after an overflow).
void ocr_dev_restore_if_inf(int device, void *dst, const void *src, size_t bytes, const OcrDevStep *state);
// state->loss = loss[0]; state->infeasible = Σ infeasible[0 .. n) (device tensors; either may be NULL).
void ocr_dev_step_record(OcrDevStep *state, const OcrTensor *loss, const OcrTensor *infeasible);

// The end-of-step update of ocr_fused_adam_step (scale update, update counter, scale_used,
// inv_scale) run on the host on a host copy: the same code as the device's, for the host self-test
// against amp/scaler.h.
void ocr_dev_step_finish_host(OcrDevStep *state, OcrDevScalerConfig scaler);

// Dropout in a replayed graph: while set (non-NULL), the dropout and attention-dropout kernels
// of `device` add (*dropout_step << 32) to the offset they were launched with. The trainer
// captures with the model's step counter at 0 and writes the real counter into
// OcrDevStep.in.dropout_step each step, so replays draw each step's own masks, bit-identical to
// an eager step. NULL (the default) restores plain launches.
void ocr_cuda_set_dropout_step_source(int device, const uint64_t *dropout_step);

#ifdef __cplusplus
}
#endif
#endif

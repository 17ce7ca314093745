// CTC loss (Graves et al. 2006) on raw logits, with the log-softmax fused in.
//
// Conventions are those of kernels/ops.h (outputs first, shapes in comments, activation
// gradients assigned, programming errors abort through OCR_ASSERT). This op lives in its
// own header because it has a few more knobs than the others.
//
// Semantics (checked against PyTorch's F.ctc_loss in tests/kernels/test_ctc.c):
// - blank = class 0; targets hold classes 1 .. C-1.
// - Targets are PADDED, as PaddleOCR's CTCLabelEncode produces them: (B, S) int32, sample b
//   uses targets[b][0 .. target_lengths[b]) and the rest (the padding, 0 in PaddleOCR) is
//   ignored. S is any width >= max target length (PaddleOCR: max_text_length = 25).
// - input_lengths[b] <= T frames of sample b are used; NULL means T for every sample
//   (PaddleOCR passes T for all). Frames at or past input_lengths[b] get zero gradient.
// - Per-sample loss: nll_b = −log p(target_b | logits_b), the full negative log-likelihood.
// - Infeasible samples (input_lengths[b] < L_b + number of adjacent repeated labels, so no
//   alignment exists): nll_b = +inf. With zero_infinity the loss and the gradient of the
//   sample are 0 instead (it still counts in the batch mean, as in PyTorch); either way
//   infeasible[b] = 1 reports it. Without zero_infinity the sample's gradient rows are NaN
//   (as PyTorch's), so an overflow check sees them.
// - Empty targets (L_b = 0) are fine: nll_b = −Σ_t log p_t(blank).
// - Optional focal weighting (PaddleOCR's use_focal_loss): ℓ_b = nll_b · (1 − e^(−nll_b))²,
//   differentiated through the weight as PaddleOCR does (the weight is not detached).
//   Without it ℓ_b = nll_b.
// - Reductions of ℓ: see CtcReduction. The gradient written is that of the reduced loss,
//   times grad_scale (the AMP engine passes its loss scale here rather than scaling a
//   loss tensor).
//
// Numerics: the softmax terms exp(z − max) are fp32 (a vectorised exp), summed in double;
// label log-probabilities, alpha, beta and the per-class occupancies are double, and the
// gradient of each target class is formed in double (softmax − occupancy cancels there).
// Agreement with PyTorch's double-precision ctc_loss on fp32 logits: ~1e-7 relative on the
// loss, gradients within fp32 rounding. Memory: per thread, alpha (T·(2L+1)) and the label
// log-probabilities (T·(L+1)) in double plus one C-float row, from the workspace
// (core/memory.h), and a T·C fp32 tile when dlogits (or, without dlogits, the logits) are f16 or
// bf16; nothing of size B·T·C besides dlogits itself, which may be the logits. OpenMP over the batch;
// each sample is computed by one thread alone and the batch reduction is serial, so
// results do not depend on the thread count.
#ifndef OCR_KERNELS_CTC_H
#define OCR_KERNELS_CTC_H

#include "core/tensor.h"

typedef enum {
    // PaddleOCR: mean over the batch of ℓ_b (not normalised by target length). The default.
    OCR_CTC_REDUCTION_PADDLE = 0,
    // PyTorch's 'mean': mean over the batch of ℓ_b / max(L_b, 1).
    OCR_CTC_REDUCTION_MEAN,
    // PyTorch's 'sum': Σ_b ℓ_b.
    OCR_CTC_REDUCTION_SUM,
    // PyTorch's 'none': no reduction; dlogits is the gradient for an upstream gradient of 1
    // on every ℓ_b (i.e. the gradient of Σ_b ℓ_b) and *loss receives that sum.
    OCR_CTC_REDUCTION_NONE,
} CtcReduction;

// Zero-initialised CtcParams are the PaddleOCR defaults: PADDLE reduction, no
// zero_infinity, no focal weighting, grad_scale 1.
typedef struct {
    CtcReduction reduction;
    int zero_infinity;   // infeasible samples give 0 loss and 0 gradient
    int use_focal_loss;  // PaddleOCR's focal weighting, see above
    float grad_scale;    // multiplies dlogits (upstream gradient / AMP loss scale); 0 is read as 1
} CtcParams;

// One pass computes the losses and (when dlogits is non-NULL) the gradient: the trainer
// always needs both, and the gradient needs alpha, which would otherwise have to be kept
// for a separate backward call. There is therefore no ctc_loss_backward.
//
// losses (B) f32: ℓ_b per sample (after zero_infinity and focal weighting, before the
//     reduction); may be NULL.
// loss (1) f32: the reduced loss (not multiplied by grad_scale); may be NULL. Also returned
//     (as double) by the function.
// dlogits (B, T, C) any float dtype: ASSIGNED d(reduced loss)/d logits · grad_scale; may be NULL.
//     It may be the logits tensor itself (same memory and dtype; no partial overlap): the
//     gradient is then written over the logits, with the same bits as into another buffer.
// infeasible (B) i32: 1 where the sample has no valid alignment, else 0; may be NULL.
// logits (B, T, C) any float dtype. f16/bf16 logits or dlogits are computed in fp32 a sample at
//     a time (the CPU: one T·C fp32 tile per thread, no B·T·C copy), so the result equals the
//     op on the fp32 values of the logits with the gradient rounded once into dlogits' dtype.
// targets (B, S) i32, padded; target_lengths (B) i32 in [0, S]; input_lengths (B) i32 in
//     [0, T] or NULL for all T.
// All tensors live on the CPU (the CUDA version will dispatch on logits' device).
double ocr_ctc_loss_forward(OcrTensor *losses, OcrTensor *loss, OcrTensor *dlogits, OcrTensor *infeasible,
                            const OcrTensor *logits, const OcrTensor *targets, const OcrTensor *target_lengths,
                            const OcrTensor *input_lengths, CtcParams p);

// Workspace bytes ctc_loss_forward pushes (for memory planning): per thread alpha, the
// per-frame label log-probabilities and beta for the longest target, plus the per-thread fp32
// tile of one sample (T·C) when the tensors need one (see above).
size_t ocr_ctc_loss_workspace_bytes(const OcrTensor *logits, const OcrTensor *dlogits, int max_target_length,
                                    int threads);

// The minimum number of frames a target of `length` labels needs: length + the number of
// adjacent equal pairs (each needs a blank in between). Shorter inputs are infeasible.
int ocr_ctc_min_frames(const int32_t *target, int length);

#endif

// CUDA twin of the CTC loss of kernels/ctc.h.
#ifndef OCR_KERNELS_CUDA_CTC_H
#define OCR_KERNELS_CUDA_CTC_H

// The core headers are C: included with C linkage from the .cu files too.
#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/ctc.h"

// kernels/ctc.h's contract with every tensor on one CUDA device (targets and lengths
// included). Differences, both forced by not waiting for the host:
// - The return value needs the result on the host: it synchronises the stream, except while
//   the stream is being captured into a graph, where it returns NaN (read `loss` instead).
// - Invalid targets or lengths cannot abort from the device: the sample's loss (and so the
//   reduced loss) and its gradient rows become NaN, which the overflow check reports.
double ctc_loss_forward_cuda(OcrTensor *losses, OcrTensor *loss, OcrTensor *dlogits, OcrTensor *infeasible,
                             const OcrTensor *logits, const OcrTensor *targets, const OcrTensor *target_lengths,
                             const OcrTensor *input_lengths, CtcParams p);

// The same computation without the return value: only enqueued, never waits (read `loss`).
void ctc_loss_forward_async_cuda(OcrTensor *losses, OcrTensor *loss, OcrTensor *dlogits, OcrTensor *infeasible,
                                 const OcrTensor *logits, const OcrTensor *targets, const OcrTensor *target_lengths,
                                 const OcrTensor *input_lengths, CtcParams p);

#ifdef __cplusplus
}
#endif
#endif

// CTC decoding: greedy (best path) exactly as PaddleOCR's CTCLabelDecode, and prefix
// beam search.
//
// Inputs are one sample's scores (T, C) row-major, fp32 (for a batch (B, T, C) pass
// scores + b·T·C; PaddleOCR decodes all T frames, a shorter T decodes a prefix of them).
// is_logits selects what they are:
//   0: probabilities, i.e. the softmax output, which is what PaddleOCR's CTC head returns
//      in eval mode and what CTCLabelDecode reads;
//   1: raw logits; a softmax per frame is applied internally (in double).
//
// The character list: classes[i] is the UTF-8 text of class i, for i in [0, C); index 0 is
// the CTC blank and is never emitted (its text is ignored, may be NULL). This is the
// layout of PaddleOCR's character list (["blank"] + dictionary lines [+ " "]), and what
// the dictionary loader (data/) provides as `const char *const *`.
#ifndef OCR_EVAL_DECODE_H
#define OCR_EVAL_DECODE_H

#include <stddef.h>

#include "core/error.h"

// ---- greedy ------------------------------------------------------------------------------
// Per frame: argmax (the first maximum on ties, as np.argmax) and its probability; keep
// frame t when its class differs from frame t−1's (t = 0 always) and is not the blank.
// labels (>= T entries) and probs (>= T entries) receive the kept classes and their
// probabilities; either may be NULL. Returns the number kept.
int ctc_greedy_labels(int *labels, float *probs, const float *scores, int T, int C, int is_logits);

// Greedy decode to text: text (NUL-terminated UTF-8, text_cap bytes) and *confidence =
// the mean of the kept frames' max probabilities, 0 when nothing is kept (PaddleOCR's
// conf_list = [0]). confidence may be NULL. Fails with OCR_ERR_INVALID_ARG when the text
// does not fit (ctc_text_capacity gives a size that always does).
ocr_status_t ctc_greedy_decode(char *text, size_t text_cap, float *confidence, const float *scores, int T, int C,
                               int is_logits, const char *const *classes);

// ---- prefix beam search -------------------------------------------------------------------
// Standard CTC prefix beam search in log space: every prefix keeps the probability of
// ending in a blank and of ending in its last label; at most beam_width prefixes survive
// each frame (ties keep the earlier candidate: existing prefixes before extensions, in
// prefix order, then by class index). Returns the most probable surviving prefix:
// labels (>= T entries), *num_labels, and *log_prob = its log probability (the sum over
// all alignments of that prefix that survived pruning; with a wide enough beam it is the
// exact log p(labelling)). beam_width 1 is close to, but not the same as, greedy.
// OCR_ERR_INVALID_ARG for beam_width < 1; OCR_ERR_OOM when scratch cannot be allocated.
ocr_status_t ctc_beam_search(int *labels, int *num_labels, double *log_prob, const float *scores, int T, int C,
                             int is_logits, int beam_width);

// Beam search to text: text as for ctc_greedy_decode, *prob = exp(log_prob) (may be NULL).
ocr_status_t ctc_beam_decode(char *text, size_t text_cap, double *prob, const float *scores, int T, int C,
                             int is_logits, int beam_width, const char *const *classes);

// ---- text -------------------------------------------------------------------------------------
// Concatenates classes[labels[i]] into text (NUL-terminated). OCR_ERR_INVALID_ARG when a
// label is outside [1, C) or the text does not fit in text_cap bytes.
ocr_status_t ctc_labels_to_text(char *text, size_t text_cap, const int *labels, int n, const char *const *classes,
                                int C);

// Bytes that always hold a decode of T frames: T · (longest class text) + 1.
size_t ctc_text_capacity(int T, const char *const *classes, int C);

#endif

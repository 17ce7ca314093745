// PaddleOCR's MultiHead (guided training, GTC): the CTC branch (SVTR neck + CTC FC) and a guidance
// branch that only exists in training (../shared/reference/paddleocr_multihead.md §1-§2, §6).
//
//   backbone map x (B, 1, W, C) ─┬─ CTC: neck (use_guide: its input detached) → FC → logits
//                                └─ guidance: NRTR (before_gtc Linear C→dim, no bias → decoder)
//                                             or SAR (the map itself → SARHead, models/svtr/sar.h)
//
// Both branches read the same x; in the backward their gradients with respect to x are summed
// before the backbone's backward (with use_guide the CTC branch contributes none, so only the
// guidance loss trains the backbone, as in PaddleOCR). Inference, evaluation and export run the
// CTC branch alone; the guidance parameters live in the model's table under PaddleOCR's names
// (head.before_gtc.1.fc.weight, head.gtc_head.*), so checkpoints keep them.
//
// Labels: the guidance branch's token ids are derived from the CTC-encoded batch. The three
// encodings index a character alike up to a shift (CTC id = SAR id + 1 = NRTR id − 3, the
// same dictionary and the same last-position rule for duplicates), so MultiLabelEncode's
// label_gtc is [<s> = 2, c1 + 3, ..., cn + 3, </s> = 3, 0, ...] from the CTC ids c and the
// length n; the dataset rejects texts of n >= max_text_length − 1 when MultiLabelEncode is
// the label op (data/transforms.h), as PaddleOCR's NRTR/SAR encoders do. SAR (PP-OCRv3):
// label_sar = [BOS = C, c1 − 1, ..., cn − 1, EOS = C, PAD = C + 1, ...] (C = CTC classes;
// SARLabelEncode's list is the characters, <UKN>, <BOS/EOS>, <PAD>); the decoder reads all
// max_text_length positions and output t is trained on label_sar[t + 1] (the last output's target
// is PAD: SARLoss drops it), cross-entropy ignoring PAD.
#ifndef OCR_MODELS_SVTR_MULTIHEAD_H
#define OCR_MODELS_SVTR_MULTIHEAD_H

#include <stdint.h>

#include "core/error.h"
#include "models/svtr/nrtr.h"
#include "models/svtr/sar.h"

typedef enum { OCR_GUIDE_NONE = 0, OCR_GUIDE_NRTR, OCR_GUIDE_SAR } ocr_guide_kind_t;

typedef struct {
    ocr_guide_kind_t kind;  // NONE: a plain CTCHead (no MultiHead)
    int steps;              // decoder positions: Global.max_text_length − 1
    int nrtr_dim;           // NRTRHead.nrtr_dim (PaddleOCR's default 256; the v4 configs 384)
    int nrtr_layers;        // NRTRHead.num_decoder_layers (4)
    float nrtr_dropout;     // the Transformer's residual_dropout_rate: 0.1, no config key (tests set 0)
    int nrtr_smoothing;     // NRTRLoss.smoothing (true): ε = 0.1 with the padding id 0 masked out
    int nrtr_ignore_index;  // NRTRLoss.ignore_index (0): the ignored id without smoothing
    int sar_enc_dim;        // SARHead.enc_dim (512)
    int sar_d_k;            // SARHead.d_k (512)
    float sar_enc_drop;     // SARHead.enc_drop_rnn (0.1; tests set 0)
    float sar_pred_drop;    // SARHead.pred_dropout (0.1; tests set 0)
    int sar_ignore_index;   // SARLoss.ignore_index as configured (−1: absent); must be PAD = C + 1
    double weight_ctc;      // MultiLoss weight_1 (1.0)
    double weight_gtc;      // MultiLoss weight_2 (1.0)
} MultiHeadSpec;

typedef struct {
    MultiHeadSpec s;
    int ctc_classes;
    LLinear before_gtc;  // Flatten + FCTranspose: (B, W, C) → (B, W, dim), no bias
    NrtrDecoder nrtr;
    SarHead sar;
    float *h_valid;  // (B) valid ratios for the next training pass (SAR)
    int valid_set;
    int warned_valid;  // the "no valid ratios" warning was printed
    int32_t *h_tokens, *h_targets;  // (B, T_pass) host staging for the next training pass
    int h_cap, h_batch, labels_set;
    // NRTR: decoder positions of the next training pass, the batch's longest text + 1
    // (PaddleOCR's Transformer.forward slices label_gtc to 2 + max(length) and drops the last).
    int pass_steps;
    OcrTensor tokens, targets;  // (B, T) int32 (SAR: tokens (L, B) time-major, targets (B, L)) in the arena, on the model's device
    OcrTensor *mem;             // before_gtc's output
    OcrTensor *logits;          // (B, T, vocab)
    OcrTensor dlogits;          // the loss fills it before the backward
} GuideHead;

// Vocabulary of the guidance classifier from the CTC class count: NRTR C + 4 (NRTRLabelDecode's
// C + 3 plus the Transformer's own +1); SAR C + 1 (SARLabelDecode's C + 2 minus PAD, never predicted).
int guide_vocab(const MultiHeadSpec *s, int ctc_classes);
void guide_build(OcrBuilder *b, GuideHead *g, const MultiHeadSpec *s, int in_channels, int ctc_classes);
void guide_free(GuideHead *g);
// Converts one batch's CTC labels (B, max_len) (zero-padded ids) and lengths (B) into the
// decoder's input tokens and the loss targets for the next training pass. max_len must be
// steps + 1 (Global.max_text_length); a length outside [1, max_len − 2] or an id outside
// [1, ctc_classes) is OCR_ERR_INVALID_ARG naming the sample (the dataset filters them when
// MultiLabelEncode is configured). NRTR runs the decoder over the batch's longest text + 1
// positions, as PaddleOCR does (guide_pass_steps).
ocr_status_t guide_set_labels(GuideHead *g, const int32_t *labels, const int32_t *lengths, int batch, int max_len);
// Decoder positions of the next pass: after guide_set_labels the batch's longest text + 1 (NRTR),
// otherwise (a pass planned without labels: capacity, memory reports) the most a batch can need,
// steps. SAR always reads max_text_length positions.
int guide_pass_steps(const GuideHead *g);
// SAR: the valid ratios (B) (min(1, resized width / W), RecResizeImg's valid_ratio) of the next
// training pass; each must lie in (0, 1]. Without them a SAR pass masks nothing (every ratio 1)
// and says so once on stderr.
ocr_status_t guide_set_valid_ratios(GuideHead *g, const float *valid_ratios, int batch);
// x (B, 1, W, C): the backbone map. Training passes only. Returns the logits.
OcrTensor *guide_forward(OcrCtx *c, GuideHead *g, const OcrTensor *x);
// From g->dlogits: accumulates the branch's parameter gradients and returns the gradient of x
// (B, 1, W, C) (a new arena tensor).
OcrTensor guide_backward(OcrCtx *c, GuideHead *g);
// SARLoss: cross-entropy ignoring PAD (C + 1). NRTRLoss: with smoothing (the default) ε = 0.1 and the padding id 0 masked out; without it plain
// cross-entropy ignoring ignore_index. The mean runs over the remaining tokens of the batch.
CrossEntropyParams guide_loss_params(const GuideHead *g, float grad_scale);

#endif

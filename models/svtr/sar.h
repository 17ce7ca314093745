// The SAR guidance branch of PaddleOCR's MultiHead (PP-OCRv3; ppocr/modeling/heads/rec_sar_head.py
// `SARHead` = `SAREncoder` + `ParallelSARDecoder`), teacher-forced training path.
// ../shared/reference/paddleocr_multihead.md §3 has every shape.
//
//   x (B, H, W, C) ─ max over H ─ (W, B, C) ─ LSTM ─ dropout ─ LSTM ─ step ceil(vr·W) − 1 ─ Linear
//                                                                       = holistic (B, E)
//   [holistic; embedding(label_sar[0..L−1])] (L + 1, B, E) ─ LSTM ─ LSTM ─ y, steps 1..L
//   query = Linear(y) (B, L, d_k); key = Conv3x3(x) (B, H·W, d_k)
//   α = softmax over H·W of (w · tanh(key + query) + b, valid_ratio mask)   (f32)
//   glimpse = α · x (B, L, C)
//   logits (B, L, classes − 1) = dropout(Linear([y, glimpse, holistic]))
//
// Decoder step 0 (the holistic input) only feeds later steps through the LSTMs; PaddleOCR drops
// its output, so everything after the LSTMs runs on steps 1..L only (the same numbers).
// Both LSTMs are time-major (kernels/ops.h lstm_layer_*); the selection of the encoder step and
// the broadcast of the holistic feature over the steps are batched matmuls with a one-hot
// (B, 1, W) and a ones (B, L, 1) matrix, so the branch runs on any device without per-row copies.
#ifndef OCR_MODELS_SVTR_SAR_H
#define OCR_MODELS_SVTR_SAR_H

#include <stdint.h>

#include "models/svtr/nn.h"

typedef struct {
    int in_channels;  // d_model: the backbone's channels (PP-OCRv3: 512)
    int enc_dim;      // SARHead.enc_dim: both LSTMs' hidden size and the embedding width (512)
    int d_k;          // SARHead.d_k: the attention width (512)
    int classes;      // SARLabelDecode: CTC classes + 2 (en 99); the prediction has classes − 1 outputs
    int max_len;      // Global.max_text_length L (25): decoder steps L + 1, logits (B, L, ·)
    float enc_drop;   // enc_drop_rnn (0.1): between the encoder's two LSTM layers
    float pred_drop;  // pred_dropout (0.1): on the logits
} SarSpec;

// One layer of Paddle's nn.LSTM: weight_ih_l{k} (4H, I), weight_hh_l{k} (4H, H), bias_ih_l{k},
// bias_hh_l{k} (4H), all U(±1/√H).
typedef struct {
    int op, w_ih, w_hh, b_ih, b_hh;
    int in, hidden;
    OcrTensor x, y, gates, cells;
    int xcast;
    ocr_dtype_t in_dtype;
} LLstm;

typedef struct {
    SarSpec s;
    LPool pool;  // the max over the map's height (only when H > 1)
    LLstm enc[2], dec[2];
    LDrop enc_drop, pred_drop;
    LLinear enc_linear, query, pred;
    LConv key;
    int emb_op, emb_w;         // decoder.embedding (classes, E), padding row classes − 1
    int att_op, att_w, att_b;  // decoder.conv1x1_2: w (d_k, 1), b (1); the score/softmax/glimpse op
    int cat_op;                // the prediction's input concat
    // host staging, per pass
    int32_t *h_valid_w;  // (B) ceil-rounded valid columns
    float *h_sel;        // (B, W) one-hot of the encoder step ceil(vr·W) − 1
    float *h_ones;       // (B, L)
    int h_cap_b, h_cap_w;
    // saved by the forward
    int pooled;
    OcrTensor tokens, enc_in, h0_bt, sel, hsel, emb, dec_in, y_bt, scores, glimpse, ones, holb, cat, valid_w;
    OcrTensor *hol, *q, *keyt, *logits;
    const OcrTensor *x;
    ocr_dtype_t x_dtype;
} SarHead;

// Parameters below `prefix` (PaddleOCR: "head.sar_head"): encoder.rnn_encoder.{weight_ih,
// weight_hh, bias_ih, bias_hh}_l{0,1}, encoder.linear, decoder.{conv1x1_1, conv3x3_1,
// conv1x1_2, rnn_decoder.*_l{0,1}, embedding, prediction}.{weight, bias}. Paddle's checkpoints
// also hold every LSTM tensor a second time as rnn_*.{k}.cell.{weight_ih, ...} (the same
// parameter reached through the layer's cell list); models/pdparams.c maps those onto these.
void sar_build(OcrBuilder *b, SarHead *l, const char *prefix, SarSpec s);
void sar_free(SarHead *l);
// x (B, H, W, C): the backbone map; tokens (L, B) int32, time-major, on the model's device:
// label_sar[b][t] (BOS, characters, EOS, PAD). valid_ratio (B) host floats in (0, 1] (NULL: 1
// for every sample). Training passes. Returns the logits (B, L, classes − 1).
OcrTensor *sar_forward(OcrCtx *c, SarHead *l, const OcrTensor *x, const OcrTensor *tokens, const float *valid_ratio);
// From the logits' gradient: accumulates the parameter gradients and returns the gradient of x
// (B, H, W, C) (a new arena tensor); frees everything the forward saved.
OcrTensor sar_backward(OcrCtx *c, SarHead *l, const OcrTensor *dlogits);

// PaddleOCR's valid widths: min(n, ceil(valid_ratio · n)) in float32 arithmetic, as
// paddle.ceil(valid_ratios[i] * T) computes it (the encoder step is this minus 1).
int sar_valid_steps(float valid_ratio, int n);

#endif

// The NRTR guidance branch of PaddleOCR's MultiHead (PP-OCRv4; ppocr/modeling/heads/rec_nrtr_head.py
// `Transformer` without an encoder): a post-LN transformer decoder over the backbone features,
// teacher-forced in training. ../shared/reference/paddleocr_multihead.md §4 has every shape.
//
//   tokens (B, T) int32 ─ embedding·√dim ─ + sinusoid PE ─ dropout ─┐
//   memory (B, Tk, dim) ───────────────────────────────────────────┐│
//   T × block: t = LN1(t + drop(out_proj(causal self-attn(qkv(t)))))
//              t = LN2(t + drop(out_proj(cross-attn(q(t), kv(memory)))))
//              t = LN3(t + drop(fc2(drop(relu(fc1(t)))) → drop))
//   logits (B, T, vocab) = tgt_word_prj(t)  (no bias)
//
// T is the batch's longest text + 1 (at most max_text_length − 1), as PaddleOCR slices the
// labels in training (multihead.c guide_set_labels). With the causal mask a position only sees
// earlier ones and the layers after the attention work per position, so each position's logits
// do not depend on T; a shorter T only drops positions whose targets are all padding. The model
// plans its arena again when T changes (models/model.c begin_pass); plans made without labels
// (capacity, memory reports) use the longest T, the most a batch can need.
//
// Ops reused from kernels/ops.h: linear, attention (the causal self-attention core, with an
// additive mask), batched matmul + softmax + permute (the cross-attention core), layernorm,
// dropout, add, batch_broadcast_add (positional encoding); new: embedding.
#ifndef OCR_MODELS_SVTR_NRTR_H
#define OCR_MODELS_SVTR_NRTR_H

#include "models/svtr/nn.h"

typedef struct {
    int dim;      // nrtr_dim (384)
    int heads;    // dim / 32 (PaddleOCR's MultiHead passes nhead = nrtr_dim // 32)
    int layers;   // num_decoder_layers (4)
    int ffn;      // dim_feedforward = 4·dim
    int vocab;    // NRTRLabelDecode + 1 = CTC classes + 4
    int steps;    // the most decoder positions, max_text_length − 1
    float drop;   // residual_dropout_rate (0.1): after the PE and on every residual branch and inside the MLP
} NrtrSpec;

// Embedding lookup scaled by √dim (PaddleOCR's `Embeddings` with scale_embedding), padding id 0.
typedef struct {
    int op, w;
    int vocab, dim;
    float scale;
    OcrTensor ids, y;
} LEmbed;

// Multi-head attention core over two sequences: q (B, Tq, C), kv (B, Tk, 2C) laid out [k | v],
// each as (heads, head_dim); softmax(scale·q·kᵀ)·v per head, no mask, no dropout (attention
// dropout 0.0): the attention op's cross form. Scores and probabilities are f32 whatever the
// compute dtype (the softmax stays f32 under AMP). q and kv are the inputs themselves, or copies
// in the op's dtype (qcast, kvcast) that the backward frees.
typedef struct {
    int op, heads, dim;
    float scale;
    OcrTensor q, kv, probs, y;  // probs (B, H, Tq, Tk) f32
    int qcast, kvcast;
    ocr_dtype_t q_dtype, kv_dtype;
} LCrossAttn;

// Causal self-attention core: the attention op with an additive (T, T) mask (0 on and below
// the diagonal, −inf above).
typedef struct {
    int op, heads, dim;
    float scale;
    OcrTensor x, y, probs, mask;
    int xcast;
    ocr_dtype_t in_dtype;
    DropoutParams d;
    const float *mask_host;  // (T, T), the decoder's (copied into the arena each pass)
} LCausalAttn;

typedef struct {
    LLinear qkv, self_out, q, kv, cross_out, fc1, fc2;
    LCausalAttn self_attn;
    LCrossAttn cross_attn;
    LDrop drop1, drop2, drop3, mlp_drop1, mlp_drop2;
    LAct relu;
    LAdd add1, add2, add3;
    LLN norm1, norm2, norm3;
} NrtrBlock;

typedef struct {
    NrtrSpec s;
    LEmbed embedding;
    int pe_op;
    OcrTensor pe_y, pe;  // the PE add's output; pe (1, T, dim) f32, written each pass
    LDrop pe_drop;
    NrtrBlock *blocks;
    LLinear prj;
    float *pe_host;    // (steps, dim) sinusoid, computed once; a pass of T positions reads its first T rows
    float *mask_host;  // (T, T) causal mask of the last pass's T (room for steps × steps)
    int mask_steps;    // the T mask_host holds
    OcrTensor *logits;
    OcrTensor dmem;  // the memory's gradient, summed over the blocks' cross-attentions
} NrtrDecoder;

// Parameter names below `prefix` (PaddleOCR: "head.gtc_head"): embedding.embedding.weight,
// decoder.<i>.{self_attn.qkv, self_attn.out_proj, norm1, cross_attn.q, cross_attn.kv,
// cross_attn.out_proj, norm2, mlp.fc1, mlp.fc2, norm3}.{weight, bias}, tgt_word_prj.weight.
// PaddleOCR's persistable `positional_encoding.pe` buffer is recomputed, not stored.
void nrtr_build(OcrBuilder *b, NrtrDecoder *l, const char *prefix, NrtrSpec s);
void nrtr_free(NrtrDecoder *l);
// tokens (B, T) int32, 1 <= T <= steps, on the model's device (the arena); memory (B, Tk, dim).
// Returns the logits (B, T, vocab).
OcrTensor *nrtr_forward(OcrCtx *c, NrtrDecoder *l, const OcrTensor *tokens, const OcrTensor *memory);
// Accumulates the parameter gradients and returns the memory's gradient (B, Tk, dim) (a new
// arena tensor). Frees everything the forward saved.
OcrTensor nrtr_backward(OcrCtx *c, NrtrDecoder *l, const OcrTensor *dlogits);

// The sinusoid table (T, dim): pe[p, 2i] = sin(p·e^(−2i·ln(10000)/dim)), pe[p, 2i+1] = cos(same).
void nrtr_positional_encoding(float *pe, int T, int dim);
// The causal mask (T, T): 0 where key <= query, −inf above the diagonal.
void nrtr_causal_mask(float *mask, int T);

#endif

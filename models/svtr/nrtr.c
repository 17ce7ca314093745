#include "models/svtr/nrtr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NAME OCR_NAME

#include "models/svtr/grad.h"

void nrtr_positional_encoding(float *pe, int T, int dim) {
    for (int p = 0; p < T; p++)
        for (int i = 0; 2 * i < dim; i++) {
            double div = exp(-(double)(2 * i) * log(10000.0) / dim);
            pe[(size_t)p * dim + 2 * i] = (float)sin(p * div);
            if (2 * i + 1 < dim) pe[(size_t)p * dim + 2 * i + 1] = (float)cos(p * div);
        }
}

void nrtr_causal_mask(float *mask, int T) {
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) mask[(size_t)i * T + j] = j <= i ? 0.0f : -INFINITY;
}

// ---- embedding · √dim ------------------------------------------------------------------------------

static void lembed_build(OcrBuilder *b, LEmbed *l, const char *name, int vocab, int dim) {
    char buf[256];
    memset(l, 0, sizeof *l);
    l->vocab = vocab;
    l->dim = dim;
    l->scale = sqrtf((float)dim);
    l->op = ocr_build_op(b, name, "embedding");
    // PaddleOCR draws N(0, dim^−0.5) with numpy's RNG; ours comes from the seeded Philox stream.
    OcrInit init = {OCR_INIT_NORMAL, 0.0f, 1.0f / sqrtf((float)dim)};
    l->w = ocr_build_param(b, l->op, NAME(buf, "%s.weight", name), 2, (int64_t[]){vocab, dim}, init, OCR_ROLE_EMBED,
                           ocr_attr_default());
}

static OcrTensor *lembed_forward(OcrCtx *c, LEmbed *l, const OcrTensor *ids) {
    l->ids = *ids;
    l->y = ocr_ctx_new(c, ocr_ctx_dtype(c, l->op), 3, (int64_t[]){ids->shape[0], ids->shape[1], l->dim});
    if (!c->plan) {
        OcrTensor w = ocr_ctx_weight(c, l->w);
        ocr_embedding_forward(&l->y, ids, &w, 0);
        ocr_scale_forward(&l->y, &l->y, l->scale);
    }
    ocr_ctx_record(c, l->op, &l->y, (double)ocr_tensor_numel(&l->y));
    return &l->y;
}

// dy (B, T, dim): dW[id] += √dim · dy. The output was freed by the forward's consumer.
static void lembed_backward(OcrCtx *c, LEmbed *l, const OcrTensor *dy) {
    OcrTensor g = ocr_ctx_new(c, OCR_F32, dy->ndim, dy->shape);
    if (!c->plan) {
        ocr_scale_forward(&g, dy, l->scale);
        OcrTensor dw = ocr_ctx_grad(c, l->w);
        ocr_embedding_backward(&dw, &g, &l->ids, 0);
    }
    ocr_ctx_free(c, &g);
    ocr_ctx_bwd_done(c, l->op);
}

// ---- causal self-attention core -------------------------------------------------------------------------

static void lcausal_build(OcrBuilder *b, LCausalAttn *l, const char *name, int dim, int heads) {
    memset(l, 0, sizeof *l);
    l->op = ocr_build_op(b, name, "attention");
    l->heads = heads;
    l->dim = dim;
    l->scale = 1.0f / sqrtf((float)(dim / heads));
}

static OcrTensor *lcausal_forward(OcrCtx *c, LCausalAttn *l, const OcrTensor *qkv) {
    int64_t B = qkv->shape[0], T = qkv->shape[1];
    l->in_dtype = qkv->dtype;
    l->x = ocr_ctx_autocast_input(c, l->op, qkv, 0, &l->xcast);
    l->y = ocr_ctx_new(c, ocr_ctx_dtype(c, l->op), 3, (int64_t[]){B, T, l->dim});
    l->probs = ocr_ctx_new(c, OCR_F32, 4, (int64_t[]){B, l->heads, T, T});
    l->mask = ocr_ctx_new(c, OCR_F32, 2, (int64_t[]){T, T});
    DropoutParams d = {0.0f, OCR_DROPOUT_UPSCALE_IN_TRAIN, c->training, c->seed, 0, 0};
    l->d = d;
    if (!c->plan) {
        ocr_copy_bytes(l->mask.device, l->mask.data, ocr_cpu(), l->mask_host, (size_t)(T * T) * sizeof(float));
        ocr_attention_forward(&l->y, &l->probs, &l->x, &l->mask, l->heads, l->scale, l->d);
    }
    double tt = (double)B * T * T;
    ocr_ctx_record(c, l->op, &l->y, 4.0 * tt * l->dim + 5.0 * tt * l->heads);
    return &l->y;
}

static OcrTensor lcausal_backward(OcrCtx *c, LCausalAttn *l, const OcrTensor *dy) {
    OcrTensor dx = ocr_ctx_like(c, &l->x);
    if (!c->plan) ocr_attention_backward(&dx, dy, &l->x, &l->probs, l->heads, l->scale, l->d);
    ocr_ctx_free(c, &l->y);
    ocr_ctx_free(c, &l->mask);
    ocr_ctx_free(c, &l->probs);
    if (l->xcast) {
        dx = ocr_ctx_cast_grad(c, &dx, l->in_dtype);
        ocr_ctx_free(c, &l->x);
    }
    ocr_ctx_bwd_done(c, l->op);
    return dx;
}

// ---- cross-attention core ---------------------------------------------------------------------------------

static void lcross_build(OcrBuilder *b, LCrossAttn *l, const char *name, int dim, int heads) {
    memset(l, 0, sizeof *l);
    l->op = ocr_build_op(b, name, "attention");
    l->heads = heads;
    l->dim = dim;
    l->scale = 1.0f / sqrtf((float)(dim / heads));
}

// q (B, Tq, C), kv (B, Tk, 2C) -> (B, Tq, C): the attention op reads the heads in place (no
// per-head copies); q and kv stay (the backward reads them) until lcross_backward.
static OcrTensor *lcross_forward(OcrCtx *c, LCrossAttn *l, const OcrTensor *q, const OcrTensor *kv) {
    const int64_t B = q->shape[0], Tq = q->shape[1], Tk = kv->shape[1], C = l->dim, H = l->heads;
    OCR_ASSERT(q->shape[2] == C && kv->shape[0] == B && kv->shape[2] == 2 * C, "cross attention: shapes");
    l->q_dtype = q->dtype;
    l->kv_dtype = kv->dtype;
    l->q = ocr_ctx_autocast_input(c, l->op, q, 0, &l->qcast);
    l->kv = ocr_ctx_autocast_input(c, l->op, kv, 0, &l->kvcast);
    l->probs = ocr_ctx_new(c, OCR_F32, 4, (int64_t[]){B, H, Tq, Tk});
    l->y = ocr_ctx_new(c, ocr_ctx_dtype(c, l->op), 3, (int64_t[]){B, Tq, C});
    const DropoutParams none = {0.0f, OCR_DROPOUT_UPSCALE_IN_TRAIN, c->training, c->seed, 0, 0};
    if (!c->plan) ocr_attention_cross_forward(&l->y, &l->probs, &l->q, &l->kv, (int)H, l->scale, none);
    double tt = (double)B * Tq * Tk;
    ocr_ctx_record(c, l->op, &l->y, 4.0 * tt * C + 5.0 * tt * H);
    return &l->y;
}

// dy (B, Tq, C) -> dq (B, Tq, C) in q's dtype, dkv (B, Tk, 2C) in kv's dtype.
static void lcross_backward(OcrCtx *c, LCrossAttn *l, const OcrTensor *dy, OcrTensor *dq, OcrTensor *dkv) {
    *dq = ocr_ctx_like(c, &l->q);
    *dkv = ocr_ctx_like(c, &l->kv);
    const DropoutParams none = {0.0f, OCR_DROPOUT_UPSCALE_IN_TRAIN, c->training, c->seed, 0, 0};
    if (!c->plan) ocr_attention_cross_backward(dq, dkv, dy, &l->q, &l->kv, &l->probs, l->heads, l->scale, none);
    ocr_ctx_free(c, &l->y);
    ocr_ctx_free(c, &l->probs);
    *dq = ocr_ctx_cast_grad(c, dq, l->q_dtype);
    *dkv = ocr_ctx_cast_grad(c, dkv, l->kv_dtype);
    if (l->qcast) ocr_ctx_free(c, &l->q);
    if (l->kvcast) ocr_ctx_free(c, &l->kv);
    ocr_ctx_bwd_done(c, l->op);
}

// ---- decoder block ------------------------------------------------------------------------------------------

// PaddleOCR's Transformer._init_weights: XavierNormal on every Linear, bias 0. XavierNormal is
// N(0, √(2/(in+out))), Kaiming normal with fan_in = in + out.
static void xlinear(OcrBuilder *b, LLinear *l, const char *name, int in, int out, int bias) {
    llinear_build(b, l, name,
                  (LLinearSpec){.in = in, .out = out, .bias = bias, .winit = ocr_init_kaiming_normal((int64_t)in + out),
                                .binit = ocr_init_const(0.0f), .attr = ocr_attr_default()});
}

static void block_build(OcrBuilder *b, NrtrBlock *l, const char *p, const NrtrSpec *s, const float *mask) {
    char buf[256];
    memset(l, 0, sizeof *l);
    const int d = s->dim;
    xlinear(b, &l->qkv, NAME(buf, "%s.self_attn.qkv", p), d, 3 * d, 1);
    lcausal_build(b, &l->self_attn, NAME(buf, "%s.self_attn.attn", p), d, s->heads);
    l->self_attn.mask_host = mask;
    xlinear(b, &l->self_out, NAME(buf, "%s.self_attn.out_proj", p), d, d, 1);
    ldrop_build(b, &l->drop1, NAME(buf, "%s.dropout1", p), s->drop, OCR_DROPOUT_UPSCALE_IN_TRAIN, 0);
    ladd_build(b, &l->add1, NAME(buf, "%s.add1", p));
    lln_build(b, &l->norm1, NAME(buf, "%s.norm1", p), d, 1e-5f);
    xlinear(b, &l->q, NAME(buf, "%s.cross_attn.q", p), d, d, 1);
    xlinear(b, &l->kv, NAME(buf, "%s.cross_attn.kv", p), d, 2 * d, 1);
    lcross_build(b, &l->cross_attn, NAME(buf, "%s.cross_attn.attn", p), d, s->heads);
    xlinear(b, &l->cross_out, NAME(buf, "%s.cross_attn.out_proj", p), d, d, 1);
    ldrop_build(b, &l->drop2, NAME(buf, "%s.dropout2", p), s->drop, OCR_DROPOUT_UPSCALE_IN_TRAIN, 0);
    ladd_build(b, &l->add2, NAME(buf, "%s.add2", p));
    lln_build(b, &l->norm2, NAME(buf, "%s.norm2", p), d, 1e-5f);
    xlinear(b, &l->fc1, NAME(buf, "%s.mlp.fc1", p), d, s->ffn, 1);
    lact_build(b, &l->relu, NAME(buf, "%s.mlp.act", p), OCR_ACT_RELU);
    ldrop_build(b, &l->mlp_drop1, NAME(buf, "%s.mlp.drop1", p), s->drop, OCR_DROPOUT_UPSCALE_IN_TRAIN, 0);
    xlinear(b, &l->fc2, NAME(buf, "%s.mlp.fc2", p), s->ffn, d, 1);
    ldrop_build(b, &l->mlp_drop2, NAME(buf, "%s.mlp.drop2", p), s->drop, OCR_DROPOUT_UPSCALE_IN_TRAIN, 0);
    ldrop_build(b, &l->drop3, NAME(buf, "%s.dropout3", p), s->drop, OCR_DROPOUT_UPSCALE_IN_TRAIN, 0);
    ladd_build(b, &l->add3, NAME(buf, "%s.add3", p));
    lln_build(b, &l->norm3, NAME(buf, "%s.norm3", p), d, 1e-5f);
}

// x (B, T, d), memory (B, Tk, d). Training only (the branch never runs in inference).
static OcrTensor *block_forward(OcrCtx *c, NrtrBlock *l, const OcrTensor *x, const OcrTensor *memory) {
    OcrTensor *h = llinear_forward(c, &l->qkv, x);
    h = lcausal_forward(c, &l->self_attn, h);
    h = llinear_forward(c, &l->self_out, h);
    h = ldrop_forward(c, &l->drop1, h);
    OcrTensor *s1 = ladd_forward(c, &l->add1, x, h);
    OcrTensor *t1 = lln_forward(c, &l->norm1, s1);
    OcrTensor *q = llinear_forward(c, &l->q, t1);
    OcrTensor *kv = llinear_forward(c, &l->kv, memory);
    h = lcross_forward(c, &l->cross_attn, q, kv);
    h = llinear_forward(c, &l->cross_out, h);
    h = ldrop_forward(c, &l->drop2, h);
    OcrTensor *s2 = ladd_forward(c, &l->add2, t1, h);
    OcrTensor *t2 = lln_forward(c, &l->norm2, s2);
    h = llinear_forward(c, &l->fc1, t2);
    h = lact_forward(c, &l->relu, h);
    h = ldrop_forward(c, &l->mlp_drop1, h);
    h = llinear_forward(c, &l->fc2, h);
    h = ldrop_forward(c, &l->mlp_drop2, h);
    h = ldrop_forward(c, &l->drop3, h);
    OcrTensor *s3 = ladd_forward(c, &l->add3, t2, h);
    return lln_forward(c, &l->norm3, s3);
}

// Returns dx (owned); the memory's gradient is added to *dmem.
static OcrTensor block_backward(OcrCtx *c, NrtrBlock *l, const OcrTensor *dy, OcrTensor *dmem) {
    // t3 = LN3(t2 + mlp(t2))
    OcrTensor ds3 = lln_backward(c, &l->norm3, dy, 1);
    ladd_backward(c, &l->add3);
    Grad g = borrowed(&ds3);
    drop_back(c, &l->drop3, &g);
    drop_back(c, &l->mlp_drop2, &g);
    grad_set(c, &g, llinear_backward(c, &l->fc2, &g.t, 1));
    drop_back(c, &l->mlp_drop1, &g);
    grad_set(c, &g, lact_backward(c, &l->relu, &g.t, 1));
    grad_set(c, &g, llinear_backward(c, &l->fc1, &g.t, 1));
    OcrTensor dt2 = grad_take(c, &g);
    if (!c->plan) ocr_accumulate(&dt2, &ds3);
    ocr_ctx_free(c, &ds3);
    // t2 = LN2(t1 + cross(t1, memory))
    OcrTensor ds2 = lln_backward(c, &l->norm2, &dt2, 1);
    ocr_ctx_free(c, &dt2);
    ladd_backward(c, &l->add2);
    Grad a = borrowed(&ds2);
    drop_back(c, &l->drop2, &a);
    grad_set(c, &a, llinear_backward(c, &l->cross_out, &a.t, 1));
    OcrTensor dq, dkv;
    lcross_backward(c, &l->cross_attn, &a.t, &dq, &dkv);
    if (a.owned) ocr_ctx_free(c, &a.t);
    OcrTensor dm = llinear_backward(c, &l->kv, &dkv, 1);
    ocr_ctx_free(c, &dkv);
    ocr_ctx_accumulate(c, dmem, &dm);
    OcrTensor dt1 = llinear_backward(c, &l->q, &dq, 1);
    ocr_ctx_free(c, &dq);
    if (!c->plan) ocr_accumulate(&dt1, &ds2);
    ocr_ctx_free(c, &ds2);
    // t1 = LN1(x + self(x))
    OcrTensor ds1 = lln_backward(c, &l->norm1, &dt1, 1);
    ocr_ctx_free(c, &dt1);
    ladd_backward(c, &l->add1);
    Grad s = borrowed(&ds1);
    drop_back(c, &l->drop1, &s);
    grad_set(c, &s, llinear_backward(c, &l->self_out, &s.t, 1));
    grad_set(c, &s, lcausal_backward(c, &l->self_attn, &s.t));
    grad_set(c, &s, llinear_backward(c, &l->qkv, &s.t, 1));
    OcrTensor dx = grad_take(c, &s);
    if (!c->plan) ocr_accumulate(&dx, &ds1);
    ocr_ctx_free(c, &ds1);
    return dx;
}

// ---- the decoder ------------------------------------------------------------------------------------------

void nrtr_build(OcrBuilder *b, NrtrDecoder *l, const char *prefix, NrtrSpec s) {
    char buf[256];
    memset(l, 0, sizeof *l);
    OCR_ASSERT(s.dim % s.heads == 0 && s.steps >= 1 && s.layers >= 1 && s.vocab >= 2, "nrtr: spec");
    l->s = s;
    lembed_build(b, &l->embedding, NAME(buf, "%s.embedding.embedding", prefix), s.vocab, s.dim);
    l->pe_op = ocr_build_op(b, NAME(buf, "%s.positional_encoding", prefix), "add");
    ldrop_build(b, &l->pe_drop, NAME(buf, "%s.positional_encoding.dropout", prefix), s.drop,
                OCR_DROPOUT_UPSCALE_IN_TRAIN, 0);
    l->blocks = calloc((size_t)s.layers, sizeof *l->blocks);
    l->mask_host = malloc((size_t)s.steps * s.steps * sizeof *l->mask_host);
    OCR_ASSERT(l->blocks && l->mask_host, "out of host memory");
    nrtr_causal_mask(l->mask_host, s.steps);
    l->mask_steps = s.steps;
    for (int i = 0; i < s.layers; i++)
        block_build(b, &l->blocks[i], NAME(buf, "%s.decoder.%d", prefix, i), &s, l->mask_host);
    xlinear(b, &l->prj, NAME(buf, "%s.tgt_word_prj", prefix), s.dim, s.vocab, 0);
    l->pe_host = malloc((size_t)s.steps * s.dim * sizeof *l->pe_host);
    OCR_ASSERT(l->pe_host, "out of host memory");
    nrtr_positional_encoding(l->pe_host, s.steps, s.dim);
}

void nrtr_free(NrtrDecoder *l) {
    free(l->blocks);
    free(l->pe_host);
    free(l->mask_host);
    l->blocks = NULL;
    l->pe_host = l->mask_host = NULL;
}

OcrTensor *nrtr_forward(OcrCtx *c, NrtrDecoder *l, const OcrTensor *tokens, const OcrTensor *memory) {
    const int64_t B = tokens->shape[0], T = tokens->shape[1], D = l->s.dim;
    OCR_ASSERT(tokens->ndim == 2 && T >= 1 && T <= l->s.steps && tokens->dtype == OCR_I32,
               "nrtr: tokens must be (B, 1..%d) int32", l->s.steps);
    if (!c->plan && l->mask_steps != T) {
        nrtr_causal_mask(l->mask_host, (int)T);
        l->mask_steps = (int)T;
    }
    OCR_ASSERT(memory->ndim == 3 && memory->shape[0] == B && memory->shape[2] == D, "nrtr: memory must be (B, Tk, %d)",
               l->s.dim);
    OcrTensor *e = lembed_forward(c, &l->embedding, tokens);
    l->pe = ocr_ctx_new(c, OCR_F32, 3, (int64_t[]){1, T, D});
    l->pe_y = ocr_ctx_new(c, ocr_ctx_dtype(c, l->pe_op), 3, (int64_t[]){B, T, D});
    if (!c->plan) {
        ocr_copy_bytes(l->pe.device, l->pe.data, ocr_cpu(), l->pe_host, (size_t)(T * D) * sizeof(float));
        ocr_batch_broadcast_add_forward(&l->pe_y, e, &l->pe);
    }
    ocr_ctx_record(c, l->pe_op, &l->pe_y, (double)ocr_tensor_numel(&l->pe_y));
    ocr_ctx_free(c, &l->pe);
    ocr_ctx_free(c, e);  // the embedding's backward needs only the ids
    OcrTensor *h = ldrop_forward(c, &l->pe_drop, &l->pe_y);
    if (!l->pe_drop.identity) ocr_ctx_free(c, &l->pe_y);  // dropout's backward regenerates its mask
    for (int i = 0; i < l->s.layers; i++) h = block_forward(c, &l->blocks[i], h, memory);
    l->logits = llinear_forward(c, &l->prj, h);
    memset(&l->dmem, 0, sizeof l->dmem);
    return l->logits;
}

OcrTensor nrtr_backward(OcrCtx *c, NrtrDecoder *l, const OcrTensor *dlogits) {
    OcrTensor d = llinear_backward(c, &l->prj, dlogits, 1);
    OcrTensor dmem = {0};
    for (int i = l->s.layers - 1; i >= 0; i--) {
        OcrTensor dx = block_backward(c, &l->blocks[i], &d, &dmem);
        ocr_ctx_free(c, &d);
        d = dx;
    }
    if (!l->pe_drop.identity) {
        OcrTensor g = ldrop_backward(c, &l->pe_drop, &d, 1);
        ocr_ctx_free(c, &d);
        d = g;
    } else {
        ocr_ctx_free(c, &l->pe_y);
    }
    ocr_ctx_bwd_done(c, l->pe_op);
    lembed_backward(c, &l->embedding, &d);  // the PE add passes the gradient through
    ocr_ctx_free(c, &d);
    return dmem;
}

#include "models/svtr/sar.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NAME OCR_NAME

#include "models/svtr/grad.h"

static const int PERM_TB[3] = {1, 0, 2};  // (B, T, C) <-> (T, B, C)

int sar_valid_steps(float valid_ratio, int n) {
    const float v = ceilf(valid_ratio * (float)n);
    return v < (float)n ? (int)v : n;
}

static OcrTensor view3(const OcrTensor *t, int64_t a, int64_t b, int64_t c) {
    return ocr_tensor_reshape(t, 3, (int64_t[]){a, b, c});
}
static OcrTensor view2(const OcrTensor *t, int64_t a, int64_t b) { return ocr_tensor_reshape(t, 2, (int64_t[]){a, b}); }

// Rows [first, first + rows) of a (·, cols) tensor.
static OcrTensor rows_of(const OcrTensor *t, int64_t first, int64_t rows, int64_t cols) {
    size_t off = (size_t)(first * cols) * ocr_dtype_size(t->dtype);
    return ocr_tensor_view((char *)t->data + off, t->dtype, t->device, 2, (int64_t[]){rows, cols});
}

// ---- LSTM layer ------------------------------------------------------------------------------------

static void llstm_build(OcrBuilder *b, LLstm *l, const char *rnn, int k, int in, int hidden) {
    char buf[256];
    memset(l, 0, sizeof *l);
    l->in = in;
    l->hidden = hidden;
    l->op = ocr_build_op(b, NAME(buf, "%s.l%d", rnn, k), "lstm");
    // Paddle's nn.LSTM: every weight and bias U(±1/√hidden).
    const float a = 1.0f / sqrtf((float)hidden);
    OcrInit u = ocr_init_uniform(-a, a);
    l->w_ih = ocr_build_param(b, l->op, NAME(buf, "%s.weight_ih_l%d", rnn, k), 2, (int64_t[]){4 * hidden, in}, u,
                              OCR_ROLE_WEIGHT, ocr_attr_default());
    l->w_hh = ocr_build_param(b, l->op, NAME(buf, "%s.weight_hh_l%d", rnn, k), 2, (int64_t[]){4 * hidden, hidden}, u,
                              OCR_ROLE_WEIGHT, ocr_attr_default());
    l->b_ih = ocr_build_param(b, l->op, NAME(buf, "%s.bias_ih_l%d", rnn, k), 1, (int64_t[]){4 * hidden}, u,
                              OCR_ROLE_BIAS, ocr_attr_default());
    l->b_hh = ocr_build_param(b, l->op, NAME(buf, "%s.bias_hh_l%d", rnn, k), 1, (int64_t[]){4 * hidden}, u,
                              OCR_ROLE_BIAS, ocr_attr_default());
}

// x (T, B, in) -> y (T, B, hidden) in the op's dtype; gates and cells f32.
static OcrTensor *llstm_forward(OcrCtx *c, LLstm *l, const OcrTensor *x) {
    const int64_t T = x->shape[0], B = x->shape[1], H = l->hidden;
    OCR_ASSERT(x->ndim == 3 && x->shape[2] == l->in, "%s: expected (T, B, %d)", c->ops->items[l->op].name, l->in);
    l->in_dtype = x->dtype;
    l->x = ocr_ctx_autocast_input(c, l->op, x, 1, &l->xcast);
    l->y = ocr_ctx_new(c, ocr_ctx_dtype(c, l->op), 3, (int64_t[]){T, B, H});
    l->gates = ocr_ctx_new(c, OCR_F32, 3, (int64_t[]){T, B, 4 * H});
    l->cells = ocr_ctx_new(c, OCR_F32, 3, (int64_t[]){T, B, H});
    if (!c->plan) {
        OcrTensor wi = ocr_ctx_weight(c, l->w_ih), wh = ocr_ctx_weight(c, l->w_hh);
        OcrTensor bi = ocr_ctx_weight(c, l->b_ih), bh = ocr_ctx_weight(c, l->b_hh);
        ocr_lstm_layer_forward(&l->y, &l->gates, &l->cells, &l->x, &wi, &wh, &bi, &bh);
    }
    ocr_ctx_record(c, l->op, &l->y, 8.0 * T * B * H * (l->in + H) + 12.0 * T * B * H);
    return &l->y;
}

static OcrTensor llstm_backward(OcrCtx *c, LLstm *l, const OcrTensor *dy, int need_dx) {
    const int64_t T = l->x.shape[0], B = l->x.shape[1], H = l->hidden;
    OcrTensor dx = {0};
    if (need_dx) dx = ocr_ctx_like(c, &l->x);
    OcrTensor dg = ocr_ctx_new(c, OCR_F32, 3, (int64_t[]){T, B, 4 * H});
    OcrTensor st = ocr_ctx_new(c, OCR_F32, 3, (int64_t[]){3, B, H});
    if (!c->plan) {
        OcrTensor wi = ocr_ctx_weight(c, l->w_ih), wh = ocr_ctx_weight(c, l->w_hh);
        OcrTensor dwi = ocr_ctx_grad(c, l->w_ih), dwh = ocr_ctx_grad(c, l->w_hh);
        OcrTensor dbi = ocr_ctx_grad(c, l->b_ih), dbh = ocr_ctx_grad(c, l->b_hh);
        ocr_lstm_layer_backward(need_dx ? &dx : NULL, &dwi, &dwh, &dbi, &dbh, &dg, &st, dy, &l->x, &l->y, &l->gates,
                                &l->cells, &wi, &wh);
    }
    ocr_ctx_free(c, &st);
    ocr_ctx_free(c, &dg);
    ocr_ctx_free(c, &l->cells);
    ocr_ctx_free(c, &l->gates);
    ocr_ctx_free(c, &l->y);
    if (l->xcast) {
        if (need_dx) dx = ocr_ctx_cast_grad(c, &dx, l->in_dtype);
        ocr_ctx_free(c, &l->x);
    }
    ocr_ctx_bwd_done(c, l->op);
    return dx;
}

// ---- the head -------------------------------------------------------------------------------------------

static void xavier_linear(OcrBuilder *b, LLinear *l, const char *name, int in, int out) {
    // Paddle's default Linear init: XavierUniform U(±√(6/(in+out))), bias 0.
    llinear_build(b, l, name,
                  (LLinearSpec){.in = in, .out = out, .bias = 1, .winit = ocr_init_kaiming_uniform((int64_t)in + out),
                                .binit = ocr_init_const(0.0f), .attr = ocr_attr_default()});
}

void sar_build(OcrBuilder *b, SarHead *l, const char *prefix, SarSpec s) {
    char buf[256], rnn[200];
    memset(l, 0, sizeof *l);
    l->s = s;
    const int C = s.in_channels, E = s.enc_dim, K = s.d_k;
    OCR_ASSERT(C > 0 && E > 0 && K > 0 && s.classes >= 3 && s.max_len >= 3, "sar: bad spec");
    Pool2dParams pp = {1, 1, 1, 1, 0, 0};
    lpool_build(b, &l->pool, NAME(buf, "%s.encoder.max_pool", prefix), LPOOL_MAX, pp);
    NAME(rnn, "%s.encoder.rnn_encoder", prefix);
    llstm_build(b, &l->enc[0], rnn, 0, C, E);
    ldrop_build(b, &l->enc_drop, NAME(buf, "%s.dropout", rnn), s.enc_drop, OCR_DROPOUT_UPSCALE_IN_TRAIN, 0);
    llstm_build(b, &l->enc[1], rnn, 1, E, E);
    xavier_linear(b, &l->enc_linear, NAME(buf, "%s.encoder.linear", prefix), E, E);
    l->emb_op = ocr_build_op(b, NAME(buf, "%s.decoder.embedding", prefix), "embedding");
    l->emb_w = ocr_build_param(b, l->emb_op, NAME(buf, "%s.decoder.embedding.weight", prefix), 2,
                               (int64_t[]){s.classes, E}, ocr_init_kaiming_uniform((int64_t)s.classes + E),
                               OCR_ROLE_EMBED, ocr_attr_default());
    NAME(rnn, "%s.decoder.rnn_decoder", prefix);
    llstm_build(b, &l->dec[0], rnn, 0, E, E);
    llstm_build(b, &l->dec[1], rnn, 1, E, E);
    xavier_linear(b, &l->query, NAME(buf, "%s.decoder.conv1x1_1", prefix), E, K);
    // Paddle's Conv2D default: N(0, √(2/(k·k·C_in))), bias 0.
    lconv_build(b, &l->key, NAME(buf, "%s.decoder.conv3x3_1", prefix),
                (LConvSpec){.cin = C, .cout = K, .kh = 3, .kw = 3, .sh = 1, .sw = 1, .ph = 1, .pw = 1, .groups = 1,
                            .bias = 1, .winit = ocr_init_kaiming_normal(9 * (int64_t)C), .binit = ocr_init_const(0.0f),
                            .attr = ocr_attr_default()});
    l->att_op = ocr_build_op(b, NAME(buf, "%s.decoder.attention", prefix), "sar_attention");
    l->att_w = ocr_build_param(b, l->att_op, NAME(buf, "%s.decoder.conv1x1_2.weight", prefix), 2, (int64_t[]){K, 1},
                               ocr_init_kaiming_uniform((int64_t)K + 1), OCR_ROLE_WEIGHT, ocr_attr_default());
    l->att_b = ocr_build_param(b, l->att_op, NAME(buf, "%s.decoder.conv1x1_2.bias", prefix), 1, (int64_t[]){1},
                               ocr_init_const(0.0f), OCR_ROLE_BIAS, ocr_attr_default());
    l->cat_op = ocr_build_op(b, NAME(buf, "%s.decoder.concat", prefix), "concat");
    xavier_linear(b, &l->pred, NAME(buf, "%s.decoder.prediction", prefix), E + C + E, s.classes - 1);
    ldrop_build(b, &l->pred_drop, NAME(buf, "%s.decoder.pred_dropout", prefix), s.pred_drop,
                OCR_DROPOUT_UPSCALE_IN_TRAIN, 0);
}

void sar_free(SarHead *l) {
    free(l->h_valid_w);
    free(l->h_sel);
    free(l->h_ones);
    l->h_valid_w = NULL;
    l->h_sel = l->h_ones = NULL;
    l->h_cap_b = l->h_cap_w = 0;
}

static void upload(OcrTensor *t, const void *host) {
    ocr_copy_bytes(t->device, t->data, ocr_cpu(), host, ocr_tensor_bytes(t));
}

// The per-pass host tables: valid columns, the encoder step's one-hot, the ones matrix.
static void stage(SarHead *l, const float *vr, int B, int W) {
    const int L = l->s.max_len;
    if (B > l->h_cap_b || W > l->h_cap_w) {
        const int cb = B > l->h_cap_b ? B : l->h_cap_b, cw = W > l->h_cap_w ? W : l->h_cap_w;
        int32_t *v = realloc(l->h_valid_w, (size_t)cb * sizeof *v);
        if (v) l->h_valid_w = v;
        float *s = realloc(l->h_sel, (size_t)cb * cw * sizeof *s);
        if (s) l->h_sel = s;
        float *o = realloc(l->h_ones, (size_t)cb * L * sizeof *o);
        if (o) l->h_ones = o;
        OCR_ASSERT(v && s && o, "sar: out of host memory");
        l->h_cap_b = cb, l->h_cap_w = cw;
    }
    for (int b = 0; b < B; b++) {
        const float r = vr ? vr[b] : 1.0f;
        OCR_ASSERT(r > 0.0f && r <= 1.0f, "sar: valid_ratio %g of sample %d outside (0, 1]", r, b);
        const int v = sar_valid_steps(r, W);
        l->h_valid_w[b] = v;
        for (int w = 0; w < W; w++) l->h_sel[(size_t)b * W + w] = w == v - 1 ? 1.0f : 0.0f;
    }
    for (int i = 0; i < B * L; i++) l->h_ones[i] = 1.0f;
}

OcrTensor *sar_forward(OcrCtx *c, SarHead *l, const OcrTensor *x, const OcrTensor *tokens, const float *valid_ratio) {
    const int64_t B = x->shape[0], H = x->shape[1], W = x->shape[2], C = x->shape[3], P = H * W;
    const int64_t L = l->s.max_len, E = l->s.enc_dim;
    OCR_ASSERT(C == l->s.in_channels, "sar: the map has %lld channels, the head was built for %d", (long long)C,
               l->s.in_channels);
    OCR_ASSERT(tokens->ndim == 2 && tokens->shape[0] == L && tokens->shape[1] == B, "sar: tokens must be (L, B)");
    l->x = x;
    l->x_dtype = x->dtype;
    l->tokens = *tokens;
    if (!c->plan) stage(l, valid_ratio, (int)B, (int)W);
    // Encoder: max over the height, time-major, two LSTM layers.
    l->pooled = H > 1;
    OcrTensor feat;
    if (l->pooled) {
        l->pool.p.kernel_h = (int)H;
        feat = *lpool_forward(c, &l->pool, x, LPOOL_MAX, 1, (int)W);
    } else {
        feat = *x;
    }
    OcrTensor feat3 = view3(&feat, B, W, C);
    l->enc_in = ocr_ctx_new(c, x->dtype, 3, (int64_t[]){W, B, C});
    if (!c->plan) ocr_permute_forward(&l->enc_in, &feat3, PERM_TB);
    OcrTensor *h = llstm_forward(c, &l->enc[0], &l->enc_in);
    h = ldrop_forward(c, &l->enc_drop, h);
    h = llstm_forward(c, &l->enc[1], h);
    // The step ceil(vr·W) − 1 of every sample: one-hot (B, 1, W) times (B, W, E).
    l->h0_bt = ocr_ctx_new(c, h->dtype, 3, (int64_t[]){B, W, E});
    l->sel = ocr_ctx_new(c, OCR_F32, 3, (int64_t[]){B, 1, W});
    l->hsel = ocr_ctx_new(c, h->dtype, 3, (int64_t[]){B, 1, E});
    l->valid_w = ocr_ctx_new(c, OCR_I32, 1, (int64_t[]){B});
    if (!c->plan) {
        ocr_permute_forward(&l->h0_bt, h, PERM_TB);
        upload(&l->sel, l->h_sel);
        upload(&l->valid_w, l->h_valid_w);
        ocr_matmul_batched_forward(&l->hsel, &l->sel, &l->h0_bt, 0, 0, 1.0f);
    }
    OcrTensor hs2 = view2(&l->hsel, B, E);
    l->hol = llinear_forward(c, &l->enc_linear, &hs2);  // (B, E)
    // Decoder input [holistic; embedding(tokens)] (L + 1, B, E), time-major.
    l->emb = ocr_ctx_new(c, ocr_ctx_dtype(c, l->emb_op), 3, (int64_t[]){L, B, E});
    l->dec_in = ocr_ctx_new(c, ocr_ctx_dtype(c, l->dec[0].op), 3, (int64_t[]){L + 1, B, E});
    if (!c->plan) {
        OcrTensor tab = ocr_ctx_weight(c, l->emb_w);
        ocr_embedding_forward(&l->emb, tokens, &tab, l->s.classes - 1);
        OcrTensor d0 = rows_of(&l->dec_in, 0, B, E), d1 = rows_of(&l->dec_in, B, L * B, E);
        OcrTensor e2 = view2(&l->emb, L * B, E);
        ocr_cast_forward(&d0, l->hol);
        ocr_cast_forward(&d1, &e2);
    }
    ocr_ctx_record(c, l->emb_op, &l->emb, (double)ocr_tensor_numel(&l->emb));
    OcrTensor *y = llstm_forward(c, &l->dec[0], &l->dec_in);
    y = llstm_forward(c, &l->dec[1], y);
    // Steps 1..L, batch-major.
    l->y_bt = ocr_ctx_new(c, y->dtype, 3, (int64_t[]){B, L, E});
    if (!c->plan) {
        OcrTensor tail = rows_of(y, B, L * B, E);
        OcrTensor tail3 = view3(&tail, L, B, E);
        ocr_permute_forward(&l->y_bt, &tail3, PERM_TB);
    }
    l->q = llinear_forward(c, &l->query, &l->y_bt);  // (B, L, K)
    l->keyt = lconv_forward(c, &l->key, x);          // (B, H, W, K)
    // Attention (f32): scores, mask, softmax over H·W, glimpse.
    l->scores = ocr_ctx_new(c, OCR_F32, 3, (int64_t[]){B, L, P});
    l->glimpse = ocr_ctx_new(c, OCR_F32, 3, (int64_t[]){B, L, C});
    if (!c->plan) {
        OcrTensor k3 = view3(l->keyt, B, P, l->s.d_k), x3 = view3(x, B, P, C);
        OcrTensor w = ocr_ctx_weight(c, l->att_w), bias = ocr_ctx_weight(c, l->att_b);
        ocr_sar_attention_score_forward(&l->scores, &k3, l->q, &w, &bias, &l->valid_w, (int)W);
        ocr_softmax_forward(&l->scores, &l->scores);
        ocr_matmul_batched_forward(&l->glimpse, &l->scores, &x3, 0, 0, 1.0f);
    }
    ocr_ctx_record(c, l->att_op, &l->glimpse, 4.0 * B * L * P * l->s.d_k + 2.0 * B * L * P * C);
    // Prediction input [y, glimpse, holistic broadcast over the steps].
    const ocr_dtype_t cd = ocr_ctx_dtype(c, l->cat_op);
    l->ones = ocr_ctx_new(c, OCR_F32, 3, (int64_t[]){B, L, 1});
    l->holb = ocr_ctx_new(c, OCR_F32, 3, (int64_t[]){B, L, E});
    l->cat = ocr_ctx_new(c, cd, 3, (int64_t[]){B, L, E + C + E});
    if (!c->plan) {
        upload(&l->ones, l->h_ones);
        OcrTensor h3 = view3(l->hol, B, 1, E);
        ocr_matmul_batched_forward(&l->holb, &l->ones, &h3, 0, 0, 1.0f);
        const OcrTensor *parts[3] = {&l->y_bt, &l->glimpse, &l->holb};
        ocr_concat_forward(&l->cat, parts, 3);
    }
    ocr_ctx_record(c, l->cat_op, &l->cat, (double)ocr_tensor_numel(&l->cat));
    OcrTensor *lg = llinear_forward(c, &l->pred, &l->cat);
    l->logits = ldrop_forward(c, &l->pred_drop, lg);
    return l->logits;
}

OcrTensor sar_backward(OcrCtx *c, SarHead *l, const OcrTensor *dlogits) {
    const OcrTensor *x = l->x;
    const int64_t B = x->shape[0], H = x->shape[1], W = x->shape[2], C = x->shape[3], P = H * W;
    const int64_t L = l->s.max_len, E = l->s.enc_dim, K = l->s.d_k;
    Grad g = borrowed(dlogits);
    drop_back(c, &l->pred_drop, &g);
    OcrTensor dcat = llinear_backward(c, &l->pred, &g.t, 1);
    grad_drop(c, &g);
    OcrTensor dy = ocr_ctx_like(c, &l->y_bt);
    OcrTensor dglimpse = ocr_ctx_new(c, OCR_F32, 3, (int64_t[]){B, L, C});
    OcrTensor dholb = ocr_ctx_new(c, OCR_F32, 3, (int64_t[]){B, L, E});
    if (!c->plan) {
        OcrTensor *parts[3] = {&dy, &dglimpse, &dholb};
        ocr_concat_backward(parts, 3, &dcat);
    }
    ocr_ctx_free(c, &dcat);
    ocr_ctx_free(c, &l->cat);
    ocr_ctx_bwd_done(c, l->cat_op);
    // The holistic feature's gradient: Σ over the steps (the broadcast's backward) ...
    OcrTensor dhol = ocr_ctx_new(c, OCR_F32, 2, (int64_t[]){B, E});
    if (!c->plan) {
        OcrTensor dh3 = view3(&dhol, B, 1, E), h3 = view3(l->hol, B, 1, E);
        ocr_matmul_batched_backward(NULL, &dh3, &dholb, &l->ones, &h3, 0, 0, 1.0f);
    }
    ocr_ctx_free(c, &dholb);
    ocr_ctx_free(c, &l->holb);
    ocr_ctx_free(c, &l->ones);
    // Attention: glimpse = α·x, α = softmax(scores).
    OcrTensor dalpha = ocr_ctx_new(c, OCR_F32, 3, (int64_t[]){B, L, P});
    OcrTensor dx_att = ocr_ctx_new(c, OCR_F32, 3, (int64_t[]){B, P, C});
    OcrTensor dkey = ocr_ctx_new(c, l->keyt->dtype, 3, (int64_t[]){B, P, K});
    OcrTensor dq = ocr_ctx_like(c, l->q);
    if (!c->plan) {
        OcrTensor x3 = view3(x, B, P, C);
        ocr_matmul_batched_backward(&dalpha, &dx_att, &dglimpse, &l->scores, &x3, 0, 0, 1.0f);
        ocr_softmax_backward(&dalpha, &dalpha, &l->scores);
        OcrTensor k3 = view3(l->keyt, B, P, K), w = ocr_ctx_weight(c, l->att_w);
        OcrTensor dw = ocr_ctx_grad(c, l->att_w), db = ocr_ctx_grad(c, l->att_b);
        ocr_sar_attention_score_backward(&dkey, &dq, &dw, &db, &dalpha, &k3, l->q, &w, &l->valid_w, (int)W);
    }
    ocr_ctx_free(c, &dalpha);
    ocr_ctx_free(c, &dglimpse);
    ocr_ctx_free(c, &l->glimpse);
    ocr_ctx_free(c, &l->scores);
    ocr_ctx_bwd_done(c, l->att_op);
    OcrTensor dkey4 = ocr_tensor_reshape(&dkey, 4, (int64_t[]){B, H, W, K});
    OcrTensor dx_key = lconv_backward(c, &l->key, &dkey4, 1);
    ocr_ctx_free(c, &dkey);
    OcrTensor dy2 = llinear_backward(c, &l->query, &dq, 1);
    ocr_ctx_free(c, &dq);
    if (!c->plan) ocr_accumulate(&dy, &dy2);
    ocr_ctx_free(c, &dy2);
    // Decoder LSTMs: steps 1..L from dy, step 0's output has no gradient.
    OcrTensor dyd = ocr_ctx_like(c, &l->dec[1].y);
    if (!c->plan) {
        OcrTensor d0 = rows_of(&dyd, 0, B, E), tail = rows_of(&dyd, B, L * B, E);
        OcrTensor tail3 = view3(&tail, L, B, E);
        ocr_zero_tensor(&d0);
        ocr_permute_backward(&tail3, &dy, PERM_TB);
    }
    ocr_ctx_free(c, &dy);
    ocr_ctx_free(c, &l->y_bt);
    OcrTensor dd = llstm_backward(c, &l->dec[1], &dyd, 1);
    ocr_ctx_free(c, &dyd);
    OcrTensor ddin = llstm_backward(c, &l->dec[0], &dd, 1);
    ocr_ctx_free(c, &dd);
    // ... plus the decoder input's step 0; the rest goes to the embedding.
    OcrTensor demb = ocr_ctx_new(c, OCR_F32, 3, (int64_t[]){L, B, E});
    OcrTensor dhol0 = ocr_ctx_new(c, OCR_F32, 2, (int64_t[]){B, E});
    if (!c->plan) {
        OcrTensor d0 = rows_of(&ddin, 0, B, E), d1 = rows_of(&ddin, B, L * B, E), e2 = view2(&demb, L * B, E);
        ocr_cast_forward(&dhol0, &d0);
        ocr_accumulate(&dhol, &dhol0);
        ocr_cast_forward(&e2, &d1);
        OcrTensor dtab = ocr_ctx_grad(c, l->emb_w);
        ocr_embedding_backward(&dtab, &demb, &l->tokens, l->s.classes - 1);
    }
    ocr_ctx_free(c, &dhol0);
    ocr_ctx_free(c, &demb);
    ocr_ctx_free(c, &ddin);
    ocr_ctx_free(c, &l->dec_in);
    ocr_ctx_free(c, &l->emb);
    ocr_ctx_bwd_done(c, l->emb_op);
    // Encoder: the holistic Linear, the step selection, two LSTM layers, the height max.
    OcrTensor dhs = llinear_backward(c, &l->enc_linear, &dhol, 1);
    ocr_ctx_free(c, &dhol);
    OcrTensor dh_bt = ocr_ctx_like(c, &l->h0_bt);
    OcrTensor dh1 = ocr_ctx_like(c, &l->enc[1].y);
    if (!c->plan) {
        OcrTensor d3 = view3(&dhs, B, 1, E);
        ocr_matmul_batched_backward(NULL, &dh_bt, &d3, &l->sel, &l->h0_bt, 0, 0, 1.0f);
        ocr_permute_backward(&dh1, &dh_bt, PERM_TB);
    }
    ocr_ctx_free(c, &dh_bt);
    ocr_ctx_free(c, &dhs);
    ocr_ctx_free(c, &l->hsel);
    ocr_ctx_free(c, &l->sel);
    ocr_ctx_free(c, &l->h0_bt);
    Grad ge = {llstm_backward(c, &l->enc[1], &dh1, 1), 1};
    ocr_ctx_free(c, &dh1);
    drop_back(c, &l->enc_drop, &ge);
    OcrTensor din = llstm_backward(c, &l->enc[0], &ge.t, 1);
    grad_drop(c, &ge);
    OcrTensor dfeat = ocr_ctx_new(c, x->dtype, 4, (int64_t[]){B, 1, W, C});
    if (!c->plan) {
        OcrTensor f3 = view3(&dfeat, B, W, C);
        ocr_permute_backward(&f3, &din, PERM_TB);
    }
    ocr_ctx_free(c, &din);
    ocr_ctx_free(c, &l->enc_in);
    OcrTensor dx = dx_key;
    if (!c->plan) {
        OcrTensor a4 = ocr_tensor_reshape(&dx_att, 4, (int64_t[]){B, H, W, C});
        ocr_accumulate(&dx, &a4);
    }
    ocr_ctx_free(c, &dx_att);
    if (l->pooled) {
        OcrTensor dp = lpool_backward(c, &l->pool, &dfeat, 1);
        if (!c->plan) ocr_accumulate(&dx, &dp);
        ocr_ctx_free(c, &dp);
    } else if (!c->plan) {
        ocr_accumulate(&dx, &dfeat);
    }
    ocr_ctx_free(c, &dfeat);
    ocr_ctx_free(c, &l->valid_w);
    return dx;
}

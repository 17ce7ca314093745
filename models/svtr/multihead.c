#include "models/svtr/multihead.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME OCR_NAME

// NRTRLabelEncode's special ids: padding/blank 0, <unk> 1, <s> 2, </s> 3, characters from 4.
enum { NRTR_PAD = 0, NRTR_BOS = 2, NRTR_EOS = 3, NRTR_CHAR0 = 4 };
// SARLabelEncode's special ids from the CTC class count C: characters 0..C − 2 (CTC id − 1),
// <UKN> C − 1 (never produced), BOS = EOS = C, PAD = C + 1.
static int sar_bos(int ctc_classes) { return ctc_classes; }
static int sar_pad(int ctc_classes) { return ctc_classes + 1; }

int guide_vocab(const MultiHeadSpec *s, int ctc_classes) {
    if (s->kind == OCR_GUIDE_NRTR) return ctc_classes + 4;
    if (s->kind == OCR_GUIDE_SAR) return ctc_classes + 1;
    return 0;
}

void guide_build(OcrBuilder *b, GuideHead *g, const MultiHeadSpec *s, int in_channels, int ctc_classes) {
    char buf[256];
    memset(g, 0, sizeof *g);
    g->s = *s;
    g->ctc_classes = ctc_classes;
    if (s->kind == OCR_GUIDE_SAR) {
        // SARHead(in_channels = the backbone's, out_channels = SARLabelDecode = C + 2, ...).
        SarSpec ss = {.in_channels = in_channels, .enc_dim = s->sar_enc_dim, .d_k = s->sar_d_k,
                      .classes = ctc_classes + 2, .max_len = s->steps + 1, .enc_drop = s->sar_enc_drop,
                      .pred_drop = s->sar_pred_drop};
        sar_build(b, &g->sar, NAME(buf, "head.sar_head"), ss);
        return;
    }
    OCR_ASSERT(s->kind == OCR_GUIDE_NRTR, "guide: unknown guidance branch %d", (int)s->kind);
    // Paddle's default Linear init: XavierUniform, U(±√(6/(in+out))) = Kaiming uniform over in + out.
    llinear_build(b, &g->before_gtc, "head.before_gtc.1.fc",
                  (LLinearSpec){.in = in_channels, .out = s->nrtr_dim, .bias = 0,
                                .winit = ocr_init_kaiming_uniform((int64_t)in_channels + s->nrtr_dim),
                                .binit = ocr_init_const(0.0f), .attr = ocr_attr_default()});
    NrtrSpec ns = {.dim = s->nrtr_dim, .heads = s->nrtr_dim / 32, .layers = s->nrtr_layers, .ffn = 4 * s->nrtr_dim,
                   .vocab = guide_vocab(s, ctc_classes), .steps = s->steps, .drop = s->nrtr_dropout};
    nrtr_build(b, &g->nrtr, NAME(buf, "head.gtc_head"), ns);
}

void guide_free(GuideHead *g) {
    if (g->s.kind == OCR_GUIDE_SAR) sar_free(&g->sar);
    else nrtr_free(&g->nrtr);
    free(g->h_tokens);
    free(g->h_targets);
    free(g->h_valid);
    g->h_tokens = g->h_targets = NULL;
    g->h_valid = NULL;
    g->h_cap = 0;
}

ocr_status_t guide_set_labels(GuideHead *g, const int32_t *labels, const int32_t *lengths, int batch, int max_len) {
    const int T = g->s.steps;
    g->labels_set = 0;
    if (max_len != T + 1)
        return ocr_set_error(OCR_ERR_INVALID_ARG,
                             "MultiHead: labels padded to %d, the guidance branch was built for max_text_length %d",
                             max_len, T + 1);
    if (batch > g->h_cap) {
        // T + 1 positions per sample: SAR's decoder reads max_text_length of them.
        int32_t *a = realloc(g->h_tokens, (size_t)batch * (T + 1) * sizeof *a);
        if (a) g->h_tokens = a;
        int32_t *t = realloc(g->h_targets, (size_t)batch * (T + 1) * sizeof *t);
        if (t) g->h_targets = t;
        float *v = realloc(g->h_valid, (size_t)batch * sizeof *v);
        if (v) g->h_valid = v;
        if (!a || !t || !v) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
        g->h_cap = batch;
    }
    const int sar = g->s.kind == OCR_GUIDE_SAR;
    // PaddleOCR's Transformer.forward in training reads label_gtc[:, :2 + max(length)] and the
    // decoder drops the last entry: max(length) + 1 positions, and NRTRLoss trains them on
    // label_gtc[:, 1:2 + max(length)]. The causal mask keeps every computed position's logits
    // equal to a full-length pass's, so this is PaddleOCR's loss, not an approximation of it.
    int longest = 0;
    for (int i = 0; i < batch; i++) longest = lengths[i] > longest ? lengths[i] : longest;
    const int Tp = longest + 1 < T ? longest + 1 : T;
    for (int i = 0; i < batch; i++) {
        const int n = lengths[i];
        if (n < 1 || n > max_len - 2)
            return ocr_set_error(OCR_ERR_INVALID_ARG,
                                 "MultiHead: sample %d has %d characters; the guidance labels need 1..%d "
                                 "(max_text_length − 2: MultiLabelEncode's rule)",
                                 i, n, max_len - 2);
        // label_gtc = [<s>, c1+3, ..., cn+3, </s>, 0, ...] (max_len entries): the decoder reads
        // label_gtc[0 .. T−1] and is trained on label_gtc[1 .. T].
        int32_t gtc[1024];
        OCR_ASSERT(max_len <= 1024, "max_text_length %d", max_len);
        gtc[0] = NRTR_BOS;
        for (int k = 0; k < n; k++) {
            const int32_t c = labels[(size_t)i * max_len + k];
            if (c < 1 || c >= g->ctc_classes)
                return ocr_set_error(OCR_ERR_INVALID_ARG, "MultiHead: sample %d, character %d: CTC id %d outside [1, %d)",
                                     i, k, c, g->ctc_classes);
            gtc[1 + k] = sar ? c - 1 : c - 1 + NRTR_CHAR0;
        }
        if (sar) {
            // label_sar = [BOS, c − 1 ..., EOS, PAD ...]; tokens time-major (L, B), targets
            // label_sar[t + 1] with PAD for the last position.
            const int pad = sar_pad(g->ctc_classes);
            gtc[0] = sar_bos(g->ctc_classes);
            gtc[1 + n] = sar_bos(g->ctc_classes);
            for (int k = n + 2; k < max_len; k++) gtc[k] = pad;
            for (int k = 0; k < max_len; k++) g->h_tokens[(size_t)k * batch + i] = gtc[k];
            for (int k = 0; k < max_len; k++)
                g->h_targets[(size_t)i * max_len + k] = k + 1 < max_len ? gtc[k + 1] : pad;
            continue;
        }
        gtc[1 + n] = NRTR_EOS;
        for (int k = n + 2; k < max_len; k++) gtc[k] = NRTR_PAD;
        memcpy(g->h_tokens + (size_t)i * Tp, gtc, (size_t)Tp * sizeof *gtc);
        memcpy(g->h_targets + (size_t)i * Tp, gtc + 1, (size_t)Tp * sizeof *gtc);
    }
    g->pass_steps = sar ? T + 1 : Tp;
    g->h_batch = batch;
    g->labels_set = 1;
    return OCR_OK;
}

int guide_pass_steps(const GuideHead *g) {
    if (g->s.kind == OCR_GUIDE_SAR) return g->s.steps + 1;
    return g->labels_set ? g->pass_steps : g->s.steps;
}

ocr_status_t guide_set_valid_ratios(GuideHead *g, const float *valid_ratios, int batch) {
    g->valid_set = 0;
    if (batch > g->h_cap) {
        float *v = realloc(g->h_valid, (size_t)batch * sizeof *v);
        if (!v) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
        g->h_valid = v;
    }
    for (int i = 0; i < batch; i++)
        if (!(valid_ratios[i] > 0.0f && valid_ratios[i] <= 1.0f))
            return ocr_set_error(OCR_ERR_INVALID_ARG, "MultiHead: sample %d has valid_ratio %g, outside (0, 1]", i,
                                 (double)valid_ratios[i]);
    memcpy(g->h_valid, valid_ratios, (size_t)batch * sizeof *valid_ratios);
    g->valid_set = batch;
    return OCR_OK;
}

static OcrTensor *sar_guide_forward(OcrCtx *c, GuideHead *g, const OcrTensor *x) {
    const int64_t B = x->shape[0], L = g->s.steps + 1;
    g->tokens = ocr_ctx_new(c, OCR_I32, 2, (int64_t[]){L, B});
    g->targets = ocr_ctx_new(c, OCR_I32, 2, (int64_t[]){B, L});
    const float *vr = NULL;
    if (!c->plan) {
        size_t bytes = (size_t)(B * L) * sizeof(int32_t);
        ocr_copy_bytes(g->tokens.device, g->tokens.data, ocr_cpu(), g->h_tokens, bytes);
        ocr_copy_bytes(g->targets.device, g->targets.data, ocr_cpu(), g->h_targets, bytes);
        g->labels_set = 0;
        if (g->valid_set == B) {
            vr = g->h_valid;
        } else if (!g->warned_valid) {
            fprintf(stderr, "MultiHead SAR: a training pass without valid ratios (guide_set_valid_ratios); "
                            "the attention and the holistic step mask nothing (valid_ratio 1)\n");
            g->warned_valid = 1;
        }
        g->valid_set = 0;  // one pass per set of ratios
    }
    g->logits = sar_forward(c, &g->sar, x, &g->tokens, vr);
    g->dlogits = ocr_ctx_like(c, g->logits);
    return g->logits;
}

OcrTensor *guide_forward(OcrCtx *c, GuideHead *g, const OcrTensor *x) {
    const int64_t B = x->shape[0], W = x->shape[1] * x->shape[2], C = x->shape[3];
    OCR_ASSERT(c->plan || (g->labels_set && g->h_batch == B), "MultiHead: a training pass without its labels");
    if (g->s.kind == OCR_GUIDE_SAR) return sar_guide_forward(c, g, x);
    const int64_t T = guide_pass_steps(g);
    g->tokens = ocr_ctx_new(c, OCR_I32, 2, (int64_t[]){B, T});
    g->targets = ocr_ctx_new(c, OCR_I32, 2, (int64_t[]){B, T});
    if (!c->plan) {
        size_t bytes = (size_t)(B * T) * sizeof(int32_t);
        ocr_copy_bytes(g->tokens.device, g->tokens.data, ocr_cpu(), g->h_tokens, bytes);
        ocr_copy_bytes(g->targets.device, g->targets.data, ocr_cpu(), g->h_targets, bytes);
        g->labels_set = 0;  // one pass per set of labels
    }
    // Flatten(2) + transpose of the NCHW map is the NHWC map read as (B, H·W, C).
    OcrTensor seq = ocr_tensor_reshape(x, 3, (int64_t[]){B, W, C});
    g->mem = llinear_forward(c, &g->before_gtc, &seq);
    g->logits = nrtr_forward(c, &g->nrtr, &g->tokens, g->mem);
    g->dlogits = ocr_ctx_like(c, g->logits);
    return g->logits;
}

OcrTensor guide_backward(OcrCtx *c, GuideHead *g) {
    if (g->s.kind == OCR_GUIDE_SAR) {
        OcrTensor dx = sar_backward(c, &g->sar, &g->dlogits);
        ocr_ctx_free(c, &g->dlogits);
        ocr_ctx_free(c, &g->targets);
        ocr_ctx_free(c, &g->tokens);
        // (B, H·W, C), as the NRTR branch returns it.
        return ocr_tensor_reshape(&dx, 3, (int64_t[]){dx.shape[0], dx.shape[1] * dx.shape[2], dx.shape[3]});
    }
    OcrTensor dmem = nrtr_backward(c, &g->nrtr, &g->dlogits);
    ocr_ctx_free(c, &g->dlogits);
    OcrTensor dseq = llinear_backward(c, &g->before_gtc, &dmem, 1);
    ocr_ctx_free(c, &dmem);
    ocr_ctx_free(c, &g->targets);
    ocr_ctx_free(c, &g->tokens);
    return dseq;
}

CrossEntropyParams guide_loss_params(const GuideHead *g, float grad_scale) {
    if (g->s.kind == OCR_GUIDE_SAR) {
        CrossEntropyParams sp = {0.0f, sar_pad(g->ctc_classes), grad_scale};
        return sp;
    }
    CrossEntropyParams p = {g->s.nrtr_smoothing ? 0.1f : 0.0f, g->s.nrtr_smoothing ? NRTR_PAD : g->s.nrtr_ignore_index,
                            grad_scale};
    return p;
}

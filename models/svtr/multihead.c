#include "models/svtr/multihead.h"

#include <stdlib.h>
#include <string.h>

#define NAME OCR_NAME

// NRTRLabelEncode's special ids: padding/blank 0, <unk> 1, <s> 2, </s> 3, characters from 4.
enum { NRTR_PAD = 0, NRTR_BOS = 2, NRTR_EOS = 3, NRTR_CHAR0 = 4 };

int guide_vocab(const MultiHeadSpec *s, int ctc_classes) {
    return s->kind == OCR_GUIDE_NRTR ? ctc_classes + 4 : 0;
}

void guide_build(OcrBuilder *b, GuideHead *g, const MultiHeadSpec *s, int in_channels, int ctc_classes) {
    char buf[256];
    memset(g, 0, sizeof *g);
    g->s = *s;
    g->ctc_classes = ctc_classes;
    OCR_ASSERT(s->kind == OCR_GUIDE_NRTR, "guide: only the NRTR branch is built here");
    // Paddle's default Linear init: XavierUniform, U(±√(6/(in+out))) = Kaiming uniform over in + out.
    llinear_build(b, &g->before_gtc, "head.before_gtc.1.fc", in_channels, s->nrtr_dim, 0,
                  ocr_init_kaiming_uniform((int64_t)in_channels + s->nrtr_dim), ocr_init_const(0.0f),
                  ocr_attr_default());
    NrtrSpec ns = {s->nrtr_dim, s->nrtr_dim / 32, s->nrtr_layers, 4 * s->nrtr_dim, guide_vocab(s, ctc_classes),
                   s->steps, s->nrtr_dropout};
    nrtr_build(b, &g->nrtr, NAME(buf, "head.gtc_head"), ns);
}

void guide_free(GuideHead *g) {
    nrtr_free(&g->nrtr);
    free(g->h_tokens);
    free(g->h_targets);
    g->h_tokens = g->h_targets = NULL;
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
        int32_t *a = realloc(g->h_tokens, (size_t)batch * T * sizeof *a);
        if (a) g->h_tokens = a;
        int32_t *t = realloc(g->h_targets, (size_t)batch * T * sizeof *t);
        if (t) g->h_targets = t;
        if (!a || !t) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
        g->h_cap = batch;
    }
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
            gtc[1 + k] = c - 1 + NRTR_CHAR0;
        }
        gtc[1 + n] = NRTR_EOS;
        for (int k = n + 2; k < max_len; k++) gtc[k] = NRTR_PAD;
        memcpy(g->h_tokens + (size_t)i * T, gtc, (size_t)T * sizeof *gtc);
        memcpy(g->h_targets + (size_t)i * T, gtc + 1, (size_t)T * sizeof *gtc);
    }
    g->h_batch = batch;
    g->labels_set = 1;
    return OCR_OK;
}

OcrTensor *guide_forward(OcrCtx *c, GuideHead *g, const OcrTensor *x) {
    const int64_t B = x->shape[0], W = x->shape[1] * x->shape[2], C = x->shape[3], T = g->s.steps;
    OCR_ASSERT(c->plan || (g->labels_set && g->h_batch == B), "MultiHead: a training pass without its labels");
    g->tokens = ocr_ctx_new(c, OCR_I32, 2, (int64_t[]){B, T});
    g->targets = ocr_ctx_new(c, OCR_I32, 2, (int64_t[]){B, T});
    if (!c->plan) {
        size_t bytes = (size_t)(B * T) * sizeof(int32_t);
        copy_bytes(g->tokens.device, g->tokens.data, ocr_cpu(), g->h_tokens, bytes);
        copy_bytes(g->targets.device, g->targets.data, ocr_cpu(), g->h_targets, bytes);
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
    OcrTensor dmem = nrtr_backward(c, &g->nrtr, &g->dlogits);
    ocr_ctx_free(c, &g->dlogits);
    OcrTensor dseq = llinear_backward(c, &g->before_gtc, &dmem, 1);
    ocr_ctx_free(c, &dmem);
    ocr_ctx_free(c, &g->targets);
    ocr_ctx_free(c, &g->tokens);
    return dseq;
}

CrossEntropyParams guide_loss_params(const GuideHead *g, float grad_scale) {
    CrossEntropyParams p = {g->s.nrtr_smoothing ? 0.1f : 0.0f, g->s.nrtr_smoothing ? NRTR_PAD : g->s.nrtr_ignore_index,
                            grad_scale};
    return p;
}

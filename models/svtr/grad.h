// Gradients in a layer's backward that are either borrowed from the caller or owned by the
// current backward (and freed from the context when replaced): shared by the blocks and the
// NRTR decoder, internal to models/svtr.
#ifndef OCR_MODELS_SVTR_GRAD_H
#define OCR_MODELS_SVTR_GRAD_H

#include "models/svtr/nn.h"

typedef struct {
    OcrTensor t;
    int owned;
} Grad;

static inline Grad borrowed(const OcrTensor *t) {
    Grad g = {*t, 0};
    return g;
}
static inline void grad_set(OcrCtx *c, Grad *g, OcrTensor t) {
    if (g->owned) ocr_ctx_free(c, &g->t);
    g->t = t;
    g->owned = 1;
}
static inline void grad_drop(OcrCtx *c, Grad *g) {
    if (g->owned) ocr_ctx_free(c, &g->t);
    g->owned = 0;
}
// Takes the gradient out as an owned tensor (a copy when it was borrowed).
static inline OcrTensor grad_take(OcrCtx *c, Grad *g) {
    if (g->owned) {
        g->owned = 0;
        return g->t;
    }
    OcrTensor t = ocr_ctx_like(c, &g->t);
    if (!c->plan) ocr_cast_forward(&t, &g->t);
    return t;
}
// Backward through a dropout / drop path that may have been an identity.
static inline void drop_back(OcrCtx *c, LDrop *l, Grad *g) {
    if (l->identity) return;
    grad_set(c, g, ldrop_backward(c, l, &g->t, 1));
}

#endif

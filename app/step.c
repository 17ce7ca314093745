#include "app/step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ctc.h"

ocr_status_t step_ctx_init(StepCtx *s, OcrModel *m, AmpEngine *amp, Optimizer *optim, int capacity, int focal) {
    memset(s, 0, sizeof *s);
    s->m = m;
    s->amp = amp;
    s->optim = optim;
    s->capacity = capacity;
    s->focal = focal;
    int np = ocr_model_params(m)->count;
    size_t pn = (size_t)(np ? np : 1);
    s->losses = malloc((size_t)capacity * sizeof *s->losses);
    s->infeasible = malloc((size_t)capacity * sizeof *s->infeasible);
    s->clip = malloc(pn * sizeof *s->clip);
    s->grad_views = calloc(pn, sizeof *s->grad_views);
    s->grads = calloc(pn, sizeof *s->grads);
    if (!s->losses || !s->infeasible || !s->clip || !s->grad_views || !s->grads) {
        step_ctx_free(s);
        return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    }
    return OCR_OK;
}

void step_ctx_free(StepCtx *s) {
    ocr_tensor_free(&s->dl32);
    ocr_tensor_free(&s->logits_buf);
    free(s->losses);
    free(s->infeasible);
    free(s->clip);
    free(s->grad_views);
    free(s->grads);
    memset(s, 0, sizeof *s);
}

ocr_status_t step_run(StepCtx *s, const OcrTensor *images, int32_t *labels, int32_t *lengths, int max_len, double lr,
                      StepOutcome *out) {
    int B = (int)images->shape[0];
    OCR_ASSERT(B <= s->capacity);
    OcrParamTable *params = ocr_model_params(s->m);
    AmpEngine *amp = s->amp;
    memset(out, 0, sizeof *out);

    OCR_TRY(amp_engine_begin_step(amp));
    ocr_params_zero_grads(params);
    OCR_TRY(ocr_model_forward(s->m, images, 1));
    amp_engine_after_forward(amp);
    const OcrTensor *logits = amp_loss_logits(ocr_model_logits(s->m), &s->logits_buf);
    OcrTensor *dl = ocr_model_dlogits(s->m);
    OcrTensor *dl32 = dl;
    if (dl->dtype != OCR_F32) {
        // The loss works in f32; its gradient is rounded into the model's dlogits afterwards.
        if (!s->dl32.data || !ocr_tensor_same_shape(&s->dl32, logits)) {
            ocr_tensor_free(&s->dl32);
            OCR_TRY(ocr_tensor_alloc(&s->dl32, OCR_F32, logits->device, 3, logits->shape, OCR_MEM_ACTIVATIONS));
        }
        dl32 = &s->dl32;
    }
    OcrTensor targets = ocr_tensor_view(labels, OCR_I32, ocr_cpu(), 2, (int64_t[]){B, max_len});
    OcrTensor lens = ocr_tensor_view(lengths, OCR_I32, ocr_cpu(), 1, (int64_t[]){B});
    OcrTensor losses = ocr_tensor_view(s->losses, OCR_F32, ocr_cpu(), 1, (int64_t[]){B});
    OcrTensor infeas = ocr_tensor_view(s->infeasible, OCR_I32, ocr_cpu(), 1, (int64_t[]){B});
    // zero_infinity: one label longer than the sequence (with its adjacent repeats) would make
    // the whole gradient NaN and the step look like an AMP overflow; it is zeroed and counted.
    CtcParams cp = {OCR_CTC_REDUCTION_PADDLE, 1, s->focal, amp_engine_loss_scale(amp)};
    out->loss = ctc_loss_forward(&losses, NULL, dl32, &infeas, logits, &targets, &lens, NULL, cp);
    for (int i = 0; i < B; i++) out->infeasible += s->infeasible[i] != 0;
    if (dl32 != dl) amp_loss_dlogits(dl, dl32);
    OCR_TRY(ocr_model_backward(s->m));

    out->skipped = amp_engine_check_grads(amp);
    out->grad_norm = NAN;
    if (!out->skipped) {
        for (int i = 0; i < params->count; i++) {
            s->grad_views[i] = ocr_params_grad(params, i);
            s->grads[i] = &s->grad_views[i];
        }
        out->grad_norm = optim_clip_factors(s->optim, s->grads, amp->grad_scale, s->clip);
        for (int i = 0; i < params->count; i++) {
            OcrTensor w = ocr_params_tensor(params, i);
            AdamParams p = {0};
            optim_fill(s->optim, i, lr, &p);
            amp_engine_adam_params(amp, i, &p);
            p.grad_scale *= s->clip[i];
            adam_update(&w, amp_engine_master(amp, i), &s->optim->m[i], &s->optim->v[i], &s->grad_views[i], p);
        }
        s->optim->updates++;
    }
    out->scale = amp_engine_loss_scale(amp);
    amp_engine_end_step(amp);
    return OCR_OK;
}

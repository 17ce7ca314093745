// The AMP engine on a real network (PP-OCRv3 en): a short training run in FP32, FP16-O1,
// FP16-O2 and BF16-O2 on fixed synthetic data; the losses must agree (heavy: CI skips it).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp/engine.h"
#include "core/rng.h"
#include "kernels/ctc.h"
#include "models/model.h"
#include "tests/common/test_util.h"
#include "models/amp_view.h"

static OcrConfig *load(const char *name, const char *const *overrides) {
    char path[1024];
    snprintf(path, sizeof path, "%s/configs/%s", OCR_SOURCE_DIR, name);
    OcrConfig *cfg;
    ck_assert_msg(ocr_config_load(&cfg, path) == OCR_OK, "%s", ocr_last_error());
    for (int i = 0; overrides && overrides[i]; i++)
        ck_assert_msg(ocr_config_apply_override(cfg, overrides[i]) == OCR_OK, "%s", ocr_last_error());
    return cfg;
}

static void setup(const char *name, const char *const *overrides, OcrModel **m, AmpEngine *e) {
    OcrConfig *cfg = load(name, overrides);
    ck_assert_msg(ocr_model_from_config(m, cfg) == OCR_OK, "%s", ocr_last_error());
    AmpConfig ac;
    ck_assert_msg(amp_config_from_config(&ac, cfg) == OCR_OK, "%s", ocr_last_error());
    amp_engine_init(e, &ac);
    ck_assert_msg(ocr_amp_attach(e, ocr_model_ops(*m), ocr_model_params(*m), ocr_model_stats(*m)) == OCR_OK, "%s",
                  ocr_last_error());
    if (e->cfg.policy.level == OCR_AMP_O1) ck_assert_int_eq(ocr_model_set_cast_cache(*m, &e->cache), OCR_OK);
    ocr_config_free(cfg);
}



static void adam_fill(void *user, int i, AdamParams *p) {
    (void)i;
    const AmpEngine *e = user;
    p->lr = 1e-3f;
    p->beta1 = 0.9f;
    p->beta2 = 0.999f;
    p->eps = 1e-8f;
    p->step = e->step + 1;
}

enum { BATCH = 2, HH = 48, WW = 64, LABEL = 4 };

// One step on fixed synthetic data; returns the loss; inject: parameter name whose gradient
// gets an inf (NULL: none).
static double step(OcrModel *m, AmpEngine *e, OcrTensor *moments, const OcrTensor *img, const OcrTensor *tg,
                   const OcrTensor *tl, OcrTensor *buf, const char *inject, int *skipped) {
    ck_assert_int_eq(amp_engine_begin_step(e), OCR_OK);
    OcrParamTable *pt = ocr_model_params(m);
    if (pt->grad) ocr_params_zero_grads(pt);
    ck_assert_msg(ocr_model_forward(m, img, 1) == OCR_OK, "%s", ocr_last_error());
    amp_engine_after_forward(e);
    const OcrTensor *l32 = amp_loss_logits(ocr_model_logits(m), buf);
    OcrTensor dl32;
    ck_assert_int_eq(ocr_tensor_alloc(&dl32, OCR_F32, ocr_cpu(), 3, l32->shape, OCR_MEM_WORKSPACE), OCR_OK);
    CtcParams cp = {0};
    cp.grad_scale = amp_engine_loss_scale(e);
    double loss = ocr_ctc_loss_forward(NULL, NULL, &dl32, NULL, l32, tg, tl, NULL, cp);
    amp_loss_dlogits(ocr_model_dlogits(m), &dl32);
    ocr_tensor_free(&dl32);
    ck_assert_int_eq(ocr_model_backward(m), OCR_OK);
    if (inject) {
        int i = ocr_params_find(pt, inject);
        ck_assert_int_ge(i, 0);
        OcrTensor g = ocr_params_grad(pt, i);
        ocr_tensor_set_f32(&g, 0, INFINITY);
    }
    *skipped = amp_engine_check_grads(e);
    amp_engine_adam_step(e, moments, moments + pt->count, adam_fill, e);
    amp_engine_end_step(e);
    return loss;
}

static void run(const char *const *overrides, int steps, double *losses, const char *inject_at_last, char *layer,
                size_t layer_size) {
    OcrModel *m;
    AmpEngine e;
    setup("rec_ppocrv3_en.json", overrides, &m, &e);
    OcrParamTable *pt = ocr_model_params(m);
    OcrTensor *mom = calloc((size_t)pt->count * 2, sizeof *mom);
    for (int i = 0; i < pt->count; i++)
        for (int k = 0; k < 2; k++) {
            OcrTensor *t = &mom[k * pt->count + i];
            ck_assert_int_eq(ocr_tensor_alloc(t, OCR_F32, ocr_cpu(), pt->items[i].ndim, pt->items[i].shape,
                                              OCR_MEM_OPTIMIZER), OCR_OK);
            ocr_tensor_fill(t, 0.0f);
        }
    OcrTensor img, tg, tl, buf = {0};
    ocr_tensor_alloc(&img, OCR_F32, ocr_cpu(), 4, OCR_SHAPE(BATCH, HH, WW, 3), OCR_MEM_DATA);
    ocr_rng_fill_uniform(img.data, (size_t)ocr_tensor_numel(&img), 3, 1, 0, -1.0f, 1.0f);
    ocr_tensor_alloc(&tg, OCR_I32, ocr_cpu(), 2, OCR_SHAPE(BATCH, LABEL), OCR_MEM_DATA);
    ocr_tensor_alloc(&tl, OCR_I32, ocr_cpu(), 1, OCR_SHAPE(BATCH), OCR_MEM_DATA);
    for (int i = 0; i < BATCH * LABEL; i++) ((int32_t *)tg.data)[i] = 1 + (i * 7) % 90;
    for (int i = 0; i < BATCH; i++) ((int32_t *)tl.data)[i] = LABEL;
    for (int s = 0; s < steps; s++) {
        int skipped;
        const char *inj = s == steps - 1 ? inject_at_last : NULL;
        losses[s] = step(m, &e, mom, &img, &tg, &tl, &buf, inj, &skipped);
        if (inj) {
            ck_assert(skipped);
            snprintf(layer, layer_size, "%s", amp_engine_layer_name(&e, e.last_layer));
        }
    }
    for (int i = 0; i < 2 * pt->count; i++) ocr_tensor_free(&mom[i]);
    free(mom);
    ocr_tensor_free(&img), ocr_tensor_free(&tg), ocr_tensor_free(&tl), ocr_tensor_free(&buf);
    amp_engine_free(&e);
    ocr_model_free(m);
}

START_TEST(short_training_per_precision) {
    enum { STEPS = 12 };
    static const char *const modes[4][4] = {
        {"Global.use_amp=false", NULL},
        {"Global.use_amp=true", "Global.amp_level=O1", "Global.scale_loss=1024", NULL},
        {"Global.use_amp=true", "Global.amp_level=O2", "Global.scale_loss=1024", NULL},
        {"Global.use_amp=true", "Global.amp_level=O2", "Global.amp_dtype=bfloat16", NULL},
    };
    double losses[4][STEPS];
    char layer[256];
    for (int k = 0; k < 4; k++) {
        run(modes[k], STEPS, losses[k], NULL, layer, sizeof layer);
        printf("mode %d: loss %.4f -> %.4f\n", k, losses[k][0], losses[k][STEPS - 1]);
        ck_assert_msg(losses[k][STEPS - 1] < losses[k][0], "mode %d did not learn", k);
    }
    for (int k = 1; k < 4; k++) {
        ck_assert_msg(fabs(losses[k][0] - losses[0][0]) < 0.02 * losses[0][0], "mode %d first loss %g vs %g", k,
                      losses[k][0], losses[0][0]);
        ck_assert_msg(fabs(losses[k][STEPS - 1] - losses[0][STEPS - 1]) < 0.1 * losses[0][0], "mode %d last %g vs %g",
                      k, losses[k][STEPS - 1], losses[0][STEPS - 1]);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("amp_model_heavy");
    TCase *tc = tcase_create("model");
    tcase_set_timeout(tc, 300);
        tcase_add_test(tc, short_training_per_precision);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

// The AMP engine on the real networks (models/): the policy applied to every config's op
// table, every parameter owned by a layer, the O2 conversion, and an injected overflow named by
// layer on PP-OCRv3.
//
// PENDING: this file links ocr_models, but tests/amp links only ocr_amp (CMakeLists.txt,
// OCR_TEST_LIB_amp). Once that is `ocr_models`, rename it to
// test_model.c (and amp_model_heavy_test.c to test_model_heavy.c).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp/engine.h"
#include "core/rng.h"
#include "kernels/ctc.h"
#include "models/model.h"
#include "tests/common/test_util.h"

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
    ck_assert_msg(amp_engine_attach(e, ocr_model_ops(*m), ocr_model_params(*m), ocr_model_stats(*m)) == OCR_OK, "%s",
                  ocr_last_error());
    ocr_config_free(cfg);
}

START_TEST(policy_on_every_network) {
    static const char *configs[] = {"rec_ppocrv3_en.json", "rec_ppocrv4_en.json", "rec_ppocrv4_ch.json",
                                    "rec_svtr_tiny.json"};
    static const char *const o2[] = {"Global.use_amp=true", "Global.amp_fp32_layers=[\"head.*\"]", NULL};
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
        OcrModel *m;
        AmpEngine e;
        setup(configs[c], o2, &m, &e);
        OcrOpTable *ops = ocr_model_ops(m);
        OcrParamTable *pt = ocr_model_params(m);
        for (int i = 0; i < ops->count; i++) {
            const OcrOpInfo *o = &ops->items[i];
            ocr_dtype_t want = strncmp(o->name, "head.", 5) == 0 ? OCR_F32
                               : amp_policy_op_class(&e.cfg.policy, o->type) == AMP_BLACK ? OCR_F32
                                                                                         : OCR_F16;
            ck_assert_msg(o->compute_dtype == want, "%s: %s (%s)", configs[c], o->name, o->type);
        }
        for (int i = 0; i < pt->count; i++) {
            const OcrParamInfo *p = &pt->items[i];
            ck_assert_msg(e.param_op[i] >= 0, "%s: parameter %s has no layer", configs[c], p->name);
            int low = (p->role == OCR_ROLE_WEIGHT || p->role == OCR_ROLE_BIAS || p->role == OCR_ROLE_EMBED) &&
                      ops->items[e.param_op[i]].compute_dtype != OCR_F32;
            ck_assert_msg(p->dtype == (low ? OCR_F16 : OCR_F32), "%s: %s is %s", configs[c], p->name,
                          ocr_dtype_name(p->dtype));
            ck_assert((amp_engine_master(&e, i) != NULL) == low);
        }
        amp_engine_free(&e);
        ocr_model_free(m);
    }
}
END_TEST

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
    double loss = ctc_loss_forward(NULL, NULL, &dl32, NULL, l32, tg, tl, NULL, cp);
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
            snprintf(layer, layer_size, "%s", e.ops->items[e.last_layer].name);
        }
    }
    for (int i = 0; i < 2 * pt->count; i++) ocr_tensor_free(&mom[i]);
    free(mom);
    ocr_tensor_free(&img), ocr_tensor_free(&tg), ocr_tensor_free(&tl), ocr_tensor_free(&buf);
    amp_engine_free(&e);
    ocr_model_free(m);
}

START_TEST(injected_overflow_named) {
    // An inf in one neck weight gradient: the skipped step names that layer (the head's
    // gradients are finite and come first in backward order, so the neck layer is the first bad one).
    char layer[256];
    double l2[2];
    static const char *const o2[] = {"Global.use_amp=true", "Global.scale_loss=1024", NULL};
    run(o2, 2, l2, "neck.encoder.conv1x1.conv.weight", layer, sizeof layer);
    ck_assert_str_eq(layer, "neck.encoder.conv1x1.conv");
}
END_TEST



int main(void) {
    Suite *s = suite_create("amp_model");
    TCase *tc = tcase_create("model");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, policy_on_every_network);
    tcase_add_test(tc, injected_overflow_named);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

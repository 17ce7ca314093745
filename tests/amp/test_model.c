// The AMP engine on the real networks (models/): the policy applied to every config's op
// table, every parameter owned by its layer (OcrParamInfo.op), the O2 conversion, an injected
// overflow named by layer on PP-OCRv3; O1 running the cast cache's low-precision weights
// (bit-identical to a model whose weights were rounded by hand, and different from one whose
// were not), the memory plan staying exact with autocast copies, and short FP16-O1/O2 training
// runs agreeing with FP32.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp/engine.h"
#include "core/rng.h"
#include "kernels/ctc.h"
#include "kernels/backend.h"
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
    // What the trainer does at O1: the ops read the cast cache.
    if (e->cfg.policy.level == OCR_AMP_O1) ck_assert_int_eq(ocr_model_set_cast_cache(*m, &e->cache), OCR_OK);
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
        AmpManaged mg;
        ocr_amp_managed(&mg, ops, pt, ocr_model_stats(m));
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
            // The builder's record and the naming rule agree.
            ck_assert_msg(ocr_model_params(m)->ops_recorded && p->op == e.param_op[i] &&
                              amp_param_owner(&mg, p->name) == p->op,
                          "%s: %s: op %d, by name %d", configs[c], p->name, p->op, amp_param_owner(&mg, p->name));
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

static float LR = 1e-3f;

static void adam_fill(void *user, int i, AdamParams *p) {
    (void)i;
    const AmpEngine *e = user;
    p->lr = LR;
    p->beta1 = 0.9f;
    p->beta2 = 0.999f;
    p->eps = 1e-8f;
    p->step = e->step + 1;
}

enum { BATCH = 2, LABEL = 4 };
static int HH = 48, WW = 64;

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

static void run_cfg(const char *cfg, const char *const *overrides, int steps, double *losses,
                    const char *inject_at_last, char *layer, size_t layer_size) {
    OcrModel *m;
    AmpEngine e;
    setup(cfg, overrides, &m, &e);
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
    const int classes = ocr_model_arch(m)->num_classes;
    for (int i = 0; i < BATCH * LABEL; i++) ((int32_t *)tg.data)[i] = 1 + (i * 7) % (classes > 91 ? 90 : classes - 1);
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

static void run(const char *const *overrides, int steps, double *losses, const char *inject_at_last, char *layer,
                size_t layer_size) {
    run_cfg("rec_ppocrv3_en.json", overrides, steps, losses, inject_at_last, layer, layer_size);
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

// ---- O1: the cast cache's weights are what the ops run with ------------------------------------

static const char *const SMALL_O1[] = {"Global.character_dict_path=\"\"", "Architecture.Head.out_channels=11",
                                      "Global.use_amp=true", "Global.amp_level=O1", NULL};
static const char *const SMALL_F32[] = {"Global.character_dict_path=\"\"", "Architecture.Head.out_channels=11", NULL};

static OcrModel *plain_model(const char *cfg_name, const char *const *ov) {
    OcrConfig *cfg = load(cfg_name, ov);
    OcrModel *m;
    ck_assert_msg(ocr_model_from_config(&m, cfg) == OCR_OK, "%s", ocr_last_error());
    ocr_config_free(cfg);
    return m;
}

// b takes a's compute dtypes; with round_cached, b's parameters that a's cache holds are rounded
// (in place, still f32 storage) to their cached dtype.
static void mirror(OcrModel *b, OcrModel *a, const AmpCastCache *cache, int round_cached) {
    OcrOpTable *oa = ocr_model_ops(a), *ob = ocr_model_ops(b);
    for (int i = 0; i < oa->count; i++) ob->items[i].compute_dtype = oa->items[i].compute_dtype;
    ocr_model_set_compute_dtype(b, "__no_such_layer__", NULL, OCR_F32);  // drops b's stale plan
    OcrParamTable *pa = ocr_model_params(a), *pb = ocr_model_params(b);
    ck_assert_int_eq(pa->bytes, pb->bytes);
    memcpy(pb->data, pa->data, pa->bytes);
    OcrParamTable *sa = ocr_model_stats(a), *sb = ocr_model_stats(b);
    memcpy(sb->data, sa->data, sa->bytes);  // BN running statistics (inference passes use them)
    if (!round_cached) return;
    for (int i = 0; i < pb->count; i++) {
        if (!cache->cast[i].data) continue;
        OcrTensor p = ocr_params_tensor(pb, i), low;
        ck_assert_int_eq(ocr_tensor_alloc(&low, cache->cast[i].dtype, ocr_cpu(), p.ndim, p.shape, OCR_MEM_WORKSPACE), OCR_OK);
        ocr_cast_forward(&low, &p);
        ocr_cast_forward(&p, &low);
        ocr_tensor_free(&low);
    }
}

static int same_bits(const OcrTensor *x, const OcrTensor *y) {
    return x->dtype == y->dtype && ocr_tensor_same_shape(x, y) && memcmp(x->data, y->data, ocr_tensor_bytes(x)) == 0;
}

START_TEST(o1_runs_low_precision_weights) {
    // Bit-for-bit against f32 weights holding the rounded values: only the emulated CPU
    // reference computes low-precision operands exactly as f32 ones (the BF16/FP16 hardware
    // path sums in another order; kernels_lp_native bounds that).
    ocr_backend_set_cpu_exact_numerics(1);
    OcrModel *a, *b = plain_model("rec_ppocrv3_en.json", SMALL_F32), *c = plain_model("rec_ppocrv3_en.json", SMALL_F32);
    AmpEngine e;
    setup("rec_ppocrv3_en.json", SMALL_O1, &a, &e);
    // Some weights are cached (the white ops'), the BN parameters are not.
    OcrParamTable *pt = ocr_model_params(a);
    int cached = 0;
    for (int i = 0; i < pt->count; i++) {
        if (e.cache.cast[i].data) cached++;
        if (pt->items[i].role == OCR_ROLE_NORM) ck_assert_ptr_null(e.cache.cast[i].data);
    }
    ck_assert_int_gt(cached, 10);
    mirror(b, a, &e.cache, 1);
    mirror(c, a, &e.cache, 0);
    OcrTensor img;
    ocr_tensor_alloc(&img, OCR_F32, ocr_cpu(), 4, OCR_SHAPE(BATCH, 32, 48, 3), OCR_MEM_DATA);
    ocr_rng_fill_uniform(img.data, (size_t)ocr_tensor_numel(&img), 4, 1, 0, -1.0f, 1.0f);
    int64_t before = e.cache.refreshes;
    // Inference outside a training step: the model refreshes the (not yet filled) cache itself.
    ck_assert_msg(ocr_model_forward(a, &img, 0) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(e.cache.refreshes, before + 1);
    ck_assert(ocr_model_forward(b, &img, 0) == OCR_OK);
    ck_assert(ocr_model_forward(c, &img, 0) == OCR_OK);
    ck_assert_msg(same_bits(ocr_model_logits(a), ocr_model_logits(b)), "O1 logits differ from hand-rounded weights");
    ck_assert_msg(!same_bits(ocr_model_logits(a), ocr_model_logits(c)), "O1 logits equal those of f32 weights");
    // Training pass: the same gradients (of the f32 parameters) as the hand-rounded model.
    ck_assert_int_eq(amp_engine_begin_step(&e), OCR_OK);
    ck_assert_int_eq(e.cache.refreshes, before + 1);  // still valid: not cast again
    ck_assert(ocr_model_forward(a, &img, 1) == OCR_OK);
    ck_assert(ocr_model_forward(b, &img, 1) == OCR_OK);
    ck_assert(same_bits(ocr_model_logits(a), ocr_model_logits(b)));
    ocr_tensor_fill(ocr_model_dlogits(a), 1e-2f);
    ocr_tensor_fill(ocr_model_dlogits(b), 1e-2f);
    ck_assert(ocr_model_backward(a) == OCR_OK);
    ck_assert(ocr_model_backward(b) == OCR_OK);
    for (int i = 0; i < pt->count; i++) {
        OcrTensor ga = ocr_params_grad(pt, i), gb = ocr_params_grad(ocr_model_params(b), i);
        ck_assert_int_eq(ga.dtype, OCR_F32);
        ck_assert_msg(same_bits(&ga, &gb), "gradient of %s differs", pt->items[i].name);
    }
    // An optimizer step makes the cache stale; the next pass (evaluation) recasts it.
    amp_engine_check_grads(&e);
    OcrTensor *mom = calloc((size_t)pt->count * 2, sizeof *mom);
    for (int i = 0; i < 2 * pt->count; i++) {
        const OcrParamInfo *p = &pt->items[i % pt->count];
        ck_assert_int_eq(ocr_tensor_alloc(&mom[i], OCR_F32, ocr_cpu(), p->ndim, p->shape, OCR_MEM_OPTIMIZER), OCR_OK);
        ocr_tensor_fill(&mom[i], 0.0f);
    }
    ck_assert(amp_engine_adam_step(&e, mom, mom + pt->count, adam_fill, &e));
    amp_engine_end_step(&e);
    ck_assert(!e.cache.valid);
    ck_assert(ocr_model_forward(a, &img, 0) == OCR_OK);
    ck_assert_int_eq(e.cache.refreshes, before + 2);
    mirror(b, a, &e.cache, 1);
    ck_assert(ocr_model_forward(b, &img, 0) == OCR_OK);
    ck_assert_msg(same_bits(ocr_model_logits(a), ocr_model_logits(b)), "after the step: stale low-precision weights");
    // Detached, the model runs its f32 parameters again.
    ck_assert_int_eq(ocr_model_set_cast_cache(a, NULL), OCR_OK);
    mirror(c, a, &e.cache, 0);
    ck_assert(ocr_model_forward(a, &img, 0) == OCR_OK);
    ck_assert(ocr_model_forward(c, &img, 0) == OCR_OK);
    ck_assert(same_bits(ocr_model_logits(a), ocr_model_logits(c)));
    // A cache built for another table is refused.
    AmpCastCache other = e.cache;
    other.count--;
    ck_assert_int_eq(ocr_model_set_cast_cache(a, &other), OCR_ERR_INVALID_ARG);
    for (int i = 0; i < 2 * pt->count; i++) ocr_tensor_free(&mom[i]);
    free(mom);
    ocr_tensor_free(&img);
    amp_engine_free(&e);
    ocr_model_free(a), ocr_model_free(b), ocr_model_free(c);
}
END_TEST

// ---- autocast copies are planned --------------------------------------------------------------------

START_TEST(autocast_plan_is_exact) {
    // O1 has f32 → f16 boundaries (images into the first conv, layer norm into a linear); both
    // paths (float images, the uint8 batch) and both passes must match the plan exactly.
    static const char *const svtr[] = {"Global.character_dict_path=\"\"", "Architecture.Head.out_channels=11",
                                       "Architecture.Backbone.img_size=[32, 48]", "Architecture.Backbone.out_char_num=6",
                                       "Global.use_amp=true", "Global.amp_level=O1", NULL};
    static const char *const o2[] = {"Global.character_dict_path=\"\"", "Architecture.Head.out_channels=11",
                                     "Global.use_amp=true", "Global.amp_level=O2", NULL};
    struct { const char *cfg; const char *const *ov; } cases[3] = {
        {"rec_ppocrv3_en.json", SMALL_O1}, {"rec_svtr_tiny.json", svtr}, {"rec_ppocrv3_en.json", o2}};
    for (int k = 0; k < 3; k++) {
        OcrModel *m;
        AmpEngine e;
        setup(cases[k].cfg, cases[k].ov, &m, &e);
        OcrTensor img, u8, wt;
        ocr_tensor_alloc(&img, OCR_F32, ocr_cpu(), 4, OCR_SHAPE(BATCH, 32, 48, 3), OCR_MEM_DATA);
        ocr_rng_fill_uniform(img.data, (size_t)ocr_tensor_numel(&img), 5, 1, 0, -1.0f, 1.0f);
        ocr_tensor_alloc(&u8, OCR_U8, ocr_cpu(), 4, OCR_SHAPE(BATCH, 32, 48, 3), OCR_MEM_DATA);
        for (int64_t i = 0; i < ocr_tensor_numel(&u8); i++) ((uint8_t *)u8.data)[i] = (uint8_t)(i * 29);
        ocr_tensor_alloc(&wt, OCR_I32, ocr_cpu(), 1, OCR_SHAPE(BATCH), OCR_MEM_DATA);
        ((int32_t *)wt.data)[0] = 48, ((int32_t *)wt.data)[1] = 20;
        for (int path = 0; path < 2; path++)
            for (int training = 0; training < 2; training++) {
                OcrMemPlan p;
                ocr_status_t st = path ? ocr_model_plan_u8(m, BATCH, 32, 48, training, &p)
                                       : ocr_model_plan(m, BATCH, 32, 48, training, &p);
                ck_assert_msg(st == OCR_OK, "%s", ocr_last_error());
                if (training) ck_assert_int_eq(amp_engine_begin_step(&e), OCR_OK);
                st = path ? ocr_model_forward_u8(m, &u8, &wt, training) : ocr_model_forward(m, &img, training);
                ck_assert_msg(st == OCR_OK, "%s", ocr_last_error());
                int64_t peak, live;
                if (training && k == 0) {
                    // An f32 → f16 boundary that autocast bridges: layer norm (black) into a linear (white).
                    const OcrTensor *ln = ocr_model_op_output(m, "neck.encoder.svtr_block.0.norm1");
                    const OcrTensor *qkv = ocr_model_op_output(m, "neck.encoder.svtr_block.0.mixer.qkv");
                    ck_assert(ln && qkv && ln->dtype == OCR_F32 && qkv->dtype == OCR_F16);
                }
                if (training) {
                    ocr_tensor_fill(ocr_model_dlogits(m), 1e-3f);
                    ck_assert(ocr_model_backward(m) == OCR_OK);
                    ocr_model_arena_usage(m, &peak, &live);
                    ck_assert_int_eq(live, 0);
                    amp_engine_check_grads(&e);
                    amp_engine_end_step(&e);
                } else {
                    ocr_model_arena_usage(m, &peak, &live);
                }
                ck_assert_msg(peak == p.activations_bytes, "%s case %d path %d training %d: peak %lld, plan %lld",
                              cases[k].cfg, k, path, training, (long long)peak, (long long)p.activations_bytes);
            }
        ocr_tensor_free(&img), ocr_tensor_free(&u8), ocr_tensor_free(&wt);
        amp_engine_free(&e);
        ocr_model_free(m);
    }
}
END_TEST

// ---- short training runs: FP16-O1 and FP16-O2 agree with FP32 -----------------------------------------

#define SMALL_NET                                                                                      \
    "Global.character_dict_path=\"\"", "Architecture.Head.out_channels=11", "Architecture.Backbone.scale=0.25", \
        "Architecture.Neck.dims=32", "Architecture.Neck.hidden_dims=48", NULL

START_TEST(fp16_training_agrees_with_fp32) {
    // docs/AMP.md's tolerance: the first losses within 2 %, the end of the run (mean of the last
    // 3 losses here) within 0.05 + 25 % of FP32's.
    enum { STEPS = 8, TAIL = 3 };
    // PP-OCRv3 at a quarter of the width and 11 classes: the same layers, a fraction of the time.
    static const char *const modes[3][10] = {
        {"Global.use_amp=false", SMALL_NET},
        {"Global.use_amp=true", "Global.amp_level=O1", "Global.scale_loss=1024", SMALL_NET},
        {"Global.use_amp=true", "Global.amp_level=O2", "Global.scale_loss=1024", SMALL_NET},
    };
    double losses[3][STEPS], tail[3] = {0};
    char layer[256];
    HH = 32, WW = 48, LR = 1e-2f;
    for (int k = 0; k < 3; k++) {
        run(modes[k], STEPS, losses[k], NULL, layer, sizeof layer);
        for (int s = STEPS - TAIL; s < STEPS; s++) tail[k] += losses[k][s] / TAIL;
        printf("mode %d: loss %.4f -> %.4f (last %d: %.4f)\n", k, losses[k][0], losses[k][STEPS - 1], TAIL, tail[k]);
        ck_assert_msg(tail[k] < 0.5 * losses[k][0], "mode %d did not learn", k);
    }
    HH = 48, WW = 64, LR = 1e-3f;
    for (int k = 1; k < 3; k++) {
        ck_assert_msg(fabs(losses[k][0] - losses[0][0]) < 0.02 * losses[0][0], "mode %d first loss %g vs %g", k,
                      losses[k][0], losses[0][0]);
        ck_assert_msg(fabs(tail[k] - tail[0]) < 0.05 + 0.25 * tail[0], "mode %d end %g vs %g", k, tail[k], tail[0]);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("amp_model");
    TCase *tc = tcase_create("model");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, policy_on_every_network);
    tcase_add_test(tc, injected_overflow_named);
    tcase_add_test(tc, o1_runs_low_precision_weights);
    tcase_add_test(tc, autocast_plan_is_exact);
    tcase_add_test(tc, fp16_training_agrees_with_fp32);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

// Fine-tuning without forgetting (README "Fine-tuning PP-OCRv4"): strict pretrained loading and
// its load report, BN layers frozen (training passes bit-identical to eval-mode statistics, the
// running statistics untouched), parameters frozen by pattern (bit-identical after training, no
// optimizer state), learning-rate multipliers by pattern, and O2 checkpoints whose model file is
// the f32 master weights.
#include <check.h>
#include <cjson/cJSON.h>
#include <fnmatch.h>
#include <math.h>

#include "amp/engine.h"
#include "training/checkpoint.h"
#include "cli/commands.h"
#include "training/optim.h"
#include "training/run_config.h"
#include "training/step.h"
#include "training/trainer.h"
#include "core/safetensors.h"
#include "models/model.h"
#include "models/pdparams.h"
#include "tests/training/training_test_util.h"
#include "models/amp_view.h"

static char *g_dir;
static char g_cfg[512];      // the tiny PP-OCRv3-like config, SVTR neck
static char g_cfg_im2[512];  // the same with the Im2Seq neck (no dropout anywhere, same pooling in both modes)

static void setup_data(void) {
    g_dir = at_setup_digits(g_cfg, sizeof g_cfg, "\"epoch_num\": 2,");
    snprintf(g_cfg_im2, sizeof g_cfg_im2, "%s/cfg_im2seq.json", g_dir);
    at_write_config_neck(g_cfg_im2, g_dir, 64, 8, "\"epoch_num\": 2,", 0.125, AT_NECK_RESHAPE);
}

static OcrConfig *load_cfg(const char *path, RunConfig *rc, const char *const *ov, int nov) {
    OcrConfig *cfg;
    ck_assert_msg(run_config_load(&cfg, rc, path, ov, nov, RUN_NEED_TRAIN) == OCR_OK, "%s", ocr_last_error());
    return cfg;
}

static OcrModel *model_of(const char *path) {
    RunConfig rc;
    OcrConfig *cfg = load_cfg(path, &rc, NULL, 0);
    OcrModel *m;
    ck_assert_msg(ocr_model_from_config(&m, cfg) == OCR_OK, "%s", ocr_last_error());
    ocr_config_free(cfg);
    return m;
}

// Reads tensor `name` of a safetensors file as f32 into out (numel values); returns its dtype.
static ocr_dtype_t read_tensor_f32(const char *file, const char *name, float *out, int64_t numel) {
    OcrSafetensors *st;
    ck_assert_msg(ocr_safetensors_open(&st, file) == OCR_OK, "%s", ocr_last_error());
    const OcrNamedTensor *nt = ocr_safetensors_find(st, name);
    ck_assert_msg(nt != NULL, "%s: no %s", file, name);
    OcrTensor v = ocr_tensor_view((void *)nt->data, nt->dtype, ocr_cpu(), nt->ndim, nt->shape);
    ck_assert_int_eq(ocr_tensor_numel(&v), numel);
    ocr_tensor_to_f32(&v, out);
    ocr_dtype_t dt = nt->dtype;
    ocr_safetensors_close(st);
    return dt;
}

// ---- the load report and strict pretrained loading ---------------------------------------------------

START_TEST(test_load_report_counts) {
    // Weights of the SVTR-neck model into the Im2Seq one: every neck tensor is unexpected, the head's
    // weight has another input size, everything else loads.
    OcrModel *a = model_of(g_cfg), *b = model_of(g_cfg_im2);
    char w[700];
    snprintf(w, sizeof w, "%s/svtr_init.safetensors", g_dir);
    ck_assert_msg(ocr_model_save_weights(a, w) == OCR_OK, "%s", ocr_last_error());
    int unexpected = 0, mismatched = 0, loaded = 0, missing = 0;
    const OcrParamTable *tabs_a[2] = {ocr_model_params(a), ocr_model_stats(a)};
    const OcrParamTable *tabs_b[2] = {ocr_model_params(b), ocr_model_stats(b)};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < tabs_a[k]->count; i++) {
            const OcrParamInfo *p = &tabs_a[k]->items[i];
            int j = ocr_params_find(tabs_b[k], p->name);
            if (j < 0) {
                unexpected++;
                continue;
            }
            int same = p->ndim == tabs_b[k]->items[j].ndim;
            for (int d = 0; same && d < p->ndim; d++) same = p->shape[d] == tabs_b[k]->items[j].shape[d];
            if (same) loaded++;
            else mismatched++;
        }
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < tabs_b[k]->count; i++) missing += ocr_params_find(tabs_a[k], tabs_b[k]->items[i].name) < 0;
    ck_assert_int_gt(unexpected, 0);
    ck_assert_int_gt(mismatched, 0);
    OcrLoadReport r;
    ck_assert_msg(ocr_model_load_partial(b, w, &r) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(r.loaded, loaded);
    ck_assert_int_eq(r.missing, missing);
    ck_assert_int_eq(r.mismatched, mismatched);
    ck_assert_int_eq(r.unexpected, unexpected);
    ck_assert_msg(strncmp(r.first_unexpected, "neck.", 5) == 0, "first unexpected %s", r.first_unexpected);
    ck_assert_msg(strstr(r.first_mismatched, "head.fc.weight") != NULL, "first mismatched %s", r.first_mismatched);
    ck_assert(!ocr_load_report_complete(&r));
    // A model's own file covers it exactly.
    ck_assert_msg(ocr_model_load_partial(a, w, &r) == OCR_OK, "%s", ocr_last_error());
    ck_assert(ocr_load_report_complete(&r));
    ck_assert_int_eq(r.loaded, tabs_a[0]->count + tabs_a[1]->count);
    ocr_model_free(a);
    ocr_model_free(b);
}
END_TEST

START_TEST(test_pretrained_strict) {
    // Im2Seq weights into the SVTR-neck model: the neck's tensors are missing, the head's weight has
    // another shape. Strict (the default) refuses before anything is written; not strict warns
    // with the counts and trains.
    OcrModel *b = model_of(g_cfg_im2);
    char w[700], out[700], ov_w[800], ov_out[800], err[16384];
    snprintf(w, sizeof w, "%s/im2seq_init.safetensors", g_dir);
    ck_assert_msg(ocr_model_save_weights(b, w) == OCR_OK, "%s", ocr_last_error());
    ocr_model_free(b);
    OcrModel *a = model_of(g_cfg);
    int missing = 0;
    OcrLoadReport r;
    ck_assert(ocr_model_load_partial(a, w, &r) == OCR_OK);
    missing = r.missing;
    ocr_model_free(a);
    snprintf(out, sizeof out, "%s/strict_out", g_dir);
    snprintf(ov_w, sizeof ov_w, "Global.pretrained_model=%s", w);
    snprintf(ov_out, sizeof ov_out, "Global.save_model_dir=%s", out);
    const char *strict[] = {"train", "-c", g_cfg, "--max-steps", "2", "-o", ov_w, ov_out, NULL};
    ck_assert_int_eq(at_run_capture(cmd_train, strict, err, sizeof err), 2);
    char want[64];
    snprintf(want, sizeof want, "%d of the model's missing", missing);
    ck_assert_msg(strstr(err, want) && strstr(err, "(first: neck.") && strstr(err, "head.fc.weight") &&
                      strstr(err, "pretrained_strict"),
                  "%s", err);
    ck_assert_msg(!at_exists(out), "a refused pretrained file still wrote %s", out);
    const char *loose[] = {"train", "-c", g_cfg, "--max-steps", "2", "-o", ov_w, ov_out, "Global.pretrained_strict=false",
                           NULL};
    ck_assert_int_eq(at_run_capture(cmd_train, loose, err, sizeof err), 0);
    ck_assert_msg(strstr(err, want) && strstr(err, "keep their initial values"), "%s", err);
}
END_TEST

// PaddleOCR's own training checkpoint as Global.pretrained_model, by its prefix as PaddleOCR's
// configs write it (".../best_accuracy" for best_accuracy.pdparams): the MultiHead PP-OCRv3
// checkpoint covers the CTC model exactly; its SAR tensors are logged, not held against
// strictness. Skips without ../shared.
START_TEST(test_pretrained_pdparams_prefix) {
    char pd[1024], cfgp[1024];
    if (!ocr_test_shared_path("models/ppocrv3_paddle/v3_en_multihead_ctc_sar_REDUCED_enc64_dk64_4steps.pdparams", pd,
                              sizeof pd)) {
        printf("SKIP: ../shared/models/ppocrv3_paddle is absent\n");
        return;
    }
    snprintf(cfgp, sizeof cfgp, "%s/configs/rec_ppocrv3_en.json", OCR_SOURCE_DIR);
    OcrConfig *cfg;
    ck_assert_msg(ocr_config_load(&cfg, cfgp) == OCR_OK, "%s", ocr_last_error());
    OcrModel *m;
    ck_assert_msg(ocr_model_from_config(&m, cfg) == OCR_OK, "%s", ocr_last_error());
    pd[strlen(pd) - strlen(".pdparams")] = '\0';  // the prefix
    OcrLoadReport r;
    ck_assert_msg(ckpt_load_pretrained(m, pd, 1, &r) == OCR_OK, "%s", ocr_last_error());
    ck_assert(ocr_load_report_complete(&r));
    ck_assert_int_eq(r.loaded, ocr_model_params(m)->count + ocr_model_stats(m)->count);
    // The same values as the importer's own loader gives a second model.
    OcrModel *m2;
    ck_assert(ocr_model_from_config(&m2, cfg) == OCR_OK);
    OcrPdLoadReport pr;
    ck_assert_msg(ocr_pdparams_load_model(m2, pd, &pr) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_gt(pr.guidance, 0);
    ocr_pdparams_report_free(&pr);
    const OcrParamTable *a = ocr_model_params(m), *b = ocr_model_params(m2);
    ck_assert_int_eq(a->count, b->count);
    ck_assert(memcmp(a->data, b->data, a->bytes) == 0);
    ocr_model_free(m);
    ocr_model_free(m2);
    ocr_config_free(cfg);
}
END_TEST

START_TEST(test_finetune_config_errors) {
    char err[8192];
    const char *cases[][2] = {
        {"Global.freeze_norm=[\"nothing.like.this*\"]", "Global.freeze_norm"},
        {"Global.freeze_params=[\"backbone.nope.*\"]", "Global.freeze_params"},
        {"Optimizer.lr_mult={\"nope.*\": 0.5}", "Optimizer.lr_mult"},
        {"Optimizer.lr_mult={\"head.*\": -1}", "Optimizer.lr_mult"},
        {"Global.freeze_params=\"backbone.*\"", "Global.freeze_params"},
        {"Global.freeze_params=[\"*\"]", "nothing would train"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *args[] = {"train", "-c", g_cfg, "--max-steps", "1", "-o", cases[k][0], NULL};
        ck_assert_int_eq(at_run_capture(cmd_train, args, err, sizeof err), 2);
        ck_assert_msg(strstr(err, cases[k][1]), "%s: %s", cases[k][0], err);
    }
}
END_TEST

// ---- frozen BN --------------------------------------------------------------------------------------

static void fill_images(OcrTensor *x, uint64_t seed) {
    int64_t n = ocr_tensor_numel(x);
    float *v = malloc((size_t)n * sizeof *v);
    ocr_rng_fill_uniform(v, (size_t)n, seed, 3, 0, -1.0f, 1.0f);
    ocr_tensor_from_f32(x, v);
    free(v);
}

// A training pass with every BN frozen gives the logits of an eval pass bit for bit (the Im2Seq
// model has no dropout and pools the same in both modes) and leaves the running statistics as they
// were; without freezing it does neither. In f32 and with every op in f16 / bf16.
static void frozen_matches_eval(ocr_dtype_t dt) {
    OcrModel *m = model_of(g_cfg_im2);
    // Non-trivial running statistics: calibrate on one batch, then freeze.
    OcrTensor x;
    ck_assert(ocr_tensor_alloc(&x, dt, ocr_cpu(), 4, (int64_t[]){4, 32, 64, 3}, OCR_MEM_DATA) == OCR_OK);
    fill_images(&x, 7);
    if (dt != OCR_F32) ocr_model_set_compute_dtype(m, "*", NULL, dt);
    ck_assert(ocr_model_calibrate_bn(m, &x) == OCR_OK);
    fill_images(&x, 8);
    OcrParamTable *stats = ocr_model_stats(m);
    void *before = malloc(stats->bytes);
    memcpy(before, stats->data, stats->bytes);
    ck_assert_int_gt(ocr_model_freeze_norm(m, NULL, 1), 0);

    ck_assert(ocr_model_forward(m, &x, 0) == OCR_OK);
    const OcrTensor *lg = ocr_model_logits(m);
    size_t nb = ocr_tensor_bytes(lg);
    void *eval = malloc(nb);
    memcpy(eval, lg->data, nb);
    ck_assert(ocr_model_forward(m, &x, 1) == OCR_OK);
    lg = ocr_model_logits(m);
    ck_assert_msg(memcmp(eval, lg->data, nb) == 0, "%s: frozen training logits differ from eval", ocr_dtype_name(dt));
    // The backward runs through constant statistics and leaves them alone too.
    OcrTensor *dl = ocr_model_dlogits(m);
    fill_images(dl, 9);
    ck_assert(ocr_model_backward(m) == OCR_OK);
    ck_assert_msg(memcmp(before, stats->data, stats->bytes) == 0, "%s: frozen BN statistics moved",
                  ocr_dtype_name(dt));

    // Unfrozen: batch statistics differ from the running ones and the running ones move.
    ocr_model_freeze_norm(m, NULL, 0);
    ck_assert(ocr_model_forward(m, &x, 1) == OCR_OK);
    lg = ocr_model_logits(m);
    ck_assert_msg(memcmp(eval, lg->data, nb) != 0, "unfrozen training logits equal eval's: the test cannot fail");
    ck_assert(memcmp(before, stats->data, stats->bytes) != 0);
    free(eval);
    free(before);
    ocr_tensor_free(&x);
    ocr_model_free(m);
}

START_TEST(test_frozen_bn_matches_eval_f32) { frozen_matches_eval(OCR_F32); }
END_TEST
START_TEST(test_frozen_bn_matches_eval_f16) { frozen_matches_eval(OCR_F16); }
END_TEST
START_TEST(test_frozen_bn_matches_eval_bf16) { frozen_matches_eval(OCR_BF16); }
END_TEST

START_TEST(test_freeze_norm_by_pattern) {
    OcrModel *m = model_of(g_cfg);
    OcrOpTable *ops = ocr_model_ops(m);
    int all = 0, want = 0;
    for (int i = 0; i < ops->count; i++)
        if (strcmp(ops->items[i].type, "batchnorm") == 0) {
            all++;
            want += fnmatch("neck.*", ops->items[i].name, 0) == 0;
        }
    ck_assert_int_gt(want, 0);
    ck_assert_int_lt(want, all);
    ck_assert_int_eq(ocr_model_freeze_norm(m, "neck.*", 1), want);
    for (int i = 0; i < ops->count; i++)
        ck_assert_int_eq(ops->items[i].bn_frozen, strcmp(ops->items[i].type, "batchnorm") == 0 &&
                                                      fnmatch("neck.*", ops->items[i].name, 0) == 0);
    ocr_model_free(m);
}
END_TEST

// ---- frozen parameters and learning-rate multipliers through `train` ----------------------------------

// Trains 2 epochs from saved initial weights with BN frozen (gamma/beta too), backbone.conv1
// frozen and head.fc.weight at lr_mult 0, then compares the final weights with the initial ones.
static void frozen_run(const char *tag, const char *const *amp) {
    OcrModel *m = model_of(g_cfg);
    char w[700], out[700], ov_w[800], ov_out[800], final[800], opt[800];
    snprintf(w, sizeof w, "%s/init_%s.safetensors", g_dir, tag);
    ck_assert(ocr_model_save_weights(m, w) == OCR_OK);
    snprintf(out, sizeof out, "%s/frozen_%s", g_dir, tag);
    snprintf(ov_w, sizeof ov_w, "Global.pretrained_model=%s", w);
    snprintf(ov_out, sizeof ov_out, "Global.save_model_dir=%s", out);
    const char *args[40];
    int n = 0;
    const char *base[] = {"train", "-c", g_cfg, "-o", ov_w, ov_out, "Global.freeze_norm=true",
                          "Global.freeze_params=[\"backbone.conv1.*\"]", "Optimizer.lr_mult={\"head.fc.weight\": 0}",
                          NULL};
    for (int i = 0; base[i]; i++) args[n++] = base[i];
    for (int i = 0; amp && amp[i]; i++) args[n++] = amp[i];
    args[n] = NULL;
    ck_assert_int_eq(at_run(cmd_train, args), 0);
    snprintf(final, sizeof final, "%s/latest/model.safetensors", out);
    snprintf(opt, sizeof opt, "%s/latest/optimizer.safetensors", out);
    const OcrParamTable *tabs[2] = {ocr_model_params(m), ocr_model_stats(m)};
    int frozen_seen = 0, moved = 0;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < tabs[k]->count; i++) {
            const OcrParamInfo *p = &tabs[k]->items[i];
            float *a = malloc((size_t)p->numel * sizeof *a), *b = malloc((size_t)p->numel * sizeof *b);
            read_tensor_f32(w, p->name, a, p->numel);
            read_tensor_f32(final, p->name, b, p->numel);
            int same = memcmp(a, b, (size_t)p->numel * sizeof *a) == 0;
            int bn_param = k == 0 && p->role == OCR_ROLE_NORM && p->op >= 0 &&
                           strcmp(ocr_model_ops(m)->items[p->op].type, "batchnorm") == 0;
            int frozen = k == 1 || bn_param || fnmatch("backbone.conv1.*", p->name, 0) == 0 ||
                         strcmp(p->name, "head.fc.weight") == 0;
            if (frozen) {
                frozen_seen++;
                ck_assert_msg(same, "%s: frozen %s changed in training", tag, p->name);
            } else {
                moved += !same;
            }
            // Frozen parameters have no optimizer state (lr_mult 0 is not frozen: its moments move).
            if (k == 0 && frozen && strcmp(p->name, "head.fc.weight") != 0) {
                char mn[300];
                snprintf(mn, sizeof mn, "moment2.%s", p->name);
                read_tensor_f32(opt, mn, a, p->numel);
                for (int64_t e = 0; e < p->numel; e++) ck_assert_msg(a[e] == 0.0f, "%s: %s has moments", tag, mn);
            }
            free(a);
            free(b);
        }
    ck_assert_int_gt(frozen_seen, 4);
    ck_assert_msg(moved > 4, "%s: only %d trainable tensors moved", tag, moved);
    ocr_model_free(m);
}

START_TEST(test_frozen_params_bit_identical_fp32) { frozen_run("fp32", NULL); }
END_TEST

START_TEST(test_frozen_params_bit_identical_fp16_o2) {
    const char *amp[] = {"--use_amp", "true", "--amp_level", "O2", "--amp_dtype", "float16", "--scale_loss", "1024",
                         NULL};
    frozen_run("fp16o2", amp);
}
END_TEST

START_TEST(test_frozen_params_bit_identical_bf16_o2_stochastic) {
    // Stochastic rounding re-rounds every working weight from its master each step: a frozen one
    // must not be re-rounded either.
    const char *amp[] = {"--use_amp", "true", "--amp_level", "O2", "--amp_dtype", "bfloat16", "-o",
                         "Global.amp_stochastic_rounding=true", NULL};
    frozen_run("bf16sr", amp);
}
END_TEST

START_TEST(test_frozen_norm_affine_false_trains_gamma_beta) {
    // freeze_norm_affine false: the statistics stay, the frozen layers' scale and shift train.
    OcrModel *m = model_of(g_cfg);
    char w[700], out[700], ov_w[800], ov_out[800], final[800];
    snprintf(w, sizeof w, "%s/init_affine.safetensors", g_dir);
    ck_assert(ocr_model_save_weights(m, w) == OCR_OK);
    snprintf(out, sizeof out, "%s/affine_out", g_dir);
    snprintf(ov_w, sizeof ov_w, "Global.pretrained_model=%s", w);
    snprintf(ov_out, sizeof ov_out, "Global.save_model_dir=%s", out);
    const char *args[] = {"train", "-c", g_cfg, "-o", ov_w, ov_out, "Global.freeze_norm=[\"backbone.*\"]",
                          "Global.freeze_norm_affine=false", NULL};
    ck_assert_int_eq(at_run(cmd_train, args), 0);
    snprintf(final, sizeof final, "%s/latest/model.safetensors", out);
    int stats_frozen = 0, stats_moved = 0, gamma_moved = 0;
    const OcrParamTable *tabs[2] = {ocr_model_params(m), ocr_model_stats(m)};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < tabs[k]->count; i++) {
            const OcrParamInfo *p = &tabs[k]->items[i];
            int in_backbone_bn = p->op >= 0 && strcmp(ocr_model_ops(m)->items[p->op].type, "batchnorm") == 0 &&
                                 fnmatch("backbone.*", ocr_model_ops(m)->items[p->op].name, 0) == 0;
            if (!in_backbone_bn && k == 0) continue;
            float *a = malloc((size_t)p->numel * sizeof *a), *b = malloc((size_t)p->numel * sizeof *b);
            read_tensor_f32(w, p->name, a, p->numel);
            read_tensor_f32(final, p->name, b, p->numel);
            int same = memcmp(a, b, (size_t)p->numel * sizeof *a) == 0;
            if (k == 1 && in_backbone_bn) {
                stats_frozen++;
                ck_assert_msg(same, "frozen statistic %s moved", p->name);
            } else if (k == 1) {
                stats_moved += !same;  // the neck's BN layers are not frozen
            } else {
                gamma_moved += !same;
            }
            free(a);
            free(b);
        }
    ck_assert_int_gt(stats_frozen, 0);
    ck_assert_int_gt(stats_moved, 0);
    ck_assert_int_gt(gamma_moved, 0);
    ocr_model_free(m);
}
END_TEST

START_TEST(test_lr_mult_applied) {
    const char *ov[] = {"Optimizer.lr_mult={\"backbone.conv1.*\": 0.25, \"backbone.*\": 0.5, \"head.*\": 3}",
                        "Global.freeze_params=[\"neck.*\"]"};
    RunConfig rc;
    OcrConfig *cfg = load_cfg(g_cfg, &rc, ov, 2);
    OcrModel *m;
    ck_assert(ocr_model_from_config(&m, cfg) == OCR_OK);
    OcrParamTable *t = ocr_model_params(m);
    float *own = malloc((size_t)t->count * sizeof *own);
    for (int i = 0; i < t->count; i++) own[i] = t->items[i].lr_mult;
    ck_assert_msg(train_apply_finetune(m, &rc, cfg) == OCR_OK, "%s", ocr_last_error());
    Optimizer o;
    ck_assert(optim_init(&o, &rc.optim, t) == OCR_OK);
    const double lr = 0.001;
    for (int i = 0; i < t->count; i++) {
        const char *name = t->items[i].name;
        // The first matching pattern wins and multiplies the model's own multiplier (lab_lr etc.).
        double mult = fnmatch("backbone.conv1.*", name, 0) == 0 ? 0.25
                      : fnmatch("backbone.*", name, 0) == 0   ? 0.5
                      : fnmatch("head.*", name, 0) == 0       ? 3.0
                                                              : 1.0;
        int frozen = fnmatch("neck.*", name, 0) == 0;
        ck_assert_int_eq(t->items[i].frozen, frozen);
        ck_assert_int_eq(o.frozen[i], frozen);
        AdamParams p = {0};
        optim_fill(&o, i, lr, &p);
        float want = frozen ? 0.0f : (float)(lr * (double)(float)((double)own[i] * mult));
        ck_assert_msg(p.lr == want, "%s: lr %g, want %g", name, (double)p.lr, (double)want);
        if (frozen) ck_assert(p.weight_decay == 0.0f);
    }
    ck_assert_int_gt(o.n_frozen, 0);
    optim_free(&o);
    free(own);
    ocr_model_free(m);
    ocr_config_free(cfg);
}
END_TEST

// The committed recipes validate and their patterns match the networks they are for (a renamed
// layer would make them match nothing, which is an error): PP-OCRv4 ch and PP-OCRv6 tiny.
static const struct {
    const char *config, *dict;
    int classes;
} RECIPES[] = {{"finetune_ppocrv4_receipts.json", "ppocr_keys_v1.txt", 6625},
               {"finetune_ppocrv6_tiny_receipts.json", "ppocrv6_tiny_dict.txt", 6906}};

START_TEST(test_recipe_config_applies) {
    char cfg_path[700], tr[1700], ev[800], trd[800], evd[800], gd[800], ge[800];
    snprintf(cfg_path, sizeof cfg_path, "%s/configs/%s", OCR_SOURCE_DIR, RECIPES[_i].config);
    // The recipe mixes a general set into every batch and scores one (EvalGeneral): its lists keep
    // their shape, only the files change (the eval split stands in for the general sets).
    snprintf(trd, sizeof trd, "Train.dataset.data_dir=%s/train", g_dir);
    snprintf(tr, sizeof tr, "Train.dataset.label_file_list=[\"%s/train/labels.txt\", \"%s/eval/labels.txt\"]", g_dir,
             g_dir);
    snprintf(evd, sizeof evd, "Eval.dataset.data_dir=%s/eval", g_dir);
    snprintf(ev, sizeof ev, "Eval.dataset.label_file_list=[\"%s/eval/labels.txt\"]", g_dir);
    snprintf(gd, sizeof gd, "EvalGeneral.dataset.data_dir=%s/eval", g_dir);
    snprintf(ge, sizeof ge, "EvalGeneral.dataset.label_file_list=[\"%s/eval/labels.txt\"]", g_dir);
    char dict[800];
    snprintf(dict, sizeof dict, "Global.character_dict_path=%s/configs/dicts/%s", OCR_SOURCE_DIR, RECIPES[_i].dict);
    const char *ov[] = {trd, tr, evd, ev, gd, ge, dict};
    RunConfig rc;
    OcrConfig *cfg = load_cfg(cfg_path, &rc, ov, 7);
    ck_assert(rc.finetune.pretrained_strict && rc.finetune.freeze_norm_all && rc.finetune.freeze_norm_affine);
    // The mix is part of the recipe (docs/MODELS.md, "Fine-tuning PP-OCRv4": measured, not assumed).
    const struct cJSON *ratios = ocr_config_node(cfg, "Train.dataset.batch_ratio_list");
    ck_assert_msg(cJSON_IsArray(ratios) && cJSON_GetArraySize(ratios) == 2, "the recipe's batch_ratio_list is not 2 shares");
    ck_assert(cJSON_GetArrayItem(ratios, 0)->valuedouble > 0 && cJSON_GetArrayItem(ratios, 1)->valuedouble > 0);
    ck_assert_msg(ocr_config_node(cfg, "EvalGeneral.dataset") != NULL, "the recipe has no EvalGeneral");
    OcrModel *m;
    ck_assert_msg(ocr_model_from_config(&m, cfg) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(ocr_model_arch(m)->num_classes, RECIPES[_i].classes);
    ck_assert_msg(train_apply_finetune(m, &rc, cfg) == OCR_OK, "%s", ocr_last_error());
    const OcrOpTable *ops = ocr_model_ops(m);
    for (int i = 0; i < ops->count; i++)
        if (strcmp(ops->items[i].type, "batchnorm") == 0) ck_assert_msg(ops->items[i].bn_frozen, "%s", ops->items[i].name);
    const OcrParamTable *t = ocr_model_params(m);
    int frozen = 0, trainable = 0;
    for (int i = 0; i < t->count; i++) {
        const char *n = t->items[i].name;
        int early = strncmp(n, "backbone.conv1.", 15) == 0 || strncmp(n, "backbone.blocks2.", 17) == 0 ||
                    strncmp(n, "backbone.blocks3.", 17) == 0;
        int bn = t->items[i].op >= 0 && strcmp(ops->items[t->items[i].op].type, "batchnorm") == 0;
        ck_assert_msg(t->items[i].frozen == (early || bn), "%s: frozen %d", n, t->items[i].frozen);
        frozen += t->items[i].frozen;
        trainable += !t->items[i].frozen;
    }
    ck_assert_int_gt(frozen, 0);
    ck_assert_int_gt(trainable, frozen);
    ocr_model_free(m);
    ocr_config_free(cfg);
}
END_TEST

// ---- O2 checkpoints: the model file is the masters --------------------------------------------------

START_TEST(test_o2_model_file_is_masters) {
    const char *ov[] = {"Global.use_amp=true", "Global.amp_level=O2", "Global.amp_dtype=float16",
                        "Global.scale_loss=1024"};
    RunConfig rc;
    OcrConfig *cfg = load_cfg(g_cfg, &rc, ov, 4);
    OcrModel *m;
    ck_assert(ocr_model_from_config(&m, cfg) == OCR_OK);
    AmpConfig ac;
    ck_assert(amp_config_from_config(&ac, cfg) == OCR_OK);
    AmpEngine amp;
    amp_engine_init(&amp, &ac);
    ck_assert(ocr_amp_attach(&amp, ocr_model_ops(m), ocr_model_params(m), ocr_model_stats(m)) == OCR_OK);
    OcrParamTable *t = ocr_model_params(m);
    Optimizer o;
    ck_assert(optim_init(&o, &rc.optim, t) == OCR_OK);
    StepCtx sc;
    const int B = 4, L = 3;
    ck_assert(step_ctx_init(&sc, m, &amp, &o, B, 0) == OCR_OK);
    // The loader's kind of batch: uint8 pixels at full width (the step normalises them).
    const int64_t npx = (int64_t)B * 32 * 64 * 3;
    uint8_t *px = malloc((size_t)npx);
    int32_t labels[4 * 3] = {1, 2, 3, 4, 5, 0, 6, 0, 0, 7, 8, 9}, lengths[4] = {3, 2, 1, 3}, widths[4] = {64, 64, 64, 64};
    FeedBatch fb = {.capacity = B, .count = B, .height = 32, .width = 64, .channels = 3, .max_len = L,
                    .pixels = px, .labels = labels, .lengths = lengths, .widths = widths};
    FeedDeviceBatch db;
    feed_batch_view(&fb, &db);
    for (int s = 0; s < 3; s++) {
        for (int64_t i = 0; i < npx; i++) px[i] = (uint8_t)(ocr_rng_uniform(20 + (uint64_t)s, 3, (uint64_t)i) * 256.0f);
        StepOutcome out;
        ck_assert(step_run(&sc, &db, 0.01, &out) == OCR_OK);
        ck_assert(!out.skipped);
    }
    CkptState st;
    memset(&st, 0, sizeof st);
    snprintf(st.amp_level, sizeof st.amp_level, "O2");
    snprintf(st.amp_dtype, sizeof st.amp_dtype, "float16");
    char dir[700], file[800];
    snprintf(dir, sizeof dir, "%s/o2_ckpt", g_dir);
    ck_assert_msg(ckpt_save(dir, m, &o, &amp, &st) == OCR_OK, "%s", ocr_last_error());
    snprintf(file, sizeof file, "%s/model.safetensors", dir);
    int with_master = 0;
    for (int i = 0; i < t->count; i++) {
        const OcrTensor *mw = amp_engine_master(&amp, i);
        int64_t n = t->items[i].numel;
        float *v = malloc((size_t)n * sizeof *v);
        ocr_dtype_t dt = read_tensor_f32(file, t->items[i].name, v, n);
        if (mw && mw->data) {
            with_master++;
            ck_assert_msg(dt == OCR_F32, "%s saved as %s", t->items[i].name, ocr_dtype_name(dt));
            ck_assert_msg(memcmp(v, mw->data, (size_t)n * sizeof *v) == 0, "%s: saved weight is not the master",
                          t->items[i].name);
        } else {
            OcrTensor p = ocr_params_tensor(t, i);
            float *w = malloc((size_t)n * sizeof *w);
            ocr_tensor_to_f32(&p, w);
            ck_assert_msg(memcmp(v, w, (size_t)n * sizeof *v) == 0, "%s differs", t->items[i].name);
            free(w);
        }
        free(v);
    }
    ck_assert_int_gt(with_master, 0);
    // Resuming restores masters, working copy and moments exactly.
    OcrModel *m2;
    ck_assert(ocr_model_from_config(&m2, cfg) == OCR_OK);
    ck_assert(ocr_model_load_weights(m2, file) == OCR_OK);
    AmpConfig ac2;
    ck_assert(amp_config_from_config(&ac2, cfg) == OCR_OK);
    AmpEngine amp2;
    amp_engine_init(&amp2, &ac2);
    ck_assert(ocr_amp_attach(&amp2, ocr_model_ops(m2), ocr_model_params(m2), ocr_model_stats(m2)) == OCR_OK);
    Optimizer o2;
    ck_assert(optim_init(&o2, &rc.optim, ocr_model_params(m2)) == OCR_OK);
    ck_assert_msg(ckpt_load_optimizer(dir, &o2, &amp2, ocr_model_params(m2)) == OCR_OK, "%s", ocr_last_error());
    OcrParamTable *t2 = ocr_model_params(m2);
    ck_assert(memcmp(t2->data, t->data, t->bytes) == 0);
    for (int i = 0; i < t->count; i++) {
        const OcrTensor *a = amp_engine_master(&amp, i), *b = amp_engine_master(&amp2, i);
        if (a && a->data) ck_assert(memcmp(a->data, b->data, ocr_tensor_bytes(a)) == 0);
        ck_assert(memcmp(o.m[i].data, o2.m[i].data, ocr_tensor_bytes(&o.m[i])) == 0);
    }
    optim_free(&o2);
    amp_engine_free(&amp2);
    ocr_model_free(m2);
    free(px);
    step_ctx_free(&sc);
    optim_free(&o);
    amp_engine_free(&amp);
    ocr_model_free(m);
    ocr_config_free(cfg);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("app_finetune");
    TCase *tc = tcase_create("t");
    tcase_set_timeout(tc, 300);
    tcase_add_unchecked_fixture(tc, setup_data, NULL);
    tcase_add_test(tc, test_load_report_counts);
    tcase_add_test(tc, test_pretrained_strict);
    tcase_add_test(tc, test_pretrained_pdparams_prefix);
    tcase_add_test(tc, test_finetune_config_errors);
    tcase_add_test(tc, test_frozen_bn_matches_eval_f32);
    tcase_add_test(tc, test_frozen_bn_matches_eval_f16);
    tcase_add_test(tc, test_frozen_bn_matches_eval_bf16);
    tcase_add_test(tc, test_freeze_norm_by_pattern);
    tcase_add_test(tc, test_frozen_params_bit_identical_fp32);
    tcase_add_test(tc, test_frozen_params_bit_identical_fp16_o2);
    tcase_add_test(tc, test_frozen_params_bit_identical_bf16_o2_stochastic);
    tcase_add_test(tc, test_frozen_norm_affine_false_trains_gamma_beta);
    tcase_add_test(tc, test_lr_mult_applied);
    tcase_add_loop_test(tc, test_recipe_config_applies, 0, 2);
    tcase_add_test(tc, test_o2_model_file_is_masters);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(suite()); }

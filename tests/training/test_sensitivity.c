// Finding the layers to keep in float32 (training/sensitivity.h) on constructed cases where the
// fragile layer is known: one block's weights scaled so that its float16 output overflows 65504
// (the float32 function unchanged: its BN statistics scaled alike), one transformer block whose
// residual stream carries a large constant that the layer norm after it removes again (a small
// difference of large values: bfloat16 keeps 8 bits, and loses it all), and the same model
// unedited, which must propose nothing. The ranking must put exactly the edited block first, the proposal must be that one block,
// and the proposal's files, applied the way a user applies them, must restore the logits.
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>

#include "cli/commands.h"
#include "training/feed.h"
#include "training/inference.h"
#include "training/run_config.h"
#include "training/sensitivity.h"
#include "training/trainer.h"
#include "models/model.h"
#include "tests/training/training_test_util.h"

static char *g_dir;
static char g_cfg[512];
static char g_plain[600], g_overflow[600], g_shift[600], g_other_arch[600];

#define OVERFLOW_BLOCK "backbone.block_list.5"
#define SHIFT_BLOCK "neck.encoder.svtr_block.0"

static OcrConfig *load_cfg(const char *path, RunConfig *rc) {
    OcrConfig *cfg;
    ck_assert_msg(run_config_load(&cfg, rc, path, NULL, 0, RUN_NEED_EVAL) == OCR_OK, "%s", ocr_last_error());
    return cfg;
}

// An f32 tensor of the model (parameters or BN statistics) by name.
static float *tensor_f32(OcrModel *m, const char *name, int64_t *numel, int64_t *rows) {
    OcrParamTable *t = ocr_model_params(m);
    int i = ocr_params_find(t, name);
    if (i < 0) {
        t = ocr_model_stats(m);
        i = ocr_params_find(t, name);
    }
    ck_assert_msg(i >= 0, "no tensor %s", name);
    ck_assert(t->items[i].dtype == OCR_F32);
    *numel = t->items[i].numel;
    if (rows) *rows = t->items[i].shape[0];
    return (float *)((char *)t->data + t->items[i].offset);
}

// The config's model trained for a few epochs on the digits (weights as a user would have them:
// BN statistics and scales from training, not from the initialiser).
static char g_trained[600];
static OcrModel *trained_model(void) {
    RunConfig rc;
    OcrConfig *cfg;
    if (!at_exists(g_trained)) {
        char sd[700];
        snprintf(sd, sizeof sd, "Global.save_model_dir=\"%s/train\"", g_dir);
        const char *ov[] = {"Global.epoch_num=8", sd};
        ck_assert_msg(run_config_load(&cfg, &rc, g_cfg, ov, 2, RUN_NEED_TRAIN | RUN_NEED_EVAL) == OCR_OK, "%s",
                      ocr_last_error());
        TrainOptions opt = {0};
        opt.save_checkpoints = 1;
        TrainResult res;
        ck_assert_msg(train_run(cfg, &rc, &opt, &res) == OCR_OK, "%s", ocr_last_error());
        train_result_free(&res);
        ocr_config_free(cfg);
        snprintf(g_trained, sizeof g_trained, "%s/train/latest/model.safetensors", g_dir);
        ck_assert_msg(at_exists(g_trained), "%s", g_trained);
    }
    cfg = load_cfg(g_cfg, &rc);
    OcrModel *m;
    ck_assert(ocr_model_from_config(&m, cfg) == OCR_OK);
    ck_assert_msg(ocr_model_load_weights(m, g_trained) == OCR_OK, "%s", ocr_last_error());
    ocr_config_free(cfg);
    return m;
}

// Pointwise conv of `block` times s, its BN statistics scaled alike: the same function in f32, an
// output 2^15 times larger (beyond float16's 65504) before the BN.
static void scale_block(OcrModel *m, const char *block, float s) {
    char n[256];
    int64_t k, rows;
    snprintf(n, sizeof n, "%s._pointwise_conv._conv.weight", block);
    float *w = tensor_f32(m, n, &k, NULL);
    for (int64_t i = 0; i < k; i++) w[i] *= s;
    snprintf(n, sizeof n, "%s._pointwise_conv._batch_norm._mean", block);
    float *mean = tensor_f32(m, n, &k, &rows);
    for (int64_t i = 0; i < k; i++) mean[i] *= s;
    snprintf(n, sizeof n, "%s._pointwise_conv._batch_norm._variance", block);
    float *var = tensor_f32(m, n, &k, NULL);
    for (int64_t i = 0; i < k; i++) var[i] *= s * s;
}

// The attention projection's bias + c in every channel: the block's residual stream (add1, norm2's
// input, add2) carries x + c, and every layer norm removes a constant over the channels (the neck's
// last norm after this, the only block, too), so in float32 nothing changes (c = 4096 leaves 12 bits
// of a unit-sized x); in bfloat16, whose spacing at 4096 is 32, x + c keeps nothing of x.
static void shift_block(OcrModel *m, const char *block, float c) {
    char n[256];
    int64_t k;
    snprintf(n, sizeof n, "%s.mixer.proj.bias", block);
    float *bias = tensor_f32(m, n, &k, NULL);
    for (int64_t i = 0; i < k; i++) bias[i] += c;
}

// The data (in the parent: no OpenMP there, Check forks every test from it).
static void setup(void) {
    g_dir = at_setup_digits(g_cfg, sizeof g_cfg, "\"epoch_num\": 1,");
    snprintf(g_plain, sizeof g_plain, "%s/plain.safetensors", g_dir);
    snprintf(g_overflow, sizeof g_overflow, "%s/overflow.safetensors", g_dir);
    snprintf(g_shift, sizeof g_shift, "%s/shift.safetensors", g_dir);
    snprintf(g_other_arch, sizeof g_other_arch, "%s/other.safetensors", g_dir);
}

// The weights, made by the first test that needs them (in its child process: the forward passes of
// the calibration start OpenMP's threads, which a fork would not carry over).
static void make_weights(void) {
    training_set_threads(at_threads());
    if (at_exists(g_other_arch)) return;
    OcrModel *m = trained_model();
    ck_assert(ocr_model_save_weights(m, g_plain) == OCR_OK);
    scale_block(m, OVERFLOW_BLOCK, 32768.0f);
    ck_assert(ocr_model_save_weights(m, g_overflow) == OCR_OK);
    ocr_model_free(m);
    m = trained_model();
    shift_block(m, SHIFT_BLOCK, 4096.0f);
    ck_assert(ocr_model_save_weights(m, g_shift) == OCR_OK);
    ocr_model_free(m);
    // Weights of another architecture (a wider backbone): they must not load.
    char other[600];
    snprintf(other, sizeof other, "%s/other.json", g_dir);
    at_write_config_neck(other, g_dir, 64, 8, "", 0.25, AT_NECK_SVTR);
    RunConfig rc;
    OcrConfig *cfg = load_cfg(other, &rc);
    ck_assert(ocr_model_from_config(&m, cfg) == OCR_OK);
    ck_assert(ocr_model_save_weights(m, g_other_arch) == OCR_OK);
    ocr_model_free(m);
    ocr_config_free(cfg);
}

static void run_sens(const char *weights, ocr_dtype_t dt, ocr_amp_level_t level, double threshold, SensResult *r) {
    RunConfig rc;
    OcrConfig *cfg = load_cfg(g_cfg, &rc);
    SensOptions o;
    sens_options_default(&o);
    o.weights = weights;
    o.dtype = dt;
    o.level = level;
    if (threshold > 0) o.threshold = threshold;
    ck_assert_msg(sensitivity_run(cfg, &rc, &o, r) == OCR_OK, "%s", ocr_last_error());
    ocr_config_free(cfg);
}

static const SensGroup *ranked(const SensResult *r, int k) { return &r->groups[r->layer_rank[k]]; }

// The logits of `weights` under cfg's AMP (with_amp) or in float32 on the first Eval batch of 16.
static float *logits_of(const char *cfg_path, const char *weights, int with_amp, size_t *n) {
    RunConfig rc;
    OcrConfig *cfg = load_cfg(cfg_path, &rc);
    InferModel im;
    ck_assert_msg(infer_model_load(&im, cfg, weights, with_amp, NULL) == OCR_OK, "%s", ocr_last_error());
    OcrDict dict;
    ck_assert(ocr_dict_load(&dict, rc.dict_path, rc.use_space_char) == OCR_OK);
    Feed f;
    ck_assert(feed_open(&f, cfg, "Eval", &dict, 0, 16) == OCR_OK);
    FeedBatch b;
    int end = 0;
    ck_assert(feed_next(&f, &b, &end) == OCR_OK && !end);
    ck_assert(infer_forward_batch(im.m, &b) == OCR_OK);
    const OcrTensor *z = ocr_model_logits(im.m);
    *n = (size_t)ocr_tensor_numel(z);
    float *out = malloc(*n * sizeof *out);
    ocr_tensor_to_f32(z, out);
    feed_close(&f);
    ocr_dict_free(&dict);
    infer_model_free(&im);
    ocr_config_free(cfg);
    return out;
}

static double rel_l2(const float *a, const float *b, size_t n) {
    double se = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        se += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return sqrt(se / s);
}

START_TEST(test_group_names) {
    static const char *const names[] = {
        "backbone.conv1.conv", "backbone.conv1.bn", "backbone.blocks2.0.dw_conv.reparam_conv",
        "backbone.blocks2.0.dw_conv.lab", "backbone.blocks2.0.pw_conv.reparam_conv",
        "backbone.blocks3.0.dw_conv.reparam_conv", "backbone.blocks3.1.dw_conv.reparam_conv",
        "backbone.blocks3.1.pw_conv.reparam_conv", "backbone.pool",
        "neck.encoder.conv1.conv", "neck.encoder.conv1.norm", "neck.encoder.svtr_block.0.norm1",
        "neck.encoder.svtr_block.0.mixer.qkv", "neck.encoder.svtr_block.1.norm1", "neck.encoder.norm", "head.fc",
        "head.softmax"};
    const int n = (int)(sizeof names / sizeof names[0]);
    static const struct {
        int op, depth;
        const char *want;
    } cases[] = {
        {0, 1, "backbone"},  {9, 1, "neck.encoder"},  // "neck" has one child: merged
        {15, 1, "head"},     {0, 2, "backbone.conv1"},
        {2, 2, "backbone.blocks2.0"},  // a list index belongs to its list's level
        {7, 2, "backbone.blocks3.1"},  {8, 2, "backbone.pool"},  // fewer levels: the whole name
        {10, 2, "neck.encoder.conv1"},  {12, 2, "neck.encoder.svtr_block.0"}, {14, 2, "neck.encoder.norm"},
        {15, 2, "head.fc"},  {3, 3, "backbone.blocks2.0.dw_conv"}, {7, 3, "backbone.blocks3.1.pw_conv.reparam_conv"},
        // blocks3.0 and its dw_conv have one child each: merged down to the op
        {5, 3, "backbone.blocks3.0.dw_conv.reparam_conv"}, {0, 3, "backbone.conv1.conv"},
        {12, 3, "neck.encoder.svtr_block.0.mixer.qkv"},  {12, 9, "neck.encoder.svtr_block.0.mixer.qkv"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char out[SENS_NAME_MAX];
        sensitivity_group_name(names, n, cases[k].op, cases[k].depth, out, sizeof out);
        ck_assert_msg(strcmp(out, cases[k].want) == 0, "%s at depth %d: got %s, want %s", names[cases[k].op],
                      cases[k].depth, out, cases[k].want);
    }
}
END_TEST

// float16 O2: the scaled block overflows alone; keeping it (and only it) in float32 restores.
START_TEST(test_overflow_block_is_found) {
    SensResult r;
    run_sens(g_overflow, OCR_F16, OCR_AMP_O2, 0, &r);
    ck_assert_int_eq(r.lines, 16);
    ck_assert_int_gt(r.n_ranked_layers, 15);
    ck_assert_int_gt(r.amp.nonfinite, 0);  // the AMP run itself is broken
    ck_assert(!r.amp_passes && r.proposal_needed);
    const SensGroup *top = ranked(&r, 0);
    ck_assert_str_eq(top->name, OVERFLOW_BLOCK);
    ck_assert_int_gt(top->low_only.nonfinite, 0);
    ck_assert(isinf(top->score));
    ck_assert_int_eq(top->fp32_kept.nonfinite, 0);
    // No other group is harmful on its own: each alone in float16 stays finite and close.
    for (int k = 1; k < r.n_ranked_layers; k++) {
        ck_assert_msg(isfinite(ranked(&r, k)->score), "%s: score %g", ranked(&r, k)->name, ranked(&r, k)->score);
        ck_assert_int_eq(ranked(&r, k)->low_only.nonfinite, 0);
        ck_assert_int_gt(ranked(&r, k)->fp32_kept.nonfinite, 0);  // the overflow is still there
    }
    // The proposal: that block alone, by name, found at the first step.
    ck_assert_int_eq(r.n_fp32_groups, 1);
    ck_assert_int_eq(r.fp32_groups[0], r.layer_rank[0]);
    ck_assert_int_eq(r.black_type, -1);
    ck_assert_int_eq(r.n_steps, 1);
    ck_assert(r.proposal_passes);
    ck_assert_int_eq(r.proposed.nonfinite, 0);
    ck_assert_double_le(r.proposed.rel_l2, r.threshold);
    ck_assert_int_eq(top->n_patterns, 1);
    ck_assert_str_eq(top->patterns[0], OVERFLOW_BLOCK ".*");

    // The files, applied the way a user applies them.
    char out[700], path[800];
    snprintf(out, sizeof out, "%s/sens_overflow", g_dir);
    ck_assert_msg(sensitivity_write(&r, out) == OCR_OK, "%s", ocr_last_error());
    char **ov;
    int n;
    ck_assert(sensitivity_proposal_overrides(&r, &ov, &n) == OCR_OK);
    int found = 0;
    for (int i = 0; i < n; i++) found |= strcmp(ov[i], "Global.amp_fp32_layers=[\"" OVERFLOW_BLOCK ".*\"]") == 0;
    ck_assert_msg(found, "no amp_fp32_layers override");
    // -o: the override line on the base config.
    OcrConfig *cfg;
    RunConfig rc;
    ck_assert_msg(run_config_load(&cfg, &rc, g_cfg, (const char *const *)ov, n, RUN_NEED_EVAL) == OCR_OK, "%s",
                  ocr_last_error());
    sensitivity_overrides_free(ov, n);
    char with_o[800];
    snprintf(with_o, sizeof with_o, "%s/with_o.json", out);
    char *json = ocr_config_to_json(cfg);
    at_write_text(with_o, json);
    free(json);
    ocr_config_free(cfg);
    size_t nz, n32, no;
    float *z32 = logits_of(g_cfg, g_overflow, 0, &n32);
    float *zo = logits_of(with_o, g_overflow, 1, &no);
    ck_assert_uint_eq(n32, no);
    ck_assert_double_le(rel_l2(zo, z32, n32), r.threshold);
    // -c config_with_proposal.json gives the same run.
    snprintf(path, sizeof path, "%s/config_with_proposal.json", out);
    float *zc = logits_of(path, g_overflow, 1, &nz);
    ck_assert_uint_eq(nz, n32);
    ck_assert_msg(memcmp(zc, zo, nz * sizeof *zc) == 0, "the -o line and the config file differ");
    // Without the proposal the same AMP run overflows.
    const char *amp_ov[] = {"Global.use_amp=true", "Global.amp_dtype=float16", "Global.amp_level=O2"};
    ck_assert(run_config_load(&cfg, &rc, g_cfg, amp_ov, 3, RUN_NEED_EVAL) == OCR_OK);
    snprintf(path, sizeof path, "%s/amp_only.json", out);
    json = ocr_config_to_json(cfg);
    at_write_text(path, json);
    free(json);
    ocr_config_free(cfg);
    float *za = logits_of(path, g_overflow, 1, &nz);
    ck_assert(isinf(rel_l2(za, z32, nz)));
    free(z32);
    free(zo);
    free(zc);
    free(za);
    // proposal.yml loads with the same Global keys.
    snprintf(path, sizeof path, "%s/proposal.yml", out);
    OcrConfig *y;
    ck_assert_msg(ocr_config_load(&y, path) == OCR_OK, "%s", ocr_last_error());
    const cJSON *l = ocr_config_node(y, "Global.amp_fp32_layers");
    ck_assert(l && cJSON_GetArraySize(l) == 1);
    ck_assert_str_eq(cJSON_GetArrayItem(l, 0)->valuestring, OVERFLOW_BLOCK ".*");
    const char *s;
    ck_assert(ocr_config_get_string(y, "Global.amp_dtype", NULL, &s) == OCR_OK && strcmp(s, "float16") == 0);
    ck_assert(ocr_config_get_string(y, "Global.amp_level", NULL, &s) == OCR_OK && strcmp(s, "O2") == 0);
    ocr_config_free(y);
    // sensitivity.json: the ranking and the proposal.
    snprintf(path, sizeof path, "%s/sensitivity.json", out);
    char *text;
    size_t size;
    ck_assert(ocr_read_file(path, &text, &size) == OCR_OK);
    cJSON *o = cJSON_Parse(text);
    free(text);
    ck_assert(o);
    const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "layers"), 0);
    ck_assert_str_eq(cJSON_GetObjectItem(first, "group")->valuestring, OVERFLOW_BLOCK);
    ck_assert(cJSON_IsNull(cJSON_GetObjectItem(first, "score")));  // infinite
    const cJSON *p = cJSON_GetObjectItem(o, "proposal");
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(p, "passes")));
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(p, "amp_fp32_layers")), 1);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(p, "amp_custom_black_list")), 0);
    cJSON_Delete(o);
    sensitivity_result_free(&r);
}
END_TEST

// bfloat16 O2: the shifted block is a small difference of large values; no op type alone restores it
// (black-listing linear leaves the adds low, black-listing add leaves the projection low).
START_TEST(test_cancellation_block_is_found) {
    SensResult r;
    run_sens(g_shift, OCR_BF16, OCR_AMP_O2, 0, &r);
    ck_assert_int_eq(r.amp.nonfinite, 0);
    ck_assert(!r.amp_passes);
    ck_assert_double_gt(r.amp.rel_l2, 2 * r.threshold);
    const SensGroup *top = ranked(&r, 0);
    ck_assert_str_eq(top->name, SHIFT_BLOCK);
    // It dominates: alone in bfloat16 it does most of the AMP run's damage; the next group is far behind.
    ck_assert_double_gt(top->low_only.rel_l2, 0.5 * r.amp.rel_l2);
    ck_assert_double_gt(top->score, 5 * ranked(&r, 1)->score);
    ck_assert_double_le(top->fp32_kept.rel_l2, r.threshold);
    ck_assert_int_eq(r.n_fp32_groups, 1);
    ck_assert_int_eq(r.fp32_groups[0], r.layer_rank[0]);
    ck_assert_int_eq(r.black_type, -1);
    ck_assert(r.proposal_passes);
    // Op types are measured too, and none of them restores it alone.
    ck_assert_int_gt(r.n_ranked_types, 2);
    for (int k = 0; k < r.n_ranked_types; k++) {
        const SensGroup *t = &r.groups[r.type_rank[k]];
        ck_assert(t->is_type);
        ck_assert_msg(t->fp32_kept.rel_l2 > r.threshold, "%s restores it", t->name);
    }
    sensitivity_result_free(&r);
}
END_TEST

// Nothing fragile: nothing proposed, in float16 O2 and bfloat16 O1.
START_TEST(test_no_fragile_layer_proposes_nothing) {
    for (int v = 0; v < 2; v++) {
        SensResult r;
        run_sens(g_plain, v ? OCR_BF16 : OCR_F16, v ? OCR_AMP_O1 : OCR_AMP_O2, 0, &r);
        ck_assert_msg(r.amp_passes, "%s: AMP rel-L2 %g", v ? "bf16" : "f16", r.amp.rel_l2);
        ck_assert(!r.proposal_needed);
        ck_assert_int_eq(r.n_fp32_groups, 0);
        ck_assert_int_eq(r.black_type, -1);
        ck_assert_int_eq(r.n_steps, 0);
        ck_assert_ptr_null(r.proposal_cfg);
        ck_assert_int_gt(r.n_ranked_layers, 15);
        for (int k = 0; k < r.n_ranked_layers; k++) ck_assert(isfinite(ranked(&r, k)->score));
        char out[700], path[800];
        snprintf(out, sizeof out, "%s/sens_plain%d", g_dir, v);
        ck_assert(sensitivity_write(&r, out) == OCR_OK);
        snprintf(path, sizeof path, "%s/sensitivity.json", out);
        ck_assert(at_exists(path));
        snprintf(path, sizeof path, "%s/proposal.yml", out);
        ck_assert(!at_exists(path));
        sensitivity_result_free(&r);
    }
}
END_TEST

// The command: the files, --compare's three trainings, and bad input refused before any work.
START_TEST(test_command) {
    char out[400], path[600], err[8192];
    snprintf(out, sizeof out, "%s/cli", g_dir);
    const char *ok[] = {"sensitivity", "-c", g_cfg, "--weights", g_overflow, "--dtype", "float16", "--level", "O2",
                        "--batches", "1", "--batch-size", "8", "--out", out, "--no-types", "--compare",
                        "--max-steps", "2", NULL};
    int rc = at_run_capture(cmd_sensitivity, ok, err, sizeof err);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    ck_assert_msg(strstr(err, "sensitivity [1/"), "no progress lines: %s", err);
    ck_assert_msg(strstr(err, "run 3/3: amp+proposal"), "%s", err);
    snprintf(path, sizeof path, "%s/sensitivity.json", out);
    ck_assert(at_exists(path));
    snprintf(path, sizeof path, "%s/config_with_proposal.json", out);
    ck_assert(at_exists(path));
    for (int i = 0; i < 3; i++) {  // each of the three trainings ran its two steps
        static const char *const runs[] = {"fp32", "amp", "amp_proposal"};
        snprintf(path, sizeof path, "%s/compare/%s", out, runs[i]);
        ck_assert_msg(at_steps_recorded(path) == 2, "%s: %lld steps", path, (long long)at_steps_recorded(path));
    }

    static const struct {
        const char *flag, *value, *needle;
    } bad[] = {
        {"--dtype", "float8", "--dtype"},
        {"--level", "O3", "--level"},
        {"--batches", "0", "--batches"},
        {"--depth", "0", "--depth"},
        {"--threshold", "abc", "--threshold"},
        {"--weights", "/nonexistent/w.safetensors", "--weights"},
        {"--weights", NULL, "--weights"},  // the other architecture's weights
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        const char *w = strcmp(bad[k].flag, "--weights") == 0 ? (bad[k].value ? bad[k].value : g_other_arch) : g_plain;
        const char *args[16] = {"sensitivity", "-c", g_cfg, "--weights", w, "--out", out};
        int a = 7;
        if (strcmp(bad[k].flag, "--weights") != 0) {
            args[a++] = bad[k].flag;
            args[a++] = bad[k].value;
        }
        args[a] = NULL;
        double t0 = at_now();
        rc = at_run_capture(cmd_sensitivity, args, err, sizeof err);
        ck_assert_msg(rc == 2, "%s %s: exit %d: %s", bad[k].flag, bad[k].value ? bad[k].value : w, rc, err);
        ck_assert_msg(strstr(err, bad[k].needle), "%s: %s", bad[k].flag, err);
        ck_assert_msg(!strstr(err, "sensitivity [1/"), "%s: work started before the error: %s", bad[k].flag, err);
        ck_assert_double_lt(at_now() - t0, 30.0);
    }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("training_sensitivity");
    TCase *tc = tcase_create("sensitivity");
    tcase_set_timeout(tc, 600);
    tcase_add_unchecked_fixture(tc, setup, NULL);
    tcase_add_checked_fixture(tc, make_weights, NULL);
    tcase_add_test(tc, test_group_names);
    tcase_add_test(tc, test_overflow_block_is_found);
    tcase_add_test(tc, test_cancellation_block_is_found);
    tcase_add_test(tc, test_no_fragile_layer_proposes_nothing);
    tcase_add_test(tc, test_command);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(suite()); }

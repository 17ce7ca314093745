// The application's front door: config validation (unknown keys with suggestions, types,
// ranges, shorthands), every subcommand's bad input (exit 2/1, a clear message, nothing
// written), learning-rate schedules, per-parameter optimizer rules, checkpoint files, and the
// report schema and verdict.
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>

#include "training/checkpoint.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "training/inference.h"
#include "training/optim.h"
#include "training/report.h"
#include "training/run_config.h"
#include "core/safetensors.h"
#include "tests/training/training_test_util.h"

static char *g_dir;
static char g_cfg[512];

// One small dataset and config for the whole file (forked tests inherit it).
static void setup_data(void) {
    g_dir = at_tmpdir();
    at_make_digits(g_dir, "train", 24, 3, 1);
    at_make_digits(g_dir, "eval", 8, 3, 2);
    snprintf(g_cfg, sizeof g_cfg, "%s/cfg.json", g_dir);
    at_write_config(g_cfg, g_dir, 64, 8, "\"epoch_num\": 1,");
}

static ocr_status_t load_with(const char *const *ov, int n, RunConfig *rc) {
    OcrConfig *cfg;
    ocr_status_t st = run_config_load(&cfg, rc, g_cfg, ov, n, RUN_NEED_TRAIN | RUN_NEED_EVAL);
    if (st == OCR_OK) ocr_config_free(cfg);
    return st;
}

START_TEST(test_valid_config) {
    RunConfig rc;
    ck_assert_msg(load_with(NULL, 0, &rc) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(rc.epoch_num, 1);
    ck_assert_int_eq(rc.train.batch_size, 8);
    ck_assert_int_eq(rc.optim.lr.kind, LR_COSINE);
    ck_assert(fabs(rc.accuracy_tolerance - 0.005) < 1e-12);
    ck_assert(fabs(rc.cer_tolerance - 0.005) < 1e-12);
    ck_assert(fabs(rc.optim.epsilon - 1e-8) < 1e-20);  // Paddle's Adam default
}
END_TEST

START_TEST(test_unknown_key_suggests) {
    RunConfig rc;
    const char *ov[] = {"Global.epoch_nmu=3"};
    ck_assert_int_eq(load_with(ov, 1, &rc), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "Global.epoch_nmu") && strstr(ocr_last_error(), "did you mean epoch_num"),
                  "%s", ocr_last_error());
    const char *ov2[] = {"Optimizer.lr.warmup_epochs=3"};
    ck_assert_int_eq(load_with(ov2, 1, &rc), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "warmup_epoch"), "%s", ocr_last_error());
    const char *ov3[] = {"Train.loader.batch_size=3"};
    ck_assert_int_eq(load_with(ov3, 1, &rc), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "batch_size_per_card"), "%s", ocr_last_error());
}
END_TEST

START_TEST(test_wrong_type_and_range_name_the_key) {
    RunConfig rc;
    const char *ov[] = {"Global.epoch_num=\"ten\""};
    ck_assert_int_eq(load_with(ov, 1, &rc), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "Global.epoch_num"), "%s", ocr_last_error());
    const char *ov2[] = {"Optimizer.beta1=1.5"};
    ck_assert_int_eq(load_with(ov2, 1, &rc), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "Optimizer.beta1"), "%s", ocr_last_error());
    const char *ov3[] = {"Optimizer.lr.name=Linear"};
    ck_assert_int_eq(load_with(ov3, 1, &rc), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "Cosine"), "%s", ocr_last_error());
    const char *ov4[] = {"Global.amp_level=O3", "Global.use_amp=true"};
    ck_assert_int_eq(load_with(ov4, 2, &rc), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "amp_level"), "%s", ocr_last_error());
    const char *ov5[] = {"Global.accuracy_tolerance=-1"};
    ck_assert_int_eq(load_with(ov5, 1, &rc), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "accuracy_tolerance"), "%s", ocr_last_error());
    const char *ov6[] = {"Global.cer_tolerance=1.5"};
    ck_assert_int_eq(load_with(ov6, 1, &rc), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "cer_tolerance"), "%s", ocr_last_error());
}
END_TEST

START_TEST(test_paddleocr_shorthands) {
    CliConfigArgs ca = {0};
    char *argv[] = {"train", "-c", g_cfg, "--use_amp", "True", "--scale_loss", "1024", "--amp_level=O1",
                    "--amp_dtype", "bfloat16", "-o", "Global.epoch_num=2", "Optimizer.beta1=0.8", NULL};
    int argc = 13;
    for (int i = 1; i < argc;) {
        int n = cli_take_config_arg(&ca, argc, argv, i);
        ck_assert_msg(n > 0, "argument %d (%s) not taken: %s", i, argv[i], ocr_last_error());
        i += n;
    }
    ck_assert_str_eq(ca.config, g_cfg);
    ck_assert_int_eq(ca.n_overrides, 6);
    OcrConfig *cfg;
    RunConfig rc;
    ck_assert_msg(run_config_load(&cfg, &rc, ca.config, (const char *const *)ca.overrides, ca.n_overrides,
                                  RUN_NEED_TRAIN) == OCR_OK,
                  "%s", ocr_last_error());
    const char *s;
    double d;
    ck_assert(rc.use_amp);
    ck_assert_int_eq(rc.epoch_num, 2);
    ck_assert(ocr_config_get_string(cfg, "Global.amp_level", "", &s) == OCR_OK && strcmp(s, "O1") == 0);
    ck_assert(ocr_config_get_string(cfg, "Global.amp_dtype", "", &s) == OCR_OK && strcmp(s, "bfloat16") == 0);
    ck_assert(ocr_config_get_double(cfg, "Global.scale_loss", 0, &d) == OCR_OK && d == 1024);
    ocr_config_free(cfg);
    cli_config_args_free(&ca);
    // A flag without its value is an error, not a silent default.
    char *bad[] = {"train", "--amp_dtype", NULL};
    CliConfigArgs cb = {0};
    ck_assert_int_eq(cli_take_config_arg(&cb, 2, bad, 1), -1);
}
END_TEST

START_TEST(test_lr_schedules) {
    LrConfig c = {0};
    c.kind = LR_COSINE;
    c.learning_rate = 1e-3;
    c.warmup_epoch = 2;
    // 10 steps per epoch, 5 epochs: warm-up 20 iterations from 0, then cosine over T_max = 50 at t - 20.
    ck_assert(lr_at(&c, 0, 10, 5) == 0.0);
    ck_assert(fabs(lr_at(&c, 10, 10, 5) - 0.5e-3) < 1e-15);
    ck_assert(fabs(lr_at(&c, 20, 10, 5) - 1e-3) < 1e-15);
    ck_assert(fabs(lr_at(&c, 45, 10, 5) - 0.5e-3 * (1 + cos(M_PI * 25 / 50.0))) < 1e-15);
    ck_assert(lr_at(&c, 49, 10, 5) > 0);  // T_max includes the warm-up: it ends above 0
    // warm-up rounds half to even as Python's round(): 0.25 · 10 = 2.5 → 2
    c.warmup_epoch = 0.25;
    ck_assert(fabs(lr_at(&c, 1, 10, 5) - 0.5e-3) < 1e-15);
    LrConfig p = {0};
    p.kind = LR_PIECEWISE;
    p.n_decay = 2;
    p.decay_epochs[0] = 3;
    p.decay_epochs[1] = 4;
    p.values[0] = 1e-2;
    p.values[1] = 1e-3;
    p.values[2] = 1e-4;
    p.warmup_epoch = 1;
    ck_assert(fabs(lr_at(&p, 5, 10, 5) - 0.5e-2) < 1e-15);
    ck_assert(lr_at(&p, 10 + 29, 10, 5) == 1e-2);  // inner t = 29 < 30
    ck_assert(lr_at(&p, 10 + 30, 10, 5) == 1e-3);
    ck_assert(lr_at(&p, 10 + 40, 10, 5) == 1e-4);
    LrConfig k = {0};
    k.kind = LR_CONST;
    k.learning_rate = 3e-4;
    ck_assert(lr_at(&k, 1000, 10, 5) == 3e-4);
}
END_TEST

START_TEST(test_optimizer_param_rules) {
    OcrParamTable t;
    ocr_params_init_table(&t, OCR_MEM_PARAMS);
    int64_t s4[1] = {4}, s22[2] = {2, 2};
    int w = ocr_params_add(&t, "backbone.conv.weight", 2, s22, (OcrInit){OCR_INIT_CONST, 0.1f, 0}, OCR_ROLE_WEIGHT);
    int g = ocr_params_add(&t, "backbone.bn.weight", 1, s4, (OcrInit){OCR_INIT_CONST, 1, 0}, OCR_ROLE_NORM);
    int h = ocr_params_add(&t, "head.fc.weight", 2, s22, (OcrInit){OCR_INIT_CONST, 0.1f, 0}, OCR_ROLE_WEIGHT);
    int n = ocr_params_add(&t, "neck.norm.weight", 1, s4, (OcrInit){OCR_INIT_CONST, 1, 0}, OCR_ROLE_NORM);
    t.items[g].decay_kind = OCR_DECAY_NONE;
    t.items[h].decay_kind = OCR_DECAY_FIXED;
    t.items[h].decay = 1e-5f;
    t.items[g].lr_mult = 0.1f;
    ocr_params_layout(&t);
    ck_assert(ocr_params_alloc(&t, 1) == OCR_OK);
    OptimConfig oc = {0};
    oc.beta1 = 0.9;
    oc.beta2 = 0.999;
    oc.epsilon = 1e-8;
    oc.l2_factor = 3e-5;
    Optimizer o;
    ck_assert(optim_init(&o, &oc, &t) == OCR_OK);
    ck_assert(o.decay[w] == 3e-5f && !o.decoupled[w]);
    ck_assert(o.decay[g] == 0.0f);
    ck_assert(o.decay[h] == 1e-5f && !o.decoupled[h]);
    ck_assert(o.decay[n] == 3e-5f);  // the neck's LayerNorm keeps the global L2 in PaddleOCR
    AdamParams ap = {0};
    optim_fill(&o, g, 2e-3, &ap);
    ck_assert(fabs(ap.lr - 2e-4) < 1e-10);
    ck_assert_int_eq(ap.step, 1);
    ck_assert_int_eq(optim_state_bytes(&o) >= 2 * 12 * 4, 1);
    optim_free(&o);
    // AdamW: decoupled, with the name and 1-D exclusions.
    oc.adamw = 1;
    oc.weight_decay = 0.05;
    oc.one_dim_no_decay = 1;
    snprintf(oc.no_decay_names[0], sizeof oc.no_decay_names[0], "head");
    oc.n_no_decay_names = 1;
    ck_assert(optim_init(&o, &oc, &t) == OCR_OK);
    ck_assert(o.decay[w] == 0.05f && o.decoupled[w]);
    ck_assert(o.decay[n] == 0.0f);  // 1-D
    ck_assert(o.decay[h] == 1e-5f && !o.decoupled[h]);  // a fixed ParamAttr decay wins
    // Clipping: per tensor and global, as factors on the true gradient.
    ck_assert(ocr_params_alloc_grads(&t) == OCR_OK);
    OcrTensor gv[4], *gl[4];
    float gs[4] = {1, 1, 1, 1}, f[4];
    for (int i = 0; i < 4; i++) {
        gv[i] = ocr_params_grad(&t, i);
        ocr_tensor_fill(&gv[i], 1.0f);  // norm 2 each
        gl[i] = &gv[i];
    }
    o.cfg.clip_norm = 1.0;
    double norm = optim_clip_factors(&o, gl, gs, f);
    ck_assert(fabs(norm - 4.0) < 1e-9);
    ck_assert(fabs(f[0] - 0.5f) < 1e-7);
    o.cfg.clip_norm = 0;
    o.cfg.clip_norm_global = 2.0;
    gs[1] = 0.5f;  // a scaled (O2) gradient: its true norm is 1
    norm = optim_clip_factors(&o, gl, gs, f);
    ck_assert(fabs(norm - sqrt(13.0)) < 1e-9);
    ck_assert(fabs(f[2] - 2.0 / (sqrt(13.0) + 1e-6)) < 1e-6);
    optim_free(&o);
    ocr_params_free(&t);
}
END_TEST

START_TEST(test_predict_batch_width) {
    // PaddleOCR's predictor: W = int(H · max(min_width / H, widest w/h of the batch)).
    ck_assert_int_eq(predict_batch_width(48, 320, 2.0), 320);
    ck_assert_int_eq(predict_batch_width(48, 320, 10.0), 480);
    ck_assert_int_eq(predict_batch_width(48, 320, 7.123), 341);  // int() truncates
    ck_assert_int_eq(predict_batch_width(32, 320, 0.5), 320);
    ck_assert_int_eq(predict_batch_width(32, 100, 4.0), 128);
}
END_TEST

START_TEST(test_memory_size_parsing) {
    int64_t b;
    ck_assert(parse_memory_size("16G", &b) && b == 16LL << 30);
    ck_assert(parse_memory_size("16GiB", &b) && b == 16LL << 30);
    ck_assert(parse_memory_size("512MB", &b) && b == 512LL << 20);
    ck_assert(parse_memory_size("1.5g", &b) && b == 3LL << 29);
    ck_assert(parse_memory_size("1000", &b) && b == 1000);
    ck_assert(!parse_memory_size("lots", &b));
    ck_assert(!parse_memory_size("-1G", &b));
    ck_assert(!parse_memory_size("16Q", &b));
}
END_TEST

// ---- subcommands with bad input: exit code, message, nothing written ---------------------------

static void check_nothing_written(void) {
    char p[600];
    snprintf(p, sizeof p, "%s/out", g_dir);
    ck_assert_msg(!at_exists(p), "%s was created by a failing command", p);
}

START_TEST(test_train_bad_input) {
    char err[4096];
    const char *a1[] = {"train", NULL};
    ck_assert_int_eq(at_run_capture(cmd_train, a1, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "-c CFG"), "%s", err);
    const char *a2[] = {"train", "-c", "/nonexistent/cfg.json", NULL};
    ck_assert_int_eq(at_run_capture(cmd_train, a2, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "/nonexistent/cfg.json"), "%s", err);
    const char *a3[] = {"train", "-c", g_cfg, "-o", "Global.epoch_nmu=3", NULL};
    ck_assert_int_eq(at_run_capture(cmd_train, a3, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "did you mean epoch_num"), "%s", err);
    const char *a4[] = {"train", "-c", g_cfg, "-o", "Global.epoch_num=true", NULL};
    ck_assert_int_eq(at_run_capture(cmd_train, a4, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "Global.epoch_num"), "%s", err);
    char ov[700];
    snprintf(ov, sizeof ov, "Train.dataset.label_file_list=[\"%s/missing.txt\"]", g_dir);
    const char *a5[] = {"train", "-c", g_cfg, "-o", ov, NULL};
    ck_assert_int_eq(at_run_capture(cmd_train, a5, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "missing.txt"), "%s", err);
    const char *a6[] = {"train", "-c", g_cfg, "--bogus", NULL};
    ck_assert_int_eq(at_run_capture(cmd_train, a6, err, sizeof err), 2);
    const char *a7[] = {"train", "-c", g_cfg, "-o", "Global.checkpoints=/nonexistent/latest", NULL};
    ck_assert_int_eq(at_run_capture(cmd_train, a7, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "/nonexistent/latest"), "%s", err);
    const char *a8[] = {"train", "-c", g_cfg, "-o", "Global.pretrained_model=/nonexistent/w.safetensors", NULL};
    ck_assert_int_eq(at_run_capture(cmd_train, a8, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "pretrained_model"), "%s", err);
    check_nothing_written();
}
END_TEST

START_TEST(test_eval_predict_bad_weights) {
    char err[4096], junk[600], trunc[600];
    snprintf(junk, sizeof junk, "%s/junk.safetensors", g_dir);
    at_write_text(junk, "this is not a safetensors file at all");
    // A valid safetensors file with tensors of another model.
    snprintf(trunc, sizeof trunc, "%s/other.safetensors", g_dir);
    float v[4] = {1, 2, 3, 4};
    OcrNamedTensor t = {"backbone.unknown.weight", OCR_F32, 1, {4, 1, 1, 1}, v};
    ck_assert(ocr_safetensors_write(trunc, &t, 1, NULL, 0) == OCR_OK);
    const char *e1[] = {"eval", "-c", g_cfg, NULL};
    ck_assert_int_eq(at_run_capture(cmd_eval, e1, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "--weights"), "%s", err);
    const char *e2[] = {"eval", "-c", g_cfg, "--weights", "/nonexistent.safetensors", NULL};
    ck_assert_int_eq(at_run_capture(cmd_eval, e2, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "/nonexistent.safetensors"), "%s", err);
    const char *e3[] = {"eval", "-c", g_cfg, "--weights", junk, NULL};
    ck_assert_int_eq(at_run_capture(cmd_eval, e3, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "junk.safetensors"), "%s", err);
    const char *e4[] = {"eval", "-c", g_cfg, "--weights", trunc, NULL};
    ck_assert_int_eq(at_run_capture(cmd_eval, e4, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "other.safetensors"), "%s", err);
    const char *p1[] = {"predict", "-c", g_cfg, "--weights", junk, "x.png", NULL};
    ck_assert_int_eq(at_run_capture(cmd_predict, p1, err, sizeof err), 2);
    const char *p2[] = {"predict", "-c", g_cfg, "--weights", junk, NULL};
    ck_assert_int_eq(at_run_capture(cmd_predict, p2, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "IMAGE"), "%s", err);
    const char *p3[] = {"predict", "-c", g_cfg, "--weights", junk, "--batch", "0", "x.png", NULL};
    ck_assert_int_eq(at_run_capture(cmd_predict, p3, err, sizeof err), 2);
    check_nothing_written();
}
END_TEST

START_TEST(test_capacity_compare_bad_input) {
    char err[4096];
    const char *c1[] = {"capacity", "-c", g_cfg, NULL};
    ck_assert_int_eq(at_run_capture(cmd_capacity, c1, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "--memory"), "%s", err);
    const char *c2[] = {"capacity", "-c", g_cfg, "--memory", "lots", NULL};
    ck_assert_int_eq(at_run_capture(cmd_capacity, c2, err, sizeof err), 2);
    char out[600];
    snprintf(out, sizeof out, "%s/cmp", g_dir);
    const char *m1[] = {"compare", "-c", g_cfg, NULL};
    ck_assert_int_eq(at_run_capture(cmd_compare, m1, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "--out"), "%s", err);
    const char *m2[] = {"compare", "-c", g_cfg, "--out", out, "--dtypes", "float8", NULL};
    ck_assert_int_eq(at_run_capture(cmd_compare, m2, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "float8"), "%s", err);
    const char *m3[] = {"compare", "-c", g_cfg, "--out", out, "--batch", "max", NULL};
    ck_assert_int_eq(at_run_capture(cmd_compare, m3, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "--memory"), "%s", err);
    const char *m4[] = {"compare", "-c", g_cfg, "--out", out, "-o", "Eval.dataset.label_file_list=[\"/no/such\"]",
                        NULL};
    ck_assert_int_eq(at_run_capture(cmd_compare, m4, err, sizeof err), 2);
    ck_assert_msg(!at_exists(out), "compare wrote %s before failing", out);
    check_nothing_written();
}
END_TEST

// ---- checkpoints ---------------------------------------------------------------------------------

START_TEST(test_checkpoint_state_roundtrip_and_fallback) {
    CkptState s = {0};
    s.iter = 17;
    s.epoch = 2;
    s.batch_in_epoch = 3;
    s.updates = 15;
    s.model_step = 12345678901234ull;
    s.seed = 42;
    s.amp.scaler.scale = 3.0517578125e-05f * 3;
    s.amp.scaler.good_steps = 4;
    s.amp.scaler.steps = 17;
    s.amp.scaler.overflow_steps = 2;
    s.amp.step = 17;
    s.amp.skipped_steps = 2;
    snprintf(s.amp_level, sizeof s.amp_level, "O2");
    snprintf(s.amp_dtype, sizeof s.amp_dtype, "float16");
    s.best_acc = 0.25;
    s.best_iter = 10;
    s.last_loss = 1.0 / 3.0;
    char dir[600], real[1200];
    snprintf(dir, sizeof dir, "%s/ck/latest", g_dir);
    // A model is needed for the weights file: the smallest one of the test config.
    OcrConfig *cfg;
    RunConfig rc;
    ck_assert(run_config_load(&cfg, &rc, g_cfg, NULL, 0, 0) == OCR_OK);
    OcrModel *m;
    ck_assert(ocr_model_from_config(&m, cfg) == OCR_OK);
    Optimizer o;
    ck_assert(optim_init(&o, &rc.optim, ocr_model_params(m)) == OCR_OK);
    o.updates = 15;
    for (int64_t i = 0; i < ocr_model_params(m)->numel; i++) o.m_buf[i] = (float)i * 0.5f;
    ck_assert_msg(ckpt_save(dir, m, &o, NULL, &s) == OCR_OK, "%s", ocr_last_error());
    ck_assert(ckpt_save(dir, m, &o, NULL, &s) == OCR_OK);  // over an existing one
    ck_assert(ckpt_resolve(dir, real, sizeof real) == OCR_OK && strcmp(real, dir) == 0);
    CkptState r;
    ck_assert(ckpt_load_state(real, &r) == OCR_OK);
    ck_assert_int_eq(r.iter, 17);
    ck_assert_int_eq(r.batch_in_epoch, 3);
    ck_assert(r.model_step == 12345678901234ull);
    ck_assert(r.amp.scaler.scale == s.amp.scaler.scale);
    ck_assert(r.last_loss == s.last_loss);
    ck_assert_str_eq(r.amp_dtype, "float16");
    Optimizer o2;
    ck_assert(optim_init(&o2, &rc.optim, ocr_model_params(m)) == OCR_OK);
    ck_assert(ckpt_load_optimizer(real, &o2, NULL, ocr_model_params(m)) == OCR_OK);
    ck_assert_int_eq(o2.updates, 15);
    ck_assert(memcmp(o.m_buf, o2.m_buf, (size_t)ocr_model_params(m)->numel * 4) == 0);
    // A kill between the two renames leaves only <dir>.old: it is found.
    char old[700];
    snprintf(old, sizeof old, "%s.old", dir);
    ck_assert(rename(dir, old) == 0);
    ck_assert(ckpt_resolve(dir, real, sizeof real) == OCR_OK && strcmp(real, old) == 0);
    // A file inside the directory names the directory.
    char inside[800];
    snprintf(inside, sizeof inside, "%s/state.json", old);
    ck_assert(ckpt_resolve(inside, real, sizeof real) == OCR_OK && strcmp(real, old) == 0);
    // A torn state file is a clear error.
    at_write_text(inside, "{\"format\": \"ocrtrain-train-state\", \"version\": 1");
    ck_assert_int_eq(ckpt_load_state(old, &r), OCR_ERR_FORMAT);
    optim_free(&o);
    optim_free(&o2);
    ocr_model_free(m);
    ocr_config_free(cfg);
}
END_TEST

// ---- report schema ----------------------------------------------------------------------------------

static void fake_run(ReportRun *r, const char *name, const char *level, const char *dtype, double acc, int skipped) {
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->r.config.amp_level, sizeof r->r.config.amp_level, "%s", level);
    snprintf(r->r.config.amp_dtype, sizeof r->r.config.amp_dtype, "%s", dtype);
    r->base_lr = 1e-3;
    r->r.config.batch_size = 16;
    r->r.config.lr_scale = 1;
    r->r.history.n_steps = r->r.history.cap_steps = 40;
    r->r.history.steps = calloc(40, sizeof *r->r.history.steps);
    for (int i = 0; i < 40; i++) {
        r->r.history.steps[i].iter = i;
        r->r.history.steps[i].loss = 50.0f / (float)(i + 1);
        r->r.history.steps[i].scale = skipped && i < skipped ? 65536.0f / (float)(1 << i) : 1024.0f;
        r->r.history.steps[i].skipped = i < skipped;
        r->r.history.steps[i].step_seconds = 0.1f;
    }
    r->r.history.n_evals = r->r.history.cap_evals = 2;
    r->r.history.evals = calloc(2, sizeof *r->r.history.evals);
    r->r.history.evals[0] = (EvalRecord){20, acc / 2, 0.5, 0.5};
    r->r.history.evals[1] = (EvalRecord){40, acc, 0.9, 0.1};
    r->r.throughput.samples_per_s = 100;
    r->r.throughput.median_step_s = 0.1;
    r->r.throughput.epoch_seconds = 2;
    r->r.outcome.final_loss = 1.25;
    r->r.amp.skipped_steps = skipped;
    r->r.amp.final_scale = 1024;
    r->r.memory.stats.peak_total = strcmp(level, "O0") == 0 ? 1000000 : 600000;
    r->r.memory.stats.peak[OCR_MEM_ACTIVATIONS] = r->r.memory.stats.peak_total / 2;
    r->r.outcome.has_final_eval = 1;
    r->r.outcome.acc = acc;
    r->r.outcome.norm_edit_dis = 0.9;
    r->r.outcome.cer = 0.1;
    r->r.outcome.eval_samples = 1000;
    if (skipped) {
        r->r.amp.n_overflow_layers = 1;
        snprintf(r->r.amp.overflow_layer[0], sizeof r->r.amp.overflow_layer[0], "head.fc<x>");
        r->r.amp.overflow_count[0] = skipped;
    }
}

START_TEST(test_report_schema_and_verdict) {
    Report *rep = calloc(1, sizeof *rep);
    rep->config_path = "configs/demo.json";
    snprintf(rep->command, sizeof rep->command, "ocrtrain compare -c configs/demo.json --out x");
    snprintf(rep->created_utc, sizeof rep->created_utc, "2025-01-01T00:00:00Z");
    rep->tolerance = 0.005;
    rep->epochs = 1;
    snprintf(rep->device, sizeof rep->device, "cpu");
    snprintf(rep->algorithm, sizeof rep->algorithm, "SVTR_LCNet");
    rep->n_runs = 3;
    fake_run(&rep->runs[0], "fp32", "O0", "float32", 0.800, 0);
    fake_run(&rep->runs[1], "fp16-o2", "O2", "float16", 0.797, 3);
    fake_run(&rep->runs[2], "bf16-o2", "O2", "bfloat16", 0.790, 0);
    // Per-line results: 2000 lines, the baseline reads 1600. fp16-o2 loses 2 and gains 2 (pass at
    // ±0.005: Newcombe's interval is about ±0.0016 wide here), bf16-o2 loses 40 and gains 5
    // (regression). Every line has 10 reference characters; a wrong line has 1 edit.
    enum { NL = 2000 };
    EvalLine *base = calloc(NL, sizeof *base), *l1 = calloc(NL, sizeof *l1), *l2 = calloc(NL, sizeof *l2);
    for (int i = 0; i < NL; i++) {
        int b = i < 1600, c1 = (i >= 2 && i < 1602), c2 = (i >= 40 && i < 1605);
        EvalLine *l[3] = {&base[i], &l1[i], &l2[i]};
        int ok[3] = {b, c1, c2};
        for (int k = 0; k < 3; k++) {
            l[k]->scored = 1;
            l[k]->correct = (uint8_t)ok[k];
            l[k]->edits = !ok[k];
            l[k]->ref_chars = 10;
        }
    }
    base[NL - 1].scored = 0;  // an unreadable image: left out of every pair
    l1[NL - 1].scored = l2[NL - 1].scored = 0;
    rep->cer_tolerance = 0.005;
    rep->bootstrap_seed = 1024;
    ck_assert(report_pair(&rep->runs[1].paired, base, l1, NL, 0.005, 0.005, 1024) == OCR_OK);
    ck_assert(report_pair(&rep->runs[2].paired, base, l2, NL, 0.005, 0.005, 1024) == OCR_OK);
    const ReportPaired *p1 = &rep->runs[1].paired, *p2 = &rep->runs[2].paired;
    ck_assert_int_eq(p1->lines, NL - 1);
    ck_assert(p1->table.both_right == 1598 && p1->table.base_only == 2 && p1->table.run_only == 2 &&
              p1->table.both_wrong == NL - 1 - 1602);
    ck_assert_int_eq(p1->acc_verdict, PAIRED_PASS);
    ck_assert_int_eq(p1->cer_verdict, PAIRED_PASS);
    ck_assert_int_eq(report_run_verdict(rep, 1), PAIRED_PASS);
    ck_assert(p2->table.base_only == 40 && p2->table.run_only == 5);
    ck_assert_int_eq(p2->acc_verdict, PAIRED_REGRESSION);
    // 35 more edits in 19,990 characters: +0.0018 CER, inside ±0.005; the run regresses on accuracy.
    ck_assert_int_eq(p2->cer_verdict, PAIRED_PASS);
    ck_assert_int_eq(p2->verdict, PAIRED_REGRESSION);
    ck_assert(fabs(p2->cer_delta - 35.0 / 19990.0) < 1e-15);
    ck_assert_int_eq(report_exit_code(rep), REPORT_EXIT_REGRESSION);
    char *text = report_json(rep);
    cJSON *root = cJSON_Parse(text);
    ck_assert_ptr_nonnull(root);
    ck_assert_str_eq(cJSON_GetObjectItem(root, "schema")->valuestring, REPORT_SCHEMA);
    ck_assert_int_eq(cJSON_GetObjectItem(root, "schema_version")->valueint, REPORT_SCHEMA_VERSION);
    const char *top[] = {"created_utc", "config", "command", "machine", "device", "build", "model", "dataset",
                         "settings", "runs", "comparisons", "verdict", NULL};
    for (int i = 0; top[i]; i++) ck_assert_msg(cJSON_HasObjectItem(root, top[i]), "missing %s", top[i]);
    cJSON *runs = cJSON_GetObjectItem(root, "runs");
    ck_assert_int_eq(cJSON_GetArraySize(runs), 3);
    const char *run_keys[] = {"name", "amp_level", "amp_dtype", "batch_size", "samples_per_s", "median_step_time_s",
                              "epoch_time_s", "peak_memory_bytes", "accuracy", "norm_edit_distance", "cer",
                              "final_loss", "skipped_steps", "final_loss_scale", "overflow_locations", "history", NULL};
    cJSON *r1 = cJSON_GetArrayItem(runs, 1);
    for (int i = 0; run_keys[i]; i++) ck_assert_msg(cJSON_HasObjectItem(r1, run_keys[i]), "run lacks %s", run_keys[i]);
    cJSON *mem = cJSON_GetObjectItem(r1, "peak_memory_bytes");
    ck_assert(cJSON_GetObjectItem(mem, "total")->valuedouble == 600000);
    ck_assert(cJSON_HasObjectItem(mem, "activations") && cJSON_HasObjectItem(mem, "master"));
    ck_assert_int_eq(cJSON_GetObjectItem(r1, "skipped_steps")->valueint, 3);
    cJSON *ov = cJSON_GetArrayItem(cJSON_GetObjectItem(r1, "overflow_locations"), 0);
    ck_assert_str_eq(cJSON_GetObjectItem(ov, "layer")->valuestring, "head.fc<x>");
    cJSON *hist = cJSON_GetObjectItem(r1, "history");
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(hist, "loss")), 40);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(hist, "skipped_iters")), 3);
    cJSON *cmp = cJSON_GetObjectItem(root, "comparisons");
    ck_assert_int_eq(cJSON_GetArraySize(cmp), 2);
    cJSON *c0 = cJSON_GetArrayItem(cmp, 0);
    ck_assert(fabs(cJSON_GetObjectItem(c0, "accuracy_delta")->valuedouble - (-0.003)) < 1e-9);
    ck_assert(fabs(cJSON_GetObjectItem(c0, "peak_memory_ratio")->valuedouble - 0.6) < 1e-12);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(c0, "within_tolerance")));
    ck_assert_str_eq(cJSON_GetObjectItem(c0, "verdict")->valuestring, "pass");
    cJSON *pj = cJSON_GetObjectItem(c0, "paired");
    ck_assert_int_eq(cJSON_GetObjectItem(pj, "lines")->valueint, NL - 1);
    cJSON *tj = cJSON_GetObjectItem(pj, "table");
    ck_assert_int_eq(cJSON_GetObjectItem(tj, "both_right")->valueint, 1598);
    ck_assert_int_eq(cJSON_GetObjectItem(tj, "baseline_only_right")->valueint, 2);
    ck_assert_int_eq(cJSON_GetObjectItem(tj, "run_only_right")->valueint, 2);
    cJSON *aj = cJSON_GetObjectItem(pj, "accuracy");
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(aj, "ci95")), 2);
    ck_assert_str_eq(cJSON_GetObjectItem(aj, "method")->valuestring, "newcombe_hybrid_score");
    ck_assert(cJSON_HasObjectItem(aj, "mcnemar_exact_p") && cJSON_HasObjectItem(aj, "lines_needed"));
    ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(pj, "cer"), "verdict")->valuestring, "pass");
    cJSON *c1 = cJSON_GetArrayItem(cmp, 1);
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(c1, "within_tolerance")));
    ck_assert_str_eq(cJSON_GetObjectItem(c1, "verdict")->valuestring, "regression");
    cJSON *v = cJSON_GetObjectItem(root, "verdict");
    ck_assert_str_eq(cJSON_GetObjectItem(v, "status")->valuestring, "regression");
    ck_assert_int_eq(cJSON_GetObjectItem(v, "exit_code")->valueint, 3);
    ck_assert_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(v, "failing_runs"), 0)->valuestring, "bf16-o2");
    cJSON_Delete(root);
    free(text);
    // The three files; the HTML is one self-contained document with its charts inline.
    char dir[600], p[700];
    snprintf(dir, sizeof dir, "%s/rep", g_dir);
    ck_assert(ocr_make_dirs(dir) == OCR_OK);
    ck_assert_msg(report_write(rep, dir) == OCR_OK, "%s", ocr_last_error());
    char *html;
    size_t n;
    snprintf(p, sizeof p, "%s/report.html", dir);
    ck_assert(ocr_read_file(p, &html, &n) == OCR_OK);
    int svgs = 0;
    for (const char *s = html; (s = strstr(s, "<svg")); s++) svgs++;
    ck_assert_int_ge(svgs, 5);
    ck_assert_ptr_null(strstr(html, "<script"));
    ck_assert_ptr_null(strstr(html, "http://cdn"));
    ck_assert_ptr_null(strstr(html, "head.fc<x>"));  // escaped
    ck_assert_ptr_nonnull(strstr(html, "head.fc&lt;x&gt;"));
    ck_assert_ptr_nonnull(strstr(html, "both right"));
    free(html);
    snprintf(p, sizeof p, "%s/report.md", dir);
    ck_assert(ocr_read_file(p, &html, &n) == OCR_OK);
    ck_assert_ptr_nonnull(strstr(html, "REGRESSION (exit 3)"));
    ck_assert_ptr_nonnull(strstr(html, "| fp16-o2 | 1999 | 1598 |"));
    free(html);
    // A small set: 50 lines the baseline reads, bf16-o2 misses one (delta −0.02). Its interval spans
    // about [−0.10, +0.05]: inconclusive (exit 4), and the report says how many lines would decide.
    for (int i = 0; i < 50; i++) {
        base[i] = l2[i] = (EvalLine){.scored = 1, .correct = 1, .edits = 0, .ref_chars = 10};
        if (i == 7) l2[i] = (EvalLine){.scored = 1, .correct = 0, .edits = 1, .ref_chars = 10};
    }
    ck_assert(report_pair(&rep->runs[2].paired, base, l2, 50, 0.005, 0.005, 1024) == OCR_OK);
    ck_assert_int_eq(report_run_verdict(rep, 2), PAIRED_INCONCLUSIVE);
    ck_assert_int_eq(report_exit_code(rep), REPORT_EXIT_INCONCLUSIVE);
    ck_assert_int_gt(report_lines_needed(rep), 50);
    text = report_json(rep);
    root = cJSON_Parse(text);
    v = cJSON_GetObjectItem(root, "verdict");
    ck_assert_str_eq(cJSON_GetObjectItem(v, "status")->valuestring, "inconclusive");
    ck_assert_int_eq(cJSON_GetObjectItem(v, "exit_code")->valueint, REPORT_EXIT_INCONCLUSIVE);
    ck_assert_int_eq((int64_t)cJSON_GetObjectItem(v, "lines_needed")->valuedouble, report_lines_needed(rep));
    cJSON_Delete(root);
    free(text);
    // A pass when every run is: identical outputs on 1,999 lines (no discordant line, ±0.0019).
    ck_assert(report_pair(&rep->runs[2].paired, l1, l1, NL, 0.005, 0.005, 1024) == OCR_OK);
    ck_assert_int_eq(report_exit_code(rep), REPORT_EXIT_PASS);
    free(base);
    free(l1);
    free(l2);
    for (int i = 0; i < rep->n_runs; i++) train_result_free(&rep->runs[i].r);
    free(rep);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("app_cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 120);
    tcase_add_unchecked_fixture(tc, setup_data, NULL);
    tcase_add_test(tc, test_valid_config);
    tcase_add_test(tc, test_unknown_key_suggests);
    tcase_add_test(tc, test_wrong_type_and_range_name_the_key);
    tcase_add_test(tc, test_paddleocr_shorthands);
    tcase_add_test(tc, test_lr_schedules);
    tcase_add_test(tc, test_optimizer_param_rules);
    tcase_add_test(tc, test_memory_size_parsing);
    tcase_add_test(tc, test_predict_batch_width);
    tcase_add_test(tc, test_train_bad_input);
    tcase_add_test(tc, test_eval_predict_bad_weights);
    tcase_add_test(tc, test_capacity_compare_bad_input);
    tcase_add_test(tc, test_checkpoint_state_roundtrip_and_fallback);
    tcase_add_test(tc, test_report_schema_and_verdict);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(suite()); }

// PaddleOCR's configs as they are: a YAML config in PaddleOCR's layout (tests/core/data/
// paddle_ctc_rec.yml: anchors, aliases, merges, both boolean spellings) validates with its
// PaddleOCR-only keys accepted and listed; the command-line aliases PaddleOCR users type work
// with YAML; PaddleOCR's PP-OCRv4 ch MultiHead config trains as it is; an unknown guidance head
// and unknown keys are still rejected; and an LMDB dataset written by `ocrtrain pack --lmdb` trains.
#define _GNU_SOURCE  // memmem
#include <string.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "training/run_config.h"
#include "core/config.h"
#include "tests/training/training_test_util.h"

static char g_yml[1024];
static char *g_dir;
static char g_ov[6][1024];

static void setup(void) {
    snprintf(g_yml, sizeof g_yml, "%s/tests/core/data/paddle_ctc_rec.yml", OCR_SOURCE_DIR);
    g_dir = at_tmpdir();
    at_make_digits(g_dir, "train", 24, 3, 21);
    at_make_digits(g_dir, "eval", 8, 3, 22);
    // Only the data paths (and the digits dictionary) change, as a PaddleOCR user would do.
    snprintf(g_ov[0], sizeof g_ov[0], "Global.character_dict_path=%s/dict.txt", g_dir);
    snprintf(g_ov[1], sizeof g_ov[1], "Train.dataset.data_dir=%s/train", g_dir);
    snprintf(g_ov[2], sizeof g_ov[2], "Train.dataset.label_file_list=[%s/train/labels.txt]", g_dir);
    snprintf(g_ov[3], sizeof g_ov[3], "Eval.dataset.data_dir=%s/eval", g_dir);
    snprintf(g_ov[4], sizeof g_ov[4], "Eval.dataset.label_file_list=[%s/eval/labels.txt]", g_dir);
    snprintf(g_ov[5], sizeof g_ov[5], "Global.save_model_dir=%s/out", g_dir);
}

static void teardown(void) {
    ocr_test_remove_tree(g_dir);
    free(g_dir);
}

static int has_ignored(const OcrConfig *cfg, const char *key) {
    for (int i = 0; i < ocr_config_num_ignored(cfg); i++)
        if (strcmp(ocr_config_ignored(cfg, i, NULL), key) == 0) return 1;
    return 0;
}

// Loads g_yml through the command-line parser with the data overrides and `extra` arguments.
static ocr_status_t load_cli(const char *const *extra, OcrConfig **cfg, RunConfig *rc) {
    const char *args[40] = {"-c", g_yml, "-o"};
    int n = 3;
    for (int i = 0; i < 6; i++) args[n++] = g_ov[i];
    for (int i = 0; extra && extra[i]; i++) args[n++] = extra[i];
    CliConfigArgs ca = {0};
    for (int i = 0; i < n;) {
        int used = cli_take_config_arg(&ca, n, (char **)args, i);
        ck_assert_msg(used > 0, "argument %s: %s", args[i], used < 0 ? ocr_last_error() : "not taken");
        i += used;
    }
    ocr_status_t st = run_config_load(cfg, rc, ca.config, (const char *const *)ca.overrides, ca.n_overrides,
                                      RUN_NEED_TRAIN | RUN_NEED_EVAL);
    cli_config_args_free(&ca);
    return st;
}

START_TEST(test_yaml_config_validates_and_lists_ignored) {
    OcrConfig *cfg;
    RunConfig rc;
    ck_assert_msg(load_cli(NULL, &cfg, &rc) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(rc.epoch_num, 2);
    ck_assert_int_eq(rc.cal_metric_during_train, 1);
    ck_assert_int_eq(rc.use_space_char, 1);
    ck_assert_int_eq(rc.ignore_space, 0);  // Metric.ignore_space: False
    ck_assert_int_eq(rc.train.batch_size, 128);
    ck_assert_int_eq(rc.eval.batch_size, 128);  // an alias (*bs)
    ck_assert_int_eq(rc.eval.shuffle, 0);       // explicit over the merged loader
    ck_assert_int_eq(rc.eval.num_workers, 4);   // from the merged loader
    // The keys PaddleOCR reads that have no effect here: accepted and recorded, each once.
    const char *keys[] = {"Global.debug", "Global.calc_epoch_interval", "Global.print_mem_info",
                          "Global.distributed", "Global.d2s_train_image_shape", "Global.save_inference_dir",
                          "Global.infer_img", "Global.infer_mode", "Global.save_res_path", "Global.use_visualdl"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        ck_assert_msg(has_ignored(cfg, keys[i]), "%s not listed", keys[i]);
    ck_assert_int_eq(ocr_config_num_ignored(cfg), (int)(sizeof keys / sizeof keys[0]));
    const char *why;
    ocr_config_ignored(cfg, 0, &why);
    ck_assert(why && why[0]);
    ocr_config_free(cfg);
}
END_TEST

START_TEST(test_paddleocr_aliases_with_yaml) {
    OcrConfig *cfg;
    RunConfig rc;
    const char *a1[] = {"Global.use_amp=True", "Global.epoch_num=3", "--scale_loss", "1024", "--amp_level=O1",
                        "-p", "batch_range=[10,20];profile_path=/tmp/x", NULL};
    ck_assert_msg(load_cli(a1, &cfg, &rc) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(rc.use_amp, 1);
    ck_assert_int_eq(rc.epoch_num, 3);
    double scale;
    const char *level, *prof;
    ck_assert_int_eq(ocr_config_get_double(cfg, "Global.scale_loss", 0, &scale), OCR_OK);
    ck_assert_double_eq(scale, 1024);
    ck_assert_int_eq(ocr_config_get_string(cfg, "Global.amp_level", NULL, &level), OCR_OK);
    ck_assert_str_eq(level, "O1");
    ck_assert_int_eq(ocr_config_get_string(cfg, "profiler_options", NULL, &prof), OCR_OK);
    ck_assert_str_eq(prof, "batch_range=[10,20];profile_path=/tmp/x");
    ck_assert(has_ignored(cfg, "profiler_options"));
    ocr_config_free(cfg);
    // --use_amp with a Python boolean, and the YAML 1.1 spelling through -o.
    const char *a2[] = {"--use_amp", "False", "-o", "Global.use_dynamic_loss_scaling=yes", NULL};
    ck_assert_msg(load_cli(a2, &cfg, &rc) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(rc.use_amp, 0);
    int dyn;
    ck_assert_int_eq(ocr_config_get_bool(cfg, "Global.use_dynamic_loss_scaling", 0, &dyn), OCR_OK);
    ck_assert_int_eq(dyn, 1);
    ocr_config_free(cfg);
}
END_TEST

START_TEST(test_unknown_keys_still_rejected) {
    OcrConfig *cfg;
    RunConfig rc;
    const char *a1[] = {"Global.epoch_nmu=3", NULL};
    ck_assert_int_eq(load_cli(a1, &cfg, &rc), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "unknown key Global.epoch_nmu (did you mean epoch_num?)"), "%s",
                  ocr_last_error());
    // A typo of an accepted no-effect key is suggested too.
    const char *a2[] = {"Global.print_mem_inf=true", NULL};
    ck_assert_int_eq(load_cli(a2, &cfg, &rc), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "(did you mean print_mem_info?)"), "%s", ocr_last_error());
    // A no-effect key of Global is not accepted elsewhere.
    const char *a3[] = {"Optimizer.debug=false", NULL};
    ck_assert_int_eq(load_cli(a3, &cfg, &rc), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "unknown key Optimizer.debug"), "%s", ocr_last_error());
}
END_TEST

START_TEST(test_multihead_unknown_head_is_a_clear_error) {
    // The official heads are built (NRTRHead, SARHead); any other guidance head names itself.
    OcrConfig *cfg;
    RunConfig rc;
    const char *a[] = {"Architecture.Neck=null",
                       "Architecture.Head={name: MultiHead, head_list: [{CTCHead: {Neck: {name: svtr, dims: 64, "
                       "depth: 2, hidden_dims: 120, use_guide: True}, Head: {fc_decay: 0.00001}}}, {AttnHead: "
                       "{hidden_size: 96}}]}",
                       NULL};
    ck_assert_int_eq(load_cli(a, &cfg, &rc), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "head_list") && strstr(ocr_last_error(), "AttnHead"), "%s",
                  ocr_last_error());
}
END_TEST

// The lines of dir/metrics.jsonl that carry a MultiLoss split (loss_ctc and loss_gtc, both finite
// and loss = their sum within float rounding).
static int count_multiloss_lines(const char *dir) {
    char p[1200];
    snprintf(p, sizeof p, "%s/metrics.jsonl", dir);
    char *text;
    size_t size;
    ck_assert_msg(ocr_read_file(p, &text, &size) == OCR_OK, "%s", ocr_last_error());
    int n = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        ck_assert_msg(o != NULL, "not JSON: %s", line);
        const cJSON *l = cJSON_GetObjectItem(o, "loss"), *c = cJSON_GetObjectItem(o, "loss_ctc"),
                    *g = cJSON_GetObjectItem(o, "loss_gtc");
        if (cJSON_IsNumber(l) && cJSON_IsNumber(c) && cJSON_IsNumber(g)) {
            ck_assert(isfinite(c->valuedouble) && isfinite(g->valuedouble) && g->valuedouble > 0);
            // metrics.jsonl writes 7 significant digits of each value
            ck_assert_msg(fabs(l->valuedouble - c->valuedouble - g->valuedouble) <= 2e-6 * fabs(l->valuedouble),
                          "%s", line);
            n++;
        }
        cJSON_Delete(o);
    }
    free(text);
    return n;
}

// Trains `steps` MultiHead steps from a PaddleOCR .yml with only the data, the dictionary and the batch
// overridden; one MultiLoss line per step, and the checkpoint holds the guidance branch under
// PaddleOCR's names next to the CTC branch.
static void train_paddle_multihead_yaml(const char *yml, int steps) {
    char err[8192], out[600], nsteps[16];  // at_read_losses builds paths of at most 700 bytes
    snprintf(nsteps, sizeof nsteps, "%d", steps);
    const char *a[] = {"train", "-c", yml, "-o", g_ov[0], g_ov[1], g_ov[2], g_ov[3], g_ov[4], g_ov[5],
                       "Train.sampler.first_bs=2", "Train.loader.num_workers=1", "Eval.loader.batch_size_per_card=8",
                       "--max-steps", nsteps, NULL};
    int rc = at_run_capture(cmd_train, a, err, sizeof err);
    ck_assert_msg(rc == 0, "train -c %s: exit %d: %s", yml, rc, err);
    snprintf(out, sizeof out, "%.580s/out", g_dir);
    int n;
    double *losses = at_read_losses(out, &n, NULL);
    ck_assert_int_eq(n, steps);
    free(losses);
    ck_assert_int_eq(count_multiloss_lines(out), steps);
    char latest[800];
    snprintf(latest, sizeof latest, "%s/latest/model.safetensors", out);
    char *bytes;
    size_t size;
    ck_assert_msg(ocr_read_file(latest, &bytes, &size) == OCR_OK, "%s", ocr_last_error());
    ck_assert_msg(memmem(bytes, size, "head.gtc_head.", 14) && memmem(bytes, size, "head.ctc_head.", 14),
                  "%s: no MultiHead names in %s", yml, latest);
    free(bytes);
}

START_TEST(test_ppocrv4_multihead_yaml_trains) {
    // PaddleOCR's ch_PP-OCRv4_rec.yml (keys and values as PaddleOCR ships them: MultiHead CTC +
    // NRTR, MultiLoss, MultiLabelEncode with NRTRLabelEncode, MultiScaleDataSet + its sampler,
    // RecConAug, the &bs anchor).
    char yml[1024];
    snprintf(yml, sizeof yml, "%s/tests/training/data/ppocrv4_ch_multihead_rec.yml", OCR_SOURCE_DIR);
    train_paddle_multihead_yaml(yml, 2);
}
END_TEST

// PaddleOCR 3.x's PP-OCRv5 mobile, PP-OCRv6 tiny and PP-OCRv6 small .yml files (keys and values as
// PaddleOCR ships them: tests/models/data/ppocrv{5_mobile,6_tiny,6_small}_rec.yml).
static const char *const V5V6_YAMLS[] = {"ppocrv5_mobile_rec.yml", "ppocrv6_tiny_rec.yml", "ppocrv6_small_rec.yml"};

START_TEST(test_ppocr_v5_v6_yaml_trains) {
    char yml[1024];
    snprintf(yml, sizeof yml, "%s/tests/models/data/%s", OCR_SOURCE_DIR, V5V6_YAMLS[_i]);
    train_paddle_multihead_yaml(yml, 1);
}
END_TEST

// Runs a command in-process with stdout captured into out (NUL-terminated, truncated to cap).
static int run_stdout(at_cmd_fn fn, const char *const *args, char *out, size_t cap) {
    char path[1024];
    int fd = ocr_test_tmpfile(path, sizeof path, "ocr_app_stdout_");
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    int rc = at_run(fn, args);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    lseek(fd, 0, SEEK_SET);
    ssize_t n = read(fd, out, cap - 1);
    out[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    return rc;
}

START_TEST(test_train_from_lmdb) {
    // The digits set as an LMDB (pack --lmdb), then two training steps from it.
    char cfg[1024], lmdb[1024], ov[1200], err[8192];
    snprintf(cfg, sizeof cfg, "%s/cfg.json", g_dir);
    at_write_config(cfg, g_dir, 64, 8, "");
    snprintf(lmdb, sizeof lmdb, "%s/train_lmdb", g_dir);
    const char *pack[] = {"pack", "-c", cfg, "--lmdb", lmdb, NULL};
    ck_assert_int_eq(at_run_capture(cmd_pack, pack, err, sizeof err), 0);
    snprintf(ov, sizeof ov, "Train.dataset.data_dir=%s", lmdb);
    const char *train[] = {"train", "-c", cfg, "-o", "Train.dataset.name=LMDBDataSet", ov, "--max-steps", "2", NULL};
    int rc = at_run_capture(cmd_train, train, err, sizeof err);
    ck_assert_msg(rc == 0, "train from LMDB: exit %d: %s", rc, err);
    char out[600];  // at_read_losses builds paths of at most 700 bytes
    snprintf(out, sizeof out, "%.580s/out", g_dir);
    int n;
    double *losses = at_read_losses(out, &n, NULL);
    ck_assert_int_eq(n, 2);
    ck_assert(isfinite(losses[0]) && isfinite(losses[1]));
    free(losses);
    // Evaluation of the Eval split as an LMDB scores the same lines with the same results.
    char eval_lmdb[1024], ev[1200], wts[700];
    snprintf(eval_lmdb, sizeof eval_lmdb, "%s/eval_lmdb", g_dir);
    const char *pack_eval[] = {"pack", "-c", cfg, "--section", "Eval", "--lmdb", eval_lmdb, NULL};
    ck_assert_int_eq(at_run_capture(cmd_pack, pack_eval, err, sizeof err), 0);
    snprintf(ev, sizeof ev, "Eval.dataset.data_dir=%s", eval_lmdb);
    snprintf(wts, sizeof wts, "%s/latest", out);
    static char js[1 << 16], jl[1 << 16];
    const char *e1[] = {"eval", "-c", cfg, "--weights", wts, "--json", NULL};
    const char *e2[] = {"eval", "-c", cfg, "--weights", wts, "--json", "-o", "Eval.dataset.name=LMDBDataSet", ev, NULL};
    ck_assert_int_eq(run_stdout(cmd_eval, e1, js, sizeof js), 0);
    ck_assert_int_eq(run_stdout(cmd_eval, e2, jl, sizeof jl), 0);
    cJSON *a = cJSON_Parse(js), *b = cJSON_Parse(jl);
    ck_assert_msg(a && b, "eval output is not JSON: %.200s / %.200s", js, jl);
    const char *keys[] = {"samples", "accuracy", "norm_edit_distance", "cer", "skipped"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const cJSON *x = cJSON_GetObjectItem(a, keys[i]), *y = cJSON_GetObjectItem(b, keys[i]);
        ck_assert_msg(cJSON_IsNumber(x) && cJSON_IsNumber(y) && x->valuedouble == y->valuedouble, "%s: %g vs %g",
                      keys[i], x ? x->valuedouble : -1, y ? y->valuedouble : -1);
    }
    ck_assert_double_eq(cJSON_GetObjectItem(b, "samples")->valuedouble, 8);
    cJSON_Delete(a);
    cJSON_Delete(b);
    // A missing LMDB folder is a config error before anything is written.
    ocr_test_remove_tree(out);
    snprintf(ov, sizeof ov, "Train.dataset.data_dir=%s/nope", g_dir);
    const char *bad[] = {"train", "-c", cfg, "-o", "Train.dataset.name=LMDBDataSet", ov, NULL};
    ck_assert_int_eq(at_run_capture(cmd_train, bad, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "LMDB folder") && strstr(err, "nope"), "%s", err);
    ck_assert(!at_exists(out));
}
END_TEST

START_TEST(test_info_lists_ignored_keys) {
    static char out[1 << 20];
    const char *a[] = {"info", "-c", g_yml, "--json", "-o", g_ov[0], "Global.use_npu=false", "-p", "x=1", NULL};
    ck_assert_int_eq(run_stdout(cmd_info, a, out, sizeof out), 0);
    cJSON *j = cJSON_Parse(out);
    ck_assert_msg(j != NULL, "not JSON: %.200s", out);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(j, "valid_for_training")));
    const cJSON *ig = cJSON_GetObjectItem(j, "ignored_keys");
    ck_assert_int_eq(cJSON_GetArraySize(ig), 12);  // the fixture's 10, use_npu and profiler_options
    int npu = 0, prof = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ig) {
        const char *k = cJSON_GetObjectItem(e, "key")->valuestring;
        ck_assert(cJSON_GetObjectItem(e, "reason")->valuestring[0]);
        npu += strcmp(k, "Global.use_npu") == 0;
        prof += strcmp(k, "profiler_options") == 0;
    }
    ck_assert(npu == 1 && prof == 1);
    cJSON_Delete(j);
    // The text form lists them under a heading.
    const char *b[] = {"info", "-c", g_yml, "-o", g_ov[0], NULL};
    ck_assert_int_eq(run_stdout(cmd_info, b, out, sizeof out), 0);
    ck_assert_msg(strstr(out, "accepted with no effect here (10):") && strstr(out, "Global.print_mem_info"), "%s",
                  out);
}
END_TEST

static Suite *paddle_yaml_suite(void) {
    Suite *s = suite_create("app_paddle_yaml");
    TCase *tc = tcase_create("paddle_yaml");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_yaml_config_validates_and_lists_ignored);
    tcase_add_test(tc, test_paddleocr_aliases_with_yaml);
    tcase_add_test(tc, test_unknown_keys_still_rejected);
    tcase_add_test(tc, test_multihead_unknown_head_is_a_clear_error);
    tcase_add_test(tc, test_ppocrv4_multihead_yaml_trains);
    tcase_add_loop_test(tc, test_ppocr_v5_v6_yaml_trains, 0, 3);
    tcase_add_test(tc, test_train_from_lmdb);
    tcase_add_test(tc, test_info_lists_ignored_keys);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(paddle_yaml_suite()); }

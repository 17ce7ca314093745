// The general evaluation set (EvalGeneral): scored wherever Eval is, so that what fine-tuning
// costs on general text is reported next to what it gains on the target data. `train` scores both
// sets before the first step (Global.pretrained_model) and at the end and says the change in one
// sentence; `compare` scores the general set for every leg × seed run (lines_general.tsv), gives
// its seed-aware verdicts (exact match and spaces ignored) and the pretrained start on both sets;
// a reused run without the general lines is rescored from its saved weights; a general line with a
// character outside the dictionary, and one whose image is missing, are counted as Eval's are.
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>

#include "cli/commands.h"
#include "tests/training/training_test_util.h"

static char *g_dir;
static char g_cfg[512];
static char g_pretrained[700];

// at_run with stdout captured into *out (malloc'd).
static int run_stdout(at_cmd_fn fn, const char *const *args, char **out) {
    char path[1024];
    int fd = ocr_test_tmpfile(path, sizeof path, "ocr_general_stdout_");
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    int rc = at_run(fn, args);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    close(fd);
    size_t size;
    ck_assert(ocr_read_file(path, out, &size) == OCR_OK);
    unlink(path);
    return rc;
}

static cJSON *read_json(const char *path) {
    char *text;
    size_t size;
    ck_assert_msg(ocr_read_file(path, &text, &size) == OCR_OK, "%s", ocr_last_error());
    cJSON *o = cJSON_Parse(text);
    free(text);
    ck_assert_ptr_nonnull(o);
    return o;
}

// The digits task plus dir/general: 12 lines of up to 3 digits, one line whose label has a letter
// (outside the digits dictionary) and one whose image is missing; the config gets an EvalGeneral
// section over it (Eval's schema), and a pretrained model is made by a short first training.
static void setup_data(void) {
    g_dir = at_setup_digits(g_cfg, sizeof g_cfg, "\"epoch_num\": 1,");
    at_make_digits(g_dir, "general", 12, 3, 13);
    char p[1024], *text;
    size_t size;
    snprintf(p, sizeof p, "%s/general/labels.txt", g_dir);
    ck_assert(ocr_read_file(p, &text, &size) == OCR_OK);
    char *more = malloc(size + 128);
    snprintf(more, size + 128, "%simages/00000.png\t1x2\nimages/missing.png\t42\n", text);
    at_write_text(p, more);
    free(more);
    free(text);
    cJSON *cfg = read_json(g_cfg);
    cJSON *general = cJSON_Duplicate(cJSON_GetObjectItem(cfg, "Eval"), 1);
    cJSON *ds = cJSON_GetObjectItem(general, "dataset");
    snprintf(p, sizeof p, "%s/general", g_dir);
    cJSON_ReplaceItemInObject(ds, "data_dir", cJSON_CreateString(p));
    snprintf(p, sizeof p, "%s/general/labels.txt", g_dir);
    cJSON *lf = cJSON_CreateArray();
    cJSON_AddItemToArray(lf, cJSON_CreateString(p));
    cJSON_ReplaceItemInObject(ds, "label_file_list", lf);
    cJSON_AddItemToObject(cfg, "EvalGeneral", general);
    char *out = cJSON_Print(cfg);
    at_write_text(g_cfg, out);
    free(out);
    cJSON_Delete(cfg);
    // The "pretrained" weights: a few steps from scratch.
    char ov_out[800], err[16384];
    snprintf(ov_out, sizeof ov_out, "Global.save_model_dir=%s/pre", g_dir);
    const char *a[] = {"train", "-c", g_cfg, "--max-steps", "3", "-o", ov_out, NULL};
    ck_assert_msg(at_run_capture(cmd_train, a, err, sizeof err) == 0, "%s", err);
    snprintf(g_pretrained, sizeof g_pretrained, "%s/pre/latest/model.safetensors", g_dir);
    ck_assert_msg(at_exists(g_pretrained), "%s missing", g_pretrained);
}

// `train` from pretrained weights: both sets scored before the first step and at the end,
// metrics.jsonl's lines carry the general set (both accuracies, the bad lines counted), and the
// change is said in one sentence.
START_TEST(test_train_scores_both_sets) {
    char ov_w[800], ov_out[800], *out = NULL;
    snprintf(ov_w, sizeof ov_w, "Global.pretrained_model=%s", g_pretrained);
    snprintf(ov_out, sizeof ov_out, "Global.save_model_dir=%s/ft", g_dir);
    const char *a[] = {"train", "-c", g_cfg, "--max-steps", "2", "-o", ov_w, ov_out, NULL};
    int rc = run_stdout(cmd_train, a, &out);
    ck_assert_msg(rc == 0, "train exited %d: %s", rc, out);
    ck_assert_msg(strstr(out, "From the pretrained weights") && strstr(out, "target set (Eval)") &&
                      strstr(out, "general set (EvalGeneral)") && strstr(out, "points"),
                  "%s", out);
    free(out);
    char p[800];
    snprintf(p, sizeof p, "%s/ft/metrics.jsonl", g_dir);
    char *text;
    size_t size;
    ck_assert(ocr_read_file(p, &text, &size) == OCR_OK);
    int starts = 0, generals = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        ck_assert_ptr_nonnull(o);
        const cJSON *g = cJSON_GetObjectItem(o, "eval_general");
        if (g) {
            generals++;
            ck_assert(cJSON_IsNumber(cJSON_GetObjectItem(g, "acc_exact")));
            ck_assert(cJSON_IsNumber(cJSON_GetObjectItem(g, "acc_nospace")));
            ck_assert_int_eq(cJSON_GetObjectItem(g, "unknown_chars")->valueint, 1);
            ck_assert_int_eq(cJSON_GetObjectItem(g, "unreadable")->valueint, 1);
            ck_assert_int_eq(cJSON_GetObjectItem(g, "samples")->valueint, 13);  // 12 + the letter line
            ck_assert(cJSON_IsNumber(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "eval"), "acc_exact")));
        }
        if (cJSON_GetObjectItem(o, "start")) {
            starts++;
            ck_assert_ptr_nonnull(g);
        }
        cJSON_Delete(o);
    }
    free(text);
    ck_assert_int_eq(starts, 1);
    ck_assert_int_ge(generals, 2);  // the start and the end
}
END_TEST

static const cJSON *obj(const cJSON *o, const char *k) {
    const cJSON *x = cJSON_GetObjectItem(o, k);
    ck_assert_msg(x != NULL, "no %s", k);
    return x;
}

// `compare` at two seeds: the general set per run and seed, its verdicts next to the target's, the
// start on both sets, the summary sentence; then resumed with one run's general lines gone
// (rescored from its saved weights), then with its weights gone too (refused: train it again).
START_TEST(test_compare_reports_general) {
    char out[600], err[32768], ov_w[800];
    snprintf(out, sizeof out, "%s/cmp_general", g_dir);
    snprintf(ov_w, sizeof ov_w, "Global.pretrained_model=%s", g_pretrained);
    const char *a[] = {"compare", "-c", g_cfg, "--out", out, "--dtypes", "bfloat16", "--seeds", "2", "--max-steps", "2",
                       "-o", ov_w, NULL};
    int rc = at_run_capture(cmd_compare, a, err, sizeof err);
    ck_assert_msg(rc == 0 || rc == 3 || rc == 4, "compare exited %d: %s", rc, err);
    char p[800];
    snprintf(p, sizeof p, "%s/report.json", out);
    cJSON *o = read_json(p);
    ck_assert_int_ge(obj(o, "schema_version")->valueint, 4);
    const cJSON *start = obj(o, "start");
    ck_assert(cJSON_IsNumber(obj(start, "accuracy_exact")) && cJSON_IsNumber(obj(start, "accuracy_nospace")));
    const cJSON *sg = obj(start, "general");
    ck_assert(cJSON_IsNumber(obj(sg, "accuracy_exact")) && cJSON_IsNumber(obj(sg, "accuracy_nospace")));
    // The gain next to the forgetting, per run: both sets, both accuracies, their change.
    const cJSON *gen = obj(o, "general");
    ck_assert_int_eq(obj(gen, "lines")->valueint, 14);
    const cJSON *gr = obj(gen, "runs");
    ck_assert_int_eq(cJSON_GetArraySize(gr), 2);
    for (int i = 0; i < 2; i++) {
        const cJSON *r = cJSON_GetArrayItem(gr, i);
        ck_assert_int_eq(obj(r, "seeds_scored")->valueint, 2);
        const cJSON *t = obj(r, "target"), *g = obj(r, "general");
        const char *keys[4] = {"accuracy_exact", "accuracy_nospace", "change_exact", "change_nospace"};
        for (int k = 0; k < 4; k++) ck_assert(cJSON_IsNumber(obj(t, keys[k])) && cJSON_IsNumber(obj(g, keys[k])));
        ck_assert(fabs(obj(g, "change_exact")->valuedouble -
                       (obj(g, "accuracy_exact")->valuedouble - obj(sg, "accuracy_exact")->valuedouble)) < 1e-12);
        const char *sum = obj(r, "summary")->valuestring;
        ck_assert_msg(strstr(sum, "target set (Eval)") && strstr(sum, "general text (EvalGeneral)"), "%s", sum);
    }
    // Every seed's run scored the general set.
    const cJSON *runs = obj(o, "runs");
    for (int i = 0; i < 2; i++) {
        const cJSON *run = cJSON_GetArrayItem(runs, i);
        const cJSON *gl = obj(run, "general_lines");
        ck_assert_int_eq(obj(gl, "unknown_chars")->valueint, 1);
        ck_assert_int_eq(obj(gl, "unreadable")->valueint, 1);
        const cJSON *rs = obj(run, "seeds");
        for (int k = 0; k < 2; k++) {
            const cJSON *s = cJSON_GetArrayItem(rs, k);
            ck_assert(cJSON_IsNumber(obj(s, "accuracy_exact")));
            const cJSON *g = obj(s, "general");
            double ge = obj(g, "accuracy_exact")->valuedouble, gn = obj(g, "accuracy_nospace")->valuedouble;
            ck_assert(ge >= 0 && ge <= 1 && gn >= ge - 1e-12);
            ck_assert_int_eq(obj(g, "lines")->valueint, 13);
        }
    }
    // The seed-aware verdict on general text, both metrics, over the two seed pairs.
    const cJSON *cg = obj(cJSON_GetArrayItem(obj(o, "comparisons"), 0), "general");
    const char *which[2] = {"exact", "spaces_ignored"};
    for (int k = 0; k < 2; k++) {
        const cJSON *sd = obj(cg, which[k]);
        ck_assert_int_eq(obj(sd, "pairs")->valueint, 2);
        ck_assert_str_eq(obj(sd, "method")->valuestring, "crossed");
        ck_assert(cJSON_IsNumber(obj(obj(sd, "accuracy"), "delta")));
        const char *v = obj(sd, "verdict")->valuestring;
        ck_assert(!strcmp(v, "pass") || !strcmp(v, "regression") || !strcmp(v, "inconclusive") || !strcmp(v, "better"));
    }
    cJSON_Delete(o);
    snprintf(p, sizeof p, "%s/report.md", out);
    char *md;
    size_t size;
    ck_assert(ocr_read_file(p, &md, &size) == OCR_OK);
    ck_assert_msg(strstr(md, "Target set and general text") && strstr(md, "EvalGeneral spaces ignored"), "%s", md);
    free(md);
    char lines[800];
    snprintf(lines, sizeof lines, "%s/runs/bf16-o2/seed-6/lines_general.tsv", out);
    ck_assert_msg(at_exists(lines), "%s missing", lines);

    // Resumed after the general lines of one run went: rescored from its saved weights, not retrained.
    unlink(lines);
    rc = at_run_capture(cmd_compare, a, err, sizeof err);
    ck_assert_msg(rc == 0 || rc == 3 || rc == 4, "resumed compare exited %d: %s", rc, err);
    ck_assert_msg(strstr(err, "scored from the saved final weights") && strstr(err, "bf16-o2 seed 6: reused"), "%s", err);
    ck_assert_msg(!strstr(err, "(batch"), "retrained: %s", err);
    ck_assert(at_exists(lines));
    // ... and with its weights gone as well: it must be trained again, and the message says how.
    unlink(lines);
    snprintf(p, sizeof p, "%s/runs/bf16-o2/seed-6/latest/model.safetensors", out);
    unlink(p);
    rc = at_run_capture(cmd_compare, a, err, sizeof err);
    ck_assert_int_ne(rc, 0);
    ck_assert_msg(strstr(err, "EvalGeneral") && strstr(err, "train that run again"), "%s", err);
}
END_TEST

// EvalGeneral without Eval is refused, naming the section.
START_TEST(test_general_needs_eval) {
    cJSON *cfg = read_json(g_cfg);
    cJSON_DeleteItemFromObject(cfg, "Eval");
    char p[800], err[8192];
    snprintf(p, sizeof p, "%s/no_eval.json", g_dir);
    char *text = cJSON_Print(cfg);
    at_write_text(p, text);
    free(text);
    cJSON_Delete(cfg);
    const char *a[] = {"train", "-c", p, "--max-steps", "1", NULL};
    ck_assert_int_eq(at_run_capture(cmd_train, a, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "EvalGeneral needs an Eval section"), "%s", err);
}
END_TEST

// `-o EvalGeneral=null` drops the config's general set: nothing of it is read (its label file may
// be gone) and the run reports the target set alone.
START_TEST(test_general_null_drops_it) {
    char ov_w[800], ov_out[800], gl[900], *out = NULL;
    snprintf(ov_w, sizeof ov_w, "Global.pretrained_model=%s", g_pretrained);
    snprintf(ov_out, sizeof ov_out, "Global.save_model_dir=%s/no_general", g_dir);
    snprintf(gl, sizeof gl, "EvalGeneral.dataset.label_file_list=[\"%s/general/absent.txt\"]", g_dir);
    char err[8192];
    const char *missing[] = {"train", "-c", g_cfg, "--max-steps", "1", "-o", ov_w, ov_out, gl, NULL};
    ck_assert_int_eq(at_run_capture(cmd_train, missing, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "EvalGeneral.dataset.label_file_list") && strstr(err, "absent.txt"), "%s", err);
    const char *a[] = {"train", "-c", g_cfg, "--max-steps", "1", "-o", ov_w, ov_out, gl, "EvalGeneral=null", NULL};
    int rc = run_stdout(cmd_train, a, &out);
    ck_assert_msg(rc == 0, "train exited %d: %s", rc, out);
    ck_assert_msg(!strstr(out, "EvalGeneral"), "%s", out);
    free(out);
}
END_TEST

// A fine-tuning mix (Train.dataset.batch_ratio_list) through `train`: the epoch is the target
// file's (64 lines, 6 of every batch of 8 with drop_last: 10 steps) and a bad mix is refused
// naming the key before anything is written.
START_TEST(test_train_with_mix) {
    char p[800], lf[1000], ov_out[800], *out = NULL, err[8192];
    snprintf(p, sizeof p, "%s/general_from_train.txt", g_dir);
    at_write_text(p, "../general/images/00001.png\t12\n../general/images/00002.png\t7\n../general/images/00003.png\t305\n");
    snprintf(lf, sizeof lf, "Train.dataset.label_file_list=[\"%s/train/labels.txt\", \"%s\"]", g_dir, p);
    snprintf(ov_out, sizeof ov_out, "Global.save_model_dir=%s/mix", g_dir);
    const char *bad[] = {"train", "-c", g_cfg, "-o", lf, ov_out, "Train.dataset.batch_ratio_list=[0.7, 0.2]", NULL};
    ck_assert_int_eq(at_run_capture(cmd_train, bad, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "Train.dataset.batch_ratio_list") && strstr(err, "sum to"), "%s", err);
    snprintf(p, sizeof p, "%s/mix", g_dir);
    ck_assert(!at_exists(p));
    const char *a[] = {"train", "-c", g_cfg, "-o", lf, ov_out, "Train.dataset.batch_ratio_list=[0.75, 0.25]", NULL};
    int rc = run_stdout(cmd_train, a, &out);
    ck_assert_msg(rc == 0, "train exited %d: %s", rc, out);
    ck_assert_msg(strstr(out, "trained 10 steps"), "%s", out);
    free(out);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("training_eval_general");
    TCase *tc = tcase_create("t");
    tcase_set_timeout(tc, 600);
    tcase_add_unchecked_fixture(tc, setup_data, NULL);
    tcase_add_test(tc, test_general_needs_eval);
    tcase_add_test(tc, test_train_scores_both_sets);
    tcase_add_test(tc, test_compare_reports_general);
    tcase_add_test(tc, test_train_with_mix);
    tcase_add_test(tc, test_general_null_drops_it);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(suite()); }

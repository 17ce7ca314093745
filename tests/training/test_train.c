// Training end to end on a tiny synthetic digits task: the loss falls; eval and predict read
// what train wrote; fine-tuning loads matching tensors only; compare writes a valid report.
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>

#include "training/capacity.h"
#include "cli/commands.h"
#include "training/run_config.h"
#include "core/memory.h"
#include "tests/training/training_test_util.h"

static char *g_dir;
static char g_cfg[512];

static void setup_data(void) { g_dir = at_setup_digits(g_cfg, sizeof g_cfg, "\"epoch_num\": 3,"); }

START_TEST(test_train_loss_falls) {
    char out[600], ov[700];
    snprintf(out, sizeof out, "%s/run_loss", g_dir);
    snprintf(ov, sizeof ov, "Global.save_model_dir=%s", out);
    const char *a[] = {"train", "-c", g_cfg, "-o", ov, "Global.epoch_num=4", NULL};
    ck_assert_int_eq(at_run(cmd_train, a), 0);
    int n;
    double *l = at_read_losses(out, &n, "acc");  // no training metric unless asked for
    ck_assert_int_eq(n, 32);
    double first = 0, last = 0;
    for (int i = 0; i < 4; i++) first += l[i] / 4, last += l[n - 1 - i] / 4;
    ck_assert_msg(last < 0.6 * first, "loss did not fall: first %.3f, last %.3f", first, last);
    free(l);
    char p[700];
    snprintf(p, sizeof p, "%s/latest/model.safetensors", out);
    ck_assert(at_exists(p));
    snprintf(p, sizeof p, "%s/config.json", out);
    ck_assert(at_exists(p));
}
END_TEST

// Global.cal_metric_during_train: every step line carries the batch's RecMetric.
START_TEST(test_train_metric_during_train) {
    char out[600], ov[700];
    snprintf(out, sizeof out, "%s/run_metric", g_dir);
    snprintf(ov, sizeof ov, "Global.save_model_dir=%s", out);
    const char *a[] = {"train", "-c", g_cfg, "-o", ov, "Global.epoch_num=1", "Global.cal_metric_during_train=true", NULL};
    ck_assert_int_eq(at_run(cmd_train, a), 0);
    char p[700];
    snprintf(p, sizeof p, "%s/metrics.jsonl", out);
    char *text;
    size_t size;
    ck_assert(ocr_read_file(p, &text, &size) == OCR_OK);
    int steps = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        if (cJSON_HasObjectItem(o, "loss")) {
            const cJSON *acc = cJSON_GetObjectItem(o, "acc"), *ned = cJSON_GetObjectItem(o, "norm_edit_dis");
            ck_assert_msg(cJSON_IsNumber(acc) && cJSON_IsNumber(ned), "no training metric in %s", line);
            ck_assert(acc->valuedouble >= 0 && acc->valuedouble <= 1);
            // Exact matches have edit distance 0, so 1 − mean distance is at least the accuracy.
            ck_assert(ned->valuedouble >= acc->valuedouble - 1e-6 && ned->valuedouble <= 1);
            steps++;
        }
        cJSON_Delete(o);
    }
    free(text);
    ck_assert_int_eq(steps, 8);
}
END_TEST

START_TEST(test_eval_and_predict_after_training) {
    char out[600], ov[700], w[700];
    snprintf(out, sizeof out, "%s/run_ep", g_dir);
    snprintf(ov, sizeof ov, "Global.save_model_dir=%s", out);
    const char *a[] = {"train", "-c", g_cfg, "-o", ov, "Global.epoch_num=1", NULL};
    ck_assert_int_eq(at_run(cmd_train, a), 0);
    snprintf(w, sizeof w, "%s/latest", out);
    // eval --json on stdout
    char path[1024];
    int fd = ocr_test_tmpfile(path, sizeof path, "ocr_app_stdout_");
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    const char *e[] = {"eval", "-c", g_cfg, "--weights", w, "--json", NULL};
    int rc = at_run(cmd_eval, e);
    char img1[700], img2[700];
    snprintf(img1, sizeof img1, "%s/eval/images/00000.png", g_dir);
    snprintf(img2, sizeof img2, "%s/eval/images/00001.png", g_dir);
    const char *p[] = {"predict", "-c", g_cfg, "--weights", w, "--batch", "1", img1, img2, NULL};
    int rc2 = at_run(cmd_predict, p);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(rc2, 0);
    char *text;
    size_t size;
    ck_assert(ocr_read_file(path, &text, &size) == OCR_OK);
    unlink(path);
    close(fd);
    // The JSON object, then two prediction lines in input order.
    char *brace = strrchr(text, '}');
    ck_assert_ptr_nonnull(brace);
    brace[1] = '\0';
    cJSON *o = cJSON_Parse(text);
    ck_assert_ptr_nonnull(o);
    ck_assert_int_eq(cJSON_GetObjectItem(o, "samples")->valueint, 16);
    double acc = cJSON_GetObjectItem(o, "accuracy")->valuedouble;
    ck_assert(acc >= 0 && acc <= 1);
    ck_assert(cJSON_HasObjectItem(o, "norm_edit_distance") && cJSON_HasObjectItem(o, "cer") &&
              cJSON_HasObjectItem(o, "samples_per_s"));
    cJSON_Delete(o);
    char *lines = brace + 2;
    char *l1 = strstr(lines, img1), *l2 = strstr(lines, img2);
    ck_assert_msg(l1 && l2 && l1 < l2, "predictions missing or out of order: %s", lines);
    int tabs = 0;
    for (char *c = l1; *c && *c != '\n'; c++) tabs += *c == '\t';
    ck_assert_int_eq(tabs, 2);
    float conf = strtof(strrchr(strtok(l1, "\n"), '\t') + 1, NULL);
    ck_assert(conf >= 0 && conf <= 1);
    free(text);
}
END_TEST

START_TEST(test_finetune_loads_matching_tensors_only) {
    char out[600], ov[700], ft[600], ov2[700], pre[700], dict2[700], dov[800];
    snprintf(out, sizeof out, "%s/run_pre", g_dir);
    snprintf(ov, sizeof ov, "Global.save_model_dir=%s", out);
    const char *a[] = {"train", "-c", g_cfg, "--max-steps", "2", "-o", ov, NULL};
    ck_assert_int_eq(at_run(cmd_train, a), 0);
    // Another dictionary (one more class) and weights whose dictionary is unknown (the checkpoint's
    // record removed; with it the head's rows carry over by character: tests/training/test_head_remap.c):
    // the head changes shape, the rest loads.
    char rec[700];
    snprintf(rec, sizeof rec, "%s/latest/model.dict.txt", out);
    ck_assert_int_eq(unlink(rec), 0);
    snprintf(dict2, sizeof dict2, "%s/dict11.txt", g_dir);
    at_write_text(dict2, "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\nx\n");
    snprintf(ft, sizeof ft, "%s/run_ft", g_dir);
    snprintf(ov2, sizeof ov2, "Global.save_model_dir=%s", ft);
    snprintf(pre, sizeof pre, "Global.pretrained_model=%s/latest/model.safetensors", out);
    snprintf(dov, sizeof dov, "Global.character_dict_path=%s", dict2);
    char err[8192];
    // Global.pretrained_strict (the default) refuses a file that does not cover the model...
    const char *bs[] = {"train", "-c", g_cfg, "--max-steps", "1", "-o", ov2, pre, dov, NULL};
    ck_assert_int_eq(at_run_capture(cmd_train, bs, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "Global.pretrained_dict_path"), "%s", err);
    // ...and with it off the rest loads and the head starts from its initial values.
    const char *b[] = {"train", "-c", g_cfg, "--max-steps", "1", "-o", ov2, pre, dov, "Global.pretrained_strict=false",
                       NULL};
    ck_assert_int_eq(at_run_capture(cmd_train, b, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "head.fc.weight") && strstr(err, "initial values"), "%s", err);
    // The strict loaders refuse the mismatch: eval with the fine-tuned config on the old weights.
    char w[700];
    snprintf(w, sizeof w, "%s/latest", out);
    const char *e[] = {"eval", "-c", g_cfg, "--weights", w, "-o", dov, NULL};
    ck_assert_int_eq(at_run_capture(cmd_eval, e, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "head.fc"), "%s", err);
}
END_TEST

START_TEST(test_compare_writes_a_report) {
    char out[600];
    snprintf(out, sizeof out, "%s/cmp", g_dir);
    const char *a[] = {"compare", "-c", g_cfg, "--out", out, "--dtypes", "bfloat16", "--max-steps", "3", NULL};
    int rc = at_run(cmd_compare, a);
    ck_assert_msg(rc == 0 || rc == 3 || rc == 4, "compare exited %d", rc);  // pass, regression, inconclusive
    char p[700];
    const char *files[] = {"report.json", "report.md", "report.html", NULL};
    for (int i = 0; files[i]; i++) {
        snprintf(p, sizeof p, "%s/%s", out, files[i]);
        ck_assert_msg(at_exists(p), "%s missing", p);
    }
    snprintf(p, sizeof p, "%s/report.json", out);
    char *text;
    size_t size;
    ck_assert(ocr_read_file(p, &text, &size) == OCR_OK);
    cJSON *o = cJSON_Parse(text);
    ck_assert_ptr_nonnull(o);
    cJSON *runs = cJSON_GetObjectItem(o, "runs");
    ck_assert_int_eq(cJSON_GetArraySize(runs), 2);
    ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(runs, 0), "name")->valuestring, "fp32");
    cJSON *r1 = cJSON_GetArrayItem(runs, 1);
    ck_assert_str_eq(cJSON_GetObjectItem(r1, "name")->valuestring, "bf16-o2");
    ck_assert_int_eq(cJSON_GetObjectItem(r1, "steps")->valueint, 3);
    ck_assert(cJSON_GetObjectItem(r1, "samples_per_s")->valuedouble > 0);
    cJSON *mem = cJSON_GetObjectItem(r1, "peak_memory_bytes");
    double act1 = cJSON_GetObjectItem(mem, "activations")->valuedouble;
    double act0 = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(runs, 0), "peak_memory_bytes"),
                                      "activations")->valuedouble;
    ck_assert_msg(act1 < 0.75 * act0, "bf16-o2 activations %.0f vs fp32 %.0f", act1, act0);
    cJSON *v = cJSON_GetObjectItem(o, "verdict");
    ck_assert_int_eq(cJSON_GetObjectItem(v, "exit_code")->valueint, rc);
    cJSON_Delete(o);
    free(text);
}
END_TEST

START_TEST(test_compare_batch_max) {
    char out[600];
    snprintf(out, sizeof out, "%s/cmpmax", g_dir);
    const char *a[] = {"compare", "-c", g_cfg, "--out", out, "--dtypes", "bfloat16", "--batch", "max", "--memory", "48M",
                       "--max-steps", "1", "-o", "Global.eval_batch_step=[0,1000]", NULL};
    int rc = at_run(cmd_compare, a);
    ck_assert_msg(rc == 0 || rc == 3 || rc == 4, "compare exited %d", rc);  // pass, regression, inconclusive
    char p[700];
    snprintf(p, sizeof p, "%s/report.json", out);
    char *text;
    size_t size;
    ck_assert(ocr_read_file(p, &text, &size) == OCR_OK);
    cJSON *o = cJSON_Parse(text);
    ck_assert_ptr_nonnull(o);
    cJSON *runs = cJSON_GetObjectItem(o, "runs");
    cJSON *r0 = cJSON_GetArrayItem(runs, 0), *r1 = cJSON_GetArrayItem(runs, 1);
    int b0 = cJSON_GetObjectItem(r0, "batch_size")->valueint, b1 = cJSON_GetObjectItem(r1, "batch_size")->valueint;
    // Each run at its precision's largest batch: bf16-o2 fits more samples than fp32, and the
    // learning rate follows the batch linearly (configured batch 8, rate 0.02).
    ck_assert_msg(b1 > b0 && b0 > 8, "batches fp32 %d, bf16-o2 %d", b0, b1);
    ck_assert(fabs(cJSON_GetObjectItem(r0, "lr_scale")->valuedouble - b0 / 8.0) < 1e-9);
    ck_assert(fabs(cJSON_GetObjectItem(r1, "learning_rate")->valuedouble - 0.02 * b1 / 8.0) < 1e-9);
    ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "settings"), "batch")->valuestring, "max");
    // The batch fits the budget: the planned one is checked with real steps (and lowered when
    // the op scratch grew more than the plan's extrapolation), so the run stays under it.
    const cJSON *pm = cJSON_GetObjectItem(r1, "peak_memory_bytes");
    double peak = cJSON_GetObjectItem(pm, "total")->valuedouble;
    char *cats = cJSON_PrintUnformatted(pm);
    ck_assert_msg(peak <= 48.0 * 1048576, "bf16-o2 at batch %d peaked at %.0f bytes: %s", b1, peak, cats);
    free(cats);
    cJSON_Delete(o);
    free(text);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("app_train");
    TCase *tc = tcase_create("t");
    tcase_set_timeout(tc, 300);
    tcase_add_unchecked_fixture(tc, setup_data, NULL);
    tcase_add_test(tc, test_train_loss_falls);
    tcase_add_test(tc, test_train_metric_during_train);
    tcase_add_test(tc, test_eval_and_predict_after_training);
    tcase_add_test(tc, test_finetune_loads_matching_tensors_only);
    tcase_add_test(tc, test_compare_writes_a_report);
    tcase_add_test(tc, test_compare_batch_max);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(suite()); }

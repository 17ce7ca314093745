// A longer end-to-end training on the synthetic digits task: evaluation accuracy rises from
// (near) zero to most lines read exactly, and normalised edit distance improves with it.
// Heavy: a few hundred steps (about a minute on two cores).
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>

#include "cli/commands.h"
#include "tests/training/training_test_util.h"

START_TEST(test_accuracy_rises) {
    char *dir = at_tmpdir();
    at_make_digits(dir, "train", 640, 3, 21);
    at_make_digits(dir, "eval", 128, 3, 22);
    char cfg[600];
    snprintf(cfg, sizeof cfg, "%s/cfg.json", dir);
    // Im2Seq neck: on this task the SVTR neck stays on the CTC plateau for far longer (see the
    // application report); the backbone is PP-OCRv3's MobileNetV1Enhance at scale 0.5.
    at_write_config_neck(cfg, dir, 64, 16, "\"epoch_num\": 8,", 0.5, AT_NECK_RESHAPE);
    const char *a[] = {"train", "-c", cfg, "-o", "Global.eval_batch_step=[0,40]", "Optimizer.lr.learning_rate=0.005",
                       "Global.cal_metric_during_train=true", NULL};
    ck_assert_int_eq(at_run(cmd_train, a), 0);
    char p[700];
    snprintf(p, sizeof p, "%s/out/metrics.jsonl", dir);
    char *text;
    size_t size;
    ck_assert(ocr_read_file(p, &text, &size) == OCR_OK);
    double acc[64], ned[64], train_acc[1024];
    int n = 0, nt = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        cJSON *e = o ? cJSON_GetObjectItem(o, "eval") : NULL;
        cJSON *ta = o ? cJSON_GetObjectItem(o, "acc") : NULL;
        if (cJSON_IsNumber(ta) && nt < 1024) train_acc[nt++] = ta->valuedouble;
        if (e && n < 64) {
            acc[n] = cJSON_GetObjectItem(e, "acc")->valuedouble;
            ned[n] = cJSON_GetObjectItem(e, "norm_edit_dis")->valuedouble;
            n++;
        }
        cJSON_Delete(o);
    }
    free(text);
    ck_assert_int_ge(n, 5);
    fprintf(stderr, "eval accuracy:");
    for (int i = 0; i < n; i++) fprintf(stderr, " %.3f", acc[i]);
    fprintf(stderr, "\n");
    ck_assert_msg(acc[0] < 0.2, "accuracy before learning should be low, got %.3f", acc[0]);
    ck_assert_msg(acc[n - 1] > 0.6, "final accuracy %.3f: the model did not learn", acc[n - 1]);
    ck_assert(ned[n - 1] > ned[0]);
    // The training batches' accuracy (cal_metric_during_train) rises with it.
    ck_assert_int_ge(nt, 40);
    double first = 0, last = 0;
    for (int i = 0; i < 20; i++) first += train_acc[i] / 20, last += train_acc[nt - 1 - i] / 20;
    fprintf(stderr, "training batch accuracy: first 20 steps %.3f, last 20 %.3f\n", first, last);
    ck_assert_msg(first < 0.2 && last > 0.5, "training accuracy %.3f -> %.3f", first, last);
    // best/ holds the best evaluation's weights.
    snprintf(p, sizeof p, "%s/out/best/model.safetensors", dir);
    ck_assert(at_exists(p));
    free(dir);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("app_train_heavy");
    TCase *tc = tcase_create("heavy");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_accuracy_rises);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(suite()); }

// PaddleOCR's PP-OCRv3 en MultiHead (CTC + SAR) trains as PaddleOCR describes it: the REDUCED
// checkpoint's own .yml (/work/shared; its SAR head shrunk to enc_dim 64, d_k 64, everything else
// en_PP-OCRv3_rec.yml) with only the data, the dictionary and the batch overridden, starting from
// that checkpoint's weights (Global.pretrained_model: every tensor loads), on receipt lines from
// `ocrtrain synth`: every step logs a finite MultiLoss split whose SAR part starts near ln 98 (the
// checkpoint is 4 steps from scratch: its SAR prediction is near uniform over 98 classes), and
// the checkpoint keeps the SAR head under PaddleOCR's names. configs/rec_ppocrv3_en_gtc_sar.json
// (the official enc_dim 512) runs one step at batch 2. Skips when /work/shared is absent.
#define _GNU_SOURCE  // memmem
#include <string.h>

#include "cli/commands.h"
#include "tests/training/training_test_util.h"

#define REDUCED "models/ppocrv3_paddle/v3_en_multihead_ctc_sar_REDUCED_enc64_dk64_4steps"

static char *g_dir;
static char g_ov[6][1200];

static void setup(void) {
    g_dir = at_tmpdir();
    char data[1100];
    snprintf(data, sizeof data, "%s/data", g_dir);
    const char *a[] = {"synth", "--style", "receipt", "--count", "12", "--seed", "5", "--out", data, NULL};
    ck_assert_int_eq(at_run(cmd_synth, a), 0);
    snprintf(g_ov[0], sizeof g_ov[0], "Global.character_dict_path=%s/configs/dicts/en_dict.txt", OCR_SOURCE_DIR);
    snprintf(g_ov[1], sizeof g_ov[1], "Train.dataset.data_dir=%s", data);
    snprintf(g_ov[2], sizeof g_ov[2], "Train.dataset.label_file_list=[%s/labels.txt]", data);
    snprintf(g_ov[3], sizeof g_ov[3], "Eval.dataset.data_dir=%s", data);
    snprintf(g_ov[4], sizeof g_ov[4], "Eval.dataset.label_file_list=[%s/labels.txt]", data);
    snprintf(g_ov[5], sizeof g_ov[5], "Global.save_model_dir=%s/out", g_dir);
}

static void teardown(void) {
    ocr_test_remove_tree(g_dir);
    free(g_dir);
}

// loss_gtc of every step line of dir/metrics.jsonl (loss = loss_ctc + loss_gtc checked).
static int sar_losses(const char *dir, double *gtc, int cap) {
    char p[1300];
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
        if (cJSON_IsNumber(l)) {
            ck_assert_msg(cJSON_IsNumber(c) && cJSON_IsNumber(g), "no MultiLoss split: %s", line);
            ck_assert(isfinite(c->valuedouble) && isfinite(g->valuedouble));
            // metrics.jsonl writes 7 significant digits of each value
            ck_assert_msg(fabs(l->valuedouble - c->valuedouble - g->valuedouble) <= 2e-6 * fabs(l->valuedouble),
                          "%s", line);
            if (n < cap) gtc[n++] = g->valuedouble;
        }
        cJSON_Delete(o);
    }
    free(text);
    return n;
}

START_TEST(test_reduced_yml_trains_from_its_checkpoint) {
    char yml[1024], pd[1024];
    if (!ocr_test_shared_path(REDUCED ".yml", yml, sizeof yml)) return;
    ck_assert(ocr_test_shared_path(REDUCED ".pdparams", pd, sizeof pd));
    char pre[1100], err[16384], out[1100];
    snprintf(pre, sizeof pre, "Global.pretrained_model=%s", pd);
    const char *a[] = {"train", "-c", yml, "-o", g_ov[0], g_ov[1], g_ov[2], g_ov[3], g_ov[4], g_ov[5],
                       "Train.loader.batch_size_per_card=4", "Eval.loader.batch_size_per_card=4", pre,
                       "--max-steps", "2", NULL};
    int rc = at_run_capture(cmd_train, a, err, sizeof err);
    ck_assert_msg(rc == 0, "train -c %s: exit %d: %s", yml, rc, err);
    ck_assert_msg(strstr(err, "all of the model's"), "the checkpoint did not load completely: %s", err);
    // The trainer hands the batch's valid ratios to the SAR branch (no unmasked pass).
    ck_assert_msg(!strstr(err, "without valid ratios"), "%s", err);
    snprintf(out, sizeof out, "%.1000s/out", g_dir);
    double gtc[8];
    int n = sar_losses(out, gtc, 8);
    ck_assert_int_eq(n, 2);
    // Near-uniform over the 98 classes the prediction has (PAD is never predicted).
    printf("SARLoss at step 1: %.4f (ln 98 = %.4f)\n", gtc[0], log(98.0));
    ck_assert_msg(fabs(gtc[0] - log(98.0)) < 0.5, "SARLoss %g far from ln 98", gtc[0]);
    char latest[1200];
    snprintf(latest, sizeof latest, "%s/latest/model.safetensors", out);
    char *bytes;
    size_t size;
    ck_assert_msg(ocr_read_file(latest, &bytes, &size) == OCR_OK, "%s", ocr_last_error());
    ck_assert_msg(memmem(bytes, size, "head.sar_head.decoder.rnn_decoder.weight_ih_l1", 46) &&
                      memmem(bytes, size, "head.ctc_head.", 14),
                  "no MultiHead SAR names in %s", latest);
    free(bytes);
}
END_TEST

START_TEST(test_official_config_runs_a_step) {
    char cfg[1024], err[16384], out[1100];
    snprintf(cfg, sizeof cfg, "%s/configs/rec_ppocrv3_en_gtc_sar.json", OCR_SOURCE_DIR);
    const char *a[] = {"train", "-c", cfg, "-o", g_ov[0], g_ov[1], g_ov[2], g_ov[3], g_ov[4], g_ov[5],
                       "Train.loader.batch_size_per_card=2", "Eval.loader.batch_size_per_card=2",
                       "Global.cal_metric_during_train=false", "--max-steps", "1", NULL};
    int rc = at_run_capture(cmd_train, a, err, sizeof err);
    ck_assert_msg(rc == 0, "train -c rec_ppocrv3_en_gtc_sar.json: exit %d: %s", rc, err);
    ck_assert_msg(!strstr(err, "without valid ratios"), "%s", err);
    snprintf(out, sizeof out, "%.1000s/out", g_dir);
    double gtc[4];
    ck_assert_int_eq(sar_losses(out, gtc, 4), 1);
    ck_assert(gtc[0] > 0);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("app_sar_train");
    TCase *tc = tcase_create("sar_train");
    tcase_set_timeout(tc, 600);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_reduced_yml_trains_from_its_checkpoint);
    tcase_add_test(tc, test_official_config_runs_a_step);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(suite()); }

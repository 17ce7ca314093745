// The capacity planner: for every precision the plan (fixed + batch · per sample) is within
// 5 % of what a real training step allocates, max_batch is the largest batch in the budget,
// low precision needs fewer bytes per sample, and the CLI's --json has the documented shape.
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

static void setup_data(void) { g_dir = at_setup_digits(g_cfg, sizeof g_cfg, "\"epoch_num\": 1,"); }

START_TEST(test_capacity_plan_matches_a_real_step) {
    OcrConfig *cfg;
    RunConfig rc;
    ck_assert(run_config_load(&cfg, &rc, g_cfg, NULL, 0, RUN_NEED_TRAIN) == OCR_OK);
    for (int i = 0; i < CAPACITY_PRECISIONS; i++) {
        CapacityPrecision cp;
        const char *name = capacity_precision_name(i);
        ck_assert_msg(capacity_plan(cfg, name, 1LL << 30, &cp) == OCR_OK, "%s: %s", name, ocr_last_error());
        ck_assert(cp.fixed_bytes > 0 && cp.bytes_per_sample > 0 && cp.max_batch > 0);
        ck_assert(capacity_bytes(&cp, cp.max_batch) <= 1LL << 30);
        ck_assert(capacity_bytes(&cp, cp.max_batch + 1) > 1LL << 30);
        int batch = 6;
        OcrMemStats ms;
        ck_assert_msg(capacity_measure(cfg, name, batch, &ms) == OCR_OK, "%s", ocr_last_error());
        double planned = (double)capacity_bytes(&cp, batch), real = (double)ms.peak_total;
        ck_assert_msg(fabs(planned - real) <= 0.05 * real, "%s: planned %.0f bytes, a real step allocated %.0f",
                      name, planned, real);
        // The per-sample bytes of the low-precision levels are below FP32's (activations halve).
        if (i > 0) {
            CapacityPrecision f;
            ck_assert(capacity_plan(cfg, "fp32", 0, &f) == OCR_OK);
            ck_assert_msg(cp.bytes_per_sample < f.bytes_per_sample, "%s per sample %lld >= fp32 %lld", name,
                          (long long)cp.bytes_per_sample, (long long)f.bytes_per_sample);
        }
    }
    ocr_config_free(cfg);
    // The CLI's JSON shape.
    char path[1024];
    int fd = ocr_test_tmpfile(path, sizeof path, "ocr_app_stdout_");
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    const char *a[] = {"capacity", "-c", g_cfg, "--memory", "256M", "--json", NULL};
    int rc2 = at_run(cmd_capacity, a);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    ck_assert_int_eq(rc2, 0);
    char *text;
    size_t size;
    ck_assert(ocr_read_file(path, &text, &size) == OCR_OK);
    unlink(path);
    close(fd);
    cJSON *o = cJSON_Parse(text);
    ck_assert_ptr_nonnull(o);
    ck_assert(cJSON_GetObjectItem(o, "memory_bytes")->valuedouble == 256.0 * 1048576);
    cJSON *arr = cJSON_GetObjectItem(o, "precisions");
    ck_assert_int_eq(cJSON_GetArraySize(arr), 4);
    const char *names[] = {"fp32", "fp16-o1", "fp16-o2", "bf16-o2"};
    for (int i = 0; i < 4; i++) {
        cJSON *p = cJSON_GetArrayItem(arr, i);
        ck_assert_str_eq(cJSON_GetObjectItem(p, "name")->valuestring, names[i]);
        ck_assert(cJSON_GetObjectItem(p, "max_batch")->valuedouble > 0);
        ck_assert(cJSON_HasObjectItem(p, "bytes_per_sample") && cJSON_HasObjectItem(p, "fixed_bytes"));
    }
    cJSON_Delete(o);
    free(text);
}
END_TEST

// PaddleOCR's PP-OCRv4 configs have no RecResizeImg: the MultiScaleSampler's scales give the
// input, and the plan is for the largest one, where a sample costs the most.
START_TEST(test_capacity_multiscale_plans_the_largest_scale) {
    OcrConfig *cfg;
    RunConfig rc;
    ck_assert(run_config_load(&cfg, &rc, g_cfg, NULL, 0, RUN_NEED_TRAIN) == OCR_OK);
    CapacityPrecision fixed_size;
    ck_assert(capacity_plan(cfg, "fp32", 0, &fixed_size) == OCR_OK);
    ck_assert_int_eq(fixed_size.height, 32);
    ck_assert_int_eq(fixed_size.width, 64);
    ck_assert(ocr_config_set(cfg, "Train.dataset.name", "MultiScaleDataSet") == OCR_OK);
    ck_assert(ocr_config_set(cfg, "Train.dataset.transforms",
                             "[{\"DecodeImage\": {\"img_mode\": \"BGR\", \"channel_first\": false}}, "
                             "{\"CTCLabelEncode\": null}, {\"KeepKeys\": {\"keep_keys\": [\"image\", \"label\", "
                             "\"length\"]}}]") == OCR_OK);
    ck_assert(ocr_config_set(cfg, "Train.sampler",
                             "{\"name\": \"MultiScaleSampler\", \"scales\": [[64, 32], [96, 32], [80, 32]], "
                             "\"first_bs\": 8, \"fix_bs\": true, \"divided_factor\": [8, 16], "
                             "\"is_training\": true}") == OCR_OK);
    CapacityPrecision multi;
    ck_assert_msg(capacity_plan(cfg, "fp32", 0, &multi) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(multi.channels, 3);
    ck_assert_int_eq(multi.height, 32);
    ck_assert_int_eq(multi.width, 96);
    ck_assert(multi.bytes_per_sample > fixed_size.bytes_per_sample);
    ocr_config_free(cfg);
    // Neither a resize nor scales: the planner says what it needs.
    ck_assert(run_config_load(&cfg, &rc, g_cfg, NULL, 0, RUN_NEED_TRAIN) == OCR_OK);
    ck_assert(ocr_config_set(cfg, "Train.dataset.transforms",
                             "[{\"DecodeImage\": {\"img_mode\": \"BGR\", \"channel_first\": false}}, "
                             "{\"CTCLabelEncode\": null}]") == OCR_OK);
    ck_assert_int_eq(capacity_plan(cfg, "fp32", 0, &multi), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "RecResizeImg") != NULL, "%s", ocr_last_error());
    ocr_config_free(cfg);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("app_capacity");
    TCase *tc = tcase_create("t");
    tcase_set_timeout(tc, 300);
    tcase_add_unchecked_fixture(tc, setup_data, NULL);
    tcase_add_test(tc, test_capacity_plan_matches_a_real_step);
    tcase_add_test(tc, test_capacity_multiscale_plans_the_largest_scale);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(suite()); }

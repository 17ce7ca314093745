// Unit tests for the checkpoint-reader bugs the fuzz campaigns found (docs/RELIABILITY.md,
// "Fuzzing"); the inputs themselves are replayed from fuzz/corpus/checkpoint/regress-*.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "training/checkpoint.h"
#include "training/run_config.h"
#include "core/config.h"
#include "tests/common/test_util.h"

static const char *state_fmt =
    "{\"format\": \"ocrtrain-train-state\", \"version\": 1, \"iter\": %s, \"epoch\": 2, \"batch_in_epoch\": 3, "
    "\"updates\": 118, \"model_step\": \"120\", \"seed\": \"1024\", \"best_acc\": 0.5, \"best_iter\": 100, "
    "\"last_loss_hex\": \"0x1.ap+1\", \"scaler\": {\"scale_hex\": \"0x1p+16\", \"good_steps\": %s, "
    "\"bad_steps\": 0, \"steps\": 120, \"overflow_steps\": 2}, \"amp\": {\"level\": \"O2\", \"dtype\": \"float16\", "
    "\"step\": 120, \"skipped_steps\": 2}}";

static ocr_status_t load_with(const char *iter, const char *good, CkptState *s) {
    char *dir = ocr_test_tmpdir("ocr_fuzzreg_");
    char path[4200], text[2048];
    snprintf(path, sizeof path, "%s/state.json", dir);
    snprintf(text, sizeof text, state_fmt, iter, good);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    ocr_status_t st = ckpt_load_state(dir, s);
    ocr_test_remove_tree(dir);
    free(dir);
    return st;
}

// A count beyond int64_t (or inf from "1e999") was converted with (int64_t)d: undefined
// behaviour (UBSan: "1e+300 is outside the range of representable values of type 'long'").
START_TEST(test_state_counts_out_of_range_refused) {
    CkptState s;
    ck_assert_int_eq(load_with("120", "5", &s), OCR_OK);
    ck_assert_int_eq(s.iter, 120);
    ck_assert_int_eq(s.amp.scaler.good_steps, 5);
    const char *bad[][2] = {{"1e300", "5"}, {"1e999", "5"}, {"120", "1e19"}, {"120", "-1e300"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(load_with(bad[i][0], bad[i][1], &s), OCR_ERR_FORMAT);
        const char *msg = ocr_last_error();
        ck_assert_msg(strstr(msg, "state.json") && strstr(msg, "out of range") &&
                          strstr(msg, i < 2 ? "\"iter\"" : "\"good_steps\""),
                      "%s", msg);
    }
    // 2^53 is still a count (the writer's doubles hold every integer up to it exactly).
    ck_assert_int_eq(load_with("9007199254740992", "5", &s), OCR_OK);
    ck_assert_int_eq(s.iter, 9007199254740992LL);
}
END_TEST

// A config whose Architecture.Backbone has no "name" (keys a strcmp compared with no default)
// crashed the validation with a strcmp on NULL (UBSan: "null pointer passed as argument 1").
START_TEST(test_config_required_name_absent_is_an_error) {
    const char *paths[] = {"Architecture.Backbone"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        OcrConfig *cfg;
        ck_assert_int_eq(ocr_config_load(&cfg, OCR_SOURCE_DIR "/configs/demo.json"), OCR_OK);
        cJSON *sec = (cJSON *)ocr_config_node(cfg, paths[i]);
        ck_assert_ptr_nonnull(sec);
        cJSON_DeleteItemFromObjectCaseSensitive(sec, "name");
        RunConfig rc;
        ocr_status_t st = run_config_read(&rc, cfg, RUN_NEED_TRAIN);
        const char *msg = ocr_last_error();
        ck_assert_msg(st == OCR_ERR_CONFIG && strstr(msg, "demo.json") && strstr(msg, paths[i]) && strstr(msg, "is required"),
                      "%s: %d %s",
                      paths[i], (int)st, msg);
        ocr_config_free(cfg);
    }
}
END_TEST

// (int) of an out-of-range double in the architecture reader: an image_shape width of 1e300
// (the input size is taken from RecResizeImg) and a local_mixer window of 1e300 (UBSan: "inf is
// outside the range of representable values of type 'int'"). Both are config errors now.
START_TEST(test_config_numbers_beyond_int_are_errors) {
    const struct {
        const char *file, *key, *value, *want;
    } cases[] = {
        {"/configs/demo.json", "Eval.dataset.transforms.2.RecResizeImg.image_shape", "[3, 32, 1e300]", "image_shape"},
        {"/configs/rec_svtr_tiny.json", "Architecture.Backbone.local_mixer", "[[7, 11], [7, 11], [1e300, 11]]",
         "local_mixer"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s%s", OCR_SOURCE_DIR, cases[i].file);
        OcrConfig *cfg;
        ck_assert_int_eq(ocr_config_load(&cfg, path), OCR_OK);
        ck_assert_msg(ocr_config_set(cfg, cases[i].key, cases[i].value) == OCR_OK, "%s", ocr_last_error());
        if (i == 0)  // Train's too: it is validated first, and Eval's is the one the input size is taken from
            ck_assert_int_eq(ocr_config_set(cfg, "Train.dataset.transforms.2.RecResizeImg.image_shape", cases[i].value),
                             OCR_OK);
        RunConfig rc;
        ocr_status_t st = run_config_read(&rc, cfg, RUN_NEED_TRAIN);
        ck_assert_msg(st == OCR_ERR_CONFIG && strstr(ocr_last_error(), cases[i].want), "%s: %d %s", cases[i].key,
                      (int)st, ocr_last_error());
        ocr_config_free(cfg);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("app_fuzz_regressions");
    TCase *tc = tcase_create("checkpoint");
    tcase_add_test(tc, test_state_counts_out_of_range_refused);
    tcase_add_test(tc, test_config_required_name_absent_is_an_error);
    tcase_add_test(tc, test_config_numbers_beyond_int_are_errors);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

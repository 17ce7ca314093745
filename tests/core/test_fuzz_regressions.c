// Unit tests for the config-reader bugs the fuzz campaigns found (docs/RELIABILITY.md,
// "Fuzzing"); the inputs themselves are replayed from fuzz/corpus/config/regress-*.
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "tests/common/test_util.h"

// An -o value object with a key twice ({"x": 1, "x": 2}) was accepted although a config file
// with it is refused, so the effective config.json a run saves could not be loaded again.
START_TEST(test_override_value_with_duplicate_key_refused) {
    OcrConfig *cfg;
    ck_assert_int_eq(ocr_config_parse(&cfg, "{\"Global\": {\"epoch_num\": 2}}", "c.json"), OCR_OK);
    const char *bad[] = {"Train.loader={\"x\": 1, \"x\": 2}", "Train.loader={\"a\": {\"y\": [1, {\"z\": 0, \"z\": 1}]}}",
                         "Train.loader={x: 1, x: 2}"};
    const char *where[] = {"Train.loader.x", "Train.loader.a.y.1.z", NULL};
    for (int i = 0; i < 3; i++) {
        ocr_status_t st = ocr_config_apply_override(cfg, bad[i]);
        ck_assert_msg(st == OCR_ERR_CONFIG && strstr(ocr_last_error(), "c.json"), "%s: %d %s", bad[i], (int)st,
                      ocr_last_error());
        if (where[i]) ck_assert_msg(strstr(ocr_last_error(), where[i]), "%s", ocr_last_error());
        ck_assert(!ocr_config_has(cfg, "Train.loader"));  // nothing was set
    }
    ck_assert_int_eq(ocr_config_apply_override(cfg, "Train.loader={\"x\": 1, \"y\": 2}"), OCR_OK);
    char *json = ocr_config_to_json(cfg);
    OcrConfig *again;
    ck_assert_msg(ocr_config_parse(&again, json, "saved.json") == OCR_OK, "%s", ocr_last_error());
    ocr_config_free(again);
    free(json);
    ocr_config_free(cfg);
}
END_TEST

int main(void) {
    Suite *s = suite_create("core_fuzz_regressions");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, test_override_value_with_duplicate_key_refused);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

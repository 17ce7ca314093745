// JSON configs and `-o` overrides (core/config.c, validated by training/run_config.c and the
// readers it calls); see fuzz/config_harness.h for the input layout and the checks.
#include "fuzz/config_harness.h"

static ocr_status_t parse_json(OcrConfig **out, const char *text, size_t len, const char *name) {
    (void)len;  // text is NUL-terminated; an embedded NUL ends the JSON as it would from a file
    return ocr_config_parse(out, text, name);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    config_harness_init();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    config_harness_run(data, size, "fuzz.json", parse_json);
    return 0;
}

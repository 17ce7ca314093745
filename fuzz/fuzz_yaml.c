// PaddleOCR YAML configs (core/yaml.c through ocr_config_parse_yaml) and `-o` overrides,
// validated as every command does; see fuzz/config_harness.h for the input layout and the
// checks. YAML-specific: a parsed document is a cJSON tree that must serialise and parse as
// JSON again (no NaN/inf leak into JSON text unnoticed, no dangling aliases).
#include "fuzz/config_harness.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    config_harness_init();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    config_harness_run(data, size, "fuzz.yml", ocr_config_parse_yaml);
    return 0;
}

// The body shared by fuzz_config.c (JSON) and fuzz_yaml.c (PaddleOCR YAML): after the text is
// parsed, the `-o` overrides of the input are applied and the whole config is validated as
// every command does (a distillation config rewritten into its trained network's first,
// training/distill_config.h; then run_config_read: Global, Optimizer, Loss, PostProcess, Metric,
// the Architecture, the AMP keys, the transform lists and the loaders).
//
// Input: the config text, then optionally a NUL byte and NUL-separated `-o` assignments
// ("Global.epoch_num=3").
// Global.character_dict_path, when it is a string, is pointed at a small dictionary in the
// temporary directory first: the architecture reads it to size the head, and a fuzzed path
// must not make the harness read whatever file it names (a FIFO or /dev/zero would hang it).
// Checked: a config that parses serialises to JSON that parses again; every error names
// the config (`name`).
#ifndef OCR_FUZZ_CONFIG_HARNESS_H
#define OCR_FUZZ_CONFIG_HARNESS_H

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "training/distill_config.h"
#include "training/run_config.h"
#include "core/config.h"
#include "fuzz/fuzz_util.h"

void run_config_register_no_effect_keys(void);

static char fuzz_dict_json[4200];

static void config_harness_init(void) {
    fuzz_quiet();
    run_config_register_no_effect_keys();
    static const char dict[] = "a\nb\nc\n1\n2\n";
    const char *p = fuzz_temp_file("dict.txt", dict, sizeof dict - 1);
    cJSON *s = cJSON_CreateString(p);
    char *j = cJSON_PrintUnformatted(s);
    snprintf(fuzz_dict_json, sizeof fuzz_dict_json, "%s", j);
    free(j);
    cJSON_Delete(s);
}

// parse: the format's parser on (text, len) with NUL-terminated text.
static void config_harness_run(const uint8_t *data, size_t size, const char *name,
                               ocr_status_t (*parse)(OcrConfig **, const char *, size_t, const char *)) {
    size_t head;
    const uint8_t *tail;
    size_t tail_size;
    fuzz_split(data, size, 0, &head, &tail, &tail_size);
    char *text = malloc(head + 1);
    memcpy(text, data, head);
    text[head] = '\0';
    OcrConfig *cfg = NULL;
    ocr_status_t st = parse(&cfg, text, head, name);
    free(text);
    if (st != OCR_OK) {
        OCR_ASSERT(strstr(ocr_last_error(), name), "parse error without the file name: %s", ocr_last_error());
        return;
    }
    // The overrides, each NUL-terminated in its own copy (an unterminated last one too).
    char *rest = malloc(tail_size + 1);
    if (tail) memcpy(rest, tail, tail_size);
    rest[tail_size] = '\0';
    for (size_t off = 0; tail && off <= tail_size; off += strlen(rest + off) + 1) {
        if (ocr_config_apply_override(cfg, rest + off) != OCR_OK) {
            OCR_ASSERT(ocr_last_error()[0], "override refused without a message");
            break;
        }
    }
    free(rest);
    const cJSON *dict = ocr_config_node(cfg, "Global.character_dict_path");
    if (cJSON_IsString(dict)) OCR_ASSERT(ocr_config_set(cfg, "Global.character_dict_path", fuzz_dict_json) == OCR_OK,
                                         "%s", ocr_last_error());
    RunConfig rc;
    // A distillation config becomes its trained network's first (as run_config_load does).
    if (distill_config_rewrite(cfg) != OCR_OK)
        OCR_ASSERT(strstr(ocr_last_error(), name), "distillation error without the file name: %s", ocr_last_error());
    else if (run_config_read(&rc, cfg, RUN_NEED_TRAIN) != OCR_OK)
        OCR_ASSERT(strstr(ocr_last_error(), name), "validation error without the file name: %s", ocr_last_error());
    char *json = ocr_config_to_json(cfg);
    if (json) {
        OcrConfig *again = NULL;
        OCR_ASSERT(ocr_config_parse(&again, json, "roundtrip.json") == OCR_OK, "serialised config does not parse: %s",
                   ocr_last_error());
        ocr_config_free(again);
        free(json);
    }
    ocr_config_free(cfg);
}

#endif

// Configuration: JSON files with PaddleOCR's section names (Global, Architecture, Loss,
// Optimizer, Train, Eval), typed lookup by dotted path, and `-o Key.path=value` overrides.
//
// Lookups take a default for optional keys. A key that is present with the wrong type is an
// error that names the key, the expected type, what was found and the file, so nothing
// starts on a half-understood config.
#ifndef OCR_CORE_CONFIG_H
#define OCR_CORE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

struct cJSON;
typedef struct OcrConfig OcrConfig;

// Reads JSON (`.json`, or text starting with '{') or PaddleOCR's YAML (`.yml`, `.yaml`, any
// other file) into the same tree; see core/yaml.h for how YAML values are typed. Errors name
// file:line:column.
ocr_status_t ocr_config_load(OcrConfig **out, const char *path);
// `name` is used in messages in place of a file name.
ocr_status_t ocr_config_parse(OcrConfig **out, const char *json_text, const char *name);
// YAML text of len bytes (need not be NUL-terminated).
ocr_status_t ocr_config_parse_yaml(OcrConfig **out, const char *text, size_t len, const char *name);
// 1 when the path ends in .yml or .yaml.
int ocr_config_path_is_yaml(const char *path);
void ocr_config_free(OcrConfig *cfg);
// An independent copy of cfg (same keys, values and source name), for per-run overrides.
ocr_status_t ocr_config_clone(OcrConfig **out, const OcrConfig *cfg);
// File name (or the name given to parse) for messages.
const char *ocr_config_source(const OcrConfig *cfg);

// Applies "Key.path=value". The value is parsed as JSON when it is a number, true/false,
// null, a list [..], an object {..} or a quoted string; then as a YAML flow list/mapping
// ([a.txt, b.txt], {prob: 0.5}); then as a YAML plain scalar typed as PaddleOCR's -o does
// (True, yes, ~, 1.0e-4: core/yaml.h); anything else is a plain string (Global.device=cpu). Missing intermediate objects are created. A path
// through a non-object (e.g. "Global.epoch_num.x") is an error naming the key.
ocr_status_t ocr_config_apply_override(OcrConfig *cfg, const char *assignment);
// Sets a value from JSON text at a dotted path (same rules as above).
ocr_status_t ocr_config_set(OcrConfig *cfg, const char *path, const char *value_text);

int ocr_config_has(const OcrConfig *cfg, const char *path);
// The raw node (NULL when absent); for walking lists of objects such as transforms.
const struct cJSON *ocr_config_node(const OcrConfig *cfg, const char *path);
struct cJSON *ocr_config_root(OcrConfig *cfg);

// Typed getters: *out = default when the key is absent; error when present with another type.
// Integers must be whole numbers within range; doubles accept integers. A JSON null counts as
// absent (PaddleOCR configs write `checkpoints: null` for "not set"). A path that runs through
// a present non-object ("Optimizer.lr.learning_rate" when Optimizer.lr is a number) is an error.
// Paths index lists with numbers: "Train.dataset.transforms.0.DecodeImage.img_mode".
ocr_status_t ocr_config_get_int(const OcrConfig *cfg, const char *path, int64_t def, int64_t *out);
ocr_status_t ocr_config_get_double(const OcrConfig *cfg, const char *path, double def, double *out);
ocr_status_t ocr_config_get_bool(const OcrConfig *cfg, const char *path, int def, int *out);
// The returned string is owned by the config (or is `def`).
ocr_status_t ocr_config_get_string(const OcrConfig *cfg, const char *path, const char *def, const char **out);
// Lists of numbers: fills up to max entries, *count = number present (error when more than max).
// Absent: *count = 0 and out untouched. A single number is accepted as a list of one.
ocr_status_t ocr_config_get_int_list(const OcrConfig *cfg, const char *path, int64_t *out, int max, int *count);
ocr_status_t ocr_config_get_double_list(const OcrConfig *cfg, const char *path, double *out, int max, int *count);

// Required variants: absent is an error naming the key and the file.
ocr_status_t ocr_config_require_int(const OcrConfig *cfg, const char *path, int64_t *out);
ocr_status_t ocr_config_require_double(const OcrConfig *cfg, const char *path, double *out);
ocr_status_t ocr_config_require_string(const OcrConfig *cfg, const char *path, const char **out);

// Range check helper: error "file: Key.path must be in [lo, hi], got v".
ocr_status_t ocr_config_check_range(const OcrConfig *cfg, const char *path, double value, double lo, double hi);

// Validates that every key under `section_path` (an object) is one of `known` (NULL-terminated);
// an unknown key is an error that suggests the nearest known key by edit distance.
ocr_status_t ocr_config_check_keys(const OcrConfig *cfg, const char *section_path, const char *const *known);

// Keys that PaddleOCR reads but that have no effect here (Global.debug, Global.use_xpu, ...).
// The application registers its one table at start-up (training/run_config.c); from then on
// ocr_config_check_keys accepts an entry's key in any section whose path matches `section`
// (fnmatch(3) without flags: `*` also matches dots, e.g. "*.dataset.transforms.*.DecodeImage")
// and records it in the config it was checking, with the reason.
typedef struct {
    const char *section;
    const char *key;     // NULL ends the table
    const char *reason;  // one line: why it has no effect here
} OcrNoEffectKey;

// Borrows `table` (static storage); NULL removes it. Not thread-safe: call before reading configs.
void ocr_config_set_no_effect_keys(const OcrNoEffectKey *table);
// The no-effect keys found in cfg so far by ocr_config_check_keys, each once, in the order met:
// the full dotted path ("Global.debug"), and *reason from the table.
int ocr_config_num_ignored(const OcrConfig *cfg);
// Records a present key that a validator accepts but does not use in this configuration (e.g.
// label_file_list of an LMDBDataSet), with why; listed with the table's keys, once.
void ocr_config_record_ignored(const OcrConfig *cfg, const char *path, const char *reason);
const char *ocr_config_ignored(const OcrConfig *cfg, int i, const char **reason);

// Serialises the whole config (after overrides) as formatted JSON; caller frees with free().
char *ocr_config_to_json(const OcrConfig *cfg);

// Levenshtein distance between two byte strings (used for "did you mean" suggestions).
int ocr_edit_distance(const char *a, const char *b);

#endif

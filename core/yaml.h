// PaddleOCR's YAML configs, read into the same cJSON tree the JSON path builds (libyaml's
// event parser underneath).
//
// Values are typed as PaddleOCR's `yaml.load(f, Loader=yaml.Loader)` (PyYAML, YAML 1.1) types
// them. A plain (unquoted) scalar is:
// - null:    empty, `~`, `null`, `Null`, `NULL`
// - boolean: `true/True/TRUE/false/False/FALSE`, and YAML 1.1's `yes/no/on/off` (all three cases)
// - integer: decimal `[-+]?(0|[1-9][0-9_]*)`, `0b...`, octal `0...`, `0x...`, sexagesimal `1:30`
// - float:   only with a dot: `0.001`, `1.0e-4`, `3.0e-05`, `.5`, `1.`, `.inf`, `-.inf`, `.nan`.
//            As in PyYAML the exponent needs a sign and a dot is required, so `1e-4` and `1.0e4`
//            stay strings (the config getters then say so with a hint).
// - a string otherwise. Quoted and block scalars are always strings.
// Explicit tags !!str !!int !!float !!bool !!null, !!seq, !!map and !!python/tuple (a list) are
// honoured; any other tag is an error.
//
// Anchors (&a) and aliases (*a) are expanded into copies; merge keys (`<<: *a` or `<<: [*a, *b]`)
// add the keys the mapping does not set itself (earlier sources win, as in PyYAML). Limits that
// PyYAML does not have but a config never needs, so that hostile input cannot exhaust memory or
// the stack: 128 levels of nesting and 1,000,000 values after alias expansion.
//
// Differences from PyYAML, all errors rather than silent choices: a key that appears twice in
// one mapping (PyYAML keeps the last one), a second document in the stream, a duplicate anchor,
// an alias to an unknown anchor, a non-scalar key, and an integer beyond ±2^53 (a cJSON number
// is a double). Every error names the file, line and column: `cfg.yml:12:5: ...`.
#ifndef OCR_CORE_YAML_H
#define OCR_CORE_YAML_H

#include <stddef.h>

#include "core/error.h"

struct cJSON;

// Parses a YAML stream of one document. `name` is used in messages (file name). The text
// need not be NUL-terminated (len bytes are read), so fuzzers can pass raw buffers.
// *out is the document's root (any kind of node; an empty document is null). Caller frees it
// with cJSON_Delete.
ocr_status_t ocr_yaml_parse(struct cJSON **out, const char *text, size_t len, const char *name);

// Resolves one plain scalar as above (null, boolean, integer, float or string); NULL on OOM.
// An integer beyond ±2^53 comes back as a string.
struct cJSON *ocr_yaml_plain_scalar(const char *text, size_t len);

// 1 when `text` (len bytes) is a number to a JSON reader but a string to YAML 1.1 (`1e-4`,
// `1.0e4`, `1E5`): the hint for a type error.
int ocr_yaml_is_yaml11_number_string(const char *text, size_t len);

#endif

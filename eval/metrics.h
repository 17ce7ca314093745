// Recognition metrics with PaddleOCR's RecMetric semantics (ppocr/metrics/rec_metric.py),
// counted over Unicode code points (eval/utf8.h), so Chinese text is measured per character.
//
// Per (prediction, reference) pair, both strings are first normalised:
//   ignore_space: every ' ' (U+0020 only) is removed;
//   is_filter:    only [0-9a-zA-Z] are kept, and lower-cased.
// Then:
//   correct       exact equality of the normalised strings;
//   norm_edit     Levenshtein(p, r) / max(|p|, |r|), 0 when both are empty (rapidfuzz's
//                 Levenshtein.normalized_distance with unit weights);
//   edits, chars  Levenshtein(p, r) and |r|, for the character error rate.
// Aggregates, as PaddleOCR (N = pairs added):
//   acc           = correct / (N + 1e-5)
//   norm_edit_dis = 1 − Σ norm_edit / (N + 1e-5)
//   cer           = Σ edits / Σ |r| over the normalised references (0 when both are 0;
//                   Σ edits when there are no reference characters at all). Not part of
//                   PaddleOCR's RecMetric; this is the usual corpus-level definition.
// Unlike PaddleOCR's get_metric, reading the aggregates does not reset them.
#ifndef OCR_EVAL_METRICS_H
#define OCR_EVAL_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef struct {
    int ignore_space;  // PaddleOCR default: 1
    int is_filter;     // PaddleOCR default: 0
} RecMetricOptions;

// PaddleOCR's defaults: ignore_space = 1, is_filter = 0.
static inline RecMetricOptions rec_metric_default_options(void) {
    RecMetricOptions o = {1, 0};
    return o;
}

typedef struct {
    RecMetricOptions opt;
    int64_t count;         // pairs added
    int64_t correct;       // exact matches
    double norm_edit_sum;  // Σ normalised edit distance
    int64_t edits;         // Σ Levenshtein distance
    int64_t ref_chars;     // Σ reference length (code points, after normalisation)
} RecMetric;

typedef struct {
    double acc;
    double norm_edit_dis;
    double cer;
    int64_t count;
} RecMetricResult;

void rec_metric_init(RecMetric *m, RecMetricOptions opt);
// Adds one pair (NUL-terminated UTF-8; invalid bytes count as one character each).
// OCR_ERR_OOM only if scratch for very long strings cannot be allocated.
ocr_status_t rec_metric_add(RecMetric *m, const char *pred, const char *ref);
RecMetricResult rec_metric_get(const RecMetric *m);
// Zeroes the counts, keeping the options.
void rec_metric_reset(RecMetric *m);

// ---- building blocks ---------------------------------------------------------------------
// Levenshtein distance (unit insert/delete/substitute costs) between code point arrays.
// Needs min(na, nb) + 1 ints of scratch: uses the stack up to 256, else malloc; returns −1
// only when that allocation fails.
int64_t ocr_levenshtein(const uint32_t *a, size_t na, const uint32_t *b, size_t nb);

// rapidfuzz's Levenshtein.normalized_distance on UTF-8 strings (no normalisation applied):
// distance / max(length), 0 for two empty strings. Returns −1 on allocation failure.
double ocr_normalized_edit_distance(const char *a, const char *b);

#endif

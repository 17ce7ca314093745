// Recognition metrics for the evaluator, with PaddleOCR's RecMetric semantics (acc,
// norm_edit_dis = 1 − mean normalised Levenshtein, ignore_space, is_filter) plus the corpus
// CER, over Unicode code points.
//
// This mirrors eval/metrics.h. It exists because data/utf8.h and eval/utf8.h both define
// ocr_utf8_decode/encode/valid/length with different signatures: in a program that links
// both libraries the linker resolves eval/metrics.c's calls to data/'s functions and the
// metrics come out wrong (every pair "equal"). Until one of them is renamed, the application
// uses this self-contained copy.
#ifndef OCR_APP_TEXT_METRIC_H
#define OCR_APP_TEXT_METRIC_H

#include <stdint.h>

#include "core/error.h"

typedef struct {
    int ignore_space, is_filter;
    int64_t count, correct, edits, ref_chars;
    double norm_edit_sum;
} TextMetric;

void text_metric_init(TextMetric *m, int ignore_space, int is_filter);
ocr_status_t text_metric_add(TextMetric *m, const char *pred, const char *ref);
double text_metric_acc(const TextMetric *m);            // correct / (N + 1e-5)
double text_metric_norm_edit_dis(const TextMetric *m);  // 1 − Σ d/max(len) / (N + 1e-5)
double text_metric_cer(const TextMetric *m);            // Σ d / Σ |ref|

#endif

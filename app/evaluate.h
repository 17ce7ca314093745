// Evaluation of a model on a feed (the Eval split): inference forward passes, greedy CTC
// decoding (PaddleOCR's CTCLabelDecode) and RecMetric (accuracy, normalised edit distance)
// plus the character error rate.
#ifndef OCR_APP_EVALUATE_H
#define OCR_APP_EVALUATE_H

#include <stdint.h>

#include "app/feed.h"
#include "core/error.h"
#include "eval/metrics.h"
#include "models/model.h"

typedef struct {
    double acc, norm_edit_dis, cer;
    int64_t samples;
    double seconds;
    double samples_per_s;
    int64_t skipped;  // images that could not be loaded
} EvalResult;

// Runs one pass over the whole feed (from its first batch).
ocr_status_t evaluate(OcrModel *m, Feed *feed, const OcrDict *dict, RecMetricOptions mopt, EvalResult *out);

// Greedy decode of sample b of the model's last inference pass (probabilities (B, T, C) of any
// float dtype) into text; *conf the mean of the kept frames' probabilities.
ocr_status_t decode_sample(const OcrModel *m, const OcrDict *dict, int b, char *text, size_t cap, float *conf);

#endif

// `ocrtrain eval --lines FILE`: every scored and unreadable line of an evaluation with its outcome,
// one TSV row each (bad label lines are in the skip counts, not here).
#ifndef OCR_TRAINING_EVAL_TSV_H
#define OCR_TRAINING_EVAL_TSV_H

#include "core/error.h"
#include "training/evaluate.h"

// Columns: where, image, path (in_shape, widened, squeezed, unreadable), width, label,
// prediction, correct (1, 0, "-" when not scored), flags (too_long_for_model,
// over_max_text_length, unknown_chars, comma-separated). Written atomically.
ocr_status_t eval_lines_write_tsv(const char *path, const EvalSet *s, const EvalLine *lines);

#endif

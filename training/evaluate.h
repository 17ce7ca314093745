// Evaluation of a model on the Eval split: every label line is scored, none is dropped or
// squeezed quietly.
//
// The lines come from the Eval label files themselves (app-side reader, eval_set_read), not
// through the training loader, which rejects labels longer than Global.max_text_length and
// caps every line at the configured width. Each line takes one path, counted in EvalPaths:
//   in_shape   ceil(H·w/h) <= W of the Eval RecResizeImg: resized to H and padded to W, exactly
//              what the loader's RecResizeImg gives (and what the trainer saw);
//   widened    wider than the eval shape: evaluated at the width it needs, W' = ceil(H·w/h), as
//              PaddleOCR's predictor (tools/infer/predict_rec.py) does; widened lines are sorted
//              by width and batched, each batch padded to its widest line, and a batch holds at
//              most batch·W columns in all (never more activation memory than an in-shape batch);
//   squeezed   wider, but the network takes one input width only (SVTRNet's positional
//              embedding): stretched to W as PaddleOCR's SVTR resize does.
// Flags on scored lines (a line can have several):
//   too_long_for_model    the label needs more CTC frames (characters + repeated neighbours)
//                         than the sequence the network produces at the line's width: it cannot
//                         be read exactly and is scored from its prediction (it is counted
//                         wrong unless the metric's ignore_space/is_filter make it match);
//   over_max_text_length  more code points than Global.max_text_length (training skips them;
//                         evaluation scores them);
//   unknown_chars         characters the dictionary lacks: scored against the label as written,
//                         so those characters count as errors (PaddleOCR's eval drops them from
//                         the reference; we do not, the model cannot read them).
// Not scored, counted by reason with an example file:line (OcrSkipStats):
//   unreadable            the image is missing, unreadable, corrupt or unsupported;
//   bad_lines             label lines without the delimiter, invalid UTF-8, an empty path or an
//                         empty label.
// The reference text is the label as written with the dictionary's case folding (the default
// 0-9a-z charset lower-cases); the metric options (ignore_space, is_filter) then apply to both.
// Beside the configured metric, two accuracies that do not depend on Metric's options, so that
// two sets (Eval, EvalGeneral) or two configs are read on the same scale:
//   exact          prediction == reference (after case folding only, spaces kept);
//   spaces ignored equal once every ' ' is removed from both (a receipt's "TOTAL 12.50" read as
//                  "TOTAL12.50" counts; PaddleOCR's default ignore_space=True gives the same).
#ifndef OCR_TRAINING_EVALUATE_H
#define OCR_TRAINING_EVALUATE_H

#include <stdint.h>

#include "training/feed.h"
#include "core/error.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "eval/metrics.h"
#include "models/model.h"

// The label lines of one or more PaddleOCR label files, or the records of an LMDBDataSet.
typedef struct {
    int64_t n;
    char **path;           // image paths, data_dir joined
    char **label;          // label text as written
    char **where;          // "labels.txt:12", for messages
    int64_t bad_lines;     // lines that are not scored (no delimiter, bad UTF-8, empty path or label)
    OcrSkipStats bad;      // their reasons and first examples
    int64_t cap_;
    // LMDBDataSet (data/lmdb_dataset.h): path[i] is the environment, the image is record
    // image-%09d lmdb_record_[i] of environment lmdb_env_[i] (NULL for label files).
    struct OcrLmdbEnv **lmdb_envs_;
    int num_lmdb_envs_;
    int32_t *lmdb_env_;
    int64_t *lmdb_record_;
} EvalSet;

// Appends the lines of one label file (path<delimiter>label; a UTF-8 BOM and '\r' line ends are
// removed, empty lines ignored, the label is the second field as PaddleOCR's split()[1], a
// JSON-list path takes its first entry). data_dir NULL or "": paths as written. delimiter NULL:
// "\t". A missing label file is OCR_ERR_NOT_FOUND naming it.
ocr_status_t eval_set_read_file(EvalSet *s, const char *label_file, const char *data_dir, const char *delimiter);
// Every label file of a section's loader config (Eval.dataset), every line (ratio_list < 1 is
// not applied to evaluation; a warning says so).
ocr_status_t eval_set_read(EvalSet *s, const OcrLoaderConfig *lc);
void eval_set_free(EvalSet *s);

typedef struct {
    int height, width, channels;  // the eval shape (Eval RecResizeImg, else the architecture's)
    ocr_channel_order_t order;    // DecodeImage img_mode
    int batch;                    // lines per batch (Eval.loader.batch_size_per_card)
    int fixed_width;              // the network takes only `width` (SVTRNet): squeeze instead of widen
    int max_text_length;          // Global.max_text_length (for the over_max_text_length count)
    RecMetricOptions mopt;
} EvalOptions;

// Options from a section's loader config and the model.
void eval_options_from_loader(EvalOptions *o, const OcrLoaderConfig *lc, const OcrModel *m, RecMetricOptions mopt);

typedef struct {
    int64_t lines;                 // label lines read (scored + unreadable + bad_lines)
    int64_t scored;                // lines in the metrics
    int64_t in_shape, widened, squeezed;
    int64_t too_long_for_model, over_max_text_length, unknown_chars;
    int64_t unreadable, bad_lines;
    OcrSkipStats skipped;          // unreadable images and bad lines by reason, with examples
} EvalPaths;

typedef struct {
    double acc, norm_edit_dis, cer;
    double acc_exact, acc_nospace;  // exact / spaces-ignored matches over scored lines (+1e-5, as acc)
    int64_t samples;       // scored lines
    double seconds;
    double samples_per_s;
    int64_t skipped;       // lines not scored (paths.unreadable + paths.bad_lines)
    EvalPaths paths;
} EvalResult;

// One line's outcome, in the set's order.
enum { EVAL_LINE_IN_SHAPE = 0, EVAL_LINE_WIDENED, EVAL_LINE_SQUEEZED, EVAL_LINE_UNREADABLE };
enum { EVAL_FLAG_TOO_LONG_FOR_MODEL = 1, EVAL_FLAG_OVER_MAX_TEXT_LENGTH = 2, EVAL_FLAG_UNKNOWN_CHARS = 4 };
typedef struct {
    uint8_t path;       // EVAL_LINE_*
    uint8_t flags;      // EVAL_FLAG_*
    uint8_t scored, correct;
    uint8_t correct_exact, correct_nospace;  // exact match; equal with every ' ' removed
    int32_t width;      // the input width the line was evaluated at (0: not scored)
    int32_t edits, ref_chars;  // Levenshtein distance and reference characters after normalisation
    double norm_edit;
    float confidence;
    char *prediction;   // malloc'd (eval_lines_free); NULL when not scored
} EvalLine;

// Scores every line of the set. lines: NULL, or s->n entries filled in the set's order
// (free their predictions with eval_lines_free).
ocr_status_t evaluate_set(OcrModel *m, const EvalSet *s, const OcrDict *dict, const EvalOptions *o, EvalResult *out,
                          EvalLine *lines);
void eval_lines_free(EvalLine *lines, int64_t n);

// The evaluation during training and of `ocrtrain eval`: the lines of the feed's label files
// (its loader config) with its shape and batch; the feed's loader itself is not read.
ocr_status_t evaluate(OcrModel *m, Feed *feed, const OcrDict *dict, RecMetricOptions mopt, EvalResult *out);

// One line of the path counts for logs: "252 lines: 252 scored (173 in shape, 79 widened, ...".
void eval_paths_summary(const EvalPaths *p, char *buf, size_t cap);
// {"total", "scored", "in_shape", "widened", "squeezed", "too_long_for_model",
//  "over_max_text_length", "unknown_chars", "unreadable", "bad_lines",
//  "not_scored": {reason: {"count", "example"}}} (a new cJSON object).
struct cJSON;
struct cJSON *eval_paths_json(const EvalPaths *p);

// Greedy decode of sample b of the model's last inference pass (probabilities (B, T, C) of any
// float dtype) into text; *conf the mean of the kept frames' probabilities.
ocr_status_t decode_sample(const OcrModel *m, const OcrDict *dict, int b, char *text, size_t cap, float *conf);

#endif

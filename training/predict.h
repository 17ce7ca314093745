// `ocrtrain predict`: its inputs as images (an image file, a folder searched recursively, or a
// PaddleOCR label file of path<TAB>label lines), and their recognition with the config's model and
// eval preprocessing, scored against the labels where there are any.
#ifndef OCR_TRAINING_PREDICT_H
#define OCR_TRAINING_PREDICT_H

#include <stdint.h>

#include "core/config.h"
#include "core/error.h"
#include "eval/metrics.h"
#include "training/inference.h"
#include "training/run_config.h"

typedef struct {
    char *path;
    char *label;  // NULL: no label
    char *where;  // the input it came from ("labels.txt:3", or the path)
} PredictItem;

typedef struct {
    PredictItem *v;
    int n, cap_;
    int64_t other_files;  // files in the folders that are not images by extension (not read)
    int bad;              // inputs and label lines that cannot be predicted
    int any_labels;       // a label file was among the inputs
    char **problems;      // why, one message per unusable input, in input order (for the user)
    int n_problems;
} PredictInputs;

// The images of args[0..n), in order: a folder's images (*.png, *.jpg, *.jpeg by extension) in
// sorted path order, symbolic links to folders not followed; a file that starts like a PNG or
// JPEG as itself; any other file as a label file, its paths relative to data_dir (NULL: the
// label file's folder). A path that does not exist is kept (reported when it is loaded). A
// problem with one input is counted in in->bad with a message in in->problems, not an error;
// errors are OOM, and an unreadable folder (OOM too, with its problem message).
ocr_status_t predict_collect(PredictInputs *in, const char *const *args, int n, const char *data_dir);
void predict_inputs_free(PredictInputs *in);

typedef struct {
    const char *weights;  // a .safetensors file or a checkpoint directory
    const char *device;   // a resolved device name (training_resolve_device)
    int batch;            // images per batch (PaddleOCR's rec_batch_num)
    int min_width;        // the narrowest batch width (predict_batch_width)
} PredictOptions;

typedef struct {
    int n;
    Prediction *pred;  // per item, in input order; pred[i].ok 0: not read (pred[i].error says why)
    int8_t *correct;   // per item: -1 no label (or not read), 0 wrong, 1 right
    int unreadable;    // items whose image could not be loaded
    RecMetric metric;  // over the labelled items that were read
} PredictResults;

// Loads the dictionary and the model (float32) and recognises every item at the height and channel
// order of the eval transforms (the Train ones without an Eval section; the model's input size
// without a resize), batched and padded as PaddleOCR's predictor does. Labelled items are judged by
// the config's metric (Metric.ignore_space / is_filter), the reference with the dictionary's case
// folding, as `ocrtrain eval` does. Free r with predict_results_free, also after an error.
ocr_status_t predict_run(const OcrConfig *cfg, const RunConfig *rc, const PredictOptions *o, const PredictInputs *in,
                         PredictResults *r);
void predict_results_free(PredictResults *r);

#endif

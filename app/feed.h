// Batches for the trainer and the evaluator: a dataset split (Train or Eval) read in a
// deterministic order, decoded, augmented and resized into uint8 NHWC batches with padded
// CTC labels.
//
// Everything random is a pure function of (Global.seed, epoch, position in the epoch): the
// shuffle of epoch e comes from Philox stream FEED_SHUFFLE_STREAM + e, the augmentation of
// the sample at position k of epoch e from a stream derived from (e, k). So a run resumed
// at (epoch, batch) sees exactly the batches an uninterrupted run would have seen.
//
// A sample whose image is missing or corrupt is counted by reason (reported at the end) and
// replaced: in training by a sample drawn at random (PaddleOCR's behaviour), in evaluation
// it is left out (the batch is shorter), so every sample is scored at most once.
#ifndef OCR_APP_FEED_H
#define OCR_APP_FEED_H

#include <stdint.h>

#include "app/run_config.h"
#include "core/config.h"
#include "core/tensor.h"
#include "data/dataset.h"
#include "data/dict.h"
#include "data/transforms.h"

#define FEED_SHUFFLE_STREAM 0x4665656400000000ull  // "Feed" << 32
#define FEED_AUG_STREAM 0x4175670000000000ull      // "Aug" << 40

typedef struct {
    int capacity;            // B
    int count;               // samples filled (the last evaluation batch may be short)
    int height, width, channels;
    int max_len;             // label columns
    uint8_t *pixels;         // (B, H, W, C)
    int32_t *labels;         // (B, max_len), zero-padded
    int32_t *lengths;        // (B)
    int32_t *widths;         // (B) resized widths: columns past them are padding
    int64_t *index;          // (B) dataset indices of the (first) sample
} FeedBatch;

ocr_status_t feed_batch_alloc(FeedBatch *b, int capacity, int height, int width, int channels, int max_len);
void feed_batch_free(FeedBatch *b);

typedef struct {
    OcrDataset ds;
    OcrTransformList tl;
    const OcrDict *dict;
    int training;
    int shuffle, drop_last, batch_size;
    uint64_t seed;
    int height, width, channels, max_len;
    int64_t epoch;        // current epoch (0-based)
    int64_t next_batch;   // next batch of the epoch
    int64_t *order;       // this epoch's sample order
    int64_t order_n;
    OcrSkipStats skipped; // image problems met while loading
} Feed;

// split: "Train" or "Eval". The dictionary must outlive the feed. Missing label files are
// OCR_ERR_NOT_FOUND naming them; an empty dataset OCR_ERR_FORMAT.
ocr_status_t feed_open(Feed *f, const OcrConfig *cfg, const RunConfig *rc, const char *split, const OcrDict *dict,
                       int training);
void feed_close(Feed *f);
int64_t feed_batches_per_epoch(const Feed *f);
int64_t feed_num_samples(const Feed *f);
// Positions the feed at batch `batch` of epoch `epoch` (resume).
void feed_seek(Feed *f, int64_t epoch, int64_t batch);
// The next batch of the current epoch into b (capacity >= batch_size); *end = 1 (and nothing
// filled) when the epoch is over; the next call starts the following epoch.
ocr_status_t feed_next(Feed *f, FeedBatch *b, int *end);

// Normalises a batch into images (count, H, W, C) f32: (x/255 − 0.5)/0.5, and exactly 0
// (PaddleOCR's pad value) in the padded columns. images must hold count·H·W·C floats.
void feed_normalize(const FeedBatch *b, float *images);

// The ground-truth text of sample i of a batch (its label classes joined, as PaddleOCR
// decodes the label), into text (cap bytes).
void feed_label_text(const OcrDict *dict, const FeedBatch *b, int i, char *text, size_t cap);

#endif

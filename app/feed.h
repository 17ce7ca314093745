// Batches for the trainer and the evaluator: a thin layer over the data library's threaded
// loader (data/loader.h: dataset or packed cache → transforms → uint8 NHWC batches, in order,
// prefetched by worker threads).
//
// Everything random is a pure function of (Global.seed, epoch, position in the epoch), so a
// run resumed at (epoch, batch) sees exactly the batches an uninterrupted run would have seen.
// A sample whose image is missing or corrupt is counted by reason and replaced (a random
// sample in training, the next one in evaluation), as PaddleOCR does.
#ifndef OCR_APP_FEED_H
#define OCR_APP_FEED_H

#include <stdint.h>

#include "app/run_config.h"
#include "core/config.h"
#include "core/tensor.h"
#include "data/dataset.h"
#include "data/dict.h"
#include "data/loader.h"

// A batch: views into the loader's buffer (or owned buffers, feed_batch_alloc).
typedef struct {
    int capacity;            // B the buffers hold
    int count;               // samples in this batch
    int height, width, channels;
    int max_len;             // label columns
    uint8_t *pixels;         // (count, H, W, C)
    int32_t *labels;         // (count, max_len), zero-padded
    int32_t *lengths;        // (count)
    int32_t *widths;         // (count) resized widths: columns past them are padding
    int64_t *index;          // (count) dataset indices
    int owned;
} FeedBatch;

// Owned buffers (for prediction, which builds its own batches).
ocr_status_t feed_batch_alloc(FeedBatch *b, int capacity, int height, int width, int channels, int max_len);
void feed_batch_free(FeedBatch *b);

typedef struct {
    OcrLoaderConfig lc;
    OcrLoader *loader;
    int lc_ok;
    const OcrDict *dict;
    int training;
    int batch_size;                   // the configured batch (the first scale's)
    int max_batch, max_height, max_width;  // over the scales: what buffers must hold
    int channels, max_len;
    int64_t epoch, next_batch;        // the position of the next batch
    int64_t batches_per_epoch;
    const OcrBatch *held;             // the batch handed out last (released by the next call)
} Feed;

// split: "Train" or "Eval". batch_override > 0 replaces loader.batch_size_per_card (every
// scale's batch is scaled alike). The dictionary must outlive the feed. Missing label files
// are OCR_ERR_NOT_FOUND naming them; an empty dataset OCR_ERR_FORMAT.
ocr_status_t feed_open(Feed *f, const OcrConfig *cfg, const char *split, const OcrDict *dict, int training,
                       int batch_override);
void feed_close(Feed *f);
int64_t feed_batches_per_epoch(const Feed *f);
int64_t feed_num_samples(const Feed *f);
// Positions the feed at batch `batch` of epoch `epoch` (resume; evaluation restarts).
ocr_status_t feed_seek(Feed *f, int64_t epoch, int64_t batch);
// The next batch of the current epoch into b (views, valid until the next call); *end = 1
// (nothing filled) when the epoch is over; the next call starts the following epoch.
ocr_status_t feed_next(Feed *f, FeedBatch *b, int *end);
// Image problems met so far (skipped and replaced samples).
void feed_skip_stats(const Feed *f, OcrSkipStats *out);

// Normalises a batch into images (count, H, W, C) f32: (x/255 − 0.5)/0.5, and exactly 0
// (PaddleOCR's pad value) in the padded columns. images must hold count·H·W·C floats.
void feed_normalize(const FeedBatch *b, float *images);

// The ground-truth text of sample i of a batch (its label classes joined, as PaddleOCR
// decodes the label), into text (cap bytes).
void feed_label_text(const OcrDict *dict, const FeedBatch *b, int i, char *text, size_t cap);

#endif

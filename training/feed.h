// Batches for the trainer and the evaluator: a thin layer over the data library's threaded
// loader (data/loader.h: dataset or packed cache → transforms → uint8 NHWC batches, in order,
// prefetched by worker threads).
//
// Everything random is a pure function of (Global.seed, epoch, position in the epoch), so a
// run resumed at (epoch, batch) sees exactly the batches an uninterrupted run would have seen.
// A sample whose image is missing or corrupt is counted by reason and replaced (a random
// sample in training, the next one in evaluation), as PaddleOCR does.
#ifndef OCR_TRAINING_FEED_H
#define OCR_TRAINING_FEED_H

#include <stdint.h>

#include "training/run_config.h"
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
// Data parallelism: rank `rank` of `world_size` takes its share of every global batch of
// world_size × batch samples from the same seeded epoch order as one process (data/sampler.h).
ocr_status_t feed_open_shard(Feed *f, const OcrConfig *cfg, const char *split, const OcrDict *dict, int training,
                             int batch_override, int rank, int world_size);
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

// ---- batches on the model's device ---------------------------------------------------------------
// A batch as the training step takes it: the loader's uint8 pixels, widths, labels and lengths
// on the model's device (views into an upload slot on a GPU, valid until the slot is reused two
// uploads later; on the CPU views of the loader's batch itself, valid until the next feed_next),
// and the same labels, lengths and widths on the host, where the model's guidance branch reads
// them (MultiHead).
typedef struct {
    OcrTensor images;   // (count, H, W, C) uint8
    OcrTensor widths;   // (count) int32
    OcrTensor labels;   // (count, max_len) int32
    OcrTensor lengths;  // (count) int32
    int count, max_len;
    const int32_t *host_labels, *host_lengths, *host_widths;
    const int64_t *host_index;  // (count) each sample's dataset index (NULL when unknown)
} FeedDeviceBatch;

// A host batch as a FeedDeviceBatch on the CPU: views, nothing copied.
void feed_batch_view(const FeedBatch *b, FeedDeviceBatch *out);

// Batches onto the model's device, the same calls for every device. On a GPU a double-buffered
// upload: per slot one page-locked host buffer and one device buffer (OCR_MEM_DATA) holding
// pixels, widths, lengths and labels back to back. feed_upload copies the batch into the slot's
// page-locked buffer, enqueues one copy to the device on a copy stream of its own and makes the
// device's current (compute) stream wait for it with an event, so the copy of batch n+1 runs
// while step n computes. Before a slot's page-locked buffer is rewritten the host waits for the
// event feed_upload_consumed recorded after the slot's last reader was enqueued (the compute
// stream is then at most two batches behind the host). The device's current stream must stay the
// same between open and close. On the CPU, where the step reads the loader's batch in place, the
// upload is feed_batch_view and holds no buffers.
typedef struct FeedUpload FeedUpload;

// capacity / height / width / channels / max_len: the largest batch (Feed.max_batch, ...).
// OCR_ERR_UNSUPPORTED for a GPU in a build without CUDA.
ocr_status_t feed_upload_open(FeedUpload **out, ocr_device_t device, int capacity, int height, int width, int channels,
                              int max_len);
// Waits for the copies in flight, then frees everything (NULL is fine).
void feed_upload_close(FeedUpload *u);
ocr_status_t feed_upload(FeedUpload *u, const FeedBatch *b, FeedDeviceBatch *out);
// Records, on the compute stream, that everything reading the batch feed_upload handed out last
// has been enqueued: its slot may be refilled once the device gets there.
void feed_upload_consumed(FeedUpload *u);
// Bytes of page-locked host memory (both slots; 0 on the CPU).
size_t feed_upload_pinned_bytes(const FeedUpload *u);

// The ground-truth text of sample i of a batch (its label classes joined, as PaddleOCR
// decodes the label), into text (cap bytes).
void feed_label_text(const OcrDict *dict, const FeedBatch *b, int i, char *text, size_t cap);

#endif

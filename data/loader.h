// The threaded loader: a dataset (label files + images, or a packed cache) through the
// transforms into uint8 NHWC batches, in order, with a bounded prefetch queue.
//
// Work is handed out one sample at a time to N worker threads (pthreads); each batch
// occupies one of a fixed ring of batch buffers (tracked memory, OCR_MEM_DATA), and at
// most `prefetch` batches beyond the one being consumed are prepared. A sample's content
// is a pure function of (seed, epoch, slot) — its augmentation draws come from Philox
// streams derived from them (OCR_LOADER_STREAM) — and batches come out in order, so an
// epoch is identical for any number of threads and across runs.
//
// A sample whose image is missing, unreadable or corrupt (or a damaged pack record) is
// skipped, counted by reason (one warning per file) and replaced as PaddleOCR does: by a
// random sample in training (drawn from the sample's own stream), by the next sample in
// evaluation. Label problems were already counted when the label files (or the pack) were
// read. Statistics are merged in batch order, so they are deterministic too.
//
// Lifetime: create → start_epoch → next/release ... → (start_epoch again) → destroy.
// destroy (or start_epoch) may be called at any point, mid-epoch included: workers finish
// the sample in hand and stop; nothing leaks and nothing waits for the epoch to end.
// The loader's functions are for one consumer thread.
#ifndef OCR_DATA_LOADER_H
#define OCR_DATA_LOADER_H

#include <stdint.h>

#include "core/error.h"
#include "data/dataset.h"
#include "data/dict.h"
#include "data/loader_config.h"
#include "data/sampler.h"
#include "data/transforms.h"

#define OCR_LOADER_STREAM 0xA000000000000000ull  // top bits of every per-sample stream

// A batch: uint8 NHWC images plus labels. Normalisation, (x/255 − 0.5)/0.5, happens on
// the device, which must also write an exact 0 (PaddleOCR's pad value, mid-grey 127.5 —
// not representable in uint8) at every column x ≥ widths[b] of sample b: those columns
// hold OCR_PAD_VALUE (128) here.
typedef struct {
    uint64_t epoch;
    int64_t index;          // batch number within the epoch (this rank)
    int size;               // samples (B)
    int height, width;      // H, W (multi-scale: this batch's scale)
    int channels;           // C: 3 (BGR or RGB, per DecodeImage) or 1 (GRAY)
    int max_text_length;    // L
    uint8_t *images;        // (B, H, W, C)
    int32_t *widths;        // (B) resized width of each sample, 1..W
    float *valid_ratios;    // (B) min(1, widths / W)
    int32_t *labels;        // (B, L) class indices, zero padded
    int32_t *lengths;       // (B) 1..L
    int64_t *indices;       // (B) the sample actually used: its index in the epoch's dataset
                            // (ocr_dataset_get), or with a pack its record number
} OcrBatch;

typedef struct OcrLoader OcrLoader;

// Opens the dataset (or the pack, checked against the config: height, channel order and,
// when the label files are readable, their fingerprint), allocates the batch ring and
// starts the workers (idle until start_epoch). `dict` must outlive the loader.
ocr_status_t ocr_loader_create(OcrLoader **out, const OcrLoaderConfig *lc, const OcrDict *dict);
// Stops the workers (mid-epoch is fine) and frees everything. NULL is fine.
void ocr_loader_destroy(OcrLoader *l);

// Plans `epoch` and starts producing from batch `first_batch` (0, or the resume point
// from ocr_loader_position). Batches of an earlier epoch must not be used afterwards.
ocr_status_t ocr_loader_start_epoch(OcrLoader *l, uint64_t epoch, int64_t first_batch);
// Batches of the current epoch on this rank.
int64_t ocr_loader_num_batches(const OcrLoader *l);
// Samples in the current epoch (all ranks).
int64_t ocr_loader_num_samples(const OcrLoader *l);

// The next batch in order, or *batch = NULL at the end of the epoch. Blocks until it is
// ready. Errors: a failure that is not a data problem (OOM; more than 100 consecutive
// unreadable replacements), or INVALID_ARG when the consumer holds every buffer.
ocr_status_t ocr_loader_next(OcrLoader *l, const OcrBatch **batch);
// Gives a batch's buffer back (in the order received).
void ocr_loader_release(OcrLoader *l, const OcrBatch *batch);

// Where to resume: the epoch and the number of batches handed out so far in it.
typedef struct {
    uint64_t epoch;
    int64_t next_batch;
} OcrLoaderPosition;
OcrLoaderPosition ocr_loader_position(const OcrLoader *l);

typedef struct {
    int64_t batches, samples;   // handed out
    int64_t replaced;           // samples whose image failed and were replaced
    int64_t con_aug_merges;     // RecConAug extra samples appended
    OcrSkipStats skipped;       // image problems by reason (each failed attempt)
} OcrLoaderStats;

// Totals over the batches handed out since creation.
void ocr_loader_stats(const OcrLoader *l, OcrLoaderStats *out);
// The label-file (or pack) accounting: rejected lines by reason and characters missing
// from the dictionary.
const OcrSkipStats *ocr_loader_label_skips(const OcrLoader *l);
const OcrCharCounter *ocr_loader_unknown_chars(const OcrLoader *l);
// The dataset when reading label files (NULL with a pack).
const OcrDataset *ocr_loader_dataset(const OcrLoader *l);

#endif

// Batch sampling for one epoch: which samples go into which batch, at which shape, on
// which rank. A pure function of (options, seed, epoch, dataset size), so an epoch can be
// replayed from any batch (exact resume) and every rank computes its share alone.
//
// Per epoch the samples are permuted with Philox (seed, stream OCR_SAMPLER_STREAM + epoch)
// when shuffling, else taken in order; a sample's position in that permutation is its
// slot (the loader derives the sample's augmentation stream from (seed, epoch, slot), so
// its pixels do not depend on the number of ranks or threads either).
//
// Sharding: only the first world·⌊n/world⌋ slots are used (the permutation changes every
// epoch, so with shuffling no sample is left out for good), and each rank gets an equal,
// disjoint share.
// - Single scale (PaddleOCR's DistributedBatchSampler): global batch k of rank r is slots
//   [k·bs·world + r·bs, +bs); the remainder after the last full round, rem (a multiple of
//   world), gives each rank one smaller batch of rem/world unless drop_last.
// - Multi-scale (PaddleOCR's MultiScaleSampler): rank r takes slots r, r + world, ...;
//   consecutive runs of them form batches whose shape cycles through the scales (in an
//   order shuffled per epoch), each with its own batch size; a last incomplete batch is
//   dropped with drop_last (PaddleOCR pads it with samples from the start instead); the
//   batch order is shuffled per epoch. PaddleOCR fixes the sample-to-batch assignment
//   once for the whole run; here it changes every epoch.
// Every rank has the same number of batches, and batch b has the same shape on all ranks.
#ifndef OCR_DATA_SAMPLER_H
#define OCR_DATA_SAMPLER_H

#include <stdint.h>

#include "core/error.h"

#define OCR_SAMPLER_STREAM 0x53616d7000000000ull  // "Samp" << 32, plus the epoch
#define OCR_SAMPLER_MAX_SCALES 8

typedef struct {
    int width, height, batch_size;
} OcrBatchShape;

typedef struct {
    int shuffle;
    int drop_last;
    int rank, world_size;  // 0 <= rank < world_size
    uint64_t seed;
    int num_scales;        // 1: a fixed shape; > 1: multi-scale
    OcrBatchShape scales[OCR_SAMPLER_MAX_SCALES];
} OcrSamplerOptions;

// MultiScaleSampler's shapes: scales given as (width, height) pairs; each width floored
// to a multiple of divided_factor[0] and each height to divided_factor[1]; batch size
// first_bs when fix_bs, else int(max(1, w0·h0·first_bs / (w·h))) with (w0, h0) the first
// pair as given. E.g. [[320,32],[320,48],[320,64]], first_bs 192: 192, 128, 96.
// OCR_ERR_CONFIG for a shape that floors to 0 or more than OCR_SAMPLER_MAX_SCALES pairs.
ocr_status_t ocr_sampler_multiscale_shapes(OcrBatchShape *out, const int *widths, const int *heights, int n,
                                           int first_bs, int fix_bs, int divided_w, int divided_h);

typedef struct {
    OcrSamplerOptions opt;
    uint64_t epoch;
    int64_t num_samples;   // dataset size of this epoch
    int64_t num_batches;   // this rank's batches
    int64_t rank_samples;  // this rank's samples in them
    // private
    int32_t *perm_;        // slot → dataset index
    int32_t *slots_;       // this rank's slots, batch after batch
    int64_t *batch_off_;   // batch b: slots_[batch_off_[b] .. batch_off_[b + 1])
    int32_t *batch_scale_; // batch b: index into opt.scales
    int64_t cap_samples_, cap_batches_;
} OcrSampler;

// Validates the options (INVALID_ARG naming the bad field). No epoch is planned yet.
ocr_status_t ocr_sampler_init(OcrSampler *s, const OcrSamplerOptions *opt);
void ocr_sampler_free(OcrSampler *s);
// Plans `epoch` for a dataset of num_samples (1 ≤ n < 2^31). A rank can end up with no
// batch at all (n < world, or drop_last with fewer samples than one batch).
ocr_status_t ocr_sampler_set_epoch(OcrSampler *s, uint64_t epoch, int64_t num_samples);

typedef struct {
    int width, height;     // the batch shape
    int size;              // samples in this batch (≤ the shape's batch_size)
    const int32_t *slots;  // size slots (positions in the epoch permutation)
} OcrSamplerBatch;

// Batch b (0 ≤ b < num_batches) of this rank in the current epoch.
void ocr_sampler_batch(const OcrSampler *s, int64_t b, OcrSamplerBatch *out);
// The dataset index at a slot of the current epoch.
static inline int64_t ocr_sampler_index(const OcrSampler *s, int32_t slot) { return s->perm_[slot]; }
// The largest batch size over the scales (for sizing buffers).
int ocr_sampler_max_batch(const OcrSamplerOptions *opt);

#endif

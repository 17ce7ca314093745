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
//
// Per-batch mix (num_sources > 0, Train.dataset.batch_ratio_list): the dataset is num_sources
// consecutive sources (label files, in order; ocr_sampler_set_epoch_sources gives their sizes) and
// every batch of size B holds exactly counts[i] samples of source i (ocr_sampler_mix_counts:
// largest remainder, so they sum to B). The epoch is the first (target) source's: its samples,
// permuted per epoch, are used once each; every other source is drawn from its own permutation,
// re-shuffled each time it runs out (cycled independently), from a stream of (seed, epoch,
// source), so an epoch is still a pure function of the inputs. Sharding: global batch k takes
// world · counts[i] samples of each source and rank r the r-th share of each; the target's samples
// left after the last full round give each rank one smaller batch (its rem/world target samples
// and floor(that · mix[i] / mix[0]), at least 1, of each other source) unless drop_last. The slots of a mixed
// epoch are its positions in that plan (more than the target's size when the others add to it).
// Multi-scale: the batch shape cycles through the scales as above, each with its own counts; the
// batch order is not shuffled again (every source is already drawn at random).
#define OCR_SAMPLER_MAX_SOURCES 16
#define OCR_SAMPLER_MIX_STREAM 0x4d69780000000000ull  // "Mix" << 40, plus source << 32, plus the epoch
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
    int num_sources;       // 0: no mix; 2..OCR_SAMPLER_MAX_SOURCES: every batch mixed as mix[] says
    double mix[OCR_SAMPLER_MAX_SOURCES];  // each source's fraction of a batch, in (0, 1], summing to 1
} OcrSamplerOptions;

// The samples of each source in a batch of `batch` under fractions mix[0..n): floor(mix[i]·batch)
// each, the rest one by one to the largest remainders (the earlier source on a tie), so they sum
// to batch exactly. OCR_ERR_INVALID_ARG when some source gets no sample (the message names its
// index and fraction; callers add the config key).
ocr_status_t ocr_sampler_mix_counts(const double *mix, int n, int batch, int *counts);
// Checks fractions as a config gives them: n in 2..OCR_SAMPLER_MAX_SOURCES, each in (0, 1], the sum
// 1 within 1e-6. OCR_ERR_INVALID_ARG naming the index ("entry 1 is 1.5: ...").
ocr_status_t ocr_sampler_mix_check(const double *mix, int n);

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
// Plans a mixed epoch (opt.num_sources > 0): sizes[i] samples in source i, the sources back to back
// in the dataset's index space (source i starts at sizes[0] + ... + sizes[i-1]). n must be
// opt.num_sources and every size >= 1 (INVALID_ARG naming the empty source otherwise).
ocr_status_t ocr_sampler_set_epoch_sources(OcrSampler *s, uint64_t epoch, const int64_t *sizes, int n);

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

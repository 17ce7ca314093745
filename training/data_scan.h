// `ocrtrain data`: the Train and Eval datasets of a config read once through the real loader
// (decode, augmentation, resize, batching: one epoch each), with what was delivered, what was
// skipped and why, the label-length histogram, the characters missing from the dictionary and
// the throughput.
#ifndef OCR_TRAINING_DATA_SCAN_H
#define OCR_TRAINING_DATA_SCAN_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/error.h"
#include "data/dataset.h"
#include "data/dict.h"
#include "data/loader.h"

typedef struct {
    char section[16];         // "Train", "Eval"
    int64_t valid_lines;      // samples the label files (or the pack) provide
    int64_t epoch_samples, batches, delivered;
    int workers, batch_size, height, width, num_scales;
    int packed;               // read from a packed cache (<section>.loader.pack_file)
    double seconds;
    OcrSkipStats label_skips;
    OcrLoaderStats stats;
    int64_t *hist;            // label length → count, 0..L
    int L;                    // Global.max_text_length
    OcrCharCount *missing;    // characters not in the dictionary, most frequent first
    size_t n_missing;
    int64_t missing_total;
    OcrLabelNotes notes;      // label-file oddities (BOM, CRLF, ...) when has_notes
    int has_notes;
} DataSection;

typedef struct {
    DataSection sections[2];
    int n;
    int64_t delivered;        // over every section
    double seconds;
    double images_per_s;
} DataScan;

// Scans `only` ("Train" or "Eval"), or (only NULL) each of Train and Eval that has a dataset.
// workers > 0 replaces the loaders' num_workers. A section's error names it ("Train: ...");
// a config with neither dataset is OCR_ERR_CONFIG. Free with data_scan_free, also after an error.
ocr_status_t data_scan(DataScan *out, const OcrConfig *cfg, const char *only, int workers);
void data_scan_free(DataScan *s);

static inline double data_section_images_per_s(const DataSection *r) {
    return r->seconds > 0 ? (double)r->delivered / r->seconds : 0.0;
}

#endif

// `ocrtrain pack`: every valid sample of a section's dataset written once, either as a packed
// cache (data/pack.h: decoded, resized to the height the section trains at, keeping the aspect
// ratio; ratio_list applies when the pack is read) or as a PaddleOCR LMDB dataset
// (data/lmdb_dataset.h: the image files as they are, the labels as written).
#ifndef OCR_TRAINING_PACK_SECTION_H
#define OCR_TRAINING_PACK_SECTION_H

#include "core/config.h"
#include "core/error.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/pack.h"

typedef struct {
    OcrPackWriteStats stats;  // samples written, images skipped by reason
    OcrSkipStats rejected;    // label lines (records) rejected when the dataset was read
    OcrPackSpec spec;         // the packed cache's height and channel order (pack_section_cache)
} PackResult;

// lc: the section's loader config (ocr_loader_config_parse). threads: decoding threads.
ocr_status_t pack_section_cache(const OcrConfig *cfg, const OcrLoaderConfig *lc, const char *path, int threads,
                                PackResult *r);
// dir: a new folder.
ocr_status_t pack_section_lmdb(const OcrConfig *cfg, const OcrLoaderConfig *lc, const char *dir, PackResult *r);

#endif

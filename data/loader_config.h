// The configuration of a data loader (data/loader.h) and how it is read from a Train/Eval
// section of a PaddleOCR-style config: dataset, transforms, sampler and loader keys; and the
// dictionary a config names.
#ifndef OCR_DATA_LOADER_CONFIG_H
#define OCR_DATA_LOADER_CONFIG_H

#include <stdint.h>

#include "core/error.h"
#include "data/dict.h"
#include "data/sampler.h"
#include "data/transforms.h"

struct OcrConfig;

// Everything the loader needs, as read from a config section by ocr_loader_config_parse
// (or filled by hand). Strings are owned (freed by ocr_loader_config_free).
typedef struct {
    char section[32];           // "Train" / "Eval", for messages
    char *config_name;          // the config file, for messages
    // dataset: SimpleDataSet / MultiScaleDataSet keys
    char *data_dir;
    int lmdb;                   // LMDBDataSet: the LMDB environments under data_dir (no label files)
    char **label_files;
    int num_label_files;
    double *ratios;
    int num_ratios;
    char *delimiter;
    int max_text_length;        // Global.max_text_length (default 25)
    uint64_t seed;              // Global.seed (PaddleOCR's default 1024)
    OcrTransformList transforms;
    // batching
    OcrSamplerOptions sampler;  // rank 0 of 1 unless set by hand
    // loader keys
    int num_workers;            // worker threads (0 → 1)
    int prefetch;               // ready batches kept ahead (default 2)
    int train;                  // replacement policy: random (1) or next (0) sample
    char *pack_file;            // loader.pack_file: read from this packed cache instead
    int pack_height;            // the height a pack for this section must have
} OcrLoaderConfig;

// Reads `section` ("Train" or "Eval") of a PaddleOCR-style config:
//   Global: max_text_length (25), seed (1024)
//   <section>.dataset: name (SimpleDataSet | MultiScaleDataSet), data_dir, label_file_list,
//     ratio_list, delimiter, transforms (see ocr_transforms_parse), ext_op_transform_idx
//     (1), ds_width (false only); Train only: batch_ratio_list (each label file's fraction of
//     every batch, sampler.mix; refused outside (0, 1], not summing to 1, or rounding to no
//     sample of a batch)
//   <section>.sampler (MultiScaleDataSet): name MultiScaleSampler, scales [[w,h],...],
//     first_bs, fix_bs, divided_factor [8,16], is_training
//   <section>.loader: shuffle, batch_size_per_card, drop_last, num_workers,
//     use_shared_memory (ignored), prefetch, pack_file
// A relative pack_file, data_dir and label files are used as written (relative to the
// working directory, as in PaddleOCR). Errors are OCR_ERR_CONFIG naming file and key.
ocr_status_t ocr_loader_config_parse(OcrLoaderConfig *lc, const struct OcrConfig *cfg, const char *section);
void ocr_loader_config_free(OcrLoaderConfig *lc);
// The dictionary of a config: Global.character_dict_path (absent/null: the default
// charset) and Global.use_space_char (false).
ocr_status_t ocr_loader_load_dict(OcrDict *dict, const struct OcrConfig *cfg);

#endif

#include "training/pack_section.h"

#include <string.h>

#include "training/run_config.h"

typedef struct {
    OcrDict dict;
    int have_dict;
    OcrDataset ds;
    int have_ds;
} Source;

// Every valid sample (ratio_list applies when the pack is read).
static ocr_status_t source_open(Source *s, const OcrConfig *cfg, const OcrLoaderConfig *lc) {
    memset(s, 0, sizeof *s);
    ocr_status_t st = ocr_loader_load_dict(&s->dict, cfg);
    s->have_dict = st == OCR_OK;
    OcrDatasetOptions opt = {0};
    opt.data_dir = lc->data_dir;
    opt.lmdb = lc->lmdb;
    opt.label_files = (const char *const *)lc->label_files;
    opt.num_label_files = lc->num_label_files;
    opt.delimiter = lc->delimiter;
    opt.max_text_length = lc->max_text_length;
    opt.seed = lc->seed;
    if (st == OCR_OK) st = ocr_dataset_open(&s->ds, &opt, &s->dict);
    s->have_ds = st == OCR_OK;
    run_config_log_ignored(cfg);
    return st;
}

static void source_close(Source *s, PackResult *r) {
    if (s->have_ds) {
        r->rejected = s->ds.skipped;
        ocr_dataset_close(&s->ds);
    }
    if (s->have_dict) ocr_dict_free(&s->dict);
}

ocr_status_t pack_section_cache(const OcrConfig *cfg, const OcrLoaderConfig *lc, const char *path, int threads,
                                PackResult *r) {
    memset(r, 0, sizeof *r);
    Source s;
    ocr_status_t st = source_open(&s, cfg, lc);
    r->spec = (OcrPackSpec){lc->pack_height, lc->transforms.order, 0};
    if (st == OCR_OK)
        st = ocr_pack_source_hash(lc->data_dir, (const char *const *)lc->label_files, lc->num_label_files,
                                  &r->spec.source_hash);
    if (st == OCR_OK) {
        ocr_skip_stats_log(&s.ds.skipped, "label files");
        st = ocr_pack_write(path, &s.ds, &r->spec, threads, &r->stats);
    }
    source_close(&s, r);
    return st;
}

ocr_status_t pack_section_lmdb(const OcrConfig *cfg, const OcrLoaderConfig *lc, const char *dir, PackResult *r) {
    memset(r, 0, sizeof *r);
    Source s;
    ocr_status_t st = source_open(&s, cfg, lc);
    if (st == OCR_OK) {
        ocr_skip_stats_log(&s.ds.skipped, "label records");
        st = ocr_pack_write_lmdb(dir, &s.ds, &r->stats);
    }
    source_close(&s, r);
    return st;
}

#include "training/data_scan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/timer.h"

static ocr_status_t scan_section(DataSection *r, const OcrConfig *cfg, const char *section, int workers) {
    memset(r, 0, sizeof *r);
    snprintf(r->section, sizeof r->section, "%s", section);
    OcrLoaderConfig lc;
    OCR_TRY(ocr_loader_config_parse(&lc, cfg, section));
    if (workers > 0) lc.num_workers = workers;
    r->workers = lc.num_workers;
    r->batch_size = lc.sampler.scales[0].batch_size;
    r->height = lc.sampler.scales[0].height;
    r->width = lc.sampler.scales[0].width;
    r->num_scales = lc.sampler.num_scales;
    r->packed = lc.pack_file != NULL;
    r->L = lc.max_text_length;
    OcrDict dict;
    ocr_status_t st = ocr_loader_load_dict(&dict, cfg);
    if (st != OCR_OK) {
        ocr_loader_config_free(&lc);
        return st;
    }
    OcrLoader *l = NULL;
    st = ocr_loader_create(&l, &lc, &dict);
    ocr_loader_config_free(&lc);
    r->hist = calloc((size_t)r->L + 1, sizeof(int64_t));
    if (st == OCR_OK && !r->hist) st = ocr_set_error(OCR_ERR_OOM, "out of memory");
    double t0 = ocr_now_seconds();
    if (st == OCR_OK) st = ocr_loader_start_epoch(l, 0, 0);
    if (st == OCR_OK) {
        r->epoch_samples = ocr_loader_num_samples(l);
        const OcrBatch *b;
        while ((st = ocr_loader_next(l, &b)) == OCR_OK && b) {
            for (int i = 0; i < b->size; i++) r->hist[b->lengths[i]]++;
            r->batches++;
            r->delivered += b->size;
            ocr_loader_release(l, b);
        }
    }
    r->seconds = ocr_now_seconds() - t0;
    if (st == OCR_OK) {
        ocr_loader_stats(l, &r->stats);
        r->label_skips = *ocr_loader_label_skips(l);
        const OcrCharCounter *u = ocr_loader_unknown_chars(l);
        r->missing = ocr_char_counter_sorted(u, &r->n_missing);
        r->missing_total = u->total;
        const OcrDataset *ds = ocr_loader_dataset(l);
        if (ds) {
            r->valid_lines = ocr_dataset_num_valid(ds);
            r->notes = ds->notes;
            r->has_notes = 1;
        } else {
            r->valid_lines = r->epoch_samples;
        }
    }
    ocr_loader_destroy(l);
    ocr_dict_free(&dict);
    return st;
}

static void section_free(DataSection *r) {
    free(r->hist);
    free(r->missing);
    r->hist = NULL;
    r->missing = NULL;
}

ocr_status_t data_scan(DataScan *out, const OcrConfig *cfg, const char *only, int workers) {
    memset(out, 0, sizeof *out);
    static const char *const sections[2] = {"Train", "Eval"};
    for (int s = 0; s < 2; s++) {
        char key[32];
        snprintf(key, sizeof key, "%s.dataset", sections[s]);
        if (only ? strcmp(only, sections[s]) != 0 : !ocr_config_has(cfg, key)) continue;
        ocr_status_t st = scan_section(&out->sections[out->n], cfg, sections[s], workers);
        if (st != OCR_OK) {
            section_free(&out->sections[out->n]);
            return ocr_wrap_error(st, "%s", sections[s]);
        }
        out->n++;
    }
    if (out->n == 0)
        return ocr_set_error(OCR_ERR_CONFIG, "%s has neither Train.dataset nor Eval.dataset", ocr_config_source(cfg));
    for (int k = 0; k < out->n; k++) out->delivered += out->sections[k].delivered, out->seconds += out->sections[k].seconds;
    out->images_per_s = out->seconds > 0 ? (double)out->delivered / out->seconds : 0.0;
    return OCR_OK;
}

void data_scan_free(DataScan *s) {
    for (int k = 0; k < s->n; k++) section_free(&s->sections[k]);
    s->n = 0;
}

#include "app/feed.h"

#include <stdlib.h>
#include <string.h>

#include "core/memory.h"
#include "core/rng.h"

ocr_status_t feed_batch_alloc(FeedBatch *b, int capacity, int height, int width, int channels, int max_len) {
    memset(b, 0, sizeof *b);
    b->capacity = capacity;
    b->height = height;
    b->width = width;
    b->channels = channels;
    b->max_len = max_len;
    // The batch buffer is the run's DATA memory (what a device would hold as the input batch).
    b->pixels = ocr_mem_alloc(ocr_cpu(), OCR_MEM_DATA, (size_t)capacity * height * width * channels);
    b->labels = calloc((size_t)capacity * max_len, sizeof *b->labels);
    b->lengths = calloc((size_t)capacity, sizeof *b->lengths);
    b->widths = calloc((size_t)capacity, sizeof *b->widths);
    b->index = calloc((size_t)capacity, sizeof *b->index);
    if (!b->pixels || !b->labels || !b->lengths || !b->widths || !b->index) {
        feed_batch_free(b);
        return ocr_set_error(OCR_ERR_OOM, "batch buffers: out of memory");
    }
    return OCR_OK;
}

void feed_batch_free(FeedBatch *b) {
    ocr_mem_free(b->pixels);
    free(b->labels);
    free(b->lengths);
    free(b->widths);
    free(b->index);
    memset(b, 0, sizeof *b);
}

ocr_status_t feed_open(Feed *f, const OcrConfig *cfg, const RunConfig *rc, const char *split, const OcrDict *dict,
                       int training) {
    memset(f, 0, sizeof *f);
    const DataConfig *dc = strcmp(split, "Train") == 0 ? &rc->train : &rc->eval;
    if (!dc->present) return ocr_set_error(OCR_ERR_CONFIG, "%s: the %s section is missing", ocr_config_source(cfg), split);
    char p[64];
    snprintf(p, sizeof p, "%s.dataset.transforms", split);
    OCR_TRY(ocr_transforms_parse(&f->tl, cfg, p, rc->max_text_length));
    if (!f->tl.has_resize)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s needs a RecResizeImg entry (multi-scale training is not "
                             "supported yet)", ocr_config_source(cfg), p);
    OcrDatasetOptions opt = {0};
    opt.data_dir = dc->data_dir;
    opt.label_files = dc->label_files;
    opt.num_label_files = dc->n_label_files;
    opt.ratios = dc->n_ratios ? dc->ratios : NULL;
    opt.num_ratios = dc->n_ratios;
    opt.delimiter = dc->delimiter;
    opt.max_text_length = rc->max_text_length;
    opt.seed = rc->seed;
    ocr_status_t st = ocr_dataset_open(&f->ds, &opt, dict);
    if (st != OCR_OK) return ocr_wrap_error(st, "%s dataset", split);
    ocr_skip_stats_log(&f->ds.skipped, split);
    f->dict = dict;
    f->training = training;
    f->shuffle = dc->shuffle;
    f->drop_last = dc->drop_last;
    f->batch_size = dc->batch_size;
    f->seed = rc->seed;
    f->height = f->tl.resize_h;
    f->width = f->tl.resize_w;
    f->channels = f->tl.channels;
    f->max_len = rc->max_text_length;
    f->epoch = -1;
    feed_seek(f, 0, 0);
    if (!f->order) {
        ocr_dataset_close(&f->ds);
        return ocr_set_error(OCR_ERR_OOM, "sample order: out of memory");
    }
    if (feed_batches_per_epoch(f) == 0) {
        int64_t n = ocr_dataset_size(&f->ds);
        feed_close(f);
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %lld samples make no batch of %d with drop_last (lower "
                             "%s.loader.batch_size_per_card)", split, (long long)n, dc->batch_size, split);
    }
    return OCR_OK;
}

void feed_close(Feed *f) {
    if (f->order) ocr_dataset_close(&f->ds);
    free(f->order);
    memset(f, 0, sizeof *f);
}

int64_t feed_num_samples(const Feed *f) { return ocr_dataset_size(&f->ds); }

int64_t feed_batches_per_epoch(const Feed *f) {
    int64_t n = ocr_dataset_size(&f->ds);
    return f->drop_last ? n / f->batch_size : (n + f->batch_size - 1) / f->batch_size;
}

static void start_epoch(Feed *f, int64_t epoch) {
    ocr_dataset_set_epoch(&f->ds, (uint64_t)epoch);
    int64_t n = ocr_dataset_size(&f->ds);
    if (n > f->order_n || !f->order) {
        free(f->order);
        f->order = malloc((size_t)(n ? n : 1) * sizeof *f->order);
        f->order_n = f->order ? n : 0;
    }
    if (!f->order) return;
    f->order_n = n;
    for (int64_t i = 0; i < n; i++) f->order[i] = i;
    if (f->shuffle) {
        // Fisher-Yates from the end; draws depend only on (seed, epoch).
        OcrRng r = ocr_rng_make(f->seed, FEED_SHUFFLE_STREAM + (uint64_t)epoch);
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = ocr_rng_next_int(&r, 0, i);
            int64_t t = f->order[i];
            f->order[i] = f->order[j];
            f->order[j] = t;
        }
    }
    f->epoch = epoch;
}

void feed_seek(Feed *f, int64_t epoch, int64_t batch) {
    if (epoch != f->epoch || !f->order) start_epoch(f, epoch);
    f->next_batch = batch;
}

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

// Loads sample idx; a data problem is counted and reported as *bad = 1 with OCR_OK.
static ocr_status_t load(Feed *f, int64_t idx, OcrImage *img, int *bad) {
    ocr_skip_reason_t reason;
    *bad = 0;
    ocr_status_t st = ocr_dataset_load_image(&f->ds, idx, f->tl.order, img, &reason);
    if (st == OCR_OK) return OCR_OK;
    if (reason == OCR_SKIP_REASON_COUNT) return st;
    ocr_skip_stats_add(&f->skipped, reason, "%s", ocr_last_error());
    *bad = 1;
    return OCR_OK;
}

// One sample into slot s of the batch: image (augmented when training), labels.
static ocr_status_t fill_slot(Feed *f, FeedBatch *b, int s, int64_t idx, OcrRng *rng, int *bad) {
    OcrImage img = {0};
    OCR_TRY(load(f, idx, &img, bad));
    if (*bad) return OCR_OK;
    OcrSample smp;
    ocr_status_t st = ocr_dataset_get(&f->ds, idx, &smp);
    if (st != OCR_OK) {
        ocr_image_free(&img);
        return st;
    }
    int32_t *lab = b->labels + (size_t)s * b->max_len;
    memset(lab, 0, (size_t)b->max_len * sizeof *lab);
    int len = smp.label_len < b->max_len ? smp.label_len : b->max_len;
    memcpy(lab, smp.label, (size_t)len * sizeof *lab);
    if (f->training) {
        for (int k = 0; k < f->tl.num_ops && st == OCR_OK; k++) {
            if (f->tl.ops[k] == OCR_TOP_REC_AUG) {
                st = ocr_rec_aug(&img, &f->tl.rec_aug, rng);
                continue;
            }
            // RecConAug: with probability prob, append up to ext_data_num random samples.
            const OcrRecConAugParams *ca = &f->tl.con_aug;
            if (ocr_rng_next_uniform(rng) >= ca->prob) continue;
            for (int e = 0; e < ca->ext_data_num && st == OCR_OK; e++) {
                int64_t j = ocr_rng_next_int(rng, 0, ocr_dataset_size(&f->ds) - 1);
                OcrImage ext = {0};
                int ebad;
                st = load(f, j, &ext, &ebad);
                if (st != OCR_OK || ebad) break;
                OcrSample es;
                st = ocr_dataset_get(&f->ds, j, &es);
                if (st == OCR_OK && ocr_rec_con_aug_fits(ca, len, img.width, img.height, es.label_len, ext.width,
                                                         ext.height) &&
                    len + es.label_len <= b->max_len) {
                    st = ocr_rec_con_aug_merge(&img, &ext, ca->image_h);
                    if (st == OCR_OK) {
                        memcpy(lab + len, es.label, (size_t)es.label_len * sizeof *lab);
                        len += es.label_len;
                    }
                } else {
                    ocr_image_free(&ext);
                    break;
                }
                ocr_image_free(&ext);
            }
        }
    }
    if (st == OCR_OK) {
        int rw;
        float vr;
        uint8_t *dst = b->pixels + (size_t)s * b->height * b->width * b->channels;
        st = ocr_rec_resize_pad(dst, b->height, b->width, b->channels, &img, f->tl.padding, &rw, &vr);
        b->widths[s] = rw;
    }
    ocr_image_free(&img);
    b->lengths[s] = len;
    b->index[s] = idx;
    return st;
}

ocr_status_t feed_next(Feed *f, FeedBatch *b, int *end) {
    *end = 0;
    b->count = 0;
    int64_t nb = feed_batches_per_epoch(f);
    if (f->next_batch >= nb) {
        feed_seek(f, f->epoch + 1, 0);
        if (!f->order) return ocr_set_error(OCR_ERR_OOM, "sample order: out of memory");
        *end = 1;
        return OCR_OK;
    }
    OCR_ASSERT(b->capacity >= f->batch_size && b->height == f->height && b->width == f->width &&
               b->channels == f->channels && b->max_len == f->max_len);
    int64_t first = f->next_batch * f->batch_size;
    int64_t last = first + f->batch_size;
    if (last > f->order_n) last = f->order_n;
    int slot = 0;
    for (int64_t k = first; k < last; k++) {
        int64_t idx = f->order[k];
        uint64_t stream = FEED_AUG_STREAM ^ mix64(((uint64_t)f->epoch << 40) ^ (uint64_t)k);
        OcrRng rng = ocr_rng_make(f->seed, stream);
        int bad = 1;
        // Training replaces a bad sample by a random one (bounded: a dataset of bad images
        // ends with an error rather than a hang); evaluation leaves it out.
        for (int attempt = 0; bad && attempt < 16; attempt++) {
            OCR_TRY(fill_slot(f, b, slot, idx, &rng, &bad));
            if (!bad || !f->training) break;
            idx = ocr_rng_next_int(&rng, 0, ocr_dataset_size(&f->ds) - 1);
        }
        if (bad && f->training)
            return ocr_set_error(OCR_ERR_FORMAT, "16 samples in a row could not be loaded (last: %s)",
                                 ocr_last_error());
        if (!bad) slot++;
    }
    b->count = slot;
    f->next_batch++;
    return OCR_OK;
}

void feed_normalize(const FeedBatch *b, float *images) {
    int H = b->height, W = b->width, C = b->channels;
    for (int n = 0; n < b->count; n++) {
        const uint8_t *src = b->pixels + (size_t)n * H * W * C;
        float *dst = images + (size_t)n * H * W * C;
        size_t valid = (size_t)b->widths[n] * C;
        for (int y = 0; y < H; y++) {
            const uint8_t *s = src + (size_t)y * W * C;
            float *d = dst + (size_t)y * W * C;
            for (size_t x = 0; x < valid; x++) d[x] = ((float)s[x] / 255.0f - 0.5f) / 0.5f;
            for (size_t x = valid; x < (size_t)W * C; x++) d[x] = 0.0f;
        }
    }
}

void feed_label_text(const OcrDict *dict, const FeedBatch *b, int i, char *text, size_t cap) {
    size_t used = 0;
    text[0] = '\0';
    const int32_t *lab = b->labels + (size_t)i * b->max_len;
    for (int k = 0; k < b->lengths[i]; k++) {
        int c = lab[k];
        if (c <= 0 || c >= dict->num_classes) continue;
        size_t n = strlen(dict->classes[c]);
        if (used + n + 1 > cap) break;
        memcpy(text + used, dict->classes[c], n + 1);
        used += n;
    }
}

#include "app/feed.h"

#include <stdlib.h>
#include <string.h>

#include "core/memory.h"

ocr_status_t feed_batch_alloc(FeedBatch *b, int capacity, int height, int width, int channels, int max_len) {
    memset(b, 0, sizeof *b);
    b->capacity = capacity;
    b->height = height;
    b->width = width;
    b->channels = channels;
    b->max_len = max_len;
    b->owned = 1;
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
    if (b->owned) {
        ocr_mem_free(b->pixels);
        free(b->labels);
        free(b->lengths);
        free(b->widths);
        free(b->index);
    }
    memset(b, 0, sizeof *b);
}

ocr_status_t feed_open(Feed *f, const OcrConfig *cfg, const char *split, const OcrDict *dict, int training,
                       int batch_override) {
    memset(f, 0, sizeof *f);
    OCR_TRY(ocr_loader_config_parse(&f->lc, cfg, split));
    f->lc_ok = 1;
    f->lc.train = training;
    OcrSamplerOptions *so = &f->lc.sampler;
    if (batch_override > 0) {
        // Every scale keeps its share of the first scale's batch.
        double r = (double)batch_override / so->scales[0].batch_size;
        for (int i = 0; i < so->num_scales; i++) {
            int b = (int)(so->scales[i].batch_size * r + 0.5);
            so->scales[i].batch_size = b < 1 ? 1 : b;
        }
        so->scales[0].batch_size = batch_override;
    }
    f->batch_size = so->scales[0].batch_size;
    f->max_batch = ocr_sampler_max_batch(so);
    for (int i = 0; i < so->num_scales; i++) {
        if (so->scales[i].height > f->max_height) f->max_height = so->scales[i].height;
        if (so->scales[i].width > f->max_width) f->max_width = so->scales[i].width;
    }
    f->channels = f->lc.transforms.channels;
    f->max_len = f->lc.max_text_length;
    f->dict = dict;
    f->training = training;
    ocr_status_t st = ocr_loader_create(&f->loader, &f->lc, dict);
    if (st != OCR_OK) {
        feed_close(f);
        return ocr_wrap_error(st, "%s dataset", split);
    }
    ocr_skip_stats_log(ocr_loader_label_skips(f->loader), split);
    st = feed_seek(f, 0, 0);
    if (st == OCR_OK && f->batches_per_epoch == 0) {
        int64_t n = ocr_loader_num_samples(f->loader);
        st = ocr_set_error(OCR_ERR_CONFIG, "%s: %lld samples make no batch of %d with drop_last (lower "
                           "%s.loader.batch_size_per_card)", split, (long long)n, f->batch_size, split);
    }
    if (st != OCR_OK) feed_close(f);
    return st;
}

void feed_close(Feed *f) {
    if (f->loader) {
        if (f->held) ocr_loader_release(f->loader, f->held);
        ocr_loader_destroy(f->loader);
    }
    if (f->lc_ok) ocr_loader_config_free(&f->lc);
    memset(f, 0, sizeof *f);
}

int64_t feed_num_samples(const Feed *f) { return ocr_loader_num_samples(f->loader); }
int64_t feed_batches_per_epoch(const Feed *f) { return f->batches_per_epoch; }

ocr_status_t feed_seek(Feed *f, int64_t epoch, int64_t batch) {
    if (f->held) {
        ocr_loader_release(f->loader, f->held);
        f->held = NULL;
    }
    OCR_TRY(ocr_loader_start_epoch(f->loader, (uint64_t)epoch, batch));
    f->epoch = epoch;
    f->next_batch = batch;
    f->batches_per_epoch = ocr_loader_num_batches(f->loader);
    return OCR_OK;
}

ocr_status_t feed_next(Feed *f, FeedBatch *b, int *end) {
    *end = 0;
    memset(b, 0, sizeof *b);
    if (f->held) {
        ocr_loader_release(f->loader, f->held);
        f->held = NULL;
    }
    if (f->next_batch >= f->batches_per_epoch) {
        OCR_TRY(feed_seek(f, f->epoch + 1, 0));
        *end = 1;
        return OCR_OK;
    }
    const OcrBatch *ob;
    OCR_TRY(ocr_loader_next(f->loader, &ob));
    if (!ob) {
        OCR_TRY(feed_seek(f, f->epoch + 1, 0));
        *end = 1;
        return OCR_OK;
    }
    f->held = ob;
    f->next_batch++;
    b->capacity = b->count = ob->size;
    b->height = ob->height;
    b->width = ob->width;
    b->channels = ob->channels;
    b->max_len = ob->max_text_length;
    b->pixels = ob->images;
    b->labels = ob->labels;
    b->lengths = ob->lengths;
    b->widths = ob->widths;
    b->index = ob->indices;
    return OCR_OK;
}

void feed_skip_stats(const Feed *f, OcrSkipStats *out) {
    OcrLoaderStats st;
    ocr_loader_stats(f->loader, &st);
    *out = st.skipped;
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

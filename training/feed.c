#include "training/feed.h"

#include <stdlib.h>
#include <string.h>

#include "core/memory.h"
#include "kernels/backend.h"
#include "kernels/ops.h"

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
    return feed_open_shard(f, cfg, split, dict, training, batch_override, 0, 1);
}

ocr_status_t feed_open_shard(Feed *f, const OcrConfig *cfg, const char *split, const OcrDict *dict, int training,
                             int batch_override, int rank, int world_size) {
    memset(f, 0, sizeof *f);
    OCR_TRY(ocr_loader_config_parse(&f->lc, cfg, split));
    f->lc_ok = 1;
    f->lc.train = training;
    OcrSamplerOptions *so = &f->lc.sampler;
    so->rank = rank;
    so->world_size = world_size;
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
    // An evaluation feed's label rejections are not the evaluation's: training/evaluate.c scores every
    // line itself and reports its own counts.
    if (training) ocr_skip_stats_log(ocr_loader_label_skips(f->loader), split);
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

// ---- batches on the model's device ---------------------------------------------------------------

void feed_batch_view(const FeedBatch *b, FeedDeviceBatch *out) {
    const int64_t B = b->count;
    ocr_device_t cpu = ocr_cpu();
    out->images = ocr_tensor_view(b->pixels, OCR_U8, cpu, 4, (int64_t[]){B, b->height, b->width, b->channels});
    out->widths = ocr_tensor_view(b->widths, OCR_I32, cpu, 1, (int64_t[]){B});
    out->lengths = ocr_tensor_view(b->lengths, OCR_I32, cpu, 1, (int64_t[]){B});
    out->labels = ocr_tensor_view(b->labels, OCR_I32, cpu, 2, (int64_t[]){B, b->max_len});
    out->count = b->count;
    out->max_len = b->max_len;
    out->host_labels = b->labels;
    out->host_lengths = b->lengths;
    out->host_widths = b->widths;
    out->host_index = b->index;
}

#define UPLOAD_SLOTS 2

static size_t up_align(size_t x) { return (x + 255) / 256 * 256; }

struct FeedUpload {
    ocr_device_t device;
    int async;                          // a GPU: the slots below exist; the CPU: views only
    int capacity, height, width, channels, max_len;
    size_t off_widths, off_lengths, off_labels, slot_bytes;
    void *pinned[UPLOAD_SLOTS];
    void *dev[UPLOAD_SLOTS];           // OCR_MEM_DATA on `device`
    OcrEvent *copied[UPLOAD_SLOTS];     // on the copy stream, after the slot's copy
    OcrEvent *consumed[UPLOAD_SLOTS];   // on the compute stream, after the slot's last reader
    int in_use[UPLOAD_SLOTS];           // consumed[k] was recorded and not yet waited for
    OcrStream *copy_stream;
    int next;                           // the slot the next upload fills
    int last;                           // the slot handed out last (-1: none)
};

ocr_status_t feed_upload_open(FeedUpload **out, ocr_device_t device, int capacity, int height, int width, int channels,
                              int max_len) {
    *out = NULL;
    if (device.type == OCR_DEVICE_CUDA && !ocr_backend_have_gpu())
        return ocr_set_error(OCR_ERR_UNSUPPORTED, "feed upload: this build has no CUDA backend");
    FeedUpload *u = calloc(1, sizeof *u);
    if (!u) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    u->device = device;
    u->async = ocr_backend_is_async(device);
    u->capacity = capacity;
    u->height = height;
    u->width = width;
    u->channels = channels;
    u->max_len = max_len;
    u->last = -1;
    if (!u->async) {
        *out = u;
        return OCR_OK;
    }
    size_t c = (size_t)capacity;
    u->off_widths = up_align(c * (size_t)height * width * channels);
    u->off_lengths = u->off_widths + up_align(c * sizeof(int32_t));
    u->off_labels = u->off_lengths + up_align(c * sizeof(int32_t));
    u->slot_bytes = u->off_labels + up_align(c * (size_t)(max_len > 0 ? max_len : 1) * sizeof(int32_t));
    ocr_status_t st = OCR_OK;
    if (ocr_backend_stream_create(device, &u->copy_stream) != OCR_OK) st = ocr_wrap_error(OCR_ERR_CUDA, "feed copy stream");
    for (int k = 0; st == OCR_OK && k < UPLOAD_SLOTS; k++) {
        u->pinned[k] = ocr_backend_host_alloc(device, u->slot_bytes);
        u->dev[k] = ocr_mem_alloc(device, OCR_MEM_DATA, u->slot_bytes);
        if (!u->pinned[k] || !u->dev[k])
            st = ocr_wrap_error(OCR_ERR_OOM, "batch upload buffers (%zu bytes per slot)", u->slot_bytes);
        else if (ocr_backend_event_create(device, &u->copied[k]) != OCR_OK ||
                 ocr_backend_event_create(device, &u->consumed[k]) != OCR_OK)
            st = ocr_wrap_error(OCR_ERR_CUDA, "feed events");
    }
    if (st != OCR_OK) {
        feed_upload_close(u);
        return st;
    }
    *out = u;
    return OCR_OK;
}

void feed_upload_close(FeedUpload *u) {
    if (!u) return;
    if (u->async) {
        ocr_device_t d = u->device;
        if (u->copy_stream) ocr_backend_stream_synchronize(d, u->copy_stream);
        for (int k = 0; k < UPLOAD_SLOTS; k++) {
            if (u->in_use[k]) ocr_backend_event_synchronize(d, u->consumed[k]);
            ocr_backend_event_destroy(d, u->copied[k]);
            ocr_backend_event_destroy(d, u->consumed[k]);
            ocr_backend_host_free(d, u->pinned[k]);
            ocr_mem_free(u->dev[k]);
        }
        ocr_backend_stream_destroy(d, u->copy_stream);
    }
    free(u);
}

ocr_status_t feed_upload(FeedUpload *u, const FeedBatch *b, FeedDeviceBatch *out) {
    if (b->count > u->capacity || b->height > u->height || b->width > u->width || b->channels != u->channels ||
        b->max_len > u->max_len)
        return ocr_set_error(OCR_ERR_INTERNAL, "feed upload: a batch of %d x %dx%dx%d (labels %d) exceeds the slots",
                             b->count, b->height, b->width, b->channels, b->max_len);
    feed_batch_view(b, out);
    if (!u->async) return OCR_OK;
    ocr_device_t dv = u->device;
    int k = u->next;
    // The slot's previous batch must have been read on the device before its buffers change.
    if (u->in_use[k]) {
        if (ocr_backend_event_synchronize(dv, u->consumed[k]) != OCR_OK) return ocr_wrap_error(OCR_ERR_CUDA, "feed upload");
        u->in_use[k] = 0;
    }
    size_t pix = (size_t)b->count * b->height * b->width * b->channels;
    size_t nlab = (size_t)b->count * b->max_len;
    char *p = u->pinned[k];
    memcpy(p, b->pixels, pix);
    memcpy(p + u->off_widths, b->widths, (size_t)b->count * sizeof(int32_t));
    memcpy(p + u->off_lengths, b->lengths, (size_t)b->count * sizeof(int32_t));
    memcpy(p + u->off_labels, b->labels, nlab * sizeof(int32_t));
    // One copy up to the end of the labels (the gaps are alignment padding).
    size_t bytes = u->off_labels + nlab * sizeof(int32_t);
    OcrStream *compute = ocr_backend_get_stream(dv);
    if (ocr_backend_memcpy_async(dv, u->dev[k], p, bytes, u->copy_stream) != OCR_OK ||
        ocr_backend_event_record(dv, u->copied[k], u->copy_stream) != OCR_OK ||
        ocr_backend_stream_wait_event(dv, compute, u->copied[k]) != OCR_OK)
        return ocr_wrap_error(OCR_ERR_CUDA, "feed upload");
    char *d = u->dev[k];
    int64_t B = b->count;
    out->images = ocr_tensor_view(d, OCR_U8, dv, 4, (int64_t[]){B, b->height, b->width, b->channels});
    out->widths = ocr_tensor_view(d + u->off_widths, OCR_I32, dv, 1, (int64_t[]){B});
    out->lengths = ocr_tensor_view(d + u->off_lengths, OCR_I32, dv, 1, (int64_t[]){B});
    out->labels = ocr_tensor_view(d + u->off_labels, OCR_I32, dv, 2, (int64_t[]){B, b->max_len});
    u->last = k;
    u->next = (k + 1) % UPLOAD_SLOTS;
    return OCR_OK;
}

void feed_upload_consumed(FeedUpload *u) {
    if (!u->async || u->last < 0) return;
    OcrStream *compute = ocr_backend_get_stream(u->device);
    if (ocr_backend_event_record(u->device, u->consumed[u->last], compute) != OCR_OK)
        OCR_ASSERT(0, "feed upload: %s", ocr_last_error());
    u->in_use[u->last] = 1;
    u->last = -1;
}

size_t feed_upload_pinned_bytes(const FeedUpload *u) { return u && u->async ? UPLOAD_SLOTS * u->slot_bytes : 0; }

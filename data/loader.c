// The threaded loader: sources (label files or a pack), per-sample pipeline, worker threads
// and the in-order batch ring. See loader.h; its configuration is read by loader_config.c.
#include "data/loader.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/memory.h"
#include "data/pack.h"
#include "data/utf8.h"

#define MAX_REPLACEMENTS 100  // consecutive failed loads before a sample gives up

static char *dup_str(const char *s) {
    if (!s) return NULL;
    char *d = strdup(s);
    return d;
}

// ---- sources: label files or a pack ------------------------------------------------

typedef struct {
    int is_pack;
    OcrDataset ds;
    int ds_open;
    OcrPack pack;
    // pack mode: the records whose labels encode, their labels, and this epoch's subset
    int64_t num_valid;
    int64_t *rec_of;       // valid entry → record
    int64_t *lab_off;      // valid entry → offset in lab
    int32_t *lab;
    int32_t *lab_len, *raw_len, *file_of;
    int64_t *active;       // this epoch's valid entries
    int64_t num_active;
    double *ratios;        // per pack file
    uint64_t seed;
    OcrSkipStats label_skips;
    OcrCharCounter unknown;
} Source;

static void source_close(Source *s) {
    if (s->ds_open) ocr_dataset_close(&s->ds);
    ocr_pack_close(&s->pack);
    free(s->rec_of), free(s->lab_off), free(s->lab), free(s->lab_len), free(s->raw_len), free(s->file_of);
    free(s->active), free(s->ratios);
    ocr_char_counter_free(&s->unknown);
    memset(s, 0, sizeof *s);
}

static ocr_skip_reason_t label_reason(ocr_label_result_t r) {
    switch (r) {
    case OCR_LABEL_EMPTY: return OCR_SKIP_EMPTY_LABEL;
    case OCR_LABEL_TOO_LONG: return OCR_SKIP_LABEL_TOO_LONG;
    case OCR_LABEL_NO_KNOWN_CHARS: return OCR_SKIP_NO_KNOWN_CHARS;
    default: return OCR_SKIP_BAD_UTF8;
    }
}

static ocr_status_t source_open_pack(Source *s, const OcrLoaderConfig *lc, const OcrDict *dict) {
    s->is_pack = 1;
    ocr_char_counter_init(&s->unknown);
    OCR_TRY(ocr_pack_open(&s->pack, lc->pack_file));
    OcrPackSpec want = {lc->pack_height, lc->transforms.order, 0};
    // The fingerprint check needs the label files; a pack also works without them.
    if (ocr_pack_source_hash(lc->data_dir, (const char *const *)lc->label_files, lc->num_label_files,
                             &want.source_hash) != OCR_OK) {
        ocr_log(OCR_LOG_INFO, "%s: label files not readable (%s); using pack %s without checking its sources",
                lc->section, ocr_last_error(), lc->pack_file);
        want.source_hash = 0;
    }
    char what[96];
    snprintf(what, sizeof what, "%s (%s)", lc->section, lc->config_name ? lc->config_name : "config");
    OCR_TRY(ocr_pack_check(&s->pack, &want, what));
    int64_t n = s->pack.num_records;
    int L = lc->max_text_length;
    s->rec_of = malloc(sizeof(int64_t) * (size_t)n);
    s->lab_off = malloc(sizeof(int64_t) * (size_t)n);
    s->lab = malloc(sizeof(int32_t) * (size_t)n * (size_t)L);
    s->lab_len = malloc(sizeof(int32_t) * (size_t)n);
    s->raw_len = malloc(sizeof(int32_t) * (size_t)n);
    s->file_of = malloc(sizeof(int32_t) * (size_t)n);
    s->active = malloc(sizeof(int64_t) * (size_t)n);
    s->ratios = malloc(sizeof(double) * (size_t)s->pack.num_files);
    if (!s->rec_of || !s->lab_off || !s->lab || !s->lab_len || !s->raw_len || !s->file_of || !s->active || !s->ratios)
        return ocr_set_error(OCR_ERR_OOM, "pack %s: out of memory for %lld labels", lc->pack_file, (long long)n);
    // Ratios apply per label file of the config, matched to the pack's files by position.
    for (int f = 0; f < s->pack.num_files; f++)
        s->ratios[f] = lc->num_ratios == 0 ? 1.0 : lc->ratios[lc->num_ratios == 1 ? 0 : (f < lc->num_ratios ? f : 0)];
    int64_t used = 0;
    for (int64_t i = 0; i < n; i++) {
        OcrPackRecord r;
        ocr_pack_record_info(&s->pack, i, &r);
        int len;
        ocr_label_result_t res =
            ocr_dict_encode(dict, r.text, (size_t)r.text_bytes, L, s->lab + used, &len, &s->unknown);
        if (res != OCR_LABEL_OK) {
            ocr_skip_stats_add(&s->label_skips, label_reason(res), "%s:%lld: label \"%.60s\" (%s)",
                               s->pack.file_names[r.file], (long long)r.line, r.text, ocr_label_result_name(res));
            continue;
        }
        if (lc->transforms.label_max_len && len > lc->transforms.label_max_len) {  // MultiLabelEncode
            ocr_skip_stats_add(&s->label_skips, OCR_SKIP_LABEL_TOO_LONG,
                               "%s:%lld: label \"%.60s\" (%d known characters, over MultiLabelEncode's %d)",
                               s->pack.file_names[r.file], (long long)r.line, r.text, len,
                               lc->transforms.label_max_len);
            continue;
        }
        s->rec_of[s->num_valid] = i;
        s->lab_off[s->num_valid] = used;
        s->lab_len[s->num_valid] = len;
        s->raw_len[s->num_valid] = (int32_t)ocr_utf8_length(r.text, (size_t)r.text_bytes);
        s->file_of[s->num_valid] = r.file;
        used += len;
        s->num_valid++;
    }
    if (s->num_valid == 0)
        return ocr_set_error(OCR_ERR_FORMAT, "pack %s: no record has a usable label (%lld rejected)", lc->pack_file,
                             (long long)ocr_skip_stats_total(&s->label_skips));
    s->seed = lc->seed;
    return OCR_OK;
}

static ocr_status_t source_open(Source *s, const OcrLoaderConfig *lc, const OcrDict *dict) {
    memset(s, 0, sizeof *s);
    if (lc->pack_file) return source_open_pack(s, lc, dict);
    OcrDatasetOptions opt = {0};
    opt.data_dir = lc->data_dir;
    opt.lmdb = lc->lmdb;
    opt.label_files = (const char *const *)lc->label_files;
    opt.num_label_files = lc->num_label_files;
    opt.ratios = lc->num_ratios ? lc->ratios : NULL;
    opt.num_ratios = lc->num_ratios;
    opt.delimiter = lc->delimiter;
    opt.max_text_length = lc->max_text_length;
    opt.max_encoded_length = lc->transforms.label_max_len;
    opt.seed = lc->seed;
    OCR_TRY(ocr_dataset_open(&s->ds, &opt, dict));
    s->ds_open = 1;
    return OCR_OK;
}

// Round half to even, as Python's round().
static int64_t round_half_even(double x) {
    double f = (double)(int64_t)x, d = x - f;
    int64_t i = (int64_t)f;
    if (d > 0.5 || (d == 0.5 && (i & 1))) i++;
    return i;
}

#define OCR_PACK_SUBSET_STREAM 0x5061636b00000000ull  // "Pack" << 32, plus the epoch

static void source_set_epoch(Source *s, uint64_t epoch) {
    if (!s->is_pack) {
        ocr_dataset_set_epoch(&s->ds, epoch);
        return;
    }
    // Per file: all valid records, or round(r·n) of them drawn for this epoch (kept in order).
    s->num_active = 0;
    OcrRng rng = ocr_rng_make(s->seed, OCR_PACK_SUBSET_STREAM + epoch);
    int64_t i = 0;
    while (i < s->num_valid) {
        int64_t j = i;
        while (j < s->num_valid && s->file_of[j] == s->file_of[i]) j++;
        int64_t n = j - i, take = n;
        double r = s->ratios[s->file_of[i]];
        if (r < 1.0) take = round_half_even(r * (double)n);
        if (take >= n) {
            for (int64_t k = i; k < j; k++) s->active[s->num_active++] = k;
        } else {
            // Selection sampling (Knuth's algorithm S): each kept with the right odds, in order.
            int64_t need = take;
            for (int64_t k = i; k < j && need > 0; k++) {
                if ((double)ocr_rng_next_double(&rng) * (double)(j - k) < (double)need) {
                    s->active[s->num_active++] = k;
                    need--;
                }
            }
        }
        i = j;
    }
    if (s->num_active == 0) s->active[s->num_active++] = 0;  // every ratio rounded to nothing
}

static int64_t source_size(const Source *s) { return s->is_pack ? s->num_active : ocr_dataset_size(&s->ds); }

// The epoch's samples per label file (the per-batch mix's sources), n entries.
static ocr_status_t source_file_sizes(const Source *s, int64_t *sizes, int n) {
    if (!s->is_pack) {
        if (s->ds.num_files != n)
            return ocr_set_error(OCR_ERR_INVALID_ARG, "loader: %d label files for a mix of %d", s->ds.num_files, n);
        ocr_dataset_file_sizes(&s->ds, sizes);
        return OCR_OK;
    }
    if (s->pack.num_files != n)
        return ocr_set_error(OCR_ERR_CONFIG, "batch_ratio_list has %d entries but the pack holds %d label files", n,
                             s->pack.num_files);
    for (int f = 0; f < n; f++) sizes[f] = 0;
    for (int64_t k = 0; k < s->num_active; k++) sizes[s->file_of[s->active[k]]]++;
    return OCR_OK;
}

// The label of sample idx: class indices, their count and the raw text length (code points).
static ocr_status_t source_label(const Source *s, int64_t idx, const int32_t **label, int *len, int *raw_len) {
    if (s->is_pack) {
        int64_t e = s->active[idx];
        *label = s->lab + s->lab_off[e];
        *len = s->lab_len[e];
        *raw_len = s->raw_len[e];
        return OCR_OK;
    }
    OcrSample smp;
    OCR_TRY(ocr_dataset_get(&s->ds, idx, &smp));
    *label = smp.label;
    *len = smp.label_len;
    *raw_len = (int)ocr_utf8_length(smp.text, strlen(smp.text));
    return OCR_OK;
}

// A name for "warn once" bookkeeping: the image path, or the pack record.
static uint64_t source_key(const Source *s, int64_t idx) {
    if (s->is_pack) return (uint64_t)s->rec_of[s->active[idx]] * 0x9E3779B97F4A7C15ull + 1;
    OcrSample smp;
    if (ocr_dataset_get(&s->ds, idx, &smp) != OCR_OK) return 0;
    // The line too: every sample of an LMDB environment has the environment as its path.
    return (ocr_pack_hash64(smp.path, strlen(smp.path), 7) ^ ((uint64_t)smp.line * 0x9E3779B97F4A7C15ull)) | 1;
}

static ocr_status_t source_load(const Source *s, int64_t idx, ocr_channel_order_t order, OcrImage *img,
                                ocr_skip_reason_t *reason) {
    if (!s->is_pack) return ocr_dataset_load_image(&s->ds, idx, order, img, reason);
    memset(img, 0, sizeof *img);
    OcrPackRecord r;
    ocr_status_t st = ocr_pack_record(&s->pack, s->rec_of[s->active[idx]], &r);
    if (st != OCR_OK) {
        *reason = OCR_SKIP_IMAGE_CORRUPT;
        return st;
    }
    st = ocr_image_alloc(img, r.width, r.height, r.channels);
    if (st != OCR_OK) {
        *reason = OCR_SKIP_REASON_COUNT;
        return st;
    }
    memcpy(img->pixels, r.pixels, (size_t)r.width * r.height * r.channels);
    return OCR_OK;
}

// ---- the loader ----------------------------------------------------------------------

typedef struct {
    OcrBatch batch;
    void *mem;
    int64_t batch_index;  // the batch in this slot, or −1
    int done;             // samples finished
    OcrSkipStats skips;
    int example_item[OCR_SKIP_REASON_COUNT];  // the sample each example came from
    int64_t replaced, merges;
} Slot;

struct OcrLoader {
    OcrLoaderConfig lc;  // owned copy of the strings we keep
    const OcrDict *dict;
    Source src;
    OcrSampler sampler;
    int channels, L;
    int num_slots;
    Slot *slots;
    pthread_t *threads;
    int num_threads;
    pthread_mutex_t mu;
    pthread_cond_t work_cv;  // workers: work may be available, or stop
    pthread_cond_t done_cv;  // consumer: a batch finished, or an error, or idle
    int stop;
    uint64_t epoch;
    int64_t num_batches;
    int64_t claim_batch;     // next sample to hand out: (claim_batch, claim_item)
    int claim_item;
    int64_t next_out;        // next batch for the consumer
    int64_t released;        // batches given back (in order)
    int in_flight;
    ocr_status_t error;
    char error_msg[512];
    OcrLoaderStats stats;
    uint64_t *warned;        // "warn once" set of failed images (open addressing, 0 = empty)
    size_t warned_cap, warned_count;
};

typedef struct {
    OcrSkipStats skips;
    int any_skip;
    int64_t replaced, merges;
} SampleStats;

static uint64_t sample_stream(int purpose, uint64_t epoch, int32_t slot) {
    return OCR_LOADER_STREAM | ((uint64_t)purpose << 56) | ((epoch & 0xFFFFFFull) << 32) | (uint32_t)slot;
}

// Logs the first failure of each image (called with the lock held).
static void warn_once(OcrLoader *l, uint64_t key, const char *msg) {
    if (key == 0) return;
    if (l->warned_count * 2 >= l->warned_cap) {
        size_t cap = l->warned_cap ? l->warned_cap * 2 : 64;
        uint64_t *t = calloc(cap, sizeof(uint64_t));
        if (!t) return;  // diagnostics only
        for (size_t i = 0; i < l->warned_cap; i++)
            if (l->warned[i]) {
                size_t j = (size_t)(l->warned[i] % cap);
                while (t[j]) j = (j + 1) % cap;
                t[j] = l->warned[i];
            }
        free(l->warned);
        l->warned = t;
        l->warned_cap = cap;
    }
    size_t j = (size_t)(key % l->warned_cap);
    while (l->warned[j]) {
        if (l->warned[j] == key) return;
        j = (j + 1) % l->warned_cap;
    }
    l->warned[j] = key;
    l->warned_count++;
    ocr_log(OCR_LOG_WARN, "%s: skipping an image: %s", l->lc.section, msg);
}

// Loads sample *idx, replacing it after a data failure (next index, or a random one from
// `rng`) until one loads. Failures are counted in ss.
static ocr_status_t load_replacing(OcrLoader *l, int64_t *idx, OcrImage *img, OcrRng *rng, SampleStats *ss) {
    int64_t n = source_size(&l->src);
    for (int attempt = 0;; attempt++) {
        ocr_skip_reason_t reason = OCR_SKIP_REASON_COUNT;
        ocr_status_t st = source_load(&l->src, *idx, l->lc.transforms.order, img, &reason);
        if (st == OCR_OK) return OCR_OK;
        if (reason == OCR_SKIP_REASON_COUNT) return st;
        const char *msg = ocr_last_error();
        ocr_skip_stats_add(&ss->skips, reason, "%s", msg);
        ss->any_skip = 1;
        uint64_t key = source_key(&l->src, *idx);
        pthread_mutex_lock(&l->mu);
        warn_once(l, key, msg);
        pthread_mutex_unlock(&l->mu);
        if (attempt + 1 >= MAX_REPLACEMENTS)
            return ocr_set_error(OCR_ERR_IO, "%s: %d images in a row could not be loaded (last: %s)", l->lc.section,
                                 MAX_REPLACEMENTS, ss->skips.example[reason]);
        *idx = rng ? ocr_rng_next_int(rng, 0, n - 1) : (*idx + 1) % n;
    }
}

// Builds sample i of a batch: load (with replacement), RecConAug / RecAug in list order,
// resize and pad into the batch, label.
static ocr_status_t build_sample(OcrLoader *l, OcrBatch *bt, int i, int32_t slot, SampleStats *ss) {
    const OcrTransformList *t = &l->lc.transforms;
    OcrRng aug = ocr_rng_make(l->lc.seed, sample_stream(0, bt->epoch, slot));
    OcrRng rep = ocr_rng_make(l->lc.seed, sample_stream(1, bt->epoch, slot));
    OcrRng ext = ocr_rng_make(l->lc.seed, sample_stream(2, bt->epoch, slot));
    int64_t n = source_size(&l->src);
    int64_t idx = ocr_sampler_index(&l->sampler, slot);
    OcrImage img = {0};
    OCR_TRY(load_replacing(l, &idx, &img, l->lc.train ? &rep : NULL, ss));
    if (idx != ocr_sampler_index(&l->sampler, slot)) ss->replaced++;
    int32_t *label = bt->labels + (size_t)i * bt->max_text_length;
    const int32_t *lab;
    int len, raw;
    ocr_status_t st = source_label(&l->src, idx, &lab, &len, &raw);
    if (st == OCR_OK) memcpy(label, lab, sizeof(int32_t) * (size_t)len);
    for (int k = 0; st == OCR_OK && k < t->num_ops; k++) {
        if (t->ops[k] == OCR_TOP_REC_AUG) {
            st = ocr_rec_aug(&img, &t->rec_aug, &aug);
            continue;
        }
        // RecConAug: with probability prob, append up to ext_data_num random samples while
        // the text length and the width/height ratio allow (PaddleOCR's stop rules).
        if (!(ocr_rng_next_double(&aug) < t->con_aug.prob)) continue;
        for (int e = 0; st == OCR_OK && e < t->con_aug.ext_data_num; e++) {
            int64_t j = ocr_rng_next_int(&ext, 0, n - 1);
            OcrImage xi = {0};
            st = load_replacing(l, &j, &xi, &ext, ss);
            if (st != OCR_OK) break;
            const int32_t *xl;
            int xlen, xraw;
            st = source_label(&l->src, j, &xl, &xlen, &xraw);
            int fits = st == OCR_OK && ocr_rec_con_aug_fits(&t->con_aug, raw, img.width, img.height, xraw, xi.width,
                                                             xi.height);
            const int max_len = t->label_max_len ? t->label_max_len : bt->max_text_length;  // MultiLabelEncode
            if (fits && len + xlen <= max_len) {
                st = ocr_rec_con_aug_merge(&img, &xi, t->con_aug.image_h);
                if (st == OCR_OK) {
                    memcpy(label + len, xl, sizeof(int32_t) * (size_t)xlen);
                    len += xlen;
                    raw += xraw;
                    ss->merges++;
                }
            }
            ocr_image_free(&xi);
            if (!fits) break;
        }
    }
    if (st == OCR_OK) {
        size_t slot_bytes = (size_t)bt->height * bt->width * bt->channels;
        int rw;
        float vr;
        st = ocr_rec_resize_pad(bt->images + (size_t)i * slot_bytes, bt->height, bt->width, bt->channels, &img,
                                t->has_resize ? t->padding : 1, &rw, &vr);
        bt->widths[i] = rw;
        bt->valid_ratios[i] = vr;
    }
    ocr_image_free(&img);
    if (st != OCR_OK) return st;
    memset(label + len, 0, sizeof(int32_t) * (size_t)(bt->max_text_length - len));
    bt->lengths[i] = len;
    bt->indices[i] = l->src.is_pack ? l->src.rec_of[l->src.active[idx]] : idx;
    return OCR_OK;
}

static void set_error_locked(OcrLoader *l, ocr_status_t st, const char *msg) {
    if (l->error != OCR_OK) return;
    l->error = st;
    snprintf(l->error_msg, sizeof l->error_msg, "%s", msg);
    pthread_cond_broadcast(&l->done_cv);
}

static void *worker_main(void *arg) {
    OcrLoader *l = arg;
    SampleStats *ss = malloc(sizeof *ss);
    pthread_mutex_lock(&l->mu);
    if (!ss) set_error_locked(l, OCR_ERR_OOM, "loader: out of memory");
    for (;;) {
        if (l->stop || !ss) break;
        int can = l->error == OCR_OK && l->claim_batch < l->num_batches && l->claim_batch < l->released + l->num_slots;
        if (!can) {
            pthread_cond_wait(&l->work_cv, &l->mu);
            continue;
        }
        int64_t b = l->claim_batch;
        int i = l->claim_item;
        Slot *sl = &l->slots[b % l->num_slots];
        OcrSamplerBatch sb;
        ocr_sampler_batch(&l->sampler, b, &sb);
        if (i == 0) {  // first claim of this batch: set the slot up
            OcrBatch *bt = &sl->batch;
            sl->batch_index = b;
            sl->done = 0;
            memset(&sl->skips, 0, sizeof sl->skips);
            for (int r = 0; r < OCR_SKIP_REASON_COUNT; r++) sl->example_item[r] = INT32_MAX;
            sl->replaced = sl->merges = 0;
            bt->epoch = l->epoch;
            bt->index = b;
            bt->size = sb.size;
            bt->height = sb.height;
            bt->width = sb.width;
        }
        if (++l->claim_item == sb.size) l->claim_batch++, l->claim_item = 0;
        l->in_flight++;
        pthread_mutex_unlock(&l->mu);

        memset(ss, 0, sizeof *ss);
        ocr_status_t st = build_sample(l, &sl->batch, i, sb.slots[i], ss);

        pthread_mutex_lock(&l->mu);
        l->in_flight--;
        if (st != OCR_OK) set_error_locked(l, st, ocr_last_error());
        // Counts add up; each reason keeps the example of the lowest sample in the batch, so
        // the statistics do not depend on which worker finished first.
        for (int r = 0; ss->any_skip && r < OCR_SKIP_REASON_COUNT; r++) {
            if (!ss->skips.count[r]) continue;
            sl->skips.count[r] += ss->skips.count[r];
            if (i < sl->example_item[r]) {
                memcpy(sl->skips.example[r], ss->skips.example[r], OCR_SKIP_EXAMPLE_MAX);
                sl->example_item[r] = i;
            }
        }
        sl->replaced += ss->replaced;
        sl->merges += ss->merges;
        if (++sl->done == sl->batch.size || l->in_flight == 0) pthread_cond_broadcast(&l->done_cv);
    }
    pthread_mutex_unlock(&l->mu);
    free(ss);
    return NULL;
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

ocr_status_t ocr_loader_create(OcrLoader **out, const OcrLoaderConfig *lc, const OcrDict *dict) {
    *out = NULL;
    if ((lc->num_label_files < 1 && !lc->lmdb) || lc->max_text_length < 1 || lc->sampler.num_scales < 1)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "loader: incomplete configuration");
    OcrLoader *l = calloc(1, sizeof *l);
    if (!l) return ocr_set_error(OCR_ERR_OOM, "loader: out of memory");
    ocr_status_t st = OCR_OK;
    // Own copies of the strings.
    l->lc = *lc;
    l->lc.config_name = dup_str(lc->config_name);
    l->lc.data_dir = dup_str(lc->data_dir);
    l->lc.delimiter = dup_str(lc->delimiter);
    l->lc.pack_file = dup_str(lc->pack_file);
    l->lc.label_files = calloc((size_t)(lc->num_label_files ? lc->num_label_files : 1), sizeof(char *));
    l->lc.ratios = calloc((size_t)(lc->num_label_files ? lc->num_label_files : 1), sizeof(double));
    l->lc.num_label_files = 0;
    if (!l->lc.label_files || !l->lc.ratios) {
        free(l->lc.label_files);
        free(l->lc.ratios);
        free(l->lc.config_name), free(l->lc.data_dir), free(l->lc.delimiter), free(l->lc.pack_file);
        free(l);
        return ocr_set_error(OCR_ERR_OOM, "loader: out of memory");
    }
    if (lc->ratios) memcpy(l->lc.ratios, lc->ratios, sizeof(double) * (size_t)(lc->num_ratios));
    for (int i = 0; i < lc->num_label_files; i++) {
        l->lc.label_files[i] = dup_str(lc->label_files[i]);
        l->lc.num_label_files = i + 1;
        if (!l->lc.label_files[i]) st = ocr_set_error(OCR_ERR_OOM, "loader: out of memory");
    }
    l->dict = dict;
    l->L = lc->max_text_length;
    l->channels = lc->transforms.channels;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->work_cv, NULL);
    pthread_cond_init(&l->done_cv, NULL);
    if (st == OCR_OK) st = source_open(&l->src, &l->lc, dict);
    if (st == OCR_OK) {
        st = ocr_sampler_init(&l->sampler, &l->lc.sampler);
        if (st != OCR_OK && l->lc.sampler.num_sources)
            st = ocr_wrap_error(st, "%s.dataset.batch_ratio_list", l->lc.section);
    }
    // The ring of batch buffers, each sized for the largest scale.
    if (st == OCR_OK) {
        l->num_slots = l->lc.prefetch + 1 < 2 ? 2 : l->lc.prefetch + 1;
        l->slots = calloc((size_t)l->num_slots, sizeof(Slot));
        if (!l->slots) st = ocr_set_error(OCR_ERR_OOM, "loader: out of memory");
    }
    size_t max_img = 0;
    int max_bs = ocr_sampler_max_batch(&l->lc.sampler);
    for (int i = 0; i < l->lc.sampler.num_scales; i++) {
        const OcrBatchShape *sc = &l->lc.sampler.scales[i];
        size_t bytes = (size_t)sc->batch_size * sc->height * sc->width * l->channels;
        if (bytes > max_img) max_img = bytes;
    }
    size_t o_img = 0, o_w = align64(max_img), o_vr = o_w + align64(sizeof(int32_t) * max_bs),
           o_lab = o_vr + align64(sizeof(float) * max_bs), o_len = o_lab + align64(sizeof(int32_t) * max_bs * l->L),
           o_idx = o_len + align64(sizeof(int32_t) * max_bs), total = o_idx + align64(sizeof(int64_t) * max_bs);
    for (int s = 0; st == OCR_OK && s < l->num_slots; s++) {
        Slot *sl = &l->slots[s];
        sl->mem = ocr_mem_alloc(ocr_cpu(), OCR_MEM_DATA, total);
        if (!sl->mem) {
            st = ocr_wrap_error(OCR_ERR_OOM, "loader: batch buffers");
            break;
        }
        char *m = sl->mem;
        sl->batch_index = -1;
        OcrBatch *bt = &sl->batch;
        bt->channels = l->channels;
        bt->max_text_length = l->L;
        bt->images = (uint8_t *)(m + o_img);
        bt->widths = (int32_t *)(m + o_w);
        bt->valid_ratios = (float *)(m + o_vr);
        bt->labels = (int32_t *)(m + o_lab);
        bt->lengths = (int32_t *)(m + o_len);
        bt->indices = (int64_t *)(m + o_idx);
    }
    if (st == OCR_OK) {
        l->threads = calloc((size_t)l->lc.num_workers, sizeof(pthread_t));
        if (!l->threads) st = ocr_set_error(OCR_ERR_OOM, "loader: out of memory");
    }
    for (int i = 0; st == OCR_OK && i < l->lc.num_workers; i++) {
        if (pthread_create(&l->threads[i], NULL, worker_main, l) != 0) {
            st = ocr_set_error(OCR_ERR_INTERNAL, "loader: cannot start worker thread %d", i);
            break;
        }
        l->num_threads++;
    }
    if (st != OCR_OK) {
        ocr_loader_destroy(l);
        return st;
    }
    *out = l;
    return OCR_OK;
}

// Waits until no worker is inside a sample (lock held).
static void quiesce_locked(OcrLoader *l) {
    l->num_batches = 0;  // nothing new is claimed
    while (l->in_flight > 0) pthread_cond_wait(&l->done_cv, &l->mu);
}

void ocr_loader_destroy(OcrLoader *l) {
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    pthread_cond_broadcast(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->num_threads; i++) pthread_join(l->threads[i], NULL);
    free(l->threads);
    for (int s = 0; l->slots && s < l->num_slots; s++) ocr_mem_free(l->slots[s].mem);
    free(l->slots);
    ocr_sampler_free(&l->sampler);
    source_close(&l->src);
    free(l->warned);
    pthread_cond_destroy(&l->work_cv);
    pthread_cond_destroy(&l->done_cv);
    pthread_mutex_destroy(&l->mu);
    OcrLoaderConfig *lc = &l->lc;
    free(lc->config_name), free(lc->data_dir), free(lc->delimiter), free(lc->pack_file), free(lc->ratios);
    for (int i = 0; i < lc->num_label_files; i++) free(lc->label_files[i]);
    free(lc->label_files);
    free(l);
}

ocr_status_t ocr_loader_start_epoch(OcrLoader *l, uint64_t epoch, int64_t first_batch) {
    pthread_mutex_lock(&l->mu);
    quiesce_locked(l);
    source_set_epoch(&l->src, epoch);
    ocr_status_t st;
    if (l->lc.sampler.num_sources) {
        int64_t sizes[OCR_SAMPLER_MAX_SOURCES];
        st = source_file_sizes(&l->src, sizes, l->lc.sampler.num_sources);
        if (st == OCR_OK) st = ocr_sampler_set_epoch_sources(&l->sampler, epoch, sizes, l->lc.sampler.num_sources);
        if (st != OCR_OK)
            st = ocr_wrap_error(st, "%s.dataset.batch_ratio_list", l->lc.section);
    } else {
        st = ocr_sampler_set_epoch(&l->sampler, epoch, source_size(&l->src));
    }
    if (st == OCR_OK && (first_batch < 0 || first_batch > l->sampler.num_batches))
        st = ocr_set_error(OCR_ERR_INVALID_ARG, "loader: resume at batch %lld of %lld", (long long)first_batch,
                           (long long)l->sampler.num_batches);
    if (st == OCR_OK) {
        l->epoch = epoch;
        l->error = OCR_OK;
        l->claim_batch = l->next_out = l->released = first_batch;
        l->claim_item = 0;
        for (int s = 0; s < l->num_slots; s++) l->slots[s].batch_index = -1;
        l->num_batches = l->sampler.num_batches;
        pthread_cond_broadcast(&l->work_cv);
    }
    pthread_mutex_unlock(&l->mu);
    return st;
}

int64_t ocr_loader_num_batches(const OcrLoader *l) { return l->sampler.num_batches; }
int64_t ocr_loader_num_samples(const OcrLoader *l) { return source_size(&l->src); }

ocr_status_t ocr_loader_next(OcrLoader *l, const OcrBatch **batch) {
    *batch = NULL;
    pthread_mutex_lock(&l->mu);
    ocr_status_t st = OCR_OK;
    if (l->next_out >= l->num_batches) goto done;
    if (l->next_out >= l->released + l->num_slots) {
        st = ocr_set_error(OCR_ERR_INVALID_ARG, "loader: %d batches held; release one before asking for the next",
                           l->num_slots);
        goto done;
    }
    Slot *sl = &l->slots[l->next_out % l->num_slots];
    while (l->error == OCR_OK && !(sl->batch_index == l->next_out && sl->done == sl->batch.size))
        pthread_cond_wait(&l->done_cv, &l->mu);
    if (l->error != OCR_OK) {
        st = ocr_set_error(l->error, "%s", l->error_msg);
        goto done;
    }
    ocr_skip_stats_merge(&l->stats.skipped, &sl->skips);
    l->stats.replaced += sl->replaced;
    l->stats.con_aug_merges += sl->merges;
    l->stats.batches++;
    l->stats.samples += sl->batch.size;
    l->next_out++;
    *batch = &sl->batch;
done:
    pthread_mutex_unlock(&l->mu);
    return st;
}

void ocr_loader_release(OcrLoader *l, const OcrBatch *batch) {
    if (!batch) return;
    pthread_mutex_lock(&l->mu);
    OCR_ASSERT(batch->index == l->released && l->released < l->next_out, "batches must be released in order");
    l->released++;
    pthread_cond_broadcast(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
}

OcrLoaderPosition ocr_loader_position(const OcrLoader *l) {
    OcrLoaderPosition p = {l->epoch, l->next_out};
    return p;
}

void ocr_loader_stats(const OcrLoader *l, OcrLoaderStats *out) { *out = l->stats; }

const OcrSkipStats *ocr_loader_label_skips(const OcrLoader *l) {
    return l->src.is_pack ? &l->src.label_skips : &l->src.ds.skipped;
}

const OcrCharCounter *ocr_loader_unknown_chars(const OcrLoader *l) {
    return l->src.is_pack ? &l->src.unknown : &l->src.ds.unknown_chars;
}

const OcrDataset *ocr_loader_dataset(const OcrLoader *l) { return l->src.is_pack ? NULL : &l->src.ds; }

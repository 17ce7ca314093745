// Evaluation that scores every label line (see evaluate.h for the paths a line can take).
#include "training/evaluate.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "training/inference.h"
#include "core/fileio.h"
#include "core/timer.h"
#include "data/lmdb_dataset.h"
#include "data/transforms.h"
#include "data/utf8.h"
#include "eval/decode.h"
#include "eval/metrics.h"
#include "eval/utf8.h"
#include "kernels/ops.h"

// ---- decoding ----------------------------------------------------------------------------------

ocr_status_t decode_sample(const OcrModel *m, const OcrDict *dict, int b, char *text, size_t cap, float *conf) {
    const OcrTensor *probs = ocr_model_probs(m);
    if (!probs) return ocr_set_error(OCR_ERR_INTERNAL, "decode: no inference pass");
    int T = (int)probs->shape[1], C = (int)probs->shape[2];
    if (C != dict->num_classes)
        return ocr_set_error(OCR_ERR_CONFIG, "the model has %d classes, the dictionary %d", C, dict->num_classes);
    float stackbuf[4096];
    float *row = (size_t)T * C <= sizeof stackbuf / sizeof *stackbuf ? stackbuf : malloc((size_t)T * C * sizeof(float));
    if (!row) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    size_t esz = ocr_dtype_size(probs->dtype);
    const char *src = (const char *)probs->data + (size_t)b * T * C * esz;
    if (probs->device.type == OCR_DEVICE_CPU) {
        OcrTensor v = ocr_tensor_view((void *)src, probs->dtype, probs->device, 2, (int64_t[]){T, C});
        ocr_tensor_to_f32(&v, row);
    } else {
        // A GPU pass: the sample's rows to the host (waits for the forward), converted there.
        void *h = malloc((size_t)T * C * esz);
        if (!h) {
            if (row != stackbuf) free(row);
            return ocr_set_error(OCR_ERR_OOM, "out of host memory");
        }
        ocr_copy_bytes(ocr_cpu(), h, probs->device, src, (size_t)T * C * esz);
        OcrTensor v = ocr_tensor_view(h, probs->dtype, ocr_cpu(), 2, (int64_t[]){T, C});
        ocr_tensor_to_f32(&v, row);
        free(h);
    }
    ocr_status_t st = ctc_greedy_decode(text, cap, conf, row, T, C, 0, dict->classes);
    if (row != stackbuf) free(row);
    return st;
}

// ---- label lines -------------------------------------------------------------------------------

static ocr_status_t set_push(EvalSet *s, const char *path, size_t path_len, const char *label, size_t label_len,
                             const char *where) {
    if (s->n == s->cap_) {
        int64_t cap = s->cap_ ? s->cap_ * 2 : 256;
        char **p = realloc(s->path, sizeof(char *) * (size_t)cap);
        if (p) s->path = p;
        char **l = realloc(s->label, sizeof(char *) * (size_t)cap);
        if (l) s->label = l;
        char **w = realloc(s->where, sizeof(char *) * (size_t)cap);
        if (w) s->where = w;
        if (!p || !l || !w) return ocr_set_error(OCR_ERR_OOM, "label lines: out of memory");
        s->cap_ = cap;
    }
    char *p = strndup(path, path_len), *l = strndup(label, label_len), *w = strdup(where);
    if (!p || !l || !w) {
        free(p);
        free(l);
        free(w);
        return ocr_set_error(OCR_ERR_OOM, "label lines: out of memory");
    }
    s->path[s->n] = p;
    s->label[s->n] = l;
    s->where[s->n] = w;
    s->n++;
    return OCR_OK;
}

// The first occurrence of needle (n bytes) in [p, p + len), or NULL.
static const char *find_bytes(const char *p, size_t len, const char *needle, size_t n) {
    for (size_t i = 0; n <= len && i <= len - n; i++)
        if (p[i] == needle[0] && memcmp(p + i, needle, n) == 0) return p + i;
    return NULL;
}

// os.path.join(data_dir, path): an absolute path stays as it is.
static ocr_status_t join_path(char *out, size_t cap, const char *dir, const char *path, size_t n) {
    int k;
    if (!dir || !*dir || path[0] == '/') k = snprintf(out, cap, "%.*s", (int)n, path);
    else k = snprintf(out, cap, "%s%s%.*s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", (int)n, path);
    if (k < 0 || (size_t)k >= cap) return ocr_set_error(OCR_ERR_INVALID_ARG, "image path too long: %.*s", (int)n, path);
    return OCR_OK;
}

ocr_status_t eval_set_read_file(EvalSet *s, const char *label_file, const char *data_dir, const char *delimiter) {
    if (!delimiter || !*delimiter) delimiter = "\t";
    size_t dl = strlen(delimiter);
    char *data;
    size_t size;
    if (!ocr_file_exists(label_file))
        return ocr_set_error(OCR_ERR_NOT_FOUND, "label file %s does not exist", label_file);
    OCR_TRY(ocr_read_file(label_file, &data, &size));
    const char *p = data, *end = data + size;
    if (size >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) p += 3;
    ocr_status_t st = OCR_OK;
    char where[1200], joined[4200];
    for (int64_t line_no = 1; p < end && st == OCR_OK; line_no++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end, *next = nl ? nl + 1 : end;
        while (le > p && le[-1] == '\r') le--;
        size_t len = (size_t)(le - p);
        snprintf(where, sizeof where, "%s:%lld", label_file, (long long)line_no);
        if (len == 0) {
            p = next;
            continue;
        }
        if (memchr(p, '\0', len) || !ocr_utf8_valid(p, len, NULL)) {
            s->bad_lines++;
            ocr_skip_stats_add(&s->bad, OCR_SKIP_BAD_UTF8, "%s: not valid UTF-8", where);
            p = next;
            continue;
        }
        const char *d = find_bytes(p, len, delimiter, dl);
        if (!d) {
            s->bad_lines++;
            ocr_skip_stats_add(&s->bad, OCR_SKIP_NO_DELIMITER, "%s: no delimiter in \"%.*s\"", where,
                               (int)(len < 80 ? len : 80), p);
            p = next;
            continue;
        }
        const char *lab = d + dl;
        const char *lab_end = find_bytes(lab, (size_t)(le - lab), delimiter, dl);  // split()[1]
        if (!lab_end) lab_end = le;
        const char *path = p;
        size_t path_len = (size_t)(d - p);
        char first[4096];
        if (path_len > 0 && path[0] == '[') {
            // A JSON list of alternatives: evaluation takes the first (PaddleOCR picks one at random).
            char *tmp = strndup(path, path_len);
            cJSON *arr = tmp ? cJSON_Parse(tmp) : NULL;
            free(tmp);
            if (arr && cJSON_IsArray(arr)) {
                const cJSON *e0 = cJSON_GetArrayItem(arr, 0);
                if (e0 && cJSON_IsString(e0) && e0->valuestring[0]) {
                    snprintf(first, sizeof first, "%s", e0->valuestring);
                    path = first;
                    path_len = strlen(first);
                } else {
                    path_len = 0;
                }
            }
            cJSON_Delete(arr);
        }
        if (path_len == 0) {
            s->bad_lines++;
            ocr_skip_stats_add(&s->bad, OCR_SKIP_BAD_PATH, "%s: empty image path", where);
        } else if (lab_end == lab) {
            s->bad_lines++;
            ocr_skip_stats_add(&s->bad, OCR_SKIP_EMPTY_LABEL, "%s: empty label", where);
        } else {
            st = join_path(joined, sizeof joined, data_dir, path, path_len);
            if (st == OCR_OK) st = set_push(s, joined, strlen(joined), lab, (size_t)(lab_end - lab), where);
        }
        p = next;
    }
    free(data);
    return st;
}

// An LMDBDataSet: every record label-%09d of every environment under data_dir is a line
// ("env:i"); a missing label or one that is not UTF-8 is a bad line, as in a label file.
static ocr_status_t eval_set_read_lmdb(EvalSet *s, const OcrLoaderConfig *lc) {
    char **dirs;
    int n;
    OCR_TRY(ocr_lmdb_find_envs(lc->data_dir, &dirs, &n));
    ocr_status_t st = OCR_OK;
    s->lmdb_envs_ = calloc((size_t)(n ? n : 1), sizeof *s->lmdb_envs_);
    if (!s->lmdb_envs_) st = ocr_set_error(OCR_ERR_OOM, "label lines: out of memory");
    for (int e = 0; st == OCR_OK && e < n; e++) {
        st = ocr_lmdb_env_open(&s->lmdb_envs_[e], dirs[e]);
        if (st != OCR_OK) break;
        s->num_lmdb_envs_ = e + 1;
        OcrLmdbReader r = ocr_lmdb_env_reader(s->lmdb_envs_[e]);
        int64_t count;
        st = ocr_lmdb_read_num_samples(&r, &count);
        for (int64_t i = 1; st == OCR_OK && i <= count; i++) {
            char key[32], where[1200];
            ocr_lmdb_key(key, sizeof key, "label", i);
            snprintf(where, sizeof where, "%s:%lld", r.name, (long long)i);
            uint8_t *v = NULL;
            size_t len = 0;
            int got = r.get(r.ctx, key, &v, &len);
            if (got < 0) {
                st = ocr_wrap_error(OCR_ERR_IO, "%s", where);
            } else if (got == 0 || len == 0) {
                s->bad_lines++;
                ocr_skip_stats_add(&s->bad, OCR_SKIP_EMPTY_LABEL, "%s: %s", where,
                                   got == 0 ? "no label record" : "empty label");
            } else if (memchr(v, '\0', len) || !ocr_utf8_valid((const char *)v, len, NULL)) {
                s->bad_lines++;
                ocr_skip_stats_add(&s->bad, OCR_SKIP_BAD_UTF8, "%s: not valid UTF-8", where);
            } else {
                if (s->n == s->cap_ || !s->lmdb_env_) {  // the record arrays follow the line arrays
                    int64_t cap = s->cap_ ? s->cap_ * 2 : 256;
                    int32_t *ev = realloc(s->lmdb_env_, sizeof(int32_t) * (size_t)cap);
                    if (ev) s->lmdb_env_ = ev;
                    int64_t *rv = realloc(s->lmdb_record_, sizeof(int64_t) * (size_t)cap);
                    if (rv) s->lmdb_record_ = rv;
                    if (!ev || !rv) st = ocr_set_error(OCR_ERR_OOM, "label lines: out of memory");
                }
                if (st == OCR_OK) {
                    s->lmdb_env_[s->n] = e;
                    s->lmdb_record_[s->n] = i;
                    st = set_push(s, r.name, strlen(r.name), (const char *)v, len, where);
                }
            }
            free(v);
        }
    }
    ocr_lmdb_free_dirs(dirs, n);
    return st;
}

// The image of line i: the file, or the LMDB record.
static ocr_status_t line_image(const EvalSet *s, int64_t i, ocr_channel_order_t order, OcrImage *img) {
    if (!s->lmdb_envs_) return ocr_image_load(img, s->path[i], order);
    memset(img, 0, sizeof *img);
    OcrLmdbReader r = ocr_lmdb_env_reader(s->lmdb_envs_[s->lmdb_env_[i]]);
    char key[32];
    ocr_lmdb_key(key, sizeof key, "image", s->lmdb_record_[i]);
    uint8_t *v = NULL;
    size_t len = 0;
    int got = r.get(r.ctx, key, &v, &len);
    if (got < 0) return ocr_wrap_error(OCR_ERR_IO, "%s", key);
    if (got == 0) return ocr_set_error(OCR_ERR_NOT_FOUND, "no %s record", key);
    ocr_status_t st = ocr_image_decode(img, v, len, order, key);
    free(v);
    return st;
}

ocr_status_t eval_set_read(EvalSet *s, const OcrLoaderConfig *lc) {
    memset(s, 0, sizeof *s);
    if (lc->lmdb && !lc->pack_file) {
        ocr_status_t st = eval_set_read_lmdb(s, lc);
        if (st != OCR_OK) {
            eval_set_free(s);
            return ocr_wrap_error(st, "%s.dataset (LMDBDataSet)", lc->section);
        }
        return OCR_OK;
    }
    for (int i = 0; i < lc->num_ratios; i++)
        if (lc->ratios[i] < 1.0) {
            ocr_log(OCR_LOG_WARN, "%s.dataset.ratio_list: evaluation scores every line of every label file (ratios "
                    "below 1 apply to training draws only)", lc->section);
            break;
        }
    if (lc->pack_file)
        ocr_log(OCR_LOG_INFO, "%s.loader.pack_file is not read by evaluation: every line's image is decoded from the "
                "label files' paths at the width it needs", lc->section);
    for (int i = 0; i < lc->num_label_files; i++) {
        ocr_status_t st = eval_set_read_file(s, lc->label_files[i], lc->data_dir, lc->delimiter);
        if (st != OCR_OK) {
            eval_set_free(s);
            return ocr_wrap_error(st, "%s.dataset.label_file_list", lc->section);
        }
    }
    return OCR_OK;
}

void eval_set_free(EvalSet *s) {
    for (int e = 0; e < s->num_lmdb_envs_; e++) ocr_lmdb_env_close(s->lmdb_envs_[e]);
    free(s->lmdb_envs_);
    free(s->lmdb_env_);
    free(s->lmdb_record_);
    for (int64_t i = 0; i < s->n; i++) {
        free(s->path[i]);
        free(s->label[i]);
        free(s->where[i]);
    }
    free(s->path);
    free(s->label);
    free(s->where);
    memset(s, 0, sizeof *s);
}

void eval_options_from_loader(EvalOptions *o, const OcrLoaderConfig *lc, const OcrModel *m, RecMetricOptions mopt) {
    memset(o, 0, sizeof *o);
    const OcrArch *a = ocr_model_arch(m);
    o->height = a->img_h;
    o->width = a->img_w;
    if (lc->transforms.has_resize) {
        o->height = lc->transforms.resize_h;
        o->width = lc->transforms.resize_w;
    } else if (lc->sampler.num_scales > 0) {
        o->height = lc->sampler.scales[0].height;
        o->width = lc->sampler.scales[0].width;
    }
    o->channels = lc->transforms.channels;
    o->order = lc->transforms.order;
    o->batch = lc->sampler.num_scales > 0 ? lc->sampler.scales[0].batch_size : 1;
    if (o->batch < 1) o->batch = 1;
    o->fixed_width = a->backbone == OCR_BACKBONE_SVTRNET;
    o->max_text_length = lc->max_text_length;
    o->mopt = mopt;
}

// ---- scoring -----------------------------------------------------------------------------------

void eval_lines_free(EvalLine *lines, int64_t n) {
    for (int64_t i = 0; lines && i < n; i++) {
        free(lines[i].prediction);
        lines[i].prediction = NULL;
    }
}

typedef struct {
    OcrModel *m;
    const EvalSet *s;
    const OcrDict *dict;
    const EvalOptions *o;
    RecMetric metric;
    int64_t exact, nospace;  // lines matching exactly / with every ' ' removed
    EvalPaths *paths;
    EvalLine *lines;     // caller's, or NULL
    char *text, *ref;
    size_t text_cap, ref_cap;
    int32_t *enc;
    size_t enc_cap;
} Scorer;

static ocr_status_t grow(char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return OCR_OK;
    char *b = realloc(*buf, need);
    if (!b) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    *buf = b;
    *cap = need;
    return OCR_OK;
}

// Flags of a label that do not depend on the model's output; *frames the CTC frames it needs
// (its dictionary classes plus one blank between repeated neighbours).
static ocr_status_t label_facts(Scorer *sc, const char *label, int *flags, int *frames) {
    size_t len = strlen(label), ncp = ocr_utf8_length(label, len);
    *flags = 0;
    if ((int64_t)ncp > sc->o->max_text_length) *flags |= EVAL_FLAG_OVER_MAX_TEXT_LENGTH;
    if (ncp + 1 > sc->enc_cap) {
        int32_t *e = realloc(sc->enc, sizeof(int32_t) * (ncp + 1));
        if (!e) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
        sc->enc = e;
        sc->enc_cap = ncp + 1;
    }
    int n = 0;
    ocr_dict_encode(sc->dict, label, len, (int)ncp + 1, sc->enc, &n, NULL);
    int f = n;
    for (int i = 1; i < n; i++) f += sc->enc[i] == sc->enc[i - 1];
    *frames = f;
    // Characters the dictionary lacks, among those the metric compares.
    const char *p = label, *end = label + len;
    while (p < end) {
        uint32_t cp;
        int k = ocr_utf8_decode(p, (size_t)(end - p), &cp);
        if (k <= 0) break;
        p += k;
        if (sc->o->mopt.ignore_space && cp == ' ') continue;
        int alnum = (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
        if (sc->o->mopt.is_filter && !alnum) continue;
        uint32_t q = sc->dict->lower && cp >= 'A' && cp <= 'Z' ? cp + ('a' - 'A') : cp;
        if (ocr_dict_lookup(sc->dict, q) < 0) {
            *flags |= EVAL_FLAG_UNKNOWN_CHARS;
            break;
        }
    }
    return OCR_OK;
}

// The reference the prediction is compared with: the label with the dictionary's case folding.
static ocr_status_t reference(Scorer *sc, const char *label) {
    size_t n = strlen(label);
    OCR_TRY(grow(&sc->ref, &sc->ref_cap, n + 1));
    memcpy(sc->ref, label, n + 1);
    if (sc->dict->lower)
        for (size_t i = 0; i < n; i++)
            if (sc->ref[i] >= 'A' && sc->ref[i] <= 'Z') sc->ref[i] = (char)(sc->ref[i] + ('a' - 'A'));
    return OCR_OK;
}

// Equal once every ' ' is removed from both.
static int equal_nospace(const char *a, const char *b) {
    for (;;) {
        while (*a == ' ') a++;
        while (*b == ' ') b++;
        if (*a != *b) return 0;
        if (!*a) return 1;
        a++, b++;
    }
}

// One batch: images[idx[0..cnt)] resized to H × W (padding keeps the aspect ratio and pads,
// otherwise they are stretched), forward, decode, score.
static ocr_status_t run_batch(Scorer *sc, OcrImage *images, const int64_t *idx, const uint8_t *kind, int cnt,
                              int64_t first, int W) {
    const EvalOptions *o = sc->o;
    FeedBatch fb;
    OCR_TRY(feed_batch_alloc(&fb, cnt, o->height, W, o->channels, 1));
    ocr_status_t st = OCR_OK;
    for (int j = 0; j < cnt && st == OCR_OK; j++) {
        float vr;
        uint8_t *dst = fb.pixels + (size_t)j * o->height * W * o->channels;
        st = ocr_rec_resize_pad(dst, o->height, W, o->channels, &images[idx[j]], kind[idx[j]] != EVAL_LINE_SQUEEZED,
                                &fb.widths[j], &vr);
    }
    fb.count = cnt;
    if (st == OCR_OK) st = infer_forward_batch(sc->m, &fb);
    int T = 0;
    if (st == OCR_OK) {
        const OcrTensor *probs = ocr_model_probs(sc->m);
        T = (int)probs->shape[1];
        st = grow(&sc->text, &sc->text_cap, ctc_text_capacity(T, sc->dict->classes, sc->dict->num_classes));
    }
    for (int j = 0; j < cnt && st == OCR_OK; j++) {
        int64_t li = first + idx[j];
        const char *label = sc->s->label[li];
        float conf = 0;
        int flags = 0, frames = 0;
        st = decode_sample(sc->m, sc->dict, j, sc->text, sc->text_cap, &conf);
        if (st == OCR_OK) st = label_facts(sc, label, &flags, &frames);
        if (st == OCR_OK) st = reference(sc, label);
        if (st != OCR_OK) break;
        if (frames > T) flags |= EVAL_FLAG_TOO_LONG_FOR_MODEL;
        RecMetric before = sc->metric;
        st = rec_metric_add(&sc->metric, sc->text, sc->ref);
        if (st != OCR_OK) break;
        int exact = strcmp(sc->text, sc->ref) == 0, nospace = equal_nospace(sc->text, sc->ref);
        sc->exact += exact;
        sc->nospace += nospace;
        EvalPaths *p = sc->paths;
        p->scored++;
        if (kind[idx[j]] == EVAL_LINE_IN_SHAPE) p->in_shape++;
        else if (kind[idx[j]] == EVAL_LINE_WIDENED) p->widened++;
        else p->squeezed++;
        p->too_long_for_model += (flags & EVAL_FLAG_TOO_LONG_FOR_MODEL) != 0;
        p->over_max_text_length += (flags & EVAL_FLAG_OVER_MAX_TEXT_LENGTH) != 0;
        p->unknown_chars += (flags & EVAL_FLAG_UNKNOWN_CHARS) != 0;
        if (sc->lines) {
            EvalLine *l = &sc->lines[li];
            l->path = kind[idx[j]];
            l->flags = (uint8_t)flags;
            l->scored = 1;
            l->correct = sc->metric.correct > before.correct;
            l->correct_exact = (uint8_t)exact;
            l->correct_nospace = (uint8_t)nospace;
            l->width = W;
            l->edits = (int32_t)(sc->metric.edits - before.edits);
            l->ref_chars = (int32_t)(sc->metric.ref_chars - before.ref_chars);
            l->norm_edit = sc->metric.norm_edit_sum - before.norm_edit_sum;
            l->confidence = conf;
            l->prediction = strdup(sc->text);
            if (!l->prediction) st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
        }
    }
    feed_batch_free(&fb);
    return st;
}

typedef struct {
    int64_t i;
    int w;
} WidthIndex;

static int cmp_width(const void *a, const void *b) {
    const WidthIndex *x = a, *y = b;
    if (x->w != y->w) return x->w < y->w ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

// Lines decoded at a time: bounds the decoded images held in memory.
#define EVAL_CHUNK 512

ocr_status_t evaluate_set(OcrModel *m, const EvalSet *s, const OcrDict *dict, const EvalOptions *o, EvalResult *out,
                          EvalLine *lines) {
    memset(out, 0, sizeof *out);
    Scorer sc = {0};
    sc.m = m;
    sc.s = s;
    sc.dict = dict;
    sc.o = o;
    sc.paths = &out->paths;
    sc.lines = lines;
    rec_metric_init(&sc.metric, o->mopt);
    if (lines) memset(lines, 0, sizeof *lines * (size_t)s->n);
    EvalPaths *P = &out->paths;
    P->lines = s->n + s->bad_lines;
    P->bad_lines = s->bad_lines;
    P->skipped = s->bad;
    int H = o->height, W = o->width;
    int64_t chunk = EVAL_CHUNK > 4 * o->batch ? EVAL_CHUNK : 4 * o->batch;
    OcrImage *img = calloc((size_t)chunk, sizeof *img);
    ocr_status_t *ist = calloc((size_t)chunk, sizeof *ist);
    char(*err)[512] = calloc((size_t)chunk, sizeof *err);
    uint8_t *kind = calloc((size_t)chunk, 1);
    int64_t *idx = calloc((size_t)chunk, sizeof *idx);
    WidthIndex *wide = calloc((size_t)chunk, sizeof *wide);
    ocr_status_t st = OCR_OK;
    if (!img || !ist || !err || !kind || !idx || !wide) st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
    double t0 = ocr_now_seconds();
    for (int64_t c0 = 0; c0 < s->n && st == OCR_OK; c0 += chunk) {
        int64_t cn = s->n - c0 < chunk ? s->n - c0 : chunk;
        // Decoding is independent per line; the error text is per thread (core/error.c).
#pragma omp parallel for schedule(dynamic, 4)
        for (int64_t j = 0; j < cn; j++) {
            ist[j] = line_image(s, c0 + j, o->order, &img[j]);
            if (ist[j] != OCR_OK) snprintf(err[j], sizeof err[j], "%s", ocr_last_error());
        }
        int64_t n_in = 0, n_wide = 0;
        for (int64_t j = 0; j < cn && st == OCR_OK; j++) {
            if (ist[j] != OCR_OK) {
                ocr_skip_reason_t reason;
                if (!ocr_skip_reason_for_image_status(ist[j], &reason)) {
                    st = ocr_set_error(ist[j], "%s: %s", s->where[c0 + j], err[j]);
                    break;
                }
                ocr_skip_stats_add(&P->skipped, reason, "%s: %s", s->where[c0 + j], err[j]);
                P->unreadable++;
                kind[j] = EVAL_LINE_UNREADABLE;
                if (lines) lines[c0 + j].path = EVAL_LINE_UNREADABLE;
                continue;
            }
            int need = ocr_rec_resized_width(img[j].height, img[j].width, H, INT_MAX);
            if (need <= W) {
                kind[j] = EVAL_LINE_IN_SHAPE;
                idx[n_in++] = j;
            } else if (o->fixed_width) {
                kind[j] = EVAL_LINE_SQUEEZED;
                idx[n_in++] = j;
            } else {
                kind[j] = EVAL_LINE_WIDENED;
                wide[n_wide++] = (WidthIndex){j, need};
            }
        }
        // Lines that fit: the eval shape, in file order.
        for (int64_t b = 0; b < n_in && st == OCR_OK; b += o->batch) {
            int cnt = (int)(n_in - b < o->batch ? n_in - b : o->batch);
            st = run_batch(&sc, img, idx + b, kind, cnt, c0, W);
        }
        // Wider lines: by width, each batch padded to its widest, at most batch·W columns.
        qsort(wide, (size_t)n_wide, sizeof *wide, cmp_width);
        int64_t budget = (int64_t)o->batch * W;
        for (int64_t b = 0; b < n_wide && st == OCR_OK;) {
            int cnt = 0;
            while (b + cnt < n_wide && cnt < o->batch && (int64_t)(cnt + 1) * wide[b + cnt].w <= budget) cnt++;
            if (cnt == 0) cnt = 1;  // a line wider than the whole budget goes alone
            for (int k = 0; k < cnt; k++) idx[k] = wide[b + k].i;
            st = run_batch(&sc, img, idx, kind, cnt, c0, wide[b + cnt - 1].w);
            b += cnt;
        }
        for (int64_t j = 0; j < cn; j++) ocr_image_free(&img[j]);
    }
    double secs = ocr_now_seconds() - t0;
    if (st == OCR_OK) {
        RecMetricResult r = rec_metric_get(&sc.metric);
        out->acc = r.acc;
        out->norm_edit_dis = r.norm_edit_dis;
        out->cer = r.cer;
        out->acc_exact = (double)sc.exact / ((double)sc.metric.count + 1e-5);
        out->acc_nospace = (double)sc.nospace / ((double)sc.metric.count + 1e-5);
        out->samples = sc.metric.count;
        out->seconds = secs;
        out->samples_per_s = secs > 0 ? (double)sc.metric.count / secs : 0;
        out->skipped = P->unreadable + P->bad_lines;
    } else if (lines) {
        eval_lines_free(lines, s->n);
    }
    free(img);
    free(ist);
    free(err);
    free(kind);
    free(idx);
    free(wide);
    free(sc.text);
    free(sc.ref);
    free(sc.enc);
    return st;
}

ocr_status_t evaluate(OcrModel *m, Feed *feed, const OcrDict *dict, RecMetricOptions mopt, EvalResult *out) {
    EvalSet s;
    OCR_TRY(eval_set_read(&s, &feed->lc));
    EvalOptions o;
    eval_options_from_loader(&o, &feed->lc, m, mopt);
    ocr_status_t st = evaluate_set(m, &s, dict, &o, out, NULL);
    eval_set_free(&s);
    if (st == OCR_OK) {
        // Once per distinct accounting (it changes only with the data), not at every evaluation.
        // One memory per set: training evaluates Eval and EvalGeneral in turn.
        static char last_by_set[2][1024];
        char *last = last_by_set[strcmp(feed->lc.section, "Eval") != 0];
        char sum[1024];
        eval_paths_summary(&out->paths, sum, sizeof sum);
        if (strcmp(sum, last) != 0) {
            ocr_log(OCR_LOG_INFO, "%s: %s", feed->lc.section, sum);
            char what[48];
            snprintf(what, sizeof what, "%s lines", feed->lc.section);
            ocr_skip_stats_log(&out->paths.skipped, what);
            snprintf(last, sizeof last_by_set[0], "%s", sum);
        }
    }
    return st;
}

void eval_paths_summary(const EvalPaths *p, char *buf, size_t cap) {
    snprintf(buf, cap,
             "%lld lines: %lld scored (%lld in shape, %lld widened, %lld squeezed; %lld too long for the model, %lld "
             "over max_text_length, %lld with characters outside the dictionary), %lld unreadable images and %lld "
             "bad label lines not scored",
             (long long)p->lines, (long long)p->scored, (long long)p->in_shape, (long long)p->widened,
             (long long)p->squeezed, (long long)p->too_long_for_model, (long long)p->over_max_text_length,
             (long long)p->unknown_chars, (long long)p->unreadable, (long long)p->bad_lines);
}

struct cJSON *eval_paths_json(const EvalPaths *p) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "total", (double)p->lines);
    cJSON_AddNumberToObject(o, "scored", (double)p->scored);
    cJSON_AddNumberToObject(o, "in_shape", (double)p->in_shape);
    cJSON_AddNumberToObject(o, "widened", (double)p->widened);
    cJSON_AddNumberToObject(o, "squeezed", (double)p->squeezed);
    cJSON_AddNumberToObject(o, "too_long_for_model", (double)p->too_long_for_model);
    cJSON_AddNumberToObject(o, "over_max_text_length", (double)p->over_max_text_length);
    cJSON_AddNumberToObject(o, "unknown_chars", (double)p->unknown_chars);
    cJSON_AddNumberToObject(o, "unreadable", (double)p->unreadable);
    cJSON_AddNumberToObject(o, "bad_lines", (double)p->bad_lines);
    cJSON *ns = cJSON_AddObjectToObject(o, "not_scored");
    for (int r = 0; r < OCR_SKIP_REASON_COUNT; r++) {
        if (!p->skipped.count[r]) continue;
        cJSON *e = cJSON_AddObjectToObject(ns, ocr_skip_reason_name((ocr_skip_reason_t)r));
        cJSON_AddNumberToObject(e, "count", (double)p->skipped.count[r]);
        cJSON_AddStringToObject(e, "example", p->skipped.example[r]);
    }
    return o;
}

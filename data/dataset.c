#include "data/dataset.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/rng.h"
#include "data/utf8.h"

// Philox streams of the dataset's random choices.
#define STREAM_RATIO_SUBSET 0xDA7A5E7000000000ull  // + file index
#define STREAM_PATH_PICK 0xDA7A91C000000000ull

// ---- skip accounting ----------------------------------------------------------------------

const char *ocr_skip_reason_name(ocr_skip_reason_t reason) {
    switch (reason) {
        case OCR_SKIP_NO_DELIMITER: return "no_delimiter";
        case OCR_SKIP_BAD_UTF8: return "bad_utf8";
        case OCR_SKIP_BAD_PATH: return "bad_path";
        case OCR_SKIP_EMPTY_LABEL: return "empty_label";
        case OCR_SKIP_LABEL_TOO_LONG: return "label_too_long";
        case OCR_SKIP_NO_KNOWN_CHARS: return "no_known_chars";
        case OCR_SKIP_IMAGE_MISSING: return "image_missing";
        case OCR_SKIP_IMAGE_UNREADABLE: return "image_unreadable";
        case OCR_SKIP_IMAGE_CORRUPT: return "image_corrupt";
        case OCR_SKIP_IMAGE_UNSUPPORTED: return "image_unsupported";
        case OCR_SKIP_REASON_COUNT: break;
    }
    return "unknown";
}

int ocr_skip_reason_for_image_status(ocr_status_t status, ocr_skip_reason_t *reason) {
    switch (status) {
        case OCR_ERR_NOT_FOUND: *reason = OCR_SKIP_IMAGE_MISSING; return 1;
        case OCR_ERR_IO: *reason = OCR_SKIP_IMAGE_UNREADABLE; return 1;
        case OCR_ERR_FORMAT: *reason = OCR_SKIP_IMAGE_CORRUPT; return 1;
        case OCR_ERR_UNSUPPORTED: *reason = OCR_SKIP_IMAGE_UNSUPPORTED; return 1;
        default: *reason = OCR_SKIP_REASON_COUNT; return 0;
    }
}

void ocr_skip_stats_add(OcrSkipStats *stats, ocr_skip_reason_t reason, const char *fmt, ...) {
    OCR_ASSERT(reason >= 0 && reason < OCR_SKIP_REASON_COUNT);
    if (stats->count[reason]++ == 0 && fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(stats->example[reason], OCR_SKIP_EXAMPLE_MAX, fmt, ap);
        va_end(ap);
    }
}

void ocr_skip_stats_merge(OcrSkipStats *dst, const OcrSkipStats *src) {
    for (int r = 0; r < OCR_SKIP_REASON_COUNT; r++) {
        if (src->count[r] && !dst->count[r]) memcpy(dst->example[r], src->example[r], OCR_SKIP_EXAMPLE_MAX);
        dst->count[r] += src->count[r];
    }
}

int64_t ocr_skip_stats_total(const OcrSkipStats *stats) {
    int64_t total = 0;
    for (int r = 0; r < OCR_SKIP_REASON_COUNT; r++) total += stats->count[r];
    return total;
}

void ocr_skip_stats_log(const OcrSkipStats *stats, const char *what) {
    for (int r = 0; r < OCR_SKIP_REASON_COUNT; r++) {
        if (!stats->count[r]) continue;
        ocr_log(OCR_LOG_WARN, "%s: skipped %lld (%s), e.g. %s", what ? what : "data", (long long)stats->count[r],
                ocr_skip_reason_name((ocr_skip_reason_t)r), stats->example[r]);
    }
}

// ---- helpers ------------------------------------------------------------------------------

// A printable excerpt of a line for messages: control bytes and invalid UTF-8 as escapes,
// cut (at a character boundary) after about 60 bytes.
static const char *excerpt(const char *s, size_t n, char *out, size_t cap) {
    size_t o = 0, i = 0;
    OCR_ASSERT(cap >= 16);
    while (i < n && o + 8 < cap) {
        if (i >= 60) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        unsigned char c = (unsigned char)s[i];
        uint32_t cp;
        int k;
        if (c == '\t') {
            out[o++] = '\\', out[o++] = 't', i++;
        } else if (c < 0x20 || c == 0x7F) {
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c), i++;
        } else if (c < 0x80) {
            out[o++] = (char)c, i++;
        } else if ((k = ocr_utf8_decode(s + i, n - i, &cp)) > 0) {
            memcpy(out + o, s + i, (size_t)k);
            o += (size_t)k, i += (size_t)k;
        } else {
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c), i++;
        }
    }
    out[o] = '\0';
    return out;
}

static ocr_status_t grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return OCR_OK;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    void *np = realloc(*p, c * elem);
    if (!np) return ocr_set_error(OCR_ERR_OOM, "dataset: out of memory (%zu bytes)", c * elem);
    *p = np, *cap = c;
    return OCR_OK;
}

static const char *find_delim(const char *s, size_t n, const char *delim, size_t dl) {
    if (dl > n) return NULL;
    for (size_t i = 0; i + dl <= n; i++)
        if (s[i] == delim[0] && memcmp(s + i, delim, dl) == 0) return s + i;
    return NULL;
}

static void note_example(char *dst, const char *file, int64_t line, const char *what, const char *s, size_t n) {
    if (dst[0]) return;
    char ex[256];
    snprintf(dst, OCR_SKIP_EXAMPLE_MAX, "%s:%lld: %s \"%s\"", file, (long long)line, what,
             excerpt(s, n, ex, sizeof ex));
}

// ---- opening --------------------------------------------------------------------------------

typedef struct {
    OcrDataset *ds;
    const char *data_dir;
    size_t data_dir_len;
    const char *delim;
    size_t delim_len;
    size_t entries_cap, paths_cap, texts_cap, labels_cap;
    size_t paths_n, texts_n, labels_n;
    int32_t *label_buf;  // max_text_length
} Builder;

static ocr_status_t append_bytes(Builder *b, char **arena, size_t *n, size_t *cap, const char *s, size_t len) {
    OCR_TRY(grow((void **)arena, cap, *n + len + 1, 1));
    memcpy(*arena + *n, s, len);
    (*arena)[*n + len] = '\0';
    *n += len + 1;
    (void)b;
    return OCR_OK;
}

// Appends data_dir joined with the path as os.path.join does.
static ocr_status_t append_path(Builder *b, const char *p, size_t len) {
    size_t extra = 0;
    int join = b->data_dir_len > 0 && p[0] != '/';
    int slash = join && b->data_dir[b->data_dir_len - 1] != '/';
    if (join) extra = b->data_dir_len + (size_t)slash;
    OCR_TRY(grow((void **)&b->ds->paths_, &b->paths_cap, b->paths_n + extra + len + 1, 1));
    char *dst = b->ds->paths_ + b->paths_n;
    if (join) {
        memcpy(dst, b->data_dir, b->data_dir_len);
        if (slash) dst[b->data_dir_len] = '/';
    }
    memcpy(dst + extra, p, len);
    dst[extra + len] = '\0';
    b->paths_n += extra + len + 1;
    return OCR_OK;
}

// Encodes the label and appends the sample (list: a JSON list of alternative paths, owned and
// freed here; path NULL: an LMDB record). `line` is what examples quote. Non-OK only for OOM.
static ocr_status_t add_sample(Builder *b, int32_t file, int64_t line_no, const char *s, size_t n, const char *text,
                               size_t text_len, cJSON *list, const char *path, size_t path_len) {
    OcrDataset *ds = b->ds;
    const char *fname = ds->label_files[file];
    char ex[256];
    // The label (CTCLabelEncode). Unknown characters are counted even when the sample is
    // rejected for having no known character at all.
    int label_len = 0;
    ocr_label_result_t lr =
        ocr_dict_encode(ds->dict, text, text_len, ds->max_text_length, b->label_buf, &label_len, &ds->unknown_chars);
    if (lr != OCR_LABEL_OK) {
        cJSON_Delete(list);
        switch (lr) {
            case OCR_LABEL_EMPTY:
                ocr_skip_stats_add(&ds->skipped, OCR_SKIP_EMPTY_LABEL, "%s:%lld: empty label in \"%s\"", fname,
                                   (long long)line_no, excerpt(s, n, ex, sizeof ex));
                break;
            case OCR_LABEL_TOO_LONG:
                ocr_skip_stats_add(&ds->skipped, OCR_SKIP_LABEL_TOO_LONG,
                                   "%s:%lld: label of %zu characters, over max_text_length %d: \"%s\"", fname,
                                   (long long)line_no, ocr_utf8_length(text, text_len), ds->max_text_length,
                                   excerpt(text, text_len, ex, sizeof ex));
                break;
            case OCR_LABEL_NO_KNOWN_CHARS:
                ocr_skip_stats_add(&ds->skipped, OCR_SKIP_NO_KNOWN_CHARS,
                                   "%s:%lld: no character of the label is in the dictionary: \"%s\"", fname,
                                   (long long)line_no, excerpt(text, text_len, ex, sizeof ex));
                break;
            default:  // validated above
                OCR_ASSERT(0, "unexpected label result %d", (int)lr);
        }
        return OCR_OK;
    }
    if (ds->max_encoded_length && label_len > ds->max_encoded_length) {
        cJSON_Delete(list);
        ocr_skip_stats_add(&ds->skipped, OCR_SKIP_LABEL_TOO_LONG,
                           "%s:%lld: label of %d known characters, over MultiLabelEncode's max_text_length − 2 = %d: "
                           "\"%s\"",
                           fname, (long long)line_no, label_len, ds->max_encoded_length,
                           excerpt(text, text_len, ex, sizeof ex));
        return OCR_OK;
    }
    if (text[text_len - 1] == ' ') {
        ds->notes.trailing_space_labels++;
        note_example(ds->notes.trailing_space_example, fname, line_no, "label ends in a space (kept):", text,
                     text_len);
    }

    if (ds->num_entries_ >= INT32_MAX - 1) {
        cJSON_Delete(list);
        return ocr_set_error(OCR_ERR_FORMAT, "%s:%lld: more than %d samples in one dataset", fname,
                             (long long)line_no, INT32_MAX - 1);
    }
    ocr_status_t st = grow((void **)&ds->entries_, &b->entries_cap, (size_t)ds->num_entries_ + 1, sizeof *ds->entries_);
    if (st == OCR_OK)
        st = grow((void **)&ds->labels_, &b->labels_cap, b->labels_n + (size_t)label_len, sizeof *ds->labels_);
    if (st != OCR_OK) {
        cJSON_Delete(list);
        return st;
    }
    OcrDatasetEntry_ *e = &ds->entries_[ds->num_entries_];
    e->path_off = (int64_t)b->paths_n;
    e->text_off = (int64_t)b->texts_n;
    e->label_off = (int64_t)b->labels_n;
    e->line = line_no;
    e->file = file;
    e->label_len = label_len;
    e->num_paths = 1;
    if (!path) {
        e->path_off = -1;
        e->num_paths = 0;
    } else if (list) {
        e->num_paths = cJSON_GetArraySize(list);
        for (cJSON *it = list->child; st == OCR_OK && it; it = it->next)
            st = append_path(b, it->valuestring, strlen(it->valuestring));
        cJSON_Delete(list);
    } else {
        st = append_path(b, path, path_len);
    }
    if (st == OCR_OK) st = append_bytes(b, &ds->texts_, &b->texts_n, &b->texts_cap, text, text_len);
    if (st != OCR_OK) return st;
    memcpy(ds->labels_ + b->labels_n, b->label_buf, sizeof(int32_t) * (size_t)label_len);
    b->labels_n += (size_t)label_len;
    ds->num_entries_++;
    return OCR_OK;
}

// Handles one line (without its '\n'). Returns non-OK only for OOM.
static ocr_status_t parse_line(Builder *b, int32_t file, int64_t line_no, const char *s, size_t n) {
    OcrDataset *ds = b->ds;
    const char *fname = ds->label_files[file];
    char ex[256];
    ds->notes.lines++;
    if (n > 0 && s[n - 1] == '\r') {
        ds->notes.crlf_lines++;
        while (n > 0 && s[n - 1] == '\r') n--;
    }
    if (n == 0) {
        ds->notes.empty_lines++;
        return OCR_OK;
    }
    size_t bad = 0;
    if (!ocr_utf8_valid(s, n, &bad)) {
        ocr_skip_stats_add(&ds->skipped, OCR_SKIP_BAD_UTF8, "%s:%lld: invalid UTF-8 at byte %zu: \"%s\"", fname,
                           (long long)line_no, bad + 1, excerpt(s, n, ex, sizeof ex));
        return OCR_OK;
    }
    if (memchr(s, '\0', n)) {
        ocr_skip_stats_add(&ds->skipped, OCR_SKIP_BAD_UTF8, "%s:%lld: NUL byte in the line: \"%s\"", fname,
                           (long long)line_no, excerpt(s, n, ex, sizeof ex));
        return OCR_OK;
    }
    const char *d = find_delim(s, n, b->delim, b->delim_len);
    if (!d) {
        char dname[64];
        ocr_skip_stats_add(&ds->skipped, OCR_SKIP_NO_DELIMITER, "%s:%lld: no \"%s\" delimiter in \"%s\"", fname,
                           (long long)line_no, excerpt(b->delim, b->delim_len, dname, sizeof dname),
                           excerpt(s, n, ex, sizeof ex));
        return OCR_OK;
    }
    const char *path = s;
    size_t path_len = (size_t)(d - s);
    const char *text = d + b->delim_len;
    size_t text_len = n - path_len - b->delim_len;
    const char *d2 = find_delim(text, text_len, b->delim, b->delim_len);
    if (d2) {
        ds->notes.extra_field_lines++;
        note_example(ds->notes.extra_field_example, fname, line_no,
                     "more than one delimiter; label is the second field of", s, n);
        text_len = (size_t)(d2 - text);
    }

    // The path: literal, or a JSON list of alternatives.
    if (path_len == 0) {
        ocr_skip_stats_add(&ds->skipped, OCR_SKIP_BAD_PATH, "%s:%lld: empty image path in \"%s\"", fname,
                           (long long)line_no, excerpt(s, n, ex, sizeof ex));
        return OCR_OK;
    }
    cJSON *list = NULL;
    if (path[0] == '[') {
        list = cJSON_ParseWithLength(path, path_len);
        if (list && !cJSON_IsArray(list)) cJSON_Delete(list), list = NULL;
        if (list) {
            int count = cJSON_GetArraySize(list), ok = count > 0;
            for (cJSON *it = list->child; ok && it; it = it->next)
                ok = cJSON_IsString(it) && it->valuestring && it->valuestring[0];
            if (!ok) {
                cJSON_Delete(list);
                ocr_skip_stats_add(&ds->skipped, OCR_SKIP_BAD_PATH,
                                   "%s:%lld: the JSON list of paths is empty or has a non-string or empty "
                                   "entry: \"%s\"",
                                   fname, (long long)line_no, excerpt(path, path_len, ex, sizeof ex));
                return OCR_OK;
            }
        }
    }

    return add_sample(b, file, line_no, s, n, text, text_len, list, path, path_len);
}

static ocr_status_t read_label_file(Builder *b, int32_t file) {
    OcrDataset *ds = b->ds;
    char *data = NULL;
    size_t size = 0;
    ocr_status_t st = ocr_read_file(ds->label_files[file], &data, &size);
    if (st != OCR_OK) return ocr_wrap_error(st, "label file");
    ds->notes.files++;
    size_t pos = 0;
    if (size >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0) {
        ds->notes.bom_files++;
        pos = 3;
    }
    int64_t line_no = 0;
    while (pos < size && st == OCR_OK) {
        const char *s = data + pos;
        const char *nl = memchr(s, '\n', size - pos);
        size_t n = nl ? (size_t)(nl - s) : size - pos;
        st = parse_line(b, file, ++line_no, s, n);
        pos += n + 1;
    }
    free(data);
    return st;
}

// One LMDB environment: num-samples, then label-%09d for i = 1..n through the same label rules.
static ocr_status_t read_lmdb_env(Builder *b, int32_t file) {
    OcrDataset *ds = b->ds;
    const OcrLmdbReader *r = &ds->readers_[file];
    int64_t n;
    OCR_TRY(ocr_lmdb_read_num_samples(r, &n));
    if (r->records > 0 && n > r->records)  // see OcrLmdbReader.records
        return ocr_set_error(OCR_ERR_FORMAT, "LMDBDataSet %s: num-samples is %lld, but the environment holds only %lld "
                             "records (a damaged count?)", r->name, (long long)n, (long long)r->records);
    ds->notes.files++;
    char ex[256];
    for (int64_t i = 1; i <= n; i++) {
        char key[32];
        ocr_lmdb_key(key, sizeof key, "label", i);
        uint8_t *v = NULL;
        size_t len = 0;
        int got = r->get(r->ctx, key, &v, &len);
        if (got < 0) return ocr_wrap_error(OCR_ERR_IO, "LMDBDataSet %s", r->name);
        ds->notes.lines++;
        if (got == 0) {
            ocr_skip_stats_add(&ds->skipped, OCR_SKIP_EMPTY_LABEL, "%s:%lld: no %s record (num-samples is %lld)",
                               r->name, (long long)i, key, (long long)n);
            continue;
        }
        const char *t = (const char *)v;
        size_t bad = 0;
        ocr_status_t st = OCR_OK;
        if (!ocr_utf8_valid(t, len, &bad))
            ocr_skip_stats_add(&ds->skipped, OCR_SKIP_BAD_UTF8, "%s:%lld: %s: invalid UTF-8 at byte %zu: \"%s\"",
                               r->name, (long long)i, key, bad + 1, excerpt(t, len, ex, sizeof ex));
        else if (memchr(t, '\0', len))
            ocr_skip_stats_add(&ds->skipped, OCR_SKIP_BAD_UTF8, "%s:%lld: %s: NUL byte in the label: \"%s\"", r->name,
                               (long long)i, key, excerpt(t, len, ex, sizeof ex));
        else
            st = add_sample(b, file, i, t, len, t, len, NULL, NULL, 0);
        free(v);
        if (st != OCR_OK) return st;
    }
    return OCR_OK;
}

// Readers for the environments under data_dir (or the caller's), and their names as the
// dataset's "files".
static ocr_status_t open_lmdb_sources(OcrDataset *ds, const OcrDatasetOptions *opt) {
    ds->lmdb_ = 1;
    if (opt->lmdb_readers) {
        if (opt->num_lmdb_readers < 1) return ocr_set_error(OCR_ERR_INVALID_ARG, "LMDBDataSet: no readers");
        ds->num_files = opt->num_lmdb_readers;
        ds->readers_ = malloc(sizeof(OcrLmdbReader) * (size_t)ds->num_files);
        if (!ds->readers_) return ocr_set_error(OCR_ERR_OOM, "dataset: out of memory");
        memcpy(ds->readers_, opt->lmdb_readers, sizeof(OcrLmdbReader) * (size_t)ds->num_files);
    } else {
        char **dirs;
        int n;
        OCR_TRY(ocr_lmdb_find_envs(opt->data_dir, &dirs, &n));
        if (n < 1) {
            ocr_lmdb_free_dirs(dirs, n);
            return ocr_set_error(OCR_ERR_NOT_FOUND, "LMDBDataSet: no LMDB environment under %s", opt->data_dir);
        }
        ds->num_files = n;
        ds->readers_ = calloc((size_t)n, sizeof(OcrLmdbReader));
        ds->envs_ = calloc((size_t)n, sizeof(OcrLmdbEnv *));
        ocr_status_t st = ds->readers_ && ds->envs_ ? OCR_OK : ocr_set_error(OCR_ERR_OOM, "dataset: out of memory");
        for (int i = 0; st == OCR_OK && i < n; i++) {
            st = ocr_lmdb_env_open(&ds->envs_[i], dirs[i]);
            if (st == OCR_OK) ds->readers_[i] = ocr_lmdb_env_reader(ds->envs_[i]);
        }
        ocr_lmdb_free_dirs(dirs, n);
        if (st != OCR_OK) return st;
    }
    ds->label_files = calloc((size_t)ds->num_files, sizeof(char *));
    ds->ratios = malloc(sizeof(double) * (size_t)ds->num_files);
    if (!ds->label_files || !ds->ratios) return ocr_set_error(OCR_ERR_OOM, "dataset: out of memory");
    for (int f = 0; f < ds->num_files; f++) {
        ds->ratios[f] = 1.0;
        if (!(ds->label_files[f] = strdup(ds->readers_[f].name)))
            return ocr_set_error(OCR_ERR_OOM, "dataset: out of memory");
    }
    return OCR_OK;
}

void ocr_dataset_close(OcrDataset *ds) {
    if (!ds) return;
    for (int f = 0; ds->envs_ && f < ds->num_files; f++) ocr_lmdb_env_close(ds->envs_[f]);
    free(ds->envs_);
    free(ds->readers_);
    for (int f = 0; f < ds->num_files && ds->label_files; f++) free(ds->label_files[f]);
    free(ds->label_files);
    free(ds->ratios);
    ocr_char_counter_free(&ds->unknown_chars);
    free(ds->entries_);
    free(ds->file_first_);
    free(ds->active_);
    free(ds->paths_);
    free(ds->texts_);
    free(ds->labels_);
    memset(ds, 0, sizeof *ds);
}

static ocr_status_t open_lmdb(OcrDataset *ds, const OcrDatasetOptions *opt, const OcrDict *dict) {
    if (opt->max_text_length < 0)
        return ocr_set_error(OCR_ERR_CONFIG, "dataset: max_text_length %d is negative", opt->max_text_length);
    ds->dict = dict;
    ds->max_text_length = opt->max_text_length ? opt->max_text_length : 25;
    ds->max_encoded_length = opt->max_encoded_length;
    ds->seed = opt->seed;
    ocr_char_counter_init(&ds->unknown_chars);
    Builder b;
    memset(&b, 0, sizeof b);
    b.ds = ds;
    ocr_status_t st = open_lmdb_sources(ds, opt);
    if (st == OCR_OK) {
        ds->file_first_ = malloc(sizeof(int64_t) * ((size_t)ds->num_files + 1));
        b.label_buf = malloc(sizeof(int32_t) * (size_t)ds->max_text_length);
        if (!ds->file_first_ || !b.label_buf) st = ocr_set_error(OCR_ERR_OOM, "dataset: out of memory");
    }
    for (int f = 0; st == OCR_OK && f < ds->num_files; f++) {
        ds->file_first_[f] = ds->num_entries_;
        st = read_lmdb_env(&b, f);
    }
    free(b.label_buf);
    if (st == OCR_OK) ds->file_first_[ds->num_files] = ds->num_entries_;
    return st;
}

// What ocr_dataset_open reports when nothing is left.
static ocr_status_t no_usable_sample(const OcrDataset *ds) {
    char counts[1024] = "";
    size_t o = 0;
    for (int r = 0; r < OCR_SKIP_REASON_COUNT && o < sizeof counts; r++)
        if (ds->skipped.count[r])
            o += (size_t)snprintf(counts + o, sizeof counts - o, "%s%s %lld", o ? ", " : "",
                                  ocr_skip_reason_name((ocr_skip_reason_t)r), (long long)ds->skipped.count[r]);
    return ocr_set_error(OCR_ERR_FORMAT, "dataset %s%s: no usable sample in %lld %s%s%s", ds->label_files[0],
                         ds->num_files > 1 ? " (and more)" : "", (long long)ds->notes.lines,
                         ds->lmdb_ ? "records" : "lines", o ? "; skipped: " : "", counts);
}

ocr_status_t ocr_dataset_open(OcrDataset *ds, const OcrDatasetOptions *opt, const OcrDict *dict) {
    memset(ds, 0, sizeof *ds);
    if (!opt || !dict) return ocr_set_error(OCR_ERR_INVALID_ARG, "dataset: no options or no dictionary");
    if (opt->lmdb) {
        ocr_status_t st = open_lmdb(ds, opt, dict);
        if (st == OCR_OK && ds->num_entries_ == 0) st = no_usable_sample(ds);
        if (st == OCR_OK) {
            ds->active_ = malloc(sizeof(int32_t) * (size_t)ds->num_entries_);
            if (!ds->active_) st = ocr_set_error(OCR_ERR_OOM, "dataset: out of memory");
        }
        if (st != OCR_OK) {
            ocr_dataset_close(ds);
            return st;
        }
        ocr_dataset_set_epoch(ds, 0);
        return OCR_OK;
    }
    if (opt->num_label_files < 1 || !opt->label_files)
        return ocr_set_error(OCR_ERR_CONFIG, "dataset: label_file_list is empty");
    int nf = opt->num_label_files;
    if (opt->num_ratios != 0 && opt->num_ratios != 1 && opt->num_ratios != nf)
        return ocr_set_error(OCR_ERR_CONFIG, "dataset: ratio_list has %d values for %d label files", opt->num_ratios,
                             nf);
    if (opt->num_ratios > 0 && !opt->ratios) return ocr_set_error(OCR_ERR_CONFIG, "dataset: ratio_list missing");
    for (int i = 0; i < opt->num_ratios; i++)
        if (!(opt->ratios[i] > 0.0 && opt->ratios[i] <= 1.0))
            return ocr_set_error(OCR_ERR_CONFIG, "dataset: ratio_list[%d] = %g is not in (0, 1]", i, opt->ratios[i]);
    if (opt->max_text_length < 0)
        return ocr_set_error(OCR_ERR_CONFIG, "dataset: max_text_length %d is negative", opt->max_text_length);
    const char *delim = opt->delimiter ? opt->delimiter : "\t";
    if (!delim[0]) return ocr_set_error(OCR_ERR_CONFIG, "dataset: empty delimiter");
    for (int f = 0; f < nf; f++)
        if (!opt->label_files[f] || !opt->label_files[f][0])
            return ocr_set_error(OCR_ERR_CONFIG, "dataset: label_file_list[%d] is empty", f);

    ds->dict = dict;
    ds->max_text_length = opt->max_text_length ? opt->max_text_length : 25;
    ds->max_encoded_length = opt->max_encoded_length;
    ds->seed = opt->seed;
    ds->num_files = nf;
    ocr_char_counter_init(&ds->unknown_chars);
    ds->label_files = calloc((size_t)nf, sizeof(char *));
    ds->ratios = malloc(sizeof(double) * (size_t)nf);
    ds->file_first_ = malloc(sizeof(int64_t) * ((size_t)nf + 1));
    Builder b;
    memset(&b, 0, sizeof b);
    b.ds = ds;
    b.data_dir = opt->data_dir ? opt->data_dir : "";
    b.data_dir_len = strlen(b.data_dir);
    b.delim = delim;
    b.delim_len = strlen(delim);
    b.label_buf = malloc(sizeof(int32_t) * (size_t)ds->max_text_length);
    ocr_status_t st = OCR_OK;
    if (!ds->label_files || !ds->ratios || !ds->file_first_ || !b.label_buf)
        st = ocr_set_error(OCR_ERR_OOM, "dataset: out of memory");
    for (int f = 0; st == OCR_OK && f < nf; f++) {
        ds->label_files[f] = strdup(opt->label_files[f]);
        if (!ds->label_files[f]) st = ocr_set_error(OCR_ERR_OOM, "dataset: out of memory");
        ds->ratios[f] = opt->num_ratios == 0 ? 1.0 : opt->ratios[opt->num_ratios == 1 ? 0 : f];
    }
    for (int f = 0; st == OCR_OK && f < nf; f++) {
        ds->file_first_[f] = ds->num_entries_;
        st = read_label_file(&b, f);
    }
    free(b.label_buf);
    if (st == OCR_OK) {
        ds->file_first_[nf] = ds->num_entries_;
        if (ds->num_entries_ == 0) st = no_usable_sample(ds);
    }
    if (st == OCR_OK) {
        ds->active_ = malloc(sizeof(int32_t) * (size_t)ds->num_entries_);
        if (!ds->active_) st = ocr_set_error(OCR_ERR_OOM, "dataset: out of memory");
    }
    if (st != OCR_OK) {
        ocr_dataset_close(ds);
        return st;
    }
    ocr_dataset_set_epoch(ds, 0);
    return OCR_OK;
}

// ---- epochs and access ------------------------------------------------------------------------

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

void ocr_dataset_set_epoch(OcrDataset *ds, uint64_t epoch) {
    ds->epoch = epoch;
    int64_t k = 0;
    for (int f = 0; f < ds->num_files; f++) {
        int64_t first = ds->file_first_[f], n = ds->file_first_[f + 1] - first;
        int32_t *dst = ds->active_ + k;
        for (int64_t i = 0; i < n; i++) dst[i] = (int32_t)(first + i);
        if (ds->ratios[f] < 1.0 && n > 0) {
            int64_t take = (int64_t)rint(ds->ratios[f] * (double)n);  // round half to even, as Python
            // Partial Fisher-Yates: the first `take` slots become a uniform subset.
            OcrRng rng = ocr_rng_make(ds->seed, STREAM_RATIO_SUBSET + (uint64_t)f);
            rng.offset = epoch << 32;
            for (int64_t i = 0; i < take; i++) {
                int64_t j = ocr_rng_next_int(&rng, i, n - 1);
                int32_t t = dst[i];
                dst[i] = dst[j], dst[j] = t;
            }
            qsort(dst, (size_t)take, sizeof *dst, cmp_i32);
            n = take;
        }
        k += n;
    }
    ds->num_active_ = k;
}

int64_t ocr_dataset_size(const OcrDataset *ds) { return ds->num_active_; }
int64_t ocr_dataset_num_valid(const OcrDataset *ds) { return ds->num_entries_; }

void ocr_dataset_file_sizes(const OcrDataset *ds, int64_t *sizes) {
    for (int f = 0; f < ds->num_files; f++) sizes[f] = 0;
    for (int64_t i = 0; i < ds->num_active_; i++) sizes[ds->entries_[ds->active_[i]].file]++;
}

ocr_status_t ocr_dataset_get(const OcrDataset *ds, int64_t index, OcrSample *sample) {
    memset(sample, 0, sizeof *sample);
    if (index < 0 || index >= ds->num_active_)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "dataset: sample %lld out of range [0, %lld)", (long long)index,
                             (long long)ds->num_active_);
    int32_t id = ds->active_[index];
    const OcrDatasetEntry_ *e = &ds->entries_[id];
    const char *path = e->path_off < 0 ? ds->label_files[e->file] : ds->paths_ + e->path_off;
    if (e->num_paths > 1) {
        uint32_t u = ocr_rng_u32(ds->seed, STREAM_PATH_PICK, (ds->epoch << 32) | (uint32_t)id);
        uint32_t pick = (uint32_t)(((uint64_t)u * (uint32_t)e->num_paths) >> 32);
        for (uint32_t i = 0; i < pick; i++) path += strlen(path) + 1;
    }
    sample->path = path;
    sample->text = ds->texts_ + e->text_off;
    sample->label = ds->labels_ + e->label_off;
    sample->label_len = e->label_len;
    sample->label_file = ds->label_files[e->file];
    sample->line = e->line;
    return OCR_OK;
}

ocr_status_t ocr_dataset_load_image(const OcrDataset *ds, int64_t index, ocr_channel_order_t order, OcrImage *img,
                                    ocr_skip_reason_t *reason) {
    ocr_skip_reason_t dummy;
    if (!reason) reason = &dummy;
    *reason = OCR_SKIP_REASON_COUNT;
    memset(img, 0, sizeof *img);
    OcrSample s;
    OCR_TRY(ocr_dataset_get(ds, index, &s));
    ocr_status_t st;
    if (ds->lmdb_) {
        uint8_t *bytes = NULL;
        size_t size = 0;
        st = ocr_dataset_read_image_bytes(ds, index, &bytes, &size, reason);
        if (st != OCR_OK) return st;  // already names the sample
        char name[96];
        snprintf(name, sizeof name, "image-%09lld", (long long)s.line);
        st = ocr_image_decode(img, bytes, size, order, name);
        free(bytes);
    } else {
        st = ocr_image_load(img, s.path, order);
    }
    if (st == OCR_OK) return OCR_OK;
    ocr_skip_reason_for_image_status(st, reason);
    return ocr_wrap_error(st, "sample %s:%lld", s.label_file, (long long)s.line);
}

ocr_status_t ocr_dataset_read_image_bytes(const OcrDataset *ds, int64_t index, uint8_t **bytes, size_t *size,
                                          ocr_skip_reason_t *reason) {
    ocr_skip_reason_t dummy;
    if (!reason) reason = &dummy;
    *reason = OCR_SKIP_REASON_COUNT;
    *bytes = NULL;
    *size = 0;
    OcrSample s;
    OCR_TRY(ocr_dataset_get(ds, index, &s));
    ocr_status_t st;
    if (ds->lmdb_) {
        const OcrLmdbReader *r = &ds->readers_[ds->entries_[ds->active_[index]].file];
        char key[32];
        ocr_lmdb_key(key, sizeof key, "image", s.line);
        int got = r->get(r->ctx, key, bytes, size);
        if (got > 0) return OCR_OK;
        st = got == 0 ? ocr_set_error(OCR_ERR_NOT_FOUND, "no %s record", key) : ocr_wrap_error(OCR_ERR_IO, "%s", key);
    } else {
        char *data = NULL;
        st = ocr_read_file(s.path, &data, size);  // names the path; NOT_FOUND for a missing file
        if (st == OCR_OK) {
            *bytes = (uint8_t *)data;
            return OCR_OK;
        }
    }
    ocr_skip_reason_for_image_status(st, reason);
    return ocr_wrap_error(st, "sample %s:%lld", s.label_file, (long long)s.line);
}

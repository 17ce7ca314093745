#include "core/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors IO assumes a little-endian host (the format stores little-endian bytes)"
#endif

// The reference implementation refuses larger headers; a bigger length means the file is
// not a safetensors file at all (or is corrupt), not that a huge header follows.
#define ST_MAX_HEADER 100000000ull

// safetensors dtype names for ocr_dtype_t, in enum order.
static const char *const st_dtype_names[OCR_DTYPE_COUNT] = {"F32", "F16", "BF16", "I32", "U8"};
// Valid in the format, but not something we load.
static const char *const st_other_dtypes[] = {"BOOL", "I8",  "I16",     "U16",     "U32",     "I64",
                                              "U64",  "F64", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4",
                                              "F6_E2M3", "F6_E3M2", "C64", NULL};

struct NameIndex {
    const char *name;
    int index;
};

struct OcrSafetensors {
    char *path;
    void *map;         // mmap of the whole file, or NULL
    size_t map_size;
    char *buf;         // malloc'd copy when mmap is unavailable or the data is misaligned
    int count;
    OcrNamedTensor *tensors;  // header order
    struct NameIndex *by_name;  // sorted by name, for find
    int meta_count;
    OcrMetadataEntry *meta;
};

// ---- a small growable string for the header -------------------------------------

typedef struct {
    char *s;
    size_t len, cap;
    int oom;
} StrBuf;

static void sb_reserve(StrBuf *b, size_t extra) {
    if (b->oom || b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) cap *= 2;
    char *n = realloc(b->s, cap);
    if (!n) {
        b->oom = 1;
        return;
    }
    b->s = n;
    b->cap = cap;
}

static void sb_add(StrBuf *b, const char *s, size_t n) {
    sb_reserve(b, n);
    if (b->oom) return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void sb_puts(StrBuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void sb_printf(StrBuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(StrBuf *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    OCR_ASSERT(n >= 0 && (size_t)n < sizeof tmp);
    sb_add(b, tmp, (size_t)n);
}

// JSON string literal: quotes, backslashes and control bytes escaped; UTF-8 passes through.
static void sb_json_string(StrBuf *b, const char *s) {
    sb_puts(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char esc[2] = {'\\', (char)*p};
            sb_add(b, esc, 2);
        } else if (*p < 0x20) {
            sb_printf(b, "\\u%04x", *p);
        } else {
            sb_add(b, (const char *)p, 1);
        }
    }
    sb_puts(b, "\"");
}

// ---- writing --------------------------------------------------------------------------

static int64_t numel_of(const OcrNamedTensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

static ocr_status_t validate_for_write(const char *path, const OcrNamedTensor *tensors, int count,
                                       const OcrMetadataEntry *metadata, int metadata_count) {
    if (count < 0 || (count > 0 && !tensors))
        return ocr_set_error(OCR_ERR_INVALID_ARG, "%s: bad tensor list (count %d)", path, count);
    if (metadata_count < 0 || (metadata_count > 0 && !metadata))
        return ocr_set_error(OCR_ERR_INVALID_ARG, "%s: bad metadata list (count %d)", path, metadata_count);
    for (int i = 0; i < count; i++) {
        const OcrNamedTensor *t = &tensors[i];
        if (!t->name || !t->name[0])
            return ocr_set_error(OCR_ERR_INVALID_ARG, "%s: tensor %d has no name", path, i);
        if (strcmp(t->name, "__metadata__") == 0)
            return ocr_set_error(OCR_ERR_INVALID_ARG, "%s: \"__metadata__\" is reserved and cannot name a tensor", path);
        if ((int)t->dtype < 0 || t->dtype >= OCR_DTYPE_COUNT)
            return ocr_set_error(OCR_ERR_INVALID_ARG, "%s: tensor '%s' has an invalid dtype %d", path, t->name,
                                 (int)t->dtype);
        if (t->ndim < 0 || t->ndim > OCR_MAX_DIMS)
            return ocr_set_error(OCR_ERR_INVALID_ARG, "%s: tensor '%s' has %d dimensions (0..%d allowed)", path,
                                 t->name, t->ndim, OCR_MAX_DIMS);
        for (int d = 0; d < t->ndim; d++)
            if (t->shape[d] < 0)
                return ocr_set_error(OCR_ERR_INVALID_ARG, "%s: tensor '%s' has a negative dimension %lld", path,
                                     t->name, (long long)t->shape[d]);
        if (numel_of(t) > 0 && !t->data)
            return ocr_set_error(OCR_ERR_INVALID_ARG, "%s: tensor '%s' has no data", path, t->name);
        for (int j = 0; j < i; j++)
            if (strcmp(tensors[j].name, t->name) == 0)
                return ocr_set_error(OCR_ERR_INVALID_ARG, "%s: tensor name '%s' is used twice", path, t->name);
    }
    for (int i = 0; i < metadata_count; i++) {
        if (!metadata[i].key || !metadata[i].value)
            return ocr_set_error(OCR_ERR_INVALID_ARG, "%s: metadata entry %d has no key or value", path, i);
        for (int j = 0; j < i; j++)
            if (strcmp(metadata[j].key, metadata[i].key) == 0)
                return ocr_set_error(OCR_ERR_INVALID_ARG, "%s: metadata key '%s' is used twice", path,
                                     metadata[i].key);
    }
    return OCR_OK;
}

ocr_status_t ocr_safetensors_write(const char *path, const OcrNamedTensor *tensors, int count,
                                   const OcrMetadataEntry *metadata, int metadata_count) {
    OCR_TRY(validate_for_write(path, tensors, count, metadata, metadata_count));

    // Data layout: larger elements first (stable), so every tensor starts at a multiple of its
    // element size and the 8-byte ones at multiples of 8, with no holes (the format forbids
    // holes: every byte of the data section belongs to exactly one tensor).
    int *order = malloc((size_t)(count > 0 ? count : 1) * sizeof *order);
    uint64_t *begin = malloc((size_t)(count > 0 ? count : 1) * sizeof *begin);
    if (!order || !begin) {
        free(order);
        free(begin);
        return ocr_set_error(OCR_ERR_OOM, "%s: out of memory", path);
    }
    int k = 0;
    for (size_t es = 8; es >= 1; es /= 2)
        for (int i = 0; i < count; i++)
            if (ocr_dtype_size(tensors[i].dtype) == es) order[k++] = i;
    OCR_ASSERT(k == count, "dtype sizes must be powers of two up to 8");
    uint64_t offset = 0;
    for (int j = 0; j < count; j++) {
        const OcrNamedTensor *t = &tensors[order[j]];
        begin[order[j]] = offset;
        offset += (uint64_t)numel_of(t) * ocr_dtype_size(t->dtype);
    }

    StrBuf h = {0};
    sb_puts(&h, "{");
    if (metadata_count > 0) {
        sb_puts(&h, "\"__metadata__\":{");
        for (int i = 0; i < metadata_count; i++) {
            if (i) sb_puts(&h, ",");
            sb_json_string(&h, metadata[i].key);
            sb_puts(&h, ":");
            sb_json_string(&h, metadata[i].value);
        }
        sb_puts(&h, "}");
    }
    for (int i = 0; i < count; i++) {
        const OcrNamedTensor *t = &tensors[i];
        if (i || metadata_count > 0) sb_puts(&h, ",");
        sb_json_string(&h, t->name);
        sb_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype_names[t->dtype]);
        for (int d = 0; d < t->ndim; d++) sb_printf(&h, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        uint64_t end = begin[i] + (uint64_t)numel_of(t) * ocr_dtype_size(t->dtype);
        sb_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)begin[i], (unsigned long long)end);
    }
    sb_puts(&h, "}");
    // Pad with spaces so the data section starts 8-byte aligned (the 8-byte length + header).
    while (!h.oom && h.len % 8 != 0) sb_puts(&h, " ");
    free(begin);
    if (h.oom) {
        free(order);
        free(h.s);
        return ocr_set_error(OCR_ERR_OOM, "%s: out of memory building the header", path);
    }

    OcrAtomicFile af;
    ocr_status_t st = ocr_atomic_open(&af, path);
    if (st != OCR_OK) {
        free(order);
        free(h.s);
        return st;
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)h.len >> (8 * i));
    int ok = fwrite(len8, 1, 8, af.fp) == 8 && fwrite(h.s, 1, h.len, af.fp) == h.len;
    for (int j = 0; ok && j < count; j++) {
        const OcrNamedTensor *t = &tensors[order[j]];
        size_t bytes = (size_t)numel_of(t) * ocr_dtype_size(t->dtype);
        if (bytes && fwrite(t->data, 1, bytes, af.fp) != bytes) ok = 0;
    }
    free(order);
    free(h.s);
    if (!ok) {
        int e = errno;
        st = ocr_set_error(OCR_ERR_IO, "%s: write failed: %s", path, strerror(e));
        ocr_atomic_abort(&af);
        return st;
    }
    return ocr_atomic_commit(&af);
}

// ---- reading ----------------------------------------------------------------------

void ocr_safetensors_close(OcrSafetensors *st) {
    if (!st) return;
    for (int i = 0; i < st->count; i++) free((char *)st->tensors[i].name);
    for (int i = 0; i < st->meta_count; i++) {
        free((char *)st->meta[i].key);
        free((char *)st->meta[i].value);
    }
    free(st->tensors);
    free(st->by_name);
    free(st->meta);
    if (st->map) munmap(st->map, st->map_size);
    free(st->buf);
    free(st->path);
    free(st);
}

static char *dup_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static const char *json_kind(const cJSON *n) {
    if (!n) return "nothing";
    if (cJSON_IsString(n)) return "a string";
    if (cJSON_IsNumber(n)) return "a number";
    if (cJSON_IsBool(n)) return "a boolean";
    if (cJSON_IsNull(n)) return "null";
    if (cJSON_IsArray(n)) return "a list";
    if (cJSON_IsObject(n)) return "an object";
    return "an unknown value";
}

// A JSON number that is a whole, non-negative integer exactly representable as a double.
static int json_uint(const cJSON *n, uint64_t *out) {
    if (!cJSON_IsNumber(n)) return 0;
    double v = n->valuedouble;
    if (!isfinite(v) || v < 0 || v > 9007199254740992.0 || floor(v) != v) return 0;
    *out = (uint64_t)v;
    return 1;
}

typedef struct {
    uint64_t begin, end;
    int index;
} Span;

static int span_cmp(const void *a, const void *b) {
    const Span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int name_cmp(const void *a, const void *b) {
    return strcmp(((const struct NameIndex *)a)->name, ((const struct NameIndex *)b)->name);
}

// Parses one tensor entry into t (name already set) and its byte range.
static ocr_status_t parse_entry(const char *path, const char *name, const cJSON *e, OcrNamedTensor *t,
                                uint64_t *begin, uint64_t *end) {
    if (!cJSON_IsObject(e))
        return ocr_set_error(OCR_ERR_FORMAT, "%s: tensor '%s': entry must be an object, got %s", path, name,
                             json_kind(e));
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!dt) return ocr_set_error(OCR_ERR_FORMAT, "%s: tensor '%s': missing \"dtype\"", path, name);
    if (!shape) return ocr_set_error(OCR_ERR_FORMAT, "%s: tensor '%s': missing \"shape\"", path, name);
    if (!offs) return ocr_set_error(OCR_ERR_FORMAT, "%s: tensor '%s': missing \"data_offsets\"", path, name);

    if (!cJSON_IsString(dt))
        return ocr_set_error(OCR_ERR_FORMAT, "%s: tensor '%s': dtype must be a string, got %s", path, name,
                             json_kind(dt));
    int found = -1;
    for (int d = 0; d < OCR_DTYPE_COUNT; d++)
        if (strcmp(dt->valuestring, st_dtype_names[d]) == 0) found = d;
    if (found < 0) {
        for (int d = 0; st_other_dtypes[d]; d++)
            if (strcmp(dt->valuestring, st_other_dtypes[d]) == 0)
                return ocr_set_error(OCR_ERR_UNSUPPORTED,
                                     "%s: tensor '%s': dtype %s is not supported (supported: F32, F16, BF16, I32, U8)",
                                     path, name, dt->valuestring);
        return ocr_set_error(OCR_ERR_FORMAT, "%s: tensor '%s': unknown dtype \"%.40s\"", path, name, dt->valuestring);
    }
    t->dtype = (ocr_dtype_t)found;

    if (!cJSON_IsArray(shape))
        return ocr_set_error(OCR_ERR_FORMAT, "%s: tensor '%s': shape must be a list, got %s", path, name,
                             json_kind(shape));
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > OCR_MAX_DIMS)
        return ocr_set_error(OCR_ERR_UNSUPPORTED, "%s: tensor '%s': shape has %d dimensions, at most %d supported",
                             path, name, ndim, OCR_MAX_DIMS);
    t->ndim = ndim;
    int d = 0;
    uint64_t numel = 1;
    int overflow = 0;
    for (const cJSON *s = shape->child; s; s = s->next, d++) {
        uint64_t v;
        if (!json_uint(s, &v))
            return ocr_set_error(OCR_ERR_FORMAT,
                                 "%s: tensor '%s': shape entry %d must be a non-negative integer, got %s", path, name,
                                 d, json_kind(s));
        t->shape[d] = (int64_t)v;
        if (v != 0 && numel > UINT64_MAX / 8 / v) overflow = 1;
        numel *= v;
    }
    for (; d < OCR_MAX_DIMS; d++) t->shape[d] = 1;

    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !json_uint(offs->child, begin) ||
        !json_uint(offs->child->next, end))
        return ocr_set_error(OCR_ERR_FORMAT,
                             "%s: tensor '%s': data_offsets must be a list of two non-negative integers [begin, end]",
                             path, name);
    if (*end < *begin)
        return ocr_set_error(OCR_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] are reversed (end < begin)",
                             path, name, (unsigned long long)*begin, (unsigned long long)*end);
    uint64_t bytes = numel * ocr_dtype_size(t->dtype);
    if (overflow || bytes != *end - *begin) {
        char shp[96];
        size_t u = (size_t)snprintf(shp, sizeof shp, "(");
        for (int i = 0; i < ndim && u < sizeof shp; i++)
            u += (size_t)snprintf(shp + u, sizeof shp - u, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        if (u < sizeof shp) snprintf(shp + u, sizeof shp - u, ")");
        if (overflow)
            return ocr_set_error(OCR_ERR_FORMAT, "%s: tensor '%s': shape %s is too large", path, name, shp);
        return ocr_set_error(OCR_ERR_FORMAT,
                             "%s: tensor '%s': data_offsets [%llu, %llu] hold %llu bytes, but shape %s of %s needs "
                             "%llu",
                             path, name, (unsigned long long)*begin, (unsigned long long)*end,
                             (unsigned long long)(*end - *begin), shp, dt->valuestring, (unsigned long long)bytes);
    }
    return OCR_OK;
}

// Parses and validates the header; fills st (tensors with offsets into the data section in
// `offsets`, data pointers set by the caller).
static ocr_status_t parse_header(OcrSafetensors *st, const char *hdr, size_t hlen, uint64_t data_size,
                                 uint64_t **offsets_out) {
    const char *path = st->path;
    *offsets_out = NULL;
    const char *nul = memchr(hdr, '\0', hlen);
    if (nul)
        return ocr_set_error(OCR_ERR_FORMAT, "%s: header contains a NUL byte at offset %zu", path,
                             (size_t)(nul - hdr));
    if (hlen == 0 || hdr[0] != '{')
        return ocr_set_error(OCR_ERR_FORMAT, "%s: header must be a JSON object starting with '{'%s", path,
                             hlen == 0 ? " (the header is empty)" : "");
    // The length handed to cJSON includes a terminating NUL so that trailing padding parses.
    char *copy = malloc(hlen + 1);
    if (!copy) return ocr_set_error(OCR_ERR_OOM, "%s: out of memory (%zu-byte header)", path, hlen);
    memcpy(copy, hdr, hlen);
    copy[hlen] = '\0';
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(copy, hlen + 1, &end, 1);
    if (!root) {
        size_t pos = end && end >= copy ? (size_t)(end - copy) : 0;
        free(copy);
        return ocr_set_error(OCR_ERR_FORMAT, "%s: header is not valid JSON (error at byte %zu of %zu)", path, pos,
                             hlen);
    }
    free(copy);
    ocr_status_t status = OCR_OK;  // (text starting with '{' that parses is an object)

    int n = 0, nmeta = 0;
    const cJSON *meta = NULL;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) {
            if (meta) {
                status = ocr_set_error(OCR_ERR_FORMAT, "%s: \"__metadata__\" appears twice", path);
                goto done;
            }
            meta = e;
        } else {
            n++;
        }
    }
    if (meta && !cJSON_IsNull(meta)) {
        if (!cJSON_IsObject(meta)) {
            status = ocr_set_error(OCR_ERR_FORMAT, "%s: __metadata__ must be an object of strings, got %s", path,
                                   json_kind(meta));
            goto done;
        }
        nmeta = cJSON_GetArraySize(meta);
    }

    st->tensors = calloc((size_t)(n > 0 ? n : 1), sizeof *st->tensors);
    st->by_name = calloc((size_t)(n > 0 ? n : 1), sizeof *st->by_name);
    st->meta = calloc((size_t)(nmeta > 0 ? nmeta : 1), sizeof *st->meta);
    uint64_t *offsets = calloc((size_t)(n > 0 ? n : 1) * 2, sizeof *offsets);
    Span *spans = calloc((size_t)(n > 0 ? n : 1), sizeof *spans);
    *offsets_out = offsets;
    if (!st->tensors || !st->by_name || !st->meta || !offsets || !spans) {
        free(spans);
        status = ocr_set_error(OCR_ERR_OOM, "%s: out of memory (%d tensors)", path, n);
        goto done;
    }

    if (meta && nmeta > 0) {
        for (const cJSON *m = meta->child; m; m = m->next) {
            if (!cJSON_IsString(m)) {
                free(spans);
                status = ocr_set_error(OCR_ERR_FORMAT, "%s: __metadata__ value for key '%s' must be a string, got %s",
                                       path, m->string, json_kind(m));
                goto done;
            }
            for (int j = 0; j < st->meta_count; j++)
                if (strcmp(st->meta[j].key, m->string) == 0) {
                    free(spans);
                    status = ocr_set_error(OCR_ERR_FORMAT, "%s: __metadata__ key '%s' appears twice", path, m->string);
                    goto done;
                }
            OcrMetadataEntry *me = &st->meta[st->meta_count];
            me->key = dup_string(m->string);
            me->value = dup_string(m->valuestring);
            st->meta_count++;
            if (!me->key || !me->value) {
                free(spans);
                status = ocr_set_error(OCR_ERR_OOM, "%s: out of memory", path);
                goto done;
            }
        }
    }

    int i = 0;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (e == meta) continue;
        OcrNamedTensor *t = &st->tensors[i];
        t->name = dup_string(e->string);
        st->count = i + 1;  // so close() frees the name even if the entry is bad
        if (!t->name) {
            free(spans);
            status = ocr_set_error(OCR_ERR_OOM, "%s: out of memory", path);
            goto done;
        }
        status = parse_entry(path, e->string, e, t, &offsets[2 * i], &offsets[2 * i + 1]);
        if (status != OCR_OK) {
            free(spans);
            goto done;
        }
        if (offsets[2 * i + 1] > data_size) {
            free(spans);
            status = ocr_set_error(OCR_ERR_FORMAT,
                                   "%s: tensor '%s': data_offsets [%llu, %llu] lie outside the data section (%llu "
                                   "bytes)",
                                   path, t->name, (unsigned long long)offsets[2 * i],
                                   (unsigned long long)offsets[2 * i + 1], (unsigned long long)data_size);
            goto done;
        }
        spans[i] = (Span){offsets[2 * i], offsets[2 * i + 1], i};
        st->by_name[i] = (struct NameIndex){t->name, i};
        i++;
    }

    // Names: sorted once for find(), which also exposes duplicates as neighbours.
    qsort(st->by_name, (size_t)n, sizeof *st->by_name, name_cmp);
    for (int j = 1; j < n; j++)
        if (strcmp(st->by_name[j].name, st->by_name[j - 1].name) == 0) {
            free(spans);
            status = ocr_set_error(OCR_ERR_FORMAT, "%s: tensor '%s' appears twice in the header", path,
                                   st->by_name[j].name);
            goto done;
        }

    // Ranges: in offset order each must start where the previous ended; this catches overlaps
    // and holes, and the last must end at the end of the file.
    qsort(spans, (size_t)n, sizeof *spans, span_cmp);
    uint64_t pos = 0;
    for (int j = 0; j < n; j++) {
        const char *nm = st->tensors[spans[j].index].name;
        if (spans[j].begin < pos) {
            status = ocr_set_error(OCR_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] overlap tensor '%s'",
                                   path, nm, (unsigned long long)spans[j].begin, (unsigned long long)spans[j].end,
                                   st->tensors[spans[j - 1].index].name);
            break;
        }
        if (spans[j].begin > pos) {
            status = ocr_set_error(OCR_ERR_FORMAT,
                                   "%s: tensor '%s': data_offsets [%llu, %llu] leave bytes [%llu, %llu) of the data "
                                   "section unused (the format allows no holes)",
                                   path, nm, (unsigned long long)spans[j].begin, (unsigned long long)spans[j].end,
                                   (unsigned long long)pos, (unsigned long long)spans[j].begin);
            break;
        }
        pos = spans[j].end;
    }
    if (status == OCR_OK && pos != data_size)
        status = ocr_set_error(OCR_ERR_FORMAT,
                               "%s: the tensors end at byte %llu of the data section, but it has %llu bytes "
                               "(truncated header or trailing data)",
                               path, (unsigned long long)pos, (unsigned long long)data_size);
    free(spans);
done:
    cJSON_Delete(root);
    return status;
}

ocr_status_t ocr_safetensors_open(OcrSafetensors **out, const char *path) {
    *out = NULL;
    OcrSafetensors *st = calloc(1, sizeof *st);
    if (st) st->path = dup_string(path);
    if (!st || !st->path) {
        free(st);
        return ocr_set_error(OCR_ERR_OOM, "%s: out of memory", path);
    }

    // mmap keeps large checkpoints out of the heap; read() is the fallback.
    const unsigned char *file = NULL;
    size_t size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        ocr_safetensors_close(st);
        return ocr_set_error(e == ENOENT ? OCR_ERR_NOT_FOUND : OCR_ERR_IO, "cannot open %s: %s", path, strerror(e));
    }
    struct stat sb;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size >= 8) {
        void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m != MAP_FAILED) {
            st->map = m;
            st->map_size = (size_t)sb.st_size;
            file = m;
            size = st->map_size;
        }
    }
    close(fd);
    if (!file) {
        ocr_status_t s = ocr_read_file(path, &st->buf, &size);
        if (s != OCR_OK) {
            ocr_safetensors_close(st);
            return s;
        }
        file = (const unsigned char *)st->buf;
    }

    ocr_status_t status;
    uint64_t *offsets = NULL;
    if (size < 8) {
        status = ocr_set_error(OCR_ERR_FORMAT, "%s: file is %zu bytes, too short for the 8-byte header length", path,
                               size);
        goto fail;
    }
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)file[i] << (8 * i);
    if (hlen > ST_MAX_HEADER) {
        status = ocr_set_error(OCR_ERR_FORMAT,
                               "%s: header length %llu is absurd (more than %llu bytes); not a safetensors file?",
                               path, (unsigned long long)hlen, ST_MAX_HEADER);
        goto fail;
    }
    if (hlen > size - 8) {
        status = ocr_set_error(OCR_ERR_FORMAT, "%s: header length %llu exceeds the %zu bytes after the length field",
                               path, (unsigned long long)hlen, size - 8);
        goto fail;
    }
    uint64_t data_start = 8 + hlen, data_size = size - data_start;
    status = parse_header(st, (const char *)file + 8, (size_t)hlen, data_size, &offsets);
    if (status != OCR_OK) goto fail;

    // Other writers may leave the data section (or a tensor) misaligned for its element type;
    // callers read the data as float/int arrays, so copy it into aligned memory then.
    const unsigned char *data = file + data_start;
    int aligned = 1;
    for (int i = 0; i < st->count; i++)
        if (((uintptr_t)(data + offsets[2 * i])) % ocr_dtype_size(st->tensors[i].dtype) != 0) aligned = 0;
    if (!aligned) {
        unsigned char *copy = malloc(data_size > 0 ? data_size : 1);
        if (!copy) {
            status = ocr_set_error(OCR_ERR_OOM, "%s: out of memory (%llu bytes)", path, (unsigned long long)data_size);
            goto fail;
        }
        memcpy(copy, data, data_size);
        if (st->map) {
            munmap(st->map, st->map_size);
            st->map = NULL;
        }
        free(st->buf);
        st->buf = (char *)copy;
        data = copy;
    }
    for (int i = 0; i < st->count; i++) st->tensors[i].data = data + offsets[2 * i];
    free(offsets);
    *out = st;
    return OCR_OK;

fail:
    free(offsets);
    ocr_safetensors_close(st);
    return status;
}

int ocr_safetensors_count(const OcrSafetensors *st) { return st->count; }

const OcrNamedTensor *ocr_safetensors_at(const OcrSafetensors *st, int i) {
    OCR_ASSERT(i >= 0 && i < st->count, "tensor index %d of %d", i, st->count);
    return &st->tensors[i];
}

const OcrNamedTensor *ocr_safetensors_find(const OcrSafetensors *st, const char *name) {
    int lo = 0, hi = st->count - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(name, st->by_name[mid].name);
        if (c == 0) return &st->tensors[st->by_name[mid].index];
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return NULL;
}

const char *ocr_safetensors_metadata(const OcrSafetensors *st, const char *key) {
    for (int i = 0; i < st->meta_count; i++)
        if (strcmp(st->meta[i].key, key) == 0) return st->meta[i].value;
    return NULL;
}

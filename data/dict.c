#include "data/dict.h"

#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "data/utf8.h"

#define EMPTY_KEY UINT32_MAX  // code points stop at 0x10FFFF

static size_t hash_cp(uint32_t cp, size_t mask) { return (size_t)((cp * 0x9E3779B1u) ^ (cp >> 15)) & mask; }

static size_t table_cap_for(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;  // load factor <= 1/2
    return cap;
}

// ---- dictionary -------------------------------------------------------------------------

void ocr_dict_free(OcrDict *dict) {
    if (!dict) return;
    free(dict->keys_);
    free(dict->vals_);
    free(dict->storage_);
    free(dict->class_ptrs_);
    memset(dict, 0, sizeof *dict);
}

int ocr_dict_lookup(const OcrDict *dict, uint32_t cp) {
    if (!dict->keys_ || cp == EMPTY_KEY) return -1;
    size_t mask = dict->cap_ - 1;
    for (size_t i = hash_cp(cp, mask);; i = (i + 1) & mask) {
        if (dict->keys_[i] == cp) return dict->vals_[i];
        if (dict->keys_[i] == EMPTY_KEY) return -1;
    }
}

int ocr_dict_lookup_utf8(const OcrDict *dict, const char *character) {
    size_t n = strlen(character);
    uint32_t cp;
    int k = ocr_utf8_decode(character, n, &cp);
    if (k == 0 || (size_t)k != n) return -1;
    return ocr_dict_lookup(dict, cp);
}

// Builds classes_ptrs and the code point map from `storage` holding n NUL-terminated
// strings back to back (class 0 included).
static ocr_status_t dict_finish(OcrDict *dict, char *storage, int n, const char *name) {
    dict->storage_ = storage;
    dict->class_ptrs_ = malloc(sizeof(char *) * (size_t)n);
    dict->cap_ = table_cap_for((size_t)n);
    dict->keys_ = malloc(sizeof(uint32_t) * dict->cap_);
    dict->vals_ = malloc(sizeof(int32_t) * dict->cap_);
    if (!dict->class_ptrs_ || !dict->keys_ || !dict->vals_) {
        ocr_dict_free(dict);
        return ocr_set_error(OCR_ERR_OOM, "%s: out of memory for %d classes", name, n);
    }
    for (size_t i = 0; i < dict->cap_; i++) dict->keys_[i] = EMPTY_KEY;
    size_t mask = dict->cap_ - 1;
    char *p = storage;
    for (int c = 0; c < n; c++) {
        dict->class_ptrs_[c] = p;
        size_t len = strlen(p);
        uint32_t cp;
        int k = ocr_utf8_decode(p, len, &cp);
        if (c > 0 && (k == 0 || (size_t)k != len)) dict->num_unmatchable++;
        if (c > 0 && k > 0 && (size_t)k == len) {
            size_t i = hash_cp(cp, mask);
            while (dict->keys_[i] != EMPTY_KEY && dict->keys_[i] != cp) i = (i + 1) & mask;
            dict->keys_[i] = cp;
            dict->vals_[i] = c;  // a later duplicate overwrites: the last occurrence wins
        }
        p += len + 1;
    }
    dict->classes = (const char *const *)dict->class_ptrs_;
    dict->num_classes = n;
    return OCR_OK;
}

static ocr_status_t dict_default(OcrDict *dict) {
    static const char charset[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    size_t n = sizeof charset - 1;
    char *storage = malloc(sizeof "blank" + 2 * n);
    if (!storage) return ocr_set_error(OCR_ERR_OOM, "default dictionary: out of memory");
    memcpy(storage, "blank", sizeof "blank");
    char *p = storage + sizeof "blank";
    for (size_t i = 0; i < n; i++) *p++ = charset[i], *p++ = '\0';
    dict->lower = 1;
    return dict_finish(dict, storage, (int)n + 1, "default dictionary");
}

ocr_status_t ocr_dict_from_buffer(OcrDict *dict, const char *data, size_t size, const char *name,
                                  int use_space_char) {
    memset(dict, 0, sizeof *dict);
    if (!name) name = "<dictionary>";
    if (!data) return ocr_set_error(OCR_ERR_INVALID_ARG, "%s: no data", name);
    size_t start = 0;
    if (size >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0) start = 3;
    // Storage: "blank", every line, maybe " ", each NUL-terminated: at most size + lines + 8.
    size_t lines = 0;
    for (size_t i = start; i < size; i++) lines += data[i] == '\n';
    char *storage = malloc(size + lines + 16);
    if (!storage) return ocr_set_error(OCR_ERR_OOM, "%s: out of memory", name);
    memcpy(storage, "blank", sizeof "blank");
    char *out = storage + sizeof "blank";
    int n = 1;
    long line_no = 0;
    size_t pos = start;
    while (pos < size) {
        size_t end = pos;
        while (end < size && data[end] != '\n') end++;
        line_no++;
        // Python's .strip("\n").strip("\r\n"): any '\r'/'\n' at either end.
        size_t a = pos, b = end;
        while (a < b && (data[a] == '\r' || data[a] == '\n')) a++;
        while (b > a && (data[b - 1] == '\r' || data[b - 1] == '\n')) b--;
        size_t bad = 0;
        if (!ocr_utf8_valid(data + a, b - a, &bad)) {
            free(storage);
            return ocr_set_error(OCR_ERR_FORMAT, "%s:%ld: invalid UTF-8 (byte %zu of the line)", name, line_no,
                                 bad + 1 + (a - pos));
        }
        if (memchr(data + a, '\0', b - a)) {
            free(storage);
            return ocr_set_error(OCR_ERR_FORMAT, "%s:%ld: NUL byte in a dictionary line", name, line_no);
        }
        if (n == INT32_MAX - 2) {
            free(storage);
            return ocr_set_error(OCR_ERR_FORMAT, "%s: too many lines", name);
        }
        memcpy(out, data + a, b - a);
        out += b - a;
        *out++ = '\0';
        n++;
        pos = end + 1;  // a final line without '\n' counts; a trailing '\n' adds no empty line
    }
    if (n == 1) {
        free(storage);
        return ocr_set_error(OCR_ERR_FORMAT, "%s: the dictionary has no lines", name);
    }
    if (use_space_char) {
        *out++ = ' ';
        *out++ = '\0';
        n++;
    }
    dict->reverse = strstr(name, "arabic") != NULL;
    return dict_finish(dict, storage, n, name);
}

ocr_status_t ocr_dict_load(OcrDict *dict, const char *path, int use_space_char) {
    memset(dict, 0, sizeof *dict);
    if (!path || !path[0]) return dict_default(dict);
    char *data = NULL;
    size_t size = 0;
    ocr_status_t st = ocr_read_file(path, &data, &size);
    if (st != OCR_OK) return ocr_wrap_error(st, "character dictionary");
    st = ocr_dict_from_buffer(dict, data, size, path, use_space_char);
    free(data);
    return st;
}

// ---- character counter -------------------------------------------------------------------

void ocr_char_counter_init(OcrCharCounter *c) { memset(c, 0, sizeof *c); }

void ocr_char_counter_free(OcrCharCounter *c) {
    free(c->slots_);
    memset(c, 0, sizeof *c);
}

static ocr_status_t counter_grow(OcrCharCounter *c) {
    size_t cap = c->cap_ ? c->cap_ * 2 : 64;
    OcrCharCount *slots = malloc(sizeof *slots * cap);
    if (!slots) return ocr_set_error(OCR_ERR_OOM, "character counter: out of memory");
    for (size_t i = 0; i < cap; i++) slots[i].codepoint = EMPTY_KEY, slots[i].count = 0;
    for (size_t j = 0; j < c->cap_; j++) {
        if (c->slots_[j].codepoint == EMPTY_KEY) continue;
        size_t i = hash_cp(c->slots_[j].codepoint, cap - 1);
        while (slots[i].codepoint != EMPTY_KEY) i = (i + 1) & (cap - 1);
        slots[i] = c->slots_[j];
    }
    free(c->slots_);
    c->slots_ = slots, c->cap_ = cap;
    return OCR_OK;
}

ocr_status_t ocr_char_counter_add(OcrCharCounter *c, uint32_t cp, int64_t count) {
    if (cp == EMPTY_KEY) return ocr_set_error(OCR_ERR_INVALID_ARG, "character counter: bad code point");
    if (2 * (c->distinct + 1) > c->cap_) OCR_TRY(counter_grow(c));
    size_t mask = c->cap_ - 1;
    size_t i = hash_cp(cp, mask);
    while (c->slots_[i].codepoint != EMPTY_KEY && c->slots_[i].codepoint != cp) i = (i + 1) & mask;
    if (c->slots_[i].codepoint == EMPTY_KEY) {
        c->slots_[i].codepoint = cp;
        c->distinct++;
    }
    c->slots_[i].count += count;
    c->total += count;
    return OCR_OK;
}

int64_t ocr_char_counter_get(const OcrCharCounter *c, uint32_t cp) {
    if (!c->cap_ || cp == EMPTY_KEY) return 0;
    size_t mask = c->cap_ - 1;
    for (size_t i = hash_cp(cp, mask);; i = (i + 1) & mask) {
        if (c->slots_[i].codepoint == cp) return c->slots_[i].count;
        if (c->slots_[i].codepoint == EMPTY_KEY) return 0;
    }
}

ocr_status_t ocr_char_counter_merge(OcrCharCounter *dst, const OcrCharCounter *src) {
    for (size_t i = 0; i < src->cap_; i++)
        if (src->slots_[i].codepoint != EMPTY_KEY)
            OCR_TRY(ocr_char_counter_add(dst, src->slots_[i].codepoint, src->slots_[i].count));
    return OCR_OK;
}

static int by_count_desc(const void *a, const void *b) {
    const OcrCharCount *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return x->codepoint < y->codepoint ? -1 : x->codepoint > y->codepoint;
}

OcrCharCount *ocr_char_counter_sorted(const OcrCharCounter *c, size_t *n) {
    *n = 0;
    if (c->distinct == 0) return NULL;
    OcrCharCount *out = malloc(sizeof *out * c->distinct);
    if (!out) {
        ocr_set_error(OCR_ERR_OOM, "character counter: out of memory");
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < c->cap_; i++)
        if (c->slots_[i].codepoint != EMPTY_KEY) out[k++] = c->slots_[i];
    qsort(out, k, sizeof *out, by_count_desc);
    *n = k;
    return out;
}

// ---- encoding ------------------------------------------------------------------------------

const char *ocr_label_result_name(ocr_label_result_t r) {
    switch (r) {
        case OCR_LABEL_OK: return "ok";
        case OCR_LABEL_EMPTY: return "empty";
        case OCR_LABEL_TOO_LONG: return "too_long";
        case OCR_LABEL_NO_KNOWN_CHARS: return "no_known_chars";
        case OCR_LABEL_BAD_UTF8: return "bad_utf8";
    }
    return "unknown";
}

ocr_label_result_t ocr_dict_encode(const OcrDict *dict, const char *text, size_t len, int max_text_length,
                                   int32_t *out, int *out_len, OcrCharCounter *unknown) {
    OCR_ASSERT(max_text_length > 0, "max_text_length must be positive (got %d)", max_text_length);
    *out_len = 0;
    if (len == 0) return OCR_LABEL_EMPTY;
    if (!ocr_utf8_valid(text, len, NULL)) return OCR_LABEL_BAD_UTF8;
    if (ocr_utf8_length(text, len) > (size_t)max_text_length) return OCR_LABEL_TOO_LONG;
    int k = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int step = ocr_utf8_decode(text + i, len - i, &cp);
        OCR_ASSERT(step > 0);
        i += (size_t)step;
        if (dict->lower && cp >= 'A' && cp <= 'Z') cp += 'a' - 'A';
        int idx = ocr_dict_lookup(dict, cp);
        if (idx < 0) {
            if (unknown) (void)ocr_char_counter_add(unknown, cp, 1);
            continue;
        }
        out[k++] = idx;
    }
    for (int j = k; j < max_text_length; j++) out[j] = 0;
    if (k == 0) return OCR_LABEL_NO_KNOWN_CHARS;
    *out_len = k;
    return OCR_LABEL_OK;
}

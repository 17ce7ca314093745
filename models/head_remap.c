// The head's per-class tensors carried over by character (models/head_remap.h).
#include "models/head_remap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Every per-class tensor of our heads, by its name in the parameter tables (a MultiHead model
// keeps PaddleOCR's names: head.ctc_head.*, head.gtc_head.*, head.sar_head.*). Linear weights
// are (in, out), so their classes are axis 1; biases and embeddings index them on axis 0.
// NRTR's vocabulary is C + 4: <pad> 0, <unk> 1, <s> 2, </s> 3, the C − 1 characters from 4 (CTC
// id + 3), one entry after them. SAR's embedding has C + 2 entries (characters at CTC id − 1,
// then <UKN>, <BOS/EOS>, <PAD>), its prediction C + 1 (no <PAD>). A new head with per-class
// tensors adds its lines here.
static const OcrClassTensor RULES[] = {
    {"head.fc.weight", 1, 1, 0, 0},
    {"head.fc.bias", 0, 1, 0, 1},
    {"head.fc2.weight", 1, 1, 0, 0},  // Head.mid_channels: fc1 is not per class
    {"head.fc2.bias", 0, 1, 0, 1},
    {"head.ctc_head.fc.weight", 1, 1, 0, 0},
    {"head.ctc_head.fc.bias", 0, 1, 0, 1},
    {"head.ctc_head.fc2.weight", 1, 1, 0, 0},
    {"head.ctc_head.fc2.bias", 0, 1, 0, 1},
    {"head.gtc_head.embedding.embedding.weight", 0, 4, 1, 0},
    {"head.gtc_head.tgt_word_prj.weight", 1, 4, 1, 0},
    {"head.gtc_head.tgt_word_prj.bias", 0, 4, 1, 1},
    {"head.sar_head.decoder.embedding.weight", 0, 0, 3, 0},
    {"head.sar_head.decoder.prediction.weight", 1, 0, 2, 0},
    {"head.sar_head.decoder.prediction.bias", 0, 0, 2, 1},
};

int ocr_head_class_tensor(const char *name, OcrClassTensor *out) {
    for (size_t i = 0; i < sizeof RULES / sizeof RULES[0]; i++)
        if (strcmp(name, RULES[i].name) == 0) {
            *out = RULES[i];
            return 1;
        }
    return 0;
}

// ---- the class map -----------------------------------------------------------------------------------

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

void ocr_class_map_free(OcrClassMap *map) {
    free(map->src);
    free(map->kept_old);
    memset(map, 0, sizeof *map);
}

ocr_status_t ocr_class_map_build(OcrClassMap *map, const char *const *old_classes, int n_old,
                                 const char *const *new_classes, int n_new) {
    memset(map, 0, sizeof *map);
    map->n_old = n_old;
    map->n_new = n_new;
    size_t cap = 16;
    while (cap < 2 * (size_t)n_old) cap *= 2;
    map->src = malloc((size_t)(n_new > 0 ? n_new : 1) * sizeof *map->src);
    map->kept_old = calloc((size_t)(n_old > 0 ? n_old : 1), sizeof *map->kept_old);
    int *head = malloc(cap * sizeof *head), *next = malloc((size_t)(n_old > 0 ? n_old : 1) * sizeof *next);
    if (!map->src || !map->kept_old || !head || !next) {
        free(head);
        free(next);
        ocr_class_map_free(map);
        return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    }
    // Buckets chain the weights' classes in ascending index order (inserted from the last), so a
    // string present several times is matched occurrence by occurrence.
    for (size_t b = 0; b < cap; b++) head[b] = -1;
    for (int i = n_old - 1; i >= 1; i--) {
        size_t b = hash_str(old_classes[i]) & (cap - 1);
        next[i] = head[b];
        head[b] = i;
    }
    if (n_old > 0) map->kept_old[0] = 1;
    if (n_new > 0) map->src[0] = 0;  // blank → blank
    for (int j = 1; j < n_new; j++) {
        map->src[j] = -1;
        for (int i = head[hash_str(new_classes[j]) & (cap - 1)]; i >= 0; i = next[i])
            if (!map->kept_old[i] && strcmp(old_classes[i], new_classes[j]) == 0) {
                map->src[j] = i;
                map->kept_old[i] = 1;
                break;
            }
        if (map->src[j] < 0) {
            map->added++;
        } else {
            map->kept++;
            map->moved += map->src[j] != j;
        }
    }
    map->dropped = (n_old > 0 ? n_old - 1 : 0) - map->kept;
    free(head);
    free(next);
    return OCR_OK;
}

int ocr_class_map_is_identity(const OcrClassMap *map) {
    if (map->n_old != map->n_new) return 0;
    for (int j = 0; j < map->n_new; j++)
        if (map->src[j] != j) return 0;
    return 1;
}

// ---- one tensor -----------------------------------------------------------------------------------------

ocr_status_t ocr_head_remap_tensor(const OcrClassTensor *ct, const OcrClassMap *map, const float *old, int ndim,
                                   const int64_t *old_shape, float *out, const int64_t *new_shape) {
    const int ax = ct->axis;
    if (ax >= ndim) return ocr_set_error(OCR_ERR_FORMAT, "%s: %d dimensions, the classes are on axis %d", ct->name, ndim, ax);
    const int64_t n_chars_old = map->n_old - 1, n_chars_new = map->n_new - 1;
    const int64_t len_old = old_shape[ax], len_new = new_shape[ax];
    if (len_old != ct->pre + n_chars_old + ct->post || len_new != ct->pre + n_chars_new + ct->post)
        return ocr_set_error(OCR_ERR_FORMAT,
                             "%s: %lld entries in the weights and %lld in the model on its class axis; %d and %d "
                             "classes give %lld and %lld",
                             ct->name, (long long)len_old, (long long)len_new, map->n_old, map->n_new,
                             (long long)(ct->pre + n_chars_old + ct->post), (long long)(ct->pre + n_chars_new + ct->post));
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < ndim; d++) {
        if (d != ax && old_shape[d] != new_shape[d])
            return ocr_set_error(OCR_ERR_FORMAT, "%s: dimension %d is %lld in the weights, %lld in the model", ct->name,
                                 d, (long long)old_shape[d], (long long)new_shape[d]);
        if (d < ax) outer *= new_shape[d];
        if (d > ax) inner *= new_shape[d];
    }
    // The init rule for a character the weights do not have: the mean of the weights' character
    // entries (specials excluded), and for a logit bias that mean lowered by ln(1 + k), k the
    // number of new characters. The mean column gives a new class the logit of an "average
    // character" at every frame, below the best character where one is read and below the blank
    // elsewhere, so the pretrained model's greedy decoding is unchanged at the first step and the
    // new classes take no probability from the trained ones before their first gradient. The
    // ln(1 + k) keeps the k new classes' prior mass together below one average character's
    // (k · e^(−ln(1+k)) = k/(1+k) < 1). The head's own initialiser (uniform ±1/√in) would instead
    // give logits unrelated to the trained features' scale, which can beat trained characters on
    // some frames. New entries start equal to each other; CTC's gradient (p − target per class)
    // separates them at the first update where their targets differ. Embeddings (NRTR, SAR) take
    // the mean character embedding: a new token starts as an average character.
    double *mean = NULL;
    if (map->added > 0 && n_chars_old > 0) {
        mean = calloc((size_t)(outer * inner > 0 ? outer * inner : 1), sizeof *mean);
        if (!mean) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
        for (int64_t o = 0; o < outer; o++)
            for (int64_t c = ct->pre; c < ct->pre + n_chars_old; c++) {
                const float *s = old + (o * len_old + c) * inner;
                for (int64_t i = 0; i < inner; i++) mean[o * inner + i] += s[i];
            }
        const double shift = ct->bias ? log(1.0 + map->added) : 0.0;
        for (int64_t k = 0; k < outer * inner; k++) mean[k] = mean[k] / (double)n_chars_old - shift;
    }
    for (int64_t c = 0; c < len_new; c++) {
        int64_t from;
        if (c < ct->pre) {
            from = c;  // specials before the characters (the blank, NRTR's <pad> ... </s>)
        } else if (c >= ct->pre + n_chars_new) {
            from = c - n_chars_new + n_chars_old;  // specials after them, from the end (SAR's <UKN> ...)
        } else {
            int s = map->src[c - ct->pre + 1];
            from = s > 0 ? ct->pre + s - 1 : -1;
        }
        for (int64_t o = 0; o < outer; o++) {
            float *d = out + (o * len_new + c) * inner;
            if (from >= 0) {
                memcpy(d, old + (o * len_old + from) * inner, (size_t)inner * sizeof *d);
            } else if (mean) {
                for (int64_t i = 0; i < inner; i++) d[i] = (float)mean[o * inner + i];
            }
        }
    }
    free(mean);
    return OCR_OK;
}

// ---- the report ---------------------------------------------------------------------------------------

// Appends one class to a space-separated list (the space written <space>, long ones cut at a
// UTF-8 boundary); 0 when it did not fit.
static int list_add(char *buf, size_t cap, const char *cls) {
    char item[48];
    if (strcmp(cls, " ") == 0) {
        snprintf(item, sizeof item, "<space>");
    } else if (!cls[0]) {
        snprintf(item, sizeof item, "<empty>");
    } else if (strcmp(cls, "\t") == 0) {
        snprintf(item, sizeof item, "<tab>");
    } else {
        size_t n = strlen(cls);
        if (n > 16) {
            n = 16;
            while (n > 0 && ((unsigned char)cls[n] & 0xC0) == 0x80) n--;
            snprintf(item, sizeof item, "%.*s\xE2\x80\xA6", (int)n, cls);
        } else {
            snprintf(item, sizeof item, "%s", cls);
        }
    }
    size_t used = strlen(buf);
    if (used + strlen(item) + 2 > cap) return 0;
    snprintf(buf + used, cap - used, "%s%s", used ? " " : "", item);
    return 1;
}

void ocr_head_remap_report_fill(OcrHeadRemapReport *r, const OcrClassMap *map, const char *const *old_classes,
                                const char *const *new_classes) {
    r->old_classes = map->n_old;
    r->new_classes = map->n_new;
    r->kept = map->kept;
    r->added = map->added;
    r->dropped = map->dropped;
    r->moved = map->moved;
    r->kept_list[0] = r->added_list[0] = r->dropped_list[0] = '\0';
    int nk = 0, na = 0, nd = 0;
    for (int j = 1; j < map->n_new; j++) {
        if (map->src[j] >= 0 && nk < OCR_REMAP_LIST) nk += list_add(r->kept_list, sizeof r->kept_list, new_classes[j]);
        if (map->src[j] < 0 && na < OCR_REMAP_LIST) na += list_add(r->added_list, sizeof r->added_list, new_classes[j]);
    }
    for (int i = 1; i < map->n_old && nd < OCR_REMAP_LIST; i++)
        if (!map->kept_old[i]) nd += list_add(r->dropped_list, sizeof r->dropped_list, old_classes[i]);
}

static size_t put_list(char *buf, size_t cap, size_t u, const char *what, int total, const char *list) {
    if (u >= cap) return u;
    if (total == 0) return u + (size_t)snprintf(buf + u, cap - u, "\n  %s: none", what);
    if (total > OCR_REMAP_LIST)
        return u + (size_t)snprintf(buf + u, cap - u, "\n  %s (%d, the first %d): %s", what, total, OCR_REMAP_LIST, list);
    return u + (size_t)snprintf(buf + u, cap - u, "\n  %s (%d): %s", what, total, list);
}

const char *ocr_head_remap_describe(const OcrHeadRemapReport *r, char *buf, size_t cap) {
    size_t u = (size_t)snprintf(buf, cap,
                                "dictionary changed (%d -> %d classes; the weights' dictionary: %s): %d characters "
                                "kept (%d at another index), %d new, %d dropped; %d per-class tensors carried over by "
                                "character, new entries from the mean of the trained characters'",
                                r->old_classes, r->new_classes, r->dict_source, r->kept, r->moved, r->added, r->dropped,
                                r->tensors);
    u = put_list(buf, cap, u, "new", r->added, r->added_list);
    u = put_list(buf, cap, u, "dropped", r->dropped, r->dropped_list);
    put_list(buf, cap, u, "kept", r->kept, r->kept_list);
    return buf;
}

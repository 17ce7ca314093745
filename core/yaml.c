// YAML configs (see yaml.h): libyaml events -> cJSON, with PyYAML's YAML 1.1 scalar typing.
#include "core/yaml.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define YAML_MAX_DEPTH 128
#define YAML_MAX_NODES 1000000
#define TAG_PREFIX "tag:yaml.org,2002:"

// ---- scalar resolution (PyYAML's implicit resolvers, written out as scanners) ------------

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int eq_any(const char *s, size_t n, const char *const *words) {
    for (int i = 0; words[i]; i++)
        if (strlen(words[i]) == n && memcmp(s, words[i], n) == 0) return 1;
    return 0;
}

static int yaml_null(const char *s, size_t n) {
    static const char *const w[] = {"~", "null", "Null", "NULL", NULL};
    return n == 0 || eq_any(s, n, w);
}

// 1 true, 0 false, -1 not a boolean.
static int yaml_bool(const char *s, size_t n) {
    static const char *const t[] = {"yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON", NULL};
    static const char *const f[] = {"no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF", NULL};
    if (eq_any(s, n, t)) return 1;
    if (eq_any(s, n, f)) return 0;
    return -1;
}

// `(:[0-5]?[0-9])+` from position i to the end; returns 1 when it matches exactly.
static int sexagesimal_tail(const char *s, size_t n, size_t i) {
    if (i >= n || s[i] != ':') return 0;
    while (i < n && s[i] == ':') {
        i++;
        size_t d = 0;
        while (i + d < n && is_digit(s[i + d])) d++;
        if (d == 0 || d > 2 || (d == 2 && s[i] > '5')) return 0;
        i += d;
    }
    return i == n;
}

// Sexagesimal value of "a:b:c" (digits and colons only, underscores removed).
static double sexagesimal_value(const char *s, size_t n) {
    double v = 0, part = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ':') {
            v = v * 60 + part;
            part = 0;
        } else if (is_digit(s[i])) {
            part = part * 10 + (s[i] - '0');
        }
    }
    return v * 60 + part;
}

// Copies s without underscores into buf (NUL-terminated); 0 when it does not fit.
static int strip_underscores(const char *s, size_t n, char *buf, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '_') continue;
        if (k + 1 >= cap) return 0;
        buf[k++] = s[i];
    }
    buf[k] = '\0';
    return 1;
}

// PyYAML's int resolver and constructor. Returns 1 with *v set when s is an integer.
static int yaml_int(const char *s, size_t n, double *v, int *overflow) {
    *overflow = 0;
    size_t i = 0;
    int neg = 0;
    if (i < n && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
    if (i >= n) return 0;
    const char *b = s + i;
    size_t m = n - i;
    int base = 10;
    size_t start = 0;
    if (m >= 2 && b[0] == '0' && b[1] == 'b') {  // [-+]?0b[0-1_]+
        if (m == 2) return 0;
        for (size_t k = 2; k < m; k++)
            if (b[k] != '0' && b[k] != '1' && b[k] != '_') return 0;
        base = 2, start = 2;
    } else if (m >= 2 && b[0] == '0' && b[1] == 'x') {  // [-+]?0x[0-9a-fA-F_]+
        if (m == 2) return 0;
        for (size_t k = 2; k < m; k++) {
            char c = b[k];
            if (!(is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == '_')) return 0;
        }
        base = 16, start = 2;
    } else if (m >= 2 && b[0] == '0') {  // [-+]?0[0-7_]+
        for (size_t k = 1; k < m; k++)
            if (!((b[k] >= '0' && b[k] <= '7') || b[k] == '_')) return 0;
        base = 8, start = 1;
    } else if (m == 1 && b[0] == '0') {
        *v = 0;
        return 1;
    } else if (b[0] >= '1' && b[0] <= '9') {  // [1-9][0-9_]* or [1-9][0-9_]*(:[0-5]?[0-9])+
        size_t k = 1;
        while (k < m && (is_digit(b[k]) || b[k] == '_')) k++;
        if (k < m) {
            if (!sexagesimal_tail(b, m, k)) return 0;
            char buf[128];
            if (!strip_underscores(b, m, buf, sizeof buf)) return 0;
            double x = sexagesimal_value(buf, strlen(buf));
            if (x > 9007199254740992.0) *overflow = 1;
            *v = neg ? -x : x;
            return 1;
        }
    } else {
        return 0;
    }
    uint64_t x = 0;
    const uint64_t exact = UINT64_C(1) << 53;  // past 2^53 a double no longer holds every integer
    for (size_t k = start; k < m && !*overflow; k++) {
        char c = b[k];
        if (c == '_') continue;
        int d = is_digit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : c - 'A' + 10;
        x = x * (uint64_t)base + (uint64_t)d;
        if (x > exact) *overflow = 1;
    }
    *v = neg ? -(double)x : (double)x;
    return 1;
}

// PyYAML's float resolver and constructor. Returns 1 with *v set when s is a float.
static int yaml_float(const char *s, size_t n, double *v) {
    static const char *const infs[] = {".inf", ".Inf", ".INF", NULL};
    static const char *const nans[] = {".nan", ".NaN", ".NAN", NULL};
    if (eq_any(s, n, nans)) {
        *v = NAN;
        return 1;
    }
    size_t i = 0;
    int neg = 0;
    if (i < n && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
    if (eq_any(s + i, n - i, infs)) {
        *v = neg ? -INFINITY : INFINITY;
        return 1;
    }
    size_t j = i;
    if (j < n && s[j] == '.') {
        // \.[0-9][0-9_]*([eE][-+][0-9]+)?  (PyYAML allows no sign on this form)
        if (i != 0) return 0;
        j++;
        if (j >= n || !is_digit(s[j])) return 0;
        while (j < n && (is_digit(s[j]) || s[j] == '_')) j++;
    } else {
        if (j >= n || !is_digit(s[j])) return 0;
        while (j < n && (is_digit(s[j]) || s[j] == '_')) j++;
        if (j < n && s[j] == ':') {
            // [-+]?[0-9][0-9_]*(:[0-5]?[0-9])+\.[0-9_]*
            size_t k = j;
            while (k < n && s[k] != '.') k++;
            if (k >= n || !sexagesimal_tail(s, k, j)) return 0;
            for (size_t q = k + 1; q < n; q++)
                if (!(is_digit(s[q]) || s[q] == '_')) return 0;
            char buf[128];
            if (!strip_underscores(s + i, n - i, buf, sizeof buf)) return 0;
            char *dot = strchr(buf, '.');
            double frac = dot && dot[1] ? strtod(dot, NULL) : 0.0;
            double x = sexagesimal_value(buf, dot ? (size_t)(dot - buf) : strlen(buf)) + frac;
            *v = neg ? -x : x;
            return 1;
        }
        if (j >= n || s[j] != '.') return 0;
        j++;
        while (j < n && (is_digit(s[j]) || s[j] == '_')) j++;
    }
    if (j < n) {  // ([eE][-+][0-9]+)?
        if (s[j] != 'e' && s[j] != 'E') return 0;
        j++;
        if (j >= n || (s[j] != '-' && s[j] != '+')) return 0;
        j++;
        if (j >= n || !is_digit(s[j])) return 0;
        while (j < n && is_digit(s[j])) j++;
        if (j != n) return 0;
    }
    char buf[256];
    if (!strip_underscores(s, n, buf, sizeof buf)) return 0;
    *v = strtod(buf, NULL);
    return 1;
}

int ocr_yaml_is_yaml11_number_string(const char *text, size_t len) {
    if (!text || len == 0 || len > 64) return 0;
    double v;
    int of;
    if (yaml_int(text, len, &v, &of) || yaml_float(text, len, &v)) return 0;
    char buf[72];
    memcpy(buf, text, len);
    buf[len] = '\0';
    char *end;
    strtod(buf, &end);
    if (*end != '\0') return 0;
    // strtod also takes "inf", "nan" and hex floats; only decimal exponent forms are the quirk.
    for (size_t i = 0; i < len; i++)
        if (buf[i] == 'e' || buf[i] == 'E') return 1;
    return 0;
}

static cJSON *string_node(const char *text, size_t len) {
    char *s = malloc(len + 1);
    if (!s) return NULL;
    memcpy(s, text, len);
    s[len] = '\0';
    cJSON *n = cJSON_CreateString(s);
    free(s);
    return n;
}

cJSON *ocr_yaml_plain_scalar(const char *text, size_t len) {
    if (yaml_null(text, len)) return cJSON_CreateNull();
    int b = yaml_bool(text, len);
    if (b >= 0) return cJSON_CreateBool(b);
    double v;
    int overflow;
    if (yaml_int(text, len, &v, &overflow)) return overflow ? string_node(text, len) : cJSON_CreateNumber(v);
    if (yaml_float(text, len, &v)) return cJSON_CreateNumber(v);
    return string_node(text, len);
}

// ---- the event walker ---------------------------------------------------------------------

typedef struct {
    char *name;
    cJSON *node;  // the anchored node, owned by the tree being built
    int line, col;
} Anchor;

typedef struct {
    yaml_parser_t parser;
    const char *name;
    Anchor *anchors;
    int num_anchors, cap_anchors;
    long nodes;  // values created so far, alias copies included
    cJSON *kept; // merge (<<) values: anchors inside them must stay valid until the end
} Walker;

static ocr_status_t at(const Walker *w, yaml_mark_t m, const char *fmt, const char *a, const char *b) {
    char what[384];
    snprintf(what, sizeof what, fmt, a ? a : "", b ? b : "");
    return ocr_set_error(OCR_ERR_CONFIG, "%s:%d:%d: %s", w->name, (int)m.line + 1, (int)m.column + 1, what);
}

static ocr_status_t next_event(Walker *w, yaml_event_t *ev) {
    if (yaml_parser_parse(&w->parser, ev)) return OCR_OK;
    const yaml_parser_t *p = &w->parser;
    yaml_mark_t m = p->problem_mark;
    const char *problem = p->problem ? p->problem : "malformed YAML";
    if (p->error == YAML_MEMORY_ERROR) return ocr_set_error(OCR_ERR_OOM, "%s: out of memory parsing YAML", w->name);
    if (p->context)
        return ocr_set_error(OCR_ERR_CONFIG, "%s:%d:%d: invalid YAML: %s %s (line %d)", w->name, (int)m.line + 1,
                             (int)m.column + 1, problem, p->context, (int)p->context_mark.line + 1);
    return ocr_set_error(OCR_ERR_CONFIG, "%s:%d:%d: invalid YAML: %s", w->name, (int)m.line + 1, (int)m.column + 1,
                         problem);
}

static ocr_status_t oom(const Walker *w) {
    return ocr_set_error(OCR_ERR_OOM, "%s: out of memory reading YAML", w->name);
}

static long count_nodes(const cJSON *n) {
    long c = 1;
    for (const cJSON *k = n->child; k; k = k->next) c += count_nodes(k);
    return c;
}

static ocr_status_t add_nodes(Walker *w, long k, yaml_mark_t m) {
    w->nodes += k;
    if (w->nodes > YAML_MAX_NODES)
        return at(w, m, "more than 1000000 values (after expanding aliases): not a config", NULL, NULL);
    return OCR_OK;
}

static ocr_status_t add_anchor(Walker *w, const yaml_char_t *anchor, cJSON *node, yaml_mark_t m) {
    if (!anchor) return OCR_OK;
    for (int i = 0; i < w->num_anchors; i++)
        if (strcmp(w->anchors[i].name, (const char *)anchor) == 0) {
            char first[48];
            snprintf(first, sizeof first, "%d:%d", w->anchors[i].line, w->anchors[i].col);
            return at(w, m, "duplicate anchor &%s (first defined at %s)", (const char *)anchor, first);
        }
    if (w->num_anchors == w->cap_anchors) {
        int cap = w->cap_anchors ? w->cap_anchors * 2 : 16;
        Anchor *a = realloc(w->anchors, sizeof(Anchor) * (size_t)cap);
        if (!a) return oom(w);
        w->anchors = a;
        w->cap_anchors = cap;
    }
    char *name = strdup((const char *)anchor);
    if (!name) return oom(w);
    w->anchors[w->num_anchors++] = (Anchor){name, node, (int)m.line + 1, (int)m.column + 1};
    return OCR_OK;
}

static ocr_status_t scalar_node(Walker *w, const yaml_event_t *ev, cJSON **out) {
    const char *text = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    const char *tag = (const char *)ev->data.scalar.tag;
    int plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    if (memchr(text, '\0', len)) return at(w, ev->start_mark, "a NUL character inside a value", NULL, NULL);
    cJSON *n = NULL;
    if (!tag || strcmp(tag, "!") == 0) {
        n = plain && !tag ? ocr_yaml_plain_scalar(text, len) : string_node(text, len);
    } else if (strncmp(tag, TAG_PREFIX, strlen(TAG_PREFIX)) == 0) {
        const char *t = tag + strlen(TAG_PREFIX);
        double v;
        int overflow = 0;
        if (strcmp(t, "str") == 0) {
            n = string_node(text, len);
        } else if (strcmp(t, "null") == 0) {
            if (!yaml_null(text, len)) return at(w, ev->start_mark, "!!null value \"%.40s\" is not null", text, NULL);
            n = cJSON_CreateNull();
        } else if (strcmp(t, "bool") == 0) {
            int b = yaml_bool(text, len);
            if (b < 0) return at(w, ev->start_mark, "!!bool value \"%.40s\" is not a boolean", text, NULL);
            n = cJSON_CreateBool(b);
        } else if (strcmp(t, "int") == 0) {
            if (!yaml_int(text, len, &v, &overflow))
                return at(w, ev->start_mark, "!!int value \"%.40s\" is not an integer", text, NULL);
            if (overflow)
                return at(w, ev->start_mark, "integer %.40s is beyond +-2^53 (not exact as a number)", text, NULL);
            n = cJSON_CreateNumber(v);
        } else if (strcmp(t, "float") == 0) {
            if (!yaml_float(text, len, &v) && !yaml_int(text, len, &v, &overflow))
                return at(w, ev->start_mark, "!!float value \"%.40s\" is not a number", text, NULL);
            n = cJSON_CreateNumber(v);
        } else {
            return at(w, ev->start_mark, "unsupported tag %s on a value", tag, NULL);
        }
    } else {
        return at(w, ev->start_mark, "unsupported tag %s on a value", tag, NULL);
    }
    if (!n) return oom(w);
    if (plain && !tag && cJSON_IsString(n)) {
        // A plain integer beyond 2^53 resolves to a string above; say so rather than mistype it.
        double v;
        int overflow;
        if (yaml_int(text, len, &v, &overflow) && overflow) {
            cJSON_Delete(n);
            return at(w, ev->start_mark, "integer %.40s is beyond +-2^53 (not exact as a number)", text, NULL);
        }
    }
    *out = n;
    return OCR_OK;
}

static ocr_status_t parse_node(Walker *w, yaml_event_t *ev, cJSON **out, int depth);

// Reads the next event and parses the node it starts.
static ocr_status_t parse_next(Walker *w, cJSON **out, int depth, yaml_mark_t *mark, int *end,
                               yaml_event_type_t end_type) {
    yaml_event_t ev;
    OCR_TRY(next_event(w, &ev));
    if (mark) *mark = ev.start_mark;
    if (end && ev.type == end_type) {
        *end = 1;
        yaml_event_delete(&ev);
        return OCR_OK;
    }
    if (end) *end = 0;
    ocr_status_t st = parse_node(w, &ev, out, depth);
    yaml_event_delete(&ev);
    return st;
}

// Adds the keys of merge source `src` (a mapping) that `obj` lacks.
static ocr_status_t merge_into(Walker *w, cJSON *obj, const cJSON *src, yaml_mark_t m) {
    if (!cJSON_IsObject(src)) return at(w, m, "a merge key (<<) needs a mapping or a list of mappings", NULL, NULL);
    for (const cJSON *k = src->child; k; k = k->next) {
        if (cJSON_GetObjectItemCaseSensitive(obj, k->string)) continue;
        OCR_TRY(add_nodes(w, count_nodes(k), m));
        cJSON *copy = cJSON_Duplicate(k, 1);
        if (!copy || !cJSON_AddItemToObject(obj, k->string, copy)) {
            cJSON_Delete(copy);
            return oom(w);
        }
    }
    return OCR_OK;
}

static ocr_status_t parse_mapping(Walker *w, cJSON *obj, int depth) {
    const cJSON *sources[64];  // the merge sources in the order written
    int num_sources = 0;
    ocr_status_t st = OCR_OK;
    yaml_mark_t merge_mark = {0, 0, 0};
    for (;;) {
        yaml_event_t kev;
        if ((st = next_event(w, &kev)) != OCR_OK) break;
        if (kev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&kev);
            break;
        }
        if (kev.type != YAML_SCALAR_EVENT) {
            st = at(w, kev.start_mark, "a mapping key must be a plain value (not a list, mapping or alias)", NULL,
                    NULL);
            yaml_event_delete(&kev);
            break;
        }
        const char *key = (const char *)kev.data.scalar.value;
        size_t klen = kev.data.scalar.length;
        yaml_mark_t km = kev.start_mark;
        int plain = kev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        int is_merge = plain && klen == 2 && memcmp(key, "<<", 2) == 0;
        int null_key = plain && yaml_null(key, klen);
        int has_nul = memchr(key, '\0', klen) != NULL;
        char *kcopy = null_key || has_nul ? NULL : strndup(key, klen);
        yaml_event_delete(&kev);
        if (null_key || has_nul) {
            st = at(w, km, null_key ? "a mapping key is empty or null" : "a NUL character inside a key", NULL, NULL);
            break;
        }
        if (!kcopy) {
            st = oom(w);
            break;
        }
        cJSON *val = NULL;
        yaml_mark_t vm;
        st = parse_next(w, &val, depth + 1, &vm, NULL, YAML_NO_EVENT);
        if (st != OCR_OK) {
            free(kcopy);
            break;
        }
        if (is_merge) {
            free(kcopy);
            merge_mark = vm;
            cJSON_AddItemToArray(w->kept, val);
            int n = cJSON_IsArray(val) ? cJSON_GetArraySize(val) : 1;
            if (num_sources + n > (int)(sizeof sources / sizeof sources[0])) {
                st = at(w, vm, "more than 64 merge (<<) sources in one mapping", NULL, NULL);
                break;
            }
            if (cJSON_IsArray(val))
                for (const cJSON *s = val->child; s; s = s->next) sources[num_sources++] = s;
            else
                sources[num_sources++] = val;
            continue;
        }
        if (cJSON_GetObjectItemCaseSensitive(obj, kcopy)) {
            st = at(w, km, "key %s appears twice in this mapping", kcopy, NULL);
            free(kcopy);
            cJSON_Delete(val);
            break;
        }
        int ok = cJSON_AddItemToObject(obj, kcopy, val);
        free(kcopy);
        if (!ok) {
            cJSON_Delete(val);
            st = oom(w);
            break;
        }
    }
    // Explicit keys win over merged ones, and earlier merge sources over later ones (PyYAML).
    for (int i = 0; st == OCR_OK && i < num_sources; i++) st = merge_into(w, obj, sources[i], merge_mark);
    return st;
}

static ocr_status_t parse_node(Walker *w, yaml_event_t *ev, cJSON **out, int depth) {
    *out = NULL;
    if (depth > YAML_MAX_DEPTH) return at(w, ev->start_mark, "nested more than 128 levels deep", NULL, NULL);
    ocr_status_t st = OCR_OK;
    cJSON *n = NULL;
    const yaml_char_t *anchor = NULL;
    switch (ev->type) {
    case YAML_ALIAS_EVENT: {
        const char *name = (const char *)ev->data.alias.anchor;
        for (int i = w->num_anchors - 1; i >= 0; i--)
            if (strcmp(w->anchors[i].name, name) == 0) {
                OCR_TRY(add_nodes(w, count_nodes(w->anchors[i].node), ev->start_mark));
                n = cJSON_Duplicate(w->anchors[i].node, 1);
                if (!n) return oom(w);
                *out = n;
                return OCR_OK;
            }
        return at(w, ev->start_mark, "alias *%s refers to no anchor defined before it", name, NULL);
    }
    case YAML_SCALAR_EVENT:
        OCR_TRY(scalar_node(w, ev, &n));
        anchor = ev->data.scalar.anchor;
        break;
    case YAML_SEQUENCE_START_EVENT: {
        const char *tag = (const char *)ev->data.sequence_start.tag;
        if (tag && strcmp(tag, TAG_PREFIX "seq") != 0 && strcmp(tag, TAG_PREFIX "python/tuple") != 0)
            return at(w, ev->start_mark, "unsupported tag %s on a list", tag, NULL);
        anchor = ev->data.sequence_start.anchor;
        n = cJSON_CreateArray();
        if (!n) return oom(w);
        for (;;) {
            cJSON *item = NULL;
            int end;
            st = parse_next(w, &item, depth + 1, NULL, &end, YAML_SEQUENCE_END_EVENT);
            if (st != OCR_OK || end) break;
            cJSON_AddItemToArray(n, item);
        }
        break;
    }
    case YAML_MAPPING_START_EVENT: {
        const char *tag = (const char *)ev->data.mapping_start.tag;
        if (tag && strcmp(tag, TAG_PREFIX "map") != 0)
            return at(w, ev->start_mark, "unsupported tag %s on a mapping", tag, NULL);
        anchor = ev->data.mapping_start.anchor;
        n = cJSON_CreateObject();
        if (!n) return oom(w);
        st = parse_mapping(w, n, depth);
        break;
    }
    default:
        return at(w, ev->start_mark, "unexpected YAML event", NULL, NULL);
    }
    if (st == OCR_OK) st = add_nodes(w, 1, ev->start_mark);
    if (st == OCR_OK) st = add_anchor(w, anchor, n, ev->start_mark);
    if (st != OCR_OK) {
        cJSON_Delete(n);
        return st;
    }
    *out = n;
    return OCR_OK;
}

ocr_status_t ocr_yaml_parse(cJSON **out, const char *text, size_t len, const char *name) {
    *out = NULL;
    Walker w;
    memset(&w, 0, sizeof w);
    w.name = name ? name : "<yaml>";
    w.kept = cJSON_CreateArray();
    if (!w.kept) return oom(&w);
    if (!yaml_parser_initialize(&w.parser)) {
        cJSON_Delete(w.kept);
        return oom(&w);
    }
    yaml_parser_set_input_string(&w.parser, (const unsigned char *)text, len);
    cJSON *root = NULL;
    ocr_status_t st = OCR_OK;
    int docs = 0;
    yaml_event_t ev;
    for (int done = 0; st == OCR_OK && !done;) {
        if ((st = next_event(&w, &ev)) != OCR_OK) break;
        switch (ev.type) {
        case YAML_STREAM_END_EVENT: done = 1; break;
        case YAML_DOCUMENT_START_EVENT:
            if (++docs > 1) {
                st = at(&w, ev.start_mark, "a second YAML document (---) in a config; PaddleOCR's yaml.load reads "
                        "exactly one", NULL, NULL);
                break;
            }
            int end;
            yaml_mark_t m;
            st = parse_next(&w, &root, 0, &m, &end, YAML_DOCUMENT_END_EVENT);
            if (st == OCR_OK && end) {  // libyaml sends an empty scalar for an empty document, so not reached
                root = cJSON_CreateNull();
                if (!root) st = oom(&w);
            }
            break;
        default: break;
        }
        yaml_event_delete(&ev);
    }
    if (st == OCR_OK && !root) root = cJSON_CreateNull();  // an empty stream, as PyYAML's None
    if (st == OCR_OK && !root) st = oom(&w);
    for (int i = 0; i < w.num_anchors; i++) free(w.anchors[i].name);
    free(w.anchors);
    cJSON_Delete(w.kept);
    yaml_parser_delete(&w.parser);
    if (st != OCR_OK) {
        cJSON_Delete(root);
        return st;
    }
    *out = root;
    return OCR_OK;
}

#include "core/config.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/yaml.h"

typedef struct {
    char *path;  // the full key, e.g. "Global.debug"
    const char *reason;
} IgnoredKey;

struct OcrConfig {
    cJSON *root;
    char *source;
    // No-effect keys accepted so far (deduplicated). Recorded by ocr_config_check_keys, which
    // takes a const config: this is bookkeeping about the reading, not the config.
    IgnoredKey *ignored;
    int num_ignored, cap_ignored;
};

// Paths are short; a segment or a description that does not fit is truncated, never overrun.
#define PATH_MAX_LEN 512
#define DESC_MAX_LEN 160

static char *dup_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

const char *ocr_config_source(const OcrConfig *cfg) { return cfg->source; }
struct cJSON *ocr_config_root(OcrConfig *cfg) { return cfg->root; }

// ---- describing values for messages -------------------------------------------

static int is_whole(double v) { return isfinite(v) && floor(v) == v; }

// "a string \"abc\"", "an integer 10", "a number 0.5", "a boolean true", "null", "a list [1,2]", "an object".
static const char *describe(const cJSON *node, char *buf, size_t bufsize) {
    if (!node) {
        snprintf(buf, bufsize, "nothing");
    } else if (cJSON_IsString(node)) {
        const char *s = node->valuestring;
        size_t n = strlen(s);
        if (n > 60)
            snprintf(buf, bufsize, "a string \"%.57s...\"", s);
        else
            snprintf(buf, bufsize, "a string \"%s\"", s);
    } else if (cJSON_IsNumber(node)) {
        double v = node->valuedouble;
        if (is_whole(v) && fabs(v) < 1e15)
            snprintf(buf, bufsize, "an integer %.0f", v);
        else
            snprintf(buf, bufsize, "a number %.17g", v);
    } else if (cJSON_IsBool(node)) {
        snprintf(buf, bufsize, "a boolean %s", cJSON_IsTrue(node) ? "true" : "false");
    } else if (cJSON_IsNull(node)) {
        snprintf(buf, bufsize, "null");
    } else if (cJSON_IsArray(node) || cJSON_IsObject(node)) {
        char *text = cJSON_PrintUnformatted(node);
        const char *kind = cJSON_IsArray(node) ? "a list" : "an object";
        if (!text)
            snprintf(buf, bufsize, "%s", kind);
        else if (strlen(text) > 60)
            snprintf(buf, bufsize, "%s %.57s...", kind, text);
        else
            snprintf(buf, bufsize, "%s %s", kind, text);
        free(text);
    } else {
        snprintf(buf, bufsize, "an unknown JSON value");
    }
    return buf;
}

static ocr_status_t type_error(const OcrConfig *cfg, const char *path, const char *expected, const cJSON *found) {
    char d[DESC_MAX_LEN];
    // YAML 1.1 (PaddleOCR's PyYAML) reads 1e-4 as a string; say why a number became one.
    const char *hint = "";
    if (cJSON_IsString(found) && strstr(expected, "number") &&
        ocr_yaml_is_yaml11_number_string(found->valuestring, strlen(found->valuestring)))
        hint = " (YAML 1.1, as PaddleOCR's yaml.load, reads a number without a dot, or with an unsigned exponent, "
               "as a string: write e.g. 1.0e-4)";
    return ocr_set_error(OCR_ERR_CONFIG, "%s: %s must be %s, got %s%s", cfg->source, path, expected,
                         describe(found, d, sizeof d), hint);
}

// ---- path lookup ----------------------------------------------------------------

// A list index segment: all digits, no sign, and (to keep paths unambiguous) no leading zeros.
static int parse_index(const char *seg, size_t len, int *out) {
    if (len == 0 || len > 9) return 0;
    if (len > 1 && seg[0] == '0') return 0;
    int v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)seg[i])) return 0;
        v = v * 10 + (seg[i] - '0');
    }
    *out = v;
    return 1;
}

static cJSON *child_of(const cJSON *node, const char *seg, size_t len) {
    char key[PATH_MAX_LEN];
    if (len >= sizeof key) return NULL;
    memcpy(key, seg, len);
    key[len] = '\0';
    if (cJSON_IsObject(node)) return cJSON_GetObjectItemCaseSensitive(node, key);
    int idx;
    if (cJSON_IsArray(node) && parse_index(seg, len, &idx)) return cJSON_GetArrayItem(node, idx);
    return NULL;
}

// Walks a dotted path. *blocker (optional) receives the length of the prefix that names a
// present scalar/list through which the path cannot continue (0 when none), so getters can
// say "Optimizer.lr must be an object" instead of silently using a default.
static cJSON *lookup(const OcrConfig *cfg, const char *path, size_t *blocker) {
    if (blocker) *blocker = 0;
    cJSON *node = cfg->root;
    if (!path || !path[0]) return node;
    const char *seg = path;
    for (;;) {
        const char *dot = strchr(seg, '.');
        size_t len = dot ? (size_t)(dot - seg) : strlen(seg);
        cJSON *child = child_of(node, seg, len);
        if (!child) {
            // An out-of-range list index is just absent; a scalar in the way, or a key into a
            // list, means the config's shape differs from what the caller expects.
            int idx;
            int scalar = !cJSON_IsObject(node) && !cJSON_IsArray(node) && !cJSON_IsNull(node);
            int key_into_list = cJSON_IsArray(node) && !parse_index(seg, len, &idx);
            if (blocker && seg != path && (scalar || key_into_list)) *blocker = (size_t)(seg - path - 1);
            return NULL;
        }
        node = child;
        if (!dot) return node;
        seg = dot + 1;
    }
}

int ocr_config_has(const OcrConfig *cfg, const char *path) { return lookup(cfg, path, NULL) != NULL; }
const struct cJSON *ocr_config_node(const OcrConfig *cfg, const char *path) { return lookup(cfg, path, NULL); }

// Finds the node for a getter. Returns OCR_OK with *out = NULL when absent or null (null in
// a config means "not set", as PaddleOCR's YAML uses it), and an error when the path runs
// through something that is not an object.
static ocr_status_t find_for_get(const OcrConfig *cfg, const char *path, const cJSON **out) {
    size_t blocker;
    const cJSON *node = lookup(cfg, path, &blocker);
    if (!node && blocker) {
        char prefix[PATH_MAX_LEN];
        snprintf(prefix, sizeof prefix, "%.*s", (int)blocker, path);
        const cJSON *b = lookup(cfg, prefix, NULL);
        char d[DESC_MAX_LEN];
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s must be an object holding %s, got %s", cfg->source, prefix, path,
                             describe(b, d, sizeof d));
    }
    *out = (node && !cJSON_IsNull(node)) ? node : NULL;
    return OCR_OK;
}

// ---- loading --------------------------------------------------------------------

// Appends the path of `key` under `parent` ("a.b" + "c" or list index) into buf.
static void join_path(char *buf, size_t bufsize, const char *parent, const char *key) {
    if (parent[0])
        snprintf(buf, bufsize, "%s.%s", parent, key);
    else
        snprintf(buf, bufsize, "%s", key);
}

// cJSON keeps every duplicate; lookups would silently see only the first, so reject them.
static ocr_status_t check_duplicates(const char *source, const cJSON *node, const char *path) {
    char sub[PATH_MAX_LEN];
    if (cJSON_IsObject(node)) {
        for (const cJSON *a = node->child; a; a = a->next) {
            for (const cJSON *b = a->next; b; b = b->next)
                if (a->string && b->string && strcmp(a->string, b->string) == 0) {
                    join_path(sub, sizeof sub, path, a->string);
                    return ocr_set_error(OCR_ERR_CONFIG, "%s: key %s appears more than once", source, sub);
                }
            join_path(sub, sizeof sub, path, a->string ? a->string : "?");
            OCR_TRY(check_duplicates(source, a, sub));
        }
    } else if (cJSON_IsArray(node)) {
        int i = 0;
        for (const cJSON *a = node->child; a; a = a->next, i++) {
            char idx[16];
            snprintf(idx, sizeof idx, "%d", i);
            join_path(sub, sizeof sub, path, idx);
            OCR_TRY(check_duplicates(source, a, sub));
        }
    }
    return OCR_OK;
}

// Line and column (1-based, bytes) of offset `pos` in text.
static void line_col(const char *text, size_t pos, int *line, int *col) {
    int l = 1, c = 1;
    for (size_t i = 0; i < pos && text[i]; i++) {
        if (text[i] == '\n') {
            l++;
            c = 1;
        } else {
            c++;
        }
    }
    *line = l;
    *col = c;
}

// Parses JSON text; on failure the message names `name`, the line and column, and the
// offending line's start, e.g. `cfg.json:3:17: invalid JSON near: "epoch_num" 10,`.
static ocr_status_t parse_json(cJSON **out, const char *text, size_t len, const char *name) {
    *out = NULL;
    if (memchr(text, '\0', len)) {
        size_t pos = (size_t)((const char *)memchr(text, '\0', len) - text);
        int l, c;
        line_col(text, pos, &l, &c);
        return ocr_set_error(OCR_ERR_CONFIG, "%s:%d:%d: invalid JSON: NUL byte in the text", name, l, c);
    }
    size_t skip = (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) ? 3 : 0;  // UTF-8 byte order mark
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text + skip, &end, 1);
    if (root) {
        *out = root;
        return OCR_OK;
    }
    size_t pos = end && end >= text + skip ? (size_t)(end - text) : skip;
    if (pos > len) pos = len;
    int l, c;
    line_col(text, pos, &l, &c);
    int only_space = 1;
    for (size_t i = skip; i < len; i++)
        if (!isspace((unsigned char)text[i])) only_space = 0;
    if (only_space) return ocr_set_error(OCR_ERR_CONFIG, "%s: empty, expected a JSON object", name);
    // Show the rest of the offending line so the message is useful without opening the file.
    size_t ls = pos;
    while (ls > 0 && text[ls - 1] != '\n') ls--;
    size_t le = pos;
    while (le < len && text[le] != '\n' && text[le] != '\r') le++;
    while (ls < le && isspace((unsigned char)text[ls])) ls++;
    int show = (int)(le - ls) > 80 ? 80 : (int)(le - ls);
    if (pos >= len)
        return ocr_set_error(OCR_ERR_CONFIG, "%s:%d:%d: invalid JSON: unexpected end of text (unclosed { [ or \")",
                             name, l, c);
    return ocr_set_error(OCR_ERR_CONFIG, "%s:%d:%d: invalid JSON near: %.*s", name, l, c, show, text + ls);
}

// Takes ownership of root: checks it is an object without duplicate keys and wraps it.
static ocr_status_t make_config(OcrConfig **out, cJSON *root, const char *name, const char *kind) {
    if (!cJSON_IsObject(root)) {
        char d[DESC_MAX_LEN];
        describe(root, d, sizeof d);
        cJSON_Delete(root);
        if (strcmp(d, "null") == 0) return ocr_set_error(OCR_ERR_CONFIG, "%s: empty, expected a %s", name, kind);
        return ocr_set_error(OCR_ERR_CONFIG, "%s: the top level must be a %s, got %s", name, kind, d);
    }
    ocr_status_t st = check_duplicates(name, root, "");
    if (st != OCR_OK) {
        cJSON_Delete(root);
        return st;
    }
    OcrConfig *cfg = calloc(1, sizeof *cfg);
    if (cfg) cfg->source = dup_string(name);
    if (!cfg || !cfg->source) {
        free(cfg);
        cJSON_Delete(root);
        return ocr_set_error(OCR_ERR_OOM, "%s: out of memory", name);
    }
    cfg->root = root;
    *out = cfg;
    return OCR_OK;
}

ocr_status_t ocr_config_parse(OcrConfig **out, const char *json_text, const char *name) {
    *out = NULL;
    if (!name) name = "<config>";
    if (!json_text) return ocr_set_error(OCR_ERR_INVALID_ARG, "%s: no JSON text", name);
    cJSON *root;
    OCR_TRY(parse_json(&root, json_text, strlen(json_text), name));
    if (!cJSON_IsObject(root)) {
        char d[DESC_MAX_LEN];
        describe(root, d, sizeof d);
        cJSON_Delete(root);
        return ocr_set_error(OCR_ERR_CONFIG, "%s: the top level must be an object, got %s", name, d);
    }
    return make_config(out, root, name, "JSON object");
}

ocr_status_t ocr_config_clone(OcrConfig **out, const OcrConfig *cfg) {
    // Through the JSON text: the copy is exactly what a reload of the effective config gives.
    char *json = ocr_config_to_json(cfg);
    if (!json) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    ocr_status_t st = ocr_config_parse(out, json, ocr_config_source(cfg));
    free(json);
    return st;
}

ocr_status_t ocr_config_parse_yaml(OcrConfig **out, const char *text, size_t len, const char *name) {
    *out = NULL;
    if (!name) name = "<config>";
    if (!text) return ocr_set_error(OCR_ERR_INVALID_ARG, "%s: no YAML text", name);
    cJSON *root;
    OCR_TRY(ocr_yaml_parse(&root, text, len, name));
    return make_config(out, root, name, "mapping (Global:, Architecture:, ...)");
}

int ocr_config_path_is_yaml(const char *path) {
    const char *dot = path ? strrchr(path, '.') : NULL;
    return dot && (strcmp(dot, ".yml") == 0 || strcmp(dot, ".yaml") == 0 || strcmp(dot, ".YML") == 0 ||
                   strcmp(dot, ".YAML") == 0);
}

// JSON for .json and for text that starts with '{'; YAML for .yml/.yaml and everything else
// (PaddleOCR's configs are YAML whatever they are called).
static int text_is_json(const char *path, const char *text, size_t size) {
    if (ocr_config_path_is_yaml(path)) return 0;
    const char *dot = strrchr(path, '.');
    if (dot && strcmp(dot, ".json") == 0) return 1;
    size_t i = size >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    while (i < size && isspace((unsigned char)text[i])) i++;
    return i < size && text[i] == '{';
}

ocr_status_t ocr_config_load(OcrConfig **out, const char *path) {
    *out = NULL;
    char *text;
    size_t size;
    OCR_TRY(ocr_read_file(path, &text, &size));
    ocr_status_t st;
    if (!text_is_json(path, text, size)) {
        st = ocr_config_parse_yaml(out, text, size, path);
    } else if (strlen(text) != size) {
        // parse would stop at the NUL; report it with its position instead.
        cJSON *dummy;
        st = parse_json(&dummy, text, size, path);
    } else {
        st = ocr_config_parse(out, text, path);
    }
    free(text);
    return st;
}

void ocr_config_free(OcrConfig *cfg) {
    if (!cfg) return;
    for (int i = 0; i < cfg->num_ignored; i++) free(cfg->ignored[i].path);
    free(cfg->ignored);
    cJSON_Delete(cfg->root);
    free(cfg->source);
    free(cfg);
}

// ---- setting values ------------------------------------------------------------

// A flat list of plain items, as PaddleOCR's `-o Key=[a.txt, b.txt]` (a YAML flow sequence):
// "[" items separated by commas "]" where no item holds a bracket, brace or quote. Each item
// (trimmed) is a JSON scalar when it parses as one (numbers, true, false, null), otherwise a
// string. NULL when the text is not such a list (or memory runs out).
static cJSON *parse_plain_list(const char *p) {
    size_t n = strlen(p);
    while (n > 0 && isspace((unsigned char)p[n - 1])) n--;
    if (n < 2 || p[0] != '[' || p[n - 1] != ']') return NULL;
    for (size_t i = 1; i + 1 < n; i++)
        if (strchr("[]{}\"'", p[i])) return NULL;
    cJSON *list = cJSON_CreateArray();
    if (!list) return NULL;
    const char *q = p + 1, *end = p + n - 1;
    int empty = 1;
    for (const char *r = q; r < end; r++) empty &= isspace((unsigned char)*r) != 0;
    while (!empty && q <= end) {
        const char *comma = memchr(q, ',', (size_t)(end - q));
        const char *stop = comma ? comma : end;
        const char *a = q, *b = stop;
        while (a < b && isspace((unsigned char)*a)) a++;
        while (b > a && isspace((unsigned char)b[-1])) b--;
        if (a == b) {  // "[a,,b]" or a trailing comma: not a plain list
            cJSON_Delete(list);
            return NULL;
        }
        char *item = malloc((size_t)(b - a) + 1);
        if (item) {
            memcpy(item, a, (size_t)(b - a));
            item[b - a] = '\0';
        }
        cJSON *v = item ? cJSON_Parse(item) : NULL;
        if (item && (!v || cJSON_IsArray(v) || cJSON_IsObject(v))) {
            cJSON_Delete(v);
            v = cJSON_CreateString(item);
        }
        free(item);
        if (!v) {
            cJSON_Delete(list);
            return NULL;
        }
        cJSON_AddItemToArray(list, v);
        if (!comma) break;
        q = comma + 1;
    }
    return list;
}

// Value text -> JSON node: JSON when it parses as one; then a flat list of plain items
// ([a.txt, b.txt], see parse_plain_list); a plain string otherwise. Text that starts like a
// list, object or quoted string but is neither is an error (a typo in a
// list should not silently become a string).
static ocr_status_t parse_value(const OcrConfig *cfg, const char *path, const char *text, cJSON **out) {
    *out = NULL;
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithOpts(text, &end, 1);
    if (v) {
        *out = v;
        return OCR_OK;
    }
    const char *p = text;
    while (isspace((unsigned char)*p)) p++;
    if (*p == '[') {
        v = parse_plain_list(p);
        if (v) {
            *out = v;
            return OCR_OK;
        }
    }
    if (*p == '[' || *p == '{') {  // a YAML flow collection: [a, {b: 1}], {x: True}
        cJSON *y = NULL;
        ocr_status_t st = ocr_yaml_parse(&y, p, strlen(p), path);
        if (st == OCR_OK && (cJSON_IsArray(y) || cJSON_IsObject(y))) {
            *out = y;
            return OCR_OK;
        }
        cJSON_Delete(y);
    }
    if (*p == '[' || *p == '{' || *p == '"') {
        size_t pos = end && end >= text ? (size_t)(end - text) : 0;
        return ocr_set_error(OCR_ERR_CONFIG, "%s: value for %s is not valid JSON or YAML (error at character %zu): %s",
                             cfg->source, path, pos + 1, text);
    }
    // PaddleOCR's tools/program.py types each -o value with yaml.load: True, yes, ~, 0x10, ...
    const char *e = p + strlen(p);
    while (e > p && isspace((unsigned char)e[-1])) e--;
    v = ocr_yaml_plain_scalar(p, (size_t)(e - p));
    if (v && cJSON_IsString(v)) {
        cJSON_Delete(v);
        v = cJSON_CreateString(text);
    }
    if (!v) return ocr_set_error(OCR_ERR_OOM, "%s: out of memory setting %s", cfg->source, path);
    *out = v;
    return OCR_OK;
}

ocr_status_t ocr_config_set(OcrConfig *cfg, const char *path, const char *value_text) {
    if (!path || !path[0]) return ocr_set_error(OCR_ERR_CONFIG, "%s: cannot set a value at an empty key", cfg->source);
    if (strlen(path) >= PATH_MAX_LEN)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: key %.60s... is too long", cfg->source, path);
    if (!value_text) value_text = "null";
    // Validate every segment before changing anything, so a bad path leaves the config intact.
    for (const char *s = path;;) {
        const char *dot = strchr(s, '.');
        size_t len = dot ? (size_t)(dot - s) : strlen(s);
        if (len == 0) return ocr_set_error(OCR_ERR_CONFIG, "%s: key %s has an empty segment", cfg->source, path);
        if (!dot) break;
        s = dot + 1;
    }
    cJSON *value;
    OCR_TRY(parse_value(cfg, path, value_text, &value));
    // A value object is held to the file's rule: no key twice (otherwise the saved effective
    // config.json would not load again; found by fuzz/fuzz_config.c).
    ocr_status_t dup = check_duplicates(cfg->source, value, path);
    if (dup != OCR_OK) {
        cJSON_Delete(value);
        return dup;
    }

    cJSON *node = cfg->root;
    char key[PATH_MAX_LEN];
    const char *seg = path;
    for (;;) {
        const char *dot = strchr(seg, '.');
        size_t len = dot ? (size_t)(dot - seg) : strlen(seg);
        memcpy(key, seg, len);
        key[len] = '\0';
        int idx = -1;
        int is_list = cJSON_IsArray(node);
        if (is_list && (!parse_index(key, len, &idx) || idx >= cJSON_GetArraySize(node))) {
            cJSON_Delete(value);
            return ocr_set_error(OCR_ERR_CONFIG, "%s: cannot set %s: %.*s is a list of %d items and \"%s\" is not "
                                 "an index into it", cfg->source, path, (int)(seg - path - 1), path,
                                 cJSON_GetArraySize(node), key);
        }
        cJSON *child = is_list ? cJSON_GetArrayItem(node, idx) : cJSON_GetObjectItemCaseSensitive(node, key);
        if (!dot) {
            cJSON_bool ok;
            if (is_list)
                ok = cJSON_ReplaceItemInArray(node, idx, value);
            else if (child)
                ok = cJSON_ReplaceItemInObjectCaseSensitive(node, key, value);
            else
                ok = cJSON_AddItemToObject(node, key, value);
            if (!ok) {
                cJSON_Delete(value);
                return ocr_set_error(OCR_ERR_OOM, "%s: out of memory setting %s", cfg->source, path);
            }
            return OCR_OK;
        }
        if (!child || cJSON_IsNull(child)) {
            // Missing (or null) intermediate: create the object so "-o A.b.c=1" works on any config.
            cJSON *obj = cJSON_CreateObject();
            cJSON_bool ok = obj != NULL;
            if (ok) {
                if (is_list)
                    ok = cJSON_ReplaceItemInArray(node, idx, obj);
                else if (child)
                    ok = cJSON_ReplaceItemInObjectCaseSensitive(node, key, obj);
                else
                    ok = cJSON_AddItemToObject(node, key, obj);
                if (!ok) cJSON_Delete(obj);
            }
            if (!ok) {
                cJSON_Delete(value);
                return ocr_set_error(OCR_ERR_OOM, "%s: out of memory setting %s", cfg->source, path);
            }
            child = obj;
        } else if (!cJSON_IsObject(child) && !cJSON_IsArray(child)) {
            char d[DESC_MAX_LEN];
            describe(child, d, sizeof d);
            cJSON_Delete(value);
            return ocr_set_error(OCR_ERR_CONFIG, "%s: cannot set %s: %.*s is %s, not an object", cfg->source, path,
                                 (int)(dot - path), path, d);
        }
        node = child;
        seg = dot + 1;
    }
}

ocr_status_t ocr_config_apply_override(OcrConfig *cfg, const char *assignment) {
    if (!assignment) return ocr_set_error(OCR_ERR_INVALID_ARG, "override: no text");
    const char *eq = strchr(assignment, '=');
    if (!eq)
        return ocr_set_error(OCR_ERR_CONFIG, "override \"%s\" has no '=' (expected Key.path=value, e.g. "
                             "Global.epoch_num=10)", assignment);
    // Surrounding spaces in the key are never intended ("-o 'Global.epoch_num = 10'").
    const char *ks = assignment, *ke = eq;
    while (ks < ke && isspace((unsigned char)*ks)) ks++;
    while (ke > ks && isspace((unsigned char)ke[-1])) ke--;
    if (ke == ks)
        return ocr_set_error(OCR_ERR_CONFIG, "override \"%s\" has an empty key (expected Key.path=value)", assignment);
    if ((size_t)(ke - ks) >= PATH_MAX_LEN)
        return ocr_set_error(OCR_ERR_CONFIG, "override \"%.60s...\": key too long", assignment);
    char key[PATH_MAX_LEN];
    memcpy(key, ks, (size_t)(ke - ks));
    key[ke - ks] = '\0';
    ocr_status_t st = ocr_config_set(cfg, key, eq + 1);
    if (st != OCR_OK) return ocr_wrap_error(st, "override \"%s\"", assignment);
    return OCR_OK;
}

// ---- typed getters ------------------------------------------------------------

// int64 holds every whole double in [-2^63, 2^63).
static int fits_int64(double v) { return is_whole(v) && v >= -9223372036854775808.0 && v < 9223372036854775808.0; }

static ocr_status_t node_to_int(const OcrConfig *cfg, const char *path, const cJSON *n, int64_t *out) {
    if (!cJSON_IsNumber(n) || !is_whole(n->valuedouble)) return type_error(cfg, path, "an integer", n);
    if (!fits_int64(n->valuedouble)) return type_error(cfg, path, "an integer within the int64 range", n);
    *out = (int64_t)n->valuedouble;
    return OCR_OK;
}

ocr_status_t ocr_config_get_int(const OcrConfig *cfg, const char *path, int64_t def, int64_t *out) {
    const cJSON *n;
    OCR_TRY(find_for_get(cfg, path, &n));
    if (!n) {
        *out = def;
        return OCR_OK;
    }
    return node_to_int(cfg, path, n, out);
}

ocr_status_t ocr_config_get_double(const OcrConfig *cfg, const char *path, double def, double *out) {
    const cJSON *n;
    OCR_TRY(find_for_get(cfg, path, &n));
    if (!n) {
        *out = def;
        return OCR_OK;
    }
    if (!cJSON_IsNumber(n)) return type_error(cfg, path, "a number", n);
    *out = n->valuedouble;
    return OCR_OK;
}

ocr_status_t ocr_config_get_bool(const OcrConfig *cfg, const char *path, int def, int *out) {
    const cJSON *n;
    OCR_TRY(find_for_get(cfg, path, &n));
    if (!n) {
        *out = def;
        return OCR_OK;
    }
    if (!cJSON_IsBool(n)) return type_error(cfg, path, "a boolean (true or false)", n);
    *out = cJSON_IsTrue(n) ? 1 : 0;
    return OCR_OK;
}

ocr_status_t ocr_config_get_string(const OcrConfig *cfg, const char *path, const char *def, const char **out) {
    const cJSON *n;
    OCR_TRY(find_for_get(cfg, path, &n));
    if (!n) {
        *out = def;
        return OCR_OK;
    }
    if (!cJSON_IsString(n)) return type_error(cfg, path, "a string", n);
    *out = n->valuestring;
    return OCR_OK;
}

// Shared by the two list getters: walks a list (or a single number) and calls `take` per item.
static ocr_status_t get_number_list(const OcrConfig *cfg, const char *path, int max, int *count, int want_int,
                                    int64_t *iout, double *dout) {
    const cJSON *n;
    *count = 0;
    OCR_TRY(find_for_get(cfg, path, &n));
    if (!n) return OCR_OK;
    const char *expected = want_int ? "a list of integers" : "a list of numbers";
    if (cJSON_IsNumber(n)) {
        if (max < 1) return ocr_set_error(OCR_ERR_CONFIG, "%s: %s has 1 entry, at most %d allowed", cfg->source, path, max);
        if (want_int) {
            ocr_status_t st = node_to_int(cfg, path, n, &iout[0]);
            if (st != OCR_OK) return type_error(cfg, path, expected, n);
        } else {
            dout[0] = n->valuedouble;
        }
        *count = 1;
        return OCR_OK;
    }
    if (!cJSON_IsArray(n)) return type_error(cfg, path, expected, n);
    int size = cJSON_GetArraySize(n);
    if (size > max)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s has %d entries, at most %d allowed", cfg->source, path, size, max);
    int i = 0;
    for (const cJSON *e = n->child; e; e = e->next, i++) {
        char item[PATH_MAX_LEN + 16];
        snprintf(item, sizeof item, "%s.%d", path, i);
        if (want_int) {
            OCR_TRY(node_to_int(cfg, item, e, &iout[i]));
        } else {
            if (!cJSON_IsNumber(e)) return type_error(cfg, item, "a number", e);
            dout[i] = e->valuedouble;
        }
    }
    *count = size;
    return OCR_OK;
}

ocr_status_t ocr_config_get_int_list(const OcrConfig *cfg, const char *path, int64_t *out, int max, int *count) {
    return get_number_list(cfg, path, max, count, 1, out, NULL);
}

ocr_status_t ocr_config_get_double_list(const OcrConfig *cfg, const char *path, double *out, int max, int *count) {
    return get_number_list(cfg, path, max, count, 0, NULL, out);
}

static ocr_status_t missing(const OcrConfig *cfg, const char *path, const char *expected) {
    const char *how = lookup(cfg, path, NULL) ? "is null" : "is missing";
    return ocr_set_error(OCR_ERR_CONFIG, "%s: %s is required (%s) but %s", cfg->source, path, expected, how);
}

ocr_status_t ocr_config_require_int(const OcrConfig *cfg, const char *path, int64_t *out) {
    const cJSON *n;
    OCR_TRY(find_for_get(cfg, path, &n));
    if (!n) return missing(cfg, path, "an integer");
    return node_to_int(cfg, path, n, out);
}

ocr_status_t ocr_config_require_double(const OcrConfig *cfg, const char *path, double *out) {
    const cJSON *n;
    OCR_TRY(find_for_get(cfg, path, &n));
    if (!n) return missing(cfg, path, "a number");
    return ocr_config_get_double(cfg, path, 0.0, out);
}

ocr_status_t ocr_config_require_string(const OcrConfig *cfg, const char *path, const char **out) {
    const cJSON *n;
    OCR_TRY(find_for_get(cfg, path, &n));
    if (!n) return missing(cfg, path, "a string");
    return ocr_config_get_string(cfg, path, NULL, out);
}

ocr_status_t ocr_config_check_range(const OcrConfig *cfg, const char *path, double value, double lo, double hi) {
    if (value >= lo && value <= hi) return OCR_OK;  // NaN fails both comparisons
    return ocr_set_error(OCR_ERR_CONFIG, "%s: %s must be in [%.17g, %.17g], got %.17g", cfg->source, path, lo, hi,
                         value);
}

// ---- key validation -------------------------------------------------------------

int ocr_edit_distance(const char *a, const char *b) {
    if (!a) a = "";
    if (!b) b = "";
    size_t n = strlen(a), m = strlen(b);
    // One row of the DP table over b, updated in place left to right.
    int *row = malloc((m + 1) * sizeof *row);
    OCR_ASSERT(row != NULL, "edit distance of %zu-byte strings: out of memory", m);
    for (size_t j = 0; j <= m; j++) row[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        int diag = row[0];  // D[i-1][j-1]
        row[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int up = row[j];  // D[i-1][j]
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    int d = row[m];
    free(row);
    return d;
}

static const OcrNoEffectKey *g_no_effect;  // set once at start-up, before any thread reads configs

void ocr_config_set_no_effect_keys(const OcrNoEffectKey *table) { g_no_effect = table; }

// The table entry for `key` under `section_path`, or NULL.
static const OcrNoEffectKey *no_effect_entry(const char *section_path, const char *key) {
    for (const OcrNoEffectKey *e = g_no_effect; e && e->key; e++)
        if (strcmp(e->key, key) == 0 && fnmatch(e->section, section_path, 0) == 0) return e;
    return NULL;
}

// Records an accepted no-effect key once. Failing to record (OOM) only loses the listing.
static void record_ignored(const OcrConfig *cfg_const, const char *full, const char *reason) {
    OcrConfig *cfg = (OcrConfig *)cfg_const;  // bookkeeping about the reading (see struct OcrConfig)
    for (int i = 0; i < cfg->num_ignored; i++)
        if (strcmp(cfg->ignored[i].path, full) == 0) return;
    if (cfg->num_ignored == cfg->cap_ignored) {
        int cap = cfg->cap_ignored ? cfg->cap_ignored * 2 : 16;
        IgnoredKey *k = realloc(cfg->ignored, sizeof *k * (size_t)cap);
        if (!k) return;
        cfg->ignored = k;
        cfg->cap_ignored = cap;
    }
    char *p = dup_string(full);
    if (!p) return;
    cfg->ignored[cfg->num_ignored++] = (IgnoredKey){p, reason};
}

void ocr_config_record_ignored(const OcrConfig *cfg, const char *path, const char *reason) {
    record_ignored(cfg, path, reason);
}

int ocr_config_num_ignored(const OcrConfig *cfg) { return cfg->num_ignored; }

const char *ocr_config_ignored(const OcrConfig *cfg, int i, const char **reason) {
    if (i < 0 || i >= cfg->num_ignored) return NULL;
    if (reason) *reason = cfg->ignored[i].reason;
    return cfg->ignored[i].path;
}

ocr_status_t ocr_config_check_keys(const OcrConfig *cfg, const char *section_path, const char *const *known) {
    if (!section_path) section_path = "";
    const cJSON *section;
    OCR_TRY(find_for_get(cfg, section_path, &section));
    if (!section) return OCR_OK;
    if (!cJSON_IsObject(section)) return type_error(cfg, section_path[0] ? section_path : "the top level", "an object", section);
    for (const cJSON *item = section->child; item; item = item->next) {
        const char *key = item->string;
        int found = 0;
        for (int i = 0; known && known[i]; i++)
            if (strcmp(key, known[i]) == 0) found = 1;
        if (found) continue;
        char full[PATH_MAX_LEN];
        join_path(full, sizeof full, section_path, key);
        const OcrNoEffectKey *ne = no_effect_entry(section_path, key);
        if (ne) {
            record_ignored(cfg, full, ne->reason);
            continue;
        }
        // Suggest the closest known key when it is plausibly a typo; otherwise list them all.
        const char *best = NULL;
        int best_d = 1 << 30;
        for (int i = 0; known && known[i]; i++) {
            int d = ocr_edit_distance(key, known[i]);
            if (d < best_d) best_d = d, best = known[i];
        }
        // The accepted no-effect keys of this section are candidates too (print_mem_inf).
        for (const OcrNoEffectKey *e = g_no_effect; e && e->key; e++) {
            if (fnmatch(e->section, section_path, 0) != 0) continue;
            int d = ocr_edit_distance(key, e->key);
            if (d < best_d) best_d = d, best = e->key;
        }
        int len = (int)strlen(key);
        int limit = len / 3 > 2 ? len / 3 : 2;
        if (best && best_d <= limit)
            return ocr_set_error(OCR_ERR_CONFIG, "%s: unknown key %s (did you mean %s?)", cfg->source, full, best);
        char list[1024] = "";
        size_t used = 0;
        for (int i = 0; known && known[i] && used + 1 < sizeof list; i++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", known[i]);
        return ocr_set_error(OCR_ERR_CONFIG, "%s: unknown key %s (known keys: %s)", cfg->source, full,
                             list[0] ? list : "none");
    }
    return OCR_OK;
}

char *ocr_config_to_json(const OcrConfig *cfg) { return cJSON_Print(cfg->root); }

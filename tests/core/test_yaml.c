// The YAML reader: PyYAML's typing of every scalar form (against what PyYAML itself reads,
// tests/core/data/*.json from tools/yaml_reference.py), anchors, aliases and merge keys, the
// errors (file:line:column), the limits, and YAML through the config API.
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/fileio.h"
#include "core/yaml.h"
#include "tests/common/test_util.h"

static char *read_source(const char *rel, size_t *size) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", OCR_SOURCE_DIR, rel);
    char *text = NULL;
    ck_assert_msg(ocr_read_file(path, &text, size) == OCR_OK, "%s", ocr_last_error());
    return text;
}

// First difference between two trees, as a path, into buf ("" when equal).
static void first_difference(const cJSON *a, const cJSON *b, const char *path, char *buf, size_t cap) {
    if (buf[0]) return;
    if (!a || !b || (a->type & 0xFF) != (b->type & 0xFF)) {
        snprintf(buf, cap, "%s: different kinds", path);
        return;
    }
    if (cJSON_IsNumber(a) && a->valuedouble != b->valuedouble) {
        snprintf(buf, cap, "%s: %.17g vs %.17g", path, a->valuedouble, b->valuedouble);
        return;
    }
    if (cJSON_IsString(a) && strcmp(a->valuestring, b->valuestring) != 0) {
        snprintf(buf, cap, "%s: \"%s\" vs \"%s\"", path, a->valuestring, b->valuestring);
        return;
    }
    if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b) && (cJSON_IsArray(a) || cJSON_IsObject(a))) {
        snprintf(buf, cap, "%s: %d vs %d entries", path, cJSON_GetArraySize(a), cJSON_GetArraySize(b));
        return;
    }
    int i = 0;
    for (const cJSON *x = a->child; x && !buf[0]; x = x->next, i++) {
        char sub[512];
        const cJSON *y = cJSON_IsObject(a) ? cJSON_GetObjectItemCaseSensitive(b, x->string) : cJSON_GetArrayItem(b, i);
        if (cJSON_IsObject(a))
            snprintf(sub, sizeof sub, "%s.%s", path, x->string);
        else
            snprintf(sub, sizeof sub, "%s.%d", path, i);
        first_difference(x, y, sub, buf, cap);
    }
}

static void check_against_pyyaml(const char *stem) {
    char rel[256];
    size_t ys, js;
    snprintf(rel, sizeof rel, "tests/core/data/%s.yml", stem);
    char *yml = read_source(rel, &ys);
    snprintf(rel, sizeof rel, "tests/core/data/%s.json", stem);
    char *json = read_source(rel, &js);
    cJSON *mine = NULL;
    ck_assert_msg(ocr_yaml_parse(&mine, yml, ys, stem) == OCR_OK, "%s", ocr_last_error());
    cJSON *ref = cJSON_Parse(json);
    ck_assert_msg(ref != NULL, "reference %s.json does not parse", stem);
    char diff[1024] = "";
    first_difference(mine, ref, stem, diff, sizeof diff);
    ck_assert_msg(!diff[0], "differs from PyYAML at %s", diff);
    ck_assert(cJSON_Compare(mine, ref, 1));
    cJSON_Delete(mine);
    cJSON_Delete(ref);
    free(yml);
    free(json);
}

START_TEST(test_scalars_match_pyyaml) { check_against_pyyaml("yaml_scalars"); }
END_TEST

START_TEST(test_anchors_match_pyyaml) { check_against_pyyaml("yaml_anchors"); }
END_TEST

START_TEST(test_paddle_config_matches_pyyaml) { check_against_pyyaml("paddle_ctc_rec"); }
END_TEST

static cJSON *parse_ok(const char *text) {
    cJSON *root = NULL;
    ck_assert_msg(ocr_yaml_parse(&root, text, strlen(text), "t.yml") == OCR_OK, "%s: %s", text, ocr_last_error());
    return root;
}

START_TEST(test_special_floats) {
    cJSON *r = parse_ok("a: .inf\nb: -.Inf\nc: +.INF\nd: .NaN\ne: .nan\nf: nan\ng: inf\n");
    ck_assert(isinf(cJSON_GetObjectItem(r, "a")->valuedouble) && cJSON_GetObjectItem(r, "a")->valuedouble > 0);
    ck_assert(isinf(cJSON_GetObjectItem(r, "b")->valuedouble) && cJSON_GetObjectItem(r, "b")->valuedouble < 0);
    ck_assert(isinf(cJSON_GetObjectItem(r, "c")->valuedouble));
    ck_assert(isnan(cJSON_GetObjectItem(r, "d")->valuedouble));
    ck_assert(isnan(cJSON_GetObjectItem(r, "e")->valuedouble));
    ck_assert(cJSON_IsString(cJSON_GetObjectItem(r, "f")));  // PyYAML: only the dotted forms
    ck_assert(cJSON_IsString(cJSON_GetObjectItem(r, "g")));
    cJSON_Delete(r);
}
END_TEST

START_TEST(test_plain_scalar_helper) {
    struct {
        const char *text;
        int type;
        double value;
    } cases[] = {
        {"True", cJSON_True, 0},   {"off", cJSON_False, 0},  {"~", cJSON_NULL, 0},    {"", cJSON_NULL, 0},
        {"0x10", cJSON_Number, 16}, {"010", cJSON_Number, 8}, {"1.5", cJSON_Number, 1.5}, {"1e5", cJSON_String, 0},
        {"O2", cJSON_String, 0},   {"cpu", cJSON_String, 0}, {"-7", cJSON_Number, -7},
        {"9007199254740993", cJSON_String, 0},  // beyond 2^53: not a number here
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cJSON *v = ocr_yaml_plain_scalar(cases[i].text, strlen(cases[i].text));
        ck_assert_msg(v && (v->type & 0xFF) == cases[i].type, "\"%s\": type %d, want %d", cases[i].text,
                      v ? v->type & 0xFF : -1, cases[i].type);
        if (cases[i].type == cJSON_Number) ck_assert_double_eq(v->valuedouble, cases[i].value);
        cJSON_Delete(v);
    }
    ck_assert(ocr_yaml_is_yaml11_number_string("1e-4", 4));
    ck_assert(ocr_yaml_is_yaml11_number_string("1.0E4", 5));
    ck_assert(!ocr_yaml_is_yaml11_number_string("1.0e-4", 6));  // a float already
    ck_assert(!ocr_yaml_is_yaml11_number_string("inf", 3));
    ck_assert(!ocr_yaml_is_yaml11_number_string("abc", 3));
}
END_TEST

START_TEST(test_merge_precedence) {
    // Explicit keys win whatever their position; earlier merge sources win over later ones.
    cJSON *r = parse_ok("a: &a {x: 1, y: 1}\nb: &b {x: 2, z: 2}\n"
                        "m:\n  x: 0\n  <<: [*a, *b]\n"
                        "n:\n  <<: [*b, *a]\n");
    const cJSON *m = cJSON_GetObjectItem(r, "m"), *n = cJSON_GetObjectItem(r, "n");
    ck_assert_double_eq(cJSON_GetObjectItem(m, "x")->valuedouble, 0);
    ck_assert_double_eq(cJSON_GetObjectItem(m, "y")->valuedouble, 1);
    ck_assert_double_eq(cJSON_GetObjectItem(m, "z")->valuedouble, 2);
    ck_assert_double_eq(cJSON_GetObjectItem(n, "x")->valuedouble, 2);
    ck_assert_int_eq(cJSON_GetArraySize(n), 3);
    // An alias is a copy: changing one does not change the other.
    cJSON_SetNumberHelper(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "a"), "x"), 9);
    ck_assert_double_eq(cJSON_GetObjectItem(m, "y")->valuedouble, 1);
    ck_assert_double_eq(cJSON_GetObjectItem(n, "y")->valuedouble, 1);
    cJSON_Delete(r);
    // An anchor defined inside a merge value stays usable afterwards.
    r = parse_ok("m:\n  <<: &in {k: 5}\nq: *in\n");
    ck_assert_double_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "q"), "k")->valuedouble, 5);
    cJSON_Delete(r);
}
END_TEST

// The parse fails with a message holding every fragment (NULL: unused).
static void parse_fails(const char *text, const char *a, const char *b) {
    cJSON *root = (cJSON *)1;
    ocr_status_t st = ocr_yaml_parse(&root, text, strlen(text), "bad.yml");
    ck_assert_msg(st == OCR_ERR_CONFIG, "\"%s\" parsed (status %d)", text, st);
    ck_assert(root == NULL);
    const char *msg = ocr_last_error();
    if (a) ck_assert_msg(strstr(msg, a) != NULL, "message \"%s\" lacks \"%s\"", msg, a);
    if (b) ck_assert_msg(strstr(msg, b) != NULL, "message \"%s\" lacks \"%s\"", msg, b);
}

START_TEST(test_errors_name_line_and_column) {
    parse_fails("Global:\n  a: 1\n b: 2\n", "bad.yml:3:", "invalid YAML");
    parse_fails("a: [1, 2\n", "bad.yml:", "invalid YAML");
    parse_fails("Global:\n  epoch_num: 1\n  epoch_num: 2\n", "bad.yml:3:3:", "epoch_num appears twice");
    parse_fails("a: *nowhere\n", "bad.yml:1:4:", "no anchor");
    parse_fails("a: &x 1\nb: &x 2\n", "bad.yml:2:4:", "duplicate anchor &x (first defined at 1:4)");
    parse_fails("a: 1\n---\nb: 2\n", "bad.yml:2:1:", "second YAML document");
    parse_fails("? [1, 2]\n: v\n", "bad.yml:1:3:", "mapping key must be a plain value");
    parse_fails("a: !!python/object:os.system x\n", "bad.yml:1:4:", "unsupported tag");
    parse_fails("a: !!binary aGk=\n", "unsupported tag", NULL);
    parse_fails("a: !!int abc\n", "not an integer", NULL);
    parse_fails("a: 18446744073709551616\n", "bad.yml:1:4:", "beyond +-2^53");
    parse_fails("a: \"x\\0y\"\n", "NUL", NULL);
    parse_fails("~: v\n", "empty or null", NULL);
    parse_fails("a:\n  <<: 5\n", "merge key", NULL);
    parse_fails("\tkey: 1\n", "bad.yml:1:", NULL);  // tabs cannot indent
}
END_TEST

START_TEST(test_limits) {
    // 130 levels of nesting.
    char deep[600] = "";
    for (int i = 0; i < 130; i++) strcat(deep, "[");
    for (int i = 0; i < 130; i++) strcat(deep, "]");
    parse_fails(deep, "nested more than 128", NULL);
    // "Billion laughs": 10 levels of 10 aliases each would be 10^10 values.
    char bomb[2048];
    size_t o = (size_t)snprintf(bomb, sizeof bomb, "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for (int i = 1; i < 10; i++) {
        o += (size_t)snprintf(bomb + o, sizeof bomb - o, "a%d: &a%d [", i, i);
        for (int k = 0; k < 10; k++) o += (size_t)snprintf(bomb + o, sizeof bomb - o, "%s*a%d", k ? ", " : "", i - 1);
        o += (size_t)snprintf(bomb + o, sizeof bomb - o, "]\n");
    }
    parse_fails(bomb, "more than 1000000 values", NULL);
    // Below the limit the same construction works (4 levels: 10^4 values).
    char small[1024];
    o = (size_t)snprintf(small, sizeof small, "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for (int i = 1; i < 4; i++) {
        o += (size_t)snprintf(small + o, sizeof small - o, "a%d: &a%d [", i, i);
        for (int k = 0; k < 10; k++) o += (size_t)snprintf(small + o, sizeof small - o, "%s*a%d", k ? ", " : "", i - 1);
        o += (size_t)snprintf(small + o, sizeof small - o, "]\n");
    }
    cJSON *r = parse_ok(small);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetArrayItem(cJSON_GetObjectItem(r, "a3"), 9)), 10);
    cJSON_Delete(r);
}
END_TEST

START_TEST(test_buffer_not_nul_terminated) {
    // Only len bytes are read: the text after them (here an invalid line) is never seen.
    const char text[] = "a: 1\nb: [2, 3]\n}}} not yaml";
    cJSON *r = NULL;
    size_t len = strlen("a: 1\nb: [2, 3]\n");
    ck_assert_msg(ocr_yaml_parse(&r, text, len, "buf") == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(r, "b")), 2);
    cJSON_Delete(r);
    // Empty input: a null document, as PyYAML's None.
    ck_assert_int_eq(ocr_yaml_parse(&r, "", 0, "empty"), OCR_OK);
    ck_assert(cJSON_IsNull(r));
    cJSON_Delete(r);
}
END_TEST

// ---- through the config API -----------------------------------------------------------

static char *write_tmp(const char *name, const char *text) {
    char *dir = ocr_test_tmpdir("yaml");
    size_t n = strlen(dir) + strlen(name) + 2;
    char *path = malloc(n);
    snprintf(path, n, "%s/%s", dir, name);
    free(dir);
    ck_assert(ocr_write_file_atomic(path, text, strlen(text)) == OCR_OK);
    return path;
}

START_TEST(test_config_load_yaml_equals_json) {
    // The same config as YAML (our fixture) and as JSON (what PyYAML reads from it).
    char yml[1024], json[1024];
    snprintf(yml, sizeof yml, "%s/tests/core/data/paddle_ctc_rec.yml", OCR_SOURCE_DIR);
    snprintf(json, sizeof json, "%s/tests/core/data/paddle_ctc_rec.json", OCR_SOURCE_DIR);
    OcrConfig *a, *b;
    ck_assert_msg(ocr_config_load(&a, yml) == OCR_OK, "%s", ocr_last_error());
    ck_assert_msg(ocr_config_load(&b, json) == OCR_OK, "%s", ocr_last_error());
    ck_assert(cJSON_Compare(ocr_config_root(a), ocr_config_root(b), 1));
    // Typed getters on YAML values: aliases, booleans in both spellings, nulls, floats.
    int64_t v;
    double d;
    int flag;
    const char *s;
    ck_assert_int_eq(ocr_config_get_int(a, "Train.dataset.transforms.1.RecConAug.max_text_length", 0, &v), OCR_OK);
    ck_assert_int_eq(v, 25);
    ck_assert_int_eq(ocr_config_get_int(a, "Eval.loader.batch_size_per_card", 0, &v), OCR_OK);
    ck_assert_int_eq(v, 128);
    ck_assert_int_eq(ocr_config_get_int(a, "Eval.loader.num_workers", 0, &v), OCR_OK);  // merged
    ck_assert_int_eq(v, 4);
    ck_assert_int_eq(ocr_config_get_bool(a, "Eval.loader.shuffle", 1, &flag), OCR_OK);  // explicit beats merge
    ck_assert_int_eq(flag, 0);
    ck_assert_int_eq(ocr_config_get_bool(a, "Global.use_gpu", 0, &flag), OCR_OK);  // True
    ck_assert_int_eq(flag, 1);
    ck_assert_int_eq(ocr_config_get_double(a, "Optimizer.regularizer.factor", 0, &d), OCR_OK);
    ck_assert_double_eq(d, 3.0e-05);
    ck_assert_int_eq(ocr_config_get_string(a, "Global.pretrained_model", "none", &s), OCR_OK);  // empty: null
    ck_assert_str_eq(s, "none");
    ck_assert_int_eq(ocr_config_get_string(a, "Eval.dataset.transforms.0.DecodeImage.img_mode", "", &s), OCR_OK);
    ck_assert_str_eq(s, "BGR");
    ocr_config_free(a);
    ocr_config_free(b);
}
END_TEST

START_TEST(test_config_yaml_errors_and_hints) {
    char *p = write_tmp("cfg.yml", "Global:\n  epoch_num: 2\nOptimizer:\n  lr:\n    learning_rate: 1e-4\n");
    OcrConfig *cfg;
    ck_assert_int_eq(ocr_config_load(&cfg, p), OCR_OK);
    double d;
    // PyYAML reads 1e-4 as a string; the type error says why.
    ck_assert_int_eq(ocr_config_get_double(cfg, "Optimizer.lr.learning_rate", 0, &d), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "Optimizer.lr.learning_rate must be a number") &&
                      strstr(ocr_last_error(), "write e.g. 1.0e-4"),
                  "%s", ocr_last_error());
    ocr_config_free(cfg);
    ocr_test_remove_tree(p);
    free(p);

    p = write_tmp("bad.yml", "Global:\n  epoch_num: 2\n   x: 1\n");
    ck_assert_int_eq(ocr_config_load(&cfg, p), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "bad.yml:3:") != NULL, "%s", ocr_last_error());
    ocr_test_remove_tree(p);
    free(p);

    p = write_tmp("list.yaml", "- a\n- b\n");
    ck_assert_int_eq(ocr_config_load(&cfg, p), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "top level must be a mapping") != NULL, "%s", ocr_last_error());
    ocr_test_remove_tree(p);
    free(p);

    p = write_tmp("empty.yml", "# nothing\n");
    ck_assert_int_eq(ocr_config_load(&cfg, p), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "empty, expected a mapping") != NULL, "%s", ocr_last_error());
    ocr_test_remove_tree(p);
    free(p);

    // Any other extension: JSON when it starts with '{', else YAML.
    p = write_tmp("cfg.txt", "Global: {epoch_num: 3}\n");
    ck_assert_msg(ocr_config_load(&cfg, p) == OCR_OK, "%s", ocr_last_error());
    int64_t v;
    ck_assert_int_eq(ocr_config_get_int(cfg, "Global.epoch_num", 0, &v), OCR_OK);
    ck_assert_int_eq(v, 3);
    ocr_config_free(cfg);
    ocr_test_remove_tree(p);
    free(p);
}
END_TEST

static Suite *yaml_suite(void) {
    Suite *s = suite_create("core_yaml");
    TCase *tc = tcase_create("yaml");
    tcase_add_test(tc, test_scalars_match_pyyaml);
    tcase_add_test(tc, test_anchors_match_pyyaml);
    tcase_add_test(tc, test_paddle_config_matches_pyyaml);
    tcase_add_test(tc, test_special_floats);
    tcase_add_test(tc, test_plain_scalar_helper);
    tcase_add_test(tc, test_merge_precedence);
    tcase_add_test(tc, test_errors_name_line_and_column);
    tcase_add_test(tc, test_limits);
    tcase_add_test(tc, test_buffer_not_nul_terminated);
    tcase_add_test(tc, test_config_load_yaml_equals_json);
    tcase_add_test(tc, test_config_yaml_errors_and_hints);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(yaml_suite()); }

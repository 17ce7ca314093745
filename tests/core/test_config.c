// Configuration: typed getters, messages, overrides, key checks, parse errors, round trip.
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/config.h"
#include "core/fileio.h"
#include "tests/common/test_util.h"

static const char *kConfig =
    "{\n"
    "  \"Global\": {\n"
    "    \"epoch_num\": 10,\n"
    "    \"name\": \"ten\",\n"
    "    \"lr\": 0.001,\n"
    "    \"use_gpu\": true,\n"
    "    \"big\": 1e20,\n"
    "    \"half\": 1.5,\n"
    "    \"neg\": -7,\n"
    "    \"checkpoints\": null,\n"
    "    \"image_shape\": [3, 48, 320],\n"
    "    \"mean\": [0.5, 0.25],\n"
    "    \"mixed\": [1, \"two\", 3],\n"
    "    \"scalar_list\": 4\n"
    "  },\n"
    "  \"Optimizer\": {\"name\": \"Adam\", \"lr\": 0.0005},\n"
    "  \"Train\": {\n"
    "    \"dataset\": {\n"
    "      \"label_file_list\": [\"a.txt\", \"b.txt\"],\n"
    "      \"transforms\": [\n"
    "        {\"DecodeImage\": {\"img_mode\": \"BGR\", \"channel_first\": false}},\n"
    "        {\"RecResizeImg\": {\"image_shape\": [3, 48, 320]}}\n"
    "      ]\n"
    "    }\n"
    "  }\n"
    "}\n";

static OcrConfig *load_default(void) {
    OcrConfig *cfg = NULL;
    ocr_status_t st = ocr_config_parse(&cfg, kConfig, "config.json");
    ck_assert_msg(st == OCR_OK, "parse: %s", ocr_last_error());
    return cfg;
}

// The last error mentions every one of the given fragments.
static void assert_error_has(const char *a, const char *b, const char *c, const char *d) {
    const char *msg = ocr_last_error();
    const char *parts[4] = {a, b, c, d};
    for (int i = 0; i < 4; i++)
        if (parts[i]) ck_assert_msg(strstr(msg, parts[i]) != NULL, "message \"%s\" lacks \"%s\"", msg, parts[i]);
}

// ---- getters ------------------------------------------------------------------------

START_TEST(test_get_int) {
    OcrConfig *cfg = load_default();
    int64_t v = -1;
    ck_assert_int_eq(ocr_config_get_int(cfg, "Global.epoch_num", 5, &v), OCR_OK);
    ck_assert_int_eq(v, 10);
    ck_assert_int_eq(ocr_config_get_int(cfg, "Global.neg", 5, &v), OCR_OK);
    ck_assert_int_eq(v, -7);
    ck_assert_int_eq(ocr_config_get_int(cfg, "Global.missing", 5, &v), OCR_OK);
    ck_assert_int_eq(v, 5);
    ck_assert_int_eq(ocr_config_get_int(cfg, "Nope.missing", 6, &v), OCR_OK);
    ck_assert_int_eq(v, 6);
    ck_assert_int_eq(ocr_config_get_int(cfg, "Global.checkpoints", 8, &v), OCR_OK);  // null = not set
    ck_assert_int_eq(v, 8);

    ck_assert_int_eq(ocr_config_get_int(cfg, "Global.name", 5, &v), OCR_ERR_CONFIG);
    assert_error_has("config.json", "Global.name", "must be an integer", "a string \"ten\"");
    ck_assert_int_eq(ocr_config_get_int(cfg, "Global.half", 5, &v), OCR_ERR_CONFIG);
    assert_error_has("config.json", "Global.half", "integer", "a number 1.5");
    ck_assert_int_eq(ocr_config_get_int(cfg, "Global.use_gpu", 5, &v), OCR_ERR_CONFIG);
    assert_error_has("config.json", "Global.use_gpu", "integer", "a boolean true");
    ck_assert_int_eq(ocr_config_get_int(cfg, "Global.big", 5, &v), OCR_ERR_CONFIG);
    assert_error_has("config.json", "Global.big", "int64", NULL);
    ck_assert_int_eq(ocr_config_get_int(cfg, "Global.image_shape", 5, &v), OCR_ERR_CONFIG);
    assert_error_has("config.json", "Global.image_shape", "integer", "a list [3,48,320]");
    ck_assert_int_eq(ocr_config_get_int(cfg, "Optimizer", 5, &v), OCR_ERR_CONFIG);
    assert_error_has("Optimizer must be an integer", "an object", NULL, NULL);
    ocr_config_free(cfg);
}
END_TEST

START_TEST(test_get_double) {
    OcrConfig *cfg = load_default();
    double v = 0;
    ck_assert_int_eq(ocr_config_get_double(cfg, "Global.lr", 1.0, &v), OCR_OK);
    ck_assert(v == 0.001);
    ck_assert_int_eq(ocr_config_get_double(cfg, "Global.epoch_num", 1.0, &v), OCR_OK);  // integers are numbers
    ck_assert(v == 10.0);
    ck_assert_int_eq(ocr_config_get_double(cfg, "Global.absent", 2.5, &v), OCR_OK);
    ck_assert(v == 2.5);
    ck_assert_int_eq(ocr_config_get_double(cfg, "Global.name", 1.0, &v), OCR_ERR_CONFIG);
    assert_error_has("config.json", "Global.name", "must be a number", "a string \"ten\"");
    ocr_config_free(cfg);
}
END_TEST

START_TEST(test_get_bool) {
    OcrConfig *cfg = load_default();
    int v = -1;
    ck_assert_int_eq(ocr_config_get_bool(cfg, "Global.use_gpu", 0, &v), OCR_OK);
    ck_assert_int_eq(v, 1);
    ck_assert_int_eq(ocr_config_get_bool(cfg, "Train.dataset.transforms.0.DecodeImage.channel_first", 1, &v), OCR_OK);
    ck_assert_int_eq(v, 0);
    ck_assert_int_eq(ocr_config_get_bool(cfg, "Global.absent", 1, &v), OCR_OK);
    ck_assert_int_eq(v, 1);
    ck_assert_int_eq(ocr_config_get_bool(cfg, "Global.epoch_num", 0, &v), OCR_ERR_CONFIG);
    assert_error_has("config.json", "Global.epoch_num", "must be a boolean", "an integer 10");
    ocr_config_free(cfg);
}
END_TEST

START_TEST(test_get_string) {
    OcrConfig *cfg = load_default();
    const char *s = NULL;
    ck_assert_int_eq(ocr_config_get_string(cfg, "Optimizer.name", "SGD", &s), OCR_OK);
    ck_assert_str_eq(s, "Adam");
    ck_assert_int_eq(ocr_config_get_string(cfg, "Optimizer.absent", "SGD", &s), OCR_OK);
    ck_assert_str_eq(s, "SGD");
    ck_assert_int_eq(ocr_config_get_string(cfg, "Global.checkpoints", NULL, &s), OCR_OK);
    ck_assert_ptr_null(s);
    ck_assert_int_eq(ocr_config_get_string(cfg, "Train.dataset.label_file_list.1", NULL, &s), OCR_OK);
    ck_assert_str_eq(s, "b.txt");
    ck_assert_int_eq(ocr_config_get_string(cfg, "Global.lr", "x", &s), OCR_ERR_CONFIG);
    assert_error_has("config.json", "Global.lr", "must be a string", "a number 0.001");
    ck_assert_int_eq(ocr_config_get_string(cfg, "Train.dataset.label_file_list", "x", &s), OCR_ERR_CONFIG);
    assert_error_has("Train.dataset.label_file_list", "a string", "a list [\"a.txt\",\"b.txt\"]", NULL);
    ocr_config_free(cfg);
}
END_TEST

START_TEST(test_list_getters) {
    OcrConfig *cfg = load_default();
    int64_t iv[4] = {-1, -1, -1, -1};
    int n = -1;
    ck_assert_int_eq(ocr_config_get_int_list(cfg, "Global.image_shape", iv, 4, &n), OCR_OK);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(iv[0], 3);
    ck_assert_int_eq(iv[1], 48);
    ck_assert_int_eq(iv[2], 320);
    ck_assert_int_eq(iv[3], -1);
    ck_assert_int_eq(ocr_config_get_int_list(cfg, "Global.scalar_list", iv, 4, &n), OCR_OK);
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(iv[0], 4);
    iv[0] = 99;
    ck_assert_int_eq(ocr_config_get_int_list(cfg, "Global.absent", iv, 4, &n), OCR_OK);
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(iv[0], 99);  // untouched
    ck_assert_int_eq(ocr_config_get_int_list(cfg, "Global.image_shape", iv, 2, &n), OCR_ERR_CONFIG);
    assert_error_has("config.json", "Global.image_shape", "3 entries", "at most 2");
    ck_assert_int_eq(ocr_config_get_int_list(cfg, "Global.mixed", iv, 4, &n), OCR_ERR_CONFIG);
    assert_error_has("config.json", "Global.mixed.1", "integer", "a string \"two\"");
    ck_assert_int_eq(ocr_config_get_int_list(cfg, "Global.mean", iv, 4, &n), OCR_ERR_CONFIG);
    assert_error_has("Global.mean.0", "integer", "a number 0.5", NULL);
    ck_assert_int_eq(ocr_config_get_int_list(cfg, "Global.name", iv, 4, &n), OCR_ERR_CONFIG);
    assert_error_has("Global.name", "a list of integers", "a string \"ten\"", NULL);

    double dv[3] = {0};
    ck_assert_int_eq(ocr_config_get_double_list(cfg, "Global.mean", dv, 3, &n), OCR_OK);
    ck_assert_int_eq(n, 2);
    ck_assert(dv[0] == 0.5 && dv[1] == 0.25);
    ck_assert_int_eq(ocr_config_get_double_list(cfg, "Global.lr", dv, 3, &n), OCR_OK);
    ck_assert_int_eq(n, 1);
    ck_assert(dv[0] == 0.001);
    ck_assert_int_eq(ocr_config_get_double_list(cfg, "Global.mixed", dv, 3, &n), OCR_ERR_CONFIG);
    assert_error_has("Global.mixed.1", "a number", "a string \"two\"", "config.json");
    ocr_config_free(cfg);
}
END_TEST

START_TEST(test_require) {
    OcrConfig *cfg = load_default();
    int64_t i;
    double d;
    const char *s;
    ck_assert_int_eq(ocr_config_require_int(cfg, "Global.epoch_num", &i), OCR_OK);
    ck_assert_int_eq(i, 10);
    ck_assert_int_eq(ocr_config_require_double(cfg, "Optimizer.lr", &d), OCR_OK);
    ck_assert(d == 0.0005);
    ck_assert_int_eq(ocr_config_require_string(cfg, "Optimizer.name", &s), OCR_OK);
    ck_assert_str_eq(s, "Adam");
    ck_assert_int_eq(ocr_config_require_int(cfg, "Global.epochs", &i), OCR_ERR_CONFIG);
    assert_error_has("config.json", "Global.epochs", "required", "missing");
    ck_assert_int_eq(ocr_config_require_double(cfg, "Loss.weight", &d), OCR_ERR_CONFIG);
    assert_error_has("config.json", "Loss.weight", "required", "a number");
    ck_assert_int_eq(ocr_config_require_string(cfg, "Global.checkpoints", &s), OCR_ERR_CONFIG);
    assert_error_has("config.json", "Global.checkpoints", "required", "null");
    ck_assert_int_eq(ocr_config_require_string(cfg, "Global.epoch_num", &s), OCR_ERR_CONFIG);
    assert_error_has("Global.epoch_num", "must be a string", "an integer 10", NULL);
    ocr_config_free(cfg);
}
END_TEST

START_TEST(test_paths_and_nodes) {
    OcrConfig *cfg = load_default();
    ck_assert(ocr_config_has(cfg, "Global.epoch_num"));
    ck_assert(ocr_config_has(cfg, "Train.dataset.transforms.1.RecResizeImg.image_shape.2"));
    ck_assert(!ocr_config_has(cfg, "Train.dataset.transforms.2"));
    ck_assert(!ocr_config_has(cfg, "Train.dataset.transforms.01"));  // no leading zeros
    ck_assert(!ocr_config_has(cfg, "Global.epoch_num.x"));
    ck_assert(!ocr_config_has(cfg, "global.epoch_num"));  // case matters
    const cJSON *tf = ocr_config_node(cfg, "Train.dataset.transforms");
    ck_assert(cJSON_IsArray(tf));
    ck_assert_int_eq(cJSON_GetArraySize(tf), 2);
    ck_assert_ptr_eq(ocr_config_node(cfg, ""), ocr_config_root(cfg));
    ck_assert_str_eq(ocr_config_source(cfg), "config.json");

    int64_t v = 0;
    const char *s = NULL;
    ck_assert_int_eq(ocr_config_get_string(cfg, "Train.dataset.transforms.0.DecodeImage.img_mode", "", &s), OCR_OK);
    ck_assert_str_eq(s, "BGR");
    // A list index past the end is just absent.
    ck_assert_int_eq(ocr_config_get_int(cfg, "Train.dataset.transforms.5.X", 3, &v), OCR_OK);
    ck_assert_int_eq(v, 3);
    // A path through a scalar means the config has another shape than the caller expects.
    ck_assert_int_eq(ocr_config_get_double(cfg, "Optimizer.lr.learning_rate", 0.1, (double[1]){0}), OCR_ERR_CONFIG);
    assert_error_has("config.json", "Optimizer.lr must be an object", "Optimizer.lr.learning_rate", "a number 0.0005");
    ck_assert_int_eq(ocr_config_get_int(cfg, "Train.dataset.transforms.name", 3, &v), OCR_ERR_CONFIG);
    assert_error_has("Train.dataset.transforms must be an object", "a list", NULL, NULL);
    ocr_config_free(cfg);
}
END_TEST

START_TEST(test_check_range) {
    OcrConfig *cfg = load_default();
    ck_assert_int_eq(ocr_config_check_range(cfg, "Global.epoch_num", 10, 1, 10), OCR_OK);
    ck_assert_int_eq(ocr_config_check_range(cfg, "Global.epoch_num", 1, 1, 10), OCR_OK);
    ck_assert_int_eq(ocr_config_check_range(cfg, "Global.epoch_num", 11, 1, 10), OCR_ERR_CONFIG);
    assert_error_has("config.json", "Global.epoch_num", "[1, 10]", "got 11");
    ck_assert_int_eq(ocr_config_check_range(cfg, "Global.lr", -0.5, 0, 1), OCR_ERR_CONFIG);
    assert_error_has("Global.lr", "[0, 1]", "got -0.5", NULL);
    ck_assert_int_eq(ocr_config_check_range(cfg, "Global.lr", NAN, 0, 1), OCR_ERR_CONFIG);
    assert_error_has("Global.lr", "nan", NULL, NULL);
    ocr_config_free(cfg);
}
END_TEST

// ---- overrides ----------------------------------------------------------------------

static void apply_ok(OcrConfig *cfg, const char *assignment) {
    ocr_status_t st = ocr_config_apply_override(cfg, assignment);
    ck_assert_msg(st == OCR_OK, "override %s: %s", assignment, ocr_last_error());
}

START_TEST(test_override_kinds) {
    OcrConfig *cfg = load_default();
    int64_t i;
    double d;
    int b;
    const char *s;
    apply_ok(cfg, "Global.epoch_num=20");
    ck_assert_int_eq(ocr_config_get_int(cfg, "Global.epoch_num", 0, &i), OCR_OK);
    ck_assert_int_eq(i, 20);
    apply_ok(cfg, "Global.lr=-2.5e-3");
    ck_assert_int_eq(ocr_config_get_double(cfg, "Global.lr", 0, &d), OCR_OK);
    ck_assert(d == -2.5e-3);
    apply_ok(cfg, "Global.use_gpu=false");
    ck_assert_int_eq(ocr_config_get_bool(cfg, "Global.use_gpu", 1, &b), OCR_OK);
    ck_assert_int_eq(b, 0);
    apply_ok(cfg, "Global.name=null");
    ck_assert(cJSON_IsNull(ocr_config_node(cfg, "Global.name")));
    apply_ok(cfg, "Global.image_shape=[1, 32, 100]");
    int64_t shape[3];
    int n;
    ck_assert_int_eq(ocr_config_get_int_list(cfg, "Global.image_shape", shape, 3, &n), OCR_OK);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(shape[0], 1);
    ck_assert_int_eq(shape[2], 100);
    apply_ok(cfg, "Optimizer.lr={\"name\": \"Cosine\", \"learning_rate\": 0.01}");
    ck_assert_int_eq(ocr_config_get_double(cfg, "Optimizer.lr.learning_rate", 0, &d), OCR_OK);
    ck_assert(d == 0.01);
    ck_assert_int_eq(ocr_config_get_string(cfg, "Optimizer.lr.name", NULL, &s), OCR_OK);
    ck_assert_str_eq(s, "Cosine");
    // A quoted number stays a string; bare words are strings.
    apply_ok(cfg, "Global.tag=\"42\"");
    ck_assert_int_eq(ocr_config_get_string(cfg, "Global.tag", NULL, &s), OCR_OK);
    ck_assert_str_eq(s, "42");
    apply_ok(cfg, "Global.device=cpu");
    ck_assert_int_eq(ocr_config_get_string(cfg, "Global.device", NULL, &s), OCR_OK);
    ck_assert_str_eq(s, "cpu");
    apply_ok(cfg, "Global.save_dir=./output/rec v4");
    ck_assert_int_eq(ocr_config_get_string(cfg, "Global.save_dir", NULL, &s), OCR_OK);
    ck_assert_str_eq(s, "./output/rec v4");
    apply_ok(cfg, "Global.version=1.2.3");  // not a number: a string
    ck_assert_int_eq(ocr_config_get_string(cfg, "Global.version", NULL, &s), OCR_OK);
    ck_assert_str_eq(s, "1.2.3");
    // An empty value is null, as PaddleOCR's yaml.load("") gives None.
    apply_ok(cfg, "Global.empty=");
    ck_assert(cJSON_IsNull(ocr_config_node(cfg, "Global.empty")));
    ck_assert_int_eq(ocr_config_get_string(cfg, "Global.empty", "unset", &s), OCR_OK);
    ck_assert_str_eq(s, "unset");
    // Only the first '=' splits.
    apply_ok(cfg, "Global.expr=c=d");
    ck_assert_int_eq(ocr_config_get_string(cfg, "Global.expr", NULL, &s), OCR_OK);
    ck_assert_str_eq(s, "c=d");
    // PaddleOCR's unquoted lists ([a.txt, b.txt], YAML's flow sequence): plain items are
    // strings unless they are JSON scalars.
    apply_ok(cfg, "Train.dataset.label_file_list=[./a b.txt, /data/c.txt]");
    const cJSON *list = ocr_config_node(cfg, "Train.dataset.label_file_list");
    ck_assert_int_eq(cJSON_GetArraySize(list), 2);
    ck_assert_str_eq(cJSON_GetArrayItem(list, 0)->valuestring, "./a b.txt");
    ck_assert_str_eq(cJSON_GetArrayItem(list, 1)->valuestring, "/data/c.txt");
    apply_ok(cfg, "Global.eval_batch_step=[0, 2e3]");
    ck_assert(cJSON_IsNumber(cJSON_GetArrayItem(ocr_config_node(cfg, "Global.eval_batch_step"), 1)));
    apply_ok(cfg, "Global.mixed=[x, 3, true, null]");
    list = ocr_config_node(cfg, "Global.mixed");
    ck_assert(cJSON_IsString(cJSON_GetArrayItem(list, 0)) && cJSON_IsNumber(cJSON_GetArrayItem(list, 1)));
    ck_assert(cJSON_IsTrue(cJSON_GetArrayItem(list, 2)) && cJSON_IsNull(cJSON_GetArrayItem(list, 3)));
    apply_ok(cfg, "Global.none=[ ]");
    ck_assert_int_eq(cJSON_GetArraySize(ocr_config_node(cfg, "Global.none")), 0);
    // PaddleOCR types -o values with yaml.load: YAML 1.1 scalars and flow collections.
    int flag;
    apply_ok(cfg, "Global.use_amp=True");
    ck_assert_int_eq(ocr_config_get_bool(cfg, "Global.use_amp", 0, &flag), OCR_OK);
    ck_assert_int_eq(flag, 1);
    apply_ok(cfg, "Global.use_amp=no");
    ck_assert_int_eq(ocr_config_get_bool(cfg, "Global.use_amp", 1, &flag), OCR_OK);
    ck_assert_int_eq(flag, 0);
    apply_ok(cfg, "Global.checkpoints=~");
    ck_assert(cJSON_IsNull(ocr_config_node(cfg, "Global.checkpoints")));
    apply_ok(cfg, "Global.hex=0x10");
    ck_assert_int_eq(ocr_config_get_int(cfg, "Global.hex", 0, &i), OCR_OK);
    ck_assert_int_eq(i, 16);
    apply_ok(cfg, "Global.amp_level=O2");  // a letter O: a string
    ck_assert_int_eq(ocr_config_get_string(cfg, "Global.amp_level", NULL, &s), OCR_OK);
    ck_assert_str_eq(s, "O2");
    apply_ok(cfg, "Global.nested=[a, [b, 2], {c: True}]");
    list = ocr_config_node(cfg, "Global.nested");
    ck_assert_int_eq(cJSON_GetArraySize(list), 3);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetArrayItem(list, 1)), 2);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(list, 2), "c")));
    apply_ok(cfg, "Train.loader={shuffle: false, batch_size_per_card: 64}");
    ck_assert_int_eq(ocr_config_get_int(cfg, "Train.loader.batch_size_per_card", 0, &i), OCR_OK);
    ck_assert_int_eq(i, 64);
    // Spaces around the key are dropped.
    apply_ok(cfg, " Global.epoch_num =3");
    ck_assert_int_eq(ocr_config_get_int(cfg, "Global.epoch_num", 0, &i), OCR_OK);
    ck_assert_int_eq(i, 3);
    ocr_config_free(cfg);
}
END_TEST

START_TEST(test_override_nested_creation) {
    OcrConfig *cfg = load_default();
    int64_t i;
    const char *s;
    apply_ok(cfg, "Amp.scaler.init_scale=65536");
    ck_assert_int_eq(ocr_config_get_int(cfg, "Amp.scaler.init_scale", 0, &i), OCR_OK);
    ck_assert_int_eq(i, 65536);
    ck_assert(cJSON_IsObject(ocr_config_node(cfg, "Amp.scaler")));
    apply_ok(cfg, "Global.checkpoints.path=x");  // a null intermediate becomes an object
    ck_assert_int_eq(ocr_config_get_string(cfg, "Global.checkpoints.path", NULL, &s), OCR_OK);
    ck_assert_str_eq(s, "x");
    // Into lists by index.
    apply_ok(cfg, "Train.dataset.transforms.0.DecodeImage.img_mode=RGB");
    ck_assert_int_eq(ocr_config_get_string(cfg, "Train.dataset.transforms.0.DecodeImage.img_mode", NULL, &s), OCR_OK);
    ck_assert_str_eq(s, "RGB");
    apply_ok(cfg, "Train.dataset.label_file_list.1=c.txt");
    ck_assert_int_eq(ocr_config_get_string(cfg, "Train.dataset.label_file_list.1", NULL, &s), OCR_OK);
    ck_assert_str_eq(s, "c.txt");
    ck_assert_int_eq(cJSON_GetArraySize(ocr_config_node(cfg, "Train.dataset.label_file_list")), 2);
    // ocr_config_set takes the path and the value separately.
    ck_assert_int_eq(ocr_config_set(cfg, "Eval.dataset.name", "SimpleDataSet"), OCR_OK);
    ck_assert_int_eq(ocr_config_get_string(cfg, "Eval.dataset.name", NULL, &s), OCR_OK);
    ck_assert_str_eq(s, "SimpleDataSet");
    ocr_config_free(cfg);
}
END_TEST

START_TEST(test_override_errors) {
    OcrConfig *cfg = load_default();
    char *before = ocr_config_to_json(cfg);
    ck_assert_int_eq(ocr_config_apply_override(cfg, "Global.epoch_num"), OCR_ERR_CONFIG);
    assert_error_has("Global.epoch_num", "'='", NULL, NULL);
    ck_assert_int_eq(ocr_config_apply_override(cfg, "=5"), OCR_ERR_CONFIG);
    assert_error_has("empty key", NULL, NULL, NULL);
    ck_assert_int_eq(ocr_config_apply_override(cfg, "  =5"), OCR_ERR_CONFIG);
    assert_error_has("empty key", NULL, NULL, NULL);
    ck_assert_int_eq(ocr_config_apply_override(cfg, "Global.epoch_num.x=1"), OCR_ERR_CONFIG);
    assert_error_has("config.json", "Global.epoch_num.x", "Global.epoch_num is an integer 10", "not an object");
    ck_assert_int_eq(ocr_config_apply_override(cfg, "Global..x=1"), OCR_ERR_CONFIG);
    assert_error_has("empty segment", NULL, NULL, NULL);
    ck_assert_int_eq(ocr_config_apply_override(cfg, "Global.image_shape=[1, 2"), OCR_ERR_CONFIG);
    assert_error_has("Global.image_shape", "not valid JSON", NULL, NULL);
    ck_assert_int_eq(ocr_config_apply_override(cfg, "Global.l=[a,,b]"), OCR_ERR_CONFIG);
    assert_error_has("Global.l", "not valid JSON", NULL, NULL);
    ck_assert_int_eq(ocr_config_apply_override(cfg, "Global.l=[a, [b]"), OCR_ERR_CONFIG);
    assert_error_has("Global.l", "not valid JSON", NULL, NULL);
    ck_assert_int_eq(ocr_config_apply_override(cfg, "Global.obj={\"a\": 1"), OCR_ERR_CONFIG);
    assert_error_has("Global.obj", "not valid JSON", NULL, NULL);
    ck_assert_int_eq(ocr_config_apply_override(cfg, "Global.s=\"unterminated"), OCR_ERR_CONFIG);
    assert_error_has("Global.s", "not valid JSON", NULL, NULL);
    ck_assert_int_eq(ocr_config_apply_override(cfg, "Train.dataset.transforms.7.X=1"), OCR_ERR_CONFIG);
    assert_error_has("Train.dataset.transforms", "list of 2 items", "\"7\"", NULL);
    ck_assert_int_eq(ocr_config_apply_override(cfg, "Train.dataset.transforms.first=1"), OCR_ERR_CONFIG);
    assert_error_has("Train.dataset.transforms", "\"first\"", NULL, NULL);
    // Failed overrides leave the config as it was.
    char *after = ocr_config_to_json(cfg);
    ck_assert_str_eq(before, after);
    free(before);
    free(after);
    ocr_config_free(cfg);
}
END_TEST

// ---- key checks --------------------------------------------------------------------

START_TEST(test_check_keys) {
    OcrConfig *cfg = NULL;
    ck_assert_int_eq(ocr_config_parse(&cfg, "{\"Global\": {\"epoch_nm\": 3, \"use_gpu\": true}}", "config.json"),
                     OCR_OK);
    static const char *const known[] = {"epoch_num", "use_gpu", "save_model_dir", "print_batch_step", NULL};
    ck_assert_int_eq(ocr_config_check_keys(cfg, "Global", known), OCR_ERR_CONFIG);
    assert_error_has("config.json", "unknown key Global.epoch_nm (did you mean epoch_num?)", NULL, NULL);
    cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItem(ocr_config_root(cfg), "Global"), "epoch_nm");
    apply_ok(cfg, "Global.epoch_num=3");
    ck_assert_msg(ocr_config_check_keys(cfg, "Global", known) == OCR_OK, "%s", ocr_last_error());
    // Nothing close: list what is known instead of guessing.
    apply_ok(cfg, "Global.zzzzzzzzzz=1");
    ck_assert_int_eq(ocr_config_check_keys(cfg, "Global", known), OCR_ERR_CONFIG);
    assert_error_has("unknown key Global.zzzzzzzzzz", "known keys: epoch_num, use_gpu", NULL, NULL);
    ck_assert(strstr(ocr_last_error(), "did you mean") == NULL);
    // Top level and absent sections.
    static const char *const sections[] = {"Global", "Architecture", NULL};
    ck_assert_int_eq(ocr_config_check_keys(cfg, "", sections), OCR_OK);
    apply_ok(cfg, "Archtecture.x=1");
    ck_assert_int_eq(ocr_config_check_keys(cfg, NULL, sections), OCR_ERR_CONFIG);
    assert_error_has("unknown key Archtecture (did you mean Architecture?)", NULL, NULL, NULL);
    ck_assert_int_eq(ocr_config_check_keys(cfg, "Eval", known), OCR_OK);
    ck_assert_int_eq(ocr_config_check_keys(cfg, "Global.use_gpu", known), OCR_ERR_CONFIG);
    assert_error_has("Global.use_gpu", "must be an object", NULL, NULL);
    ocr_config_free(cfg);
}
END_TEST

START_TEST(test_edit_distance) {
    ck_assert_int_eq(ocr_edit_distance("kitten", "sitting"), 3);
    ck_assert_int_eq(ocr_edit_distance("sitting", "kitten"), 3);
    ck_assert_int_eq(ocr_edit_distance("flaw", "lawn"), 2);
    ck_assert_int_eq(ocr_edit_distance("", "abc"), 3);
    ck_assert_int_eq(ocr_edit_distance("abc", ""), 3);
    ck_assert_int_eq(ocr_edit_distance("", ""), 0);
    ck_assert_int_eq(ocr_edit_distance("epoch_num", "epoch_num"), 0);
    ck_assert_int_eq(ocr_edit_distance("epoch_nm", "epoch_num"), 1);
    ck_assert_int_eq(ocr_edit_distance("ab", "ba"), 2);  // no transpositions
    // Bytes, not characters: "é" is two bytes in UTF-8.
    ck_assert_int_eq(ocr_edit_distance("e", "\xc3\xa9"), 2);
}
END_TEST

// ---- parsing --------------------------------------------------------------------------

START_TEST(test_parse_errors) {
    OcrConfig *cfg = (OcrConfig *)1;
    // Missing comma after line 3: the parser stops at the key on line 4.
    ck_assert_int_eq(ocr_config_parse(&cfg, "{\n  \"a\": 1,\n  \"b\": 2\n  \"c\": 3\n}\n", "bad.json"), OCR_ERR_CONFIG);
    ck_assert_ptr_null(cfg);
    assert_error_has("bad.json:4:", "\"c\": 3", NULL, NULL);
    ck_assert_int_eq(ocr_config_parse(&cfg, "{\"a\": [1, 2,\n\n", "cut.json"), OCR_ERR_CONFIG);
    assert_error_has("cut.json:", "unexpected end", NULL, NULL);
    ck_assert_int_eq(ocr_config_parse(&cfg, "{\"a\": tru}", "x.json"), OCR_ERR_CONFIG);
    assert_error_has("x.json:1:", "invalid JSON", NULL, NULL);
    ck_assert_int_eq(ocr_config_parse(&cfg, "  \n ", "blank.json"), OCR_ERR_CONFIG);
    assert_error_has("blank.json", "empty", NULL, NULL);
    ck_assert_int_eq(ocr_config_parse(&cfg, "[1, 2]", "list.json"), OCR_ERR_CONFIG);
    assert_error_has("list.json", "top level must be an object", "a list", NULL);
    ck_assert_int_eq(ocr_config_parse(&cfg, "{\"a\": 1} {\"b\": 2}", "two.json"), OCR_ERR_CONFIG);
    assert_error_has("two.json:1:10", NULL, NULL, NULL);
    ck_assert_int_eq(ocr_config_parse(&cfg, "{\"G\": {\"k\": 1, \"k\": 2}}", "dup.json"), OCR_ERR_CONFIG);
    assert_error_has("dup.json", "G.k", "more than once", NULL);
    ck_assert_int_eq(ocr_config_parse(&cfg, "{\"T\": [{\"a\": 1}, {\"b\": 1, \"b\": 2}]}", "dup.json"),
                     OCR_ERR_CONFIG);
    assert_error_has("T.1.b", "more than once", NULL, NULL);
    // A byte order mark is not an error.
    ck_assert_int_eq(ocr_config_parse(&cfg, "\xEF\xBB\xBF{\"a\": 1}", "bom.json"), OCR_OK);
    ocr_config_free(cfg);
}
END_TEST

static void temp_path(char *buf, size_t n, const char *name) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/test_tmp", OCR_BINARY_DIR);
    ck_assert_int_eq(ocr_make_dirs(dir), OCR_OK);
    snprintf(buf, n, "%s/config_%ld_%s", dir, (long)getpid(), name);
}

START_TEST(test_load_file) {
    char path[1024];
    temp_path(path, sizeof path, "good.json");
    ck_assert_int_eq(ocr_write_file_atomic(path, kConfig, strlen(kConfig)), OCR_OK);
    OcrConfig *cfg = NULL;
    ck_assert_msg(ocr_config_load(&cfg, path) == OCR_OK, "%s", ocr_last_error());
    ck_assert_str_eq(ocr_config_source(cfg), path);
    int64_t v;
    ck_assert_int_eq(ocr_config_get_int(cfg, "Global.name", 0, &v), OCR_ERR_CONFIG);
    assert_error_has(path, "Global.name", NULL, NULL);
    ocr_config_free(cfg);

    // Parse errors in a file carry its name, line and column.
    const char *bad = "{\n  \"Global\": {\n    \"epoch_num\": 10,\n    \"lr\": 0.1.2\n  }\n}\n";
    ck_assert_int_eq(ocr_write_file_atomic(path, bad, strlen(bad)), OCR_OK);
    ck_assert_int_eq(ocr_config_load(&cfg, path), OCR_ERR_CONFIG);
    char where[1100];
    snprintf(where, sizeof where, "%s:4:", path);
    assert_error_has(where, NULL, NULL, NULL);

    const char nul_text[] = "{\"a\":\n 1\0}";
    ck_assert_int_eq(ocr_write_file_atomic(path, nul_text, sizeof nul_text - 1), OCR_OK);
    ck_assert_int_eq(ocr_config_load(&cfg, path), OCR_ERR_CONFIG);
    snprintf(where, sizeof where, "%s:2:3", path);
    assert_error_has(where, "NUL", NULL, NULL);
    unlink(path);

    ck_assert_int_eq(ocr_config_load(&cfg, path), OCR_ERR_NOT_FOUND);
    assert_error_has(path, NULL, NULL, NULL);
}
END_TEST

START_TEST(test_to_json_round_trip) {
    OcrConfig *cfg = load_default();
    apply_ok(cfg, "Global.epoch_num=42");
    apply_ok(cfg, "New.list=[1, \"x\", {\"k\": null}]");
    char *text = ocr_config_to_json(cfg);
    ck_assert_ptr_nonnull(text);
    OcrConfig *again = NULL;
    ck_assert_msg(ocr_config_parse(&again, text, "again.json") == OCR_OK, "%s", ocr_last_error());
    ck_assert(cJSON_Compare(ocr_config_root(cfg), ocr_config_root(again), 1));
    int64_t v;
    ck_assert_int_eq(ocr_config_get_int(again, "Global.epoch_num", 0, &v), OCR_OK);
    ck_assert_int_eq(v, 42);
    ck_assert(cJSON_IsNull(ocr_config_node(again, "New.list.2.k")));
    // The comparison can fail: the overrides made it differ from the original.
    OcrConfig *orig = load_default();
    ck_assert(!cJSON_Compare(ocr_config_root(orig), ocr_config_root(again), 1));
    free(text);
    ocr_config_free(orig);
    ocr_config_free(again);
    ocr_config_free(cfg);
}
END_TEST

START_TEST(test_no_effect_keys) {
    static const OcrNoEffectKey table[] = {{"Global", "debug", "nobody reads it"},
                                           {"*.dataset.transforms.*.DecodeImage", "channel_first", "NHWC here"},
                                           {NULL, NULL, NULL}};
    static const char *const gkeys[] = {"epoch_num", NULL}, *const dkeys[] = {"img_mode", NULL};
    OcrConfig *cfg;
    const char *text = "{\"Global\": {\"epoch_num\": 1, \"debug\": false},"
                       " \"Train\": {\"dataset\": {\"transforms\": [{\"DecodeImage\": {\"img_mode\": \"BGR\","
                       " \"channel_first\": false}}]}}}";
    ck_assert_int_eq(ocr_config_parse(&cfg, text, "t.json"), OCR_OK);
    // Without the table the key is unknown.
    ocr_config_set_no_effect_keys(NULL);
    ck_assert_int_eq(ocr_config_check_keys(cfg, "Global", gkeys), OCR_ERR_CONFIG);
    assert_error_has("unknown key Global.debug", NULL, NULL, NULL);
    ocr_config_set_no_effect_keys(table);
    ck_assert_msg(ocr_config_check_keys(cfg, "Global", gkeys) == OCR_OK, "%s", ocr_last_error());
    ck_assert_msg(ocr_config_check_keys(cfg, "Train.dataset.transforms.0.DecodeImage", dkeys) == OCR_OK, "%s",
                  ocr_last_error());
    ck_assert_int_eq(ocr_config_check_keys(cfg, "Global", gkeys), OCR_OK);  // twice: recorded once
    ck_assert_int_eq(ocr_config_num_ignored(cfg), 2);
    const char *why;
    ck_assert_str_eq(ocr_config_ignored(cfg, 0, &why), "Global.debug");
    ck_assert_str_eq(why, "nobody reads it");
    ck_assert_str_eq(ocr_config_ignored(cfg, 1, &why), "Train.dataset.transforms.0.DecodeImage.channel_first");
    ck_assert(ocr_config_ignored(cfg, 2, &why) == NULL);
    // A table key in another section is still unknown there (with the did-you-mean).
    static const char *const okeys[] = {"debugs", NULL};
    ocr_config_free(cfg);
    ck_assert_int_eq(ocr_config_parse(&cfg, "{\"Optimizer\": {\"debug\": 1}}", "t.json"), OCR_OK);
    ck_assert_int_eq(ocr_config_check_keys(cfg, "Optimizer", okeys), OCR_ERR_CONFIG);
    assert_error_has("unknown key Optimizer.debug (did you mean debugs?)", NULL, NULL, NULL);
    // Keys a validator records itself.
    ocr_config_record_ignored(cfg, "Optimizer.debug", "test");
    ck_assert_int_eq(ocr_config_num_ignored(cfg), 1);
    ocr_config_set_no_effect_keys(NULL);
    ocr_config_free(cfg);
}
END_TEST

static Suite *config_suite(void) {
    Suite *s = suite_create("core_config");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, test_get_int);
    tcase_add_test(tc, test_get_double);
    tcase_add_test(tc, test_get_bool);
    tcase_add_test(tc, test_get_string);
    tcase_add_test(tc, test_list_getters);
    tcase_add_test(tc, test_require);
    tcase_add_test(tc, test_paths_and_nodes);
    tcase_add_test(tc, test_check_range);
    tcase_add_test(tc, test_override_kinds);
    tcase_add_test(tc, test_override_nested_creation);
    tcase_add_test(tc, test_override_errors);
    tcase_add_test(tc, test_check_keys);
    tcase_add_test(tc, test_no_effect_keys);
    tcase_add_test(tc, test_edit_distance);
    tcase_add_test(tc, test_parse_errors);
    tcase_add_test(tc, test_load_file);
    tcase_add_test(tc, test_to_json_round_trip);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(config_suite()); }

// LMDBDataSet: num-samples parsing, in-memory records, discovery and the skip-and-count rules
// on a fixture written by py-lmdb as PaddleOCR writes them (tools/make_lmdb_fixture.py),
// read-only opening, the writer behind `ocrtrain pack --lmdb`, and the same batches from an
// LMDB as from the SimpleDataSet it was written from.
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/config.h"
#include "core/fileio.h"
#include "data/dataset.h"
#include "data/lmdb_dataset.h"
#include "data/loader.h"
#include "data/pack.h"
#include "tests/common/test_util.h"

static OcrDict g_dict;

static void dict_setup(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/configs/dicts/en_dict.txt", OCR_SOURCE_DIR);
    ck_assert_msg(ocr_dict_load(&g_dict, path, 1) == OCR_OK, "%s", ocr_last_error());
}
static void dict_teardown(void) { ocr_dict_free(&g_dict); }

static int exists(const char *path) {
    struct stat s;
    return stat(path, &s) == 0;
}

// ---- records -------------------------------------------------------------------------

START_TEST(test_num_samples_parsing) {
    struct {
        const char *text;
        int ok;
        int64_t value;
    } cases[] = {
        {"12", 1, 12},   {" 7\n", 1, 7},   {"+3", 1, 3},    {"1_000", 1, 1000}, {"0", 1, 0},   {"007", 1, 7},
        {"-0", 1, 0},    {"", 0, 0},       {" ", 0, 0},     {"1__0", 0, 0},     {"_1", 0, 0},  {"1_", 0, 0},
        {"-1", 0, 0},    {"12a", 0, 0},    {"0x10", 0, 0},  {"1.0", 0, 0},      {"3000000000", 0, 0},
        {"99999999999999999999999", 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t n = -1;
        ocr_status_t st =
            ocr_lmdb_parse_num_samples((const uint8_t *)cases[i].text, strlen(cases[i].text), "env", &n);
        ck_assert_msg((st == OCR_OK) == cases[i].ok, "\"%s\": status %d", cases[i].text, st);
        if (cases[i].ok) ck_assert_int_eq(n, cases[i].value);
        if (!cases[i].ok) ck_assert_msg(strstr(ocr_last_error(), "env: num-samples") != NULL, "%s", ocr_last_error());
    }
    // Bytes that are not text are shown escaped, not printed raw.
    const uint8_t bin[] = {0x01, 0xFF, '3'};
    int64_t n;
    ck_assert_int_eq(ocr_lmdb_parse_num_samples(bin, sizeof bin, "env", &n), OCR_ERR_FORMAT);
    ck_assert_msg(strstr(ocr_last_error(), "\\x01\\xff3") != NULL, "%s", ocr_last_error());
    char key[32];
    ocr_lmdb_key(key, sizeof key, "label", 1);
    ck_assert_str_eq(key, "label-000000001");
    ocr_lmdb_key(key, sizeof key, "image", 1234567890);
    ck_assert_str_eq(key, "image-1234567890");  // %09d is a minimum width
}
END_TEST

// A PNG of w x h with a pattern from `seed`.
static uint8_t *make_png(int w, int h, int seed, size_t *size) {
    OcrImage img;
    ck_assert(ocr_image_alloc(&img, w, h, 3) == OCR_OK);
    for (int i = 0; i < w * h * 3; i++) img.pixels[i] = (uint8_t)(i * 7 + seed * 31);
    uint8_t *png;
    ck_assert(ocr_image_encode_png(&img, &png, size) == OCR_OK);
    ocr_image_free(&img);
    return png;
}

START_TEST(test_in_memory_records) {
    // The record parsing runs on in-memory tables (fuzzers use this): same rules as on disk.
    size_t s1, s3;
    uint8_t *p1 = make_png(20, 8, 1, &s1), *p3 = make_png(12, 8, 3, &s3);
    const char *keys[] = {"num-samples", "label-000000001", "image-000000001", "label-000000002",
                          "label-000000003", "image-000000003", "label-000000004", "image-000000004"};
    const uint8_t *vals[] = {(const uint8_t *)"4", (const uint8_t *)"ok 1", p1, (const uint8_t *)"",
                             (const uint8_t *)"x\0y", p3, (const uint8_t *)"trunc", p3};
    const size_t sizes[] = {1, 4, s1, 0, 3, s3, 5, 20};
    OcrLmdbTable t = {keys, vals, sizes, 8};
    OcrLmdbReader r = ocr_lmdb_table_reader(&t, "mem");
    OcrDatasetOptions opt = {0};
    opt.lmdb = 1;
    opt.lmdb_readers = &r;
    opt.num_lmdb_readers = 1;
    OcrDataset ds;
    ck_assert_msg(ocr_dataset_open(&ds, &opt, &g_dict) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(ocr_dataset_size(&ds), 2);  // 1 and 4; 2 empty, 3 has a NUL
    ck_assert_int_eq(ds.skipped.count[OCR_SKIP_EMPTY_LABEL], 1);
    ck_assert_int_eq(ds.skipped.count[OCR_SKIP_BAD_UTF8], 1);
    ck_assert_msg(strstr(ds.skipped.example[OCR_SKIP_BAD_UTF8], "mem:3: label-000000003: NUL byte") != NULL, "%s",
                  ds.skipped.example[OCR_SKIP_BAD_UTF8]);
    OcrSample smp;
    ck_assert_int_eq(ocr_dataset_get(&ds, 0, &smp), OCR_OK);
    ck_assert_str_eq(smp.text, "ok 1");
    ck_assert_str_eq(smp.label_file, "mem");
    ck_assert_int_eq(smp.line, 1);
    OcrImage img;
    ocr_skip_reason_t why;
    ck_assert_msg(ocr_dataset_load_image(&ds, 0, OCR_CHANNELS_BGR, &img, &why) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(img.width, 20);
    ocr_image_free(&img);
    // Sample 4's image record is a PNG cut at 20 bytes: corrupt, and named.
    ck_assert_int_eq(ocr_dataset_load_image(&ds, 1, OCR_CHANNELS_BGR, &img, &why), OCR_ERR_FORMAT);
    ck_assert_int_eq(why, OCR_SKIP_IMAGE_CORRUPT);
    ck_assert_msg(strstr(ocr_last_error(), "sample mem:4") != NULL, "%s", ocr_last_error());
    ocr_dataset_close(&ds);
    // Without num-samples the environment is refused, naming it.
    t.keys = keys + 1, t.values = vals + 1, t.sizes = sizes + 1, t.count = 7;
    ck_assert_int_eq(ocr_dataset_open(&ds, &opt, &g_dict), OCR_ERR_FORMAT);
    ck_assert_msg(strstr(ocr_last_error(), "mem: no \"num-samples\"") != NULL, "%s", ocr_last_error());
    free(p1);
    free(p3);
}
END_TEST

// ---- the py-lmdb fixture ---------------------------------------------------------------

static void fixture_path(char *buf, size_t cap, const char *sub) {
    snprintf(buf, cap, "%s/tests/data/lmdb_fixture%s%s", OCR_SOURCE_DIR, sub[0] ? "/" : "", sub);
}

START_TEST(test_discovery_order) {
    char root[1024], a[1024], b[1024];
    fixture_path(root, sizeof root, "");
    fixture_path(a, sizeof a, "nested/part2");
    fixture_path(b, sizeof b, "part1");
    char **dirs;
    int n;
    ck_assert_msg(ocr_lmdb_find_envs(root, &dirs, &n) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(dirs[0], a);  // sorted walk: nested/ before part1/
    ck_assert_str_eq(dirs[1], b);
    ocr_lmdb_free_dirs(dirs, n);
    // A data_dir that is itself an environment (no sub-directory) is the one environment.
    ck_assert_int_eq(ocr_lmdb_find_envs(b, &dirs, &n), OCR_OK);
    ck_assert_int_eq(n, 1);
    ck_assert_str_eq(dirs[0], b);
    ocr_lmdb_free_dirs(dirs, n);
    ck_assert_int_eq(ocr_lmdb_find_envs("/nonexistent/lmdb", &dirs, &n), OCR_ERR_NOT_FOUND);
}
END_TEST

START_TEST(test_fixture_skip_and_count) {
    // Read from a copy made read-only: opening must not create a lock file (lock=False).
    char *tmp = ocr_test_tmpdir("lmdbro");
    char cmd[4096], src[1024];
    fixture_path(src, sizeof src, "");
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s/ds' && chmod -R a-w '%s/ds'", src, tmp, tmp);
    ck_assert_int_eq(system(cmd), 0);
    char root[1100];
    snprintf(root, sizeof root, "%s/ds", tmp);
    OcrDatasetOptions opt = {0};
    opt.lmdb = 1;
    opt.data_dir = root;
    opt.max_text_length = 25;
    OcrDataset ds;
    ck_assert_msg(ocr_dataset_open(&ds, &opt, &g_dict) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(ds.num_files, 2);
    ck_assert_int_eq(ds.notes.lines, 10);  // records read: 6 + 4
    ck_assert_int_eq(ocr_dataset_size(&ds), 7);
    ck_assert_int_eq(ds.skipped.count[OCR_SKIP_EMPTY_LABEL], 1);
    ck_assert_int_eq(ds.skipped.count[OCR_SKIP_BAD_UTF8], 1);
    ck_assert_int_eq(ds.skipped.count[OCR_SKIP_NO_KNOWN_CHARS], 1);
    ck_assert_int_eq(ocr_skip_stats_total(&ds.skipped), 3);
    ck_assert_msg(strstr(ds.skipped.example[OCR_SKIP_EMPTY_LABEL], "part2:2: no label-000000002 record") != NULL,
                  "%s", ds.skipped.example[OCR_SKIP_EMPTY_LABEL]);
    ck_assert_int_eq(ocr_char_counter_get(&ds.unknown_chars, 0x65E5), 1);  // 日
    // In walk order: part2 samples 1, 5, 6 then part1 1..4.
    const char *texts[] = {"z9", "bad", "noimg", "abc", "Hello World", "12.50", "a"};
    const int64_t lines[] = {1, 5, 6, 1, 2, 3, 4};
    int ok_images = 0, corrupt = 0, missing = 0;
    for (int i = 0; i < 7; i++) {
        OcrSample s;
        ck_assert_int_eq(ocr_dataset_get(&ds, i, &s), OCR_OK);
        ck_assert_str_eq(s.text, texts[i]);
        ck_assert_int_eq(s.line, lines[i]);
        OcrImage img;
        ocr_skip_reason_t why = OCR_SKIP_REASON_COUNT;
        ocr_status_t st = ocr_dataset_load_image(&ds, i, OCR_CHANNELS_BGR, &img, &why);
        if (st == OCR_OK) {
            ck_assert_int_eq(img.height, 8);
            ok_images++;
            ocr_image_free(&img);
        } else {
            corrupt += why == OCR_SKIP_IMAGE_CORRUPT;
            missing += why == OCR_SKIP_IMAGE_MISSING;
        }
    }
    ck_assert_int_eq(ok_images, 5);
    ck_assert_int_eq(corrupt, 1);
    ck_assert_int_eq(missing, 1);
    ocr_dataset_close(&ds);
    char lock[1200];
    snprintf(lock, sizeof lock, "%s/part1/lock.mdb", root);
    ck_assert_msg(!exists(lock), "opening wrote %s", lock);
    snprintf(cmd, sizeof cmd, "chmod -R u+w '%s'", root);
    ck_assert_int_eq(system(cmd), 0);
    ocr_test_remove_tree(tmp);
    free(tmp);
}
END_TEST

START_TEST(test_leaf_that_is_not_lmdb) {
    char *tmp = ocr_test_tmpdir("lmdbbad");
    char p[1100];
    snprintf(p, sizeof p, "%s/root/empty_leaf", tmp);
    char cmd[2400];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", p);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(p, sizeof p, "%s/root", tmp);
    OcrDatasetOptions opt = {0};
    opt.lmdb = 1;
    opt.data_dir = p;
    OcrDataset ds;
    ck_assert_int_eq(ocr_dataset_open(&ds, &opt, &g_dict), OCR_ERR_FORMAT);
    ck_assert_msg(strstr(ocr_last_error(), "empty_leaf has no sub-directory but no data.mdb") != NULL, "%s",
                  ocr_last_error());
    ocr_test_remove_tree(tmp);
    free(tmp);
}
END_TEST

// ---- writer and equivalence with SimpleDataSet -------------------------------------------

typedef struct {
    char *dir;  // tmp root: images/, labels.txt, lmdb/
} Set;

// A SimpleDataSet of n images (plus one missing image and one unknown-character label).
static Set make_simple_set(int n) {
    Set s = {ocr_test_tmpdir("lmdbeq")};
    char p[1200], labels[8192] = "";
    snprintf(p, sizeof p, "%s/images", s.dir);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    size_t used = 0;
    for (int k = 0; k < n; k++) {
        OcrImage img;
        int w = 12 + 7 * (k % 5), h = 8 + (k % 3) * 4;
        ck_assert(ocr_image_alloc(&img, w, h, 3) == OCR_OK);
        for (int i = 0; i < w * h * 3; i++) img.pixels[i] = (uint8_t)(i * 13 + k * 29);
        snprintf(p, sizeof p, "%s/images/%03d.png", s.dir, k);
        ck_assert(ocr_image_write_png(p, &img) == OCR_OK);
        ocr_image_free(&img);
        char text[16];
        int len = 1 + k % 6;
        for (int i = 0; i < len; i++) text[i] = (char)('a' + (k + i * 5) % 26);
        text[len] = 0;
        used += (size_t)snprintf(labels + used, sizeof labels - used, "images/%03d.png\t%s\n", k, text);
    }
    used += (size_t)snprintf(labels + used, sizeof labels - used, "images/missing.png\tgone\n");
    used += (size_t)snprintf(labels + used, sizeof labels - used, "images/000.png\t日本\n");
    snprintf(p, sizeof p, "%s/labels.txt", s.dir);
    ck_assert(ocr_write_file_atomic(p, labels, used) == OCR_OK);
    return s;
}

START_TEST(test_writer_matches_simple_dataset) {
    Set set = make_simple_set(9);
    char labels[1200], lmdb[1200];
    snprintf(labels, sizeof labels, "%s/labels.txt", set.dir);
    snprintf(lmdb, sizeof lmdb, "%s/lmdb", set.dir);
    const char *files[] = {labels};
    OcrDatasetOptions so = {0};
    so.data_dir = set.dir;
    so.label_files = files;
    so.num_label_files = 1;
    OcrDataset simple, fromlmdb;
    ck_assert_msg(ocr_dataset_open(&simple, &so, &g_dict) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(ocr_dataset_size(&simple), 10);  // 9 + the missing image; 日本 rejected
    OcrPackWriteStats st;
    ck_assert_msg(ocr_pack_write_lmdb(lmdb, &simple, &st) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(st.written, 9);
    ck_assert_int_eq(st.skipped.count[OCR_SKIP_IMAGE_MISSING], 1);
    ck_assert_int_eq(ocr_skip_stats_total(&st.skipped), 1);
    char p[1300];
    snprintf(p, sizeof p, "%s/lock.mdb", lmdb);
    ck_assert(!exists(p));  // only data.mdb: readers use no lock
    // A second write to the same folder is refused and changes nothing.
    ck_assert_int_eq(ocr_pack_write_lmdb(lmdb, &simple, &st), OCR_ERR_INVALID_ARG);
    ck_assert_msg(strstr(ocr_last_error(), "already exists") != NULL, "%s", ocr_last_error());

    OcrDatasetOptions lo = {0};
    lo.lmdb = 1;
    lo.data_dir = lmdb;
    ck_assert_msg(ocr_dataset_open(&fromlmdb, &lo, &g_dict) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(ocr_dataset_size(&fromlmdb), 9);
    for (int i = 0; i < 9; i++) {
        OcrSample a, b;
        ck_assert_int_eq(ocr_dataset_get(&simple, i, &a), OCR_OK);
        ck_assert_int_eq(ocr_dataset_get(&fromlmdb, i, &b), OCR_OK);
        ck_assert_str_eq(a.text, b.text);
        ck_assert_int_eq(a.label_len, b.label_len);
        ck_assert(memcmp(a.label, b.label, sizeof(int32_t) * (size_t)a.label_len) == 0);
        ck_assert_int_eq(b.line, i + 1);  // 1-based records
        uint8_t *x, *y;
        size_t nx, ny;
        ck_assert_int_eq(ocr_dataset_read_image_bytes(&simple, i, &x, &nx, NULL), OCR_OK);
        ck_assert_int_eq(ocr_dataset_read_image_bytes(&fromlmdb, i, &y, &ny, NULL), OCR_OK);
        ck_assert(nx == ny && memcmp(x, y, nx) == 0);  // the file bytes, as they are
        free(x);
        free(y);
    }
    ocr_dataset_close(&fromlmdb);
    ocr_dataset_close(&simple);
    ocr_test_remove_tree(set.dir);
    free(set.dir);
}
END_TEST

static OcrConfig *loader_config(const char *dataset_json) {
    char json[4096];
    snprintf(json, sizeof json,
             "{\"Global\":{\"character_dict_path\":\"%s/configs/dicts/en_dict.txt\",\"use_space_char\":true,"
             "\"seed\":11},\"Train\":{\"dataset\":%s,\"loader\":{\"shuffle\":true,\"batch_size_per_card\":4,"
             "\"drop_last\":false,\"num_workers\":2}}}",
             OCR_SOURCE_DIR, dataset_json);
    OcrConfig *cfg;
    ck_assert_msg(ocr_config_parse(&cfg, json, "lmdb.json") == OCR_OK, "%s", ocr_last_error());
    return cfg;
}

// Hash of every batch of one epoch through the real loader (RecConAug + RecAug on).
static int64_t epoch_hashes(OcrConfig *cfg, uint64_t *hashes, int max) {
    OcrLoaderConfig lc;
    ck_assert_msg(ocr_loader_config_parse(&lc, cfg, "Train") == OCR_OK, "%s", ocr_last_error());
    OcrDict dict;
    ck_assert_msg(ocr_loader_load_dict(&dict, cfg) == OCR_OK, "%s", ocr_last_error());
    OcrLoader *l;
    ck_assert_msg(ocr_loader_create(&l, &lc, &dict) == OCR_OK, "%s", ocr_last_error());
    ocr_loader_config_free(&lc);
    ck_assert_int_eq(ocr_loader_start_epoch(l, 1, 0), OCR_OK);
    int64_t k = 0;
    for (;;) {
        const OcrBatch *b;
        ck_assert_msg(ocr_loader_next(l, &b) == OCR_OK, "%s", ocr_last_error());
        if (!b) break;
        ck_assert(k < max);
        uint64_t h = ocr_pack_hash64(b->images, (size_t)b->size * b->height * b->width * b->channels, 1);
        h = ocr_pack_hash64(b->labels, sizeof(int32_t) * b->size * b->max_text_length, h);
        h = ocr_pack_hash64(b->lengths, sizeof(int32_t) * b->size, h);
        h = ocr_pack_hash64(b->widths, sizeof(int32_t) * b->size, h);
        hashes[k++] = ocr_pack_hash64(b->indices, sizeof(int64_t) * b->size, h);
        ocr_loader_release(l, b);
    }
    ocr_loader_destroy(l);
    ocr_dict_free(&dict);
    return k;
}

START_TEST(test_loader_same_batches_as_simple) {
    Set set = make_simple_set(10);
    char labels[1200], lmdb[1200];
    snprintf(labels, sizeof labels, "%s/labels.txt", set.dir);
    snprintf(lmdb, sizeof lmdb, "%s/lmdb", set.dir);
    static const char *transforms =
        "[{\"DecodeImage\":{\"img_mode\":\"BGR\",\"channel_first\":false}},"
        "{\"RecConAug\":{\"prob\":0.5,\"ext_data_num\":2,\"image_shape\":[32,160,3]}},{\"RecAug\":null},"
        "{\"CTCLabelEncode\":null},{\"RecResizeImg\":{\"image_shape\":[3,32,160]}},"
        "{\"KeepKeys\":{\"keep_keys\":[\"image\",\"label\",\"length\"]}}]";
    char ds_json[2048];
    // The SimpleDataSet without the broken lines, so both hold the same samples.
    char clean[1300], text[8192];
    snprintf(clean, sizeof clean, "%s/clean.txt", set.dir);
    size_t o = 0;
    for (int k = 0; k < 10; k++) {
        char t[16];
        int len = 1 + k % 6;
        for (int i = 0; i < len; i++) t[i] = (char)('a' + (k + i * 5) % 26);
        t[len] = 0;
        o += (size_t)snprintf(text + o, sizeof text - o, "images/%03d.png\t%s\n", k, t);
    }
    ck_assert(ocr_write_file_atomic(clean, text, o) == OCR_OK);
    snprintf(ds_json, sizeof ds_json,
             "{\"name\":\"SimpleDataSet\",\"data_dir\":\"%s\",\"label_file_list\":[\"%s\"],\"transforms\":%s}",
             set.dir, clean, transforms);
    OcrConfig *cs = loader_config(ds_json);
    // Write the LMDB from the same config's dataset.
    OcrDatasetOptions so = {0};
    const char *files[] = {clean};
    so.data_dir = set.dir;
    so.label_files = files;
    so.num_label_files = 1;
    OcrDataset simple;
    ck_assert(ocr_dataset_open(&simple, &so, &g_dict) == OCR_OK);
    OcrPackWriteStats st;
    ck_assert_msg(ocr_pack_write_lmdb(lmdb, &simple, &st) == OCR_OK, "%s", ocr_last_error());
    ocr_dataset_close(&simple);
    // PaddleOCR's LMDB config: no label_file_list (a ratio_list is accepted, with a note).
    snprintf(ds_json, sizeof ds_json, "{\"name\":\"LMDBDataSet\",\"data_dir\":\"%s\",\"ratio_list\":[0.5],"
             "\"transforms\":%s}", lmdb, transforms);
    OcrConfig *cl = loader_config(ds_json);
    uint64_t hs[16], hl[16];
    int64_t ns = epoch_hashes(cs, hs, 16), nl = epoch_hashes(cl, hl, 16);
    ck_assert_int_eq(ns, 3);
    ck_assert_int_eq(nl, ns);
    for (int i = 0; i < ns; i++) ck_assert_msg(hs[i] == hl[i], "batch %d differs", i);
    ck_assert_int_eq(ocr_config_num_ignored(cl), 1);
    const char *why;
    ck_assert_str_eq(ocr_config_ignored(cl, 0, &why), "Train.dataset.ratio_list");
    // data_dir is required.
    OcrLoaderConfig lc;
    ocr_config_set(cl, "Train.dataset.data_dir", "\"\"");
    ck_assert_int_eq(ocr_loader_config_parse(&lc, cl, "Train"), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "Train.dataset.data_dir is required for LMDBDataSet") != NULL, "%s",
                  ocr_last_error());
    ocr_config_free(cs);
    ocr_config_free(cl);
    ocr_test_remove_tree(set.dir);
    free(set.dir);
}
END_TEST

static Suite *lmdb_suite(void) {
    Suite *s = suite_create("data_lmdb");
    TCase *tc = tcase_create("lmdb");
    tcase_add_checked_fixture(tc, dict_setup, dict_teardown);
    tcase_add_test(tc, test_num_samples_parsing);
    tcase_add_test(tc, test_in_memory_records);
    tcase_add_test(tc, test_discovery_order);
    tcase_add_test(tc, test_fixture_skip_and_count);
    tcase_add_test(tc, test_leaf_that_is_not_lmdb);
    tcase_add_test(tc, test_writer_matches_simple_dataset);
    tcase_add_test(tc, test_loader_same_batches_as_simple);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(lmdb_suite()); }

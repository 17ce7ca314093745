// The packed cache: the hash, a round trip (records = decoded images resized to the
// pack height, texts, skipped broken images), the loader reading a pack (identical batches
// where no resampling is involved, ratio subsets), damaged headers/indexes refused,
// damaged records skipped and counted, and packs for another height, channel order or
// other label files refused with a clear message.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/config.h"
#include "core/fileio.h"
#include "data/loader.h"
#include "data/pack.h"
#include "data/transforms.h"
#include "tests/common/test_util.h"

#define NUM_IMAGES 30
static char dir[1024], pack_path[1200];

static void write_bytes(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fwrite(data, 1, size, f), size);
    fclose(f);
}

// Images k = 0..29 with heights 24/32/40; with_bad: image 7 missing, image 11 garbage.
static void make_dataset(int with_bad) {
    char *fresh = ocr_test_tmpdir("pack_");
    snprintf(dir, sizeof dir, "%s", fresh);
    free(fresh);
    snprintf(pack_path, sizeof pack_path, "%s/train.pack", dir);
    char path[1200], labels[4096] = "";
    size_t used = 0;
    snprintf(path, sizeof path, "%s/dict.txt", dir);
    write_bytes(path, "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n", 20);
    for (int k = 0; k < NUM_IMAGES; k++) {
        int h = 24 + (k % 3) * 8, w = 16 + (k * 29) % 150;
        OcrImage img;
        ck_assert_int_eq(ocr_image_alloc(&img, w, h, 3), OCR_OK);
        for (int i = 0; i < w * h * 3; i++) img.pixels[i] = (uint8_t)((i * 7 + k * 19) % 251);
        snprintf(path, sizeof path, "%s/im%02d.png", dir, k);
        if (with_bad && k == 11) {
            write_bytes(path, "not a png at all", 16);
        } else if (!(with_bad && k == 7)) {
            uint8_t *png;
            size_t size;
            ck_assert_int_eq(ocr_image_encode_png(&img, &png, &size), OCR_OK);
            write_bytes(path, png, size);
            free(png);
        }
        ocr_image_free(&img);
        char text[16];
        int len = 1 + k % 6;
        for (int i = 0; i < len; i++) text[i] = (char)('a' + (k + 2 * i) % 10);
        text[len] = 0;
        used += (size_t)snprintf(labels + used, sizeof labels - used, "im%02d.png\t%s\n", k, text);
    }
    snprintf(path, sizeof path, "%s/labels.txt", dir);
    write_bytes(path, labels, used);
}

static OcrConfig *make_config(int height, const char *mode, const char *ratio, int use_pack) {
    char json[16384];
    snprintf(json, sizeof json,
             "{\"Global\":{\"character_dict_path\":\"%s/dict.txt\",\"seed\":3},"
             "\"Eval\":{\"dataset\":{\"name\":\"SimpleDataSet\",\"data_dir\":\"%s\",\"label_file_list\":[\"%s/labels.txt\"]%s,"
             "\"transforms\":[{\"DecodeImage\":{\"img_mode\":\"%s\"}},{\"CTCLabelEncode\":null},"
             "{\"RecResizeImg\":{\"image_shape\":[3,%d,200]}}]},"
             "\"loader\":{\"shuffle\":false,\"batch_size_per_card\":7,\"num_workers\":2%s%s%s}}}",
             dir, dir, dir, ratio ? ratio : "", mode, height, use_pack ? ",\"pack_file\":\"" : "",
             use_pack ? pack_path : "", use_pack ? "\"" : "");
    OcrConfig *cfg;
    ck_assert_msg(ocr_config_parse(&cfg, json, "pack.json") == OCR_OK, "%s", ocr_last_error());
    return cfg;
}

// Writes the pack for the config's Eval section (as `ocrtrain pack` does).
static void build_pack(OcrConfig *cfg, OcrPackWriteStats *stats) {
    OcrLoaderConfig lc;
    ck_assert_int_eq(ocr_loader_config_parse(&lc, cfg, "Eval"), OCR_OK);
    OcrDict dict;
    ck_assert_int_eq(ocr_loader_load_dict(&dict, cfg), OCR_OK);
    OcrDatasetOptions opt = {0};
    opt.data_dir = lc.data_dir;
    opt.label_files = (const char *const *)lc.label_files;
    opt.num_label_files = lc.num_label_files;
    opt.max_text_length = lc.max_text_length;
    OcrDataset ds;
    ck_assert_int_eq(ocr_dataset_open(&ds, &opt, &dict), OCR_OK);
    OcrPackSpec spec = {lc.pack_height, lc.transforms.order, 0};
    ck_assert_int_eq(ocr_pack_source_hash(lc.data_dir, opt.label_files, lc.num_label_files, &spec.source_hash), OCR_OK);
    ck_assert_msg(ocr_pack_write(pack_path, &ds, &spec, 2, stats) == OCR_OK, "%s", ocr_last_error());
    ocr_dataset_close(&ds);
    ocr_dict_free(&dict);
    ocr_loader_config_free(&lc);
}

static void flip_byte(const char *path, size_t offset) {
    char *data;
    size_t size;
    ck_assert_int_eq(ocr_read_file(path, &data, &size), OCR_OK);
    ck_assert(offset < size);
    data[offset] ^= 0x20;
    write_bytes(path, data, size);
    free(data);
}

START_TEST(test_hash) {
    uint8_t buf[100];
    for (int i = 0; i < 100; i++) buf[i] = (uint8_t)(i * 37);
    uint64_t h = ocr_pack_hash64(buf, sizeof buf, 0);
    ck_assert(h == ocr_pack_hash64(buf, sizeof buf, 0));
    ck_assert(h != ocr_pack_hash64(buf, sizeof buf, 1));
    for (int bit = 0; bit < 800; bit++) {  // every single-bit change is seen
        buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        ck_assert(ocr_pack_hash64(buf, sizeof buf, 0) != h);
        buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    uint64_t prefix[71];
    for (int n = 0; n <= 70; n++) {  // every length (blocks, words, bytes) differs
        prefix[n] = ocr_pack_hash64(buf, (size_t)n, 0);
        for (int m = 0; m < n; m++) ck_assert(prefix[m] != prefix[n]);
    }
}
END_TEST

START_TEST(test_round_trip) {
    make_dataset(1);
    OcrConfig *cfg = make_config(32, "BGR", NULL, 0);
    OcrPackWriteStats stats;
    build_pack(cfg, &stats);
    ck_assert_int_eq(stats.written, NUM_IMAGES - 2);
    ck_assert_int_eq(stats.skipped.count[OCR_SKIP_IMAGE_MISSING], 1);
    ck_assert_int_eq(stats.skipped.count[OCR_SKIP_IMAGE_CORRUPT], 1);
    OcrPack p;
    ck_assert_int_eq(ocr_pack_open(&p, pack_path), OCR_OK);
    ck_assert_int_eq(p.height, 32);
    ck_assert_int_eq(p.channels, 3);
    ck_assert_int_eq(p.order, OCR_CHANNELS_BGR);
    ck_assert_int_eq(p.num_records, NUM_IMAGES - 2);
    ck_assert_int_eq(p.num_files, 1);
    ck_assert_ptr_nonnull(strstr(p.file_names[0], "labels.txt"));
    int64_t r = 0;
    for (int k = 0; k < NUM_IMAGES; k++) {
        if (k == 7 || k == 11) continue;
        OcrPackRecord rec;
        ck_assert_int_eq(ocr_pack_record(&p, r, &rec), OCR_OK);
        ck_assert_int_eq(rec.line, k + 1);
        char path[1200];
        snprintf(path, sizeof path, "%s/im%02d.png", dir, k);
        OcrImage img, want;
        ck_assert_int_eq(ocr_image_load(&img, path, OCR_CHANNELS_BGR), OCR_OK);
        int w = ocr_rec_resized_width(img.height, img.width, 32, 1 << 20);
        ck_assert_int_eq(rec.width, w);
        ck_assert_int_eq(ocr_image_resize(&want, &img, w, 32), OCR_OK);
        ck_assert(memcmp(rec.pixels, want.pixels, (size_t)w * 32 * 3) == 0);
        ck_assert_int_eq(rec.text_bytes, 1 + k % 6);
        ck_assert_int_eq(rec.text[0], 'a' + k % 10);
        ocr_image_free(&img);
        ocr_image_free(&want);
        r++;
    }
    ocr_pack_close(&p);
    ocr_config_free(cfg);
    ocr_test_remove_tree(dir);
}
END_TEST

// Runs the Eval epoch of a config; fills per-sample image hashes and indices.
static int run_eval(OcrConfig *cfg, uint64_t *hashes, int64_t *indices, OcrLoaderStats *stats, ocr_status_t *create) {
    OcrLoaderConfig lc;
    ck_assert_int_eq(ocr_loader_config_parse(&lc, cfg, "Eval"), OCR_OK);
    OcrDict dict;
    ck_assert_int_eq(ocr_loader_load_dict(&dict, cfg), OCR_OK);
    OcrLoader *l;
    *create = ocr_loader_create(&l, &lc, &dict);
    ocr_loader_config_free(&lc);
    if (*create != OCR_OK) {
        ocr_dict_free(&dict);
        return -1;
    }
    ck_assert_int_eq(ocr_loader_start_epoch(l, 0, 0), OCR_OK);
    const OcrBatch *b;
    int n = 0;
    while (ocr_loader_next(l, &b) == OCR_OK && b) {
        for (int i = 0; i < b->size; i++, n++) {
            size_t bytes = (size_t)b->height * b->width * b->channels;
            hashes[n] = ocr_pack_hash64(b->images + i * bytes, bytes, (uint64_t)b->widths[i]);
            hashes[n] = ocr_pack_hash64(b->labels + i * b->max_text_length, sizeof(int32_t) * b->lengths[i], hashes[n]);
            indices[n] = b->indices[i];
        }
        ocr_loader_release(l, b);
    }
    ocr_loader_stats(l, stats);
    ocr_loader_destroy(l);
    ocr_dict_free(&dict);
    return n;
}

START_TEST(test_loader_from_pack) {
    make_dataset(0);
    OcrConfig *files = make_config(32, "BGR", NULL, 0), *packed = make_config(32, "BGR", NULL, 1);
    OcrPackWriteStats stats;
    build_pack(files, &stats);
    ck_assert_int_eq(stats.written, NUM_IMAGES);
    uint64_t h1[64], h2[64];
    int64_t i1[64], i2[64];
    OcrLoaderStats s1, s2;
    ocr_status_t c;
    ck_assert_int_eq(run_eval(files, h1, i1, &s1, &c), NUM_IMAGES);
    ck_assert_int_eq(run_eval(packed, h2, i2, &s2, &c), NUM_IMAGES);
    // Images 32 high are stored unchanged, so those samples are identical; the others were
    // resampled twice (to 32 in the pack) and differ at most in pixels, not in labels.
    int same = 0;
    for (int k = 0; k < NUM_IMAGES; k++) {
        ck_assert_int_eq(i1[k], k);
        ck_assert_int_eq(i2[k], k);
        if (k % 3 == 1) ck_assert_msg(h1[k] == h2[k], "sample %d differs", k);
        same += h1[k] == h2[k];
    }
    ck_assert_int_ge(same, NUM_IMAGES / 3);
    ocr_config_free(packed);
    // ratio_list 0.5: 15 of the 30 records per epoch (round half to even), another draw
    // in another epoch.
    packed = make_config(32, "BGR", ",\"ratio_list\":[0.5]", 1);
    OcrLoaderConfig lc;
    ck_assert_int_eq(ocr_loader_config_parse(&lc, packed, "Eval"), OCR_OK);
    OcrDict dict;
    ck_assert_int_eq(ocr_loader_load_dict(&dict, packed), OCR_OK);
    OcrLoader *l;
    ck_assert_int_eq(ocr_loader_create(&l, &lc, &dict), OCR_OK);
    ck_assert_int_eq(ocr_loader_start_epoch(l, 0, 0), OCR_OK);
    ck_assert_int_eq(ocr_loader_num_samples(l), 15);
    int64_t first[15];
    const OcrBatch *b;
    int n = 0;
    while (ocr_loader_next(l, &b) == OCR_OK && b) {
        for (int i = 0; i < b->size; i++) first[n++] = b->indices[i];
        ocr_loader_release(l, b);
    }
    ck_assert_int_eq(n, 15);
    ck_assert_int_eq(ocr_loader_start_epoch(l, 1, 0), OCR_OK);
    ck_assert_int_eq(ocr_loader_num_samples(l), 15);
    int differ = 0;
    n = 0;
    while (ocr_loader_next(l, &b) == OCR_OK && b) {
        for (int i = 0; i < b->size; i++, n++) {
            differ += b->indices[i] != first[n];
            if (i > 0) ck_assert_int_gt(b->indices[i], b->indices[i - 1]);  // kept in file order
        }
        ocr_loader_release(l, b);
    }
    ck_assert_int_eq(n, 15);
    ck_assert_int_gt(differ, 0);
    ocr_loader_destroy(l);
    ocr_loader_config_free(&lc);
    ocr_dict_free(&dict);
    ocr_config_free(packed);
    ocr_config_free(files);
    ocr_test_remove_tree(dir);
}
END_TEST

START_TEST(test_damage) {
    make_dataset(0);
    OcrConfig *files = make_config(32, "BGR", NULL, 0), *packed = make_config(32, "BGR", NULL, 1);
    OcrPackWriteStats stats;
    build_pack(files, &stats);
    OcrPack p;
    ck_assert_int_eq(ocr_pack_open(&p, pack_path), OCR_OK);
    OcrPackRecord rec;
    ocr_pack_record_info(&p, 3, &rec);
    size_t off = (size_t)(rec.pixels - (const uint8_t *)p.map_) + 10;
    ocr_pack_close(&p);
    // A damaged record: detected when read, skipped and replaced by the next one.
    flip_byte(pack_path, off);
    ck_assert_int_eq(ocr_pack_open(&p, pack_path), OCR_OK);
    ck_assert_int_eq(ocr_pack_record(&p, 3, &rec), OCR_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "record 3"));
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "labels.txt:4"));
    ck_assert_int_eq(ocr_pack_record(&p, 4, &rec), OCR_OK);
    ocr_pack_close(&p);
    uint64_t h[64];
    int64_t idx[64];
    OcrLoaderStats s;
    ocr_status_t c;
    ck_assert_int_eq(run_eval(packed, h, idx, &s, &c), NUM_IMAGES);
    ck_assert_int_eq(idx[3], 4);
    ck_assert_int_eq(s.skipped.count[OCR_SKIP_IMAGE_CORRUPT], 1);
    flip_byte(pack_path, off);  // repaired
    ck_assert_int_eq(ocr_pack_open(&p, pack_path), OCR_OK);
    size_t index_off = (size_t)(p.index_ - (const uint8_t *)p.map_), text_off = (size_t)(p.texts_ - (const char *)p.map_);
    size_t size = p.map_size_;
    ocr_pack_close(&p);
    // Header, text section and index damage: the file is refused with a message.
    const size_t offs[3] = {20, text_off + 2, index_off + 45};
    const char *what[3] = {"header checksum", "text section checksum", "index checksum"};
    for (int i = 0; i < 3; i++) {
        flip_byte(pack_path, offs[i]);
        ck_assert_int_eq(ocr_pack_open(&p, pack_path), OCR_ERR_FORMAT);
        ck_assert_msg(strstr(ocr_last_error(), what[i]) && strstr(ocr_last_error(), pack_path), "%s",
                      ocr_last_error());
        flip_byte(pack_path, offs[i]);
    }
    // Truncated; wrong magic; not there.
    char *data;
    size_t n;
    ck_assert_int_eq(ocr_read_file(pack_path, &data, &n), OCR_OK);
    ck_assert_int_eq(n, size);
    write_bytes(pack_path, data, n - 7);
    ck_assert_int_eq(ocr_pack_open(&p, pack_path), OCR_ERR_FORMAT);
    char zip[200];
    memset(zip, '.', sizeof zip);
    memcpy(zip, "PK\3\4", 4);  // a zip file's start
    write_bytes(pack_path, zip, sizeof zip);
    ck_assert_int_eq(ocr_pack_open(&p, pack_path), OCR_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "magic"));
    write_bytes(pack_path, data, n);
    free(data);
    ck_assert_int_eq(ocr_pack_open(&p, "/nonexistent.pack"), OCR_ERR_NOT_FOUND);
    ocr_config_free(files);
    ocr_config_free(packed);
    ocr_test_remove_tree(dir);
}
END_TEST

START_TEST(test_refused_for_other_config) {
    make_dataset(0);
    OcrConfig *files = make_config(32, "BGR", NULL, 0);
    OcrPackWriteStats stats;
    build_pack(files, &stats);
    uint64_t h[64];
    int64_t idx[64];
    OcrLoaderStats s;
    ocr_status_t c;
    // Another height.
    OcrConfig *cfg = make_config(48, "BGR", NULL, 1);
    ck_assert_int_eq(run_eval(cfg, h, idx, &s, &c), -1);
    ck_assert_int_eq(c, OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "built for height 32") && strstr(ocr_last_error(), "needs height 48") &&
                      strstr(ocr_last_error(), "ocrtrain pack"),
                  "%s", ocr_last_error());
    ocr_config_free(cfg);
    // Another channel order.
    cfg = make_config(32, "RGB", NULL, 1);
    ck_assert_int_eq(run_eval(cfg, h, idx, &s, &c), -1);
    ck_assert_int_eq(c, OCR_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "holds BGR images"));
    ocr_config_free(cfg);
    // Label files changed since the pack was built.
    char path[1200];
    snprintf(path, sizeof path, "%s/labels.txt", dir);
    FILE *f = fopen(path, "ab");
    fputs("im00.png\tabc\n", f);
    fclose(f);
    cfg = make_config(32, "BGR", NULL, 1);
    ck_assert_int_eq(run_eval(cfg, h, idx, &s, &c), -1);
    ck_assert_int_eq(c, OCR_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "other label files"));
    // Without the label files the pack is used as it is.
    unlink(path);
    ck_assert_int_eq(run_eval(cfg, h, idx, &s, &c), NUM_IMAGES);
    ocr_config_free(cfg);
    ocr_config_free(files);
    ocr_test_remove_tree(dir);
}
END_TEST

int main(void) {
    ocr_log_set_level(OCR_LOG_ERROR);
    Suite *s = suite_create("data_pack");
    TCase *tc = tcase_create("pack");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_hash);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_loader_from_pack);
    tcase_add_test(tc, test_damage);
    tcase_add_test(tc, test_refused_for_other_config);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

// The threaded loader on a small generated dataset: identical batches for any number of
// workers and across runs, corrupt/missing images skipped, counted and replaced (random in
// training, next in evaluation), batch layout (pixels = the transforms' output, padding,
// widths, labels), shutdown and epoch restarts mid-epoch, exact resume, multi-scale
// batches, tracked batch memory, and config errors.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/config.h"
#include "core/fileio.h"
#include "core/memory.h"
#include "data/loader.h"
#include "data/pack.h"
#include "tests/common/test_util.h"

#define NUM_IMAGES 40
static char dir[1024];
static const int bad_at[3] = {5, 17, 30};  // label lines (0-based among images) that are broken

// Plain writes (no fsync: the atomic writer's syncs would dominate the test's time).
static void write_bytes(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fwrite(data, 1, size, f), size);
    fclose(f);
}

static void write_text(const char *name, const char *text) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    write_bytes(path, text, strlen(text));
}

static void write_png(const char *path, const OcrImage *img) {
    uint8_t *png;
    size_t size;
    ck_assert_int_eq(ocr_image_encode_png(img, &png, &size), OCR_OK);
    write_bytes(path, png, size);
    free(png);
}

// 40 labelled images (heights 24..40, widths 20..200), three of them broken: a missing
// file, a truncated PNG and garbage bytes. Labels use the letters a..j.
static void make_dataset(int with_bad) {
    char *fresh = ocr_test_tmpdir("loader_");
    snprintf(dir, sizeof dir, "%s", fresh);
    free(fresh);
    write_text("dict.txt", "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n");
    char labels[8192] = "";
    size_t used = 0;
    for (int k = 0; k < NUM_IMAGES; k++) {
        int h = 24 + (k % 3) * 8, w = 20 + (k * 37) % 180;
        OcrImage img;
        ck_assert_int_eq(ocr_image_alloc(&img, w, h, 3), OCR_OK);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                for (int c = 0; c < 3; c++)
                    img.pixels[(y * w + x) * 3 + c] = (uint8_t)((x * 7 + y * 13 + c * 50 + k * 31) % 256);
        char name[64], path[1200];
        snprintf(name, sizeof name, "img_%02d.png", k);
        int bad = with_bad && (k == bad_at[0] || k == bad_at[1] || k == bad_at[2]);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        if (!bad || k == bad_at[1] || k == bad_at[2]) write_png(path, &img);
        if (bad && k == bad_at[1]) {  // truncated
            char *data;
            size_t size;
            ck_assert_int_eq(ocr_read_file(path, &data, &size), OCR_OK);
            write_bytes(path, data, size / 2);
            free(data);
        }
        if (bad && k == bad_at[2]) {  // garbage
            char junk[300];
            for (int i = 0; i < 300; i++) junk[i] = (char)(i * 97 + 13);
            write_bytes(path, junk, sizeof junk);
        }
        ocr_image_free(&img);
        char text[16];
        int len = 1 + k % 8;
        for (int i = 0; i < len; i++) text[i] = (char)('a' + (k + i * 3) % 10);
        text[len] = 0;
        used += (size_t)snprintf(labels + used, sizeof labels - used, "%s\t%s\n", name, text);
    }
    write_text("labels.txt", labels);
}

static void teardown(void) { ocr_test_remove_tree(dir); }

static const char *aug_transforms =
    "[{\"DecodeImage\":{\"img_mode\":\"BGR\"}},"
    "{\"RecConAug\":{\"prob\":0.5,\"ext_data_num\":2,\"image_shape\":[32,160,3]}},"
    "{\"RecAug\":null},{\"CTCLabelEncode\":null},"
    "{\"RecResizeImg\":{\"image_shape\":[3,32,160]}},{\"KeepKeys\":{\"keep_keys\":[\"image\",\"label\"]}}]";
static const char *plain_transforms =
    "[{\"DecodeImage\":{\"img_mode\":\"BGR\"}},{\"CTCLabelEncode\":null},"
    "{\"RecResizeImg\":{\"image_shape\":[3,32,160]}}]";

// A config with one section (Train or Eval) over the generated dataset.
static OcrConfig *make_config(const char *section, const char *transforms, int batch, int workers, int prefetch,
                              int shuffle, const char *extra_loader) {
    char *json = malloc(16384);
    snprintf(json, 16384,
             "{\"Global\":{\"character_dict_path\":\"%s/dict.txt\",\"max_text_length\":25,\"seed\":7},"
             "\"%s\":{\"dataset\":{\"name\":\"SimpleDataSet\",\"data_dir\":\"%s\","
             "\"label_file_list\":[\"%s/labels.txt\"],\"transforms\":%s},"
             "\"loader\":{\"shuffle\":%s,\"batch_size_per_card\":%d,\"drop_last\":false,\"num_workers\":%d,"
             "\"prefetch\":%d%s}}}",
             dir, section, dir, dir, transforms, shuffle ? "true" : "false", batch, workers, prefetch,
             extra_loader ? extra_loader : "");
    OcrConfig *cfg;
    ck_assert_msg(ocr_config_parse(&cfg, json, "test.json") == OCR_OK, "%s", ocr_last_error());
    free(json);
    return cfg;
}

static OcrLoader *open_loader(OcrConfig *cfg, const char *section, OcrDict *dict) {
    OcrLoaderConfig lc;
    ck_assert_msg(ocr_loader_config_parse(&lc, cfg, section) == OCR_OK, "%s", ocr_last_error());
    ck_assert_msg(ocr_loader_load_dict(dict, cfg) == OCR_OK, "%s", ocr_last_error());
    OcrLoader *l;
    ck_assert_msg(ocr_loader_create(&l, &lc, dict) == OCR_OK, "%s", ocr_last_error());
    ocr_loader_config_free(&lc);
    return l;
}

static uint64_t batch_hash(const OcrBatch *b) {
    uint64_t h = ocr_pack_hash64(b->images, (size_t)b->size * b->height * b->width * b->channels, (uint64_t)b->index);
    h = ocr_pack_hash64(b->widths, sizeof(int32_t) * b->size, h);
    h = ocr_pack_hash64(b->valid_ratios, sizeof(float) * b->size, h);
    h = ocr_pack_hash64(b->labels, sizeof(int32_t) * b->size * b->max_text_length, h);
    h = ocr_pack_hash64(b->lengths, sizeof(int32_t) * b->size, h);
    h = ocr_pack_hash64(b->indices, sizeof(int64_t) * b->size, h);
    int meta[3] = {b->size, b->height, b->width};
    return ocr_pack_hash64(meta, sizeof meta, h);
}

// Runs an epoch from `first`, filling hashes[first..]; returns the number of batches.
static int64_t run_epoch(OcrLoader *l, uint64_t epoch, int64_t first, uint64_t *hashes) {
    ck_assert_int_eq(ocr_loader_start_epoch(l, epoch, first), OCR_OK);
    int64_t k = first;
    for (;;) {
        const OcrBatch *b;
        ck_assert_msg(ocr_loader_next(l, &b) == OCR_OK, "%s", ocr_last_error());
        if (!b) break;
        ck_assert_int_eq(b->index, k);
        ck_assert(b->epoch == epoch);
        if (hashes) hashes[k] = batch_hash(b);
        k++;
        ocr_loader_release(l, b);
    }
    ck_assert_int_eq(k, ocr_loader_num_batches(l));
    return k;
}

START_TEST(test_deterministic_across_threads) {
    make_dataset(1);
    uint64_t ref[16], got[16], ep1[16];
    OcrLoaderStats sref;
    int64_t nb = 0;
    const int workers[4] = {1, 4, 3, 2}, prefetch[4] = {1, 3, 2, 5};
    for (int run = 0; run < 4; run++) {
        OcrConfig *cfg = make_config("Train", aug_transforms, 6, workers[run], prefetch[run], 1, NULL);
        OcrDict dict;
        OcrLoader *l = open_loader(cfg, "Train", &dict);
        int64_t n = run_epoch(l, 3, 0, run == 0 ? ref : got);
        OcrLoaderStats s;
        ocr_loader_stats(l, &s);
        if (run == 0) {
            nb = n;
            sref = s;
            ck_assert_int_eq(nb, 7);  // 40 samples, batches of 6
            ck_assert_int_gt(s.con_aug_merges, 0);
            run_epoch(l, 4, 0, ep1);
            int same = 0;
            for (int k = 0; k < nb; k++) same += ep1[k] == ref[k];
            ck_assert_int_eq(same, 0);  // another epoch, other batches
        } else {
            ck_assert_int_eq(n, nb);
            for (int k = 0; k < nb; k++) ck_assert_msg(got[k] == ref[k], "run %d batch %d differs", run, k);
            ck_assert_int_eq(s.replaced, sref.replaced);
            ck_assert_int_eq(s.con_aug_merges, sref.con_aug_merges);
            for (int r = 0; r < OCR_SKIP_REASON_COUNT; r++) {
                ck_assert_int_eq(s.skipped.count[r], sref.skipped.count[r]);
                ck_assert_str_eq(s.skipped.example[r], sref.skipped.example[r]);
            }
        }
        ocr_loader_destroy(l);
        ocr_dict_free(&dict);
        ocr_config_free(cfg);
    }
    teardown();
}
END_TEST

START_TEST(test_corrupt_files_train) {
    make_dataset(1);
    OcrConfig *cfg = make_config("Train", aug_transforms, 8, 3, 2, 1, NULL);
    OcrDict dict;
    OcrLoader *l = open_loader(cfg, "Train", &dict);
    const OcrDataset *ds = ocr_loader_dataset(l);
    ck_assert_ptr_nonnull(ds);
    int64_t bad_index[3];
    for (int j = 0; j < 3; j++) {
        char want[64];
        snprintf(want, sizeof want, "img_%02d.png", bad_at[j]);
        bad_index[j] = -1;
        for (int64_t i = 0; i < ocr_dataset_size(ds); i++) {
            OcrSample s;
            ck_assert_int_eq(ocr_dataset_get(ds, i, &s), OCR_OK);
            if (strstr(s.path, want)) bad_index[j] = i;
        }
        ck_assert_int_ge(bad_index[j], 0);
    }
    ck_assert_int_eq(ocr_loader_start_epoch(l, 0, 0), OCR_OK);
    const OcrBatch *b;
    int64_t total = 0;
    while (ocr_loader_next(l, &b) == OCR_OK && b) {
        for (int i = 0; i < b->size; i++) {
            for (int j = 0; j < 3; j++) ck_assert_int_ne(b->indices[i], bad_index[j]);
            ck_assert(b->lengths[i] >= 1 && b->lengths[i] <= 25);
        }
        total += b->size;
        ocr_loader_release(l, b);
    }
    ck_assert_int_eq(total, NUM_IMAGES);  // every slot filled despite three broken images
    OcrLoaderStats s;
    ocr_loader_stats(l, &s);
    ck_assert_int_ge(s.skipped.count[OCR_SKIP_IMAGE_MISSING], 1);
    ck_assert_int_ge(s.skipped.count[OCR_SKIP_IMAGE_CORRUPT], 2);
    ck_assert_int_ge(s.replaced, 3);
    ck_assert_ptr_nonnull(strstr(s.skipped.example[OCR_SKIP_IMAGE_MISSING], "img_05.png"));
    ocr_loader_destroy(l);
    ocr_dict_free(&dict);
    ocr_config_free(cfg);
    teardown();
}
END_TEST

START_TEST(test_eval_next_index_and_layout) {
    make_dataset(1);
    OcrConfig *cfg = make_config("Eval", plain_transforms, 16, 2, 2, 0, NULL);
    OcrDict dict;
    OcrMemStats m0 = ocr_mem_stats(ocr_cpu());
    OcrLoader *l = open_loader(cfg, "Eval", &dict);
    OcrMemStats m1 = ocr_mem_stats(ocr_cpu());
    ck_assert_int_gt(m1.current[OCR_MEM_DATA], m0.current[OCR_MEM_DATA]);
    const OcrDataset *ds = ocr_loader_dataset(l);
    ck_assert_int_eq(ocr_loader_start_epoch(l, 0, 0), OCR_OK);
    const OcrBatch *b;
    int64_t slot = 0;
    while (ocr_loader_next(l, &b) == OCR_OK && b) {
        ck_assert_int_eq(b->height, 32);
        ck_assert_int_eq(b->width, 160);
        ck_assert_int_eq(b->channels, 3);
        for (int i = 0; i < b->size; i++, slot++) {
            // Without shuffling slot k is dataset index k; a broken image is replaced by the next.
            int broken = slot == bad_at[0] || slot == bad_at[1] || slot == bad_at[2];
            ck_assert_int_eq(b->indices[i], broken ? slot + 1 : slot);
            // The pixels are exactly RecResizeImg of the decoded image.
            OcrImage img;
            ck_assert_int_eq(ocr_dataset_load_image(ds, b->indices[i], OCR_CHANNELS_BGR, &img, NULL), OCR_OK);
            uint8_t *want = malloc(32 * 160 * 3);
            int rw;
            float vr;
            ck_assert_int_eq(ocr_rec_resize_pad(want, 32, 160, 3, &img, 1, &rw, &vr), OCR_OK);
            ck_assert_int_eq(b->widths[i], rw);
            ck_assert(b->valid_ratios[i] == vr);
            ck_assert_int_eq(rw, ocr_rec_resized_width(img.height, img.width, 32, 160));
            ck_assert(memcmp(b->images + (size_t)i * 32 * 160 * 3, want, 32 * 160 * 3) == 0);
            ck_assert_int_eq(b->images[(size_t)i * 32 * 160 * 3 + 159 * 3], rw < 160 ? OCR_PAD_VALUE : want[159 * 3]);
            free(want);
            ocr_image_free(&img);
            OcrSample smp;
            ck_assert_int_eq(ocr_dataset_get(ds, b->indices[i], &smp), OCR_OK);
            ck_assert_int_eq(b->lengths[i], smp.label_len);
            for (int j = 0; j < 25; j++)
                ck_assert_int_eq(b->labels[i * 25 + j], j < smp.label_len ? smp.label[j] : 0);
        }
        ocr_loader_release(l, b);
    }
    ck_assert_int_eq(slot, NUM_IMAGES);
    OcrLoaderStats s;
    ocr_loader_stats(l, &s);
    ck_assert_int_eq(s.replaced, 3);
    ck_assert_int_eq(ocr_skip_stats_total(&s.skipped), 3);
    ck_assert_int_eq(s.skipped.count[OCR_SKIP_IMAGE_MISSING], 1);
    ocr_loader_destroy(l);
    OcrMemStats m2 = ocr_mem_stats(ocr_cpu());
    ck_assert_int_eq(m2.current[OCR_MEM_DATA], m0.current[OCR_MEM_DATA]);
    ocr_dict_free(&dict);
    ocr_config_free(cfg);
    teardown();
}
END_TEST

START_TEST(test_shutdown_and_restart_mid_epoch) {
    make_dataset(1);
    OcrConfig *cfg = make_config("Train", aug_transforms, 4, 4, 4, 1, NULL);
    OcrDict dict;
    // Destroy with one batch held and workers busy.
    OcrLoader *l = open_loader(cfg, "Train", &dict);
    ck_assert_int_eq(ocr_loader_start_epoch(l, 0, 0), OCR_OK);
    const OcrBatch *b;
    ck_assert_int_eq(ocr_loader_next(l, &b), OCR_OK);
    ck_assert_ptr_nonnull(b);
    ocr_loader_destroy(l);
    ocr_dict_free(&dict);
    // Destroy right after starting; and before any epoch.
    l = open_loader(cfg, "Train", &dict);
    ck_assert_int_eq(ocr_loader_start_epoch(l, 0, 0), OCR_OK);
    ocr_loader_destroy(l);
    ocr_dict_free(&dict);
    l = open_loader(cfg, "Train", &dict);
    ocr_loader_destroy(l);
    ocr_dict_free(&dict);
    // Abandon epoch 0 after two batches (the second still held), run epoch 1 in full: it
    // matches epoch 1 of a fresh loader.
    uint64_t ref[16], got[16];
    l = open_loader(cfg, "Train", &dict);
    int64_t nb = run_epoch(l, 1, 0, ref);
    ocr_loader_destroy(l);
    ocr_dict_free(&dict);
    l = open_loader(cfg, "Train", &dict);
    ck_assert_int_eq(ocr_loader_start_epoch(l, 0, 0), OCR_OK);
    ck_assert_int_eq(ocr_loader_next(l, &b), OCR_OK);
    ocr_loader_release(l, b);
    ck_assert_int_eq(ocr_loader_next(l, &b), OCR_OK);
    ck_assert_int_eq(run_epoch(l, 1, 0, got), nb);
    for (int k = 0; k < nb; k++) ck_assert(got[k] == ref[k]);
    // Holding every buffer is an error, not a hang.
    ck_assert_int_eq(ocr_loader_start_epoch(l, 2, 0), OCR_OK);
    int held = 0;
    ocr_status_t st;
    while ((st = ocr_loader_next(l, &b)) == OCR_OK && b) held++;
    ck_assert_int_eq(st, OCR_ERR_INVALID_ARG);
    ck_assert_int_eq(held, 5);  // prefetch 4 + 1
    ocr_loader_destroy(l);
    ocr_dict_free(&dict);
    ocr_config_free(cfg);
    teardown();
}
END_TEST

START_TEST(test_resume) {
    make_dataset(0);
    OcrConfig *cfg = make_config("Train", aug_transforms, 5, 3, 2, 1, NULL);
    OcrDict dict;
    uint64_t ref[16], got[16];
    OcrLoader *l = open_loader(cfg, "Train", &dict);
    int64_t nb = run_epoch(l, 2, 0, ref);
    ck_assert_int_eq(nb, 8);
    ocr_loader_destroy(l);
    ocr_dict_free(&dict);
    // Consume three batches, note the position, resume there in a new loader.
    l = open_loader(cfg, "Train", &dict);
    ck_assert_int_eq(ocr_loader_start_epoch(l, 2, 0), OCR_OK);
    for (int k = 0; k < 3; k++) {
        const OcrBatch *b;
        ck_assert_int_eq(ocr_loader_next(l, &b), OCR_OK);
        ck_assert(batch_hash(b) == ref[k]);
        ocr_loader_release(l, b);
    }
    OcrLoaderPosition pos = ocr_loader_position(l);
    ck_assert(pos.epoch == 2);
    ck_assert_int_eq(pos.next_batch, 3);
    ocr_loader_destroy(l);
    ocr_dict_free(&dict);
    l = open_loader(cfg, "Train", &dict);
    ck_assert_int_eq(run_epoch(l, pos.epoch, pos.next_batch, got), nb);
    for (int64_t k = pos.next_batch; k < nb; k++) ck_assert(got[k] == ref[k]);
    ck_assert_int_eq(ocr_loader_start_epoch(l, 2, nb + 1), OCR_ERR_INVALID_ARG);
    ocr_loader_destroy(l);
    ocr_dict_free(&dict);
    ocr_config_free(cfg);
    teardown();
}
END_TEST

START_TEST(test_multiscale) {
    make_dataset(0);
    char json[4096];
    snprintf(json, sizeof json,
             "{\"Global\":{\"character_dict_path\":\"%s/dict.txt\",\"max_text_length\":25},"
             "\"Train\":{\"dataset\":{\"name\":\"MultiScaleDataSet\",\"data_dir\":\"%s\","
             "\"label_file_list\":[\"%s/labels.txt\"],\"transforms\":[{\"DecodeImage\":null},{\"RecAug\":null},"
             "{\"CTCLabelEncode\":null},{\"KeepKeys\":{\"keep_keys\":[\"image\"]}}]},"
             "\"sampler\":{\"name\":\"MultiScaleSampler\",\"scales\":[[128,16],[128,32]],\"first_bs\":6,"
             "\"fix_bs\":false,\"divided_factor\":[8,16],\"is_training\":true},"
             "\"loader\":{\"shuffle\":true,\"drop_last\":true,\"num_workers\":2}}}",
             dir, dir, dir);
    OcrConfig *cfg;
    ck_assert_int_eq(ocr_config_parse(&cfg, json, "ms.json"), OCR_OK);
    OcrDict dict;
    OcrLoader *l = open_loader(cfg, "Train", &dict);
    ck_assert_int_eq(ocr_loader_start_epoch(l, 0, 0), OCR_OK);
    const OcrBatch *b;
    int seen16 = 0, seen32 = 0, samples = 0;
    while (ocr_loader_next(l, &b) == OCR_OK && b) {
        ck_assert_int_eq(b->width, 128);
        if (b->height == 16) {
            ck_assert_int_eq(b->size, 6);
            seen16++;
        } else {
            ck_assert_int_eq(b->height, 32);
            ck_assert_int_eq(b->size, 3);  // int(128·16·6 / (128·32))
            seen32++;
        }
        for (int i = 0; i < b->size; i++) ck_assert(b->widths[i] >= 1 && b->widths[i] <= 128);
        samples += b->size;
        ocr_loader_release(l, b);
    }
    ck_assert(seen16 >= 4 && seen32 >= 4);
    ck_assert_int_le(samples, NUM_IMAGES);
    ck_assert_int_gt(samples, NUM_IMAGES - 6);
    ocr_loader_destroy(l);
    ocr_dict_free(&dict);
    ocr_config_free(cfg);
    teardown();
}
END_TEST

START_TEST(test_config_errors) {
    make_dataset(0);
    OcrLoaderConfig lc;
    OcrConfig *cfg = make_config("Train", "[{\"DecodeImage\":null},{\"Bogus\":null},{\"CTCLabelEncode\":null}]", 4, 1,
                                 1, 1, NULL);
    ck_assert_int_eq(ocr_loader_config_parse(&lc, cfg, "Train"), OCR_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "Train.dataset.transforms.1: unknown transform Bogus"));
    ocr_config_free(cfg);
    cfg = make_config("Train", plain_transforms, 4, 1, 1, 1, ",\"workers\":3");
    ck_assert_int_eq(ocr_loader_config_parse(&lc, cfg, "Train"), OCR_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "Train.loader.workers"));
    ck_assert_int_eq(ocr_loader_config_parse(&lc, cfg, "Eval"), OCR_ERR_CONFIG);  // no Eval section
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "Eval.dataset is missing"));
    ocr_config_free(cfg);
    // No RecResizeImg for a SimpleDataSet.
    cfg = make_config("Train", "[{\"DecodeImage\":null},{\"CTCLabelEncode\":null}]", 4, 1, 1, 1, NULL);
    ck_assert_int_eq(ocr_loader_config_parse(&lc, cfg, "Train"), OCR_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "RecResizeImg"));
    ocr_config_free(cfg);
    // A missing label file fails at create with its name.
    cfg = make_config("Train", plain_transforms, 4, 1, 1, 1, NULL);
    ck_assert_int_eq(ocr_loader_config_parse(&lc, cfg, "Train"), OCR_OK);
    free(lc.label_files[0]);
    lc.label_files[0] = strdup("/nonexistent/labels.txt");
    OcrDict dict;
    ck_assert_int_eq(ocr_loader_load_dict(&dict, cfg), OCR_OK);
    OcrLoader *l;
    ck_assert_int_ne(ocr_loader_create(&l, &lc, &dict), OCR_OK);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "/nonexistent/labels.txt"));
    ocr_loader_config_free(&lc);
    ocr_dict_free(&dict);
    ocr_config_free(cfg);
    teardown();
}
END_TEST

int main(void) {
    ocr_log_set_level(OCR_LOG_ERROR);  // the skipped-image warnings are expected here
    Suite *s = suite_create("data_loader");
    TCase *tc = tcase_create("loader");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_deterministic_across_threads);
    tcase_add_test(tc, test_corrupt_files_train);
    tcase_add_test(tc, test_eval_next_index_and_layout);
    tcase_add_test(tc, test_shutdown_and_restart_mid_epoch);
    tcase_add_test(tc, test_resume);
    tcase_add_test(tc, test_multiscale);
    tcase_add_test(tc, test_config_errors);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

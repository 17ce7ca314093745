// Per-batch mix (Train.dataset.batch_ratio_list, data/sampler.h): the counts of each source in a
// batch are exact (largest remainder, summing to the batch), every batch of an epoch holds them,
// the target source is used once per epoch and the others cycled, the plan is a pure function of
// (seed, epoch, sizes) and sharded into disjoint equal shares, and bad values are refused naming
// the key before any data is read; through the loader, every batch's label files are in the mix.
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/fileio.h"
#include "data/image.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "tests/common/test_util.h"

static OcrSamplerOptions mixed(int bs, int rank, int world, int drop_last, double m0, double m1) {
    OcrSamplerOptions o;
    memset(&o, 0, sizeof o);
    o.shuffle = 1;
    o.drop_last = drop_last;
    o.rank = rank;
    o.world_size = world;
    o.seed = 99;
    o.num_scales = 1;
    o.scales[0] = (OcrBatchShape){320, 48, bs};
    o.num_sources = 2;
    o.mix[0] = m0;
    o.mix[1] = m1;
    return o;
}

START_TEST(test_counts) {
    int c[3];
    const double a[2] = {0.75, 0.25};
    ck_assert_int_eq(ocr_sampler_mix_counts(a, 2, 8, c), OCR_OK);
    ck_assert_int_eq(c[0], 6);
    ck_assert_int_eq(c[1], 2);
    ck_assert_int_eq(ocr_sampler_mix_counts(a, 2, 10, c), OCR_OK);  // 7.5 / 2.5: the tie goes to the target
    ck_assert_int_eq(c[0], 8);
    ck_assert_int_eq(c[1], 2);
    const double b[3] = {0.5, 0.3, 0.2};
    ck_assert_int_eq(ocr_sampler_mix_counts(b, 3, 7, c), OCR_OK);  // 3.5, 2.1, 1.4 → 3+1, 2, 1
    ck_assert_int_eq(c[0] + c[1] + c[2], 7);
    ck_assert_int_eq(c[0], 4);
    ck_assert_int_eq(c[1], 2);
    ck_assert_int_eq(c[2], 1);
    const double d[2] = {0.95, 0.05};
    ck_assert_int_eq(ocr_sampler_mix_counts(d, 2, 8, c), OCR_ERR_INVALID_ARG);  // 0.4 of a sample
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "entry 1"));
    // Fractions: each in (0, 1], summing to 1 within 1e-6.
    const double bad1[2] = {0.0, 1.0}, bad2[2] = {1.5, -0.5}, bad3[2] = {0.7, 0.2}, ok[2] = {0.7, 0.3000000004};
    ck_assert_int_eq(ocr_sampler_mix_check(bad1, 2), OCR_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "entry 0"));
    ck_assert_int_eq(ocr_sampler_mix_check(bad2, 2), OCR_ERR_INVALID_ARG);
    ck_assert_int_eq(ocr_sampler_mix_check(bad3, 2), OCR_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "sum to 0.9"));
    ck_assert_int_eq(ocr_sampler_mix_check(ok, 2), OCR_OK);
}
END_TEST

// Every batch of one rank: exactly counts of each source, in the dataset's index ranges.
START_TEST(test_plan_exact_and_epoch) {
    const int64_t sizes[2] = {40, 7};  // target 40, general 7 (cycled: an epoch needs 14 of them)
    OcrSamplerOptions o = mixed(8, 0, 1, 0, 0.75, 0.25);
    OcrSampler s;
    ck_assert_int_eq(ocr_sampler_init(&s, &o), OCR_OK);
    ck_assert_int_eq(ocr_sampler_set_epoch(&s, 0, 47), OCR_ERR_INVALID_ARG);  // a mix needs the sizes
    ck_assert_int_eq(ocr_sampler_set_epoch_sources(&s, 3, sizes, 2), OCR_OK);
    // 40 / 6 = 6 full batches, then the 4 left with floor(4 / 3) = 1 general sample.
    ck_assert_int_eq(s.num_batches, 7);
    int seen[40] = {0}, general_seen[7] = {0};
    for (int64_t b = 0; b < s.num_batches; b++) {
        OcrSamplerBatch sb;
        ocr_sampler_batch(&s, b, &sb);
        int t = 0, g = 0;
        for (int i = 0; i < sb.size; i++) {
            int64_t idx = ocr_sampler_index(&s, sb.slots[i]);
            ck_assert(idx >= 0 && idx < 47);
            if (idx < 40) t++, seen[idx]++;
            else g++, general_seen[idx - 40]++;
        }
        if (b < 6) {
            ck_assert_int_eq(sb.size, 8);
            ck_assert_int_eq(t, 6);
            ck_assert_int_eq(g, 2);
        } else {
            ck_assert_int_eq(t, 4);
            ck_assert_int_eq(g, 1);
        }
    }
    for (int i = 0; i < 40; i++) ck_assert_int_eq(seen[i], 1);  // the target once per epoch
    // 13 general draws over 7 samples: each cycle uses every one before any repeats.
    for (int i = 0; i < 7; i++) ck_assert(general_seen[i] == 1 || general_seen[i] == 2);
    // Deterministic: the same epoch replanned after another is the same plan; another epoch is not.
    OcrSampler s2;
    ck_assert_int_eq(ocr_sampler_init(&s2, &o), OCR_OK);
    ck_assert_int_eq(ocr_sampler_set_epoch_sources(&s2, 5, sizes, 2), OCR_OK);
    int differs = 0;
    for (int i = 0; i < 47 && i < s2.num_samples; i++) differs += ocr_sampler_index(&s, i) != ocr_sampler_index(&s2, i);
    ck_assert_int_gt(differs, 0);
    ck_assert_int_eq(ocr_sampler_set_epoch_sources(&s2, 3, sizes, 2), OCR_OK);
    ck_assert_int_eq(s2.num_samples, s.num_samples);
    for (int64_t i = 0; i < s.num_samples; i++) ck_assert_int_eq(ocr_sampler_index(&s, i), ocr_sampler_index(&s2, i));
    // drop_last: the smaller last batch goes.
    OcrSampler d;
    o.drop_last = 1;
    ck_assert_int_eq(ocr_sampler_init(&d, &o), OCR_OK);
    ck_assert_int_eq(ocr_sampler_set_epoch_sources(&d, 3, sizes, 2), OCR_OK);
    ck_assert_int_eq(d.num_batches, 6);
    // An empty source is named.
    const int64_t empty[2] = {40, 0};
    ck_assert_int_eq(ocr_sampler_set_epoch_sources(&d, 3, empty, 2), OCR_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "label file 1"));
    ocr_sampler_free(&d);
    ocr_sampler_free(&s2);
    ocr_sampler_free(&s);
    // A batch that cannot hold a sample of every source is refused at init.
    OcrSamplerOptions tiny = mixed(2, 0, 1, 0, 0.9, 0.1);
    ck_assert_int_eq(ocr_sampler_init(&s, &tiny), OCR_ERR_INVALID_ARG);
}
END_TEST

// No batch is larger than the shape's batch size (the buffers are sized by it), whatever the mix
// and the remainder, and every batch holds every source.
START_TEST(test_batches_fit) {
    const double mixes[4][3] = {{0.4, 0.6, 0}, {0.5, 0.3, 0.2}, {0.34, 0.33, 0.33}, {0.9, 0.05, 0.05}};
    const int nsrc[4] = {2, 3, 3, 3};
    for (int m = 0; m < 4; m++)
        for (int bs = 3; bs <= 41; bs += 2)
            for (int64_t n0 = 1; n0 <= 60; n0 += 7) {
                OcrSamplerOptions o = mixed(bs, 1, 2, 0, 0, 0);
                o.num_sources = nsrc[m];
                memcpy(o.mix, mixes[m], sizeof mixes[m]);
                OcrSampler s;
                if (ocr_sampler_init(&s, &o) != OCR_OK) continue;  // a source rounds to no sample
                const int64_t sizes[3] = {n0, 5, 9};
                ck_assert_int_eq(ocr_sampler_set_epoch_sources(&s, 0, sizes, nsrc[m]), OCR_OK);
                for (int64_t b = 0; b < s.num_batches; b++) {
                    OcrSamplerBatch sb;
                    ocr_sampler_batch(&s, b, &sb);
                    ck_assert_int_le(sb.size, bs);
                    int has[3] = {0, 0, 0};
                    for (int i = 0; i < sb.size; i++) {
                        int64_t idx = ocr_sampler_index(&s, sb.slots[i]);
                        has[idx < n0 ? 0 : idx < n0 + 5 ? 1 : 2] = 1;
                    }
                    for (int k = 0; k < nsrc[m]; k++) ck_assert(has[k]);
                }
                ocr_sampler_free(&s);
            }
}
END_TEST

// Three ranks: the same number of batches, each rank's batch mixed exactly, the target shares
// disjoint and together the whole target (up to the world-size remainder).
START_TEST(test_sharding) {
    const int64_t sizes[2] = {100, 30};
    int owner[100];
    memset(owner, -1, sizeof owner);
    int64_t nb = -1, target_total = 0;
    for (int r = 0; r < 3; r++) {
        OcrSamplerOptions o = mixed(4, r, 3, 0, 0.5, 0.5);
        OcrSampler s;
        ck_assert_int_eq(ocr_sampler_init(&s, &o), OCR_OK);
        ck_assert_int_eq(ocr_sampler_set_epoch_sources(&s, 1, sizes, 2), OCR_OK);
        if (nb < 0) nb = s.num_batches;
        ck_assert_int_eq(s.num_batches, nb);
        for (int64_t b = 0; b < s.num_batches; b++) {
            OcrSamplerBatch sb;
            ocr_sampler_batch(&s, b, &sb);
            int t = 0;
            for (int i = 0; i < sb.size; i++) {
                int64_t idx = ocr_sampler_index(&s, sb.slots[i]);
                if (idx < 100) {
                    ck_assert_int_eq(owner[idx], -1);
                    owner[idx] = r;
                    t++;
                }
            }
            ck_assert_int_eq(t * 2, sb.size);  // half and half, partial batch included
            target_total += t;
        }
        ocr_sampler_free(&s);
    }
    ck_assert_int_eq(target_total, 99);  // 16 rounds of 6, then 1 each of the 4 left
}
END_TEST

// ---- through the config and the loader ----------------------------------------------------------

static char dir[1024];

static void write_text(const char *name, const char *text) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ck_assert_int_eq(ocr_write_file_atomic(path, text, strlen(text)), OCR_OK);
}

// Two label files over small images: a.txt (12 lines, labels "a..."), b.txt (5 lines, "b...").
static void make_data(void) {
    char *fresh = ocr_test_tmpdir("batch_mix_");
    snprintf(dir, sizeof dir, "%s", fresh);
    free(fresh);
    write_text("dict.txt", "a\nb\nc\n");
    char la[1024] = "", lb[1024] = "";
    size_t ua = 0, ub = 0;
    for (int k = 0; k < 17; k++) {
        OcrImage img;
        ck_assert_int_eq(ocr_image_alloc(&img, 40, 32, 3), OCR_OK);
        for (int i = 0; i < 40 * 32 * 3; i++) img.pixels[i] = (uint8_t)(i * 7 + k * 29);
        uint8_t *png;
        size_t size;
        ck_assert_int_eq(ocr_image_encode_png(&img, &png, &size), OCR_OK);
        char name[64], path[1200];
        snprintf(name, sizeof name, "i%02d.png", k);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        ck_assert_int_eq(ocr_write_file_atomic(path, png, size), OCR_OK);
        free(png);
        ocr_image_free(&img);
        if (k < 12) ua += (size_t)snprintf(la + ua, sizeof la - ua, "%s\ta%s\n", name, k % 2 ? "c" : "");
        else ub += (size_t)snprintf(lb + ub, sizeof lb - ub, "%s\tb%s\n", name, k % 2 ? "c" : "");
    }
    write_text("a.txt", la);
    write_text("b.txt", lb);
}

static OcrConfig *mix_config(const char *section, const char *mix, int batch) {
    char json[8192];
    snprintf(json, sizeof json,
             "{\"Global\":{\"character_dict_path\":\"%s/dict.txt\",\"seed\":3},"
             "\"%s\":{\"dataset\":{\"name\":\"SimpleDataSet\",\"data_dir\":\"%s\","
             "\"label_file_list\":[\"%s/a.txt\",\"%s/b.txt\"]%s%s,"
             "\"transforms\":[{\"DecodeImage\":null},{\"CTCLabelEncode\":null},"
             "{\"RecResizeImg\":{\"image_shape\":[3,32,64]}}]},"
             "\"loader\":{\"shuffle\":true,\"batch_size_per_card\":%d,\"num_workers\":2}}}",
             dir, section, dir, dir, dir, mix ? ",\"batch_ratio_list\":" : "", mix ? mix : "", batch);
    OcrConfig *cfg;
    ck_assert_msg(ocr_config_parse(&cfg, json, "mix.json") == OCR_OK, "%s", ocr_last_error());
    return cfg;
}

static void expect_refused(const char *section, const char *mix, int batch, const char *words) {
    OcrConfig *cfg = mix_config(section, mix, batch);
    OcrLoaderConfig lc;
    ck_assert_int_eq(ocr_loader_config_parse(&lc, cfg, section), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "batch_ratio_list") && strstr(ocr_last_error(), words), "%s",
                  ocr_last_error());
    ocr_config_free(cfg);
}

START_TEST(test_config_refused) {
    make_data();
    expect_refused("Train", "[0.5, 0.6]", 4, "sum to 1.1");
    expect_refused("Train", "[0, 1]", 4, "entry 0");
    expect_refused("Train", "[1.2, -0.2]", 4, "entry 0");
    expect_refused("Train", "[1.0]", 4, "1 entries for 2 label files");
    expect_refused("Train", "[0.5, 0.25, 0.25]", 4, "3 entries for 2 label files");
    expect_refused("Train", "[0.9, 0.1]", 4, "entry 1");  // 0.4 of a sample in a batch of 4
    expect_refused("Eval", "[0.5, 0.5]", 4, "only Train");
    ocr_test_remove_tree(dir);
}
END_TEST

START_TEST(test_loader_batches) {
    make_data();
    OcrConfig *cfg = mix_config("Train", "[0.75, 0.25]", 4);
    OcrLoaderConfig lc;
    ck_assert_msg(ocr_loader_config_parse(&lc, cfg, "Train") == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(lc.sampler.num_sources, 2);
    OcrDict dict;
    ck_assert_int_eq(ocr_loader_load_dict(&dict, cfg), OCR_OK);
    uint64_t hash[2] = {0, 0};
    for (int run = 0; run < 2; run++) {
        OcrLoader *l;
        ck_assert_msg(ocr_loader_create(&l, &lc, &dict) == OCR_OK, "%s", ocr_last_error());
        ck_assert_int_eq(ocr_loader_start_epoch(l, 2, 0), OCR_OK);
        ck_assert_int_eq(ocr_loader_num_batches(l), 4);  // 12 target samples, 3 per batch
        const OcrBatch *b;
        int batches = 0;
        while (ocr_loader_next(l, &b) == OCR_OK && b) {
            ck_assert_int_eq(b->size, 4);
            int from_b = 0;
            for (int i = 0; i < b->size; i++) {
                from_b += b->labels[i * b->max_text_length] == 2;  // classes: blank, a, b, c
                hash[run] = hash[run] * 1000003u + (uint64_t)b->indices[i];
            }
            ck_assert_int_eq(from_b, 1);
            batches++;
            ocr_loader_release(l, b);
        }
        ck_assert_int_eq(batches, 4);
        ocr_loader_destroy(l);
    }
    ck_assert(hash[0] == hash[1]);  // the same epoch twice: the same samples in the same batches
    ocr_loader_config_free(&lc);
    ocr_dict_free(&dict);
    ocr_config_free(cfg);
    ocr_test_remove_tree(dir);
}
END_TEST

int main(void) {
    Suite *s = suite_create("data_batch_mix");
    TCase *tc = tcase_create("batch_mix");
    tcase_add_test(tc, test_counts);
    tcase_add_test(tc, test_plan_exact_and_epoch);
    tcase_add_test(tc, test_batches_fit);
    tcase_add_test(tc, test_sharding);
    tcase_add_test(tc, test_config_refused);
    tcase_add_test(tc, test_loader_batches);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

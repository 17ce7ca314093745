// Loader throughput: images/s per core at 48×320, batches of 128, with PaddleOCR's training
// augmentation (RecConAug prob 0.5 ×2 + RecAug defaults), from PNG files, from JPEG files
// and from the packed cache; also without augmentation (decode + resize only).
//
//   bench_loader [--images N] [--repeats R] [--workers W] [--dir DIR] [--keep] [--case K]
//
// It generates N text-line-like images (or reuses those in an existing --dir) (heights 32..64, widths 60..480, grey and colour,
// strokes on a shaded background with a little noise) in a temporary directory, writes
// them as PNG and as JPEG (quality 90) with a label file, builds a pack, then times one
// epoch per repeat through the real loader with W worker threads (default 1: per core)
// and prints the median images/s of each case, by wall clock and per CPU-second (the
// process's CPU time: the per-core figure, stable on a shared machine).
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "core/fileio.h"
#include "core/rng.h"
#include "core/timer.h"
#include "data/loader.h"
#include "data/pack.h"

static void rm_tree(const char *path) {
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char sub[4096];
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            rm_tree(sub);
        }
        closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

static int write_bytes(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, size, f);
    fclose(f);
    return w == size ? 0 : -1;
}

// A text-line-like image: light shaded paper, dark glyph strokes of one ink colour.
static void render_line(OcrImage *img, int k, OcrRng *rng) {
    int c = img->channels, w = img->width, h = img->height;
    int paper = 200 + (int)ocr_rng_next_int(rng, 0, 50), ink = (int)ocr_rng_next_int(rng, 0, 80);
    int tint[3] = {0, (int)ocr_rng_next_int(rng, -10, 10), (int)ocr_rng_next_int(rng, -10, 10)};
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int ch = 0; ch < c; ch++) {
                int v = paper + tint[ch] - (x * 8) / w;
                img->pixels[((size_t)y * w + x) * c + ch] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
    // Glyphs: a few strokes in cells of about 0.6·h width along the line.
    int cell = h * 6 / 10 > 4 ? h * 6 / 10 : 4;
    for (int x0 = h / 4; x0 + cell < w - h / 4; x0 += cell) {
        if (ocr_rng_next_int(rng, 0, 6) == 0) continue;  // a space
        int strokes = 2 + (int)ocr_rng_next_int(rng, 0, 2);
        for (int s = 0; s < strokes; s++) {
            int vertical = (int)ocr_rng_next_int(rng, 0, 1), t = 1 + h / 16;
            int xa = x0 + (int)ocr_rng_next_int(rng, 0, cell - t - 1), ya = h / 5 + (int)ocr_rng_next_int(rng, 0, h / 2);
            int len = vertical ? h / 3 + (int)ocr_rng_next_int(rng, 0, h / 4) : cell / 2 + (int)ocr_rng_next_int(rng, 0, cell / 2);
            for (int i = 0; i < len; i++)
                for (int j = 0; j < t; j++) {
                    int x = vertical ? xa + j : xa + i, y = vertical ? ya + i : ya + j;
                    if (x < 0 || x >= w || y < 0 || y >= h) continue;
                    for (int ch = 0; ch < c; ch++) img->pixels[((size_t)y * w + x) * c + ch] = (uint8_t)(ink + 10 * ch);
                }
        }
    }
    // Sensor/print noise on a quarter of the pixels.
    for (size_t i = 0; i < (size_t)w * h * c; i++) {
        uint32_t r = ocr_rng_next_u32(rng);
        if ((r & 3) == 0) {
            int v = img->pixels[i] + (int)((r >> 8) % 7) - 3;
            img->pixels[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    }
    (void)k;
}

static int make_data(const char *dir, int n, int64_t *png_bytes, int64_t *jpg_bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s/png", dir);
    if (ocr_make_dirs(path) != OCR_OK) return -1;
    snprintf(path, sizeof path, "%s/jpg", dir);
    if (ocr_make_dirs(path) != OCR_OK) return -1;
    const char *alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.,:$-/ ";
    size_t na = strlen(alphabet);
    char dict[512];
    size_t du = 0;
    for (size_t i = 0; i + 1 < na; i++) du += (size_t)snprintf(dict + du, sizeof dict - du, "%c\n", alphabet[i]);
    snprintf(path, sizeof path, "%s/dict.txt", dir);
    if (write_bytes(path, dict, du)) return -1;
    size_t cap = (size_t)n * 80 + 64, pu = 0, ju = 0;
    char *plab = malloc(cap), *jlab = malloc(cap);
    OcrRng rng = ocr_rng_make(2024, 1);
    *png_bytes = *jpg_bytes = 0;
    for (int k = 0; k < n; k++) {
        int h = 32 + (int)ocr_rng_next_int(&rng, 0, 32), len = 3 + (int)ocr_rng_next_int(&rng, 0, 20);
        int w = len * h * 6 / 10 + h / 2;
        if (w < 60) w = 60;
        if (w > 480) w = 480;
        OcrImage img;
        if (ocr_image_alloc(&img, w, h, ocr_rng_next_int(&rng, 0, 2) ? 1 : 3) != OCR_OK) return -1;
        render_line(&img, k, &rng);
        char text[32];
        for (int i = 0; i < len; i++) text[i] = alphabet[ocr_rng_next_int(&rng, 0, (int64_t)na - 3)];
        text[len] = 0;
        uint8_t *png, *jpg;
        size_t ps, js;
        if (ocr_image_encode_png(&img, &png, &ps) != OCR_OK || ocr_image_encode_jpeg(&img, 90, &jpg, &js) != OCR_OK)
            return -1;
        snprintf(path, sizeof path, "%s/png/%05d.png", dir, k);
        if (write_bytes(path, png, ps)) return -1;
        snprintf(path, sizeof path, "%s/jpg/%05d.jpg", dir, k);
        if (write_bytes(path, jpg, js)) return -1;
        *png_bytes += (int64_t)ps, *jpg_bytes += (int64_t)js;
        free(png);
        free(jpg);
        ocr_image_free(&img);
        pu += (size_t)snprintf(plab + pu, cap - pu, "png/%05d.png\t%s\n", k, text);
        ju += (size_t)snprintf(jlab + ju, cap - ju, "jpg/%05d.jpg\t%s\n", k, text);
    }
    snprintf(path, sizeof path, "%s/png.txt", dir);
    if (write_bytes(path, plab, pu)) return -1;
    snprintf(path, sizeof path, "%s/jpg.txt", dir);
    if (write_bytes(path, jlab, ju)) return -1;
    free(plab);
    free(jlab);
    return 0;
}

static const char *aug_list =
    "[{\"DecodeImage\":{\"img_mode\":\"BGR\"}},"
    "{\"RecConAug\":{\"prob\":0.5,\"ext_data_num\":2,\"image_shape\":[48,320,3],\"max_text_length\":25}},"
    "{\"RecAug\":null},{\"CTCLabelEncode\":null},{\"RecResizeImg\":{\"image_shape\":[3,48,320]}}]";
static const char *plain_list =
    "[{\"DecodeImage\":{\"img_mode\":\"BGR\"}},{\"CTCLabelEncode\":null},{\"RecResizeImg\":{\"image_shape\":[3,48,320]}}]";

static OcrConfig *make_config(const char *dir, const char *labels, const char *transforms, int workers,
                              const char *pack) {
    char *json = malloc(8192);
    snprintf(json, 8192,
             "{\"Global\":{\"character_dict_path\":\"%s/dict.txt\",\"use_space_char\":true,\"max_text_length\":25},"
             "\"Train\":{\"dataset\":{\"name\":\"SimpleDataSet\",\"data_dir\":\"%s\",\"label_file_list\":[\"%s/%s\"],"
             "\"transforms\":%s},\"loader\":{\"shuffle\":true,\"batch_size_per_card\":128,\"drop_last\":false,"
             "\"num_workers\":%d,\"prefetch\":2%s%s%s}}}",
             dir, dir, dir, labels, transforms, workers, pack ? ",\"pack_file\":\"" : "", pack ? pack : "",
             pack ? "\"" : "");
    OcrConfig *cfg = NULL;
    if (ocr_config_parse(&cfg, json, "bench.json") != OCR_OK) cfg = NULL;
    free(json);
    return cfg;
}

// CPU seconds of the whole process (workers + the mostly waiting consumer).
static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

// Median images/s over `repeats` epochs (epoch e = repeat e, so the augmentation differs),
// by wall clock and per CPU-second.
static double measure(OcrConfig *cfg, int repeats, double *spread, double *per_cpu) {
    OcrLoaderConfig lc;
    OcrDict dict;
    OcrLoader *l;
    if (ocr_loader_config_parse(&lc, cfg, "Train") != OCR_OK || ocr_loader_load_dict(&dict, cfg) != OCR_OK ||
        ocr_loader_create(&l, &lc, &dict) != OCR_OK) {
        fprintf(stderr, "bench_loader: %s\n", ocr_last_error());
        exit(1);
    }
    ocr_loader_config_free(&lc);
    double r[64], rc[64];
    for (int e = 0; e < repeats; e++) {
        double t0 = ocr_now_seconds(), c0 = cpu_seconds();
        int64_t n = 0;
        const OcrBatch *b;
        if (ocr_loader_start_epoch(l, (uint64_t)e, 0) != OCR_OK) exit(1);
        while (ocr_loader_next(l, &b) == OCR_OK && b) {
            n += b->size;
            ocr_loader_release(l, b);
        }
        r[e] = (double)n / (ocr_now_seconds() - t0);
        rc[e] = (double)n / (cpu_seconds() - c0);
    }
    ocr_loader_destroy(l);
    ocr_dict_free(&dict);
    qsort(r, (size_t)repeats, sizeof(double), cmp_double);
    qsort(rc, (size_t)repeats, sizeof(double), cmp_double);
    *spread = r[repeats - 1] - r[0];
    *per_cpu = rc[repeats / 2];
    return r[repeats / 2];
}

int main(int argc, char **argv) {
    int n = 1024, repeats = 5, workers = 1, keep = 0, only = -1;
    const char *user_dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--images") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--workers") && i + 1 < argc) workers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc) user_dir = argv[++i];
        else if (!strcmp(argv[i], "--keep")) keep = 1;
        else if (!strcmp(argv[i], "--case") && i + 1 < argc) only = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_loader [--images N] [--repeats R] [--workers W] [--dir DIR] [--keep] [--case 0..5]\n");
            return 2;
        }
    }
    if (n < 128 || repeats < 1 || repeats > 64 || workers < 1) {
        fprintf(stderr, "bench_loader: --images >= 128, --repeats 1..64, --workers >= 1\n");
        return 2;
    }
    ocr_log_set_level(OCR_LOG_ERROR);
    char dir[1024];
    if (user_dir) snprintf(dir, sizeof dir, "%s", user_dir);
    else snprintf(dir, sizeof dir, "/tmp/ocr_bench_loader_%d", (int)getpid());
    int64_t png_bytes = 0, jpg_bytes = 0;
    double t0 = ocr_now_seconds();
    char probe[1200];
    snprintf(probe, sizeof probe, "%s/png.txt", dir);
    int reuse = user_dir && ocr_file_exists(probe);  // --dir with earlier data: keep it (profiling)
    if (!reuse && make_data(dir, n, &png_bytes, &jpg_bytes) != 0) {
        fprintf(stderr, "bench_loader: cannot generate data in %s: %s\n", dir, ocr_last_error());
        return 1;
    }
    double gen = ocr_now_seconds() - t0;
    // The pack, built from the PNG label file at height 48.
    char pack[1200];
    snprintf(pack, sizeof pack, "%s/train.pack", dir);
    {
        OcrConfig *cfg = make_config(dir, "png.txt", plain_list, 1, NULL);
        OcrLoaderConfig lc;
        OcrDict dict;
        OcrDataset ds;
        OcrDatasetOptions opt = {0};
        if (!cfg || ocr_loader_config_parse(&lc, cfg, "Train") != OCR_OK || ocr_loader_load_dict(&dict, cfg) != OCR_OK)
            return 1;
        opt.data_dir = lc.data_dir;
        opt.label_files = (const char *const *)lc.label_files;
        opt.num_label_files = lc.num_label_files;
        OcrPackSpec spec = {48, OCR_CHANNELS_BGR, 0};
        OcrPackWriteStats ps;
        if (ocr_dataset_open(&ds, &opt, &dict) != OCR_OK ||
            ocr_pack_source_hash(lc.data_dir, opt.label_files, 1, &spec.source_hash) != OCR_OK ||
            ocr_pack_write(pack, &ds, &spec, 1, &ps) != OCR_OK) {
            fprintf(stderr, "bench_loader: pack: %s\n", ocr_last_error());
            return 1;
        }
        printf("data: %d images (%.1f KiB PNG, %.1f KiB JPEG on average) in %s, generated in %.1f s; pack %.1f MiB "
               "written in %.2f s (%.0f images/s, 1 thread)\n",
               n, png_bytes / 1024.0 / n, jpg_bytes / 1024.0 / n, dir, gen, ps.pixel_bytes / 1048576.0, ps.seconds,
               ps.written / ps.seconds);
        ocr_dataset_close(&ds);
        ocr_dict_free(&dict);
        ocr_loader_config_free(&lc);
        ocr_config_free(cfg);
    }
    struct {
        const char *name, *labels, *transforms;
        int pack;
    } cases[] = {
        {"PNG, augmented", "png.txt", NULL, 0},
        {"JPEG, augmented", "jpg.txt", NULL, 0},
        {"pack, augmented", "png.txt", NULL, 1},
        {"PNG, no augmentation", "png.txt", plain_list, 0},
        {"JPEG, no augmentation", "jpg.txt", plain_list, 0},
        {"pack, no augmentation", "png.txt", plain_list, 1},
    };
    printf("loader at 48x320, batch 128, %d worker thread%s, median of %d epochs of %d images:\n", workers,
           workers > 1 ? "s" : "", repeats, n);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        if (only >= 0 && (int)c != only) continue;
        OcrConfig *cfg = make_config(dir, cases[c].labels, cases[c].transforms ? cases[c].transforms : aug_list,
                                     workers, cases[c].pack ? pack : NULL);
        if (!cfg) return 1;
        double spread, per_cpu, ips = measure(cfg, repeats, &spread, &per_cpu);
        printf("  %-24s %8.0f images/s wall (spread %5.0f)   %6.0f images per CPU-second\n", cases[c].name, ips,
               spread, per_cpu);
        fflush(stdout);
        ocr_config_free(cfg);
    }
    if (!keep && !user_dir) rm_tree(dir);
    return 0;
}

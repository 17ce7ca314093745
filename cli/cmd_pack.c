// ocrtrain pack -c CFG --out FILE | --lmdb DIR [--section Train|Eval] [--threads N] [-o Key.path=value ...]
//
// --out: decodes every sample of a section's dataset once, resizes the images to the height
// the section trains at (the largest, for multi-scale) keeping their aspect ratio, and
// writes them with their labels into one packed cache (data/pack.h). Set
// <section>.loader.pack_file to FILE to train from it.
// --lmdb: writes the section's samples (image files as they are, labels as written) as a
// PaddleOCR LMDB dataset in the new folder DIR (data/lmdb_dataset.h), which PaddleOCR's
// LMDBDataSet and ours read (dataset name LMDBDataSet, data_dir DIR).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "training/run_config.h"
#include "core/config.h"
#include "data/loader.h"
#include "data/pack.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: ocrtrain pack -c CFG --out FILE | --lmdb DIR [--section Train|Eval] [--threads N]\n"
            "                     [-o Key.path=value ...]\n"
            "  --out FILE  decodes the section's images (default Train) once, resizes them to its height and\n"
            "              writes them with their labels into FILE; then set <section>.loader.pack_file to FILE\n"
            "  --lmdb DIR  writes the section's images and labels as a PaddleOCR LMDB dataset into the new\n"
            "              folder DIR; train from it with dataset name LMDBDataSet and data_dir DIR\n");
}

static int fail(int code, const char *what) {
    fprintf(stderr, "ocrtrain pack: %s\n", what);
    return code;
}

int cmd_pack(int argc, char **argv) {
    CliConfigArgs ca = {0};
    const char *out = NULL, *lmdb_out = NULL, *section = "Train";
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) threads = 1;
    for (int i = 1; i < argc;) {
        int used = cli_take_config_arg(&ca, argc, argv, i);
        if (used < 0) {
            cli_config_args_free(&ca);
            return fail(2, ocr_last_error());
        }
        if (used > 0) {
            i += used;
            continue;
        }
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out = argv[++i];
        } else if (strcmp(argv[i], "--lmdb") == 0 && i + 1 < argc) {
            lmdb_out = argv[++i];
        } else if (strcmp(argv[i], "--section") == 0 && i + 1 < argc) {
            section = argv[++i];
            if (strcmp(section, "Train") != 0 && strcmp(section, "Eval") != 0) {
                cli_config_args_free(&ca);
                return fail(2, "--section must be Train or Eval");
            }
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            threads = atol(argv[++i]);
            if (threads < 1 || threads > 256) {
                cli_config_args_free(&ca);
                return fail(2, "--threads must be 1..256");
            }
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            cli_config_args_free(&ca);
            return 0;
        } else {
            fprintf(stderr, "ocrtrain pack: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            cli_config_args_free(&ca);
            return 2;
        }
        i++;
    }
    if (!ca.config || (!out && !lmdb_out) || (out && lmdb_out)) {
        cli_config_args_free(&ca);
        usage(stderr);
        return fail(2, "a config (-c CFG) and one output (--out FILE or --lmdb DIR) are required");
    }
    OcrConfig *cfg = NULL;
    ocr_status_t st = ocr_config_load(&cfg, ca.config);
    for (int i = 0; st == OCR_OK && i < ca.n_overrides; i++) st = ocr_config_apply_override(cfg, ca.overrides[i]);
    cli_config_args_free(&ca);
    OcrLoaderConfig lc;
    memset(&lc, 0, sizeof lc);
    if (st == OCR_OK) st = ocr_loader_config_parse(&lc, cfg, section);
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain pack: %s\n", ocr_last_error());
        if (cfg) ocr_config_free(cfg);
        return 2;
    }
    OcrDict dict;
    int have_dict = 0;
    OcrDataset ds;
    int have_ds = 0;
    OcrPackWriteStats stats;
    memset(&stats, 0, sizeof stats);
    st = ocr_loader_load_dict(&dict, cfg);
    have_dict = st == OCR_OK;
    // Every valid sample (ratio_list applies when the pack is read).
    OcrDatasetOptions opt = {0};
    opt.data_dir = lc.data_dir;
    opt.lmdb = lc.lmdb;
    opt.label_files = (const char *const *)lc.label_files;
    opt.num_label_files = lc.num_label_files;
    opt.delimiter = lc.delimiter;
    opt.max_text_length = lc.max_text_length;
    opt.seed = lc.seed;
    if (st == OCR_OK) st = ocr_dataset_open(&ds, &opt, &dict);
    have_ds = st == OCR_OK;
    run_config_log_ignored(cfg);
    if (st == OCR_OK && lmdb_out) {
        ocr_skip_stats_log(&ds.skipped, "label records");
        st = ocr_pack_write_lmdb(lmdb_out, &ds, &stats);
        if (st == OCR_OK) {
            printf("wrote %lld samples of %s (%s) as an LMDB dataset into %s: %.1f MiB of images, %lld images "
                   "skipped, %.1f s\n",
                   (long long)stats.written, section, ocr_config_source(cfg), lmdb_out,
                   (double)stats.pixel_bytes / (1024.0 * 1024.0), (long long)ocr_skip_stats_total(&stats.skipped),
                   stats.seconds);
            for (int k = 0; k < OCR_SKIP_REASON_COUNT; k++)
                if (stats.skipped.count[k])
                    printf("  skipped %lld (%s), e.g. %s\n", (long long)stats.skipped.count[k],
                           ocr_skip_reason_name((ocr_skip_reason_t)k), stats.skipped.example[k]);
            int64_t rejected = ocr_skip_stats_total(&ds.skipped);
            if (rejected) printf("  %lld labels rejected (see the warnings above)\n", (long long)rejected);
            printf("train from it with -o %s.dataset.name=LMDBDataSet %s.dataset.data_dir=%s\n", section, section,
                   lmdb_out);
        } else {
            fprintf(stderr, "ocrtrain pack: %s\n", ocr_last_error());
        }
        if (have_ds) ocr_dataset_close(&ds);
        if (have_dict) ocr_dict_free(&dict);
        ocr_loader_config_free(&lc);
        ocr_config_free(cfg);
        return st == OCR_OK ? 0 : cli_exit_code(st);
    }
    OcrPackSpec spec = {lc.pack_height, lc.transforms.order, 0};
    if (st == OCR_OK) st = ocr_pack_source_hash(lc.data_dir, opt.label_files, lc.num_label_files, &spec.source_hash);
    if (st == OCR_OK) {
        ocr_skip_stats_log(&ds.skipped, "label files");
        st = ocr_pack_write(out, &ds, &spec, (int)threads, &stats);
    }
    if (st == OCR_OK) {
        int64_t skipped = ocr_skip_stats_total(&stats.skipped);
        printf("packed %lld samples of %s (%s) into %s: height %d, %s, %.1f MiB of pixels, %lld images skipped, "
               "%.1f s (%.0f images/s, %ld threads)\n",
               (long long)stats.written, section, ocr_config_source(cfg), out, spec.height,
               spec.order == OCR_CHANNELS_GRAY ? "GRAY" : spec.order == OCR_CHANNELS_RGB ? "RGB" : "BGR",
               (double)stats.pixel_bytes / (1024.0 * 1024.0), (long long)skipped, stats.seconds,
               stats.seconds > 0 ? (double)stats.written / stats.seconds : 0.0, threads);
        for (int k = 0; k < OCR_SKIP_REASON_COUNT; k++)
            if (stats.skipped.count[k])
                printf("  skipped %lld (%s), e.g. %s\n", (long long)stats.skipped.count[k],
                       ocr_skip_reason_name((ocr_skip_reason_t)k), stats.skipped.example[k]);
        int64_t rejected = ocr_skip_stats_total(&ds.skipped);
        if (rejected) printf("  %lld label lines rejected (see the warnings above)\n", (long long)rejected);
        printf("train from it with -o %s.loader.pack_file=%s\n", section, out);
    } else {
        fprintf(stderr, "ocrtrain pack: %s\n", ocr_last_error());
    }
    if (have_ds) ocr_dataset_close(&ds);
    if (have_dict) ocr_dict_free(&dict);
    ocr_loader_config_free(&lc);
    ocr_config_free(cfg);
    return st == OCR_OK ? 0 : cli_exit_code(st);
}

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
#include <string.h>
#include <unistd.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "core/config.h"
#include "training/training.h"

static void print_skipped(const OcrPackWriteStats *stats) {
    for (int k = 0; k < OCR_SKIP_REASON_COUNT; k++)
        if (stats->skipped.count[k])
            printf("  skipped %lld (%s), e.g. %s\n", (long long)stats->skipped.count[k],
                   ocr_skip_reason_name((ocr_skip_reason_t)k), stats->skipped.example[k]);
}

int cmd_pack(int argc, char **argv) {
    CliConfigArgs ca = {0};
    const char *out = NULL, *lmdb_out = NULL, *section = "Train";
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = cpus < 1 ? 1 : (int)cpus;
    const CliFlag flags[] = {
        {CLI_CONFIG, .dest = &ca, .required = 1, .help = "the config (JSON or PaddleOCR's .yml)"},
        {CLI_STRING, "--out", .meta = "FILE", .dest = &out,
         .help = "decodes the section's images (default Train) once, resizes them to its height and\n"
                 "writes them with their labels into FILE; then set <section>.loader.pack_file to FILE"},
        {CLI_STRING, "--lmdb", .meta = "DIR", .dest = &lmdb_out,
         .help = "writes the section's images and labels as a PaddleOCR LMDB dataset into the new\n"
                 "folder DIR; train from it with dataset name LMDBDataSet and data_dir DIR"},
        {CLI_STRING, "--section", .dest = &section, .choices = "Train|Eval", .help = "the section to pack (default Train)"},
        {CLI_INT, "--threads", .meta = "N", .dest = &threads, .lo = 1, .hi = 256,
         .help = "decoding threads for --out (default: the online CPUs)"},
        {0}};
    const CliCommand cmd = {.name = "pack", .flags = flags,
                            .synopsis = "-c CFG --out FILE | --lmdb DIR [--section Train|Eval] [--threads N] "
                                        "[-o Key.path=value ...]"};
    int rc0 = cli_parse(&cmd, argc, argv);
    if (rc0 != CLI_CONTINUE) return rc0;
    if ((!out && !lmdb_out) || (out && lmdb_out))
        return cli_usage_error(&cmd, "a config (-c CFG) and one output (--out FILE or --lmdb DIR) are required");
    OcrConfig *cfg = NULL;
    ocr_status_t st = ocr_config_load(&cfg, ca.config);
    for (int i = 0; st == OCR_OK && i < ca.n_overrides; i++) st = ocr_config_apply_override(cfg, ca.overrides[i]);
    cli_free(&cmd);
    OcrLoaderConfig lc;
    memset(&lc, 0, sizeof lc);
    if (st == OCR_OK) st = ocr_loader_config_parse(&lc, cfg, section);
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain pack: %s\n", ocr_last_error());
        if (cfg) ocr_config_free(cfg);
        return 2;
    }
    PackResult r;
    const OcrPackWriteStats *stats = &r.stats;
    if (lmdb_out) {
        st = pack_section_lmdb(cfg, &lc, lmdb_out, &r);
        if (st == OCR_OK) {
            printf("wrote %lld samples of %s (%s) as an LMDB dataset into %s: %.1f MiB of images, %lld images "
                   "skipped, %.1f s\n",
                   (long long)stats->written, section, ocr_config_source(cfg), lmdb_out,
                   (double)stats->pixel_bytes / (1024.0 * 1024.0), (long long)ocr_skip_stats_total(&stats->skipped),
                   stats->seconds);
            print_skipped(stats);
            int64_t rejected = ocr_skip_stats_total(&r.rejected);
            if (rejected) printf("  %lld labels rejected (see the warnings above)\n", (long long)rejected);
            printf("train from it with -o %s.dataset.name=LMDBDataSet %s.dataset.data_dir=%s\n", section, section,
                   lmdb_out);
        }
    } else {
        st = pack_section_cache(cfg, &lc, out, threads, &r);
        if (st == OCR_OK) {
            const OcrPackSpec *spec = &r.spec;
            int64_t skipped = ocr_skip_stats_total(&stats->skipped);
            printf("packed %lld samples of %s (%s) into %s: height %d, %s, %.1f MiB of pixels, %lld images skipped, "
                   "%.1f s (%.0f images/s, %d threads)\n",
                   (long long)stats->written, section, ocr_config_source(cfg), out, spec->height,
                   spec->order == OCR_CHANNELS_GRAY ? "GRAY" : spec->order == OCR_CHANNELS_RGB ? "RGB" : "BGR",
                   (double)stats->pixel_bytes / (1024.0 * 1024.0), (long long)skipped, stats->seconds,
                   stats->seconds > 0 ? (double)stats->written / stats->seconds : 0.0, threads);
            print_skipped(stats);
            int64_t rejected = ocr_skip_stats_total(&r.rejected);
            if (rejected) printf("  %lld label lines rejected (see the warnings above)\n", (long long)rejected);
            printf("train from it with -o %s.loader.pack_file=%s\n", section, out);
        }
    }
    if (st != OCR_OK) fprintf(stderr, "ocrtrain pack: %s\n", ocr_last_error());
    ocr_loader_config_free(&lc);
    ocr_config_free(cfg);
    return st == OCR_OK ? 0 : cli_exit_code(st);
}

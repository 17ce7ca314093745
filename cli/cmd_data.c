// ocrtrain data -c CFG [--json] [--section Train|Eval] [--workers N] [-o Key.path=value ...]
//
// Scans the Train and Eval datasets of a config through the real loader (decode,
// augmentation, resize, batching, one epoch each) and reports: samples, what was skipped
// and why, the label-length histogram, characters missing from the dictionary, and
// images/s. --json prints the same as one JSON object (images_per_s over everything).
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "core/config.h"
#include "core/timer.h"
#include "data/loader.h"
#include "data/utf8.h"

#define TOP_MISSING 20

static void usage(FILE *f) {
    fprintf(f,
            "usage: ocrtrain data -c CFG [--json] [--section Train|Eval] [--workers N] [-o Key.path=value ...]\n"
            "  scans the datasets through the loader (one epoch each) and reports samples, skipped\n"
            "  samples by reason, the label-length histogram, characters missing from the dictionary\n"
            "  and images/s\n");
}

typedef struct {
    char section[16];
    int64_t valid_lines;      // samples the label files (or the pack) provide
    int64_t epoch_samples, batches, delivered;
    int workers, batch_size, height, width, num_scales;
    double seconds;
    OcrSkipStats label_skips;
    OcrLoaderStats stats;
    int64_t *hist;            // label length → count, 0..L
    int L;
    OcrCharCount *missing;
    size_t n_missing;
    int64_t missing_total;
    const char *pack_file;
    OcrLabelNotes notes;
    int has_notes;
} SectionReport;

static ocr_status_t scan_section(SectionReport *r, const OcrConfig *cfg, const char *section, int workers) {
    memset(r, 0, sizeof *r);
    snprintf(r->section, sizeof r->section, "%s", section);
    OcrLoaderConfig lc;
    OCR_TRY(ocr_loader_config_parse(&lc, cfg, section));
    if (workers > 0) lc.num_workers = workers;
    r->workers = lc.num_workers;
    r->batch_size = lc.sampler.scales[0].batch_size;
    r->height = lc.sampler.scales[0].height;
    r->width = lc.sampler.scales[0].width;
    r->num_scales = lc.sampler.num_scales;
    r->pack_file = lc.pack_file ? "yes" : NULL;
    r->L = lc.max_text_length;
    OcrDict dict;
    ocr_status_t st = ocr_loader_load_dict(&dict, cfg);
    if (st != OCR_OK) {
        ocr_loader_config_free(&lc);
        return st;
    }
    OcrLoader *l = NULL;
    st = ocr_loader_create(&l, &lc, &dict);
    ocr_loader_config_free(&lc);
    r->hist = calloc((size_t)r->L + 1, sizeof(int64_t));
    if (st == OCR_OK && !r->hist) st = ocr_set_error(OCR_ERR_OOM, "out of memory");
    double t0 = ocr_now_seconds();
    if (st == OCR_OK) st = ocr_loader_start_epoch(l, 0, 0);
    if (st == OCR_OK) {
        r->epoch_samples = ocr_loader_num_samples(l);
        const OcrBatch *b;
        while ((st = ocr_loader_next(l, &b)) == OCR_OK && b) {
            for (int i = 0; i < b->size; i++) r->hist[b->lengths[i]]++;
            r->batches++;
            r->delivered += b->size;
            ocr_loader_release(l, b);
        }
    }
    r->seconds = ocr_now_seconds() - t0;
    if (st == OCR_OK) {
        ocr_loader_stats(l, &r->stats);
        r->label_skips = *ocr_loader_label_skips(l);
        const OcrCharCounter *u = ocr_loader_unknown_chars(l);
        r->missing = ocr_char_counter_sorted(u, &r->n_missing);
        r->missing_total = u->total;
        const OcrDataset *ds = ocr_loader_dataset(l);
        if (ds) {
            r->valid_lines = ocr_dataset_num_valid(ds);
            r->notes = ds->notes;
            r->has_notes = 1;
        } else {
            r->valid_lines = r->epoch_samples;
        }
    }
    ocr_loader_destroy(l);
    ocr_dict_free(&dict);
    return st;
}

static void free_report(SectionReport *r) {
    free(r->hist);
    free(r->missing);
}

static const char *char_text(uint32_t cp, char buf[8]) {
    int n = ocr_utf8_encode(cp, buf);
    if (n == 0 || cp < 0x20 || cp == 0x7f) {
        snprintf(buf, 8, "?");
        return buf;
    }
    buf[n] = '\0';
    return buf;
}

static double images_per_s(const SectionReport *r) { return r->seconds > 0 ? (double)r->delivered / r->seconds : 0.0; }

static void print_text(const SectionReport *r) {
    printf("%s: %lld samples (%lld this epoch), %lld batches of up to %d at %dx%d%s, %d workers%s\n", r->section,
           (long long)r->valid_lines, (long long)r->epoch_samples, (long long)r->batches, r->batch_size, r->height,
           r->width, r->num_scales > 1 ? " (multi-scale)" : "", r->workers, r->pack_file ? ", from the packed cache" : "");
    printf("  delivered %lld samples in %.2f s: %.0f images/s\n", (long long)r->delivered, r->seconds, images_per_s(r));
    int64_t lt = ocr_skip_stats_total(&r->label_skips), it = ocr_skip_stats_total(&r->stats.skipped);
    printf("  skipped: %lld label lines, %lld image loads (%lld samples replaced)\n", (long long)lt, (long long)it,
           (long long)r->stats.replaced);
    for (int k = 0; k < OCR_SKIP_REASON_COUNT; k++) {
        int64_t c = r->label_skips.count[k] + r->stats.skipped.count[k];
        if (!c) continue;
        const char *ex = r->label_skips.count[k] ? r->label_skips.example[k] : r->stats.skipped.example[k];
        printf("    %-18s %8lld  e.g. %s\n", ocr_skip_reason_name((ocr_skip_reason_t)k), (long long)c, ex);
    }
    if (r->has_notes) {
        const OcrLabelNotes *n = &r->notes;
        if (n->bom_files) printf("  note: %lld label files start with a UTF-8 BOM (removed)\n", (long long)n->bom_files);
        if (n->crlf_lines) printf("  note: %lld lines end in CRLF (the CR was removed)\n", (long long)n->crlf_lines);
        if (n->empty_lines) printf("  note: %lld empty lines ignored\n", (long long)n->empty_lines);
        if (n->extra_field_lines)
            printf("  note: %lld lines have more than one delimiter (label = 2nd field), e.g. %s\n",
                   (long long)n->extra_field_lines, n->extra_field_example);
        if (n->trailing_space_labels)
            printf("  note: %lld labels end in a space (kept), e.g. %s\n", (long long)n->trailing_space_labels,
                   n->trailing_space_example);
    }
    printf("  label lengths:");
    for (int k = 1; k <= r->L; k++)
        if (r->hist[k]) printf(" %d:%lld", k, (long long)r->hist[k]);
    printf("\n");
    if (r->n_missing) {
        printf("  characters missing from the dictionary: %zu distinct, %lld occurrences (dropped from labels):",
               r->n_missing, (long long)r->missing_total);
        for (size_t k = 0; k < r->n_missing && k < TOP_MISSING; k++) {
            char buf[8];
            printf(" '%s' (U+%04X) %lld", char_text(r->missing[k].codepoint, buf), r->missing[k].codepoint,
                   (long long)r->missing[k].count);
        }
        printf("%s\n", r->n_missing > TOP_MISSING ? " ..." : "");
    } else {
        printf("  characters missing from the dictionary: none\n");
    }
}

static cJSON *report_json(const SectionReport *r) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "section", r->section);
    cJSON_AddNumberToObject(o, "samples", (double)r->valid_lines);
    cJSON_AddNumberToObject(o, "epoch_samples", (double)r->epoch_samples);
    cJSON_AddNumberToObject(o, "delivered", (double)r->delivered);
    cJSON_AddNumberToObject(o, "batches", (double)r->batches);
    cJSON_AddNumberToObject(o, "batch_size", r->batch_size);
    cJSON_AddNumberToObject(o, "height", r->height);
    cJSON_AddNumberToObject(o, "width", r->width);
    cJSON_AddBoolToObject(o, "multi_scale", r->num_scales > 1);
    cJSON_AddBoolToObject(o, "packed_cache", r->pack_file != NULL);
    cJSON_AddNumberToObject(o, "workers", r->workers);
    cJSON_AddNumberToObject(o, "seconds", r->seconds);
    cJSON_AddNumberToObject(o, "images_per_s", images_per_s(r));
    cJSON *sk = cJSON_AddObjectToObject(o, "skipped");
    cJSON *ex = cJSON_AddObjectToObject(o, "skipped_examples");
    int64_t total = 0;
    for (int k = 0; k < OCR_SKIP_REASON_COUNT; k++) {
        int64_t c = r->label_skips.count[k] + r->stats.skipped.count[k];
        total += c;
        cJSON_AddNumberToObject(sk, ocr_skip_reason_name((ocr_skip_reason_t)k), (double)c);
        if (c)
            cJSON_AddStringToObject(ex, ocr_skip_reason_name((ocr_skip_reason_t)k),
                                    r->label_skips.count[k] ? r->label_skips.example[k] : r->stats.skipped.example[k]);
    }
    cJSON_AddNumberToObject(o, "skipped_total", (double)total);
    cJSON_AddNumberToObject(o, "replaced", (double)r->stats.replaced);
    cJSON_AddNumberToObject(o, "con_aug_merges", (double)r->stats.con_aug_merges);
    cJSON *h = cJSON_AddObjectToObject(o, "label_length_histogram");
    for (int k = 1; k <= r->L; k++) {
        if (!r->hist[k]) continue;
        char key[16];
        snprintf(key, sizeof key, "%d", k);
        cJSON_AddNumberToObject(h, key, (double)r->hist[k]);
    }
    cJSON *m = cJSON_AddArrayToObject(o, "missing_characters");
    for (size_t k = 0; k < r->n_missing; k++) {
        cJSON *c = cJSON_CreateObject();
        char buf[8];
        cJSON_AddStringToObject(c, "char", char_text(r->missing[k].codepoint, buf));
        cJSON_AddNumberToObject(c, "codepoint", r->missing[k].codepoint);
        cJSON_AddNumberToObject(c, "count", (double)r->missing[k].count);
        cJSON_AddItemToArray(m, c);
    }
    cJSON_AddNumberToObject(o, "missing_characters_total", (double)r->missing_total);
    if (r->has_notes) {
        cJSON *n = cJSON_AddObjectToObject(o, "notes");
        cJSON_AddNumberToObject(n, "label_files", (double)r->notes.files);
        cJSON_AddNumberToObject(n, "lines", (double)r->notes.lines);
        cJSON_AddNumberToObject(n, "empty_lines", (double)r->notes.empty_lines);
        cJSON_AddNumberToObject(n, "bom_files", (double)r->notes.bom_files);
        cJSON_AddNumberToObject(n, "crlf_lines", (double)r->notes.crlf_lines);
        cJSON_AddNumberToObject(n, "extra_field_lines", (double)r->notes.extra_field_lines);
        cJSON_AddNumberToObject(n, "trailing_space_labels", (double)r->notes.trailing_space_labels);
    }
    return o;
}

int cmd_data(int argc, char **argv) {
    CliConfigArgs ca = {0};
    int json = 0, workers = 0;
    const char *only = NULL;
    for (int i = 1; i < argc;) {
        int used = cli_take_config_arg(&ca, argc, argv, i);
        if (used < 0) {
            fprintf(stderr, "ocrtrain data: %s\n", ocr_last_error());
            cli_config_args_free(&ca);
            return 2;
        }
        if (used > 0) {
            i += used;
            continue;
        }
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--section") == 0 && i + 1 < argc) {
            only = argv[++i];
            if (strcmp(only, "Train") != 0 && strcmp(only, "Eval") != 0) {
                fprintf(stderr, "ocrtrain data: --section must be Train or Eval\n");
                cli_config_args_free(&ca);
                return 2;
            }
        } else if (strcmp(argv[i], "--workers") == 0 && i + 1 < argc) {
            workers = atoi(argv[++i]);
            if (workers < 1 || workers > 256) {
                fprintf(stderr, "ocrtrain data: --workers must be 1..256\n");
                cli_config_args_free(&ca);
                return 2;
            }
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            cli_config_args_free(&ca);
            return 0;
        } else {
            fprintf(stderr, "ocrtrain data: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            cli_config_args_free(&ca);
            return 2;
        }
        i++;
    }
    if (!ca.config) {
        fprintf(stderr, "ocrtrain data: a config is required (-c CFG)\n");
        usage(stderr);
        cli_config_args_free(&ca);
        return 2;
    }
    OcrConfig *cfg = NULL;
    ocr_status_t st = ocr_config_load(&cfg, ca.config);
    for (int i = 0; st == OCR_OK && i < ca.n_overrides; i++) st = ocr_config_apply_override(cfg, ca.overrides[i]);
    cli_config_args_free(&ca);
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain data: %s\n", ocr_last_error());
        if (cfg) ocr_config_free(cfg);
        return 2;
    }
    const char *sections[2] = {"Train", "Eval"};
    SectionReport rep[2];
    int nrep = 0;
    for (int s = 0; s < 2; s++) {
        char key[32];
        snprintf(key, sizeof key, "%s.dataset", sections[s]);
        if (only ? strcmp(only, sections[s]) != 0 : !ocr_config_has(cfg, key)) continue;
        st = scan_section(&rep[nrep], cfg, sections[s], workers);
        if (st != OCR_OK) {
            fprintf(stderr, "ocrtrain data: %s: %s\n", sections[s], ocr_last_error());
            free_report(&rep[nrep]);
            break;
        }
        nrep++;
    }
    if (st == OCR_OK && nrep == 0) {
        st = ocr_set_error(OCR_ERR_CONFIG, "%s has neither Train.dataset nor Eval.dataset", ocr_config_source(cfg));
        fprintf(stderr, "ocrtrain data: %s\n", ocr_last_error());
    }
    if (st == OCR_OK) {
        int64_t delivered = 0;
        double seconds = 0;
        for (int k = 0; k < nrep; k++) delivered += rep[k].delivered, seconds += rep[k].seconds;
        double ips = seconds > 0 ? (double)delivered / seconds : 0.0;
        if (json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "config", ocr_config_source(cfg));
            cJSON_AddNumberToObject(o, "images_per_s", ips);
            cJSON_AddNumberToObject(o, "samples", (double)delivered);
            cJSON_AddNumberToObject(o, "seconds", seconds);
            cJSON *arr = cJSON_AddArrayToObject(o, "sections");
            for (int k = 0; k < nrep; k++) cJSON_AddItemToArray(arr, report_json(&rep[k]));
            char *text = cJSON_Print(o);
            printf("%s\n", text ? text : "{}");
            free(text);
            cJSON_Delete(o);
        } else {
            for (int k = 0; k < nrep; k++) print_text(&rep[k]);
            printf("total: %lld samples in %.2f s, %.0f images/s\n", (long long)delivered, seconds, ips);
        }
    }
    for (int k = 0; k < nrep; k++) free_report(&rep[k]);
    ocr_config_free(cfg);
    return st == OCR_OK ? 0 : cli_exit_code(st);
}

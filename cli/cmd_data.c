// ocrtrain data -c CFG [--json] [--section Train|Eval] [--workers N] [-o Key.path=value ...]
//
// Scans the Train and Eval datasets of a config through the real loader (training/data_scan.h)
// and reports: samples, what was skipped and why, the label-length histogram, characters
// missing from the dictionary, and images/s. --json prints the same as one JSON object
// (images_per_s over everything).
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "core/config.h"
#include "data/utf8.h"
#include "training/training.h"

#define TOP_MISSING 20

static const char *char_text(uint32_t cp, char buf[8]) {
    int n = ocr_utf8_encode(cp, buf);
    if (n == 0 || cp < 0x20 || cp == 0x7f) {
        snprintf(buf, 8, "?");
        return buf;
    }
    buf[n] = '\0';
    return buf;
}

static void print_text(const DataSection *r) {
    printf("%s: %lld samples (%lld this epoch), %lld batches of up to %d at %dx%d%s, %d workers%s\n", r->section,
           (long long)r->valid_lines, (long long)r->epoch_samples, (long long)r->batches, r->batch_size, r->height,
           r->width, r->num_scales > 1 ? " (multi-scale)" : "", r->workers, r->packed ? ", from the packed cache" : "");
    printf("  delivered %lld samples in %.2f s: %.0f images/s\n", (long long)r->delivered, r->seconds, data_section_images_per_s(r));
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

static cJSON *data_json(const DataSection *r) {
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
    cJSON_AddBoolToObject(o, "packed_cache", r->packed);
    cJSON_AddNumberToObject(o, "workers", r->workers);
    cJSON_AddNumberToObject(o, "seconds", r->seconds);
    cJSON_AddNumberToObject(o, "images_per_s", data_section_images_per_s(r));
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
    const CliFlag flags[] = {
        {CLI_CONFIG, .dest = &ca, .required = 1, .help = "the config (JSON or PaddleOCR's .yml)"},
        {CLI_BOOL, "--json", .dest = &json, .help = "the same as one JSON object (images_per_s over everything)"},
        {CLI_STRING, "--section", .dest = &only, .choices = "Train|Eval",
         .help = "only this section (default: each that has a dataset)"},
        {CLI_INT, "--workers", .meta = "N", .dest = &workers, .lo = 1, .hi = 256,
         .help = "loader workers (default: the section's num_workers)"},
        {0}};
    const CliCommand cmd = {
        .name = "data", .flags = flags,
        .epilog = "scans the datasets through the loader (one epoch each) and reports samples, skipped\n"
                  "samples by reason, the label-length histogram, characters missing from the dictionary\n"
                  "and images/s\n"};
    int rc0 = cli_parse(&cmd, argc, argv);
    if (rc0 != CLI_CONTINUE) return rc0;
    OcrConfig *cfg = NULL;
    ocr_status_t st = ocr_config_load(&cfg, ca.config);
    for (int i = 0; st == OCR_OK && i < ca.n_overrides; i++) st = ocr_config_apply_override(cfg, ca.overrides[i]);
    if (st != OCR_OK) {
        if (cfg) ocr_config_free(cfg);
        return cli_fail(&cmd, 2, "%s", ocr_last_error());
    }
    cli_free(&cmd);
    DataScan scan;
    st = data_scan(&scan, cfg, only, workers);
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain data: %s\n", ocr_last_error());
    } else if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "config", ocr_config_source(cfg));
        cJSON_AddNumberToObject(o, "images_per_s", scan.images_per_s);
        cJSON_AddNumberToObject(o, "samples", (double)scan.delivered);
        cJSON_AddNumberToObject(o, "seconds", scan.seconds);
        cJSON *arr = cJSON_AddArrayToObject(o, "sections");
        for (int k = 0; k < scan.n; k++) cJSON_AddItemToArray(arr, data_json(&scan.sections[k]));
        char *text = cJSON_Print(o);
        printf("%s\n", text ? text : "{}");
        free(text);
        cJSON_Delete(o);
    } else {
        for (int k = 0; k < scan.n; k++) print_text(&scan.sections[k]);
        printf("total: %lld samples in %.2f s, %.0f images/s\n", (long long)scan.delivered, scan.seconds,
               scan.images_per_s);
    }
    data_scan_free(&scan);
    ocr_config_free(cfg);
    return st == OCR_OK ? 0 : cli_exit_code(st);
}

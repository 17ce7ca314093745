// ocrtrain eval -c CFG --weights W [--json] [-o Key.path=value ...]: accuracy, normalised edit
// distance, CER and throughput on every line of the Eval split (training/evaluate.h), with the count
// of lines per evaluation path. Needs the model, the weights and the Eval data only.
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "training/evaluate.h"
#include "training/feed.h"
#include "training/inference.h"
#include "training/run_config.h"
#include "training/trainer.h"
#include "core/fileio.h"

static void usage(FILE *f) {
    fprintf(f, "usage: ocrtrain eval -c CFG --weights W [--json] [--lines FILE] [-o Key.path=value ...]\n"
               "  --weights W   a .safetensors file or a checkpoint directory (save_model_dir/best)\n"
               "  --lines FILE  one TSV line per label line: where, image, path (in_shape, widened, squeezed,\n"
               "                unreadable), width, label, prediction, correct, flags\n"
               "  --json        one JSON object: accuracy, norm_edit_distance, cer, samples, skipped, samples_per_s and\n"
               "                lines (how many lines were scored in shape, widened, squeezed, too long for the model,\n"
               "                over max_text_length, with unknown characters; how many were unreadable or bad)\n"
               "Every label line is scored: lines wider than the Eval shape are evaluated at the width they need.\n");
}

// Every scored and unreadable line with its outcome (bad label lines are in the skip counts).
static ocr_status_t write_lines(const char *path, const EvalSet *s, const EvalLine *lines) {
    static const char *const kinds[] = {"in_shape", "widened", "squeezed", "unreadable"};
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f) return ocr_set_error(OCR_ERR_OOM, "--lines: out of memory");
    fprintf(f, "where\timage\tpath\twidth\tlabel\tprediction\tcorrect\tflags\n");
    for (int64_t i = 0; i < s->n; i++) {
        const EvalLine *l = &lines[i];
        char flags[96] = "";
        if (l->flags & EVAL_FLAG_TOO_LONG_FOR_MODEL) strcat(flags, "too_long_for_model,");
        if (l->flags & EVAL_FLAG_OVER_MAX_TEXT_LENGTH) strcat(flags, "over_max_text_length,");
        if (l->flags & EVAL_FLAG_UNKNOWN_CHARS) strcat(flags, "unknown_chars,");
        if (flags[0]) flags[strlen(flags) - 1] = '\0';
        fprintf(f, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", s->where[i], s->path[i], kinds[l->path < 4 ? l->path : 3],
                (int)l->width, s->label[i], l->prediction ? l->prediction : "",
                l->scored ? (l->correct ? "1" : "0") : "-", flags);
    }
    fclose(f);
    ocr_status_t st =
        buf ? ocr_write_file_atomic(path, buf, size) : ocr_set_error(OCR_ERR_OOM, "--lines: out of memory");
    free(buf);
    return st;
}

int cmd_eval(int argc, char **argv) {
    CliConfigArgs ca = {0};
    const char *weights = NULL, *lines_path = NULL;
    int json = 0;
    for (int i = 1; i < argc;) {
        int n = cli_take_config_arg(&ca, argc, argv, i);
        if (n < 0) {
            fprintf(stderr, "ocrtrain eval: %s\n", ocr_last_error());
            cli_config_args_free(&ca);
            return 2;
        }
        if (n > 0) {
            i += n;
        } else if (strcmp(argv[i], "--weights") == 0 && i + 1 < argc) {
            weights = argv[i + 1];
            i += 2;
        } else if (strcmp(argv[i], "--lines") == 0 && i + 1 < argc) {
            lines_path = argv[i + 1];
            i += 2;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
            i++;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            cli_config_args_free(&ca);
            return 0;
        } else {
            fprintf(stderr, "ocrtrain eval: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            cli_config_args_free(&ca);
            return 2;
        }
    }
    if (!ca.config || !weights) {
        fprintf(stderr, "ocrtrain eval: %s is required\n", !ca.config ? "a config (-c CFG)" : "--weights W");
        usage(stderr);
        cli_config_args_free(&ca);
        return 2;
    }
    OcrConfig *cfg;
    RunConfig rc;
    ocr_status_t st =
        run_config_load(&cfg, &rc, ca.config, (const char *const *)ca.overrides, ca.n_overrides, RUN_NEED_EVAL);
    cli_config_args_free(&ca);
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain eval: %s\n", ocr_last_error());
        return cli_exit_code(st);
    }
    char dev[32];
    st = training_resolve_device(rc.device_name, dev, sizeof dev);
    training_set_threads(rc.threads);
    OcrDict dict;
    int dict_ok = 0, lc_ok = 0;
    OcrLoaderConfig lc;
    EvalSet set = {0};
    InferModel im = {0};
    EvalResult er;
    EvalLine *lines = NULL;
    if (st == OCR_OK) st = ocr_dict_load(&dict, rc.dict_path, rc.use_space_char);
    dict_ok = st == OCR_OK;
    if (st == OCR_OK) st = ocr_loader_config_parse(&lc, cfg, "Eval");
    lc_ok = st == OCR_OK;
    if (st == OCR_OK) st = eval_set_read(&set, &lc);
    if (st == OCR_OK) st = infer_model_load(&im, cfg, weights, 1, dev);
    if (st == OCR_OK) {
        EvalOptions eo;
        eval_options_from_loader(&eo, &lc, im.m, (RecMetricOptions){rc.ignore_space, rc.is_filter});
        if (lines_path && !(lines = calloc((size_t)(set.n ? set.n : 1), sizeof *lines)))
            st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
        if (st == OCR_OK) st = evaluate_set(im.m, &set, &dict, &eo, &er, lines);
    }
    if (st == OCR_OK && lines) st = write_lines(lines_path, &set, lines);
    int code = 0;
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain eval: %s\n", ocr_last_error());
        code = cli_exit_code(st);
    } else {
        char summary[1024];
        eval_paths_summary(&er.paths, summary, sizeof summary);
        ocr_log(OCR_LOG_INFO, "Eval: %s", summary);
        ocr_skip_stats_log(&er.paths.skipped, "Eval lines");
        if (json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "weights", weights);
            cJSON_AddNumberToObject(o, "accuracy", er.acc);
            cJSON_AddNumberToObject(o, "norm_edit_distance", er.norm_edit_dis);
            cJSON_AddNumberToObject(o, "cer", er.cer);
            cJSON_AddNumberToObject(o, "samples", (double)er.samples);
            cJSON_AddNumberToObject(o, "skipped", (double)er.skipped);
            cJSON_AddNumberToObject(o, "samples_per_s", er.samples_per_s);
            cJSON_AddItemToObject(o, "lines", eval_paths_json(&er.paths));
            char *s = cJSON_Print(o);
            printf("%s\n", s ? s : "{}");
            free(s);
            cJSON_Delete(o);
        } else {
            printf("accuracy %.4f  norm_edit_distance %.4f  cer %.4f  (%lld samples, %.1f samples/s)\n%s\n", er.acc,
                   er.norm_edit_dis, er.cer, (long long)er.samples, er.samples_per_s, summary);
        }
    }
    infer_model_free(&im);
    if (lines) eval_lines_free(lines, set.n);
    free(lines);
    eval_set_free(&set);
    if (lc_ok) ocr_loader_config_free(&lc);
    if (dict_ok) ocr_dict_free(&dict);
    ocr_config_free(cfg);
    return code;
}

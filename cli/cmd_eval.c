// ocrtrain eval -c CFG --weights W [--json] [--lines FILE] [-o Key.path=value ...]: accuracy, normalised edit
// distance, CER and throughput on every line of the Eval split (training/evaluate.h), with the count
// of lines per evaluation path. Needs the model, the weights and the Eval data only.
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "training/training.h"

// --baseline: both models on the same lines, the candidate (W) judged against the baseline per
// line (training/compare.h, compare_models).
static int eval_against_baseline(const OcrConfig *cfg, const RunConfig *rc, const char *baseline, const char *weights,
                                 int json) {
    training_set_threads(rc->threads);
    Report *rep = calloc(1, sizeof *rep);
    ocr_status_t st = rep ? compare_models(cfg, rc, baseline, weights, 1, stderr, rep)
                          : ocr_set_error(OCR_ERR_OOM, "out of host memory");
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain eval: %s\n", ocr_last_error());
        free(rep);
        return cli_exit_code(st);
    }
    const ReportPaired *p = &rep->runs[1].paired;
    int code = report_exit_code(rep);
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "baseline", baseline);
        cJSON_AddStringToObject(o, "weights", weights);
        cJSON_AddNumberToObject(o, "baseline_accuracy", rep->runs[0].seeds[0].acc);
        cJSON_AddNumberToObject(o, "accuracy", rep->runs[1].seeds[0].acc);
        cJSON_AddNumberToObject(o, "baseline_cer", rep->runs[0].seeds[0].cer);
        cJSON_AddNumberToObject(o, "cer", rep->runs[1].seeds[0].cer);
        cJSON_AddNumberToObject(o, "lines", (double)p->lines);
        cJSON_AddNumberToObject(o, "both_right", (double)p->table.both_right);
        cJSON_AddNumberToObject(o, "both_wrong", (double)p->table.both_wrong);
        cJSON_AddNumberToObject(o, "baseline_only_right", (double)p->table.base_only);
        cJSON_AddNumberToObject(o, "only_right", (double)p->table.run_only);
        cJSON_AddNumberToObject(o, "accuracy_delta", p->acc_delta);
        cJSON *ci = cJSON_AddArrayToObject(o, "accuracy_ci95");
        cJSON_AddItemToArray(ci, cJSON_CreateNumber(p->acc_ci.lo));
        cJSON_AddItemToArray(ci, cJSON_CreateNumber(p->acc_ci.hi));
        cJSON_AddNumberToObject(o, "cer_delta", p->cer_delta);
        ci = cJSON_AddArrayToObject(o, "cer_ci95");
        cJSON_AddItemToArray(ci, cJSON_CreateNumber(p->cer_ci.lo));
        cJSON_AddItemToArray(ci, cJSON_CreateNumber(p->cer_ci.hi));
        cJSON_AddStringToObject(o, "verdict", paired_verdict_name(report_run_verdict(rep, 1)));
        int64_t need = report_lines_needed(rep) >= 0 ? report_lines_needed(rep) : p->acc_lines_needed;
        if (code == REPORT_EXIT_INCONCLUSIVE && need >= 0) cJSON_AddNumberToObject(o, "lines_needed", (double)need);
        else cJSON_AddNullToObject(o, "lines_needed");
        cJSON_AddNumberToObject(o, "exit_code", code);
        char *text = cJSON_Print(o);
        printf("%s\n", text ? text : "{}");
        free(text);
        cJSON_Delete(o);
    } else {
        printf("%s vs %s on %lld lines: %lld both right, %lld both wrong, %lld only the baseline right, %lld only %s "
               "right\n", weights, baseline, (long long)p->lines, (long long)p->table.both_right,
               (long long)p->table.both_wrong, (long long)p->table.base_only, (long long)p->table.run_only, weights);
        printf("accuracy %.4f vs %.4f: %+.4f [%+.4f, %+.4f] %s; CER %.4f vs %.4f: %+.4f [%+.4f, %+.4f] %s\n",
               rep->runs[1].seeds[0].acc, rep->runs[0].seeds[0].acc, p->acc_delta, p->acc_ci.lo, p->acc_ci.hi,
               paired_verdict_name(p->acc_verdict), rep->runs[1].seeds[0].cer, rep->runs[0].seeds[0].cer, p->cer_delta,
               p->cer_ci.lo, p->cer_ci.hi, paired_verdict_name(p->cer_verdict));
        if (code == REPORT_EXIT_REGRESSION)
            printf("verdict: REGRESSION (exit 3): %s is worse than %s beyond the tolerance (accuracy ±%.4g, CER ±%.4g) "
                   "with 95%% confidence, paired per line\n", weights, baseline, rep->tolerance, rep->cer_tolerance);
        else if (code == REPORT_EXIT_INCONCLUSIVE)
            printf("verdict: INCONCLUSIVE (exit 4): %lld lines cannot decide at ±%.4g; about %lld lines would\n",
                   (long long)p->lines, rep->tolerance,
                   (long long)(p->acc_verdict == PAIRED_INCONCLUSIVE ? p->acc_lines_needed : p->cer_lines_needed));
        else
            printf("verdict: PASS: %s is not worse than %s by more than the tolerance (accuracy ±%.4g, CER ±%.4g) "
                   "with 95%% confidence, paired per line\n", weights, baseline, rep->tolerance, rep->cer_tolerance);
    }
    free(rep);
    return code;
}

int cmd_eval(int argc, char **argv) {
    CliConfigArgs ca = {0};
    const char *weights = NULL, *lines_path = NULL, *baseline = NULL;
    int json = 0;
    const CliFlag flags[] = {
        {CLI_CONFIG, .dest = &ca, .required = 1, .help = "the config (JSON or PaddleOCR's .yml); its Eval section is read"},
        {CLI_STRING, "--weights", .meta = "W", .dest = &weights, .required = 1,
         .help = "a .safetensors file or a checkpoint directory (save_model_dir/best)"},
        {CLI_BOOL, "--json", .dest = &json,
         .help = "one JSON object: accuracy, norm_edit_distance, cer, samples, skipped, samples_per_s and\n"
                 "lines (how many lines were scored in shape, widened, squeezed, too long for the model,\n"
                 "over max_text_length, with unknown characters; how many were unreadable or bad)"},
        {CLI_STRING, "--baseline", .meta = "B", .dest = &baseline,
         .help = "judge W against the model B on the same lines, paired per line: exit 0 PASS, 3 REGRESSION (W\n"
                 "worse than B beyond Global.accuracy_tolerance / cer_tolerance with 95% confidence), 4\n"
                 "INCONCLUSIVE (the lines cannot decide; how many would is printed)"},
        {CLI_STRING, "--lines", .meta = "FILE", .dest = &lines_path,
         .help = "one TSV line per label line: where, image, path (in_shape, widened, squeezed,\n"
                 "unreadable), width, label, prediction, correct, flags"},
        {0}};
    const CliCommand cmd = {"eval", flags,
                            .epilog = "Every label line is scored: lines wider than the Eval shape are evaluated at "
                                      "the width they need.\n"};
    int rc0 = cli_parse(&cmd, argc, argv);
    if (rc0 != CLI_CONTINUE) return rc0;
    OcrConfig *cfg;
    RunConfig rc;
    ocr_status_t st =
        run_config_load(&cfg, &rc, ca.config, (const char *const *)ca.overrides, ca.n_overrides, RUN_NEED_EVAL);
    cli_free(&cmd);
    if (st != OCR_OK) return cli_fail_status(&cmd, st);
    if (baseline) {
        if (lines_path) {
            ocr_config_free(cfg);
            fprintf(stderr, "ocrtrain eval: --lines writes one model's lines: run it without --baseline\n");
            return 2;
        }
        int code = eval_against_baseline(cfg, &rc, baseline, weights, json);
        ocr_config_free(cfg);
        return code;
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
    if (st == OCR_OK && lines) st = eval_lines_write_tsv(lines_path, &set, lines);
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

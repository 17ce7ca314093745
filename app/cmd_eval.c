// ocrtrain eval -c CFG --weights W [--json] [-o Key.path=value ...]: accuracy, normalised edit
// distance, CER and throughput on the Eval split.
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli_common.h"
#include "app/commands.h"
#include "app/evaluate.h"
#include "app/feed.h"
#include "app/inference.h"
#include "app/run_config.h"
#include "app/trainer.h"

static void usage(FILE *f) {
    fprintf(f, "usage: ocrtrain eval -c CFG --weights W [--json] [-o Key.path=value ...]\n"
               "  --weights W   a .safetensors file or a checkpoint directory (save_model_dir/best)\n"
               "  --json        one JSON object: accuracy, norm_edit_distance, cer, samples, samples_per_s\n");
}

int cmd_eval(int argc, char **argv) {
    CliConfigArgs ca = {0};
    const char *weights = NULL;
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
        return app_exit_code(st);
    }
    char dev[32];
    st = app_resolve_device(rc.device_name, dev, sizeof dev);
    app_set_threads(rc.threads);
    OcrDict dict;
    int dict_ok = 0, feed_ok = 0;
    Feed feed;
    InferModel im = {0};
    EvalResult er;
    if (st == OCR_OK) st = ocr_dict_load(&dict, rc.dict_path, rc.use_space_char);
    dict_ok = st == OCR_OK;
    if (st == OCR_OK) st = feed_open(&feed, cfg, "Eval", &dict, 0, 0);
    feed_ok = dict_ok && st == OCR_OK;
    if (st == OCR_OK) st = infer_model_load(&im, cfg, weights, 1, dev);
    if (st == OCR_OK) {
        RecMetricOptions mo = {rc.ignore_space, rc.is_filter};
        st = evaluate(im.m, &feed, &dict, mo, &er);
    }
    int code = 0;
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain eval: %s\n", ocr_last_error());
        code = app_exit_code(st);
    } else {
        if (feed_ok) {
            OcrSkipStats sk;
            feed_skip_stats(&feed, &sk);
            ocr_skip_stats_log(&sk, "Eval images");
        }
        if (json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "weights", weights);
            cJSON_AddNumberToObject(o, "accuracy", er.acc);
            cJSON_AddNumberToObject(o, "norm_edit_distance", er.norm_edit_dis);
            cJSON_AddNumberToObject(o, "cer", er.cer);
            cJSON_AddNumberToObject(o, "samples", (double)er.samples);
            cJSON_AddNumberToObject(o, "skipped", (double)er.skipped);
            cJSON_AddNumberToObject(o, "samples_per_s", er.samples_per_s);
            char *s = cJSON_Print(o);
            printf("%s\n", s ? s : "{}");
            free(s);
            cJSON_Delete(o);
        } else {
            printf("accuracy %.4f  norm_edit_distance %.4f  cer %.4f  (%lld samples, %.1f samples/s)\n", er.acc,
                   er.norm_edit_dis, er.cer, (long long)er.samples, er.samples_per_s);
        }
    }
    infer_model_free(&im);
    if (feed_ok) feed_close(&feed);
    if (dict_ok) ocr_dict_free(&dict);
    ocr_config_free(cfg);
    return code;
}

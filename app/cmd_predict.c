// ocrtrain predict -c CFG --weights W [--batch N] [--min-width PX] IMAGE...: one line per
// image, `path<TAB>text<TAB>confidence`, in the order given. Images are batched by aspect
// ratio and padded as PaddleOCR's predictor does (tools/infer/predict_rec.py).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli_common.h"
#include "app/commands.h"
#include "app/inference.h"
#include "app/run_config.h"
#include "app/trainer.h"
#include "data/transforms.h"

static void usage(FILE *f) {
    fprintf(f, "usage: ocrtrain predict -c CFG --weights W [--batch N] [--min-width PX] IMAGE...\n"
               "  --batch N       images per batch (default 6, PaddleOCR's rec_batch_num)\n"
               "  --min-width PX  narrowest batch width: W = int(H * max(PX / H, widest w/h of the batch)) (default 320)\n"
               "prints path<TAB>text<TAB>confidence per image\n");
}

static int parse_pos(const char *s, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 1 || v > 1 << 20) return 0;
    *out = (int)v;
    return 1;
}

int cmd_predict(int argc, char **argv) {
    CliConfigArgs ca = {0};
    const char *weights = NULL;
    int batch = 6, min_width = 320;
    const char **paths = calloc((size_t)argc, sizeof *paths);
    int n = 0;
    if (!paths) return 1;
    for (int i = 1; i < argc;) {
        int k = cli_take_config_arg(&ca, argc, argv, i);
        if (k < 0) {
            fprintf(stderr, "ocrtrain predict: %s\n", ocr_last_error());
            goto usage_error;
        }
        if (k > 0) {
            i += k;
        } else if (strcmp(argv[i], "--weights") == 0 && i + 1 < argc) {
            weights = argv[i + 1];
            i += 2;
        } else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) {
            if (!parse_pos(argv[i + 1], &batch)) {
                fprintf(stderr, "ocrtrain predict: --batch needs a positive integer, got '%s'\n", argv[i + 1]);
                goto usage_error;
            }
            i += 2;
        } else if (strcmp(argv[i], "--min-width") == 0 && i + 1 < argc) {
            if (!parse_pos(argv[i + 1], &min_width)) {
                fprintf(stderr, "ocrtrain predict: --min-width needs a positive integer, got '%s'\n", argv[i + 1]);
                goto usage_error;
            }
            i += 2;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            cli_config_args_free(&ca);
            free(paths);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "ocrtrain predict: unexpected argument '%s'\n", argv[i]);
            goto usage_error;
        } else {
            paths[n++] = argv[i++];
        }
    }
    if (!ca.config || !weights || n == 0) {
        fprintf(stderr, "ocrtrain predict: %s is required\n",
                !ca.config ? "a config (-c CFG)" : !weights ? "--weights W" : "at least one IMAGE");
        goto usage_error;
    }
    OcrConfig *cfg;
    RunConfig rc;
    ocr_status_t st = run_config_load(&cfg, &rc, ca.config, (const char *const *)ca.overrides, ca.n_overrides, 0);
    cli_config_args_free(&ca);
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain predict: %s\n", ocr_last_error());
        free(paths);
        return app_exit_code(st);
    }
    char dev[32];
    st = app_resolve_device(rc.device_name, dev, sizeof dev);
    app_set_threads(rc.threads);
    OcrDict dict;
    int dict_ok = 0;
    InferModel im = {0};
    OcrImage *images = calloc((size_t)n, sizeof *images);
    Prediction *pred = calloc((size_t)n, sizeof *pred);
    if (st == OCR_OK && (!images || !pred)) st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
    if (st == OCR_OK) st = ocr_dict_load(&dict, rc.dict_path, rc.use_space_char);
    dict_ok = st == OCR_OK;
    if (st == OCR_OK) st = infer_model_load(&im, cfg, weights, 0, dev);
    // The height and channel order of the eval transforms (PaddleOCR's rec_image_shape).
    OcrTransformList tl;
    if (st == OCR_OK)
        st = ocr_transforms_parse(&tl, cfg, rc.eval.present ? "Eval.dataset.transforms" : "Train.dataset.transforms",
                                  rc.max_text_length);
    if (st == OCR_OK && !tl.has_resize) {
        const OcrArch *a = ocr_model_arch(im.m);
        tl.resize_h = a->img_h;
        tl.resize_w = a->img_w;
    }
    int failed = 0;
    if (st == OCR_OK) {
        for (int i = 0; i < n; i++) {
            if (ocr_image_load(&images[i], paths[i], tl.order) != OCR_OK) {
                snprintf(pred[i].error, sizeof pred[i].error, "%s", ocr_last_error());
                failed++;
            }
        }
        st = predict_images(im.m, &dict, images, n, batch, tl.resize_h, tl.channels, min_width, pred);
    }
    int code = 0;
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain predict: %s\n", ocr_last_error());
        code = app_exit_code(st);
    } else {
        for (int i = 0; i < n; i++) {
            if (pred[i].ok)
                printf("%s\t%s\t%.6f\n", paths[i], pred[i].text, (double)pred[i].confidence);
            else
                fprintf(stderr, "ocrtrain predict: skipped %s\n", pred[i].error);
        }
        if (failed) code = 1;
    }
    for (int i = 0; images && i < n; i++) ocr_image_free(&images[i]);
    for (int i = 0; pred && i < n; i++) free(pred[i].text);
    free(images);
    free(pred);
    infer_model_free(&im);
    if (dict_ok) ocr_dict_free(&dict);
    ocr_config_free(cfg);
    free(paths);
    return code;

usage_error:
    usage(stderr);
    cli_config_args_free(&ca);
    free(paths);
    return 2;
}

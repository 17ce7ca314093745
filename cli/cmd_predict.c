// ocrtrain predict -c CFG --weights W [--batch N] [--min-width PX] [--data-dir DIR] [--json] INPUT...
//
// INPUT is an image (PNG or JPEG, recognised by its bytes), a folder (searched recursively for
// *.png, *.jpg, *.jpeg, in path order) or a PaddleOCR label file (path<TAB>label lines, paths
// relative to --data-dir, default the label file's folder). One line per image,
// `path<TAB>text<TAB>confidence`; when a label file is among the inputs every line is
// `path<TAB>prediction<TAB>label<TAB>correct<TAB>confidence` (label empty and correct "-" for
// images without one) and a last line gives the accuracy over the labelled images. Images are
// batched by aspect ratio and padded as PaddleOCR's predictor does (training/predict.h).
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "training/training.h"

static void print_json(const PredictInputs *in, const PredictResults *r, int bad) {
    cJSON *root = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(root, "predictions");
    for (int i = 0; i < r->n; i++) {
        const PredictItem *x = &in->v[i];
        if (!r->pred[i].ok) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "path", x->path);
        cJSON_AddStringToObject(o, "prediction", r->pred[i].text);
        cJSON_AddNumberToObject(o, "confidence", (double)r->pred[i].confidence);
        if (x->label) {
            cJSON_AddStringToObject(o, "label", x->label);
            cJSON_AddBoolToObject(o, "correct", r->correct[i] == 1);
        }
        cJSON_AddItemToArray(arr, o);
    }
    RecMetricResult m = rec_metric_get(&r->metric);
    cJSON_AddNumberToObject(root, "labelled", (double)r->metric.count);
    cJSON_AddNumberToObject(root, "correct", (double)r->metric.correct);
    if (r->metric.count) {
        cJSON_AddNumberToObject(root, "accuracy", m.acc);
        cJSON_AddNumberToObject(root, "norm_edit_distance", m.norm_edit_dis);
        cJSON_AddNumberToObject(root, "cer", m.cer);
    } else {
        cJSON_AddNullToObject(root, "accuracy");
    }
    cJSON_AddNumberToObject(root, "unreadable", r->unreadable);
    cJSON_AddNumberToObject(root, "bad_inputs", bad);
    char *s = cJSON_Print(root);
    printf("%s\n", s ? s : "{}");
    free(s);
    cJSON_Delete(root);
}

int cmd_predict(int argc, char **argv) {
    CliConfigArgs ca = {0};
    const char *weights = NULL, *data_dir = NULL;
    int batch = 6, min_width = 320, json = 0;
    CliList inputs = {0};
    const CliFlag flags[] = {
        {CLI_CONFIG, .dest = &ca, .required = 1, .help = "the config (JSON or PaddleOCR's .yml)"},
        {CLI_STRING, "--weights", .meta = "W", .dest = &weights, .required = 1,
         .help = "a .safetensors file or a checkpoint directory"},
        {CLI_INT, "--batch", .meta = "N", .dest = &batch, .lo = 1, .hi = 1 << 20,
         .help = "images per batch (default 6, PaddleOCR's rec_batch_num)"},
        {CLI_INT, "--min-width", .meta = "PX", .dest = &min_width, .lo = 1, .hi = 1 << 20,
         .help = "narrowest batch width: W = int(H * max(PX / H, widest w/h of the batch)) (default 320)"},
        {CLI_STRING, "--data-dir", .meta = "DIR", .dest = &data_dir,
         .help = "label-file paths are relative to DIR (default: the label file's folder)"},
        {CLI_BOOL, "--json", .dest = &json,
         .help = "one JSON object: predictions [{path, prediction, confidence, label, correct}],\n"
                 "labelled, correct, accuracy, unreadable"},
        {CLI_POSITIONAL, .meta = "INPUT", .dest = &inputs, .required = 1,
         .missing = "at least one INPUT (IMAGE, folder or label file)",
         .help = "an image (PNG/JPEG), a folder (recursively: *.png, *.jpg, *.jpeg) or a label file\n"
                 "(path<TAB>label lines, as PaddleOCR's)"},
        {0}};
    const CliCommand cmd = {"predict", flags,
                            .epilog = "prints path<TAB>text<TAB>confidence per image; with a label file "
                                      "path<TAB>prediction<TAB>label<TAB>correct<TAB>confidence\n"
                                      "and the accuracy last\n"};
    int rc0 = cli_parse(&cmd, argc, argv);
    if (rc0 != CLI_CONTINUE) return rc0;
    OcrConfig *cfg;
    RunConfig rc;
    // Only the model, the weights and the inputs: no section's data is looked for.
    ocr_status_t st = run_config_load(&cfg, &rc, ca.config, (const char *const *)ca.overrides, ca.n_overrides, 0);
    if (st != OCR_OK) return cli_fail_status(&cmd, st);
    char dev[32];
    st = training_resolve_device(rc.device_name, dev, sizeof dev);
    training_set_threads(rc.threads);
    PredictInputs in = {0};
    if (st == OCR_OK) st = predict_collect(&in, inputs.items, inputs.n, data_dir);
    for (int i = 0; i < in.n_problems; i++) fprintf(stderr, "ocrtrain predict: %s\n", in.problems[i]);
    PredictResults r = {0};
    PredictOptions po = {weights, dev, batch, min_width};
    if (st == OCR_OK) st = predict_run(cfg, &rc, &po, &in, &r);
    int code = 0;
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain predict: %s\n", ocr_last_error());
        code = cli_exit_code(st);
    } else {
        for (int i = 0; i < r.n; i++) {
            const PredictItem *x = &in.v[i];
            const Prediction *p = &r.pred[i];
            if (!p->ok) {
                fprintf(stderr, "ocrtrain predict: skipped %s%s%s\n", x->label ? x->where : "", x->label ? ": " : "",
                        p->error);
                continue;
            }
            if (json) continue;
            if (in.any_labels)
                printf("%s\t%s\t%s\t%s\t%.6f\n", x->path, p->text, x->label ? x->label : "",
                       r.correct[i] < 0 ? "-" : r.correct[i] ? "1" : "0", (double)p->confidence);
            else
                printf("%s\t%s\t%.6f\n", x->path, p->text, (double)p->confidence);
        }
        if (json) {
            print_json(&in, &r, in.bad);
        } else if (in.any_labels) {
            RecMetricResult m = rec_metric_get(&r.metric);
            printf("accuracy %.4f  norm_edit_distance %.4f  cer %.4f  (%lld of %lld labelled images correct)\n", m.acc,
                   m.norm_edit_dis, m.cer, (long long)r.metric.correct, (long long)r.metric.count);
        }
        if (r.unreadable || in.bad) code = 1;
    }
    predict_results_free(&r);
    predict_inputs_free(&in);
    ocr_config_free(cfg);
    cli_free(&cmd);
    return code;
}

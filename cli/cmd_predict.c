// ocrtrain predict -c CFG --weights W [--batch N] [--min-width PX] [--data-dir DIR] [--json] INPUT...
//
// INPUT is an image (PNG or JPEG, recognised by its bytes), a folder (searched recursively for
// *.png, *.jpg, *.jpeg, in path order) or a PaddleOCR label file (path<TAB>label lines, paths
// relative to --data-dir, default the label file's folder). One line per image,
// `path<TAB>text<TAB>confidence`; when a label file is among the inputs every line is
// `path<TAB>prediction<TAB>label<TAB>correct<TAB>confidence` (label empty and correct "-" for
// images without one) and a last line gives the accuracy over the labelled images. Images are
// batched by aspect ratio and padded as PaddleOCR's predictor does (tools/infer/predict_rec.py).
#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "training/evaluate.h"
#include "training/inference.h"
#include "training/run_config.h"
#include "training/trainer.h"
#include "data/transforms.h"
#include "eval/metrics.h"

static void usage(FILE *f) {
    fprintf(f, "usage: ocrtrain predict -c CFG --weights W [--batch N] [--min-width PX] [--data-dir DIR] [--json] "
               "INPUT...\n"
               "  INPUT           an image (PNG/JPEG), a folder (recursively: *.png, *.jpg, *.jpeg) or a label file\n"
               "                  (path<TAB>label lines, as PaddleOCR's)\n"
               "  --batch N       images per batch (default 6, PaddleOCR's rec_batch_num)\n"
               "  --min-width PX  narrowest batch width: W = int(H * max(PX / H, widest w/h of the batch)) (default 320)\n"
               "  --data-dir DIR  label-file paths are relative to DIR (default: the label file's folder)\n"
               "  --json          one JSON object: predictions [{path, prediction, confidence, label, correct}],\n"
               "                  labelled, correct, accuracy, unreadable\n"
               "prints path<TAB>text<TAB>confidence per image; with a label file path<TAB>prediction<TAB>label<TAB>"
               "correct<TAB>confidence\nand the accuracy last\n");
}

static int parse_pos(const char *s, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 1 || v > 1 << 20) return 0;
    *out = (int)v;
    return 1;
}

typedef struct {
    char *path;
    char *label;   // NULL: no label
    char *where;   // the input it came from ("labels.txt:3", or the path)
} Item;

typedef struct {
    Item *v;
    int n, cap;
    int64_t other_files;   // files in folders that are not images by extension (listed, not predicted)
} Items;

static int add_item(Items *it, const char *path, const char *label, const char *where) {
    if (it->n == it->cap) {
        int cap = it->cap ? it->cap * 2 : 64;
        Item *v = realloc(it->v, sizeof *v * (size_t)cap);
        if (!v) return 0;
        it->v = v;
        it->cap = cap;
    }
    Item *x = &it->v[it->n];
    x->path = strdup(path);
    x->label = label ? strdup(label) : NULL;
    x->where = strdup(where);
    if (!x->path || !x->where || (label && !x->label)) return 0;
    it->n++;
    return 1;
}

static int has_image_ext(const char *name) {
    const char *dot = strrchr(name, '.');
    if (!dot) return 0;
    char e[8] = {0};
    for (int i = 0; i < 7 && dot[1 + i]; i++) e[i] = (char)tolower((unsigned char)dot[1 + i]);
    return strcmp(e, "png") == 0 || strcmp(e, "jpg") == 0 || strcmp(e, "jpeg") == 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// Every image under dir, in sorted path order (entries sorted per folder, folders descended
// in that order). Symbolic links to folders are not followed (no cycles).
static int walk(Items *it, const char *dir, int depth) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "ocrtrain predict: cannot read folder %s\n", dir);
        return 0;
    }
    char **names = NULL;
    int n = 0, cap = 0, ok = 1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(names, sizeof *nn * (size_t)cap);
            if (!nn) {
                ok = 0;
                break;
            }
            names = nn;
        }
        names[n] = strdup(e->d_name);
        if (!names[n]) {
            ok = 0;
            break;
        }
        n++;
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n && ok; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        struct stat sb;
        if (lstat(p, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode)) {
            if (depth < 64) ok = walk(it, p, depth + 1);
        } else if (has_image_ext(names[i])) {
            ok = add_item(it, p, NULL, p);
        } else {
            it->other_files++;
        }
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    return ok;
}

// 1: the file starts like a PNG or JPEG.
static int looks_like_image(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    uint8_t head[16];
    size_t k = fread(head, 1, sizeof head, f);
    fclose(f);
    return ocr_image_detect(head, k) != OCR_IMAGE_FORMAT_UNKNOWN;
}

// The inputs of the command line as images (with labels from label files). Problems with one
// input are reported and counted, not fatal (*bad); only OOM returns an error.
static ocr_status_t collect(Items *it, const char **args, int n, const char *data_dir, int *bad, int *any_labels) {
    for (int i = 0; i < n; i++) {
        struct stat sb;
        if (stat(args[i], &sb) != 0) {
            // Missing: reported when the image is loaded, like any unreadable image.
            if (!add_item(it, args[i], NULL, args[i])) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
            continue;
        }
        if (S_ISDIR(sb.st_mode)) {
            int before = it->n;
            if (!walk(it, args[i], 0)) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
            if (it->n == before) {
                fprintf(stderr, "ocrtrain predict: folder %s holds no .png/.jpg/.jpeg image\n", args[i]);
                (*bad)++;
            }
            continue;
        }
        if (looks_like_image(args[i])) {
            if (!add_item(it, args[i], NULL, args[i])) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
            continue;
        }
        // A label file: its lines, paths relative to --data-dir or its own folder.
        char dir[4200];
        const char *base = data_dir;
        if (!base) {
            snprintf(dir, sizeof dir, "%s", args[i]);
            char *slash = strrchr(dir, '/');
            if (slash) *slash = '\0';
            else snprintf(dir, sizeof dir, ".");
            base = dir;
        }
        EvalSet set = {0};
        ocr_status_t st = eval_set_read_file(&set, args[i], base, "\t");
        if (st == OCR_ERR_OOM) {
            eval_set_free(&set);
            return st;
        }
        if (st != OCR_OK || set.n == 0) {
            fprintf(stderr, "ocrtrain predict: %s is neither a PNG/JPEG image nor a label file with path<TAB>label "
                    "lines%s%s\n", args[i], st != OCR_OK ? ": " : "", st != OCR_OK ? ocr_last_error() : "");
            (*bad)++;
            eval_set_free(&set);
            continue;
        }
        if (set.bad_lines) {
            ocr_skip_stats_log(&set.bad, args[i]);
            *bad += (int)set.bad_lines;
        }
        *any_labels = 1;
        for (int64_t k = 0; k < set.n; k++)
            if (!add_item(it, set.path[k], set.label[k], set.where[k])) {
                eval_set_free(&set);
                return ocr_set_error(OCR_ERR_OOM, "out of host memory");
            }
        eval_set_free(&set);
    }
    if (it->other_files)
        ocr_log(OCR_LOG_INFO, "predict: %lld file(s) in the folders are not .png/.jpg/.jpeg and were not read",
                (long long)it->other_files);
    return OCR_OK;
}

static void items_free(Items *it) {
    for (int i = 0; i < it->n; i++) {
        free(it->v[i].path);
        free(it->v[i].label);
        free(it->v[i].where);
    }
    free(it->v);
    memset(it, 0, sizeof *it);
}

int cmd_predict(int argc, char **argv) {
    CliConfigArgs ca = {0};
    const char *weights = NULL, *data_dir = NULL;
    int batch = 6, min_width = 320, json = 0;
    const char **args = calloc((size_t)argc, sizeof *args);
    int n = 0;
    if (!args) return 1;
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
        } else if (strcmp(argv[i], "--data-dir") == 0 && i + 1 < argc) {
            data_dir = argv[i + 1];
            i += 2;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
            i++;
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
            free(args);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "ocrtrain predict: unexpected argument '%s'\n", argv[i]);
            goto usage_error;
        } else {
            args[n++] = argv[i++];
        }
    }
    if (!ca.config || !weights || n == 0) {
        fprintf(stderr, "ocrtrain predict: %s is required\n",
                !ca.config ? "a config (-c CFG)"
                : !weights ? "--weights W"
                           : "at least one INPUT (IMAGE, folder or label file)");
        goto usage_error;
    }
    OcrConfig *cfg;
    RunConfig rc;
    // Only the model, the weights and the inputs: no section's data is looked for.
    ocr_status_t st = run_config_load(&cfg, &rc, ca.config, (const char *const *)ca.overrides, ca.n_overrides, 0);
    cli_config_args_free(&ca);
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain predict: %s\n", ocr_last_error());
        free(args);
        return cli_exit_code(st);
    }
    char dev[32];
    st = training_resolve_device(rc.device_name, dev, sizeof dev);
    training_set_threads(rc.threads);
    Items it = {0};
    int bad = 0, any_labels = 0;
    if (st == OCR_OK) st = collect(&it, args, n, data_dir, &bad, &any_labels);
    OcrDict dict;
    int dict_ok = 0;
    InferModel im = {0};
    int ni = it.n;
    OcrImage *images = calloc((size_t)(ni ? ni : 1), sizeof *images);
    Prediction *pred = calloc((size_t)(ni ? ni : 1), sizeof *pred);
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
        for (int i = 0; i < ni; i++) {
            if (ocr_image_load(&images[i], it.v[i].path, tl.order) != OCR_OK) {
                snprintf(pred[i].error, sizeof pred[i].error, "%s", ocr_last_error());
                failed++;
            }
        }
        st = predict_images(im.m, &dict, images, ni, batch, tl.resize_h, tl.channels, min_width, pred);
    }
    int code = 0;
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain predict: %s\n", ocr_last_error());
        code = cli_exit_code(st);
    } else {
        // Labelled lines are judged by the config's metric (Metric.ignore_space / is_filter), the
        // reference with the dictionary's case folding, as `ocrtrain eval` does.
        RecMetric metric;
        rec_metric_init(&metric, (RecMetricOptions){rc.ignore_space, rc.is_filter});
        cJSON *root = json ? cJSON_CreateObject() : NULL;
        cJSON *arr = root ? cJSON_AddArrayToObject(root, "predictions") : NULL;
        for (int i = 0; i < ni && st == OCR_OK; i++) {
            const Item *x = &it.v[i];
            if (!pred[i].ok) {
                fprintf(stderr, "ocrtrain predict: skipped %s%s%s\n", x->label ? x->where : "", x->label ? ": " : "",
                        pred[i].error);
                continue;
            }
            int correct = -1;
            if (x->label) {
                char *ref = strdup(x->label);
                if (!ref) {
                    st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
                    break;
                }
                if (dict.lower)
                    for (char *c = ref; *c; c++)
                        if (*c >= 'A' && *c <= 'Z') *c = (char)(*c + ('a' - 'A'));
                int64_t before = metric.correct;
                st = rec_metric_add(&metric, pred[i].text, ref);
                free(ref);
                correct = metric.correct > before;
            }
            if (arr) {
                cJSON *o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "path", x->path);
                cJSON_AddStringToObject(o, "prediction", pred[i].text);
                cJSON_AddNumberToObject(o, "confidence", (double)pred[i].confidence);
                if (x->label) {
                    cJSON_AddStringToObject(o, "label", x->label);
                    cJSON_AddBoolToObject(o, "correct", correct == 1);
                }
                cJSON_AddItemToArray(arr, o);
            } else if (any_labels) {
                printf("%s\t%s\t%s\t%s\t%.6f\n", x->path, pred[i].text, x->label ? x->label : "",
                       correct < 0 ? "-" : correct ? "1" : "0", (double)pred[i].confidence);
            } else {
                printf("%s\t%s\t%.6f\n", x->path, pred[i].text, (double)pred[i].confidence);
            }
        }
        RecMetricResult r = rec_metric_get(&metric);
        if (root) {
            cJSON_AddNumberToObject(root, "labelled", (double)metric.count);
            cJSON_AddNumberToObject(root, "correct", (double)metric.correct);
            if (metric.count) {
                cJSON_AddNumberToObject(root, "accuracy", r.acc);
                cJSON_AddNumberToObject(root, "norm_edit_distance", r.norm_edit_dis);
                cJSON_AddNumberToObject(root, "cer", r.cer);
            } else {
                cJSON_AddNullToObject(root, "accuracy");
            }
            cJSON_AddNumberToObject(root, "unreadable", failed);
            cJSON_AddNumberToObject(root, "bad_inputs", bad);
            char *s = cJSON_Print(root);
            printf("%s\n", s ? s : "{}");
            free(s);
            cJSON_Delete(root);
        } else if (any_labels) {
            printf("accuracy %.4f  norm_edit_distance %.4f  cer %.4f  (%lld of %lld labelled images correct)\n", r.acc,
                   r.norm_edit_dis, r.cer, (long long)metric.correct, (long long)metric.count);
        }
        if (st != OCR_OK) {
            fprintf(stderr, "ocrtrain predict: %s\n", ocr_last_error());
            code = cli_exit_code(st);
        } else if (failed || bad) {
            code = 1;
        }
    }
    for (int i = 0; images && i < ni; i++) ocr_image_free(&images[i]);
    for (int i = 0; pred && i < ni; i++) free(pred[i].text);
    free(images);
    free(pred);
    items_free(&it);
    infer_model_free(&im);
    if (dict_ok) ocr_dict_free(&dict);
    ocr_config_free(cfg);
    free(args);
    return code;

usage_error:
    usage(stderr);
    cli_config_args_free(&ca);
    free(args);
    return 2;
}

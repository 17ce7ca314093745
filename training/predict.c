#include "training/predict.h"

#include <ctype.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/image.h"
#include "data/transforms.h"
#include "training/evaluate.h"

static int add_item(PredictInputs *in, const char *path, const char *label, const char *where) {
    if (in->n == in->cap_) {
        int cap = in->cap_ ? in->cap_ * 2 : 64;
        PredictItem *v = realloc(in->v, sizeof *v * (size_t)cap);
        if (!v) return 0;
        in->v = v;
        in->cap_ = cap;
    }
    PredictItem *x = &in->v[in->n];
    x->path = strdup(path);
    x->label = label ? strdup(label) : NULL;
    x->where = strdup(where);
    if (!x->path || !x->where || (label && !x->label)) {
        free(x->path), free(x->label), free(x->where);
        return 0;
    }
    in->n++;
    return 1;
}

// Keeps a message for the user; a message that cannot be kept (OOM) is dropped, the count stays.
__attribute__((format(printf, 2, 3))) static void problem(PredictInputs *in, const char *fmt, ...) {
    char msg[4600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char **p = realloc(in->problems, sizeof *p * (size_t)(in->n_problems + 1));
    if (!p) return;
    in->problems = p;
    if ((p[in->n_problems] = strdup(msg))) in->n_problems++;
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
static int walk(PredictInputs *in, const char *dir, int depth) {
    DIR *d = opendir(dir);
    if (!d) {
        problem(in, "cannot read folder %s", dir);
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
    if (n) qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n && ok; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        struct stat sb;
        if (lstat(p, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode)) {
            if (depth < 64) ok = walk(in, p, depth + 1);
        } else if (has_image_ext(names[i])) {
            ok = add_item(in, p, NULL, p);
        } else {
            in->other_files++;
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

ocr_status_t predict_collect(PredictInputs *in, const char *const *args, int n, const char *data_dir) {
    for (int i = 0; i < n; i++) {
        struct stat sb;
        if (stat(args[i], &sb) != 0) {
            // Missing: reported when the image is loaded, like any unreadable image.
            if (!add_item(in, args[i], NULL, args[i])) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
            continue;
        }
        if (S_ISDIR(sb.st_mode)) {
            int before = in->n;
            if (!walk(in, args[i], 0)) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
            if (in->n == before) {
                problem(in, "folder %s holds no .png/.jpg/.jpeg image", args[i]);
                in->bad++;
            }
            continue;
        }
        if (looks_like_image(args[i])) {
            if (!add_item(in, args[i], NULL, args[i])) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
            continue;
        }
        // A label file: its lines, paths relative to data_dir or its own folder.
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
            problem(in, "%s is neither a PNG/JPEG image nor a label file with path<TAB>label lines%s%s", args[i],
                    st != OCR_OK ? ": " : "", st != OCR_OK ? ocr_last_error() : "");
            in->bad++;
            eval_set_free(&set);
            continue;
        }
        if (set.bad_lines) {
            ocr_skip_stats_log(&set.bad, args[i]);
            in->bad += (int)set.bad_lines;
        }
        in->any_labels = 1;
        for (int64_t k = 0; k < set.n; k++)
            if (!add_item(in, set.path[k], set.label[k], set.where[k])) {
                eval_set_free(&set);
                return ocr_set_error(OCR_ERR_OOM, "out of host memory");
            }
        eval_set_free(&set);
    }
    if (in->other_files)
        ocr_log(OCR_LOG_INFO, "predict: %lld file(s) in the folders are not .png/.jpg/.jpeg and were not read",
                (long long)in->other_files);
    return OCR_OK;
}

void predict_inputs_free(PredictInputs *in) {
    for (int i = 0; i < in->n; i++) {
        free(in->v[i].path);
        free(in->v[i].label);
        free(in->v[i].where);
    }
    free(in->v);
    for (int i = 0; i < in->n_problems; i++) free(in->problems[i]);
    free(in->problems);
    memset(in, 0, sizeof *in);
}

// Scores the labelled items that were read.
static ocr_status_t score(const PredictInputs *in, const OcrDict *dict, PredictResults *r) {
    for (int i = 0; i < r->n; i++) {
        const PredictItem *x = &in->v[i];
        r->correct[i] = -1;
        if (!r->pred[i].ok || !x->label) continue;
        char *ref = strdup(x->label);
        if (!ref) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
        if (dict->lower)
            for (char *c = ref; *c; c++)
                if (*c >= 'A' && *c <= 'Z') *c = (char)(*c + ('a' - 'A'));
        int64_t before = r->metric.correct;
        ocr_status_t st = rec_metric_add(&r->metric, r->pred[i].text, ref);
        free(ref);
        OCR_TRY(st);
        r->correct[i] = (int8_t)(r->metric.correct > before);
    }
    return OCR_OK;
}

ocr_status_t predict_run(const OcrConfig *cfg, const RunConfig *rc, const PredictOptions *o, const PredictInputs *in,
                         PredictResults *r) {
    memset(r, 0, sizeof *r);
    rec_metric_init(&r->metric, (RecMetricOptions){rc->ignore_space, rc->is_filter});
    int ni = in->n;
    r->n = ni;
    OcrImage *images = calloc((size_t)(ni ? ni : 1), sizeof *images);
    r->pred = calloc((size_t)(ni ? ni : 1), sizeof *r->pred);
    r->correct = calloc((size_t)(ni ? ni : 1), sizeof *r->correct);
    ocr_status_t st = OCR_OK;
    if (!images || !r->pred || !r->correct) st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
    OcrDict dict;
    int dict_ok = 0;
    InferModel im = {0};
    if (st == OCR_OK) st = ocr_dict_load(&dict, rc->dict_path, rc->use_space_char);
    dict_ok = st == OCR_OK;
    if (st == OCR_OK) st = infer_model_load(&im, cfg, o->weights, 0, o->device);
    // The height and channel order of the eval transforms (PaddleOCR's rec_image_shape).
    OcrTransformList tl;
    if (st == OCR_OK)
        st = ocr_transforms_parse(&tl, cfg, rc->eval.present ? "Eval.dataset.transforms" : "Train.dataset.transforms",
                                  rc->max_text_length);
    if (st == OCR_OK && !tl.has_resize) {
        const OcrArch *a = ocr_model_arch(im.m);
        tl.resize_h = a->img_h;
        tl.resize_w = a->img_w;
    }
    if (st == OCR_OK) {
        for (int i = 0; i < ni; i++) {
            if (ocr_image_load(&images[i], in->v[i].path, tl.order) != OCR_OK) {
                snprintf(r->pred[i].error, sizeof r->pred[i].error, "%s", ocr_last_error());
                r->unreadable++;
            }
        }
        st = predict_images(im.m, &dict, images, ni, o->batch, tl.resize_h, tl.channels, o->min_width, r->pred);
    }
    if (st == OCR_OK) st = score(in, &dict, r);
    for (int i = 0; images && i < ni; i++) ocr_image_free(&images[i]);
    free(images);
    infer_model_free(&im);
    if (dict_ok) ocr_dict_free(&dict);
    return st;
}

void predict_results_free(PredictResults *r) {
    for (int i = 0; r->pred && i < r->n; i++) free(r->pred[i].text);
    free(r->pred);
    free(r->correct);
    memset(r, 0, sizeof *r);
}

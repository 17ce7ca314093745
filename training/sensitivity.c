// Which layers to keep in float32 (sensitivity.h): every layer group and op type measured alone
// in the low precision and alone kept in float32, ranked, and the shortest list that restores
// the logits proposed.
#include "training/sensitivity.h"

#include <cjson/cJSON.h>
#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "amp/engine.h"
#include "core/fileio.h"
#include "core/timer.h"
#include "data/dict.h"
#include "eval/decode.h"
#include "eval/metrics.h"
#include "kernels/ctc.h"
#include "kernels/ops.h"
#include "models/amp_view.h"
#include "models/model.h"
#include "training/checkpoint.h"
#include "training/feed.h"
#include "training/inference.h"
#include "training/trainer.h"

void sens_options_default(SensOptions *o) {
    memset(o, 0, sizeof *o);
    o->dtype = OCR_F16;
    o->level = OCR_AMP_O2;
    o->batches = 2;
    o->batch_size = 8;
    o->depth = 2;
    o->threshold = 0;  // 32 unit roundoffs of the dtype (sens_default_threshold)
    o->acc_tolerance = 0.0;
    o->max_groups = 4;
    o->types = 1;
}

double sens_error(const SensMeasure *m) { return m->nonfinite > 0 ? INFINITY : m->rel_l2; }

// Rounding to float16 or bfloat16 alone moves a value by up to u = 2^-11 or 2^-8 of itself; through
// PP-OCRv4's forward the logits of a healthy AMP run land about 16 u from float32's (measured: 0.0078
// in float16, 0.068 in bfloat16). Twice that is still rounding noise; a fragile layer is far beyond.
double sens_default_threshold(ocr_dtype_t dtype) { return 32.0 * (dtype == OCR_BF16 ? 0x1p-8 : 0x1p-11); }

// ---- groups ----------------------------------------------------------------------------------

static int is_number(const char *s, size_t n) {
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

// End offsets of the levels of a name: components split at dots, a numeric component joined to
// the one before it. Returns the number of levels (at most max).
static int level_ends(const char *name, int *ends, int max) {
    int n = 0;
    size_t len = strlen(name);
    size_t start = 0;
    while (start <= len && n < max) {
        const char *dot = strchr(name + start, '.');
        size_t end = dot ? (size_t)(dot - name) : len;
        if (n > 0 && is_number(name + start, end - start)) ends[n - 1] = (int)end;
        else ends[n++] = (int)end;
        if (!dot) break;
        start = end + 1;
    }
    return n;
}

#define SENS_MAX_LEVELS 32

// Whether name has a level boundary at offset `at`.
static int has_boundary(const char *name, int at) {
    int e[SENS_MAX_LEVELS];
    int n = level_ends(name, e, SENS_MAX_LEVELS);
    for (int j = 0; j < n; j++)
        if (e[j] == at) return 1;
    return 0;
}

// The number of distinct next levels below prefix (name[0..at)) among all names (a name that
// ends there counts as one). Only "one" or "more" matters to the caller.
static int children(const char *const *names, int n, const char *prefix, int at) {
    const char *first = NULL;  // the first next level seen (pointer into its name) and its length
    int first_len = 0, leaf = 0, count = 0;
    for (int m = 0; m < n && count + leaf < 2; m++) {
        const char *s = names[m];
        if (strncmp(s, prefix, (size_t)at) != 0 || (s[at] != '.' && s[at] != '\0') || !has_boundary(s, at)) continue;
        if (s[at] == '\0') {
            leaf = 1;
            continue;
        }
        int e[SENS_MAX_LEVELS];
        int L = level_ends(s, e, SENS_MAX_LEVELS), next = (int)strlen(s);
        for (int j = 0; j < L; j++)
            if (e[j] > at) {
                next = e[j];
                break;
            }
        const char *lv = s + at + 1;
        int len = next - at - 1;
        if (!first) {
            first = lv, first_len = len, count = 1;
        } else if (len != first_len || strncmp(lv, first, (size_t)len) != 0) {
            count = 2;
        }
    }
    return count + leaf;
}

void sensitivity_group_name(const char *const *names, int n, int i, int depth, char *out, size_t cap) {
    const char *name = names[i];
    int e[SENS_MAX_LEVELS];
    int L = level_ends(name, e, SENS_MAX_LEVELS), count = 0;
    for (int j = 0; j < L - 1; j++) {
        // A level with a single child is merged with it (it does not count).
        if (children(names, n, name, e[j]) > 1) count++;
        if (count == depth) {
            snprintf(out, cap, "%.*s", e[j], name);
            return;
        }
    }
    snprintf(out, cap, "%s", name);
}

// fnmatch's special characters escaped.
static void glob_escape(const char *s, char *out, size_t cap) {
    size_t k = 0;
    for (; *s && k + 2 < cap; s++) {
        if (strchr("*?[]\\", *s)) out[k++] = '\\';
        out[k++] = *s;
    }
    out[k] = '\0';
}

// ---- the measurement context ----------------------------------------------------------------------

typedef struct {
    const OcrConfig *cfg;  // the AMP config (use_amp, level, dtype set)
    const RunConfig *rc;
    const SensOptions *o;
    double threshold;  // o->threshold, or the dtype's default
    char weights[4200];
    char device[32];
    OcrDict dict;
    int dict_ok;
    FeedBatch *batch;
    int n_batches;
    int64_t lines;
    AmpPolicy base;
    int base_ok;
    // the op table (of the float32 model)
    int n_ops;
    char **op_name;
    char **op_type;
    double *op_flops;
    int *op_lowp;  // runs in the low precision under the base policy
    // the float32 reference
    float **ref;         // per batch (B, T, C) f32
    int T, C;
    double ref_sq;       // Σ z32²
    char **ref_text;     // per line: the float32 greedy decode
    size_t text_cap;
    int variant, n_variants;
    double t0;
} Ctx;

static void ctx_free(Ctx *c) {
    for (int b = 0; b < c->n_batches; b++) {
        feed_batch_free(&c->batch[b]);
        if (c->ref) free(c->ref[b]);
    }
    free(c->batch);
    free(c->ref);
    for (int64_t i = 0; c->ref_text && i < c->lines; i++) free(c->ref_text[i]);
    free(c->ref_text);
    for (int i = 0; c->op_name && i < c->n_ops; i++) free(c->op_name[i]);
    for (int i = 0; c->op_type && i < c->n_ops; i++) free(c->op_type[i]);
    free(c->op_name);
    free(c->op_type);
    free(c->op_flops);
    free(c->op_lowp);
    if (c->base_ok) amp_policy_free(&c->base);
    if (c->dict_ok) ocr_dict_free(&c->dict);
}

typedef struct {
    OcrModel *m;
    AmpEngine e;
    int e_ok;
} Variant;

static void variant_free(Variant *v) {
    if (v->e_ok) amp_engine_free(&v->e);
    if (v->m) ocr_model_free(v->m);
    memset(v, 0, sizeof *v);
}

// A fresh model with the weights and `pol` attached (pol is copied).
static ocr_status_t variant_build(const Ctx *c, const AmpPolicy *pol, Variant *v) {
    memset(v, 0, sizeof *v);
    OCR_TRY(ocr_model_from_config(&v->m, c->cfg));
    ocr_status_t st = ocr_model_load_weights(v->m, c->weights);
    if (st != OCR_OK) st = ocr_wrap_error(st, "--weights %s", c->o->weights);
    ocr_device_t dev = ocr_cpu();
    if (st == OCR_OK) st = ocr_device_parse(c->device, &dev);
    if (st == OCR_OK && dev.type == OCR_DEVICE_CUDA) st = ocr_model_to_device(v->m, dev);
    if (st == OCR_OK) {
        AmpConfig ac;
        amp_config_init_off(&ac);
        amp_policy_copy(&ac.policy, pol);
        amp_engine_init(&v->e, &ac);
        v->e_ok = 1;
        st = ocr_amp_attach(&v->e, ocr_model_ops(v->m), ocr_model_params(v->m), ocr_model_stats(v->m));
        if (st == OCR_OK && pol->level == OCR_AMP_O1) st = ocr_model_set_cast_cache(v->m, &v->e.cache);
    }
    if (st != OCR_OK) variant_free(v);
    return st;
}

// The model's last logits as f32 on the host, into buf (B·T·C floats).
static void logits_to_host(const OcrModel *m, float *buf) {
    const OcrTensor *z = ocr_model_logits(m);
    if (z->device.type == OCR_DEVICE_CPU) {
        ocr_tensor_to_f32(z, buf);
        return;
    }
    size_t bytes = ocr_tensor_bytes(z);
    void *h = malloc(bytes ? bytes : 1);
    OCR_ASSERT(h, "out of host memory");
    ocr_copy_bytes(ocr_cpu(), h, z->device, z->data, bytes);
    OcrTensor v = ocr_tensor_view(h, z->dtype, ocr_cpu(), z->ndim, z->shape);
    ocr_tensor_to_f32(&v, buf);
    free(h);
}

// Runs the N batches through a variant. reference: this is the float32 pass (its logits and
// decodes are kept; the differences are then 0).
static ocr_status_t measure(Ctx *c, const AmpPolicy *pol, const char *what, int reference, SensMeasure *out,
                            OcrModel **keep) {
    memset(out, 0, sizeof *out);
    Variant v;
    OCR_TRY(variant_build(c, pol, &v));
    RecMetric metric;
    rec_metric_init(&metric, (RecMetricOptions){c->rc->ignore_space, c->rc->is_filter});
    double se = 0, maxabs = 0, loss_sum = 0, secs = 0;
    int64_t nonfinite = 0, line = 0, changed = 0;
    ocr_status_t st = OCR_OK;
    float *z = NULL;
    size_t z_cap = 0;
    char *text = NULL, *ref = NULL;
    float *losses = NULL;
    int32_t *infeas = NULL;
    for (int b = 0; b < c->n_batches && st == OCR_OK; b++) {
        const FeedBatch *fb = &c->batch[b];
        double t = ocr_now_seconds();
        st = infer_forward_batch(v.m, fb);
        secs += ocr_now_seconds() - t;
        if (st != OCR_OK) break;
        const OcrTensor *lg = ocr_model_logits(v.m);
        int B = (int)lg->shape[0], T = (int)lg->shape[1], C = (int)lg->shape[2];
        if (reference && b == 0) {
            c->T = T;
            c->C = C;
            c->text_cap = ctc_text_capacity(T, c->dict.classes, c->dict.num_classes);
        }
        if (C != c->dict.num_classes) {
            st = ocr_set_error(OCR_ERR_CONFIG, "the model has %d classes, the dictionary %d (Global.character_dict_path)",
                               C, c->dict.num_classes);
            break;
        }
        size_t n = (size_t)B * T * C;
        if (n > z_cap) {  // the first batch is the largest; grown anyway if one is not
            float *nz = realloc(z, n * sizeof *z);
            float *nl = realloc(losses, (size_t)B * sizeof *losses);
            int32_t *ni = realloc(infeas, (size_t)B * sizeof *infeas);
            if (nz) z = nz;
            if (nl) losses = nl;
            if (ni) infeas = ni;
            if (!nz || !nl || !ni) {
                st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
                break;
            }
            z_cap = n;
        }
        if (!text) {
            text = malloc(c->text_cap);
            ref = malloc(c->text_cap);
            if (!text || !ref) {
                st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
                break;
            }
        }
        logits_to_host(v.m, z);
        if (reference) {
            c->ref[b] = malloc(n * sizeof(float));
            if (!c->ref[b]) {
                st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
                break;
            }
            memcpy(c->ref[b], z, n * sizeof(float));
            for (size_t k = 0; k < n; k++) {
                if (!isfinite(z[k])) {
                    st = ocr_set_error(OCR_ERR_INVALID_ARG,
                                       "--weights %s: the float32 forward already gives non-finite logits (batch %d); "
                                       "these weights are broken, AMP is not the cause",
                                       c->o->weights, b + 1);
                    break;
                }
                c->ref_sq += (double)z[k] * z[k];
            }
            if (st != OCR_OK) break;
        } else {
            const float *r = c->ref[b];
            for (size_t k = 0; k < n; k++) {
                if (!isfinite(z[k])) {
                    nonfinite++;
                    continue;
                }
                double d = (double)z[k] - r[k];
                se += d * d;
                if (fabs(d) > maxabs) maxabs = fabs(d);
            }
        }
        // CTC loss on these logits, as the trainer computes it (zero_infinity, PaddleOCR's mean).
        OcrTensor zv = ocr_tensor_view(z, OCR_F32, ocr_cpu(), 3, (int64_t[]){B, T, C});
        OcrTensor tv = ocr_tensor_view(fb->labels, OCR_I32, ocr_cpu(), 2, (int64_t[]){B, fb->max_len});
        OcrTensor lv = ocr_tensor_view(fb->lengths, OCR_I32, ocr_cpu(), 1, (int64_t[]){B});
        OcrTensor sv = ocr_tensor_view(losses, OCR_F32, ocr_cpu(), 1, (int64_t[]){B});
        OcrTensor iv = ocr_tensor_view(infeas, OCR_I32, ocr_cpu(), 1, (int64_t[]){B});
        CtcParams cp = {OCR_CTC_REDUCTION_PADDLE, 1, c->rc->use_focal_loss, 1.0f};
        ocr_ctc_loss_forward(&sv, NULL, NULL, &iv, &zv, &tv, &lv, NULL, cp);
        for (int j = 0; j < B && st == OCR_OK; j++, line++) {
            loss_sum += losses[j];
            st = ctc_greedy_decode(text, c->text_cap, NULL, z + (size_t)j * T * C, T, C, 1, c->dict.classes);
            if (st != OCR_OK) break;
            feed_label_text(&c->dict, fb, j, ref, c->text_cap);
            st = rec_metric_add(&metric, text, ref);
            if (st != OCR_OK) break;
            if (reference) {
                c->ref_text[line] = strdup(text);
                if (!c->ref_text[line]) st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
            } else {
                changed += strcmp(text, c->ref_text[line]) != 0;
            }
        }
    }
    if (st == OCR_OK) {
        out->lines = line;
        out->nonfinite = nonfinite;
        out->rel_l2 = nonfinite ? INFINITY : c->ref_sq > 0 ? sqrt(se / c->ref_sq) : sqrt(se);
        out->max_abs = nonfinite ? INFINITY : maxabs;
        out->loss = line ? loss_sum / (double)line : 0;
        out->acc = rec_metric_get(&metric).acc;
        out->changed = changed;
        out->seconds = secs;
        c->variant++;
        if (c->o->progress) {
            fprintf(c->o->progress, "sensitivity [%d/%d %.0fs] %-60s ", c->variant, c->n_variants,
                    ocr_now_seconds() - c->t0, what);
            if (reference)
                fprintf(c->o->progress, "acc %.4f, loss %.4f (%.2f s)\n", out->acc, out->loss, secs);
            else if (nonfinite)
                fprintf(c->o->progress, "%lld non-finite logits, acc %.4f (%.2f s)\n", (long long)nonfinite, out->acc,
                        secs);
            else
                fprintf(c->o->progress, "rel-L2 %.3g, max %.3g, acc %.4f, %lld changed (%.2f s)\n", out->rel_l2,
                        out->max_abs, out->acc, (long long)changed, secs);
            fflush(c->o->progress);
        }
    }
    free(z);
    free(text);
    free(ref);
    free(losses);
    free(infeas);
    if (keep && st == OCR_OK) {
        // The caller keeps the model (the float32 reference: its op table names the groups).
        *keep = v.m;
        v.m = NULL;
    }
    variant_free(&v);
    return st;
}

static int passes(const Ctx *c, const SensMeasure *m, const SensMeasure *fp32) {
    return m->nonfinite == 0 && m->rel_l2 <= c->threshold && fp32->acc - m->acc <= c->o->acc_tolerance + 1e-12;
}

// ---- scoring ------------------------------------------------------------------------------------

// E(amp) − E(fp32_kept) with ∞ − ∞ = 0 and ∞ − finite = ∞.
static double recovery(double e_amp, double e_kept) {
    if (isinf(e_amp)) return isinf(e_kept) ? 0 : INFINITY;
    double d = e_amp - e_kept;
    return d > 0 ? d : 0;
}

static const SensGroup *g_sort_groups;

static int cmp_rank(const void *a, const void *b) {
    const SensGroup *x = &g_sort_groups[*(const int *)a], *y = &g_sort_groups[*(const int *)b];
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->low_only.nonfinite != y->low_only.nonfinite) return x->low_only.nonfinite > y->low_only.nonfinite ? -1 : 1;
    return *(const int *)a - *(const int *)b;  // forward order
}

static void rank_groups(SensGroup *g, int first, int count, int **order, int *n) {
    *order = malloc((size_t)(count ? count : 1) * sizeof **order);
    OCR_ASSERT(*order, "out of host memory");
    *n = 0;
    for (int i = first; i < first + count; i++)
        if (g[i].measured) (*order)[(*n)++] = i;
    g_sort_groups = g;
    qsort(*order, (size_t)*n, sizeof **order, cmp_rank);
    for (int k = 0; k < *n; k++) g[(*order)[k]].rank = k + 1;
}

// ---- setup -----------------------------------------------------------------------------------------

static ocr_status_t check_options(const SensOptions *o) {
    if (!o->weights || !o->weights[0]) return ocr_set_error(OCR_ERR_INVALID_ARG, "--weights W is required");
    if (o->dtype != OCR_F16 && o->dtype != OCR_BF16)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "--dtype must be float16 or bfloat16, got %s", ocr_dtype_name(o->dtype));
    if (o->level != OCR_AMP_O1 && o->level != OCR_AMP_O2)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "--level must be O1 or O2, got %s", amp_level_name(o->level));
    if (o->batches < 1) return ocr_set_error(OCR_ERR_INVALID_ARG, "--batches must be at least 1, got %d", o->batches);
    if (o->batch_size < 0)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "--batch-size must be positive (0: the Eval loader's), got %d",
                             o->batch_size);
    if (o->depth < 1 || o->depth > SENS_MAX_LEVELS)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "--depth must be in [1, %d], got %d", SENS_MAX_LEVELS, o->depth);
    if (!(o->threshold >= 0) || !isfinite(o->threshold))
        return ocr_set_error(OCR_ERR_INVALID_ARG, "--threshold must be a positive number (0: the dtype's default), got %g",
                             o->threshold);
    if (!(o->acc_tolerance >= 0 && o->acc_tolerance <= 1))
        return ocr_set_error(OCR_ERR_INVALID_ARG, "--acc-tolerance must be in [0, 1], got %g", o->acc_tolerance);
    if (o->max_groups < 1 || o->max_groups > 64)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "--max-groups must be in [1, 64], got %d", o->max_groups);
    return OCR_OK;
}

// A copy of cfg with the AMP setting of the measurement.
static ocr_status_t amp_config_copy(OcrConfig **out, const OcrConfig *cfg, const SensOptions *o) {
    OCR_TRY(ocr_config_clone(out, cfg));
    char lv[64], dt[64];
    snprintf(lv, sizeof lv, "Global.amp_level=%s", amp_level_name(o->level));
    snprintf(dt, sizeof dt, "Global.amp_dtype=%s", o->dtype == OCR_BF16 ? "bfloat16" : "float16");
    ocr_status_t st = ocr_config_apply_override(*out, "Global.use_amp=true");
    if (st == OCR_OK) st = ocr_config_apply_override(*out, lv);
    if (st == OCR_OK) st = ocr_config_apply_override(*out, dt);
    if (st != OCR_OK) {
        ocr_config_free(*out);
        *out = NULL;
    }
    return st;
}

// The first N Eval batches, copied (the feed's views live until its next call).
static ocr_status_t read_batches(Ctx *c) {
    Feed f;
    OCR_TRY(feed_open(&f, c->cfg, "Eval", &c->dict, 0, c->o->batch_size));
    ocr_status_t st = OCR_OK;
    c->batch = calloc((size_t)c->o->batches, sizeof *c->batch);
    c->ref = calloc((size_t)c->o->batches, sizeof *c->ref);
    if (!c->batch || !c->ref) st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
    for (int b = 0; b < c->o->batches && st == OCR_OK; b++) {
        FeedBatch view;
        int end = 0;
        st = feed_next(&f, &view, &end);
        if (st != OCR_OK || end) break;
        FeedBatch *d = &c->batch[b];
        st = feed_batch_alloc(d, view.count, view.height, view.width, view.channels, view.max_len);
        if (st != OCR_OK) break;
        d->count = view.count;
        memcpy(d->pixels, view.pixels, (size_t)view.count * view.height * view.width * view.channels);
        memcpy(d->labels, view.labels, (size_t)view.count * view.max_len * sizeof *d->labels);
        memcpy(d->lengths, view.lengths, (size_t)view.count * sizeof *d->lengths);
        memcpy(d->widths, view.widths, (size_t)view.count * sizeof *d->widths);
        if (view.index) memcpy(d->index, view.index, (size_t)view.count * sizeof *d->index);
        c->n_batches++;
        c->lines += view.count;
    }
    feed_close(&f);
    if (st == OCR_OK && c->n_batches == 0) st = ocr_set_error(OCR_ERR_FORMAT, "Eval: no batch to measure on");
    if (st == OCR_OK && c->n_batches < c->o->batches)
        ocr_log(OCR_LOG_WARN, "sensitivity: the Eval split has %d batch%s of %d lines, fewer than --batches %d",
                c->n_batches, c->n_batches == 1 ? "" : "es", c->batch[0].count, c->o->batches);
    if (st == OCR_OK) {
        c->ref_text = calloc((size_t)c->lines, sizeof *c->ref_text);
        if (!c->ref_text) st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
    }
    return st;
}

// Groups of the op table: layer groups at the depth (forward order of their first op), then the
// op types that run in the low precision.
static ocr_status_t make_groups(Ctx *c, SensResult *r) {
    int n = c->n_ops;
    char(*gname)[SENS_NAME_MAX] = malloc((size_t)(n ? n : 1) * sizeof *gname);
    SensGroup *g = calloc((size_t)(2 * n + 1), sizeof *g);
    if (!gname || !g) {
        free(gname);
        free(g);
        return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    }
    int ng = 0;
    int *group_of = malloc((size_t)(n ? n : 1) * sizeof *group_of);
    OCR_ASSERT(group_of, "out of host memory");
    for (int i = 0; i < n; i++) {
        sensitivity_group_name((const char *const *)c->op_name, n, i, c->o->depth, gname[i], SENS_NAME_MAX);
        int k = 0;
        while (k < ng && strcmp(g[k].name, gname[i]) != 0) k++;
        if (k == ng) snprintf(g[ng++].name, SENS_NAME_MAX, "%s", gname[i]);
        group_of[i] = k;
        g[k].n_ops++;
        if (c->op_lowp[i]) {
            g[k].n_lowp++;
            g[k].lowp_flops += c->op_flops[i];
        }
    }
    // Patterns: "P" and/or "P.*", checked to match exactly the group's ops; else the ops' names.
    for (int k = 0; k < ng; k++) {
        SensGroup *s = &g[k];
        char esc[SENS_NAME_MAX];
        glob_escape(s->name, esc, sizeof esc);
        int exact = 0, below = 0;
        for (int i = 0; i < n; i++) {
            if (group_of[i] != k) continue;
            if (strcmp(c->op_name[i], s->name) == 0) exact = 1;
            else below = 1;
        }
        if (exact) snprintf(s->patterns[s->n_patterns++], SENS_NAME_MAX, "%s", esc);
        if (below) snprintf(s->patterns[s->n_patterns++], SENS_NAME_MAX, "%.*s.*", SENS_NAME_MAX - 3, esc);
        int ok = 1;
        for (int i = 0; i < n && ok; i++) {
            int hit = 0;
            for (int p = 0; p < s->n_patterns && !hit; p++) hit = fnmatch(s->patterns[p], c->op_name[i], 0) == 0;
            ok = hit == (group_of[i] == k);
        }
        if (!ok) {
            // The ops' own names, when the group is small enough to list.
            s->n_patterns = 0;
            ok = 1;
            for (int i = 0; i < n && ok; i++) {
                if (group_of[i] != k) continue;
                if (s->n_patterns == SENS_MAX_PATTERNS) ok = 0;
                else glob_escape(c->op_name[i], s->patterns[s->n_patterns++], SENS_NAME_MAX);
            }
            for (int i = 0; i < n && ok; i++) {
                int hit = 0;
                for (int p = 0; p < s->n_patterns && !hit; p++) hit = fnmatch(s->patterns[p], c->op_name[i], 0) == 0;
                ok = hit == (group_of[i] == k);
            }
            if (!ok) {
                ocr_log(OCR_LOG_WARN, "sensitivity: group %s has no glob that matches exactly its ops; not measured",
                        s->name);
                s->n_lowp = 0;
            }
        }
        s->measured = s->n_lowp > 0;
    }
    r->n_layers = ng;
    // Op types that run in the low precision.
    if (c->o->types) {
        for (int i = 0; i < n; i++) {
            if (!c->op_lowp[i]) continue;
            int k = r->n_layers;
            while (k < ng && strcmp(g[k].name, c->op_type[i]) != 0) k++;
            if (k == ng) {
                snprintf(g[ng].name, SENS_NAME_MAX, "%s", c->op_type[i]);
                g[ng].is_type = 1;
                g[ng].measured = 1;
                ng++;
            }
            g[k].n_lowp++;
            g[k].lowp_flops += c->op_flops[i];
        }
        for (int i = 0; i < n; i++)
            for (int k = r->n_layers; k < ng; k++)
                if (strcmp(g[k].name, c->op_type[i]) == 0) g[k].n_ops++;
    }
    r->groups = g;
    r->n_groups = ng;
    free(gname);
    free(group_of);
    return OCR_OK;
}

// The policy of a variant: base, restricted or extended.
enum { V_LOW_ONLY, V_FP32_KEPT };

static ocr_status_t group_policy(const Ctx *c, const SensGroup *g, int kind, AmpPolicy *p) {
    amp_policy_copy(p, &c->base);
    const char *list[SENS_MAX_PATTERNS + 1] = {0};
    if (g->is_type) {
        list[0] = g->name;
    } else {
        for (int k = 0; k < g->n_patterns; k++) list[k] = g->patterns[k];
    }
    ocr_status_t st;
    if (kind == V_LOW_ONLY) st = g->is_type ? amp_policy_set_lowp_types(p, list) : amp_policy_set_lowp_layers(p, list);
    else st = g->is_type ? amp_policy_add_black(p, list) : amp_policy_add_fp32_layers(p, list);
    if (st != OCR_OK) amp_policy_free(p);
    return st;
}

// The policy with the first k ranked layer groups kept in float32.
static ocr_status_t prefix_policy(const Ctx *c, const SensResult *r, int k, AmpPolicy *p) {
    amp_policy_copy(p, &c->base);
    ocr_status_t st = OCR_OK;
    for (int j = 0; j < k && st == OCR_OK; j++) {
        const SensGroup *g = &r->groups[r->layer_rank[j]];
        const char *list[SENS_MAX_PATTERNS + 1] = {0};
        for (int q = 0; q < g->n_patterns; q++) list[q] = g->patterns[q];
        st = amp_policy_add_fp32_layers(p, list);
    }
    if (st != OCR_OK) amp_policy_free(p);
    return st;
}

// ---- the proposal config ----------------------------------------------------------------------------

// The config's own list at path (strings) with `add` appended (duplicates skipped), as a JSON list.
static char *list_json(const OcrConfig *cfg, const char *path, const char *const *add, int n_add) {
    cJSON *arr = cJSON_CreateArray();
    const cJSON *node = ocr_config_node(cfg, path);
    if (node && cJSON_IsArray(node))
        for (const cJSON *it = node->child; it; it = it->next)
            if (cJSON_IsString(it)) cJSON_AddItemToArray(arr, cJSON_CreateString(it->valuestring));
    for (int i = 0; i < n_add; i++) {
        int dup = 0;
        for (const cJSON *it = arr->child; it && !dup; it = it->next) dup = strcmp(it->valuestring, add[i]) == 0;
        if (!dup) cJSON_AddItemToArray(arr, cJSON_CreateString(add[i]));
    }
    char *s = cJSON_PrintUnformatted(arr);
    cJSON_Delete(arr);
    return s;
}

// The proposed layer patterns and op type.
static int proposal_entries(const SensResult *r, const char **layers, int cap, const char **type) {
    int n = 0;
    *type = r->black_type >= 0 ? r->groups[r->black_type].name : NULL;
    for (int j = 0; j < r->n_fp32_groups; j++) {
        const SensGroup *g = &r->groups[r->fp32_groups[j]];
        for (int q = 0; q < g->n_patterns && n < cap; q++) layers[n++] = g->patterns[q];
    }
    return n;
}

static int has_proposal(const SensResult *r) { return r->n_fp32_groups > 0 || r->black_type >= 0; }

ocr_status_t sensitivity_proposal_overrides(const SensResult *r, char ***list, int *n) {
    *list = NULL;
    *n = 0;
    if (!has_proposal(r)) return OCR_OK;
    const char *layers[64 * SENS_MAX_PATTERNS], *type;
    int nl = proposal_entries(r, layers, 64 * SENS_MAX_PATTERNS, &type);
    char **out = calloc(5, sizeof *out);
    if (!out) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    int k = 0;
    char buf[256];
    out[k++] = strdup("Global.use_amp=true");
    snprintf(buf, sizeof buf, "Global.amp_level=%s", amp_level_name(r->level));
    out[k++] = strdup(buf);
    snprintf(buf, sizeof buf, "Global.amp_dtype=%s", r->dtype == OCR_BF16 ? "bfloat16" : "float16");
    out[k++] = strdup(buf);
    if (nl > 0) {
        char *j = list_json(r->amp_cfg, "Global.amp_fp32_layers", layers, nl);
        size_t len = (j ? strlen(j) : 0) + 64;
        out[k] = malloc(len);
        if (out[k] && j) snprintf(out[k], len, "Global.amp_fp32_layers=%s", j);
        k++;
        free(j);
    }
    if (type) {
        char *j = list_json(r->amp_cfg, "Global.amp_custom_black_list", &type, 1);
        size_t len = (j ? strlen(j) : 0) + 64;
        out[k] = malloc(len);
        if (out[k] && j) snprintf(out[k], len, "Global.amp_custom_black_list=%s", j);
        k++;
        free(j);
    }
    for (int i = 0; i < k; i++)
        if (!out[i]) {
            sensitivity_overrides_free(out, k);
            return ocr_set_error(OCR_ERR_OOM, "out of host memory");
        }
    *list = out;
    *n = k;
    return OCR_OK;
}

void sensitivity_overrides_free(char **list, int n) {
    for (int i = 0; list && i < n; i++) free(list[i]);
    free(list);
}

static ocr_status_t make_proposal_cfg(SensResult *r) {
    char **ov;
    int n;
    OCR_TRY(sensitivity_proposal_overrides(r, &ov, &n));
    if (n == 0) return OCR_OK;
    char *json = ocr_config_to_json(r->amp_cfg);
    ocr_status_t st = json ? ocr_config_parse(&r->proposal_cfg, json, "config_with_proposal.json")
                           : ocr_set_error(OCR_ERR_OOM, "out of host memory");
    free(json);
    for (int i = 0; i < n && st == OCR_OK; i++) st = ocr_config_apply_override(r->proposal_cfg, ov[i]);
    // The proposal must load as the user will load it.
    AmpConfig ac;
    if (st == OCR_OK) st = amp_config_from_config(&ac, r->proposal_cfg);
    if (st == OCR_OK) amp_config_free(&ac);
    sensitivity_overrides_free(ov, n);
    if (st != OCR_OK && r->proposal_cfg) {
        ocr_config_free(r->proposal_cfg);
        r->proposal_cfg = NULL;
    }
    return st;
}

// ---- the run ----------------------------------------------------------------------------------------

void sensitivity_result_free(SensResult *r) {
    free(r->groups);
    free(r->layer_rank);
    free(r->type_rank);
    if (r->amp_cfg) ocr_config_free(r->amp_cfg);
    if (r->proposal_cfg) ocr_config_free(r->proposal_cfg);
    memset(r, 0, sizeof *r);
}

static double op_flops_total(const Ctx *c) {
    double t = 0;
    for (int i = 0; i < c->n_ops; i++) t += c->op_flops[i];
    return t;
}

static ocr_status_t run(Ctx *c, SensResult *r) {
    const SensOptions *o = c->o;
    // The weights, the Eval batches and the policy, before any measurement.
    ocr_status_t wst = ckpt_weights_path(o->weights, c->weights, sizeof c->weights);
    if (wst != OCR_OK) return ocr_wrap_error(wst, "--weights");
    {
        OcrModel *m;
        OCR_TRY(ocr_model_from_config(&m, c->cfg));
        ocr_status_t st = ocr_model_load_weights(m, c->weights);
        ocr_model_free(m);
        if (st != OCR_OK) return ocr_wrap_error(st, "--weights %s (for this config's Architecture)", o->weights);
    }
    AmpConfig ac;
    OCR_TRY(amp_config_from_config(&ac, c->cfg));
    amp_policy_copy(&c->base, &ac.policy);
    c->base_ok = 1;
    amp_config_free(&ac);
    OCR_TRY(training_resolve_device(c->rc->device_name, c->device, sizeof c->device));
    if (strncmp(c->device, "cuda", 4) == 0) {
        TrainingDeviceInfo info;
        OCR_TRY(training_device_prepare(c->device, o->dtype, 0, &info));
    }
    OCR_TRY(ocr_dict_load(&c->dict, c->rc->dict_path, c->rc->use_space_char));
    c->dict_ok = 1;
    OCR_TRY(read_batches(c));
    r->lines = c->lines;
    r->batches = c->n_batches;
    r->batch_size = c->batch[0].count;
    c->t0 = ocr_now_seconds();

    // The float32 reference; its op table gives the groups.
    AmpPolicy off;
    amp_policy_init_off(&off);
    OcrModel *m32 = NULL;
    c->n_variants = 2;  // the float32 and AMP passes; groups are added once known
    OCR_TRY(measure(c, &off, "float32 (reference)", 1, &r->fp32, &m32));
    const OcrOpTable *ops = ocr_model_ops(m32);
    c->n_ops = ops->count;
    c->op_name = calloc((size_t)c->n_ops, sizeof *c->op_name);
    c->op_type = calloc((size_t)c->n_ops, sizeof *c->op_type);
    c->op_flops = calloc((size_t)c->n_ops, sizeof *c->op_flops);
    c->op_lowp = calloc((size_t)c->n_ops, sizeof *c->op_lowp);
    if (!c->op_name || !c->op_type || !c->op_flops || !c->op_lowp) {
        ocr_model_free(m32);
        return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    }
    AmpOpEntry *entries = malloc((size_t)c->n_ops * sizeof *entries);
    ocr_dtype_t *dt = malloc((size_t)c->n_ops * sizeof *dt);
    OCR_ASSERT(entries && dt, "out of host memory");
    for (int i = 0; i < c->n_ops; i++) {
        c->op_name[i] = strdup(ops->items[i].name);
        c->op_type[i] = strdup(ops->items[i].type);
        OCR_ASSERT(c->op_name[i] && c->op_type[i], "out of host memory");
        c->op_flops[i] = ops->items[i].flops;  // of the last batch: only the shares are used
        entries[i] = (AmpOpEntry){c->op_name[i], c->op_type[i], i - 1};
    }
    amp_policy_resolve(&c->base, entries, c->n_ops, dt, NULL, NULL);
    for (int i = 0; i < c->n_ops; i++) c->op_lowp[i] = dt[i] != OCR_F32;
    free(entries);
    free(dt);
    ocr_model_free(m32);
    r->total_flops = op_flops_total(c);

    OCR_TRY(make_groups(c, r));
    for (int k = 0; k < r->n_groups; k++) c->n_variants += r->groups[k].measured ? 2 : 0;

    char what[SENS_NAME_MAX + 64];
    snprintf(what, sizeof what, "AMP (%s %s)", ocr_dtype_name(o->dtype), amp_level_name(o->level));
    OCR_TRY(measure(c, &c->base, what, 0, &r->amp, NULL));
    r->amp_passes = passes(c, &r->amp, &r->fp32);

    for (int k = 0; k < r->n_groups; k++) {
        SensGroup *g = &r->groups[k];
        if (!g->measured) continue;
        for (int kind = 0; kind < 2; kind++) {
            AmpPolicy p;
            ocr_status_t st = group_policy(c, g, kind, &p);
            if (st != OCR_OK && g->is_type) {
                // A type on the config's custom white list cannot be black-listed as well.
                ocr_log(OCR_LOG_WARN, "sensitivity: op type %s not measured: %s", g->name, ocr_last_error());
                g->measured = 0;
                c->n_variants -= 2 - kind;
                break;
            }
            OCR_TRY(st);
            snprintf(what, sizeof what, "%s %s %s", kind == V_LOW_ONLY ? "only" : "all but", g->name,
                     kind == V_LOW_ONLY ? "low" : "low (it float32)");
            st = measure(c, &p, what, 0, kind == V_LOW_ONLY ? &g->low_only : &g->fp32_kept, NULL);
            amp_policy_free(&p);
            OCR_TRY(st);
        }
        if (g->measured)
            g->score = fmax(sens_error(&g->low_only), recovery(sens_error(&r->amp), sens_error(&g->fp32_kept)));
    }
    rank_groups(r->groups, 0, r->n_layers, &r->layer_rank, &r->n_ranked_layers);
    rank_groups(r->groups, r->n_layers, r->n_groups - r->n_layers, &r->type_rank, &r->n_ranked_types);

    // The proposal: the shortest passing prefix of the ranking, or one op type that passes with
    // fewer FLOPs moved back to float32; when nothing passes, the candidate that comes closest.
    r->black_type = -1;
    r->proposal_needed = !r->amp_passes;
    if (r->proposal_needed) {
        // One that moves more than half of the low-precision FLOPs back to float32 is AMP turned
        // off, not a list of fragile layers: not a candidate, and the search stops there.
        double lowp_total = 0;
        for (int i = 0; i < c->n_ops; i++) lowp_total += c->op_lowp[i] ? c->op_flops[i] : 0;
        const double cap = 0.5 * lowp_total;
        int kmax = o->max_groups < r->n_ranked_layers ? o->max_groups : r->n_ranked_layers;
        double prefix_cost = 0;
        for (int k = 1; k <= kmax; k++) {
            prefix_cost += r->groups[r->layer_rank[k - 1]].lowp_flops;
            if (prefix_cost > cap) break;
            SensStep *s = &r->steps[r->n_steps];
            s->k = k;
            if (k == 1) {
                s->m = r->groups[r->layer_rank[0]].fp32_kept;  // the same policy, already measured
            } else {
                AmpPolicy p;
                OCR_TRY(prefix_policy(c, r, k, &p));
                c->n_variants++;
                snprintf(what, sizeof what, "all but the top %d groups low (they float32)", k);
                ocr_status_t st = measure(c, &p, what, 0, &s->m, NULL);
                amp_policy_free(&p);
                OCR_TRY(st);
            }
            s->passes = passes(c, &s->m, &r->fp32);
            r->n_steps++;
            if (s->passes) break;
        }
        // The candidates: each measured prefix and each op type.
        int best = -1, best_pass = 0;  // >= 0: a step; <= -2: type rank index -(best + 2)
        double best_cost = INFINITY, best_e = INFINITY;
        const double e_amp = sens_error(&r->amp);
        for (int q = 0; q < r->n_steps + r->n_ranked_types; q++) {
            const SensMeasure *m;
            double cost = 0;
            if (q < r->n_steps) {
                m = &r->steps[q].m;
                for (int j = 0; j < r->steps[q].k; j++) cost += r->groups[r->layer_rank[j]].lowp_flops;
            } else {
                const SensGroup *t = &r->groups[r->type_rank[q - r->n_steps]];
                m = &t->fp32_kept;
                cost = t->lowp_flops;
            }
            if (cost > cap) continue;
            int ok = passes(c, m, &r->fp32);
            double e = sens_error(m);
            if (!ok && !(e < e_amp)) continue;  // neither passes nor improves
            int better = best == -1 || (ok && !best_pass) ||
                         (ok == best_pass && (ok ? cost < best_cost : e < best_e || (e == best_e && cost < best_cost)));
            if (better) {
                best = q < r->n_steps ? q : -(q - r->n_steps) - 2;
                best_pass = ok, best_cost = cost, best_e = e;
            }
        }
        if (best >= 0) {
            const SensStep *st = &r->steps[best];
            for (int j = 0; j < st->k; j++) r->fp32_groups[r->n_fp32_groups++] = r->layer_rank[j];
            r->proposed = st->m;
        } else if (best <= -2) {
            r->black_type = r->type_rank[-(best + 2)];
            r->proposed = r->groups[r->black_type].fp32_kept;
        }
        if (best != -1) {
            r->proposal_passes = best_pass;
            r->proposal_fp32_flops = best_cost;
        }
        OCR_TRY(make_proposal_cfg(r));
    }
    r->seconds = ocr_now_seconds() - c->t0;
    return OCR_OK;
}

ocr_status_t sensitivity_run(const OcrConfig *cfg, const RunConfig *rc, const SensOptions *o, SensResult *out) {
    memset(out, 0, sizeof *out);
    out->black_type = -1;
    OCR_TRY(check_options(o));
    out->dtype = o->dtype;
    out->level = o->level;
    out->depth = o->depth;
    out->threshold = o->threshold > 0 ? o->threshold : sens_default_threshold(o->dtype);
    out->acc_tolerance = o->acc_tolerance;
    OCR_TRY(amp_config_copy(&out->amp_cfg, cfg, o));
    Ctx c;
    memset(&c, 0, sizeof c);
    c.cfg = out->amp_cfg;
    c.rc = rc;
    c.o = o;
    c.threshold = out->threshold;
    ocr_status_t st = run(&c, out);
    ctx_free(&c);
    if (st != OCR_OK) sensitivity_result_free(out);
    return st;
}

// ---- files ----------------------------------------------------------------------------------------

// A number, or null for ±∞ / NaN (JSON has neither).
static void add_num(cJSON *o, const char *key, double v) {
    if (isfinite(v)) cJSON_AddNumberToObject(o, key, v);
    else cJSON_AddNullToObject(o, key);
}

static cJSON *measure_json(const SensMeasure *m, const SensMeasure *fp32) {
    cJSON *o = cJSON_CreateObject();
    add_num(o, "rel_l2", m->rel_l2);
    add_num(o, "max_abs", m->max_abs);
    cJSON_AddNumberToObject(o, "nonfinite_logits", (double)m->nonfinite);
    add_num(o, "loss", m->loss);
    if (fp32) add_num(o, "loss_delta", m->loss - fp32->loss);
    cJSON_AddNumberToObject(o, "accuracy", m->acc);
    if (fp32) cJSON_AddNumberToObject(o, "accuracy_delta", m->acc - fp32->acc);
    cJSON_AddNumberToObject(o, "lines_changed", (double)m->changed);
    cJSON_AddNumberToObject(o, "seconds", m->seconds);
    return o;
}

static cJSON *group_json(const SensResult *r, const SensGroup *g) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, g->is_type ? "op_type" : "group", g->name);
    cJSON_AddNumberToObject(o, "rank", g->rank);
    if (g->measured) add_num(o, "score", g->score);
    cJSON_AddNumberToObject(o, "ops", g->n_ops);
    cJSON_AddNumberToObject(o, "low_precision_ops", g->n_lowp);
    cJSON_AddNumberToObject(o, "low_precision_flops_share", r->total_flops > 0 ? g->lowp_flops / r->total_flops : 0);
    if (!g->is_type) {
        cJSON *p = cJSON_AddArrayToObject(o, "patterns");
        for (int k = 0; k < g->n_patterns; k++) cJSON_AddItemToArray(p, cJSON_CreateString(g->patterns[k]));
    }
    if (g->measured) {
        cJSON_AddItemToObject(o, "low_only", measure_json(&g->low_only, &r->fp32));
        cJSON_AddItemToObject(o, "fp32_kept", measure_json(&g->fp32_kept, &r->fp32));
    }
    return o;
}

static const char *dtype_key(ocr_dtype_t d) { return d == OCR_BF16 ? "bfloat16" : "float16"; }

ocr_status_t sensitivity_write(const SensResult *r, const char *dir) {
    OCR_TRY(ocr_make_dirs(dir));
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "amp_dtype", dtype_key(r->dtype));
    cJSON_AddStringToObject(o, "amp_level", amp_level_name(r->level));
    cJSON_AddNumberToObject(o, "depth", r->depth);
    cJSON_AddNumberToObject(o, "batches", r->batches);
    cJSON_AddNumberToObject(o, "batch_size", r->batch_size);
    cJSON_AddNumberToObject(o, "lines", (double)r->lines);
    cJSON_AddNumberToObject(o, "threshold", r->threshold);
    cJSON_AddNumberToObject(o, "acc_tolerance", r->acc_tolerance);
    cJSON_AddStringToObject(o, "score",
                            "max(E(low_only), E(amp) - E(fp32_kept)); E = ||z - z32|| / ||z32|| over the logits, "
                            "infinite (null) when non-finite logits appear");
    cJSON_AddItemToObject(o, "fp32", measure_json(&r->fp32, NULL));
    cJSON *amp = measure_json(&r->amp, &r->fp32);
    cJSON_AddBoolToObject(amp, "passes", r->amp_passes);
    cJSON_AddItemToObject(o, "amp", amp);
    cJSON *layers = cJSON_AddArrayToObject(o, "layers");
    for (int k = 0; k < r->n_ranked_layers; k++) cJSON_AddItemToArray(layers, group_json(r, &r->groups[r->layer_rank[k]]));
    for (int k = 0; k < r->n_layers; k++)
        if (!r->groups[k].measured) cJSON_AddItemToArray(layers, group_json(r, &r->groups[k]));
    cJSON *types = cJSON_AddArrayToObject(o, "op_types");
    for (int k = 0; k < r->n_ranked_types; k++) cJSON_AddItemToArray(types, group_json(r, &r->groups[r->type_rank[k]]));
    cJSON *search = cJSON_AddArrayToObject(o, "search");
    for (int s = 0; s < r->n_steps; s++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "groups", r->steps[s].k);
        cJSON_AddItemToObject(e, "measure", measure_json(&r->steps[s].m, &r->fp32));
        cJSON_AddBoolToObject(e, "passes", r->steps[s].passes);
        cJSON_AddItemToArray(search, e);
    }
    cJSON *p = cJSON_AddObjectToObject(o, "proposal");
    cJSON_AddBoolToObject(p, "needed", r->proposal_needed);
    const char *lay[64 * SENS_MAX_PATTERNS], *type;
    int nl = proposal_entries(r, lay, 64 * SENS_MAX_PATTERNS, &type);
    cJSON *pl = cJSON_AddArrayToObject(p, "amp_fp32_layers");
    for (int k = 0; k < nl; k++) cJSON_AddItemToArray(pl, cJSON_CreateString(lay[k]));
    cJSON *pb = cJSON_AddArrayToObject(p, "amp_custom_black_list");
    if (type) cJSON_AddItemToArray(pb, cJSON_CreateString(type));
    if (has_proposal(r)) {
        cJSON_AddBoolToObject(p, "passes", r->proposal_passes);
        cJSON_AddItemToObject(p, "measure", measure_json(&r->proposed, &r->fp32));
        cJSON_AddNumberToObject(p, "fp32_flops_share", r->total_flops > 0 ? r->proposal_fp32_flops / r->total_flops : 0);
        char **ov;
        int n;
        if (sensitivity_proposal_overrides(r, &ov, &n) == OCR_OK) {
            cJSON *a = cJSON_AddArrayToObject(p, "overrides");
            for (int k = 0; k < n; k++) cJSON_AddItemToArray(a, cJSON_CreateString(ov[k]));
            sensitivity_overrides_free(ov, n);
        }
    }
    cJSON_AddNumberToObject(o, "seconds", r->seconds);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (!text) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    char path[4200];
    snprintf(path, sizeof path, "%s/sensitivity.json", dir);
    ocr_status_t st = ocr_write_file_atomic(path, text, strlen(text));
    free(text);
    OCR_TRY(st);
    if (!has_proposal(r) || !r->proposal_cfg) return OCR_OK;

    // The whole config with the proposal, for -c.
    text = ocr_config_to_json(r->proposal_cfg);
    if (!text) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    snprintf(path, sizeof path, "%s/config_with_proposal.json", dir);
    st = ocr_write_file_atomic(path, text, strlen(text));
    free(text);
    OCR_TRY(st);

    // The Global keys alone, a snippet for a PaddleOCR config (flow lists of quoted strings).
    char *fl = list_json(r->amp_cfg, "Global.amp_fp32_layers", lay, nl);
    char *bl = list_json(r->amp_cfg, "Global.amp_custom_black_list", &type, type ? 1 : 0);
    char *yml = NULL;
    size_t size = 0;
    FILE *f = fl && bl ? open_memstream(&yml, &size) : NULL;
    if (!f) {
        free(fl);
        free(bl);
        return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    }
    char e_amp[32], e_prop[32];
    if (r->amp.nonfinite) snprintf(e_amp, sizeof e_amp, "non-finite");
    else snprintf(e_amp, sizeof e_amp, "%.3g", r->amp.rel_l2);
    if (r->proposed.nonfinite) snprintf(e_prop, sizeof e_prop, "non-finite");
    else snprintf(e_prop, sizeof e_prop, "%.3g", r->proposed.rel_l2);
    fprintf(f,
            "# ocrtrain sensitivity: %s %s on %lld Eval lines. Relative L2 distance of the logits from float32:\n"
            "# AMP %s, AMP with these keys %s (threshold %g)%s.\n"
            "Global:\n"
            "  use_amp: true\n"
            "  amp_level: %s\n"
            "  amp_dtype: %s\n"
            "  amp_fp32_layers: %s\n"
            "  amp_custom_black_list: %s\n",
            dtype_key(r->dtype), amp_level_name(r->level), (long long)r->lines, e_amp, e_prop, r->threshold,
            r->proposal_passes ? "" : ": it does NOT reach the threshold", amp_level_name(r->level),
            dtype_key(r->dtype), fl, bl);
    fclose(f);
    free(fl);
    free(bl);
    snprintf(path, sizeof path, "%s/proposal.yml", dir);
    st = ocr_write_file_atomic(path, yml, size);
    free(yml);
    return st;
}

// ---- the comparison ---------------------------------------------------------------------------------

ocr_status_t sensitivity_compare(const SensResult *r, const char *weights, const char *dir, int64_t max_steps,
                                 FILE *progress, SensCompare *out) {
    memset(out, 0, sizeof *out);
    char wfile[4200];
    OCR_TRY(ckpt_weights_path(weights, wfile, sizeof wfile));
    static const char *const names[3] = {"fp32", "amp", "amp+proposal"};
    static const char *const dirs[3] = {"fp32", "amp", "amp_proposal"};
    ocr_status_t st = OCR_OK;
    // Nothing proposed: the third run would be the AMP run again.
    const int runs = r->proposal_cfg ? 3 : 2;
    for (int i = 0; i < runs && st == OCR_OK; i++) {
        const OcrConfig *base = i == 2 ? r->proposal_cfg : r->amp_cfg;
        OcrConfig *cfg = NULL;
        st = ocr_config_clone(&cfg, base);
        if (st != OCR_OK) break;
        char sd[4400], pm[4400];
        snprintf(sd, sizeof sd, "Global.save_model_dir=\"%s/compare/%s\"", dir, dirs[i]);
        cJSON *ws = cJSON_CreateString(wfile);
        char *wq = ws ? cJSON_PrintUnformatted(ws) : NULL;
        cJSON_Delete(ws);
        snprintf(pm, sizeof pm, "Global.pretrained_model=%s", wq ? wq : "null");
        free(wq);
        const char *ov[] = {i == 0 ? "Global.use_amp=false" : "Global.use_amp=true", sd, pm, "Global.checkpoints=null"};
        for (size_t k = 0; k < sizeof ov / sizeof ov[0] && st == OCR_OK; k++) st = ocr_config_apply_override(cfg, ov[k]);
        RunConfig rc;
        if (st == OCR_OK) st = run_config_read(&rc, cfg, RUN_NEED_TRAIN | RUN_NEED_EVAL);
        TrainResult res;
        memset(&res, 0, sizeof res);
        if (st == OCR_OK) {
            TrainOptions opt = {0};
            opt.label = names[i];
            opt.progress = progress;
            opt.max_iters = max_steps;
            opt.final_eval = 1;
            opt.save_checkpoints = 0;
            if (progress) {
                fprintf(progress, "== sensitivity --compare: run %d/%d: %s ==\n", i + 1, runs, names[i]);
                fflush(progress);
            }
            st = train_run(cfg, &rc, &opt, &res);
        }
        if (st == OCR_OK) {
            SensCompareRun *run = &out->runs[out->n_runs++];
            snprintf(run->name, sizeof run->name, "%s", names[i]);
            run->acc = res.outcome.has_final_eval ? res.outcome.acc : NAN;
            run->cer = res.outcome.has_final_eval ? res.outcome.cer : NAN;
            run->samples_per_s = res.throughput.samples_per_s;
            run->peak_bytes = res.memory.stats.peak_total;
            run->skipped_steps = res.amp.skipped_steps;
            run->final_loss = res.outcome.final_loss;
        }
        train_result_free(&res);
        ocr_config_free(cfg);
    }
    return st;
}

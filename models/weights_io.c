// The network's weights on disk (models/weights_io.h): saving parameters and BN statistics as
// safetensors, loading them back under the strict rule or the partial one of fine-tuning, and
// the report of what a load gave.
#include "models/weights_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"
#include "kernels/ops.h"
#include "models/model_internal.h"

// ---- saving --------------------------------------------------------------------------------------------

ocr_status_t ocr_model_save_weights(const OcrModel *m, const char *path) {
    return ocr_model_save_weights_from(m, path, NULL);
}

// Host copies of the tables of m and its companions (stats after params per network), and how
// many tensors they hold.
static ocr_status_t save_tables(const OcrModel *m, OcrParamTable *host, int *ntab) {
    const OcrModel *nets[5] = {m};
    int nn = 1;
    for (int i = 0; i < m->n_weights_companions; i++) nets[nn++] = m->weights_companions[i];
    *ntab = 0;
    for (int k = 0; k < nn; k++) {
        ocr_status_t st = ocr_params_host_copy(&nets[k]->params, &host[*ntab]);
        if (st == OCR_OK) (*ntab)++, st = ocr_params_host_copy(&nets[k]->stats, &host[*ntab]);
        if (st == OCR_OK) (*ntab)++;
        if (st != OCR_OK) {
            for (int j = 0; j < *ntab; j++) ocr_params_host_release(&host[j]);
            *ntab = 0;
            return st;
        }
    }
    return OCR_OK;
}

ocr_status_t ocr_model_save_weights_from(const OcrModel *m, const char *path, const OcrTensor *const *masters) {
    OcrParamTable host[10];
    int ntab;
    OCR_TRY(save_tables(m, host, &ntab));
    int n = 0;
    for (int t = 0; t < ntab; t++) n += host[t].count;
    OcrNamedTensor *ts = calloc((size_t)(n ? n : 1), sizeof *ts);
    void **mhost = calloc((size_t)(m->params.count ? m->params.count : 1), sizeof *mhost);
    char (*names)[160] = m->n_weights_companions || m->weights_prefix[0] ? calloc((size_t)(n ? n : 1), 160) : NULL;
    if (!ts || !mhost || ((m->n_weights_companions || m->weights_prefix[0]) && !names)) {
        free(ts);
        free(mhost);
        free(names);
        for (int t = 0; t < ntab; t++) ocr_params_host_release(&host[t]);
        return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    }
    ocr_status_t st = OCR_OK;
    int k = 0;
    for (int t = 0; t < ntab; t++) {
        const OcrModel *owner = t < 2 ? m : m->weights_companions[t / 2 - 1];
        for (int i = 0; i < host[t].count; i++, k++) {
            const OcrParamInfo *p = &host[t].items[i];
            ts[k].name = p->name;
            if (names) {
                snprintf(names[k], 160, "%s%s", owner->weights_prefix, p->name);
                ts[k].name = names[k];
            }
            ts[k].dtype = p->dtype;
            ts[k].ndim = p->ndim;
            memcpy(ts[k].shape, p->shape, sizeof ts[k].shape);
            ts[k].data = (const char *)host[t].data + p->offset;
            const OcrTensor *mw = t == 0 && masters ? masters[i] : NULL;
            if (!mw || !mw->data) continue;
            // The master is the weight; the working copy in the table is its rounding.
            if (mw->dtype != OCR_F32 || ocr_tensor_numel(mw) != p->numel) {
                st = ocr_set_error(OCR_ERR_INTERNAL, "save %s: the master of %s is not f32 of %lld elements", path,
                                   p->name, (long long)p->numel);
                break;
            }
            size_t nb = (size_t)p->numel * sizeof(float);
            mhost[i] = malloc(nb ? nb : 1);
            if (!mhost[i]) {
                st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
                break;
            }
            ocr_copy_bytes(ocr_cpu(), mhost[i], mw->device, mw->data, nb);
            ts[k].dtype = OCR_F32;
            ts[k].data = mhost[i];
        }
        if (st != OCR_OK) break;
    }
    char deploy[8];
    snprintf(deploy, sizeof deploy, "%d",
             m->arch.backbone == OCR_BACKBONE_LCNETV3   ? m->arch.lcnet.deploy
             : m->arch.backbone == OCR_BACKBONE_LCNETV4 ? m->arch.lcnet4.deploy
             : m->arch.backbone == OCR_BACKBONE_HGNETV2 ? m->arch.hgnet2.deploy
                                                        : 0);
    OcrMetadataEntry meta[4] = {{"format", "ocrtrain"},
                                {"algorithm", m->arch.algorithm},
                                {"backbone", backbone_name(m->arch.backbone)},
                                {"deploy", deploy}};
    if (st == OCR_OK) st = ocr_safetensors_write(path, ts, n, meta, 4);
    for (int i = 0; i < m->params.count; i++) free(mhost[i]);
    free(mhost);
    free(ts);
    free(names);
    for (int t = 0; t < ntab; t++) ocr_params_host_release(&host[t]);
    return st;
}

void ocr_model_set_weights_prefix(OcrModel *m, const char *prefix) {
    snprintf(m->weights_prefix, sizeof m->weights_prefix, "%s", prefix ? prefix : "");
}

const char *ocr_model_weights_prefix(const OcrModel *m) { return m->weights_prefix; }

void ocr_model_set_weights_companions(OcrModel *m, const OcrModel *const *others, int n) {
    OCR_ASSERT(n >= 0 && n <= 4, "at most 4 companion networks");
    for (int i = 0; i < n; i++) m->weights_companions[i] = others[i];
    m->n_weights_companions = n;
}

// ---- the load report ---------------------------------------------------------------------------------

void ocr_load_report_init(OcrLoadReport *r) { memset(r, 0, sizeof *r); }
void ocr_load_report_add_loaded(OcrLoadReport *r) { r->loaded++; }

void ocr_load_report_add_missing(OcrLoadReport *r, const char *name) {
    if (r->missing++ == 0) snprintf(r->first_missing, sizeof r->first_missing, "%s", name);
}

static void shape_str(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t u = 0;
    buf[0] = '\0';
    for (int d = 0; d < ndim && u < cap; d++)
        u += (size_t)snprintf(buf + u, cap - u, "%s%lld", d ? ", " : "", (long long)shape[d]);
}

void ocr_load_report_add_mismatched(OcrLoadReport *r, const char *name, int file_ndim, const int64_t *file_shape,
                                    int model_ndim, const int64_t *model_shape) {
    if (r->mismatched++ != 0) return;
    char a[64], b[64];
    shape_str(a, sizeof a, file_ndim, file_shape);
    shape_str(b, sizeof b, model_ndim, model_shape);
    snprintf(r->first_mismatched, sizeof r->first_mismatched, "%.72s: (%.40s) in the file, (%.40s) in the model", name, a,
             b);
}

void ocr_load_report_add_unexpected(OcrLoadReport *r, const char *name) {
    if (r->unexpected++ == 0) snprintf(r->first_unexpected, sizeof r->first_unexpected, "%s", name);
}

int ocr_load_report_complete(const OcrLoadReport *r) {
    return r->missing == 0 && r->mismatched == 0 && r->unexpected == 0;
}

const char *ocr_load_report_describe(const OcrLoadReport *r, char *buf, size_t cap) {
    size_t u = (size_t)snprintf(buf, cap, "%d tensors loaded", r->loaded);
    if (u < cap) {
        if (r->missing)
            u += (size_t)snprintf(buf + u, cap - u, ", %d of the model's missing from the file (first: %s)", r->missing,
                                  r->first_missing);
        else
            u += (size_t)snprintf(buf + u, cap - u, ", none missing");
    }
    if (u < cap && r->mismatched)
        u += (size_t)snprintf(buf + u, cap - u, ", %d with another shape or dtype (first: %s)", r->mismatched,
                              r->first_mismatched);
    if (u < cap) {
        if (r->unexpected)
            snprintf(buf + u, cap - u, ", %d in the file not part of the model (first: %s)", r->unexpected,
                     r->first_unexpected);
        else
            snprintf(buf + u, cap - u, ", none unexpected");
    }
    return buf;
}

// ---- loading -------------------------------------------------------------------------------------------

// Fills one host table from the file (the strict or the partial rule).
typedef ocr_status_t (*table_fill_fn)(OcrParamTable *t, const OcrSafetensors *st, void *ctx);

// Loads parameters and statistics into host copies of the tables, then onto the model's device:
// a failure leaves the model's buffers untouched.
static ocr_status_t load_via_host(OcrModel *m, const OcrSafetensors *st, table_fill_fn fill, void *ctx) {
    OcrParamTable hp = {0}, hs = {0};
    ocr_status_t s = ocr_params_host_copy(&m->params, &hp);
    if (s == OCR_OK) s = ocr_params_host_copy(&m->stats, &hs);
    if (s == OCR_OK) s = fill(&hp, st, ctx);
    if (s == OCR_OK) s = fill(&hs, st, ctx);
    if (s == OCR_OK) {
        ocr_params_upload(&m->params, hp.data);
        ocr_params_upload(&m->stats, hs.data);
        if (m->cast_cache) amp_cast_cache_invalidate(m->cast_cache);
    }
    free(hp.data);
    free(hs.data);
    return s;
}

// The name prefix of the load in progress (distillation: "Student."; "" for plain names).
static _Thread_local char load_prefix[32];

static const OcrNamedTensor *find_prefixed(const OcrSafetensors *st, const char *name) {
    if (!load_prefix[0]) return ocr_safetensors_find(st, name);
    char full[192];
    snprintf(full, sizeof full, "%s%s", load_prefix, name);
    return ocr_safetensors_find(st, full);
}

// Chooses load_prefix for a file (ocr_model_set_weights_prefix): the model's prefix when some
// tensor of the file has it; else "" when the file holds the model's first tensor by its plain
// name; else "Student." when it holds it there (a distillation checkpoint's student).
static void choose_load_prefix(const OcrModel *m, const OcrSafetensors *st) {
    load_prefix[0] = '\0';
    size_t n = strlen(m->weights_prefix);
    if (n) {
        for (int i = 0; i < ocr_safetensors_count(st); i++)
            if (strncmp(ocr_safetensors_at(st, i)->name, m->weights_prefix, n) == 0) {
                snprintf(load_prefix, sizeof load_prefix, "%s", m->weights_prefix);
                return;
            }
    }
    if (!m->params.count || ocr_safetensors_find(st, m->params.items[0].name)) return;
    char full[192];
    snprintf(full, sizeof full, "Student.%s", m->params.items[0].name);
    if (ocr_safetensors_find(st, full)) snprintf(load_prefix, sizeof load_prefix, "Student.");
}

// A file tensor's name in the model's terms: NULL for another network's (outside load_prefix).
static const char *unprefixed(const char *name) {
    size_t n = strlen(load_prefix);
    if (!n) return name;
    return strncmp(name, load_prefix, n) == 0 ? name + n : NULL;
}

// The partial rule (ctx: the OcrLoadReport): what matches loads, the rest is counted.
static ocr_status_t load_partial_table(OcrParamTable *t, const OcrSafetensors *st, void *ctx) {
    OcrLoadReport *r = ctx;
    for (int i = 0; i < t->count; i++) {
        const OcrParamInfo *p = &t->items[i];
        const OcrNamedTensor *nt = find_prefixed(st, p->name);
        if (!nt) {
            ocr_load_report_add_missing(r, p->name);
            continue;
        }
        int same = nt->ndim == p->ndim && ocr_dtype_is_float(nt->dtype);
        for (int d = 0; same && d < p->ndim; d++) same = nt->shape[d] == p->shape[d];
        if (!same) {
            ocr_load_report_add_mismatched(r, p->name, nt->ndim, nt->shape, p->ndim, p->shape);
            continue;
        }
        OcrTensor src = ocr_tensor_view((void *)nt->data, nt->dtype, ocr_cpu(), nt->ndim, nt->shape);
        OcrTensor dst = ocr_params_tensor(t, i);
        float *tmp = malloc((size_t)(p->numel ? p->numel : 1) * sizeof(float));
        if (!tmp) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
        ocr_tensor_to_f32(&src, tmp);
        ocr_tensor_from_f32(&dst, tmp);
        free(tmp);
        ocr_load_report_add_loaded(r);
    }
    return OCR_OK;
}

ocr_status_t ocr_model_load_partial(OcrModel *m, const char *path, OcrLoadReport *report) {
    ocr_load_report_init(report);
    OcrSafetensors *st;
    OCR_TRY(ocr_safetensors_open(&st, path));
    choose_load_prefix(m, st);
    for (int i = 0; i < ocr_safetensors_count(st); i++) {
        const char *name = unprefixed(ocr_safetensors_at(st, i)->name);
        if (name && ocr_params_find(&m->params, name) < 0 && ocr_params_find(&m->stats, name) < 0)
            ocr_load_report_add_unexpected(report, ocr_safetensors_at(st, i)->name);
    }
    ocr_status_t s = load_via_host(m, st, load_partial_table, report);
    ocr_safetensors_close(st);
    return s;
}

// The strict rule (ctx: the file's path for messages): every tensor present, same shape.
static ocr_status_t load_table(OcrParamTable *t, const OcrSafetensors *st, void *ctx) {
    const char *path = ctx;
    for (int i = 0; i < t->count; i++) {
        const OcrParamInfo *p = &t->items[i];
        const OcrNamedTensor *nt = find_prefixed(st, p->name);
        if (!nt)
            return ocr_set_error(OCR_ERR_FORMAT, "%s: no tensor %s%s (the model expects it; wrong architecture?)", path,
                                 load_prefix, p->name);
        int same = nt->ndim == p->ndim;
        for (int d = 0; same && d < p->ndim; d++) same = nt->shape[d] == p->shape[d];
        if (!same) {
            char a[96] = "", b[96] = "";
            size_t ua = 0, ub = 0;
            for (int d = 0; d < nt->ndim; d++) ua += (size_t)snprintf(a + ua, sizeof a - ua, "%s%lld", d ? ", " : "", (long long)nt->shape[d]);
            for (int d = 0; d < p->ndim; d++) ub += (size_t)snprintf(b + ub, sizeof b - ub, "%s%lld", d ? ", " : "", (long long)p->shape[d]);
            return ocr_set_error(OCR_ERR_FORMAT, "%s: %s has shape (%s), the model expects (%s)", path, p->name, a, b);
        }
        if (!ocr_dtype_is_float(nt->dtype))
            return ocr_set_error(OCR_ERR_FORMAT, "%s: %s is %s, not a float tensor", path, p->name,
                                 ocr_dtype_name(nt->dtype));
        OcrTensor src = ocr_tensor_view((void *)nt->data, nt->dtype, ocr_cpu(), nt->ndim, nt->shape);
        OcrTensor dst = ocr_params_tensor(t, i);
        float *tmp = malloc((size_t)p->numel * sizeof(float));
        if (!tmp) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
        ocr_tensor_to_f32(&src, tmp);
        ocr_tensor_from_f32(&dst, tmp);
        free(tmp);
    }
    return OCR_OK;
}

ocr_status_t ocr_model_load_weights(OcrModel *m, const char *path) {
    OcrSafetensors *st;
    OCR_TRY(ocr_safetensors_open(&st, path));
    choose_load_prefix(m, st);
    ocr_status_t s = OCR_OK;
    for (int i = 0; i < ocr_safetensors_count(st) && s == OCR_OK; i++) {
        const char *name = unprefixed(ocr_safetensors_at(st, i)->name);
        if (name && ocr_params_find(&m->params, name) < 0 && ocr_params_find(&m->stats, name) < 0)
            s = ocr_set_error(OCR_ERR_FORMAT, "%s: tensor %s is not part of this model (wrong architecture?)", path,
                              name);
    }
    if (s == OCR_OK) s = load_via_host(m, st, load_table, (void *)path);
    ocr_safetensors_close(st);
    return s;
}

// CTC-only weights and MultiHead models, and the reverse (models/weights_names.h): the choice of
// the mapping from the names on both sides, the names mapped one by one, and the loads under it.
#include "models/weights_names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "models/model_internal.h"

static int starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

// The CTC branch's two name pairs: MultiHead form, CTC-only form.
static const char *const MULTI_FORM[2] = {"head.ctc_encoder.", "head.ctc_head."};
static const char *const CTC_FORM[2] = {"neck.", "head."};

int ocr_weights_names_is_guidance(const char *name, const char **branch) {
    static const struct {
        const char *prefix, *branch;
    } G[] = {{"head.before_gtc.", "NRTR"}, {"head.gtc_head.", "NRTR"}, {"head.nrtr_head.", "NRTR"}, {"head.sar_head.", "SAR"}};
    for (size_t i = 0; i < sizeof G / sizeof G[0]; i++)
        if (starts(name, G[i].prefix)) {
            if (branch) *branch = G[i].branch;
            return 1;
        }
    return 0;
}

static int multi_name(const char *name) {
    return starts(name, MULTI_FORM[0]) || starts(name, MULTI_FORM[1]) || ocr_weights_names_is_guidance(name, NULL);
}

// A CTC-only head/neck name: neck.* or head.* that is not of the MultiHead form.
static int ctc_name(const char *name) { return !multi_name(name) && (starts(name, "neck.") || starts(name, "head.")); }

// 1: every head/neck name is of the CTC-only form (and there is one); 2: of the MultiHead form
// with its CTC head (head.ctc_head.*) present; 0: neither (no head, or both forms mixed).
static int form_of(const char *const *names, int n, const char *prefix) {
    size_t pl = strlen(prefix);
    int ctc = 0, multi = 0, ctc_head = 0;
    for (int i = 0; i < n; i++) {
        if (strncmp(names[i], prefix, pl) != 0) continue;
        const char *s = names[i] + pl;
        if (ctc_name(s)) ctc++;
        if (multi_name(s)) multi++;
        if (starts(s, MULTI_FORM[1])) ctc_head++;
    }
    if (ctc && !multi) return 1;
    if (multi && !ctc && ctc_head) return 2;
    return 0;
}

void ocr_weights_names_plan(OcrWeightsNames *nm, const char *const *file_names, int n_file,
                            const char *const *model_names, int n_model, const char *prefix) {
    memset(nm, 0, sizeof nm[0]);
    snprintf(nm->prefix, sizeof nm->prefix, "%s", prefix ? prefix : "");
    snprintf(nm->branch, sizeof nm->branch, "guidance");
    int file = form_of(file_names, n_file, nm->prefix), model = form_of(model_names, n_model, "");
    if (file == 1 && model == 2) nm->mode = OCR_NAMES_CTC_TO_MULTI;
    if (file == 2 && model == 1) nm->mode = OCR_NAMES_MULTI_TO_CTC;
    // The branch's name from whichever side has it.
    const char *const *side = nm->mode == OCR_NAMES_CTC_TO_MULTI ? model_names : file_names;
    int ns = nm->mode == OCR_NAMES_CTC_TO_MULTI ? n_model : n_file;
    size_t pl = nm->mode == OCR_NAMES_CTC_TO_MULTI ? 0 : strlen(nm->prefix);
    for (int i = 0; nm->mode != OCR_NAMES_SAME && i < ns; i++) {
        const char *b;
        if (strlen(side[i]) >= pl && ocr_weights_names_is_guidance(side[i] + pl, &b)) {
            snprintf(nm->branch, sizeof nm->branch, "%s", b);
            break;
        }
    }
}

// name with its first `from` prefix replaced by the matching `to` one into out (1), or copied (0).
static int swap_form(const char *name, const char *const *from, const char *const *to, const char *prefix, char *out,
                     size_t cap) {
    // The head's prefix last: "head.ctc_head." before "head.", never "head." for "head.ctc_encoder.".
    for (int k = 0; k < 2; k++)
        if (starts(name, from[k])) {
            snprintf(out, cap, "%s%s%s", prefix, to[k], name + strlen(from[k]));
            return 1;
        }
    snprintf(out, cap, "%s%s", prefix, name);
    return 0;
}

int ocr_weights_names_to_file(const OcrWeightsNames *nm, const char *model_name, char *out, size_t cap) {
    switch (nm->mode) {
    case OCR_NAMES_CTC_TO_MULTI:
        if (ocr_weights_names_is_guidance(model_name, NULL)) return 0;
        swap_form(model_name, MULTI_FORM, CTC_FORM, nm->prefix, out, cap);
        return 1;
    case OCR_NAMES_MULTI_TO_CTC:
        swap_form(model_name, CTC_FORM, MULTI_FORM, nm->prefix, out, cap);
        return 1;
    default:
        snprintf(out, cap, "%s%s", nm->prefix, model_name);
        return 1;
    }
}

int ocr_weights_names_to_model(const OcrWeightsNames *nm, const char *file_name, char *out, size_t cap) {
    size_t pl = strlen(nm->prefix);
    if (strncmp(file_name, nm->prefix, pl) != 0) return 0;
    const char *s = file_name + pl;
    switch (nm->mode) {
    case OCR_NAMES_CTC_TO_MULTI:
        swap_form(s, CTC_FORM, MULTI_FORM, "", out, cap);
        return 1;
    case OCR_NAMES_MULTI_TO_CTC:
        if (ocr_weights_names_is_guidance(s, NULL)) return 0;
        swap_form(s, MULTI_FORM, CTC_FORM, "", out, cap);
        return 1;
    default:
        snprintf(out, cap, "%s", s);
        return 1;
    }
}

const char *ocr_weights_names_describe(const OcrWeightsNames *nm, char *buf, size_t cap) {
    if (nm->mode == OCR_NAMES_CTC_TO_MULTI)
        snprintf(buf, cap,
                 "CTC-only weights into a MultiHead model: %d tensors of the CTC branch loaded under their MultiHead "
                 "names (neck.* as head.ctc_encoder.*, head.* as head.ctc_head.*); the %s guidance branch (%d tensors, "
                 "%lld values) is not in the file and keeps its initialisation (it is trained from scratch; inference "
                 "uses the CTC branch only)",
                 nm->renamed, nm->branch, nm->fresh, (long long)nm->fresh_values);
    else if (nm->mode == OCR_NAMES_MULTI_TO_CTC)
        snprintf(buf, cap,
                 "MultiHead weights into a CTC-only model: %d tensors of the CTC branch loaded under their CTC names "
                 "(head.ctc_encoder.* as neck.*, head.ctc_head.* as head.*); the file's %s guidance branch (%d tensors, "
                 "%lld values) has no place in this model and was dropped",
                 nm->renamed, nm->branch, nm->dropped, (long long)nm->dropped_values);
    else if (cap)
        buf[0] = '\0';
    return buf;
}

// ---- loads -----------------------------------------------------------------------------------------------

void ocr_weights_names_plan_file(OcrWeightsNames *nm, const OcrModel *m, const OcrSafetensors *st) {
    // The prefix, as weights_io.c chooses it.
    char prefix[32] = "";
    size_t n = strlen(m->weights_prefix);
    int nf = ocr_safetensors_count(st);
    for (int i = 0; n && i < nf && !prefix[0]; i++)
        if (strncmp(ocr_safetensors_at(st, i)->name, m->weights_prefix, n) == 0)
            snprintf(prefix, sizeof prefix, "%s", m->weights_prefix);
    if (!prefix[0] && m->params.count && !ocr_safetensors_find(st, m->params.items[0].name)) {
        char full[192];
        snprintf(full, sizeof full, "Student.%s", m->params.items[0].name);
        if (ocr_safetensors_find(st, full)) snprintf(prefix, sizeof prefix, "Student.");
    }
    const int nmod = m->params.count + m->stats.count;
    const char **fnames = malloc((size_t)(nf + 1) * sizeof *fnames);
    const char **mnames = malloc((size_t)(nmod + 1) * sizeof *mnames);
    if (!fnames || !mnames) {  // no room to look: plain names
        free(fnames);
        free(mnames);
        memset(nm, 0, sizeof nm[0]);
        snprintf(nm->prefix, sizeof nm->prefix, "%s", prefix);
        return;
    }
    for (int i = 0; i < nf; i++) fnames[i] = ocr_safetensors_at(st, i)->name;
    for (int i = 0; i < m->params.count; i++) mnames[i] = m->params.items[i].name;
    for (int i = 0; i < m->stats.count; i++) mnames[m->params.count + i] = m->stats.items[i].name;
    ocr_weights_names_plan(nm, fnames, nf, mnames, nmod, prefix);
    free(fnames);
    free(mnames);
}

static void dims(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t u = 0;
    buf[0] = '\0';
    for (int d = 0; d < ndim && u < cap; d++)
        u += (size_t)snprintf(buf + u, cap - u, "%s%lld", d ? ", " : "", (long long)shape[d]);
}

// One host table filled from the file under the mapping. strict_path: the strict rule (the first
// missing / mismatched tensor is an error naming strict_path), else the partial one into r.
static ocr_status_t fill_table(OcrParamTable *t, const OcrSafetensors *st, OcrWeightsNames *nm, OcrLoadReport *r,
                               const char *strict_path) {
    char fname[512];
    for (int i = 0; i < t->count; i++) {
        const OcrParamInfo *p = &t->items[i];
        if (!ocr_weights_names_to_file(nm, p->name, fname, sizeof fname)) {
            nm->fresh++;
            nm->fresh_values += p->numel;
            continue;
        }
        const OcrNamedTensor *nt = ocr_safetensors_find(st, fname);
        if (!nt) {
            if (strict_path)
                return ocr_set_error(OCR_ERR_FORMAT, "%s: no tensor %s (the model's %s; wrong architecture?)", strict_path,
                                     fname, p->name);
            ocr_load_report_add_missing(r, p->name);
            continue;
        }
        int same = nt->ndim == p->ndim && ocr_dtype_is_float(nt->dtype);
        for (int d = 0; same && d < p->ndim; d++) same = nt->shape[d] == p->shape[d];
        if (!same) {
            if (strict_path) {
                char a[96], b[96];
                dims(a, sizeof a, nt->ndim, nt->shape);
                dims(b, sizeof b, p->ndim, p->shape);
                if (!ocr_dtype_is_float(nt->dtype))
                    return ocr_set_error(OCR_ERR_FORMAT, "%s: %s is %s, not a float tensor", strict_path, fname,
                                         ocr_dtype_name(nt->dtype));
                return ocr_set_error(OCR_ERR_FORMAT, "%s: %s has shape (%s), the model's %s expects (%s)", strict_path,
                                     fname, a, p->name, b);
            }
            ocr_load_report_add_mismatched(r, p->name, nt->ndim, nt->shape, p->ndim, p->shape);
            continue;
        }
        OcrTensor src = ocr_tensor_view((void *)nt->data, nt->dtype, ocr_cpu(), nt->ndim, nt->shape);
        OcrTensor dst = ocr_params_tensor(t, i);
        float *tmp = malloc((size_t)(p->numel ? p->numel : 1) * sizeof *tmp);
        if (!tmp) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
        ocr_tensor_to_f32(&src, tmp);
        ocr_tensor_from_f32(&dst, tmp);
        free(tmp);
        if (strcmp(fname + strlen(nm->prefix), p->name) != 0) nm->renamed++;
        if (r) ocr_load_report_add_loaded(r);
    }
    return OCR_OK;
}

// The file's tensors: guidance ones without a place counted as dropped; the others that map to
// no model tensor are unexpected (an error naming the first under the strict rule).
static ocr_status_t file_side(const OcrModel *m, const OcrSafetensors *st, OcrWeightsNames *nm, OcrLoadReport *r,
                              const char *strict_path) {
    char ours[512];
    size_t pl = strlen(nm->prefix);
    for (int i = 0; i < ocr_safetensors_count(st); i++) {
        const OcrNamedTensor *nt = ocr_safetensors_at(st, i);
        if (strncmp(nt->name, nm->prefix, pl) != 0) continue;  // another network's (distillation)
        if (!ocr_weights_names_to_model(nm, nt->name, ours, sizeof ours)) {
            int64_t n = 1;
            for (int d = 0; d < nt->ndim; d++) n *= nt->shape[d];
            nm->dropped++;
            nm->dropped_values += n;
            continue;
        }
        if (ocr_params_find(&m->params, ours) >= 0 || ocr_params_find(&m->stats, ours) >= 0) continue;
        if (strict_path)
            return ocr_set_error(OCR_ERR_FORMAT, "%s: tensor %s is not part of this model (wrong architecture?)",
                                 strict_path, nt->name);
        ocr_load_report_add_unexpected(r, nt->name);
    }
    return OCR_OK;
}

static ocr_status_t load_mapped(OcrModel *m, const OcrSafetensors *st, OcrWeightsNames *nm, OcrLoadReport *r,
                                const char *strict_path) {
    nm->renamed = nm->fresh = nm->dropped = 0;
    nm->fresh_values = nm->dropped_values = 0;
    OcrParamTable hp = {0}, hs = {0};
    ocr_status_t s = file_side(m, st, nm, r, strict_path);
    if (s == OCR_OK) s = ocr_params_host_copy(&m->params, &hp);
    if (s == OCR_OK) s = ocr_params_host_copy(&m->stats, &hs);
    if (s == OCR_OK) s = fill_table(&hp, st, nm, r, strict_path);
    if (s == OCR_OK) s = fill_table(&hs, st, nm, r, strict_path);
    if (s == OCR_OK) {
        ocr_params_upload(&m->params, hp.data);
        ocr_params_upload(&m->stats, hs.data);
        if (m->cast_cache) amp_cast_cache_invalidate(m->cast_cache);
    }
    if (hp.data) ocr_params_host_release(&hp);
    if (hs.data) ocr_params_host_release(&hs);
    return s;
}

ocr_status_t ocr_weights_load_mapped(OcrModel *m, const OcrSafetensors *st, OcrWeightsNames *nm,
                                     OcrLoadReport *report) {
    ocr_load_report_init(report);
    return load_mapped(m, st, nm, report, NULL);
}

ocr_status_t ocr_model_load_weights_mapped(OcrModel *m, const char *path, OcrWeightsNames *out) {
    OcrWeightsNames local;
    OcrWeightsNames *nm = out ? out : &local;
    memset(nm, 0, sizeof nm[0]);
    OcrSafetensors *st;
    OCR_TRY(ocr_safetensors_open(&st, path));
    ocr_weights_names_plan_file(nm, m, st);
    ocr_status_t s;
    if (nm->mode == OCR_NAMES_SAME) {
        ocr_safetensors_close(st);
        return ocr_model_load_weights(m, path);
    }
    s = load_mapped(m, st, nm, NULL, path);
    ocr_safetensors_close(st);
    if (s == OCR_OK) {
        char d[1024];
        ocr_log(OCR_LOG_INFO, "%s: %s", path, ocr_weights_names_describe(nm, d, sizeof d));
    }
    return s;
}

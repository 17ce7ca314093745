#include "training/import.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "models/weights_names.h"

// OUT.safetensors → OUT.dict.txt (any other name gets .dict.txt appended).
static void dict_path_for(const char *out, char *buf, size_t n) {
    size_t len = strlen(out);
    const char *ext = ".safetensors";
    size_t el = strlen(ext);
    if (len > el && strcmp(out + len - el, ext) == 0)
        snprintf(buf, n, "%.*s.dict.txt", (int)(len - el), out);
    else
        snprintf(buf, n, "%s.dict.txt", out);
}

// The dictionary as one line per entry with a final newline (a CRLF file's line ends become LF).
static ocr_status_t write_dictionary(const char *path, const char *dictionary) {
    size_t len = strlen(dictionary), n = 0;
    char *text = malloc(len + 2);
    if (!text) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    for (size_t i = 0; i < len; i++)
        if (!(dictionary[i] == '\r' && dictionary[i + 1] == '\n')) text[n++] = dictionary[i];
    if (n && text[n - 1] != '\n') text[n++] = '\n';
    ocr_status_t st = ocr_write_file_atomic(path, text, n);
    free(text);
    return st;
}

ocr_status_t import_onnx(ImportOnnx *r, const char *in, const char *out, const char *dict_out, const char *dict_in) {
    memset(r, 0, sizeof *r);
    if (dict_in) {
        size_t size;
        OCR_TRY(ocr_read_file(dict_in, &r->dict_text, &size));
        if (strlen(r->dict_text) != size)
            return ocr_set_error(OCR_ERR_FORMAT, "%s: a NUL byte at offset %zu: not a dictionary (UTF-8 text, one entry a line)",
                                 dict_in, strlen(r->dict_text));
    }
    OCR_TRY(ocr_onnx_load(&r->onnx, in));
    OcrModel *m;
    OCR_TRY(ocr_import_onnx_dict(&m, r->onnx, in, r->dict_text, &r->info));
    r->m = m;
    const OcrArch *a = ocr_model_arch(m);
    r->have_dict = r->info.dictionary && r->info.dictionary_lines > 0;
    if (r->have_dict) {
        if (dict_out)
            snprintf(r->dict_path, sizeof r->dict_path, "%s", dict_out);
        else
            dict_path_for(out, r->dict_path, sizeof r->dict_path);
        r->dict_fits = r->info.dictionary_lines + 1 == a->num_classes || r->info.dictionary_lines + 2 == a->num_classes;
    }
    if (dict_in && !r->dict_fits) {
        // The user's dictionary must fit the head; nothing is written (the CLI says so when r->m is NULL).
        ocr_status_t st = ocr_set_error(OCR_ERR_FORMAT,
                                        "%s has %d lines, the head of %s has %d classes (blank + lines [+ space] would be "
                                        "%d or %d)",
                                        dict_in, r->info.dictionary_lines, in, a->num_classes, r->info.dictionary_lines + 1,
                                        r->info.dictionary_lines + 2);
        ocr_model_free(r->m);
        r->m = NULL;
        return st;
    }
    OCR_TRY(ocr_model_save_weights(m, out));
    if (r->have_dict) OCR_TRY(write_dictionary(r->dict_path, r->info.dictionary));
    return OCR_OK;
}

void import_onnx_free(ImportOnnx *r) {
    ocr_model_free(r->m);
    free(r->dict_text);
    if (r->onnx) ocr_onnx_free(r->onnx);
    memset(r, 0, sizeof *r);
}

ocr_status_t import_pdparams(ImportPdparams *r, const char *in, const char *out) {
    memset(r, 0, sizeof *r);
    size_t n = strlen(in);
    if (n >= 9 && strcmp(in + n - 9, ".pdparams") == 0)
        snprintf(r->path, sizeof r->path, "%s", in);
    else
        snprintf(r->path, sizeof r->path, "%s.pdparams", in);
    OCR_TRY(ocr_pdparams_load(&r->p, r->path));
    // A PaddleOCR distillation checkpoint: its student (the Student. tensors, prefix stripped).
    ocr_pdparams_select_prefix(r->p, "Student.");
    OCR_TRY(ocr_pdparams_arch(r->p, &r->arch, r->desc, sizeof r->desc));
    r->arch_ok = 1;
    OCR_TRY(ocr_model_create(&r->m, &r->arch));
    OCR_TRY(ocr_pdparams_load_into(r->m, r->p, &r->rep));
    r->rep_ok = 1;
    if (r->rep.missing)
        return ocr_set_error(OCR_ERR_FORMAT, "%s: %d of the network's tensors are not in the file (first: %s)%s",
                             r->path, r->rep.missing, r->rep.first_missing,
                             r->rep.shape_mismatch ? "; some have another shape, listed below" : "");
    return ocr_model_save_weights(r->m, out);
}

ocr_status_t import_pdparams_config(ImportPdparams *r, const char *in, const OcrConfig *cfg, const char *cfg_name,
                                    const char *out) {
    memset(r, 0, sizeof *r);
    size_t n = strlen(in);
    if (n >= 9 && strcmp(in + n - 9, ".pdparams") == 0)
        snprintf(r->path, sizeof r->path, "%s", in);
    else
        snprintf(r->path, sizeof r->path, "%s.pdparams", in);
    OCR_TRY(ocr_pdparams_load(&r->p, r->path));
    ocr_pdparams_select_prefix(r->p, "Student.");
    OCR_TRY(ocr_arch_from_config(&r->arch, cfg));
    OCR_TRY(ocr_model_create(&r->m, &r->arch));
    r->arch_ok = 1;
    snprintf(r->desc, sizeof r->desc, "the network of %s (%s%s)", cfg_name, r->arch.algorithm,
             r->arch.multihead.kind != OCR_GUIDE_NONE ? ", MultiHead with its guidance branch" : "");
    // A CTC-only checkpoint with a MultiHead config (models/weights_names.h): said as such.
    OcrWeightsNames nm;
    const OcrParamTable *tp = ocr_model_params(r->m);
    const char **fn = malloc((size_t)(r->p->count + 1) * sizeof *fn), **mn = malloc((size_t)(tp->count + 1) * sizeof *mn);
    if (!fn || !mn) {
        free(fn);
        free(mn);
        return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    }
    for (int i = 0; i < r->p->count; i++) fn[i] = r->p->tensors[i].name;
    for (int i = 0; i < tp->count; i++) mn[i] = tp->items[i].name;
    ocr_weights_names_plan(&nm, fn, r->p->count, mn, tp->count, "");
    free(fn);
    free(mn);
    if (nm.mode == OCR_NAMES_CTC_TO_MULTI)
        return ocr_set_error(OCR_ERR_FORMAT, "%s holds a CTC-only network (neck.*, head.*) and %s is MultiHead: its %s "
                             "branch (head.gtc_head.*, ...) is not in the file. Import it with a CTC-only config "
                             "(rec_ppocrv6_tiny_ctc.json, ...), or load it with Global.pretrained_model into this config "
                             "(the %s branch then starts from its initialisation)",
                             r->path, cfg_name, nm.branch, nm.branch);
    OCR_TRY(ocr_pdparams_load_into(r->m, r->p, &r->rep));
    r->rep_ok = 1;
    if (r->rep.missing)
        return ocr_set_error(OCR_ERR_FORMAT, "%s: %d of the network's tensors (%s) are not in the file (first: %s)%s",
                             r->path, r->rep.missing, cfg_name, r->rep.first_missing,
                             r->rep.shape_mismatch ? "; some have another shape, listed below" : "");
    if (r->rep.unexpected)
        return ocr_set_error(OCR_ERR_FORMAT, "%s: %d tensors are not part of the network of %s (first: %s): not the "
                             "checkpoint of this config", r->path, r->rep.unexpected, cfg_name, r->rep.first_unexpected);
    OCR_TRY(ocr_model_save_weights(r->m, out));
    if (r->arch.dict_path[0]) {
        size_t size;
        char *text = NULL;
        dict_path_for(out, r->dict_path, sizeof r->dict_path);
        ocr_status_t st = ocr_read_file(r->arch.dict_path, &text, &size);
        if (st == OCR_OK) st = write_dictionary(r->dict_path, text);
        free(text);
        if (st != OCR_OK) r->dict_path[0] = '\0';
        return st;
    }
    return OCR_OK;
}

void import_pdparams_free(ImportPdparams *r) {
    ocr_pdparams_report_free(&r->rep);
    ocr_model_free(r->m);
    if (r->p) ocr_pdparams_free(r->p);
    memset(r, 0, sizeof *r);
}

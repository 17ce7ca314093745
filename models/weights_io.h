// A network's weights on disk: its parameters and BN statistics saved by name as safetensors (f32
// in our layouts, or the AMP masters), loaded back under the strict rule (the same network) or the
// partial one of fine-tuning (Global.pretrained_model), and the report of what a load gave. The
// network itself is models/model.h.
#ifndef OCR_MODELS_WEIGHTS_IO_H
#define OCR_MODELS_WEIGHTS_IO_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/tensor.h"
#include "models/head_remap.h"
#include "models/model.h"

// What a weights file gave a model (PaddleOCR's load_pretrained_params semantics: weights only):
// tensors loaded, model tensors missing from the file or present with another shape or dtype
// (both keep their initial values), and file tensors the model does not have. The first name of
// each kind is kept for messages. Every loader of weights into a model (safetensors, .pdparams)
// fills one, so callers apply one rule: Global.pretrained_strict.
#define OCR_LOAD_NAME_MAX 192
typedef struct {
    int loaded, missing, mismatched, unexpected;
    char first_missing[OCR_LOAD_NAME_MAX];
    char first_mismatched[OCR_LOAD_NAME_MAX];  // "name: (file shape) in the file, (model shape) in the model"
    char first_unexpected[OCR_LOAD_NAME_MAX];
    // Fine-tuning with another dictionary (training/checkpoint.c): the head's per-class tensors
    // rebuilt by character count as loaded, not as of another shape; dict.applied says so.
    OcrHeadRemapReport dict;
} OcrLoadReport;

void ocr_load_report_init(OcrLoadReport *r);
void ocr_load_report_add_loaded(OcrLoadReport *r);
void ocr_load_report_add_missing(OcrLoadReport *r, const char *name);
void ocr_load_report_add_mismatched(OcrLoadReport *r, const char *name, int file_ndim, const int64_t *file_shape,
                                    int model_ndim, const int64_t *model_shape);
void ocr_load_report_add_unexpected(OcrLoadReport *r, const char *name);
// Every model tensor loaded and nothing left over.
int ocr_load_report_complete(const OcrLoadReport *r);
// "178 loaded, 706 missing (first: backbone.conv1.conv.weight), 0 with another shape, 120 not
// in the model (first: ...)" into buf; returns buf.
const char *ocr_load_report_describe(const OcrLoadReport *r, char *buf, size_t cap);

// Loads every tensor of a safetensors file whose name and shape match a model tensor (converted
// to the table's dtype) and fills *report; the rest keep their current values. Never fails on
// coverage (the caller decides with the report); OCR_ERR_FORMAT only for an unreadable file.
ocr_status_t ocr_model_load_partial(OcrModel *m, const char *path, OcrLoadReport *report);

// Weights: parameters and BN statistics by name (f32 in our layouts), atomic write.
ocr_status_t ocr_model_save_weights(const OcrModel *m, const char *path);
// The same with parameter i written from masters[i] (f32, the parameter's shape, any device)
// when masters and masters[i] are not NULL: AMP O2 saves its f32 master weights, of which the
// low-precision working parameters are a rounding.
ocr_status_t ocr_model_save_weights_from(const OcrModel *m, const char *path, const OcrTensor *const *masters);
// Every tensor of the model must be present with its shape; extra tensors are an error too.
ocr_status_t ocr_model_load_weights(OcrModel *m, const char *path);

// Distillation (PaddleOCR's DistillationModel checkpoints name every tensor "<network>.<name>",
// e.g. Student.backbone.conv1._conv.weight). With a prefix set, saves write this network's
// tensors as prefix + name and then each companion's under its own prefix; loads read prefix +
// name and ignore the file's tensors outside the prefix (the other networks'). A file without any
// tensor under the prefix is read by plain names. Without a prefix set, a file that lacks the
// model's names but holds them under "Student." is read from there (a distillation checkpoint's
// student). prefix: "" or NULL clears it; at most 31 characters, ending with '.'.
void ocr_model_set_weights_prefix(OcrModel *m, const char *prefix);
const char *ocr_model_weights_prefix(const OcrModel *m);
// Networks saved beside m (at most 4; borrowed, each with its own prefix set); n = 0 clears.
void ocr_model_set_weights_companions(OcrModel *m, const OcrModel *const *others, int n);

#endif

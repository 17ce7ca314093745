// Weights of a CTC recognizer and of its MultiHead training form, loaded into each other.
//
// PaddleOCR's PP-OCRv3..v6 training configs are MultiHead (a CTC branch beside an NRTR or SAR
// guidance branch used in training only); an ONNX export, and so `ocrtrain import --onnx`, holds
// the CTC branch alone. The CTC branch's tensors carry the MultiHead names head.ctc_encoder.X and
// head.ctc_head.X in the MultiHead form and neck.X and head.X in the CTC-only form (the rule
// models/pdparams.h applies to a MultiHead .pdparams). A load maps the names when, and only when,
// the file's names are all of one form and the model is of the other:
//   CTC-only file → MultiHead model: the CTC branch loads under its MultiHead names; the guidance
//     branch (head.before_gtc.*, head.gtc_head.*, head.sar_head.*, head.nrtr_head.*) is not in
//     the file and keeps its initialisation (counted as `fresh`, not as missing);
//   MultiHead file → CTC-only model: the CTC branch loads under the CTC names; the file's
//     guidance tensors have no place in the model and are dropped (counted, not unexpected).
// Anything else (same forms, a file mixing both forms, a file with no head) loads by plain names.
// Either way every tensor of the CTC branch must be found with its shape, as in a plain load.
#ifndef OCR_MODELS_WEIGHTS_NAMES_H
#define OCR_MODELS_WEIGHTS_NAMES_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/safetensors.h"
#include "models/model.h"
#include "models/weights_io.h"

typedef enum {
    OCR_NAMES_SAME = 0,           // names as they are
    OCR_NAMES_CTC_TO_MULTI = 1,   // a CTC-only file into a MultiHead model
    OCR_NAMES_MULTI_TO_CTC = 2,   // a MultiHead file into a CTC-only model
} ocr_names_mode_t;

// The mapping chosen for one file and one model, and what it did (filled by the loads).
typedef struct {
    ocr_names_mode_t mode;
    char prefix[32];         // the file's name prefix of the network ("" or a distillation's "Student.")
    char branch[16];         // the guidance branch involved: "NRTR", "SAR" or "guidance"
    int renamed;             // tensors loaded under a mapped name
    int fresh;               // model tensors of the guidance branch not in the file (keep their init)
    int64_t fresh_values;
    int dropped;             // file tensors of the guidance branch the model has no place for
    int64_t dropped_values;
} OcrWeightsNames;

// 1 for a name of a MultiHead guidance branch (head.before_gtc., head.gtc_head., head.sar_head.,
// head.nrtr_head.); *branch (may be NULL) receives "NRTR", "SAR" or "guidance".
int ocr_weights_names_is_guidance(const char *name, const char **branch);

// Chooses the mapping from the file's tensor names and the model's parameter names (the model is
// MultiHead when it has a head.ctc_head.* tensor). `prefix`: the prefix the file's names of this
// network carry ("" or NULL for plain names); names outside it are not looked at.
void ocr_weights_names_plan(OcrWeightsNames *nm, const char *const *file_names, int n_file,
                            const char *const *model_names, int n_model, const char *prefix);

// The file's name (prefix included) for model tensor `model_name` into out; 0 when the file
// cannot hold it under the mapping (a guidance tensor of a MultiHead model, CTC → MultiHead).
int ocr_weights_names_to_file(const OcrWeightsNames *nm, const char *model_name, char *out, size_t cap);
// The model's name for file tensor `file_name` (prefix included) into out; 0 when the model has
// no place for it under the mapping (a guidance tensor, MultiHead → CTC; a name outside the prefix).
int ocr_weights_names_to_model(const OcrWeightsNames *nm, const char *file_name, char *out, size_t cap);

// One line for logs and reports: "CTC-only weights into a MultiHead model: 16 tensors loaded under
// their MultiHead names; the NRTR guidance branch (85 tensors, 2,345,678 values) is not in the
// file and keeps its initialisation (it trains from scratch; inference uses the CTC branch only)".
// "" for OCR_NAMES_SAME.
const char *ocr_weights_names_describe(const OcrWeightsNames *nm, char *buf, size_t cap);

// ---- loads -----------------------------------------------------------------------------------------

// The mapping for model m and an open safetensors file (the prefix chosen as weights_io.c does:
// the model's weights prefix when the file has it, else "Student." when the file holds the model's
// first tensor only there, else plain names).
void ocr_weights_names_plan_file(OcrWeightsNames *nm, const OcrModel *m, const OcrSafetensors *st);

// The partial load of fine-tuning (ocr_model_load_partial's rule) under nm's mapping: every model
// tensor the mapping puts in the file loads when its shape matches, else counts missing or with
// another shape (both shapes named); guidance tensors outside the file count in nm->fresh, the
// file's guidance tensors with no place in nm->dropped; nothing of either counts against
// ocr_load_report_complete. A failure leaves the model untouched.
ocr_status_t ocr_weights_load_mapped(OcrModel *m, const OcrSafetensors *st, OcrWeightsNames *nm,
                                     OcrLoadReport *report);

// ocr_model_load_weights (every tensor present with its shape, nothing left over) for inference
// and evaluation, with the mapping: CTC-only weights evaluate under a MultiHead config (the
// guidance branch, used in training only, keeps its initialisation) and MultiHead weights under a
// CTC config. The refusal names the file, the tensor (in the file's terms) and both shapes. *nm
// (may be NULL) receives what was mapped; a mapped load is logged at info level.
ocr_status_t ocr_model_load_weights_mapped(OcrModel *m, const char *path, OcrWeightsNames *nm);

#endif

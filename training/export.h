// `ocrtrain export`: the pieces that are not a plain call into models/: a PaddleOCR checkpoint
// as a model without a config, the dictionary text for the ONNX metadata, and the probe (ocrtrain's
// own forward pass on one preprocessed line, what the exported files must reproduce:
// tools/check_export.py compares them).
#ifndef OCR_TRAINING_EXPORT_H
#define OCR_TRAINING_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/error.h"
#include "models/model.h"
#include "models/pdparams_write.h"

// A PaddleOCR .pdparams checkpoint as a model: the architecture read off its tensors (input
// height 48, as `ocrtrain import --pdparams`), every tensor loaded; desc says what it recognised.
// A network tensor missing from the file is OCR_ERR_FORMAT.
ocr_status_t export_model_from_pdparams(OcrModel **out, const char *path, char *desc, size_t desc_size);

// The dictionary file's text without trailing newlines, as PaddleOCR's export keeps the lines (no
// trailing empty line). path NULL: *text NULL.
ocr_status_t export_read_dictionary(const char *path, char **text);

typedef struct {
    int64_t height, width;         // the input (1, 3, H, W)
    int64_t steps, classes;        // the probabilities (1, T, classes)
} ExportProbe;

// Runs the model (float32, eval mode) on `in`, a float32 NCHW (1, 3, H, W) array as PaddleOCR's
// predictor feeds it (H the model's), and writes the probabilities (1, T, classes) float32 to
// `out`, and the CTC head's logits before the softmax to `logits` when not NULL.
ocr_status_t export_probe(OcrModel *m, const char *in, const char *out, const char *logits, ExportProbe *info);

// A distillation config's every network (Architecture.Models, in its order) into one PaddleOCR
// DistillationModel .pdparams ("Teacher.backbone...", "Student.head..."): the trained network is
// `trained` (its weights loaded already), each other one is built from its Architecture and read
// from `weights` (a checkpoint directory or its model.safetensors) under its own name, as
// ocrtrain's distillation checkpoints hold it. *nnets = the networks written. A config that is
// not a distillation one is OCR_ERR_CONFIG; a network the file lacks is OCR_ERR_FORMAT naming it.
ocr_status_t export_distillation_pdparams(const OcrConfig *cfg, const OcrModel *trained, const char *weights,
                                          const char *path, OcrPdWriteInfo *info, int *nnets);

#endif

// ocrtrain networks → PaddleOCR `.pdparams` (what `paddle.save(model.state_dict())` writes, see
// shared/reference/paddleocr_formats.md §1): a pickle (protocol 4, no frames, no memo) of one
// dict {structured name → numpy float32 ndarray}, every array pickled as numpy's own reduce
// (numpy.core.multiarray._reconstruct(ndarray, (0,), b'b') + BUILD (1, shape, dtype('<f4'),
// False, raw bytes)), so `paddle.load`, `pickle.load` with numpy alone and our reader
// (models/pdparams.h) all read it.
//
// Names are the model's parameter-table names, which are PaddleOCR's structured names for the
// same network: `backbone.*`, `neck.encoder.*`, `head.fc.*`, or for a MultiHead model
// `head.ctc_encoder.encoder.*`, `head.ctc_head.*` and its guidance branch (`head.before_gtc.*`,
// `head.gtc_head.*`). BN running statistics are written as `_mean` / `_variance` after their
// layer's weight and bias, as Paddle orders a state dict (per layer, parameters then buffers,
// layers in registration order). Layouts become Paddle's: convolution weights (OC, C/groups,
// KH, KW), linear weights (in, out) unchanged. Low-precision parameters (AMP O2) are written
// as float32.
//
// A PPLCNetV3 in deploy (fused) form has no training-form names; it is written in the training
// form that reproduces it exactly: one k×k branch holding the fused kernel with a BN that passes
// it through (γ 1, β the fused bias, mean 0, variance 1 − ε), every other branch zero.
#ifndef OCR_MODELS_PDPARAMS_WRITE_H
#define OCR_MODELS_PDPARAMS_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "models/model.h"

typedef struct {
    int tensors;     // dict entries written
    int aliases;     // of them, second names of a tensor (SAR's LSTM {k}.cell.* keys, as Paddle writes them)
    int64_t values;  // float values
    int unfused;     // a deploy-form PPLCNetV3 was written in its training form
} OcrPdWriteInfo;

// The pickle into a malloc'd buffer (model on any device).
ocr_status_t ocr_pdparams_write_bytes(const OcrModel *m, uint8_t **data, size_t *size, OcrPdWriteInfo *info);
// The same into `path`, atomically (temporary file + rename).
ocr_status_t ocr_pdparams_write(const OcrModel *m, const char *path, OcrPdWriteInfo *info);

// PaddleOCR's DistillationModel state dict: every network's tensors under "<name>." in the given
// order (DistillationModel adds each of Architecture.Models as a sublayer of that name:
// "Teacher.backbone...", "Student.head..."), what a distillation config loads as
// Global.pretrained_model or Global.checkpoints. A NULL name writes the network's plain names.
typedef struct {
    const char *name;
    const OcrModel *m;
} OcrPdNamedModel;
ocr_status_t ocr_pdparams_write_named_bytes(const OcrPdNamedModel *nets, int n, uint8_t **data, size_t *size,
                                            OcrPdWriteInfo *info);
ocr_status_t ocr_pdparams_write_named(const OcrPdNamedModel *nets, int n, const char *path, OcrPdWriteInfo *info);

#endif

// The AMP engine's description (amp/managed.h) of a model's tables: its op table (names, types,
// compute dtypes, last outputs), its parameter table (named views, owning ops, roles) and its
// BN statistics. models/ knows the engine; the engine knows only this description.
#ifndef OCR_MODELS_AMP_VIEW_H
#define OCR_MODELS_AMP_VIEW_H

#include "amp/engine.h"
#include "amp/managed.h"
#include "models/params.h"
#include "models/svtr/nn.h"

// Describes the tables (stats may be NULL). They must outlive every engine attached with it.
void ocr_amp_managed(AmpManaged *m, OcrOpTable *ops, OcrParamTable *params, OcrParamTable *stats);

// amp_engine_attach with the description of these tables.
ocr_status_t ocr_amp_attach(AmpEngine *e, OcrOpTable *ops, OcrParamTable *params, OcrParamTable *stats);

// O2's relayout of a parameter table: entry i becomes dtypes[i] (values rounded to nearest
// from the current ones), offsets follow the table's rule (multiples of OCR_PARAM_ALIGN), the
// buffer is replaced on the table's device and the gradient buffer dropped.
ocr_status_t ocr_params_convert(OcrParamTable *t, const ocr_dtype_t *dtypes);

#endif

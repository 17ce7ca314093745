// PaddleOCR training checkpoints (`.pdparams`, paddle.save(model.state_dict())) into ocrtrain
// networks: PaddleOCR's structured names mapped to ours, the load into a model with a report of
// everything not loaded, and the network a checkpoint holds. Reading the file (the strict pickle
// reader, OcrPdparams) is core/pickle.h.
#ifndef OCR_MODELS_PDPARAMS_H
#define OCR_MODELS_PDPARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/pickle.h"

// ---- into ocrtrain networks ----------------------------------------------------------------------
// Names: our parameter tables use PaddleOCR's structured names, so a CTC model's keys map to
// themselves. A MultiHead checkpoint's CTC branch maps too (head.ctc_encoder.X → neck.X,
// head.ctc_head.X → head.X); its guidance branches (head.sar_head.*, head.gtc_head.*,
// head.before_gtc.*) load into a MultiHead model that has them (same names) and are counted as
// `guidance`, never loaded, by a CTC network. Paddle's LSTM keys appear twice (weight_ih_l{k} and
// {k}.cell.weight_ih): the second must equal the first (`aliases`). Layouts:
// Paddle's conv weights (OC, C/groups, KH, KW) are transposed to ours (OC, KH, KW, C/groups);
// linear weights are (in, out) on both sides; BN running statistics go to the statistics
// table.
#include "models/model.h"

typedef enum { OCR_PD_MAPPED = 0, OCR_PD_GUIDANCE = 1 } ocr_pd_map_t;
// Our name for a PaddleOCR structured name (written into `ours`).
ocr_pd_map_t ocr_pdparams_map_name(const char *paddle, char *ours, size_t size);

typedef struct {
    int loaded;          // tensors copied into the model
    int64_t values;
    int missing;         // model tensors the file did not provide (they keep their values)
    int unexpected;      // file tensors that map to no tensor of the model
    int shape_mismatch;  // file tensors whose shape differs from the model's (not loaded; counted in missing too)
    int guidance;        // MultiHead guidance-branch tensors the model does not have (a CTC model)
    int aliases;         // second names of one tensor (SAR's LSTM {k}.cell.* keys), equal to the first
    int other;           // non-float-array entries (StructuredToParameterName@@, ...)
    char first_missing[256], first_unexpected[256];
    // Every file entry not loaded, "name: why", in file order; every model tensor not filled.
    char **not_loaded;
    int n_not_loaded;
    char **missing_names;
    int n_missing_names;
} OcrPdLoadReport;

// Loads every tensor of `p` whose mapped name and shape match into `m` (on any device) and
// reports everything else. Never fails on a partial match (the caller decides whether a
// partial load is an error); fails only on allocation or device errors.
ocr_status_t ocr_pdparams_load_into(OcrModel *m, const OcrPdparams *p, OcrPdLoadReport *rep);
// The same from a file: `path` may be the .pdparams file or PaddleOCR's prefix
// ("output/rec/best_accuracy" → best_accuracy.pdparams), as Global.pretrained_model takes it.
ocr_status_t ocr_pdparams_load_model(OcrModel *m, const char *path, OcrPdLoadReport *rep);
// Distillation checkpoints (PaddleOCR's DistillationModel: "Student.backbone...", "Teacher....")
// hold several networks: keeps the tensors named prefix + X as X and drops the others. Returns
// how many were kept; 0 (p unchanged) when no tensor has the prefix. ocr_pdparams_load_model
// selects the model's weights prefix (ocr_model_set_weights_prefix), else "Student.".
int ocr_pdparams_select_prefix(OcrPdparams *p, const char *prefix);
void ocr_pdparams_report_free(OcrPdLoadReport *rep);

// The network a checkpoint holds, from its tensor names and shapes: PP-OCRv3 (MobileNetV1Enhance;
// scale from the channels, last stride (1,2) and 2x2 average pool as PP-OCRv3's config, which
// the weights cannot show), PP-OCRv4 (PPLCNetV3 training or deploy form; scale and conv_kxk_num
// from the weights), the SVTR neck (dims, hidden, kernel, depth, MLP ratio from the weights;
// 8 heads as PaddleOCR's EncoderWithSVTR) or Im2Seq, and the CTC head's classes. `desc`
// receives a one-line description. A checkpoint of another network is OCR_ERR_FORMAT naming
// the tensor that does not fit.
ocr_status_t ocr_pdparams_arch(const OcrPdparams *p, OcrArch *arch, char *desc, size_t size);

#endif

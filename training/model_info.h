// `ocrtrain info`: a config's network as the trainer would build it, with each op's compute
// dtype under the config's AMP policy (resolved as amp_engine_attach resolves it: each op's
// input is the op before it) and the plan of one sample at the config's input size (output
// shapes, parameters, FLOPs).
#ifndef OCR_TRAINING_MODEL_INFO_H
#define OCR_TRAINING_MODEL_INFO_H

#include "amp/engine.h"
#include "amp/policy.h"
#include "core/config.h"
#include "core/error.h"
#include "models/model.h"

typedef struct {
    int valid;            // `train` would accept the config (its data not looked for)
    char refusal[1024];   // why not, when !valid
    OcrArch arch;
    AmpConfig amp;
    int amp_ok;
    OcrModel *m;          // ocr_model_ops(m) carries each op's compute_dtype
    amp_reason_t *reasons;  // per op: why it got its dtype
    OcrMemPlan plan;      // batch 1 at arch.img_h × arch.img_w, inference
} ModelInfo;

// Validates the whole config as `train` does (run_config_read: a refusal is kept in refusal, not
// an error; the config then lists its accepted keys with no effect, ocr_config_ignored), then
// builds the network, resolves its dtypes and plans it. A Global.amp_fp32_layers pattern that
// matches no layer is OCR_ERR_CONFIG. Free mi with model_info_free, also after an error.
ocr_status_t model_info_build(ModelInfo *mi, OcrConfig *cfg);
void model_info_free(ModelInfo *mi);

#endif

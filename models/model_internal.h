// Private to models/model.c (the network) and models/weights_io.c (its weights on disk): the
// network's state, which the weights code reads and writes table by table.
#ifndef OCR_MODELS_MODEL_INTERNAL_H
#define OCR_MODELS_MODEL_INTERNAL_H

#include "models/model.h"

struct OcrModel {
    OcrArch arch;
    OcrParamTable params, stats;
    OcrOpTable ops;
    Mv1e mv1e;
    Lcnet lcnet;
    Lcnet4 lcnet4;
    Hgnet2 hgnet2;
    LightSvtr light;
    CtcGuide ctc_guide;
    SvtrNet svtr;
    SvtrNeck neck;
    CtcHead head;
    GuideHead guide;  // MultiHead's guidance branch (arch.multihead.kind != NONE)
    int guide_off;    // calibration passes skip it (no labels, no backward)
    float *guide_ratios;  // ocr_model_set_guide_batch: the SAR valid ratios it passes on (host)
    int guide_ratios_cap;
    OcrArena arena;
    OcrCtx ctx;
    OcrTensor seq;  // the head's input view (B, T, C)
    OcrTensor xin;  // the network input of the pass; a uint8 batch's normalised copy lives in the arena
    OcrTensor *logits, *probs;
    OcrTensor dlogits;
    int dlogits_shared;  // ocr_model_share_dlogits: dlogits is the logits' own memory
    int want_dinput;
    int keep_all;  // inference passes keep every activation
    ocr_dtype_t input_dtype;  // of the float images ocr_model_plan assumes (matters for the input gradient)
    ocr_dtype_t plan_input;   // the input dtype of the current plan (OCR_U8: ocr_model_forward_u8)
    int plan_guide_steps;     // the NRTR decoder positions the current plan was made for
    AmpCastCache *cast_cache; // O1 (ocr_model_set_cast_cache), NULL otherwise
    OcrTensor dinput;
    int dinput_valid;
    int pass_valid, pass_training;
    int profile;
    ocr_grad_ready_fn grad_ready_fn;  // ocr_model_set_grad_ready_hook (NULL: none)
    void *grad_ready_user;
    const OcrBnSync *bn_sync;         // ocr_model_set_bn_sync (NULL: per-rank BN statistics)
    OcrMemPlan plan;
    int plan_valid;
    uint64_t step;
    // Distillation (ocr_model_set_weights_prefix / _companions, models/weights_io.c): the name
    // prefix of this network's tensors in weights files ("Student."), and the frozen networks saved
    // beside it under their own prefixes.
    char weights_prefix[32];
    const OcrModel *weights_companions[4];
    int n_weights_companions;
    // Distillation on backbone features: the backbone's output of the last training pass and an
    // extra gradient for it (ocr_model_backbone_out / ocr_model_set_backbone_grad).
    OcrTensor backbone_out;
    const OcrTensor *backbone_extra_grad;
};

static inline const char *backbone_name(ocr_backbone_kind_t k) {
    return k == OCR_BACKBONE_MV1E      ? "MobileNetV1Enhance"
           : k == OCR_BACKBONE_LCNETV3 ? "PPLCNetV3"
           : k == OCR_BACKBONE_LCNETV4 ? "PPLCNetV4"
           : k == OCR_BACKBONE_HGNETV2 ? "PPHGNetV2_B4"
                                       : "SVTRNet";
}

#endif

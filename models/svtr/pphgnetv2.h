// PPHGNetV2_B4 with text_rec (the PP-OCRv5 server recognizer's backbone, PaddleOCR's
// ppocr/modeling/backbones/rec_pphgnetv2.py) with PaddleOCR's parameter names. Input NHWC images,
// output the pooled map (B, 1, T, 2048) that Im2Seq reads.
//
//   stem (StemBlock): stem1 3x3 s2 → [stem2a 2x2 → stem2b 2x2 (SAME: pad 0 before, 1 after)]
//                     ‖ max pool 2x2 s1 (SAME) → concat → stem3 3x3 (stride 1 for text_rec) → stem4 1x1
//   stages.i (HGV2_Stage): downsample (depthwise 3x3 ConvBN without activation, stride (2,1),
//                     (1,2), (2,1), (2,1)) → blocks.j (HGV2_Block): layers.0..5 (ConvBNAct 3x3, or
//                     LightConvBNAct: conv1 1x1 ConvBN + conv2 depthwise 5x5 ConvBNAct) each on the
//                     previous one's output, concat [x, layer outputs] → aggregation_squeeze_conv
//                     1x1 (→ out/2) → aggregation_excitation_conv 1x1 (→ out) (+ x after the first
//                     block of a stage)
//   pool:             training → adaptive average to (1, floor(W/2)) (PaddleOCR's [1, 40] at
//                     width 320); inference → AvgPool (3, 2) when the map is 3..5 rows high.
//
// ConvBNAct: conv without bias (weight lr_mult), BN with L2Decay(0) and lr_mult (lr_mult_list[0]
// for the stem, [i + 1] for stage i), ReLU when it has an activation; no LearnableAffineBlock
// (B4 is built with use_lab False).
//
// PaddleOCR's PPHGNetV2 also creates a classifier it never runs in the recognition form:
// last_conv (1x1, class_expand x 2048, no bias; absent with use_last_conv False) and fc (Linear
// (class_expand or 2048) x class_num, with bias). They are in its parameter list and in every
// .pdparams it saves, so the training form holds them too (never computed, gradient 0, no weight
// decay: Adam leaves them exactly as they are, as Paddle's optimizer skips a parameter without a
// gradient). The deploy form (Backbone.deploy true) is the network PaddleOCR's exported inference
// program keeps: the same layers without them (PPHGNetV2 has no rep layers to fuse).
#ifndef OCR_MODELS_SVTR_PPHGNETV2_H
#define OCR_MODELS_SVTR_PPHGNETV2_H

#include "models/svtr/blocks.h"
#include "models/svtr/lcnetv4.h"  // LPad

typedef struct {
    double lr_mult_list[5];  // stem, stage1..stage4
    int use_last_conv;       // PaddleOCR's default 1
    int class_expand;        // 2048
    int class_num;           // 1000
    int deploy;              // 1: without the unused classifier
} Hgnet2Spec;

// A channel concat of up to OCR_HGNET2_MAX_LAYERS + 1 inputs (the op "concat" of kernels/ops.h).
#define OCR_HGNET2_MAX_LAYERS 6
#define OCR_HGNET2_MAX_BLOCKS 3
typedef struct {
    int op, count;
    int64_t channels[OCR_HGNET2_MAX_LAYERS + 1];
    ocr_dtype_t dtypes[OCR_HGNET2_MAX_LAYERS + 1];
    OcrTensor y;
} LConcatN;

typedef struct {
    int light;
    ConvBN conv;         // ConvBNAct (light 0)
    ConvBN conv1, conv2; // LightConvBNAct (light 1)
} HgLayer;

typedef struct {
    int nlayers, identity;
    int dropped;  // the last training forward freed the maps its backward forms again (pphgnetv2.c)
    HgLayer layers[OCR_HGNET2_MAX_LAYERS];
    LConcatN cat;
    ConvBN squeeze, excitation;
    LAdd add;
} HgBlock;

typedef struct {
    ConvBN downsample;
    // Training: the downsample's depthwise conv output (its BN's input) was freed after the
    // forward and the conv runs again before the BN's backward (pphgnetv2.c).
    int downsample_recompute;
    HgBlock blocks[OCR_HGNET2_MAX_BLOCKS];
    int nblocks;
} HgStage;

typedef struct {
    Hgnet2Spec s;
    ConvBN stem[5];  // stem1, stem2a, stem2b, stem3, stem4
    LPad pad2a, pad2b, pad_pool;
    LPool stem_pool;
    LConcat stem_cat;
    HgStage stages[4];
    LPool pool;
    LConv last_conv;  // never run (see above); built when !deploy && use_last_conv
    LLinear fc;       // never run; built when !deploy
    int has_last_conv, has_fc;
    int out_channels;
} Hgnet2;

void hgnet2_build(OcrBuilder *b, Hgnet2 *m, const char *prefix, int in_channels, Hgnet2Spec s);
OcrTensor *hgnet2_forward(OcrCtx *c, Hgnet2 *m, const OcrTensor *x);
OcrTensor hgnet2_backward(OcrCtx *c, Hgnet2 *m, const OcrTensor *dy, int need_dx);

#endif

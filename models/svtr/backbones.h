// The three backbones: MobileNetV1Enhance (PP-OCRv3), PPLCNetV3 (PP-OCRv4, training or
// deploy form) and SVTRNet. Inputs are NHWC images (B, H, W, 3); outputs are NHWC maps
// (B, 1, T, C) that Im2Seq turns into (B, T, C) for free.
#ifndef OCR_MODELS_SVTR_BACKBONES_H
#define OCR_MODELS_SVTR_BACKBONES_H

#include "models/svtr/blocks.h"

// ---- MobileNetV1Enhance --------------------------------------------------------------------------
typedef struct {
    double scale;
    int last_conv_stride[2];
    int last_pool_avg;  // last_pool_type "avg" (else MaxPool 2x2)
    int last_pool_kernel[2];
} Mv1eSpec;
typedef struct {
    Mv1eSpec s;
    ConvBN conv1;
    DWSeparable blocks[13];
    int nblocks;
    LPool pool;
    int out_channels;
} Mv1e;
void mv1e_build(OcrBuilder *b, Mv1e *m, const char *prefix, int in_channels, Mv1eSpec s);
OcrTensor *mv1e_forward(OcrCtx *c, Mv1e *m, const OcrTensor *x);
OcrTensor mv1e_backward(OcrCtx *c, Mv1e *m, const OcrTensor *dy, int need_dx);

// ---- PPLCNetV3 ---------------------------------------------------------------------------------------
typedef struct {
    double scale;
    int conv_kxk_num;
    double lab_lr;
    double lr_mult_list[6];
    int deploy;
} LcnetSpec;
typedef struct {
    LcnetSpec s;
    ConvBN conv1;
    LCBlock blocks[14];
    int nblocks;
    int stage_end[5];  // block index ending blocks2..blocks6
    LPool pool;
    int out_channels;
} Lcnet;
int ocr_lcnet_make_divisible(double v);
void lcnet_build(OcrBuilder *b, Lcnet *m, const char *prefix, int in_channels, LcnetSpec s);
// Pool: training → adaptive average to (1, floor(W4/2)) (PaddleOCR's [1, 40] at W = 320);
// inference → AvgPool k(3,2) s(3,2) when the map is 3..5 rows high (the exported form; H = 48
// gives 3 rows), otherwise the same adaptive pool.
OcrTensor *lcnet_forward(OcrCtx *c, Lcnet *m, const OcrTensor *x);
OcrTensor lcnet_backward(OcrCtx *c, Lcnet *m, const OcrTensor *dy, int need_dx);

// ---- SVTRNet -------------------------------------------------------------------------------------------
#define OCR_SVTR_MAX_BLOCKS 64
typedef struct {
    int img_size[2];
    int embed_dim[3], depth[3], num_heads[3];
    int local[OCR_SVTR_MAX_BLOCKS];  // 1 = Local mixer, 0 = Global, per block
    int conv[OCR_SVTR_MAX_BLOCKS];   // 1 = Conv mixer (PaddleOCR's ConvMixer, local_mixer's kernel)
    int local_mixer[3][2];
    int patch_merging;  // 1 = "Conv" sub-sampling between stages, 0 = none
    double mlp_ratio, drop_rate, attn_drop_rate, drop_path_rate, last_drop;
    double epsilon;
    int out_channels, out_char_num;
    int last_stage;  // 0: the (B, H/16, W/4, C) map after the last block (no pool, conv, hardswish)
    int prenorm;     // PaddleOCR's prenorm: post-LN blocks and no final `norm` (0: pre-LN, `norm`)
} SvtrNetSpec;
typedef struct {
    SvtrNetSpec s;
    ConvBN pe[2];
    LPosAdd pos;
    LDrop pos_drop;
    SvtrBlock *blocks;
    int nblocks;
    LConv sub_conv[2];
    LLN sub_norm[2];
    LLN norm;  // absent with prenorm
    OcrTensor out_map;  // last_stage 0: the output map (a view of the last layer's output)
    LPool pool;
    LConv last_conv;
    LAct hswish;
    LDrop last_drop;
    int out_channels;
    int64_t grid_h[3], grid_w[3];  // token grid per stage (last forward)
} SvtrNet;
void svtrnet_build(OcrBuilder *b, SvtrNet *m, const char *prefix, int in_channels, SvtrNetSpec s);
void svtrnet_free(SvtrNet *m);
OcrTensor *svtrnet_forward(OcrCtx *c, SvtrNet *m, const OcrTensor *x);
OcrTensor svtrnet_backward(OcrCtx *c, SvtrNet *m, const OcrTensor *dy, int need_dx);

#endif

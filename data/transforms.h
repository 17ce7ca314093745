// Image transforms of the recognition pipeline, with PaddleOCR's semantics
// (ppocr/data/imaug/rec_img_aug.py, text_image_aug/, cv2):
//
//   DecodeImage → [RecConAug] → [RecAug] → CTCLabelEncode → RecResizeImg (or the
//   MultiScaleSampler's (H, W)) → uint8 NHWC batch (normalised on the device).
//
// Every random choice comes from an OcrRng (core/rng.h Philox) that the loader derives
// from (seed, epoch, sample slot), so a sample's pixels do not depend on threads or order.
// The draws follow PaddleOCR's order (one uniform per probability test, then the op's own
// draws); PaddleOCR's Python/NumPy generators are not reproduced, only the distributions.
//
// Pixel exactness, relative to OpenCV 4.x on x86 (checked against opencv-python 4.14 on
// random images with a one-off script; OpenCV is not a dependency):
// - Resize: cv2.resize INTER_LINEAR on 8-bit images: half-pixel centres, 11-bit fixed-point
//   weights (round to nearest even), horizontal taps clamped at the borders, vertical taps
//   clamped but their weights kept, the vertical pass as OpenCV's SIMD path computes it,
//   ((b0·(S0>>4))>>16 + (b1·(S1>>4))>>16 + 2)>>2; an exact 2× downscale as INTER_AREA
//   ((a+b+c+d+2)>>2); equal sizes copied. Identical to opencv-python 4.14 in all of 300
//   random resizes (1..400 px, 1 and 3 channels, 2× up and down included).
// - Gaussian blur: cv2.sepFilter2D with getGaussianKernel(5, 1, CV_32F) in float (row then
//   column pass, symmetric pairs summed first), rounded to nearest, BORDER_REFLECT_101.
//   Identical except one pixel in about one image in ten (a float rounding near .5).
// - HSV: OpenCV's 8-bit BGR→HSV (hsv_shift 12 tables), V scaled and truncated as NumPy's
//   uint8 assignment does, float HSV→BGR truncated as OpenCV's vectorised path does (its
//   scalar tail for the last pixels of a row rounds instead).
// - Jitter, crop, inversion: exact. Noise: N(0, √0.1)·0.5 then truncation to uint8 makes
//   each value p → p − 1 with probability 1/2 (never below 0); a noise magnitude ≥ 1
//   (probability 3·10⁻¹⁰ per value) is ignored.
// - WarpMLS (TIA): text_image_aug/warp_mls.py: similarity MLS in double precision at a
//   100-px grid (plus the last row/column), bilinear displacement inside a cell (with the
//   original's di/h fractions), clamping, then bilinear sampling at 1/256 px: with weights
//   wx, wy in [0, 256), t = (p00·(256−wx) + p01·wx) >> 1, b likewise below,
//   out = (t·(256−wy) + b·wy) >> 15 (the original samples in float64 and truncates its
//   float image, so values can differ by 1). The scalar, SSE2 and AVX2 paths compute
//   exactly this. Grid displacements are rounded to 1/65536 px so that a warp without
//   displacement is exactly the identity.
//
// Images are OcrImage (data/image.h): 8-bit, 1 or 3 channels, malloc'd pixels. Functions
// that change an image's size replace img->pixels (the old buffer is freed).
#ifndef OCR_DATA_TRANSFORMS_H
#define OCR_DATA_TRANSFORMS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/rng.h"
#include "data/image.h"

struct OcrConfig;

// ---- resize -------------------------------------------------------------------------

// cv2.resize(src, (dw, dh), INTER_LINEAR) for 8-bit images with c channels; rows are
// packed (stride = width·c). dst and src must not overlap. Returns OCR_ERR_OOM on
// allocation failure (scratch tables), else OCR_OK.
ocr_status_t ocr_resize_linear(uint8_t *dst, int dw, int dh, const uint8_t *src, int sw, int sh, int c);
// The same into a newly allocated image.
ocr_status_t ocr_image_resize(OcrImage *dst, const OcrImage *src, int width, int height);

// RecResizeImg's width for an h×w image at target H×W: min(W, ceil(H·w/h)), at least 1.
int ocr_rec_resized_width(int h, int w, int H, int W);

// The byte written to the padded columns of a batch. It normalises to 0.0039, close to
// PaddleOCR's pad value 0 (grey 127.5, not representable in uint8); the device-side
// normalisation writes an exact 0 beyond each sample's width instead.
#define OCR_PAD_VALUE 128

// RecResizeImg with padding: resizes img to resized_w × H (see ocr_rec_resized_width;
// padding 0 stretches to W × H) into dst, an H×W×C slot with row stride W·C, and fills
// columns [resized_w, W) with OCR_PAD_VALUE. A 1-channel image fills 3 channels when C = 3.
// *resized_w receives the width, *valid_ratio min(1, resized_w / W).
ocr_status_t ocr_rec_resize_pad(uint8_t *dst, int H, int W, int C, const OcrImage *img, int padding, int *resized_w,
                                float *valid_ratio);

// ---- RecAug pieces --------------------------------------------------------------------

typedef struct {
    double x, y;
} OcrPointD;

// WarpMLS (similarity moving least squares): the output (same size as src) samples src at
// the position that the MLS map of dst_pts → src_pts gives for each output pixel.
// n < 2 points: a copy. *dst is allocated.
ocr_status_t ocr_warp_mls(OcrImage *dst, const OcrImage *src, const OcrPointD *src_pts, const OcrPointD *dst_pts,
                          int n);

// text_image_aug: segment in [3, 6]; the random displacements come from rng.
ocr_status_t ocr_tia_distort(OcrImage *img, int segment, OcrRng *rng);
ocr_status_t ocr_tia_stretch(OcrImage *img, int segment, OcrRng *rng);
ocr_status_t ocr_tia_perspective(OcrImage *img, OcrRng *rng);

// get_crop: removes `rows` rows (capped at height − 1) from the top (from_top = 1) or the
// bottom.
ocr_status_t ocr_aug_crop(OcrImage *img, int rows, int from_top);
// cv2.sepFilter2D(img, -1, k, k) with k = getGaussianKernel(5, 1, CV_32F): see above.
ocr_status_t ocr_aug_blur(OcrImage *img);
// hsv_aug with a given delta (PaddleOCR: ±0.001·U[0,1)): V ← trunc(V·(1 + delta)) in HSV.
void ocr_aug_hsv(OcrImage *img, double delta);
// jitter with shift s: out[y][x] = in[y − i][x − i], i = min(y, x, s − 1) (s ≤ 0: no-op).
void ocr_aug_jitter(OcrImage *img, int s);
// add_gasuss_noise: see above.
void ocr_aug_noise(OcrImage *img, OcrRng *rng);
// 255 − img.
void ocr_aug_invert(OcrImage *img);

typedef struct {
    double tia_prob, crop_prob, reverse_prob, noise_prob, jitter_prob, blur_prob, hsv_aug_prob;
} OcrRecAugParams;

// PaddleOCR's defaults: every probability 0.4.
void ocr_rec_aug_defaults(OcrRecAugParams *p);
// RecAug: TIA (distort + stretch when h, w ≥ 20, then perspective) with tia_prob, then
// crop (h, w ≥ 20), blur, hsv, jitter, noise, inversion, each with its probability.
ocr_status_t ocr_rec_aug(OcrImage *img, const OcrRecAugParams *p, OcrRng *rng);

// ---- RecConAug ------------------------------------------------------------------------

typedef struct {
    double prob;          // 0.5 in the PP-OCR configs (class default 0.5)
    int ext_data_num;     // extra samples drawn (class default 1, configs 2)
    int image_h, image_w; // image_shape [H, W, C]: the concatenation height and max w/h
    int max_text_length;  // label characters (before dictionary filtering)
} OcrRecConAugParams;

// RecConAug's stop rules for appending an ext sample to the current one: 0 when
// cur_len + ext_len > max_text_length or cur_w/cur_h + ext_w/ext_h > image_w/image_h.
int ocr_rec_con_aug_fits(const OcrRecConAugParams *p, int cur_len, int cur_w, int cur_h, int ext_len, int ext_w,
                         int ext_h);
// merge_ext_data: resizes both images to height image_h (width round-half-even(w/h·image_h),
// at least 1) and puts them side by side into a new *img (replacing it).
ocr_status_t ocr_rec_con_aug_merge(OcrImage *img, const OcrImage *ext, int image_h);

// ---- the transform list of a dataset config -------------------------------------------

typedef enum { OCR_TOP_REC_CON_AUG = 0, OCR_TOP_REC_AUG } ocr_transform_op_t;

#define OCR_TRANSFORMS_MAX_OPS 4

typedef enum { OCR_LABEL_ENCODE_CTC = 0, OCR_LABEL_ENCODE_MULTI_SAR, OCR_LABEL_ENCODE_MULTI_NRTR } ocr_label_encode_t;

typedef struct {
    ocr_channel_order_t order;  // DecodeImage img_mode (BGR default, RGB, GRAY)
    int channels;               // 3, or 1 for GRAY
    // The augmentations in list order.
    int num_ops;
    ocr_transform_op_t ops[OCR_TRANSFORMS_MAX_OPS];
    OcrRecConAugParams con_aug;
    OcrRecAugParams rec_aug;
    // RecResizeImg (absent for MultiScaleDataSet, whose sampler gives the shape).
    int has_resize;
    int resize_h, resize_w;  // image_shape [C, H, W]
    int padding;             // 1 (default): keep aspect + pad right; 0: stretch to W
    // The label op: CTCLabelEncode, or MultiLabelEncode (MultiHead training: label_ctc plus
    // label_sar, or label_gtc with gtc_encode NRTRLabelEncode). The guidance labels derive from
    // the CTC ids (models/svtr/multihead.h); what MultiLabelEncode changes here is the rule
    // PaddleOCR's SAR/NRTR encoders add: a text of max_text_length − 1 or more encoded
    // characters is rejected (the sample is dropped), so label_max_len is max_text_length − 2.
    ocr_label_encode_t label_encode;
    int label_max_len;  // 0: max_text_length (CTCLabelEncode)
} OcrTransformList;

// Parses `path` (e.g. "Train.dataset.transforms"), a list of one-key objects as in
// PaddleOCR: DecodeImage {img_mode, channel_first: false, ignore_orientation},
// RecConAug {prob, ext_data_num, image_shape [H,W,C], max_text_length}, RecAug {tia_prob,
// crop_prob, reverse_prob, noise_prob, jitter_prob, blur_prob, hsv_aug_prob},
// CTCLabelEncode (no keys: the dictionary comes from Global) or MultiLabelEncode {gtc_encode:
// null (SAR) or NRTRLabelEncode} in its place, RecResizeImg {image_shape
// [C,H,W], padding, infer_mode: false, character_dict_path}, KeepKeys {keep_keys}.
// An unknown transform or key, a wrong type, a value out of range, a duplicate, or an
// order PaddleOCR could not run (DecodeImage not first, an augmentation after the label
// encoder or after RecResizeImg) is OCR_ERR_CONFIG naming the entry
// ("cfg.json: Train.dataset.transforms.3: unknown transform Foo (known: ...)").
// global_max_text_length > 0 (Global.max_text_length) overrides RecConAug's own key, as
// PaddleOCR's create_operators merges the Global section into every op's parameters.
ocr_status_t ocr_transforms_parse(OcrTransformList *out, const struct OcrConfig *cfg, const char *path,
                                  int global_max_text_length);

#endif

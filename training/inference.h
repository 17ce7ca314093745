// Models for evaluation and prediction: built from the config, weights loaded strictly (every
// tensor present with its shape, nothing extra), optionally under the config's AMP policy.
// PaddleOCR's predictor batching (tools/infer/predict_rec.py) for `ocrtrain predict`.
#ifndef OCR_TRAINING_INFERENCE_H
#define OCR_TRAINING_INFERENCE_H

#include <stdint.h>

#include "amp/engine.h"
#include "training/feed.h"
#include "core/config.h"
#include "data/dict.h"
#include "data/image.h"
#include "models/model.h"

typedef struct {
    OcrModel *m;
    AmpEngine amp;
    int amp_ok;
} InferModel;

// weights: a .safetensors file or a checkpoint directory. with_amp applies the config's
// AMP policy (as PaddleOCR's eval does); otherwise the model runs in float32.
// Errors: NOT_FOUND (no such weights), FORMAT (not safetensors, or tensors that do not match
// this architecture), CONFIG.
// device: a resolved device name ("cpu", "cuda:0"; NULL: the CPU). On a GPU the model and the
// AMP engine's copies live there and predictions run there.
ocr_status_t infer_model_load(InferModel *im, const OcrConfig *cfg, const char *weights, int with_amp,
                              const char *device);
void infer_model_free(InferModel *im);

// One inference pass over a uint8 batch (NHWC, count samples, each with its resized width):
// on the CPU normalised here and run through ocr_model_forward; on a GPU copied there and run
// through ocr_model_forward_u8 (normalised on the device). The probabilities are then
// ocr_model_probs(m).
ocr_status_t infer_forward_batch(OcrModel *m, const FeedBatch *b);

// The predictor's batch width: int(H · max(min_width / H, max w/h of the batch)).
int predict_batch_width(int height, int min_width, double max_ratio);

typedef struct {
    char *text;  // malloc'd UTF-8
    float confidence;
    int ok;      // 0: the image could not be read (error holds why)
    char error[512];
} Prediction;

// Recognises images[0..n) (decoded, any size) in batches of `batch` sorted by aspect ratio,
// each batch resized to height H (the config's) and padded to predict_batch_width. Results
// in input order.
ocr_status_t predict_images(OcrModel *m, const OcrDict *dict, const OcrImage *images, int n, int batch, int height,
                            int channels, int min_width, Prediction *out);

#endif

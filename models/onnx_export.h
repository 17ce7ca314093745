// ocrtrain networks → ONNX for deployment (onnxruntime, RapidOCR, anything that runs PaddleOCR's
// paddle2onnx exports).
//
// What is written is the inference network, laid out as paddle2onnx lays out PaddleOCR's export:
//   input  `x` float32 (N, 3, H, W), NCHW, N and W dynamic ("DynamicDimension.0/.1"), H the
//          config's height;
//   output `probs` float32 (N, T, classes): the CTC head's softmax over the classes,
//          T = W/8 for MobileNetV1Enhance at stride (1, 2) (W/4 at (1, 1)), W/8 for PPLCNetV3.
// Layers: Conv (weights OIHW), BatchNormalization (eval mode, the running statistics, ε 1e-5;
// folded into the Conv with the fold_bn option),
// HardSwish, Relu, HardSigmoid (α 1/6, β 0.5), x·Sigmoid(x) for swish, the SE gate's
// GlobalAveragePool + Mul, LearnableAffineBlocks as Mul + Add of one-element constants,
// AveragePool/MaxPool without padding, LayerNormalization, MatMul + Add linear layers (weights
// (in, out) as Paddle's), the SVTR attention as Reshape/Transpose/Gather, a scalar Mul of q,
// MatMul, Softmax, MatMul, and the neck's Concat([backbone map, conv3], axis 1).
// Only the CTC branch is exported for a MultiHead model (its guidance head exists in training
// only), and a PPLCNetV3 in training form is exported in its fused deploy form (models/model.h
// ocr_model_fuse: each rep layer one k×k conv with bias), as PaddleOCR's export does. Dropout
// and drop-path are identities at inference and are not written.
// PPHGNetV2_B4 (PP-OCRv5 server) is written without the classifier PaddleOCR builds and never
// runs: its ConvBNActs as Conv + BatchNormalization [+ Relu], the StemBlock's SAME pads as Conv /
// MaxPool pads (0, 0, 1, 1), each HG block's Concat of its input and layer outputs, T = W/8.
//
// Opset 17: the first opset with LayerNormalization, so each LayerNorm is one node computing
// the same f32 mean/variance arithmetic as ours instead of the nine-node decomposition opset 14
// needs; HardSwish (14) and the rest exist at 17 unchanged. onnxruntime reads opset 17 from
// version 1.13 (2022) on. IR version 8.
//
// The bytes depend only on the weights and the options: tensors in a fixed order, names from the
// parameter table, no timestamps, so an export is reproducible bit for bit.
#ifndef OCR_MODELS_ONNX_EXPORT_H
#define OCR_MODELS_ONNX_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "models/model.h"

#define OCR_ONNX_EXPORT_OPSET 17
#define OCR_ONNX_EXPORT_IR 8

typedef struct {
    // metadata_props "character": the dictionary, one character per line, as PaddleOCR's
    // export and RapidOCR's models carry it (NULL: no dictionary entry).
    const char *dictionary;
    const char *producer_version;  // ModelProto.producer_version (NULL: "")
    // Fold every BatchNormalization into the convolution before it (w·γ/√(σ²+ε), in double,
    // rounded once; a bias β + (b − μ)·γ/√(σ²+ε)). Off by default: PaddleOCR's export keeps
    // BatchNormalization nodes, onnxruntime folds them itself when it loads the graph, and our
    // importer (models/onnx_import.h) reads only the unfolded form.
    int fold_bn;
} OcrOnnxExportOptions;

typedef struct {
    int nodes, initializers;
    int64_t values;     // float values in the initializers
    int fused;          // the PPLCNetV3 rep layers were fused for the export
    int multihead_ctc;  // a MultiHead model: only its CTC branch was written
    int seq_divisor;    // T = W / seq_divisor
} OcrOnnxExportInfo;

// Serialises the inference network of `m` (on any device) into a malloc'd buffer. A network
// this exporter does not know (SVTRNet backbone, Head.mid_channels) is OCR_ERR_UNSUPPORTED
// naming what it is.
ocr_status_t ocr_onnx_export_bytes(const OcrModel *m, const OcrOnnxExportOptions *opt, uint8_t **data, size_t *size,
                                   OcrOnnxExportInfo *info);
// The same into `path`, atomically (a temporary file renamed over it; nothing is left on error).
ocr_status_t ocr_onnx_export(const OcrModel *m, const OcrOnnxExportOptions *opt, const char *path,
                             OcrOnnxExportInfo *info);

#endif

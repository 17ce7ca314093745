// PaddleOCR's PP-OCRv4 recognizer as exported to ONNX by paddle2onnx (see
// shared/models/ppocrv4_rec/GRAPH.md) → the fused PP-OCRv4 network's parameters.
//
// The graph is matched structurally, in node order: its Conv, BatchNormalization,
// learnable-affine (Mul/Add with one-element constants), LayerNorm (Mul/Add with per-channel
// constants after the normalising Div) and MatMul(+Add) weights are paired with the
// network's conv, batchnorm, affine, layernorm and linear ops in forward order, and every
// shape and every fixed hyper-parameter the network hard-codes (strides, pads, groups, BN
// and LN epsilons, the attention scale, HardSigmoid's slope, the final AveragePool, the
// concat order, the softmax) is checked. Any difference is an OCR_ERR_FORMAT error that
// names the node and what differs. Conv weights are transposed from OIHW to (OC, KH, KW, C).
#ifndef OCR_MODELS_ONNX_IMPORT_H
#define OCR_MODELS_ONNX_IMPORT_H

#include "models/model.h"
#include "models/onnx.h"

// Builds the fused v4 network (classes from the head's weight) and fills every parameter and
// BN statistic from the graph. `name` is used in messages.
ocr_status_t ocr_import_ppocrv4_onnx(OcrModel **out, const OcrOnnxModel *onnx, const char *name);

#endif

// PaddleOCR's PP-OCR recognizers (v3, v4, v5 mobile and server, v6 tiny / small) as exported to ONNX →
// ocrtrain networks.
//
// The graph is matched by its structure, never by counting nodes: starting at the graph
// input, the importer walks the data flow layer by layer (conv [+ bias] [+ BN] [+ learnable
// affine] [+ activation] [+ affine]; depthwise-separable blocks with their SE gates; the
// backbone's last pool; the SVTR neck's convs, LayerNorms, attention and MLP with their
// residual adds and the channel concat; the CTC head and its softmax). Each pattern is
// recognised in every form paddle2onnx writes it (HardSwish as one op or as Add/Clip/Mul/Div,
// Clip bounds as attributes (opset < 11) or inputs, scalars of shape () or (1), Identity and
// Dropout pass-throughs, LayerNorm decomposed or as LayerNormalization). Whatever computes
// nothing is seen through before the walk (Add 0 or Sub 0 outside a learnable affine block, an
// Unsqueeze undone by a Squeeze of the same axes, Transposes that cancel), and a weight is a
// constant however it is written (initializer, Constant node with value or value_float(s),
// a constant reshaped, unsqueezed, squeezed, flattened or transposed by a node); a linear layer
// is MatMul or Gemm (transB allowed) with its bias as Gemm's C or an Add in either order.
// What the walk found decides the variant:
//   PP-OCRv3: MobileNetV1Enhance (conv + BN + HardSwish everywhere), scale from the channels,
//             the last block's stride and the last pool from the graph;
//   PP-OCRv4: PPLCNetV3 in its deploy (re-parameterised) form (conv with bias + affine +
//             hardswish + affine), scale from the channels;
//   PP-OCRv5 mobile: the same network with 18,385 classes, when the dictionary (given, or in
//             the metadata) is ppocrv5_dict.txt or there is none;
//   PP-OCRv6: a graph with GELU (Erf or Gelu nodes) is PPLCNetV4, walked by its own walker
//             (models/onnx_import_lcnetv4.c: the tiny's conv-GELU-conv stem or the StemBlock
//             with its SAME-padded 2x2 convs and max pool, blocks with GELU channel mixers, the
//             LightSVTR neck or the tiny's guide layer, one or two head FCs); the CTC branch is
//             built as configs/rec_ppocrv6_{tiny,small}_ctc.json in deploy form;
//   PP-OCRv5 server: a graph with StemBlock's stride-1 MaxPool and HG blocks' wide Concats is
//             PPHGNetV2_B4 text_rec + SVTR neck + CTC, walked by models/onnx_import_hgnet.c; the
//             CTC branch of configs/rec_ppocrv5_server.json is built in deploy form (CTC-only names);
// the neck (SVTR: dims, hidden dims, kernel, depth, heads from the attention scale, MLP ratio;
// or Im2Seq) and the class count. The matching ocrtrain network is then built and every layer
// is paired with its op in forward order; shapes, strides, pads, groups, epsilons, HardSigmoid's
// slope, the attention scale and the concat order are checked. A mismatch is an OCR_ERR_FORMAT
// error naming the first node or tensor that does not fit. Conv weights are transposed from
// OIHW to (OC, KH, KW, C/groups).
#ifndef OCR_MODELS_ONNX_IMPORT_H
#define OCR_MODELS_ONNX_IMPORT_H

#include "models/model.h"
#include "models/onnx.h"

typedef struct {
    char variant[512];    // "PP-OCRv4 ch: PPLCNetV3 0.95 (deploy-fused) + SVTR neck ... + CTC 6625"
    const char *version;  // "PP-OCRv3", "PP-OCRv4", "PP-OCRv5" or "PP-OCRv6"
    const char *language; // "en" (97 classes), "ch" (6625), "mobile" / "server" (PP-OCRv5, 18385) or "other";
                          // PP-OCRv6: the size, "tiny", "small" or "medium"
    const char *config;   // the config to train the result with ("configs/rec_ppocrv4_ch.json")
    int deploy;           // the network was built in its deploy (fused) form
    int softmax_output;   // the graph ends with the head's softmax (else it outputs logits)
    int nodes_walked;     // compute nodes the walk consumed (shape plumbing included)
    int tensors_loaded;   // parameters + BN statistics filled
    int64_t values_loaded;
    // Graph constants the network did not take: float arrays (listed: any is suspicious) and
    // scalars / integer shape helpers (counted: hardswish's 3 and 6, epsilons, reshape shapes).
    int constants_total;
    int unused_arrays, unused_helpers;
    // Their names (the first OCR_ONNX_MAX_LISTED of each; they point into the ONNX model).
#define OCR_ONNX_MAX_LISTED 512
    const char *unused_array_names[OCR_ONNX_MAX_LISTED];
    const char *unused_helper_names[OCR_ONNX_MAX_LISTED];
    const char *dictionary;  // the dictionary given, else metadata_props "character" (newline separated); NULL: none
    int dictionary_lines;
    int dictionary_from_file;      // it is the one the caller gave (ocr_import_onnx_dict), not the metadata's
    const char *dictionary_known;  // "ppocrv5_dict" (v6: also "ppocrv6_dict", "ppocrv6_tiny_dict") when it is
                                   // that file of PaddleOCR's, else NULL
} OcrOnnxImportInfo;

// PP-OCRv5's recognizers: ppocrv5_dict.txt's 18,383 lines + blank + space, and the FNV-1a 64 of
// that file's text (LF line ends, no final newline; configs/dicts/ppocrv5_dict.txt).
#define OCR_PPOCRV5_CLASSES 18385
#define OCR_PPOCRV5_DICT_FNV 0x167463246828f7f8ull

// Walks the graph, builds the matching network and fills every parameter and BN statistic.
// `name` is used in messages; `info` (may be NULL) receives what was recognised (its
// dictionary points into `onnx`).
ocr_status_t ocr_import_onnx(OcrModel **out, const OcrOnnxModel *onnx, const char *name, OcrOnnxImportInfo *info);

// The same with the dictionary the caller read from a file (NULL: the metadata's, if any): it
// names the variant (a head of 18,385 classes with ppocrv5_dict is PP-OCRv5 mobile) and is what
// info->dictionary returns.
ocr_status_t ocr_import_onnx_dict(OcrModel **out, const OcrOnnxModel *onnx, const char *name, const char *dictionary,
                                  OcrOnnxImportInfo *info);

// The same, for callers that only want the network.
ocr_status_t ocr_import_ppocrv4_onnx(OcrModel **out, const OcrOnnxModel *onnx, const char *name);

// The config a network of this architecture trains with (NULL: none of ours fits) and the
// `-o` overrides it needs on top (written into buf, "" when none).
const char *ocr_import_suggest_config(const OcrArch *arch, char *overrides, size_t size);

#endif

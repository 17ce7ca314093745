// A small reader of exactly the ONNX protobuf the weight import needs: ModelProto →
// GraphProto → nodes (op_type, inputs, outputs, attributes: float, int, string, tensor, float
// and int lists), initializers (TensorProto: dims, data_type, raw_data / float_data /
// int32_data / int64_data, name), graph input/output names, the default-domain opset and the
// metadata_props (key → value strings).
// Everything else is skipped by wire type. Truncated varints, lengths past the end of the
// enclosing message, group or reserved wire types, and tensors whose data does not match
// their dims are OCR_ERR_FORMAT errors that say where (message, field) they were found.
#ifndef OCR_MODELS_ONNX_H
#define OCR_MODELS_ONNX_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

// ---- protobuf wire format -----------------------------------------------------------------
enum { OCR_PB_VARINT = 0, OCR_PB_I64 = 1, OCR_PB_LEN = 2, OCR_PB_I32 = 5 };

typedef struct {
    const uint8_t *p, *end;
    const char *what;  // the message being read, for errors
} OcrPbReader;

typedef struct {
    uint32_t field;
    int wire;
    uint64_t value;        // VARINT, I64, I32
    const uint8_t *data;   // LEN
    size_t len;
} OcrPbField;

// Reads a varint (at most 10 bytes; the 10th may only carry the top bit).
ocr_status_t ocr_pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *out);
// The next field: returns 1 and fills *f, 0 at the end of the message, -1 on a format
// error (message set).
int ocr_pb_next(OcrPbReader *r, OcrPbField *f);

// ---- ONNX ------------------------------------------------------------------------------------
enum {
    OCR_ONNX_FLOAT = 1,
    OCR_ONNX_UINT8 = 2,
    OCR_ONNX_INT8 = 3,
    OCR_ONNX_INT32 = 6,
    OCR_ONNX_INT64 = 7,
    OCR_ONNX_FLOAT16 = 10,
    OCR_ONNX_DOUBLE = 11,
};

#define OCR_ONNX_MAX_DIMS 8

typedef struct {
    char *name;
    int data_type;
    int ndim;
    int64_t dims[OCR_ONNX_MAX_DIMS];
    int64_t numel;
    float *f32;    // FLOAT, FLOAT16 and DOUBLE tensors, as floats
    int64_t *i64;  // INT32, INT64, INT8, UINT8 tensors, as int64
} OcrOnnxTensor;

enum { OCR_ONNX_ATTR_FLOAT = 1, OCR_ONNX_ATTR_INT = 2, OCR_ONNX_ATTR_STRING = 3, OCR_ONNX_ATTR_TENSOR = 4,
       OCR_ONNX_ATTR_FLOATS = 6, OCR_ONNX_ATTR_INTS = 7 };

typedef struct {
    char *name;
    int type;
    float f;
    int64_t i;
    char *s;
    OcrOnnxTensor *t;
    float *floats;
    int nfloats;
    int64_t *ints;
    int nints;
} OcrOnnxAttr;

typedef struct {
    char *op_type, *name;
    char **inputs, **outputs;
    int ninputs, noutputs;
    OcrOnnxAttr *attrs;
    int nattrs;
} OcrOnnxNode;

typedef struct {
    int64_t ir_version, opset;
    char *producer;
    OcrOnnxNode *nodes;
    int nnodes;
    OcrOnnxTensor *inits;
    int ninits;
    char **inputs, **outputs;  // graph input / output names
    int ninputs, noutputs;
    char **meta_keys, **meta_values;  // ModelProto.metadata_props
    int nmeta;
} OcrOnnxModel;

// Parses a serialized ModelProto; `name` is used in messages.
ocr_status_t ocr_onnx_parse(OcrOnnxModel **out, const uint8_t *data, size_t size, const char *name);
ocr_status_t ocr_onnx_load(OcrOnnxModel **out, const char *path);
void ocr_onnx_free(OcrOnnxModel *m);

// A metadata_props value by key (NULL when absent), e.g. "character": PaddleOCR's dictionary.
const char *ocr_onnx_metadata(const OcrOnnxModel *m, const char *key);
// An attribute of a node (NULL when absent).
const OcrOnnxAttr *ocr_onnx_attr(const OcrOnnxNode *n, const char *name);
// A constant by name: an initializer or the `value` tensor of a Constant node (NULL when none).
const OcrOnnxTensor *ocr_onnx_constant(const OcrOnnxModel *m, const char *name);

#endif

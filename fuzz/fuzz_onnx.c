// The ONNX importer (models/onnx.c: the protobuf reader and ModelProto parser, and
// models/onnx_import.c: the structural match of PaddleOCR's PP-OCRv4 export).
//
// Input: a serialized ModelProto, as is. Every model that parses is walked field by field
// (names, attributes, tensors: ASan checks each array against its count) and handed to
// ocr_import_ppocrv4_onnx, which must either build the network or refuse with a message
// naming the file.
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "models/onnx.h"
#include "models/onnx_import.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

static unsigned touch_tensor(const OcrOnnxTensor *t) {
    unsigned sum = t->name ? (unsigned)strlen(t->name) : 0;
    OCR_ASSERT(t->ndim >= 0 && t->ndim <= OCR_ONNX_MAX_DIMS && t->numel >= 0, "tensor with %d dims, %lld elements",
               t->ndim, (long long)t->numel);
    // A dtype the importer never reads (bool, string, ...) keeps its shape only: no data arrays.
    for (int64_t i = 0; (t->f32 || t->i64) && i < t->numel; i++)
        sum += t->f32 ? (unsigned)(t->f32[i] == t->f32[i]) : (unsigned)t->i64[i];
    return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    OcrOnnxModel *m = NULL;
    if (ocr_onnx_parse(&m, data, size, "fuzz.onnx") != OCR_OK) return 0;
    unsigned sum = 0;
    for (int i = 0; i < m->nnodes; i++) {
        const OcrOnnxNode *n = &m->nodes[i];
        sum += (unsigned)strlen(n->op_type ? n->op_type : "") + (unsigned)strlen(n->name ? n->name : "");
        for (int k = 0; k < n->ninputs; k++) sum += (unsigned)strlen(n->inputs[k]);
        for (int k = 0; k < n->noutputs; k++) sum += (unsigned)strlen(n->outputs[k]);
        for (int k = 0; k < n->nattrs; k++) {
            const OcrOnnxAttr *a = &n->attrs[k];
            OCR_ASSERT(a->name && ocr_onnx_attr(n, a->name), "attribute %d of node %d not found by its name", k, i);
            if (a->s) sum += (unsigned)strlen(a->s);
            if (a->t) sum += touch_tensor(a->t);
            for (int j = 0; j < a->nfloats; j++) sum += (unsigned)(a->floats[j] == a->floats[j]);
            for (int j = 0; j < a->nints; j++) sum += (unsigned)a->ints[j];
        }
    }
    for (int i = 0; i < m->ninits; i++) {
        sum += touch_tensor(&m->inits[i]);
        if (m->inits[i].name) (void)ocr_onnx_constant(m, m->inits[i].name);
    }
    for (int i = 0; i < m->ninputs; i++) sum += (unsigned)strlen(m->inputs[i]);
    for (int i = 0; i < m->noutputs; i++) sum += (unsigned)strlen(m->outputs[i]);
    volatile unsigned sink = sum;
    (void)sink;

    OcrModel *model = NULL;
    if (ocr_import_ppocrv4_onnx(&model, m, "fuzz.onnx") == OCR_OK) ocr_model_free(model);
    else OCR_ASSERT(strstr(ocr_last_error(), "fuzz.onnx"), "import error without the file name: %s", ocr_last_error());
    ocr_onnx_free(m);
    return 0;
}

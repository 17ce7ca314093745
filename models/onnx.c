#include "models/onnx.h"

#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/half.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the ONNX reader assumes a little-endian host (raw_data is little-endian)"
#endif

// ---- wire format --------------------------------------------------------------------------------

ocr_status_t ocr_pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
    uint64_t v = 0;
    const uint8_t *q = *p;
    *out = 0;
    for (int i = 0; i < 10; i++) {
        if (q >= end) return ocr_set_error(OCR_ERR_FORMAT, "truncated varint");
        uint8_t b = *q++;
        if (i == 9 && b > 1) return ocr_set_error(OCR_ERR_FORMAT, "varint longer than 64 bits");
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *p = q;
            *out = v;
            return OCR_OK;
        }
    }
    return ocr_set_error(OCR_ERR_FORMAT, "varint longer than 10 bytes");
}

int ocr_pb_next(OcrPbReader *r, OcrPbField *f) {
    if (r->p >= r->end) return 0;
    memset(f, 0, sizeof *f);
    uint64_t tag;
    if (ocr_pb_varint(&r->p, r->end, &tag) != OCR_OK) {
        ocr_wrap_error(OCR_ERR_FORMAT, "in a field tag of %s", r->what);
        return -1;
    }
    if ((tag >> 3) == 0 || (tag >> 3) > 0x1fffffff) {
        ocr_set_error(OCR_ERR_FORMAT, "invalid field number %llu in %s", (unsigned long long)(tag >> 3), r->what);
        return -1;
    }
    f->field = (uint32_t)(tag >> 3);
    f->wire = (int)(tag & 7);
    switch (f->wire) {
    case OCR_PB_VARINT:
        if (ocr_pb_varint(&r->p, r->end, &f->value) != OCR_OK) {
            ocr_wrap_error(OCR_ERR_FORMAT, "in field %u of %s", f->field, r->what);
            return -1;
        }
        return 1;
    case OCR_PB_I64:
    case OCR_PB_I32: {
        size_t n = f->wire == OCR_PB_I64 ? 8 : 4;
        if ((size_t)(r->end - r->p) < n) {
            ocr_set_error(OCR_ERR_FORMAT, "truncated %zu-byte value in field %u of %s", n, f->field, r->what);
            return -1;
        }
        uint64_t v = 0;
        memcpy(&v, r->p, n);
        f->value = v;
        r->p += n;
        return 1;
    }
    case OCR_PB_LEN: {
        uint64_t len;
        if (ocr_pb_varint(&r->p, r->end, &len) != OCR_OK) {
            ocr_wrap_error(OCR_ERR_FORMAT, "in the length of field %u of %s", f->field, r->what);
            return -1;
        }
        if (len > (uint64_t)(r->end - r->p)) {
            ocr_set_error(OCR_ERR_FORMAT, "field %u of %s claims %llu bytes but only %zu remain", f->field, r->what,
                          (unsigned long long)len, (size_t)(r->end - r->p));
            return -1;
        }
        f->data = r->p;
        f->len = (size_t)len;
        r->p += len;
        return 1;
    }
    case 3:
    case 4:
        ocr_set_error(OCR_ERR_FORMAT, "field %u of %s uses the deprecated group wire type %d", f->field, r->what,
                      f->wire);
        return -1;
    default:
        ocr_set_error(OCR_ERR_FORMAT, "field %u of %s has the invalid wire type %d", f->field, r->what, f->wire);
        return -1;
    }
}

// ---- helpers ------------------------------------------------------------------------------------------

#define PUSH(arr, n, cap, item)                                                       \
    do {                                                                              \
        if ((n) == (cap)) {                                                           \
            size_t nc_ = (cap) ? 2 * (size_t)(cap) : 8;                               \
            void *np_ = realloc((arr), nc_ * sizeof *(arr));                          \
            if (!np_) return ocr_set_error(OCR_ERR_OOM, "out of host memory");         \
            (arr) = np_;                                                              \
            (cap) = (int)nc_;                                                         \
        }                                                                             \
        (arr)[(n)++] = (item);                                                        \
    } while (0)

static ocr_status_t wire_error(const OcrPbField *f, int want, const char *what) {
    return ocr_set_error(OCR_ERR_FORMAT, "field %u of %s has wire type %d, expected %d", f->field, what, f->wire, want);
}

#define EXPECT(f, w, what) \
    if ((f)->wire != (w)) return wire_error((f), (w), (what))

static char *dup_bytes(const OcrPbField *f) {
    char *s = malloc(f->len + 1);
    if (!s) return NULL;
    memcpy(s, f->data, f->len);
    s[f->len] = '\0';
    return s;
}

#define NEXT_OR_FAIL(r, f, rc) \
    int rc;                    \
    while ((rc = ocr_pb_next((r), (f))) > 0)

// Repeated scalars arrive packed (one LEN field) or one per field; both are accepted.
typedef struct {
    int64_t *v;
    int n, cap;
} I64List;
typedef struct {
    float *v;
    int n, cap;
} F32List;
typedef struct {
    double *v;
    int n, cap;
} F64List;

static ocr_status_t add_varints(I64List *l, const OcrPbField *f, const char *what) {
    if (f->wire == OCR_PB_VARINT) {
        PUSH(l->v, l->n, l->cap, (int64_t)f->value);
        return OCR_OK;
    }
    if (f->wire != OCR_PB_LEN) return wire_error(f, OCR_PB_LEN, what);
    const uint8_t *p = f->data, *end = f->data + f->len;
    while (p < end) {
        uint64_t v;
        if (ocr_pb_varint(&p, end, &v) != OCR_OK)
            return ocr_wrap_error(OCR_ERR_FORMAT, "in packed field %u of %s", f->field, what);
        PUSH(l->v, l->n, l->cap, (int64_t)v);
    }
    return OCR_OK;
}

static ocr_status_t add_floats(F32List *l, const OcrPbField *f, const char *what) {
    if (f->wire == OCR_PB_I32) {
        float x;
        uint32_t u = (uint32_t)f->value;
        memcpy(&x, &u, 4);
        PUSH(l->v, l->n, l->cap, x);
        return OCR_OK;
    }
    if (f->wire != OCR_PB_LEN) return wire_error(f, OCR_PB_LEN, what);
    if (f->len % 4) return ocr_set_error(OCR_ERR_FORMAT, "packed floats of %s: %zu bytes is not a multiple of 4", what, f->len);
    for (size_t i = 0; i < f->len; i += 4) {
        float x;
        memcpy(&x, f->data + i, 4);
        PUSH(l->v, l->n, l->cap, x);
    }
    return OCR_OK;
}

static ocr_status_t add_doubles(F64List *l, const OcrPbField *f, const char *what) {
    if (f->wire == OCR_PB_I64) {
        double x;
        memcpy(&x, &f->value, 8);
        PUSH(l->v, l->n, l->cap, x);
        return OCR_OK;
    }
    if (f->wire != OCR_PB_LEN) return wire_error(f, OCR_PB_LEN, what);
    if (f->len % 8) return ocr_set_error(OCR_ERR_FORMAT, "packed doubles of %s: %zu bytes is not a multiple of 8", what, f->len);
    for (size_t i = 0; i < f->len; i += 8) {
        double x;
        memcpy(&x, f->data + i, 8);
        PUSH(l->v, l->n, l->cap, x);
    }
    return OCR_OK;
}

static void tensor_free(OcrOnnxTensor *t) {
    if (!t) return;
    free(t->name);
    free(t->f32);
    free(t->i64);
    memset(t, 0, sizeof *t);
}

// ---- TensorProto ------------------------------------------------------------------------------------------

static size_t elem_size(int dt) {
    switch (dt) {
    case OCR_ONNX_FLOAT: return 4;
    case OCR_ONNX_UINT8: case OCR_ONNX_INT8: return 1;
    case OCR_ONNX_INT32: return 4;
    case OCR_ONNX_INT64: return 8;
    case OCR_ONNX_FLOAT16: return 2;
    case OCR_ONNX_DOUBLE: return 8;
    default: return 0;
    }
}

static ocr_status_t parse_tensor_inner(OcrOnnxTensor *t, const uint8_t *data, size_t len, I64List *dims,
                                       I64List *ints, F32List *floats, F64List *doubles) {
    OcrPbReader r = {data, data + len, "a TensorProto"};
    OcrPbField f;
    const uint8_t *raw = NULL;
    size_t raw_len = 0;
    int has_raw = 0;
    NEXT_OR_FAIL(&r, &f, rc) {
        switch (f.field) {
        case 1: OCR_TRY(add_varints(dims, &f, "TensorProto.dims")); break;
        case 2: EXPECT(&f, OCR_PB_VARINT, "TensorProto.data_type"); t->data_type = (int)f.value; break;
        case 3: return ocr_set_error(OCR_ERR_UNSUPPORTED, "segmented tensors are not supported");
        case 4: OCR_TRY(add_floats(floats, &f, "TensorProto.float_data")); break;
        case 5: OCR_TRY(add_varints(ints, &f, "TensorProto.int32_data")); break;
        case 7: OCR_TRY(add_varints(ints, &f, "TensorProto.int64_data")); break;
        case 8:
            EXPECT(&f, OCR_PB_LEN, "TensorProto.name");
            free(t->name);
            t->name = dup_bytes(&f);
            if (!t->name) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
            break;
        case 9:
            EXPECT(&f, OCR_PB_LEN, "TensorProto.raw_data");
            raw = f.data;
            raw_len = f.len;
            has_raw = 1;
            break;
        case 10: OCR_TRY(add_doubles(doubles, &f, "TensorProto.double_data")); break;
        case 13: return ocr_set_error(OCR_ERR_UNSUPPORTED, "tensor %s keeps its data in an external file", t->name ? t->name : "?");
        case 14:
            if (f.wire == OCR_PB_VARINT && f.value == 1)
                return ocr_set_error(OCR_ERR_UNSUPPORTED, "tensor %s keeps its data in an external file",
                                     t->name ? t->name : "?");
            break;
        default: break;
        }
    }
    if (rc < 0) return OCR_ERR_FORMAT;
    if (dims->n > OCR_ONNX_MAX_DIMS) return ocr_set_error(OCR_ERR_UNSUPPORTED, "a tensor with %d dimensions", dims->n);
    t->ndim = dims->n;
    t->numel = 1;
    for (int i = 0; i < dims->n; i++) {
        if (dims->v[i] < 0 || (dims->v[i] > 0 && t->numel > INT64_MAX / 16 / dims->v[i]))
            return ocr_set_error(OCR_ERR_FORMAT, "tensor %s has the invalid dimension %lld", t->name ? t->name : "?",
                                 (long long)dims->v[i]);
        t->dims[i] = dims->v[i];
        t->numel *= dims->v[i];
    }
    size_t es = elem_size(t->data_type);
    if (es == 0) return OCR_OK;  // a dtype we never read (bool, string, ...): shape only
    int is_float = t->data_type == OCR_ONNX_FLOAT || t->data_type == OCR_ONNX_FLOAT16 || t->data_type == OCR_ONNX_DOUBLE;
    const char *nm = t->name ? t->name : "?";
    // The data must be all there before anything is allocated: dims alone (a few bytes) would
    // otherwise buy any allocation (found by fuzz/fuzz_onnx.c: 40 bytes asked for 4 GB).
    int64_t have = has_raw                               ? -1
                   : t->data_type == OCR_ONNX_FLOAT  ? floats->n
                   : t->data_type == OCR_ONNX_DOUBLE ? doubles->n
                                                     : ints->n;
    if (has_raw && (uint64_t)raw_len != (uint64_t)t->numel * es)
        return ocr_set_error(OCR_ERR_FORMAT, "tensor %s: raw_data has %zu bytes, its dims need %lld", nm, raw_len,
                             (long long)(t->numel * (int64_t)es));
    if (!has_raw && have != t->numel)
        return ocr_set_error(OCR_ERR_FORMAT, "tensor %s: %lld values for dims holding %lld", nm, (long long)have,
                             (long long)t->numel);
    if (is_float) t->f32 = malloc((size_t)(t->numel ? t->numel : 1) * sizeof(float));
    else t->i64 = malloc((size_t)(t->numel ? t->numel : 1) * sizeof(int64_t));
    if (!t->f32 && !t->i64) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    if (has_raw) {
        for (int64_t i = 0; i < t->numel; i++) {
            const uint8_t *q = raw + (size_t)i * es;
            switch (t->data_type) {
            case OCR_ONNX_FLOAT: memcpy(&t->f32[i], q, 4); break;
            case OCR_ONNX_FLOAT16: {
                uint16_t h;
                memcpy(&h, q, 2);
                t->f32[i] = ocr_f16_to_f32(h);
                break;
            }
            case OCR_ONNX_DOUBLE: {
                double d;
                memcpy(&d, q, 8);
                t->f32[i] = (float)d;
                break;
            }
            case OCR_ONNX_INT64: memcpy(&t->i64[i], q, 8); break;
            case OCR_ONNX_INT32: {
                int32_t v;
                memcpy(&v, q, 4);
                t->i64[i] = v;
                break;
            }
            case OCR_ONNX_INT8: t->i64[i] = (int8_t)*q; break;
            default: t->i64[i] = *q; break;
            }
        }
        return OCR_OK;
    }
    // Typed fields: FLOAT in float_data, DOUBLE in double_data, FLOAT16 / integers in int32_data or int64_data.
    for (int64_t i = 0; i < t->numel; i++) {
        switch (t->data_type) {
        case OCR_ONNX_FLOAT: t->f32[i] = floats->v[i]; break;
        case OCR_ONNX_DOUBLE: t->f32[i] = (float)doubles->v[i]; break;
        case OCR_ONNX_FLOAT16: t->f32[i] = ocr_f16_to_f32((uint16_t)ints->v[i]); break;
        case OCR_ONNX_INT32: t->i64[i] = (int32_t)ints->v[i]; break;
        default: t->i64[i] = ints->v[i]; break;
        }
    }
    return OCR_OK;
}

static ocr_status_t parse_tensor(OcrOnnxTensor *t, const uint8_t *data, size_t len) {
    memset(t, 0, sizeof *t);
    I64List dims = {0}, ints = {0};
    F32List floats = {0};
    F64List doubles = {0};
    ocr_status_t st = parse_tensor_inner(t, data, len, &dims, &ints, &floats, &doubles);
    free(dims.v);
    free(ints.v);
    free(floats.v);
    free(doubles.v);
    if (st != OCR_OK) {
        if (t->name) ocr_wrap_error(st, "tensor %s", t->name);
        tensor_free(t);
    }
    return st;
}

// ---- AttributeProto, NodeProto ----------------------------------------------------------------------------

static void attr_free(OcrOnnxAttr *a) {
    free(a->name);
    free(a->s);
    if (a->t) {
        tensor_free(a->t);
        free(a->t);
    }
    free(a->floats);
    free(a->ints);
}

static ocr_status_t parse_attr(OcrOnnxAttr *a, const uint8_t *data, size_t len) {
    OcrPbReader r = {data, data + len, "an AttributeProto"};
    OcrPbField f;
    I64List ints = {0};
    F32List floats = {0};
    ocr_status_t st = OCR_OK;
    int rc = 0;
    while (st == OCR_OK && (rc = ocr_pb_next(&r, &f)) > 0) {
        switch (f.field) {
        case 1:
            if (f.wire != OCR_PB_LEN) { st = wire_error(&f, OCR_PB_LEN, "AttributeProto.name"); break; }
            free(a->name);
            a->name = dup_bytes(&f);
            break;
        case 2:
            if (f.wire != OCR_PB_I32) { st = wire_error(&f, OCR_PB_I32, "AttributeProto.f"); break; }
            {
                uint32_t u = (uint32_t)f.value;
                memcpy(&a->f, &u, 4);
            }
            break;
        case 3:
            if (f.wire != OCR_PB_VARINT) { st = wire_error(&f, OCR_PB_VARINT, "AttributeProto.i"); break; }
            a->i = (int64_t)f.value;
            break;
        case 4:
            if (f.wire != OCR_PB_LEN) { st = wire_error(&f, OCR_PB_LEN, "AttributeProto.s"); break; }
            free(a->s);
            a->s = dup_bytes(&f);
            break;
        case 5:
            if (f.wire != OCR_PB_LEN) { st = wire_error(&f, OCR_PB_LEN, "AttributeProto.t"); break; }
            if (!a->t) a->t = calloc(1, sizeof *a->t);
            else tensor_free(a->t);
            if (!a->t) { st = ocr_set_error(OCR_ERR_OOM, "out of host memory"); break; }
            st = parse_tensor(a->t, f.data, f.len);
            break;
        case 7: st = add_floats(&floats, &f, "AttributeProto.floats"); break;
        case 8: st = add_varints(&ints, &f, "AttributeProto.ints"); break;
        case 20:
            if (f.wire != OCR_PB_VARINT) { st = wire_error(&f, OCR_PB_VARINT, "AttributeProto.type"); break; }
            a->type = (int)f.value;
            break;
        default: break;
        }
    }
    if (st == OCR_OK && rc < 0) st = OCR_ERR_FORMAT;
    a->floats = floats.v;
    a->nfloats = floats.n;
    a->ints = ints.v;
    a->nints = ints.n;
    if (st == OCR_OK && !a->name) st = ocr_set_error(OCR_ERR_FORMAT, "an attribute without a name");
    if (st != OCR_OK && a->name) ocr_wrap_error(st, "attribute %s", a->name);
    return st;
}

static void node_free(OcrOnnxNode *n) {
    free(n->op_type);
    free(n->name);
    for (int i = 0; i < n->ninputs; i++) free(n->inputs[i]);
    for (int i = 0; i < n->noutputs; i++) free(n->outputs[i]);
    free(n->inputs);
    free(n->outputs);
    for (int i = 0; i < n->nattrs; i++) attr_free(&n->attrs[i]);
    free(n->attrs);
}

static ocr_status_t parse_node(OcrOnnxNode *n, const uint8_t *data, size_t len) {
    OcrPbReader r = {data, data + len, "a NodeProto"};
    OcrPbField f;
    int cin = 0, cout = 0, cattr = 0;
    NEXT_OR_FAIL(&r, &f, rc) {
        switch (f.field) {
        case 1:
        case 2: {
            EXPECT(&f, OCR_PB_LEN, f.field == 1 ? "NodeProto.input" : "NodeProto.output");
            char *s = dup_bytes(&f);
            if (!s) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
            if (f.field == 1) PUSH(n->inputs, n->ninputs, cin, s);
            else PUSH(n->outputs, n->noutputs, cout, s);
            break;
        }
        case 3:
            EXPECT(&f, OCR_PB_LEN, "NodeProto.name");
            free(n->name);
            n->name = dup_bytes(&f);
            break;
        case 4:
            EXPECT(&f, OCR_PB_LEN, "NodeProto.op_type");
            free(n->op_type);
            n->op_type = dup_bytes(&f);
            break;
        case 5: {
            EXPECT(&f, OCR_PB_LEN, "NodeProto.attribute");
            OcrOnnxAttr a = {0};
            ocr_status_t st = parse_attr(&a, f.data, f.len);
            if (st != OCR_OK) {
                attr_free(&a);
                return st;
            }
            PUSH(n->attrs, n->nattrs, cattr, a);
            break;
        }
        default: break;
        }
    }
    if (rc < 0) return OCR_ERR_FORMAT;
    if (!n->op_type) return ocr_set_error(OCR_ERR_FORMAT, "a node without an op_type");
    return OCR_OK;
}

// ---- GraphProto, ModelProto --------------------------------------------------------------------------------

static ocr_status_t value_info_name(const OcrPbField *vf, char **out) {
    OcrPbReader r = {vf->data, vf->data + vf->len, "a ValueInfoProto"};
    OcrPbField f;
    *out = NULL;
    NEXT_OR_FAIL(&r, &f, rc) {
        if (f.field == 1) {
            if (f.wire != OCR_PB_LEN) {  // not EXPECT: a name read before must not leak (found by fuzz/fuzz_onnx.c)
                free(*out);
                *out = NULL;
                return wire_error(&f, OCR_PB_LEN, "ValueInfoProto.name");
            }
            free(*out);
            *out = dup_bytes(&f);
        }
    }
    if (rc < 0) {
        free(*out);
        *out = NULL;
        return OCR_ERR_FORMAT;
    }
    if (!*out) *out = strdup("");
    return *out ? OCR_OK : ocr_set_error(OCR_ERR_OOM, "out of host memory");
}

static ocr_status_t parse_graph(OcrOnnxModel *m, const uint8_t *data, size_t len) {
    OcrPbReader r = {data, data + len, "the GraphProto"};
    OcrPbField f;
    int cn = 0, ci = 0, cin = 0, cout = 0;
    NEXT_OR_FAIL(&r, &f, rc) {
        switch (f.field) {
        case 1: {
            EXPECT(&f, OCR_PB_LEN, "GraphProto.node");
            OcrOnnxNode n = {0};
            ocr_status_t st = parse_node(&n, f.data, f.len);
            if (st != OCR_OK) {
                ocr_wrap_error(st, "node %d (%s)", m->nnodes, n.name ? n.name : n.op_type ? n.op_type : "?");
                node_free(&n);
                return st;
            }
            PUSH(m->nodes, m->nnodes, cn, n);
            break;
        }
        case 5: {
            EXPECT(&f, OCR_PB_LEN, "GraphProto.initializer");
            OcrOnnxTensor t;
            OCR_TRY(parse_tensor(&t, f.data, f.len));
            PUSH(m->inits, m->ninits, ci, t);
            break;
        }
        case 11:
        case 12: {
            EXPECT(&f, OCR_PB_LEN, f.field == 11 ? "GraphProto.input" : "GraphProto.output");
            char *name;
            OCR_TRY(value_info_name(&f, &name));
            if (f.field == 11) PUSH(m->inputs, m->ninputs, cin, name);
            else PUSH(m->outputs, m->noutputs, cout, name);
            break;
        }
        default: break;
        }
    }
    return rc < 0 ? OCR_ERR_FORMAT : OCR_OK;
}

static ocr_status_t parse_opset(OcrOnnxModel *m, const OcrPbField *of) {
    OcrPbReader r = {of->data, of->data + of->len, "an OperatorSetIdProto"};
    OcrPbField f;
    int default_domain = 1;
    int64_t version = 0;
    NEXT_OR_FAIL(&r, &f, rc) {
        if (f.field == 1) {
            EXPECT(&f, OCR_PB_LEN, "OperatorSetIdProto.domain");
            default_domain = f.len == 0 || (f.len == 7 && memcmp(f.data, "ai.onnx", 7) == 0);
        } else if (f.field == 2) {
            EXPECT(&f, OCR_PB_VARINT, "OperatorSetIdProto.version");
            version = (int64_t)f.value;
        }
    }
    if (rc < 0) return OCR_ERR_FORMAT;
    if (default_domain) m->opset = version;
    return OCR_OK;
}

// StringStringEntryProto {1: key, 2: value} of ModelProto.metadata_props (PaddleOCR's exports
// keep the dictionary there under "character"). A repeated key keeps its last value, as
// onnx.load's dict does.
static ocr_status_t parse_metadata(OcrOnnxModel *m, const OcrPbField *mf, int *cap) {
    OcrPbReader r = {mf->data, mf->data + mf->len, "a StringStringEntryProto (metadata_props)"};
    OcrPbField f;
    char *key = NULL, *value = NULL;
    int rc;
    while ((rc = ocr_pb_next(&r, &f)) > 0) {
        if (f.field != 1 && f.field != 2) continue;
        if (f.wire != OCR_PB_LEN) {
            free(key);
            free(value);
            return wire_error(&f, OCR_PB_LEN, f.field == 1 ? "StringStringEntryProto.key" : "StringStringEntryProto.value");
        }
        char **dst = f.field == 1 ? &key : &value;
        free(*dst);
        *dst = dup_bytes(&f);
        if (!*dst) {
            free(key);
            free(value);
            return ocr_set_error(OCR_ERR_OOM, "out of host memory");
        }
    }
    if (rc < 0 || !key) {
        free(key);
        free(value);
        return rc < 0 ? OCR_ERR_FORMAT : ocr_set_error(OCR_ERR_FORMAT, "a metadata_props entry without a key");
    }
    if (!value) value = strdup("");
    for (int i = 0; i < m->nmeta; i++) {
        if (strcmp(m->meta_keys[i], key) == 0) {
            free(key);
            free(m->meta_values[i]);
            m->meta_values[i] = value;
            return value ? OCR_OK : ocr_set_error(OCR_ERR_OOM, "out of host memory");
        }
    }
    if (!value) {
        free(key);
        return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    }
    if (m->nmeta == *cap) {
        int nc = *cap ? 2 * *cap : 4;
        char **nk = realloc(m->meta_keys, (size_t)nc * sizeof *nk);
        if (nk) m->meta_keys = nk;
        char **nv = nk ? realloc(m->meta_values, (size_t)nc * sizeof *nv) : NULL;
        if (nv) m->meta_values = nv;
        if (!nk || !nv) {
            free(key);
            free(value);
            return ocr_set_error(OCR_ERR_OOM, "out of host memory");
        }
        *cap = nc;
    }
    m->meta_keys[m->nmeta] = key;
    m->meta_values[m->nmeta++] = value;
    return OCR_OK;
}

static ocr_status_t parse_model(OcrOnnxModel *m, const uint8_t *data, size_t size) {
    OcrPbReader r = {data, data + size, "the ModelProto"};
    OcrPbField f;
    int have_graph = 0, meta_cap = 0;
    NEXT_OR_FAIL(&r, &f, rc) {
        switch (f.field) {
        case 1: EXPECT(&f, OCR_PB_VARINT, "ModelProto.ir_version"); m->ir_version = (int64_t)f.value; break;
        case 2:
            EXPECT(&f, OCR_PB_LEN, "ModelProto.producer_name");
            free(m->producer);
            m->producer = dup_bytes(&f);
            break;
        case 7:
            EXPECT(&f, OCR_PB_LEN, "ModelProto.graph");
            if (have_graph) return ocr_set_error(OCR_ERR_FORMAT, "more than one graph");
            OCR_TRY(parse_graph(m, f.data, f.len));
            have_graph = 1;
            break;
        case 8: EXPECT(&f, OCR_PB_LEN, "ModelProto.opset_import"); OCR_TRY(parse_opset(m, &f)); break;
        case 14: EXPECT(&f, OCR_PB_LEN, "ModelProto.metadata_props"); OCR_TRY(parse_metadata(m, &f, &meta_cap)); break;
        default: break;
        }
    }
    if (rc < 0) return OCR_ERR_FORMAT;
    if (!have_graph) return ocr_set_error(OCR_ERR_FORMAT, "no graph (is this an ONNX model?)");
    if (m->ir_version <= 0) return ocr_set_error(OCR_ERR_FORMAT, "no ir_version (is this an ONNX model?)");
    return OCR_OK;
}

ocr_status_t ocr_onnx_parse(OcrOnnxModel **out, const uint8_t *data, size_t size, const char *name) {
    *out = NULL;
    OcrOnnxModel *m = calloc(1, sizeof *m);
    if (!m) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    ocr_status_t st = parse_model(m, data, size);
    if (st != OCR_OK) {
        ocr_wrap_error(st, "%s: not a readable ONNX model", name);
        ocr_onnx_free(m);
        return st;
    }
    *out = m;
    return OCR_OK;
}

ocr_status_t ocr_onnx_load(OcrOnnxModel **out, const char *path) {
    char *data;
    size_t size;
    *out = NULL;
    OCR_TRY(ocr_read_file(path, &data, &size));
    ocr_status_t st = ocr_onnx_parse(out, (const uint8_t *)data, size, path);
    free(data);
    return st;
}

void ocr_onnx_free(OcrOnnxModel *m) {
    if (!m) return;
    for (int i = 0; i < m->nnodes; i++) node_free(&m->nodes[i]);
    free(m->nodes);
    for (int i = 0; i < m->ninits; i++) tensor_free(&m->inits[i]);
    free(m->inits);
    for (int i = 0; i < m->ninputs; i++) free(m->inputs[i]);
    for (int i = 0; i < m->noutputs; i++) free(m->outputs[i]);
    free(m->inputs);
    free(m->outputs);
    free(m->producer);
    for (int i = 0; i < m->nmeta; i++) {
        free(m->meta_keys[i]);
        free(m->meta_values[i]);
    }
    free(m->meta_keys);
    free(m->meta_values);
    free(m);
}

const char *ocr_onnx_metadata(const OcrOnnxModel *m, const char *key) {
    for (int i = 0; i < m->nmeta; i++)
        if (strcmp(m->meta_keys[i], key) == 0) return m->meta_values[i];
    return NULL;
}

const OcrOnnxAttr *ocr_onnx_attr(const OcrOnnxNode *n, const char *name) {
    for (int i = 0; i < n->nattrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

const OcrOnnxTensor *ocr_onnx_constant(const OcrOnnxModel *m, const char *name) {
    for (int i = 0; i < m->ninits; i++)
        if (m->inits[i].name && strcmp(m->inits[i].name, name) == 0) return &m->inits[i];
    for (int i = 0; i < m->nnodes; i++) {
        const OcrOnnxNode *n = &m->nodes[i];
        if (strcmp(n->op_type, "Constant") != 0 || n->noutputs < 1 || strcmp(n->outputs[0], name) != 0) continue;
        const OcrOnnxAttr *v = ocr_onnx_attr(n, "value");
        return v ? v->t : NULL;
    }
    return NULL;
}

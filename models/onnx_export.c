// ocrtrain networks → ONNX (see onnx_export.h): a protobuf writer of our own and a walk over the
// built layers that emits, per layer, the nodes paddle2onnx writes for PaddleOCR's.
#include "models/onnx_export.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytebuf.h"
#include "core/fileio.h"
#include "models/onnx.h"

// ---- protobuf wire format: a growable buffer ---------------------------------------------------------
// Nested messages are written into their own buffer and appended with their length, so every
// length is known when it is written (no back-patching).

typedef OcrByteBuf Pb;

static void pb_raw(Pb *b, const void *d, size_t n) { ocr_bytebuf_append(b, d, n); }

static void pb_varint(Pb *b, uint64_t v) {
    uint8_t q[10];
    int n = 0;
    do {
        q[n] = (uint8_t)(v & 0x7F);
        v >>= 7;
        if (v) q[n] |= 0x80;
        n++;
    } while (v);
    pb_raw(b, q, (size_t)n);
}

static void pb_tag(Pb *b, uint32_t field, int wire) { pb_varint(b, ((uint64_t)field << 3) | (uint64_t)wire); }

// int64 fields are varints of the two's-complement value (negative numbers take 10 bytes).
static void pb_int(Pb *b, uint32_t field, int64_t v) {
    pb_tag(b, field, OCR_PB_VARINT);
    pb_varint(b, (uint64_t)v);
}

static void pb_len(Pb *b, uint32_t field, const void *d, size_t n) {
    pb_tag(b, field, OCR_PB_LEN);
    pb_varint(b, n);
    pb_raw(b, d, n);
}

static void pb_str(Pb *b, uint32_t field, const char *s) { pb_len(b, field, s, strlen(s)); }

static void pb_float(Pb *b, uint32_t field, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint8_t q[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
    pb_tag(b, field, OCR_PB_I32);
    pb_raw(b, q, 4);
}

// Appends `sub` as a length-delimited field and frees it.
static void pb_msg(Pb *b, uint32_t field, Pb *sub) {
    if (sub->oom) b->oom = 1;
    pb_len(b, field, sub->p, sub->n);
    free(sub->p);
    memset(sub, 0, sizeof *sub);
}

// ---- ONNX field numbers (onnx.proto) ---------------------------------------------------------------------
enum { MODEL_IR = 1, MODEL_PRODUCER = 2, MODEL_PRODUCER_VERSION = 3, MODEL_GRAPH = 7, MODEL_OPSET = 8, MODEL_META = 14 };
enum { OPSET_DOMAIN = 1, OPSET_VERSION = 2 };
enum { GRAPH_NODE = 1, GRAPH_NAME = 2, GRAPH_INIT = 5, GRAPH_INPUT = 11, GRAPH_OUTPUT = 12 };
enum { NODE_INPUT = 1, NODE_OUTPUT = 2, NODE_NAME = 3, NODE_OP = 4, NODE_ATTR = 5 };
enum { ATTR_NAME = 1, ATTR_F = 2, ATTR_I = 3, ATTR_INTS = 8, ATTR_TYPE = 20 };
enum { TENSOR_DIMS = 1, TENSOR_TYPE = 2, TENSOR_NAME = 8, TENSOR_RAW = 9 };
enum { VI_NAME = 1, VI_TYPE = 2, TYPE_TENSOR = 1, TT_ELEM = 1, TT_SHAPE = 2, SHAPE_DIM = 1, DIM_VALUE = 1, DIM_PARAM = 2 };
enum { KV_KEY = 1, KV_VALUE = 2 };

// ---- the graph being written -----------------------------------------------------------------------------

#define NAME_MAX_LEN 256
#define MAX_CONSTS 128

typedef struct {
    Pb nodes, inits;
    int nnodes, ninits;
    int64_t values;
    OcrParamTable params, stats;  // host copies
    const OcrOpTable *ops;
    int h;     // the map height at the current point of the walk (H is static, W dynamic)
    int wdiv;  // the product of the width strides so far: the map is W / wdiv wide
    int fold_bn;  // OcrOnnxExportOptions.fold_bn
    char *consts[MAX_CONSTS];  // names of the shared integer/scalar constants already written
    int nconsts;
    ocr_status_t st;  // the first failure (OOM, an unsupported layer); the walk stops writing after it
} Ex;

static int ex_ok(const Ex *e) { return e->st == OCR_OK && !e->nodes.oom && !e->inits.oom; }

static void ex_fail(Ex *e, ocr_status_t st, const char *msg) {
    if (e->st == OCR_OK) e->st = ocr_set_error(st, "%s", msg);
}

static void init_tensor(Ex *e, const char *name, int ndim, const int64_t *dims, int dtype, const void *raw, size_t bytes) {
    Pb t = {0};
    for (int i = 0; i < ndim; i++) pb_int(&t, TENSOR_DIMS, dims[i]);
    pb_int(&t, TENSOR_TYPE, dtype);
    pb_str(&t, TENSOR_NAME, name);
    pb_len(&t, TENSOR_RAW, raw, bytes);  // little-endian, as x86-64 and ONNX store it
    pb_msg(&e->inits, GRAPH_INIT, &t);
    e->ninits++;
}

static void init_f32(Ex *e, const char *name, int ndim, const int64_t *dims, const float *data) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= dims[i];
    init_tensor(e, name, ndim, dims, OCR_ONNX_FLOAT, data, (size_t)n * sizeof(float));
    e->values += n;
}

static int const_seen(Ex *e, const char *name) {
    for (int i = 0; i < e->nconsts; i++)
        if (strcmp(e->consts[i], name) == 0) return 1;
    if (e->nconsts == MAX_CONSTS) {
        ex_fail(e, OCR_ERR_INTERNAL, "ONNX export: more shared constants than the exporter keeps");
        return 1;
    }
    e->consts[e->nconsts] = strdup(name);
    if (!e->consts[e->nconsts]) {
        ex_fail(e, OCR_ERR_OOM, "out of host memory");
        return 1;
    }
    e->nconsts++;
    return 0;
}

// A shared int64 vector constant ("const.shape.0_-1_120"), written once; its name into out.
static const char *const_i64(Ex *e, const char *kind, int n, const int64_t *v, int scalar, char *out) {
    int k = snprintf(out, NAME_MAX_LEN, "const.%s.", kind);
    for (int i = 0; i < n && k < NAME_MAX_LEN; i++) k += snprintf(out + k, (size_t)(NAME_MAX_LEN - k), i ? "_%lld" : "%lld", (long long)v[i]);
    if (!const_seen(e, out)) {
        int64_t dims[1] = {n};
        init_tensor(e, out, scalar ? 0 : 1, dims, OCR_ONNX_INT64, v, (size_t)n * sizeof(int64_t));
    }
    return out;
}

typedef struct {
    Pb pb;
} Node;

static void node_begin(Node *n, const char *op, const char *name) {
    memset(n, 0, sizeof *n);
    pb_str(&n->pb, NODE_OP, op);
    pb_str(&n->pb, NODE_NAME, name);
}
static void node_in(Node *n, const char *t) { pb_str(&n->pb, NODE_INPUT, t); }
static void node_out(Node *n, const char *t) { pb_str(&n->pb, NODE_OUTPUT, t); }
static void attr_int(Node *n, const char *name, int64_t v) {
    Pb a = {0};
    pb_str(&a, ATTR_NAME, name);
    pb_int(&a, ATTR_I, v);
    pb_int(&a, ATTR_TYPE, 2);  // INT
    pb_msg(&n->pb, NODE_ATTR, &a);
}
static void attr_float(Node *n, const char *name, float v) {
    Pb a = {0};
    pb_str(&a, ATTR_NAME, name);
    pb_float(&a, ATTR_F, v);
    pb_int(&a, ATTR_TYPE, 1);  // FLOAT
    pb_msg(&n->pb, NODE_ATTR, &a);
}
static void attr_ints(Node *n, const char *name, int count, const int64_t *v) {
    Pb a = {0};
    pb_str(&a, ATTR_NAME, name);
    for (int i = 0; i < count; i++) pb_int(&a, ATTR_INTS, v[i]);
    pb_int(&a, ATTR_TYPE, 7);  // INTS
    pb_msg(&n->pb, NODE_ATTR, &a);
}
static void node_end(Ex *e, Node *n) {
    pb_msg(&e->nodes, GRAPH_NODE, &n->pb);
    e->nnodes++;
}

// One-input, one-output node without attributes.
static void node1(Ex *e, const char *op, const char *name, const char *in, const char *out) {
    Node n;
    node_begin(&n, op, name);
    node_in(&n, in);
    node_out(&n, out);
    node_end(e, &n);
}
static void node2(Ex *e, const char *op, const char *name, const char *a, const char *b, const char *out) {
    Node n;
    node_begin(&n, op, name);
    node_in(&n, a);
    node_in(&n, b);
    node_out(&n, out);
    node_end(e, &n);
}

// ---- weights -----------------------------------------------------------------------------------------------

// Parameter i of a host table as float32 (malloc'd; NULL and e->st set on OOM).
static float *param_f32(Ex *e, const OcrParamTable *t, int i) {
    float *d = malloc((size_t)t->items[i].numel * sizeof(float));
    if (!d) {
        ex_fail(e, OCR_ERR_OOM, "out of host memory");
        return NULL;
    }
    OcrTensor v = ocr_params_tensor(t, i);
    ocr_tensor_to_f32(&v, d);
    return d;
}

// A parameter as an initializer named after it, in its own shape.
static const char *init_param(Ex *e, const OcrParamTable *t, int i) {
    float *d = param_f32(e, t, i);
    if (!d) return t->items[i].name;
    init_f32(e, t->items[i].name, t->items[i].ndim, t->items[i].shape, d);
    free(d);
    return t->items[i].name;
}

static const char *op_name(const Ex *e, int op) { return e->ops->items[op].name; }

// ---- layers ------------------------------------------------------------------------------------------------

// A Conv; with `fold` the BN after it folded in (double precision, rounded to f32 once):
// w' = w·γ/√(σ² + ε), b' = β + (b − μ)·γ/√(σ² + ε). `pads` (top, left, bottom, right; NULL:
// the layer's own, symmetric) carries a pad layer in front of it (PPLCNetV4's SAME 2x2 convs).
static void conv_pads(Ex *e, const LConv *l, const LBN *fold, const int *pads, const char *in, char *out) {
    const OcrParamInfo *w = &e->params.items[l->w];
    // Ours (OC, KH, KW, C/groups) → ONNX's OIHW.
    int64_t oc = w->shape[0], kh = w->shape[1], kw = w->shape[2], cg = w->shape[3];
    float *src = param_f32(e, &e->params, l->w);
    float *dst = malloc((size_t)w->numel * sizeof(float));
    if (!src || !dst) {
        free(src);
        free(dst);
        ex_fail(e, OCR_ERR_OOM, "out of host memory");
        return;
    }
    double *scale = NULL;
    float *bias = NULL;
    if (fold) {
        float *g = param_f32(e, &e->params, fold->g), *be = param_f32(e, &e->params, fold->b);
        float *mu = param_f32(e, &e->stats, fold->mean), *var = param_f32(e, &e->stats, fold->var);
        float *cb = l->b >= 0 ? param_f32(e, &e->params, l->b) : NULL;
        scale = malloc((size_t)oc * sizeof(double));
        bias = malloc((size_t)oc * sizeof(float));
        if (g && be && mu && var && (cb || l->b < 0) && scale && bias) {
            for (int64_t o = 0; o < oc; o++) {
                scale[o] = (double)g[o] / sqrt((double)var[o] + (double)fold->eps);
                bias[o] = (float)((double)be[o] + ((cb ? (double)cb[o] : 0.0) - (double)mu[o]) * scale[o]);
            }
        } else {
            ex_fail(e, OCR_ERR_OOM, "out of host memory");
        }
        free(g);
        free(be);
        free(mu);
        free(var);
        free(cb);
    }
    if (e->st == OCR_OK)
        for (int64_t o = 0; o < oc; o++)
            for (int64_t y = 0; y < kh; y++)
                for (int64_t x = 0; x < kw; x++)
                    for (int64_t c = 0; c < cg; c++) {
                        float v = src[((o * kh + y) * kw + x) * cg + c];
                        dst[((o * cg + c) * kh + y) * kw + x] = scale ? (float)((double)v * scale[o]) : v;
                    }
    char wname[NAME_MAX_LEN], bname[NAME_MAX_LEN];
    snprintf(wname, sizeof wname, "%s%s", w->name, fold ? ".bn_folded" : "");
    snprintf(bname, sizeof bname, "%s.bias.bn_folded", op_name(e, l->op));
    if (e->st == OCR_OK) init_f32(e, wname, 4, (int64_t[]){oc, cg, kh, kw}, dst);
    if (e->st == OCR_OK && fold) init_f32(e, bname, 1, (int64_t[]){oc}, bias);
    free(src);
    free(dst);
    free(scale);
    free(bias);
    snprintf(out, NAME_MAX_LEN, "%s", op_name(e, fold ? fold->op : l->op));
    Node n;
    node_begin(&n, "Conv", out);
    node_in(&n, in);
    node_in(&n, wname);
    if (fold)
        node_in(&n, bname);
    else if (l->b >= 0)
        node_in(&n, init_param(e, &e->params, l->b));
    node_out(&n, out);
    attr_ints(&n, "dilations", 2, (int64_t[]){1, 1});
    attr_int(&n, "group", l->p.groups);
    attr_ints(&n, "kernel_shape", 2, (int64_t[]){kh, kw});
    const int pd[4] = {pads ? pads[0] : l->p.pad_h, pads ? pads[1] : l->p.pad_w, pads ? pads[2] : l->p.pad_h,
                       pads ? pads[3] : l->p.pad_w};
    attr_ints(&n, "pads", 4, (int64_t[]){pd[0], pd[1], pd[2], pd[3]});
    attr_ints(&n, "strides", 2, (int64_t[]){l->p.stride_h, l->p.stride_w});
    node_end(e, &n);
    e->h = (e->h + pd[0] + pd[2] - (int)kh) / l->p.stride_h + 1;
    e->wdiv *= l->p.stride_w;
}

static void conv(Ex *e, const LConv *l, const LBN *fold, const char *in, char *out) { conv_pads(e, l, fold, NULL, in, out); }

static void bn(Ex *e, const LBN *l, const char *in, char *out) {
    snprintf(out, NAME_MAX_LEN, "%s", op_name(e, l->op));
    Node n;
    node_begin(&n, "BatchNormalization", out);
    node_in(&n, in);
    node_in(&n, init_param(e, &e->params, l->g));
    node_in(&n, init_param(e, &e->params, l->b));
    node_in(&n, init_param(e, &e->stats, l->mean));
    node_in(&n, init_param(e, &e->stats, l->var));
    node_out(&n, out);
    attr_float(&n, "epsilon", l->eps);
    attr_float(&n, "momentum", 0.9f);
    node_end(e, &n);
}

static void act(Ex *e, ocr_activation_t a, const char *name, const char *in, char *out) {
    snprintf(out, NAME_MAX_LEN, "%s", name);
    char t[NAME_MAX_LEN];
    Node n;
    switch (a) {
    case OCR_ACT_NONE: snprintf(out, NAME_MAX_LEN, "%s", in); return;
    case OCR_ACT_RELU: node1(e, "Relu", name, in, out); return;
    case OCR_ACT_HARDSWISH: node1(e, "HardSwish", name, in, out); return;
    case OCR_ACT_HARDSIGMOID:
        // Paddle's slope constant, the same float32 our kernel uses.
        node_begin(&n, "HardSigmoid", name);
        node_in(&n, in);
        node_out(&n, out);
        attr_float(&n, "alpha", 0.1666667f);
        attr_float(&n, "beta", 0.5f);
        node_end(e, &n);
        return;
    case OCR_ACT_SWISH:
        snprintf(t, sizeof t, "%s.sigmoid", name);
        node1(e, "Sigmoid", t, in, t);
        node2(e, "Mul", name, in, t, out);
        return;
    case OCR_ACT_GELU: {
        // x · (1 + erf(x / √2)) / 2, the exact GELU (Paddle's nn.GELU default), in ops of opset 9.
        static const float k_sqrt2 = 1.41421356f, k_one = 1.0f, k_half = 0.5f;
        static const char *const kn[3] = {"gelu.sqrt2", "gelu.one", "gelu.half"};
        const float *kv[3] = {&k_sqrt2, &k_one, &k_half};
        for (int i = 0; i < 3; i++)
            if (!const_seen(e, kn[i])) init_f32(e, kn[i], 0, NULL, kv[i]);
        char d[NAME_MAX_LEN], er[NAME_MAX_LEN], p1[NAME_MAX_LEN], xm[NAME_MAX_LEN];
        snprintf(d, sizeof d, "%s.div", name);
        snprintf(er, sizeof er, "%s.erf", name);
        snprintf(p1, sizeof p1, "%s.add", name);
        snprintf(xm, sizeof xm, "%s.mul", name);
        node2(e, "Div", d, in, kn[0], d);
        node1(e, "Erf", er, d, er);
        node2(e, "Add", p1, er, kn[1], p1);
        node2(e, "Mul", xm, in, p1, xm);
        node2(e, "Mul", name, xm, kn[2], out);
        return;
    }
    default: {
        char msg[300];
        snprintf(msg, sizeof msg, "ONNX export: %s: activation %d has no ONNX form here", name, (int)a);
        ex_fail(e, OCR_ERR_UNSUPPORTED, msg);
    }
    }
}

static void lab(Ex *e, const LLab *l, const char *in, char *out) {
    char m[NAME_MAX_LEN];
    snprintf(m, sizeof m, "%s.mul", op_name(e, l->op));
    snprintf(out, NAME_MAX_LEN, "%s", op_name(e, l->op));
    node2(e, "Mul", m, in, init_param(e, &e->params, l->s), m);
    node2(e, "Add", out, m, init_param(e, &e->params, l->b), out);
}

static void convbn(Ex *e, const ConvBN *l, const char *in, char *out) {
    char c[NAME_MAX_LEN], b[NAME_MAX_LEN];
    if (e->fold_bn) {
        conv(e, &l->conv, &l->bn, in, b);
    } else {
        conv(e, &l->conv, NULL, in, c);
        bn(e, &l->bn, c, b);
    }
    if (l->has_act)
        act(e, l->act.act, op_name(e, l->act.op), b, out);
    else
        snprintf(out, NAME_MAX_LEN, "%s", b);
}

static void se(Ex *e, const SEBlock *l, const char *in, char *out) {
    char p[NAME_MAX_LEN], c1[NAME_MAX_LEN], r[NAME_MAX_LEN], c2[NAME_MAX_LEN], g[NAME_MAX_LEN];
    snprintf(p, sizeof p, "%s", op_name(e, l->pool.op));
    node1(e, "GlobalAveragePool", p, in, p);
    int h = e->h;
    conv(e, &l->conv1, NULL, p, c1);
    act(e, OCR_ACT_RELU, op_name(e, l->relu.op), c1, r);
    conv(e, &l->conv2, NULL, r, c2);
    act(e, OCR_ACT_HARDSIGMOID, op_name(e, l->hsig.op), c2, g);
    e->h = h;  // the 1×1 convs ran on the pooled map
    snprintf(out, NAME_MAX_LEN, "%s", op_name(e, l->mul.op));
    node2(e, "Mul", out, in, g, out);
}

static void rep(Ex *e, const RepLayer *l, const char *in, char *out) {
    char c[NAME_MAX_LEN], a[NAME_MAX_LEN], h[NAME_MAX_LEN];
    OCR_ASSERT(l->deploy, "the export fuses rep layers first");
    conv(e, &l->reparam, NULL, in, c);
    lab(e, &l->lab, c, a);
    act(e, OCR_ACT_HARDSWISH, op_name(e, l->act.op), a, h);
    lab(e, &l->act_lab, h, out);
}

static void pool(Ex *e, const LPool *l, int avg, const char *in, char *out) {
    snprintf(out, NAME_MAX_LEN, "%s", op_name(e, l->op));
    Node n;
    node_begin(&n, avg ? "AveragePool" : "MaxPool", out);
    node_in(&n, in);
    node_out(&n, out);
    attr_int(&n, "ceil_mode", 0);
    if (avg) attr_int(&n, "count_include_pad", 0);
    attr_ints(&n, "kernel_shape", 2, (int64_t[]){l->p.kernel_h, l->p.kernel_w});
    attr_ints(&n, "pads", 4, (int64_t[]){l->p.pad_h, l->p.pad_w, l->p.pad_h, l->p.pad_w});
    attr_ints(&n, "strides", 2, (int64_t[]){l->p.stride_h, l->p.stride_w});
    node_end(e, &n);
    e->h = (e->h + 2 * l->p.pad_h - l->p.kernel_h) / l->p.stride_h + 1;
    e->wdiv *= l->p.stride_w;
}

static void layernorm(Ex *e, const LLN *l, const char *in, char *out) {
    snprintf(out, NAME_MAX_LEN, "%s", op_name(e, l->op));
    Node n;
    node_begin(&n, "LayerNormalization", out);
    node_in(&n, in);
    node_in(&n, init_param(e, &e->params, l->g));
    node_in(&n, init_param(e, &e->params, l->b));
    node_out(&n, out);
    attr_int(&n, "axis", -1);
    attr_float(&n, "epsilon", l->eps);
    node_end(e, &n);
}

static void linear(Ex *e, const LLinear *l, const char *in, char *out) {
    char m[NAME_MAX_LEN];
    snprintf(m, sizeof m, "%s.matmul", op_name(e, l->op));
    snprintf(out, NAME_MAX_LEN, "%s", op_name(e, l->op));
    // Paddle's (in, out) layout is MatMul's right operand as it is.
    node2(e, "MatMul", m, in, init_param(e, &e->params, l->w), m);
    if (l->b >= 0)
        node2(e, "Add", out, m, init_param(e, &e->params, l->b), out);
    else
        snprintf(out, NAME_MAX_LEN, "%s", m);
}

static void reshape(Ex *e, const char *name, const char *in, int n, const int64_t *shape, char *out) {
    char s[NAME_MAX_LEN];
    snprintf(out, NAME_MAX_LEN, "%s", name);
    node2(e, "Reshape", name, in, const_i64(e, "shape", n, shape, 0, s), out);
}

static void transpose(Ex *e, const char *name, const char *in, int n, const int64_t *perm, char *out) {
    snprintf(out, NAME_MAX_LEN, "%s", name);
    Node nd;
    node_begin(&nd, "Transpose", name);
    node_in(&nd, in);
    node_out(&nd, out);
    attr_ints(&nd, "perm", n, perm);
    node_end(e, &nd);
}

// Multi-head self-attention of PaddleOCR's Attention (global mixer): qkv (B, T, 3C) → (B, T, C).
static void attention(Ex *e, const LAttn *l, const char *qkv, char *out) {
    const char *base = op_name(e, l->op);
    int heads = l->heads, hd = l->dim / l->heads;
    char nm[NAME_MAX_LEN], r[NAME_MAX_LEN], t[NAME_MAX_LEN], q[NAME_MAX_LEN], k[NAME_MAX_LEN], v[NAME_MAX_LEN];
    char qs[NAME_MAX_LEN], kt[NAME_MAX_LEN], sc[NAME_MAX_LEN], p[NAME_MAX_LEN], o[NAME_MAX_LEN], ot[NAME_MAX_LEN];
    snprintf(nm, sizeof nm, "%s.split_heads", base);
    reshape(e, nm, qkv, 5, (int64_t[]){0, -1, 3, heads, hd}, r);
    snprintf(nm, sizeof nm, "%s.qkv_first", base);
    transpose(e, nm, r, 5, (int64_t[]){2, 0, 3, 1, 4}, t);  // (3, B, heads, T, hd)
    char *dst[3] = {q, k, v};
    static const char *const part[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++) {
        char idx[NAME_MAX_LEN];
        snprintf(dst[i], NAME_MAX_LEN, "%s.%s", base, part[i]);
        Node n;
        node_begin(&n, "Gather", dst[i]);
        node_in(&n, t);
        node_in(&n, const_i64(e, "index", 1, (int64_t[]){i}, 1, idx));
        node_out(&n, dst[i]);
        attr_int(&n, "axis", 0);
        node_end(e, &n);
    }
    // q · scale before the product, as PaddleOCR computes it.
    snprintf(sc, sizeof sc, "%s.scale", base);
    if (!const_seen(e, sc)) init_f32(e, sc, 0, NULL, &l->scale);
    snprintf(qs, sizeof qs, "%s.q_scaled", base);
    node2(e, "Mul", qs, q, sc, qs);
    snprintf(nm, sizeof nm, "%s.k_t", base);
    transpose(e, nm, k, 4, (int64_t[]){0, 1, 3, 2}, kt);
    snprintf(nm, sizeof nm, "%s.scores", base);
    node2(e, "MatMul", nm, qs, kt, nm);
    snprintf(p, sizeof p, "%s.softmax", base);
    Node n;
    node_begin(&n, "Softmax", p);
    node_in(&n, nm);
    node_out(&n, p);
    attr_int(&n, "axis", -1);
    node_end(e, &n);
    snprintf(o, sizeof o, "%s.context", base);
    node2(e, "MatMul", o, p, v, o);
    snprintf(nm, sizeof nm, "%s.merge_heads", base);
    transpose(e, nm, o, 4, (int64_t[]){0, 2, 1, 3}, ot);
    snprintf(nm, sizeof nm, "%s", base);
    reshape(e, nm, ot, 3, (int64_t[]){0, -1, l->dim}, out);
}

static void svtr_block(Ex *e, const SvtrBlock *l, const char *in, char *out) {
    char a[NAME_MAX_LEN], b[NAME_MAX_LEN], c[NAME_MAX_LEN], d[NAME_MAX_LEN], x1[NAME_MAX_LEN];
    if (l->attn.local_hk) {
        ex_fail(e, OCR_ERR_UNSUPPORTED, "ONNX export: the local attention mixer (SVTRNet) is not exported");
        return;
    }
    layernorm(e, &l->norm1, in, a);
    linear(e, &l->qkv, a, b);
    attention(e, &l->attn, b, c);
    linear(e, &l->proj, c, d);
    snprintf(x1, sizeof x1, "%s", op_name(e, l->add1.op));
    node2(e, "Add", x1, in, d, x1);
    layernorm(e, &l->norm2, x1, a);
    linear(e, &l->fc1, a, b);
    act(e, l->act.act, op_name(e, l->act.op), b, c);
    linear(e, &l->fc2, c, d);
    snprintf(out, NAME_MAX_LEN, "%s", op_name(e, l->add2.op));
    node2(e, "Add", out, x1, d, out);
}

// EncoderWithSVTR on the backbone map x (B, C, 1, W) → (B, dims, 1, W).
static void svtr_neck(Ex *e, const SvtrNeck *l, const char *x, char *out) {
    char a[NAME_MAX_LEN], b[NAME_MAX_LEN], nm[NAME_MAX_LEN];
    const char *base = op_name(e, l->conv1.conv.op);  // "...encoder.conv1.conv"
    convbn(e, &l->conv1, x, a);
    convbn(e, &l->conv2, a, b);
    // (B, C, 1, W) → (B, W, C): flatten(2) + transpose, as PaddleOCR's forward.
    snprintf(nm, sizeof nm, "%s.flatten", base);
    reshape(e, nm, b, 3, (int64_t[]){0, l->s.hidden, -1}, a);
    snprintf(nm, sizeof nm, "%s.tokens", base);
    transpose(e, nm, a, 3, (int64_t[]){0, 2, 1}, b);
    for (int i = 0; i < l->s.depth && ex_ok(e); i++) {
        svtr_block(e, &l->blocks[i], b, a);
        memcpy(b, a, sizeof a);
    }
    layernorm(e, &l->norm, b, a);
    // (B, W, C) → (B, C, 1, W).
    snprintf(nm, sizeof nm, "%s.channels_first", op_name(e, l->norm.op));
    transpose(e, nm, a, 3, (int64_t[]){0, 2, 1}, b);
    snprintf(nm, sizeof nm, "%s.map", op_name(e, l->norm.op));
    reshape(e, nm, b, 4, (int64_t[]){0, l->s.hidden, 1, -1}, a);
    convbn(e, &l->conv3, a, b);
    snprintf(a, sizeof a, "%s", op_name(e, l->cat.op));
    Node n;
    node_begin(&n, "Concat", a);
    node_in(&n, x);  // [shortcut, conv3], PaddleOCR's order
    node_in(&n, b);
    node_out(&n, a);
    attr_int(&n, "axis", 1);
    node_end(e, &n);
    convbn(e, &l->conv4, a, b);
    convbn(e, &l->conv1x1, b, out);
}

// Im2Seq + CTC head + softmax: (B, C, 1, W) → (B, W, classes) probabilities, the graph output.
static void ctc_head(Ex *e, const CtcHead *l, const char *x, const char *output) {
    char a[NAME_MAX_LEN], b[NAME_MAX_LEN], nm[NAME_MAX_LEN], ax[NAME_MAX_LEN];
    const char *base = op_name(e, l->softmax.op);
    snprintf(nm, sizeof nm, "%s.im2seq", base);
    node2(e, "Squeeze", nm, x, const_i64(e, "axes", 1, (int64_t[]){2}, 0, ax), nm);
    snprintf(a, sizeof a, "%s.im2seq_t", base);
    transpose(e, a, nm, 3, (int64_t[]){0, 2, 1}, b);
    if (l->mid <= 0) {
        linear(e, &l->fc, b, a);
    } else {
        linear(e, &l->fc1, b, a);
        linear(e, &l->fc2, a, b);
        memcpy(a, b, sizeof a);
    }
    Node n;
    node_begin(&n, "Softmax", base);
    node_in(&n, a);
    node_out(&n, output);
    attr_int(&n, "axis", 2);
    node_end(e, &n);
}

// ---- PP-OCRv6: PPLCNetV4, the LightSVTR neck, the guide layer ------------------------------------------------

// Conv2D_BN / ConvBNAct: the fused conv with bias (deploy form) or conv + BN, then the activation.
static void v4convbn(Ex *e, const V4ConvBN *l, const int *pads, const char *in, char *out) {
    char c[NAME_MAX_LEN];
    if (!l->deploy) {
        if (pads) {
            ex_fail(e, OCR_ERR_INTERNAL, "ONNX export: a padded training-form Conv2D_BN (the export fuses first)");
            return;
        }
        convbn(e, &l->cb, in, out);
        return;
    }
    conv_pads(e, &l->conv, NULL, pads, in, c);
    if (l->has_act)
        act(e, l->act.act, op_name(e, l->act.op), c, out);
    else
        snprintf(out, NAME_MAX_LEN, "%s", c);
}

// StemBlock's max pool of x1 (PPLCNetV4 small/medium, PPHGNetV2): the -inf pad layer's pads go
// into the MaxPool's (they never win the maximum). Its output must match the conv branch's size
// (h1, the rows after stem1), as the Concat that follows needs.
static void stem_maxpool(Ex *e, const LPool *pool, const LPad *pp, const char *in, const char *out, int h1) {
    Node n;
    node_begin(&n, "MaxPool", out);
    node_in(&n, in);
    node_out(&n, out);
    attr_int(&n, "ceil_mode", 0);
    attr_ints(&n, "kernel_shape", 2, (int64_t[]){pool->p.kernel_h, pool->p.kernel_w});
    attr_ints(&n, "pads", 4, (int64_t[]){pp->top, pp->left, pp->bottom, pp->right});
    attr_ints(&n, "strides", 2, (int64_t[]){pool->p.stride_h, pool->p.stride_w});
    node_end(e, &n);
    if (e->h != h1 || pool->p.stride_h != 1 || pool->p.stride_w != 1)
        ex_fail(e, OCR_ERR_INTERNAL, "ONNX export: StemBlock's branches differ in size");
}

static void lcnet4(Ex *e, const Lcnet4 *m, const char *x, char *out) {
    char a[NAME_MAX_LEN], b[NAME_MAX_LEN], c[NAME_MAX_LEN], d[NAME_MAX_LEN];
    if (!m->branch_stem) {
        v4convbn(e, &m->stem[0], NULL, x, a);
        act(e, m->stem_gelu.act, op_name(e, m->stem_gelu.op), a, b);
        v4convbn(e, &m->stem[1], NULL, b, a);
    } else {
        // StemBlock: the pad layers go into the 2x2 convs' and the max pool's pads (0 before,
        // 1 after: a MaxPool's pads never win the maximum, as the -inf pad layer).
        const LPad *p2a = &m->pad2a, *p2b = &m->pad2b, *pp = &m->pad_pool;
        const int pa[4] = {p2a->top, p2a->left, p2a->bottom, p2a->right}, pb[4] = {p2b->top, p2b->left, p2b->bottom, p2b->right};
        v4convbn(e, &m->stem[0], NULL, x, a);  // x1
        int h1 = e->h;
        v4convbn(e, &m->stem[1], pa, a, b);
        v4convbn(e, &m->stem[2], pb, b, c);  // x2
        snprintf(d, sizeof d, "%s", op_name(e, m->stem_pool.op));
        stem_maxpool(e, &m->stem_pool, pp, a, d, h1);
        Node n;
        snprintf(b, sizeof b, "%s", op_name(e, m->stem_cat.op));
        node_begin(&n, "Concat", b);
        node_in(&n, d);  // paddle.concat([pooled x1, x2]), PaddleOCR's order
        node_in(&n, c);
        node_out(&n, b);
        attr_int(&n, "axis", 1);
        node_end(e, &n);
        v4convbn(e, &m->stem[3], NULL, b, c);
        v4convbn(e, &m->stem[4], NULL, c, a);
    }
    for (int i = 0; i < m->nblocks && ex_ok(e); i++) {
        const V4Block *k = &m->blocks[i];
        if (k->use_rep) {
            if (!k->rep.deploy) {
                ex_fail(e, OCR_ERR_INTERNAL, "ONNX export: a training-form RepDWConv (the export fuses first)");
                return;
            }
            conv(e, &k->rep.reparam, NULL, a, b);
        } else {
            v4convbn(e, &k->dw, NULL, a, b);
        }
        if (k->use_se) {
            se(e, &k->se, b, c);
            memcpy(b, c, sizeof b);
        }
        v4convbn(e, &k->expand, NULL, b, c);
        v4convbn(e, &k->compress, NULL, c, d);
        if (k->residual) {
            snprintf(a, sizeof a, "%s", op_name(e, k->add.op));
            node2(e, "Add", a, b, d, a);
        } else {
            memcpy(a, d, sizeof a);
        }
    }
    // The inference pool, AvgPool (3, 2), as PaddleOCR's export (our forward uses it for maps
    // 3..5 rows high).
    if (ex_ok(e) && (e->h < 3 || e->h > 5)) {
        char msg[300];
        snprintf(msg, sizeof msg, "ONNX export: PPLCNetV4 gives a %d-row map here; the exported pool is AvgPool (3, 2), for 3..5 rows",
                 e->h);
        ex_fail(e, OCR_ERR_UNSUPPORTED, msg);
    }
    pool(e, &m->pool, 1, a, out);
}

// EncoderWithLightSVTR on the backbone map x (B, C, 1, W) → (B, dims, 1, W).
static void light_neck(Ex *e, const LightSvtr *l, const char *x, char *out) {
    char a[NAME_MAX_LEN], b[NAME_MAX_LEN], z[NAME_MAX_LEN], nm[NAME_MAX_LEN], sk[NAME_MAX_LEN];
    const char *base = op_name(e, l->add_local.op);
    convbn(e, &l->reduce, x, z);
    convbn(e, &l->local, z, a);
    snprintf(b, sizeof b, "%s", base);
    node2(e, "Add", b, z, a, b);
    // (B, C, 1, W) → (B, W, C).
    snprintf(nm, sizeof nm, "%s.flatten", base);
    reshape(e, nm, b, 3, (int64_t[]){0, l->s.dims, -1}, a);
    snprintf(nm, sizeof nm, "%s.tokens", base);
    transpose(e, nm, a, 3, (int64_t[]){0, 2, 1}, b);
    for (int i = 0; i < l->s.depth && ex_ok(e); i++) {
        svtr_block(e, &l->blocks[i], b, a);
        memcpy(b, a, sizeof a);
    }
    layernorm(e, &l->norm, b, a);
    snprintf(nm, sizeof nm, "%s.channels_first", op_name(e, l->norm.op));
    transpose(e, nm, a, 3, (int64_t[]){0, 2, 1}, b);
    snprintf(nm, sizeof nm, "%s.map", op_name(e, l->norm.op));
    reshape(e, nm, b, 4, (int64_t[]){0, l->s.dims, 1, -1}, a);
    convbn(e, &l->skip, x, sk);
    snprintf(out, NAME_MAX_LEN, "%s", op_name(e, l->add_skip.op));
    node2(e, "Add", out, a, sk, out);
}

// ---- PP-OCRv5 server: PPHGNetV2_B4 (text_rec) ------------------------------------------------------------

// ConvBNAct with the pads of a pad layer in front of it (StemBlock's SAME 2x2 convs), else its own.
static void convbn_pads(Ex *e, const ConvBN *l, const int *pads, const char *in, char *out) {
    char c[NAME_MAX_LEN], b[NAME_MAX_LEN];
    if (e->fold_bn) {
        conv_pads(e, &l->conv, &l->bn, pads, in, b);
    } else {
        conv_pads(e, &l->conv, NULL, pads, in, c);
        bn(e, &l->bn, c, b);
    }
    if (l->has_act)
        act(e, l->act.act, op_name(e, l->act.op), b, out);
    else
        snprintf(out, NAME_MAX_LEN, "%s", b);
}

// A channel Concat (axis 1) of n inputs.
static void concat(Ex *e, const char *name, int n, const char *const *in, char *out) {
    snprintf(out, NAME_MAX_LEN, "%s", name);
    Node nd;
    node_begin(&nd, "Concat", name);
    for (int i = 0; i < n; i++) node_in(&nd, in[i]);
    node_out(&nd, out);
    attr_int(&nd, "axis", 1);
    node_end(e, &nd);
}

// The backbone PaddleOCR's inference program runs (the classifier it builds is never run, so
// never written): StemBlock, the four stages and AvgPool (3, 2).
static void hgnet2(Ex *e, const Hgnet2 *m, const char *x, char *out) {
    char a[NAME_MAX_LEN], b[NAME_MAX_LEN], c[NAME_MAX_LEN], d[NAME_MAX_LEN];
    const LPad *p2a = &m->pad2a, *p2b = &m->pad2b, *pp = &m->pad_pool;
    const int pa[4] = {p2a->top, p2a->left, p2a->bottom, p2a->right}, pb[4] = {p2b->top, p2b->left, p2b->bottom, p2b->right};
    convbn(e, &m->stem[0], x, a);  // x1
    int h1 = e->h;
    convbn_pads(e, &m->stem[1], pa, a, b);
    convbn_pads(e, &m->stem[2], pb, b, c);  // x2
    // The max pool with the -inf pad layer's pads (a MaxPool's pads never win the maximum).
    snprintf(d, sizeof d, "%s", op_name(e, m->stem_pool.op));
    stem_maxpool(e, &m->stem_pool, pp, a, d, h1);
    const char *two[2] = {d, c};  // paddle.concat([pooled x1, x2]), PaddleOCR's order
    concat(e, op_name(e, m->stem_cat.op), 2, two, b);
    convbn(e, &m->stem[3], b, c);
    convbn(e, &m->stem[4], c, a);
    char names[OCR_HGNET2_MAX_LAYERS + 1][NAME_MAX_LEN];
    for (int i = 0; i < 4 && ex_ok(e); i++) {
        const HgStage *st = &m->stages[i];
        convbn(e, &st->downsample, a, b);
        memcpy(a, b, sizeof a);
        for (int j = 0; j < st->nblocks && ex_ok(e); j++) {
            const HgBlock *k = &st->blocks[j];
            const char *in[OCR_HGNET2_MAX_LAYERS + 1];
            snprintf(names[0], NAME_MAX_LEN, "%s", a);
            in[0] = names[0];
            for (int l = 0; l < k->nlayers; l++) {
                const HgLayer *y = &k->layers[l];
                if (!y->light) {
                    convbn(e, &y->conv, names[l], names[l + 1]);
                } else {
                    convbn(e, &y->conv1, names[l], c);
                    convbn(e, &y->conv2, c, names[l + 1]);
                }
                in[l + 1] = names[l + 1];
            }
            concat(e, op_name(e, k->cat.op), k->nlayers + 1, in, b);
            convbn(e, &k->squeeze, b, c);
            convbn(e, &k->excitation, c, d);
            if (k->identity) {
                snprintf(b, sizeof b, "%s", op_name(e, k->add.op));
                node2(e, "Add", b, d, a, b);
                memcpy(a, b, sizeof a);
            } else {
                memcpy(a, d, sizeof a);
            }
        }
    }
    // The inference pool F.avg_pool2d(x, [3, 2]) (our forward uses it for maps 3..5 rows high).
    if (ex_ok(e) && (e->h < 3 || e->h > 5)) {
        char msg[300];
        snprintf(msg, sizeof msg, "ONNX export: PPHGNetV2_B4 gives a %d-row map here; the exported pool is AvgPool (3, 2), for 3..5 rows",
                 e->h);
        ex_fail(e, OCR_ERR_UNSUPPORTED, msg);
    }
    pool(e, &m->pool, 1, a, out);
}

// ---- the model ---------------------------------------------------------------------------------------------

static void value_info(Pb *g, uint32_t field, const char *name, int ndim, const int64_t *dims, const char *const *params) {
    Pb shape = {0}, tt = {0}, type = {0}, vi = {0};
    for (int i = 0; i < ndim; i++) {
        Pb d = {0};
        if (params[i])
            pb_str(&d, DIM_PARAM, params[i]);
        else
            pb_int(&d, DIM_VALUE, dims[i]);
        pb_msg(&shape, SHAPE_DIM, &d);
    }
    pb_int(&tt, TT_ELEM, OCR_ONNX_FLOAT);
    pb_msg(&tt, TT_SHAPE, &shape);
    pb_msg(&type, TYPE_TENSOR, &tt);
    pb_str(&vi, VI_NAME, name);
    pb_msg(&vi, VI_TYPE, &type);
    pb_msg(g, field, &vi);
}

static void ex_free(Ex *e) {
    free(e->nodes.p);
    free(e->inits.p);
    for (int i = 0; i < e->nconsts; i++) free(e->consts[i]);
    if (e->params.items) ocr_params_host_release(&e->params);
    if (e->stats.items) ocr_params_host_release(&e->stats);
}

static ocr_status_t check_exportable(const OcrModel *m) {
    const OcrArch *a = ocr_model_arch(m);
    if (a->backbone == OCR_BACKBONE_SVTRNET)
        return ocr_set_error(OCR_ERR_UNSUPPORTED,
                             "ONNX export: the SVTRNet backbone (algorithm %s) is not exported; PP-OCRv3 (MobileNetV1Enhance) "
                             "and PP-OCRv4 (PPLCNetV3) recognizers are",
                             a->algorithm);
    if (a->backbone == OCR_BACKBONE_HGNETV2 && (a->neck_light || a->head_guide || !a->neck_svtr || a->head_mid > 0))
        return ocr_set_error(OCR_ERR_UNSUPPORTED,
                             "ONNX export: PPHGNetV2_B4 is exported as PP-OCRv5 server (the SVTR neck and a one-layer CTC head)");
    if (a->backbone != OCR_BACKBONE_LCNETV4 && (a->neck_light || a->head_guide))
        return ocr_set_error(OCR_ERR_UNSUPPORTED,
                             "ONNX export: the LightSVTR neck and the guided CTC head are exported with PPLCNetV4 only");
    if (a->backbone == OCR_BACKBONE_LCNETV4 && a->neck_svtr)
        return ocr_set_error(OCR_ERR_UNSUPPORTED, "ONNX export: PPLCNetV4 with the SVTR (not LightSVTR) neck is not exported");
    if (a->in_channels != 3)
        return ocr_set_error(OCR_ERR_UNSUPPORTED, "ONNX export: the network reads %d input channels; the export's x is (N, 3, H, W)",
                             a->in_channels);
    if (a->img_h < 1)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "ONNX export: the model has no input height (RecResizeImg image_shape)");
    return OCR_OK;
}

static ocr_status_t export_walk(const OcrModel *m, const OcrOnnxExportOptions *opt, uint8_t **data, size_t *size,
                                OcrOnnxExportInfo *info) {
    const OcrArch *a = ocr_model_arch(m);
    Ex e;
    memset(&e, 0, sizeof e);
    e.ops = ocr_model_ops((OcrModel *)m);
    ocr_status_t st = ocr_params_host_copy(ocr_model_params((OcrModel *)m), &e.params);
    if (st == OCR_OK) st = ocr_params_host_copy(ocr_model_stats((OcrModel *)m), &e.stats);
    if (st != OCR_OK) {
        ex_free(&e);
        return st;
    }
    e.h = a->img_h;
    e.wdiv = 1;
    e.fold_bn = opt && opt->fold_bn;
    char t[NAME_MAX_LEN], u[NAME_MAX_LEN];
    snprintf(t, sizeof t, "x");
    const Mv1e *mv = ocr_model_layers_mv1e(m);
    const Lcnet *lc = ocr_model_layers_lcnet(m);
    const Lcnet4 *l4 = ocr_model_layers_lcnet4(m);
    const Hgnet2 *hg = ocr_model_layers_hgnet2(m);
    if (hg) {
        hgnet2(&e, hg, t, u);
        memcpy(t, u, sizeof t);
    } else if (l4) {
        lcnet4(&e, l4, t, u);
        memcpy(t, u, sizeof t);
    } else if (mv) {
        convbn(&e, &mv->conv1, t, u);
        for (int i = 0; i < mv->nblocks && ex_ok(&e); i++) {
            const DWSeparable *b = &mv->blocks[i];
            convbn(&e, &b->dw, u, t);
            if (b->use_se) {
                se(&e, &b->se, t, u);
                memcpy(t, u, sizeof t);
            }
            convbn(&e, &b->pw, t, u);
        }
        pool(&e, &mv->pool, mv->pool.kind == LPOOL_AVG, u, t);
    } else {
        convbn(&e, &lc->conv1, t, u);
        for (int i = 0; i < lc->nblocks && ex_ok(&e); i++) {
            const LCBlock *b = &lc->blocks[i];
            rep(&e, &b->dw, u, t);
            if (b->use_se) {
                se(&e, &b->se, t, u);
                memcpy(t, u, sizeof t);
            }
            rep(&e, &b->pw, t, u);
        }
        // The inference pool: PaddleOCR's export writes avg_pool2d [3, 2], which our forward uses
        // for maps 3..5 rows high; other heights need the adaptive pool, which has no fixed form.
        if (e.h < 3 || e.h > 5) {
            char msg[300];
            snprintf(msg, sizeof msg,
                     "ONNX export: PPLCNetV3 at input height %d gives a %d-row map; the exported pool is AvgPool (3, 2), "
                     "for 3..5 rows (heights 48..80)",
                     a->img_h, e.h);
            ex_fail(&e, OCR_ERR_UNSUPPORTED, msg);
        }
        pool(&e, &lc->pool, 1, u, t);
    }
    const LightSvtr *light = ocr_model_layers_light(m);
    if (light && ex_ok(&e)) {
        light_neck(&e, light, t, u);
        memcpy(t, u, sizeof t);
    }
    const CtcGuide *guide = ocr_model_layers_guide(m);
    if (guide && ex_ok(&e)) {
        // The guide layer's Conv1Ds run on the one-row map as (1 x k) Conv2Ds.
        convbn(&e, &guide->dw, t, u);
        convbn(&e, &guide->pw, u, t);
    }
    if (ex_ok(&e) && e.h != 1) {
        char msg[300];
        snprintf(msg, sizeof msg, "ONNX export: at input height %d the backbone's map has %d rows; Im2Seq needs 1", a->img_h, e.h);
        ex_fail(&e, OCR_ERR_INVALID_ARG, msg);
    }
    const SvtrNeck *neck = ocr_model_layers_neck(m);
    if (neck && ex_ok(&e)) {
        svtr_neck(&e, neck, t, u);
        memcpy(t, u, sizeof t);
    }
    static const char *const output = "probs";
    if (ex_ok(&e)) ctc_head(&e, ocr_model_layers_head(m), t, output);
    if (!ex_ok(&e)) {
        st = e.st != OCR_OK ? e.st : ocr_set_error(OCR_ERR_OOM, "out of host memory");
        ex_free(&e);
        return st;
    }

    Pb graph = {0}, model = {0};
    char gname[64];
    snprintf(gname, sizeof gname, "ocrtrain_%s",
             a->backbone == OCR_BACKBONE_MV1E      ? "ppocrv3"
             : a->backbone == OCR_BACKBONE_LCNETV4 ? "ppocrv6"
             : a->backbone == OCR_BACKBONE_HGNETV2 ? "ppocrv5_server"
                                                   : "ppocrv4");
    pb_str(&graph, GRAPH_NAME, gname);
    pb_raw(&graph, e.nodes.p, e.nodes.n);
    pb_raw(&graph, e.inits.p, e.inits.n);
    const char *in_params[4] = {"DynamicDimension.0", NULL, NULL, "DynamicDimension.1"};
    value_info(&graph, GRAPH_INPUT, "x", 4, (int64_t[]){0, 3, a->img_h, 0}, in_params);
    const char *out_params[3] = {"DynamicDimension.0", "DynamicDimension.2", NULL};
    value_info(&graph, GRAPH_OUTPUT, output, 3, (int64_t[]){0, 0, a->num_classes}, out_params);

    pb_int(&model, MODEL_IR, OCR_ONNX_EXPORT_IR);
    pb_str(&model, MODEL_PRODUCER, "ocrtrain");
    pb_str(&model, MODEL_PRODUCER_VERSION, opt && opt->producer_version ? opt->producer_version : "");
    pb_msg(&model, MODEL_GRAPH, &graph);
    Pb opset = {0};
    pb_str(&opset, OPSET_DOMAIN, "");
    pb_int(&opset, OPSET_VERSION, OCR_ONNX_EXPORT_OPSET);
    pb_msg(&model, MODEL_OPSET, &opset);
    if (opt && opt->dictionary) {
        Pb kv = {0};
        pb_str(&kv, KV_KEY, "character");
        pb_str(&kv, KV_VALUE, opt->dictionary);
        pb_msg(&model, MODEL_META, &kv);
    }
    if (info) {
        info->nodes = e.nnodes;
        info->initializers = e.ninits;
        info->values = e.values;
        info->seq_divisor = e.wdiv;
    }
    ex_free(&e);
    if (model.oom) {
        free(model.p);
        return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    }
    *data = model.p;
    *size = model.n;
    return OCR_OK;
}

ocr_status_t ocr_onnx_export_bytes(const OcrModel *m, const OcrOnnxExportOptions *opt, uint8_t **data, size_t *size,
                                   OcrOnnxExportInfo *info) {
    *data = NULL;
    *size = 0;
    if (info) memset(info, 0, sizeof *info);
    OCR_TRY(check_exportable(m));
    const OcrArch *a = ocr_model_arch(m);
    OcrModel *fused = NULL;
    if ((a->backbone == OCR_BACKBONE_LCNETV3 && !a->lcnet.deploy) || (a->backbone == OCR_BACKBONE_LCNETV4 && !a->lcnet4.deploy))
        OCR_TRY(ocr_model_fuse(&fused, m));
    const OcrModel *src = fused ? fused : m;
    ocr_status_t st = export_walk(src, opt, data, size, info);
    if (st == OCR_OK && info) {
        info->fused = fused != NULL;
        info->multihead_ctc = a->multihead.kind != OCR_GUIDE_NONE;
    }
    ocr_model_free(fused);
    return st;
}

ocr_status_t ocr_onnx_export(const OcrModel *m, const OcrOnnxExportOptions *opt, const char *path, OcrOnnxExportInfo *info) {
    uint8_t *data;
    size_t size;
    OCR_TRY(ocr_onnx_export_bytes(m, opt, &data, &size, info));
    ocr_status_t st = ocr_write_file_atomic(path, data, size);
    free(data);
    return st;
}

#include "models/onnx_import.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- what the graph holds, in node order ------------------------------------------------------

typedef struct {
    const OcrOnnxNode *node;
    const OcrOnnxTensor *t[4];  // conv: w, b; bn: scale, bias, mean, var; affine/LN/linear: w, b
} Group;

typedef struct {
    Group *items;
    int n, cap;
} Groups;

static void push(Groups *g, Group x) {
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 64;
        g->items = realloc(g->items, (size_t)g->cap * sizeof *g->items);
        OCR_ASSERT(g->items, "out of host memory");
    }
    g->items[g->n++] = x;
}

typedef struct {
    Groups conv, bn, lab, ln, lin;
    float ln_eps[16];
    int n_ln_eps;
    float attn_scale[16];
    int n_attn_scale;
    const OcrOnnxNode *hsig[16];
    int n_hsig;
    const OcrOnnxNode *avgpool, *concat, *softmax;
    int n_avgpool, n_concat, n_softmax;
} GraphWeights;

static const OcrOnnxNode *producer(const OcrOnnxModel *m, const char *name, int before) {
    for (int i = before - 1; i >= 0; i--)
        for (int k = 0; k < m->nodes[i].noutputs; k++)
            if (strcmp(m->nodes[i].outputs[k], name) == 0) return &m->nodes[i];
    return NULL;
}

// The Add right after node i that consumes its output together with a constant (the bias).
static const OcrOnnxTensor *following_bias(const OcrOnnxModel *m, int i) {
    const char *out = m->nodes[i].outputs[0];
    for (int j = i + 1; j < m->nnodes; j++) {
        const OcrOnnxNode *n = &m->nodes[j];
        if (strcmp(n->op_type, "Constant") == 0) continue;
        if (strcmp(n->op_type, "Add") != 0 || n->ninputs != 2) return NULL;
        int k = strcmp(n->inputs[0], out) == 0 ? 1 : strcmp(n->inputs[1], out) == 0 ? 0 : -1;
        return k < 0 ? NULL : ocr_onnx_constant(m, n->inputs[k]);
    }
    return NULL;
}

static const OcrOnnxTensor *const_input(const OcrOnnxModel *m, const OcrOnnxNode *n, int k) {
    return k < n->ninputs && n->inputs[k][0] ? ocr_onnx_constant(m, n->inputs[k]) : NULL;
}

static int64_t attr_int(const OcrOnnxNode *n, const char *name, int64_t def) {
    const OcrOnnxAttr *a = ocr_onnx_attr(n, name);
    return a ? a->i : def;
}

static void collect(const OcrOnnxModel *m, GraphWeights *gw) {
    memset(gw, 0, sizeof *gw);
    for (int i = 0; i < m->nnodes; i++) {
        const OcrOnnxNode *n = &m->nodes[i];
        const char *op = n->op_type;
        if (strcmp(op, "Conv") == 0) {
            Group g = {n, {const_input(m, n, 1), const_input(m, n, 2), NULL, NULL}};
            push(&gw->conv, g);
        } else if (strcmp(op, "BatchNormalization") == 0) {
            Group g = {n, {const_input(m, n, 1), const_input(m, n, 2), const_input(m, n, 3), const_input(m, n, 4)}};
            push(&gw->bn, g);
        } else if (strcmp(op, "Mul") == 0 && n->ninputs == 2) {
            for (int k = 0; k < 2; k++) {
                const OcrOnnxTensor *c = ocr_onnx_constant(m, n->inputs[k]);
                if (!c || !c->f32) continue;
                if (c->ndim == 1 && c->numel == 1) {
                    Group g = {n, {c, following_bias(m, i), NULL, NULL}};
                    push(&gw->lab, g);
                } else if (c->ndim == 1 && c->numel > 1) {
                    Group g = {n, {c, following_bias(m, i), NULL, NULL}};
                    push(&gw->ln, g);
                } else if (c->ndim == 0 && c->f32[0] != 1.0f && gw->n_attn_scale < 16) {
                    gw->attn_scale[gw->n_attn_scale++] = c->f32[0];
                }
                break;
            }
        } else if (strcmp(op, "MatMul") == 0 && n->ninputs == 2) {
            const OcrOnnxTensor *w = ocr_onnx_constant(m, n->inputs[1]);
            if (w && w->ndim == 2) {
                Group g = {n, {w, following_bias(m, i), NULL, NULL}};
                push(&gw->lin, g);
            }
        } else if (strcmp(op, "Sqrt") == 0 && n->ninputs == 1 && gw->n_ln_eps < 16) {
            const OcrOnnxNode *add = producer(m, n->inputs[0], i);
            if (add && strcmp(add->op_type, "Add") == 0 && add->ninputs == 2) {
                for (int k = 0; k < 2; k++) {
                    const OcrOnnxTensor *c = ocr_onnx_constant(m, add->inputs[k]);
                    if (c && c->f32 && c->numel == 1) gw->ln_eps[gw->n_ln_eps++] = c->f32[0];
                }
            }
        } else if (strcmp(op, "HardSigmoid") == 0) {
            if (gw->n_hsig < 16) gw->hsig[gw->n_hsig] = n;
            gw->n_hsig++;
        } else if (strcmp(op, "AveragePool") == 0) {
            gw->avgpool = n;
            gw->n_avgpool++;
        } else if (strcmp(op, "Concat") == 0 && n->ninputs == 2 && attr_int(n, "axis", 0) == 1 &&
                   !ocr_onnx_constant(m, n->inputs[0]) && !ocr_onnx_constant(m, n->inputs[1])) {
            // The neck's channel concat (the shape arithmetic concatenates along axis 0).
            gw->concat = n;
            gw->n_concat++;
        } else if (strcmp(op, "Softmax") == 0) {
            gw->softmax = n;
            gw->n_softmax++;
        }
    }
}

static void free_groups(GraphWeights *gw) {
    free(gw->conv.items);
    free(gw->bn.items);
    free(gw->lab.items);
    free(gw->ln.items);
    free(gw->lin.items);
}

// ---- our side -------------------------------------------------------------------------------------

typedef struct {
    int *ops;
    int n;
} OpList;

static OpList ops_of(const OcrOpTable *t, const char *type) {
    OpList l = {malloc((size_t)t->count * sizeof(int)), 0};
    OCR_ASSERT(l.ops);
    for (int i = 0; i < t->count; i++)
        if (strcmp(t->items[i].type, type) == 0) l.ops[l.n++] = i;
    return l;
}

static const char *dims_str(const OcrOnnxTensor *t, char *buf, size_t n) {
    size_t u = (size_t)snprintf(buf, n, "{");
    for (int d = 0; d < t->ndim && u < n; d++) u += (size_t)snprintf(buf + u, n - u, "%s%lld", d ? "," : "", (long long)t->dims[d]);
    if (u < n) snprintf(buf + u, n - u, "}");
    return buf;
}

static const char *tname(const OcrOnnxTensor *t) { return t && t->name ? t->name : "(unnamed)"; }

typedef struct {
    const char *file;
    OcrModel *model;
    OcrParamTable *params, *stats;
} Ctx;

// Copies `src` (numel must match dst) into parameter `name` of table `tab`.
static ocr_status_t put(Ctx *c, OcrParamTable *tab, const char *name, const float *src, int64_t numel,
                        const char *what) {
    int i = ocr_params_find(tab, name);
    if (i < 0) return ocr_set_error(OCR_ERR_INTERNAL, "%s: the network has no %s", c->file, name);
    if (tab->items[i].numel != numel)
        return ocr_set_error(OCR_ERR_FORMAT, "%s: %s has %lld values, %s needs %lld", c->file, what, (long long)numel,
                             name, (long long)tab->items[i].numel);
    OcrTensor t = ocr_params_tensor(tab, i);
    ocr_tensor_from_f32(&t, src);
    return OCR_OK;
}

static ocr_status_t expect_f32(Ctx *c, const OcrOnnxTensor *t, const char *role, const char *node) {
    if (!t) return ocr_set_error(OCR_ERR_FORMAT, "%s: %s of node %s is not a constant", c->file, role, node);
    if (!t->f32) return ocr_set_error(OCR_ERR_FORMAT, "%s: %s %s is not a float tensor", c->file, role, tname(t));
    return OCR_OK;
}

static const char *node_name(const OcrOnnxNode *n) {
    return n->name && n->name[0] ? n->name : n->noutputs ? n->outputs[0] : n->op_type;
}

static ocr_status_t count_check(Ctx *c, const char *what, int graph, int ours) {
    if (graph == ours) return OCR_OK;
    return ocr_set_error(OCR_ERR_FORMAT, "%s: the graph has %d %s, the PP-OCRv4 network has %d (not the PP-OCRv4 recognizer?)",
                         c->file, graph, what, ours);
}

static int attr_ints_eq(const OcrOnnxNode *n, const char *name, const int64_t *want, int count, int64_t def) {
    const OcrOnnxAttr *a = ocr_onnx_attr(n, name);
    for (int i = 0; i < count; i++) {
        int64_t v = a ? (i < a->nints ? a->ints[i] : -999) : def;
        if (v != want[i]) return 0;
    }
    return !a || a->nints == count;
}

static ocr_status_t import_convs(Ctx *c, const GraphWeights *gw) {
    const OcrOpTable *ops = ocr_model_ops(c->model);
    OpList l = ops_of(ops, "conv2d");
    ocr_status_t st = count_check(c, "Conv nodes", gw->conv.n, l.n);
    char buf[300], a[64];
    for (int k = 0; st == OCR_OK && k < l.n; k++) {
        const OcrOpInfo *o = &ops->items[l.ops[k]];
        const Group *g = &gw->conv.items[k];
        const char *nn = node_name(g->node);
        st = expect_f32(c, g->t[0], "the weight", nn);
        if (st != OCR_OK) break;
        int wi = ocr_params_find(c->params, ocr_name(buf, sizeof buf, "%s.weight", o->name));
        const OcrParamInfo *p = &c->params->items[wi];
        int64_t oc = p->shape[0], kh = p->shape[1], kw = p->shape[2], cg = p->shape[3];
        const OcrOnnxTensor *w = g->t[0];
        if (w->ndim != 4 || w->dims[0] != oc || w->dims[1] != cg || w->dims[2] != kh || w->dims[3] != kw) {
            st = ocr_set_error(OCR_ERR_FORMAT, "%s: Conv #%d (%s) weight %s is %s, %s needs {%lld,%lld,%lld,%lld}", c->file,
                               k, nn, tname(w), dims_str(w, a, sizeof a), o->name, (long long)oc, (long long)cg,
                               (long long)kh, (long long)kw);
            break;
        }
        int64_t strides[2] = {o->conv_stride[0], o->conv_stride[1]};
        int64_t pads[4] = {o->conv_pad[0], o->conv_pad[1], o->conv_pad[0], o->conv_pad[1]};
        int64_t ones[2] = {1, 1};
        if (!attr_ints_eq(g->node, "strides", strides, 2, 1) || !attr_ints_eq(g->node, "pads", pads, 4, 0) ||
            attr_int(g->node, "group", 1) != o->conv_groups || !attr_ints_eq(g->node, "dilations", ones, 2, 1)) {
            st = ocr_set_error(OCR_ERR_FORMAT,
                               "%s: Conv #%d (%s) has other strides/pads/group/dilations than %s (stride %d,%d pad %d,%d "
                               "group %d)",
                               c->file, k, nn, o->name, o->conv_stride[0], o->conv_stride[1], o->conv_pad[0],
                               o->conv_pad[1], o->conv_groups);
            break;
        }
        // OIHW -> (OC, KH, KW, C/groups).
        float *t = malloc((size_t)w->numel * sizeof(float));
        OCR_ASSERT(t);
        for (int64_t oo = 0; oo < oc; oo++)
            for (int64_t i = 0; i < cg; i++)
                for (int64_t y = 0; y < kh; y++)
                    for (int64_t x = 0; x < kw; x++)
                        t[((oo * kh + y) * kw + x) * cg + i] = w->f32[((oo * cg + i) * kh + y) * kw + x];
        st = put(c, c->params, p->name, t, w->numel, tname(w));
        free(t);
        if (st != OCR_OK) break;
        int has_bias = ocr_params_find(c->params, ocr_name(buf, sizeof buf, "%s.bias", o->name)) >= 0;
        if (has_bias != (g->t[1] != NULL) ) {
            st = ocr_set_error(OCR_ERR_FORMAT, "%s: Conv #%d (%s) %s a bias, %s %s", c->file, k, nn,
                               g->t[1] ? "has" : "has no", o->name, has_bias ? "needs one" : "has none");
            break;
        }
        if (has_bias) {
            st = expect_f32(c, g->t[1], "the bias", nn);
            if (st == OCR_OK) st = put(c, c->params, buf, g->t[1]->f32, g->t[1]->numel, tname(g->t[1]));
        }
    }
    free(l.ops);
    return st;
}

static ocr_status_t import_bns(Ctx *c, const GraphWeights *gw) {
    const OcrOpTable *ops = ocr_model_ops(c->model);
    OpList l = ops_of(ops, "batchnorm");
    ocr_status_t st = count_check(c, "BatchNormalization nodes", gw->bn.n, l.n);
    static const char *const roles[4] = {"scale", "B", "mean", "var"};
    static const char *const ours[4] = {"weight", "bias", "_mean", "_variance"};
    char buf[300];
    for (int k = 0; st == OCR_OK && k < l.n; k++) {
        const OcrOpInfo *o = &ops->items[l.ops[k]];
        const Group *g = &gw->bn.items[k];
        const OcrOnnxAttr *eps = ocr_onnx_attr(g->node, "epsilon");
        float e = eps ? eps->f : 1e-5f;
        if (fabsf(e - 1e-5f) > 1e-9f) {
            st = ocr_set_error(OCR_ERR_FORMAT, "%s: BatchNormalization #%d (%s) has epsilon %g, %s uses 1e-5", c->file, k,
                               node_name(g->node), e, o->name);
            break;
        }
        for (int r = 0; r < 4 && st == OCR_OK; r++) {
            st = expect_f32(c, g->t[r], roles[r], node_name(g->node));
            if (st == OCR_OK)
                st = put(c, r < 2 ? c->params : c->stats, ocr_name(buf, sizeof buf, "%s.%s", o->name, ours[r]),
                         g->t[r]->f32, g->t[r]->numel, tname(g->t[r]));
        }
    }
    free(l.ops);
    return st;
}

// Pairs of (w, b) constants: affine scalars, LayerNorm gamma/beta, linear weight/bias.
static ocr_status_t import_pairs(Ctx *c, const Groups *gr, const char *type, const char *what, const char *w_name,
                                 const char *b_name) {
    const OcrOpTable *ops = ocr_model_ops(c->model);
    OpList l = ops_of(ops, type);
    ocr_status_t st = count_check(c, what, gr->n, l.n);
    char buf[300];
    for (int k = 0; st == OCR_OK && k < l.n; k++) {
        const OcrOpInfo *o = &ops->items[l.ops[k]];
        const Group *g = &gr->items[k];
        const char *nn = node_name(g->node);
        st = expect_f32(c, g->t[0], "the weight", nn);
        if (st == OCR_OK) st = expect_f32(c, g->t[1], "the bias (the Add that follows)", nn);
        if (st != OCR_OK) break;
        int wi = ocr_params_find(c->params, ocr_name(buf, sizeof buf, "%s.%s", o->name, w_name));
        const OcrParamInfo *p = &c->params->items[wi];
        int same = g->t[0]->ndim == p->ndim;
        for (int d = 0; same && d < p->ndim; d++) same = g->t[0]->dims[d] == p->shape[d];
        if (!same) {
            char a[64];
            st = ocr_set_error(OCR_ERR_FORMAT, "%s: %s #%d (%s): %s is %s, %s needs %lld values (%d-D)", c->file, what, k,
                               nn, tname(g->t[0]), dims_str(g->t[0], a, sizeof a), p->name, (long long)p->numel,
                               p->ndim);
            break;
        }
        st = put(c, c->params, p->name, g->t[0]->f32, g->t[0]->numel, tname(g->t[0]));
        if (st == OCR_OK)
            st = put(c, c->params, ocr_name(buf, sizeof buf, "%s.%s", o->name, b_name), g->t[1]->f32, g->t[1]->numel,
                     tname(g->t[1]));
    }
    free(l.ops);
    return st;
}

// The hyper-parameters the network hard-codes.
static ocr_status_t check_fixed(Ctx *c, const OcrOnnxModel *m, const GraphWeights *gw) {
    // LayerNorm epsilons: 1e-5 in the SVTR blocks, 1e-6 in the final norm.
    const OcrOpTable *ops = ocr_model_ops(c->model);
    OpList l = ops_of(ops, "layernorm");
    ocr_status_t st = count_check(c, "LayerNorm epsilons (Add before Sqrt)", gw->n_ln_eps, l.n);
    for (int k = 0; st == OCR_OK && k < l.n; k++) {
        float want = strstr(ops->items[l.ops[k]].name, "svtr_block") ? 1e-5f : 1e-6f;
        if (gw->ln_eps[k] != want)
            st = ocr_set_error(OCR_ERR_FORMAT, "%s: LayerNorm #%d uses epsilon %g, %s uses %g", c->file, k, gw->ln_eps[k],
                               ops->items[l.ops[k]].name, want);
    }
    free(l.ops);
    if (st != OCR_OK) return st;
    l = ops_of(ops, "attention");
    st = count_check(c, "attention scale constants", gw->n_attn_scale, l.n);
    float scale = (float)pow(15.0, -0.5);
    for (int k = 0; st == OCR_OK && k < gw->n_attn_scale; k++)
        if (fabsf(gw->attn_scale[k] - scale) > 1e-7f)
            st = ocr_set_error(OCR_ERR_FORMAT, "%s: attention #%d scales q by %.9g, 8 heads of 15 need %.9g", c->file, k,
                               gw->attn_scale[k], scale);
    free(l.ops);
    if (st != OCR_OK) return st;
    l = ops_of(ops, "mul");  // SE gates, one HardSigmoid each
    st = count_check(c, "HardSigmoid nodes (SE gates)", gw->n_hsig, l.n);
    free(l.ops);
    for (int k = 0; st == OCR_OK && k < gw->n_hsig && k < 16; k++) {
        const OcrOnnxAttr *al = ocr_onnx_attr(gw->hsig[k], "alpha"), *be = ocr_onnx_attr(gw->hsig[k], "beta");
        float alpha = al ? al->f : 0.2f, beta = be ? be->f : 0.5f;
        if (alpha != 0.1666667f || beta != 0.5f)
            st = ocr_set_error(OCR_ERR_FORMAT, "%s: HardSigmoid %s has alpha %.9g beta %g, expected 0.1666667 and 0.5",
                               c->file, node_name(gw->hsig[k]), alpha, beta);
    }
    if (st != OCR_OK) return st;
    int64_t k32[2] = {3, 2};
    if (gw->n_avgpool != 1 || !attr_ints_eq(gw->avgpool, "kernel_shape", k32, 2, 0) ||
        !attr_ints_eq(gw->avgpool, "strides", k32, 2, 1))
        return ocr_set_error(OCR_ERR_FORMAT, "%s: expected one AveragePool with kernel and stride (3, 2) ending the backbone",
                             c->file);
    if (gw->n_concat != 1 || strcmp(gw->concat->inputs[0], gw->avgpool->outputs[0]) != 0 ||
        attr_int(gw->concat, "axis", 0) != 1)
        return ocr_set_error(OCR_ERR_FORMAT,
                             "%s: expected the neck to concatenate [backbone output, conv3 output] along channels", c->file);
    l = ops_of(ops, "attention");
    int n_attn = l.n;
    free(l.ops);
    if (gw->n_softmax != n_attn + 1)
        return ocr_set_error(OCR_ERR_FORMAT, "%s: expected %d Softmax nodes (one per attention block, one for the head), found %d",
                             c->file, n_attn + 1, gw->n_softmax);
    int64_t ax = attr_int(gw->softmax, "axis", -1);
    if (ax != 2 && ax != -1) return ocr_set_error(OCR_ERR_FORMAT, "%s: the Softmax runs over axis %lld, not the classes", c->file, (long long)ax);
    if (m->ninputs < 1 || m->noutputs != 1 || strcmp(m->outputs[0], gw->softmax->outputs[0]) != 0)
        return ocr_set_error(OCR_ERR_FORMAT, "%s: the graph's output is not the head's softmax", c->file);
    return OCR_OK;
}

ocr_status_t ocr_import_ppocrv4_onnx(OcrModel **out, const OcrOnnxModel *m, const char *name) {
    *out = NULL;
    GraphWeights gw;
    collect(m, &gw);
    if (gw.lin.n == 0 || !gw.lin.items[gw.lin.n - 1].t[0]) {
        free_groups(&gw);
        return ocr_set_error(OCR_ERR_FORMAT, "%s: no MatMul with a constant weight (no CTC head): not the PP-OCRv4 recognizer",
                             name);
    }
    int classes = (int)gw.lin.items[gw.lin.n - 1].t[0]->dims[1];
    if (classes < 2) {
        free_groups(&gw);
        return ocr_set_error(OCR_ERR_FORMAT, "%s: the head has %d classes", name, classes);
    }
    OcrArch arch;
    ocr_arch_ppocrv4_deploy(&arch, classes);
    OcrModel *model;
    ocr_status_t st = ocr_model_create(&model, &arch);
    if (st != OCR_OK) {
        free_groups(&gw);
        return st;
    }
    Ctx c = {name, model, ocr_model_params(model), ocr_model_stats(model)};
    st = import_convs(&c, &gw);
    if (st == OCR_OK) st = import_bns(&c, &gw);
    if (st == OCR_OK) st = import_pairs(&c, &gw.lab, "affine", "learnable affine blocks (Mul/Add by 1-element constants)", "scale", "bias");
    if (st == OCR_OK) st = import_pairs(&c, &gw.ln, "layernorm", "LayerNorm scale/shift pairs", "weight", "bias");
    if (st == OCR_OK) st = import_pairs(&c, &gw.lin, "linear", "MatMul nodes with constant weights", "weight", "bias");
    if (st == OCR_OK) st = check_fixed(&c, m, &gw);
    free_groups(&gw);
    if (st != OCR_OK) {
        ocr_model_free(model);
        return st;
    }
    *out = model;
    return OCR_OK;
}

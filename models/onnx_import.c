#include "models/onnx_import_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- the graph as a data-flow index -----------------------------------------------------------
// Tensor names are interned to ids; Identity and (inference) Dropout nodes alias their output
// to their input, so the walk sees through the pass-throughs paddle2onnx scatters around.
// (The index G, the pattern structs and the wrappers at the end are declared in
// onnx_import_internal.h for the PPLCNetV4 walker, onnx_import_lcnetv4.c.)

static uint64_t fnv(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int intern(G *g, const char *name) {
    uint64_t h = fnv(name);
    for (int k = (int)(h & (uint64_t)(g->hcap - 1));; k = (k + 1) & (g->hcap - 1)) {
        int id = g->hash[k];
        if (id < 0) {
            if (g->nt == g->tcap) {
                g->tcap = g->tcap ? 2 * g->tcap : 1024;
                g->tname = realloc(g->tname, (size_t)g->tcap * sizeof *g->tname);
                g->canon = realloc(g->canon, (size_t)g->tcap * sizeof *g->canon);
                g->producer = realloc(g->producer, (size_t)g->tcap * sizeof *g->producer);
                g->konst = realloc(g->konst, (size_t)g->tcap * sizeof *g->konst);
                OCR_ASSERT(g->tname && g->canon && g->producer && g->konst, "out of host memory");
            }
            id = g->nt++;
            g->tname[id] = name;
            g->canon[id] = id;
            g->producer[id] = -1;
            g->konst[id] = NULL;
            g->hash[k] = id;
            return id;
        }
        if (strcmp(g->tname[id], name) == 0) return id;
    }
}

static int is_passthrough(const OcrOnnxNode *n) {
    return (strcmp(n->op_type, "Identity") == 0 || strcmp(n->op_type, "Dropout") == 0) && n->ninputs >= 1 &&
           n->noutputs >= 1;
}

// ---- constants computed from constants, and nodes that compute nothing ------------------------
// Exporters differ in how they spell a weight (an initializer, a Constant node, a constant
// reshaped, unsqueezed or transposed by a node) and in the no-op plumbing they leave on the data
// path (Identity, Add 0, Unsqueeze then Squeeze of the same axis, two Transposes that cancel).
// The index resolves both while it is built, so the walk sees what the graph computes.

static int64_t attr_i(const OcrOnnxNode *n, const char *name, int64_t def);

static OcrOnnxTensor *new_folded(G *g, const OcrOnnxTensor *src, const char *name) {
    if (g->nfolded == g->fcap) return NULL;
    const OcrOnnxTensor *root = src;
    if (src >= g->folded && src < g->folded + g->nfolded) root = g->folded_src[src - g->folded];
    g->folded_src[g->nfolded] = root;
    OcrOnnxTensor *t = &g->folded[g->nfolded++];
    *t = *src;
    t->name = (char *)name;
    return t;
}

static void *own(G *g, size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    OCR_ASSERT(p, "out of host memory");
    g->owned = realloc(g->owned, ((size_t)g->nowned + 1) * sizeof *g->owned);
    OCR_ASSERT(g->owned, "out of host memory");
    g->owned[g->nowned++] = p;
    return p;
}

// A node's axes (attribute before opset 13, constant input after): 1 and the list, 0 when none
// or not constant.
static int node_axes(const G *g, int i, const int64_t **axes, int *n) {
    const OcrOnnxAttr *a = ocr_onnx_attr(&g->m->nodes[i], "axes");
    if (a && a->nints > 0) {
        *axes = a->ints;
        *n = a->nints;
        return 1;
    }
    const OcrOnnxTensor *c = g->m->nodes[i].ninputs > 1 && g->in[i][1] >= 0 ? g->konst[g->in[i][1]] : NULL;
    if (c && c->i64 && c->numel > 0) {
        *axes = c->i64;
        *n = (int)c->numel;
        return 1;
    }
    return 0;
}

// Transpose's permutation (default: reversed axes of an `nd`-D input).
static int node_perm(const OcrOnnxNode *n, int nd, int64_t perm[OCR_ONNX_MAX_DIMS]) {
    const OcrOnnxAttr *a = ocr_onnx_attr(n, "perm");
    if (a) {
        if (a->nints > OCR_ONNX_MAX_DIMS) return -1;
        for (int k = 0; k < a->nints; k++) perm[k] = a->ints[k];
        return a->nints;
    }
    if (nd < 0) return -1;
    for (int k = 0; k < nd; k++) perm[k] = nd - 1 - k;
    return nd;
}

// A Constant node's value: `value` (a tensor) or, from opset 12, value_float(s) / value_int(s).
static const OcrOnnxTensor *constant_value(G *g, const OcrOnnxNode *n) {
    const OcrOnnxAttr *v = ocr_onnx_attr(n, "value");
    if (v && v->t) return v->t;
    static const char *const keys[] = {"value_float", "value_floats", "value_int", "value_ints"};
    for (int k = 0; k < 4; k++) {
        const OcrOnnxAttr *a = ocr_onnx_attr(n, keys[k]);
        if (!a || g->nfolded == g->fcap) continue;
        OcrOnnxTensor z;
        memset(&z, 0, sizeof z);
        OcrOnnxTensor *t = new_folded(g, &z, n->noutputs ? n->outputs[0] : "");
        g->folded_src[g->nfolded - 1] = t;  // its own source: nothing else holds it
        int list = k == 1 || k == 3;
        t->ndim = list;
        t->numel = list ? (k == 1 ? a->nfloats : a->nints) : 1;
        if (list) t->dims[0] = t->numel;
        if (k < 2) {
            t->data_type = OCR_ONNX_FLOAT;
            t->f32 = own(g, (size_t)t->numel * sizeof(float));
            for (int64_t e = 0; e < t->numel; e++) t->f32[e] = list ? a->floats[e] : a->f;
        } else {
            t->data_type = OCR_ONNX_INT64;
            t->i64 = own(g, (size_t)t->numel * sizeof(int64_t));
            for (int64_t e = 0; e < t->numel; e++) t->i64[e] = list ? a->ints[e] : a->i;
        }
        return t;
    }
    return NULL;
}

// Reshape / Unsqueeze / Squeeze / Flatten / Transpose of a float constant: the constant it
// computes (NULL when the node is not one, or its shape arguments are not constant).
static const OcrOnnxTensor *fold_node(G *g, int i) {
    const OcrOnnxNode *n = &g->m->nodes[i];
    const char *op = n->op_type;
    const OcrOnnxTensor *src = n->ninputs >= 1 && g->in[i][0] >= 0 ? g->konst[g->in[i][0]] : NULL;
    if (!src || !src->f32 || n->noutputs != 1 || g->nfolded == g->fcap) return NULL;
    int64_t dims[OCR_ONNX_MAX_DIMS];
    int nd = 0;
    const int64_t *ax;
    int nax;
    if (strcmp(op, "Reshape") == 0) {
        const OcrOnnxTensor *sh = n->ninputs > 1 && g->in[i][1] >= 0 ? g->konst[g->in[i][1]] : NULL;
        int ok = sh && sh->i64 && sh->numel <= OCR_ONNX_MAX_DIMS;
        int64_t known = 1;
        int infer = -1;
        for (int k = 0; ok && k < sh->numel; k++) {
            int64_t d = sh->i64[k];
            if (d == 0 && !attr_i(n, "allowzero", 0)) d = k < src->ndim ? src->dims[k] : -2;
            if (d == -1 && infer < 0) infer = k;
            else if (d < 0) ok = 0;
            else known *= d;
            dims[nd++] = d;
        }
        if (ok && infer >= 0) {
            ok = known != 0 && src->numel % known == 0;
            if (ok) dims[infer] = src->numel / known;
        }
        if (ok) {
            int64_t numel = 1;
            for (int k = 0; k < nd; k++) numel *= dims[k];
            ok = numel == src->numel;
        }
        if (!ok) {
            // Older paddle2onnx writes a conv bias as Reshape(b, [1, C, 1, 1]) + Add with the
            // shape computed at run time: a Reshape of a constant holds its values whatever the
            // shape (only the count matters where a bias is read).
            OcrOnnxTensor *t = new_folded(g, src, n->outputs[0]);
            t->ndim = 1;
            t->dims[0] = src->numel;
            return t;
        }
    } else if (strcmp(op, "Unsqueeze") == 0 || strcmp(op, "Squeeze") == 0) {
        int sq = op[0] == 'S', have = node_axes(g, i, &ax, &nax);
        if (!have && !sq) return NULL;
        int out_nd = sq ? src->ndim : src->ndim + nax;
        if (out_nd > OCR_ONNX_MAX_DIMS) return NULL;
        unsigned char hit[OCR_ONNX_MAX_DIMS] = {0};
        for (int k = 0; have && k < nax; k++) {
            int64_t a = ax[k] < 0 ? ax[k] + out_nd : ax[k];
            if (a < 0 || a >= out_nd) return NULL;
            hit[a] = 1;
        }
        for (int k = 0, s = 0; k < out_nd; k++) {
            if (sq) {
                if ((have ? hit[k] : src->dims[k] == 1) && src->dims[k] == 1) continue;
                if (have && hit[k]) return NULL;  // squeezing a dimension that is not 1
                dims[nd++] = src->dims[k];
            } else {
                dims[nd++] = hit[k] ? 1 : src->dims[s++];
            }
        }
    } else if (strcmp(op, "Flatten") == 0) {
        int64_t axis = attr_i(n, "axis", 1), a = axis < 0 ? axis + src->ndim : axis, lead = 1;
        if (a < 0 || a > src->ndim) return NULL;
        for (int k = 0; k < a; k++) lead *= src->dims[k];
        dims[nd++] = lead;
        dims[nd++] = lead ? src->numel / lead : 0;
    } else if (strcmp(op, "Transpose") == 0) {
        int64_t perm[OCR_ONNX_MAX_DIMS];
        if (node_perm(n, src->ndim, perm) != src->ndim) return NULL;
        int64_t stride[OCR_ONNX_MAX_DIMS], idx[OCR_ONNX_MAX_DIMS] = {0};
        for (int k = src->ndim - 1; k >= 0; k--) stride[k] = k == src->ndim - 1 ? 1 : stride[k + 1] * src->dims[k + 1];
        unsigned char seen[OCR_ONNX_MAX_DIMS] = {0};
        for (int k = 0; k < src->ndim; k++) {
            if (perm[k] < 0 || perm[k] >= src->ndim || seen[perm[k]]++) return NULL;  // not a permutation
            dims[nd++] = src->dims[perm[k]];
        }
        OcrOnnxTensor *t = new_folded(g, src, n->outputs[0]);
        t->f32 = own(g, (size_t)src->numel * sizeof(float));
        t->ndim = nd;
        memcpy(t->dims, dims, sizeof dims);
        for (int64_t e = 0; e < src->numel; e++) {  // e walks the output in order
            int64_t off = 0;
            for (int k = 0; k < nd; k++) off += idx[k] * stride[perm[k]];
            t->f32[e] = src->f32[off];
            for (int k = nd - 1; k >= 0 && ++idx[k] == dims[k]; k--) idx[k] = 0;
        }
        return t;
    } else {
        return NULL;
    }
    int64_t numel = 1;
    for (int k = 0; k < nd; k++) numel *= dims[k];
    if (numel != src->numel) return NULL;
    OcrOnnxTensor *t = new_folded(g, src, n->outputs[0]);
    t->ndim = nd;
    memcpy(t->dims, dims, (size_t)nd * sizeof *dims);
    return t;
}

static int is_zero_scalar(const OcrOnnxTensor *c) { return c && c->f32 && c->numel == 1 && c->ndim <= 1 && c->f32[0] == 0.0f; }

// The tensor a node passes on unchanged, or -1: Identity / Dropout; Add of a one-element zero
// (Sub of one); Squeeze of the axes an Unsqueeze just added; a Transpose undoing the one before
// it, or with the identity permutation. `*dead` receives the node the pair made redundant.
// An Add 0 right after a Mul by a one-element constant is left alone: that is a learnable
// affine block (or an attention scale) whose bias is a parameter that happens to be zero.
static int noop_input(const G *g, int i, int *dead) {
    const OcrOnnxNode *n = &g->m->nodes[i];
    const char *op = n->op_type;
    *dead = -1;
    if (n->noutputs < 1 || n->ninputs < 1 || g->in[i][0] < 0) return -1;
    if (is_passthrough(n)) return g->in[i][0];
    if ((strcmp(op, "Add") == 0 || strcmp(op, "Sub") == 0) && n->ninputs == 2 && g->in[i][1] >= 0) {
        for (int k = 0; k < 2; k++) {
            int x = g->in[i][k], z = g->in[i][1 - k];
            if ((op[0] == 'S' && k == 1) || g->konst[x] || !is_zero_scalar(g->konst[z])) continue;
            int p = g->producer[x];
            if (p >= 0 && strcmp(g->m->nodes[p].op_type, "Mul") == 0 && g->m->nodes[p].ninputs == 2) {
                const OcrOnnxTensor *a = g->in[p][0] >= 0 ? g->konst[g->in[p][0]] : NULL;
                const OcrOnnxTensor *b = g->in[p][1] >= 0 ? g->konst[g->in[p][1]] : NULL;
                if ((a && a->numel == 1) || (b && b->numel == 1)) return -1;
            }
            return x;
        }
        return -1;
    }
    int p = g->producer[g->in[i][0]];
    if (strcmp(op, "Squeeze") == 0 && p >= 0 && !g->skip[p] && strcmp(g->m->nodes[p].op_type, "Unsqueeze") == 0 &&
        g->in[p][0] >= 0) {
        const int64_t *a, *b;
        int na, nb;
        if (!node_axes(g, i, &a, &na) || !node_axes(g, p, &b, &nb) || na != nb) return -1;
        for (int k = 0; k < na; k++)
            if (a[k] != b[k]) return -1;
        *dead = p;
        return g->in[p][0];
    }
    if (strcmp(op, "Transpose") == 0) {
        int64_t q[OCR_ONNX_MAX_DIMS], r[OCR_ONNX_MAX_DIMS];
        int nq = node_perm(n, -1, q), ident = nq > 0;
        for (int k = 0; k < nq; k++) ident &= q[k] == k;
        if (ident) return g->in[i][0];
        if (nq > 0 && p >= 0 && !g->skip[p] && strcmp(g->m->nodes[p].op_type, "Transpose") == 0 && g->in[p][0] >= 0 &&
            node_perm(&g->m->nodes[p], -1, r) == nq) {
            for (int k = 0; k < nq; k++)  // out[k] = mid[q[k]] = in[r[q[k]]]
                if (q[k] < 0 || q[k] >= nq || r[q[k]] != k) return -1;
            *dead = p;
            return g->in[p][0];
        }
    }
    return -1;
}

// A node is only redundant when nothing but the pair reads its output.
static int read_by_compute(const G *g, int t) {
    for (int i = 0; i < g->m->nnodes; i++) {
        if (g->skip[i]) continue;
        for (int k = 0; k < g->m->nodes[i].ninputs; k++)
            if (g->in[i][k] == t) return 1;
    }
    for (int k = 0; k < g->m->noutputs; k++)
        if (strcmp(g->m->outputs[k], g->tname[t]) == 0) return 1;
    return 0;
}

static void g_build(G *g, const OcrOnnxModel *m, const char *file) {
    memset(g, 0, sizeof *g);
    g->m = m;
    g->file = file;
    int names = m->ninits + m->ninputs;
    for (int i = 0; i < m->nnodes; i++) names += m->nodes[i].ninputs + m->nodes[i].noutputs;
    g->hcap = 1024;
    while (g->hcap < 2 * names) g->hcap *= 2;
    g->hash = malloc((size_t)g->hcap * sizeof *g->hash);
    OCR_ASSERT(g->hash, "out of host memory");
    for (int k = 0; k < g->hcap; k++) g->hash[k] = -1;
    // (intern may grow the arrays: take the id before indexing them)
    for (int i = 0; i < m->ninits; i++)
        if (m->inits[i].name) {
            int id = intern(g, m->inits[i].name);
            g->konst[id] = &m->inits[i];
        }
    g->in = calloc((size_t)m->nnodes + 1, sizeof *g->in);
    g->out = calloc((size_t)m->nnodes + 1, sizeof *g->out);
    g->skip = calloc((size_t)m->nnodes + 1, 1);
    g->used = calloc((size_t)m->nnodes + 1, 1);
    // One fold per node, plus a 2-D view or a transposed copy for each linear layer's weight.
    g->fcap = 2 * m->nnodes + 16;
    g->folded = calloc((size_t)g->fcap, sizeof *g->folded);
    g->folded_src = calloc((size_t)g->fcap, sizeof *g->folded_src);
    int *dead_cand = malloc(((size_t)m->nnodes + 1) * sizeof *dead_cand), ndead = 0;
    OCR_ASSERT(g->in && g->out && g->skip && g->used && g->folded && g->folded_src && dead_cand, "out of host memory");
    for (int i = 0; i < m->nnodes; i++) {
        const OcrOnnxNode *n = &m->nodes[i];
        // Padded with -1 so that reading a missing optional input (a Conv's bias, a BN's
        // statistics in a malformed graph) or a missing output gives "none", never garbage.
        int nin = n->ninputs > 5 ? n->ninputs : 5, nout = n->noutputs > 1 ? n->noutputs : 1;
        g->in[i] = malloc(((size_t)nin + 1) * sizeof(int));
        g->out[i] = malloc(((size_t)nout + 1) * sizeof(int));
        OCR_ASSERT(g->in[i] && g->out[i], "out of host memory");
        for (int k = 0; k <= nin; k++) g->in[i][k] = -1;
        for (int k = 0; k <= nout; k++) g->out[i][k] = -1;
        for (int k = 0; k < n->ninputs; k++) {
            int id = n->inputs[k][0] ? intern(g, n->inputs[k]) : -1;
            g->in[i][k] = id >= 0 ? g->canon[id] : -1;
        }
        for (int k = 0; k < n->noutputs; k++) {
            int id = intern(g, n->outputs[k]);
            g->out[i][k] = id;
            g->producer[id] = i;
        }
        if (strcmp(n->op_type, "Constant") == 0) {
            g->skip[i] = 1;
            const OcrOnnxTensor *v = constant_value(g, n);
            if (n->noutputs >= 1 && v) g->konst[g->out[i][0]] = v;
            continue;
        }
        const OcrOnnxTensor *f = fold_node(g, i);
        if (f) {
            g->skip[i] = 1;
            g->konst[g->out[i][0]] = f;
            continue;
        }
        int dead, x = noop_input(g, i, &dead);
        if (x >= 0 && g->out[i][0] >= 0) {
            g->skip[i] = 1;
            g->canon[g->out[i][0]] = x;
            if (!g->konst[g->out[i][0]]) g->konst[g->out[i][0]] = g->konst[x];
            if (dead >= 0) dead_cand[ndead++] = dead;
        }
    }
    // The Unsqueeze (Transpose) of a cancelling pair computes nothing once the pair is seen
    // through, unless something else reads it.
    for (int k = 0; k < ndead; k++)
        if (!g->skip[dead_cand[k]] && g->out[dead_cand[k]][0] >= 0 && !read_by_compute(g, g->out[dead_cand[k]][0]))
            g->skip[dead_cand[k]] = 1;
    free(dead_cand);
    // Readers of every tensor, in node order (a node reading a tensor twice is listed once), so
    // that finding what consumes a tensor does not scan the graph.
    g->nindexed = g->nt;
    g->rstart = calloc((size_t)g->nt + 2, sizeof *g->rstart);
    OCR_ASSERT(g->rstart, "out of host memory");
    for (int pass = 0; pass < 2; pass++) {
        int *fill = pass ? calloc((size_t)g->nt + 1, sizeof *fill) : NULL;
        OCR_ASSERT(!pass || fill, "out of host memory");
        for (int i = 0; i < m->nnodes; i++) {
            if (g->skip[i]) continue;
            for (int k = 0; k < m->nodes[i].ninputs; k++) {
                int t = g->in[i][k], dup = 0;
                for (int j = 0; j < k && !dup; j++) dup = g->in[i][j] == t;
                if (t < 0 || dup) continue;
                if (pass == 0) g->rstart[t + 1]++;
                else g->readers[g->rstart[t] + fill[t]++] = i;
            }
        }
        if (pass == 0) {
            for (int t = 0; t < g->nt; t++) g->rstart[t + 1] += g->rstart[t];
            g->readers = malloc(((size_t)g->rstart[g->nt] + 1) * sizeof *g->readers);
            OCR_ASSERT(g->readers, "out of host memory");
        }
        free(fill);
    }
}

static void g_free(G *g) {
    for (int i = 0; i < g->m->nnodes; i++) {
        free(g->in[i]);
        free(g->out[i]);
    }
    free(g->in);
    free(g->out);
    free(g->skip);
    free(g->used);
    free(g->folded);
    free(g->folded_src);
    for (int k = 0; k < g->nowned; k++) free(g->owned[k]);
    free(g->owned);
    free(g->rstart);
    free(g->readers);
    free(g->tname);
    free(g->canon);
    free(g->producer);
    free(g->konst);
    free(g->hash);
}

static const char *node_label(const G *g, int i, char *buf, size_t n) {
    const OcrOnnxNode *nd = N(g, i);
    snprintf(buf, n, "node #%d %s (%s)", i, nd->op_type,
             nd->name && nd->name[0] ? nd->name : nd->noutputs ? nd->outputs[0] : "unnamed");
    return buf;
}

// An error at a node: "<file>: node #12 Conv (name): <what>".
static ocr_status_t fail_node(const G *g, int i, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static ocr_status_t fail_node(const G *g, int i, const char *fmt, ...) {
    char what[512], lab[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ocr_set_error(OCR_ERR_FORMAT, "%s: %s: %s", g->file, node_label(g, i, lab, sizeof lab), what);
}

// An error at a tensor: names it and the node that produced it.
static ocr_status_t fail_tensor(const G *g, int t, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static ocr_status_t fail_tensor(const G *g, int t, const char *fmt, ...) {
    char what[512], lab[256] = "the graph input";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (t >= 0 && g->producer[t] >= 0) node_label(g, g->producer[t], lab, sizeof lab);
    return ocr_set_error(OCR_ERR_FORMAT, "%s: after tensor %s (from %s): %s", g->file, TN(g, t), lab, what);
}

// The first node (in graph order) of type `op` that reads t at input `slot` (-1: any slot).
static int consumer(const G *g, int t, const char *op, int slot) {
    if (t < 0) return -1;
    FOR_READERS(g, t, i) {
        if (g->skip[i] || (op && strcmp(N(g, i)->op_type, op) != 0)) continue;
        for (int k = 0; k < N(g, i)->ninputs; k++)
            if (g->in[i][k] == t && (slot < 0 || slot == k)) return i;
    }
    return -1;
}

// Nodes that read t (constants and pass-throughs aside), Shape nodes not counted.
static int data_consumers(const G *g, int t) {
    int c = 0;
    if (t < 0) return 0;
    FOR_READERS(g, t, i) {
        if (g->skip[i] || strcmp(N(g, i)->op_type, "Shape") == 0) continue;
        for (int k = 0; k < N(g, i)->ninputs; k++)
            if (g->in[i][k] == t) {
                c++;
                break;
            }
    }
    return c;
}

// The other input of a two-input node that reads t (-1 when n does not read t).
static int other_input(const G *g, int n, int t) {
    if (t < 0 || N(g, n)->ninputs != 2) return -1;
    if (g->in[n][0] == t) return g->in[n][1];
    if (g->in[n][1] == t) return g->in[n][0];
    return -1;
}

static int scalar_of(const G *g, int t, float *v) {
    const OcrOnnxTensor *c = K(g, t);
    if (!c || !c->f32 || c->numel != 1 || c->ndim > 1) return 0;
    *v = c->f32[0];
    return 1;
}

// A two-input node of type op reading t with a scalar constant as its other input.
static int scalar_consumer(const G *g, int t, const char *op, float *v) {
    FOR_READERS(g, t, i) {
        if (g->skip[i] || strcmp(N(g, i)->op_type, op) != 0) continue;
        int o = other_input(g, i, t);
        if (o >= 0 && o != t && scalar_of(g, o, v)) return i;
    }
    return -1;
}

static int64_t attr_i(const OcrOnnxNode *n, const char *name, int64_t def) {
    const OcrOnnxAttr *a = ocr_onnx_attr(n, name);
    return a ? a->i : def;
}

static float attr_f(const OcrOnnxNode *n, const char *name, float def) {
    const OcrOnnxAttr *a = ocr_onnx_attr(n, name);
    return a ? a->f : def;
}

static void attr_pair(const OcrOnnxNode *n, const char *name, int def, int out[2]) {
    const OcrOnnxAttr *a = ocr_onnx_attr(n, name);
    out[0] = a && a->nints > 0 ? (int)a->ints[0] : def;
    out[1] = a && a->nints > 1 ? (int)a->ints[1] : def;
}

static void use(G *g, int n) {
    if (n >= 0) g->used[n] = 1;
}

// ---- layer patterns ------------------------------------------------------------------------------

const char *const oi_act_names[] = {"none", "hardswish", "swish", "relu", "hardsigmoid", "gelu"};

// y = w·x + b with one-element w and b: PPLCNetV3's LearnableAffineBlock. A Mul by a scalar
// whose output feeds the Add of another scalar (swish's Mul(x, 1) feeds a Sigmoid instead).
static int match_lab(G *g, int t, const OcrOnnxTensor *wb[2], int *node) {
    float v;
    FOR_READERS(g, t, i) {
        if (g->skip[i] || strcmp(N(g, i)->op_type, "Mul") != 0) continue;
        int o = other_input(g, i, t);
        if (o < 0 || o == t || !scalar_of(g, o, &v)) continue;
        float bv;
        int add = scalar_consumer(g, O(g, i), "Add", &bv);
        if (add < 0 || data_consumers(g, O(g, i)) != 1) continue;
        wb[0] = K(g, o);
        wb[1] = K(g, other_input(g, add, O(g, i)));
        use(g, i);
        use(g, add);
        *node = i;
        return O(g, add);
    }
    return -1;
}

static int clip_bounds(const G *g, int n, float *lo, float *hi) {
    const OcrOnnxNode *c = N(g, n);
    *lo = attr_f(c, "min", -INFINITY);
    *hi = attr_f(c, "max", INFINITY);
    if (c->ninputs >= 2 && g->in[n][1] >= 0 && !scalar_of(g, g->in[n][1], lo)) return 0;
    if (c->ninputs >= 3 && g->in[n][2] >= 0 && !scalar_of(g, g->in[n][2], hi)) return 0;
    return 1;
}

// GELU reading t: the Gelu op (opset 20), or x · (1 + erf(x / √2)) · 0.5 as paddle2onnx writes
// it (the division by √2 may be a Mul by 1/√2; the 0.5 may scale x first or be a Div by 2).
// Returns the node giving the result (-1: none).
static int match_gelu(G *g, int t) {
    int n = consumer(g, t, "Gelu", 0);
    if (n >= 0) {
        const OcrOnnxAttr *ap = ocr_onnx_attr(N(g, n), "approximate");
        if (ap && ap->s && strcmp(ap->s, "none") != 0) return -1;  // the tanh form is another function
        use(g, n);
        return n;
    }
    float v;
    int d = scalar_consumer(g, t, "Div", &v);
    if (d < 0 || fabsf(v - 1.41421356f) > 1e-5f) {
        d = scalar_consumer(g, t, "Mul", &v);
        if (d < 0 || fabsf(v - 0.70710678f) > 1e-6f) return -1;
    }
    int e = consumer(g, O(g, d), "Erf", 0);
    int a = e >= 0 ? scalar_consumer(g, O(g, e), "Add", &v) : -1;
    if (a < 0 || v != 1.0f) return -1;
    int m = -1, last = -1, half = -1;
    FOR_READERS(g, O(g, a), i) {
        if (g->skip[i] || strcmp(N(g, i)->op_type, "Mul") != 0) continue;
        int o = other_input(g, i, O(g, a));
        if (o == t) {  // x · (1 + erf), then · 0.5 (or / 2)
            float h;
            int k = scalar_consumer(g, O(g, i), "Mul", &h);
            if (k >= 0 && h == 0.5f) m = i, last = k;
            else if ((k = scalar_consumer(g, O(g, i), "Div", &h)) >= 0 && h == 2.0f) m = i, last = k;
        } else if (o >= 0 && (half = g->producer[o]) >= 0 && !g->skip[half] && strcmp(N(g, half)->op_type, "Mul") == 0 &&
                   other_input(g, half, t) >= 0 && scalar_of(g, other_input(g, half, t), &v) && v == 0.5f) {
            m = half, last = i;  // (x · 0.5) · (1 + erf)
        }
        if (last >= 0) break;
    }
    if (last < 0) return -1;
    int nodes[] = {d, e, a, m, last};
    for (size_t k = 0; k < sizeof nodes / sizeof *nodes; k++) use(g, nodes[k]);
    return last;
}

// An activation reading t; returns its output (t itself with ACT_NONE).
static int match_act(G *g, int t, int *act, int *node, float *alpha, float *beta) {
    int n;
    *node = -1;
    if ((n = consumer(g, t, "HardSwish", 0)) >= 0) {
        *act = ACT_HSWISH;
        *node = n;
        use(g, n);
        return O(g, n);
    }
    float v;
    if ((n = scalar_consumer(g, t, "Add", &v)) >= 0 && v == 3.0f) {
        // x · clip(x + 3, 0, 6) / 6
        int clip = consumer(g, O(g, n), "Clip", 0);
        float lo, hi;
        if (clip >= 0 && clip_bounds(g, clip, &lo, &hi) && lo == 0.0f && hi == 6.0f) {
            int mul = -1;
            for (int i = 0; i < g->m->nnodes && mul < 0; i++)
                if (!g->skip[i] && strcmp(N(g, i)->op_type, "Mul") == 0 && other_input(g, i, t) == O(g, clip)) mul = i;
            float d;
            int div = mul >= 0 ? scalar_consumer(g, O(g, mul), "Div", &d) : -1;
            int ok = div >= 0 && d == 6.0f;
            if (!ok && mul >= 0 && (div = scalar_consumer(g, O(g, mul), "Mul", &d)) >= 0)
                ok = fabsf(d - 1.0f / 6.0f) < 1e-7f;
            if (ok) {
                use(g, n);
                use(g, clip);
                use(g, mul);
                use(g, div);
                *act = ACT_HSWISH;
                *node = div;
                return O(g, div);
            }
        }
    }
    // x · sigmoid(x), optionally with paddle2onnx's Mul(x, 1.0) before the Sigmoid.
    int sig = consumer(g, t, "Sigmoid", 0), one = -1;
    if (sig < 0 && (one = scalar_consumer(g, t, "Mul", &v)) >= 0 && v == 1.0f) sig = consumer(g, O(g, one), "Sigmoid", 0);
    if (sig >= 0) {
        for (int i = 0; i < g->m->nnodes; i++) {
            if (g->skip[i] || strcmp(N(g, i)->op_type, "Mul") != 0 || other_input(g, i, t) != O(g, sig)) continue;
            use(g, one);
            use(g, sig);
            use(g, i);
            *act = ACT_SWISH;
            *node = i;
            return O(g, i);
        }
    }
    if ((n = consumer(g, t, "Relu", 0)) >= 0) {
        *act = ACT_RELU;
        *node = n;
        use(g, n);
        return O(g, n);
    }
    // x · hardsigmoid(x) with slope 1/6 and offset 0.5 is hardswish (an SE gate's HardSigmoid
    // multiplies another tensor, not its own input).
    if ((n = consumer(g, t, "HardSigmoid", 0)) >= 0 && fabsf(attr_f(N(g, n), "alpha", 0.2f) - 1.0f / 6.0f) < 1e-6f &&
        attr_f(N(g, n), "beta", 0.5f) == 0.5f) {
        FOR_READERS(g, O(g, n), i) {
            if (g->skip[i] || strcmp(N(g, i)->op_type, "Mul") != 0 || other_input(g, i, O(g, n)) != t) continue;
            use(g, n);
            use(g, i);
            *act = ACT_HSWISH;
            *node = i;
            return O(g, i);
        }
    }
    if ((n = match_gelu(g, t)) >= 0) {
        *act = ACT_GELU;
        *node = n;
        return O(g, n);
    }
    if ((n = consumer(g, t, "HardSigmoid", 0)) >= 0) {
        *act = ACT_HSIG;
        *node = n;
        *alpha = attr_f(N(g, n), "alpha", 0.2f);
        *beta = attr_f(N(g, n), "beta", 0.5f);
        use(g, n);
        return O(g, n);
    }
    *act = ACT_NONE;
    return t;
}

// conv [+ bias Add] [+ BN] [+ affine] [+ activation] [+ affine], reading t.
static ocr_status_t match_unit_at(G *g, int n, Unit *u, const char *what);

static ocr_status_t match_unit(G *g, int t, Unit *u, const char *what) {
    int n = consumer(g, t, "Conv", 0);
    if (n < 0) return fail_tensor(g, t, "expected a Conv (%s), found none reading it", what);
    int second = -1;
    for (int i = n + 1; i < g->m->nnodes && second < 0; i++)
        if (!g->skip[i] && strcmp(N(g, i)->op_type, "Conv") == 0 && g->in[i][0] == t) second = i;
    if (second >= 0)
        return fail_node(g, second,
                         "a second Conv reads the same input as node #%d: parallel branches (an unfused, training-form "
                         "PPLCNetV3 rep layer?); PaddleOCR's export fuses them, import the .pdparams instead",
                         n);
    return match_unit_at(g, n, u, what);
}

// The same from the Conv node n (a branch of a fork: PPLCNetV4's stem, the LightSVTR neck).
static ocr_status_t match_unit_at(G *g, int n, Unit *u, const char *what) {
    memset(u, 0, sizeof *u);
    u->bn = u->lab_node = u->alab_node = u->act_node = -1;
    (void)what;
    u->conv = n;
    use(g, n);
    const OcrOnnxNode *c = N(g, n);
    u->w = c->ninputs > 1 ? K(g, g->in[n][1]) : NULL;
    if (!u->w || !u->w->f32 || u->w->ndim != 4) return fail_node(g, n, "the weight is not a constant 4-D float tensor");
    u->b = c->ninputs > 2 && g->in[n][2] >= 0 ? K(g, g->in[n][2]) : NULL;
    if (c->ninputs > 2 && g->in[n][2] >= 0 && (!u->b || !u->b->f32)) return fail_node(g, n, "the bias is not a constant");
    attr_pair(c, "strides", 1, u->stride);
    attr_pair(c, "dilations", 1, u->dil);
    const OcrOnnxAttr *pads = ocr_onnx_attr(c, "pads");
    for (int k = 0; k < 4; k++) u->pad[k] = pads && pads->nints == 4 ? (int)pads->ints[k] : 0;
    u->group = (int)attr_i(c, "group", 1);
    const OcrOnnxAttr *ap = ocr_onnx_attr(c, "auto_pad");
    if (ap && ap->s && strcmp(ap->s, "NOTSET") != 0) {
        // Paddle's padding="SAME" (PPLCNetV4's 2x2 stem convs): at stride 1 the pads are k - 1 in
        // all, the odd one after (SAME_UPPER) or before (SAME_LOWER); VALID is none.
        int upper = strcmp(ap->s, "SAME_UPPER") == 0, lower = strcmp(ap->s, "SAME_LOWER") == 0;
        if (!upper && !lower && strcmp(ap->s, "VALID") != 0)
            return fail_node(g, n, "auto_pad %s is not an ONNX padding mode", ap->s);
        if ((upper || lower) && (u->stride[0] != 1 || u->stride[1] != 1))
            return fail_node(g, n, "auto_pad %s at stride (%d,%d): the pads depend on the input size", ap->s, u->stride[0],
                             u->stride[1]);
        for (int d = 0; d < 2; d++) {
            int total = upper || lower ? u->dil[d] * ((int)u->w->dims[2 + d] - 1) : 0, small = total / 2;
            u->pad[d] = upper ? small : total - small;
            u->pad[d + 2] = total - u->pad[d];
        }
    }
    int y = O(g, n);
    // A Conv1D exported as Unsqueeze, Conv, Squeeze: the Squeeze of the height axis is plumbing.
    int sq = consumer(g, y, "Squeeze", 0);
    const OcrOnnxAttr *sqa = sq >= 0 ? ocr_onnx_attr(N(g, sq), "axes") : NULL;
    if (sq >= 0 && u->w->dims[2] == 1 && data_consumers(g, y) == 1 &&
        ((sqa && sqa->nints == 1 && sqa->ints[0] == 2) ||
         (N(g, sq)->ninputs > 1 && K(g, g->in[sq][1]) && K(g, g->in[sq][1])->i64 && K(g, g->in[sq][1])->numel == 1 &&
          K(g, g->in[sq][1])->i64[0] == 2))) {
        use(g, sq);
        y = O(g, sq);
    }
    if (!u->b) {
        // paddle2onnx (PIR) writes a conv bias as a following Add of a (1, OC, 1, 1) constant.
        for (int i = 0; i < g->m->nnodes; i++) {
            if (g->skip[i] || strcmp(N(g, i)->op_type, "Add") != 0) continue;
            int o = other_input(g, i, y);
            if (o < 0) continue;
            const OcrOnnxTensor *b = o != y ? K(g, o) : NULL;
            if (b && b->f32 && b->numel == u->w->dims[0] && b->numel > 1) {
                u->b = b;
                use(g, i);
                y = O(g, i);
            }
            break;
        }
    }
    int bn = consumer(g, y, "BatchNormalization", 0);
    if (bn >= 0) {
        u->bn = bn;
        use(g, bn);
        for (int k = 0; k < 4; k++) {
            u->bnt[k] = N(g, bn)->ninputs > k + 1 ? K(g, g->in[bn][k + 1]) : NULL;
            if (!u->bnt[k] || !u->bnt[k]->f32) return fail_node(g, bn, "input %d is not a constant float tensor", k + 1);
        }
        u->bn_eps = attr_f(N(g, bn), "epsilon", 1e-5f);
        y = O(g, bn);
    }
    int z = match_lab(g, y, u->lab, &u->lab_node);
    if (z >= 0) y = z;
    y = match_act(g, y, &u->act, &u->act_node, &u->hs_alpha, &u->hs_beta);
    if (u->act != ACT_NONE && u->act != ACT_HSIG) {
        z = match_lab(g, y, u->alab, &u->alab_node);
        if (z >= 0) y = z;
    }
    u->out = y;
    return OCR_OK;
}

// Reshape / Transpose / Squeeze / Unsqueeze / Flatten plumbing on the data path (Shape nodes
// that only read the size are ignored).
static int follow_shape_ops(G *g, int t) {
    static const char *const ops[] = {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", NULL};
    for (;;) {
        int next = -1;
        for (int k = 0; ops[k] && next < 0; k++) next = consumer(g, t, ops[k], 0);
        if (next < 0) return t;
        use(g, next);
        t = O(g, next);
    }
}

// A weight as the (in, out) matrix a linear layer multiplies by: a 2-D constant, or one with
// leading dimensions of 1 (an Unsqueeze folded into it) seen as 2-D; `trans` gives the transposed
// copy (Gemm with transB = 1 stores (out, in)). NULL when t is not such a constant.
static const OcrOnnxTensor *as_matrix(G *g, int t, int trans) {
    const OcrOnnxTensor *w = K(g, t);
    if (!w || !w->f32 || w->ndim < 2) return NULL;
    for (int k = 0; k + 2 < w->ndim; k++)
        if (w->dims[k] != 1) return NULL;
    int64_t r = w->dims[w->ndim - 2], c = w->dims[w->ndim - 1];
    if (w->ndim == 2 && !trans) return w;
    OcrOnnxTensor *v = new_folded(g, w, w->name);
    if (!v) return NULL;
    v->ndim = 2;
    v->dims[0] = trans ? c : r;
    v->dims[1] = trans ? r : c;
    if (trans) {
        v->f32 = own(g, (size_t)w->numel * sizeof(float));
        for (int64_t i = 0; i < r; i++)
            for (int64_t j = 0; j < c; j++) v->f32[j * r + i] = w->f32[i * c + j];
    } else {
        g->konst[t] = v;  // the 2-D view from now on (each reader would otherwise make its own)
    }
    return v;
}

// y = x·W + b reading t: MatMul(t, W) or Gemm(t, W[ᵀ], C) (alpha = beta = 1, no transA), the
// weight a constant however it is spelled, the bias a constant of `out` values either as
// Gemm's C or as an Add with the product in either order.
static ocr_status_t match_linear(G *g, int t, Lin *l, const char *what) {
    int n = -1, gemm = -1;
    const OcrOnnxTensor *w = NULL;
    for (int i = 0; i < g->m->nnodes && n < 0; i++) {
        if (g->skip[i] || g->in[i][0] != t) continue;
        if (strcmp(N(g, i)->op_type, "MatMul") == 0 && (w = as_matrix(g, g->in[i][1], 0))) n = i;
        if (strcmp(N(g, i)->op_type, "Gemm") == 0) {
            const OcrOnnxNode *gn = N(g, i);
            if (attr_i(gn, "transA", 0) || attr_f(gn, "alpha", 1.0f) != 1.0f || attr_f(gn, "beta", 1.0f) != 1.0f)
                return fail_node(g, i, "%s: Gemm with transA, alpha or beta other than 0, 1, 1", what);
            if (!(w = as_matrix(g, g->in[i][1], (int)attr_i(gn, "transB", 0))))
                return fail_node(g, i, "%s: the Gemm's weight is not a constant 2-D float tensor", what);
            n = gemm = i;
        }
    }
    if (n < 0) return fail_tensor(g, t, "expected a MatMul or Gemm with a constant 2-D weight (%s)", what);
    use(g, n);
    l->node = n;
    l->w = w;
    l->b = NULL;
    l->out = O(g, n);
    if (gemm >= 0 && N(g, gemm)->ninputs > 2 && g->in[gemm][2] >= 0) {
        const OcrOnnxTensor *c = K(g, g->in[gemm][2]);
        if (!c || !c->f32 || c->numel != w->dims[1])
            return fail_node(g, gemm, "%s: the Gemm's C is not a constant of %lld values", what, (long long)w->dims[1]);
        l->b = c;
        return OCR_OK;
    }
    for (int i = 0; i < g->m->nnodes; i++) {
        if (g->skip[i] || strcmp(N(g, i)->op_type, "Add") != 0) continue;
        int o = other_input(g, i, l->out);
        if (o < 0) continue;
        const OcrOnnxTensor *b = K(g, o);
        if (b && b->f32 && b->numel == l->w->dims[1]) {
            l->b = b;
            use(g, i);
            l->out = O(g, i);
        }
        break;
    }
    if (!l->b) return fail_node(g, n, "%s: no bias Add of %lld values follows", what, (long long)l->w->dims[1]);
    return OCR_OK;
}

// LayerNorm over the last axis: LayerNormalization, or paddle2onnx's ReduceMean, Sub, Pow 2,
// ReduceMean, Add eps, Sqrt, Div, Mul γ, Add β.
static ocr_status_t match_ln(G *g, int t, Ln *l) {
    int n = consumer(g, t, "LayerNormalization", 0);
    if (n >= 0) {
        use(g, n);
        l->node = n;
        l->g = N(g, n)->ninputs > 1 ? K(g, g->in[n][1]) : NULL;
        l->b = N(g, n)->ninputs > 2 ? K(g, g->in[n][2]) : NULL;
        l->eps = attr_f(N(g, n), "epsilon", 1e-5f);
        l->out = O(g, n);
        if (!l->g || !l->b || attr_i(N(g, n), "axis", -1) != -1)
            return fail_node(g, n, "expected constant scale and bias over the last axis");
        return OCR_OK;
    }
    int m1 = consumer(g, t, "ReduceMean", 0);
    if (m1 < 0) return fail_tensor(g, t, "expected a LayerNorm (ReduceMean ... or LayerNormalization)");
    l->node = m1;
    int sub = -1;
    for (int i = 0; i < g->m->nnodes && sub < 0; i++)
        if (!g->skip[i] && strcmp(N(g, i)->op_type, "Sub") == 0 && g->in[i][0] == t && g->in[i][1] == O(g, m1)) sub = i;
    float two = 0, eps = 0, dummy;
    int pw = sub >= 0 ? scalar_consumer(g, O(g, sub), "Pow", &two) : -1;
    int m2 = pw >= 0 ? consumer(g, O(g, pw), "ReduceMean", 0) : -1;
    int add = m2 >= 0 ? scalar_consumer(g, O(g, m2), "Add", &eps) : -1;
    int sq = add >= 0 ? consumer(g, O(g, add), "Sqrt", 0) : -1;
    int div = -1;
    for (int i = 0; sq >= 0 && i < g->m->nnodes && div < 0; i++)
        if (!g->skip[i] && strcmp(N(g, i)->op_type, "Div") == 0 && g->in[i][0] == O(g, sub) && g->in[i][1] == O(g, sq))
            div = i;
    if (div < 0 || two != 2.0f) return fail_node(g, m1, "not the LayerNorm pattern (mean, centre, square, mean, +eps, sqrt, divide)");
    const OcrOnnxAttr *ax = ocr_onnx_attr(N(g, m1), "axes");
    if (ax && (ax->nints != 1 || (ax->ints[0] != -1 && ax->ints[0] != 2)))
        return fail_node(g, m1, "the LayerNorm does not normalise the last axis");
    int mul = -1, badd = -1;
    for (int i = 0; i < g->m->nnodes && mul < 0; i++) {
        if (g->skip[i] || strcmp(N(g, i)->op_type, "Mul") != 0) continue;
        int o = other_input(g, i, O(g, div));
        if (o >= 0 && K(g, o) && K(g, o)->f32 && !scalar_of(g, o, &dummy)) mul = i;
    }
    for (int i = 0; mul >= 0 && i < g->m->nnodes && badd < 0; i++) {
        if (g->skip[i] || strcmp(N(g, i)->op_type, "Add") != 0) continue;
        int o = other_input(g, i, O(g, mul));
        if (o >= 0 && K(g, o) && K(g, o)->f32) badd = i;
    }
    if (badd < 0) return fail_node(g, div, "the LayerNorm has no per-channel scale (Mul) and shift (Add) after it");
    int nodes[] = {m1, sub, pw, m2, add, sq, div, mul, badd};
    for (size_t k = 0; k < sizeof nodes / sizeof *nodes; k++) use(g, nodes[k]);
    l->g = K(g, other_input(g, mul, O(g, div)));
    l->b = K(g, other_input(g, badd, O(g, mul)));
    l->eps = eps;
    l->out = O(g, badd);
    return OCR_OK;
}

// The Add of t and `other` (a residual connection).
static int residual_add(G *g, int t, int other) {
    for (int i = 0; i < g->m->nnodes; i++)
        if (!g->skip[i] && strcmp(N(g, i)->op_type, "Add") == 0 && other_input(g, i, t) == other && other != t) {
            use(g, i);
            return i;
        }
    return -1;
}

#define MAX_UNITS 96
#define MAX_BLOCKS 24
#define MAX_SVTR 8

typedef struct {
    Unit units[MAX_UNITS];
    int nunits;
    int stem, nblocks;
    struct {
        int dw, se1, se2, pw;  // unit indices (-1: no SE)
    } blocks[MAX_BLOCKS];
    int pool_node, pool_avg, pool_k[2], pool_s[2];
    int backbone_out;
    int svtr_neck;
    int neck[5];  // conv1, conv2, conv3, conv4, conv1x1 units
    Blk svtr[MAX_SVTR];
    int depth;
    Ln norm;
    int concat_node;
    Lin head;
    int softmax_node;
    int output;
} Net;

static ocr_status_t push_unit(G *g, Net *net, int t, const char *what, int *idx) {
    if (net->nunits == MAX_UNITS) return fail_tensor(g, t, "more than %d convolutions: not a PP-OCR recognizer", MAX_UNITS);
    OCR_TRY(match_unit(g, t, &net->units[net->nunits], what));
    *idx = net->nunits++;
    return OCR_OK;
}

// Attention between qkv and proj: the only Softmax on the data path from the qkv output, and
// the scalar that scales q (paddle2onnx writes Mul(q, s), PIR exports add 0 after it).
static ocr_status_t match_attention(G *g, Blk *b) {
    int from = b->qkv.node;
    if (b->qkv.out < 0) return fail_node(g, from, "the qkv projection has no output");
    unsigned char *reach = calloc((size_t)g->nt, 1);
    OCR_ASSERT(reach, "out of host memory");
    reach[b->qkv.out] = 1;
    int proj_in = -1, nsoft = 0;
    b->scale = 0;
    b->scale_node = b->softmax_node = -1;
    for (int i = from + 1; i < g->m->nnodes && proj_in < 0; i++) {
        if (g->skip[i]) continue;
        const OcrOnnxNode *n = N(g, i);
        int hit = 0;
        for (int k = 0; k < n->ninputs; k++) hit |= g->in[i][k] >= 0 && reach[g->in[i][k]];
        if (!hit) continue;
        if ((strcmp(n->op_type, "MatMul") == 0 && as_matrix(g, g->in[i][1], 0)) || strcmp(n->op_type, "Gemm") == 0) {
            proj_in = g->in[i][0];
            break;
        }
        use(g, i);
        for (int k = 0; k < n->noutputs; k++) reach[g->canon[g->out[i][k]]] = 1;
        float v;
        if (strcmp(n->op_type, "Softmax") == 0) {
            nsoft++;
            b->softmax_node = i;
            int64_t ax = attr_i(n, "axis", -1);
            if (ax != -1 && ax != 3) {
                free(reach);
                return fail_node(g, i, "the attention softmax runs over axis %lld, not the keys", (long long)ax);
            }
        } else if (strcmp(n->op_type, "Mul") == 0 && n->ninputs == 2 &&
                   (scalar_of(g, g->in[i][1], &v) || scalar_of(g, g->in[i][0], &v))) {
            if (b->scale_node >= 0) {
                free(reach);
                return fail_node(g, i, "a second scalar Mul inside the attention (the first is node #%d)", b->scale_node);
            }
            b->scale = v;
            b->scale_node = i;
        } else if (strcmp(n->op_type, "Add") == 0 && n->ninputs == 2 &&
                   (scalar_of(g, g->in[i][1], &v) || scalar_of(g, g->in[i][0], &v)) && v != 0.0f) {
            free(reach);
            return fail_node(g, i, "adds %g inside the attention", v);
        }
    }
    free(reach);
    if (proj_in < 0) return fail_node(g, from, "no projection MatMul after this attention's qkv");
    if (nsoft != 1) return fail_node(g, from, "the attention after this qkv has %d Softmax nodes, expected 1", nsoft);
    if (b->scale_node < 0) return fail_node(g, b->softmax_node, "no scalar scaling q before this attention softmax");
    return match_linear(g, proj_in, &b->proj, "the attention projection");
}

// SVTR blocks from h (LayerNorm, attention, residual Add, LayerNorm, MLP, residual Add) until a
// LayerNorm that no linear layer reads: the neck's final norm (to `norm`). Shared by every SVTR neck
// (v3/v4/v5 mobile, PP-OCRv5 server, PP-OCRv6's LightSVTR).
static ocr_status_t walk_svtr(G *g, int h, Blk *svtr, int max, int *depth, Ln *norm) {
    for (;;) {
        Ln ln;
        OCR_TRY(match_ln(g, h, &ln));
        int mm = -1;
        for (int i = 0; i < g->m->nnodes && mm < 0; i++)
            if (!g->skip[i] && (strcmp(N(g, i)->op_type, "MatMul") == 0 || strcmp(N(g, i)->op_type, "Gemm") == 0) &&
                g->in[i][0] == ln.out && K(g, g->in[i][1]))
                mm = i;
        if (mm < 0) {
            *norm = ln;
            return OCR_OK;
        }
        if (*depth == max) return fail_node(g, mm, "more than %d SVTR blocks", max);
        Blk *b = &svtr[(*depth)++];
        b->ln1 = ln;
        OCR_TRY(match_linear(g, ln.out, &b->qkv, "the attention qkv"));
        OCR_TRY(match_attention(g, b));
        int a1 = residual_add(g, b->proj.out, h);
        if (a1 < 0) return fail_tensor(g, b->proj.out, "the attention output is not added to the block input %s", TN(g, h));
        OCR_TRY(match_ln(g, O(g, a1), &b->ln2));
        OCR_TRY(match_linear(g, b->ln2.out, &b->fc1, "the MLP's fc1"));
        int an, act;
        float al, be;
        int y = match_act(g, b->fc1.out, &act, &an, &al, &be);
        b->act = act;
        OCR_TRY(match_linear(g, y, &b->fc2, "the MLP's fc2"));
        int a2 = residual_add(g, b->fc2.out, O(g, a1));
        if (a2 < 0) return fail_tensor(g, b->fc2.out, "the MLP output is not added to the attention residual");
        h = O(g, a2);
    }
}

// The end of every recognizer after its last linear layer: an optional Softmax over the classes,
// then the graph's one output.
static ocr_status_t walk_output(G *g, int t, int *softmax_node, int *output) {
    *softmax_node = consumer(g, t, "Softmax", 0);
    if (*softmax_node >= 0) {
        use(g, *softmax_node);
        int64_t ax = attr_i(N(g, *softmax_node), "axis", -1);
        if (ax != 2 && ax != -1) return fail_node(g, *softmax_node, "the head's Softmax runs over axis %lld, not the classes", (long long)ax);
        t = follow_shape_ops(g, O(g, *softmax_node));
    }
    int is_out = 0;
    for (int i = 0; i < g->m->noutputs; i++) {
        int id = intern(g, g->m->outputs[i]);
        is_out |= g->canon[id] == t;
    }
    if (!is_out) return fail_tensor(g, t, "the head's %s is not a graph output", *softmax_node >= 0 ? "softmax" : "output");
    if (g->m->noutputs != 1) return ocr_set_error(OCR_ERR_FORMAT, "%s: the graph has %d outputs, a recognizer has one", g->file, g->m->noutputs);
    *output = t;
    return OCR_OK;
}

// The image input: the graph input that is not an initializer.
static ocr_status_t image_input(G *g, int *x) {
    if (g->m->ninputs < 1) return ocr_set_error(OCR_ERR_FORMAT, "%s: the graph has no input", g->file);
    *x = -1;
    for (int i = 0; i < g->m->ninputs && *x < 0; i++) {
        int id = intern(g, g->m->inputs[i]);
        if (!K(g, id)) *x = g->canon[id];
    }
    if (*x < 0) return ocr_set_error(OCR_ERR_FORMAT, "%s: every graph input is an initializer", g->file);
    return OCR_OK;
}

static ocr_status_t walk(G *g, Net *net) {
    memset(net, 0, sizeof *net);
    int x = -1;
    OCR_TRY(image_input(g, &x));
    OCR_TRY(push_unit(g, net, x, "the stem convolution", &net->stem));
    int t = net->units[net->stem].out;
    // Depthwise-separable blocks: dw conv [SE] pw conv.
    for (;;) {
        int c = consumer(g, t, "Conv", 0);
        if (c < 0) break;
        const OcrOnnxTensor *w = K(g, g->in[c][1]);
        int group = (int)attr_i(N(g, c), "group", 1);
        if (!w || w->ndim != 4 || group <= 1 || w->dims[1] != 1) break;  // not depthwise: the neck
        if (net->nblocks == MAX_BLOCKS) return fail_node(g, c, "more than %d blocks", MAX_BLOCKS);
        int bi = net->nblocks++;
        OCR_TRY(push_unit(g, net, t, "a depthwise convolution", &net->blocks[bi].dw));
        t = net->units[net->blocks[bi].dw].out;
        net->blocks[bi].se1 = net->blocks[bi].se2 = -1;
        int gap = consumer(g, t, "GlobalAveragePool", 0);
        if (gap < 0) {
            int rm = consumer(g, t, "ReduceMean", 0);
            const OcrOnnxAttr *ax = rm >= 0 ? ocr_onnx_attr(N(g, rm), "axes") : NULL;
            if (ax && ax->nints == 2 && ax->ints[0] == 2 && ax->ints[1] == 3) gap = rm;
        }
        if (gap >= 0) {
            use(g, gap);
            OCR_TRY(push_unit(g, net, O(g, gap), "the SE gate's first convolution", &net->blocks[bi].se1));
            OCR_TRY(push_unit(g, net, net->units[net->blocks[bi].se1].out, "the SE gate's second convolution",
                              &net->blocks[bi].se2));
            int gate = net->units[net->blocks[bi].se2].out, mul = -1;
            for (int i = 0; i < g->m->nnodes && mul < 0; i++)
                if (!g->skip[i] && strcmp(N(g, i)->op_type, "Mul") == 0 && other_input(g, i, t) == gate) mul = i;
            if (mul < 0) return fail_tensor(g, gate, "the SE gate is not multiplied into the block's feature map");
            use(g, mul);
            t = O(g, mul);
        }
        OCR_TRY(push_unit(g, net, t, "a pointwise convolution", &net->blocks[bi].pw));
        t = net->units[net->blocks[bi].pw].out;
    }
    if (net->nblocks == 0) return fail_tensor(g, t, "expected depthwise-separable blocks after the stem");
    int pool = consumer(g, t, "AveragePool", 0);
    net->pool_avg = pool >= 0;
    if (pool < 0) pool = consumer(g, t, "MaxPool", 0);
    if (pool < 0) return fail_tensor(g, t, "expected the backbone's last AveragePool/MaxPool");
    use(g, pool);
    net->pool_node = pool;
    attr_pair(N(g, pool), "kernel_shape", 1, net->pool_k);
    attr_pair(N(g, pool), "strides", 1, net->pool_s);
    const OcrOnnxAttr *pp = ocr_onnx_attr(N(g, pool), "pads");
    for (int k = 0; pp && k < pp->nints; k++)
        if (pp->ints[k]) return fail_node(g, pool, "the last pool is padded");
    if (attr_i(N(g, pool), "ceil_mode", 0)) return fail_node(g, pool, "the last pool uses ceil_mode");
    t = net->backbone_out = O(g, pool);
    // Neck.
    if (consumer(g, t, "Conv", 0) >= 0) {
        net->svtr_neck = 1;
        OCR_TRY(push_unit(g, net, t, "the neck's conv1", &net->neck[0]));
        OCR_TRY(push_unit(g, net, net->units[net->neck[0]].out, "the neck's conv2", &net->neck[1]));
        OCR_TRY(walk_svtr(g, follow_shape_ops(g, net->units[net->neck[1]].out), net->svtr, MAX_SVTR, &net->depth, &net->norm));
        int t3 = follow_shape_ops(g, net->norm.out);
        OCR_TRY(push_unit(g, net, t3, "the neck's conv3", &net->neck[2]));
        int cat = consumer(g, net->units[net->neck[2]].out, "Concat", -1);
        if (cat < 0) return fail_tensor(g, net->units[net->neck[2]].out, "expected the neck's channel Concat");
        use(g, cat);
        net->concat_node = cat;
        if (N(g, cat)->ninputs != 2 || g->in[cat][0] != net->backbone_out || g->in[cat][1] != net->units[net->neck[2]].out ||
            attr_i(N(g, cat), "axis", 0) != 1)
            return fail_node(g, cat, "expected Concat([backbone output %s, conv3 output], axis 1)", TN(g, net->backbone_out));
        OCR_TRY(push_unit(g, net, O(g, cat), "the neck's conv4", &net->neck[3]));
        OCR_TRY(push_unit(g, net, net->units[net->neck[3]].out, "the neck's conv1x1", &net->neck[4]));
        t = net->units[net->neck[4]].out;
    }
    t = follow_shape_ops(g, t);
    OCR_TRY(match_linear(g, t, &net->head, "the CTC head"));
    t = follow_shape_ops(g, net->head.out);  // a Gemm's 2-D output reshaped back to (N, T, C)
    int after = consumer(g, t, "MatMul", 0);
    if (after < 0) after = consumer(g, t, "Gemm", 0);
    if (after >= 0) return fail_node(g, after, "a second MatMul after the CTC head (Head.mid_channels is not supported)");
    return walk_output(g, t, &net->softmax_node, &net->output);
}

// ---- the variant --------------------------------------------------------------------------------------

static int64_t oc_of(const Unit *u) { return u->w->dims[0]; }

static ocr_status_t expect_unit(const G *g, const Unit *u, const char *what, int want_bn, int want_bias, int want_lab,
                                int act, int want_alab) {
    if ((u->bn >= 0) != want_bn)
        return fail_node(g, u->conv, "%s: %s a BatchNormalization, the network %s", what, u->bn >= 0 ? "has" : "lacks",
                         want_bn ? "needs one" : "has none there");
    if ((u->b != NULL) != want_bias)
        return fail_node(g, u->conv, "%s: %s a bias, the network %s", what, u->b ? "has" : "lacks",
                         want_bias ? "needs one" : "has none");
    if ((u->lab[0] != NULL) != want_lab)
        return fail_node(g, u->conv, "%s: %s a learnable affine block after the conv, the network %s", what,
                         u->lab[0] ? "has" : "lacks", want_lab ? "needs one" : "has none");
    if (u->act != act)
        return fail_node(g, u->act_node >= 0 ? u->act_node : u->conv, "%s: activation %s, the network uses %s", what,
                         oi_act_names[u->act], oi_act_names[act]);
    if ((u->alab[0] != NULL) != want_alab)
        return fail_node(g, u->conv, "%s: %s a learnable affine block after the activation, the network %s", what,
                         u->alab[0] ? "has" : "lacks", want_alab ? "needs one" : "has none");
    if (u->act == ACT_HSIG && (u->hs_alpha != 0.1666667f || u->hs_beta != 0.5f))
        return fail_node(g, u->act_node, "HardSigmoid alpha %.9g beta %g, PaddleOCR's SE gate uses 0.1666667 and 0.5",
                         u->hs_alpha, u->hs_beta);
    if (u->bn >= 0 && fabsf(u->bn_eps - 1e-5f) > 1e-9f)
        return fail_node(g, u->bn, "%s: BatchNormalization epsilon %g, the network uses 1e-5", what, u->bn_eps);
    if (u->dil[0] != 1 || u->dil[1] != 1) return fail_node(g, u->conv, "%s: dilated convolution", what);
    return OCR_OK;
}

// Scales whose channel formula reproduces every block's output channels (PPLCNetV3).
static double lcnet_scale(const Net *net) {
    static const double common[] = {0.95, 0.5, 0.35, 0.75, 1.0, 1.5, 2.0};
    // Base channels of the 14 blocks (rec_lcnetv3.py NET_CONFIG), then the stem (16).
    static const int base[14] = {32, 64, 64, 128, 128, 256, 256, 256, 256, 256, 512, 512, 512, 512};
    if (net->nblocks != 14) return 0;
    for (int pass = 0; pass < 2; pass++) {
        int n = pass ? 400 : (int)(sizeof common / sizeof *common);
        for (int k = 0; k < n; k++) {
            double s = pass ? (k + 1) / 100.0 : common[k];
            int ok = ocr_lcnet_make_divisible(16 * s) == oc_of(&net->units[net->stem]);
            for (int b = 0; ok && b < 14; b++) ok = ocr_lcnet_make_divisible(base[b] * s) == oc_of(&net->units[net->blocks[b].pw]);
            if (ok) return s;
        }
    }
    return 0;
}

static int count_lines(const char *s);

// FNV-1a (64-bit) of a dictionary's text with CR before LF dropped and without the final
// newline: the same for the file with CRLF or LF line ends, with or without the last newline.
static uint64_t dict_fnv(const char *d) {
    size_t n = strlen(d);
    while (n && (d[n - 1] == '\n' || d[n - 1] == '\r')) n--;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        if (d[i] == '\r' && d[i + 1] == '\n') continue;
        h = (h ^ (unsigned char)d[i]) * 1099511628211ull;
    }
    return h;
}

static ocr_status_t identify(const G *g, const Net *net, OcrArch *a, OcrOnnxImportInfo *info, const char *dict) {
    memset(a, 0, sizeof *a);
    snprintf(a->algorithm, sizeof a->algorithm, "SVTR_LCNet");
    a->in_channels = (int)net->units[net->stem].w->dims[1];
    if (a->in_channels < 1 || a->in_channels > 4)
        return fail_node(g, net->units[net->stem].conv, "the stem reads %d channels (1 to 4 are built)", a->in_channels);
    a->img_h = 48;
    a->img_w = 320;
    a->seed = 1024;
    a->fc_decay = 1e-5;
    const Unit *dw0 = &net->units[net->blocks[0].dw];
    char bb[96];
    if (dw0->bn >= 0 && !dw0->b && !dw0->lab[0] && dw0->act == ACT_HSWISH) {
        a->backbone = OCR_BACKBONE_MV1E;
        info->version = "PP-OCRv3";
        int64_t last = oc_of(&net->units[net->blocks[net->nblocks - 1].pw]);
        a->mv1e.scale = last / 1024.0;
        if (net->nblocks != 13 || last % 8)
            return fail_node(g, net->units[net->blocks[net->nblocks - 1].pw].conv,
                             "MobileNetV1Enhance has 13 blocks ending in 1024·scale channels; the graph has %d ending in %lld",
                             net->nblocks, (long long)last);
        const Unit *l = &net->units[net->blocks[12].dw];
        if (l->stride[0] < 1 || l->stride[0] > 4 || l->stride[1] < 1 || l->stride[1] > 4)
            return fail_node(g, l->conv, "last block stride (%d,%d) is outside Architecture.Backbone.last_conv_stride's 1..4",
                             l->stride[0], l->stride[1]);
        a->mv1e.last_conv_stride[0] = l->stride[0];
        a->mv1e.last_conv_stride[1] = l->stride[1];
        a->mv1e.last_pool_avg = net->pool_avg;
        if (net->pool_avg) {
            if (net->pool_k[0] < 1 || net->pool_k[0] > 8 || net->pool_k[1] < 1 || net->pool_k[1] > 8)
                return fail_node(g, net->pool_node, "AveragePool kernel (%d,%d) is outside last_pool_kernel_size's 1..8",
                                 net->pool_k[0], net->pool_k[1]);
            if (net->pool_k[0] != net->pool_s[0] || net->pool_k[1] != net->pool_s[1])
                return fail_node(g, net->pool_node, "AveragePool kernel (%d,%d) with stride (%d,%d); the network pools with kernel = stride",
                                 net->pool_k[0], net->pool_k[1], net->pool_s[0], net->pool_s[1]);
            a->mv1e.last_pool_kernel[0] = net->pool_k[0];
            a->mv1e.last_pool_kernel[1] = net->pool_k[1];
        } else {
            if (net->pool_k[0] != 2 || net->pool_k[1] != 2 || net->pool_s[0] != 2 || net->pool_s[1] != 2)
                return fail_node(g, net->pool_node, "MaxPool must be 2x2 with stride 2 (MobileNetV1Enhance's max pool)");
            a->mv1e.last_pool_kernel[0] = a->mv1e.last_pool_kernel[1] = 2;
        }
        snprintf(bb, sizeof bb, "MobileNetV1Enhance %g", a->mv1e.scale);
        info->deploy = 0;
    } else if (dw0->bn < 0 && dw0->b && dw0->lab[0] && dw0->act == ACT_HSWISH && dw0->alab[0]) {
        a->backbone = OCR_BACKBONE_LCNETV3;
        info->version = "PP-OCRv4";
        a->lcnet.scale = lcnet_scale(net);
        if (a->lcnet.scale == 0)
            return fail_node(g, net->units[net->blocks[net->nblocks - 1].pw].conv,
                             "no PPLCNetV3 scale gives these channels (%d blocks, the last with %lld)", net->nblocks,
                             (long long)oc_of(&net->units[net->blocks[net->nblocks - 1].pw]));
        a->lcnet.conv_kxk_num = 4;
        a->lcnet.lab_lr = 0.1;
        for (int i = 0; i < 6; i++) a->lcnet.lr_mult_list[i] = 1.0;
        a->lcnet.deploy = 1;
        if (!net->pool_avg || net->pool_k[0] != 3 || net->pool_k[1] != 2 || net->pool_s[0] != 3 || net->pool_s[1] != 2)
            return fail_node(g, net->pool_node, "PPLCNetV3's exported pool is AveragePool kernel and stride (3, 2)");
        snprintf(bb, sizeof bb, "PPLCNetV3 %g (deploy-fused)", a->lcnet.scale);
        info->deploy = 1;
    } else {
        return fail_node(g, dw0->conv,
                         "the first block is neither MobileNetV1Enhance's (conv, BN, HardSwish) nor PPLCNetV3's deploy "
                         "form (conv with bias, affine, hardswish, affine): BN %s, bias %s, affine %s, activation %s",
                         dw0->bn >= 0 ? "yes" : "no", dw0->b ? "yes" : "no", dw0->lab[0] ? "yes" : "no", oi_act_names[dw0->act]);
    }
    char neck[96] = "Im2Seq neck";
    a->neck_svtr = net->svtr_neck;
    if (net->svtr_neck) {
        const Unit *c1 = &net->units[net->neck[0]];
        SvtrNeckSpec n;
        memset(&n, 0, sizeof n);
        n.dims = (int)oc_of(&net->units[net->neck[4]]);
        n.hidden = (int)oc_of(&net->units[net->neck[1]]);
        n.kernel[0] = (int)c1->w->dims[2];
        n.kernel[1] = (int)c1->w->dims[3];
        n.depth = net->depth;
        if (net->depth < 1) return fail_node(g, net->norm.node, "the SVTR neck has no blocks");
        float s = net->svtr[0].scale;
        int hd = s > 0 ? (int)lrint(1.0 / ((double)s * s)) : 0;
        if (hd <= 0 || n.hidden % hd)
            return fail_node(g, net->svtr[0].scale_node, "attention scale %.9g: no head size divides %d", s, n.hidden);
        n.heads = n.hidden / hd;
        n.mlp_ratio = (float)net->svtr[0].fc1.w->dims[1] / (float)n.hidden;
        n.drop = 0.1f;
        n.attn_drop = 0.1f;
        a->neck = n;
        snprintf(neck, sizeof neck, "SVTR neck (dims %d, hidden %d, kernel %dx%d, depth %d, %d heads)", n.dims, n.hidden,
                 n.kernel[0], n.kernel[1], n.depth, n.heads);
    }
    a->num_classes = (int)net->head.w->dims[1];
    if (a->num_classes < 2) return fail_node(g, net->head.node, "the head has %d classes", a->num_classes);
    info->language = a->num_classes == 97 ? "en" : a->num_classes == 6625 ? "ch" : "other";
    // PP-OCRv5 mobile is PP-OCRv4 mobile's network, conv for conv, with the 18,385 classes of
    // ppocrv5_dict.txt (18,383 lines + blank + space); the dictionary, when there is one, must
    // be that file for the name to hold.
    char dict_note[96] = "";
    info->dictionary_known = dict && dict_fnv(dict) == OCR_PPOCRV5_DICT_FNV ? "ppocrv5_dict" : NULL;
    if (a->backbone == OCR_BACKBONE_LCNETV3 && a->num_classes == OCR_PPOCRV5_CLASSES) {
        if (!dict || info->dictionary_known) {
            info->version = "PP-OCRv5";
            info->language = "mobile";
        }
        oi_dict_note(dict_note, sizeof dict_note, dict, OCR_PPOCRV5_DICT_FNV, "ppocrv5_dict");
    }
    snprintf(info->variant, sizeof info->variant, "%s %s: %s + %s + CTC head (%d classes)%s", info->version, info->language, bb,
             neck, a->num_classes, dict_note);
    return OCR_OK;
}

// ---- pairing with the network ---------------------------------------------------------------------

static const char *dims_str(const OcrOnnxTensor *t, char *buf, size_t n) {
    size_t u = (size_t)snprintf(buf, n, "{");
    for (int d = 0; d < t->ndim && u < n; d++) u += (size_t)snprintf(buf + u, n - u, "%s%lld", d ? "," : "", (long long)t->dims[d]);
    if (u < n) snprintf(buf + u, n - u, "}");
    return buf;
}

static const char *tname(const OcrOnnxTensor *t) { return t && t->name ? t->name : "(unnamed)"; }

static ocr_status_t put(Ctx *c, OcrParamTable *tab, const char *name, const OcrOnnxTensor *src, const float *data, int node) {
    int i = ocr_params_find(tab, name);
    if (i < 0) return fail_node(c->g, node, "the network has no %s for %s", name, tname(src));
    if (c->loaded >= c->params->count + c->stats->count) return fail_node(c->g, node, "more tensors than the network has");
    if (tab->items[i].numel != src->numel) {
        char a[64];
        return fail_node(c->g, node, "%s is %s (%lld values), %s needs %lld", tname(src), dims_str(src, a, sizeof a),
                         (long long)src->numel, name, (long long)tab->items[i].numel);
    }
    OcrTensor t = ocr_params_tensor(tab, i);
    ocr_tensor_from_f32(&t, data ? data : src->f32);
    c->taken[c->loaded] = src;
    c->loaded++;
    c->values += src->numel;
    return OCR_OK;
}

static ocr_status_t put_conv(Ctx *c, const OcrOpInfo *o, const Unit *u) {
    char buf[300], a[64];
    const G *g = c->g;
    int wi = ocr_params_find(c->params, ocr_name(buf, sizeof buf, "%s.weight", o->name));
    if (wi < 0) return fail_node(g, u->conv, "the network's %s has no weight", o->name);
    const OcrParamInfo *p = &c->params->items[wi];
    int64_t oc = p->shape[0], kh = p->shape[1], kw = p->shape[2], cg = p->shape[3];
    const OcrOnnxTensor *w = u->w;
    if (w->dims[0] != oc || w->dims[1] != cg || w->dims[2] != kh || w->dims[3] != kw)
        return fail_node(g, u->conv, "weight %s is %s, %s needs {%lld,%lld,%lld,%lld}", tname(w), dims_str(w, a, sizeof a),
                         o->name, (long long)oc, (long long)cg, (long long)kh, (long long)kw);
    if (u->stride[0] != o->conv_stride[0] || u->stride[1] != o->conv_stride[1] || u->pad[0] != o->conv_pad[0] ||
        u->pad[1] != o->conv_pad[1] || u->pad[2] != o->conv_pad[0] || u->pad[3] != o->conv_pad[1] ||
        u->group != o->conv_groups)
        return fail_node(g, u->conv,
                         "strides (%d,%d) pads (%d,%d,%d,%d) group %d, %s has strides (%d,%d) pads (%d,%d) group %d", u->stride[0],
                         u->stride[1], u->pad[0], u->pad[1], u->pad[2], u->pad[3], u->group, o->name, o->conv_stride[0],
                         o->conv_stride[1], o->conv_pad[0], o->conv_pad[1], o->conv_groups);
    float *t = malloc((size_t)w->numel * sizeof(float));
    OCR_ASSERT(t, "out of host memory");
    for (int64_t oo = 0; oo < oc; oo++)  // OIHW -> (OC, KH, KW, C/groups)
        for (int64_t i = 0; i < cg; i++)
            for (int64_t y = 0; y < kh; y++)
                for (int64_t x = 0; x < kw; x++)
                    t[((oo * kh + y) * kw + x) * cg + i] = w->f32[((oo * cg + i) * kh + y) * kw + x];
    ocr_status_t st = put(c, c->params, p->name, w, t, u->conv);
    free(t);
    if (st != OCR_OK) return st;
    int has_bias = ocr_params_find(c->params, ocr_name(buf, sizeof buf, "%s.bias", o->name)) >= 0;
    if (has_bias != (u->b != NULL))
        return fail_node(g, u->conv, "%s a bias, %s %s", u->b ? "has" : "has no", o->name, has_bias ? "needs one" : "has none");
    return has_bias ? put(c, c->params, buf, u->b, NULL, u->conv) : OCR_OK;
}

static ocr_status_t put_pair(Ctx *c, const OcrOpInfo *o, const OcrOnnxTensor *w, const OcrOnnxTensor *b, const char *wn,
                             const char *bnm, int node) {
    char buf[300];
    int wi = ocr_params_find(c->params, ocr_name(buf, sizeof buf, "%s.%s", o->name, wn));
    if (wi < 0) return fail_node(c->g, node, "the network's %s has no %s", o->name, wn);
    const OcrParamInfo *p = &c->params->items[wi];
    // The same dimensions once those of size 1 are dropped (a LayerNorm scale may come as
    // (1, 1, C) when the exporter reshaped it; a learnable affine scalar as () or (1)).
    int64_t wd[OCR_ONNX_MAX_DIMS] = {0}, pd[OCR_ONNX_MAX_DIMS] = {0};
    int nw = 0, np = 0;
    for (int d = 0; d < w->ndim; d++)
        if (w->dims[d] != 1) wd[nw++] = w->dims[d];
    for (int d = 0; d < p->ndim && np < OCR_ONNX_MAX_DIMS; d++)
        if (p->shape[d] != 1) pd[np++] = p->shape[d];
    int same = nw == np;
    for (int d = 0; same && d < nw; d++) same = wd[d] == pd[d];
    if (!same) {
        char a[64];
        return fail_node(c->g, node, "%s is %s, %s needs %lld values (%d-D)", tname(w), dims_str(w, a, sizeof a), p->name,
                         (long long)p->numel, p->ndim);
    }
    OCR_TRY(put(c, c->params, p->name, w, NULL, node));
    return put(c, c->params, ocr_name(buf, sizeof buf, "%s.%s", o->name, bnm), b, NULL, node);
}

// The LayerNorms and linear layers in the network's order (its op table's): per SVTR block ln1,
// ln2 and qkv, proj, fc1, fc2; then the neck's final norm (NULL: none) and the head's layers.
static void norms_and_linears(const Blk *svtr, int depth, const Ln *norm, const Lin *head, int nhead, const Ln **lns, int *nln,
                              const Lin **lins, int *nlin) {
    *nln = *nlin = 0;
    for (int b = 0; b < depth; b++) {
        lns[(*nln)++] = &svtr[b].ln1;
        lns[(*nln)++] = &svtr[b].ln2;
        lins[(*nlin)++] = &svtr[b].qkv;
        lins[(*nlin)++] = &svtr[b].proj;
        lins[(*nlin)++] = &svtr[b].fc1;
        lins[(*nlin)++] = &svtr[b].fc2;
    }
    if (norm) lns[(*nln)++] = norm;
    for (int k = 0; k < nhead; k++) lins[(*nlin)++] = &head[k];
}

static ocr_status_t pair_all(Ctx *c, const Net *net) {
    const G *g = c->g;
    const OcrOpTable *ops = ocr_model_ops(c->model);
    const Ln *lns[2 * MAX_SVTR + 1];
    const Lin *lins[4 * MAX_SVTR + 1];
    int nln, nlin;
    norms_and_linears(net->svtr, net->depth, net->svtr_neck ? &net->norm : NULL, &net->head, 1, lns, &nln, lins, &nlin);
    int ku = -1, kl = 0, kn = 0, kb = 0, ka = 0, katt = 0;
    static const char *const bn_ours[4] = {"weight", "bias", "_mean", "_variance"};
    char buf[300];
    for (int i = 0; i < ops->count; i++) {
        const OcrOpInfo *o = &ops->items[i];
        const char *ty = o->type;
        if (strcmp(ty, "conv2d") == 0) {
            if (ku >= 0) {
                const Unit *u = &net->units[ku];
                if (kb != (u->bn >= 0) || ka != (u->lab[0] != NULL) + (u->alab[0] != NULL))
                    return fail_node(g, u->conv, "%d BatchNormalization and %d affine blocks follow it, the network has %d and %d",
                                     u->bn >= 0, (u->lab[0] != NULL) + (u->alab[0] != NULL), kb, ka);
            }
            if (++ku >= net->nunits)
                return fail_tensor(g, net->output, "the graph has %d convolutions, the network's %s has none in the graph",
                                   net->nunits, o->name);
            kb = ka = 0;
            OCR_TRY(put_conv(c, o, &net->units[ku]));
        } else if (strcmp(ty, "batchnorm") == 0) {
            const Unit *u = ku >= 0 ? &net->units[ku] : NULL;
            if (!u || u->bn < 0 || kb++)
                return fail_node(g, u ? u->conv : 0, "no BatchNormalization in the graph for the network's %s", o->name);
            for (int r = 0; r < 4; r++)
                OCR_TRY(put(c, r < 2 ? c->params : c->stats, ocr_name(buf, sizeof buf, "%s.%s", o->name, bn_ours[r]), u->bnt[r],
                            NULL, u->bn));
        } else if (strcmp(ty, "affine") == 0) {
            // The unit's affine blocks in forward order: after the conv, after the activation.
            const Unit *u = ku >= 0 ? &net->units[ku] : NULL;
            const OcrOnnxTensor *const *list[2];
            int nodes[2], n = 0;
            if (u && u->lab[0]) list[n] = u->lab, nodes[n++] = u->lab_node;
            if (u && u->alab[0]) list[n] = u->alab, nodes[n++] = u->alab_node;
            if (ka >= n)
                return fail_node(g, u ? u->conv : 0, "no learnable affine block in the graph for the network's %s", o->name);
            OCR_TRY(put_pair(c, o, list[ka][0], list[ka][1], "scale", "bias", nodes[ka]));
            ka++;
        } else if (strcmp(ty, "layernorm") == 0) {
            if (kn >= nln) return fail_tensor(g, net->output, "no LayerNorm in the graph for the network's %s", o->name);
            const Ln *l = lns[kn++];
            float want = strstr(o->name, "svtr_block") ? 1e-5f : 1e-6f;
            if (l->eps != want) return fail_node(g, l->node, "LayerNorm epsilon %g, %s uses %g", l->eps, o->name, want);
            OCR_TRY(put_pair(c, o, l->g, l->b, "weight", "bias", l->node));
        } else if (strcmp(ty, "linear") == 0) {
            if (kl >= nlin) return fail_tensor(g, net->output, "no MatMul in the graph for the network's %s", o->name);
            const Lin *l = lins[kl++];
            OCR_TRY(put_pair(c, o, l->w, l->b, "weight", "bias", l->node));
        } else if (strcmp(ty, "attention") == 0) {
            if (katt >= net->depth) return fail_tensor(g, net->output, "no attention in the graph for the network's %s", o->name);
            const Blk *b = &net->svtr[katt++];
            int heads = ocr_model_arch(c->model)->neck.heads, hd = ocr_model_arch(c->model)->neck.hidden / heads;
            float want = (float)pow((double)hd, -0.5);
            if (fabsf(b->scale - want) > 1e-7f)
                return fail_node(g, b->scale_node, "scales q by %.9g, %d heads of %d need %.9g", b->scale, heads, hd, want);
            if (b->act != ACT_SWISH)
                return fail_node(g, b->fc1.node, "the MLP activation is %s, the network uses swish", oi_act_names[b->act]);
        }
    }
    if (ku + 1 != net->nunits)
        return fail_node(g, net->units[ku + 1].conv, "a convolution the network does not have (it has %d, the graph %d)", ku + 1,
                         net->nunits);
    const Unit *u = &net->units[ku];
    if (kb != (u->bn >= 0) || ka != (u->lab[0] != NULL) + (u->alab[0] != NULL))
        return fail_node(g, u->conv, "the last conv's BN/affine blocks do not match the network");
    if (kl != nlin) return fail_node(g, lins[kl]->node, "a MatMul the network does not have");
    if (kn != nln) return fail_node(g, lns[kn]->node, "a LayerNorm the network does not have");
    return OCR_OK;
}

static ocr_status_t check_units(const G *g, const Net *net, const OcrArch *a) {
    int v4 = a->backbone == OCR_BACKBONE_LCNETV3;
    const Unit *s = &net->units[net->stem];
    OCR_TRY(expect_unit(g, s, "the stem", 1, 0, 0, v4 ? ACT_NONE : ACT_HSWISH, 0));
    for (int b = 0; b < net->nblocks; b++) {
        char what[64];
        snprintf(what, sizeof what, "block %d's depthwise conv", b);
        OCR_TRY(expect_unit(g, &net->units[net->blocks[b].dw], what, !v4, v4, v4, ACT_HSWISH, v4));
        snprintf(what, sizeof what, "block %d's pointwise conv", b);
        OCR_TRY(expect_unit(g, &net->units[net->blocks[b].pw], what, !v4, v4, v4, ACT_HSWISH, v4));
        if (net->blocks[b].se1 >= 0) {
            OCR_TRY(expect_unit(g, &net->units[net->blocks[b].se1], "the SE gate's conv1", 0, 1, 0, ACT_RELU, 0));
            OCR_TRY(expect_unit(g, &net->units[net->blocks[b].se2], "the SE gate's conv2", 0, 1, 0, ACT_HSIG, 0));
        }
    }
    static const char *const neck_names[5] = {"the neck's conv1", "conv2", "conv3", "conv4", "conv1x1"};
    for (int k = 0; net->svtr_neck && k < 5; k++) OCR_TRY(expect_unit(g, &net->units[net->neck[k]], neck_names[k], 1, 0, 0, ACT_SWISH, 0));
    return OCR_OK;
}

static int count_lines(const char *s) {
    if (!s || !*s) return 0;
    int n = 1;
    for (const char *p = s; *p; p++)
        if (*p == '\n' && p[1]) n++;
    return n;
}

ocr_status_t ocr_import_onnx(OcrModel **out, const OcrOnnxModel *m, const char *name, OcrOnnxImportInfo *info_out) {
    return ocr_import_onnx_dict(out, m, name, NULL, info_out);
}

ocr_status_t ocr_import_onnx_dict(OcrModel **out, const OcrOnnxModel *m, const char *name, const char *dictionary,
                                  OcrOnnxImportInfo *info_out) {
    *out = NULL;
    OcrOnnxImportInfo info;
    memset(&info, 0, sizeof info);
    const char *meta_dict = ocr_onnx_metadata(m, "character");
    const char *dict = dictionary ? dictionary : meta_dict && *meta_dict ? meta_dict : NULL;
    G g;
    g_build(&g, m, name);
    Net *net = calloc(1, sizeof *net);
    OCR_ASSERT(net, "out of host memory");
    OcrArch arch;
    OcrModel *model = NULL;
    Ctx c = {&g, NULL, NULL, NULL, 0, 0, NULL};
    ocr_status_t st;
    // PP-OCRv6 (PPLCNetV4: GELU in the backbone) has its own walker (onnx_import_lcnetv4.c).
    const int v6 = oi_is_lcnetv4(&g);
    // PP-OCRv5 server (PPHGNetV2_B4: StemBlock and HG blocks) likewise (onnx_import_hgnet.c).
    const int hg = !v6 && oi_is_hgnet(&g);
    if (v6) {
        st = oi_import_lcnetv4(&g, dict, &c, &arch, &info);
        model = c.model;
    } else if (hg) {
        st = oi_import_hgnet(&g, dict, &c, &arch, &info);
        model = c.model;
    } else {
        st = walk(&g, net);
        if (st == OCR_OK) st = identify(&g, net, &arch, &info, dict);
        if (st == OCR_OK) st = check_units(&g, net, &arch);
        if (st == OCR_OK) st = oi_ctx_create(&c, &arch);
        model = c.model;
        if (st == OCR_OK) st = pair_all(&c, net);
    }
    if (st == OCR_OK && c.loaded != c.params->count + c.stats->count)
        st = ocr_set_error(OCR_ERR_INTERNAL, "%s: %d of the network's %d tensors were filled", name, c.loaded,
                           c.params->count + c.stats->count);
    if (st == OCR_OK) {
        for (int i = 0; i < m->nnodes; i++) info.nodes_walked += g.used[i];
        info.tensors_loaded = c.loaded;
        info.values_loaded = c.values;
        if (!v6 && !hg) info.softmax_output = net->softmax_node >= 0;
        info.dictionary = dict;
        info.dictionary_from_file = dictionary != NULL;
        info.dictionary_lines = count_lines(info.dictionary);
        info.config = ocr_import_suggest_config(&arch, NULL, 0);
        for (int i = 0; i < m->ninits + m->nnodes; i++) {
            const OcrOnnxTensor *t = NULL;
            if (i < m->ninits) {
                t = &m->inits[i];
            } else if (strcmp(m->nodes[i - m->ninits].op_type, "Constant") == 0) {
                const OcrOnnxAttr *v = ocr_onnx_attr(&m->nodes[i - m->ninits], "value");
                t = v ? v->t : NULL;
            }
            if (!t) continue;
            info.constants_total++;
            int taken = 0;
            for (int k = 0; k < c.loaded && !taken; k++) {
                const OcrOnnxTensor *x = c.taken[k];
                if (x >= g.folded && x < g.folded + g.nfolded) x = g.folded_src[x - g.folded];
                taken = x == t;
            }
            if (taken) continue;
            const char *nm = t->name ? t->name : "(unnamed)";
            if (t->f32 && t->numel > 1) {
                if (info.unused_arrays < OCR_ONNX_MAX_LISTED) info.unused_array_names[info.unused_arrays] = nm;
                info.unused_arrays++;
            } else {
                if (info.unused_helpers < OCR_ONNX_MAX_LISTED) info.unused_helper_names[info.unused_helpers] = nm;
                info.unused_helpers++;
            }
        }
    }
    free(c.taken);
    free(net);
    g_free(&g);
    if (st != OCR_OK) {
        ocr_model_free(model);
        return st;
    }
    if (info_out) *info_out = info;
    *out = model;
    return OCR_OK;
}

ocr_status_t ocr_import_ppocrv4_onnx(OcrModel **out, const OcrOnnxModel *onnx, const char *name) {
    return ocr_import_onnx(out, onnx, name, NULL);
}

// Our configs' architectures (configs/rec_ppocrv3_en.json, rec_ppocrv4_{ch,en}.json,
// rec_ppocrv5_mobile.json): the
// variant decides the file; what differs from it becomes -o overrides.
const char *ocr_import_suggest_config(const OcrArch *a, char *ov, size_t size) {
    const char *cfg = NULL;
    size_t u = 0;
    char tmp[512] = "";
#define OV(...) (u < sizeof tmp ? (u += (size_t)snprintf(tmp + u, sizeof tmp - u, __VA_ARGS__)) : u)
    if (a->backbone == OCR_BACKBONE_LCNETV4) {
        // PP-OCRv6: the CTC branch PaddleOCR exports, configs/rec_ppocrv6_{tiny,small}_ctc.json.
        cfg = a->lcnet4.size == OCR_LCNETV4_TINY    ? "configs/rec_ppocrv6_tiny_ctc.json"
              : a->lcnet4.size == OCR_LCNETV4_SMALL ? "configs/rec_ppocrv6_small_ctc.json"
                                                    : NULL;
        if (cfg && a->lcnet4.deploy) OV(" Architecture.Backbone.deploy=true");
        if (ov && size) snprintf(ov, size, "%s", tmp[0] == ' ' ? tmp + 1 : tmp);
        return cfg;
    }
    if (a->backbone == OCR_BACKBONE_HGNETV2) {
        // PP-OCRv5 server: PaddleOCR's MultiHead config; the CTC-only weights load into its CTC
        // branch (models/weights_names.h).
        cfg = "configs/rec_ppocrv5_server.json";
        if (a->hgnet2.deploy) OV(" Architecture.Backbone.deploy=true");
        if (ov && size) snprintf(ov, size, "%s", tmp[0] == ' ' ? tmp + 1 : tmp);
        return cfg;
    }
    int dims = 120, hidden = 120, k0 = 1, k1 = 3;
    if (a->backbone == OCR_BACKBONE_MV1E) {
        cfg = "configs/rec_ppocrv3_en.json";
        dims = 64;
        k0 = k1 = 3;
        if (a->mv1e.scale != 0.5) OV(" Architecture.Backbone.scale=%g", a->mv1e.scale);
        if (a->mv1e.last_conv_stride[0] != 1 || a->mv1e.last_conv_stride[1] != 2)
            OV(" Architecture.Backbone.last_conv_stride=[%d,%d]", a->mv1e.last_conv_stride[0], a->mv1e.last_conv_stride[1]);
        if (!a->mv1e.last_pool_avg) OV(" Architecture.Backbone.last_pool_type=max");
        else if (a->mv1e.last_pool_kernel[0] != 2 || a->mv1e.last_pool_kernel[1] != 2)
            OV(" Architecture.Backbone.last_pool_kernel_size=[%d,%d]", a->mv1e.last_pool_kernel[0], a->mv1e.last_pool_kernel[1]);
    } else if (a->backbone == OCR_BACKBONE_LCNETV3) {
        cfg = a->num_classes == 97                    ? "configs/rec_ppocrv4_en.json"
              : a->num_classes == OCR_PPOCRV5_CLASSES ? "configs/rec_ppocrv5_mobile.json"
                                                      : "configs/rec_ppocrv4_ch.json";
        if (a->lcnet.scale != 0.95) OV(" Architecture.Backbone.scale=%g", a->lcnet.scale);
        if (a->lcnet.deploy) OV(" Architecture.Backbone.deploy=true");
    }
    if (!a->neck_svtr) {
        OV(" Architecture.Neck.encoder_type=reshape");
    } else {
        if (a->neck.dims != dims) OV(" Architecture.Neck.dims=%d", a->neck.dims);
        if (a->neck.hidden != hidden) OV(" Architecture.Neck.hidden_dims=%d", a->neck.hidden);
        if (a->neck.kernel[0] != k0 || a->neck.kernel[1] != k1)
            OV(" Architecture.Neck.kernel_size=[%d,%d]", a->neck.kernel[0], a->neck.kernel[1]);
        if (a->neck.depth != 2) OV(" Architecture.Neck.depth=%d", a->neck.depth);
        if (a->neck.heads != 8) OV(" Architecture.Neck.num_heads=%d", a->neck.heads);
        if (a->neck.mlp_ratio != 2.0f) OV(" Architecture.Neck.mlp_ratio=%g", a->neck.mlp_ratio);
    }
#undef OV
    if (ov && size) snprintf(ov, size, "%s", tmp[0] == ' ' ? tmp + 1 : tmp);
    return cfg;
}

// ---- shared with the PPLCNetV4 walker (onnx_import_internal.h) ------------------------------------------

void oi_g_build(G *g, const OcrOnnxModel *m, const char *file) { g_build(g, m, file); }
void oi_g_free(G *g) { g_free(g); }
int oi_intern(G *g, const char *name) { return intern(g, name); }
int oi_consumer(const G *g, int t, const char *op, int slot) { return consumer(g, t, op, slot); }
int oi_data_consumers(const G *g, int t) { return data_consumers(g, t); }
int oi_other_input(const G *g, int n, int t) { return other_input(g, n, t); }
int oi_scalar_of(const G *g, int t, float *v) { return scalar_of(g, t, v); }
int64_t oi_attr_i(const OcrOnnxNode *n, const char *name, int64_t def) { return attr_i(n, name, def); }
float oi_attr_f(const OcrOnnxNode *n, const char *name, float def) { return attr_f(n, name, def); }
void oi_attr_pair(const OcrOnnxNode *n, const char *name, int def, int out[2]) { attr_pair(n, name, def, out); }
void oi_use(G *g, int n) { use(g, n); }

ocr_status_t oi_fail_node(const G *g, int i, const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return fail_node(g, i, "%s", what);
}

ocr_status_t oi_fail_tensor(const G *g, int t, const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return fail_tensor(g, t, "%s", what);
}

ocr_status_t oi_match_unit(G *g, int t, Unit *u, const char *what) { return match_unit(g, t, u, what); }
ocr_status_t oi_match_unit_at(G *g, int conv, Unit *u, const char *what) { return match_unit_at(g, conv, u, what); }
int oi_match_act(G *g, int t, int *act, int *node, float *alpha, float *beta) {
    return match_act(g, t, act, node, alpha, beta);
}
int oi_follow_shape_ops(G *g, int t) { return follow_shape_ops(g, t); }
ocr_status_t oi_match_linear(G *g, int t, Lin *l, const char *what) { return match_linear(g, t, l, what); }
ocr_status_t oi_match_ln(G *g, int t, Ln *l) { return match_ln(g, t, l); }
int oi_residual_add(G *g, int t, int other) { return residual_add(g, t, other); }
ocr_status_t oi_match_attention(G *g, Blk *b) { return match_attention(g, b); }
ocr_status_t oi_expect_unit(const G *g, const Unit *u, const char *what, int want_bn, int want_bias, int want_lab, int act,
                            int want_alab) {
    return expect_unit(g, u, what, want_bn, want_bias, want_lab, act, want_alab);
}
ocr_status_t oi_put(Ctx *c, OcrParamTable *tab, const char *name, const OcrOnnxTensor *src, const float *data, int node) {
    return put(c, tab, name, src, data, node);
}
ocr_status_t oi_put_conv(Ctx *c, const OcrOpInfo *o, const Unit *u) { return put_conv(c, o, u); }
ocr_status_t oi_put_pair(Ctx *c, const OcrOpInfo *o, const OcrOnnxTensor *w, const OcrOnnxTensor *b, const char *wn,
                         const char *bnm, int node) {
    return put_pair(c, o, w, b, wn, bnm, node);
}
uint64_t oi_dict_fnv(const char *dictionary) { return dict_fnv(dictionary); }
int oi_count_lines(const char *s) { return count_lines(s); }
void oi_dict_note(char *buf, size_t cap, const char *dict, uint64_t want_fnv, const char *want_name) {
    if (!dict)
        snprintf(buf, cap, "; dictionary not given");
    else if (dict_fnv(dict) == want_fnv)
        snprintf(buf, cap, "; dictionary %s (%d lines)", want_name, count_lines(dict));
    else
        snprintf(buf, cap, "; a dictionary of %d lines that is not %s", count_lines(dict), want_name);
}
ocr_status_t oi_walk_svtr(G *g, int h, Blk *svtr, int max, int *depth, Ln *norm) {
    return walk_svtr(g, h, svtr, max, depth, norm);
}
ocr_status_t oi_walk_output(G *g, int t, int *softmax_node, int *output) { return walk_output(g, t, softmax_node, output); }
ocr_status_t oi_image_input(G *g, int *x) { return image_input(g, x); }

int oi_is_depthwise(const G *g, int conv) {
    const OcrOnnxTensor *w = conv >= 0 ? K(g, g->in[conv][1]) : NULL;
    int group = conv >= 0 ? (int)oi_attr_i(N(g, conv), "group", 1) : 0;
    return w && w->ndim == 4 && group > 1 && w->dims[1] == 1 && w->dims[0] == group;
}

int oi_pool_pads(const OcrOnnxNode *nd, const int k[2], const int s[2], int pad[4]) {
    const OcrOnnxAttr *ap = ocr_onnx_attr(nd, "auto_pad");
    const OcrOnnxAttr *pp = ocr_onnx_attr(nd, "pads");
    for (int d = 0; d < 4; d++) pad[d] = pp && pp->nints == 4 ? (int)pp->ints[d] : 0;
    if (!ap || !ap->s || strcmp(ap->s, "NOTSET") == 0 || strcmp(ap->s, "VALID") == 0) return 1;
    int upper = strcmp(ap->s, "SAME_UPPER") == 0;
    if ((!upper && strcmp(ap->s, "SAME_LOWER") != 0) || s[0] != 1 || s[1] != 1) return 0;
    // At stride 1 SAME pads k - 1 in all; the odd one goes after (UPPER) or before (LOWER).
    for (int d = 0; d < 2; d++) {
        int total = k[d] - 1, small = total / 2;
        pad[d] = upper ? small : total - small;
        pad[d + 2] = total - pad[d];
    }
    return 1;
}

// ---- the network built and paired (all walkers) ------------------------------------------------------------

ocr_status_t oi_ctx_create(Ctx *c, const OcrArch *arch) {
    ocr_status_t st = ocr_model_create(&c->model, arch);
    // A model that was built but refused later is still freed through c->model: the tables are set
    // whenever it exists.
    if (c->model) {
        c->params = ocr_model_params(c->model);
        c->stats = ocr_model_stats(c->model);
        c->taken = calloc((size_t)(c->params->count + c->stats->count) + 1, sizeof *c->taken);
        OCR_ASSERT(c->taken, "out of host memory");
    }
    return st;
}

ocr_status_t oi_pair_deploy(Ctx *c, const OiDeployNet *p) {
    const G *g = c->g;
    const OcrOpTable *ops = ocr_model_ops(c->model);
    OCR_ASSERT(p->depth <= OI_MAX_SVTR && p->nhead <= OI_MAX_HEAD, "more SVTR blocks or head layers than the pairing holds");
    const Ln *lns[2 * OI_MAX_SVTR + 1];
    const Lin *lins[4 * OI_MAX_SVTR + OI_MAX_HEAD];
    int nln, nlin;
    norms_and_linears(p->svtr, p->depth, p->norm, p->head, p->nhead, lns, &nln, lins, &nlin);
    const Unit *units = p->units;
    int ku = -1, kl = 0, kn = 0, kb = 0, katt = 0, padded = 0;
    static const char *const bn_ours[4] = {"weight", "bias", "_mean", "_variance"};
    char buf[300];
    for (int i = 0; i < ops->count; i++) {
        const OcrOpInfo *o = &ops->items[i];
        const char *ty = o->type;
        if (strcmp(ty, "pad") == 0) {
            padded = strstr(o->name, ".pool.") == NULL;  // before a conv (the pool's is checked by the walk)
        } else if (strcmp(ty, "conv2d") == 0) {
            if (ku >= 0 && kb != (units[ku].bn >= 0))
                return fail_node(g, units[ku].conv, "%s a BatchNormalization, the network's conv before %s %s",
                                 units[ku].bn >= 0 ? "has" : "lacks", o->name, kb ? "has one" : "has none");
            if (++ku >= p->nunits)
                return fail_tensor(g, p->output, "the graph has %d convolutions, the network's %s has none in the graph",
                                   p->nunits, o->name);
            kb = 0;
            Unit u = units[ku];
            if (padded) {
                // Paddle's SAME for a 2x2 kernel: the network's pad layer adds 0 before and 1 after.
                if (u.pad[0] != 0 || u.pad[1] != 0 || u.pad[2] != 1 || u.pad[3] != 1)
                    return fail_node(g, u.conv, "pads (%d,%d,%d,%d), %s pads 0 before and 1 after (Paddle's SAME)", u.pad[0],
                                     u.pad[1], u.pad[2], u.pad[3], o->name);
                memset(u.pad, 0, sizeof u.pad);
                padded = 0;
            }
            OCR_TRY(put_conv(c, o, &u));
        } else if (strcmp(ty, "batchnorm") == 0) {
            const Unit *u = ku >= 0 ? &units[ku] : NULL;
            if (!u || u->bn < 0 || kb++)
                return fail_node(g, u ? u->conv : 0, "no BatchNormalization in the graph for the network's %s", o->name);
            for (int r = 0; r < 4; r++)
                OCR_TRY(put(c, r < 2 ? c->params : c->stats, ocr_name(buf, sizeof buf, "%s.%s", o->name, bn_ours[r]), u->bnt[r],
                            NULL, u->bn));
        } else if (strcmp(ty, "affine") == 0) {
            // Deploy-form networks have no learnable affine blocks (they fold into the conv).
            return fail_node(g, ku >= 0 ? units[ku].conv : 0, "the network's %s has no counterpart in %s", o->name, p->backbone);
        } else if (strcmp(ty, "layernorm") == 0) {
            if (kn >= nln) return fail_tensor(g, p->output, "no LayerNorm in the graph for the network's %s", o->name);
            const Ln *l = lns[kn++];
            float want = strstr(o->name, "svtr_block") ? 1e-5f : 1e-6f;
            if (fabsf(l->eps - want) > 1e-9f) return fail_node(g, l->node, "LayerNorm epsilon %g, %s uses %g", l->eps, o->name, want);
            OCR_TRY(put_pair(c, o, l->g, l->b, "weight", "bias", l->node));
        } else if (strcmp(ty, "linear") == 0) {
            if (kl >= nlin) return fail_tensor(g, p->output, "no MatMul in the graph for the network's %s", o->name);
            const Lin *l = lins[kl++];
            OCR_TRY(put_pair(c, o, l->w, l->b, "weight", "bias", l->node));
        } else if (strcmp(ty, "attention") == 0) {
            if (katt >= p->depth) return fail_tensor(g, p->output, "no attention in the graph for the network's %s", o->name);
            const Blk *b = &p->svtr[katt++];
            int hd = p->attn_width / p->heads;
            float want = (float)pow((double)hd, -0.5);
            if (fabsf(b->scale - want) > 1e-7f)
                return fail_node(g, b->scale_node, "scales q by %.9g, %d heads of %d need %.9g", b->scale, p->heads, hd, want);
            if (b->act != ACT_SWISH)
                return fail_node(g, b->fc1.node, "the MLP activation is %s, the network uses swish", oi_act_names[b->act]);
        }
    }
    if (ku + 1 != p->nunits)
        return fail_node(g, units[ku + 1].conv, "a convolution the network does not have (it has %d, the graph %d)", ku + 1,
                         p->nunits);
    if (kb != (units[ku].bn >= 0)) return fail_node(g, units[ku].conv, "the last conv's BN does not match the network");
    if (kl != nlin) return fail_node(g, lins[kl]->node, "a MatMul the network does not have");
    if (kn != nln) return fail_node(g, lns[kn]->node, "a LayerNorm the network does not have");
    return OCR_OK;
}

// ocrtrain networks → PaddleOCR .pdparams (see pdparams_write.h): a pickle writer of our own.
#include "models/pdparams_write.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytebuf.h"
#include "core/fileio.h"

// ---- pickle opcodes (protocol 4 subset) -----------------------------------------------------------------
enum {
    P_PROTO = 0x80,
    P_EMPTY_DICT = '}',
    P_MARK = '(',
    P_SETITEMS = 'u',
    P_STOP = '.',
    P_GLOBAL = 'c',
    P_BININT = 'J',
    P_BININT1 = 'K',
    P_BININT2 = 'M',
    P_TUPLE = 't',
    P_EMPTY_TUPLE = ')',
    P_TUPLE1 = 0x85,
    P_TUPLE3 = 0x87,
    P_NEWTRUE = 0x88,
    P_NEWFALSE = 0x89,
    P_SHORT_BINUNICODE = 0x8c,
    P_BINUNICODE = 'X',
    P_SHORT_BINBYTES = 'C',
    P_BINBYTES = 'B',
    P_REDUCE = 'R',
    P_BUILD = 'b',
    P_NONE = 'N',
};

// Python's pickler batches SETITEMS by 1000 entries; so do we.
#define SETITEMS_BATCH 1000

typedef OcrByteBuf Buf;

static void raw(Buf *b, const void *d, size_t n) { ocr_bytebuf_append(b, d, n); }
static void op(Buf *b, uint8_t o) { raw(b, &o, 1); }
static void u32le(Buf *b, uint32_t v) {
    uint8_t q[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    raw(b, q, 4);
}
static void text(Buf *b, const char *s) {
    size_t n = strlen(s);
    if (n < 256) {
        op(b, P_SHORT_BINUNICODE);
        op(b, (uint8_t)n);
    } else {
        op(b, P_BINUNICODE);
        u32le(b, (uint32_t)n);
    }
    raw(b, s, n);
}
static void integer(Buf *b, int64_t v) {
    if (v >= 0 && v < 256) {
        op(b, P_BININT1);
        op(b, (uint8_t)v);
    } else if (v >= 0 && v < 65536) {
        op(b, P_BININT2);
        op(b, (uint8_t)v);
        op(b, (uint8_t)(v >> 8));
    } else {
        OCR_ASSERT(v >= INT32_MIN && v <= INT32_MAX, "a pickled int beyond 32 bits");
        op(b, P_BININT);
        u32le(b, (uint32_t)(int32_t)v);
    }
}
static void global(Buf *b, const char *module, const char *name) {
    op(b, P_GLOBAL);
    raw(b, module, strlen(module));
    op(b, '\n');
    raw(b, name, strlen(name));
    op(b, '\n');
}

// numpy's ndarray reduce for a C-ordered little-endian float32 array.
static void ndarray_f32(Buf *b, int ndim, const int64_t *shape, const float *data, int64_t numel) {
    global(b, "numpy.core.multiarray", "_reconstruct");
    global(b, "numpy", "ndarray");
    integer(b, 0);
    op(b, P_TUPLE1);
    op(b, P_SHORT_BINBYTES);
    op(b, 1);
    op(b, 'b');
    op(b, P_TUPLE3);
    op(b, P_REDUCE);
    // state: (1, shape, dtype('<f4'), False, bytes)
    op(b, P_MARK);
    integer(b, 1);
    if (ndim == 0) {
        op(b, P_EMPTY_TUPLE);
    } else {
        op(b, P_MARK);
        for (int i = 0; i < ndim; i++) integer(b, shape[i]);
        op(b, P_TUPLE);
    }
    global(b, "numpy", "dtype");
    text(b, "f4");
    op(b, P_NEWFALSE);
    op(b, P_NEWTRUE);
    op(b, P_TUPLE3);
    op(b, P_REDUCE);
    // dtype state: (3, '<', None, None, None, -1, -1, 0)
    op(b, P_MARK);
    integer(b, 3);
    text(b, "<");
    op(b, P_NONE);
    op(b, P_NONE);
    op(b, P_NONE);
    integer(b, -1);
    integer(b, -1);
    integer(b, 0);
    op(b, P_TUPLE);
    op(b, P_BUILD);
    op(b, P_NEWFALSE);
    size_t bytes = (size_t)numel * sizeof(float);
    OCR_ASSERT(bytes <= UINT32_MAX, "an array over 4 GiB");
    op(b, P_BINBYTES);
    u32le(b, (uint32_t)bytes);
    raw(b, data, bytes);  // little-endian float32, as x86-64 holds it
    op(b, P_TUPLE);
    op(b, P_BUILD);
}

// ---- the state dict ----------------------------------------------------------------------------------------

typedef struct {
    Buf b;
    int in_batch;  // entries since the last MARK
    int tensors;
    int aliases;  // second names written (LSTM {k}.cell.*), counted in tensors too
    int64_t values;
    ocr_status_t st;
    const char *prefix;  // before every name: "" for one network, "Teacher." in a DistillationModel's
} W;

static void entry(W *w, const OcrParamTable *t, int i, const char *name) {
    const OcrParamInfo *p = &t->items[i];
    float *d = malloc((size_t)p->numel * sizeof(float));
    float *o = d;
    if (!d) {
        w->st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
        return;
    }
    OcrTensor v = ocr_params_tensor(t, i);
    ocr_tensor_to_f32(&v, d);
    int64_t shape[OCR_MAX_DIMS];
    memcpy(shape, p->shape, sizeof shape);
    if (p->role == OCR_ROLE_WEIGHT && p->ndim == 4) {
        // Ours (OC, KH, KW, C/groups) → Paddle's (OC, C/groups, KH, KW).
        int64_t oc = p->shape[0], kh = p->shape[1], kw = p->shape[2], cg = p->shape[3];
        o = malloc((size_t)p->numel * sizeof(float));
        if (!o) {
            free(d);
            w->st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
            return;
        }
        for (int64_t a = 0; a < oc; a++)
            for (int64_t y = 0; y < kh; y++)
                for (int64_t x = 0; x < kw; x++)
                    for (int64_t c = 0; c < cg; c++) o[((a * cg + c) * kh + y) * kw + x] = d[((a * kh + y) * kw + x) * cg + c];
        shape[1] = cg;
        shape[2] = kh;
        shape[3] = kw;
    }
    int ndim = p->ndim;
    char full[600];
    snprintf(full, sizeof full, "%s%s", w->prefix, name ? name : p->name);
    const char *nm = full;
    if (ndim == 4 && shape[2] == 1 && strstr(nm, ".guide_layer.")) {
        // PaddleOCR's Conv1D (PP-OCRv6 tiny's guide layer): (OC, C/g, K), the same values.
        shape[2] = shape[3];
        ndim = 3;
    }
    if (w->in_batch == SETITEMS_BATCH) {
        op(&w->b, P_SETITEMS);
        op(&w->b, P_MARK);
        w->in_batch = 0;
    }
    text(&w->b, nm);
    ndarray_f32(&w->b, ndim, shape, o, p->numel);
    w->in_batch++;
    w->tensors++;
    w->values += p->numel;
    if (o != d) free(o);
    free(d);
}

// Paddle's nn.LSTM (SAR's rnn_encoder / rnn_decoder) lists every parameter twice: as
// "<rnn>.weight_ih_l{k}" and, after all of those, as its cell's "<rnn>.{k}.cell.weight_ih"
// (the same tensor). PaddleOCR's set_state_dict warns about each absent second name, so both
// are written. Returns 1 and the second name for such a parameter, else 0.
static int lstm_cell_name(const char *name, char *out, size_t size) {
    static const char *const rnns[] = {".rnn_encoder.", ".rnn_decoder.", NULL};
    static const char *const what[] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh", NULL};
    if (strncmp(name, "head.sar_head.", 14) != 0) return 0;
    for (int q = 0; rnns[q]; q++) {
        const char *at = strstr(name, rnns[q]);
        if (!at) continue;
        const char *tail = at + strlen(rnns[q]);
        for (int k = 0; what[k]; k++) {
            size_t n = strlen(what[k]);
            if (strncmp(tail, what[k], n) != 0 || strncmp(tail + n, "_l", 2) != 0) continue;
            char *end;
            long layer = strtol(tail + n + 2, &end, 10);
            if (end == tail + n + 2 || *end || layer < 0) continue;
            return snprintf(out, size, "%.*s%ld.cell.%s", (int)(tail - name), name, layer, what[k]) < (int)size;
        }
    }
    return 0;
}

// Every entry of a table belonging to op `op` (or, with op -1, the ones no op claims), then the
// second names of the LSTM parameters among them. (Paddle lists all layers' _l{k} names before
// the first {k}.cell name; our layers are one op each, so the cell names of layer 0 come before
// layer 1's parameters here. A state dict is read by key: the order does not matter to Paddle.)
static void entries_of(W *w, const OcrParamTable *t, int op_index, int nops) {
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < t->count && w->st == OCR_OK; i++) {
            int o = t->ops_recorded ? t->items[i].op : -1;
            int unclaimed = o < 0 || o >= nops;
            if (!(op_index >= 0 ? o == op_index : unclaimed)) continue;
            char second[512];
            if (pass == 0) {
                entry(w, t, i, NULL);
            } else if (lstm_cell_name(t->items[i].name, second, sizeof second)) {
                entry(w, t, i, second);
                w->aliases++;
            }
        }
}

static void dict_begin(W *w) {
    memset(w, 0, sizeof *w);
    w->prefix = "";
    op(&w->b, P_PROTO);
    op(&w->b, 4);
    op(&w->b, P_EMPTY_DICT);
    op(&w->b, P_MARK);
}

// One network's tables into the dict, every name after w->prefix.
static void dict_add_tables(W *w, const OcrOpTable *ops, const OcrParamTable *params, const OcrParamTable *stats) {
    const int before = w->tensors - w->aliases;
    // Paddle's state_dict order: layer by layer, each layer's parameters, then its buffers.
    for (int k = 0; k < ops->count && w->st == OCR_OK; k++) {
        entries_of(w, params, k, ops->count);
        entries_of(w, stats, k, ops->count);
    }
    entries_of(w, params, -1, ops->count);
    entries_of(w, stats, -1, ops->count);
    if (w->st == OCR_OK && w->tensors - w->aliases - before != params->count + stats->count)
        w->st = ocr_set_error(OCR_ERR_INTERNAL, "pdparams: %d of %d tensors written", w->tensors - w->aliases - before,
                              params->count + stats->count);
}

static ocr_status_t dict_end(W *w, uint8_t **data, size_t *size, OcrPdWriteInfo *info) {
    op(&w->b, P_SETITEMS);
    op(&w->b, P_STOP);
    if (w->st == OCR_OK && w->b.oom) w->st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
    if (w->st != OCR_OK) {
        free(w->b.p);
        return w->st;
    }
    *data = w->b.p;
    *size = w->b.n;
    if (info) {
        info->tensors = w->tensors;
        info->aliases = w->aliases;
        info->values = w->values;
    }
    return OCR_OK;
}

// ---- deploy form → an equivalent training form -------------------------------------------------------------

static float *f32_of(OcrParamTable *t, int i) {
    OCR_ASSERT(t->items[i].dtype == OCR_F32 && t->device.type == OCR_DEVICE_CPU, "a fresh model holds f32 on the CPU");
    return (float *)((char *)t->data + t->items[i].offset);
}

static void fill(OcrParamTable *t, int i, float v, unsigned char *done) {
    float *d = f32_of(t, i);
    for (int64_t k = 0; k < t->items[i].numel; k++) d[k] = v;
    done[i] = 1;
}

// A BN that maps x to γ·x + β exactly enough: mean 0 and variance 1 − ε make √(var + ε) one.
static void pass_bn(OcrParamTable *p, OcrParamTable *s, const LBN *bn, const float *bias, float gamma,
                    unsigned char *pdone, unsigned char *sdone) {
    float *g = f32_of(p, bn->g), *b = f32_of(p, bn->b);
    for (int c = 0; c < bn->channels; c++) {
        g[c] = gamma;
        b[c] = bias ? bias[c] : 0.0f;
    }
    pdone[bn->g] = pdone[bn->b] = 1;
    fill(s, bn->mean, 0.0f, sdone);
    fill(s, bn->var, 1.0f - bn->eps, sdone);
}

static ocr_status_t unfuse_rep(OcrParamTable *p, OcrParamTable *s, const RepLayer *t, const OcrParamTable *dp,
                               const RepLayer *d, unsigned char *pdone, unsigned char *sdone) {
    OcrTensor kw = ocr_params_tensor(dp, d->reparam.w), kb = ocr_params_tensor(dp, d->reparam.b);
    if (ocr_tensor_numel(&kw) != p->items[t->kxk[0].conv.w].numel)
        return ocr_set_error(OCR_ERR_INTERNAL, "pdparams: %s and %s differ in size", dp->items[d->reparam.w].name,
                             p->items[t->kxk[0].conv.w].name);
    float *bias = malloc((size_t)t->cout * sizeof(float));
    if (!bias) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    ocr_tensor_to_f32(&kw, f32_of(p, t->kxk[0].conv.w));
    pdone[t->kxk[0].conv.w] = 1;
    ocr_tensor_to_f32(&kb, bias);
    pass_bn(p, s, &t->kxk[0].bn, bias, 1.0f, pdone, sdone);
    free(bias);
    for (int i = 1; i < t->nkxk; i++) {
        fill(p, t->kxk[i].conv.w, 0.0f, pdone);
        pass_bn(p, s, &t->kxk[i].bn, NULL, 1.0f, pdone, sdone);
    }
    if (t->has_1x1) {
        fill(p, t->c1x1.conv.w, 0.0f, pdone);
        pass_bn(p, s, &t->c1x1.bn, NULL, 1.0f, pdone, sdone);
    }
    if (t->has_identity) pass_bn(p, s, &t->identity, NULL, 0.0f, pdone, sdone);
    return OCR_OK;
}

// The training-form network equal to a deploy-form PPLCNetV3 model (CPU, f32).
static ocr_status_t unfuse(const OcrModel *m, OcrModel **out) {
    OcrArch a = *ocr_model_arch(m);
    a.lcnet.deploy = 0;
    if (a.lcnet.conv_kxk_num < 1) a.lcnet.conv_kxk_num = 4;  // PaddleOCR's default; any count reproduces the fused layer
    OcrModel *t;
    OCR_TRY(ocr_model_create(&t, &a));
    OcrParamTable dp, ds;
    ocr_status_t st = ocr_params_host_copy(ocr_model_params((OcrModel *)m), &dp);
    if (st == OCR_OK && (st = ocr_params_host_copy(ocr_model_stats((OcrModel *)m), &ds)) != OCR_OK) ocr_params_host_release(&dp);
    if (st != OCR_OK) {
        ocr_model_free(t);
        return st;
    }
    OcrParamTable *tp = ocr_model_params(t), *ts = ocr_model_stats(t);
    unsigned char *pdone = calloc((size_t)tp->count + 1, 1), *sdone = calloc((size_t)ts->count + 1, 1);
    if (!pdone || !sdone) st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
    // Everything outside the rep layers has the same name in both forms.
    for (int pass = 0; pass < 2 && st == OCR_OK; pass++) {
        OcrParamTable *dst = pass ? ts : tp;
        const OcrParamTable *src = pass ? &ds : &dp;
        unsigned char *done = pass ? sdone : pdone;
        for (int i = 0; i < dst->count; i++) {
            int j = ocr_params_find(src, dst->items[i].name);
            if (j < 0) continue;
            if (src->items[j].numel != dst->items[i].numel) {
                st = ocr_set_error(OCR_ERR_INTERNAL, "pdparams: %s differs in size between the forms", dst->items[i].name);
                break;
            }
            OcrTensor v = ocr_params_tensor(src, j);
            ocr_tensor_to_f32(&v, f32_of(dst, i));
            done[i] = 1;
        }
    }
    const Lcnet *tl = ocr_model_layers_lcnet(t), *dl = ocr_model_layers_lcnet(m);
    for (int i = 0; st == OCR_OK && i < tl->nblocks; i++) {
        st = unfuse_rep(tp, ts, &tl->blocks[i].dw, &dp, &dl->blocks[i].dw, pdone, sdone);
        if (st == OCR_OK) st = unfuse_rep(tp, ts, &tl->blocks[i].pw, &dp, &dl->blocks[i].pw, pdone, sdone);
    }
    for (int i = 0; st == OCR_OK && i < tp->count; i++)
        if (!pdone[i]) st = ocr_set_error(OCR_ERR_INTERNAL, "pdparams: %s has no value in the deploy form", tp->items[i].name);
    for (int i = 0; st == OCR_OK && i < ts->count; i++)
        if (!sdone[i]) st = ocr_set_error(OCR_ERR_INTERNAL, "pdparams: %s has no value in the deploy form", ts->items[i].name);
    free(pdone);
    free(sdone);
    ocr_params_host_release(&dp);
    ocr_params_host_release(&ds);
    if (st != OCR_OK) {
        ocr_model_free(t);
        return st;
    }
    *out = t;
    return OCR_OK;
}

// One network into the dict under `prefix` (its training form); *unfused = 1 when it was a
// deploy-form PPLCNetV3 written as its equivalent training form.
static void dict_add_model(W *w, const OcrModel *m, const char *prefix, int *unfused) {
    if (w->st != OCR_OK) return;
    const OcrArch *a = ocr_model_arch(m);
    OcrModel *train = NULL;
    if (a->backbone == OCR_BACKBONE_LCNETV3 && a->lcnet.deploy && (w->st = unfuse(m, &train)) != OCR_OK) return;
    const OcrModel *src = train ? train : m;
    OcrParamTable hp, hs;
    ocr_status_t st = ocr_params_host_copy(ocr_model_params((OcrModel *)src), &hp);
    if (st == OCR_OK && (st = ocr_params_host_copy(ocr_model_stats((OcrModel *)src), &hs)) != OCR_OK) ocr_params_host_release(&hp);
    if (st == OCR_OK) {
        w->prefix = prefix;
        dict_add_tables(w, ocr_model_ops((OcrModel *)src), &hp, &hs);
        w->prefix = "";
        ocr_params_host_release(&hp);
        ocr_params_host_release(&hs);
    } else {
        w->st = st;
    }
    if (train) *unfused = 1;
    ocr_model_free(train);
}

ocr_status_t ocr_pdparams_write_bytes(const OcrModel *m, uint8_t **data, size_t *size, OcrPdWriteInfo *info) {
    OcrPdNamedModel one = {NULL, m};
    return ocr_pdparams_write_named_bytes(&one, 1, data, size, info);
}

ocr_status_t ocr_pdparams_write_named_bytes(const OcrPdNamedModel *nets, int n, uint8_t **data, size_t *size,
                                            OcrPdWriteInfo *info) {
    *data = NULL;
    *size = 0;
    if (info) memset(info, 0, sizeof *info);
    W w;
    dict_begin(&w);
    int unfused = 0;
    char prefix[80];
    for (int k = 0; k < n; k++) {
        if (nets[k].name && strlen(nets[k].name) + 2 > sizeof prefix) {
            free(w.b.p);
            return ocr_set_error(OCR_ERR_INVALID_ARG, "pdparams: network name %s is too long", nets[k].name);
        }
        snprintf(prefix, sizeof prefix, "%s%s", nets[k].name ? nets[k].name : "", nets[k].name ? "." : "");
        dict_add_model(&w, nets[k].m, prefix, &unfused);
    }
    ocr_status_t st = dict_end(&w, data, size, info);
    if (st == OCR_OK && info) info->unfused = unfused;
    return st;
}

ocr_status_t ocr_pdparams_write(const OcrModel *m, const char *path, OcrPdWriteInfo *info) {
    OcrPdNamedModel one = {NULL, m};
    return ocr_pdparams_write_named(&one, 1, path, info);
}

ocr_status_t ocr_pdparams_write_named(const OcrPdNamedModel *nets, int n, const char *path, OcrPdWriteInfo *info) {
    uint8_t *data;
    size_t size;
    OCR_TRY(ocr_pdparams_write_named_bytes(nets, n, &data, &size, info));
    ocr_status_t st = ocr_write_file_atomic(path, data, size);
    free(data);
    return st;
}

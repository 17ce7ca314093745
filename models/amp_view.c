#include "models/amp_view.h"

#include <stdlib.h>
#include <string.h>

#include "core/memory.h"
#include "kernels/ops.h"

static OcrOpTable *ops_of(const AmpManaged *m) { return m->ctx[0]; }
static OcrParamTable *params_of(const AmpManaged *m) { return m->ctx[1]; }
static OcrParamTable *stats_of(const AmpManaged *m) { return m->ctx[2]; }

static const char *op_name(const AmpManaged *m, int op) { return ops_of(m)->items[op].name; }
static const char *op_type(const AmpManaged *m, int op) { return ops_of(m)->items[op].type; }
static void set_op_dtype(const AmpManaged *m, int op, ocr_dtype_t d) { ops_of(m)->items[op].compute_dtype = d; }

static int op_output(const AmpManaged *m, int op, OcrTensor *out) {
    const OcrOpInfo *o = &ops_of(m)->items[op];
    *out = o->out;
    return o->out_ndim > 0;
}

static const char *param_name(const AmpManaged *m, int i) { return params_of(m)->items[i].name; }

static int param_op(const AmpManaged *m, int i) {
    const OcrParamTable *t = params_of(m);
    // Hand-made tables (tests) leave `op` unrecorded: the engine then goes by the names.
    return t->ops_recorded ? t->items[i].op : -1;
}

static int param_lowerable(const AmpManaged *m, int i) {
    ocr_param_role_t r = params_of(m)->items[i].role;
    return r == OCR_ROLE_WEIGHT || r == OCR_ROLE_BIAS || r == OCR_ROLE_EMBED;
}

static OcrTensor view_in(const OcrParamTable *t, void *base, int i) {
    const OcrParamInfo *p = &t->items[i];
    return ocr_tensor_view(base ? (char *)base + p->offset : NULL, p->dtype, t->device, p->ndim, p->shape);
}

static OcrTensor param(const AmpManaged *m, int i) { return view_in(params_of(m), params_of(m)->data, i); }
static OcrTensor grad(const AmpManaged *m, int i) { return view_in(params_of(m), params_of(m)->grad, i); }

static ocr_status_t lower(const AmpManaged *m, const ocr_dtype_t *dtypes) {
    return ocr_params_convert(params_of(m), dtypes);
}

static void *stats(const AmpManaged *m, size_t *bytes, ocr_device_t *device) {
    const OcrParamTable *s = stats_of(m);
    if (!s || !s->data) {
        *bytes = 0;
        return NULL;
    }
    *bytes = s->bytes;
    *device = s->device;
    return s->data;
}

void ocr_amp_managed(AmpManaged *m, OcrOpTable *ops, OcrParamTable *params, OcrParamTable *stats_table) {
    memset(m, 0, sizeof *m);
    m->ctx[0] = ops;
    m->ctx[1] = params;
    m->ctx[2] = stats_table;
    m->n_ops = ops->count;
    m->n_params = params->count;
    m->op_name = op_name;
    m->op_type = op_type;
    m->set_op_dtype = set_op_dtype;
    m->op_output = op_output;
    m->param_name = param_name;
    m->param_op = param_op;
    m->param_lowerable = param_lowerable;
    m->param = param;
    m->grad = grad;
    m->lower = lower;
    m->stats = stats;
}

ocr_status_t ocr_amp_attach(AmpEngine *e, OcrOpTable *ops, OcrParamTable *params, OcrParamTable *stats_table) {
    AmpManaged m;
    ocr_amp_managed(&m, ops, params, stats_table);
    return amp_engine_attach(e, &m);
}

ocr_status_t ocr_params_convert(OcrParamTable *t, const ocr_dtype_t *dtypes) {
    int n = t->count;
    size_t bytes = 0;
    for (int i = 0; i < n; i++) {
        size_t sz = (size_t)t->items[i].numel * ocr_dtype_size(dtypes[i]);
        bytes = (bytes + sz + OCR_PARAM_ALIGN - 1) / OCR_PARAM_ALIGN * OCR_PARAM_ALIGN;
    }
    void *fresh = ocr_mem_alloc(t->device, t->category, bytes);
    if (!fresh) return ocr_wrap_error(OCR_ERR_OOM, "O2 working parameters (%zu bytes)", bytes);
    // Zeroed (the alignment gaps included) through the op library: any device.
    OcrTensor z = ocr_tensor_view(fresh, OCR_U8, t->device, 1, (int64_t[]){(int64_t)bytes});
    ocr_zero_tensor(&z);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        OcrParamInfo *p = &t->items[i];
        OcrTensor src = view_in(t, t->data, i);
        p->dtype = dtypes[i];
        p->offset = off;
        OcrTensor dst = view_in(t, fresh, i);
        if (dst.dtype != src.dtype)
            ocr_cast_forward(&dst, &src);
        else
            ocr_copy_bytes(t->device, dst.data, t->device, src.data, ocr_tensor_bytes(&dst));
        off = (off + ocr_tensor_bytes(&dst) + OCR_PARAM_ALIGN - 1) / OCR_PARAM_ALIGN * OCR_PARAM_ALIGN;
    }
    OCR_ASSERT(off == bytes);
    ocr_mem_free(t->data);
    ocr_mem_free(t->grad);
    t->data = fresh;
    t->grad = NULL;
    t->bytes = bytes;
    return OCR_OK;
}

#include "models/params.h"

#include <stdlib.h>
#include <string.h>

#include "core/memory.h"
#include "core/rng.h"
#include "kernels/ops.h"

void ocr_params_init_table(OcrParamTable *t, ocr_mem_category_t category) {
    memset(t, 0, sizeof *t);
    t->category = category;
    t->device = ocr_cpu();
}

int ocr_params_find(const OcrParamTable *t, const char *name) {
    for (int i = 0; i < t->count; i++)
        if (strcmp(t->items[i].name, name) == 0) return i;
    return -1;
}

int ocr_params_add(OcrParamTable *t, const char *name, int ndim, const int64_t *shape, OcrInit init,
                   ocr_param_role_t role) {
    OCR_ASSERT(ndim >= 1 && ndim <= OCR_MAX_DIMS);
    OCR_ASSERT(ocr_params_find(t, name) < 0, "duplicate parameter name %s", name);
    OCR_ASSERT(t->data == NULL, "parameters are added before the buffer is allocated");
    if (t->count == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->items = realloc(t->items, (size_t)t->cap * sizeof *t->items);
        OCR_ASSERT(t->items, "out of host memory");
    }
    OcrParamInfo *p = &t->items[t->count];
    memset(p, 0, sizeof *p);
    p->name = strdup(name);
    OCR_ASSERT(p->name);
    p->ndim = ndim;
    p->numel = 1;
    for (int d = 0; d < OCR_MAX_DIMS; d++) p->shape[d] = 1;
    for (int d = 0; d < ndim; d++) {
        p->shape[d] = shape[d];
        p->numel *= shape[d];
    }
    p->dtype = OCR_F32;
    p->init = init;
    p->lr_mult = 1.0f;
    p->decay_kind = OCR_DECAY_GLOBAL;
    p->role = role;
    p->op = -1;
    return t->count++;
}

static size_t align_up(size_t x) { return (x + OCR_PARAM_ALIGN - 1) / OCR_PARAM_ALIGN * OCR_PARAM_ALIGN; }

void ocr_params_layout(OcrParamTable *t) {
    size_t off = 0;
    int64_t n = 0;
    for (int i = 0; i < t->count; i++) {
        OcrParamInfo *p = &t->items[i];
        p->offset = off;
        off = align_up(off + (size_t)p->numel * ocr_dtype_size(p->dtype));
        n += p->numel;
    }
    t->bytes = off;
    t->numel = n;
}

uint64_t ocr_params_stream(const char *name) {
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *s = (const unsigned char *)name; *s; s++) {
        h ^= *s;
        h *= 1099511628211ull;
    }
    return h;
}

void ocr_params_init_entry(OcrParamTable *t, int i, uint64_t seed) {
    OcrParamInfo *p = &t->items[i];
    OCR_ASSERT(t->data);
    size_t n = (size_t)p->numel;
    float *tmp = malloc(n * sizeof(float));
    OCR_ASSERT(tmp, "out of host memory");
    uint64_t stream = ocr_params_stream(p->name);
    switch (p->init.kind) {
    case OCR_INIT_CONST:
        for (size_t k = 0; k < n; k++) tmp[k] = p->init.a;
        break;
    case OCR_INIT_NORMAL: ocr_rng_fill_normal(tmp, n, seed, stream, 0, p->init.a, p->init.b); break;
    case OCR_INIT_UNIFORM: ocr_rng_fill_uniform(tmp, n, seed, stream, 0, p->init.a, p->init.b); break;
    case OCR_INIT_TRUNC_NORMAL: ocr_rng_fill_trunc_normal(tmp, n, seed, stream, 0, p->init.a, p->init.b); break;
    }
    OcrTensor v = ocr_params_tensor(t, i);
    if (t->device.type == OCR_DEVICE_CPU) {
        ocr_tensor_from_f32(&v, tmp);
    } else {
        // Rounded on the host into the entry's dtype, then copied to the table's device.
        void *h = malloc(ocr_tensor_bytes(&v) ? ocr_tensor_bytes(&v) : 1);
        OCR_ASSERT(h, "out of host memory");
        OcrTensor hv = ocr_tensor_view(h, v.dtype, ocr_cpu(), v.ndim, v.shape);
        ocr_tensor_from_f32(&hv, tmp);
        ocr_copy_bytes(t->device, v.data, ocr_cpu(), h, ocr_tensor_bytes(&v));
        free(h);
    }
    free(tmp);
}

static ocr_status_t move_buffer(void **buf, ocr_device_t from, ocr_device_t to, ocr_mem_category_t cat, size_t bytes) {
    if (!*buf) return OCR_OK;
    void *fresh = ocr_mem_alloc(to, cat, bytes);
    if (!fresh) return ocr_wrap_error(OCR_ERR_OOM, "moving %zu bytes of %s", bytes, ocr_mem_category_name(cat));
    ocr_copy_bytes(to, fresh, from, *buf, bytes);
    // A device-to-device copy is asynchronous; freeing device memory (cudaFree) waits for it.
    ocr_mem_free(*buf);
    *buf = fresh;
    return OCR_OK;
}

ocr_status_t ocr_params_to_device(OcrParamTable *t, ocr_device_t device) {
    if (ocr_device_equal(t->device, device)) return OCR_OK;
    if (!t->data) {
        t->device = device;
        return OCR_OK;
    }
    OCR_TRY(move_buffer(&t->data, t->device, device, t->category, t->bytes));
    OCR_TRY(move_buffer(&t->grad, t->device, device, OCR_MEM_GRADS, t->bytes));
    t->device = device;
    return OCR_OK;
}

ocr_status_t ocr_params_host_copy(const OcrParamTable *t, OcrParamTable *host) {
    *host = *t;
    host->grad = NULL;
    host->device = ocr_cpu();
    host->data = NULL;
    if (!t->data) return OCR_OK;
    host->data = malloc(t->bytes ? t->bytes : 1);
    if (!host->data) return ocr_set_error(OCR_ERR_OOM, "host copy of %zu bytes of parameters", t->bytes);
    ocr_copy_bytes(ocr_cpu(), host->data, t->device, t->data, t->bytes);
    return OCR_OK;
}

void ocr_params_host_release(OcrParamTable *host) {
    free(host->data);
    memset(host, 0, sizeof *host);
}

void ocr_params_upload(OcrParamTable *t, const void *host_data) {
    OCR_ASSERT(t->data, "upload: parameter buffer not allocated");
    ocr_copy_bytes(t->device, t->data, ocr_cpu(), host_data, t->bytes);
}

ocr_status_t ocr_params_alloc(OcrParamTable *t, uint64_t seed) {
    OCR_ASSERT(t->data == NULL);
    ocr_params_layout(t);
    t->data = ocr_mem_calloc(t->device, t->category, t->bytes);
    if (!t->data) return ocr_wrap_error(OCR_ERR_OOM, "allocating %zu bytes of parameters", t->bytes);
    for (int i = 0; i < t->count; i++) ocr_params_init_entry(t, i, seed);
    return OCR_OK;
}

ocr_status_t ocr_params_alloc_grads(OcrParamTable *t) {
    if (t->grad) return OCR_OK;
    t->grad = ocr_mem_alloc(t->device, OCR_MEM_GRADS, t->bytes);
    if (!t->grad) return ocr_wrap_error(OCR_ERR_OOM, "allocating %zu bytes of gradients", t->bytes);
    ocr_params_zero_grads(t);  // through the op library: any device
    return OCR_OK;
}

void ocr_params_zero_grads(OcrParamTable *t) {
    if (!t->grad) return;
    // Through the op library, so the buffer may live on any device.
    OcrTensor all = ocr_tensor_view(t->grad, OCR_U8, t->device, 1, (int64_t[]){(int64_t)t->bytes});
    ocr_zero_tensor(&all);
}

void ocr_params_free(OcrParamTable *t) {
    for (int i = 0; i < t->count; i++) free(t->items[i].name);
    free(t->items);
    ocr_mem_free(t->data);
    ocr_mem_free(t->grad);
    ocr_mem_category_t cat = t->category;
    memset(t, 0, sizeof *t);
    t->category = cat;
}

static OcrTensor view_at(const OcrParamTable *t, void *base, int i) {
    const OcrParamInfo *p = &t->items[i];
    OCR_ASSERT(base, "parameter buffer not allocated");
    return ocr_tensor_view((char *)base + p->offset, p->dtype, t->device, p->ndim, p->shape);
}

OcrTensor ocr_params_tensor(const OcrParamTable *t, int i) { return view_at(t, t->data, i); }
OcrTensor ocr_params_grad(const OcrParamTable *t, int i) { return view_at(t, t->grad, i); }

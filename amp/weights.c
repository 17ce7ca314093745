#include "amp/weights.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"

#define AMP_ALIGN 64

static size_t align_up(size_t x) { return (x + AMP_ALIGN - 1) / AMP_ALIGN * AMP_ALIGN; }

// ---- O1 cast cache ------------------------------------------------------------------------

ocr_status_t amp_cast_cache_init(AmpCastCache *c, const OcrTensor *params, const ocr_dtype_t *cast_dtype, int count) {
    memset(c, 0, sizeof *c);
    c->cast = calloc((size_t)(count > 0 ? count : 1), sizeof *c->cast);
    if (!c->cast) return ocr_set_error(OCR_ERR_OOM, "cast cache: out of host memory");
    c->count = count;
    size_t bytes = 0;
    for (int i = 0; i < count; i++) {
        if (cast_dtype[i] == OCR_F32) continue;
        OCR_ASSERT(cast_dtype[i] == OCR_F16 || cast_dtype[i] == OCR_BF16, "cast cache: parameter %d: dtype %s", i,
                   ocr_dtype_name(cast_dtype[i]));
        OCR_ASSERT(params[i].dtype == OCR_F32, "cast cache: parameter %d is %s; O1 keeps parameters in f32", i,
                   ocr_dtype_name(params[i].dtype));
        bytes = align_up(bytes + (size_t)ocr_tensor_numel(&params[i]) * ocr_dtype_size(cast_dtype[i]));
    }
    c->bytes = bytes;
    ocr_device_t dev = count > 0 ? params[0].device : ocr_cpu();
    for (int i = 1; i < count; i++)
        OCR_ASSERT(ocr_device_equal(params[i].device, dev), "cast cache: parameters on two devices");
    if (bytes) {
        c->buffer = ocr_mem_alloc(dev, OCR_MEM_PARAMS, bytes);
        if (!c->buffer) {
            amp_cast_cache_free(c);
            return ocr_wrap_error(OCR_ERR_OOM, "cast cache (%zu bytes)", bytes);
        }
    }
    size_t off = 0;
    for (int i = 0; i < count; i++) {
        if (cast_dtype[i] == OCR_F32) continue;
        c->cast[i] = ocr_tensor_view((char *)c->buffer + off, cast_dtype[i], params[i].device, params[i].ndim,
                                     params[i].shape);
        off = align_up(off + ocr_tensor_bytes(&c->cast[i]));
    }
    return OCR_OK;
}

void amp_cast_cache_refresh(AmpCastCache *c, const OcrTensor *params) {
    for (int i = 0; i < c->count; i++)
        if (c->cast[i].data) ocr_cast_forward(&c->cast[i], &params[i]);
    c->valid = 1;
    c->refreshes++;
}

const OcrTensor *amp_cast_cache_get(const AmpCastCache *c, int i) {
    if (!c || !c->cast) return NULL;
    OCR_ASSERT(i >= 0 && i < c->count, "cast cache: parameter %d of %d", i, c->count);
    if (!c->cast[i].data) return NULL;
    OCR_ASSERT(c->valid, "cast cache read before its refresh for this step (parameter %d)", i);
    return &c->cast[i];
}

void amp_cast_cache_free(AmpCastCache *c) {
    ocr_mem_free(c->buffer);
    free(c->cast);
    memset(c, 0, sizeof *c);
}

// ---- O2 master weights ----------------------------------------------------------------------

ocr_status_t amp_master_init(AmpMaster *m, const OcrTensor *values, const int *has_master, int count) {
    memset(m, 0, sizeof *m);
    m->master = calloc((size_t)(count > 0 ? count : 1), sizeof *m->master);
    if (!m->master) return ocr_set_error(OCR_ERR_OOM, "master weights: out of host memory");
    m->count = count;
    size_t bytes = 0;
    for (int i = 0; i < count; i++)
        if (has_master[i]) bytes = align_up(bytes + (size_t)ocr_tensor_numel(&values[i]) * sizeof(float));
    m->bytes = bytes;
    ocr_device_t dev = count > 0 ? values[0].device : ocr_cpu();
    for (int i = 1; i < count; i++)
        OCR_ASSERT(ocr_device_equal(values[i].device, dev), "master weights: values on two devices");
    if (bytes) {
        m->buffer = ocr_mem_alloc(dev, OCR_MEM_MASTER, bytes);
        if (!m->buffer) {
            amp_master_free(m);
            return ocr_wrap_error(OCR_ERR_OOM, "master weights (%zu bytes)", bytes);
        }
    }
    size_t off = 0;
    for (int i = 0; i < count; i++) {
        if (!has_master[i]) continue;
        m->master[i] = ocr_tensor_view((char *)m->buffer + off, OCR_F32, values[i].device, values[i].ndim,
                                       values[i].shape);
        ocr_cast_forward(&m->master[i], &values[i]);
        off = align_up(off + ocr_tensor_bytes(&m->master[i]));
    }
    return OCR_OK;
}

OcrTensor *amp_master_get(AmpMaster *m, int i) {
    if (!m || !m->master) return NULL;
    OCR_ASSERT(i >= 0 && i < m->count, "master weights: parameter %d of %d", i, m->count);
    return m->master[i].data ? &m->master[i] : NULL;
}

void amp_master_free(AmpMaster *m) {
    ocr_mem_free(m->buffer);
    free(m->master);
    memset(m, 0, sizeof *m);
}

uint64_t amp_stochastic_round_seed(uint64_t base, int64_t step) {
    // splitmix64 finaliser over (base, step): neighbouring steps get unrelated seeds.
    uint64_t z = base + 0x9e3779b97f4a7c15ull * (uint64_t)(step + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return z ? z : 1;
}

// ---- snapshots --------------------------------------------------------------------------------

ocr_status_t amp_snapshot_take_on(AmpSnapshot *s, ocr_device_t device, const void *data, size_t bytes) {
    if (s->saved && (s->bytes != bytes || !ocr_device_equal(s->device, device))) amp_snapshot_free(s);
    if (!s->saved) {
        s->saved = ocr_mem_alloc(device, OCR_MEM_WORKSPACE, bytes);
        if (!s->saved) return ocr_wrap_error(OCR_ERR_OOM, "snapshot of %zu bytes", bytes);
        s->bytes = bytes;
        s->device = device;
    }
    if (bytes) ocr_copy_bytes(device, s->saved, device, data, bytes);
    s->valid = 1;
    return OCR_OK;
}

ocr_status_t amp_snapshot_take(AmpSnapshot *s, const void *data, size_t bytes) {
    return amp_snapshot_take_on(s, ocr_cpu(), data, bytes);
}

void amp_snapshot_restore(const AmpSnapshot *s, void *data, size_t bytes) {
    OCR_ASSERT(s->valid && s->bytes == bytes, "snapshot restore: no snapshot of %zu bytes was taken", bytes);
    if (bytes) ocr_copy_bytes(s->device, data, s->device, s->saved, bytes);
}

void amp_snapshot_free(AmpSnapshot *s) {
    ocr_mem_free(s->saved);
    memset(s, 0, sizeof *s);
}

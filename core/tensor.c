#include "core/tensor.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

size_t ocr_dtype_size(ocr_dtype_t dtype) {
    switch (dtype) {
        case OCR_F32: return 4;
        case OCR_F16: return 2;
        case OCR_BF16: return 2;
        case OCR_I32: return 4;
        case OCR_U8: return 1;
        default: break;
    }
    OCR_ASSERT(0, "bad dtype %d", (int)dtype);
}

const char *ocr_dtype_name(ocr_dtype_t dtype) {
    static const char *names[OCR_DTYPE_COUNT] = {"float32", "float16", "bfloat16", "int32", "uint8"};
    return (dtype >= 0 && dtype < OCR_DTYPE_COUNT) ? names[dtype] : "?";
}

int ocr_dtype_from_name(const char *name, ocr_dtype_t *out) {
    if (!name) return 0;
    static const struct { const char *name; ocr_dtype_t dtype; } table[] = {
        {"float32", OCR_F32}, {"f32", OCR_F32}, {"fp32", OCR_F32}, {"float", OCR_F32},
        {"float16", OCR_F16}, {"f16", OCR_F16}, {"fp16", OCR_F16}, {"half", OCR_F16},
        {"bfloat16", OCR_BF16}, {"bf16", OCR_BF16},
        {"int32", OCR_I32}, {"i32", OCR_I32},
        {"uint8", OCR_U8}, {"u8", OCR_U8},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcasecmp(name, table[i].name) == 0) {
            *out = table[i].dtype;
            return 1;
        }
    return 0;
}

int64_t ocr_tensor_numel(const OcrTensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

size_t ocr_tensor_bytes(const OcrTensor *t) { return (size_t)ocr_tensor_numel(t) * ocr_dtype_size(t->dtype); }

int64_t ocr_tensor_dim(const OcrTensor *t, int i) {
    if (i < 0) i += t->ndim;
    OCR_ASSERT(i >= 0 && i < t->ndim, "dim %d of a %d-d tensor", i, t->ndim);
    return t->shape[i];
}

OcrTensor ocr_tensor_view(void *data, ocr_dtype_t dtype, ocr_device_t device, int ndim, const int64_t *shape) {
    OCR_ASSERT(ndim >= 0 && ndim <= OCR_MAX_DIMS, "ndim %d", ndim);
    OcrTensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dtype;
    t.device = device;
    t.ndim = ndim;
    for (int i = 0; i < OCR_MAX_DIMS; i++) t.shape[i] = i < ndim ? shape[i] : 1;
    for (int i = 0; i < ndim; i++) OCR_ASSERT(shape[i] >= 0, "negative dimension");
    t.data = data;
    t.owns_data = 0;
    t.category = OCR_MEM_ACTIVATIONS;
    return t;
}

ocr_status_t ocr_tensor_alloc(OcrTensor *t, ocr_dtype_t dtype, ocr_device_t device, int ndim, const int64_t *shape,
                              ocr_mem_category_t category) {
    *t = ocr_tensor_view(NULL, dtype, device, ndim, shape);
    size_t bytes = ocr_tensor_bytes(t);
    t->data = ocr_mem_alloc(device, category, bytes);
    if (!t->data) {
        char buf[96];
        return ocr_wrap_error(OCR_ERR_OOM, "tensor %s", ocr_tensor_describe(t, buf, sizeof buf));
    }
    t->owns_data = 1;
    t->category = category;
    return OCR_OK;
}

void ocr_tensor_free(OcrTensor *t) {
    if (t->owns_data) ocr_mem_free(t->data);
    memset(t, 0, sizeof *t);
}

OcrTensor ocr_tensor_reshape(const OcrTensor *t, int ndim, const int64_t *shape) {
    OcrTensor r = ocr_tensor_view(t->data, t->dtype, t->device, ndim, shape);
    OCR_ASSERT(ocr_tensor_numel(&r) == ocr_tensor_numel(t), "reshape changes the element count");
    return r;
}

int ocr_tensor_same_shape(const OcrTensor *a, const OcrTensor *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

const char *ocr_tensor_describe(const OcrTensor *t, char *buf, size_t bufsize) {
    size_t off = 0;
    off += (size_t)snprintf(buf + off, bufsize - off, "(");
    for (int i = 0; i < t->ndim && off < bufsize; i++)
        off += (size_t)snprintf(buf + off, bufsize - off, "%s%" PRId64, i ? ", " : "", t->shape[i]);
    if (off < bufsize) snprintf(buf + off, bufsize - off, ") %s", ocr_dtype_name(t->dtype));
    return buf;
}

float ocr_tensor_get_f32(const OcrTensor *t, int64_t i) {
    OCR_ASSERT(t->device.type == OCR_DEVICE_CPU);
    OCR_ASSERT(i >= 0 && i < ocr_tensor_numel(t), "index %lld of %lld elements", (long long)i, (long long)ocr_tensor_numel(t));
    switch (t->dtype) {
        case OCR_F32: return ((const float *)t->data)[i];
        case OCR_F16: return ocr_f16_to_f32(((const ocr_f16_t *)t->data)[i]);
        case OCR_BF16: return ocr_bf16_to_f32(((const ocr_bf16_t *)t->data)[i]);
        case OCR_I32: return (float)((const int32_t *)t->data)[i];
        case OCR_U8: return (float)((const uint8_t *)t->data)[i];
        default: OCR_ASSERT(0);
    }
}

// Float to integer truncates toward zero like a C cast, but saturates at the type's range
// and maps NaN to 0: a plain cast of an out-of-range value is undefined behaviour.
static int32_t f32_to_i32_sat(float v) {
    if (!(v == v)) return 0;
    if (v >= 2147483648.0f) return INT32_MAX;
    if (v <= -2147483648.0f) return INT32_MIN;
    return (int32_t)v;
}
static uint8_t f32_to_u8_sat(float v) {
    if (!(v > 0.0f)) return 0;  // also NaN
    if (v >= 255.0f) return 255;
    return (uint8_t)v;
}

void ocr_tensor_set_f32(OcrTensor *t, int64_t i, float v) {
    OCR_ASSERT(t->device.type == OCR_DEVICE_CPU);
    OCR_ASSERT(i >= 0 && i < ocr_tensor_numel(t), "index %lld of %lld elements", (long long)i, (long long)ocr_tensor_numel(t));
    switch (t->dtype) {
        case OCR_F32: ((float *)t->data)[i] = v; break;
        case OCR_F16: ((ocr_f16_t *)t->data)[i] = ocr_f32_to_f16(v); break;
        case OCR_BF16: ((ocr_bf16_t *)t->data)[i] = ocr_f32_to_bf16(v); break;
        case OCR_I32: ((int32_t *)t->data)[i] = f32_to_i32_sat(v); break;
        case OCR_U8: ((uint8_t *)t->data)[i] = f32_to_u8_sat(v); break;
        default: OCR_ASSERT(0);
    }
}

void ocr_tensor_to_f32(const OcrTensor *t, float *dst) {
    OCR_ASSERT(t->device.type == OCR_DEVICE_CPU && ocr_dtype_is_float(t->dtype));
    size_t n = (size_t)ocr_tensor_numel(t);
    if (n == 0) return;  // an empty view may have NULL data (memcpy's arguments must not be NULL)
    if (t->dtype == OCR_F32)
        memcpy(dst, t->data, n * 4);
    else if (t->dtype == OCR_F16)
        ocr_f16_to_f32_array(dst, t->data, n);
    else
        ocr_bf16_to_f32_array(dst, t->data, n);
}

void ocr_tensor_from_f32(OcrTensor *t, const float *src) {
    OCR_ASSERT(t->device.type == OCR_DEVICE_CPU && ocr_dtype_is_float(t->dtype));
    size_t n = (size_t)ocr_tensor_numel(t);
    if (n == 0) return;
    if (t->dtype == OCR_F32)
        memcpy(t->data, src, n * 4);
    else if (t->dtype == OCR_F16)
        ocr_f32_to_f16_array(t->data, src, n);
    else
        ocr_f32_to_bf16_array(t->data, src, n);
}

void ocr_tensor_fill(OcrTensor *t, float v) {
    int64_t n = ocr_tensor_numel(t);
    if (n == 0) return;
    ocr_tensor_set_f32(t, 0, v);  // convert once, then copy the element's bytes
    size_t es = ocr_dtype_size(t->dtype);
    for (int64_t i = 1; i < n; i++) memcpy((char *)t->data + (size_t)i * es, t->data, es);
}

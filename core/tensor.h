// Tensors: dtype + device + shape (up to 4 dims) + contiguous data.
//
// Images are NHWC (channels last), sequences (B, T, C), matrices (rows, cols); the last
// dimension is contiguous. A tensor either owns its data (allocated from the tracked
// allocator with a category) or views memory owned elsewhere (a slice of the parameter
// buffer, a reshape of another tensor).
#ifndef OCR_CORE_TENSOR_H
#define OCR_CORE_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "core/device.h"
#include "core/error.h"
#include "core/half.h"
#include "core/memory.h"

typedef enum {
    OCR_F32 = 0,
    OCR_F16,
    OCR_BF16,
    OCR_I32,
    OCR_U8,
    OCR_DTYPE_COUNT
} ocr_dtype_t;

#define OCR_MAX_DIMS 4

typedef struct OcrTensor {
    ocr_dtype_t dtype;
    ocr_device_t device;
    int ndim;
    int64_t shape[OCR_MAX_DIMS];  // unused trailing entries are 1
    void *data;
    int owns_data;
    ocr_mem_category_t category;  // for owned data
} OcrTensor;

size_t ocr_dtype_size(ocr_dtype_t dtype);
const char *ocr_dtype_name(ocr_dtype_t dtype);  // "float32", "float16", "bfloat16", "int32", "uint8"
// Accepts the names above and the short ones ("f32", "fp16", "bf16", "F16" as in safetensors ...).
int ocr_dtype_from_name(const char *name, ocr_dtype_t *out);
static inline int ocr_dtype_is_float(ocr_dtype_t d) { return d == OCR_F32 || d == OCR_F16 || d == OCR_BF16; }

int64_t ocr_tensor_numel(const OcrTensor *t);
size_t ocr_tensor_bytes(const OcrTensor *t);
// Size of dimension i, counting negative i from the end (-1 = last).
int64_t ocr_tensor_dim(const OcrTensor *t, int i);

// Describes memory owned elsewhere. Returns the tensor by value: OcrTensor v = ocr_tensor_view(...).
OcrTensor ocr_tensor_view(void *data, ocr_dtype_t dtype, ocr_device_t device, int ndim, const int64_t *shape);
// Convenience for up to 4 dims on the CPU: ocr_tensor_view_cpu(data, OCR_F32, 2, (int64_t[]){3, 4}).
#define ocr_tensor_view_cpu(data, dtype, ndim, shape) ocr_tensor_view((data), (dtype), ocr_cpu(), (ndim), (shape))

// Allocates (uninitialised) from the tracked allocator.
ocr_status_t ocr_tensor_alloc(OcrTensor *t, ocr_dtype_t dtype, ocr_device_t device, int ndim, const int64_t *shape,
                              ocr_mem_category_t category);
// Frees owned data (views are left alone) and clears the struct.
void ocr_tensor_free(OcrTensor *t);
// Same data, new shape with the same element count.
OcrTensor ocr_tensor_reshape(const OcrTensor *t, int ndim, const int64_t *shape);

int ocr_tensor_same_shape(const OcrTensor *a, const OcrTensor *b);
// "(2, 48, 320, 3) float16" into buf.
const char *ocr_tensor_describe(const OcrTensor *t, char *buf, size_t bufsize);

// Element access through f32 (CPU tensors; slow, for tests and small host-side work).
float ocr_tensor_get_f32(const OcrTensor *t, int64_t index);
void ocr_tensor_set_f32(OcrTensor *t, int64_t index, float value);
// Whole-tensor conversion from/to an f32 array of numel elements (CPU tensors of a float dtype).
void ocr_tensor_to_f32(const OcrTensor *t, float *dst);
void ocr_tensor_from_f32(OcrTensor *t, const float *src);
// Fills with one value (converted to the tensor's dtype); CPU tensors.
void ocr_tensor_fill(OcrTensor *t, float value);

#endif

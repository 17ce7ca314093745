// safetensors checkpoints: an 8-byte little-endian header length, a JSON header mapping
// names to {dtype, shape, data_offsets} (plus an optional "__metadata__" string map), then
// the raw little-endian tensor bytes. Writes are atomic. Reads validate the header length,
// every offset against the file size, dtype names, and that shape × dtype size equals the
// byte range, and say exactly what is wrong.
#ifndef OCR_CORE_SAFETENSORS_H
#define OCR_CORE_SAFETENSORS_H

#include <stdint.h>

#include "core/error.h"
#include "core/tensor.h"

typedef struct {
    const char *name;
    ocr_dtype_t dtype;  // F32, F16, BF16, I32 (U8 too)
    int ndim;
    int64_t shape[OCR_MAX_DIMS];
    const void *data;   // host memory, ocr_dtype_size(dtype) * prod(shape) bytes
} OcrNamedTensor;

typedef struct {
    const char *key;
    const char *value;
} OcrMetadataEntry;

ocr_status_t ocr_safetensors_write(const char *path, const OcrNamedTensor *tensors, int count,
                                   const OcrMetadataEntry *metadata, int metadata_count);

typedef struct OcrSafetensors OcrSafetensors;

ocr_status_t ocr_safetensors_open(OcrSafetensors **out, const char *path);
void ocr_safetensors_close(OcrSafetensors *st);
int ocr_safetensors_count(const OcrSafetensors *st);
const OcrNamedTensor *ocr_safetensors_at(const OcrSafetensors *st, int i);
const OcrNamedTensor *ocr_safetensors_find(const OcrSafetensors *st, const char *name);
// NULL when absent.
const char *ocr_safetensors_metadata(const OcrSafetensors *st, const char *key);

#endif

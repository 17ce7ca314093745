// A growable byte buffer for writers that build a whole file in memory (the ONNX protobuf and
// .pdparams pickle exporters): appends double the capacity as needed; after a failed allocation
// `oom` is set and every later append is dropped, so a writer checks once at the end.
#ifndef OCR_CORE_BYTEBUF_H
#define OCR_CORE_BYTEBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint8_t *p;  // malloc'd bytes (NULL while empty); the owner frees it
    size_t n, cap;
    int oom;     // an allocation failed: everything after it was dropped
} OcrByteBuf;

void ocr_bytebuf_append(OcrByteBuf *b, const void *data, size_t n);

#endif

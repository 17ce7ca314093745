// A Python pickle reader for numpy state dicts: `.pdparams` files (paddle.save(state_dict)),
// a pickle (protocols 2–5) of one dict {structured name → numpy ndarray}, see
// shared/reference/paddleocr_formats.md §1. It knows no network: mapping the names into a model
// is models/pdparams.h.
//
// The reader is a small, strict pickle machine of our own: it knows only the opcodes numpy and
// paddle pickles use (protocol/frame, marks, memo get/put, ints, str/bytes, None/bools, floats,
// tuples, lists, dicts, GLOBAL / STACK_GLOBAL, REDUCE, BUILD) and only the callables an
// ndarray's reduce names: numpy(._core|.core).multiarray._reconstruct, numpy.ndarray,
// numpy.dtype, collections.OrderedDict and _codecs.encode (protocol 2 bytes). Anything else
// — other globals, persistent ids, extension codes, object construction — is refused with
// OCR_ERR_FORMAT naming the opcode and its byte offset. Every length, memo index and stack
// access is bounds-checked against the buffer; nested containers are limited in depth; an
// array's byte count must equal its shape × dtype size. Arrays of float32/float16/float64
// are converted to float32; int and bool arrays are kept as counts in `other` (not loaded).
// Entries whose value is not an array (Paddle's "StructuredToParameterName@@" map) are listed
// in `other` too, so the caller can report every tensor it did not load.
#ifndef OCR_CORE_PICKLE_H
#define OCR_CORE_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define OCR_PD_MAX_DIMS 8

typedef struct {
    char *name;
    int ndim;
    int64_t shape[OCR_PD_MAX_DIMS];
    int64_t numel;
    char dtype[8];  // numpy's descr without the byte order: "f4", "f2", "f8"
    float *f32;     // C order, converted to float32
} OcrPdTensor;

typedef struct {
    OcrPdTensor *tensors;  // in the file's (state_dict) order
    int count;
    char **other;          // keys whose value is not a float array, with why ("name (dict)")
    int nother;
    int protocol;
} OcrPdparams;

// Parses a pickle held in memory (the fuzz entry point; `name` is used in messages).
ocr_status_t ocr_pdparams_parse(OcrPdparams **out, const uint8_t *data, size_t size, const char *name);
ocr_status_t ocr_pdparams_load(OcrPdparams **out, const char *path);
void ocr_pdparams_free(OcrPdparams *p);
const OcrPdTensor *ocr_pdparams_find(const OcrPdparams *p, const char *name);

#endif

// safetensors files (core/safetensors.c): ocr_safetensors_open on a temporary file (it maps
// the file), then every tensor read through the accessors and converted to f32 where it is
// a float tensor, as ckpt_load_pretrained does.
//
// Input: the file as is.
// Checked: every tensor's name finds that tensor again; its bytes (shape × dtype size) are
// readable; the metadata lookups answer; a refused file's message names the file.
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"
#include "fuzz/fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_temp_file("in.safetensors", data, size);
    OcrSafetensors *st;
    if (ocr_safetensors_open(&st, path) != OCR_OK) {
        OCR_ASSERT(strstr(ocr_last_error(), "in.safetensors"), "message without the file: %s", ocr_last_error());
        return 0;
    }
    int n = ocr_safetensors_count(st);
    OCR_ASSERT(n >= 0, "%d tensors", n);
    for (int i = 0; i < n; i++) {
        const OcrNamedTensor *t = ocr_safetensors_at(st, i);
        OCR_ASSERT(t->name && ocr_safetensors_find(st, t->name) == t, "tensor %d (%s) not found by name", i,
                   t->name ? t->name : "(null)");
        OCR_ASSERT(t->ndim >= 0 && t->ndim <= OCR_MAX_DIMS, "tensor %s has %d dims", t->name, t->ndim);
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            OCR_ASSERT(t->shape[d] >= 0, "tensor %s dim %d is %lld", t->name, d, (long long)t->shape[d]);
            numel *= t->shape[d];
        }
        size_t bytes = (size_t)numel * ocr_dtype_size(t->dtype);
        unsigned sum = 0;
        for (size_t k = 0; k < bytes; k++) sum += ((const uint8_t *)t->data)[k];
        if (ocr_dtype_is_float(t->dtype) && numel > 0) {
            float *f = malloc((size_t)numel * sizeof(float));
            OcrTensor v = ocr_tensor_view((void *)t->data, t->dtype, ocr_cpu(), t->ndim, t->shape);
            ocr_tensor_to_f32(&v, f);
            sum += (unsigned)(f[0] == f[0]);
            free(f);
        }
        volatile unsigned sink = sum;
        (void)sink;
    }
    const char *v = ocr_safetensors_metadata(st, "format");
    if (v) OCR_ASSERT(strlen(v) < size, "metadata longer than the file");
    (void)ocr_safetensors_metadata(st, "updates");
    ocr_safetensors_close(st);
    return 0;
}

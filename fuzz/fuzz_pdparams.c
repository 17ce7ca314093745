// PaddleOCR `.pdparams` checkpoints (core/pickle.c, models/pdparams.c): the pickle reader on the bytes,
// then the name mapping, the network inference from names and shapes, and, when that gives
// a network, the load into it (as Global.pretrained_model does).
//
// Input: the pickle, as is.
// Checked: every tensor's data (numel floats) is readable and its numel is the product of
// its shape; lookups by name find each tensor; a refused file's message names it; a load
// never claims more tensors than the file has.
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "models/pdparams.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    OcrPdparams *p = NULL;
    if (ocr_pdparams_parse(&p, data, size, "fuzz.pdparams") != OCR_OK) {
        OCR_ASSERT(strstr(ocr_last_error(), "fuzz.pdparams"), "message without the file: %s", ocr_last_error());
        return 0;
    }
    float sum = 0;
    for (int i = 0; i < p->count; i++) {
        const OcrPdTensor *t = &p->tensors[i];
        OCR_ASSERT(t->name && t->ndim >= 0 && t->ndim <= OCR_PD_MAX_DIMS, "tensor %d: %d dims", i, t->ndim);
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
        OCR_ASSERT(numel == t->numel, "tensor %s: numel %lld, shape gives %lld", t->name, (long long)t->numel,
                   (long long)numel);
        for (int64_t k = 0; k < t->numel; k++) sum += t->f32[k];
        const OcrPdTensor *f = ocr_pdparams_find(p, t->name);
        OCR_ASSERT(f && strcmp(f->name, t->name) == 0, "tensor %s not found by name", t->name);
        char ours[512];
        (void)ocr_pdparams_map_name(t->name, ours, sizeof ours);
    }
    for (int i = 0; i < p->nother; i++) OCR_ASSERT(p->other[i], "other entry %d is NULL", i);
    volatile float sink = sum;
    (void)sink;
    OcrArch arch;
    char desc[512];
    if (ocr_pdparams_arch(p, &arch, desc, sizeof desc) == OCR_OK) {
        OcrModel *m = NULL;
        if (ocr_model_create(&m, &arch) == OCR_OK) {
            OcrPdLoadReport rep;
            memset(&rep, 0, sizeof rep);
            if (ocr_pdparams_load_into(m, p, &rep) == OCR_OK)
                OCR_ASSERT(rep.loaded <= p->count, "loaded %d of %d tensors", rep.loaded, p->count);
            ocr_pdparams_report_free(&rep);
            ocr_model_free(m);
        }
    }
    ocr_pdparams_free(p);
    return 0;
}

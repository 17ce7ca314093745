#include "training/export.h"

#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "models/pdparams.h"

ocr_status_t export_read_dictionary(const char *path, char **text) {
    *text = NULL;
    if (!path) return OCR_OK;
    size_t n;
    char *d;
    OCR_TRY(ocr_read_file(path, &d, &n));
    while (n > 0 && (d[n - 1] == '\n' || d[n - 1] == '\r')) d[--n] = '\0';
    *text = d;
    return OCR_OK;
}

ocr_status_t export_model_from_pdparams(OcrModel **out, const char *path, char *desc, size_t desc_size) {
    *out = NULL;
    OcrPdparams *p;
    OCR_TRY(ocr_pdparams_load(&p, path));
    // A PaddleOCR distillation checkpoint: its student (the Student. tensors, prefix stripped).
    ocr_pdparams_select_prefix(p, "Student.");
    OcrArch arch;
    OcrModel *m = NULL;
    OcrPdLoadReport rep;
    memset(&rep, 0, sizeof rep);
    ocr_status_t st = ocr_pdparams_arch(p, &arch, desc, desc_size);
    if (st == OCR_OK) st = ocr_model_create(&m, &arch);
    if (st == OCR_OK) st = ocr_pdparams_load_into(m, p, &rep);
    if (st == OCR_OK && rep.missing)
        st = ocr_set_error(OCR_ERR_FORMAT, "%s: %d of the network's tensors are not in the file (first: %s)", path,
                           rep.missing, rep.first_missing);
    ocr_pdparams_report_free(&rep);
    ocr_pdparams_free(p);
    if (st != OCR_OK) {
        ocr_model_free(m);
        return st;
    }
    *out = m;
    return OCR_OK;
}

static ocr_status_t write_f32(const OcrTensor *t, const char *path) {
    int64_t count = ocr_tensor_numel(t);
    float *host = malloc((size_t)count * sizeof(float));
    if (!host) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    ocr_tensor_to_f32(t, host);
    ocr_status_t st = ocr_write_file_atomic(path, host, (size_t)count * sizeof(float));
    free(host);
    return st;
}

ocr_status_t export_probe(OcrModel *m, const char *in, const char *out, const char *logits, ExportProbe *info) {
    const OcrArch *a = ocr_model_arch(m);
    char *d;
    size_t n;
    OCR_TRY(ocr_read_file(in, &d, &n));
    size_t row = (size_t)3 * (size_t)a->img_h * sizeof(float);
    if (n == 0 || n % row != 0) {
        free(d);
        return ocr_set_error(OCR_ERR_FORMAT, "--probe %s: %zu bytes is not a (1, 3, %d, W) float32 array", in, n, a->img_h);
    }
    int64_t H = a->img_h, W = (int64_t)(n / row);
    const float *x = (const float *)d;
    float *nhwc = malloc(n);
    if (!nhwc) {
        free(d);
        return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    }
    for (int64_t c = 0; c < 3; c++)
        for (int64_t y = 0; y < H; y++)
            for (int64_t w = 0; w < W; w++) nhwc[(y * W + w) * 3 + c] = x[(c * H + y) * W + w];
    free(d);
    OcrTensor img = ocr_tensor_view_cpu(nhwc, OCR_F32, 4, ((int64_t[]){1, H, W, 3}));
    ocr_status_t st = ocr_model_forward(m, &img, 0);
    free(nhwc);
    OCR_TRY(st);
    const OcrTensor *p = ocr_model_probs(m);
    st = write_f32(p, out);
    if (st == OCR_OK && logits) st = write_f32(ocr_model_logits(m), logits);
    if (st == OCR_OK) *info = (ExportProbe){H, W, p->shape[1], p->shape[2]};
    return st;
}

#include "training/export.h"

#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/safetensors.h"
#include "models/pdparams.h"
#include "models/weights_io.h"
#include "training/checkpoint.h"
#include "training/distill_config.h"

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

// 1 when the safetensors file holds a tensor named prefix + something.
static ocr_status_t has_prefix(const char *file, const char *prefix, int *yes) {
    OcrSafetensors *st;
    OCR_TRY(ocr_safetensors_open(&st, file));
    *yes = 0;
    for (int i = 0; i < ocr_safetensors_count(st) && !*yes; i++)
        *yes = strncmp(ocr_safetensors_at(st, i)->name, prefix, strlen(prefix)) == 0;
    ocr_safetensors_close(st);
    return OCR_OK;
}

ocr_status_t export_distillation_pdparams(const OcrConfig *cfg, const OcrModel *trained, const char *weights,
                                          const char *path, OcrPdWriteInfo *info, int *nnets) {
    *nnets = 0;
    DistillConfig dc;
    OCR_TRY(distill_config_read(&dc, cfg));
    if (!dc.enabled)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: --all-networks needs a distillation config (Architecture.name "
                             "DistillationModel)", ocr_config_source(cfg));
    char file[4096];
    OCR_TRY(ckpt_weights_path(weights, file, sizeof file));
    OcrModel *nets[DISTILL_MAX_NETS] = {0};
    OcrPdNamedModel named[DISTILL_MAX_NETS];
    ocr_status_t st = OCR_OK;
    for (int i = 0; i < dc.nnets && st == OCR_OK; i++) {
        named[i].name = dc.nets[i].name;
        named[i].m = trained;
        if (i == dc.trained) continue;
        // Every other network as ocrtrain's distillation checkpoints hold it: "<name>.<tensor>".
        char prefix[40];
        snprintf(prefix, sizeof prefix, "%s.", dc.nets[i].name);
        int present = 0;
        st = has_prefix(file, prefix, &present);
        if (st == OCR_OK && !present)
            st = ocr_set_error(OCR_ERR_FORMAT, "%s holds no %s* tensors: --all-networks reads every network of "
                               "Architecture.Models from an ocrtrain distillation checkpoint (a network no loss "
                               "term uses is not in one)", file, prefix);
        if (st == OCR_OK) st = ocr_model_create(&nets[i], &dc.nets[i].arch);
        if (st == OCR_OK) {
            ocr_model_set_weights_prefix(nets[i], prefix);
            st = ocr_model_load_weights(nets[i], file);
            if (st != OCR_OK) st = ocr_wrap_error(st, "Architecture.Models.%s", dc.nets[i].name);
        }
        named[i].m = nets[i];
    }
    if (st == OCR_OK) st = ocr_pdparams_write_named(named, dc.nnets, path, info);
    if (st == OCR_OK) *nnets = dc.nnets;
    for (int i = 0; i < DISTILL_MAX_NETS; i++) ocr_model_free(nets[i]);
    return st;
}

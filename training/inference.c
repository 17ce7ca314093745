#include "training/inference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "training/checkpoint.h"
#include "training/evaluate.h"
#include "training/feed.h"
#include "training/trainer.h"
#include "kernels/ops.h"
#include "data/transforms.h"
#include "eval/decode.h"
#include "models/amp_view.h"

ocr_status_t infer_model_load(InferModel *im, const OcrConfig *cfg, const char *weights, int with_amp,
                              const char *device) {
    memset(im, 0, sizeof *im);
    char file[4200];
    OCR_TRY(ckpt_weights_path(weights, file, sizeof file));
    OCR_TRY(ocr_model_from_config(&im->m, cfg));
    // CTC-only weights under a MultiHead config and the reverse (models/weights_names.h).
    ocr_status_t st = ocr_model_load_weights_mapped(im->m, file, NULL);
    AmpConfig ac;
    if (st == OCR_OK) {
        if (with_amp) st = amp_config_from_config(&ac, cfg);
        else amp_config_init_off(&ac);
    }
    ocr_device_t dev = ocr_cpu();
    if (st == OCR_OK && device) st = ocr_device_parse(device, &dev);
    if (st == OCR_OK && dev.type == OCR_DEVICE_CUDA) {
        // Weights are read on the host; the model moves before the AMP engine makes its copies.
        TrainingDeviceInfo info;
        ocr_dtype_t want = ac.policy.level == OCR_AMP_O0 ? OCR_F32 : ac.policy.dtype;
        st = training_device_prepare(device, want, 0, &info);
        if (st == OCR_OK) st = ocr_model_to_device(im->m, dev);
        if (st != OCR_OK) amp_config_free(&ac);
    }
    if (st == OCR_OK) {
        amp_engine_init(&im->amp, &ac);
        im->amp_ok = 1;
        st = ocr_amp_attach(&im->amp, ocr_model_ops(im->m), ocr_model_params(im->m), ocr_model_stats(im->m));
        if (st == OCR_OK && im->amp.cfg.policy.level == OCR_AMP_O1) st = ocr_model_set_cast_cache(im->m, &im->amp.cache);
    }
    if (st != OCR_OK) infer_model_free(im);
    return st;
}

void infer_model_free(InferModel *im) {
    if (im->amp_ok) amp_engine_free(&im->amp);
    if (im->m) ocr_model_free(im->m);
    memset(im, 0, sizeof *im);
}

ocr_status_t infer_forward_batch(OcrModel *m, const FeedBatch *fb) {
    ocr_device_t dev = ocr_model_device(m);
    int cnt = fb->count, H = fb->height, W = fb->width, C = fb->channels;
    ocr_status_t st = OCR_OK;
    if (dev.type == OCR_DEVICE_CPU) {
        float *x = malloc((size_t)cnt * H * W * C * sizeof *x);
        if (!x) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
        feed_normalize(fb, x);
        OcrTensor t = ocr_tensor_view(x, OCR_F32, ocr_cpu(), 4, (int64_t[]){cnt, H, W, C});
        st = ocr_model_forward(m, &t, 0);
        free(x);  // the pass keeps only its logits and probabilities
        return st;
    }
    // On the GPU: the uint8 batch and its widths are copied there and normalised there.
    OcrTensor di = {0}, dw = {0};
    st = ocr_tensor_alloc(&di, OCR_U8, dev, 4, (int64_t[]){cnt, H, W, C}, OCR_MEM_DATA);
    if (st == OCR_OK) st = ocr_tensor_alloc(&dw, OCR_I32, dev, 1, (int64_t[]){cnt}, OCR_MEM_DATA);
    if (st == OCR_OK) {
        ocr_copy_bytes(dev, di.data, ocr_cpu(), fb->pixels, ocr_tensor_bytes(&di));
        ocr_copy_bytes(dev, dw.data, ocr_cpu(), fb->widths, ocr_tensor_bytes(&dw));
        st = ocr_model_forward_u8(m, &di, &dw, 0);
    }
    // Decoding reads the probabilities; the inputs are free once the forward ran.
    ocr_tensor_free(&di);
    ocr_tensor_free(&dw);
    return st;
}

int predict_batch_width(int height, int min_width, double max_ratio) {
    double r = (double)min_width / height;
    if (max_ratio > r) r = max_ratio;
    return (int)(height * r);
}

typedef struct {
    double ratio;
    int index;
} RatioIndex;

static int cmp_ratio(const void *a, const void *b) {
    const RatioIndex *x = a, *y = b;
    if (x->ratio != y->ratio) return x->ratio < y->ratio ? -1 : 1;
    return x->index - y->index;  // stable, as Python's sort
}

ocr_status_t predict_images(OcrModel *m, const OcrDict *dict, const OcrImage *images, int n, int batch, int height,
                            int channels, int min_width, Prediction *out) {
    RatioIndex *ri = malloc((size_t)(n ? n : 1) * sizeof *ri);
    if (!ri) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    int k = 0;
    for (int i = 0; i < n; i++)
        if (images[i].pixels) ri[k++] = (RatioIndex){(double)images[i].width / images[i].height, i};
    qsort(ri, (size_t)k, sizeof *ri, cmp_ratio);
    ocr_status_t st = OCR_OK;
    size_t cap = 0;
    char *text = NULL;
    for (int beg = 0; beg < k && st == OCR_OK; beg += batch) {
        int cnt = k - beg < batch ? k - beg : batch;
        double maxr = 0;
        for (int j = 0; j < cnt; j++)
            if (ri[beg + j].ratio > maxr) maxr = ri[beg + j].ratio;
        int W = predict_batch_width(height, min_width, maxr);
        FeedBatch fb;
        st = feed_batch_alloc(&fb, cnt, height, W, channels, 1);
        if (st != OCR_OK) break;
        for (int j = 0; j < cnt && st == OCR_OK; j++) {
            float vr;
            uint8_t *dst = fb.pixels + (size_t)j * height * W * channels;
            st = ocr_rec_resize_pad(dst, height, W, channels, &images[ri[beg + j].index], 1, &fb.widths[j], &vr);
        }
        fb.count = cnt;
        if (st == OCR_OK) st = infer_forward_batch(m, &fb);
        if (st == OCR_OK) {
            const OcrTensor *probs = ocr_model_probs(m);
            size_t need = ctc_text_capacity((int)probs->shape[1], dict->classes, dict->num_classes);
            if (need > cap) {
                free(text);
                text = malloc(need);
                cap = text ? need : 0;
                if (!text) st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
            }
        }
        for (int j = 0; j < cnt && st == OCR_OK; j++) {
            Prediction *p = &out[ri[beg + j].index];
            st = decode_sample(m, dict, j, text, cap, &p->confidence);
            if (st == OCR_OK) {
                p->text = strdup(text);
                p->ok = p->text != NULL;
                if (!p->text) st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
            }
        }
        feed_batch_free(&fb);
    }
    free(text);
    free(ri);
    return st;
}

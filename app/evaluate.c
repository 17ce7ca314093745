#include "app/evaluate.h"

#include <stdlib.h>
#include <string.h>

#include "core/timer.h"
#include "kernels/ops.h"
#include "eval/decode.h"
#include "eval/metrics.h"

ocr_status_t decode_sample(const OcrModel *m, const OcrDict *dict, int b, char *text, size_t cap, float *conf) {
    const OcrTensor *probs = ocr_model_probs(m);
    if (!probs) return ocr_set_error(OCR_ERR_INTERNAL, "decode: no inference pass");
    int T = (int)probs->shape[1], C = (int)probs->shape[2];
    if (C != dict->num_classes)
        return ocr_set_error(OCR_ERR_CONFIG, "the model has %d classes, the dictionary %d", C, dict->num_classes);
    float stackbuf[4096];
    float *row = (size_t)T * C <= sizeof stackbuf / sizeof *stackbuf ? stackbuf : malloc((size_t)T * C * sizeof(float));
    if (!row) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    size_t esz = ocr_dtype_size(probs->dtype);
    const char *src = (const char *)probs->data + (size_t)b * T * C * esz;
    if (probs->device.type == OCR_DEVICE_CPU) {
        OcrTensor v = ocr_tensor_view((void *)src, probs->dtype, probs->device, 2, (int64_t[]){T, C});
        ocr_tensor_to_f32(&v, row);
    } else {
        // A GPU pass: the sample's rows to the host (waits for the forward), converted there.
        void *h = malloc((size_t)T * C * esz);
        if (!h) {
            if (row != stackbuf) free(row);
            return ocr_set_error(OCR_ERR_OOM, "out of host memory");
        }
        copy_bytes(ocr_cpu(), h, probs->device, src, (size_t)T * C * esz);
        OcrTensor v = ocr_tensor_view(h, probs->dtype, ocr_cpu(), 2, (int64_t[]){T, C});
        ocr_tensor_to_f32(&v, row);
        free(h);
    }
    ocr_status_t st = ctc_greedy_decode(text, cap, conf, row, T, C, 0, dict->classes);
    if (row != stackbuf) free(row);
    return st;
}

ocr_status_t evaluate(OcrModel *m, Feed *feed, const OcrDict *dict, RecMetricOptions mopt, EvalResult *out) {
    memset(out, 0, sizeof *out);
    int B = feed->max_batch, H = feed->max_height, W = feed->max_width, C = feed->channels;
    FeedBatch batch;
    OcrTensor images = {0};
    ocr_device_t dev = ocr_model_device(m);
    FeedUpload *up = NULL;
    if (dev.type == OCR_DEVICE_CPU)
        OCR_TRY(ocr_tensor_alloc(&images, OCR_F32, ocr_cpu(), 4, (int64_t[]){B, H, W, C}, OCR_MEM_DATA));
    else
        OCR_TRY(feed_upload_open(&up, dev, B, H, W, C, feed->max_len));
    ocr_status_t st = OCR_OK;
    size_t cap = 4096;
    char *pred = malloc(cap), *ref = malloc(cap);
    if (!pred || !ref) st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
    RecMetric metric;
    rec_metric_init(&metric, mopt);
    OcrSkipStats sk;
    feed_skip_stats(feed, &sk);
    int64_t skipped0 = ocr_skip_stats_total(&sk);
    if (st == OCR_OK) st = feed_seek(feed, 0, 0);
    double t0 = ocr_now_seconds();
    while (st == OCR_OK) {
        int end;
        st = feed_next(feed, &batch, &end);
        if (st != OCR_OK || end) break;
        if (batch.count == 0) continue;
        if (!up) {
            feed_normalize(&batch, images.data);
            OcrTensor x = ocr_tensor_view(images.data, OCR_F32, ocr_cpu(), 4,
                                          (int64_t[]){batch.count, batch.height, batch.width, batch.channels});
            st = ocr_model_forward(m, &x, 0);
        } else {
            // On the GPU: the uint8 batch is uploaded and normalised there.
            FeedDeviceBatch db;
            st = feed_upload(up, &batch, &db);
            if (st == OCR_OK) st = ocr_model_forward_u8(m, &db.images, &db.widths, 0);
            feed_upload_consumed(up);
        }
        for (int b = 0; st == OCR_OK && b < batch.count; b++) {
            float conf;
            st = decode_sample(m, dict, b, pred, cap, &conf);
            if (st != OCR_OK) break;
            feed_label_text(dict, &batch, b, ref, cap);
            st = rec_metric_add(&metric, pred, ref);
        }
    }
    double secs = ocr_now_seconds() - t0;
    if (st == OCR_OK) {
        RecMetricResult r = rec_metric_get(&metric);
        out->acc = r.acc;
        out->norm_edit_dis = r.norm_edit_dis;
        out->cer = r.cer;
        out->samples = metric.count;
        out->seconds = secs;
        out->samples_per_s = secs > 0 ? (double)metric.count / secs : 0;
        feed_skip_stats(feed, &sk);
        out->skipped = ocr_skip_stats_total(&sk) - skipped0;
    }
    free(pred);
    free(ref);
    ocr_tensor_free(&images);
    feed_upload_close(up);
    return st;
}

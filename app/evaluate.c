#include "app/evaluate.h"

#include <stdlib.h>
#include <string.h>

#include "core/timer.h"
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
    OcrTensor v = ocr_tensor_view((char *)probs->data + (size_t)b * T * C * ocr_dtype_size(probs->dtype), probs->dtype,
                                  probs->device, 2, (int64_t[]){T, C});
    ocr_tensor_to_f32(&v, row);
    ocr_status_t st = ctc_greedy_decode(text, cap, conf, row, T, C, 0, dict->classes);
    if (row != stackbuf) free(row);
    return st;
}

ocr_status_t evaluate(OcrModel *m, Feed *feed, const OcrDict *dict, RecMetricOptions mopt, EvalResult *out) {
    memset(out, 0, sizeof *out);
    int B = feed->max_batch, H = feed->max_height, W = feed->max_width, C = feed->channels;
    FeedBatch batch;
    OcrTensor images;
    OCR_TRY(ocr_tensor_alloc(&images, OCR_F32, ocr_cpu(), 4, (int64_t[]){B, H, W, C}, OCR_MEM_DATA));
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
        feed_normalize(&batch, images.data);
        OcrTensor x = ocr_tensor_view(images.data, OCR_F32, ocr_cpu(), 4,
                                      (int64_t[]){batch.count, batch.height, batch.width, batch.channels});
        st = ocr_model_forward(m, &x, 0);
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
    return st;
}

// SAR's 2-D attention score (ParallelSARDecoder._2d_attention, PaddleOCR's PP-OCRv3 guidance
// branch) on the CPU: s[b, t, p] = Σ_d w_d·tanh(key[b, p, d] + query[b, t, d]) + bias, with the
// valid_ratio mask (columns at or right of valid_w[b] are −inf), in fp32.
//
// The (B, T, P, D) tanh tensor Paddle materialises (≈ 0.5 M floats per sample at d_k 512) is
// never stored: the backward recomputes each tanh from key and query. The weight gradient is
// summed per sample in double and the samples are then added in batch order, so the result does
// not depend on the thread count.
#include <math.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/ops.h"

typedef struct {
    int64_t B, T, P, D, W;
} SarShape;

static SarShape check(const OcrTensor *scores, const OcrTensor *key, const OcrTensor *query, const OcrTensor *w,
                      const OcrTensor *valid_w, int grid_w, const char *op) {
    CPU_ASSERT_FLOAT(key);
    CPU_ASSERT_FLOAT(query);
    CPU_ASSERT_FLOAT(w);
    OCR_ASSERT(key->ndim == 3 && query->ndim == 3 && key->shape[0] == query->shape[0] &&
                   key->shape[2] == query->shape[2],
               "%s: key (B, P, D) and query (B, T, D) must agree", op);
    SarShape s = {key->shape[0], query->shape[1], key->shape[1], key->shape[2], grid_w};
    OCR_ASSERT(ocr_tensor_numel(w) == s.D, "%s: w must hold D = %lld values", op, (long long)s.D);
    OCR_ASSERT(grid_w >= 1 && s.P % grid_w == 0, "%s: %lld positions are not rows of %d columns", op, (long long)s.P,
               grid_w);
    if (scores) {
        OCR_ASSERT(scores->device.type == OCR_DEVICE_CPU && scores->dtype == OCR_F32 && scores->ndim == 3 &&
                       scores->shape[0] == s.B && scores->shape[1] == s.T && scores->shape[2] == s.P,
                   "%s: scores must be CPU f32 (B, T, P)", op);
    }
    if (valid_w) {
        OCR_ASSERT(valid_w->device.type == OCR_DEVICE_CPU && valid_w->dtype == OCR_I32 && ocr_tensor_numel(valid_w) == s.B,
                   "%s: valid_w must be B CPU int32 values", op);
        const int32_t *v = valid_w->data;
        for (int64_t b = 0; b < s.B; b++)
            OCR_ASSERT(v[b] >= 1 && v[b] <= grid_w, "%s: valid_w[%lld] = %d outside [1, %d]", op, (long long)b, v[b],
                       grid_w);
    }
    return s;
}

static int64_t valid_cols(const OcrTensor *valid_w, int64_t b, int64_t W) {
    return valid_w ? ((const int32_t *)valid_w->data)[b] : W;
}

void ocr_cpu_sar_attention_score_forward(OcrTensor *scores, const OcrTensor *key, const OcrTensor *query,
                                         const OcrTensor *w, const OcrTensor *bias, const OcrTensor *valid_w,
                                         int grid_w) {
    SarShape s = check(scores, key, query, w, valid_w, grid_w, "sar_attention_score");
    CpuScratch sc = {0};
    const float *k = ocr_cpu_f32_in(&sc, key), *q = ocr_cpu_f32_in(&sc, query), *wv = ocr_cpu_f32_in(&sc, w);
    const float b0 = bias ? ocr_tensor_get_f32(bias, 0) : 0.0f;
    float *out = scores->data;
#pragma omp parallel for collapse(2) schedule(static) if (s.B * s.T * s.P * s.D > 65536)
    for (int64_t b = 0; b < s.B; b++)
        for (int64_t t = 0; t < s.T; t++) {
            const int64_t vw = valid_cols(valid_w, b, s.W);
            const float *qr = q + (b * s.T + t) * s.D;
            float *o = out + (b * s.T + t) * s.P;
            for (int64_t p = 0; p < s.P; p++) {
                if (p % s.W >= vw) {
                    o[p] = -INFINITY;
                    continue;
                }
                const float *kr = k + (b * s.P + p) * s.D;
                float acc = 0.0f;
                for (int64_t d = 0; d < s.D; d++) acc += wv[d] * tanhf(kr[d] + qr[d]);
                o[p] = acc + b0;
            }
        }
    ocr_cpu_scratch_free(&sc);
}

void ocr_cpu_sar_attention_score_backward(OcrTensor *dkey, OcrTensor *dquery, OcrTensor *dw, OcrTensor *dbias,
                                          const OcrTensor *dscores, const OcrTensor *key, const OcrTensor *query,
                                          const OcrTensor *w, const OcrTensor *valid_w, int grid_w) {
    SarShape s = check(dscores, key, query, w, valid_w, grid_w, "sar_attention_score_backward");
    if (dkey) OCR_ASSERT(ocr_tensor_same_shape(dkey, key), "sar_attention_score_backward: dkey must be (B, P, D)");
    if (dquery) OCR_ASSERT(ocr_tensor_same_shape(dquery, query), "sar_attention_score_backward: dquery must be (B, T, D)");
    if (dw) OCR_ASSERT(ocr_tensor_numel(dw) == s.D, "sar_attention_score_backward: dw must hold D values");
    if (dbias) OCR_ASSERT(ocr_tensor_numel(dbias) == 1, "sar_attention_score_backward: dbias must hold 1 value");
    CpuScratch sc = {0};
    const float *k = ocr_cpu_f32_in(&sc, key), *q = ocr_cpu_f32_in(&sc, query), *wv = ocr_cpu_f32_in(&sc, w);
    const float *ds = dscores->data;
    float *dk = dkey ? ocr_cpu_f32_out(&sc, dkey, 0) : NULL;
    float *dq = dquery ? ocr_cpu_f32_out(&sc, dquery, 0) : NULL;
    // Per sample: D weight-gradient partials and one bias partial, in double.
    double *part = ocr_cpu_scratch_bytes(&sc, (size_t)(s.B ? s.B : 1) * (size_t)(s.D + 1) * sizeof(double));
    float *dpre_all = ocr_cpu_scratch_floats(&sc, (size_t)(s.B ? s.B : 1) * (size_t)s.D);
#pragma omp parallel for schedule(static) if (s.B * s.T * s.P * s.D > 65536)
    for (int64_t b = 0; b < s.B; b++) {
        const int64_t vw = valid_cols(valid_w, b, s.W);
        double *pw = part + b * (s.D + 1);
        float *dpre = dpre_all + b * s.D;
        for (int64_t d = 0; d <= s.D; d++) pw[d] = 0.0;
        if (dk)
            for (int64_t i = 0; i < s.P * s.D; i++) dk[b * s.P * s.D + i] = 0.0f;
        for (int64_t t = 0; t < s.T; t++) {
            const float *qr = q + (b * s.T + t) * s.D;
            const float *g = ds + (b * s.T + t) * s.P;
            float *dqr = dq ? dq + (b * s.T + t) * s.D : NULL;
            if (dqr)
                for (int64_t d = 0; d < s.D; d++) dqr[d] = 0.0f;
            for (int64_t p = 0; p < s.P; p++) {
                if (p % s.W >= vw) continue;  // −inf scores: no path to the inputs
                const float gp = g[p];
                const float *kr = k + (b * s.P + p) * s.D;
                pw[s.D] += gp;
                for (int64_t d = 0; d < s.D; d++) {
                    const float e = tanhf(kr[d] + qr[d]);
                    pw[d] += (double)gp * e;
                    dpre[d] = gp * wv[d] * (1.0f - e * e);
                }
                if (dqr)
                    for (int64_t d = 0; d < s.D; d++) dqr[d] += dpre[d];
                if (dk) {
                    float *dkr = dk + (b * s.P + p) * s.D;
                    for (int64_t d = 0; d < s.D; d++) dkr[d] += dpre[d];
                }
            }
        }
    }
    if (dw || dbias) {
        double bsum = 0.0;
        for (int64_t b = 0; b < s.B; b++) bsum += part[b * (s.D + 1) + s.D];
        if (dbias) ocr_tensor_set_f32(dbias, 0, ocr_tensor_get_f32(dbias, 0) + (float)bsum);
        if (dw) {
            float *gw = ocr_cpu_f32_out(&sc, dw, 1);
            for (int64_t d = 0; d < s.D; d++) {
                double acc = 0.0;
                for (int64_t b = 0; b < s.B; b++) acc += part[b * (s.D + 1) + d];
                gw[d] += (float)acc;
            }
            ocr_cpu_f32_store(dw, gw);
        }
    }
    if (dk) ocr_cpu_f32_store(dkey, dk);
    if (dq) ocr_cpu_f32_store(dquery, dq);
    ocr_cpu_scratch_free(&sc);
}

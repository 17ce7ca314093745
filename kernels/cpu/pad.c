// Spatial padding of NHWC maps with a constant, different amounts per side (Paddle's
// padding="SAME" of even kernels: StemBlock's 2x2 convs and max pool in PPLCNetV4). Pure data
// movement: elements are copied as raw bits (input and output share a dtype), the border gets
// `value` rounded once into that dtype (0 and -inf are exact in f16/bf16).
#include <omp.h>
#include <string.h>

#include "core/half.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/ops.h"

static void pad_check(const OcrTensor *big, const OcrTensor *small, int top, int left, const char *what) {
    OCR_ASSERT(big->ndim == 4 && small->ndim == 4, "%s: NHWC maps expected", what);
    OCR_ASSERT(big->dtype == small->dtype && ocr_dtype_is_float(big->dtype), "%s: one float dtype for both maps", what);
    OCR_ASSERT(big->shape[0] == small->shape[0] && big->shape[3] == small->shape[3], "%s: batch and channels differ",
               what);
    OCR_ASSERT(top >= 0 && left >= 0 && big->shape[1] >= small->shape[1] + top && big->shape[2] >= small->shape[2] + left,
               "%s: a %lldx%lld map does not fit at (%d, %d) in %lldx%lld", what, (long long)small->shape[1],
               (long long)small->shape[2], top, left, (long long)big->shape[1], (long long)big->shape[2]);
}

void ocr_cpu_pad2d_forward(OcrTensor *out, const OcrTensor *inp, int top, int left, float value) {
    pad_check(out, inp, top, left, "pad2d");
    const int64_t N = out->shape[0], Ho = out->shape[1], Wo = out->shape[2], C = out->shape[3];
    const int64_t H = inp->shape[1], W = inp->shape[2];
    const size_t es = ocr_dtype_size(out->dtype);
    uint32_t v32;
    uint16_t v16 = out->dtype == OCR_F16 ? ocr_f32_to_f16(value) : ocr_f32_to_bf16(value);
    memcpy(&v32, &value, sizeof v32);
#pragma omp parallel for schedule(static) if (N * Ho * Wo * C >= 32768)
    for (int64_t r = 0; r < N * Ho; r++) {
        const int64_t n = r / Ho, h = r % Ho;
        char *orow = (char *)out->data + (size_t)(r * Wo * C) * es;
        const int in_row = h >= top && h < top + H;
        for (int64_t w = 0; w < Wo; w++) {
            char *o = orow + (size_t)(w * C) * es;
            if (in_row && w >= left && w < left + W) {
                const char *i = (const char *)inp->data + (size_t)(((n * H + (h - top)) * W + (w - left)) * C) * es;
                memcpy(o, i, (size_t)C * es);
            } else if (es == 4) {
                for (int64_t c = 0; c < C; c++) memcpy(o + 4 * c, &v32, 4);
            } else {
                for (int64_t c = 0; c < C; c++) memcpy(o + 2 * c, &v16, 2);
            }
        }
    }
}

void ocr_cpu_pad2d_backward(OcrTensor *dinp, const OcrTensor *dout, int top, int left) {
    pad_check(dout, dinp, top, left, "pad2d_backward");
    const int64_t Ho = dout->shape[1], Wo = dout->shape[2], C = dout->shape[3];
    const int64_t N = dinp->shape[0], H = dinp->shape[1], W = dinp->shape[2];
    const size_t es = ocr_dtype_size(dinp->dtype);
#pragma omp parallel for schedule(static) if (N * H * W * C >= 32768)
    for (int64_t r = 0; r < N * H; r++) {
        const int64_t n = r / H, h = r % H;
        memcpy((char *)dinp->data + (size_t)(r * W * C) * es,
               (const char *)dout->data + (size_t)(((n * Ho + h + top) * Wo + left) * C) * es, (size_t)(W * C) * es);
    }
}

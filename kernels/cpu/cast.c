// Casts between float dtypes and the fused unscale + finite check of AMP (CPU).
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/ops.h"

// Elements per parallel chunk of the conversions; bounded stack buffer for f16 <-> bf16.
#define CAST_CHUNK 2048

// Converts n elements starting at element `first` of src into dst (dtypes may differ).
// f16 <-> bf16 goes through f32, which is exact for f16 -> f32, so only one rounding happens.
static void convert_range(OcrTensor *dst, const OcrTensor *src, int64_t first, int64_t n) {
    size_t dsz = ocr_dtype_size(dst->dtype), ssz = ocr_dtype_size(src->dtype);
    char *d = (char *)dst->data + (size_t)first * dsz;
    const char *s = (const char *)src->data + (size_t)first * ssz;
    if (dst->dtype == src->dtype) {
        memmove(d, s, (size_t)n * dsz);
    } else if (src->dtype == OCR_F32) {
        if (dst->dtype == OCR_F16)
            ocr_f32_to_f16_array((ocr_f16_t *)d, (const float *)s, (size_t)n);
        else
            ocr_f32_to_bf16_array((ocr_bf16_t *)d, (const float *)s, (size_t)n);
    } else if (dst->dtype == OCR_F32) {
        if (src->dtype == OCR_F16)
            ocr_f16_to_f32_array((float *)d, (const ocr_f16_t *)s, (size_t)n);
        else
            ocr_bf16_to_f32_array((float *)d, (const ocr_bf16_t *)s, (size_t)n);
    } else {
        float tmp[CAST_CHUNK];
        for (int64_t i = 0; i < n; i += CAST_CHUNK) {
            size_t m = (size_t)(n - i < CAST_CHUNK ? n - i : CAST_CHUNK);
            if (src->dtype == OCR_F16) {
                ocr_f16_to_f32_array(tmp, (const ocr_f16_t *)s + i, m);
                ocr_f32_to_bf16_array((ocr_bf16_t *)d + i, tmp, m);
            } else {
                ocr_bf16_to_f32_array(tmp, (const ocr_bf16_t *)s + i, m);
                ocr_f32_to_f16_array((ocr_f16_t *)d + i, tmp, m);
            }
        }
    }
}

// out = inp converted to out's dtype (nearest even), same element count.
void ocr_cpu_cast_forward(OcrTensor *out, const OcrTensor *inp) {
    CPU_ASSERT_FLOAT(out);
    CPU_ASSERT_FLOAT(inp);
    OCR_ASSERT(ocr_tensor_numel(out) == ocr_tensor_numel(inp), "cast: element counts differ");
    int64_t n = ocr_tensor_numel(inp);
    if (out->data == inp->data && out->dtype == inp->dtype) return;
    OCR_ASSERT(out->data != inp->data, "cast: out may not alias inp of another dtype");
    int64_t chunks = (n + CAST_CHUNK - 1) / CAST_CHUNK;
#pragma omp parallel for schedule(static) if (chunks > 8)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t lo = c * CAST_CHUNK;
        convert_range(out, inp, lo, n - lo < CAST_CHUNK ? n - lo : CAST_CHUNK);
    }
}

// The gradient of a cast is the cast back into the input's dtype.
void ocr_cpu_cast_backward(OcrTensor *dinp, const OcrTensor *dout) {
    if (!dinp) return;
    ocr_cpu_cast_forward(dinp, dout);
}

// In-place unscale of one tensor in its own dtype. The finite test looks at the stored result,
// so a value that only overflows when written back (inv_scale > 1 into f16) is caught too.
static void unscale_one(OcrTensor *g, float inv_scale, float *amax_out, int *nonfinite_out) {
    int64_t n = ocr_tensor_numel(g);
    float amax = 0.0f;
    int bad = 0;
    switch (g->dtype) {
        case OCR_F32: {
            float *x = g->data;
#pragma omp parallel for schedule(static) reduction(max : amax) reduction(| : bad) if (n > 32768)
            for (int64_t i = 0; i < n; i++) {
                float v = x[i] * inv_scale;
                x[i] = v;
                if (isfinite(v))
                    amax = fmaxf(amax, fabsf(v));
                else
                    bad |= 1;
            }
            break;
        }
        case OCR_F16: {
            ocr_f16_t *x = g->data;
#pragma omp parallel for schedule(static) reduction(max : amax) reduction(| : bad) if (n > 32768)
            for (int64_t i = 0; i < n; i++) {
                ocr_f16_t h = ocr_f32_to_f16(ocr_f16_to_f32(x[i]) * inv_scale);
                x[i] = h;
                if ((h & 0x7c00u) == 0x7c00u)
                    bad |= 1;
                else
                    amax = fmaxf(amax, fabsf(ocr_f16_to_f32(h)));
            }
            break;
        }
        case OCR_BF16: {
            ocr_bf16_t *x = g->data;
#pragma omp parallel for schedule(static) reduction(max : amax) reduction(| : bad) if (n > 32768)
            for (int64_t i = 0; i < n; i++) {
                ocr_bf16_t h = ocr_f32_to_bf16(ocr_bf16_to_f32(x[i]) * inv_scale);
                x[i] = h;
                if ((h & 0x7f80u) == 0x7f80u)
                    bad |= 1;
                else
                    amax = fmaxf(amax, fabsf(ocr_bf16_to_f32(h)));
            }
            break;
        }
        default: OCR_ASSERT(0, "unscale_and_check: %s is not a float dtype", ocr_dtype_name(g->dtype));
    }
    *amax_out = amax;
    *nonfinite_out = bad;
}

int ocr_cpu_unscale_and_check(OcrTensor *const *grads, int count, float inv_scale, float *amax, int *nonfinite) {
    int any = 0;
    for (int i = 0; i < count; i++) {
        float a = 0.0f;
        int bad = 0;
        if (grads[i]) {
            OCR_ASSERT(grads[i]->device.type == OCR_DEVICE_CPU, "unscale_and_check: grads[%d] is not a CPU tensor", i);
            unscale_one(grads[i], inv_scale, &a, &bad);
        }
        if (amax) amax[i] = a;
        if (nonfinite) nonfinite[i] = bad;
        any |= bad;
    }
    return any;
}

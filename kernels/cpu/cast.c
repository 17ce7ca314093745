// Casts between float dtypes and the fused unscale + finite check of AMP (CPU).
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/half.h"
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

// The finite check and |max| of a gradient read as bits: the magnitude field (sign cleared) of a
// finite value is below the exponent mask, and for non-negative floats the bit patterns order
// as the values do, so max |v| over the finite values is the max of those integers. Integer-only
// loops vectorise (an fmaxf with IEEE NaN rules became a libm call per element, and a branch on
// isfinite kept the loop scalar). The loops run over chunks out of line: inlined into the
// OpenMP region, GCC leaves them scalar.
#define UNSCALE_PAR 32768
#define UNSCALE_CHUNK 16384

// f32: v = x·inv_scale stored back; *mx_io accumulates the largest finite magnitude's bits,
// *top_io the largest magnitude's (not finite when it reaches the exponent mask).
__attribute__((noinline)) static void unscale_f32_range(float *restrict x, int64_t n, float inv_scale, uint32_t *mx_io,
                                                        uint32_t *top_io) {
    uint32_t mx = *mx_io, top = *top_io;
    for (int64_t i = 0; i < n; i++) {
        float v = x[i] * inv_scale;
        x[i] = v;
        uint32_t a = ocr_f32_bits(v) & 0x7fffffffu;
        uint32_t m = a & (0u - (uint32_t)(a < 0x7f800000u));  // a where finite, else 0
        mx = m > mx ? m : mx;
        top = a > top ? a : top;
    }
    *mx_io = mx;
    *top_io = top;
}

static void unscale_f32(float *x, int64_t n, float inv_scale, float *amax_out, int *nonfinite_out) {
    uint32_t mx = 0, top = 0;
    int64_t chunks = (n + UNSCALE_CHUNK - 1) / UNSCALE_CHUNK;
#pragma omp parallel for schedule(static) reduction(max : mx, top) if (n > UNSCALE_PAR)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t lo = c * UNSCALE_CHUNK;
        unscale_f32_range(x + lo, n - lo < UNSCALE_CHUNK ? n - lo : UNSCALE_CHUNK, inv_scale, &mx, &top);
    }
    *amax_out = ocr_bits_f32(mx);
    *nonfinite_out = top >= 0x7f800000u;
}

// f16 / bf16 at inv_scale 1 (the AMP engine checks low-precision gradients unscaled and lets
// Adam apply the scale): x·1 rounded back is x for every finite value and infinity, so only a NaN
// would change (it is quieted). A read-only scan of the magnitude bits; exp is the dtype's
// exponent mask.
__attribute__((noinline)) static void half_scan_range(const uint16_t *restrict x, int64_t n, uint32_t exp,
                                                      uint32_t *mx_io, uint32_t *top_io) {
    uint32_t mx = *mx_io, top = *top_io;
    for (int64_t i = 0; i < n; i++) {
        uint32_t a = x[i] & 0x7fffu;
        uint32_t m = a & (0u - (uint32_t)(a < exp));
        mx = m > mx ? m : mx;
        top = a > top ? a : top;
    }
    *mx_io = mx;
    *top_io = top;
}

// Returns the largest finite magnitude's bits; *bad_out: whether any value was not finite.
static uint16_t half_scan(const uint16_t *x, int64_t n, uint32_t exp, int *bad_out) {
    uint32_t mx = 0, top = 0;
    int64_t chunks = (n + UNSCALE_CHUNK - 1) / UNSCALE_CHUNK;
#pragma omp parallel for schedule(static) reduction(max : mx, top) if (n > UNSCALE_PAR)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t lo = c * UNSCALE_CHUNK;
        half_scan_range(x + lo, n - lo < UNSCALE_CHUNK ? n - lo : UNSCALE_CHUNK, exp, &mx, &top);
    }
    *bad_out = top >= exp;
    return (uint16_t)mx;
}

// In-place unscale of one tensor in its own dtype. The finite test looks at the stored result,
// so a value that only overflows when written back (inv_scale > 1 into f16) is caught too.
static void unscale_one(OcrTensor *g, float inv_scale, float *amax_out, int *nonfinite_out) {
    int64_t n = ocr_tensor_numel(g);
    float amax = 0.0f;
    int bad = 0;
    if (inv_scale == 1.0f && (g->dtype == OCR_F16 || g->dtype == OCR_BF16)) {
        const int f16 = g->dtype == OCR_F16;
        const uint16_t mx = half_scan(g->data, n, f16 ? 0x7c00u : 0x7f80u, &bad);
        if (!bad) {
            *amax_out = f16 ? ocr_f16_to_f32(mx) : ocr_bf16_to_f32(mx);
            *nonfinite_out = 0;
            return;
        }
        // A non-finite value: the dtype's loop below writes the quieted NaNs and finds the same.
        bad = 0;
    }
    switch (g->dtype) {
        case OCR_F32: unscale_f32(g->data, n, inv_scale, amax_out, nonfinite_out); return;
        case OCR_F16: {
            ocr_f16_t *x = g->data;
#pragma omp parallel for schedule(static) reduction(max : amax) reduction(| : bad) if (n > UNSCALE_PAR)
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
#pragma omp parallel for schedule(static) reduction(max : amax) reduction(| : bad) if (n > UNSCALE_PAR)
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

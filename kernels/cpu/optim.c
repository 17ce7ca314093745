// Adam / AdamW and the global gradient norm (CPU).
#include <math.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/rng.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/ops.h"

// Elements per parallel chunk; a multiple of 4 so each chunk starts on a Philox block.
#define OPTIM_CHUNK 4096
// Chunks of the norm's sum of squares: a fixed partition (not one per thread) makes the sum
// independent of the thread count, not just deterministic for one.
#define NORM_CHUNK 8192

// ---- stochastic rounding -----------------------------------------------------------------
// Adds r's low bits to the bits that truncation drops, then truncates: the result rounds away
// from zero with probability (dropped part) / ulp, so E[result] = x. Non-finite values and
// values past the largest finite output round to nearest instead.
static ocr_bf16_t sr_to_bf16(float x, uint32_t r) {
    uint32_t u = ocr_f32_bits(x);
    if ((u & 0x7f800000u) == 0x7f800000u) return ocr_f32_to_bf16(x);
    uint32_t sign = u & 0x80000000u;
    uint32_t mag = (u & 0x7fffffffu) + (r & 0xffffu);
    if (mag >= 0x7f800000u) return ocr_f32_to_bf16(x);
    return (ocr_bf16_t)((sign | mag) >> 16);
}

static ocr_f16_t sr_to_f16(float x, uint32_t r) {
    uint32_t u = ocr_f32_bits(x);
    uint32_t abs = u & 0x7fffffffu;
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    if (abs >= 0x477fe000u) return ocr_f32_to_f16(x);  // >= 65504 (f16 max), inf or NaN
    uint32_t exp = abs >> 23;
    if (exp >= 113) {
        // f16 normal range: 13 mantissa bits drop; a carry moves into the exponent correctly.
        uint32_t t = (abs + (r & 0x1fffu)) & ~0x1fffu;
        return (ocr_f16_t)(sign | ocr_f32_to_f16(ocr_bits_f32(t)));
    }
    // f16 subnormal range: result in units of 2^-24 is mant24 · 2^-(126 − exp).
    uint32_t shift = 126u - exp;
    if (exp == 0 || shift > 32) return (ocr_f16_t)sign;  // |x| < 2^-33: rounds up with p < 2^-9; taken as 0
    uint64_t mant = (uint64_t)((abs & 0x7fffffu) | 0x800000u);
    uint64_t mask = (shift == 32) ? 0xffffffffull : ((1ull << shift) - 1);
    uint64_t res = (mant + ((uint64_t)r & mask)) >> shift;  // res <= 0x400: the smallest normal
    return (ocr_f16_t)(sign | (uint16_t)res);
}

// Writes w (n values, element indices first..first+n) into param's dtype at the same indices.
static void store_param(OcrTensor *param, const float *w, int64_t first, int64_t n, const AdamParams *p) {
    switch (param->dtype) {
        case OCR_F32: memcpy((float *)param->data + first, w, (size_t)n * sizeof(float)); return;
        case OCR_F16:
        case OCR_BF16: break;
        default: OCR_ASSERT(0, "adam_update: param must be a float tensor");
    }
    if (p->stochastic_round_seed == 0) {
        if (param->dtype == OCR_F16)
            ocr_f32_to_f16_array((ocr_f16_t *)param->data + first, w, (size_t)n);
        else
            ocr_f32_to_bf16_array((ocr_bf16_t *)param->data + first, w, (size_t)n);
        return;
    }
    uint16_t *dst = (uint16_t *)param->data + first;
    uint32_t blk[4];
    uint64_t cached = UINT64_MAX;
    uint32_t key[2] = {(uint32_t)p->stochastic_round_seed, (uint32_t)(p->stochastic_round_seed >> 32)};
    for (int64_t i = 0; i < n; i++) {
        uint64_t idx = (uint64_t)(first + i);
        if ((idx >> 2) != cached) {
            cached = idx >> 2;
            uint32_t ctr[4] = {(uint32_t)cached, (uint32_t)(cached >> 32), (uint32_t)p->stochastic_round_stream,
                               (uint32_t)(p->stochastic_round_stream >> 32)};
            ocr_philox4x32_10(ctr, key, blk);  // = ocr_rng_u32(seed, stream, idx), four at a time
        }
        uint32_t r = blk[idx & 3];
        dst[i] = param->dtype == OCR_F16 ? sr_to_f16(w[i], r) : sr_to_bf16(w[i], r);
    }
}

// ---- Adam / AdamW --------------------------------------------------------------------------
typedef struct {
    float decay, l2, b1, b2, omb1, omb2, gs, eps, step_size, inv_sqrt_bc2;
} AdamConsts;

// The update of n elements, the same operations in the same order for each element. Under the
// default math-errno GCC compiles sqrtf as the square root instruction plus a branch to the libm
// call (for errno on a negative argument), and that branch keeps the loop scalar; the SSE2 form
// below does four elements at a time with the same correctly rounded square root, products,
// sums and quotient, so the bits are those of the scalar loop (which finishes the tail).
static void adam_range(float *w, float *mm, float *vv, const float *g, int64_t n, const AdamConsts *k) {
    const float decay = k->decay, l2 = k->l2, b1 = k->b1, b2 = k->b2, omb1 = k->omb1, omb2 = k->omb2, gs = k->gs,
                eps = k->eps, step_size = k->step_size, inv_sqrt_bc2 = k->inv_sqrt_bc2;
    int64_t i = 0;
#if defined(__SSE2__)
    const __m128 vdecay = _mm_set1_ps(decay), vl2 = _mm_set1_ps(l2), vb1 = _mm_set1_ps(b1), vb2 = _mm_set1_ps(b2),
                 vomb1 = _mm_set1_ps(omb1), vomb2 = _mm_set1_ps(omb2), vgs = _mm_set1_ps(gs), veps = _mm_set1_ps(eps),
                 vstep = _mm_set1_ps(step_size), vbc2 = _mm_set1_ps(inv_sqrt_bc2);
    for (; i + 4 <= n; i += 4) {
        __m128 wi = _mm_loadu_ps(w + i);
        __m128 gi = _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(g + i), vgs), _mm_mul_ps(vl2, wi));
        wi = _mm_mul_ps(wi, vdecay);
        __m128 mi = _mm_add_ps(_mm_mul_ps(vb1, _mm_loadu_ps(mm + i)), _mm_mul_ps(vomb1, gi));
        __m128 vi = _mm_add_ps(_mm_mul_ps(vb2, _mm_loadu_ps(vv + i)), _mm_mul_ps(_mm_mul_ps(vomb2, gi), gi));
        _mm_storeu_ps(mm + i, mi);
        _mm_storeu_ps(vv + i, vi);
        __m128 den = _mm_add_ps(_mm_mul_ps(_mm_sqrt_ps(vi), vbc2), veps);
        _mm_storeu_ps(w + i, _mm_sub_ps(wi, _mm_div_ps(_mm_mul_ps(vstep, mi), den)));
    }
#endif
    for (; i < n; i++) {
        float wi = w[i];
        float gi = g[i] * gs + l2 * wi;
        wi *= decay;
        float mi = b1 * mm[i] + omb1 * gi;
        float vi = b2 * vv[i] + omb2 * gi * gi;
        mm[i] = mi;
        vv[i] = vi;
        w[i] = wi - step_size * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
    }
}

void ocr_cpu_adam_update(OcrTensor *param, OcrTensor *master, OcrTensor *m, OcrTensor *v, const OcrTensor *grad,
                 AdamParams p) {
    CPU_ASSERT_FLOAT(param);
    CPU_ASSERT_FLOAT(grad);
    OCR_ASSERT(m->dtype == OCR_F32 && v->dtype == OCR_F32, "adam_update: moments must be f32");
    OCR_ASSERT(m->device.type == OCR_DEVICE_CPU && v->device.type == OCR_DEVICE_CPU, "adam_update: CPU tensors");
    int64_t n = ocr_tensor_numel(param);
    OCR_ASSERT(ocr_tensor_numel(m) == n && ocr_tensor_numel(v) == n && ocr_tensor_numel(grad) == n,
               "adam_update: element counts differ");
    OCR_ASSERT(p.step >= 1, "adam_update: step is 1-based, got %lld", (long long)p.step);
    float *w;
    if (master) {
        OCR_ASSERT(master->dtype == OCR_F32 && master->device.type == OCR_DEVICE_CPU && ocr_tensor_numel(master) == n,
                   "adam_update: master must be an f32 CPU tensor like param");
        w = master->data;
    } else {
        OCR_ASSERT(param->dtype == OCR_F32, "adam_update: a %s param needs f32 master weights",
                   ocr_dtype_name(param->dtype));
        w = param->data;
    }
    CpuScratch s = {0};
    const float *g = ocr_cpu_f32_in(&s, grad);
    float *mm = m->data, *vv = v->data;

    // Bias corrections in double: 1 − β^t loses most of its digits in f32 for β2 = 0.999 and
    // small t. The update is w −= step_size · m / (√v · inv_sqrt_bc2 + ε) = lr · m̂ / (√v̂ + ε).
    double bc1 = 1.0 - pow((double)p.beta1, (double)p.step);
    double bc2 = 1.0 - pow((double)p.beta2, (double)p.step);
    float step_size = (float)((double)p.lr / bc1);
    float inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2));
    const AdamConsts k = {
        .decay = p.decoupled ? 1.0f - p.lr * p.weight_decay : 1.0f,  // AdamW: w ·= 1 − lr·wd first
        .l2 = p.decoupled ? 0.0f : p.weight_decay,
        .b1 = p.beta1,
        .b2 = p.beta2,
        .omb1 = 1.0f - p.beta1,
        .omb2 = 1.0f - p.beta2,
        .gs = p.grad_scale,
        .eps = p.eps,
        .step_size = step_size,
        .inv_sqrt_bc2 = inv_sqrt_bc2,
    };
    int write_param = master != NULL;

    int64_t chunks = (n + OPTIM_CHUNK - 1) / OPTIM_CHUNK;
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t lo = c * OPTIM_CHUNK, hi = lo + OPTIM_CHUNK < n ? lo + OPTIM_CHUNK : n;
        adam_range(w + lo, mm + lo, vv + lo, g + lo, hi - lo, &k);
        if (write_param) store_param(param, w + lo, lo, hi - lo, &p);
    }
    ocr_cpu_scratch_free(&s);
}

// ---- global gradient norm -----------------------------------------------------------------
// Σ g² over every gradient, in double. A strictly sequential sum ran one dependent add per
// element (the add's latency, ~4 cycles, per element: the whole norm was latency-bound); instead
// each chunk keeps NORM_LANES partial sums, element i of the chunk going into lane i mod
// NORM_LANES in order, and folds the lanes in lane order at the chunk's end; the chunks' sums
// are then added in chunk order and the tensors' in list order. Every term is exact: a float
// (f16/bf16 widened exactly) has a 24-bit significand, so its square fits in double's 53 bits
// and stays inside double's exponent range (subnormal floats included). Each lane is therefore
// the same sequence of correctly rounded double adds of the same exact terms whatever the
// vector width that runs the lanes side by side (two per SSE2 register, four per AVX2, eight
// per AVX-512), and a fused multiply-add, were one contracted, would round the same exact
// x² + acc once; with chunks fixed (not one per thread) the norm has the same bits at every
// vector level and thread count.
#define NORM_LANES 16

// f16 → f32 as ocr_f16_to_f32 (bit for bit, NaN payloads and subnormals included) without its
// branches, so the loop below vectorises: the exponent is rebiased with one add; for inf/NaN a
// second add moves it to 255; an f16 subnormal m·2^-24 (or zero) is formed as the float
// 2^-14·(1 + m/1024) minus 2^-14, which is exact (Sterbenz: the operands are within a factor of
// two; the result is an f32 normal or zero). The bulk converters would do as well through a
// buffer, but the scalar ocr_f16_to_f32's subnormal loop keeps a loop over it scalar.
CPU_INLINE float f16_widen(uint16_t h) {
    const uint32_t em = (uint32_t)(h & 0x7fffu) << 13, exp = em & 0x0f800000u;
    const uint32_t u = em + ((127u - 15u) << 23);
    const float sub = ocr_bits_f32(u + (1u << 23)) - ocr_bits_f32(113u << 23);
    const uint32_t v = exp == 0x0f800000u ? u + ((128u - 16u) << 23) : exp == 0 ? ocr_f32_bits(sub) : u;
    return ocr_bits_f32(v | (uint32_t)(h & 0x8000u) << 16);
}

// Element i of x widened to double: f32, bf16 (shift, exact) or f16 (f16_widen); dt is a
// constant after inlining.
CPU_INLINE double norm_load(const void *x, int64_t i, ocr_dtype_t dt) {
    if (dt == OCR_F32) return (double)((const float *)x)[i];
    if (dt == OCR_BF16) return (double)ocr_bf16_to_f32(((const uint16_t *)x)[i]);
    return (double)f16_widen(((const uint16_t *)x)[i]);
}

// The sum of squares of one chunk x (n elements) in the lanes described above.
CPU_INLINE double chunk_sum_squares(const void *x, int64_t n, ocr_dtype_t dt) {
    double lane[NORM_LANES];
    for (int k = 0; k < NORM_LANES; k++) lane[k] = 0.0;
    const int64_t full = n / NORM_LANES * NORM_LANES;
    for (int64_t j = 0; j < full; j += NORM_LANES)
        for (int k = 0; k < NORM_LANES; k++) {
            const double v = norm_load(x, j + k, dt);
            lane[k] += v * v;
        }
    for (int64_t j = full; j < n; j++) {
        const double v = norm_load(x, j, dt);
        lane[j - full] += v * v;
    }
    double acc = 0.0;
    for (int k = 0; k < NORM_LANES; k++) acc += lane[k];
    return acc;
}
CPU_INLINE void sum_squares_f32_body(double *out, const float *x, int64_t n) {
    *out = chunk_sum_squares(x, n, OCR_F32);
}
CPU_VEC_CLONES(sum_squares_f32, (double *out, const float *x, int64_t n), (out, x, n))
CPU_INLINE void sum_squares_bf16_body(double *out, const uint16_t *x, int64_t n) {
    *out = chunk_sum_squares(x, n, OCR_BF16);
}
CPU_VEC_CLONES(sum_squares_bf16, (double *out, const uint16_t *x, int64_t n), (out, x, n))
CPU_INLINE void sum_squares_f16_body(double *out, const uint16_t *x, int64_t n) {
    *out = chunk_sum_squares(x, n, OCR_F16);
}
CPU_VEC_CLONES(sum_squares_f16, (double *out, const uint16_t *x, int64_t n), (out, x, n))

static double sum_squares(const OcrTensor *t) {
    OCR_ASSERT(t->device.type == OCR_DEVICE_CPU && ocr_dtype_is_float(t->dtype),
               "grad_global_norm: gradients must be CPU float tensors");
    int64_t n = ocr_tensor_numel(t);
    int64_t chunks = (n + NORM_CHUNK - 1) / NORM_CHUNK;
    if (chunks == 0) return 0.0;
    CpuScratch s = {0};
    double *partial = ocr_cpu_scratch_bytes(&s, (size_t)chunks * sizeof(double));
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t lo = c * NORM_CHUNK, hi = lo + NORM_CHUNK < n ? lo + NORM_CHUNK : n;
        switch (t->dtype) {
            case OCR_F32: sum_squares_f32(&partial[c], (const float *)t->data + lo, hi - lo); break;
            case OCR_BF16: sum_squares_bf16(&partial[c], (const uint16_t *)t->data + lo, hi - lo); break;
            default: sum_squares_f16(&partial[c], (const uint16_t *)t->data + lo, hi - lo); break;
        }
    }
    double total = 0.0;
    for (int64_t c = 0; c < chunks; c++) total += partial[c];  // fixed order
    ocr_cpu_scratch_free(&s);
    return total;
}

double ocr_cpu_grad_global_norm(OcrTensor *const *grads, int count) {
    double total = 0.0;
    for (int i = 0; i < count; i++)
        if (grads[i]) total += sum_squares(grads[i]);
    return sqrt(total);
}

// g ·= f in place, in g's dtype.
static void scale_in_place(OcrTensor *t, float f) {
    int64_t n = ocr_tensor_numel(t);
    switch (t->dtype) {
        case OCR_F32: {
            float *x = t->data;
#pragma omp parallel for schedule(static) if (n > 32768)
            for (int64_t i = 0; i < n; i++) x[i] *= f;
            break;
        }
        case OCR_F16: {
            ocr_f16_t *x = t->data;
#pragma omp parallel for schedule(static) if (n > 32768)
            for (int64_t i = 0; i < n; i++) x[i] = ocr_f32_to_f16(ocr_f16_to_f32(x[i]) * f);
            break;
        }
        default: {
            ocr_bf16_t *x = t->data;
#pragma omp parallel for schedule(static) if (n > 32768)
            for (int64_t i = 0; i < n; i++) x[i] = ocr_f32_to_bf16(ocr_bf16_to_f32(x[i]) * f);
            break;
        }
    }
}

double ocr_cpu_clip_grad_global_norm(OcrTensor *const *grads, int count, float max_norm) {
    double norm = ocr_cpu_grad_global_norm(grads, count);
    if (norm > (double)max_norm) {
        float f = (float)((double)max_norm / (norm + 1e-6));
        for (int i = 0; i < count; i++)
            if (grads[i]) scale_in_place(grads[i], f);
    }
    return norm;
}

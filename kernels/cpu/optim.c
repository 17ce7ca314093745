// Adam / AdamW and the global gradient norm (CPU).
#include <math.h>
#include <string.h>

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
    float decay = p.decoupled ? 1.0f - p.lr * p.weight_decay : 1.0f;  // AdamW: w ·= 1 − lr·wd first
    float l2 = p.decoupled ? 0.0f : p.weight_decay;
    float b1 = p.beta1, b2 = p.beta2, omb1 = 1.0f - p.beta1, omb2 = 1.0f - p.beta2;
    float gs = p.grad_scale, eps = p.eps;
    int write_param = master != NULL;

    int64_t chunks = (n + OPTIM_CHUNK - 1) / OPTIM_CHUNK;
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t lo = c * OPTIM_CHUNK, hi = lo + OPTIM_CHUNK < n ? lo + OPTIM_CHUNK : n;
        for (int64_t i = lo; i < hi; i++) {
            float wi = w[i];
            float gi = g[i] * gs + l2 * wi;
            wi *= decay;
            float mi = b1 * mm[i] + omb1 * gi;
            float vi = b2 * vv[i] + omb2 * gi * gi;
            mm[i] = mi;
            vv[i] = vi;
            w[i] = wi - step_size * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
        }
        if (write_param) store_param(param, w + lo, lo, hi - lo, &p);
    }
    ocr_cpu_scratch_free(&s);
}

// ---- global gradient norm -----------------------------------------------------------------
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
        double acc = 0.0;
        for (int64_t i = lo; i < hi; i++) {
            double x;
            switch (t->dtype) {
                case OCR_F32: x = ((const float *)t->data)[i]; break;
                case OCR_F16: x = ocr_f16_to_f32(((const ocr_f16_t *)t->data)[i]); break;
                default: x = ocr_bf16_to_f32(((const ocr_bf16_t *)t->data)[i]); break;
            }
            acc += x * x;
        }
        partial[c] = acc;
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

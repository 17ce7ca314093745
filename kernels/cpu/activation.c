// Pointwise activations and their derivatives.
//
// One loop per activation (the switch sits outside the loop), written so that GCC -O3
// vectorises every one of them without -ffast-math: clamps and selects that GCC will not
// if-convert (it keeps trapping float ops on one branch) are integer bit-mask blends, and
// swish/gelu use the branch-free exp and normal CDF below instead of libm's scalar
// expf/erff (2-2.5x faster on 4-wide SSE2, more with -march=native). The loops are compiled
// for SSE2, AVX2 and AVX-512 from one body and picked at run time (cpu_common.h); every level
// computes the same bits.
//
// Derivatives at the kinks follow Paddle's gradient kernels:
//   relu:        x > 0 → 1, else 0 (0 at x = 0).
//   hardswish:   x + 3 <= 0 → 0; x + 3 >= 6 → 1 (so x = −3 takes the left side, 0, and
//                x = 3 the right side, 1); else (2x + 3) / 6.
//   hardsigmoid: slope where 0 < x·slope + 0.5 < 1 strictly, 0 elsewhere (0 at both kinks).
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "core/half.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/rowwise.h"
#include "kernels/ops.h"

#define ACT_PAR_MIN 32768
// Paddle's hardsigmoid slope is the float literal 0.1666667, not 1/6.
#define HARDSIGMOID_SLOPE 0.1666667f
#define INV_SQRT_2PI 0.39894228040143267794f

static const char *const act_names[OCR_ACT_COUNT] = {"none", "relu", "hardswish", "hardsigmoid", "swish", "gelu"};

const char *ocr_activation_name(ocr_activation_t act) {
    return ((unsigned)act < OCR_ACT_COUNT) ? act_names[act] : "?";
}

int ocr_activation_from_name(const char *name, ocr_activation_t *out) {
    // Canonical names plus the spellings PaddleOCR configs and layer code use.
    static const struct { const char *name; ocr_activation_t act; } table[] = {
        {"none", OCR_ACT_NONE},           {"identity", OCR_ACT_NONE},       {"linear", OCR_ACT_NONE},
        {"relu", OCR_ACT_RELU},           {"hardswish", OCR_ACT_HARDSWISH}, {"hard_swish", OCR_ACT_HARDSWISH},
        {"hardsigmoid", OCR_ACT_HARDSIGMOID}, {"hard_sigmoid", OCR_ACT_HARDSIGMOID},
        {"swish", OCR_ACT_SWISH},         {"silu", OCR_ACT_SWISH},          {"gelu", OCR_ACT_GELU},
    };
    if (!name) return 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcasecmp(name, table[i].name) == 0) {
            if (out) *out = table[i].act;
            return 1;
        }
    return 0;
}

// ---- branch-free math (vectorisable) -------------------------------------------------

// take_a ? a : b, as a bit blend so that loops around it stay vectorisable.
CPU_INLINE float blend(int take_a, float a, float b) {
    uint32_t m = 0u - (uint32_t)take_a, ua, ub;
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    ua = (ua & m) | (ub & ~m);
    memcpy(&a, &ua, sizeof a);
    return a;
}

// e^x within ~1e-7 relative for x in [−87, 88] (the input is clamped there, so the result
// never overflows or goes subnormal). x = n·ln2 + r with |r| <= ln2/2; e^r by its Taylor
// series to r^7 (truncation < 6e-9); 2^n assembled in the exponent bits.
CPU_INLINE float vexpf(float x) {
    x = blend(x < -87.0f, -87.0f, x);
    x = blend(x > 88.0f, 88.0f, x);
    const float round_magic = 12582912.0f;  // 1.5·2^23: adding and subtracting it rounds to an integer
    const float n = (x * 1.44269504088896341f + round_magic) - round_magic;
    // ln2 = 0.693359375 − 2.12194440e-4; the first part has few bits, so n·it is exact.
    float r = x - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

// Φ(x) = 0.5·(1 + erf(x/√2)), the standard normal CDF. With a = |x|/√2:
//   a < 1:      erf(a) = a·P(a²); P interpolates erf(a)/a at Chebyshev nodes in a² on [0, 1]
//               (degree 6, relative error 1.3e-9 in exact arithmetic).
//   1 <= a < 5: erfc(a) = e^(−a²)·S(1/a)/a; S interpolates a·e^(a²)·erfc(a) at Chebyshev nodes
//               in t = 1/a on [0.2, 1] (degree 9, relative error 1e-8). Computing the
//               upper tail from erfc keeps Φ relatively accurate for negative x, where
//               1 + erf would cancel.
//   a >= 5:     Φ = 0 or 1 (the tail is below 8e-13).
// Measured against double: Φ within 1e-7 relative for x >= 0, 1.4e-6 for x > −4 and 5e-6
// down to x = −7, where the float rounding of a² dominates (≈ a²·2^-23; 0.5·(1 + erff) loses
// far more there to cancellation).
CPU_INLINE float normal_cdf(float x) {
    const float z = x * 0.70710678118654752440f;
    const float a = blend(z < 0.0f, -z, z);

    const float s = 2.0f * (a * a) - 1.0f;  // a² mapped onto [−1, 1]
    float p = 1.230605476e-06f;
    p = p * s - 1.766906802e-05f;
    p = p * s + 2.175135417e-04f;
    p = p * s - 2.285419545e-03f;
    p = p * s + 1.985249714e-02f;
    p = p * s - 1.405360973e-01f;
    p = p * s + 9.654687387e-01f;
    const float e = a * p;
    const float central = 0.5f + 0.5f * blend(x < 0.0f, -e, e);

    float ac = blend(a < 1.0f, 1.0f, a);
    ac = blend(ac > 5.0f, 5.0f, ac);
    const float t = 1.0f / ac;
    const float q = (t - 0.6f) * 2.5f;  // t mapped onto [−1, 1]
    float w = -1.333063645e-05f;
    w = w * q + 4.347827961e-05f;
    w = w * q - 5.856742665e-05f;
    w = w * q - 2.485431115e-05f;
    w = w * q + 5.204922138e-04f;
    w = w * q - 2.157115485e-03f;
    w = w * q + 5.133897619e-03f;
    w = w * q - 1.120592530e-03f;
    w = w * q - 6.855230135e-02f;
    w = w * q + 4.938124656e-01f;
    const float erfc_a = blend(a < 5.0f, vexpf(-(ac * ac)) * (w * t), 0.0f);
    const float tail = blend(x < 0.0f, 0.5f * erfc_a, 1.0f - 0.5f * erfc_a);
    return blend(a < 1.0f, central, tail);
}

// y (n) = act(x) on one thread; y may equal x.
CPU_INLINE void act_forward_serial_body(float *y, const float *x, int64_t n, ocr_activation_t act) {
    switch (act) {
        case OCR_ACT_NONE:
            if (y != x) memcpy(y, x, (size_t)n * sizeof(float));
            break;
        case OCR_ACT_RELU:
            for (int64_t i = 0; i < n; i++) {
                float v = x[i];
                y[i] = v < 0.0f ? 0.0f : v;  // NaN passes through
            }
            break;
        case OCR_ACT_HARDSWISH:
            for (int64_t i = 0; i < n; i++) {
                float v = x[i];
                float t = v + 3.0f;
                t = t < 0.0f ? 0.0f : t;
                t = t > 6.0f ? 6.0f : t;
                y[i] = v * t / 6.0f;
            }
            break;
        case OCR_ACT_HARDSIGMOID:
            for (int64_t i = 0; i < n; i++) {
                float t = x[i] * HARDSIGMOID_SLOPE + 0.5f;
                t = t < 0.0f ? 0.0f : t;
                y[i] = t > 1.0f ? 1.0f : t;
            }
            break;
        case OCR_ACT_SWISH:
            for (int64_t i = 0; i < n; i++) {
                float v = x[i];
                y[i] = v / (1.0f + vexpf(-v));
            }
            break;
        case OCR_ACT_GELU:
            for (int64_t i = 0; i < n; i++) {
                float v = x[i];
                y[i] = v * normal_cdf(v);
            }
            break;
        default: OCR_ASSERT(0, "unknown activation %d", (int)act);
    }
}

// dx (n) = dy · act'(x) on one thread; dx may equal dy.
CPU_INLINE void act_backward_serial_body(float *dx, const float *dy, const float *x, int64_t n, ocr_activation_t act) {
    switch (act) {
        case OCR_ACT_NONE:
            if (dx != dy) memcpy(dx, dy, (size_t)n * sizeof(float));
            break;
        case OCR_ACT_RELU:
            for (int64_t i = 0; i < n; i++) {
                float g = dy[i];  // loaded unconditionally so the select vectorises
                dx[i] = x[i] > 0.0f ? g : 0.0f;
            }
            break;
        case OCR_ACT_HARDSWISH:
            for (int64_t i = 0; i < n; i++) {
                // A select between the slope and a constant would not vectorise (GCC keeps
                // the division on one branch under -ftrapping-math), so the slope is masked
                // with integer bits instead; that also keeps x = ±inf from giving inf·0.
                float v = x[i], g = dy[i];
                float d = (2.0f * v + 3.0f) / 6.0f;
                uint32_t keep = ((v > -3.0f) & (v < 3.0f)) ? 0xffffffffu : 0u, bits;
                memcpy(&bits, &d, sizeof bits);
                bits &= keep;
                memcpy(&d, &bits, sizeof d);
                dx[i] = g * (d + (v >= 3.0f ? 1.0f : 0.0f));
            }
            break;
        case OCR_ACT_HARDSIGMOID:
            for (int64_t i = 0; i < n; i++) {
                float t = x[i] * HARDSIGMOID_SLOPE + 0.5f;
                float d = (t > 0.0f && t < 1.0f) ? HARDSIGMOID_SLOPE : 0.0f;
                dx[i] = dy[i] * d;
            }
            break;
        case OCR_ACT_SWISH:
            for (int64_t i = 0; i < n; i++) {
                float v = x[i];
                float sg = 1.0f / (1.0f + vexpf(-v));
                dx[i] = dy[i] * sg * (1.0f + v * (1.0f - sg));
            }
            break;
        case OCR_ACT_GELU:
            for (int64_t i = 0; i < n; i++) {
                float v = x[i];
                float cdf = normal_cdf(v);
                float pdf = INV_SQRT_2PI * vexpf(-0.5f * v * v);
                dx[i] = dy[i] * (cdf + v * pdf);
            }
            break;
        default: OCR_ASSERT(0, "unknown activation %d", (int)act);
    }
}

CPU_VEC_CLONES(act_forward_serial, (float *y, const float *x, int64_t n, ocr_activation_t act), (y, x, n, act))
CPU_VEC_CLONES(act_backward_serial, (float *dx, const float *dy, const float *x, int64_t n, ocr_activation_t act),
               (dx, dy, x, n, act))

void cpu_act_forward_tile(float *y, const float *x, int64_t n, ocr_activation_t act) {
    act_forward_serial(y, x, n, act);
}
void cpu_act_backward_tile(float *dx, const float *dy, const float *x, int64_t n, ocr_activation_t act) {
    act_backward_serial(dx, dy, x, n, act);
}

// Elements per parallel block of the whole-array forms; swish and gelu cost enough per element
// to go parallel four times earlier.
#define ACT_PAR_BLOCK 8192
static int act_parallel(int64_t n, ocr_activation_t act) {
    return n >= (act == OCR_ACT_SWISH || act == OCR_ACT_GELU ? ACT_PAR_MIN / 4 : ACT_PAR_MIN);
}

void cpu_act_forward_f32(float *y, const float *x, int64_t n, ocr_activation_t act) {
    const int64_t nblk = (n + ACT_PAR_BLOCK - 1) / ACT_PAR_BLOCK;
#pragma omp parallel for schedule(static) if (act_parallel(n, act))
    for (int64_t b = 0; b < nblk; b++) {
        const int64_t i0 = b * ACT_PAR_BLOCK, m = n - i0 < ACT_PAR_BLOCK ? n - i0 : ACT_PAR_BLOCK;
        act_forward_serial(y + i0, x + i0, m, act);
    }
}

void cpu_act_backward_f32(float *dx, const float *dy, const float *x, int64_t n, ocr_activation_t act) {
    const int64_t nblk = (n + ACT_PAR_BLOCK - 1) / ACT_PAR_BLOCK;
#pragma omp parallel for schedule(static) if (act_parallel(n, act))
    for (int64_t b = 0; b < nblk; b++) {
        const int64_t i0 = b * ACT_PAR_BLOCK, m = n - i0 < ACT_PAR_BLOCK ? n - i0 : ACT_PAR_BLOCK;
        act_backward_serial(dx + i0, dy + i0, x + i0, m, act);
    }
}

// f16/bf16 tensors go through in blocks: each block is widened into a buffer on the stack,
// computed in fp32 and rounded back while it is in cache, instead of three passes over the
// whole tensor (widen, compute, round). Per element the same operations as the f32 loops, so
// the results are bit-identical to the whole-tensor conversion, which Global.cpu_exact_numerics
// keeps as the reference.
#define ACT_BLOCK 2048

static void block_in(float *dst, const OcrTensor *t, int64_t i0, int64_t m) {
    if (t->dtype == OCR_F32)
        memcpy(dst, (const float *)t->data + i0, (size_t)m * sizeof(float));
    else if (t->dtype == OCR_BF16)
        ocr_bf16_to_f32_array(dst, (const ocr_bf16_t *)t->data + i0, (size_t)m);
    else
        ocr_f16_to_f32_array(dst, (const ocr_f16_t *)t->data + i0, (size_t)m);
}

static void block_out(OcrTensor *t, int64_t i0, const float *src, int64_t m) {
    if (t->dtype == OCR_F32)
        memcpy((float *)t->data + i0, src, (size_t)m * sizeof(float));
    else if (t->dtype == OCR_BF16)
        ocr_f32_to_bf16_array((ocr_bf16_t *)t->data + i0, src, (size_t)m);
    else
        ocr_f32_to_f16_array((ocr_f16_t *)t->data + i0, src, (size_t)m);
}

void activation_forward_cpu(OcrTensor *out, const OcrTensor *inp, ocr_activation_t act) {
    CPU_ASSERT_FLOAT(out);
    CPU_ASSERT_FLOAT(inp);
    OCR_ASSERT(ocr_tensor_numel(out) == ocr_tensor_numel(inp), "activation: out and inp sizes differ");
    OCR_ASSERT((unsigned)act < OCR_ACT_COUNT, "unknown activation %d", (int)act);
    const int64_t n = ocr_tensor_numel(inp);
    if ((inp->dtype != OCR_F32 || out->dtype != OCR_F32) && !ocr_cpu_exact_numerics()) {
        // out may be inp (in-place activations): each block is read before it is written.
#pragma omp parallel for schedule(static) if (n >= ACT_PAR_MIN / 4)
        for (int64_t i0 = 0; i0 < n; i0 += ACT_BLOCK) {
            float buf[ACT_BLOCK];
            int64_t m = n - i0 < ACT_BLOCK ? n - i0 : ACT_BLOCK;
            block_in(buf, inp, i0, m);
            act_forward_serial(buf, buf, m, act);
            block_out(out, i0, buf, m);
        }
        return;
    }
    CpuScratch s = {0};
    const float *x = cpu_f32_in(&s, inp);
    float *y = cpu_f32_out(&s, out, 0);
    cpu_act_forward_f32(y, x, n, act);
    cpu_f32_store(out, y);
    cpu_scratch_free(&s);
}

void activation_backward_cpu(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *inp, ocr_activation_t act) {
    CPU_ASSERT_FLOAT(dinp);
    CPU_ASSERT_FLOAT(dout);
    CPU_ASSERT_FLOAT(inp);
    const int64_t n = ocr_tensor_numel(inp);
    OCR_ASSERT(ocr_tensor_numel(dinp) == n && ocr_tensor_numel(dout) == n, "activation: gradient sizes differ");
    OCR_ASSERT((unsigned)act < OCR_ACT_COUNT, "unknown activation %d", (int)act);
    if ((inp->dtype != OCR_F32 || dout->dtype != OCR_F32 || dinp->dtype != OCR_F32) && !ocr_cpu_exact_numerics()) {
        // dinp may be dout (in-place gradients): each block is read before it is written.
#pragma omp parallel for schedule(static) if (n >= ACT_PAR_MIN / 4)
        for (int64_t i0 = 0; i0 < n; i0 += ACT_BLOCK) {
            float bx[ACT_BLOCK], bg[ACT_BLOCK];
            int64_t m = n - i0 < ACT_BLOCK ? n - i0 : ACT_BLOCK;
            block_in(bx, inp, i0, m);
            block_in(bg, dout, i0, m);
            act_backward_serial(bg, bg, bx, m, act);
            block_out(dinp, i0, bg, m);
        }
        return;
    }
    CpuScratch s = {0};
    const float *x = cpu_f32_in(&s, inp);
    const float *dy = cpu_f32_in(&s, dout);
    float *dx = cpu_f32_out(&s, dinp, 0);
    cpu_act_backward_f32(dx, dy, x, n, act);
    cpu_f32_store(dinp, dx);
    cpu_scratch_free(&s);
}

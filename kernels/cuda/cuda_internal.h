// Shared by the .cu files of the CUDA backend only (it uses CUDA types; C code includes the
// op launchers of cuda_ops.h and cuda_backend.h instead).
//
// - OCR_CUDA_CHECK(stmt): one check for CUDA runtime, cuBLAS and cuDNN calls; on failure it
//   aborts naming the statement, file, line and device (ops do not return a status).
// - OCR_CUDA_LAUNCHED(): after every kernel launch: checks the launch and, in debug-sync mode
//   (OCR_CUDA_SYNC_DEBUG=1), synchronises so the failing kernel is the one named.
// - Element access for any float dtype (ld/st) with conversions bit-identical to core/half.h,
//   and Philox4x32-10 identical to core/rng.h; both are __host__ __device__ so the host
//   self-test can compare them with core.
// - CudaCtx: the device and stream an op runs on (ocr_cuda_enter), and a grow-only per-device
//   scratch buffer (ocr_cuda_scratch) charged to the WORKSPACE category.
#ifndef OCR_KERNELS_CUDA_INTERNAL_H
#define OCR_KERNELS_CUDA_INTERNAL_H

#ifndef __CUDACC__
#error "kernels/cuda/cuda_internal.h is for the .cu files of the CUDA backend"
#endif

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>
#ifdef OCR_HAVE_CUDNN
#include <cudnn.h>
#endif

extern "C" {
#include "core/error.h"
#include "core/memory.h"
#include "core/tensor.h"
#include "kernels/ops.h"
}
#include "kernels/cuda/cuda_backend.h"

// ---- error checks ------------------------------------------------------------------------
const char *ocr_cuda_status_string(cudaError_t e);
const char *ocr_cuda_status_string(cublasStatus_t e);
#ifdef OCR_HAVE_CUDNN
const char *ocr_cuda_status_string(cudnnStatus_t e);
#endif
static inline bool ocr_cuda_failed(cudaError_t e) { return e != cudaSuccess; }
static inline bool ocr_cuda_failed(cublasStatus_t e) { return e != CUBLAS_STATUS_SUCCESS; }
#ifdef OCR_HAVE_CUDNN
static inline bool ocr_cuda_failed(cudnnStatus_t e) { return e != CUDNN_STATUS_SUCCESS; }
#endif
[[noreturn]] void ocr_cuda_fail_(const char *stmt, const char *what, const char *file, int line);

#define OCR_CUDA_CHECK(stmt)                                                          \
    do {                                                                              \
        auto ocr_cuda_st_ = (stmt);                                                   \
        if (ocr_cuda_failed(ocr_cuda_st_))                                            \
            ocr_cuda_fail_(#stmt, ocr_cuda_status_string(ocr_cuda_st_), __FILE__, __LINE__); \
    } while (0)

void ocr_cuda_after_launch_(const char *file, int line);
#define OCR_CUDA_LAUNCHED() ocr_cuda_after_launch_(__FILE__, __LINE__)

// ---- the op context ------------------------------------------------------------------------
struct CudaCtx {
    int device;
    cudaStream_t stream;
};
// Makes t's device current and returns it with its stream (asserts t is a CUDA tensor).
CudaCtx ocr_cuda_enter(const OcrTensor *t);
// Grow-only scratch of the context's device, one buffer per slot, valid until the next
// ocr_cuda_scratch call for the same slot: an op asks once, for everything it needs, and carves.
// Slot 0 belongs to the op itself, slot 1 to the shared helpers an op may call while it
// holds slot 0 (ocr_cuda_bias_grad). Growing frees the old buffer, which synchronises the
// device, so an in-flight kernel never loses its scratch.
#define CUDA_SCRATCH_SLOTS 2
void *ocr_cuda_scratch(const CudaCtx &ctx, size_t bytes, int slot = 0);
// Library handles of the context's device, bound to its stream.
cublasHandle_t ocr_cuda_cublas(const CudaCtx &ctx);
#ifdef OCR_HAVE_CUDNN
cudnnHandle_t ocr_cuda_cudnn(const CudaCtx &ctx);
#endif
// Opt-in shared memory limit per block of the context's device.
int ocr_cuda_max_smem_optin(const CudaCtx &ctx);

// Asserts a tensor is a CUDA float tensor.
#define CUDA_ASSERT_FLOAT(t)                                                                       \
    OCR_ASSERT((t)->device.type == OCR_DEVICE_CUDA && ocr_dtype_is_float((t)->dtype), "%s must be a CUDA float tensor", \
               #t)

// Grid for n independent items with `threads` per block and a grid-stride loop.
static inline unsigned cuda_blocks(int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    if (b > (1 << 20)) b = 1 << 20;
    return (unsigned)b;
}
// An optional tensor's data and dtype for a kernel's argument struct: NULL and f32 when absent.
static inline void *opt_data(const OcrTensor *t) { return t ? t->data : NULL; }
static inline int opt_dtype(const OcrTensor *t) { return t ? (int)t->dtype : (int)OCR_F32; }
// Round a byte count up to 256 (the carving alignment of scratch).
static inline size_t cuda_align(size_t bytes) { return (bytes + 255) & ~(size_t)255; }

// ---- bit-exact numerics shared with core ---------------------------------------------------
#define OCR_HD __host__ __device__ __forceinline__

OCR_HD uint32_t f32_bits(float f) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
#endif
}
OCR_HD float bits_f32(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}

// The conversions of core/half.h, statement for statement (NaN payloads included).
OCR_HD float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

OCR_HD uint16_t f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)((u + rounding_bias) >> 16);
}

OCR_HD float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {
            int shift = 0;
            while (!(mant & 0x400u)) {
                mant <<= 1;
                shift++;
            }
            mant &= 0x3ffu;
            bits = sign | ((uint32_t)(127 - 15 - shift + 1) << 23) | (mant << 13);
        }
    } else {
        bits = sign | ((exp + (127 - 15)) << 23) | (mant << 13);
    }
    return bits_f32(bits);
}

OCR_HD uint16_t f32_to_f16(float f) {
    uint32_t u = f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) {
        uint32_t payload = (abs >> 13) & 0x3ffu;
        return (uint16_t)(sign | 0x7c00u | 0x200u | payload);
    }
    if (abs >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (abs < 0x38800000u) {
        if (abs < 0x33000000u) return (uint16_t)sign;
        uint32_t exp = abs >> 23;
        uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - exp;
        uint32_t result = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (result & 1u))) result++;
        return (uint16_t)(sign | result);
    }
    uint32_t h = ((abs - 0x38000000u) >> 13);
    uint32_t rem = abs & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

// Element i of a float buffer of dtype dt, as fp32 (exact).
OCR_HD float ld(const void *p, int dt, int64_t i) {
    if (dt == OCR_F32) return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return dt == OCR_F16 ? f16_to_f32(h) : bf16_to_f32(h);
}
// Stores v into element i, rounding to nearest even for f16/bf16.
OCR_HD void st(void *p, int dt, int64_t i, float v) {
    if (dt == OCR_F32)
        ((float *)p)[i] = v;
    else if (dt == OCR_F16)
        ((uint16_t *)p)[i] = f32_to_f16(v);
    else
        ((uint16_t *)p)[i] = f32_to_bf16(v);
}
// Copies element si of src (dtype sdt) to element di of dst (dtype ddt): raw bits when the
// dtypes agree (NaN payloads untouched), otherwise through fp32 (one rounding).
OCR_HD void copy_elem(void *dst, int ddt, int64_t di, const void *src, int sdt, int64_t si) {
    if (ddt == sdt) {
        if (ddt == OCR_F32)
            ((uint32_t *)dst)[di] = ((const uint32_t *)src)[si];
        else
            ((uint16_t *)dst)[di] = ((const uint16_t *)src)[si];
    } else {
        st(dst, ddt, di, ld(src, sdt, si));
    }
}

// Philox4x32-10 exactly as core/rng.c: key = seed, counter = (block lo, block hi, stream lo,
// stream hi); the index-th number is lane index % 4 of block index / 4.
OCR_HD void philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1,
                          uint32_t out[4]) {
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0;
        uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        uint32_t n3 = (uint32_t)p0;
        c0 = n0;
        c1 = n1;
        c2 = n2;
        c3 = n3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}
// The four numbers of block `block` of (seed, stream).
OCR_HD void philox_block(uint64_t seed, uint64_t stream, uint64_t block, uint32_t out[4]) {
    philox4x32_10((uint32_t)block, (uint32_t)(block >> 32), (uint32_t)stream, (uint32_t)(stream >> 32),
                  (uint32_t)seed, (uint32_t)(seed >> 32), out);
}
OCR_HD uint32_t philox_u32(uint64_t seed, uint64_t stream, uint64_t index) {
    uint32_t out[4];
    philox_block(seed, stream, index >> 2, out);
    return out[index & 3];
}
// core/rng.h's uniform: (u32 >> 8)·2^-24, in [0, 1).
OCR_HD float u32_to_uniform(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }

// Stochastic rounding of kernels/cpu/optim.c, statement for statement: r's low bits are
// added to the bits truncation drops, then the result is truncated; non-finite values and
// values past the largest finite output round to nearest instead.
OCR_HD uint16_t sr_to_bf16(float x, uint32_t r) {
    uint32_t u = f32_bits(x);
    if ((u & 0x7f800000u) == 0x7f800000u) return f32_to_bf16(x);
    uint32_t sign = u & 0x80000000u;
    uint32_t mag = (u & 0x7fffffffu) + (r & 0xffffu);
    if (mag >= 0x7f800000u) return f32_to_bf16(x);
    return (uint16_t)((sign | mag) >> 16);
}
OCR_HD uint16_t sr_to_f16(float x, uint32_t r) {
    uint32_t u = f32_bits(x);
    uint32_t abs = u & 0x7fffffffu;
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    if (abs >= 0x477fe000u) return f32_to_f16(x);
    uint32_t exp = abs >> 23;
    if (exp >= 113) {
        uint32_t t = (abs + (r & 0x1fffu)) & ~0x1fffu;
        return (uint16_t)(sign | f32_to_f16(bits_f32(t)));
    }
    uint32_t shift = 126u - exp;
    if (exp == 0 || shift > 32) return sign;
    uint64_t mant = (uint64_t)((abs & 0x7fffffu) | 0x800000u);
    uint64_t mask = (shift == 32) ? 0xffffffffull : ((1ull << shift) - 1);
    uint64_t res = (mant + ((uint64_t)r & mask)) >> shift;
    return (uint16_t)(sign | (uint16_t)res);
}

// ---- warp and block reductions ---------------------------------------------------------------
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}


// ---- Adam/AdamW element math (optim.cu, train_step.cu) ------------------------------------------------
// kernels/cpu/optim.c's update, operation for operation, with round-to-nearest intrinsics the
// compiler may not contract into FMAs.
struct AdamConsts {
    float step_size, inv_sqrt_bc2, decay, l2;
    float b1, b2, omb1, omb2, gs, eps;
    uint64_t sr_seed, sr_stream;
};

// One thread per group of four elements (one Philox block of draws).
// Elements 4·grp .. 4·grp+3 of one tensor; stochastic rounding draws Philox block grp.
__device__ __forceinline__ void adam_group(void *param, int pdt, float *w, float *m, float *v, const void *g, int gdt,
                                           int64_t n, int write_param, const AdamConsts &k, int64_t grp) {
    uint32_t r[4] = {0, 0, 0, 0};
    const int sr = write_param && pdt != OCR_F32 && k.sr_seed != 0;
    if (sr) philox_block(k.sr_seed, k.sr_stream, (uint64_t)grp, r);
#pragma unroll
    for (int l = 0; l < 4; l++) {
        const int64_t i = 4 * grp + l;
        if (i >= n) break;
        float wi = w[i];
        const float gi = __fadd_rn(__fmul_rn(ld(g, gdt, i), k.gs), __fmul_rn(k.l2, wi));
        wi = __fmul_rn(wi, k.decay);
        const float mi = __fadd_rn(__fmul_rn(k.b1, m[i]), __fmul_rn(k.omb1, gi));
        const float vi = __fadd_rn(__fmul_rn(k.b2, v[i]), __fmul_rn(__fmul_rn(k.omb2, gi), gi));
        m[i] = mi;
        v[i] = vi;
        const float denom = __fadd_rn(__fmul_rn(__fsqrt_rn(vi), k.inv_sqrt_bc2), k.eps);
        const float wn = __fsub_rn(wi, __fdiv_rn(__fmul_rn(k.step_size, mi), denom));
        w[i] = wn;
        if (!write_param) continue;
        if (pdt == OCR_F32)
            ((float *)param)[i] = wn;
        else if (!sr)
            st(param, pdt, i, wn);
        else
            ((uint16_t *)param)[i] = pdt == OCR_F16 ? sr_to_f16(wn, r[l]) : sr_to_bf16(wn, r[l]);
    }
}

// ---- shared internal launchers (defined in the family files) ---------------------------------
// dst[r·dld + c] = src[r·sld + c] for r < rows, c < cols, converting dtypes (elementwise.cu).
void ocr_cuda_copy_2d(const CudaCtx &ctx, void *dst, int ddt, int64_t dld, const void *src, int sdt, int64_t sld,
                      int64_t rows, int64_t cols);
// dst (rows, cols) = broadcast of vec (cols) (elementwise.cu).
void ocr_cuda_broadcast_rows(const CudaCtx &ctx, void *dst, int ddt, const void *vec, int vdt, int64_t rows,
                             int64_t cols);
// x[i] ·= alpha in place, in x's dtype; alpha = 0 writes zeros (elementwise.cu).
void ocr_cuda_scale_inplace(const CudaCtx &ctx, void *x, int dt, int64_t n, float alpha);
// dbias (C) += Σ over rows of d (rows, C), deterministic; uses scratch slot 1 (batchnorm.cu).
void ocr_cuda_bias_grad(const CudaCtx &ctx, const OcrTensor *dbias, const void *d, int ddt, int64_t rows, int64_t C);
// Drops the cached cuDNN plans of every device (conv2d.cu).
void ocr_cuda_conv_release(void);
// A convolution's sizes, checked by conv2d.cu (every tensor below 2^31 elements).
struct ConvGeom {
    int64_t N, H, W, C, OC, KH, KW, Ho, Wo;
    int64_t G, Cg, OCg;
    int sh, sw, ph, pw;
};
// The depthwise convolution (groups == C == OC) with own kernels (conv2d_depthwise.cu), which
// conv2d.cu runs instead of cuDNN; dinp assigned, dweight and dbias accumulated.
void ocr_cuda_conv2d_depthwise_forward(const CudaCtx &ctx, OcrTensor *out, const OcrTensor *inp,
                                       const OcrTensor *weight, const OcrTensor *bias, const ConvGeom &g);
void ocr_cuda_conv2d_depthwise_backward(const CudaCtx &ctx, OcrTensor *dinp, OcrTensor *dweight, OcrTensor *dbias,
                                        const OcrTensor *dout, const OcrTensor *inp, const OcrTensor *weight,
                                        const ConvGeom &g);
// The device's dropout step source for graph replays, or NULL (train_step.cu; see
// ocr_cuda_set_dropout_step_source in train_step.h).
const uint64_t *ocr_cuda_dropout_step_source(int device);

#endif

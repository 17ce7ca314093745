// Helpers shared by the CPU kernels: fp32 views of tensors of any float dtype.
//
// CPU kernels compute in fp32. An f32 tensor is used in place; an f16/bf16 one is converted
// into workspace scratch on the way in and rounded back on the way out, which is exactly
// what a GPU kernel storing low precision does.
//
//   CpuScratch s = {0};
//   const float *x = ocr_cpu_f32_in(&s, inp);
//   float *y = ocr_cpu_f32_out(&s, out, 0);
//   ... compute y from x ...
//   ocr_cpu_f32_store(out, y);
//   ocr_cpu_scratch_free(&s);
#ifndef OCR_KERNELS_CPU_COMMON_H
#define OCR_KERNELS_CPU_COMMON_H

#include <stddef.h>

#include "core/tensor.h"

#define CPU_SCRATCH_MAX 24
typedef struct {
    void *ptrs[CPU_SCRATCH_MAX];
    int count;
} CpuScratch;

// fp32 data of a float tensor (the tensor's own memory when it is f32).
const float *ocr_cpu_f32_in(CpuScratch *s, const OcrTensor *t);
// A buffer to compute t's values into; with load_existing the current values are loaded
// (for outputs that accumulate, like weight gradients).
float *ocr_cpu_f32_out(CpuScratch *s, OcrTensor *t, int load_existing);
// Writes buf back into t (rounding to t's dtype); nothing to do when buf is t's memory.
void ocr_cpu_f32_store(OcrTensor *t, const float *buf);
// Uninitialised scratch of n floats (or bytes, for the _bytes form).
float *ocr_cpu_scratch_floats(CpuScratch *s, size_t n);
void *ocr_cpu_scratch_bytes(CpuScratch *s, size_t bytes);
// Returns every buffer to the workspace (in reverse order).
void ocr_cpu_scratch_free(CpuScratch *s);

// Asserts that t lives on the CPU and has a float dtype.
#define CPU_ASSERT_FLOAT(t) \
    OCR_ASSERT((t)->device.type == OCR_DEVICE_CPU && ocr_dtype_is_float((t)->dtype), "%s must be a CPU float tensor", #t)

// ---- our own loops at the CPU's vector width -------------------------------------------------
// The hot loops of the memory-bound ops (BN, BN + activation, activations, depthwise
// convolution) are compiled three times from one always-inline body: baseline x86-64 (SSE2),
// AVX2 + FMA3 and AVX-512 (+ FMA3) (target attributes; the build itself stays baseline), and
// called through ocr_cpu_vec_level(), chosen once from CPUID (a CPU with AVX2 but without FMA3
// takes SSE2). ISO C mode compiles without FMA contraction and GCC does not reassociate without
// -ffast-math, so every level computes the same bits per element; only the vector width differs.
// Where a formula fuses on purpose (GELU, kernels/activation_math.h), AVX2 and AVX-512 agree and
// the SSE2 clone, without FMA, rounds twice (CPU_VEC_CLONES_FMA). OCR_CPU_VEC=sse2|avx2|avx512 in the environment (read once)
// or the test hook below caps the level, so the narrower paths run on any machine too.
typedef enum { CPU_VEC_SSE2 = 0, CPU_VEC_AVX2 = 1, CPU_VEC_AVX512 = 2 } CpuVecLevel;
CpuVecLevel ocr_cpu_vec_level(void);
const char *ocr_cpu_vec_level_name(CpuVecLevel level);
// Test hook (not in ops.h): select a level by name ("sse2", "avx2", "avx512"), NULL for the
// best this CPU has. Returns 0 and changes nothing when the CPU lacks it or the name is unknown.
int ocr_cpu_vec_select(const char *name);

#if defined(__x86_64__) && defined(__GNUC__)
#define CPU_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define CPU_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,prefer-vector-width=512")))
#else
#define CPU_TARGET_AVX2
#define CPU_TARGET_AVX512
#endif
#define CPU_INLINE static inline __attribute__((always_inline))

// `static void name params`, which calls name##_sse2, _avx2 or _avx512 for the active level.
#define CPU_VEC_DISPATCH(name, params, args)                \
    static void name params {                               \
        switch (ocr_cpu_vec_level()) {                      \
            case CPU_VEC_AVX512: name##_avx512 args; break; \
            case CPU_VEC_AVX2: name##_avx2 args; break;     \
            default: name##_sse2 args; break;               \
        }                                                   \
    }

// Defines `static void name params` that runs name##_body (a CPU_INLINE function) compiled for
// the active level. args repeats the parameter names.
#define CPU_VEC_CLONES(name, params, args)                                   \
    static void name##_sse2 params { name##_body args; }                     \
    CPU_TARGET_AVX2 static void name##_avx2 params { name##_body args; }     \
    CPU_TARGET_AVX512 static void name##_avx512 params { name##_body args; } \
    CPU_VEC_DISPATCH(name, params, args)

// CPU_VEC_CLONES for a body whose first parameter is `int hw_fma` (not in params or args): each
// clone passes a literal, 1 where it has the FMA instruction (AVX2, AVX-512), 0 in the SSE2 one,
// so the formulas that fuse (activation_math.h: fused_mul_add) fold to the instruction or to the
// unfused multiply and add, never to libm's scalar fmaf.
#define CPU_VEC_ARGS(...) __VA_ARGS__
#define CPU_VEC_CLONES_FMA(name, params, args)                                                \
    static void name##_sse2 params { name##_body(0, CPU_VEC_ARGS args); }                     \
    CPU_TARGET_AVX2 static void name##_avx2 params { name##_body(1, CPU_VEC_ARGS args); }     \
    CPU_TARGET_AVX512 static void name##_avx512 params { name##_body(1, CPU_VEC_ARGS args); } \
    CPU_VEC_DISPATCH(name, params, args)

// ---- rows of a tensor in fp32, a tile at a time ----------------------------------------------
// The low-precision path of the row-wise kernels: instead of widening the whole tensor into
// an fp32 copy (a pass over memory that writes twice the bytes it reads, onto fresh pages),
// each thread widens the rows it is about to use into a cache-sized buffer and rounds its
// results back the same way. Widening is exact and the rounding per element is the bulk
// converters' (nearest even), so the results are bit-identical to the whole-tensor path.
// rows (rows·C) starting at row r0 of t viewed as (numel/C, C), in fp32: t's own memory when it
// is f32, else widened into buf.
const float *ocr_cpu_rows_in(const OcrTensor *t, int64_t C, int64_t r0, int64_t rows, float *buf);
// Stores rows·C fp32 values as rows r0.. of t (rounding to t's dtype; a copy for f32 unless src
// already is t's memory).
void ocr_cpu_rows_out(OcrTensor *t, int64_t C, int64_t r0, int64_t rows, const float *src);
// The fp32 buffer to compute rows r0.. of t into: t's own memory when it is f32, else buf.
float *ocr_cpu_rows_dst(OcrTensor *t, int64_t C, int64_t r0, float *buf);
// An f32 tensor header with t's shape over data (not owned): the whole-tensor reference path
// (Global.cpu_exact_numerics) hands the tiled kernels fp32 copies made by ocr_cpu_f32_in/_out.
OcrTensor ocr_cpu_f32_view(const OcrTensor *t, const float *data);

// ---- column sums (the bias gradients of linear and convolution layers) ------------------------
// db[j] += Σ_r d[r·ld + j] for j < C, r = 0 .. R − 1 in order, d f32, bf16 or f16 widened per
// element (no fp32 copy of d). Threads own column ranges, so the result depends neither on the
// thread count nor on the vector level: every db[j] is the same sequence of fp32 additions as
// the plain row-by-row loop, bit for bit.
void ocr_cpu_column_sums_add(float *db, const void *d, ocr_dtype_t dt, int64_t R, int64_t C, int64_t ld);

// ---- one tiled loop for both paths (pool, dropout, attention, layernorm, affine) --------------
// The operand a tiled kernel reads: t itself (widened tile by tile through ocr_cpu_rows_in), or,
// under Global.cpu_exact_numerics and for an f16/bf16 t, an f32 view (in *view) of a
// whole-tensor fp32 copy in s, the reference path.
const OcrTensor *ocr_cpu_tiled_in(CpuScratch *s, const OcrTensor *t, OcrTensor *view);
// The output a tiled kernel writes, as ocr_cpu_tiled_in; *whole is the fp32 copy to ocr_cpu_f32_store
// into t afterwards (NULL: nothing to store). load: the copy starts from t's values.
OcrTensor *ocr_cpu_tiled_out(CpuScratch *s, OcrTensor *t, OcrTensor *view, int load, float **whole);

#endif

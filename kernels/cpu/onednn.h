// oneDNN matmul for the CPU kernels: low-precision (bf16, f16) and f32 operands with fp32
// accumulation, one rounding into the output's dtype — the contract of a GPU's tensor cores.
//
// oneDNN dispatches on CPUID itself (AMX tiles, AVX512-BF16, AVX512-FP16, AVX-512, AVX2).
// Primitives are created once per shape and kept (creating one JIT-compiles its kernel, a few
// milliseconds); their scratch comes from the tracked workspace. The library is the GNU OpenMP
// build, so it runs on ocrtrain's OpenMP threads and Global.threads limits it.
// Without oneDNN in the build (OCR_HAVE_ONEDNN unset) ocr_onednn_available() is 0 and the
// kernels keep their own paths; calling ocr_onednn_gemm then aborts.
#ifndef OCR_KERNELS_CPU_ONEDNN_H
#define OCR_KERNELS_CPU_ONEDNN_H

#include <stdint.h>

#include "core/tensor.h"

// A row-major matrix operand: element (i, j) of op(X) is p[i·ld + j], or p[j·ld + i] when
// trans; batch entry t starts batch_stride elements after entry t−1.
typedef struct {
    const void *p;
    ocr_dtype_t dt;
    int64_t ld;
    int trans;
    int64_t batch_stride;
} OnednnMat;

// 1 when this build has oneDNN and its CPU engine started.
int ocr_onednn_available(void);
// 1 when oneDNN multiplies dt (bf16, f16) operands on BF16/FP16 hardware on this CPU (its
// implementation for a probe GEMM is an AMX, AVX512-BF16 or AVX512-FP16 kernel); 0 for a
// conversion or reference fallback, for f32, and without oneDNN.
int ocr_onednn_native(ocr_dtype_t dt);
// The ISA of that implementation: "AMX", "AVX512-BF16", "AVX512-FP16", or "none".
const char *ocr_onednn_isa_name(ocr_dtype_t dt);
// "3.2.0" or "absent".
const char *ocr_onednn_version(void);

// c[t] (M, N) = alpha · op(a[t]) · op(b[t]) (+ bias broadcast over rows) (+ c[t] when
// accumulate), for t < batch, accumulated in fp32 and rounded once into c_dt. a (M, K) and
// b (K, N) after op; bias: N fp32 values or NULL; c: row-major with leading dimension ldc.
// Any mix of f32/f16/bf16 that oneDNN implements; aborts with oneDNN's status otherwise.
void ocr_onednn_gemm(int64_t batch, int64_t M, int64_t N, int64_t K, float alpha, OnednnMat a, OnednnMat b,
                     const float *bias, int accumulate, void *c, ocr_dtype_t c_dt, int64_t ldc,
                     int64_t c_batch_stride);

// Primitives created so far (tests, benchmarks).
int64_t ocr_onednn_primitives_created(void);

// ---- oneDNN's own convolution kernels (dense, one group) ---------------------------------
// NHWC maps, (OC, KH, KW, C) weights; padding may differ between the two sides. Each call
// returns 1 when it computed the result, 0 (nothing written) when oneDNN has only its reference
// kernel for the case (the caller then keeps its im2col + GEMM path). Primitives are cached
// per shape like the GEMMs'; the weights are reordered into the layout the kernel chose on
// every call (a few KB). Accumulation is fp32 in oneDNN's order, one rounding into the output.
typedef struct {
    int64_t N, H, W, C, OC, KH, KW, Ho, Wo;
    int64_t stride_h, stride_w, pad_top, pad_left;
} OnednnConvGeom;
// out (N, Ho, Wo, OC) of out_dt = conv(inp, weight) + bias (fp32, NULL: none); inp and weight dt.
int ocr_onednn_conv_forward(void *out, ocr_dtype_t out_dt, const void *inp, const void *weight, const float *bias,
                            ocr_dtype_t dt, const OnednnConvGeom *g);
// dinp (N, H, W, C) of dinp_dt = the input gradient (assigned) from dout and weight of dt.
int ocr_onednn_conv_backward_data(void *dinp, ocr_dtype_t dinp_dt, const void *dout, const void *weight,
                                  ocr_dtype_t dt, const OnednnConvGeom *g);
// dweight (OC, KH, KW, C) fp32 = the weight gradient (assigned) from inp and dout of dt.
int ocr_onednn_conv_backward_weights(float *dweight, const void *inp, const void *dout, ocr_dtype_t dt,
                                     const OnednnConvGeom *g);

// ---- helpers for the kernels' hardware paths (available in every build) -----------------
// The operand starting offset elements into p.
static inline OnednnMat onednn_mat(const void *p, ocr_dtype_t dt, int64_t offset, int64_t ld, int trans) {
    OnednnMat m = {(const char *)p + (size_t)offset * ocr_dtype_size(dt), dt, ld, trans, 0};
    return m;
}
static inline void *onednn_elem(void *p, ocr_dtype_t dt, int64_t offset) {
    return (char *)p + (size_t)offset * ocr_dtype_size(dt);
}

#endif

// The LSTM cell's elementwise step on the GPU: one thread per (b, j), fp32 arithmetic with the
// CPU twin's expressions (kernels/cpu/lstm.c); expf/tanhf differ from glibc's by an ulp or two.
#include <math.h>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_ops.h"

#define LSTM_THREADS 256

struct LstmArgs {
    int64_t B, H;
};

__device__ __forceinline__ float lstm_sigm(float x) { return 1.0f / (1.0f + expf(-x)); }

static __global__ void lstm_fwd_kernel(void *h, int hdt, void *c, int cdt, const void *a, int adt, const void *cp,
                                       int cpdt, LstmArgs s) {
    const int64_t n = s.B * s.H;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = k / s.H, j = k - b * s.H, base = b * 4 * s.H;
        const float i = lstm_sigm(ld(a, adt, base + j)), f = lstm_sigm(ld(a, adt, base + s.H + j));
        const float g = tanhf(ld(a, adt, base + 2 * s.H + j)), o = lstm_sigm(ld(a, adt, base + 3 * s.H + j));
        const float cn = f * (cp ? ld(cp, cpdt, k) : 0.0f) + i * g;
        st(c, cdt, k, cn);
        st(h, hdt, k, o * tanhf(cn));
    }
}

static __global__ void lstm_bwd_kernel(void *da, int dadt, void *dcp, int dcpdt, const void *dh, int dhdt,
                                       const void *dc, int dcdt, const void *a, int adt, const void *cp, int cpdt,
                                       LstmArgs s) {
    const int64_t n = s.B * s.H;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = k / s.H, j = k - b * s.H, base = b * 4 * s.H;
        const float i = lstm_sigm(ld(a, adt, base + j)), f = lstm_sigm(ld(a, adt, base + s.H + j));
        const float g = tanhf(ld(a, adt, base + 2 * s.H + j)), o = lstm_sigm(ld(a, adt, base + 3 * s.H + j));
        const float c0 = cp ? ld(cp, cpdt, k) : 0.0f;
        const float tc = tanhf(f * c0 + i * g);
        const float gh = ld(dh, dhdt, k);
        const float dct = (dc ? ld(dc, dcdt, k) : 0.0f) + gh * o * (1.0f - tc * tc);
        if (da) {
            st(da, dadt, base + j, dct * g * i * (1.0f - i));
            st(da, dadt, base + s.H + j, dct * c0 * f * (1.0f - f));
            st(da, dadt, base + 2 * s.H + j, dct * i * (1.0f - g * g));
            st(da, dadt, base + 3 * s.H + j, gh * tc * o * (1.0f - o));
        }
        if (dcp) st(dcp, dcpdt, k, dct * f);
    }
}

static LstmArgs lstm_args(const OcrTensor *gates, const char *op) {
    CUDA_ASSERT_FLOAT(gates);
    OCR_ASSERT(gates->ndim == 2 && gates->shape[1] % 4 == 0, "%s: gates must be (B, 4H)", op);
    LstmArgs s = {gates->shape[0], gates->shape[1] / 4};
    return s;
}

static void check_state(const OcrTensor *t, const LstmArgs &s, const char *what) {
    if (!t) return;
    CUDA_ASSERT_FLOAT(t);
    OCR_ASSERT(t->ndim == 2 && t->shape[0] == s.B && t->shape[1] == s.H, "%s must be (B, H)", what);
}

extern "C" void ocr_cuda_lstm_cell_forward(OcrTensor *h, OcrTensor *c, const OcrTensor *gates,
                                           const OcrTensor *c_prev) {
    LstmArgs s = lstm_args(gates, "lstm_cell");
    check_state(h, s, "lstm_cell: h");
    check_state(c, s, "lstm_cell: c");
    check_state(c_prev, s, "lstm_cell: c_prev");
    CudaCtx ctx = ocr_cuda_enter(gates);
    if (s.B * s.H == 0) return;
    lstm_fwd_kernel<<<cuda_blocks(s.B * s.H, LSTM_THREADS), LSTM_THREADS, 0, ctx.stream>>>(
        h->data, h->dtype, c->data, c->dtype, gates->data, gates->dtype, opt_data(c_prev), opt_dtype(c_prev), s);
    OCR_CUDA_LAUNCHED();
}

extern "C" void ocr_cuda_lstm_cell_backward(OcrTensor *dgates, OcrTensor *dc_prev, const OcrTensor *dh,
                                            const OcrTensor *dc, const OcrTensor *gates, const OcrTensor *c_prev) {
    LstmArgs s = lstm_args(gates, "lstm_cell_backward");
    check_state(dh, s, "lstm_cell_backward: dh");
    check_state(dc, s, "lstm_cell_backward: dc");
    check_state(c_prev, s, "lstm_cell_backward: c_prev");
    check_state(dc_prev, s, "lstm_cell_backward: dc_prev");
    if (dgates) {
        CUDA_ASSERT_FLOAT(dgates);
        OCR_ASSERT(ocr_tensor_same_shape(dgates, gates), "lstm_cell_backward: dgates must be (B, 4H)");
    }
    if ((!dgates && !dc_prev) || s.B * s.H == 0) return;
    CudaCtx ctx = ocr_cuda_enter(gates);
    lstm_bwd_kernel<<<cuda_blocks(s.B * s.H, LSTM_THREADS), LSTM_THREADS, 0, ctx.stream>>>(
        opt_data(dgates), opt_dtype(dgates), opt_data(dc_prev), opt_dtype(dc_prev), dh->data, dh->dtype, opt_data(dc),
        opt_dtype(dc), gates->data, gates->dtype, opt_data(c_prev), opt_dtype(c_prev), s);
    OCR_CUDA_LAUNCHED();
}

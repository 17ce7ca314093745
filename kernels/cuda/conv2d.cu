// 2-D convolution on the GPU: NHWC activations, (OC, KH, KW, C/groups) = KRSC weights.
//
// - Dense and grouped convolutions: cuDNN (NHWC tensors, NHWC filters = KRSC, fp32 compute).
//   f16/bf16 run with CUDNN_TENSOR_OP_MATH (tensor cores, fp32 accumulation); f32 with
//   CUDNN_FMA_MATH (true FP32) unless TF32 is allowed (ocr_cuda_set_allow_tf32), then
//   CUDNN_DEFAULT_MATH. The algorithm of each shape, dtype and direction is chosen once with
//   cudnnFind*Ex on scratch buffers of the same shapes (preferring deterministic algorithms),
//   and cached; the workspace comes from the tracked scratch (WORKSPACE category).
// - Depthwise (groups == C == OC): own kernels (conv2d_depthwise.cu), as on the CPU.
// - Mixed dtypes: cuDNN wants x, w, y of one type, so when the tensors of a direction differ the
//   direction runs in f32 on widened copies and rounds once into the output, as the CPU does.
// - A bias is the initial output (beta = 1), so conv + bias is rounded once; dweight
//   accumulates with beta = 1 (fp32 blend, one rounding); dbias accumulates through the
//   deterministic column reduction of batchnorm.cu (ocr_cuda_bias_grad).
#include <limits.h>
#include <stdlib.h>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_internal.h"

#define CONV_THREADS 256

static int depthwise_cudnn;
extern "C" int ocr_cuda_conv2d_depthwise_cudnn(int on) {
    int old = depthwise_cudnn;
    depthwise_cudnn = on != 0;
    return old;
}

// ocr_conv2d_out_size of ops.h (kernels/cpu/conv2d.c), repeated so this library needs nothing
// from ocr_kernels.
static int out_size(int in_size, int kernel, int stride, int pad) {
    OCR_ASSERT(stride > 0 && kernel > 0 && pad >= 0, "conv2d: bad kernel %d / stride %d / pad %d", kernel, stride, pad);
    int span = in_size + 2 * pad - kernel;
    return span < 0 ? 0 : span / stride + 1;
}

static ConvGeom conv_geom(const OcrTensor *inp, const OcrTensor *weight, Conv2dParams p) {
    CUDA_ASSERT_FLOAT(inp);
    CUDA_ASSERT_FLOAT(weight);
    OCR_ASSERT(inp->ndim == 4 && weight->ndim == 4, "conv2d: inp must be (N, H, W, C), weight (OC, KH, KW, C/groups)");
    ConvGeom g;
    g.N = inp->shape[0], g.H = inp->shape[1], g.W = inp->shape[2], g.C = inp->shape[3];
    g.OC = weight->shape[0], g.KH = weight->shape[1], g.KW = weight->shape[2];
    g.G = p.groups;
    OCR_ASSERT(g.G >= 1 && g.C % g.G == 0 && g.OC % g.G == 0, "conv2d: %lld in / %lld out channels, %lld groups",
               (long long)g.C, (long long)g.OC, (long long)g.G);
    g.Cg = g.C / g.G, g.OCg = g.OC / g.G;
    OCR_ASSERT(weight->shape[3] == g.Cg, "conv2d: weight has %lld input channels, expected C/groups = %lld",
               (long long)weight->shape[3], (long long)g.Cg);
    g.sh = p.stride_h, g.sw = p.stride_w, g.ph = p.pad_h, g.pw = p.pad_w;
    g.Ho = out_size((int)g.H, (int)g.KH, g.sh, g.ph);
    g.Wo = out_size((int)g.W, (int)g.KW, g.sw, g.pw);
    OCR_ASSERT(g.N * g.H * g.W * g.C <= INT_MAX && g.N * g.Ho * g.Wo * g.OC <= INT_MAX,
               "conv2d: tensors beyond 2^31 elements are not supported on CUDA");
    return g;
}

static int is_depthwise(const ConvGeom &g) { return g.G == g.C && g.OC == g.C && g.Cg == 1; }

// ---- cuDNN ---------------------------------------------------------------------------------------------
#ifdef OCR_HAVE_CUDNN

enum { DIR_FWD = 0, DIR_BWD_DATA = 1, DIR_BWD_FILTER = 2 };

struct ConvKey {
    int dev, dt, tf32;
    int N, H, W, C, OC, KH, KW, sh, sw, ph, pw, G;
};

struct ConvPlan {
    ConvKey key;
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnMathType_t math;
    int found[3];
    int algo[3];
    size_t ws[3];
};

static ConvPlan **plans;
static int nplans, cap_plans;

static cudnnDataType_t cudnn_type(int dt) {
    switch (dt) {
        case OCR_F32: return CUDNN_DATA_FLOAT;
        case OCR_F16: return CUDNN_DATA_HALF;
        default: return CUDNN_DATA_BFLOAT16;
    }
}

static ConvPlan *get_plan(const CudaCtx &ctx, const ConvGeom &g, int dt) {
    ConvKey k;
    memset(&k, 0, sizeof k);
    k.dev = ctx.device, k.dt = dt, k.tf32 = dt == OCR_F32 && ocr_cuda_allow_tf32();
    k.N = (int)g.N, k.H = (int)g.H, k.W = (int)g.W, k.C = (int)g.C, k.OC = (int)g.OC, k.KH = (int)g.KH;
    k.KW = (int)g.KW, k.sh = g.sh, k.sw = g.sw, k.ph = g.ph, k.pw = g.pw, k.G = (int)g.G;
    for (int i = 0; i < nplans; i++)
        if (memcmp(&plans[i]->key, &k, sizeof k) == 0) return plans[i];
    ConvPlan *p = (ConvPlan *)calloc(1, sizeof *p);
    OCR_ASSERT(p, "conv2d: out of host memory");
    p->key = k;
    const cudnnDataType_t t = cudnn_type(dt);
    OCR_CUDA_CHECK(cudnnCreateTensorDescriptor(&p->x));
    OCR_CUDA_CHECK(cudnnCreateTensorDescriptor(&p->y));
    OCR_CUDA_CHECK(cudnnCreateFilterDescriptor(&p->w));
    OCR_CUDA_CHECK(cudnnCreateConvolutionDescriptor(&p->conv));
    OCR_CUDA_CHECK(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NHWC, t, k.N, k.C, k.H, k.W));
    OCR_CUDA_CHECK(cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NHWC, t, k.N, k.OC, (int)g.Ho, (int)g.Wo));
    OCR_CUDA_CHECK(cudnnSetFilter4dDescriptor(p->w, t, CUDNN_TENSOR_NHWC, k.OC, (int)g.Cg, k.KH, k.KW));
    OCR_CUDA_CHECK(cudnnSetConvolution2dDescriptor(p->conv, k.ph, k.pw, k.sh, k.sw, 1, 1, CUDNN_CROSS_CORRELATION,
                                                   CUDNN_DATA_FLOAT));
    OCR_CUDA_CHECK(cudnnSetConvolutionGroupCount(p->conv, k.G));
    p->math = dt != OCR_F32 ? CUDNN_TENSOR_OP_MATH : (k.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH);
    OCR_CUDA_CHECK(cudnnSetConvolutionMathType(p->conv, p->math));
    int n, c, h, w;
    OCR_CUDA_CHECK(cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &n, &c, &h, &w));
    OCR_ASSERT(n == k.N && c == k.OC && h == g.Ho && w == g.Wo, "conv2d: cuDNN output %dx%dx%dx%d, expected %lldx%lld",
               n, h, w, c, (long long)g.Ho, (long long)g.Wo);
    if (nplans == cap_plans) {
        cap_plans = cap_plans ? 2 * cap_plans : 32;
        plans = (ConvPlan **)realloc(plans, (size_t)cap_plans * sizeof *plans);
        OCR_ASSERT(plans, "conv2d: out of host memory");
    }
    plans[nplans++] = p;
    return p;
}

void ocr_cuda_conv_release(void) {
    for (int i = 0; i < nplans; i++) {
        cudnnDestroyTensorDescriptor(plans[i]->x);
        cudnnDestroyTensorDescriptor(plans[i]->y);
        cudnnDestroyFilterDescriptor(plans[i]->w);
        cudnnDestroyConvolutionDescriptor(plans[i]->conv);
        free(plans[i]);
    }
    free(plans);
    plans = NULL;
    nplans = cap_plans = 0;
}

// Small pseudo-random values for the trial buffers of cudnnFind (zeros can favour some
// algorithms).
static __global__ void fill_trial_kernel(void *p, int dt, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        st(p, dt, i, u32_to_uniform(philox_u32(0x5eed, 0xc0de, (uint64_t)i)) - 0.5f);
}

static void *trial_buffer(const CudaCtx &ctx, int dt, int64_t n) {
    void *p = ocr_mem_alloc(ocr_cuda_device(ctx.device), OCR_MEM_WORKSPACE, (size_t)(n > 0 ? n : 1) * ocr_dtype_size((ocr_dtype_t)dt));
    OCR_ASSERT(p, "conv2d: cudnnFind trial buffer: %s", ocr_last_error());
    if (n > 0) {
        fill_trial_kernel<<<cuda_blocks(n, CONV_THREADS), CONV_THREADS, 0, ctx.stream>>>(p, dt, n);
        OCR_CUDA_LAUNCHED();
    }
    return p;
}

template <typename Perf>
static int pick(const Perf *perf, int got, const ConvPlan *p, size_t *ws) {
    // Fastest deterministic algorithm first, then the fastest at all. An f32 run without TF32
    // never takes a tensor-op result; nobody takes the down-converting one.
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < got; i++) {
            if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
            if (pass == 0 && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
            if (perf[i].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;
            if (p->key.dt == OCR_F32 && !p->key.tf32 && perf[i].mathType == CUDNN_TENSOR_OP_MATH) continue;
            *ws = perf[i].memory;
            return (int)perf[i].algo;
        }
    OCR_ASSERT(0, "conv2d: cuDNN found no usable algorithm (%dx%dx%dx%d -> %d, kernel %dx%d, groups %d, %s)",
               p->key.N, p->key.H, p->key.W, p->key.C, p->key.OC, p->key.KH, p->key.KW, p->key.G,
               ocr_dtype_name((ocr_dtype_t)p->key.dt));
    return 0;
}

// Chooses the algorithm of one direction with cudnnFind*Ex on trial buffers (synchronises;
// happens once per shape, dtype and direction).
static void find_algo(const CudaCtx &ctx, ConvPlan *p, const ConvGeom &g, int dir) {
    if (p->found[dir]) return;
    cudnnHandle_t h = ocr_cuda_cudnn(ctx);
    const int dt = p->key.dt;
    void *x = trial_buffer(ctx, dt, g.N * g.H * g.W * g.C);
    void *w = trial_buffer(ctx, dt, g.OC * g.KH * g.KW * g.Cg);
    void *y = trial_buffer(ctx, dt, g.N * g.Ho * g.Wo * g.OC);
    size_t free_b = 0, total_b = 0;
    OCR_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    size_t limit = free_b / 4;
    if (limit > ((size_t)512 << 20)) limit = (size_t)512 << 20;
    void *ws = limit ? ocr_mem_alloc(ocr_cuda_device(ctx.device), OCR_MEM_WORKSPACE, limit) : NULL;
    if (!ws) limit = 0;
    int got = 0;
    if (dir == DIR_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        OCR_CUDA_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, p->x, x, p->w, w, p->conv, p->y, y,
                                                              CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf, ws, limit));
        p->algo[dir] = pick(perf, got, p, &p->ws[dir]);
    } else if (dir == DIR_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        OCR_CUDA_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(h, p->w, w, p->y, y, p->conv, p->x, x,
                                                                   CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf,
                                                                   ws, limit));
        p->algo[dir] = pick(perf, got, p, &p->ws[dir]);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        OCR_CUDA_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(h, p->x, x, p->y, y, p->conv, p->w, w,
                                                                     CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got,
                                                                     perf, ws, limit));
        p->algo[dir] = pick(perf, got, p, &p->ws[dir]);
    }
    OCR_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    ocr_mem_free(ws);
    ocr_mem_free(x);
    ocr_mem_free(w);
    ocr_mem_free(y);
    p->found[dir] = 1;
}

// Scratch layout of one cuDNN call: widened operands (when the direction runs in f32 for
// mixed dtypes), an f32 output when it cannot be written directly, then the workspace.
struct Carve {
    char *base;
    size_t used;
    void *take(size_t bytes) {
        void *p = base + used;
        used += cuda_align(bytes);
        return p;
    }
};

// A tensor as the direction's compute dtype: itself, or a widened f32 copy.
static const void *as_compute(const CudaCtx &ctx, Carve &c, const OcrTensor *t, int dt) {
    if (t->dtype == dt) return t->data;
    const int64_t n = ocr_tensor_numel(t);
    void *p = c.take((size_t)n * sizeof(float));
    ocr_cuda_copy_2d(ctx, p, OCR_F32, n, t->data, t->dtype, n, 1, n);
    return p;
}

static size_t widen_bytes(const OcrTensor *t, int dt) {
    return t->dtype == dt ? 0 : cuda_align((size_t)ocr_tensor_numel(t) * sizeof(float));
}

static void cudnn_forward(const CudaCtx &ctx, OcrTensor *out, const OcrTensor *inp, const OcrTensor *weight,
                          const OcrTensor *bias, const ConvGeom &g) {
    const int same = inp->dtype == weight->dtype && inp->dtype == out->dtype &&
                     (!bias || bias->dtype == out->dtype || out->dtype == OCR_F32);
    const int dt = same ? out->dtype : OCR_F32;
    ConvPlan *p = get_plan(ctx, g, dt);
    find_algo(ctx, p, g, DIR_FWD);
    const size_t ybytes = out->dtype == dt ? 0 : cuda_align((size_t)ocr_tensor_numel(out) * sizeof(float));
    const size_t need = widen_bytes(inp, dt) + widen_bytes(weight, dt) + ybytes + cuda_align(p->ws[DIR_FWD]);
    Carve c = {(char *)ocr_cuda_scratch(ctx, need), 0};
    const void *x = as_compute(ctx, c, inp, dt);
    const void *w = as_compute(ctx, c, weight, dt);
    void *y = ybytes ? c.take((size_t)ocr_tensor_numel(out) * sizeof(float)) : out->data;
    void *ws = c.take(p->ws[DIR_FWD]);
    const float alpha = 1.0f;
    float beta = 0.0f;
    if (bias) {
        ocr_cuda_broadcast_rows(ctx, y, dt, bias->data, bias->dtype, g.N * g.Ho * g.Wo, g.OC);
        beta = 1.0f;
    }
    OCR_CUDA_CHECK(cudnnConvolutionForward(ocr_cuda_cudnn(ctx), &alpha, p->x, x, p->w, w, p->conv,
                                           (cudnnConvolutionFwdAlgo_t)p->algo[DIR_FWD], ws, p->ws[DIR_FWD], &beta, p->y,
                                           y));
    OCR_CUDA_LAUNCHED();
    if (ybytes) {
        const int64_t n = ocr_tensor_numel(out);
        ocr_cuda_copy_2d(ctx, out->data, out->dtype, n, y, OCR_F32, n, 1, n);
    }
}

static void cudnn_backward_data(const CudaCtx &ctx, OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *weight,
                                const ConvGeom &g) {
    const int same = dout->dtype == weight->dtype && dout->dtype == dinp->dtype;
    const int dt = same ? dinp->dtype : OCR_F32;
    ConvPlan *p = get_plan(ctx, g, dt);
    find_algo(ctx, p, g, DIR_BWD_DATA);
    const size_t xbytes = dinp->dtype == dt ? 0 : cuda_align((size_t)ocr_tensor_numel(dinp) * sizeof(float));
    const size_t need = widen_bytes(dout, dt) + widen_bytes(weight, dt) + xbytes + cuda_align(p->ws[DIR_BWD_DATA]);
    Carve c = {(char *)ocr_cuda_scratch(ctx, need), 0};
    const void *dy = as_compute(ctx, c, dout, dt);
    const void *w = as_compute(ctx, c, weight, dt);
    void *dx = xbytes ? c.take((size_t)ocr_tensor_numel(dinp) * sizeof(float)) : dinp->data;
    void *ws = c.take(p->ws[DIR_BWD_DATA]);
    const float alpha = 1.0f, beta = 0.0f;
    OCR_CUDA_CHECK(cudnnConvolutionBackwardData(ocr_cuda_cudnn(ctx), &alpha, p->w, w, p->y, dy, p->conv,
                                                (cudnnConvolutionBwdDataAlgo_t)p->algo[DIR_BWD_DATA], ws,
                                                p->ws[DIR_BWD_DATA], &beta, p->x, dx));
    OCR_CUDA_LAUNCHED();
    if (xbytes) {
        const int64_t n = ocr_tensor_numel(dinp);
        ocr_cuda_copy_2d(ctx, dinp->data, dinp->dtype, n, dx, OCR_F32, n, 1, n);
    }
}

static void cudnn_backward_filter(const CudaCtx &ctx, OcrTensor *dweight, const OcrTensor *dout, const OcrTensor *inp,
                                  const ConvGeom &g) {
    const int same = dout->dtype == inp->dtype && dout->dtype == dweight->dtype;
    const int dt = same ? dweight->dtype : OCR_F32;
    ConvPlan *p = get_plan(ctx, g, dt);
    find_algo(ctx, p, g, DIR_BWD_FILTER);
    const int64_t nw = ocr_tensor_numel(dweight);
    const size_t wbytes = dweight->dtype == dt ? 0 : cuda_align((size_t)nw * sizeof(float));
    const size_t need = widen_bytes(dout, dt) + widen_bytes(inp, dt) + wbytes + cuda_align(p->ws[DIR_BWD_FILTER]);
    Carve c = {(char *)ocr_cuda_scratch(ctx, need), 0};
    const void *dy = as_compute(ctx, c, dout, dt);
    const void *x = as_compute(ctx, c, inp, dt);
    void *dw = dweight->data;
    if (wbytes) {  // accumulate into an f32 copy, round once
        dw = c.take((size_t)nw * sizeof(float));
        ocr_cuda_copy_2d(ctx, dw, OCR_F32, nw, dweight->data, dweight->dtype, nw, 1, nw);
    }
    void *ws = c.take(p->ws[DIR_BWD_FILTER]);
    const float alpha = 1.0f, beta = 1.0f;  // dweight accumulates
    OCR_CUDA_CHECK(cudnnConvolutionBackwardFilter(ocr_cuda_cudnn(ctx), &alpha, p->x, x, p->y, dy, p->conv,
                                                  (cudnnConvolutionBwdFilterAlgo_t)p->algo[DIR_BWD_FILTER], ws,
                                                  p->ws[DIR_BWD_FILTER], &beta, p->w, dw));
    OCR_CUDA_LAUNCHED();
    if (wbytes) ocr_cuda_copy_2d(ctx, dweight->data, dweight->dtype, nw, dw, OCR_F32, nw, 1, nw);
}

#else  // no cuDNN

void ocr_cuda_conv_release(void) {}

#endif

// ---- entry points --------------------------------------------------------------------------------------------

static int use_own_depthwise(const ConvGeom &g) {
#ifdef OCR_HAVE_CUDNN
    return is_depthwise(g) && !depthwise_cudnn;
#else
    return is_depthwise(g);
#endif
}

#ifndef OCR_HAVE_CUDNN
static void no_cudnn(const ConvGeom &g) {
    OCR_ASSERT(0, "conv2d on CUDA: this build has no cuDNN, which non-depthwise convolutions need "
                  "(%lld -> %lld channels, %lld groups); rebuild with cuDNN (docs/CUDA.md)",
               (long long)g.C, (long long)g.OC, (long long)g.G);
}
#endif

extern "C" void ocr_cuda_conv2d_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *weight,
                                        const OcrTensor *bias, Conv2dParams p) {
    ConvGeom g = conv_geom(inp, weight, p);
    CUDA_ASSERT_FLOAT(out);
    OCR_ASSERT(out->ndim == 4 && out->shape[0] == g.N && out->shape[1] == g.Ho && out->shape[2] == g.Wo &&
                   out->shape[3] == g.OC,
               "conv2d: out must be (%lld, %lld, %lld, %lld)", (long long)g.N, (long long)g.Ho, (long long)g.Wo,
               (long long)g.OC);
    if (bias) {
        CUDA_ASSERT_FLOAT(bias);
        OCR_ASSERT(ocr_tensor_numel(bias) == g.OC, "conv2d: bias must have OC elements");
    }
    CudaCtx ctx = ocr_cuda_enter(out);
    const int64_t rows = g.N * g.Ho * g.Wo;
    if (rows == 0 || g.OC == 0) return;
    if (use_own_depthwise(g)) {
        ocr_cuda_conv2d_depthwise_forward(ctx, out, inp, weight, bias, g);
        return;
    }
    if (g.Cg == 0 || g.H == 0 || g.W == 0) {  // no inputs: the bias alone (or zeros)
        if (bias)
            ocr_cuda_broadcast_rows(ctx, out->data, out->dtype, bias->data, bias->dtype, rows, g.OC);
        else
            OCR_CUDA_CHECK(cudaMemsetAsync(out->data, 0, ocr_tensor_bytes(out), ctx.stream));
        return;
    }
#ifdef OCR_HAVE_CUDNN
    cudnn_forward(ctx, out, inp, weight, bias, g);
#else
    no_cudnn(g);
#endif
}

extern "C" void ocr_cuda_conv2d_backward(OcrTensor *dinp, OcrTensor *dweight, OcrTensor *dbias, const OcrTensor *dout,
                                         const OcrTensor *inp, const OcrTensor *weight, Conv2dParams p) {
    ConvGeom g = conv_geom(inp, weight, p);
    CUDA_ASSERT_FLOAT(dout);
    OCR_ASSERT(dout->ndim == 4 && dout->shape[0] == g.N && dout->shape[1] == g.Ho && dout->shape[2] == g.Wo &&
                   dout->shape[3] == g.OC,
               "conv2d backward: dout must be (%lld, %lld, %lld, %lld)", (long long)g.N, (long long)g.Ho,
               (long long)g.Wo, (long long)g.OC);
    if (dinp) {
        CUDA_ASSERT_FLOAT(dinp);
        OCR_ASSERT(ocr_tensor_same_shape(dinp, inp), "conv2d backward: dinp must match inp");
    }
    if (dweight) {
        CUDA_ASSERT_FLOAT(dweight);
        OCR_ASSERT(ocr_tensor_same_shape(dweight, weight), "conv2d backward: dweight must match weight");
    }
    if (dbias) {
        CUDA_ASSERT_FLOAT(dbias);
        OCR_ASSERT(ocr_tensor_numel(dbias) == g.OC, "conv2d backward: dbias must have OC elements");
    }
    CudaCtx ctx = ocr_cuda_enter(dout);
    const int64_t rows = g.N * g.Ho * g.Wo;
    if (use_own_depthwise(g)) {
        ocr_cuda_conv2d_depthwise_backward(ctx, dinp, dweight, dbias, dout, inp, weight, g);
        return;
    }
    if (dbias) ocr_cuda_bias_grad(ctx, dbias, dout->data, dout->dtype, rows, g.OC);
    if (rows == 0 || g.OC == 0 || g.Cg == 0 || g.H == 0 || g.W == 0) {
        // No output pixels (or no filter taps): nothing reaches the input; dweight is unchanged.
        if (dinp && ocr_tensor_bytes(dinp)) OCR_CUDA_CHECK(cudaMemsetAsync(dinp->data, 0, ocr_tensor_bytes(dinp), ctx.stream));
        return;
    }
#ifdef OCR_HAVE_CUDNN
    if (dinp) cudnn_backward_data(ctx, dinp, dout, weight, g);
    if (dweight) cudnn_backward_filter(ctx, dweight, dout, inp, g);
#else
    if (dinp || dweight) no_cudnn(g);
#endif
}

// Depthwise 2-D convolution (groups == C == OC) on the GPU with own kernels, channels
// contiguous; conv2d.cu runs them instead of cuDNN's grouped convolution (unless the test hook
// ocr_cuda_conv2d_depthwise_cudnn asks for cuDNN). Forward and data gradient: one thread per
// output/input element, taps in the CPU's order (kernels/cpu/conv2d_depthwise.c). Weight/bias
// gradient: fixed chunks of output pixels per (tap, channel), summed in chunk order in double,
// so the result is deterministic.
#include <limits.h>

#include "kernels/cuda/cuda_internal.h"

#define CONV_THREADS 256
#define DW_TX 32
#define DW_TY 8
#define DW_CHUNK 256  // output pixels per partial sum of the depthwise weight gradient

struct DwGeom {
    int N, H, W, C, KH, KW, Ho, Wo, sh, sw, ph, pw;
};

static DwGeom dw_geom(const ConvGeom &g) {
    DwGeom d = {(int)g.N, (int)g.H, (int)g.W, (int)g.C, (int)g.KH, (int)g.KW, (int)g.Ho, (int)g.Wo,
                g.sh,     g.sw,     g.ph,     g.pw};
    return d;
}

static __global__ void dw_forward_kernel(void *y, int ydt, const void *x, int xdt, const void *w, int wdt,
                                         const void *bias, int bdt, DwGeom g) {
    const int64_t total = (int64_t)g.N * g.Ho * g.Wo * g.C;
    const int taps = g.KH * g.KW;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / g.C;
        const int c = (int)(i - r * g.C);
        const int ow = (int)(r % g.Wo);
        r /= g.Wo;
        const int oh = (int)(r % g.Ho);
        const int n = (int)(r / g.Ho);
        float acc = bias ? ld(bias, bdt, c) : 0.0f;
        for (int kh = 0; kh < g.KH; kh++) {
            const int ih = oh * g.sh - g.ph + kh;
            if (ih < 0 || ih >= g.H) continue;
            for (int kw = 0; kw < g.KW; kw++) {
                const int iw = ow * g.sw - g.pw + kw;
                if (iw < 0 || iw >= g.W) continue;
                acc += ld(x, xdt, (((int64_t)n * g.H + ih) * g.W + iw) * g.C + c) *
                       ld(w, wdt, (int64_t)c * taps + kh * g.KW + kw);
            }
        }
        st(y, ydt, i, acc);
    }
}

// dx (assigned): input pixel (ih, iw) is read by tap (kh, kw) of output (oh, ow) when
// ih + ph − kh = oh·sh exactly, and likewise for columns.
static __global__ void dw_backward_data_kernel(void *dx, int dxdt, const void *dy, int dydt, const void *w, int wdt,
                                        DwGeom g) {
    const int64_t total = (int64_t)g.N * g.H * g.W * g.C;
    const int taps = g.KH * g.KW;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / g.C;
        const int c = (int)(i - r * g.C);
        const int iw = (int)(r % g.W);
        r /= g.W;
        const int ih = (int)(r % g.H);
        const int n = (int)(r / g.H);
        float acc = 0.0f;
        for (int kh = 0; kh < g.KH; kh++) {
            const int t = ih + g.ph - kh;
            if (t < 0) break;  // kh only grows
            if (t % g.sh) continue;
            const int oh = t / g.sh;
            if (oh >= g.Ho) continue;
            for (int kw = 0; kw < g.KW; kw++) {
                const int u = iw + g.pw - kw;
                if (u < 0) break;
                if (u % g.sw) continue;
                const int ow = u / g.sw;
                if (ow >= g.Wo) continue;
                acc += ld(dy, dydt, (((int64_t)n * g.Ho + oh) * g.Wo + ow) * g.C + c) *
                       ld(w, wdt, (int64_t)c * taps + kh * g.KW + kw);
            }
        }
        st(dx, dxdt, i, acc);
    }
}

// part[z][chunk][c]: z < taps: Σ over the chunk's output pixels of dy · x at tap z;
// z == taps: Σ dy (the bias). blockIdx.z + z0 is z.
static __global__ void __launch_bounds__(DW_TX *DW_TY)
    dw_backward_weight_kernel(float *part, const void *dy, int dydt, const void *x, int xdt, DwGeom g, int z0,
                              int64_t nch) {
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int c = blockIdx.y * DW_TX + tx;
    const int z = blockIdx.z + z0;
    const int taps = g.KH * g.KW;
    const int64_t P = (int64_t)g.N * g.Ho * g.Wo;
    const int64_t chunk = blockIdx.x;
    const int64_t p0 = chunk * DW_CHUNK, p1 = p0 + DW_CHUNK < P ? p0 + DW_CHUNK : P;
    const int kh = z < taps ? z / g.KW : 0, kw = z < taps ? z % g.KW : 0;
    float s = 0.0f;
    if (c < g.C) {
        for (int64_t p = p0 + ty; p < p1; p += DW_TY) {
            const float d = ld(dy, dydt, p * g.C + c);
            if (z == taps) {
                s += d;
                continue;
            }
            const int ow = (int)(p % g.Wo);
            const int64_t q = p / g.Wo;
            const int oh = (int)(q % g.Ho);
            const int n = (int)(q / g.Ho);
            const int ih = oh * g.sh - g.ph + kh, iw = ow * g.sw - g.pw + kw;
            if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
            s += d * ld(x, xdt, (((int64_t)n * g.H + ih) * g.W + iw) * g.C + c);
        }
    }
    __shared__ float sh[DW_TY][DW_TX + 1];
    sh[ty][tx] = s;
    __syncthreads();
    if (ty == 0 && c < g.C) {
        float t = 0.0f;
        for (int y = 0; y < DW_TY; y++) t += sh[y][tx];
        part[((int64_t)z * nch + chunk) * g.C + c] = t;
    }
}

// dw[c, tap] += Σ_chunks part[tap][chunk][c]; dbias[c] += Σ_chunks part[taps][chunk][c].
static __global__ void dw_weight_finalize_kernel(void *dw, int dwdt, void *db, int dbdt, const float *part, int64_t nch,
                                          int C, int taps) {
    const int64_t total = (int64_t)C * (taps + 1);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int c = (int)(i % C), z = (int)(i / C);
        if (z < taps ? !dw : !db) continue;
        double t = 0.0;
        for (int64_t k = 0; k < nch; k++) t += (double)part[((int64_t)z * nch + k) * C + c];
        if (z < taps)
            st(dw, dwdt, (int64_t)c * taps + z, (float)((double)ld(dw, dwdt, (int64_t)c * taps + z) + t));
        else
            st(db, dbdt, c, (float)((double)ld(db, dbdt, c) + t));
    }
}

void ocr_cuda_conv2d_depthwise_forward(const CudaCtx &ctx, OcrTensor *out, const OcrTensor *inp,
                                       const OcrTensor *weight, const OcrTensor *bias, const ConvGeom &g) {
    const int64_t total = ocr_tensor_numel(out);
    if (total == 0) return;
    dw_forward_kernel<<<cuda_blocks(total, CONV_THREADS), CONV_THREADS, 0, ctx.stream>>>(
        out->data, out->dtype, inp->data, inp->dtype, weight->data, weight->dtype, bias ? bias->data : NULL,
        bias ? bias->dtype : OCR_F32, dw_geom(g));
    OCR_CUDA_LAUNCHED();
}

void ocr_cuda_conv2d_depthwise_backward(const CudaCtx &ctx, OcrTensor *dinp, OcrTensor *dweight, OcrTensor *dbias,
                                        const OcrTensor *dout, const OcrTensor *inp, const OcrTensor *weight,
                                        const ConvGeom &g) {
    const DwGeom d = dw_geom(g);
    if (dinp) {
        const int64_t total = ocr_tensor_numel(dinp);
        if (total > 0) {
            dw_backward_data_kernel<<<cuda_blocks(total, CONV_THREADS), CONV_THREADS, 0, ctx.stream>>>(
                dinp->data, dinp->dtype, dout->data, dout->dtype, weight->data, weight->dtype, d);
            OCR_CUDA_LAUNCHED();
        }
    }
    const int64_t P = g.N * g.Ho * g.Wo;
    if ((!dweight && !dbias) || P == 0 || g.C == 0) return;
    const int taps = (int)(g.KH * g.KW);
    const int64_t nch = (P + DW_CHUNK - 1) / DW_CHUNK;
    OCR_ASSERT(nch <= INT_MAX && taps + 1 <= 65535, "depthwise conv: too large");
    float *part = (float *)ocr_cuda_scratch(ctx, (size_t)(taps + 1) * (size_t)nch * (size_t)g.C * sizeof(float));
    const int z0 = dweight ? 0 : taps, z1 = dbias ? taps + 1 : taps;
    dim3 grid((unsigned)nch, (unsigned)((g.C + DW_TX - 1) / DW_TX), (unsigned)(z1 - z0));
    dw_backward_weight_kernel<<<grid, dim3(DW_TX, DW_TY), 0, ctx.stream>>>(part, dout->data, dout->dtype, inp->data,
                                                                           inp->dtype, d, z0, nch);
    OCR_CUDA_LAUNCHED();
    const int64_t fin = g.C * (int64_t)(taps + 1);
    dw_weight_finalize_kernel<<<cuda_blocks(fin, CONV_THREADS), CONV_THREADS, 0, ctx.stream>>>(
        dweight ? dweight->data : NULL, dweight ? dweight->dtype : OCR_F32, dbias ? dbias->data : NULL,
        dbias ? dbias->dtype : OCR_F32, part, nch, (int)g.C, taps);
    OCR_CUDA_LAUNCHED();
}

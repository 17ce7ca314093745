// 2-D pooling on NHWC maps: average (exclusive of padding), max, adaptive average.
//
// Every pool is described per axis by its output bins [start, end) clipped to the input,
// so fixed-window and adaptive pools share one implementation. Backward passes GATHER:
// each input pixel sums the gradients of the (contiguous) range of output bins that
// cover it, so threads write disjoint pixels, nothing races, and the summation order is
// fixed. Inner loops run over the contiguous channel dimension.
#include <omp.h>
#include <string.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/ops.h"

#define POOL_PAR_MIN 16384

// Per-axis bin tables: output index o covers inputs [start[o], end[o]); input index i is
// covered by bins [lo[i], hi[i]) (empty when lo == hi).
typedef struct {
    int out, in;
    int *start, *end;
    int *lo, *hi;
} PoolAxis;

static void axis_alloc(PoolAxis *a, CpuScratch *s, int out, int in) {
    a->out = out;
    a->in = in;
    int *buf = ocr_cpu_scratch_bytes(s, (size_t)(2 * out + 2 * in + 1) * sizeof(int));
    a->start = buf;
    a->end = buf + out;
    a->lo = buf + 2 * out;
    a->hi = buf + 2 * out + in;
}

// Bins are monotone (start and end never decrease), so the bins covering one input index
// form a contiguous range.
static void axis_cover(PoolAxis *a) {
    for (int i = 0; i < a->in; i++) {
        a->lo[i] = a->out;
        a->hi[i] = 0;
    }
    for (int o = 0; o < a->out; o++)
        for (int i = a->start[o]; i < a->end[o]; i++) {
            if (o < a->lo[i]) a->lo[i] = o;
            if (o + 1 > a->hi[i]) a->hi[i] = o + 1;
        }
    for (int i = 0; i < a->in; i++)
        if (a->hi[i] < a->lo[i]) a->hi[i] = a->lo[i];
}

static void axis_window(PoolAxis *a, CpuScratch *s, int out, int in, int kernel, int stride, int pad,
                        const char *what) {
    OCR_ASSERT(kernel > 0 && stride > 0 && pad >= 0, "pool: bad %s window (kernel %d stride %d pad %d)", what, kernel,
               stride, pad);
    int expect = (in + 2 * pad - kernel) / stride + 1;
    OCR_ASSERT(in + 2 * pad >= kernel && out == expect,
               "pool: %s output size %d, expected %d (in %d kernel %d stride %d pad %d)", what, out, expect, in, kernel,
               stride, pad);
    axis_alloc(a, s, out, in);
    for (int o = 0; o < out; o++) {
        int st = o * stride - pad, en = st + kernel;
        a->start[o] = st < 0 ? 0 : st;
        a->end[o] = en > in ? in : en;
        OCR_ASSERT(a->start[o] < a->end[o], "pool: %s window %d lies entirely in the padding (pad %d >= kernel %d?)",
                   what, o, pad, kernel);
    }
    axis_cover(a);
}

// Adaptive bins: [floor(o·in/out), ceil((o+1)·in/out)).
static void axis_adaptive(PoolAxis *a, CpuScratch *s, int out, int in) {
    OCR_ASSERT(out > 0 && in > 0, "adaptive pool: sizes in %d out %d", in, out);
    axis_alloc(a, s, out, in);
    for (int o = 0; o < out; o++) {
        a->start[o] = (int)((int64_t)o * in / out);
        a->end[o] = (int)(((int64_t)(o + 1) * in + out - 1) / out);
    }
    axis_cover(a);
}

static void pool_check_nhwc(const OcrTensor *a, const OcrTensor *b, const char *what) {
    CPU_ASSERT_FLOAT(a);
    CPU_ASSERT_FLOAT(b);
    OCR_ASSERT(a->ndim == 4 && b->ndim == 4, "%s: tensors must be NHWC (4-d)", what);
    OCR_ASSERT(a->shape[0] == b->shape[0] && a->shape[3] == b->shape[3], "%s: batch or channel sizes differ", what);
}

// f16/bf16 maps are read and written in their own dtype (average pools): each thread widens the
// input rows (H rows of W·C) it is about to sum into a row buffer and rounds each output row
// once, instead of widening the whole map into an fp32 copy. Widening is exact and every output
// sums the same values in the same order, so the results are the bits of the whole-tensor fp32
// path, which Global.cpu_exact_numerics keeps as the reference (ocr_cpu_tiled_in / ocr_cpu_tiled_out).

// y (N, Ho, Wo, C) = mean of x over each bin; the divisor is the clipped bin area.
// The bin sums are kept in double (acc: Wo·C doubles per thread). A global pool sums hundreds of
// values of both signs, and a float running sum then loses up to ~1e-6 of the largest
// magnitude, which is a large relative error on a small mean; in an SE module that mean
// scales a whole channel at every position, so the error does not average out downstream.
// One output row at a time: each input row of its bins is widened once and added into the sums
// of every output pixel whose bin covers it, so each sum still runs over h, then w, in order.
static void avg_forward(OcrTensor *out, const OcrTensor *inp, const PoolAxis *ah, const PoolAxis *aw,
                        CpuScratch *s) {
    const int64_t N = inp->shape[0], C = inp->shape[3];
    const int64_t H = ah->in, W = aw->in, Ho = ah->out, Wo = aw->out;
    const int64_t xrow = W * C, yrow = Wo * C;
    const int par = N * H * W * C >= POOL_PAR_MIN;
    const size_t nthr = (size_t)(par ? omp_get_max_threads() : 1);
    const size_t xper = inp->dtype == OCR_F32 ? 0 : (size_t)xrow, yper = out->dtype == OCR_F32 ? 0 : (size_t)yrow;
    double *acc = ocr_cpu_scratch_bytes(s, nthr * (size_t)yrow * sizeof(double) + 1);
    float *bufs = ocr_cpu_scratch_floats(s, nthr * (xper + yper) + 1);
#pragma omp parallel for collapse(2) schedule(static) if (par)
    for (int64_t n = 0; n < N; n++)
        for (int64_t oh = 0; oh < Ho; oh++) {
            const size_t t = (size_t)omp_get_thread_num();
            double *a = acc + t * (size_t)yrow;
            float *xb = bufs + t * (xper + yper), *yb = xb + xper;
            for (int64_t i = 0; i < yrow; i++) a[i] = 0.0;
            for (int64_t h = ah->start[oh]; h < ah->end[oh]; h++) {
                const float *xr = ocr_cpu_rows_in(inp, xrow, n * H + h, 1, xb);
                for (int64_t ow = 0; ow < Wo; ow++) {
                    double *ao = a + ow * C;
                    for (int64_t w = aw->start[ow]; w < aw->end[ow]; w++) {
                        const float *xi = xr + w * C;
                        for (int64_t c = 0; c < C; c++) ao[c] += xi[c];
                    }
                }
            }
            float *yr = ocr_cpu_rows_dst(out, yrow, n * Ho + oh, yb);
            for (int64_t ow = 0; ow < Wo; ow++) {
                const double cnt = (double)((ah->end[oh] - ah->start[oh]) * (aw->end[ow] - aw->start[ow]));
                const double *ao = a + ow * C;
                float *yo = yr + ow * C;
                for (int64_t c = 0; c < C; c++) yo[c] = (float)(ao[c] / cnt);
            }
            ocr_cpu_rows_out(out, yrow, n * Ho + oh, 1, yr);
        }
}

// dx = Σ over the bins covering each input pixel of dy / bin area. One input row at a time: the
// output-gradient rows it receives from (a contiguous range) are widened together, and kept
// while the thread's next input rows receive from the same range (a global pool widens its one
// gradient row once per image, not once per input row).
static void avg_backward(OcrTensor *dinp, const OcrTensor *dout, const PoolAxis *ah, const PoolAxis *aw,
                         CpuScratch *s) {
    const int64_t N = dinp->shape[0], C = dinp->shape[3];
    const int64_t H = ah->in, W = aw->in, Ho = ah->out, Wo = aw->out;
    const int64_t xrow = W * C, yrow = Wo * C;
    int64_t span = 1;  // most output rows one input row receives from
    for (int64_t h = 0; h < H; h++)
        if (ah->hi[h] - ah->lo[h] > span) span = ah->hi[h] - ah->lo[h];
    const int par = N * H * W * C >= POOL_PAR_MIN;
    const size_t nthr = (size_t)(par ? omp_get_max_threads() : 1);
    const size_t yper = dout->dtype == OCR_F32 ? 0 : (size_t)(span * yrow);
    const size_t xper = dinp->dtype == OCR_F32 ? 0 : (size_t)xrow;
    float *bufs = ocr_cpu_scratch_floats(s, nthr * (xper + yper) + 1);
    // Per thread: the image and row range whose gradient rows its buffer holds (n = −1: none).
    int64_t *held = ocr_cpu_scratch_bytes(s, nthr * 3 * sizeof(int64_t));
    for (size_t t = 0; t < nthr; t++) held[3 * t] = -1;
#pragma omp parallel for collapse(2) schedule(static) if (par)
    for (int64_t n = 0; n < N; n++)
        for (int64_t h = 0; h < H; h++) {
            const size_t t = (size_t)omp_get_thread_num();
            float *yb = bufs + t * (xper + yper), *xb = yb + yper;
            int64_t *hd = held + 3 * t;
            const int64_t lo = ah->lo[h], hi = ah->hi[h];
            const float *dys = NULL;
            if (lo < hi) {
                if (dout->dtype == OCR_F32 || hd[0] != n || hd[1] != lo || hd[2] != hi) {
                    dys = ocr_cpu_rows_in(dout, yrow, n * Ho + lo, hi - lo, yb);
                    hd[0] = n, hd[1] = lo, hd[2] = hi;
                } else {
                    dys = yb;
                }
            }
            float *dx = ocr_cpu_rows_dst(dinp, xrow, n * H + h, xb);
            for (int64_t w = 0; w < W; w++) {
                float *di = dx + w * C;
                for (int64_t c = 0; c < C; c++) di[c] = 0.0f;
                for (int64_t oh = lo; oh < hi; oh++)
                    for (int64_t ow = aw->lo[w]; ow < aw->hi[w]; ow++) {
                        const float *go = dys + ((oh - lo) * Wo + ow) * C;
                        // Scaled by the reciprocal, as Paddle's average-pool gradient does.
                        const float inv = 1.0f / (float)((ah->end[oh] - ah->start[oh]) * (aw->end[ow] - aw->start[ow]));
                        for (int64_t c = 0; c < C; c++) di[c] += go[c] * inv;
                    }
            }
            ocr_cpu_rows_out(dinp, xrow, n * H + h, 1, dx);
        }
}

static void avgpool_generic_forward(OcrTensor *out, const OcrTensor *inp, const PoolAxis *ah, const PoolAxis *aw,
                                    CpuScratch *s) {
    OcrTensor vx, vy;
    float *whole;
    const OcrTensor *x = ocr_cpu_tiled_in(s, inp, &vx);
    OcrTensor *y = ocr_cpu_tiled_out(s, out, &vy, 0, &whole);
    avg_forward(y, x, ah, aw, s);
    if (whole) ocr_cpu_f32_store(out, whole);
}

static void avgpool_generic_backward(OcrTensor *dinp, const OcrTensor *dout, const PoolAxis *ah, const PoolAxis *aw,
                                     CpuScratch *s) {
    OcrTensor vdy, vdx;
    float *whole;
    const OcrTensor *dy = ocr_cpu_tiled_in(s, dout, &vdy);
    OcrTensor *dx = ocr_cpu_tiled_out(s, dinp, &vdx, 0, &whole);
    avg_backward(dx, dy, ah, aw, s);
    if (whole) ocr_cpu_f32_store(dinp, whole);
}

void ocr_cpu_avgpool2d_forward(OcrTensor *out, const OcrTensor *inp, Pool2dParams p) {
    pool_check_nhwc(out, inp, "avgpool2d");
    CpuScratch s = {0};
    PoolAxis ah, aw;
    axis_window(&ah, &s, (int)out->shape[1], (int)inp->shape[1], p.kernel_h, p.stride_h, p.pad_h, "height");
    axis_window(&aw, &s, (int)out->shape[2], (int)inp->shape[2], p.kernel_w, p.stride_w, p.pad_w, "width");
    avgpool_generic_forward(out, inp, &ah, &aw, &s);
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_avgpool2d_backward(OcrTensor *dinp, const OcrTensor *dout, Pool2dParams p) {
    pool_check_nhwc(dout, dinp, "avgpool2d");
    CpuScratch s = {0};
    PoolAxis ah, aw;
    axis_window(&ah, &s, (int)dout->shape[1], (int)dinp->shape[1], p.kernel_h, p.stride_h, p.pad_h, "height");
    axis_window(&aw, &s, (int)dout->shape[2], (int)dinp->shape[2], p.kernel_w, p.stride_w, p.pad_w, "width");
    avgpool_generic_backward(dinp, dout, &ah, &aw, &s);
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_adaptive_avgpool2d_forward(OcrTensor *out, const OcrTensor *inp) {
    pool_check_nhwc(out, inp, "adaptive_avgpool2d");
    CpuScratch s = {0};
    PoolAxis ah, aw;
    axis_adaptive(&ah, &s, (int)out->shape[1], (int)inp->shape[1]);
    axis_adaptive(&aw, &s, (int)out->shape[2], (int)inp->shape[2]);
    avgpool_generic_forward(out, inp, &ah, &aw, &s);
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_adaptive_avgpool2d_backward(OcrTensor *dinp, const OcrTensor *dout) {
    pool_check_nhwc(dout, dinp, "adaptive_avgpool2d");
    CpuScratch s = {0};
    PoolAxis ah, aw;
    axis_adaptive(&ah, &s, (int)dout->shape[1], (int)dinp->shape[1]);
    axis_adaptive(&aw, &s, (int)dout->shape[2], (int)dinp->shape[2]);
    avgpool_generic_backward(dinp, dout, &ah, &aw, &s);
    ocr_cpu_scratch_free(&s);
}

// y = max over each bin; with arg non-NULL, arg receives the flat input pixel (h·W + w) of
// the FIRST maximum in row-major window order (later equal values do not replace it).
static void max_forward(float *y, int32_t *arg, const float *x, int64_t N, int64_t C, const PoolAxis *ah,
                        const PoolAxis *aw) {
    const int64_t H = ah->in, W = aw->in, Ho = ah->out, Wo = aw->out;
#pragma omp parallel for collapse(2) schedule(static) if (N * H * W * C >= POOL_PAR_MIN)
    for (int64_t n = 0; n < N; n++)
        for (int64_t oh = 0; oh < Ho; oh++)
            for (int64_t ow = 0; ow < Wo; ow++) {
                const int64_t o = ((n * Ho + oh) * Wo + ow) * C;
                float *yo = y + o;
                const int64_t h0 = ah->start[oh], w0 = aw->start[ow];
                const float *x0 = x + ((n * H + h0) * W + w0) * C;
                for (int64_t c = 0; c < C; c++) yo[c] = x0[c];
                if (arg)
                    for (int64_t c = 0; c < C; c++) arg[o + c] = (int32_t)(h0 * W + w0);
                for (int64_t h = h0; h < ah->end[oh]; h++)
                    for (int64_t w = w0; w < aw->end[ow]; w++) {
                        const float *xi = x + ((n * H + h) * W + w) * C;
                        if (arg) {
                            int32_t *restrict ao = arg + o;
                            float *restrict ym = yo;
                            const float *restrict xv = xi;
                            const int32_t pix = (int32_t)(h * W + w);
                            for (int64_t c = 0; c < C; c++) {
                                // The index update is a bit-mask blend: a select of ints
                                // on a float compare does not vectorise with GCC.
                                const float v = xv[c], m = ym[c];
                                const int32_t gt = -(int32_t)(v > m);
                                ao[c] = (pix & gt) | (ao[c] & ~gt);
                                ym[c] = v > m ? v : m;
                            }
                        } else {
                            for (int64_t c = 0; c < C; c++) yo[c] = xi[c] > yo[c] ? xi[c] : yo[c];
                        }
                    }
            }
}

void ocr_cpu_maxpool2d_forward(OcrTensor *out, const OcrTensor *inp, Pool2dParams p) {
    pool_check_nhwc(out, inp, "maxpool2d");
    CpuScratch s = {0};
    PoolAxis ah, aw;
    axis_window(&ah, &s, (int)out->shape[1], (int)inp->shape[1], p.kernel_h, p.stride_h, p.pad_h, "height");
    axis_window(&aw, &s, (int)out->shape[2], (int)inp->shape[2], p.kernel_w, p.stride_w, p.pad_w, "width");
    const float *x = ocr_cpu_f32_in(&s, inp);
    float *y = ocr_cpu_f32_out(&s, out, 0);
    max_forward(y, NULL, x, inp->shape[0], inp->shape[3], &ah, &aw);
    ocr_cpu_f32_store(out, y);
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_maxpool2d_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *inp, Pool2dParams p) {
    pool_check_nhwc(dout, inp, "maxpool2d");
    CPU_ASSERT_FLOAT(dinp);
    OCR_ASSERT(ocr_tensor_same_shape(dinp, inp), "maxpool2d: dinp and inp shapes differ");
    CpuScratch s = {0};
    PoolAxis ah, aw;
    axis_window(&ah, &s, (int)dout->shape[1], (int)inp->shape[1], p.kernel_h, p.stride_h, p.pad_h, "height");
    axis_window(&aw, &s, (int)dout->shape[2], (int)inp->shape[2], p.kernel_w, p.stride_w, p.pad_w, "width");
    const int64_t N = inp->shape[0], H = inp->shape[1], W = inp->shape[2], C = inp->shape[3];
    const int64_t Ho = ah.out, Wo = aw.out;
    OCR_ASSERT(H * W <= INT32_MAX, "maxpool2d: map too large");
    const float *x = ocr_cpu_f32_in(&s, inp);
    const float *dy = ocr_cpu_f32_in(&s, dout);
    const int64_t nout = ocr_tensor_numel(dout);
    float *ymax = ocr_cpu_scratch_floats(&s, (size_t)nout + 1);
    int32_t *arg = ocr_cpu_scratch_bytes(&s, (size_t)(nout + 1) * sizeof(int32_t));
    max_forward(ymax, arg, x, N, C, &ah, &aw);

    float *dx = ocr_cpu_f32_out(&s, dinp, 0);
#pragma omp parallel for collapse(2) schedule(static) if (N * H * W * C >= POOL_PAR_MIN)
    for (int64_t n = 0; n < N; n++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t w = 0; w < W; w++) {
                float *di = dx + ((n * H + h) * W + w) * C;
                const int32_t pix = (int32_t)(h * W + w);
                for (int64_t c = 0; c < C; c++) di[c] = 0.0f;
                for (int64_t oh = ah.lo[h]; oh < ah.hi[h]; oh++)
                    for (int64_t ow = aw.lo[w]; ow < aw.hi[w]; ow++) {
                        const int64_t o = ((n * Ho + oh) * Wo + ow) * C;
                        const float *go = dy + o;
                        const int32_t *ao = arg + o;
                        for (int64_t c = 0; c < C; c++) {
                            const float g = go[c];  // unconditional load: the select vectorises
                            di[c] += ao[c] == pix ? g : 0.0f;
                        }
                    }
            }
    ocr_cpu_f32_store(dinp, dx);
    ocr_cpu_scratch_free(&s);
}

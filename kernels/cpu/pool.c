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

// ---- max pooling ------------------------------------------------------------------------------
// f16/bf16 maps are read and written in their own dtype here too: the input (and, backward, the
// output-gradient) rows a thread is about to use are widened into a few row slots that stay in
// cache, and each result row is rounded once by the bulk converters. Widening is exact and every
// output runs the same fp32 compares (or sums) in the same order as the whole-tensor fp32 path,
// so the bits are that path's, NaNs included (a NaN that wins is widened, kept and rounded back
// exactly as the whole-map copy would be). Global.cpu_exact_numerics keeps the whole-tensor path
// as the reference, as for the average pools.
//
// The backward recomputes the argmax of the output rows an input row receives from, into a
// per-thread slot that stays in cache, and gathers from it at once; nothing map-sized is
// allocated (the old path kept an fp32 copy of x, dy and dx plus a whole-map max and argmax).
// The hot loops are compiled per vector level (CPU_VEC_CLONES); they are compares, selects and
// adds with no reassociation, so every level gives the same bits.

// Rows r of a map viewed as (rows, len), fp32: the tensor's own memory when it is f32, else
// widened into slot r % nslots of buf (kept while the slot holds r). Callers use at most
// nslots consecutive rows at a time, so those rows occupy distinct slots.
typedef struct {
    const OcrTensor *t;
    int64_t len;
    int nslots;
    float *buf;     // nslots · len floats (unused for an f32 map)
    int64_t *tag;   // the row each slot holds, −1: none
} PoolRows;

static void rows_init(PoolRows *r, const OcrTensor *t, int64_t len, int nslots, float *buf, int64_t *tag) {
    r->t = t;
    r->len = len;
    r->nslots = nslots;
    r->buf = buf;
    r->tag = tag;
    for (int i = 0; i < nslots; i++) tag[i] = -1;
}

static const float *rows_get(PoolRows *r, int64_t row) {
    if (r->t->dtype == OCR_F32) return (const float *)r->t->data + row * r->len;
    const int slot = (int)(row % r->nslots);
    float *b = r->buf + (size_t)slot * (size_t)r->len;
    if (r->tag[slot] != row) {
        ocr_cpu_rows_in(r->t, r->len, row, 1, b);
        r->tag[slot] = row;
    }
    return b;
}

// The width geometry of a fixed-window max pool. The argmax is kept as the index of the pixel
// in its window, k = i·kw + dw for row i and column dw from the window's unclipped origin
// (oh·sh − ph, ow·sw − pw): unique within the window, and, at stride 1, the same for every
// window at a given offset, so whole rows run as one flat loop (below).
typedef struct {
    const int *ws, *we, *lo, *hi;  // aw's bins and covers
    int64_t W, Wo, C;
    int kw, sw, pw;
    // Stride 1: the windows ow in [fa, fb) lie inside the map, and the pixels w in [ga, gb) are
    // covered by all kw windows ow = w + pw − dw; both run as flat loops over j = ow·C + c (or
    // w·C + c) with the window offsets as constant shifts of j. Empty otherwise.
    int64_t fa, fb, ga, gb;
} MaxGeom;

static MaxGeom max_geom(const PoolAxis *aw, int64_t C, Pool2dParams p) {
    MaxGeom g = {aw->start, aw->end, aw->lo, aw->hi, aw->in, aw->out, C, p.kernel_w, p.stride_w, p.pad_w, 0, 0, 0, 0};
    if (p.stride_w == 1) {
        g.fa = p.pad_w;
        g.fb = aw->in - p.kernel_w + p.pad_w + 1 < aw->out ? aw->in - p.kernel_w + p.pad_w + 1 : aw->out;
        g.ga = p.kernel_w - 1 - p.pad_w > 0 ? p.kernel_w - 1 - p.pad_w : 0;
        g.gb = aw->out - p.pad_w < aw->in ? aw->out - p.pad_w : aw->in;
        if (g.fb < g.fa) g.fb = g.fa;
        if (g.gb < g.ga) g.gb = g.ga;
    }
    return g;
}

// Whether window ow (or pixel w) is done by the flat loops.
static inline int geom_flat_out(const MaxGeom *g, int64_t ow) { return ow >= g->fa && ow < g->fb; }
static inline int geom_flat_in(const MaxGeom *g, int64_t w) { return w >= g->ga && w < g->gb; }

// One output row of the max: y (Wo, C) = max over each window of the input rows xr[0..nh). The
// first element of a window starts the max and later ones (row-major window order) replace it
// only when strictly greater, so a NaN that starts a window stays and other NaNs never win;
// v > m ? v : m is one MAXPS per vector at every level.
CPU_INLINE void max_row_body(float *restrict y, const float *const *xr, int64_t nh, const MaxGeom *g) {
    const int64_t C = g->C;
    for (int64_t ow = 0; ow < g->Wo; ow++) {
        if (geom_flat_out(g, ow)) continue;
        float *restrict yo = y + ow * C;
        const int64_t w0 = g->ws[ow], w1 = g->we[ow];
        const float *restrict x0 = xr[0] + w0 * C;
        for (int64_t c = 0; c < C; c++) yo[c] = x0[c];
        for (int64_t i = 0; i < nh; i++)
            for (int64_t w = i ? w0 : w0 + 1; w < w1; w++) {
                const float *restrict xi = xr[i] + w * C;
                for (int64_t c = 0; c < C; c++) yo[c] = xi[c] > yo[c] ? xi[c] : yo[c];
            }
    }
    // The same compares for the inner windows, one window offset (i, dw) at a time.
    const int64_t n = (g->fb - g->fa) * C;
    if (n <= 0) return;
    float *restrict yy = y + g->fa * C;
    const float *restrict x0 = xr[0] + (g->fa - g->pw) * C;
    for (int64_t j = 0; j < n; j++) yy[j] = x0[j];
    for (int64_t i = 0; i < nh; i++)
        for (int dw = i ? 0 : 1; dw < g->kw; dw++) {
            const float *restrict xx = xr[i] + (g->fa - g->pw + dw) * C;
            for (int64_t j = 0; j < n; j++) yy[j] = xx[j] > yy[j] ? xx[j] : yy[j];
        }
}
CPU_VEC_CLONES(max_row, (float *y, const float *const *xr, int64_t nh, const MaxGeom *g), (y, xr, nh, g))

// One output row of the argmax: arg (Wo, C) = the window index k of the FIRST maximum of each
// window (the compares of max_row; later equal values do not replace it). The input rows
// xr[0..nh) are window rows i0.. (i0 > 0 where the window is clipped at the top). m: Wo·C floats
// of scratch (the running maxima).
CPU_INLINE void arg_row_body(int32_t *restrict arg, float *restrict m, const float *const *xr, int64_t nh, int64_t i0,
                             const MaxGeom *g) {
    const int64_t C = g->C;
    const int kw = g->kw;
    // The index update is a bit-mask blend: a select of ints on a float compare does not
    // vectorise with GCC.
#define MAX_ARG_STEP(J, V, K)                          \
    do {                                               \
        const float v_ = (V), m_ = m[J];               \
        const int32_t gt_ = -(int32_t)(v_ > m_);       \
        arg[J] = ((K) & gt_) | (arg[J] & ~gt_);        \
        m[J] = v_ > m_ ? v_ : m_;                      \
    } while (0)
    for (int64_t ow = 0; ow < g->Wo; ow++) {
        if (geom_flat_out(g, ow)) continue;
        const int64_t o = ow * C, w0 = g->ws[ow], w1 = g->we[ow], u = ow * g->sw - g->pw;  // u: unclipped origin
        const float *restrict x0 = xr[0] + w0 * C;
        const int32_t k0 = (int32_t)(i0 * kw + (w0 - u));
        for (int64_t c = 0; c < C; c++) {
            m[o + c] = x0[c];
            arg[o + c] = k0;
        }
        for (int64_t i = 0; i < nh; i++)
            for (int64_t w = i ? w0 : w0 + 1; w < w1; w++) {
                const float *restrict xv = xr[i] + w * C;
                const int32_t k = (int32_t)((i0 + i) * kw + (w - u));
                for (int64_t c = 0; c < C; c++) MAX_ARG_STEP(o + c, xv[c], k);
            }
    }
    const int64_t n = (g->fb - g->fa) * C, f = g->fa * C;
    if (n <= 0) return;
    const float *restrict x0 = xr[0] + (g->fa - g->pw) * C;
    const int32_t k0 = (int32_t)(i0 * kw);
    for (int64_t j = f; j < f + n; j++) {
        m[j] = x0[j - f];
        arg[j] = k0;
    }
    for (int64_t i = 0; i < nh; i++)
        for (int dw = i ? 0 : 1; dw < kw; dw++) {
            const float *restrict xx = xr[i] + (g->fa - g->pw + dw) * C;
            const int32_t k = (int32_t)((i0 + i) * kw + dw);
            for (int64_t j = 0; j < n; j++) MAX_ARG_STEP(f + j, xx[j], k);
        }
#undef MAX_ARG_STEP
}
CPU_VEC_CLONES(arg_row, (int32_t *arg, float *m, const float *const *xr, int64_t nh, int64_t i0, const MaxGeom *g),
               (arg, m, xr, nh, i0, g))

// One input row of the gradient: dx (W, C) = Σ over the output rows r < nr (dy rows dyr[r],
// argmax rows ar[r], ascending oh; the input row is row ir[r] of their windows) and the windows
// ow covering each pixel, ascending, of dy where the argmax is that pixel; 0, then one add per
// window in that order, as the whole-map path did. A select, not a multiply: a NaN or inf
// gradient of another pixel adds nothing.
CPU_INLINE void gather_row_body(float *restrict dx, const float *const *dyr, const int32_t *const *ar,
                                const int64_t *ir, int64_t nr, const MaxGeom *g) {
    const int64_t C = g->C;
    const int kw = g->kw;
    for (int64_t j = 0; j < g->W * C; j++) dx[j] = 0.0f;
    for (int64_t r = 0; r < nr; r++) {
        const float *restrict dyv = dyr[r];
        const int32_t *restrict av = ar[r];
        const int32_t kr = (int32_t)(ir[r] * kw);
        for (int64_t w = 0; w < g->W; w++) {
            if (geom_flat_in(g, w)) continue;
            float *restrict di = dx + w * C;
            for (int64_t ow = g->lo[w]; ow < g->hi[w]; ow++) {
                const float *restrict go = dyv + ow * C;
                const int32_t *restrict ao = av + ow * C;
                const int32_t k = kr + (int32_t)(w - (ow * g->sw - g->pw));
                for (int64_t c = 0; c < C; c++) {
                    const float gv = go[c];  // unconditional load: the select vectorises
                    di[c] += ao[c] == k ? gv : 0.0f;
                }
            }
        }
        // Inner pixels: window ow = w + pw − dw, ascending ow is descending dw.
        const int64_t n = (g->gb - g->ga) * C;
        float *restrict dd = dx + g->ga * C;
        for (int dw = kw - 1; dw >= 0 && n > 0; dw--) {
            const int64_t sh = (g->ga + g->pw - dw) * C;
            const float *restrict go = dyv + sh;
            const int32_t *restrict ao = av + sh;
            const int32_t k = kr + dw;
            for (int64_t j = 0; j < n; j++) {
                const float gv = go[j];
                dd[j] += ao[j] == k ? gv : 0.0f;
            }
        }
    }
}
CPU_VEC_CLONES(gather_row, (float *dx, const float *const *dyr, const int32_t *const *ar, const int64_t *ir, int64_t nr,
                            const MaxGeom *g),
               (dx, dyr, ar, ir, nr, g))

// Work items: each image's rows split into nblk contiguous blocks, enough items for every thread
// when the batch is small. Results do not depend on the split (each output is computed alone).
static int64_t pool_blocks(int64_t N, int64_t rows, int par) {
    if (!par) return 1;
    const int64_t want = 4 * (int64_t)omp_get_max_threads();
    int64_t nblk = (want + N - 1) / N;
    return nblk < 1 ? 1 : nblk > rows ? rows : nblk;
}

static int pool_kernel_rows(const PoolAxis *ah) {
    int k = 1;
    for (int o = 0; o < ah->out; o++)
        if (ah->end[o] - ah->start[o] > k) k = ah->end[o] - ah->start[o];
    return k;
}

// y (N, Ho, Wo, C) = max over each window of x.
static void max_forward(OcrTensor *out, const OcrTensor *inp, const PoolAxis *ah, const PoolAxis *aw, Pool2dParams p,
                        CpuScratch *s) {
    const int64_t N = inp->shape[0], C = inp->shape[3];
    const int64_t H = ah->in, W = aw->in, Ho = ah->out, Wo = aw->out;
    const int64_t xrow = W * C, yrow = Wo * C;
    const int kh = pool_kernel_rows(ah);
    const int par = N * H * W * C >= POOL_PAR_MIN;
    const size_t nthr = (size_t)(par ? omp_get_max_threads() : 1);
    const int64_t nblk = pool_blocks(N, Ho, par);
    const MaxGeom g = max_geom(aw, C, p);
    const size_t xper = inp->dtype == OCR_F32 ? 0 : (size_t)kh * (size_t)xrow;
    const size_t yper = out->dtype == OCR_F32 ? 0 : (size_t)yrow;
    float *bufs = ocr_cpu_scratch_floats(s, nthr * (xper + yper) + 1);
    int64_t *tags = ocr_cpu_scratch_bytes(s, nthr * (size_t)kh * sizeof(int64_t));
    const float **ptrs = ocr_cpu_scratch_bytes(s, nthr * (size_t)kh * sizeof(float *));
#pragma omp parallel for schedule(static) if (par)
    for (int64_t item = 0; item < N * nblk; item++) {
        const size_t t = (size_t)omp_get_thread_num();
        const int64_t n = item / nblk, b = item % nblk;
        const int64_t o0 = b * Ho / nblk, o1 = (b + 1) * Ho / nblk;
        float *xb = bufs + t * (xper + yper), *yb = xb + xper;
        const float **xr = ptrs + t * (size_t)kh;
        PoolRows xrows;
        rows_init(&xrows, inp, xrow, kh, xb, tags + t * (size_t)kh);
        for (int64_t oh = o0; oh < o1; oh++) {
            const int64_t h0 = ah->start[oh], nh = ah->end[oh] - h0;
            for (int64_t i = 0; i < nh; i++) xr[i] = rows_get(&xrows, n * H + h0 + i);
            float *yr = ocr_cpu_rows_dst(out, yrow, n * Ho + oh, yb);
            max_row(yr, xr, nh, &g);
            ocr_cpu_rows_out(out, yrow, n * Ho + oh, 1, yr);
        }
    }
}

// dx (N, H, W, C) = Σ of dy over the windows whose first maximum is each pixel.
static void max_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *inp, const PoolAxis *ah,
                         const PoolAxis *aw, Pool2dParams p, CpuScratch *s) {
    const int64_t N = inp->shape[0], C = inp->shape[3];
    const int64_t H = ah->in, W = aw->in, Ho = ah->out, Wo = aw->out;
    const int64_t xrow = W * C, yrow = Wo * C;
    const int kh = pool_kernel_rows(ah);
    int span = 1;  // most output rows one input row receives from
    for (int64_t h = 0; h < H; h++)
        if (ah->hi[h] - ah->lo[h] > span) span = ah->hi[h] - ah->lo[h];
    const int par = N * H * W * C >= POOL_PAR_MIN;
    const size_t nthr = (size_t)(par ? omp_get_max_threads() : 1);
    const int64_t nblk = pool_blocks(N, H, par);
    const MaxGeom g = max_geom(aw, C, p);
    // Per thread: kh widened input rows, span widened gradient rows, span argmax rows, one dx
    // row and the running maxima of one output row.
    const size_t xper = inp->dtype == OCR_F32 ? 0 : (size_t)kh * (size_t)xrow;
    const size_t yper = dout->dtype == OCR_F32 ? 0 : (size_t)span * (size_t)yrow;
    const size_t dper = dinp->dtype == OCR_F32 ? 0 : (size_t)xrow;
    const size_t fper = xper + yper + dper + (size_t)yrow;
    float *bufs = ocr_cpu_scratch_floats(s, nthr * fper + 1);
    int32_t *args = ocr_cpu_scratch_bytes(s, nthr * (size_t)span * (size_t)yrow * sizeof(int32_t) + 1);
    const size_t ntag = (size_t)(kh + 2 * span);
    int64_t *tags = ocr_cpu_scratch_bytes(s, nthr * ntag * sizeof(int64_t));
    const void **ptrs = ocr_cpu_scratch_bytes(s, nthr * (size_t)(kh + 2 * span) * sizeof(void *));
    int64_t *irs = ocr_cpu_scratch_bytes(s, nthr * (size_t)span * sizeof(int64_t));
#pragma omp parallel for schedule(static) if (par)
    for (int64_t item = 0; item < N * nblk; item++) {
        const size_t t = (size_t)omp_get_thread_num();
        const int64_t n = item / nblk, b = item % nblk;
        const int64_t h0 = b * H / nblk, h1 = (b + 1) * H / nblk;
        float *xb = bufs + t * fper, *yb = xb + xper, *db = yb + yper, *m = db + dper;
        int32_t *ab = args + t * (size_t)span * (size_t)yrow;
        int64_t *tg = tags + t * ntag, *atag = tg + kh + span;
        const float **xr = (const float **)(ptrs + t * (size_t)(kh + 2 * span));
        const float **dyr = xr + kh;
        const int32_t **ar = (const int32_t **)(dyr + span);
        int64_t *ir = irs + t * (size_t)span;
        PoolRows xrows, yrows;
        rows_init(&xrows, inp, xrow, kh, xb, tg);
        rows_init(&yrows, dout, yrow, span, yb, tg + kh);
        for (int i = 0; i < span; i++) atag[i] = -1;
        for (int64_t h = h0; h < h1; h++) {
            const int64_t lo = ah->lo[h], nr = ah->hi[h] - lo;
            for (int64_t r = 0; r < nr; r++) {
                const int64_t oh = lo + r, origin = oh * p.stride_h - p.pad_h;  // the window's unclipped top
                const int slot = (int)(oh % span);
                int32_t *a = ab + (size_t)slot * (size_t)yrow;
                if (atag[slot] != oh) {  // the argmax of output row oh, once per item
                    const int64_t hs = ah->start[oh], nh = ah->end[oh] - hs;
                    for (int64_t i = 0; i < nh; i++) xr[i] = rows_get(&xrows, n * H + hs + i);
                    arg_row(a, m, xr, nh, hs - origin, &g);
                    atag[slot] = oh;
                }
                ar[r] = a;
                ir[r] = h - origin;
                dyr[r] = rows_get(&yrows, n * Ho + oh);
            }
            float *dx = ocr_cpu_rows_dst(dinp, xrow, n * H + h, db);
            gather_row(dx, dyr, ar, ir, nr, &g);
            ocr_cpu_rows_out(dinp, xrow, n * H + h, 1, dx);
        }
    }
}

void ocr_cpu_maxpool2d_forward(OcrTensor *out, const OcrTensor *inp, Pool2dParams p) {
    pool_check_nhwc(out, inp, "maxpool2d");
    CpuScratch s = {0};
    PoolAxis ah, aw;
    axis_window(&ah, &s, (int)out->shape[1], (int)inp->shape[1], p.kernel_h, p.stride_h, p.pad_h, "height");
    axis_window(&aw, &s, (int)out->shape[2], (int)inp->shape[2], p.kernel_w, p.stride_w, p.pad_w, "width");
    OcrTensor vx, vy;
    float *whole;
    const OcrTensor *x = ocr_cpu_tiled_in(&s, inp, &vx);
    OcrTensor *y = ocr_cpu_tiled_out(&s, out, &vy, 0, &whole);
    max_forward(y, x, &ah, &aw, p, &s);
    if (whole) ocr_cpu_f32_store(out, whole);
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_maxpool2d_backward(OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *inp, Pool2dParams p) {
    pool_check_nhwc(dout, inp, "maxpool2d");
    CPU_ASSERT_FLOAT(dinp);
    OCR_ASSERT(ocr_tensor_same_shape(dinp, inp), "maxpool2d: dinp and inp shapes differ");
    OCR_ASSERT((int64_t)p.kernel_h * p.kernel_w <= INT32_MAX, "maxpool2d: window too large");
    CpuScratch s = {0};
    PoolAxis ah, aw;
    axis_window(&ah, &s, (int)dout->shape[1], (int)inp->shape[1], p.kernel_h, p.stride_h, p.pad_h, "height");
    axis_window(&aw, &s, (int)dout->shape[2], (int)inp->shape[2], p.kernel_w, p.stride_w, p.pad_w, "width");
    OcrTensor vx, vdy, vdx;
    float *whole;
    const OcrTensor *x = ocr_cpu_tiled_in(&s, inp, &vx);
    const OcrTensor *dy = ocr_cpu_tiled_in(&s, dout, &vdy);
    OcrTensor *dx = ocr_cpu_tiled_out(&s, dinp, &vdx, 0, &whole);
    max_backward(dx, dy, x, &ah, &aw, p, &s);
    if (whole) ocr_cpu_f32_store(dinp, whole);
    ocr_cpu_scratch_free(&s);
}

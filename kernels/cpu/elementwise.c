// Elementwise and layout ops: SE channel gating, add, accumulate, scale, zero, concat
// along channels, permute.
//
// Arithmetic ops compute in fp32 on tiles: f16/bf16 operands are widened and results rounded a
// tile at a time (ocr_cpu_rows_in / ocr_cpu_rows_out), or, when every map of add, accumulate or
// the SE gating is bf16 (BF16-O2), converted in registers as the loops load and store them; the
// loops run at the CPU's vector width (cpu_common.h), and the results are the bits of the
// whole-tensor fp32 path, which Global.cpu_exact_numerics keeps as the reference. Pure data
// movement (concat, permute, copies) moves raw elements when the dtypes agree, so it is exact
// and does not touch NaN payloads, and converts through fp32 only when they differ.
#include <omp.h>
#include <string.h>

#include "core/half.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/rowwise.h"
#include "kernels/ops.h"

#define EW_PAR_MIN 32768
#define EW_BLOCK 16384  // elements per parallel block of a conversion copy

// dst (n, dtype dt) = src (n, dtype st), rounding to nearest even when narrowing.
static void convert_elems(void *dst, ocr_dtype_t dt, const void *src, ocr_dtype_t st, int64_t n) {
    if (n <= 0) return;
    if (dt == st) {
        if (dst != src) memmove(dst, src, (size_t)n * ocr_dtype_size(dt));
        return;
    }
    if (st == OCR_F32) {
        if (dt == OCR_F16)
            ocr_f32_to_f16_array(dst, src, (size_t)n);
        else
            ocr_f32_to_bf16_array(dst, src, (size_t)n);
        return;
    }
    if (dt == OCR_F32) {
        if (st == OCR_F16)
            ocr_f16_to_f32_array(dst, src, (size_t)n);
        else
            ocr_bf16_to_f32_array(dst, src, (size_t)n);
        return;
    }
    // f16 <-> bf16 through a small fp32 buffer.
    float tmp[256];
    const uint16_t *s16 = src;
    uint16_t *d16 = dst;
    for (int64_t i = 0; i < n; i += 256) {
        size_t m = (size_t)(n - i < 256 ? n - i : 256);
        convert_elems(tmp, OCR_F32, s16 + i, st, (int64_t)m);
        convert_elems(d16 + i, dt, tmp, OCR_F32, (int64_t)m);
    }
}

// Whole-tensor copy with conversion, in parallel blocks.
static void copy_tensor(OcrTensor *dst, const OcrTensor *src) {
    CPU_ASSERT_FLOAT(dst);
    CPU_ASSERT_FLOAT(src);
    const int64_t n = ocr_tensor_numel(src);
    OCR_ASSERT(ocr_tensor_numel(dst) == n, "copy: sizes differ");
    if (dst->data == src->data && dst->dtype == src->dtype) return;
    const size_t ds = ocr_dtype_size(dst->dtype), ss = ocr_dtype_size(src->dtype);
    const int64_t nblk = (n + EW_BLOCK - 1) / EW_BLOCK;
#pragma omp parallel for schedule(static) if (n >= EW_PAR_MIN)
    for (int64_t b = 0; b < nblk; b++) {
        const int64_t i0 = b * EW_BLOCK, m = n - i0 < EW_BLOCK ? n - i0 : EW_BLOCK;
        convert_elems((char *)dst->data + i0 * ds, dst->dtype, (const char *)src->data + i0 * ss, src->dtype, m);
    }
}

// ---- tiles ---------------------------------------------------------------------------------
#define EW_TILE 4096  // elements per tile (per thread, three buffers on the stack)

// The operand the tile loops read: under exact numerics an fp32 copy of the whole tensor (the
// reference path), else t itself.
static const OcrTensor *ew_in(CpuScratch *s, const OcrTensor *t, OcrTensor *view) {
    if (t->dtype == OCR_F32 || !ocr_cpu_exact_numerics()) return t;
    *view = ocr_cpu_f32_view(t, ocr_cpu_f32_in(s, t));
    return view;
}
// The output the tile loops write (as ew_in; *whole is the fp32 copy to store back, or NULL).
static OcrTensor *ew_out(CpuScratch *s, OcrTensor *t, OcrTensor *view, int load, float **whole) {
    *whole = NULL;
    if (t->dtype == OCR_F32 || !ocr_cpu_exact_numerics()) return t;
    *whole = ocr_cpu_f32_out(s, t, load);
    *view = ocr_cpu_f32_view(t, *whole);
    return view;
}

CPU_INLINE void add_tile_body(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}
CPU_VEC_CLONES(add_tile, (float *y, const float *a, const float *b, int64_t n), (y, a, b, n))
// add_tile on bf16 maps with the conversions in registers: exact widening, the fp32 sum, and
// ocr_f32_to_bf16's rounding (the bulk converters'), so the bits of the buffered tiles. y may
// be a or b.
CPU_INLINE void add_tile_bf16_body(uint16_t *y, const uint16_t *a, const uint16_t *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = ocr_f32_to_bf16(ocr_bf16_to_f32(a[i]) + ocr_bf16_to_f32(b[i]));
}
CPU_VEC_CLONES(add_tile_bf16, (uint16_t *y, const uint16_t *a, const uint16_t *b, int64_t n), (y, a, b, n))
CPU_INLINE void scale_tile_body(float *y, const float *x, float alpha, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = alpha * x[i];
}
CPU_VEC_CLONES(scale_tile, (float *y, const float *x, float alpha, int64_t n), (y, x, alpha, n))
void ocr_cpu_add_tile(float *y, const float *a, const float *b, int64_t n) { add_tile(y, a, b, n); }
void ocr_cpu_scale_tile(float *y, const float *x, float alpha, int64_t n) { scale_tile(y, x, alpha, n); }
// y (rows, C) = x · the per-sample channel scale of each row (row r0 + r is sample (r0 + r) / HW).
CPU_INLINE void chscale_tile_body(float *y, const float *x, const float *sc, int64_t r0, int64_t rows, int64_t HW,
                                  int64_t C) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * C, *sr = sc + ((r0 + r) / HW) * C;
        float *yr = y + r * C;
        for (int64_t c = 0; c < C; c++) yr[c] = xr[c] * sr[c];
    }
}
CPU_VEC_CLONES(chscale_tile, (float *y, const float *x, const float *sc, int64_t r0, int64_t rows, int64_t HW,
                              int64_t C),
               (y, x, sc, r0, rows, HW, C))
// chscale_tile on bf16 rows with the conversions in registers (BF16-O2's maps): x widened as it is
// loaded (exact), the fp32 product, y rounded as it is stored with ocr_f32_to_bf16's nearest even
// and NaN quieting (the bulk converters' rounding), so the bits of widening into a tile,
// chscale_tile and rounding back, without the tile buffers' stores and loads. A sample's rows
// share one scale row, so where C leaves a partial vector per row they run g rows at a time as one
// flat loop over the scale repeated g times (rowwise.h: cpu_group_rows; the element's arithmetic
// unchanged), the sample's rows left over one by one. y may equal x (each element is read before
// it is written).
CPU_INLINE void chscale_tile_bf16_body(uint16_t *y, const uint16_t *x, const float *restrict sc, int64_t r0,
                                       int64_t rows, int64_t HW, int64_t C) {
    const int64_t g = cpu_group_rows(C), L = g * C;
    float s2[CPU_GROUP_MAX];
    int64_t r = 0;
    while (r < rows) {
        const int64_t n = (r0 + r) / HW, end = (n + 1) * HW - r0 < rows ? (n + 1) * HW - r0 : rows;
        const float *sr = sc + n * C;
        if (g > 1 && end - r >= g) {
            cpu_repeat_coefs(s2, sr, C, L);
            for (; r + g <= end; r += g) {
                const uint16_t *xr = x + r * C;
                uint16_t *yr = y + r * C;
                for (int64_t j = 0; j < L; j++) yr[j] = ocr_f32_to_bf16(ocr_bf16_to_f32(xr[j]) * s2[j]);
            }
        }
        for (; r < end; r++) {
            const uint16_t *xr = x + r * C;
            uint16_t *yr = y + r * C;
            for (int64_t c = 0; c < C; c++) yr[c] = ocr_f32_to_bf16(ocr_bf16_to_f32(xr[c]) * sr[c]);
        }
    }
}
CPU_VEC_CLONES(chscale_tile_bf16, (uint16_t *y, const uint16_t *x, const float *sc, int64_t r0, int64_t rows,
                                   int64_t HW, int64_t C),
               (y, x, sc, r0, rows, HW, C))
CPU_INLINE void dot_rows_body(double *restrict acc, const float *restrict g, const float *restrict x, int64_t rows,
                              int64_t C) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < C; c++) acc[c] += (double)g[r * C + c] * (double)x[r * C + c];
}
CPU_VEC_CLONES(dot_rows, (double *acc, const float *g, const float *x, int64_t rows, int64_t C), (acc, g, x, rows, C))
// dot_rows on bf16 rows, widened in registers: the same products (exact widening) added in the
// same order, so the same bits.
CPU_INLINE void dot_rows_bf16_body(double *restrict acc, const uint16_t *restrict g, const uint16_t *restrict x,
                                   int64_t rows, int64_t C) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < C; c++)
            acc[c] += (double)ocr_bf16_to_f32(g[r * C + c]) * (double)ocr_bf16_to_f32(x[r * C + c]);
}
CPU_VEC_CLONES(dot_rows_bf16, (double *acc, const uint16_t *g, const uint16_t *x, int64_t rows, int64_t C),
               (acc, g, x, rows, C))

// out (rows, C) = inp · scale per sample, in row tiles (tiles: nthr·tr·C floats for each of
// the two buffers; none when both are bf16, converted in registers).
static void chscale_rows(OcrTensor *out, const OcrTensor *inp, const float *sc, int64_t rows, int64_t HW, int64_t C,
                         CpuScratch *s) {
    const int64_t tr = cpu_tile_rows(C), ntiles = (rows + tr - 1) / tr;
    const int par = rows * C >= EW_PAR_MIN;
    const size_t per = (size_t)(tr * C);
    const int bf16_maps = inp->dtype == OCR_BF16 && out->dtype == OCR_BF16;
    float *bufs = bf16_maps ? NULL : ocr_cpu_scratch_floats(s, (size_t)(par ? omp_get_max_threads() : 1) * 2 * per);
#pragma omp parallel for schedule(static) if (par)
    for (int64_t t = 0; t < ntiles; t++) {
        const int64_t r0 = t * tr, m = r0 + tr <= rows ? tr : rows - r0;
        if (bf16_maps) {
            const size_t off = (size_t)(r0 * C);
            chscale_tile_bf16((uint16_t *)out->data + off, (const uint16_t *)inp->data + off, sc, r0, m, HW, C);
            continue;
        }
        float *bx = bufs + (size_t)omp_get_thread_num() * 2 * per, *by = bx + per;
        const float *x = ocr_cpu_rows_in(inp, C, r0, m, bx);
        float *y = ocr_cpu_rows_dst(out, C, r0, by);
        chscale_tile(y, x, sc, r0, m, HW, C);
        ocr_cpu_rows_out(out, C, r0, m, y);
    }
}

// ---- SE gating -------------------------------------------------------------------------

static void channel_scale_shapes(const OcrTensor *inp, const OcrTensor *scale, int64_t *N, int64_t *HW, int64_t *C) {
    CPU_ASSERT_FLOAT(inp);
    CPU_ASSERT_FLOAT(scale);
    OCR_ASSERT(inp->ndim >= 2, "channel_scale: inp must be (N, ..., C)");
    *N = inp->shape[0];
    *C = ocr_tensor_dim(inp, -1);
    *HW = *N * *C > 0 ? ocr_tensor_numel(inp) / (*N * *C) : 0;
    OCR_ASSERT(ocr_tensor_numel(scale) == *N * *C && ocr_tensor_dim(scale, -1) == *C && scale->shape[0] == *N,
               "channel_scale: scale must be (N, 1, 1, C)");
}

void ocr_cpu_channel_scale_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *scale) {
    CPU_ASSERT_FLOAT(out);
    int64_t N, HW, C;
    channel_scale_shapes(inp, scale, &N, &HW, &C);
    OCR_ASSERT(ocr_tensor_numel(out) == ocr_tensor_numel(inp), "channel_scale: out and inp sizes differ");
    CpuScratch s = {0};
    OcrTensor vx, vy;
    float *whole;
    const OcrTensor *x = ew_in(&s, inp, &vx);
    OcrTensor *y = ew_out(&s, out, &vy, 0, &whole);
    chscale_rows(y, x, ocr_cpu_f32_in(&s, scale), N * HW, HW, C, &s);
    if (whole) ocr_cpu_f32_store(out, whole);
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_channel_scale_backward(OcrTensor *dinp, OcrTensor *dscale, const OcrTensor *dout, const OcrTensor *inp,
                            const OcrTensor *scale) {
    CPU_ASSERT_FLOAT(dout);
    int64_t N, HW, C;
    channel_scale_shapes(inp, scale, &N, &HW, &C);
    OCR_ASSERT(ocr_tensor_numel(dout) == ocr_tensor_numel(inp), "channel_scale: dout and inp sizes differ");
    if (dinp) {
        CPU_ASSERT_FLOAT(dinp);
        OCR_ASSERT(ocr_tensor_numel(dinp) == ocr_tensor_numel(inp), "channel_scale: dinp and inp sizes differ");
    }
    if (dscale) {
        CPU_ASSERT_FLOAT(dscale);
        OCR_ASSERT(ocr_tensor_numel(dscale) == N * C, "channel_scale: dscale must be (N, 1, 1, C)");
    }
    CpuScratch s = {0};
    OcrTensor vdy, vx, vdx;
    const OcrTensor *dy = ew_in(&s, dout, &vdy);
    if (dinp) {
        float *whole;
        OcrTensor *dx = ew_out(&s, dinp, &vdx, 0, &whole);
        chscale_rows(dx, dy, ocr_cpu_f32_in(&s, scale), N * HW, HW, C, &s);
        if (whole) ocr_cpu_f32_store(dinp, whole);
    }
    if (dscale) {
        // dscale[n, c] = Σ over the sample's pixels of dout · inp, accumulated in double, the
        // sample's rows in order a tile at a time (all of them at once when dout and inp are
        // bf16, widened in registers: the same terms in the same order).
        const OcrTensor *x = ew_in(&s, inp, &vx);
        const int64_t tr = cpu_tile_rows(C);
        const int par = N * HW * C >= EW_PAR_MIN;
        const size_t per = (size_t)(tr * C);
        const int bf16_maps = dy->dtype == OCR_BF16 && x->dtype == OCR_BF16;
        float *bufs =
            bf16_maps ? NULL : ocr_cpu_scratch_floats(&s, (size_t)(par ? omp_get_max_threads() : 1) * 2 * per);
        double *acc = ocr_cpu_scratch_bytes(&s, (size_t)(N * C + 1) * sizeof(double));
        float *ds = ocr_cpu_f32_out(&s, dscale, 0);
#pragma omp parallel for schedule(static) if (par)
        for (int64_t n = 0; n < N; n++) {
            double *an = acc + n * C;
            for (int64_t c = 0; c < C; c++) an[c] = 0.0;
            if (bf16_maps) {
                const size_t off = (size_t)(n * HW * C);
                dot_rows_bf16(an, (const uint16_t *)dy->data + off, (const uint16_t *)x->data + off, HW, C);
                for (int64_t c = 0; c < C; c++) ds[n * C + c] = (float)an[c];
                continue;
            }
            float *bg = bufs + (size_t)omp_get_thread_num() * 2 * per, *bx = bg + per;
            for (int64_t p = 0; p < HW; p += tr) {
                const int64_t m = p + tr <= HW ? tr : HW - p;
                dot_rows(an, ocr_cpu_rows_in(dy, C, n * HW + p, m, bg), ocr_cpu_rows_in(x, C, n * HW + p, m, bx), m, C);
            }
            for (int64_t c = 0; c < C; c++) ds[n * C + c] = (float)an[c];
        }
        ocr_cpu_f32_store(dscale, ds);
    }
    ocr_cpu_scratch_free(&s);
}

// ---- add, accumulate, scale, zero ------------------------------------------------------

void ocr_cpu_add_forward(OcrTensor *out, const OcrTensor *a, const OcrTensor *b) {
    CPU_ASSERT_FLOAT(out);
    CPU_ASSERT_FLOAT(a);
    CPU_ASSERT_FLOAT(b);
    const int64_t n = ocr_tensor_numel(out);
    OCR_ASSERT(ocr_tensor_numel(a) == n && ocr_tensor_numel(b) == n, "add: sizes differ");
    CpuScratch s = {0};
    OcrTensor va, vb, vy;
    float *whole;
    const OcrTensor *A = ew_in(&s, a, &va), *B = ew_in(&s, b, &vb);
    OcrTensor *Y = ew_out(&s, out, &vy, 0, &whole);
    // out may be a or b (in place): each tile is read before it is written.
    const int bf16_maps = A->dtype == OCR_BF16 && B->dtype == OCR_BF16 && Y->dtype == OCR_BF16;
#pragma omp parallel for schedule(static) if (n >= EW_PAR_MIN)
    for (int64_t i0 = 0; i0 < n; i0 += EW_TILE) {
        float ba[EW_TILE], bb[EW_TILE], by[EW_TILE];
        const int64_t m = n - i0 < EW_TILE ? n - i0 : EW_TILE;
        if (bf16_maps) {
            add_tile_bf16((uint16_t *)Y->data + i0, (const uint16_t *)A->data + i0, (const uint16_t *)B->data + i0,
                          m);
            continue;
        }
        const float *xa = ocr_cpu_rows_in(A, 1, i0, m, ba), *xb = ocr_cpu_rows_in(B, 1, i0, m, bb);
        float *y = ocr_cpu_rows_dst(Y, 1, i0, by);
        add_tile(y, xa, xb, m);
        ocr_cpu_rows_out(Y, 1, i0, m, y);
    }
    if (whole) ocr_cpu_f32_store(out, whole);
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_add_backward(OcrTensor *da, OcrTensor *db, const OcrTensor *dout) {
    CPU_ASSERT_FLOAT(dout);
    if (da) copy_tensor(da, dout);
    if (db) copy_tensor(db, dout);
}

void ocr_cpu_accumulate(OcrTensor *dst, const OcrTensor *src) {
    CPU_ASSERT_FLOAT(dst);
    CPU_ASSERT_FLOAT(src);
    const int64_t n = ocr_tensor_numel(dst);
    OCR_ASSERT(ocr_tensor_numel(src) == n, "accumulate: sizes differ");
    CpuScratch s = {0};
    OcrTensor vx, vy;
    float *whole;
    const OcrTensor *X = ew_in(&s, src, &vx);
    OcrTensor *Y = ew_out(&s, dst, &vy, 1, &whole);
    const int bf16_maps = X->dtype == OCR_BF16 && Y->dtype == OCR_BF16;
#pragma omp parallel for schedule(static) if (n >= EW_PAR_MIN)
    for (int64_t i0 = 0; i0 < n; i0 += EW_TILE) {
        float bx[EW_TILE], by[EW_TILE];
        const int64_t m = n - i0 < EW_TILE ? n - i0 : EW_TILE;
        if (bf16_maps) {
            uint16_t *y = (uint16_t *)Y->data + i0;
            add_tile_bf16(y, y, (const uint16_t *)X->data + i0, m);
            continue;
        }
        const float *x = ocr_cpu_rows_in(X, 1, i0, m, bx);
        float *y = (float *)ocr_cpu_rows_in(Y, 1, i0, m, by);  // Y's own memory when it is f32
        add_tile(y, y, x, m);
        ocr_cpu_rows_out(Y, 1, i0, m, y);
    }
    if (whole) ocr_cpu_f32_store(dst, whole);
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_scale_forward(OcrTensor *out, const OcrTensor *inp, float alpha) {
    CPU_ASSERT_FLOAT(out);
    CPU_ASSERT_FLOAT(inp);
    const int64_t n = ocr_tensor_numel(out);
    OCR_ASSERT(ocr_tensor_numel(inp) == n, "scale: sizes differ");
    CpuScratch s = {0};
    OcrTensor vx, vy;
    float *whole;
    const OcrTensor *X = ew_in(&s, inp, &vx);
    OcrTensor *Y = ew_out(&s, out, &vy, 0, &whole);
#pragma omp parallel for schedule(static) if (n >= EW_PAR_MIN)
    for (int64_t i0 = 0; i0 < n; i0 += EW_TILE) {
        float bx[EW_TILE], by[EW_TILE];
        const int64_t m = n - i0 < EW_TILE ? n - i0 : EW_TILE;
        const float *x = ocr_cpu_rows_in(X, 1, i0, m, bx);
        float *y = ocr_cpu_rows_dst(Y, 1, i0, by);
        scale_tile(y, x, alpha, m);
        ocr_cpu_rows_out(Y, 1, i0, m, y);
    }
    if (whole) ocr_cpu_f32_store(out, whole);
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_zero_tensor(OcrTensor *t) {
    OCR_ASSERT(t->device.type == OCR_DEVICE_CPU, "zero_tensor: the CPU kernel got a non-CPU tensor");
    // All-zero bits are 0 in every dtype we have (f32, f16, bf16, i32, u8).
    if (t->data) memset(t->data, 0, ocr_tensor_bytes(t));
}

// ---- concat along the last dimension ---------------------------------------------------

// Checks that the parts' leading dimensions match whole's and their last dims sum to it.
static void concat_check(const OcrTensor *whole, const OcrTensor *const *parts, int count, const char *what) {
    CPU_ASSERT_FLOAT(whole);
    OCR_ASSERT(count >= 1, "%s: no inputs", what);
    for (int i = 0; i < count; i++) {
        if (!parts[i]) continue;
        CPU_ASSERT_FLOAT(parts[i]);
        OCR_ASSERT(parts[i]->ndim == whole->ndim, "%s: input %d has %d dims, output %d", what, i, parts[i]->ndim,
                   whole->ndim);
        for (int d = 0; d + 1 < whole->ndim; d++)
            OCR_ASSERT(parts[i]->shape[d] == whole->shape[d], "%s: input %d differs in dim %d", what, i, d);
    }
}

void ocr_cpu_concat_forward(OcrTensor *out, const OcrTensor *const *inputs, int count) {
    concat_check(out, inputs, count, "concat");
    const int64_t Ct = ocr_tensor_dim(out, -1);
    int64_t sum = 0;
    for (int i = 0; i < count; i++) {
        OCR_ASSERT(inputs[i], "concat: input %d is NULL", i);
        sum += ocr_tensor_dim(inputs[i], -1);
    }
    OCR_ASSERT(sum == Ct, "concat: input channels sum to %lld, output has %lld", (long long)sum, (long long)Ct);
    const int64_t rows = Ct > 0 ? ocr_tensor_numel(out) / Ct : 0;
    const size_t os = ocr_dtype_size(out->dtype);
    int64_t off = 0;
    for (int i = 0; i < count; i++) {
        const OcrTensor *t = inputs[i];
        const int64_t Ci = ocr_tensor_dim(t, -1);
        const size_t is = ocr_dtype_size(t->dtype);
#pragma omp parallel for schedule(static) if (rows * Ci >= EW_PAR_MIN)
        for (int64_t r = 0; r < rows; r++)
            convert_elems((char *)out->data + (size_t)(r * Ct + off) * os, out->dtype,
                          (const char *)t->data + (size_t)(r * Ci) * is, t->dtype, Ci);
        off += Ci;
    }
}

void ocr_cpu_concat_backward(OcrTensor *const *dinputs, int count, const OcrTensor *dout) {
    concat_check(dout, (const OcrTensor *const *)dinputs, count, "concat_backward");
    const int64_t Ct = ocr_tensor_dim(dout, -1);
    const int64_t rows = Ct > 0 ? ocr_tensor_numel(dout) / Ct : 0;
    const size_t gs = ocr_dtype_size(dout->dtype);
    // A NULL entry's width is what the others leave of dout's channels, so one NULL entry
    // is skipped anywhere in the list; with two the offsets would be ambiguous.
    int64_t known = 0;
    int nulls = 0;
    for (int i = 0; i < count; i++) {
        if (dinputs[i])
            known += ocr_tensor_dim(dinputs[i], -1);
        else
            nulls++;
    }
    OCR_ASSERT(nulls <= 1, "concat_backward: %d NULL dinputs; at most one (its width is implied)", nulls);
    OCR_ASSERT(nulls ? known <= Ct : known == Ct, "concat_backward: dinputs have %lld channels, dout %lld",
               (long long)known, (long long)Ct);
    int64_t off = 0;
    for (int i = 0; i < count; i++) {
        OcrTensor *t = dinputs[i];
        if (!t) {
            off += Ct - known;
            continue;
        }
        const int64_t Ci = ocr_tensor_dim(t, -1);
        const size_t ds = ocr_dtype_size(t->dtype);
#pragma omp parallel for schedule(static) if (rows * Ci >= EW_PAR_MIN)
        for (int64_t r = 0; r < rows; r++)
            convert_elems((char *)t->data + (size_t)(r * Ci) * ds, t->dtype,
                          (const char *)dout->data + (size_t)(r * Ct + off) * gs, dout->dtype, Ci);
        off += Ci;
    }
}

// ---- permute ---------------------------------------------------------------------------

// out.shape[i] = inp.shape[perm[i]]. Both are padded to 4 dims with leading unit dims.
static void permute_impl(OcrTensor *out, const OcrTensor *inp, const int *perm, const char *what) {
    CPU_ASSERT_FLOAT(out);
    CPU_ASSERT_FLOAT(inp);
    const int nd = inp->ndim;
    OCR_ASSERT(out->ndim == nd && nd >= 1 && nd <= 4, "%s: ndim %d vs %d", what, out->ndim, nd);
    int seen[4] = {0, 0, 0, 0};
    for (int i = 0; i < nd; i++) {
        OCR_ASSERT(perm[i] >= 0 && perm[i] < nd && !seen[perm[i]], "%s: perm is not a permutation of 0..%d", what,
                   nd - 1);
        seen[perm[i]] = 1;
        OCR_ASSERT(out->shape[i] == inp->shape[perm[i]], "%s: out dim %d is %lld, expected %lld", what, i,
                   (long long)out->shape[i], (long long)inp->shape[perm[i]]);
    }
    const int pad = 4 - nd;
    int64_t ishape[4], istride[4], oshape[4], s_in[4];
    for (int i = 0; i < 4; i++) ishape[i] = i < pad ? 1 : inp->shape[i - pad];
    istride[3] = 1;
    for (int i = 2; i >= 0; i--) istride[i] = istride[i + 1] * ishape[i + 1];
    for (int i = 0; i < 4; i++) {
        int p = i < pad ? i : perm[i - pad] + pad;
        oshape[i] = ishape[p];
        s_in[i] = istride[p];  // input stride of output dim i
    }
    const int64_t n = ocr_tensor_numel(out);
    if (n == 0) return;
    const int64_t rows = oshape[0] * oshape[1] * oshape[2], L = oshape[3];

    CpuScratch s = {0};
    const int same = out->dtype == inp->dtype;
    // Mixed dtypes: gather in fp32, then round once.
    const void *src = same ? inp->data : (const void *)ocr_cpu_f32_in(&s, inp);
    void *dst = same ? out->data : (void *)ocr_cpu_f32_out(&s, out, 0);
    const size_t es = same ? ocr_dtype_size(out->dtype) : sizeof(float);
    OCR_ASSERT(src != dst, "%s: out may not alias inp", what);
#pragma omp parallel for schedule(static) if (n >= EW_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t o0 = r / (oshape[1] * oshape[2]), o1 = (r / oshape[2]) % oshape[1], o2 = r % oshape[2];
        const int64_t base = o0 * s_in[0] + o1 * s_in[1] + o2 * s_in[2];
        const int64_t st = s_in[3];
        if (es == 4) {
            const uint32_t *x = (const uint32_t *)src + base;
            uint32_t *y = (uint32_t *)dst + r * L;
            for (int64_t j = 0; j < L; j++) y[j] = x[j * st];
        } else {
            const uint16_t *x = (const uint16_t *)src + base;
            uint16_t *y = (uint16_t *)dst + r * L;
            for (int64_t j = 0; j < L; j++) y[j] = x[j * st];
        }
    }
    if (!same) ocr_cpu_f32_store(out, dst);
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_permute_forward(OcrTensor *out, const OcrTensor *inp, const int *perm) {
    permute_impl(out, inp, perm, "permute");
}

void ocr_cpu_permute_backward(OcrTensor *dinp, const OcrTensor *dout, const int *perm) {
    // dinp = dout permuted by the inverse: dinp.shape[perm[i]] = dout.shape[i].
    const int nd = dout->ndim;
    OCR_ASSERT(nd >= 1 && nd <= 4, "permute_backward: ndim %d", nd);
    int inv[4] = {0, 1, 2, 3};
    for (int i = 0; i < nd; i++) {
        OCR_ASSERT(perm[i] >= 0 && perm[i] < nd, "permute_backward: bad perm");
        inv[perm[i]] = i;
    }
    permute_impl(dinp, dout, inv, "permute_backward");
}

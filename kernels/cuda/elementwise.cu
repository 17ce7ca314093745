// Elementwise and layout ops on the GPU: SE channel gating, add, accumulate, scale, zero,
// concat along channels, permute, plus the copy/broadcast helpers other families use.
//
// Every element is computed in fp32 and rounded once into its output's dtype, as on the CPU.
// Pure data movement (concat, permute, add_backward) copies raw bits when the dtypes agree,
// so NaN payloads survive exactly as in kernels/cpu/elementwise.c.
#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_ops.h"

#define EW_THREADS 256

#define GRID_STRIDE(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

// ---- helpers shared with other families -------------------------------------------------------

static __global__ void copy_2d_kernel(void *dst, int ddt, int64_t dld, const void *src, int sdt, int64_t sld,
                                      int64_t rows, int64_t cols) {
    GRID_STRIDE(i, rows * cols) {
        int64_t r = i / cols, c = i - r * cols;
        copy_elem(dst, ddt, r * dld + c, src, sdt, r * sld + c);
    }
}

void ocr_cuda_copy_2d(const CudaCtx &ctx, void *dst, int ddt, int64_t dld, const void *src, int sdt, int64_t sld,
                      int64_t rows, int64_t cols) {
    if (rows <= 0 || cols <= 0) return;
    if (ddt == sdt && dld == cols && sld == cols) {
        if (dst != src)
            OCR_CUDA_CHECK(cudaMemcpyAsync(dst, src, (size_t)(rows * cols) * ocr_dtype_size((ocr_dtype_t)ddt),
                                           cudaMemcpyDeviceToDevice, ctx.stream));
        return;
    }
    copy_2d_kernel<<<cuda_blocks(rows * cols, EW_THREADS), EW_THREADS, 0, ctx.stream>>>(dst, ddt, dld, src, sdt, sld,
                                                                                       rows, cols);
    OCR_CUDA_LAUNCHED();
}

static __global__ void broadcast_rows_kernel(void *dst, int ddt, const void *vec, int vdt, int64_t rows, int64_t cols) {
    GRID_STRIDE(i, rows * cols) { copy_elem(dst, ddt, i, vec, vdt, i % cols); }
}

void ocr_cuda_broadcast_rows(const CudaCtx &ctx, void *dst, int ddt, const void *vec, int vdt, int64_t rows,
                             int64_t cols) {
    if (rows <= 0 || cols <= 0) return;
    broadcast_rows_kernel<<<cuda_blocks(rows * cols, EW_THREADS), EW_THREADS, 0, ctx.stream>>>(dst, ddt, vec, vdt, rows,
                                                                                              cols);
    OCR_CUDA_LAUNCHED();
}

static __global__ void scale_inplace_kernel(void *x, int dt, int64_t n, float alpha) {
    GRID_STRIDE(i, n) { st(x, dt, i, alpha * ld(x, dt, i)); }
}

void ocr_cuda_scale_inplace(const CudaCtx &ctx, void *x, int dt, int64_t n, float alpha) {
    if (n <= 0) return;
    if (alpha == 0.0f) {  // beta = 0 ignores the old contents, NaN included
        OCR_CUDA_CHECK(cudaMemsetAsync(x, 0, (size_t)n * ocr_dtype_size((ocr_dtype_t)dt), ctx.stream));
        return;
    }
    if (alpha == 1.0f) return;
    scale_inplace_kernel<<<cuda_blocks(n, EW_THREADS), EW_THREADS, 0, ctx.stream>>>(x, dt, n, alpha);
    OCR_CUDA_LAUNCHED();
}

// ---- SE gating -----------------------------------------------------------------------------------

static void channel_scale_shapes(const OcrTensor *inp, const OcrTensor *scale, int64_t *N, int64_t *HW, int64_t *C) {
    CUDA_ASSERT_FLOAT(inp);
    CUDA_ASSERT_FLOAT(scale);
    OCR_ASSERT(inp->ndim >= 2, "channel_scale: inp must be (N, ..., C)");
    *N = inp->shape[0];
    *C = ocr_tensor_dim(inp, -1);
    *HW = *N * *C > 0 ? ocr_tensor_numel(inp) / (*N * *C) : 0;
    OCR_ASSERT(ocr_tensor_numel(scale) == *N * *C && ocr_tensor_dim(scale, -1) == *C && scale->shape[0] == *N,
               "channel_scale: scale must be (N, 1, 1, C)");
}

// y[r, c] = x[r, c] · s[r / HW, c]
static __global__ void channel_scale_kernel(void *y, int ydt, const void *x, int xdt, const void *s, int sdt,
                                            int64_t rows, int64_t HW, int64_t C) {
    GRID_STRIDE(i, rows * C) {
        int64_t r = i / C, c = i - r * C;
        st(y, ydt, i, ld(x, xdt, i) * ld(s, sdt, (r / HW) * C + c));
    }
}

// ds[n, c] = Σ_p dy[n, p, c] · x[n, p, c] in double, p in order (as the CPU does, so the sums
// agree bit for bit: float products are exact in double).
static __global__ void channel_scale_dscale_kernel(void *ds, int dsdt, const void *dy, int dydt, const void *x, int xdt,
                                            int64_t N, int64_t HW, int64_t C) {
    GRID_STRIDE(i, N * C) {
        int64_t n = i / C, c = i - n * C;
        double acc = 0.0;
        for (int64_t p = 0; p < HW; p++) {
            int64_t e = (n * HW + p) * C + c;
            acc += (double)ld(dy, dydt, e) * (double)ld(x, xdt, e);
        }
        st(ds, dsdt, i, (float)acc);
    }
}

extern "C" void ocr_cuda_channel_scale_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *scale) {
    CUDA_ASSERT_FLOAT(out);
    int64_t N, HW, C;
    channel_scale_shapes(inp, scale, &N, &HW, &C);
    OCR_ASSERT(ocr_tensor_numel(out) == ocr_tensor_numel(inp), "channel_scale: out and inp sizes differ");
    CudaCtx ctx = ocr_cuda_enter(out);
    int64_t rows = N * HW;
    if (rows * C == 0) return;
    channel_scale_kernel<<<cuda_blocks(rows * C, EW_THREADS), EW_THREADS, 0, ctx.stream>>>(
        out->data, out->dtype, inp->data, inp->dtype, scale->data, scale->dtype, rows, HW, C);
    OCR_CUDA_LAUNCHED();
}

extern "C" void ocr_cuda_channel_scale_backward(OcrTensor *dinp, OcrTensor *dscale, const OcrTensor *dout,
                                                const OcrTensor *inp, const OcrTensor *scale) {
    CUDA_ASSERT_FLOAT(dout);
    int64_t N, HW, C;
    channel_scale_shapes(inp, scale, &N, &HW, &C);
    OCR_ASSERT(ocr_tensor_numel(dout) == ocr_tensor_numel(inp), "channel_scale: dout and inp sizes differ");
    CudaCtx ctx = ocr_cuda_enter(dout);
    if (dinp) {
        CUDA_ASSERT_FLOAT(dinp);
        OCR_ASSERT(ocr_tensor_numel(dinp) == ocr_tensor_numel(inp), "channel_scale: dinp and inp sizes differ");
        int64_t rows = N * HW;
        if (rows * C > 0) {
            channel_scale_kernel<<<cuda_blocks(rows * C, EW_THREADS), EW_THREADS, 0, ctx.stream>>>(
                dinp->data, dinp->dtype, dout->data, dout->dtype, scale->data, scale->dtype, rows, HW, C);
            OCR_CUDA_LAUNCHED();
        }
    }
    if (dscale) {
        CUDA_ASSERT_FLOAT(dscale);
        OCR_ASSERT(ocr_tensor_numel(dscale) == N * C, "channel_scale: dscale must be (N, 1, 1, C)");
        if (N * C > 0) {
            channel_scale_dscale_kernel<<<cuda_blocks(N * C, EW_THREADS), EW_THREADS, 0, ctx.stream>>>(
                dscale->data, dscale->dtype, dout->data, dout->dtype, inp->data, inp->dtype, N, HW, C);
            OCR_CUDA_LAUNCHED();
        }
    }
}

// ---- add, accumulate, scale, zero ----------------------------------------------------------------

static __global__ void add_kernel(void *y, int ydt, const void *a, int adt, const void *b, int bdt, int64_t n) {
    GRID_STRIDE(i, n) { st(y, ydt, i, ld(a, adt, i) + ld(b, bdt, i)); }
}

static __global__ void scale_kernel(void *y, int ydt, const void *x, int xdt, int64_t n, float alpha) {
    GRID_STRIDE(i, n) { st(y, ydt, i, alpha * ld(x, xdt, i)); }
}

extern "C" void ocr_cuda_add_forward(OcrTensor *out, const OcrTensor *a, const OcrTensor *b) {
    CUDA_ASSERT_FLOAT(out);
    CUDA_ASSERT_FLOAT(a);
    CUDA_ASSERT_FLOAT(b);
    const int64_t n = ocr_tensor_numel(out);
    OCR_ASSERT(ocr_tensor_numel(a) == n && ocr_tensor_numel(b) == n, "add: sizes differ");
    CudaCtx ctx = ocr_cuda_enter(out);
    if (n == 0) return;
    add_kernel<<<cuda_blocks(n, EW_THREADS), EW_THREADS, 0, ctx.stream>>>(out->data, out->dtype, a->data, a->dtype,
                                                                         b->data, b->dtype, n);
    OCR_CUDA_LAUNCHED();
}

static void copy_tensor(const CudaCtx &ctx, OcrTensor *dst, const OcrTensor *src) {
    CUDA_ASSERT_FLOAT(dst);
    const int64_t n = ocr_tensor_numel(src);
    OCR_ASSERT(ocr_tensor_numel(dst) == n, "copy: sizes differ");
    if (dst->data == src->data && dst->dtype == src->dtype) return;
    ocr_cuda_copy_2d(ctx, dst->data, dst->dtype, n, src->data, src->dtype, n, 1, n);
}

extern "C" void ocr_cuda_add_backward(OcrTensor *da, OcrTensor *db, const OcrTensor *dout) {
    CUDA_ASSERT_FLOAT(dout);
    CudaCtx ctx = ocr_cuda_enter(dout);
    if (da) copy_tensor(ctx, da, dout);
    if (db) copy_tensor(ctx, db, dout);
}

extern "C" void ocr_cuda_accumulate(OcrTensor *dst, const OcrTensor *src) {
    CUDA_ASSERT_FLOAT(dst);
    CUDA_ASSERT_FLOAT(src);
    const int64_t n = ocr_tensor_numel(dst);
    OCR_ASSERT(ocr_tensor_numel(src) == n, "accumulate: sizes differ");
    CudaCtx ctx = ocr_cuda_enter(dst);
    if (n == 0) return;
    add_kernel<<<cuda_blocks(n, EW_THREADS), EW_THREADS, 0, ctx.stream>>>(dst->data, dst->dtype, dst->data, dst->dtype,
                                                                         src->data, src->dtype, n);
    OCR_CUDA_LAUNCHED();
}

extern "C" void ocr_cuda_scale_forward(OcrTensor *out, const OcrTensor *inp, float alpha) {
    CUDA_ASSERT_FLOAT(out);
    CUDA_ASSERT_FLOAT(inp);
    const int64_t n = ocr_tensor_numel(out);
    OCR_ASSERT(ocr_tensor_numel(inp) == n, "scale: sizes differ");
    CudaCtx ctx = ocr_cuda_enter(out);
    if (n == 0) return;
    scale_kernel<<<cuda_blocks(n, EW_THREADS), EW_THREADS, 0, ctx.stream>>>(out->data, out->dtype, inp->data,
                                                                           inp->dtype, n, alpha);
    OCR_CUDA_LAUNCHED();
}

extern "C" void ocr_cuda_zero_tensor(OcrTensor *t) {
    CudaCtx ctx = ocr_cuda_enter(t);
    // All-zero bits are 0 in every dtype we have (f32, f16, bf16, i32, u8).
    size_t bytes = ocr_tensor_bytes(t);
    if (t->data && bytes) OCR_CUDA_CHECK(cudaMemsetAsync(t->data, 0, bytes, ctx.stream));
}

// ---- concat along the last dimension ---------------------------------------------------------------

static void concat_check(const OcrTensor *whole, const OcrTensor *const *parts, int count, const char *what) {
    CUDA_ASSERT_FLOAT(whole);
    OCR_ASSERT(count >= 1, "%s: no inputs", what);
    for (int i = 0; i < count; i++) {
        if (!parts[i]) continue;
        CUDA_ASSERT_FLOAT(parts[i]);
        OCR_ASSERT(parts[i]->ndim == whole->ndim, "%s: input %d has %d dims, output %d", what, i, parts[i]->ndim,
                   whole->ndim);
        for (int d = 0; d + 1 < whole->ndim; d++)
            OCR_ASSERT(parts[i]->shape[d] == whole->shape[d], "%s: input %d differs in dim %d", what, i, d);
    }
}

extern "C" void ocr_cuda_concat_forward(OcrTensor *out, const OcrTensor *const *inputs, int count) {
    concat_check(out, inputs, count, "concat");
    const int64_t Ct = ocr_tensor_dim(out, -1);
    int64_t sum = 0;
    for (int i = 0; i < count; i++) {
        OCR_ASSERT(inputs[i], "concat: input %d is NULL", i);
        sum += ocr_tensor_dim(inputs[i], -1);
    }
    OCR_ASSERT(sum == Ct, "concat: input channels sum to %lld, output has %lld", (long long)sum, (long long)Ct);
    CudaCtx ctx = ocr_cuda_enter(out);
    const int64_t rows = Ct > 0 ? ocr_tensor_numel(out) / Ct : 0;
    const size_t os = ocr_dtype_size(out->dtype);
    int64_t off = 0;
    for (int i = 0; i < count; i++) {
        const int64_t Ci = ocr_tensor_dim(inputs[i], -1);
        ocr_cuda_copy_2d(ctx, (char *)out->data + (size_t)off * os, out->dtype, Ct, inputs[i]->data, inputs[i]->dtype,
                         Ci, rows, Ci);
        off += Ci;
    }
}

extern "C" void ocr_cuda_concat_backward(OcrTensor *const *dinputs, int count, const OcrTensor *dout) {
    concat_check(dout, (const OcrTensor *const *)dinputs, count, "concat_backward");
    const int64_t Ct = ocr_tensor_dim(dout, -1);
    const int64_t rows = Ct > 0 ? ocr_tensor_numel(dout) / Ct : 0;
    const size_t gs = ocr_dtype_size(dout->dtype);
    // One NULL entry is allowed anywhere: its width is what the others leave (as on the CPU).
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
    CudaCtx ctx = ocr_cuda_enter(dout);
    int64_t off = 0;
    for (int i = 0; i < count; i++) {
        OcrTensor *t = dinputs[i];
        if (!t) {
            off += Ct - known;
            continue;
        }
        const int64_t Ci = ocr_tensor_dim(t, -1);
        ocr_cuda_copy_2d(ctx, t->data, t->dtype, Ci, (const char *)dout->data + (size_t)off * gs, dout->dtype, Ct, rows,
                         Ci);
        off += Ci;
    }
}

// ---- permute -------------------------------------------------------------------------------------------

struct PermuteGeom {
    int64_t oshape[4];
    int64_t s_in[4];  // input stride of each output dimension
};

static __global__ void permute_kernel(void *y, int ydt, const void *x, int xdt, PermuteGeom g, int64_t n) {
    GRID_STRIDE(i, n) {
        int64_t r = i;
        int64_t o3 = r % g.oshape[3];
        r /= g.oshape[3];
        int64_t o2 = r % g.oshape[2];
        r /= g.oshape[2];
        int64_t o1 = r % g.oshape[1];
        int64_t o0 = r / g.oshape[1];
        int64_t src = o0 * g.s_in[0] + o1 * g.s_in[1] + o2 * g.s_in[2] + o3 * g.s_in[3];
        copy_elem(y, ydt, i, x, xdt, src);
    }
}

static void permute_impl(OcrTensor *out, const OcrTensor *inp, const int *perm, const char *what) {
    CUDA_ASSERT_FLOAT(out);
    CUDA_ASSERT_FLOAT(inp);
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
    int64_t ishape[4], istride[4];
    PermuteGeom g;
    for (int i = 0; i < 4; i++) ishape[i] = i < pad ? 1 : inp->shape[i - pad];
    istride[3] = 1;
    for (int i = 2; i >= 0; i--) istride[i] = istride[i + 1] * ishape[i + 1];
    for (int i = 0; i < 4; i++) {
        int p = i < pad ? i : perm[i - pad] + pad;
        g.oshape[i] = ishape[p];
        g.s_in[i] = istride[p];
    }
    CudaCtx ctx = ocr_cuda_enter(out);
    const int64_t n = ocr_tensor_numel(out);
    if (n == 0) return;
    OCR_ASSERT(out->data != inp->data, "%s: out may not alias inp", what);
    permute_kernel<<<cuda_blocks(n, EW_THREADS), EW_THREADS, 0, ctx.stream>>>(out->data, out->dtype, inp->data,
                                                                             inp->dtype, g, n);
    OCR_CUDA_LAUNCHED();
}

extern "C" void ocr_cuda_permute_forward(OcrTensor *out, const OcrTensor *inp, const int *perm) {
    permute_impl(out, inp, perm, "permute");
}

extern "C" void ocr_cuda_permute_backward(OcrTensor *dinp, const OcrTensor *dout, const int *perm) {
    const int nd = dout->ndim;
    OCR_ASSERT(nd >= 1 && nd <= 4, "permute_backward: ndim %d", nd);
    int inv[4] = {0, 1, 2, 3};
    for (int i = 0; i < nd; i++) {
        OCR_ASSERT(perm[i] >= 0 && perm[i] < nd, "permute_backward: bad perm");
        inv[perm[i]] = i;
    }
    permute_impl(dinp, dout, inv, "permute_backward");
}

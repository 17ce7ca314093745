// Scalar affine (LearnableAffineBlock), its fused affine → activation → affine tail and batch
// broadcast add (positional embedding) on the GPU: the same arithmetic as kernels/cpu/affine.c,
// bit for bit.
//
// - Elementwise results are one fp32 operation each with round-to-nearest intrinsics (no
//   contraction of scale·x + bias into an FMA), rounded once into the output's dtype.
// - The two scalar gradients use the CPU's fixed reduction shape: one block of 256 threads per
//   chunk of 2048 elements, thread t summing elements t + 256·j (j = 0..7) in order in double,
//   a halving tree over the 256 sums in shared memory, the chunk sums added in order by one
//   thread. The scale and bias are read on the device (no host round trip, graph-capturable).
// - The positional-embedding gradient sums the batch in order in double per element.
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_internal.h"
#include "kernels/activation_math.h"

#define AFF_THREADS 256
#define AFF_PER_LANE 8
#define AFF_CHUNK (AFF_THREADS * AFF_PER_LANE)

#define GRID_STRIDE(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

// ---- scalar affine ---------------------------------------------------------------------------

static void assert_scalar(const OcrTensor *t, const char *what) {
    CUDA_ASSERT_FLOAT(t);
    OCR_ASSERT(ocr_tensor_numel(t) == 1, "scalar_affine: %s must have one element", what);
}

static __global__ void scalar_affine_fwd_kernel(void *y, int ydt, const void *x, int xdt, const void *s, int sdt,
                                         const void *b, int bdt, int64_t n) {
    const float sv = ld(s, sdt, 0), bv = ld(b, bdt, 0);
    GRID_STRIDE(i, n) { st(y, ydt, i, __fadd_rn(__fmul_rn(sv, ld(x, xdt, i)), bv)); }
}

extern "C" void ocr_cuda_scalar_affine_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *scale,
                                               const OcrTensor *bias) {
    CUDA_ASSERT_FLOAT(out);
    CUDA_ASSERT_FLOAT(inp);
    assert_scalar(scale, "scale");
    assert_scalar(bias, "bias");
    const int64_t n = ocr_tensor_numel(inp);
    OCR_ASSERT(ocr_tensor_numel(out) == n, "scalar_affine: out and inp sizes differ");
    if (n == 0) return;
    CudaCtx ctx = ocr_cuda_enter(out);
    scalar_affine_fwd_kernel<<<cuda_blocks(n, AFF_THREADS), AFF_THREADS, 0, ctx.stream>>>(
        out->data, out->dtype, inp->data, inp->dtype, scale->data, scale->dtype, bias->data, bias->dtype, n);
    OCR_CUDA_LAUNCHED();
}

// part_s[k] = Σ dy·x and part_b[k] = Σ dy over chunk k (x NULL: no part_s), in the fixed shape.
static __global__ void __launch_bounds__(AFF_THREADS) scalar_affine_chunks_kernel(double *part_s, double *part_b,
                                                                          const void *dy, int dydt, const void *x,
                                                                          int xdt, int64_t n, int64_t chunks) {
    __shared__ double sh_s[AFF_THREADS], sh_b[AFF_THREADS];
    const int t = threadIdx.x;
    for (int64_t k = blockIdx.x; k < chunks; k += gridDim.x) {
        double acc_s = 0.0, acc_b = 0.0;
        const int64_t base = k * AFF_CHUNK;
        for (int j = 0; j < AFF_PER_LANE; j++) {
            const int64_t i = base + t + (int64_t)AFF_THREADS * j;
            if (i < n) {
                const double g = (double)ld(dy, dydt, i);
                if (x) acc_s = __dadd_rn(acc_s, __dmul_rn(g, (double)ld(x, xdt, i)));
                acc_b = __dadd_rn(acc_b, g);
            }
        }
        sh_s[t] = acc_s;
        sh_b[t] = acc_b;
        __syncthreads();
        for (int s = AFF_THREADS / 2; s > 0; s >>= 1) {
            if (t < s) {
                sh_s[t] = __dadd_rn(sh_s[t], sh_s[t + s]);
                sh_b[t] = __dadd_rn(sh_b[t], sh_b[t + s]);
            }
            __syncthreads();
        }
        if (t == 0) {
            if (x) part_s[k] = sh_s[0];
            part_b[k] = sh_b[0];
        }
        __syncthreads();
    }
}

// dscale += Σ part_s, dbias += Σ part_b (chunk order; either output may be NULL).
static __global__ void scalar_affine_finish_kernel(void *ds, int dsdt, void *db, int dbdt, const double *part_s,
                                            const double *part_b, int64_t chunks) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    if (ds) {
        double tot = 0.0;
        for (int64_t k = 0; k < chunks; k++) tot = __dadd_rn(tot, part_s[k]);
        st(ds, dsdt, 0, __fadd_rn(ld(ds, dsdt, 0), (float)tot));
    }
    if (db) {
        double tot = 0.0;
        for (int64_t k = 0; k < chunks; k++) tot = __dadd_rn(tot, part_b[k]);
        st(db, dbdt, 0, __fadd_rn(ld(db, dbdt, 0), (float)tot));
    }
}

static __global__ void scalar_affine_dinp_kernel(void *dx, int dxdt, const void *dy, int dydt, const void *s, int sdt,
                                          int64_t n) {
    const float sv = ld(s, sdt, 0);
    GRID_STRIDE(i, n) { st(dx, dxdt, i, __fmul_rn(sv, ld(dy, dydt, i))); }
}

extern "C" void ocr_cuda_scalar_affine_backward(OcrTensor *dinp, OcrTensor *dscale, OcrTensor *dbias,
                                                const OcrTensor *dout, const OcrTensor *inp, const OcrTensor *scale) {
    CUDA_ASSERT_FLOAT(dout);
    const int64_t n = ocr_tensor_numel(dout);
    CudaCtx ctx = ocr_cuda_enter(dout);
    if (dscale || dbias) {
        if (dscale) {
            assert_scalar(dscale, "dscale");
            CUDA_ASSERT_FLOAT(inp);
            OCR_ASSERT(ocr_tensor_numel(inp) == n, "scalar_affine_backward: inp and dout sizes differ");
        }
        if (dbias) assert_scalar(dbias, "dbias");
        const int64_t chunks = (n + AFF_CHUNK - 1) / AFF_CHUNK;
        double *part = (double *)ocr_cuda_scratch(ctx, (size_t)(2 * (chunks > 0 ? chunks : 1)) * sizeof(double));
        if (chunks > 0) {
            const unsigned grid = (unsigned)(chunks < (1 << 20) ? chunks : (1 << 20));
            scalar_affine_chunks_kernel<<<grid, AFF_THREADS, 0, ctx.stream>>>(
                part, part + chunks, dout->data, dout->dtype, dscale ? inp->data : NULL, dscale ? inp->dtype : 0, n,
                chunks);
            OCR_CUDA_LAUNCHED();
        }
        scalar_affine_finish_kernel<<<1, 1, 0, ctx.stream>>>(
            dscale ? dscale->data : NULL, dscale ? dscale->dtype : 0, dbias ? dbias->data : NULL,
            dbias ? dbias->dtype : 0, part, part + chunks, chunks);
        OCR_CUDA_LAUNCHED();
    }
    if (dinp) {
        CUDA_ASSERT_FLOAT(dinp);
        assert_scalar(scale, "scale");
        OCR_ASSERT(ocr_tensor_numel(dinp) == n, "scalar_affine_backward: dinp and dout sizes differ");
        if (n == 0) return;
        scalar_affine_dinp_kernel<<<cuda_blocks(n, AFF_THREADS), AFF_THREADS, 0, ctx.stream>>>(
            dinp->data, dinp->dtype, dout->data, dout->dtype, scale->data, scale->dtype, n);
        OCR_CUDA_LAUNCHED();
    }
}

// ---- affine → activation → affine, fused ---------------------------------------------------------
// kernels/cpu/affine.c's affine_act_affine: per element the three ops' operations with each
// intermediate rounded into mid, the four scalar sums in scalar_affine's fixed chunk shape.

// v rounded to dt and back (nearest even).
__device__ __forceinline__ float aaa_round(float v, int dt) {
    if (dt == OCR_F16) return f16_to_f32(f32_to_f16(v));
    if (dt == OCR_BF16) return bf16_to_f32(f32_to_bf16(v));
    return v;
}

// The scalars of both affines, read on the device.
struct AaaScalars {
    const void *s1, *b1, *s2, *b2;
    int s1dt, b1dt, s2dt, b2dt;
};

static __global__ void aaa_fwd_kernel(void *y, int ydt, const void *x, int xdt, AaaScalars sc, int act, int64_t n) {
    const float s1 = ld(sc.s1, sc.s1dt, 0), b1 = ld(sc.b1, sc.b1dt, 0);
    const float s2 = ld(sc.s2, sc.s2dt, 0), b2 = ld(sc.b2, sc.b2dt, 0);
    GRID_STRIDE(i, n) {
        const float a = aaa_round(__fadd_rn(__fmul_rn(s1, ld(x, xdt, i)), b1), ydt);
        const float h = aaa_round(act_forward(a, act), ydt);
        st(y, ydt, i, __fadd_rn(__fmul_rn(s2, h), b2));
    }
}

extern "C" void ocr_cuda_affine_act_affine_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *s1,
                                                   const OcrTensor *b1, ocr_activation_t act, const OcrTensor *s2,
                                                   const OcrTensor *b2) {
    CUDA_ASSERT_FLOAT(out);
    CUDA_ASSERT_FLOAT(inp);
    assert_scalar(s1, "scale 1");
    assert_scalar(b1, "bias 1");
    assert_scalar(s2, "scale 2");
    assert_scalar(b2, "bias 2");
    const int64_t n = ocr_tensor_numel(inp);
    OCR_ASSERT(ocr_tensor_numel(out) == n, "affine_act_affine: out and inp sizes differ");
    if (n == 0) return;
    CudaCtx ctx = ocr_cuda_enter(out);
    AaaScalars sc = {s1->data, b1->data, s2->data, b2->data, s1->dtype, b1->dtype, s2->dtype, b2->dtype};
    aaa_fwd_kernel<<<cuda_blocks(n, AFF_THREADS), AFF_THREADS, 0, ctx.stream>>>(out->data, out->dtype, inp->data,
                                                                               inp->dtype, sc, (int)act, n);
    OCR_CUDA_LAUNCHED();
}

// part[q·chunks + k] for q = Σ dy·h, Σ dy, Σ da·x, Σ da over chunk k, and dx = s1·da (dx NULL:
// not written), in the fixed shape of scalar_affine_chunks_kernel.
static __global__ void __launch_bounds__(AFF_THREADS) aaa_bwd_chunks_kernel(double *part, void *dx, int dxdt,
                                                                    const void *dy, int dydt, const void *x, int xdt,
                                                                    AaaScalars sc, int act, int mid, int64_t n,
                                                                    int64_t chunks) {
    __shared__ double sh[4][AFF_THREADS];
    const int t = threadIdx.x;
    const float s1 = ld(sc.s1, sc.s1dt, 0), b1 = ld(sc.b1, sc.b1dt, 0), s2 = ld(sc.s2, sc.s2dt, 0);
    for (int64_t k = blockIdx.x; k < chunks; k += gridDim.x) {
        double acc[4] = {0.0, 0.0, 0.0, 0.0};
        const int64_t base = k * AFF_CHUNK;
        for (int j = 0; j < AFF_PER_LANE; j++) {
            const int64_t i = base + t + (int64_t)AFF_THREADS * j;
            if (i < n) {
                const float g = ld(dy, dydt, i), xv = ld(x, xdt, i);
                const float a = aaa_round(__fadd_rn(__fmul_rn(s1, xv), b1), mid);
                const float h = aaa_round(act_forward(a, act), mid);
                acc[0] = __dadd_rn(acc[0], __dmul_rn((double)g, (double)h));
                acc[1] = __dadd_rn(acc[1], (double)g);
                const float dh = aaa_round(__fmul_rn(s2, g), mid);
                const float da = aaa_round(act_backward(dh, a, act), mid);
                acc[2] = __dadd_rn(acc[2], __dmul_rn((double)da, (double)xv));
                acc[3] = __dadd_rn(acc[3], (double)da);
                if (dx) st(dx, dxdt, i, __fmul_rn(s1, da));
            }
        }
        for (int q = 0; q < 4; q++) sh[q][t] = acc[q];
        __syncthreads();
        for (int s = AFF_THREADS / 2; s > 0; s >>= 1) {
            if (t < s)
                for (int q = 0; q < 4; q++) sh[q][t] = __dadd_rn(sh[q][t], sh[q][t + s]);
            __syncthreads();
        }
        if (t == 0)
            for (int q = 0; q < 4; q++) part[q * chunks + k] = sh[q][0];
        __syncthreads();
    }
}

extern "C" void ocr_cuda_affine_act_affine_backward(OcrTensor *dinp, OcrTensor *ds1, OcrTensor *db1, OcrTensor *ds2,
                                                    OcrTensor *db2, const OcrTensor *dout, const OcrTensor *inp,
                                                    const OcrTensor *s1, const OcrTensor *b1, ocr_activation_t act,
                                                    const OcrTensor *s2, ocr_dtype_t mid) {
    CUDA_ASSERT_FLOAT(dout);
    CUDA_ASSERT_FLOAT(inp);
    assert_scalar(s1, "scale 1");
    assert_scalar(b1, "bias 1");
    assert_scalar(s2, "scale 2");
    OCR_ASSERT(ocr_dtype_is_float(mid), "affine_act_affine_backward: mid must be a float dtype");
    const int64_t n = ocr_tensor_numel(dout);
    OCR_ASSERT(ocr_tensor_numel(inp) == n, "affine_act_affine_backward: inp and dout sizes differ");
    if (dinp) {
        CUDA_ASSERT_FLOAT(dinp);
        OCR_ASSERT(ocr_tensor_numel(dinp) == n, "affine_act_affine_backward: dinp and dout sizes differ");
    }
    OcrTensor *grads[4] = {ds1, db1, ds2, db2};
    for (int q = 0; q < 4; q++)
        if (grads[q]) assert_scalar(grads[q], "a scalar gradient");
    CudaCtx ctx = ocr_cuda_enter(dout);
    const int64_t chunks = (n + AFF_CHUNK - 1) / AFF_CHUNK;
    double *part = (double *)ocr_cuda_scratch(ctx, (size_t)(4 * (chunks > 0 ? chunks : 1)) * sizeof(double));
    AaaScalars sc = {s1->data, b1->data, s2->data, s2->data, s1->dtype, b1->dtype, s2->dtype, s2->dtype};
    if (chunks > 0) {
        const unsigned grid = (unsigned)(chunks < (1 << 20) ? chunks : (1 << 20));
        aaa_bwd_chunks_kernel<<<grid, AFF_THREADS, 0, ctx.stream>>>(
            part, dinp ? dinp->data : NULL, dinp ? dinp->dtype : 0, dout->data, dout->dtype, inp->data, inp->dtype, sc,
            (int)act, (int)mid, n, chunks);
        OCR_CUDA_LAUNCHED();
    }
    scalar_affine_finish_kernel<<<1, 1, 0, ctx.stream>>>(ds2 ? ds2->data : NULL, ds2 ? ds2->dtype : 0,
                                                         db2 ? db2->data : NULL, db2 ? db2->dtype : 0, part,
                                                         part + chunks, chunks);
    OCR_CUDA_LAUNCHED();
    scalar_affine_finish_kernel<<<1, 1, 0, ctx.stream>>>(ds1 ? ds1->data : NULL, ds1 ? ds1->dtype : 0,
                                                         db1 ? db1->data : NULL, db1 ? db1->dtype : 0,
                                                         part + 2 * chunks, part + 3 * chunks, chunks);
    OCR_CUDA_LAUNCHED();
}

// ---- batch broadcast add -----------------------------------------------------------------------

static int64_t broadcast_per(const OcrTensor *inp, const OcrTensor *pos, const char *op) {
    OCR_ASSERT(inp->ndim == pos->ndim && pos->shape[0] == 1, "%s: pos must be (1, ...) with inp's rank", op);
    for (int d = 1; d < inp->ndim; d++)
        OCR_ASSERT(inp->shape[d] == pos->shape[d], "%s: dimension %d differs (%lld vs %lld)", op, d,
                   (long long)inp->shape[d], (long long)pos->shape[d]);
    return ocr_tensor_numel(pos);
}

static __global__ void broadcast_add_kernel(void *y, int ydt, const void *x, int xdt, const void *p, int pdt,
                                            int64_t per, int64_t n) {
    GRID_STRIDE(i, n) { st(y, ydt, i, __fadd_rn(ld(x, xdt, i), ld(p, pdt, i % per))); }
}

extern "C" void ocr_cuda_batch_broadcast_add_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *pos) {
    CUDA_ASSERT_FLOAT(out);
    CUDA_ASSERT_FLOAT(inp);
    CUDA_ASSERT_FLOAT(pos);
    OCR_ASSERT(ocr_tensor_same_shape(out, inp), "batch_broadcast_add: out and inp shapes differ");
    const int64_t per = broadcast_per(inp, pos, "batch_broadcast_add"), n = ocr_tensor_numel(inp);
    if (n == 0) return;
    CudaCtx ctx = ocr_cuda_enter(out);
    broadcast_add_kernel<<<cuda_blocks(n, AFF_THREADS), AFF_THREADS, 0, ctx.stream>>>(
        out->data, out->dtype, inp->data, inp->dtype, pos->data, pos->dtype, per, n);
    OCR_CUDA_LAUNCHED();
}

static __global__ void broadcast_add_dpos_kernel(void *dp, int dpdt, const void *dy, int dydt, int64_t per, int64_t B) {
    GRID_STRIDE(j, per) {
        double acc = 0.0;
        for (int64_t b = 0; b < B; b++) acc = __dadd_rn(acc, (double)ld(dy, dydt, b * per + j));
        st(dp, dpdt, j, __fadd_rn(ld(dp, dpdt, j), (float)acc));
    }
}

extern "C" void ocr_cuda_batch_broadcast_add_backward(OcrTensor *dinp, OcrTensor *dpos, const OcrTensor *dout) {
    CUDA_ASSERT_FLOAT(dout);
    CudaCtx ctx = ocr_cuda_enter(dout);
    const int64_t n = ocr_tensor_numel(dout);
    if (dinp) {
        CUDA_ASSERT_FLOAT(dinp);
        OCR_ASSERT(ocr_tensor_same_shape(dinp, dout), "batch_broadcast_add_backward: dinp and dout shapes differ");
        ocr_cuda_copy_2d(ctx, dinp->data, dinp->dtype, n, dout->data, dout->dtype, n, 1, n);
    }
    if (!dpos) return;
    CUDA_ASSERT_FLOAT(dpos);
    const int64_t per = broadcast_per(dout, dpos, "batch_broadcast_add_backward");
    if (per == 0) return;
    broadcast_add_dpos_kernel<<<cuda_blocks(per, AFF_THREADS), AFF_THREADS, 0, ctx.stream>>>(
        dpos->data, dpos->dtype, dout->data, dout->dtype, per, dout->shape[0]);
    OCR_CUDA_LAUNCHED();
}

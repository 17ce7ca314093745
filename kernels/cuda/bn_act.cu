// Batch norm + activation, fused, on the GPU (the contract of batchnorm2d_act_forward /
// batchnorm2d_act_backward in kernels/ops.h; the CPU twin is kernels/cpu/bn_act.c).
//
// Statistics are deterministic two-level column sums in double: the rows are cut into FIXED
// chunks of BA_ROWS (a function of the shape only), each block sums one chunk for 32 channels
// (each thread a strided subset of the rows, then a fixed order over the threads), and a
// per-channel kernel adds the chunk sums in chunk order. As on the CPU the sums are shifted
// by the first row, so the one-pass variance stays accurate when |mean| >> std, and the
// per-channel arithmetic after the sums is kernels/cpu/batchnorm.c's, in double.
//
// The forward writes act(value) with value = (x − mean)·a + b rounded to out's dtype (and a to
// save_scale); the backward rebuilds value per element from save_mean, save_scale and beta,
// forms g = dout·act'(value) rounded to mid, and runs batch norm's backward on g (one sum pass,
// one elementwise pass that forms g again) without storing g. The rebuild form writes the
// forward's output act(value) from the elementwise pass's values too.
//
// Synchronised BN (sync != NULL): the world's sums go through sync->sum on device buffers in
// the op's stream (kernels/ops.h): the forward's (count, count·mean) and then the squared
// deviations about the world mean, the backward's (count, Σ g, Σ g·(x − mean)) for dx's
// coefficients, while dgamma/dbeta keep this rank's sums; the arithmetic is kernels/cpu/bn_act.c's.
//
// The activation formulas are kernels/activation_math.h's, shared with the plain activation
// kernels and with the CPU.
#include <math.h>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_internal.h"
#include "kernels/activation_math.h"

#define BA_TX 32
#define BA_TY 8
#define BA_ROWS 256
#define BA_THREADS 256

// v rounded to dt and back (nearest even).
__device__ __forceinline__ float ba_round(float v, int dt) {
    if (dt == OCR_F16) return f16_to_f32(f32_to_f16(v));
    if (dt == OCR_BF16) return bf16_to_f32(f32_to_bf16(v));
    return v;
}

// ---- shared pieces -------------------------------------------------------------------------------

static int64_t ba_chunks(int64_t M) { return (M + BA_ROWS - 1) / BA_ROWS; }

// coef layout (floats): mf (C) | a (C) | b (C).
struct BaIn {
    const void *x, *dy;
    int xdt, dydt;
    const float *coef;       // value = (x − coef[c])·coef[C + c] + coef[2C + c]
    const float *save_mean;  // backward: the centre of Σ g·(x − mean)
    int act, mid;
};

// value of element e (channel c), rounded to mid.
__device__ __forceinline__ float ba_value(const BaIn &in, int64_t e, int64_t c, int64_t C) {
    const float v = (ld(in.x, in.xdt, e) - in.coef[c]) * in.coef[C + c] + in.coef[2 * C + c];
    return ba_round(v, in.mid);
}

// g of element e: dout · act'(value) rounded to mid (dout itself without an activation).
__device__ __forceinline__ float ba_grad(const BaIn &in, int64_t e, int64_t c, int64_t C) {
    const float dy = ld(in.dy, in.dydt, e);
    if (in.act == OCR_ACT_NONE) return dy;
    return ba_round(act_backward(dy, ba_value(in, e, c, C), in.act), in.mid);
}

// part[k][chunk][c], k < 2, in double:
//   STATS = 1: Σ (x − x[0, c]), Σ (x − x[0, c])²
//   STATS = 0: Σ g,              Σ g·(x − save_mean[c])
template <int STATS>
static __global__ void __launch_bounds__(BA_TX *BA_TY) ba_partial_kernel(double *part, BaIn in, int64_t M, int64_t C) {
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t c = (int64_t)blockIdx.y * BA_TX + tx;
    const int64_t chunk = blockIdx.x;
    const int64_t r0 = chunk * BA_ROWS, r1 = r0 + BA_ROWS < M ? r0 + BA_ROWS : M;
    double s1 = 0.0, s2 = 0.0;
    if (c < C) {
        const double centre = STATS ? (double)ld(in.x, in.xdt, c) : (double)in.save_mean[c];
        for (int64_t r = r0 + ty; r < r1; r += BA_TY) {
            const int64_t e = r * C + c;
            const double d = (double)ld(in.x, in.xdt, e) - centre;
            if (STATS) {
                s1 += d;
                s2 += d * d;
            } else {
                const double g = ba_grad(in, e, c, C);
                s1 += g;
                s2 += g * d;
            }
        }
    }
    __shared__ double sh[2][BA_TY][BA_TX + 1];
    sh[0][ty][tx] = s1;
    sh[1][ty][tx] = s2;
    __syncthreads();
    if (ty == 0 && c < C) {
        double t1 = 0.0, t2 = 0.0;
        for (int y = 0; y < BA_TY; y++) {
            t1 += sh[0][y][tx];
            t2 += sh[1][y][tx];
        }
        part[chunk * C + c] = t1;
        part[((int64_t)gridDim.x + chunk) * C + c] = t2;
    }
}

template <int STATS>
static void ba_partial(const CudaCtx &ctx, double *part, const BaIn &in, int64_t M, int64_t C) {
    const int64_t nch = ba_chunks(M);
    if (nch == 0) return;
    OCR_ASSERT(nch <= 0x7fffffff && (C + BA_TX - 1) / BA_TX <= 65535, "batchnorm_act: too large (%lld x %lld)",
               (long long)M, (long long)C);
    dim3 grid((unsigned)nch, (unsigned)((C + BA_TX - 1) / BA_TX));
    ba_partial_kernel<STATS><<<grid, dim3(BA_TX, BA_TY), 0, ctx.stream>>>(part, in, M, C);
    OCR_CUDA_LAUNCHED();
}

__device__ __forceinline__ double ba_total(const double *part, int64_t nch, int64_t C, int k, int64_t c) {
    const double *p = part + (int64_t)k * nch * C + c;
    double t = 0.0;
    for (int64_t i = 0; i < nch; i++) t += p[i * C];
    return t;
}

#define BA_PER_CHANNEL(c, C) \
    for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < (C); c += (int64_t)gridDim.x * blockDim.x)

struct BaVecs {
    void *save_mean, *save_rstd, *save_scale, *rmean, *rvar;
    const void *gamma, *beta;
    int sm_dt, sr_dt, sa_dt, rm_dt, rv_dt, g_dt, b_dt;
    int update;  // training forward: update the running statistics
};

// The normalisation coefficients (mf, a, b), save_* and (forward, training) the running update.
// world (synchronised BN, else NULL): count | Σ squared deviations (C) | world mean (C).
static __global__ void ba_coef_kernel(float *coef, const double *part, int64_t nch, const void *x, int xdt, int64_t C,
                               int64_t M, BaVecs v, float momentum, float eps, int training, const double *world) {
    BA_PER_CHANNEL(c, C) {
        double mean, var;
        if (training && world) {
            mean = world[1 + C + c];
            var = world[1 + c] > 0.0 ? world[1 + c] / world[0] : 0.0;
        } else if (training) {
            const double m1 = ba_total(part, nch, C, 0, c) / (double)M;
            const double t = ba_total(part, nch, C, 1, c) / (double)M - m1 * m1;
            mean = (double)ld(x, xdt, c) + m1;
            var = t > 0.0 ? t : 0.0;
        } else {
            mean = ld(v.rmean, v.rm_dt, c);
            var = ld(v.rvar, v.rv_dt, c);
        }
        const double r = 1.0 / sqrt(var + (double)eps);
        const float mf = (float)mean, a = (float)((v.gamma ? (double)ld(v.gamma, v.g_dt, c) : 1.0) * r);
        coef[c] = mf;
        coef[C + c] = a;
        coef[2 * C + c] = v.beta ? ld(v.beta, v.b_dt, c) : 0.0f;
        if (v.save_mean) st(v.save_mean, v.sm_dt, c, mf);
        if (v.save_rstd) st(v.save_rstd, v.sr_dt, c, (float)r);
        if (v.save_scale) st(v.save_scale, v.sa_dt, c, a);
        if (v.update && v.rmean)
            st(v.rmean, v.rm_dt, c, (float)(momentum * (double)ld(v.rmean, v.rm_dt, c) + (1.0 - momentum) * mean));
        if (v.update && v.rvar)
            st(v.rvar, v.rv_dt, c, (float)(momentum * (double)ld(v.rvar, v.rv_dt, c) + (1.0 - momentum) * var));
    }
}

static void ba_vec_check(const OcrTensor *t, int64_t n, const char *what) {
    CUDA_ASSERT_FLOAT(t);
    OCR_ASSERT(ocr_tensor_numel(t) == n, "batchnorm_act: %s has %lld elements, expected %lld", what,
               (long long)ocr_tensor_numel(t), (long long)n);
}

// This rank's mean and variance from the chunk sums (ba_coef_kernel's arithmetic): world[0] =
// M, world[1 + c] = M·mean, world[1 + C + c] = mean, world[1 + 2C + c] = var.
static __global__ void ba_local_moments_kernel(double *world, const double *part, int64_t nch, const void *x, int xdt,
                                        int64_t C, int64_t M) {
    if (blockIdx.x == 0 && threadIdx.x == 0) world[0] = (double)M;
    BA_PER_CHANNEL(c, C) {
        const double m1 = ba_total(part, nch, C, 0, c) / (double)M;
        const double t = ba_total(part, nch, C, 1, c) / (double)M - m1 * m1;
        const double mean = (double)ld(x, xdt, c) + m1;
        world[1 + c] = (double)M * mean;
        world[1 + C + c] = mean;
        world[1 + 2 * C + c] = t > 0.0 ? t : 0.0;
    }
}

// After the first sum: the world mean mu into world[1 + C + c], and this rank's share of the
// squared deviations about it, M·var + M·(mean − mu)², into world[1 + c] (summed next).
static __global__ void ba_world_spread_kernel(double *world, int64_t C, int64_t M) {
    BA_PER_CHANNEL(c, C) {
        const double mu = world[1 + c] / world[0], d = world[1 + C + c] - mu;
        world[1 + c] = (double)M * world[1 + 2 * C + c] + (double)M * d * d;
        world[1 + C + c] = mu;
    }
}

static void ba_world_sum(const OcrBnSync *sync, double *v, int64_t n, const char *what) {
    OCR_ASSERT(sync->sum(sync->user, v, n) == 0, "batchnorm: summing %s over the ranks failed: %s", what,
               ocr_last_error());
}

// Computes coef (3·C floats) from the batch (training) or the running statistics; part is
// 2·nch·C doubles of scratch (training only), world 1 + 3·C doubles (synchronised BN only).
static void ba_coefficients(const CudaCtx &ctx, float *coef, double *part, double *world, const OcrTensor *inp,
                            int64_t M, int64_t C, const BaVecs &v, float momentum, float eps, int training,
                            const OcrBnSync *sync) {
    const int synced = training && sync;
    if (training) {
        BaIn in = {inp->data, NULL, inp->dtype, OCR_F32, NULL, NULL, OCR_ACT_NONE, OCR_F32};
        ba_partial<1>(ctx, part, in, M, C);
    }
    if (synced) {
        ba_local_moments_kernel<<<cuda_blocks(C, BA_THREADS), BA_THREADS, 0, ctx.stream>>>(
            world, part, ba_chunks(M), inp->data, inp->dtype, C, M);
        OCR_CUDA_LAUNCHED();
        ba_world_sum(sync, world, C + 1, "the batch statistics' counts and means");
        ba_world_spread_kernel<<<cuda_blocks(C, BA_THREADS), BA_THREADS, 0, ctx.stream>>>(world, C, M);
        OCR_CUDA_LAUNCHED();
        ba_world_sum(sync, world + 1, C, "the batch statistics' squared deviations");
    }
    ba_coef_kernel<<<cuda_blocks(C, BA_THREADS), BA_THREADS, 0, ctx.stream>>>(
        coef, part, ba_chunks(M), inp->data, inp->dtype, C, M, v, momentum, eps, training, synced ? world : NULL);
    OCR_CUDA_LAUNCHED();
}

static BaVecs ba_vecs(OcrTensor *save_mean, OcrTensor *save_rstd, OcrTensor *save_scale,
                      const OcrTensor *running_mean, const OcrTensor *running_var, const OcrTensor *gamma,
                      const OcrTensor *beta, int update) {
    BaVecs v;
    v.save_scale = opt_data(save_scale);
    v.sa_dt = opt_dtype(save_scale);
    v.save_mean = opt_data(save_mean);
    v.sm_dt = opt_dtype(save_mean);
    v.save_rstd = opt_data(save_rstd);
    v.sr_dt = opt_dtype(save_rstd);
    v.rmean = opt_data(running_mean);
    v.rm_dt = opt_dtype(running_mean);
    v.rvar = opt_data(running_var);
    v.rv_dt = opt_dtype(running_var);
    v.gamma = opt_data(gamma);
    v.g_dt = opt_dtype(gamma);
    v.beta = opt_data(beta);
    v.b_dt = opt_dtype(beta);
    v.update = update;
    return v;
}

// ---- forward ---------------------------------------------------------------------------------------

// accumulate: y += act(value) rounded to y's dtype (batchnorm2d_forward_accumulate), else y = act(value).
static __global__ void ba_forward_kernel(void *y, int ydt, BaIn in, int64_t n, int64_t C, int accumulate) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float v = act_forward(ba_value(in, i, i % C, C), in.act);
        st(y, ydt, i, accumulate ? __fadd_rn(ld(y, ydt, i), ba_round(v, ydt)) : v);
    }
}

// The checks shared by the forward and the apply op; returns C.
static int64_t ba_check_io(const OcrTensor *out, const OcrTensor *inp, ocr_activation_t act, const char *op) {
    CUDA_ASSERT_FLOAT(out);
    CUDA_ASSERT_FLOAT(inp);
    OCR_ASSERT(ocr_tensor_same_shape(out, inp), "%s: out and inp shapes differ", op);
    OCR_ASSERT((unsigned)act < OCR_ACT_COUNT, "unknown activation %d", (int)act);
    const int64_t C = ocr_tensor_dim(inp, -1);
    OCR_ASSERT(C > 0, "%s: zero channels", op);
    return C;
}

static void ba_forward(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd, OcrTensor *save_scale,
                       OcrTensor *running_mean, OcrTensor *running_var, const OcrTensor *inp, const OcrTensor *gamma,
                       const OcrTensor *beta, ocr_activation_t act, float momentum, float eps, int training,
                       const OcrBnSync *sync, int accumulate) {
    const int64_t C = ba_check_io(out, inp, act, "batchnorm_act"), M = ocr_tensor_numel(inp) / C;
    if (gamma) ba_vec_check(gamma, C, "gamma");
    if (beta) ba_vec_check(beta, C, "beta");
    if (save_mean) ba_vec_check(save_mean, C, "save_mean");
    if (save_rstd) ba_vec_check(save_rstd, C, "save_rstd");
    if (save_scale) ba_vec_check(save_scale, C, "save_scale");
    if (running_mean) ba_vec_check(running_mean, C, "running_mean");
    if (running_var) ba_vec_check(running_var, C, "running_var");
    if (training)
        OCR_ASSERT(M > 0, "batchnorm_act: training on an empty batch");
    else
        OCR_ASSERT(running_mean && running_var, "batchnorm_act: inference needs the running statistics");
    CudaCtx ctx = ocr_cuda_enter(out);

    const size_t part_bytes = cuda_align((training ? (size_t)(2 * ba_chunks(M) * C) : 0) * sizeof(double));
    const size_t world_bytes = cuda_align((training && sync ? (size_t)(1 + 3 * C) : 0) * sizeof(double));
    char *scratch = (char *)ocr_cuda_scratch(ctx, part_bytes + world_bytes + 3 * (size_t)C * sizeof(float));
    double *part = (double *)scratch;
    double *world = (double *)(scratch + part_bytes);
    float *coef = (float *)(scratch + part_bytes + world_bytes);
    ba_coefficients(ctx, coef, part, world, inp, M, C,
                    ba_vecs(save_mean, save_rstd, save_scale, running_mean, running_var, gamma, beta, training),
                    momentum, eps, training, sync);
    const int64_t n = M * C;
    if (n > 0) {
        BaIn in = {inp->data, NULL, inp->dtype, OCR_F32, coef, NULL, (int)act, (int)out->dtype};
        ba_forward_kernel<<<cuda_blocks(n, BA_THREADS), BA_THREADS, 0, ctx.stream>>>(out->data, out->dtype, in, n, C,
                                                                                     accumulate);
        OCR_CUDA_LAUNCHED();
    }
}

extern "C" void ocr_cuda_batchnorm2d_act_forward(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd,
                                                 OcrTensor *save_scale, OcrTensor *running_mean, OcrTensor *running_var,
                                                 const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta,
                                                 ocr_activation_t act, float momentum, float eps, int training,
                                                 const OcrBnSync *sync) {
    ba_forward(out, save_mean, save_rstd, save_scale, running_mean, running_var, inp, gamma, beta, act, momentum, eps,
               training, sync, 0);
}

extern "C" void ocr_cuda_batchnorm2d_forward_accumulate(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd,
                                                        OcrTensor *running_mean, OcrTensor *running_var,
                                                        const OcrTensor *inp, const OcrTensor *gamma,
                                                        const OcrTensor *beta, float momentum, float eps,
                                                        int training) {
    ba_forward(out, save_mean, save_rstd, NULL, running_mean, running_var, inp, gamma, beta, OCR_ACT_NONE, momentum,
               eps, training, NULL, 1);
}

// ---- backward ---------------------------------------------------------------------------------------

struct BaGrads {
    void *dgamma, *dbeta;
    const void *gamma, *save_rstd;
    int dg_dt, db_dt, g_dt, sr_dt;
};

// Synchronised BN: world = (M, Σ g (C), Σ g·(x − mean) (C)) of this rank, summed next.
static __global__ void ba_backward_totals_kernel(double *world, const double *part, int64_t nch, int64_t C, int64_t M) {
    if (blockIdx.x == 0 && threadIdx.x == 0) world[0] = (double)M;
    BA_PER_CHANNEL(c, C) {
        world[1 + c] = ba_total(part, nch, C, 0, c);
        world[1 + C + c] = ba_total(part, nch, C, 1, c);
    }
}

// gcoef = (a, b, k) with dx = a·g + b·(x − mean) + k (kernels/cpu/batchnorm.c's); dgamma and
// dbeta accumulate this rank's sums. world (synchronised BN, else NULL): the world's count and
// sums, which the coefficients take instead.
static __global__ void ba_backward_coef_kernel(float *gcoef, const double *part, int64_t nch, int64_t C, int64_t M,
                                               BaGrads g, int have_sums, int training, const double *world) {
    BA_PER_CHANNEL(c, C) {
        double sdy = have_sums ? ba_total(part, nch, C, 0, c) : 0.0;
        double sdx = have_sums ? ba_total(part, nch, C, 1, c) : 0.0;
        const double r = ld(g.save_rstd, g.sr_dt, c);
        if (g.dbeta) st(g.dbeta, g.db_dt, c, (float)((double)ld(g.dbeta, g.db_dt, c) + sdy));
        if (g.dgamma) st(g.dgamma, g.dg_dt, c, (float)((double)ld(g.dgamma, g.dg_dt, c) + sdx * r));
        const double a = (g.gamma ? (double)ld(g.gamma, g.g_dt, c) : 1.0) * r;
        gcoef[c] = (float)a;
        if (world) {
            sdy = world[1 + c];
            sdx = world[1 + C + c];
            M = (int64_t)world[0];
        }
        if (training && M > 0) {
            gcoef[C + c] = (float)(-a * r * r * sdx / (double)M);
            gcoef[2 * C + c] = (float)(-a * sdy / (double)M);
        } else {
            gcoef[C + c] = 0.0f;
            gcoef[2 * C + c] = 0.0f;
        }
    }
}

// y (NULL: none; ydt == in.mid) receives act(value), ba_forward_kernel's output, from the value
// the gradient is formed from. dx may be dy's memory: dy is read first.
static __global__ void ba_backward_dx_kernel(void *dx, int dxdt, void *y, int ydt, BaIn in, const float *gcoef,
                                             int64_t n, int64_t C) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = i % C;
        float g;
        if (y) {
            const float v = ba_value(in, i, c, C), dy = ld(in.dy, in.dydt, i);
            st(y, ydt, i, act_forward(v, in.act));
            g = in.act == OCR_ACT_NONE ? dy : ba_round(act_backward(dy, v, in.act), in.mid);
        } else {
            g = ba_grad(in, i, c, C);
        }
        st(dx, dxdt, i, gcoef[c] * g + gcoef[C + c] * (ld(in.x, in.xdt, i) - in.save_mean[c]) + gcoef[2 * C + c]);
    }
}

// coef = (save_mean, save_scale, beta): the forward's value coefficients.
static __global__ void ba_value_coef_kernel(float *coef, const void *sm, int smdt, const void *sa, int sadt,
                                            const void *beta, int bdt, int64_t C) {
    BA_PER_CHANNEL(c, C) {
        coef[c] = ld(sm, smdt, c);
        coef[C + c] = sa ? ld(sa, sadt, c) : 0.0f;
        coef[2 * C + c] = beta ? ld(beta, bdt, c) : 0.0f;
    }
}

// The backward of both entry points below; out (NULL: none) receives act(value), the forward's
// output (the apply op's bits; mid is out's dtype), from the dx pass's values.
static void ba_backward(OcrTensor *out, OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                        const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta,
                        const OcrTensor *save_mean, const OcrTensor *save_rstd, const OcrTensor *save_scale,
                        ocr_activation_t act, ocr_dtype_t mid, int training, const OcrBnSync *sync) {
    CUDA_ASSERT_FLOAT(dout);
    CUDA_ASSERT_FLOAT(inp);
    OCR_ASSERT(ocr_tensor_same_shape(dout, inp), "batchnorm_act: dout and inp shapes differ");
    OCR_ASSERT((unsigned)act < OCR_ACT_COUNT, "unknown activation %d", (int)act);
    OCR_ASSERT(ocr_dtype_is_float(mid), "batchnorm_act: mid must be a float dtype");
    if (dinp) {
        CUDA_ASSERT_FLOAT(dinp);
        OCR_ASSERT(ocr_tensor_same_shape(dinp, inp), "batchnorm_act: dinp and inp shapes differ");
    }
    const int64_t C = ocr_tensor_dim(inp, -1);
    OCR_ASSERT(C > 0, "batchnorm_act: zero channels");
    const int64_t M = ocr_tensor_numel(inp) / C;
    if (gamma) ba_vec_check(gamma, C, "gamma");
    if (beta) ba_vec_check(beta, C, "beta");
    if (dgamma) ba_vec_check(dgamma, C, "dgamma");
    if (dbeta) ba_vec_check(dbeta, C, "dbeta");
    ba_vec_check(save_mean, C, "save_mean");
    ba_vec_check(save_rstd, C, "save_rstd");
    if (act != OCR_ACT_NONE) {
        OCR_ASSERT(save_scale, "batchnorm_act: the backward of an activation needs save_scale");
        ba_vec_check(save_scale, C, "save_scale");
    }
    CudaCtx ctx = ocr_cuda_enter(dout);

    const int need_sums = (dgamma || dbeta || (training && dinp)) && M > 0;
    const size_t part_doubles = need_sums ? (size_t)(2 * ba_chunks(M) * C) : 0;
    const size_t part_bytes = cuda_align(part_doubles * sizeof(double));
    // Synchronised BN sums the world's (count, Σ g, Σ g·(x − mean)) when dx is wanted (the same
    // condition on every rank: the network decides it).
    const int synced = sync && training && dinp;
    const size_t world_bytes = cuda_align((synced ? (size_t)(1 + 2 * C) : 0) * sizeof(double));
    char *scratch = (char *)ocr_cuda_scratch(ctx, part_bytes + world_bytes + 6 * (size_t)C * sizeof(float));
    double *part = (double *)scratch;
    double *world = (double *)(scratch + part_bytes);
    float *coef = (float *)(scratch + part_bytes + world_bytes), *gcoef = coef + 3 * C;
    ba_value_coef_kernel<<<cuda_blocks(C, BA_THREADS), BA_THREADS, 0, ctx.stream>>>(
        coef, save_mean->data, save_mean->dtype, save_scale ? save_scale->data : NULL,
        save_scale ? save_scale->dtype : OCR_F32, beta ? beta->data : NULL, beta ? beta->dtype : OCR_F32, C);
    OCR_CUDA_LAUNCHED();
    BaIn in = {inp->data, dout->data, inp->dtype, dout->dtype, coef, coef, (int)act, (int)mid};
    if (need_sums) ba_partial<0>(ctx, part, in, M, C);
    BaGrads g;
    g.dgamma = dgamma ? dgamma->data : NULL;
    g.dg_dt = dgamma ? dgamma->dtype : OCR_F32;
    g.dbeta = dbeta ? dbeta->data : NULL;
    g.db_dt = dbeta ? dbeta->dtype : OCR_F32;
    g.gamma = gamma ? gamma->data : NULL;
    g.g_dt = gamma ? gamma->dtype : OCR_F32;
    g.save_rstd = save_rstd->data;
    g.sr_dt = save_rstd->dtype;
    if (synced) {
        if (M > 0) {
            ba_backward_totals_kernel<<<cuda_blocks(C, BA_THREADS), BA_THREADS, 0, ctx.stream>>>(world, part,
                                                                                                ba_chunks(M), C, M);
            OCR_CUDA_LAUNCHED();
        } else {
            OCR_CUDA_CHECK(cudaMemsetAsync(world, 0, (size_t)(1 + 2 * C) * sizeof(double), ctx.stream));
        }
        ba_world_sum(sync, world, 1 + 2 * C, "the gradient sums");
    }
    ba_backward_coef_kernel<<<cuda_blocks(C, BA_THREADS), BA_THREADS, 0, ctx.stream>>>(
        gcoef, part, ba_chunks(M), C, M, g, need_sums, training, synced ? world : NULL);
    OCR_CUDA_LAUNCHED();
    const int64_t n = M * C;
    if (dinp && n > 0) {
        ba_backward_dx_kernel<<<cuda_blocks(n, BA_THREADS), BA_THREADS, 0, ctx.stream>>>(
            dinp->data, dinp->dtype, out ? out->data : NULL, out ? out->dtype : OCR_F32, in, gcoef, n, C);
        OCR_CUDA_LAUNCHED();
    } else if (out && n > 0) {
        // No dx pass to form it in: the forward's output pass alone.
        ba_forward_kernel<<<cuda_blocks(n, BA_THREADS), BA_THREADS, 0, ctx.stream>>>(out->data, out->dtype, in, n, C,
                                                                                     0);
        OCR_CUDA_LAUNCHED();
    }
}

extern "C" void ocr_cuda_batchnorm2d_act_backward(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta,
                                                  const OcrTensor *dout, const OcrTensor *inp, const OcrTensor *gamma,
                                                  const OcrTensor *beta, const OcrTensor *save_mean,
                                                  const OcrTensor *save_rstd, const OcrTensor *save_scale,
                                                  ocr_activation_t act, ocr_dtype_t mid, int training,
                                                  const OcrBnSync *sync) {
    ba_backward(NULL, dinp, dgamma, dbeta, dout, inp, gamma, beta, save_mean, save_rstd, save_scale, act, mid,
                training, sync);
}

extern "C" void ocr_cuda_batchnorm2d_act_backward_rebuild(OcrTensor *out, OcrTensor *dinp, OcrTensor *dgamma,
                                                          OcrTensor *dbeta, const OcrTensor *dout,
                                                          const OcrTensor *inp, const OcrTensor *gamma,
                                                          const OcrTensor *beta, const OcrTensor *save_mean,
                                                          const OcrTensor *save_rstd, const OcrTensor *save_scale,
                                                          ocr_activation_t act, int training, const OcrBnSync *sync) {
    OCR_ASSERT(out, "batchnorm_act_backward_rebuild: no output to rebuild");
    CUDA_ASSERT_FLOAT(out);
    OCR_ASSERT(ocr_tensor_same_shape(out, inp), "batchnorm_act: out and inp shapes differ");
    OCR_ASSERT(save_scale, "batchnorm_act: the rebuilt output needs save_scale");
    ba_backward(out, dinp, dgamma, dbeta, dout, inp, gamma, beta, save_mean, save_rstd, save_scale, act, out->dtype,
                training, sync);
}

// ---- apply: the forward's output pass alone -----------------------------------------------------------

// act(value) from the saved coefficients (save_mean, save_scale, beta): ba_forward_kernel with
// the coefficients ba_coef_kernel stored, so the output is the forward's, bit for bit.
extern "C" void ocr_cuda_batchnorm2d_act_apply(OcrTensor *out, const OcrTensor *inp, const OcrTensor *save_mean,
                                               const OcrTensor *save_scale, const OcrTensor *beta,
                                               ocr_activation_t act) {
    const int64_t C = ba_check_io(out, inp, act, "batchnorm_act_apply"), n = ocr_tensor_numel(inp);
    ba_vec_check(save_mean, C, "save_mean");
    ba_vec_check(save_scale, C, "save_scale");
    if (beta) ba_vec_check(beta, C, "beta");
    OCR_ASSERT(save_mean->dtype == OCR_F32 && save_scale->dtype == OCR_F32,
               "batchnorm_act_apply: save_mean and save_scale must be f32");
    CudaCtx ctx = ocr_cuda_enter(out);
    float *coef = (float *)ocr_cuda_scratch(ctx, 3 * (size_t)C * sizeof(float));
    ba_value_coef_kernel<<<cuda_blocks(C, BA_THREADS), BA_THREADS, 0, ctx.stream>>>(
        coef, save_mean->data, save_mean->dtype, save_scale->data, save_scale->dtype, beta ? beta->data : NULL,
        beta ? beta->dtype : OCR_F32, C);
    OCR_CUDA_LAUNCHED();
    if (n > 0) {
        BaIn in = {inp->data, NULL, inp->dtype, OCR_F32, coef, NULL, (int)act, (int)out->dtype};
        ba_forward_kernel<<<cuda_blocks(n, BA_THREADS), BA_THREADS, 0, ctx.stream>>>(out->data, out->dtype, in, n, C,
                                                                                     0);
        OCR_CUDA_LAUNCHED();
    }
}

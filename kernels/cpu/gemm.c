// GEMM, linear and batched matmul on the CPU.
//
// f16/bf16 operands run on the CPU's BF16/FP16 hardware through oneDNN where it exists
// (kernels/cpu/isa.h): the operands are read as they are, accumulated in fp32 and rounded
// once into the output's dtype, which is what a tensor-core GEMM with an fp32 accumulator
// stores. Elsewhere, and under Global.cpu_exact_numerics, they are widened into fp32 scratch
// and multiplied with OpenBLAS sgemm (the reference: the same contract, sgemm's summation
// order). f32 takes oneDNN's fp32 matmul on AVX-512 CPUs and sgemm elsewhere
// (ocr_cpu_f32_linear_onednn, kernels/cpu/isa.h).
#include <cblas.h>
#include <omp.h>
#include <string.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/onednn.h"
#include "kernels/ops.h"

// The oneDNN path takes both operands in one native low-precision dtype and writes f32 or that
// dtype; any other mix (an f32 weight with a bf16 input) takes the reference.
static int lp_native(const OcrTensor *a, const OcrTensor *b) {
    return a->dtype == b->dtype && ocr_cpu_lp_native(a->dtype);
}
// The same for GEMMs and linears, which take it with all-f32 operands too where oneDNN's fp32
// matmul is chosen (ocr_cpu_f32_linear_onednn). The batched matmul keeps sgemm and its own small
// products for f32 (attention heads: too small for oneDNN's per-call set-up).
static int onednn_operands(const OcrTensor *a, const OcrTensor *b) {
    if (a->dtype == OCR_F32 && b->dtype == OCR_F32) return ocr_cpu_f32_linear_onednn();
    return lp_native(a, b);
}
static int lp_out_ok(const OcrTensor *out, const OcrTensor *a) { return out->dtype == OCR_F32 || out->dtype == a->dtype; }

// Rows of a tensor viewed as a matrix whose columns are the last dimension.
static int64_t mat_rows(const OcrTensor *t) {
    int64_t rows = 1;
    for (int i = 0; i + 1 < t->ndim; i++) rows *= t->shape[i];
    return rows;
}

static int blas_int(int64_t v) {
    OCR_ASSERT(v >= 0 && v <= 0x7fffffff, "GEMM dimension %lld does not fit BLAS's int", (long long)v);
    return (int)v;
}

// c (M, N) = alpha · op(a) · op(b) + beta · c on fp32 row-major data with leading dimensions.
// K == 0 and empty outputs are handled here because BLAS rejects lda = 0.
static void sgemm_rm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *a, int64_t lda,
                     const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    if (M == 0 || N == 0) return;
    if (K == 0 || alpha == 0.0f) {
        for (int64_t i = 0; i < M; i++) {
            float *row = c + i * ldc;
            if (beta == 0.0f) {
                memset(row, 0, (size_t)N * sizeof(float));
            } else {
                for (int64_t j = 0; j < N; j++) row[j] *= beta;
            }
        }
        return;
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, blas_int(M),
                blas_int(N), blas_int(K), alpha, a, blas_int(lda), b, blas_int(ldb), beta, c, blas_int(ldc));
}

void ocr_cpu_gemm(OcrTensor *c, const OcrTensor *a, const OcrTensor *b, int trans_a, int trans_b, float alpha,
                  float beta) {
    CPU_ASSERT_FLOAT(c);
    CPU_ASSERT_FLOAT(a);
    CPU_ASSERT_FLOAT(b);
    int64_t ar = mat_rows(a), ac = ocr_tensor_dim(a, -1);
    int64_t br = mat_rows(b), bc = ocr_tensor_dim(b, -1);
    int64_t M = trans_a ? ac : ar, K = trans_a ? ar : ac;
    int64_t N = trans_b ? br : bc, Kb = trans_b ? bc : br;
    OCR_ASSERT(K == Kb, "gemm: inner dimensions differ (%lld vs %lld)", (long long)K, (long long)Kb);
    OCR_ASSERT(mat_rows(c) == M && ocr_tensor_dim(c, -1) == N, "gemm: c is not (%lld, %lld)", (long long)M,
               (long long)N);
    if (onednn_operands(a, b) && lp_out_ok(c, a) && (beta == 0.0f || beta == 1.0f) && M > 0 && N > 0 && K > 0) {
        ocr_onednn_gemm(1, M, N, K, alpha, onednn_mat(a->data, a->dtype, 0, ac, trans_a),
                        onednn_mat(b->data, b->dtype, 0, bc, trans_b), NULL, beta == 1.0f, c->data, c->dtype, N, 0);
        return;
    }
    CpuScratch s = {0};
    const float *fa = ocr_cpu_f32_in(&s, a);
    const float *fb = ocr_cpu_f32_in(&s, b);
    float *fc = ocr_cpu_f32_out(&s, c, beta != 0.0f);
    sgemm_rm(trans_a, trans_b, M, N, K, alpha, fa, ac, fb, bc, beta, fc, N);
    ocr_cpu_f32_store(c, fc);
    ocr_cpu_scratch_free(&s);
}

// ---- linear -----------------------------------------------------------------------------

void ocr_cpu_linear_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *weight, const OcrTensor *bias) {
    CPU_ASSERT_FLOAT(out);
    CPU_ASSERT_FLOAT(inp);
    CPU_ASSERT_FLOAT(weight);
    OCR_ASSERT(weight->ndim == 2, "linear: weight must be (IN, OUT)");
    int64_t IN = weight->shape[0], OUT = weight->shape[1];
    OCR_ASSERT(ocr_tensor_dim(inp, -1) == IN, "linear: input has %lld features, weight expects %lld",
               (long long)ocr_tensor_dim(inp, -1), (long long)IN);
    OCR_ASSERT(ocr_tensor_dim(out, -1) == OUT, "linear: output has %lld features, weight gives %lld",
               (long long)ocr_tensor_dim(out, -1), (long long)OUT);
    int64_t R = mat_rows(inp);
    OCR_ASSERT(mat_rows(out) == R, "linear: input and output rows differ");
    CpuScratch s = {0};
    if (onednn_operands(inp, weight) && lp_out_ok(out, inp) && R > 0 && OUT > 0 && IN > 0) {
        const float *bb = NULL;
        if (bias) {
            CPU_ASSERT_FLOAT(bias);
            OCR_ASSERT(ocr_tensor_numel(bias) == OUT, "linear: bias must have OUT elements");
            bb = ocr_cpu_f32_in(&s, bias);
        }
        // The bias joins the fp32 accumulator before the one rounding, as in the reference.
        ocr_onednn_gemm(1, R, OUT, IN, 1.0f, onednn_mat(inp->data, inp->dtype, 0, IN, 0),
                        onednn_mat(weight->data, weight->dtype, 0, OUT, 0), bb, 0, out->data, out->dtype, OUT, 0);
        ocr_cpu_scratch_free(&s);
        return;
    }
    const float *x = ocr_cpu_f32_in(&s, inp);
    const float *w = ocr_cpu_f32_in(&s, weight);
    float *y = ocr_cpu_f32_out(&s, out, 0);
    float beta = 0.0f;
    if (bias) {
        CPU_ASSERT_FLOAT(bias);
        OCR_ASSERT(ocr_tensor_numel(bias) == OUT, "linear: bias must have OUT elements");
        const float *bb = ocr_cpu_f32_in(&s, bias);
        // Start from the bias so sgemm adds the product into it (beta = 1): one pass, one rounding.
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < R; r++) memcpy(y + r * OUT, bb, (size_t)OUT * sizeof(float));
        beta = 1.0f;
    }
    sgemm_rm(0, 0, R, OUT, IN, 1.0f, x, IN, w, OUT, beta, y, OUT);
    ocr_cpu_f32_store(out, y);
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_linear_backward(OcrTensor *dinp, OcrTensor *dweight, OcrTensor *dbias, const OcrTensor *dout,
                     const OcrTensor *inp, const OcrTensor *weight) {
    CPU_ASSERT_FLOAT(dout);
    CPU_ASSERT_FLOAT(inp);
    CPU_ASSERT_FLOAT(weight);
    OCR_ASSERT(weight->ndim == 2, "linear: weight must be (IN, OUT)");
    int64_t IN = weight->shape[0], OUT = weight->shape[1];
    int64_t R = mat_rows(inp);
    OCR_ASSERT(ocr_tensor_dim(inp, -1) == IN && ocr_tensor_dim(dout, -1) == OUT && mat_rows(dout) == R,
               "linear backward: shapes of inp/dout do not match the weight");
    CpuScratch s = {0};
    if (onednn_operands(dout, weight) && onednn_operands(dout, inp) && (!dinp || lp_out_ok(dinp, dout)) &&
        (!dweight || lp_out_ok(dweight, dout)) && R > 0 && IN > 0 && OUT > 0) {
        if (dinp) {
            CPU_ASSERT_FLOAT(dinp);
            OCR_ASSERT(ocr_tensor_numel(dinp) == R * IN, "linear backward: dinp shape");
            // dinp (R, IN) = dout (R, OUT) · weightᵀ.
            ocr_onednn_gemm(1, R, IN, OUT, 1.0f, onednn_mat(dout->data, dout->dtype, 0, OUT, 0),
                            onednn_mat(weight->data, weight->dtype, 0, OUT, 1), NULL, 0, dinp->data, dinp->dtype, IN,
                            0);
        }
        if (dweight) {
            CPU_ASSERT_FLOAT(dweight);
            OCR_ASSERT(ocr_tensor_numel(dweight) == IN * OUT, "linear backward: dweight shape");
            // dweight (IN, OUT) += inpᵀ · dout.
            ocr_onednn_gemm(1, IN, OUT, R, 1.0f, onednn_mat(inp->data, inp->dtype, 0, IN, 1),
                            onednn_mat(dout->data, dout->dtype, 0, OUT, 0), NULL, 1, dweight->data, dweight->dtype,
                            OUT, 0);
        }
        if (dbias) {
            CPU_ASSERT_FLOAT(dbias);
            OCR_ASSERT(ocr_tensor_numel(dbias) == OUT, "linear backward: dbias shape");
            float *db = ocr_cpu_f32_out(&s, dbias, 1);
            ocr_cpu_column_sums_add(db, dout->data, dout->dtype, R, OUT, OUT);
            ocr_cpu_f32_store(dbias, db);
        }
        ocr_cpu_scratch_free(&s);
        return;
    }
    const float *dy = ocr_cpu_f32_in(&s, dout);
    if (dinp) {
        CPU_ASSERT_FLOAT(dinp);
        OCR_ASSERT(ocr_tensor_numel(dinp) == R * IN, "linear backward: dinp shape");
        const float *w = ocr_cpu_f32_in(&s, weight);
        float *dx = ocr_cpu_f32_out(&s, dinp, 0);
        sgemm_rm(0, 1, R, IN, OUT, 1.0f, dy, OUT, w, OUT, 0.0f, dx, IN);
        ocr_cpu_f32_store(dinp, dx);
    }
    if (dweight) {
        CPU_ASSERT_FLOAT(dweight);
        OCR_ASSERT(ocr_tensor_numel(dweight) == IN * OUT, "linear backward: dweight shape");
        const float *x = ocr_cpu_f32_in(&s, inp);
        float *dw = ocr_cpu_f32_out(&s, dweight, 1);
        sgemm_rm(1, 0, IN, OUT, R, 1.0f, x, IN, dy, OUT, 1.0f, dw, OUT);
        ocr_cpu_f32_store(dweight, dw);
    }
    if (dbias) {
        CPU_ASSERT_FLOAT(dbias);
        OCR_ASSERT(ocr_tensor_numel(dbias) == OUT, "linear backward: dbias shape");
        float *db = ocr_cpu_f32_out(&s, dbias, 1);
        ocr_cpu_column_sums_add(db, dy, OCR_F32, R, OUT, OUT);
        ocr_cpu_f32_store(dbias, db);
    }
    ocr_cpu_scratch_free(&s);
}

// ---- batched matmul ----------------------------------------------------------------------

// Products below this many multiply-adds per batch entry run in our own loops, parallel
// over the batch: sgemm's per-call overhead dominates there (attention heads are ~40×40×8).
#define SMALL_GEMM_MACS (64 * 64 * 64)

// c (M, N) = alpha · A · B with A (M, K) and B (K, N) given through element strides
// (a_rs, a_cs) and (b_rs, b_cs), so transposed operands need no copy. B is packed into
// bpack (K × Np, Np = N rounded up to a multiple of 8, the extra columns zero) first so the inner
// loop runs over contiguous n. Every c element is 0 + Σ_k (alpha·a[m,k])·b[k,n], k ascending, one
// multiply and one add per term (no FMA: the ISA clones give the same bits). Two rows of c and up
// to SMALL_GEMM_NB columns accumulate in registers over the whole k loop; a last block of fewer
// than 8 columns runs as a whole vector over the zero padding (its lanes compute exactly what a
// scalar loop would) and stores only the real columns. Attention heads have N = D = 15..64 or
// N = T: without the padding a 15-column product ran 7 of its columns through memory.
#define SMALL_GEMM_NB 32
// Eight floats as one GCC vector: 8-wide in the AVX2/AVX-512 clones, two SSE registers in the
// baseline one. Element-wise mul and add, so the bits do not depend on the clone. (Loaded and
// stored through memcpy: the rows are not aligned; no function passes one by value.)
typedef float sg_v8 __attribute__((vector_size(32)));
#define SG_LOAD(v, p) memcpy(&(v), (p), sizeof(sg_v8))
#define SG_STORE(p, v) memcpy((p), &(v), sizeof(sg_v8))
// The first n (< 8) lanes of v to p.
#define SG_STORE_PART(p, v, n)             \
    do {                                   \
        float lane_[8];                    \
        SG_STORE(lane_, v);                \
        memcpy((p), lane_, (size_t)(n) * sizeof(float)); \
    } while (0)
CPU_INLINE void small_gemm_rows(float *restrict c, int64_t ldc, const float *a, int64_t a_rs, int64_t a_cs,
                                const float *restrict bpack, int64_t m0, int64_t rows, int64_t N, int64_t Np,
                                int64_t K, float alpha) {
    const int two = rows > 1;
    int64_t n0 = 0;
    for (; n0 + SMALL_GEMM_NB <= N; n0 += SMALL_GEMM_NB) {
        sg_v8 p0 = {0}, p1 = {0}, p2 = {0}, p3 = {0}, q0 = {0}, q1 = {0}, q2 = {0}, q3 = {0};
        for (int64_t k = 0; k < K; k++) {
            const float *brow = bpack + k * Np + n0;
            sg_v8 b0, b1, b2, b3;
            SG_LOAD(b0, brow), SG_LOAD(b1, brow + 8), SG_LOAD(b2, brow + 16), SG_LOAD(b3, brow + 24);
            const float s0 = alpha * a[m0 * a_rs + k * a_cs];
            const float s1 = two ? alpha * a[(m0 + 1) * a_rs + k * a_cs] : 0.0f;
            const sg_v8 v0 = {s0, s0, s0, s0, s0, s0, s0, s0}, v1 = {s1, s1, s1, s1, s1, s1, s1, s1};
            p0 += v0 * b0, p1 += v0 * b1, p2 += v0 * b2, p3 += v0 * b3;
            q0 += v1 * b0, q1 += v1 * b1, q2 += v1 * b2, q3 += v1 * b3;
        }
        float *c0 = c + m0 * ldc + n0, *c1 = c0 + ldc;
        SG_STORE(c0, p0), SG_STORE(c0 + 8, p1), SG_STORE(c0 + 16, p2), SG_STORE(c0 + 24, p3);
        if (two) SG_STORE(c1, q0), SG_STORE(c1 + 8, q1), SG_STORE(c1 + 16, q2), SG_STORE(c1 + 24, q3);
    }
    // 16 columns at a time (a 15- or 16-column head in one pass over k), then 8.
    for (; n0 + 16 <= Np; n0 += 16) {
        sg_v8 p0 = {0}, p1 = {0}, q0 = {0}, q1 = {0};
        for (int64_t k = 0; k < K; k++) {
            const float *brow = bpack + k * Np + n0;
            sg_v8 b0, b1;
            SG_LOAD(b0, brow), SG_LOAD(b1, brow + 8);
            const float s0 = alpha * a[m0 * a_rs + k * a_cs];
            const float s1 = two ? alpha * a[(m0 + 1) * a_rs + k * a_cs] : 0.0f;
            const sg_v8 v0 = {s0, s0, s0, s0, s0, s0, s0, s0}, v1 = {s1, s1, s1, s1, s1, s1, s1, s1};
            p0 += v0 * b0, p1 += v0 * b1, q0 += v1 * b0, q1 += v1 * b1;
        }
        float *c0 = c + m0 * ldc + n0, *c1 = c0 + ldc;
        // Columns of the second vector that are real: 8 unless this block holds the last ones.
        const int64_t tail = N - n0 - 8 < 8 ? N - n0 - 8 : 8;
        SG_STORE(c0, p0);
        if (tail == 8) SG_STORE(c0 + 8, p1); else SG_STORE_PART(c0 + 8, p1, tail);
        if (two) {
            SG_STORE(c1, q0);
            if (tail == 8) SG_STORE(c1 + 8, q1); else SG_STORE_PART(c1 + 8, q1, tail);
        }
    }
    for (; n0 < Np; n0 += 8) {
        sg_v8 p0 = {0}, q0 = {0};
        for (int64_t k = 0; k < K; k++) {
            sg_v8 b0;
            SG_LOAD(b0, bpack + k * Np + n0);
            const float s0 = alpha * a[m0 * a_rs + k * a_cs];
            const float s1 = two ? alpha * a[(m0 + 1) * a_rs + k * a_cs] : 0.0f;
            const sg_v8 v0 = {s0, s0, s0, s0, s0, s0, s0, s0}, v1 = {s1, s1, s1, s1, s1, s1, s1, s1};
            p0 += v0 * b0, q0 += v1 * b0;
        }
        const int64_t real = N - n0 < 8 ? N - n0 : 8;
        if (real == 8) {
            SG_STORE(c + m0 * ldc + n0, p0);
            if (two) SG_STORE(c + (m0 + 1) * ldc + n0, q0);
        } else {
            SG_STORE_PART(c + m0 * ldc + n0, p0, real);
            if (two) SG_STORE_PART(c + (m0 + 1) * ldc + n0, q0, real);
        }
    }
}

CPU_INLINE void small_gemm_body(float *restrict c, int64_t ldc, const float *a, int64_t a_rs, int64_t a_cs,
                                const float *b, int64_t b_rs, int64_t b_cs, int64_t M, int64_t N, int64_t K,
                                float alpha, float *restrict bpack) {
    const int64_t Np = ocr_cpu_small_gemm_padded(N);
    for (int64_t k = 0; k < K; k++) {
        for (int64_t n = 0; n < N; n++) bpack[k * Np + n] = b[k * b_rs + n * b_cs];
        for (int64_t n = N; n < Np; n++) bpack[k * Np + n] = 0.0f;
    }
    for (int64_t m = 0; m < M; m += 2)
        small_gemm_rows(c, ldc, a, a_rs, a_cs, bpack, m, M - m < 2 ? M - m : 2, N, Np, K, alpha);
}
CPU_VEC_CLONES(small_gemm,
               (float *c, int64_t ldc, const float *a, int64_t a_rs, int64_t a_cs, const float *b, int64_t b_rs,
                int64_t b_cs, int64_t M, int64_t N, int64_t K, float alpha, float *bpack),
               (c, ldc, a, a_rs, a_cs, b, b_rs, b_cs, M, N, K, alpha, bpack))

void ocr_cpu_small_gemm(float *c, int64_t ldc, const float *a, int64_t a_rs, int64_t a_cs, const float *b,
                        int64_t b_rs, int64_t b_cs, int64_t M, int64_t N, int64_t K, float alpha, float *bpack) {
    if (M <= 0 || N <= 0) return;
    small_gemm(c, ldc, a, a_rs, a_cs, b, b_rs, b_cs, M, N, K, alpha, bpack);
}

// c[i] (M, N) = alpha · op(a[i]) · op(b[i]) for i < B; a[i] is (M, K) or (K, M), b[i] (K, N) or (N, K).
static void batched_sgemm(float *c, const float *a, int ta, const float *b, int tb, int64_t B, int64_t M, int64_t N,
                          int64_t K, float alpha) {
    int64_t lda = ta ? M : K, ldb = tb ? K : N;
    if (M * N * K >= SMALL_GEMM_MACS || B == 1) {
        for (int64_t i = 0; i < B; i++)
            sgemm_rm(ta, tb, M, N, K, alpha, a + i * M * K, lda, b + i * K * N, ldb, 0.0f, c + i * M * N, N);
        return;
    }
    int64_t a_rs = ta ? 1 : K, a_cs = ta ? M : 1;
    int64_t b_rs = tb ? 1 : N, b_cs = tb ? K : 1;
    CpuScratch s = {0};
    int nt = omp_get_max_threads();
    const size_t per = (size_t)(K * ocr_cpu_small_gemm_padded(N));
    float *packs = ocr_cpu_scratch_floats(&s, (size_t)nt * (per > 0 ? per : 1));
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < B; i++) {
        float *pack = packs + (size_t)omp_get_thread_num() * per;
        small_gemm(c + i * M * N, N, a + i * M * K, a_rs, a_cs, b + i * K * N, b_rs, b_cs, M, N, K, alpha, pack);
    }
    ocr_cpu_scratch_free(&s);
}

// batched_sgemm's contract on the hardware: c (dtype c_dt) from a and b of one native dtype.
static void batched_lp(void *c, ocr_dtype_t c_dt, const OcrTensor *a, int ta, const OcrTensor *b, int tb, int64_t B,
                       int64_t M, int64_t N, int64_t K, float alpha) {
    if (M == 0 || N == 0) return;
    if (K == 0) {
        memset(c, 0, (size_t)(B * M * N) * ocr_dtype_size(c_dt));
        return;
    }
    OnednnMat ma = onednn_mat(a->data, a->dtype, 0, ta ? M : K, ta);
    OnednnMat mb = onednn_mat(b->data, b->dtype, 0, tb ? K : N, tb);
    ma.batch_stride = M * K, mb.batch_stride = K * N;
    ocr_onednn_gemm(B, M, N, K, alpha, ma, mb, NULL, 0, c, c_dt, N, M * N);
}

typedef struct {
    int64_t B, M, N, K;
} BatchDims;

static BatchDims batch_dims(const OcrTensor *a, const OcrTensor *b, int ta, int tb) {
    OCR_ASSERT(a->ndim == 3 && b->ndim == 3, "matmul_batched: operands must be 3-d");
    OCR_ASSERT(a->shape[0] == b->shape[0], "matmul_batched: batch sizes differ");
    BatchDims d;
    d.B = a->shape[0];
    d.M = ta ? a->shape[2] : a->shape[1];
    d.K = ta ? a->shape[1] : a->shape[2];
    d.N = tb ? b->shape[1] : b->shape[2];
    int64_t Kb = tb ? b->shape[2] : b->shape[1];
    OCR_ASSERT(d.K == Kb, "matmul_batched: inner dimensions differ (%lld vs %lld)", (long long)d.K, (long long)Kb);
    return d;
}

void ocr_cpu_matmul_batched_forward(OcrTensor *out, const OcrTensor *a, const OcrTensor *b, int trans_a, int trans_b,
                            float alpha) {
    CPU_ASSERT_FLOAT(out);
    CPU_ASSERT_FLOAT(a);
    CPU_ASSERT_FLOAT(b);
    BatchDims d = batch_dims(a, b, trans_a, trans_b);
    OCR_ASSERT(out->ndim == 3 && out->shape[0] == d.B && out->shape[1] == d.M && out->shape[2] == d.N,
               "matmul_batched: out must be (B, M, N)");
    if (lp_native(a, b) && lp_out_ok(out, a) && d.B > 0) {
        batched_lp(out->data, out->dtype, a, trans_a, b, trans_b, d.B, d.M, d.N, d.K, alpha);
        return;
    }
    CpuScratch s = {0};
    const float *fa = ocr_cpu_f32_in(&s, a);
    const float *fb = ocr_cpu_f32_in(&s, b);
    float *fc = ocr_cpu_f32_out(&s, out, 0);
    batched_sgemm(fc, fa, trans_a, fb, trans_b, d.B, d.M, d.N, d.K, alpha);
    ocr_cpu_f32_store(out, fc);
    ocr_cpu_scratch_free(&s);
}

// With A' = op(a), B' = op(b) and out = alpha·A'·B':  dA' = alpha·dout·B'ᵀ, dB' = alpha·A'ᵀ·dout.
// A transposed operand's gradient is the transpose of that, which swaps the factors.
void ocr_cpu_matmul_batched_backward(OcrTensor *da, OcrTensor *db, const OcrTensor *dout, const OcrTensor *a,
                             const OcrTensor *b, int trans_a, int trans_b, float alpha) {
    CPU_ASSERT_FLOAT(dout);
    CPU_ASSERT_FLOAT(a);
    CPU_ASSERT_FLOAT(b);
    BatchDims d = batch_dims(a, b, trans_a, trans_b);
    OCR_ASSERT(dout->ndim == 3 && dout->shape[0] == d.B && dout->shape[1] == d.M && dout->shape[2] == d.N,
               "matmul_batched backward: dout must be (B, M, N)");
    if (lp_native(dout, a) && lp_native(dout, b) && (!da || lp_out_ok(da, dout)) && (!db || lp_out_ok(db, dout)) &&
        d.B > 0) {
        // The same factor pairs as the sgemm path below.
        if (da) {
            CPU_ASSERT_FLOAT(da);
            OCR_ASSERT(ocr_tensor_same_shape(da, a), "matmul_batched backward: da must match a");
            if (!trans_a)
                batched_lp(da->data, da->dtype, dout, 0, b, !trans_b, d.B, d.M, d.K, d.N, alpha);
            else
                batched_lp(da->data, da->dtype, b, trans_b, dout, 1, d.B, d.K, d.M, d.N, alpha);
        }
        if (db) {
            CPU_ASSERT_FLOAT(db);
            OCR_ASSERT(ocr_tensor_same_shape(db, b), "matmul_batched backward: db must match b");
            if (!trans_b)
                batched_lp(db->data, db->dtype, a, !trans_a, dout, 0, d.B, d.K, d.N, d.M, alpha);
            else
                batched_lp(db->data, db->dtype, dout, 1, a, trans_a, d.B, d.N, d.K, d.M, alpha);
        }
        return;
    }
    CpuScratch s = {0};
    const float *dy = ocr_cpu_f32_in(&s, dout);
    if (da) {
        CPU_ASSERT_FLOAT(da);
        OCR_ASSERT(ocr_tensor_same_shape(da, a), "matmul_batched backward: da must match a");
        const float *fb = ocr_cpu_f32_in(&s, b);
        float *g = ocr_cpu_f32_out(&s, da, 0);
        if (!trans_a) {
            // da (M, K) = alpha · dout (M, N) · B'ᵀ; B'ᵀ is b itself when b is stored (N, K).
            batched_sgemm(g, dy, 0, fb, !trans_b, d.B, d.M, d.K, d.N, alpha);
        } else {
            // da (K, M) = alpha · B' (K, N) · doutᵀ (N, M).
            batched_sgemm(g, fb, trans_b, dy, 1, d.B, d.K, d.M, d.N, alpha);
        }
        ocr_cpu_f32_store(da, g);
    }
    if (db) {
        CPU_ASSERT_FLOAT(db);
        OCR_ASSERT(ocr_tensor_same_shape(db, b), "matmul_batched backward: db must match b");
        const float *fa = ocr_cpu_f32_in(&s, a);
        float *g = ocr_cpu_f32_out(&s, db, 0);
        if (!trans_b) {
            // db (K, N) = alpha · A'ᵀ (K, M) · dout (M, N).
            batched_sgemm(g, fa, !trans_a, dy, 0, d.B, d.K, d.N, d.M, alpha);
        } else {
            // db (N, K) = alpha · doutᵀ (N, M) · A' (M, K).
            batched_sgemm(g, dy, 1, fa, trans_a, d.B, d.N, d.K, d.M, alpha);
        }
        ocr_cpu_f32_store(db, g);
    }
    ocr_cpu_scratch_free(&s);
}

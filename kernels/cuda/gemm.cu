// GEMM, linear and batched matmul on the GPU through cuBLAS (cublasGemmEx and its strided
// batched form).
//
// Numerics (what kernels/cpu/gemm.c stores, up to summation order):
// - f16/bf16 operands multiply on the tensor cores with CUBLAS_COMPUTE_32F: fp32 accumulation,
//   and the handle forbids reduced-precision split-K reductions, so a half output is rounded
//   once from the fp32 sum. Never half accumulation.
// - f32 operands use CUBLAS_COMPUTE_32F (true FP32) unless ocr_cuda_set_allow_tf32(1), which
//   selects CUBLAS_COMPUTE_32F_FAST_TF32.
// - Operands of different dtypes are widened to f32 (exact) in scratch; an output dtype that
//   cuBLAS cannot write from the operands' type (f32 operands into f16, f16 into bf16, ...) is
//   computed into f32 scratch and rounded once. A bias is the GEMM's initial C (beta = 1), so
//   bias + product is rounded once, as on the CPU; a bias of another dtype than a half output
//   goes through the f32 path for the same reason.
// Row-major to cuBLAS's column-major: c (M, N) = op(a)·op(b) is cᵀ (N, M) = op(b)ᵀ·op(a)ᵀ, and a
// row-major matrix read as column-major is its transpose, so b goes first, untransposed flags.
#include <limits.h>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_ops.h"

static cudaDataType_t cublas_type(int dt) {
    switch (dt) {
        case OCR_F32: return CUDA_R_32F;
        case OCR_F16: return CUDA_R_16F;
        default: return CUDA_R_16BF;
    }
}

static int fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

// c[i] (M, N) = alpha·op(a[i])·op(b[i]) + beta·c[i] for i < batch, contiguous row-major
// matrices: a[i] is (M, K) or, with ta, (K, M); b[i] is (K, N) or, with tb, (N, K). With bias
// (N elements, any float dtype) the initial c is bias in every row and beta must be 0.
// beta = 0 ignores c's old contents (NaN included).
static void gemm_rm(const CudaCtx &ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const void *a,
                    int adt, const void *b, int bdt, float beta, void *c, int cdt, int64_t batch, const void *bias,
                    int biasdt) {
    if (M == 0 || N == 0 || batch == 0) return;
    OCR_ASSERT(!bias || beta == 0.0f, "gemm: a bias replaces beta·c");
    const int64_t cn = batch * M * N;
    const int op_dt = adt == bdt ? adt : OCR_F32;
    const int c_direct = (cdt == op_dt || cdt == OCR_F32) && (!bias || biasdt == cdt || cdt == OCR_F32);

    if (K == 0 || alpha == 0.0f) {
        // No product: c = bias (broadcast), or c = beta·c (beta = 0: zeros).
        if (bias)
            ocr_cuda_broadcast_rows(ctx, c, cdt, bias, biasdt, batch * M, N);
        else
            ocr_cuda_scale_inplace(ctx, c, cdt, cn, beta);
        return;
    }
    OCR_ASSERT(fits_int(M) && fits_int(N) && fits_int(K), "gemm: %lld x %lld x %lld does not fit cuBLAS's int",
               (long long)M, (long long)N, (long long)K);
    OCR_ASSERT(batch <= INT_MAX, "gemm: batch %lld too large", (long long)batch);

    // Scratch: widened operands and/or an f32 C.
    const int64_t an = batch * M * K, bn = batch * K * N;
    const size_t a_bytes = adt != op_dt ? cuda_align((size_t)an * sizeof(float)) : 0;
    const size_t b_bytes = bdt != op_dt ? cuda_align((size_t)bn * sizeof(float)) : 0;
    const size_t c_bytes = c_direct ? 0 : cuda_align((size_t)cn * sizeof(float));
    char *scratch = (a_bytes + b_bytes + c_bytes) ? (char *)ocr_cuda_scratch(ctx, a_bytes + b_bytes + c_bytes) : NULL;
    const void *pa = a, *pb = b;
    if (a_bytes) {
        ocr_cuda_copy_2d(ctx, scratch, OCR_F32, an, a, adt, an, 1, an);
        pa = scratch;
    }
    if (b_bytes) {
        ocr_cuda_copy_2d(ctx, scratch + a_bytes, OCR_F32, bn, b, bdt, bn, 1, bn);
        pb = scratch + a_bytes;
    }
    void *pc = c;
    int pcdt = cdt;
    if (!c_direct) {
        pc = scratch + a_bytes + b_bytes;
        pcdt = OCR_F32;
        if (beta != 0.0f) ocr_cuda_copy_2d(ctx, pc, OCR_F32, cn, c, cdt, cn, 1, cn);
    }
    float beta_eff = beta;
    if (bias) {
        ocr_cuda_broadcast_rows(ctx, pc, pcdt, bias, biasdt, batch * M, N);
        beta_eff = 1.0f;
    }

    const cublasComputeType_t compute =
        (op_dt == OCR_F32 && ocr_cuda_allow_tf32()) ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int lda = (int)(ta ? M : K), ldb = (int)(tb ? K : N), ldc = (int)N;
    cublasHandle_t h = ocr_cuda_cublas(ctx);
    if (batch == 1) {
        OCR_CUDA_CHECK(cublasGemmEx(h, opb, opa, (int)N, (int)M, (int)K, &alpha, pb, cublas_type(op_dt), ldb, pa,
                                    cublas_type(op_dt), lda, &beta_eff, pc, cublas_type(pcdt), ldc, compute,
                                    CUBLAS_GEMM_DEFAULT));
    } else {
        OCR_CUDA_CHECK(cublasGemmStridedBatchedEx(h, opb, opa, (int)N, (int)M, (int)K, &alpha, pb, cublas_type(op_dt),
                                                  ldb, (long long)(K * N), pa, cublas_type(op_dt), lda,
                                                  (long long)(M * K), &beta_eff, pc, cublas_type(pcdt), ldc,
                                                  (long long)(M * N), (int)batch, compute, CUBLAS_GEMM_DEFAULT));
    }
    OCR_CUDA_LAUNCHED();
    if (!c_direct) ocr_cuda_copy_2d(ctx, c, cdt, cn, pc, OCR_F32, cn, 1, cn);
}

// Rows of a tensor viewed as a matrix whose columns are the last dimension.
static int64_t mat_rows(const OcrTensor *t) {
    int64_t rows = 1;
    for (int i = 0; i + 1 < t->ndim; i++) rows *= t->shape[i];
    return rows;
}

extern "C" void ocr_cuda_gemm(OcrTensor *c, const OcrTensor *a, const OcrTensor *b, int trans_a, int trans_b,
                              float alpha, float beta) {
    CUDA_ASSERT_FLOAT(c);
    CUDA_ASSERT_FLOAT(a);
    CUDA_ASSERT_FLOAT(b);
    const int64_t ar = mat_rows(a), ac = ocr_tensor_dim(a, -1);
    const int64_t br = mat_rows(b), bc = ocr_tensor_dim(b, -1);
    const int64_t M = trans_a ? ac : ar, K = trans_a ? ar : ac;
    const int64_t N = trans_b ? br : bc, Kb = trans_b ? bc : br;
    OCR_ASSERT(K == Kb, "gemm: inner dimensions differ (%lld vs %lld)", (long long)K, (long long)Kb);
    OCR_ASSERT(mat_rows(c) == M && ocr_tensor_dim(c, -1) == N, "gemm: c is not (%lld, %lld)", (long long)M,
               (long long)N);
    CudaCtx ctx = ocr_cuda_enter(c);
    gemm_rm(ctx, trans_a, trans_b, M, N, K, alpha, a->data, a->dtype, b->data, b->dtype, beta, c->data, c->dtype, 1,
            NULL, OCR_F32);
}

extern "C" void ocr_cuda_linear_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *weight,
                                        const OcrTensor *bias) {
    CUDA_ASSERT_FLOAT(out);
    CUDA_ASSERT_FLOAT(inp);
    CUDA_ASSERT_FLOAT(weight);
    OCR_ASSERT(weight->ndim == 2, "linear: weight must be (IN, OUT)");
    const int64_t IN = weight->shape[0], OUT = weight->shape[1];
    OCR_ASSERT(ocr_tensor_dim(inp, -1) == IN, "linear: input has %lld features, weight expects %lld",
               (long long)ocr_tensor_dim(inp, -1), (long long)IN);
    OCR_ASSERT(ocr_tensor_dim(out, -1) == OUT, "linear: output has %lld features, weight gives %lld",
               (long long)ocr_tensor_dim(out, -1), (long long)OUT);
    const int64_t R = mat_rows(inp);
    OCR_ASSERT(mat_rows(out) == R, "linear: input and output rows differ");
    if (bias) {
        CUDA_ASSERT_FLOAT(bias);
        OCR_ASSERT(ocr_tensor_numel(bias) == OUT, "linear: bias must have OUT elements");
    }
    CudaCtx ctx = ocr_cuda_enter(out);
    gemm_rm(ctx, 0, 0, R, OUT, IN, 1.0f, inp->data, inp->dtype, weight->data, weight->dtype, 0.0f, out->data,
            out->dtype, 1, bias ? bias->data : NULL, bias ? bias->dtype : OCR_F32);
}

extern "C" void ocr_cuda_linear_backward(OcrTensor *dinp, OcrTensor *dweight, OcrTensor *dbias, const OcrTensor *dout,
                                         const OcrTensor *inp, const OcrTensor *weight) {
    CUDA_ASSERT_FLOAT(dout);
    CUDA_ASSERT_FLOAT(inp);
    CUDA_ASSERT_FLOAT(weight);
    OCR_ASSERT(weight->ndim == 2, "linear: weight must be (IN, OUT)");
    const int64_t IN = weight->shape[0], OUT = weight->shape[1];
    const int64_t R = mat_rows(inp);
    OCR_ASSERT(ocr_tensor_dim(inp, -1) == IN && ocr_tensor_dim(dout, -1) == OUT && mat_rows(dout) == R,
               "linear backward: shapes of inp/dout do not match the weight");
    CudaCtx ctx = ocr_cuda_enter(dout);
    if (dinp) {
        CUDA_ASSERT_FLOAT(dinp);
        OCR_ASSERT(ocr_tensor_numel(dinp) == R * IN, "linear backward: dinp shape");
        // dinp (R, IN) = dout (R, OUT) · weightᵀ
        gemm_rm(ctx, 0, 1, R, IN, OUT, 1.0f, dout->data, dout->dtype, weight->data, weight->dtype, 0.0f, dinp->data,
                dinp->dtype, 1, NULL, OCR_F32);
    }
    if (dweight) {
        CUDA_ASSERT_FLOAT(dweight);
        OCR_ASSERT(ocr_tensor_numel(dweight) == IN * OUT, "linear backward: dweight shape");
        // dweight (IN, OUT) += inpᵀ · dout
        gemm_rm(ctx, 1, 0, IN, OUT, R, 1.0f, inp->data, inp->dtype, dout->data, dout->dtype, 1.0f, dweight->data,
                dweight->dtype, 1, NULL, OCR_F32);
    }
    if (dbias) {
        CUDA_ASSERT_FLOAT(dbias);
        OCR_ASSERT(ocr_tensor_numel(dbias) == OUT, "linear backward: dbias shape");
        ocr_cuda_bias_grad(ctx, dbias, dout->data, dout->dtype, R, OUT);
    }
}

struct BatchDims {
    int64_t B, M, N, K;
};

static BatchDims batch_dims(const OcrTensor *a, const OcrTensor *b, int ta, int tb) {
    OCR_ASSERT(a->ndim == 3 && b->ndim == 3, "matmul_batched: operands must be 3-d");
    OCR_ASSERT(a->shape[0] == b->shape[0], "matmul_batched: batch sizes differ");
    BatchDims d;
    d.B = a->shape[0];
    d.M = ta ? a->shape[2] : a->shape[1];
    d.K = ta ? a->shape[1] : a->shape[2];
    d.N = tb ? b->shape[1] : b->shape[2];
    const int64_t Kb = tb ? b->shape[2] : b->shape[1];
    OCR_ASSERT(d.K == Kb, "matmul_batched: inner dimensions differ (%lld vs %lld)", (long long)d.K, (long long)Kb);
    return d;
}

extern "C" void ocr_cuda_matmul_batched_forward(OcrTensor *out, const OcrTensor *a, const OcrTensor *b, int trans_a,
                                                int trans_b, float alpha) {
    CUDA_ASSERT_FLOAT(out);
    CUDA_ASSERT_FLOAT(a);
    CUDA_ASSERT_FLOAT(b);
    BatchDims d = batch_dims(a, b, trans_a, trans_b);
    OCR_ASSERT(out->ndim == 3 && out->shape[0] == d.B && out->shape[1] == d.M && out->shape[2] == d.N,
               "matmul_batched: out must be (B, M, N)");
    CudaCtx ctx = ocr_cuda_enter(out);
    gemm_rm(ctx, trans_a, trans_b, d.M, d.N, d.K, alpha, a->data, a->dtype, b->data, b->dtype, 0.0f, out->data,
            out->dtype, d.B, NULL, OCR_F32);
}

// With A' = op(a), B' = op(b) and out = alpha·A'·B':  dA' = alpha·dout·B'ᵀ, dB' = alpha·A'ᵀ·dout.
// A transposed operand's gradient is the transpose of that, which swaps the factors.
extern "C" void ocr_cuda_matmul_batched_backward(OcrTensor *da, OcrTensor *db, const OcrTensor *dout,
                                                 const OcrTensor *a, const OcrTensor *b, int trans_a, int trans_b,
                                                 float alpha) {
    CUDA_ASSERT_FLOAT(dout);
    CUDA_ASSERT_FLOAT(a);
    CUDA_ASSERT_FLOAT(b);
    BatchDims d = batch_dims(a, b, trans_a, trans_b);
    OCR_ASSERT(dout->ndim == 3 && dout->shape[0] == d.B && dout->shape[1] == d.M && dout->shape[2] == d.N,
               "matmul_batched backward: dout must be (B, M, N)");
    CudaCtx ctx = ocr_cuda_enter(dout);
    if (da) {
        CUDA_ASSERT_FLOAT(da);
        OCR_ASSERT(ocr_tensor_same_shape(da, a), "matmul_batched backward: da must match a");
        if (!trans_a)  // da (M, K) = alpha · dout (M, N) · B'ᵀ
            gemm_rm(ctx, 0, !trans_b, d.M, d.K, d.N, alpha, dout->data, dout->dtype, b->data, b->dtype, 0.0f,
                    da->data, da->dtype, d.B, NULL, OCR_F32);
        else  // da (K, M) = alpha · B' (K, N) · doutᵀ (N, M)
            gemm_rm(ctx, trans_b, 1, d.K, d.M, d.N, alpha, b->data, b->dtype, dout->data, dout->dtype, 0.0f, da->data,
                    da->dtype, d.B, NULL, OCR_F32);
    }
    if (db) {
        CUDA_ASSERT_FLOAT(db);
        OCR_ASSERT(ocr_tensor_same_shape(db, b), "matmul_batched backward: db must match b");
        if (!trans_b)  // db (K, N) = alpha · A'ᵀ (K, M) · dout (M, N)
            gemm_rm(ctx, !trans_a, 0, d.K, d.N, d.M, alpha, a->data, a->dtype, dout->data, dout->dtype, 0.0f,
                    db->data, db->dtype, d.B, NULL, OCR_F32);
        else  // db (N, K) = alpha · doutᵀ (N, M) · A' (M, K)
            gemm_rm(ctx, 1, trans_a, d.N, d.K, d.M, alpha, dout->data, dout->dtype, a->data, a->dtype, 0.0f, db->data,
                    db->dtype, d.B, NULL, OCR_F32);
    }
}

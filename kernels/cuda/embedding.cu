// Embedding lookup and its scatter-add backward on the GPU.
//
// Forward: one thread per output element. Backward: see embedding_bwd_kernel (no atomics, the
// CPU's sum order, whatever the launch shape). Ids outside [0, V) give zero rows and no gradient (the
// CPU asserts instead; the callers build the ids from encoded labels).
#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_ops.h"

#define EMB_THREADS 256

static __global__ void embedding_fwd_kernel(void *y, int ydt, const int32_t *ids, const void *w, int wdt, int64_t rows,
                                     int64_t V, int64_t D, int pad) {
    const int64_t n_el = rows * D;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_el; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t n = i / D, j = i - n * D;
        const int32_t id = ids[n];
        const bool zero = id == pad || id < 0 || id >= V;
        if (zero)
            st(y, ydt, i, 0.0f);
        else
            copy_elem(y, ydt, i, w, wdt, (int64_t)id * D + j);
    }
}

// One block per row n; only the block of an id's first row does anything: each thread takes
// columns j and sums, starting from dtable's value and in row order, every row carrying that
// id, then stores once. That is the CPU's f32 sequence exactly (it loads dtable into f32, adds
// in row order and rounds once), so the results agree bit for bit in every dtype.
static __global__ void embedding_bwd_kernel(void *dw, int dwdt, const void *dy, int dydt, const int32_t *ids,
                                            int64_t rows, int64_t V, int64_t D, int pad) {
    for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
        const int32_t id = ids[n];
        if (id == pad || id < 0 || id >= V) continue;
        int seen = 0;
        for (int64_t m = threadIdx.x; m < n; m += blockDim.x) seen |= ids[m] == id;
        if (__syncthreads_or(seen)) continue;
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
            const int64_t k = (int64_t)id * D + j;
            float acc = ld(dw, dwdt, k);
            for (int64_t m = n; m < rows; m++)
                if (ids[m] == id) acc += ld(dy, dydt, m * D + j);
            st(dw, dwdt, k, acc);
        }
    }
}

static int64_t rows_of(const OcrTensor *t, int64_t D) { return D ? ocr_tensor_numel(t) / D : 0; }

extern "C" void ocr_cuda_embedding_forward(OcrTensor *out, const OcrTensor *ids, const OcrTensor *table,
                                           int padding_idx) {
    CUDA_ASSERT_FLOAT(out);
    CUDA_ASSERT_FLOAT(table);
    OCR_ASSERT(table->ndim == 2, "embedding: the table must be (V, D)");
    const int64_t V = table->shape[0], D = table->shape[1];
    OCR_ASSERT(ocr_tensor_dim(out, -1) == D, "embedding: out's last dimension must be D");
    const int64_t rows = rows_of(out, D);
    OCR_ASSERT(ids->dtype == OCR_I32 && ocr_tensor_numel(ids) == rows, "embedding: ids must be %lld int32 values",
               (long long)rows);
    CudaCtx ctx = ocr_cuda_enter(out);
    if (rows * D == 0) return;
    embedding_fwd_kernel<<<cuda_blocks(rows * D, EMB_THREADS), EMB_THREADS, 0, ctx.stream>>>(
        out->data, out->dtype, (const int32_t *)ids->data, table->data, table->dtype, rows, V, D, padding_idx);
    OCR_CUDA_LAUNCHED();
}

extern "C" void ocr_cuda_embedding_backward(OcrTensor *dtable, const OcrTensor *dout, const OcrTensor *ids,
                                            int padding_idx) {
    if (!dtable) return;
    CUDA_ASSERT_FLOAT(dtable);
    CUDA_ASSERT_FLOAT(dout);
    OCR_ASSERT(dtable->ndim == 2, "embedding_backward: dtable must be (V, D)");
    const int64_t V = dtable->shape[0], D = dtable->shape[1];
    OCR_ASSERT(ocr_tensor_dim(dout, -1) == D, "embedding_backward: dout's last dimension must be D");
    const int64_t rows = rows_of(dout, D);
    OCR_ASSERT(ids->dtype == OCR_I32 && ocr_tensor_numel(ids) == rows,
               "embedding_backward: ids must be %lld int32 values", (long long)rows);
    CudaCtx ctx = ocr_cuda_enter(dtable);
    if (rows * D == 0) return;
    const unsigned blocks = (unsigned)(rows < (1 << 20) ? rows : (1 << 20));
    embedding_bwd_kernel<<<blocks, EMB_THREADS, 0, ctx.stream>>>(
        dtable->data, dtable->dtype, dout->data, dout->dtype, (const int32_t *)ids->data, rows, V, D, padding_idx);
    OCR_CUDA_LAUNCHED();
}

// Embedding lookup (nn.Embedding with padding_idx) on the CPU.
//
// The backward is a scatter-add: several rows may carry the same id, so it is parallel over
// columns (each thread owns a slice of D for every id) and walks the rows in order, which
// keeps the sum order fixed for any thread count and equal to the GPU kernel's.
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/ops.h"

static void check_ids(const OcrTensor *ids, int64_t rows, const char *op) {
    OCR_ASSERT(ids->device.type == OCR_DEVICE_CPU && ids->dtype == OCR_I32, "%s: ids must be a CPU int32 tensor", op);
    OCR_ASSERT(ocr_tensor_numel(ids) == rows, "%s: %lld ids for %lld rows", op, (long long)ocr_tensor_numel(ids),
               (long long)rows);
}

// out (..., D) = table (V, D)[ids (...)]; rows with padding_idx are zero.
void ocr_cpu_embedding_forward(OcrTensor *out, const OcrTensor *ids, const OcrTensor *table, int padding_idx) {
    CPU_ASSERT_FLOAT(out);
    CPU_ASSERT_FLOAT(table);
    OCR_ASSERT(table->ndim == 2, "embedding: the table must be (V, D)");
    const int64_t V = table->shape[0], D = table->shape[1];
    OCR_ASSERT(ocr_tensor_dim(out, -1) == D, "embedding: out's last dimension must be D = %lld", (long long)D);
    const int64_t rows = ocr_tensor_numel(out) / (D ? D : 1);
    check_ids(ids, rows, "embedding");
    const int32_t *id = ids->data;
    for (int64_t n = 0; n < rows; n++)
        OCR_ASSERT(id[n] >= 0 && id[n] < V, "embedding: id %d at row %lld is outside [0, %lld)", id[n], (long long)n,
                   (long long)V);
    CpuScratch s = {0};
    const float *w = ocr_cpu_f32_in(&s, table);
    float *y = ocr_cpu_f32_out(&s, out, 0);
#pragma omp parallel for schedule(static) if (rows * D > 16384)
    for (int64_t n = 0; n < rows; n++) {
        float *yr = y + n * D;
        if (id[n] == padding_idx) {
            for (int64_t j = 0; j < D; j++) yr[j] = 0.0f;
        } else {
            const float *wr = w + (int64_t)id[n] * D;
            for (int64_t j = 0; j < D; j++) yr[j] = wr[j];
        }
    }
    ocr_cpu_f32_store(out, y);
    ocr_cpu_scratch_free(&s);
}

// dtable (V, D) += Σ_{n: ids[n] = v} dout[n] for v != padding_idx.
void ocr_cpu_embedding_backward(OcrTensor *dtable, const OcrTensor *dout, const OcrTensor *ids, int padding_idx) {
    if (!dtable) return;
    CPU_ASSERT_FLOAT(dtable);
    CPU_ASSERT_FLOAT(dout);
    OCR_ASSERT(dtable->ndim == 2, "embedding_backward: dtable must be (V, D)");
    const int64_t V = dtable->shape[0], D = dtable->shape[1];
    OCR_ASSERT(ocr_tensor_dim(dout, -1) == D, "embedding_backward: dout's last dimension must be D = %lld",
               (long long)D);
    const int64_t rows = ocr_tensor_numel(dout) / (D ? D : 1);
    check_ids(ids, rows, "embedding_backward");
    const int32_t *id = ids->data;
    for (int64_t n = 0; n < rows; n++)
        OCR_ASSERT(id[n] >= 0 && id[n] < V, "embedding_backward: id %d at row %lld is outside [0, %lld)", id[n],
                   (long long)n, (long long)V);
    CpuScratch s = {0};
    const float *dy = ocr_cpu_f32_in(&s, dout);
    float *dw = ocr_cpu_f32_out(&s, dtable, 1);
    // Column blocks of 64: each thread owns its block for every id, rows walk in order.
    const int64_t nblk = (D + 63) / 64;
#pragma omp parallel for schedule(static) if (rows * D > 16384)
    for (int64_t bk = 0; bk < nblk; bk++) {
        const int64_t j0 = bk * 64, j1 = j0 + 64 < D ? j0 + 64 : D;
        for (int64_t n = 0; n < rows; n++) {
            if (id[n] == padding_idx) continue;
            float *wr = dw + (int64_t)id[n] * D;
            const float *gr = dy + n * D;
            for (int64_t j = j0; j < j1; j++) wr[j] += gr[j];
        }
    }
    ocr_cpu_f32_store(dtable, dw);
    ocr_cpu_scratch_free(&s);
}

// Embedding lookup (nn.Embedding with padding_idx) on the CPU.
//
// The backward is a scatter-add: several rows may carry the same id, so it is parallel over
// columns (each thread owns a slice of D for every id) and walks the rows in order, which
// keeps the sum order fixed for any thread count and equal to the GPU kernel's.
// f16/bf16 tables and gradients are widened and rounded a row at a time (ocr_cpu_rows_in/_out),
// only the rows a batch reads or adds to: a v6 NRTR table is 18,710 × 384, the batch's ids a few
// hundred. The same bits as converting the whole tensor (Global.cpu_exact_numerics still does).
#include <omp.h>
#include <string.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/isa.h"
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
    if (!ocr_cpu_exact_numerics() && (table->dtype != OCR_F32 || out->dtype != OCR_F32)) {
        // Row by row: the id's row widened, stored rounded into out's dtype (zeros for padding).
        float *bufs = ocr_cpu_scratch_floats(&s, (size_t)omp_get_max_threads() * (size_t)(2 * D));
#pragma omp parallel for schedule(static) if (rows * D > 16384)
        for (int64_t n = 0; n < rows; n++) {
            float *buf = bufs + (size_t)omp_get_thread_num() * (size_t)(2 * D);
            const float *wr;
            if (id[n] == padding_idx) {
                memset(buf, 0, (size_t)D * sizeof(float));
                wr = buf;
            } else {
                wr = ocr_cpu_rows_in(table, D, id[n], 1, buf + D);
            }
            ocr_cpu_rows_out(out, D, n, 1, wr);
        }
        ocr_cpu_scratch_free(&s);
        return;
    }
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
    // An f16/bf16 dtable: only the rows the ids touch, widened into a compact fp32 block (slot[v]:
    // the block row of id v, in order of first use), summed there and rounded back once.
    const int compact = !ocr_cpu_exact_numerics() && dtable->dtype != OCR_F32;
    int32_t *slot = NULL, *ids_of = NULL;
    int64_t used = 0;
    float *dw;
    if (compact) {
        slot = ocr_cpu_scratch_bytes(&s, (size_t)V * sizeof(int32_t));
        ids_of = ocr_cpu_scratch_bytes(&s, (size_t)(rows ? rows : 1) * sizeof(int32_t));
        for (int64_t v = 0; v < V; v++) slot[v] = -1;
        for (int64_t n = 0; n < rows; n++)
            if (id[n] != padding_idx && slot[id[n]] < 0) slot[id[n]] = (int32_t)used, ids_of[used++] = id[n];
        dw = ocr_cpu_scratch_floats(&s, (size_t)(used ? used : 1) * (size_t)D);
        for (int64_t u = 0; u < used; u++) {
            const float *src = ocr_cpu_rows_in(dtable, D, ids_of[u], 1, dw + u * D);
            if (src != dw + u * D) memcpy(dw + u * D, src, (size_t)D * sizeof(float));
        }
    } else {
        dw = ocr_cpu_f32_out(&s, dtable, 1);
    }
    // Column blocks of 64: each thread owns its block for every id, rows walk in order.
    const int64_t nblk = (D + 63) / 64;
#pragma omp parallel for schedule(static) if (rows * D > 16384)
    for (int64_t bk = 0; bk < nblk; bk++) {
        const int64_t j0 = bk * 64, j1 = j0 + 64 < D ? j0 + 64 : D;
        for (int64_t n = 0; n < rows; n++) {
            if (id[n] == padding_idx) continue;
            float *wr = dw + (compact ? (int64_t)slot[id[n]] : (int64_t)id[n]) * D;
            const float *gr = dy + n * D;
            for (int64_t j = j0; j < j1; j++) wr[j] += gr[j];
        }
    }
    if (compact) {
        for (int64_t u = 0; u < used; u++) ocr_cpu_rows_out(dtable, D, ids_of[u], 1, dw + u * D);
    } else {
        ocr_cpu_f32_store(dtable, dw);
    }
    ocr_cpu_scratch_free(&s);
}

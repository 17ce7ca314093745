// embedding_forward / _backward: lookup against the table itself (exact, every dtype), the
// padding row zero, and the backward against central finite differences of the double
// reference's loss Σ dout·table[ids], with repeated ids (the scatter-add) and the padding id
// receiving nothing; accumulation (+=) into an existing gradient.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "tests/common/test_util.h"

#define V 7
#define D 5
#define NROW 9
#define PAD 0

static const int32_t kIds[NROW] = {3, 0, 6, 3, 1, 3, 0, 5, 6};  // repeats and two padding rows

static const ocr_dtype_t kDts[3] = {OCR_F32, OCR_F16, OCR_BF16};

// kIds as an int32 tensor of the given shape (NROW elements).
static OcrTensor ids_tensor(int ndim, const int64_t *shape) {
    OcrTensor ids = ocr_test_tensor(OCR_I32, ndim, shape, NULL);
    for (int n = 0; n < NROW; n++) ((int32_t *)ids.data)[n] = kIds[n];
    return ids;
}

START_TEST(test_embedding_forward) {
    for (int k = 0; k < 3; k++) {
        float w[V * D];
        ocr_test_fill_uniform(w, V * D, 5 + k, -2.0f, 2.0f);
        OcrTensor table = ocr_test_tensor(kDts[k], 2, OCR_SHAPE(V, D), w);
        OcrTensor ids = ids_tensor(2, OCR_SHAPE(3, 3));
        for (int k2 = 0; k2 < 3; k2++) {
            OcrTensor out = ocr_test_tensor(kDts[k2], 3, OCR_SHAPE(3, 3, D), NULL);
            ocr_embedding_forward(&out, &ids, &table, PAD);
            for (int n = 0; n < NROW; n++)
                for (int j = 0; j < D; j++) {
                    float got = ocr_tensor_get_f32(&out, n * D + j);
                    // A copy, rounded once into out's dtype (the table's value is exact in f32).
                    OcrTensor one = ocr_test_tensor(kDts[k2], 1, OCR_SHAPE(1), NULL);
                    ocr_tensor_set_f32(&one, 0, kIds[n] == PAD ? 0.0f : ocr_tensor_get_f32(&table, kIds[n] * D + j));
                    float want = ocr_tensor_get_f32(&one, 0);
                    ocr_tensor_free(&one);
                    ck_assert_msg(got == want, "%s->%s row %d col %d: %g, want %g", ocr_dtype_name(kDts[k]),
                                  ocr_dtype_name(kDts[k2]), n, j, got, want);
                }
            ocr_tensor_free(&out);
        }
        // Without a padding index, id 0 is an ordinary row.
        OcrTensor out = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(NROW, D), NULL);
        ocr_embedding_forward(&out, &ids, &table, -1);
        ck_assert(ocr_tensor_get_f32(&out, 1 * D + 2) == ocr_tensor_get_f32(&table, 0 * D + 2));
        ocr_tensor_free(&out);
        ocr_tensor_free(&table);
        ocr_tensor_free(&ids);
    }
}
END_TEST

typedef struct {
    const double *dout;
} LossCtx;

// Σ_n Σ_j dout[n, j] · table[ids[n], j] (padding rows contribute 0).
static double ref_loss(const double *table, void *vctx) {
    const LossCtx *c = vctx;
    double L = 0;
    for (int n = 0; n < NROW; n++) {
        if (kIds[n] == PAD) continue;
        for (int j = 0; j < D; j++) L += c->dout[n * D + j] * table[kIds[n] * D + j];
    }
    return L;
}

START_TEST(test_embedding_backward) {
    for (int k = 0; k < 3; k++) {
        float w[V * D], g[NROW * D], g0[V * D];
        ocr_test_fill_uniform(w, V * D, 15 + k, -2.0f, 2.0f);
        ocr_test_fill_uniform(g, NROW * D, 25 + k, -1.0f, 1.0f);
        ocr_test_fill_uniform(g0, V * D, 35 + k, -0.5f, 0.5f);
        OcrTensor table = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(V, D), w);
        OcrTensor dout = ocr_test_tensor(kDts[k], 2, OCR_SHAPE(NROW, D), g);
        OcrTensor ids = ids_tensor(1, OCR_SHAPE(NROW));
        OcrTensor dtable = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(V, D), g0);
        ocr_embedding_backward(&dtable, &dout, &ids, PAD);
        double td[V * D], dd[NROW * D], num[V * D];
        for (int i = 0; i < V * D; i++) td[i] = ocr_tensor_get_f32(&table, i);
        for (int i = 0; i < NROW * D; i++) dd[i] = ocr_tensor_get_f32(&dout, i);
        LossCtx ctx = {dd};
        ocr_test_numeric_grad(num, td, V * D, ref_loss, &ctx, 1e-6);
        float got[V * D];
        for (int i = 0; i < V * D; i++) got[i] = ocr_tensor_get_f32(&dtable, i) - g0[i];
        // At most 3 rows share an id: 3 f32 additions onto g0 (|.| < 3.5), then subtracting g0.
        double tol = 8 * 3.5 * ocr_test_dtype_eps(OCR_F32) + 1e-9;
        for (int i = 0; i < V * D; i++)
            ck_assert_msg(fabs(got[i] - num[i]) <= tol, "%s dtable[%d] = %g, numeric %g", ocr_dtype_name(kDts[k]), i,
                          got[i], num[i]);
        // The padding row got nothing at all (not even a +0 rounding).
        for (int j = 0; j < D; j++) ck_assert(ocr_tensor_get_f32(&dtable, PAD * D + j) == g0[PAD * D + j]);
        // Id 2 and 4 appear in no row: untouched.
        for (int j = 0; j < D; j++) ck_assert(ocr_tensor_get_f32(&dtable, 2 * D + j) == g0[2 * D + j]);
        ocr_tensor_free(&table);
        ocr_tensor_free(&dout);
        ocr_tensor_free(&ids);
        ocr_tensor_free(&dtable);
    }
}
END_TEST

// Low-precision gradient tables accumulate in f32 and round once (the CPU and GPU contract).
START_TEST(test_embedding_backward_lowp) {
    for (int k = 1; k < 3; k++) {
        float g[NROW * D];
        ocr_test_fill_uniform(g, NROW * D, 45 + k, -1.0f, 1.0f);
        OcrTensor dout = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(NROW, D), g);
        OcrTensor ids = ids_tensor(1, OCR_SHAPE(NROW));
        OcrTensor dt = ocr_test_tensor(kDts[k], 2, OCR_SHAPE(V, D), NULL);
        ocr_zero_tensor(&dt);
        ocr_embedding_backward(&dt, &dout, &ids, PAD);
        for (int v = 0; v < V; v++)
            for (int j = 0; j < D; j++) {
                float s = 0.0f;
                for (int n = 0; n < NROW; n++)
                    if (kIds[n] == v && v != PAD) s += g[n * D + j];
                OcrTensor one = ocr_test_tensor(kDts[k], 1, OCR_SHAPE(1), NULL);
                ocr_tensor_set_f32(&one, 0, s);
                ck_assert_msg(ocr_tensor_get_f32(&dt, v * D + j) == ocr_tensor_get_f32(&one, 0),
                              "%s dtable[%d,%d]", ocr_dtype_name(kDts[k]), v, j);
                ocr_tensor_free(&one);
            }
        ocr_tensor_free(&dout);
        ocr_tensor_free(&ids);
        ocr_tensor_free(&dt);
    }
}
END_TEST

// f16/bf16 tables and gradients go row by row (only the rows the ids use): the same bits as the
// whole-tensor reference (Global.cpu_exact_numerics), for a lookup into every output dtype and for
// a scatter-add onto an existing gradient whose untouched rows must stay as they were.
void ocr_cpu_set_exact_numerics(int on);  // kernels/cpu/isa.h
START_TEST(test_embedding_rows_match_reference) {
    for (int k = 1; k < 3; k++) {
        float w[V * D], g[NROW * D], start[V * D];
        ocr_test_fill_uniform(w, V * D, 61 + k, -2.0f, 2.0f);
        ocr_test_fill_uniform(g, NROW * D, 71 + k, -1.0f, 1.0f);
        ocr_test_fill_uniform(start, V * D, 81 + k, -3.0f, 3.0f);
        OcrTensor table = ocr_test_tensor(kDts[k], 2, OCR_SHAPE(V, D), w);
        OcrTensor ids = ids_tensor(1, OCR_SHAPE(NROW));
        OcrTensor dout = ocr_test_tensor(kDts[k], 2, OCR_SHAPE(NROW, D), g);
        OcrTensor got[2][3], dt[2];
        for (int ref = 0; ref < 2; ref++) {
            ocr_cpu_set_exact_numerics(ref);
            for (int k2 = 0; k2 < 3; k2++) {
                got[ref][k2] = ocr_test_tensor(kDts[k2], 2, OCR_SHAPE(NROW, D), NULL);
                ocr_test_poison(&got[ref][k2]);
                ocr_embedding_forward(&got[ref][k2], &ids, &table, PAD);
            }
            dt[ref] = ocr_test_tensor(kDts[k], 2, OCR_SHAPE(V, D), start);
            ocr_embedding_backward(&dt[ref], &dout, &ids, PAD);
            ocr_embedding_backward(&dt[ref], &dout, &ids, PAD);
        }
        ocr_cpu_set_exact_numerics(0);
        for (int k2 = 0; k2 < 3; k2++)
            ck_assert_msg(memcmp(got[0][k2].data, got[1][k2].data, ocr_tensor_bytes(&got[0][k2])) == 0,
                          "%s table into %s: rows differ from the reference", ocr_dtype_name(kDts[k]),
                          ocr_dtype_name(kDts[k2]));
        ck_assert_msg(memcmp(dt[0].data, dt[1].data, ocr_tensor_bytes(&dt[0])) == 0,
                      "%s gradient: rows differ from the reference", ocr_dtype_name(kDts[k]));
        for (int ref = 0; ref < 2; ref++) {
            for (int k2 = 0; k2 < 3; k2++) ocr_tensor_free(&got[ref][k2]);
            ocr_tensor_free(&dt[ref]);
        }
        ocr_tensor_free(&table), ocr_tensor_free(&ids), ocr_tensor_free(&dout);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("kernels_embedding");
    TCase *tc = tcase_create("embedding");
    tcase_add_test(tc, test_embedding_forward);
    tcase_add_test(tc, test_embedding_backward);
    tcase_add_test(tc, test_embedding_backward_lowp);
    tcase_add_test(tc, test_embedding_rows_match_reference);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

// The embedding lookup and its scatter-add backward on the GPU against the CPU twin: bit-identical
// in every dtype (the GPU sums each (id, column) in the CPU's row order from the gradient's
// value and stores once), with repeated ids, the padding id and no padding id, a table wider
// than a block, and more rows than ids (NRTR's B·T tokens over a small vocabulary).
#include "tests/gpu/gpu_test.h"

#ifdef OCR_HAVE_CUDA

static const ocr_dtype_t DTS[3] = {OCR_F32, OCR_F16, OCR_BF16};

static void emb_case(int64_t rows, int64_t V, int64_t D, int pad, ocr_dtype_t dt) {
    char what[128];
    snprintf(what, sizeof what, "embedding rows %lld V %lld D %lld pad %d %s", (long long)rows, (long long)V,
             (long long)D, pad, dtn(dt));
    int32_t *ids = malloc((size_t)rows * sizeof *ids);
    float *u = malloc((size_t)rows * sizeof *u);
    ocr_test_fill_uniform(u, rows, gpu_next_seed(), 0.0f, (float)V);
    for (int64_t i = 0; i < rows; i++) ids[i] = (int32_t)u[i] < V ? (int32_t)u[i] : (int32_t)V - 1;
    if (pad >= 0 && rows > 2) ids[1] = ids[rows - 1] = pad;  // padding rows for sure
    Twin id = twin_i32(1, OCR_SHAPE(rows), ids);
    Twin table = twin_uniform(dt, 2, OCR_SHAPE(V, D), -2, 2);
    Twin out = twin_new(dt, 2, OCR_SHAPE(rows, D));
    ocr_embedding_forward(&out.h, &id.h, &table.h, pad);
    ocr_embedding_forward(&out.d, &id.d, &table.d, pad);
    ck_assert_msg(twin_bits(&out, what), "%s forward", what);
    Twin dy = twin_uniform(dt, 2, OCR_SHAPE(rows, D), -1, 1);
    Twin dw = twin_uniform(dt, 2, OCR_SHAPE(V, D), -0.5f, 0.5f);  // accumulated into
    ocr_embedding_backward(&dw.h, &dy.h, &id.h, pad);
    ocr_embedding_backward(&dw.d, &dy.d, &id.d, pad);
    ck_assert_msg(twin_bits(&dw, what), "%s backward", what);
    twin_free(&id), twin_free(&table), twin_free(&out), twin_free(&dy), twin_free(&dw);
    free(ids);
    free(u);
}

START_TEST(test_embedding) {
    for (int k = 0; k < 3; k++) {
        emb_case(9, 7, 5, 0, DTS[k]);
        emb_case(9, 7, 5, -1, DTS[k]);
        emb_case(2 * 24, 101, 384, 0, DTS[k]);   // NRTR en: B 2, T 24, dim 384
        emb_case(700, 13, 300, 3, DTS[k]);       // many repeats per id
    }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("gpu_embedding");
    TCase *tc = tcase_create("embedding");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_embedding);
    suite_add_tcase(s, tc);
    return s;
}

#endif

GPU_TEST_MAIN("gpu_embedding", suite)

// Gradient buckets in one process (distributed/grad_sync.c over the single transport, where every
// all-reduce is the identity): how a real network's gradients are cut, and that each bucket
// starts from the backward's hook, in backward order, before the backward ends.
//   - every parameter is in exactly one bucket; a bucket is one dtype, consecutive parameters,
//     its bytes span exactly its parameters' gradients (padding included) and stay within the
//     bucket size unless a single parameter is larger;
//   - with 4 KiB buckets every bucket starts inside the backward (no parameter is left for the
//     end), bucket 0 (the head's) first and the last (the stem's) last;
//   - the gradients with the hook equal those without, bit for bit;
//   - the bytes counted per step are the sum of the buckets'.
#include <check.h>

#include "distributed/grad_sync.h"
#include "distributed/dist.h"
#include "tests/models/model_test_util.h"

static void backward_once(OcrModel *m, GradSync *g, uint64_t seed) {
    OcrTensor x = tm_images(2, 32, 160, seed);
    ck_assert_msg(ocr_model_forward(m, &x, 1) == OCR_OK, "%s", ocr_last_error());
    OcrTensor *dl = ocr_model_dlogits(m);
    float *v = malloc((size_t)ocr_tensor_numel(dl) * sizeof(float));
    ocr_test_fill_uniform(v, ocr_tensor_numel(dl), seed + 1, -0.01f, 0.01f);
    ocr_tensor_from_f32(dl, v);
    free(v);
    ocr_params_zero_grads(ocr_model_params(m));
    if (g) grad_sync_begin(g);
    ck_assert(ocr_model_backward(m) == OCR_OK);
    if (g) ck_assert_msg(grad_sync_finish(g) == OCR_OK, "%s", ocr_last_error());
    ocr_tensor_free(&x);
}

static void check_network(const char *config, const char *const *overrides) {
    OcrModel *m = tm_model(config, overrides), *ref = tm_model(config, overrides);
    OcrDist *d;
    OcrDistOptions o = {OCR_DIST_SINGLE, 10.0, ocr_cpu()};
    ck_assert(ocr_dist_open(&d, &o) == OCR_OK);
    GradSync g;
    const int64_t cap = 4096;
    ck_assert_msg(grad_sync_init(&g, d, m, cap) == OCR_OK, "%s", ocr_last_error());
    OcrParamTable *p = ocr_model_params(m);
    ck_assert_int_gt(g.n_buckets, 4);
    // Partition: buckets cover the table from its end, each parameter once, one dtype each.
    int expect_last = p->count - 1;
    for (int k = 0; k < g.n_buckets; k++) {
        const GradBucket *b = &g.buckets[k];
        ck_assert_int_eq(b->last, expect_last);
        ck_assert_int_le(b->first, b->last);
        ck_assert_int_eq(b->n_params, b->last - b->first + 1);
        OcrTensor lo = ocr_params_grad(p, b->first), hi = ocr_params_grad(p, b->last);
        for (int i = b->first; i <= b->last; i++) ck_assert_int_eq(ocr_params_grad(p, i).dtype, b->dtype);
        int64_t span = (char *)hi.data + ocr_tensor_numel(&hi) * (int64_t)ocr_dtype_size(hi.dtype) - (char *)lo.data;
        ck_assert(b->data == lo.data);
        ck_assert_int_eq(b->count * (int64_t)ocr_dtype_size(b->dtype), span);
        if (b->n_params > 1) ck_assert_int_le(span, cap);
        expect_last = b->first - 1;
    }
    ck_assert_int_eq(expect_last, -1);
    // Overlap: every bucket started from the hook, in bucket (= backward) order.
    backward_once(m, &g, 3);
    ck_assert_int_eq(g.stats.early_buckets, g.n_buckets);
    for (int k = 1; k < g.n_buckets; k++)
        ck_assert_msg(g.buckets[k].t_start >= g.buckets[k - 1].t_start, "bucket %d started before bucket %d", k, k - 1);
    ck_assert_int_eq(g.stats.bytes, grad_sync_total_bytes(&g));
    ck_assert_int_eq(g.stats.calls, g.n_buckets);
    // The same gradients as a backward without buckets.
    backward_once(ref, NULL, 3);
    ck_assert_msg(memcmp(p->grad, ocr_model_params(ref)->grad, p->bytes) == 0, "%s: the hook changed the gradients",
                  config);
    ocr_model_set_grad_ready_hook(m, NULL, NULL);
    grad_sync_free(&g);
    ocr_dist_close(d);
    ocr_model_free(m);
    ocr_model_free(ref);
}

START_TEST(demo_network_buckets) { check_network("demo.json", NULL); }
END_TEST

// PP-OCRv3's network: MobileNetV1Enhance with the SVTR neck (attention, layer norms).
START_TEST(svtr_neck_buckets) {
    const char *ov[] = {"Architecture.Backbone.scale=0.25", NULL};
    check_network("rec_ppocrv3_en.json", ov);
}
END_TEST

// A bucket size below one parameter's gradient is still valid (that parameter alone).
START_TEST(tiny_buckets_hold_one_parameter) {
    OcrModel *m = tm_model("demo.json", NULL);
    OcrDist *d;
    OcrDistOptions o = {OCR_DIST_SINGLE, 10.0, ocr_cpu()};
    ck_assert(ocr_dist_open(&d, &o) == OCR_OK);
    GradSync g;
    ck_assert(grad_sync_init(&g, d, m, 1) == OCR_OK);
    ck_assert_int_eq(g.n_buckets, ocr_model_params(m)->count);
    grad_sync_free(&g);
    GradSync none;
    ck_assert_int_eq(grad_sync_init(&none, d, m, 0), OCR_ERR_INVALID_ARG);
    ocr_dist_close(d);
    ocr_model_free(m);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("dist_grad_sync");
    TCase *tc = tcase_create("buckets");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, demo_network_buckets);
    tcase_add_test(tc, svtr_neck_buckets);
    tcase_add_test(tc, tiny_buckets_hold_one_parameter);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(suite()); }

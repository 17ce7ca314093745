// Sampler: MultiScaleSampler batch sizes, sequential batching and drop_last, per-epoch
// shuffles that are permutations and reproducible, sharding into equal disjoint shares,
// multi-scale plans with the same shape per batch on every rank, and replanning an epoch
// (what an exact resume relies on).
#include <stdlib.h>
#include <string.h>

#include "data/sampler.h"
#include "tests/common/test_util.h"

static OcrSamplerOptions single(int bs, int shuffle, int drop_last, int rank, int world) {
    OcrSamplerOptions o;
    memset(&o, 0, sizeof o);
    o.shuffle = shuffle;
    o.drop_last = drop_last;
    o.rank = rank;
    o.world_size = world;
    o.seed = 1234;
    o.num_scales = 1;
    o.scales[0] = (OcrBatchShape){320, 48, bs};
    return o;
}

static OcrSamplerOptions multi(int rank, int world, int drop_last) {
    OcrSamplerOptions o = single(1, 1, drop_last, rank, world);
    int w[3] = {320, 320, 320}, h[3] = {32, 48, 64};
    ck_assert_int_eq(ocr_sampler_multiscale_shapes(o.scales, w, h, 3, 12, 0, 8, 16), OCR_OK);
    o.num_scales = 3;
    return o;
}

START_TEST(test_multiscale_shapes) {
    OcrBatchShape s[3];
    int w[3] = {320, 320, 320}, h[3] = {32, 48, 64};
    ck_assert_int_eq(ocr_sampler_multiscale_shapes(s, w, h, 3, 192, 0, 8, 16), OCR_OK);
    ck_assert_int_eq(s[0].batch_size, 192);
    ck_assert_int_eq(s[1].batch_size, 128);
    ck_assert_int_eq(s[2].batch_size, 96);
    ck_assert_int_eq(s[2].height, 64);
    ck_assert_int_eq(ocr_sampler_multiscale_shapes(s, w, h, 3, 192, 1, 8, 16), OCR_OK);
    ck_assert_int_eq(s[2].batch_size, 192);
    // Flooring to divided_factor: 330 → 328, 50 → 48; batch int(320·32·100/(328·48)) = 65.
    int w2[2] = {320, 330}, h2[2] = {32, 50};
    ck_assert_int_eq(ocr_sampler_multiscale_shapes(s, w2, h2, 2, 100, 0, 8, 16), OCR_OK);
    ck_assert_int_eq(s[1].width, 328);
    ck_assert_int_eq(s[1].height, 48);
    ck_assert_int_eq(s[1].batch_size, 65);
    int w3[1] = {320}, h3[1] = {8};
    ck_assert_int_eq(ocr_sampler_multiscale_shapes(s, w3, h3, 1, 100, 0, 8, 16), OCR_ERR_CONFIG);
}
END_TEST

START_TEST(test_sequential_and_drop_last) {
    OcrSampler s;
    OcrSamplerOptions o = single(4, 0, 0, 0, 1);
    ck_assert_int_eq(ocr_sampler_init(&s, &o), OCR_OK);
    ck_assert_int_eq(ocr_sampler_set_epoch(&s, 0, 10), OCR_OK);
    ck_assert_int_eq(s.num_batches, 3);
    OcrSamplerBatch b;
    int next = 0;
    for (int k = 0; k < 3; k++) {
        ocr_sampler_batch(&s, k, &b);
        ck_assert_int_eq(b.size, k < 2 ? 4 : 2);
        ck_assert_int_eq(b.height, 48);
        for (int i = 0; i < b.size; i++) {
            ck_assert_int_eq(b.slots[i], next);
            ck_assert_int_eq(ocr_sampler_index(&s, b.slots[i]), next);
            next++;
        }
    }
    ocr_sampler_free(&s);
    o.drop_last = 1;
    ck_assert_int_eq(ocr_sampler_init(&s, &o), OCR_OK);
    ck_assert_int_eq(ocr_sampler_set_epoch(&s, 0, 10), OCR_OK);
    ck_assert_int_eq(s.num_batches, 2);
    ck_assert_int_eq(s.rank_samples, 8);
    ck_assert_int_eq(ocr_sampler_set_epoch(&s, 0, 3), OCR_OK);  // fewer than one batch
    ck_assert_int_eq(s.num_batches, 0);
    ck_assert_int_eq(ocr_sampler_set_epoch(&s, 0, 0), OCR_ERR_INVALID_ARG);
    ocr_sampler_free(&s);
    o.rank = 2;
    o.world_size = 2;
    ck_assert_int_eq(ocr_sampler_init(&s, &o), OCR_ERR_INVALID_ARG);
}
END_TEST

START_TEST(test_shuffle_reproducible) {
    OcrSampler a, b;
    OcrSamplerOptions o = single(7, 1, 0, 0, 1);
    ck_assert_int_eq(ocr_sampler_init(&a, &o), OCR_OK);
    ck_assert_int_eq(ocr_sampler_init(&b, &o), OCR_OK);
    int n = 1000;
    ck_assert_int_eq(ocr_sampler_set_epoch(&a, 3, n), OCR_OK);
    ck_assert_int_eq(ocr_sampler_set_epoch(&b, 5, n), OCR_OK);  // another epoch first
    ck_assert_int_eq(ocr_sampler_set_epoch(&b, 3, n), OCR_OK);  // then replan epoch 3
    char *seen = calloc((size_t)n, 1);
    int moved = 0;
    for (int i = 0; i < n; i++) {
        int64_t ia = ocr_sampler_index(&a, i), ib = ocr_sampler_index(&b, i);
        ck_assert_int_eq(ia, ib);
        ck_assert(ia >= 0 && ia < n);
        ck_assert(!seen[ia]);
        seen[ia] = 1;
        moved += ia != i;
    }
    ck_assert_int_gt(moved, n / 2);
    // Another epoch gives another order.
    ck_assert_int_eq(ocr_sampler_set_epoch(&b, 4, n), OCR_OK);
    int same = 0;
    for (int i = 0; i < n; i++) same += ocr_sampler_index(&a, i) == ocr_sampler_index(&b, i);
    ck_assert_int_lt(same, 20);
    free(seen);
    ocr_sampler_free(&a);
    ocr_sampler_free(&b);
}
END_TEST

// Every rank's samples: equal counts, pairwise disjoint, batch counts equal.
static void check_shards(OcrSamplerOptions (*make)(int rank, int world, int drop_last), int world, int n,
                         int drop_last, int expect_total) {
    char *owner = calloc((size_t)n, 1);
    int64_t batches = -1, per = -1, total = 0;
    for (int r = 0; r < world; r++) {
        OcrSampler s;
        OcrSamplerOptions o = make(r, world, drop_last);
        ck_assert_int_eq(ocr_sampler_init(&s, &o), OCR_OK);
        ck_assert_int_eq(ocr_sampler_set_epoch(&s, 7, n), OCR_OK);
        if (batches < 0) batches = s.num_batches, per = s.rank_samples;
        ck_assert_int_eq(s.num_batches, batches);
        ck_assert_int_eq(s.rank_samples, per);
        for (int64_t k = 0; k < s.num_batches; k++) {
            OcrSamplerBatch b;
            ocr_sampler_batch(&s, k, &b);
            ck_assert_int_gt(b.size, 0);
            for (int i = 0; i < b.size; i++) {
                int64_t idx = ocr_sampler_index(&s, b.slots[i]);
                ck_assert_msg(!owner[idx], "sample %lld on two ranks", (long long)idx);
                owner[idx] = (char)(r + 1);
                total++;
            }
        }
        ocr_sampler_free(&s);
    }
    if (expect_total >= 0) ck_assert_int_eq(total, expect_total);
    else ck_assert(total % world == 0 && total <= n && total > n / 2);
    free(owner);
}

static OcrSamplerOptions make_single(int rank, int world, int drop_last) {
    return single(5, 1, drop_last, rank, world);
}

START_TEST(test_sharding_disjoint) {
    // 103 samples, 4 ranks: 25 each (3 left out this epoch); batches 5,5,5,5,5.
    check_shards(make_single, 4, 103, 0, 100);
    // 4·27 = 108 usable of 110; rounds of 20: 5 full (100), remainder 8 → 2 per rank.
    check_shards(make_single, 4, 110, 0, 108);
    check_shards(make_single, 4, 110, 1, 100);
    check_shards(make_single, 1, 37, 0, 37);
    check_shards(multi, 3, 200, 0, 198);
    check_shards(multi, 3, 200, 1, -1);  // how many a dropped last batch holds depends on the scale order
}
END_TEST

START_TEST(test_multiscale_plan) {
    // Batch sizes 12, 8, 6 for heights 32, 48, 64 (first_bs 12). 2 ranks, 100 samples:
    // 50 each; cycle 12 + 8 + 6 = 26 per round: 26, 26 → 52 > 50, so the second round ends
    // with a partial batch.
    OcrSampler s[2];
    for (int r = 0; r < 2; r++) {
        OcrSamplerOptions o = multi(r, 2, 0);
        ck_assert_int_eq(ocr_sampler_init(&s[r], &o), OCR_OK);
        ck_assert_int_eq(ocr_sampler_set_epoch(&s[r], 1, 100), OCR_OK);
    }
    ck_assert_int_eq(s[0].num_batches, s[1].num_batches);
    ck_assert_int_eq(s[0].rank_samples, 50);
    int seen_h[3] = {0}, partial = 0;
    for (int64_t k = 0; k < s[0].num_batches; k++) {
        OcrSamplerBatch a, b;
        ocr_sampler_batch(&s[0], k, &a);
        ocr_sampler_batch(&s[1], k, &b);
        ck_assert_int_eq(a.height, b.height);
        ck_assert_int_eq(a.size, b.size);
        int want = a.height == 32 ? 12 : a.height == 48 ? 8 : 6;
        ck_assert_int_le(a.size, want);
        partial += a.size < want;
        seen_h[(a.height - 32) / 16]++;
    }
    ck_assert_int_eq(partial, 1);
    ck_assert(seen_h[0] >= 2 && seen_h[1] >= 2 && seen_h[2] >= 1);
    // drop_last removes exactly the partial batch.
    OcrSampler d;
    OcrSamplerOptions o = multi(0, 2, 1);
    ck_assert_int_eq(ocr_sampler_init(&d, &o), OCR_OK);
    ck_assert_int_eq(ocr_sampler_set_epoch(&d, 1, 100), OCR_OK);
    ck_assert_int_eq(d.num_batches, s[0].num_batches - 1);
    for (int64_t k = 0; k < d.num_batches; k++) {
        OcrSamplerBatch a;
        ocr_sampler_batch(&d, k, &a);
        ck_assert_int_eq(a.size, a.height == 32 ? 12 : a.height == 48 ? 8 : 6);
    }
    ocr_sampler_free(&d);
    ocr_sampler_free(&s[0]);
    ocr_sampler_free(&s[1]);
}
END_TEST

int main(void) {
    Suite *s = suite_create("data_sampler");
    TCase *tc = tcase_create("sampler");
    tcase_add_test(tc, test_multiscale_shapes);
    tcase_add_test(tc, test_sequential_and_drop_last);
    tcase_add_test(tc, test_shuffle_reproducible);
    tcase_add_test(tc, test_sharding_disjoint);
    tcase_add_test(tc, test_multiscale_plan);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

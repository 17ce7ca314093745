// The NCCL transport on one GPU: a world of one process (MPI singleton), ncclAllReduce on device
// buffers of f32, f16 and bf16 through the distributed/ interface, ordered after the producer stream,
// and the f64 sums of synchronised batch norm's statistics.
// The sum over one rank is the buffer itself, bit for bit, so the check is exact: it proves the
// plumbing (unique id broadcast, communicator, streams and events, dtype mapping, counters).
// Several GPUs are checked by scripts/device-check.sh (2-rank training) where they are lent.
// Without CUDA, NCCL or a GPU it prints SKIP and checks that asking for NCCL fails clearly.
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "core/rng.h"
#include "distributed/dist.h"
#include "tests/common/test_util.h"
#ifdef OCR_HAVE_CUDA
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#endif

START_TEST(nccl_refused_where_absent) {
    if (ocr_dist_backend_available(OCR_DIST_NCCL)) return;
    OcrDist *d = NULL;
    OcrDistOptions o = {OCR_DIST_NCCL, 10.0, ocr_cpu()};
    ck_assert_int_eq(ocr_dist_open(&d, &o), OCR_ERR_UNSUPPORTED);
    ck_assert_ptr_null(d);
    ck_assert_msg(strstr(ocr_last_error(), "NCCL") != NULL, "message: %s", ocr_last_error());
}
END_TEST

#if defined(OCR_HAVE_CUDA) && defined(OCR_HAVE_NCCL)
START_TEST(nccl_one_gpu_allreduce_is_identity) {
    ocr_backends_init(0);
    if (ocr_cuda_device_count() == 0) {
        printf("SKIP: dist_nccl: no usable CUDA device; the NCCL all-reduce did not run\n");
        return;
    }
    OcrDist *d = NULL;
    OcrDistOptions o = {OCR_DIST_NCCL, 60.0, ocr_cuda_device(0)};
    ck_assert_msg(ocr_dist_open(&d, &o) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(ocr_dist_world_size(d), 1);
    ocr_dist_set_stream(d, ocr_cuda_get_stream(0));
    const ocr_dtype_t dtypes[] = {OCR_F32, OCR_F16, OCR_BF16};
    const int64_t n = 100003;  // not a multiple of anything NCCL chunks by
    OcrRng rng = ocr_rng_make(7, 1);
    int64_t bytes = 0;
    for (int k = 0; k < 3; k++) {
        size_t es = ocr_dtype_size(dtypes[k]);
        unsigned char *h = malloc((size_t)n * es), *back = malloc((size_t)n * es);
        for (int64_t i = 0; i < n; i++) {
            float v = (float)(ocr_rng_next_double(&rng) * 8.0 - 4.0);
            if (dtypes[k] == OCR_F32) ((float *)h)[i] = v;
            else if (dtypes[k] == OCR_F16) ((ocr_f16_t *)h)[i] = ocr_f32_to_f16(v);
            else ((ocr_bf16_t *)h)[i] = ocr_f32_to_bf16(v);
        }
        OcrTensor t;
        ck_assert(ocr_tensor_alloc(&t, dtypes[k], ocr_cuda_device(0), 1, (int64_t[]){n}, OCR_MEM_GRADS) == OCR_OK);
        ck_assert_int_eq(ocr_cuda_memcpy(t.data, h, (size_t)n * es), 0);
        OcrDistRequest req;
        ck_assert_msg(ocr_dist_allreduce_start(d, t.data, n, dtypes[k], "the test bucket", &req) == OCR_OK, "%s",
                      ocr_last_error());
        ck_assert_msg(ocr_dist_wait(d, &req) == OCR_OK, "%s", ocr_last_error());
        ck_assert_int_eq(ocr_cuda_synchronize(0), 0);
        ck_assert_int_eq(ocr_cuda_memcpy(back, t.data, (size_t)n * es), 0);
        ck_assert_msg(memcmp(h, back, (size_t)n * es) == 0, "%s: the 1-rank sum changed the buffer",
                      ocr_dtype_name(dtypes[k]));
        bytes += n * (int64_t)es;
        ocr_tensor_free(&t);
        free(h);
        free(back);
    }
    OcrDistCounters c = ocr_dist_counters(d);
    ck_assert_int_eq(c.allreduce_bytes, bytes);
    ck_assert_int_eq(c.allreduce_calls, 3);
    // Synchronised BN's f64 statistics sums: device memory, stream-ordered, counted apart.
    const int64_t ns = 2 * 37 + 1;
    double hs[2 * 37 + 1], hb[2 * 37 + 1];
    for (int64_t i = 0; i < ns; i++) hs[i] = ocr_rng_next_double(&rng) * 1e3 - 5e2;
    OcrTensor st;
    ck_assert(ocr_tensor_alloc(&st, OCR_F32, ocr_cuda_device(0), 1, (int64_t[]){2 * ns}, OCR_MEM_DATA) == OCR_OK);
    ck_assert_int_eq(ocr_cuda_memcpy(st.data, hs, sizeof hs), 0);
    ck_assert_msg(ocr_dist_sum_stats_f64(d, st.data, ns, "the test statistics") == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(ocr_cuda_synchronize(0), 0);
    ck_assert_int_eq(ocr_cuda_memcpy(hb, st.data, sizeof hb), 0);
    ck_assert_msg(memcmp(hs, hb, sizeof hs) == 0, "f64: the 1-rank sum changed the buffer");
    c = ocr_dist_counters(d);
    ck_assert_int_eq(c.stats_bytes, ns * 8);
    ck_assert_int_eq(c.stats_calls, 1);
    ck_assert_int_eq(c.allreduce_bytes, bytes);  // not gradient traffic
    ocr_tensor_free(&st);
    ocr_dist_close(d);
}
END_TEST
#endif

int main(void) {
#if !(defined(OCR_HAVE_CUDA) && defined(OCR_HAVE_NCCL))
    printf("SKIP: dist_nccl: this build has no %s; only the refusal is checked\n",
#ifdef OCR_HAVE_CUDA
           "NCCL"
#else
           "CUDA backend"
#endif
    );
#endif
    Suite *s = suite_create("dist_nccl");
    TCase *tc = tcase_create("nccl");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, nccl_refused_where_absent);
#if defined(OCR_HAVE_CUDA) && defined(OCR_HAVE_NCCL)
    tcase_add_test(tc, nccl_one_gpu_allreduce_is_identity);
#endif
    suite_add_tcase(s, tc);
    // CUDA contexts and MPI do not survive fork(): run in this process.
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

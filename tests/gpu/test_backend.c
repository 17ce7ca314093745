// The CUDA backend itself: the numerics shared with core (conversions, Philox, stochastic
// rounding) checked on the host, which needs no GPU; and on a GPU: the device description,
// scratch charged to the WORKSPACE category and released, the current stream, the debug-sync
// mode, and the device dispatch of CPU tensors.
#include "tests/gpu/gpu_test.h"

#ifdef OCR_HAVE_CUDA

START_TEST(test_host_selftest) {
    char msg[256];
    int rc = ocr_cuda_host_selftest(msg, sizeof msg);
    ck_assert_msg(rc == 0, "host self-test: %s", msg);
}
END_TEST

START_TEST(test_device_info) {
    OcrCudaDeviceInfo info;
    ck_assert_int_eq(ocr_cuda_device_info(0, &info), 0);
    ck_assert(info.name[0] != '\0');
    ck_assert(info.major >= 5);
    ck_assert(info.total_memory > 0 && info.free_memory <= info.total_memory);
    ck_assert(info.multiprocessors > 0);
}
END_TEST

START_TEST(test_workspace_tracked) {
    ocr_cuda_release_workspace();
    const ocr_device_t dev = ocr_cuda_device(0);
    ck_assert_int_eq(ocr_mem_stats(dev).current[OCR_MEM_WORKSPACE], 0);
    // A GEMM with mixed dtypes needs scratch (widened operands) and cuBLAS's workspace.
    Twin a = twin_uniform(OCR_F16, 2, OCR_SHAPE(64, 32), -1, 1), b = twin_uniform(OCR_F32, 2, OCR_SHAPE(32, 16), -1, 1);
    Twin c = twin_new(OCR_F32, 2, OCR_SHAPE(64, 16));
    ocr_gemm(&c.d, &a.d, &b.d, 0, 0, 1.0f, 0.0f);
    ocr_gemm(&c.h, &a.h, &b.h, 0, 0, 1.0f, 0.0f);
    ck_assert(twin_close(&c, 1e-5, 1e-5, "gemm after release"));
    ck_assert(ocr_mem_stats(dev).current[OCR_MEM_WORKSPACE] > 0);
    ocr_cuda_release_workspace();
    ck_assert_int_eq(ocr_mem_stats(dev).current[OCR_MEM_WORKSPACE], 0);
    // Everything works again after a release.
    twin_poison(&c);
    ocr_gemm(&c.d, &a.d, &b.d, 0, 0, 1.0f, 0.0f);
    ocr_gemm(&c.h, &a.h, &b.h, 0, 0, 1.0f, 0.0f);
    ck_assert(twin_close(&c, 1e-5, 1e-5, "gemm after a second release"));
    twin_free(&a), twin_free(&b), twin_free(&c);
}
END_TEST

START_TEST(test_stream_and_sync_debug) {
    ck_assert(ocr_cuda_get_stream(0) == NULL);
    ocr_cuda_set_sync_debug(1);
    ck_assert_int_eq(ocr_cuda_sync_debug(), 1);
    Twin x = twin_uniform(OCR_F32, 1, OCR_SHAPE(1000), -2, 2), y = twin_new(OCR_F16, 1, OCR_SHAPE(1000));
    ocr_activation_forward(&y.h, &x.h, OCR_ACT_GELU);
    ocr_activation_forward(&y.d, &x.d, OCR_ACT_GELU);
    ck_assert(twin_close(&y, 2e-6, 1e-7, "gelu in sync-debug mode"));
    ocr_cuda_set_sync_debug(0);
    twin_free(&x), twin_free(&y);
}
END_TEST

START_TEST(test_cpu_tensors_stay_on_cpu) {
    // With a GPU present, CPU tensors still run the CPU kernels (their data is host memory: a
    // GPU kernel on it would fault).
    OcrTensor a = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(4), (const float[]){1, 2, 3, 4});
    OcrTensor b = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(4), (const float[]){10, 20, 30, 40});
    ocr_add_forward(&a, &a, &b);
    ck_assert(((float *)a.data)[3] == 44.0f);
    ocr_tensor_free(&a), ocr_tensor_free(&b);
}
END_TEST

int main(void) {
    Suite *s = suite_create("gpu_backend");
    TCase *host = tcase_create("host");
    tcase_set_timeout(host, 120);
    tcase_add_test(host, test_host_selftest);
    suite_add_tcase(s, host);
    if (gpu_available("gpu_backend")) {
        TCase *tc = tcase_create("device");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_device_info);
        tcase_add_test(tc, test_workspace_tracked);
        tcase_add_test(tc, test_stream_and_sync_debug);
        tcase_add_test(tc, test_cpu_tensors_stay_on_cpu);
        suite_add_tcase(s, tc);
    }
    return gpu_run_suite(s);
}

#else

GPU_TEST_MAIN("gpu_backend", NULL)

#endif

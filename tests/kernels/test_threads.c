// Global.threads limits every thread pool the CPU kernels use: OpenMP (our loops and oneDNN,
// which is its GNU OpenMP build) and OpenBLAS's own pthreads (ocr_backends_init).
//
// With one thread, the process's CPU time over a stretch of GEMMs and convolutions (f32 through
// OpenBLAS, bf16 through oneDNN where the CPU has it) cannot exceed the wall time by more than
// timer granularity: a second pool thread that computes or spins would add its time. Load from
// other processes only lowers the ratio (wall time grows), so the check cannot fail from a busy
// machine; the 10 % allowance covers page-fault time and clock granularity. The measurement
// starts after OpenBLAS's start-up spin (see workload).
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "kernels/backend.h"
#include "kernels/cpu/isa.h"
#include "kernels/ops.h"
#include "tests/common/test_util.h"

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// A second of work for the kernels that have pools of their own.
static void workload(double *cpu, double *wall) {
    OcrTensor a = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(384, 384), NULL);
    OcrTensor b = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(384, 384), NULL);
    OcrTensor c = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(384, 384), NULL);
    OcrTensor ah = ocr_test_tensor(OCR_BF16, 2, OCR_SHAPE(384, 384), NULL);
    OcrTensor bh = ocr_test_tensor(OCR_BF16, 2, OCR_SHAPE(384, 384), NULL);
    OcrTensor x = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(4, 24, 80, 64), NULL);
    OcrTensor w = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(64, 3, 3, 64), NULL);
    OcrTensor y = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(4, 24, 80, 64), NULL);
    float *fill[] = {a.data, b.data, x.data, w.data};
    int64_t nfill[] = {384 * 384, 384 * 384, 4 * 24 * 80 * 64, 64 * 9 * 64};
    for (int i = 0; i < 4; i++) ocr_test_fill_uniform(fill[i], nfill[i], 11 + (uint64_t)i, -1.0f, 1.0f);
    ocr_tensor_from_f32(&ah, a.data);
    ocr_tensor_from_f32(&bh, b.data);
    Conv2dParams p = {1, 1, 1, 1, 1};
    // Warm caches and oneDNN's primitive before timing.
    ocr_gemm(&c, &a, &b, 0, 0, 1.0f, 0.0f);
    ocr_gemm(&c, &ah, &bh, 0, 0, 1.0f, 0.0f);
    ocr_conv2d_forward(&y, &x, &w, NULL, p);
    // OpenBLAS (pthreads build) starts its workers for OPENBLAS_NUM_THREADS when it is loaded and
    // lets each spin for 2^28 cycles (its THREAD_TIMEOUT, ~0.1 s) before it sleeps, whatever
    // openblas_set_num_threads says later: that start-up spin is not a pool at work, so the
    // timing starts after it (measured: 0.07 CPU-s of 0.25 s in 3 of 8 runs without this wait,
    // with OPENBLAS_NUM_THREADS=2 in the environment; none with OPENBLAS_NUM_THREADS=1).
    struct timespec settle = {0, 500000000};
    nanosleep(&settle, NULL);
    double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);
    for (int r = 0; r < 20; r++) {
        ocr_gemm(&c, &a, &b, 0, 1, 1.0f, 0.0f);
        ocr_gemm(&c, &ah, &bh, 0, 0, 1.0f, 0.0f);
        ocr_conv2d_forward(&y, &x, &w, NULL, p);
    }
    *cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    *wall = clock_s(CLOCK_MONOTONIC) - w0;
    OcrTensor *all[] = {&a, &b, &c, &ah, &bh, &x, &w, &y};
    for (int i = 0; i < 8; i++) ocr_tensor_free(all[i]);
}

START_TEST(test_one_thread) {
    ocr_backends_init(1);
    ck_assert_int_eq(omp_get_max_threads(), 1);
    ck_assert_int_eq(openblas_get_num_threads(), 1);
    ck_assert_int_eq(ocr_cpu_threads(), 1);
    double cpu, wall;
    workload(&cpu, &wall);
    char isa[160];
    ocr_backend_cpu_isa(isa, sizeof isa);
    printf("1 thread: CPU %.3f s, wall %.3f s, ratio %.3f (%s)\n", cpu, wall, cpu / wall, isa);
    ck_assert_msg(cpu <= 1.10 * wall + 0.01, "one thread used %.3f CPU-s in %.3f s: another pool is running", cpu,
                  wall);
}
END_TEST

START_TEST(test_two_threads) {
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        printf("SKIP: one CPU: OpenBLAS caps its pool at the CPUs it sees\n");
        return;
    }
    ocr_backends_init(2);
    ck_assert_int_eq(omp_get_max_threads(), 2);
    ck_assert_int_eq(openblas_get_num_threads(), 2);
    double cpu, wall;
    workload(&cpu, &wall);
    // At most two threads compute; their sum cannot exceed twice the wall time.
    printf("2 threads: CPU %.3f s, wall %.3f s, ratio %.3f\n", cpu, wall, cpu / wall);
    ck_assert_msg(cpu <= 2.0 * 1.10 * wall + 0.01, "two threads used %.3f CPU-s in %.3f s", cpu, wall);
}
END_TEST

int main(void) {
    Suite *s = suite_create("threads");
    TCase *tc = tcase_create("pools");
    tcase_add_test(tc, test_one_thread);
    tcase_add_test(tc, test_two_threads);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

// Helpers for the GPU suites: every CUDA op is compared with its CPU twin on the same fresh
// random inputs.
//
// - A Twin is a CPU tensor and a CUDA tensor of the same dtype and shape. Inputs are filled
//   on the CPU and uploaded; outputs are poisoned first (NaN on the CPU, 0xFF bytes = NaN in
//   every float dtype on the GPU) so an element the op does not write fails the comparison.
// - twin_close compares the GPU result with the CPU one: |gpu − cpu| <= atol·scale + rtol·|cpu|
//   with scale = max |cpu| of the tensor (so atol is relative to the tensor's magnitude), plus
//   one unit of rounding of the dtype (a value just at a rounding boundary may round either
//   way after a different summation order). NaN must meet NaN, inf the same inf.
// - twin_bits demands identical bits (ops whose CPU and GPU arithmetic is the same sequence
//   of IEEE operations: data movement, casts, dropout masks, pooling, Adam).
// - Random seeds are fresh per run (time-based) unless OCR_GPU_TEST_SEED is set; the seed is
//   printed so a failure can be replayed.
// - CUDA contexts do not survive fork(): the suites run with CK_NOFORK (gpu_run_suite), and
//   they skip, printing why, when the build has no CUDA or no GPU is usable.
#ifndef OCR_TESTS_GPU_TEST_H
#define OCR_TESTS_GPU_TEST_H

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/rng.h"
#include "kernels/backend.h"
#include "kernels/ops.h"
#include "tests/common/test_util.h"

#ifdef OCR_HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"

typedef struct {
    OcrTensor h, d;
} Twin;

static uint64_t gpu_seed_base;
static uint64_t gpu_seed_counter;

static inline uint64_t gpu_next_seed(void) {
    if (!gpu_seed_base) {
        const char *e = getenv("OCR_GPU_TEST_SEED");
        gpu_seed_base = e ? strtoull(e, NULL, 0) : (uint64_t)time(NULL) * 2654435761u + (uint64_t)clock();
        if (!gpu_seed_base) gpu_seed_base = 1;
        printf("gpu tests: seed %llu (set OCR_GPU_TEST_SEED to replay)\n", (unsigned long long)gpu_seed_base);
    }
    return gpu_seed_base + 7919 * ++gpu_seed_counter;
}

// 1 when a GPU is usable; otherwise prints why the suite skips.
static inline int gpu_available(const char *suite) {
    ocr_backends_init(0);
    if (ocr_cuda_device_count() == 0) {
        printf("SKIP: %s: no usable CUDA device (no GPU or no driver); the GPU checks did not run\n", suite);
        return 0;
    }
    OcrCudaDeviceInfo info;
    char versions[256];
    if (ocr_cuda_device_info(0, &info) == 0)
        printf("%s: %s, compute capability %d.%d, %d SMs; %s\n", suite, info.name, info.major, info.minor,
               info.multiprocessors, ocr_cuda_library_versions(versions, sizeof versions));
    return 1;
}

static inline int gpu_run_suite(Suite *s) {
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

static inline void gpu_upload(OcrTensor *d, const OcrTensor *h) {
    ck_assert_int_eq(ocr_cuda_memcpy(d->data, h->data, ocr_tensor_bytes(h)), 0);
}

static inline void gpu_download(OcrTensor *h, const OcrTensor *d) {
    ck_assert_int_eq(ocr_cuda_synchronize(d->device.index), 0);
    ck_assert_int_eq(ocr_cuda_memcpy(h->data, d->data, ocr_tensor_bytes(d)), 0);
}

// Host NaN / device 0xFF bytes (NaN in f32, f16 and bf16; -1 in int32).
static inline void twin_poison(Twin *t) {
    ocr_test_poison(&t->h);
    ck_assert_int_eq(ocr_cuda_memset(t->d.device.index, t->d.data, 0xFF, ocr_tensor_bytes(&t->d)), 0);
}

// A poisoned pair.
static inline Twin twin_new(ocr_dtype_t dt, int ndim, const int64_t *shape) {
    Twin t;
    ocr_status_t st = ocr_tensor_alloc(&t.h, dt, ocr_cpu(), ndim, shape, OCR_MEM_ACTIVATIONS);
    ck_assert_msg(st == OCR_OK, "host alloc: %s", ocr_last_error());
    st = ocr_tensor_alloc(&t.d, dt, ocr_cuda_device(0), ndim, shape, OCR_MEM_ACTIVATIONS);
    ck_assert_msg(st == OCR_OK, "device alloc: %s", ocr_last_error());
    twin_poison(&t);
    return t;
}

// Values given as floats (rounded to the dtype), on both sides.
static inline Twin twin_values(ocr_dtype_t dt, int ndim, const int64_t *shape, const float *v) {
    Twin t = twin_new(dt, ndim, shape);
    ocr_tensor_from_f32(&t.h, v);
    gpu_upload(&t.d, &t.h);
    return t;
}

// Fresh uniform values in [lo, hi).
static inline Twin twin_uniform(ocr_dtype_t dt, int ndim, const int64_t *shape, float lo, float hi) {
    Twin t = twin_new(dt, ndim, shape);
    const int64_t n = ocr_tensor_numel(&t.h);
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    ocr_test_fill_uniform(v, n, gpu_next_seed(), lo, hi);
    ocr_tensor_from_f32(&t.h, v);
    free(v);
    gpu_upload(&t.d, &t.h);
    return t;
}

// int32 values on both sides.
static inline Twin twin_i32(int ndim, const int64_t *shape, const int32_t *v) {
    Twin t = twin_new(OCR_I32, ndim, shape);
    memcpy(t.h.data, v, ocr_tensor_bytes(&t.h));
    gpu_upload(&t.d, &t.h);
    return t;
}

// Copies the CPU side to the GPU side (after the test changed it).
static inline void twin_sync_up(Twin *t) { gpu_upload(&t->d, &t->h); }

static inline void twin_free(Twin *t) {
    ocr_tensor_free(&t->h);
    ocr_tensor_free(&t->d);
}

// The GPU side as a new host tensor.
static inline OcrTensor twin_fetch(const Twin *t) {
    OcrTensor g;
    ocr_status_t st = ocr_tensor_alloc(&g, t->d.dtype, ocr_cpu(), t->d.ndim, t->d.shape, OCR_MEM_ACTIVATIONS);
    ck_assert_msg(st == OCR_OK, "host alloc: %s", ocr_last_error());
    gpu_download(&g, &t->d);
    return g;
}

static inline double gpu_dtype_ulp(ocr_dtype_t dt) {
    return dt == OCR_F16 ? ldexp(1.0, -10) : dt == OCR_BF16 ? ldexp(1.0, -7) : 0.0;
}

// GPU result within tolerance of the CPU result (see the top of this file).
static inline int twin_close(const Twin *t, double rtol, double atol, const char *what) {
    const int64_t n = ocr_tensor_numel(&t->h);
    OcrTensor g = twin_fetch(t);
    float *a = malloc((size_t)(n > 0 ? n : 1) * sizeof(float)), *b = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    ocr_tensor_to_f32(&g, a);
    ocr_tensor_to_f32(&t->h, b);
    double scale = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(b[i]) && fabs(b[i]) > scale) scale = fabs(b[i]);
    const double r = rtol + gpu_dtype_ulp(t->h.dtype);
    const double at = atol * scale + (t->h.dtype == OCR_F16 ? ldexp(1.0, -24) : 0.0) + 1e-30;
    int ok = 1;
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double x = a[i], y = b[i];
        int good;
        if (isnan(y))
            good = isnan(x);
        else if (isinf(y))
            good = x == y;
        else
            good = isfinite(x) && fabs(x - y) <= at + r * fabs(y);
        if (isfinite(x) && isfinite(y) && fabs(y) + scale > 0) {
            const double e = fabs(x - y) / (at + r * fabs(y));
            if (e > worst) worst = e;
        }
        if (!good && ok) {
            printf("%s: mismatch at %lld of %lld: gpu %.9g cpu %.9g (rtol %g, atol %g x max|cpu| %g; seed %llu)\n",
                   what, (long long)i, (long long)n, x, y, r, atol, scale, (unsigned long long)gpu_seed_base);
            ok = 0;
        }
    }
    if (ok && getenv("OCR_GPU_TEST_VERBOSE")) printf("%s: ok, worst %.3f of the tolerance\n", what, worst);
    free(a);
    free(b);
    ocr_tensor_free(&g);
    return ok;
}

// GPU result bit-identical to the CPU result.
static inline int twin_bits(const Twin *t, const char *what) {
    OcrTensor g = twin_fetch(t);
    const size_t bytes = ocr_tensor_bytes(&t->h), es = ocr_dtype_size(t->h.dtype);
    int ok = 1;
    if (memcmp(g.data, t->h.data, bytes) != 0) {
        for (size_t i = 0; i < bytes; i += es)
            if (memcmp((const char *)g.data + i, (const char *)t->h.data + i, es) != 0) {
                uint32_t x = 0, y = 0;
                memcpy(&x, (const char *)g.data + i, es);
                memcpy(&y, (const char *)t->h.data + i, es);
                printf("%s: bits differ at element %zu: gpu 0x%08x cpu 0x%08x (%s; seed %llu)\n", what, i / es, x, y,
                       ocr_dtype_name(t->h.dtype), (unsigned long long)gpu_seed_base);
                break;
            }
        ok = 0;
    }
    ocr_tensor_free(&g);
    return ok;
}

static inline const char *dtn(ocr_dtype_t d) { return ocr_dtype_name(d); }

#define GPU_TEST_MAIN(name, suite_fn)              \
    int main(void) {                               \
        if (!gpu_available(name)) return 0;        \
        return gpu_run_suite(suite_fn());          \
    }


// ---- whole models on both devices (tests/gpu/test_multihead.c, test_sar.c) ----------------------

// A tensor on any device as host f32 values (malloc'd).
static inline float *gpu_host_f32(const OcrTensor *t) {
    int64_t n = ocr_tensor_numel(t);
    OcrTensor h;
    ck_assert_int_eq(ocr_tensor_alloc(&h, t->dtype, ocr_cpu(), t->ndim, t->shape, OCR_MEM_DATA), OCR_OK);
    ocr_copy_bytes(ocr_cpu(), h.data, t->device, t->data, ocr_tensor_bytes(t));
    float *v = malloc((size_t)n * sizeof *v);
    ocr_tensor_to_f32(&h, v);
    ocr_tensor_free(&h);
    return v;
}

// A model output on the GPU against the CPU's: max |GPU − CPU| <= 1e-4 · max |CPU| + 1e-6.
static inline void gpu_model_close(const OcrTensor *cpu, const OcrTensor *gpu, const char *what) {
    ck_assert(ocr_tensor_same_shape(cpu, gpu));
    int64_t n = ocr_tensor_numel(cpu);
    float *a = gpu_host_f32(cpu), *b = gpu_host_f32(gpu);
    double scale = 0, worst = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(a[i]));
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)a[i] - b[i]));
    printf("%-52s max |GPU − CPU| %.3g of max %.3g\n", what, worst, scale);
    ck_assert_msg(worst <= 1e-4 * scale + 1e-6, "%s: GPU differs by %g (max %g)", what, worst, scale);
    free(a);
    free(b);
}

// Fills a tensor on any device with uniform values in [-1, 1) from `seed`.
static inline void gpu_fill_uniform(OcrTensor *t, uint64_t seed) {
    int64_t n = ocr_tensor_numel(t);
    float *v = malloc((size_t)n * sizeof *v);
    ocr_rng_fill_uniform(v, (size_t)n, seed, 3, 0, -1.0f, 1.0f);
    OcrTensor h;
    ck_assert_int_eq(ocr_tensor_alloc(&h, t->dtype, ocr_cpu(), t->ndim, t->shape, OCR_MEM_DATA), OCR_OK);
    ocr_tensor_from_f32(&h, v);
    ocr_copy_bytes(t->device, t->data, ocr_cpu(), h.data, ocr_tensor_bytes(t));
    ocr_tensor_free(&h);
    free(v);
}

#else  // no CUDA in this build

#define GPU_TEST_MAIN(name, suite_fn)                                                        \
    int main(void) {                                                                         \
        printf("SKIP: %s: this build has no CUDA backend; the GPU checks did not run\n", name); \
        return 0;                                                                            \
    }

#endif
#endif

// kernels/cuda/cublas_loader.cu without a GPU: a CUDA-enabled program does not map cuBLAS until
// the backend first calls it (so CPU runs do not pay its ~150 MiB of resident memory), and the
// first call opens the library this build was made with and forwards to it.
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "tests/common/test_util.h"

#ifdef OCR_HAVE_CUDA
#include <cublas_v2.h>

// 1 when a mapping of libcublas is in this process's address space.
static int cublas_mapped(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    ck_assert_msg(f, "cannot read /proc/self/maps");
    char line[1024];
    int found = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "libcublas")) found = 1;
    fclose(f);
    return found;
}

START_TEST(test_opened_at_first_use) {
    ck_assert_msg(!cublas_mapped(), "libcublas is mapped before the backend used it (linked, not opened)");
    int major = -1;
    const cublasStatus_t st = cublasGetProperty(MAJOR_VERSION, &major);
    if (st != CUBLAS_STATUS_SUCCESS) {
        // The toolkit's cuBLAS should be where CMake found it; say why it was not.
        ck_abort_msg("cuBLAS did not load: %s", cublasGetStatusString(st));
    }
    ck_assert_int_eq(major, CUBLAS_VER_MAJOR);
    ck_assert_msg(cublas_mapped(), "cuBLAS answered but is not mapped");
    const char *s = cublasGetStatusString(CUBLAS_STATUS_NOT_SUPPORTED);
    ck_assert_msg(s && strlen(s) > 0, "no status string from the library");
}
END_TEST

int main(void) {
    Suite *s = suite_create("gpu_cublas_loader");
    TCase *tc = tcase_create("cublas_loader");
    tcase_add_test(tc, test_opened_at_first_use);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

#else
int main(void) {
    printf("SKIP: gpu_cublas_loader: this build has no CUDA backend\n");
    return 0;
}
#endif

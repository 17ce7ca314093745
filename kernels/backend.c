#include "kernels/backend.h"

#include <omp.h>

#ifdef OCR_HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

void openblas_set_num_threads(int num_threads);

static int initialised;
static int cpu_threads = 1;

void ocr_backends_init(int threads) {
    if (threads > 0) omp_set_num_threads(threads);
    cpu_threads = omp_get_max_threads();
    // BLAS calls happen outside our parallel regions; let it use the same cores.
    openblas_set_num_threads(cpu_threads);
    if (initialised) return;
    initialised = 1;
#ifdef OCR_HAVE_CUDA
    ocr_cuda_backend_register();
#endif
}

int ocr_cpu_threads(void) { return initialised ? cpu_threads : omp_get_max_threads(); }

const char *ocr_build_backends(void) {
#ifdef OCR_HAVE_CUDA
    return "cpu+cuda";
#else
    return "cpu";
#endif
}

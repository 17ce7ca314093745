#include "kernels/backend.h"

#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cpu/isa.h"

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

void ocr_backend_set_cpu_exact_numerics(int on) { ocr_cpu_set_exact_numerics(on); }
void ocr_backend_cpu_isa(char *buf, size_t n) { ocr_cpu_isa_summary(buf, n); }
const char *ocr_backend_cpu_emulated_reason(ocr_dtype_t dt) { return ocr_cpu_isa_emulated_reason(dt); }

ocr_status_t ocr_backend_device_info(ocr_device_t d, OcrDeviceInfo *info) {
    memset(info, 0, sizeof *info);
    if (d.type != OCR_DEVICE_CUDA) return ocr_set_error(OCR_ERR_UNSUPPORTED, "device information: not a GPU device");
#ifdef OCR_HAVE_CUDA
    OcrCudaDeviceInfo ci;
    if (ocr_cuda_device_info(d.index, &ci)) return ocr_wrap_error(OCR_ERR_CUDA, "cuda:%d", d.index);
    snprintf(info->name, sizeof info->name, "%s", ci.name);
    info->cc_major = ci.major;
    info->cc_minor = ci.minor;
    info->total_memory = (int64_t)ci.total_memory;
    info->free_memory = (int64_t)ci.free_memory;
    info->multiprocessors = ci.multiprocessors;
    info->driver_version = ci.driver_version;
    info->runtime_version = ci.runtime_version;
    return OCR_OK;
#else
    return ocr_set_error(OCR_ERR_UNSUPPORTED, "cuda:%d: this build has no CUDA backend", d.index);
#endif
}

void ocr_backend_library_versions(ocr_device_t d, char *buf, size_t n) {
    if (n) buf[0] = '\0';
#ifdef OCR_HAVE_CUDA
    if (d.type == OCR_DEVICE_CUDA) ocr_cuda_library_versions(buf, n);
#else
    (void)d;
#endif
}

void ocr_backend_set_allow_tf32(int allow) {
#ifdef OCR_HAVE_CUDA
    ocr_cuda_set_allow_tf32(allow);
#else
    (void)allow;
#endif
}

ocr_status_t ocr_backend_set_device(ocr_device_t d) {
    if (d.type != OCR_DEVICE_CUDA) return OCR_OK;
#ifdef OCR_HAVE_CUDA
    if (ocr_cuda_set_device(d.index)) return ocr_wrap_error(OCR_ERR_CUDA, "cuda:%d", d.index);
    return OCR_OK;
#else
    return ocr_set_error(OCR_ERR_UNSUPPORTED, "cuda:%d: this build has no CUDA backend", d.index);
#endif
}

ocr_status_t ocr_backend_synchronize(ocr_device_t d) {
    if (d.type != OCR_DEVICE_CUDA) return OCR_OK;
#ifdef OCR_HAVE_CUDA
    if (ocr_cuda_synchronize(d.index)) return ocr_wrap_error(OCR_ERR_CUDA, "cuda:%d", d.index);
    return OCR_OK;
#else
    return ocr_set_error(OCR_ERR_UNSUPPORTED, "cuda:%d: this build has no CUDA backend", d.index);
#endif
}

void ocr_backend_release_buffers(ocr_device_t d) {
#ifdef OCR_HAVE_CUDA
    if (d.type == OCR_DEVICE_CUDA) ocr_cuda_release_buffers();
#else
    (void)d;
#endif
}

const char *ocr_build_backends(void) {
#ifdef OCR_HAVE_CUDA
    return "cpu+cuda";
#else
    return "cpu";
#endif
}

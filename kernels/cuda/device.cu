// CUDA device discovery and the tracked device allocator.
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/cuda_backend.h"

extern "C" {
#include "core/error.h"
#include "core/memory.h"
}

// One check macro for runtime calls: reports the statement, file, line and device.
#define OCR_CUDA_CHECK_STATUS(stmt)                                                                 \
    ([&]() -> int {                                                                                 \
        cudaError_t ocr_cuda_err_ = (stmt);                                                        \
        if (ocr_cuda_err_ != cudaSuccess) {                                                        \
            int ocr_dev_ = -1;                                                                      \
            cudaGetDevice(&ocr_dev_);                                                               \
            ocr_set_error(OCR_ERR_CUDA, "%s failed: %s (%s:%d, device %d)", #stmt,                  \
                          cudaGetErrorString(ocr_cuda_err_), __FILE__, __LINE__, ocr_dev_);          \
            return 0;                                                                               \
        }                                                                                           \
        return 1;                                                                                   \
    }())

extern "C" int ocr_cuda_count_devices(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();  // clear the sticky "no driver" error
        return 0;
    }
    return n;
}

static void *device_alloc(int device, size_t bytes) {
    void *p = NULL;
    if (!OCR_CUDA_CHECK_STATUS(cudaSetDevice(device))) return NULL;
    if (!OCR_CUDA_CHECK_STATUS(cudaMalloc(&p, bytes))) return NULL;
    return p;
}

static void device_free(int device, void *ptr) {
    cudaSetDevice(device);
    cudaFree(ptr);
}

extern "C" int ocr_cuda_backend_register(void) {
    ocr_mem_register_device_allocator(OCR_DEVICE_CUDA, device_alloc, device_free);
    ocr_device_register_cuda_counter(ocr_cuda_count_devices);
    return ocr_cuda_count_devices();
}

extern "C" int ocr_cuda_device_info(int device, OcrCudaDeviceInfo *info) {
    memset(info, 0, sizeof *info);
    cudaDeviceProp prop;
    if (!OCR_CUDA_CHECK_STATUS(cudaGetDeviceProperties(&prop, device))) return 1;
    snprintf(info->name, sizeof info->name, "%s", prop.name);
    info->major = prop.major;
    info->minor = prop.minor;
    info->multiprocessors = prop.multiProcessorCount;
    if (!OCR_CUDA_CHECK_STATUS(cudaSetDevice(device))) return 1;
    if (!OCR_CUDA_CHECK_STATUS(cudaMemGetInfo(&info->free_memory, &info->total_memory))) return 1;
    cudaDriverGetVersion(&info->driver_version);
    cudaRuntimeGetVersion(&info->runtime_version);
    return 0;
}

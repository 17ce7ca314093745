// The CUDA backend's C interface. No CUDA types appear here: C code includes this header
// and links the launchers, which are compiled by nvcc with extern "C" linkage.
#ifndef OCR_KERNELS_CUDA_BACKEND_H
#define OCR_KERNELS_CUDA_BACKEND_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CUstream_st *ocr_stream_t;

// Registers the device allocator and device counter with core; returns the device count.
int ocr_cuda_backend_register(void);
// Usable devices (0 when the driver is missing or no GPU is present; never fails).
int ocr_cuda_count_devices(void);

typedef struct {
    char name[256];
    int major, minor;              // compute capability
    size_t total_memory, free_memory;
    int multiprocessors;
    int driver_version, runtime_version;
} OcrCudaDeviceInfo;
// 0 on success; fills a message otherwise (see ocr_last_error).
int ocr_cuda_device_info(int device, OcrCudaDeviceInfo *info);

#ifdef __cplusplus
}
#endif
#endif

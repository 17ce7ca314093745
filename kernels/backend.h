// Backend start-up: registers the compiled backends (the CUDA allocator and device
// counter when this build has CUDA) and sets the CPU thread count.
#ifndef OCR_KERNELS_BACKEND_H
#define OCR_KERNELS_BACKEND_H

#include <stddef.h>

#include "core/device.h"
#include "core/tensor.h"

// Idempotent. threads <= 0 keeps OpenMP's default (OMP_NUM_THREADS or all cores).
void ocr_backends_init(int threads);
// Threads the CPU ops use.
int ocr_cpu_threads(void);
// "cpu" or "cpu+cuda" — what this build contains.
const char *ocr_build_backends(void);

// ---- devices, backend-neutral (training/ asks here; only kernels/ knows the CUDA backend) ----------
// What a GPU device is. The CPU has no entry (its threads and ISA are above).
typedef struct {
    char name[256];
    int cc_major, cc_minor;  // compute capability
    int64_t total_memory, free_memory;
    int multiprocessors;
    int driver_version, runtime_version;
} OcrDeviceInfo;
// Fills info for a GPU device. OCR_ERR_UNSUPPORTED for the CPU or when this build has no
// backend for the device; OCR_ERR_CUDA (with the driver's message) when the query fails.
ocr_status_t ocr_backend_device_info(ocr_device_t d, OcrDeviceInfo *info);
// The device backend's library versions ("driver 13000, runtime 13000, cuBLAS ..."); "" for
// the CPU.
void ocr_backend_library_versions(ocr_device_t d, char *buf, size_t n);
// TF32 tensor cores for f32 GEMMs and convolutions on GPUs (Global.allow_tf32); no effect on
// the CPU.
void ocr_backend_set_allow_tf32(int allow);
// Makes a GPU device current for the calling thread; OCR_OK on the CPU.
ocr_status_t ocr_backend_set_device(ocr_device_t d);
// Waits for everything enqueued on the device; OCR_OK at once on the CPU.
ocr_status_t ocr_backend_synchronize(ocr_device_t d);
// Frees the device's cached scratch and library workspaces, keeping the algorithm choices (the
// trainer calls it after each run so each run's peak memory is its own); no-op on the CPU.
void ocr_backend_release_buffers(ocr_device_t d);

// Global.cpu_exact_numerics: 1 runs CPU f16/bf16 GEMMs and convolutions on the emulated
// reference (fp32 compute, GPU rounding), 0 (default) on BF16/FP16 hardware where the CPU has it.
void ocr_backend_set_cpu_exact_numerics(int on);
// What the CPU's GEMMs and convolutions run on per dtype, for `ocrtrain info` and reports:
// "fp32: AVX-512, bf16: AMX, fp16: AVX512-FP16" ("emulated" where the hardware lacks a dtype).
void ocr_backend_cpu_isa(char *buf, size_t n);
// Why AMP on the CPU is emulated for dt (f16/bf16), or NULL when it runs on the hardware.
const char *ocr_backend_cpu_emulated_reason(ocr_dtype_t dt);

#endif

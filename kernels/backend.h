// Backend start-up: registers the compiled backends (the CUDA allocator and device
// counter when this build has CUDA) and sets the CPU thread count.
#ifndef OCR_KERNELS_BACKEND_H
#define OCR_KERNELS_BACKEND_H

#include "core/device.h"

// Idempotent. threads <= 0 keeps OpenMP's default (OMP_NUM_THREADS or all cores).
void ocr_backends_init(int threads);
// Threads the CPU ops use.
int ocr_cpu_threads(void);
// "cpu" or "cpu+cuda" — what this build contains.
const char *ocr_build_backends(void);

#endif

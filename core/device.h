// Devices: the CPU and CUDA GPUs ("cpu", "cuda:0", "gpu", "auto").
#ifndef OCR_CORE_DEVICE_H
#define OCR_CORE_DEVICE_H

typedef enum { OCR_DEVICE_CPU = 0, OCR_DEVICE_CUDA = 1 } ocr_device_type_t;
#define OCR_DEVICE_TYPE_COUNT 2
#define OCR_MAX_DEVICES 16

typedef struct {
    ocr_device_type_t type;
    int index;
} ocr_device_t;

static inline ocr_device_t ocr_cpu(void) { ocr_device_t d = {OCR_DEVICE_CPU, 0}; return d; }
static inline ocr_device_t ocr_cuda_device(int index) { ocr_device_t d = {OCR_DEVICE_CUDA, index}; return d; }
static inline int ocr_device_equal(ocr_device_t a, ocr_device_t b) { return a.type == b.type && a.index == b.index; }

// Number of usable CUDA devices (0 without a GPU, a driver, or a CUDA build; the CUDA
// backend registers the real counter in ocr_backends_init, kernels/backend.h).
int ocr_cuda_device_count(void);
void ocr_device_register_cuda_counter(int (*fn)(void));

// Parses "cpu", "cuda", "cuda:N", "gpu" (= cuda:0) and "auto" (cuda:0 when a GPU is
// present, else cpu). Returns OCR_ERR_INVALID_ARG with a message for anything else, and
// OCR_ERR_NOT_FOUND when a GPU is asked for and none is usable.
#include "core/error.h"
ocr_status_t ocr_device_parse(const char *text, ocr_device_t *out);
// "cpu" or "cuda:N" into buf.
const char *ocr_device_name(ocr_device_t device, char *buf, int bufsize);

#endif

#include "core/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The CUDA backend registers its device counter at start-up (kernels/backend.c); core itself
// never links the CUDA runtime.
static int (*cuda_device_count_fn)(void);
void ocr_device_register_cuda_counter(int (*fn)(void)) { cuda_device_count_fn = fn; }
int ocr_cuda_device_count(void) { return cuda_device_count_fn ? cuda_device_count_fn() : 0; }

ocr_status_t ocr_device_parse(const char *text, ocr_device_t *out) {
    if (!text) return ocr_set_error(OCR_ERR_INVALID_ARG, "no device given");
    if (strcmp(text, "cpu") == 0) {
        *out = ocr_cpu();
        return OCR_OK;
    }
    if (strcmp(text, "auto") == 0) {
        *out = ocr_cuda_device_count() > 0 ? ocr_cuda_device(0) : ocr_cpu();
        return OCR_OK;
    }
    int index = 0;
    if (strcmp(text, "gpu") == 0 || strcmp(text, "cuda") == 0) {
        index = 0;
    } else if (strncmp(text, "cuda:", 5) == 0 || strncmp(text, "gpu:", 4) == 0) {
        const char *num = strchr(text, ':') + 1;
        char *end = NULL;
        long v = strtol(num, &end, 10);
        if (*num == '\0' || *end != '\0' || v < 0 || v >= OCR_MAX_DEVICES)
            return ocr_set_error(OCR_ERR_INVALID_ARG, "bad device index in '%s'", text);
        index = (int)v;
    } else {
        return ocr_set_error(OCR_ERR_INVALID_ARG,
                             "unknown device '%s' (expected cpu, gpu, cuda:N or auto)", text);
    }
    int count = ocr_cuda_device_count();
    if (index >= count)
        return ocr_set_error(OCR_ERR_NOT_FOUND, "device '%s' asked for, but %d CUDA device%s usable%s",
                             text, count, count == 1 ? " is" : "s are",
#ifdef OCR_HAVE_CUDA
                             ""
#else
                             " (this build has no CUDA backend)"
#endif
        );
    *out = ocr_cuda_device(index);
    return OCR_OK;
}

const char *ocr_device_name(ocr_device_t device, char *buf, int bufsize) {
    if (device.type == OCR_DEVICE_CPU)
        snprintf(buf, (size_t)bufsize, "cpu");
    else
        snprintf(buf, (size_t)bufsize, "cuda:%d", device.index);
    return buf;
}

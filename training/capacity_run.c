#include "training/capacity_run.h"

#include <string.h>

#include "kernels/backend.h"

int64_t capacity_default_budget(const char *device) {
#ifdef OCR_HAVE_CUDA
    if (strncmp(device, "cuda", 4) == 0) {
        ocr_device_t d;
        OcrDeviceInfo ci;
        if (ocr_device_parse(device, &d) == OCR_OK && ocr_backend_device_info(d, &ci) == OCR_OK)
            return (int64_t)ci.free_memory;
    }
#else
    (void)device;
#endif
    return 0;
}

ocr_status_t capacity_run(const OcrConfig *cfg, int64_t memory, int verify, CapacityRun *out) {
    memset(out, 0, sizeof *out);
    for (int i = 0; i < CAPACITY_PRECISIONS; i++)
        OCR_TRY(capacity_plan(cfg, capacity_precision_name(i), memory, &out->cp[i]));
    if (verify <= 0) return OCR_OK;
    out->verified = 1;
    for (int i = 0; i < CAPACITY_PRECISIONS; i++) {
        int64_t b = out->cp[i].max_batch < verify ? out->cp[i].max_batch : verify;
        if (b < 1) b = 1;
        OcrMemStats ms;
        OCR_TRY(capacity_measure(cfg, out->cp[i].name, (int)b, &ms));
        out->batch[i] = (int)b;
        out->measured[i] = ms.peak_total;
        out->planned[i] = capacity_bytes(&out->cp[i], b);
        double planned = (double)out->planned[i], peak = (double)ms.peak_total;
        if (planned > (1 + CAPACITY_VERIFY_TOLERANCE) * peak || planned < (1 - CAPACITY_VERIFY_TOLERANCE) * peak)
            out->disagree = 1;
    }
    return OCR_OK;
}

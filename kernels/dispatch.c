// The op interface's entry points (kernels/ops.h, kernels/ctc.h, kernels/input.h): each
// checks that its tensors share one device and runs the CPU kernel (kernels/cpu, ocr_cpu_<op>)
// or the CUDA one (kernels/cuda, ocr_cuda_<op>). The check is a short loop over the op's tensor
// pointers, so the CPU path costs a few comparisons per call.
//
// The functions are generated from the op table (kernels/op_table.h), one per row; the entry
// points below the table are the ones it cannot express, each saying why.
#include <string.h>

#include "core/error.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/ctc.h"
#include "kernels/input.h"
#include "kernels/ops.h"

#ifdef OCR_HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_ops.h"
#endif

// Aborts naming the op and both devices.
static void device_mismatch(const char *op, const OcrTensor *a, const OcrTensor *b) {
    char da[32], db[32];
    ocr_device_name(a->device, da, sizeof da);
    ocr_device_name(b->device, db, sizeof db);
    ocr_abort_("tensors on one device", __FILE__, __LINE__, " %s: tensors on %s and %s", op, da, db);
}

// 1 when the op runs on CUDA. Every non-NULL tensor must be on the device of the first.
static int route(const char *op, int n, const OcrTensor *const *ts) {
    const OcrTensor *first = NULL;
    for (int i = 0; i < n; i++) {
        const OcrTensor *t = ts[i];
        if (!t) continue;
        if (!first)
            first = t;
        else if (t->device.type != first->device.type || t->device.index != first->device.index)
            device_mismatch(op, first, t);
    }
    if (!first || first->device.type == OCR_DEVICE_CPU) return 0;
#ifndef OCR_HAVE_CUDA
    OCR_ASSERT(0, "%s: tensors on cuda:%d, but this build has no CUDA backend", op, first->device.index);
#endif
    return 1;
}

// Same for a list of tensors (NULL entries skipped) and one more tensor (may be NULL).
static int route_list(const char *op, const OcrTensor *const *list, int count, const OcrTensor *extra) {
    const OcrTensor *first = extra;
    for (int i = 0; i < count; i++) {
        const OcrTensor *t = list[i];
        if (!t) continue;
        if (!first)
            first = t;
        else if (t->device.type != first->device.type || t->device.index != first->device.index)
            device_mismatch(op, first, t);
    }
    return route(op, 1, &first);
}

#define ON_CUDA(op, ...) \
    route(op, (int)(sizeof((const OcrTensor *const[]){__VA_ARGS__}) / sizeof(const OcrTensor *)), \
          (const OcrTensor *const[]){__VA_ARGS__})

// Runs the CUDA call in CUDA builds; route() has already aborted in the others.
#ifdef OCR_HAVE_CUDA
#define CUDA_CALL(call) call
#define CUDA_RETURN(call) return call
#else
#define CUDA_CALL(call) ((void)0)
#define CUDA_RETURN(call) ((void)0)
#endif

// ---- the op table ------------------------------------------------------------------------------
// Each row becomes `ret ocr_<name> params`: route the row's tensors (op_name_ names the op in a
// mismatch message), then call the CUDA or the CPU function with the row's arguments.
#define DEVICE_OF(...) ON_CUDA(op_name_, __VA_ARGS__)
#define DEVICE_OF_LIST(list, count, extra) route_list(op_name_, (const OcrTensor *const *)(list), count, extra)

#define OCR_OP_AS(family, name, kernel, params, args, route) \
    void ocr_##name params {                                 \
        const char *const op_name_ = #kernel;                \
        if (route)                                           \
            CUDA_CALL(ocr_cuda_##kernel args);               \
        else                                                 \
            ocr_cpu_##kernel args;                           \
    }
#define OCR_OP(family, name, params, args, route) OCR_OP_AS(family, name, name, params, args, route)
#define OCR_OP_RET(family, ret, name, params, args, route) \
    ret ocr_##name params {                                \
        const char *const op_name_ = #name;                \
        if (route) CUDA_RETURN(ocr_cuda_##name args);      \
        return ocr_cpu_##name args;                        \
    }

#include "kernels/op_table.h"

#undef OCR_OP
#undef OCR_OP_AS
#undef OCR_OP_RET
#undef DEVICE_OF
#undef DEVICE_OF_LIST

// ---- written out ----------------------------------------------------------------------------------

// The forms without synchronised statistics: the table's _sync functions with sync = NULL (the
// table maps an entry point to one pair of backend functions; these call another entry point).
void ocr_batchnorm2d_act_forward(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd, OcrTensor *save_scale,
                                 OcrTensor *running_mean, OcrTensor *running_var, const OcrTensor *inp,
                                 const OcrTensor *gamma, const OcrTensor *beta, ocr_activation_t act, float momentum,
                                 float eps, int training) {
    ocr_batchnorm2d_act_forward_sync(out, save_mean, save_rstd, save_scale, running_mean, running_var, inp, gamma, beta,
                                     act, momentum, eps, training, NULL);
}

void ocr_batchnorm2d_act_backward(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                                  const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta,
                                  const OcrTensor *save_mean, const OcrTensor *save_rstd, const OcrTensor *save_scale,
                                  ocr_activation_t act, ocr_dtype_t mid, int training) {
    ocr_batchnorm2d_act_backward_sync(dinp, dgamma, dbeta, dout, inp, gamma, beta, save_mean, save_rstd, save_scale,
                                      act, mid, training, NULL);
}

// Without padding: the padded form with widths = NULL (as above, another entry point).
void ocr_input_normalize_forward(OcrTensor *out, const OcrTensor *inp) {
    ocr_input_normalize_padded_forward(out, inp, NULL);
}

// Copies route on devices, not tensors, and CPU to CPU needs no kernel.
void ocr_copy_bytes(ocr_device_t dst_device, void *dst, ocr_device_t src_device, const void *src, size_t bytes) {
    if (bytes == 0) return;
    if (dst_device.type == OCR_DEVICE_CPU && src_device.type == OCR_DEVICE_CPU) {
        memmove(dst, src, bytes);
        return;
    }
#ifdef OCR_HAVE_CUDA
    int d = dst_device.type == OCR_DEVICE_CUDA ? dst_device.index : -1;
    int s = src_device.type == OCR_DEVICE_CUDA ? src_device.index : -1;
    if (ocr_cuda_copy_bytes(d, dst, s, src, bytes) != 0)
        ocr_abort_("copy_bytes", __FILE__, __LINE__, " %zu bytes: %s", bytes, ocr_last_error());
#else
    OCR_ASSERT(0, "copy_bytes: a CUDA device, but this build has no CUDA backend");
#endif
}

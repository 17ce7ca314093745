#include "kernels/backend.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/isa.h"

#ifdef OCR_HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/train_step.h"
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

int ocr_backend_have_gpu(void) {
#ifdef OCR_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

// ---- asynchronous execution ------------------------------------------------------------------------
// Every function takes the device so that the CPU, whose handles are all NULL, is told apart
// from a GPU's default stream (also NULL).

#ifdef OCR_HAVE_CUDA
#define IS_GPU(d) ((d).type == OCR_DEVICE_CUDA)
// A CUDA call's status: its message is set already (kernels/cuda), the caller wraps it.
#define CUDA_STATUS(call) ((call) ? OCR_ERR_CUDA : OCR_OK)
#else
#define IS_GPU(d) 0
static ocr_status_t no_gpu_backend(ocr_device_t d, const char *what) {
    return ocr_set_error(OCR_ERR_UNSUPPORTED, "%s on cuda:%d: this build has no CUDA backend", what, d.index);
}
#endif

int ocr_backend_is_async(ocr_device_t d) { return d.type == OCR_DEVICE_CUDA; }

ocr_status_t ocr_backend_stream_create(ocr_device_t d, OcrStream **out) {
    *out = NULL;
    if (d.type != OCR_DEVICE_CUDA) return OCR_OK;
#ifdef OCR_HAVE_CUDA
    return CUDA_STATUS(ocr_cuda_stream_create(d.index, (ocr_stream_t *)out));
#else
    return no_gpu_backend(d, "stream");
#endif
}

void ocr_backend_stream_destroy(ocr_device_t d, OcrStream *s) {
#ifdef OCR_HAVE_CUDA
    if (IS_GPU(d)) ocr_cuda_stream_destroy((ocr_stream_t)s);
#else
    (void)d, (void)s;
#endif
}

OcrStream *ocr_backend_get_stream(ocr_device_t d) {
#ifdef OCR_HAVE_CUDA
    if (IS_GPU(d)) return (OcrStream *)ocr_cuda_get_stream(d.index);
#else
    (void)d;
#endif
    return NULL;
}

void ocr_backend_set_stream(ocr_device_t d, OcrStream *s) {
#ifdef OCR_HAVE_CUDA
    if (IS_GPU(d)) ocr_cuda_set_stream(d.index, (ocr_stream_t)s);
#else
    (void)d, (void)s;
#endif
}

ocr_status_t ocr_backend_stream_synchronize(ocr_device_t d, OcrStream *s) {
    if (d.type != OCR_DEVICE_CUDA) return OCR_OK;
#ifdef OCR_HAVE_CUDA
    return CUDA_STATUS(ocr_cuda_stream_synchronize((ocr_stream_t)s));
#else
    (void)s;
    return no_gpu_backend(d, "stream");
#endif
}

ocr_status_t ocr_backend_event_create(ocr_device_t d, OcrEvent **out) {
    *out = NULL;
    if (d.type != OCR_DEVICE_CUDA) return OCR_OK;
#ifdef OCR_HAVE_CUDA
    return CUDA_STATUS(ocr_cuda_event_create(d.index, (ocr_event_t *)out));
#else
    return no_gpu_backend(d, "event");
#endif
}

void ocr_backend_event_destroy(ocr_device_t d, OcrEvent *e) {
#ifdef OCR_HAVE_CUDA
    if (IS_GPU(d)) ocr_cuda_event_destroy((ocr_event_t)e);
#else
    (void)d, (void)e;
#endif
}

ocr_status_t ocr_backend_event_record(ocr_device_t d, OcrEvent *e, OcrStream *s) {
    if (d.type != OCR_DEVICE_CUDA) return OCR_OK;
#ifdef OCR_HAVE_CUDA
    return CUDA_STATUS(ocr_cuda_event_record((ocr_event_t)e, (ocr_stream_t)s));
#else
    (void)e, (void)s;
    return no_gpu_backend(d, "event");
#endif
}

ocr_status_t ocr_backend_stream_wait_event(ocr_device_t d, OcrStream *s, OcrEvent *e) {
    if (d.type != OCR_DEVICE_CUDA) return OCR_OK;
#ifdef OCR_HAVE_CUDA
    return CUDA_STATUS(ocr_cuda_stream_wait_event((ocr_stream_t)s, (ocr_event_t)e));
#else
    (void)e, (void)s;
    return no_gpu_backend(d, "event");
#endif
}

ocr_status_t ocr_backend_event_synchronize(ocr_device_t d, OcrEvent *e) {
    if (d.type != OCR_DEVICE_CUDA) return OCR_OK;
#ifdef OCR_HAVE_CUDA
    return CUDA_STATUS(ocr_cuda_event_synchronize((ocr_event_t)e));
#else
    (void)e;
    return no_gpu_backend(d, "event");
#endif
}

void *ocr_backend_host_alloc(ocr_device_t d, size_t bytes) {
    if (d.type != OCR_DEVICE_CUDA) {
        void *p = malloc(bytes ? bytes : 1);
        if (!p) ocr_set_error(OCR_ERR_OOM, "out of host memory (%zu bytes)", bytes);
        return p;
    }
#ifdef OCR_HAVE_CUDA
    return ocr_cuda_host_alloc(bytes);
#else
    no_gpu_backend(d, "page-locked memory");
    return NULL;
#endif
}

void ocr_backend_host_free(ocr_device_t d, void *p) {
    if (d.type != OCR_DEVICE_CUDA) {
        free(p);
        return;
    }
#ifdef OCR_HAVE_CUDA
    ocr_cuda_host_free(p);
#endif
}

ocr_status_t ocr_backend_memcpy_async(ocr_device_t d, void *dst, const void *src, size_t bytes, OcrStream *s) {
    if (d.type != OCR_DEVICE_CUDA) {
        if (bytes) memmove(dst, src, bytes);
        return OCR_OK;
    }
#ifdef OCR_HAVE_CUDA
    return CUDA_STATUS(ocr_cuda_memcpy_async(dst, src, bytes, (ocr_stream_t)s));
#else
    (void)dst, (void)src, (void)bytes, (void)s;
    return no_gpu_backend(d, "copy");
#endif
}

ocr_status_t ocr_backend_graph_capture_begin(ocr_device_t d, OcrStream *s) {
#ifdef OCR_HAVE_CUDA
    if (IS_GPU(d)) return CUDA_STATUS(ocr_cuda_graph_capture_begin((ocr_stream_t)s));
#else
    (void)s;
#endif
    return ocr_set_error(OCR_ERR_UNSUPPORTED, "graph capture: %s", d.type == OCR_DEVICE_CUDA
                         ? "this build has no CUDA backend" : "the CPU runs every op when it is called");
}

ocr_status_t ocr_backend_graph_capture_end(ocr_device_t d, OcrStream *s, OcrGraph **out) {
    *out = NULL;
#ifdef OCR_HAVE_CUDA
    if (IS_GPU(d)) return CUDA_STATUS(ocr_cuda_graph_capture_end((ocr_stream_t)s, (ocr_graph_exec_t *)out));
#else
    (void)s;
#endif
    return ocr_set_error(OCR_ERR_UNSUPPORTED, "graph capture: not on %s",
                         d.type == OCR_DEVICE_CUDA ? "this build" : "the CPU");
}

ocr_status_t ocr_backend_graph_launch(ocr_device_t d, OcrGraph *g, OcrStream *s) {
#ifdef OCR_HAVE_CUDA
    if (IS_GPU(d)) return CUDA_STATUS(ocr_cuda_graph_launch((ocr_graph_exec_t)g, (ocr_stream_t)s));
#else
    (void)g, (void)s;
#endif
    return ocr_set_error(OCR_ERR_UNSUPPORTED, "graph launch: not on %s",
                         d.type == OCR_DEVICE_CUDA ? "this build" : "the CPU");
}

void ocr_backend_graph_destroy(ocr_device_t d, OcrGraph *g) {
#ifdef OCR_HAVE_CUDA
    if (IS_GPU(d)) ocr_cuda_graph_destroy((ocr_graph_exec_t)g);
#else
    (void)d, (void)g;
#endif
}

// ---- the device-resident training step ----------------------------------------------------------------
// The fused optimizer remembers its device; the per-step calls take their device from it or from
// their tensors. Only GPU devices have this step (the CPU's is driven from the host).

OcrFusedAdam *ocr_backend_fused_adam_create(ocr_device_t d, const OcrFusedTensor *t, int count,
                                            OcrFusedAdamConfig cfg, int64_t max_updates) {
    if (d.type != OCR_DEVICE_CUDA) {
        ocr_set_error(OCR_ERR_UNSUPPORTED, "fused optimizer: the CPU's step is driven from the host");
        return NULL;
    }
#ifdef OCR_HAVE_CUDA
    return ocr_fused_adam_create(d.index, t, count, cfg, max_updates);
#else
    (void)t, (void)count, (void)cfg, (void)max_updates;
    no_gpu_backend(d, "fused optimizer");
    return NULL;
#endif
}

// Without CUDA no fused optimizer can exist, so the functions below are never reached with one.
void ocr_backend_fused_adam_free(OcrFusedAdam *fa) {
#ifdef OCR_HAVE_CUDA
    ocr_fused_adam_free(fa);
#else
    OCR_ASSERT(!fa, "fused optimizer without a CUDA backend");
#endif
}

const int *ocr_backend_fused_adam_nonfinite(const OcrFusedAdam *fa) {
#ifdef OCR_HAVE_CUDA
    return ocr_fused_adam_nonfinite(fa);
#else
    OCR_ASSERT(0, "fused optimizer %p without a CUDA backend", (const void *)fa);
    return NULL;
#endif
}

const unsigned *ocr_backend_fused_adam_amax_bits(const OcrFusedAdam *fa) {
#ifdef OCR_HAVE_CUDA
    return ocr_fused_adam_amax_bits(fa);
#else
    OCR_ASSERT(0, "fused optimizer %p without a CUDA backend", (const void *)fa);
    return NULL;
#endif
}

void ocr_backend_fused_adam_begin(OcrFusedAdam *fa, OcrDevStep *state) {
#ifdef OCR_HAVE_CUDA
    ocr_fused_adam_begin(fa, state);
#else
    (void)state;
    OCR_ASSERT(0, "fused optimizer %p without a CUDA backend", (void *)fa);
#endif
}

void ocr_backend_fused_adam_step(OcrFusedAdam *fa, OcrDevStep *state, OcrDevScalerConfig scaler) {
#ifdef OCR_HAVE_CUDA
    ocr_fused_adam_step(fa, state, scaler);
#else
    (void)state, (void)scaler;
    OCR_ASSERT(0, "fused optimizer %p without a CUDA backend", (void *)fa);
#endif
}

void ocr_backend_scale_by_loss_scale(OcrTensor *out, const OcrTensor *inp, const OcrDevStep *state) {
    OCR_ASSERT(IS_GPU(out->device), "scale by the device-held loss scale: a GPU tensor only");
#ifdef OCR_HAVE_CUDA
    ocr_dev_scale_by_loss_scale(out, inp, state);
#else
    (void)out, (void)inp, (void)state;
#endif
}

void ocr_backend_restore_if_inf(ocr_device_t d, void *dst, const void *src, size_t bytes, const OcrDevStep *state) {
    OCR_ASSERT(IS_GPU(d), "restore on overflow: GPU memory only");
#ifdef OCR_HAVE_CUDA
    ocr_dev_restore_if_inf(d.index, dst, src, bytes, state);
#else
    (void)d, (void)dst, (void)src, (void)bytes, (void)state;
#endif
}

void ocr_backend_step_record(OcrDevStep *state, const OcrTensor *loss, const OcrTensor *infeasible) {
#ifdef OCR_HAVE_CUDA
    ocr_dev_step_record(state, loss, infeasible);
#else
    (void)loss, (void)infeasible;
    OCR_ASSERT(0, "device step state %p without a CUDA backend", (void *)state);
#endif
}

void ocr_backend_ctc_loss_enqueue(OcrTensor *losses, OcrTensor *loss, OcrTensor *dlogits, OcrTensor *infeasible,
                                  const OcrTensor *logits, const OcrTensor *targets, const OcrTensor *target_lengths,
                                  const OcrTensor *input_lengths, CtcParams p) {
#ifdef OCR_HAVE_CUDA
    if (IS_GPU(logits->device)) {
        ocr_cuda_ctc_loss_forward_async(losses, loss, dlogits, infeasible, logits, targets, target_lengths,
                                        input_lengths, p);
        return;
    }
#endif
    ocr_ctc_loss_forward(losses, loss, dlogits, infeasible, logits, targets, target_lengths, input_lengths, p);
}

void ocr_backend_set_dropout_step_source(ocr_device_t d, const uint64_t *dropout_step) {
#ifdef OCR_HAVE_CUDA
    if (IS_GPU(d)) ocr_cuda_set_dropout_step_source(d.index, dropout_step);
#else
    (void)d, (void)dropout_step;
#endif
}

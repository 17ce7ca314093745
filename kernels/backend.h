// Backend start-up: registers the compiled backends (the CUDA allocator and device
// counter when this build has CUDA) and sets the CPU thread count.
#ifndef OCR_KERNELS_BACKEND_H
#define OCR_KERNELS_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "core/device.h"
#include "core/tensor.h"
#include "kernels/ctc.h"

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

// 1 when this build has a backend for GPUs (CUDA), else 0.
int ocr_backend_have_gpu(void);

// ---- asynchronous execution: streams, events, page-locked buffers, graphs --------------------------
// The training step and the batch upload (training/step.c, training/feed.c) drive every device
// through these, so the same code serves both kinds. A GPU enqueues ops on a stream and returns
// before they run: the host learns that work is done through events, copies from host memory run
// asynchronously only from page-locked buffers, and a stream's ops can be captured into a graph
// and replayed. The CPU runs every op when it is called: its stream is NULL, an event is complete
// as soon as it is recorded (its handle is NULL), a page-locked buffer is ordinary host memory, an
// asynchronous copy is a memcpy, and graphs do not exist (OCR_ERR_UNSUPPORTED).
//
// On a GPU a handle is the CUDA runtime's own (cudaStream_t, cudaEvent_t, cudaGraphExec_t): that
// is what the NCCL transport of distributed/ takes (as void *). Functions returning a status
// leave the backend's message (ocr_last_error) on failure, for the caller to wrap.
typedef struct OcrStream OcrStream;
typedef struct OcrEvent OcrEvent;
typedef struct OcrGraph OcrGraph;

// 1 when ops on d are only enqueued (a GPU), 0 when they have run on return (the CPU).
int ocr_backend_is_async(ocr_device_t d);
// A non-blocking stream of its own on d (no implicit ordering with the default stream).
ocr_status_t ocr_backend_stream_create(ocr_device_t d, OcrStream **out);
void ocr_backend_stream_destroy(ocr_device_t d, OcrStream *s);
// The stream d's ops are enqueued on (NULL: the default stream, the start value). The backend
// never creates or destroys a stream it was given.
OcrStream *ocr_backend_get_stream(ocr_device_t d);
void ocr_backend_set_stream(ocr_device_t d, OcrStream *s);
ocr_status_t ocr_backend_stream_synchronize(ocr_device_t d, OcrStream *s);
// Events without timing: ordering and host waits only.
ocr_status_t ocr_backend_event_create(ocr_device_t d, OcrEvent **out);
void ocr_backend_event_destroy(ocr_device_t d, OcrEvent *e);
ocr_status_t ocr_backend_event_record(ocr_device_t d, OcrEvent *e, OcrStream *s);
// Later work on s waits for e (on the device; the host does not wait).
ocr_status_t ocr_backend_stream_wait_event(ocr_device_t d, OcrStream *s, OcrEvent *e);
// The host waits for e.
ocr_status_t ocr_backend_event_synchronize(ocr_device_t d, OcrEvent *e);
// Host memory that asynchronous copies to and from d can use (page-locked on a GPU); NULL with
// a message on failure. Free it with ocr_backend_host_free on the same device.
void *ocr_backend_host_alloc(ocr_device_t d, size_t bytes);
void ocr_backend_host_free(ocr_device_t d, void *p);
// A copy on stream s between any host or d memory; from or to host memory it must be
// ocr_backend_host_alloc's.
ocr_status_t ocr_backend_memcpy_async(ocr_device_t d, void *dst, const void *src, size_t bytes, OcrStream *s);
// Capture of everything enqueued on s (thread-local: other threads' calls are not affected) into
// an instantiated graph; a failed capture is ended and reported. OCR_ERR_UNSUPPORTED on the CPU.
ocr_status_t ocr_backend_graph_capture_begin(ocr_device_t d, OcrStream *s);
ocr_status_t ocr_backend_graph_capture_end(ocr_device_t d, OcrStream *s, OcrGraph **out);
ocr_status_t ocr_backend_graph_launch(ocr_device_t d, OcrGraph *g, OcrStream *s);
void ocr_backend_graph_destroy(ocr_device_t d, OcrGraph *g);

// ---- the device-resident training step (GPUs) ---------------------------------------------------------
// A GPU training step that never waits for the host (docs/CUDA.md, "The GPU training step"): the
// loss scale, the found-inf flag, Adam's update counter and the step's learning rate live in
// device memory (OcrDevStep); one fused multi-tensor pass does unscale + finite check + per-tensor
// norms, one tiny kernel the clip factors, one the Adam/AdamW update of every parameter (skipped
// on the device when found_inf is set), and one the scale update (amp/scaler.h's state machine,
// statement for statement). Everything is enqueued on d's current stream without allocating or
// synchronising, so the whole step can be captured into a graph. The CPU's step is driven from
// the host (training/step.c): these calls are for GPU devices (OCR_ERR_UNSUPPORTED on create).

// What the host writes before each step (a page-locked slot copied into OcrDevStep.in on the
// compute stream, so a graph replay reads this step's values).
typedef struct {
    double lr;              // the schedule's learning rate of this iteration (times lr_scale)
    uint64_t sr_seed;       // stochastic rounding seed of this step (0: round to nearest)
    uint64_t dropout_step;  // the model's dropout step counter for this step's training forward
} OcrDevStepInput;

// The device state of the step loop (one per trainer, in device memory). The host reads a copy
// once per step, asynchronously, for logging and checkpoints.
typedef struct {
    OcrDevStepInput in;
    float scale;            // the loss scale the next step multiplies the loss gradient by
    float inv_scale;        // (float)(1.0 / (double)scale)
    float scale_used;       // the scale of the step that just ran
    int found_inf;          // this step's gradients held inf/NaN: the update was skipped
    int event;              // amp_scale_event_t of this step's scale update
    int pad_;
    int64_t good_steps, bad_steps, steps, overflow_steps;  // amp/scaler.h AmpScaler counters
    int64_t updates;        // optimizer updates applied so far (Adam's t = updates + 1)
    double grad_norm;       // global norm of this step's true gradients (before clipping)
    float loss;             // this step's reduced CTC loss (copied from the loss tensor)
    int infeasible;         // samples of this step with no CTC alignment (zeroed)
} OcrDevStep;

// The scaler configuration (amp/scaler.h AmpScalerConfig, by value; no amp types here).
typedef struct {
    int enabled, dynamic;
    double incr_ratio, decr_ratio;
    int64_t incr_every_n_steps, decr_every_n_nan_or_inf;
    double min_scale, max_scale;
} OcrDevScalerConfig;

// One parameter of the fused optimizer pass.
typedef struct {
    void *param;            // working parameter (any float dtype)
    float *master;          // f32 master (O2) or NULL (param is f32, updated in place)
    float *m, *v;           // f32 moments
    void *grad;             // gradient (any float dtype)
    int64_t numel;
    int param_dtype, grad_dtype;
    float lr_mult;          // Optimizer.lr_mult[i]
    float decay;            // its decay coefficient
    int decoupled;          // AdamW-style decay
    int grad_scaled;        // 1: a low-precision gradient left scaled (O2): checked, not unscaled;
                            // the optimizer applies inv_scale (amp/check.h)
} OcrFusedTensor;

typedef struct {
    float beta1, beta2, eps;
    double clip_norm;         // per-tensor ClipGradByNorm (0: off)
    double clip_norm_global;  // ClipGradByGlobalNorm (0: off)
    int stochastic_rounding;  // O2: round master -> param with in.sr_seed, stream = tensor index
} OcrFusedAdamConfig;

typedef struct OcrFusedAdam OcrFusedAdam;

// Builds the device tables for `count` parameters on d (every pointer of t on it) and the
// bias-correction table 1 − β^t for t = 1 .. max_updates, formed on the host in double as
// kernels/cpu/optim.c forms them (beyond the table the device computes pow itself). Allocates
// from the tracked allocator (OCR_MEM_OPTIMIZER) and synchronises: call it before the loop. NULL
// with a message on failure (OCR_ERR_UNSUPPORTED for the CPU or without the device's backend).
OcrFusedAdam *ocr_backend_fused_adam_create(ocr_device_t d, const OcrFusedTensor *t, int count,
                                            OcrFusedAdamConfig cfg, int64_t max_updates);
void ocr_backend_fused_adam_free(OcrFusedAdam *fa);
// Per-tensor results of the last pass (device arrays of count): nonfinite flags and the max |g|
// over finite values as stored (scaled for grad_scaled tensors), as float bits.
const int *ocr_backend_fused_adam_nonfinite(const OcrFusedAdam *fa);
const unsigned *ocr_backend_fused_adam_amax_bits(const OcrFusedAdam *fa);
// Start of a step: clears found_inf and the per-tensor results (enqueued).
void ocr_backend_fused_adam_begin(OcrFusedAdam *fa, OcrDevStep *state);
// After the backward: unscale + finite check + per-tensor sums of squares; clip factors and
// state->grad_norm; Adam/AdamW on every parameter unless state->found_inf (read on the device);
// then the scale update and the update counter.
void ocr_backend_fused_adam_step(OcrFusedAdam *fa, OcrDevStep *state, OcrDevScalerConfig scaler);
// out = inp · state->scale, rounded once into out's dtype (out may alias inp): the loss gradient
// times the device-held loss scale.
void ocr_backend_scale_by_loss_scale(OcrTensor *out, const OcrTensor *inp, const OcrDevStep *state);
// dst[0 .. bytes) = src on d when state->found_inf (BN running statistics after an overflow).
void ocr_backend_restore_if_inf(ocr_device_t d, void *dst, const void *src, size_t bytes, const OcrDevStep *state);
// state->loss = loss[0]; state->infeasible = Σ infeasible[0 .. n) (device tensors; either may be NULL).
void ocr_backend_step_record(OcrDevStep *state, const OcrTensor *loss, const OcrTensor *infeasible);
// kernels/ctc.h's ctc_loss_forward without its host result: on a GPU only enqueued, never waiting
// (read `loss`); on the CPU computed at once.
void ocr_backend_ctc_loss_enqueue(OcrTensor *losses, OcrTensor *loss, OcrTensor *dlogits, OcrTensor *infeasible,
                                  const OcrTensor *logits, const OcrTensor *targets, const OcrTensor *target_lengths,
                                  const OcrTensor *input_lengths, CtcParams p);
// Dropout in a replayed graph: while set (non-NULL), d's dropout kernels add
// (*dropout_step << 32) to the offset they were launched with, so a step captured with the
// model's counter at 0 draws each replay's own masks from OcrDevStep.in.dropout_step,
// bit-identical to an eager step. NULL (the default) restores plain launches; no-op on the CPU.
void ocr_backend_set_dropout_step_source(ocr_device_t d, const uint64_t *dropout_step);

#endif

// The CUDA backend's C interface. No CUDA types appear here: C code includes this header
// and links the launchers, which are compiled by nvcc with extern "C" linkage.
//
// Execution model (docs/CUDA.md): one host thread drives the GPU. Every op is enqueued on
// the current stream of its tensors' device and returns without waiting for the GPU, so a
// sequence of ops can be captured into a CUDA graph. The exceptions are the ops.h functions
// whose contract returns a host value (unscale_and_check, grad_global_norm,
// clip_grad_global_norm, ctc_loss_forward's return value); they synchronise the stream.
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

// ---- streams and devices ---------------------------------------------------------------
// The stream ops of `device` are enqueued on (NULL = the legacy default stream, the start
// value). The backend never creates or destroys a stream it was given.
void ocr_cuda_set_stream(int device, ocr_stream_t stream);
ocr_stream_t ocr_cuda_get_stream(int device);
// Makes `device` current for the calling thread; 0 on success (message otherwise).
int ocr_cuda_set_device(int device);
// Waits for everything enqueued on the device's current stream; 0 on success.
int ocr_cuda_synchronize(int device);

// ---- numerics switches ---------------------------------------------------------------------
// TF32 tensor cores for f32 GEMMs and convolutions (Global.allow_tf32). Default off: f32
// runs are true FP32. f16/bf16 always accumulate in fp32.
void ocr_cuda_set_allow_tf32(int allow);
int ocr_cuda_allow_tf32(void);
// Synchronise and check after every launch (debugging: the failing op is named at once).
// Also on when the environment has OCR_CUDA_SYNC_DEBUG=1 at the first launch.
void ocr_cuda_set_sync_debug(int on);
int ocr_cuda_sync_debug(void);
// 1 when this build has cuDNN (dense and grouped convolutions need it).
int ocr_cuda_have_cudnn(void);
// "driver 13000, runtime 13000, cuBLAS 13.0.2, cuDNN 91900 (built with 91900)" into buf: the
// libraries actually loaded, for reports and for diagnosing a machine's installation.
const char *ocr_cuda_library_versions(char *buf, size_t bufsize);

// ---- memory helpers (tests, setup) ------------------------------------------------------------
// Synchronous copy between any host/device pointers (cudaMemcpyDefault); 0 on success.
int ocr_cuda_memcpy(void *dst, const void *src, size_t bytes);
// Fills bytes with `value` on the device's current stream (asynchronous); 0 on success.
int ocr_cuda_memset(int device, void *dst, int value, size_t bytes);
// Frees the cached per-device scratch and library workspaces (charged to WORKSPACE) and
// the cuDNN plan cache; the next op re-creates what it needs.
void ocr_cuda_release_workspace(void);
// The same, keeping the cuDNN plan cache (host descriptors and the algorithm chosen per shape,
// no device memory): later runs in the process use the same algorithms, so they compute the
// same bits (the trainer releases this way after each run).
void ocr_cuda_release_buffers(void);


// ---- copies between devices (kernels/ops.h copy_bytes) -------------------------------------------
// Copies bytes between host memory (device -1) and CUDA devices, on the current stream of the
// CUDA side (the destination's when both are devices). Waits for the copy when one side is
// host memory (the host buffer is free or filled on return); device-to-device copies return
// at once. 0 on success (message otherwise).
int ocr_cuda_copy_bytes(int dst_device, void *dst, int src_device, const void *src, size_t bytes);

// ---- streams, events, pinned memory, graphs (kernels/backend.h's asynchronous execution) ------------
typedef struct CUevent_st *ocr_event_t;
typedef struct CUgraphExec_st *ocr_graph_exec_t;
// A non-blocking stream on `device` (no implicit ordering with the legacy default stream).
int ocr_cuda_stream_create(int device, ocr_stream_t *out);
void ocr_cuda_stream_destroy(ocr_stream_t stream);
int ocr_cuda_stream_synchronize(ocr_stream_t stream);
// Events without timing (cudaEventDisableTiming): ordering and host waits only.
int ocr_cuda_event_create(int device, ocr_event_t *out);
void ocr_cuda_event_destroy(ocr_event_t event);
int ocr_cuda_event_record(ocr_event_t event, ocr_stream_t stream);
// Later work on `stream` waits for `event` (on the device; the host does not wait).
int ocr_cuda_stream_wait_event(ocr_stream_t stream, ocr_event_t event);
// The host waits for the event.
int ocr_cuda_event_synchronize(ocr_event_t event);
// Page-locked host memory (asynchronous copies need it); NULL with a message on failure.
void *ocr_cuda_host_alloc(size_t bytes);
void ocr_cuda_host_free(void *ptr);
// Asynchronous copy on `stream` (cudaMemcpyDefault); the host side must be pinned memory.
int ocr_cuda_memcpy_async(void *dst, const void *src, size_t bytes, ocr_stream_t stream);
// Capture of everything enqueued on `stream` (thread-local mode: another thread's CUDA calls
// are not affected) into an instantiated graph. A failed capture is ended and reported.
int ocr_cuda_graph_capture_begin(ocr_stream_t stream);
int ocr_cuda_graph_capture_end(ocr_stream_t stream, ocr_graph_exec_t *out);
int ocr_cuda_graph_launch(ocr_graph_exec_t graph, ocr_stream_t stream);
void ocr_cuda_graph_destroy(ocr_graph_exec_t graph);

// Host-side self-test of the numerics the kernels share with core (f16/bf16 conversions of
// every 16-bit pattern and of f32 edge cases, Philox against core/rng.h, stochastic
// rounding): these functions are compiled for the host too, so a machine without a GPU can
// check them. Returns 0 when all agree, else writes the first difference into msg.
int ocr_cuda_host_selftest(char *msg, size_t msg_size);

#ifdef __cplusplus
}
#endif
#endif

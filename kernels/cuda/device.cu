// CUDA device discovery, the tracked device allocator, per-device state (current stream,
// scratch, library handles), the error checks and the host self-test.
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_internal.h"

extern "C" {
#include "core/half.h"
#include "core/rng.h"
}

// ---- errors ------------------------------------------------------------------------------------
const char *ocr_cuda_status_string(cudaError_t e) { return cudaGetErrorString(e); }
const char *ocr_cuda_status_string(cublasStatus_t e) { return cublasGetStatusString(e); }
#ifdef OCR_HAVE_CUDNN
const char *ocr_cuda_status_string(cudnnStatus_t e) { return cudnnGetErrorString(e); }
#endif

void ocr_cuda_fail_(const char *stmt, const char *what, const char *file, int line) {
    int dev = -1;
    cudaGetDevice(&dev);
    ocr_abort_(stmt, file, line, " failed: %s (device %d)", what, dev);
}

// Status-returning check for the functions of cuda_backend.h (they report, not abort).
#define OCR_CUDA_CHECK_STATUS(stmt)                                                                 \
    ([&]() -> int {                                                                                 \
        cudaError_t ocr_cuda_err_ = (stmt);                                                        \
        if (ocr_cuda_err_ != cudaSuccess) {                                                        \
            int ocr_dev_ = -1;                                                                      \
            cudaGetDevice(&ocr_dev_);                                                               \
            ocr_set_error(OCR_ERR_CUDA, "%s failed: %s (%s:%d, device %d)", #stmt,                  \
                          cudaGetErrorString(ocr_cuda_err_), __FILE__, __LINE__, ocr_dev_);          \
            return 0;                                                                               \
        }                                                                                           \
        return 1;                                                                                   \
    }())

// ---- switches -----------------------------------------------------------------------------------
static int allow_tf32;
static int sync_debug = -1;  // -1: not read from the environment yet

extern "C" void ocr_cuda_set_allow_tf32(int allow) { allow_tf32 = allow != 0; }
extern "C" int ocr_cuda_allow_tf32(void) { return allow_tf32; }
extern "C" void ocr_cuda_set_sync_debug(int on) { sync_debug = on != 0; }
extern "C" int ocr_cuda_sync_debug(void) {
    if (sync_debug < 0) {
        const char *e = getenv("OCR_CUDA_SYNC_DEBUG");
        sync_debug = e && e[0] && strcmp(e, "0") != 0;
    }
    return sync_debug;
}
extern "C" int ocr_cuda_have_cudnn(void) {
#ifdef OCR_HAVE_CUDNN
    return 1;
#else
    return 0;
#endif
}

extern "C" const char *ocr_cuda_library_versions(char *buf, size_t bufsize) {
    int drv = 0, rt = 0, maj = 0, min = 0, pat = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    // cuBLAS is opened at first use (cublas_loader.cu): say so when it cannot be.
    char blas[320];
    cublasStatus_t bs = cublasGetProperty(MAJOR_VERSION, &maj);
    if (bs == CUBLAS_STATUS_SUCCESS) {
        cublasGetProperty(MINOR_VERSION, &min);
        cublasGetProperty(PATCH_LEVEL, &pat);
        snprintf(blas, sizeof blas, "cuBLAS %d.%d.%d", maj, min, pat);
    } else {
        snprintf(blas, sizeof blas, "cuBLAS unavailable (%s)", cublasGetStatusString(bs));
    }
#ifdef OCR_HAVE_CUDNN
    snprintf(buf, bufsize, "driver %d, runtime %d, %s, cuDNN %zu (built with %d)", drv, rt, blas, cudnnGetVersion(),
             CUDNN_VERSION);
#else
    snprintf(buf, bufsize, "driver %d, runtime %d, %s, no cuDNN in this build", drv, rt, blas);
#endif
    return buf;
}

// ---- per-device state ----------------------------------------------------------------------------
// cuBLAS gets a fixed workspace of its own (32 MiB, what NVIDIA recommends for Hopper), so
// it never allocates behind the tracker's back and stays capturable in a graph.
#define CUBLAS_WORKSPACE_BYTES ((size_t)32 << 20)

struct DeviceState {
    cudaStream_t stream;
    void *scratch[CUDA_SCRATCH_SLOTS];
    size_t scratch_bytes[CUDA_SCRATCH_SLOTS];
    cublasHandle_t cublas;
    cudaStream_t cublas_stream;
    void *cublas_ws;
#ifdef OCR_HAVE_CUDNN
    cudnnHandle_t cudnn;
    cudaStream_t cudnn_stream;
#endif
    int smem_optin;
};
static DeviceState g_dev[OCR_MAX_DEVICES];
static thread_local int tl_device = -1;
static thread_local cudaStream_t tl_stream;

static void enter_device(int device) {
    if (tl_device != device) {
        OCR_CUDA_CHECK(cudaSetDevice(device));
        tl_device = device;
    }
}

CudaCtx ocr_cuda_enter(const OcrTensor *t) {
    OCR_ASSERT(t && t->device.type == OCR_DEVICE_CUDA && t->device.index >= 0 && t->device.index < OCR_MAX_DEVICES,
               "CUDA op given a tensor that is not on a CUDA device");
    const int dev = t->device.index;
    enter_device(dev);
    CudaCtx ctx = {dev, g_dev[dev].stream};
    tl_stream = ctx.stream;
    return ctx;
}

void *ocr_cuda_scratch(const CudaCtx &ctx, size_t bytes, int slot) {
    OCR_ASSERT(slot >= 0 && slot < CUDA_SCRATCH_SLOTS);
    DeviceState &d = g_dev[ctx.device];
    if (bytes <= d.scratch_bytes[slot] && d.scratch[slot]) return d.scratch[slot];
    // Grow to a whole MiB (and at least 1.25x) so a slowly growing shape does not reallocate
    // every step. Freeing synchronises the device (cudaFree), so running kernels keep theirs.
    size_t want = bytes + bytes / 4;
    want = (want + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
    if (d.scratch[slot]) ocr_mem_free(d.scratch[slot]);
    d.scratch[slot] = ocr_mem_alloc(ocr_cuda_device(ctx.device), OCR_MEM_WORKSPACE, want);
    OCR_ASSERT(d.scratch[slot], "CUDA scratch of %zu bytes: %s", want, ocr_last_error());
    d.scratch_bytes[slot] = want;
    return d.scratch[slot];
}

cublasHandle_t ocr_cuda_cublas(const CudaCtx &ctx) {
    DeviceState &d = g_dev[ctx.device];
    if (!d.cublas) {
        OCR_CUDA_CHECK(cublasCreate(&d.cublas));
        // fp32 accumulation even for half outputs: no reduced-precision split-K reductions.
        OCR_CUDA_CHECK(cublasSetMathMode(
            d.cublas, (cublasMath_t)(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
        d.cublas_ws = ocr_mem_alloc(ocr_cuda_device(ctx.device), OCR_MEM_WORKSPACE, CUBLAS_WORKSPACE_BYTES);
        OCR_ASSERT(d.cublas_ws, "cuBLAS workspace: %s", ocr_last_error());
        d.cublas_stream = (cudaStream_t)-1;  // forces the first bind below
    }
    if (d.cublas_stream != ctx.stream) {
        OCR_CUDA_CHECK(cublasSetStream(d.cublas, ctx.stream));
        // cublasSetStream resets the workspace to cuBLAS's own pool: set ours again.
        OCR_CUDA_CHECK(cublasSetWorkspace(d.cublas, d.cublas_ws, CUBLAS_WORKSPACE_BYTES));
        d.cublas_stream = ctx.stream;
    }
    return d.cublas;
}

#ifdef OCR_HAVE_CUDNN
cudnnHandle_t ocr_cuda_cudnn(const CudaCtx &ctx) {
    DeviceState &d = g_dev[ctx.device];
    if (!d.cudnn) {
        OCR_CUDA_CHECK(cudnnCreate(&d.cudnn));
        d.cudnn_stream = (cudaStream_t)-1;
    }
    if (d.cudnn_stream != ctx.stream) {
        OCR_CUDA_CHECK(cudnnSetStream(d.cudnn, ctx.stream));
        d.cudnn_stream = ctx.stream;
    }
    return d.cudnn;
}
#endif

int ocr_cuda_max_smem_optin(const CudaCtx &ctx) {
    DeviceState &d = g_dev[ctx.device];
    if (!d.smem_optin) OCR_CUDA_CHECK(cudaDeviceGetAttribute(&d.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx.device));
    return d.smem_optin;
}

void ocr_cuda_after_launch_(const char *file, int line) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) ocr_cuda_fail_("kernel launch", cudaGetErrorString(e), file, line);
    if (ocr_cuda_sync_debug()) {
        cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
        cudaStreamIsCapturing(tl_stream, &cap);
        if (cap == cudaStreamCaptureStatusNone) {
            e = cudaStreamSynchronize(tl_stream);
            if (e != cudaSuccess) ocr_cuda_fail_("kernel (OCR_CUDA_SYNC_DEBUG)", cudaGetErrorString(e), file, line);
        }
    }
}

extern "C" void ocr_cuda_set_stream(int device, ocr_stream_t stream) {
    OCR_ASSERT(device >= 0 && device < OCR_MAX_DEVICES, "device %d", device);
    g_dev[device].stream = (cudaStream_t)stream;
}

extern "C" ocr_stream_t ocr_cuda_get_stream(int device) {
    OCR_ASSERT(device >= 0 && device < OCR_MAX_DEVICES, "device %d", device);
    return (ocr_stream_t)g_dev[device].stream;
}

extern "C" int ocr_cuda_set_device(int device) {
    if (device < 0 || device >= OCR_MAX_DEVICES) {
        ocr_set_error(OCR_ERR_INVALID_ARG, "CUDA device %d out of range", device);
        return 1;
    }
    if (!OCR_CUDA_CHECK_STATUS(cudaSetDevice(device))) return 1;
    tl_device = device;
    return 0;
}

extern "C" int ocr_cuda_synchronize(int device) {
    if (ocr_cuda_set_device(device)) return 1;
    return OCR_CUDA_CHECK_STATUS(cudaStreamSynchronize(g_dev[device].stream)) ? 0 : 1;
}

extern "C" int ocr_cuda_memcpy(void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return 0;
    return OCR_CUDA_CHECK_STATUS(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault)) ? 0 : 1;
}

extern "C" int ocr_cuda_memset(int device, void *dst, int value, size_t bytes) {
    if (bytes == 0) return 0;
    if (ocr_cuda_set_device(device)) return 1;
    return OCR_CUDA_CHECK_STATUS(cudaMemsetAsync(dst, value, bytes, g_dev[device].stream)) ? 0 : 1;
}

extern "C" int ocr_cuda_copy_bytes(int dst_device, void *dst, int src_device, const void *src, size_t bytes) {
    if (bytes == 0) return 0;
    const int dev = dst_device >= 0 ? dst_device : src_device;
    if (dev < 0) {
        memcpy(dst, src, bytes);
        return 0;
    }
    if (ocr_cuda_set_device(dev)) return 1;
    cudaStream_t s = g_dev[dev].stream;
    if (!OCR_CUDA_CHECK_STATUS(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s))) return 1;
    if (dst_device < 0 || src_device < 0)
        if (!OCR_CUDA_CHECK_STATUS(cudaStreamSynchronize(s))) return 1;
    return 0;
}

extern "C" int ocr_cuda_stream_create(int device, ocr_stream_t *out) {
    *out = NULL;
    if (ocr_cuda_set_device(device)) return 1;
    cudaStream_t s;
    if (!OCR_CUDA_CHECK_STATUS(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking))) return 1;
    *out = (ocr_stream_t)s;
    return 0;
}

extern "C" void ocr_cuda_stream_destroy(ocr_stream_t stream) {
    if (stream) cudaStreamDestroy((cudaStream_t)stream);
}

extern "C" int ocr_cuda_stream_synchronize(ocr_stream_t stream) {
    return OCR_CUDA_CHECK_STATUS(cudaStreamSynchronize((cudaStream_t)stream)) ? 0 : 1;
}

extern "C" int ocr_cuda_event_create(int device, ocr_event_t *out) {
    *out = NULL;
    if (ocr_cuda_set_device(device)) return 1;
    cudaEvent_t e;
    if (!OCR_CUDA_CHECK_STATUS(cudaEventCreateWithFlags(&e, cudaEventDisableTiming))) return 1;
    *out = (ocr_event_t)e;
    return 0;
}

extern "C" void ocr_cuda_event_destroy(ocr_event_t event) {
    if (event) cudaEventDestroy((cudaEvent_t)event);
}

extern "C" int ocr_cuda_event_record(ocr_event_t event, ocr_stream_t stream) {
    return OCR_CUDA_CHECK_STATUS(cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream)) ? 0 : 1;
}

extern "C" int ocr_cuda_stream_wait_event(ocr_stream_t stream, ocr_event_t event) {
    return OCR_CUDA_CHECK_STATUS(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, 0)) ? 0 : 1;
}

extern "C" int ocr_cuda_event_synchronize(ocr_event_t event) {
    return OCR_CUDA_CHECK_STATUS(cudaEventSynchronize((cudaEvent_t)event)) ? 0 : 1;
}

extern "C" void *ocr_cuda_host_alloc(size_t bytes) {
    void *p = NULL;
    if (!OCR_CUDA_CHECK_STATUS(cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault))) {
        cudaGetLastError();
        return NULL;
    }
    return p;
}

extern "C" void ocr_cuda_host_free(void *ptr) {
    if (ptr) cudaFreeHost(ptr);
}

extern "C" int ocr_cuda_memcpy_async(void *dst, const void *src, size_t bytes, ocr_stream_t stream) {
    if (bytes == 0) return 0;
    return OCR_CUDA_CHECK_STATUS(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream)) ? 0 : 1;
}

extern "C" int ocr_cuda_graph_capture_begin(ocr_stream_t stream) {
    return OCR_CUDA_CHECK_STATUS(cudaStreamBeginCapture((cudaStream_t)stream, cudaStreamCaptureModeThreadLocal)) ? 0
                                                                                                                : 1;
}

extern "C" int ocr_cuda_graph_capture_end(ocr_stream_t stream, ocr_graph_exec_t *out) {
    *out = NULL;
    cudaGraph_t g = NULL;
    if (!OCR_CUDA_CHECK_STATUS(cudaStreamEndCapture((cudaStream_t)stream, &g))) {
        if (g) cudaGraphDestroy(g);
        cudaGetLastError();
        return 1;
    }
    cudaGraphExec_t exec = NULL;
    const int ok = OCR_CUDA_CHECK_STATUS(cudaGraphInstantiate(&exec, g, 0));
    cudaGraphDestroy(g);
    if (!ok) return 1;
    *out = (ocr_graph_exec_t)exec;
    return 0;
}

extern "C" int ocr_cuda_graph_launch(ocr_graph_exec_t graph, ocr_stream_t stream) {
    return OCR_CUDA_CHECK_STATUS(cudaGraphLaunch((cudaGraphExec_t)graph, (cudaStream_t)stream)) ? 0 : 1;
}

extern "C" void ocr_cuda_graph_destroy(ocr_graph_exec_t graph) {
    if (graph) cudaGraphExecDestroy((cudaGraphExec_t)graph);
}

static void release_buffers(void);

extern "C" void ocr_cuda_release_workspace(void) {
    ocr_cuda_conv_release();
    release_buffers();
}

extern "C" void ocr_cuda_release_buffers(void) { release_buffers(); }

static void release_buffers(void) {
    for (int i = 0; i < OCR_MAX_DEVICES; i++) {
        DeviceState &d = g_dev[i];
        int used = d.cublas != NULL || d.cublas_ws != NULL;
        for (int s = 0; s < CUDA_SCRATCH_SLOTS; s++) used |= d.scratch[s] != NULL;
#ifdef OCR_HAVE_CUDNN
        used |= d.cudnn != NULL;
#endif
        if (!used) continue;
        cudaSetDevice(i);
        tl_device = i;
        cudaDeviceSynchronize();
        for (int s = 0; s < CUDA_SCRATCH_SLOTS; s++) {
            ocr_mem_free(d.scratch[s]);
            d.scratch[s] = NULL;
            d.scratch_bytes[s] = 0;
        }
        if (d.cublas) cublasDestroy(d.cublas);
        d.cublas = NULL;
        ocr_mem_free(d.cublas_ws);
        d.cublas_ws = NULL;
#ifdef OCR_HAVE_CUDNN
        if (d.cudnn) cudnnDestroy(d.cudnn);
        d.cudnn = NULL;
#endif
    }
}

// ---- discovery and the allocator -------------------------------------------------------------------
extern "C" int ocr_cuda_count_devices(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();  // clear the sticky "no driver" error
        return 0;
    }
    return n;
}

static void *device_alloc(int device, size_t bytes) {
    void *p = NULL;
    if (!OCR_CUDA_CHECK_STATUS(cudaSetDevice(device))) return NULL;
    tl_device = device;
    if (!OCR_CUDA_CHECK_STATUS(cudaMalloc(&p, bytes))) {
        cudaGetLastError();  // an out-of-memory error is not sticky; clear it for the next launch check
        return NULL;
    }
    return p;
}

static void device_free(int device, void *ptr) {
    cudaSetDevice(device);
    tl_device = device;
    cudaFree(ptr);
}

extern "C" int ocr_cuda_backend_register(void) {
    ocr_mem_register_device_allocator(OCR_DEVICE_CUDA, device_alloc, device_free);
    ocr_device_register_cuda_counter(ocr_cuda_count_devices);
    return ocr_cuda_count_devices();
}

extern "C" int ocr_cuda_device_info(int device, OcrCudaDeviceInfo *info) {
    memset(info, 0, sizeof *info);
    cudaDeviceProp prop;
    if (!OCR_CUDA_CHECK_STATUS(cudaGetDeviceProperties(&prop, device))) return 1;
    snprintf(info->name, sizeof info->name, "%s", prop.name);
    info->major = prop.major;
    info->minor = prop.minor;
    info->multiprocessors = prop.multiProcessorCount;
    if (ocr_cuda_set_device(device)) return 1;
    if (!OCR_CUDA_CHECK_STATUS(cudaMemGetInfo(&info->free_memory, &info->total_memory))) return 1;
    cudaDriverGetVersion(&info->driver_version);
    cudaRuntimeGetVersion(&info->runtime_version);
    return 0;
}

// ---- host self-test --------------------------------------------------------------------------------
static int fail_msg(char *msg, size_t n, const char *fmt, unsigned a, unsigned b, unsigned c) {
    if (msg && n) snprintf(msg, n, fmt, a, b, c);
    return 1;
}

extern "C" int ocr_cuda_host_selftest(char *msg, size_t msg_size) {
    if (msg && msg_size) msg[0] = '\0';
    // Every 16-bit pattern up, and every f32 neighbourhood of every 16-bit value down
    // (the value itself, one f32 ulp either side, and the midpoints to the next value).
    for (uint32_t h = 0; h < 65536; h++) {
        if (f32_bits(f16_to_f32((uint16_t)h)) != ocr_f32_bits(ocr_f16_to_f32((ocr_f16_t)h)))
            return fail_msg(msg, msg_size, "f16 -> f32 differs for 0x%04x (%u %u)", h, 0, 0);
        if (f32_bits(bf16_to_f32((uint16_t)h)) != ocr_f32_bits(ocr_bf16_to_f32((ocr_bf16_t)h)))
            return fail_msg(msg, msg_size, "bf16 -> f32 differs for 0x%04x (%u %u)", h, 0, 0);
        const uint32_t bases[2] = {ocr_f32_bits(ocr_f16_to_f32((ocr_f16_t)h)), (uint32_t)h << 16};
        for (int b = 0; b < 2; b++) {
            uint32_t u0 = bases[b];
            uint32_t next = b == 0 ? ocr_f32_bits(ocr_f16_to_f32((ocr_f16_t)((h + 1) & 0xffff))) : ((h + 1) & 0xffff) << 16;
            uint32_t cands[6] = {u0, u0 + 1, u0 - 1, u0 + (next - u0) / 2, u0 + (next - u0) / 2 + 1,
                                 u0 + (next - u0) / 2 - 1};
            for (int k = 0; k < 6; k++) {
                float f = ocr_bits_f32(cands[k]);
                if (f32_to_f16(f) != ocr_f32_to_f16(f))
                    return fail_msg(msg, msg_size, "f32 -> f16 differs for 0x%08x (got 0x%04x, core 0x%04x)", cands[k],
                                    f32_to_f16(f), ocr_f32_to_f16(f));
                if (f32_to_bf16(f) != ocr_f32_to_bf16(f))
                    return fail_msg(msg, msg_size, "f32 -> bf16 differs for 0x%08x (got 0x%04x, core 0x%04x)",
                                    cands[k], f32_to_bf16(f), ocr_f32_to_bf16(f));
            }
        }
    }
    // A stride through all of f32 (NaN payloads, subnormals, infinities included).
    for (uint64_t u = 0; u < 0x100000000ull; u += 1021) {
        float f = ocr_bits_f32((uint32_t)u);
        if (f32_to_f16(f) != ocr_f32_to_f16(f) || f32_to_bf16(f) != ocr_f32_to_bf16(f))
            return fail_msg(msg, msg_size, "f32 -> half differs for 0x%08x (%u %u)", (uint32_t)u, 0, 0);
    }
    // Philox against core over seeds, streams and indices (both words of each).
    const uint64_t seeds[3] = {0, 1234, 0x9e3779b97f4a7c15ull};
    const uint64_t streams[3] = {0, 7, 0xffffffff00000001ull};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (uint64_t i = 0; i < 4096; i += 3) {
                uint64_t idx = i * 0x100000001ull;
                if (philox_u32(seeds[a], streams[b], idx) != ocr_rng_u32(seeds[a], streams[b], idx))
                    return fail_msg(msg, msg_size, "philox differs (seed #%u stream #%u index %u)", (unsigned)a,
                                    (unsigned)b, (unsigned)i);
                if (u32_to_uniform(philox_u32(seeds[a], streams[b], i)) != ocr_rng_uniform(seeds[a], streams[b], i))
                    return fail_msg(msg, msg_size, "uniform differs (seed #%u stream #%u index %u)", (unsigned)a,
                                    (unsigned)b, (unsigned)i);
            }
    // Stochastic rounding: the result is one of the two neighbours that bracket x (nearest
    // for values past the largest finite one), r = 0 truncates, and representable values
    // stay put.
    for (uint32_t i = 0; i < 200000; i++) {
        uint32_t r = ocr_rng_u32(99, 1, i);
        float x = ocr_bits_f32(ocr_rng_u32(99, 2, i));
        if (isnan(x)) continue;
        float xs = ldexpf(x, -(int)(ocr_rng_u32(99, 3, i) % 40));  // also near and in the f16 subnormals
        const float xv[2] = {x, xs};
        for (int k = 0; k < 2; k++) {
            float v = xv[k];
            // bf16
            uint16_t got = sr_to_bf16(v, r);
            uint32_t ab = ocr_f32_bits(v) & 0x7fffffffu;
            uint16_t lo = (uint16_t)(ab >> 16), hi = (uint16_t)(lo + 1);
            uint16_t gm = got & 0x7fffu;
            int finite_ok = (ab + 0xffffu) < 0x7f800000u;
            if (finite_ok && gm != lo && !((ab & 0xffffu) && gm == hi))
                return fail_msg(msg, msg_size, "sr bf16 of 0x%08x with r 0x%08x gave 0x%04x", ocr_f32_bits(v), r, got);
            if (finite_ok && sr_to_bf16(v, 0) != (uint16_t)(ocr_f32_bits(v) >> 16))
                return fail_msg(msg, msg_size, "sr bf16 of 0x%08x with r 0 gave 0x%04x (%u)", ocr_f32_bits(v),
                                sr_to_bf16(v, 0), 0);
            // f16: the magnitude is the largest f16 <= |v| or the next one up (that one only
            // when |v| is not representable); r = 0 truncates.
            float av = fabsf(v);
            if (av < 65504.0f) {
                uint16_t n = ocr_f32_to_f16(av);
                uint16_t lo16 = ocr_f16_to_f32(n) <= av ? n : (uint16_t)(n - 1);
                uint16_t hi16 = ocr_f16_to_f32(lo16) == av ? lo16 : (uint16_t)(lo16 + 1);
                uint16_t g16 = sr_to_f16(v, r);
                uint16_t m16 = g16 & 0x7fffu;
                if (m16 != lo16 && m16 != hi16)
                    return fail_msg(msg, msg_size, "sr f16 of 0x%08x with r 0x%08x gave 0x%04x", ocr_f32_bits(v), r,
                                    g16);
                if (m16 && (g16 & 0x8000u) != ((ocr_f32_bits(v) >> 16) & 0x8000u))
                    return fail_msg(msg, msg_size, "sr f16 of 0x%08x lost the sign (r 0x%08x -> 0x%04x)",
                                    ocr_f32_bits(v), r, g16);
                if ((sr_to_f16(v, 0) & 0x7fffu) != lo16)
                    return fail_msg(msg, msg_size, "sr f16 of 0x%08x with r 0 gave 0x%04x, not 0x%04x",
                                    ocr_f32_bits(v), sr_to_f16(v, 0), lo16);
            }
        }
    }
    return 0;
}

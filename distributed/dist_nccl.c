// The NCCL transport: ncclAllReduce (ncclSum) on device buffers, one communicator per process
// over the MPI world, the unique id made by rank 0 and broadcast over MPI.
//
// Arithmetic: NCCL reduces in the buffer's dtype. f32 sums in f32; f16 and bf16 sums are
// computed by NCCL's kernels with each hop's partial sum stored back in f16/bf16 (ring: every
// rank adds its chunk to the incoming one and rounds), so with N ranks a value is rounded up to
// N−1 times. That is the price of half the bytes; the gradients are then unscaled and checked
// in f32 by the fused optimizer step.
//
// Streams: the all-reduces run on a stream of their own. Each start waits (cudaStreamWaitEvent)
// for the producer stream's work so far (the backward that wrote the bucket); each completion
// makes the producer stream wait for the sum, so the optimizer enqueued after it sees it.
#include "distributed/dist_internal.h"

#ifdef OCR_HAVE_NCCL

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

struct DistNccl {
    ncclComm_t comm;
    int device;
    cudaStream_t comm_stream, producer;
    cudaEvent_t ready[OCR_DIST_MAX_PENDING], done[OCR_DIST_MAX_PENDING];
    int made[OCR_DIST_MAX_PENDING];
};

int dist_nccl_available(void) { return 1; }

static ocr_status_t cuda_error(cudaError_t e, const char *what) {
    return ocr_set_error(OCR_ERR_CUDA, "%s: %s", what, cudaGetErrorString(e));
}

static ocr_status_t nccl_error(ncclResult_t r, const char *what) {
    return ocr_set_error(OCR_ERR_CUDA, "%s: %s", what, ncclGetErrorString(r));
}

ocr_status_t dist_nccl_open(DistNccl **out, int rank, int world, int device_index, dist_bcast_fn bcast, void *user) {
    *out = NULL;
    DistNccl *n = calloc(1, sizeof *n);
    if (!n) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    n->device = device_index;
    cudaError_t e = cudaSetDevice(device_index);
    if (e != cudaSuccess) {
        free(n);
        return cuda_error(e, "NCCL: cudaSetDevice");
    }
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess) {
            free(n);
            return nccl_error(r, "ncclGetUniqueId");
        }
    }
    ocr_status_t st = world > 1 ? bcast(user, &id, sizeof id, 0) : OCR_OK;
    if (st != OCR_OK) {
        free(n);
        return st;
    }
    ncclResult_t r = ncclCommInitRank(&n->comm, world, id, rank);
    if (r != ncclSuccess) {
        free(n);
        return nccl_error(r, "ncclCommInitRank");
    }
    e = cudaStreamCreateWithFlags(&n->comm_stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        dist_nccl_close(n);
        return cuda_error(e, "NCCL: communication stream");
    }
    *out = n;
    return OCR_OK;
}

void dist_nccl_close(DistNccl *n) {
    if (!n) return;
    if (n->comm_stream) cudaStreamSynchronize(n->comm_stream);
    for (int i = 0; i < OCR_DIST_MAX_PENDING; i++)
        if (n->made[i]) {
            cudaEventDestroy(n->ready[i]);
            cudaEventDestroy(n->done[i]);
        }
    if (n->comm) ncclCommDestroy(n->comm);
    if (n->comm_stream) cudaStreamDestroy(n->comm_stream);
    free(n);
}

void dist_nccl_set_stream(DistNccl *n, void *stream) { n->producer = (cudaStream_t)stream; }

ocr_status_t dist_nccl_start_allreduce(DistNccl *n, int slot, void *buf, int64_t count, dist_type_t type) {
    ncclDataType_t t;
    switch (type) {
    case DIST_T_F32: t = ncclFloat32; break;
    case DIST_T_F16: t = ncclFloat16; break;
    case DIST_T_BF16: t = ncclBfloat16; break;
    case DIST_T_F64: t = ncclFloat64; break;  // synchronised batch norm's statistics
    default: return ocr_set_error(OCR_ERR_INVALID_ARG, "NCCL: element type %d (f32, f16, bf16, f64 only)", (int)type);
    }
    if (!n->made[slot]) {
        cudaError_t e = cudaEventCreateWithFlags(&n->ready[slot], cudaEventDisableTiming);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&n->done[slot], cudaEventDisableTiming);
        if (e != cudaSuccess) return cuda_error(e, "NCCL: events");
        n->made[slot] = 1;
    }
    cudaError_t e = cudaEventRecord(n->ready[slot], n->producer);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(n->comm_stream, n->ready[slot], 0);
    if (e != cudaSuccess) return cuda_error(e, "NCCL: ordering after the backward");
    ncclResult_t r = ncclAllReduce(buf, buf, (size_t)count, t, ncclSum, n->comm, n->comm_stream);
    if (r != ncclSuccess) return nccl_error(r, "ncclAllReduce");
    e = cudaEventRecord(n->done[slot], n->comm_stream);
    return e == cudaSuccess ? OCR_OK : cuda_error(e, "NCCL: completion event");
}

int dist_nccl_test(DistNccl *n, int slot) {
    cudaError_t e = cudaEventQuery(n->done[slot]);
    if (e == cudaErrorNotReady) {
        ncclResult_t async;
        if (ncclCommGetAsyncError(n->comm, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress) {
            nccl_error(async, "NCCL all-reduce");
            return -1;
        }
        return 0;
    }
    if (e != cudaSuccess) {
        cuda_error(e, "NCCL all-reduce");
        return -1;
    }
    // The producer stream's later work (the optimizer) reads the sums.
    e = cudaStreamWaitEvent(n->producer, n->done[slot], 0);
    if (e != cudaSuccess) {
        cuda_error(e, "NCCL: ordering before the optimizer");
        return -1;
    }
    return 1;
}

ocr_status_t dist_nccl_enqueue_wait(DistNccl *n, int slot) {
    ncclResult_t async;
    if (ncclCommGetAsyncError(n->comm, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress)
        return nccl_error(async, "NCCL all-reduce");
    cudaError_t e = cudaStreamWaitEvent(n->producer, n->done[slot], 0);
    return e == cudaSuccess ? OCR_OK : cuda_error(e, "NCCL: ordering before the optimizer");
}

int dist_nccl_event_done(DistNccl *n, void *event) {
    cudaError_t e = cudaEventQuery((cudaEvent_t)event);
    if (e == cudaSuccess) return 1;
    if (e != cudaErrorNotReady) {
        cuda_error(e, "waiting for the GPU step");
        return -1;
    }
    ncclResult_t async;
    if (ncclCommGetAsyncError(n->comm, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress) {
        nccl_error(async, "NCCL all-reduce");
        return -1;
    }
    return 0;
}

#else  // no NCCL in this build

int dist_nccl_available(void) { return 0; }

ocr_status_t dist_nccl_open(DistNccl **out, int rank, int world, int device_index, dist_bcast_fn bcast, void *user) {
    (void)rank, (void)world, (void)device_index, (void)bcast, (void)user;
    *out = NULL;
    return ocr_set_error(OCR_ERR_UNSUPPORTED, "this build has no NCCL (a CUDA build finds it with the toolkit)");
}
void dist_nccl_close(DistNccl *n) { (void)n; }
void dist_nccl_set_stream(DistNccl *n, void *stream) { (void)n, (void)stream; }
ocr_status_t dist_nccl_start_allreduce(DistNccl *n, int slot, void *buf, int64_t count, dist_type_t type) {
    (void)n, (void)slot, (void)buf, (void)count, (void)type;
    return ocr_set_error(OCR_ERR_UNSUPPORTED, "this build has no NCCL");
}
int dist_nccl_test(DistNccl *n, int slot) {
    (void)n, (void)slot;
    return -1;
}
ocr_status_t dist_nccl_enqueue_wait(DistNccl *n, int slot) {
    (void)n, (void)slot;
    return ocr_set_error(OCR_ERR_UNSUPPORTED, "this build has no NCCL");
}
int dist_nccl_event_done(DistNccl *n, void *event) {
    (void)n, (void)event;
    ocr_set_error(OCR_ERR_UNSUPPORTED, "this build has no NCCL");
    return -1;
}

#endif

// Data-parallel communication: one interface over the transports a cluster already has, so the
// trainer asks for "all-reduce this bucket" and does not know which one carries it.
//
//   single  a world of one process (no MPI launch, or a build without MPI): every collective is
//           the identity and costs nothing.
//   mpi     MPI_Iallreduce on host buffers (Open MPI; mpirun or srun launch). f32 sums with
//           MPI_SUM in f32. MPI has no half types: f16/bf16 buckets go as 16-bit words with a
//           user-defined commutative op that widens each pair of elements to f32, adds, and
//           rounds the sum back once (round to nearest even). With 2 ranks that is the exact sum
//           rounded once; with more, every hop of the reduction tree rounds its partial sum.
//   nccl    ncclAllReduce on device buffers (a CUDA build with NCCL; several ranks are launched
//           under MPI, which broadcasts the NCCL unique id; one GPU outside a launch needs no
//           MPI). NCCL sums f16/bf16 in the wire dtype itself (each hop's partial sum is rounded
//           to f16/bf16); f32 sums in f32.
//
// Which transport: Distributed.backend "auto" picks nccl for a CUDA device when the build has
// it, mpi otherwise, single when the process was not launched as part of a world.
//
// The world is detected from the launcher's environment: OMPI_COMM_WORLD_SIZE/RANK/LOCAL_RANK
// (Open MPI's mpirun), PMI_SIZE/PMI_RANK and SLURM_NTASKS/SLURM_PROCID/SLURM_LOCALID (srun).
// MPI is initialised once per process on first use and finalised at exit.
//
// Failure: every wait polls with a deadline (Distributed.timeout_s). A peer that died or hangs
// leaves a request incomplete; at the deadline the waiting rank prints which collective it was
// waiting for and for how long, and aborts the whole job (MPI_Abort), so nothing hangs silently.
// A rank killed by a signal is also noticed by mpirun itself, which then ends the others.
#ifndef OCR_DIST_DIST_H
#define OCR_DIST_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"

typedef enum { OCR_DIST_SINGLE = 0, OCR_DIST_MPI, OCR_DIST_NCCL } ocr_dist_backend_t;

const char *ocr_dist_backend_name(ocr_dist_backend_t b);  // "single", "mpi", "nccl"

// The world this process belongs to (from the launcher's environment; rank 0 of 1 otherwise).
typedef struct {
    int rank, world_size, local_rank;
    int launched;  // 1: the environment names a world of launched processes (even of size 1)
} OcrDistWorld;

OcrDistWorld ocr_dist_detect_world(void);

typedef struct OcrDist OcrDist;

typedef struct {
    ocr_dist_backend_t backend;  // what to use (ocr_dist_choose_backend)
    double timeout_s;            // longest wait for any collective before aborting the job (> 0)
    ocr_device_t device;         // NCCL: the device the buffers live on
} OcrDistOptions;

// The backend "auto" resolves to for a run on `device` in this build and world.
ocr_dist_backend_t ocr_dist_choose_backend(const OcrDistWorld *w, ocr_device_t device);
// 1 when this build has the transport (single: always).
int ocr_dist_backend_available(ocr_dist_backend_t b);

// Opens the transport. MPI is initialised here the first time (and stays for the process);
// NCCL in a process that was not launched as part of a world is a world of one without MPI.
// A world of more than one process with the single backend, or a backend missing from this
// build, is OCR_ERR_UNSUPPORTED with a message saying how to build it in.
ocr_status_t ocr_dist_open(OcrDist **out, const OcrDistOptions *o);
void ocr_dist_close(OcrDist *d);

int ocr_dist_rank(const OcrDist *d);
int ocr_dist_world_size(const OcrDist *d);
int ocr_dist_local_rank(const OcrDist *d);
ocr_dist_backend_t ocr_dist_backend(const OcrDist *d);

// A started collective; finished by ocr_dist_wait. At most OCR_DIST_MAX_PENDING at once.
#define OCR_DIST_MAX_PENDING 256
typedef struct {
    int slot;       // -1: nothing in flight (a world of one finishes at once)
    uint32_t gen;   // the slot's use count when started: a reused slot is another request's
    double t_start; // when it was started (ocr_now_seconds)
} OcrDistRequest;

// Starts the in-place sum of `count` elements of `dtype` (f32, f16, bf16) at `buf` across the
// world (host memory for mpi, device memory for nccl). `what` names it in a timeout message.
ocr_status_t ocr_dist_allreduce_start(OcrDist *d, void *buf, int64_t count, ocr_dtype_t dtype, const char *what,
                                      OcrDistRequest *req);
// NCCL: the CUDA stream (a cudaStream_t) whose kernels write the buffers; each all-reduce
// waits for that stream's work so far, and the stream waits for the sum when it is waited for.
// Ignored by the other transports.
void ocr_dist_set_stream(OcrDist *d, void *stream);
// Lets started collectives progress (MPI progresses only inside MPI calls): the backward calls
// it between layers. Sets *all_done when nothing is in flight any more.
ocr_status_t ocr_dist_progress(OcrDist *d, int *all_done);
// 1 when the request has completed (never blocks).
int ocr_dist_test(OcrDist *d, OcrDistRequest *req);
// Waits for a started collective, at most the timeout (then the job is aborted). NCCL: makes
// the stream set by ocr_dist_set_stream wait for it instead, and returns at once.
ocr_status_t ocr_dist_wait(OcrDist *d, OcrDistRequest *req);

// NCCL: waits on the host for a CUDA event (a cudaEvent_t recorded after work that depends on
// the all-reduces, e.g. the GPU step's readback) at most the timeout, then ends the job like
// ocr_dist_wait: the GPU path's guard against a peer that hangs. Other transports: OCR_OK at
// once (the caller's own wait follows).
ocr_status_t ocr_dist_wait_device_event(OcrDist *d, void *event, const char *what);

// Blocking helpers (host memory, all with the timeout):
// in-place sum of doubles (losses and counters of a step, summed in f64 in rank order of
// arrival: the values are small and few).
ocr_status_t ocr_dist_sum_f64(OcrDist *d, double *v, int n, const char *what);
// Synchronised batch norm's per-channel statistics: the in-place sum of n doubles across the
// world, in the buffers the transport works on: host memory for mpi (blocking, with the
// timeout), device memory for nccl (enqueued on the stream set by ocr_dist_set_stream, whose
// later kernels wait for it; a peer that hangs shows at the step's readback, as for the
// gradients). Counted apart from the gradients (OcrDistCounters.stats_bytes).
ocr_status_t ocr_dist_sum_stats_f64(OcrDist *d, double *v, int64_t n, const char *what);
// in-place maximum of ints (the found-inf flag, stop requests).
ocr_status_t ocr_dist_max_i32(OcrDist *d, int32_t *v, int n, const char *what);
// bytes from `root` to every rank.
ocr_status_t ocr_dist_broadcast(OcrDist *d, void *buf, size_t bytes, int root, const char *what);
// every rank arrives, or the job is aborted after the timeout.
ocr_status_t ocr_dist_barrier(OcrDist *d, const char *what);

// Ends the whole job from this rank after an unrecoverable error (the message is printed first
// with the rank). Returns only in a world of one.
void ocr_dist_abort(OcrDist *d, const char *message);

// Traffic counters since the last reset: payload bytes of the gradient all-reduces started
// (each rank's buffer size; a ring moves 2(N-1)/N of it in and out of every rank) and calls.
typedef struct {
    int64_t allreduce_bytes, allreduce_calls;
    double wait_seconds;  // time spent blocked in ocr_dist_wait
    int64_t stats_bytes, stats_calls;  // ocr_dist_sum_stats_f64 (synchronised batch norm)
} OcrDistCounters;
OcrDistCounters ocr_dist_counters(const OcrDist *d);
void ocr_dist_reset_counters(OcrDist *d);

#endif

// Between dist.c (the interface, slots, deadlines, counters) and the transports.
#ifndef OCR_DIST_DIST_INTERNAL_H
#define OCR_DIST_DIST_INTERNAL_H

#include "distributed/dist.h"

typedef enum { DIST_OP_SUM = 0, DIST_OP_MAX } dist_op_t;
// Element types of the collectives: the gradient dtypes plus what the host helpers use.
typedef enum { DIST_T_F32 = 0, DIST_T_F16, DIST_T_BF16, DIST_T_F64, DIST_T_I32 } dist_type_t;

// ---- MPI (dist_mpi.c; without OCR_HAVE_MPI every entry point reports that it is absent) ----
int dist_mpi_available(void);
// MPI_Init_thread once per process (MPI_THREAD_FUNNELED: only the training thread calls MPI),
// MPI_Finalize registered at exit. Returns rank and world size of MPI_COMM_WORLD.
ocr_status_t dist_mpi_init(int *rank, int *world);
// Starts a non-blocking collective into request slot `slot` (0 <= slot < OCR_DIST_MAX_PENDING).
ocr_status_t dist_mpi_start_allreduce(int slot, void *buf, int64_t count, dist_type_t type, dist_op_t op);
ocr_status_t dist_mpi_start_bcast(int slot, void *buf, size_t bytes, int root);
ocr_status_t dist_mpi_start_barrier(int slot);
// 1: the slot's request completed (and was freed); 0: still running. -1: MPI reported an error
// (its message is the error).
int dist_mpi_test(int slot);
void dist_mpi_abort(int code);

// ---- NCCL (dist_nccl.c; CUDA builds with NCCL) -------------------------------------------------
int dist_nccl_available(void);
typedef struct DistNccl DistNccl;
// One communicator over the MPI world on CUDA device `device_index` (the unique id from rank 0
// goes out with an MPI broadcast through `bcast`, which waits with the world's deadline).
typedef ocr_status_t (*dist_bcast_fn)(void *user, void *buf, size_t bytes, int root);
ocr_status_t dist_nccl_open(DistNccl **out, int rank, int world, int device_index, dist_bcast_fn bcast, void *user);
void dist_nccl_close(DistNccl *n);
// The stream whose work produces the buffers (and must see their sums): a cudaStream_t.
void dist_nccl_set_stream(DistNccl *n, void *stream);
ocr_status_t dist_nccl_start_allreduce(DistNccl *n, int slot, void *buf, int64_t count, dist_type_t type);
// 1: done (and the producer stream now waits for it); 0: running; -1: a CUDA/NCCL error.
int dist_nccl_test(DistNccl *n, int slot);
// Makes the producer stream wait for the slot's all-reduce without blocking the host (the GPU
// step stays enqueue-only); the slot is free again afterwards.
ocr_status_t dist_nccl_enqueue_wait(DistNccl *n, int slot);
// 1: the CUDA event (a cudaEvent_t) has completed; 0: not yet; -1: a CUDA or NCCL error.
int dist_nccl_event_done(DistNccl *n, void *event);

#endif

// The MPI transport: non-blocking collectives on host buffers over MPI_COMM_WORLD.
//
// f32 sums use MPI_SUM on MPI_FLOAT (Open MPI adds in f32). MPI has no 16-bit float type, so
// f16/bf16 buffers travel as MPI_UINT16_T with a user op that widens both operands of every
// element to f32, adds in f32 and rounds back to the 16-bit type. The f32 sum of two 16-bit
// values is exact unless their exponents are far apart (more than 13 binades for f16, 16 for
// bf16), where the smaller one lies below the result's last 16-bit place anyway, so two ranks
// get the correctly rounded sum up to a tie case; with more ranks every hop of MPI's reduction
// rounds its partial sum to 16 bits (what NCCL does too), which is what halves the bytes.
// Doubles and ints for the host helpers use MPI_DOUBLE / MPI_INT32_T with MPI_SUM / MPI_MAX.
//
// The communicator's error handler is MPI_ERRORS_RETURN, so a failed call comes back as a
// status (with MPI's message) instead of MPI aborting silently on our behalf.
#include "distributed/dist_internal.h"

#ifdef OCR_HAVE_MPI

#include <limits.h>
#include <mpi.h>
#include <stdlib.h>

#include "core/half.h"

static int mpi_ready;
static MPI_Request requests[OCR_DIST_MAX_PENDING];
static MPI_Op op_sum_f16, op_sum_bf16;

int dist_mpi_available(void) { return 1; }

static void sum_f16(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    const ocr_f16_t *a = in;
    ocr_f16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = ocr_f32_to_f16(ocr_f16_to_f32(a[i]) + ocr_f16_to_f32(b[i]));
}

static void sum_bf16(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    const ocr_bf16_t *a = in;
    ocr_bf16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = ocr_f32_to_bf16(ocr_bf16_to_f32(a[i]) + ocr_bf16_to_f32(b[i]));
}

static ocr_status_t mpi_error(int rc, const char *what) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return ocr_set_error(OCR_ERR_IO, "MPI %s failed: %.*s", what, len, msg);
}

static void finalize_at_exit(void) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
}

ocr_status_t dist_mpi_init(int *rank, int *world) {
    if (!mpi_ready) {
        int inited = 0;
        MPI_Initialized(&inited);
        if (!inited) {
            int provided;
            int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
            if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Init_thread");
            atexit(finalize_at_exit);
        }
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        // Commutative: the sum of two partial sums does not depend on their order.
        MPI_Op_create(sum_f16, 1, &op_sum_f16);
        MPI_Op_create(sum_bf16, 1, &op_sum_bf16);
        for (int i = 0; i < OCR_DIST_MAX_PENDING; i++) requests[i] = MPI_REQUEST_NULL;
        mpi_ready = 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, world);
    return OCR_OK;
}

ocr_status_t dist_mpi_start_allreduce(int slot, void *buf, int64_t count, dist_type_t type, dist_op_t op) {
    OCR_ASSERT(mpi_ready, "dist: MPI is not initialised");
    if (count < 0 || count > INT_MAX)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "dist: all-reduce of %lld elements (at most %d per call)",
                             (long long)count, INT_MAX);
    MPI_Datatype dt;
    MPI_Op mop = op == DIST_OP_MAX ? MPI_MAX : MPI_SUM;
    switch (type) {
    case DIST_T_F32: dt = MPI_FLOAT; break;
    case DIST_T_F64: dt = MPI_DOUBLE; break;
    case DIST_T_I32: dt = MPI_INT32_T; break;
    case DIST_T_F16: dt = MPI_UINT16_T; mop = op_sum_f16; break;
    case DIST_T_BF16: dt = MPI_UINT16_T; mop = op_sum_bf16; break;
    default: return ocr_set_error(OCR_ERR_INVALID_ARG, "dist: element type %d", (int)type);
    }
    if ((type == DIST_T_F16 || type == DIST_T_BF16) && op != DIST_OP_SUM)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "dist: only sums of f16/bf16");
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, dt, mop, MPI_COMM_WORLD, &requests[slot]);
    return rc == MPI_SUCCESS ? OCR_OK : mpi_error(rc, "MPI_Iallreduce");
}

ocr_status_t dist_mpi_start_bcast(int slot, void *buf, size_t bytes, int root) {
    OCR_ASSERT(mpi_ready, "dist: MPI is not initialised");
    if (bytes > INT_MAX) return ocr_set_error(OCR_ERR_INVALID_ARG, "dist: broadcast of %zu bytes", bytes);
    int rc = MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD, &requests[slot]);
    return rc == MPI_SUCCESS ? OCR_OK : mpi_error(rc, "MPI_Ibcast");
}

ocr_status_t dist_mpi_start_barrier(int slot) {
    OCR_ASSERT(mpi_ready, "dist: MPI is not initialised");
    int rc = MPI_Ibarrier(MPI_COMM_WORLD, &requests[slot]);
    return rc == MPI_SUCCESS ? OCR_OK : mpi_error(rc, "MPI_Ibarrier");
}

int dist_mpi_test(int slot) {
    int done = 0;
    int rc = MPI_Test(&requests[slot], &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
        mpi_error(rc, "MPI_Test");
        return -1;
    }
    return done ? 1 : 0;
}

void dist_mpi_abort(int code) {
    if (mpi_ready) MPI_Abort(MPI_COMM_WORLD, code);
}

#else  // no MPI in this build

int dist_mpi_available(void) { return 0; }

static ocr_status_t absent(void) {
    return ocr_set_error(OCR_ERR_UNSUPPORTED, "this build has no MPI (install libopenmpi-dev and configure with "
                         "-DOCR_MPI=ON)");
}

ocr_status_t dist_mpi_init(int *rank, int *world) {
    *rank = 0;
    *world = 1;
    return absent();
}
ocr_status_t dist_mpi_start_allreduce(int slot, void *buf, int64_t count, dist_type_t type, dist_op_t op) {
    (void)slot, (void)buf, (void)count, (void)type, (void)op;
    return absent();
}
ocr_status_t dist_mpi_start_bcast(int slot, void *buf, size_t bytes, int root) {
    (void)slot, (void)buf, (void)bytes, (void)root;
    return absent();
}
ocr_status_t dist_mpi_start_barrier(int slot) {
    (void)slot;
    return absent();
}
int dist_mpi_test(int slot) {
    (void)slot;
    absent();
    return -1;
}
void dist_mpi_abort(int code) { (void)code; }

#endif

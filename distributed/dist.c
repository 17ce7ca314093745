// The transport-independent half of dist.h: world detection, request slots, deadlines,
// counters, and the single-process world.
#include "distributed/dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/timer.h"
#include "distributed/dist_internal.h"

typedef enum { SLOT_FREE = 0, SLOT_MPI, SLOT_NCCL } slot_kind_t;

struct OcrDist {
    ocr_dist_backend_t backend;
    int rank, world, local_rank;
    double timeout_s;
    ocr_device_t device;
    DistNccl *nccl;
    int mpi;  // MPI is initialised for this world (host collectives go through it)
    slot_kind_t slot[OCR_DIST_MAX_PENDING];
    uint32_t gen[OCR_DIST_MAX_PENDING];  // bumped at every start: tells a stale request from the current one
    char what[OCR_DIST_MAX_PENDING][64];
    int in_flight;
    OcrDistCounters counters;
};

const char *ocr_dist_backend_name(ocr_dist_backend_t b) {
    switch (b) {
    case OCR_DIST_SINGLE: return "single";
    case OCR_DIST_MPI: return "mpi";
    case OCR_DIST_NCCL: return "nccl";
    }
    return "?";
}

static int env_int(const char *name, int *out) {
    const char *s = getenv(name);
    if (!s || !*s) return 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 0 || v > 1 << 24) return 0;
    *out = (int)v;
    return 1;
}

OcrDistWorld ocr_dist_detect_world(void) {
    OcrDistWorld w = {0, 1, 0, 0};
    int size;
    // Open MPI's mpirun, then PMI (MPICH, srun --mpi=pmi2), then Slurm's own task variables.
    static const char *const vars[][3] = {
        {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"},
        {"PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID"},
        {"SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID"}};
    for (size_t k = 0; k < sizeof vars / sizeof vars[0]; k++) {
        if (!env_int(vars[k][0], &size) || size < 1) continue;
        w.world_size = size;
        w.launched = 1;
        env_int(vars[k][1], &w.rank);
        if (!env_int(vars[k][2], &w.local_rank)) w.local_rank = w.rank;
        break;
    }
    return w;
}

int ocr_dist_backend_available(ocr_dist_backend_t b) {
    switch (b) {
    case OCR_DIST_SINGLE: return 1;
    case OCR_DIST_MPI: return dist_mpi_available();
    case OCR_DIST_NCCL: return dist_nccl_available();  // several ranks need MPI too (ocr_dist_open)
    }
    return 0;
}

ocr_dist_backend_t ocr_dist_choose_backend(const OcrDistWorld *w, ocr_device_t device) {
    if (!w->launched || w->world_size < 2) return OCR_DIST_SINGLE;
    if (device.type == OCR_DEVICE_CUDA && ocr_dist_backend_available(OCR_DIST_NCCL)) return OCR_DIST_NCCL;
    return OCR_DIST_MPI;
}

static ocr_status_t bcast_for_nccl(void *user, void *buf, size_t bytes, int root) {
    return ocr_dist_broadcast(user, buf, bytes, root, "the NCCL unique id");
}

ocr_status_t ocr_dist_open(OcrDist **out, const OcrDistOptions *o) {
    *out = NULL;
    if (!(o->timeout_s > 0))
        return ocr_set_error(OCR_ERR_INVALID_ARG, "dist: timeout %g s (must be > 0)", o->timeout_s);
    OcrDistWorld w = ocr_dist_detect_world();
    if (o->backend == OCR_DIST_SINGLE && w.world_size > 1)
        return ocr_set_error(OCR_ERR_UNSUPPORTED,
                             "this process is rank %d of %d launched processes, but the single-process transport "
                             "was chosen%s", w.rank, w.world_size,
                             dist_mpi_available() ? " (Distributed.backend single)"
                                                  : ": this build has no MPI (install libopenmpi-dev and configure "
                                                    "with -DOCR_MPI=ON)");
    if (!ocr_dist_backend_available(o->backend) && w.world_size > 1)
        return ocr_set_error(OCR_ERR_UNSUPPORTED,
                             "this process is rank %d of %d launched processes, but this build has no %s (%s)",
                             w.rank, w.world_size, o->backend == OCR_DIST_NCCL ? "NCCL" : "MPI",
                             o->backend == OCR_DIST_NCCL ? "a CUDA build finds NCCL with the toolkit"
                                                         : "install libopenmpi-dev and configure with -DOCR_MPI=ON");
    if (!ocr_dist_backend_available(o->backend))
        return ocr_set_error(OCR_ERR_UNSUPPORTED, "Distributed.backend %s: this build has no %s (%s)",
                             ocr_dist_backend_name(o->backend), o->backend == OCR_DIST_NCCL ? "NCCL" : "MPI",
                             o->backend == OCR_DIST_NCCL ? "a CUDA build finds NCCL with the toolkit"
                                                         : "install libopenmpi-dev and configure with -DOCR_MPI=ON");
    if (o->backend == OCR_DIST_NCCL && o->device.type != OCR_DEVICE_CUDA)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "Distributed.backend nccl needs a CUDA device (Global.device)");
    OcrDist *d = calloc(1, sizeof *d);
    if (!d) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    d->backend = o->backend;
    d->timeout_s = o->timeout_s;
    d->device = o->device;
    d->rank = 0;
    d->world = 1;
    d->local_rank = 0;
    // NCCL on one GPU of an unlaunched process needs no MPI (no unique id to share): the 1-GPU
    // check runs where no MPI runtime is installed. Everything else is an MPI world.
    if (o->backend == OCR_DIST_MPI || (o->backend == OCR_DIST_NCCL && w.launched)) {
        d->mpi = 1;
        ocr_status_t st = dist_mpi_init(&d->rank, &d->world);
        if (st != OCR_OK) {
            free(d);
            return st;
        }
        d->local_rank = w.launched ? w.local_rank : d->rank;
    }
    if (o->backend == OCR_DIST_NCCL) {
        ocr_status_t st = dist_nccl_open(&d->nccl, d->rank, d->world, o->device.index, bcast_for_nccl, d);
        if (st != OCR_OK) {
            free(d);
            return st;
        }
    }
    *out = d;
    return OCR_OK;
}

void ocr_dist_close(OcrDist *d) {
    if (!d) return;
    if (d->nccl) dist_nccl_close(d->nccl);
    free(d);
}

int ocr_dist_rank(const OcrDist *d) { return d ? d->rank : 0; }
int ocr_dist_world_size(const OcrDist *d) { return d ? d->world : 1; }
int ocr_dist_local_rank(const OcrDist *d) { return d ? d->local_rank : 0; }
ocr_dist_backend_t ocr_dist_backend(const OcrDist *d) { return d ? d->backend : OCR_DIST_SINGLE; }

void ocr_dist_set_stream(OcrDist *d, void *stream) {
    if (d && d->nccl) dist_nccl_set_stream(d->nccl, stream);
}

static int free_slot(OcrDist *d) {
    for (int i = 0; i < OCR_DIST_MAX_PENDING; i++)
        if (d->slot[i] == SLOT_FREE) return i;
    return -1;
}

static ocr_status_t take_slot(OcrDist *d, const char *what, int *slot) {
    *slot = free_slot(d);
    if (*slot < 0)
        return ocr_set_error(OCR_ERR_INTERNAL, "dist: more than %d collectives in flight (%s)", OCR_DIST_MAX_PENDING,
                             what);
    snprintf(d->what[*slot], sizeof d->what[0], "%s", what ? what : "a collective");
    d->gen[*slot]++;
    return OCR_OK;
}

static dist_type_t grad_type(ocr_dtype_t t) {
    return t == OCR_F16 ? DIST_T_F16 : t == OCR_BF16 ? DIST_T_BF16 : DIST_T_F32;
}

ocr_status_t ocr_dist_allreduce_start(OcrDist *d, void *buf, int64_t count, ocr_dtype_t dtype, const char *what,
                                      OcrDistRequest *req) {
    req->slot = -1;
    req->t_start = ocr_now_seconds();
    if (dtype != OCR_F32 && dtype != OCR_F16 && dtype != OCR_BF16)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "dist: all-reduce of %s (f32, f16 or bf16 only)",
                             ocr_dtype_name(dtype));
    d->counters.allreduce_bytes += count * (int64_t)ocr_dtype_size(dtype);
    d->counters.allreduce_calls++;
    // The single transport has nothing to do; MPI and NCCL run even in a world of one (what a
    // 1-GPU check of the transport needs).
    if (d->backend == OCR_DIST_SINGLE || count == 0) return OCR_OK;
    int slot;
    OCR_TRY(take_slot(d, what, &slot));
    if (d->nccl) {
        OCR_TRY(dist_nccl_start_allreduce(d->nccl, slot, buf, count, grad_type(dtype)));
        d->slot[slot] = SLOT_NCCL;
    } else {
        OCR_TRY(dist_mpi_start_allreduce(slot, buf, count, grad_type(dtype), DIST_OP_SUM));
        d->slot[slot] = SLOT_MPI;
    }
    d->in_flight++;
    req->slot = slot;
    req->gen = d->gen[slot];
    return OCR_OK;
}

// 1 done, 0 running, -1 error (message set).
static int test_slot(OcrDist *d, int slot) {
    int r = d->slot[slot] == SLOT_NCCL ? dist_nccl_test(d->nccl, slot) : dist_mpi_test(slot);
    if (r != 0) {
        d->slot[slot] = SLOT_FREE;
        d->in_flight--;
    }
    return r;
}

// A request whose slot was freed (its collective completed, e.g. in ocr_dist_progress) and
// perhaps taken again by a later one.
static int request_done(const OcrDist *d, const OcrDistRequest *req) {
    return d->slot[req->slot] == SLOT_FREE || d->gen[req->slot] != req->gen;
}

int ocr_dist_test(OcrDist *d, OcrDistRequest *req) {
    if (req->slot < 0) return 1;
    if (request_done(d, req)) {
        req->slot = -1;
        return 1;
    }
    int r = test_slot(d, req->slot);
    if (r != 0) req->slot = -1;
    return r != 0;
}

ocr_status_t ocr_dist_progress(OcrDist *d, int *all_done) {
    for (int i = 0; d->in_flight > 0 && i < OCR_DIST_MAX_PENDING; i++) {
        if (d->slot[i] == SLOT_FREE) continue;
        if (test_slot(d, i) < 0) return ocr_wrap_error(OCR_ERR_IO, "dist: %s", d->what[i]);
    }
    if (all_done) *all_done = d->in_flight == 0;
    return OCR_OK;
}

static void sleep_briefly(double seconds) {
    struct timespec ts = {0, (long)(seconds * 1e9)};
    nanosleep(&ts, NULL);
}

ocr_status_t ocr_dist_wait(OcrDist *d, OcrDistRequest *req) {
    if (req->slot < 0) return OCR_OK;
    if (request_done(d, req)) {
        req->slot = -1;
        return OCR_OK;
    }
    if (d->slot[req->slot] == SLOT_NCCL) {
        // The device waits, not the host: the GPU step stays enqueue-only. A peer that hangs
        // shows as a step readback that does not arrive (the trainer's wait on it).
        int slot = req->slot;
        ocr_status_t st = dist_nccl_enqueue_wait(d->nccl, slot);
        d->slot[slot] = SLOT_FREE;
        d->in_flight--;
        req->slot = -1;
        return st;
    }
    double t0 = ocr_now_seconds(), deadline = t0 + d->timeout_s;
    // Busy for the first millisecond (a collective usually finishes within it), then short
    // sleeps so a rank waiting for a slow peer leaves the core to it.
    for (;;) {
        int slot = req->slot;
        int r = request_done(d, req) ? 1 : test_slot(d, slot);
        if (r < 0) {
            req->slot = -1;
            return ocr_wrap_error(OCR_ERR_IO, "dist: %s", d->what[slot]);
        }
        if (r > 0) break;
        double now = ocr_now_seconds();
        if (now > deadline) {
            char msg[512];
            snprintf(msg, sizeof msg,
                     "rank %d of %d: %s did not complete within %g s (Distributed.timeout_s): a peer rank died, "
                     "hangs or is far behind; ending the job",
                     d->rank, d->world, d->what[slot], d->timeout_s);
            ocr_dist_abort(d, msg);
            return ocr_set_error(OCR_ERR_IO, "%s", msg);
        }
        if (now - t0 > 1e-3) sleep_briefly(now - t0 > 0.1 ? 1e-3 : 50e-6);
    }
    req->slot = -1;
    d->counters.wait_seconds += ocr_now_seconds() - t0;
    return OCR_OK;
}

ocr_status_t ocr_dist_wait_device_event(OcrDist *d, void *event, const char *what) {
    if (!d || !d->nccl) return OCR_OK;
    double t0 = ocr_now_seconds(), deadline = t0 + d->timeout_s;
    for (;;) {
        int r = dist_nccl_event_done(d->nccl, event);
        if (r < 0) return ocr_wrap_error(OCR_ERR_CUDA, "dist: %s", what);
        if (r > 0) return OCR_OK;
        double now = ocr_now_seconds();
        if (now > deadline) {
            char msg[512];
            snprintf(msg, sizeof msg,
                     "rank %d of %d: %s did not complete within %g s (Distributed.timeout_s): a peer rank died, "
                     "hangs or is far behind; ending the job", d->rank, d->world, what, d->timeout_s);
            ocr_dist_abort(d, msg);
            return ocr_set_error(OCR_ERR_IO, "%s", msg);
        }
        sleep_briefly(now - t0 > 0.1 ? 1e-3 : 50e-6);
    }
}

// Host collectives always go over MPI (NCCL worlds are MPI worlds too).
static ocr_status_t host_collective_wait(OcrDist *d, int slot) {
    d->slot[slot] = SLOT_MPI;
    d->in_flight++;
    OcrDistRequest req = {slot, d->gen[slot], ocr_now_seconds()};
    double w = d->counters.wait_seconds;
    ocr_status_t st = ocr_dist_wait(d, &req);
    d->counters.wait_seconds = w;  // only gradient waits count as exposed communication
    return st;
}

ocr_status_t ocr_dist_sum_f64(OcrDist *d, double *v, int n, const char *what) {
    if (!d || !d->mpi) return OCR_OK;
    int slot;
    OCR_TRY(take_slot(d, what, &slot));
    OCR_TRY(dist_mpi_start_allreduce(slot, v, n, DIST_T_F64, DIST_OP_SUM));
    return host_collective_wait(d, slot);
}

ocr_status_t ocr_dist_sum_stats_f64(OcrDist *d, double *v, int64_t n, const char *what) {
    if (!d || n == 0) return OCR_OK;
    d->counters.stats_bytes += n * (int64_t)sizeof(double);
    d->counters.stats_calls++;
    if (d->backend == OCR_DIST_SINGLE) return OCR_OK;
    int slot;
    OCR_TRY(take_slot(d, what, &slot));
    if (d->nccl) {
        OCR_TRY(dist_nccl_start_allreduce(d->nccl, slot, v, n, DIST_T_F64));
        d->slot[slot] = SLOT_NCCL;
        d->in_flight++;
        OcrDistRequest req = {slot, d->gen[slot], ocr_now_seconds()};
        return ocr_dist_wait(d, &req);  // the stream waits, the host goes on
    }
    OCR_TRY(dist_mpi_start_allreduce(slot, v, n, DIST_T_F64, DIST_OP_SUM));
    return host_collective_wait(d, slot);
}

ocr_status_t ocr_dist_max_i32(OcrDist *d, int32_t *v, int n, const char *what) {
    if (!d || !d->mpi) return OCR_OK;
    int slot;
    OCR_TRY(take_slot(d, what, &slot));
    OCR_TRY(dist_mpi_start_allreduce(slot, v, n, DIST_T_I32, DIST_OP_MAX));
    return host_collective_wait(d, slot);
}

ocr_status_t ocr_dist_broadcast(OcrDist *d, void *buf, size_t bytes, int root, const char *what) {
    if (!d || !d->mpi) return OCR_OK;
    if (root < 0 || root >= d->world)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "dist: broadcast from rank %d of %d", root, d->world);
    int slot;
    OCR_TRY(take_slot(d, what, &slot));
    OCR_TRY(dist_mpi_start_bcast(slot, buf, bytes, root));
    return host_collective_wait(d, slot);
}

ocr_status_t ocr_dist_barrier(OcrDist *d, const char *what) {
    if (!d || !d->mpi) return OCR_OK;
    int slot;
    OCR_TRY(take_slot(d, what, &slot));
    OCR_TRY(dist_mpi_start_barrier(slot));
    return host_collective_wait(d, slot);
}

void ocr_dist_abort(OcrDist *d, const char *message) {
    fprintf(stderr, "ocrtrain: error: %s\n", message);
    fflush(stderr);
    if (!d || d->world == 1) return;
    dist_mpi_abort(1);
}

OcrDistCounters ocr_dist_counters(const OcrDist *d) {
    OcrDistCounters z;
    memset(&z, 0, sizeof z);
    return d ? d->counters : z;
}

void ocr_dist_reset_counters(OcrDist *d) {
    if (d) memset(&d->counters, 0, sizeof d->counters);
}

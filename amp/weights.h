// The weights side of AMP, on plain lists of parameter tensors (no model types):
// - O1 cast cache: a low-precision copy of selected f32 parameters, made once per step and
//   used by the ops that run in low precision (PyTorch's autocast weight cache, without the
//   per-call lookup). Costs 2 bytes per cached parameter (charged to PARAMS).
// - O2 master weights: f32 copies of the low-precision working parameters, owned by the
//   optimizer step (charged to MASTER); adam_update writes the master and rounds it into the
//   working parameter (optionally stochastically).
// - Snapshots: a saved copy of a buffer (BN running statistics) to put back after a skipped
//   step, since a forward that overflowed may already have written inf/NaN into them.
#ifndef OCR_AMP_WEIGHTS_H
#define OCR_AMP_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/tensor.h"

// ---- O1 cast cache ------------------------------------------------------------------------
typedef struct {
    int count;       // parameters in the list the cache was built for
    OcrTensor *cast; // per parameter: its low-precision copy, or data == NULL (used as is)
    void *buffer;    // one allocation for all copies (OCR_MEM_PARAMS)
    size_t bytes;
    int valid;       // the copies match the parameters (refresh after every optimizer step)
    int64_t refreshes;
} AmpCastCache;

// cast_dtype[i] is f16/bf16 to cache parameter i in that dtype, f32 to leave it alone.
// params[i] must be f32 tensors on one device; the copies live there (cast on that device).
// The copies are made by the first refresh.
ocr_status_t amp_cast_cache_init(AmpCastCache *c, const OcrTensor *params, const ocr_dtype_t *cast_dtype, int count);
// Casts every cached parameter (nearest even); marks the cache valid.
void amp_cast_cache_refresh(AmpCastCache *c, const OcrTensor *params);
// After the parameters changed (optimizer step, weight load): the next refresh recasts.
static inline void amp_cast_cache_invalidate(AmpCastCache *c) { c->valid = 0; }
// The copy of parameter i, or NULL when it is not cached (use the parameter itself).
// Asserts that the cache is valid: reading a stale copy would silently train on old weights.
const OcrTensor *amp_cast_cache_get(const AmpCastCache *c, int i);
void amp_cast_cache_free(AmpCastCache *c);

// ---- O2 master weights ----------------------------------------------------------------------
typedef struct {
    int count;
    OcrTensor *master;  // per parameter: f32 master, or data == NULL (an f32 parameter, updated in place)
    void *buffer;       // OCR_MEM_MASTER
    size_t bytes;
} AmpMaster;

// has_master[i] != 0 gives parameter i an f32 master holding values[i] (f32 tensors, the
// parameter's full-precision values before it is turned into low precision). The masters live
// on the values' device.
ocr_status_t amp_master_init(AmpMaster *m, const OcrTensor *values, const int *has_master, int count);
// The master of parameter i for adam_update's `master` argument (NULL: none).
OcrTensor *amp_master_get(AmpMaster *m, int i);
void amp_master_free(AmpMaster *m);

// A per-step seed for stochastic rounding (adam_update needs a new one every step):
// a 64-bit mix of the run's seed and the step. Never 0 (0 means "round to nearest").
uint64_t amp_stochastic_round_seed(uint64_t base_seed, int64_t step);

// ---- snapshots --------------------------------------------------------------------------------
typedef struct {
    void *saved;  // OCR_MEM_WORKSPACE on `device`, kept between steps
    size_t bytes;
    int valid;
    ocr_device_t device;
} AmpSnapshot;

// Copies `bytes` from data (CPU memory); allocates on first use or when the size changes.
ocr_status_t amp_snapshot_take(AmpSnapshot *s, const void *data, size_t bytes);
// The same for data on `device`; on a CUDA device the copy is enqueued on its current stream
// (asynchronous, capturable: the allocation happens on the first call only).
ocr_status_t amp_snapshot_take_on(AmpSnapshot *s, ocr_device_t device, const void *data, size_t bytes);
// Writes the saved copy back to data on the snapshot's device (asserts a valid snapshot of the
// same size).
void amp_snapshot_restore(const AmpSnapshot *s, void *data, size_t bytes);
void amp_snapshot_free(AmpSnapshot *s);

#endif

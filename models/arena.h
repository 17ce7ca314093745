// The activation arena: saved activations and activation gradients of one training (or
// inference) step come from ONE tracked allocation (OCR_MEM_ACTIVATIONS).
//
// The same code path runs twice: once in planning mode, where nothing is allocated and no
// kernel runs (tensors carry fake addresses), and once for real. The allocator is
// deterministic first-fit with coalescing, so the real run places every tensor exactly where
// the plan did and needs exactly the planned number of bytes.
#ifndef OCR_MODELS_ARENA_H
#define OCR_MODELS_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/tensor.h"

typedef struct {
    size_t off, size;
} OcrArenaRange;

typedef struct {
    uintptr_t base;  // real block, or a fake non-zero address while planning
    void *block;     // the tracked allocation (NULL while planning)
    size_t capacity; // bytes of `block` (0 while planning: unlimited)
    size_t top;      // end of the highest live range
    size_t peak;     // high-water mark of top
    size_t in_use;   // bytes live
    int live;        // live ranges
    OcrArenaRange *free_list;  // sorted by offset, all below top
    int nfree, free_cap;
    int planning;
    ocr_device_t device;        // where real passes allocate (the model's device; CPU when zeroed)
    ocr_device_t block_device;  // where `block` lives
} OcrArena;

#define OCR_ARENA_ALIGN 64

// Starts a planning pass (forgets every range; keeps nothing allocated).
void ocr_arena_begin_plan(OcrArena *a);
// Starts a real pass over `capacity` bytes on a->device; reuses the current block when it is
// that big already and on that device, otherwise (re)allocates it from the tracked allocator.
ocr_status_t ocr_arena_begin_run(OcrArena *a, size_t capacity);
// Forgets every range (the block stays allocated).
void ocr_arena_reset(OcrArena *a);
void ocr_arena_release(OcrArena *a);  // frees the block

// A tensor of the given shape; aborts when a real pass exceeds the capacity (the plan was wrong).
OcrTensor ocr_arena_tensor(OcrArena *a, ocr_dtype_t dtype, int ndim, const int64_t *shape);
// Returns a tensor's range; NULL data (an empty tensor) is ignored. Clears *t.
void ocr_arena_free(OcrArena *a, OcrTensor *t);
size_t ocr_arena_round(size_t bytes);

#endif

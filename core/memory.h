// Tracked memory: every byte the trainer allocates for tensors comes from here, with a
// category, so reports can say where memory went (and where AMP saved or cost some).
#ifndef OCR_CORE_MEMORY_H
#define OCR_CORE_MEMORY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/device.h"

typedef enum {
    OCR_MEM_PARAMS = 0,   // parameters in their working dtype
    OCR_MEM_GRADS,        // parameter gradients
    OCR_MEM_MASTER,       // fp32 master weights (AMP O2)
    OCR_MEM_OPTIMIZER,    // optimizer moments
    OCR_MEM_ACTIVATIONS,  // saved activations and their gradients
    OCR_MEM_WORKSPACE,    // scratch: im2col, conversions, per-op temporaries
    OCR_MEM_DATA,         // input batches, labels
    OCR_MEM_CATEGORY_COUNT
} ocr_mem_category_t;

#define OCR_MEM_ALIGNMENT 64

const char *ocr_mem_category_name(ocr_mem_category_t cat);  // "params", "grads", ...

typedef struct {
    int64_t current[OCR_MEM_CATEGORY_COUNT];
    int64_t peak[OCR_MEM_CATEGORY_COUNT];  // each category's own high-water mark
    int64_t current_total;
    int64_t peak_total;                    // high-water mark of the sum (not the sum of peaks)
    int64_t allocations;                   // number of live allocations
} OcrMemStats;

// Allocates `bytes` (aligned to OCR_MEM_ALIGNMENT) on `device`, charged to `cat`.
// Returns NULL and sets the error message on failure. Zero bytes gives a valid unique pointer.
void *ocr_mem_alloc(ocr_device_t device, ocr_mem_category_t cat, size_t bytes);
// Same, zero-filled.
void *ocr_mem_calloc(ocr_device_t device, ocr_mem_category_t cat, size_t bytes);
// Frees a pointer from ocr_mem_alloc (NULL is fine).
void ocr_mem_free(void *ptr);
// The size a live pointer was allocated with.
size_t ocr_mem_size_of(const void *ptr);

OcrMemStats ocr_mem_stats(ocr_device_t device);
// Starts a new peak measurement: every peak becomes the current value.
void ocr_mem_reset_peak(ocr_device_t device);
// A human-readable table of current and peak bytes per category.
void ocr_mem_report(FILE *out, ocr_device_t device);
// "12.3 MiB" style formatting into buf.
const char *ocr_format_bytes(int64_t bytes, char *buf, size_t bufsize);

// Device allocators are installed by a backend (the CUDA backend registers cudaMalloc);
// the tracking and the categories stay in one place.
typedef void *(*ocr_device_alloc_fn)(int device_index, size_t bytes);
typedef void (*ocr_device_free_fn)(int device_index, void *ptr);
void ocr_mem_register_device_allocator(ocr_device_type_t type, ocr_device_alloc_fn alloc_fn,
                                       ocr_device_free_fn free_fn);

// ---- workspace: stack-like scratch for ops -----------------------------------
// Ops take scratch with ocr_workspace_push and give it back in reverse order with
// ocr_workspace_pop. Blocks are kept between calls so a training step does not hit the
// system allocator; when the stack is empty and was fragmented, blocks merge into one of
// the high-water size. Charged to OCR_MEM_WORKSPACE. Per thread; CPU only.
void *ocr_workspace_push(size_t bytes);
void ocr_workspace_pop(void *ptr);
// Releases all cached workspace blocks of the calling thread (must be empty).
void ocr_workspace_release(void);

#endif

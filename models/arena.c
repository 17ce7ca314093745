#include "models/arena.h"

#include <stdlib.h>
#include <string.h>

#include "core/memory.h"

// Fake base used while planning: never dereferenced, only offsets are computed from it.
#define PLAN_BASE ((uintptr_t)1 << 20)

size_t ocr_arena_round(size_t bytes) {
    if (bytes == 0) bytes = 1;
    return (bytes + OCR_ARENA_ALIGN - 1) / OCR_ARENA_ALIGN * OCR_ARENA_ALIGN;
}

static void forget(OcrArena *a) {
    a->top = 0;
    a->peak = 0;
    a->in_use = 0;
    a->live = 0;
    a->nfree = 0;
}

void ocr_arena_begin_plan(OcrArena *a) {
    forget(a);
    a->planning = 1;
    a->base = PLAN_BASE;
}

ocr_status_t ocr_arena_begin_run(OcrArena *a, size_t capacity) {
    forget(a);
    a->planning = 0;
    if (!a->block || a->capacity != capacity || !ocr_device_equal(a->block_device, a->device)) {
        ocr_mem_free(a->block);
        a->block = NULL;
        a->capacity = 0;
        a->block = ocr_mem_alloc(a->device, OCR_MEM_ACTIVATIONS, capacity);
        if (!a->block) return ocr_wrap_error(OCR_ERR_OOM, "allocating %zu bytes of activations", capacity);
        a->capacity = capacity;
        a->block_device = a->device;
    }
    a->base = (uintptr_t)a->block;
    return OCR_OK;
}

void ocr_arena_reset(OcrArena *a) { forget(a); }

void ocr_arena_release(OcrArena *a) {
    ocr_device_t device = a->device;
    ocr_mem_free(a->block);
    free(a->free_list);
    memset(a, 0, sizeof *a);
    a->device = device;
}

static size_t arena_alloc(OcrArena *a, size_t size) {
    for (int i = 0; i < a->nfree; i++) {
        if (a->free_list[i].size >= size) {
            size_t off = a->free_list[i].off;
            a->free_list[i].off += size;
            a->free_list[i].size -= size;
            if (a->free_list[i].size == 0) {
                memmove(&a->free_list[i], &a->free_list[i + 1], (size_t)(a->nfree - i - 1) * sizeof *a->free_list);
                a->nfree--;
            }
            return off;
        }
    }
    size_t off = a->top;
    a->top += size;
    if (a->top > a->peak) a->peak = a->top;
    OCR_ASSERT(a->planning || a->top <= a->capacity,
               "activation arena overflow: %zu > %zu bytes (the memory plan does not match the run)", a->top,
               a->capacity);
    return off;
}

OcrTensor ocr_arena_tensor(OcrArena *a, ocr_dtype_t dtype, int ndim, const int64_t *shape) {
    OCR_ASSERT(a->base != 0, "arena used outside a pass");
    OcrTensor t = ocr_tensor_view(NULL, dtype, a->device, ndim, shape);
    size_t size = ocr_arena_round(ocr_tensor_bytes(&t));
    size_t off = arena_alloc(a, size);
    t.data = (void *)(a->base + off);
    a->in_use += size;
    a->live++;
    return t;
}

void ocr_arena_free(OcrArena *a, OcrTensor *t) {
    if (!t->data) return;
    uintptr_t p = (uintptr_t)t->data;
    OCR_ASSERT(p >= a->base && p < a->base + a->top, "freeing a tensor that is not in the arena");
    size_t off = (size_t)(p - a->base);
    size_t size = ocr_arena_round(ocr_tensor_bytes(t));
    OCR_ASSERT(off + size <= a->top);
    memset(t, 0, sizeof *t);
    a->in_use -= size;
    a->live--;
    // Insert sorted, checking for double frees, then coalesce with neighbours.
    int i = 0;
    while (i < a->nfree && a->free_list[i].off < off) i++;
    OCR_ASSERT(i == 0 || a->free_list[i - 1].off + a->free_list[i - 1].size <= off, "arena double free");
    OCR_ASSERT(i == a->nfree || off + size <= a->free_list[i].off, "arena double free");
    if (a->nfree == a->free_cap) {
        a->free_cap = a->free_cap ? 2 * a->free_cap : 64;
        a->free_list = realloc(a->free_list, (size_t)a->free_cap * sizeof *a->free_list);
        OCR_ASSERT(a->free_list, "out of host memory");
    }
    memmove(&a->free_list[i + 1], &a->free_list[i], (size_t)(a->nfree - i) * sizeof *a->free_list);
    a->free_list[i].off = off;
    a->free_list[i].size = size;
    a->nfree++;
    if (i + 1 < a->nfree && a->free_list[i].off + a->free_list[i].size == a->free_list[i + 1].off) {
        a->free_list[i].size += a->free_list[i + 1].size;
        memmove(&a->free_list[i + 1], &a->free_list[i + 2], (size_t)(a->nfree - i - 2) * sizeof *a->free_list);
        a->nfree--;
    }
    if (i > 0 && a->free_list[i - 1].off + a->free_list[i - 1].size == a->free_list[i].off) {
        a->free_list[i - 1].size += a->free_list[i].size;
        memmove(&a->free_list[i], &a->free_list[i + 1], (size_t)(a->nfree - i - 1) * sizeof *a->free_list);
        a->nfree--;
        i--;
    }
    // A free range that reaches the top lowers it.
    if (a->nfree > 0) {
        OcrArenaRange *last = &a->free_list[a->nfree - 1];
        if (last->off + last->size == a->top) {
            a->top = last->off;
            a->nfree--;
        }
    }
}

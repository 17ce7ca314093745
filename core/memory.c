#include "core/memory.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

// Every live block, host or device, is remembered in one open-addressing table keyed by
// its pointer. Freeing or sizing a pointer looks it up there, so a double free or a foreign
// pointer is caught without reading memory that may already be gone (a header in front of
// the block would have to be read after free to detect a double free).
typedef struct {
    void *ptr;
    uint64_t bytes;
    int32_t category;
    int16_t type;
    int16_t index;
} Block;

static pthread_mutex_t mem_mutex = PTHREAD_MUTEX_INITIALIZER;
static OcrMemStats stats[OCR_DEVICE_TYPE_COUNT][OCR_MAX_DEVICES];

static ocr_device_alloc_fn device_alloc[OCR_DEVICE_TYPE_COUNT];
static ocr_device_free_fn device_free[OCR_DEVICE_TYPE_COUNT];

static Block *blocks;
static size_t blocks_cap, blocks_used;  // cap is 0 or a power of two

const char *ocr_mem_category_name(ocr_mem_category_t cat) {
    static const char *names[OCR_MEM_CATEGORY_COUNT] = {"params",      "grads",     "master", "optimizer",
                                                        "activations", "workspace", "data"};
    return (cat >= 0 && cat < OCR_MEM_CATEGORY_COUNT) ? names[cat] : "?";
}

// count is +1 for an allocation and -1 for a free (bytes may be 0 either way).
static void charge(ocr_device_t dev, ocr_mem_category_t cat, int64_t delta, int count) {
    OcrMemStats *s = &stats[dev.type][dev.index];
    s->current[cat] += delta;
    s->current_total += delta;
    s->allocations += count;
    if (s->current[cat] > s->peak[cat]) s->peak[cat] = s->current[cat];
    if (s->current_total > s->peak_total) s->peak_total = s->current_total;
}

static size_t hash_ptr(const void *p, size_t cap) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static int table_insert(Block blk) {
    if ((blocks_used + 1) * 2 > blocks_cap) {
        size_t ncap = blocks_cap ? blocks_cap * 2 : 256;
        Block *nb = calloc(ncap, sizeof *nb);
        if (!nb) return 0;
        for (size_t i = 0; i < blocks_cap; i++) {
            if (!blocks[i].ptr) continue;
            size_t h = hash_ptr(blocks[i].ptr, ncap);
            while (nb[h].ptr) h = (h + 1) & (ncap - 1);
            nb[h] = blocks[i];
        }
        free(blocks);
        blocks = nb;
        blocks_cap = ncap;
    }
    size_t h = hash_ptr(blk.ptr, blocks_cap);
    while (blocks[h].ptr) h = (h + 1) & (blocks_cap - 1);
    blocks[h] = blk;
    blocks_used++;
    return 1;
}

static Block *table_find(const void *ptr) {
    if (!blocks_cap) return NULL;
    size_t h = hash_ptr(ptr, blocks_cap);
    while (blocks[h].ptr) {
        if (blocks[h].ptr == ptr) return &blocks[h];
        h = (h + 1) & (blocks_cap - 1);
    }
    return NULL;
}

static void table_remove(Block *slot) {
    // Backward-shift deletion keeps linear probing chains intact: an entry moves into the
    // hole when its home slot is not cyclically inside (hole, its position].
    size_t cap = blocks_cap;
    size_t i = (size_t)(slot - blocks);
    blocks[i].ptr = NULL;
    size_t j = i;
    for (;;) {
        j = (j + 1) & (cap - 1);
        if (!blocks[j].ptr) break;
        size_t k = hash_ptr(blocks[j].ptr, cap);
        if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
            blocks[i] = blocks[j];
            blocks[j].ptr = NULL;
            i = j;
        }
    }
    blocks_used--;
}

void ocr_mem_register_device_allocator(ocr_device_type_t type, ocr_device_alloc_fn alloc_fn,
                                       ocr_device_free_fn free_fn) {
    OCR_ASSERT(type > OCR_DEVICE_CPU && type < OCR_DEVICE_TYPE_COUNT, "device type %d", (int)type);
    pthread_mutex_lock(&mem_mutex);
    device_alloc[type] = alloc_fn;
    device_free[type] = free_fn;
    pthread_mutex_unlock(&mem_mutex);
}

void *ocr_mem_alloc(ocr_device_t device, ocr_mem_category_t cat, size_t bytes) {
    OCR_ASSERT(cat >= 0 && cat < OCR_MEM_CATEGORY_COUNT);
    OCR_ASSERT(device.type >= 0 && device.type < OCR_DEVICE_TYPE_COUNT && device.index >= 0 &&
               device.index < OCR_MAX_DEVICES);
    void *ptr;
    ocr_device_free_fn dfree = NULL;
    if (device.type == OCR_DEVICE_CPU) {
        // aligned_alloc wants a multiple of the alignment; zero bytes still get a unique block.
        size_t payload = (bytes + OCR_MEM_ALIGNMENT - 1) / OCR_MEM_ALIGNMENT * OCR_MEM_ALIGNMENT;
        if (payload < bytes) {
            ocr_set_error(OCR_ERR_OOM, "allocation of %zu bytes (%s) is too large", bytes, ocr_mem_category_name(cat));
            return NULL;
        }
        ptr = aligned_alloc(OCR_MEM_ALIGNMENT, payload ? payload : OCR_MEM_ALIGNMENT);
        if (!ptr) {
            char buf[32];
            ocr_set_error(OCR_ERR_OOM, "out of host memory allocating %s for %s",
                          ocr_format_bytes((int64_t)bytes, buf, sizeof buf), ocr_mem_category_name(cat));
            return NULL;
        }
    } else {
        pthread_mutex_lock(&mem_mutex);
        ocr_device_alloc_fn fn = device_alloc[device.type];
        dfree = device_free[device.type];
        pthread_mutex_unlock(&mem_mutex);
        if (!fn) {
            ocr_set_error(OCR_ERR_UNSUPPORTED, "no allocator registered for device cuda:%d (no CUDA backend initialised)",
                          device.index);
            return NULL;
        }
        ptr = fn(device.index, bytes ? bytes : 1);
        if (!ptr) return NULL;  // the backend set the message
    }
    pthread_mutex_lock(&mem_mutex);
    Block blk = {ptr, bytes, (int32_t)cat, (int16_t)device.type, (int16_t)device.index};
    if (!table_insert(blk)) {
        pthread_mutex_unlock(&mem_mutex);
        if (device.type == OCR_DEVICE_CPU)
            free(ptr);
        else
            dfree(device.index, ptr);
        ocr_set_error(OCR_ERR_OOM, "out of host memory tracking an allocation");
        return NULL;
    }
    charge(device, cat, (int64_t)bytes, +1);
    pthread_mutex_unlock(&mem_mutex);
    return ptr;
}

void *ocr_mem_calloc(ocr_device_t device, ocr_mem_category_t cat, size_t bytes) {
    OCR_ASSERT(device.type == OCR_DEVICE_CPU, "ocr_mem_calloc is for host memory");
    void *p = ocr_mem_alloc(device, cat, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

void ocr_mem_free(void *ptr) {
    if (!ptr) return;
    pthread_mutex_lock(&mem_mutex);
    Block *slot = table_find(ptr);
    if (!slot) {
        pthread_mutex_unlock(&mem_mutex);
        OCR_ASSERT(0, "ocr_mem_free(%p): not from ocr_mem_alloc, or freed twice", ptr);
    }
    Block blk = *slot;
    ocr_device_t dev = {(ocr_device_type_t)blk.type, blk.index};
    ocr_device_free_fn fn = device_free[dev.type];
    OCR_ASSERT(dev.type == OCR_DEVICE_CPU || fn, "device allocator unregistered while blocks are live");
    table_remove(slot);
    charge(dev, (ocr_mem_category_t)blk.category, -(int64_t)blk.bytes, -1);
    pthread_mutex_unlock(&mem_mutex);
    if (dev.type == OCR_DEVICE_CPU)
        free(ptr);
    else
        fn(dev.index, ptr);
}

size_t ocr_mem_size_of(const void *ptr) {
    pthread_mutex_lock(&mem_mutex);
    Block *slot = table_find(ptr);
    size_t bytes = slot ? (size_t)slot->bytes : 0;
    pthread_mutex_unlock(&mem_mutex);
    OCR_ASSERT(slot, "ocr_mem_size_of(%p): not a live block from ocr_mem_alloc", ptr);
    return bytes;
}

OcrMemStats ocr_mem_stats(ocr_device_t device) {
    pthread_mutex_lock(&mem_mutex);
    OcrMemStats s = stats[device.type][device.index];
    pthread_mutex_unlock(&mem_mutex);
    return s;
}

void ocr_mem_reset_peak(ocr_device_t device) {
    pthread_mutex_lock(&mem_mutex);
    OcrMemStats *s = &stats[device.type][device.index];
    for (int c = 0; c < OCR_MEM_CATEGORY_COUNT; c++) s->peak[c] = s->current[c];
    s->peak_total = s->current_total;
    pthread_mutex_unlock(&mem_mutex);
}

const char *ocr_format_bytes(int64_t bytes, char *buf, size_t bufsize) {
    double v = (double)bytes;
    const char *unit = "B";
    if (llabs(bytes) >= (1ll << 30)) { v /= (double)(1ll << 30); unit = "GiB"; }
    else if (llabs(bytes) >= (1ll << 20)) { v /= (double)(1ll << 20); unit = "MiB"; }
    else if (llabs(bytes) >= (1ll << 10)) { v /= 1024.0; unit = "KiB"; }
    if (unit[0] == 'B')
        snprintf(buf, bufsize, "%" PRId64 " B", bytes);
    else
        snprintf(buf, bufsize, "%.1f %s", v, unit);
    return buf;
}

void ocr_mem_report(FILE *out, ocr_device_t device) {
    OcrMemStats s = ocr_mem_stats(device);
    char name[32], a[32], b[32];
    fprintf(out, "memory on %s\n", ocr_device_name(device, name, sizeof name));
    fprintf(out, "  %-12s %12s %12s\n", "category", "current", "peak");
    for (int c = 0; c < OCR_MEM_CATEGORY_COUNT; c++)
        fprintf(out, "  %-12s %12s %12s\n", ocr_mem_category_name((ocr_mem_category_t)c),
                ocr_format_bytes(s.current[c], a, sizeof a), ocr_format_bytes(s.peak[c], b, sizeof b));
    fprintf(out, "  %-12s %12s %12s\n", "total", ocr_format_bytes(s.current_total, a, sizeof a),
            ocr_format_bytes(s.peak_total, b, sizeof b));
}

// ---- workspace -------------------------------------------------------------------
#define WS_MAX_BLOCKS 32
typedef struct {
    char *base[WS_MAX_BLOCKS];
    size_t cap[WS_MAX_BLOCKS];
    size_t used[WS_MAX_BLOCKS];
    int nblocks;
    int depth;
    size_t high_water;  // most bytes in use at once since the last merge
    size_t in_use;
} Workspace;

static _Thread_local Workspace ws;

static size_t ws_round(size_t n) { return (n + OCR_MEM_ALIGNMENT - 1) / OCR_MEM_ALIGNMENT * OCR_MEM_ALIGNMENT; }

void *ocr_workspace_push(size_t bytes) {
    size_t need = ws_round(bytes ? bytes : 1) + OCR_MEM_ALIGNMENT;  // room for the size tag
    if (ws.depth == 0 && ws.nblocks > 1) {
        // Fragmented from the last round: merge into one block of the high-water size.
        size_t total = ws.high_water;
        for (int i = 0; i < ws.nblocks; i++) ocr_mem_free(ws.base[i]);
        ws.nblocks = 0;
        char *b = ocr_mem_alloc(ocr_cpu(), OCR_MEM_WORKSPACE, total);
        OCR_ASSERT(b, "workspace: %s", ocr_last_error());
        ws.base[0] = b;
        ws.cap[0] = total;
        ws.used[0] = 0;
        ws.nblocks = 1;
    }
    int top = ws.nblocks - 1;
    if (top < 0 || ws.cap[top] - ws.used[top] < need) {
        OCR_ASSERT(ws.nblocks < WS_MAX_BLOCKS, "workspace: too many blocks");
        size_t cap = need > (1u << 20) ? need : (1u << 20);
        char *b = ocr_mem_alloc(ocr_cpu(), OCR_MEM_WORKSPACE, cap);
        OCR_ASSERT(b, "workspace: %s", ocr_last_error());
        top = ws.nblocks++;
        ws.base[top] = b;
        ws.cap[top] = cap;
        ws.used[top] = 0;
    }
    char *p = ws.base[top] + ws.used[top];
    *(size_t *)p = need;
    ws.used[top] += need;
    ws.depth++;
    ws.in_use += need;
    if (ws.in_use > ws.high_water) ws.high_water = ws.in_use;
    return p + OCR_MEM_ALIGNMENT;
}

void ocr_workspace_pop(void *ptr) {
    if (!ptr) return;
    OCR_ASSERT(ws.depth > 0, "workspace pop without push");
    char *p = (char *)ptr - OCR_MEM_ALIGNMENT;
    size_t need = *(size_t *)p;
    int top = ws.nblocks - 1;
    // Skip empty trailing blocks (left behind by a block that only grew).
    while (top > 0 && ws.used[top] == 0) top--;
    OCR_ASSERT(p + need == ws.base[top] + ws.used[top], "workspace pops must be in reverse push order");
    ws.used[top] -= need;
    ws.depth--;
    ws.in_use -= need;
}

void ocr_workspace_release(void) {
    OCR_ASSERT(ws.depth == 0, "workspace released while in use");
    for (int i = 0; i < ws.nblocks; i++) ocr_mem_free(ws.base[i]);
    memset(&ws, 0, sizeof ws);
}

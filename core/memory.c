#include "core/memory.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

// CPU blocks carry a header just before the aligned pointer; device blocks (whose memory
// the host cannot touch) are remembered in an open-addressing table.
typedef struct {
    uint64_t magic;
    uint64_t bytes;
    void *raw;  // what aligned_alloc returned
    int32_t category;
    int32_t pad_;
} CpuBlockHeader;

#define CPU_BLOCK_MAGIC 0x4f43524d454d3031ull /* "OCRMEM01" */
#define HEADER_SPACE OCR_MEM_ALIGNMENT      /* header fits in one alignment unit */

_Static_assert(sizeof(CpuBlockHeader) <= HEADER_SPACE, "header must fit in the alignment slot");

static pthread_mutex_t mem_mutex = PTHREAD_MUTEX_INITIALIZER;
static OcrMemStats stats[OCR_DEVICE_TYPE_COUNT][OCR_MAX_DEVICES];

static ocr_device_alloc_fn device_alloc[OCR_DEVICE_TYPE_COUNT];
static ocr_device_free_fn device_free[OCR_DEVICE_TYPE_COUNT];

typedef struct {
    void *ptr;
    uint64_t bytes;
    int32_t category;
    int16_t type;
    int16_t index;
} DeviceBlock;
static DeviceBlock *device_blocks;
static size_t device_blocks_cap, device_blocks_used;

const char *ocr_mem_category_name(ocr_mem_category_t cat) {
    static const char *names[OCR_MEM_CATEGORY_COUNT] = {"params",      "grads",     "master", "optimizer",
                                                        "activations", "workspace", "data"};
    return (cat >= 0 && cat < OCR_MEM_CATEGORY_COUNT) ? names[cat] : "?";
}

static void charge(ocr_device_t dev, ocr_mem_category_t cat, int64_t delta) {
    OcrMemStats *s = &stats[dev.type][dev.index];
    s->current[cat] += delta;
    s->current_total += delta;
    s->allocations += delta > 0 ? 1 : -1;
    if (s->current[cat] > s->peak[cat]) s->peak[cat] = s->current[cat];
    if (s->current_total > s->peak_total) s->peak_total = s->current_total;
}

static size_t hash_ptr(const void *p, size_t cap) { return (size_t)(((uintptr_t)p >> 8) * 0x9E3779B97F4A7C15ull) & (cap - 1); }

static int device_table_insert(DeviceBlock blk) {
    if ((device_blocks_used + 1) * 2 > device_blocks_cap) {
        size_t ncap = device_blocks_cap ? device_blocks_cap * 2 : 256;
        DeviceBlock *nb = calloc(ncap, sizeof *nb);
        if (!nb) return 0;
        for (size_t i = 0; i < device_blocks_cap; i++) {
            if (!device_blocks[i].ptr) continue;
            size_t h = hash_ptr(device_blocks[i].ptr, ncap);
            while (nb[h].ptr) h = (h + 1) & (ncap - 1);
            nb[h] = device_blocks[i];
        }
        free(device_blocks);
        device_blocks = nb;
        device_blocks_cap = ncap;
    }
    size_t h = hash_ptr(blk.ptr, device_blocks_cap);
    while (device_blocks[h].ptr) h = (h + 1) & (device_blocks_cap - 1);
    device_blocks[h] = blk;
    device_blocks_used++;
    return 1;
}

static DeviceBlock *device_table_find(const void *ptr) {
    if (!device_blocks_cap) return NULL;
    size_t h = hash_ptr(ptr, device_blocks_cap);
    while (device_blocks[h].ptr) {
        if (device_blocks[h].ptr == ptr) return &device_blocks[h];
        h = (h + 1) & (device_blocks_cap - 1);
    }
    return NULL;
}

static void device_table_remove(DeviceBlock *slot) {
    // Backward-shift deletion keeps linear probing chains intact.
    size_t cap = device_blocks_cap;
    size_t i = (size_t)(slot - device_blocks);
    device_blocks[i].ptr = NULL;
    size_t j = i;
    for (;;) {
        j = (j + 1) & (cap - 1);
        if (!device_blocks[j].ptr) break;
        size_t k = hash_ptr(device_blocks[j].ptr, cap);
        if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
            device_blocks[i] = device_blocks[j];
            device_blocks[j].ptr = NULL;
            i = j;
        }
    }
    device_blocks_used--;
}

void ocr_mem_register_device_allocator(ocr_device_type_t type, ocr_device_alloc_fn alloc_fn,
                                       ocr_device_free_fn free_fn) {
    pthread_mutex_lock(&mem_mutex);
    device_alloc[type] = alloc_fn;
    device_free[type] = free_fn;
    pthread_mutex_unlock(&mem_mutex);
}

void *ocr_mem_alloc(ocr_device_t device, ocr_mem_category_t cat, size_t bytes) {
    OCR_ASSERT(cat >= 0 && cat < OCR_MEM_CATEGORY_COUNT);
    OCR_ASSERT(device.index >= 0 && device.index < OCR_MAX_DEVICES);
    if (device.type == OCR_DEVICE_CPU) {
        size_t payload = (bytes + OCR_MEM_ALIGNMENT - 1) / OCR_MEM_ALIGNMENT * OCR_MEM_ALIGNMENT;
        if (payload < bytes || payload > SIZE_MAX - HEADER_SPACE) {
            ocr_set_error(OCR_ERR_OOM, "allocation of %zu bytes (%s) is too large", bytes, ocr_mem_category_name(cat));
            return NULL;
        }
        void *raw = aligned_alloc(OCR_MEM_ALIGNMENT, payload + HEADER_SPACE);
        if (!raw) {
            char buf[32];
            ocr_set_error(OCR_ERR_OOM, "out of host memory allocating %s for %s", ocr_format_bytes((int64_t)bytes, buf, sizeof buf),
                          ocr_mem_category_name(cat));
            return NULL;
        }
        char *ptr = (char *)raw + HEADER_SPACE;
        CpuBlockHeader *h = (CpuBlockHeader *)(ptr - sizeof(CpuBlockHeader));
        h->magic = CPU_BLOCK_MAGIC;
        h->bytes = bytes;
        h->raw = raw;
        h->category = (int32_t)cat;
        pthread_mutex_lock(&mem_mutex);
        charge(device, cat, (int64_t)bytes);
        pthread_mutex_unlock(&mem_mutex);
        return ptr;
    }
    pthread_mutex_lock(&mem_mutex);
    ocr_device_alloc_fn fn = device_alloc[device.type];
    pthread_mutex_unlock(&mem_mutex);
    if (!fn) {
        ocr_set_error(OCR_ERR_UNSUPPORTED, "no allocator registered for device cuda:%d (no CUDA backend initialised)",
                      device.index);
        return NULL;
    }
    void *ptr = fn(device.index, bytes ? bytes : 1);
    if (!ptr) return NULL;  // the backend set the message
    pthread_mutex_lock(&mem_mutex);
    DeviceBlock blk = {ptr, bytes, (int32_t)cat, (int16_t)device.type, (int16_t)device.index};
    if (!device_table_insert(blk)) {
        pthread_mutex_unlock(&mem_mutex);
        device_free[device.type](device.index, ptr);
        ocr_set_error(OCR_ERR_OOM, "out of host memory tracking a device allocation");
        return NULL;
    }
    charge(device, cat, (int64_t)bytes);
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
    DeviceBlock *blk = device_table_find(ptr);
    if (blk) {
        ocr_device_t dev = {(ocr_device_type_t)blk->type, blk->index};
        ocr_mem_category_t cat = (ocr_mem_category_t)blk->category;
        int64_t bytes = (int64_t)blk->bytes;
        ocr_device_free_fn fn = device_free[dev.type];
        device_table_remove(blk);
        charge(dev, cat, -bytes);
        pthread_mutex_unlock(&mem_mutex);
        fn(dev.index, ptr);
        return;
    }
    CpuBlockHeader *h = (CpuBlockHeader *)((char *)ptr - sizeof(CpuBlockHeader));
    OCR_ASSERT(h->magic == CPU_BLOCK_MAGIC, "ocr_mem_free of a pointer not from ocr_mem_alloc (or freed twice)");
    h->magic = 0;
    charge(ocr_cpu(), (ocr_mem_category_t)h->category, -(int64_t)h->bytes);
    pthread_mutex_unlock(&mem_mutex);
    free(h->raw);
}

size_t ocr_mem_size_of(const void *ptr) {
    pthread_mutex_lock(&mem_mutex);
    DeviceBlock *blk = device_table_find(ptr);
    size_t bytes;
    if (blk) {
        bytes = blk->bytes;
    } else {
        const CpuBlockHeader *h = (const CpuBlockHeader *)((const char *)ptr - sizeof(CpuBlockHeader));
        OCR_ASSERT(h->magic == CPU_BLOCK_MAGIC);
        bytes = h->bytes;
    }
    pthread_mutex_unlock(&mem_mutex);
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

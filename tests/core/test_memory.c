// Tracked allocator: per-category current/peak accounting, alignment, misuse detection,
// device allocator hooks, the per-thread workspace stack and the report.
//
// Statistics are process-wide, so every check works on differences from a baseline taken
// at the start of the test (the suite also passes with CK_FORK=no).
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/memory.h"
#include "tests/common/test_util.h"

// A failing huge allocation must return NULL under AddressSanitizer too.
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

#define CPU ocr_cpu()

// Runs fn in a child process; 1 when the child died of SIGABRT (OCR_ASSERT). Works with
// and without Check's own forking.
static int aborts(void (*fn)(void)) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(3);  // the expected invariant message
        fn();
        _exit(0);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

START_TEST(test_categories_current_and_peak) {
    ocr_mem_reset_peak(CPU);
    OcrMemStats s0 = ocr_mem_stats(CPU);
    void *p = ocr_mem_alloc(CPU, OCR_MEM_PARAMS, 1000);
    void *g = ocr_mem_alloc(CPU, OCR_MEM_GRADS, 3000);
    void *a = ocr_mem_alloc(CPU, OCR_MEM_ACTIVATIONS, 500);
    ck_assert(p && g && a);
    OcrMemStats s = ocr_mem_stats(CPU);
    ck_assert_int_eq(s.current[OCR_MEM_PARAMS] - s0.current[OCR_MEM_PARAMS], 1000);
    ck_assert_int_eq(s.current[OCR_MEM_GRADS] - s0.current[OCR_MEM_GRADS], 3000);
    ck_assert_int_eq(s.current[OCR_MEM_ACTIVATIONS] - s0.current[OCR_MEM_ACTIVATIONS], 500);
    ck_assert_int_eq(s.current[OCR_MEM_MASTER], s0.current[OCR_MEM_MASTER]);
    ck_assert_int_eq(s.current_total - s0.current_total, 4500);
    ck_assert_int_eq(s.allocations - s0.allocations, 3);
    ocr_mem_free(g);
    void *g2 = ocr_mem_alloc(CPU, OCR_MEM_GRADS, 1000);
    s = ocr_mem_stats(CPU);
    ck_assert_int_eq(s.current[OCR_MEM_GRADS] - s0.current[OCR_MEM_GRADS], 1000);
    ck_assert_int_eq(s.peak[OCR_MEM_GRADS] - s0.current[OCR_MEM_GRADS], 3000);  // the high-water mark stays
    ck_assert_int_eq(s.peak[OCR_MEM_PARAMS] - s0.current[OCR_MEM_PARAMS], 1000);
    ck_assert_int_eq(s.peak_total - s0.current_total, 4500);
    ck_assert_int_eq(s.current_total - s0.current_total, 2500);
    ck_assert_int_eq(s.allocations - s0.allocations, 3);
    ocr_mem_free(p);
    ocr_mem_free(g2);
    ocr_mem_free(a);
    ocr_mem_free(NULL);  // allowed, changes nothing
    s = ocr_mem_stats(CPU);
    for (int c = 0; c < OCR_MEM_CATEGORY_COUNT; c++) ck_assert_int_eq(s.current[c], s0.current[c]);
    ck_assert_int_eq(s.current_total, s0.current_total);
    ck_assert_int_eq(s.allocations, s0.allocations);
}
END_TEST

START_TEST(test_peak_total_is_high_water_of_sum) {
    ocr_mem_reset_peak(CPU);
    OcrMemStats s0 = ocr_mem_stats(CPU);
    // Two categories never live at the same time: the sum of their peaks is 2x the real peak.
    void *a = ocr_mem_alloc(CPU, OCR_MEM_OPTIMIZER, 4096);
    ocr_mem_free(a);
    void *b = ocr_mem_alloc(CPU, OCR_MEM_DATA, 4096);
    ocr_mem_free(b);
    OcrMemStats s = ocr_mem_stats(CPU);
    int64_t sum_of_peaks =
        (s.peak[OCR_MEM_OPTIMIZER] - s0.peak[OCR_MEM_OPTIMIZER]) + (s.peak[OCR_MEM_DATA] - s0.peak[OCR_MEM_DATA]);
    ck_assert_int_eq(sum_of_peaks, 8192);
    ck_assert_int_eq(s.peak_total - s0.peak_total, 4096);
    // Overlapping lifetimes do add up.
    a = ocr_mem_alloc(CPU, OCR_MEM_OPTIMIZER, 4096);
    b = ocr_mem_alloc(CPU, OCR_MEM_DATA, 8192);
    s = ocr_mem_stats(CPU);
    ck_assert_int_eq(s.peak_total - s0.peak_total, 12288);
    ocr_mem_free(a);
    ocr_mem_free(b);
}
END_TEST

START_TEST(test_reset_peak) {
    OcrMemStats s0 = ocr_mem_stats(CPU);
    void *big = ocr_mem_alloc(CPU, OCR_MEM_MASTER, 1 << 20);
    void *keep = ocr_mem_alloc(CPU, OCR_MEM_MASTER, 100);
    ocr_mem_free(big);
    OcrMemStats s = ocr_mem_stats(CPU);
    ck_assert_int_ge(s.peak[OCR_MEM_MASTER], s0.current[OCR_MEM_MASTER] + (1 << 20) + 100);
    ocr_mem_reset_peak(CPU);
    s = ocr_mem_stats(CPU);
    for (int c = 0; c < OCR_MEM_CATEGORY_COUNT; c++) ck_assert_int_eq(s.peak[c], s.current[c]);
    ck_assert_int_eq(s.peak_total, s.current_total);
    ck_assert_int_eq(s.peak[OCR_MEM_MASTER] - s0.current[OCR_MEM_MASTER], 100);
    ocr_mem_free(keep);
    s = ocr_mem_stats(CPU);
    ck_assert_int_eq(s.peak[OCR_MEM_MASTER] - s.current[OCR_MEM_MASTER], 100);  // the peak since the reset
}
END_TEST

START_TEST(test_alignment_size_of_and_zero_bytes) {
    enum { N = 300 };
    void *p[N];
    OcrMemStats s0 = ocr_mem_stats(CPU);
    int64_t total = 0;
    for (int i = 0; i < N; i++) {
        size_t bytes = i < 200 ? (size_t)i : (size_t)(i * 997 % 100003);
        p[i] = ocr_mem_alloc(CPU, (ocr_mem_category_t)(i % OCR_MEM_CATEGORY_COUNT), bytes);
        ck_assert_ptr_nonnull(p[i]);
        ck_assert_uint_eq((uintptr_t)p[i] % OCR_MEM_ALIGNMENT, 0);
        ck_assert_uint_eq(ocr_mem_size_of(p[i]), bytes);
        memset(p[i], i & 0xff, bytes);  // the whole block is writable (ASan checks the bounds)
        total += (int64_t)bytes;
    }
    for (int i = 0; i < N; i++)
        for (int j = 0; j < i; j++) ck_assert_ptr_ne(p[i], p[j]);  // zero-byte blocks are unique too
    OcrMemStats s = ocr_mem_stats(CPU);
    ck_assert_int_eq(s.current_total - s0.current_total, total);
    ck_assert_int_eq(s.allocations - s0.allocations, N);
    for (int i = N - 1; i >= 0; i -= 2) ocr_mem_free(p[i]);
    for (int i = 0; i < N; i += 2) ocr_mem_free(p[i]);
    s = ocr_mem_stats(CPU);
    ck_assert_int_eq(s.current_total, s0.current_total);
    ck_assert_int_eq(s.allocations, s0.allocations);  // zero-byte blocks count +1 then -1
}
END_TEST

START_TEST(test_calloc_and_failure) {
    unsigned char *z = ocr_mem_calloc(CPU, OCR_MEM_DATA, 777);
    ck_assert_ptr_nonnull(z);
    for (int i = 0; i < 777; i++) ck_assert_int_eq(z[i], 0);
    ocr_mem_free(z);
    OcrMemStats s0 = ocr_mem_stats(CPU);
    ocr_clear_error();
    ck_assert_ptr_null(ocr_mem_alloc(CPU, OCR_MEM_ACTIVATIONS, SIZE_MAX - 3));  // rounding overflows
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "activations"));
    ocr_clear_error();
    ck_assert_ptr_null(ocr_mem_alloc(CPU, OCR_MEM_PARAMS, (size_t)1 << 62));  // the system refuses
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "params"));
    OcrMemStats s = ocr_mem_stats(CPU);
    ck_assert_int_eq(s.current_total, s0.current_total);
    ck_assert_int_eq(s.allocations, s0.allocations);
}
END_TEST

static void double_free(void) {
    void *p = ocr_mem_alloc(ocr_cpu(), OCR_MEM_PARAMS, 64);
    ocr_mem_free(p);
    ocr_mem_free(p);
}
static void foreign_free(void) {
    char *p = ocr_mem_alloc(ocr_cpu(), OCR_MEM_PARAMS, 256);
    ocr_mem_free(p + 64);  // inside a block, not its start
}
static void malloc_free(void) {
    void *p = malloc(128);
    ocr_mem_free(p);
}
static void size_of_freed(void) {
    void *p = ocr_mem_alloc(ocr_cpu(), OCR_MEM_PARAMS, 64);
    ocr_mem_free(p);
    (void)ocr_mem_size_of(p);
}
static void single_free(void) {  // the control: correct use must not abort
    void *p = ocr_mem_alloc(ocr_cpu(), OCR_MEM_PARAMS, 64);
    ocr_mem_free(p);
}

START_TEST(test_misuse_aborts) {
    ck_assert_msg(!aborts(single_free), "a correct alloc/free aborted");
    ck_assert_msg(aborts(double_free), "double free did not abort");
    ck_assert_msg(aborts(foreign_free), "freeing an interior pointer did not abort");
    ck_assert_msg(aborts(malloc_free), "freeing a malloc pointer did not abort");
    ck_assert_msg(aborts(size_of_freed), "ocr_mem_size_of of a freed pointer did not abort");
}
END_TEST

// ---- device allocator hooks (a fake device backed by malloc) --------------------------
static int fake_allocs, fake_frees, fake_last_index;
static void *fake_alloc(int index, size_t bytes) {
    fake_allocs++;
    fake_last_index = index;
    return malloc(bytes);
}
static void fake_free(int index, void *p) {
    fake_frees++;
    fake_last_index = index;
    free(p);
}

START_TEST(test_device_allocator) {
    ocr_device_t d0 = ocr_cuda_device(0), d3 = ocr_cuda_device(3);
    ocr_mem_register_device_allocator(OCR_DEVICE_CUDA, NULL, NULL);
    ocr_clear_error();
    ck_assert_ptr_null(ocr_mem_alloc(d0, OCR_MEM_PARAMS, 16));
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "no allocator"));

    ocr_mem_register_device_allocator(OCR_DEVICE_CUDA, fake_alloc, fake_free);
    OcrMemStats c0 = ocr_mem_stats(CPU), a0 = ocr_mem_stats(d0), b0 = ocr_mem_stats(d3);
    enum { N = 2000 };
    void **p = malloc(N * sizeof *p);
    int64_t on0 = 0, on3 = 0;
    for (int i = 0; i < N; i++) {
        ocr_device_t d = i % 3 ? d0 : d3;
        p[i] = ocr_mem_alloc(d, OCR_MEM_ACTIVATIONS, (size_t)(i * 13 % 500));
        ck_assert_ptr_nonnull(p[i]);
        ck_assert_int_eq(fake_last_index, d.index);
        *(i % 3 ? &on0 : &on3) += i * 13 % 500;
    }
    ck_assert_int_eq(fake_allocs, N);
    OcrMemStats a = ocr_mem_stats(d0), b = ocr_mem_stats(d3), c = ocr_mem_stats(CPU);
    ck_assert_int_eq(a.current[OCR_MEM_ACTIVATIONS] - a0.current[OCR_MEM_ACTIVATIONS], on0);
    ck_assert_int_eq(b.current[OCR_MEM_ACTIVATIONS] - b0.current[OCR_MEM_ACTIVATIONS], on3);
    ck_assert_int_eq(c.current_total, c0.current_total);  // nothing charged to the host
    for (int i = 0; i < N; i++) ck_assert_uint_eq(ocr_mem_size_of(p[i]), (size_t)(i * 13 % 500));
    // Free in a scrambled order (exercises deletion from the pointer table); the blocks
    // still live must stay findable after every deletion.
    char *freed = calloc(N, 1);
    for (int k = 0; k < N; k++) {
        int i = (int)(((long)k * 1237) % N);  // 1237 is coprime with N: a permutation
        ocr_mem_free(p[i]);
        freed[i] = 1;
        if (k % 97 == 0)
            for (int j = 0; j < N; j++)
                if (!freed[j] && ocr_mem_size_of(p[j]) != (size_t)(j * 13 % 500)) ck_abort_msg("lost block %d", j);
    }
    free(freed);
    ck_assert_int_eq(fake_frees, N);
    a = ocr_mem_stats(d0);
    b = ocr_mem_stats(d3);
    ck_assert_int_eq(a.current_total, a0.current_total);
    ck_assert_int_eq(b.current_total, b0.current_total);
    ck_assert_int_eq(a.allocations, a0.allocations);
    ck_assert_int_eq(b.peak[OCR_MEM_ACTIVATIONS] - b0.current[OCR_MEM_ACTIVATIONS], on3);
    free(p);
    ocr_mem_register_device_allocator(OCR_DEVICE_CUDA, NULL, NULL);
}
END_TEST

// ---- threads -------------------------------------------------------------------------
static void *alloc_worker(void *arg) {
    int id = (int)(intptr_t)arg;
    void *live[64] = {0};
    for (int i = 0; i < 20000; i++) {
        int k = (i * 31 + id) & 63;
        if (live[k]) ocr_mem_free(live[k]);
        live[k] = ocr_mem_alloc(ocr_cpu(), (ocr_mem_category_t)(k % OCR_MEM_CATEGORY_COUNT), (size_t)(k * 8 + id));
        if (!live[k]) return (void *)1;
    }
    for (int k = 0; k < 64; k++) ocr_mem_free(live[k]);
    return NULL;
}

START_TEST(test_threads) {
    OcrMemStats s0 = ocr_mem_stats(CPU);
    pthread_t t[4];
    for (int i = 0; i < 4; i++) ck_assert_int_eq(pthread_create(&t[i], NULL, alloc_worker, (void *)(intptr_t)i), 0);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        ck_assert_ptr_null(r);
    }
    OcrMemStats s = ocr_mem_stats(CPU);
    for (int c = 0; c < OCR_MEM_CATEGORY_COUNT; c++) ck_assert_int_eq(s.current[c], s0.current[c]);
    ck_assert_int_eq(s.allocations, s0.allocations);
}
END_TEST

// ---- workspace ------------------------------------------------------------------------
static int64_t ws_bytes(void) { return ocr_mem_stats(CPU).current[OCR_MEM_WORKSPACE]; }

START_TEST(test_workspace_stack) {
    ocr_workspace_release();
    enum { D = 12 };
    unsigned char *p[D];
    size_t sz[D];
    for (int i = 0; i < D; i++) {
        sz[i] = (size_t)(i * 1000 + i);
        p[i] = ocr_workspace_push(sz[i]);
        ck_assert_ptr_nonnull(p[i]);
        ck_assert_uint_eq((uintptr_t)p[i] % OCR_MEM_ALIGNMENT, 0);
        memset(p[i], 0x10 + i, sz[i]);
    }
    // Nothing overlaps: every block still holds its own pattern.
    for (int i = 0; i < D; i++)
        for (size_t k = 0; k < sz[i]; k++)
            if (p[i][k] != 0x10 + i) ck_abort_msg("block %d byte %zu overwritten", i, k);
    ck_assert_int_gt(ws_bytes(), 0);
    for (int i = D - 1; i >= 0; i--) ocr_workspace_pop(p[i]);
    ocr_workspace_pop(NULL);  // allowed
    // Same sizes again: same addresses (blocks are kept between rounds).
    unsigned char *q = ocr_workspace_push(sz[0]);
    ck_assert_ptr_eq(q, p[0]);
    ocr_workspace_pop(q);
    ocr_workspace_release();
    ck_assert_int_eq(ws_bytes(), 0);
}
END_TEST

START_TEST(test_workspace_growth_and_merge) {
    ocr_workspace_release();
    ck_assert_int_eq(ws_bytes(), 0);
    OcrMemStats s0 = ocr_mem_stats(CPU);
    const size_t small = 100, big = 3u << 20;
    // Round 1: the first block is too small for the second push, so a second block is added.
    void *a = ocr_workspace_push(small);
    int64_t one_block = ws_bytes();
    void *b = ocr_workspace_push(big);
    int64_t grown = ws_bytes();
    ck_assert_int_ge(grown, one_block + (int64_t)big);
    ck_assert_int_eq(ocr_mem_stats(CPU).allocations - s0.allocations, 2);
    memset(a, 1, small);
    memset(b, 2, big);
    ocr_workspace_pop(b);
    ocr_workspace_pop(a);
    // Round 2 starts empty and fragmented: the blocks merge into one of the high-water size,
    // smaller than the two blocks together but big enough for both pushes at once.
    void *a2 = ocr_workspace_push(small);
    int64_t merged = ws_bytes();
    ck_assert_int_eq(ocr_mem_stats(CPU).allocations - s0.allocations, 1);
    ck_assert_int_lt(merged, grown);
    ck_assert_int_ge(merged, (int64_t)(small + big));
    void *b2 = ocr_workspace_push(big);
    ck_assert_int_eq(ws_bytes(), merged);  // no new block
    ck_assert_int_eq(ocr_mem_stats(CPU).allocations - s0.allocations, 1);
    ck_assert_ptr_eq(b2, (char *)a2 + (((small + 63) / 64) * 64 + 64));  // contiguous in the one block
    memset(b2, 3, big);
    ocr_workspace_pop(b2);
    ocr_workspace_pop(a2);
    // Round 3, same pattern: still one block, no allocation.
    a2 = ocr_workspace_push(small);
    b2 = ocr_workspace_push(big);
    ck_assert_int_eq(ws_bytes(), merged);
    ocr_workspace_pop(b2);
    ocr_workspace_pop(a2);
    ocr_workspace_release();
    ck_assert_int_eq(ws_bytes(), 0);
    ck_assert_int_eq(ocr_mem_stats(CPU).allocations, s0.allocations);
}
END_TEST

static void *ws_worker(void *arg) {
    (void)arg;
    // Another thread has its own, empty stack: popping what it pushes works regardless of
    // the main thread's state.
    void *x = ocr_workspace_push(5000);
    memset(x, 7, 5000);
    ocr_workspace_pop(x);
    ocr_workspace_release();
    return x;
}

START_TEST(test_workspace_per_thread) {
    void *mine = ocr_workspace_push(1000);
    pthread_t t;
    void *theirs;
    ck_assert_int_eq(pthread_create(&t, NULL, ws_worker, NULL), 0);
    pthread_join(t, &theirs);
    ck_assert_ptr_ne(theirs, mine);
    memset(mine, 1, 1000);
    ocr_workspace_pop(mine);
    ocr_workspace_release();
}
END_TEST

static void ws_out_of_order(void) {
    void *a = ocr_workspace_push(10);
    void *b = ocr_workspace_push(10);
    (void)b;
    ocr_workspace_pop(a);
}
static void ws_pop_empty(void) {
    void *a = ocr_workspace_push(10);
    ocr_workspace_pop(a);
    ocr_workspace_pop(a);
}
static void ws_release_in_use(void) {
    (void)ocr_workspace_push(10);
    ocr_workspace_release();
}
static void ws_in_order(void) {
    void *a = ocr_workspace_push(10);
    void *b = ocr_workspace_push(10);
    ocr_workspace_pop(b);
    ocr_workspace_pop(a);
    ocr_workspace_release();
}

START_TEST(test_workspace_misuse_aborts) {
    ck_assert_msg(!aborts(ws_in_order), "correct push/pop aborted");
    ck_assert_msg(aborts(ws_out_of_order), "out-of-order pop did not abort");
    ck_assert_msg(aborts(ws_pop_empty), "pop of an empty stack did not abort");
    ck_assert_msg(aborts(ws_release_in_use), "release while in use did not abort");
}
END_TEST

// ---- report ------------------------------------------------------------------------------
START_TEST(test_report_and_format) {
    char buf[32];
    ck_assert_str_eq(ocr_format_bytes(0, buf, sizeof buf), "0 B");
    ck_assert_str_eq(ocr_format_bytes(1023, buf, sizeof buf), "1023 B");
    ck_assert_str_eq(ocr_format_bytes(1536, buf, sizeof buf), "1.5 KiB");
    ck_assert_str_eq(ocr_format_bytes(12897484, buf, sizeof buf), "12.3 MiB");
    ck_assert_str_eq(ocr_format_bytes(3ll << 30, buf, sizeof buf), "3.0 GiB");
    ck_assert_str_eq(ocr_format_bytes(-2048, buf, sizeof buf), "-2.0 KiB");

    void *p = ocr_mem_alloc(CPU, OCR_MEM_OPTIMIZER, 3 << 20);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    ocr_mem_report(f, CPU);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(text, "cpu"));
    for (int c = 0; c < OCR_MEM_CATEGORY_COUNT; c++) {
        const char *name = ocr_mem_category_name((ocr_mem_category_t)c);
        ck_assert_msg(strcmp(name, "?") != 0, "category %d has no name", c);
        ck_assert_msg(strstr(text, name) != NULL, "report lacks \"%s\":\n%s", name, text);
    }
    ck_assert_ptr_nonnull(strstr(text, "total"));
    // The optimizer line shows the 3 MiB just allocated (at least; others may hold more).
    const char *line = strstr(text, "optimizer");
    ck_assert_ptr_nonnull(strstr(line, "MiB"));
    free(text);
    ocr_mem_free(p);
    ck_assert_str_eq(ocr_mem_category_name(OCR_MEM_PARAMS), "params");
    ck_assert_str_eq(ocr_mem_category_name(OCR_MEM_WORKSPACE), "workspace");
    ck_assert_str_eq(ocr_mem_category_name(OCR_MEM_CATEGORY_COUNT), "?");
}
END_TEST

static Suite *memory_suite(void) {
    Suite *s = suite_create("memory");
    TCase *tc = tcase_create("memory");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_categories_current_and_peak);
    tcase_add_test(tc, test_peak_total_is_high_water_of_sum);
    tcase_add_test(tc, test_reset_peak);
    tcase_add_test(tc, test_alignment_size_of_and_zero_bytes);
    tcase_add_test(tc, test_calloc_and_failure);
    tcase_add_test(tc, test_misuse_aborts);
    tcase_add_test(tc, test_device_allocator);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_workspace_stack);
    tcase_add_test(tc, test_workspace_growth_and_merge);
    tcase_add_test(tc, test_workspace_per_thread);
    tcase_add_test(tc, test_workspace_misuse_aborts);
    tcase_add_test(tc, test_report_and_format);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(memory_suite()); }

// The harness of the tiled-kernel tests (test_cpu_tiles.c, test_lp_tiles.c): an op's outputs,
// their starting contents (restored before every run: some accumulate) and a bit-for-bit
// comparison of the tiled path against Global.cpu_exact_numerics' whole-tensor reference.
#ifndef OCR_TESTS_KERNELS_TILES_CHECK_H
#define OCR_TESTS_KERNELS_TILES_CHECK_H

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/isa.h"
#include "kernels/ops.h"
#include "tests/common/test_util.h"

#define TILES_MAX_OUT 8

// The outputs of one op call: their starting contents (restored before every run: some
// accumulate) and what the reference run left in them.
typedef struct {
    OcrTensor *t[TILES_MAX_OUT];
    const char *name[TILES_MAX_OUT];
    void *init[TILES_MAX_OUT], *ref[TILES_MAX_OUT];
    int n;
} Outs;

static inline void outs_add(Outs *o, OcrTensor *t, const char *name) {
    ck_assert(o->n < TILES_MAX_OUT);
    const size_t bytes = ocr_tensor_bytes(t);
    o->t[o->n] = t;
    o->name[o->n] = name;
    o->init[o->n] = malloc(bytes + 1);
    memcpy(o->init[o->n], t->data, bytes);
    o->ref[o->n] = malloc(bytes + 1);
    o->n++;
}

static inline void outs_reset(Outs *o) {
    for (int i = 0; i < o->n; i++) memcpy(o->t[i]->data, o->init[i], ocr_tensor_bytes(o->t[i]));
}

static inline void outs_keep(Outs *o, void **dst) {
    for (int i = 0; i < o->n; i++) memcpy(dst[i], o->t[i]->data, ocr_tensor_bytes(o->t[i]));
}

// Asserts that the current contents equal saved (bytes); what names the case.
static inline void outs_expect(const Outs *o, void *const *saved, const char *what) {
    for (int i = 0; i < o->n; i++) {
        const OcrTensor *t = o->t[i];
        const size_t es = ocr_dtype_size(t->dtype);
        const int64_t n = ocr_tensor_numel(t);
        for (int64_t j = 0; j < n; j++) {
            if (memcmp((const char *)t->data + (size_t)j * es, (const char *)saved[i] + (size_t)j * es, es) == 0)
                continue;
            float a, b;
            OcrTensor va = ocr_tensor_view_cpu((char *)t->data + (size_t)j * es, t->dtype, 1, OCR_SHAPE(1));
            OcrTensor vb = ocr_tensor_view_cpu((char *)saved[i] + (size_t)j * es, t->dtype, 1, OCR_SHAPE(1));
            ocr_tensor_to_f32(&va, &a);
            ocr_tensor_to_f32(&vb, &b);
            ck_abort_msg("%s: %s (%s)[%lld] = %.9g, expected %.9g bit for bit", what, o->name[i],
                         ocr_dtype_name(t->dtype), (long long)j, a, b);
        }
    }
}

static inline void outs_free(Outs *o) {
    for (int i = 0; i < o->n; i++) free(o->init[i]), free(o->ref[i]);
    o->n = 0;
}

typedef void (*run_fn)(void *ctx);

// Runs the op under the reference, then on the tiled path, and compares every output.
static inline void native_vs_reference(Outs *o, run_fn run, void *ctx, const char *what) {
    outs_reset(o);
    ocr_cpu_set_exact_numerics(1);
    run(ctx);
    ocr_cpu_set_exact_numerics(0);
    outs_keep(o, o->ref);
    outs_reset(o);
    run(ctx);
    outs_expect(o, o->ref, what);
}

#endif

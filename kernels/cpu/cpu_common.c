// Helpers shared by the CPU kernels (kernels/cpu/cpu_common.h): fp32 views and scratch of tensors
// of any float dtype, row tiles, and the run-time choice of vector level. CPU only, not an op
// family: the CUDA files share kernels/cuda/cuda_internal.h and device.cu instead.
#include "kernels/cpu/cpu_common.h"

#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "kernels/cpu/isa.h"

// Conversions are per element, so splitting them across threads cannot change results;
// small tensors stay on one thread.
#define CONVERT_CHUNK ((size_t)1 << 16)

static void to_f32_parallel(const OcrTensor *t, float *dst) {
    const size_t n = (size_t)ocr_tensor_numel(t);
    if (t->dtype == OCR_F32 || n < 4 * CONVERT_CHUNK) {
        ocr_tensor_to_f32(t, dst);
        return;
    }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i += CONVERT_CHUNK) {
        size_t m = n - i < CONVERT_CHUNK ? n - i : CONVERT_CHUNK;
        if (t->dtype == OCR_F16)
            ocr_f16_to_f32_array(dst + i, (const ocr_f16_t *)t->data + i, m);
        else
            ocr_bf16_to_f32_array(dst + i, (const ocr_bf16_t *)t->data + i, m);
    }
}

static void from_f32_parallel(OcrTensor *t, const float *src) {
    const size_t n = (size_t)ocr_tensor_numel(t);
    if (t->dtype == OCR_F32 || n < 4 * CONVERT_CHUNK) {
        ocr_tensor_from_f32(t, src);
        return;
    }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i += CONVERT_CHUNK) {
        size_t m = n - i < CONVERT_CHUNK ? n - i : CONVERT_CHUNK;
        if (t->dtype == OCR_F16)
            ocr_f32_to_f16_array((ocr_f16_t *)t->data + i, src + i, m);
        else
            ocr_f32_to_bf16_array((ocr_bf16_t *)t->data + i, src + i, m);
    }
}

void *ocr_cpu_scratch_bytes(CpuScratch *s, size_t bytes) {
    OCR_ASSERT(s->count < CPU_SCRATCH_MAX, "too many scratch buffers in one op");
    void *p = ocr_workspace_push(bytes);
    s->ptrs[s->count++] = p;
    return p;
}

float *ocr_cpu_scratch_floats(CpuScratch *s, size_t n) { return ocr_cpu_scratch_bytes(s, n * sizeof(float)); }

const float *ocr_cpu_f32_in(CpuScratch *s, const OcrTensor *t) {
    CPU_ASSERT_FLOAT(t);
    if (t->dtype == OCR_F32) return (const float *)t->data;
    float *buf = ocr_cpu_scratch_floats(s, (size_t)ocr_tensor_numel(t));
    to_f32_parallel(t, buf);
    return buf;
}

float *ocr_cpu_f32_out(CpuScratch *s, OcrTensor *t, int load_existing) {
    CPU_ASSERT_FLOAT(t);
    if (t->dtype == OCR_F32) return (float *)t->data;
    float *buf = ocr_cpu_scratch_floats(s, (size_t)ocr_tensor_numel(t));
    if (load_existing) to_f32_parallel(t, buf);
    return buf;
}

void ocr_cpu_f32_store(OcrTensor *t, const float *buf) {
    if (buf == t->data) return;
    from_f32_parallel(t, buf);
}

void ocr_cpu_scratch_free(CpuScratch *s) {
    while (s->count > 0) ocr_workspace_pop(s->ptrs[--s->count]);
}

// ---- vector level ----------------------------------------------------------------------------

static pthread_once_t vec_once = PTHREAD_ONCE_INIT;
static atomic_int vec_best, vec_active;
static const char *const vec_names[] = {"sse2", "avx2", "avx512"};

static int vec_index(const char *name) {
    for (int i = 0; i < 3; i++)
        if (strcmp(name, vec_names[i]) == 0) return i;
    return -1;
}

static void vec_detect(void) {
    const OcrCpuFeatures *f = ocr_cpu_features();
    // The AVX2 and AVX-512 clones are compiled with FMA3, which GELU's fused multiply-adds use
    // (cpu_common.h), so both levels need it: a CPU with AVX2 but without FMA3 runs the SSE2 clones.
    int best = CPU_VEC_SSE2;
    if (f->fma && f->avx512f && f->avx512bw && f->avx512vl)
        best = CPU_VEC_AVX512;
    else if (f->fma && f->avx2)
        best = CPU_VEC_AVX2;
    atomic_store(&vec_best, best);
    int level = best;
    const char *env = getenv("OCR_CPU_VEC");
    if (env && *env) {
        int want = vec_index(env);
        if (want < 0)
            ocr_log(OCR_LOG_WARN, "OCR_CPU_VEC=%s is not one of sse2, avx2, avx512; using %s", env, vec_names[best]);
        else if (want > best)
            ocr_log(OCR_LOG_WARN, "OCR_CPU_VEC=%s: this CPU has at most %s; using %s", env, vec_names[best], vec_names[best]);
        else
            level = want;
    }
    atomic_store(&vec_active, level);
}

CpuVecLevel ocr_cpu_vec_level(void) {
    pthread_once(&vec_once, vec_detect);
    return (CpuVecLevel)atomic_load_explicit(&vec_active, memory_order_relaxed);
}

const char *ocr_cpu_vec_level_name(CpuVecLevel level) {
    return (unsigned)level < 3 ? vec_names[level] : "?";
}

int ocr_cpu_vec_select(const char *name) {
    pthread_once(&vec_once, vec_detect);
    int best = atomic_load(&vec_best);
    int want = name ? vec_index(name) : best;
    if (want < 0 || want > best) return 0;
    atomic_store(&vec_active, want);
    return 1;
}

// ---- rows in fp32 ----------------------------------------------------------------------------

const float *ocr_cpu_rows_in(const OcrTensor *t, int64_t C, int64_t r0, int64_t rows, float *buf) {
    const size_t off = (size_t)(r0 * C), n = (size_t)(rows * C);
    switch (t->dtype) {
        case OCR_F32: return (const float *)t->data + off;
        case OCR_BF16: ocr_bf16_to_f32_array(buf, (const ocr_bf16_t *)t->data + off, n); return buf;
        case OCR_F16: ocr_f16_to_f32_array(buf, (const ocr_f16_t *)t->data + off, n); return buf;
        default: OCR_ASSERT(0, "ocr_cpu_rows_in: %s is not a float dtype", ocr_dtype_name(t->dtype));
    }
    return NULL;
}

void ocr_cpu_rows_out(OcrTensor *t, int64_t C, int64_t r0, int64_t rows, const float *src) {
    const size_t off = (size_t)(r0 * C), n = (size_t)(rows * C);
    switch (t->dtype) {
        case OCR_F32:
            if ((const float *)t->data + off != src) memcpy((float *)t->data + off, src, n * sizeof(float));
            break;
        case OCR_BF16: ocr_f32_to_bf16_array((ocr_bf16_t *)t->data + off, src, n); break;
        case OCR_F16: ocr_f32_to_f16_array((ocr_f16_t *)t->data + off, src, n); break;
        default: OCR_ASSERT(0, "ocr_cpu_rows_out: %s is not a float dtype", ocr_dtype_name(t->dtype));
    }
}

float *ocr_cpu_rows_dst(OcrTensor *t, int64_t C, int64_t r0, float *buf) {
    return t->dtype == OCR_F32 ? (float *)t->data + (size_t)(r0 * C) : buf;
}

OcrTensor ocr_cpu_f32_view(const OcrTensor *t, const float *data) {
    OcrTensor v = *t;
    v.dtype = OCR_F32;
    v.data = (void *)data;
    v.owns_data = 0;
    return v;
}

// ---- one tiled loop for both paths -----------------------------------------------------------

const OcrTensor *ocr_cpu_tiled_in(CpuScratch *s, const OcrTensor *t, OcrTensor *view) {
    if (t->dtype == OCR_F32 || !ocr_cpu_exact_numerics()) return t;
    *view = ocr_cpu_f32_view(t, ocr_cpu_f32_in(s, t));
    return view;
}

OcrTensor *ocr_cpu_tiled_out(CpuScratch *s, OcrTensor *t, OcrTensor *view, int load, float **whole) {
    *whole = NULL;
    if (t->dtype == OCR_F32 || !ocr_cpu_exact_numerics()) return t;
    *whole = ocr_cpu_f32_out(s, t, load);
    *view = ocr_cpu_f32_view(t, *whole);
    return view;
}

// ---- column sums ------------------------------------------------------------------------------
// Row by row into db, each row's add reloads and stores the thread's whole column range (for a
// vocabulary head, 9,000 columns per thread: 1280 passes of 36 KB through L1 for 35 MB of input,
// ~13 GB/s). Instead the columns go in blocks of COLSUM_BLOCK whose running sums stay in
// registers over all rows; each column still adds its rows in order from its own db value, the
// same operations as the row loop. Columns left over after the last whole block (and f16, whose
// widening is branchy scalar code) take the row loop itself.
#define COLSUM_BLOCK 64
#define COLSUM_BODY(name, T, WIDEN)                                                                        \
    CPU_INLINE void name##_body(float *restrict db, const T *restrict d, int64_t R, int64_t ld, int64_t j0, \
                                int64_t j1) {                                                              \
        int64_t jb = j0;                                                                                   \
        for (; jb + COLSUM_BLOCK <= j1; jb += COLSUM_BLOCK) {                                              \
            float acc[COLSUM_BLOCK];                                                                       \
            for (int k = 0; k < COLSUM_BLOCK; k++) acc[k] = db[jb + k];                                    \
            for (int64_t r = 0; r < R; r++) {                                                              \
                const T *row = d + r * ld + jb;                                                            \
                for (int k = 0; k < COLSUM_BLOCK; k++) acc[k] += WIDEN(row[k]);                            \
            }                                                                                              \
            for (int k = 0; k < COLSUM_BLOCK; k++) db[jb + k] = acc[k];                                    \
        }                                                                                                  \
        for (int64_t r = 0; r < R && jb < j1; r++) {                                                       \
            const T *row = d + r * ld;                                                                     \
            for (int64_t j = jb; j < j1; j++) db[j] += WIDEN(row[j]);                                      \
        }                                                                                                  \
    }
#define COLSUM_F32(v) (v)
COLSUM_BODY(colsum_f32, float, COLSUM_F32)
COLSUM_BODY(colsum_bf16, uint16_t, ocr_bf16_to_f32)
CPU_VEC_CLONES(colsum_f32, (float *db, const float *d, int64_t R, int64_t ld, int64_t j0, int64_t j1),
               (db, d, R, ld, j0, j1))
CPU_VEC_CLONES(colsum_bf16, (float *db, const uint16_t *d, int64_t R, int64_t ld, int64_t j0, int64_t j1),
               (db, d, R, ld, j0, j1))

void ocr_cpu_column_sums_add(float *db, const void *d, ocr_dtype_t dt, int64_t R, int64_t C, int64_t ld) {
    OCR_ASSERT(dt == OCR_F32 || dt == OCR_BF16 || dt == OCR_F16, "column sums: %s is not a float dtype",
               ocr_dtype_name(dt));
    if (R <= 0 || C <= 0) return;
#pragma omp parallel
    {
        const int nt = omp_get_num_threads(), t = omp_get_thread_num();
        const int64_t per = (C + nt - 1) / nt;
        const int64_t j0 = t * per, j1 = j0 + per < C ? j0 + per : C;
        if (j0 < j1) {
            if (dt == OCR_F32) {
                colsum_f32(db, (const float *)d, R, ld, j0, j1);
            } else if (dt == OCR_BF16) {
                colsum_bf16(db, (const uint16_t *)d, R, ld, j0, j1);
            } else {
                for (int64_t r = 0; r < R; r++) {
                    const ocr_f16_t *row = (const ocr_f16_t *)d + r * ld;
                    for (int64_t j = j0; j < j1; j++) db[j] += ocr_f16_to_f32(row[j]);
                }
            }
        }
    }
}

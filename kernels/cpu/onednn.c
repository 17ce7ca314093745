// oneDNN matmul with a per-shape primitive cache (kernels/cpu/onednn.h), used by gemm.c and
// conv2d.c. CPU only, not an op family: on the GPU the same GEMMs go to cuBLAS (gemm.cu,
// cublas_loader.cu) and the convolutions to cuDNN (conv2d.cu).
#include "kernels/cpu/onednn.h"

#include <omp.h>

#include "core/error.h"
#include "core/half.h"

#ifndef OCR_HAVE_ONEDNN

int ocr_onednn_available(void) { return 0; }
int ocr_onednn_native(ocr_dtype_t dt) { (void)dt; return 0; }
const char *ocr_onednn_isa_name(ocr_dtype_t dt) { (void)dt; return "none"; }
const char *ocr_onednn_version(void) { return "absent"; }
int64_t ocr_onednn_primitives_created(void) { return 0; }
int ocr_onednn_conv_forward(void *out, ocr_dtype_t out_dt, const void *inp, const void *weight, const float *bias,
                            ocr_dtype_t dt, const OnednnConvGeom *g) {
    (void)out, (void)out_dt, (void)inp, (void)weight, (void)bias, (void)dt, (void)g;
    return 0;
}
int ocr_onednn_conv_backward_data(void *dinp, ocr_dtype_t dinp_dt, const void *dout, const void *weight,
                                  ocr_dtype_t dt, const OnednnConvGeom *g) {
    (void)dinp, (void)dinp_dt, (void)dout, (void)weight, (void)dt, (void)g;
    return 0;
}
int ocr_onednn_conv_backward_weights(float *dweight, const void *inp, const void *dout, ocr_dtype_t dt,
                                     const OnednnConvGeom *g) {
    (void)dweight, (void)inp, (void)dout, (void)dt, (void)g;
    return 0;
}
void ocr_onednn_gemm(int64_t batch, int64_t M, int64_t N, int64_t K, float alpha, OnednnMat a, OnednnMat b,
                     const float *bias, int accumulate, void *c, ocr_dtype_t c_dt, int64_t ldc,
                     int64_t c_batch_stride) {
    (void)batch, (void)M, (void)N, (void)K, (void)alpha, (void)a, (void)b, (void)bias, (void)accumulate, (void)c,
        (void)c_dt, (void)ldc, (void)c_batch_stride;
    OCR_ASSERT(0, "ocr_onednn_gemm: this build has no oneDNN (scripts/setup.sh installs it)");
}

#else

#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <cblas.h>

#include "core/memory.h"
#include "oneapi/dnnl/dnnl.h"
#include "oneapi/dnnl/dnnl_debug.h"

// The one error check: a failing oneDNN call is an internal error (shapes were validated by
// the op), reported with the call and oneDNN's status.
#define DNNL_CHECK(call)                                                                                 \
    do {                                                                                                 \
        dnnl_status_t st_ = (call);                                                                      \
        OCR_ASSERT(st_ == dnnl_success, "oneDNN: %s failed: %s", #call, dnnl_status2str(st_));           \
    } while (0)

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static dnnl_engine_t engine;
static dnnl_stream_t stream;
static int engine_ok;
static char version[32] = "absent";
// Per dtype (index OCR_F16, OCR_BF16): 1 native, and the ISA name of the probe's kernel.
static int native_dt[3];
static const char *isa_dt[3] = {"none", "none", "none"};

static dnnl_data_type_t dnnl_dt(ocr_dtype_t dt) {
    switch (dt) {
    case OCR_F32: return dnnl_f32;
    case OCR_F16: return dnnl_f16;
    case OCR_BF16: return dnnl_bf16;
    default: OCR_ASSERT(0, "oneDNN GEMM: dtype %d is not a float dtype", (int)dt);
    }
    return dnnl_data_type_undef;
}

// Which kernel oneDNN picks for a 64×64×64 GEMM of dt with an fp32 result. brgemm kernels
// name their ISA ("brg:avx512_core_amx"); a conversion kernel ("brg:avx512_core") or the
// reference means no BF16/FP16 arithmetic on this CPU.
static void probe(ocr_dtype_t dt) {
    dnnl_memory_desc_t a, b, c;
    dnnl_dims_t d = {64, 64};
    DNNL_CHECK(dnnl_memory_desc_create_with_tag(&a, 2, d, dnnl_dt(dt), dnnl_ab));
    DNNL_CHECK(dnnl_memory_desc_create_with_tag(&b, 2, d, dnnl_dt(dt), dnnl_ab));
    DNNL_CHECK(dnnl_memory_desc_create_with_tag(&c, 2, d, dnnl_f32, dnnl_ab));
    dnnl_primitive_desc_t pd = NULL;
    if (dnnl_matmul_primitive_desc_create(&pd, engine, a, b, NULL, c, NULL) == dnnl_success) {
        const char *impl = "";
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
        if (strstr(impl, "amx")) {
            isa_dt[dt] = "AMX";
        } else if (dt == OCR_BF16 && strstr(impl, "avx512_core_bf16")) {
            isa_dt[dt] = "AVX512-BF16";
        } else if (dt == OCR_F16 && strstr(impl, "avx512_core_fp16")) {
            isa_dt[dt] = "AVX512-FP16";
        }
        native_dt[dt] = strcmp(isa_dt[dt], "none") != 0;
        dnnl_primitive_desc_destroy(pd);
    }
    dnnl_memory_desc_destroy(a);
    dnnl_memory_desc_destroy(b);
    dnnl_memory_desc_destroy(c);
}

static void init(void) {
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success) return;
    if (dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) != dnnl_success) {
        dnnl_engine_destroy(engine);
        return;
    }
    engine_ok = 1;
    const dnnl_version_t *v = dnnl_version();
    snprintf(version, sizeof version, "%d.%d.%d", v->major, v->minor, v->patch);
    probe(OCR_BF16);
    probe(OCR_F16);
}

int ocr_onednn_available(void) {
    pthread_once(&init_once, init);
    return engine_ok;
}

int ocr_onednn_native(ocr_dtype_t dt) {
    if (!ocr_onednn_available() || (dt != OCR_F16 && dt != OCR_BF16)) return 0;
    return native_dt[dt];
}

const char *ocr_onednn_isa_name(ocr_dtype_t dt) {
    if (!ocr_onednn_available() || (dt != OCR_F16 && dt != OCR_BF16)) return "none";
    return isa_dt[dt];
}

const char *ocr_onednn_version(void) {
    pthread_once(&init_once, init);
    return version;
}

// ---- the primitive cache ---------------------------------------------------------------
// Keyed by everything the primitive depends on; alpha is a run-time scale, so it is only a flag.
typedef struct {
    int64_t batch, M, N, K, lda, ldb, ldc, sa, sb, sc;
    int32_t ta, tb, adt, bdt, cdt, bias, acc, scaled;
    int32_t threads;  // a primitive splits its work for the thread count it was made for
    int32_t pad_;
} GemmKey;
// (the fields are all 8 or 4 bytes: no padding inside, memset clears the tail)

typedef struct {
    GemmKey key;
    int used;
    int reference;  // oneDNN offers only its reference kernel: computed by widen + sgemm instead
    dnnl_primitive_t prim;
    dnnl_memory_desc_t a, b, c, bias, scale, scratch;
    size_t scratch_bytes;
} Entry;

// A training step of PP-OCRv4 at three heights needs a few hundred; beyond the table,
// primitives are made per call (oneDNN's own cache still spares the JIT compilation).
#define CACHE_SLOTS 4096
static Entry cache[CACHE_SLOTS];
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_llong created;

int64_t ocr_onednn_primitives_created(void) { return atomic_load(&created); }

// FNV-1a over a cache key's bytes (the keys are memset before filling: no stray padding bytes).
static uint64_t key_bytes_hash(const void *key, size_t n) {
    const unsigned char *p = key;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

// 2-D descriptor for (rows, cols) with the given element strides, or 3-D with a batch.
static dnnl_memory_desc_t mat_desc(int64_t batch, int64_t rows, int64_t cols, int64_t rs, int64_t cs, int64_t bs,
                                   dnnl_data_type_t dt) {
    dnnl_memory_desc_t md;
    if (batch == 1) {
        dnnl_dims_t d = {rows, cols}, s = {rs, cs};
        DNNL_CHECK(dnnl_memory_desc_create_with_strides(&md, 2, d, dt, s));
    } else {
        dnnl_dims_t d = {batch, rows, cols}, s = {bs, rs, cs};
        DNNL_CHECK(dnnl_memory_desc_create_with_strides(&md, 3, d, dt, s));
    }
    return md;
}

static void entry_build(Entry *e, const GemmKey *k) {
    e->key = *k;
    e->a = mat_desc(k->batch, k->M, k->K, k->ta ? 1 : k->lda, k->ta ? k->lda : 1, k->sa, dnnl_dt(k->adt));
    e->b = mat_desc(k->batch, k->K, k->N, k->tb ? 1 : k->ldb, k->tb ? k->ldb : 1, k->sb, dnnl_dt(k->bdt));
    e->c = mat_desc(k->batch, k->M, k->N, k->ldc, 1, k->sc, dnnl_dt(k->cdt));
    e->bias = k->bias ? mat_desc(k->batch, 1, k->N, k->N, 1, 0, dnnl_f32) : NULL;
    if (e->bias && k->batch > 1) {
        // One bias row for every batch entry: broadcast over the batch dimension too.
        dnnl_memory_desc_destroy(e->bias);
        dnnl_dims_t d = {1, 1, k->N}, s = {k->N, k->N, 1};
        DNNL_CHECK(dnnl_memory_desc_create_with_strides(&e->bias, 3, d, dnnl_f32, s));
    }
    dnnl_primitive_attr_t attr;
    DNNL_CHECK(dnnl_primitive_attr_create(&attr));
    // Scratch from our tracked workspace instead of a buffer kept per primitive.
    DNNL_CHECK(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    if (k->scaled) DNNL_CHECK(dnnl_primitive_attr_set_scales_mask(attr, DNNL_ARG_SRC, 0));
    if (k->acc) {
        // dst = acc + dst: the old value is read in its dtype, added in fp32, rounded once.
        dnnl_post_ops_t po;
        DNNL_CHECK(dnnl_post_ops_create(&po));
        DNNL_CHECK(dnnl_post_ops_append_sum(po, 1.0f, 0, dnnl_data_type_undef));
        DNNL_CHECK(dnnl_primitive_attr_set_post_ops(attr, po));
        dnnl_post_ops_destroy(po);
    }
    dnnl_primitive_desc_t pd;
    dnnl_status_t st = dnnl_matmul_primitive_desc_create(&pd, engine, e->a, e->b, e->bias, e->c, attr);
    OCR_ASSERT(st == dnnl_success,
               "oneDNN has no matmul for %lldx(%lldx%lld)·(%lldx%lld) dtypes %d/%d->%d: %s", (long long)k->batch,
               (long long)k->M, (long long)k->K, (long long)k->K, (long long)k->N, k->adt, k->bdt, k->cdt,
               dnnl_status2str(st));
    dnnl_primitive_attr_destroy(attr);
    const char *impl = "";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    e->reference = strncmp(impl, "ref", 3) == 0;
    e->scratch_bytes = dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0));
    dnnl_dims_t sd = {(int64_t)(e->scratch_bytes ? e->scratch_bytes : 1)};
    DNNL_CHECK(dnnl_memory_desc_create_with_tag(&e->scratch, 1, sd, dnnl_u8, dnnl_a));
    dnnl_dims_t one = {1};
    DNNL_CHECK(dnnl_memory_desc_create_with_tag(&e->scale, 1, one, dnnl_f32, dnnl_a));
    DNNL_CHECK(dnnl_primitive_create(&e->prim, pd));
    dnnl_primitive_desc_destroy(pd);
    atomic_fetch_add(&created, 1);
}

static void entry_destroy(Entry *e) {
    dnnl_primitive_destroy(e->prim);
    dnnl_memory_desc_destroy(e->a);
    dnnl_memory_desc_destroy(e->b);
    dnnl_memory_desc_destroy(e->c);
    if (e->bias) dnnl_memory_desc_destroy(e->bias);
    dnnl_memory_desc_destroy(e->scale);
    dnnl_memory_desc_destroy(e->scratch);
}

// The slot for key k (ksz bytes at key_off) in an open-addressed table of `slots` entries of
// elem_size bytes with an int `used` flag at used_off: the used slot holding k, else the first
// unused one (*fresh = 1: the caller builds it), else NULL (the table is full). The caller holds
// cache_lock. Both primitive caches (GEMM, convolution) probe through it.
static void *cache_slot(void *table, size_t elem_size, int slots, size_t key_off, size_t used_off, const void *k,
                        size_t ksz, int *fresh) {
    const uint64_t h = key_bytes_hash(k, ksz);
    *fresh = 0;
    for (int probe_i = 0; probe_i < slots; probe_i++) {
        char *e = (char *)table + ((h + (uint64_t)probe_i) % (uint64_t)slots) * elem_size;
        int used;
        memcpy(&used, e + used_off, sizeof used);
        if (!used) {
            *fresh = 1;
            return e;
        }
        if (memcmp(e + key_off, k, ksz) == 0) return e;
    }
    return NULL;
}

// The cached entry for k, built on first use; NULL when the table is full (then *tmp is built).
static Entry *lookup(const GemmKey *k, Entry *tmp) {
    int fresh;
    pthread_mutex_lock(&cache_lock);
    Entry *e = cache_slot(cache, sizeof *cache, CACHE_SLOTS, offsetof(Entry, key), offsetof(Entry, used), k,
                          sizeof *k, &fresh);
    if (e && fresh) entry_build(e, k), e->used = 1;
    pthread_mutex_unlock(&cache_lock);
    if (!e) entry_build(tmp, k);
    return e;
}

// The same contract without oneDNN's reference kernel (f16 operands with row strides that
// oneDNN's optimised kernels do not take): each operand widened into a dense fp32 copy,
// sgemm, bias and the old value added in fp32, one rounding.
static float widen(const void *p, ocr_dtype_t dt, int64_t i) {
    if (dt == OCR_F32) return ((const float *)p)[i];
    if (dt == OCR_BF16) return ocr_bf16_to_f32(((const ocr_bf16_t *)p)[i]);
    return ocr_f16_to_f32(((const ocr_f16_t *)p)[i]);
}

static void dense_f32(float *dst, OnednnMat m, int64_t t, int64_t rows, int64_t cols) {
    const char *base = (const char *)m.p + (size_t)(t * m.batch_stride) * ocr_dtype_size(m.dt);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) dst[i * cols + j] = widen(base, m.dt, m.trans ? j * m.ld + i : i * m.ld + j);
}

static void gemm_widened(int64_t batch, int64_t M, int64_t N, int64_t K, float alpha, OnednnMat a, OnednnMat b,
                         const float *bias, int accumulate, void *c, ocr_dtype_t c_dt, int64_t ldc,
                         int64_t c_batch_stride) {
    float *fa = ocr_workspace_push((size_t)(M * K) * sizeof(float));
    float *fb = ocr_workspace_push((size_t)(K * N) * sizeof(float));
    float *fc = ocr_workspace_push((size_t)(M * N) * sizeof(float));
    const size_t es = ocr_dtype_size(c_dt);
    for (int64_t t = 0; t < batch; t++) {
        dense_f32(fa, a, t, M, K);
        dense_f32(fb, b, t, K, N);
        char *ct = (char *)c + (size_t)(t * c_batch_stride) * es;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++)
                fc[i * N + j] = (bias ? bias[j] : 0.0f) + (accumulate ? widen(ct, c_dt, i * ldc + j) : 0.0f);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, alpha, fa, (int)K, fb, (int)N,
                    1.0f, fc, (int)N);
        for (int64_t i = 0; i < M; i++) {
            void *row = ct + (size_t)(i * ldc) * es;
            if (c_dt == OCR_F32)
                memcpy(row, fc + i * N, (size_t)N * sizeof(float));
            else if (c_dt == OCR_BF16)
                ocr_f32_to_bf16_array(row, fc + i * N, (size_t)N);
            else
                ocr_f32_to_f16_array(row, fc + i * N, (size_t)N);
        }
    }
    ocr_workspace_pop(fc);
    ocr_workspace_pop(fb);
    ocr_workspace_pop(fa);
}

static dnnl_memory_t mem(const_dnnl_memory_desc_t md, const void *p) {
    dnnl_memory_t m;
    DNNL_CHECK(dnnl_memory_create(&m, md, engine, (void *)p));
    return m;
}

void ocr_onednn_gemm(int64_t batch, int64_t M, int64_t N, int64_t K, float alpha, OnednnMat a, OnednnMat b,
                     const float *bias, int accumulate, void *c, ocr_dtype_t c_dt, int64_t ldc,
                     int64_t c_batch_stride) {
    OCR_ASSERT(ocr_onednn_available(), "ocr_onednn_gemm: oneDNN's CPU engine did not start");
    OCR_ASSERT(batch >= 1 && M > 0 && N > 0 && K > 0, "ocr_onednn_gemm: empty product (%lld, %lld, %lld, %lld)",
               (long long)batch, (long long)M, (long long)N, (long long)K);
    GemmKey k;
    memset(&k, 0, sizeof k);  // padding bytes take part in the hash and the comparison
    k.batch = batch, k.M = M, k.N = N, k.K = K, k.lda = a.ld, k.ldb = b.ld, k.ldc = ldc;
    k.sa = batch > 1 ? a.batch_stride : 0, k.sb = batch > 1 ? b.batch_stride : 0;
    k.sc = batch > 1 ? c_batch_stride : 0;
    k.ta = a.trans != 0, k.tb = b.trans != 0, k.adt = a.dt, k.bdt = b.dt, k.cdt = c_dt;
    k.bias = bias != NULL, k.acc = accumulate != 0, k.scaled = alpha != 1.0f;
    k.threads = omp_get_max_threads();
    Entry tmp;
    Entry *e = lookup(&k, &tmp);
    Entry *use = e ? e : &tmp;
    if (use->reference) {
        if (!e) entry_destroy(&tmp);
        OCR_ASSERT(M <= 0x7fffffff && N <= 0x7fffffff && K <= 0x7fffffff, "ocr_onednn_gemm: too large for sgemm");
        gemm_widened(batch, M, N, K, alpha, a, b, bias, accumulate, c, c_dt, ldc, c_batch_stride);
        return;
    }
    void *scratch = ocr_workspace_push(use->scratch_bytes ? use->scratch_bytes : 1);
    dnnl_exec_arg_t args[6];
    int n = 0;
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, mem(use->a, a.p)};
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, mem(use->b, b.p)};
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DST, mem(use->c, c)};
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, mem(use->scratch, scratch)};
    if (bias) args[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, mem(use->bias, bias)};
    if (k.scaled) args[n++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_SCALES | DNNL_ARG_SRC, mem(use->scale, &alpha)};
    DNNL_CHECK(dnnl_primitive_execute(use->prim, stream, n, args));
    DNNL_CHECK(dnnl_stream_wait(stream));
    for (int i = 0; i < n; i++) dnnl_memory_destroy(args[i].memory);
    ocr_workspace_pop(scratch);
    if (!e) entry_destroy(&tmp);
}

// ---- convolutions ------------------------------------------------------------------------
enum { CONV_FORWARD, CONV_BACKWARD_DATA, CONV_BACKWARD_WEIGHTS };

typedef struct {
    int64_t N, H, W, C, OC, KH, KW, Ho, Wo, sh, sw, pt, pl, pb, pr;
    int64_t dir, dt, out_dt, bias, threads;
} ConvKey;

typedef struct {
    ConvKey key;
    int used;
    int reference;  // only oneDNN's reference kernel: the caller keeps its own path
    dnnl_primitive_t prim;
    dnnl_primitive_t wreorder;  // plain (OC, KH, KW, C) weights <-> the kernel's layout; NULL when they agree
    dnnl_memory_desc_t src, dst, wplain, wconv, bias, scratch;  // src: the input gradient's (out_dt) for that direction
    size_t scratch_bytes, wconv_bytes;
} ConvEntry;

#define CONV_SLOTS 512
static ConvEntry conv_cache[CONV_SLOTS];

static dnnl_memory_desc_t tagged(int nd, const int64_t *dims, dnnl_data_type_t dt, dnnl_format_tag_t tag) {
    dnnl_memory_desc_t md;
    DNNL_CHECK(dnnl_memory_desc_create_with_tag(&md, nd, dims, dt, tag));
    return md;
}

static void conv_entry_build(ConvEntry *e, const ConvKey *k) {
    memset(e, 0, sizeof *e);
    e->key = *k;
    const dnnl_dims_t sd = {k->N, k->C, k->H, k->W}, dd = {k->N, k->OC, k->Ho, k->Wo}, wd = {k->OC, k->C, k->KH, k->KW};
    const dnnl_dims_t strides = {k->sh, k->sw}, dil = {0, 0}, pl = {k->pt, k->pl}, pr = {k->pb, k->pr};
    const dnnl_data_type_t dt = dnnl_dt((ocr_dtype_t)k->dt), odt = dnnl_dt((ocr_dtype_t)k->out_dt);
    // The forward's descriptors (also the backward's hint): maps in dt, the output in out_dt.
    dnnl_memory_desc_t fsrc = tagged(4, sd, dt, dnnl_nhwc), fdst = tagged(4, dd, k->dir == CONV_FORWARD ? odt : dt, dnnl_nhwc);
    dnnl_memory_desc_t fw = tagged(4, wd, dt, dnnl_format_tag_any);
    if (k->bias) {
        const dnnl_dims_t bd = {k->OC};
        e->bias = tagged(1, bd, dnnl_f32, dnnl_a);
    }
    dnnl_primitive_attr_t attr;
    DNNL_CHECK(dnnl_primitive_attr_create(&attr));
    DNNL_CHECK(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    dnnl_primitive_desc_t fpd = NULL, pd = NULL;
    dnnl_status_t st = dnnl_convolution_forward_primitive_desc_create(
        &fpd, engine, dnnl_forward_training, dnnl_convolution_direct, fsrc, fw, e->bias, fdst, strides, dil, pl, pr,
        k->dir == CONV_FORWARD ? attr : NULL);
    const dnnl_data_type_t wdt = k->dir == CONV_BACKWARD_WEIGHTS ? dnnl_f32 : dt;
    e->wplain = tagged(4, wd, wdt, dnnl_ohwi);
    if (st == dnnl_success && k->dir == CONV_FORWARD) {
        pd = fpd, fpd = NULL;
    } else if (st == dnnl_success && k->dir == CONV_BACKWARD_DATA) {
        // The map written is the input gradient, in out_dt: kept as the entry's src.
        dnnl_memory_desc_t dsrc = tagged(4, sd, odt, dnnl_nhwc);
        st = dnnl_convolution_backward_data_primitive_desc_create(&pd, engine, dnnl_convolution_direct, dsrc, fw,
                                                                  fdst, strides, dil, pl, pr, fpd, attr);
        dnnl_memory_desc_destroy(fsrc);
        fsrc = dsrc;
    } else if (st == dnnl_success) {
        dnnl_memory_desc_t dw = tagged(4, wd, dnnl_f32, dnnl_format_tag_any);
        st = dnnl_convolution_backward_weights_primitive_desc_create(&pd, engine, dnnl_convolution_direct, fsrc, dw,
                                                                     NULL, fdst, strides, dil, pl, pr, fpd, attr);
        dnnl_memory_desc_destroy(dw);
    }
    dnnl_primitive_attr_destroy(attr);
    if (fpd) dnnl_primitive_desc_destroy(fpd);
    dnnl_memory_desc_destroy(fw);
    e->src = fsrc, e->dst = fdst;
    const char *impl = "ref";
    if (st == dnnl_success) dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    e->reference = st != dnnl_success || strncmp(impl, "ref", 3) == 0;
    if (e->reference) {
        if (pd) dnnl_primitive_desc_destroy(pd);
        return;
    }
    const_dnnl_memory_desc_t wq = dnnl_primitive_desc_query_md(
        pd, k->dir == CONV_BACKWARD_WEIGHTS ? dnnl_query_diff_weights_md : dnnl_query_weights_md, 0);
    DNNL_CHECK(dnnl_memory_desc_clone(&e->wconv, wq));
    e->wconv_bytes = dnnl_memory_desc_get_size(e->wconv);
    if (!dnnl_memory_desc_equal(e->wconv, e->wplain)) {
        dnnl_primitive_desc_t rpd;
        const_dnnl_memory_desc_t from = k->dir == CONV_BACKWARD_WEIGHTS ? e->wconv : e->wplain;
        const_dnnl_memory_desc_t to = k->dir == CONV_BACKWARD_WEIGHTS ? e->wplain : e->wconv;
        DNNL_CHECK(dnnl_reorder_primitive_desc_create(&rpd, from, engine, to, engine, NULL));
        DNNL_CHECK(dnnl_primitive_create(&e->wreorder, rpd));
        dnnl_primitive_desc_destroy(rpd);
    }
    e->scratch_bytes = dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0));
    const dnnl_dims_t scd = {(int64_t)(e->scratch_bytes ? e->scratch_bytes : 1)};
    e->scratch = tagged(1, scd, dnnl_u8, dnnl_a);
    DNNL_CHECK(dnnl_primitive_create(&e->prim, pd));
    dnnl_primitive_desc_destroy(pd);
    atomic_fetch_add(&created, 1);
}

static void conv_entry_destroy(ConvEntry *e) {
    if (e->prim) dnnl_primitive_destroy(e->prim);
    if (e->wreorder) dnnl_primitive_destroy(e->wreorder);
    dnnl_memory_desc_t *mds[] = {&e->src, &e->dst, &e->wplain, &e->wconv, &e->bias, &e->scratch};
    for (size_t i = 0; i < sizeof mds / sizeof mds[0]; i++)
        if (*mds[i]) dnnl_memory_desc_destroy(*mds[i]);
}

// The cached entry for k (built on first use); when the table is full, *tmp is built and returned.
static ConvEntry *conv_lookup(const ConvKey *k, ConvEntry *tmp, int *is_tmp) {
    int fresh;
    pthread_mutex_lock(&cache_lock);
    ConvEntry *e = cache_slot(conv_cache, sizeof *conv_cache, CONV_SLOTS, offsetof(ConvEntry, key),
                              offsetof(ConvEntry, used), k, sizeof *k, &fresh);
    if (e && fresh) conv_entry_build(e, k), e->used = 1;
    pthread_mutex_unlock(&cache_lock);
    *is_tmp = e == NULL;
    if (!e) conv_entry_build(tmp, k), e = tmp;
    return e;
}

// Runs direction dir: a = the map read (inp, or dout for the input gradient), b = dout for the
// weight gradient, w = the weights read (plain) or written (fp32, plain), out = the map written.
static int conv_run(int dir, void *out, ocr_dtype_t out_dt, const void *a, const void *b, const void *w_in,
                    float *w_out, const float *bias, ocr_dtype_t dt, const OnednnConvGeom *g) {
    OCR_ASSERT(ocr_onednn_available(), "oneDNN convolution: oneDNN's CPU engine did not start");
    OCR_ASSERT(g->N > 0 && g->C > 0 && g->OC > 0 && g->Ho > 0 && g->Wo > 0, "oneDNN convolution: empty problem");
    ConvKey k;
    memset(&k, 0, sizeof k);
    k.N = g->N, k.H = g->H, k.W = g->W, k.C = g->C, k.OC = g->OC, k.KH = g->KH, k.KW = g->KW, k.Ho = g->Ho, k.Wo = g->Wo;
    k.sh = g->stride_h, k.sw = g->stride_w, k.pt = g->pad_top, k.pl = g->pad_left;
    k.pb = (g->Ho - 1) * g->stride_h + g->KH - g->H - g->pad_top;
    k.pr = (g->Wo - 1) * g->stride_w + g->KW - g->W - g->pad_left;
    k.dir = dir, k.dt = dt, k.out_dt = out_dt, k.bias = bias != NULL, k.threads = omp_get_max_threads();
    ConvEntry tmp;
    int is_tmp;
    ConvEntry *e = conv_lookup(&k, &tmp, &is_tmp);
    if (e->reference) {
        if (is_tmp) conv_entry_destroy(e);
        return 0;
    }
    void *wbuf = e->wreorder ? ocr_workspace_push(e->wconv_bytes) : NULL;
    void *scratch = ocr_workspace_push(e->scratch_bytes ? e->scratch_bytes : 1);
    dnnl_exec_arg_t args[6];
    int n = 0;
    if (dir != CONV_BACKWARD_WEIGHTS && e->wreorder) {
        // The weights into the kernel's layout first.
        dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, mem(e->wplain, w_in)}, {DNNL_ARG_TO, mem(e->wconv, wbuf)}};
        DNNL_CHECK(dnnl_primitive_execute(e->wreorder, stream, 2, r));
        dnnl_memory_destroy(r[0].memory), dnnl_memory_destroy(r[1].memory);
    }
    const void *wk = e->wreorder ? wbuf : (dir == CONV_BACKWARD_WEIGHTS ? (const void *)w_out : w_in);
    if (dir == CONV_FORWARD) {
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, mem(e->src, a)};
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, mem(e->wconv, wk)};
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DST, mem(e->dst, out)};
        if (bias) args[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, mem(e->bias, bias)};
    } else if (dir == CONV_BACKWARD_DATA) {
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_SRC, mem(e->src, out)};  // e->src: out_dt here
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, mem(e->wconv, wk)};
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, mem(e->dst, a)};
    } else {
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, mem(e->src, a)};
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, mem(e->dst, b)};
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_WEIGHTS, mem(e->wconv, wk)};
    }
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, mem(e->scratch, scratch)};
    DNNL_CHECK(dnnl_primitive_execute(e->prim, stream, n, args));
    for (int i = 0; i < n; i++) dnnl_memory_destroy(args[i].memory);
    if (dir == CONV_BACKWARD_WEIGHTS && e->wreorder) {
        // The gradient back into the plain layout.
        dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, mem(e->wconv, wbuf)}, {DNNL_ARG_TO, mem(e->wplain, w_out)}};
        DNNL_CHECK(dnnl_primitive_execute(e->wreorder, stream, 2, r));
        dnnl_memory_destroy(r[0].memory), dnnl_memory_destroy(r[1].memory);
    }
    DNNL_CHECK(dnnl_stream_wait(stream));
    ocr_workspace_pop(scratch);
    if (wbuf) ocr_workspace_pop(wbuf);
    if (is_tmp) conv_entry_destroy(e);
    return 1;
}

int ocr_onednn_conv_forward(void *out, ocr_dtype_t out_dt, const void *inp, const void *weight, const float *bias,
                            ocr_dtype_t dt, const OnednnConvGeom *g) {
    return conv_run(CONV_FORWARD, out, out_dt, inp, NULL, weight, NULL, bias, dt, g);
}

int ocr_onednn_conv_backward_data(void *dinp, ocr_dtype_t dinp_dt, const void *dout, const void *weight,
                                  ocr_dtype_t dt, const OnednnConvGeom *g) {
    return conv_run(CONV_BACKWARD_DATA, dinp, dinp_dt, dout, NULL, weight, NULL, NULL, dt, g);
}

int ocr_onednn_conv_backward_weights(float *dweight, const void *inp, const void *dout, ocr_dtype_t dt,
                                     const OnednnConvGeom *g) {
    return conv_run(CONV_BACKWARD_WEIGHTS, NULL, OCR_F32, inp, dout, NULL, dweight, NULL, dt, g);
}

#endif

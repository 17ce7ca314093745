// cuBLAS, opened when the CUDA backend first uses it rather than linked into every program.
// CUDA only, not an op family: the CPU's GEMMs are OpenBLAS's and oneDNN's (kernels/cpu/gemm.c,
// onednn.c).
//
// Linking libcublas maps libcublasLt, whose load-time relocations and constructors cost about
// 150 MiB of resident memory in every process that links it, before any GPU is touched: a
// CPU-only training run of a CUDA-enabled build paid that in its peak RSS. So the backend links
// none of cuBLAS: the nine cuBLAS entry points it calls are defined here (with the signatures of
// cublas_api.h, so a mismatch does not compile) and forward to the library, loaded with dlopen on
// the first call — libcublas.so.<major> from the loader's search path (LD_LIBRARY_PATH, as
// scripts/device-check.sh sets it for a pip-installed cuBLAS), else from the toolkit's library
// folder this build was configured with. When neither loads, every call returns
// CUBLAS_STATUS_NOT_INITIALIZED and cublasGetStatusString says which library failed and why.
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "kernels/cuda/cuda_internal.h"

#define CUBLAS_STR2(x) #x
#define CUBLAS_STR(x) CUBLAS_STR2(x)
#define CUBLAS_SONAME "libcublas.so." CUBLAS_STR(CUBLAS_VER_MAJOR)

static void *cublas_handle;
static pthread_once_t cublas_once = PTHREAD_ONCE_INIT;
static char cublas_error[768];

static void cublas_open(void) {
    cublas_handle = dlopen(CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (cublas_handle) return;
    char first[320];
    snprintf(first, sizeof first, "%s", dlerror());
#ifdef OCR_CUBLAS_DIR
    cublas_handle = dlopen(OCR_CUBLAS_DIR "/" CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (cublas_handle) return;
    snprintf(cublas_error, sizeof cublas_error, "cuBLAS could not be loaded: %s; %s", first, dlerror());
#else
    snprintf(cublas_error, sizeof cublas_error, "cuBLAS could not be loaded: %s", first);
#endif
}

// The library's entry point `name`, or NULL (the library or the symbol is missing).
static void *cublas_sym(const char *name) {
    pthread_once(&cublas_once, cublas_open);
    if (!cublas_handle) return NULL;
    void *p = dlsym(cublas_handle, name);
    if (!p) snprintf(cublas_error, sizeof cublas_error, "%s has no %s: %s", CUBLAS_SONAME, name, dlerror());
    return p;
}

// Defines `cublasStatus_t name params` forwarding args to the library's `name`; each entry point
// is looked up once (a pointer store is atomic on x86-64, and every lookup finds the same value).
#define CUBLAS_FORWARD(name, params, args)                                   \
    cublasStatus_t CUBLASWINAPI name params {                                \
        typedef cublasStatus_t (*fn_t) params;                               \
        static fn_t fn;                                                      \
        if (!fn) fn = (fn_t)cublas_sym(#name);                               \
        return fn ? fn args : CUBLAS_STATUS_NOT_INITIALIZED;                 \
    }

CUBLAS_FORWARD(cublasCreate_v2, (cublasHandle_t *handle), (handle))
CUBLAS_FORWARD(cublasDestroy_v2, (cublasHandle_t handle), (handle))
CUBLAS_FORWARD(cublasGetProperty, (libraryPropertyType type, int *value), (type, value))
CUBLAS_FORWARD(cublasSetStream_v2, (cublasHandle_t handle, cudaStream_t stream), (handle, stream))
CUBLAS_FORWARD(cublasSetWorkspace_v2, (cublasHandle_t handle, void *workspace, size_t bytes),
               (handle, workspace, bytes))
CUBLAS_FORWARD(cublasSetMathMode, (cublasHandle_t handle, cublasMath_t mode), (handle, mode))
CUBLAS_FORWARD(cublasGemmEx,
               (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B, cudaDataType Btype,
                int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                cublasGemmAlgo_t algo),
               (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
                computeType, algo))
CUBLAS_FORWARD(cublasGemmStridedBatchedEx,
               (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                const void *alpha, const void *A, cudaDataType Atype, int lda, long long int strideA, const void *B,
                cudaDataType Btype, int ldb, long long int strideB, const void *beta, void *C, cudaDataType Ctype,
                int ldc, long long int strideC, int batchCount, cublasComputeType_t computeType,
                cublasGemmAlgo_t algo),
               (handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta, C,
                Ctype, ldc, strideC, batchCount, computeType, algo))

const char *CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
    typedef const char *(*fn_t)(cublasStatus_t);
    static fn_t fn;
    if (!fn) fn = (fn_t)cublas_sym("cublasGetStatusString");
    return fn ? fn(status) : cublas_error;
}

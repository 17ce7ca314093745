// CPU feature detection and the per-dtype choice of GEMM/convolution path (kernels/cpu/isa.h).
// CPU only, not an op family: the GPU's capabilities are kernels/cuda/device.cu's.
#include "kernels/cpu/isa.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/onednn.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define OCR_ISA_X86 1
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#define OCR_ISA_X86 0
#endif

// The fp32 convolution GEMM default (ocr_cpu_f32_conv_onednn): oneDNN, whose fp32 step on
// PP-OCRv3 ran at 1.57x the sgemm one per CPU-second (docs/BENCHMARKS.md).
#define OCR_F32_CONV_ONEDNN_DEFAULT 1

static pthread_once_t detect_once = PTHREAD_ONCE_INIT;
static OcrCpuFeatures feats;
static atomic_int exact_numerics;

#if OCR_ISA_X86
static unsigned long long xgetbv0(void) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}
#endif

static void detect(void) {
#if OCR_ISA_X86
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    int osxsave = (c >> 27) & 1;
    unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
    int os_avx = (xcr0 & 0x6) == 0x6;              // XMM + YMM state
    int os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;  // opmask + ZMM state
    int os_amx = (xcr0 & 0x60000ull) == 0x60000ull;   // XTILECFG + XTILEDATA
    // FMA3: our vector loops' AVX2 and AVX-512 levels need it (GELU fuses its multiply-adds), so a
    // CPU with AVX2 but without FMA3 runs the SSE2 level (cpu_common.c, vec_detect).
    feats.fma = os_avx && ((c >> 12) & 1);
    feats.f16c = os_avx && ((c >> 29) & 1);
    unsigned max_leaf = __get_cpuid_max(0, NULL);
    if (max_leaf < 7) return;
    __cpuid_count(7, 0, a, b, c, d);
    unsigned b7 = b, d7 = d;
    __cpuid_count(7, 1, a, b, c, d);
    unsigned a71 = a;
    feats.avx2 = os_avx && ((b7 >> 5) & 1);
    feats.avx512f = os_avx512 && ((b7 >> 16) & 1);
    feats.avx512bw = feats.avx512f && ((b7 >> 30) & 1);
    feats.avx512vl = feats.avx512f && ((b7 >> 31) & 1);
    feats.avx512_bf16 = feats.avx512bw && feats.avx512vl && ((a71 >> 5) & 1);
    feats.avx512_fp16 = feats.avx512bw && feats.avx512vl && ((d7 >> 23) & 1);
    int amx_tile = os_amx && ((d7 >> 24) & 1);
#ifdef SYS_arch_prctl
    // Linux hands out the 8 KiB tile state only on request (ARCH_REQ_XCOMP_PERM for
    // XFEATURE_XTILEDATA); without the grant the first tile instruction faults.
    if (amx_tile && syscall(SYS_arch_prctl, 0x1023, 18) != 0) amx_tile = 0;
#else
    amx_tile = 0;
#endif
    feats.amx_bf16 = amx_tile && ((d7 >> 22) & 1);
    feats.amx_fp16 = amx_tile && ((a71 >> 21) & 1);
#endif
}

const OcrCpuFeatures *ocr_cpu_features(void) {
    pthread_once(&detect_once, detect);
    return &feats;
}

void ocr_cpu_set_exact_numerics(int on) { atomic_store(&exact_numerics, on != 0); }
int ocr_cpu_exact_numerics(void) { return atomic_load_explicit(&exact_numerics, memory_order_relaxed); }

// Test hook (not in isa.h): treat every f16/bf16 path as lacking hardware, so a test can run
// the emulated path on a CPU that has BF16/FP16 instructions.
void ocr_cpu_force_emulated(int on);
static atomic_int force_emulated;
void ocr_cpu_force_emulated(int on) { atomic_store(&force_emulated, on != 0); }

// The hardware path exists for dt: CPU instructions and the library's implementation.
static int hardware_path(ocr_dtype_t dt) {
    if (atomic_load_explicit(&force_emulated, memory_order_relaxed)) return 0;
    const OcrCpuFeatures *f = ocr_cpu_features();
    if (dt == OCR_BF16) return (f->amx_bf16 || f->avx512_bf16) && ocr_onednn_native(OCR_BF16);
    if (dt == OCR_F16) return (f->amx_fp16 || f->avx512_fp16) && ocr_onednn_native(OCR_F16);
    return 0;
}

int ocr_cpu_lp_native(ocr_dtype_t dt) {
    if (dt != OCR_BF16 && dt != OCR_F16) return 0;
    return !ocr_cpu_exact_numerics() && hardware_path(dt);
}

// *flag = 1 for "onednn", 0 for "sgemm" in environment variable var; unset leaves it, anything
// else is named in a warning and ignored.
static void gemm_path_env(const char *var, int *flag) {
    const char *e = getenv(var);
    if (!e || !*e) return;
    if (strcmp(e, "onednn") == 0)
        *flag = 1;
    else if (strcmp(e, "sgemm") == 0)
        *flag = 0;
    else
        ocr_log(OCR_LOG_WARN, "%s=%s is not sgemm or onednn; ignored", var, e);
}

static pthread_once_t f32_conv_once = PTHREAD_ONCE_INIT;
static int f32_conv_default = OCR_F32_CONV_ONEDNN_DEFAULT;
static void f32_conv_env(void) { gemm_path_env("OCR_CPU_F32_CONV", &f32_conv_default); }

int ocr_cpu_f32_conv_onednn(void) {
    pthread_once(&f32_conv_once, f32_conv_env);
    return f32_conv_default && !ocr_cpu_exact_numerics() && ocr_onednn_available();
}

// The fp32 linears' default: oneDNN on every CPU (ocr_cpu_f32_linear_onednn still needs oneDNN
// built in). On AVX-512 its matmul is the faster GEMM; on AVX2-only CPUs it is about as fast as
// OpenBLAS's sgemm per call, but with it no OpenBLAS thread pool competes with the OpenMP team in
// the step and the team may spin between regions (training/runtime.c): Zen 3, v6 tiny CTC FP32,
// 6 alternated runs, median 49.3 -> 58.3 samples/s (docs/BENCHMARKS.md).
static pthread_once_t f32_linear_once = PTHREAD_ONCE_INIT;
static int f32_linear_default = 1;
static void f32_linear_env(void) { gemm_path_env("OCR_CPU_F32_LINEAR", &f32_linear_default); }

int ocr_cpu_f32_linear_onednn(void) {
    pthread_once(&f32_linear_once, f32_linear_env);
    return f32_linear_default && !ocr_cpu_exact_numerics() && ocr_onednn_available();
}

// Test hook (not in isa.h): "sgemm" or "onednn" selects that path for f32 linears, NULL the
// CPU's default; returns 0 and changes nothing for "onednn" without oneDNN or an unknown name.
int ocr_cpu_f32_linear_select(const char *name) {
    pthread_once(&f32_linear_once, f32_linear_env);
    if (!name) return f32_linear_default = 1, 1;
    if (strcmp(name, "sgemm") == 0) return f32_linear_default = 0, 1;
    if (strcmp(name, "onednn") == 0 && ocr_onednn_available()) return f32_linear_default = 1, 1;
    return 0;
}

const char *ocr_cpu_isa_emulated_reason(ocr_dtype_t dt) {
    if (dt != OCR_BF16 && dt != OCR_F16) return NULL;
    if (ocr_cpu_lp_native(dt)) return NULL;
    if (ocr_cpu_exact_numerics()) return "exact numerics requested (Global.cpu_exact_numerics)";
    if (!ocr_onednn_available()) return "built without oneDNN";
    if (atomic_load_explicit(&force_emulated, memory_order_relaxed)) return "emulation forced (test hook)";
    const OcrCpuFeatures *f = ocr_cpu_features();
    if (dt == OCR_BF16 && !f->amx_bf16 && !f->avx512_bf16) return "no AVX512-BF16 or AMX-BF16 on this CPU";
    if (dt == OCR_F16 && !f->amx_fp16 && !f->avx512_fp16) return "no AVX512-FP16 or AMX-FP16 on this CPU";
    return "oneDNN has no hardware implementation here";
}

const char *ocr_cpu_isa_name(ocr_dtype_t dt) {
    // fp32: the vector level our loops run at (CPUID's best unless OCR_CPU_VEC lowers it).
    if (dt == OCR_F32) {
        switch (ocr_cpu_vec_level()) {
            case CPU_VEC_AVX512: return "AVX-512";
            case CPU_VEC_AVX2: return "AVX2";
            default: return "SSE2";
        }
    }
    if (!ocr_cpu_lp_native(dt)) return "emulated";
    // What oneDNN picked for a probe GEMM of this dtype (AMX needs the OS grant as well).
    return ocr_onednn_isa_name(dt);
}

void ocr_cpu_isa_summary(char *buf, size_t n) {
    snprintf(buf, n, "fp32: %s, bf16: %s, fp16: %s", ocr_cpu_isa_name(OCR_F32), ocr_cpu_isa_name(OCR_BF16),
             ocr_cpu_isa_name(OCR_F16));
}

// Which instructions the CPU backend uses per dtype, chosen at run time from CPUID (builds
// stay baseline x86-64), and the reference-numerics switch.
//
// f16/bf16 GEMMs and convolutions run on the hardware (oneDNN: AMX tiles, AVX512-BF16,
// AVX512-FP16) when this build has oneDNN, the CPU has the instructions and the exact
// reference is off. The hardware path takes the low-precision operands as they are and
// accumulates in fp32, the contract of a GPU's tensor cores; only the order of the fp32
// additions differs from the reference. The reference (Global.cpu_exact_numerics, and the
// only path without the hardware) widens the operands to fp32, multiplies with sgemm and
// rounds once, so a CPU reproduces what a GPU stores bit for bit where the sums agree.
#ifndef OCR_KERNELS_CPU_ISA_H
#define OCR_KERNELS_CPU_ISA_H

#include <stddef.h>

#include "core/tensor.h"

// What the CPU has (CPUID and OS state), detected once.
typedef struct {
    int avx2, fma, f16c;              // fma: FMA3, which our loops' AVX2 and AVX-512 levels require
                                      // (kernels/cpu/cpu_common.c: without it they run SSE2)
    int avx512f, avx512bw, avx512vl;  // the AVX-512 subset our own loops use
    int avx512_bf16, avx512_fp16;
    int amx_bf16, amx_fp16;           // AMX tiles the OS lets this process use
} OcrCpuFeatures;

const OcrCpuFeatures *ocr_cpu_features(void);

// 1: GEMMs and convolutions with operands of this dtype (f16, bf16) run on the hardware now.
// Always 0 for f32 (fp32 compute is native everywhere) and under exact numerics.
int ocr_cpu_lp_native(ocr_dtype_t dt);

// 1: fp32 dense/grouped convolutions (1×1 and im2col) multiply through oneDNN's fp32 matmul
// instead of OpenBLAS's sgemm. Measured per shape family with bench_train_cpu (docs/BENCHMARKS.md,
// "CPU mixed precision"); OCR_CPU_F32_CONV=sgemm|onednn in the environment (read once) overrides
// the default. Always 0 without oneDNN and under exact numerics (the sgemm reference).
int ocr_cpu_f32_conv_onednn(void);
// 1: fp32 linears and GEMMs go through oneDNN's fp32 matmul too, not sgemm: the default on every
// CPU (the v6 tiny MultiHead FP32 step ran 14 % faster so on Zen 4, whose linears are a third of
// the step; on Zen 3 the v6 tiny CTC step 18 %, mostly because no OpenBLAS pool then shares the
// cores with the OpenMP team: docs/BENCHMARKS.md). OCR_CPU_F32_LINEAR=sgemm|onednn overrides;
// 0 without oneDNN and under exact numerics.
int ocr_cpu_f32_linear_onednn(void);

// Global.cpu_exact_numerics: 1 forces the emulated reference for f16/bf16; 0 (the default)
// uses the hardware where it exists. Process-wide, like the thread count.
void ocr_cpu_set_exact_numerics(int on);
int ocr_cpu_exact_numerics(void);

// What a dtype's GEMMs and convolutions run on, for reports: "AMX" / "AVX512-BF16" (bf16),
// "AVX512-FP16" (fp16), "AVX-512" / "AVX2" (fp32), or "emulated" (f16/bf16 widened to fp32).
const char *ocr_cpu_isa_name(ocr_dtype_t dt);
// Why a dtype is emulated ("exact numerics requested", "no AVX512-BF16/AMX-BF16 on this CPU",
// "built without oneDNN"), or NULL when it is not.
const char *ocr_cpu_isa_emulated_reason(ocr_dtype_t dt);
// One line for `ocrtrain info` and reports: "fp32: AVX-512, bf16: AMX, fp16: AVX512-FP16".
void ocr_cpu_isa_summary(char *buf, size_t n);

#endif

// Thread-runtime defaults for training on few cores (see training/runtime.h).
#include "training/runtime.h"

#include <stdlib.h>
#include <unistd.h>

#include "kernels/cpu/isa.h"

void training_tune_runtime(char **argv) {
    if (getenv("OCR_RUNTIME_TUNED")) return;
    int changed = 0;
    // libgomp: idle team threads sleep instead of spinning, so they leave the cores to
    // OpenBLAS's threads and the loader between parallel regions.
    const int policy_set = getenv("OMP_WAIT_POLICY") != NULL;
    if (!policy_set) changed |= setenv("OMP_WAIT_POLICY", "PASSIVE", 1) == 0;
    // ... but first they spin for about half a millisecond (libgomp counts ~100 spins per µs)
    // where the fp32 linears run on oneDNN's OpenMP threads (ocr_cpu_f32_linear_onednn, the
    // default wherever oneDNN is built in), so that no OpenBLAS pool shares the cores in the
    // step's GEMMs. A step is
    // hundreds of short parallel regions and a sleeping thread takes tens of microseconds to wake
    // for each: ocrtrain train (v6 tiny CTC, bf16-O2, loader included) ran 10 % more samples/s
    // with it on Zen 4, bench_train_cpu's v6 tiny steps 10-18 % faster, Zen 3's v6 tiny CTC FP32
    // 18 % (docs/BENCHMARKS.md). Where OpenBLAS's sgemm runs the linears (OCR_CPU_F32_LINEAR=sgemm,
    // or no oneDNN) spinning cost 3 %, and the team sleeps at once.
    if (!policy_set && !getenv("GOMP_SPINCOUNT") && ocr_cpu_f32_linear_onednn())
        changed |= setenv("GOMP_SPINCOUNT", "30000", 1) == 0;
    // OpenBLAS: its threads stop spinning after 2^4 cycles instead of 2^28 (sched_yield loops
    // that show up as system time and steal the OpenMP threads' cores).
    if (!getenv("OPENBLAS_THREAD_TIMEOUT")) changed |= setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1) == 0;
    if (!changed) return;
    // Both runtimes read these when they are loaded, before main: start again with them set.
    setenv("OCR_RUNTIME_TUNED", "1", 1);
    execv("/proc/self/exe", argv);
    // exec failed (no /proc): carry on with the defaults
}

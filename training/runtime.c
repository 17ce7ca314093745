// Thread-runtime defaults for training on few cores (see training/runtime.h).
#include "training/runtime.h"

#include <stdlib.h>
#include <unistd.h>

void training_tune_runtime(char **argv) {
    if (getenv("OCR_RUNTIME_TUNED")) return;
    int changed = 0;
    // libgomp: idle team threads sleep instead of spinning, so they leave the cores to
    // OpenBLAS's threads and the loader between parallel regions.
    if (!getenv("OMP_WAIT_POLICY")) changed |= setenv("OMP_WAIT_POLICY", "PASSIVE", 1) == 0;
    // OpenBLAS: its threads stop spinning after 2^4 cycles instead of 2^28 (sched_yield loops
    // that show up as system time and steal the OpenMP threads' cores).
    if (!getenv("OPENBLAS_THREAD_TIMEOUT")) changed |= setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1) == 0;
    if (!changed) return;
    // Both runtimes read these when they are loaded, before main: start again with them set.
    setenv("OCR_RUNTIME_TUNED", "1", 1);
    execv("/proc/self/exe", argv);
    // exec failed (no /proc): carry on with the defaults
}

// Runtime defaults of the ocrtrain executable.
//
// Measured on a 2-core VM (docs/BENCHMARKS.md, "Training (CPU)"): with libgomp's default
// active wait policy and OpenBLAS's default thread timeout, the OpenMP team and OpenBLAS's
// pthreads spin on the same two cores between every layer, and a training step takes about
// twice as long as with OMP_WAIT_POLICY=PASSIVE and OPENBLAS_THREAD_TIMEOUT=4 (results are
// bit-identical either way). Both are read by the libraries' constructors before main runs,
// so training_tune_runtime sets whichever the user has not set and re-executes the program once
// (/proc/self/exe with the same arguments). OCR_RUNTIME_TUNED=1 in the environment disables it.
// On CPUs whose fp32 linears run on oneDNN (AVX-512), the passive team first spins briefly
// (GOMP_SPINCOUNT=30000, about half a millisecond): no OpenBLAS pool competes for the cores
// there, and waking a sleeping thread for each of a step's short parallel regions costs ~10 %.
#ifndef OCR_TRAINING_RUNTIME_H
#define OCR_TRAINING_RUNTIME_H

// Call first thing in main. Returns only when no re-execution happened (or it failed).
void training_tune_runtime(char **argv);

#endif

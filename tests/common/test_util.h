// Shared helpers for the Check test suites.
#ifndef OCR_TESTS_TEST_UTIL_H
#define OCR_TESTS_TEST_UTIL_H

#include <check.h>
#include <stdint.h>

#include "core/tensor.h"

// Runs a suite (forking per test unless CK_FORK=no) and returns the process exit code.
int ocr_test_run_suite(Suite *s);

// Path inside the shared folder, or NULL (after printing "SKIP: <why>") when ../shared is absent.
const char *ocr_test_shared_path(const char *relative, char *buf, size_t bufsize);

// Random values in [lo, hi) from a Philox stream (deterministic per seed).
void ocr_test_fill_uniform(float *dst, int64_t n, uint64_t seed, float lo, float hi);
void ocr_test_fill_uniform_double(double *dst, int64_t n, uint64_t seed, double lo, double hi);

// Poisons a tensor (NaN for float dtypes, 0xAB bytes otherwise) so unwritten outputs fail.
void ocr_test_poison(OcrTensor *t);

// Allocates a CPU tensor (category ACTIVATIONS) of `dtype` holding `values` (f32, rounded to
// the dtype); values may be NULL for a poisoned tensor.
OcrTensor ocr_test_tensor(ocr_dtype_t dtype, int ndim, const int64_t *shape, const float *values);
#define OCR_SHAPE(...) ((const int64_t[]){__VA_ARGS__})

// Largest violation of |a − b| <= atol + rtol·|b| over n elements; returns 1 when all pass,
// else 0 and prints the first offending index and values with `what`.
int ocr_test_allclose_f32(const float *a, const float *b, int64_t n, double atol, double rtol, const char *what);
int ocr_test_allclose_f64(const float *a, const double *b, int64_t n, double atol, double rtol, const char *what);
// Relative error ‖a − b‖ / max(‖b‖, tiny), for gradient checks.
double ocr_test_rel_error(const float *a, const double *b, int64_t n);

// Central finite differences in double precision: grad[i] = (f(x + h e_i) − f(x − h e_i)) / 2h,
// where f evaluates the scalar loss of a double-precision reference at x (x is modified and
// restored). Typical h = 1e-6.
typedef double (*ocr_test_scalar_fn)(const double *x, void *ctx);
void ocr_test_numeric_grad(double *grad, double *x, int64_t n, ocr_test_scalar_fn f, void *ctx, double h);

// Temporary files and directories. The root is $TMPDIR, else /tmp; CTest gives every test the
// build's private Testing/tmp and fails build_tmp_clean when a test left anything there, so a
// test creates what it needs through these helpers and nothing is left behind.
const char *ocr_test_tmp_root(void);
// A fresh directory <root>/<prefix>XXXXXX (malloc'd path), removed with all it holds when the
// process that created it exits: a forked test removes its own, the runner (unchecked fixtures)
// its own, neither the other's.
char *ocr_test_tmpdir(const char *prefix);
// A fresh empty file <root>/<prefix>XXXXXX: its path into buf, an open read-write descriptor
// returned. The caller closes and unlinks it.
int ocr_test_tmpfile(char *buf, size_t cap, const char *prefix);
// rm -rf (does not follow symbolic links); 0 on success.
int ocr_test_remove_tree(const char *path);

// Unit roundoff of a dtype (2^-24 for f32, 2^-11 for f16, 2^-8 for bf16).
double ocr_test_dtype_eps(ocr_dtype_t dtype);

#endif

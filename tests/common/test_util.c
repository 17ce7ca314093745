#include "tests/common/test_util.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/rng.h"

int ocr_test_run_suite(Suite *s) {
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

const char *ocr_test_shared_path(const char *relative, char *buf, size_t bufsize) {
    const char *root = getenv("OCR_SHARED_DIR");
#ifdef OCR_SHARED_DIR
    if (!root) root = OCR_SHARED_DIR;
#endif
    if (!root) root = "../shared";
    snprintf(buf, bufsize, "%s/%s", root, relative);
    FILE *f = fopen(buf, "rb");
    if (!f) {
        // Directories cannot be fopen'd for reading everywhere; try a marker inside.
        char probe[4096];
        snprintf(probe, sizeof probe, "%s/.", buf);
        f = fopen(probe, "rb");
    }
    if (!f) {
        printf("SKIP: %s not found (the shared folder is absent or incomplete)\n", buf);
        return NULL;
    }
    fclose(f);
    return buf;
}

void ocr_test_fill_uniform(float *dst, int64_t n, uint64_t seed, float lo, float hi) {
    ocr_rng_fill_uniform(dst, (size_t)n, seed, 0x7e57, 0, lo, hi);
}

void ocr_test_fill_uniform_double(double *dst, int64_t n, uint64_t seed, double lo, double hi) {
    OcrRng r = ocr_rng_make(seed, 0x7e58);
    for (int64_t i = 0; i < n; i++) dst[i] = lo + (hi - lo) * ocr_rng_next_double(&r);
}

void ocr_test_poison(OcrTensor *t) {
    int64_t n = ocr_tensor_numel(t);
    if (ocr_dtype_is_float(t->dtype)) {
        for (int64_t i = 0; i < n; i++) ocr_tensor_set_f32(t, i, NAN);
    } else {
        memset(t->data, 0xAB, ocr_tensor_bytes(t));
    }
}

OcrTensor ocr_test_tensor(ocr_dtype_t dtype, int ndim, const int64_t *shape, const float *values) {
    OcrTensor t;
    ocr_status_t st = ocr_tensor_alloc(&t, dtype, ocr_cpu(), ndim, shape, OCR_MEM_ACTIVATIONS);
    ck_assert_msg(st == OCR_OK, "alloc: %s", ocr_last_error());
    if (values) {
        int64_t n = ocr_tensor_numel(&t);
        for (int64_t i = 0; i < n; i++) ocr_tensor_set_f32(&t, i, values[i]);
    } else {
        ocr_test_poison(&t);
    }
    return t;
}

int ocr_test_allclose_f32(const float *a, const float *b, int64_t n, double atol, double rtol, const char *what) {
    for (int64_t i = 0; i < n; i++) {
        double x = a[i], y = b[i];
        int both_nan = isnan(x) && isnan(y);
        int both_inf = isinf(x) && isinf(y) && ((x > 0) == (y > 0));
        if (both_nan || both_inf) continue;
        if (!(fabs(x - y) <= atol + rtol * fabs(y))) {
            printf("%s: mismatch at %lld: got %.9g expected %.9g (atol %g rtol %g)\n", what, (long long)i, x, y, atol,
                   rtol);
            return 0;
        }
    }
    return 1;
}

int ocr_test_allclose_f64(const float *a, const double *b, int64_t n, double atol, double rtol, const char *what) {
    for (int64_t i = 0; i < n; i++) {
        double x = a[i], y = b[i];
        if (!(fabs(x - y) <= atol + rtol * fabs(y))) {
            printf("%s: mismatch at %lld: got %.9g expected %.12g (atol %g rtol %g)\n", what, (long long)i, x, y, atol,
                   rtol);
            return 0;
        }
    }
    return 1;
}

double ocr_test_rel_error(const float *a, const double *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += b[i] * b[i];
    }
    return sqrt(num) / fmax(sqrt(den), 1e-30);
}

void ocr_test_numeric_grad(double *grad, double *x, int64_t n, ocr_test_scalar_fn f, void *ctx, double h) {
    for (int64_t i = 0; i < n; i++) {
        double saved = x[i];
        x[i] = saved + h;
        double fp = f(x, ctx);
        x[i] = saved - h;
        double fm = f(x, ctx);
        x[i] = saved;
        grad[i] = (fp - fm) / (2 * h);
    }
}

double ocr_test_dtype_eps(ocr_dtype_t dtype) {
    switch (dtype) {
        case OCR_F16: return ldexp(1.0, -11);
        case OCR_BF16: return ldexp(1.0, -8);
        default: return ldexp(1.0, -24);
    }
}

// ---- temporary files and directories ----------------------------------------------------------

const char *ocr_test_tmp_root(void) {
    const char *t = getenv("TMPDIR");
    return t && t[0] ? t : "/tmp";
}

int ocr_test_remove_tree(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return 0;
    int rc = 0;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        if (!d) return -1;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            size_t n = strlen(path) + strlen(e->d_name) + 2;
            char *sub = malloc(n);
            if (!sub) {
                rc = -1;
                continue;
            }
            snprintf(sub, n, "%s/%s", path, e->d_name);
            if (ocr_test_remove_tree(sub) != 0) rc = -1;
            free(sub);
        }
        closedir(d);
    }
    return remove(path) == 0 ? rc : -1;
}

// Directories to remove at exit, each with the process that created it.
#define TMP_MAX_DIRS 64
static struct {
    pid_t pid;
    char *path;
} tmp_dirs[TMP_MAX_DIRS];
static int tmp_ndirs = 0, tmp_registered = 0;

static void remove_own_tmpdirs(void) {
    pid_t me = getpid();
    for (int i = 0; i < tmp_ndirs; i++)
        if (tmp_dirs[i].pid == me && tmp_dirs[i].path) ocr_test_remove_tree(tmp_dirs[i].path);
}

char *ocr_test_tmpdir(const char *prefix) {
    size_t cap = strlen(ocr_test_tmp_root()) + strlen(prefix) + 16;
    char *t = malloc(cap);
    ck_assert_ptr_nonnull(t);
    snprintf(t, cap, "%s/%sXXXXXX", ocr_test_tmp_root(), prefix);
    ck_assert_msg(mkdtemp(t) != NULL, "cannot create a temporary directory %s", t);
    ck_assert_msg(tmp_ndirs < TMP_MAX_DIRS, "more than %d temporary directories in one test process", TMP_MAX_DIRS);
    if (!tmp_registered) {
        atexit(remove_own_tmpdirs);
        tmp_registered = 1;
    }
    tmp_dirs[tmp_ndirs].pid = getpid();
    tmp_dirs[tmp_ndirs].path = strdup(t);
    tmp_ndirs++;
    return t;
}

int ocr_test_tmpfile(char *buf, size_t cap, const char *prefix) {
    snprintf(buf, cap, "%s/%sXXXXXX", ocr_test_tmp_root(), prefix);
    int fd = mkstemp(buf);
    ck_assert_msg(fd >= 0, "cannot create a temporary file %s", buf);
    return fd;
}

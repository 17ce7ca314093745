// dropout (both Paddle modes) and drop path: exact masks against regenerated Philox draws,
// keep statistics, reproducibility, and backward against finite differences with the mask fixed.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/rng.h"
#include "kernels/ops.h"
#include "tests/common/test_util.h"

int ocr_cpu_vec_select(const char *name);  // kernels/cpu/cpu_common.h (test hook)

static DropoutParams params(float p, ocr_dropout_mode_t mode, int training, uint64_t seed, uint64_t stream,
                            uint64_t offset) {
    DropoutParams d = {p, mode, training, seed, stream, offset};
    return d;
}

// The factor the reference applies to element i (the mask is regenerated, not read back).
static double ref_factor(const DropoutParams *d, int64_t i) {
    int up = d->mode == OCR_DROPOUT_UPSCALE_IN_TRAIN;
    if (!d->training || d->p == 0.0f) return (!d->training && !up) ? 1.0 - d->p : 1.0;
    int keep = ocr_rng_uniform(d->seed, d->stream, d->offset + (uint64_t)i) >= d->p;
    return keep ? (up ? 1.0 / (1.0 - d->p) : 1.0) : 0.0;
}

static double ref_path_factor(const DropoutParams *d, int64_t n) {
    if (!d->training || d->p == 0.0f) return 1.0;
    return ocr_rng_uniform(d->seed, d->stream, d->offset + (uint64_t)n) >= d->p ? 1.0 / (1.0 - d->p) : 0.0;
}

// Forward of every mode/training combination on a tensor that spans several kernel chunks,
// with an offset that does not start on a Philox block.
START_TEST(test_dropout_forward_modes) {
    const int64_t n = 3 * 4096 + 37;
    float *xs = malloc((size_t)n * sizeof(float));
    float *got = malloc((size_t)n * sizeof(float));
    double *ref = malloc((size_t)n * sizeof(double));
    ocr_test_fill_uniform(xs, n, 5, -2.0f, 2.0f);
    const ocr_dtype_t dts[3][2] = {{OCR_F32, OCR_F32}, {OCR_F16, OCR_F16}, {OCR_BF16, OCR_F32}};
    for (int k = 0; k < 3; k++) {
        OcrTensor x = ocr_test_tensor(dts[k][0], 2, OCR_SHAPE(1, n), xs);
        OcrTensor y = ocr_test_tensor(dts[k][1], 2, OCR_SHAPE(1, n), NULL);
        for (int mode = 0; mode < 2; mode++) {
            for (int training = 0; training < 2; training++) {
                DropoutParams d = params(0.3f, (ocr_dropout_mode_t)mode, training, 1234, 7, 5);
                ocr_test_poison(&y);
                ocr_dropout_forward(&y, &x, d);
                ocr_tensor_to_f32(&y, got);
                int64_t kept = 0;
                for (int64_t i = 0; i < n; i++) {
                    double f = ref_factor(&d, i);
                    ref[i] = ocr_tensor_get_f32(&x, i) * f;
                    kept += f != 0.0;
                }
                char what[80];
                snprintf(what, sizeof what, "dropout %s->%s mode %d train %d", ocr_dtype_name(dts[k][0]),
                         ocr_dtype_name(dts[k][1]), mode, training);
                double eps = ocr_test_dtype_eps(dts[k][1]);
                ck_assert_msg(ocr_test_allclose_f64(got, ref, n, 0, 1.01 * eps + 3e-7, what), "%s", what);
                // Dropped entries are exactly zero, kept ones nonzero (inputs are nonzero).
                for (int64_t i = 0; i < n; i++)
                    ck_assert_msg((got[i] == 0.0f) == (ref[i] == 0.0), "%s: zero pattern at %lld", what, (long long)i);
                if (training) {
                    double frac = (double)kept / (double)n, sd = sqrt(0.3 * 0.7 / (double)n);
                    ck_assert_msg(fabs(frac - 0.7) < 5 * sd, "%s: keep fraction %g", what, frac);
                } else {
                    ck_assert_int_eq(kept, n);
                }
            }
        }
        ocr_tensor_free(&x);
        ocr_tensor_free(&y);
    }
    free(xs);
    free(got);
    free(ref);
}
END_TEST

// The mask is drawn in vector groups of OCR_PHILOX_LANES blocks between scalar heads and tails:
// at every vector level, for offsets on and off a group boundary and across the 2^32 carry of
// the block counter, each element keeps exactly when its own Philox draw says so.
START_TEST(test_dropout_mask_at_every_level) {
    static const char *const levels[3] = {"sse2", "avx2", "avx512"};
    const uint64_t offsets[5] = {0, 5, 63, 64 * 7, (1ull << 34) - 100};
    const int64_t n = 4096 + 131;
    float *xs = malloc((size_t)n * sizeof(float)), *got = malloc((size_t)n * sizeof(float));
    ocr_test_fill_uniform(xs, n, 9, 0.5f, 2.0f);
    // Infinities, NaNs and negative values: a dropped element is +0 whatever it held.
    for (int64_t i = 0; i < n; i += 97) xs[i] = INFINITY;
    for (int64_t i = 5; i < n; i += 89) xs[i] = NAN;
    for (int64_t i = 3; i < n; i += 7) xs[i] = -xs[i];
    OcrTensor x = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), xs);
    OcrTensor y = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), NULL);
    for (int lv = 0; lv < 3; lv++) {
        if (!ocr_cpu_vec_select(levels[lv])) {
            printf("dropout: this CPU has no %s; that level not checked\n", levels[lv]);
            continue;
        }
        for (int k = 0; k < 5; k++) {
            DropoutParams d = params(0.1f, OCR_DROPOUT_UPSCALE_IN_TRAIN, 1, 77, 3, offsets[k]);
            ocr_test_poison(&y);
            ocr_dropout_forward(&y, &x, d);
            ocr_tensor_to_f32(&y, got);
            for (int64_t i = 0; i < n; i++) {
                const float want = ref_factor(&d, i) != 0.0 ? xs[i] * (1.0f / 0.9f) : 0.0f;
                uint32_t gb, wb;
                memcpy(&gb, &got[i], sizeof gb);
                memcpy(&wb, &want, sizeof wb);
                ck_assert_msg(isnan(want) ? isnan(got[i]) : gb == wb, "%s, offset %llu, element %lld: %.9g, want %.9g",
                              levels[lv], (unsigned long long)offsets[k], (long long)i, got[i], want);
            }
        }
    }
    ocr_cpu_vec_select(NULL);
    ocr_tensor_free(&x);
    ocr_tensor_free(&y);
    free(xs);
    free(got);
}
END_TEST

// Keep fraction tracks 1 − p for several p; p = 0 is the identity and p = 1 drops everything.
START_TEST(test_dropout_statistics) {
    const int64_t n = 40000;
    OcrTensor x = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), NULL);
    OcrTensor y = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), NULL);
    ocr_tensor_fill(&x, 1.0f);
    const float ps[] = {0.0f, 0.1f, 0.5f, 0.9f, 1.0f};
    for (int k = 0; k < 5; k++) {
        for (int mode = 0; mode < 2; mode++) {
            float p = ps[k];
            ocr_dropout_forward(&y, &x, params(p, (ocr_dropout_mode_t)mode, 1, 99, 3, 0));
            const float *yd = y.data;
            int64_t kept = 0;
            double mean = 0;
            for (int64_t i = 0; i < n; i++) {
                kept += yd[i] != 0.0f;
                mean += yd[i];
            }
            mean /= (double)n;
            double frac = (double)kept / (double)n, sd = sqrt(p * (1 - p) / (double)n);
            ck_assert_msg(fabs(frac - (1 - p)) <= 5 * sd, "p %g mode %d: keep fraction %g", p, mode, frac);
            // Upscale keeps the expectation: E[y] = x = 1; downscale gives 1 − p.
            double want = mode == 0 ? (p < 1 ? 1.0 : 0.0) : 1.0 - p;
            double sd_mean = mode == 0 && p < 1 ? sqrt(p / (1 - p) / (double)n) : sd;
            ck_assert_msg(fabs(mean - want) <= 5 * sd_mean + 1e-9, "p %g mode %d: mean %g want %g", p, mode, mean,
                          want);
        }
    }
    ocr_tensor_free(&x);
    ocr_tensor_free(&y);
}
END_TEST

// Equal (seed, stream, offset) reproduces bit for bit; any change gives another mask; an
// offset of k shifts the mask by k elements.
START_TEST(test_dropout_reproducibility) {
    const int64_t n = 1000;
    OcrTensor x = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), NULL);
    ocr_tensor_fill(&x, 1.0f);
    OcrTensor a = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), NULL);
    OcrTensor b = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n), NULL);
    DropoutParams base = params(0.5f, OCR_DROPOUT_UPSCALE_IN_TRAIN, 1, 42, 9, 0);
    ocr_dropout_forward(&a, &x, base);
    ocr_dropout_forward(&b, &x, base);
    ck_assert(memcmp(a.data, b.data, (size_t)n * 4) == 0);

    DropoutParams other[3] = {base, base, base};
    other[0].seed = 43;
    other[1].stream = 10;
    other[2].offset = 1;
    for (int k = 0; k < 3; k++) {
        ocr_dropout_forward(&b, &x, other[k]);
        int64_t diff = 0;
        for (int64_t i = 0; i < n; i++) diff += ((float *)a.data)[i] != ((float *)b.data)[i];
        ck_assert_msg(diff > n / 4, "variant %d changed only %lld of %lld entries", k, (long long)diff, (long long)n);
    }
    DropoutParams shifted = base;
    shifted.offset = 13;
    ocr_dropout_forward(&b, &x, shifted);
    OcrTensor big = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n + 13), NULL);
    OcrTensor xbig = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(n + 13), NULL);
    ocr_tensor_fill(&xbig, 1.0f);
    ocr_dropout_forward(&big, &xbig, base);
    ck_assert(memcmp(b.data, (float *)big.data + 13, (size_t)n * 4) == 0);
    ocr_tensor_free(&x);
    ocr_tensor_free(&a);
    ocr_tensor_free(&b);
    ocr_tensor_free(&big);
    ocr_tensor_free(&xbig);
}
END_TEST

// ---- backward vs finite differences ------------------------------------------------------
#define GN 45
typedef struct {
    const double *dout;
    const DropoutParams *d;
    int path;  // 1: drop path on (5, 3, 3)
} LossCtx;

static double ref_loss(const double *x, void *vctx) {
    LossCtx *c = vctx;
    double L = 0;
    for (int i = 0; i < GN; i++) {
        double f = c->path ? ref_path_factor(c->d, i / 9) : ref_factor(c->d, i);
        L += c->dout[i] * x[i] * f;
    }
    return L;
}

static void check_backward(int path) {
    const ocr_dtype_t dts[3] = {OCR_F32, OCR_F16, OCR_BF16};
    for (int k = 0; k < 3; k++) {
        for (int mode = 0; mode < 2; mode++) {
            for (int training = 0; training < 2; training++) {
                DropoutParams d = params(0.4f, (ocr_dropout_mode_t)mode, training, 77 + k, 2, 3);
                float xs[GN], gs[GN];
                ocr_test_fill_uniform(xs, GN, 50 + k, -1, 1);
                ocr_test_fill_uniform(gs, GN, 60 + k, -1, 1);
                OcrTensor x = ocr_test_tensor(dts[k], 3, OCR_SHAPE(5, 3, 3), xs);
                OcrTensor dy = ocr_test_tensor(dts[k], 3, OCR_SHAPE(5, 3, 3), gs);
                OcrTensor dx = ocr_test_tensor(dts[k], 3, OCR_SHAPE(5, 3, 3), NULL);
                if (path)
                    ocr_droppath_backward(&dx, &dy, d);
                else
                    ocr_dropout_backward(&dx, &dy, d);
                double xd[GN], dyd[GN], num[GN];
                for (int i = 0; i < GN; i++) {
                    xd[i] = ocr_tensor_get_f32(&x, i);
                    dyd[i] = ocr_tensor_get_f32(&dy, i);
                }
                LossCtx ctx = {dyd, &d, path};
                ocr_test_numeric_grad(num, xd, GN, ref_loss, &ctx, 1e-6);
                float got[GN];
                ocr_tensor_to_f32(&dx, got);
                char what[80];
                snprintf(what, sizeof what, "%s backward %s mode %d train %d", path ? "droppath" : "dropout",
                         ocr_dtype_name(dts[k]), mode, training);
                ck_assert_msg(ocr_test_allclose_f64(got, num, GN, 1e-8, 1.01 * ocr_test_dtype_eps(dts[k]) + 3e-7, what),
                              "%s", what);
                ocr_tensor_free(&x);
                ocr_tensor_free(&dy);
                ocr_tensor_free(&dx);
            }
        }
    }
}

START_TEST(test_dropout_backward) { check_backward(0); }
END_TEST

START_TEST(test_droppath_backward) { check_backward(1); }
END_TEST

// Drop path: whole samples kept (scaled by 1/(1 − p) in both modes) or zeroed, sample n drawn
// at offset + n, keep fraction ≈ 1 − p; identity in inference.
START_TEST(test_droppath_forward) {
    const int64_t N = 2000, per = 6;
    float *xs = malloc((size_t)(N * per) * sizeof(float));
    ocr_test_fill_uniform(xs, N * per, 8, 0.5f, 1.5f);
    OcrTensor x = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(N, 3, 2), xs);
    OcrTensor y = ocr_test_tensor(OCR_BF16, 3, OCR_SHAPE(N, 3, 2), NULL);
    for (int mode = 0; mode < 2; mode++) {
        DropoutParams d = params(0.25f, (ocr_dropout_mode_t)mode, 1, 5, 11, 1001);
        ocr_test_poison(&y);
        ocr_droppath_forward(&y, &x, d);
        int64_t kept = 0;
        for (int64_t n = 0; n < N; n++) {
            double f = ref_path_factor(&d, n);
            kept += f != 0;
            for (int64_t i = 0; i < per; i++) {
                double want = xs[n * per + i] * f;
                double got = ocr_tensor_get_f32(&y, n * per + i);
                ck_assert_msg(fabs(got - want) <= fabs(want) * ocr_test_dtype_eps(OCR_BF16) * 1.01,
                              "droppath sample %lld elem %lld: got %g want %g", (long long)n, (long long)i, got, want);
            }
        }
        double frac = (double)kept / (double)N, sd = sqrt(0.25 * 0.75 / (double)N);
        ck_assert_msg(fabs(frac - 0.75) < 5 * sd, "droppath keep fraction %g", frac);
        d.training = 0;
        ocr_droppath_forward(&y, &x, d);
        for (int64_t i = 0; i < N * per; i++)
            ck_assert(ocr_tensor_get_f32(&y, i) == ocr_bf16_to_f32(ocr_f32_to_bf16(xs[i])));
    }
    // Reproducible with equal parameters, different with another seed.
    OcrTensor z = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(N, 3, 2), NULL);
    OcrTensor w = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(N, 3, 2), NULL);
    DropoutParams d = params(0.5f, OCR_DROPOUT_UPSCALE_IN_TRAIN, 1, 6, 1, 0);
    ocr_droppath_forward(&z, &x, d);
    ocr_droppath_forward(&w, &x, d);
    ck_assert(memcmp(z.data, w.data, (size_t)(N * per) * 4) == 0);
    d.seed = 7;
    ocr_droppath_forward(&w, &x, d);
    ck_assert(memcmp(z.data, w.data, (size_t)(N * per) * 4) != 0);
    free(xs);
    ocr_tensor_free(&x);
    ocr_tensor_free(&y);
    ocr_tensor_free(&z);
    ocr_tensor_free(&w);
}
END_TEST

int main(void) {
    Suite *s = suite_create("kernels_dropout");
    TCase *tc = tcase_create("dropout");
    tcase_add_test(tc, test_dropout_forward_modes);
    tcase_add_test(tc, test_dropout_mask_at_every_level);
    tcase_add_test(tc, test_dropout_statistics);
    tcase_add_test(tc, test_dropout_reproducibility);
    tcase_add_test(tc, test_dropout_backward);
    tcase_add_test(tc, test_droppath_forward);
    tcase_add_test(tc, test_droppath_backward);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

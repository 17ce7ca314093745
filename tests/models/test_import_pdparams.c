// PaddleOCR .pdparams checkpoints (the pickle reader itself: tests/core/test_pickle.c): the name
// mapping and loading report on the shared PaddleOCR checkpoints, and the committed PP-OCRv4
// training-form fixture (tests/models/data/ppocrv4_small.*, made by
// tools/make_pdparams_fixture.py with paddlepaddle and PaddleOCR's model code): the network is
// recognised from the tensors, all 888 tensors load, and the eval-mode logits and
// probabilities match Paddle's — also after fusing the rep layers into the deploy form.
#include "core/fileio.h"
#include "kernels/backend.h"
#include "models/pdparams.h"
#include "tests/models/model_test_util.h"

// ---- the shared PaddleOCR checkpoints ------------------------------------------------------------

START_TEST(test_shared_v3) {
    char ctc[1024], mh[1024];
    if (!ocr_test_shared_path("models/ppocrv3_paddle/v3_en_ctc_paddle_150steps.pdparams", ctc, sizeof ctc)) return;
    ck_assert(ocr_test_shared_path("models/ppocrv3_paddle/v3_en_multihead_ctc_sar_REDUCED_enc64_dk64_4steps.pdparams", mh,
                                   sizeof mh));
    OcrPdparams *p;
    ck_assert_msg(ocr_pdparams_load(&p, ctc) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(p->count, 196);  // paddleocr_formats.md §1.1: 196 arrays + the name map
    ck_assert_int_eq(p->nother, 1);
    ck_assert_str_eq(p->other[0], "StructuredToParameterName@@ (dict)");
    OcrArch arch;
    char desc[300];
    ck_assert_msg(ocr_pdparams_arch(p, &arch, desc, sizeof desc) == OCR_OK, "%s", ocr_last_error());
    ck_assert(arch.backbone == OCR_BACKBONE_MV1E && arch.mv1e.scale == 0.5 && arch.num_classes == 97);
    ck_assert(arch.neck_svtr && arch.neck.dims == 64 && arch.neck.hidden == 120 && arch.neck.depth == 2);
    OcrModel *m;
    ck_assert(ocr_model_create(&m, &arch) == OCR_OK);
    OcrPdLoadReport r;
    ck_assert(ocr_pdparams_load_into(m, p, &r) == OCR_OK);
    ck_assert_int_eq(r.loaded, 196);
    ck_assert_int_eq(r.missing + r.unexpected + r.shape_mismatch + r.guidance, 0);
    ck_assert_int_eq(r.other, 1);
    // Paddle's OIHW conv weight lands transposed; BN statistics in the statistics table.
    const OcrPdTensor *w = ocr_pdparams_find(p, "neck.encoder.conv1.conv.weight");  // (64, 512, 3, 3)
    OcrParamTable *pt = ocr_model_params(m), *stt = ocr_model_stats(m);
    OcrTensor ours = ocr_params_tensor(pt, ocr_params_find(pt, "neck.encoder.conv1.conv.weight"));
    ck_assert(ocr_tensor_get_f32(&ours, ((7 * 3 + 2) * 3 + 1) * 512 + 300) == w->f32[((7 * 512 + 300) * 3 + 2) * 3 + 1]);
    OcrTensor mean = ocr_params_tensor(stt, ocr_params_find(stt, "backbone.block_list.3._pointwise_conv._batch_norm._mean"));
    ck_assert(ocr_tensor_get_f32(&mean, 5) == ocr_pdparams_find(p, "backbone.block_list.3._pointwise_conv._batch_norm._mean")->f32[5]);
    ocr_pdparams_report_free(&r);
    // The prefix form Global.pretrained_model takes ("x" for x.pdparams) loads the same.
    char prefix[1024];
    snprintf(prefix, sizeof prefix, "%.*s", (int)(strlen(ctc) - strlen(".pdparams")), ctc);
    ck_assert_msg(ocr_pdparams_load_model(m, prefix, &r) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(r.loaded, 196);
    ocr_pdparams_report_free(&r);
    // Into a network of another architecture: nothing fits, and the report says what first.
    OcrArch v4;
    ocr_arch_ppocrv4_deploy(&v4, 97);
    OcrModel *other;
    ck_assert(ocr_model_create(&other, &v4) == OCR_OK);
    ck_assert(ocr_pdparams_load_into(other, p, &r) == OCR_OK);
    // Every file tensor is accounted for: loaded (the SVTR blocks, same names and shapes at hidden
    // 120), not in the model (the backbone's names differ), or of another shape (head.fc: 64 vs 120).
    ck_assert_int_eq(r.loaded + r.unexpected + r.shape_mismatch, 196);
    ck_assert_int_eq(r.n_not_loaded, r.unexpected + r.shape_mismatch);
    ck_assert_int_gt(r.shape_mismatch, 0);
    ck_assert_int_eq(r.missing, ocr_model_params(other)->count + ocr_model_stats(other)->count - r.loaded);
    ck_assert_str_eq(r.first_unexpected, "backbone.conv1._conv.weight");
    ck_assert_str_eq(r.first_missing, "backbone.conv1.conv.weight");
    ocr_pdparams_report_free(&r);
    ocr_model_free(other);
    ocr_pdparams_free(p);

    // MultiHead (CTC + SAR): the CTC branch loads into the CTC network, every SAR tensor is
    // counted and listed as not loaded.
    ck_assert_msg(ocr_pdparams_load(&p, mh) == OCR_OK, "%s", ocr_last_error());
    int sar = 0;
    for (int i = 0; i < p->count; i++) sar += strncmp(p->tensors[i].name, "head.sar_head.", 14) == 0;
    ck_assert_int_gt(sar, 0);
    ck_assert_msg(ocr_pdparams_arch(p, &arch, desc, sizeof desc) == OCR_OK, "%s", ocr_last_error());
    ck_assert(strstr(desc, "MultiHead"));
    ck_assert(ocr_pdparams_load_into(m, p, &r) == OCR_OK);
    ck_assert_int_eq(r.loaded, 196);
    ck_assert_int_eq(r.guidance, sar);
    ck_assert_int_eq(r.missing + r.unexpected + r.shape_mismatch, 0);
    ck_assert_int_eq(r.n_not_loaded, sar);
    ck_assert(strstr(r.not_loaded[0], "head.sar_head.") && strstr(r.not_loaded[0], "guidance"));
    OcrTensor fc = ocr_params_tensor(pt, ocr_params_find(pt, "head.fc.bias"));
    ck_assert(ocr_tensor_get_f32(&fc, 11) == ocr_pdparams_find(p, "head.ctc_head.fc.bias")->f32[11]);
    ocr_pdparams_report_free(&r);
    ocr_pdparams_free(p);
    ocr_model_free(m);
    char mapped[256];
    ck_assert_int_eq(ocr_pdparams_map_name("head.ctc_encoder.encoder.conv1.conv.weight", mapped, sizeof mapped), OCR_PD_MAPPED);
    ck_assert_str_eq(mapped, "neck.encoder.conv1.conv.weight");
    ck_assert_int_eq(ocr_pdparams_map_name("head.gtc_head.embedding.embedding.weight", mapped, sizeof mapped), OCR_PD_GUIDANCE);
}
END_TEST

// ---- the PP-OCRv4 training-form fixture ---------------------------------------------------------------

static float *read_data(const char *name, int64_t expect) {
    char path[1024], *data;
    size_t size;
    snprintf(path, sizeof path, "%s/tests/models/data/%s", OCR_SOURCE_DIR, name);
    ck_assert_msg(ocr_read_file(path, &data, &size) == OCR_OK, "%s", ocr_last_error());
    ck_assert_msg(size == (size_t)expect * 4, "%s: %zu bytes, expected %lld floats", name, size, (long long)expect);
    return (float *)data;
}

// Both sides compute in fp32 with different summation orders (Paddle's oneDNN-free CPU
// kernels vs ours); the budget is the one models_parity uses for onnxruntime against the same
// kind of network: probabilities within 1e-4, logits within 1e-3 of max |logit| (the fixture's
// logits reach about 8). The fused (deploy) form folds BN into the conv weights, one more
// rounding per weight, inside the same budget.
static void compare(OcrModel *m, const float *x_nchw, const float *logits, const float *probs, int B, int H, int W, int T,
                    int C, const char *what) {
    OcrTensor x;
    ck_assert(ocr_tensor_alloc(&x, OCR_F32, ocr_cpu(), 4, (int64_t[]){B, H, W, 3}, OCR_MEM_DATA) == OCR_OK);
    float *xd = x.data;
    for (int b = 0; b < B; b++)
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < H; y++)
                for (int q = 0; q < W; q++) xd[(((int64_t)b * H + y) * W + q) * 3 + c] = x_nchw[(((int64_t)b * 3 + c) * H + y) * W + q];
    ck_assert_msg(ocr_model_forward(m, &x, 0) == OCR_OK, "%s", ocr_last_error());
    const OcrTensor *lg = ocr_model_logits(m), *pr = ocr_model_probs(m);
    ck_assert(lg->ndim == 3 && lg->shape[0] == B && lg->shape[1] == T && lg->shape[2] == C);
    float *gl = tm_copy_f32(lg), *gp = tm_copy_f32(pr);
    double amax = tm_max_abs(logits, (int64_t)B * T * C), dl = 0, dp = 0;
    int argmax_diff = 0;
    for (int64_t i = 0; i < (int64_t)B * T * C; i++) {
        dl = fmax(dl, fabs((double)gl[i] - logits[i]));
        dp = fmax(dp, fabs((double)gp[i] - probs[i]));
    }
    for (int64_t s = 0; s < (int64_t)B * T; s++) {
        int a = 0, r = 0;
        for (int c = 1; c < C; c++) {
            if (gl[s * C + c] > gl[s * C + a]) a = c;
            if (logits[s * C + c] > logits[s * C + r]) r = c;
        }
        argmax_diff += a != r;
    }
    printf("  %s: max |logit diff| %.3g (max |logit| %.3g), max |prob diff| %.3g, argmax differences %d of %d\n", what, dl,
           amax, dp, argmax_diff, B * T);
    ck_assert_msg(dl <= 1e-3 * amax, "%s: logits differ by %g", what, dl);
    ck_assert_msg(dp <= 1e-4, "%s: probabilities differ by %g", what, dp);
    ck_assert_int_eq(argmax_diff, 0);
    free(gl);
    free(gp);
    ocr_tensor_free(&x);
}

START_TEST(test_v4_fixture) {
    enum { B = 2, H = 48, W = 128, T = 16, C = 97 };
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/models/data/ppocrv4_small.pdparams", OCR_SOURCE_DIR);
    OcrPdparams *p;
    ck_assert_msg(ocr_pdparams_load(&p, path) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(p->count, 888);
    OcrArch arch;
    char desc[300];
    ck_assert_msg(ocr_pdparams_arch(p, &arch, desc, sizeof desc) == OCR_OK, "%s", ocr_last_error());
    printf("  %s\n", desc);
    ck_assert(arch.backbone == OCR_BACKBONE_LCNETV3 && !arch.lcnet.deploy && arch.lcnet.conv_kxk_num == 4);
    ck_assert(arch.lcnet.scale == 0.35 && arch.num_classes == C);
    ck_assert(arch.neck.dims == 64 && arch.neck.hidden == 64 && arch.neck.kernel[0] == 1 && arch.neck.kernel[1] == 3);
    OcrModel *m;
    ck_assert(ocr_model_create(&m, &arch) == OCR_OK);
    OcrPdLoadReport r;
    ck_assert(ocr_pdparams_load_into(m, p, &r) == OCR_OK);
    ck_assert_int_eq(r.loaded, 888);
    ck_assert_int_eq(r.missing + r.unexpected + r.shape_mismatch + r.guidance, 0);
    ck_assert_int_eq(r.loaded, ocr_model_params(m)->count + ocr_model_stats(m)->count);
    ocr_pdparams_report_free(&r);
    ocr_pdparams_free(p);
    float *x = read_data("ppocrv4_small.input.f32", (int64_t)B * 3 * H * W);
    float *logits = read_data("ppocrv4_small.logits.f32", (int64_t)B * T * C);
    float *probs = read_data("ppocrv4_small.probs.f32", (int64_t)B * T * C);
    compare(m, x, logits, probs, B, H, W, T, C, "training form");
    OcrModel *deploy;
    ck_assert_msg(ocr_model_fuse(&deploy, m) == OCR_OK, "%s", ocr_last_error());
    compare(deploy, x, logits, probs, B, H, W, T, C, "fused (deploy) form");
    ocr_model_free(deploy);
    ocr_model_free(m);
    free(x);
    free(logits);
    free(probs);
}
END_TEST

int main(void) {
    ocr_backends_init(1);
    Suite *s = suite_create("import_pdparams");
    TCase *tc = tcase_create("pdparams");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_shared_v3);
    tcase_add_test(tc, test_v4_fixture);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

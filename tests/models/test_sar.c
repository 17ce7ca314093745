// The SAR guidance branch of PaddleOCR's MultiHead (PP-OCRv3 en; models/svtr/sar.h):
// - PaddleOCR's REDUCED MultiHead CTC + SAR checkpoint (/work/shared) loads strictly into the
//   model its .yml describes: every tensor loaded, the duplicated LSTM keys matched to the
//   first copy, nothing missing;
// - parity with PaddleOCR's SARHead + SARLoss (tests/models/data/sar, tools/make_sar_golden.py):
//   the logits, the loss and the gradients of the map and of eleven parameters, from the same
//   weights, map, labels and valid ratios (one of them, 0.4·40 = 16, on a ceil boundary);
// - label_sar from the CTC labels (BOS = EOS = C, PAD = C + 1, targets shifted by one) and its
//   errors; SARHead's config keys and their errors.
//
// Tolerances. Both sides compute in fp32 and differ in summation order only. The longest sum on
// the way to any compared value is the 3×3 key convolution's, 9·C = 4608 products, so each
// value may differ by up to 4608·u (u = 2^-24) of the magnitudes being summed; the comparison
// allows 4608·u of the largest |reference| value of the tensor (the worst-case bound of one such
// sum, which also covers the shorter sums of the LSTMs, the softmax and the prediction).
#include <math.h>

#include "amp/policy.h"
#include "core/config.h"
#include "core/fileio.h"
#include "kernels/ops.h"
#include "models/arena.h"
#include "models/pdparams.h"
#include "models/svtr/multihead.h"
#include "tests/models/model_test_util.h"

#define REDUCED "models/ppocrv3_paddle/v3_en_multihead_ctc_sar_REDUCED_enc64_dk64_4steps"
#define NB 3
#define NC 512
#define NW 40
#define NL 25
#define NE 64
#define NK 64
#define NCLS 99  // SARLabelDecode: 97 CTC classes + 2
#define TOL_REL (4608.0 / 16777216.0)

static const float kValid[NB] = {1.0f, 0.4f, 0.73f};
static const int kLen[NB] = {5, 1, 23};

static int ctc_id(int b, int k) {
    static const int s0[5] = {5, 17, 33, 2, 96};
    if (b == 0) return s0[k];
    if (b == 1) return 61;
    return (7 * k + 3) % 96 + 1;
}

// OcrModel of the REDUCED checkpoint's .yml (the dictionary from configs/dicts), or NULL when
// the shared folder is absent.
static OcrModel *reduced_model(const char *yml) {
    OcrConfig *cfg;
    ck_assert_msg(ocr_config_load(&cfg, yml) == OCR_OK, "%s", ocr_last_error());
    char dict[1200];
    snprintf(dict, sizeof dict, "Global.character_dict_path=%s/configs/dicts/en_dict.txt", OCR_SOURCE_DIR);
    ck_assert_msg(ocr_config_apply_override(cfg, dict) == OCR_OK, "%s", ocr_last_error());
    OcrModel *m;
    ck_assert_msg(ocr_model_from_config(&m, cfg) == OCR_OK, "%s", ocr_last_error());
    ocr_config_free(cfg);
    return m;
}

START_TEST(test_reduced_checkpoint_loads_strictly) {
    char yml[1024], pd[1024];
    if (!ocr_test_shared_path(REDUCED ".yml", yml, sizeof yml)) return;
    ck_assert(ocr_test_shared_path(REDUCED ".pdparams", pd, sizeof pd));
    OcrModel *m = reduced_model(yml);
    const OcrArch *a = ocr_model_arch(m);
    ck_assert_int_eq(a->multihead.kind, OCR_GUIDE_SAR);
    ck_assert_int_eq(a->multihead.sar_enc_dim, NE);
    ck_assert_int_eq(a->multihead.sar_d_k, NK);
    ck_assert_int_eq(a->num_classes, 97);
    OcrPdparams *p;
    ck_assert_msg(ocr_pdparams_load(&p, pd) == OCR_OK, "%s", ocr_last_error());
    OcrPdLoadReport r;
    ck_assert_msg(ocr_pdparams_load_into(m, p, &r) == OCR_OK, "%s", ocr_last_error());
    for (int i = 0; i < r.n_not_loaded; i++) printf("not loaded: %s\n", r.not_loaded[i]);
    for (int i = 0; i < r.n_missing_names; i++) printf("missing: %s\n", r.missing_names[i]);
    // Two LSTMs of two layers, four tensors each, listed twice by Paddle.
    ck_assert_int_eq(r.aliases, 16);
    ck_assert_int_eq(r.loaded + r.aliases, p->count);
    ck_assert_int_eq(r.missing + r.unexpected + r.shape_mismatch + r.guidance + r.n_not_loaded, 0);
    OcrParamTable *pt = ocr_model_params(m), *st = ocr_model_stats(m);
    ck_assert_int_eq(r.loaded, pt->count + st->count);
    // The key conv lands transposed (OC, C, 3, 3) -> (OC, 3, 3, C); an LSTM weight as it is.
    const OcrPdTensor *w = ocr_pdparams_find(p, "head.sar_head.decoder.conv3x3_1.weight");
    OcrTensor ours = ocr_params_tensor(pt, ocr_params_find(pt, "head.sar_head.decoder.conv3x3_1.weight"));
    ck_assert(ocr_tensor_get_f32(&ours, ((7 * 3 + 2) * 3 + 1) * NC + 300) == w->f32[((7 * NC + 300) * 3 + 2) * 3 + 1]);
    const OcrPdTensor *l = ocr_pdparams_find(p, "head.sar_head.decoder.rnn_decoder.1.cell.weight_hh");
    OcrTensor lw = ocr_params_tensor(pt, ocr_params_find(pt, "head.sar_head.decoder.rnn_decoder.weight_hh_l1"));
    ck_assert(ocr_tensor_get_f32(&lw, 4321) == l->f32[4321]);
    ocr_pdparams_report_free(&r);
    // A copy that disagrees with the first is reported, not taken.
    OcrPdTensor *dup = NULL;
    for (int i = 0; i < p->count; i++)
        if (strcmp(p->tensors[i].name, "head.sar_head.encoder.rnn_encoder.0.cell.bias_hh") == 0) dup = &p->tensors[i];
    ck_assert_ptr_nonnull(dup);
    dup->f32[3] += 1.0f;
    ck_assert(ocr_pdparams_load_into(m, p, &r) == OCR_OK);
    ck_assert_int_eq(r.n_not_loaded, 1);
    ck_assert_msg(strstr(r.not_loaded[0], "rnn_encoder.0.cell.bias_hh") && strstr(r.not_loaded[0], "differs"), "%s",
                  r.not_loaded[0]);
    ocr_pdparams_report_free(&r);
    ocr_pdparams_free(p);
    ocr_model_free(m);
}
END_TEST

static float *read_golden(const char *name, int64_t expect) {
    char path[1024], *data;
    size_t size;
    snprintf(path, sizeof path, "%s/tests/models/data/sar/%s", OCR_SOURCE_DIR, name);
    ck_assert_msg(ocr_read_file(path, &data, &size) == OCR_OK, "%s", ocr_last_error());
    ck_assert_msg(size == (size_t)expect * 4, "%s: %zu bytes, expected %lld floats", name, size, (long long)expect);
    return (float *)data;
}

// scale_floor: the magnitude to take when the reference is 0 up to rounding (see the score bias).
static void compare_scaled(const char *what, const float *got, const float *ref, int64_t n, double scale_floor) {
    double scale = fmax(tm_max_abs(ref, n), scale_floor), d = tm_max_diff(got, ref, n), tol = TOL_REL * scale;
    printf("%-40s max |ref| %.4g  max |diff| %.3g  (%.3g of |ref|, tolerance %.3g)\n", what, scale, d, d / scale,
           TOL_REL);
    ck_assert_msg(scale > 0 && d <= tol, "%s: max |diff| %g > %g", what, d, tol);
}
static void compare(const char *what, const float *got, const float *ref, int64_t n) {
    compare_scaled(what, got, ref, n, 0.0);
}

// One plan-then-run training pass of a standalone SAR head: forward, SARLoss, backward.
typedef struct {
    OcrParamTable params, stats;
    OcrOpTable ops;
    OcrArena arena;
    OcrCtx c;
    SarHead h;
    float loss;
    float *logits, *dx;
} Head;

static void pass(Head *s, const OcrTensor *x, const OcrTensor *tokens, const int32_t *targets) {
    OcrCtx *c = &s->c;
    OcrTensor *lg = sar_forward(c, &s->h, x, tokens, kValid);
    OcrTensor dl = ocr_ctx_like(c, lg);
    if (!c->plan) {
        const int64_t n = ocr_tensor_numel(lg);
        s->logits = tm_copy_f32(lg);
        OcrTensor t = ocr_tensor_view((void *)targets, OCR_I32, ocr_cpu(), 1, (int64_t[]){NB * NL});
        OcrTensor l1 = ocr_tensor_view(&s->loss, OCR_F32, ocr_cpu(), 1, (int64_t[]){1});
        OcrTensor flat = ocr_tensor_reshape(lg, 2, (int64_t[]){n / (NCLS - 1), NCLS - 1});
        OcrTensor dflat = ocr_tensor_reshape(&dl, 2, (int64_t[]){n / (NCLS - 1), NCLS - 1});
        CrossEntropyParams p = {0.0f, NCLS - 1, 1.0f};
        ocr_cross_entropy_forward(NULL, &l1, NULL, &flat, &t, p);
        ocr_cross_entropy_backward(&dflat, &flat, &t, p);
    }
    OcrTensor dx = sar_backward(c, &s->h, &dl);
    ocr_ctx_free(c, &dl);
    if (!c->plan) s->dx = tm_copy_f32(&dx);
    ocr_ctx_free(c, &dx);
}

START_TEST(test_parity_with_paddleocr) {
    char yml[1024], pd[1024];
    if (!ocr_test_shared_path(REDUCED ".yml", yml, sizeof yml)) return;
    ck_assert(ocr_test_shared_path(REDUCED ".pdparams", pd, sizeof pd));
    // The checkpoint's weights, through the model's strict load.
    OcrModel *m = reduced_model(yml);
    OcrPdLoadReport r;
    ck_assert_msg(ocr_pdparams_load_model(m, pd, &r) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(r.missing + r.n_not_loaded, 0);
    ocr_pdparams_report_free(&r);
    // The head alone, fed the golden map, with the model's SAR tensors.
    Head *s = calloc(1, sizeof *s);
    ocr_params_init_table(&s->params, OCR_MEM_PARAMS);
    ocr_params_init_table(&s->stats, OCR_MEM_PARAMS);
    OcrBuilder b = {&s->params, &s->stats, &s->ops};
    SarSpec spec = {.in_channels = NC, .enc_dim = NE, .d_k = NK, .classes = NCLS, .max_len = NL, .enc_drop = 0.0f,
                    .pred_drop = 0.0f};
    sar_build(&b, &s->h, "head.sar_head", spec);
    ck_assert(ocr_params_alloc(&s->params, 1) == OCR_OK);
    ck_assert(ocr_params_alloc_grads(&s->params) == OCR_OK);
    ocr_params_zero_grads(&s->params);
    OcrParamTable *mp = ocr_model_params(m);
    for (int i = 0; i < s->params.count; i++) {
        int j = ocr_params_find(mp, s->params.items[i].name);
        ck_assert_msg(j >= 0, "%s not in the model", s->params.items[i].name);
        OcrTensor src = ocr_params_tensor(mp, j), dst = ocr_params_tensor(&s->params, i);
        ck_assert(ocr_tensor_bytes(&src) == ocr_tensor_bytes(&dst));
        memcpy(dst.data, src.data, ocr_tensor_bytes(&src));
    }
    // x[b, 0, w, c] (NHWC) as tools/make_sar_golden.py computes it; label_sar time-major.
    OcrTensor x;
    ck_assert(ocr_tensor_alloc(&x, OCR_F32, ocr_cpu(), 4, OCR_SHAPE(NB, 1, NW, NC), OCR_MEM_ACTIVATIONS) == OCR_OK);
    float *xv = x.data;
    for (int bb = 0; bb < NB; bb++)
        for (int c = 0; c < NC; c++)
            for (int w = 0; w < NW; w++)
                xv[((int64_t)bb * NW + w) * NC + c] =
                    (float)(0.5 * sin(0.37 * c + 1.3 * w + 2.1 * bb) + 0.25 * cos(0.11 * c * w + bb));
    int32_t lab[NB][NL], targets[NB * NL];
    for (int bb = 0; bb < NB; bb++) {
        lab[bb][0] = 97;
        for (int k = 0; k < kLen[bb]; k++) lab[bb][1 + k] = ctc_id(bb, k) - 1;
        lab[bb][1 + kLen[bb]] = 97;
        for (int k = kLen[bb] + 2; k < NL; k++) lab[bb][k] = 98;
        for (int k = 0; k < NL; k++) targets[bb * NL + k] = k + 1 < NL ? lab[bb][k + 1] : 98;
    }
    OcrTensor tok;
    ck_assert(ocr_tensor_alloc(&tok, OCR_I32, ocr_cpu(), 2, OCR_SHAPE(NL, NB), OCR_MEM_ACTIVATIONS) == OCR_OK);
    for (int k = 0; k < NL; k++)
        for (int bb = 0; bb < NB; bb++) ((int32_t *)tok.data)[k * NB + bb] = lab[bb][k];
    s->arena.device = ocr_cpu();
    OcrCtx *c = &s->c;
    c->params = &s->params;
    c->stats = &s->stats;
    c->ops = &s->ops;
    c->arena = &s->arena;
    c->training = 1;
    c->seed = 1;
    c->bn_momentum = -1.0f;
    ocr_arena_begin_plan(&s->arena);
    c->plan = 1;
    pass(s, &x, &tok, targets);
    ck_assert_int_eq(s->arena.live, 0);  // the backward frees everything the forward saved
    size_t peak = s->arena.peak;
    ck_assert(ocr_arena_begin_run(&s->arena, peak) == OCR_OK);
    c->plan = 0;
    pass(s, &x, &tok, targets);
    ck_assert_int_eq(s->arena.live, 0);
    // Against PaddleOCR.
    char *idx;
    size_t size;
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/models/data/sar/index.json", OCR_SOURCE_DIR);
    ck_assert(ocr_read_file(path, &idx, &size) == OCR_OK);
    const char *lk = strstr(idx, "\"loss\":");
    ck_assert_ptr_nonnull(lk);
    const double ref_loss = atof(lk + 7);
    free(idx);
    printf("SARLoss: ours %.9g, PaddleOCR %.9g\n", s->loss, ref_loss);
    ck_assert_msg(fabs(s->loss - ref_loss) <= TOL_REL * ref_loss, "loss %g vs %g", s->loss, ref_loss);
    float *ref = read_golden("logits.f32", NB * NL * (NCLS - 1));
    compare("logits", s->logits, ref, NB * NL * (NCLS - 1));
    free(ref);
    ref = read_golden("dx.f32", NB * NW * NC);
    compare("d map", s->dx, ref, NB * NW * NC);
    free(ref);
    static const char *const grads[] = {"decoder.conv3x3_1.bias", "decoder.conv1x1_2.weight", "decoder.conv1x1_2.bias",
                                        "decoder.conv1x1_1.weight", "decoder.prediction.bias", "decoder.embedding.weight",
                                        "decoder.rnn_decoder.weight_ih_l1", "decoder.rnn_decoder.bias_hh_l0",
                                        "encoder.linear.weight", "encoder.rnn_encoder.weight_hh_l0",
                                        "encoder.rnn_encoder.bias_ih_l1", NULL};
    double w_scale = 0.0;  // max |d conv1x1_2.weight| (compared before the bias)
    for (int g = 0; grads[g]; g++) {
        char name[256], file[300];
        snprintf(name, sizeof name, "head.sar_head.%s", grads[g]);
        snprintf(file, sizeof file, "grad.%s.f32", grads[g]);
        int i = ocr_params_find(&s->params, name);
        ck_assert_msg(i >= 0, "%s", name);
        OcrTensor gt = ocr_params_grad(&s->params, i);
        const int64_t n = ocr_tensor_numel(&gt);
        ref = read_golden(file, n);
        if (strcmp(grads[g], "decoder.conv1x1_2.bias") == 0) {
            // A constant added to every score leaves the softmax unchanged: this gradient is 0 and
            // both sides hold rounding noise of Σ ds (ds: the scores' gradient). The weight's
            // gradient Σ ds·tanh(·) sums the same terms with factors |tanh| <= 1: its magnitude
            // is the scale of that noise.
            compare_scaled(name, gt.data, ref, n, w_scale);
        } else {
            compare(name, gt.data, ref, n);
        }
        if (strcmp(grads[g], "decoder.conv1x1_2.weight") == 0) w_scale = tm_max_abs(ref, n);
        free(ref);
    }
    free(s->logits);
    free(s->dx);
    ocr_tensor_free(&x);
    ocr_tensor_free(&tok);
    sar_free(&s->h);
    ocr_arena_release(&s->arena);
    ocr_params_free(&s->params);
    ocr_params_free(&s->stats);
    ocr_ops_free(&s->ops);
    free(s);
    ocr_model_free(m);
}
END_TEST

START_TEST(test_valid_steps) {
    // PaddleOCR: min(n, ceil(vr · n)) in float32.
    ck_assert_int_eq(sar_valid_steps(1.0f, 40), 40);
    ck_assert_int_eq(sar_valid_steps(0.4f, 40), 16);   // 0.4f·40 rounds to 16 exactly
    ck_assert_int_eq(sar_valid_steps(0.73f, 40), 30);  // 29.2
    ck_assert_int_eq(sar_valid_steps(0.01f, 40), 1);
    ck_assert_int_eq(sar_valid_steps(0.025f, 40), 1);
}
END_TEST

// label_sar and the targets from CTC labels, through the guidance head's own staging.
START_TEST(test_label_sar) {
    OcrParamTable params, stats;
    OcrOpTable ops = {0};
    ocr_params_init_table(&params, OCR_MEM_PARAMS);
    ocr_params_init_table(&stats, OCR_MEM_PARAMS);
    OcrBuilder b = {&params, &stats, &ops};
    MultiHeadSpec ms = {0};
    ms.kind = OCR_GUIDE_SAR;
    ms.steps = 5;  // max_text_length 6
    ms.sar_enc_dim = 8;
    ms.sar_d_k = 4;
    GuideHead g;
    guide_build(&b, &g, &ms, 16, 38);
    ck_assert_int_eq(guide_vocab(&ms, 38), 39);
    const int32_t labels[2 * 6] = {5, 7, 9, 0, 0, 0, 1, 37, 2, 2, 0, 0};
    const int32_t lengths[2] = {3, 4};
    ck_assert_msg(guide_set_labels(&g, labels, lengths, 2, 6) == OCR_OK, "%s", ocr_last_error());
    // BOS = EOS = 38, PAD = 39, characters CTC id − 1; tokens (L, B) time-major.
    const int32_t want_lab[2][6] = {{38, 4, 6, 8, 38, 39}, {38, 0, 36, 1, 1, 38}};
    for (int k = 0; k < 6; k++)
        for (int i = 0; i < 2; i++) {
            ck_assert_int_eq(g.h_tokens[k * 2 + i], want_lab[i][k]);
            ck_assert_int_eq(g.h_targets[i * 6 + k], k < 5 ? want_lab[i][k + 1] : 39);
        }
    CrossEntropyParams p = guide_loss_params(&g, 2.0f);
    ck_assert_int_eq(p.ignore_index, 39);
    ck_assert(p.smoothing == 0.0f && p.grad_scale == 2.0f);
    // MultiLabelEncode's rule: 1..max_text_length − 2 characters; ids of the CTC dictionary.
    const int32_t long_len[2] = {3, 5};
    ck_assert_int_eq(guide_set_labels(&g, labels, long_len, 2, 6), OCR_ERR_INVALID_ARG);
    ck_assert_msg(strstr(ocr_last_error(), "sample 1"), "%s", ocr_last_error());
    const int32_t bad[6] = {5, 38, 0, 0, 0, 0}, one[1] = {2};
    ck_assert_int_eq(guide_set_labels(&g, bad, one, 1, 6), OCR_ERR_INVALID_ARG);
    ck_assert_msg(strstr(ocr_last_error(), "CTC id 38"), "%s", ocr_last_error());
    // Valid ratios in (0, 1].
    const float vr[2] = {0.5f, 0.0f};
    ck_assert_int_eq(guide_set_valid_ratios(&g, vr, 2), OCR_ERR_INVALID_ARG);
    ck_assert_msg(strstr(ocr_last_error(), "sample 1") && strstr(ocr_last_error(), "valid_ratio"), "%s",
                  ocr_last_error());
    const float ok[2] = {0.5f, 1.0f};
    ck_assert_int_eq(guide_set_valid_ratios(&g, ok, 2), OCR_OK);
    guide_free(&g);
    ocr_params_free(&params);
    ocr_params_free(&stats);
    ocr_ops_free(&ops);
}
END_TEST

#define MH "Architecture.Head.head_list"
#define SAR_LIST                                                                                            \
    MH "=[{\"CTCHead\": {\"Neck\": {\"name\": \"svtr\", \"dims\": 64, \"depth\": 2, \"hidden_dims\": 120, " \
       "\"use_guide\": true}, \"Head\": {\"fc_decay\": 0.00001}}}, {\"SARHead\": {\"enc_dim\": 512, "      \
       "\"max_text_length\": 25%s}}]"

static ocr_status_t arch_with(const char *sar_extra, const char *loss_extra, OcrArch *a) {
    char list[1024], loss[512];
    snprintf(list, sizeof list, SAR_LIST, sar_extra);
    snprintf(loss, sizeof loss, "Loss.loss_config_list=[{\"CTCLoss\": null}, {\"SARLoss\": %s}]", loss_extra);
    const char *const ov[] = {list, loss, NULL};
    OcrConfig *cfg = tm_config("rec_ppocrv3_en_gtc_sar.json", ov);
    ocr_status_t st = ocr_arch_from_config(a, cfg);
    ocr_config_free(cfg);
    return st;
}

START_TEST(test_config) {
    OcrArch a;
    ck_assert_msg(arch_with("", "null", &a) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(a.multihead.kind, OCR_GUIDE_SAR);
    ck_assert_int_eq(a.multihead.sar_enc_dim, 512);
    ck_assert_int_eq(a.multihead.sar_d_k, 512);  // SARHead's default
    ck_assert(a.multihead.sar_enc_drop == 0.1f && a.multihead.sar_pred_drop == 0.1f);
    ck_assert_int_eq(a.multihead.steps, 24);
    // ignore_index as tools/train.py writes it: PAD = 97 + 1.
    ck_assert_msg(arch_with(", \"d_k\": 64", "{\"ignore_index\": 98}", &a) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(a.multihead.sar_d_k, 64);
    ck_assert_int_eq(arch_with("", "{\"ignore_index\": 92}", &a), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "ignore_index is 92") && strstr(ocr_last_error(), "98"), "%s",
                  ocr_last_error());
    ck_assert_int_eq(arch_with(", \"enc_bi_rnn\": true", "null", &a), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "enc_bi_rnn"), "%s", ocr_last_error());
    ck_assert_int_eq(arch_with(", \"pred_concat\": false", "null", &a), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "pred_concat"), "%s", ocr_last_error());
    ck_assert_int_eq(arch_with(", \"dec_drop_rnn\": 0.2", "null", &a), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "dec_drop_rnn"), "%s", ocr_last_error());
    ck_assert_int_eq(arch_with(", \"enc_dimm\": 64", "null", &a), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "enc_dimm"), "%s", ocr_last_error());
    ck_assert_int_eq(arch_with("", "{\"smoothing\": true}", &a), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "smoothing"), "%s", ocr_last_error());
}
END_TEST

// AMP O1: the LSTM layers and the 2-D attention (tanh score, mask, softmax, glimpse) stay f32;
// the head's convolution and linears follow the low precision.
START_TEST(test_amp_classes) {
    AmpPolicy p;
    const char *const none[] = {NULL};
    ck_assert_int_eq(amp_policy_make(&p, OCR_AMP_O1, OCR_BF16, none, none, none), OCR_OK);
    ck_assert_int_eq(amp_policy_op_class(&p, "lstm"), AMP_BLACK);
    ck_assert_int_eq(amp_policy_op_class(&p, "sar_attention"), AMP_BLACK);
    ck_assert_int_eq(amp_policy_op_class(&p, "conv2d"), AMP_WHITE);
    ck_assert_int_eq(amp_policy_op_class(&p, "linear"), AMP_WHITE);
    amp_policy_free(&p);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("models_sar");
    TCase *tc = tcase_create("sar");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_reduced_checkpoint_loads_strictly);
    tcase_add_test(tc, test_parity_with_paddleocr);
    tcase_add_test(tc, test_valid_steps);
    tcase_add_test(tc, test_label_sar);
    tcase_add_test(tc, test_config);
    tcase_add_test(tc, test_amp_classes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(suite()); }

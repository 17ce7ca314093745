// Whole-network gradient checks against central finite differences.
//
// Method. The loss is L = Σ w·logits with fixed random weights w (dL/dlogits = w), summed in
// double. Each network runs in training mode (BN with batch statistics) on a narrow input
// (batch 2, 48×32, or SVTR's 32×64) with dropout and drop path at 0, so L is a deterministic
// function. One backward gives the analytic gradient g of every parameter and of the input
// image. For a sample of tensors (the input plus parameters of every layer kind, from stem to
// head) L is then evaluated at θ ± s·g: stepping along the analytic gradient itself, the
// central difference must equal |g|² — an error component of g, parallel or orthogonal to the
// true gradient, breaks the equality — and the directional sum over the whole tensor lifts
// the signal far above the fp32 rounding noise of the forward (≈1e-6 in L). The step makes
// the first-order change of L 0.01 (capped at 1% of the tensor's norm), and Richardson
// extrapolation of the steps s and s/2 removes the s² curvature term, which is large here
// because BN in training mode normalises over very few elements; the closest of the three
// estimates is judged (see check_tensor). Agreement within 2e-2 plus the measured fp32 noise of
// the estimate is required. The noise part is not a constant tuned on one CPU: L's rounding
// error depends on the BLAS kernels' summation order (OpenBLAS picks them per CPU), so each
// tensor measures it: L at θ ± ε·g for ε = s/1024 against L(θ) ± ε|g|² (the curvature term is
// 2^-20 of the one at s) gives δ, the noise of one evaluation of L, and the estimates divide
// differences of L by s (Richardson: at most 3δ/s), so 3δ/(s|g|²) is added to the relative
// tolerance. (v4 training form, LAB scale of blocks4.0: 1.6e-2 with OpenBLAS's Haswell
// kernels, 1.9e-2 with Cooperlake's, 2.1e-2 with Sandybridge's; its noise term is 5e-3.)
// The 2e-2 itself covers the finite-difference error across the kinks (observed: v3
// 2.2e-3, v4 training form 1.6e-2, deploy form 9e-3, SVTR 9.4e-4); OCR_GRADCHECK_SCALE=1.03
// (every analytic gradient scaled by 3%) fails 43 of the 52 tensors (51 without the noise
// term), and a 3% error in one rep-layer branch or 5% in one LAB scale failed 10 and 1 tensors (judged by
// the extrapolated estimate alone, before the closest-of-three rule). Tensors
// whose whole effect on L is below the fp32 noise (e.g. an SE squeeze conv behind a mostly
// dead ReLU) cannot be checked this way in fp32 and are not in the samples; exact zeros are
// checked separately (the v3 neck's 3×3 conv on a one-row map).
#include "kernels/backend.h"
#include "tests/models/model_test_util.h"

static double h_rel = 1e-2;
static double tol = 2e-2;
static double dl_target = 1e-2;

typedef struct {
    OcrModel *m;
    OcrTensor x;
    double *w;
    int64_t n;
    double l0;  // L at the unperturbed point
} GC;

static double loss(GC *g) {
    ck_assert_msg(ocr_model_forward(g->m, &g->x, 1) == OCR_OK, "%s", ocr_last_error());
    const OcrTensor *l = ocr_model_logits(g->m);
    const float *v = l->data;
    double s = 0;
    for (int64_t i = 0; i < g->n; i++) s += g->w[i] * v[i];
    return s;
}

typedef struct {
    int checked, bad;
    double worst;
} Stats;

// Gradient-direction check of one tensor: step along the analytic gradient g itself,
// θ ± s·g, so the numeric directional derivative (L+ − L−)/2s must equal |g|² (any error
// component of g, parallel or orthogonal to the true gradient, changes one side but not the
// other). Stepping along g maximises the signal over the fp32 rounding noise of the forward
// (about 1e-6 in L here), and Richardson extrapolation of the steps s and s/2 removes the
// s² curvature term, which BN in training mode on a tiny batch makes large. The step moves
// the tensor by h_rel of its norm (floor 0.05 per element for zero-initialised biases).
static double dir_deriv(GC *g, OcrTensor *t, const float *orig, const float *d, double s) {
    int64_t n = ocr_tensor_numel(t);
    float *v = t->data;
    for (int64_t i = 0; i < n; i++) v[i] = (float)(orig[i] + s * d[i]);
    double lp = loss(g);
    for (int64_t i = 0; i < n; i++) v[i] = (float)(orig[i] - s * d[i]);
    double lm = loss(g);
    memcpy(v, orig, (size_t)n * sizeof(float));
    return (lp - lm) / (2 * s);
}

static void check_tensor(GC *g, const char *what, OcrTensor *t, const float *ga, Stats *st) {
    int64_t n = ocr_tensor_numel(t);
    float *orig = malloc((size_t)n * sizeof(float));
    memcpy(orig, t->data, (size_t)n * sizeof(float));
    double g2 = 0, t2 = 0;
    for (int64_t i = 0; i < n; i++) {
        g2 += (double)ga[i] * ga[i];
        t2 += (double)orig[i] * orig[i];
    }
    double tnorm = fmax(sqrt(t2), 0.05 * sqrt((double)n));
    double s = fmin(dl_target / fmax(g2, 1e-30), h_rel * tnorm / fmax(sqrt(g2), 1e-30));
    double d1 = dir_deriv(g, t, orig, ga, s), d2 = dir_deriv(g, t, orig, ga, s / 2);
    // Three estimates: the steps s and s/2 and their Richardson extrapolation. Where L is
    // smooth the extrapolation is the best; where the step crosses kinks (ReLU, hardswish,
    // clip in the SE gates: every stem weight moves every pre-activation) the error is O(s) and
    // erratic, and the plain steps can be better. A wrong gradient moves all three alike
    // (scaling g by 1.03 fails every tensor), so the closest of the three is what is judged.
    double rich = (4 * d2 - d1) / 3, num = rich;
    if (fabs(d1 - g2) < fabs(num - g2)) num = d1;
    if (fabs(d2 - g2) < fabs(num - g2)) num = d2;
    // The fp32 noise of one evaluation of L here (see the top of the file).
    double eps = s / 1024, noise = 0;
    for (int sign = -1; sign <= 1; sign += 2) {
        for (int64_t i = 0; i < n; i++) ((float *)t->data)[i] = (float)(orig[i] + sign * eps * ga[i]);
        noise = fmax(noise, fabs(loss(g) - g->l0 - sign * eps * g2));
    }
    memcpy(t->data, orig, (size_t)n * sizeof(float));
    double allowed = tol + 3 * noise / (s * fmax(g2, 1e-30));
    if (getenv("OCR_GRADCHECK_SCALE")) g2 *= atof(getenv("OCR_GRADCHECK_SCALE"));
    double err = fabs(num - g2) / fmax(fmax(fabs(num), g2), 1e-30);
    st->checked++;
    if (err > st->worst) st->worst = err;
    int bad = err > allowed;
    st->bad += bad;
    printf("  %-58s |g|^2 %12.6g numeric %12.6g (s: %.6g, s/2: %.6g, extrapolated: %.6g) rel err %.2e of %.2e%s\n",
           what, g2, num, d1, d2, rich, err, allowed, bad ? "  <-- FAIL" : "");
    free(orig);
}

static void gradcheck(const char *cfg, const char *const *ov, int H, int W, const char *const *params, int per) {
    GC g = {0};
    g.m = tm_model(cfg, ov);
    g.x = tm_images(2, H, W, 17);
    ocr_model_want_input_grad(g.m, 1);
    ck_assert(ocr_model_forward(g.m, &g.x, 1) == OCR_OK);
    g.n = ocr_tensor_numel(ocr_model_logits(g.m));
    g.w = malloc((size_t)g.n * sizeof(double));
    float *wf = malloc((size_t)g.n * sizeof(float));
    ocr_rng_fill_uniform(wf, (size_t)g.n, 5, 6, 0, -1.0f, 1.0f);
    for (int64_t i = 0; i < g.n; i++) g.w[i] = wf[i];
    g.l0 = loss(&g);
    ocr_tensor_from_f32(ocr_model_dlogits(g.m), wf);
    ck_assert(ocr_model_backward(g.m) == OCR_OK);
    const OcrTensor *dx = ocr_model_input_grad(g.m);
    ck_assert_ptr_nonnull(dx);
    float *gx = tm_copy_f32(dx);
    OcrParamTable *p = ocr_model_params(g.m);
    // Copy the analytic gradients before the numeric passes reuse the arena.
    float **gp = calloc(64, sizeof *gp);
    int np = 0;
    for (; params[np]; np++) {
        int i = ocr_params_find(p, params[np]);
        ck_assert_msg(i >= 0, "no parameter %s", params[np]);
        OcrTensor gt = ocr_params_grad(p, i);
        gp[np] = tm_copy_f32(&gt);
    }
    Stats st = {0};
    printf("%s (%s):\n", cfg, ov[2] ? ov[2] : "");
    (void)per;
    check_tensor(&g, "input", &g.x, gx, &st);
    for (int k = 0; k < np; k++) {
        OcrTensor t = ocr_params_tensor(p, ocr_params_find(p, params[k]));
        check_tensor(&g, params[k], &t, gp[k], &st);
        free(gp[k]);
    }
    printf("  %d tensors, %d outside %.0e + noise, worst rel err %.3g\n", st.checked, st.bad, tol, st.worst);
    ck_assert_msg(st.bad == 0, "%s: %d of %d tensors disagree with finite differences", cfg, st.bad, st.checked);
    free(gp);
    free(gx);
    free(wf);
    free(g.w);
    ocr_tensor_free(&g.x);
    ocr_model_free(g.m);
}

#define NO_DICT "Global.character_dict_path=\"\"", "Architecture.Head.out_channels=11"
#define NO_DROP "Architecture.Neck.drop_rate=0", "Architecture.Neck.attn_drop_rate=0"

START_TEST(test_ppocrv3) {
    const char *const ov[] = {NO_DICT, NO_DROP, NULL};
    const char *const params[] = {"backbone.conv1._conv.weight",
                                  "backbone.conv1._batch_norm.weight",
                                  "backbone.block_list.3._depthwise_conv._conv.weight",
                                  "backbone.block_list.11._se.conv1.bias",
                                  "backbone.block_list.12._se.conv2.weight",
                                  "backbone.block_list.12._pointwise_conv._batch_norm.bias",
                                  "neck.encoder.conv1.conv.weight",
                                  "neck.encoder.svtr_block.0.mixer.qkv.weight",
                                  "neck.encoder.svtr_block.0.mixer.qkv.bias",
                                  "neck.encoder.svtr_block.1.norm2.weight",
                                  "neck.encoder.svtr_block.1.mlp.fc1.bias",
                                  "neck.encoder.conv4.norm.weight",
                                  "head.fc.weight",
                                  "head.fc.bias",
                                  NULL};
    gradcheck("rec_ppocrv3_en.json", ov, 48, 32, params, 3);
}
END_TEST

START_TEST(test_ppocrv4_training_form) {
    const char *const ov[] = {NO_DICT, NO_DROP, NULL};
    const char *const params[] = {"backbone.conv1.conv.weight",
                                  "backbone.conv1.bn.bias",
                                  "backbone.blocks2.0.dw_conv.conv_kxk.1.conv.weight",
                                  "backbone.blocks2.0.dw_conv.conv_1x1.bn.weight",
                                  "backbone.blocks3.1.dw_conv.identity.weight",
                                  "backbone.blocks3.1.pw_conv.identity.bias",
                                  "backbone.blocks4.0.dw_conv.lab.scale",
                                  "backbone.blocks5.2.pw_conv.act.lab.bias",
                                  "backbone.blocks6.0.se.conv2.bias",
                                  "backbone.blocks6.3.pw_conv.conv_kxk.2.conv.weight",
                                  "neck.encoder.conv2.conv.weight",
                                  "neck.encoder.svtr_block.1.mixer.proj.weight",
                                  "neck.encoder.svtr_block.0.norm1.bias",
                                  "neck.encoder.conv3.norm.bias",
                                  "neck.encoder.conv1x1.conv.weight",
                                  "head.fc.weight",
                                  NULL};
    gradcheck("rec_ppocrv4_ch.json", ov, 48, 32, params, 3);
}
END_TEST

START_TEST(test_ppocrv4_deploy_form) {
    const char *const ov[] = {NO_DICT, "Architecture.Backbone.deploy=true", NO_DROP, NULL};
    const char *const params[] = {"backbone.conv1.conv.weight", "backbone.blocks2.0.dw_conv.reparam_conv.weight",
                                  "backbone.blocks5.0.dw_conv.reparam_conv.bias", "backbone.blocks6.1.se.conv2.weight",
                                  "backbone.blocks6.3.pw_conv.lab.scale", "neck.encoder.svtr_block.1.mlp.fc2.weight",
                                  NULL};
    gradcheck("rec_ppocrv4_ch.json", ov, 48, 32, params, 3);
}
END_TEST

START_TEST(test_svtr_tiny) {
    const char *const ov[] = {NO_DICT,
                              "Architecture.Backbone.img_size=[32, 64]",
                              "Architecture.Backbone.out_char_num=8",
                              "Architecture.Backbone.depth=[1, 2, 1]",
                              "Architecture.Backbone.mixer=[\"Local\", \"Local\", \"Global\", \"Global\"]",
                              "Architecture.Backbone.drop_path_rate=0",
                              "Architecture.Backbone.last_drop=0",
                              NULL};
    const char *const params[] = {"backbone.patch_embed.proj.0.conv.weight",
                                  "backbone.patch_embed.proj.1.norm.weight",
                                  "backbone.pos_embed",
                                  "backbone.blocks1.0.mixer.qkv.weight",
                                  "backbone.blocks1.0.norm1.weight",
                                  "backbone.sub_sample1.conv.weight",
                                  "backbone.sub_sample1.norm.bias",
                                  "backbone.blocks2.1.mlp.fc1.weight",
                                  "backbone.blocks3.0.mixer.proj.bias",
                                  "backbone.norm.weight",
                                  "backbone.last_conv.weight",
                                  "head.fc.bias",
                                  NULL};
    gradcheck("rec_svtr_tiny.json", ov, 32, 64, params, 3);
}
END_TEST

// PP-OCRv4's distillation teacher form: Conv mixers (PaddleOCR's ConvMixer, a grouped 5x5 conv
// over the token grid) then Global ones, prenorm (post-LN blocks, no final norm).
START_TEST(test_svtr_conv_mixer_prenorm) {
    const char *const ov[] = {NO_DICT,
                              "Architecture.Backbone.img_size=[32, 64]",
                              "Architecture.Backbone.out_char_num=8",
                              "Architecture.Backbone.depth=[1, 2, 1]",
                              "Architecture.Backbone.mixer=[\"Conv\", \"Conv\", \"Global\", \"Global\"]",
                              "Architecture.Backbone.local_mixer=[[5, 5], [5, 5], [5, 5]]",
                              "Architecture.Backbone.prenorm=true",
                              "Architecture.Backbone.drop_path_rate=0",
                              "Architecture.Backbone.last_drop=0",
                              NULL};
    const char *const params[] = {"backbone.patch_embed.proj.0.conv.weight",
                                  "backbone.pos_embed",
                                  "backbone.blocks1.0.mixer.local_mixer.weight",
                                  "backbone.blocks1.0.mixer.local_mixer.bias",
                                  "backbone.blocks1.0.norm1.weight",
                                  "backbone.blocks1.0.norm2.bias",
                                  "backbone.sub_sample1.conv.weight",
                                  "backbone.blocks2.0.mixer.local_mixer.weight",
                                  "backbone.blocks2.1.mixer.qkv.weight",
                                  "backbone.blocks2.1.norm1.bias",
                                  "backbone.blocks3.0.mlp.fc2.weight",
                                  "backbone.blocks3.0.norm2.weight",
                                  "backbone.last_conv.weight",
                                  NULL};
    gradcheck("rec_svtr_tiny.json", ov, 32, 64, params, 3);
}
END_TEST

// With H = 1 the top and bottom rows of the v3 neck's 3×3 kernels only ever see zero padding:
// their gradient must be exactly zero while the middle row's is not.
START_TEST(test_padding_rows_get_zero_gradient) {
    const char *const ov[] = {NO_DICT, NO_DROP, NULL};
    OcrModel *m = tm_model("rec_ppocrv3_en.json", ov);
    OcrTensor x = tm_images(2, 48, 32, 4);
    ck_assert(ocr_model_forward(m, &x, 1) == OCR_OK);
    ocr_tensor_fill(ocr_model_dlogits(m), 0.1f);
    ck_assert(ocr_model_backward(m) == OCR_OK);
    OcrParamTable *p = ocr_model_params(m);
    const char *names[2] = {"neck.encoder.conv1.conv.weight", "neck.encoder.conv4.conv.weight"};
    for (int k = 0; k < 2; k++) {
        OcrTensor gw = ocr_params_grad(p, ocr_params_find(p, names[k]));
        float *g = tm_copy_f32(&gw);
        int64_t oc = gw.shape[0], kh = gw.shape[1], kw = gw.shape[2], c = gw.shape[3];
        ck_assert_int_eq(kh, 3);
        double mid = 0;
        for (int64_t o = 0; o < oc; o++)
            for (int64_t r = 0; r < kh; r++)
                for (int64_t i = 0; i < kw * c; i++) {
                    float v = g[((o * kh + r) * kw) * c + i];
                    if (r == 1) mid += fabsf(v);
                    else ck_assert_msg(v == 0.0f, "%s row %lld: %g", names[k], (long long)r, v);
                }
        ck_assert(mid > 0);
        free(g);
    }
    ocr_tensor_free(&x);
    ocr_model_free(m);
}
END_TEST

int main(void) {
    ocr_backends_init(1);
    if (getenv("GC_H")) h_rel = atof(getenv("GC_H"));
    if (getenv("GC_DL")) dl_target = atof(getenv("GC_DL"));
    Suite *s = suite_create("gradcheck");
    TCase *tc = tcase_create("gradcheck");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_ppocrv3);
    tcase_add_test(tc, test_ppocrv4_training_form);
    tcase_add_test(tc, test_ppocrv4_deploy_form);
    tcase_add_test(tc, test_svtr_tiny);
    tcase_add_test(tc, test_svtr_conv_mixer_prenorm);
    tcase_add_test(tc, test_padding_rows_get_zero_gradient);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

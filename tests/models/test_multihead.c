// MultiHead guided training (CTC + NRTR guidance): config parsing and its errors, PaddleOCR's
// parameter names, the label conversion (MultiLabelEncode's label_gtc from the CTC ids), the
// gradient routing of use_guide, a whole-network gradient check of both branches against
// finite differences, CTC-only inference (the same logits as a CTC-only model holding the same
// weights), and the checkpoint round trip of the guidance parameters.
//
// The network is the PP-OCRv3 en MultiHead (configs/rec_ppocrv3_en_gtc_nrtr.json) made small:
// no dictionary (38 classes), a 48×32 input (4 time steps), NRTR dim 64 with 2 layers and
// max_text_length 6 (5 decoder positions), dropout off (the gradient check needs a
// deterministic loss).
#include <unistd.h>

#include "amp/policy.h"
#include "tests/models/model_test_util.h"

#define CFG "rec_ppocrv3_en_gtc_nrtr.json"
#define MH "Architecture.Head.head_list"
#define SMALL                                                                                            \
    "Global.character_dict_path=\"\"", "Global.max_text_length=6", MH ".1.NRTRHead.nrtr_dim=64",         \
        MH ".1.NRTRHead.num_decoder_layers=2", MH ".0.CTCHead.Neck.drop_rate=0",                         \
        MH ".0.CTCHead.Neck.attn_drop_rate=0"

#define B 2
#define L 6
static const int32_t kLabels[B * L] = {5, 7, 9, 0, 0, 0, 1, 37, 2, 2, 0, 0};
static const int32_t kLengths[B] = {3, 4};

static OcrModel *small_model(const char *use_guide) {
    const char *const ov[] = {SMALL, use_guide, NULL};
    OcrConfig *cfg = tm_config(CFG, ov);
    OcrArch a;
    ck_assert_msg(ocr_arch_from_config(&a, cfg) == OCR_OK, "%s", ocr_last_error());
    ocr_config_free(cfg);
    a.multihead.nrtr_dropout = 0.0f;
    OcrModel *m;
    ck_assert_msg(ocr_model_create(&m, &a) == OCR_OK, "%s", ocr_last_error());
    return m;
}

static int find(OcrModel *m, const char *name) { return ocr_params_find(ocr_model_params(m), name); }

static void forward_train(OcrModel *m, const OcrTensor *x) {
    ck_assert_msg(ocr_model_set_guide_labels(m, kLabels, kLengths, B, L) == OCR_OK, "%s", ocr_last_error());
    ck_assert_msg(ocr_model_forward(m, x, 1) == OCR_OK, "%s", ocr_last_error());
}

START_TEST(test_config_and_names) {
    OcrModel *m = small_model("Global.seed=1");
    const OcrArch *a = ocr_model_arch(m);
    ck_assert_int_eq(a->multihead.kind, OCR_GUIDE_NRTR);
    ck_assert_int_eq(a->neck.use_guide, 1);
    ck_assert_int_eq(a->num_classes, 38);
    ck_assert_int_eq(a->multihead.steps, L - 1);
    ck_assert(a->multihead.weight_ctc == 1.0 && a->multihead.weight_gtc == 1.0);
    ck_assert_int_eq(a->multihead.nrtr_smoothing, 1);
    OcrParamTable *p = ocr_model_params(m);
    struct {
        const char *name;
        int64_t d0, d1;
    } want[] = {{"head.ctc_encoder.encoder.conv1.conv.weight", -1, -1},
                {"head.ctc_encoder.encoder.svtr_block.1.mixer.qkv.weight", 120, 360},
                {"head.ctc_head.fc.weight", 64, 38},
                {"head.ctc_head.fc.bias", 38, -1},
                {"head.before_gtc.1.fc.weight", 512, 64},
                {"head.gtc_head.embedding.embedding.weight", 42, 64},
                {"head.gtc_head.decoder.0.self_attn.qkv.weight", 64, 192},
                {"head.gtc_head.decoder.0.self_attn.out_proj.bias", 64, -1},
                {"head.gtc_head.decoder.1.cross_attn.q.weight", 64, 64},
                {"head.gtc_head.decoder.1.cross_attn.kv.weight", 64, 128},
                {"head.gtc_head.decoder.1.cross_attn.out_proj.weight", 64, 64},
                {"head.gtc_head.decoder.1.mlp.fc1.weight", 64, 256},
                {"head.gtc_head.decoder.1.mlp.fc2.weight", 256, 64},
                {"head.gtc_head.decoder.1.norm3.weight", 64, -1},
                {"head.gtc_head.tgt_word_prj.weight", 64, 42}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        int i = ocr_params_find(p, want[k].name);
        ck_assert_msg(i >= 0, "no parameter %s", want[k].name);
        if (want[k].d0 >= 0) ck_assert_int_eq(p->items[i].shape[0], want[k].d0);
        if (want[k].d1 >= 0) ck_assert_int_eq(p->items[i].shape[1], want[k].d1);
    }
    // No biases where PaddleOCR has none; no CTC-only names.
    ck_assert_int_lt(find(m, "head.before_gtc.1.fc.bias"), 0);
    ck_assert_int_lt(find(m, "head.gtc_head.tgt_word_prj.bias"), 0);
    ck_assert_int_lt(find(m, "neck.encoder.conv1.conv.weight"), 0);
    ck_assert_int_lt(find(m, "head.fc.weight"), 0);
    ocr_model_free(m);
}
END_TEST

static void expect_config_error(const char *const *ov, const char *needle) {
    OcrConfig *cfg = tm_config(CFG, ov);
    OcrArch a;
    ocr_status_t st = ocr_arch_from_config(&a, cfg);
    ck_assert_msg(st == OCR_ERR_CONFIG, "expected a config error mentioning %s, got %d", needle, (int)st);
    ck_assert_msg(strstr(ocr_last_error(), needle), "message \"%s\" lacks \"%s\"", ocr_last_error(), needle);
    ocr_config_free(cfg);
}

START_TEST(test_config_errors) {
    const char *const sar[] = {MH "=[{\"CTCHead\": {\"Neck\": {\"name\": \"svtr\"}, \"Head\": {}}}, "
                               "{\"SARHead\": {\"enc_dim\": 512}}]",
                               NULL};
    expect_config_error(sar, "[CTCLoss, SARLoss]");  // a SARHead trains with SARLoss
    const char *const order[] = {MH "=[{\"NRTRHead\": {}}, {\"CTCHead\": {\"Neck\": {\"name\": \"svtr\"}}}]", NULL};
    expect_config_error(order, "CTCHead");
    const char *const loss[] = {"Loss.name=CTCLoss", NULL};
    expect_config_error(loss, "MultiLoss");
    const char *const list[] = {"Loss.loss_config_list=[{\"CTCLoss\": null}, {\"SARLoss\": null}]", NULL};
    expect_config_error(list, "NRTRLoss");
    const char *const neck[] = {"Architecture.Neck={\"name\": \"SequenceEncoder\", \"encoder_type\": \"svtr\"}", NULL};
    expect_config_error(neck, "head_list.0.CTCHead.Neck");
    const char *const dim[] = {MH ".1.NRTRHead.nrtr_dim=100", NULL};
    expect_config_error(dim, "multiple of 32");
    const char *const typo[] = {MH ".1.NRTRHead.nrtr_dims=384", NULL};
    expect_config_error(typo, "nrtr_dims");
    // MultiLoss needs a MultiHead.
    OcrConfig *cfg = tm_config("rec_ppocrv3_en.json", (const char *const[]){"Loss.name=MultiLoss", NULL});
    OcrArch a;
    ck_assert_int_eq(ocr_arch_from_config(&a, cfg), OCR_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "MultiHead"));
    ocr_config_free(cfg);
}
END_TEST

// label_gtc = [<s>=2, c+3 ..., </s>=3, 0, ...]: the loss targets are its positions 1..L−1.
START_TEST(test_guide_labels) {
    OcrModel *m = small_model("Global.seed=1");
    OcrTensor x = tm_images(B, 48, 32, 3);
    forward_train(m, &x);
    const OcrTensor *t = ocr_model_guide_targets(m);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->shape[0], B);
    ck_assert_int_eq(t->shape[1], L - 1);
    const int32_t want[B * (L - 1)] = {8, 10, 12, 3, 0, 4, 40, 5, 5, 3};
    for (int i = 0; i < B * (L - 1); i++) ck_assert_int_eq(((const int32_t *)t->data)[i], want[i]);
    const OcrTensor *gl = ocr_model_guide_logits(m);
    ck_assert_int_eq(gl->shape[1], L - 1);
    ck_assert_int_eq(gl->shape[2], 42);
    // A text of L − 1 characters is one MultiLabelEncode rejects.
    int32_t lens[B] = {3, 5};
    ck_assert_int_eq(ocr_model_set_guide_labels(m, kLabels, lens, B, L), OCR_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "sample 1 has 5 characters"));
    // Labels padded to another max_text_length, and a training pass without labels.
    ck_assert_int_eq(ocr_model_set_guide_labels(m, kLabels, kLengths, 1, 12), OCR_ERR_INVALID_ARG);
    ck_assert_int_eq(ocr_model_forward(m, &x, 1), OCR_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "ocr_model_set_guide_labels"));
    ocr_tensor_free(&x);
    ocr_model_free(m);
}
END_TEST

// PaddleOCR trains the decoder over the batch's longest text + 1 positions. Each position's
// logits do not depend on how many follow (causal mask, per-position layers): the same images
// with a longer text in the other sample give sample 0 the same logits on the shared positions.
// Planning without labels (capacity) keeps the full max_text_length − 1 positions.
START_TEST(test_decoder_runs_the_longest_text) {
    OcrModel *m = small_model("Global.seed=1");
    OcrTensor x = tm_images(B, 48, 32, 3);
    const int32_t short_lengths[B] = {2, 1}, long_lengths[B] = {2, 4};
    OcrMemPlan p_short, p_full;
    ck_assert_msg(ocr_model_set_guide_labels(m, kLabels, short_lengths, B, L) == OCR_OK, "%s", ocr_last_error());
    ck_assert(ocr_model_plan(m, B, 48, 32, 1, &p_short) == OCR_OK);
    ck_assert_msg(ocr_model_forward(m, &x, 1) == OCR_OK, "%s", ocr_last_error());
    const OcrTensor *t = ocr_model_guide_targets(m), *gl = ocr_model_guide_logits(m);
    ck_assert_int_eq(t->shape[1], 3);
    ck_assert_int_eq(gl->shape[1], 3);
    const int32_t want[B * 3] = {8, 10, 3, 4, 3, 0};
    for (int i = 0; i < B * 3; i++) ck_assert_int_eq(((const int32_t *)t->data)[i], want[i]);
    const int64_t V = gl->shape[2];
    float *short_logits = tm_copy_f32(gl);
    // The labels are spent: this plan is the one capacity makes, for any batch.
    ck_assert(ocr_model_plan(m, B, 48, 32, 1, &p_full) == OCR_OK);
    ck_assert_msg(p_short.activations_bytes < p_full.activations_bytes, "plans: %lld for 3 positions, %lld for 5",
                  (long long)p_short.activations_bytes, (long long)p_full.activations_bytes);
    ck_assert_msg(ocr_model_set_guide_labels(m, kLabels, long_lengths, B, L) == OCR_OK, "%s", ocr_last_error());
    ck_assert_msg(ocr_model_forward(m, &x, 1) == OCR_OK, "%s", ocr_last_error());
    gl = ocr_model_guide_logits(m);
    ck_assert_int_eq(gl->shape[1], 5);
    const float *lg = gl->data;
    // Sample 0, positions 0..2: the same sums, in GEMMs of another row count (f32 rounding).
    double worst = 0;
    for (int p = 0; p < 3; p++)
        for (int64_t v = 0; v < V; v++) {
            double a = short_logits[p * V + v], b = lg[p * V + v];
            worst = fmax(worst, fabs(a - b) / (1.0 + fabs(b)));
        }
    ck_assert_msg(worst < 1e-5, "sample 0's logits moved by %.3g when sample 1's text grew", worst);
    free(short_logits);
    ocr_tensor_free(&x);
    ocr_model_free(m);
}
END_TEST

// PaddleOCR's PositionalEncoding: pe[p, 2i] = sin(p·10000^(−2i/d)), pe[p, 2i+1] = cos(same); the
// causal mask: 0 where key <= query.
START_TEST(test_positions_and_mask) {
    float pe[3 * 4], mask[3 * 3];
    nrtr_positional_encoding(pe, 3, 4);
    const double want[3 * 4] = {0, 1, 0, 1, sin(1.0), cos(1.0), sin(0.01), cos(0.01), sin(2.0), cos(2.0), sin(0.02), cos(0.02)};
    for (int i = 0; i < 12; i++) ck_assert_msg(fabs(pe[i] - want[i]) < 1e-7, "pe[%d] = %.9g, want %.9g", i, pe[i], want[i]);
    nrtr_causal_mask(mask, 3);
    for (int q = 0; q < 3; q++)
        for (int k = 0; k < 3; k++) ck_assert(k <= q ? mask[q * 3 + k] == 0.0f : mask[q * 3 + k] == -INFINITY);
}
END_TEST

// AMP classes of the ops MultiHead adds: the LSTM cell and the losses stay f32 at O1, the
// embedding lookup follows its neighbour; Paddle's op names map onto them.
START_TEST(test_amp_classes) {
    AmpPolicy p;
    const char *const none[] = {NULL}, *const black[] = {"lookup_table_v2", NULL};
    ck_assert_int_eq(amp_policy_make(&p, OCR_AMP_O1, OCR_F16, none, none, none), OCR_OK);
    ck_assert_int_eq(amp_policy_op_class(&p, "lstm"), AMP_BLACK);
    ck_assert_int_eq(amp_policy_op_class(&p, "cross_entropy"), AMP_BLACK);
    ck_assert_int_eq(amp_policy_op_class(&p, "softmax"), AMP_BLACK);
    ck_assert_int_eq(amp_policy_op_class(&p, "embedding"), AMP_GREY);
    ck_assert_int_eq(amp_policy_op_class(&p, "attention"), AMP_WHITE);
    amp_policy_free(&p);
    ck_assert_msg(amp_policy_make(&p, OCR_AMP_O1, OCR_F16, none, black, none) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(amp_policy_op_class(&p, "embedding"), AMP_BLACK);
    amp_policy_free(&p);
}
END_TEST

// ---- gradients -----------------------------------------------------------------------------------

typedef struct {
    OcrModel *m;
    OcrTensor x;
    double *w1, *w2;  // dL/dlogits of the CTC and the guidance branch
    int64_t n1, n2;
} GC;

static double sum_w(const OcrTensor *t, const double *w, int64_t n) {
    const float *v = t->data;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += w[i] * v[i];
    return s;
}

static double loss(GC *g) {
    forward_train(g->m, &g->x);
    return sum_w(ocr_model_logits(g->m), g->w1, g->n1) + sum_w(ocr_model_guide_logits(g->m), g->w2, g->n2);
}

// One forward/backward with the given branch weights (scale 0 drops a branch).
static void backward_with(GC *g, double s1, double s2) {
    ocr_params_zero_grads(ocr_model_params(g->m));
    forward_train(g->m, &g->x);
    OcrTensor *d1 = ocr_model_dlogits(g->m), *d2 = ocr_model_guide_dlogits(g->m);
    for (int64_t i = 0; i < g->n1; i++) ocr_tensor_set_f32(d1, i, (float)(s1 * g->w1[i]));
    for (int64_t i = 0; i < g->n2; i++) ocr_tensor_set_f32(d2, i, (float)(s2 * g->w2[i]));
    ck_assert_msg(ocr_model_backward(g->m) == OCR_OK, "%s", ocr_last_error());
}

static void gc_init(GC *g, const char *use_guide) {
    memset(g, 0, sizeof *g);
    g->m = small_model(use_guide);
    g->x = tm_images(B, 48, 32, 17);
    forward_train(g->m, &g->x);
    g->n1 = ocr_tensor_numel(ocr_model_logits(g->m));
    g->n2 = ocr_tensor_numel(ocr_model_guide_logits(g->m));
    g->w1 = malloc((size_t)g->n1 * sizeof(double));
    g->w2 = malloc((size_t)g->n2 * sizeof(double));
    float *f = malloc((size_t)(g->n1 + g->n2) * sizeof(float));
    ocr_rng_fill_uniform(f, (size_t)(g->n1 + g->n2), 5, 6, 0, -1.0f, 1.0f);
    for (int64_t i = 0; i < g->n1; i++) g->w1[i] = f[i];
    for (int64_t i = 0; i < g->n2; i++) g->w2[i] = f[g->n1 + i];
    free(f);
    ck_assert_int_eq(ocr_params_alloc_grads(ocr_model_params(g->m)), OCR_OK);
}

static void gc_free(GC *g) {
    free(g->w1);
    free(g->w2);
    ocr_tensor_free(&g->x);
    ocr_model_free(g->m);
}

static float *grad_copy(OcrModel *m, const char *name) {
    int i = find(m, name);
    ck_assert_msg(i >= 0, "no parameter %s", name);
    OcrTensor t = ocr_params_grad(ocr_model_params(m), i);
    return tm_copy_f32(&t);
}

static double sq_norm(const float *v, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)v[i] * v[i];
    return s;
}

static int64_t numel_of(OcrModel *m, const char *name) {
    return ocr_model_params(m)->items[find(m, name)].numel;
}

// use_guide: the CTC loss never reaches the backbone, the guidance loss never reaches the CTC
// neck or FC; without it the backbone's gradient is the sum of both branches' (linearity).
START_TEST(test_gradient_routing) {
    const char *bb = "backbone.conv1._conv.weight", *neck = "head.ctc_encoder.encoder.conv1.conv.weight";
    const char *fc = "head.ctc_head.fc.weight", *emb = "head.gtc_head.embedding.embedding.weight";
    GC g;
    gc_init(&g, "Global.seed=1");
    int64_t nb = numel_of(g.m, bb), nn = numel_of(g.m, neck), nf = numel_of(g.m, fc), ne = numel_of(g.m, emb);
    backward_with(&g, 1, 0);
    float *b = grad_copy(g.m, bb), *n = grad_copy(g.m, neck), *e = grad_copy(g.m, emb);
    ck_assert_msg(sq_norm(b, nb) == 0.0, "use_guide: the CTC loss reached the backbone");
    ck_assert(sq_norm(n, nn) > 0 && sq_norm(e, ne) == 0.0);
    free(b), free(n), free(e);
    backward_with(&g, 0, 1);
    b = grad_copy(g.m, bb), n = grad_copy(g.m, neck);
    float *f = grad_copy(g.m, fc);
    e = grad_copy(g.m, emb);
    ck_assert(sq_norm(b, nb) > 0 && sq_norm(e, ne) > 0);
    ck_assert_msg(sq_norm(n, nn) == 0.0 && sq_norm(f, nf) == 0.0, "the guidance loss reached the CTC branch");
    free(b), free(n), free(f), free(e);
    gc_free(&g);

    gc_init(&g, "Architecture.Head.head_list.0.CTCHead.Neck.use_guide=false");
    backward_with(&g, 1, 0);
    float *b1 = grad_copy(g.m, bb);
    backward_with(&g, 0, 1);
    float *b2 = grad_copy(g.m, bb);
    backward_with(&g, 1, 1);
    float *b12 = grad_copy(g.m, bb);
    ck_assert(sq_norm(b1, nb) > 0 && sq_norm(b2, nb) > 0);
    // The two sums differ only in fp32 rounding: each element of the backbone's first conv
    // gradient sums ~1e5 products; 1e-4 of the gradient's norm is far above that and far below
    // a missing branch (its share of the norm is O(1)).
    double d = 0;
    for (int64_t i = 0; i < nb; i++) d += ((double)b12[i] - b1[i] - b2[i]) * ((double)b12[i] - b1[i] - b2[i]);
    ck_assert_msg(sqrt(d) <= 1e-4 * sqrt(sq_norm(b12, nb)), "backbone gradient %g away from the sum of the branches",
                  sqrt(d));
    free(b1), free(b2), free(b12);
    gc_free(&g);
}
END_TEST

// Directional finite differences along the analytic gradient (the method of test_gradcheck.c):
// (L(θ + s·g) − L(θ − s·g)) / 2s must equal |g|², Richardson-extrapolated over s and s/2.
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

static double check_tensor(GC *g, const char *what, OcrTensor *t, const float *ga) {
    int64_t n = ocr_tensor_numel(t);
    float *orig = tm_copy_f32(t);
    double g2 = sq_norm(ga, n), t2 = sq_norm(orig, n);
    double tnorm = fmax(sqrt(t2), 0.05 * sqrt((double)n));
    double s = fmin(1e-2 / fmax(g2, 1e-30), 1e-2 * tnorm / fmax(sqrt(g2), 1e-30));
    double d1 = dir_deriv(g, t, orig, ga, s), d2 = dir_deriv(g, t, orig, ga, s / 2);
    double rich = (4 * d2 - d1) / 3, num = rich;
    if (fabs(d1 - g2) < fabs(num - g2)) num = d1;
    if (fabs(d2 - g2) < fabs(num - g2)) num = d2;
    double err = fabs(num - g2) / fmax(fmax(fabs(num), g2), 1e-30);
    printf("  %-52s |g|^2 %12.6g numeric %12.6g rel err %.2e\n", what, g2, num, err);
    free(orig);
    return err;
}

START_TEST(test_gradcheck_both_branches) {
    const char *const params[] = {"backbone.conv1._conv.weight",
                                  "backbone.block_list.12._pointwise_conv._batch_norm.bias",
                                  "head.ctc_encoder.encoder.svtr_block.0.mixer.qkv.weight",
                                  "head.ctc_head.fc.weight",
                                  "head.before_gtc.1.fc.weight",
                                  "head.gtc_head.embedding.embedding.weight",
                                  "head.gtc_head.decoder.0.self_attn.qkv.weight",
                                  "head.gtc_head.decoder.0.self_attn.qkv.bias",
                                  "head.gtc_head.decoder.0.cross_attn.kv.weight",
                                  "head.gtc_head.decoder.1.cross_attn.q.bias",
                                  "head.gtc_head.decoder.1.cross_attn.out_proj.weight",
                                  "head.gtc_head.decoder.0.norm1.weight",
                                  "head.gtc_head.decoder.1.norm3.bias",
                                  "head.gtc_head.decoder.1.mlp.fc1.weight",
                                  "head.gtc_head.tgt_word_prj.weight",
                                  NULL};
    // use_guide off, so the backbone sees both branches.
    GC g;
    gc_init(&g, "Architecture.Head.head_list.0.CTCHead.Neck.use_guide=false");
    ocr_model_want_input_grad(g.m, 1);
    backward_with(&g, 1, 1);
    float *gx = tm_copy_f32(ocr_model_input_grad(g.m));
    float *gp[32];
    int np = 0;
    for (; params[np]; np++) gp[np] = grad_copy(g.m, params[np]);
    // Agreement within 2e-2, as test_gradcheck (BN in training mode on 2 samples is strongly
    // curved); a wrong gradient (any branch dropped, a transposed GEMM) is off by O(1).
    int bad = 0;
    double worst = 0;
    printf("MultiHead gradient check:\n");
    double e = check_tensor(&g, "input", &g.x, gx);
    worst = fmax(worst, e), bad += e > 2e-2;
    for (int k = 0; k < np; k++) {
        OcrTensor t = ocr_params_tensor(ocr_model_params(g.m), find(g.m, params[k]));
        e = check_tensor(&g, params[k], &t, gp[k]);
        worst = fmax(worst, e), bad += e > 2e-2;
        free(gp[k]);
    }
    ck_assert_msg(bad == 0, "%d of %d tensors disagree with finite differences (worst %.3g)", bad, np + 1, worst);
    free(gx);
    gc_free(&g);
}
END_TEST

// ---- inference and weights -------------------------------------------------------------------------

// PaddleOCR's MultiHead → CTC-only names (paddleocr_multihead.md §8).
static void ctc_name(const char *multi, char *out, size_t cap) {
    if (strncmp(multi, "head.ctc_encoder.encoder.", 25) == 0)
        snprintf(out, cap, "neck.encoder.%s", multi + 25);
    else if (strncmp(multi, "head.ctc_head.", 14) == 0)
        snprintf(out, cap, "head.%s", multi + 14);
    else
        snprintf(out, cap, "%s", multi);
}

static void copy_into(OcrParamTable *dst, OcrParamTable *src) {
    int copied = 0;
    for (int i = 0; i < src->count; i++) {
        char n[256];
        ctc_name(src->items[i].name, n, sizeof n);
        int j = ocr_params_find(dst, n);
        if (j < 0) continue;
        OcrTensor s = ocr_params_tensor(src, i), d = ocr_params_tensor(dst, j);
        ck_assert_int_eq(ocr_tensor_numel(&s), ocr_tensor_numel(&d));
        memcpy(d.data, s.data, ocr_tensor_bytes(&s));
        copied++;
    }
    ck_assert_int_eq(copied, dst->count);  // every CTC-only tensor has its MultiHead twin
}

START_TEST(test_inference_is_the_ctc_branch) {
    OcrModel *mh = small_model("Global.seed=3");
    tm_randomize_and_calibrate(mh, 9, 4, 48, 32);
    const char *const ov[] = {"Global.character_dict_path=\"\"", "Global.max_text_length=6",
                              "Architecture.Neck.use_guide=true", NULL};
    OcrModel *ctc = tm_model("rec_ppocrv3_en.json", ov);
    copy_into(ocr_model_params(ctc), ocr_model_params(mh));
    copy_into(ocr_model_stats(ctc), ocr_model_stats(mh));
    OcrTensor x = tm_images(3, 48, 64, 21);
    // No labels: evaluation never runs the guidance branch.
    ck_assert_msg(ocr_model_forward(mh, &x, 0) == OCR_OK, "%s", ocr_last_error());
    ck_assert_msg(ocr_model_forward(ctc, &x, 0) == OCR_OK, "%s", ocr_last_error());
    const OcrTensor *a = ocr_model_probs(mh), *b = ocr_model_probs(ctc);
    ck_assert(ocr_tensor_same_shape(a, b));
    ck_assert_msg(memcmp(a->data, b->data, ocr_tensor_bytes(a)) == 0, "MultiHead inference differs from CTC-only");
    ck_assert_ptr_null(ocr_model_guide_logits(mh));
    ocr_tensor_free(&x);
    ocr_model_free(ctc);
    ocr_model_free(mh);
}
END_TEST

START_TEST(test_weights_round_trip) {
    OcrModel *a = small_model("Global.seed=5"), *b = small_model("Global.seed=6");
    char path[] = "/tmp/ocr_multihead_XXXXXX";
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    close(fd);
    ck_assert_msg(ocr_model_save_weights(a, path) == OCR_OK, "%s", ocr_last_error());
    ck_assert_msg(ocr_model_load_weights(b, path) == OCR_OK, "%s", ocr_last_error());
    OcrParamTable *pa = ocr_model_params(a), *pb = ocr_model_params(b);
    int guide = 0;
    for (int i = 0; i < pa->count; i++) {
        OcrTensor ta = ocr_params_tensor(pa, i), tb = ocr_params_tensor(pb, i);
        ck_assert_msg(memcmp(ta.data, tb.data, ocr_tensor_bytes(&ta)) == 0, "%s", pa->items[i].name);
        guide += strncmp(pa->items[i].name, "head.gtc_head.", 14) == 0;
    }
    ck_assert_int_eq(guide, 1 + 2 * 20 + 1);  // embedding, 10 layers × (weight, bias) per block, projection
    unlink(path);
    ocr_model_free(a);
    ocr_model_free(b);
}
END_TEST

// PaddleOCR's PP-OCRv4 ch MultiHead (ch_PP-OCRv4_rec.yml, observed with paddle 3.3.1): the NRTR
// branch has 14,741,760 trainable parameters (paddleocr_formats.md §1.4) on top of the CTC
// model's 6,259,405 (README, configs/rec_ppocrv4_ch.json).
START_TEST(test_ppocrv4_ch_parameter_count) {
    OcrModel *m = tm_model("rec_ppocrv4_ch_gtc.json", NULL);
    ck_assert_int_eq(ocr_model_arch(m)->num_classes, 6625);
    ck_assert_int_eq(ocr_model_param_count(m), 6259405 + 14741760);
    OcrParamTable *p = ocr_model_params(m);
    int e = find(m, "head.gtc_head.embedding.embedding.weight");
    ck_assert_int_eq(p->items[e].shape[0], 6629);  // NRTRLabelDecode (6628) + 1
    ck_assert_int_eq(p->items[find(m, "head.before_gtc.1.fc.weight")].shape[0], 480);
    ocr_model_free(m);
}
END_TEST

// PaddleOCR's own YAML: the shared PP-OCRv3 MultiHead checkpoint's config (CTC + SAR) parses,
// SAR branch included (tests/models/test_sar.c loads and checks that checkpoint).
START_TEST(test_paddleocr_yaml_sar) {
    char path[1024];
    if (!ocr_test_shared_path("models/ppocrv3_paddle/v3_en_multihead_ctc_sar_REDUCED_enc64_dk64_4steps.yml", path,
                              sizeof path))
        return;
    OcrConfig *cfg;
    ck_assert_msg(ocr_config_load(&cfg, path) == OCR_OK, "%s", ocr_last_error());
    // The dictionary path is relative to a PaddleOCR checkout.
    ck_assert_int_eq(ocr_config_apply_override(cfg, "Global.character_dict_path=\"\""), OCR_OK);
    OcrArch a;
    ck_assert_msg(ocr_arch_from_config(&a, cfg) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(a.multihead.kind, OCR_GUIDE_SAR);
    ck_assert(a.multihead.sar_enc_dim == 64 && a.multihead.sar_d_k == 64);
    ocr_config_free(cfg);
}
END_TEST

int main(void) {
    Suite *s = suite_create("models_multihead");
    TCase *tc = tcase_create("multihead");
    tcase_set_timeout(tc, 300);  // the gradient check: 64 forwards of the small network
    tcase_add_test(tc, test_config_and_names);
    tcase_add_test(tc, test_config_errors);
    tcase_add_test(tc, test_guide_labels);
    tcase_add_test(tc, test_decoder_runs_the_longest_text);
    tcase_add_test(tc, test_positions_and_mask);
    tcase_add_test(tc, test_amp_classes);
    tcase_add_test(tc, test_gradient_routing);
    tcase_add_test(tc, test_gradcheck_both_branches);
    tcase_add_test(tc, test_inference_is_the_ctc_branch);
    tcase_add_test(tc, test_weights_round_trip);
    tcase_add_test(tc, test_ppocrv4_ch_parameter_count);
    tcase_add_test(tc, test_paddleocr_yaml_sar);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

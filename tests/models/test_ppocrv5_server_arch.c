// PP-OCRv5 server recognizer (PPHGNetV2_B4 text_rec + MultiHead: svtr neck with use_guide and CTC fc,
// NRTR 384): built from configs/rec_ppocrv5_server.json and from the PaddleOCR-layout YAML
// tests/models/data/ppocrv5_server_rec.yml; parameter counts and names against PaddleOCR's
// (tests/models/data/ppocrv5_server_*_names.txt, written by tools/ppocrv5_server_param_counts.py from
// PaddleOCR's source structure; its deploy_ctc total, 21,094,553 values with the BN statistics,
// is 80.5 MiB of float32, the "81 MB" PaddleOCR lists for the inference model, and equals Hugging
// Face's port of it tensor for tensor: the tool's --hf); shapes and optimizer attributes of a few
// tensors; a MultiHead training step; the deploy form; gradients against finite differences.
#include "models/svtr/pphgnetv2.h"
#include "models/weights_io.h"
#include "tests/models/model_test_util.h"

// PaddleOCR's numbers (tools/ppocrv5_server_param_counts.py): trainable parameters / BN statistics.
#define SERVER_TRAIN 51662017   // CTC branch 27,286,465 (the unused classifier's 6,243,304 included) + NRTR
#define SERVER_STATS 51392
#define SERVER_DEPLOY 45418713  // without backbone.last_conv and backbone.fc; CTC branch 21,043,161
#define UNUSED_CLASSIFIER (2048 * 2048 + 2048 * 1000 + 1000)

static int64_t table_numel(const OcrParamTable *t) {
    int64_t n = 0;
    for (int i = 0; i < t->count; i++) n += t->items[i].numel;
    return n;
}

// As test_ppocrv6_arch.c's: every PaddleOCR tensor present with as many elements, nothing else.
static void check_names(OcrModel *m, const char *file) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/models/data/%s", OCR_SOURCE_DIR, file);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    OcrParamTable *p = ocr_model_params(m), *s = ocr_model_stats(m);
    int seen_p = 0, seen_s = 0;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char name[256], shape[64], kind[16];
        ck_assert_int_eq(sscanf(line, "%255[^\t]\t%63[^\t]\t%15s", name, shape, kind), 3);
        int64_t numel = 1;
        for (char *tok = strtok(shape, "x"); tok; tok = strtok(NULL, "x")) numel *= atoll(tok);
        int stat = strcmp(kind, "stat") == 0;
        OcrParamTable *t = stat ? s : p;
        int i = ocr_params_find(t, name);
        ck_assert_msg(i >= 0, "%s: PaddleOCR's %s %s is missing", file, stat ? "statistic" : "parameter", name);
        ck_assert_msg(t->items[i].numel == numel, "%s: %s has %lld elements, PaddleOCR %lld", file, name,
                      (long long)t->items[i].numel, (long long)numel);
        stat ? seen_s++ : seen_p++;
    }
    fclose(f);
    ck_assert_msg(seen_p == p->count, "%s: %d parameters in PaddleOCR's list, %d here", file, seen_p, p->count);
    ck_assert_msg(seen_s == s->count, "%s: %d statistics in PaddleOCR's list, %d here", file, seen_s, s->count);
}

static void check_shape(const OcrParamTable *p, const char *name, int ndim, const int64_t *shape) {
    int i = ocr_params_find(p, name);
    ck_assert_msg(i >= 0, "no parameter %s", name);
    ck_assert_msg(p->items[i].ndim == ndim, "%s: %d dims, expected %d", name, p->items[i].ndim, ndim);
    for (int d = 0; d < ndim; d++)
        ck_assert_msg(p->items[i].shape[d] == shape[d], "%s: dim %d is %lld, expected %lld", name, d,
                      (long long)p->items[i].shape[d], (long long)shape[d]);
}

START_TEST(test_counts_and_names) {
    OcrModel *m = tm_model("rec_ppocrv5_server.json", NULL);
    const OcrArch *a = ocr_model_arch(m);
    ck_assert(a->backbone == OCR_BACKBONE_HGNETV2 && !a->hgnet2.deploy && a->hgnet2.use_last_conv);
    ck_assert_int_eq(a->num_classes, 18385);  // 18,383 dictionary lines + blank + space
    ck_assert(a->neck_svtr && a->neck.dims == 120 && a->neck.hidden == 120 && a->neck.depth == 2 &&
              a->neck.kernel[0] == 1 && a->neck.kernel[1] == 3 && a->neck.use_guide);
    ck_assert(a->multihead.kind == OCR_GUIDE_NRTR && a->multihead.nrtr_dim == 384);
    ck_assert_msg(ocr_model_param_count(m) == SERVER_TRAIN, "%lld parameters, PaddleOCR %lld",
                  (long long)ocr_model_param_count(m), (long long)SERVER_TRAIN);
    ck_assert_int_eq(table_numel(ocr_model_stats(m)), SERVER_STATS);
    check_names(m, "ppocrv5_server_train_names.txt");
    // Our layouts: conv (OC, KH, KW, C/groups), linear (IN, OUT).
    OcrParamTable *p = ocr_model_params(m);
    check_shape(p, "backbone.stem.stem2a.conv.weight", 4, (int64_t[]){16, 2, 2, 32});
    check_shape(p, "backbone.stem.stem3.conv.weight", 4, (int64_t[]){32, 3, 3, 64});
    check_shape(p, "backbone.stages.0.downsample.conv.weight", 4, (int64_t[]){48, 3, 3, 1});
    check_shape(p, "backbone.stages.1.blocks.0.layers.5.conv.weight", 4, (int64_t[]){96, 3, 3, 96});
    check_shape(p, "backbone.stages.1.blocks.0.aggregation_squeeze_conv.conv.weight", 4,
                (int64_t[]){256, 1, 1, 128 + 6 * 96});
    check_shape(p, "backbone.stages.2.blocks.2.layers.0.conv1.conv.weight", 4, (int64_t[]){192, 1, 1, 1024});
    check_shape(p, "backbone.stages.2.blocks.1.layers.3.conv2.conv.weight", 4, (int64_t[]){192, 5, 5, 1});
    check_shape(p, "backbone.stages.3.blocks.0.aggregation_excitation_conv.bn.weight", 1, (int64_t[]){2048});
    check_shape(p, "backbone.last_conv.weight", 4, (int64_t[]){2048, 1, 1, 2048});
    check_shape(p, "backbone.fc.weight", 2, (int64_t[]){2048, 1000});
    check_shape(p, "head.ctc_encoder.encoder.conv1.conv.weight", 4, (int64_t[]){256, 1, 3, 2048});
    check_shape(p, "head.ctc_encoder.encoder.conv4.conv.weight", 4, (int64_t[]){256, 1, 3, 4096});
    check_shape(p, "head.ctc_head.fc.weight", 2, (int64_t[]){120, 18385});
    check_shape(p, "head.before_gtc.1.fc.weight", 2, (int64_t[]){2048, 384});
    check_shape(p, "head.gtc_head.embedding.embedding.weight", 2, (int64_t[]){18389, 384});
    // ConvBNAct's BN: L2Decay(0); its conv: the global L2. The unused classifier: no decay.
    ck_assert(p->items[ocr_params_find(p, "backbone.stages.2.blocks.0.layers.0.conv2.bn.weight")].decay_kind ==
              OCR_DECAY_NONE);
    ck_assert(p->items[ocr_params_find(p, "backbone.stages.2.blocks.0.layers.0.conv2.conv.weight")].decay_kind ==
              OCR_DECAY_GLOBAL);
    ck_assert(p->items[ocr_params_find(p, "backbone.last_conv.weight")].decay_kind == OCR_DECAY_NONE);
    ck_assert(p->items[ocr_params_find(p, "backbone.fc.bias")].decay_kind == OCR_DECAY_NONE);
    ocr_model_free(m);

    const char *const dep[] = {"Architecture.Backbone.deploy=true", NULL};
    m = tm_model("rec_ppocrv5_server.json", dep);
    ck_assert_int_eq(ocr_model_param_count(m), SERVER_DEPLOY);
    ck_assert_int_eq(SERVER_TRAIN - SERVER_DEPLOY, UNUSED_CLASSIFIER);
    ck_assert_int_eq(table_numel(ocr_model_stats(m)), SERVER_STATS);
    check_names(m, "ppocrv5_server_deploy_names.txt");
    ocr_model_free(m);

    // PaddleOCR's own switches of the unused classifier: use_last_conv false drops last_conv (fc then
    // reads the 2048 stage channels), class_num resizes fc.
    const char *const nolast[] = {"Architecture.Backbone.use_last_conv=false", "Architecture.Backbone.class_num=10",
                                  NULL};
    m = tm_model("rec_ppocrv5_server.json", nolast);
    ck_assert_int_eq(ocr_model_param_count(m), SERVER_DEPLOY + 2048 * 10 + 10);
    ocr_model_free(m);
}
END_TEST

// PaddleOCR's YAML as it ships (only the dictionary path changed) builds the same network; keys of
// other forms are refused with their name.
START_TEST(test_paddle_yaml) {
    char dict[1024];
    snprintf(dict, sizeof dict, "Global.character_dict_path=\"%s/configs/dicts/ppocrv5_dict.txt\"", OCR_SOURCE_DIR);
    const char *const ov[] = {dict, NULL};
    OcrModel *m = tm_model("../tests/models/data/ppocrv5_server_rec.yml", ov);
    ck_assert_str_eq(ocr_model_arch(m)->algorithm, "SVTR_HGNet");
    ck_assert_int_eq(ocr_model_param_count(m), SERVER_TRAIN);
    ck_assert_int_eq(table_numel(ocr_model_stats(m)), SERVER_STATS);
    check_names(m, "ppocrv5_server_train_names.txt");
    ocr_model_free(m);
    OcrArch arch;
    const char *const bad[][2] = {{"Architecture.Backbone.text_rec=false", "text_rec"},
                                  {"Architecture.Backbone.det=true", "det"},
                                  {"Architecture.Backbone.lr_mult_list=[1, 1]", "lr_mult_list"},
                                  {"Architecture.Backbone.use_lab=true", "use_lab"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *const o[] = {dict, bad[i][0], NULL};
        OcrConfig *cfg = tm_config("../tests/models/data/ppocrv5_server_rec.yml", o);
        ck_assert_msg(ocr_arch_from_config(&arch, cfg) == OCR_ERR_CONFIG, "%s accepted", bad[i][0]);
        ck_assert_msg(strstr(ocr_last_error(), bad[i][1]) != NULL, "%s: %s", bad[i][0], ocr_last_error());
        ocr_config_free(cfg);
    }
    // lr_mult_list: entry 0 on the stem's ConvBNActs (conv weight and BN), entry i + 1 on stage i's.
    const char *const lr[] = {"Architecture.Backbone.lr_mult_list=[0.5, 1, 1, 0.25, 1]", NULL};
    m = tm_model("rec_ppocrv5_server.json", lr);
    OcrParamTable *p = ocr_model_params(m);
    ck_assert(p->items[ocr_params_find(p, "backbone.stem.stem1.conv.weight")].lr_mult == 0.5f);
    ck_assert(p->items[ocr_params_find(p, "backbone.stem.stem4.bn.bias")].lr_mult == 0.5f);
    ck_assert(p->items[ocr_params_find(p, "backbone.stages.2.downsample.conv.weight")].lr_mult == 0.25f);
    ck_assert(p->items[ocr_params_find(p, "backbone.stages.2.blocks.2.aggregation_excitation_conv.bn.weight")]
                  .lr_mult == 0.25f);
    ck_assert(p->items[ocr_params_find(p, "backbone.stages.1.blocks.0.layers.0.conv.weight")].lr_mult == 1.0f);
    ocr_model_free(m);
}
END_TEST

// A MultiHead training step on a tiny batch: logits (B, W/8, classes) finite; with use_guide the CTC
// branch sends the backbone nothing, the NRTR branch does; the unused classifier's gradient stays 0.
START_TEST(test_multihead_step) {
    OcrModel *m = tm_model("rec_ppocrv5_server.json", NULL);
    const int B = 2, L = 25;
    int32_t labels[2 * 25] = {0}, lengths[2] = {3, 5};
    for (int i = 0; i < 5; i++) labels[i] = 10 + i, labels[L + i] = 200 + 7 * i;
    ck_assert_msg(ocr_model_set_guide_labels(m, labels, lengths, B, L) == OCR_OK, "%s", ocr_last_error());
    OcrTensor x = tm_images(B, 48, 64, 3);
    ck_assert_msg(ocr_model_forward(m, &x, 1) == OCR_OK, "%s", ocr_last_error());
    const OcrTensor *lg = ocr_model_logits(m);
    ck_assert_int_eq(lg->shape[0], B);
    ck_assert_int_eq(lg->shape[1], 8);  // 64 / 4 (stem1, stage2) / 2 (the training pool)
    ck_assert_int_eq(lg->shape[2], 18385);
    float *lv = tm_copy_f32(lg);
    for (int64_t i = 0; i < ocr_tensor_numel(lg); i++) ck_assert_msg(isfinite(lv[i]), "logit %lld", (long long)i);
    free(lv);
    OcrTensor *d1 = ocr_model_dlogits(m), *d2 = ocr_model_guide_dlogits(m);
    ck_assert_ptr_nonnull(d2);
    float *w1 = malloc((size_t)ocr_tensor_numel(d1) * sizeof(float)),
          *w2 = malloc((size_t)ocr_tensor_numel(d2) * sizeof(float));
    ocr_rng_fill_uniform(w1, (size_t)ocr_tensor_numel(d1), 1, 1, 0, -1e-2f, 1e-2f);
    ocr_rng_fill_uniform(w2, (size_t)ocr_tensor_numel(d2), 2, 2, 0, -1e-2f, 1e-2f);
    ocr_tensor_from_f32(d1, w1);
    ocr_tensor_from_f32(d2, w2);
    ck_assert_msg(ocr_model_backward(m) == OCR_OK, "%s", ocr_last_error());
    OcrParamTable *p = ocr_model_params(m);
    int nonzero = 0;
    for (int i = 0; i < p->count; i++) {
        OcrTensor g = ocr_params_grad(p, i);
        double s = 0;
        for (int64_t k = 0; k < ocr_tensor_numel(&g); k++) s += fabs(ocr_tensor_get_f32(&g, k));
        ck_assert_msg(isfinite(s), "%s has a non-finite gradient", p->items[i].name);
        int unused = strncmp(p->items[i].name, "backbone.last_conv.", 19) == 0 ||
                     strncmp(p->items[i].name, "backbone.fc.", 12) == 0;
        if (unused) ck_assert_msg(s == 0, "%s (never run) has a gradient", p->items[i].name);
        else ck_assert_msg(s > 0, "%s has no gradient", p->items[i].name);
        nonzero += s > 0;
    }
    printf("PP-OCRv5 server MultiHead step: %d of %d parameter tensors with a nonzero gradient\n", nonzero, p->count);
    ck_assert_int_eq(nonzero, p->count - 3);
    free(w1);
    free(w2);
    ocr_tensor_free(&x);
    ocr_model_free(m);
}
END_TEST

// The deploy form from the training form (ocr_model_fuse): the same network without the unused
// classifier, so the eval-mode logits are the same bits.
START_TEST(test_deploy_form) {
    OcrModel *t = tm_model("rec_ppocrv5_server.json", NULL);
    tm_randomize_and_calibrate(t, 41, 2, 48, 64);
    OcrModel *d;
    ck_assert_msg(ocr_model_fuse(&d, t) == OCR_OK, "%s", ocr_last_error());
    ck_assert(ocr_model_arch(d)->hgnet2.deploy);
    ck_assert_int_eq(ocr_model_param_count(d), SERVER_DEPLOY);
    OcrModel *again;
    ck_assert_int_eq(ocr_model_fuse(&again, d), OCR_ERR_INVALID_ARG);  // already in deploy form
    OcrTensor x = tm_images(1, 48, 64, 7);
    ck_assert(ocr_model_forward(t, &x, 0) == OCR_OK);
    const OcrTensor *lt = ocr_model_logits(t);
    ck_assert_int_eq(lt->shape[1], 8);  // inference: AvgPool (3, 2) of the 3x16 map
    float *a = tm_copy_f32(lt);
    int64_t n = ocr_tensor_numel(lt);
    ck_assert(ocr_model_forward(d, &x, 0) == OCR_OK);
    float *b = tm_copy_f32(ocr_model_logits(d));
    ck_assert_msg(memcmp(a, b, (size_t)n * sizeof(float)) == 0, "the deploy form's logits differ");
    // OCR_PPOCRV5_SERVER_DUMP=DIR: the deploy network's weights, this input and its probabilities for
    // tools/ppocrv5_server_param_counts.py --parity DIR (Hugging Face's port of the network, outside CI).
    const char *dump = getenv("OCR_PPOCRV5_SERVER_DUMP");
    if (dump) {
        char path[1024];
        snprintf(path, sizeof path, "%s/weights.safetensors", dump);
        ck_assert_msg(ocr_model_save_weights(d, path) == OCR_OK, "%s", ocr_last_error());
        const OcrTensor *pr = ocr_model_probs(d);
        const struct {
            const char *name;
            const OcrTensor *t;
        } out[2] = {{"input_1x48x64x3.f32", &x}, {"probs.f32", pr}};
        for (int k = 0; k < 2; k++) {
            snprintf(path, sizeof path, "%s/%s", dump, out[k].name);
            FILE *f = fopen(path, "wb");
            ck_assert_msg(f != NULL, "cannot write %s", path);
            float *v = tm_copy_f32(out[k].t);
            ck_assert(fwrite(v, sizeof(float), (size_t)ocr_tensor_numel(out[k].t), f) ==
                      (size_t)ocr_tensor_numel(out[k].t));
            fclose(f);
            free(v);
        }
        printf("wrote the deploy network's weights, input and probabilities (%lldx%lldx%lld) to %s\n",
               (long long)pr->shape[0], (long long)pr->shape[1], (long long)pr->shape[2], dump);
    }
    free(a);
    free(b);
    ocr_tensor_free(&x);
    ocr_model_free(d);
    ocr_model_free(t);
}
END_TEST

// ---- gradients against finite differences ----------------------------------------------------------------------
// The method of tests/models/test_ppocrv6_arch.c: L = Σ w·logits summed in double, a training pass
// (BN batch statistics) of a CTC-only PPHGNetV2_B4 (reshape neck, 11 classes) on 2 images 48x32; for
// each sampled tensor the central differences of L along the analytic gradient g (steps s, s/2 and
// their Richardson extrapolation) must equal |g|² within 2e-2 plus the measured fp32 noise of L.

typedef struct {
    OcrModel *m;
    OcrTensor x;
    double *w;
    int64_t n;
    double l0;
} GC;

static double loss(GC *g) {
    ck_assert_msg(ocr_model_forward(g->m, &g->x, 1) == OCR_OK, "%s", ocr_last_error());
    const OcrTensor *l = ocr_model_logits(g->m);
    const float *v = l->data;
    double s = 0;
    for (int64_t i = 0; i < g->n; i++) s += g->w[i] * v[i];
    return s;
}

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

static int check_tensor(GC *g, const char *what, OcrTensor *t, const float *ga) {
    int64_t n = ocr_tensor_numel(t);
    float *orig = malloc((size_t)n * sizeof(float));
    memcpy(orig, t->data, (size_t)n * sizeof(float));
    double g2 = 0, t2 = 0;
    for (int64_t i = 0; i < n; i++) {
        g2 += (double)ga[i] * ga[i];
        t2 += (double)orig[i] * orig[i];
    }
    double tnorm = fmax(sqrt(t2), 0.05 * sqrt((double)n));
    double s = fmin(1e-2 / fmax(g2, 1e-30), 1e-2 * tnorm / fmax(sqrt(g2), 1e-30));
    double d1 = dir_deriv(g, t, orig, ga, s), d2 = dir_deriv(g, t, orig, ga, s / 2);
    double rich = (4 * d2 - d1) / 3, num = rich;
    if (fabs(d1 - g2) < fabs(num - g2)) num = d1;
    if (fabs(d2 - g2) < fabs(num - g2)) num = d2;
    double eps = s / 1024, noise = 0;
    for (int sign = -1; sign <= 1; sign += 2) {
        for (int64_t i = 0; i < n; i++) ((float *)t->data)[i] = (float)(orig[i] + sign * eps * ga[i]);
        noise = fmax(noise, fabs(loss(g) - g->l0 - sign * eps * g2));
    }
    memcpy(t->data, orig, (size_t)n * sizeof(float));
    double allowed = 2e-2 + 3 * noise / (s * fmax(g2, 1e-30));
    double err = fabs(num - g2) / fmax(fmax(fabs(num), g2), 1e-30);
    int bad = err > allowed;
    printf("  %-62s |g|^2 %11.5g numeric %11.5g rel err %.2e of %.2e%s\n", what, g2, num, err, allowed,
           bad ? "  <-- FAIL" : "");
    free(orig);
    return bad;
}

#define SERVER_CTC                                                                                               \
    "{\"Global\": {\"character_dict_path\": \"\", \"use_space_char\": false, \"seed\": 3},"                      \
    " \"Architecture\": {\"model_type\": \"rec\", \"algorithm\": \"SVTR_HGNet\", \"Backbone\": {\"name\":"       \
    " \"PPHGNetV2_B4\", \"text_rec\": true, \"deploy\": true}, \"Neck\": {\"name\": \"SequenceEncoder\","          \
    " \"encoder_type\": \"reshape\"}, \"Head\": {\"name\": \"CTCHead\", \"out_channels\": 11}}}"

START_TEST(test_gradcheck) {
    GC g = {0};
    OcrConfig *cfg;
    ck_assert_msg(ocr_config_parse(&cfg, SERVER_CTC, "ppocrv5-server-test") == OCR_OK, "%s", ocr_last_error());
    ck_assert_msg(ocr_model_from_config(&g.m, cfg) == OCR_OK, "%s", ocr_last_error());
    ocr_config_free(cfg);
    tm_randomize_bn(g.m, 23);
    g.x = tm_images(2, 48, 32, 17);
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
    const char *const params[] = {"backbone.stem.stem1.conv.weight",
                                  "backbone.stem.stem2a.conv.weight",
                                  "backbone.stem.stem2b.bn.weight",
                                  "backbone.stem.stem3.conv.weight",
                                  "backbone.stem.stem4.bn.bias",
                                  "backbone.stages.0.downsample.conv.weight",
                                  "backbone.stages.0.blocks.0.layers.0.conv.weight",
                                  "backbone.stages.1.blocks.0.layers.5.bn.weight",
                                  "backbone.stages.1.blocks.0.aggregation_squeeze_conv.conv.weight",
                                  "backbone.stages.2.blocks.1.layers.2.conv1.conv.weight",
                                  "backbone.stages.2.blocks.2.layers.4.conv2.conv.weight",
                                  "backbone.stages.2.blocks.2.aggregation_excitation_conv.bn.bias",
                                  "backbone.stages.3.blocks.0.layers.0.conv2.bn.weight",
                                  "head.fc.weight",
                                  NULL};
    OcrParamTable *p = ocr_model_params(g.m);
    int np = 0;
    while (params[np]) np++;
    float **gp = calloc((size_t)np, sizeof *gp);
    for (int k = 0; k < np; k++) {
        int i = ocr_params_find(p, params[k]);
        ck_assert_msg(i >= 0, "no parameter %s", params[k]);
        OcrTensor gt = ocr_params_grad(p, i);
        gp[k] = tm_copy_f32(&gt);
    }
    printf("PP-OCRv5 server backbone (PPHGNetV2_B4 text_rec), CTC only:\n");
    int bad = check_tensor(&g, "input", &g.x, gx);
    for (int k = 0; k < np; k++) {
        OcrTensor t = ocr_params_tensor(p, ocr_params_find(p, params[k]));
        bad += check_tensor(&g, params[k], &t, gp[k]);
        free(gp[k]);
    }
    ck_assert_msg(bad == 0, "%d of %d tensors disagree with finite differences", bad, np + 1);
    free(gp);
    free(gx);
    free(wf);
    free(g.w);
    ocr_tensor_free(&g.x);
    ocr_model_free(g.m);
}
END_TEST

int main(void) {
    Suite *s = suite_create("models_ppocrv5_server_arch");
    TCase *tc = tcase_create("ppocrv5_server");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_counts_and_names);
    tcase_add_test(tc, test_paddle_yaml);
    tcase_add_test(tc, test_multihead_step);
    tcase_add_test(tc, test_deploy_form);
    suite_add_tcase(s, tc);
    TCase *gc = tcase_create("gradcheck");
    tcase_set_timeout(gc, 900);
    tcase_add_test(gc, test_gradcheck);
    suite_add_tcase(s, gc);
    return ocr_test_run_suite(s);
}

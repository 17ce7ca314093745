// PP-OCRv6 tiny, small and medium recognizers (PPLCNetV4, the tiny's guided CTC head, the small's and
// medium's LightSVTR neck): built from configs/rec_ppocrv6_{tiny,small,medium}.json, parameter counts and names
// against PaddleOCR's (tests/models/data/ppocrv6_*_names.txt, written by
// tools/ppocrv6_param_counts.py from PaddleOCR's source structure; its deploy totals equal the
// initialisers of PaddleOCR's exported ONNX files tensor for tensor), gradients against finite
// differences on narrow inputs, training form against the fused deploy form, and the pad op
// (SAME padding of even kernels) forward, adjoint and finite differences.
#include "kernels/backend.h"
#include "models/svtr/lcnetv4.h"
#include "tests/models/model_test_util.h"

// ---- counts and names ----------------------------------------------------------------------------------------------

// PaddleOCR's numbers (tools/ppocrv6_param_counts.py): trainable parameters / BN statistics.
#define TINY_TRAIN 15944462    // MultiHead: CTC branch 1,109,774 + NRTR 14,834,688
#define TINY_STATS 9840
#define TINY_DEPLOY 15938398   // CTC branch 1,103,710 (ONNX: 1,104,494 with 784 statistics)
#define TINY_DEPLOY_STATS 784
#define SMALL_TRAIN 29270246   // CTC branch 5,284,070 + NRTR 23,986,176
#define SMALL_STATS 26208
#define SMALL_DEPLOY 29253086  // CTC branch 5,266,910 (ONNX: 5,267,630 with 720 statistics)
#define SMALL_DEPLOY_STATS 720
#define MEDIUM_TRAIN 55527798   // CTC branch 19,155,318 + NRTR 36,372,480
#define MEDIUM_STATS 62784
#define MEDIUM_DEPLOY 55486486  // CTC branch 19,114,006
#define MEDIUM_DEPLOY_STATS 1152

static int64_t table_numel(const OcrParamTable *t) {
    int64_t n = 0;
    for (int i = 0; i < t->count; i++) n += t->items[i].numel;
    return n;
}

// Every line "name<TAB>shape<TAB>kind" of the PaddleOCR list must be a tensor of ours with as many
// elements (layouts differ: Paddle's conv is (OC, C/g, KH, KW), ours (OC, KH, KW, C/g)), in the
// parameter table for "param" and the statistics table for "stat", and nothing else may exist.
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

START_TEST(test_counts_and_names) {
    struct {
        const char *cfg, *over, *names;
        int64_t params, stats;
        const char *backbone;
    } cases[] = {
        {"rec_ppocrv6_tiny.json", NULL, "ppocrv6_tiny_train_names.txt", TINY_TRAIN, TINY_STATS, NULL},
        {"rec_ppocrv6_tiny.json", "Architecture.Backbone.deploy=true", "ppocrv6_tiny_deploy_names.txt", TINY_DEPLOY,
         TINY_DEPLOY_STATS, NULL},
        {"rec_ppocrv6_small.json", NULL, "ppocrv6_small_train_names.txt", SMALL_TRAIN, SMALL_STATS, NULL},
        {"rec_ppocrv6_small.json", "Architecture.Backbone.deploy=true", "ppocrv6_small_deploy_names.txt",
         SMALL_DEPLOY, SMALL_DEPLOY_STATS, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *ov[2] = {cases[i].over, NULL};
        OcrModel *m = tm_model(cases[i].cfg, ov);
        ck_assert_msg(ocr_model_param_count(m) == cases[i].params, "%s %s: %lld parameters, PaddleOCR %lld",
                      cases[i].cfg, cases[i].over ? cases[i].over : "", (long long)ocr_model_param_count(m),
                      (long long)cases[i].params);
        ck_assert_int_eq(table_numel(ocr_model_stats(m)), cases[i].stats);
        check_names(m, cases[i].names);
        ocr_model_free(m);
    }
    // Medium (configs/rec_ppocrv6_medium.json, and PaddleOCR's PP-OCRv6_medium_rec.yml as it ships with
    // only the dictionary path changed: model_size medium, LightSVTR dims 192, mlp_ratio 4, NRTR 512):
    // tools/ppocrv6_param_counts.py's arithmetic only (no exported file to check it against here).
    struct {
        const char *cfg, *over, *names;
        int64_t params, stats;
    } med[] = {
        {"rec_ppocrv6_medium.json", NULL, "ppocrv6_medium_train_names.txt", MEDIUM_TRAIN, MEDIUM_STATS},
        {"rec_ppocrv6_medium.json", "Architecture.Backbone.deploy=true", "ppocrv6_medium_deploy_names.txt",
         MEDIUM_DEPLOY, MEDIUM_DEPLOY_STATS},
        {"../tests/models/data/ppocrv6_medium_rec.yml", NULL, "ppocrv6_medium_train_names.txt", MEDIUM_TRAIN,
         MEDIUM_STATS},
    };
    char dict[1024];
    snprintf(dict, sizeof dict, "Global.character_dict_path=\"%s/configs/dicts/ppocrv6_dict.txt\"", OCR_SOURCE_DIR);
    for (size_t i = 0; i < sizeof med / sizeof med[0]; i++) {
        const char *ov[3] = {dict, med[i].over, NULL};
        OcrModel *md = tm_model(med[i].cfg, ov);
        const OcrArch *ma = ocr_model_arch(md);
        ck_assert(ma->backbone == OCR_BACKBONE_LCNETV4 && ma->lcnet4.size == OCR_LCNETV4_MEDIUM);
        ck_assert(ma->neck_light && ma->light.dims == 192 && ma->light.mlp_ratio == 4.0f && ma->light.depth == 2 &&
                  ma->multihead.nrtr_dim == 512 && ma->num_classes == 18710);
        ck_assert_msg(ocr_model_param_count(md) == med[i].params, "%s %s: %lld parameters, PaddleOCR %lld",
                      med[i].cfg, med[i].over ? med[i].over : "", (long long)ocr_model_param_count(md),
                      (long long)med[i].params);
        ck_assert_int_eq(table_numel(ocr_model_stats(md)), med[i].stats);
        check_names(md, med[i].names);
        ocr_model_free(md);
    }
    // PaddleOCR's PP-OCRv6_tiny_rec.yml and PP-OCRv6_small_rec.yml as they ship (tests/models/data), only
    // the dictionary path changed: PaddleOCR's totals and names, as the JSON configs above.
    struct {
        const char *yml, *dict, *names;
        int64_t params, stats;
    } yml[] = {
        {"ppocrv6_tiny_rec.yml", "ppocrv6_tiny_dict.txt", "ppocrv6_tiny_train_names.txt", TINY_TRAIN, TINY_STATS},
        {"ppocrv6_small_rec.yml", "ppocrv6_dict.txt", "ppocrv6_small_train_names.txt", SMALL_TRAIN, SMALL_STATS},
    };
    for (size_t i = 0; i < sizeof yml / sizeof yml[0]; i++) {
        char path[96], dov[1200];
        snprintf(path, sizeof path, "../tests/models/data/%s", yml[i].yml);
        snprintf(dov, sizeof dov, "Global.character_dict_path=\"%s/configs/dicts/%s\"", OCR_SOURCE_DIR, yml[i].dict);
        const char *ov[2] = {dov, NULL};
        OcrModel *my = tm_model(path, ov);
        ck_assert_msg(ocr_model_param_count(my) == yml[i].params, "%s: %lld parameters, PaddleOCR %lld", yml[i].yml,
                      (long long)ocr_model_param_count(my), (long long)yml[i].params);
        ck_assert_int_eq(table_numel(ocr_model_stats(my)), yml[i].stats);
        check_names(my, yml[i].names);
        ocr_model_free(my);
    }
    // PaddleOCR's PP-OCRv5_mobile_rec.yml (MultiHead: PPLCNetV3 0.95, svtr neck with use_guide, NRTR 384)
    // with ppocrv5_dict.txt: its CTC branch (every tensor outside head.gtc_head and head.before_gtc)
    // is configs/rec_ppocrv5_mobile.json's network, PaddleOCR's 7,682,365 trainable parameters.
    {
        char dov[1200];
        snprintf(dov, sizeof dov, "Global.character_dict_path=\"%s/configs/dicts/ppocrv5_dict.txt\"", OCR_SOURCE_DIR);
        const char *ov[2] = {dov, NULL};
        OcrModel *mh = tm_model("../tests/models/data/ppocrv5_mobile_rec.yml", ov), *mc = tm_model("rec_ppocrv5_mobile.json", NULL);
        const OcrArch *ah = ocr_model_arch(mh);
        ck_assert(ah->backbone == OCR_BACKBONE_LCNETV3 && ah->num_classes == 18385 && ah->multihead.nrtr_dim == 384);
        OcrParamTable *ph = ocr_model_params(mh), *pc = ocr_model_params(mc);
        int64_t ctc = 0;
        int n_ctc = 0;
        for (int i = 0; i < ph->count; i++) {
            const char *nm = ph->items[i].name;
            if (strncmp(nm, "head.gtc_head", 13) == 0 || strncmp(nm, "head.before_gtc", 15) == 0) continue;
            ctc += ph->items[i].numel, n_ctc++;
        }
        ck_assert_msg(ctc == 7682365 && ocr_model_param_count(mc) == 7682365,
                      "PP-OCRv5_mobile_rec.yml's CTC branch: %lld parameters, rec_ppocrv5_mobile.json %lld, PaddleOCR 7682365",
                      (long long)ctc, (long long)ocr_model_param_count(mc));
        ck_assert_int_eq(n_ctc, pc->count);
        ocr_model_free(mh), ocr_model_free(mc);
    }
    // Classes: 6,904 and 18,708 dictionary lines + blank + space; NRTR's vocabulary 4 more.
    OcrModel *m = tm_model("rec_ppocrv6_tiny.json", NULL);
    ck_assert_int_eq(ocr_model_arch(m)->num_classes, 6906);
    ck_assert(ocr_model_arch(m)->backbone == OCR_BACKBONE_LCNETV4 && ocr_model_arch(m)->lcnet4.size == OCR_LCNETV4_TINY);
    ck_assert(ocr_model_arch(m)->head_guide && ocr_model_arch(m)->head_mid == 80 && !ocr_model_arch(m)->neck_light);
    OcrParamTable *p = ocr_model_params(m);
    int e = ocr_params_find(p, "head.gtc_head.embedding.embedding.weight");
    ck_assert_int_eq(p->items[e].shape[0], 6910);
    // The residual blocks' compress BN starts at 0 (bn_weight_init 0), the others at 1.
    OcrTensor z = ocr_params_tensor(p, ocr_params_find(p, "backbone.blocks5.1.channel_mixer.compress.bn.weight"));
    OcrTensor one = ocr_params_tensor(p, ocr_params_find(p, "backbone.blocks5.0.channel_mixer.compress.bn.weight"));
    ck_assert(ocr_tensor_get_f32(&z, 0) == 0.0f && ocr_tensor_get_f32(&one, 0) == 1.0f);
    ocr_model_free(m);
    m = tm_model("rec_ppocrv6_small.json", NULL);
    const OcrArch *a = ocr_model_arch(m);
    ck_assert_int_eq(a->num_classes, 18710);
    ck_assert(a->neck_light && a->light.dims == 120 && a->light.depth == 2 && a->light.local_kernel == 7 &&
              a->light.mlp_ratio == 2.0f && a->light.heads == 8 && !a->head_guide);
    ocr_model_free(m);
}
END_TEST

// PaddleOCR's own keys: the older PP-OCRv6 configs' backbone keys are accepted as PaddleOCR
// accepts them (into **kwargs, without effect), a wrong model_size is named.
START_TEST(test_config_keys) {
    const char *const ov[] = {"Architecture.Backbone.use_rep=true", "Architecture.Backbone.stem_type=\"simple\"",
                              "Architecture.Backbone.stem_channels=48", NULL};
    OcrConfig *cfg = tm_config("rec_ppocrv6_tiny.json", ov);
    OcrArch arch;
    ck_assert_msg(ocr_arch_from_config(&arch, cfg) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(ocr_config_num_ignored(cfg), 3);
    ocr_config_free(cfg);
    // An early PP-OCRv6_tiny_rec.yml's config_name: tiny next to the small network it builds (no
    // model_size: PaddleOCR's default) is named as naming another network; matching, it is not.
    const char *const cn[] = {"Architecture.Backbone.config_name=\"tiny\"", NULL};
    cfg = tm_config("rec_ppocrv6_small.json", cn);
    ck_assert_msg(ocr_arch_from_config(&arch, cfg) == OCR_OK, "%s", ocr_last_error());
    ck_assert(arch.lcnet4.size == OCR_LCNETV4_SMALL);
    const char *why = NULL;
    ck_assert_str_eq(ocr_config_ignored(cfg, 0, &why), "Architecture.Backbone.config_name");
    ck_assert_msg(strstr(why, "another network") != NULL, "%s", why);
    ocr_config_free(cfg);
    cfg = tm_config("rec_ppocrv6_tiny.json", cn);
    ck_assert_msg(ocr_arch_from_config(&arch, cfg) == OCR_OK, "%s", ocr_last_error());
    ocr_config_ignored(cfg, 0, &why);
    ck_assert_msg(strstr(why, "another network") == NULL, "%s", why);
    ocr_config_free(cfg);
    const char *const bad[] = {"Architecture.Backbone.model_size=\"huge\"", NULL};
    cfg = tm_config("rec_ppocrv6_tiny.json", bad);
    ck_assert(ocr_arch_from_config(&arch, cfg) == OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "model_size") != NULL, "%s", ocr_last_error());
    ocr_config_free(cfg);
    // lr_mult_list: entry 0 on the branch stem's ConvBNActs, entries 1..5 on the SE convs only.
    const char *const lr[] = {"Architecture.Backbone.lr_mult_list=[0.5, 1, 1, 1, 0.25, 1]", NULL};
    OcrModel *m = tm_model("rec_ppocrv6_small.json", lr);
    OcrParamTable *p = ocr_model_params(m);
    ck_assert(p->items[ocr_params_find(p, "backbone.conv1.stem1.conv.weight")].lr_mult == 0.5f);
    ck_assert(p->items[ocr_params_find(p, "backbone.conv1.stem2b.bn.bias")].lr_mult == 0.5f);
    ck_assert(p->items[ocr_params_find(p, "backbone.blocks5.1.token_mixer.se.conv1.bias")].lr_mult == 0.25f);
    ck_assert(p->items[ocr_params_find(p, "backbone.blocks5.1.channel_mixer.expand.conv.weight")].lr_mult == 1.0f);
    ck_assert(p->items[ocr_params_find(p, "backbone.blocks4.1.token_mixer.se.conv2.weight")].lr_mult == 1.0f);
    ocr_model_free(m);
    const char *const lk[] = {"Architecture.Head.head_list.0.CTCHead.Neck.local_kernel=6", NULL};
    cfg = tm_config("rec_ppocrv6_small.json", lk);
    ck_assert(ocr_arch_from_config(&arch, cfg) == OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "local_kernel") != NULL, "%s", ocr_last_error());
    ocr_config_free(cfg);
}
END_TEST

// A MultiHead training step of each network (CTC and NRTR branches, the guide layer, LightSVTR)
// plans, runs and sends a finite gradient to every parameter tensor of the CTC path.
START_TEST(test_multihead_step) {
    const char *cfgs[3] = {"rec_ppocrv6_tiny.json", "rec_ppocrv6_small.json", "rec_ppocrv6_medium.json"};
    for (int c = 0; c < 3; c++) {
        OcrModel *m = tm_model(cfgs[c], NULL);
        const int B = 2, L = 25;
        int32_t labels[2 * 25] = {0}, lengths[2] = {3, 5};
        for (int i = 0; i < 5; i++) labels[i] = 10 + i, labels[L + i] = 200 + 7 * i;
        ck_assert_msg(ocr_model_set_guide_labels(m, labels, lengths, B, L) == OCR_OK, "%s", ocr_last_error());
        OcrTensor x = tm_images(B, 48, 64, 3);
        ck_assert_msg(ocr_model_forward(m, &x, 1) == OCR_OK, "%s", ocr_last_error());
        ck_assert_int_eq(ocr_model_logits(m)->shape[1], 8);  // W/8: adaptive pool to half the 16 columns
        OcrTensor *d1 = ocr_model_dlogits(m), *d2 = ocr_model_guide_dlogits(m);
        ck_assert_ptr_nonnull(d2);
        float *w1 = malloc((size_t)ocr_tensor_numel(d1) * sizeof(float)), *w2 = malloc((size_t)ocr_tensor_numel(d2) * sizeof(float));
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
            ck_assert_msg(isfinite(s), "%s: %s has a non-finite gradient", cfgs[c], p->items[i].name);
            nonzero += s > 0;
        }
        printf("%s: MultiHead step, %d of %d parameter tensors with a nonzero gradient\n", cfgs[c], nonzero, p->count);
        // The exceptions are the residual blocks' expand and compress weights: the compress BN's
        // gamma starts at 0 (bn_weight_init 0), which holds their gradient at exactly 0 at first.
        ck_assert_int_ge(nonzero, p->count * 3 / 4);
        free(w1);
        free(w2);
        ocr_tensor_free(&x);
        ocr_model_free(m);
    }
}
END_TEST

// ---- training form against the fused deploy form --------------------------------------------------------------------

// rel_tol: the fp32 reassociation of the two forms grows with width and depth (medium: 512-768
// channels, rel L2 about 1e-5 with random BN).
static void check_fusion(const char *cfg_name, int H, int W, double rel_tol) {
    OcrModel *t = tm_model(cfg_name, NULL);
    tm_randomize_and_calibrate(t, 41, 4, H, W);
    OcrModel *d;
    ck_assert_msg(ocr_model_fuse(&d, t) == OCR_OK, "%s", ocr_last_error());
    ck_assert(ocr_model_arch(d)->lcnet4.deploy);
    OcrTensor x = tm_images(2, H, W, 7);
    ck_assert(ocr_model_forward(t, &x, 0) == OCR_OK);
    const OcrTensor *lt = ocr_model_logits(t);
    float *a = tm_copy_f32(lt);
    int64_t n = ocr_tensor_numel(lt);
    ck_assert(ocr_model_forward(d, &x, 0) == OCR_OK);
    float *b = tm_copy_f32(ocr_model_logits(d));
    double rel = tm_rel_l2(b, a, n), mx = tm_max_diff(b, a, n), scale = tm_max_abs(a, n);
    printf("%s fused vs training form (eval): rel L2 %.3g, max |diff| %.3g of max |logit| %.3g\n", cfg_name, rel, mx,
           scale);
    ck_assert_msg(rel < rel_tol && mx < 10 * rel_tol * fmax(scale, 1.0), "%s: the deploy form differs (rel %.3g)",
                  cfg_name, rel);
    free(a);
    free(b);
    ocr_tensor_free(&x);
    ocr_model_free(d);
    ocr_model_free(t);
}

START_TEST(test_fusion_tiny) { check_fusion("rec_ppocrv6_tiny.json", 48, 160, 1e-5); }
END_TEST

START_TEST(test_fusion_small) { check_fusion("rec_ppocrv6_small.json", 48, 96, 1e-5); }
END_TEST

START_TEST(test_fusion_medium) { check_fusion("rec_ppocrv6_medium.json", 48, 64, 3e-5); }
END_TEST

// ---- gradients against finite differences --------------------------------------------------------------------------
// The method of tests/models/test_gradcheck.c: L = Σ w·logits summed in double, a training pass
// (BN batch statistics, no dropout) on a batch of 2 narrow images; for each sampled tensor L is
// evaluated at θ ± s·g along the analytic gradient g, and the central differences (steps s and
// s/2 and their Richardson extrapolation, the closest judged) must equal |g|² within 2e-2 plus
// the measured fp32 noise of L. CTC-only heads (CTCHead, no NRTR branch) with 11 classes.

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
    double h_rel = getenv("OCR_GRADCHECK_HREL") ? atof(getenv("OCR_GRADCHECK_HREL")) : 1e-2;
    double dl = getenv("OCR_GRADCHECK_DL") ? atof(getenv("OCR_GRADCHECK_DL")) : 1e-2;
    double s = fmin(dl / fmax(g2, 1e-30), h_rel * tnorm / fmax(sqrt(g2), 1e-30));
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

static OcrModel *ctc_model(const char *arch_json, const char *const *overrides) {
    char text[4096];
    snprintf(text, sizeof text,
             "{\"Global\": {\"character_dict_path\": \"\", \"use_space_char\": false, \"seed\": 3},"
             " \"Architecture\": %s}",
             arch_json);
    OcrConfig *cfg;
    ck_assert_msg(ocr_config_parse(&cfg, text, "ppocrv6-test") == OCR_OK, "%s", ocr_last_error());
    for (int i = 0; overrides && overrides[i]; i++)
        ck_assert_msg(ocr_config_apply_override(cfg, overrides[i]) == OCR_OK, "%s", ocr_last_error());
    OcrModel *m;
    ck_assert_msg(ocr_model_from_config(&m, cfg) == OCR_OK, "%s", ocr_last_error());
    ocr_config_free(cfg);
    return m;
}

#define TINY_CTC                                                                                               \
    "{\"model_type\": \"rec\", \"algorithm\": \"SVTR_LCNet\", \"Backbone\": {\"name\": \"PPLCNetV4\","         \
    " \"model_size\": \"tiny\"}, \"Neck\": {\"name\": \"SequenceEncoder\", \"encoder_type\": \"reshape\"},"      \
    " \"Head\": {\"name\": \"CTCHead\", \"mid_channels\": 16, \"use_guide\": true, \"out_channels\": 11}}"
#define SMALL_CTC                                                                                              \
    "{\"model_type\": \"rec\", \"algorithm\": \"SVTR_LCNet\", \"Backbone\": {\"name\": \"PPLCNetV4\","         \
    " \"model_size\": \"small\"}, \"Neck\": {\"name\": \"SequenceEncoder\", \"encoder_type\": \"lightsvtr\","   \
    " \"dims\": 24, \"depth\": 1, \"num_heads\": 4, \"mlp_ratio\": 2.0, \"local_kernel\": 7, \"drop_rate\": 0," \
    " \"attn_drop_rate\": 0}, \"Head\": {\"name\": \"CTCHead\", \"out_channels\": 11}}"

static void gradcheck(const char *arch, const char *const *ov, const char *label, const char *const *params) {
    GC g = {0};
    g.m = ctc_model(arch, ov);
    // BN affine parameters away from their initial values: a residual block's compress BN starts
    // at gamma 0, which would stop every gradient into its channel mixer.
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
    printf("%s:\n", label);
    int bad = check_tensor(&g, "input", &g.x, gx);
    for (int k = 0; k < np; k++) {
        OcrTensor t = ocr_params_tensor(p, ocr_params_find(p, params[k]));
        bad += check_tensor(&g, params[k], &t, gp[k]);
        free(gp[k]);
    }
    ck_assert_msg(bad == 0, "%s: %d of %d tensors disagree with finite differences", label, bad, np + 1);
    free(gp);
    free(gx);
    free(wf);
    free(g.w);
    ocr_tensor_free(&g.x);
    ocr_model_free(g.m);
}

START_TEST(test_gradcheck_tiny) {
    const char *const params[] = {"backbone.conv1.0.conv.weight",
                                  "backbone.conv1.2.bn.weight",
                                  "backbone.blocks2.0.token_mixer.rep_dw.conv.conv.weight",
                                  "backbone.blocks2.0.token_mixer.rep_dw.conv1.weight",
                                  "backbone.blocks2.0.token_mixer.rep_dw.bn.bias",
                                  "backbone.blocks2.0.token_mixer.se.conv2.weight",
                                  "backbone.blocks3.0.channel_mixer.expand.conv.weight",
                                  "backbone.blocks3.0.channel_mixer.compress.bn.weight",
                                  "backbone.blocks4.0.token_mixer.dw_conv.conv.weight",
                                  "backbone.blocks5.3.channel_mixer.expand.bn.bias",
                                  "head.guide_layer.0.weight",
                                  "head.guide_layer.1.weight",
                                  "head.guide_layer.3.weight",
                                  "head.guide_layer.4.bias",
                                  "head.fc1.weight",
                                  "head.fc2.bias",
                                  NULL};
    gradcheck(TINY_CTC, NULL, "PP-OCRv6 tiny, training form", params);
}
END_TEST

START_TEST(test_gradcheck_small) {
    const char *const params[] = {"backbone.conv1.stem1.conv.weight",
                                  "backbone.conv1.stem2a.conv.weight",
                                  "backbone.conv1.stem2b.bn.weight",
                                  "backbone.conv1.stem3.conv.weight",
                                  "backbone.conv1.stem4.bn.bias",
                                  "backbone.blocks3.1.token_mixer.rep_dw.conv.bn.weight",
                                  "backbone.blocks4.0.channel_mixer.compress.conv.weight",
                                  "neck.encoder.conv_reduce.conv.weight",
                                  "neck.encoder.local_conv.0.weight",
                                  "neck.encoder.local_conv.1.weight",
                                  "neck.encoder.svtr_block.0.mixer.qkv.weight",
                                  "neck.encoder.svtr_block.0.mlp.fc2.bias",
                                  "neck.encoder.norm.weight",
                                  "neck.encoder.skip_conv.conv.weight",
                                  "neck.encoder.skip_conv.norm.bias",
                                  "head.fc.weight",
                                  NULL};
    gradcheck(SMALL_CTC, NULL, "PP-OCRv6 small, training form", params);
}
END_TEST

START_TEST(test_gradcheck_tiny_deploy) {
    const char *const ov[] = {"Architecture.Backbone.deploy=true", NULL};
    const char *const params[] = {"backbone.conv1.0.conv.weight",
                                  "backbone.blocks2.0.token_mixer.rep_dw.reparam_conv.weight",
                                  "backbone.blocks2.0.token_mixer.rep_dw.reparam_conv.bias",
                                  "backbone.blocks4.0.token_mixer.dw_conv.weight",
                                  "backbone.blocks4.1.channel_mixer.expand.weight",
                                  "backbone.blocks5.2.channel_mixer.compress.bias",
                                  "head.guide_layer.3.weight",
                                  NULL};
    gradcheck(TINY_CTC, ov, "PP-OCRv6 tiny, deploy form", params);
}
END_TEST

START_TEST(test_gradcheck_deploy) {
    const char *const ov[] = {"Architecture.Backbone.deploy=true", NULL};
    const char *const params[] = {"backbone.conv1.stem1.conv.weight",
                                  "backbone.conv1.stem2a.conv.bias",
                                  "backbone.blocks2.0.token_mixer.rep_dw.reparam_conv.weight",
                                  "backbone.blocks4.0.token_mixer.dw_conv.weight",
                                  "backbone.blocks4.1.channel_mixer.expand.bias",
                                  "backbone.blocks5.2.channel_mixer.compress.weight",
                                  NULL};
    gradcheck(SMALL_CTC, ov, "PP-OCRv6 small, deploy form", params);
}
END_TEST

// ---- the pad op -----------------------------------------------------------------------------------------------------

START_TEST(test_pad_op) {
    const int64_t N = 2, H = 3, W = 4, C = 5, top = 1, left = 2, Ho = H + top + 2, Wo = W + left + 1;
    OcrTensor x, y, dy, dx;
    ck_assert(ocr_tensor_alloc(&x, OCR_F32, ocr_cpu(), 4, (int64_t[]){N, H, W, C}, OCR_MEM_DATA) == OCR_OK);
    ck_assert(ocr_tensor_alloc(&y, OCR_F32, ocr_cpu(), 4, (int64_t[]){N, Ho, Wo, C}, OCR_MEM_DATA) == OCR_OK);
    ck_assert(ocr_tensor_alloc(&dy, OCR_F32, ocr_cpu(), 4, (int64_t[]){N, Ho, Wo, C}, OCR_MEM_DATA) == OCR_OK);
    ck_assert(ocr_tensor_alloc(&dx, OCR_F32, ocr_cpu(), 4, (int64_t[]){N, H, W, C}, OCR_MEM_DATA) == OCR_OK);
    ocr_rng_fill_uniform(x.data, (size_t)ocr_tensor_numel(&x), 1, 2, 0, -1.0f, 1.0f);
    ocr_rng_fill_uniform(dy.data, (size_t)ocr_tensor_numel(&dy), 3, 4, 0, -1.0f, 1.0f);
    ocr_pad2d_forward(&y, &x, (int)top, (int)left, -INFINITY);
    const float *xv = x.data, *yv = y.data, *dyv = dy.data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t h = 0; h < Ho; h++)
            for (int64_t w = 0; w < Wo; w++)
                for (int64_t c = 0; c < C; c++) {
                    float v = yv[((n * Ho + h) * Wo + w) * C + c];
                    int in = h >= top && h < top + H && w >= left && w < left + W;
                    if (in)
                        ck_assert(v == xv[((n * H + h - top) * W + w - left) * C + c]);
                    else
                        ck_assert(isinf(v) && v < 0);
                }
    // Zero padding: L = <dy, pad(x)> is linear in x, so its gradient is crop(dy) exactly; checked
    // against central differences of L in double on every element.
    ocr_pad2d_forward(&y, &x, (int)top, (int)left, 0.0f);
    ocr_pad2d_backward(&dx, &dy, (int)top, (int)left);
    float *xm = x.data;
    const float *dxv = dx.data;
    for (int64_t i = 0; i < ocr_tensor_numel(&x); i++) {
        float keep = xm[i];
        double l[2];
        for (int k = 0; k < 2; k++) {
            xm[i] = keep + (k ? -0.25f : 0.25f);
            ocr_pad2d_forward(&y, &x, (int)top, (int)left, 0.0f);
            double s = 0;
            for (int64_t j = 0; j < ocr_tensor_numel(&y); j++) s += (double)dyv[j] * yv[j];
            l[k] = s;
        }
        xm[i] = keep;
        ck_assert_msg(fabs((l[0] - l[1]) / 0.5 - dxv[i]) < 1e-6, "element %lld", (long long)i);
    }
    ocr_tensor_free(&x);
    ocr_tensor_free(&y);
    ocr_tensor_free(&dy);
    ocr_tensor_free(&dx);
}
END_TEST

int main(void) {
    Suite *s = suite_create("models_ppocrv6_arch");
    TCase *tc = tcase_create("ppocrv6");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_pad_op);
    tcase_add_test(tc, test_counts_and_names);
    tcase_add_test(tc, test_config_keys);
    tcase_add_test(tc, test_fusion_tiny);
    tcase_add_test(tc, test_fusion_small);
    tcase_add_test(tc, test_fusion_medium);
    tcase_add_test(tc, test_multihead_step);
    suite_add_tcase(s, tc);
    // One case per gradient check (CK_RUN_CASE=gradcheck_small runs one).
    struct {
        const char *name;
        const TTest *test;
    } gc[] = {{"gradcheck_tiny", test_gradcheck_tiny},
              {"gradcheck_tiny_deploy", test_gradcheck_tiny_deploy},
              {"gradcheck_small", test_gradcheck_small},
              {"gradcheck_small_deploy", test_gradcheck_deploy}};
    for (size_t i = 0; i < sizeof gc / sizeof gc[0]; i++) {
        TCase *t = tcase_create(gc[i].name);
        tcase_set_timeout(t, 600);
        tcase_add_test(t, gc[i].test);
        suite_add_tcase(s, t);
    }
    return ocr_test_run_suite(s);
}

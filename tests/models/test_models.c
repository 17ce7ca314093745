// Networks built from the configs: parameter totals against the architecture (spec §10.6),
// per-parameter optimizer attributes, config errors, deterministic initialisation, the
// memory plan against a real forward+backward, output shapes at variable widths and
// heights, rep-layer fusion, inference-mode BN and dropout.
#include "kernels/backend.h"
#include "models/svtr/blocks.h"
#include "tests/models/model_test_util.h"

static const char *const SMALL[] = {"Global.character_dict_path=\"\"", "Architecture.Head.out_channels=11", NULL};

START_TEST(test_param_totals) {
    struct {
        const char *cfg, *over;
        int64_t params;
    } cases[] = {
        {"rec_ppocrv3_en.json", NULL, 2215345},
        {"rec_ppocrv4_ch.json", NULL, 6259405},
        {"rec_ppocrv4_ch.json", "Architecture.Backbone.deploy=true", 2688509},
        {"rec_ppocrv4_en.json", NULL, 5469517},
        {"rec_svtr_tiny.json", NULL, 4806913},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *ov[2] = {cases[i].over, NULL};
        OcrModel *m = tm_model(cases[i].cfg, ov);
        ck_assert_msg(ocr_model_param_count(m) == cases[i].params, "%s %s: %lld parameters, expected %lld",
                      cases[i].cfg, cases[i].over ? cases[i].over : "", (long long)ocr_model_param_count(m),
                      (long long)cases[i].params);
        // The buffer holds them all, each entry inside it.
        OcrParamTable *p = ocr_model_params(m);
        ck_assert_int_eq(p->numel, cases[i].params);
        for (int k = 0; k < p->count; k++) ck_assert(p->items[k].offset + p->items[k].numel * 4 <= p->bytes);
        ocr_model_free(m);
    }
    // Classes from the dictionaries: en 95 lines + blank + space, ch 6623 + 2.
    OcrModel *m = tm_model("rec_ppocrv3_en.json", NULL);
    ck_assert_int_eq(ocr_model_arch(m)->num_classes, 97);
    ocr_model_free(m);
    m = tm_model("rec_ppocrv4_ch.json", NULL);
    ck_assert_int_eq(ocr_model_arch(m)->num_classes, 6625);
    ocr_model_free(m);
}
END_TEST

static const OcrParamInfo *find(OcrModel *m, const char *name) {
    OcrParamTable *p = ocr_model_params(m);
    int i = ocr_params_find(p, name);
    ck_assert_msg(i >= 0, "no parameter %s", name);
    return &p->items[i];
}

START_TEST(test_param_attributes) {
    OcrModel *m = tm_model("rec_ppocrv4_ch.json", NULL);
    const OcrParamInfo *p = find(m, "backbone.conv1.conv.weight");
    ck_assert_int_eq(p->shape[0], 16);
    ck_assert_int_eq(p->shape[1], 3);
    ck_assert_int_eq(p->shape[3], 3);  // (OC, KH, KW, C)
    ck_assert_int_eq(find(m, "backbone.conv1.bn.weight")->decay_kind, OCR_DECAY_NONE);
    ck_assert_int_eq(find(m, "backbone.blocks2.0.dw_conv.conv_kxk.3.bn.bias")->decay_kind, OCR_DECAY_NONE);
    ck_assert_int_eq(find(m, "backbone.blocks3.1.dw_conv.identity.weight")->decay_kind, OCR_DECAY_GLOBAL);
    ck_assert_int_eq(find(m, "backbone.blocks6.0.se.conv1.weight")->decay_kind, OCR_DECAY_GLOBAL);
    const OcrParamInfo *lab = find(m, "backbone.blocks4.1.pw_conv.act.lab.scale");
    ck_assert_float_eq_tol(lab->lr_mult, 0.1f, 1e-7f);
    ck_assert_int_eq(lab->role, OCR_ROLE_SCALAR);
    ck_assert(find(m, "backbone.blocks4.1.pw_conv.conv_kxk.0.conv.weight")->lr_mult == 1.0f);
    const OcrParamInfo *qkv = find(m, "neck.encoder.svtr_block.0.mixer.qkv.weight");
    ck_assert_int_eq(qkv->shape[0], 120);
    ck_assert_int_eq(qkv->shape[1], 360);  // (IN, OUT)
    ck_assert_int_eq(find(m, "neck.encoder.conv1.norm.weight")->decay_kind, OCR_DECAY_GLOBAL);
    const OcrParamInfo *fc = find(m, "head.fc.weight");
    ck_assert_int_eq(fc->decay_kind, OCR_DECAY_FIXED);
    ck_assert_float_eq_tol(fc->decay, 1e-5f, 1e-12f);
    ck_assert_int_eq(find(m, "head.fc.bias")->decay_kind, OCR_DECAY_FIXED);
    // No rep branch without its condition: stride (2,1) has no identity; k = 1 has no 1x1 branch.
    ck_assert_int_lt(ocr_params_find(ocr_model_params(m), "backbone.blocks4.0.dw_conv.identity.weight"), 0);
    ck_assert_int_lt(ocr_params_find(ocr_model_params(m), "backbone.blocks4.0.pw_conv.conv_1x1.conv.weight"), 0);
    ck_assert_int_ge(ocr_params_find(ocr_model_stats(m), "backbone.conv1.bn._variance"), 0);
    ocr_model_free(m);
    m = tm_model("rec_ppocrv3_en.json", NULL);
    ck_assert_int_eq(find(m, "backbone.block_list.12._se.conv2.bias")->shape[0], 512);
    ck_assert_int_eq(find(m, "backbone.block_list.0._depthwise_conv._batch_norm.weight")->decay_kind, OCR_DECAY_NONE);
    ocr_model_free(m);
}
END_TEST

START_TEST(test_config_errors) {
    OcrConfig *cfg = tm_config("rec_ppocrv4_ch.json", (const char *const[]){"Architecture.Neck.hiden_dims=64", NULL});
    OcrModel *m;
    ck_assert_int_eq(ocr_model_from_config(&m, cfg), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "did you mean hidden_dims"), "%s", ocr_last_error());
    ocr_config_free(cfg);
    cfg = tm_config("rec_ppocrv3_en.json", (const char *const[]){"Architecture.Backbone.name=ResNet", NULL});
    ck_assert_int_eq(ocr_model_from_config(&m, cfg), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "Architecture.Backbone.name"), "%s", ocr_last_error());
    ocr_config_free(cfg);
    cfg = tm_config("rec_ppocrv3_en.json", (const char *const[]){"Global.character_dict_path=nowhere/dict.txt", NULL});
    ck_assert_int_eq(ocr_model_from_config(&m, cfg), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "nowhere/dict.txt"), "%s", ocr_last_error());
    ocr_config_free(cfg);
    cfg = tm_config("rec_ppocrv3_en.json", (const char *const[]){"Architecture.Transform={\"name\": \"STN_ON\"}", NULL});
    ck_assert_int_eq(ocr_model_from_config(&m, cfg), OCR_ERR_CONFIG);
    ocr_config_free(cfg);
}
END_TEST

START_TEST(test_init_deterministic) {
    OcrModel *a = tm_model("rec_ppocrv3_en.json", SMALL), *b = tm_model("rec_ppocrv3_en.json", SMALL);
    OcrParamTable *pa = ocr_model_params(a), *pb = ocr_model_params(b);
    ck_assert_int_eq(memcmp(pa->data, pb->data, pa->bytes), 0);
    // Values depend on (seed, name) only: re-initialising one entry reproduces it.
    int i = ocr_params_find(pa, "neck.encoder.svtr_block.1.mlp.fc1.weight");
    OcrTensor t = ocr_params_tensor(pa, i);
    float *before = tm_copy_f32(&t);
    ocr_params_init_entry(pa, i, ocr_model_arch(a)->seed);
    float *after = tm_copy_f32(&t);
    ck_assert_int_eq(memcmp(before, after, (size_t)ocr_tensor_numel(&t) * 4), 0);
    // trunc_normal(0.02): every value within 2 std, std close to 0.02·0.88.
    double s2 = 0;
    for (int64_t k = 0; k < ocr_tensor_numel(&t); k++) {
        ck_assert(fabsf(after[k]) <= 0.04f);
        s2 += (double)after[k] * after[k];
    }
    double sd = sqrt(s2 / (double)ocr_tensor_numel(&t));
    ck_assert_msg(sd > 0.016 && sd < 0.019, "trunc normal std %g", sd);
    free(before);
    free(after);
    // Kaiming normal for the stem conv: std sqrt(2 / 27).
    t = ocr_params_tensor(pa, ocr_params_find(pa, "backbone.conv1._conv.weight"));
    float *w = tm_copy_f32(&t);
    s2 = 0;
    for (int k = 0; k < 432; k++) s2 += (double)w[k] * w[k];
    ck_assert_msg(fabs(sqrt(s2 / 432) - sqrt(2.0 / 27)) < 0.04, "kaiming std %g", sqrt(s2 / 432));
    free(w);
    // A different seed gives different weights.
    OcrModel *c = tm_model("rec_ppocrv3_en.json", (const char *const[]){"Global.seed=7", SMALL[0], SMALL[1], NULL});
    ck_assert_int_ne(memcmp(pa->data, ocr_model_params(c)->data, pa->bytes), 0);
    ocr_model_free(a);
    ocr_model_free(b);
    ocr_model_free(c);
}
END_TEST

// A real forward+backward allocates exactly the planned activation bytes and returns them all.
static void check_plan(const char *cfg, const char *const *ov, int B, int H, int W) {
    OcrModel *m = tm_model(cfg, ov);
    OcrMemPlan plan;
    ck_assert_msg(ocr_model_plan(m, B, H, W, 1, &plan) == OCR_OK, "%s", ocr_last_error());
    OcrMemStats s0 = ocr_mem_stats(ocr_cpu());
    OcrTensor x = tm_images(B, H, W, 3);
    ck_assert_msg(ocr_model_forward(m, &x, 1) == OCR_OK, "%s", ocr_last_error());
    OcrMemStats s1 = ocr_mem_stats(ocr_cpu());
    ck_assert_int_eq(s1.current[OCR_MEM_ACTIVATIONS] - s0.current[OCR_MEM_ACTIVATIONS], plan.activations_bytes);
    OcrTensor *d = ocr_model_dlogits(m);
    ck_assert_ptr_nonnull(d);
    ocr_tensor_fill(d, 0.01f);
    ck_assert_msg(ocr_model_backward(m) == OCR_OK, "%s", ocr_last_error());
    OcrMemStats s2 = ocr_mem_stats(ocr_cpu());
    ck_assert_int_eq(s2.current[OCR_MEM_ACTIVATIONS], s1.current[OCR_MEM_ACTIVATIONS]);  // no allocation in between
    ck_assert_int_eq(s2.current[OCR_MEM_GRADS] - s1.current[OCR_MEM_GRADS], plan.grads_bytes);
    int64_t peak, live;
    ocr_model_arena_usage(m, &peak, &live);
    ck_assert_int_eq(peak, plan.activations_bytes);  // the run reached exactly the planned high-water mark
    ck_assert_int_eq(live, 0);                       // every saved activation and gradient was returned
    ck_assert_int_eq(plan.params_bytes, (int64_t)ocr_model_params(m)->bytes);
    ocr_tensor_free(&x);
    ocr_model_free(m);
}

// Inference passes release dead activations: far less memory than training, same outputs as
// a pass that keeps everything, and the real pass allocates exactly the inference plan.
START_TEST(test_inference_memory) {
    const char *cfgs[3] = {"rec_ppocrv3_en.json", "rec_ppocrv4_ch.json", "rec_svtr_tiny.json"};
    const char *const svtr_ov[] = {SMALL[0], SMALL[1], "Architecture.Backbone.img_size=[32, 64]",
                                   "Architecture.Backbone.out_char_num=8", NULL};
    for (int k = 0; k < 3; k++) {
        OcrModel *m = tm_model(cfgs[k], k == 2 ? svtr_ov : SMALL);
        int H = k == 2 ? 32 : 48, W = 64;
        OcrMemPlan inf, train, kept;
        ck_assert(ocr_model_plan(m, 2, H, W, 1, &train) == OCR_OK);
        ocr_model_keep_activations(m, 1);
        ck_assert(ocr_model_plan(m, 2, H, W, 0, &kept) == OCR_OK);
        OcrTensor x = tm_images(2, H, W, 8);
        ck_assert(ocr_model_forward(m, &x, 0) == OCR_OK);
        int64_t n = ocr_tensor_numel(ocr_model_logits(m));
        float *a = tm_copy_f32(ocr_model_logits(m));
        ck_assert_ptr_nonnull(ocr_model_op_output(m, "head.fc"));
        ocr_model_keep_activations(m, 0);
        ck_assert(ocr_model_plan(m, 2, H, W, 0, &inf) == OCR_OK);
        OcrMemStats s0 = ocr_mem_stats(ocr_cpu());
        ck_assert(ocr_model_forward(m, &x, 0) == OCR_OK);
        OcrMemStats s1 = ocr_mem_stats(ocr_cpu());
        ck_assert_int_eq(s1.current[OCR_MEM_ACTIVATIONS] - s0.current[OCR_MEM_ACTIVATIONS],
                         inf.activations_bytes - kept.activations_bytes);  // the arena shrank to the plan
        int64_t peak;
        ocr_model_arena_usage(m, &peak, NULL);
        ck_assert_int_eq(peak, inf.activations_bytes);
        float *b = tm_copy_f32(ocr_model_logits(m));
        ck_assert_int_eq(memcmp(a, b, (size_t)n * 4), 0);
        ck_assert_ptr_nonnull(ocr_model_probs(m));
        ck_assert_ptr_null(ocr_model_op_output(m, "head.fc"));  // released activations are not shown
        printf("%s: activations at 2x%dx%d: training %.2f MiB, inference %.2f MiB (keeping all %.2f MiB)\n", cfgs[k],
               H, W, train.activations_bytes / 1048576.0, inf.activations_bytes / 1048576.0,
               kept.activations_bytes / 1048576.0);
        ck_assert_int_lt(inf.activations_bytes * 3, kept.activations_bytes);
        free(a);
        free(b);
        ocr_tensor_free(&x);
        ocr_model_free(m);
    }
}
END_TEST

START_TEST(test_plan_matches_run) {
    check_plan("rec_ppocrv3_en.json", SMALL, 2, 48, 32);
    check_plan("rec_ppocrv4_ch.json", SMALL, 2, 48, 32);
    check_plan("rec_ppocrv4_ch.json", (const char *const[]){SMALL[0], SMALL[1], "Architecture.Backbone.deploy=true", NULL},
               1, 48, 40);
}
END_TEST

static void check_shape(OcrModel *m, int B, int H, int W, int training, int T) {
    OcrTensor x = tm_images(B, H, W, (uint64_t)W);
    ck_assert_msg(ocr_model_forward(m, &x, training) == OCR_OK, "%dx%d: %s", H, W, ocr_last_error());
    const OcrTensor *l = ocr_model_logits(m);
    ck_assert_int_eq(l->ndim, 3);
    ck_assert_int_eq(l->shape[0], B);
    ck_assert_msg(l->shape[1] == T, "%dx%d: T = %lld, expected %d", H, W, (long long)l->shape[1], T);
    ck_assert_int_eq(l->shape[2], ocr_model_arch(m)->num_classes);
    float *v = tm_copy_f32(l);
    for (int64_t i = 0; i < ocr_tensor_numel(l); i++) ck_assert(isfinite(v[i]));
    free(v);
    ocr_tensor_free(&x);
}

START_TEST(test_variable_width_and_height) {
    OcrModel *m = tm_model("rec_ppocrv3_en.json", SMALL);
    for (int W = 16; W <= 72; W += 8) check_shape(m, 1, 48, W, 0, W / 8);
    check_shape(m, 2, 48, 37, 0, (37 + 3) / 8);  // not a multiple of 8: floor((W+3)/8)
    ocr_model_free(m);
    m = tm_model("rec_ppocrv4_ch.json", SMALL);
    // Training form: the adaptive pool takes heights 32, 48 and 64 to one row, T = W/8.
    check_shape(m, 2, 32, 40, 1, 5);
    check_shape(m, 2, 48, 40, 1, 5);
    check_shape(m, 2, 64, 40, 1, 5);
    check_shape(m, 1, 48, 97, 0, 12);  // inference: AvgPool k(3,2), T = floor((W+3)/8)
    check_shape(m, 1, 32, 48, 0, 6);
    check_shape(m, 1, 64, 48, 0, 6);
    // Too narrow: a clear error, not a crash.
    OcrTensor x = tm_images(1, 48, 2, 1);
    ck_assert_int_eq(ocr_model_forward(m, &x, 0), OCR_ERR_INVALID_ARG);
    ck_assert_msg(strstr(ocr_last_error(), "too small"), "%s", ocr_last_error());
    ocr_tensor_free(&x);
    ocr_model_free(m);
    m = tm_model("rec_ppocrv3_en.json", SMALL);
    x = tm_images(1, 16, 32, 1);  // v3's 2x2 pool has no row left at height 16
    ck_assert_int_eq(ocr_model_forward(m, &x, 0), OCR_ERR_INVALID_ARG);
    ocr_tensor_free(&x);
    x = tm_images(1, 96, 32, 1);  // height 96 leaves 3 rows at Im2Seq
    ck_assert_int_eq(ocr_model_forward(m, &x, 0), OCR_ERR_INVALID_ARG);
    ck_assert_msg(strstr(ocr_last_error(), "Im2Seq"), "%s", ocr_last_error());
    ocr_tensor_free(&x);
    ocr_model_free(m);
}
END_TEST

START_TEST(test_rep_fusion) {
    OcrModel *t = tm_model("rec_ppocrv4_ch.json", SMALL);
    tm_randomize_and_calibrate(t, 11, 2, 48, 48);
    OcrTensor x = tm_images(2, 48, 48, 5);
    ck_assert(ocr_model_forward(t, &x, 0) == OCR_OK);
    float *ref = tm_copy_f32(ocr_model_logits(t));
    int64_t n = ocr_tensor_numel(ocr_model_logits(t));
    OcrModel *d;
    ck_assert_msg(ocr_model_fuse(&d, t) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(ocr_model_param_count(d), 2688509 - 6625 * 121 + 11 * 121);
    ck_assert(ocr_model_forward(d, &x, 0) == OCR_OK);
    float *got = tm_copy_f32(ocr_model_logits(d));
    // Relative error ‖fused − training‖ / ‖training‖ over the logits.
    double scale = tm_max_abs(ref, n), rel = tm_rel_l2(got, ref, n);
    ck_assert_msg(scale > 0.1 && scale < 1e3, "degenerate logits (max %g)", scale);
    ck_assert_msg(rel <= 1e-5, "fused vs training form: relative error %g (max diff %g, max |logit| %g)", rel,
                  tm_max_diff(got, ref, n), scale);
    // The training form in training mode is a different function (batch statistics).
    ck_assert(ocr_model_forward(t, &x, 1) == OCR_OK);
    float *train = tm_copy_f32(ocr_model_logits(t));
    ck_assert(tm_max_diff(train, ref, n) > 1e-3 * scale);
    OcrModel *again;
    ck_assert_int_eq(ocr_model_fuse(&again, d), OCR_ERR_INVALID_ARG);  // already fused
    ck_assert_ptr_null(again);
    free(ref);
    free(got);
    free(train);
    ocr_tensor_free(&x);
    ocr_model_free(t);
    ocr_model_free(d);
}
END_TEST

// One LearnableRepLayer against its fusion, for every branch combination the network uses.
static void rep_case(int cin, int cout, int k, int sh, int sw, int groups) {
    OcrParamTable params, stats, fparams, fstats;
    OcrOpTable ops = {0}, fops = {0};
    ocr_params_init_table(&params, OCR_MEM_PARAMS);
    ocr_params_init_table(&stats, OCR_MEM_PARAMS);
    ocr_params_init_table(&fparams, OCR_MEM_PARAMS);
    ocr_params_init_table(&fstats, OCR_MEM_PARAMS);
    OcrBuilder b = {&params, &stats, &ops}, fb = {&fparams, &fstats, &fops};
    RepLayer t, f;
    RepSpec rs = {.cin = cin, .cout = cout, .k = k, .sh = sh, .sw = sw, .groups = groups, .nkxk = 4,
                  .lr_mult = 1.0f, .lab_lr = 0.1f, .deploy = 0};
    rep_build(&b, &t, "rep", rs);
    rs.deploy = 1;
    rep_build(&fb, &f, "rep", rs);
    ck_assert(ocr_params_alloc(&params, 3) == OCR_OK && ocr_params_alloc(&stats, 3) == OCR_OK);
    ck_assert(ocr_params_alloc(&fparams, 3) == OCR_OK && ocr_params_alloc(&fstats, 3) == OCR_OK);
    // Random BN statistics and affine parameters, random LAB scalars (shared by name).
    for (int i = 0; i < stats.count; i++) {
        OcrTensor s = ocr_params_tensor(&stats, i);
        int var = strstr(stats.items[i].name, "_variance") != NULL;
        for (int64_t e = 0; e < ocr_tensor_numel(&s); e++) {
            float u = ocr_rng_uniform(9, (uint64_t)i, (uint64_t)e);
            ocr_tensor_set_f32(&s, e, var ? 0.3f + u : u - 0.5f);
        }
    }
    for (int i = 0; i < params.count; i++) {
        if (params.items[i].role == OCR_ROLE_WEIGHT) continue;
        OcrTensor s = ocr_params_tensor(&params, i);
        for (int64_t e = 0; e < ocr_tensor_numel(&s); e++)
            ocr_tensor_set_f32(&s, e, 0.5f + ocr_rng_uniform(10, (uint64_t)i, (uint64_t)e));
        int j = ocr_params_find(&fparams, params.items[i].name);
        if (j >= 0) {
            OcrTensor d = ocr_params_tensor(&fparams, j);
            for (int64_t e = 0; e < ocr_tensor_numel(&s); e++) ocr_tensor_set_f32(&d, e, ocr_tensor_get_f32(&s, e));
        }
    }
    float *kern = malloc((size_t)ocr_params_tensor(&fparams, f.reparam.w).shape[0] * k * k * (cin / groups) * 4),
          *bias = malloc((size_t)cout * 4);
    rep_fuse(&t, &params, &stats, kern, bias);
    OcrTensor fw = ocr_params_tensor(&fparams, f.reparam.w), fbias = ocr_params_tensor(&fparams, f.reparam.b);
    ocr_tensor_from_f32(&fw, kern);
    ocr_tensor_from_f32(&fbias, bias);
    OcrTensor in = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(2, 12, 10, cin), NULL);
    ocr_rng_fill_uniform(in.data, (size_t)ocr_tensor_numel(&in), 4, 5, 0, -2.0f, 2.0f);
    OcrArena arena = {0}, farena = {0};
    OcrCtx c = {.params = &params, .stats = &stats, .ops = &ops, .arena = &arena, .bn_momentum = -1.0f};
    OcrCtx fc = {.params = &fparams, .stats = &fstats, .ops = &fops, .arena = &farena, .bn_momentum = -1.0f};
    ck_assert(ocr_arena_begin_run(&arena, 64 << 20) == OCR_OK && ocr_arena_begin_run(&farena, 64 << 20) == OCR_OK);
    OcrTensor *yt = rep_forward(&c, &t, &in), *yf = rep_forward(&fc, &f, &in);
    ck_assert(ocr_tensor_same_shape(yt, yf));
    int64_t n = ocr_tensor_numel(yt);
    double rel = tm_rel_l2(yf->data, yt->data, n), mx = tm_max_diff(yf->data, yt->data, n);
    ck_assert_msg(rel <= 1e-5, "rep %d->%d k%d s(%d,%d) g%d: relative error %g (max diff %g)", cin, cout, k, sh, sw,
                  groups, rel, mx);
    ck_assert(tm_max_abs(yt->data, n) > 0.5);
    ocr_arena_release(&arena);
    ocr_arena_release(&farena);
    free(kern);
    free(bias);
    ocr_tensor_free(&in);
    ocr_params_free(&params);
    ocr_params_free(&stats);
    ocr_params_free(&fparams);
    ocr_params_free(&fstats);
    ocr_ops_free(&ops);
    ocr_ops_free(&fops);
}

START_TEST(test_rep_layer_fusion) {
    rep_case(16, 16, 3, 1, 1, 16);  // dw 3x3: identity + 1x1 + 4 kxk
    rep_case(24, 24, 5, 2, 1, 24);  // dw 5x5 stride (2,1): no identity
    rep_case(24, 24, 3, 1, 2, 24);  // dw stride (1,2)
    rep_case(32, 32, 1, 1, 1, 1);   // pw with identity, no 1x1 branch
    rep_case(16, 40, 1, 1, 1, 1);   // pw widening: kxk branches only
}
END_TEST

START_TEST(test_inference_bn_and_dropout) {
    OcrModel *m = tm_model("rec_ppocrv3_en.json", SMALL);
    tm_randomize_bn(m, 3);
    OcrParamTable *st = ocr_model_stats(m);
    size_t nb = st->bytes;
    char *stats0 = malloc(nb);
    memcpy(stats0, st->data, nb);
    OcrTensor x = tm_images(2, 48, 32, 9);
    ck_assert(ocr_model_forward(m, &x, 0) == OCR_OK);
    int64_t n = ocr_tensor_numel(ocr_model_logits(m));
    float *a = tm_copy_f32(ocr_model_logits(m));
    const OcrTensor *p = ocr_model_probs(m);
    ck_assert_ptr_nonnull(p);
    float *pr = tm_copy_f32(p);
    int C = (int)p->shape[2];
    for (int64_t r = 0; r < n / C; r++) {
        double s = 0;
        for (int c = 0; c < C; c++) s += pr[r * C + c];
        ck_assert(fabs(s - 1.0) < 1e-5);
    }
    ck_assert(ocr_model_forward(m, &x, 0) == OCR_OK);
    float *b = tm_copy_f32(ocr_model_logits(m));
    ck_assert_int_eq(memcmp(a, b, (size_t)n * 4), 0);   // dropout off, nothing random
    ck_assert_int_eq(memcmp(stats0, st->data, nb), 0);  // running statistics untouched
    // Training: batch statistics update the running ones; dropout differs between steps.
    ck_assert(ocr_model_forward(m, &x, 1) == OCR_OK);
    ck_assert_int_ne(memcmp(stats0, st->data, nb), 0);
    float *t1 = tm_copy_f32(ocr_model_logits(m));
    ck_assert(ocr_model_forward(m, &x, 1) == OCR_OK);
    float *t2 = tm_copy_f32(ocr_model_logits(m));
    ck_assert(tm_max_diff(t1, t2, n) > 0);
    free(a);
    free(b);
    free(pr);
    free(t1);
    free(t2);
    free(stats0);
    ocr_tensor_free(&x);
    ocr_model_free(m);
    // SVTRNet's last dropout is downscale_in_infer: ×(1 − 0.1) at inference.
    m = tm_model("rec_svtr_tiny.json",
                 (const char *const[]){SMALL[0], SMALL[1], "Architecture.Backbone.img_size=[32, 64]",
                                       "Architecture.Backbone.out_char_num=8", "Architecture.Backbone.depth=[1, 1, 1]",
                                       "Architecture.Backbone.mixer=[\"Local\", \"Global\", \"Global\"]", NULL});
    x = tm_images(1, 32, 64, 2);
    ocr_model_keep_activations(m, 1);
    ck_assert_msg(ocr_model_forward(m, &x, 0) == OCR_OK, "%s", ocr_last_error());
    const OcrTensor *h = ocr_model_op_output(m, "backbone.hardswish"), *d = ocr_model_op_output(m, "backbone.dropout");
    ck_assert_ptr_nonnull(h);
    ck_assert_ptr_nonnull(d);
    float *hv = tm_copy_f32(h), *dv = tm_copy_f32(d);
    for (int64_t i = 0; i < ocr_tensor_numel(h); i++) ck_assert(fabsf(dv[i] - 0.9f * hv[i]) <= 1e-6f * fabsf(hv[i]) + 1e-7f);
    ck_assert_int_eq(ocr_model_logits(m)->shape[1], 8);
    free(hv);
    free(dv);
    ocr_tensor_free(&x);
    ocr_model_free(m);
}
END_TEST

int main(void) {
    ocr_backends_init(1);
    Suite *s = suite_create("models");
    TCase *tc = tcase_create("models");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_param_totals);
    tcase_add_test(tc, test_param_attributes);
    tcase_add_test(tc, test_config_errors);
    tcase_add_test(tc, test_init_deterministic);
    tcase_add_test(tc, test_plan_matches_run);
    tcase_add_test(tc, test_inference_memory);
    tcase_add_test(tc, test_variable_width_and_height);
    tcase_add_test(tc, test_rep_fusion);
    tcase_add_test(tc, test_rep_layer_fusion);
    tcase_add_test(tc, test_inference_bn_and_dropout);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

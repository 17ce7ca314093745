// The memory-saving training path against the plain one.
//
// In a training pass the ConvBN activations run fused with their BN, the rep layers add their
// branch batch norms straight into the branch sum and run their LAB → hardswish → LAB tail as one
// op (models/svtr/blocks.h), and the PPLCNetV4 blocks form their sums in place
// (models/svtr/lcnetv4.c); a pass that keeps every activation (ocr_model_keep_activations) takes
// the plain path instead, which runs and stores every op on its own. Both
// must give bit-identical logits, parameter gradients, input gradients and BN running
// statistics, in f32 and with f16/bf16 activations, while the recompute path plans (and
// allocates: the plan is exact) fewer activation bytes. The layer-level case checks the ReLU
// variant, whose derivative is read off the activation output and recomputes nothing.
#include "amp/engine.h"
#include "kernels/backend.h"
#include "models/amp_view.h"
#include "models/svtr/blocks.h"
#include "tests/models/model_test_util.h"

#define NO_DICT "Global.character_dict_path=\"\"", "Architecture.Head.out_channels=11"

typedef struct {
    float *logits, *dinput, *grads, *stats;
    int64_t nlogits, ndinput, ngrads, nstats;
    int64_t plan_bytes, peak;
} StepResult;

static float *copy_bytes_f32(const OcrTensor *t, int64_t *n) {
    *n = ocr_tensor_numel(t);
    return tm_copy_f32(t);
}

// A MultiHead network's labels for the next pass (none given: not a MultiHead network).
static void set_labels(OcrModel *m, const int32_t *labels, const int32_t *lengths, int B) {
    if (!labels) return;
    const int L = ocr_model_arch(m)->multihead.steps + 1;
    ck_assert_msg(ocr_model_set_guide_labels(m, labels, lengths, B, L) == OCR_OK, "%s", ocr_last_error());
}

// One training step (two forwards first, so the running statistics have moved twice). With the
// config's AMP keys set (amp 1), an AMP engine assigns the ops' dtypes as the trainer's does.
static StepResult run_step(const char *cfg, const char *const *ov, int B, int H, int W, ocr_dtype_t dtype, int keep,
                           int amp) {
    OcrModel *m = tm_model(cfg, ov);
    AmpEngine e;
    if (amp) {
        OcrConfig *c = tm_config(cfg, ov);
        AmpConfig ac;
        ck_assert_msg(amp_config_from_config(&ac, c) == OCR_OK, "%s", ocr_last_error());
        ocr_config_free(c);
        amp_engine_init(&e, &ac);
        ck_assert_msg(ocr_amp_attach(&e, ocr_model_ops(m), ocr_model_params(m), ocr_model_stats(m)) == OCR_OK, "%s",
                      ocr_last_error());
        if (e.cfg.policy.level == OCR_AMP_O1) ck_assert_int_eq(ocr_model_set_cast_cache(m, &e.cache), OCR_OK);
        ck_assert_int_eq(amp_engine_begin_step(&e), OCR_OK);
    }
    if (dtype != OCR_F32) ocr_model_set_compute_dtype(m, "*", NULL, dtype);
    tm_randomize_bn(m, 9);
    ocr_model_keep_activations(m, keep);
    ocr_model_want_input_grad(m, 1);
    OcrTensor x = tm_images(B, H, W, 21);
    if (dtype != OCR_F32) {
        OcrTensor xd;
        ck_assert(ocr_tensor_alloc(&xd, dtype, ocr_cpu(), 4, x.shape, OCR_MEM_DATA) == OCR_OK);
        float *v = tm_copy_f32(&x);
        ocr_tensor_from_f32(&xd, v);
        free(v);
        ocr_tensor_free(&x);
        x = xd;
    }
    // A MultiHead network's guidance branch trains on labels: the same made-up ones on both paths.
    const int guided = ocr_model_arch(m)->multihead.kind != OCR_GUIDE_NONE;
    int32_t *labels = NULL, *lengths = NULL;
    if (guided) {
        const int L = ocr_model_arch(m)->multihead.steps + 1;
        labels = calloc((size_t)B * L, sizeof *labels);
        lengths = calloc((size_t)B, sizeof *lengths);
        for (int b = 0; b < B; b++) {
            lengths[b] = 3 + b;
            for (int i = 0; i < lengths[b]; i++) labels[b * L + i] = 1 + (7 * b + 5 * i) % 97;
        }
    }
    StepResult r = {0};
    OcrMemPlan plan = {0};
    // ocr_model_plan plans f32 images until a forward has seen another dtype (and a MultiHead
    // network's decoder for the labels given).
    set_labels(m, labels, lengths, B);
    if (dtype == OCR_F32) ck_assert_msg(ocr_model_plan(m, B, H, W, 1, &plan) == OCR_OK, "%s", ocr_last_error());
    for (int pass = 0; pass < 2; pass++) {
        set_labels(m, labels, lengths, B);
        ck_assert_msg(ocr_model_forward(m, &x, 1) == OCR_OK, "%s", ocr_last_error());
    }
    free(labels);
    free(lengths);
    r.logits = copy_bytes_f32(ocr_model_logits(m), &r.nlogits);
    OcrTensor *ds[2] = {ocr_model_dlogits(m), guided ? ocr_model_guide_dlogits(m) : NULL};
    for (int k = 0; k < 2 && ds[k]; k++) {
        OcrTensor *d = ds[k];
        float *w = malloc((size_t)ocr_tensor_numel(d) * sizeof(float));
        ocr_rng_fill_uniform(w, (size_t)ocr_tensor_numel(d), 5 + k, 6, 0, -1.0f, 1.0f);
        ocr_tensor_from_f32(d, w);
        free(w);
    }
    ck_assert_msg(ocr_model_backward(m) == OCR_OK, "%s", ocr_last_error());
    int64_t live;
    ocr_model_arena_usage(m, &r.peak, &live);
    if (dtype == OCR_F32) ck_assert_int_eq(r.peak, plan.activations_bytes);  // the plan stays exact on both paths
    r.plan_bytes = r.peak;
    const OcrTensor *dx = ocr_model_input_grad(m);
    ck_assert_ptr_nonnull(dx);
    ck_assert_int_eq(live, (int64_t)ocr_arena_round(ocr_tensor_bytes(dx)));  // only the input gradient is left
    r.dinput = copy_bytes_f32(dx, &r.ndinput);
    OcrParamTable *p = ocr_model_params(m), *st = ocr_model_stats(m);
    for (int i = 0; i < p->count; i++) r.ngrads += p->items[i].numel;
    for (int i = 0; i < st->count; i++) r.nstats += st->items[i].numel;
    r.grads = malloc((size_t)r.ngrads * sizeof(float));
    r.stats = malloc((size_t)r.nstats * sizeof(float));
    int64_t k = 0;
    for (int i = 0; i < p->count; i++) {
        OcrTensor g = ocr_params_grad(p, i);
        ocr_tensor_to_f32(&g, r.grads + k);
        k += p->items[i].numel;
    }
    k = 0;
    for (int i = 0; i < st->count; i++) {
        OcrTensor s = ocr_params_tensor(st, i);
        ocr_tensor_to_f32(&s, r.stats + k);
        k += st->items[i].numel;
    }
    ocr_tensor_free(&x);
    if (amp) amp_engine_free(&e);
    ocr_model_free(m);
    return r;
}

static void free_result(StepResult *r) {
    free(r->logits);
    free(r->dinput);
    free(r->grads);
    free(r->stats);
}

static void same_bits(const char *what, const float *a, const float *b, int64_t n) {
    ck_assert_msg(memcmp(a, b, (size_t)n * sizeof(float)) == 0, "%s: the recompute path differs", what);
    int nonzero = 0;
    for (int64_t i = 0; i < n && !nonzero; i++) nonzero = a[i] != 0.0f;
    ck_assert_msg(nonzero, "%s: all zero (the comparison means nothing)", what);
}

static void compare_paths_amp(const char *cfg, const char *const *ov, int B, int H, int W, ocr_dtype_t dtype,
                              int amp) {
    StepResult a = run_step(cfg, ov, B, H, W, dtype, 0, amp), b = run_step(cfg, ov, B, H, W, dtype, 1, amp);
    printf("%s %s: activations %.2f MiB (recompute) vs %.2f MiB (BN outputs kept)\n", cfg, ocr_dtype_name(dtype),
           a.plan_bytes / 1048576.0, b.plan_bytes / 1048576.0);
    ck_assert_int_eq(a.nlogits, b.nlogits);
    ck_assert_int_eq(a.ngrads, b.ngrads);
    same_bits("logits", a.logits, b.logits, a.nlogits);
    same_bits("input gradient", a.dinput, b.dinput, a.ndinput);
    same_bits("parameter gradients", a.grads, b.grads, a.ngrads);
    same_bits("BN running statistics", a.stats, b.stats, a.nstats);
    ck_assert_msg(a.plan_bytes < b.plan_bytes, "the recompute path saves nothing (%lld vs %lld bytes)",
                  (long long)a.plan_bytes, (long long)b.plan_bytes);
    free_result(&a);
    free_result(&b);
}

static void compare_paths(const char *cfg, const char *const *ov, int B, int H, int W, ocr_dtype_t dtype) {
    compare_paths_amp(cfg, ov, B, H, W, dtype, 0);
}

START_TEST(test_ppocrv3_paths_agree) {
    const char *const ov[] = {NO_DICT, "Architecture.Neck.drop_rate=0", "Architecture.Neck.attn_drop_rate=0", NULL};
    compare_paths("rec_ppocrv3_en.json", ov, 2, 48, 64, OCR_F32);
    compare_paths("rec_ppocrv3_en.json", ov, 2, 48, 64, OCR_F16);
    compare_paths("rec_ppocrv3_en.json", ov, 2, 48, 64, OCR_BF16);
}
END_TEST

START_TEST(test_ppocrv4_paths_agree) {
    // Dropout on: its masks depend on (seed, step) only, the same on both paths.
    const char *const ov[] = {NO_DICT, NULL};
    compare_paths("rec_ppocrv4_ch.json", ov, 2, 48, 64, OCR_F32);
    compare_paths("rec_ppocrv4_ch.json", ov, 2, 48, 64, OCR_BF16);
    const char *const deploy[] = {NO_DICT, "Architecture.Backbone.deploy=true", NULL};
    compare_paths("rec_ppocrv4_ch.json", deploy, 2, 48, 64, OCR_F32);
}
END_TEST

START_TEST(test_svtr_tiny_paths_agree) {
    const char *const ov[] = {NO_DICT,
                              "Architecture.Backbone.img_size=[32, 64]",
                              "Architecture.Backbone.out_char_num=8",
                              "Architecture.Backbone.depth=[1, 1, 1]",
                              "Architecture.Backbone.mixer=[\"Local\", \"Global\", \"Global\"]", NULL};
    compare_paths("rec_svtr_tiny.json", ov, 2, 32, 64, OCR_F32);
}
END_TEST

// PP-OCRv6 (PPLCNetV4): the RepDW branches summed into the 1x1 branch's output, the residual sum
// written over the channel mixer's output, the StemBlock's maps that only feed its pads and
// concat freed once read (the small's branched stem; the tiny's is a plain Sequential, its
// BN + GELU fused), and the expand GELU outputs (and the tiny stem's GELU output) freed after the
// next conv's forward and rebuilt by batchnorm2d_act_apply before that conv's backward.
START_TEST(test_ppocrv6_paths_agree) {
    const char *const ov[] = {NO_DICT, NULL};
    compare_paths("rec_ppocrv6_tiny_ctc.json", ov, 2, 48, 64, OCR_F32);
    compare_paths("rec_ppocrv6_tiny_ctc.json", ov, 2, 48, 64, OCR_F16);
    compare_paths("rec_ppocrv6_tiny_ctc.json", ov, 2, 48, 64, OCR_BF16);
    compare_paths("rec_ppocrv6_small_ctc.json", ov, 2, 48, 64, OCR_F32);
    compare_paths("rec_ppocrv6_small_ctc.json", ov, 2, 48, 64, OCR_F16);
    compare_paths("rec_ppocrv6_small_ctc.json", ov, 2, 48, 64, OCR_BF16);
    // BF16-O1: f32 batch norms and adds between bf16 convs, whose autocast copies are what they
    // save (the SE output is then not re-formed, only freed); the sums fall back where dtypes differ.
    const char *const o1[] = {NO_DICT, "Global.use_amp=true", "Global.amp_level=O1", "Global.amp_dtype=bfloat16",
                              NULL};
    compare_paths_amp("rec_ppocrv6_small_ctc.json", o1, 2, 48, 64, OCR_F32, 1);
}
END_TEST

// PP-OCRv5 server (PPHGNetV2_B4): each HG block's layer outputs, their concatenation, the squeeze's
// output and the light layers' conv1 outputs freed once the block's forward is done and formed
// again from their BNs' inputs in the backward; the excitation's output summed over in place.
// Light and plain layers, identity and first blocks; f32, f16, bf16 and BF16-O1 (autocast copies).
START_TEST(test_ppocrv5_server_paths_agree) {
    const char *const ov[] = {NULL};  // the config's own dictionary (MultiHead: no out_channels key)
    compare_paths("rec_ppocrv5_server.json", ov, 2, 48, 64, OCR_F32);
    compare_paths("rec_ppocrv5_server.json", ov, 2, 48, 64, OCR_F16);
    compare_paths("rec_ppocrv5_server.json", ov, 2, 48, 64, OCR_BF16);
    const char *const o1[] = {"Global.use_amp=true", "Global.amp_level=O1", "Global.amp_dtype=bfloat16", NULL};
    compare_paths_amp("rec_ppocrv5_server.json", o1, 2, 48, 64, OCR_F32, 1);
}
END_TEST

// ---- one ConvBN, built directly: every activation, ReLU's read-off-the-output path included ----

typedef struct {
    OcrParamTable params, stats;
    OcrOpTable ops;
    OcrArena arena;
    ConvBN l;
} OneLayer;

static void one_build(OneLayer *o, ocr_activation_t act) {
    memset(o, 0, sizeof *o);
    ocr_params_init_table(&o->params, OCR_MEM_PARAMS);
    ocr_params_init_table(&o->stats, OCR_MEM_PARAMS);
    OcrBuilder b = {&o->params, &o->stats, &o->ops};
    ConvBNSpec s = {.cin = 3, .cout = 6, .kh = 3, .kw = 3, .sh = 1, .sw = 1, .ph = 1, .pw = 1, .groups = 1,
                    .conv_bias = 0, .winit = ocr_init_kaiming_normal(27), .wattr = ocr_attr_default(),
                    .bnattr = ocr_attr_default(), .act = act};
    ConvBNNames names = {"conv", "bn", "act"};
    convbn_build(&b, &o->l, "layer", names, s);
    ck_assert(ocr_params_alloc(&o->params, 3) == OCR_OK && ocr_params_alloc(&o->stats, 3) == OCR_OK);
    ck_assert(ocr_params_alloc_grads(&o->params) == OCR_OK);
    ocr_params_zero_grads(&o->params);
    OcrParamTable *p = &o->params;
    for (int i = 0; i < p->count; i++) {
        if (p->items[i].role != OCR_ROLE_NORM) continue;
        OcrTensor t = ocr_params_tensor(p, i);
        for (int64_t k = 0; k < ocr_tensor_numel(&t); k++)
            ocr_tensor_set_f32(&t, k, 0.3f + 0.2f * (float)k * (strstr(p->items[i].name, "weight") ? 1.0f : -0.5f));
    }
}

// Forward + backward of the layer; keep selects the plain path. Returns dx, dW, dgamma, dbeta and the
// output concatenated (the caller frees), and the arena's planned bytes.
static float *one_step(ocr_activation_t act, int keep, int64_t *n, int64_t *bytes) {
    OneLayer o;
    one_build(&o, act);
    OcrTensor x = tm_images(2, 5, 7, 31);
    float *out = NULL;
    for (int plan = 1; plan >= 0; plan--) {
        OcrCtx c = {0};
        c.params = &o.params;
        c.stats = &o.stats;
        c.ops = &o.ops;
        c.arena = &o.arena;
        c.plan = plan;
        c.training = 1;
        c.bn_momentum = -1.0f;
        c.keep_all = keep;
        if (plan) ocr_arena_begin_plan(&o.arena);
        else ck_assert(ocr_arena_begin_run(&o.arena, o.arena.peak) == OCR_OK);
        OcrTensor *y = convbn_forward(&c, &o.l, &x);
        OcrTensor dy = ocr_ctx_like(&c, y);
        float *yv = NULL;
        int64_t ny = ocr_tensor_numel(y);
        if (!plan) {
            yv = tm_copy_f32(y);
            float *w = malloc((size_t)ny * sizeof(float));
            ocr_rng_fill_uniform(w, (size_t)ny, 7, 8, 0, -1.0f, 1.0f);
            ocr_tensor_from_f32(&dy, w);
            free(w);
        }
        OcrTensor dx = convbn_backward(&c, &o.l, &dy, 1);
        ocr_ctx_free(&c, &dy);
        if (!plan) {
            int64_t ng = 0;
            for (int i = 0; i < o.params.count; i++) ng += o.params.items[i].numel;
            *n = ocr_tensor_numel(&dx) + ng + ny;
            out = malloc((size_t)*n * sizeof(float));
            ocr_tensor_to_f32(&dx, out);
            int64_t k = ocr_tensor_numel(&dx);
            for (int i = 0; i < o.params.count; i++) {
                OcrTensor g = ocr_params_grad(&o.params, i);
                ocr_tensor_to_f32(&g, out + k);
                k += o.params.items[i].numel;
            }
            memcpy(out + k, yv, (size_t)ny * sizeof(float));
            free(yv);
            *bytes = (int64_t)o.arena.peak;
        }
        ocr_ctx_free(&c, &dx);
        ck_assert_int_eq(o.arena.live, 0);
    }
    ocr_tensor_free(&x);
    ocr_arena_release(&o.arena);
    ocr_params_free(&o.params);
    ocr_params_free(&o.stats);
    ocr_ops_free(&o.ops);
    return out;
}

START_TEST(test_convbn_every_activation) {
    for (int act = OCR_ACT_RELU; act < OCR_ACT_COUNT; act++) {
        int64_t na, nb, ba, bb;
        float *a = one_step((ocr_activation_t)act, 0, &na, &ba), *b = one_step((ocr_activation_t)act, 1, &nb, &bb);
        ck_assert_int_eq(na, nb);
        ck_assert_msg(memcmp(a, b, (size_t)na * sizeof(float)) == 0, "%s: the recompute path differs",
                      ocr_activation_name((ocr_activation_t)act));
        // One map less at the end of the forward; the backward's transient may take some back.
        printf("convbn %-11s: arena peak %lld bytes (in place) vs %lld (BN output kept)\n",
               ocr_activation_name((ocr_activation_t)act), (long long)ba, (long long)bb);
        ck_assert_int_le(ba, bb);
        free(a);
        free(b);
    }
}
END_TEST

int main(void) {
    ocr_backends_init(2);
    Suite *s = suite_create("recompute");
    TCase *tc = tcase_create("recompute");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_convbn_every_activation);
    tcase_add_test(tc, test_ppocrv3_paths_agree);
    tcase_add_test(tc, test_ppocrv4_paths_agree);
    tcase_add_test(tc, test_svtr_tiny_paths_agree);
    tcase_add_test(tc, test_ppocrv6_paths_agree);
    tcase_add_test(tc, test_ppocrv5_server_paths_agree);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

// Precision policy: default lists, custom lists (and their aliases and conflicts), layer-name
// patterns, O0/O1/O2 resolution, and the Global.* keys with their error messages.
#include <stdlib.h>
#include <string.h>

#include "amp/engine.h"
#include "amp/policy.h"
#include "tests/common/test_util.h"

#define LIST(...) ((const char *const[]){__VA_ARGS__, NULL})

// A small chain in forward order: what a backbone block, a neck and a head look like.
static const AmpOpEntry NET[] = {
    {"backbone.pool0", "pool", -1},         // 0 grey, fed by the f32 image
    {"backbone.conv1.conv", "conv2d", 0},   // 1 white
    {"backbone.conv1.bn", "batchnorm", 1},  // 2 grey
    {"backbone.conv1.act", "activation", 2},// 3 grey
    {"backbone.pool", "pool", 3},           // 4 grey
    {"neck.norm1", "layernorm", 4},         // 5 black
    {"neck.add", "add", 5},                 // 6 grey after a black op
    {"neck.mixer.qkv", "linear", 6},        // 7 white
    {"neck.mixer.attn", "attention", 7},    // 8 white
    {"head.fc", "linear", 8},               // 9 white
    {"head.softmax", "softmax", 9},         // 10 black
    {"head.drop", "dropout", 1},            // 11 grey fed by op 1 (not the previous one)
};
#define NOPS ((int)(sizeof NET / sizeof NET[0]))

static void resolve(const AmpPolicy *p, ocr_dtype_t *d, amp_reason_t *r) { amp_policy_resolve(p, NET, NOPS, d, r, NULL); }

static void expect(const ocr_dtype_t *got, const char *want) {
    // want: one letter per op, f = f32, h = the low dtype (f16 or bf16 given by H/B), in order.
    for (int i = 0; i < NOPS; i++) {
        ocr_dtype_t w = want[i] == 'f' ? OCR_F32 : want[i] == 'h' ? OCR_F16 : OCR_BF16;
        ck_assert_msg(got[i] == w, "op %d (%s, %s): got %s, want %s", i, NET[i].name, NET[i].type,
                      ocr_dtype_name(got[i]), ocr_dtype_name(w));
    }
}

START_TEST(defaults_o1_follow_inputs) {
    AmpPolicy p;
    ck_assert_int_eq(amp_policy_make(&p, OCR_AMP_O1, OCR_F16, NULL, NULL, NULL), OCR_OK);
    ocr_dtype_t d[NOPS];
    amp_reason_t r[NOPS];
    resolve(&p, d, r);
    // pool0 follows the f32 image; conv white; bn/act/pool follow; LN black; add follows LN (f32);
    // GEMMs white; softmax black; dropout follows op 1 (f16).
    expect(d, "fhhhhffhhhfh");
    ck_assert_int_eq(r[0], AMP_REASON_FOLLOW_INPUT);
    ck_assert_int_eq(r[1], AMP_REASON_WHITE);
    ck_assert_int_eq(r[5], AMP_REASON_BLACK);
    ck_assert_int_eq(amp_policy_op_class(&p, "batchnorm"), AMP_GREY);
    ck_assert_int_eq(amp_policy_op_class(&p, "ctc_loss"), AMP_BLACK);
    ck_assert_int_eq(amp_policy_op_class(&p, "attention"), AMP_WHITE);
    ck_assert_int_eq(amp_policy_op_class(&p, "pool"), AMP_GREY);
    amp_policy_free(&p);
}
END_TEST

START_TEST(defaults_o2_and_o0) {
    AmpPolicy p;
    ocr_dtype_t d[NOPS];
    amp_reason_t r[NOPS];
    ck_assert_int_eq(amp_policy_make(&p, OCR_AMP_O2, OCR_BF16, NULL, NULL, NULL), OCR_OK);
    resolve(&p, d, r);
    // O2: grey ops run low even after the image or a black op; black stays f32.
    expect(d, "bbbbbfbbbbfb");
    ck_assert_int_eq(r[0], AMP_REASON_O2_GREY);
    ck_assert_int_eq(r[6], AMP_REASON_O2_GREY);
    amp_policy_free(&p);

    ck_assert_int_eq(amp_policy_make(&p, OCR_AMP_O0, OCR_F16, NULL, NULL, NULL), OCR_OK);
    ck_assert_int_eq(p.dtype, OCR_F32);
    resolve(&p, d, r);
    expect(d, "ffffffffffff");
    ck_assert_int_eq(r[1], AMP_REASON_OFF);
    amp_policy_free(&p);
}
END_TEST

START_TEST(custom_lists) {
    AmpPolicy p;
    ocr_dtype_t d[NOPS];
    // conv black-listed: it and what follows it at O1 go f32; softmax white-listed (removed from
    // the default black list, Paddle's _update_list rule).
    ck_assert_int_eq(amp_policy_make(&p, OCR_AMP_O1, OCR_F16, LIST("softmax"), LIST("conv2d"), NULL), OCR_OK);
    resolve(&p, d, NULL);
    expect(d, "fffffffhhhhf");
    ck_assert_int_eq(amp_policy_op_class(&p, "softmax"), AMP_WHITE);
    ck_assert_int_eq(amp_policy_op_class(&p, "conv2d"), AMP_BLACK);
    amp_policy_free(&p);

    // Paddle's names: matmul covers linear layers and the attention GEMMs; elementwise_add -> add.
    ck_assert_int_eq(amp_policy_make(&p, OCR_AMP_O2, OCR_F16, LIST("elementwise_add"), LIST("matmul"), NULL),
                     OCR_OK);
    resolve(&p, d, NULL);
    expect(d, "hhhhhfhffffh");
    ck_assert_int_eq(amp_policy_op_class(&p, "add"), AMP_WHITE);
    amp_policy_free(&p);
}
END_TEST

START_TEST(conflicts_and_unknown_types) {
    AmpPolicy p;
    ck_assert_int_eq(amp_policy_make(&p, OCR_AMP_O1, OCR_F16, LIST("softmax", "exp"), LIST("exp"), NULL),
                     OCR_ERR_CONFIG);
    const char *e = ocr_last_error();
    ck_assert_msg(strstr(e, "Global.amp_custom_white_list") && strstr(e, "Global.amp_custom_black_list") &&
                      strstr(e, "'exp'"),
                  "%s", e);
    // Through an alias: matmul (white) and linear (black) name the same type.
    ck_assert_int_eq(amp_policy_make(&p, OCR_AMP_O1, OCR_F16, LIST("matmul"), LIST("linear"), NULL), OCR_ERR_CONFIG);
    e = ocr_last_error();
    ck_assert_msg(strstr(e, "'matmul'") && strstr(e, "'linear'") && strstr(e, "amp_custom_white_list") &&
                      strstr(e, "amp_custom_black_list"),
                  "%s", e);
    ck_assert_int_eq(amp_policy_make(&p, OCR_AMP_O1, OCR_F16, NULL, LIST("sofmax"), NULL), OCR_ERR_CONFIG);
    e = ocr_last_error();
    ck_assert_msg(strstr(e, "Global.amp_custom_black_list") && strstr(e, "did you mean softmax"), "%s", e);
    ck_assert_int_eq(amp_policy_make(&p, OCR_AMP_O1, OCR_F16, LIST("frobnicate"), NULL, NULL), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "known:"), "%s", ocr_last_error());
    ck_assert_int_eq(amp_policy_make(&p, OCR_AMP_O1, OCR_F16, NULL, NULL, LIST("")), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "Global.amp_fp32_layers"), "%s", ocr_last_error());
    // Names PaddleOCR configs use but our networks do not have are accepted.
    ck_assert_int_eq(amp_policy_make(&p, OCR_AMP_O1, OCR_F16, NULL, LIST("exp", "softmax", "matmul_v2"), NULL),
                     OCR_OK);
    amp_policy_free(&p);
}
END_TEST

START_TEST(fp32_layer_patterns) {
    AmpPolicy p;
    ocr_dtype_t d[NOPS];
    amp_reason_t r[NOPS];
    int hits[2];
    ck_assert_int_eq(amp_policy_make(&p, OCR_AMP_O2, OCR_F16, NULL, NULL, LIST("neck.*", "*.conv1.?onv")), OCR_OK);
    amp_policy_resolve(&p, NET, NOPS, d, r, hits);
    expect(d, "hfhhhffffhfh");
    ck_assert_int_eq(r[1], AMP_REASON_FP32_LAYER);
    ck_assert_int_eq(r[7], AMP_REASON_FP32_LAYER);
    ck_assert_int_eq(hits[0], 4);
    ck_assert_int_eq(hits[1], 1);
    ck_assert(amp_policy_is_fp32_layer(&p, "neck.anything"));
    ck_assert(!amp_policy_is_fp32_layer(&p, "backbone.neck"));
    amp_policy_free(&p);
}
END_TEST

// The restriction to some layers / op types (training/sensitivity.h's "only this group in the
// low precision"): ops outside it are f32 whatever their class; inside, the usual rules apply.
START_TEST(lowp_restriction) {
    AmpPolicy p;
    ocr_dtype_t d[NOPS];
    amp_reason_t r[NOPS];
    ck_assert_int_eq(amp_policy_make(&p, OCR_AMP_O2, OCR_F16, NULL, NULL, NULL), OCR_OK);
    ck_assert_int_eq(amp_policy_set_lowp_layers(&p, LIST("neck.*")), OCR_OK);
    resolve(&p, d, r);
    // neck.norm1 is inside but black; add, qkv, attention low; backbone and head outside.
    expect(d, "ffffffhhhfff");
    ck_assert_int_eq(r[0], AMP_REASON_OUTSIDE_LOWP);
    ck_assert_int_eq(r[5], AMP_REASON_BLACK);
    ck_assert_int_eq(r[6], AMP_REASON_O2_GREY);
    ck_assert_int_eq(r[9], AMP_REASON_OUTSIDE_LOWP);
    ck_assert_str_eq(amp_reason_name(AMP_REASON_OUTSIDE_LOWP), "outside the low-precision layers");
    ck_assert(amp_policy_in_lowp(&p, "neck.x", "conv2d") && !amp_policy_in_lowp(&p, "head.fc", "linear"));

    // By type (an alias expands): only the GEMMs of linear and attention ops.
    ck_assert_int_eq(amp_policy_set_lowp_layers(&p, NULL), OCR_OK);
    ck_assert_int_eq(amp_policy_set_lowp_types(&p, LIST("linear")), OCR_OK);
    resolve(&p, d, r);
    expect(d, "fffffffhfhff");
    ck_assert_int_eq(amp_policy_set_lowp_types(&p, LIST("matmul")), OCR_OK);
    ck_assert_int_eq(amp_policy_set_lowp_layers(&p, LIST("backbone.*")), OCR_OK);
    resolve(&p, d, r);
    expect(d, "hhhhhffhhhff");  // either inside condition is enough; softmax stays black

    // Clearing both lifts the restriction.
    ck_assert_int_eq(amp_policy_set_lowp_layers(&p, NULL), OCR_OK);
    ck_assert_int_eq(amp_policy_set_lowp_types(&p, LIST(NULL)), OCR_OK);
    resolve(&p, d, r);
    expect(d, "hhhhhfhhhhfh");
    ck_assert(amp_policy_in_lowp(&p, "anything", "conv2d"));

    // Bad entries leave the restriction as it was.
    ck_assert_int_eq(amp_policy_set_lowp_types(&p, LIST("linear")), OCR_OK);
    ck_assert_int_eq(amp_policy_set_lowp_types(&p, LIST("conv3d")), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "conv3d") && strstr(ocr_last_error(), "did you mean conv2d"), "%s",
                  ocr_last_error());
    ck_assert_int_eq(amp_policy_set_lowp_layers(&p, LIST("")), OCR_ERR_INVALID_ARG);
    ck_assert_int_eq(p.n_lowp_types, 1);
    ck_assert_int_eq(p.n_lowp_layers, 0);
    amp_policy_free(&p);

    // amp_fp32_layers comes first: a layer inside the restriction can still be kept f32.
    ck_assert_int_eq(amp_policy_make(&p, OCR_AMP_O2, OCR_F16, NULL, NULL, LIST("backbone.conv1.*")), OCR_OK);
    ck_assert_int_eq(amp_policy_set_lowp_layers(&p, LIST("backbone.*")), OCR_OK);
    resolve(&p, d, r);
    expect(d, "hfffhfffffff");
    ck_assert_int_eq(r[1], AMP_REASON_FP32_LAYER);
    amp_policy_free(&p);

    // At O1 grey ops inside still follow their input: pool0 follows the f32 image.
    ck_assert_int_eq(amp_policy_make(&p, OCR_AMP_O1, OCR_BF16, NULL, NULL, NULL), OCR_OK);
    ck_assert_int_eq(amp_policy_set_lowp_layers(&p, LIST("backbone.*")), OCR_OK);
    resolve(&p, d, r);
    expect(d, "fbbbbfffffff");
    amp_policy_free(&p);
}
END_TEST

// Copies and additions the sensitivity search builds its variants with.
START_TEST(copy_and_additions) {
    AmpPolicy p, q;
    ocr_dtype_t d[NOPS], e[NOPS];
    ck_assert_int_eq(amp_policy_make(&p, OCR_AMP_O2, OCR_BF16, LIST("softmax"), LIST("attention"), LIST("head.*")),
                     OCR_OK);
    ck_assert_int_eq(amp_policy_set_lowp_layers(&p, LIST("neck.*", "head.*")), OCR_OK);
    ck_assert_int_eq(amp_policy_set_lowp_types(&p, LIST("conv2d")), OCR_OK);
    amp_policy_copy(&q, &p);
    resolve(&p, d, NULL);
    amp_policy_free(&p);  // the copy owns its own strings
    resolve(&q, e, NULL);
    for (int i = 0; i < NOPS; i++) ck_assert_int_eq(d[i], e[i]);
    ck_assert_int_eq(q.n_white, 1);
    ck_assert_int_eq(q.n_black, 1);
    ck_assert_int_eq(q.n_fp32_layers, 1);
    ck_assert_int_eq(q.n_lowp_layers, 2);
    ck_assert_int_eq(q.n_lowp_types, 1);
    ck_assert_int_eq(q.level, OCR_AMP_O2);
    ck_assert_int_eq(q.dtype, OCR_BF16);
    amp_policy_free(&q);

    ck_assert_int_eq(amp_policy_make(&p, OCR_AMP_O2, OCR_F16, LIST("softmax"), NULL, NULL), OCR_OK);
    // Black-listing a type: every op of it f32 (an alias expands; duplicates are ignored).
    ck_assert_int_eq(amp_policy_add_black(&p, LIST("matmul", "linear")), OCR_OK);
    ck_assert_int_eq(p.n_black, 2);
    ck_assert_int_eq(amp_policy_op_class(&p, "linear"), AMP_BLACK);
    ck_assert_int_eq(amp_policy_op_class(&p, "attention"), AMP_BLACK);
    // A type on the custom white list cannot also be black: an error, the list unchanged.
    ck_assert_int_eq(amp_policy_add_black(&p, LIST("conv2d", "softmax")), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "'softmax'") && strstr(ocr_last_error(), "Global.amp_custom_black_list"),
                  "%s", ocr_last_error());
    ck_assert_int_eq(p.n_black, 2);
    ck_assert_int_eq(amp_policy_op_class(&p, "conv2d"), AMP_WHITE);
    ck_assert_int_eq(amp_policy_add_black(&p, LIST("conv4d")), OCR_ERR_CONFIG);
    // Layer patterns append (duplicates ignored); an empty one is the config error of the key.
    ck_assert_int_eq(amp_policy_add_fp32_layers(&p, LIST("neck.*", "neck.*", "head.fc")), OCR_OK);
    ck_assert_int_eq(p.n_fp32_layers, 2);
    ck_assert_int_eq(amp_policy_add_fp32_layers(&p, LIST("")), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "Global.amp_fp32_layers"), "%s", ocr_last_error());
    resolve(&p, d, NULL);
    expect(d, "hhhhhfffffhh");  // softmax is custom-white here
    amp_policy_free(&p);
}
END_TEST

static OcrConfig *parse(const char *json) {
    OcrConfig *cfg = NULL;
    ck_assert_msg(ocr_config_parse(&cfg, json, "test.yml") == OCR_OK, "%s", ocr_last_error());
    return cfg;
}

static void expect_config_error(const char *json, const char *needle1, const char *needle2) {
    OcrConfig *cfg = parse(json);
    AmpConfig c;
    ocr_status_t st = amp_config_from_config(&c, cfg);
    ck_assert_msg(st == OCR_ERR_CONFIG, "%s: expected a config error, got %s", json, ocr_status_name(st));
    const char *e = ocr_last_error();
    ck_assert_msg(strstr(e, "test.yml") && strstr(e, needle1) && (!needle2 || strstr(e, needle2)), "%s -> %s", json, e);
    ocr_config_free(cfg);
}

START_TEST(config_keys) {
    OcrConfig *cfg = parse("{\"Global\": {\"epoch_num\": 3}}");
    AmpConfig c;
    ck_assert_int_eq(amp_config_from_config(&c, cfg), OCR_OK);
    ck_assert_int_eq(c.policy.level, OCR_AMP_O0);
    ck_assert_int_eq(c.scaler.enabled, 0);
    amp_config_free(&c);
    ocr_config_free(cfg);

    // PaddleOCR: use_amp alone means O2, float16; our scaler defaults.
    cfg = parse("{\"Global\": {\"use_amp\": true}}");
    ck_assert_int_eq(amp_config_from_config(&c, cfg), OCR_OK);
    ck_assert_int_eq(c.policy.level, OCR_AMP_O2);
    ck_assert_int_eq(c.policy.dtype, OCR_F16);
    ck_assert(c.scaler.enabled && c.scaler.dynamic);
    ck_assert_float_eq(c.scaler.init_scale, 65536.0f);
    ck_assert_int_eq(c.scaler.incr_every_n_steps, 2000);
    ck_assert_int_eq(c.scaler.decr_every_n_nan_or_inf, 1);
    ck_assert(c.scaler.min_scale == 1.0 && c.scaler.max_scale == 16777216.0);
    amp_config_free(&c);
    ocr_config_free(cfg);

    // The documented PaddleOCR recipe plus Paddle-style scaler keys.
    cfg = parse("{\"Global\": {\"use_amp\": true, \"amp_level\": \"O1\", \"scale_loss\": 1024.0,"
                " \"use_dynamic_loss_scaling\": true, \"incr_every_n_steps\": 1000, \"decr_every_n_nan_or_inf\": 2,"
                " \"incr_ratio\": 2.0, \"decr_ratio\": 0.5, \"min_loss_scale\": 0, \"max_loss_scale\": 0,"
                " \"amp_custom_black_list\": [\"exp\", \"softmax\"], \"amp_fp32_layers\": [\"neck.*\"],"
                " \"amp_activation_stats_every\": 50}}");
    ck_assert_msg(amp_config_from_config(&c, cfg) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(c.policy.level, OCR_AMP_O1);
    ck_assert_float_eq(c.scaler.init_scale, 1024.0f);
    ck_assert_int_eq(c.scaler.incr_every_n_steps, 1000);
    ck_assert_int_eq(c.scaler.decr_every_n_nan_or_inf, 2);
    ck_assert(c.scaler.min_scale == 0.0 && c.scaler.max_scale == 0.0);
    ck_assert_int_eq(c.policy.n_black, 2);
    ck_assert_int_eq(c.policy.n_fp32_layers, 1);
    ck_assert_int_eq(c.activation_stats_every, 50);
    amp_config_free(&c);
    ocr_config_free(cfg);

    // bfloat16 turns the scaler off; static scaling stays static.
    cfg = parse("{\"Global\": {\"use_amp\": true, \"amp_dtype\": \"bfloat16\", \"amp_stochastic_rounding\": true}}");
    ck_assert_int_eq(amp_config_from_config(&c, cfg), OCR_OK);
    ck_assert_int_eq(c.scaler.enabled, 0);
    ck_assert_int_eq(c.stochastic_rounding, 1);
    amp_config_free(&c);
    ocr_config_free(cfg);
    cfg = parse("{\"Global\": {\"use_amp\": true, \"use_dynamic_loss_scaling\": false, \"scale_loss\": 128}}");
    ck_assert_int_eq(amp_config_from_config(&c, cfg), OCR_OK);
    ck_assert(c.scaler.enabled && !c.scaler.dynamic && c.scaler.init_scale == 128.0f);
    amp_config_free(&c);
    ocr_config_free(cfg);
}
END_TEST

START_TEST(config_errors) {
    expect_config_error("{\"Global\": {\"use_amp\": \"yes\"}}", "Global.use_amp", NULL);
    expect_config_error("{\"Global\": {\"use_amp\": true, \"amp_level\": \"O3\"}}", "Global.amp_level", "O3");
    // Checked even with AMP off: the typo should not wait for the AMP run.
    expect_config_error("{\"Global\": {\"amp_dtype\": \"fp16\"}}", "Global.amp_dtype", "bfloat16");
    expect_config_error("{\"Global\": {\"use_amp\": true, \"amp_custom_white_list\": \"conv2d\"}}",
                        "Global.amp_custom_white_list", "list");
    expect_config_error("{\"Global\": {\"use_amp\": true, \"amp_custom_black_list\": [\"exp\", 3]}}",
                        "Global.amp_custom_black_list.1", NULL);
    expect_config_error("{\"Global\": {\"use_amp\": true, \"amp_custom_white_list\": [\"conv2d\"],"
                        " \"amp_custom_black_list\": [\"conv2d\"]}}",
                        "Global.amp_custom_white_list", "Global.amp_custom_black_list");
    expect_config_error("{\"Global\": {\"use_amp\": true, \"amp_fp32_layer\": [\"neck.*\"]}}", "Global.amp_fp32_layer",
                        "did you mean Global.amp_fp32_layers");
    expect_config_error("{\"Global\": {\"use_amp\": true, \"amp_level\": \"O1\", \"amp_stochastic_rounding\": true}}",
                        "Global.amp_stochastic_rounding", "O1");
    expect_config_error("{\"Global\": {\"use_amp\": true, \"incr_ratio\": 0.9}}", "Global.incr_ratio", NULL);
    expect_config_error("{\"Global\": {\"use_amp\": true, \"decr_ratio\": 1.5}}", "Global.decr_ratio", NULL);
    expect_config_error("{\"Global\": {\"use_amp\": true, \"incr_every_n_steps\": 0}}", "Global.incr_every_n_steps",
                        NULL);
    expect_config_error("{\"Global\": {\"use_amp\": true, \"decr_every_n_nan_or_inf\": 1.5}}",
                        "Global.decr_every_n_nan_or_inf", NULL);
    expect_config_error("{\"Global\": {\"use_amp\": true, \"scale_loss\": -1}}", "Global.scale_loss", NULL);
    expect_config_error("{\"Global\": {\"use_amp\": true, \"scale_loss\": 1e9}}", "Global.scale_loss",
                        "Global.max_loss_scale");
    expect_config_error("{\"Global\": {\"use_amp\": true, \"min_loss_scale\": 8, \"max_loss_scale\": 4}}",
                        "Global.min_loss_scale", "Global.max_loss_scale");
    expect_config_error("{\"Global\": {\"use_amp\": true, \"amp_activation_stats_every\": -2}}",
                        "Global.amp_activation_stats_every", NULL);
}
END_TEST

int main(void) {
    Suite *s = suite_create("amp_policy");
    TCase *tc = tcase_create("policy");
    tcase_add_test(tc, defaults_o1_follow_inputs);
    tcase_add_test(tc, defaults_o2_and_o0);
    tcase_add_test(tc, custom_lists);
    tcase_add_test(tc, conflicts_and_unknown_types);
    tcase_add_test(tc, fp32_layer_patterns);
    tcase_add_test(tc, lowp_restriction);
    tcase_add_test(tc, copy_and_additions);
    tcase_add_test(tc, config_keys);
    tcase_add_test(tc, config_errors);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

// The training step and loop that every device runs (training/step.c, training/trainer.c), on
// the CPU:
// - the step's normalisation (kernels/input.h, on the model's device) is the host formula of
//   feed_normalize bit for bit, padding included;
// - two steps in flight (step_enqueue, step_enqueue, step_collect, ... as a GPU runs them) give
//   exactly the outcomes and weights of one step at a time, in FP32 and BF16-O2;
// - the trainer's loop with two steps in flight (TrainOptions.steps_in_flight, the GPU's depth)
//   writes the same metrics, evaluations and checkpoints as with one, across evaluation and
//   epoch boundaries where it drains;
// - the gradient buffer is held from the step's set-up, before the first forward pass.
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>

#include "amp/engine.h"
#include "training/feed.h"
#include "training/optim.h"
#include "training/run_config.h"
#include "training/step.h"
#include "training/trainer.h"
#include "core/memory.h"
#include "core/rng.h"
#include "kernels/backend.h"
#include "kernels/input.h"
#include "models/amp_view.h"
#include "models/model.h"
#include "tests/training/training_test_util.h"

static char *g_dir;
static char g_cfg[512];

static void setup_data(void) { g_dir = at_setup_digits(g_cfg, sizeof g_cfg, "\"epoch_num\": 2,"); }

enum { B = 8, H = 32, W = 64, C = 3, L = 8 };

// A loader-style batch: random pixels, byte 128 past each sample's width, 1..3 digit labels.
typedef struct {
    uint8_t px[B * H * W * C];
    int32_t labels[B * L], lengths[B], widths[B];
    FeedBatch fb;
} Batch;

static void make_batch(Batch *b, uint64_t seed) {
    memset(b, 0, sizeof *b);
    for (int n = 0; n < B; n++) {
        b->widths[n] = n == 0 ? W : 8 + (int)(ocr_rng_uniform(seed, 1, (uint64_t)n) * (W - 8));
        b->lengths[n] = 1 + n % 3;
        for (int k = 0; k < b->lengths[n]; k++) b->labels[n * L + k] = 1 + (n * 7 + k * 3 + (int)seed) % 10;
    }
    for (int i = 0; i < B * H * W * C; i++) {
        int n = i / (H * W * C), x = i / C % W;
        b->px[i] = x < b->widths[n] ? (uint8_t)(ocr_rng_uniform(seed, 2, (uint64_t)i) * 256.0f) : 128;
    }
    b->fb = (FeedBatch){.capacity = B, .count = B, .height = H, .width = W, .channels = C, .max_len = L,
                        .pixels = b->px, .labels = b->labels, .lengths = b->lengths, .widths = b->widths};
}

START_TEST(test_step_normalisation_is_feed_normalize) {
    static Batch b;
    make_batch(&b, 3);
    float *host = malloc(sizeof(float) * B * H * W * C);
    feed_normalize(&b.fb, host);
    FeedDeviceBatch db;
    feed_batch_view(&b.fb, &db);
    OcrTensor out;
    ck_assert(ocr_tensor_alloc(&out, OCR_F32, ocr_cpu(), 4, (int64_t[]){B, H, W, C}, OCR_MEM_DATA) == OCR_OK);
    ocr_input_normalize_padded_forward(&out, &db.images, &db.widths);
    ck_assert_msg(memcmp(out.data, host, sizeof(float) * B * H * W * C) == 0,
                  "the step's normalisation differs from feed_normalize");
    ocr_tensor_free(&out);
    free(host);
}
END_TEST

typedef struct {
    OcrConfig *cfg;
    OcrModel *m;
    AmpEngine amp;
    Optimizer o;
    StepCtx sc;
} Stepper;

static void stepper_init(Stepper *s, const char *const *ov, int nov) {
    RunConfig rc;
    ck_assert_msg(run_config_load(&s->cfg, &rc, g_cfg, ov, nov, RUN_NEED_TRAIN) == OCR_OK, "%s", ocr_last_error());
    ocr_backends_init(rc.threads);
    ck_assert_msg(ocr_model_from_config(&s->m, s->cfg) == OCR_OK, "%s", ocr_last_error());
    AmpConfig ac;
    ck_assert(amp_config_from_config(&ac, s->cfg) == OCR_OK);
    amp_engine_init(&s->amp, &ac);
    ck_assert(ocr_amp_attach(&s->amp, ocr_model_ops(s->m), ocr_model_params(s->m), ocr_model_stats(s->m)) == OCR_OK);
    ck_assert(optim_init(&s->o, &rc.optim, ocr_model_params(s->m)) == OCR_OK);
    ck_assert(step_ctx_init(&s->sc, s->m, &s->amp, &s->o, B, 0) == OCR_OK);
    s->sc.keep_logits = 1;
}

static void stepper_free(Stepper *s) {
    step_ctx_free(&s->sc);
    optim_free(&s->o);
    amp_engine_free(&s->amp);
    ocr_model_free(s->m);
    ocr_config_free(s->cfg);
}

static int same_outcome(const StepOutcome *a, const StepOutcome *b) {
    return a->loss == b->loss && a->scale == b->scale && a->skipped == b->skipped &&
           a->infeasible == b->infeasible && a->overflow_layer == b->overflow_layer &&
           (a->grad_norm == b->grad_norm || (isnan(a->grad_norm) && isnan(b->grad_norm)));
}

enum { NSTEPS = 5 };

static void in_flight_case(const char *tag, const char *const *ov, int nov) {
    static Batch batches[NSTEPS];
    FeedDeviceBatch db[NSTEPS];
    for (int i = 0; i < NSTEPS; i++) {
        make_batch(&batches[i], 10 + (uint64_t)i);
        feed_batch_view(&batches[i].fb, &db[i]);
    }
    Stepper one, two;
    stepper_init(&one, ov, nov);
    stepper_init(&two, ov, nov);
    ck_assert_int_eq(step_in_flight(&one.sc), 1);  // the CPU's own depth
    StepOutcome a[NSTEPS], b[NSTEPS];
    for (int i = 0; i < NSTEPS; i++) {
        ck_assert_msg(step_run(&one.sc, &db[i], 0.01, &a[i]) == OCR_OK, "%s", ocr_last_error());
        ck_assert_int_eq(step_pending(&one.sc), 0);
    }
    // A GPU's order: the next step is enqueued before the previous one is collected.
    int collected = 0;
    for (int i = 0; i < NSTEPS; i++) {
        step_mode_t mode;
        ck_assert_msg(step_enqueue(&two.sc, &db[i], 0.01, &mode) == OCR_OK, "%s", ocr_last_error());
        ck_assert_int_eq(mode, STEP_EAGER);
        // The metric reads the step just enqueued: its logits are kept on the CPU at once.
        ck_assert_ptr_nonnull(step_kept_logits(&two.sc));
        if (step_pending(&two.sc) == STEP_MAX_IN_FLIGHT) {
            ck_assert(step_collect(&two.sc, &b[collected]) == OCR_OK);
            collected++;
        }
    }
    while (step_pending(&two.sc) > 0) {
        ck_assert(step_collect(&two.sc, &b[collected]) == OCR_OK);
        collected++;
    }
    ck_assert_int_eq(collected, NSTEPS);
    for (int i = 0; i < NSTEPS; i++) {
        printf("%s step %d: loss %.7f, gradient norm %.6g, scale %g\n", tag, i, a[i].loss, a[i].grad_norm,
               (double)a[i].scale);
        ck_assert_msg(same_outcome(&a[i], &b[i]), "%s step %d: loss %.9g/%.9g, norm %.9g/%.9g", tag, i, a[i].loss,
                      b[i].loss, a[i].grad_norm, b[i].grad_norm);
        ck_assert(isfinite(a[i].loss) && !a[i].skipped);
    }
    OcrParamTable *pa = ocr_model_params(one.m), *pb = ocr_model_params(two.m);
    ck_assert_msg(memcmp(pa->data, pb->data, pa->bytes) == 0, "%s: weights differ", tag);
    ck_assert_int_eq(one.o.updates, two.o.updates);
    for (int i = 0; i < pa->count; i++)
        ck_assert_msg(memcmp(one.o.m[i].data, two.o.m[i].data, ocr_tensor_bytes(&one.o.m[i])) == 0 &&
                          memcmp(one.o.v[i].data, two.o.v[i].data, ocr_tensor_bytes(&one.o.v[i])) == 0,
                      "%s: Adam moments of %s differ", tag, pa->items[i].name);
    stepper_free(&one);
    stepper_free(&two);
}

// The gradient buffer is the step's from its set-up on, before any forward pass: a step whose
// memory peaks in the forward then counts it, in capacity's probes as in a training run.
START_TEST(test_step_holds_gradients_from_set_up) {
    const char *ov[] = {"Global.use_amp=true", "Global.amp_level=O2", "Global.amp_dtype=bfloat16"};
    OcrMemStats before = ocr_mem_stats(ocr_cpu());
    Stepper s;
    stepper_init(&s, ov, 3);
    OcrParamTable *p = ocr_model_params(s.m);
    ck_assert_ptr_nonnull(p->grad);
    OcrMemStats after = ocr_mem_stats(ocr_cpu());
    ck_assert_int_eq(after.current[OCR_MEM_GRADS] - before.current[OCR_MEM_GRADS], (int64_t)p->bytes);
    stepper_free(&s);
}
END_TEST

START_TEST(test_two_steps_in_flight_fp32) {
    const char *ov[] = {"Global.use_amp=false"};
    in_flight_case("fp32", ov, 1);
}
END_TEST

START_TEST(test_two_steps_in_flight_bf16_o2) {
    const char *ov[] = {"Global.use_amp=true", "Global.amp_level=O2", "Global.amp_dtype=bfloat16"};
    in_flight_case("bf16-o2", ov, 3);
}
END_TEST

// An extra loss that adds nothing. With one, the CPU step takes its f32 path: f32 logits and
// gradient apart from the model's (a copy of low-precision logits, the gradient rounded into
// dlogits afterwards), dlogits a buffer of their own.
static ocr_status_t no_extra_loss(void *user, StepCtx *s, const FeedDeviceBatch *b, const OcrTensor *logits,
                                  OcrTensor *dl32, float grad_scale, double *loss) {
    (void)user, (void)s, (void)b, (void)logits, (void)dl32, (void)grad_scale;
    *loss = 0.0;
    return OCR_OK;
}

// Without an extra loss the CPU step runs the CTC loss on the model's logits in their own dtype
// and writes the gradient over them (dlogits share the logits' memory): the same outcomes, kept
// logits, weights and Adam moments as the f32 path, bit for bit.
static void direct_loss_case(const char *tag, ocr_dtype_t logits_dtype, const char *const *ov, int nov) {
    static Batch batches[NSTEPS];
    FeedDeviceBatch db[NSTEPS];
    for (int i = 0; i < NSTEPS; i++) {
        make_batch(&batches[i], 20 + (uint64_t)i);
        feed_batch_view(&batches[i].fb, &db[i]);
    }
    Stepper direct, apart;
    stepper_init(&direct, ov, nov);
    stepper_init(&apart, ov, nov);
    apart.sc.extra.fn = no_extra_loss;
    for (int i = 0; i < NSTEPS; i++) {
        StepOutcome a, b;
        ck_assert_msg(step_run(&direct.sc, &db[i], 0.01, &a) == OCR_OK, "%s", ocr_last_error());
        ck_assert_msg(step_run(&apart.sc, &db[i], 0.01, &b) == OCR_OK, "%s", ocr_last_error());
        ck_assert_msg(same_outcome(&a, &b), "%s step %d: loss %.9g/%.9g, norm %.9g/%.9g", tag, i, a.loss, b.loss,
                      a.grad_norm, b.grad_norm);
        ck_assert(isfinite(a.loss) && !a.skipped);
        const OcrTensor *ka = step_kept_logits(&direct.sc), *kb = step_kept_logits(&apart.sc);
        ck_assert(ka && kb && ocr_tensor_same_shape(ka, kb));
        ck_assert_msg(memcmp(ka->data, kb->data, ocr_tensor_bytes(ka)) == 0, "%s step %d: kept logits differ", tag, i);
    }
    OcrParamTable *pa = ocr_model_params(direct.m), *pb = ocr_model_params(apart.m);
    ck_assert_msg(memcmp(pa->data, pb->data, pa->bytes) == 0, "%s: weights differ", tag);
    for (int i = 0; i < pa->count; i++)
        ck_assert_msg(memcmp(direct.o.m[i].data, apart.o.m[i].data, ocr_tensor_bytes(&direct.o.m[i])) == 0 &&
                          memcmp(direct.o.v[i].data, apart.o.v[i].data, ocr_tensor_bytes(&direct.o.v[i])) == 0,
                      "%s: Adam moments of %s differ", tag, pa->items[i].name);
    // The direct step's model pass has its dlogits in the logits' memory; the other's apart.
    for (int shared = 0; shared < 2; shared++) {
        ocr_model_share_dlogits(direct.m, shared);
        ck_assert(ocr_model_forward_u8(direct.m, &db[0].images, &db[0].widths, 1) == OCR_OK);
        const OcrTensor *z = ocr_model_logits(direct.m), *dz = ocr_model_dlogits(direct.m);
        ck_assert(z && dz && ocr_tensor_same_shape(z, dz) && z->dtype == dz->dtype);
        ck_assert_int_eq(z->dtype, logits_dtype);  // the case runs the loss in the dtype it means to
        ck_assert_int_eq(z->data == dz->data, shared);
    }
    stepper_free(&direct);
    stepper_free(&apart);
}

START_TEST(test_direct_loss_fp32) {
    const char *ov[] = {"Global.use_amp=false"};
    direct_loss_case("fp32", OCR_F32, ov, 1);
}
END_TEST

START_TEST(test_direct_loss_bf16_o2) {
    const char *ov[] = {"Global.use_amp=true", "Global.amp_level=O2", "Global.amp_dtype=bfloat16"};
    direct_loss_case("bf16-o2", OCR_BF16, ov, 3);
}
END_TEST

// metrics.jsonl without its timings (the only thing the depth may change).
static char *metrics_without_timings(const char *dir) {
    char p[800];
    snprintf(p, sizeof p, "%s/metrics.jsonl", dir);
    char *text;
    size_t size;
    ck_assert_msg(ocr_read_file(p, &text, &size) == OCR_OK, "%s", ocr_last_error());
    size_t cap = size + 1, used = 0;
    char *out = malloc(cap);
    out[0] = '\0';
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        ck_assert_ptr_nonnull(o);
        cJSON_DeleteItemFromObject(o, "step_time_s");
        cJSON_DeleteItemFromObject(o, "samples_per_s");
        cJSON *e = cJSON_GetObjectItem(o, "eval");
        if (e) cJSON_DeleteItemFromObject(e, "samples_per_s");
        char *s = cJSON_PrintUnformatted(o);
        size_t n = strlen(s);
        if (used + n + 2 > cap) {
            cap = 2 * (used + n + 2);
            out = realloc(out, cap);
        }
        memcpy(out + used, s, n);
        used += n;
        out[used++] = '\n';
        out[used] = '\0';
        free(s);
        cJSON_Delete(o);
    }
    free(text);
    return out;
}

static void train_with_depth(int depth, const char *tag, TrainResult *res) {
    char ov[700];
    snprintf(ov, sizeof ov, "Global.save_model_dir=%s/%s", g_dir, tag);
    // Evaluations every 3 iterations and the epoch ends (every 8): the loop drains its steps in
    // flight at each of them.
    const char *overrides[] = {ov, "Global.eval_batch_step=[0, 3]", "Global.cal_metric_during_train=true"};
    OcrConfig *cfg;
    RunConfig rc;
    ck_assert_msg(run_config_load(&cfg, &rc, g_cfg, overrides, 3, RUN_NEED_TRAIN) == OCR_OK, "%s", ocr_last_error());
    TrainOptions opt = {0};
    opt.save_checkpoints = 1;
    opt.steps_in_flight = depth;
    ck_assert_msg(train_run(cfg, &rc, &opt, res) == OCR_OK, "%s", ocr_last_error());
    ocr_config_free(cfg);
}

START_TEST(test_trainer_loop_two_steps_in_flight) {
    TrainResult r1, r2;
    train_with_depth(1, "depth1", &r1);
    train_with_depth(2, "depth2", &r2);
    ck_assert_int_eq(r1.history.n_steps, 16);
    ck_assert_int_eq(r1.history.n_steps, r2.history.n_steps);
    for (int64_t i = 0; i < r1.history.n_steps; i++) {
        const StepRecord *a = &r1.history.steps[i], *b = &r2.history.steps[i];
        ck_assert_msg(a->iter == b->iter && a->loss == b->loss && a->lr == b->lr && a->scale == b->scale &&
                          a->skipped == b->skipped && a->train_acc == b->train_acc,
                      "step %lld: loss %.9g/%.9g", (long long)i, (double)a->loss, (double)b->loss);
    }
    ck_assert_int_gt(r1.history.n_evals, 4);
    ck_assert_int_eq(r1.history.n_evals, r2.history.n_evals);
    for (int i = 0; i < r1.history.n_evals; i++)
        ck_assert(r1.history.evals[i].iter == r2.history.evals[i].iter &&
                  r1.history.evals[i].acc == r2.history.evals[i].acc);
    char a_dir[700], b_dir[700];
    snprintf(a_dir, sizeof a_dir, "%s/depth1", g_dir);
    snprintf(b_dir, sizeof b_dir, "%s/depth2", g_dir);
    char *ma = metrics_without_timings(a_dir), *mb = metrics_without_timings(b_dir);
    ck_assert_msg(strcmp(ma, mb) == 0, "metrics.jsonl differs:\n%s\nvs\n%s", ma, mb);
    free(ma);
    free(mb);
    const char *files[] = {"latest/model.safetensors", "latest/optimizer.safetensors", "best/model.safetensors", NULL};
    for (int i = 0; files[i]; i++) {
        char pa[800], pb[800];
        snprintf(pa, sizeof pa, "%s/%s", a_dir, files[i]);
        snprintf(pb, sizeof pb, "%s/%s", b_dir, files[i]);
        ck_assert_msg(at_same_file(pa, pb), "%s differs with two steps in flight", files[i]);
    }
    train_result_free(&r1);
    train_result_free(&r2);
}
END_TEST

int main(void) {
    Suite *s = suite_create("training_step");
    TCase *tc = tcase_create("step");
    tcase_set_timeout(tc, 600);
    tcase_add_unchecked_fixture(tc, setup_data, NULL);
    tcase_add_test(tc, test_step_normalisation_is_feed_normalize);
    tcase_add_test(tc, test_step_holds_gradients_from_set_up);
    tcase_add_test(tc, test_two_steps_in_flight_fp32);
    tcase_add_test(tc, test_two_steps_in_flight_bf16_o2);
    tcase_add_test(tc, test_direct_loss_fp32);
    tcase_add_test(tc, test_direct_loss_bf16_o2);
    tcase_add_test(tc, test_trainer_loop_two_steps_in_flight);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

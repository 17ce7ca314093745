// Global.amp_overflow (docs/AMP.md, "Overflowed steps: recompute or skip"), on whole FP16-O2
// training runs on the CPU (emulated f16):
// - recompute: a run whose first scale is far too large (2^30, above our default ceiling of 2^24,
//   which the runs lift: the first step's gradients overflow many times over) recomputes that step at ever lower scales until it is finite, and
//   is then BIT-IDENTICAL to a twin run that started at the scale it settled at: every step's
//   loss, scale and norm, the final weights and optimizer moments, and the checkpoint's state
//   (scaler counters, Adam's update count, the dropout counter) but for the recompute count
//   itself. Dropout and stochastic rounding are on, so the dropout counter and the rounding
//   seed of the overflowed attempts must not have moved; BN running statistics (the backbone's)
//   must have been restored. No batch is lost: steps == batches, none skipped.
//   Why the scaler's later growth matches as well: a recompute backoff leaves good_steps at 0,
//   as at the start of the twin, and does not count the attempt in the scaler's step counters,
//   so both scalers are in the same state after the first step and grow (and, if a grown scale
//   overflows again, recompute) at the same steps. The second case grows the scale every 2
//   steps to hold that too; the first keeps the default interval (2000), where nothing grows.
// - skip: the same start skips steps, as PaddleOCR and PyTorch do (the scale halving at each).
// - at the floor (Global.min_loss_scale): an overflow that the scale cannot cure is skipped
//   and counted as skipped, not recomputed.
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>

#include "training/run_config.h"
#include "training/trainer.h"
#include "core/fileio.h"
#include "tests/training/training_test_util.h"

static char *g_dir;
static char g_cfg[512];

static void setup_data(void) { g_dir = at_setup_digits(g_cfg, sizeof g_cfg, "\"epoch_num\": 1,"); }

#define FP16_O2                                                                                                   \
    "Global.use_amp=true", "Global.amp_level=O2", "Global.amp_dtype=float16",                                    \
        "Global.use_dynamic_loss_scaling=true", "Global.max_loss_scale=0", "Global.amp_stochastic_rounding=true",  \
        "Architecture.Neck.drop_rate=0.2", "Architecture.Neck.attn_drop_rate=0.2"

// Trains g_cfg into g_dir/tag with the overrides (and Global.scale_loss = scale).
static void train(const char *tag, double scale, const char *const *extra, int64_t max_iters, TrainResult *res) {
    char dir[700], sc[64];
    snprintf(dir, sizeof dir, "Global.save_model_dir=%s/%s", g_dir, tag);
    snprintf(sc, sizeof sc, "Global.scale_loss=%.17g", scale);
    const char *ov[24] = {dir, sc, FP16_O2};
    int n = 0;
    while (ov[n]) n++;
    for (int i = 0; extra && extra[i]; i++) ov[n++] = extra[i];
    OcrConfig *cfg;
    RunConfig rc;
    ck_assert_msg(run_config_load(&cfg, &rc, g_cfg, ov, n, RUN_NEED_TRAIN) == OCR_OK, "%s", ocr_last_error());
    TrainOptions opt = {0};
    opt.save_checkpoints = 1;
    opt.max_iters = max_iters;
    memset(res, 0, sizeof *res);
    ck_assert_msg(train_run(cfg, &rc, &opt, res) == OCR_OK, "%s", ocr_last_error());
    ocr_config_free(cfg);
}

static int64_t sum_recomputed(const TrainResult *r) {
    int64_t n = 0;
    for (int64_t i = 0; i < r->history.n_steps; i++) n += r->history.steps[i].recomputed;
    return n;
}

static int64_t sum_skipped(const TrainResult *r) {
    int64_t n = 0;
    for (int64_t i = 0; i < r->history.n_steps; i++) n += r->history.steps[i].skipped;
    return n;
}

// tag/latest/state.json without the recompute count (which is what differs by design).
static cJSON *state_without_recomputes(const char *tag) {
    char p[800];
    snprintf(p, sizeof p, "%s/%s/latest/state.json", g_dir, tag);
    cJSON *o = at_read_json(p);
    cJSON *amp = cJSON_GetObjectItem(o, "amp");
    ck_assert(amp && cJSON_HasObjectItem(amp, "recomputed_steps"));
    cJSON_DeleteItemFromObject(amp, "recomputed_steps");
    return o;
}

// The "recomputed" member of metrics.jsonl's step line of iteration `iter` (1-based), 0 when absent.
static int metrics_recomputed(const char *tag, int64_t iter) {
    char p[800];
    snprintf(p, sizeof p, "%s/%s/metrics.jsonl", g_dir, tag);
    char *text;
    size_t size;
    ck_assert_msg(ocr_read_file(p, &text, &size) == OCR_OK, "%s", ocr_last_error());
    int v = -1;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        const cJSON *it = cJSON_GetObjectItem(o, "iter");
        if (cJSON_HasObjectItem(o, "loss") && it && (int64_t)it->valuedouble == iter) {
            const cJSON *r = cJSON_GetObjectItem(o, "recomputed");
            v = r ? r->valueint : 0;
        }
        cJSON_Delete(o);
    }
    free(text);
    ck_assert_msg(v >= 0, "no step line for iteration %lld", (long long)iter);
    return v;
}

// A recompute run from 2^30 against a twin started where it settled.
static void twin_case(const char *tag, const char *const *extra) {
    char ta[64], tb[64];
    snprintf(ta, sizeof ta, "%s_from_2p30", tag);
    snprintf(tb, sizeof tb, "%s_twin", tag);
    TrainResult a, b;
    train(ta, 1073741824.0, extra, 0, &a);
    // Every batch trained on, none skipped; the overflows were recomputed, and counted.
    ck_assert_int_eq(a.history.n_steps, 8);
    ck_assert_int_eq(a.amp.skipped_steps, 0);
    ck_assert_int_eq(sum_skipped(&a), 0);
    ck_assert_int_gt(a.history.steps[0].recomputed, 0);
    ck_assert_int_eq(a.amp.recomputed_steps, sum_recomputed(&a));
    ck_assert(a.amp.recompute_seconds > 0);
    ck_assert_int_eq(metrics_recomputed(ta, 1), a.history.steps[0].recomputed);
    // The scale the first step settled at: 2^30 halved once per recompute.
    const float settled = a.history.steps[0].scale;
    ck_assert(settled == ldexpf(1.0f, 30 - a.history.steps[0].recomputed));
    printf("%s: step 1 recomputed %d times, settled at loss scale %g; %lld recomputes in all (%.3f s); final "
           "scale %g\n",
           tag, a.history.steps[0].recomputed, (double)settled, (long long)a.amp.recomputed_steps,
           a.amp.recompute_seconds, (double)a.amp.final_scale);

    train(tb, settled, extra, 0, &b);
    ck_assert_int_eq(b.history.n_steps, a.history.n_steps);
    ck_assert_int_eq(b.history.steps[0].recomputed, 0);  // the twin's first step never overflowed
    for (int64_t i = 0; i < a.history.n_steps; i++) {
        const StepRecord *x = &a.history.steps[i], *y = &b.history.steps[i];
        ck_assert_msg(memcmp(&x->loss, &y->loss, sizeof x->loss) == 0 && x->scale == y->scale &&
                          memcmp(&x->grad_norm, &y->grad_norm, sizeof x->grad_norm) == 0 && x->skipped == y->skipped,
                      "%s: step %lld differs: loss %a/%a, scale %g/%g, norm %a/%a", tag, (long long)i + 1,
                      (double)x->loss, (double)y->loss, (double)x->scale, (double)y->scale, (double)x->grad_norm,
                      (double)y->grad_norm);
        // Later overflows (a grown scale) happen, and are recomputed, alike in both.
        if (i > 0) ck_assert_int_eq(x->recomputed, y->recomputed);
    }
    ck_assert(a.amp.final_scale == b.amp.final_scale);
    ck_assert_int_eq(a.amp.recomputed_steps - a.history.steps[0].recomputed, b.amp.recomputed_steps);
    const char *files[] = {"latest/model.safetensors", "latest/optimizer.safetensors", NULL};
    for (int i = 0; files[i]; i++) {
        char pa[800], pb[800];
        snprintf(pa, sizeof pa, "%s/%s/%s", g_dir, ta, files[i]);
        snprintf(pb, sizeof pb, "%s/%s/%s", g_dir, tb, files[i]);
        ck_assert_msg(at_same_file(pa, pb), "%s: %s differs from the twin's", tag, files[i]);
    }
    cJSON *sa = state_without_recomputes(ta), *sb = state_without_recomputes(tb);
    char *ja = cJSON_Print(sa), *jb = cJSON_Print(sb);
    ck_assert_msg(cJSON_Compare(sa, sb, 1), "%s: state.json differs:\n%s\nvs\n%s", tag, ja, jb);
    free(ja);
    free(jb);
    cJSON_Delete(sa);
    cJSON_Delete(sb);
    train_result_free(&a);
    train_result_free(&b);
}

START_TEST(test_recompute_is_bit_identical_to_a_run_at_the_settled_scale) { twin_case("steady", NULL); }
END_TEST

START_TEST(test_recompute_twin_with_scale_growth) {
    const char *grow[] = {"Global.incr_every_n_steps=2", NULL};
    twin_case("growing", grow);
}
END_TEST

START_TEST(test_skip_mode_skips) {
    const char *skip[] = {"Global.amp_overflow=skip", NULL};
    TrainResult r;
    train("skip", 1073741824.0, skip, 0, &r);
    ck_assert_int_eq(r.history.n_steps, 8);
    ck_assert_int_gt(r.amp.skipped_steps, 0);
    ck_assert_int_eq(r.amp.skipped_steps, sum_skipped(&r));
    ck_assert_int_eq(r.amp.recomputed_steps, 0);
    ck_assert_int_eq(sum_recomputed(&r), 0);
    ck_assert(r.amp.recompute_seconds == 0);
    // PaddleOCR's and PyTorch's semantics: the update is dropped and the next batch gets the halved scale.
    ck_assert(r.history.steps[0].skipped);
    for (int64_t i = 0; i + 1 < r.history.n_steps; i++)
        if (r.history.steps[i].skipped) ck_assert(r.history.steps[i + 1].scale == r.history.steps[i].scale / 2);
    printf("skip: %lld of %lld steps skipped; final scale %g\n", (long long)r.amp.skipped_steps,
           (long long)r.history.n_steps, (double)r.amp.final_scale);
    train_result_free(&r);
}
END_TEST

START_TEST(test_recompute_at_the_floor_skips) {
    // The floor is the start: the scale cannot come down, so the overflow is not a scale problem
    // the scaler can cure; the step is skipped as in skip mode.
    const char *floor_[] = {"Global.min_loss_scale=1073741824", NULL};
    TrainResult r;
    train("floor", 1073741824.0, floor_, 2, &r);
    ck_assert_int_eq(r.history.n_steps, 2);
    ck_assert_int_eq(r.amp.skipped_steps, 2);
    ck_assert_int_eq(r.amp.recomputed_steps, 0);
    ck_assert(r.amp.final_scale == 1073741824.0f);
    train_result_free(&r);
}
END_TEST

START_TEST(test_amp_overflow_is_validated) {
    const char *ov[] = {"Global.amp_overflow=sometimes"};
    OcrConfig *cfg = NULL;
    RunConfig rc;
    ck_assert_int_eq(run_config_load(&cfg, &rc, g_cfg, ov, 1, RUN_NEED_TRAIN), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "Global.amp_overflow"), "%s", ocr_last_error());
    // FP32 (no loss scale) takes either value.
    const char *skip[] = {"Global.amp_overflow=skip"};
    ck_assert_msg(run_config_load(&cfg, &rc, g_cfg, skip, 1, RUN_NEED_TRAIN) == OCR_OK, "%s", ocr_last_error());
    ocr_config_free(cfg);
}
END_TEST

int main(void) {
    Suite *s = suite_create("training_overflow_recompute");
    TCase *tc = tcase_create("overflow");
    tcase_set_timeout(tc, 900);
    tcase_add_unchecked_fixture(tc, setup_data, NULL);
    tcase_add_test(tc, test_amp_overflow_is_validated);
    tcase_add_test(tc, test_recompute_is_bit_identical_to_a_run_at_the_settled_scale);
    tcase_add_test(tc, test_recompute_twin_with_scale_growth);
    tcase_add_test(tc, test_skip_mode_skips);
    tcase_add_test(tc, test_recompute_at_the_floor_skips);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

// A run stopped inside an epoch and resumed from `latest` with Global.checkpoints is
// bit-identical to an uninterrupted one: weights, optimizer state and every step's loss; in FP32
// and in FP16-O2 with a dynamic loss scale (masters, scaler state, skipped steps).
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>

#include "training/capacity.h"
#include "cli/commands.h"
#include "training/run_config.h"
#include "core/memory.h"
#include "tests/training/training_test_util.h"

static char *g_dir;
static char g_cfg[512];

static void setup_data(void) { g_dir = at_setup_digits(g_cfg, sizeof g_cfg, "\"epoch_num\": 2,"); }

// Runs the same schedule uninterrupted and as stop (after `stop` iterations) + resume, and
// checks that the final weights, optimizer state and per-step losses are identical.
static void resume_case(const char *tag, const char *const *extra, int stop) {
    char a_dir[600], b_dir[600], ova[700], ovb[700], ck[700], steps[16];
    snprintf(a_dir, sizeof a_dir, "%s/resume_%s_a", g_dir, tag);
    snprintf(b_dir, sizeof b_dir, "%s/resume_%s_b", g_dir, tag);
    snprintf(ova, sizeof ova, "Global.save_model_dir=%s", a_dir);
    snprintf(ovb, sizeof ovb, "Global.save_model_dir=%s", b_dir);
    snprintf(ck, sizeof ck, "Global.checkpoints=%s/latest", b_dir);
    snprintf(steps, sizeof steps, "%d", stop);
    const char *args[32];
    int n;
#define BUILD(...)                                                   \
    do {                                                             \
        const char *base_[] = {__VA_ARGS__, NULL};                   \
        n = 0;                                                       \
        for (int i_ = 0; base_[i_]; i_++) args[n++] = base_[i_];     \
        for (int i_ = 0; extra && extra[i_]; i_++) args[n++] = extra[i_]; \
        args[n] = NULL;                                              \
    } while (0)
    BUILD("train", "-c", g_cfg, "-o", ova);
    ck_assert_int_eq(at_run(cmd_train, args), 0);
    BUILD("train", "-c", g_cfg, "--max-steps", steps, "-o", ovb);
    ck_assert_int_eq(at_run(cmd_train, args), 0);
    BUILD("train", "-c", g_cfg, "-o", ovb, ck);
    ck_assert_int_eq(at_run(cmd_train, args), 0);
#undef BUILD
    const char *files[] = {"latest/model.safetensors", "latest/optimizer.safetensors", NULL};
    for (int i = 0; files[i]; i++) {
        char pa[800], pb[800];
        snprintf(pa, sizeof pa, "%s/%s", a_dir, files[i]);
        snprintf(pb, sizeof pb, "%s/%s", b_dir, files[i]);
        ck_assert_msg(at_same_file(pa, pb), "%s: %s differs between the uninterrupted and the resumed run", tag,
                      files[i]);
    }
    int na, nb;
    double *la = at_read_losses(a_dir, &na, NULL), *lb = at_read_losses(b_dir, &nb, NULL);
    ck_assert_int_eq(na, nb);
    for (int i = 0; i < na; i++) ck_assert_msg(la[i] == lb[i], "%s: loss of step %d differs", tag, i + 1);
    free(la);
    free(lb);
}

START_TEST(test_resume_is_bit_identical_fp32) {
    // 8 steps per epoch, 2 epochs: stop inside the second epoch.
    resume_case("fp32", NULL, 11);
}
END_TEST

START_TEST(test_resume_is_bit_identical_fp16_o2) {
    const char *amp[] = {"--use_amp", "true", "--amp_level", "O2", "--amp_dtype", "float16", "--scale_loss",
                         "65536", "--use_dynamic_loss_scaling", "true", "-o", "Global.incr_every_n_steps=3", NULL};
    resume_case("fp16", amp, 7);
}
END_TEST

START_TEST(test_resume_is_bit_identical_with_dropout) {
    // Dropout masks come from (seed, site, the model's step counter): the checkpoint carries it.
    const char *drop[] = {"-o", "Architecture.Neck.drop_rate=0.2", "Architecture.Neck.attn_drop_rate=0.2", NULL};
    resume_case("dropout", drop, 5);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("app_resume");
    TCase *tc = tcase_create("t");
    tcase_set_timeout(tc, 300);
    tcase_add_unchecked_fixture(tc, setup_data, NULL);
    tcase_add_test(tc, test_resume_is_bit_identical_fp32);
    tcase_add_test(tc, test_resume_is_bit_identical_fp16_o2);
    tcase_add_test(tc, test_resume_is_bit_identical_with_dropout);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(suite()); }

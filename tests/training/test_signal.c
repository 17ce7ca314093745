// SIGINT and SIGTERM end to end: `ocrtrain train` (in a child process) signalled mid-epoch
// finishes the step it is in, writes `latest` holding every step it recorded, and exits with
// 128 + the signal (130, 143); the run resumed from that checkpoint ends with the same bits as
// an uninterrupted one. A second signal while that checkpoint is written exits at once with
// the same code and leaves the previous checkpoint whole.
#include <check.h>

#include "training/checkpoint.h"
#include "cli/commands.h"
#include "tests/training/training_test_util.h"

#define STEPS_PER_EPOCH 8  // 64 lines / batch 8, drop_last
#define EPOCHS 3

static char *g_dir;
static char g_cfg[512];
static char g_ref[600];

static void setup_data(void) {
    g_dir = at_setup_digits(g_cfg, sizeof g_cfg, "\"epoch_num\": 3, \"save_epoch_step\": 1,");
    snprintf(g_ref, sizeof g_ref, "%s/ref", g_dir);
}

static int run_to_end(const char *const *args, const char *log) {
    int status;
    pid_t pid = at_spawn(cmd_train, args, log, NULL, NULL);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) at_print_log(log);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The uninterrupted run, once per test process (each test is a forked child of the runner).
static void reference(void) {
    char ov[700], log[700], st[800];
    snprintf(st, sizeof st, "%s/latest/state.json", g_ref);
    if (at_exists(st)) return;
    snprintf(ov, sizeof ov, "Global.save_model_dir=%s", g_ref);
    snprintf(log, sizeof log, "%s/ref.log", g_dir);
    const char *a[] = {"train", "-c", g_cfg, "-o", ov, NULL};
    ck_assert_int_eq(run_to_end(a, log), 0);
}

static void assert_same_as_reference(const char *out, const char *ref_ck) {
    const char *files[] = {"model.safetensors", "optimizer.safetensors", "state.json", NULL};
    for (int i = 0; files[i]; i++) {
        char a[900], b[900];
        snprintf(a, sizeof a, "%s/latest/%s", out, files[i]);
        snprintf(b, sizeof b, "%s/%s/%s", g_ref, ref_ck, files[i]);
        ck_assert_msg(at_same_file(a, b), "%s differs from %s", a, b);
    }
}

static void signal_case(int sig) {
    reference();
    char out[600], ov[700], ck[700], log[700];
    snprintf(out, sizeof out, "%s/sig%d", g_dir, sig);
    snprintf(ov, sizeof ov, "Global.save_model_dir=%s", out);
    snprintf(ck, sizeof ck, "Global.checkpoints=%s/latest", out);
    snprintf(log, sizeof log, "%s/sig%d.log", g_dir, sig);
    const char *a[] = {"train", "-c", g_cfg, "-o", ov, NULL};
    pid_t pid = at_spawn(cmd_train, a, log, NULL, NULL);
    int status, done = 0;
    // Mid-epoch 2: after 11 recorded steps (epoch 1's checkpoint is written by then).
    while (!(done = at_child_done(pid, &status)) && at_steps_recorded(out) < STEPS_PER_EPOCH + 3) at_sleep_ms(1);
    ck_assert_msg(!done, "training ended before the signal");
    ck_assert_int_eq(kill(pid, sig), 0);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 128 + sig) at_print_log(log);
    ck_assert_msg(WIFEXITED(status), "signal %d killed training instead of stopping it", sig);
    ck_assert_int_eq(WEXITSTATUS(status), 128 + sig);
    // `latest` holds every step recorded, none lost: the step in flight was finished.
    char dir[700];
    snprintf(dir, sizeof dir, "%s/latest", out);
    CkptState s;
    ck_assert_msg(ckpt_load_state(dir, &s) == OCR_OK, "%s", ocr_last_error());
    int64_t recorded = at_steps_recorded(out);
    ck_assert_int_eq(s.iter, recorded);
    ck_assert_int_gt(s.iter, STEPS_PER_EPOCH);
    ck_assert_msg(s.iter < EPOCHS * STEPS_PER_EPOCH, "training finished before the signal took effect");
    ck_assert_int_eq(s.batch_in_epoch, s.iter % STEPS_PER_EPOCH);
    // It resumes, to the uninterrupted run's bits.
    const char *r[] = {"train", "-c", g_cfg, "-o", ov, ck, NULL};
    ck_assert_int_eq(run_to_end(r, log), 0);
    assert_same_as_reference(out, "latest");
    int na, nb;
    double *la = at_read_losses(g_ref, &na, NULL), *lb = at_read_losses(out, &nb, NULL);
    ck_assert_int_eq(na, EPOCHS * STEPS_PER_EPOCH);
    ck_assert_int_eq(nb, na);
    for (int i = 0; i < na; i++) ck_assert_msg(la[i] == lb[i], "loss of step %d differs after the resume", i + 1);
    free(la);
    free(lb);
}

START_TEST(test_sigint_stops_and_resumes) { signal_case(SIGINT); }
END_TEST

START_TEST(test_sigterm_stops_and_resumes) { signal_case(SIGTERM); }
END_TEST

// The second SIGINT lands while the stop's checkpoint is written (OCR_TEST_WRITE_DELAY_MS holds
// it open): exit 130 at once, so `latest` is still epoch 1's checkpoint, whole.
START_TEST(test_second_signal_exits_at_once) {
    reference();
    char out[600], ov[700], log[700], tmp[700];
    snprintf(out, sizeof out, "%s/sig_twice", g_dir);
    snprintf(ov, sizeof ov, "Global.save_model_dir=%s", out);
    snprintf(log, sizeof log, "%s/sig_twice.log", g_dir);
    snprintf(tmp, sizeof tmp, "%s/latest.tmp", out);
    const char *a[] = {"train", "-c", g_cfg, "-o", ov, NULL};
    pid_t pid = at_spawn(cmd_train, a, log, "OCR_TEST_WRITE_DELAY_MS", "150");
    int status, done = 0;
    while (!(done = at_child_done(pid, &status)) && at_steps_recorded(out) < STEPS_PER_EPOCH + 2) at_sleep_ms(1);
    ck_assert_msg(!done, "training ended before the signal");
    ck_assert_int_eq(kill(pid, SIGINT), 0);
    while (!(done = at_child_done(pid, &status)) && !at_exists(tmp)) at_sleep_ms(0.5);
    ck_assert_msg(!done, "training ended before the checkpoint write");
    ck_assert_int_eq(kill(pid, SIGINT), 0);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    // At once: `latest` below is still epoch 1's, so the stop's checkpoint (>= 4 delayed commits)
    // was not finished (both ways end with 130; only the checkpoint on disk tells them apart).
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 130);
    char real[800], latest[700];
    snprintf(latest, sizeof latest, "%s/latest", out);
    ck_assert_msg(ckpt_resolve(latest, real, sizeof real) == OCR_OK, "%s", ocr_last_error());
    CkptState s;
    ck_assert(ckpt_load_state(real, &s) == OCR_OK);
    ck_assert_int_eq(s.iter, STEPS_PER_EPOCH);
    const char *files[] = {"model.safetensors", "optimizer.safetensors", "state.json", NULL};
    for (int i = 0; files[i]; i++) {
        char x[900], y[900];
        snprintf(x, sizeof x, "%s/%s", real, files[i]);
        snprintf(y, sizeof y, "%s/iter_epoch_1/%s", g_ref, files[i]);
        ck_assert_msg(at_same_file(x, y), "%s differs from %s", x, y);
    }
}
END_TEST

static Suite *signal_suite(void) {
    Suite *s = suite_create("app_signal");
    TCase *tc = tcase_create("signal");
    tcase_set_timeout(tc, 600);
    tcase_add_unchecked_fixture(tc, setup_data, NULL);
    tcase_add_test(tc, test_sigint_stops_and_resumes);
    tcase_add_test(tc, test_sigterm_stops_and_resumes);
    tcase_add_test(tc, test_second_signal_exits_at_once);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(signal_suite()); }

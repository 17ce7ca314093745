// Crash safety of training: `ocrtrain train` killed with SIGKILL at seeded random moments and
// aimed into checkpoint writes, resumed each time, never loads a torn file, never loses more
// than one checkpoint interval, and ends with the same bits as an uninterrupted run; a full
// disk while a checkpoint or a report is written is a clear error naming the file, and the
// previous checkpoint stays loadable.
//
// The run is the demo-size network of the app tests (64 lines, batch 8: 8 steps per epoch, a
// checkpoint at every epoch end), 6 epochs, on the CPU with a fixed thread count. Kills come in
// three kinds: at a random moment of the run; while the checkpoint directory "latest.tmp" is
// being filled; and between its two renames, when only "latest.old" exists (the reader's
// fallback). OCR_TEST_WRITE_DELAY_MS (core/fileio.h) widens those windows in the killed runs
// only. The seed of the kill moments is OCR_CRASH_SEED (default 2026), printed.
#include <check.h>
#include <cjson/cJSON.h>
#include <dirent.h>

#include "training/checkpoint.h"
#include "cli/commands.h"
#include "core/safetensors.h"
#include "tests/training/training_test_util.h"

#define EPOCHS 6
#define STEPS_PER_EPOCH 8  // 64 lines / batch 8, drop_last
#define KILLS 6
#define DELAY_MS "25"

static char *g_dir;
static char g_cfg[512];

static void setup_data(void) {
    g_dir = at_setup_digits(g_cfg, sizeof g_cfg, "\"epoch_num\": 6, \"save_epoch_step\": 1,");
}

static const char *const CK_FILES[] = {"model.safetensors", "optimizer.safetensors", "state.json", NULL};

// A checkpoint directory equals the reference's one of the same name, file for file, and each
// of its files loads (a torn file would differ and fail to parse).
static void assert_same_checkpoint(const char *dir, const char *ref, const char *what) {
    CkptState s;
    ck_assert_msg(ckpt_load_state(dir, &s) == OCR_OK, "%s: %s", what, ocr_last_error());
    for (int i = 0; CK_FILES[i]; i++) {
        char a[1200], b[1200];
        snprintf(a, sizeof a, "%s/%s", dir, CK_FILES[i]);
        snprintf(b, sizeof b, "%s/%s", ref, CK_FILES[i]);
        if (strstr(CK_FILES[i], ".safetensors")) {
            OcrSafetensors *st;
            ck_assert_msg(ocr_safetensors_open(&st, a) == OCR_OK, "%s: %s", what, ocr_last_error());
            ocr_safetensors_close(st);
        }
        ck_assert_msg(at_same_file(a, b), "%s: %s differs from the uninterrupted run's %s", what, a, b);
    }
}

// Whether a kill left traces of a write in progress: a "<name>.tmp" checkpoint directory, a
// "<dir>.old" without "<dir>", or a "<file>.tmp.<pid>" atomic-write temporary.
static int write_in_progress(const char *out) {
    int found = 0;
    DIR *d = opendir(out);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (strstr(e->d_name, ".tmp")) found = 1;
        if (n > 4 && strcmp(e->d_name + n - 4, ".old") == 0) {
            char p[1200];
            snprintf(p, sizeof p, "%s/%.*s", out, (int)(n - 4), e->d_name);
            struct stat sb;
            if (stat(p, &sb) != 0) found = 1;
        }
    }
    closedir(d);
    return found;
}

// Polls until the child `pid` reaches the wanted moment for the (skip + 1)-th time, or ends; 1
// when the moment came.
// Kind 1: it is writing a file of "latest.tmp" (its atomic temporary "<file>.tmp.<pid>" exists).
// Kind 2: "latest.tmp" is complete, "latest" gone and "latest.old" present: between the two
// renames. A previous kill can leave that very state behind, so a moment only counts after the
// state was seen to go (the new run starts its own checkpoint).
static int wait_for_moment(pid_t pid, const char *out, int kind, int skip, int *status, int *done) {
    char part[3][1200], tmp[1200], done_state[1200], old[1200], cur[1200];
    for (int i = 0; i < 3; i++) snprintf(part[i], sizeof part[i], "%s/latest.tmp/%s.tmp.%ld", out, CK_FILES[i], (long)pid);
    snprintf(tmp, sizeof tmp, "%s/latest.tmp", out);
    snprintf(done_state, sizeof done_state, "%s/latest.tmp/state.json", out);
    snprintf(old, sizeof old, "%s/latest.old", out);
    snprintf(cur, sizeof cur, "%s/latest", out);
    int armed = kind == 1, seen = 0;
    for (;;) {
        if (at_child_done(pid, status)) {
            *done = 1;
            return 0;
        }
        int in = 0;
        if (kind == 1) {
            for (int i = 0; i < 3; i++) in |= at_exists(part[i]);
            if (!at_exists(tmp)) armed = 1;  // this checkpoint is over: the next one counts anew
        } else {
            in = at_exists(done_state) && at_exists(old) && !at_exists(cur);
            if (!in) armed = 1;
        }
        if (in && armed) {
            if (seen++ == skip) return 1;
            armed = 0;
        }
        at_sleep_ms(0.5);
    }
}

START_TEST(test_sigkill_and_resume) {
    const char *seed_env = getenv("OCR_CRASH_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10) : 2026;
    printf("crash test: kill moments from seed %llu (OCR_CRASH_SEED)\n", (unsigned long long)seed);
    OcrRng rng = ocr_rng_make(seed, 15);
    char ref[600], out[600], ovr[700], ovo[700], ck[700], log[700], latest[700];
    snprintf(ref, sizeof ref, "%s/ref", g_dir);
    snprintf(out, sizeof out, "%s/crash", g_dir);
    snprintf(ovr, sizeof ovr, "Global.save_model_dir=%s", ref);
    snprintf(ovo, sizeof ovo, "Global.save_model_dir=%s", out);
    snprintf(ck, sizeof ck, "Global.checkpoints=%s/latest", out);
    snprintf(log, sizeof log, "%s/crash.log", g_dir);
    snprintf(latest, sizeof latest, "%s/latest", out);

    // The uninterrupted run (also in a child: the test process never trains, see at_spawn).
    const char *ra[] = {"train", "-c", g_cfg, "-o", ovr, NULL};
    double t0 = at_now();
    int status;
    pid_t pid = at_spawn(cmd_train, ra, log, NULL, NULL);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    double t_ref = at_now() - t0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) at_print_log(log);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the uninterrupted run failed");

    int kills = 0, in_write = 0, runs = 0;
    int64_t last_ckpt = 0;
    int finished = 0;
    while (!finished) {
        ck_assert_msg(runs < 40, "training did not finish after %d resumed runs", runs);
        char real[1200];
        int have = ckpt_resolve(latest, real, sizeof real) == OCR_OK;
        const char *fresh[] = {"train", "-c", g_cfg, "-o", ovo, NULL};
        const char *resume[] = {"train", "-c", g_cfg, "-o", ovo, ck, NULL};
        // Kill kinds in turn: 1 (inside a file write), 2 (between the renames), 0 (random).
        int kind = kills < KILLS && last_ckpt < EPOCHS * STEPS_PER_EPOCH ? (kills + 1) % 3 : -1;  // -1: to the end
        pid = at_spawn(cmd_train, have ? resume : fresh, log, "OCR_TEST_WRITE_DELAY_MS", DELAY_MS);
        runs++;
        int done = 0, aimed = 0;
        if (kind == 0) {
            // A random moment of the rest of the run: after a random number of its steps (so the
            // machine's speed does not decide whether the kill comes before the end), plus a
            // random part of a step.
            int64_t left = EPOCHS * STEPS_PER_EPOCH - last_ckpt;
            int64_t target = last_ckpt + 1 + ocr_rng_next_int(&rng, 0, left > 2 ? left - 2 : 0);
            while (!(done = at_child_done(pid, &status)) && at_steps_recorded(out) < target) at_sleep_ms(2);
            if (!done) at_sleep_ms(1000.0 * t_ref / (EPOCHS * STEPS_PER_EPOCH) * ocr_rng_next_double(&rng));
        } else if (kind > 0) {
            // Into the window, at a random point of it (kind 1: the three files' delays).
            // Into a later checkpoint now and then, so the run also makes progress between kills
            // (while four epochs or more are left: the window must still come).
            int skip = EPOCHS * STEPS_PER_EPOCH - last_ckpt >= 4 * STEPS_PER_EPOCH ? (int)ocr_rng_next_int(&rng, 0, 1) : 0;
            aimed = wait_for_moment(pid, out, kind, skip, &status, &done);
            if (aimed) at_sleep_ms(ocr_rng_next_double(&rng) * (kind == 1 ? 1.0 : 0.3) * atof(DELAY_MS));
        } else {
            ck_assert_int_eq(waitpid(pid, &status, 0), pid);
            done = 1;
        }
        if (!done) {
            kill(pid, SIGKILL);
            ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        }
        if (WIFEXITED(status)) {
            if (WEXITSTATUS(status) != 0) at_print_log(log);
            ck_assert_msg(WEXITSTATUS(status) == 0, "run %d exited with %d", runs, WEXITSTATUS(status));
            finished = 1;  // it ended before the kill: training is complete
        } else {
            ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "run %d ended by signal %d", runs,
                          WIFSIGNALED(status) ? WTERMSIG(status) : 0);
            kills++;
            aimed = aimed && write_in_progress(out);  // it did land inside the write
            in_write += aimed;
        }
        // What a resume would load now: a whole checkpoint equal to the reference's at the same
        // epoch end, never older than the last one seen, at most one interval behind the steps
        // the run had recorded.
        int64_t recorded = at_steps_recorded(out), ck_iter = 0;
        if (ckpt_resolve(latest, real, sizeof real) == OCR_OK) {
            ck_assert_msg(strstr(real, ".tmp") == NULL, "resolved to a temporary %s", real);
            CkptState s;
            ck_assert_msg(ckpt_load_state(real, &s) == OCR_OK, "%s", ocr_last_error());
            ck_iter = s.iter;
            ck_assert_int_eq(s.batch_in_epoch, 0);
            char refck[700], what[64];
            snprintf(refck, sizeof refck, "%s/iter_epoch_%lld", ref, (long long)s.epoch);
            if (finished) snprintf(refck, sizeof refck, "%s/latest", ref);
            snprintf(what, sizeof what, "after run %d", runs);
            assert_same_checkpoint(real, refck, what);
        }
        static const char *const how[] = {"at a random moment", "inside a checkpoint file write",
                                          "between the checkpoint renames"};
        printf("run %d: %s%s, %lld steps recorded, checkpoint at step %lld (%s)\n", runs, finished ? "finished" : "killed ",
               finished ? "" : how[aimed ? kind : 0], (long long)recorded, (long long)ck_iter, ck_iter ? real : "none");
        ck_assert_msg(ck_iter >= last_ckpt, "the checkpoint went back from step %lld to %lld", (long long)last_ckpt,
                      (long long)ck_iter);
        ck_assert_msg(recorded - ck_iter <= STEPS_PER_EPOCH,
                      "%lld steps recorded but the checkpoint is at %lld: more than one interval (%d) lost",
                      (long long)recorded, (long long)ck_iter, STEPS_PER_EPOCH);
        last_ckpt = ck_iter;
    }
    // Fewer kills only when a kill landed after the last checkpoint (nothing left to kill).
    ck_assert_msg(kills == KILLS || (kills >= 4 && last_ckpt == EPOCHS * STEPS_PER_EPOCH),
                  "only %d of %d runs were killed before training finished", kills, KILLS);
    ck_assert_msg(in_write >= 2, "only %d kills landed inside a checkpoint write", in_write);
    ck_assert_int_eq(last_ckpt, EPOCHS * STEPS_PER_EPOCH);
    // Every epoch's checkpoint there is and every step's loss equal the uninterrupted run's. (A
    // kill after `latest` and before iter_epoch_N of the same epoch end leaves only
    // iter_epoch_N.tmp, never loaded; the resumed run goes on from `latest` and does not write
    // that epoch's snapshot again.)
    int snapshots = 0;
    for (int e = 1; e <= EPOCHS; e++) {
        char a[700], b[700], st[800], what[32];
        snprintf(a, sizeof a, "%s/iter_epoch_%d", out, e);
        snprintf(b, sizeof b, "%s/iter_epoch_%d", ref, e);
        snprintf(st, sizeof st, "%s/state.json", a);
        snprintf(what, sizeof what, "epoch %d", e);
        if (!at_exists(st)) continue;
        assert_same_checkpoint(a, b, what);
        snapshots++;
    }
    ck_assert_int_ge(snapshots, 1);
    int na, nb;
    double *la = at_read_losses(ref, &na, NULL), *lb = at_read_losses(out, &nb, NULL);
    ck_assert_int_eq(na, EPOCHS * STEPS_PER_EPOCH);
    ck_assert_int_eq(nb, na);
    for (int i = 0; i < na; i++) ck_assert_msg(la[i] == lb[i], "loss of step %d differs after the kills", i + 1);
    free(la);
    free(lb);
}
END_TEST

// Copies of a checkpoint's files, to check later that it is unchanged.
static void snapshot(const char *dir, char **data, size_t *size) {
    for (int i = 0; CK_FILES[i]; i++) {
        char p[1200];
        snprintf(p, sizeof p, "%s/%s", dir, CK_FILES[i]);
        ck_assert_msg(ocr_read_file(p, &data[i], &size[i]) == OCR_OK, "%s", ocr_last_error());
    }
}

static void assert_unchanged(const char *dir, char **data, const size_t *size) {
    for (int i = 0; CK_FILES[i]; i++) {
        char p[1200], *now;
        size_t n;
        snprintf(p, sizeof p, "%s/%s", dir, CK_FILES[i]);
        ck_assert_msg(ocr_read_file(p, &now, &n) == OCR_OK, "%s", ocr_last_error());
        ck_assert_msg(n == size[i] && memcmp(now, data[i], n) == 0, "%s changed", p);
        free(now);
    }
}

// A full disk while the epoch-2 checkpoint is written: each of its files in turn fails; the run
// stops with exit 1 and a message naming the file and the cause, no temporary is left, and the
// epoch-1 checkpoint is unchanged and resumes.
START_TEST(test_full_disk_keeps_the_previous_checkpoint) {
    char out[600], ov[700], ck[700], latest[700], err[8192];
    snprintf(out, sizeof out, "%s/disk", g_dir);
    snprintf(ov, sizeof ov, "Global.save_model_dir=%s", out);
    snprintf(ck, sizeof ck, "Global.checkpoints=%s/latest", out);
    snprintf(latest, sizeof latest, "%s/latest", out);
    const char *first[] = {"train", "-c", g_cfg, "--max-steps", "8", "-o", ov, NULL};
    ck_assert_int_eq(at_run(cmd_train, first), 0);
    char *data[3];
    size_t size[3];
    snapshot(latest, data, size);
    for (int i = 0; CK_FILES[i]; i++) {
        setenv("OCR_TEST_FAIL_WRITE", CK_FILES[i], 1);
        const char *resume[] = {"train", "-c", g_cfg, "--max-steps", "16", "-o", ov, ck, NULL};
        int rc = at_run_capture(cmd_train, resume, err, sizeof err);
        unsetenv("OCR_TEST_FAIL_WRITE");
        // The first checkpoint written after the resume is `latest`, or `best` when the epoch-2
        // evaluation beat epoch 1's (that depends on the CPU's summation orders): either way the
        // message names the file that failed.
        char file[800], best_file[800];
        snprintf(file, sizeof file, "%s/latest.tmp/%s", out, CK_FILES[i]);
        snprintf(best_file, sizeof best_file, "%s/best.tmp/%s", out, CK_FILES[i]);
        ck_assert_msg(rc == 1, "a failed checkpoint write exited %d: %s", rc, err);
        ck_assert_msg((strstr(err, file) || strstr(err, best_file)) && strstr(err, "No space left on device"),
                      "the message does not name %s (or best's): %s", file, err);
        ck_assert_msg(!write_in_progress(out), "a temporary was left in %s", out);
        assert_unchanged(latest, data, size);
        CkptState s;
        ck_assert(ckpt_load_state(latest, &s) == OCR_OK);
        ck_assert_int_eq(s.iter, 8);
    }
    // The same checkpoint still resumes, and the write goes through once the disk has room.
    const char *resume[] = {"train", "-c", g_cfg, "--max-steps", "16", "-o", ov, ck, NULL};
    ck_assert_int_eq(at_run(cmd_train, resume), 0);
    CkptState s;
    ck_assert(ckpt_load_state(latest, &s) == OCR_OK);
    ck_assert_int_eq(s.iter, 16);
    for (int i = 0; i < 3; i++) free(data[i]);
}
END_TEST

// A full disk at the start (the effective config) and for the compare report: exit 1, the file
// named, nothing half-written under its name.
START_TEST(test_full_disk_config_and_report) {
    char out[600], ov[700], err[8192], file[800];
    snprintf(out, sizeof out, "%s/disk_cfg", g_dir);
    snprintf(ov, sizeof ov, "Global.save_model_dir=%s", out);
    setenv("OCR_TEST_FAIL_WRITE", "config.json", 1);
    const char *a[] = {"train", "-c", g_cfg, "--max-steps", "1", "-o", ov, NULL};
    int rc = at_run_capture(cmd_train, a, err, sizeof err);
    unsetenv("OCR_TEST_FAIL_WRITE");
    snprintf(file, sizeof file, "%s/config.json", out);
    ck_assert_msg(rc == 1, "exit %d: %s", rc, err);
    ck_assert_msg(strstr(err, file) && strstr(err, "No space left on device"), "%s", err);
    ck_assert(!at_exists(file));

    snprintf(out, sizeof out, "%s/disk_report", g_dir);
    setenv("OCR_TEST_FAIL_WRITE", "report.json", 1);
    const char *c[] = {"compare", "-c", g_cfg, "--out", out, "--dtypes", "bfloat16", "--max-steps", "2", NULL};
    rc = at_run_capture(cmd_compare, c, err, sizeof err);
    unsetenv("OCR_TEST_FAIL_WRITE");
    snprintf(file, sizeof file, "%s/report.json", out);
    ck_assert_msg(rc == 1, "compare exit %d: %s", rc, err);
    ck_assert_msg(strstr(err, file) && strstr(err, "No space left on device"), "%s", err);
    ck_assert(!at_exists(file));
    ck_assert(!write_in_progress(out));
}
END_TEST

static Suite *crash_suite(void) {
    Suite *s = suite_create("app_crash");
    TCase *tc = tcase_create("crash");
    tcase_set_timeout(tc, 600);
    tcase_add_unchecked_fixture(tc, setup_data, NULL);
    tcase_add_test(tc, test_sigkill_and_resume);
    tcase_add_test(tc, test_full_disk_keeps_the_previous_checkpoint);
    tcase_add_test(tc, test_full_disk_config_and_report);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(crash_suite()); }

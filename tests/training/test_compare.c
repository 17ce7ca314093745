// Regression runs over seeds (training/compare.h, report_judge in training/report.c): the seed
// argument, a comparison at two seeds end to end, resuming (finished runs reused, a changed key
// refused), a baseline config against a candidate config, and the verdict rules for failed and
// diverged runs and for one seed, on constructed per-line results.
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>

#include "cli/commands.h"
#include "training/compare.h"
#include "training/report.h"
#include "tests/training/training_test_util.h"

static char *g_dir;
static char g_cfg[512];

static void setup_data(void) { g_dir = at_setup_digits(g_cfg, sizeof g_cfg, "\"epoch_num\": 1,"); }

START_TEST(test_parse_seeds) {
    uint64_t s[COMPARE_MAX_SEEDS];
    int n;
    ck_assert_int_eq(compare_parse_seeds("3", 1024, "--seeds", s, &n), OCR_OK);
    ck_assert_int_eq(n, 3);
    ck_assert(s[0] == 1024 && s[1] == 1025 && s[2] == 1026);
    ck_assert_int_eq(compare_parse_seeds("7,1,42", 0, "--seeds", s, &n), OCR_OK);
    ck_assert(n == 3 && s[0] == 7 && s[1] == 1 && s[2] == 42);
    ck_assert_int_eq(compare_parse_seeds("9,", 0, "Global.compare_seeds", s, &n), OCR_OK);  // a one-seed list
    ck_assert(n == 1 && s[0] == 9);
    const char *bad[] = {"0", "-1", "1,2,1", "33", "x", "1,,2", "1,-2", "", "2.5", NULL};
    const char *why[] = {"0 seeds", "negative", "listed twice", "at most", "not a number", "not a seed",
                         "non-negative", "empty", "not a number", NULL};
    for (int i = 0; bad[i]; i++) {
        ck_assert_msg(compare_parse_seeds(bad[i], 5, "--seeds", s, &n) == OCR_ERR_INVALID_ARG, "'%s' accepted", bad[i]);
        ck_assert_msg(strstr(ocr_last_error(), why[i]) && strstr(ocr_last_error(), "--seeds"), "'%s': %s", bad[i],
                      ocr_last_error());
    }
}
END_TEST

// The CLI refuses bad seed arguments and config values before any work (nothing under --out).
START_TEST(test_bad_seeds_refused_before_work) {
    char out[600], err[4096];
    snprintf(out, sizeof out, "%s/cmp_bad", g_dir);
    const char *a[] = {"compare", "-c", g_cfg, "--out", out, "--seeds", "0", NULL};
    ck_assert_int_eq(at_run_capture(cmd_compare, a, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "--seeds"), "%s", err);
    const char *b[] = {"compare", "-c", g_cfg, "--out", out, "-o", "Global.compare_seeds=[4,5,4]", NULL};
    ck_assert_int_eq(at_run_capture(cmd_compare, b, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "Global.compare_seeds") && strstr(err, "twice"), "%s", err);
    const char *c[] = {"compare", "-c", g_cfg, "--out", out, "-o", "Global.compare_seed_sd=-1", NULL};
    ck_assert_int_eq(at_run_capture(cmd_compare, c, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "Global.compare_seed_sd"), "%s", err);
    ck_assert(!at_exists(out));
}
END_TEST

static cJSON *read_report(const char *out) {
    char p[700];
    snprintf(p, sizeof p, "%s/report.json", out);
    char *text;
    size_t size;
    ck_assert_msg(ocr_read_file(p, &text, &size) == OCR_OK, "%s", ocr_last_error());
    cJSON *o = cJSON_Parse(text);
    free(text);
    ck_assert_ptr_nonnull(o);
    return o;
}

// Two seeds end to end, then the same --out resumed with a third seed (the two finished pairs
// reused, not retrained), then refused when a key changed.
START_TEST(test_compare_two_seeds_and_resume) {
    char out[600], err[16384];
    snprintf(out, sizeof out, "%s/cmp_seeds", g_dir);
    const char *a[] = {"compare", "-c", g_cfg, "--out", out, "--dtypes", "bfloat16", "--seeds", "2", "--max-steps", "2",
                       NULL};
    int rc = at_run_capture(cmd_compare, a, err, sizeof err);
    ck_assert_msg(rc == 0 || rc == 3 || rc == 4, "compare exited %d: %s", rc, err);
    cJSON *o = read_report(out);
    const cJSON *set = cJSON_GetObjectItem(o, "settings");
    const cJSON *seeds = cJSON_GetObjectItem(set, "seeds");
    ck_assert_int_eq(cJSON_GetArraySize(seeds), 2);
    ck_assert_int_eq((int)cJSON_GetArrayItem(seeds, 0)->valuedouble, 5);  // Global.seed of the test config
    ck_assert_int_eq((int)cJSON_GetArrayItem(seeds, 1)->valuedouble, 6);
    const cJSON *runs = cJSON_GetObjectItem(o, "runs");
    for (int i = 0; i < 2; i++) {
        const cJSON *rs = cJSON_GetObjectItem(cJSON_GetArrayItem(runs, i), "seeds");
        ck_assert_int_eq(cJSON_GetArraySize(rs), 2);
        for (int k = 0; k < 2; k++) {
            const cJSON *s = cJSON_GetArrayItem(rs, k);
            ck_assert_str_eq(cJSON_GetObjectItem(s, "status")->valuestring, "ok");
            ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(s, "reused")));
            double acc = cJSON_GetObjectItem(s, "accuracy")->valuedouble;
            ck_assert(acc >= 0 && acc <= 1);
        }
    }
    const cJSON *sd = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "comparisons"), 0), "seeded");
    ck_assert_int_eq(cJSON_GetObjectItem(sd, "pairs")->valueint, 2);
    ck_assert_str_eq(cJSON_GetObjectItem(sd, "method")->valuestring, "crossed");
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(sd, "training_noise_measured")));
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(sd, "per_seed")), 2);
    // The per-seed deltas are the runs' accuracies' differences, and the mean is theirs.
    const cJSON *ps = cJSON_GetObjectItem(sd, "per_seed");
    double mean = 0;
    for (int k = 0; k < 2; k++) {
        const cJSON *p = cJSON_GetArrayItem(ps, k);
        double d = cJSON_GetObjectItem(p, "accuracy_delta")->valuedouble;
        ck_assert(fabs(d - (cJSON_GetObjectItem(p, "accuracy")->valuedouble -
                            cJSON_GetObjectItem(p, "baseline_accuracy")->valuedouble)) < 1e-12);
        mean += d / 2;
    }
    ck_assert(fabs(mean - cJSON_GetObjectItem(cJSON_GetObjectItem(sd, "accuracy"), "delta")->valuedouble) < 1e-12);
    ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "verdict"), "exit_code")->valueint, rc);
    cJSON_Delete(o);
    char p[800];
    snprintf(p, sizeof p, "%s/runs/bf16-o2/seed-6/run.json", out);
    ck_assert_msg(at_exists(p), "%s missing", p);

    // Resumed with three seeds: seeds 5 and 6 are reused, seed 7 trains.
    const char *b[] = {"compare", "-c", g_cfg, "--out", out, "--dtypes", "bfloat16", "--seeds", "3", "--max-steps", "2",
                       NULL};
    rc = at_run_capture(cmd_compare, b, err, sizeof err);
    ck_assert_msg(rc == 0 || rc == 3 || rc == 4, "resumed compare exited %d: %s", rc, err);
    ck_assert_msg(strstr(err, "fp32 seed 5: reused") && strstr(err, "bf16-o2 seed 6: reused"), "%s", err);
    ck_assert_msg(strstr(err, "fp32 seed 7 (batch"), "%s", err);
    o = read_report(out);
    runs = cJSON_GetObjectItem(o, "runs");
    const cJSON *rs = cJSON_GetObjectItem(cJSON_GetArrayItem(runs, 1), "seeds");
    ck_assert_int_eq(cJSON_GetArraySize(rs), 3);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(rs, 0), "reused")));
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetArrayItem(rs, 2), "reused")));
    // A reused run keeps its training figures (the loss curve of the first seed is in the report).
    ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(runs, 0), "steps")->valueint, 2);
    cJSON_Delete(o);

    // A changed key is refused, naming it; nothing is trained.
    const char *c[] = {"compare", "-c", g_cfg, "--out", out, "--dtypes", "bfloat16", "--seeds", "3", "--max-steps", "2",
                       "-o", "Optimizer.lr.learning_rate=0.5", NULL};
    rc = at_run_capture(cmd_compare, c, err, sizeof err);
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(err, "Optimizer.lr.learning_rate") && strstr(err, "must not change"), "%s", err);
    ck_assert_msg(!strstr(err, "(batch"), "trained despite the refusal: %s", err);
}
END_TEST

// Any two trainings: a baseline config against a candidate config (here another learning rate).
START_TEST(test_compare_candidate_config) {
    char out[600], err[16384];
    snprintf(out, sizeof out, "%s/cmp_cand", g_dir);
    const char *a[] = {"compare", "-c", g_cfg, "--out", out, "--candidate", g_cfg, "--candidate-o",
                       "Optimizer.lr.learning_rate=0.005", "--seeds", "1", "--max-steps", "2", NULL};
    int rc = at_run_capture(cmd_compare, a, err, sizeof err);
    ck_assert_msg(rc == 0 || rc == 3 || rc == 4, "compare exited %d: %s", rc, err);
    cJSON *o = read_report(out);
    const cJSON *runs = cJSON_GetObjectItem(o, "runs");
    ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(runs, 0), "name")->valuestring, "baseline");
    ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(runs, 1), "name")->valuestring, "candidate");
    ck_assert(fabs(cJSON_GetObjectItem(cJSON_GetArrayItem(runs, 1), "learning_rate")->valuedouble - 0.005) < 1e-12);
    ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "settings"), "legs")->valuestring, "baseline_vs_candidate");
    const cJSON *sd = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "comparisons"), 0), "seeded");
    ck_assert_str_eq(cJSON_GetObjectItem(sd, "method")->valuestring, "one_seed");
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(sd, "training_noise_measured")));
    cJSON_Delete(o);
    // The A/A check: the same config, the candidate at other seeds (seed + 100).
    char out2[700];
    snprintf(out2, sizeof out2, "%s_aa", out);
    const char *aa[] = {"compare", "-c", g_cfg, "--out", out2, "--candidate", g_cfg, "--candidate-seed-offset", "100",
                        "--seeds", "2", "--max-steps", "2", NULL};
    rc = at_run_capture(cmd_compare, aa, err, sizeof err);
    // (its verdict is tested statistically in eval_seeds_calibration; here: that it runs, at the offset seeds)
    ck_assert_msg(rc == 0 || rc == 3 || rc == 4, "an A/A comparison exited %d: %s", rc, err);
    o = read_report(out2);
    runs = cJSON_GetObjectItem(o, "runs");
    const cJSON *bs = cJSON_GetObjectItem(cJSON_GetArrayItem(runs, 0), "seeds"),
                *cs = cJSON_GetObjectItem(cJSON_GetArrayItem(runs, 1), "seeds");
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq((int)cJSON_GetObjectItem(cJSON_GetArrayItem(cs, k), "seed")->valuedouble,
                         (int)cJSON_GetObjectItem(cJSON_GetArrayItem(bs, k), "seed")->valuedouble + 100);
    cJSON_Delete(o);
    // --dtypes makes no sense with two configs: refused.
    const char *b[] = {"compare", "-c", g_cfg, "--out", out, "--candidate", g_cfg, "--dtypes", "bfloat16", NULL};
    ck_assert_int_eq(at_run_capture(cmd_compare, b, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "--candidate"), "%s", err);
}
END_TEST

// at_run with stdout captured into *out (malloc'd, NUL-terminated).
static int at_run_stdout(at_cmd_fn fn, const char *const *args, char **out) {
    char path[1024];
    int fd = ocr_test_tmpfile(path, sizeof path, "ocr_compare_stdout_");
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    int rc = at_run(fn, args);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    close(fd);
    size_t size;
    ck_assert(ocr_read_file(path, out, &size) == OCR_OK);
    unlink(path);
    return rc;
}

// Two trained models on the same lines: `eval --baseline`, paired per line.
START_TEST(test_eval_against_baseline) {
    char out[600], w[700], err[16384];
    snprintf(out, sizeof out, "%s/cmp_seeds", g_dir);  // the runs of test_compare_two_seeds_and_resume
    snprintf(w, sizeof w, "%s/runs/fp32/seed-5/latest", out);
    if (!at_exists(w)) {
        const char *a[] = {"compare", "-c", g_cfg, "--out", out, "--dtypes", "bfloat16", "--seeds", "2", "--max-steps",
                           "2", NULL};
        int rc = at_run_capture(cmd_compare, a, err, sizeof err);
        ck_assert_msg(rc == 0 || rc == 3 || rc == 4, "%s", err);
    }
    // A model against itself: no line differs, and the set is too small to call that a pass at
    // ±0.005 (Newcombe's interval is still about ±3.84/n wide): INCONCLUSIVE with the lines needed.
    const char *a[] = {"eval", "-c", g_cfg, "--weights", w, "--baseline", w, "--json", NULL};
    char *text = NULL;
    int rc = at_run_stdout(cmd_eval, a, &text);
    ck_assert_int_eq(rc, 4);
    cJSON *o = cJSON_Parse(text);
    ck_assert_msg(o, "%s", text);
    ck_assert(cJSON_GetObjectItem(o, "accuracy_delta")->valuedouble == 0);
    ck_assert_int_eq(cJSON_GetObjectItem(o, "baseline_only_right")->valueint, 0);
    ck_assert_int_eq(cJSON_GetObjectItem(o, "only_right")->valueint, 0);
    ck_assert_str_eq(cJSON_GetObjectItem(o, "verdict")->valuestring, "inconclusive");
    int lines = cJSON_GetObjectItem(o, "lines")->valueint;
    ck_assert_msg(cJSON_GetObjectItem(o, "lines_needed")->valuedouble > lines, "%s", text);
    cJSON_Delete(o);
    free(text);
    // --lines writes one model's lines: refused with --baseline.
    const char *b[] = {"eval", "-c", g_cfg, "--weights", w, "--baseline", w, "--lines", "x.tsv", NULL};
    ck_assert_int_eq(at_run_capture(cmd_eval, b, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "--baseline"), "%s", err);
}
END_TEST

// ---- the verdict rules on constructed per-line results ----------------------------------------------

enum { N_LINES = 400 };

// Lines 0..n-1: correct when line index < right (a run that reads `right` of them).
static EvalLine *lines_reading(int right) {
    EvalLine *l = calloc(N_LINES, sizeof *l);
    for (int i = 0; i < N_LINES; i++) {
        l[i].scored = 1;
        l[i].correct = i < right;
        l[i].ref_chars = 10;
        l[i].edits = i < right ? 0 : 3;
    }
    return l;
}

// A report of leg 0 (baseline) and leg 1 at nseeds seeds; right[leg][seed] lines read.
static void judge(Report *rep, int nseeds, const int right[2][4], const report_seed_status_t status[2][4]) {
    memset(rep, 0, sizeof *rep);
    rep->n_runs = 2;
    rep->n_seeds = nseeds;
    rep->tolerance = rep->cer_tolerance = 0.005;
    snprintf(rep->runs[0].name, sizeof rep->runs[0].name, "fp32");
    snprintf(rep->runs[1].name, sizeof rep->runs[1].name, "fp16-o2");
    EvalLine *lines[REPORT_MAX_RUNS][REPORT_MAX_SEEDS] = {{0}};
    for (int i = 0; i < 2; i++) {
        rep->runs[i].n_seeds = nseeds;
        for (int k = 0; k < nseeds; k++) {
            rep->seeds[k] = 100 + (uint64_t)k;
            ReportSeedRun *s = &rep->runs[i].seeds[k];
            s->seed = 100 + (uint64_t)k;
            s->status = status[i][k];
            if (s->status != REPORT_SEED_OK) snprintf(s->error, sizeof s->error, "constructed");
            lines[i][k] = lines_reading(right[i][k]);
            s->acc = right[i][k] / (double)N_LINES;
        }
    }
    ck_assert_int_eq(report_judge(rep, lines, N_LINES), OCR_OK);
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < nseeds; k++) free(lines[i][k]);
}

START_TEST(test_verdict_rules) {
    Report *rep = malloc(sizeof *rep);
    const report_seed_status_t ok[2][4] = {{0}};
    // One seed, an ordinary difference of two points: training noise could make it, INCONCLUSIVE.
    judge(rep, 1, (const int[2][4]){{340}, {332}}, ok);
    ck_assert_int_eq(report_run_verdict(rep, 1), PAIRED_INCONCLUSIVE);
    ck_assert_int_eq(rep->runs[1].seeded.res.method, SEEDS_METHOD_ONE_SEED);
    // One seed, a collapsed candidate (0.85 -> 0.05): REGRESSION all the same.
    judge(rep, 1, (const int[2][4]){{340}, {20}}, ok);
    ck_assert_int_eq(report_run_verdict(rep, 1), PAIRED_REGRESSION);
    ck_assert_int_eq(report_exit_code(rep), REPORT_EXIT_REGRESSION);
    // Four seeds, identical runs: PASS.
    judge(rep, 4, (const int[2][4]){{340, 330, 345, 335}, {340, 330, 345, 335}}, ok);
    ck_assert_int_eq(report_run_verdict(rep, 1), PAIRED_PASS);
    ck_assert_int_eq(report_exit_code(rep), REPORT_EXIT_PASS);
    // Four seeds, a candidate consistently 10 points worse: REGRESSION.
    judge(rep, 4, (const int[2][4]){{340, 330, 345, 335}, {300, 290, 305, 295}}, ok);
    ck_assert_int_eq(report_run_verdict(rep, 1), PAIRED_REGRESSION);
    ck_assert_int_eq(rep->runs[1].seeded.failed_runs, 0);
    // A candidate run that diverged at one seed fails the verdict, whatever the others did, and
    // the report says which.
    report_seed_status_t div[2][4] = {{0}};
    div[1][2] = REPORT_SEED_DIVERGED;
    judge(rep, 4, (const int[2][4]){{340, 330, 345, 335}, {340, 330, 345, 335}}, (const report_seed_status_t(*)[4])div);
    ck_assert_int_eq(report_run_verdict(rep, 1), PAIRED_REGRESSION);
    ck_assert_int_eq(rep->runs[1].seeded.failed_runs, 1);
    ck_assert_msg(strstr(rep->runs[1].seeded.reason, "seed 102 diverged"), "%s", rep->runs[1].seeded.reason);
    ck_assert_int_eq(rep->runs[1].seeded.pairs, 4);  // a diverged run is still scored and counted
    // A baseline run that failed leaves its pair out; the rest decides.
    report_seed_status_t bf[2][4] = {{0}};
    bf[0][1] = REPORT_SEED_FAILED;
    judge(rep, 4, (const int[2][4]){{340, 0, 345, 335}, {340, 330, 345, 335}}, (const report_seed_status_t(*)[4])bf);
    ck_assert_int_eq(rep->runs[1].seeded.failed_baseline, 1);
    ck_assert_int_eq(rep->runs[1].seeded.pairs, 3);
    ck_assert_int_eq(report_run_verdict(rep, 1), PAIRED_PASS);
    // A failed candidate at every seed: nothing to pair, and still a REGRESSION.
    report_seed_status_t cf[2][4] = {{0}};
    cf[1][0] = cf[1][1] = REPORT_SEED_FAILED;
    judge(rep, 2, (const int[2][4]){{340, 330}, {0, 0}}, (const report_seed_status_t(*)[4])cf);
    ck_assert_int_eq(rep->runs[1].seeded.pairs, 0);
    ck_assert_int_eq(report_run_verdict(rep, 1), PAIRED_REGRESSION);
    char line[2048];
    report_verdict_line(rep, line, sizeof line);
    ck_assert_msg(strstr(line, "REGRESSION") && strstr(line, "failed"), "%s", line);
    free(rep);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("training_compare");
    TCase *tc = tcase_create("t");
    tcase_set_timeout(tc, 600);
    tcase_add_unchecked_fixture(tc, setup_data, NULL);
    tcase_add_test(tc, test_parse_seeds);
    tcase_add_test(tc, test_bad_seeds_refused_before_work);
    tcase_add_test(tc, test_verdict_rules);
    tcase_add_test(tc, test_compare_two_seeds_and_resume);
    tcase_add_test(tc, test_compare_candidate_config);
    tcase_add_test(tc, test_eval_against_baseline);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(suite()); }

// Paired FP32-vs-AMP statistics (eval/paired.h) against values computed independently by
// tools/paired_reference.py (the paper's formulas in Python, exact binomial sums in fractions,
// a brute-force lines-needed search, the bootstrap's SplitMix64 resampling), and published
// Wilson intervals. Interval bounds are a few dozen double operations and one square root on
// values of order 1: two implementations of the same formula agree to a few hundred ulps of
// 1.0, so 1e-12 is far above rounding and far below any method difference (the alternatives
// differ in the third decimal). Bootstrap deltas are ratios of exact integer sums, computed
// with one correctly rounded division in both languages: they must be identical.
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "eval/paired.h"
#include "tests/common/test_util.h"

#define TOL 1e-12

// The McNemar p-value goes through exp(lgamma(d + 1) − ...): lgamma's absolute error of a few
// ulps of log(d!) becomes a relative error of the p-value; 1e-12 covers d up to ~1000 lines.
static int p_close(double got, double want) { return fabs(got - want) <= 1e-12 * want; }

static PairedTable tab(int64_t both_right, int64_t base_only, int64_t run_only, int64_t both_wrong) {
    PairedTable t = {both_right, base_only, run_only, both_wrong};
    return t;
}

static void check_ci(PairedTable t, double lo, double hi) {
    PairedInterval ci = paired_acc_interval(&t, PAIRED_Z95);
    ck_assert_msg(fabs(ci.lo - lo) < TOL && fabs(ci.hi - hi) < TOL,
                  "table (%lld,%lld,%lld,%lld): [%.17g, %.17g], expected [%.17g, %.17g]", (long long)t.both_right,
                  (long long)t.base_only, (long long)t.run_only, (long long)t.both_wrong, ci.lo, ci.hi, lo, hi);
}

START_TEST(test_wilson_published) {
    // Newcombe (Stat Med 1998;17:857), Table I: 81/263 → 0.2553–0.3662; 0/10 → 0–0.2775.
    PairedInterval w = paired_wilson(81, 263, PAIRED_Z95);
    ck_assert(fabs(w.lo - 0.25528851987827422) < TOL && fabs(w.hi - 0.36620957698280004) < TOL);
    ck_assert(fabs(w.lo - 0.2553) < 5e-5 && fabs(w.hi - 0.3662) < 5e-5);
    w = paired_wilson(0, 10, PAIRED_Z95);
    ck_assert(w.lo == 0 && fabs(w.hi - 0.2775327998628892) < TOL);
    w = paired_wilson(0, 0, PAIRED_Z95);
    ck_assert(w.lo == 0 && w.hi == 1);
}
END_TEST

START_TEST(test_table_by_hand) {
    // 100 lines: 80 both right, the baseline alone right on 3, the run alone on 5, 12 both wrong.
    PairedTable t = tab(80, 3, 5, 12);
    ck_assert_int_eq(paired_n(&t), 100);
    ck_assert(fabs(paired_acc_delta(&t) - 0.02) < 1e-15);
    check_ci(t, -0.038846536188051568, 0.080749978793942856);
    // McNemar: 2 · P(Bin(8, ½) ≤ 3) = 2 · 93/256.
    ck_assert(p_close(paired_mcnemar_p(&t), 2.0 * 93.0 / 256.0));
    ck_assert_int_eq(paired_verdict(paired_acc_interval(&t, PAIRED_Z95), 0.005, 1), PAIRED_INCONCLUSIVE);
    // A set large enough for a gate: 2000 lines, 10 discordant → pass at ±0.005.
    t = tab(1800, 6, 4, 190);
    check_ci(t, -0.0044847543612605064, 0.0024330963431224554);
    ck_assert_int_eq(paired_verdict(paired_acc_interval(&t, PAIRED_Z95), 0.005, 1), PAIRED_PASS);
    ck_assert_int_eq(paired_acc_lines_needed(&t, 0.005, PAIRED_Z95), 2000);
    // A clear regression: 40 lines lost, 10 gained out of 1000.
    t = tab(700, 40, 10, 250);
    check_ci(t, -0.043895609378734657, -0.016266079129605655);
    ck_assert_int_eq(paired_verdict(paired_acc_interval(&t, PAIRED_Z95), 0.005, 1), PAIRED_REGRESSION);
    ck_assert(p_close(paired_mcnemar_p(&t), 2.3861331676755526e-05));
    // Adding lines one by one builds the same table.
    PairedTable u = {0};
    paired_table_add(&u, 1, 1);
    paired_table_add(&u, 1, 0);
    paired_table_add(&u, 0, 1);
    paired_table_add(&u, 0, 1);
    paired_table_add(&u, 0, 0);
    ck_assert(u.both_right == 1 && u.base_only == 1 && u.run_only == 2 && u.both_wrong == 1);
}
END_TEST

START_TEST(test_edge_cases) {
    // No discordant line: the delta is 0 but the interval is not (≈ ±3.84/n doubt remains),
    // so a small set cannot pass a tight gate.
    PairedTable t = tab(95, 0, 0, 5);
    check_ci(t, -0.03329414838628697, 0.03329414838628697);
    ck_assert(paired_mcnemar_p(&t) == 1.0);
    ck_assert_int_eq(paired_verdict(paired_acc_interval(&t, PAIRED_Z95), 0.005, 1), PAIRED_INCONCLUSIVE);
    check_ci(tab(10, 0, 0, 0), -0.27753279986288915, 0.27753279986288915);
    // Every line discordant.
    t = tab(0, 4, 6, 0);
    ck_assert(fabs(paired_acc_delta(&t) - 0.2) < 1e-15);
    check_ci(t, -0.37465246053268331, 0.66363934058752783);
    ck_assert(p_close(paired_mcnemar_p(&t), 0.75390625));  // 2 · 386/1024
    // One line.
    check_ci(tab(1, 0, 0, 0), -0.79345068562276255, 0.79345068562276255);
    check_ci(tab(0, 1, 0, 0), -1.0, 0.12210872068194178);
    check_ci(tab(0, 0, 1, 0), -0.12210872068194178, 1.0);
    check_ci(tab(0, 0, 0, 1), -0.79345068562276255, 0.79345068562276255);
    // Nothing at all: nothing is known.
    t = tab(0, 0, 0, 0);
    PairedInterval ci = paired_acc_interval(&t, PAIRED_Z95);
    ck_assert(ci.lo == -1 && ci.hi == 1 && paired_acc_delta(&t) == 0);
    ck_assert_int_eq(paired_acc_lines_needed(&t, 0.005, PAIRED_Z95), -1);
    // A large table with a small p: the log-space binomial neither overflows nor gives 0.
    t = tab(0, 600, 400, 0);
    double p = paired_mcnemar_p(&t);
    ck_assert_msg(p > 0 && p < 1e-9, "p %g", p);
}
END_TEST

START_TEST(test_verdict_rule) {
    // Accuracy (higher is better), tolerance 0.005; the edges count as inside.
    ck_assert_int_eq(paired_verdict((PairedInterval){-0.005, 0.005}, 0.005, 1), PAIRED_PASS);
    ck_assert_int_eq(paired_verdict((PairedInterval){-0.004, 0.001}, 0.005, 1), PAIRED_PASS);
    ck_assert_int_eq(paired_verdict((PairedInterval){-0.006, 0.001}, 0.005, 1), PAIRED_INCONCLUSIVE);
    ck_assert_int_eq(paired_verdict((PairedInterval){-0.02, 0.02}, 0.005, 1), PAIRED_INCONCLUSIVE);
    ck_assert_int_eq(paired_verdict((PairedInterval){-0.03, -0.0051}, 0.005, 1), PAIRED_REGRESSION);
    ck_assert_int_eq(paired_verdict((PairedInterval){-0.03, -0.005}, 0.005, 1), PAIRED_INCONCLUSIVE);
    ck_assert_int_eq(paired_verdict((PairedInterval){0.006, 0.03}, 0.005, 1), PAIRED_BETTER);
    ck_assert_int_eq(paired_verdict((PairedInterval){0.001, 0.03}, 0.005, 1), PAIRED_PASS);  // maybe better: still a pass
    ck_assert_int_eq(paired_verdict((PairedInterval){-0.004, 0.03}, 0.005, 1), PAIRED_PASS);
    // CER (lower is better): a higher CER is the regression.
    ck_assert_int_eq(paired_verdict((PairedInterval){0.006, 0.03}, 0.005, 0), PAIRED_REGRESSION);
    ck_assert_int_eq(paired_verdict((PairedInterval){-0.03, -0.006}, 0.005, 0), PAIRED_BETTER);
    ck_assert_int_eq(paired_verdict((PairedInterval){-0.001, 0.004}, 0.005, 0), PAIRED_PASS);
    ck_assert_str_eq(paired_verdict_name(PAIRED_INCONCLUSIVE), "inconclusive");
    ck_assert_str_eq(paired_verdict_name(PAIRED_REGRESSION), "regression");
}
END_TEST

START_TEST(test_lines_needed) {
    // Brute force over n in tools/paired_reference.py (cells scaled with n).
    PairedTable t = tab(80, 3, 5, 12);
    ck_assert_int_eq(paired_acc_lines_needed(&t, 0.005, PAIRED_Z95), 499);
    ck_assert_int_eq(paired_acc_lines_needed(&t, 0.05, PAIRED_Z95), 100);
    t = tab(95, 0, 0, 5);
    ck_assert_int_eq(paired_acc_lines_needed(&t, 0.005, PAIRED_Z95), 688);
    ck_assert_int_eq(paired_acc_lines_needed(&t, 0.05, PAIRED_Z95), 100);
    t = tab(0, 4, 6, 0);
    ck_assert_int_eq(paired_acc_lines_needed(&t, 0.005, PAIRED_Z95), 92);
    ck_assert_int_eq(paired_acc_lines_needed(&t, 0.05, PAIRED_Z95), 62);
    // A delta exactly on the tolerance's lower edge never becomes conclusive.
    t = tab(0, 1, 0, 1);  // delta −0.5
    ck_assert_int_eq(paired_acc_lines_needed(&t, 0.5, PAIRED_Z95), -1);

    // The 1/√n scaling of a bootstrap interval (dyadic numbers, so the arithmetic is exact):
    // delta 0.25 in [−1.25, 1.75] on 100 lines at ±0.5: the lower half-width 1.5 must shrink to
    // 0.25 + 0.5, k = 1/2: 100 / (1/4) = 400 lines.
    ck_assert_int_eq(paired_scaled_lines_needed(100, 0.25, (PairedInterval){-1.25, 1.75}, 0.5, 1), 400);
    // A loss: delta −1 in [−1.75, −0.25] at ±0.5: the upper edge −1 + 0.75 k must reach −0.5,
    // k = 2/3: 100 / (4/9) = 225 lines.
    ck_assert_int_eq(paired_scaled_lines_needed(100, -1.0, (PairedInterval){-1.75, -0.25}, 0.5, 1), 225);
    // Already conclusive: n itself.
    ck_assert_int_eq(paired_scaled_lines_needed(100, 0.0, (PairedInterval){-0.25, 0.25}, 0.5, 1), 100);
    // CER worse by 0.5 in [0, 1] at ±0.125: the lower edge must rise above 0.125, k = 0.375 / 0.5:
    // ceil(100 / 0.5625) = 178.
    ck_assert_int_eq(paired_scaled_lines_needed(100, 0.5, (PairedInterval){0.0, 1.0}, 0.125, 0), 178);
    ck_assert_int_eq(paired_scaled_lines_needed(0, 0.0, (PairedInterval){-1, 1}, 0.005, 1), -1);
}
END_TEST

START_TEST(test_cer_bootstrap) {
    const int32_t ref[] = {10, 12, 8, 15, 9, 11, 14, 7, 10, 13, 6, 12};
    const int32_t eb[] = {0, 1, 0, 2, 0, 0, 3, 0, 1, 0, 0, 2};
    const int32_t er[] = {0, 2, 0, 2, 1, 0, 3, 0, 0, 1, 0, 4};
    ck_assert(paired_cer_delta(ref, eb, er, 12) == 4.0 / 127.0);
    PairedInterval ci;
    ck_assert_int_eq(paired_cer_bootstrap(&ci, ref, eb, er, 12, 2000, 0.05, 1024), OCR_OK);
    ck_assert_msg(ci.lo == -0.0080645161290322578 && ci.hi == 0.073529411764705885, "[%.17g, %.17g]", ci.lo, ci.hi);
    ck_assert_int_eq(paired_cer_bootstrap(&ci, ref, eb, er, 12, 7, 0.05, 7), OCR_OK);
    ck_assert_msg(ci.lo == -0.0084033613445378148 && ci.hi == 0.052238805970149252, "[%.17g, %.17g]", ci.lo, ci.hi);
    // Same seed, same interval; identical edits: a zero-width interval at 0.
    PairedInterval again;
    ck_assert_int_eq(paired_cer_bootstrap(&again, ref, eb, er, 12, 7, 0.05, 7), OCR_OK);
    ck_assert(again.lo == ci.lo && again.hi == ci.hi);
    ck_assert_int_eq(paired_cer_bootstrap(&ci, ref, eb, eb, 12, 500, 0.05, 3), OCR_OK);
    ck_assert(ci.lo == 0 && ci.hi == 0);
    // One line: every resample is that line.
    const int32_t r1[] = {5}, b1[] = {1}, f1[] = {3};
    ck_assert_int_eq(paired_cer_bootstrap(&ci, r1, b1, f1, 1, 100, 0.05, 1), OCR_OK);
    ck_assert(ci.lo == 0.4 && ci.hi == 0.4);
    // No lines; bad arguments.
    ck_assert_int_eq(paired_cer_bootstrap(&ci, r1, b1, f1, 0, 100, 0.05, 1), OCR_OK);
    ck_assert(ci.lo == -1 && ci.hi == 1);
    ck_assert_int_eq(paired_cer_bootstrap(&ci, r1, b1, f1, 1, 0, 0.05, 1), OCR_ERR_INVALID_ARG);
    ck_assert_int_eq(paired_cer_bootstrap(&ci, r1, b1, f1, 1, 10, 1.5, 1), OCR_ERR_INVALID_ARG);
    // SplitMix64's published first outputs from seed 0 (Vigna's reference splitmix64.c).
    uint64_t s = 0;
    ck_assert_uint_eq(paired_splitmix64(&s), 0xE220A8397B1DCDAFull);
    ck_assert_uint_eq(paired_splitmix64(&s), 0x6E789E6AA1B965F4ull);
}
END_TEST

static Suite *paired_suite(void) {
    Suite *s = suite_create("paired");
    TCase *tc = tcase_create("paired");
    tcase_add_test(tc, test_wilson_published);
    tcase_add_test(tc, test_table_by_hand);
    tcase_add_test(tc, test_edge_cases);
    tcase_add_test(tc, test_verdict_rule);
    tcase_add_test(tc, test_lines_needed);
    tcase_add_test(tc, test_cer_bootstrap);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(paired_suite()); }

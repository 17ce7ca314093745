// The seed-aware verdict (eval/seeds.h) against values computed independently by
// tools/seeds_reference.py (tests/eval/data/seeds_reference.json): mean squares from statsmodels'
// anova_lm on a long-format table, quantiles from scipy.stats.t.ppf, Newcombe's interval from the
// paper's formulas, "what would decide" by a brute-force scan over every seed and line count.
// Tolerances: per-seed metrics and the deltas are one correctly rounded division of exact integer
// sums in both languages, so they must be identical; the t quantile agrees with scipy to a few
// ulps; everything else is a few dozen double operations on values of order 1, plus statsmodels'
// least-squares sums of squares (accurate to ~1e-13 of the total sum of squares), so 1e-9
// relative with a 1e-12 absolute floor is far above rounding and far below any method
// difference. Degrees of freedom of the line part are a ratio with the difference MS_line −
// MS_resid squared in it: compared where that difference is not itself at rounding level.
// Unit tests below cover the corners the issue names (one seed, identical runs, a collapsed
// candidate, bad arguments).
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "eval/seeds.h"
#include "tests/common/test_util.h"

#define REL 1e-9
#define ABS 1e-12

static cJSON *load_reference(void) {
    char *text = NULL;
    size_t size = 0;
    const char *path = OCR_SOURCE_DIR "/tests/eval/data/seeds_reference.json";
    ck_assert_msg(ocr_read_file(path, &text, &size) == OCR_OK, "%s", ocr_last_error());
    cJSON *doc = cJSON_ParseWithLength(text, size);
    free(text);
    ck_assert_msg(doc != NULL, "%s: not JSON", path);
    return doc;
}

// Numbers, with the non-finite ones written as "nan", "inf", "-inf".
static double num(const cJSON *o, const char *key) {
    const cJSON *v = key ? cJSON_GetObjectItemCaseSensitive(o, key) : o;
    ck_assert_msg(v != NULL, "reference: no key %s", key ? key : "?");
    if (cJSON_IsNumber(v)) return v->valuedouble;
    ck_assert_msg(cJSON_IsString(v), "reference: %s is neither a number nor a string", key ? key : "?");
    if (strcmp(v->valuestring, "nan") == 0) return NAN;
    if (strcmp(v->valuestring, "inf") == 0) return INFINITY;
    if (strcmp(v->valuestring, "-inf") == 0) return -INFINITY;
    ck_abort_msg("reference: %s = \"%s\"", key ? key : "?", v->valuestring);
    return 0;
}

static int close_to(double got, double want, double rel, double abs_tol) {
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    return fabs(got - want) <= rel * fabs(want) + abs_tol;
}

#define CHECK(what, got, want, rel, abs_tol)                                                                 \
    ck_assert_msg(close_to((got), (want), (rel), (abs_tol)), "%s: %s = %.17g, reference %.17g", name, what, \
                  (double)(got), (double)(want))

static uint8_t *u8_array(const cJSON *a, int64_t count) {
    ck_assert_int_eq(cJSON_GetArraySize(a), count);
    uint8_t *v = malloc((size_t)count);
    int64_t i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, a) v[i++] = (uint8_t)x->valueint;
    return v;
}

static int32_t *i32_array(const cJSON *a, int64_t count) {
    ck_assert_int_eq(cJSON_GetArraySize(a), count);
    int32_t *v = malloc(sizeof(int32_t) * (size_t)(count ? count : 1));
    int64_t i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, a) v[i++] = (int32_t)x->valueint;
    return v;
}

static void check_metric(const char *name, const char *which, const SeedsMetric *m, const cJSON *e) {
    char what[64];
#define F(field)                                                          \
    snprintf(what, sizeof what, "%s.%s", which, #field);                \
    CHECK(what, m->field, num(e, #field), REL, ABS)
    CHECK("delta", m->delta, num(e, "delta"), 0, 0);
    snprintf(what, sizeof what, "%s.lo", which);
    CHECK(what, m->ci.lo, num(e, "lo"), REL, ABS);
    snprintf(what, sizeof what, "%s.hi", which);
    CHECK(what, m->ci.hi, num(e, "hi"), REL, ABS);
    F(se);
    F(dof_seed);
    F(ms_seed);
    F(ms_line);
    F(ms_resid);
    F(var_seed);
    F(var_line);
    F(var_resid);
    F(share_seed);
    F(share_line);
    F(share_resid);
    F(base_mean);
    F(cand_mean);
    F(base_sd);
    F(cand_sd);
#undef F
    // The line part's dof where its L = MS_line − MS_resid is well above rounding.
    if (m->share_line > 1e-9 * (m->share_seed + m->share_resid)) {
        snprintf(what, sizeof what, "%s.dof_line", which);
        CHECK(what, m->dof_line, num(e, "dof_line"), 1e-6, 0);
    }
    ck_assert_msg(m->floored == (int)num(e, "floored"), "%s: %s.floored %d", name, which, m->floored);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, "verdict");
    ck_assert_msg(strcmp(paired_verdict_name(m->verdict), v->valuestring) == 0, "%s: %s verdict %s, reference %s", name,
                  which, paired_verdict_name(m->verdict), v->valuestring);
    ck_assert_msg(m->seeds_needed == (int64_t)num(e, "seeds_needed"), "%s: %s seeds_needed %lld, reference %lld", name,
                  which, (long long)m->seeds_needed, (long long)num(e, "seeds_needed"));
    ck_assert_msg(m->lines_needed == (int64_t)num(e, "lines_needed"), "%s: %s lines_needed %lld, reference %lld", name,
                  which, (long long)m->lines_needed, (long long)num(e, "lines_needed"));
}

START_TEST(test_t_quantile_reference) {
    cJSON *doc = load_reference();
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(doc, "tquantile"), *r;
    int count = 0;
    const char *name = "t quantile";
    cJSON_ArrayForEach(r, rows) {
        double p = num(r, "p"), dof = num(r, "dof"), q = num(r, "q");
        double got = seeds_t_quantile(p, dof);
        ck_assert_msg(fabs(got - q) <= 1e-12 * fabs(q), "%s: p %g dof %g: %.17g, scipy %.17g", name, p, dof, got, q);
        count++;
    }
    ck_assert_int_ge(count, 80);
    cJSON_Delete(doc);
}
END_TEST

START_TEST(test_t_quantile_closed_forms) {
    // ν = 1 (Cauchy): tan(π(p − ½)); ν = 2: (2p − 1)/√(2p(1 − p)); ν = ∞: the normal quantile.
    const double pi = 3.14159265358979323846;
    for (double p = 0.51; p < 1; p += 0.06) {
        double c = tan(pi * (p - 0.5)), t2 = (2 * p - 1) / sqrt(2 * p * (1 - p));
        ck_assert_msg(fabs(seeds_t_quantile(p, 1) - c) <= 1e-13 * c, "p %g: %.17g vs %.17g", p, seeds_t_quantile(p, 1), c);
        ck_assert_msg(fabs(seeds_t_quantile(p, 2) - t2) <= 1e-13 * t2, "p %g", p);
        ck_assert(fabs(seeds_t_quantile(1 - p, 2) + t2) <= 1e-13 * t2);
    }
    ck_assert(fabs(seeds_t_quantile(0.975, INFINITY) - PAIRED_Z95) <= 1e-15);
    ck_assert(seeds_t_quantile(0.5, 3) == 0);
    ck_assert(isnan(seeds_t_quantile(0, 3)) && isnan(seeds_t_quantile(1, 3)) && isnan(seeds_t_quantile(0.9, 0)));
    // Continuous across the switch to the series at 1000 dof (the quantile's slope there is
    // −2.4e-6 per degree of freedom: 1e-9 dof apart it moves by 2.4e-15).
    double a = seeds_t_quantile(0.975, 1000 - 1e-9), b = seeds_t_quantile(0.975, 1000);
    ck_assert_msg(fabs(a - b) < 1e-14, "%.17g %.17g", a, b);
}
END_TEST

START_TEST(test_reference_cases) {
    cJSON *doc = load_reference();
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(doc, "cases"), *c;
    int count = 0;
    cJSON_ArrayForEach(c, cases) {
        const char *name = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
        int S = (int)num(c, "S");
        int64_t n = (int64_t)num(c, "n");
        uint8_t *bc = u8_array(cJSON_GetObjectItemCaseSensitive(c, "base_correct"), S * n);
        uint8_t *cc = u8_array(cJSON_GetObjectItemCaseSensitive(c, "cand_correct"), S * n);
        int32_t *be = i32_array(cJSON_GetObjectItemCaseSensitive(c, "base_edits"), S * n);
        int32_t *ce = i32_array(cJSON_GetObjectItemCaseSensitive(c, "cand_edits"), S * n);
        int32_t *ref = i32_array(cJSON_GetObjectItemCaseSensitive(c, "ref_chars"), n);
        SeedsOptions o = {num(c, "acc_tol"), num(c, "cer_tol"), num(c, "prior_sd_acc"), num(c, "prior_sd_cer")};
        SeedsResult r;
        ck_assert_msg(seeds_compare(&r, S, n, bc, cc, be, ce, ref, &o) == OCR_OK, "%s: %s", name, ocr_last_error());
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(c, "expect");
        ck_assert_str_eq(seeds_method_name(r.method), cJSON_GetObjectItemCaseSensitive(e, "method")->valuestring);
        ck_assert_int_eq(r.seeds, S);
        ck_assert_int_eq(r.lines, n);
        ck_assert_int_eq(r.ref_chars, (int64_t)num(e, "ref_chars"));
        static const char *const per_seed[] = {"base_acc", "cand_acc", "acc_delta", "base_cer", "cand_cer", "cer_delta"};
        const double *got[] = {r.base_acc, r.cand_acc, r.acc_delta, r.base_cer, r.cand_cer, r.cer_delta};
        for (int k = 0; k < 6; k++) {
            const cJSON *a = cJSON_GetObjectItemCaseSensitive(e, per_seed[k]);
            ck_assert_int_eq(cJSON_GetArraySize(a), S);
            for (int s = 0; s < S; s++) CHECK(per_seed[k], got[k][s], num(cJSON_GetArrayItem(a, s), NULL), 0, 0);
        }
        check_metric(name, "acc", &r.acc, cJSON_GetObjectItemCaseSensitive(e, "acc"));
        check_metric(name, "cer", &r.cer, cJSON_GetObjectItemCaseSensitive(e, "cer"));
        ck_assert_msg(strcmp(paired_verdict_name(r.verdict), cJSON_GetObjectItemCaseSensitive(e, "verdict")->valuestring) == 0,
                      "%s: overall %s", name, paired_verdict_name(r.verdict));
        free(bc);
        free(cc);
        free(be);
        free(ce);
        free(ref);
        count++;
    }
    ck_assert_int_ge(count, 14);
    cJSON_Delete(doc);
}
END_TEST

// ---- unit tests on hand-made tables -----------------------------------------------------------------

typedef struct {
    int S;
    int64_t n;
    uint8_t *bc, *cc;
    int32_t *be, *ce, *ref;
} Runs;

// S pairs on n lines: the baseline right on the first base_right lines of every seed, the
// candidate on the first cand_right (shifted by `shift` lines per seed, so that seeds differ);
// a wrong line has 2 edits, every line 10 reference characters.
static Runs make_runs(int S, int64_t n, int64_t base_right, int64_t cand_right, int64_t shift) {
    Runs r = {S, n, malloc((size_t)(S * n)), malloc((size_t)(S * n)), malloc(sizeof(int32_t) * (size_t)(S * n)),
              malloc(sizeof(int32_t) * (size_t)(S * n)), malloc(sizeof(int32_t) * (size_t)n)};
    for (int64_t i = 0; i < n; i++) r.ref[i] = 10;
    for (int s = 0; s < S; s++)
        for (int64_t i = 0; i < n; i++) {
            int64_t k = s * n + i, j = (i + s * shift) % n;
            r.bc[k] = i < base_right;
            r.cc[k] = j < cand_right;
            r.be[k] = r.bc[k] ? 0 : 2;
            r.ce[k] = r.cc[k] ? 0 : 2;
        }
    return r;
}

static void free_runs(Runs *r) {
    free(r->bc);
    free(r->cc);
    free(r->be);
    free(r->ce);
    free(r->ref);
}

static SeedsResult compare(const Runs *r, SeedsOptions o) {
    SeedsResult res;
    ck_assert_msg(seeds_compare(&res, r->S, r->n, r->bc, r->cc, r->be, r->ce, r->ref, &o) == OCR_OK, "%s",
                  ocr_last_error());
    return res;
}

START_TEST(test_collapsed_candidate) {
    // A diverged candidate: 0.05 against 0.85, with one seed (training noise assumed) and three.
    for (int S = 1; S <= 3; S += 2) {
        Runs r = make_runs(S, 400, 340, 20, 7);
        SeedsResult res = compare(&r, seeds_default_options());
        ck_assert_msg(res.acc.verdict == PAIRED_REGRESSION && res.cer.verdict == PAIRED_REGRESSION &&
                          res.verdict == PAIRED_REGRESSION,
                      "S %d: acc %s [%g, %g]", S, paired_verdict_name(res.acc.verdict), res.acc.ci.lo, res.acc.ci.hi);
        ck_assert(fabs(res.acc.delta + 0.8) < 1e-12);
        ck_assert_int_eq(res.method, S == 1 ? SEEDS_METHOD_ONE_SEED : SEEDS_METHOD_CROSSED);
        ck_assert_int_eq(res.acc.seeds_needed, S);
        ck_assert_int_eq(res.acc.lines_needed, 400);
        free_runs(&r);
    }
}
END_TEST

START_TEST(test_one_seed_rule) {
    // An ordinary one-seed difference of two points (800 lines, 0.87 against 0.85): within the
    // assumed seed noise, so not a regression; the verdict asks for more seeds, not more lines.
    Runs r = make_runs(1, 800, 696, 680, 0);
    SeedsOptions o = seeds_default_options();
    SeedsResult res = compare(&r, o);
    ck_assert(fabs(res.acc.delta + 0.02) < 1e-12);
    ck_assert_int_eq(res.acc.verdict, PAIRED_INCONCLUSIVE);
    ck_assert_int_ne(res.verdict, PAIRED_REGRESSION);
    ck_assert(isnan(res.acc.base_sd) && isnan(res.acc.ms_seed) && isinf(res.acc.dof_seed));
    ck_assert(res.acc.var_seed == 2 * o.prior_seed_sd_acc * o.prior_seed_sd_acc);
    ck_assert_int_eq(res.acc.lines_needed, -1);  // the assumed seed noise does not shrink with lines
    ck_assert_int_gt(res.acc.seeds_needed, 1);
    // The allowance is the widening: without it the interval is eval/paired.h's Newcombe interval,
    // and this large a difference on 800 lines is then a regression.
    PairedTable t = {680, 16, 0, 104};
    PairedInterval nc = paired_acc_interval(&t, PAIRED_Z95);
    o.prior_seed_sd_acc = 0;
    res = compare(&r, o);
    ck_assert(fabs(res.acc.ci.lo - nc.lo) < 1e-15 && fabs(res.acc.ci.hi - nc.hi) < 1e-15);
    ck_assert_int_eq(res.acc.verdict, PAIRED_REGRESSION);
    // Widening in quadrature: each half-width becomes √(h² + (z·√2·σ)²).
    o.prior_seed_sd_acc = 0.01;
    res = compare(&r, o);
    double p = PAIRED_Z95 * sqrt(2.0) * 0.01, hl = -0.02 - nc.lo, hh = nc.hi + 0.02;
    ck_assert(fabs(res.acc.ci.lo - (-0.02 - sqrt(hl * hl + p * p))) < 1e-15);
    ck_assert(fabs(res.acc.ci.hi - (-0.02 + sqrt(hh * hh + p * p))) < 1e-15);
    free_runs(&r);
}
END_TEST

START_TEST(test_identical_runs) {
    // The candidate is the baseline: delta 0, every mean square 0. The accuracy interval is the
    // pooled Newcombe interval (not zero width): enough lines pass ±0.005, too few do not.
    Runs r = make_runs(4, 500, 430, 430, 0);
    memcpy(r.cc, r.bc, (size_t)(4 * 500));
    memcpy(r.ce, r.be, sizeof(int32_t) * 4 * 500);
    SeedsResult res = compare(&r, seeds_default_options());
    ck_assert(res.acc.delta == 0 && res.cer.delta == 0);
    ck_assert(res.acc.ms_seed == 0 && res.acc.ms_line == 0 && res.acc.ms_resid == 0);
    ck_assert(res.acc.ci.lo < 0 && res.acc.ci.hi > 0 && fabs(res.acc.ci.lo + res.acc.ci.hi) < 1e-15 && res.acc.floored);
    ck_assert(res.cer.ci.lo == 0 && res.cer.ci.hi == 0);
    ck_assert_int_eq(res.verdict, PAIRED_PASS);
    ck_assert(res.acc.base_sd == 0 && res.acc.cand_sd == 0);
    free_runs(&r);
    r = make_runs(2, 40, 34, 34, 0);
    res = compare(&r, seeds_default_options());
    ck_assert_int_eq(res.acc.verdict, PAIRED_INCONCLUSIVE);
    ck_assert_int_gt(res.acc.lines_needed, 40);
    ck_assert_int_gt(res.acc.seeds_needed, 2);
    free_runs(&r);
}
END_TEST

START_TEST(test_all_lines_equal) {
    // Every line alike: the baseline right everywhere, the candidate right everywhere at even seeds
    // and nowhere at odd ones. MS_line = MS_resid = 0; the seeds alone carry the doubt.
    Runs r = make_runs(4, 50, 50, 50, 0);
    for (int64_t i = 0; i < 50; i++) {
        r.cc[50 + i] = r.cc[150 + i] = 0;
        r.ce[50 + i] = r.ce[150 + i] = 2;
    }
    SeedsResult res = compare(&r, seeds_default_options());
    ck_assert(res.acc.delta == -0.5);
    ck_assert(res.acc.ms_line == 0 && res.acc.ms_resid == 0 && res.acc.ms_seed > 0);
    ck_assert(res.acc.share_line == 0 && res.acc.share_resid == 0);
    ck_assert(isinf(res.acc.dof_line) && res.acc.dof_seed == 3);
    // t(3) · √(MS_seed / (S·n)): MS_seed = 50 · 4 · 0.25 / 3; the interval reaches past −1 and 0.
    double h = seeds_t_quantile(0.975, 3) * sqrt(50.0 * 4 * 0.25 / 3 / 200);
    ck_assert(fabs(res.acc.ci.hi - (-0.5 + h)) < 1e-14 && res.acc.ci.lo == -1);
    ck_assert_int_eq(res.acc.verdict, PAIRED_INCONCLUSIVE);
    ck_assert_int_eq(res.acc.lines_needed, -1);  // the seed part does not shrink with lines
    free_runs(&r);
}
END_TEST

START_TEST(test_one_line) {
    // n = 1: no line or residual mean square; one seed and one line: the paired interval of one line.
    Runs r = make_runs(3, 1, 1, 1, 0);
    r.cc[1] = 0;
    r.ce[1] = 2;
    SeedsResult res = compare(&r, seeds_default_options());
    ck_assert(isnan(res.acc.ms_line) && isnan(res.acc.ms_resid) && res.acc.var_line == 0);
    ck_assert_int_eq(res.verdict, PAIRED_INCONCLUSIVE);
    free_runs(&r);
    r = make_runs(1, 1, 1, 1, 0);
    SeedsOptions o = seeds_default_options();
    o.prior_seed_sd_acc = 0;
    res = compare(&r, o);
    ck_assert(fabs(res.acc.ci.hi - 0.79345068562276255) < 1e-12 && fabs(res.acc.ci.lo + 0.79345068562276255) < 1e-12);
    free_runs(&r);
}
END_TEST

START_TEST(test_bad_arguments) {
    Runs r = make_runs(2, 10, 8, 8, 0);
    SeedsOptions o = seeds_default_options();
    SeedsResult res;
    ck_assert_int_eq(seeds_compare(&res, 0, 10, r.bc, r.cc, r.be, r.ce, r.ref, &o), OCR_ERR_INVALID_ARG);
    ck_assert_int_eq(seeds_compare(&res, SEEDS_MAX + 1, 10, r.bc, r.cc, r.be, r.ce, r.ref, &o), OCR_ERR_INVALID_ARG);
    ck_assert_int_eq(seeds_compare(&res, 2, 0, r.bc, r.cc, r.be, r.ce, r.ref, &o), OCR_ERR_INVALID_ARG);
    ck_assert_int_eq(seeds_compare(&res, 2, 10, NULL, r.cc, r.be, r.ce, r.ref, &o), OCR_ERR_INVALID_ARG);
    ck_assert_int_eq(seeds_compare(&res, 2, 10, r.bc, r.cc, r.be, r.ce, r.ref, NULL), OCR_ERR_INVALID_ARG);
    o.acc_tol = -0.1;
    ck_assert_int_eq(seeds_compare(&res, 2, 10, r.bc, r.cc, r.be, r.ce, r.ref, &o), OCR_ERR_INVALID_ARG);
    o = seeds_default_options();
    o.prior_seed_sd_cer = NAN;
    ck_assert_int_eq(seeds_compare(&res, 2, 10, r.bc, r.cc, r.be, r.ce, r.ref, &o), OCR_ERR_INVALID_ARG);
    o = seeds_default_options();
    r.ref[3] = -1;
    ck_assert_int_eq(seeds_compare(&res, 2, 10, r.bc, r.cc, r.be, r.ce, r.ref, &o), OCR_ERR_INVALID_ARG);
    r.ref[3] = 10;
    r.ce[12] = -2;
    ck_assert_int_eq(seeds_compare(&res, 2, 10, r.bc, r.cc, r.be, r.ce, r.ref, &o), OCR_ERR_INVALID_ARG);
    ck_assert(strstr(ocr_last_error(), "line 2") != NULL);
    ck_assert_str_eq(seeds_method_name(SEEDS_METHOD_ONE_SEED), "one_seed");
    ck_assert_str_eq(seeds_method_name(SEEDS_METHOD_CROSSED), "crossed");
    ck_assert(strlen(seeds_method_description(SEEDS_METHOD_CROSSED)) > 20);
    free_runs(&r);
}
END_TEST

static Suite *seeds_suite(void) {
    Suite *s = suite_create("seeds");
    TCase *tc = tcase_create("seeds");
    tcase_add_test(tc, test_t_quantile_reference);
    tcase_add_test(tc, test_t_quantile_closed_forms);
    tcase_add_test(tc, test_reference_cases);
    tcase_add_test(tc, test_collapsed_candidate);
    tcase_add_test(tc, test_one_seed_rule);
    tcase_add_test(tc, test_identical_runs);
    tcase_add_test(tc, test_all_lines_equal);
    tcase_add_test(tc, test_one_line);
    tcase_add_test(tc, test_bad_arguments);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(seeds_suite()); }

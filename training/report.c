// The Report itself: the per-line pairing of each AMP run with the baseline, the verdict over the
// runs (exit code, lines needed, its one-line sentence), the machine description, and report_write,
// which writes the three files; their writers are report_json.c, report_markdown.c and
// report_html.c (charts: report_svg.c).
#include "training/report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "core/fileio.h"
#include "kernels/backend.h"
#include "training/report_internal.h"

static const char *g_version = "unknown";
void training_set_version(const char *version) { g_version = version ? version : "unknown"; }
const char *training_version(void) { return g_version; }

// ---- verdict -------------------------------------------------------------------------------------

ocr_status_t report_pair(ReportPaired *out, const EvalLine *base, const EvalLine *run, int64_t n, double acc_tol,
                         double cer_tol, uint64_t seed) {
    memset(out, 0, sizeof *out);
    int32_t *ref = malloc(sizeof(int32_t) * (size_t)(n ? n : 1)), *eb = malloc(sizeof(int32_t) * (size_t)(n ? n : 1)),
            *er = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    ocr_status_t st = OCR_OK;
    if (!ref || !eb || !er) st = ocr_set_error(OCR_ERR_OOM, "paired comparison: out of memory for %lld lines",
                                               (long long)n);
    int64_t k = 0;
    for (int64_t i = 0; st == OCR_OK && i < n; i++) {
        if (!base[i].scored || !run[i].scored) continue;
        paired_table_add(&out->table, base[i].correct, run[i].correct);
        ref[k] = base[i].ref_chars;  // the same reference for both runs
        eb[k] = base[i].edits;
        er[k] = run[i].edits;
        k++;
    }
    if (st == OCR_OK) st = paired_cer_bootstrap(&out->cer_ci, ref, eb, er, k, PAIRED_BOOTSTRAP_B, 0.05, seed);
    if (st == OCR_OK) {
        out->has = 1;
        out->lines = k;
        out->acc_delta = paired_acc_delta(&out->table);
        out->acc_ci = paired_acc_interval(&out->table, PAIRED_Z95);
        out->mcnemar_p = paired_mcnemar_p(&out->table);
        out->acc_verdict = paired_verdict(out->acc_ci, acc_tol, 1);
        out->acc_lines_needed = paired_acc_lines_needed(&out->table, acc_tol, PAIRED_Z95);
        out->cer_delta = paired_cer_delta(ref, eb, er, k);
        out->cer_verdict = paired_verdict(out->cer_ci, cer_tol, 0);
        out->cer_lines_needed = paired_scaled_lines_needed(k, out->cer_delta, out->cer_ci, cer_tol, 0);
        paired_verdict_t a = out->acc_verdict, c = out->cer_verdict;
        if (a == PAIRED_REGRESSION || c == PAIRED_REGRESSION) out->verdict = PAIRED_REGRESSION;
        else if (a == PAIRED_INCONCLUSIVE || c == PAIRED_INCONCLUSIVE) out->verdict = PAIRED_INCONCLUSIVE;
        else out->verdict = PAIRED_PASS;
    }
    free(ref);
    free(eb);
    free(er);
    return st;
}

// The runs that take part in the statistics: a baseline run that failed or diverged says nothing
// about the change, a candidate run that diverged does (it is scored as it ended, and fails the
// verdict besides).
static int run_finished(const ReportSeedRun *s) { return s->status != REPORT_SEED_FAILED; }

// Which per-line outcome counts as correct: the configured metric, exact match, spaces ignored.
enum { JUDGE_CONFIGURED = 0, JUDGE_EXACT, JUDGE_NOSPACE };

static uint8_t line_correct(const EvalLine *l, int which) {
    return which == JUDGE_EXACT ? l->correct_exact : which == JUDGE_NOSPACE ? l->correct_nospace : l->correct;
}

// Leg i against the baseline over the seeds (sd), and per line at the first paired seed (paired;
// NULL: not wanted), counting `which` outcome as correct.
static ocr_status_t judge_run(Report *rep, int i, EvalLine *lines[][REPORT_MAX_SEEDS], int64_t n, int which,
                              ReportSeeded *sd, ReportPaired *paired) {
    const int nseeds = rep->runs[0].n_seeds;
    {
        ReportRun *run = &rep->runs[i];
        memset(sd, 0, sizeof *sd);
        if (paired) memset(paired, 0, sizeof *paired);
        for (int k = 0; k < nseeds; k++) {
            const ReportSeedRun *b = &rep->runs[0].seeds[k], *c = &run->seeds[k];
            if (c->status != REPORT_SEED_OK) {
                sd->failed_runs++;
                if (!sd->reason[0])
                    snprintf(sd->reason, sizeof sd->reason, "%s at seed %llu %s: %.400s", run->name,
                             (unsigned long long)c->seed, c->status == REPORT_SEED_FAILED ? "failed" : "diverged",
                             c->error);
            }
            if (b->status != REPORT_SEED_OK) {
                sd->failed_baseline++;
                continue;
            }
            if (run_finished(c) && sd->pairs < SEEDS_MAX) sd->pair_seed[sd->pairs++] = k;
        }
        // The lines every paired run scored (the unreadable ones are the same for every run).
        int64_t m = 0;
        uint8_t *keep = calloc((size_t)(n ? n : 1), 1);
        if (!keep) return ocr_set_error(OCR_ERR_OOM, "verdict: out of memory for %lld lines", (long long)n);
        for (int64_t l = 0; l < n; l++) {
            int ok = sd->pairs > 0;
            for (int p = 0; p < sd->pairs && ok; p++)
                ok = lines[0][sd->pair_seed[p]][l].scored && lines[i][sd->pair_seed[p]][l].scored;
            keep[l] = (uint8_t)ok;
            m += ok;
        }
        ocr_status_t st = OCR_OK;
        if (sd->pairs > 0 && m > 0) {
            const size_t cells = (size_t)sd->pairs * (size_t)m;
            uint8_t *bc = malloc(cells), *cc = malloc(cells);
            int32_t *be = malloc(cells * sizeof(int32_t)), *ce = malloc(cells * sizeof(int32_t)),
                    *ref = malloc((size_t)m * sizeof(int32_t));
            if (!bc || !cc || !be || !ce || !ref) st = ocr_set_error(OCR_ERR_OOM, "verdict: out of memory");
            for (int p = 0; st == OCR_OK && p < sd->pairs; p++) {
                const EvalLine *bl = lines[0][sd->pair_seed[p]], *cl = lines[i][sd->pair_seed[p]];
                int64_t j = 0;
                for (int64_t l = 0; l < n; l++) {
                    if (!keep[l]) continue;
                    size_t at = (size_t)p * (size_t)m + (size_t)j;
                    bc[at] = line_correct(&bl[l], which);
                    cc[at] = line_correct(&cl[l], which);
                    be[at] = bl[l].edits;
                    ce[at] = cl[l].edits;
                    if (p == 0) ref[j] = bl[l].ref_chars;
                    j++;
                }
            }
            SeedsOptions so = seeds_default_options();
            so.acc_tol = rep->tolerance;
            so.cer_tol = rep->cer_tolerance;
            if (rep->assumed_seed_sd > 0) so.prior_seed_sd_acc = rep->assumed_seed_sd;
            if (st == OCR_OK) st = seeds_compare(&sd->res, sd->pairs, m, bc, cc, be, ce, ref, &so);
            free(bc);
            free(cc);
            free(be);
            free(ce);
            free(ref);
            if (st == OCR_OK) {
                sd->has = 1;
                sd->verdict = sd->res.verdict;
                // The per-line detail at the first paired seed (the table of eval/paired.h).
                int k0 = sd->pair_seed[0];
                if (paired)
                    st = report_pair(paired, lines[0][k0], lines[i][k0], n, rep->tolerance, rep->cer_tolerance,
                                     rep->bootstrap_seed);
            }
        }
        free(keep);
        OCR_TRY(st);
        if (sd->failed_runs > 0) {
            sd->verdict = PAIRED_REGRESSION;  // a change that breaks training at some seed is a regression
        } else if (!sd->has) {
            sd->verdict = PAIRED_INCONCLUSIVE;
            if (!sd->reason[0])
                snprintf(sd->reason, sizeof sd->reason, "no seed where %s and %s both trained and scored a line",
                         rep->runs[0].name, run->name);
        }
    }
    return OCR_OK;
}

ocr_status_t report_judge(Report *rep, EvalLine *lines[][REPORT_MAX_SEEDS], int64_t n) {
    for (int i = 1; i < rep->n_runs; i++)
        OCR_TRY(judge_run(rep, i, lines, n, JUDGE_CONFIGURED, &rep->runs[i].seeded, &rep->runs[i].paired));
    return OCR_OK;
}

ocr_status_t report_judge_general(Report *rep, EvalLine *lines[][REPORT_MAX_SEEDS], int64_t n) {
    for (int i = 1; i < rep->n_runs; i++) {
        OCR_TRY(judge_run(rep, i, lines, n, JUDGE_EXACT, &rep->runs[i].general_exact, NULL));
        OCR_TRY(judge_run(rep, i, lines, n, JUDGE_NOSPACE, &rep->runs[i].general_nospace, NULL));
    }
    return OCR_OK;
}

int report_run_means(const Report *rep, int i, double *acc_exact, double *acc_nospace, double *general_exact,
                     double *general_nospace) {
    const ReportRun *run = &rep->runs[i];
    double a = 0, b = 0, c = 0, d = 0;
    int k = 0;
    for (int s = 0; s < run->n_seeds; s++) {
        const ReportSeedRun *r = &run->seeds[s];
        if (r->status == REPORT_SEED_FAILED) continue;
        a += r->acc_exact, b += r->acc_nospace, c += r->general_acc_exact, d += r->general_acc_nospace;
        k++;
    }
    *acc_exact = k ? a / k : 0;
    *acc_nospace = k ? b / k : 0;
    *general_exact = k ? c / k : 0;
    *general_nospace = k ? d / k : 0;
    return k;
}

void report_forgetting_line(const Report *rep, int i, char *buf, size_t cap) {
    double ae, an, ge, gn;
    if (!rep->has_general || report_run_means(rep, i, &ae, &an, &ge, &gn) == 0) {
        snprintf(buf, cap, "%s", "");
        return;
    }
    if (rep->has_start)
        snprintf(buf, cap, "%s: target set (Eval) %+.1f points, general text (EvalGeneral) %+.1f points from the "
                 "pretrained weights (exact match, %.3f -> %.3f and %.3f -> %.3f).", rep->runs[i].name,
                 100 * (ae - rep->start_acc_exact), 100 * (ge - rep->start_general_acc_exact), rep->start_acc_exact, ae,
                 rep->start_general_acc_exact, ge);
    else
        snprintf(buf, cap, "%s: target set (Eval) %.3f, general text (EvalGeneral) %.3f (exact match; no pretrained "
                 "model to measure the change from).", rep->runs[i].name, ae, ge);
}

paired_verdict_t report_run_verdict(const Report *rep, int i) {
    const ReportSeeded *s = &rep->runs[i].seeded;
    if (s->has || s->failed_runs > 0 || s->reason[0]) return s->verdict;
    const ReportPaired *p = &rep->runs[i].paired;  // a report built without seeds (tests, tools)
    return p->has ? p->verdict : PAIRED_INCONCLUSIVE;
}

int report_exit_code(const Report *rep) {
    int inconclusive = 0;
    for (int i = 1; i < rep->n_runs; i++) {
        paired_verdict_t v = report_run_verdict(rep, i);
        if (v == PAIRED_REGRESSION) return REPORT_EXIT_REGRESSION;
        inconclusive |= v == PAIRED_INCONCLUSIVE;
    }
    return inconclusive ? REPORT_EXIT_INCONCLUSIVE : REPORT_EXIT_PASS;
}

// The need over the inconclusive legs and metrics (seeds: 1, lines: 0).
static int64_t worst_need(const Report *rep, int seeds) {
    int64_t worst = -1;
    for (int i = 1; i < rep->n_runs; i++) {
        const ReportSeeded *s = &rep->runs[i].seeded;
        if (report_run_verdict(rep, i) != PAIRED_INCONCLUSIVE) continue;
        if (!s->has) {
            // A report judged per line only (two fixed models, tools): the paired estimates.
            const ReportPaired *p = &rep->runs[i].paired;
            if (seeds || !p->has) continue;
            int64_t pn[2] = {p->acc_verdict == PAIRED_INCONCLUSIVE ? p->acc_lines_needed : -2,
                             p->cer_verdict == PAIRED_INCONCLUSIVE ? p->cer_lines_needed : -2};
            for (int k = 0; k < 2; k++) {
                if (pn[k] == -2) continue;
                if (pn[k] < 0) return -1;
                if (pn[k] > worst) worst = pn[k];
            }
            continue;
        }
        const SeedsMetric *ms[2] = {&s->res.acc, &s->res.cer};
        for (int k = 0; k < 2; k++) {
            if (ms[k]->verdict != PAIRED_INCONCLUSIVE) continue;
            int64_t need = seeds ? ms[k]->seeds_needed : ms[k]->lines_needed;
            if (need < 0) return -1;  // one metric that nothing decides: no count is enough
            if (need > worst) worst = need;
        }
    }
    return worst;
}

int64_t report_lines_needed(const Report *rep) { return worst_need(rep, 0); }
int64_t report_seeds_needed(const Report *rep) { return worst_need(rep, 1); }

// The leg that decided the verdict: the first regressing one, else the first inconclusive one.
static int deciding_leg(const Report *rep, paired_verdict_t want) {
    for (int i = 1; i < rep->n_runs; i++)
        if (report_run_verdict(rep, i) == want) return i;
    return 0;
}

// The verdict's one-line statement (terminal, Markdown and HTML).
void report_verdict_text(Buf *b, const Report *rep) {
    int code = report_exit_code(rep);
    const char *base = rep->runs[0].name;
    const char *what = rep->candidate_mode ? "the candidate" : "an AMP run";
    char nb[64];
    if (code == REPORT_EXIT_REGRESSION) {
        int i = deciding_leg(rep, PAIRED_REGRESSION);
        const ReportSeeded *s = &rep->runs[i].seeded;
        if (s->failed_runs > 0)
            bprintf(b, "REGRESSION (exit 3): %s: %d of %d %s runs failed or diverged where %s trained", s->reason,
                    s->failed_runs, rep->runs[i].n_seeds, rep->runs[i].name, base);
        else
            bprintf(b, "REGRESSION (exit 3): %s is worse than %s beyond the tolerance with 95%% confidence, training "
                       "noise between seeds included", rep->runs[i].name, base);
    } else if (code == REPORT_EXIT_INCONCLUSIVE) {
        int i = deciding_leg(rep, PAIRED_INCONCLUSIVE);
        const ReportSeeded *s = &rep->runs[i].seeded;
        int64_t seeds = report_seeds_needed(rep), lines = report_lines_needed(rep);
        bprintf(b, "INCONCLUSIVE (exit 4): %d seed%s × %lld eval lines cannot tell whether %s is worse than %s by more "
                   "than the tolerance", s->has ? s->pairs : 0, s->has && s->pairs == 1 ? "" : "s",
                (long long)(s->has ? s->res.lines : rep->eval_samples), rep->runs[i].name, base);
        if (!s->has && s->reason[0]) bprintf(b, " (%s)", s->reason);
        if (seeds > 0 && seeds <= 64)
            bprintf(b, "; about %lld seeds would decide it at these rates", (long long)seeds);
        else if (seeds > 64)
            bprintf(b, "; about %s seeds would be needed at these rates: the difference is small against the training "
                       "noise", fmt_lines(seeds, nb, sizeof nb));
        if (lines > 0 && (s->has && lines != s->res.lines))
            bprintf(b, "%s about %s eval lines would at %d seed%s", seeds > 0 ? ", or" : ";",
                    fmt_lines(lines, nb, sizeof nb), s->pairs, s->pairs == 1 ? "" : "s");
        if (seeds < 0 && lines < 0) bprintf(b, "; no number of seeds or lines would at these rates (the difference "
                                               "sits on the tolerance)");
    } else {
        if (rep->n_runs > 2)
            bprintf(b, "PASS: no %s is worse than %s by more than the tolerance with 95%% confidence, training noise "
                       "between seeds included", rep->candidate_mode ? "candidate" : "AMP run", base);
        else
            bprintf(b, "PASS: %s is not worse than %s by more than the tolerance with 95%% confidence, training noise "
                       "between seeds included", rep->n_runs > 1 ? rep->runs[1].name : what, base);
    }
    int one = rep->n_seeds <= 1;
    bprintf(b, " (%d seed%s; tolerance ±%.4g accuracy, ±%.4g CER, absolute%s)", rep->n_seeds, one ? "" : "s",
            rep->tolerance, rep->cer_tolerance,
            one ? "; training noise not measured with one seed: an assumed seed-to-seed SD stands in for it" : "");
}

void report_verdict_line(const Report *rep, char *buf, size_t cap) {
    Buf b = {0};
    report_verdict_text(&b, rep);
    snprintf(buf, cap, "%s", b.s && !b.oom ? b.s : "(out of memory)");
    free(b.s);
}

// What the seed-aware verdict measured and why, in plain words (Markdown and HTML paragraphs;
// html escapes nothing: the text has no markup characters).
void report_seeds_explanation(Buf *b, const Report *rep) {
    const char *base = rep->runs[0].name;
    if (rep->n_seeds >= 2)
        bprintf(b, "Every run was trained %d times, at seeds ", rep->n_seeds);
    else
        bprintf(b, "Every run was trained once, at seed ");
    for (int k = 0; k < rep->n_seeds; k++)
        bprintf(b, "%s%llu", k ? (k + 1 == rep->n_seeds ? " and " : ", ") : "", (unsigned long long)rep->seeds[k]);
    bprintf(b, "; the %s run and the %s run at one seed start from the same weights and see the same batches in "
               "the same order with the same augmentation, so they differ only by the change being judged. Two "
               "trainings that differ in anything end in different models: even %s against itself at another seed "
               "moves the accuracy. ", base, rep->candidate_mode ? "candidate" : "AMP", base);
    if (rep->n_seeds >= 2) {
        const ReportSeeded *s = NULL;
        for (int i = 1; i < rep->n_runs && !s; i++)
            if (rep->runs[i].seeded.has) s = &rep->runs[i].seeded;
        if (s && isfinite(s->res.acc.base_sd))
            bprintf(b, "Here %s's own accuracy moved by a standard deviation of %.2f points from seed to seed (its "
                       "noise floor). ", base, 100 * s->res.acc.base_sd);
        bprintf(b, "The effect of the change is the mean of the per-seed differences; its 95%% interval counts both "
                   "sources of doubt, which seeds were trained (training noise, estimated from how much the "
                   "per-seed differences disagree) and which eval lines were drawn, so the verdict does not flip "
                   "with the seed. ");
    } else {
        bprintf(b, "With one seed the training noise was not measured: the interval of the per-line difference is "
                   "widened by an assumed seed-to-seed standard deviation of %.2f points of accuracy (%.2f of CER), "
                   "so an ordinary difference between two trainings is not called a regression, while a collapsed "
                   "run still is. Run with --seeds 3 or more to measure it. ",
                100 * (rep->assumed_seed_sd > 0 ? rep->assumed_seed_sd : SEEDS_PRIOR_SD_ACC), 100 * SEEDS_PRIOR_SD_CER);
    }
    bprintf(b, "The verdict is taken on that interval against the tolerance (±%.4g accuracy, ±%.4g CER): "
               "REGRESSION when the whole interval is worse by more than the tolerance, PASS when its worse end "
               "stays within it, INCONCLUSIVE in between, with the seeds or lines that would decide. A run that "
               "fails or diverges at a seed where %s trained is a REGRESSION. Method: docs/AMP.md, \"The "
               "seed-aware verdict\".", rep->tolerance, rep->cer_tolerance, base);
}

// ---- machine -------------------------------------------------------------------------------------

void report_machine_info(MachineInfo *mi) {
    memset(mi, 0, sizeof *mi);
    gethostname(mi->hostname, sizeof mi->hostname - 1);
    struct utsname u;
    if (uname(&u) == 0) snprintf(mi->os, sizeof mi->os, "%s %s %s", u.sysname, u.release, u.machine);
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10) == 0 && !mi->cpu_model[0]) {
                char *c = strchr(line, ':');
                if (c) {
                    c++;
                    while (*c == ' ') c++;
                    c[strcspn(c, "\n")] = '\0';
                    snprintf(mi->cpu_model, sizeof mi->cpu_model, "%s", c);
                }
            }
        }
        fclose(f);
    }
    mi->cpu_cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psize > 0) mi->memory_bytes = (int64_t)pages * psize;
    mi->gpus = ocr_cuda_device_count();
    snprintf(mi->backends, sizeof mi->backends, "%s", ocr_build_backends());
#ifdef __VERSION__
    snprintf(mi->compiler, sizeof mi->compiler, "%s %s",
#ifdef __clang__
             "clang",
#else
             "gcc",
#endif
             __VERSION__);
#endif
#ifdef NDEBUG
    snprintf(mi->build_type, sizeof mi->build_type, "optimized (NDEBUG)");
#else
    snprintf(mi->build_type, sizeof mi->build_type, "debug (assertions on)");
#endif
}

// ---- the three files ---------------------------------------------------------------------------------

ocr_status_t report_write(const Report *rep, const char *dir) {
    MachineInfo mi;
    report_machine_info(&mi);
    char p[4200];
    char *json = report_json(rep);
    if (!json) return ocr_set_error(OCR_ERR_OOM, "report.json: out of memory");
    snprintf(p, sizeof p, "%s/report.json", dir);
    ocr_status_t st = ocr_write_file_atomic(p, json, strlen(json));
    free(json);
    OCR_TRY(st);
    Buf b = {0};
    report_markdown(&b, rep, &mi);
    if (b.oom) return ocr_set_error(OCR_ERR_OOM, "report.md: out of memory");
    snprintf(p, sizeof p, "%s/report.md", dir);
    st = ocr_write_file_atomic(p, b.s, b.n);
    free(b.s);
    OCR_TRY(st);
    Buf h = {0};
    report_html(&h, rep, &mi);
    if (h.oom) return ocr_set_error(OCR_ERR_OOM, "report.html: out of memory");
    snprintf(p, sizeof p, "%s/report.html", dir);
    st = ocr_write_file_atomic(p, h.s, h.n);
    free(h.s);
    return st;
}

// ocrtrain compare -c CFG --out DIR [--seeds N|a,b,c] [--dtypes float16,bfloat16] [--levels O1,O2]
//                  [--candidate CFG2 [--candidate-o Key=value ...]] [--batch max|N] [--memory SIZE]
//                  [--max-steps N] [-o Key.path=value ...]
//
// Argument parsing and printing over training/compare.h: trains the baseline and each candidate
// (FP32 against AMP settings, or CFG against CFG2) at every seed, scores every run line by line
// and prints the seed-aware verdict (eval/seeds.h). Exit codes: 0 PASS, 3 REGRESSION, 4
// INCONCLUSIVE (the report says how many seeds and lines would decide), 1 runtime error, 2 usage.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "core/fileio.h"
#include "distributed/dist.h"
#include "training/training.h"

// The terminal summary: each leg's figures at the first seed, every seed's accuracy, each
// candidate's effect over the seeds with its interval, and the verdict sentence.
static void print_summary(const Report *rep) {
    printf("%-10s %6s %10s %12s %9s %14s\n", "run", "batch", "samples/s", "peak MiB", "skipped", "allreduce B");
    for (int i = 0; i < rep->n_runs; i++) {
        const TrainResult *r = &rep->runs[i].r;
        printf("%-10s %6d %10.1f %12.1f %9lld %14lld\n", rep->runs[i].name, r->config.batch_size,
               r->throughput.samples_per_s, (double)r->memory.stats.peak_total / 1048576.0,
               (long long)r->amp.skipped_steps, (long long)r->dist.allreduce_bytes_per_step);
    }
    if (rep->n_runs > 1 && rep->runs[0].r.dist.allreduce_bytes_per_step > 0)
        for (int i = 1; i < rep->n_runs; i++)
            printf("all-reduce bytes per step: %s %lld = %.3f x %s %lld (%d rank%s)\n", rep->runs[i].name,
                   (long long)rep->runs[i].r.dist.allreduce_bytes_per_step,
                   (double)rep->runs[i].r.dist.allreduce_bytes_per_step / (double)rep->runs[0].r.dist.allreduce_bytes_per_step,
                   rep->runs[0].name, (long long)rep->runs[0].r.dist.allreduce_bytes_per_step,
                   rep->runs[i].r.dist.world_size, rep->runs[i].r.dist.world_size == 1 ? "" : "s");
    printf("accuracy at each seed:\n%-10s", "seed");
    for (int i = 0; i < rep->n_runs; i++) printf(" %10s", rep->runs[i].name);
    printf("\n");
    for (int k = 0; k < rep->n_seeds; k++) {
        printf("%-10llu", (unsigned long long)rep->seeds[k]);
        for (int i = 0; i < rep->n_runs; i++) {
            const ReportSeedRun *s = &rep->runs[i].seeds[k];
            if (s->status == REPORT_SEED_FAILED) printf(" %10s", "FAILED");
            else printf(" %9.4f%s", s->acc, s->status == REPORT_SEED_DIVERGED ? "!" : " ");
        }
        printf("\n");
    }
    for (int i = 1; i < rep->n_runs; i++) {
        const ReportSeeded *sd = &rep->runs[i].seeded;
        if (!sd->has) {
            printf("%s vs %s: %s\n", rep->runs[i].name, rep->runs[0].name, sd->reason);
            continue;
        }
        const SeedsMetric *a = &sd->res.acc, *c = &sd->res.cer;
        printf("%s vs %s over %d seed%s x %lld lines: accuracy %+.4f [%+.4f, %+.4f] %s; CER %+.4f [%+.4f, %+.4f] %s",
               rep->runs[i].name, rep->runs[0].name, sd->pairs, sd->pairs == 1 ? "" : "s", (long long)sd->res.lines,
               a->delta, a->ci.lo, a->ci.hi, paired_verdict_name(a->verdict), c->delta, c->ci.lo, c->ci.hi,
               paired_verdict_name(c->verdict));
        if (isfinite(a->base_sd)) printf("; %s's own seed-to-seed SD %.4f (noise floor)", rep->runs[0].name, a->base_sd);
        else printf("; training noise not measured (1 seed): assumed seed SD %.4f", sd->res.prior_seed_sd_acc);
        printf("\n");
        if (sd->reason[0]) printf("  %s\n", sd->reason);
        // The general set (EvalGeneral): the same verdict on general text, next to the target's.
        const ReportSeeded *ge = &rep->runs[i].general_exact, *gn = &rep->runs[i].general_nospace;
        if (rep->has_general && ge->has && gn->has)
            printf("  general text (EvalGeneral): exact match %+.4f [%+.4f, %+.4f] %s; spaces ignored %+.4f [%+.4f, "
                   "%+.4f] %s\n", ge->res.acc.delta, ge->res.acc.ci.lo, ge->res.acc.ci.hi,
                   paired_verdict_name(ge->res.acc.verdict), gn->res.acc.delta, gn->res.acc.ci.lo, gn->res.acc.ci.hi,
                   paired_verdict_name(gn->res.acc.verdict));
    }
    for (int i = 0; rep->has_general && i < rep->n_runs; i++) {
        char gl[512];
        report_forgetting_line(rep, i, gl, sizeof gl);
        if (gl[0]) printf("%s\n", gl);
    }
    char line[2048];
    report_verdict_line(rep, line, sizeof line);
    printf("verdict: %s\n", line);
}

// --candidate-o K=V (repeatable; a value may hold commas, so it is no CLI_LIST): its pairs go
// into the candidate's overrides, the other arguments into rest (argc entries) for the table.
// Returns rest's count, or -1 after a usage error (printed).
static int take_candidate_overrides(int argc, char **argv, char **rest, CliConfigArgs *cand) {
    int w = 0;
    for (int i = 0; i < argc; i++) {
        if (i == 0 || strcmp(argv[i], "--candidate-o") != 0) {
            rest[w++] = argv[i];
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "ocrtrain compare: --candidate-o needs Key.path=value\n");
            return -1;
        }
        char *sub[2] = {"-o", argv[++i]};
        if (cli_take_config_arg(cand, 2, sub, 0) < 0) {
            fprintf(stderr, "ocrtrain compare: --candidate-o: %s\n", ocr_last_error());
            return -1;
        }
    }
    rest[w] = NULL;
    return w;
}

int cmd_compare(int argc, char **argv) {
    CliConfigArgs ca = {0}, cand = {0};
    const char *out_dir = NULL, *batch_arg = NULL, *seeds_arg = NULL, *cand_path = NULL;
    CliList dtypes = {0}, levels = {0};
    int64_t memory = 0, max_steps = 0;
    uint64_t seed_offset = 0;
    const CliFlag flags[] = {
        {CLI_CONFIG, .dest = &ca, .required = 1, .help = "the baseline's config (JSON or PaddleOCR's .yml)"},
        {CLI_STRING, "--out", .meta = "DIR", .dest = &out_dir, .required = 1,
         .help = "report.{json,md,html}, compare.json and runs/<leg>/seed-<s>/"},
        {CLI_STRING, "--seeds", .meta = "N|a,b,c", .dest = &seeds_arg,
         .help = "train every leg at N seeds (Global.seed, +1, ...) or at the listed seeds (default:\n"
                 "Global.compare_seeds, else 3); run k of every leg shares initialisation, data order and\n"
                 "augmentation, so the verdict can tell the change's effect from training noise"},
        {CLI_LIST, "--dtypes", .meta = "float16,bfloat16", .dest = &dtypes, .choices = "float16|bfloat16",
         .help = "AMP dtypes to compare with FP32 (default: Global.amp_dtype, else float16)"},
        {CLI_LIST, "--levels", .meta = "O1,O2", .dest = &levels, .choices = "O1|O2",
         .help = "AMP levels (default: Global.amp_level, else O2)"},
        {CLI_STRING, "--candidate", .meta = "CFG2", .dest = &cand_path,
         .help = "compare two trainings instead of FP32 with AMP: CFG (the baseline) against CFG2 (other\n"
                 "data, augmentation, learning rate, ...); -o applies to both, --candidate-o K=V (repeatable)\n"
                 "to CFG2 only"},
        {CLI_UINT64, "--candidate-seed-offset", .meta = "K", .dest = &seed_offset,
         .help = "the candidate's run k trains at seed k + K: with CFG2 = CFG, the verdict's own check (an\n"
                 "A/A run: the same training at other seeds is no regression)"},
        {CLI_STRING, "--batch", .meta = "max|N", .dest = &batch_arg,
         .help = "max: each run at the largest batch its precision fits in --memory (capacity planner),\n"
                 "learning rate scaled linearly; N: every run at batch N (also scaled)"},
        {CLI_SIZE, "--memory", .meta = "SIZE", .dest = &memory,
         .help = "the budget for --batch max (16G, 512MiB ...); required on the CPU (on a GPU: 90% of its\n"
                 "free memory)"},
        {CLI_INT64, "--max-steps", .meta = "N", .dest = &max_steps, .help = "stop every run after N iterations (quick checks)"},
        {0}};
    const CliCommand cmd = {
        "compare", flags,
        .epilog = "Started again on the same DIR it reuses every finished run (an interrupted or extended comparison\n"
                  "resumes); a changed config is refused, naming the key. The verdict: exit 0 PASS when the 95% interval\n"
                  "of the change's effect on accuracy and CER, training noise between seeds included, lies within\n"
                  "Global.accuracy_tolerance / Global.cer_tolerance (default 0.005 each) of no change or better; 3\n"
                  "REGRESSION when it lies beyond it on the worse side, or a candidate run failed or diverged; 4\n"
                  "INCONCLUSIVE when the seeds and lines cannot decide (the report says how many would).\n"};
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    int nrest = rest ? take_candidate_overrides(argc, argv, rest, &cand) : -1;
    if (nrest < 0) {
        free(rest);
        cli_config_args_free(&cand);
        cli_usage(&cmd, stderr);
        return 2;
    }
    int rc0 = cli_parse(&cmd, nrest, rest);
    free(rest);  // the table's strings point into argv itself
    if (rc0 != CLI_CONTINUE) {
        cli_config_args_free(&cand);
        return rc0;
    }
    int code = 2;
    cand.config = cand_path;
    if (cand.n_overrides > 0 && !cand.config) {
        cli_config_args_free(&cand);
        return cli_usage_error(&cmd, "--candidate-o needs --candidate CFG2");
    }
    if (seed_offset && !cand.config) {
        cli_config_args_free(&cand);
        return cli_usage_error(&cmd, "--candidate-seed-offset needs --candidate CFG2");
    }
    if (cand.config && (dtypes.n || levels.n)) {
        cli_config_args_free(&cand);
        return cli_usage_error(&cmd, "--candidate compares two configs as they are: put the precision in them "
                                     "(Global.use_amp, amp_dtype, amp_level) instead of --dtypes/--levels");
    }
    CompareOptions o = {0};
    o.out_dir = out_dir;
    o.dtypes = dtypes.items;
    o.n_dtypes = dtypes.n;
    o.levels = levels.items;
    o.n_levels = levels.n;
    o.memory = memory;
    o.max_steps = max_steps;
    if (batch_arg) {
        if (strcmp(batch_arg, "max") == 0) {
            o.batch_max = 1;
        } else {
            char *end;
            long b = strtol(batch_arg, &end, 10);
            if (*end || b < 1 || b > 1 << 16) {
                cli_config_args_free(&cand);
                return cli_usage_error(&cmd, "--batch takes max or a positive integer, got '%s'", batch_arg);
            }
            o.batch_fixed = (int)b;
        }
    }

    OcrConfig *cfg = NULL, *ccfg = NULL;
    RunConfig rc, crc;
    ocr_status_t st = run_config_load(&cfg, &rc, ca.config, (const char *const *)ca.overrides, ca.n_overrides,
                                      RUN_NEED_TRAIN | RUN_NEED_EVAL);
    if (st == OCR_OK && cand.config) {
        // The shared -o first, then the candidate's own.
        const char *ov[2 * CLI_MAX_OVERRIDES];
        int nov = 0;
        for (int i = 0; i < ca.n_overrides; i++) ov[nov++] = ca.overrides[i];
        for (int i = 0; i < cand.n_overrides; i++) ov[nov++] = cand.overrides[i];
        st = run_config_load(&ccfg, &crc, cand.config, ov, nov, RUN_NEED_TRAIN | RUN_NEED_EVAL);
        if (st != OCR_OK) st = ocr_wrap_error(st, "--candidate %s", cand.config);
    }
    if (st == OCR_OK) {
        const char *arg = seeds_arg ? seeds_arg : rc.compare_seeds;
        st = compare_parse_seeds(arg, rc.seed, seeds_arg ? "--seeds" : "Global.compare_seeds", o.seeds, &o.n_seeds);
    }
    if (st == OCR_OK && o.batch_max && memory == 0) {
        st = compare_default_memory(&rc, &o.memory);
    }
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain compare: %s\n", ocr_last_error());
        code = cli_exit_code(st);
        goto done;
    }
    o.candidate = ccfg;
    o.candidate_seed_offset = seed_offset;
    o.candidate_path = cand.config;
    o.assumed_seed_sd = rc.compare_seed_sd;
    o.progress = stderr;
    o.config_path = ca.config;
    char command[2048];
    size_t used = 0;
    for (int i = 0; i < argc && used + 2 < sizeof command; i++)
        used += (size_t)snprintf(command + used, sizeof command - used, "%s%s", i ? " " : "ocrtrain ", argv[i]);
    o.command = command;

    Report *rep = calloc(1, sizeof *rep);
    if (!rep) st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
    if (st == OCR_OK) st = compare_run(cfg, &rc, &o, rep);
    const int is_root = ocr_dist_detect_world().rank == 0;
    if (st == OCR_OK && is_root) st = report_write(rep, out_dir);
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain compare: %s\n", ocr_last_error());
        code = cli_exit_code(st);
    } else if (!is_root) {
        code = report_exit_code(rep);
    } else {
        print_summary(rep);
        printf("report: %s/report.html (also report.md, report.json)\n", out_dir);
        code = report_exit_code(rep);
    }
    compare_report_free(rep);
    free(rep);
done:
    if (ccfg) ocr_config_free(ccfg);
    if (cfg) ocr_config_free(cfg);
    cli_config_args_free(&cand);
    cli_free(&cmd);
    return code;
}

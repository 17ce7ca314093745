// ocrtrain sensitivity -c CFG --weights W [--dtype float16|bfloat16] [--level O1|O2] [--batches N]
//                      [--batch-size N] [--depth K] [--threshold X] [--acc-tolerance X]
//                      [--max-groups K] [--no-types] [--out DIR] [--compare [--max-steps N]] [-o ...]
//
// Which layers to keep in float32 when AMP costs accuracy (training/sensitivity.h): every layer
// group and op type measured alone in the low precision and alone kept in float32 against the
// float32 forward on the first Eval batches, ranked; the shortest list that restores the logits
// proposed as Global.amp_fp32_layers / Global.amp_custom_black_list (DIR/proposal.yml,
// DIR/config_with_proposal.json, the -o line printed); --compare trains float32, AMP and AMP with
// the proposal side by side.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "training/training.h"

// "0.0123", or "non-finite (N)".
static const char *fmt_e(char *buf, size_t cap, const SensMeasure *m) {
    if (m->nonfinite) snprintf(buf, cap, "nonfinite:%lld", (long long)m->nonfinite);
    else snprintf(buf, cap, "%.3g", m->rel_l2);
    return buf;
}

static const char *fmt_score(char *buf, size_t cap, double s) {
    if (isinf(s)) snprintf(buf, cap, "inf");
    else snprintf(buf, cap, "%.3g", s);
    return buf;
}

static void print_groups(const SensResult *r, const int *order, int n, const char *title) {
    char a[32], b[32], s[32];
    printf("\n%-4s %-40s %4s %6s %9s | %-17s %7s %4s | %-17s %7s %4s\n", "rank", title, "ops", "%flops", "score",
           "only it low", "acc", "chg", "it in float32", "acc", "chg");
    for (int k = 0; k < n; k++) {
        const SensGroup *g = &r->groups[order[k]];
        printf("%4d %-40.40s %4d %5.1f%% %9s | %-17s %7.4f %4lld | %-17s %7.4f %4lld\n", g->rank, g->name, g->n_lowp,
               r->total_flops > 0 ? 100.0 * g->lowp_flops / r->total_flops : 0.0, fmt_score(s, sizeof s, g->score),
               fmt_e(a, sizeof a, &g->low_only), g->low_only.acc, (long long)g->low_only.changed,
               fmt_e(b, sizeof b, &g->fp32_kept), g->fp32_kept.acc, (long long)g->fp32_kept.changed);
    }
}

// One shell word: single-quoted when it holds anything the shell would read.
static void print_shell_word(const char *s) {
    if (strpbrk(s, " \t\"'*?[]{}$`\\|&;<>()!#~")) {
        putchar('\'');
        for (; *s; s++) {
            if (*s == '\'') fputs("'\\''", stdout);
            else putchar(*s);
        }
        putchar('\'');
    } else {
        fputs(s, stdout);
    }
}

static int parse_double(const char *flag, const char *v, double *out) {
    if (!v) return 1;
    char *end;
    double d = strtod(v, &end);
    if (end == v || *end || !isfinite(d)) {
        fprintf(stderr, "ocrtrain sensitivity: %s needs a number, got '%s'\n", flag, v);
        return 0;
    }
    *out = d;
    return 1;
}

int cmd_sensitivity(int argc, char **argv) {
    SensOptions o;
    sens_options_default(&o);
    CliConfigArgs ca = {0};
    const char *weights = NULL, *dtype_s = NULL, *level_s = NULL, *out_dir = NULL, *thr_s = NULL, *acc_s = NULL;
    int no_types = 0, compare = 0;
    int64_t max_steps = 0;
    const CliFlag flags[] = {
        {CLI_CONFIG, .dest = &ca, .required = 1, .help = "the config (JSON or PaddleOCR's .yml); its Eval split is measured on"},
        {CLI_STRING, "--weights", .meta = "W", .dest = &weights, .required = 1,
         .help = "a .safetensors file or a checkpoint directory: the trained or pretrained model"},
        {CLI_STRING, "--dtype", .dest = &dtype_s, .choices = "float16|bfloat16",
         .help = "the low precision (default: Global.amp_dtype, else float16)"},
        {CLI_STRING, "--level", .dest = &level_s, .choices = "O1|O2",
         .help = "the AMP level (default: Global.amp_level, else O2)"},
        {CLI_INT, "--batches", .meta = "N", .dest = &o.batches, .lo = 1, .hi = 100000,
         .help = "measure on the first N Eval batches (default 2)"},
        {CLI_INT, "--batch-size", .meta = "N", .dest = &o.batch_size, .lo = 0, .hi = 65536,
         .help = "lines per batch (default 8; 0: Eval.loader.batch_size_per_card)"},
        {CLI_INT, "--depth", .meta = "K", .dest = &o.depth, .lo = 1, .hi = 32,
         .help = "layer groups: the first K levels of the layer names (default 2: blocks, e.g.\n"
                 "backbone.blocks5.3, neck.encoder.svtr_block.0, head.fc)"},
        {CLI_STRING, "--threshold", .meta = "X", .dest = &thr_s,
         .help = "relative L2 distance of the logits from float32 the proposal must reach (default:\n"
                 "32 unit roundoffs, 0.0156 for float16 and 0.125 for bfloat16)"},
        {CLI_STRING, "--acc-tolerance", .meta = "X", .dest = &acc_s,
         .help = "accuracy drop on those lines the proposal may keep (default 0)"},
        {CLI_INT, "--max-groups", .meta = "K", .dest = &o.max_groups, .lo = 1, .hi = 64,
         .help = "the longest list of layer groups tried (default 4)"},
        {CLI_BOOL, "--no-types", .dest = &no_types, .help = "do not measure op types (no black-list candidates)"},
        {CLI_STRING, "--out", .meta = "DIR", .dest = &out_dir,
         .help = "sensitivity.json, proposal.yml, config_with_proposal.json (default:\n"
                 "Global.save_model_dir/sensitivity)"},
        {CLI_BOOL, "--compare", .dest = &compare,
         .help = "then train float32, AMP and AMP with the proposal from the weights (same seed)\n"
                 "and show accuracy, samples/s and peak memory side by side (no proposal: the first two)"},
        {CLI_INT64, "--max-steps", .meta = "N", .dest = &max_steps,
         .help = "--compare: stop every run after N iterations (default: the config's schedule)"},
        {0}};
    const CliCommand cmd = {
        "sensitivity", flags,
        .epilog = "Nothing is trained to rank: each variant is the given weights run under a policy that puts one\n"
                  "layer group (or op type) alone in the low precision, or keeps it alone in float32.\n"
                  "score = max(E(only it low), E(AMP) - E(it in float32)), E = ||z - z32|| / ||z32|| of the\n"
                  "logits (inf: non-finite logits). docs/AMP.md, \"Finding the layers to keep in FP32\".\n"};
    int rc0 = cli_parse(&cmd, argc, argv);
    if (rc0 != CLI_CONTINUE) return rc0;
    if (!parse_double("--threshold", thr_s, &o.threshold) || !parse_double("--acc-tolerance", acc_s, &o.acc_tolerance)) {
        cli_free(&cmd);
        return 2;
    }
    if (max_steps && !compare) return cli_usage_error(&cmd, "--max-steps applies to --compare");
    o.weights = weights;
    o.types = !no_types;
    o.progress = stderr;

    OcrConfig *cfg;
    RunConfig rc;
    ocr_status_t st = run_config_load(&cfg, &rc, ca.config, (const char *const *)ca.overrides, ca.n_overrides,
                                      RUN_NEED_EVAL | (compare ? RUN_NEED_TRAIN : 0));
    cli_free(&cmd);
    if (st != OCR_OK) return cli_fail_status(&cmd, st);
    // The precision: the flags, else the config's own AMP keys.
    const char *cd, *cl;
    ocr_config_get_string(cfg, "Global.amp_dtype", "float16", &cd);
    ocr_config_get_string(cfg, "Global.amp_level", "O2", &cl);
    const char *dname = dtype_s ? dtype_s : cd, *lname = level_s ? level_s : cl;
    // (run_config_load validated the config's values; O0 is the one the command cannot use.)
    int code = 0;
    o.dtype = strcmp(dname, "bfloat16") == 0 ? OCR_BF16 : OCR_F16;
    if (strcmp(lname, "O1") == 0) {
        o.level = OCR_AMP_O1;
    } else if (strcmp(lname, "O2") == 0) {
        o.level = OCR_AMP_O2;
    } else {
        fprintf(stderr, "ocrtrain sensitivity: --level must be O1 or O2 (Global.amp_level is %s)\n", lname);
        ocr_config_free(cfg);
        return 2;
    }
    char outbuf[4200];
    if (!out_dir) {
        snprintf(outbuf, sizeof outbuf, "%s/sensitivity", rc.save_model_dir ? rc.save_model_dir : "./output");
        out_dir = outbuf;
    }
    training_set_threads(rc.threads);

    SensResult r;
    st = sensitivity_run(cfg, &rc, &o, &r);
    if (st == OCR_OK) st = sensitivity_write(&r, out_dir);
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain sensitivity: %s\n", ocr_last_error());
        ocr_config_free(cfg);
        return cli_exit_code(st);
    }

    char a[32], b[32];
    int forwards = 2 + r.n_steps - (r.n_steps > 0);
    for (int k = 0; k < r.n_groups; k++) forwards += r.groups[k].measured ? 2 : 0;
    printf("sensitivity: %s %s against float32 on %lld Eval lines (%d batch%s), depth %d: %d layer groups, %d op "
           "types, %d forwards in %.1f s\n",
           o.dtype == OCR_BF16 ? "bfloat16" : "float16", amp_level_name(o.level), (long long)r.lines, r.batches,
           r.batches == 1 ? "" : "es", r.depth, r.n_ranked_layers, r.n_ranked_types, forwards * r.batches, r.seconds);
    printf("float32: accuracy %.4f, CTC loss %.4f\n", r.fp32.acc, r.fp32.loss);
    printf("AMP:     rel-L2 %s, max-abs %.3g, accuracy %.4f, %lld line%s decoded differently, CTC loss %+.4g: %s\n",
           fmt_e(a, sizeof a, &r.amp), r.amp.max_abs, r.amp.acc, (long long)r.amp.changed, r.amp.changed == 1 ? "" : "s",
           r.amp.loss - r.fp32.loss,
           r.amp_passes ? "within the threshold" : "NOT within the threshold");
    print_groups(&r, r.layer_rank, r.n_ranked_layers, "layer group");
    if (r.n_ranked_types) print_groups(&r, r.type_rank, r.n_ranked_types, "op type");
    printf("(columns: low-precision ops and their share of the FLOPs; E and accuracy with only the group low, then with "
           "only it in float32; chg: lines decoded differently from float32)\n\n");

    if (!r.proposal_needed) {
        printf("proposal: none needed: AMP is within rel-L2 %g and %g accuracy of float32 on these lines\n", r.threshold,
               r.acc_tolerance);
    } else {
        printf("proposal: keep ");
        if (r.black_type >= 0) {
            printf("every %s op in float32 (Global.amp_custom_black_list)", r.groups[r.black_type].name);
        } else {
            for (int j = 0; j < r.n_fp32_groups; j++)
                printf("%s%s", j ? ", " : "", r.groups[r.fp32_groups[j]].name);
            printf(" in float32 (Global.amp_fp32_layers)");
        }
        printf(": rel-L2 %s -> %s, accuracy %.4f -> %.4f; %.1f%% of the FLOPs back in float32\n",
               fmt_e(a, sizeof a, &r.amp), fmt_e(b, sizeof b, &r.proposed), r.amp.acc, r.proposed.acc,
               r.total_flops > 0 ? 100.0 * r.proposal_fp32_flops / r.total_flops : 0.0);
        if (!r.proposal_passes)
            printf("warning: neither a list of at most %d layer groups nor one op type (each moving at most half of the "
                   "low-precision FLOPs back to float32) reaches rel-L2 %g / %g accuracy; this is the closest (the low "
                   "precision itself may be the problem: try the other dtype or O1)\n",
                   o.max_groups, r.threshold, r.acc_tolerance);
        char **ov;
        int n;
        if (sensitivity_proposal_overrides(&r, &ov, &n) == OCR_OK) {
            printf("  -o");
            for (int k = 0; k < n; k++) {
                putchar(' ');
                print_shell_word(ov[k]);
            }
            putchar('\n');
            sensitivity_overrides_free(ov, n);
        }
        printf("  or -c %s/config_with_proposal.json (the whole config); %s/proposal.yml holds the Global keys\n",
               out_dir, out_dir);
    }
    printf("details: %s/sensitivity.json\n", out_dir);
    fflush(stdout);

    if (compare) {
        SensCompare cmp;
        st = sensitivity_compare(&r, weights, out_dir, max_steps, stderr, &cmp);
        if (st != OCR_OK) {
            fprintf(stderr, "ocrtrain sensitivity: --compare: %s\n", ocr_last_error());
            code = cli_exit_code(st);
        } else {
            printf("\n%-14s %9s %8s %10s %10s %8s %10s\n", "trained", "accuracy", "CER", "samples/s", "peak MiB",
                   "skipped", "final loss");
            for (int i = 0; i < cmp.n_runs; i++) {
                const SensCompareRun *c = &cmp.runs[i];
                printf("%-14s %9.4f %8.4f %10.1f %10.1f %8lld %10.4f\n", c->name, c->acc, c->cer, c->samples_per_s,
                       (double)c->peak_bytes / 1048576.0, (long long)c->skipped_steps, c->final_loss);
            }
            if (cmp.n_runs == 3) {
                const SensCompareRun *f = &cmp.runs[0], *am = &cmp.runs[1], *p = &cmp.runs[2];
                printf("the proposal: accuracy %+.4f against AMP (AMP %+.4f against float32); samples/s %+.1f%% and "
                       "peak memory %+.1f MiB against AMP\n",
                       p->acc - am->acc, am->acc - f->acc,
                       am->samples_per_s > 0 ? 100.0 * (p->samples_per_s / am->samples_per_s - 1) : 0.0,
                       (double)(p->peak_bytes - am->peak_bytes) / 1048576.0);
            }
        }
    }
    sensitivity_result_free(&r);
    ocr_config_free(cfg);
    return code;
}

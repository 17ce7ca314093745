// The commands' one argument parser (cli/flags.h): every kind of flag, bad and missing values,
// unknown arguments, required entries, -o with several assignments, the generated usage text,
// and the helpers commands end with.
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/flags.h"
#include "tests/common/test_util.h"

// ---- running the parser with stdout and stderr captured --------------------------------------

typedef struct {
    int rc;
    char out[8192], err[8192];
} Run;

static void read_back(int fd, char *buf, size_t cap) {
    lseek(fd, 0, SEEK_SET);
    ssize_t n = read(fd, buf, cap - 1);
    buf[n > 0 ? n : 0] = '\0';
}

typedef int (*parse_fn)(const CliCommand *c, int argc, char **argv);

static void capture(Run *r, const CliCommand *c, const char *const *args, parse_fn fn) {
    int argc = 0;
    while (args[argc]) argc++;
    char po[1024], pe[1024];
    int fo = ocr_test_tmpfile(po, sizeof po, "ocr_flags_out_"), fe = ocr_test_tmpfile(pe, sizeof pe, "ocr_flags_err_");
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2);
    dup2(fo, 1);
    dup2(fe, 2);
    r->rc = fn(c, argc, (char **)args);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    read_back(fo, r->out, sizeof r->out);
    read_back(fe, r->err, sizeof r->err);
    close(fo);
    close(fe);
    unlink(po);
    unlink(pe);
}

static void run(Run *r, const CliCommand *c, const char *const *args) { capture(r, c, args, cli_parse); }

#define HAS(text, needle) ck_assert_msg(strstr((text), (needle)) != NULL, "no \"%s\" in:\n%s", (needle), (text))
#define STARTS(text, prefix) \
    ck_assert_msg(strncmp((text), (prefix), strlen(prefix)) == 0, "not starting with \"%s\":\n%s", (prefix), (text))
#define LACKS(text, needle) ck_assert_msg(strstr((text), (needle)) == NULL, "\"%s\" in:\n%s", (needle), (text))

// ---- one table with every kind ---------------------------------------------------------------

typedef struct {
    CliConfigArgs ca;
    int json, batch, height;
    int64_t steps, memory, verify;
    uint64_t seed;
    const char *weights, *section;
    CliList dtypes, inputs;
    CliFlag flags[16];
    CliCommand cmd;
} Demo;

static void demo_init(Demo *d) {
    memset(d, 0, sizeof *d);
    d->batch = 6;
    d->height = 48;
    d->section = "Train";
    const CliFlag flags[] = {
        {CLI_CONFIG, .dest = &d->ca, .required = 1, .help = "the config"},
        {CLI_STRING, "--weights", .meta = "W", .dest = &d->weights, .required = 1,
         .help = "the weights\nsecond line of help"},
        {CLI_BOOL, "--json", .dest = &d->json, .help = "one JSON object"},
        {CLI_INT, "--batch", "-b", .meta = "N", .dest = &d->batch, .help = "images per batch"},
        {CLI_INT, "--height", .meta = "H", .dest = &d->height, .lo = 16, .hi = 256, .help = "line height"},
        {CLI_INT64, "--max-steps", .meta = "N", .dest = &d->steps, .help = "stop after N steps"},
        {CLI_INT64, "--verify", .meta = "B", .dest = &d->verify, .optional_value = 1, .implicit = 8,
         .help = "check the plan"},
        {CLI_UINT64, "--seed", .meta = "S", .dest = &d->seed, .help = "the seed"},
        {CLI_SIZE, "--memory", .meta = "SIZE", .dest = &d->memory, .help = "the budget"},
        {CLI_STRING, "--section", .dest = &d->section, .choices = "Train|Eval", .help = "the section"},
        {CLI_LIST, "--dtypes", .meta = "LIST", .dest = &d->dtypes, .choices = "float16|bfloat16",
         .help = "AMP dtypes"},
        {CLI_POSITIONAL, .meta = "INPUT", .dest = &d->inputs, .required = 1,
         .missing = "at least one INPUT (IMAGE or folder)", .help = "an image or a folder"},
        {0}};
    memcpy(d->flags, flags, sizeof flags);
    d->cmd = (CliCommand){.name = "demo", .flags = d->flags, .epilog = "the last words\n"};
}

START_TEST(test_every_kind) {
    Demo d;
    demo_init(&d);
    const char *a[] = {"demo", "-c", "cfg.yml", "--weights", "w.safetensors", "--json", "-b", "32", "--height", "16",
                       "--max-steps", "9000000000", "--verify", "4", "--seed", "18446744073709551615", "--memory",
                       "1.5g", "--section", "Eval", "--dtypes", "float16,,bfloat16,", "x.png", "-", "dir", NULL};
    Run r;
    run(&r, &d.cmd, a);
    ck_assert_msg(r.rc == CLI_CONTINUE, "rc %d: %s", r.rc, r.err);
    ck_assert_str_eq(r.out, "");
    ck_assert_str_eq(r.err, "");
    ck_assert_str_eq(d.ca.config, "cfg.yml");
    ck_assert_str_eq(d.weights, "w.safetensors");
    ck_assert_int_eq(d.json, 1);
    ck_assert_int_eq(d.batch, 32);
    ck_assert_int_eq(d.height, 16);
    ck_assert(d.steps == 9000000000LL);
    ck_assert(d.verify == 4);
    ck_assert(d.seed == UINT64_MAX);
    ck_assert(d.memory == 3LL << 29);
    ck_assert_str_eq(d.section, "Eval");
    ck_assert_int_eq(d.dtypes.n, 2);  // empty items dropped
    ck_assert_str_eq(d.dtypes.items[0], "float16");
    ck_assert_str_eq(d.dtypes.items[1], "bfloat16");
    ck_assert_int_eq(d.inputs.n, 3);  // "-" is a word, not a flag
    ck_assert_str_eq(d.inputs.items[0], "x.png");
    ck_assert_str_eq(d.inputs.items[1], "-");
    ck_assert_str_eq(d.inputs.items[2], "dir");
    cli_free(&d.cmd);
    ck_assert_int_eq(d.dtypes.n, 0);
    ck_assert_ptr_null(d.dtypes.items);
    ck_assert_int_eq(d.inputs.n, 0);
    cli_free(&d.cmd);  // twice is harmless
}
END_TEST

START_TEST(test_defaults_stay_and_last_value_wins) {
    Demo d;
    demo_init(&d);
    const char *a[] = {"demo", "--weights", "a", "-c", "x.json", "in", "--batch", "2", "--weights", "b",
                       "--dtypes", "float16", "--dtypes", "bfloat16", "--batch", "3", NULL};
    Run r;
    run(&r, &d.cmd, a);
    ck_assert_msg(r.rc == CLI_CONTINUE, "%s", r.err);
    ck_assert_str_eq(d.weights, "b");
    ck_assert_int_eq(d.batch, 3);
    ck_assert_int_eq(d.height, 48);
    ck_assert_str_eq(d.section, "Train");
    ck_assert(d.memory == 0 && d.steps == 0 && d.verify == 0 && d.seed == 0 && d.json == 0);
    ck_assert_int_eq(d.dtypes.n, 1);
    ck_assert_str_eq(d.dtypes.items[0], "bfloat16");
    cli_free(&d.cmd);
}
END_TEST

START_TEST(test_optional_value) {
    Demo d;
    demo_init(&d);
    const char *a[] = {"demo", "-c", "x", "--weights", "w", "--verify", "--json", "in", NULL};
    Run r;
    run(&r, &d.cmd, a);
    ck_assert_msg(r.rc == CLI_CONTINUE, "%s", r.err);
    ck_assert(d.verify == 8 && d.json == 1);
    ck_assert_int_eq(d.inputs.n, 1);
    cli_free(&d.cmd);
    // Last on the line: the implicit value too.
    demo_init(&d);
    const char *b[] = {"demo", "-c", "x", "--weights", "w", "in", "--verify", NULL};
    run(&r, &d.cmd, b);
    ck_assert_msg(r.rc == CLI_CONTINUE, "%s", r.err);
    ck_assert(d.verify == 8);
    cli_free(&d.cmd);
    // A value that starts with a digit is taken, and checked.
    demo_init(&d);
    const char *c[] = {"demo", "-c", "x", "--weights", "w", "in", "--verify", "0", NULL};
    run(&r, &d.cmd, c);
    ck_assert_int_eq(r.rc, 2);
    HAS(r.err, "ocrtrain demo: --verify needs a positive integer, got '0'");
}
END_TEST

START_TEST(test_config_args_with_several_assignments) {
    Demo d;
    demo_init(&d);
    const char *a[] = {"demo", "-c", "cfg.yml", "-o", "Global.epoch_num=10", "Optimizer.lr.learning_rate=5e-4",
                       "Global.use_gpu=False", "--weights", "w", "--use_amp", "True", "--amp_dtype=bfloat16",
                       "-o", "Train.loader.num_workers=2", "in.png", NULL};
    Run r;
    run(&r, &d.cmd, a);
    ck_assert_msg(r.rc == CLI_CONTINUE, "%s", r.err);
    ck_assert_int_eq(d.ca.n_overrides, 6);
    ck_assert_str_eq(d.ca.overrides[0], "Global.epoch_num=10");
    ck_assert_str_eq(d.ca.overrides[1], "Optimizer.lr.learning_rate=5e-4");
    ck_assert_str_eq(d.ca.overrides[2], "Global.use_gpu=false");  // Python's False
    ck_assert_str_eq(d.ca.overrides[3], "Global.use_amp=true");
    ck_assert_str_eq(d.ca.overrides[4], "Global.amp_dtype=bfloat16");
    ck_assert_str_eq(d.ca.overrides[5], "Train.loader.num_workers=2");
    ck_assert_str_eq(d.weights, "w");
    ck_assert_int_eq(d.inputs.n, 1);  // "in.png" has no '=': not an assignment
    ck_assert_str_eq(d.inputs.items[0], "in.png");
    cli_free(&d.cmd);
    ck_assert_int_eq(d.ca.n_overrides, 0);
    // cli_take_config_arg's own messages.
    demo_init(&d);
    const char *b[] = {"demo", "-c", "x", "-o", "--json", NULL};
    run(&r, &d.cmd, b);
    ck_assert_int_eq(r.rc, 2);
    HAS(r.err, "ocrtrain demo: -o needs Key.path=value");
    demo_init(&d);
    const char *c[] = {"demo", "--weights", "w", "-c", NULL};
    run(&r, &d.cmd, c);
    ck_assert_int_eq(r.rc, 2);
    HAS(r.err, "ocrtrain demo: -c needs a file");
}
END_TEST

START_TEST(test_bad_values) {
    static const struct {
        const char *flag, *value, *message;
    } cases[] = {
        {"--batch", "0", "ocrtrain demo: --batch needs a positive integer, got '0'\n"},
        {"--batch", "12x", "ocrtrain demo: --batch needs a positive integer, got '12x'\n"},
        {"--batch", "", "ocrtrain demo: --batch needs a positive integer, got ''\n"},
        {"-b", "99999999999", "ocrtrain demo: -b needs a positive integer, got '99999999999'\n"},
        {"--height", "8", "ocrtrain demo: --height needs an integer 16..256, got '8'\n"},
        {"--height", "257", "ocrtrain demo: --height needs an integer 16..256, got '257'\n"},
        {"--max-steps", "-3", "ocrtrain demo: --max-steps needs a positive integer, got '-3'\n"},
        {"--seed", "-1", "ocrtrain demo: --seed needs a non-negative integer, got '-1'\n"},
        {"--seed", "99999999999999999999", "ocrtrain demo: --seed needs a non-negative integer, got '99999999999999999999'\n"},
        {"--memory", "lots", "ocrtrain demo: --memory: cannot read 'lots' (examples: 16G, 512MiB, 1000000)\n"},
        {"--memory", "16Q", "ocrtrain demo: --memory: cannot read '16Q'"},
        {"--section", "Test", "ocrtrain demo: --section must be Train or Eval, got 'Test'\n"},
        {"--dtypes", "float16,float8", "ocrtrain demo: --dtypes: each item must be float16 or bfloat16, got 'float8'\n"},
        {"--dtypes", ",,", "ocrtrain demo: --dtypes needs a comma-separated list, got ',,'\n"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        Demo d;
        demo_init(&d);
        const char *a[] = {"demo", "-c", "x", "--weights", "w", cases[k].flag, cases[k].value, "in", NULL};
        Run r;
        run(&r, &d.cmd, a);
        ck_assert_msg(r.rc == 2, "%s %s: rc %d", cases[k].flag, cases[k].value, r.rc);
        ck_assert_msg(strncmp(r.err, cases[k].message, strlen(cases[k].message)) == 0, "%s %s: got\n%s",
                      cases[k].flag, cases[k].value, r.err);
        LACKS(r.err, "usage:");  // a bad value is not a usage problem
        ck_assert_str_eq(r.out, "");
        // What the table owns was released on the way out.
        ck_assert_int_eq(d.ca.n_overrides, 0);
        ck_assert_int_eq(d.inputs.n, 0);
        ck_assert_ptr_null(d.dtypes.items);
    }
}
END_TEST

START_TEST(test_unknown_and_missing) {
    Demo d;
    demo_init(&d);
    Run r;
    const char *a[] = {"demo", "-c", "x", "--weights", "w", "--bogus", "in", NULL};
    run(&r, &d.cmd, a);
    ck_assert_int_eq(r.rc, 2);
    STARTS(r.err, "ocrtrain demo: unknown argument '--bogus'\nusage: ocrtrain demo ");
    demo_init(&d);
    const char *b[] = {"demo", "-c", "x", "--weights", "w", "-x", NULL};
    run(&r, &d.cmd, b);
    ck_assert_int_eq(r.rc, 2);
    HAS(r.err, "ocrtrain demo: unknown argument '-x'\n");
    // A value flag last on the line.
    demo_init(&d);
    const char *c[] = {"demo", "-c", "x", "in", "--weights", NULL};
    run(&r, &d.cmd, c);
    ck_assert_int_eq(r.rc, 2);
    STARTS(r.err, "ocrtrain demo: --weights needs a value\nusage:");
    demo_init(&d);
    const char *e[] = {"demo", "-c", "x", "in", "--weights", "w", "-b", NULL};
    run(&r, &d.cmd, e);
    ck_assert_int_eq(r.rc, 2);
    HAS(r.err, "ocrtrain demo: -b needs a value\n");
    // A value that looks like a flag is still the value (as every command always read it).
    demo_init(&d);
    const char *f[] = {"demo", "-c", "x", "in", "--weights", "--json", NULL};
    run(&r, &d.cmd, f);
    ck_assert_msg(r.rc == CLI_CONTINUE, "%s", r.err);
    ck_assert_str_eq(d.weights, "--json");
    ck_assert_int_eq(d.json, 0);
    cli_free(&d.cmd);
    // No positional entry: a word is an unknown argument.
    const char *w = NULL;
    const CliFlag flags[] = {{CLI_STRING, "--out", .dest = &w}, {0}};
    const CliCommand cmd = {.name = "tiny", .flags = flags};
    const char *g[] = {"tiny", "stray", NULL};
    run(&r, &cmd, g);
    ck_assert_int_eq(r.rc, 2);
    HAS(r.err, "ocrtrain tiny: unknown argument 'stray'\n");
    // Without a CLI_CONFIG entry, -c and -o are no config arguments: an alias may take them.
    const CliFlag flags2[] = {{CLI_STRING, "--out", "-o", .meta = "DIR", .dest = &w}, {0}};
    const CliCommand cmd2 = {.name = "tiny", .flags = flags2};
    const char *h[] = {"tiny", "-o", "Global.x=1", NULL};
    run(&r, &cmd2, h);
    ck_assert_msg(r.rc == CLI_CONTINUE, "%s", r.err);
    ck_assert_str_eq(w, "Global.x=1");
    const char *i[] = {"tiny", "-c", "cfg", NULL};
    run(&r, &cmd2, i);
    ck_assert_int_eq(r.rc, 2);
    HAS(r.err, "unknown argument '-c'");
}
END_TEST

START_TEST(test_required) {
    Demo d;
    demo_init(&d);
    Run r;
    const char *a[] = {"demo", "--weights", "w", "in", NULL};
    run(&r, &d.cmd, a);
    ck_assert_int_eq(r.rc, 2);
    STARTS(r.err, "ocrtrain demo: a config (-c CFG) is required\nusage: ocrtrain demo");
    demo_init(&d);
    const char *b[] = {"demo", "-c", "x", "in", NULL};
    run(&r, &d.cmd, b);
    ck_assert_int_eq(r.rc, 2);
    HAS(r.err, "ocrtrain demo: --weights W is required\n");
    demo_init(&d);
    const char *c[] = {"demo", "-c", "x", "--weights", "w", NULL};
    run(&r, &d.cmd, c);
    ck_assert_int_eq(r.rc, 2);
    HAS(r.err, "ocrtrain demo: at least one INPUT (IMAGE or folder) is required\n");
    // In table order: the config first.
    demo_init(&d);
    const char *e[] = {"demo", NULL};
    run(&r, &d.cmd, e);
    ck_assert_int_eq(r.rc, 2);
    HAS(r.err, "a config (-c CFG) is required");
    LACKS(r.err, "--weights W is required");
    // -o alone does not give the config.
    demo_init(&d);
    const char *f[] = {"demo", "-o", "A.b=1", "--weights", "w", "in", NULL};
    run(&r, &d.cmd, f);
    ck_assert_int_eq(r.rc, 2);
    HAS(r.err, "a config (-c CFG) is required");
    ck_assert_int_eq(d.ca.n_overrides, 0);  // released
}
END_TEST

START_TEST(test_help) {
    Demo d;
    demo_init(&d);
    Run r;
    // -h wins wherever it stands once the arguments before it were fine, and nothing else is read.
    const char *a[] = {"demo", "--batch", "4", "-h", "--bogus", NULL};
    run(&r, &d.cmd, a);
    ck_assert_int_eq(r.rc, 0);
    ck_assert_str_eq(r.err, "");
    const char *want_synopsis =
        "usage: ocrtrain demo -c CFG --weights W [--json] [--batch N] [--height H] [--max-steps N]\n"
        "                     [--verify [B]] [--seed S] [--memory SIZE] [--section Train|Eval]\n"
        "                     [--dtypes LIST] [-o Key.path=value ...] INPUT...\n";
    ck_assert_msg(strncmp(r.out, want_synopsis, strlen(want_synopsis)) == 0, "%s", r.out);
    // One line per entry, the help in one column, continuation lines in it too.
    HAS(r.out, "\n  -c CFG                the config\n");
    HAS(r.out, "\n  -o K=V [K=V ...]      override config keys (Global.epoch_num=10 Optimizer.lr.learning_rate=5e-4)\n");
    HAS(r.out, "\n  --weights W           the weights\n                        second line of help\n");
    HAS(r.out, "\n  -b, --batch N         images per batch\n");
    HAS(r.out, "\n  --verify [B]          check the plan\n");
    HAS(r.out, "\n  --section Train|Eval  the section\n");
    HAS(r.out, "\n  INPUT                 an image or a folder\n");
    size_t n = strlen(r.out);
    ck_assert_msg(n > 15 && strcmp(r.out + n - 15, "the last words\n") == 0, "%s", r.out);
    const char *b[] = {"demo", "--help", NULL};
    Run r2;
    run(&r2, &d.cmd, b);
    ck_assert_int_eq(r2.rc, 0);
    ck_assert_str_eq(r2.out, r.out);
    // An error's usage goes to stderr, the same text.
    demo_init(&d);
    const char *c[] = {"demo", "--bogus", NULL};
    run(&r2, &d.cmd, c);
    ck_assert_str_eq(r2.err + strlen("ocrtrain demo: unknown argument '--bogus'\n"), r.out);
    // An argument before -h is still checked.
    demo_init(&d);
    const char *e[] = {"demo", "--batch", "x", "-h", NULL};
    run(&r2, &d.cmd, e);
    ck_assert_int_eq(r2.rc, 2);
    // A value "-h" is a value.
    demo_init(&d);
    const char *f[] = {"demo", "-c", "x", "--weights", "-h", "in", NULL};
    run(&r2, &d.cmd, f);
    ck_assert_int_eq(r2.rc, CLI_CONTINUE);
    ck_assert_str_eq(d.weights, "-h");
    cli_free(&d.cmd);
}
END_TEST

START_TEST(test_explicit_synopsis_wraps_between_groups) {
    int x = 0;
    const CliFlag flags[] = {{CLI_BOOL, "--x", .dest = &x, .help = "an x"}, {0}};
    const CliCommand cmd = {
        .name = "export", .flags = flags,
        .synopsis = "(-c CFG (--weights W | --init) | --weights CHECKPOINT.pdparams) [--onnx OUT.onnx] "
                    "[--pdparams OUT.pdparams] [--probe IN.f32 --probe-out OUT.f32 [--probe-logits OUT.f32]]"};
    const char *a[] = {"export", "-h", NULL};
    Run r;
    run(&r, &cmd, a);
    ck_assert_int_eq(r.rc, 0);
    const char *want = "usage: ocrtrain export (-c CFG (--weights W | --init) | --weights CHECKPOINT.pdparams)\n"
                       "                       [--onnx OUT.onnx] [--pdparams OUT.pdparams]\n"
                       "                       [--probe IN.f32 --probe-out OUT.f32 [--probe-logits OUT.f32]]\n"
                       "  --x  an x\n";
    ck_assert_str_eq(r.out, want);
}
END_TEST

static int usage_error_fn(const CliCommand *c, int argc, char **argv) {
    int rc = cli_parse(c, argc, argv);
    if (rc != CLI_CONTINUE) return rc;
    return cli_usage_error(c, "--a and --b exclude each other (%d)", 7);
}

static int fail_fn(const CliCommand *c, int argc, char **argv) {
    int rc = cli_parse(c, argc, argv);
    if (rc != CLI_CONTINUE) return rc;
    return cli_fail(c, 1, "%s went wrong", "it");
}

static int fail_status_fn(const CliCommand *c, int argc, char **argv) {
    int rc = cli_parse(c, argc, argv);
    if (rc != CLI_CONTINUE) return rc;
    return cli_fail_status(c, ocr_set_error(OCR_ERR_IO, "disk full writing %s", "x.bin"));
}

START_TEST(test_helpers_print_release_and_return_the_code) {
    CliConfigArgs ca = {0};
    CliList l = {0};
    const CliFlag flags[] = {{CLI_CONFIG, .dest = &ca}, {CLI_LIST, "--l", .dest = &l}, {0}};
    const CliCommand cmd = {.name = "h", .flags = flags};
    const char *a[] = {"h", "-o", "A.b=1", "C.d=2", "--l", "p,q", NULL};
    Run r;
    capture(&r, &cmd, a, usage_error_fn);
    ck_assert_int_eq(r.rc, 2);
    STARTS(r.err, "ocrtrain h: --a and --b exclude each other (7)\nusage: ocrtrain h [-c CFG] [--l VALUE]");
    ck_assert_int_eq(ca.n_overrides, 0);
    ck_assert_ptr_null(l.items);
    capture(&r, &cmd, a, fail_fn);
    ck_assert_int_eq(r.rc, 1);
    ck_assert_str_eq(r.err, "ocrtrain h: it went wrong\n");
    ck_assert_int_eq(ca.n_overrides, 0);
    capture(&r, &cmd, a, fail_status_fn);
    ck_assert_int_eq(r.rc, 1);  // IO is a runtime failure
    ck_assert_str_eq(r.err, "ocrtrain h: disk full writing x.bin\n");
    ck_assert_int_eq(cli_exit_code(OCR_ERR_CONFIG), 2);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("cli_flags");
    TCase *tc = tcase_create("flags");
    tcase_add_test(tc, test_every_kind);
    tcase_add_test(tc, test_defaults_stay_and_last_value_wins);
    tcase_add_test(tc, test_optional_value);
    tcase_add_test(tc, test_config_args_with_several_assignments);
    tcase_add_test(tc, test_bad_values);
    tcase_add_test(tc, test_unknown_and_missing);
    tcase_add_test(tc, test_required);
    tcase_add_test(tc, test_help);
    tcase_add_test(tc, test_explicit_synopsis_wraps_between_groups);
    tcase_add_test(tc, test_helpers_print_release_and_return_the_code);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(suite()); }

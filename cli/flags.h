// The one command-line parser of the ocrtrain commands. A command declares its arguments as a
// table (what each flag is called, what it holds, where its value goes, its help line); cli_parse
// reads argv against it with one set of messages, and cli_usage writes the usage text from it,
// so a flag's spelling, its check and its help cannot drift apart.
//
//     CliConfigArgs ca = {0};
//     const char *weights = NULL;
//     int json = 0, batch = 6;
//     CliList inputs = {0};
//     const CliFlag flags[] = {
//         {CLI_CONFIG, .dest = &ca, .required = 1, .help = "the config (JSON or PaddleOCR's .yml)"},
//         {CLI_STRING, "--weights", .meta = "W", .dest = &weights, .required = 1, .help = "a .safetensors file"},
//         {CLI_INT, "--batch", .meta = "N", .dest = &batch, .lo = 1, .hi = 4096, .help = "images per batch"},
//         {CLI_BOOL, "--json", .dest = &json, .help = "one JSON object"},
//         {CLI_POSITIONAL, .meta = "INPUT", .dest = &inputs, .required = 1, .help = "an image or a folder"},
//         {0}};
//     const CliCommand cmd = {.name = "predict", .flags = flags};
//     int rc = cli_parse(&cmd, argc, argv);
//     if (rc != CLI_CONTINUE) return rc;  // 0 after --help, 2 after a usage error (both printed)
//     ...
//     cli_free(&cmd);                     // the -o assignments and lists the table owns
//
// Parsing (argv[0] is the command's name, as main passes it): arguments are read left to right.
// -h/--help prints the usage on stdout and returns 0. With a CLI_CONFIG entry, -c/--config FILE,
// -o K=V [K=V ...] and PaddleOCR's one-line flags (--use_amp true, -p ...) go to
// cli_take_config_arg first (cli/cli_common.h), as every command always did. Then a flag is
// looked up by its name or alias; a word that is no flag ("-" included) goes to the
// CLI_POSITIONAL entry. A flag given twice keeps the last value. After the last argument,
// every .required entry that was not given is reported, in table order. What the table cannot
// say (a value with two forms such as --batch max|N, flags that exclude each other) is a
// CLI_STRING or CLI_BOOL checked after cli_parse and reported with cli_usage_error / cli_fail.
//
// Messages (stderr, each starting "ocrtrain <command>: ", the flag spelled as typed), exit code 2:
//     unknown argument '--x'                 (then the usage)
//     --x needs a value                      (then the usage)
//     --x needs a positive integer, got 'y'  (CLI_INT/CLI_INT64 from 1; "a non-negative integer"
//                                             from 0; "an integer 16..256" with an upper bound)
//     --x must be Train or Eval, got 'y'     (CLI_STRING with .choices)
//     --x: each item must be A or B, got 'y' (CLI_LIST with .choices)
//     --x: cannot read 'y' (examples: 16G, 512MiB, 1000000)   (CLI_SIZE)
//     --x W is required / a config (-c CFG) is required / at least one INPUT is required
//                                            (.required, or .missing's words; then the usage)
// and cli_take_config_arg's own (-o needs Key.path=value ..., -c needs a file, ...). A required
// CLI_CONFIG needs -c: -o alone does not name a config.
//
// Usage text: "usage: ocrtrain <command> <synopsis>", then one line per entry with a .help
// ("  --batch N   images per batch"; '\n' in a help continues it in the help column; the
// CLI_CONFIG entry adds the -o line), then the epilog. The synopsis is generated from the table
// (required entries bare, the others in brackets, "[-o Key.path=value ...]" after the flags, the
// positional last) unless CliCommand.synopsis spells it out (for alternatives such as
// "--out FILE | --lmdb DIR"); either wraps before column 100, never inside [...] or (...).
#ifndef OCR_CLI_FLAGS_H
#define OCR_CLI_FLAGS_H

#include <stdint.h>
#include <stdio.h>

#include "cli/cli_common.h"
#include "core/error.h"

// cli_parse's result when the command should go on (any other value is its exit code).
#define CLI_CONTINUE (-1)

typedef enum {
    CLI_END = 0,     // ends the table ({0})
    CLI_BOOL,        // int *: 1 when given (no value)
    CLI_STRING,      // const char **: the next argument (one of .choices, when set); it points into argv
    CLI_INT,         // int *: a decimal integer in [.lo, .hi]
    CLI_INT64,       // int64_t *: a decimal integer in [.lo, .hi]
    CLI_UINT64,      // uint64_t *: a non-negative decimal integer (any 64-bit value)
    CLI_SIZE,        // int64_t *: bytes, "16G", "24GiB", "512M", "1.5g", "1000000" (parse_memory_size)
    CLI_LIST,        // CliList *: comma-separated items, empty ones dropped (each one of .choices, when set)
    CLI_CONFIG,      // CliConfigArgs *: -c/--config, -o and PaddleOCR's shorthands (no name: at most one entry)
    CLI_POSITIONAL,  // CliList *: every argument that is no flag, in order (no name: at most one entry)
} CliKind;

// A list value. items point into argv (CLI_POSITIONAL) or into owned storage (CLI_LIST); both are
// released by cli_free. Zero-initialise it.
typedef struct {
    int n;
    const char **items;
    char *storage_;  // the copy CLI_LIST splits (argv is not written to)
} CliList;

typedef struct {
    CliKind kind;
    const char *name;     // "--weights" (NULL for CLI_CONFIG and CLI_POSITIONAL)
    const char *alias;    // a second spelling, "-n" (NULL: none)
    const char *meta;     // the value's placeholder in the usage: "W", "N", "SIZE"; the positional's
                          // name ("INPUT"). NULL: .choices, else "VALUE"
    void *dest;           // where the value goes: the type the kind names; left alone when not given
    const char *help;     // its line(s) in the usage; NULL: not listed (still in the synopsis)
    int64_t lo, hi;       // CLI_INT/CLI_INT64 range; both 0: 1..INT_MAX (CLI_INT) / INT64_MAX (CLI_INT64)
    const char *choices;  // CLI_STRING/CLI_LIST: the values allowed, "Train|Eval" (NULL: any)
    int required;         // not given → usage error (CLI_POSITIONAL: fewer than one item)
    const char *missing;  // the "... is required" message's words (NULL: "--weights W", "a config
                          // (-c CFG)", "at least one INPUT")
    int optional_value;   // CLI_INT/CLI_INT64: the value may be left out ("--verify" or "--verify 4"):
                          // the next argument is taken only when it starts with a digit; without
                          // it, .implicit is stored
    int64_t implicit;
} CliFlag;

typedef struct {
    const char *name;      // "predict": messages start "ocrtrain predict: "
    const CliFlag *flags;  // ends with {0}
    const char *synopsis;  // after "usage: ocrtrain <name> " (NULL: generated from the table)
    const char *epilog;    // usage text after the flag lines (NULL: none); ends with '\n'
} CliCommand;

// Reads argv[1..argc) into the table's destinations. Returns CLI_CONTINUE, or the exit code with
// everything printed and cli_free done: 0 after -h/--help, 2 after a usage error.
int cli_parse(const CliCommand *c, int argc, char **argv);

// The usage text (stdout for --help, stderr after a usage error).
void cli_usage(const CliCommand *c, FILE *f);

// Releases what the table's destinations own (CliConfigArgs' assignments, CliList arrays) and
// zeroes them; string destinations stay valid (they point into argv). Safe to call twice.
void cli_free(const CliCommand *c);

// For a command's own checks after cli_parse. Each prints "ocrtrain <name>: <message>" on stderr,
// does cli_free and returns the exit code, for `return cli_...(&cmd, ...);`.
//   cli_usage_error: the message, then the usage; returns 2.
//   cli_fail: the message only; returns code.
//   cli_fail_status: ocr_last_error() as the message; returns cli_exit_code(st).
int cli_usage_error(const CliCommand *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int cli_fail(const CliCommand *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int cli_fail_status(const CliCommand *c, ocr_status_t st);

#endif

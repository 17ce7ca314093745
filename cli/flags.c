#include "cli/flags.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "training/training.h"

#define USAGE_WIDTH 100   // the synopsis wraps before this column
#define HELP_COLUMN_MAX 22  // wider left columns push only their own help further right

static const char *meta_of(const CliFlag *f) {
    if (f->meta) return f->meta;
    if (f->choices) return f->choices;
    return f->kind == CLI_POSITIONAL ? "ARG" : "VALUE";
}

static int takes_value(const CliFlag *f) { return f->kind != CLI_BOOL; }

// ---- usage ------------------------------------------------------------------------------------

// The entry as the synopsis shows it, without brackets: "--batch N", "--verify [N]", "INPUT...".
static void synopsis_item(const CliFlag *f, char *buf, size_t n) {
    if (f->kind == CLI_CONFIG) snprintf(buf, n, "-c CFG");
    else if (f->kind == CLI_POSITIONAL) snprintf(buf, n, "%s...", meta_of(f));
    else if (!takes_value(f)) snprintf(buf, n, "%s", f->name);
    else if (f->optional_value) snprintf(buf, n, "%s [%s]", f->name, meta_of(f));
    else snprintf(buf, n, "%s %s", f->name, meta_of(f));
}

typedef struct {
    FILE *f;
    int col, indent;
    int fresh;  // at the start of a continuation line: no space before the next word
} Wrap;

static void wrap_word(Wrap *w, const char *word) {
    int len = (int)strlen(word);
    if (!w->fresh && w->col > w->indent && w->col + 1 + len > USAGE_WIDTH) {
        fprintf(w->f, "\n%*s", w->indent, "");
        w->col = w->indent;
        w->fresh = 1;
    }
    if (!w->fresh) {
        fputc(' ', w->f);
        w->col++;
    }
    fputs(word, w->f);
    w->col += len;
    w->fresh = 0;
}

static void print_synopsis(const CliCommand *c, FILE *f) {
    Wrap w = {f, 0, 0, 0};
    w.col = fprintf(f, "usage: ocrtrain %s", c->name);
    w.indent = w.col + 1;
    if (c->synopsis) {
        // Wrapped between groups: a space inside [...] or (...) does not break the line.
        char word[400];
        size_t n = 0;
        int depth = 0;
        for (const char *p = c->synopsis;; p++) {
            if (*p == '[' || *p == '(') depth++;
            if ((*p == ']' || *p == ')') && depth > 0) depth--;
            if (*p == '\0' || (*p == ' ' && depth == 0)) {
                word[n] = '\0';
                if (n) wrap_word(&w, word);
                n = 0;
                if (!*p) break;
            } else if (n + 1 < sizeof word) {
                word[n++] = *p;
            }
        }
        fputc('\n', f);
        return;
    }
    const CliFlag *config = NULL, *positional = NULL;
    char item[160], word[170];
    for (const CliFlag *e = c->flags; e->kind != CLI_END; e++) {
        if (e->kind == CLI_CONFIG) config = e;
        if (e->kind == CLI_POSITIONAL) {
            positional = e;
            continue;
        }
        synopsis_item(e, item, sizeof item);
        snprintf(word, sizeof word, e->required ? "%s" : "[%s]", item);
        wrap_word(&w, word);
    }
    if (config) wrap_word(&w, "[-o Key.path=value ...]");
    if (positional) {
        synopsis_item(positional, item, sizeof item);
        snprintf(word, sizeof word, positional->required ? "%s" : "[%s]", item);
        wrap_word(&w, word);
    }
    fputc('\n', f);
}

// The left column of an entry's help line: "-n, --count N", "-c CFG", "INPUT".
static void help_left(const CliFlag *e, char *buf, size_t n) {
    if (e->kind == CLI_CONFIG) {
        snprintf(buf, n, "-c CFG");
        return;
    }
    if (e->kind == CLI_POSITIONAL) {
        snprintf(buf, n, "%s", meta_of(e));
        return;
    }
    char item[160];
    synopsis_item(e, item, sizeof item);
    if (e->alias) snprintf(buf, n, "%s, %s", e->alias, item);
    else snprintf(buf, n, "%s", item);
}

static void help_line(FILE *f, int column, const char *left, const char *help) {
    int w = fprintf(f, "  %s", left);
    for (const char *line = help; line;) {
        const char *nl = strchr(line, '\n');
        int len = nl ? (int)(nl - line) : (int)strlen(line);
        int pad = 2 + column + 2 - w;  // two spaces of indent, the column, two of gap
        fprintf(f, "%*s%.*s\n", pad > 2 ? pad : 2, "", len, line);
        w = 0;
        line = nl ? nl + 1 : NULL;
        if (line && !*line) break;
    }
}

void cli_usage(const CliCommand *c, FILE *f) {
    print_synopsis(c, f);
    static const char *const o_left = "-o K=V [K=V ...]";
    int column = 0;
    char left[200];
    for (const CliFlag *e = c->flags; e->kind != CLI_END; e++) {
        if (!e->help) continue;
        help_left(e, left, sizeof left);
        int len = (int)strlen(left);
        if (e->kind == CLI_CONFIG && (int)strlen(o_left) > len) len = (int)strlen(o_left);
        if (len > column && len <= HELP_COLUMN_MAX) column = len;
    }
    for (const CliFlag *e = c->flags; e->kind != CLI_END; e++) {
        if (!e->help) continue;
        help_left(e, left, sizeof left);
        help_line(f, column, left, e->help);
        if (e->kind == CLI_CONFIG)
            help_line(f, column, o_left, "override config keys (Global.epoch_num=10 Optimizer.lr.learning_rate=5e-4)");
    }
    if (c->epilog) fputs(c->epilog, f);
}

// ---- releasing --------------------------------------------------------------------------------

static void list_free(CliList *l) {
    free(l->items);
    free(l->storage_);
    memset(l, 0, sizeof *l);
}

void cli_free(const CliCommand *c) {
    for (const CliFlag *e = c->flags; e->kind != CLI_END; e++) {
        if (!e->dest) continue;
        if (e->kind == CLI_CONFIG) cli_config_args_free(e->dest);
        if (e->kind == CLI_LIST || e->kind == CLI_POSITIONAL) list_free(e->dest);
    }
}

static void vmessage(const CliCommand *c, const char *fmt, va_list ap) {
    fprintf(stderr, "ocrtrain %s: ", c->name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

int cli_usage_error(const CliCommand *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmessage(c, fmt, ap);
    va_end(ap);
    cli_usage(c, stderr);
    cli_free(c);
    return 2;
}

int cli_fail(const CliCommand *c, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmessage(c, fmt, ap);
    va_end(ap);
    cli_free(c);
    return code;
}

int cli_fail_status(const CliCommand *c, ocr_status_t st) { return cli_fail(c, cli_exit_code(st), "%s", ocr_last_error()); }

// ---- values -----------------------------------------------------------------------------------

// "A or B", "A, B or C" from "A|B|C".
static void choices_text(const char *choices, char *buf, size_t n) {
    size_t o = 0;
    buf[0] = '\0';
    int count = 1;
    for (const char *p = choices; *p; p++) count += *p == '|';
    int k = 0;
    for (const char *p = choices; o + 1 < n;) {
        const char *bar = strchr(p, '|');
        int len = bar ? (int)(bar - p) : (int)strlen(p);
        const char *sep = k == 0 ? "" : k == count - 1 ? " or " : ", ";
        o += (size_t)snprintf(buf + o, n - o, "%s%.*s", sep, len, p);
        k++;
        if (!bar) break;
        p = bar + 1;
    }
}

static int is_choice(const char *choices, const char *v) {
    size_t vl = strlen(v);
    for (const char *p = choices;;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == vl && strncmp(p, v, len) == 0) return 1;
        if (!bar) return 0;
        p = bar + 1;
    }
}

static void range_of(const CliFlag *f, int64_t *lo, int64_t *hi) {
    *lo = f->lo;
    *hi = f->hi;
    if (*lo == 0 && *hi == 0) {
        *lo = 1;
        *hi = INT64_MAX;
    }
    if (f->kind == CLI_INT) {  // what an int holds
        if (*hi > INT_MAX) *hi = INT_MAX;
        if (*lo < INT_MIN) *lo = INT_MIN;
    }
}

// "a positive integer", "a non-negative integer", "an integer 16..256".
static void integer_words(const CliFlag *f, char *buf, size_t n) {
    int64_t lo, hi;
    range_of(f, &lo, &hi);
    int64_t top = f->kind == CLI_INT ? INT_MAX : INT64_MAX;
    if (hi >= top && (lo == 0 || lo == 1)) snprintf(buf, n, "%s", lo == 1 ? "a positive integer" : "a non-negative integer");
    else if (hi >= top) snprintf(buf, n, "an integer of at least %lld", (long long)lo);
    else snprintf(buf, n, "an integer %lld..%lld", (long long)lo, (long long)hi);
}

static int parse_integer(const CliFlag *f, const char *v, int64_t *out) {
    int64_t lo, hi;
    range_of(f, &lo, &hi);
    if (!*v) return 0;
    errno = 0;
    char *end;
    long long x = strtoll(v, &end, 10);
    if (errno || *end || x < lo || x > hi) return 0;
    *out = x;
    return 1;
}

static int parse_u64(const char *v, uint64_t *out) {
    while (*v == ' ' || *v == '\t') v++;
    if (!*v || *v == '-') return 0;
    errno = 0;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end) return 0;
    *out = x;
    return 1;
}

static int list_push(CliList *l, const char *item) {
    const char **items = realloc(l->items, sizeof *items * (size_t)(l->n + 1));
    if (!items) return 0;
    l->items = items;
    l->items[l->n++] = item;
    return 1;
}

// 0 on success, else the exit code (message printed).
static int set_value(const CliCommand *c, const CliFlag *f, const char *flag, const char *v) {
    char words[160];
    switch (f->kind) {
    case CLI_STRING:
        if (f->choices && !is_choice(f->choices, v)) {
            choices_text(f->choices, words, sizeof words);
            fprintf(stderr, "ocrtrain %s: %s must be %s, got '%s'\n", c->name, flag, words, v);
            return 2;
        }
        *(const char **)f->dest = v;
        return 0;
    case CLI_INT:
    case CLI_INT64: {
        int64_t x;
        if (!parse_integer(f, v, &x)) {
            integer_words(f, words, sizeof words);
            fprintf(stderr, "ocrtrain %s: %s needs %s, got '%s'\n", c->name, flag, words, v);
            return 2;
        }
        if (f->kind == CLI_INT) *(int *)f->dest = (int)x;
        else *(int64_t *)f->dest = x;
        return 0;
    }
    case CLI_UINT64:
        if (!parse_u64(v, f->dest)) {
            fprintf(stderr, "ocrtrain %s: %s needs a non-negative integer, got '%s'\n", c->name, flag, v);
            return 2;
        }
        return 0;
    case CLI_SIZE:
        if (!parse_memory_size(v, f->dest)) {
            fprintf(stderr, "ocrtrain %s: %s: cannot read '%s' (examples: 16G, 512MiB, 1000000)\n", c->name, flag, v);
            return 2;
        }
        return 0;
    case CLI_LIST: {
        CliList *l = f->dest;
        list_free(l);  // the last one given counts
        if (!(l->storage_ = strdup(v))) {
            fprintf(stderr, "ocrtrain %s: out of memory\n", c->name);
            return 1;
        }
        for (char *p = l->storage_; p;) {
            char *comma = strchr(p, ',');
            if (comma) *comma = '\0';
            if (*p && f->choices && !is_choice(f->choices, p)) {
                choices_text(f->choices, words, sizeof words);
                fprintf(stderr, "ocrtrain %s: %s: each item must be %s, got '%s'\n", c->name, flag, words, p);
                return 2;
            }
            if (*p && !list_push(l, p)) {
                fprintf(stderr, "ocrtrain %s: out of memory\n", c->name);
                return 1;
            }
            p = comma ? comma + 1 : NULL;
        }
        if (l->n == 0) {
            fprintf(stderr, "ocrtrain %s: %s needs a comma-separated list, got '%s'\n", c->name, flag, v);
            return 2;
        }
        return 0;
    }
    default: return 0;
    }
}

static const CliFlag *lookup(const CliCommand *c, const char *arg) {
    for (const CliFlag *e = c->flags; e->kind != CLI_END; e++) {
        if (e->kind == CLI_CONFIG || e->kind == CLI_POSITIONAL) continue;
        if ((e->name && strcmp(e->name, arg) == 0) || (e->alias && strcmp(e->alias, arg) == 0)) return e;
    }
    return NULL;
}

static int is_digit(char ch) { return ch >= '0' && ch <= '9'; }

#define CLI_MAX_FLAGS 64

// ---- parsing ----------------------------------------------------------------------------------

static int parse(const CliCommand *c, int argc, char **argv, unsigned char *given) {
    const CliFlag *config = NULL, *positional = NULL;
    for (const CliFlag *e = c->flags; e->kind != CLI_END; e++) {
        if (e->kind == CLI_CONFIG) config = e;
        if (e->kind == CLI_POSITIONAL) positional = e;
    }
    for (int i = 1; i < argc;) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            cli_usage(c, stdout);
            return 0;
        }
        if (config) {
            int n = cli_take_config_arg(config->dest, argc, argv, i);
            if (n < 0) {
                fprintf(stderr, "ocrtrain %s: %s\n", c->name, ocr_last_error());
                return 2;
            }
            if (n > 0) {
                // Required means -c: -o alone does not name a config.
                if (((CliConfigArgs *)config->dest)->config) given[config - c->flags] = 1;
                i += n;
                continue;
            }
        }
        const CliFlag *f = lookup(c, arg);
        if (!f) {
            if (positional && !(arg[0] == '-' && arg[1])) {
                if (!list_push(positional->dest, arg)) {
                    fprintf(stderr, "ocrtrain %s: out of memory\n", c->name);
                    return 1;
                }
                given[positional - c->flags] = 1;
                i++;
                continue;
            }
            fprintf(stderr, "ocrtrain %s: unknown argument '%s'\n", c->name, arg);
            cli_usage(c, stderr);
            return 2;
        }
        given[f - c->flags] = 1;
        if (f->kind == CLI_BOOL) {
            *(int *)f->dest = 1;
            i++;
            continue;
        }
        int optional = f->optional_value && (f->kind == CLI_INT || f->kind == CLI_INT64);
        if (optional && !(i + 1 < argc && is_digit(argv[i + 1][0]))) {
            if (f->kind == CLI_INT) *(int *)f->dest = (int)f->implicit;
            else *(int64_t *)f->dest = f->implicit;
            i++;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "ocrtrain %s: %s needs a value\n", c->name, arg);
            cli_usage(c, stderr);
            return 2;
        }
        int rc = set_value(c, f, arg, argv[i + 1]);
        if (rc) return rc;
        i += 2;
    }
    for (const CliFlag *e = c->flags; e->kind != CLI_END; e++) {
        if (!e->required || given[e - c->flags]) continue;
        char words[200];
        if (e->missing) snprintf(words, sizeof words, "%s", e->missing);
        else if (e->kind == CLI_CONFIG) snprintf(words, sizeof words, "a config (-c CFG)");
        else if (e->kind == CLI_POSITIONAL) snprintf(words, sizeof words, "at least one %s", meta_of(e));
        else if (e->kind == CLI_BOOL) snprintf(words, sizeof words, "%s", e->name);
        else snprintf(words, sizeof words, "%s %s", e->name, meta_of(e));
        fprintf(stderr, "ocrtrain %s: %s is required\n", c->name, words);
        cli_usage(c, stderr);
        return 2;
    }
    return CLI_CONTINUE;
}

int cli_parse(const CliCommand *c, int argc, char **argv) {
    unsigned char given[CLI_MAX_FLAGS] = {0};
    int n = 0;
    while (c->flags[n].kind != CLI_END) n++;
    if (n > CLI_MAX_FLAGS) {
        fprintf(stderr, "ocrtrain %s: more than %d entries in the flag table\n", c->name, CLI_MAX_FLAGS);
        return 1;
    }
    int rc = parse(c, argc, argv, given);
    if (rc != CLI_CONTINUE) cli_free(c);
    return rc;
}

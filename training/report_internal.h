// Private to training/report*.c: the growing text buffer the Markdown, HTML and SVG writers print
// into, the small formatting helpers they share, and the pieces each file provides to the others
// (report.c: the verdict's sentence; report_markdown.c, report_html.c: the two documents;
// report_svg.c: the charts report.html embeds). report.json is built with cJSON (report_json.c).
#ifndef OCR_TRAINING_REPORT_INTERNAL_H
#define OCR_TRAINING_REPORT_INTERNAL_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/memory.h"
#include "training/report.h"

// ---- a growing text buffer --------------------------------------------------------------------------

typedef struct {
    char *s;
    size_t n, cap;
    int oom;
} Buf;

static inline void bprintf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void bprintf(Buf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) return;
        if (b->s && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 65536;
        while (cap < b->n + (size_t)k + 1) cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

static inline void besc(Buf *b, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': bprintf(b, "&lt;"); break;
        case '>': bprintf(b, "&gt;"); break;
        case '&': bprintf(b, "&amp;"); break;
        case '"': bprintf(b, "&quot;"); break;
        default: bprintf(b, "%c", *s);
        }
    }
}

// ---- figures and their formatting -------------------------------------------------------------------

// Run i's accuracy against the baseline's: the mean over the seed pairs when the runs were judged
// over seeds, else the difference of the first seed's final evaluations.
static inline double acc_delta(const Report *rep, int i) {
    if (rep->runs[i].seeded.has) return rep->runs[i].seeded.res.acc.delta;
    return rep->runs[i].r.outcome.acc - rep->runs[0].r.outcome.acc;
}

// Standard error of the difference of two accuracies measured on n samples each (binomial):
// how large a delta the evaluation set can tell from noise.
static inline double acc_delta_stderr(double a, double b, int64_t n) {
    if (n <= 0) return 0;
    return sqrt((a * (1 - a) + b * (1 - b)) / (double)n);
}

static inline double ratio(double a, double b) { return b != 0 ? a / b : 0; }

static inline const char *verdict_upper(paired_verdict_t v) {
    switch (v) {
    case PAIRED_PASS: return "PASS";
    case PAIRED_REGRESSION: return "REGRESSION";
    case PAIRED_BETTER: return "BETTER";
    default: return "INCONCLUSIVE";
    }
}

// "1,362" style counts for lines-needed, or a phrase when no size is known.
static inline const char *fmt_lines(int64_t n, char *buf, size_t cap) {
    if (n < 0) snprintf(buf, cap, "none would");
    else snprintf(buf, cap, "%lld", (long long)n);
    return buf;
}

static inline const char *fmt_bytes(int64_t v, char *buf, size_t n) { return ocr_format_bytes(v, buf, n); }

static inline const char *fmt_secs(double s, char *buf, size_t n) {
    if (!(s >= 0)) snprintf(buf, n, "-");
    else if (s >= 3600) snprintf(buf, n, "%.0fh %02.0fm", floor(s / 3600), fmod(floor(s / 60), 60));
    else if (s >= 60) snprintf(buf, n, "%.0fm %02.0fs", floor(s / 60), fmod(floor(s), 60));
    else snprintf(buf, n, "%.2fs", s);
    return buf;
}

static inline void fmt_ci(char *buf, size_t cap, double d, PairedInterval ci) {
    snprintf(buf, cap, "%+.4f [%+.4f, %+.4f]", d, ci.lo, ci.hi);
}

// The seeds and lines an inconclusive run needs (from the inconclusive metric, accuracy first) as
// table cells: "12", "none would", or "-" when the run's verdict is not inconclusive. tot: the
// accuracy interval's variance, for the training share.
static inline void seeded_cells(const ReportSeeded *sd, paired_verdict_t v, char *sn, size_t sncap, char *ln,
                                size_t lncap, double *training_share) {
    const SeedsMetric *a = &sd->res.acc, *c = &sd->res.cer;
    int64_t sneed = a->verdict == PAIRED_INCONCLUSIVE ? a->seeds_needed : c->seeds_needed;
    int64_t lneed = a->verdict == PAIRED_INCONCLUSIVE ? a->lines_needed : c->lines_needed;
    if (v != PAIRED_INCONCLUSIVE) snprintf(sn, sncap, "-");
    else if (sneed >= 0) snprintf(sn, sncap, "%lld", (long long)sneed);
    else snprintf(sn, sncap, "none would");
    if (v != PAIRED_INCONCLUSIVE) snprintf(ln, lncap, "-");
    else if (lneed >= 0) snprintf(ln, lncap, "%lld", (long long)lneed);
    else snprintf(ln, lncap, "none would");
    double tot = a->share_seed + a->share_line + a->share_resid;
    *training_share = tot > 0 ? a->share_seed / tot : 0.0;
}

// Run i's colour in every chart and in the HTML runs table.
static const char *const COLORS[] = {"#1f6fb4", "#e4572e", "#2e9e44", "#9c4dcc", "#c48a00", "#17a2b8", "#7f7f7f",
                                     "#d62a8a"};

// ---- what each file provides ------------------------------------------------------------------------

// report.c: the verdict's one-line statement (Markdown and HTML), and what the seed-aware verdict
// measured, in plain words.
void report_verdict_text(Buf *b, const Report *rep);
void report_seeds_explanation(Buf *b, const Report *rep);
// report_svg.c: every seed's accuracy per run (a strip of points) and the change's effect with its
// interval against the tolerance and the baseline's noise floor.
void report_chart_seeds(Buf *b, const Report *rep);
void report_chart_effect(Buf *b, const Report *rep);

// report_markdown.c, report_html.c: the whole document into b (b->oom on allocation failure).
void report_markdown(Buf *b, const Report *rep, const MachineInfo *mi);
void report_html(Buf *b, const Report *rep, const MachineInfo *mi);

// report_svg.c: one inline <svg> chart each, over every run. report_chart_accuracy draws nothing
// when no run was evaluated.
void report_chart_loss(Buf *b, const Report *rep);
void report_chart_accuracy(Buf *b, const Report *rep);
void report_chart_scale(Buf *b, const Report *rep);
void report_chart_memory(Buf *b, const Report *rep);
void report_chart_throughput(Buf *b, const Report *rep);

#endif

// The SVG charts report.html embeds (inline, no script): training loss, eval accuracy, loss scale,
// peak memory by category and throughput, one colour per run (COLORS, report_internal.h).
#include <math.h>
#include <string.h>

#include "training/report_internal.h"

// ---- axes ---------------------------------------------------------------------------------------------------

typedef struct {
    double x0, x1, y0, y1;
    int logy;
    double W, H, L, R, T, B;  // size and margins
} Axes;

static double px(const Axes *a, double x) {
    return a->L + (x - a->x0) / (a->x1 - a->x0 > 0 ? a->x1 - a->x0 : 1) * (a->W - a->L - a->R);
}
static double py(const Axes *a, double y) {
    double lo = a->y0, hi = a->y1, v = y;
    if (a->logy) {
        lo = log2(lo > 0 ? lo : 1e-30);
        hi = log2(hi > 0 ? hi : 1e-30);
        v = log2(y > 0 ? y : 1e-30);
    }
    double t = (v - lo) / (hi - lo > 0 ? hi - lo : 1);
    return a->H - a->B - t * (a->H - a->T - a->B);
}

// "Nice" tick step for a range.
static double nice_step(double range, int target) {
    double raw = range / (target > 0 ? target : 1);
    if (!(raw > 0)) return 1;
    double p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * p;
}

static void svg_begin(Buf *b, const Axes *a, const char *title, const char *xlabel, const char *ylabel) {
    bprintf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %.0f %.0f\" class=\"chart\" role=\"img\">\n",
            a->W, a->H);
    bprintf(b, "<title>");
    besc(b, title);
    bprintf(b, "</title>\n<text x=\"%.0f\" y=\"18\" class=\"ct\">", a->L);
    besc(b, title);
    bprintf(b, "</text>\n");
    // axes
    bprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"ax\"/>\n", a->L, a->H - a->B,
            a->W - a->R, a->H - a->B);
    bprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"ax\"/>\n", a->L, a->T, a->L,
            a->H - a->B);
    if (xlabel) {
        bprintf(b, "<text x=\"%.1f\" y=\"%.1f\" class=\"al\" text-anchor=\"middle\">", (a->L + a->W - a->R) / 2,
                a->H - 4);
        besc(b, xlabel);
        bprintf(b, "</text>\n");
    }
    if (ylabel) {
        bprintf(b, "<text transform=\"translate(12,%.1f) rotate(-90)\" class=\"al\" text-anchor=\"middle\">",
                (a->T + a->H - a->B) / 2);
        besc(b, ylabel);
        bprintf(b, "</text>\n");
    }
}

static void svg_xticks(Buf *b, const Axes *a) {
    double step = nice_step(a->x1 - a->x0, 6);
    if (step < 1) step = 1;  // iterations
    for (double x = ceil(a->x0 / step) * step; x <= a->x1 + 1e-9; x += step) {
        double X = px(a, x);
        bprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"tk\"/>", X, a->H - a->B, X,
                a->H - a->B + 4);
        bprintf(b, "<text x=\"%.1f\" y=\"%.1f\" class=\"tl\" text-anchor=\"middle\">%g</text>\n", X, a->H - a->B + 16,
                x);
    }
}

// Ticks of a real-valued x axis (accuracies, differences), with grid lines.
static void svg_xticks_real(Buf *b, const Axes *a) {
    double step = nice_step(a->x1 - a->x0, 6);
    for (double x = ceil(a->x0 / step) * step; x <= a->x1 + step * 1e-9; x += step) {
        double v = fabs(x) < step * 1e-9 ? 0 : x;  // no "-0"
        double X = px(a, v);
        bprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"gr\"/>", X, a->T, X, a->H - a->B);
        bprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"tk\"/>", X, a->H - a->B, X,
                a->H - a->B + 4);
        bprintf(b, "<text x=\"%.1f\" y=\"%.1f\" class=\"tl\" text-anchor=\"middle\">%.4g</text>\n", X,
                a->H - a->B + 16, v);
    }
}

static void svg_yticks(Buf *b, const Axes *a, const char *fmt) {
    if (a->logy) {
        double lo = floor(log2(a->y0)), hi = ceil(log2(a->y1));
        int every = (int)ceil((hi - lo) / 6);
        if (every < 1) every = 1;
        for (double e = lo; e <= hi; e += every) {
            double Y = py(a, pow(2, e));
            bprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"gr\"/>", a->L, Y, a->W - a->R, Y);
            bprintf(b, "<text x=\"%.1f\" y=\"%.1f\" class=\"tl\" text-anchor=\"end\">2^%.0f</text>\n", a->L - 4,
                    Y + 4, e);
        }
        return;
    }
    double step = nice_step(a->y1 - a->y0, 5);
    for (double y = ceil(a->y0 / step) * step; y <= a->y1 + 1e-12; y += step) {
        double Y = py(a, y);
        bprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"gr\"/>", a->L, Y, a->W - a->R, Y);
        bprintf(b, "<text x=\"%.1f\" y=\"%.1f\" class=\"tl\" text-anchor=\"end\">", a->L - 4, Y + 4);
        bprintf(b, fmt, y);
        bprintf(b, "</text>\n");
    }
}

// In the title row, right-aligned.
static void svg_legend(Buf *b, const Axes *a, const Report *rep) {
    double width = 0;
    for (int i = 0; i < rep->n_runs; i++) width += 24 + 7.0 * (double)strlen(rep->runs[i].name);
    double x = a->W - a->R - width;
    for (int i = 0; i < rep->n_runs; i++) {
        bprintf(b, "<rect x=\"%.1f\" y=\"10\" width=\"12\" height=\"4\" fill=\"%s\"/>", x, COLORS[i % 8]);
        bprintf(b, "<text x=\"%.1f\" y=\"16\" class=\"tl\">", x + 16);
        besc(b, rep->runs[i].name);
        bprintf(b, "</text>\n");
        x += 24 + 7.0 * (double)strlen(rep->runs[i].name);
    }
}

// ---- charts -------------------------------------------------------------------------------------------------

// Loss of every run, smoothed over a window and reduced to at most ~300 points.
void report_chart_loss(Buf *b, const Report *rep) {
    Axes a = {0, 1, 0, 1, 0, 760, 300, 60, 16, 28, 36};
    double ymax = 0, ymin = INFINITY;
    int64_t xmax = 1;
    for (int i = 0; i < rep->n_runs; i++) {
        const TrainResult *r = &rep->runs[i].r;
        if (r->history.n_steps > xmax) xmax = r->history.n_steps;
        for (int64_t k = 0; k < r->history.n_steps; k++) {
            double v = r->history.steps[k].loss;
            if (!isfinite(v) || r->history.steps[k].skipped) continue;
            if (v > ymax) ymax = v;
            if (v < ymin) ymin = v;
        }
    }
    if (!(ymin < ymax)) ymin = 0, ymax = ymax > 0 ? ymax : 1;
    a.x1 = (double)xmax;
    a.y0 = ymin > 0 ? 0 : ymin;
    a.y1 = ymax * 1.05;
    svg_begin(b, &a, "Training loss (CTC, moving average)", "iteration", "loss");
    svg_yticks(b, &a, "%g");
    svg_xticks(b, &a);
    for (int i = 0; i < rep->n_runs; i++) {
        const TrainResult *r = &rep->runs[i].r;
        if (r->history.n_steps == 0) continue;
        int64_t win = r->history.n_steps / 50 > 1 ? r->history.n_steps / 50 : 1;
        int64_t stride = r->history.n_steps / 300 > 1 ? r->history.n_steps / 300 : 1;
        bprintf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\" points=\"", COLORS[i % 8]);
        for (int64_t k = 0; k < r->history.n_steps; k += stride) {
            double s = 0;
            int64_t n = 0;
            for (int64_t j = k - win + 1; j <= k; j++) {
                if (j < 0) continue;
                double v = r->history.steps[j].loss;
                if (isfinite(v) && !r->history.steps[j].skipped) s += v, n++;
            }
            if (n) bprintf(b, "%.1f,%.1f ", px(&a, (double)(k + 1)), py(&a, s / (double)n));
        }
        bprintf(b, "\"/>\n");
    }
    svg_legend(b, &a, rep);
    bprintf(b, "</svg>\n");
}

void report_chart_accuracy(Buf *b, const Report *rep) {
    Axes a = {0, 1, 0, 1, 0, 760, 280, 60, 16, 28, 36};
    int64_t xmax = 1;
    int any = 0;
    for (int i = 0; i < rep->n_runs; i++) {
        const TrainResult *r = &rep->runs[i].r;
        if (r->history.n_steps > xmax) xmax = r->history.n_steps;
        any |= r->history.n_evals > 0 || r->outcome.has_final_eval;
    }
    if (!any) return;
    a.x1 = (double)xmax;
    svg_begin(b, &a, "Eval accuracy (final weights at the right)", "iteration", "accuracy");
    svg_yticks(b, &a, "%.1f");
    svg_xticks(b, &a);
    for (int i = 0; i < rep->n_runs; i++) {
        const TrainResult *r = &rep->runs[i].r;
        const char *c = COLORS[i % 8];
        bprintf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\" points=\"", c);
        for (int k = 0; k < r->history.n_evals; k++) bprintf(b, "%.1f,%.1f ", px(&a, (double)r->history.evals[k].iter), py(&a, r->history.evals[k].acc));
        if (r->outcome.has_final_eval) bprintf(b, "%.1f,%.1f", px(&a, (double)r->history.n_steps), py(&a, r->outcome.acc));
        bprintf(b, "\"/>\n");
        for (int k = 0; k < r->history.n_evals; k++)
            bprintf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>", px(&a, (double)r->history.evals[k].iter),
                    py(&a, r->history.evals[k].acc), c);
        if (r->outcome.has_final_eval)
            bprintf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"><title>%s final %.4f</title></circle>\n",
                    px(&a, (double)r->history.n_steps), py(&a, r->outcome.acc), c, rep->runs[i].name, r->outcome.acc);
    }
    svg_legend(b, &a, rep);
    bprintf(b, "</svg>\n");
}

void report_chart_scale(Buf *b, const Report *rep) {
    Axes a = {0, 1, 0.5, 2, 1, 760, 260, 60, 16, 28, 36};
    double lo = INFINITY, hi = 0;
    int64_t xmax = 1;
    for (int i = 0; i < rep->n_runs; i++) {
        const TrainResult *r = &rep->runs[i].r;
        if (r->history.n_steps > xmax) xmax = r->history.n_steps;
        for (int64_t k = 0; k < r->history.n_steps; k++) {
            double s = r->history.steps[k].scale;
            if (s > 0 && s < lo) lo = s;
            if (s > hi) hi = s;
        }
    }
    if (!(lo <= hi)) lo = hi = 1;
    a.y0 = lo / 2;
    a.y1 = hi * 2;
    a.x1 = (double)xmax;
    svg_begin(b, &a, "Loss scale (log); red marks: skipped steps", "iteration",
              "loss scale");
    svg_yticks(b, &a, "%g");
    svg_xticks(b, &a);
    for (int i = 0; i < rep->n_runs; i++) {
        const TrainResult *r = &rep->runs[i].r;
        bprintf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\" points=\"", COLORS[i % 8]);
        float prev = -1;
        for (int64_t k = 0; k < r->history.n_steps; k++) {
            float s = r->history.steps[k].scale;
            if (s != prev || k == r->history.n_steps - 1) {
                // Steps: hold the previous value up to this iteration.
                if (prev > 0) bprintf(b, "%.1f,%.1f ", px(&a, (double)(k + 1)), py(&a, prev));
                bprintf(b, "%.1f,%.1f ", px(&a, (double)(k + 1)), py(&a, s));
                prev = s;
            }
        }
        bprintf(b, "\"/>\n");
        for (int64_t k = 0; k < r->history.n_steps; k++)
            if (r->history.steps[k].skipped)
                bprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#d00\" stroke-width=\"1.5\">"
                           "<title>%s: step %lld skipped</title></line>\n",
                        px(&a, (double)(k + 1)), a.H - a.B, px(&a, (double)(k + 1)), a.H - a.B - 10,
                        rep->runs[i].name, (long long)(k + 1));
    }
    svg_legend(b, &a, rep);
    bprintf(b, "</svg>\n");
}

static const char *const MEM_COLORS[OCR_MEM_CATEGORY_COUNT] = {"#4c78a8", "#f58518", "#e45756", "#72b7b2",
                                                               "#54a24b", "#eeca3b", "#b279a2"};

void report_chart_memory(Buf *b, const Report *rep) {
    double W = 760, rowh = 34, L = 90, R = 130, T = 30;
    double H = T + rowh * rep->n_runs + 40;
    double maxv = 1;
    for (int i = 0; i < rep->n_runs; i++) {
        double s = 0;
        for (int c = 0; c < OCR_MEM_CATEGORY_COUNT; c++) s += (double)rep->runs[i].r.memory.stats.peak[c];
        if (s > maxv) maxv = s;
    }
    bprintf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %.0f %.0f\" class=\"chart\" role=\"img\">\n"
               "<title>Peak memory by category</title><text x=\"%.0f\" y=\"18\" class=\"ct\">Peak memory by category "
               "(stacked per-category peaks; | = peak total)</text>\n",
            W, H, L);
    char x[32];
    for (int i = 0; i < rep->n_runs; i++) {
        const OcrMemStats *m = &rep->runs[i].r.memory.stats;
        double y = T + rowh * i + 6, at = L;
        bprintf(b, "<text x=\"%.0f\" y=\"%.1f\" class=\"tl\" text-anchor=\"end\">", L - 6, y + 15);
        besc(b, rep->runs[i].name);
        bprintf(b, "</text>\n");
        for (int c = 0; c < OCR_MEM_CATEGORY_COUNT; c++) {
            double w = (double)m->peak[c] / maxv * (W - L - R);
            if (w <= 0) continue;
            bprintf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"22\" fill=\"%s\"><title>%s %s</title></rect>",
                    at, y, w, MEM_COLORS[c], ocr_mem_category_name((ocr_mem_category_t)c),
                    fmt_bytes(m->peak[c], x, sizeof x));
            at += w;
        }
        double tx = L + (double)m->peak_total / maxv * (W - L - R);
        bprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\" stroke-width=\"2\"/>", tx,
                y - 3, tx, y + 25);
        bprintf(b, "<text x=\"%.1f\" y=\"%.1f\" class=\"tl\">%s</text>\n", at + 6, y + 15,
                fmt_bytes(m->peak_total, x, sizeof x));
    }
    double lx = L, ly = H - 14;
    for (int c = 0; c < OCR_MEM_CATEGORY_COUNT; c++) {
        const char *name = ocr_mem_category_name((ocr_mem_category_t)c);
        bprintf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"%s\"/><text x=\"%.1f\" y=\"%.1f\" "
                   "class=\"tl\">%s</text>",
                lx, ly - 9, MEM_COLORS[c], lx + 13, ly, name);
        lx += 26 + 7.0 * (double)strlen(name);
    }
    bprintf(b, "\n</svg>\n");
}

void report_chart_throughput(Buf *b, const Report *rep) {
    double W = 760, rowh = 30, L = 90, R = 280, T = 30;
    double H = T + rowh * rep->n_runs + 16;
    double maxv = 1e-9;
    for (int i = 0; i < rep->n_runs; i++)
        if (rep->runs[i].r.throughput.samples_per_s > maxv) maxv = rep->runs[i].r.throughput.samples_per_s;
    bprintf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %.0f %.0f\" class=\"chart\" role=\"img\">\n"
               "<title>Training throughput</title><text x=\"%.0f\" y=\"18\" class=\"ct\">Training throughput "
               "(samples/s, steady state) and time per epoch</text>\n",
            W, H, L);
    char e[32];
    for (int i = 0; i < rep->n_runs; i++) {
        const TrainResult *r = &rep->runs[i].r;
        double y = T + rowh * i + 4, w = r->throughput.samples_per_s / maxv * (W - L - R);
        bprintf(b, "<text x=\"%.0f\" y=\"%.1f\" class=\"tl\" text-anchor=\"end\">", L - 6, y + 14);
        besc(b, rep->runs[i].name);
        bprintf(b, "</text><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"20\" fill=\"%s\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\" class=\"tl\">%.1f samples/s · batch %d · epoch %s</text>\n",
                L, y, w, COLORS[i % 8], L + w + 6, y + 14, r->throughput.samples_per_s, r->config.batch_size,
                fmt_secs(r->throughput.epoch_seconds, e, sizeof e));
    }
    bprintf(b, "</svg>\n");
}

// Every seed's final accuracy, one row per run: each point a training (hollow: diverged), the
// bar the run's mean over its seeds. The spread of the baseline's row is its noise floor.
void report_chart_seeds(Buf *b, const Report *rep) {
    double lo = INFINITY, hi = -INFINITY;
    int points = 0;
    for (int i = 0; i < rep->n_runs; i++)
        for (int k = 0; k < rep->runs[i].n_seeds; k++) {
            const ReportSeedRun *s = &rep->runs[i].seeds[k];
            if (s->status == REPORT_SEED_FAILED) continue;
            lo = fmin(lo, s->acc);
            hi = fmax(hi, s->acc);
            points++;
        }
    if (!points) return;
    double pad = fmax(0.005, 0.1 * (hi - lo));
    const double rowh = 34;
    Axes a = {lo - pad, hi + pad, 0, 1, 0, 760, 0, 110, 16, 28, 36};
    a.H = a.T + a.B + rowh * rep->n_runs;
    svg_begin(b, &a, "Final accuracy at every seed (one point per training; bar: mean over seeds)", "accuracy", NULL);
    svg_xticks_real(b, &a);
    for (int i = 0; i < rep->n_runs; i++) {
        const ReportRun *run = &rep->runs[i];
        double y = a.T + rowh * (i + 0.5);
        bprintf(b, "<text x=\"%.1f\" y=\"%.1f\" class=\"tl\" text-anchor=\"end\">", a.L - 6, y + 4);
        besc(b, run->name);
        bprintf(b, "</text>\n<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"gr\"/>\n", a.L, y, a.W - a.R, y);
        double sum = 0;
        int n = 0;
        for (int k = 0; k < run->n_seeds; k++) {
            const ReportSeedRun *s = &run->seeds[k];
            if (s->status == REPORT_SEED_FAILED) continue;
            // A small vertical offset per seed keeps equal accuracies apart.
            double dy = run->n_seeds > 1 ? -8 + 16.0 * k / (run->n_seeds - 1) : 0;
            bprintf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\" stroke=\"%s\"%s><title>", px(&a, s->acc),
                    y + dy, s->status == REPORT_SEED_OK ? COLORS[i % 8] : "none", COLORS[i % 8],
                    s->status == REPORT_SEED_OK ? "" : " stroke-width=\"2\"");
            besc(b, run->name);
            bprintf(b, " seed %llu: %.4f%s</title></circle>\n", (unsigned long long)s->seed, s->acc,
                    s->status == REPORT_SEED_DIVERGED ? " (diverged)" : "");
            sum += s->acc;
            n++;
        }
        if (n)
            bprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"/>\n",
                    px(&a, sum / n), y - 12, px(&a, sum / n), y + 12, COLORS[i % 8]);
    }
    bprintf(b, "</svg>\n");
}

// The change's effect on accuracy per run: every seed pair's difference (points), the mean with
// its 95 % interval (training noise and line sampling), the tolerance band around 0, and the
// baseline's seed-to-seed SD as a grey band (what one pair of runs can differ by with no change).
void report_chart_effect(Buf *b, const Report *rep) {
    double lo = -rep->tolerance, hi = rep->tolerance;
    int any = 0;
    double floor_sd = NAN;
    for (int i = 1; i < rep->n_runs; i++) {
        const ReportSeeded *s = &rep->runs[i].seeded;
        if (!s->has) continue;
        any = 1;
        lo = fmin(lo, s->res.acc.ci.lo);
        hi = fmax(hi, s->res.acc.ci.hi);
        for (int k = 0; k < s->res.seeds; k++) {
            lo = fmin(lo, s->res.acc_delta[k]);
            hi = fmax(hi, s->res.acc_delta[k]);
        }
        if (isfinite(s->res.acc.base_sd)) floor_sd = s->res.acc.base_sd;
    }
    if (!any) return;
    if (isfinite(floor_sd)) {
        lo = fmin(lo, -floor_sd);
        hi = fmax(hi, floor_sd);
    }
    double pad = 0.08 * (hi - lo);
    const double rowh = 34;
    Axes a = {lo - pad, hi + pad, 0, 1, 0, 760, 0, 110, 16, 28, 36};
    a.H = a.T + a.B + rowh * (rep->n_runs - 1) + 14;
    svg_begin(b, &a, "Accuracy change against the baseline: per seed (points), mean and 95% interval (bar)",
              "accuracy difference (candidate − baseline)", NULL);
    svg_xticks_real(b, &a);
    double top = a.T, bottom = a.H - a.B;
    if (isfinite(floor_sd))
        bprintf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#000\" fill-opacity=\"0.06\">"
                   "<title>baseline seed-to-seed SD ±%.4f</title></rect>\n",
                px(&a, -floor_sd), top, px(&a, floor_sd) - px(&a, -floor_sd), bottom - top, floor_sd);
    bprintf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#2e9e44\" fill-opacity=\"0.12\">"
               "<title>tolerance ±%.4g</title></rect>\n",
            px(&a, -rep->tolerance), top, px(&a, rep->tolerance) - px(&a, -rep->tolerance), bottom - top, rep->tolerance);
    bprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"ax\"/>\n", px(&a, 0), top, px(&a, 0), bottom);
    for (int i = 1; i < rep->n_runs; i++) {
        const ReportSeeded *s = &rep->runs[i].seeded;
        double y = a.T + 7 + rowh * (i - 0.5);
        bprintf(b, "<text x=\"%.1f\" y=\"%.1f\" class=\"tl\" text-anchor=\"end\">", a.L - 6, y + 4);
        besc(b, rep->runs[i].name);
        bprintf(b, "</text>\n");
        if (!s->has) continue;
        const SeedsMetric *m = &s->res.acc;
        bprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"4\" "
                   "stroke-opacity=\"0.5\"><title>95%% interval [%+.4f, %+.4f]</title></line>\n",
                px(&a, m->ci.lo), y, px(&a, m->ci.hi), y, COLORS[i % 8], m->ci.lo, m->ci.hi);
        bprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"><title>mean "
                   "%+.4f</title></line>\n", px(&a, m->delta), y - 10, px(&a, m->delta), y + 10, COLORS[i % 8], m->delta);
        for (int k = 0; k < s->res.seeds; k++)
            bprintf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"><title>seed %llu: %+.4f</title></circle>\n",
                    px(&a, s->res.acc_delta[k]), y - 12, COLORS[i % 8],
                    (unsigned long long)rep->runs[0].seeds[s->pair_seed[k]].seed, s->res.acc_delta[k]);
    }
    bprintf(b, "</svg>\n");
}

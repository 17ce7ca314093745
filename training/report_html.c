// report.html: the comparison as one self-contained page (inline CSS, the SVG charts of
// report_svg.c, no script), one function per section in the order the page reads (report_html at
// the end lists them): head, title and verdict, pretrained start, runs, gradient all-reduce, the
// paired verdict, deltas against the baseline, training charts, memory and speed, machine and build.
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "training/report_internal.h"

// <head> with the page's style sheet, up to <body>.
static void html_head(Buf *b) {
    bprintf(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
               "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
               "<title>ocrtrain: FP32 vs AMP</title>\n<style>\n"
               "body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;max-width:980px;"
               "color:#222;padding:0 12px}\n"
               "h1{font-size:1.5em;margin-bottom:4px}h2{font-size:1.15em;margin-top:28px;border-bottom:1px solid #ddd}\n"
               "table{border-collapse:collapse;font-size:.88em;margin:8px 0;width:100%%}"
               "td,th{border:1px solid #ddd;padding:4px 7px;text-align:right}th{background:#f4f4f4}"
               "td:first-child,th:first-child{text-align:left}\n"
               ".verdict{padding:10px 14px;border-radius:6px;font-weight:600;margin:12px 0}"
               ".pass{background:#e5f5e8;border:1px solid #3a9d4f}.fail{background:#fde8e6;border:1px solid #d0392b}"
               ".undecided{background:#fff6dd;border:1px solid #c48a00}\n"
               ".bad{color:#c0392b;font-weight:600}.ok{color:#2e7d32}.muted{color:#666;font-size:.88em}\n"
               "svg.chart{width:100%%;height:auto;margin:10px 0;background:#fff}"
               ".ct{font-size:13px;font-weight:600}.al{font-size:11px;fill:#444}.tl{font-size:10.5px;fill:#333}"
               ".ax{stroke:#333;stroke-width:1}.tk{stroke:#333}.gr{stroke:#e6e6e6}\n"
               "</style></head><body>\n");
}

// The title, the model and data in a line, the verdict box, the eval set's paths.
static void html_title(Buf *b, const Report *rep) {
    int code = report_exit_code(rep);
    bprintf(b, "<h1>FP32 vs AMP: ");
    besc(b, rep->algorithm);
    bprintf(b, "</h1>\n<div class=\"muted\">");
    besc(b, rep->config_path ? rep->config_path : "");
    bprintf(b, " · %lld parameters · input %dx%dx%d · %lld train / %lld eval samples · %lld epoch(s) · device ",
            (long long)rep->params, rep->in_channels, rep->height, rep->width, (long long)rep->train_samples,
            (long long)rep->eval_samples, (long long)rep->epochs);
    besc(b, rep->device);
    bprintf(b, " · %s</div>\n", rep->created_utc);
    bprintf(b, "<div class=\"verdict %s\">",
            code == REPORT_EXIT_REGRESSION ? "fail" : code == REPORT_EXIT_INCONCLUSIVE ? "undecided" : "pass");
    {
        Buf t = {0};
        report_verdict_text(&t, rep);
        if (t.s) besc(b, t.s);
        free(t.s);
    }
    bprintf(b, "</div>\n");
    if (rep->n_runs > 0 && rep->runs[0].eval_paths.lines > 0) {
        char sum[1024];
        eval_paths_summary(&rep->runs[0].eval_paths, sum, sizeof sum);
        bprintf(b, "<p class=\"muted\">Eval set: ");
        besc(b, sum);
        bprintf(b, ".</p>\n");
    }
}

// What fine-tuning changed: the pretrained weights' accuracy before training against each run's after it.
static void html_start(Buf *b, const Report *rep) {
    if (rep->has_start) {
        bprintf(b, "<p>Before training, the pretrained weights <code>");
        besc(b, rep->start_weights);
        bprintf(b, "</code> (FP32) read <b>%.4f</b> of the same %lld eval lines (CER %.4f); after it:", rep->start_acc,
                (long long)rep->start_samples, rep->start_cer);
        for (int i = 0; i < rep->n_runs; i++) {
            bprintf(b, "%s ", i ? "," : "");
            besc(b, rep->runs[i].name);
            bprintf(b, " <b>%.4f</b> (%+.4f)", rep->runs[i].r.outcome.acc, rep->runs[i].r.outcome.acc - rep->start_acc);
        }
        bprintf(b, ".</p>\n");
    }
}

// The target set next to the general one (EvalGeneral), as report.md's section.
static void html_general(Buf *b, const Report *rep) {
    if (!rep->has_general) return;
    bprintf(b, "<h2>Target set and general text</h2>\n");
    for (int i = 0; i < rep->n_runs; i++) {
        char line[512];
        report_forgetting_line(rep, i, line, sizeof line);
        if (!line[0]) continue;
        bprintf(b, "<p>");
        besc(b, line);
        bprintf(b, "</p>\n");
    }
    bprintf(b, "<table><tr><th></th><th>Eval exact</th><th>Eval spaces ignored</th><th>EvalGeneral exact</th>"
               "<th>EvalGeneral spaces ignored</th></tr>\n");
    if (rep->has_start)
        bprintf(b, "<tr><td>pretrained</td><td>%.4f</td><td>%.4f</td><td>%.4f</td><td>%.4f</td></tr>\n",
                rep->start_acc_exact, rep->start_acc_nospace, rep->start_general_acc_exact, rep->start_general_acc_nospace);
    for (int i = 0; i < rep->n_runs; i++) {
        double v[4];
        int k = report_run_means(rep, i, &v[0], &v[1], &v[2], &v[3]);
        double s0[4] = {rep->start_acc_exact, rep->start_acc_nospace, rep->start_general_acc_exact,
                        rep->start_general_acc_nospace};
        bprintf(b, "<tr><td>");
        besc(b, rep->runs[i].name);
        bprintf(b, " (%d seed%s)</td>", k, k == 1 ? "" : "s");
        for (int c = 0; c < 4; c++) {
            if (!k) bprintf(b, "<td>-</td>");
            else if (rep->has_start) bprintf(b, "<td>%.4f (%+.1f)</td>", v[c], 100 * (v[c] - s0[c]));
            else bprintf(b, "<td>%.4f</td>", v[c]);
        }
        bprintf(b, "</tr>\n");
    }
    bprintf(b, "</table>\n");
    for (int i = 1; i < rep->n_runs; i++) {
        const ReportSeeded *sd[2] = {&rep->runs[i].general_exact, &rep->runs[i].general_nospace};
        const char *what[2] = {"exact match", "spaces ignored"};
        bprintf(b, "<p>General text, ");
        besc(b, rep->runs[i].name);
        bprintf(b, " against ");
        besc(b, rep->runs[0].name);
        bprintf(b, " over seeds:");
        for (int k = 0; k < 2; k++) {
            if (sd[k]->has)
                bprintf(b, "%s %s %+.2f points [%+.2f, %+.2f] <b>%s</b>", k ? ";" : "", what[k],
                        100 * sd[k]->res.acc.delta, 100 * sd[k]->res.acc.ci.lo, 100 * sd[k]->res.acc.ci.hi,
                        paired_verdict_name(sd[k]->res.acc.verdict));
            else
                bprintf(b, "%s %s not judged", k ? ";" : "", what[k]);
        }
        bprintf(b, " (not part of the exit code).</p>\n");
    }
    if (rep->runs[0].general_paths.lines > 0) {
        char sum[1024];
        eval_paths_summary(&rep->runs[0].general_paths, sum, sizeof sum);
        bprintf(b, "<p class=\"muted\">General set: ");
        besc(b, sum);
        bprintf(b, ".</p>\n");
    }
}

// One row per run: its configuration, speed, memory, accuracy and loss scaling.
static void html_runs(Buf *b, const Report *rep) {
    char x[32], y[32];
    bprintf(b, "<h2>Runs</h2>\n<table><tr><th>run</th><th>level</th><th>dtype</th><th>batch</th><th>samples/s</th>"
               "<th>median step</th><th>epoch time</th><th>peak memory</th><th>accuracy</th><th>norm. edit dist.</th>"
               "<th>CER</th><th>final loss</th><th>skipped</th><th>final scale</th></tr>\n");
    for (int i = 0; i < rep->n_runs; i++) {
        const TrainResult *r = &rep->runs[i].r;
        bprintf(b, "<tr><td><b style=\"color:%s\">", COLORS[i % 8]);
        besc(b, rep->runs[i].name);
        bprintf(b, "</b></td><td>%s</td><td>%s</td><td>%d</td><td>%.1f</td><td>%.3f s</td><td>%s</td><td>%s</td>"
                   "<td>%.4f</td><td>%.4f</td><td>%.4f</td><td>%.4f</td><td%s>%lld</td><td>%g</td></tr>\n",
                r->config.amp_level, r->config.amp_dtype, r->config.batch_size, r->throughput.samples_per_s, r->throughput.median_step_s,
                fmt_secs(r->throughput.epoch_seconds, x, sizeof x), fmt_bytes(r->memory.stats.peak_total, y, sizeof y), r->outcome.acc,
                r->outcome.norm_edit_dis, r->outcome.cer, r->outcome.final_loss, r->amp.skipped_steps ? " class=\"bad\"" : "",
                (long long)r->amp.skipped_steps, (double)r->amp.final_scale);
    }
    bprintf(b, "</table>\n");
}

// Data parallelism: each run's gradient all-reduce per step and rank (FP16/BF16-O2: about half).
static void html_allreduce(Buf *b, const Report *rep) {
    char x[32];
    if (rep->n_runs > 0 && rep->runs[0].r.dist.allreduce_bytes_per_step > 0) {
        const TrainResult *r0 = &rep->runs[0].r;
        bprintf(b, "<p>Gradient all-reduce per step and rank (%s, %d rank%s, global batch %lld):", r0->dist.backend,
                r0->dist.world_size, r0->dist.world_size == 1 ? "" : "s", (long long)r0->dist.global_batch);
        for (int i = 0; i < rep->n_runs; i++) {
            const TrainResult *r = &rep->runs[i].r;
            bprintf(b, "%s ", i ? ";" : "");
            besc(b, rep->runs[i].name);
            bprintf(b, " <b>%s</b> (%.3f&times;)", fmt_bytes(r->dist.allreduce_bytes_per_step, x, sizeof x),
                    ratio((double)r->dist.allreduce_bytes_per_step, (double)r0->dist.allreduce_bytes_per_step));
            if (r->dist.world_size > 1)
                bprintf(b, ", %.2f ms, %.0f %% behind the backward, %.1f samples/s over the ranks",
                        1e3 * r->dist.allreduce_seconds_per_step, 100 * r->dist.comm_hidden_fraction, r->dist.global_samples_per_s);
        }
        bprintf(b, ".</p>\n");
    }
}


// The verdict over seeds: what was measured (plain words), every seed's point, the effect with
// its interval against the tolerance and the baseline's noise floor, and the tables.
static void html_seeds(Buf *b, const Report *rep) {
    if (rep->n_runs < 2) return;
    static const char *const status[] = {"ok", "diverged", "FAILED"};
    bprintf(b, "<h2>Verdict over seeds</h2>\n<p>");
    Buf e = {0};
    report_seeds_explanation(&e, rep);
    if (e.s) besc(b, e.s);
    free(e.s);
    bprintf(b, "</p>\n");
    report_chart_seeds(b, rep);
    report_chart_effect(b, rep);
    bprintf(b, "<table><tr><th>seed</th>");
    for (int i = 0; i < rep->n_runs; i++) {
        bprintf(b, "<th>");
        besc(b, rep->runs[i].name);
        bprintf(b, " accuracy</th><th>CER</th>");
    }
    bprintf(b, "</tr>\n");
    for (int k = 0; k < rep->n_seeds; k++) {
        bprintf(b, "<tr><td>%llu</td>", (unsigned long long)rep->seeds[k]);
        for (int i = 0; i < rep->n_runs; i++) {
            const ReportSeedRun *sr = &rep->runs[i].seeds[k];
            if (sr->status == REPORT_SEED_FAILED) {
                bprintf(b, "<td class=\"bad\" colspan=\"2\" title=\"");
                besc(b, sr->error);
                bprintf(b, "\">failed</td>");
            } else {
                bprintf(b, "<td%s>%.4f%s%s</td><td>%.4f</td>", sr->status ? " class=\"bad\"" : "", sr->acc,
                        sr->status ? " " : "", sr->status ? status[sr->status] : "", sr->cer);
            }
        }
        bprintf(b, "</tr>\n");
    }
    bprintf(b, "</table>\n<table><tr><th>run</th><th>seeds paired</th><th>Δ accuracy [95%% CI]</th><th>");
    besc(b, rep->runs[0].name);
    bprintf(b, " seed SD</th><th>Δ CER [95%% CI]</th><th>training share</th><th>verdict</th><th>seeds needed</th>"
               "<th>lines needed</th></tr>\n");
    for (int i = 1; i < rep->n_runs; i++) {
        const ReportSeeded *sd = &rep->runs[i].seeded;
        paired_verdict_t v = report_run_verdict(rep, i);
        const char *cls = v == PAIRED_REGRESSION ? "bad" : v == PAIRED_INCONCLUSIVE ? "" : "ok";
        bprintf(b, "<tr><td>");
        besc(b, rep->runs[i].name);
        if (!sd->has) {
            bprintf(b, "</td><td>0</td><td colspan=\"4\">");
            besc(b, sd->reason);
            bprintf(b, "</td><td class=\"%s\">%s</td><td>-</td><td>-</td></tr>\n", cls, verdict_upper(v));
            continue;
        }
        const SeedsMetric *a = &sd->res.acc, *c = &sd->res.cer;
        char ca[80], cc[80], sn[32], ln[32];
        fmt_ci(ca, sizeof ca, a->delta, a->ci);
        fmt_ci(cc, sizeof cc, c->delta, c->ci);
        double share;
        seeded_cells(sd, v, sn, sizeof sn, ln, sizeof ln, &share);
        bprintf(b, "</td><td>%d%s</td><td>%s</td><td>", sd->pairs, sd->res.seeds < 2 ? " (noise assumed)" : "", ca);
        if (isfinite(a->base_sd)) bprintf(b, "%.4f", a->base_sd);
        else bprintf(b, "-");
        bprintf(b, "</td><td>%s</td><td>%.0f%%</td><td class=\"%s\">%s</td><td>%s</td><td>%s</td></tr>\n", cc,
                100 * share, cls, verdict_upper(v), sn, ln);
        if (sd->reason[0]) {
            bprintf(b, "<tr><td></td><td colspan=\"8\" class=\"bad\">");
            besc(b, sd->reason);
            bprintf(b, "</td></tr>\n");
        }
    }
    bprintf(b, "</table>\n<p class=\"muted\">Training share: the part of the accuracy interval's variance that comes "
               "from training noise (seed to seed) rather than from which eval lines were drawn.</p>\n");
}

// Each AMP run paired line by line with the baseline: the table, the intervals, the verdicts.
static void html_paired(Buf *b, const Report *rep) {
    if (rep->n_runs > 1) {
        bprintf(b, "<h2>Per line at the first seed, against ");
        besc(b, rep->runs[0].name);
        bprintf(b, "</h2>\n<table><tr><th>run</th><th>lines</th><th>both right</th><th>both wrong</th><th>");
        besc(b, rep->runs[0].name);
        bprintf(b, " only right</th><th>run only right</th><th>Δ accuracy [95%% CI]</th><th>McNemar p</th>"
                   "<th>Δ CER [95%% CI]</th><th>verdict</th><th>lines needed</th></tr>\n");
        for (int i = 1; i < rep->n_runs; i++) {
            const ReportPaired *p = &rep->runs[i].paired;
            bprintf(b, "<tr><td>");
            besc(b, rep->runs[i].name);
            if (!p->has) {
                bprintf(b, "</td><td colspan=\"10\">no per-line results: inconclusive</td></tr>\n");
                continue;
            }
            char ca[80], cc[80], nb[64];
            fmt_ci(ca, sizeof ca, p->acc_delta, p->acc_ci);
            fmt_ci(cc, sizeof cc, p->cer_delta, p->cer_ci);
            int64_t need = p->acc_verdict == PAIRED_INCONCLUSIVE && (p->cer_verdict != PAIRED_INCONCLUSIVE ||
                                                                     p->acc_lines_needed > p->cer_lines_needed)
                               ? p->acc_lines_needed
                               : p->cer_lines_needed;
            const char *cls = p->verdict == PAIRED_REGRESSION ? "bad" : p->verdict == PAIRED_INCONCLUSIVE ? "" : "ok";
            bprintf(b, "</td><td>%lld</td><td>%lld</td><td>%lld</td><td>%lld</td><td>%lld</td><td>%s (%s)</td>"
                       "<td>%.3g</td><td>%s (%s)</td><td class=\"%s\">%s</td><td>%s</td></tr>\n",
                    (long long)p->lines, (long long)p->table.both_right, (long long)p->table.both_wrong,
                    (long long)p->table.base_only, (long long)p->table.run_only, ca,
                    paired_verdict_name(p->acc_verdict), p->mcnemar_p, cc, paired_verdict_name(p->cer_verdict), cls,
                    verdict_upper(p->verdict),
                    p->verdict == PAIRED_INCONCLUSIVE ? fmt_lines(need, nb, sizeof nb) : "-");
        }
        bprintf(b, "</table>\n<p class=\"muted\">Paired per line: the accuracy interval is Newcombe's hybrid score "
                   "interval for paired proportions, the CER interval a paired bootstrap (%d resamples, seed %llu). "
                   "Pass: neither interval reaches beyond the tolerance on the worse side (non-inferiority); regression: "
                   "one lies entirely beyond it on the worse side; otherwise inconclusive, with the eval set size "
                   "that the same rates would need.</p>\n",
                PAIRED_BOOTSTRAP_B, (unsigned long long)rep->bootstrap_seed);
    }
}

// Each AMP run's deltas and ratios against the baseline.
static void html_against(Buf *b, const Report *rep) {
    char z[32];
    if (rep->n_runs > 1) {
        const TrainResult *f = &rep->runs[0].r;
        bprintf(b, "<h2>Against ");
        besc(b, rep->runs[0].name);
        bprintf(b, "</h2>\n<table><tr><th>run</th><th>Δ accuracy</th><th>Δ norm. edit dist.</th>"
                   "<th>Δ CER</th><th>throughput</th><th>epoch time</th><th>peak memory</th><th>activations</th>"
                   "</tr>\n");
        for (int i = 1; i < rep->n_runs; i++) {
            const TrainResult *r = &rep->runs[i].r;
            bprintf(b, "<tr><td>");
            besc(b, rep->runs[i].name);
            bprintf(b, "</td><td>%+.4f</td><td>%+.4f</td><td>%+.4f</td><td>×%.2f</td>"
                       "<td>×%.2f</td><td>×%.2f (%s%s)</td><td>×%.2f</td></tr>\n",
                    acc_delta(rep, i), r->outcome.norm_edit_dis - f->outcome.norm_edit_dis, r->outcome.cer - f->outcome.cer,
                    ratio(r->throughput.samples_per_s, f->throughput.samples_per_s), ratio(r->throughput.epoch_seconds, f->throughput.epoch_seconds),
                    ratio((double)r->memory.stats.peak_total, (double)f->memory.stats.peak_total),
                    r->memory.stats.peak_total >= f->memory.stats.peak_total ? "+" : "−",
                    fmt_bytes(llabs(r->memory.stats.peak_total - f->memory.stats.peak_total), z, sizeof z),
                    ratio((double)r->memory.stats.peak[OCR_MEM_ACTIVATIONS], (double)f->memory.stats.peak[OCR_MEM_ACTIVATIONS]));
        }
        bprintf(b, "</table>\n");
    }
}

// Loss, accuracy and loss-scale charts, and where the skipped steps overflowed.
static void html_training(Buf *b, const Report *rep) {
    bprintf(b, "<h2>Training</h2>\n");
    report_chart_loss(b, rep);
    report_chart_accuracy(b, rep);
    report_chart_scale(b, rep);
    int any = 0;
    for (int i = 0; i < rep->n_runs; i++) any |= rep->runs[i].r.amp.skipped_steps > 0 || rep->runs[i].r.amp.recomputed_steps > 0;
    if (any) {
        bprintf(b, "<ul>\n");
        for (int i = 0; i < rep->n_runs; i++) {
            const TrainResult *r = &rep->runs[i].r;
            if (!r->amp.skipped_steps && !r->amp.recomputed_steps) continue;
            bprintf(b, "<li>");
            besc(b, rep->runs[i].name);
            bprintf(b, ": %lld skipped step(s)", (long long)r->amp.skipped_steps);
            if (r->amp.recomputed_steps)
                bprintf(b, ", %lld overflowed attempt(s) recomputed at a lower scale (%.2f s)",
                        (long long)r->amp.recomputed_steps, r->amp.recompute_seconds);
            if (r->amp.n_overflow_layers) bprintf(b, "; first overflowing layer: ");
            for (int k = 0; k < r->amp.n_overflow_layers; k++) {
                bprintf(b, "%s<code>", k ? ", " : "");
                besc(b, r->amp.overflow_layer[k]);
                bprintf(b, "</code> (%lld)", (long long)r->amp.overflow_count[k]);
            }
            bprintf(b, "</li>\n");
        }
        bprintf(b, "</ul>\n");
    }
}

// Memory and throughput charts, the peak memory table, the CPU's kernels.
static void html_memory_speed(Buf *b, const Report *rep) {
    char x[32];
    bprintf(b, "<h2>Memory and speed</h2>\n");
    report_chart_memory(b, rep);
    report_chart_throughput(b, rep);
    bprintf(b, "<table><tr><th>run</th>");
    for (int c = 0; c < OCR_MEM_CATEGORY_COUNT; c++) bprintf(b, "<th>%s</th>", ocr_mem_category_name((ocr_mem_category_t)c));
    bprintf(b, "<th>total</th></tr>\n");
    for (int i = 0; i < rep->n_runs; i++) {
        const OcrMemStats *m = &rep->runs[i].r.memory.stats;
        bprintf(b, "<tr><td>");
        besc(b, rep->runs[i].name);
        bprintf(b, "</td>");
        for (int c = 0; c < OCR_MEM_CATEGORY_COUNT; c++) bprintf(b, "<td>%s</td>", fmt_bytes(m->peak[c], x, sizeof x));
        bprintf(b, "<td><b>%s</b></td></tr>\n", fmt_bytes(m->peak_total, x, sizeof x));
    }
    bprintf(b, "</table>\n");
    if (strncmp(rep->device, "cuda", 4) != 0) {
        char isa[160];
        ocr_backend_cpu_isa(isa, sizeof isa);
        bprintf(b, "<p class=\"muted\">CPU GEMMs and convolutions: %s. An emulated dtype is stored and rounded exactly "
                   "as on a GPU but computed in fp32 (slower than FP32 here).</p>\n", isa);
    }
}

// The machine, the device and the build, one table row each.
static void html_machine(Buf *b, const Report *rep, const MachineInfo *mi) {
    char x[32], y[32];
    bprintf(b, "<h2>Machine and build</h2>\n<table>");
#define ROW(k, v)                                  \
    do {                                           \
        bprintf(b, "<tr><td>%s</td><td style=\"text-align:left\">", k); \
        besc(b, v);                                \
        bprintf(b, "</td></tr>\n");                \
    } while (0)
    ROW("host", mi->hostname);
    ROW("OS", mi->os);
    ROW("CPU", mi->cpu_model);
    snprintf(x, sizeof x, "%d", mi->cpu_cores);
    ROW("cores", x);
    ROW("memory", fmt_bytes(mi->memory_bytes, y, sizeof y));
    snprintf(x, sizeof x, "%d", mi->gpus);
    ROW("GPUs", x);
    ROW("device", rep->device);
    const TrainingDeviceInfo *gi = rep->n_runs > 0 ? &rep->runs[0].r.device.info : NULL;
    if (gi && gi->gpu) {
        char g[600];
        snprintf(g, sizeof g, "%s, compute capability %d.%d, %d SMs", gi->name, gi->cc_major, gi->cc_minor,
                 gi->multiprocessors);
        ROW("GPU", g);
        ROW("GPU memory", fmt_bytes(gi->total_memory, y, sizeof y));
        snprintf(g, sizeof g, "driver %d, runtime %d; %s", gi->driver_version, gi->runtime_version, gi->libraries);
        ROW("CUDA", g);
        ROW("FP32", gi->allow_tf32 ? "TF32 tensor cores (Global.allow_tf32)" : "true FP32 (TF32 off)");
        if (gi->note[0]) ROW("note", gi->note);
    }
    ROW("version", rep->version ? rep->version : training_version());
    ROW("backends", mi->backends);
    ROW("compiler", mi->compiler);
    ROW("build", mi->build_type);
    ROW("command", rep->command);
#undef ROW
    bprintf(b, "</table>\n");
}

// Where every figure is, and the end of the page.
static void html_foot(Buf *b) {
    bprintf(b, "<p class=\"muted\">report.json holds every figure above (schema %s v%d).</p>\n</body></html>\n",
            REPORT_SCHEMA, REPORT_SCHEMA_VERSION);
}

void report_html(Buf *b, const Report *rep, const MachineInfo *mi) {
    html_head(b);
    html_title(b, rep);
    html_start(b, rep);
    html_general(b, rep);
    html_runs(b, rep);
    html_allreduce(b, rep);
    html_seeds(b, rep);
    html_paired(b, rep);
    html_against(b, rep);
    html_training(b, rep);
    html_memory_speed(b, rep);
    html_machine(b, rep, mi);
    html_foot(b);
}

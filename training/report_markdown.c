// report.md: the comparison as Markdown, one function per section in the order the document reads
// (report_markdown at the end lists them): title and verdict, runs, gradient all-reduce, the
// pretrained start, the paired verdict, deltas against the baseline, peak memory, skipped steps,
// machine, the CPU's kernels.
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "training/report_internal.h"

// The title, the verdict, the model and data in a sentence, the eval set's paths.
static void md_title(Buf *b, const Report *rep) {
    bprintf(b, "# ocrtrain compare: FP32 vs AMP\n\n**Verdict: ");
    report_verdict_text(b, rep);
    bprintf(b, "**\n\n");
    bprintf(b, "Model %s (%s), %lld parameters, input %dx%dx%d, %d classes. Train %lld samples, eval %lld samples, "
            "%lld epoch(s), seed %llu. Device `%s` (%d threads).\n\n",
            rep->algorithm, rep->backbone, (long long)rep->params, rep->in_channels, rep->height, rep->width,
            rep->classes, (long long)rep->train_samples, (long long)rep->eval_samples, (long long)rep->epochs,
            (unsigned long long)rep->seed, rep->device, rep->threads);
    if (rep->n_runs > 0 && rep->runs[0].eval_paths.lines > 0) {
        char sum[1024];
        eval_paths_summary(&rep->runs[0].eval_paths, sum, sizeof sum);
        bprintf(b, "Eval set: %s.\n\n", sum);
    }
}

// One row per run: its configuration, speed, memory, accuracy and loss scaling.
static void md_runs(Buf *b, const Report *rep) {
    char x[32], y[32];
    bprintf(b, "| run | level | dtype | batch | samples/s | median step | epoch time | peak memory | accuracy | "
               "norm. edit dist. | CER | final loss | skipped | final scale |\n");
    bprintf(b, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < rep->n_runs; i++) {
        const TrainResult *r = &rep->runs[i].r;
        bprintf(b, "| %s | %s | %s | %d | %.1f | %.3f s | %s | %s | %.4f | %.4f | %.4f | %.4f | %lld | %g |\n",
                rep->runs[i].name, r->config.amp_level, r->config.amp_dtype, r->config.batch_size, r->throughput.samples_per_s, r->throughput.median_step_s,
                fmt_secs(r->throughput.epoch_seconds, x, sizeof x), fmt_bytes(r->memory.stats.peak_total, y, sizeof y), r->outcome.acc,
                r->outcome.norm_edit_dis, r->outcome.cer, r->outcome.final_loss, (long long)r->amp.skipped_steps, (double)r->amp.final_scale);
    }
}

// Data parallelism: what each run's gradients cost on the wire (FP16/BF16-O2: half of FP32).
static void md_allreduce(Buf *b, const Report *rep) {
    char x[32];
    if (rep->n_runs > 0 && rep->runs[0].r.dist.allreduce_bytes_per_step > 0) {
        const TrainResult *r0 = &rep->runs[0].r;
        bprintf(b, "\nGradient all-reduce per step and rank (%s, %d rank%s, global batch %lld):", r0->dist.backend,
                r0->dist.world_size, r0->dist.world_size == 1 ? "" : "s", (long long)r0->dist.global_batch);
        for (int i = 0; i < rep->n_runs; i++) {
            const TrainResult *r = &rep->runs[i].r;
            bprintf(b, "%s %s %s (%.3f x %s)", i ? ";" : "", rep->runs[i].name,
                    fmt_bytes(r->dist.allreduce_bytes_per_step, x, sizeof x),
                    ratio((double)r->dist.allreduce_bytes_per_step, (double)r0->dist.allreduce_bytes_per_step),
                    rep->runs[0].name);
            if (r->dist.world_size > 1)
                bprintf(b, ", %.2f ms, %.0f %% behind the backward, %.1f samples/s over the ranks",
                        1e3 * r->dist.allreduce_seconds_per_step, 100 * r->dist.comm_hidden_fraction, r->dist.global_samples_per_s);
            if (r->dist.sync_bn)
                bprintf(b, ", batch norm synchronised over the ranks (%s of statistics)",
                        fmt_bytes(r->dist.bn_sync_bytes_per_step, x, sizeof x));
        }
        bprintf(b, ".\n");
    }
}

// What fine-tuning changed: the pretrained weights' accuracy before training against each run's after it.
static void md_start(Buf *b, const Report *rep) {
    if (rep->has_start) {
        bprintf(b, "\nBefore training, the pretrained weights `%s` (FP32) read %.4f of the same %lld eval lines "
                   "(CER %.4f, norm. edit dist. %.4f); after it:",
                rep->start_weights, rep->start_acc, (long long)rep->start_samples, rep->start_cer,
                rep->start_norm_edit_dis);
        for (int i = 0; i < rep->n_runs; i++)
            bprintf(b, "%s %s %.4f (%+.4f)", i ? "," : "", rep->runs[i].name, rep->runs[i].r.outcome.acc,
                    rep->runs[i].r.outcome.acc - rep->start_acc);
        bprintf(b, ".\n");
    }
}

// The target set next to the general one (EvalGeneral): each run's mean over seeds, both
// accuracies, the change from the pretrained weights, and the seed-aware verdicts on general text.
static void md_general(Buf *b, const Report *rep) {
    if (!rep->has_general) return;
    bprintf(b, "\n## Target set and general text\n\n");
    for (int i = 0; i < rep->n_runs; i++) {
        char line[512];
        report_forgetting_line(rep, i, line, sizeof line);
        if (line[0]) bprintf(b, "%s\n", line);
    }
    bprintf(b, "\n| | Eval exact | Eval spaces ignored | EvalGeneral exact | EvalGeneral spaces ignored |\n"
               "|---|---:|---:|---:|---:|\n");
    if (rep->has_start)
        bprintf(b, "| pretrained | %.4f | %.4f | %.4f | %.4f |\n", rep->start_acc_exact, rep->start_acc_nospace,
                rep->start_general_acc_exact, rep->start_general_acc_nospace);
    for (int i = 0; i < rep->n_runs; i++) {
        double ae, an, ge, gn;
        int k = report_run_means(rep, i, &ae, &an, &ge, &gn);
        if (!k) {
            bprintf(b, "| %s | - | - | - | - |\n", rep->runs[i].name);
            continue;
        }
        bprintf(b, "| %s (%d seed%s) |", rep->runs[i].name, k, k == 1 ? "" : "s");
        double v[4] = {ae, an, ge, gn}, s0[4] = {rep->start_acc_exact, rep->start_acc_nospace,
                                                 rep->start_general_acc_exact, rep->start_general_acc_nospace};
        for (int c = 0; c < 4; c++) {
            if (rep->has_start) bprintf(b, " %.4f (%+.1f) |", v[c], 100 * (v[c] - s0[c]));
            else bprintf(b, " %.4f |", v[c]);
        }
        bprintf(b, "\n");
    }
    if (rep->has_start) bprintf(b, "\nIn brackets: the change from the pretrained weights, in points.\n");
    for (int i = 1; i < rep->n_runs; i++) {
        const ReportSeeded *sd[2] = {&rep->runs[i].general_exact, &rep->runs[i].general_nospace};
        const char *what[2] = {"exact match", "spaces ignored"};
        bprintf(b, "\nGeneral text, %s against %s over seeds:", rep->runs[i].name, rep->runs[0].name);
        for (int k = 0; k < 2; k++) {
            if (sd[k]->has)
                bprintf(b, "%s %s %+.2f points [%+.2f, %+.2f] %s", k ? ";" : "", what[k], 100 * sd[k]->res.acc.delta,
                        100 * sd[k]->res.acc.ci.lo, 100 * sd[k]->res.acc.ci.hi, paired_verdict_name(sd[k]->res.acc.verdict));
            else
                bprintf(b, "%s %s not judged (%s)", k ? ";" : "", what[k], sd[k]->reason[0] ? sd[k]->reason : "no pair");
        }
        if (sd[0]->has)
            bprintf(b, "; CER %+.2f points [%+.2f, %+.2f] %s", 100 * sd[0]->res.cer.delta, 100 * sd[0]->res.cer.ci.lo,
                    100 * sd[0]->res.cer.ci.hi, paired_verdict_name(sd[0]->res.cer.verdict));
        bprintf(b, ". (Not part of the exit code.)\n");
    }
    if (rep->runs[0].general_paths.lines > 0) {
        char sum[1024];
        eval_paths_summary(&rep->runs[0].general_paths, sum, sizeof sum);
        bprintf(b, "\nGeneral set: %s.\n", sum);
    }
}

static const char *const SEED_STATUS[] = {"ok", "DIVERGED", "FAILED"};

// The verdict over seeds: what was measured, every seed's scores, the effect with its interval,
// the noise floor, and what would decide.
static void md_seeds(Buf *b, const Report *rep) {
    if (rep->n_runs < 2) return;
    bprintf(b, "\n## Verdict over seeds\n\n");
    report_seeds_explanation(b, rep);
    bprintf(b, "\n\n| seed |");
    for (int i = 0; i < rep->n_runs; i++) bprintf(b, " %s accuracy | %s CER |", rep->runs[i].name, rep->runs[i].name);
    bprintf(b, "\n|---:|");
    for (int i = 0; i < rep->n_runs; i++) bprintf(b, "---:|---:|");
    bprintf(b, "\n");
    for (int k = 0; k < rep->n_seeds; k++) {
        bprintf(b, "| %llu |", (unsigned long long)rep->seeds[k]);
        for (int i = 0; i < rep->n_runs; i++) {
            const ReportSeedRun *sr = &rep->runs[i].seeds[k];
            if (sr->status == REPORT_SEED_FAILED) bprintf(b, " FAILED | - |");
            else bprintf(b, " %.4f%s%s | %.4f |", sr->acc, sr->status ? " " : "", sr->status ? SEED_STATUS[sr->status] : "",
                         sr->cer);
        }
        bprintf(b, "\n");
    }
    for (int i = 0; i < rep->n_runs; i++)
        for (int k = 0; k < rep->runs[i].n_seeds; k++) {
            const ReportSeedRun *sr = &rep->runs[i].seeds[k];
            if (sr->status != REPORT_SEED_OK)
                bprintf(b, "\n- %s at seed %llu %s: %s", rep->runs[i].name, (unsigned long long)sr->seed,
                        sr->status == REPORT_SEED_FAILED ? "failed" : "diverged", sr->error);
        }
    bprintf(b, "\n\n| run | seeds paired | Δ accuracy [95%% CI] | %s seed SD | Δ CER [95%% CI] | training share | "
               "verdict | seeds needed | lines needed |\n|---|---:|---:|---:|---:|---:|---|---:|---:|\n",
            rep->runs[0].name);
    for (int i = 1; i < rep->n_runs; i++) {
        const ReportSeeded *sd = &rep->runs[i].seeded;
        paired_verdict_t v = report_run_verdict(rep, i);
        if (!sd->has) {
            bprintf(b, "| %s | 0 | - | - | - | - | **%s** | - | - |\n", rep->runs[i].name, verdict_upper(v));
            continue;
        }
        const SeedsMetric *a = &sd->res.acc, *c = &sd->res.cer;
        char ca[80], cc[80], sdv[32], sn[32], ln[32];
        fmt_ci(ca, sizeof ca, a->delta, a->ci);
        fmt_ci(cc, sizeof cc, c->delta, c->ci);
        snprintf(sdv, sizeof sdv, isfinite(a->base_sd) ? "%.4f" : "-", a->base_sd);
        double share;
        seeded_cells(sd, v, sn, sizeof sn, ln, sizeof ln, &share);
        bprintf(b, "| %s | %d%s | %s | %s | %s | %.0f%% | **%s** | %s | %s |\n", rep->runs[i].name, sd->pairs,
                sd->res.seeds < 2 ? " (noise assumed)" : "", ca, sdv, cc, 100 * share,
                verdict_upper(v), sn, ln);
        if (sd->reason[0]) bprintf(b, "\n%s: %s\n", rep->runs[i].name, sd->reason);
    }
    bprintf(b, "\n\"training share\" is the part of the accuracy interval's variance that comes from training noise "
               "(seed to seed) rather than from which eval lines were drawn.\n");
}

// Each AMP run paired line by line with the baseline: the table, the intervals, the verdicts.
static void md_paired(Buf *b, const Report *rep) {
    if (rep->n_runs > 1) {
        bprintf(b, "\n## Per line at the first seed, against %s\n\n", rep->runs[0].name);
        bprintf(b, "| run | lines | both right | both wrong | %s only right | run only right | Δ accuracy [95%% CI] | "
                   "McNemar p | accuracy | Δ CER [95%% CI] | CER | verdict | lines needed |\n",
                rep->runs[0].name);
        bprintf(b, "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---|---:|\n");
        for (int i = 1; i < rep->n_runs; i++) {
            const ReportPaired *p = &rep->runs[i].paired;
            if (!p->has) {
                bprintf(b, "| %s | - | - | - | - | - | - | - | - | - | - | INCONCLUSIVE (no per-line results) | - |\n",
                        rep->runs[i].name);
                continue;
            }
            char ca[80], cc[80], nb[64];
            fmt_ci(ca, sizeof ca, p->acc_delta, p->acc_ci);
            fmt_ci(cc, sizeof cc, p->cer_delta, p->cer_ci);
            int64_t need = p->verdict != PAIRED_INCONCLUSIVE ? p->lines
                           : p->acc_verdict == PAIRED_INCONCLUSIVE && (p->cer_verdict != PAIRED_INCONCLUSIVE ||
                                                                       p->acc_lines_needed > p->cer_lines_needed)
                               ? p->acc_lines_needed
                               : p->cer_lines_needed;
            bprintf(b, "| %s | %lld | %lld | %lld | %lld | %lld | %s | %.3g | %s | %s | %s | **%s** | %s |\n",
                    rep->runs[i].name, (long long)p->lines, (long long)p->table.both_right,
                    (long long)p->table.both_wrong, (long long)p->table.base_only, (long long)p->table.run_only, ca,
                    p->mcnemar_p, paired_verdict_name(p->acc_verdict), cc, paired_verdict_name(p->cer_verdict),
                    verdict_upper(p->verdict), p->verdict == PAIRED_INCONCLUSIVE ? fmt_lines(need, nb, sizeof nb) : "-");
        }
        bprintf(b, "\nBoth runs read the same eval lines, so only the lines one of them reads and the other does "
                   "not move the accuracy delta. Its interval is Newcombe's hybrid score interval for paired "
                   "proportions (with no discordant line it is still about ±3.84/n wide); the CER interval is a "
                   "paired bootstrap (%d resamples, seed %llu). A run passes when both intervals lie within the "
                   "tolerance, regresses when one lies entirely beyond it on the worse side, and is inconclusive "
                   "otherwise; \"lines needed\" is the eval set size at which the same rates would decide.\n",
                PAIRED_BOOTSTRAP_B, (unsigned long long)rep->bootstrap_seed);
    }
}

// Each AMP run's deltas and ratios against the baseline.
static void md_against(Buf *b, const Report *rep) {
    char z[32];
    if (rep->n_runs > 1) {
        bprintf(b, "\n## Against %s\n\n", rep->runs[0].name);
        bprintf(b, "| run | Δ accuracy | Δ norm. edit dist. | Δ CER | throughput | epoch time | peak memory | "
                   "activations |\n");
        bprintf(b, "|---|---:|---:|---:|---:|---:|---:|---:|\n");
        const TrainResult *f = &rep->runs[0].r;
        for (int i = 1; i < rep->n_runs; i++) {
            const TrainResult *r = &rep->runs[i].r;
            bprintf(b, "| %s | %+.4f | %+.4f | %+.4f | ×%.2f | ×%.2f | ×%.2f (%s%s) | ×%.2f |\n", rep->runs[i].name,
                    acc_delta(rep, i), r->outcome.norm_edit_dis - f->outcome.norm_edit_dis, r->outcome.cer - f->outcome.cer,
                    ratio(r->throughput.samples_per_s, f->throughput.samples_per_s), ratio(r->throughput.epoch_seconds, f->throughput.epoch_seconds),
                    ratio((double)r->memory.stats.peak_total, (double)f->memory.stats.peak_total),
                    r->memory.stats.peak_total >= f->memory.stats.peak_total ? "+" : "-",
                    fmt_bytes(llabs(r->memory.stats.peak_total - f->memory.stats.peak_total), z, sizeof z),
                    ratio((double)r->memory.stats.peak[OCR_MEM_ACTIVATIONS], (double)f->memory.stats.peak[OCR_MEM_ACTIVATIONS]));
        }
    }
}

// Each memory category's peak per run.
static void md_memory(Buf *b, const Report *rep) {
    char x[32];
    bprintf(b, "\n## Peak memory by category\n\n| run |");
    for (int c = 0; c < OCR_MEM_CATEGORY_COUNT; c++) bprintf(b, " %s |", ocr_mem_category_name((ocr_mem_category_t)c));
    bprintf(b, " total |\n|---|");
    for (int c = 0; c <= OCR_MEM_CATEGORY_COUNT; c++) bprintf(b, "---:|");
    bprintf(b, "\n");
    for (int i = 0; i < rep->n_runs; i++) {
        const OcrMemStats *m = &rep->runs[i].r.memory.stats;
        bprintf(b, "| %s |", rep->runs[i].name);
        for (int c = 0; c < OCR_MEM_CATEGORY_COUNT; c++) bprintf(b, " %s |", fmt_bytes(m->peak[c], x, sizeof x));
        bprintf(b, " %s |\n", fmt_bytes(m->peak_total, x, sizeof x));
    }
    bprintf(b, "\nEach category's own peak; the total is the peak of the sum (categories peak at different moments).\n");
    for (int i = 0, first = 1; i < rep->n_runs; i++) {
        const TrainMemory *m = &rep->runs[i].r.memory;
        char y[32];
        if (m->teacher_weights_bytes <= 0) continue;
        bprintf(b, "%s- %s: the frozen distillation network(s) (teacher, %s) hold %s of weights (in params) and "
                   "an activation arena of %s (in activations).\n",
                first ? "\n" : "", rep->runs[i].name, ocr_dtype_name(m->teacher_dtype),
                fmt_bytes(m->teacher_weights_bytes, x, sizeof x), fmt_bytes(m->teacher_activations_bytes, y, sizeof y));
        first = 0;
    }
}

// Where the skipped steps' gradients first overflowed, per run; the attempts recomputed at a
// lower scale (Global.amp_overflow: recompute) and their cost.
static void md_skipped(Buf *b, const Report *rep) {
    int any = 0;
    for (int i = 0; i < rep->n_runs; i++) any |= rep->runs[i].r.amp.skipped_steps > 0 || rep->runs[i].r.amp.recomputed_steps > 0;
    if (any) {
        bprintf(b, "\n## Skipped steps (inf/NaN gradients)\n\n");
        for (int i = 0; i < rep->n_runs; i++) {
            const TrainResult *r = &rep->runs[i].r;
            if (!r->amp.skipped_steps && !r->amp.recomputed_steps) continue;
            bprintf(b, "- %s: %lld skipped", rep->runs[i].name, (long long)r->amp.skipped_steps);
            if (r->amp.recomputed_steps)
                bprintf(b, ", %lld overflowed attempt(s) recomputed at a lower scale (%.2f s)",
                        (long long)r->amp.recomputed_steps, r->amp.recompute_seconds);
            bprintf(b, ", final loss scale %g", (double)r->amp.final_scale);
            if (r->amp.n_overflow_layers) bprintf(b, "; first overflowing layer:");
            for (int k = 0; k < r->amp.n_overflow_layers; k++)
                bprintf(b, "%s `%s` (%lld)", k ? "," : "", r->amp.overflow_layer[k], (long long)r->amp.overflow_count[k]);
            bprintf(b, "\n");
        }
    }
}

// The machine and build, and on a GPU the device and each run's device memory and graph use.
static void md_machine(Buf *b, const Report *rep, const MachineInfo *mi) {
    char x[32];
    bprintf(b, "\n## Machine\n\n- host %s, %s\n- CPU %s, %d cores, %s memory, %d GPU(s)\n- build %s (%s), backends "
               "%s, %s\n- created %s\n- command `%s`\n",
            mi->hostname, mi->os, mi->cpu_model, mi->cpu_cores, fmt_bytes(mi->memory_bytes, x, sizeof x), mi->gpus,
            rep->version ? rep->version : training_version(), mi->build_type, mi->backends, mi->compiler,
            rep->created_utc, rep->command);
    const TrainingDeviceInfo *gi = rep->n_runs > 0 ? &rep->runs[0].r.device.info : NULL;
    if (gi && gi->gpu) {
        bprintf(b, "- GPU %s (%s): %s, compute capability %d.%d, %d SMs, %s memory; driver %d, runtime %d; %s\n",
                rep->device, gi->name, gi->allow_tf32 ? "TF32 on for f32" : "true FP32 (TF32 off)", gi->cc_major,
                gi->cc_minor, gi->multiprocessors, fmt_bytes(gi->total_memory, x, sizeof x), gi->driver_version,
                gi->runtime_version, gi->libraries);
        if (gi->note[0]) bprintf(b, "- %s\n", gi->note);
        for (int i = 0; i < rep->n_runs; i++) {
            const TrainResult *r = &rep->runs[i].r;
            char u[32];
            bprintf(b, "- %s: device memory tracked %s, cudaMemGetInfo in use %s (context and libraries "
                       "included); CUDA graph %s (%lld captures, %lld replays)\n",
                    rep->runs[i].name, fmt_bytes(r->memory.device_tracked_bytes, x, sizeof x),
                    fmt_bytes(r->memory.device_runtime_used, u, sizeof u), r->device.cuda_graph ? "used" : "not used",
                    (long long)r->device.graph_captures, (long long)r->device.graph_replays);
        }
    }
}

// On the CPU: which dtypes were emulated.
static void md_cpu_kernels(Buf *b, const Report *rep) {
    if (strncmp(rep->device, "cuda", 4) != 0) {
        // What the CPU's GEMMs and convolutions ran on per dtype (kernels/cpu/isa.h).
        char isa[160];
        ocr_backend_cpu_isa(isa, sizeof isa);
        bprintf(b, "\nCPU GEMMs and convolutions: %s.", isa);
        for (int k = 0; k < 2; k++) {
            ocr_dtype_t dt = k ? OCR_F16 : OCR_BF16;
            const char *why = ocr_backend_cpu_emulated_reason(dt);
            if (why)
                bprintf(b, " %s is emulated (%s): stored and rounded exactly as on a GPU but computed in fp32, "
                           "so it is slower than FP32 here.", ocr_dtype_name(dt), why);
        }
        bprintf(b, "\n");
    }
}

void report_markdown(Buf *b, const Report *rep, const MachineInfo *mi) {
    md_title(b, rep);
    md_runs(b, rep);
    md_allreduce(b, rep);
    md_start(b, rep);
    md_general(b, rep);
    md_seeds(b, rep);
    md_paired(b, rep);
    md_against(b, rep);
    md_memory(b, rep);
    md_skipped(b, rep);
    md_machine(b, rep, mi);
    md_cpu_kernels(b, rep);
}

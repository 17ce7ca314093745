// report.json: the comparison in the versioned schema of docs/REPORT.md (REPORT_SCHEMA,
// REPORT_SCHEMA_VERSION), built with cJSON one top-level key at a time in the order the file
// lists them (report_json at the end): header, machine, device, build, model, dataset, settings,
// start, runs, comparisons, verdict.
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "training/report_internal.h"

// ---- one run ------------------------------------------------------------------------------------

static cJSON *memory_json(const OcrMemStats *m) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "total", (double)m->peak_total);
    for (int c = 0; c < OCR_MEM_CATEGORY_COUNT; c++)
        cJSON_AddNumberToObject(o, ocr_mem_category_name((ocr_mem_category_t)c), (double)m->peak[c]);
    return o;
}

static void add_num_or_null(cJSON *o, const char *key, double v) {
    if (isfinite(v))
        cJSON_AddNumberToObject(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

static cJSON *run_json(const ReportRun *run) {
    const TrainResult *r = &run->r;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", run->name);
    cJSON_AddStringToObject(o, "amp_level", r->config.amp_level);
    cJSON_AddStringToObject(o, "amp_dtype", r->config.amp_dtype);
    cJSON_AddNumberToObject(o, "batch_size", r->config.batch_size);
    cJSON_AddNumberToObject(o, "learning_rate", run->base_lr);
    cJSON_AddNumberToObject(o, "lr_scale", r->config.lr_scale);
    cJSON_AddNumberToObject(o, "steps", (double)r->history.n_steps);
    cJSON_AddNumberToObject(o, "steps_per_epoch", (double)r->config.steps_per_epoch);
    cJSON_AddNumberToObject(o, "samples_per_s", r->throughput.samples_per_s);
    cJSON_AddNumberToObject(o, "median_step_time_s", r->throughput.median_step_s);
    cJSON_AddNumberToObject(o, "epoch_time_s", r->throughput.epoch_seconds);
    cJSON_AddNumberToObject(o, "train_time_s", r->throughput.train_seconds);
    cJSON_AddItemToObject(o, "peak_memory_bytes", memory_json(&r->memory.stats));
    if (r->memory.teacher_weights_bytes > 0) {
        // Distillation: the frozen networks' part of the params and activations peaks.
        cJSON *tm = cJSON_AddObjectToObject(o, "teacher_memory");
        cJSON_AddNumberToObject(tm, "weights_bytes", (double)r->memory.teacher_weights_bytes);
        cJSON_AddNumberToObject(tm, "activations_bytes", (double)r->memory.teacher_activations_bytes);
        cJSON_AddStringToObject(tm, "dtype", ocr_dtype_name(r->memory.teacher_dtype));
    }
    cJSON_AddNumberToObject(o, "amp_cast_cache_bytes", (double)r->amp.cast_cache_bytes);
    cJSON_AddNumberToObject(o, "amp_master_bytes", (double)r->amp.master_bytes);
    add_num_or_null(o, "accuracy", r->outcome.has_final_eval ? r->outcome.acc : NAN);
    add_num_or_null(o, "norm_edit_distance", r->outcome.has_final_eval ? r->outcome.norm_edit_dis : NAN);
    add_num_or_null(o, "cer", r->outcome.has_final_eval ? r->outcome.cer : NAN);
    cJSON_AddNumberToObject(o, "eval_samples", (double)r->outcome.eval_samples);
    cJSON_AddNumberToObject(o, "eval_samples_per_s", r->outcome.eval_samples_per_s);
    if (run->eval_paths.lines > 0) cJSON_AddItemToObject(o, "eval_lines", eval_paths_json(&run->eval_paths));
    if (run->general_paths.lines > 0)
        cJSON_AddItemToObject(o, "general_lines", eval_paths_json(&run->general_paths));
    add_num_or_null(o, "final_loss", r->outcome.final_loss);
    cJSON_AddNumberToObject(o, "skipped_steps", (double)r->amp.skipped_steps);
    cJSON_AddNumberToObject(o, "recomputed_steps", (double)r->amp.recomputed_steps);
    cJSON_AddNumberToObject(o, "recompute_seconds", r->amp.recompute_seconds);
    cJSON_AddNumberToObject(o, "final_loss_scale", r->amp.final_scale);
    cJSON_AddNumberToObject(o, "infeasible_samples", (double)r->outcome.infeasible_samples);
    {
        // Data parallelism: the gradient all-reduce of one step (measured with the identity
        // transport in a single process) and the ranks' throughput.
        cJSON *d = cJSON_AddObjectToObject(o, "distributed");
        cJSON_AddStringToObject(d, "backend", r->dist.backend[0] ? r->dist.backend : "single");
        cJSON_AddNumberToObject(d, "world_size", r->dist.world_size > 0 ? r->dist.world_size : 1);
        cJSON_AddNumberToObject(d, "global_batch", (double)r->dist.global_batch);
        cJSON_AddNumberToObject(d, "global_samples_per_s", r->dist.global_samples_per_s);
        cJSON *rs = cJSON_AddArrayToObject(d, "rank_samples_per_s");
        for (int k = 0; k < r->dist.n_rank_samples_per_s; k++)
            cJSON_AddItemToArray(rs, cJSON_CreateNumber(r->dist.rank_samples_per_s[k]));
        cJSON_AddNumberToObject(d, "allreduce_bytes_per_step", (double)r->dist.allreduce_bytes_per_step);
        cJSON_AddNumberToObject(d, "allreduce_buckets", r->dist.allreduce_buckets);
        cJSON_AddNumberToObject(d, "allreduce_seconds_per_step", r->dist.allreduce_seconds_per_step);
        cJSON_AddNumberToObject(d, "allreduce_exposed_seconds_per_step", r->dist.allreduce_exposed_per_step);
        cJSON_AddNumberToObject(d, "comm_hidden_fraction", r->dist.comm_hidden_fraction);
        cJSON_AddBoolToObject(d, "sync_bn", r->dist.sync_bn);
        cJSON_AddNumberToObject(d, "bn_sync_bytes_per_step", (double)r->dist.bn_sync_bytes_per_step);
    }
    if (r->device.info.gpu) {
        // The GPU step: graph use, and the tracker against the runtime's own count.
        cJSON_AddBoolToObject(o, "cuda_graph", r->device.cuda_graph);
        cJSON_AddNumberToObject(o, "graph_captures", (double)r->device.graph_captures);
        cJSON_AddNumberToObject(o, "graph_replays", (double)r->device.graph_replays);
        cJSON_AddNumberToObject(o, "device_tracked_bytes", (double)r->memory.device_tracked_bytes);
        cJSON_AddNumberToObject(o, "device_runtime_used_bytes", (double)r->memory.device_runtime_used);
        cJSON_AddNumberToObject(o, "pinned_host_bytes", (double)r->memory.pinned_bytes);
    }
    cJSON *ov = cJSON_AddArrayToObject(o, "overflow_locations");
    for (int i = 0; i < r->amp.n_overflow_layers; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "layer", r->amp.overflow_layer[i]);
        cJSON_AddNumberToObject(e, "skipped_steps", (double)r->amp.overflow_count[i]);
        cJSON_AddItemToArray(ov, e);
    }
    // Per-step history (for charts and for anyone who wants to plot it differently).
    cJSON *h = cJSON_AddObjectToObject(o, "history");
    cJSON *loss = cJSON_AddArrayToObject(h, "loss");
    cJSON *scale = cJSON_AddArrayToObject(h, "loss_scale");
    cJSON *lr = cJSON_AddArrayToObject(h, "lr");
    cJSON *skipped = cJSON_AddArrayToObject(h, "skipped_iters");
    for (int64_t i = 0; i < r->history.n_steps; i++) {
        const StepRecord *s = &r->history.steps[i];
        char b[32];
        snprintf(b, sizeof b, "%.6g", (double)s->loss);
        cJSON_AddItemToArray(loss, isfinite(s->loss) ? cJSON_CreateNumber(strtod(b, NULL)) : cJSON_CreateNull());
        cJSON_AddItemToArray(scale, cJSON_CreateNumber(s->scale));
        snprintf(b, sizeof b, "%.6g", (double)s->lr);
        cJSON_AddItemToArray(lr, cJSON_CreateNumber(strtod(b, NULL)));
        if (s->skipped) cJSON_AddItemToArray(skipped, cJSON_CreateNumber((double)(s->iter + 1)));
    }
    cJSON *ev = cJSON_AddArrayToObject(h, "eval");
    for (int i = 0; i < r->history.n_evals; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "iter", (double)r->history.evals[i].iter);
        cJSON_AddNumberToObject(e, "accuracy", r->history.evals[i].acc);
        cJSON_AddNumberToObject(e, "norm_edit_distance", r->history.evals[i].norm_edit_dis);
        cJSON_AddNumberToObject(e, "cer", r->history.evals[i].cer);
        cJSON_AddItemToArray(ev, e);
    }
    // Every seed's run: status, the error of a failed or diverged one, its scores and figures.
    cJSON *sa = cJSON_AddArrayToObject(o, "seeds");
    static const char *const status[] = {"ok", "diverged", "failed"};
    for (int k = 0; k < run->n_seeds; k++) {
        const ReportSeedRun *sr = &run->seeds[k];
        cJSON *so = cJSON_CreateObject();
        cJSON_AddNumberToObject(so, "seed", (double)sr->seed);
        cJSON_AddStringToObject(so, "status", status[sr->status]);
        if (sr->error[0]) cJSON_AddStringToObject(so, "error", sr->error);
        cJSON_AddBoolToObject(so, "reused", sr->reused);
        if (sr->status != REPORT_SEED_FAILED) {
            cJSON_AddNumberToObject(so, "accuracy", sr->acc);
            add_num_or_null(so, "accuracy_exact", sr->acc_exact);
            add_num_or_null(so, "accuracy_nospace", sr->acc_nospace);
            cJSON_AddNumberToObject(so, "cer", sr->cer);
            if (sr->has_general) {
                cJSON *g = cJSON_AddObjectToObject(so, "general");
                cJSON_AddNumberToObject(g, "accuracy", sr->general_acc);
                cJSON_AddNumberToObject(g, "accuracy_exact", sr->general_acc_exact);
                cJSON_AddNumberToObject(g, "accuracy_nospace", sr->general_acc_nospace);
                cJSON_AddNumberToObject(g, "cer", sr->general_cer);
                cJSON_AddNumberToObject(g, "lines", (double)sr->general_lines);
            }
            cJSON_AddNumberToObject(so, "norm_edit_distance", sr->norm_edit_dis);
            cJSON_AddNumberToObject(so, "samples_per_s", sr->samples_per_s);
            add_num_or_null(so, "final_loss", sr->final_loss);
            cJSON_AddNumberToObject(so, "peak_memory_bytes", (double)sr->peak_bytes);
            cJSON_AddNumberToObject(so, "steps", (double)sr->steps);
            cJSON_AddNumberToObject(so, "skipped_steps", (double)sr->skipped_steps);
            cJSON_AddNumberToObject(so, "recomputed_steps", (double)sr->recomputed_steps);
            cJSON_AddNumberToObject(so, "eval_lines", (double)sr->eval_lines);
        }
        cJSON_AddItemToArray(sa, so);
    }
    return o;
}

// ---- the top-level keys -------------------------------------------------------------------------

static void json_header(cJSON *root, const Report *rep) {
    cJSON_AddStringToObject(root, "schema", REPORT_SCHEMA);
    cJSON_AddNumberToObject(root, "schema_version", REPORT_SCHEMA_VERSION);
    cJSON_AddStringToObject(root, "created_utc", rep->created_utc);
    cJSON_AddStringToObject(root, "config", rep->config_path ? rep->config_path : "");
    cJSON_AddStringToObject(root, "command", rep->command);
}

static void json_machine(cJSON *root, const MachineInfo *mi) {
    cJSON *m = cJSON_AddObjectToObject(root, "machine");
    cJSON_AddStringToObject(m, "hostname", mi->hostname);
    cJSON_AddStringToObject(m, "os", mi->os);
    cJSON_AddStringToObject(m, "cpu_model", mi->cpu_model);
    cJSON_AddNumberToObject(m, "cpu_cores", mi->cpu_cores);
    cJSON_AddNumberToObject(m, "memory_bytes", (double)mi->memory_bytes);
    cJSON_AddNumberToObject(m, "gpus", mi->gpus);
}

// The device the runs trained on, with the GPU's properties, and how f16/bf16 were computed there.
static void json_device(cJSON *root, const Report *rep) {
    cJSON *d = cJSON_AddObjectToObject(root, "device");
    cJSON_AddStringToObject(d, "name", rep->device);
    cJSON_AddStringToObject(d, "kind", strncmp(rep->device, "cuda", 4) == 0 ? "gpu" : "cpu");
    cJSON_AddNumberToObject(d, "threads", rep->threads);
    char isa[160];
    ocr_backend_cpu_isa(isa, sizeof isa);
    cJSON_AddStringToObject(d, "cpu_isa", isa);
    const TrainingDeviceInfo *gi = rep->n_runs > 0 ? &rep->runs[0].r.device.info : NULL;
    if (gi && gi->gpu) {
        cJSON *g = cJSON_AddObjectToObject(d, "gpu");
        char cc[16];
        snprintf(cc, sizeof cc, "%d.%d", gi->cc_major, gi->cc_minor);
        cJSON_AddStringToObject(g, "name", gi->name);
        cJSON_AddStringToObject(g, "compute_capability", cc);
        cJSON_AddNumberToObject(g, "multiprocessors", gi->multiprocessors);
        cJSON_AddNumberToObject(g, "total_memory_bytes", (double)gi->total_memory);
        cJSON_AddNumberToObject(g, "free_memory_at_start_bytes", (double)gi->free_memory_at_start);
        cJSON_AddNumberToObject(g, "driver_version", gi->driver_version);
        cJSON_AddNumberToObject(g, "runtime_version", gi->runtime_version);
        cJSON_AddStringToObject(g, "libraries", gi->libraries);
        cJSON_AddBoolToObject(g, "allow_tf32", gi->allow_tf32);
        cJSON_AddStringToObject(g, "note", gi->note);
    }
    cJSON_AddStringToObject(d, "low_precision_note",
                            strncmp(rep->device, "cuda", 4) == 0
                                ? "tensor-core kernels"
                                : ocr_backend_cpu_emulated_reason(OCR_BF16) && ocr_backend_cpu_emulated_reason(OCR_F16)
                                      ? "f16/bf16 values are stored and rounded as on a GPU and computed in fp32 "
                                        "(numerics and memory of mixed precision; CPU speed is not a GPU's)"
                                      : "f16/bf16 GEMMs and convolutions on the CPU's BF16/FP16 hardware with fp32 "
                                        "accumulation where cpu_isa names it; other ops computed in fp32 from f16/bf16 "
                                        "storage");
}

static void json_build(cJSON *root, const Report *rep, const MachineInfo *mi) {
    cJSON *b = cJSON_AddObjectToObject(root, "build");
    cJSON_AddStringToObject(b, "version", rep->version ? rep->version : training_version());
    cJSON_AddStringToObject(b, "backends", mi->backends);
    cJSON_AddStringToObject(b, "compiler", mi->compiler);
    cJSON_AddStringToObject(b, "build_type", mi->build_type);
}

static void json_model(cJSON *root, const Report *rep) {
    cJSON *mo = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(mo, "algorithm", rep->algorithm);
    cJSON_AddStringToObject(mo, "backbone", rep->backbone);
    cJSON_AddNumberToObject(mo, "params", (double)rep->params);
    cJSON *shape = cJSON_AddArrayToObject(mo, "input_shape");
    cJSON_AddItemToArray(shape, cJSON_CreateNumber(rep->in_channels));
    cJSON_AddItemToArray(shape, cJSON_CreateNumber(rep->height));
    cJSON_AddItemToArray(shape, cJSON_CreateNumber(rep->width));
    cJSON_AddNumberToObject(mo, "seq_len", rep->seq_len);
    cJSON_AddNumberToObject(mo, "classes", rep->classes);
}

static void json_dataset(cJSON *root, const Report *rep) {
    cJSON *ds = cJSON_AddObjectToObject(root, "dataset");
    cJSON_AddNumberToObject(ds, "train_samples", (double)rep->train_samples);
    cJSON_AddNumberToObject(ds, "eval_samples", (double)rep->eval_samples);
}

static void json_settings(cJSON *root, const Report *rep) {
    cJSON *st = cJSON_AddObjectToObject(root, "settings");
    cJSON_AddNumberToObject(st, "epochs", (double)rep->epochs);
    cJSON_AddNumberToObject(st, "seed", (double)rep->seed);
    cJSON *sl = cJSON_AddArrayToObject(st, "seeds");
    for (int k = 0; k < rep->n_seeds; k++) cJSON_AddItemToArray(sl, cJSON_CreateNumber((double)rep->seeds[k]));
    cJSON_AddNumberToObject(st, "assumed_seed_sd", rep->assumed_seed_sd);
    cJSON_AddStringToObject(st, "legs", rep->candidate_mode ? "baseline_vs_candidate" : "fp32_vs_amp");
    if (rep->candidate_mode) cJSON_AddStringToObject(st, "candidate_config", rep->candidate_path);
    cJSON_AddStringToObject(st, "batch", rep->batch_max ? "max" : "config");
    cJSON_AddNumberToObject(st, "memory_budget_bytes", (double)rep->memory_bytes);
    cJSON_AddNumberToObject(st, "accuracy_tolerance", rep->tolerance);
    cJSON_AddNumberToObject(st, "cer_tolerance", rep->cer_tolerance);
}

// The pretrained weights every run started from, scored before training (null: from scratch).
static void json_start(cJSON *root, const Report *rep) {
    if (rep->has_start) {
        cJSON *sp = cJSON_AddObjectToObject(root, "start");
        cJSON_AddStringToObject(sp, "weights", rep->start_weights);
        cJSON_AddNumberToObject(sp, "accuracy", rep->start_acc);
        cJSON_AddNumberToObject(sp, "accuracy_exact", rep->start_acc_exact);
        cJSON_AddNumberToObject(sp, "accuracy_nospace", rep->start_acc_nospace);
        cJSON_AddNumberToObject(sp, "norm_edit_dis", rep->start_norm_edit_dis);
        cJSON_AddNumberToObject(sp, "cer", rep->start_cer);
        cJSON_AddNumberToObject(sp, "eval_samples", (double)rep->start_samples);
        if (rep->has_general) {
            cJSON *g = cJSON_AddObjectToObject(sp, "general");
            cJSON_AddNumberToObject(g, "accuracy", rep->start_general_acc);
            cJSON_AddNumberToObject(g, "accuracy_exact", rep->start_general_acc_exact);
            cJSON_AddNumberToObject(g, "accuracy_nospace", rep->start_general_acc_nospace);
            cJSON_AddNumberToObject(g, "cer", rep->start_general_cer);
        } else {
            cJSON_AddNullToObject(sp, "general");
        }
    } else {
        cJSON_AddNullToObject(root, "start");
    }
}

// The gain next to the forgetting: every run's mean over seeds on the target set (Eval) and the
// general set (EvalGeneral), both accuracies, and their change from the pretrained weights.
static void json_general(cJSON *root, const Report *rep) {
    if (!rep->has_general) {
        cJSON_AddNullToObject(root, "general");
        return;
    }
    cJSON *g = cJSON_AddObjectToObject(root, "general");
    cJSON_AddNumberToObject(g, "lines", (double)rep->general_samples);
    cJSON *runs = cJSON_AddArrayToObject(g, "runs");
    for (int i = 0; i < rep->n_runs; i++) {
        double ae, an, ge, gn;
        int k = report_run_means(rep, i, &ae, &an, &ge, &gn);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "run", rep->runs[i].name);
        cJSON_AddNumberToObject(o, "seeds_scored", k);
        cJSON *t = cJSON_AddObjectToObject(o, "target");
        add_num_or_null(t, "accuracy_exact", k ? ae : NAN);
        add_num_or_null(t, "accuracy_nospace", k ? an : NAN);
        add_num_or_null(t, "change_exact", k && rep->has_start ? ae - rep->start_acc_exact : NAN);
        add_num_or_null(t, "change_nospace", k && rep->has_start ? an - rep->start_acc_nospace : NAN);
        cJSON *gg = cJSON_AddObjectToObject(o, "general");
        add_num_or_null(gg, "accuracy_exact", k ? ge : NAN);
        add_num_or_null(gg, "accuracy_nospace", k ? gn : NAN);
        add_num_or_null(gg, "change_exact", k && rep->has_start ? ge - rep->start_general_acc_exact : NAN);
        add_num_or_null(gg, "change_nospace", k && rep->has_start ? gn - rep->start_general_acc_nospace : NAN);
        char line[512];
        report_forgetting_line(rep, i, line, sizeof line);
        cJSON_AddStringToObject(o, "summary", line);
        cJSON_AddItemToArray(runs, o);
    }
}

static void json_runs(cJSON *root, const Report *rep) {
    cJSON *runs = cJSON_AddArrayToObject(root, "runs");
    for (int i = 0; i < rep->n_runs; i++) cJSON_AddItemToArray(runs, run_json(&rep->runs[i]));
}

static void seeded_json(cJSON *sj, const Report *rep, const ReportSeeded *sd);

// Run i (> 0) against the baseline: deltas, ratios, the paired results and the verdict.
static cJSON *comparison_json(const Report *rep, int i) {
    const TrainResult *f = &rep->runs[0].r;
    const TrainResult *r = &rep->runs[i].r;
    const ReportPaired *p = &rep->runs[i].paired;
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "run", rep->runs[i].name);
    cJSON_AddStringToObject(c, "baseline", rep->runs[0].name);
    double da = acc_delta(rep, i);
    cJSON_AddNumberToObject(c, "accuracy_delta", da);
    cJSON_AddNumberToObject(c, "accuracy_delta_stderr", acc_delta_stderr(r->outcome.acc, f->outcome.acc, f->outcome.eval_samples));
    cJSON_AddNumberToObject(c, "norm_edit_distance_delta", r->outcome.norm_edit_dis - f->outcome.norm_edit_dis);
    cJSON_AddNumberToObject(c, "cer_delta", r->outcome.cer - f->outcome.cer);
    add_num_or_null(c, "final_loss_delta", r->outcome.final_loss - f->outcome.final_loss);
    cJSON_AddNumberToObject(c, "samples_per_s_ratio", ratio(r->throughput.samples_per_s, f->throughput.samples_per_s));
    cJSON_AddNumberToObject(c, "median_step_time_ratio", ratio(r->throughput.median_step_s, f->throughput.median_step_s));
    cJSON_AddNumberToObject(c, "epoch_time_ratio", ratio(r->throughput.epoch_seconds, f->throughput.epoch_seconds));
    cJSON_AddNumberToObject(c, "peak_memory_ratio",
                            ratio((double)r->memory.stats.peak_total, (double)f->memory.stats.peak_total));
    cJSON_AddNumberToObject(c, "peak_memory_delta_bytes", (double)(r->memory.stats.peak_total - f->memory.stats.peak_total));
    cJSON_AddNumberToObject(c, "activations_ratio",
                            ratio((double)r->memory.stats.peak[OCR_MEM_ACTIVATIONS],
                                  (double)f->memory.stats.peak[OCR_MEM_ACTIVATIONS]));
    cJSON_AddNumberToObject(c, "batch_size_ratio", ratio(r->config.batch_size, f->config.batch_size));
    paired_verdict_t v = report_run_verdict(rep, i);
    if (p->has) {
        cJSON *pj = cJSON_AddObjectToObject(c, "paired");
        cJSON_AddNumberToObject(pj, "lines", (double)p->lines);
        cJSON *t = cJSON_AddObjectToObject(pj, "table");
        cJSON_AddNumberToObject(t, "both_right", (double)p->table.both_right);
        cJSON_AddNumberToObject(t, "both_wrong", (double)p->table.both_wrong);
        cJSON_AddNumberToObject(t, "baseline_only_right", (double)p->table.base_only);
        cJSON_AddNumberToObject(t, "run_only_right", (double)p->table.run_only);
        cJSON *a = cJSON_AddObjectToObject(pj, "accuracy");
        cJSON_AddNumberToObject(a, "delta", p->acc_delta);
        cJSON *ci = cJSON_AddArrayToObject(a, "ci95");
        cJSON_AddItemToArray(ci, cJSON_CreateNumber(p->acc_ci.lo));
        cJSON_AddItemToArray(ci, cJSON_CreateNumber(p->acc_ci.hi));
        cJSON_AddStringToObject(a, "method", "newcombe_hybrid_score");
        cJSON_AddNumberToObject(a, "mcnemar_exact_p", p->mcnemar_p);
        cJSON_AddNumberToObject(a, "tolerance", rep->tolerance);
        cJSON_AddStringToObject(a, "verdict", paired_verdict_name(p->acc_verdict));
        if (p->acc_lines_needed >= 0) cJSON_AddNumberToObject(a, "lines_needed", (double)p->acc_lines_needed);
        else cJSON_AddNullToObject(a, "lines_needed");
        cJSON *e = cJSON_AddObjectToObject(pj, "cer");
        cJSON_AddNumberToObject(e, "delta", p->cer_delta);
        ci = cJSON_AddArrayToObject(e, "ci95");
        cJSON_AddItemToArray(ci, cJSON_CreateNumber(p->cer_ci.lo));
        cJSON_AddItemToArray(ci, cJSON_CreateNumber(p->cer_ci.hi));
        cJSON_AddStringToObject(e, "method", "paired_bootstrap_percentile");
        cJSON_AddNumberToObject(e, "resamples", PAIRED_BOOTSTRAP_B);
        cJSON_AddNumberToObject(e, "seed", (double)rep->bootstrap_seed);
        cJSON_AddNumberToObject(e, "tolerance", rep->cer_tolerance);
        cJSON_AddStringToObject(e, "verdict", paired_verdict_name(p->cer_verdict));
        if (p->cer_lines_needed >= 0) cJSON_AddNumberToObject(e, "lines_needed", (double)p->cer_lines_needed);
        else cJSON_AddNullToObject(e, "lines_needed");
    }
    seeded_json(cJSON_AddObjectToObject(c, "seeded"), rep, &rep->runs[i].seeded);
    if (rep->has_general) {
        cJSON *g = cJSON_AddObjectToObject(c, "general");
        seeded_json(cJSON_AddObjectToObject(g, "exact"), rep, &rep->runs[i].general_exact);
        seeded_json(cJSON_AddObjectToObject(g, "spaces_ignored"), rep, &rep->runs[i].general_nospace);
    }
    cJSON_AddBoolToObject(c, "within_tolerance", v == PAIRED_PASS);
    cJSON_AddStringToObject(c, "verdict", paired_verdict_name(v));
    return c;
}

// A seed-aware verdict (eval/seeds.h) into sj: pairs, per-seed deltas, each metric's interval.
static void seeded_json(cJSON *sj, const Report *rep, const ReportSeeded *sd) {
    cJSON_AddNumberToObject(sj, "pairs", sd->pairs);
    cJSON_AddNumberToObject(sj, "failed_or_diverged_runs", sd->failed_runs);
    cJSON_AddNumberToObject(sj, "baseline_runs_left_out", sd->failed_baseline);
    if (sd->reason[0]) cJSON_AddStringToObject(sj, "reason", sd->reason);
    if (sd->has) {
        const SeedsResult *sr = &sd->res;
        cJSON_AddStringToObject(sj, "method", seeds_method_name(sr->method));
        cJSON_AddBoolToObject(sj, "training_noise_measured", sr->seeds >= 2);
        if (sr->seeds < 2) {
            cJSON_AddNumberToObject(sj, "assumed_seed_sd_accuracy", sr->prior_seed_sd_acc);
            cJSON_AddNumberToObject(sj, "assumed_seed_sd_cer", sr->prior_seed_sd_cer);
        }
        cJSON_AddNumberToObject(sj, "lines", (double)sr->lines);
        cJSON *ps = cJSON_AddArrayToObject(sj, "per_seed");
        for (int k = 0; k < sr->seeds; k++) {
            cJSON *po = cJSON_CreateObject();
            cJSON_AddNumberToObject(po, "seed", (double)rep->runs[0].seeds[sd->pair_seed[k]].seed);
            cJSON_AddNumberToObject(po, "baseline_accuracy", sr->base_acc[k]);
            cJSON_AddNumberToObject(po, "accuracy", sr->cand_acc[k]);
            cJSON_AddNumberToObject(po, "accuracy_delta", sr->acc_delta[k]);
            cJSON_AddNumberToObject(po, "baseline_cer", sr->base_cer[k]);
            cJSON_AddNumberToObject(po, "cer", sr->cand_cer[k]);
            cJSON_AddNumberToObject(po, "cer_delta", sr->cer_delta[k]);
            cJSON_AddItemToArray(ps, po);
        }
        const SeedsMetric *ms[2] = {&sr->acc, &sr->cer};
        const char *names[2] = {"accuracy", "cer"};
        for (int k = 0; k < 2; k++) {
            const SeedsMetric *m = ms[k];
            cJSON *mo = cJSON_AddObjectToObject(sj, names[k]);
            cJSON_AddNumberToObject(mo, "delta", m->delta);
            cJSON *ci = cJSON_AddArrayToObject(mo, "ci95");
            cJSON_AddItemToArray(ci, cJSON_CreateNumber(m->ci.lo));
            cJSON_AddItemToArray(ci, cJSON_CreateNumber(m->ci.hi));
            add_num_or_null(mo, "standard_error", m->se);
            add_num_or_null(mo, "dof_seed", m->dof_seed);
            add_num_or_null(mo, "dof_line", m->dof_line);
            cJSON_AddNumberToObject(mo, "tolerance", k == 0 ? rep->tolerance : rep->cer_tolerance);
            add_num_or_null(mo, "baseline_mean", m->base_mean);
            add_num_or_null(mo, "mean", m->cand_mean);
            add_num_or_null(mo, "baseline_seed_sd", m->base_sd);
            add_num_or_null(mo, "seed_sd", m->cand_sd);
            cJSON *vc = cJSON_AddObjectToObject(mo, "variance_shares");
            add_num_or_null(vc, "seed", m->share_seed);
            add_num_or_null(vc, "line", m->share_line);
            add_num_or_null(vc, "residual", m->share_resid);
            cJSON_AddBoolToObject(mo, "floored_by_pooled_interval", m->floored);
            cJSON_AddStringToObject(mo, "verdict", paired_verdict_name(m->verdict));
            if (m->seeds_needed >= 0) cJSON_AddNumberToObject(mo, "seeds_needed", (double)m->seeds_needed);
            else cJSON_AddNullToObject(mo, "seeds_needed");
            if (m->lines_needed >= 0) cJSON_AddNumberToObject(mo, "lines_needed", (double)m->lines_needed);
            else cJSON_AddNullToObject(mo, "lines_needed");
        }
    }
    cJSON_AddStringToObject(sj, "verdict", paired_verdict_name(sd->verdict));
}

static void json_comparisons(cJSON *root, const Report *rep) {
    cJSON *cmp = cJSON_AddArrayToObject(root, "comparisons");
    for (int i = 1; i < rep->n_runs; i++) cJSON_AddItemToArray(cmp, comparison_json(rep, i));
}

// The overall verdict: status, the failing and inconclusive runs, the rule, a one-line summary.
static void json_verdict(cJSON *root, const Report *rep) {
    double worst = 0;
    cJSON *failing = cJSON_CreateArray(), *undecided = cJSON_CreateArray();
    int fails = 0, inconclusive = 0;
    for (int i = 1; i < rep->n_runs; i++) {
        paired_verdict_t rv = report_run_verdict(rep, i);
        if (rv == PAIRED_REGRESSION) {
            fails++;
            cJSON_AddItemToArray(failing, cJSON_CreateString(rep->runs[i].name));
        } else if (rv == PAIRED_INCONCLUSIVE) {
            inconclusive++;
            cJSON_AddItemToArray(undecided, cJSON_CreateString(rep->runs[i].name));
        }
        double da = acc_delta(rep, i);
        if (fabs(da) > fabs(worst)) worst = da;
    }
    int code = report_exit_code(rep);
    cJSON *v = cJSON_AddObjectToObject(root, "verdict");
    cJSON_AddStringToObject(v, "status", code == REPORT_EXIT_REGRESSION ? "regression"
                                         : code == REPORT_EXIT_INCONCLUSIVE ? "inconclusive" : "pass");
    cJSON_AddNumberToObject(v, "accuracy_tolerance", rep->tolerance);
    cJSON_AddNumberToObject(v, "cer_tolerance", rep->cer_tolerance);
    cJSON_AddNumberToObject(v, "confidence", 0.95);
    cJSON_AddNumberToObject(v, "worst_accuracy_delta", worst);
    cJSON_AddItemToObject(v, "failing_runs", failing);
    cJSON_AddItemToObject(v, "inconclusive_runs", undecided);
    int64_t need = report_lines_needed(rep), seeds_need = report_seeds_needed(rep);
    if (code == REPORT_EXIT_INCONCLUSIVE && need >= 0) cJSON_AddNumberToObject(v, "lines_needed", (double)need);
    else cJSON_AddNullToObject(v, "lines_needed");
    if (code == REPORT_EXIT_INCONCLUSIVE && seeds_need >= 0) cJSON_AddNumberToObject(v, "seeds_needed", (double)seeds_need);
    else cJSON_AddNullToObject(v, "seeds_needed");
    cJSON_AddNumberToObject(v, "seeds", rep->n_seeds);
    cJSON_AddNumberToObject(v, "exit_code", code);
    cJSON_AddStringToObject(v, "rule",
                            "per run and metric, the 95% interval of the mean delta (run - baseline) over the seed "
                            "pairs, training noise between seeds and eval-line sampling both included (eval/seeds.h; "
                            "one seed: the paired interval widened by an assumed seed-to-seed SD): regression when it "
                            "lies entirely on the worse side beyond the tolerance, pass when its worse edge stays "
                            "within the tolerance (non-inferiority), inconclusive when it straddles the tolerance on "
                            "the worse side; a run that failed or diverged at any seed where the baseline trained is a "
                            "regression; a run regresses if either metric does, is inconclusive if either is; exit 3 "
                            "on any regression, else 4 on any inconclusive run, else 0");
    Buf text = {0};
    report_verdict_text(&text, rep);
    cJSON_AddStringToObject(v, "summary", text.s && !text.oom ? text.s : "");
    free(text.s);
    (void)fails;
    (void)inconclusive;
}

char *report_json(const Report *rep) {
    MachineInfo mi;
    report_machine_info(&mi);
    cJSON *root = cJSON_CreateObject();
    json_header(root, rep);
    json_machine(root, &mi);
    json_device(root, rep);
    json_build(root, rep, &mi);
    json_model(root, rep);
    json_dataset(root, rep);
    json_settings(root, rep);
    json_start(root, rep);
    json_general(root, rep);
    json_runs(root, rep);
    json_comparisons(root, rep);
    json_verdict(root, rep);
    char *out = cJSON_Print(root);
    cJSON_Delete(root);
    return out;
}

#include "training/report.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/memory.h"
#include "kernels/backend.h"

static const char *g_version = "unknown";
void training_set_version(const char *version) { g_version = version ? version : "unknown"; }
const char *training_version(void) { return g_version; }

// ---- verdict -------------------------------------------------------------------------------------

static double acc_delta(const Report *rep, int i) { return rep->runs[i].r.acc - rep->runs[0].r.acc; }

ocr_status_t report_pair(ReportPaired *out, const EvalLine *base, const EvalLine *run, int64_t n, double acc_tol,
                         double cer_tol, uint64_t seed) {
    memset(out, 0, sizeof *out);
    int32_t *ref = malloc(sizeof(int32_t) * (size_t)(n ? n : 1)), *eb = malloc(sizeof(int32_t) * (size_t)(n ? n : 1)),
            *er = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    ocr_status_t st = OCR_OK;
    if (!ref || !eb || !er) st = ocr_set_error(OCR_ERR_OOM, "paired comparison: out of memory for %lld lines",
                                               (long long)n);
    int64_t k = 0;
    for (int64_t i = 0; st == OCR_OK && i < n; i++) {
        if (!base[i].scored || !run[i].scored) continue;
        paired_table_add(&out->table, base[i].correct, run[i].correct);
        ref[k] = base[i].ref_chars;  // the same reference for both runs
        eb[k] = base[i].edits;
        er[k] = run[i].edits;
        k++;
    }
    if (st == OCR_OK) st = paired_cer_bootstrap(&out->cer_ci, ref, eb, er, k, PAIRED_BOOTSTRAP_B, 0.05, seed);
    if (st == OCR_OK) {
        out->has = 1;
        out->lines = k;
        out->acc_delta = paired_acc_delta(&out->table);
        out->acc_ci = paired_acc_interval(&out->table, PAIRED_Z95);
        out->mcnemar_p = paired_mcnemar_p(&out->table);
        out->acc_verdict = paired_verdict(out->acc_ci, acc_tol, 1);
        out->acc_lines_needed = paired_acc_lines_needed(&out->table, acc_tol, PAIRED_Z95);
        out->cer_delta = paired_cer_delta(ref, eb, er, k);
        out->cer_verdict = paired_verdict(out->cer_ci, cer_tol, 0);
        out->cer_lines_needed = paired_scaled_lines_needed(k, out->cer_delta, out->cer_ci, cer_tol, 0);
        paired_verdict_t a = out->acc_verdict, c = out->cer_verdict;
        if (a == PAIRED_REGRESSION || c == PAIRED_REGRESSION) out->verdict = PAIRED_REGRESSION;
        else if (a == PAIRED_INCONCLUSIVE || c == PAIRED_INCONCLUSIVE) out->verdict = PAIRED_INCONCLUSIVE;
        else out->verdict = PAIRED_PASS;
    }
    free(ref);
    free(eb);
    free(er);
    return st;
}

paired_verdict_t report_run_verdict(const Report *rep, int i) {
    const ReportPaired *p = &rep->runs[i].paired;
    return p->has ? p->verdict : PAIRED_INCONCLUSIVE;
}

int report_exit_code(const Report *rep) {
    int inconclusive = 0;
    for (int i = 1; i < rep->n_runs; i++) {
        paired_verdict_t v = report_run_verdict(rep, i);
        if (v == PAIRED_REGRESSION) return REPORT_EXIT_REGRESSION;
        inconclusive |= v == PAIRED_INCONCLUSIVE;
    }
    return inconclusive ? REPORT_EXIT_INCONCLUSIVE : REPORT_EXIT_PASS;
}

int64_t report_lines_needed(const Report *rep) {
    int64_t worst = -1;
    for (int i = 1; i < rep->n_runs; i++) {
        const ReportPaired *p = &rep->runs[i].paired;
        if (!p->has || p->verdict != PAIRED_INCONCLUSIVE) continue;
        if (p->acc_verdict == PAIRED_INCONCLUSIVE && p->acc_lines_needed > worst) worst = p->acc_lines_needed;
        if (p->cer_verdict == PAIRED_INCONCLUSIVE && p->cer_lines_needed > worst) worst = p->cer_lines_needed;
    }
    return worst;
}

static const char *verdict_upper(paired_verdict_t v) {
    switch (v) {
    case PAIRED_PASS: return "PASS";
    case PAIRED_REGRESSION: return "REGRESSION";
    case PAIRED_BETTER: return "BETTER";
    default: return "INCONCLUSIVE";
    }
}

// "1,362" style counts for lines-needed, or a phrase when no size is known.
static const char *fmt_lines(int64_t n, char *buf, size_t cap) {
    if (n < 0) snprintf(buf, cap, "none would");
    else snprintf(buf, cap, "%lld", (long long)n);
    return buf;
}

// Standard error of the difference of two accuracies measured on n samples each (binomial):
// how large a delta the evaluation set can tell from noise.
static double acc_delta_stderr(double a, double b, int64_t n) {
    if (n <= 0) return 0;
    return sqrt((a * (1 - a) + b * (1 - b)) / (double)n);
}

static double ratio(double a, double b) { return b != 0 ? a / b : 0; }

// ---- machine -------------------------------------------------------------------------------------

void report_machine_info(MachineInfo *mi) {
    memset(mi, 0, sizeof *mi);
    gethostname(mi->hostname, sizeof mi->hostname - 1);
    struct utsname u;
    if (uname(&u) == 0) snprintf(mi->os, sizeof mi->os, "%s %s %s", u.sysname, u.release, u.machine);
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10) == 0 && !mi->cpu_model[0]) {
                char *c = strchr(line, ':');
                if (c) {
                    c++;
                    while (*c == ' ') c++;
                    c[strcspn(c, "\n")] = '\0';
                    snprintf(mi->cpu_model, sizeof mi->cpu_model, "%s", c);
                }
            }
        }
        fclose(f);
    }
    mi->cpu_cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psize > 0) mi->memory_bytes = (int64_t)pages * psize;
    mi->gpus = ocr_cuda_device_count();
    snprintf(mi->backends, sizeof mi->backends, "%s", ocr_build_backends());
#ifdef __VERSION__
    snprintf(mi->compiler, sizeof mi->compiler, "%s %s",
#ifdef __clang__
             "clang",
#else
             "gcc",
#endif
             __VERSION__);
#endif
#ifdef NDEBUG
    snprintf(mi->build_type, sizeof mi->build_type, "optimized (NDEBUG)");
#else
    snprintf(mi->build_type, sizeof mi->build_type, "debug (assertions on)");
#endif
}

// ---- report.json ---------------------------------------------------------------------------------

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
    cJSON_AddStringToObject(o, "amp_level", r->amp_level);
    cJSON_AddStringToObject(o, "amp_dtype", r->amp_dtype);
    cJSON_AddNumberToObject(o, "batch_size", r->batch_size);
    cJSON_AddNumberToObject(o, "learning_rate", run->base_lr);
    cJSON_AddNumberToObject(o, "lr_scale", r->lr_scale);
    cJSON_AddNumberToObject(o, "steps", (double)r->n_steps);
    cJSON_AddNumberToObject(o, "steps_per_epoch", (double)r->steps_per_epoch);
    cJSON_AddNumberToObject(o, "samples_per_s", r->samples_per_s);
    cJSON_AddNumberToObject(o, "median_step_time_s", r->median_step_s);
    cJSON_AddNumberToObject(o, "epoch_time_s", r->epoch_seconds);
    cJSON_AddNumberToObject(o, "train_time_s", r->train_seconds);
    cJSON_AddItemToObject(o, "peak_memory_bytes", memory_json(&r->memory));
    cJSON_AddNumberToObject(o, "amp_cast_cache_bytes", (double)r->amp_cast_cache_bytes);
    cJSON_AddNumberToObject(o, "amp_master_bytes", (double)r->amp_master_bytes);
    add_num_or_null(o, "accuracy", r->has_final_eval ? r->acc : NAN);
    add_num_or_null(o, "norm_edit_distance", r->has_final_eval ? r->norm_edit_dis : NAN);
    add_num_or_null(o, "cer", r->has_final_eval ? r->cer : NAN);
    cJSON_AddNumberToObject(o, "eval_samples", (double)r->eval_samples);
    cJSON_AddNumberToObject(o, "eval_samples_per_s", r->eval_samples_per_s);
    if (run->eval_paths.lines > 0) cJSON_AddItemToObject(o, "eval_lines", eval_paths_json(&run->eval_paths));
    add_num_or_null(o, "final_loss", r->final_loss);
    cJSON_AddNumberToObject(o, "skipped_steps", (double)r->skipped_steps);
    cJSON_AddNumberToObject(o, "final_loss_scale", r->final_scale);
    cJSON_AddNumberToObject(o, "infeasible_samples", (double)r->infeasible_samples);
    {
        // Data parallelism: the gradient all-reduce of one step (measured with the identity
        // transport in a single process) and the ranks' throughput.
        cJSON *d = cJSON_AddObjectToObject(o, "distributed");
        cJSON_AddStringToObject(d, "backend", r->dist_backend[0] ? r->dist_backend : "single");
        cJSON_AddNumberToObject(d, "world_size", r->world_size > 0 ? r->world_size : 1);
        cJSON_AddNumberToObject(d, "global_batch", (double)r->global_batch);
        cJSON_AddNumberToObject(d, "global_samples_per_s", r->global_samples_per_s);
        cJSON *rs = cJSON_AddArrayToObject(d, "rank_samples_per_s");
        for (int k = 0; k < r->n_rank_samples_per_s; k++)
            cJSON_AddItemToArray(rs, cJSON_CreateNumber(r->rank_samples_per_s[k]));
        cJSON_AddNumberToObject(d, "allreduce_bytes_per_step", (double)r->allreduce_bytes_per_step);
        cJSON_AddNumberToObject(d, "allreduce_buckets", r->allreduce_buckets);
        cJSON_AddNumberToObject(d, "allreduce_seconds_per_step", r->allreduce_seconds_per_step);
        cJSON_AddNumberToObject(d, "allreduce_exposed_seconds_per_step", r->allreduce_exposed_per_step);
        cJSON_AddNumberToObject(d, "comm_hidden_fraction", r->comm_hidden_fraction);
        cJSON_AddBoolToObject(d, "sync_bn", r->sync_bn);
        cJSON_AddNumberToObject(d, "bn_sync_bytes_per_step", (double)r->bn_sync_bytes_per_step);
    }
    if (r->device_info.gpu) {
        // The GPU step: graph use, and the tracker against the runtime's own count.
        cJSON_AddBoolToObject(o, "cuda_graph", r->cuda_graph);
        cJSON_AddNumberToObject(o, "graph_captures", (double)r->graph_captures);
        cJSON_AddNumberToObject(o, "graph_replays", (double)r->graph_replays);
        cJSON_AddNumberToObject(o, "device_tracked_bytes", (double)r->device_tracked_bytes);
        cJSON_AddNumberToObject(o, "device_runtime_used_bytes", (double)r->device_runtime_used);
        cJSON_AddNumberToObject(o, "pinned_host_bytes", (double)r->pinned_bytes);
    }
    cJSON *ov = cJSON_AddArrayToObject(o, "overflow_locations");
    for (int i = 0; i < r->n_overflow_layers; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "layer", r->overflow_layer[i]);
        cJSON_AddNumberToObject(e, "skipped_steps", (double)r->overflow_count[i]);
        cJSON_AddItemToArray(ov, e);
    }
    // Per-step history (for charts and for anyone who wants to plot it differently).
    cJSON *h = cJSON_AddObjectToObject(o, "history");
    cJSON *loss = cJSON_AddArrayToObject(h, "loss");
    cJSON *scale = cJSON_AddArrayToObject(h, "loss_scale");
    cJSON *lr = cJSON_AddArrayToObject(h, "lr");
    cJSON *skipped = cJSON_AddArrayToObject(h, "skipped_iters");
    for (int64_t i = 0; i < r->n_steps; i++) {
        const StepRecord *s = &r->steps[i];
        char b[32];
        snprintf(b, sizeof b, "%.6g", (double)s->loss);
        cJSON_AddItemToArray(loss, isfinite(s->loss) ? cJSON_CreateNumber(strtod(b, NULL)) : cJSON_CreateNull());
        cJSON_AddItemToArray(scale, cJSON_CreateNumber(s->scale));
        snprintf(b, sizeof b, "%.6g", (double)s->lr);
        cJSON_AddItemToArray(lr, cJSON_CreateNumber(strtod(b, NULL)));
        if (s->skipped) cJSON_AddItemToArray(skipped, cJSON_CreateNumber((double)(s->iter + 1)));
    }
    cJSON *ev = cJSON_AddArrayToObject(h, "eval");
    for (int i = 0; i < r->n_evals; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "iter", (double)r->evals[i].iter);
        cJSON_AddNumberToObject(e, "accuracy", r->evals[i].acc);
        cJSON_AddNumberToObject(e, "norm_edit_distance", r->evals[i].norm_edit_dis);
        cJSON_AddNumberToObject(e, "cer", r->evals[i].cer);
        cJSON_AddItemToArray(ev, e);
    }
    return o;
}

char *report_json(const Report *rep) {
    MachineInfo mi;
    report_machine_info(&mi);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "schema", REPORT_SCHEMA);
    cJSON_AddNumberToObject(root, "schema_version", REPORT_SCHEMA_VERSION);
    cJSON_AddStringToObject(root, "created_utc", rep->created_utc);
    cJSON_AddStringToObject(root, "config", rep->config_path ? rep->config_path : "");
    cJSON_AddStringToObject(root, "command", rep->command);

    cJSON *m = cJSON_AddObjectToObject(root, "machine");
    cJSON_AddStringToObject(m, "hostname", mi.hostname);
    cJSON_AddStringToObject(m, "os", mi.os);
    cJSON_AddStringToObject(m, "cpu_model", mi.cpu_model);
    cJSON_AddNumberToObject(m, "cpu_cores", mi.cpu_cores);
    cJSON_AddNumberToObject(m, "memory_bytes", (double)mi.memory_bytes);
    cJSON_AddNumberToObject(m, "gpus", mi.gpus);
    cJSON *d = cJSON_AddObjectToObject(root, "device");
    cJSON_AddStringToObject(d, "name", rep->device);
    cJSON_AddStringToObject(d, "kind", strncmp(rep->device, "cuda", 4) == 0 ? "gpu" : "cpu");
    cJSON_AddNumberToObject(d, "threads", rep->threads);
    char isa[160];
    ocr_backend_cpu_isa(isa, sizeof isa);
    cJSON_AddStringToObject(d, "cpu_isa", isa);
    const TrainingDeviceInfo *gi = rep->n_runs > 0 ? &rep->runs[0].r.device_info : NULL;
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
    cJSON *b = cJSON_AddObjectToObject(root, "build");
    cJSON_AddStringToObject(b, "version", rep->version ? rep->version : training_version());
    cJSON_AddStringToObject(b, "backends", mi.backends);
    cJSON_AddStringToObject(b, "compiler", mi.compiler);
    cJSON_AddStringToObject(b, "build_type", mi.build_type);

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
    cJSON *ds = cJSON_AddObjectToObject(root, "dataset");
    cJSON_AddNumberToObject(ds, "train_samples", (double)rep->train_samples);
    cJSON_AddNumberToObject(ds, "eval_samples", (double)rep->eval_samples);
    cJSON *st = cJSON_AddObjectToObject(root, "settings");
    cJSON_AddNumberToObject(st, "epochs", (double)rep->epochs);
    cJSON_AddNumberToObject(st, "seed", (double)rep->seed);
    cJSON_AddStringToObject(st, "batch", rep->batch_max ? "max" : "config");
    cJSON_AddNumberToObject(st, "memory_budget_bytes", (double)rep->memory_bytes);
    cJSON_AddNumberToObject(st, "accuracy_tolerance", rep->tolerance);
    cJSON_AddNumberToObject(st, "cer_tolerance", rep->cer_tolerance);

    if (rep->has_start) {
        cJSON *sp = cJSON_AddObjectToObject(root, "start");
        cJSON_AddStringToObject(sp, "weights", rep->start_weights);
        cJSON_AddNumberToObject(sp, "accuracy", rep->start_acc);
        cJSON_AddNumberToObject(sp, "norm_edit_dis", rep->start_norm_edit_dis);
        cJSON_AddNumberToObject(sp, "cer", rep->start_cer);
        cJSON_AddNumberToObject(sp, "eval_samples", (double)rep->start_samples);
    } else {
        cJSON_AddNullToObject(root, "start");
    }
    cJSON *runs = cJSON_AddArrayToObject(root, "runs");
    for (int i = 0; i < rep->n_runs; i++) cJSON_AddItemToArray(runs, run_json(&rep->runs[i]));

    cJSON *cmp = cJSON_AddArrayToObject(root, "comparisons");
    const TrainResult *f = &rep->runs[0].r;
    double worst = 0;
    cJSON *failing = cJSON_CreateArray(), *undecided = cJSON_CreateArray();
    int fails = 0, inconclusive = 0;
    for (int i = 1; i < rep->n_runs; i++) {
        const TrainResult *r = &rep->runs[i].r;
        const ReportPaired *p = &rep->runs[i].paired;
        cJSON *c = cJSON_CreateObject();
        cJSON_AddStringToObject(c, "run", rep->runs[i].name);
        cJSON_AddStringToObject(c, "baseline", rep->runs[0].name);
        double da = acc_delta(rep, i);
        cJSON_AddNumberToObject(c, "accuracy_delta", da);
        cJSON_AddNumberToObject(c, "accuracy_delta_stderr", acc_delta_stderr(r->acc, f->acc, f->eval_samples));
        cJSON_AddNumberToObject(c, "norm_edit_distance_delta", r->norm_edit_dis - f->norm_edit_dis);
        cJSON_AddNumberToObject(c, "cer_delta", r->cer - f->cer);
        add_num_or_null(c, "final_loss_delta", r->final_loss - f->final_loss);
        cJSON_AddNumberToObject(c, "samples_per_s_ratio", ratio(r->samples_per_s, f->samples_per_s));
        cJSON_AddNumberToObject(c, "median_step_time_ratio", ratio(r->median_step_s, f->median_step_s));
        cJSON_AddNumberToObject(c, "epoch_time_ratio", ratio(r->epoch_seconds, f->epoch_seconds));
        cJSON_AddNumberToObject(c, "peak_memory_ratio",
                                ratio((double)r->memory.peak_total, (double)f->memory.peak_total));
        cJSON_AddNumberToObject(c, "peak_memory_delta_bytes", (double)(r->memory.peak_total - f->memory.peak_total));
        cJSON_AddNumberToObject(c, "activations_ratio",
                                ratio((double)r->memory.peak[OCR_MEM_ACTIVATIONS],
                                      (double)f->memory.peak[OCR_MEM_ACTIVATIONS]));
        cJSON_AddNumberToObject(c, "batch_size_ratio", ratio(r->batch_size, f->batch_size));
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
        cJSON_AddBoolToObject(c, "within_tolerance", p->has && p->acc_verdict == PAIRED_PASS);
        cJSON_AddStringToObject(c, "verdict", paired_verdict_name(v));
        cJSON_AddItemToArray(cmp, c);
        if (v == PAIRED_REGRESSION) {
            fails++;
            cJSON_AddItemToArray(failing, cJSON_CreateString(rep->runs[i].name));
        } else if (v == PAIRED_INCONCLUSIVE) {
            inconclusive++;
            cJSON_AddItemToArray(undecided, cJSON_CreateString(rep->runs[i].name));
        }
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
    int64_t need = report_lines_needed(rep);
    if (code == REPORT_EXIT_INCONCLUSIVE && need >= 0) cJSON_AddNumberToObject(v, "lines_needed", (double)need);
    else cJSON_AddNullToObject(v, "lines_needed");
    cJSON_AddNumberToObject(v, "exit_code", code);
    cJSON_AddStringToObject(v, "rule",
                            "per run and metric, the paired 95% interval of the delta (run - baseline): regression "
                            "when it lies entirely on the worse side beyond the tolerance, better when entirely on the "
                            "better side beyond it, pass when its worse edge stays within the tolerance "
                            "(non-inferiority), inconclusive when it straddles the tolerance on the worse side; a "
                            "run regresses if either metric does, is inconclusive if either is; exit 3 on any "
                            "regression, else 4 on any inconclusive run, else 0");
    char text[768];
    char nb[64];
    if (code == REPORT_EXIT_REGRESSION)
        snprintf(text, sizeof text, "%d AMP run(s) are worse than FP32 beyond the tolerance (accuracy ±%.4g, CER "
                 "±%.4g) with 95%% confidence", fails, rep->tolerance, rep->cer_tolerance);
    else if (code == REPORT_EXIT_INCONCLUSIVE)
        snprintf(text, sizeof text, "%d AMP run(s) cannot be told apart from a regression of more than the tolerance "
                 "on %lld eval lines; %s%s lines would make it conclusive at the observed rates", inconclusive,
                 (long long)rep->eval_samples, need >= 0 ? "about " : "no number of",
                 need >= 0 ? fmt_lines(need, nb, sizeof nb) : "");
    else
        snprintf(text, sizeof text, "no AMP run is worse than FP32 by more than %.4g accuracy or %.4g CER with 95%% "
                 "confidence (worst accuracy delta %+.4f)", rep->tolerance, rep->cer_tolerance, worst);
    cJSON_AddStringToObject(v, "summary", text);
    char *out = cJSON_Print(root);
    cJSON_Delete(root);
    return out;
}

// ---- a growing text buffer --------------------------------------------------------------------------

typedef struct {
    char *s;
    size_t n, cap;
    int oom;
} Buf;

static void bprintf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(Buf *b, const char *fmt, ...) {
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

static void besc(Buf *b, const char *s) {
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

static const char *fmt_bytes(int64_t v, char *buf, size_t n) { return ocr_format_bytes(v, buf, n); }

static const char *fmt_secs(double s, char *buf, size_t n) {
    if (!(s >= 0)) snprintf(buf, n, "-");
    else if (s >= 3600) snprintf(buf, n, "%.0fh %02.0fm", floor(s / 3600), fmod(floor(s / 60), 60));
    else if (s >= 60) snprintf(buf, n, "%.0fm %02.0fs", floor(s / 60), fmod(floor(s), 60));
    else snprintf(buf, n, "%.2fs", s);
    return buf;
}

// ---- report.md ---------------------------------------------------------------------------------------

// The verdict's one-line statement (Markdown and HTML).
static void verdict_text(Buf *b, const Report *rep) {
    int code = report_exit_code(rep);
    char nb[64];
    if (code == REPORT_EXIT_REGRESSION)
        bprintf(b, "REGRESSION (exit 3): an AMP run is worse than %s beyond the tolerance with 95%% confidence",
                rep->runs[0].name);
    else if (code == REPORT_EXIT_INCONCLUSIVE && report_lines_needed(rep) >= 0)
        bprintf(b, "INCONCLUSIVE (exit 4): %lld eval lines cannot tell the difference from a regression of more than "
                   "the tolerance; about %s lines would decide it at the observed rates",
                (long long)rep->eval_samples, fmt_lines(report_lines_needed(rep), nb, sizeof nb));
    else if (code == REPORT_EXIT_INCONCLUSIVE)
        bprintf(b, "INCONCLUSIVE (exit 4): %lld eval lines cannot tell the difference from a regression of more than "
                   "the tolerance, and no eval set size would at the observed rates (a delta on the tolerance edge, "
                   "or nothing scored)", (long long)rep->eval_samples);
    else
        bprintf(b, "PASS: no AMP run is worse than %s by more than the tolerance with 95%% confidence", rep->runs[0].name);
    bprintf(b, " (paired per line; tolerance ±%.4g accuracy, ±%.4g CER, absolute)", rep->tolerance,
            rep->cer_tolerance);
}

static void fmt_ci(char *buf, size_t cap, double d, PairedInterval ci) {
    snprintf(buf, cap, "%+.4f [%+.4f, %+.4f]", d, ci.lo, ci.hi);
}

static void markdown(Buf *b, const Report *rep, const MachineInfo *mi) {
    char x[32], y[32], z[32];
    bprintf(b, "# ocrtrain compare: FP32 vs AMP\n\n**Verdict: ");
    verdict_text(b, rep);
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
    bprintf(b, "| run | level | dtype | batch | samples/s | median step | epoch time | peak memory | accuracy | "
               "norm. edit dist. | CER | final loss | skipped | final scale |\n");
    bprintf(b, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < rep->n_runs; i++) {
        const TrainResult *r = &rep->runs[i].r;
        bprintf(b, "| %s | %s | %s | %d | %.1f | %.3f s | %s | %s | %.4f | %.4f | %.4f | %.4f | %lld | %g |\n",
                rep->runs[i].name, r->amp_level, r->amp_dtype, r->batch_size, r->samples_per_s, r->median_step_s,
                fmt_secs(r->epoch_seconds, x, sizeof x), fmt_bytes(r->memory.peak_total, y, sizeof y), r->acc,
                r->norm_edit_dis, r->cer, r->final_loss, (long long)r->skipped_steps, (double)r->final_scale);
    }
    // Data parallelism: what each run's gradients cost on the wire (FP16/BF16-O2: half of FP32).
    if (rep->n_runs > 0 && rep->runs[0].r.allreduce_bytes_per_step > 0) {
        const TrainResult *r0 = &rep->runs[0].r;
        bprintf(b, "\nGradient all-reduce per step and rank (%s, %d rank%s, global batch %lld):", r0->dist_backend,
                r0->world_size, r0->world_size == 1 ? "" : "s", (long long)r0->global_batch);
        for (int i = 0; i < rep->n_runs; i++) {
            const TrainResult *r = &rep->runs[i].r;
            bprintf(b, "%s %s %s (%.3f x %s)", i ? ";" : "", rep->runs[i].name,
                    fmt_bytes(r->allreduce_bytes_per_step, x, sizeof x),
                    ratio((double)r->allreduce_bytes_per_step, (double)r0->allreduce_bytes_per_step),
                    rep->runs[0].name);
            if (r->world_size > 1)
                bprintf(b, ", %.2f ms, %.0f %% behind the backward, %.1f samples/s over the ranks",
                        1e3 * r->allreduce_seconds_per_step, 100 * r->comm_hidden_fraction, r->global_samples_per_s);
            if (r->sync_bn)
                bprintf(b, ", batch norm synchronised over the ranks (%s of statistics)",
                        fmt_bytes(r->bn_sync_bytes_per_step, x, sizeof x));
        }
        bprintf(b, ".\n");
    }
    if (rep->has_start) {
        bprintf(b, "\nBefore training, the pretrained weights `%s` (FP32) read %.4f of the same %lld eval lines "
                   "(CER %.4f, norm. edit dist. %.4f); after it:",
                rep->start_weights, rep->start_acc, (long long)rep->start_samples, rep->start_cer,
                rep->start_norm_edit_dis);
        for (int i = 0; i < rep->n_runs; i++)
            bprintf(b, "%s %s %.4f (%+.4f)", i ? "," : "", rep->runs[i].name, rep->runs[i].r.acc,
                    rep->runs[i].r.acc - rep->start_acc);
        bprintf(b, ".\n");
    }
    if (rep->n_runs > 1) {
        bprintf(b, "\n## Paired verdict against %s\n\n", rep->runs[0].name);
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
        bprintf(b, "\n## Against %s\n\n", rep->runs[0].name);
        bprintf(b, "| run | Δ accuracy | Δ norm. edit dist. | Δ CER | throughput | epoch time | peak memory | "
                   "activations |\n");
        bprintf(b, "|---|---:|---:|---:|---:|---:|---:|---:|\n");
        const TrainResult *f = &rep->runs[0].r;
        for (int i = 1; i < rep->n_runs; i++) {
            const TrainResult *r = &rep->runs[i].r;
            bprintf(b, "| %s | %+.4f | %+.4f | %+.4f | ×%.2f | ×%.2f | ×%.2f (%s%s) | ×%.2f |\n", rep->runs[i].name,
                    acc_delta(rep, i), r->norm_edit_dis - f->norm_edit_dis, r->cer - f->cer,
                    ratio(r->samples_per_s, f->samples_per_s), ratio(r->epoch_seconds, f->epoch_seconds),
                    ratio((double)r->memory.peak_total, (double)f->memory.peak_total),
                    r->memory.peak_total >= f->memory.peak_total ? "+" : "-",
                    fmt_bytes(llabs(r->memory.peak_total - f->memory.peak_total), z, sizeof z),
                    ratio((double)r->memory.peak[OCR_MEM_ACTIVATIONS], (double)f->memory.peak[OCR_MEM_ACTIVATIONS]));
        }
    }
    bprintf(b, "\n## Peak memory by category\n\n| run |");
    for (int c = 0; c < OCR_MEM_CATEGORY_COUNT; c++) bprintf(b, " %s |", ocr_mem_category_name((ocr_mem_category_t)c));
    bprintf(b, " total |\n|---|");
    for (int c = 0; c <= OCR_MEM_CATEGORY_COUNT; c++) bprintf(b, "---:|");
    bprintf(b, "\n");
    for (int i = 0; i < rep->n_runs; i++) {
        const OcrMemStats *m = &rep->runs[i].r.memory;
        bprintf(b, "| %s |", rep->runs[i].name);
        for (int c = 0; c < OCR_MEM_CATEGORY_COUNT; c++) bprintf(b, " %s |", fmt_bytes(m->peak[c], x, sizeof x));
        bprintf(b, " %s |\n", fmt_bytes(m->peak_total, x, sizeof x));
    }
    bprintf(b, "\nEach category's own peak; the total is the peak of the sum (categories peak at different moments).\n");
    int any = 0;
    for (int i = 0; i < rep->n_runs; i++) any |= rep->runs[i].r.skipped_steps > 0;
    if (any) {
        bprintf(b, "\n## Skipped steps (inf/NaN gradients)\n\n");
        for (int i = 0; i < rep->n_runs; i++) {
            const TrainResult *r = &rep->runs[i].r;
            if (!r->skipped_steps) continue;
            bprintf(b, "- %s: %lld skipped, final loss scale %g; first overflowing layer:", rep->runs[i].name,
                    (long long)r->skipped_steps, (double)r->final_scale);
            for (int k = 0; k < r->n_overflow_layers; k++)
                bprintf(b, "%s `%s` (%lld)", k ? "," : "", r->overflow_layer[k], (long long)r->overflow_count[k]);
            bprintf(b, "\n");
        }
    }
    bprintf(b, "\n## Machine\n\n- host %s, %s\n- CPU %s, %d cores, %s memory, %d GPU(s)\n- build %s (%s), backends "
               "%s, %s\n- created %s\n- command `%s`\n",
            mi->hostname, mi->os, mi->cpu_model, mi->cpu_cores, fmt_bytes(mi->memory_bytes, x, sizeof x), mi->gpus,
            rep->version ? rep->version : training_version(), mi->build_type, mi->backends, mi->compiler,
            rep->created_utc, rep->command);
    const TrainingDeviceInfo *gi = rep->n_runs > 0 ? &rep->runs[0].r.device_info : NULL;
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
                    rep->runs[i].name, fmt_bytes(r->device_tracked_bytes, x, sizeof x),
                    fmt_bytes(r->device_runtime_used, u, sizeof u), r->cuda_graph ? "used" : "not used",
                    (long long)r->graph_captures, (long long)r->graph_replays);
        }
    }
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

// ---- SVG charts -------------------------------------------------------------------------------------------

static const char *const COLORS[] = {"#1f6fb4", "#e4572e", "#2e9e44", "#9c4dcc", "#c48a00", "#17a2b8", "#7f7f7f",
                                     "#d62a8a"};

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

// Loss of every run, smoothed over a window and reduced to at most ~300 points.
static void chart_loss(Buf *b, const Report *rep) {
    Axes a = {0, 1, 0, 1, 0, 760, 300, 60, 16, 28, 36};
    double ymax = 0, ymin = INFINITY;
    int64_t xmax = 1;
    for (int i = 0; i < rep->n_runs; i++) {
        const TrainResult *r = &rep->runs[i].r;
        if (r->n_steps > xmax) xmax = r->n_steps;
        for (int64_t k = 0; k < r->n_steps; k++) {
            double v = r->steps[k].loss;
            if (!isfinite(v) || r->steps[k].skipped) continue;
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
        if (r->n_steps == 0) continue;
        int64_t win = r->n_steps / 50 > 1 ? r->n_steps / 50 : 1;
        int64_t stride = r->n_steps / 300 > 1 ? r->n_steps / 300 : 1;
        bprintf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\" points=\"", COLORS[i % 8]);
        for (int64_t k = 0; k < r->n_steps; k += stride) {
            double s = 0;
            int64_t n = 0;
            for (int64_t j = k - win + 1; j <= k; j++) {
                if (j < 0) continue;
                double v = r->steps[j].loss;
                if (isfinite(v) && !r->steps[j].skipped) s += v, n++;
            }
            if (n) bprintf(b, "%.1f,%.1f ", px(&a, (double)(k + 1)), py(&a, s / (double)n));
        }
        bprintf(b, "\"/>\n");
    }
    svg_legend(b, &a, rep);
    bprintf(b, "</svg>\n");
}

static void chart_accuracy(Buf *b, const Report *rep) {
    Axes a = {0, 1, 0, 1, 0, 760, 280, 60, 16, 28, 36};
    int64_t xmax = 1;
    int any = 0;
    for (int i = 0; i < rep->n_runs; i++) {
        const TrainResult *r = &rep->runs[i].r;
        if (r->n_steps > xmax) xmax = r->n_steps;
        any |= r->n_evals > 0 || r->has_final_eval;
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
        for (int k = 0; k < r->n_evals; k++) bprintf(b, "%.1f,%.1f ", px(&a, (double)r->evals[k].iter), py(&a, r->evals[k].acc));
        if (r->has_final_eval) bprintf(b, "%.1f,%.1f", px(&a, (double)r->n_steps), py(&a, r->acc));
        bprintf(b, "\"/>\n");
        for (int k = 0; k < r->n_evals; k++)
            bprintf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>", px(&a, (double)r->evals[k].iter),
                    py(&a, r->evals[k].acc), c);
        if (r->has_final_eval)
            bprintf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"><title>%s final %.4f</title></circle>\n",
                    px(&a, (double)r->n_steps), py(&a, r->acc), c, rep->runs[i].name, r->acc);
    }
    svg_legend(b, &a, rep);
    bprintf(b, "</svg>\n");
}

static void chart_scale(Buf *b, const Report *rep) {
    Axes a = {0, 1, 0.5, 2, 1, 760, 260, 60, 16, 28, 36};
    double lo = INFINITY, hi = 0;
    int64_t xmax = 1;
    for (int i = 0; i < rep->n_runs; i++) {
        const TrainResult *r = &rep->runs[i].r;
        if (r->n_steps > xmax) xmax = r->n_steps;
        for (int64_t k = 0; k < r->n_steps; k++) {
            double s = r->steps[k].scale;
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
        for (int64_t k = 0; k < r->n_steps; k++) {
            float s = r->steps[k].scale;
            if (s != prev || k == r->n_steps - 1) {
                // Steps: hold the previous value up to this iteration.
                if (prev > 0) bprintf(b, "%.1f,%.1f ", px(&a, (double)(k + 1)), py(&a, prev));
                bprintf(b, "%.1f,%.1f ", px(&a, (double)(k + 1)), py(&a, s));
                prev = s;
            }
        }
        bprintf(b, "\"/>\n");
        for (int64_t k = 0; k < r->n_steps; k++)
            if (r->steps[k].skipped)
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

static void chart_memory(Buf *b, const Report *rep) {
    double W = 760, rowh = 34, L = 90, R = 130, T = 30;
    double H = T + rowh * rep->n_runs + 40;
    double maxv = 1;
    for (int i = 0; i < rep->n_runs; i++) {
        double s = 0;
        for (int c = 0; c < OCR_MEM_CATEGORY_COUNT; c++) s += (double)rep->runs[i].r.memory.peak[c];
        if (s > maxv) maxv = s;
    }
    bprintf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %.0f %.0f\" class=\"chart\" role=\"img\">\n"
               "<title>Peak memory by category</title><text x=\"%.0f\" y=\"18\" class=\"ct\">Peak memory by category "
               "(stacked per-category peaks; | = peak total)</text>\n",
            W, H, L);
    char x[32];
    for (int i = 0; i < rep->n_runs; i++) {
        const OcrMemStats *m = &rep->runs[i].r.memory;
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

static void chart_throughput(Buf *b, const Report *rep) {
    double W = 760, rowh = 30, L = 90, R = 280, T = 30;
    double H = T + rowh * rep->n_runs + 16;
    double maxv = 1e-9;
    for (int i = 0; i < rep->n_runs; i++)
        if (rep->runs[i].r.samples_per_s > maxv) maxv = rep->runs[i].r.samples_per_s;
    bprintf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %.0f %.0f\" class=\"chart\" role=\"img\">\n"
               "<title>Training throughput</title><text x=\"%.0f\" y=\"18\" class=\"ct\">Training throughput "
               "(samples/s, steady state) and time per epoch</text>\n",
            W, H, L);
    char e[32];
    for (int i = 0; i < rep->n_runs; i++) {
        const TrainResult *r = &rep->runs[i].r;
        double y = T + rowh * i + 4, w = r->samples_per_s / maxv * (W - L - R);
        bprintf(b, "<text x=\"%.0f\" y=\"%.1f\" class=\"tl\" text-anchor=\"end\">", L - 6, y + 14);
        besc(b, rep->runs[i].name);
        bprintf(b, "</text><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"20\" fill=\"%s\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\" class=\"tl\">%.1f samples/s · batch %d · epoch %s</text>\n",
                L, y, w, COLORS[i % 8], L + w + 6, y + 14, r->samples_per_s, r->batch_size,
                fmt_secs(r->epoch_seconds, e, sizeof e));
    }
    bprintf(b, "</svg>\n");
}

static void html(Buf *b, const Report *rep, const MachineInfo *mi) {
    int code = report_exit_code(rep);
    char x[32], y[32], z[32];
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
        verdict_text(&t, rep);
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
    if (rep->has_start) {
        bprintf(b, "<p>Before training, the pretrained weights <code>");
        besc(b, rep->start_weights);
        bprintf(b, "</code> (FP32) read <b>%.4f</b> of the same %lld eval lines (CER %.4f); after it:", rep->start_acc,
                (long long)rep->start_samples, rep->start_cer);
        for (int i = 0; i < rep->n_runs; i++) {
            bprintf(b, "%s ", i ? "," : "");
            besc(b, rep->runs[i].name);
            bprintf(b, " <b>%.4f</b> (%+.4f)", rep->runs[i].r.acc, rep->runs[i].r.acc - rep->start_acc);
        }
        bprintf(b, ".</p>\n");
    }

    bprintf(b, "<h2>Runs</h2>\n<table><tr><th>run</th><th>level</th><th>dtype</th><th>batch</th><th>samples/s</th>"
               "<th>median step</th><th>epoch time</th><th>peak memory</th><th>accuracy</th><th>norm. edit dist.</th>"
               "<th>CER</th><th>final loss</th><th>skipped</th><th>final scale</th></tr>\n");
    for (int i = 0; i < rep->n_runs; i++) {
        const TrainResult *r = &rep->runs[i].r;
        bprintf(b, "<tr><td><b style=\"color:%s\">", COLORS[i % 8]);
        besc(b, rep->runs[i].name);
        bprintf(b, "</b></td><td>%s</td><td>%s</td><td>%d</td><td>%.1f</td><td>%.3f s</td><td>%s</td><td>%s</td>"
                   "<td>%.4f</td><td>%.4f</td><td>%.4f</td><td>%.4f</td><td%s>%lld</td><td>%g</td></tr>\n",
                r->amp_level, r->amp_dtype, r->batch_size, r->samples_per_s, r->median_step_s,
                fmt_secs(r->epoch_seconds, x, sizeof x), fmt_bytes(r->memory.peak_total, y, sizeof y), r->acc,
                r->norm_edit_dis, r->cer, r->final_loss, r->skipped_steps ? " class=\"bad\"" : "",
                (long long)r->skipped_steps, (double)r->final_scale);
    }
    bprintf(b, "</table>\n");
    // Data parallelism: each run's gradient all-reduce per step and rank (FP16/BF16-O2: about half).
    if (rep->n_runs > 0 && rep->runs[0].r.allreduce_bytes_per_step > 0) {
        const TrainResult *r0 = &rep->runs[0].r;
        bprintf(b, "<p>Gradient all-reduce per step and rank (%s, %d rank%s, global batch %lld):", r0->dist_backend,
                r0->world_size, r0->world_size == 1 ? "" : "s", (long long)r0->global_batch);
        for (int i = 0; i < rep->n_runs; i++) {
            const TrainResult *r = &rep->runs[i].r;
            bprintf(b, "%s ", i ? ";" : "");
            besc(b, rep->runs[i].name);
            bprintf(b, " <b>%s</b> (%.3f&times;)", fmt_bytes(r->allreduce_bytes_per_step, x, sizeof x),
                    ratio((double)r->allreduce_bytes_per_step, (double)r0->allreduce_bytes_per_step));
            if (r->world_size > 1)
                bprintf(b, ", %.2f ms, %.0f %% behind the backward, %.1f samples/s over the ranks",
                        1e3 * r->allreduce_seconds_per_step, 100 * r->comm_hidden_fraction, r->global_samples_per_s);
        }
        bprintf(b, ".</p>\n");
    }
    if (rep->n_runs > 1) {
        const TrainResult *f = &rep->runs[0].r;
        bprintf(b, "<h2>Paired verdict against ");
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
                    acc_delta(rep, i), r->norm_edit_dis - f->norm_edit_dis, r->cer - f->cer,
                    ratio(r->samples_per_s, f->samples_per_s), ratio(r->epoch_seconds, f->epoch_seconds),
                    ratio((double)r->memory.peak_total, (double)f->memory.peak_total),
                    r->memory.peak_total >= f->memory.peak_total ? "+" : "−",
                    fmt_bytes(llabs(r->memory.peak_total - f->memory.peak_total), z, sizeof z),
                    ratio((double)r->memory.peak[OCR_MEM_ACTIVATIONS], (double)f->memory.peak[OCR_MEM_ACTIVATIONS]));
        }
        bprintf(b, "</table>\n");
    }
    bprintf(b, "<h2>Training</h2>\n");
    chart_loss(b, rep);
    chart_accuracy(b, rep);
    chart_scale(b, rep);
    int any = 0;
    for (int i = 0; i < rep->n_runs; i++) any |= rep->runs[i].r.skipped_steps > 0;
    if (any) {
        bprintf(b, "<ul>\n");
        for (int i = 0; i < rep->n_runs; i++) {
            const TrainResult *r = &rep->runs[i].r;
            if (!r->skipped_steps) continue;
            bprintf(b, "<li>");
            besc(b, rep->runs[i].name);
            bprintf(b, ": %lld skipped step(s); first overflowing layer: ", (long long)r->skipped_steps);
            for (int k = 0; k < r->n_overflow_layers; k++) {
                bprintf(b, "%s<code>", k ? ", " : "");
                besc(b, r->overflow_layer[k]);
                bprintf(b, "</code> (%lld)", (long long)r->overflow_count[k]);
            }
            bprintf(b, "</li>\n");
        }
        bprintf(b, "</ul>\n");
    }
    bprintf(b, "<h2>Memory and speed</h2>\n");
    chart_memory(b, rep);
    chart_throughput(b, rep);
    bprintf(b, "<table><tr><th>run</th>");
    for (int c = 0; c < OCR_MEM_CATEGORY_COUNT; c++) bprintf(b, "<th>%s</th>", ocr_mem_category_name((ocr_mem_category_t)c));
    bprintf(b, "<th>total</th></tr>\n");
    for (int i = 0; i < rep->n_runs; i++) {
        const OcrMemStats *m = &rep->runs[i].r.memory;
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
    const TrainingDeviceInfo *gi = rep->n_runs > 0 ? &rep->runs[0].r.device_info : NULL;
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
    bprintf(b, "</table>\n<p class=\"muted\">report.json holds every figure above (schema %s v%d).</p>\n"
               "</body></html>\n",
            REPORT_SCHEMA, REPORT_SCHEMA_VERSION);
}

ocr_status_t report_write(const Report *rep, const char *dir) {
    MachineInfo mi;
    report_machine_info(&mi);
    char p[4200];
    char *json = report_json(rep);
    if (!json) return ocr_set_error(OCR_ERR_OOM, "report.json: out of memory");
    snprintf(p, sizeof p, "%s/report.json", dir);
    ocr_status_t st = ocr_write_file_atomic(p, json, strlen(json));
    free(json);
    OCR_TRY(st);
    Buf b = {0};
    markdown(&b, rep, &mi);
    if (b.oom) return ocr_set_error(OCR_ERR_OOM, "report.md: out of memory");
    snprintf(p, sizeof p, "%s/report.md", dir);
    st = ocr_write_file_atomic(p, b.s, b.n);
    free(b.s);
    OCR_TRY(st);
    Buf h = {0};
    html(&h, rep, &mi);
    if (h.oom) return ocr_set_error(OCR_ERR_OOM, "report.html: out of memory");
    snprintf(p, sizeof p, "%s/report.html", dir);
    st = ocr_write_file_atomic(p, h.s, h.n);
    free(h.s);
    return st;
}

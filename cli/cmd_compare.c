// ocrtrain compare -c CFG --out DIR [--dtypes float16,bfloat16] [--levels O1,O2] [--batch max|N]
//                  [--memory SIZE] [--max-steps N] [-o Key.path=value ...]
//
// Trains an FP32 (O0) run and one run per AMP setting from the same initial weights (the same
// seed initialises the same parameters), the same data order and the same seeds, evaluates the
// final weights of each on every line of the Eval split (training/evaluate.h), pairs each AMP run
// with FP32 line by line (eval/paired.h) and writes DIR/report.{json,md,html}. Exit code 3 when
// an AMP run is worse than FP32 beyond the tolerance with 95 % confidence, 4 when the eval set
// cannot decide (the report says how many lines would), 0 when every run is within tolerance.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <omp.h>

#include "training/capacity.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "training/evaluate.h"
#include "training/inference.h"
#include "training/report.h"
#include "training/run_config.h"
#include "training/trainer.h"
#include "core/fileio.h"
#include "data/transforms.h"
#include "distributed/dist.h"
#include "models/model.h"
#include "kernels/backend.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: ocrtrain compare -c CFG --out DIR [--dtypes float16,bfloat16] [--levels O1,O2]\n"
            "                        [--batch max|N] [--memory SIZE] [--max-steps N] [-o Key.path=value ...]\n"
            "  --dtypes     AMP dtypes to compare with FP32 (default: Global.amp_dtype, else float16)\n"
            "  --levels     AMP levels (default: Global.amp_level, else O2)\n"
            "  --batch max  each run at the largest batch its precision fits in --memory (capacity planner),\n"
            "               learning rate scaled linearly; --batch N: every run at batch N (also scaled)\n"
            "  --memory     the budget for --batch max (16G, 512MiB ...); required on the CPU (on a GPU: 90%% of its\n"
            "               free memory)\n"
            "  --max-steps  stop every run after N iterations (quick checks)\n"
            "Writes DIR/report.json, DIR/report.md, DIR/report.html and DIR/runs/<run>/. The verdict pairs each AMP\n"
            "run with FP32 line by line: exit 0 when the 95%% intervals of the accuracy and CER deltas lie within\n"
            "Global.accuracy_tolerance / Global.cer_tolerance (default 0.005 each), 3 when one lies beyond it on the\n"
            "worse side (regression), 4 when the eval set is too small to decide (inconclusive).\n");
}

typedef struct {
    char name[32];
    const char *level, *dtype;  // NULL for fp32
} RunSpec;

static int split_list(char *s, const char **out, int max) {
    int n = 0;
    for (char *tok = strtok(s, ","); tok && n < max; tok = strtok(NULL, ",")) out[n++] = tok;
    return n;
}

static const char *backbone_name(const OcrArch *a) {
    return a->backbone == OCR_BACKBONE_MV1E ? "MobileNetV1Enhance" : a->backbone == OCR_BACKBONE_LCNETV3 ? "PPLCNetV3"
                                                                                                          : "SVTRNet";
}

// A copy of base with the run's overrides (precision, output directory, batch).
static ocr_status_t run_config(OcrConfig **out, const OcrConfig *base, const RunSpec *rs, const char *dir, int batch) {
    char *json = ocr_config_to_json(base);
    if (!json) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    ocr_status_t st = ocr_config_parse(out, json, ocr_config_source(base));
    free(json);
    OCR_TRY(st);
    char ov[4400];
    const char *list[8];
    int n = 0;
    list[n++] = rs->level ? "Global.use_amp=true" : "Global.use_amp=false";
    char lv[64], dt[64], sd[4200], bs[64];
    if (rs->level) {
        snprintf(lv, sizeof lv, "Global.amp_level=%s", rs->level);
        snprintf(dt, sizeof dt, "Global.amp_dtype=%s", rs->dtype);
        list[n++] = lv;
        list[n++] = dt;
    }
    snprintf(sd, sizeof sd, "Global.save_model_dir=\"%s/runs/%s\"", dir, rs->name);
    list[n++] = sd;
    list[n++] = "Global.checkpoints=null";
    if (batch > 0) {
        snprintf(bs, sizeof bs, "Train.loader.batch_size_per_card=%d", batch);
        list[n++] = bs;
    }
    for (int i = 0; i < n && st == OCR_OK; i++) {
        snprintf(ov, sizeof ov, "%s", list[i]);
        st = ocr_config_apply_override(*out, ov);
    }
    if (st != OCR_OK) ocr_config_free(*out);
    return st;
}

int cmd_compare(int argc, char **argv) {
    CliConfigArgs ca = {0};
    const char *out_dir = NULL, *dtypes_arg = NULL, *levels_arg = NULL, *batch_arg = NULL;
    int64_t memory = 0, max_steps = 0;
    int code = 2;
    for (int i = 1; i < argc;) {
        int n = cli_take_config_arg(&ca, argc, argv, i);
        if (n < 0) {
            fprintf(stderr, "ocrtrain compare: %s\n", ocr_last_error());
            goto usage_error;
        }
        if (n > 0) {
            i += n;
            continue;
        }
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--out") == 0 && v) {
            out_dir = v;
        } else if (strcmp(a, "--dtypes") == 0 && v) {
            dtypes_arg = v;
        } else if (strcmp(a, "--levels") == 0 && v) {
            levels_arg = v;
        } else if (strcmp(a, "--batch") == 0 && v) {
            batch_arg = v;
        } else if (strcmp(a, "--memory") == 0 && v) {
            if (!parse_memory_size(v, &memory)) {
                fprintf(stderr, "ocrtrain compare: --memory: cannot read '%s' (examples: 16G, 512MiB)\n", v);
                goto usage_error;
            }
        } else if (strcmp(a, "--max-steps") == 0 && v) {
            char *end;
            max_steps = strtoll(v, &end, 10);
            if (*end || max_steps < 1) {
                fprintf(stderr, "ocrtrain compare: --max-steps needs a positive integer, got '%s'\n", v);
                goto usage_error;
            }
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            cli_config_args_free(&ca);
            return 0;
        } else {
            fprintf(stderr, "ocrtrain compare: unexpected argument '%s'\n", a);
            goto usage_error;
        }
        i += 2;
    }
    if (!ca.config || !out_dir) {
        fprintf(stderr, "ocrtrain compare: %s is required\n", !ca.config ? "a config (-c CFG)" : "--out DIR");
        goto usage_error;
    }
    int batch_max = 0, batch_fixed = 0;
    if (batch_arg) {
        if (strcmp(batch_arg, "max") == 0) {
            batch_max = 1;
        } else {
            char *end;
            long b = strtol(batch_arg, &end, 10);
            if (*end || b < 1 || b > 1 << 16) {
                fprintf(stderr, "ocrtrain compare: --batch takes max or a positive integer, got '%s'\n", batch_arg);
                goto usage_error;
            }
            batch_fixed = (int)b;
        }
    }

    OcrConfig *cfg;
    RunConfig rc;
    ocr_status_t st = run_config_load(&cfg, &rc, ca.config, (const char *const *)ca.overrides, ca.n_overrides,
                                      RUN_NEED_TRAIN | RUN_NEED_EVAL);
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain compare: %s\n", ocr_last_error());
        cli_config_args_free(&ca);
        return cli_exit_code(st);
    }
    char dev[32];
    st = training_resolve_device(rc.device_name, dev, sizeof dev);
#ifdef OCR_HAVE_CUDA
    if (st == OCR_OK && batch_max && memory == 0 && strncmp(dev, "cuda", 4) == 0) {
        // On a GPU the budget defaults to the device's free memory (less 10 % for the CUDA
        // context's growth and the libraries' handles, which the tracker does not see).
        ocr_device_t d;
        OcrDeviceInfo ci;
        if (ocr_device_parse(dev, &d) == OCR_OK && ocr_backend_device_info(d, &ci) == OCR_OK)
            memory = (int64_t)((double)ci.free_memory * 0.9);
    }
#endif
    if (st == OCR_OK && batch_max && memory == 0)
        st = ocr_set_error(OCR_ERR_INVALID_ARG, "--batch max needs --memory SIZE on the CPU");

    // The runs: FP32, then every level × dtype.
    RunSpec specs[REPORT_MAX_RUNS];
    int nspec = 0;
    snprintf(specs[nspec].name, sizeof specs[0].name, "fp32");
    specs[nspec].level = specs[nspec].dtype = NULL;
    nspec++;
    char dbuf[256], lbuf[64];
    const char *dts[4], *lvs[2];
    const char *cfg_dtype, *cfg_level;
    ocr_config_get_string(cfg, "Global.amp_dtype", "float16", &cfg_dtype);
    ocr_config_get_string(cfg, "Global.amp_level", "O2", &cfg_level);
    snprintf(dbuf, sizeof dbuf, "%s", dtypes_arg ? dtypes_arg : cfg_dtype);
    snprintf(lbuf, sizeof lbuf, "%s", levels_arg ? levels_arg : cfg_level);
    int nd = split_list(dbuf, dts, 4), nl = split_list(lbuf, lvs, 2);
    for (int l = 0; l < nl && st == OCR_OK; l++) {
        if (strcmp(lvs[l], "O1") != 0 && strcmp(lvs[l], "O2") != 0)
            st = ocr_set_error(OCR_ERR_INVALID_ARG, "--levels: %s is not O1 or O2", lvs[l]);
        for (int d = 0; d < nd && st == OCR_OK; d++) {
            const char *shortname = strcmp(dts[d], "float16") == 0 ? "fp16" : strcmp(dts[d], "bfloat16") == 0 ? "bf16" : NULL;
            if (!shortname) {
                st = ocr_set_error(OCR_ERR_INVALID_ARG, "--dtypes: %s is not float16 or bfloat16", dts[d]);
                break;
            }
            if (nspec == REPORT_MAX_RUNS) break;
            RunSpec *r = &specs[nspec++];
            snprintf(r->name, sizeof r->name, "%s-%c%c", shortname, lvs[l][0] == 'O' ? 'o' : lvs[l][0], lvs[l][1]);
            r->level = lvs[l];
            r->dtype = dts[d];
        }
    }
    // Batch per run and a validated config for each, before anything is written.
    int batch[REPORT_MAX_RUNS];
    OcrConfig *rcfg[REPORT_MAX_RUNS] = {0};
    RunConfig rrc[REPORT_MAX_RUNS];
    for (int i = 0; i < nspec && st == OCR_OK; i++) {
        batch[i] = batch_fixed;
        if (batch_max) {
            char pname[16];
            if (!specs[i].level) snprintf(pname, sizeof pname, "fp32");
            else snprintf(pname, sizeof pname, "%.15s", specs[i].name);
            if (!capacity_precision_overrides(pname)) {
                st = ocr_set_error(OCR_ERR_INVALID_ARG, "--batch max plans fp32, fp16-o1, fp16-o2 and bf16-o2; %s has "
                                   "no plan", pname);
                break;
            }
            CapacityPrecision cp;
            st = capacity_plan(cfg, pname, memory, &cp);
            if (st != OCR_OK) break;
            if (cp.max_batch < 1) {
                st = ocr_set_error(OCR_ERR_INVALID_ARG, "--memory %lld bytes does not fit one %s sample (fixed %lld, "
                                   "%lld per sample)", (long long)memory, pname, (long long)cp.fixed_bytes,
                                   (long long)cp.bytes_per_sample);
                break;
            }
            batch[i] = cp.max_batch > 65536 ? 65536 : (int)cp.max_batch;
            // The plan extrapolates op scratch from two small probes; scratch grows in blocks
            // and by other rules on other CPUs (an emulated bf16 GEMM widens its operands), so
            // the planned batch is checked with real steps and lowered until it fits.
            for (int tries = 0; st == OCR_OK && tries < 4; tries++) {
                OcrMemStats ms;
                st = capacity_measure(cfg, pname, batch[i], &ms);
                if (st != OCR_OK || ms.peak_total <= memory) break;
                int64_t excess = ms.peak_total - memory, per = cp.bytes_per_sample > 0 ? cp.bytes_per_sample : 1;
                int lower = batch[i] - (int)((excess + per - 1) / per);
                if (lower >= batch[i]) lower = batch[i] - 1;
                ocr_log(OCR_LOG_INFO, "--batch max: %s at batch %d measured %lld bytes, over --memory %lld; trying %d",
                        pname, batch[i], (long long)ms.peak_total, (long long)memory, lower);
                if (lower < 1) {
                    st = ocr_set_error(OCR_ERR_INVALID_ARG, "--memory %lld bytes does not fit one %s sample (measured)",
                                       (long long)memory, pname);
                    break;
                }
                batch[i] = lower;
            }
            if (st != OCR_OK) break;
        }
        st = run_config(&rcfg[i], cfg, &specs[i], out_dir, batch[i]);
        if (st == OCR_OK) st = run_config_read(&rrc[i], rcfg[i], RUN_NEED_TRAIN | RUN_NEED_EVAL);
    }
    // Model facts for the report.
    Report *rep = calloc(1, sizeof *rep);
    if (st == OCR_OK && !rep) st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
    if (st == OCR_OK) {
        OcrModel *m;
        st = ocr_model_from_config(&m, cfg);
        OcrTransformList tl;
        if (st == OCR_OK) st = ocr_transforms_parse(&tl, cfg, "Train.dataset.transforms", rc.max_text_length);
        OcrMemPlan plan;
        if (st == OCR_OK) st = ocr_model_plan(m, 1, tl.resize_h, tl.resize_w, 0, &plan);
        if (st == OCR_OK) {
            const OcrArch *a = ocr_model_arch(m);
            snprintf(rep->algorithm, sizeof rep->algorithm, "%s", a->algorithm);
            snprintf(rep->backbone, sizeof rep->backbone, "%s", backbone_name(a));
            rep->params = ocr_model_param_count(m);
            rep->in_channels = tl.channels;
            rep->height = tl.resize_h;
            rep->width = tl.resize_w;
            rep->seq_len = plan.seq_len;
            rep->classes = plan.classes;
        }
        if (m) ocr_model_free(m);
    }
    if (st == OCR_OK) st = ocr_make_dirs(out_dir);
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain compare: %s\n", ocr_last_error());
        code = cli_exit_code(st);
        goto done;
    }

    rep->config_path = ca.config;
    size_t used = 0;
    for (int i = 0; i < argc && used + 2 < sizeof rep->command; i++)
        used += (size_t)snprintf(rep->command + used, sizeof rep->command - used, "%s%s", i ? " " : "ocrtrain ",
                                 argv[i]);
    time_t now = time(NULL);
    strftime(rep->created_utc, sizeof rep->created_utc, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    rep->version = training_version();
    rep->tolerance = rc.accuracy_tolerance;
    rep->cer_tolerance = rc.cer_tolerance;
    rep->bootstrap_seed = rc.seed;
    rep->batch_max = batch_max;
    rep->memory_bytes = memory;
    rep->epochs = rc.epoch_num;
    rep->seed = rc.seed;
    rep->threads = rc.threads;
    if (rep->threads == 0) rep->threads = omp_get_max_threads();
    snprintf(rep->device, sizeof rep->device, "%s", dev);
    // Every run is scored on the same lines, kept per line for the paired verdict.
    OcrDict dict;
    OcrLoaderConfig elc;
    EvalSet set = {0};
    EvalLine *lines[REPORT_MAX_RUNS] = {0};
    int dict_ok = 0, elc_ok = 0;
    st = ocr_dict_load(&dict, rc.dict_path, rc.use_space_char);
    dict_ok = st == OCR_OK;
    if (st == OCR_OK) st = ocr_loader_config_parse(&elc, cfg, "Eval");
    elc_ok = st == OCR_OK;
    if (st == OCR_OK) st = eval_set_read(&set, &elc);
    // Under mpirun every rank trains each leg (data parallel) and scores its final weights (the
    // same work on every rank, so no rank waits in the next leg's collectives for rank 0's
    // evaluation); rank 0 alone prints and writes the report.
    const int is_root = ocr_dist_detect_world().rank == 0;
    // The pretrained start, scored in FP32 on the same lines before any run trains: the report
    // shows what fine-tuning did as well as what AMP did.
    if (st == OCR_OK && rc.pretrained_model) {
        InferModel im = {0};
        EvalResult er;
        st = infer_model_load(&im, cfg, rc.pretrained_model, 0, dev);  // FP32
        if (st == OCR_OK) {
            EvalOptions eo;
            eval_options_from_loader(&eo, &elc, im.m, (RecMetricOptions){rc.ignore_space, rc.is_filter});
            st = evaluate_set(im.m, &set, &dict, &eo, &er, NULL);
        }
        infer_model_free(&im);
        if (st == OCR_OK) {
            rep->has_start = 1;
            snprintf(rep->start_weights, sizeof rep->start_weights, "%s", rc.pretrained_model);
            rep->start_acc = er.acc;
            rep->start_cer = er.cer;
            rep->start_norm_edit_dis = er.norm_edit_dis;
            rep->start_samples = er.samples;
            if (is_root)
                fprintf(stderr, "pretrained %s before training: accuracy %.4f, CER %.4f on %lld eval lines\n",
                        rc.pretrained_model, er.acc, er.cer, (long long)er.samples);
        } else {
            st = ocr_wrap_error(st, "Global.pretrained_model (evaluated before training)");
        }
    }
    for (int i = 0; i < nspec && st == OCR_OK; i++) {
        ReportRun *run = &rep->runs[rep->n_runs];
        snprintf(run->name, sizeof run->name, "%.31s", specs[i].name);
        TrainOptions opt = {0};
        opt.label = specs[i].name;
        opt.progress = stderr;
        opt.max_iters = max_steps;
        opt.final_eval = 0;  // evaluated below, per line, from the final checkpoint
        opt.save_checkpoints = 1;
        opt.lr_scale = batch[i] > 0 ? (double)batch[i] / (double)rc.train.batch_size : 1.0;
        if (is_root)
            fprintf(stderr, "== run %d/%d: %s (batch %d) ==\n", i + 1, nspec, specs[i].name,
                    batch[i] > 0 ? batch[i] : rc.train.batch_size);
        st = train_run(rcfg[i], &rrc[i], &opt, &run->r);
        if (st != OCR_OK) {
            train_result_free(&run->r);
            break;
        }
        // The final weights (save_model_dir/latest) under the run's precision, as its own eval saw them.
        char wpath[4300];
        snprintf(wpath, sizeof wpath, "%s/runs/%s/latest", out_dir, specs[i].name);
        InferModel im = {0};
        EvalResult er;
        lines[i] = calloc((size_t)(set.n ? set.n : 1), sizeof *lines[i]);
        if (!lines[i]) st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
        if (st == OCR_OK) st = infer_model_load(&im, rcfg[i], wpath, 1, dev);
        if (st == OCR_OK) {
            EvalOptions eo;
            eval_options_from_loader(&eo, &elc, im.m, (RecMetricOptions){rrc[i].ignore_space, rrc[i].is_filter});
            st = evaluate_set(im.m, &set, &dict, &eo, &er, lines[i]);
        }
        infer_model_free(&im);
        if (st != OCR_OK) {
            train_result_free(&run->r);
            break;
        }
        run->r.has_final_eval = 1;
        run->r.acc = er.acc;
        run->r.norm_edit_dis = er.norm_edit_dis;
        run->r.cer = er.cer;
        run->r.eval_samples = er.samples;
        run->r.eval_samples_per_s = er.samples_per_s;
        run->eval_paths = er.paths;
        if (i == 0 && is_root) {
            char sum[1024];
            eval_paths_summary(&er.paths, sum, sizeof sum);
            ocr_log(OCR_LOG_INFO, "Eval: %s", sum);
            ocr_skip_stats_log(&er.paths.skipped, "Eval lines");
        }
        run->base_lr = rrc[i].optim.lr.learning_rate * run->r.lr_scale;
        rep->train_samples = run->r.train_samples;
        rep->eval_samples = run->r.eval_samples;
        rep->n_runs++;
        if (is_root)
            fprintf(stderr, "%s: accuracy %.4f, %.1f samples/s, peak memory %.1f MiB, %lld skipped steps\n",
                    specs[i].name, run->r.acc, run->r.samples_per_s, (double)run->r.memory.peak_total / 1048576.0,
                    (long long)run->r.skipped_steps);
    }
    for (int i = 1; i < rep->n_runs && st == OCR_OK; i++)
        st = report_pair(&rep->runs[i].paired, lines[0], lines[i], set.n, rc.accuracy_tolerance, rc.cer_tolerance,
                         rc.seed);
    for (int i = 0; i < nspec; i++) {
        if (lines[i]) eval_lines_free(lines[i], set.n);
        free(lines[i]);
    }
    eval_set_free(&set);
    if (elc_ok) ocr_loader_config_free(&elc);
    if (dict_ok) ocr_dict_free(&dict);
    if (st == OCR_OK && !is_root) {
        code = 0;
        goto done;
    }
    if (st == OCR_OK) st = report_write(rep, out_dir);
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain compare: %s\n", ocr_last_error());
        code = cli_exit_code(st);
        goto done;
    }
    printf("%-10s %6s %10s %12s %10s %9s %9s %14s\n", "run", "batch", "samples/s", "peak MiB", "accuracy", "Δ acc",
           "skipped", "allreduce B");
    for (int i = 0; i < rep->n_runs; i++) {
        const TrainResult *r = &rep->runs[i].r;
        printf("%-10s %6d %10.1f %12.1f %10.4f %+9.4f %9lld %14lld\n", rep->runs[i].name, r->batch_size,
               r->samples_per_s, (double)r->memory.peak_total / 1048576.0, r->acc, r->acc - rep->runs[0].r.acc,
               (long long)r->skipped_steps, (long long)r->allreduce_bytes_per_step);
    }
    if (rep->n_runs > 1 && rep->runs[0].r.allreduce_bytes_per_step > 0)
        for (int i = 1; i < rep->n_runs; i++)
            printf("all-reduce bytes per step: %s %lld = %.3f x %s %lld (%d rank%s)\n", rep->runs[i].name,
                   (long long)rep->runs[i].r.allreduce_bytes_per_step,
                   (double)rep->runs[i].r.allreduce_bytes_per_step / (double)rep->runs[0].r.allreduce_bytes_per_step,
                   rep->runs[0].name, (long long)rep->runs[0].r.allreduce_bytes_per_step, rep->runs[i].r.world_size,
                   rep->runs[i].r.world_size == 1 ? "" : "s");
    for (int i = 1; i < rep->n_runs; i++) {
        const ReportPaired *p = &rep->runs[i].paired;
        printf("%s vs %s on %lld lines: %lld both right, %lld both wrong, %lld %s only, %lld %s only; accuracy %+.4f "
               "[%+.4f, %+.4f] %s; CER %+.4f [%+.4f, %+.4f] %s\n",
               rep->runs[i].name, rep->runs[0].name, (long long)p->lines, (long long)p->table.both_right,
               (long long)p->table.both_wrong, (long long)p->table.base_only, rep->runs[0].name,
               (long long)p->table.run_only, rep->runs[i].name, p->acc_delta, p->acc_ci.lo, p->acc_ci.hi,
               paired_verdict_name(p->acc_verdict), p->cer_delta, p->cer_ci.lo, p->cer_ci.hi,
               paired_verdict_name(p->cer_verdict));
    }
    code = report_exit_code(rep);
    int64_t need = report_lines_needed(rep);
    if (code == REPORT_EXIT_REGRESSION)
        printf("verdict: REGRESSION (exit 3): an AMP run is worse than FP32 beyond the tolerance (accuracy ±%.4g, CER "
               "±%.4g) with 95%% confidence\n", rep->tolerance, rep->cer_tolerance);
    else if (code == REPORT_EXIT_INCONCLUSIVE && need >= 0)
        printf("verdict: INCONCLUSIVE (exit 4): %lld eval lines cannot decide at ±%.4g; about %lld lines would\n",
               (long long)rep->eval_samples, rep->tolerance, (long long)need);
    else if (code == REPORT_EXIT_INCONCLUSIVE)
        printf("verdict: INCONCLUSIVE (exit 4): %lld eval lines cannot decide at ±%.4g\n", (long long)rep->eval_samples,
               rep->tolerance);
    else
        printf("verdict: PASS: no AMP run is worse than FP32 by more than %.4g accuracy or %.4g CER with 95%% "
               "confidence\n",
               rep->tolerance, rep->cer_tolerance);
    printf("report: %s/report.html (also report.md, report.json)\n", out_dir);

done:
    if (rep)
        for (int i = 0; i < rep->n_runs; i++) train_result_free(&rep->runs[i].r);
    free(rep);
    for (int i = 0; i < nspec; i++)
        if (rcfg[i]) ocr_config_free(rcfg[i]);
    ocr_config_free(cfg);
    cli_config_args_free(&ca);
    return code;

usage_error:
    usage(stderr);
    cli_config_args_free(&ca);
    return 2;
}

#include "training/trainer.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "amp/engine.h"
#include "training/checkpoint.h"
#include "training/distill.h"
#include "training/evaluate.h"
#include "training/feed.h"
#include "distributed/grad_sync.h"
#include "training/optim.h"
#include "training/step.h"
#include "core/fileio.h"
#include "core/timer.h"
#include "distributed/dist.h"
#include "eval/decode.h"
#include "eval/metrics.h"
#include "models/model.h"
#include "kernels/backend.h"
#include "models/amp_view.h"

volatile sig_atomic_t train_stop_requested = 0;

void training_set_threads(int threads) {
    if (threads > 0) omp_set_num_threads(threads);
}

ocr_status_t training_resolve_device(const char *name, char *resolved, size_t cap) {
    ocr_device_t d;
    ocr_status_t st = ocr_device_parse(name, &d);
    if (st == OCR_ERR_NOT_FOUND) {
        if (!ocr_backend_have_gpu() && strcmp(name, "cpu") != 0)
            return ocr_set_error(OCR_ERR_UNSUPPORTED, "Global.device %s: this build has no CUDA backend (build with "
                                 "nvcc on PATH, or use Global.device cpu or auto)", name);
        return ocr_set_error(st, "Global.device %s: %s (Global.device cpu or auto trains on the CPU)", name,
                             ocr_last_error());
    }
    if (st != OCR_OK) return ocr_set_error(OCR_ERR_CONFIG, "Global.device: %s", ocr_last_error());
    ocr_device_name(d, resolved, (int)cap);
    return OCR_OK;
}

ocr_status_t training_device_prepare(const char *device, ocr_dtype_t amp_dtype, int allow_tf32, TrainingDeviceInfo *info) {
    memset(info, 0, sizeof *info);
    ocr_device_t d;
    ocr_status_t st = ocr_device_parse(device, &d);
    if (st == OCR_ERR_NOT_FOUND && !ocr_backend_have_gpu())
        return ocr_set_error(OCR_ERR_UNSUPPORTED, "%s: this build has no CUDA backend", device);
    OCR_TRY(st);
    if (d.type != OCR_DEVICE_CUDA) return OCR_OK;
    if (!ocr_backend_have_gpu()) return ocr_set_error(OCR_ERR_UNSUPPORTED, "%s: this build has no CUDA backend", device);
    OcrDeviceInfo ci;
    OCR_TRY(ocr_backend_device_info(d, &ci));
    info->gpu = 1;
    snprintf(info->name, sizeof info->name, "%s", ci.name);
    info->cc_major = ci.cc_major;
    info->cc_minor = ci.cc_minor;
    info->multiprocessors = ci.multiprocessors;
    info->total_memory = ci.total_memory;
    info->free_memory_at_start = ci.free_memory;
    info->driver_version = ci.driver_version;
    info->runtime_version = ci.runtime_version;
    ocr_backend_library_versions(d, info->libraries, sizeof info->libraries);
    int cc = ci.cc_major * 10 + ci.cc_minor;
    if (amp_dtype == OCR_BF16 && cc < 80)
        return ocr_set_error(OCR_ERR_UNSUPPORTED, "%s (%s) has compute capability %d.%d; bfloat16 needs 8.0 "
                             "(Ampere) or newer. Use Global.amp_dtype float16, or train in FP32", device, ci.name,
                             ci.cc_major, ci.cc_minor);
    if (amp_dtype == OCR_F16 && cc < 70) {
        snprintf(info->note, sizeof info->note, "compute capability %d.%d has no tensor cores: float16 brings little "
                 "speed here (memory savings remain)", ci.cc_major, ci.cc_minor);
        ocr_log(OCR_LOG_WARN, "%s (%s): %s", device, ci.name, info->note);
    }
    ocr_backend_set_allow_tf32(allow_tf32);
    info->allow_tf32 = allow_tf32;
    if (amp_dtype == OCR_F32)
        snprintf(info->note, sizeof info->note, "FP32 %s", allow_tf32 ? "with TF32 tensor cores (Global.allow_tf32)"
                                                                       : "is true FP32 (TF32 off)");
    OCR_TRY(ocr_backend_set_device(d));
    return OCR_OK;
}

void train_result_free(TrainResult *r) {
    free(r->history.steps);
    free(r->history.evals);
    memset(r, 0, sizeof *r);
}

typedef struct {
    const OcrConfig *cfg;
    const RunConfig *rc;
    const TrainOptions *opt;
    TrainResult *res;

    OcrDict dict;
    int dict_ok;
    Feed train, eval, general;
    int train_ok, eval_ok, general_ok;
    OcrModel *m;
    AmpEngine amp;
    int amp_ok;
    Optimizer optim;
    int optim_ok;
    FeedBatch batch;
    ocr_device_t device;
    char device_name[32];  // "cpu", "cuda:0"
    FeedUpload *up;  // batches onto the model's device
    StepCtx step;
    int step_ok;
    int in_flight;   // steps the loop keeps in flight (step_in_flight, or TrainOptions.steps_in_flight)
    FILE *metrics;
    char dir[2048];
    CkptState st;  // position and counters; saved as the checkpoint state
    char ckdir[2200];  // Global.checkpoints resolved ("" when not resuming)
    int64_t steps_per_epoch, total_iters;
    double *loss_window;
    int64_t window_n;
    double *acc_window;  // cal_metric_during_train: the last log_smooth_window batch accuracies
    int64_t acc_n;
    float *metric_logits;  // host copy of a GPU batch's logits for the training metric
    size_t metric_logits_cap;
    // Data parallelism: rank 0 of 1 in a single process. Only rank 0 prints progress and writes
    // metrics.jsonl, config.json and checkpoints.
    OcrDist *dist;
    int rank, world;
    FILE *progress;
    GradSync sync;
    int sync_ok;
    OcrBnSync bn_sync;  // Global.use_sync_bn in a world of more than one (else not attached)
    DistillRun *distill;  // a distillation config's frozen networks and terms (training/distill.h); NULL otherwise
} Trainer;

// ---- the process's world -------------------------------------------------------------------------

// One transport per process (MPI is initialised once); `compare` runs several trainings on it.
static OcrDist *g_dist;

ocr_status_t training_dist_open(const RunConfig *rc, ocr_device_t device, OcrDist **out) {
    if (g_dist) {
        *out = g_dist;
        return OCR_OK;
    }
    OcrDistWorld w = ocr_dist_detect_world();
    OcrDistOptions o = {OCR_DIST_SINGLE, rc->dist.timeout_s, device};
    const char *b = rc->dist.backend ? rc->dist.backend : "auto";
    if (strcmp(b, "auto") == 0) o.backend = ocr_dist_choose_backend(&w, device);
    else if (strcmp(b, "mpi") == 0) o.backend = OCR_DIST_MPI;
    else if (strcmp(b, "nccl") == 0) o.backend = OCR_DIST_NCCL;
    ocr_status_t st = ocr_dist_open(&g_dist, &o);
    if (st != OCR_OK) return st;
    if (ocr_dist_world_size(g_dist) > 1)
        ocr_log(OCR_LOG_INFO, "data parallel: rank %d of %d (local rank %d) over %s", ocr_dist_rank(g_dist),
                ocr_dist_world_size(g_dist), ocr_dist_local_rank(g_dist), ocr_dist_backend_name(o.backend));
    *out = g_dist;
    return OCR_OK;
}

// Synchronised batch norm's sums (kernels/ops.h): over the transport, in the memory it works on
// (host for mpi, the step's device buffers for nccl, as the kernels' tensors are).
static int sum_bn_statistics(void *user, double *v, int64_t n) {
    return ocr_dist_sum_stats_f64((OcrDist *)user, v, n, "synchronised batch norm statistics") == OCR_OK ? 0 : -1;
}

// Everything that lives in one copy per rank and must start equal: rank 0's bytes to all.
static ocr_status_t broadcast_table(OcrDist *d, OcrParamTable *t, const char *what) {
    if (ocr_dist_world_size(d) == 1 || !t->data || t->bytes == 0) return OCR_OK;
    OCR_ASSERT(t->device.type == OCR_DEVICE_CPU, "broadcast of a device table");
    return ocr_dist_broadcast(d, t->data, t->bytes, 0, what);
}

static ocr_status_t push_step(TrainResult *r, const StepRecord *s) {
    if (r->history.n_steps == r->history.cap_steps) {
        int64_t cap = r->history.cap_steps ? 2 * r->history.cap_steps : 256;
        StepRecord *n = realloc(r->history.steps, (size_t)cap * sizeof *n);
        if (!n) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
        r->history.steps = n;
        r->history.cap_steps = cap;
    }
    r->history.steps[r->history.n_steps++] = *s;
    return OCR_OK;
}

static ocr_status_t push_eval(TrainResult *r, const EvalRecord *e) {
    if (r->history.n_evals == r->history.cap_evals) {
        int cap = r->history.cap_evals ? 2 * r->history.cap_evals : 16;
        EvalRecord *n = realloc(r->history.evals, (size_t)cap * sizeof *n);
        if (!n) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
        r->history.evals = n;
        r->history.cap_evals = cap;
    }
    r->history.evals[r->history.n_evals++] = *e;
    return OCR_OK;
}

// ---- setup ---------------------------------------------------------------------------------------

ocr_status_t train_apply_finetune(OcrModel *m, const RunConfig *rc, const OcrConfig *cfg) {
    const FinetuneConfig *f = &rc->finetune;
    OcrParamTable *params = ocr_model_params(m);
    OcrOpTable *ops = ocr_model_ops(m);
    int n_bn = 0;
    if (f->freeze_norm_all) n_bn = ocr_model_freeze_norm(m, NULL, 1);
    for (int k = 0; k < f->n_freeze_norm; k++) {
        int n = ocr_model_freeze_norm(m, f->freeze_norm[k], 1);
        if (n == 0)
            return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.freeze_norm: pattern \"%s\" matches no batch norm layer "
                                 "of this model (`ocrtrain info -c CFG` lists the layers; type batchnorm)",
                                 ocr_config_source(cfg), f->freeze_norm[k]);
    }
    if (f->n_freeze_norm) {
        n_bn = 0;
        for (int i = 0; i < ops->count; i++) n_bn += ops->items[i].bn_frozen;
    }
    int n_frozen = 0;
    int64_t frozen_numel = 0;
    for (int i = 0; i < params->count; i++) {
        OcrParamInfo *p = &params->items[i];
        int fz = 0;
        // A frozen BN's scale and shift, unless Global.freeze_norm_affine is false.
        if (f->freeze_norm_affine && p->role == OCR_ROLE_NORM && params->ops_recorded && p->op >= 0 &&
            p->op < ops->count && ops->items[p->op].bn_frozen)
            fz = 1;
        for (int k = 0; !fz && k < f->n_freeze_params; k++) fz = fnmatch(f->freeze_params[k], p->name, 0) == 0;
        p->frozen = fz;
        n_frozen += fz;
        if (fz) frozen_numel += p->numel;
    }
    for (int k = 0; k < f->n_freeze_params; k++) {
        int hit = 0;
        for (int i = 0; i < params->count && !hit; i++) hit = fnmatch(f->freeze_params[k], params->items[i].name, 0) == 0;
        if (!hit)
            return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.freeze_params: pattern \"%s\" matches no parameter of "
                                 "this model (names as in the weights file, e.g. backbone.conv1.*)",
                                 ocr_config_source(cfg), f->freeze_params[k]);
    }
    if (n_frozen == params->count)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.freeze_params / freeze_norm freeze every parameter: nothing "
                             "would train", ocr_config_source(cfg));
    // Optimizer.lr_mult: the first matching pattern multiplies the parameter's own multiplier
    // (PaddleOCR's ParamAttr learning_rate: lr_mult_list, lab_lr).
    int hits[RUN_MAX_PATTERNS] = {0};
    for (int i = 0; i < params->count; i++) {
        OcrParamInfo *p = &params->items[i];
        for (int k = 0; k < f->n_lr_mult; k++) {
            if (fnmatch(f->lr_mult_pattern[k], p->name, 0) != 0) continue;
            hits[k]++;
            p->lr_mult = (float)((double)p->lr_mult * f->lr_mult[k]);
            break;
        }
    }
    for (int k = 0; k < f->n_lr_mult; k++)
        if (!hits[k])
            return ocr_set_error(OCR_ERR_CONFIG, "%s: Optimizer.lr_mult: pattern \"%s\" matches no parameter%s",
                                 ocr_config_source(cfg), f->lr_mult_pattern[k],
                                 k ? " (or only parameters an earlier pattern took: the first match wins)" : "");
    if (n_bn || n_frozen || f->n_lr_mult) {
        ocr_log(OCR_LOG_INFO, "fine-tuning: %d batch norm layer(s) with frozen statistics, %d parameter tensor(s) "
                "(%lld values) frozen, %d learning-rate pattern(s)", n_bn, n_frozen, (long long)frozen_numel,
                f->n_lr_mult);
        for (int k = 0; k < f->n_lr_mult; k++)
            ocr_log(OCR_LOG_INFO, "  Optimizer.lr_mult \"%s\" x%g: %d parameter tensor(s)", f->lr_mult_pattern[k],
                    f->lr_mult[k], hits[k]);
    }
    return OCR_OK;
}

static void fill_state_from_run(Trainer *t) {
    CkptState *s = &t->st;
    s->epoch = t->train.epoch;
    s->batch_in_epoch = t->train.next_batch;
    s->updates = t->optim.updates;
    s->model_step = ocr_model_get_step(t->m);  // dropout draws continue from here on resume
    s->seed = t->rc->seed;
    s->amp = amp_engine_state(&t->amp);
    snprintf(s->amp_level, sizeof s->amp_level, "%s", amp_level_name(t->amp.cfg.policy.level));
    snprintf(s->amp_dtype, sizeof s->amp_dtype, "%s",
             t->amp.cfg.policy.level == OCR_AMP_O0 ? "float32" : ocr_dtype_name(t->amp.cfg.policy.dtype));
    s->world_size = t->world;
    s->global_batch = (int64_t)t->train.batch_size * t->world;
}

static ocr_status_t save_checkpoint(Trainer *t, const char *name) {
    if (!t->opt->save_checkpoints || t->rank != 0) return OCR_OK;
    char dir[2200];
    snprintf(dir, sizeof dir, "%s/%s", t->dir, name);
    fill_state_from_run(t);
    // Networks trained beside the model (mutual learning) keep their training state with it.
    CkptCompanion comp[DISTILL_MAX_NETS];
    const int nc = distill_run_companions(t->distill, comp, DISTILL_MAX_NETS);
    return ckpt_save_with_companions(dir, t->m, &t->optim, &t->amp, &t->st, comp, nc);
}

// Keeps the metrics.jsonl lines of iterations <= iter (a resumed run rewrites what followed).
static ocr_status_t truncate_metrics(const char *path, int64_t iter) {
    if (!ocr_file_exists(path)) return OCR_OK;
    char *text;
    size_t size;
    OCR_TRY(ocr_read_file(path, &text, &size));
    size_t keep = 0;
    for (char *line = text; *line;) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line + 1) : strlen(line);
        char save = line[len - (nl ? 1 : 0)];
        line[len - (nl ? 1 : 0)] = '\0';
        cJSON *o = cJSON_Parse(line);
        line[len - (nl ? 1 : 0)] = save;
        const cJSON *it = o ? cJSON_GetObjectItemCaseSensitive(o, "iter") : NULL;
        int ok = cJSON_IsNumber(it) && it->valuedouble <= (double)iter;
        cJSON_Delete(o);
        if (!ok) break;
        memmove(text + keep, line, len);
        keep += len;
        line += len;
    }
    ocr_status_t st = ocr_write_file_atomic(path, text, keep);
    free(text);
    return st;
}

// ---- setup: one phase per part of a run, in the order they depend on each other ----------------------

// The device (Global.device; under a launcher, the local rank's GPU), the CPU threads and the
// data-parallel world.
static ocr_status_t setup_device_and_world(Trainer *t) {
    const RunConfig *rc = t->rc;
    TrainResult *res = t->res;
    OCR_TRY(training_resolve_device(rc->device_name, t->device_name, sizeof t->device_name));
    OCR_TRY(ocr_device_parse(t->device_name, &t->device));
    // One process per GPU: a device named without an index ("gpu", "cuda", "auto") is the
    // launcher's local rank.
    OcrDistWorld w = ocr_dist_detect_world();
    if (t->device.type == OCR_DEVICE_CUDA && w.world_size > 1 && !strchr(rc->device_name, ':')) {
        t->device.index = w.local_rank;
        ocr_device_name(t->device, t->device_name, (int)sizeof t->device_name);
    }
    snprintf(res->device.name, sizeof res->device.name, "%s", t->device_name);
    training_set_threads(rc->threads);
    OCR_TRY(training_dist_open(rc, t->device, &t->dist));
    t->rank = ocr_dist_rank(t->dist);
    t->world = ocr_dist_world_size(t->dist);
    t->progress = t->rank == 0 ? t->opt->progress : NULL;
    res->dist.world_size = t->world;
    res->dist.rank = t->rank;
    snprintf(res->dist.backend, sizeof res->dist.backend, "%s", ocr_dist_backend_name(ocr_dist_backend(t->dist)));
    return OCR_OK;
}

// The dictionary and the Train / Eval feeds (each rank takes its slice of every global batch of
// world × batch samples); the schedule's length follows from them.
static ocr_status_t setup_data(Trainer *t) {
    const RunConfig *rc = t->rc;
    const OcrConfig *cfg = t->cfg;
    OCR_TRY(ocr_dict_load(&t->dict, rc->dict_path, rc->use_space_char));
    t->dict_ok = 1;
    OCR_TRY(feed_open_shard(&t->train, cfg, "Train", &t->dict, 1, t->opt->batch_size, t->rank, t->world));
    t->train_ok = 1;
    if (rc->eval.present) {
        OCR_TRY(feed_open(&t->eval, cfg, "Eval", &t->dict, 0, 0));
        t->eval_ok = 1;
    }
    if (rc->eval_general.present && !t->opt->skip_general) {
        OCR_TRY(feed_open(&t->general, cfg, "EvalGeneral", &t->dict, 0, 0));
        t->general_ok = 1;
        t->res->outcome.has_general = 1;
    }
    t->steps_per_epoch = feed_batches_per_epoch(&t->train);
    if (t->steps_per_epoch < 1)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: the Train split makes no batch of %d", ocr_config_source(cfg),
                             t->train.batch_size);
    t->total_iters = t->steps_per_epoch * rc->epoch_num;
    return OCR_OK;
}

// The model, checked against the dictionary and the Train transforms.
static ocr_status_t setup_model(Trainer *t) {
    OCR_TRY(ocr_model_from_config(&t->m, t->cfg));
    // Distillation: the trained network's tensors are "<Metric.key>.<name>" in checkpoints, as in
    // PaddleOCR's DistillationModel (the frozen networks are saved beside it: training/distill.c).
    char prefix[40];
    if (distill_weights_prefix(t->cfg, prefix, sizeof prefix)) ocr_model_set_weights_prefix(t->m, prefix);
    const OcrArch *arch = ocr_model_arch(t->m);
    if (arch->num_classes != t->dict.num_classes)
        return ocr_set_error(OCR_ERR_CONFIG, "the head has %d classes but the dictionary %d", arch->num_classes,
                             t->dict.num_classes);
    if (arch->in_channels != t->train.channels)
        return ocr_set_error(OCR_ERR_CONFIG, "the model takes %d channels, the Train transforms give %d",
                             arch->in_channels, t->train.channels);
    return OCR_OK;
}

// Weights: a checkpoint (Global.checkpoints) restores everything (its state is read here, the
// rest in resume_training_state); pretrained weights only seed the parameters. Then the
// fine-tuning options, and rank 0's weights for every rank.
static ocr_status_t setup_weights(Trainer *t) {
    const RunConfig *rc = t->rc;
    memset(&t->st, 0, sizeof t->st);
    t->st.best_acc = -1;
    if (rc->checkpoints) {
        OCR_TRY(ckpt_resolve(rc->checkpoints, t->ckdir, sizeof t->ckdir));
        OCR_TRY(ckpt_load_state(t->ckdir, &t->st));
        char w[2300];
        snprintf(w, sizeof w, "%s/model.safetensors", t->ckdir);
        ocr_status_t st = ocr_model_load_weights(t->m, w);
        if (st != OCR_OK) return ocr_wrap_error(st, "Global.checkpoints");
        if (t->st.seed != rc->seed)
            ocr_log(OCR_LOG_WARN, "resuming %s with Global.seed %llu; it was trained with %llu (data order and "
                    "augmentation change)", t->ckdir, (unsigned long long)rc->seed, (unsigned long long)t->st.seed);
    } else if (rc->pretrained_model) {
        OcrLoadReport rep;
        OcrWeightsNames names;  // CTC-only weights into a MultiHead config (models/weights_names.h)
        ocr_status_t st = ckpt_load_pretrained_names(t->m, rc->pretrained_model, rc->finetune.pretrained_dict_path,
                                                     rc->finetune.pretrained_strict, &rep, &names);
        if (st != OCR_OK) return ocr_wrap_error(st, "Global.pretrained_model");
        char fresh[160] = "";
        if (names.fresh)
            snprintf(fresh, sizeof fresh, "; the %s guidance branch's %d tensors start fresh (not in the file)",
                     names.branch, names.fresh);
        ocr_log(OCR_LOG_INFO, "pretrained weights %s: %d tensors loaded%s%s", rc->pretrained_model, rep.loaded,
                ocr_load_report_complete(&rep) ? (names.fresh ? " (all of the CTC branch's)" : " (all of the model's)") : "",
                fresh);
    }
    // Frozen BN statistics, frozen parameters and learning-rate multipliers go onto the model's
    // tables before the AMP engine and the optimizer read them.
    OCR_TRY(train_apply_finetune(t->m, rc, t->cfg));
    // Every rank starts from rank 0's weights and BN statistics (they are equal already when all
    // read the same files with the same seed; this makes it so whatever happened).
    OCR_TRY(broadcast_table(t->dist, ocr_model_params(t->m), "the initial weights broadcast"));
    OCR_TRY(broadcast_table(t->dist, ocr_model_stats(t->m), "the initial BN statistics broadcast"));
    return OCR_OK;
}

// AMP: the policy goes onto the op table before the first plan; O2 creates the masters. On a GPU
// the model moves there first (the weights were loaded on the host) and the engine makes its
// copies on the device.
static ocr_status_t setup_amp(Trainer *t) {
    TrainResult *res = t->res;
    AmpConfig ac;
    OCR_TRY(amp_config_from_config(&ac, t->cfg));
    if (t->device.type == OCR_DEVICE_CUDA) {
        ocr_dtype_t want = ac.policy.level == OCR_AMP_O0 ? OCR_F32 : ac.policy.dtype;
        ocr_status_t st = training_device_prepare(t->device_name, want, t->rc->allow_tf32, &res->device.info);
        if (st == OCR_OK) st = ocr_model_to_device(t->m, t->device);
        if (st != OCR_OK) {
            amp_config_free(&ac);
            return st;
        }
    }
    amp_engine_init(&t->amp, &ac);
    t->amp_ok = 1;
    OCR_TRY(ocr_amp_attach(&t->amp, ocr_model_ops(t->m), ocr_model_params(t->m), ocr_model_stats(t->m)));
    // O1: the model's conv/linear/embedding ops read the engine's low-precision weight copies
    // (refreshed once per step) instead of rounding the f32 weights at every call.
    if (t->amp.cfg.policy.level == OCR_AMP_O1) OCR_TRY(ocr_model_set_cast_cache(t->m, &t->amp.cache));
    snprintf(res->config.amp_level, sizeof res->config.amp_level, "%s", amp_level_name(t->amp.cfg.policy.level));
    snprintf(res->config.amp_dtype, sizeof res->config.amp_dtype, "%s",
             t->amp.cfg.policy.level == OCR_AMP_O0 ? "float32" : ocr_dtype_name(t->amp.cfg.policy.dtype));
    return OCR_OK;
}

static ocr_status_t setup_optimizer(Trainer *t) {
    OCR_TRY(optim_init(&t->optim, &t->rc->optim, ocr_model_params(t->m)));
    t->optim_ok = 1;
    return OCR_OK;
}

// Resuming from Global.checkpoints: the same AMP settings, the optimizer's moments (and O2's
// masters), the AMP engine's own state, the dropout counter and the loader position.
static ocr_status_t resume_training_state(Trainer *t) {
    TrainResult *res = t->res;
    const char *ckdir = t->ckdir;
    if (!ckdir[0]) return OCR_OK;
    if (strcmp(t->st.amp_level, res->config.amp_level) != 0 || strcmp(t->st.amp_dtype, res->config.amp_dtype) != 0)
        return ocr_set_error(OCR_ERR_CONFIG, "Global.checkpoints %s was trained with AMP %s %s; this config asks "
                             "for %s %s (resume with the same AMP settings, or fine-tune from it with "
                             "Global.pretrained_model)", ckdir, t->st.amp_level, t->st.amp_dtype, res->config.amp_level,
                             res->config.amp_dtype);
    OCR_TRY(ckpt_load_optimizer_prefixed(ckdir, &t->optim, &t->amp, ocr_model_params(t->m),
                                         ocr_model_weights_prefix(t->m)));
    OCR_TRY(amp_engine_restore_state(&t->amp, &t->st.amp));
    ocr_model_set_step(t->m, t->st.model_step);
    if (t->st.iter >= t->total_iters)
        ocr_log(OCR_LOG_WARN, "%s is at iteration %lld of %lld: nothing left to train", ckdir,
                (long long)t->st.iter, (long long)t->total_iters);
    // The sampler position is global: batch_in_epoch counts global batches of the writer's
    // world; another world size resumes at the same sample when its global batch divides it.
    int64_t gb = (int64_t)t->train.batch_size * t->world;
    if (t->st.global_batch > 0 && t->st.global_batch != gb) {
        int64_t samples = t->st.batch_in_epoch * t->st.global_batch;
        if (samples % gb != 0)
            return ocr_set_error(OCR_ERR_CONFIG, "Global.checkpoints %s stopped %lld samples into epoch %lld with "
                                 "a global batch of %lld (%lld ranks); %d ranks x batch %d = %lld does not divide "
                                 "that position (resume with a global batch that does, e.g. the same)", ckdir,
                                 (long long)samples, (long long)t->st.epoch + 1, (long long)t->st.global_batch,
                                 (long long)t->st.world_size, t->world, t->train.batch_size, (long long)gb);
        ocr_log(OCR_LOG_WARN, "resuming %s (world %lld, global batch %lld) with world %d, global batch %lld: the "
                "learning-rate schedule counts iterations of the new batch", ckdir, (long long)t->st.world_size,
                (long long)t->st.global_batch, t->world, (long long)gb);
        t->st.batch_in_epoch = samples / gb;
    }
    OCR_TRY(feed_seek(&t->train, t->st.epoch, t->st.batch_in_epoch));
    ocr_log(OCR_LOG_INFO, "resuming from %s: iteration %lld, epoch %lld, batch %lld", ckdir, (long long)t->st.iter,
            (long long)t->st.epoch + 1, (long long)t->st.batch_in_epoch);
    return OCR_OK;
}

// The training step on the model's device (room for the largest batch of any scale), its
// gradient buckets, synchronised batch norm and the batch upload; the steps the loop keeps in
// flight.
static ocr_status_t setup_step(Trainer *t) {
    const RunConfig *rc = t->rc;
    TrainResult *res = t->res;
    int B = t->train.max_batch, H = t->train.max_height, W = t->train.max_width, C = t->train.channels;
    OCR_TRY(step_ctx_init(&t->step, t->m, &t->amp, &t->optim, B, rc->use_focal_loss));
    t->step_ok = 1;
    t->step.keep_logits = rc->cal_metric_during_train;
    // Distillation: the frozen networks on the model's device and the terms as the step's extra loss.
    OCR_TRY(distill_run_create(&t->distill, t->cfg, rc, t->m, t->device, rc->checkpoints ? t->ckdir : NULL));
    if (t->distill) distill_attach(t->distill, &t->step);
    // In a world of one the world's statistics are the rank's own: nothing to attach.
    if (rc->dist.sync_bn && t->world > 1) {
        t->bn_sync.sum = sum_bn_statistics;
        t->bn_sync.user = t->dist;
        ocr_model_set_bn_sync(t->m, &t->bn_sync);
        ocr_dist_reset_counters(t->dist);  // this run's statistics sums alone (compare runs several)
        res->dist.sync_bn = 1;
        ocr_log(OCR_LOG_INFO, "batch norm: synchronised over the %d ranks (Global.use_sync_bn): statistics of the "
                "global batch of %lld", t->world, (long long)t->world * (long long)B);
    }
    const int gpu = ocr_backend_is_async(t->device);
    if (gpu) {
        // The step's compute stream first: the uploads order themselves against it.
        StepDeviceOptions so = {rc->cuda_graph, t->total_iters};
        OCR_TRY(step_device_init(&t->step, &so));
    }
    // Gradient buckets: on the CPU also in a world of one (where every all-reduce is the
    // identity) so the all-reduce bytes per step are measured alike everywhere; on a GPU in a
    // larger world, or over NCCL in a world of one (the 1-GPU check of the transport).
    if (!gpu || t->world > 1 || ocr_dist_backend(t->dist) == OCR_DIST_NCCL) {
        const int64_t bucket_bytes = (int64_t)(rc->dist.bucket_mb * 1048576.0 + 0.5);
        OCR_TRY(grad_sync_init(&t->sync, t->dist, t->m, bucket_bytes));
        t->sync_ok = 1;
        OCR_TRY(step_attach_sync(&t->step, &t->sync));
        // A network trained beside (mutual learning) is averaged over the ranks likewise.
        OCR_TRY(distill_run_join_world(t->distill, t->dist, bucket_bytes,
                                       rc->dist.sync_bn && t->world > 1 ? &t->bn_sync : NULL));
    }
    OCR_TRY(feed_upload_open(&t->up, t->device, B, H, W, C, t->train.max_len));
    res->memory.pinned_bytes = (int64_t)feed_upload_pinned_bytes(t->up);
    t->in_flight = step_in_flight(&t->step);
    if (t->opt->steps_in_flight > 0)
        t->in_flight = t->opt->steps_in_flight < STEP_MAX_IN_FLIGHT ? t->opt->steps_in_flight : STEP_MAX_IN_FLIGHT;
    return OCR_OK;
}

// The progress line's smoothing windows and the run's figures known before the first step.
static ocr_status_t setup_bookkeeping(Trainer *t) {
    const RunConfig *rc = t->rc;
    TrainResult *res = t->res;
    t->loss_window = calloc((size_t)rc->log_smooth_window, sizeof *t->loss_window);
    if (!t->loss_window) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    if (rc->cal_metric_during_train) {
        t->acc_window = calloc((size_t)rc->log_smooth_window, sizeof *t->acc_window);
        if (!t->acc_window) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    }
    int B = t->train.max_batch;
    res->config.batch_size = B;
    res->config.lr_scale = t->opt->lr_scale > 0 ? t->opt->lr_scale : 1.0;
    res->config.steps_per_epoch = t->steps_per_epoch;
    res->config.total_iters = t->total_iters;
    res->config.train_samples = feed_num_samples(&t->train);
    res->config.params = ocr_model_param_count(t->m);
    res->outcome.best_acc = t->st.best_acc;
    res->outcome.best_iter = t->st.best_iter;
    res->dist.global_batch = (int64_t)B * t->world;
    return OCR_OK;
}

// Everything that can fail on bad input has been checked: now the output directory (rank 0's):
// config.json, and metrics.jsonl (a resumed run keeps the lines up to its iteration).
static ocr_status_t setup_output_dir(Trainer *t) {
    snprintf(t->dir, sizeof t->dir, "%s", t->rc->save_model_dir);
    if (t->rank != 0) return OCR_OK;
    OCR_TRY(ocr_make_dirs(t->dir));
    char p[2300];
    snprintf(p, sizeof p, "%s/config.json", t->dir);
    char *text = ocr_config_to_json(t->cfg);
    if (text) {
        ocr_status_t st = ocr_write_file_atomic(p, text, strlen(text));
        free(text);
        OCR_TRY(st);
    }
    snprintf(p, sizeof p, "%s/metrics.jsonl", t->dir);
    if (t->ckdir[0])
        OCR_TRY(truncate_metrics(p, t->st.iter));
    else if (ocr_file_exists(p))
        unlink(p);
    t->metrics = fopen(p, "a");
    if (!t->metrics) return ocr_set_error(OCR_ERR_IO, "cannot open %s for writing", p);
    return OCR_OK;
}

static ocr_status_t setup(Trainer *t) {
    OCR_TRY(setup_device_and_world(t));
    OCR_TRY(setup_data(t));
    OCR_TRY(setup_model(t));
    OCR_TRY(setup_weights(t));
    OCR_TRY(setup_amp(t));
    OCR_TRY(setup_optimizer(t));
    OCR_TRY(resume_training_state(t));
    OCR_TRY(setup_step(t));
    OCR_TRY(setup_bookkeeping(t));
    return setup_output_dir(t);
}

static void cleanup(Trainer *t) {
    if (t->metrics) fclose(t->metrics);
    free(t->loss_window);
    free(t->acc_window);
    free(t->metric_logits);
    feed_upload_close(t->up);
    if (t->step_ok) step_ctx_free(&t->step);
    distill_run_free(t->distill);
    if (t->sync_ok) grad_sync_free(&t->sync);
    if (t->optim_ok) optim_free(&t->optim);
    if (t->amp_ok) amp_engine_free(&t->amp);
    if (t->m) ocr_model_free(t->m);
    if (t->eval_ok) feed_close(&t->eval);
    if (t->general_ok) feed_close(&t->general);
    if (t->train_ok) feed_close(&t->train);
    if (t->dict_ok) ocr_dict_free(&t->dict);
    ocr_workspace_release();
    // Each run (compare runs several) starts with the device's scratch and library workspaces
    // released, so its peak is its own; the cuDNN algorithm choices stay (same bits per run).
    ocr_backend_release_buffers(t->device);
}

// ---- one step ------------------------------------------------------------------------------------

// Global.cal_metric_during_train: RecMetric of the batch just trained (greedy decode of its
// logits, which have the argmax of the probabilities, against its labels). On a GPU this reads
// the logits back, so it waits for the step (PaddleOCR's training loop does the same).
static ocr_status_t batch_metric(Trainer *t, StepRecord *rec) {
    rec->train_acc = rec->train_norm_edit_dis = -1.0f;
    if (!t->rc->cal_metric_during_train) return OCR_OK;
    const OcrTensor *lg = step_kept_logits(&t->step);
    if (!lg) return ocr_set_error(OCR_ERR_INTERNAL, "training metric: the step kept no logits");
    int B = (int)lg->shape[0], T = (int)lg->shape[1], C = (int)lg->shape[2];
    // The kept logits are f32: read them in place on the CPU, through one host buffer from a GPU.
    const float *logits = lg->data;
    if (lg->device.type != OCR_DEVICE_CPU) {
        size_t n = (size_t)B * T * C;
        if (t->metric_logits_cap < n) {
            float *p = realloc(t->metric_logits, n * sizeof(float));
            if (!p) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
            t->metric_logits = p;
            t->metric_logits_cap = n;
        }
        if (ocr_backend_synchronize(t->device) != OCR_OK) return ocr_wrap_error(OCR_ERR_CUDA, "training metric");
        ocr_copy_bytes(ocr_cpu(), t->metric_logits, lg->device, lg->data, n * sizeof(float));
        logits = t->metric_logits;
    }
    RecMetric metric;
    rec_metric_init(&metric, (RecMetricOptions){t->rc->ignore_space, t->rc->is_filter});
    char pred[1024], ref[1024];
    for (int b = 0; b < B && b < t->batch.count; b++) {
        float conf;
        OCR_TRY(ctc_greedy_decode(pred, sizeof pred, &conf, logits + (size_t)b * T * C, T, C, 0, t->dict.classes));
        feed_label_text(&t->dict, &t->batch, b, ref, sizeof ref);
        OCR_TRY(rec_metric_add(&metric, pred, ref));
    }
    RecMetricResult r = rec_metric_get(&metric);
    rec->train_acc = (float)r.acc;
    rec->train_norm_edit_dis = (float)r.norm_edit_dis;
    return OCR_OK;
}

// ---- progress and metrics ---------------------------------------------------------------------------

static void fmt_duration(double s, char *buf, size_t n) {
    if (!(s >= 0) || s > 1e8) {
        snprintf(buf, n, "?");
        return;
    }
    long v = (long)(s + 0.5);
    if (v >= 3600)
        snprintf(buf, n, "%ldh%02ldm", v / 3600, (v / 60) % 60);
    else if (v >= 60)
        snprintf(buf, n, "%ldm%02lds", v / 60, v % 60);
    else
        snprintf(buf, n, "%lds", v);
}

static double smoothed_loss(Trainer *t, double loss) {
    int64_t w = t->rc->log_smooth_window;
    if (isfinite(loss)) t->loss_window[t->window_n++ % w] = loss;
    int64_t n = t->window_n < w ? t->window_n : w;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += t->loss_window[i];
    return n ? s / (double)n : loss;
}

// Mean batch accuracy over the log window (cal_metric_during_train), or -1.
static double smoothed_acc(Trainer *t, double acc) {
    if (acc < 0 || !t->acc_window) return -1;
    int64_t w = t->rc->log_smooth_window;
    t->acc_window[t->acc_n++ % w] = acc;
    int64_t n = t->acc_n < w ? t->acc_n : w;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += t->acc_window[i];
    return s / (double)n;
}

// Seven significant digits: what an f32 holds, without the noise of printing it as a double.
static double sig7(double v) {
    char b[32];
    snprintf(b, sizeof b, "%.7g", v);
    return strtod(b, NULL);
}

static void write_step_json(Trainer *t, const StepRecord *r, double avg, double sps, int batch, int ninf,
                            int overflow_layer) {
    if (!t->metrics) return;  // only rank 0 writes metrics.jsonl
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "iter", (double)(r->iter + 1));
    cJSON_AddNumberToObject(o, "epoch", (double)(t->train.epoch + 1));
    cJSON_AddNumberToObject(o, "batch", batch);
    if (isfinite(r->loss)) cJSON_AddNumberToObject(o, "loss", sig7(r->loss));
    else cJSON_AddNullToObject(o, "loss");
    cJSON_AddNumberToObject(o, "loss_avg", sig7(avg));
    if (r->loss_gtc != 0.0f || r->loss_ctc != 0.0f) {  // MultiHead
        cJSON_AddNumberToObject(o, "loss_ctc", sig7(r->loss_ctc));
        cJSON_AddNumberToObject(o, "loss_gtc", sig7(r->loss_gtc));
    }
    if (t->distill) cJSON_AddNumberToObject(o, "loss_distill", sig7(r->loss_distill));
    cJSON_AddNumberToObject(o, "lr", sig7(r->lr));
    cJSON_AddNumberToObject(o, "loss_scale", r->scale);
    cJSON_AddBoolToObject(o, "skipped", r->skipped);
    if (r->recomputed) cJSON_AddNumberToObject(o, "recomputed", r->recomputed);
    if ((r->skipped || r->recomputed) && overflow_layer >= 0)
        cJSON_AddStringToObject(o, "overflow_layer", amp_engine_layer_name(&t->amp, overflow_layer));
    if (isfinite(r->grad_norm)) cJSON_AddNumberToObject(o, "grad_norm", sig7(r->grad_norm));
    else cJSON_AddNullToObject(o, "grad_norm");
    cJSON_AddNumberToObject(o, "step_time_s", sig7(r->step_seconds));
    cJSON_AddNumberToObject(o, "samples_per_s", sig7(sps));
    if (ninf) cJSON_AddNumberToObject(o, "infeasible_samples", ninf);
    if (r->train_acc >= 0) {
        cJSON_AddNumberToObject(o, "acc", sig7(r->train_acc));
        cJSON_AddNumberToObject(o, "norm_edit_dis", sig7(r->train_norm_edit_dis));
    }
    char *s = cJSON_PrintUnformatted(o);
    if (s) fprintf(t->metrics, "%s\n", s);
    free(s);
    cJSON_Delete(o);
}

static void progress_line(Trainer *t, const StepRecord *r, double avg, double acc, double sps, double eta, int last,
                          int64_t in_epoch) {
    FILE *f = t->progress;
    if (!f) return;
    int tty = isatty(fileno(f));
    int64_t it = r->iter + 1;
    if (!tty && !last && it % t->rc->print_batch_step != 0) return;
    char e[32];
    fmt_duration(eta, e, sizeof e);
    char accs[32] = "";
    if (acc >= 0) snprintf(accs, sizeof accs, "  acc %.3f", acc);
    char rec[64] = "";
    if (r->recomputed) snprintf(rec, sizeof rec, "  (overflowed: recomputed %dx at a lower scale)", r->recomputed);
    fprintf(f, "%s%s%s%sepoch %lld/%lld  step %lld/%lld  loss %.4f%s  lr %.6f  scale %g  %.1f samples/s  ETA %s%s",
            tty ? "\r\033[K" : "", t->opt->label ? "[" : "", t->opt->label ? t->opt->label : "",
            t->opt->label ? "] " : "", (long long)t->train.epoch + 1, (long long)t->rc->epoch_num,
            (long long)in_epoch, (long long)t->steps_per_epoch, avg, accs, r->lr, (double)r->scale, sps, e,
            r->skipped ? "  (skipped: inf/NaN gradients)" : rec);
    if (!tty || last) fputc('\n', f);
    fflush(f);
}

// Training memory excludes evaluation passes (their batch and inference activations are not
// what a training step needs): the peaks of the training segments are merged around each
// evaluation, and the peak restarts after it.
static void merge_training_peak(Trainer *t) {
    OcrMemStats s = ocr_mem_stats(t->device);
    OcrMemStats *m = &t->res->memory.stats;
    for (int c = 0; c < OCR_MEM_CATEGORY_COUNT; c++)
        if (s.peak[c] > m->peak[c]) m->peak[c] = s.peak[c];
    if (s.peak_total > m->peak_total) m->peak_total = s.peak_total;
}

static ocr_status_t evaluate_feed(Trainer *t, Feed *feed, EvalResult *er) {
    merge_training_peak(t);
    RecMetricOptions mo = {t->rc->ignore_space, t->rc->is_filter};
    ocr_status_t st = evaluate(t->m, feed, &t->dict, mo, er);
    // The evaluation re-planned the activation arena: a captured training step is stale.
    step_invalidate_graph(&t->step);
    ocr_mem_reset_peak(t->device);
    return st;
}

static ocr_status_t evaluate_now(Trainer *t, EvalResult *er) { return evaluate_feed(t, &t->eval, er); }

static TrainSetScore set_score(const EvalResult *er) {
    return (TrainSetScore){er->acc, er->acc_exact, er->acc_nospace, er->cer, er->samples,
                           er->paths.unknown_chars, er->paths.unreadable, er->paths.bad_lines};
}

// metrics.jsonl's view of one set's evaluation.
static void add_eval_json(cJSON *o, const char *key, const EvalResult *er) {
    cJSON *e = cJSON_AddObjectToObject(o, key);
    cJSON_AddNumberToObject(e, "acc", er->acc);
    cJSON_AddNumberToObject(e, "acc_exact", er->acc_exact);
    cJSON_AddNumberToObject(e, "acc_nospace", er->acc_nospace);
    cJSON_AddNumberToObject(e, "norm_edit_dis", er->norm_edit_dis);
    cJSON_AddNumberToObject(e, "cer", er->cer);
    cJSON_AddNumberToObject(e, "samples", (double)er->samples);
    cJSON_AddNumberToObject(e, "samples_per_s", er->samples_per_s);
    cJSON_AddNumberToObject(e, "unknown_chars", (double)er->paths.unknown_chars);
    cJSON_AddNumberToObject(e, "unreadable", (double)er->paths.unreadable);
    cJSON_AddNumberToObject(e, "bad_lines", (double)er->paths.bad_lines);
}

static void metrics_line(Trainer *t, cJSON *o) {
    char *s = cJSON_PrintUnformatted(o);
    if (s && t->metrics) fprintf(t->metrics, "%s\n", s);
    free(s);
    if (t->metrics) fflush(t->metrics);
}

// The pretrained weights on both sets before the first step (an EvalGeneral section and
// Global.pretrained_model, not resuming): the start the gain and the forgetting are measured from.
static ocr_status_t eval_start(Trainer *t) {
    if (!t->general_ok || !t->eval_ok || !t->rc->pretrained_model || t->ckdir[0] || t->st.iter != 0) return OCR_OK;
    EvalResult et, eg;
    OCR_TRY(evaluate_now(t, &et));
    OCR_TRY(evaluate_feed(t, &t->general, &eg));
    TrainOutcome *out = &t->res->outcome;
    out->has_start = 1;
    out->start_target = set_score(&et);
    out->start_general = set_score(&eg);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "iter", 0);
    cJSON_AddStringToObject(o, "start", t->rc->pretrained_model);
    add_eval_json(o, "eval", &et);
    add_eval_json(o, "eval_general", &eg);
    metrics_line(t, o);
    cJSON_Delete(o);
    if (t->progress)
        fprintf(t->progress, "pretrained %s before training: Eval acc %.4f (exact %.4f), EvalGeneral acc %.4f (exact %.4f)\n",
                t->rc->pretrained_model, et.acc, et.acc_exact, eg.acc, eg.acc_exact);
    return OCR_OK;
}

static ocr_status_t run_eval(Trainer *t) {
    if (!t->eval_ok) return OCR_OK;
    FILE *f = t->progress;
    if (f && isatty(fileno(f))) fputc('\n', f);
    EvalResult er, eg;
    OCR_TRY(evaluate_now(t, &er));
    if (t->general_ok) {
        OCR_TRY(evaluate_feed(t, &t->general, &eg));
        TrainOutcome *out = &t->res->outcome;
        out->has_last = 1;
        out->last_iter = t->st.iter;
        out->last_target = set_score(&er);
        out->last_general = set_score(&eg);
    }
    EvalRecord rec = {t->st.iter, er.acc, er.norm_edit_dis, er.cer};
    OCR_TRY(push_eval(t->res, &rec));
    int best = er.acc > t->st.best_acc;
    if (best) {
        t->st.best_acc = er.acc;
        t->st.best_iter = t->st.iter;
        t->res->outcome.best_acc = er.acc;
        t->res->outcome.best_iter = t->st.iter;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "iter", (double)t->st.iter);
    add_eval_json(o, "eval", &er);
    if (t->general_ok) add_eval_json(o, "eval_general", &eg);
    cJSON_AddNumberToObject(o, "best_acc", t->st.best_acc);
    cJSON_AddNumberToObject(o, "best_iter", (double)t->st.best_iter);
    metrics_line(t, o);
    cJSON_Delete(o);
    if (f)
        fprintf(f, "%s%seval at step %lld: acc %.4f  norm_edit_dis %.4f  cer %.4f  (%lld samples, %.1f samples/s)%s\n",
                t->opt->label ? t->opt->label : "", t->opt->label ? ": " : "", (long long)t->st.iter, er.acc,
                er.norm_edit_dis, er.cer, (long long)er.samples, er.samples_per_s,
                best ? "  best so far" : "");
    if (f && t->general_ok)
        fprintf(f, "%s%sEvalGeneral at step %lld: acc %.4f  exact %.4f  spaces ignored %.4f  cer %.4f  (%lld samples)\n",
                t->opt->label ? t->opt->label : "", t->opt->label ? ": " : "", (long long)t->st.iter, eg.acc,
                eg.acc_exact, eg.acc_nospace, eg.cer, (long long)eg.samples);
    if (best) OCR_TRY(save_checkpoint(t, "best"));
    return OCR_OK;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static void summarize(Trainer *t) {
    TrainResult *r = t->res;
    int64_t n = r->history.n_steps;
    int64_t warm = n / 10 > 1 ? n / 10 : (n > 1 ? 1 : 0);
    double secs = 0, samples = 0;
    float *times = malloc((size_t)(n ? n : 1) * sizeof *times);
    int64_t k = 0;
    for (int64_t i = warm; i < n; i++) {
        secs += r->history.steps[i].step_seconds;
        samples += r->config.batch_size;
        if (times) times[k++] = r->history.steps[i].step_seconds;
    }
    r->throughput.samples_per_s = secs > 0 ? samples / secs : 0;
    if (times && k) {
        qsort(times, (size_t)k, sizeof *times, cmp_float);
        r->throughput.median_step_s = k % 2 ? times[k / 2] : 0.5 * (times[k / 2 - 1] + times[k / 2]);
    }
    free(times);
    r->throughput.epoch_seconds = r->throughput.median_step_s * (double)r->config.steps_per_epoch;
    double s = 0;
    int m = 0;
    for (int64_t i = n - 1; i >= 0 && m < 20; i--)
        if (!r->history.steps[i].skipped && isfinite(r->history.steps[i].loss)) s += r->history.steps[i].loss, m++;
    r->outcome.final_loss = m ? s / m : NAN;
    r->amp.skipped_steps = t->amp.stats.skipped_steps;
    r->amp.recomputed_steps = t->amp.stats.recomputed_steps;  // recompute_seconds: collect_one
    r->amp.final_scale = amp_engine_loss_scale(&t->amp);
    // Where overflows were first located, most frequent first.
    r->amp.n_overflow_layers = 0;
    const AmpStats *as = &t->amp.stats;
    for (int l = 0; l < as->n_layers; l++) {
        if (!as->overflows || as->overflows[l] == 0) continue;
        int pos = r->amp.n_overflow_layers;
        if (pos == TRAIN_MAX_OVERFLOW_LAYERS) {
            if (as->overflows[l] <= r->amp.overflow_count[pos - 1]) continue;
            pos--;
        } else {
            r->amp.n_overflow_layers++;
        }
        while (pos > 0 && r->amp.overflow_count[pos - 1] < as->overflows[l]) {
            r->amp.overflow_count[pos] = r->amp.overflow_count[pos - 1];
            memcpy(r->amp.overflow_layer[pos], r->amp.overflow_layer[pos - 1], sizeof r->amp.overflow_layer[0]);
            pos--;
        }
        r->amp.overflow_count[pos] = as->overflows[l];
        snprintf(r->amp.overflow_layer[pos], sizeof r->amp.overflow_layer[0], "%s", as->layer_names[l]);
    }
    AmpMemory am = amp_engine_memory(&t->amp);
    r->amp.cast_cache_bytes = am.cast_cache_bytes;
    r->amp.master_bytes = am.master_bytes;
    if (t->distill) {
        // What the frozen networks cost: one forward pass each per step.
        DistillCost dc;
        distill_run_cost(t->distill, &dc);
        if (dc.forwards) {
            r->memory.teacher_weights_bytes = dc.params_bytes + dc.cast_cache_bytes;
            r->memory.teacher_activations_bytes = dc.activations_bytes;
            r->memory.teacher_dtype = dc.frozen_dtype;
        }
        double all = 0;
        for (int64_t i = 0; i < n; i++) all += r->history.steps[i].step_seconds;
        if (dc.forwards)
            ocr_log(OCR_LOG_INFO, "distillation: %lld frozen-network forward passes (%s), %.3f s (%.1f%% of the steps' "
                    "time); their weights and BN statistics %.1f MiB (+ %.1f MiB O1 cast cache), their largest "
                    "activation arena %.1f MiB",
                    (long long)dc.forwards, ocr_dtype_name(dc.frozen_dtype), dc.seconds,
                    all > 0 ? 100.0 * dc.seconds / all : 0.0, (double)dc.params_bytes / 1048576.0,
                    (double)dc.cast_cache_bytes / 1048576.0, (double)dc.activations_bytes / 1048576.0);
        if (dc.peers)
            ocr_log(OCR_LOG_INFO, "distillation: %d network(s) trained beside the scored one (mutual learning), "
                    "%.1f MiB of weights and BN statistics", dc.peers, (double)dc.peer_params_bytes / 1048576.0);
        if (dc.cache_hits || dc.cache_misses)
            ocr_log(OCR_LOG_INFO, "distillation: teacher cache (Global.distill_teacher_cache): %lld samples served, %lld "
                    "computed, %.3f MiB of host memory, about %.3f s of forward passes saved",
                    (long long)dc.cache_hits, (long long)dc.cache_misses, (double)dc.cache_bytes / 1048576.0,
                    dc.cache_saved_seconds);
    }
}

// ---- the loop ------------------------------------------------------------------------------------------

// The bookkeeping of one finished step, when its outcome is collected.
static ocr_status_t record_step(Trainer *t, StepRecord *rec, int count, int ninf, int overflow_layer,
                                int64_t in_epoch, int64_t stop, double *ema) {
    TrainResult *res = t->res;
    res->outcome.infeasible_samples += ninf;
    OCR_TRY(push_step(res, rec));
    count *= t->world;  // metrics.jsonl and the progress line show the global batch
    t->st.last_loss = rec->loss;
    *ema = *ema == 0 ? rec->step_seconds : 0.9 * *ema + 0.1 * rec->step_seconds;
    double sps = rec->step_seconds > 0 ? count / rec->step_seconds : 0;
    double avg = smoothed_loss(t, rec->loss);
    double acc = smoothed_acc(t, rec->train_acc);
    write_step_json(t, rec, avg, sps, count, ninf, overflow_layer);
    int64_t done = rec->iter + 1;
    progress_line(t, rec, avg, acc, sps, *ema * (double)(stop - done), done == stop, in_epoch);
    return OCR_OK;
}

// What the loop remembers of a step in flight.
typedef struct {
    int64_t iter, in_epoch;
    float lr;
    int count;
    float train_acc, train_norm_edit_dis;  // cal_metric_during_train (-1: not computed)
} Inflight;

// The oldest step in flight: its outcome, recorded. Its time is the interval since the previous
// collect (or the loop's start after a drain): with a step in flight on a GPU that is the
// device's step time in steady state; on the CPU, which collects each step at once, the step
// with its batch.
static ocr_status_t collect_one(Trainer *t, Inflight *q, int *nq, int64_t stop, double *ema, double *t_last) {
    StepOutcome o;
    OCR_TRY(step_collect(&t->step, &o));
    double now = ocr_now_seconds();
    StepRecord rec;
    rec.iter = q[0].iter;
    rec.loss = (float)o.loss;
    rec.loss_ctc = (float)o.loss_ctc;  // MultiHead: the MultiLoss parts (0 for a CTC head)
    rec.loss_gtc = (float)o.loss_gtc;
    rec.loss_distill = (float)o.loss_distill;
    rec.lr = q[0].lr;
    rec.scale = o.scale;
    rec.skipped = o.skipped;
    rec.recomputed = o.recomputed;
    t->res->amp.recompute_seconds += o.recompute_seconds;
    rec.grad_norm = (float)o.grad_norm;
    rec.train_acc = q[0].train_acc;
    rec.train_norm_edit_dis = q[0].train_norm_edit_dis;
    rec.step_seconds = (float)(now - *t_last);
    *t_last = now;
    Inflight done = q[0];
    for (int i = 1; i < *nq; i++) q[i - 1] = q[i];
    (*nq)--;
    return record_step(t, &rec, done.count, o.infeasible, o.skipped ? o.overflow_layer : o.recompute_layer,
                       done.in_epoch, stop, ema);
}

static ocr_status_t drain(Trainer *t, Inflight *q, int *nq, int64_t stop, double *ema, double *t_last) {
    while (*nq > 0) OCR_TRY(collect_one(t, q, nq, stop, ema, t_last));
    return OCR_OK;
}

// metrics.jsonl is the run's record: a full disk or an I/O error there stops the run with the
// file named, instead of training on with the record silently cut short.
static ocr_status_t metrics_flush(Trainer *t) {
    if (!t->metrics) return OCR_OK;  // ranks other than 0
    if (fflush(t->metrics) != 0 || ferror(t->metrics))
        return ocr_set_error(OCR_ERR_IO, "writing %s/metrics.jsonl failed: %s", t->dir, strerror(errno));
    return OCR_OK;
}

// After draining the steps in flight at a boundary: evaluation, epoch end, checkpoints.
static ocr_status_t after_iteration(Trainer *t) {
    const RunConfig *rc = t->rc;
    int64_t g = t->st.iter;
    if (rc->eval_every > 0 && g > rc->eval_start && (g - rc->eval_start) % rc->eval_every == 0) OCR_TRY(run_eval(t));
    if (t->train.next_batch >= t->steps_per_epoch) {
        // End of an epoch: the next batch is the first of the following one.
        int64_t done = t->train.epoch + 1;
        OCR_TRY(feed_seek(&t->train, done, 0));
        if (rc->eval_every == 0) OCR_TRY(run_eval(t));
        OCR_TRY(save_checkpoint(t, "latest"));
        if (rc->save_epoch_step > 0 && done % rc->save_epoch_step == 0) {
            char name[64];
            snprintf(name, sizeof name, "iter_epoch_%lld", (long long)done);
            OCR_TRY(save_checkpoint(t, name));
        }
    }
    return metrics_flush(t);
}

// A stop request (Ctrl-C, SIGTERM) reaches the ranks at different moments: they stop together,
// at the first step where any of them has it. The signal number itself is reduced (cmd_train
// exits with 128 + it): a rank that got none takes its peers'.
static ocr_status_t stop_requested(Trainer *t, int *stop) {
    int32_t stop_now = (int32_t)train_stop_requested;
    OCR_TRY(ocr_dist_max_i32(t->dist, &stop_now, 1, "the stop-request all-reduce"));
    if (stop_now && !train_stop_requested) train_stop_requested = stop_now;
    *stop = stop_now != 0;
    return OCR_OK;
}

// The loop, the same on every device: each batch goes onto the model's device (feed_upload) and
// its step is enqueued; the oldest step is collected once t->in_flight are in flight (on a GPU
// two, so the host prepares and uploads batch n+1 while the device computes step n; on the CPU
// one, collected at once). Everything that reads training state (evaluation, checkpoints, the
// end) first drains the steps in flight.
static ocr_status_t train_steps(Trainer *t, int64_t stop, double *ema) {
    const RunConfig *rc = t->rc;
    Inflight q[STEP_MAX_IN_FLIGHT];
    int nq = 0;
    double t_last = ocr_now_seconds();
    while (t->st.iter < stop) {
        int stop_now;
        OCR_TRY(stop_requested(t, &stop_now));
        if (stop_now) break;
        if (nq == 0) t_last = ocr_now_seconds();
        int end;
        OCR_TRY(feed_next(&t->train, &t->batch, &end));
        if (end) continue;  // the feed moved to the next epoch
        FeedDeviceBatch db;
        OCR_TRY(feed_upload(t->up, &t->batch, &db));
        double lr = lr_at(&rc->optim.lr, t->st.iter, t->steps_per_epoch, rc->epoch_num) * t->res->config.lr_scale;
        step_mode_t mode;
        OCR_TRY(step_enqueue(&t->step, &db, lr, &mode));
        feed_upload_consumed(t->up);
        StepRecord metric;
        OCR_TRY(batch_metric(t, &metric));
        q[nq++] = (Inflight){t->st.iter, t->train.next_batch, (float)lr, db.count, metric.train_acc,
                             metric.train_norm_edit_dis};
        t->st.iter++;
        if (nq >= t->in_flight) OCR_TRY(collect_one(t, q, &nq, stop, ema, &t_last));
        int64_t g = t->st.iter;
        int boundary = (rc->eval_every > 0 && g > rc->eval_start && (g - rc->eval_start) % rc->eval_every == 0) ||
                       t->train.next_batch >= t->steps_per_epoch || g == stop;
        if (boundary) {
            OCR_TRY(drain(t, q, &nq, stop, ema, &t_last));
            OCR_TRY(after_iteration(t));
            t_last = ocr_now_seconds();
        } else {
            OCR_TRY(metrics_flush(t));
        }
    }
    OCR_TRY(drain(t, q, &nq, stop, ema, &t_last));
    step_graph_counts(&t->step, &t->res->device.graph_captures, &t->res->device.graph_replays);
    t->res->device.cuda_graph = t->res->device.graph_replays > 0;
    if (ocr_backend_is_async(t->device)) {
        // The tracker against the runtime, at the end of training (before evaluation buffers).
        t->res->memory.device_tracked_bytes = ocr_mem_stats(t->device).current_total;
        OcrDeviceInfo ci;
        if (ocr_backend_device_info(t->device, &ci) == OCR_OK)
            t->res->memory.device_runtime_used = ci.total_memory - ci.free_memory;
    }
    return OCR_OK;
}

static ocr_status_t loop(Trainer *t) {
    TrainResult *res = t->res;
    int64_t stop = t->total_iters;
    if (t->opt->max_iters > 0 && t->opt->max_iters < stop) stop = t->opt->max_iters;
    double t_start = ocr_now_seconds();
    double ema = 0;
    // Training memory is measured from here: the set-up's transients (an O2 conversion holds
    // both copies of the parameters for a moment) are not what a step needs.
    OCR_TRY(eval_start(t));
    ocr_mem_reset_peak(t->device);
    OCR_TRY(train_steps(t, stop, &ema));
    res->throughput.train_seconds = ocr_now_seconds() - t_start;
    // A stop inside an epoch (--max-steps, Ctrl-C) leaves a resumable checkpoint.
    if (t->train.next_batch != 0 || train_stop_requested) OCR_TRY(save_checkpoint(t, "latest"));
    merge_training_peak(t);
    // The general set's last word is the final weights': an evaluation at the end unless the
    // schedule's last one was there (not after a stop request: that exits promptly).
    if (t->general_ok && !train_stop_requested && !(res->outcome.has_last && res->outcome.last_iter == t->st.iter))
        OCR_TRY(run_eval(t));
    if (t->opt->final_eval && t->eval_ok) {
        EvalResult er;
        OCR_TRY(evaluate_now(t, &er));
        res->outcome.has_final_eval = 1;
        res->outcome.acc = er.acc;
        res->outcome.norm_edit_dis = er.norm_edit_dis;
        res->outcome.cer = er.cer;
        res->outcome.eval_samples = er.samples;
        res->outcome.eval_samples_per_s = er.samples_per_s;
    }
    return OCR_OK;
}

// Data parallelism's figures, gathered on every rank (a collective: all ranks call it), and on
// rank 0 SAVE_DIR/distributed.json.
static ocr_status_t dist_summary(Trainer *t) {
    TrainResult *r = t->res;
    const GradSyncStats *g = &t->sync.stats;
    if (t->sync_ok && g->steps > 0) {
        r->dist.allreduce_bytes_per_step = g->bytes / g->steps;
        r->dist.allreduce_buckets = t->sync.n_buckets;
        r->dist.allreduce_seconds_per_step = g->comm_seconds / (double)g->steps;
        r->dist.allreduce_exposed_per_step = g->exposed_seconds / (double)g->steps;
        r->dist.backward_seconds_per_step = g->backward_seconds / (double)g->steps;
        double hidden = g->comm_seconds > 0 ? 1.0 - g->exposed_seconds / g->comm_seconds : 1.0;
        r->dist.comm_hidden_fraction = hidden < 0 ? 0 : hidden > 1 ? 1 : hidden;
        if (r->dist.sync_bn) r->dist.bn_sync_bytes_per_step = ocr_dist_counters(t->dist).stats_bytes / g->steps;
    }
    int n = t->world < TRAIN_MAX_RANKS ? t->world : TRAIN_MAX_RANKS;
    double v[TRAIN_MAX_RANKS + 1] = {0};
    if (t->rank < n) v[t->rank] = r->throughput.samples_per_s;
    v[TRAIN_MAX_RANKS] = r->throughput.samples_per_s;
    OCR_TRY(ocr_dist_sum_f64(t->dist, v, TRAIN_MAX_RANKS + 1, "the throughput gather"));
    r->dist.n_rank_samples_per_s = n;
    for (int i = 0; i < n; i++) r->dist.rank_samples_per_s[i] = v[i];
    r->dist.global_samples_per_s = v[TRAIN_MAX_RANKS];
    if (t->rank != 0 || !t->opt->save_checkpoints) return OCR_OK;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "backend", r->dist.backend);
    cJSON_AddNumberToObject(o, "world_size", t->world);
    cJSON_AddNumberToObject(o, "batch_per_rank", r->config.batch_size);
    cJSON_AddNumberToObject(o, "global_batch", (double)r->dist.global_batch);
    cJSON_AddStringToObject(o, "amp", r->config.amp_level);
    cJSON_AddStringToObject(o, "amp_dtype", r->config.amp_dtype);
    cJSON_AddNumberToObject(o, "steps", (double)r->history.n_steps);
    cJSON_AddNumberToObject(o, "global_samples_per_s", r->dist.global_samples_per_s);
    cJSON *a = cJSON_AddArrayToObject(o, "rank_samples_per_s");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(r->dist.rank_samples_per_s[i]));
    cJSON_AddNumberToObject(o, "allreduce_bytes_per_step", (double)r->dist.allreduce_bytes_per_step);
    cJSON_AddNumberToObject(o, "allreduce_buckets", r->dist.allreduce_buckets);
    cJSON_AddNumberToObject(o, "allreduce_seconds_per_step", r->dist.allreduce_seconds_per_step);
    cJSON_AddNumberToObject(o, "allreduce_exposed_seconds_per_step", r->dist.allreduce_exposed_per_step);
    cJSON_AddNumberToObject(o, "backward_seconds_per_step", r->dist.backward_seconds_per_step);
    cJSON_AddNumberToObject(o, "comm_hidden_fraction", r->dist.comm_hidden_fraction);
    cJSON_AddBoolToObject(o, "sync_bn", r->dist.sync_bn);
    cJSON_AddNumberToObject(o, "bn_sync_bytes_per_step", (double)r->dist.bn_sync_bytes_per_step);
    cJSON_AddNumberToObject(o, "median_step_s", r->throughput.median_step_s);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (!text) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    char p[2300];
    snprintf(p, sizeof p, "%s/distributed.json", t->dir);
    ocr_status_t st = ocr_write_file_atomic(p, text, strlen(text));
    free(text);
    if (t->world > 1)
        ocr_log(OCR_LOG_INFO, "data parallel: %d ranks x batch %d, %.1f samples/s in all; all-reduce %lld bytes per "
                "step in %d bucket(s), %.2f ms per step, %.0f %% behind the backward", t->world, r->config.batch_size,
                r->dist.global_samples_per_s, (long long)r->dist.allreduce_bytes_per_step, r->dist.allreduce_buckets,
                1e3 * r->dist.allreduce_seconds_per_step, 100 * r->dist.comm_hidden_fraction);
    if (t->world > 1 && r->dist.sync_bn)
        ocr_log(OCR_LOG_INFO, "data parallel: synchronised batch norm summed %lld bytes of statistics per step",
                (long long)r->dist.bn_sync_bytes_per_step);
    return st;
}

ocr_status_t train_run(const OcrConfig *cfg, const RunConfig *rc, const TrainOptions *opt, TrainResult *res) {
    memset(res, 0, sizeof *res);
    Trainer t;
    memset(&t, 0, sizeof t);
    t.cfg = cfg;
    t.rc = rc;
    t.opt = opt;
    t.res = res;
    ocr_workspace_release();
    ocr_mem_reset_peak(ocr_cpu());
    t.device = ocr_cpu();
    ocr_status_t st = setup(&t);
    if (st == OCR_OK) {
        st = loop(&t);
    }
    if (st == OCR_OK) {
        summarize(&t);
        st = dist_summary(&t);
    }
    if (st != OCR_OK && t.world > 1) {
        // One rank's failure ends the job: the others would wait for it in their next collective.
        char msg[1200];
        snprintf(msg, sizeof msg, "rank %d of %d: %s", t.rank, t.world, ocr_last_error());
        ocr_dist_abort(t.dist, msg);
    }
    if (st == OCR_OK) {
        OcrSkipStats sk;
        if (t.train_ok) {
            feed_skip_stats(&t.train, &sk);
            ocr_skip_stats_log(&sk, "Train images");
        }
        if (t.eval_ok) {
            feed_skip_stats(&t.eval, &sk);
            ocr_skip_stats_log(&sk, "Eval images");
        }
        if (t.general_ok) {
            feed_skip_stats(&t.general, &sk);
            ocr_skip_stats_log(&sk, "EvalGeneral images");
        }
    }
    cleanup(&t);
    return st;
}

void train_forgetting_line(const TrainOutcome *o, char *buf, size_t cap) {
    if (!o->has_general || (!o->has_start && !o->has_last)) {
        snprintf(buf, cap, "%s", "");
        return;
    }
    const TrainSetScore *st = &o->start_target, *sg = &o->start_general, *lt = &o->last_target, *lg = &o->last_general;
    if (o->has_start && o->has_last)
        snprintf(buf, cap, "From the pretrained weights, exact-match accuracy on the target set (Eval) went %.3f -> %.3f "
                 "(%+.1f points) and on the general set (EvalGeneral) %.3f -> %.3f (%+.1f points).",
                 st->acc_exact, lt->acc_exact, 100 * (lt->acc_exact - st->acc_exact), sg->acc_exact, lg->acc_exact,
                 100 * (lg->acc_exact - sg->acc_exact));
    else if (o->has_last)
        snprintf(buf, cap, "Exact-match accuracy at the end: target set (Eval) %.3f, general set (EvalGeneral) %.3f (no "
                 "pretrained score to measure the change from).", lt->acc_exact, lg->acc_exact);
    else
        snprintf(buf, cap, "The pretrained weights scored %.3f on the target set (Eval) and %.3f on the general set "
                 "(EvalGeneral); training did not reach an evaluation.", st->acc_exact, sg->acc_exact);
}

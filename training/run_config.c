// Config validation for the application (see run_config.h).
#include "training/run_config.h"

#include "training/compare.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "amp/engine.h"
#include "core/fileio.h"
#include "data/loader.h"
#include "kernels/backend.h"
#include "models/model.h"
#include "training/distill_config.h"

// ---- known keys ---------------------------------------------------------------------------

static const char *const TOP_KEYS[] = {"Global", "Architecture", "Loss", "Optimizer", "PostProcess",
                                       "Metric", "Train",        "Eval", "EvalGeneral", "Distributed",
                                       "Distillation",  // written by distill_config_rewrite (training/distill_config.h)
                                       NULL};

// The keys each section implements. PaddleOCR keys that are accepted but have no effect here
// are not in these lists but in NO_EFFECT_KEYS below (one table, with the reasons).
static const char *const GLOBAL_KEYS[] = {
    "epoch_num", "log_smooth_window", "print_batch_step", "save_model_dir", "save_epoch_step", "eval_batch_step",
    "cal_metric_during_train", "pretrained_model", "checkpoints", "character_dict_path", "max_text_length",
    "use_space_char", "seed", "device", "use_gpu", "threads", "accuracy_tolerance", "cer_tolerance", "compare_seeds", "compare_seed_sd", "cuda_graph", "allow_tf32",
    "cpu_exact_numerics", "use_sync_bn",
    // distillation (training/distill.h)
    "distill_teacher_cache", "distill_teacher_fp32",
    // fine-tuning (read_finetune)
    "pretrained_strict", "pretrained_dict_path", "freeze_norm", "freeze_norm_affine", "freeze_params",
    // AMP (validated by the AMP engine)
    "use_amp", "amp_level", "amp_dtype", "scale_loss", "use_dynamic_loss_scaling", "amp_custom_black_list",
    "amp_custom_white_list", "amp_fp32_layers", "amp_stochastic_rounding", "amp_activation_stats_every", "amp_overflow",
    "incr_every_n_steps", "incr_ratio", "decr_ratio", "decr_every_n_nan_or_inf", "min_loss_scale", "max_loss_scale",
    // PaddleOCR keys with no effect here: NO_EFFECT_KEYS below
    NULL};

// THE table of keys that PaddleOCR's training or evaluation reads (tools/program.py, train.py,
// eval.py, the ppocr builders) but that have no effect here, each with why. ocr_config_check_keys
// accepts them wherever a section's validation would otherwise reject them as unknown, and
// records them; run_config_load logs one note line each and `ocrtrain info` lists them.
// Sections are fnmatch patterns ("" is the top level).
static const OcrNoEffectKey NO_EFFECT_KEYS[] = {
    {"", "profiler_options", "PaddleOCR's -p profiler options (tools/program.py); there is no Paddle profiler here"},
    {"", "wandb", "Weights & Biases settings; metrics go to save_model_dir/metrics.jsonl instead"},
    {"Global", "debug", "in PaddleOCR's official configs, but no PaddleOCR code reads it either"},
    {"Global", "calc_epoch_interval", "with cal_metric_during_train the training metric is computed at every step"},
    {"Global", "print_mem_info",
     "PaddleOCR's GPU memory log line; memory by category is in metrics.jsonl and the reports"},
    {"Global", "eval_batch_epoch", "evaluation is scheduled by Global.eval_batch_step (iterations, 0: every epoch)"},
    {"Global", "uniform_output_enabled",
     "PaddleX's per-checkpoint inference export; checkpoints are latest/, best/, iter_epoch_N/"},
    {"Global", "pdx_model_name", "PaddleX model name, used only by PaddleX exports"},
    {"Global", "model_name", "PaddleX model name, used only by PaddleX exports"},
    {"Global", "log_ranks", "under mpirun rank 0 alone prints progress and writes metrics.jsonl"},
    {"Global", "distributed", "the world comes from the launcher (mpirun / srun) and Distributed.backend"},
    {"Global", "use_xpu", "no Kunlun XPU backend; Global.device (or use_gpu) picks the CPU or a CUDA GPU"},
    {"Global", "use_npu", "no Ascend NPU backend; Global.device (or use_gpu) picks the CPU or a CUDA GPU"},
    {"Global", "use_mlu", "no Cambricon MLU backend; Global.device (or use_gpu) picks the CPU or a CUDA GPU"},
    {"Global", "use_gcu", "no Enflame GCU backend; Global.device (or use_gpu) picks the CPU or a CUDA GPU"},
    {"Global", "use_visualdl", "no VisualDL logging; metrics go to save_model_dir/metrics.jsonl"},
    {"Global", "use_wandb", "no Weights & Biases logging; metrics go to save_model_dir/metrics.jsonl"},
    {"Global", "to_static", "Paddle's dynamic-to-static compilation; on a GPU Global.cuda_graph plays that part"},
    {"Global", "d2s_train_image_shape", "input shape for Paddle's dynamic-to-static training (to_static)"},
    {"Global", "save_inference_dir", "output of PaddleOCR's tools/export_model.py, not of training"},
    {"Global", "infer_img", "input of PaddleOCR's tools/infer_rec.py; ocrtrain predict takes images as arguments"},
    {"Global", "infer_mode", "PaddleOCR's export/inference switch; training and evaluation do not read it"},
    {"Global", "character_type",
     "PaddleOCR 2.0's charset switch, superseded by character_dict_path (none: 0-9a-z, as \"en\")"},
    {"Global", "save_res_path", "output of PaddleOCR's tools/infer_rec.py; ocrtrain predict prints to stdout"},
    {"*.dataset", "ext_data_ratio_list",
     "PaddleOCR's SimpleDataSet does not read it (PP-OCRv4's distillation config carries it)"},
    {"*.dataset.transforms.*.MultiLabelEncode", "max_text_length",
     "PaddleOCR's create_operators overwrites a transform's settings with Global's: Global.max_text_length applies"},
    {"*.dataset.transforms.*.MultiLabelEncode", "character_dict_path",
     "PaddleOCR's create_operators overwrites a transform's settings with Global's: Global.character_dict_path applies"},
    {"*.dataset.transforms.*.MultiLabelEncode", "use_space_char",
     "PaddleOCR's create_operators overwrites a transform's settings with Global's: Global.use_space_char applies"},
    {"Metric", "cal_blue_score",
     "BLEU for PaddleOCR's LaTeX-OCR evaluation; RecMetric reports accuracy, edit distance, CER"},
    {NULL, NULL, NULL}};

void run_config_register_no_effect_keys(void) { ocr_config_set_no_effect_keys(NO_EFFECT_KEYS); }

void run_config_log_ignored(const OcrConfig *cfg) {
    for (int i = 0; i < ocr_config_num_ignored(cfg); i++) {
        const char *reason, *key = ocr_config_ignored(cfg, i, &reason);
        ocr_log(OCR_LOG_INFO, "%s: note: %s has no effect here: %s", ocr_config_source(cfg), key, reason);
    }
}

static const char *const OPTIM_KEYS[] = {"name",       "beta1",          "beta2",
                                         "epsilon",    "lr",             "regularizer",
                                         "clip_norm",  "clip_norm_global", "weight_decay",
                                         "no_weight_decay_name", "one_dim_param_no_weight_decay",
                                         "lr_mult", NULL};
static const char *const LR_KEYS[] = {"name", "learning_rate", "warmup_epoch", "decay_epochs", "values",
                                      "last_epoch", NULL};
static const char *const REG_KEYS[] = {"name", "factor", NULL};
// MultiLoss's keys (loss_config_list, weight_1, weight_2) are validated with the MultiHead in
// models/arch_config.c, which needs both sections.
static const char *const LOSS_KEYS[] = {"name", "use_focal_loss", "loss_config_list", "weight_1", "weight_2", NULL};
static const char *const POST_KEYS[] = {"name", "character_dict_path", "use_space_char", NULL};
static const char *const METRIC_KEYS[] = {"name", "main_indicator", "ignore_space", "is_filter", NULL};
static const char *const SPLIT_KEYS[] = {"dataset", "loader", "sampler", NULL};
static const char *const DIST_KEYS[] = {"backend", "bucket_mb", "timeout_s", NULL};

static const char *SHORTHANDS[][2] = {
    {"--use_amp", "Global.use_amp"},
    {"--scale_loss", "Global.scale_loss"},
    {"--amp_level", "Global.amp_level"},
    {"--amp_dtype", "Global.amp_dtype"},
    {"--use_dynamic_loss_scaling", "Global.use_dynamic_loss_scaling"},
    {"--amp_custom_black_list", "Global.amp_custom_black_list"},
    {"--amp_custom_white_list", "Global.amp_custom_white_list"},
};

const char *run_config_shorthand(const char *flag) {
    for (size_t i = 0; i < sizeof SHORTHANDS / sizeof SHORTHANDS[0]; i++)
        if (strcmp(flag, SHORTHANDS[i][0]) == 0) return SHORTHANDS[i][1];
    return NULL;
}

// ---- helpers --------------------------------------------------------------------------------

static const char *src(const OcrConfig *cfg) { return ocr_config_source(cfg); }

static ocr_status_t get_int_range(const OcrConfig *cfg, const char *path, int64_t def, int64_t lo, int64_t hi,
                                  int64_t *out) {
    OCR_TRY(ocr_config_get_int(cfg, path, def, out));
    return ocr_config_check_range(cfg, path, (double)*out, (double)lo, (double)hi);
}

static ocr_status_t get_double_range(const OcrConfig *cfg, const char *path, double def, double lo, double hi,
                                     double *out) {
    OCR_TRY(ocr_config_get_double(cfg, path, def, out));
    if (!isfinite(*out)) return ocr_set_error(OCR_ERR_CONFIG, "%s: %s must be a finite number", src(cfg), path);
    return ocr_config_check_range(cfg, path, *out, lo, hi);
}

// Global.compare_seeds: a count (3: Global.seed, +1, +2) or a list of seeds ([1, 7, 42]), checked
// as `ocrtrain compare --seeds` checks its argument (a count of at least 1, no seed twice).
static ocr_status_t read_compare_seeds(const OcrConfig *cfg, RunConfig *rc) {
    int64_t count;
    if (ocr_config_get_int(cfg, "Global.compare_seeds", 3, &count) == OCR_OK) {
        snprintf(rc->compare_seeds, sizeof rc->compare_seeds, "%lld", (long long)count);
    } else {
        ocr_clear_error();
        int64_t list[COMPARE_MAX_SEEDS + 1];
        int n = 0;
        if (ocr_config_get_int_list(cfg, "Global.compare_seeds", list, COMPARE_MAX_SEEDS + 1, &n) != OCR_OK)
            return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.compare_seeds must be a number of seeds or a list of seeds",
                                 src(cfg));
        if (n < 1) return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.compare_seeds: an empty list trains nothing", src(cfg));
        size_t used = 0;
        for (int i = 0; i < n && used + 24 < sizeof rc->compare_seeds; i++) {
            if (list[i] < 0)
                return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.compare_seeds: %lld is negative", src(cfg),
                                     (long long)list[i]);
            used += (size_t)snprintf(rc->compare_seeds + used, sizeof rc->compare_seeds - used, "%s%lld", i ? "," : "",
                                     (long long)list[i]);
        }
        if (n == 1) snprintf(rc->compare_seeds + used, sizeof rc->compare_seeds - used, ",");  // a one-seed list
    }
    uint64_t seeds[COMPARE_MAX_SEEDS];
    int n;
    if (compare_parse_seeds(rc->compare_seeds, rc->seed, "Global.compare_seeds", seeds, &n) != OCR_OK)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s", src(cfg), ocr_last_error());
    return OCR_OK;
}

// A string key that may also be null/absent (returns NULL) but not another type; "" counts as absent.
static ocr_status_t get_opt_string(const OcrConfig *cfg, const char *path, const char **out) {
    OCR_TRY(ocr_config_get_string(cfg, path, NULL, out));
    if (*out && !**out) *out = NULL;
    return OCR_OK;
}

static ocr_status_t check_name(const OcrConfig *cfg, const char *path, const char *const *allowed, const char **out) {
    const char *name;
    OCR_TRY(ocr_config_require_string(cfg, path, &name));
    for (int i = 0; allowed[i]; i++)
        if (strcmp(name, allowed[i]) == 0) {
            if (out) *out = name;
            return OCR_OK;
        }
    char list[256] = "";
    size_t used = 0;
    for (int i = 0; allowed[i] && used + 1 < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", allowed[i]);
    return ocr_set_error(OCR_ERR_CONFIG, "%s: %s \"%s\" is not supported (supported: %s)", src(cfg), path, name, list);
}

// Like check_name, but the section may be absent (then *out = allowed[0]).
static ocr_status_t check_opt_name(const OcrConfig *cfg, const char *path, const char *const *allowed,
                                   const char **out) {
    if (!ocr_config_has(cfg, path)) {
        if (out) *out = allowed[0];
        return OCR_OK;
    }
    return check_name(cfg, path, allowed, out);
}

// ---- learning-rate schedules -------------------------------------------------------------------

double lr_at(const LrConfig *lr, int64_t iter, int64_t steps_per_epoch, int64_t epochs) {
    if (steps_per_epoch < 1) steps_per_epoch = 1;
    double warm = nearbyint(lr->warmup_epoch * (double)steps_per_epoch);  // Python round(): half to even
    int64_t w = (int64_t)warm;
    double peak = lr->kind == LR_PIECEWISE ? lr->values[0] : lr->learning_rate;
    if (iter < w) return peak * (double)iter / (double)w;  // LinearWarmup from 0.0
    int64_t t = iter - w;  // the inner schedule runs on its own counter after the warm-up
    switch (lr->kind) {
    case LR_COSINE: {
        double tmax = (double)(epochs * steps_per_epoch);
        if (tmax < 1) tmax = 1;
        return 0.5 * lr->learning_rate * (1.0 + cos(M_PI * (double)t / tmax));
    }
    case LR_PIECEWISE:
        for (int i = 0; i < lr->n_decay; i++)
            if ((double)t < lr->decay_epochs[i] * (double)steps_per_epoch) return lr->values[i];
        return lr->values[lr->n_decay];
    default: return lr->learning_rate;
    }
}

static ocr_status_t read_lr(const OcrConfig *cfg, LrConfig *lr) {
    static const char *const names[] = {"Cosine", "Piecewise", "Const", NULL};
    const char *name;
    OCR_TRY(ocr_config_check_keys(cfg, "Optimizer.lr", LR_KEYS));
    if (!ocr_config_has(cfg, "Optimizer.lr"))
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Optimizer.lr is missing (e.g. {\"name\": \"Cosine\", "
                             "\"learning_rate\": 0.001, \"warmup_epoch\": 5})", src(cfg));
    OCR_TRY(check_name(cfg, "Optimizer.lr.name", names, &name));
    lr->kind = strcmp(name, "Cosine") == 0 ? LR_COSINE : strcmp(name, "Piecewise") == 0 ? LR_PIECEWISE : LR_CONST;
    OCR_TRY(get_double_range(cfg, "Optimizer.lr.warmup_epoch", 0.0, 0.0, 1e6, &lr->warmup_epoch));
    int64_t last_epoch;
    OCR_TRY(ocr_config_get_int(cfg, "Optimizer.lr.last_epoch", -1, &last_epoch));
    if (last_epoch != -1)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Optimizer.lr.last_epoch other than -1 is not supported (resume with "
                             "Global.checkpoints instead)", src(cfg));
    if (lr->kind == LR_PIECEWISE) {
        if (ocr_config_has(cfg, "Optimizer.lr.learning_rate"))
            return ocr_set_error(OCR_ERR_CONFIG, "%s: Optimizer.lr.learning_rate is not used by Piecewise (its rates "
                                 "are Optimizer.lr.values)", src(cfg));
        int nd = 0, nv = 0;
        OCR_TRY(ocr_config_get_double_list(cfg, "Optimizer.lr.decay_epochs", lr->decay_epochs, RUN_MAX_PIECES, &nd));
        OCR_TRY(ocr_config_get_double_list(cfg, "Optimizer.lr.values", lr->values, RUN_MAX_PIECES + 1, &nv));
        if (nd < 1 || (nv != nd + 1 && nv != nd))
            return ocr_set_error(OCR_ERR_CONFIG, "%s: Piecewise needs Optimizer.lr.decay_epochs (n boundaries, n >= 1) "
                                 "and Optimizer.lr.values (n + 1 rates, or n); got %d and %d", src(cfg), nd, nv);
        // n values for n boundaries (PP-OCRv3's distillation config): Paddle's PiecewiseDecay keeps
        // the last value after the last boundary.
        if (nv == nd) lr->values[nv++] = lr->values[nd - 1];
        for (int i = 0; i < nd; i++)
            if (!(lr->decay_epochs[i] > 0) || (i > 0 && !(lr->decay_epochs[i] > lr->decay_epochs[i - 1])))
                return ocr_set_error(OCR_ERR_CONFIG, "%s: Optimizer.lr.decay_epochs must be positive and increasing",
                                     src(cfg));
        for (int i = 0; i < nv; i++)
            if (!(lr->values[i] >= 0 && lr->values[i] <= 10))
                return ocr_set_error(OCR_ERR_CONFIG, "%s: Optimizer.lr.values must be in [0, 10], got %g", src(cfg),
                                     lr->values[i]);
        lr->n_decay = nd;
        lr->learning_rate = lr->values[0];
    } else {
        if (ocr_config_has(cfg, "Optimizer.lr.decay_epochs") || ocr_config_has(cfg, "Optimizer.lr.values"))
            return ocr_set_error(OCR_ERR_CONFIG, "%s: Optimizer.lr.decay_epochs/values belong to Piecewise, not %s",
                                 src(cfg), name);
        double v;
        OCR_TRY(ocr_config_require_double(cfg, "Optimizer.lr.learning_rate", &v));
        OCR_TRY(ocr_config_check_range(cfg, "Optimizer.lr.learning_rate", v, 0.0, 10.0));
        lr->learning_rate = v;
    }
    return OCR_OK;
}

static ocr_status_t read_optimizer(const OcrConfig *cfg, OptimConfig *o) {
    static const char *const names[] = {"Adam", "AdamW", NULL};
    memset(o, 0, sizeof *o);
    if (!ocr_config_has(cfg, "Optimizer"))
        return ocr_set_error(OCR_ERR_CONFIG, "%s: the Optimizer section is missing", src(cfg));
    OCR_TRY(ocr_config_check_keys(cfg, "Optimizer", OPTIM_KEYS));
    const char *name;
    OCR_TRY(check_name(cfg, "Optimizer.name", names, &name));
    o->adamw = strcmp(name, "AdamW") == 0;
    OCR_TRY(get_double_range(cfg, "Optimizer.beta1", 0.9, 0.0, 0.999999, &o->beta1));
    OCR_TRY(get_double_range(cfg, "Optimizer.beta2", 0.999, 0.0, 0.999999999, &o->beta2));
    OCR_TRY(get_double_range(cfg, "Optimizer.epsilon", 1e-8, 1e-30, 1.0, &o->epsilon));
    if (o->epsilon <= 0) return ocr_set_error(OCR_ERR_CONFIG, "%s: Optimizer.epsilon must be > 0", src(cfg));
    OCR_TRY(read_lr(cfg, &o->lr));
    // The regularizer: L2 coupled into the gradient (Adam) as Paddle does with a float weight_decay.
    OCR_TRY(ocr_config_check_keys(cfg, "Optimizer.regularizer", REG_KEYS));
    if (ocr_config_has(cfg, "Optimizer.regularizer")) {
        static const char *const regs[] = {"L2", NULL};
        OCR_TRY(check_name(cfg, "Optimizer.regularizer.name", regs, NULL));
        OCR_TRY(get_double_range(cfg, "Optimizer.regularizer.factor", 0.0, 0.0, 1.0, &o->l2_factor));
    }
    if (o->adamw) {
        OCR_TRY(get_double_range(cfg, "Optimizer.weight_decay", 0.01, 0.0, 1.0, &o->weight_decay));
        OCR_TRY(ocr_config_get_bool(cfg, "Optimizer.one_dim_param_no_weight_decay", 0, &o->one_dim_no_decay));
        const char *nd;
        OCR_TRY(get_opt_string(cfg, "Optimizer.no_weight_decay_name", &nd));
        // PaddleOCR's AdamW takes a space-separated string of name fragments.
        while (nd && *nd) {
            while (*nd == ' ') nd++;
            size_t n = strcspn(nd, " ");
            if (n == 0) break;
            if (o->n_no_decay_names >= 8 || n >= sizeof o->no_decay_names[0])
                return ocr_set_error(OCR_ERR_CONFIG, "%s: Optimizer.no_weight_decay_name: at most 8 names of < 64 "
                                     "characters", src(cfg));
            memcpy(o->no_decay_names[o->n_no_decay_names], nd, n);
            o->no_decay_names[o->n_no_decay_names++][n] = '\0';
            nd += n;
        }
    } else {
        if (ocr_config_has(cfg, "Optimizer.weight_decay"))
            return ocr_set_error(OCR_ERR_CONFIG, "%s: Optimizer.weight_decay is AdamW's; Adam takes "
                                 "Optimizer.regularizer {\"name\": \"L2\", \"factor\": ...}", src(cfg));
        if (ocr_config_has(cfg, "Optimizer.no_weight_decay_name") ||
            ocr_config_has(cfg, "Optimizer.one_dim_param_no_weight_decay"))
            return ocr_set_error(OCR_ERR_CONFIG, "%s: no_weight_decay_name / one_dim_param_no_weight_decay are AdamW "
                                 "keys (Optimizer.name is Adam)", src(cfg));
    }
    OCR_TRY(get_double_range(cfg, "Optimizer.clip_norm", 0.0, 0.0, 1e9, &o->clip_norm));
    OCR_TRY(get_double_range(cfg, "Optimizer.clip_norm_global", 0.0, 0.0, 1e9, &o->clip_norm_global));
    return OCR_OK;
}

// check_files: the command reads this split's data, so its label files (or pack) must exist;
// otherwise only the section's keys are validated (eval and predict need no training set).
static ocr_status_t read_split(const OcrConfig *cfg, const char *split, DataConfig *d, int check_files) {
    memset(d, 0, sizeof *d);
    // A section set to null is absent: `-o EvalGeneral=null` drops a config's general set.
    if (!ocr_config_has(cfg, split) || cJSON_IsNull(ocr_config_node(cfg, split))) return OCR_OK;
    d->present = 1;
    OCR_TRY(ocr_config_check_keys(cfg, split, SPLIT_KEYS));
    // Dataset, transforms, sampler and loader keys are the data library's to validate.
    OcrLoaderConfig lc;
    OCR_TRY(ocr_loader_config_parse(&lc, cfg, split));
    d->batch_size = lc.sampler.scales[0].batch_size;
    d->shuffle = lc.sampler.shuffle;
    d->drop_last = lc.sampler.drop_last;
    d->num_workers = lc.num_workers;
    // Missing label files stop the run here, before anything is written.
    ocr_status_t st = OCR_OK;
    for (int i = 0; check_files && i < lc.num_label_files && !lc.pack_file; i++)
        if (!ocr_file_exists(lc.label_files[i]))
            st = ocr_set_error(OCR_ERR_NOT_FOUND, "%s: %s.dataset.label_file_list: label file %s does not exist",
                               ocr_config_source(cfg), split, lc.label_files[i]);
    struct stat sb;
    if (st == OCR_OK && check_files && lc.lmdb && !lc.pack_file &&
        (stat(lc.data_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)))
        st = ocr_set_error(OCR_ERR_NOT_FOUND, "%s: %s.dataset.data_dir: LMDB folder %s does not exist",
                           ocr_config_source(cfg), split, lc.data_dir);
    if (st == OCR_OK && check_files && lc.pack_file && !ocr_file_exists(lc.pack_file))
        st = ocr_set_error(OCR_ERR_NOT_FOUND, "%s: %s.loader.pack_file %s does not exist (ocrtrain pack writes it)",
                           ocr_config_source(cfg), split, lc.pack_file);
    ocr_loader_config_free(&lc);
    return st;
}

// ---- fine-tuning --------------------------------------------------------------------------------

// A list of pattern strings (or, with allow_bool, true / false for all / none).
static ocr_status_t read_patterns(const OcrConfig *cfg, const char *path, const char **out, int *n, int *all,
                                  int allow_bool) {
    *n = 0;
    if (all) *all = 0;
    const cJSON *v = ocr_config_node(cfg, path);
    if (!v || cJSON_IsNull(v)) return OCR_OK;
    if (allow_bool && cJSON_IsBool(v)) {
        *all = cJSON_IsTrue(v);
        return OCR_OK;
    }
    if (!cJSON_IsArray(v))
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s must be %sa list of layer-name patterns, got %s", src(cfg), path,
                             allow_bool ? "true, false or " : "", cJSON_IsString(v) ? "a string (write [\"...\"])"
                                                                                    : "another type");
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
        if (!cJSON_IsString(e) || !e->valuestring[0])
            return ocr_set_error(OCR_ERR_CONFIG, "%s: %s: entry %d is not a non-empty string", src(cfg), path, *n);
        if (*n >= RUN_MAX_PATTERNS)
            return ocr_set_error(OCR_ERR_CONFIG, "%s: %s: at most %d patterns", src(cfg), path, RUN_MAX_PATTERNS);
        out[(*n)++] = e->valuestring;
    }
    return OCR_OK;
}

static ocr_status_t read_finetune(const OcrConfig *cfg, FinetuneConfig *f) {
    memset(f, 0, sizeof *f);
    OCR_TRY(ocr_config_get_bool(cfg, "Global.pretrained_strict", 1, &f->pretrained_strict));
    // The pretrained weights' dictionary (checkpoint.h, ckpt_load_pretrained_dict): from the working
    // directory, as Global.pretrained_model.
    OCR_TRY(get_opt_string(cfg, "Global.pretrained_dict_path", &f->pretrained_dict_path));
    if (f->pretrained_dict_path && !ocr_file_exists(f->pretrained_dict_path))
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.pretrained_dict_path %s does not exist", src(cfg),
                             f->pretrained_dict_path);
    OCR_TRY(read_patterns(cfg, "Global.freeze_norm", f->freeze_norm, &f->n_freeze_norm, &f->freeze_norm_all, 1));
    OCR_TRY(ocr_config_get_bool(cfg, "Global.freeze_norm_affine", 1, &f->freeze_norm_affine));
    OCR_TRY(read_patterns(cfg, "Global.freeze_params", f->freeze_params, &f->n_freeze_params, NULL, 0));
    const cJSON *lm = ocr_config_node(cfg, "Optimizer.lr_mult");
    if (lm && !cJSON_IsNull(lm)) {
        if (!cJSON_IsObject(lm))
            return ocr_set_error(OCR_ERR_CONFIG, "%s: Optimizer.lr_mult must be an object {\"pattern\": multiplier, "
                                 "...}, e.g. {\"backbone.*\": 0.1}", src(cfg));
        const cJSON *e;
        cJSON_ArrayForEach(e, lm) {
            if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) || e->valuedouble < 0 || e->valuedouble > 1000)
                return ocr_set_error(OCR_ERR_CONFIG, "%s: Optimizer.lr_mult.\"%s\" must be a number in [0, 1000]",
                                     src(cfg), e->string);
            if (!e->string[0])
                return ocr_set_error(OCR_ERR_CONFIG, "%s: Optimizer.lr_mult: an empty pattern", src(cfg));
            if (f->n_lr_mult >= RUN_MAX_PATTERNS)
                return ocr_set_error(OCR_ERR_CONFIG, "%s: Optimizer.lr_mult: at most %d patterns", src(cfg),
                                     RUN_MAX_PATTERNS);
            f->lr_mult_pattern[f->n_lr_mult] = e->string;
            f->lr_mult[f->n_lr_mult++] = e->valuedouble;
        }
    }
    return OCR_OK;
}

// ---- the whole config --------------------------------------------------------------------------

ocr_status_t run_config_read(RunConfig *rc, const OcrConfig *cfg, int need) {
    memset(rc, 0, sizeof *rc);
    run_config_register_no_effect_keys();
    OCR_TRY(ocr_config_check_keys(cfg, "", TOP_KEYS));
    // The architecture (and the dictionary it sizes the head from) first: a config of another
    // algorithm (SAR, SRN, distillation, ...) then stops at "not supported", not at one of the
    // Global keys only that algorithm reads.
    if (!ocr_config_has(cfg, "Architecture"))
        return ocr_set_error(OCR_ERR_CONFIG, "%s: the Architecture section is missing", src(cfg));
    OcrArch arch;
    OCR_TRY(ocr_arch_from_config(&arch, cfg));
    if (ocr_config_has(cfg, "Distillation")) {
        // A distillation config already turned into its trained network's (run_config_load).
        DistillConfig *dc = malloc(sizeof *dc);
        if (!dc) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
        ocr_status_t dst = distill_config_read(dc, cfg);
        if (dst == OCR_OK && (need & RUN_NEED_TRAIN)) dst = distill_config_check_training(dc, cfg);
        free(dc);
        OCR_TRY(dst);
    }
    OCR_TRY(ocr_config_check_keys(cfg, "Global", GLOBAL_KEYS));
    int64_t v;
    OCR_TRY(get_int_range(cfg, "Global.epoch_num", 1, 1, 1000000, &rc->epoch_num));
    OCR_TRY(get_int_range(cfg, "Global.print_batch_step", 10, 1, 1000000000, &rc->print_batch_step));
    OCR_TRY(get_int_range(cfg, "Global.log_smooth_window", 20, 1, 100000, &rc->log_smooth_window));
    OCR_TRY(get_int_range(cfg, "Global.save_epoch_step", 0, 0, 1000000, &rc->save_epoch_step));
    int64_t ebs[2];
    int n = 0;
    OCR_TRY(ocr_config_get_int_list(cfg, "Global.eval_batch_step", ebs, 2, &n));
    if (n == 2) {
        rc->eval_start = ebs[0];
        rc->eval_every = ebs[1];
    } else if (n == 1) {
        rc->eval_start = 0;
        rc->eval_every = ebs[0];
    }
    if (rc->eval_start < 0 || rc->eval_every < 0)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.eval_batch_step must be [start, every] with values >= 0",
                             src(cfg));
    OCR_TRY(ocr_config_get_bool(cfg, "Global.cal_metric_during_train", 0, &rc->cal_metric_during_train));
    OCR_TRY(ocr_config_get_string(cfg, "Global.save_model_dir", "./output/rec", &rc->save_model_dir));
    if (!rc->save_model_dir[0]) return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.save_model_dir is empty", src(cfg));
    OCR_TRY(get_opt_string(cfg, "Global.pretrained_model", &rc->pretrained_model));
    OCR_TRY(get_opt_string(cfg, "Global.checkpoints", &rc->checkpoints));
    OCR_TRY(get_opt_string(cfg, "Global.character_dict_path", &rc->dict_path));
    OCR_TRY(ocr_config_get_bool(cfg, "Global.use_space_char", 0, &rc->use_space_char));
    OCR_TRY(get_int_range(cfg, "Global.max_text_length", 25, 1, 1024, &v));
    rc->max_text_length = (int)v;
    OCR_TRY(get_int_range(cfg, "Global.seed", 1024, 0, INT64_MAX, &v));
    rc->seed = (uint64_t)v;
    int use_gpu;
    OCR_TRY(ocr_config_get_bool(cfg, "Global.use_gpu", 1, &use_gpu));
    OCR_TRY(ocr_config_get_string(cfg, "Global.device", use_gpu ? "auto" : "cpu", &rc->device_name));
    ocr_device_t dev;
    if (ocr_device_parse(rc->device_name, &dev) == OCR_ERR_INVALID_ARG)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.device: %s", src(cfg), ocr_last_error());
    OCR_TRY(get_int_range(cfg, "Global.threads", 0, 0, 1024, &v));
    rc->threads = (int)v;
    OCR_TRY(get_double_range(cfg, "Global.accuracy_tolerance", 0.005, 0.0, 1.0, &rc->accuracy_tolerance));
    OCR_TRY(get_double_range(cfg, "Global.cer_tolerance", 0.005, 0.0, 1.0, &rc->cer_tolerance));
    OCR_TRY(read_compare_seeds(cfg, rc));
    OCR_TRY(get_double_range(cfg, "Global.compare_seed_sd", SEEDS_PRIOR_SD_ACC, 0.0, 0.5, &rc->compare_seed_sd));
    // Both are fractions (0.005 = half a percentage point); a value written as a percentage
    // would silently accept large regressions.
    if (rc->accuracy_tolerance > 0.1 || rc->cer_tolerance > 0.1)
        ocr_log(OCR_LOG_WARN, "%s: Global.%s %g is a fraction, i.e. %g percentage points (0.005 is half a point)",
                src(cfg), rc->accuracy_tolerance > 0.1 ? "accuracy_tolerance" : "cer_tolerance",
                rc->accuracy_tolerance > 0.1 ? rc->accuracy_tolerance : rc->cer_tolerance,
                100 * (rc->accuracy_tolerance > 0.1 ? rc->accuracy_tolerance : rc->cer_tolerance));
    OCR_TRY(ocr_config_get_bool(cfg, "Global.use_amp", 0, &rc->use_amp));
    OCR_TRY(ocr_config_get_bool(cfg, "Global.cuda_graph", 1, &rc->cuda_graph));
    OCR_TRY(ocr_config_get_bool(cfg, "Global.allow_tf32", 0, &rc->allow_tf32));
    // The CPU backend's f16/bf16 numerics are process-wide, like its thread count: the emulated
    // reference (GPU rounding bit for bit) or the BF16/FP16 hardware (kernels/backend.h).
    int exact = 0;
    OCR_TRY(ocr_config_get_bool(cfg, "Global.cpu_exact_numerics", 0, &exact));
    ocr_backend_set_cpu_exact_numerics(exact);
    // The AMP keys: the engine's validation, so the messages are the same everywhere.
    AmpConfig ac;
    OCR_TRY(amp_config_from_config(&ac, cfg));
    amp_config_free(&ac);

    OCR_TRY(ocr_config_check_keys(cfg, "Loss", LOSS_KEYS));
    static const char *const losses[] = {"CTCLoss", "MultiLoss", NULL};
    const char *loss_name;
    OCR_TRY(check_opt_name(cfg, "Loss.name", losses, &loss_name));
    if (strcmp(loss_name, "CTCLoss") == 0) {
        static const char *const ctc_keys[] = {"name", "use_focal_loss", NULL};
        OCR_TRY(ocr_config_check_keys(cfg, "Loss", ctc_keys));
    }
    OCR_TRY(ocr_config_get_bool(cfg, "Loss.use_focal_loss", 0, &rc->use_focal_loss));
    OCR_TRY(ocr_config_check_keys(cfg, "PostProcess", POST_KEYS));
    static const char *const posts[] = {"CTCLabelDecode", NULL};
    OCR_TRY(check_opt_name(cfg, "PostProcess.name", posts, NULL));
    OCR_TRY(ocr_config_check_keys(cfg, "Metric", METRIC_KEYS));
    static const char *const metrics[] = {"RecMetric", NULL};
    OCR_TRY(check_opt_name(cfg, "Metric.name", metrics, NULL));
    static const char *const indicators[] = {"acc", NULL};
    OCR_TRY(check_opt_name(cfg, "Metric.main_indicator", indicators, NULL));
    OCR_TRY(ocr_config_get_bool(cfg, "Metric.ignore_space", 1, &rc->ignore_space));
    OCR_TRY(ocr_config_get_bool(cfg, "Metric.is_filter", 0, &rc->is_filter));

    // Distributed (data parallelism): checked in every process before any work, so a bad value
    // stops all ranks alike at start-up.
    OCR_TRY(ocr_config_check_keys(cfg, "Distributed", DIST_KEYS));
    static const char *const dist_backends[] = {"auto", "single", "mpi", "nccl", NULL};
    OCR_TRY(check_opt_name(cfg, "Distributed.backend", dist_backends, &rc->dist.backend));
    OCR_TRY(get_double_range(cfg, "Distributed.bucket_mb", 25.0, 0.001, 1024.0, &rc->dist.bucket_mb));
    OCR_TRY(get_double_range(cfg, "Distributed.timeout_s", 300.0, 0.1, 86400.0, &rc->dist.timeout_s));
    OCR_TRY(ocr_config_get_bool(cfg, "Global.use_sync_bn", 0, &rc->dist.sync_bn));
    if (ocr_config_has(cfg, "Optimizer") || (need & RUN_NEED_TRAIN)) OCR_TRY(read_optimizer(cfg, &rc->optim));
    OCR_TRY(read_finetune(cfg, &rc->finetune));
    OCR_TRY(read_split(cfg, "Train", &rc->train, (need & RUN_NEED_TRAIN) != 0));
    OCR_TRY(read_split(cfg, "Eval", &rc->eval, (need & (RUN_NEED_TRAIN | RUN_NEED_EVAL)) != 0));
    // The general set rides along wherever Eval is scored (training, compare).
    OCR_TRY(read_split(cfg, "EvalGeneral", &rc->eval_general, (need & (RUN_NEED_TRAIN | RUN_NEED_EVAL)) != 0));
    if (rc->eval_general.present && !rc->eval.present)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: EvalGeneral needs an Eval section (the general set is scored beside the "
                             "target set, never alone)", src(cfg));
    if ((need & (RUN_NEED_TRAIN | RUN_NEED_TRAIN_SECTION)) && !rc->train.present)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: the Train section is missing", src(cfg));
    if ((need & RUN_NEED_EVAL) && !rc->eval.present)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: the Eval section is missing", src(cfg));
    if (rc->pretrained_model && rc->checkpoints)
        ocr_log(OCR_LOG_INFO, "%s: Global.checkpoints is set; Global.pretrained_model is not used when resuming",
                src(cfg));
    if (rc->finetune.pretrained_dict_path && !rc->pretrained_model)
        ocr_log(OCR_LOG_INFO, "%s: Global.pretrained_dict_path has no effect without Global.pretrained_model", src(cfg));
    return OCR_OK;
}

ocr_status_t run_config_load(OcrConfig **cfgp, RunConfig *rc, const char *path, const char *const *overrides,
                             int n_overrides, int need) {
    *cfgp = NULL;
    if (!path) return ocr_set_error(OCR_ERR_CONFIG, "a config is required (-c CFG)");
    run_config_register_no_effect_keys();
    OcrConfig *cfg;
    OCR_TRY(ocr_config_load(&cfg, path));
    for (int i = 0; i < n_overrides; i++) {
        ocr_status_t st = ocr_config_apply_override(cfg, overrides[i]);
        if (st != OCR_OK) {
            ocr_config_free(cfg);
            return st;
        }
    }
    // PaddleOCR's distillation configs become their trained network's config (the others and the
    // distillation losses under `Distillation`): training/distill_config.h.
    ocr_status_t st = distill_config_rewrite(cfg);
    if (st != OCR_OK) {
        ocr_config_free(cfg);
        return st;
    }
    st = run_config_read(rc, cfg, need);
    if (st != OCR_OK) {
        ocr_config_free(cfg);
        return st;
    }
    run_config_log_ignored(cfg);
    *cfgp = cfg;
    return OCR_OK;
}

int parse_memory_size(const char *text, int64_t *bytes) {
    if (!text || !*text) return 0;
    char *end;
    double v = strtod(text, &end);
    if (end == text || !(v > 0) || !isfinite(v)) return 0;
    while (*end == ' ') end++;
    double mul = 1;
    char u = (char)toupper((unsigned char)*end);
    if (u == 'K') mul = 1024.0;
    else if (u == 'M') mul = 1024.0 * 1024;
    else if (u == 'G') mul = 1024.0 * 1024 * 1024;
    else if (u == 'T') mul = 1024.0 * 1024 * 1024 * 1024;
    else if (u != '\0' && u != 'B') return 0;
    if (u != '\0') {
        end++;
        if (u != 'B') {
            if (*end == 'i' || *end == 'I') end++;
            if (*end == 'B' || *end == 'b') end++;
        }
    }
    if (*end) return 0;
    double b = v * mul;
    if (b > 9.0e18) return 0;
    *bytes = (int64_t)b;
    return 1;
}

// The application's view of a config: every key of Global, Optimizer, Loss, PostProcess,
// Metric, Train, Eval and EvalGeneral read, type- and range-checked, before anything starts.
//
// Architecture is validated by the model (ocr_arch_from_config), the transform lists by the
// data library (ocr_transforms_parse) and the AMP keys by the AMP engine
// (amp_config_from_config); run_config_load calls all three, so one call answers "is this
// config valid?" with a message that names the key (and, for an unknown key, the nearest
// known one).
#ifndef OCR_TRAINING_RUN_CONFIG_H
#define OCR_TRAINING_RUN_CONFIG_H

#include <stdint.h>

#include "core/config.h"
#include "core/device.h"
#include "core/error.h"

typedef enum { LR_COSINE = 0, LR_PIECEWISE, LR_CONST } lr_kind_t;

#define RUN_MAX_PIECES 16

typedef struct {
    lr_kind_t kind;
    double learning_rate;  // Cosine/Const: the base rate; Piecewise: values[0]
    double warmup_epoch;   // linear warm-up from 0 over round(warmup_epoch · steps_per_epoch) iterations
    int n_decay;           // Piecewise: boundaries in epochs (n_decay) and values (n_decay + 1)
    double decay_epochs[RUN_MAX_PIECES];
    double values[RUN_MAX_PIECES + 1];
} LrConfig;

typedef struct {
    int adamw;            // 0: Adam with coupled L2 (Paddle's regularizer), 1: AdamW (decoupled)
    double beta1, beta2, epsilon;
    LrConfig lr;
    double l2_factor;     // Optimizer.regularizer.factor (Adam): the "global" decay of parameters
    double weight_decay;  // AdamW's decoupled coefficient
    int one_dim_no_decay; // AdamW: one_dim_param_no_weight_decay
    char no_decay_names[8][64];  // AdamW: no_weight_decay_name (substrings of parameter names)
    int n_no_decay_names;
    double clip_norm;         // per-tensor norm clipping (ClipGradByNorm); 0: off
    double clip_norm_global;  // global norm clipping (ClipGradByGlobalNorm); 0: off
} OptimConfig;

// The split's loader settings (dataset, transforms and loader keys are validated by the data
// library's ocr_loader_config_parse; the feed reads them again from the config).
typedef struct {
    int present;  // the section exists
    int shuffle, drop_last, batch_size, num_workers;
} DataConfig;

// Fine-tuning (README "Fine-tuning PP-OCRv4"). Patterns are fnmatch(3) globs (`*` also matches
// dots) owned by the config; each must match something in the model (checked by the trainer).
#define RUN_MAX_PATTERNS 32
typedef struct {
    int pretrained_strict;      // Global.pretrained_strict (default true): an incomplete file is an error
    const char *pretrained_dict_path;  // Global.pretrained_dict_path: the weights' dictionary (NULL: the recorded one)
    int freeze_norm_all;        // Global.freeze_norm: true
    const char *freeze_norm[RUN_MAX_PATTERNS];  // Global.freeze_norm: [patterns] of batchnorm layer names
    int n_freeze_norm;
    int freeze_norm_affine;     // Global.freeze_norm_affine (default true): frozen BNs' gamma/beta frozen too
    const char *freeze_params[RUN_MAX_PATTERNS];  // Global.freeze_params: parameter-name patterns
    int n_freeze_params;
    const char *lr_mult_pattern[RUN_MAX_PATTERNS];  // Optimizer.lr_mult: {pattern: multiplier}, first match
    double lr_mult[RUN_MAX_PATTERNS];
    int n_lr_mult;
} FinetuneConfig;

typedef struct {
    // Global
    int64_t epoch_num;
    int64_t print_batch_step;
    int64_t log_smooth_window;
    int64_t eval_start, eval_every;  // eval_batch_step [start, every]; every 0: once per epoch
    int64_t save_epoch_step;
    int cal_metric_during_train;
    const char *save_model_dir;
    const char *pretrained_model;  // NULL: none
    const char *checkpoints;       // NULL: none
    const char *dict_path;         // NULL: the default charset
    int use_space_char;
    int max_text_length;
    uint64_t seed;
    const char *device_name;  // "cpu", "gpu", "auto", "cuda:N"
    int threads;              // OpenMP threads, 0: all
    int cuda_graph;           // Global.cuda_graph (default true): capture the GPU step as a CUDA graph
    int allow_tf32;           // Global.allow_tf32 (default false): TF32 tensor cores for f32 GEMMs/convs
    double accuracy_tolerance;  // compare: the paired accuracy delta's 95 % interval must lie within ±this (a fraction)
    double cer_tolerance;       // compare: the same for the paired CER delta (Global.cer_tolerance, default 0.005)
    // compare: the seeds every leg trains at (Global.compare_seeds: a count N, the seeds Global.seed,
    // +1, ..., +N-1, or a list; default 3), as compare_parse_seeds reads them ("3", "1,5,9").
    char compare_seeds[512];
    double compare_seed_sd;     // compare with one seed: the assumed seed-to-seed SD of accuracy (Global.compare_seed_sd)
    int use_amp;
    // Loss / metric
    int use_focal_loss;
    int ignore_space, is_filter;
    OptimConfig optim;
    FinetuneConfig finetune;
    DataConfig train, eval;
    // EvalGeneral (optional, Eval's schema): a general-text set scored wherever Eval is, so that
    // what fine-tuning costs outside the target data (forgetting) is reported next to the gain.
    DataConfig eval_general;
    // Distributed: data parallelism under mpirun / srun (distributed/dist.h, distributed/grad_sync.h).
    struct {
        const char *backend;  // Distributed.backend: auto (default), single, mpi, nccl
        double bucket_mb;     // Distributed.bucket_mb: gradient bucket size in MiB (25; 0.001..1024)
        double timeout_s;     // Distributed.timeout_s: longest wait for a peer before ending the job (300)
        int sync_bn;          // Global.use_sync_bn (PaddleOCR's key): BN statistics over all ranks (false)
    } dist;
} RunConfig;

// What a command needs from the config (a missing section is an error only when needed).
// TRAIN: the Train section and its data (label files or pack must exist; Eval's too, when
// present, since training evaluates); EVAL: the Eval section and its data; TRAIN_SECTION: the
// Train section for its shapes and loader settings (capacity), no data. Sections a command
// does not need have their keys validated but their files are not looked for.
enum { RUN_NEED_TRAIN = 1, RUN_NEED_EVAL = 2, RUN_NEED_TRAIN_SECTION = 4 };

// Loads the file, applies PaddleOCR-style shorthands (`--use_amp true` = -o Global.use_amp=true
// and so on, see run_config_shorthand) and overrides, then validates everything. On success
// *cfg is the loaded config (the RunConfig's strings point into it). Errors are
// OCR_ERR_CONFIG/NOT_FOUND/FORMAT with a message naming the file and key.
ocr_status_t run_config_load(OcrConfig **cfg, RunConfig *rc, const char *path, const char *const *overrides,
                             int n_overrides, int need);
// Validates an already-loaded config and fills rc.
ocr_status_t run_config_read(RunConfig *rc, const OcrConfig *cfg, int need);

// Registers the table of PaddleOCR keys that are accepted with no effect (run_config.c,
// NO_EFFECT_KEYS) with the config reader; run_config_load does it, commands that read a config
// otherwise call it first. Idempotent.
void run_config_register_no_effect_keys(void);
// One note line (INFO) per no-effect key found in cfg: "cfg.yml: note: Global.debug has no
// effect here: <why>".
void run_config_log_ignored(const OcrConfig *cfg);

// PaddleOCR's one-line AMP flags: "--use_amp", "--scale_loss", "--amp_level", "--amp_dtype",
// "--use_dynamic_loss_scaling", "--amp_custom_black_list", "--amp_custom_white_list". Returns
// the Global key ("Global.use_amp") for a flag, NULL for anything else.
const char *run_config_shorthand(const char *flag);

// The learning rate at iteration `iter` (0-based, counted over every iteration, skipped ones
// included, as Paddle's scheduler steps every iteration).
double lr_at(const LrConfig *lr, int64_t iter, int64_t steps_per_epoch, int64_t epochs);

// Parses a memory size: "16G", "16GiB", "512MB", "1.5g", plain bytes. Binary units.
int parse_memory_size(const char *text, int64_t *bytes);

#endif

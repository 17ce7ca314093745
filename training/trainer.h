// The training loop: one run of `ocrtrain train` (and of each precision in `ocrtrain compare`).
//
//   model from config → weights (Global.checkpoints: everything; Global.pretrained_model:
//   weights only) → AMP engine attached (policy, O1 cache / O2 masters) → optimizer → loop:
//     batch → normalise → forward → f32 logits → CTC (loss and gradient, times the loss scale)
//     → backward → unscale + finite check → clip → Adam on masters (skipped on overflow)
//     → scaler update → metrics.jsonl line, terminal line → evaluation every eval_batch_step
//     (best by accuracy) → checkpoints latest/best.
//
// Progress goes to the `progress` stream (stderr): one updating line on a terminal, a line
// every print_batch_step otherwise. Nothing else is printed here; errors are statuses.
#ifndef OCR_TRAINING_TRAINER_H
#define OCR_TRAINING_TRAINER_H

#include <stdint.h>
#include <stdio.h>

#include "training/run_config.h"
#include "core/config.h"
#include "core/memory.h"
#include "core/tensor.h"

typedef struct {
    const char *label;     // shown in the progress line ("fp32", "fp16-o2"); NULL: none
    FILE *progress;        // NULL: silent
    int64_t max_iters;     // stop after this many iterations in total (0: the whole schedule)
    int batch_size;        // 0: Train.loader.batch_size_per_card
    double lr_scale;       // multiplies every learning rate (linear scaling with --batch max); 0 = 1
    int final_eval;        // evaluate the final weights on the Eval split (compare)
    int save_checkpoints;  // 0: no latest/best directories (compare runs keep only metrics)
    int skip_general;      // 1: leave EvalGeneral out (compare scores it per line from the final weights)
    int steps_in_flight;   // steps the loop keeps in flight: 0 = the device's (2 on a GPU, 1 on the
                           // CPU); 2 on the CPU runs its loop as a GPU's (tests)
} TrainOptions;

typedef struct {
    int64_t iter;
    float loss, lr, scale;
    int skipped;
    int recomputed;     // overflowed attempts run again at a lower scale first (Global.amp_overflow)
    float step_seconds; // the recomputed attempts included
    float grad_norm;
    // Global.cal_metric_during_train: greedy decode of this batch against its labels
    // (RecMetric), as PaddleOCR logs it; -1 when not computed.
    float train_acc, train_norm_edit_dis;
    // MultiHead: the weighted CTC and guidance parts of loss (PaddleOCR's CTCLoss / NRTRLoss); 0 otherwise.
    float loss_ctc, loss_gtc;
    float loss_distill;  // distillation (training/distill.h): the distillation terms' weighted sum, in loss
} StepRecord;

typedef struct {
    int64_t iter;
    double acc, norm_edit_dis, cer;
} EvalRecord;

// One set's scores at one evaluation (EvalResult's figures a report compares across sets).
typedef struct {
    double acc;          // the configured metric (Metric.ignore_space, is_filter)
    double acc_exact;    // exact match
    double acc_nospace;  // equal with every ' ' removed
    double cer;
    int64_t samples;     // scored lines
    int64_t unknown_chars, unreadable, bad_lines;  // EvalPaths: lines with characters outside the
                                                   // dictionary (scored), lines not scored
} TrainSetScore;

#define TRAIN_MAX_OVERFLOW_LAYERS 16
#define TRAIN_MAX_RANKS 64

// The device a run used, for reports (training_device_prepare).
typedef struct {
    int gpu;                 // 1: a CUDA device (the fields below are filled)
    char name[256];
    int cc_major, cc_minor;
    int multiprocessors;
    int64_t total_memory, free_memory_at_start;
    int driver_version, runtime_version;
    char libraries[256];     // loaded cuBLAS / cuDNN versions
    int allow_tf32;          // f32 GEMMs/convolutions on TF32 tensor cores (Global.allow_tf32)
    char note[256];          // a precision warning for this GPU ("" when none)
} TrainingDeviceInfo;

// What a run was: its configuration as it took effect.
typedef struct {
    char amp_level[4], amp_dtype[16];
    int batch_size;             // per rank: the largest batch of any scale
    double lr_scale;
    int64_t steps_per_epoch, total_iters, train_samples;
    int64_t params;
} TrainRunConfig;

// Every step and every evaluation, in order.
typedef struct {
    StepRecord *steps;
    int64_t n_steps, cap_steps;
    EvalRecord *evals;
    int n_evals, cap_evals;
} TrainHistory;

typedef struct {
    double samples_per_s;       // steady state: steps after the first 10% (at least 1) of the run
    double median_step_s;
    double epoch_seconds;       // steps_per_epoch · median step time
    double train_seconds;
} TrainThroughput;

// What the training achieved: the final loss, the final evaluation (compare), the best one.
typedef struct {
    double final_loss;          // mean over the last min(20, n) non-skipped steps
    int64_t infeasible_samples; // CTC targets longer than the sequence (loss zeroed)
    int has_final_eval;
    double acc, norm_edit_dis, cer, eval_samples_per_s;
    int64_t eval_samples;
    double best_acc;
    int64_t best_iter;
    // With an EvalGeneral section: the target (Eval) and general (EvalGeneral) sets scored by the
    // pretrained weights before the first step (has_start: Global.pretrained_model set and not
    // resuming) and at the last evaluation (has_last, at iteration last_iter; training ends with
    // one). What fine-tuning gained on its data and what it cost on general text.
    int has_general;
    int has_start, has_last;
    int64_t last_iter;
    TrainSetScore start_target, start_general, last_target, last_general;
} TrainOutcome;

typedef struct {
    OcrMemStats stats;              // the training device's peak per category over the run
    int64_t device_tracked_bytes;   // tracked allocations on a GPU at the end of training
    int64_t device_runtime_used;    // cudaMemGetInfo total − free at the same moment (context and
                                    // libraries included; the cross-check of the tracker)
    int64_t pinned_bytes;           // page-locked host buffers of the batch upload
    // Distillation: the frozen networks' (the teacher's) weights and BN statistics (with their O1
    // cast caches) and their largest activation arena; inside the params and activations peaks
    // above, shown apart. teacher_dtype: their compute dtype (f32, or the AMP dtype).
    int64_t teacher_weights_bytes, teacher_activations_bytes;
    ocr_dtype_t teacher_dtype;
} TrainMemory;

typedef struct {
    char name[32];                  // "cpu", "cuda:0"
    TrainingDeviceInfo info;
    int cuda_graph;                 // the step was captured and replayed
    int64_t graph_captures, graph_replays;
} TrainDevice;

// Data parallelism (world_size 1: one process; the all-reduce figures are then what the
// gradient buckets would send, measured with the identity transport).
typedef struct {
    int world_size, rank;
    char backend[16];               // "single", "mpi", "nccl"
    int64_t global_batch;           // batch_size × world_size
    double global_samples_per_s;    // the sum of the ranks' steady-state throughputs
    int n_rank_samples_per_s;       // min(world_size, TRAIN_MAX_RANKS)
    double rank_samples_per_s[TRAIN_MAX_RANKS];
    int64_t allreduce_bytes_per_step;  // gradient payload per rank per step (the gradient dtype's bytes)
    int allreduce_buckets;
    double allreduce_seconds_per_step; // first bucket started → last bucket done (rank 0, mean)
    double allreduce_exposed_per_step; // of that, after the backward had ended (waiting)
    double backward_seconds_per_step;
    double comm_hidden_fraction;       // 1 − exposed / all-reduce time (1: entirely behind the backward)
    int sync_bn;                       // Global.use_sync_bn took effect (a world of more than one)
    int64_t bn_sync_bytes_per_step;    // its statistics' sums per rank and step (f64), beside the gradients
} TrainDataParallel;

typedef struct {
    int64_t skipped_steps;
    // Global.amp_overflow recompute: overflowed attempts that ran again at a lower scale (over the
    // whole run, a resumed one's included) and their time (this process's).
    int64_t recomputed_steps;
    double recompute_seconds;
    float final_scale;
    int n_overflow_layers;      // where overflows were first located, most frequent first
    char overflow_layer[TRAIN_MAX_OVERFLOW_LAYERS][128];
    int64_t overflow_count[TRAIN_MAX_OVERFLOW_LAYERS];
    int64_t cast_cache_bytes, master_bytes;  // the engine's O1 cast cache and O2 masters
} TrainAmpFigures;

// One run's result, by concern.
typedef struct {
    TrainRunConfig config;
    TrainHistory history;
    TrainThroughput throughput;
    TrainOutcome outcome;
    TrainMemory memory;
    TrainDevice device;
    TrainDataParallel dist;
    TrainAmpFigures amp;
} TrainResult;

void train_result_free(TrainResult *r);

// The gain and the forgetting in one plain sentence (outcome's start and last scores, exact-match
// accuracy in points): "From the pretrained weights, accuracy on the target set (Eval) went
// 0.612 -> 0.903 (+29.1 points) and on the general set (EvalGeneral) 0.874 -> 0.851 (-2.3
// points)." Without both start and last scores of both sets, what is known ("" with no general set).
void train_forgetting_line(const TrainOutcome *o, char *buf, size_t cap);

// Runs (or resumes) training as configured. cfg must have passed run_config_read (rc).
// Files: Global.save_model_dir/{metrics.jsonl, config.json, latest/, best/}.
ocr_status_t train_run(const OcrConfig *cfg, const RunConfig *rc, const TrainOptions *opt, TrainResult *res);

// Fine-tuning options onto a model's tables (train_run calls it after loading the weights and
// before the AMP engine and the optimizer are made): Global.freeze_norm (BN ops' bn_frozen),
// Global.freeze_norm_affine and Global.freeze_params (OcrParamInfo.frozen), Optimizer.lr_mult
// (OcrParamInfo.lr_mult, first matching pattern). A pattern that matches nothing, or freezing
// every parameter, is OCR_ERR_CONFIG naming the key.
struct OcrModel;
ocr_status_t train_apply_finetune(struct OcrModel *m, const RunConfig *rc, const OcrConfig *cfg);

// The process's data-parallel transport (distributed/dist.h), opened on first use from the launcher's
// environment and Distributed.* (backend, timeout_s); the same one for every later run.
struct OcrDist;
ocr_status_t training_dist_open(const RunConfig *rc, ocr_device_t device, struct OcrDist **out);

// Sets OpenMP threads from Global.threads (0: leave the default).
void training_set_threads(int threads);
// Resolves Global.device: "cpu", "gpu" / "cuda" (cuda:0), "cuda:N", "auto" (cuda:0 when this
// build has CUDA and a GPU is usable, else the CPU). A GPU asked for explicitly and not usable
// is OCR_ERR_NOT_FOUND (no GPU) or OCR_ERR_UNSUPPORTED (no CUDA in this build).
ocr_status_t training_resolve_device(const char *name, char *resolved, size_t cap);
// Prepares a CUDA device for a run at the given precision and describes it: makes it current,
// applies Global.allow_tf32, refuses bfloat16 below compute capability 8.0
// (OCR_ERR_UNSUPPORTED with a message) and notes that float16 brings little speed below 7.0
// (no tensor cores; logged as a warning and kept in info->note). On the CPU: info->gpu = 0.
// amp_dtype: OCR_F32 for an FP32 run.
ocr_status_t training_device_prepare(const char *device, ocr_dtype_t amp_dtype, int allow_tf32, TrainingDeviceInfo *info);

#endif

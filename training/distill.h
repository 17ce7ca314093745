// Distillation training (docs/DISTILLATION.md, "Training"): the trained network is the trainer's
// model (Metric.key, training/distill_config.h); the other networks of Architecture.Models are
// frozen teachers that this module builds, loads (`pretrained`) and runs once per step, and the
// CombinedLoss's distillation terms run as the step's extra loss (training/step.h StepExtraLoss)
// on the existing ops (kernels/ops.h, "distillation losses"), each × its weight. The trained
// network's own losses (DistillationCTCLoss / NRTRLoss / SARLoss) are the step's CTC and
// guidance losses with their weights (the rewritten config's Loss).
//
// A frozen network costs one forward pass per step: no gradient buffer, no optimizer state, no
// AMP engine. It runs an inference pass (running BN statistics, no dropout, activations released
// as soon as nothing reads them) unless a term reads its guidance head (DKD on PP-OCRv4's NRTR
// head), which exists in training passes only: then a training-mode forward with every BN frozen
// (running statistics; nothing updated) and no backward.
//
// Global.distill_teacher_cache (default false; refused with augmenting Train transforms): a frozen
// network that runs inference passes keeps each sample's CTC logits (host memory, T·C floats per
// sample, by dataset index) and skips its forward on a batch whose every sample it holds at the
// batch's shape, from the second epoch on. Exact: an inference pass is a per-sample function.
//
// Mutual learning (PP-OCRv3: Teacher and Student both with freeze_params false): every network
// with freeze_params false trains. The Metric.key network is the trainer's model; each other one
// (a peer) gets its own AMP engine (the run's settings) and optimizer (Optimizer, with the step's
// learning rate) and runs inside the step's extra loss: forward in training mode, its own
// ground-truth losses, the terms' gradients for it (DML and distance: both networks, each at its
// own loss scale), backward and update, on the CPU only (a GPU run is refused). Terms on
// backbone_out (PP-OCRv3's DistillationDistanceLoss) add their gradient to the backbone's output
// (ocr_model_set_backbone_grad).
//
// Not supported (refused at set-up, naming the key): a KL/DKD/CTC-logit term whose first network
// is frozen or whose second network trains (their ops give the first network's gradient only),
// mutual learning on a GPU. A peer's optimizer moments are not in checkpoints: a resumed run
// restarts them (its weights come from the checkpoint's <name>.* tensors).
#ifndef OCR_TRAINING_DISTILL_H
#define OCR_TRAINING_DISTILL_H

#include "core/config.h"
#include "distributed/dist.h"
#include "kernels/ops.h"
#include "training/checkpoint.h"
#include "training/distill_config.h"
#include "training/run_config.h"
#include "training/step.h"

typedef struct DistillRun DistillRun;

// From a rewritten config (its `Distillation` section); trained is the trainer's model, on
// `device` already. *out NULL (and OCR_OK) when cfg is not a distillation config.
// rc: the run's settings (a trained peer's optimizer); resume_dir: the checkpoint directory a
// resumed run reads (a trained peer's weights come from its <name>.* tensors), or NULL.
ocr_status_t distill_run_create(DistillRun **out, const OcrConfig *cfg, const RunConfig *rc, OcrModel *trained,
                                ocr_device_t device, const char *resume_dir);
void distill_run_free(DistillRun *r);
// Makes r the step's extra loss (before step_device_init).
void distill_attach(DistillRun *r, StepCtx *s);
// Data parallelism: every trained peer (mutual learning) starts from rank 0's weights, BN
// statistics and masters, has gradient buckets of its own (bucket_bytes, as the trained
// network's: its gradients are averaged over the ranks before its update) and, given bn_sync
// (Global.use_sync_bn), normalises with the world's batch statistics. Collectives: call on
// every rank, after distill_run_create, before the first step. r NULL: nothing to do.
// The networks trained beside the scored one (mutual learning) as checkpoint companions (their
// optimizer, AMP engine and dropout counter, training/checkpoint.h), at most cap; returns how
// many. r NULL: 0. A resumed run (distill_run_create's resume_dir) reads them back.
int distill_run_companions(DistillRun *r, CkptCompanion *out, int cap);
ocr_status_t distill_run_join_world(DistillRun *r, OcrDist *dist, int64_t bucket_bytes, const OcrBnSync *bn_sync);
const DistillConfig *distill_run_config(const DistillRun *r);
// The trained network's name prefix in weights files ("Student."), from a rewritten config's
// Distillation.Metric.key; 0 when cfg is not a distillation config.
int distill_weights_prefix(const OcrConfig *cfg, char *buf, size_t cap);
// A frozen network's model (NULL for the trained one and out-of-range indices).
OcrModel *distill_run_net(DistillRun *r, int i);
// The last step's value of each term (weighted), in DistillConfig.terms order; NaN for a term
// that does not run (constant: between frozen networks, or a frozen network's own loss).
double distill_run_term_value(const DistillRun *r, int term);
int distill_run_term_active(const DistillRun *r, int term);
// Frozen forward passes run and their wall time (the teacher's cost), bytes of the frozen
// networks' parameters and BN statistics, and the largest activation arena of their passes.
typedef struct {
    int64_t forwards;
    double seconds;
    int64_t params_bytes, activations_bytes;
    // Global.distill_teacher_cache: samples served from the cache and computed, the cache's host
    // bytes, and the forward time it saved (each hit at the mean forward time per sample).
    int64_t cache_hits, cache_misses, cache_bytes;
    double cache_saved_seconds;
    // Networks trained beside the trainer's model (mutual learning) and their weights' bytes.
    int peers;
    int64_t peer_params_bytes;
    // The frozen networks' compute dtype under AMP (OCR_F32: FP32) and their O1 cast caches'
    // bytes (low-precision copies of their weights, beside params_bytes).
    ocr_dtype_t frozen_dtype;
    int64_t cast_cache_bytes;
} DistillCost;
void distill_run_cost(const DistillRun *r, DistillCost *c);

// The frozen networks' memory for a step of `batch` samples of height x width (what capacity
// planning counts as the teacher's): their weights and BN statistics (with their O1 cast caches)
// and their forward passes' activation arenas (each network its own, the plan's exact bytes;
// transient within the pass, held between steps).
typedef struct {
    int frozen;                // frozen networks that run (used by a term)
    int64_t weights_bytes;     // parameters (in their AMP dtype at O2) + statistics + O1 cast caches
    int64_t activations_bytes; // their arenas at this batch
    // Networks trained beside the scored one (mutual learning): weights, gradients, statistics,
    // optimizer moments, AMP copies; and their training passes' arenas at this batch.
    int peers;
    int64_t peer_fixed_bytes, peer_activations_bytes;
} DistillPlan;
ocr_status_t distill_run_plan(DistillRun *r, int batch, int height, int width, DistillPlan *out);

// Tests: with hold on, the extra loss leaves the trained peers' backward and update out, so their
// outputs and the gradients it computed stay readable: a network's f32 CTC logits this step
// (distill_run_logits: a peer's, or a frozen one's), a peer's f32 CTC-logit gradient
// (DISTILL_OUT_CTC) and any trained network's f32 backbone-output gradient (DISTILL_OUT_BACKBONE),
// each × its weight × its loss scale; NULL otherwise.
void distill_run_hold_peers(DistillRun *r, int hold);
// The dtypes term t's op read on its last step (its first and second network's output); 0 when
// the term does not run. Under AMP they are f32 (distill_loss is black-listed) whatever dtype the
// networks' outputs came in.
int distill_run_term_dtypes(const DistillRun *r, int term, ocr_dtype_t *a, ocr_dtype_t *b);
// The low-precision dtype frozen network i's compute-heavy ops run in (its AMP engine's), or
// OCR_F32 when it runs in FP32 (O0, Global.distill_teacher_fp32, a trained network).
ocr_dtype_t distill_run_net_dtype(const DistillRun *r, int i);
const OcrTensor *distill_run_grad(const DistillRun *r, int k, distill_out_t out);
const OcrTensor *distill_run_logits(const DistillRun *r, int k);

#endif

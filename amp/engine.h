// The AMP engine attached to a model's tables: the pieces of a training step the trainer calls.
//
// It knows what it manages only through an AmpManaged description (amp/managed.h: op types
// and names, named parameter views) that the owner fills in, so the amp library stays below
// the model library (models/amp_view.h describes a model's tables).
//
//   AmpConfig cfg;  amp_config_from_config(&cfg, config);         // validates every AMP key
//   AmpEngine e;    amp_engine_init(&e, &cfg);                     // takes over cfg
//   AmpManaged mg;  ocr_amp_managed(&mg, ocr_model_ops(m), ocr_model_params(m), ocr_model_stats(m));
//   amp_engine_attach(&e, &mg);
//                   // right after the model is built, before its first plan or forward
//   per step:
//     amp_engine_begin_step(&e);                  // BN statistics snapshot, O1 cast cache
//     ocr_model_forward(m, images, 1);
//     amp_engine_after_forward(&e);               // op-call counts, activation amax every N
//     logits = amp_loss_logits(ocr_model_logits(m), &buf);          // the loss gets f32
//     ocr_ctc_loss_forward(..., dl32, ..., {.grad_scale = amp_engine_loss_scale(&e)});
//     amp_loss_dlogits(ocr_model_dlogits(m), dl32);
//     ocr_model_backward(m);
//     if (!amp_engine_check_grads(&e))            // fused unscale + finite check, location
//         for each parameter i: AdamParams p = ...; amp_engine_adam_params(&e, i, &p);
//             ocr_adam_update(&param_i, amp_engine_master(&e, i), &m_i, &v_i, &grad_i, p);
//         (or amp_engine_adam_step, which does exactly that)
//     amp_engine_end_step(&e);                    // skip bookkeeping, BN restore, scale update, log
//   or, when the step overflowed and amp_engine_can_recompute says so (Global.amp_overflow:
//   recompute), amp_engine_end_attempt(&e) and the same batch again from begin_step, with the
//   model's dropout counter set back (docs/AMP.md, "Overflowed steps: recompute or skip").
//
// Precision levels on the tables:
// - O0: nothing changes; the scaler is off; overflow checks still skip steps with inf/NaN.
// - O1: op compute dtypes from the policy; parameters stay f32; a cast cache holds the
//   low-precision copies of the weights, biases and embeddings of low-precision ops, made once
//   per step (the model reads them through amp_cast_cache_get; see docs/AMP.md).
// - O2: those parameters become low precision in the table itself (relaid out, the gradient
//   buffer follows), their f32 masters live in AmpMaster; BN/LN parameters (role NORM),
//   LearnableAffineBlock scalars (role SCALAR) and everything of f32 ops stay f32.
#ifndef OCR_AMP_ENGINE_H
#define OCR_AMP_ENGINE_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "amp/check.h"
#include "amp/managed.h"
#include "amp/policy.h"
#include "amp/scaler.h"
#include "amp/stats.h"
#include "amp/weights.h"
#include "core/config.h"
#include "kernels/ops.h"

typedef struct {
    AmpPolicy policy;
    AmpScalerConfig scaler;
    int stochastic_rounding;      // Global.amp_stochastic_rounding (O2 only)
    uint64_t seed;                // Global.seed, for stochastic rounding
    int64_t activation_stats_every;  // Global.amp_activation_stats_every (0: off)
    int overflow_recompute;       // Global.amp_overflow: 1 recompute (the default), 0 skip
} AmpConfig;

// The attempts of one step recomputed at most (then it is skipped): from the largest f32 scale a
// backoff of 0.5 needs about 2^7 of them, but a finite loss with inf/NaN gradients that 32
// halvings do not cure is not a scale problem.
#define AMP_MAX_RECOMPUTES 32

// Reads every AMP key (docs/AMP.md); an unknown Global.amp_* key, a wrong type or value is
// OCR_ERR_CONFIG naming the key. Nothing is allocated on failure.
ocr_status_t amp_config_from_config(AmpConfig *c, const OcrConfig *cfg);
// AMP off (O0, scaler off).
void amp_config_init_off(AmpConfig *c);
void amp_config_free(AmpConfig *c);

typedef struct {
    AmpConfig cfg;
    AmpScaler scaler;
    AmpCastCache cache;  // O1
    AmpMaster master;    // O2
    AmpSnapshot bn;      // BN running statistics before this step's forward
    AmpStats stats;      // layers = the op table's entries

    AmpManaged mg;       // what it manages (a copy of the owner's description)
    int attached;
    ocr_dtype_t *op_dtype;  // the compute dtype it gave each op
    int *param_op;       // owning op of each parameter (-1: none found)
    OcrTensor *param_views, *grad_views;
    OcrTensor **grad_list;
    float *grad_amax, *grad_scale;
    int *grad_nonfinite;

    int64_t step;        // optimizer steps attempted so far (the current one while in a step)
    int in_step, checked;
    AmpCheckResult last;  // of the current/last step
    int last_layer;       // op index of the first bad layer in backward order (-1)
    float last_scale_before, last_scale_after;
} AmpEngine;

// Takes over cfg (the caller does not free it).
void amp_engine_init(AmpEngine *e, AmpConfig *cfg);
void amp_engine_free(AmpEngine *e);

// Applies the policy to the described ops (each op's input is taken to be the op before it,
// build = forward order), converts parameters for O1/O2 and sets up the statistics. A pattern
// of Global.amp_fp32_layers that matches no layer is a config error. The description is
// copied. Call once, before the model's first plan or forward.
ocr_status_t amp_engine_attach(AmpEngine *e, const AmpManaged *m);

// The owning op of a parameter name: the op named like it, or like it without its last
// ".component" ("backbone.conv1.conv.weight" -> "backbone.conv1.conv"). -1 when none.
int amp_param_owner(const AmpManaged *m, const char *param_name);
// The name of op `layer` (e.g. e->last_layer, the first overflowed layer); "?" when out of range.
const char *amp_engine_layer_name(const AmpEngine *e, int layer);

ocr_status_t amp_engine_begin_step(AmpEngine *e);
// After the training forward, before the backward (op outputs are still valid).
void amp_engine_after_forward(AmpEngine *e);
static inline float amp_engine_loss_scale(const AmpEngine *e) { return amp_scaler_scale(&e->scaler); }
// After the backward: one fused pass over all gradients. Returns 1 when the step must be
// skipped (inf/NaN found); the first bad layer is e->last_layer.
int amp_engine_check_grads(AmpEngine *e);
// Fills grad_scale and the stochastic-rounding fields of an AdamParams for parameter i.
void amp_engine_adam_params(const AmpEngine *e, int i, AdamParams *p);
OcrTensor *amp_engine_master(AmpEngine *e, int i);
// Runs adam_update over every parameter unless the checked step overflowed; fill(user, i, &p)
// sets lr, betas, eps, decay and step (grad_scale and rounding are set afterwards).
// m[i], v[i]: f32 moments. Returns 1 when the update ran.
typedef void (*amp_adam_fill_fn)(void *user, int param, AdamParams *p);
int amp_engine_adam_step(AmpEngine *e, OcrTensor *m, OcrTensor *v, amp_adam_fill_fn fill, void *user);
// Ends the step: on overflow restores the BN statistics and logs the step, the layer and the
// scale before and after (warning); updates the scaler and the statistics.
void amp_engine_end_step(AmpEngine *e);

// ---- overflowed steps recomputed (Global.amp_overflow: recompute) ---------------------------------
// 1 when a step that overflowed at loss scale `scale` (after `attempts` recomputes of it) is to
// run again on the same batch at a lower scale instead of being skipped: recompute mode, a
// dynamic scaler whose scale can still come down (above Global.min_loss_scale), a finite loss
// (an inf/NaN loss is the forward's, which no loss scale cures) and attempts < AMP_MAX_RECOMPUTES.
// The same answer on every rank of a data-parallel run (it reads only reduced figures).
int amp_engine_can_recompute(const AmpEngine *e, float scale, double loss, int attempts);
// Ends an overflowed attempt that runs again, instead of amp_engine_end_step: the BN running
// statistics restored (as for a skip), the scale backed off once (amp_scaler_backoff), the
// attempt counted in stats.recomputed_steps and logged (INFO). The step counter (and with it the
// stochastic-rounding seed), the scaler's step counters and the skip statistics do not move: the
// next attempt is the step as a run starting at the lowered scale would take it.
void amp_engine_end_attempt(AmpEngine *e);
// The first bad layer in backward order of per-parameter nonfinite flags (-1: none).
int amp_engine_bad_layer(const AmpEngine *e, const int *nonfinite);
// The GPU's attempts, recorded in the host mirror when the step is collected (before the step
// itself): the backoff and the count as amp_engine_end_attempt; bad_count tensors held inf/NaN,
// layer: amp_engine_bad_layer's. The device restored the BN statistics itself.
void amp_engine_record_device_attempt(AmpEngine *e, int bad_count, int layer);

// ---- the GPU step (training/step.c, kernels/cuda/train_step.h) -------------------------------------
// On a CUDA device the check, the update, the BN restore and the scale update run on the device
// and the host learns a step's outcome later (asynchronously). This records it, in step order:
// the per-layer gradient statistics, the skip bookkeeping and warning (first bad layer), the host
// mirror of the scaler (amp_scaler_update, which reproduces the device's scale), the step count.
// nonfinite[i] / amax_stored[i]: per parameter as the fused pass left them (amax as stored,
// i.e. still scaled for low-precision gradients). Does not touch the BN statistics (the device
// restored them) or any device memory.
void amp_engine_record_device_step(AmpEngine *e, int found_inf, const int *nonfinite, const float *amax_stored);

// ---- the engine's state in a checkpoint --------------------------------------------------------------
// What a resumed run restores: the scaler's state and the engine's step counters.
typedef struct {
    AmpScalerState scaler;
    int64_t step;           // optimizer steps attempted so far (AmpEngine.step)
    int64_t skipped_steps;  // of which skipped for inf/NaN gradients
    int64_t recomputed_steps;  // overflowed attempts recomputed (not in step)
} AmpEngineState;

AmpEngineState amp_engine_state(const AmpEngine *e);
// Continues from a saved state: the scaler (amp_scaler_set_state), the step counters and the
// statistics that follow them. OCR_ERR_FORMAT for an invalid scaler state.
ocr_status_t amp_engine_restore_state(AmpEngine *e, const AmpEngineState *s);
// The step counters as members of a JSON object (a checkpoint's state.json "amp": "step",
// "skipped_steps", "recomputed_steps"), and back (OCR_ERR_FORMAT naming `source` and the key;
// "recomputed_steps" may be absent: 0, a checkpoint of a build before it). The scaler's state
// has an object of its own (amp_scaler_state_to_json / _from_json).
void amp_engine_state_to_json(const AmpEngineState *s, cJSON *obj);
ocr_status_t amp_engine_state_from_json(AmpEngineState *s, const cJSON *obj, const char *source);

// f32 logits for a loss that needs them (the GPU step, and the CPU step with an extra loss such
// as distillation; the CPU's plain CTC step reads low-precision logits directly, training/step.c):
// returns logits when f32, else casts them into *buf (a WORKSPACE tensor allocated or resized on
// demand; free it with ocr_tensor_free).
const OcrTensor *amp_loss_logits(const OcrTensor *logits, OcrTensor *buf);
// Writes the f32 loss gradient into the model's dlogits (rounded to its dtype).
void amp_loss_dlogits(OcrTensor *model_dlogits, const OcrTensor *dlogits_f32);

// Bytes each category gains or loses under this engine (for reports): the cast cache
// (PARAMS), masters (MASTER), the BN snapshot (WORKSPACE).
typedef struct {
    int64_t cast_cache_bytes, master_bytes, snapshot_bytes;
} AmpMemory;
AmpMemory amp_engine_memory(const AmpEngine *e);

#endif

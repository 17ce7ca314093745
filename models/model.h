// Recognition networks (PaddleOCR's `rec` models): backbone → neck → CTC head, built from
// the config's `Architecture` section with PaddleOCR key names.
//
//   OcrModel *m;  ocr_model_from_config(&m, cfg);          // parameters initialised
//   OcrMemPlan p; ocr_model_plan_u8(m, B, H, W, 1, &p);     // exact activation bytes, nothing allocated
//   ocr_model_forward_u8(m, batch, widths, 1);              // the loader's uint8 batch, normalised here
//     (or ocr_model_forward(m, images, 1) with images already normalised, any float dtype)
//   fill ocr_model_dlogits(m) from the loss;  ocr_model_backward(m);   // gradients accumulate
//
// Every tensor a step needs for its activations (saved activations, their gradients, the
// gradient of the logits) comes from one OCR_MEM_ACTIVATIONS allocation of exactly the
// planned size. Parameters (OCR_MEM_PARAMS), gradients (OCR_MEM_GRADS) and BN statistics
// (OCR_MEM_PARAMS, a separate buffer) are sized by their tables. Op scratch comes from the
// per-thread workspace (OCR_MEM_WORKSPACE), which the ops size themselves.
#ifndef OCR_MODELS_MODEL_H
#define OCR_MODELS_MODEL_H

#include <stdint.h>

#include "core/config.h"
#include "core/error.h"
#include "core/tensor.h"
#include "amp/weights.h"
#include "models/params.h"
#include "models/svtr/backbones.h"
#include "models/svtr/lcnetv4.h"
#include "models/svtr/pphgnetv2.h"
#include "models/svtr/multihead.h"

typedef enum {
    OCR_BACKBONE_MV1E = 0,
    OCR_BACKBONE_LCNETV3,
    OCR_BACKBONE_SVTRNET,
    OCR_BACKBONE_LCNETV4,
    OCR_BACKBONE_HGNETV2,  // PPHGNetV2_B4 text_rec (PP-OCRv5 server)
} ocr_backbone_kind_t;

typedef struct {
    char algorithm[32];  // "SVTR_LCNet" or "SVTR"
    int in_channels;
    int img_h, img_w;  // the config's input size (RecResizeImg image_shape, or Backbone.img_size)
    ocr_backbone_kind_t backbone;
    Mv1eSpec mv1e;
    LcnetSpec lcnet;
    SvtrNetSpec svtr;
    int neck_svtr;  // Neck.encoder_type: svtr (1) or reshape (0)
    SvtrNeckSpec neck;
    Lcnet4Spec lcnet4;    // PPLCNetV4 (PP-OCRv6)
    Hgnet2Spec hgnet2;    // PPHGNetV2_B4 (PP-OCRv5 server)
    int neck_light;       // MultiHead CTC Neck name lightsvtr (EncoderWithLightSVTR)
    LightSvtrSpec light;
    int head_guide;       // CTCHead use_guide: the guide layer before the FC(s) (PP-OCRv6 tiny)
    int num_classes;   // CTC classes including the blank
    int head_mid;      // Head.mid_channels (0: none)
    double fc_decay;   // Head.fc_decay
    MultiHeadSpec multihead;  // Head.name MultiHead: the guidance branch (kind NONE: a CTCHead)
    uint64_t seed;     // Global.seed
    char dict_path[1024];
} OcrArch;

// Reads Architecture (and Global.character_dict_path / use_space_char / seed, the input size
// from the Train/Eval transforms). Unknown keys and unsupported values are config errors that
// name the key and the file.
ocr_status_t ocr_arch_from_config(OcrArch *arch, const OcrConfig *cfg);
// The fused PP-OCRv4 recognizer (PPLCNetV3 0.95 deploy + SVTR neck 120 + CTC) with `classes`.
void ocr_arch_ppocrv4_deploy(OcrArch *arch, int classes);
// Classes from a dictionary file: blank + lines (+ space). -1 on error (message set).
int ocr_dict_num_classes(const char *path, int use_space_char);

typedef struct OcrModel OcrModel;

ocr_status_t ocr_model_create(OcrModel **out, const OcrArch *arch);
ocr_status_t ocr_model_from_config(OcrModel **out, const OcrConfig *cfg);
void ocr_model_free(OcrModel *m);

const OcrArch *ocr_model_arch(const OcrModel *m);

// Moves the model to `device` (a model is created on the CPU): parameters, their gradients and
// the BN statistics go there, and every later pass plans and allocates its activation arena
// there. Call it before amp_engine_attach (the AMP engine's cast cache, masters and snapshots
// are made on the parameters' device) and before the first pass. A CUDA device this build or
// machine does not have is OCR_ERR_UNSUPPORTED / OCR_ERR_NOT_FOUND. Weights save, load and
// fusion work on a model on any device (through host copies).
ocr_status_t ocr_model_to_device(OcrModel *m, ocr_device_t device);
ocr_device_t ocr_model_device(const OcrModel *m);
OcrParamTable *ocr_model_params(OcrModel *m);
OcrParamTable *ocr_model_stats(OcrModel *m);
OcrOpTable *ocr_model_ops(OcrModel *m);
// The built layers, read by exporters that walk the network (models/onnx_export.c); NULL for a
// part this network does not have (another backbone, Im2Seq instead of the SVTR neck).
const Mv1e *ocr_model_layers_mv1e(const OcrModel *m);
const Lcnet *ocr_model_layers_lcnet(const OcrModel *m);
const SvtrNeck *ocr_model_layers_neck(const OcrModel *m);
const CtcHead *ocr_model_layers_head(const OcrModel *m);
// PP-OCRv6's parts: PPLCNetV4, the LightSVTR neck, the tiny's CTC guide layer (NULL when absent).
const Lcnet4 *ocr_model_layers_lcnet4(const OcrModel *m);
const LightSvtr *ocr_model_layers_light(const OcrModel *m);
const CtcGuide *ocr_model_layers_guide(const OcrModel *m);
const Hgnet2 *ocr_model_layers_hgnet2(const OcrModel *m);  // PPHGNetV2_B4 (PP-OCRv5 server), else NULL
int64_t ocr_model_param_count(const OcrModel *m);

// Sets the compute dtype of every op whose name matches the fnmatch(3) pattern (and whose
// type matches `type`, when not NULL). Returns the number of ops changed.
int ocr_model_set_compute_dtype(OcrModel *m, const char *pattern, const char *type, ocr_dtype_t dtype);

typedef struct {
    int batch, height, width, training;
    int seq_len, classes;
    int64_t params_bytes, grads_bytes, stats_bytes;
    int64_t activations_bytes;  // exactly what a real step allocates (OCR_MEM_ACTIVATIONS)
    double flops;               // forward FLOPs for the whole batch
    int input_u8;               // planned for ocr_model_forward_u8 (the normalised batch is an activation)
} OcrMemPlan;

// Plans one step (forward, and backward when training) without allocating anything.
// A size the network cannot take (too small, wrong for SVTRNet's positional embedding, a
// map that is not 1 row high at the neck) is OCR_ERR_INVALID_ARG with a message.
// This plans ocr_model_forward with float images of the dtype the last such forward used (f32
// at first); ocr_model_plan_u8 plans ocr_model_forward_u8.
ocr_status_t ocr_model_plan(OcrModel *m, int batch, int height, int width, int training, OcrMemPlan *plan);
ocr_status_t ocr_model_plan_u8(OcrModel *m, int batch, int height, int width, int training, OcrMemPlan *plan);

// Forward pass; training selects BN batch statistics, dropout and the training-form pool.
// images (B, H, W, C) of any float dtype, on the model's device (the parameters' device; a
// batch elsewhere is OCR_ERR_INVALID_ARG). A pass plans itself first when its shape, dtype or
// mode differs from the last plan.
ocr_status_t ocr_model_forward(OcrModel *m, const OcrTensor *images, int training);
// The same from the loader's batch (data/loader.h OcrBatch): images (B, H, W, C) uint8 and
// widths (B) int32 (each sample's resized width; NULL: no padding), both on the model's
// device. The batch is normalised on that device (kernels/input.h) into the activation arena,
// in the first layer's compute dtype: (p/255 − 0.5)/0.5 bit-identical to PaddleOCR's float32
// recipe for columns x < widths[b], and exactly 0 — PaddleOCR's pad value — for x >= widths[b]
// (the loader pads with byte 128 there). Planned by ocr_model_plan_u8; the input gradient
// (ocr_model_want_input_grad) is that of the normalised batch.
ocr_status_t ocr_model_forward_u8(OcrModel *m, const OcrTensor *images, const OcrTensor *widths, int training);
const OcrTensor *ocr_model_logits(const OcrModel *m);  // (B, T, classes)
const OcrTensor *ocr_model_probs(const OcrModel *m);   // softmax (inference passes only)
// The gradient of the loss with respect to the logits (training passes): fill it, then backward.
OcrTensor *ocr_model_dlogits(OcrModel *m);
// MultiHead (arch.multihead.kind != NONE): the guidance branch runs in training passes only, on
// the labels given before each one (models/svtr/multihead.h: labels (B, max_len) CTC ids,
// zero-padded, lengths (B), max_len = Global.max_text_length). Its logits (B, T, vocab), the
// loss targets (B, T) int32 and the gradient to fill sit on the model's device after the
// forward; ocr_model_backward sums both branches' gradients into the backbone. Inference and
// evaluation passes run the CTC branch only.
ocr_status_t ocr_model_set_guide_labels(OcrModel *m, const int32_t *labels, const int32_t *lengths, int batch,
                                        int max_len);
// SAR guidance (PP-OCRv3): the batch's valid ratios (B) in (0, 1] for the next training pass
// (the loader's valid_ratios); a no-op for the NRTR branch. See guide_set_valid_ratios.
ocr_status_t ocr_model_set_guide_valid_ratios(OcrModel *m, const float *valid_ratios, int batch);
// A training batch as the guidance branch needs it, in one call (the training step's): its labels
// and lengths as for ocr_model_set_guide_labels, and each sample's resized width of the batch's
// `width` columns (widths (B), the loader's), from which the SAR branch's valid ratios
// min(1, widths[i] / width) are formed. All on the host; a no-op for a model without MultiHead.
ocr_status_t ocr_model_set_guide_batch(OcrModel *m, const int32_t *labels, const int32_t *lengths,
                                       const int32_t *widths, int batch, int max_len, int width);
const OcrTensor *ocr_model_guide_logits(const OcrModel *m);
const OcrTensor *ocr_model_guide_targets(const OcrModel *m);
OcrTensor *ocr_model_guide_dlogits(OcrModel *m);
// NRTRLoss's settings for cross_entropy_forward/_backward (smoothing, ignored padding id).
CrossEntropyParams ocr_model_guide_loss_params(const OcrModel *m, float grad_scale);
// Accumulates parameter gradients (allocates the gradient buffer on first use).
ocr_status_t ocr_model_backward(OcrModel *m);
// Distillation on backbone features (PaddleOCR's backbone_out): the backbone's output map
// (B, 1, W, C) of the last training pass (NULL otherwise), and a gradient of it (its shape, any
// float dtype, caller-owned) that the next ocr_model_backward adds to what the neck and the
// guidance branch send the backbone, then forgets. Not for a network whose backbone gets no
// gradient (use_guide without a MultiHead): there it is dropped.
const OcrTensor *ocr_model_backbone_out(const OcrModel *m);
void ocr_model_set_backbone_grad(OcrModel *m, const OcrTensor *g);
// Also compute the gradient of the images in backward (part of the plan; off by default).
void ocr_model_want_input_grad(OcrModel *m, int on);
// Training passes: dlogits (ocr_model_dlogits) is the logits' own memory, so the pass needs one
// B·T·classes buffer less (part of the plan; off by default). For an owner whose loss writes its
// gradient over the logits and reads them no more once it has (the CPU step's CTC loss); the
// logits' values are then gone.
void ocr_model_share_dlogits(OcrModel *m, int on);
// (B, H, W, C) in the images' dtype after a backward (NULL when not wanted, or with use_guide
// and no MultiHead: then nothing reaches the backbone).
const OcrTensor *ocr_model_input_grad(const OcrModel *m);
// Inference passes release every activation once nothing reads it (the plan reflects that),
// keeping only the logits and probabilities. With keep on they keep everything, so
// ocr_model_op_output can show any op's output (debugging, parity checks).
void ocr_model_keep_activations(OcrModel *m, int on);
// An op's output from the last training pass or kept inference pass (NULL otherwise).
const OcrTensor *ocr_model_op_output(const OcrModel *m, const char *op_name);
// The step counter that seeds dropout (one increment per training forward); saved and restored
// with a training state so a resumed run draws the same masks.
uint64_t ocr_model_get_step(const OcrModel *m);
void ocr_model_set_step(OcrModel *m, uint64_t step);

// Sets every BN running statistic to the batch statistics of `images` (one training-mode
// forward with momentum 0; parameters untouched, dropout as in training). For tests and for
// re-estimating statistics, e.g. before fusing rep layers.
ocr_status_t ocr_model_calibrate_bn(OcrModel *m, const OcrTensor *images);

// AMP O1 (amp/engine.h): ops read the low-precision copies of the cast cache (AmpEngine.cache
// after amp_engine_attach) instead of the f32 parameters: conv/linear weights and biases and
// embeddings of ops that run in low precision. Gradients still go to the f32 parameters. A
// cache made stale by an optimizer step is refreshed from the parameters before the next pass
// reads it (so evaluation between steps sees the current weights). The cache must be built
// for this model's parameter table (count checked; OCR_ERR_INVALID_ARG otherwise) and outlive
// its use; NULL detaches it.
ocr_status_t ocr_model_set_cast_cache(OcrModel *m, AmpCastCache *cache);

// Per-op wall time (OcrOpInfo.time_fwd / time_bwd) accumulates while profiling is on.
void ocr_model_set_profile(OcrModel *m, int on);
// Called during ocr_model_backward each time an op's backward has finished, with the op's index
// in ocr_model_ops (OcrParamInfo.op names the op that owns a parameter): from then on that op's
// parameter gradients are complete. Data parallelism starts a bucket's all-reduce from here
// while the rest of the backward runs. NULL: no hook. A plain function pointer so the model
// knows nothing of who listens.
typedef void (*ocr_grad_ready_fn)(void *user, int op);
void ocr_model_set_grad_ready_hook(OcrModel *m, ocr_grad_ready_fn fn, void *user);
// Synchronised batch norm for the training passes from the next forward on: every BN in
// training mode normalises with the statistics of the whole world, summed through `sync`
// (kernels/ops.h; it must outlive its use). NULL: each rank's own statistics (the default).
void ocr_model_set_bn_sync(OcrModel *m, const OcrBnSync *sync);
void ocr_model_reset_profile(OcrModel *m);
// Activation-arena counters of the last pass: peak and live bytes.
void ocr_model_arena_usage(const OcrModel *m, int64_t *peak, int64_t *live);

// Training form → deploy form: every LearnableRepLayer fused into one k×k conv with bias
// (BN folded with its running statistics); everything else copied by name. PPHGNetV2_B4 has no
// rep layers: its deploy form copies everything but the unused classifier (last_conv, fc).
ocr_status_t ocr_model_fuse(OcrModel **deploy, const OcrModel *train);

// Fine-tuning: freezes the BN statistics of every batchnorm op whose name matches the fnmatch(3)
// pattern (NULL: all of them). A frozen BN normalises training passes with its running
// statistics and never updates them (nn.h, "batch norm"). Returns the number of ops matched;
// on_off 0 unfreezes them.
int ocr_model_freeze_norm(OcrModel *m, const char *pattern, int on_off);

// The weights on disk (saving, strict and partial loading, the load report): models/weights_io.h,
// included here so that every user of the network has them.
#include "models/weights_io.h"

#endif

// Checkpoints: a directory (save_model_dir/latest, save_model_dir/best) holding
//   model.safetensors      parameters and BN statistics, by name: the weights themselves, so
//                          under AMP O2 the f32 master weights (the working f16/bf16 copy is
//                          their rounding); otherwise the parameters in their dtype
//   optimizer.safetensors  Adam moments ("moment1.<name>", "moment2.<name>") and, under AMP
//                          O2, the working copy ("working.<name>", its dtype), so a resumed run
//                          continues bit for bit even with stochastic rounding. Checkpoints
//                          written before this layout hold "master.<name>" here instead; they
//                          still resume.
//   state.json             step, epoch, loader position, optimizer update count, loss scaler,
//                          dropout step, AMP counters, seed, best accuracy (schema below)
//   model.dict.txt         the dictionary the head was trained with (a copy of
//                          Global.character_dict_path; the default charset's lines without one),
//                          read when fine-tuning from it with another dictionary
// All four are written into "<dir>.tmp", then "<dir>" is renamed to "<dir>.old", "<dir>.tmp"
// to "<dir>", and "<dir>.old" removed, so a kill at any point leaves either the previous or
// the new checkpoint whole; a reader that finds no "<dir>" falls back to "<dir>.old".
#ifndef OCR_TRAINING_CHECKPOINT_H
#define OCR_TRAINING_CHECKPOINT_H

#include <stdint.h>

#include "amp/engine.h"
#include "training/optim.h"
#include "core/error.h"
#include "models/model.h"
#include "models/weights_names.h"

#define CKPT_STATE_VERSION 1

typedef struct {
    int64_t iter;            // training iterations done (skipped ones included)
    int64_t epoch;           // epoch of the next batch (0-based)
    int64_t batch_in_epoch;  // next batch of that epoch
    int64_t updates;         // optimizer updates applied
    uint64_t model_step;     // the model's training-forward counter (dropout draws)
    uint64_t seed;
    // The AMP engine's own state (loss scaler, step counters): amp/engine.h writes and reads it.
    AmpEngineState amp;
    char amp_level[4];       // "O0", "O1", "O2"
    char amp_dtype[16];      // "float32", "float16", "bfloat16"
    double best_acc;         // -1 when no evaluation yet
    int64_t best_iter;
    double last_loss;
    // Data parallelism: the world that wrote it and its global batch (per-rank batch × world
    // size; the sampler position batch_in_epoch counts global batches of that size). 0 in a
    // state written before they were recorded (one process).
    int64_t world_size, global_batch;
} CkptState;

// Writes a checkpoint directory (see above).
ocr_status_t ckpt_save(const char *dir, const OcrModel *m, const Optimizer *opt, AmpEngine *amp, const CkptState *s);

// A network trained beside the model (distillation's mutual learning), whose weights the model's
// weights file holds under the network's prefix (ocr_model_set_weights_companions): its training
// state goes into the same checkpoint directory, written and renamed with it, as
//   companion.<name>.optimizer.safetensors  its Adam moments and, under AMP O2, its f32 masters
//                                           ("master.<param>": the weights file holds its working
//                                           copy), "updates" in the metadata
//   companion.<name>.state.json             its AMP engine's state (loss scaler, counters) and
//                                           its dropout counter
typedef struct {
    const char *name;             // "Teacher": Architecture.Models' key
    Optimizer *opt;
    AmpEngine *amp;
    const OcrParamTable *params;  // the network's parameters (their names and shapes)
    uint64_t model_step;          // its dropout counter (ocr_model_get_step)
} CkptCompanion;
ocr_status_t ckpt_save_with_companions(const char *dir, const OcrModel *m, const Optimizer *opt, AmpEngine *amp,
                                       const CkptState *s, const CkptCompanion *comp, int ncomp);
// 1 when the checkpoint directory holds companion `name`'s training state.
int ckpt_has_companion(const char *dir, const char *name);
// Restores companion c's optimizer, masters and AMP state, and sets c->model_step; the weights
// themselves are read with the model's (ocr_model_load_weights under the prefix) first.
ocr_status_t ckpt_load_companion(const char *dir, CkptCompanion *c);

// Resolves a checkpoint given as a directory, or as a path to a file inside one, or as the
// PaddleOCR-style prefix ".../latest" (a directory). *real receives the directory to read
// (the ".old" fallback when only that exists). NOT_FOUND when there is none.
ocr_status_t ckpt_resolve(const char *path, char *real, size_t cap);
ocr_status_t ckpt_load_state(const char *dir, CkptState *s);
// The optimizer moments (and masters, when amp has them). Shapes must match.
ocr_status_t ckpt_load_optimizer(const char *dir, Optimizer *opt, AmpEngine *amp, const OcrParamTable *params);
// The same for a model whose weights file names its tensors weights_prefix + name (a
// distillation run's trained network, "Student.": its O2 masters are read under that name).
ocr_status_t ckpt_load_optimizer_prefixed(const char *dir, Optimizer *opt, AmpEngine *amp, const OcrParamTable *params,
                                          const char *weights_prefix);

// The weights file to read for --weights / Global.pretrained_model: a .safetensors file, or
// model.safetensors inside a checkpoint directory.
ocr_status_t ckpt_weights_path(const char *path, char *out, size_t cap);

// Weights only, for fine-tuning (PaddleOCR's load_pretrained_params): every tensor of the model
// present in the file with the same shape is copied (converted to the table's dtype) and
// *report says what was loaded, missing, of another shape and unexpected (models/model.h).
// strict (Global.pretrained_strict, the default): a file that does not cover the model exactly
// is OCR_ERR_FORMAT naming the first missing / mismatched / unexpected tensor with the counts,
// and the model is left as it was; not strict: one warning with the counts and the tensors that
// did not load keep their initial values. No tensor matching at all is an error either way.
//
// Another dictionary (fine-tuning a head for other characters): when the weights' dictionary is
// known and differs from the model's (Architecture's Global.character_dict_path +
// use_space_char), the head's per-class tensors (models/head_remap.h: the CTC classifier, NRTR's
// and SAR's embeddings and output layers) are rebuilt by character: kept characters keep their
// trained entries, new ones start from the init rule of head_remap.c, dropped ones are reported;
// they count as loaded, so a strict load whose only mismatches they explain succeeds, and
// report->dict holds the counts and the characters (also logged). The weights' dictionary is
// dict_path (Global.pretrained_dict_path) or else the one recorded next to the file: X.dict.txt
// for X.safetensors / X.pdparams (what `ocrtrain import` writes; model.dict.txt in a checkpoint
// directory, written by ckpt_save). The head's class count tells whether it had the space class.
// A dictionary whose line count fits no head is OCR_ERR_FORMAT with both counts. Without a known
// dictionary a head of another class count is OCR_ERR_CONFIG naming Global.pretrained_dict_path
// when strict (a warning naming it otherwise; the head keeps its initial values).
ocr_status_t ckpt_load_pretrained_dict(OcrModel *m, const char *path, const char *dict_path, int strict,
                                       OcrLoadReport *report);
// The same, and *names (may be NULL) receives the CTC-only <-> MultiHead mapping the load used
// (models/weights_names.h): CTC-only weights (an ONNX import) load into a MultiHead config (PaddleOCR's
// v4/v5/v6 training configs) with the guidance branch kept at its initialisation and not counted as
// missing, so a strict load accepts it while the CTC branch must be complete; a MultiHead file loads
// into a CTC-only config with its guidance branch dropped. Both are logged with their counts.
ocr_status_t ckpt_load_pretrained_names(OcrModel *m, const char *path, const char *dict_path, int strict,
                                        OcrLoadReport *report, OcrWeightsNames *names);
// The same with no dictionary named (the recorded one, if any).
ocr_status_t ckpt_load_pretrained(OcrModel *m, const char *path, int strict, OcrLoadReport *report);

#endif

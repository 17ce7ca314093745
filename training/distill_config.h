// PaddleOCR's distillation configs (Architecture.name DistillationModel, algorithm Distillation;
// Loss CombinedLoss; PostProcess DistillationCTCLabelDecode; Metric DistillationMetric), read and
// checked before any work (docs/DISTILLATION.md, "Training").
//
// A distillation config names its sub-networks under Architecture.Models (Teacher, Student,
// Student2, ...: each a recognizer section with pretrained / freeze_params / return_all_feats)
// and lists losses between them. run_config_load turns it into the config of the network the run
// trains and evaluates (Metric.key, PaddleOCR's DistillationMetric key, "Student" by default), so
// every command (train, eval, predict, export, info, capacity) sees that network as a plain
// recognizer; the original sections move, unchanged, under a top-level `Distillation` section,
// from which the trainer reads the other networks and the distillation terms:
//   Architecture ← Architecture.Models.<key> (minus pretrained, freeze_params, return_all_feats)
//   Loss         ← its ground-truth losses (DistillationCTCLoss, + DistillationNRTRLoss or
//                  DistillationSARLoss for a MultiHead) as CTCLoss or MultiLoss with their weights
//   PostProcess  ← CTCLabelDecode;  Metric ← RecMetric (main_indicator, ignore_space, is_filter)
//   Distillation ← {Architecture, Loss, PostProcess, Metric} as written
// A config that already has `Distillation` (the one a run saves) is read as it is.
#ifndef OCR_TRAINING_DISTILL_CONFIG_H
#define OCR_TRAINING_DISTILL_CONFIG_H

#include "core/config.h"
#include "core/error.h"
#include "kernels/ops.h"
#include "models/model.h"

#define DISTILL_MAX_NETS 4
#define DISTILL_MAX_TERMS 24

// The kind of one loss term (an entry of Loss.loss_config_list, one per model pair or name).
typedef enum {
    DISTILL_DML = 0,   // DistillationDMLLoss (ocr_dml_loss_*)
    DISTILL_KL,        // DistillationKLDivLoss (ocr_kl_div_loss_*)
    DISTILL_DKD,       // DistillationDKDLoss (ocr_dkd_loss_*)
    DISTILL_CTC_LOGITS,  // DistillCTCLogits (KLCTCLogits "mean": ocr_ctc_logits_kl_*)
    DISTILL_DISTANCE,  // DistillationDistanceLoss (ocr_distance_loss_*)
    DISTILL_GT_CTC,    // DistillationCTCLoss: a network's own CTC loss
    DISTILL_GT_SAR,    // DistillationSARLoss
    DISTILL_GT_NRTR,   // DistillationNRTRLoss
} distill_term_kind_t;

// Which output a term reads: head_out's "ctc" logits, the guidance head's ("gtc" for NRTR,
// "sar" for SAR), or backbone_out.
typedef enum { DISTILL_OUT_CTC = 0, DISTILL_OUT_GUIDE, DISTILL_OUT_BACKBONE } distill_out_t;

typedef struct {
    distill_term_kind_t kind;
    char path[128];  // "Loss.loss_config_list.3.DistillCTCLogits" (messages)
    char name[64];   // the entry's `name` (PaddleOCR's log key), or its class
    double weight;
    int a, b;        // networks (indices): the pair [a, b] (a first, as in model_name_pairs), or a alone
    distill_out_t out;
    int use_log;                 // DML
    double temperature;          // KL, DKD (1.0), CTC logits (0.5)
    double alpha, beta;          // DKD
    int masked;                  // KL with multi_head: the NRTR non-pad mask
    ocr_distance_mode_t mode;    // distance
} DistillTerm;

typedef struct {
    char name[32];  // the key under Architecture.Models
    int frozen;     // freeze_params
    int return_all_feats;
    char pretrained[1024];  // "" when none
    OcrArch arch;
} DistillNet;

typedef struct {
    int enabled;
    int nnets;
    DistillNet nets[DISTILL_MAX_NETS];
    int nterms;
    DistillTerm terms[DISTILL_MAX_TERMS];
    int trained;             // Metric.key: the network the run trains, evaluates and saves as best
    int decode[DISTILL_MAX_NETS];  // PostProcess.model_name: networks decoded (PaddleOCR logs each)
    int ndecode;
} DistillConfig;

// 1 when cfg is a distillation config, in either form (as written, or rewritten with its
// `Distillation` section).
int distill_config_is(const OcrConfig *cfg);
// Validates a distillation config as written and rewrites it in place into the trained
// network's config (above). Not a distillation config, or one already rewritten: nothing
// changes. Every refusal names the key: an unknown loss, a loss naming a network or a head that
// does not exist, networks with different dictionaries (their class counts, and the
// model.dict.txt recorded next to a `pretrained` checkpoint), a frozen network named by
// Optimizer.lr_mult or Global.freeze_params (the optimizer's parameter groups), Metric.key
// naming a frozen network.
ocr_status_t distill_config_rewrite(OcrConfig *cfg);
// Reads the `Distillation` section of a rewritten config (dc->enabled 0 when there is none).
ocr_status_t distill_config_read(DistillConfig *dc, const OcrConfig *cfg);
// What the trainer cannot do yet (OCR_ERR_UNSUPPORTED naming the key): a KL / DKD / CTC-logit
// term whose first network is frozen or whose second network trains too. Also Global.distill_teacher_cache with an augmenting Train
// transform (OCR_ERR_CONFIG). Checked by run_config_read for a training command.
ocr_status_t distill_config_check_training(const DistillConfig *dc, const OcrConfig *cfg);
// Index of a network by name, -1 when absent.
int distill_net_index(const DistillConfig *dc, const char *name);
const char *distill_term_class(distill_term_kind_t k);

#endif

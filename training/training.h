// The training library's public header: what the command line (cli/) and any other front end
// uses. Each header below owns one job; a front end includes this one.
//
//   run_config.h    configs with PaddleOCR's keys validated into a RunConfig (every key named on error)
//   trainer.h       train_run: one run of training (or a resumed one), its TrainResult by concern
//   evaluate.h      every Eval line scored (paths: in shape, widened, squeezed; unreadable counted)
//   inference.h     a model with weights for evaluation and prediction
//   predict.h       `predict`: inputs collected, batched as PaddleOCR's predictor, decoded
//   compare.h       regression runs: legs × seeds, resumable, judged with the seed-aware verdict
//   report.h        report.json / report.md / report.html of a comparison, and its verdict
//   sensitivity.h   the layers AMP hurts, ranked, and the ones to keep in FP32
//   capacity_run.h  the largest batch per precision, planned and checked
//   data_scan.h     the datasets through the loader: counts, skips, speed
//   model_info.h    the model summary and the AMP dtype of every op
//   pack_section.h  the packed cache and PaddleOCR LMDB export of a section's data
//   import.h        PaddleOCR's ONNX and .pdparams weights into safetensors
//   export.h        ONNX and .pdparams for PaddleOCR, RapidOCR and onnxruntime
//   eval_tsv.h      the per-line TSV of an evaluation
//   feed.h          loader batches for training and evaluation
//   runtime.h       thread-runtime defaults for training on few cores
#ifndef OCR_TRAINING_TRAINING_H
#define OCR_TRAINING_TRAINING_H

#include "training/capacity_run.h"
#include "training/compare.h"
#include "training/data_scan.h"
#include "training/eval_tsv.h"
#include "training/evaluate.h"
#include "training/export.h"
#include "training/feed.h"
#include "training/import.h"
#include "training/inference.h"
#include "training/model_info.h"
#include "training/pack_section.h"
#include "training/predict.h"
#include "training/report.h"
#include "training/run_config.h"
#include "training/runtime.h"
#include "training/sensitivity.h"
#include "training/trainer.h"

#endif

// Fine-tuning with another dictionary: the head's per-class tensors carried over by character.
//
// A recognizer's last layers have one entry per class along one axis: the CTC classifier's weight
// columns and bias (blank at 0, then the dictionary's characters), and in a MultiHead network the
// guidance branch's token embedding and output projection (NRTR: <pad>/<unk>/<s>/</s> first, the
// characters from 4; SAR: the characters first, then <UKN>, <BOS/EOS>, <PAD>). When pretrained
// weights were trained with dictionary A and the model is built for dictionary B, these tensors
// are rebuilt entry by entry: a character of B that A has takes A's entry, bit for bit; the
// special entries map to themselves (those before the characters by position, those after them
// by position from the end); a character A lacks is initialised (the rule in head_remap.c); a
// character of A that B lacks is dropped. Everything is reported (OcrHeadRemapReport).
//
// Classes are matched by their strings (the dictionary's lines, so a line of several code points
// matches too); a string present several times matches occurrence by occurrence (en_dict.txt's
// " " line and the space use_space_char appends: the first to the first, the second to the
// second).
//
// This module knows names and layouts only: loading dictionaries and files is the caller's
// (training/checkpoint.c).
#ifndef OCR_MODELS_HEAD_REMAP_H
#define OCR_MODELS_HEAD_REMAP_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

// A per-class tensor: its name in our parameter tables, the axis that indexes the classes, and
// the special entries before and after the characters on that axis. The length of that axis is
// pre + (C − 1) + post for a dictionary of C CTC classes (blank included).
typedef struct {
    const char *name;
    int axis;       // 0 (bias, embedding) or 1 (a linear weight, (in, out))
    int pre, post;  // special entries before / after the characters
    int bias;       // an additive logit bias (the init rule lowers its new entries)
} OcrClassTensor;

// 1 and *out filled when `name` is a per-class tensor of one of our heads (CTC with or without
// mid_channels, MultiHead CTC, NRTR and SAR guidance branches); 0 otherwise.
int ocr_head_class_tensor(const char *name, OcrClassTensor *out);

// The number of CTC classes (blank included) a per-class tensor's class axis of length `len`
// stands for; < 1 when it cannot be one.
static inline int ocr_class_tensor_classes(const OcrClassTensor *ct, int64_t len) {
    return (int)(len - ct->pre - ct->post + 1);
}

// How the model's classes come from the weights' classes.
typedef struct {
    int n_old, n_new;  // CTC classes of the weights and of the model, blank included
    int *src;          // [n_new]: the weights' class of each model class (src[0] = 0, the blank), -1: new
    int *kept_old;     // [n_old]: 1 when a model class takes the weights' class
    int kept, added, dropped, moved;  // characters (the blank excluded); moved: kept at another index
} OcrClassMap;

// Matches classes[1..n) of both dictionaries by string (classes[0] is the blank, mapped to the
// blank). OCR_ERR_OOM only.
ocr_status_t ocr_class_map_build(OcrClassMap *map, const char *const *old_classes, int n_old,
                                 const char *const *new_classes, int n_new);
void ocr_class_map_free(OcrClassMap *map);
// The same classes in the same order: nothing to remap.
int ocr_class_map_is_identity(const OcrClassMap *map);

// Builds one per-class tensor of the model from the weights' one. `old` (f32, C order) has
// old_shape; `out` (f32, C order) has new_shape and holds the model's current (initial) values
// on entry, which stay only where the rule below has no data (a weights file without any
// character). Every other axis must be equal. OCR_ERR_FORMAT naming the tensor when the shapes do
// not fit the map.
ocr_status_t ocr_head_remap_tensor(const OcrClassTensor *ct, const OcrClassMap *map, const float *old, int ndim,
                                   const int64_t *old_shape, float *out, const int64_t *new_shape);

// What a load with another dictionary did, for the load report (models/weights_io.h) and its log.
#define OCR_REMAP_LIST 20          // characters listed of each kind
#define OCR_REMAP_LIST_BYTES 512   // their text (20 entries of at most 19 bytes fit)
typedef struct {
    int applied;                   // the per-class tensors were rebuilt by character
    int old_classes, new_classes;  // CTC classes, blank included
    int kept, added, dropped, moved;
    int tensors;                   // per-class tensors rebuilt
    char dict_source[512];         // where the weights' dictionary came from
    // The first OCR_REMAP_LIST characters of each kind, in dictionary order, separated by
    // spaces (the space class is written <space>, a class longer than 16 bytes cut with "…").
    char kept_list[OCR_REMAP_LIST_BYTES], added_list[OCR_REMAP_LIST_BYTES], dropped_list[OCR_REMAP_LIST_BYTES];
} OcrHeadRemapReport;

// Fills the counts and the lists of *r from the map and the two class lists.
void ocr_head_remap_report_fill(OcrHeadRemapReport *r, const OcrClassMap *map, const char *const *old_classes,
                                const char *const *new_classes);
// "dictionary changed (6625 → 6626 classes): 6624 characters kept (0 at another index), 1 new
// [€], 0 dropped; 2 per-class tensors carried over by character" into buf; returns buf.
const char *ocr_head_remap_describe(const OcrHeadRemapReport *r, char *buf, size_t cap);

#endif

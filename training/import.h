// `ocrtrain import`: PaddleOCR's PP-OCRv3/v4/v5-mobile/v6 recognizers as users get them, turned into
// ocrtrain weights (safetensors):
//   ONNX       a paddle2onnx export: the graph is walked layer by layer and the matching network
//              is built (models/onnx_import.h); the dictionary embedded in the metadata
//              ("character") is written next to the weights;
//   .pdparams  a PaddleOCR training checkpoint: the unfused training-form network with its BN
//              statistics (models/pdparams.h); MultiHead checkpoints give their CTC branch.
// A file that does not match is rejected and nothing is written.
#ifndef OCR_TRAINING_IMPORT_H
#define OCR_TRAINING_IMPORT_H

#include <stddef.h>

#include "core/config.h"
#include "core/error.h"
#include "models/model.h"
#include "models/onnx.h"
#include "models/onnx_import.h"
#include "models/pdparams.h"

#define IMPORT_PATH_MAX 1200

typedef struct {
    OcrOnnxModel *onnx;      // the file (NULL: it could not be read)
    OcrModel *m;             // the network recognised (NULL: none matched; nothing was written)
    OcrOnnxImportInfo info;
    int have_dict;           // a dictionary was given or is in the metadata, written to dict_path
    char dict_path[IMPORT_PATH_MAX];
    int dict_fits;           // its lines fit the head: classes = blank + lines (+ space)
    char *dict_text;         // the file dict_in, read (NULL: none named)
} ImportOnnx;

// Reads `in`, builds the network it holds and writes its weights to `out` and its dictionary to
// dict_out (NULL: `out` with .safetensors replaced by .dict.txt). The dictionary is the file
// dict_in when given (it also names the variant: PP-OCRv5 mobile with ppocrv5_dict.txt; one
// whose lines fit no head is refused with both counts and nothing is written), else the
// metadata's. Free r with import_onnx_free, also after an error (r says how far it came).
ocr_status_t import_onnx(ImportOnnx *r, const char *in, const char *out, const char *dict_out, const char *dict_in);
void import_onnx_free(ImportOnnx *r);

typedef struct {
    char path[IMPORT_PATH_MAX];  // the file read: `in`, with ".pdparams" added to a prefix
    OcrPdparams *p;              // NULL: it could not be read
    int arch_ok;                 // the network was recognised from its tensors (arch, desc)
    OcrArch arch;
    char desc[300];
    OcrModel *m;
    int rep_ok;                  // the tensors were matched against the network (rep)
    OcrPdLoadReport rep;         // loaded, not loaded (with why), missing
    char dict_path[IMPORT_PATH_MAX];  // import_pdparams_config: the dictionary written ("" none)
} ImportPdparams;

// Reads `in`, recognises the network from its tensors, loads them and writes the weights to
// `out`. A network tensor missing from the file is OCR_ERR_FORMAT (rep lists them) and nothing is
// written. Free r with import_pdparams_free, also after an error (r says how far it came).
ocr_status_t import_pdparams(ImportPdparams *r, const char *in, const char *out);
void import_pdparams_free(ImportPdparams *r);

// The same into the network a config describes (`ocrtrain import --pdparams FILE -c CFG`): for
// checkpoints whose network the tensors alone do not name (PaddleOCR 3.x's PP-OCRv5 server and
// PP-OCRv6 training form, MultiHead with the NRTR branch), loaded by PaddleOCR's names into the
// config's model, guidance branch included. Every tensor of the network must be in the file with
// its shape and every file tensor must be one of the network's (else OCR_ERR_FORMAT naming the
// first, rep listing all, nothing written). A CTC-only checkpoint into a MultiHead config is
// refused too (the NRTR branch is missing; Global.pretrained_model loads it, models/weights_names.h).
// The config's dictionary (character_dict_path) is written next to the weights as OUT.dict.txt
// (dict_path) when it has one. cfg_name is the config's path, for messages.
ocr_status_t import_pdparams_config(ImportPdparams *r, const char *in, const OcrConfig *cfg, const char *cfg_name,
                                    const char *out);

// PaddleOCR's classes for a dictionary of `lines` lines: blank + lines, + 1 with use_space_char.
static inline int import_dict_uses_space(int lines, int classes) { return classes == lines + 2; }

#endif

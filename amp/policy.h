// AMP precision policy: which compute dtype each op instance runs in.
//
// Pure: it reads the config (Global.use_amp, amp_level, amp_dtype, amp_custom_white_list,
// amp_custom_black_list, amp_fp32_layers) and resolves a list of (layer name, op type) entries
// into dtypes. It knows nothing about models; amp/amp_model.h applies it to a built model.
//
// Resolution of one op, first rule that applies (docs/AMP.md has the tables):
//   1. level O0 (or use_amp false)            -> f32
//   2. its layer name matches amp_fp32_layers  -> f32
//   2b. a low-precision restriction is set (amp_policy_set_lowp_layers / _types, programmatic
//       only) and the op is outside it (no pattern matches its name, its type is not listed) -> f32
//   3. its type is black (custom black, or default black not custom-white-listed) -> f32
//   4. its type is white (custom white, or default white not custom-black-listed) -> amp_dtype
//   5. grey: O1 follows its input (the op that feeds it; the network input is f32);
//            O2 runs in amp_dtype (the whole network is low precision except rules 2-3).
// BatchNorm is grey: it takes and returns its input's dtype; its statistics and affine
// parameters stay f32 at every level (the kernels compute in f32). The loss is not an op of
// the model: it always receives f32 logits (amp/engine.h).
#ifndef OCR_AMP_POLICY_H
#define OCR_AMP_POLICY_H

#include "core/config.h"
#include "core/error.h"
#include "core/tensor.h"

typedef enum { OCR_AMP_O0 = 0, OCR_AMP_O1, OCR_AMP_O2 } ocr_amp_level_t;
const char *amp_level_name(ocr_amp_level_t level);  // "O0", "O1", "O2"

typedef enum { AMP_GREY = 0, AMP_WHITE, AMP_BLACK } amp_op_class_t;
const char *amp_op_class_name(amp_op_class_t c);  // "grey", "white", "black"

// Why an op got its dtype (for `ocrtrain info --json` and the report).
typedef enum {
    AMP_REASON_OFF = 0,      // O0: everything f32
    AMP_REASON_FP32_LAYER,   // matched an amp_fp32_layers pattern
    AMP_REASON_BLACK,        // black-listed type
    AMP_REASON_WHITE,        // white-listed type
    AMP_REASON_FOLLOW_INPUT, // grey at O1: its input's dtype
    AMP_REASON_O2_GREY,      // grey at O2: amp_dtype
    AMP_REASON_OUTSIDE_LOWP, // outside the low-precision restriction (amp_policy_set_lowp_layers)
} amp_reason_t;
const char *amp_reason_name(amp_reason_t r);

#define AMP_MAX_LIST 64

typedef struct {
    ocr_amp_level_t level;  // O0 when Global.use_amp is false
    ocr_dtype_t dtype;      // the low-precision dtype (f16 or bf16); f32 at O0
    // Custom lists after alias expansion (canonical op types, owned).
    int n_white, n_black;
    char *white[AMP_MAX_LIST], *black[AMP_MAX_LIST];
    // Layer-name glob patterns (fnmatch) that stay f32 (owned).
    int n_fp32_layers;
    char *fp32_layers[AMP_MAX_LIST];
    // Low-precision restriction (owned; both empty: none, every op may run low). When set, only
    // ops whose layer name matches one of lowp_layers or whose type is one of lowp_types follow
    // the rules below rule 2; the rest are f32. Programmatic only: training/sensitivity.h puts
    // one layer group or one op type at a time in the low precision with it.
    int n_lowp_layers, n_lowp_types;
    char *lowp_layers[AMP_MAX_LIST];
    char *lowp_types[AMP_MAX_LIST];
} AmpPolicy;

// O0 policy (everything f32), nothing allocated.
void amp_policy_init_off(AmpPolicy *p);
// Reads and validates the Global.* keys above; every problem is OCR_ERR_CONFIG with a message
// that names the key (and both keys for an op type in both custom lists).
ocr_status_t amp_policy_from_config(AmpPolicy *p, const OcrConfig *cfg);
// Programmatic form (tests, tools): level, dtype and NULL-terminated lists (any may be NULL).
// Same validation and messages as the config form, with "Global.<key>" names.
ocr_status_t amp_policy_make(AmpPolicy *p, ocr_amp_level_t level, ocr_dtype_t dtype, const char *const *white,
                             const char *const *black, const char *const *fp32_layers);
void amp_policy_free(AmpPolicy *p);
// A deep copy of src (dst is overwritten, not freed first).
void amp_policy_copy(AmpPolicy *dst, const AmpPolicy *src);
// Appends layer-name patterns to amp_fp32_layers (duplicates ignored); same checks as
// amp_policy_make. patterns: NULL-terminated (NULL: nothing).
ocr_status_t amp_policy_add_fp32_layers(AmpPolicy *p, const char *const *patterns);
// Appends op types (aliases expanded) to the custom black list, as if the config had listed them
// there; a type on the custom white list is a conflict error, as in amp_policy_make.
ocr_status_t amp_policy_add_black(AmpPolicy *p, const char *const *types);
// Restricts low precision to the layers matching `patterns` (NULL-terminated; NULL or empty:
// none by name). Replaces the earlier layer patterns of the restriction (not its types).
// An empty pattern is OCR_ERR_INVALID_ARG.
ocr_status_t amp_policy_set_lowp_layers(AmpPolicy *p, const char *const *patterns);
// The same by op type (aliases expanded; an unknown type is OCR_ERR_CONFIG with a suggestion).
ocr_status_t amp_policy_set_lowp_types(AmpPolicy *p, const char *const *types);
// Whether an op (layer name, type) is inside the restriction (1 when none is set).
int amp_policy_in_lowp(const AmpPolicy *p, const char *layer_name, const char *op_type);

// Class of an op type under this policy (default lists updated by the custom ones, Paddle's
// `_update_list` rule). Unknown types are grey.
amp_op_class_t amp_policy_op_class(const AmpPolicy *p, const char *op_type);
// Whether a layer name matches one of the amp_fp32_layers patterns.
int amp_policy_is_fp32_layer(const AmpPolicy *p, const char *layer_name);

// The op types this engine knows (those of our networks, the names of the default lists,
// and PaddleOCR aliases); NULL-terminated. Custom lists may only name these.
const char *const *amp_known_op_types(void);

// One op instance, in forward order.
typedef struct {
    const char *name;  // layer name, "backbone.conv1.conv"
    const char *type;  // op type, "conv2d"
    int input;         // index (< own index) of the op whose output feeds it; -1: the network input
} AmpOpEntry;

// Resolves every entry's compute dtype (dtypes[i]); reasons may be NULL. pattern_hits, when
// not NULL, receives for each amp_fp32_layers pattern the number of ops it matched.
void amp_policy_resolve(const AmpPolicy *p, const AmpOpEntry *ops, int count, ocr_dtype_t *dtypes,
                        amp_reason_t *reasons, int *pattern_hits);

#endif

#include "amp/policy.h"

#include <cjson/cJSON.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- op vocabulary ----------------------------------------------------------------------
// The types our networks use (models/svtr/nn.h) come first; then types that have a default
// class but no op in our networks (accepted so PaddleOCR configs that list them still load).
static const char *const KNOWN_TYPES[] = {
    "conv2d", "linear", "attention", "batchnorm", "layernorm", "activation", "add", "affine", "mul",
    "concat", "pool", "softmax", "dropout", "droppath", "embedding", "lstm",
    "pad",  // PPLCNetV4's SAME padding (grey: a copy, exact in any dtype)
    "sar_attention",
    "log_softmax", "exp", "log", "pow", "reduce_mean", "reduce_sum", "mean", "sum", "ctc_loss",
    "cross_entropy", "mse_loss", "cast",
    "distill_loss",  // the distillation losses (kernels/ops.h): black, computed in f32/double
    // aliases (expanded below)
    "matmul", "matmul_v2", "elementwise_add", "elementwise_mul", "batch_norm", "layer_norm",
    "depthwise_conv2d", "pool2d", "warpctc", "softmax_with_cross_entropy", "lookup_table", "lookup_table_v2", "rnn", NULL};

// Paddle op names -> our types. Black-listing Paddle's matmul hits every GEMM that is not a
// convolution: our linear layers and the two GEMMs inside the attention op.
static const struct {
    const char *alias;
    const char *types[3];
} ALIASES[] = {
    {"matmul", {"linear", "attention", NULL}},
    {"matmul_v2", {"linear", "attention", NULL}},
    {"elementwise_add", {"add", NULL}},
    {"elementwise_mul", {"mul", NULL}},
    {"batch_norm", {"batchnorm", NULL}},
    {"layer_norm", {"layernorm", NULL}},
    {"depthwise_conv2d", {"conv2d", NULL}},
    {"pool2d", {"pool", NULL}},
    {"warpctc", {"ctc_loss", NULL}},
    {"softmax_with_cross_entropy", {"cross_entropy", NULL}},
    {"lookup_table", {"embedding", NULL}},
    {"lookup_table_v2", {"embedding", NULL}},
    {"rnn", {"lstm", NULL}},
};

// The LSTM layers (SAR's recurrences, kernels/ops.h lstm_layer_*) are black: the sigmoid/tanh
// and the cell state that carries over the steps stay f32, and so do the layer's own GEMMs (the
// recurrence feeds each step's rounding into the next). SAR's 2-D attention (tanh(key + query)
// score, valid_ratio mask, softmax over H·W and the glimpse, op type "sar_attention") is black
// too: its scores and softmax are f32 like the attention ops'. The embedding lookup (MultiHead's
// NRTR branch) is grey: a row copy, exact in any dtype once the
// table is. The guidance losses (cross_entropy, black) are computed by the step in f32 on the
// logits whatever their dtype, and the attention ops keep their scores and softmax in f32.
// Convolutions and GEMMs gain from tensor cores and accumulate in f32 anyway.
static const char *const DEFAULT_WHITE[] = {"conv2d", "linear", "attention", NULL};
// Ops whose result needs f32 range or precision: exponentials and logs, long reductions,
// normalisations over a row, losses (CTC included: PaddleOCR's to_float32, PyTorch's CPU list;
// the distillation losses, "distill_loss": their kernels compute softmax, logs and sums in double
// whatever the logits' dtype, so under O1 and O2 the teacher's and student's logits may arrive in
// low precision and the KL terms still never see it).
// Pooling is NOT here: the kernels sum in f32 and only the mean is rounded (as PyTorch's CUDA
// autocast and Paddle leave pooling to follow its input).
static const char *const DEFAULT_BLACK[] = {"softmax", "log_softmax", "layernorm", "reduce_mean", "reduce_sum",
                                            "mean", "sum", "exp", "log", "pow", "ctc_loss", "cross_entropy",
                                            "mse_loss", "lstm", "sar_attention", "distill_loss", NULL};

const char *const *amp_known_op_types(void) { return KNOWN_TYPES; }

static int in_list(const char *const *list, const char *s) {
    for (int i = 0; list[i]; i++)
        if (strcmp(list[i], s) == 0) return 1;
    return 0;
}

static int in_owned(char *const *list, int n, const char *s) {
    for (int i = 0; i < n; i++)
        if (strcmp(list[i], s) == 0) return i;
    return -1;
}

const char *amp_level_name(ocr_amp_level_t level) {
    switch (level) {
    case OCR_AMP_O0: return "O0";
    case OCR_AMP_O1: return "O1";
    case OCR_AMP_O2: return "O2";
    }
    return "?";
}

const char *amp_op_class_name(amp_op_class_t c) {
    return c == AMP_WHITE ? "white" : c == AMP_BLACK ? "black" : "grey";
}

const char *amp_reason_name(amp_reason_t r) {
    switch (r) {
    case AMP_REASON_OFF: return "amp off";
    case AMP_REASON_FP32_LAYER: return "amp_fp32_layers";
    case AMP_REASON_BLACK: return "black list";
    case AMP_REASON_WHITE: return "white list";
    case AMP_REASON_FOLLOW_INPUT: return "follows input";
    case AMP_REASON_O2_GREY: return "O2";
    case AMP_REASON_OUTSIDE_LOWP: return "outside the low-precision layers";
    }
    return "?";
}

void amp_policy_init_off(AmpPolicy *p) {
    memset(p, 0, sizeof *p);
    p->level = OCR_AMP_O0;
    p->dtype = OCR_F32;
}

void amp_policy_free(AmpPolicy *p) {
    for (int i = 0; i < p->n_white; i++) free(p->white[i]);
    for (int i = 0; i < p->n_black; i++) free(p->black[i]);
    for (int i = 0; i < p->n_fp32_layers; i++) free(p->fp32_layers[i]);
    for (int i = 0; i < p->n_lowp_layers; i++) free(p->lowp_layers[i]);
    for (int i = 0; i < p->n_lowp_types; i++) free(p->lowp_types[i]);
    amp_policy_init_off(p);
}

static char *dup_or_die(const char *s) {
    char *d = strdup(s);
    OCR_ASSERT(d, "out of host memory");
    return d;
}

void amp_policy_copy(AmpPolicy *dst, const AmpPolicy *src) {
    *dst = *src;
    for (int i = 0; i < src->n_white; i++) dst->white[i] = dup_or_die(src->white[i]);
    for (int i = 0; i < src->n_black; i++) dst->black[i] = dup_or_die(src->black[i]);
    for (int i = 0; i < src->n_fp32_layers; i++) dst->fp32_layers[i] = dup_or_die(src->fp32_layers[i]);
    for (int i = 0; i < src->n_lowp_layers; i++) dst->lowp_layers[i] = dup_or_die(src->lowp_layers[i]);
    for (int i = 0; i < src->n_lowp_types; i++) dst->lowp_types[i] = dup_or_die(src->lowp_types[i]);
}

// ---- building the lists ----------------------------------------------------------------

// Where a canonical type came from, for the conflict message.
typedef struct {
    const char *given[AMP_MAX_LIST];  // the name written in the config, per canonical entry
} ListOrigin;

static ocr_status_t unknown_type(const char *source, const char *key, const char *name) {
    const char *best = NULL;
    int best_d = 1 << 30;
    for (int i = 0; KNOWN_TYPES[i]; i++) {
        int d = ocr_edit_distance(name, KNOWN_TYPES[i]);
        if (d < best_d) best_d = d, best = KNOWN_TYPES[i];
    }
    int len = (int)strlen(name), limit = len / 3 > 2 ? len / 3 : 2;
    if (best && best_d <= limit)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s: unknown op type '%s' (did you mean %s?)", source, key, name,
                             best);
    char list[1024] = "";
    size_t used = 0;
    for (int i = 0; KNOWN_TYPES[i] && used + 1 < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", KNOWN_TYPES[i]);
    return ocr_set_error(OCR_ERR_CONFIG, "%s: %s: unknown op type '%s' (known: %s)", source, key, name, list);
}

// Adds `name` (expanded through the aliases) to list; records the spelling it came from.
static ocr_status_t add_type(char **list, int *n, ListOrigin *origin, const char *source, const char *key,
                             const char *name) {
    if (!name[0]) return ocr_set_error(OCR_ERR_CONFIG, "%s: %s: empty op type name", source, key);
    if (!in_list(KNOWN_TYPES, name)) return unknown_type(source, key, name);
    const char *single[2] = {name, NULL};
    const char *const *types = single;
    for (size_t a = 0; a < sizeof ALIASES / sizeof ALIASES[0]; a++)
        if (strcmp(ALIASES[a].alias, name) == 0) types = ALIASES[a].types;
    for (int k = 0; types[k]; k++) {
        if (in_owned(list, *n, types[k]) >= 0) continue;
        if (*n == AMP_MAX_LIST)
            return ocr_set_error(OCR_ERR_CONFIG, "%s: %s has more than %d op types", source, key, AMP_MAX_LIST);
        list[*n] = strdup(types[k]);
        OCR_ASSERT(list[*n], "out of host memory");
        origin->given[*n] = name;
        (*n)++;
    }
    return OCR_OK;
}

static ocr_status_t add_pattern(AmpPolicy *p, const char *source, const char *key, const char *pattern) {
    if (!pattern[0]) return ocr_set_error(OCR_ERR_CONFIG, "%s: %s: empty layer-name pattern", source, key);
    if (in_owned(p->fp32_layers, p->n_fp32_layers, pattern) >= 0) return OCR_OK;
    if (p->n_fp32_layers == AMP_MAX_LIST)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s has more than %d patterns", source, key, AMP_MAX_LIST);
    p->fp32_layers[p->n_fp32_layers] = strdup(pattern);
    OCR_ASSERT(p->fp32_layers[p->n_fp32_layers], "out of host memory");
    p->n_fp32_layers++;
    return OCR_OK;
}

static ocr_status_t check_conflicts(const AmpPolicy *p, const ListOrigin *w, const ListOrigin *b, const char *source) {
    for (int i = 0; i < p->n_white; i++) {
        int j = in_owned(p->black, p->n_black, p->white[i]);
        if (j < 0) continue;
        if (strcmp(w->given[i], b->given[j]) == 0)
            return ocr_set_error(OCR_ERR_CONFIG,
                                 "%s: op type '%s' is in both Global.amp_custom_white_list and "
                                 "Global.amp_custom_black_list; keep it in one",
                                 source, w->given[i]);
        return ocr_set_error(OCR_ERR_CONFIG,
                             "%s: '%s' in Global.amp_custom_white_list and '%s' in Global.amp_custom_black_list "
                             "both name op type %s; keep it in one",
                             source, w->given[i], b->given[j], p->white[i]);
    }
    return OCR_OK;
}

ocr_status_t amp_policy_make(AmpPolicy *p, ocr_amp_level_t level, ocr_dtype_t dtype, const char *const *white,
                             const char *const *black, const char *const *fp32_layers) {
    amp_policy_init_off(p);
    const char *src = "amp policy";
    if (level != OCR_AMP_O0 && dtype != OCR_F16 && dtype != OCR_BF16)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.amp_dtype must be float16 or bfloat16, got %s", src,
                             ocr_dtype_name(dtype));
    ListOrigin wo, bo;
    ocr_status_t st = OCR_OK;
    for (int i = 0; st == OCR_OK && white && white[i]; i++)
        st = add_type(p->white, &p->n_white, &wo, src, "Global.amp_custom_white_list", white[i]);
    for (int i = 0; st == OCR_OK && black && black[i]; i++)
        st = add_type(p->black, &p->n_black, &bo, src, "Global.amp_custom_black_list", black[i]);
    if (st == OCR_OK) st = check_conflicts(p, &wo, &bo, src);
    for (int i = 0; st == OCR_OK && fp32_layers && fp32_layers[i]; i++)
        st = add_pattern(p, src, "Global.amp_fp32_layers", fp32_layers[i]);
    if (st != OCR_OK) {
        amp_policy_free(p);
        return st;
    }
    p->level = level;
    p->dtype = level == OCR_AMP_O0 ? OCR_F32 : dtype;
    return OCR_OK;
}

ocr_status_t amp_policy_add_fp32_layers(AmpPolicy *p, const char *const *patterns) {
    for (int i = 0; patterns && patterns[i]; i++)
        OCR_TRY(add_pattern(p, "amp policy", "Global.amp_fp32_layers", patterns[i]));
    return OCR_OK;
}

ocr_status_t amp_policy_add_black(AmpPolicy *p, const char *const *types) {
    int before = p->n_black;
    ListOrigin bo;
    ocr_status_t st = OCR_OK;
    for (int i = 0; st == OCR_OK && types && types[i]; i++)
        st = add_type(p->black, &p->n_black, &bo, "amp policy", "Global.amp_custom_black_list", types[i]);
    for (int j = before; st == OCR_OK && j < p->n_black; j++)
        if (in_owned(p->white, p->n_white, p->black[j]) >= 0)
            st = ocr_set_error(OCR_ERR_CONFIG,
                               "amp policy: op type '%s' is in both Global.amp_custom_white_list and "
                               "Global.amp_custom_black_list; keep it in one",
                               p->black[j]);
    if (st != OCR_OK) {  // the policy is left as it was
        for (int j = before; j < p->n_black; j++) free(p->black[j]);
        p->n_black = before;
    }
    return st;
}

ocr_status_t amp_policy_set_lowp_layers(AmpPolicy *p, const char *const *patterns) {
    int n = 0;
    for (; patterns && patterns[n]; n++) {
        if (!patterns[n][0])
            return ocr_set_error(OCR_ERR_INVALID_ARG, "amp policy: low-precision layers: empty layer-name pattern");
        if (n == AMP_MAX_LIST)
            return ocr_set_error(OCR_ERR_INVALID_ARG, "amp policy: more than %d low-precision layer patterns",
                                 AMP_MAX_LIST);
    }
    for (int i = 0; i < p->n_lowp_layers; i++) free(p->lowp_layers[i]);
    for (int i = 0; i < n; i++) p->lowp_layers[i] = dup_or_die(patterns[i]);
    p->n_lowp_layers = n;
    return OCR_OK;
}

ocr_status_t amp_policy_set_lowp_types(AmpPolicy *p, const char *const *types) {
    char *list[AMP_MAX_LIST];
    int n = 0;
    ListOrigin o;
    ocr_status_t st = OCR_OK;
    for (int i = 0; st == OCR_OK && types && types[i]; i++)
        st = add_type(list, &n, &o, "amp policy", "low-precision op types", types[i]);
    if (st != OCR_OK) {
        for (int i = 0; i < n; i++) free(list[i]);
        return st;
    }
    for (int i = 0; i < p->n_lowp_types; i++) free(p->lowp_types[i]);
    for (int i = 0; i < n; i++) p->lowp_types[i] = list[i];
    p->n_lowp_types = n;
    return OCR_OK;
}

// Reads a list of strings at path into `out` (pointers owned by the config); absent: n = 0.
static ocr_status_t get_string_list(const OcrConfig *cfg, const char *path, const char **out, int max, int *n) {
    *n = 0;
    const cJSON *node = ocr_config_node(cfg, path);
    if (!node || cJSON_IsNull(node)) return OCR_OK;
    if (!cJSON_IsArray(node))
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s must be a list of strings", ocr_config_source(cfg), path);
    int i = 0;
    for (const cJSON *it = node->child; it; it = it->next, i++) {
        if (!cJSON_IsString(it))
            return ocr_set_error(OCR_ERR_CONFIG, "%s: %s.%d must be a string", ocr_config_source(cfg), path, i);
        if (*n == max)
            return ocr_set_error(OCR_ERR_CONFIG, "%s: %s has more than %d entries", ocr_config_source(cfg), path,
                                 max);
        out[(*n)++] = it->valuestring;
    }
    return OCR_OK;
}

ocr_status_t amp_policy_from_config(AmpPolicy *p, const OcrConfig *cfg) {
    amp_policy_init_off(p);
    const char *src = ocr_config_source(cfg);
    int use_amp;
    OCR_TRY(ocr_config_get_bool(cfg, "Global.use_amp", 0, &use_amp));
    const char *level_s, *dtype_s;
    // PaddleOCR's tools/train.py: amp_level defaults to O2 once use_amp is set.
    OCR_TRY(ocr_config_get_string(cfg, "Global.amp_level", "O2", &level_s));
    OCR_TRY(ocr_config_get_string(cfg, "Global.amp_dtype", "float16", &dtype_s));
    ocr_amp_level_t level;
    if (strcmp(level_s, "O0") == 0)
        level = OCR_AMP_O0;
    else if (strcmp(level_s, "O1") == 0)
        level = OCR_AMP_O1;
    else if (strcmp(level_s, "O2") == 0)
        level = OCR_AMP_O2;
    else
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.amp_level must be O0, O1 or O2, got \"%s\"", src, level_s);
    ocr_dtype_t dtype;
    if (strcmp(dtype_s, "float16") == 0)
        dtype = OCR_F16;
    else if (strcmp(dtype_s, "bfloat16") == 0)
        dtype = OCR_BF16;
    else
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.amp_dtype must be float16 or bfloat16, got \"%s\"", src,
                             dtype_s);
    const char *white[AMP_MAX_LIST + 1] = {0}, *black[AMP_MAX_LIST + 1] = {0}, *layers[AMP_MAX_LIST + 1] = {0};
    int nw, nb, nl;
    OCR_TRY(get_string_list(cfg, "Global.amp_custom_white_list", white, AMP_MAX_LIST, &nw));
    OCR_TRY(get_string_list(cfg, "Global.amp_custom_black_list", black, AMP_MAX_LIST, &nb));
    OCR_TRY(get_string_list(cfg, "Global.amp_fp32_layers", layers, AMP_MAX_LIST, &nl));
    // The lists are validated even when AMP is off, so a typo does not wait for the AMP run.
    ocr_status_t st = amp_policy_make(p, use_amp ? level : OCR_AMP_O0, dtype, white, black, layers);
    if (st != OCR_OK) {
        // Re-prefix with the config's name instead of the programmatic one.
        const char *msg = ocr_last_error();
        const char *tail = strncmp(msg, "amp policy: ", 12) == 0 ? msg + 12 : msg;
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", tail);
        return ocr_set_error(st, "%s: %s", src, buf);
    }
    return OCR_OK;
}

// ---- resolution -------------------------------------------------------------------------

amp_op_class_t amp_policy_op_class(const AmpPolicy *p, const char *type) {
    if (in_owned(p->black, p->n_black, type) >= 0) return AMP_BLACK;
    if (in_owned(p->white, p->n_white, type) >= 0) return AMP_WHITE;
    if (in_list(DEFAULT_BLACK, type)) return AMP_BLACK;
    if (in_list(DEFAULT_WHITE, type)) return AMP_WHITE;
    return AMP_GREY;
}

int amp_policy_is_fp32_layer(const AmpPolicy *p, const char *name) {
    for (int i = 0; i < p->n_fp32_layers; i++)
        if (fnmatch(p->fp32_layers[i], name, 0) == 0) return 1;
    return 0;
}

int amp_policy_in_lowp(const AmpPolicy *p, const char *name, const char *type) {
    if (p->n_lowp_layers == 0 && p->n_lowp_types == 0) return 1;
    for (int i = 0; i < p->n_lowp_layers; i++)
        if (fnmatch(p->lowp_layers[i], name, 0) == 0) return 1;
    return in_owned(p->lowp_types, p->n_lowp_types, type) >= 0;
}

void amp_policy_resolve(const AmpPolicy *p, const AmpOpEntry *ops, int count, ocr_dtype_t *dtypes,
                        amp_reason_t *reasons, int *pattern_hits) {
    if (pattern_hits)
        for (int k = 0; k < p->n_fp32_layers; k++) pattern_hits[k] = 0;
    for (int i = 0; i < count; i++) {
        OCR_ASSERT(ops[i].input < i, "amp policy: op %d (%s) takes its input from op %d, which comes later", i,
                   ops[i].name, ops[i].input);
        ocr_dtype_t d;
        amp_reason_t r;
        int fp32_layer = 0;
        for (int k = 0; k < p->n_fp32_layers; k++) {
            if (fnmatch(p->fp32_layers[k], ops[i].name, 0) == 0) {
                fp32_layer = 1;
                if (pattern_hits) pattern_hits[k]++;
            }
        }
        amp_op_class_t c = amp_policy_op_class(p, ops[i].type);
        if (p->level == OCR_AMP_O0) {
            d = OCR_F32, r = AMP_REASON_OFF;
        } else if (fp32_layer) {
            d = OCR_F32, r = AMP_REASON_FP32_LAYER;
        } else if (!amp_policy_in_lowp(p, ops[i].name, ops[i].type)) {
            d = OCR_F32, r = AMP_REASON_OUTSIDE_LOWP;
        } else if (c == AMP_BLACK) {
            d = OCR_F32, r = AMP_REASON_BLACK;
        } else if (c == AMP_WHITE) {
            d = p->dtype, r = AMP_REASON_WHITE;
        } else if (p->level == OCR_AMP_O2) {
            d = p->dtype, r = AMP_REASON_O2_GREY;
        } else {
            d = ops[i].input >= 0 ? dtypes[ops[i].input] : OCR_F32;
            r = AMP_REASON_FOLLOW_INPUT;
        }
        dtypes[i] = d;
        if (reasons) reasons[i] = r;
    }
}

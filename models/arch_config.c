// Architecture section → OcrArch, with PaddleOCR's key names and defaults.
#include <cjson/cJSON.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "models/model.h"


static ocr_status_t cfg_error(const OcrConfig *cfg, const char *fmt, const char *a, const char *b) {
    char msg[768];
    snprintf(msg, sizeof msg, fmt, a, b);
    return ocr_set_error(OCR_ERR_CONFIG, "%s: %s", ocr_config_source(cfg), msg);
}

static ocr_status_t get_i(const OcrConfig *cfg, const char *path, int def, int lo, int hi, int *out) {
    int64_t v;
    OCR_TRY(ocr_config_get_int(cfg, path, def, &v));
    OCR_TRY(ocr_config_check_range(cfg, path, (double)v, lo, hi));
    *out = (int)v;
    return OCR_OK;
}

static ocr_status_t get_d(const OcrConfig *cfg, const char *path, double def, double lo, double hi, double *out) {
    OCR_TRY(ocr_config_get_double(cfg, path, def, out));
    return ocr_config_check_range(cfg, path, *out, lo, hi);
}

// An int or a list of two ints ("stride: 1" or "[1, 2]").
static ocr_status_t get_pair(const OcrConfig *cfg, const char *path, int d0, int d1, int lo, int hi, int out[2]) {
    int64_t v[2];
    int n = 0;
    OCR_TRY(ocr_config_get_int_list(cfg, path, v, 2, &n));
    if (n == 0) {
        out[0] = d0;
        out[1] = d1;
        return OCR_OK;
    }
    if (n == 1) v[1] = v[0];
    for (int i = 0; i < 2; i++) {
        if (v[i] < lo || v[i] > hi) {
            return ocr_set_error(OCR_ERR_CONFIG, "%s: %s entries must be in [%d, %d], got %lld", ocr_config_source(cfg),
                                 path, lo, hi, (long long)v[i]);
        }
        out[i] = (int)v[i];
    }
    return OCR_OK;
}

static ocr_status_t get_triple(const OcrConfig *cfg, const char *path, const int def[3], int lo, int hi, int out[3]) {
    int64_t v[3];
    int n = 0;
    OCR_TRY(ocr_config_get_int_list(cfg, path, v, 3, &n));
    if (n == 0) {
        memcpy(out, def, 3 * sizeof(int));
        return OCR_OK;
    }
    if (n != 3) {
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s must list 3 values (one per stage), got %d",
                             ocr_config_source(cfg), path, n);
    }
    for (int i = 0; i < 3; i++) {
        if (v[i] < lo || v[i] > hi)
            return ocr_set_error(OCR_ERR_CONFIG, "%s: %s entries must be in [%d, %d], got %lld",
                                 ocr_config_source(cfg), path, lo, hi, (long long)v[i]);
        out[i] = (int)v[i];
    }
    return OCR_OK;
}

// A key that must be absent, null or false/equal to what we implement.
static ocr_status_t require_off(const OcrConfig *cfg, const char *path, const char *what) {
    const cJSON *n = ocr_config_node(cfg, path);
    if (!n || cJSON_IsNull(n) || cJSON_IsFalse(n)) return OCR_OK;
    return cfg_error(cfg, "%s is not supported (%s); remove it or set it to null/false", path, what);
}

static ocr_status_t require_string(const OcrConfig *cfg, const char *path, const char *def, const char *const *allowed,
                                   const char **out) {
    OCR_TRY(ocr_config_get_string(cfg, path, def, out));
    for (int i = 0; *out && allowed[i]; i++)
        if (strcmp(*out, allowed[i]) == 0) return OCR_OK;
    char list[256] = "";
    size_t used = 0;
    for (int i = 0; allowed[i]; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", allowed[i]);
    // No default: an absent key (e.g. Architecture.Backbone.name) is an error, not a strcmp on
    // NULL (found by fuzz/fuzz_config.c).
    if (!*out) return ocr_set_error(OCR_ERR_CONFIG, "%s: %s is required (one of %s)", ocr_config_source(cfg), path, list);
    return ocr_set_error(OCR_ERR_CONFIG, "%s: %s must be one of %s, got \"%s\"", ocr_config_source(cfg), path, list,
                         *out);
}

int ocr_dict_num_classes(const char *path, int use_space_char) {
    char *data;
    size_t size;
    if (ocr_read_file(path, &data, &size) != OCR_OK) return -1;
    int lines = 0;
    size_t start = 0;
    for (size_t i = 0; i <= size; i++) {
        if (i == size || data[i] == '\n') {
            if (i > start || i < size) lines++;  // a final line without newline counts; the empty tail does not
            start = i + 1;
        }
    }
    free(data);
    if (lines == 0) {
        ocr_set_error(OCR_ERR_FORMAT, "%s: the dictionary is empty", path);
        return -1;
    }
    return 1 + lines + (use_space_char ? 1 : 0);
}

// Relative dictionary paths resolve like PaddleOCR's (from the working directory), then from
// the config file's folder and its parent, so `configs/x.json` works from anywhere.
static int resolve_path(const OcrConfig *cfg, const char *rel, char *out, size_t n) {
    snprintf(out, n, "%s", rel);
    if (rel[0] == '/' || ocr_file_exists(out)) return 1;
    char src[1024];
    snprintf(src, sizeof src, "%s", ocr_config_source(cfg));
    char *dir = dirname(src);
    snprintf(out, n, "%s/%s", dir, rel);
    if (ocr_file_exists(out)) return 1;
    snprintf(out, n, "%s/../%s", dir, rel);
    if (ocr_file_exists(out)) return 1;
    snprintf(out, n, "%s", rel);
    return 0;
}

// Input size from the first RecResizeImg / SVTRRecResizeImg image_shape in Eval, then Train.
static int find_image_shape(const OcrConfig *cfg, int *h, int *w) {
    const char *lists[2] = {"Eval.dataset.transforms", "Train.dataset.transforms"};
    for (int l = 0; l < 2; l++) {
        const cJSON *arr = ocr_config_node(cfg, lists[l]);
        if (!cJSON_IsArray(arr)) continue;
        for (const cJSON *it = arr->child; it; it = it->next) {
            const cJSON *op = cJSON_GetObjectItemCaseSensitive(it, "RecResizeImg");
            if (!op) op = cJSON_GetObjectItemCaseSensitive(it, "SVTRRecResizeImg");
            if (!op) continue;
            const cJSON *shape = cJSON_GetObjectItemCaseSensitive(op, "image_shape");
            if (cJSON_IsArray(shape) && cJSON_GetArraySize(shape) == 3) {
                const cJSON *hh = cJSON_GetArrayItem(shape, 1), *ww = cJSON_GetArrayItem(shape, 2);
                // Only values an int holds: (int) of 1e300 or inf is undefined (found by
                // fuzz/fuzz_config.c); the transform reader refuses them, naming the key.
                if (cJSON_IsNumber(hh) && cJSON_IsNumber(ww) && hh->valuedouble > -2147483648.0 &&
                    hh->valuedouble < 2147483648.0 && ww->valuedouble > -2147483648.0 && ww->valuedouble < 2147483648.0) {
                    *h = (int)hh->valuedouble;
                    *w = (int)ww->valuedouble;
                    return 1;
                }
            }
        }
    }
    return 0;
}

static ocr_status_t parse_mv1e(const OcrConfig *cfg, OcrArch *a) {
    static const char *const keys[] = {"name", "scale", "last_conv_stride", "last_pool_type", "last_pool_kernel_size",
                                       NULL};
    OCR_TRY(ocr_config_check_keys(cfg, "Architecture.Backbone", keys));
    Mv1eSpec *s = &a->mv1e;
    OCR_TRY(get_d(cfg, "Architecture.Backbone.scale", 0.5, 0.125, 4.0, &s->scale));
    OCR_TRY(get_pair(cfg, "Architecture.Backbone.last_conv_stride", 1, 1, 1, 4, s->last_conv_stride));
    static const char *const pools[] = {"avg", "max", NULL};
    const char *pt;
    OCR_TRY(require_string(cfg, "Architecture.Backbone.last_pool_type", "max", pools, &pt));
    s->last_pool_avg = strcmp(pt, "avg") == 0;
    OCR_TRY(get_pair(cfg, "Architecture.Backbone.last_pool_kernel_size", 3, 2, 1, 8, s->last_pool_kernel));
    return OCR_OK;
}

static ocr_status_t parse_lcnet(const OcrConfig *cfg, OcrArch *a) {
    static const char *const keys[] = {"name", "scale", "conv_kxk_num", "lr_mult_list", "lab_lr", "det", "deploy",
                                       NULL};
    OCR_TRY(ocr_config_check_keys(cfg, "Architecture.Backbone", keys));
    LcnetSpec *s = &a->lcnet;
    OCR_TRY(get_d(cfg, "Architecture.Backbone.scale", 1.0, 0.125, 4.0, &s->scale));
    OCR_TRY(get_i(cfg, "Architecture.Backbone.conv_kxk_num", 4, 1, OCR_REP_MAX_BRANCHES, &s->conv_kxk_num));
    OCR_TRY(get_d(cfg, "Architecture.Backbone.lab_lr", 0.1, 0.0, 100.0, &s->lab_lr));
    int n = 0;
    OCR_TRY(ocr_config_get_double_list(cfg, "Architecture.Backbone.lr_mult_list", s->lr_mult_list, 6, &n));
    if (n == 0) {
        for (int i = 0; i < 6; i++) s->lr_mult_list[i] = 1.0;
    } else if (n != 6) {
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Architecture.Backbone.lr_mult_list must have 6 entries, got %d",
                             ocr_config_source(cfg), n);
    }
    OCR_TRY(require_off(cfg, "Architecture.Backbone.det", "only the recognition form of PPLCNetV3 is built"));
    OCR_TRY(ocr_config_get_bool(cfg, "Architecture.Backbone.deploy", 0, &s->deploy));
    return OCR_OK;
}

// PPLCNetV4 (ppocr/modeling/backbones/rec_lcnetv4.py, recognition form): model_size picks the
// network of NET_CONFIG_REC (PaddleOCR's default "small").
static ocr_status_t parse_lcnet4(const OcrConfig *cfg, OcrArch *a) {
    static const char *const keys[] = {"name",     "model_size", "det",         "in_channels",   "lr_mult_list",
                                       "deploy",   "use_rep",    "stem_type",   "config_name",   "stem_channels",
                                       NULL};
    OCR_TRY(ocr_config_check_keys(cfg, "Architecture.Backbone", keys));
    Lcnet4Spec *s = &a->lcnet4;
    static const char *const sizes[] = {"tiny", "small", "medium", NULL};
    const char *size;
    OCR_TRY(require_string(cfg, "Architecture.Backbone.model_size", "small", sizes, &size));
    s->size = strcmp(size, "tiny") == 0 ? OCR_LCNETV4_TINY : strcmp(size, "small") == 0 ? OCR_LCNETV4_SMALL
                                                                                        : OCR_LCNETV4_MEDIUM;
    OCR_TRY(require_off(cfg, "Architecture.Backbone.det", "only the recognition form of PPLCNetV4 is built"));
    int in_ch;
    OCR_TRY(get_i(cfg, "Architecture.Backbone.in_channels", 3, 3, 3, &in_ch));
    if (ocr_config_has(cfg, "Architecture.Backbone.in_channels"))
        ocr_config_record_ignored(cfg, "Architecture.Backbone.in_channels",
                                  "the recognition form's stem takes 3 channels whatever it says (rec_lcnetv4.py)");
    int n = 0;
    OCR_TRY(ocr_config_get_double_list(cfg, "Architecture.Backbone.lr_mult_list", s->lr_mult_list, 6, &n));
    if (n == 0) {
        for (int i = 0; i < 6; i++) s->lr_mult_list[i] = 1.0;
    } else if (n != 6) {
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Architecture.Backbone.lr_mult_list must have 6 entries, got %d",
                             ocr_config_source(cfg), n);
    }
    OCR_TRY(ocr_config_get_bool(cfg, "Architecture.Backbone.deploy", 0, &s->deploy));
    // Keys of earlier PP-OCRv6 configs that PPLCNetV4.__init__ takes in **kwargs and never reads.
    // An early PP-OCRv6_tiny_rec.yml says config_name: tiny without model_size; PaddleOCR's
    // rec_lcnetv4.py then builds small, and so does this, but the note says so in as many words.
    const char *config_name = NULL;
    if (ocr_config_has(cfg, "Architecture.Backbone.config_name") &&
        ocr_config_get_string(cfg, "Architecture.Backbone.config_name", NULL, &config_name) != OCR_OK)
        config_name = NULL;
    static const char *const kw[] = {"use_rep", "stem_type", "config_name", "stem_channels", NULL};
    for (int i = 0; kw[i]; i++) {
        char k[96];
        snprintf(k, sizeof k, "Architecture.Backbone.%s", kw[i]);
        if (!ocr_config_has(cfg, k)) continue;
        if (i == 2 && config_name && strcmp(config_name, size) != 0)
            ocr_config_record_ignored(cfg, k,
                                      "names another network than the one built: PPLCNetV4 takes config_name in "
                                      "**kwargs and ignores it, as PaddleOCR does; model_size picks the network "
                                      "(tiny, small or medium; default small)");
        else
            ocr_config_record_ignored(cfg, k,
                                      "PPLCNetV4 takes it in **kwargs and ignores it; model_size picks the network "
                                      "(default small)");
    }
    return OCR_OK;
}

// PPHGNetV2_B4 (ppocr/modeling/backbones/rec_pphgnetv2.py) in its text_rec form. The keys PPHGNetV2
// reads from the B4 function's **kwargs: lr_mult_list (5 entries), use_last_conv, class_expand and
// class_num (the unused classifier's size), dropout_prob (its dropout, never run); det and text_rec
// must keep the recognition form; deploy (ours) leaves the unused classifier out.
static ocr_status_t parse_hgnet2(const OcrConfig *cfg, OcrArch *a) {
    static const char *const keys[] = {"name",        "text_rec",     "det",       "lr_mult_list", "use_last_conv",
                                       "class_expand", "class_num",   "dropout_prob", "out_indices", "deploy",
                                       "in_channels",  NULL};
    OCR_TRY(ocr_config_check_keys(cfg, "Architecture.Backbone", keys));
    Hgnet2Spec *s = &a->hgnet2;
    const char *src = ocr_config_source(cfg);
    int text_rec;
    OCR_TRY(ocr_config_get_bool(cfg, "Architecture.Backbone.text_rec", 0, &text_rec));
    if (!text_rec)
        return ocr_set_error(OCR_ERR_CONFIG,
                             "%s: Architecture.Backbone.text_rec must be true (PPHGNetV2_B4 is built in its text "
                             "recognition form, as PP-OCRv5_server_rec.yml sets it)",
                             src);
    OCR_TRY(require_off(cfg, "Architecture.Backbone.det", "only the text recognition form of PPHGNetV2_B4 is built"));
    int in_ch;
    OCR_TRY(get_i(cfg, "Architecture.Backbone.in_channels", 3, 3, 3, &in_ch));
    if (ocr_config_has(cfg, "Architecture.Backbone.in_channels"))
        ocr_config_record_ignored(cfg, "Architecture.Backbone.in_channels",
                                  "PPHGNetV2_B4 takes it in **kwargs and ignores it; its stem reads 3 channels");
    int n = 0;
    OCR_TRY(ocr_config_get_double_list(cfg, "Architecture.Backbone.lr_mult_list", s->lr_mult_list, 5, &n));
    if (n == 0) {
        for (int i = 0; i < 5; i++) s->lr_mult_list[i] = 1.0;
    } else if (n != 5) {
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Architecture.Backbone.lr_mult_list must have 5 entries, got %d", src,
                             n);
    }
    OCR_TRY(ocr_config_get_bool(cfg, "Architecture.Backbone.use_last_conv", 1, &s->use_last_conv));
    OCR_TRY(get_i(cfg, "Architecture.Backbone.class_expand", 2048, 1, 65536, &s->class_expand));
    OCR_TRY(get_i(cfg, "Architecture.Backbone.class_num", 1000, 1, 1 << 20, &s->class_num));
    double dp;
    OCR_TRY(get_d(cfg, "Architecture.Backbone.dropout_prob", 0.0, 0.0, 1.0, &dp));
    static const char *const unused[] = {"dropout_prob", "out_indices", NULL};
    for (int i = 0; unused[i]; i++) {
        char k[96];
        snprintf(k, sizeof k, "Architecture.Backbone.%s", unused[i]);
        if (ocr_config_has(cfg, k))
            ocr_config_record_ignored(cfg, k, "PPHGNetV2's recognition form never reads it");
    }
    OCR_TRY(ocr_config_get_bool(cfg, "Architecture.Backbone.deploy", 0, &s->deploy));
    return OCR_OK;
}

static ocr_status_t parse_svtrnet(const OcrConfig *cfg, OcrArch *a) {
    static const char *const keys[] = {"name",          "img_size",       "in_channels", "embed_dim",
                                       "depth",         "num_heads",      "mixer",       "local_mixer",
                                       "patch_merging", "mlp_ratio",      "qkv_bias",    "qk_scale",
                                       "drop_rate",     "last_drop",      "attn_drop_rate", "drop_path_rate",
                                       "norm_layer",    "sub_norm",       "epsilon",     "out_channels",
                                       "out_char_num",  "block_unit",     "act",         "last_stage",
                                       "sub_num",       "prenorm",        "use_lenhead", NULL};
    OCR_TRY(ocr_config_check_keys(cfg, "Architecture.Backbone", keys));
    SvtrNetSpec *s = &a->svtr;
    const char *p = "Architecture.Backbone";
    char k[128];
#define K(name) (snprintf(k, sizeof k, "%s.%s", p, name), k)
    OCR_TRY(get_pair(cfg, K("img_size"), 32, 100, 8, 4096, s->img_size));
    if (s->img_size[0] % 16 || s->img_size[1] % 4)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s.img_size must be a multiple of 16 in height and 4 in width",
                             ocr_config_source(cfg), p);
    OCR_TRY(get_i(cfg, K("in_channels"), 3, 1, 4, &a->in_channels));
    static const int de[3] = {64, 128, 256}, dd[3] = {3, 6, 3}, dh[3] = {2, 4, 8};
    OCR_TRY(get_triple(cfg, K("embed_dim"), de, 2, 4096, s->embed_dim));
    OCR_TRY(get_triple(cfg, K("depth"), dd, 0, 32, s->depth));
    OCR_TRY(get_triple(cfg, K("num_heads"), dh, 1, 64, s->num_heads));
    for (int i = 0; i < 3; i++)
        if (s->embed_dim[i] % s->num_heads[i])
            return ocr_set_error(OCR_ERR_CONFIG, "%s: %s.embed_dim[%d] = %d is not divisible by num_heads[%d] = %d",
                                 ocr_config_source(cfg), p, i, s->embed_dim[i], i, s->num_heads[i]);
    int total = s->depth[0] + s->depth[1] + s->depth[2];
    if (total > OCR_SVTR_MAX_BLOCKS) return cfg_error(cfg, "%s.depth: at most 64 blocks in all%s", p, "");
    const cJSON *mixer = ocr_config_node(cfg, K("mixer"));
    if (mixer) {
        if (!cJSON_IsArray(mixer) || cJSON_GetArraySize(mixer) != total)
            return ocr_set_error(OCR_ERR_CONFIG, "%s: %s.mixer must list one of \"Local\"/\"Global\"/\"Conv\" per block (%d)",
                                 ocr_config_source(cfg), p, total);
        int i = 0;
        for (const cJSON *it = mixer->child; it; it = it->next, i++) {
            if (!cJSON_IsString(it) ||
                (strcmp(it->valuestring, "Local") && strcmp(it->valuestring, "Global") && strcmp(it->valuestring, "Conv")))
                return ocr_set_error(OCR_ERR_CONFIG, "%s: %s.mixer[%d] must be \"Local\", \"Global\" or \"Conv\"",
                                     ocr_config_source(cfg), p, i);
            s->local[i] = strcmp(it->valuestring, "Local") == 0;
            s->conv[i] = strcmp(it->valuestring, "Conv") == 0;
        }
    } else {
        for (int i = 0; i < total; i++) s->local[i] = i < 6;  // PaddleOCR's default: 6 Local then Global
    }
    for (int st = 0; st < 3; st++) {
        s->local_mixer[st][0] = 7;
        s->local_mixer[st][1] = 11;
    }
    const cJSON *lm = ocr_config_node(cfg, K("local_mixer"));
    if (lm) {
        if (!cJSON_IsArray(lm) || cJSON_GetArraySize(lm) != 3)
            return cfg_error(cfg, "%s.local_mixer must be three [h, w] windows%s", p, "");
        int st = 0;
        for (const cJSON *it = lm->child; it; it = it->next, st++) {
            if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2 || !cJSON_IsNumber(it->child) ||
                !cJSON_IsNumber(it->child->next))
                return cfg_error(cfg, "%s.local_mixer entries must be [h, w] pairs%s", p, "");
            // (int) of a value beyond int is undefined (the same bug as in find_image_shape).
            double wh = it->child->valuedouble, ww = it->child->next->valuedouble;
            if (!(wh > -65536.0 && wh < 65536.0 && ww > -65536.0 && ww < 65536.0))
                return cfg_error(cfg, "%s.local_mixer windows must be below 65536%s", p, "");
            s->local_mixer[st][0] = (int)it->child->valuedouble;
            s->local_mixer[st][1] = (int)it->child->next->valuedouble;
        }
    }
    for (int st = 0, bi = 0; st < 3; st++)
        for (int i = 0; i < s->depth[st]; i++, bi++)
            if (s->conv[bi] && (s->local_mixer[st][0] < 1 || s->local_mixer[st][1] < 1 ||
                                s->local_mixer[st][0] % 2 == 0 || s->local_mixer[st][1] % 2 == 0))
                return ocr_set_error(OCR_ERR_CONFIG,
                                     "%s: %s.local_mixer[%d] = [%d, %d]: a Conv mixer's kernel must be odd and positive "
                                     "(padding k/2 keeps the token grid)",
                                     ocr_config_source(cfg), p, st, s->local_mixer[st][0], s->local_mixer[st][1]);
    const cJSON *pm = ocr_config_node(cfg, K("patch_merging"));
    if (!pm) {
        s->patch_merging = 1;
    } else if (cJSON_IsNull(pm)) {
        s->patch_merging = 0;
    } else if (cJSON_IsString(pm) && strcmp(pm->valuestring, "Conv") == 0) {
        s->patch_merging = 1;
    } else {
        return cfg_error(cfg, "%s.patch_merging must be \"Conv\" or null (the Pool variant is not supported)%s", p, "");
    }
    OCR_TRY(get_d(cfg, K("mlp_ratio"), 4.0, 0.25, 16.0, &s->mlp_ratio));
    int qkv_bias;
    OCR_TRY(ocr_config_get_bool(cfg, K("qkv_bias"), 1, &qkv_bias));
    if (!qkv_bias) return cfg_error(cfg, "%s.qkv_bias: only true is supported%s", p, "");
    OCR_TRY(require_off(cfg, K("qk_scale"), "the scale is head_dim^-0.5"));
    OCR_TRY(get_d(cfg, K("drop_rate"), 0.0, 0.0, 0.99, &s->drop_rate));
    OCR_TRY(get_d(cfg, K("last_drop"), 0.1, 0.0, 0.99, &s->last_drop));
    OCR_TRY(get_d(cfg, K("attn_drop_rate"), 0.0, 0.0, 0.99, &s->attn_drop_rate));
    OCR_TRY(get_d(cfg, K("drop_path_rate"), 0.1, 0.0, 0.99, &s->drop_path_rate));
    static const char *const ln[] = {"nn.LayerNorm", NULL};
    const char *tmp;
    OCR_TRY(require_string(cfg, K("norm_layer"), "nn.LayerNorm", ln, &tmp));
    OCR_TRY(require_string(cfg, K("sub_norm"), "nn.LayerNorm", ln, &tmp));
    OCR_TRY(get_d(cfg, K("epsilon"), 1e-6, 1e-12, 1e-1, &s->epsilon));
    OCR_TRY(get_i(cfg, K("out_channels"), 192, 1, 65536, &s->out_channels));
    OCR_TRY(get_i(cfg, K("out_char_num"), 25, 1, 4096, &s->out_char_num));
    static const char *const bu[] = {"Block", NULL}, *const act[] = {"nn.GELU", NULL};
    OCR_TRY(require_string(cfg, K("block_unit"), "Block", bu, &tmp));
    OCR_TRY(require_string(cfg, K("act"), "nn.GELU", act, &tmp));
    OCR_TRY(ocr_config_get_bool(cfg, K("last_stage"), 1, &s->last_stage));
    int sub_num;
    OCR_TRY(get_i(cfg, K("sub_num"), 2, 2, 2, &sub_num));
    // PaddleOCR's default is true (post-LN blocks, no final norm); its SVTR configs set it.
    OCR_TRY(ocr_config_get_bool(cfg, K("prenorm"), 1, &s->prenorm));
    OCR_TRY(require_off(cfg, K("use_lenhead"), "no length head"));
#undef K
    a->img_h = s->img_size[0];
    a->img_w = s->img_size[1];
    return OCR_OK;
}

// EncoderWithLightSVTR (ppocr/modeling/necks/rnn.py, PP-OCRv6 small/medium) under p, with its
// defaults (dims 64, depth 1, 8 heads, mlp_ratio 4, dropouts 0.1, local_kernel 7).
static ocr_status_t parse_lightsvtr(const OcrConfig *cfg, OcrArch *a, const char *p) {
    LightSvtrSpec *s = &a->light;
    char k[192];
#define K(key) (snprintf(k, sizeof k, "%s.%s", p, key), k)
    OCR_TRY(get_i(cfg, K("dims"), 64, 1, 65536, &s->dims));
    OCR_TRY(get_i(cfg, K("depth"), 1, 0, 64, &s->depth));
    OCR_TRY(get_i(cfg, K("num_heads"), 8, 1, 256, &s->heads));
    double v;
    OCR_TRY(get_d(cfg, K("mlp_ratio"), 4.0, 0.25, 16.0, &v));
    s->mlp_ratio = (float)v;
    OCR_TRY(get_d(cfg, K("drop_rate"), 0.1, 0.0, 0.99, &v));
    s->drop = (float)v;
    OCR_TRY(get_d(cfg, K("attn_drop_rate"), 0.1, 0.0, 0.99, &v));
    s->attn_drop = (float)v;
    OCR_TRY(get_d(cfg, K("drop_path"), 0.0, 0.0, 0.0, &v));
    OCR_TRY(get_i(cfg, K("local_kernel"), 7, 1, 63, &s->local_kernel));
    if (s->local_kernel % 2 == 0) return cfg_error(cfg, "%s must be odd%s", K("local_kernel"), "");
    OCR_TRY(ocr_config_get_bool(cfg, K("use_guide"), 0, &s->use_guide));
    int qkv_bias;
    OCR_TRY(ocr_config_get_bool(cfg, K("qkv_bias"), 1, &qkv_bias));
    if (!qkv_bias) return cfg_error(cfg, "%s: only true is supported%s", K("qkv_bias"), "");
    OCR_TRY(require_off(cfg, K("qk_scale"), "the scale is head_dim^-0.5"));
    static const char *const kw[] = {"hidden_dims", "kernel_size", "hidden_size", NULL};
    for (int i = 0; kw[i]; i++)
        if (ocr_config_has(cfg, K(kw[i])))
            ocr_config_record_ignored(cfg, k, "EncoderWithLightSVTR takes it in **kwargs and ignores it");
    if (s->dims % s->heads)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s.dims %d is not divisible by num_heads %d", ocr_config_source(cfg), p,
                             s->dims, s->heads);
#undef K
    return OCR_OK;
}

// The SVTR neck's keys under p: "Architecture.Neck" (SequenceEncoder, the encoder type in
// encoder_type) or, in a MultiHead, "Architecture.Head.head_list.0.CTCHead.Neck" (PaddleOCR pops
// `name` as the encoder type there).
static ocr_status_t parse_neck_at(const OcrConfig *cfg, OcrArch *a, const char *p, int multihead) {
    const cJSON *neck = ocr_config_node(cfg, p);
    if (!neck || cJSON_IsNull(neck)) {
        a->neck_svtr = 0;
        return OCR_OK;
    }
    static const char *const keys[] = {"name",      "encoder_type", "dims",      "depth",          "hidden_dims",
                                       "use_guide", "num_heads",    "mlp_ratio", "drop_rate",      "attn_drop_rate",
                                       "drop_path", "kernel_size",  "qkv_bias",  "qk_scale",       "hidden_size",
                                       "local_kernel", NULL};
    static const char *const mh_keys[] = {"name",      "dims",      "depth",     "hidden_dims",    "use_guide",
                                          "num_heads", "mlp_ratio", "drop_rate", "attn_drop_rate", "drop_path",
                                          "kernel_size", "qkv_bias", "qk_scale", "local_kernel", NULL};
    OCR_TRY(ocr_config_check_keys(cfg, p, multihead ? mh_keys : keys));
    static const char *const names[] = {"SequenceEncoder", NULL},
                             *const types[] = {"svtr", "lightsvtr", "reshape", NULL};
    const char *name, *type;
    char k[192];
#define K(key) (snprintf(k, sizeof k, "%s.%s", p, key), k)
    if (multihead) {
        OCR_TRY(require_string(cfg, K("name"), NULL, types, &type));
    } else {
        OCR_TRY(require_string(cfg, K("name"), "SequenceEncoder", names, &name));
        OCR_TRY(require_string(cfg, K("encoder_type"), "reshape", types, &type));
    }
    a->neck_svtr = strcmp(type, "svtr") == 0;
    if (strcmp(type, "lightsvtr") == 0) {
        a->neck_light = 1;
        OCR_TRY(parse_lightsvtr(cfg, a, p));
        return OCR_OK;
    }
    if (ocr_config_has(cfg, K("local_kernel")))
        return cfg_error(cfg, "%s is an option of the lightsvtr encoder only%s", K("local_kernel"), "");
    SvtrNeckSpec *s = &a->neck;
    OCR_TRY(get_i(cfg, K("dims"), 64, 1, 65536, &s->dims));
    OCR_TRY(get_i(cfg, K("depth"), 2, 0, 64, &s->depth));
    OCR_TRY(get_i(cfg, K("hidden_dims"), 120, 1, 65536, &s->hidden));
    OCR_TRY(ocr_config_get_bool(cfg, K("use_guide"), 0, &s->use_guide));
    OCR_TRY(get_i(cfg, K("num_heads"), 8, 1, 256, &s->heads));
    double v;
    OCR_TRY(get_d(cfg, K("mlp_ratio"), 2.0, 0.25, 16.0, &v));
    s->mlp_ratio = (float)v;
    OCR_TRY(get_d(cfg, K("drop_rate"), 0.1, 0.0, 0.99, &v));
    s->drop = (float)v;
    OCR_TRY(get_d(cfg, K("attn_drop_rate"), 0.1, 0.0, 0.99, &v));
    s->attn_drop = (float)v;
    OCR_TRY(get_d(cfg, K("drop_path"), 0.0, 0.0, 0.0, &v));
    OCR_TRY(get_pair(cfg, K("kernel_size"), 3, 3, 1, 15, s->kernel));
    if (s->kernel[0] % 2 == 0 || s->kernel[1] % 2 == 0) return cfg_error(cfg, "%s must be odd%s", K("kernel_size"), "");
    int qkv_bias;
    OCR_TRY(ocr_config_get_bool(cfg, K("qkv_bias"), 1, &qkv_bias));
    if (!qkv_bias) return cfg_error(cfg, "%s: only true is supported%s", K("qkv_bias"), "");
    OCR_TRY(require_off(cfg, K("qk_scale"), "the scale is head_dim^-0.5"));
#undef K
    if (s->hidden % s->heads)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s.hidden_dims %d is not divisible by num_heads %d",
                             ocr_config_source(cfg), p, s->hidden, s->heads);
    return OCR_OK;
}

static ocr_status_t parse_neck(const OcrConfig *cfg, OcrArch *a) {
    return parse_neck_at(cfg, a, "Architecture.Neck", 0);
}

// One entry of a list of single-key maps (head_list, loss_config_list): its key, or an error.
static ocr_status_t single_key_entry(const OcrConfig *cfg, const char *list_path, int i, const char **key) {
    char p[160];
    snprintf(p, sizeof p, "%s.%d", list_path, i);
    const cJSON *e = ocr_config_node(cfg, p);
    if (!e || !cJSON_IsObject(e) || !e->child || e->child->next)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s must be a map with one key (a name)", ocr_config_source(cfg), p);
    *key = e->child->string;
    return OCR_OK;
}

#define MH_LIST "Architecture.Head.head_list"
#define MH_CTC "Architecture.Head.head_list.0.CTCHead"

// MultiLoss (ppocr/losses/rec_multi_loss.py): loss_config_list [{CTCLoss}, {NRTRLoss|SARLoss}] in
// the order of the head list, weight_1 (CTC) and weight_2 (guidance), both 1.0 by default.
static ocr_status_t parse_multiloss(const OcrConfig *cfg, OcrArch *a, const char *guide_loss) {
    const char *src = ocr_config_source(cfg);
    static const char *const names[] = {"MultiLoss", NULL};
    const char *name;
    OCR_TRY(require_string(cfg, "Loss.name", NULL, names, &name));
    static const char *const keys[] = {"name", "loss_config_list", "weight_1", "weight_2", NULL};
    OCR_TRY(ocr_config_check_keys(cfg, "Loss", keys));
    const cJSON *list = ocr_config_node(cfg, "Loss.loss_config_list");
    if (!list || !cJSON_IsArray(list) || cJSON_GetArraySize(list) != 2)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Loss.loss_config_list must list 2 losses: CTCLoss, then %s", src,
                             guide_loss);
    const char *k0 = NULL, *k1 = NULL;
    OCR_TRY(single_key_entry(cfg, "Loss.loss_config_list", 0, &k0));
    OCR_TRY(single_key_entry(cfg, "Loss.loss_config_list", 1, &k1));
    if (strcmp(k0, "CTCLoss") != 0 || strcmp(k1, guide_loss) != 0)
        return ocr_set_error(OCR_ERR_CONFIG,
                             "%s: Loss.loss_config_list is [%s, %s]; with this head_list it must be [CTCLoss, %s]",
                             src, k0, k1, guide_loss);
    static const char *const ctc_keys[] = {"use_focal_loss", NULL};
    OCR_TRY(ocr_config_check_keys(cfg, "Loss.loss_config_list.0.CTCLoss", ctc_keys));
    OCR_TRY(require_off(cfg, "Loss.loss_config_list.0.CTCLoss.use_focal_loss", "PaddleOCR's MultiHead configs do not use it"));
    MultiHeadSpec *m = &a->multihead;
    if (m->kind == OCR_GUIDE_NRTR) {
        static const char *const nrtr_keys[] = {"smoothing", "ignore_index", NULL};
        OCR_TRY(ocr_config_check_keys(cfg, "Loss.loss_config_list.1.NRTRLoss", nrtr_keys));
        OCR_TRY(ocr_config_get_bool(cfg, "Loss.loss_config_list.1.NRTRLoss.smoothing", 1, &m->nrtr_smoothing));
        OCR_TRY(get_i(cfg, "Loss.loss_config_list.1.NRTRLoss.ignore_index", 0, -1, 1 << 20, &m->nrtr_ignore_index));
    }
    if (m->kind == OCR_GUIDE_SAR) {
        // tools/train.py writes ignore_index = char_num + 1 (PAD) into the config; checked against
        // the class count once the dictionary is read (parse_head).
        static const char *const sar_keys[] = {"ignore_index", NULL};
        OCR_TRY(ocr_config_check_keys(cfg, "Loss.loss_config_list.1.SARLoss", sar_keys));
        OCR_TRY(get_i(cfg, "Loss.loss_config_list.1.SARLoss.ignore_index", -1, -1, 1 << 20, &m->sar_ignore_index));
    }
    OCR_TRY(get_d(cfg, "Loss.weight_1", 1.0, 0.0, 1e6, &m->weight_ctc));
    OCR_TRY(get_d(cfg, "Loss.weight_2", 1.0, 0.0, 1e6, &m->weight_gtc));
    return OCR_OK;
}

// Architecture.Head.name MultiHead (ppocr/modeling/heads/rec_multi_head.py): head_list [{CTCHead:
// {Neck, Head}}, {NRTRHead: {...}} or {SARHead: {...}}]. The CTC entry's Neck and Head become our
// neck and CTC FC; the second entry the guidance branch.
static ocr_status_t parse_multihead(const OcrConfig *cfg, OcrArch *a) {
    const char *src = ocr_config_source(cfg);
    static const char *const keys[] = {"name", "head_list", "out_channels_list", "use_pool", "use_pos", NULL};
    OCR_TRY(ocr_config_check_keys(cfg, "Architecture.Head", keys));
    OCR_TRY(require_off(cfg, "Architecture.Head.use_pool", "PaddleOCR's MultiHead configs leave it off"));
    OCR_TRY(require_off(cfg, "Architecture.Head.use_pos", "PaddleOCR's MultiHead configs leave it off"));
    const cJSON *neck = ocr_config_node(cfg, "Architecture.Neck");
    if (neck && !cJSON_IsNull(neck))
        return ocr_set_error(OCR_ERR_CONFIG,
                             "%s: Architecture.Neck with a MultiHead: the CTC neck goes in "
                             "Architecture.Head.head_list.0.CTCHead.Neck, as in PaddleOCR's configs",
                             src);
    const cJSON *list = ocr_config_node(cfg, MH_LIST);
    if (!list || !cJSON_IsArray(list) || cJSON_GetArraySize(list) != 2)
        return ocr_set_error(OCR_ERR_CONFIG,
                             "%s: " MH_LIST " must list 2 heads: CTCHead, then NRTRHead or SARHead", src);
    const char *k0 = NULL, *k1 = NULL;
    OCR_TRY(single_key_entry(cfg, MH_LIST, 0, &k0));
    OCR_TRY(single_key_entry(cfg, MH_LIST, 1, &k1));
    if (strcmp(k0, "CTCHead") != 0)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: " MH_LIST ".0 is %s; the CTC head comes first (CTCHead)", src, k0);
    static const char *const ctc_keys[] = {"Neck", "Head", NULL};
    OCR_TRY(ocr_config_check_keys(cfg, MH_CTC, ctc_keys));
    if (!ocr_config_has(cfg, MH_CTC ".Neck"))
        return ocr_set_error(OCR_ERR_CONFIG, "%s: " MH_CTC ".Neck is missing (PaddleOCR's MultiHead requires it)", src);
    OCR_TRY(parse_neck_at(cfg, a, MH_CTC ".Neck", 1));
    static const char *const fc_keys[] = {"fc_decay", "mid_channels", "return_feats", "use_guide", NULL};
    OCR_TRY(ocr_config_check_keys(cfg, MH_CTC ".Head", fc_keys));
    MultiHeadSpec *m = &a->multihead;
    int64_t L;
    OCR_TRY(ocr_config_get_int(cfg, "Global.max_text_length", 25, &L));
    OCR_TRY(ocr_config_check_range(cfg, "Global.max_text_length", (double)L, 3, 1000));
    m->steps = (int)L - 1;
    const char *guide_loss;
    if (strcmp(k1, "NRTRHead") == 0) {
        m->kind = OCR_GUIDE_NRTR;
        guide_loss = "NRTRLoss";
        static const char *const nrtr_keys[] = {"nrtr_dim", "max_text_length", "num_decoder_layers", NULL};
        const char *p = MH_LIST ".1.NRTRHead";
        OCR_TRY(ocr_config_check_keys(cfg, p, nrtr_keys));
        OCR_TRY(get_i(cfg, MH_LIST ".1.NRTRHead.nrtr_dim", 256, 32, 8192, &m->nrtr_dim));
        if (m->nrtr_dim % 32)
            return ocr_set_error(OCR_ERR_CONFIG, "%s: %s.nrtr_dim %d must be a multiple of 32 (nhead = nrtr_dim / 32)",
                                 src, p, m->nrtr_dim);
        OCR_TRY(get_i(cfg, MH_LIST ".1.NRTRHead.num_decoder_layers", 4, 1, 64, &m->nrtr_layers));
        m->nrtr_dropout = 0.1f;  // MultiHead leaves the Transformer's residual_dropout_rate at its default
        // The head's own max_text_length bounds PaddleOCR's greedy inference decode, which the
        // MultiHead never runs; training sequences follow Global.max_text_length.
        int unused;
        OCR_TRY(get_i(cfg, MH_LIST ".1.NRTRHead.max_text_length", 25, 1, 1000, &unused));
    } else if (strcmp(k1, "SARHead") == 0) {
        // SARHead (ppocr/modeling/heads/rec_sar_head.py) with the forward-only LSTM encoder and
        // decoder and the concatenated prediction input PaddleOCR's configs use.
        m->kind = OCR_GUIDE_SAR;
        guide_loss = "SARLoss";
        static const char *const sar_keys[] = {"enc_dim", "max_text_length", "d_k", "enc_bi_rnn", "enc_drop_rnn",
                                               "enc_gru", "dec_bi_rnn", "dec_drop_rnn", "dec_gru", "pred_dropout",
                                               "pred_concat", NULL};
        const char *p = MH_LIST ".1.SARHead";
        OCR_TRY(ocr_config_check_keys(cfg, p, sar_keys));
        OCR_TRY(get_i(cfg, MH_LIST ".1.SARHead.enc_dim", 512, 1, 8192, &m->sar_enc_dim));
        OCR_TRY(get_i(cfg, MH_LIST ".1.SARHead.d_k", 512, 1, 8192, &m->sar_d_k));
        OCR_TRY(require_off(cfg, MH_LIST ".1.SARHead.enc_bi_rnn", "the encoder LSTM is forward-only"));
        OCR_TRY(require_off(cfg, MH_LIST ".1.SARHead.dec_bi_rnn", "the decoder LSTM is forward-only"));
        OCR_TRY(require_off(cfg, MH_LIST ".1.SARHead.enc_gru", "the encoder is an LSTM"));
        OCR_TRY(require_off(cfg, MH_LIST ".1.SARHead.dec_gru", "the decoder is an LSTM"));
        double d;
        OCR_TRY(get_d(cfg, MH_LIST ".1.SARHead.enc_drop_rnn", 0.1, 0.0, 0.999, &d));
        m->sar_enc_drop = (float)d;
        OCR_TRY(get_d(cfg, MH_LIST ".1.SARHead.pred_dropout", 0.1, 0.0, 0.999, &d));
        m->sar_pred_drop = (float)d;
        OCR_TRY(get_d(cfg, MH_LIST ".1.SARHead.dec_drop_rnn", 0.0, 0.0, 0.0, &d));  // PaddleOCR's 0.0 only
        int concat;
        OCR_TRY(ocr_config_get_bool(cfg, MH_LIST ".1.SARHead.pred_concat", 1, &concat));
        if (!concat)
            return ocr_set_error(OCR_ERR_CONFIG, "%s: %s.pred_concat false is not supported (PaddleOCR's default true)",
                                 src, p);
        // As NRTRHead's: only PaddleOCR's inference decode (never run by the MultiHead) reads it.
        int unused;
        OCR_TRY(get_i(cfg, MH_LIST ".1.SARHead.max_text_length", 30, 1, 1000, &unused));
    } else {
        return ocr_set_error(OCR_ERR_CONFIG, "%s: " MH_LIST ".1 is %s; the guidance head must be NRTRHead or SARHead",
                             src, k1);
    }
    return parse_multiloss(cfg, a, guide_loss);
}

static ocr_status_t parse_head(const OcrConfig *cfg, OcrArch *a) {
    static const char *const keys[] = {"name",         "fc_decay",     "mid_channels", "out_channels",
                                       "return_feats", "use_guide",    NULL};
    static const char *const names[] = {"CTCHead", "MultiHead", NULL};
    const char *name;
    // The name first: another head's keys (MultiHead's head_list) are not typos.
    OCR_TRY(require_string(cfg, "Architecture.Head.name", "CTCHead", names, &name));
    const char *h = "Architecture.Head";
    if (strcmp(name, "MultiHead") == 0) {
        OCR_TRY(parse_multihead(cfg, a));
        h = MH_CTC ".Head";
    } else {
        OCR_TRY(ocr_config_check_keys(cfg, "Architecture.Head", keys));
        const char *loss;
        OCR_TRY(ocr_config_get_string(cfg, "Loss.name", "CTCLoss", &loss));
        if (strcmp(loss, "MultiLoss") == 0)
            return ocr_set_error(OCR_ERR_CONFIG, "%s: Loss.name MultiLoss needs Architecture.Head.name MultiHead",
                                 ocr_config_source(cfg));
    }
    char k[192];
#define K(key) (snprintf(k, sizeof k, "%s.%s", h, key), k)
    OCR_TRY(get_d(cfg, K("fc_decay"), 0.0004, 0.0, 1.0, &a->fc_decay));
    const cJSON *mid = ocr_config_node(cfg, K("mid_channels"));
    a->head_mid = 0;
    if (mid && !cJSON_IsNull(mid)) OCR_TRY(get_i(cfg, K("mid_channels"), 0, 1, 65536, &a->head_mid));
    OCR_TRY(require_off(cfg, K("return_feats"), "the head returns logits"));
    // use_guide: PP-OCRv6 tiny's guide layer (depthwise Conv1D k5, BN, hardswish, 1x1, BN, hardswish).
    OCR_TRY(ocr_config_get_bool(cfg, K("use_guide"), 0, &a->head_guide));
    // Classes: the dictionary (Global.character_dict_path + use_space_char) as PaddleOCR
    // counts them, or Head.out_channels when given explicitly.
    const char *dict;
    int space;
    OCR_TRY(ocr_config_get_string(cfg, "Global.character_dict_path", NULL, &dict));
    OCR_TRY(ocr_config_get_bool(cfg, "Global.use_space_char", 0, &space));
    int from_dict = 0;
    if (dict && dict[0]) {
        if (!resolve_path(cfg, dict, a->dict_path, sizeof a->dict_path))
            return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.character_dict_path %s does not exist",
                                 ocr_config_source(cfg), dict);
        from_dict = ocr_dict_num_classes(a->dict_path, space);
        if (from_dict < 0) return ocr_wrap_error(OCR_ERR_CONFIG, "%s: Global.character_dict_path", ocr_config_source(cfg));
    } else {
        from_dict = 1 + 36 + (space ? 1 : 0);  // PaddleOCR's default "0123456789abcdefghijklmnopqrstuvwxyz"
    }
    if (ocr_config_has(cfg, K("out_channels"))) {
        OCR_TRY(get_i(cfg, K("out_channels"), 0, 2, 1 << 20, &a->num_classes));
        if (dict && dict[0] && a->num_classes != from_dict)
            return ocr_set_error(OCR_ERR_CONFIG,
                                 "%s: Architecture.Head.out_channels is %d but the dictionary %s gives %d classes",
                                 ocr_config_source(cfg), a->num_classes, a->dict_path, from_dict);
    } else {
        a->num_classes = from_dict;
    }
#undef K
    if (a->multihead.kind == OCR_GUIDE_SAR && a->multihead.sar_ignore_index >= 0 &&
        a->multihead.sar_ignore_index != a->num_classes + 1)
        return ocr_set_error(OCR_ERR_CONFIG,
                             "%s: Loss.loss_config_list.1.SARLoss.ignore_index is %d; SARLabelEncode's PAD is %d "
                             "(the %d CTC classes + 1)",
                             ocr_config_source(cfg), a->multihead.sar_ignore_index, a->num_classes + 1, a->num_classes);
    return OCR_OK;
}

ocr_status_t ocr_arch_from_config(OcrArch *a, const OcrConfig *cfg) {
    memset(a, 0, sizeof *a);
    a->in_channels = 3;
    const cJSON *arch = ocr_config_node(cfg, "Architecture");
    if (!arch || !cJSON_IsObject(arch))
        return ocr_set_error(OCR_ERR_CONFIG, "%s: the Architecture section is missing", ocr_config_source(cfg));
    static const char *const keys[] = {"model_type", "algorithm", "Transform", "Backbone", "Neck", "Head", NULL};
    static const char *const types[] = {"rec", NULL}, *const algos[] = {"SVTR_LCNet", "SVTR", "SVTR_HGNet", NULL};
    const char *s;
    // Type and algorithm first: other algorithms' keys (in_channels, name) are not typos.
    OCR_TRY(require_string(cfg, "Architecture.model_type", "rec", types, &s));
    OCR_TRY(require_string(cfg, "Architecture.algorithm", "SVTR_LCNet", algos, &s));
    OCR_TRY(ocr_config_check_keys(cfg, "Architecture", keys));
    snprintf(a->algorithm, sizeof a->algorithm, "%s", s);
    OCR_TRY(require_off(cfg, "Architecture.Transform", "no STN/TPS rectification"));
    if (!ocr_config_has(cfg, "Architecture.Backbone"))
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Architecture.Backbone is missing", ocr_config_source(cfg));
    if (!ocr_config_has(cfg, "Architecture.Head"))
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Architecture.Head is missing", ocr_config_source(cfg));
    static const char *const backbones[] = {"MobileNetV1Enhance", "PPLCNetV3", "PPLCNetV4", "SVTRNet", "PPHGNetV2_B4",
                                            NULL};
    const char *bb;
    OCR_TRY(require_string(cfg, "Architecture.Backbone.name", NULL, backbones, &bb));
    a->img_h = 48;
    a->img_w = 320;
    find_image_shape(cfg, &a->img_h, &a->img_w);
    if (strcmp(bb, "MobileNetV1Enhance") == 0) {
        a->backbone = OCR_BACKBONE_MV1E;
        OCR_TRY(parse_mv1e(cfg, a));
    } else if (strcmp(bb, "PPLCNetV3") == 0) {
        a->backbone = OCR_BACKBONE_LCNETV3;
        OCR_TRY(parse_lcnet(cfg, a));
    } else if (strcmp(bb, "PPLCNetV4") == 0) {
        a->backbone = OCR_BACKBONE_LCNETV4;
        OCR_TRY(parse_lcnet4(cfg, a));
    } else if (strcmp(bb, "PPHGNetV2_B4") == 0) {
        a->backbone = OCR_BACKBONE_HGNETV2;
        OCR_TRY(parse_hgnet2(cfg, a));
    } else {
        a->backbone = OCR_BACKBONE_SVTRNET;
        OCR_TRY(parse_svtrnet(cfg, a));
    }
    OCR_TRY(parse_neck(cfg, a));
    OCR_TRY(parse_head(cfg, a));
    if (a->backbone == OCR_BACKBONE_SVTRNET && !a->svtr.last_stage && a->neck_svtr)
        // PaddleOCR's SVTRNet with last_stage false returns its (B, H*W, C) token sequence, and
        // its EncoderWithSVTR (built for Backbone.out_channels inputs) raises on that 3-D tensor
        // ("The input of Op(Conv) should be a 4-D or 5-D Tensor", paddlepaddle 3.3.1): there is
        // no PaddleOCR computation to reproduce (PP-OCRv4's distillation teacher as published).
        return ocr_set_error(OCR_ERR_CONFIG,
                             "%s: Architecture.Backbone.last_stage false: SVTRNet then returns its (B, H*W, C) token "
                             "sequence, which the SVTR neck cannot read (PaddleOCR's EncoderWithSVTR raises on it too: "
                             "a 4-D input of Backbone.out_channels = %d channels expected, %d given); set it to true",
                             ocr_config_source(cfg), a->svtr.out_channels, a->svtr.embed_dim[2]);
    int64_t seed;
    OCR_TRY(ocr_config_get_int(cfg, "Global.seed", 1024, &seed));
    a->seed = (uint64_t)seed;
    if (a->img_h < 8 || a->img_w < 8)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: the input size %dx%d is too small", ocr_config_source(cfg), a->img_h,
                             a->img_w);
    return OCR_OK;
}

void ocr_arch_ppocrv4_deploy(OcrArch *a, int classes) {
    memset(a, 0, sizeof *a);
    snprintf(a->algorithm, sizeof a->algorithm, "SVTR_LCNet");
    a->in_channels = 3;
    a->img_h = 48;
    a->img_w = 320;
    a->backbone = OCR_BACKBONE_LCNETV3;
    a->lcnet.scale = 0.95;
    a->lcnet.conv_kxk_num = 4;
    a->lcnet.lab_lr = 0.1;
    for (int i = 0; i < 6; i++) a->lcnet.lr_mult_list[i] = 1.0;
    a->lcnet.deploy = 1;
    a->neck_svtr = 1;
    SvtrNeckSpec n = {.in_channels = 0, .dims = 120, .depth = 2, .hidden = 120, .kernel = {1, 3}, .heads = 8,
                      .use_guide = 0, .mlp_ratio = 2.0f, .drop = 0.1f, .attn_drop = 0.1f};
    a->neck = n;
    a->num_classes = classes;
    a->fc_decay = 1e-5;
    a->seed = 1024;
}

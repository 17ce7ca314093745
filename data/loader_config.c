// Reading a Train/Eval section of a PaddleOCR-style config into an OcrLoaderConfig: the dataset
// (label files or LMDB, ratios, delimiter), its transforms, the sampler (multi-scale included) and
// the loader keys; and the dictionary a config names. See loader_config.h.
#include "data/loader_config.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"

static char *dup_str(const char *s) {
    if (!s) return NULL;
    char *d = strdup(s);
    return d;
}

void ocr_loader_config_free(OcrLoaderConfig *lc) {
    free(lc->config_name);
    free(lc->data_dir);
    for (int i = 0; i < lc->num_label_files; i++) free(lc->label_files[i]);
    free(lc->label_files);
    free(lc->ratios);
    free(lc->delimiter);
    free(lc->pack_file);
    memset(lc, 0, sizeof *lc);
}

static ocr_status_t oom(void) { return ocr_set_error(OCR_ERR_OOM, "loader config: out of memory"); }

static ocr_status_t parse_label_files(OcrLoaderConfig *lc, const OcrConfig *cfg, const char *path) {
    const cJSON *node = ocr_config_node(cfg, path);
    const char *src = ocr_config_source(cfg);
    if (!node || cJSON_IsNull(node))
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s is missing (a list of label files)", src, path);
    int n = cJSON_IsString(node) ? 1 : cJSON_IsArray(node) ? cJSON_GetArraySize(node) : -1;
    if (n < 1) return ocr_set_error(OCR_ERR_CONFIG, "%s: %s must be a non-empty list of file names", src, path);
    lc->label_files = calloc((size_t)n, sizeof(char *));
    if (!lc->label_files) return oom();
    for (int i = 0; i < n; i++) {
        const cJSON *item = cJSON_IsString(node) ? node : cJSON_GetArrayItem(node, i);
        if (!cJSON_IsString(item) || !item->valuestring[0])
            return ocr_set_error(OCR_ERR_CONFIG, "%s: %s.%d must be a file name", src, path, i);
        lc->label_files[i] = dup_str(item->valuestring);
        if (!lc->label_files[i]) return oom();
        lc->num_label_files = i + 1;
    }
    return OCR_OK;
}

static ocr_status_t parse_scales(OcrLoaderConfig *lc, const OcrConfig *cfg, const char *base) {
    const char *src = ocr_config_source(cfg);
    char p[256];
    static const char *const keys[] = {"name",          "scales",      "first_bs", "fix_bs", "divided_factor",
                                       "is_training", "ratio_wh", "max_w",    "seed",   NULL};
    OCR_TRY(ocr_config_check_keys(cfg, base, keys));
    const char *name;
    snprintf(p, sizeof p, "%s.name", base);
    OCR_TRY(ocr_config_require_string(cfg, p, &name));
    if (strcmp(name, "MultiScaleSampler") != 0)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s: unknown sampler %s (known: MultiScaleSampler)", src, p, name);
    snprintf(p, sizeof p, "%s.scales", base);
    const cJSON *sc = ocr_config_node(cfg, p);
    int n = sc && cJSON_IsArray(sc) ? cJSON_GetArraySize(sc) : 0;
    if (n < 1 || n > OCR_SAMPLER_MAX_SCALES)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s must be a list of 1..%d [width, height] pairs", src, p,
                             OCR_SAMPLER_MAX_SCALES);
    int w[OCR_SAMPLER_MAX_SCALES], h[OCR_SAMPLER_MAX_SCALES];
    for (int i = 0; i < n; i++) {
        const cJSON *it = cJSON_GetArrayItem(sc, i);
        if (cJSON_IsNumber(it)) {
            w[i] = h[i] = it->valueint;
        } else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsNumber(cJSON_GetArrayItem(it, 0)) &&
                   cJSON_IsNumber(cJSON_GetArrayItem(it, 1))) {
            w[i] = cJSON_GetArrayItem(it, 0)->valueint;
            h[i] = cJSON_GetArrayItem(it, 1)->valueint;
        } else {
            return ocr_set_error(OCR_ERR_CONFIG, "%s: %s.%d must be [width, height]", src, p, i);
        }
        if (w[i] < 1 || w[i] > 16384 || h[i] < 1 || h[i] > 1024)
            return ocr_set_error(OCR_ERR_CONFIG, "%s: %s.%d: [%d, %d] out of range", src, p, i, w[i], h[i]);
    }
    int64_t first_bs;
    int fix_bs, training;
    snprintf(p, sizeof p, "%s.first_bs", base);
    OCR_TRY(ocr_config_get_int(cfg, p, 128, &first_bs));
    OCR_TRY(ocr_config_check_range(cfg, p, (double)first_bs, 1, 65536));
    snprintf(p, sizeof p, "%s.fix_bs", base);
    OCR_TRY(ocr_config_get_bool(cfg, p, 1, &fix_bs));
    snprintf(p, sizeof p, "%s.is_training", base);
    OCR_TRY(ocr_config_get_bool(cfg, p, 1, &training));
    int64_t df[2] = {8, 16};
    int ndf;
    snprintf(p, sizeof p, "%s.divided_factor", base);
    OCR_TRY(ocr_config_get_int_list(cfg, p, df, 2, &ndf));
    if (ndf != 0 && ndf != 2)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s must be [width factor, height factor]", src, p);
    if (!training) {  // PaddleOCR: only the first scale, unrounded, at first_bs
        lc->sampler.num_scales = 1;
        lc->sampler.scales[0] = (OcrBatchShape){w[0], h[0], (int)first_bs};
        return OCR_OK;
    }
    ocr_status_t st = ocr_sampler_multiscale_shapes(lc->sampler.scales, w, h, n, (int)first_bs, fix_bs, (int)df[0],
                                                    (int)df[1]);
    if (st != OCR_OK) return ocr_wrap_error(st, "%s: %s", src, base);
    lc->sampler.num_scales = n;
    return OCR_OK;
}

ocr_status_t ocr_loader_config_parse(OcrLoaderConfig *lc, const OcrConfig *cfg, const char *section) {
    memset(lc, 0, sizeof *lc);
    ocr_status_t st = OCR_OK;
    const char *src = ocr_config_source(cfg);
    char p[256], base[128];
    snprintf(lc->section, sizeof lc->section, "%s", section);
    lc->config_name = dup_str(src);
    if (!lc->config_name) return oom();
    int64_t v;
#define TRY_CFG(stmt)                                  \
    do {                                               \
        if ((st = (stmt)) != OCR_OK) goto fail;        \
    } while (0)
    TRY_CFG(ocr_config_get_int(cfg, "Global.max_text_length", 25, &v));
    TRY_CFG(ocr_config_check_range(cfg, "Global.max_text_length", (double)v, 1, 1000));
    lc->max_text_length = (int)v;
    int global_len = ocr_config_has(cfg, "Global.max_text_length") ? lc->max_text_length : 0;
    TRY_CFG(ocr_config_get_int(cfg, "Global.seed", 1024, &v));
    lc->seed = (uint64_t)v;

    // dataset
    snprintf(base, sizeof base, "%s.dataset", section);
    if (!ocr_config_has(cfg, base)) {
        st = ocr_set_error(OCR_ERR_CONFIG, "%s: %s is missing", src, base);
        goto fail;
    }
    static const char *const dkeys[] = {"name",       "data_dir",   "label_file_list",      "ratio_list",
                                        "delimiter",  "transforms", "ext_op_transform_idx", "ds_width",
                                        "batch_ratio_list", NULL};
    TRY_CFG(ocr_config_check_keys(cfg, base, dkeys));
    const char *name;
    snprintf(p, sizeof p, "%s.name", base);
    TRY_CFG(ocr_config_get_string(cfg, p, "SimpleDataSet", &name));
    int multiscale = strcmp(name, "MultiScaleDataSet") == 0;
    lc->lmdb = strcmp(name, "LMDBDataSet") == 0;
    if (!multiscale && !lc->lmdb && strcmp(name, "SimpleDataSet") != 0) {
        st = ocr_set_error(OCR_ERR_CONFIG,
                           "%s: %s: unknown dataset %s (known: SimpleDataSet, MultiScaleDataSet, LMDBDataSet)", src, p,
                           name);
        goto fail;
    }
    const char *s;
    snprintf(p, sizeof p, "%s.data_dir", base);
    TRY_CFG(ocr_config_get_string(cfg, p, "", &s));
    if (!(lc->data_dir = dup_str(s))) goto nomem;
    if (lc->lmdb) {
        // PaddleOCR's LMDBDataSet reads data_dir only: the labels are records in the LMDB.
        if (!s[0]) {
            st = ocr_set_error(OCR_ERR_CONFIG, "%s: %s is required for LMDBDataSet (the folder holding the LMDB "
                               "folders)", src, p);
            goto fail;
        }
        static const char *const unused[] = {"label_file_list", "delimiter", NULL};
        for (int i = 0; unused[i]; i++) {
            snprintf(p, sizeof p, "%s.%s", base, unused[i]);
            if (ocr_config_has(cfg, p))
                ocr_config_record_ignored(cfg, p, "LMDBDataSet reads its labels from the LMDB records");
        }
        snprintf(p, sizeof p, "%s.ratio_list", base);
        if (ocr_config_has(cfg, p))
            ocr_config_record_ignored(cfg, p, "PaddleOCR's LMDBDataSet does not subsample (it only sets need_reset)");
    } else {
        snprintf(p, sizeof p, "%s.label_file_list", base);
        TRY_CFG(parse_label_files(lc, cfg, p));
    }
    snprintf(p, sizeof p, "%s.ratio_list", base);
    lc->ratios = calloc((size_t)(lc->num_label_files ? lc->num_label_files : 1), sizeof(double));
    if (!lc->ratios) goto nomem;
    if (lc->lmdb) {
        double r[64];
        int nr;  // validated for its type only
        TRY_CFG(ocr_config_get_double_list(cfg, p, r, 64, &nr));
    } else {
        TRY_CFG(ocr_config_get_double_list(cfg, p, lc->ratios, lc->num_label_files, &lc->num_ratios));
    }
    if (lc->num_ratios != 0 && lc->num_ratios != 1 && lc->num_ratios != lc->num_label_files) {
        st = ocr_set_error(OCR_ERR_CONFIG, "%s: %s has %d entries for %d label files", src, p, lc->num_ratios,
                           lc->num_label_files);
        goto fail;
    }
    for (int i = 0; i < lc->num_ratios; i++)
        if (!(lc->ratios[i] > 0.0 && lc->ratios[i] <= 1.0)) {
            st = ocr_set_error(OCR_ERR_CONFIG, "%s: %s.%d must be in (0, 1], got %g", src, p, i, lc->ratios[i]);
            goto fail;
        }
    // batch_ratio_list: every batch mixed from the label files (ours; PaddleOCR has no per-batch
    // mix). Checked here so that a bad value stops the run before anything is read.
    snprintf(p, sizeof p, "%s.batch_ratio_list", base);
    if (ocr_config_has(cfg, p) && !cJSON_IsNull(ocr_config_node(cfg, p))) {
        double mix[OCR_SAMPLER_MAX_SOURCES + 1];
        int nmix = 0;
        TRY_CFG(ocr_config_get_double_list(cfg, p, mix, OCR_SAMPLER_MAX_SOURCES + 1, &nmix));
        if (strcmp(section, "Train") != 0) {
            st = ocr_set_error(OCR_ERR_CONFIG, "%s: %s: only Train batches are mixed (evaluation scores every line)",
                               src, p);
            goto fail;
        }
        if (lc->lmdb) {
            st = ocr_set_error(OCR_ERR_CONFIG, "%s: %s needs label_file_list (one fraction per label file); "
                               "LMDBDataSet has none", src, p);
            goto fail;
        }
        if (nmix != lc->num_label_files) {
            st = ocr_set_error(OCR_ERR_CONFIG, "%s: %s has %d entries for %d label files (one fraction of every batch "
                               "per label file)", src, p, nmix, lc->num_label_files);
            goto fail;
        }
        if (nmix >= 2) {
            if (ocr_sampler_mix_check(mix, nmix) != OCR_OK) {
                st = ocr_wrap_error(OCR_ERR_CONFIG, "%s: %s", src, p);
                goto fail;
            }
            lc->sampler.num_sources = nmix;
            memcpy(lc->sampler.mix, mix, sizeof(double) * (size_t)nmix);
        } else if (!(mix[0] == 1.0)) {
            st = ocr_set_error(OCR_ERR_CONFIG, "%s: %s: one label file takes the whole batch (1.0), got %g", src, p,
                               mix[0]);
            goto fail;
        }
    }
    snprintf(p, sizeof p, "%s.delimiter", base);
    TRY_CFG(ocr_config_get_string(cfg, p, "\t", &s));
    if (!s[0]) {
        st = ocr_set_error(OCR_ERR_CONFIG, "%s: %s must not be empty", src, p);
        goto fail;
    }
    if (!(lc->delimiter = dup_str(s))) goto nomem;
    snprintf(p, sizeof p, "%s.ext_op_transform_idx", base);
    TRY_CFG(ocr_config_get_int(cfg, p, 1, &v));
    if (v != 1) {
        st = ocr_set_error(OCR_ERR_CONFIG,
                           "%s: %s must be 1 (RecConAug's extra samples go through DecodeImage only), got %lld", src,
                           p, (long long)v);
        goto fail;
    }
    int dsw;
    snprintf(p, sizeof p, "%s.ds_width", base);
    TRY_CFG(ocr_config_get_bool(cfg, p, 0, &dsw));
    if (dsw) {
        st = ocr_set_error(OCR_ERR_CONFIG, "%s: %s: ds_width (per-sample width buckets) is not supported", src, p);
        goto fail;
    }
    snprintf(p, sizeof p, "%s.transforms", base);
    TRY_CFG(ocr_transforms_parse(&lc->transforms, cfg, p, global_len));
    if (lc->transforms.con_aug.max_text_length > lc->max_text_length)
        lc->transforms.con_aug.max_text_length = lc->max_text_length;  // concatenations must fit the labels

    // loader
    snprintf(base, sizeof base, "%s.loader", section);
    static const char *const lkeys[] = {"shuffle",     "batch_size_per_card", "drop_last", "num_workers",
                                        "use_shared_memory", "prefetch",     "pack_file", NULL};
    TRY_CFG(ocr_config_check_keys(cfg, base, lkeys));
    int is_train = strcmp(section, "Train") == 0;
    lc->train = is_train;
    snprintf(p, sizeof p, "%s.shuffle", base);
    TRY_CFG(ocr_config_get_bool(cfg, p, is_train, &lc->sampler.shuffle));
    snprintf(p, sizeof p, "%s.drop_last", base);
    TRY_CFG(ocr_config_get_bool(cfg, p, 0, &lc->sampler.drop_last));
    snprintf(p, sizeof p, "%s.num_workers", base);
    TRY_CFG(ocr_config_get_int(cfg, p, 2, &v));
    TRY_CFG(ocr_config_check_range(cfg, p, (double)v, 0, 256));
    lc->num_workers = v < 1 ? 1 : (int)v;
    snprintf(p, sizeof p, "%s.prefetch", base);
    TRY_CFG(ocr_config_get_int(cfg, p, 2, &v));
    TRY_CFG(ocr_config_check_range(cfg, p, (double)v, 1, 64));
    lc->prefetch = (int)v;
    snprintf(p, sizeof p, "%s.pack_file", base);
    TRY_CFG(ocr_config_get_string(cfg, p, NULL, &s));
    if (s && !(lc->pack_file = dup_str(s))) goto nomem;
    int uses;
    snprintf(p, sizeof p, "%s.use_shared_memory", base);
    TRY_CFG(ocr_config_get_bool(cfg, p, 0, &uses));
    lc->sampler.rank = 0;
    lc->sampler.world_size = 1;
    lc->sampler.seed = lc->seed;

    // shapes: the sampler's scales (MultiScaleDataSet) or RecResizeImg's fixed shape
    snprintf(base, sizeof base, "%s.sampler", section);
    if (multiscale) {
        if (lc->transforms.has_resize) {
            st = ocr_set_error(OCR_ERR_CONFIG,
                               "%s: %s.dataset.transforms: MultiScaleDataSet resizes to the sampler's scales itself; "
                               "remove RecResizeImg",
                               src, section);
            goto fail;
        }
        if (!ocr_config_has(cfg, base)) {
            st = ocr_set_error(OCR_ERR_CONFIG, "%s: %s is missing (MultiScaleDataSet needs a MultiScaleSampler)", src,
                               base);
            goto fail;
        }
        TRY_CFG(parse_scales(lc, cfg, base));
    } else {
        if (ocr_config_has(cfg, base)) {
            st = ocr_set_error(OCR_ERR_CONFIG, "%s: %s: a sampler needs dataset name MultiScaleDataSet", src, base);
            goto fail;
        }
        if (!lc->transforms.has_resize) {
            st = ocr_set_error(OCR_ERR_CONFIG, "%s: %s.dataset.transforms has no RecResizeImg (SimpleDataSet needs it)",
                               src, section);
            goto fail;
        }
        snprintf(p, sizeof p, "%s.loader.batch_size_per_card", section);
        TRY_CFG(ocr_config_require_int(cfg, p, &v));
        TRY_CFG(ocr_config_check_range(cfg, p, (double)v, 1, 65536));
        lc->sampler.num_scales = 1;
        lc->sampler.scales[0] = (OcrBatchShape){lc->transforms.resize_w, lc->transforms.resize_h, (int)v};
    }
    // Every batch shape must give each mixed source at least one sample.
    for (int i = 0; lc->sampler.num_sources && i < lc->sampler.num_scales; i++) {
        int counts[OCR_SAMPLER_MAX_SOURCES];
        int bs = lc->sampler.scales[i].batch_size;
        if (ocr_sampler_mix_counts(lc->sampler.mix, lc->sampler.num_sources, bs, counts) != OCR_OK) {
            st = ocr_wrap_error(OCR_ERR_CONFIG, "%s: %s.dataset.batch_ratio_list", src, section);
            goto fail;
        }
    }
    lc->pack_height = 0;
    for (int i = 0; i < lc->sampler.num_scales; i++)
        if (lc->sampler.scales[i].height > lc->pack_height) lc->pack_height = lc->sampler.scales[i].height;
    return OCR_OK;
nomem:
    st = oom();
fail:
    ocr_loader_config_free(lc);
    return st;
#undef TRY_CFG
}

ocr_status_t ocr_loader_load_dict(OcrDict *dict, const OcrConfig *cfg) {
    const char *path;
    int space;
    OCR_TRY(ocr_config_get_string(cfg, "Global.character_dict_path", NULL, &path));
    OCR_TRY(ocr_config_get_bool(cfg, "Global.use_space_char", 0, &space));
    return ocr_dict_load(dict, path, space);
}

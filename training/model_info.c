#include "training/model_info.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "training/distill_config.h"
#include "training/run_config.h"

// The policy on the op table, before the plan (activation bytes follow the dtypes).
static ocr_status_t resolve_dtypes(ModelInfo *mi, const char *cfg_path) {
    OcrOpTable *optab = ocr_model_ops(mi->m);
    const AmpPolicy *pol = &mi->amp.policy;
    int nops = optab->count;
    size_t cap = (size_t)(nops ? nops : 1);
    AmpOpEntry *entries = malloc(cap * sizeof *entries);
    ocr_dtype_t *dtypes = malloc(cap * sizeof *dtypes);
    mi->reasons = malloc(cap * sizeof *mi->reasons);
    int hits[AMP_MAX_LIST] = {0};
    ocr_status_t st = OCR_OK;
    if (!entries || !dtypes || !mi->reasons) st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
    if (st == OCR_OK) {
        for (int i = 0; i < nops; i++) {
            entries[i].name = optab->items[i].name;
            entries[i].type = optab->items[i].type;
            entries[i].input = i - 1;
        }
        amp_policy_resolve(pol, entries, nops, dtypes, mi->reasons, hits);
        for (int k = 0; k < pol->n_fp32_layers && st == OCR_OK; k++)
            if (hits[k] == 0)
                st = ocr_set_error(OCR_ERR_CONFIG,
                                   "%s: Global.amp_fp32_layers: pattern \"%s\" matches no layer of this model "
                                   "(`ocrtrain info` without it lists the layer names)",
                                   cfg_path, pol->fp32_layers[k]);
    }
    for (int i = 0; st == OCR_OK && i < nops; i++) optab->items[i].compute_dtype = dtypes[i];
    free(entries);
    free(dtypes);
    return st;
}

ocr_status_t model_info_build(ModelInfo *mi, OcrConfig *cfg) {
    memset(mi, 0, sizeof *mi);
    // The model table needs only Architecture and the AMP keys; a config that `train` would
    // refuse for another section still gets its table.
    RunConfig rc;
    // A distillation config: the trained network's table (training/distill_config.h).
    OCR_TRY(distill_config_rewrite(cfg));
    mi->valid = run_config_read(&rc, cfg, 0) == OCR_OK;
    if (!mi->valid) snprintf(mi->refusal, sizeof mi->refusal, "%s", ocr_last_error());
    OCR_TRY(ocr_arch_from_config(&mi->arch, cfg));
    OCR_TRY(amp_config_from_config(&mi->amp, cfg));
    mi->amp_ok = 1;
    OCR_TRY(ocr_model_create(&mi->m, &mi->arch));
    OCR_TRY(resolve_dtypes(mi, ocr_config_source(cfg)));
    ocr_status_t st = ocr_model_plan(mi->m, 1, mi->arch.img_h, mi->arch.img_w, 0, &mi->plan);
    if (st != OCR_OK)
        return ocr_set_error(st, "%s (input %dx%d from the config)", ocr_last_error(), mi->arch.img_h, mi->arch.img_w);
    return OCR_OK;
}

void model_info_free(ModelInfo *mi) {
    free(mi->reasons);
    if (mi->amp_ok) amp_config_free(&mi->amp);
    ocr_model_free(mi->m);
    memset(mi, 0, sizeof *mi);
}

#include "training/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/memory.h"

int64_t optim_bytes_for(const OcrParamTable *params) { return 2 * (int64_t)sizeof(float) * params->numel; }

int64_t optim_state_bytes(const Optimizer *o) { return o->m_buf ? (int64_t)ocr_mem_size_of(o->m_buf) * 2 : 0; }

void optim_free(Optimizer *o) {
    ocr_mem_free(o->m_buf);
    ocr_mem_free(o->v_buf);
    free(o->m);
    free(o->v);
    free(o->decay);
    free(o->decoupled);
    free(o->lr_mult);
    free(o->frozen);
    memset(o, 0, sizeof *o);
}

ocr_status_t optim_init(Optimizer *o, const OptimConfig *cfg, const OcrParamTable *params) {
    memset(o, 0, sizeof *o);
    o->cfg = *cfg;
    int n = params->count;
    o->count = n;
    size_t pn = (size_t)(n ? n : 1);
    int64_t numel = 0;
    for (int i = 0; i < n; i++) numel += params->items[i].numel;
    size_t bytes = (size_t)(numel ? numel : 1) * sizeof(float);
    // Zeroed through the op library, so the moments may live on any device.
    o->m_buf = ocr_mem_alloc(params->device, OCR_MEM_OPTIMIZER, bytes);
    o->v_buf = ocr_mem_alloc(params->device, OCR_MEM_OPTIMIZER, bytes);
    if (o->m_buf && o->v_buf) {
        OcrTensor zm = ocr_tensor_view(o->m_buf, OCR_U8, params->device, 1, (int64_t[]){(int64_t)bytes});
        OcrTensor zv = ocr_tensor_view(o->v_buf, OCR_U8, params->device, 1, (int64_t[]){(int64_t)bytes});
        ocr_zero_tensor(&zm);
        ocr_zero_tensor(&zv);
    }
    o->m = calloc(pn, sizeof *o->m);
    o->v = calloc(pn, sizeof *o->v);
    o->decay = calloc(pn, sizeof *o->decay);
    o->decoupled = calloc(pn, sizeof *o->decoupled);
    o->lr_mult = calloc(pn, sizeof *o->lr_mult);
    o->frozen = calloc(pn, sizeof *o->frozen);
    if (!o->m_buf || !o->v_buf || !o->m || !o->v || !o->decay || !o->decoupled || !o->lr_mult || !o->frozen) {
        optim_free(o);
        return ocr_set_error(OCR_ERR_OOM, "optimizer state (%zu bytes): out of memory", 2 * bytes);
    }
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        const OcrParamInfo *p = &params->items[i];
        o->m[i] = ocr_tensor_view(o->m_buf + off, OCR_F32, params->device, p->ndim, p->shape);
        o->v[i] = ocr_tensor_view(o->v_buf + off, OCR_F32, params->device, p->ndim, p->shape);
        off += p->numel;
        o->lr_mult[i] = p->lr_mult;
        switch (p->decay_kind) {
        case OCR_DECAY_NONE: o->decay[i] = 0.0f; break;
        case OCR_DECAY_FIXED: o->decay[i] = p->decay; break;
        default:
            if (!cfg->adamw) {
                o->decay[i] = (float)cfg->l2_factor;
            } else {
                int excluded = cfg->one_dim_no_decay && p->ndim == 1;
                for (int k = 0; k < cfg->n_no_decay_names; k++)
                    if (strstr(p->name, cfg->no_decay_names[k])) excluded = 1;
                o->decay[i] = excluded ? 0.0f : (float)cfg->weight_decay;
                o->decoupled[i] = !excluded;
            }
        }
        if (p->frozen) {
            o->frozen[i] = 1;
            o->n_frozen++;
            o->lr_mult[i] = 0.0f;
            o->decay[i] = 0.0f;
            o->decoupled[i] = 0;
        }
    }
    return OCR_OK;
}

void optim_fill(const Optimizer *o, int i, double lr, AdamParams *p) {
    p->lr = (float)(lr * o->lr_mult[i]);
    p->beta1 = (float)o->cfg.beta1;
    p->beta2 = (float)o->cfg.beta2;
    p->eps = (float)o->cfg.epsilon;
    p->weight_decay = o->decay[i];
    p->decoupled = o->decoupled[i];
    p->step = o->updates + 1;
}

double optim_clip_factors(const Optimizer *o, OcrTensor *const *grads, const float *grad_scale, float *factor) {
    double total = 0;
    for (int i = 0; i < o->count; i++) {
        factor[i] = 1.0f;
        double n = ocr_grad_global_norm((OcrTensor *const *)&grads[i], 1) * fabs((double)grad_scale[i]);
        total += n * n;
        // ClipGradByNorm: each tensor on its own.
        if (o->cfg.clip_norm > 0 && n > o->cfg.clip_norm) factor[i] = (float)(o->cfg.clip_norm / n);
    }
    total = sqrt(total);
    // ClipGradByGlobalNorm: one factor for all, on top of any per-tensor clipping.
    if (o->cfg.clip_norm_global > 0 && total > o->cfg.clip_norm_global) {
        float g = (float)(o->cfg.clip_norm_global / (total + 1e-6));
        for (int i = 0; i < o->count; i++) factor[i] *= g;
    }
    return total;
}

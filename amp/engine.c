#include "amp/engine.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---- configuration ---------------------------------------------------------------------------

// Every Global key of the AMP engine that starts with amp_ (the others are PaddleOCR's names).
static const char *const AMP_KEYS[] = {"amp_level",
                                       "amp_dtype",
                                       "amp_custom_white_list",
                                       "amp_custom_black_list",
                                       "amp_fp32_layers",
                                       "amp_stochastic_rounding",
                                       "amp_activation_stats_every",
                                       NULL};

// A typo in an amp_* key would otherwise silently keep a default.
static ocr_status_t check_amp_keys(const OcrConfig *cfg) {
    const cJSON *g = ocr_config_node(cfg, "Global");
    if (!g || !cJSON_IsObject(g)) return OCR_OK;
    for (const cJSON *it = g->child; it; it = it->next) {
        const char *key = it->string;
        if (strncmp(key, "amp_", 4) != 0) continue;
        int known = 0;
        for (int i = 0; AMP_KEYS[i]; i++) known |= strcmp(key, AMP_KEYS[i]) == 0;
        if (known) continue;
        const char *best = AMP_KEYS[0];
        int best_d = 1 << 30;
        for (int i = 0; AMP_KEYS[i]; i++) {
            int d = ocr_edit_distance(key, AMP_KEYS[i]);
            if (d < best_d) best_d = d, best = AMP_KEYS[i];
        }
        return ocr_set_error(OCR_ERR_CONFIG, "%s: unknown key Global.%s (did you mean Global.%s?)",
                             ocr_config_source(cfg), key, best);
    }
    return OCR_OK;
}

void amp_config_init_off(AmpConfig *c) {
    memset(c, 0, sizeof *c);
    amp_policy_init_off(&c->policy);
    c->scaler = amp_scaler_config_off();
}

void amp_config_free(AmpConfig *c) { amp_policy_free(&c->policy); }

ocr_status_t amp_config_from_config(AmpConfig *c, const OcrConfig *cfg) {
    amp_config_init_off(c);
    const char *src = ocr_config_source(cfg);
    OCR_TRY(check_amp_keys(cfg));
    int sr;
    int64_t every, seed;
    OCR_TRY(ocr_config_get_bool(cfg, "Global.amp_stochastic_rounding", 0, &sr));
    OCR_TRY(ocr_config_get_int(cfg, "Global.amp_activation_stats_every", 0, &every));
    OCR_TRY(ocr_config_get_int(cfg, "Global.seed", 0, &seed));
    if (every < 0)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.amp_activation_stats_every must be >= 0 (0: off), got %lld",
                             src, (long long)every);
    AmpPolicy p;
    OCR_TRY(amp_policy_from_config(&p, cfg));
    if (sr && p.level == OCR_AMP_O1) {
        amp_policy_free(&p);
        return ocr_set_error(OCR_ERR_CONFIG,
                             "%s: Global.amp_stochastic_rounding rounds O2 working weights; Global.amp_level is O1, "
                             "where the weights stay float32",
                             src);
    }
    AmpScalerConfig s;
    ocr_status_t st = amp_scaler_config_from_config(&s, cfg, p.level != OCR_AMP_O0 && p.dtype == OCR_F16);
    if (st != OCR_OK) {
        amp_policy_free(&p);
        return st;
    }
    if (p.dtype == OCR_BF16 && ocr_config_has(cfg, "Global.scale_loss"))
        ocr_log(OCR_LOG_INFO, "%s: Global.scale_loss is ignored with bfloat16 (no loss scaling needed)", src);
    c->policy = p;
    c->scaler = s;
    c->stochastic_rounding = sr && p.level == OCR_AMP_O2;
    c->seed = (uint64_t)seed;
    c->activation_stats_every = every;
    return OCR_OK;
}

// ---- engine ---------------------------------------------------------------------------------

void amp_engine_init(AmpEngine *e, AmpConfig *cfg) {
    memset(e, 0, sizeof *e);
    e->cfg = *cfg;
    memset(cfg, 0, sizeof *cfg);  // the policy's strings now belong to the engine
    amp_scaler_init(&e->scaler, &e->cfg.scaler);
    e->last.first_bad = -1;
    e->last_layer = -1;
}

void amp_engine_free(AmpEngine *e) {
    amp_config_free(&e->cfg);
    amp_cast_cache_free(&e->cache);
    amp_master_free(&e->master);
    amp_snapshot_free(&e->bn);
    amp_stats_free(&e->stats);
    free(e->param_op);
    free(e->param_views);
    free(e->grad_views);
    free(e->grad_list);
    free(e->grad_amax);
    free(e->grad_scale);
    free(e->grad_nonfinite);
    memset(e, 0, sizeof *e);
}

int amp_param_owner(const OcrOpTable *ops, const char *name) {
    const char *dot = strrchr(name, '.');
    size_t prefix = dot ? (size_t)(dot - name) : 0;
    int by_prefix = -1;
    for (int i = 0; i < ops->count; i++) {
        const char *op = ops->items[i].name;
        if (strcmp(op, name) == 0) return i;
        if (dot && by_prefix < 0 && strlen(op) == prefix && strncmp(op, name, prefix) == 0) by_prefix = i;
    }
    return by_prefix;
}

static OcrTensor view_in(const OcrParamTable *t, void *base, int i) {
    const OcrParamInfo *p = &t->items[i];
    return ocr_tensor_view((char *)base + p->offset, p->dtype, t->device, p->ndim, p->shape);
}

static int low_precision_role(ocr_param_role_t r) {
    return r == OCR_ROLE_WEIGHT || r == OCR_ROLE_BIAS || r == OCR_ROLE_EMBED;
}

// O2: the selected parameters become low precision in the table. Their f32 values go to the
// masters first; the table is laid out again (same rule as models/params.c: each entry at a
// multiple of OCR_PARAM_ALIGN) and the gradient buffer is dropped so the model reallocates it
// with the new sizes.
static ocr_status_t convert_o2(AmpEngine *e, const ocr_dtype_t *want) {
    OcrParamTable *t = e->params;
    int n = t->count;
    OcrTensor *old = malloc((size_t)(n ? n : 1) * sizeof *old);
    int *has = calloc((size_t)(n ? n : 1), sizeof *has);
    if (!old || !has) {
        free(old);
        free(has);
        return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    }
    for (int i = 0; i < n; i++) {
        old[i] = view_in(t, t->data, i);
        has[i] = want[i] != OCR_F32 && t->items[i].dtype == OCR_F32;
    }
    ocr_status_t st = amp_master_init(&e->master, old, has, n);
    void *fresh = NULL;
    size_t bytes = 0;
    if (st == OCR_OK) {
        for (int i = 0; i < n; i++) {
            size_t sz = (size_t)t->items[i].numel * ocr_dtype_size(has[i] ? want[i] : t->items[i].dtype);
            bytes = (bytes + sz + OCR_PARAM_ALIGN - 1) / OCR_PARAM_ALIGN * OCR_PARAM_ALIGN;
        }
        fresh = ocr_mem_alloc(t->device, t->category, bytes);
        if (!fresh) {
            st = ocr_wrap_error(OCR_ERR_OOM, "O2 working parameters (%zu bytes)", bytes);
        } else {
            // Zeroed (the alignment gaps included) through the op library: any device.
            OcrTensor z = ocr_tensor_view(fresh, OCR_U8, t->device, 1, (int64_t[]){(int64_t)bytes});
            zero_tensor(&z);
        }
    }
    if (st != OCR_OK) {
        amp_master_free(&e->master);
        free(old);
        free(has);
        return st;
    }
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        OcrParamInfo *p = &t->items[i];
        if (has[i]) p->dtype = want[i];
        p->offset = off;
        OcrTensor dst = view_in(t, fresh, i);
        if (has[i])
            cast_forward(&dst, amp_master_get(&e->master, i));
        else
            copy_bytes(t->device, dst.data, t->device, old[i].data, ocr_tensor_bytes(&dst));
        off = (off + ocr_tensor_bytes(&dst) + OCR_PARAM_ALIGN - 1) / OCR_PARAM_ALIGN * OCR_PARAM_ALIGN;
    }
    OCR_ASSERT(off == bytes);
    ocr_mem_free(t->data);
    ocr_mem_free(t->grad);
    t->data = fresh;
    t->grad = NULL;
    t->bytes = bytes;
    free(old);
    free(has);
    return OCR_OK;
}

ocr_status_t amp_engine_attach(AmpEngine *e, OcrOpTable *ops, OcrParamTable *params, OcrParamTable *bnstats) {
    OCR_ASSERT(!e->ops, "amp engine: already attached");
    if (!params->data) return ocr_set_error(OCR_ERR_INVALID_ARG, "amp engine: the parameters are not allocated yet");
    const AmpPolicy *pol = &e->cfg.policy;
    int nops = ops->count, np = params->count;

    // 1. compute dtypes
    AmpOpEntry *entries = malloc((size_t)(nops ? nops : 1) * sizeof *entries);
    ocr_dtype_t *dtypes = malloc((size_t)(nops ? nops : 1) * sizeof *dtypes);
    int hits[AMP_MAX_LIST];
    OCR_ASSERT(entries && dtypes, "out of host memory");
    for (int i = 0; i < nops; i++) {
        entries[i].name = ops->items[i].name;
        entries[i].type = ops->items[i].type;
        entries[i].input = i - 1;
    }
    amp_policy_resolve(pol, entries, nops, dtypes, NULL, hits);
    free(entries);
    for (int k = 0; k < pol->n_fp32_layers; k++) {
        if (hits[k] == 0) {
            free(dtypes);
            return ocr_set_error(OCR_ERR_CONFIG,
                                 "Global.amp_fp32_layers: pattern \"%s\" matches no layer of this model "
                                 "(`ocrtrain info` lists the layer names)",
                                 pol->fp32_layers[k]);
        }
    }
    for (int i = 0; i < nops; i++) ops->items[i].compute_dtype = dtypes[i];
    free(dtypes);

    // 2. owners and per-parameter arrays
    size_t pn = (size_t)(np ? np : 1);
    e->param_op = malloc(pn * sizeof *e->param_op);
    e->param_views = calloc(pn, sizeof *e->param_views);
    e->grad_views = calloc(pn, sizeof *e->grad_views);
    e->grad_list = calloc(pn, sizeof *e->grad_list);
    e->grad_amax = calloc(pn, sizeof *e->grad_amax);
    e->grad_scale = malloc(pn * sizeof *e->grad_scale);
    e->grad_nonfinite = calloc(pn, sizeof *e->grad_nonfinite);
    ocr_dtype_t *want = malloc(pn * sizeof *want);
    if (!e->param_op || !e->param_views || !e->grad_views || !e->grad_list || !e->grad_amax || !e->grad_scale ||
        !e->grad_nonfinite || !want) {
        free(want);
        return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    }
    for (int i = 0; i < np; i++) {
        const OcrParamInfo *p = &params->items[i];
        // The model records each parameter's op; tables built by hand fall back to the names.
        int recorded = params->ops_recorded && p->op >= 0 && p->op < ops->count;
        int op = recorded ? p->op : amp_param_owner(ops, p->name);
        e->param_op[i] = op;
        e->grad_scale[i] = 1.0f;
        ocr_dtype_t d = op >= 0 ? ops->items[op].compute_dtype : OCR_F32;
        want[i] = low_precision_role(p->role) && d != OCR_F32 ? d : OCR_F32;
    }
    e->ops = ops;
    e->params = params;
    e->bnstats = bnstats;

    // 3. weights
    ocr_status_t st = OCR_OK;
    if (pol->level == OCR_AMP_O1) {
        for (int i = 0; i < np; i++) e->param_views[i] = view_in(params, params->data, i);
        st = amp_cast_cache_init(&e->cache, e->param_views, want, np);
    } else if (pol->level == OCR_AMP_O2) {
        st = convert_o2(e, want);
    }
    free(want);
    if (st != OCR_OK) return st;

    // 4. statistics, one layer per op
    const char **names = malloc((size_t)(nops ? nops : 1) * sizeof *names);
    OCR_ASSERT(names, "out of host memory");
    for (int i = 0; i < nops; i++) names[i] = ops->items[i].name;
    amp_stats_init(&e->stats, names, nops, amp_scaler_scale(&e->scaler));
    free(names);
    return OCR_OK;
}

ocr_status_t amp_engine_begin_step(AmpEngine *e) {
    OCR_ASSERT(e->ops, "amp engine: attach it to a model first");
    OCR_ASSERT(!e->in_step, "amp engine: begin_step twice without end_step");
    if (e->bnstats && e->bnstats->data && e->bnstats->bytes)
        OCR_TRY(amp_snapshot_take_on(&e->bn, e->bnstats->device, e->bnstats->data, e->bnstats->bytes));
    if (e->cfg.policy.level == OCR_AMP_O1 && !e->cache.valid) {
        for (int i = 0; i < e->params->count; i++) e->param_views[i] = view_in(e->params, e->params->data, i);
        amp_cast_cache_refresh(&e->cache, e->param_views);
    }
    e->in_step = 1;
    e->checked = 0;
    e->last.found_inf = 0;
    e->last.first_bad = -1;
    e->last_layer = -1;
    return OCR_OK;
}

void amp_engine_after_forward(AmpEngine *e) {
    OcrOpTable *ops = e->ops;
    int sample = e->cfg.activation_stats_every > 0 && e->step % e->cfg.activation_stats_every == 0;
    for (int i = 0; i < ops->count; i++) {
        const OcrOpInfo *o = &ops->items[i];
        int ran = o->out_ndim > 0;
        if (ran) {
            ocr_dtype_t d = o->out.data && ocr_dtype_is_float(o->out.dtype) ? o->out.dtype : o->compute_dtype;
            amp_stats_count_calls(&e->stats, o->type, d, 1);
        }
        if (!sample) continue;
        if (ran && o->out.data && ocr_dtype_is_float(o->out.dtype)) {
            int64_t bad;
            float a;
            if (o->out.device.type == OCR_DEVICE_CPU) {
                a = amp_tensor_amax(&o->out, &bad);
            } else {
                // Sampled every amp_activation_stats_every steps: a host copy (waits for the device).
                size_t nb = ocr_tensor_bytes(&o->out);
                void *h = malloc(nb ? nb : 1);
                OCR_ASSERT(h, "out of host memory");
                copy_bytes(ocr_cpu(), h, o->out.device, o->out.data, nb);
                OcrTensor hv = ocr_tensor_view(h, o->out.dtype, ocr_cpu(), o->out.ndim, o->out.shape);
                a = amp_tensor_amax(&hv, &bad);
                free(h);
            }
            e->stats.act_amax[i] = bad ? INFINITY : a;
        } else {
            e->stats.act_amax[i] = -1.0f;
        }
    }
    if (sample) e->stats.act_amax_step = e->step;
}

// Per layer: the max over its parameters' gradients and whether any was non-finite. The first
// bad layer in backward order is the bad layer that comes last in forward order: the gradient
// that overflowed first (e->last_layer).
static void per_layer_grad_stats(AmpEngine *e) {
    AmpStats *s = &e->stats;
    for (int l = 0; l < s->n_layers; l++) {
        s->grad_amax[l] = 0.0f;
        s->grad_nonfinite[l] = 0;
    }
    e->last_layer = -1;
    for (int i = 0; i < e->params->count; i++) {
        int l = e->param_op[i];
        if (l < 0) continue;
        if (e->grad_amax[i] > s->grad_amax[l]) s->grad_amax[l] = e->grad_amax[i];
        if (e->grad_nonfinite[i]) {
            s->grad_nonfinite[l] = 1;
            if (l > e->last_layer) e->last_layer = l;
        }
    }
}

int amp_engine_check_grads(AmpEngine *e) {
    OCR_ASSERT(e->in_step, "amp engine: check_grads outside begin_step/end_step");
    OcrParamTable *t = e->params;
    OCR_ASSERT(t->grad, "amp engine: no gradients (run the backward first)");
    int n = t->count;
    for (int i = 0; i < n; i++) {
        e->grad_views[i] = view_in(t, t->grad, i);
        e->grad_list[i] = &e->grad_views[i];
    }
    e->last = amp_unscale_check(e->grad_list, n, amp_scaler_scale(&e->scaler), e->grad_amax, e->grad_nonfinite,
                                e->grad_scale);
    per_layer_grad_stats(e);
    e->checked = 1;
    return e->last.found_inf;
}

void amp_engine_record_device_step(AmpEngine *e, int found_inf, const int *nonfinite, const float *amax_stored) {
    OCR_ASSERT(e->ops, "amp engine: attach it to a model first");
    OCR_ASSERT(!e->in_step, "amp engine: a device step is recorded outside begin_step/end_step");
    OcrParamTable *t = e->params;
    int n = t->count;
    float inv = amp_scaler_inv_scale(&e->scaler);  // the mirror still holds this step's scale
    AmpCheckResult r = {0, 0, -1, inv};
    for (int i = 0; i < n; i++) {
        int lowp = t->items[i].dtype != OCR_F32;
        e->grad_amax[i] = lowp ? amax_stored[i] * inv : amax_stored[i];
        e->grad_nonfinite[i] = nonfinite[i] != 0;
        e->grad_scale[i] = lowp ? inv : 1.0f;
        if (nonfinite[i]) {
            r.bad_count++;
            if (i > r.first_bad) r.first_bad = i;
        }
    }
    r.found_inf = found_inf != 0;
    per_layer_grad_stats(e);
    e->last = r;
    e->in_step = 1;
    e->checked = 1;
    amp_engine_end_step(e);
}

void amp_engine_adam_params(const AmpEngine *e, int i, AdamParams *p) {
    OCR_ASSERT(e->checked, "amp engine: the optimizer runs after check_grads");
    p->grad_scale = e->grad_scale[i];
    p->stochastic_round_seed = 0;
    p->stochastic_round_stream = 0;
    if (e->cfg.stochastic_rounding && e->params->items[i].dtype != OCR_F32) {
        p->stochastic_round_seed = amp_stochastic_round_seed(e->cfg.seed, e->step);
        p->stochastic_round_stream = (uint64_t)i;
    }
}

OcrTensor *amp_engine_master(AmpEngine *e, int i) { return amp_master_get(&e->master, i); }

int amp_engine_adam_step(AmpEngine *e, OcrTensor *m, OcrTensor *v, amp_adam_fill_fn fill, void *user) {
    OCR_ASSERT(e->checked, "amp engine: adam_step before check_grads");
    if (e->last.found_inf) return 0;
    OcrParamTable *t = e->params;
    for (int i = 0; i < t->count; i++) {
        OcrTensor w = view_in(t, t->data, i), g = view_in(t, t->grad, i);
        AdamParams p = {0};
        fill(user, i, &p);
        amp_engine_adam_params(e, i, &p);
        adam_update(&w, amp_engine_master(e, i), &m[i], &v[i], &g, p);
    }
    return 1;
}

static const char *param_layer_name(const AmpEngine *e) {
    if (e->last_layer >= 0) return e->ops->items[e->last_layer].name;
    if (e->last.first_bad >= 0) return e->params->items[e->last.first_bad].name;
    return "?";
}

void amp_engine_end_step(AmpEngine *e) {
    OCR_ASSERT(e->in_step && e->checked, "amp engine: end_step needs begin_step and check_grads first");
    int skipped = e->last.found_inf;
    float before = amp_scaler_scale(&e->scaler);
    amp_scale_event_t ev = amp_scaler_update(&e->scaler, skipped);
    float after = amp_scaler_scale(&e->scaler);
    e->last_scale_before = before;
    e->last_scale_after = after;
    if (skipped) {
        if (e->bn.valid) amp_snapshot_restore(&e->bn, e->bnstats->data, e->bnstats->bytes);
        ocr_log(OCR_LOG_WARN,
                "amp: step %lld skipped: inf/NaN gradients in %d tensor(s), first (in backward order) in layer %s; "
                "BN running statistics restored; loss scale %g -> %g%s",
                (long long)e->step, e->last.bad_count, param_layer_name(e), (double)before, (double)after,
                ev == AMP_SCALE_AT_FLOOR ? " (at its floor, Global.min_loss_scale)" : "");
    } else if (ev != AMP_SCALE_KEPT) {
        ocr_log(OCR_LOG_INFO, "amp: step %lld: loss scale %g -> %g (%s)", (long long)e->step, (double)before,
                (double)after, amp_scale_event_name(ev));
    }
    amp_stats_record_step(&e->stats, e->step, skipped, skipped ? e->last_layer : -1, before, after, ev);
    int64_t run = e->stats.consecutive_skipped;
    if (skipped && run >= 10 && (run & (run - 1)) == 0)
        ocr_log(OCR_LOG_ERROR,
                "amp: %lld steps in a row skipped (loss scale %g); training is not progressing. Try "
                "Global.amp_dtype: bfloat16, or keep layer %s in float32 with Global.amp_fp32_layers",
                (long long)run, (double)after, param_layer_name(e));
    if (!skipped) amp_cast_cache_invalidate(&e->cache);
    e->step++;
    e->in_step = 0;
    e->checked = 0;
}

const OcrTensor *amp_loss_logits(const OcrTensor *logits, OcrTensor *buf) {
    if (logits->dtype == OCR_F32) return logits;
    if (buf->data && (buf->dtype != OCR_F32 || !ocr_tensor_same_shape(buf, logits))) ocr_tensor_free(buf);
    if (!buf->data) {
        ocr_status_t st = ocr_tensor_alloc(buf, OCR_F32, logits->device, logits->ndim, logits->shape,
                                           OCR_MEM_WORKSPACE);
        OCR_ASSERT(st == OCR_OK, "f32 logits: %s", ocr_last_error());
    }
    cast_forward(buf, logits);
    return buf;
}

void amp_loss_dlogits(OcrTensor *model_dlogits, const OcrTensor *dl32) {
    if (model_dlogits->data == dl32->data) return;
    cast_forward(model_dlogits, dl32);
}

AmpMemory amp_engine_memory(const AmpEngine *e) {
    AmpMemory m = {(int64_t)e->cache.bytes, (int64_t)e->master.bytes, (int64_t)e->bn.bytes};
    return m;
}

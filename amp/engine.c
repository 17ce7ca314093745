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
                                       "amp_overflow",
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
    // Validated for every dtype; only a dynamic FP16 scaler ever has a step to recompute.
    const char *overflow = NULL;
    OCR_TRY(ocr_config_get_string(cfg, "Global.amp_overflow", "recompute", &overflow));
    int recompute = strcmp(overflow, "recompute") == 0;
    if (!recompute && strcmp(overflow, "skip") != 0)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.amp_overflow must be recompute or skip, got \"%s\"", src,
                             overflow);
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
    c->overflow_recompute = recompute;
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
    free(e->op_dtype);
    free(e->param_op);
    free(e->param_views);
    free(e->grad_views);
    free(e->grad_list);
    free(e->grad_amax);
    free(e->grad_scale);
    free(e->grad_nonfinite);
    memset(e, 0, sizeof *e);
}

int amp_param_owner(const AmpManaged *m, const char *name) {
    const char *dot = strrchr(name, '.');
    size_t prefix = dot ? (size_t)(dot - name) : 0;
    int by_prefix = -1;
    for (int i = 0; i < m->n_ops; i++) {
        const char *op = m->op_name(m, i);
        if (strcmp(op, name) == 0) return i;
        if (dot && by_prefix < 0 && strlen(op) == prefix && strncmp(op, name, prefix) == 0) by_prefix = i;
    }
    return by_prefix;
}

const char *amp_engine_layer_name(const AmpEngine *e, int layer) {
    return e->attached && layer >= 0 && layer < e->mg.n_ops ? e->mg.op_name(&e->mg, layer) : "?";
}

// O2: the selected parameters become low precision. Their f32 values go to the masters first;
// then the owner lays its parameters out again in the new dtypes (each value rounded to nearest
// from the same f32 value the master holds) and drops the gradients, which the model
// reallocates with the new sizes.
static ocr_status_t convert_o2(AmpEngine *e, const ocr_dtype_t *want) {
    const AmpManaged *m = &e->mg;
    int n = m->n_params;
    OcrTensor *old = malloc((size_t)(n ? n : 1) * sizeof *old);
    int *has = calloc((size_t)(n ? n : 1), sizeof *has);
    ocr_dtype_t *dt = malloc((size_t)(n ? n : 1) * sizeof *dt);
    if (!old || !has || !dt) {
        free(old);
        free(has);
        free(dt);
        return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    }
    for (int i = 0; i < n; i++) {
        old[i] = m->param(m, i);
        has[i] = want[i] != OCR_F32 && old[i].dtype == OCR_F32;
        dt[i] = has[i] ? want[i] : old[i].dtype;
    }
    ocr_status_t st = amp_master_init(&e->master, old, has, n);
    if (st == OCR_OK) {
        st = m->lower(m, dt);
        if (st != OCR_OK) amp_master_free(&e->master);
    }
    free(old);
    free(has);
    free(dt);
    return st;
}

ocr_status_t amp_engine_attach(AmpEngine *e, const AmpManaged *m) {
    OCR_ASSERT(!e->attached, "amp engine: already attached");
    if (m->n_params > 0 && !m->param(m, 0).data)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "amp engine: the parameters are not allocated yet");
    const AmpPolicy *pol = &e->cfg.policy;
    int nops = m->n_ops, np = m->n_params;

    // 1. compute dtypes
    AmpOpEntry *entries = malloc((size_t)(nops ? nops : 1) * sizeof *entries);
    ocr_dtype_t *dtypes = malloc((size_t)(nops ? nops : 1) * sizeof *dtypes);
    int hits[AMP_MAX_LIST];
    OCR_ASSERT(entries && dtypes, "out of host memory");
    for (int i = 0; i < nops; i++) {
        entries[i].name = m->op_name(m, i);
        entries[i].type = m->op_type(m, i);
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
    for (int i = 0; i < nops; i++) m->set_op_dtype(m, i, dtypes[i]);
    e->op_dtype = dtypes;  // the engine's own record of them

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
        // The owner records each parameter's op; tables built by hand fall back to the names.
        int op = m->param_op(m, i);
        if (op < 0 || op >= nops) op = amp_param_owner(m, m->param_name(m, i));
        e->param_op[i] = op;
        e->grad_scale[i] = 1.0f;
        ocr_dtype_t d = op >= 0 ? e->op_dtype[op] : OCR_F32;
        want[i] = m->param_lowerable(m, i) && d != OCR_F32 ? d : OCR_F32;
    }
    e->mg = *m;
    e->attached = 1;

    // 3. weights
    ocr_status_t st = OCR_OK;
    if (pol->level == OCR_AMP_O1) {
        for (int i = 0; i < np; i++) e->param_views[i] = m->param(m, i);
        st = amp_cast_cache_init(&e->cache, e->param_views, want, np);
    } else if (pol->level == OCR_AMP_O2) {
        st = convert_o2(e, want);
    }
    free(want);
    if (st != OCR_OK) return st;

    // 4. statistics, one layer per op
    const char **names = malloc((size_t)(nops ? nops : 1) * sizeof *names);
    OCR_ASSERT(names, "out of host memory");
    for (int i = 0; i < nops; i++) names[i] = m->op_name(m, i);
    amp_stats_init(&e->stats, names, nops, amp_scaler_scale(&e->scaler));
    free(names);
    return OCR_OK;
}

ocr_status_t amp_engine_begin_step(AmpEngine *e) {
    OCR_ASSERT(e->attached, "amp engine: attach it to a model first");
    OCR_ASSERT(!e->in_step, "amp engine: begin_step twice without end_step");
    const AmpManaged *m = &e->mg;
    size_t sbytes = 0;
    ocr_device_t sdev = ocr_cpu();
    void *sdata = m->stats(m, &sbytes, &sdev);
    if (sdata && sbytes) OCR_TRY(amp_snapshot_take_on(&e->bn, sdev, sdata, sbytes));
    if (e->cfg.policy.level == OCR_AMP_O1 && !e->cache.valid) {
        for (int i = 0; i < m->n_params; i++) e->param_views[i] = m->param(m, i);
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
    const AmpManaged *m = &e->mg;
    int sample = e->cfg.activation_stats_every > 0 && e->step % e->cfg.activation_stats_every == 0;
    for (int i = 0; i < m->n_ops; i++) {
        OcrTensor out;
        memset(&out, 0, sizeof out);
        int ran = m->op_output(m, i, &out);
        if (ran) {
            ocr_dtype_t d = out.data && ocr_dtype_is_float(out.dtype) ? out.dtype : e->op_dtype[i];
            amp_stats_count_calls(&e->stats, m->op_type(m, i), d, 1);
        }
        if (!sample) continue;
        if (ran && out.data && ocr_dtype_is_float(out.dtype)) {
            int64_t bad;
            float a;
            if (out.device.type == OCR_DEVICE_CPU) {
                a = amp_tensor_amax(&out, &bad);
            } else {
                // Sampled every amp_activation_stats_every steps: a host copy (waits for the device).
                size_t nb = ocr_tensor_bytes(&out);
                void *h = malloc(nb ? nb : 1);
                OCR_ASSERT(h, "out of host memory");
                ocr_copy_bytes(ocr_cpu(), h, out.device, out.data, nb);
                OcrTensor hv = ocr_tensor_view(h, out.dtype, ocr_cpu(), out.ndim, out.shape);
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
    for (int i = 0; i < e->mg.n_params; i++) {
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
    const AmpManaged *m = &e->mg;
    int n = m->n_params;
    for (int i = 0; i < n; i++) {
        e->grad_views[i] = m->grad(m, i);
        OCR_ASSERT(e->grad_views[i].data, "amp engine: no gradients (run the backward first)");
        e->grad_list[i] = &e->grad_views[i];
    }
    e->last = amp_unscale_check(e->grad_list, n, amp_scaler_scale(&e->scaler), e->grad_amax, e->grad_nonfinite,
                                e->grad_scale);
    per_layer_grad_stats(e);
    e->checked = 1;
    return e->last.found_inf;
}

// ---- overflowed steps recomputed ----------------------------------------------------------------

int amp_engine_can_recompute(const AmpEngine *e, float scale, double loss, int attempts) {
    const AmpScalerConfig *c = &e->scaler.cfg;
    if (!e->cfg.overflow_recompute || !c->enabled || !c->dynamic) return 0;
    if (!isfinite(loss) || attempts >= AMP_MAX_RECOMPUTES) return 0;
    float next = amp_scaler_lowered(c, scale);
    return next < scale && next > 0.0f;
}

int amp_engine_bad_layer(const AmpEngine *e, const int *nonfinite) {
    int layer = -1;
    for (int i = 0; i < e->mg.n_params; i++)
        if (nonfinite[i] && e->param_op[i] > layer) layer = e->param_op[i];
    return layer;
}

static const char *param_layer_name(const AmpEngine *e);

// The attempt's backoff, count and log line (e->last and e->last_layer describe it).
static void note_attempt(AmpEngine *e) {
    float before = amp_scaler_scale(&e->scaler);
    amp_scale_event_t ev = amp_scaler_backoff(&e->scaler);
    OCR_ASSERT(ev == AMP_SCALE_BACKED_OFF, "amp engine: a recompute at loss scale %g, which cannot come down",
               (double)before);
    float after = amp_scaler_scale(&e->scaler);
    e->last_scale_before = before;
    e->last_scale_after = after;
    amp_stats_record_recompute(&e->stats, e->step, before, after);
    ocr_log(OCR_LOG_INFO,
            "amp: step %lld: inf/NaN gradients in %d tensor(s), first (in backward order) in layer %s, at loss "
            "scale %g; recomputed at %g (Global.amp_overflow: recompute)",
            (long long)e->step, e->last.bad_count, param_layer_name(e), (double)before, (double)after);
}

void amp_engine_end_attempt(AmpEngine *e) {
    OCR_ASSERT(e->in_step && e->checked && e->last.found_inf,
               "amp engine: end_attempt needs an overflowed, checked step");
    if (e->bn.valid) {
        size_t sbytes = 0;
        ocr_device_t sdev = ocr_cpu();
        void *sdata = e->mg.stats(&e->mg, &sbytes, &sdev);
        amp_snapshot_restore(&e->bn, sdata, sbytes);
    }
    note_attempt(e);
    e->in_step = 0;
    e->checked = 0;
}

void amp_engine_record_device_attempt(AmpEngine *e, int bad_count, int layer) {
    OCR_ASSERT(e->attached && !e->in_step, "amp engine: a device attempt is recorded outside begin_step/end_step");
    e->last = (AmpCheckResult){1, bad_count, -1, amp_scaler_inv_scale(&e->scaler)};
    e->last_layer = layer;
    note_attempt(e);
}

void amp_engine_record_device_step(AmpEngine *e, int found_inf, const int *nonfinite, const float *amax_stored) {
    OCR_ASSERT(e->attached, "amp engine: attach it to a model first");
    OCR_ASSERT(!e->in_step, "amp engine: a device step is recorded outside begin_step/end_step");
    const AmpManaged *m = &e->mg;
    int n = m->n_params;
    float inv = amp_scaler_inv_scale(&e->scaler);  // the mirror still holds this step's scale
    AmpCheckResult r = {0, 0, -1, inv};
    for (int i = 0; i < n; i++) {
        int lowp = m->param(m, i).dtype != OCR_F32;
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
    if (e->cfg.stochastic_rounding && e->mg.param(&e->mg, i).dtype != OCR_F32) {
        p->stochastic_round_seed = amp_stochastic_round_seed(e->cfg.seed, e->step);
        p->stochastic_round_stream = (uint64_t)i;
    }
}

OcrTensor *amp_engine_master(AmpEngine *e, int i) { return amp_master_get(&e->master, i); }

int amp_engine_adam_step(AmpEngine *e, OcrTensor *m, OcrTensor *v, amp_adam_fill_fn fill, void *user) {
    OCR_ASSERT(e->checked, "amp engine: adam_step before check_grads");
    if (e->last.found_inf) return 0;
    const AmpManaged *mg = &e->mg;
    for (int i = 0; i < mg->n_params; i++) {
        OcrTensor w = mg->param(mg, i), g = mg->grad(mg, i);
        AdamParams p = {0};
        fill(user, i, &p);
        amp_engine_adam_params(e, i, &p);
        ocr_adam_update(&w, amp_engine_master(e, i), &m[i], &v[i], &g, p);
    }
    return 1;
}

static const char *param_layer_name(const AmpEngine *e) {
    if (e->last_layer >= 0) return e->mg.op_name(&e->mg, e->last_layer);
    if (e->last.first_bad >= 0) return e->mg.param_name(&e->mg, e->last.first_bad);
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
        if (e->bn.valid) {
            size_t sbytes = 0;
            ocr_device_t sdev = ocr_cpu();
            void *sdata = e->mg.stats(&e->mg, &sbytes, &sdev);
            amp_snapshot_restore(&e->bn, sdata, sbytes);
        }
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
    ocr_cast_forward(buf, logits);
    return buf;
}

void amp_loss_dlogits(OcrTensor *model_dlogits, const OcrTensor *dl32) {
    if (model_dlogits->data == dl32->data) return;
    ocr_cast_forward(model_dlogits, dl32);
}

AmpMemory amp_engine_memory(const AmpEngine *e) {
    AmpMemory m = {(int64_t)e->cache.bytes, (int64_t)e->master.bytes, (int64_t)e->bn.bytes};
    return m;
}

// ---- the engine's state in a checkpoint -----------------------------------------------------------------

AmpEngineState amp_engine_state(const AmpEngine *e) {
    return (AmpEngineState){amp_scaler_state(&e->scaler), e->step, e->stats.skipped_steps, e->stats.recomputed_steps};
}

ocr_status_t amp_engine_restore_state(AmpEngine *e, const AmpEngineState *s) {
    OCR_TRY(amp_scaler_set_state(&e->scaler, &s->scaler));
    e->step = s->step;
    e->stats.steps = s->step;
    e->stats.skipped_steps = s->skipped_steps;
    e->stats.recomputed_steps = s->recomputed_steps;
    e->stats.scale = amp_scaler_scale(&e->scaler);
    return OCR_OK;
}

void amp_engine_state_to_json(const AmpEngineState *s, cJSON *obj) {
    cJSON_AddNumberToObject(obj, "step", (double)s->step);
    cJSON_AddNumberToObject(obj, "skipped_steps", (double)s->skipped_steps);
    cJSON_AddNumberToObject(obj, "recomputed_steps", (double)s->recomputed_steps);
}

static ocr_status_t state_count(const cJSON *o, const char *key, const char *source, int64_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) return ocr_set_error(OCR_ERR_FORMAT, "%s: \"%s\" is missing or not a number", source, key);
    // Beyond 2^53 (or inf from "1e999") the conversion to int64_t would be undefined.
    if (!(v->valuedouble >= -9007199254740992.0 && v->valuedouble <= 9007199254740992.0))
        return ocr_set_error(OCR_ERR_FORMAT, "%s: \"%s\" = %g is out of range", source, key, v->valuedouble);
    *out = (int64_t)v->valuedouble;
    return OCR_OK;
}

ocr_status_t amp_engine_state_from_json(AmpEngineState *s, const cJSON *obj, const char *source) {
    OCR_TRY(state_count(obj, "step", source, &s->step));
    OCR_TRY(state_count(obj, "skipped_steps", source, &s->skipped_steps));
    s->recomputed_steps = 0;
    if (cJSON_HasObjectItem(obj, "recomputed_steps"))
        OCR_TRY(state_count(obj, "recomputed_steps", source, &s->recomputed_steps));
    return OCR_OK;
}

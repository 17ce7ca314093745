#include "amp/scaler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

AmpScalerConfig amp_scaler_config_default(void) {
    AmpScalerConfig c = {1, 1, 65536.0f, 2.0, 0.5, 2000, 1, 1.0, 16777216.0};
    return c;
}

AmpScalerConfig amp_scaler_config_pytorch(void) {
    AmpScalerConfig c = {1, 1, 65536.0f, 2.0, 0.5, 2000, 1, 0.0, 0.0};
    return c;
}

AmpScalerConfig amp_scaler_config_paddle(void) {
    AmpScalerConfig c = {1, 1, 32768.0f, 2.0, 0.5, 1000, 2, 1.0, 0.0};
    return c;
}

AmpScalerConfig amp_scaler_config_off(void) {
    AmpScalerConfig c = amp_scaler_config_default();
    c.enabled = 0;
    c.dynamic = 0;
    c.init_scale = 1.0f;
    return c;
}

const char *amp_scale_event_name(amp_scale_event_t e) {
    switch (e) {
    case AMP_SCALE_KEPT: return "kept";
    case AMP_SCALE_GREW: return "grew";
    case AMP_SCALE_BACKED_OFF: return "backed off";
    case AMP_SCALE_AT_FLOOR: return "at floor";
    case AMP_SCALE_AT_CEILING: return "at ceiling";
    }
    return "?";
}

ocr_status_t amp_scaler_config_check(const AmpScalerConfig *c, const char *src) {
    if (!src) src = "loss scaler";
    if (!(isfinite(c->init_scale) && c->init_scale > 0.0f))
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.scale_loss must be a positive finite number, got %g", src,
                             (double)c->init_scale);
    if (!(c->incr_ratio > 1.0 && isfinite(c->incr_ratio)))
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.incr_ratio must be > 1, got %g", src, c->incr_ratio);
    if (!(c->decr_ratio > 0.0 && c->decr_ratio < 1.0))
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.decr_ratio must be in (0, 1), got %g", src, c->decr_ratio);
    if (c->incr_every_n_steps < 1)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.incr_every_n_steps must be >= 1, got %lld", src,
                             (long long)c->incr_every_n_steps);
    if (c->decr_every_n_nan_or_inf < 1)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.decr_every_n_nan_or_inf must be >= 1, got %lld", src,
                             (long long)c->decr_every_n_nan_or_inf);
    if (!(c->min_scale >= 0.0 && isfinite(c->min_scale)))
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.min_loss_scale must be >= 0 (0: no floor), got %g", src,
                             c->min_scale);
    if (!(c->max_scale >= 0.0 && c->max_scale <= 3.4e38))
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.max_loss_scale must be >= 0 (0: no ceiling), got %g", src,
                             c->max_scale);
    if (c->max_scale > 0.0 && c->min_scale > c->max_scale)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.min_loss_scale (%g) is above Global.max_loss_scale (%g)", src,
                             c->min_scale, c->max_scale);
    if (c->enabled && c->max_scale > 0.0 && (double)c->init_scale > c->max_scale)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.scale_loss (%g) is above Global.max_loss_scale (%g)", src,
                             (double)c->init_scale, c->max_scale);
    if (c->enabled && (double)c->init_scale < c->min_scale)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.scale_loss (%g) is below Global.min_loss_scale (%g)", src,
                             (double)c->init_scale, c->min_scale);
    return OCR_OK;
}

ocr_status_t amp_scaler_config_from_config(AmpScalerConfig *c, const OcrConfig *cfg, int scaling_needed) {
    AmpScalerConfig d = amp_scaler_config_default();
    double init, min_s, max_s;
    int dynamic;
    OCR_TRY(ocr_config_get_double(cfg, "Global.scale_loss", d.init_scale, &init));
    OCR_TRY(ocr_config_get_bool(cfg, "Global.use_dynamic_loss_scaling", d.dynamic, &dynamic));
    OCR_TRY(ocr_config_get_int(cfg, "Global.incr_every_n_steps", d.incr_every_n_steps, &d.incr_every_n_steps));
    OCR_TRY(ocr_config_get_double(cfg, "Global.incr_ratio", d.incr_ratio, &d.incr_ratio));
    OCR_TRY(ocr_config_get_double(cfg, "Global.decr_ratio", d.decr_ratio, &d.decr_ratio));
    OCR_TRY(ocr_config_get_int(cfg, "Global.decr_every_n_nan_or_inf", d.decr_every_n_nan_or_inf,
                               &d.decr_every_n_nan_or_inf));
    OCR_TRY(ocr_config_get_double(cfg, "Global.min_loss_scale", d.min_scale, &min_s));
    OCR_TRY(ocr_config_get_double(cfg, "Global.max_loss_scale", d.max_scale, &max_s));
    const char *src = ocr_config_source(cfg);
    if (!(init > 0.0 && init <= 3.4e38))
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.scale_loss must be a positive finite number, got %g", src,
                             init);
    d.init_scale = (float)init;
    d.dynamic = dynamic;
    d.min_scale = min_s;
    d.max_scale = max_s;
    OCR_TRY(amp_scaler_config_check(&d, src));
    if (!scaling_needed) {
        d.enabled = 0;
        d.dynamic = 0;
        d.init_scale = 1.0f;
    }
    *c = d;
    return OCR_OK;
}

void amp_scaler_init(AmpScaler *s, const AmpScalerConfig *cfg) {
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    s->scale = cfg->enabled ? cfg->init_scale : 1.0f;
}

float amp_scaler_inv_scale(const AmpScaler *s) { return (float)(1.0 / (double)amp_scaler_scale(s)); }

float amp_scaler_lowered(const AmpScalerConfig *c, float scale) {
    float next = (float)((double)scale * c->decr_ratio);
    if (c->min_scale > 0.0 && (double)next < c->min_scale) return (float)c->min_scale > scale ? scale : (float)c->min_scale;
    return next;
}

amp_scale_event_t amp_scaler_backoff(AmpScaler *s) {
    const AmpScalerConfig *c = &s->cfg;
    if (!c->enabled || !c->dynamic) return AMP_SCALE_AT_FLOOR;
    float next = amp_scaler_lowered(c, s->scale);
    // A scale of 0 would make inv_scale infinite: without a floor, f32's range is the floor.
    if (!(next < s->scale) || next <= 0.0f) return AMP_SCALE_AT_FLOOR;
    s->scale = next;
    s->good_steps = 0;
    s->bad_steps = 0;
    return AMP_SCALE_BACKED_OFF;
}

amp_scale_event_t amp_scaler_update(AmpScaler *s, int found_inf) {
    s->steps++;
    if (found_inf) s->overflow_steps++;
    const AmpScalerConfig *c = &s->cfg;
    if (!c->enabled || !c->dynamic) return AMP_SCALE_KEPT;
    if (found_inf) {
        s->good_steps = 0;
        if (++s->bad_steps < c->decr_every_n_nan_or_inf) return AMP_SCALE_KEPT;
        s->bad_steps = 0;
        float next = (float)((double)s->scale * c->decr_ratio);
        if (c->min_scale > 0.0 && (double)next < c->min_scale) {
            float floor = (float)c->min_scale;
            amp_scale_event_t e = floor < s->scale ? AMP_SCALE_BACKED_OFF : AMP_SCALE_AT_FLOOR;
            s->scale = floor;
            return e;
        }
        s->scale = next;
        return AMP_SCALE_BACKED_OFF;
    }
    s->bad_steps = 0;
    if (++s->good_steps < c->incr_every_n_steps) return AMP_SCALE_KEPT;
    s->good_steps = 0;
    float next = (float)((double)s->scale * c->incr_ratio);
    if (!isfinite(next)) return AMP_SCALE_AT_CEILING;  // PyTorch and Paddle keep the old scale
    if (c->max_scale > 0.0 && (double)next > c->max_scale) {
        float ceil = (float)c->max_scale;
        amp_scale_event_t e = ceil > s->scale ? AMP_SCALE_GREW : AMP_SCALE_AT_CEILING;
        s->scale = ceil;
        return e;
    }
    s->scale = next;
    return AMP_SCALE_GREW;
}

ocr_status_t amp_scaler_restore(AmpScaler *s, float scale, int64_t good_steps, int64_t bad_steps) {
    if (!(isfinite(scale) && scale > 0.0f) || good_steps < 0 || bad_steps < 0)
        return ocr_set_error(OCR_ERR_FORMAT, "loss scaler state: scale %g, good steps %lld, bad steps %lld is invalid",
                             (double)scale, (long long)good_steps, (long long)bad_steps);
    s->scale = s->cfg.enabled ? scale : 1.0f;
    s->good_steps = good_steps;
    s->bad_steps = bad_steps;
    return OCR_OK;
}

// ---- the scaler's state in a checkpoint ---------------------------------------------------------------

AmpScalerState amp_scaler_state(const AmpScaler *s) {
    return (AmpScalerState){s->scale, s->good_steps, s->bad_steps, s->steps, s->overflow_steps};
}

ocr_status_t amp_scaler_set_state(AmpScaler *s, const AmpScalerState *st) {
    if (s->cfg.enabled) OCR_TRY(amp_scaler_restore(s, st->scale, st->good_steps, st->bad_steps));
    s->steps = st->steps;
    s->overflow_steps = st->overflow_steps;
    return OCR_OK;
}

void amp_scaler_state_to_json(const AmpScalerState *st, cJSON *obj) {
    char hex[32];
    snprintf(hex, sizeof hex, "%a", (double)st->scale);
    cJSON_AddStringToObject(obj, "scale_hex", hex);
    cJSON_AddNumberToObject(obj, "scale", st->scale);
    cJSON_AddNumberToObject(obj, "good_steps", (double)st->good_steps);
    cJSON_AddNumberToObject(obj, "bad_steps", (double)st->bad_steps);
    cJSON_AddNumberToObject(obj, "steps", (double)st->steps);
    cJSON_AddNumberToObject(obj, "overflow_steps", (double)st->overflow_steps);
}

// A count: beyond 2^53 (or inf from "1e999") the conversion to int64_t would be undefined.
static ocr_status_t json_count(const cJSON *o, const char *key, const char *source, int64_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) return ocr_set_error(OCR_ERR_FORMAT, "%s: \"%s\" is missing or not a number", source, key);
    if (!(v->valuedouble >= -9007199254740992.0 && v->valuedouble <= 9007199254740992.0))
        return ocr_set_error(OCR_ERR_FORMAT, "%s: \"%s\" = %g is out of range", source, key, v->valuedouble);
    *out = (int64_t)v->valuedouble;
    return OCR_OK;
}

ocr_status_t amp_scaler_state_from_json(AmpScalerState *st, const cJSON *obj, const char *source) {
    const cJSON *hex = cJSON_GetObjectItemCaseSensitive(obj, "scale_hex");
    if (!cJSON_IsString(hex))
        return ocr_set_error(OCR_ERR_FORMAT, "%s: \"%s\" is missing or not a string", source, "scale_hex");
    st->scale = (float)strtod(hex->valuestring, NULL);
    OCR_TRY(json_count(obj, "good_steps", source, &st->good_steps));
    OCR_TRY(json_count(obj, "bad_steps", source, &st->bad_steps));
    OCR_TRY(json_count(obj, "steps", source, &st->steps));
    OCR_TRY(json_count(obj, "overflow_steps", source, &st->overflow_steps));
    return OCR_OK;
}

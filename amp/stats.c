#include "amp/stats.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void amp_stats_init(AmpStats *s, const char *const *names, int n, float scale) {
    memset(s, 0, sizeof *s);
    s->last_skipped_step = -1;
    s->last_overflow_layer = -1;
    s->act_amax_step = -1;
    s->scale = s->min_scale_seen = s->max_scale_seen = scale;
    s->n_layers = n;
    if (n <= 0) return;
    s->layer_names = calloc((size_t)n, sizeof *s->layer_names);
    s->grad_amax = calloc((size_t)n, sizeof *s->grad_amax);
    s->grad_nonfinite = calloc((size_t)n, sizeof *s->grad_nonfinite);
    s->overflows = calloc((size_t)n, sizeof *s->overflows);
    s->act_amax = malloc((size_t)n * sizeof *s->act_amax);
    OCR_ASSERT(s->layer_names && s->grad_amax && s->grad_nonfinite && s->overflows && s->act_amax,
               "out of host memory");
    for (int i = 0; i < n; i++) {
        s->layer_names[i] = strdup(names[i]);
        OCR_ASSERT(s->layer_names[i], "out of host memory");
        s->act_amax[i] = -1.0f;
    }
}

void amp_stats_free(AmpStats *s) {
    for (int i = 0; i < s->n_layers; i++) free(s->layer_names[i]);
    free(s->layer_names);
    free(s->grad_amax);
    free(s->grad_nonfinite);
    free(s->overflows);
    free(s->act_amax);
    free(s->history);
    memset(s, 0, sizeof *s);
}

static int dtype_slot(ocr_dtype_t d) {
    OCR_ASSERT(ocr_dtype_is_float(d), "amp stats: %s is not a float dtype", ocr_dtype_name(d));
    return d == OCR_F32 ? 0 : d == OCR_F16 ? 1 : 2;
}

void amp_stats_count_calls(AmpStats *s, const char *type, ocr_dtype_t dtype, int64_t n) {
    int slot = dtype_slot(dtype);
    for (int i = 0; i < s->n_types; i++) {
        if (strcmp(s->types[i].type, type) == 0) {
            s->types[i].calls[slot] += n;
            return;
        }
    }
    OCR_ASSERT(s->n_types < AMP_STATS_MAX_TYPES, "amp stats: more than %d op types", AMP_STATS_MAX_TYPES);
    AmpOpTypeCalls *t = &s->types[s->n_types++];
    memset(t, 0, sizeof *t);
    snprintf(t->type, sizeof t->type, "%s", type);
    t->calls[slot] = n;
}

int64_t amp_stats_calls(const AmpStats *s, const char *type, ocr_dtype_t dtype) {
    for (int i = 0; i < s->n_types; i++)
        if (strcmp(s->types[i].type, type) == 0) return s->types[i].calls[dtype_slot(dtype)];
    return 0;
}

static void push_history(AmpStats *s, int64_t step, float before, float after, amp_scale_event_t event) {
    if (s->n_history == s->cap_history) {
        s->cap_history = s->cap_history ? 2 * s->cap_history : 64;
        s->history = realloc(s->history, (size_t)s->cap_history * sizeof *s->history);
        OCR_ASSERT(s->history, "out of host memory");
    }
    AmpScaleChange *c = &s->history[s->n_history++];
    c->step = step;
    c->before = before;
    c->after = after;
    c->event = event;
}

void amp_stats_record_recompute(AmpStats *s, int64_t step, float before, float after) {
    s->recomputed_steps++;
    s->scale = after;
    if (after < s->min_scale_seen) s->min_scale_seen = after;
    push_history(s, step, before, after, AMP_SCALE_BACKED_OFF);
}

void amp_stats_record_step(AmpStats *s, int64_t step, int skipped, int layer, float before, float after,
                           amp_scale_event_t event) {
    s->steps++;
    if (skipped) {
        s->skipped_steps++;
        s->consecutive_skipped++;
        if (s->consecutive_skipped > s->max_consecutive_skipped) s->max_consecutive_skipped = s->consecutive_skipped;
        s->last_skipped_step = step;
        s->last_overflow_layer = layer;
        if (layer >= 0 && layer < s->n_layers) s->overflows[layer]++;
    } else {
        s->consecutive_skipped = 0;
    }
    s->scale = after;
    if (after < s->min_scale_seen) s->min_scale_seen = after;
    if (after > s->max_scale_seen) s->max_scale_seen = after;
    if (event == AMP_SCALE_KEPT) return;
    push_history(s, step, before, after, event);
}

float amp_tensor_amax(const OcrTensor *t, int64_t *nonfinite) {
    OCR_ASSERT(t->device.type == OCR_DEVICE_CPU && ocr_dtype_is_float(t->dtype), "amax: CPU float tensors only");
    int64_t n = ocr_tensor_numel(t), bad = 0;
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float v;
        switch (t->dtype) {
        case OCR_F32: v = ((const float *)t->data)[i]; break;
        case OCR_F16: v = ocr_f16_to_f32(((const ocr_f16_t *)t->data)[i]); break;
        default: v = ocr_bf16_to_f32(((const ocr_bf16_t *)t->data)[i]); break;
        }
        if (!isfinite(v))
            bad++;
        else if (fabsf(v) > amax)
            amax = fabsf(v);
    }
    if (nonfinite) *nonfinite = bad;
    return amax;
}

// JSON has no inf/NaN: non-finite numbers become null.
static void add_num(cJSON *o, const char *key, double v) {
    if (isfinite(v))
        cJSON_AddNumberToObject(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

char *amp_stats_json(const AmpStats *s, int with_layers) {
    cJSON *o = cJSON_CreateObject();
    OCR_ASSERT(o, "out of host memory");
    add_num(o, "steps", (double)s->steps);
    add_num(o, "skipped_steps", (double)s->skipped_steps);
    add_num(o, "recomputed_steps", (double)s->recomputed_steps);
    add_num(o, "consecutive_skipped", (double)s->consecutive_skipped);
    add_num(o, "max_consecutive_skipped", (double)s->max_consecutive_skipped);
    add_num(o, "last_skipped_step", (double)s->last_skipped_step);
    if (s->last_overflow_layer >= 0 && s->last_overflow_layer < s->n_layers)
        cJSON_AddStringToObject(o, "last_overflow_layer", s->layer_names[s->last_overflow_layer]);
    else
        cJSON_AddNullToObject(o, "last_overflow_layer");
    add_num(o, "loss_scale", s->scale);
    add_num(o, "min_loss_scale_seen", s->min_scale_seen);
    add_num(o, "max_loss_scale_seen", s->max_scale_seen);
    cJSON *calls = cJSON_AddObjectToObject(o, "op_calls");
    for (int i = 0; i < s->n_types; i++) {
        cJSON *t = cJSON_AddObjectToObject(calls, s->types[i].type);
        add_num(t, "float32", (double)s->types[i].calls[0]);
        add_num(t, "float16", (double)s->types[i].calls[1]);
        add_num(t, "bfloat16", (double)s->types[i].calls[2]);
    }
    cJSON *hist = cJSON_AddArrayToObject(o, "scale_history");
    for (int i = 0; i < s->n_history; i++) {
        cJSON *h = cJSON_CreateObject();
        add_num(h, "step", (double)s->history[i].step);
        add_num(h, "before", s->history[i].before);
        add_num(h, "after", s->history[i].after);
        cJSON_AddStringToObject(h, "event", amp_scale_event_name(s->history[i].event));
        cJSON_AddItemToArray(hist, h);
    }
    if (with_layers) {
        cJSON *layers = cJSON_AddArrayToObject(o, "layers");
        for (int i = 0; i < s->n_layers; i++) {
            cJSON *l = cJSON_CreateObject();
            cJSON_AddStringToObject(l, "name", s->layer_names[i]);
            add_num(l, "grad_amax", s->grad_amax[i]);
            cJSON_AddBoolToObject(l, "grad_nonfinite", s->grad_nonfinite[i] != 0);
            add_num(l, "overflows", (double)s->overflows[i]);
            if (s->act_amax[i] >= 0.0f)
                add_num(l, "activation_amax", s->act_amax[i]);
            else
                cJSON_AddNullToObject(l, "activation_amax");
            cJSON_AddItemToArray(layers, l);
        }
        add_num(o, "activation_amax_step", (double)s->act_amax_step);
    }
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    OCR_ASSERT(text, "out of host memory");
    return text;
}

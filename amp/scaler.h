// Loss scaler: a pure state machine over "did this step's gradients hold inf/NaN?".
//
// One machine covers PyTorch's GradScaler, Paddle's GradScaler and Apex's scaler:
//   overflow:  good = 0; bad += 1; when bad == decr_every_n_nan_or_inf: scale ·= decr_ratio,
//              clamped up to min_scale (when > 0), bad = 0
//   finite:    bad = 0; good += 1; when good == incr_every_n_steps: scale ·= incr_ratio when
//              the result is finite, clamped down to max_scale (when > 0), good = 0
// The scale is an f32 (as in both frameworks); products are formed in double and rounded once.
// - PyTorch GradScaler(init_scale, growth_factor, backoff_factor, growth_interval):
//   decr_every_n_nan_or_inf = 1, min_scale = 0, max_scale = 0 (amp_scaler_config_pytorch).
// - Paddle GradScaler (update_loss_scaling kernel, static graph and fleet): floor 1,
//   no ceiling (amp_scaler_config_paddle). Paddle's dygraph Python _update has no floor:
//   min_scale = 0.
// - Apex: max_scale = 2^24.
// Static scaling (dynamic = 0) keeps the scale; a disabled scaler (O0, bf16) has scale 1.
// What happens to an overflowed step is the caller's (amp/engine.h, Global.amp_overflow): it is
// skipped (amp_scaler_update with found_inf, as in PyTorch and Paddle), or recomputed at once at
// a lower scale (amp_scaler_backoff); the scaler only decides the scale.
#ifndef OCR_AMP_SCALER_H
#define OCR_AMP_SCALER_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "core/config.h"
#include "core/error.h"

typedef struct {
    int enabled;                      // 0: no scaling at all (scale 1)
    int dynamic;                      // 0: static scale
    float init_scale;                 // Global.scale_loss
    double incr_ratio;                // growth factor, > 1
    double decr_ratio;                // backoff factor, in (0, 1)
    int64_t incr_every_n_steps;       // growth interval, >= 1
    int64_t decr_every_n_nan_or_inf;  // overflow steps before a backoff, >= 1
    double min_scale;                 // floor; 0 = none
    double max_scale;                 // ceiling; 0 = none (growth still stops short of inf)
} AmpScalerConfig;

// Our defaults: enabled, dynamic, 65536, 2, 0.5, 2000, 1, floor 1, ceiling 2^24.
AmpScalerConfig amp_scaler_config_default(void);
// torch.amp.GradScaler() defaults: 65536, 2, 0.5, 2000, 1, no floor, no ceiling.
AmpScalerConfig amp_scaler_config_pytorch(void);
// paddle.amp.GradScaler() defaults: 32768, 2, 0.5, 1000, 2, floor 1 (kernel), no ceiling.
AmpScalerConfig amp_scaler_config_paddle(void);
// The scaler off (scale 1, nothing changes): O0 and bfloat16.
AmpScalerConfig amp_scaler_config_off(void);

// Range checks; the message names the key (Global.scale_loss, Global.incr_ratio, ...).
// `source` prefixes the message (a config file name).
ocr_status_t amp_scaler_config_check(const AmpScalerConfig *c, const char *source);
// Reads Global.scale_loss, use_dynamic_loss_scaling, incr_every_n_steps, incr_ratio,
// decr_ratio, decr_every_n_nan_or_inf, min_loss_scale, max_loss_scale. `scaling_needed` is 0
// for O0 and bfloat16: the keys are still validated, and the scaler comes back off.
ocr_status_t amp_scaler_config_from_config(AmpScalerConfig *c, const OcrConfig *cfg, int scaling_needed);

typedef enum {
    AMP_SCALE_KEPT = 0,     // nothing changed
    AMP_SCALE_GREW,         // incr_every_n_steps finite steps in a row
    AMP_SCALE_BACKED_OFF,   // decr_every_n_nan_or_inf overflows in a row
    AMP_SCALE_AT_FLOOR,     // a backoff that the floor stopped (scale unchanged or clamped up)
    AMP_SCALE_AT_CEILING,   // a growth that the ceiling or f32 range stopped
} amp_scale_event_t;
const char *amp_scale_event_name(amp_scale_event_t e);

typedef struct {
    AmpScalerConfig cfg;
    float scale;
    int64_t good_steps;      // consecutive finite steps since the last growth or overflow
    int64_t bad_steps;       // consecutive overflow steps since the last backoff
    int64_t steps;           // updates seen
    int64_t overflow_steps;  // of which overflowed
} AmpScaler;

void amp_scaler_init(AmpScaler *s, const AmpScalerConfig *cfg);
static inline float amp_scaler_scale(const AmpScaler *s) { return s->cfg.enabled ? s->scale : 1.0f; }
// 1 / scale rounded to f32 through double (PyTorch's inv_scale).
float amp_scaler_inv_scale(const AmpScaler *s);
// Records one optimizer step's outcome and moves the scale.
amp_scale_event_t amp_scaler_update(AmpScaler *s, int found_inf);
// The scale one backoff gives: scale · decr_ratio rounded to f32, clamped up to min_scale (when
// > 0). Equal to `scale` when the floor stops it; 0 only without a floor (f32 underflow).
float amp_scaler_lowered(const AmpScalerConfig *c, float scale);
// Recompute mode (Global.amp_overflow: recompute): the scale comes down by one decr_ratio at once
// (decr_every_n_nan_or_inf does not delay it) and the counters start again (good = bad = 0), so
// the scaler is exactly that of a run whose scale started at the lowered value: steps and
// overflow_steps do not count the attempt. AMP_SCALE_BACKED_OFF, or AMP_SCALE_AT_FLOOR with
// nothing changed when the scale cannot come down (at Global.min_loss_scale, a static or
// disabled scaler, or an f32 underflow to 0 without a floor): the step is then skipped.
amp_scale_event_t amp_scaler_backoff(AmpScaler *s);
// Resumes from a checkpoint (scale > 0 and finite, counters >= 0).
ocr_status_t amp_scaler_restore(AmpScaler *s, float scale, int64_t good_steps, int64_t bad_steps);

// ---- the scaler's state in a checkpoint ---------------------------------------------------------------
// Everything a resumed run needs to continue the scale exactly where it was.
typedef struct {
    float scale;             // AmpScaler.scale as it is (also when the scaler is off)
    int64_t good_steps, bad_steps, steps, overflow_steps;
} AmpScalerState;

AmpScalerState amp_scaler_state(const AmpScaler *s);
// Resumes from a saved state: an enabled scaler takes the scale and the good/bad counters
// (amp_scaler_restore's checks: OCR_ERR_FORMAT), a disabled one keeps scale 1; the update
// counters are taken either way.
ocr_status_t amp_scaler_set_state(AmpScaler *s, const AmpScalerState *st);
// The state as the members of a JSON object (a checkpoint's state.json "scaler"): "scale_hex"
// (C99 %a, so the f32 scale comes back exactly), "scale" (for readers), "good_steps",
// "bad_steps", "steps", "overflow_steps".
void amp_scaler_state_to_json(const AmpScalerState *st, cJSON *obj);
// Reads them back; a missing, mistyped or out-of-range member is OCR_ERR_FORMAT naming `source`
// (the file) and the key.
ocr_status_t amp_scaler_state_from_json(AmpScalerState *st, const cJSON *obj, const char *source);

#endif

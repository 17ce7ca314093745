// AMP statistics for the trainer's metrics.jsonl and the report: op calls per type and dtype,
// step counts (skipped steps are never silent), the loss-scale history, and per-layer gradient
// and activation amax. A plain struct; amp_stats_json writes it as one JSON object.
#ifndef OCR_AMP_STATS_H
#define OCR_AMP_STATS_H

#include <stdint.h>

#include "amp/scaler.h"
#include "core/tensor.h"

#define AMP_STATS_MAX_TYPES 48

typedef struct {
    char type[32];
    int64_t calls[3];  // forward calls that ran in f32, f16, bf16
} AmpOpTypeCalls;

typedef struct {
    int64_t step;  // optimizer step (0-based) whose update changed the scale
    float before, after;
    amp_scale_event_t event;
} AmpScaleChange;

typedef struct {
    int64_t steps;                    // optimizer steps attempted
    int64_t skipped_steps;            // skipped for inf/NaN gradients
    int64_t recomputed_steps;         // overflowed attempts run again at a lower scale (not counted
                                      // in steps: a step may need several; Global.amp_overflow)
    int64_t consecutive_skipped;      // skipped in a row up to the last step
    int64_t max_consecutive_skipped;
    int64_t last_skipped_step;        // -1: none yet
    int last_overflow_layer;          // layer index of the last skipped step's first bad layer (-1)
    float scale;                      // current loss scale
    float min_scale_seen, max_scale_seen;

    int n_types;
    AmpOpTypeCalls types[AMP_STATS_MAX_TYPES];

    int n_history, cap_history;  // scale changes (and refused ones: at floor / ceiling), oldest first
    AmpScaleChange *history;

    int n_layers;
    char **layer_names;        // owned copies
    float *grad_amax;          // per layer, from the last checked step (unscaled; finite values)
    int *grad_nonfinite;       // per layer, from the last checked step
    int64_t *overflows;        // per layer: skipped steps first located there
    float *act_amax;           // per layer, from the last activation sample (-1: did not run)
    int64_t act_amax_step;     // step of that sample, -1: none
} AmpStats;

// layer_names may be NULL (n_layers 0).
void amp_stats_init(AmpStats *s, const char *const *layer_names, int n_layers, float initial_scale);
void amp_stats_free(AmpStats *s);

// Adds n forward calls of an op type in a dtype (f32, f16, bf16).
void amp_stats_count_calls(AmpStats *s, const char *type, ocr_dtype_t dtype, int64_t n);
int64_t amp_stats_calls(const AmpStats *s, const char *type, ocr_dtype_t dtype);
// Records one optimizer step: skipped or not, where the overflow was first seen (-1 unknown),
// and the scaler's decision.
void amp_stats_record_step(AmpStats *s, int64_t step, int skipped, int overflow_layer, float scale_before,
                           float scale_after, amp_scale_event_t event);

// Records an overflowed attempt that is recomputed at a lower scale (not a step): the count,
// the scale and the backoff in the history (event AMP_SCALE_BACKED_OFF).
void amp_stats_record_recompute(AmpStats *s, int64_t step, float scale_before, float scale_after);

// max |x| over the finite values of a float CPU tensor; *nonfinite (may be NULL) = count of
// inf/NaN values.
float amp_tensor_amax(const OcrTensor *t, int64_t *nonfinite);

// The whole struct as a JSON object (caller frees); with_layers adds the per-layer arrays.
char *amp_stats_json(const AmpStats *s, int with_layers);

#endif

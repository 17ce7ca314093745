// Which layers to keep in float32: PaddleOCR's advice for an AMP run that loses accuracy is to
// take the op types or layers that suffer out of auto-cast (custom_black_list); this finds them.
//
// On given weights and the first N batches of the Eval split, every layer group (the op table's
// names cut at a depth, sensitivity_group_name) is measured twice against the float32 forward:
//   low_only   only this group in the low precision, every other op float32: the error the
//              group makes on its own;
//   fp32_kept  this group in float32, everything else as the AMP policy says: what keeping it
//              out of auto-cast recovers.
// and so is every op type that runs in the low precision (the same two variants by type, for
// Global.amp_custom_black_list). Each variant is a fresh model with the variant's policy
// attached (amp_policy_set_lowp_layers / amp_policy_add_fp32_layers); nothing is trained.
// Measures per variant: relative L2 and max-abs distance of the logits from float32's,
// non-finite logits, the CTC loss, greedy-decode accuracy on those lines and how many lines
// decode differently from float32.
//
// The error of a variant, E = ||z − z32||₂ / ||z32||₂ over all logits of the N batches (∞ when
// any logit is non-finite), gives each group the score
//   score = max(E(low_only), E(amp) − E(fp32_kept))      (∞ − ∞ := 0, ∞ − finite := ∞)
// i.e. the harm it does alone or the harm its float32 keeping removes, whichever is larger.
// Groups rank by score (most harmful first); ties by non-finite logits produced alone, then by
// forward order. The proposal is the shortest prefix of the ranking (at most max_groups) whose
// float32 keeping passes (finite, E <= threshold, accuracy drop <= acc_tolerance), each prefix
// measured for real; or a single op type whose black-listing passes with fewer FLOPs moved to
// float32. A candidate that moves more than half of the low-precision FLOPs back to float32 is
// not one (that is AMP turned off). When none passes, the one that comes closest (and improves
// on AMP) is proposed, marked as not passing. Nothing is proposed when the AMP run already
// passes. docs/AMP.md, "Finding the layers to keep in FP32".
#ifndef OCR_TRAINING_SENSITIVITY_H
#define OCR_TRAINING_SENSITIVITY_H

#include <stdint.h>
#include <stdio.h>

#include "amp/policy.h"
#include "core/config.h"
#include "core/error.h"
#include "training/run_config.h"

typedef struct {
    const char *weights;     // .safetensors file or checkpoint directory (required)
    ocr_dtype_t dtype;       // OCR_F16 or OCR_BF16
    ocr_amp_level_t level;   // OCR_AMP_O1 or OCR_AMP_O2
    int batches;             // the first N Eval batches (>= 1)
    int batch_size;          // lines per batch; 0: Eval.loader.batch_size_per_card
    int depth;               // group depth (>= 1), see sensitivity_group_name
    double threshold;        // E the proposal must reach (relative L2 of the logits); 0: the dtype's
                             // default (sens_default_threshold)
    double acc_tolerance;    // accuracy drop (fraction of the lines) the proposal may keep
    int max_groups;          // longest list of groups tried (>= 1)
    int types;               // also measure op types (the black-list candidates)
    FILE *progress;          // one line per variant; NULL: silent
} SensOptions;

// The defaults: 2 batches of 8 lines, depth 2, the dtype's threshold, accuracy tolerance 0, at
// most 4 groups, types on; dtype float16, level O2.
void sens_options_default(SensOptions *o);
// 32 unit roundoffs of the dtype: 2^-6 (0.0156) for float16, 2^-3 (0.125) for bfloat16. A healthy
// AMP run of PP-OCRv4 is at about 16 (0.0078 and 0.068, measured); fragile layers are far beyond.
double sens_default_threshold(ocr_dtype_t dtype);

typedef struct {
    int64_t lines;       // lines measured
    double rel_l2;       // ||z − z32|| / ||z32|| (finite values only; INFINITY when nonfinite > 0)
    double max_abs;      // max |z − z32| over finite pairs (INFINITY when nonfinite > 0)
    int64_t nonfinite;   // non-finite logits
    double loss;         // mean CTC loss over the lines (PaddleOCR's reduction, zero_infinity)
    double acc;          // greedy-decode accuracy against the labels
    int64_t changed;     // lines whose greedy decode differs from float32's
    double seconds;      // forward time of the N batches
} SensMeasure;

// E of a measure (INFINITY when it produced non-finite logits).
double sens_error(const SensMeasure *m);

#define SENS_NAME_MAX 192
#define SENS_MAX_PATTERNS 8

typedef struct {
    char name[SENS_NAME_MAX];  // the layer-name prefix, or the op type
    int is_type;               // 1: an op-type group (Global.amp_custom_black_list)
    int n_ops;                 // ops in the group
    int n_lowp;                // of which run in the low precision under the policy
    double lowp_flops;         // forward FLOPs (one batch) of those ops
    // Layer groups: the Global.amp_fp32_layers globs that match exactly the group's ops.
    int n_patterns;
    char patterns[SENS_MAX_PATTERNS][SENS_NAME_MAX];
    int measured;              // 0: nothing of it runs low (n_lowp == 0): not measured, not ranked
    SensMeasure low_only, fp32_kept;
    double score;
    int rank;                  // 1-based among its kind (layers or types); 0: not ranked
} SensGroup;

// One step of the proposal search: the first k ranked groups kept in float32.
typedef struct {
    int k;
    SensMeasure m;
    int passes;
} SensStep;

typedef struct {
    // the setting
    ocr_dtype_t dtype;
    ocr_amp_level_t level;
    int depth, batches, batch_size;
    double threshold, acc_tolerance;  // as applied (the default resolved)
    int64_t lines;
    double total_flops;          // forward FLOPs of one batch, every op
    // the references
    SensMeasure fp32, amp;
    int amp_passes;
    // groups: layers first (forward order), then op types
    int n_groups, n_layers;
    SensGroup *groups;
    int *layer_rank;             // indices into groups, ranked (n_ranked_layers)
    int n_ranked_layers;
    int *type_rank;              // indices into groups, ranked (n_ranked_types)
    int n_ranked_types;
    // the search and the proposal
    int n_steps;
    SensStep steps[64];
    int proposal_needed;         // the AMP run does not pass
    int proposal_passes;         // the proposal passes (with it applied)
    int n_fp32_groups;           // the proposal: layer groups (indices into groups) ...
    int fp32_groups[64];
    int black_type;              // ... or one op type (index into groups; -1: none)
    SensMeasure proposed;        // the AMP run with the proposal applied (when needed)
    double proposal_fp32_flops;  // FLOPs the proposal moves back to float32 (one batch)
    double seconds;
    // the config the measurements ran under (use_amp, level, dtype set) and with the proposal
    OcrConfig *amp_cfg;
    OcrConfig *proposal_cfg;     // NULL when nothing is proposed
} SensResult;

// Layer-name depth: the group of `name` at depth k among `names` (all the model's op names):
// names split at dots into levels, where a list index (a numeric component) belongs to the level
// before it ("blocks5.3" is one level) and a level every name below which shares one next level
// is merged with it ("neck" → "neck.encoder"); the group is the first k levels (the whole name
// when it has fewer). PP-OCRv4 at depth 2: backbone.conv1, backbone.blocks5.3,
// neck.encoder.svtr_block.0, neck.encoder.conv1, head.fc.
void sensitivity_group_name(const char *const *names, int n, int i, int depth, char *out, size_t cap);

// Validates the options and the inputs (the weights load into the config's model, the Eval
// split opens, the level and dtype) before any measurement: every problem is an error naming
// the option (--weights, --dtype, --level, --batches, --depth, ...) or the config key
// (OCR_ERR_INVALID_ARG / CONFIG / NOT_FOUND / FORMAT). Then measures and proposes.
// cfg: a config that passed run_config_load with RUN_NEED_EVAL.
ocr_status_t sensitivity_run(const OcrConfig *cfg, const RunConfig *rc, const SensOptions *o, SensResult *out);
void sensitivity_result_free(SensResult *r);

// The proposal as `-o` assignments ("Global.use_amp=true", "Global.amp_level=O2",
// "Global.amp_dtype=...", "Global.amp_fp32_layers=[...]", "Global.amp_custom_black_list=[...]"):
// the config's own lists with the proposed entries appended. *n = 0 when nothing is proposed.
// Free with sensitivity_overrides_free.
ocr_status_t sensitivity_proposal_overrides(const SensResult *r, char ***list, int *n);
void sensitivity_overrides_free(char **list, int n);

// Writes dir/sensitivity.json (setting, references, every group with both measures, the
// rankings, the search, the proposal), dir/proposal.yml (the Global keys of the proposal, a YAML
// snippet for a PaddleOCR config) and dir/config_with_proposal.json (the whole config with the
// proposal applied: `-c` it). The two proposal files are written only when something is proposed.
ocr_status_t sensitivity_write(const SensResult *r, const char *dir);

// ---- what the list recovers and what it costs: three trainings ------------------------------------
typedef struct {
    char name[32];      // "fp32", "amp", "amp+proposal"
    double acc, cer;    // final weights on the Eval split
    double samples_per_s;
    int64_t peak_bytes;
    int64_t skipped_steps;
    double final_loss;
} SensCompareRun;

typedef struct {
    int n_runs;
    SensCompareRun runs[3];
} SensCompare;

// Trains float32, AMP and AMP with the proposal (r->proposal_cfg; only the first two when nothing
// is proposed) from the weights (Global.pretrained_model) with the config's schedule and seed
// (max_steps > 0: stop there), each run's files under dir/compare/<run> (no checkpoints), and
// evaluates the final weights on the Eval split.
ocr_status_t sensitivity_compare(const SensResult *r, const char *weights, const char *dir, int64_t max_steps,
                                 FILE *progress, SensCompare *out);

#endif

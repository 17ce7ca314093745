#include "training/capacity.h"

#include <stdlib.h>
#include <string.h>

#include "amp/engine.h"
#include "training/distill.h"
#include "training/optim.h"
#include "training/step.h"
#include "core/rng.h"
#include "data/loader.h"
#include "data/transforms.h"
#include "models/model.h"
#include "models/amp_view.h"

static const char *const NAMES[CAPACITY_PRECISIONS] = {"fp32", "fp16-o1", "fp16-o2", "bf16-o2"};
static const char *const OV_FP32[] = {"Global.use_amp=false", NULL};
static const char *const OV_F16O1[] = {"Global.use_amp=true", "Global.amp_level=O1", "Global.amp_dtype=float16",
                                       NULL};
static const char *const OV_F16O2[] = {"Global.use_amp=true", "Global.amp_level=O2", "Global.amp_dtype=float16",
                                       NULL};
static const char *const OV_BF16O2[] = {"Global.use_amp=true", "Global.amp_level=O2", "Global.amp_dtype=bfloat16",
                                        "Global.amp_stochastic_rounding=false", NULL};

const char *capacity_precision_name(int i) { return i >= 0 && i < CAPACITY_PRECISIONS ? NAMES[i] : NULL; }

const char *const *capacity_precision_overrides(const char *name) {
    if (strcmp(name, "fp32") == 0) return OV_FP32;
    if (strcmp(name, "fp16-o1") == 0) return OV_F16O1;
    if (strcmp(name, "fp16-o2") == 0) return OV_F16O2;
    if (strcmp(name, "bf16-o2") == 0) return OV_BF16O2;
    return NULL;
}

// A copy of cfg with a precision's overrides.
static ocr_status_t clone_for(OcrConfig **out, const OcrConfig *cfg, const char *precision) {
    const char *const *ov = capacity_precision_overrides(precision);
    if (!ov) return ocr_set_error(OCR_ERR_INVALID_ARG, "unknown precision %s (fp32, fp16-o1, fp16-o2, bf16-o2)", precision);
    OCR_TRY(ocr_config_clone(out, cfg));
    for (int i = 0; ov[i]; i++) {
        ocr_status_t st = ocr_config_apply_override(*out, ov[i]);
        if (st != OCR_OK) {
            ocr_config_free(*out);
            return st;
        }
    }
    return OCR_OK;
}

typedef struct {
    OcrConfig *cfg;
    OcrModel *m;
    AmpEngine amp;
    int amp_ok;
    Optimizer optim;
    int optim_ok;
    int H, W, C, max_len;
    // The loaders a training run holds (data/loader.c: prefetch + 1 batch buffers each, sized
    // for the largest batch): bytes per training sample in the ring, and the Eval ring's bytes.
    int64_t ring_per_sample;
    int64_t eval_ring_bytes;
    DistillRun *distill;  // a distillation config's other networks (NULL otherwise)
} Built;

// One loader buffer for `batch` samples of H×W×C with labels of L (data/loader.c's layout).
static int64_t ring_slot_bytes(int64_t batch, int H, int W, int C, int L) {
#define A64(x) (((x) + 63) / 64 * 64)
    return A64(batch * H * W * C) + A64(4 * batch) + A64(4 * batch) + A64(4 * batch * L) + A64(4 * batch) +
           A64(8 * batch);
#undef A64
}

static void built_free(Built *b) {
    distill_run_free(b->distill);
    if (b->optim_ok) optim_free(&b->optim);
    if (b->amp_ok) amp_engine_free(&b->amp);
    if (b->m) ocr_model_free(b->m);
    if (b->cfg) ocr_config_free(b->cfg);
    memset(b, 0, sizeof *b);
}

static ocr_status_t build(Built *b, const OcrConfig *cfg, const char *precision) {
    memset(b, 0, sizeof *b);
    OCR_TRY(clone_for(&b->cfg, cfg, precision));
    RunConfig rc;
    ocr_status_t st = run_config_read(&rc, b->cfg, RUN_NEED_TRAIN_SECTION);
    OcrTransformList tl;
    if (st == OCR_OK) st = ocr_transforms_parse(&tl, b->cfg, "Train.dataset.transforms", rc.max_text_length);
    if (st == OCR_OK) {
        b->C = tl.channels;
        b->max_len = rc.max_text_length;
        OcrLoaderConfig lc;
        st = ocr_loader_config_parse(&lc, b->cfg, "Train");
        if (st == OCR_OK) {
            // The input size: RecResizeImg's, or with PaddleOCR's MultiScaleSampler (PP-OCRv4's
            // configs) its largest scale, where a sample costs the most.
            if (tl.has_resize) {
                b->H = tl.resize_h;
                b->W = tl.resize_w;
            } else if (lc.sampler.num_scales > 1) {
                for (int i = 0; i < lc.sampler.num_scales; i++) {
                    const OcrBatchShape *sc = &lc.sampler.scales[i];
                    if ((int64_t)sc->height * sc->width > (int64_t)b->H * b->W) {
                        b->H = sc->height;
                        b->W = sc->width;
                    }
                }
            } else {
                st = ocr_set_error(OCR_ERR_CONFIG, "Train: capacity planning needs the input size: RecResizeImg in "
                                   "Train.dataset.transforms or a MultiScaleSampler with scales");
            }
            int slots = lc.prefetch + 1 < 2 ? 2 : lc.prefetch + 1;
            b->ring_per_sample = slots * (int64_t)(b->H * b->W * b->C + 4 * b->max_len + 24);
            ocr_loader_config_free(&lc);
        }
        if (st == OCR_OK && rc.eval.present) {
            st = ocr_loader_config_parse(&lc, b->cfg, "Eval");
            if (st == OCR_OK) {
                int slots = lc.prefetch + 1 < 2 ? 2 : lc.prefetch + 1, eb = ocr_sampler_max_batch(&lc.sampler);
                int eh = 0, ew = 0;
                for (int i = 0; i < lc.sampler.num_scales; i++) {
                    if (lc.sampler.scales[i].height > eh) eh = lc.sampler.scales[i].height;
                    if (lc.sampler.scales[i].width > ew) ew = lc.sampler.scales[i].width;
                }
                b->eval_ring_bytes = slots * ring_slot_bytes(eb, eh, ew, lc.transforms.channels, lc.max_text_length);
                ocr_loader_config_free(&lc);
            }
        }
        if (st == OCR_OK) st = ocr_model_from_config(&b->m, b->cfg);
    }
    AmpConfig ac;
    // The precision overrides can make config notes ("scale_loss is ignored with bfloat16")
    // that say nothing about the user's config: keep them quiet here.
    ocr_log_level_t level = ocr_log_get_level();
    if (level < OCR_LOG_WARN) ocr_log_set_level(OCR_LOG_WARN);
    if (st == OCR_OK) st = amp_config_from_config(&ac, b->cfg);
    ocr_log_set_level(level);
    if (st == OCR_OK) {
        amp_engine_init(&b->amp, &ac);
        b->amp_ok = 1;
        st = ocr_amp_attach(&b->amp, ocr_model_ops(b->m), ocr_model_params(b->m), ocr_model_stats(b->m));
        if (st == OCR_OK && b->amp.cfg.policy.level == OCR_AMP_O1) st = ocr_model_set_cast_cache(b->m, &b->amp.cache);
    }
    if (st == OCR_OK) st = optim_init(&b->optim, &rc.optim, ocr_model_params(b->m));
    b->optim_ok = st == OCR_OK;
    if (st == OCR_OK) {
        // A distillation config's frozen and peer networks, in this precision (a frozen teacher
        // runs in the AMP dtype), as training builds them; their notes were said by the run's load.
        level = ocr_log_get_level();
        if (level < OCR_LOG_ERROR) ocr_log_set_level(OCR_LOG_ERROR);
        // Mutual learning is refused with overflow recompute (a recomputed step would update the
        // peer twice), which changes nothing in memory: the probes skip overflowed steps.
        if (ocr_config_has(b->cfg, "Distillation")) st = ocr_config_set(b->cfg, "Global.amp_overflow", "\"skip\"");
        if (st == OCR_OK) st = distill_run_create(&b->distill, b->cfg, &rc, b->m, ocr_cpu(), NULL);
        ocr_log_set_level(level);
    }
    if (st != OCR_OK) built_free(b);
    return st;
}

// One (or two) real training steps at `batch` with random data; *ws = peak workspace bytes of
// the last step, *peak = its whole statistics.
static ocr_status_t probe(Built *b, int batch, int steps, OcrMemStats *peak) {
    int B = batch, H = b->H, W = b->W, C = b->C;
    // The buffers a training run holds besides the model's: the loaders' batch rings (DATA). The
    // step reads its uint8 batch in place from the Train ring (here: the start of the buffer)
    // and normalises it into the activation arena.
    uint8_t *u8 = ocr_mem_alloc(ocr_cpu(), OCR_MEM_DATA, (size_t)(B * b->ring_per_sample + b->eval_ring_bytes));
    if (!u8) return ocr_set_error(OCR_ERR_OOM, "out of memory");
    for (size_t i = 0; i < (size_t)B * H * W * C; i++) u8[i] = (uint8_t)(ocr_rng_uniform(7, 1, i) * 256.0f);
    int32_t *labels = calloc((size_t)B * b->max_len, sizeof *labels), *lengths = calloc((size_t)B, sizeof *lengths);
    int32_t *widths = malloc((size_t)B * sizeof *widths);
    // Probe images fill the whole width (every SAR valid ratio is 1).
    for (int i = 0; widths && i < B; i++) widths[i] = W;
    const OcrArch *arch = ocr_model_arch(b->m);
    // Every probe text is max_text_length characters long, the longest a run's batch can hold:
    // the CTC loss's per-thread scratch grows with the batch's longest label and a MultiHead
    // guidance branch plans its arena for the longest text, so shorter probe texts would measure
    // less than a real batch of long lines needs.
    const int L = b->max_len;
    for (int i = 0; labels && lengths && i < B; i++) {
        lengths[i] = L;
        for (int k = 0; k < L; k++) labels[i * b->max_len + k] = 1 + (i + 3 * k) % (arch->num_classes - 1);
    }
    FeedBatch fb = {.capacity = B, .count = B, .height = H, .width = W, .channels = C, .max_len = b->max_len,
                    .pixels = u8, .labels = labels, .lengths = lengths, .widths = widths};
    FeedDeviceBatch db;
    feed_batch_view(&fb, &db);
    StepCtx sc;
    memset(&sc, 0, sizeof sc);
    ocr_status_t st = OCR_OK;
    if (!labels || !lengths || !widths) st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
    // Random data overflows fp16 at a large loss scale; those skipped steps are expected here.
    ocr_log_level_t level = ocr_log_get_level();
    if (level < OCR_LOG_ERROR) ocr_log_set_level(OCR_LOG_ERROR);
    if (st == OCR_OK) st = step_ctx_init(&sc, b->m, &b->amp, &b->optim, B, 0);
    if (st == OCR_OK && b->distill) distill_attach(b->distill, &sc);
    for (int s = 0; st == OCR_OK && s < steps; s++) {
        // Measured from the first step, as the trainer measures: op scratch (core/memory.c's
        // per-thread workspace) grows during the first step in separate blocks, which are
        // merged into one only between ops, so the first step holds the most scratch.
        if (s == 0) ocr_mem_reset_peak(ocr_cpu());
        StepOutcome o;
        st = step_run(&sc, &db, 1e-4, &o);
    }
    ocr_log_set_level(level);
    if (st == OCR_OK) *peak = ocr_mem_stats(ocr_cpu());
    step_ctx_free(&sc);
    free(labels);
    free(lengths);
    free(widths);
    ocr_mem_free(u8);
    return st;
}

ocr_status_t capacity_measure(const OcrConfig *cfg, const char *precision, int batch, OcrMemStats *measured) {
    ocr_workspace_release();
    Built b;
    OCR_TRY(build(&b, cfg, precision));
    ocr_status_t st = probe(&b, batch, 2, measured);
    built_free(&b);
    ocr_workspace_release();
    return st;
}

ocr_status_t capacity_plan(const OcrConfig *cfg, const char *precision, int64_t budget_bytes, CapacityPrecision *out) {
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", precision);
    Built b;
    OCR_TRY(build(&b, cfg, precision));
    OcrMemPlan p1, p2;
    // The step's uint8 batch: its normalised copy is an activation (ocr_model_forward_u8).
    ocr_status_t st = ocr_model_plan_u8(b.m, 1, b.H, b.W, 1, &p1);
    if (st == OCR_OK) st = ocr_model_plan_u8(b.m, 2, b.H, b.W, 1, &p2);
    if (st != OCR_OK) {
        built_free(&b);
        return st;
    }
    out->channels = b.C;
    out->height = b.H;
    out->width = b.W;
    if (b.distill) {
        DistillPlan d1, d2;
        st = distill_run_plan(b.distill, 1, b.H, b.W, &d1);
        if (st == OCR_OK) st = distill_run_plan(b.distill, 2, b.H, b.W, &d2);
        if (st != OCR_OK) {
            built_free(&b);
            return st;
        }
        out->teacher_networks = d1.frozen;
        out->teacher_weights_bytes = d1.weights_bytes;
        out->teacher_activations_per_sample = d2.activations_bytes - d1.activations_bytes;
        out->teacher_activations_fixed = d1.activations_bytes - out->teacher_activations_per_sample;
        out->peer_networks = d1.peers;
        out->peer_per_sample = d2.peer_activations_bytes - d1.peer_activations_bytes;
        out->peer_fixed_bytes = d1.peer_fixed_bytes + d1.peer_activations_bytes - out->peer_per_sample;
    }
    int64_t *F = out->fixed_by_category, *S = out->per_sample_by_category;
    const OcrParamTable *params = ocr_model_params(b.m), *stats = ocr_model_stats(b.m);
    AmpMemory am = amp_engine_memory(&b.amp);
    F[OCR_MEM_PARAMS] = (int64_t)params->bytes + (int64_t)stats->bytes + am.cast_cache_bytes;
    F[OCR_MEM_GRADS] = (int64_t)params->bytes;
    F[OCR_MEM_MASTER] = am.master_bytes;
    F[OCR_MEM_OPTIMIZER] = optim_bytes_for(params);
    int64_t act_slope = p2.activations_bytes - p1.activations_bytes;
    S[OCR_MEM_ACTIVATIONS] = act_slope;
    F[OCR_MEM_ACTIVATIONS] = p1.activations_bytes - act_slope;
    S[OCR_MEM_DATA] = b.ring_per_sample;
    F[OCR_MEM_DATA] = b.eval_ring_bytes;
    // Low-precision logits: the loss gets an f32 copy (scratch) and writes an f32 gradient.
    const OcrOpTable *ops = ocr_model_ops(b.m);
    if (ops->count > 0 && ops->items[ops->count - 1].compute_dtype != OCR_F32) {
        int64_t tc = (int64_t)p1.seq_len * p1.classes * (int64_t)sizeof(float);
        S[OCR_MEM_ACTIVATIONS] += tc;
        S[OCR_MEM_WORKSPACE] += tc;
    }
    // Op scratch: measured at the probe batches, the line above them all (see capacity.h).
    // Scratch blocks are at least 1 MiB (core/memory.c), so small batches all measure the same
    // block: the probes are taken where scratch grows with the batch.
    built_free(&b);
    static const int probes[CAPACITY_PROBE_COUNT] = CAPACITY_PROBES;
    int64_t ws[CAPACITY_PROBE_COUNT] = {0};
    for (int k = 0; k < CAPACITY_PROBE_COUNT && st == OCR_OK; k++) {
        ocr_workspace_release();
        Built pb;
        OcrMemStats m;
        st = build(&pb, cfg, precision);
        if (st == OCR_OK) st = probe(&pb, probes[k], 2, &m);
        if (st == OCR_OK) ws[k] = m.peak[OCR_MEM_WORKSPACE];
        if (pb.m) built_free(&pb);
    }
    ocr_workspace_release();
    if (st != OCR_OK) return st;
    int64_t ws_slope = S[OCR_MEM_WORKSPACE];  // at least the loss's f32 logits copy
    for (int k = 1; k < CAPACITY_PROBE_COUNT; k++) {
        int64_t slope = (ws[k] - ws[k - 1]) / (probes[k] - probes[k - 1]);
        if (slope > ws_slope) ws_slope = slope;
    }
    int64_t ws_fixed = 0;
    for (int k = 0; k < CAPACITY_PROBE_COUNT; k++)
        if (ws[k] - probes[k] * ws_slope > ws_fixed) ws_fixed = ws[k] - probes[k] * ws_slope;
    S[OCR_MEM_WORKSPACE] = ws_slope;
    F[OCR_MEM_WORKSPACE] = ws_fixed;
    for (int c = 0; c < OCR_MEM_CATEGORY_COUNT; c++) {
        out->fixed_bytes += F[c];
        out->bytes_per_sample += S[c];
    }
    out->fixed_bytes += out->teacher_weights_bytes + out->teacher_activations_fixed + out->peer_fixed_bytes;
    out->bytes_per_sample += out->teacher_activations_per_sample + out->peer_per_sample;
    if (budget_bytes > 0 && out->bytes_per_sample > 0 && budget_bytes > out->fixed_bytes)
        out->max_batch = (budget_bytes - out->fixed_bytes) / out->bytes_per_sample;
    return OCR_OK;
}

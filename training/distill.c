#include "training/distill.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/timer.h"
#include "kernels/ops.h"
#include "amp/engine.h"
#include "distributed/grad_sync.h"
#include "kernels/ctc.h"
#include "models/amp_view.h"
#include "training/checkpoint.h"
#include "training/optim.h"

// Global.distill_teacher_cache for one frozen network.
typedef struct {
    float **rows;  // by dataset index: T·C f32 logits (NULL: not cached)
    int64_t cap;
    int H, W, T, C;   // the batch shape the rows were computed at, and their shape
    OcrTensor batch;  // f32 on the device: a batch assembled from the cache (grows)
    OcrTensor view;   // (B, T, C) view of it for this step
    int use;          // this step reads `view` instead of the model's logits
    float *host;      // (B, T, C) staging
    int64_t host_cap;
} TeacherCache;

// A second trained network (mutual learning, PP-OCRv3): its own AMP engine, optimizer and loss
// buffers; its step runs inside the trained network's (the step's extra loss), on the CPU. Under
// data parallelism its gradients have buckets of their own (distill_run_join_world).
typedef struct {
    AmpEngine amp;
    int amp_ok;
    Optimizer optim;
    int optim_ok;
    GradSync sync;
    int sync_ok;
    float *clip;                   // per-parameter clip factors (Optimizer.clip_norm)
    OcrTensor *grad_views, **grads;  // the gradients as the clip reads them
    OcrTensor logits_buf, dl32_buf, losses, infeas, gloss;
    OcrTensor dl32;  // a view of dl32_buf shaped as the logits
    const OcrTensor *logits;  // this step's f32 CTC logits
    float scale;              // this step's loss scale
    float grad_scale;         // what its loss gradients are multiplied by: scale / the world size
    double lr;
} Peer;

struct DistillRun {
    DistillConfig dc;
    OcrModel *nets[DISTILL_MAX_NETS];  // the other networks (NULL: the trained one, or unused)
    Peer *peers[DISTILL_MAX_NETS];     // of them, those trained too (mutual learning); NULL: frozen
    OcrTensor bb_buf[DISTILL_MAX_NETS], bb[DISTILL_MAX_NETS];  // f32 gradients of backbone outputs (buffers, views)
    int bb_used[DISTILL_MAX_NETS];
    int guide_pass[DISTILL_MAX_NETS];  // a term reads its guidance head: training-mode forward
    int used[DISTILL_MAX_NETS];        // some active term reads it
    OcrModel *trained;
    ocr_device_t device;
    int active[DISTILL_MAX_TERMS];
    double value[DISTILL_MAX_TERMS];
    OcrTensor g32, loss;  // scratch: an f32 gradient (grows) and the loss values (capacity B)
    int64_t forwards;
    double seconds;
    int64_t peak_arena;
    // Global.distill_teacher_cache: per frozen network (inference passes only), each sample's CTC
    // logits (T·C f32, host) by dataset index, from the shape (H, W) they were computed at.
    int cache_on;
    TeacherCache cache[DISTILL_MAX_NETS];
    int64_t cache_hits, cache_misses, cache_bytes;
    double cache_saved_seconds;
    int hold_peers;  // tests: no backward and update of the peers
    int world;       // data-parallel ranks the peers' gradients are averaged over (1: none)
    // Under AMP O1/O2 the frozen networks' forwards run in the AMP dtype (their own engines, no
    // masters), unless Global.distill_teacher_fp32.
    AmpEngine famp[DISTILL_MAX_NETS];
    int famp_ok[DISTILL_MAX_NETS];
    // The distillation ops read f32 (op type distill_loss, black-listed): a low-precision output
    // is widened into these first (exact). seen: the dtypes each term's op read on its last step.
    OcrTensor w32[2];
    ocr_dtype_t seen[DISTILL_MAX_TERMS][2];
    int64_t widened;  // outputs widened so far
};

const DistillConfig *distill_run_config(const DistillRun *r) { return &r->dc; }

int distill_weights_prefix(const OcrConfig *cfg, char *buf, size_t cap) {
    if (!ocr_config_has(cfg, "Distillation")) return 0;
    const char *key = NULL;
    if (ocr_config_get_string(cfg, "Distillation.Metric.key", "Student", &key) != OCR_OK || !key) key = "Student";
    snprintf(buf, cap, "%s.", key);
    return 1;
}
OcrModel *distill_run_net(DistillRun *r, int i) { return i >= 0 && i < r->dc.nnets ? r->nets[i] : NULL; }
double distill_run_term_value(const DistillRun *r, int t) { return t >= 0 && t < r->dc.nterms ? r->value[t] : NAN; }
int distill_run_term_active(const DistillRun *r, int t) { return t >= 0 && t < r->dc.nterms && r->active[t]; }

void distill_run_cost(const DistillRun *r, DistillCost *c) {
    memset(c, 0, sizeof *c);
    c->frozen_dtype = OCR_F32;
    c->forwards = r->forwards;
    c->seconds = r->seconds;
    c->activations_bytes = r->peak_arena;
    c->cache_hits = r->cache_hits;
    c->cache_misses = r->cache_misses;
    c->cache_bytes = r->cache_bytes;
    c->cache_saved_seconds = r->cache_saved_seconds;
    for (int i = 0; i < r->dc.nnets; i++) {
        if (!r->nets[i]) continue;
        const int64_t b = (int64_t)ocr_model_params(r->nets[i])->bytes + (int64_t)ocr_model_stats(r->nets[i])->bytes;
        if (r->peers[i]) c->peers++, c->peer_params_bytes += b;
        else c->params_bytes += b;
        if (r->famp_ok[i]) {
            c->frozen_dtype = r->famp[i].cfg.policy.dtype;
            c->cast_cache_bytes += amp_engine_memory(&r->famp[i]).cast_cache_bytes;
        }
    }
}

void distill_run_free(DistillRun *r) {
    if (!r) return;
    if (r->trained) ocr_model_set_weights_companions(r->trained, NULL, 0);
    for (int i = 0; i < DISTILL_MAX_NETS; i++) {
        Peer *p = r->peers[i];
        if (p) {
            if (p->sync_ok) grad_sync_free(&p->sync);
            free(p->clip);
            free(p->grad_views);
            free(p->grads);
            if (p->optim_ok) optim_free(&p->optim);
            if (p->amp_ok) amp_engine_free(&p->amp);
            ocr_tensor_free(&p->logits_buf);
            ocr_tensor_free(&p->dl32_buf);
            ocr_tensor_free(&p->losses);
            ocr_tensor_free(&p->infeas);
            ocr_tensor_free(&p->gloss);
            free(p);
        }
        if (r->famp_ok[i]) amp_engine_free(&r->famp[i]);
        ocr_tensor_free(&r->bb_buf[i]);
        for (int64_t k = 0; k < r->cache[i].cap; k++) free(r->cache[i].rows[k]);
        free(r->cache[i].rows);
        free(r->cache[i].host);
        ocr_tensor_free(&r->cache[i].batch);
    }
    for (int i = 0; i < DISTILL_MAX_NETS; i++)
        if (r->nets[i]) ocr_model_free(r->nets[i]);
    ocr_tensor_free(&r->g32);
    ocr_tensor_free(&r->loss);
    ocr_tensor_free(&r->w32[0]);
    ocr_tensor_free(&r->w32[1]);
    free(r);
}

// Which terms run and which networks they need. A term runs when one of its networks trains; a
// frozen network's own labels give a constant (skipped), a trained one's are the step's (the
// Metric.key network) or its peer step's.
static int trains(const DistillRun *r, int k) { return k >= 0 && (k == r->dc.trained || !r->dc.nets[k].frozen); }

static ocr_status_t plan_terms(DistillRun *r, const OcrConfig *cfg) {
    DistillConfig *dc = &r->dc;
    OCR_TRY(distill_config_check_training(dc, cfg));
    int skipped = 0;
    for (int i = 0; i < dc->nnets; i++)
        if (i != dc->trained && !dc->nets[i].frozen) r->used[i] = 1;
    for (int t = 0; t < dc->nterms; t++) {
        const DistillTerm *x = &dc->terms[t];
        r->value[t] = NAN;
        if (x->kind >= DISTILL_GT_CTC) {
            if (!trains(r, x->a)) skipped++;
            else if (x->a != dc->trained) r->active[t] = 1;  // a peer's own loss
            continue;
        }
        if (!trains(r, x->a) && !trains(r, x->b)) {
            skipped++;
            continue;
        }
        r->active[t] = 1;
        const int ends[2] = {x->a, x->b};
        for (int e = 0; e < 2; e++) {
            const int k = ends[e];
            if (k < 0 || k >= DISTILL_MAX_NETS) continue;
            if (k != dc->trained) r->used[k] = 1;
            if (x->out == DISTILL_OUT_GUIDE && !trains(r, k)) r->guide_pass[k] = 1;
            if (x->out == DISTILL_OUT_BACKBONE && trains(r, k)) {
                const OcrArch *a = &dc->nets[k].arch;
                if (a->neck_svtr && a->neck.use_guide && a->multihead.kind == OCR_GUIDE_NONE)
                    return ocr_set_error(OCR_ERR_UNSUPPORTED, "%s: %s.key backbone_out: %s's backbone gets no "
                                         "gradient (its neck's use_guide without a MultiHead)",
                                         ocr_config_source(cfg), x->path, dc->nets[k].name);
                r->bb_used[k] = 1;
            }
            // A frozen network's backbone output exists in training passes (the map is kept).
            if (x->out == DISTILL_OUT_BACKBONE && !trains(r, k)) r->guide_pass[k] = 1;
        }
    }
    if (skipped)
        ocr_log(OCR_LOG_INFO, "distillation: %d loss term(s) between frozen networks or of a frozen network's own "
                "labels are constants and do not run", skipped);
    return OCR_OK;
}

// A second trained network's engine and optimizer (as the trainer's for its model).
static ocr_status_t peer_init(DistillRun *r, int i, const OcrConfig *cfg, const RunConfig *rc) {
    Peer *p = calloc(1, sizeof *p);
    if (!p) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    r->peers[i] = p;
    OcrModel *m = r->nets[i];
    AmpConfig ac;
    OCR_TRY(amp_config_from_config(&ac, cfg));
    if (ac.policy.level != OCR_AMP_O0 && ac.scaler.enabled && ac.scaler.dynamic && ac.overflow_recompute) {
        // A recomputed step runs the extra loss again: the peer would update twice.
        amp_config_free(&ac);
        return ocr_set_error(OCR_ERR_UNSUPPORTED,
                             "%s: Architecture.Models.%s.freeze_params is false (mutual learning) under AMP with "
                             "Global.amp_overflow recompute (the default): set Global.amp_overflow: skip",
                             ocr_config_source(cfg), r->dc.nets[i].name);
    }
    if (rc->optim.clip_norm_global > 0) {
        // One optimizer over the DistillationModel in PaddleOCR: one global norm over both
        // networks' gradients, which a peer updated before the trained network's backward
        // cannot know.
        amp_config_free(&ac);
        return ocr_set_error(OCR_ERR_UNSUPPORTED,
                             "%s: Optimizer.clip_norm_global with Architecture.Models.%s.freeze_params false (mutual "
                             "learning): PaddleOCR clips both networks by one global norm, and ocrtrain updates %s "
                             "before the other network's backward; use Optimizer.clip_norm (per tensor, as "
                             "PaddleOCR's ClipGradByNorm) or no clipping",
                             ocr_config_source(cfg), r->dc.nets[i].name, r->dc.nets[i].name);
    }
    amp_engine_init(&p->amp, &ac);
    p->amp_ok = 1;
    OCR_TRY(ocr_amp_attach(&p->amp, ocr_model_ops(m), ocr_model_params(m), ocr_model_stats(m)));
    const int np = ocr_model_params(m)->count;
    p->clip = malloc((size_t)(np ? np : 1) * sizeof *p->clip);
    p->grad_views = calloc((size_t)(np ? np : 1), sizeof *p->grad_views);
    p->grads = calloc((size_t)(np ? np : 1), sizeof *p->grads);
    if (!p->clip || !p->grad_views || !p->grads) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    if (p->amp.cfg.policy.level == OCR_AMP_O1) OCR_TRY(ocr_model_set_cast_cache(m, &p->amp.cache));
    OCR_TRY(optim_init(&p->optim, &rc->optim, ocr_model_params(m)));
    p->optim_ok = 1;
    return OCR_OK;
}

// A resumed peer's optimizer moments, O2 masters, AMP state and dropout counter (its weights were
// read with the checkpoint's); a checkpoint without them (written before they were kept) restarts
// them, with a warning.
static ocr_status_t peer_resume(DistillRun *r, int i, const char *resume_dir) {
    Peer *p = r->peers[i];
    const char *name = r->dc.nets[i].name;
    if (!ckpt_has_companion(resume_dir, name)) {
        ocr_log(OCR_LOG_WARN, "distillation: %s has no training state for %s (a checkpoint written before they were "
                "kept): its optimizer moments and loss scale start afresh", resume_dir, name);
        return OCR_OK;
    }
    CkptCompanion c = {name, &p->optim, &p->amp, ocr_model_params(r->nets[i]), 0};
    ocr_status_t st = ckpt_load_companion(resume_dir, &c);
    if (st != OCR_OK) return ocr_wrap_error(st, "Global.checkpoints (%s)", name);
    ocr_model_set_step(r->nets[i], c.model_step);
    return OCR_OK;
}

// A frozen network under AMP O1/O2: the run's policy gives its ops their compute dtypes (what is
// black-listed or in Global.amp_fp32_layers stays f32), at O1 its conv/linear weights are read
// from a cast cache (made at its first pass; nothing changes them after), at O2 they are stored
// in the AMP dtype and their f32 masters are dropped (no optimizer updates them). Called after
// the weights are loaded and the model moved, before its first pass.
static ocr_status_t frozen_amp(DistillRun *r, int i, const OcrConfig *cfg) {
    int fp32;
    OCR_TRY(ocr_config_get_bool(cfg, "Global.distill_teacher_fp32", 0, &fp32));
    AmpConfig ac;
    OCR_TRY(amp_config_from_config(&ac, cfg));
    if (fp32 || ac.policy.level == OCR_AMP_O0) {
        amp_config_free(&ac);
        return OCR_OK;
    }
    amp_engine_init(&r->famp[i], &ac);
    r->famp_ok[i] = 1;
    OcrModel *m = r->nets[i];
    OCR_TRY(ocr_amp_attach(&r->famp[i], ocr_model_ops(m), ocr_model_params(m), ocr_model_stats(m)));
    if (r->famp[i].cfg.policy.level == OCR_AMP_O1) return ocr_model_set_cast_cache(m, &r->famp[i].cache);
    amp_master_free(&r->famp[i].master);
    return OCR_OK;
}

ocr_status_t distill_run_create(DistillRun **out, const OcrConfig *cfg, const RunConfig *rc, OcrModel *trained,
                                ocr_device_t device, const char *resume_dir) {
    *out = NULL;
    if (!ocr_config_has(cfg, "Distillation")) return OCR_OK;
    DistillRun *r = calloc(1, sizeof *r);
    if (!r) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    r->trained = trained;
    r->device = device;
    r->world = 1;
    ocr_status_t st = distill_config_read(&r->dc, cfg);
    if (st == OCR_OK) st = plan_terms(r, cfg);
    if (st == OCR_OK) st = ocr_config_get_bool(cfg, "Global.distill_teacher_cache", 0, &r->cache_on);
    for (int i = 0; st == OCR_OK && i < r->dc.nnets; i++) {
        DistillNet *n = &r->dc.nets[i];
        if (i == r->dc.trained || !r->used[i]) continue;
        // Initial values are a function of Global.seed and each tensor's name, and the networks
        // share names: every other network draws from its own seed (PaddleOCR's are independent
        // draws too), the trained one from Global.seed as in a plain run.
        n->arch.seed = n->arch.seed + 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
        st = ocr_model_create(&r->nets[i], &n->arch);
        if (st != OCR_OK) break;
        char prefix[40];
        snprintf(prefix, sizeof prefix, "%s.", n->name);
        ocr_model_set_weights_prefix(r->nets[i], prefix);
        if (!n->frozen && resume_dir && resume_dir[0]) {
            // Resuming: a trained peer continues from the checkpoint's <name>.* tensors.
            char w[2300];
            snprintf(w, sizeof w, "%s/model.safetensors", resume_dir);
            st = ocr_model_load_weights(r->nets[i], w);
            if (st != OCR_OK) {
                st = ocr_wrap_error(st, "Global.checkpoints (%s)", n->name);
                break;
            }
        } else if (n->pretrained[0]) {
            OcrLoadReport rep;
            st = ckpt_load_pretrained(r->nets[i], n->pretrained, 1, &rep);
            if (st != OCR_OK) {
                st = ocr_wrap_error(st, "Architecture.Models.%s.pretrained", n->name);
                break;
            }
            ocr_log(OCR_LOG_INFO, "distillation: %s from %s (%d tensors)", n->name, n->pretrained, rep.loaded);
        } else {
            if (n->frozen)
                ocr_log(OCR_LOG_WARN, "distillation: Architecture.Models.%s.pretrained is empty: the frozen %s keeps "
                        "its initial weights (as PaddleOCR would)", n->name, n->name);
        }
        if (!n->frozen) {
            if (device.type != OCR_DEVICE_CPU) {
                st = ocr_set_error(OCR_ERR_UNSUPPORTED,
                                   "%s: Architecture.Models.%s.freeze_params is false: training two networks at once "
                                   "(mutual learning) runs on the CPU only for now (Global.device cpu)",
                                   ocr_config_source(cfg), n->name);
                break;
            }
            st = peer_init(r, i, cfg, rc);
            if (st == OCR_OK && resume_dir && resume_dir[0]) st = peer_resume(r, i, resume_dir);
            if (st != OCR_OK) break;
            continue;
        }
        // Frozen: running BN statistics in every pass, never updated.
        ocr_model_freeze_norm(r->nets[i], NULL, 1);
        st = ocr_model_to_device(r->nets[i], device);
        if (st == OCR_OK) st = frozen_amp(r, i, cfg);
    }
    if (st != OCR_OK) {
        distill_run_free(r);
        return st;
    }
    // Checkpoints hold the frozen networks beside the trained one, each under its name.
    const OcrModel *comp[DISTILL_MAX_NETS];
    int nc = 0;
    for (int i = 0; i < r->dc.nnets; i++)
        if (r->nets[i]) comp[nc++] = r->nets[i];
    ocr_model_set_weights_companions(trained, comp, nc);
    *out = r;
    return OCR_OK;
}

// ---- the step's extra loss ------------------------------------------------------------------------------

static ocr_status_t ensure(OcrTensor *t, ocr_device_t dev, int64_t n) {
    if (t->data && ocr_tensor_numel(t) >= n && ocr_device_equal(t->device, dev)) return OCR_OK;
    ocr_tensor_free(t);
    return ocr_tensor_alloc(t, OCR_F32, dev, 1, (int64_t[]){n > 0 ? n : 1}, OCR_MEM_ACTIVATIONS);
}

// A view of the f32 scratch shaped like x.
static OcrTensor g32_like(DistillRun *r, const OcrTensor *x) {
    return ocr_tensor_view(r->g32.data, OCR_F32, x->device, x->ndim, x->shape);
}

// (rows, C) view of a (B, T, C) tensor.
static OcrTensor rows_view(const OcrTensor *x) {
    int64_t sh[2] = {ocr_tensor_numel(x) / x->shape[x->ndim - 1], x->shape[x->ndim - 1]};
    return ocr_tensor_view(x->data, x->dtype, x->device, 2, sh);
}

static ocr_status_t same_shape(const DistillTerm *x, const OcrTensor *a, const OcrTensor *b, const char *na,
                               const char *nb) {
    if (ocr_tensor_same_shape(a, b)) return OCR_OK;
    return ocr_set_error(OCR_ERR_INVALID_ARG,
                         "%s: %s's output is (%lld, %lld, %lld) and %s's (%lld, %lld, %lld): the term needs equal "
                         "shapes (the same sequence length and classes)",
                         x->path, na, (long long)a->shape[0], (long long)a->shape[1],
                         (long long)(a->ndim > 2 ? a->shape[2] : 1), nb, (long long)b->shape[0], (long long)b->shape[1],
                         (long long)(b->ndim > 2 ? b->shape[2] : 1));
}

// The cache (Global.distill_teacher_cache) serves network i's batch when every sample of it is
// there at the batch's shape: its logits assembled into cache[i].batch on the device.
static ocr_status_t cache_serve(DistillRun *r, int i, const FeedDeviceBatch *b, int *served) {
    *served = 0;
    TeacherCache *c = &r->cache[i];
    const int H = (int)b->images.shape[1], W = (int)b->images.shape[2];
    if (!c->rows || c->H != H || c->W != W || !b->host_index) return OCR_OK;
    for (int k = 0; k < b->count; k++) {
        int64_t ix = b->host_index[k];
        if (ix < 0 || ix >= c->cap || !c->rows[ix]) return OCR_OK;
    }
    const int64_t row = (int64_t)c->T * c->C, n = row * b->count;
    if (c->host_cap < n) {
        free(c->host);
        c->host = malloc((size_t)n * sizeof(float));
        if (!c->host) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
        c->host_cap = n;
    }
    for (int k = 0; k < b->count; k++) memcpy(c->host + k * row, c->rows[b->host_index[k]], (size_t)row * sizeof(float));
    OCR_TRY(ensure(&c->batch, b->images.device, n));
    ocr_copy_bytes(c->batch.device, c->batch.data, ocr_cpu(), c->host, (size_t)n * sizeof(float));
    c->view = ocr_tensor_view(c->batch.data, OCR_F32, c->batch.device, 3, (int64_t[]){b->count, c->T, c->C});
    *served = 1;
    return OCR_OK;
}

// Network i's logits of batch b into the cache.
static ocr_status_t cache_store(DistillRun *r, int i, const FeedDeviceBatch *b, const OcrTensor *logits) {
    TeacherCache *c = &r->cache[i];
    if (!b->host_index) return OCR_OK;
    const int H = (int)b->images.shape[1], W = (int)b->images.shape[2];
    const int T = (int)logits->shape[1], C = (int)logits->shape[2];
    if (c->rows && (c->H != H || c->W != W || c->T != T || c->C != C)) {
        // Another shape (MultiScaleDataSet): the cache follows the latest one.
        for (int64_t k = 0; k < c->cap; k++) {
            if (c->rows[k]) r->cache_bytes -= (int64_t)c->T * c->C * (int64_t)sizeof(float);
            free(c->rows[k]);
            c->rows[k] = NULL;
        }
    }
    c->H = H, c->W = W, c->T = T, c->C = C;
    const int64_t row = (int64_t)T * C;
    float *all = malloc((size_t)(row * b->count) * sizeof(float));
    if (!all) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    if (logits->dtype == OCR_F32) {
        ocr_copy_bytes(ocr_cpu(), all, logits->device, logits->data, (size_t)(row * b->count) * sizeof(float));
    } else {
        OCR_TRY(ensure(&r->g32, logits->device, row * b->count));
        OcrTensor f = ocr_tensor_view(r->g32.data, OCR_F32, logits->device, logits->ndim, logits->shape);
        ocr_cast_forward(&f, logits);
        ocr_copy_bytes(ocr_cpu(), all, f.device, f.data, (size_t)(row * b->count) * sizeof(float));
    }
    for (int k = 0; k < b->count; k++) {
        int64_t ix = b->host_index[k];
        if (ix < 0) continue;
        if (ix >= c->cap) {
            int64_t cap = c->cap ? c->cap : 64;
            while (cap <= ix) cap *= 2;
            float **nr = realloc(c->rows, (size_t)cap * sizeof *nr);
            if (!nr) {
                free(all);
                return ocr_set_error(OCR_ERR_OOM, "out of host memory");
            }
            memset(nr + c->cap, 0, (size_t)(cap - c->cap) * sizeof *nr);
            c->rows = nr;
            c->cap = cap;
        }
        if (!c->rows[ix]) {
            c->rows[ix] = malloc((size_t)row * sizeof(float));
            if (!c->rows[ix]) {
                free(all);
                return ocr_set_error(OCR_ERR_OOM, "out of host memory");
            }
            r->cache_bytes += row * (int64_t)sizeof(float);
        }
        memcpy(c->rows[ix], all + k * row, (size_t)row * sizeof(float));
    }
    free(all);
    return OCR_OK;
}

static ocr_status_t run_frozen(DistillRun *r, const FeedDeviceBatch *b) {
    for (int i = 0; i < r->dc.nnets; i++) {
        OcrModel *m = r->nets[i];
        if (!m || r->peers[i]) continue;
        r->cache[i].use = 0;
        if (r->cache_on && !r->guide_pass[i]) {
            int served;
            OCR_TRY(cache_serve(r, i, b, &served));
            if (served) {
                r->cache[i].use = 1;
                r->cache_hits += b->count;
                // The forward it saves: this network's mean time per sample so far.
                if (r->forwards) r->cache_saved_seconds += r->seconds / (double)r->cache_misses * b->count;
                continue;
            }
        }
        const double t0 = ocr_now_seconds();
        if (r->guide_pass[i]) {
            OCR_TRY(ocr_model_set_guide_batch(m, b->host_labels, b->host_lengths, b->host_widths, b->count, b->max_len,
                                              (int)b->images.shape[2]));
            OCR_TRY(ocr_model_forward_u8(m, &b->images, &b->widths, 1));
        } else {
            OCR_TRY(ocr_model_forward_u8(m, &b->images, &b->widths, 0));
        }
        int64_t peak, live;
        ocr_model_arena_usage(m, &peak, &live);
        if (peak > r->peak_arena) r->peak_arena = peak;
        r->forwards++;
        r->seconds += ocr_now_seconds() - t0;
        if (r->cache_on && !r->guide_pass[i]) {
            r->cache_misses += b->count;
            OCR_TRY(cache_store(r, i, b, ocr_model_logits(m)));
        }
    }
    return OCR_OK;
}

static double read_loss(DistillRun *r, int n) {
    float v[64];
    double sum = 0;
    for (int k = 0; k < n; k += 64) {
        int c = n - k < 64 ? n - k : 64;
        ocr_copy_bytes(ocr_cpu(), v, r->loss.device, (const char *)r->loss.data + (size_t)k * 4, (size_t)c * 4);
        for (int j = 0; j < c; j++) sum += v[j];
    }
    return sum;
}

// One network's outputs this step and where its gradients go (NULL: frozen).
typedef struct {
    const OcrTensor *ctc, *guide, *bb, *targets;
    OcrTensor *ctc_dst, *guide_dst, *bb_dst;
    float scale;   // its loss scale (× 1/world for the trained network)
    int via_step;  // the trained network: guidance and backbone gradients through step_add_grad
} Side;

static Side side_of(DistillRun *r, StepCtx *s, int k, const OcrTensor *logits, OcrTensor *dl32, float grad_scale) {
    Side d;
    memset(&d, 0, sizeof d);
    if (k == r->dc.trained) {
        d.ctc = logits;
        d.guide = ocr_model_guide_logits(s->m);
        d.targets = ocr_model_guide_targets(s->m);
        d.bb = ocr_model_backbone_out(s->m);
        d.ctc_dst = dl32;
        d.guide_dst = ocr_model_guide_dlogits(s->m);
        d.bb_dst = r->bb_used[k] ? &r->bb[k] : NULL;
        d.scale = grad_scale;
        d.via_step = 1;
        return d;
    }
    OcrModel *m = r->nets[k];
    Peer *p = r->peers[k];
    d.ctc = p ? p->logits : r->cache[k].use ? &r->cache[k].view : ocr_model_logits(m);
    d.guide = ocr_model_guide_logits(m);
    d.targets = ocr_model_guide_targets(m);
    d.bb = ocr_model_backbone_out(m);
    if (p) {
        d.ctc_dst = &p->dl32;
        d.guide_dst = ocr_model_guide_dlogits(m);
        d.bb_dst = r->bb_used[k] ? &r->bb[k] : NULL;
        d.scale = p->grad_scale;
    }
    return d;
}

static ocr_status_t add_grad(StepCtx *s, const Side *d, distill_out_t out, const OcrTensor *g) {
    OcrTensor *dst = out == DISTILL_OUT_CTC ? d->ctc_dst : out == DISTILL_OUT_GUIDE ? d->guide_dst : d->bb_dst;
    OCR_ASSERT(dst, "distillation: no gradient destination");
    if (d->via_step && out != DISTILL_OUT_CTC) return step_add_grad(s, dst, g);
    ocr_accumulate(dst, g);
    return OCR_OK;
}

static const OcrTensor *out_of(const Side *d, distill_out_t out) {
    return out == DISTILL_OUT_CTC ? d->ctc : out == DISTILL_OUT_GUIDE ? d->guide : d->bb;
}

// A peer's forward and its own losses (its DistillationCTCLoss / NRTR / SAR terms) before the terms.
static ocr_status_t peer_forward(DistillRun *r, int k, const FeedDeviceBatch *b, double lr, double *loss) {
    OcrModel *m = r->nets[k];
    Peer *p = r->peers[k];
    p->lr = lr;
    OCR_TRY(amp_engine_begin_step(&p->amp));
    ocr_params_zero_grads(ocr_model_params(m));
    OCR_TRY(ocr_model_set_guide_batch(m, b->host_labels, b->host_lengths, b->host_widths, b->count, b->max_len,
                                      (int)b->images.shape[2]));
    OCR_TRY(ocr_model_forward_u8(m, &b->images, &b->widths, 1));
    amp_engine_after_forward(&p->amp);
    p->scale = amp_engine_loss_scale(&p->amp);
    // Each rank's batch mean over the world size: the summed gradients are the mean over every
    // rank's samples, as the trained network's are (training/step.c, loss_grad_scales).
    p->grad_scale = p->scale / (float)r->world;
    p->logits = amp_loss_logits(ocr_model_logits(m), &p->logits_buf);
    const OcrTensor *lg = p->logits;
    const ocr_device_t dev = lg->device;
    OCR_TRY(ensure(&p->dl32_buf, dev, ocr_tensor_numel(lg)));
    p->dl32 = ocr_tensor_view(p->dl32_buf.data, OCR_F32, dev, lg->ndim, lg->shape);
    ocr_zero_tensor(&p->dl32);
    OcrTensor *gdl = ocr_model_guide_dlogits(m);
    if (gdl) ocr_zero_tensor(gdl);
    for (int t = 0; t < r->dc.nterms; t++) {
        const DistillTerm *x = &r->dc.terms[t];
        if (!r->active[t] || x->kind < DISTILL_GT_CTC || x->a != k) continue;
        const float gs = (float)x->weight * p->grad_scale;
        double v = 0;
        if (x->kind == DISTILL_GT_CTC) {
            OCR_TRY(ensure(&p->losses, dev, b->count));
            if (!p->infeas.data)
                OCR_TRY(ocr_tensor_alloc(&p->infeas, OCR_I32, dev, 1, (int64_t[]){1024}, OCR_MEM_ACTIVATIONS));
            OCR_ASSERT(b->count <= 1024, "distillation: a batch of at most 1024 for a trained peer");
            OcrTensor ls = ocr_tensor_view(p->losses.data, OCR_F32, dev, 1, (int64_t[]){b->count});
            OcrTensor inf = ocr_tensor_view(p->infeas.data, OCR_I32, dev, 1, (int64_t[]){b->count});
            OCR_TRY(ensure(&r->g32, dev, ocr_tensor_numel(lg)));
            OcrTensor g = g32_like(r, lg);
            CtcParams cp = {OCR_CTC_REDUCTION_PADDLE, 1, 0, gs};
            v = ocr_ctc_loss_forward(&ls, NULL, &g, &inf, lg, &b->labels, &b->lengths, NULL, cp);
            ocr_accumulate(&p->dl32, &g);
        } else {
            const OcrTensor *gl = ocr_model_guide_logits(m), *tg = ocr_model_guide_targets(m);
            OCR_ASSERT(gl && tg && gdl, "distillation: %s has no guidance outputs", r->dc.nets[k].name);
            OCR_TRY(ensure(&p->gloss, dev, 1));
            OCR_TRY(ensure(&r->g32, dev, ocr_tensor_numel(gl)));
            OcrTensor g = g32_like(r, gl);
            CrossEntropyParams cp = ocr_model_guide_loss_params(m, gs);
            ocr_cross_entropy_forward(NULL, &p->gloss, NULL, gl, tg, cp);
            ocr_cross_entropy_backward(&g, gl, tg, cp);
            ocr_accumulate(gdl, &g);
            float f;
            ocr_copy_bytes(ocr_cpu(), &f, dev, p->gloss.data, sizeof f);
            v = f;
        }
        r->value[t] = x->weight * v;
        *loss += r->value[t];
    }
    return OCR_OK;
}

// A peer's backward and update (the CPU's host-driven step: finite check, Adam, scaler).
static ocr_status_t peer_update(DistillRun *r, int k) {
    OcrModel *m = r->nets[k];
    Peer *p = r->peers[k];
    amp_loss_dlogits(ocr_model_dlogits(m), &p->dl32);
    if (r->bb_used[k]) ocr_model_set_backbone_grad(m, &r->bb[k]);
    // The all-reduce of its buckets runs as its backward finishes their layers; every rank then
    // holds the same sums, so the finite check, the update and the loss scale agree everywhere.
    if (p->sync_ok) grad_sync_begin(&p->sync);
    OCR_TRY(ocr_model_backward(m));
    if (p->sync_ok) OCR_TRY(grad_sync_finish(&p->sync));
    OcrParamTable *params = ocr_model_params(m);
    int skipped = amp_engine_check_grads(&p->amp);
    OCR_TRY(step_world_skip(p->sync_ok ? &p->sync : NULL, &p->amp, &skipped, "a trained peer's found-inf all-reduce"));
    // Optimizer.clip_norm: each tensor by its own norm, as the trained network's step does.
    if (!skipped) step_adam_update(&p->optim, &p->amp, params, p->lr, p->grad_views, p->grads, p->clip);
    amp_engine_end_step(&p->amp);
    return OCR_OK;
}

// x itself when it is f32, else its f32 copy in scratch `slot` (a widening: exact).
static const OcrTensor *as_f32(DistillRun *r, int slot, const OcrTensor *x, OcrTensor *view, ocr_status_t *st) {
    if (!x || x->dtype == OCR_F32) return x;
    *st = ensure(&r->w32[slot], x->device, ocr_tensor_numel(x));
    if (*st != OCR_OK) return x;
    *view = ocr_tensor_view(r->w32[slot].data, OCR_F32, x->device, x->ndim, x->shape);
    ocr_cast_forward(view, x);
    r->widened++;
    return view;
}

static ocr_status_t extra_loss(void *user, StepCtx *s, const FeedDeviceBatch *b, const OcrTensor *logits,
                               OcrTensor *dl32, float grad_scale, double *loss) {
    DistillRun *r = user;
    const DistillConfig *dc = &r->dc;
    *loss = 0;
    for (int k = 0; k < dc->nnets; k++)
        if (r->peers[k]) OCR_TRY(peer_forward(r, k, b, s->lr_cur, loss));
    OCR_TRY(run_frozen(r, b));
    const ocr_device_t dev = logits->device;
    OCR_TRY(ensure(&r->loss, dev, b->count));
    // The ops' op type, distill_loss, is black under O1/O2 unless a config moved it.
    const AmpPolicy *pol = s->amp ? &s->amp->cfg.policy : NULL;
    const int f32_ops = !pol || pol->level == OCR_AMP_O0 || amp_policy_op_class(pol, "distill_loss") == AMP_BLACK;
    OcrTensor wa32, wb32;
    // Backbone gradients start at zero each step.
    for (int k = 0; k < dc->nnets; k++) {
        if (!r->bb_used[k]) continue;
        const OcrTensor *bo = k == dc->trained ? ocr_model_backbone_out(s->m) : ocr_model_backbone_out(r->nets[k]);
        OCR_ASSERT(bo, "distillation: no backbone output after a training forward");
        OCR_TRY(ensure(&r->bb_buf[k], dev, ocr_tensor_numel(bo)));
        r->bb[k] = ocr_tensor_view(r->bb_buf[k].data, OCR_F32, dev, bo->ndim, bo->shape);
        ocr_zero_tensor(&r->bb[k]);
    }
    for (int t = 0; t < dc->nterms; t++) {
        if (!r->active[t]) continue;
        const DistillTerm *x = &dc->terms[t];
        if (x->kind >= DISTILL_GT_CTC) continue;  // a peer's own loss: peer_forward
        const Side A = side_of(r, s, x->a, logits, dl32, grad_scale);
        const Side B = side_of(r, s, x->b, logits, dl32, grad_scale);
        const OcrTensor *xa = out_of(&A, x->out), *xb = out_of(&B, x->out);
        OCR_ASSERT(xa && xb, "distillation: a network's output is missing after its forward");
        if (f32_ops) {
            ocr_status_t wst = OCR_OK;
            xa = as_f32(r, 0, xa, &wa32, &wst);
            if (wst == OCR_OK) xb = as_f32(r, 1, xb, &wb32, &wst);
            OCR_TRY(wst);
        }
        r->seen[t][0] = xa->dtype;
        r->seen[t][1] = xb->dtype;
        OCR_TRY(same_shape(x, xa, xb, dc->nets[x->a].name, dc->nets[x->b].name));
        OCR_TRY(ensure(&r->g32, dev, ocr_tensor_numel(xa)));
        OcrTensor g = g32_like(r, xa);
        const float wa = (float)x->weight * A.scale, wb = (float)x->weight * B.scale;
        const int ga = trains(r, x->a), gb = trains(r, x->b);
        OcrTensor l1 = ocr_tensor_view(r->loss.data, OCR_F32, dev, 1, (int64_t[]){1});
        int nloss = 1;
        switch (x->kind) {
            case DISTILL_DML: {
                if (!x->use_log) {
                    nloss = (int)xa->shape[0];
                    l1 = ocr_tensor_view(r->loss.data, OCR_F32, dev, 1, (int64_t[]){nloss});
                }
                ocr_dml_loss_forward(&l1, xa, xb, (DmlLossParams){x->use_log, 1.0f});
                // Both networks learn from each other: each side's gradient at its own scale.
                if (ga) {
                    ocr_dml_loss_backward(&g, NULL, xa, xb, (DmlLossParams){x->use_log, wa});
                    OCR_TRY(add_grad(s, &A, x->out, &g));
                }
                if (gb) {
                    ocr_dml_loss_backward(NULL, &g, xa, xb, (DmlLossParams){x->use_log, wb});
                    OCR_TRY(add_grad(s, &B, x->out, &g));
                }
                break;
            }
            case DISTILL_KL: {
                KlDivLossParams p = {(float)x->temperature, x->masked ? 0 : -1, wa};
                const OcrTensor *tg = x->masked ? A.targets : NULL;
                ocr_kl_div_loss_forward(&l1, xa, xb, tg, p);
                ocr_kl_div_loss_backward(&g, xa, xb, tg, p);
                OCR_TRY(add_grad(s, &A, x->out, &g));
                break;
            }
            case DISTILL_DKD: {
                // PaddleOCR's DKD receives the non-pad mask and does not use it: pad_id -1.
                DkdLossParams p = {(float)x->temperature, (float)x->alpha, (float)x->beta, -1, wa};
                const OcrTensor *tg = A.targets;
                OcrTensor sr = rows_view(xa), tr = rows_view(xb), gr = rows_view(&g);
                int64_t nt = ocr_tensor_numel(tg);
                OcrTensor tv = ocr_tensor_view(tg->data, tg->dtype, tg->device, 1, &nt);
                ocr_dkd_loss_forward(&l1, &sr, &tr, &tv, p);
                ocr_dkd_loss_backward(&gr, &sr, &tr, &tv, p);
                OCR_TRY(add_grad(s, &A, x->out, &g));
                break;
            }
            case DISTILL_CTC_LOGITS: {
                CtcLogitsKlParams p = {(float)x->temperature, 0, wa};
                ocr_ctc_logits_kl_forward(&l1, xa, xb, p);
                ocr_ctc_logits_kl_backward(&g, xa, xb, p);
                OCR_TRY(add_grad(s, &A, x->out, &g));
                break;
            }
            case DISTILL_DISTANCE: {
                ocr_distance_loss_forward(&l1, xa, xb, (DistanceLossParams){x->mode, 1.0f, 1.0f});
                if (ga) {
                    ocr_distance_loss_backward(&g, NULL, xa, xb, (DistanceLossParams){x->mode, 1.0f, wa});
                    OCR_TRY(add_grad(s, &A, x->out, &g));
                }
                if (gb) {
                    ocr_distance_loss_backward(NULL, &g, xa, xb, (DistanceLossParams){x->mode, 1.0f, wb});
                    OCR_TRY(add_grad(s, &B, x->out, &g));
                }
                break;
            }
            default: OCR_ASSERT(0, "distillation: a ground-truth term is not an extra loss");
        }
        r->value[t] = x->weight * read_loss(r, nloss);
        *loss += r->value[t];
    }
    if (r->bb_used[dc->trained]) ocr_model_set_backbone_grad(s->m, &r->bb[dc->trained]);
    for (int k = 0; k < dc->nnets && !r->hold_peers; k++)
        if (r->peers[k]) OCR_TRY(peer_update(r, k));
    return OCR_OK;
}

void distill_run_hold_peers(DistillRun *r, int hold) { r->hold_peers = hold; }

int distill_run_companions(DistillRun *r, CkptCompanion *out, int cap) {
    int n = 0;
    for (int k = 0; r && k < r->dc.nnets && n < cap; k++) {
        Peer *p = r->peers[k];
        if (!p) continue;
        out[n++] = (CkptCompanion){r->dc.nets[k].name, &p->optim, &p->amp, ocr_model_params(r->nets[k]),
                                   ocr_model_get_step(r->nets[k])};
    }
    return n;
}

static ocr_status_t broadcast_bytes(OcrDist *dist, void *data, size_t bytes, const char *what, const char *name) {
    if (!data || bytes == 0) return OCR_OK;
    char msg[160];
    snprintf(msg, sizeof msg, "%s's initial %s broadcast", name, what);
    return ocr_dist_broadcast(dist, data, bytes, 0, msg);
}

ocr_status_t distill_run_join_world(DistillRun *r, OcrDist *dist, int64_t bucket_bytes, const OcrBnSync *bn_sync) {
    if (!r) return OCR_OK;
    r->world = ocr_dist_world_size(dist);
    for (int k = 0; k < r->dc.nnets; k++) {
        Peer *p = r->peers[k];
        if (!p) continue;
        OcrModel *m = r->nets[k];
        const char *name = r->dc.nets[k].name;
        // Rank 0's starting point on every rank, masters included (equal already when every rank
        // read the same files with the same seed, as for the trained network).
        OcrParamTable *params = ocr_model_params(m), *stats = ocr_model_stats(m);
        OCR_TRY(broadcast_bytes(dist, params->data, params->bytes, "weights", name));
        OCR_TRY(broadcast_bytes(dist, stats->data, stats->bytes, "BN statistics", name));
        for (int i = 0; i < params->count; i++) {
            OcrTensor *mw = amp_engine_master(&p->amp, i);
            if (mw) OCR_TRY(broadcast_bytes(dist, mw->data, (size_t)ocr_tensor_bytes(mw), "master weights", name));
        }
        OCR_TRY(grad_sync_init(&p->sync, dist, m, bucket_bytes));
        p->sync_ok = 1;
        if (bn_sync) ocr_model_set_bn_sync(m, bn_sync);
    }
    return OCR_OK;
}

ocr_status_t distill_run_plan(DistillRun *r, int batch, int height, int width, DistillPlan *out) {
    memset(out, 0, sizeof *out);
    for (int i = 0; i < r->dc.nnets; i++) {
        OcrModel *m = r->nets[i];
        if (!m) continue;
        if (r->peers[i]) {
            // A network trained beside (mutual learning): weights, gradients, statistics, Adam's
            // moments, O1 cast cache / O2 masters, and its training pass's arena.
            const OcrParamTable *pp = ocr_model_params(m);
            AmpMemory am = amp_engine_memory(&r->peers[i]->amp);
            out->peers++;
            out->peer_fixed_bytes += 2 * (int64_t)pp->bytes + (int64_t)ocr_model_stats(m)->bytes + optim_bytes_for(pp) +
                                     am.cast_cache_bytes + am.master_bytes;
            OcrMemPlan p;
            OCR_TRY(ocr_model_plan_u8(m, batch, height, width, 1, &p));
            out->peer_activations_bytes += p.activations_bytes;
            continue;
        }
        out->frozen++;
        out->weights_bytes += (int64_t)ocr_model_params(m)->bytes + (int64_t)ocr_model_stats(m)->bytes;
        if (r->famp_ok[i]) out->weights_bytes += amp_engine_memory(&r->famp[i]).cast_cache_bytes;
        // Its own arena, sized by its pass (a training-mode one when a term reads its guidance head).
        OcrMemPlan p;
        OCR_TRY(ocr_model_plan_u8(m, batch, height, width, r->guide_pass[i], &p));
        out->activations_bytes += p.activations_bytes;
    }
    return OCR_OK;
}

int distill_run_term_dtypes(const DistillRun *r, int t, ocr_dtype_t *a, ocr_dtype_t *b) {
    if (t < 0 || t >= r->dc.nterms || !r->active[t]) return 0;
    *a = r->seen[t][0];
    *b = r->seen[t][1];
    return 1;
}

ocr_dtype_t distill_run_net_dtype(const DistillRun *r, int i) {
    if (i < 0 || i >= r->dc.nnets || !r->famp_ok[i]) return OCR_F32;
    return r->famp[i].cfg.policy.dtype;
}

const OcrTensor *distill_run_grad(const DistillRun *r, int k, distill_out_t out) {
    if (k < 0 || k >= r->dc.nnets) return NULL;
    if (out == DISTILL_OUT_BACKBONE) return r->bb_used[k] ? &r->bb[k] : NULL;
    if (out == DISTILL_OUT_CTC && r->peers[k]) return &r->peers[k]->dl32;
    return NULL;
}

const OcrTensor *distill_run_logits(const DistillRun *r, int k) {
    if (k < 0 || k >= r->dc.nnets || !r->nets[k]) return NULL;
    return r->peers[k] ? r->peers[k]->logits : ocr_model_logits(r->nets[k]);
}

void distill_attach(DistillRun *r, StepCtx *s) {
    s->extra.fn = extra_loss;
    s->extra.user = r;
}

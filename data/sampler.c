// Epoch plans: permutation, sharding, batching, multi-scale shapes. See sampler.h.
#include "data/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

ocr_status_t ocr_sampler_multiscale_shapes(OcrBatchShape *out, const int *widths, const int *heights, int n,
                                           int first_bs, int fix_bs, int divided_w, int divided_h) {
    if (n < 1 || n > OCR_SAMPLER_MAX_SCALES)
        return ocr_set_error(OCR_ERR_CONFIG, "MultiScaleSampler: %d scales (1..%d supported)", n,
                             OCR_SAMPLER_MAX_SCALES);
    if (first_bs < 1) return ocr_set_error(OCR_ERR_CONFIG, "MultiScaleSampler: first_bs must be >= 1");
    if (divided_w < 1 || divided_h < 1)
        return ocr_set_error(OCR_ERR_CONFIG, "MultiScaleSampler: divided_factor must be >= 1");
    double base = (double)widths[0] * heights[0] * first_bs;
    for (int i = 0; i < n; i++) {
        int w = widths[i] / divided_w * divided_w, h = heights[i] / divided_h * divided_h;
        if (w < 1 || h < 1)
            return ocr_set_error(OCR_ERR_CONFIG,
                                 "MultiScaleSampler: scale %d ([%d, %d]) rounds down to 0 with divided_factor [%d, %d]",
                                 i, widths[i], heights[i], divided_w, divided_h);
        double bs = base / ((double)h * w);
        out[i].width = w;
        out[i].height = h;
        out[i].batch_size = fix_bs ? first_bs : (bs < 1.0 ? 1 : (int)bs);
    }
    return OCR_OK;
}

int ocr_sampler_max_batch(const OcrSamplerOptions *opt) {
    int m = 0;
    for (int i = 0; i < opt->num_scales; i++)
        if (opt->scales[i].batch_size > m) m = opt->scales[i].batch_size;
    return m;
}

ocr_status_t ocr_sampler_mix_check(const double *mix, int n) {
    if (n < 2 || n > OCR_SAMPLER_MAX_SOURCES)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "%d sources: a mix takes 2 to %d", n, OCR_SAMPLER_MAX_SOURCES);
    double sum = 0;
    for (int i = 0; i < n; i++) {
        if (!(mix[i] > 0.0 && mix[i] <= 1.0))
            return ocr_set_error(OCR_ERR_INVALID_ARG, "entry %d is %g: each fraction must be in (0, 1]", i, mix[i]);
        sum += mix[i];
    }
    if (fabs(sum - 1.0) > 1e-6)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "the fractions sum to %.9g: they must sum to 1 (within 1e-6)", sum);
    return OCR_OK;
}

ocr_status_t ocr_sampler_mix_counts(const double *mix, int n, int batch, int *counts) {
    double rem[OCR_SAMPLER_MAX_SOURCES];
    int given = 0;
    for (int i = 0; i < n; i++) {
        double x = mix[i] * (double)batch;
        counts[i] = (int)floor(x);
        rem[i] = x - counts[i];
        given += counts[i];
    }
    while (given < batch) {  // the sum of the remainders is batch − given (an integer) up to rounding
        int best = 0;
        for (int i = 1; i < n; i++)
            if (rem[i] > rem[best] + 1e-9) best = i;
        counts[best]++;
        rem[best] = -1;
        given++;
    }
    for (int i = 0; i < n; i++)
        if (counts[i] < 1)
            return ocr_set_error(OCR_ERR_INVALID_ARG, "entry %d (%g) gives no sample of a batch of %d (raise it to at "
                                 "least %.3g or use larger batches)", i, mix[i], batch, 0.5 / batch);
    return OCR_OK;
}

ocr_status_t ocr_sampler_init(OcrSampler *s, const OcrSamplerOptions *opt) {
    memset(s, 0, sizeof *s);
    if (opt->world_size < 1 || opt->rank < 0 || opt->rank >= opt->world_size)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "sampler: rank %d of world size %d", opt->rank, opt->world_size);
    if (opt->num_scales < 1 || opt->num_scales > OCR_SAMPLER_MAX_SCALES)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "sampler: %d scales", opt->num_scales);
    for (int i = 0; i < opt->num_scales; i++)
        if (opt->scales[i].batch_size < 1 || opt->scales[i].width < 1 || opt->scales[i].height < 1)
            return ocr_set_error(OCR_ERR_INVALID_ARG, "sampler: scale %d is %dx%d with batch size %d", i,
                                 opt->scales[i].width, opt->scales[i].height, opt->scales[i].batch_size);
    if (opt->num_sources != 0) {
        OCR_TRY(ocr_sampler_mix_check(opt->mix, opt->num_sources));
        int counts[OCR_SAMPLER_MAX_SOURCES];
        for (int i = 0; i < opt->num_scales; i++) OCR_TRY(ocr_sampler_mix_counts(opt->mix, opt->num_sources,
                                                                                  opt->scales[i].batch_size, counts));
    }
    s->opt = *opt;
    return OCR_OK;
}

void ocr_sampler_free(OcrSampler *s) {
    free(s->perm_);
    free(s->slots_);
    free(s->batch_off_);
    free(s->batch_scale_);
    memset(s, 0, sizeof *s);
}

static ocr_status_t reserve(OcrSampler *s, int64_t n, int64_t batches) {
    if (n > s->cap_samples_) {
        int32_t *p = realloc(s->perm_, sizeof(int32_t) * (size_t)n);
        if (!p) return ocr_set_error(OCR_ERR_OOM, "sampler: out of memory for %lld samples", (long long)n);
        s->perm_ = p;
        int32_t *q = realloc(s->slots_, sizeof(int32_t) * (size_t)n);
        if (!q) return ocr_set_error(OCR_ERR_OOM, "sampler: out of memory for %lld samples", (long long)n);
        s->slots_ = q;
        s->cap_samples_ = n;
    }
    if (batches + 1 > s->cap_batches_) {
        int64_t *o = realloc(s->batch_off_, sizeof(int64_t) * (size_t)(batches + 1));
        if (!o) return ocr_set_error(OCR_ERR_OOM, "sampler: out of memory");
        s->batch_off_ = o;
        int32_t *c = realloc(s->batch_scale_, sizeof(int32_t) * (size_t)(batches + 1));
        if (!c) return ocr_set_error(OCR_ERR_OOM, "sampler: out of memory");
        s->batch_scale_ = c;
        s->cap_batches_ = batches + 1;
    }
    return OCR_OK;
}

ocr_status_t ocr_sampler_set_epoch(OcrSampler *s, uint64_t epoch, int64_t n) {
    if (s->opt.num_sources != 0)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "sampler: a mixed plan needs each source's size "
                             "(ocr_sampler_set_epoch_sources)");
    if (n < 1 || n > INT32_MAX)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "sampler: %lld samples (1..2^31-1 supported)", (long long)n);
    const OcrSamplerOptions *o = &s->opt;
    int64_t world = o->world_size, r = o->rank;
    int64_t per_rank = n / world;  // this rank's samples before batching
    // Batches: at most per_rank / min_bs + 1 (one partial) per rank.
    int min_bs = o->scales[0].batch_size;
    for (int i = 1; i < o->num_scales; i++)
        if (o->scales[i].batch_size < min_bs) min_bs = o->scales[i].batch_size;
    OCR_TRY(reserve(s, n, per_rank / min_bs + 2));
    s->epoch = epoch;
    s->num_samples = n;
    OcrRng rng = ocr_rng_make(o->seed, OCR_SAMPLER_STREAM + epoch);
    for (int64_t i = 0; i < n; i++) s->perm_[i] = (int32_t)i;
    if (o->shuffle) ocr_rng_shuffle_i32(&rng, s->perm_, (size_t)n);

    int64_t nb = 0, taken = 0;
    if (o->num_scales == 1) {
        int64_t bs = o->scales[0].batch_size, m = per_rank * world;
        int64_t rounds = m / (bs * world), rem = m - rounds * bs * world;
        for (int64_t k = 0; k < rounds; k++) {
            s->batch_off_[nb] = taken;
            s->batch_scale_[nb++] = 0;
            for (int64_t j = 0; j < bs; j++) s->slots_[taken++] = (int32_t)(k * bs * world + r * bs + j);
        }
        if (rem > 0 && !o->drop_last) {
            int64_t part = rem / world;
            s->batch_off_[nb] = taken;
            s->batch_scale_[nb++] = 0;
            for (int64_t j = 0; j < part; j++) s->slots_[taken++] = (int32_t)(rounds * bs * world + r * part + j);
        }
    } else {
        // The scale cycle order for this epoch, then runs of this rank's slots r, r+world, ...
        int order[OCR_SAMPLER_MAX_SCALES];
        for (int i = 0; i < o->num_scales; i++) order[i] = i;
        if (o->shuffle)
            for (int i = o->num_scales - 1; i > 0; i--) {
                int j = (int)ocr_rng_next_int(&rng, 0, i);
                int t = order[i]; order[i] = order[j]; order[j] = t;
            }
        int64_t next = 0;  // this rank's sample counter
        for (int c = 0; next < per_rank; c = (c + 1) % o->num_scales) {
            int sc = order[c];
            int64_t bs = o->scales[sc].batch_size, take = per_rank - next < bs ? per_rank - next : bs;
            if (take < bs && o->drop_last) break;
            s->batch_off_[nb] = taken;
            s->batch_scale_[nb++] = sc;
            for (int64_t j = 0; j < take; j++) s->slots_[taken++] = (int32_t)((next + j) * world + r);
            next += take;
        }
        // Shuffle the batch order: permute (offset, scale) pairs, then rebuild the slot list.
        if (o->shuffle && nb > 1) {
            int32_t *ord = malloc(sizeof(int32_t) * (size_t)nb);
            int64_t *off2 = malloc(sizeof(int64_t) * (size_t)(nb + 1));
            int32_t *sc2 = malloc(sizeof(int32_t) * (size_t)nb);
            int32_t *slots2 = malloc(sizeof(int32_t) * (size_t)(taken ? taken : 1));
            if (!ord || !off2 || !sc2 || !slots2) {
                free(ord), free(off2), free(sc2), free(slots2);
                return ocr_set_error(OCR_ERR_OOM, "sampler: out of memory");
            }
            s->batch_off_[nb] = taken;
            for (int64_t b = 0; b < nb; b++) ord[b] = (int32_t)b;
            ocr_rng_shuffle_i32(&rng, ord, (size_t)nb);
            int64_t pos = 0;
            for (int64_t b = 0; b < nb; b++) {
                int64_t from = s->batch_off_[ord[b]], len = s->batch_off_[ord[b] + 1] - from;
                off2[b] = pos;
                sc2[b] = s->batch_scale_[ord[b]];
                memcpy(slots2 + pos, s->slots_ + from, sizeof(int32_t) * (size_t)len);
                pos += len;
            }
            memcpy(s->slots_, slots2, sizeof(int32_t) * (size_t)taken);
            memcpy(s->batch_off_, off2, sizeof(int64_t) * (size_t)nb);
            memcpy(s->batch_scale_, sc2, sizeof(int32_t) * (size_t)nb);
            free(ord), free(off2), free(sc2), free(slots2);
        }
    }
    s->batch_off_[nb] = taken;
    s->num_batches = nb;
    s->rank_samples = taken;
    return OCR_OK;
}

void ocr_sampler_batch(const OcrSampler *s, int64_t b, OcrSamplerBatch *out) {
    OCR_ASSERT(b >= 0 && b < s->num_batches, "batch %lld of %lld", (long long)b, (long long)s->num_batches);
    const OcrBatchShape *sh = &s->opt.scales[s->batch_scale_[b]];
    out->width = sh->width;
    out->height = sh->height;
    out->size = (int)(s->batch_off_[b + 1] - s->batch_off_[b]);
    out->slots = s->slots_ + s->batch_off_[b];
}

// One source's draw order for a mixed epoch: a permutation of its n samples, taken in turn and
// re-shuffled from the source's own stream whenever it runs out (the target is never re-shuffled:
// the epoch ends first).
typedef struct {
    int32_t *perm;
    int64_t n, next, base;
    OcrRng rng;
    int shuffle;
} MixSource;

static int32_t mix_draw(MixSource *m) {
    if (m->next == m->n) {
        if (m->shuffle) ocr_rng_shuffle_i32(&m->rng, m->perm, (size_t)m->n);
        m->next = 0;
    }
    return (int32_t)(m->base + m->perm[m->next++]);
}

ocr_status_t ocr_sampler_set_epoch_sources(OcrSampler *s, uint64_t epoch, const int64_t *sizes, int n) {
    const OcrSamplerOptions *o = &s->opt;
    if (o->num_sources == 0 || n != o->num_sources)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "sampler: %d source sizes for a mix of %d sources", n,
                             o->num_sources);
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 1)
            return ocr_set_error(OCR_ERR_INVALID_ARG, "label file %d has no usable sample this epoch (entry %d)", i,
                                 i);
        total += sizes[i];
    }
    if (total > INT32_MAX)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "sampler: %lld samples (1..2^31-1 supported)", (long long)total);
    int64_t world = o->world_size, r = o->rank;
    int counts[OCR_SAMPLER_MAX_SCALES][OCR_SAMPLER_MAX_SOURCES];
    int min_target = INT32_MAX, max_bs = 0;
    for (int c = 0; c < o->num_scales; c++) {
        OCR_TRY(ocr_sampler_mix_counts(o->mix, n, o->scales[c].batch_size, counts[c]));
        if (counts[c][0] < min_target) min_target = counts[c][0];
        if (o->scales[c].batch_size > max_bs) max_bs = o->scales[c].batch_size;
    }
    // Upper bounds: every global round takes at least world · min_target target samples.
    int64_t rounds_max = sizes[0] / (world * min_target) + 1;
    int64_t slots_max = rounds_max * world * max_bs;
    if (slots_max > INT32_MAX)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "sampler: a mixed epoch of %lld slots (2^31-1 supported)",
                             (long long)slots_max);
    OCR_TRY(reserve(s, slots_max, rounds_max + 1));
    MixSource src[OCR_SAMPLER_MAX_SOURCES];
    memset(src, 0, sizeof src);
    ocr_status_t st = OCR_OK;
    int64_t base = 0;
    for (int i = 0; i < n && st == OCR_OK; i++) {
        src[i].perm = malloc(sizeof(int32_t) * (size_t)sizes[i]);
        if (!src[i].perm) {
            st = ocr_set_error(OCR_ERR_OOM, "sampler: out of memory for %lld samples", (long long)sizes[i]);
            break;
        }
        src[i].n = sizes[i];
        src[i].base = base;
        src[i].shuffle = o->shuffle;
        src[i].rng = ocr_rng_make(o->seed, OCR_SAMPLER_MIX_STREAM + ((uint64_t)i << 32) + epoch);
        for (int64_t j = 0; j < sizes[i]; j++) src[i].perm[j] = (int32_t)j;
        if (o->shuffle) ocr_rng_shuffle_i32(&src[i].rng, src[i].perm, (size_t)sizes[i]);
        base += sizes[i];
    }
    // The scale cycle (as the multi-scale plan), then global rounds until the target runs out.
    int order[OCR_SAMPLER_MAX_SCALES];
    OcrRng rng = ocr_rng_make(o->seed, OCR_SAMPLER_STREAM + epoch);
    for (int i = 0; i < o->num_scales; i++) order[i] = i;
    if (o->shuffle)
        for (int i = o->num_scales - 1; i > 0; i--) {
            int j = (int)ocr_rng_next_int(&rng, 0, i);
            int t = order[i]; order[i] = order[j]; order[j] = t;
        }
    int64_t nb = 0, taken = 0, slot = 0, target_left = sizes[0];
    for (int c = 0; st == OCR_OK; c = (c + 1) % o->num_scales) {
        int sc = order[c];
        int k[OCR_SAMPLER_MAX_SOURCES];
        memcpy(k, counts[sc], sizeof(int) * (size_t)n);
        if (target_left < world * k[0]) {
            // The last, smaller round: the target's remainder shared out, the others in proportion,
            // rounded down (at least one each): never more than a full batch (part <= mix[0]·B, so
            // each source's share is at most its full count).
            int64_t part = target_left / world;
            if (part < 1 || o->drop_last) break;
            k[0] = (int)part;
            for (int i = 1; i < n; i++) {
                int64_t x = (int64_t)floor((double)part * o->mix[i] / o->mix[0]);
                k[i] = (int)(x < 1 ? 1 : x > k[i] ? k[i] : x);
            }
        }
        s->batch_off_[nb] = taken;
        s->batch_scale_[nb++] = sc;
        for (int64_t q = 0; q < world; q++)
            for (int i = 0; i < n; i++)
                for (int j = 0; j < k[i]; j++) {
                    s->perm_[slot] = mix_draw(&src[i]);
                    if (q == r) s->slots_[taken++] = (int32_t)slot;
                    slot++;
                }
        target_left -= world * k[0];
    }
    for (int i = 0; i < n; i++) free(src[i].perm);
    if (st != OCR_OK) return st;
    s->epoch = epoch;
    s->num_samples = slot;
    s->batch_off_[nb] = taken;
    s->num_batches = nb;
    s->rank_samples = taken;
    return OCR_OK;
}

// Batch norm followed by an activation, fused (NHWC, viewed as M = N·H·W rows of C channels).
//
// Bit-identical to the unfused pair by construction: the statistics come from batchnorm.c's
// own routine (ocr_cpu_bn_batch_stats_rows, same fixed row chunks), the per-channel coefficients and the
// per-element expression are batchnorm.c's, the pre-activation value is rounded to the dtype
// the unfused pair stores it in, and the activation runs through activation.c's own loops
// (ocr_cpu_act_forward_tile / ocr_cpu_act_backward_tile) on row tiles small enough to stay in cache.
// The backward's sums visit the rows of each chunk in order, as batchnorm.c's do.
//
// Passes over the map: forward = statistics + one fused normalise/activate pass; backward = the
// sums of g and g·(x − mean) (the value rebuilt from save_mean, save_scale and beta),
// g = dout·act'(value) formed per tile and parked in dinp's memory + one elementwise pass that
// turns g into dx in place. No BN output and no separate activation gradient map.
//
// f16/bf16 maps are never widened as a whole: every pass widens the tile of rows it works on
// into a per-thread buffer (ocr_cpu_rows_in) and rounds its results back per tile (ocr_cpu_rows_out),
// so a bf16 map moves 2 bytes per element per read or write instead of an fp32 copy's
// 4 + the conversion passes. g is parked in dinp's own dtype when that holds it exactly (g is
// rounded to mid: dinp f32 or of dtype mid), else pass two forms it again. The loops run at the
// CPU's vector width (rowwise.h); results are the same bits as with whole-tensor conversion.
//
// batchnorm2d_act_apply runs the forward's normalise/activate pass alone, from the saved
// save_mean / save_scale and beta, to rebuild a dropped output bit for bit. When that output is
// needed only after this backward (the next conv's weight gradient), batchnorm2d_act_backward_rebuild
// writes it from the backward's sum pass instead: the value is formed there anyway, and act and
// act' in one loop share their costly part (GELU's exponential and Φ), so the activation is
// evaluated once per element instead of once for the rebuild and once for the gradient.
//
// Synchronised BN (sync != NULL, kernels/ops.h): the forward combines this rank's statistics
// with the world's before the coefficients are formed; the backward sums (count, Σ g,
// Σ g·(x − mean)) over the world for dx's coefficients and keeps its own sums for dgamma/dbeta.
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "core/half.h"
#include "kernels/activation_math.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/rowwise.h"
#include "kernels/ops.h"

// Below this many elements an OpenMP team costs more than it saves (batchnorm.c's threshold).
#define BNA_PAR_MIN 16384

static void bna_check_vec(const OcrTensor *t, int64_t C, const char *what) {
    CPU_ASSERT_FLOAT(t);
    OCR_ASSERT(ocr_tensor_numel(t) == C, "batchnorm_act: %s has %lld elements, expected C = %lld", what,
               (long long)ocr_tensor_numel(t), (long long)C);
}


// v (n) = v rounded to bf16 and back in one pass, in registers: ocr_f32_to_bf16's nearest-even
// rounding with NaNs quieted (the bulk converters' too), then the exact widening.
CPU_INLINE void round_bf16_inplace_body(float *v, int64_t n) {
    for (int64_t i = 0; i < n; i++) v[i] = ocr_bf16_round(v[i]);
}
CPU_VEC_CLONES(round_bf16_inplace, (float *v, int64_t n), (v, n))

void ocr_cpu_round_tile(float *v, int64_t n, ocr_dtype_t dt, uint16_t *tmp) {
    if (dt == OCR_F16) {
        ocr_f32_to_f16_array(tmp, v, (size_t)n);
        ocr_f16_to_f32_array(v, tmp, (size_t)n);
    } else if (dt == OCR_BF16) {
        round_bf16_inplace(v, n);
    }
}

static void bna_world_sum(const OcrBnSync *sync, double *v, int64_t n, const char *what) {
    OCR_ASSERT(sync->sum(sync->user, v, n) == 0, "batchnorm: summing %s over the ranks failed: %s", what,
               ocr_last_error());
}

// mean, var (C) = the world's batch mean and biased variance from this rank's (M rows): every
// rank's count and count·mean give the world mean mu, then Σ M_r·var_r + M_r·(mean_r − mu)² over
// the ranks is the world's sum of squared deviations (the pairwise combination of Chan et al.).
static void bna_world_stats(double *mean, double *var, int64_t M, int64_t C, const OcrBnSync *sync, CpuScratch *s) {
    double *v = ocr_cpu_scratch_bytes(s, (size_t)(C + 1) * sizeof(double));
    v[0] = (double)M;
    for (int64_t c = 0; c < C; c++) v[1 + c] = (double)M * mean[c];
    bna_world_sum(sync, v, C + 1, "the batch statistics' counts and means");
    const double count = v[0];
    OCR_ASSERT(count > 0, "batchnorm: the world's batch is empty");
    for (int64_t c = 0; c < C; c++) {
        const double mu = v[1 + c] / count, d = mean[c] - mu;
        v[1 + c] = (double)M * var[c] + (double)M * d * d;
        mean[c] = mu;
    }
    bna_world_sum(sync, v + 1, C, "the batch statistics' squared deviations");
    for (int64_t c = 0; c < C; c++) var[c] = v[1 + c] > 0.0 ? v[1 + c] / count : 0.0;
}

// Normalisation coefficients, as ocr_cpu_batchnorm2d_forward computes them: the value is
// (x − mf)·af + bf with mf = (float)mean, af = (float)(gamma·rstd) in double, bf = beta.
// mean, var (C, double) are the statistics used; rstd (C) their f32 1/sqrt(var + eps).
typedef struct {
    double *mean, *var;
    const float *mf, *af, *bf;
    float *rstd;
} BnaCoef;

static BnaCoef bna_coef(CpuScratch *s, const OcrTensor *x, int64_t M, int64_t C, const OcrTensor *running_mean,
                        const OcrTensor *running_var, const OcrTensor *gamma, const OcrTensor *beta, float eps,
                        int training, const OcrBnSync *sync) {
    BnaCoef k;
    k.mean = ocr_cpu_scratch_bytes(s, (size_t)C * sizeof(double));
    k.var = ocr_cpu_scratch_bytes(s, (size_t)C * sizeof(double));
    if (training) {
        OCR_ASSERT(M > 0, "batchnorm_act: training on an empty batch");
        ocr_cpu_bn_batch_stats_rows(k.mean, k.var, x, M, C, s);
        if (sync) bna_world_stats(k.mean, k.var, M, C, sync, s);
    } else {
        OCR_ASSERT(running_mean && running_var, "batchnorm_act: inference needs the running statistics");
        const float *rm = ocr_cpu_f32_in(s, running_mean), *rv = ocr_cpu_f32_in(s, running_var);
        for (int64_t c = 0; c < C; c++) {
            k.mean[c] = rm[c];
            k.var[c] = rv[c];
        }
    }
    const float *g = gamma ? ocr_cpu_f32_in(s, gamma) : NULL;
    const float *b = beta ? ocr_cpu_f32_in(s, beta) : NULL;
    float *mf = ocr_cpu_scratch_floats(s, (size_t)C);
    float *af = ocr_cpu_scratch_floats(s, (size_t)C);
    float *bf = ocr_cpu_scratch_floats(s, (size_t)C);
    k.rstd = ocr_cpu_scratch_floats(s, (size_t)C);
    for (int64_t c = 0; c < C; c++) {
        double r = 1.0 / sqrt(k.var[c] + (double)eps);
        k.rstd[c] = (float)r;
        mf[c] = (float)k.mean[c];
        af[c] = (float)((g ? (double)g[c] : 1.0) * r);
        bf[c] = b ? b[c] : 0.0f;
    }
    k.mf = mf, k.af = af, k.bf = bf;
    return k;
}

// v (rows, C) = the pre-activation values of x rows, rounded to mid.
static inline void bna_value_tile(float *v, const float *x, int64_t rows, int64_t C, const BnaCoef *k,
                                  ocr_dtype_t mid, uint16_t *tmp) {
    ocr_cpu_bn_value_tile(v, x, k->mf, k->af, k->bf, rows, C);
    ocr_cpu_round_tile(v, rows * C, mid, tmp);
}

// ---- bf16 maps with the conversions in registers (BF16-O2) -------------------------------------
// When every map a pass touches is bf16 (and mid is bf16), the pass reads and writes them
// directly: widening is exact and each rounding is ocr_f32_to_bf16's nearest-even with NaNs
// quieted, the rounding the bulk converters do, and the per-element arithmetic (the value, the
// activation's formula from activation_math.h, the sums in row order) is the buffered path's.
// So these give that path's bits while skipping its widened tiles and rounding passes.

// The forward's rows on bf16 maps: v = act(value) with value = (x − mf)·af + bf rounded to bf16,
// then STORE(y element, v): BNA_SET rounds v into y; BNA_ADD adds v rounded to bf16 to y's value
// and rounds the sum (accumulate's add_tile_bf16 after forward_bf16 into a bf16 tensor).
// Two loops per tile: the values per row (channel coefficients, cheap), then the activation over
// the tile's rows·C values as one flat loop. The activation is the costly part, and a row-wise loop
// runs its last C mod (vector width) channels scalar (C = 24 on AVX-512: a third of the tile);
// the flat loop keeps every element in full vectors. v (rows·C floats) is the caller's buffer.
#define BNA_SET(y, v) (y) = ocr_f32_to_bf16(v)
#define BNA_ADD(y, v) (y) = ocr_f32_to_bf16(ocr_bf16_to_f32(y) + ocr_bf16_round(v))
#define BNA_FWD_FLAT(f, STORE) \
    for (int64_t i = 0; i < n; i++) STORE(y[i], f(v[i]));
#define BNA_FWD_SET_LOOP(f) BNA_FWD_FLAT(f, BNA_SET)
#define BNA_FWD_ADD_LOOP(f) BNA_FWD_FLAT(f, BNA_ADD)

// For every element of the bf16 rows x (rows, C): STORE(d, i, value), value = (x − mf)·af + bf rounded
// to bf16 (in fp32), i its index in the tile. Where C leaves a partial vector per row, g rows at a
// time as one flat loop over coefficients repeated g times (rowwise.h: cpu_group_rows), the
// element's arithmetic unchanged; the rows left over one by one.
#define BNA_VALUE(xv, m, a, b) ocr_bf16_round((ocr_bf16_to_f32(xv) - (m)) * (a) + (b))
#define BNA_VALUE_ROWS(STORE)                                                                      \
    do {                                                                                           \
        int64_t r_ = 0;                                                                            \
        const int64_t g_ = cpu_group_rows(C);                                                      \
        if (g_ > 1 && rows >= g_) {                                                                \
            const int64_t L_ = g_ * C;                                                             \
            float m2_[CPU_GROUP_MAX], a2_[CPU_GROUP_MAX], b2_[CPU_GROUP_MAX];                      \
            cpu_repeat_coefs(m2_, mf, C, L_), cpu_repeat_coefs(a2_, af, C, L_);                    \
            cpu_repeat_coefs(b2_, bf, C, L_);                                                      \
            for (; r_ + g_ <= rows; r_ += g_)                                                      \
                for (int64_t j_ = 0; j_ < L_; j_++)                                                \
                    STORE(r_ * C + j_, BNA_VALUE(x[r_ * C + j_], m2_[j_], a2_[j_], b2_[j_]));       \
        }                                                                                          \
        for (; r_ < rows; r_++)                                                                    \
            for (int64_t c_ = 0; c_ < C; c_++) STORE(r_ * C + c_, BNA_VALUE(x[r_ * C + c_], mf[c_], af[c_], bf[c_])); \
    } while (0)

// v (rows, C) = the pre-activation values of bf16 rows x, rounded to bf16, in fp32.
CPU_INLINE void value_bf16_rows(float *restrict v, const uint16_t *restrict x, const float *restrict mf,
                                const float *restrict af, const float *restrict bf, int64_t rows, int64_t C) {
#define BNA_STORE_V(i, val) v[i] = (val)
    BNA_VALUE_ROWS(BNA_STORE_V);
#undef BNA_STORE_V
}

CPU_INLINE void forward_bf16_body(int hw_fma, uint16_t *restrict y, const uint16_t *restrict x,
                                  const float *restrict mf, const float *restrict af, const float *restrict bf,
                                  int64_t rows, int64_t C, ocr_activation_t act, int accumulate, float *restrict v) {
    const int64_t n = rows * C;
    if (act == OCR_ACT_NONE) {
        // No activation to keep in full vectors: the value goes straight into y (an extra pass
        // through v measured 35 % slower for plain BN's output).
#define BNA_STORE_ADD(i, val) BNA_ADD(y[i], val)
#define BNA_STORE_SET(i, val) BNA_SET(y[i], val)
        if (accumulate)
            BNA_VALUE_ROWS(BNA_STORE_ADD);
        else
            BNA_VALUE_ROWS(BNA_STORE_SET);
#undef BNA_STORE_ADD
#undef BNA_STORE_SET
        return;
    }
    value_bf16_rows(v, x, mf, af, bf, rows, C);
    if (act == OCR_ACT_GELU) {
        // GELU of a bf16 value by table (kernels/cpu/activation.c): v becomes GELU(v) rounded to
        // bf16, what the formula loop stores.
        ocr_cpu_table_lookup_f32(v, v, ocr_cpu_gelu_bf16_table(hw_fma)->value, n);
        if (accumulate) {
            BNA_FWD_ADD_LOOP(act_none_forward_one)
        } else {
            BNA_FWD_SET_LOOP(act_none_forward_one)
        }
        return;
    }
    if (accumulate) {
        CPU_ACT_SWITCH(act, hw_fma, BNA_FWD_ADD_LOOP, _forward_one)
    } else {
        CPU_ACT_SWITCH(act, hw_fma, BNA_FWD_SET_LOOP, _forward_one)
    }
}
CPU_VEC_CLONES_FMA(forward_bf16, (uint16_t *y, const uint16_t *x, const float *mf, const float *af, const float *bf,
                                  int64_t rows, int64_t C, ocr_activation_t act, int accumulate, float *v),
                   (y, x, mf, af, bf, rows, C, act, accumulate, v))

// The backward's sum pass on one tile: g = dy·act'(value) rounded to bf16, parked in gp (which
// may be dy's memory: each element is read before it is written), p1 += Σ g, p2 += Σ g·(x − mean).
// As in the forward, the values come per row into v, g over the tile as one flat loop, and the
// sums per row (in row order, the buffered path's order) from the parked g. y (NULL: none)
// receives act(value) rounded to bf16, the forward's output (BNA_SET of forward_bf16), formed in
// the same loop as g so the two formulas share what they compute alike. GELU looks both up
// instead (kernels/cpu/activation.c), through w (rows·C floats).
CPU_INLINE void sums_bf16_body(int hw_fma, double *restrict p1, double *restrict p2, uint16_t *gp, const uint16_t *dy,
                               const uint16_t *restrict x, const float *restrict mean, const float *restrict af,
                               const float *restrict bf, int64_t rows, int64_t C, ocr_activation_t act,
                               float *restrict v, float *restrict w, uint16_t *restrict y) {
    const int64_t n = rows * C;
    value_bf16_rows(v, x, mean, af, bf, rows, C);
    if (act == OCR_ACT_GELU) {
        const OcrGeluBf16Table *tab = ocr_cpu_gelu_bf16_table(hw_fma);
        if (y) {
            ocr_cpu_table_lookup_f32(w, v, tab->value, n);
            for (int64_t i = 0; i < n; i++) BNA_SET(y[i], w[i]);
        }
        ocr_cpu_table_lookup_f32(v, v, tab->slope, n);
        for (int64_t i = 0; i < n; i++) gp[i] = ocr_f32_to_bf16(ocr_bf16_to_f32(dy[i]) * v[i]);
    } else if (y) {
#define BNA_YG_LOOP(f)                                                          \
    for (int64_t i = 0; i < n; i++) {                                           \
        const float g = ocr_bf16_to_f32(dy[i]);                                 \
        BNA_SET(y[i], f##_forward_one(v[i]));                                   \
        gp[i] = ocr_f32_to_bf16(f##_backward_one(g, v[i]));                     \
    }
        CPU_ACT_SWITCH(act, hw_fma, BNA_YG_LOOP, )
#undef BNA_YG_LOOP
    } else {
#define BNA_G_LOOP(f) \
    for (int64_t i = 0; i < n; i++) gp[i] = ocr_f32_to_bf16(f(ocr_bf16_to_f32(dy[i]), v[i]));
        CPU_ACT_SWITCH(act, hw_fma, BNA_G_LOOP, _backward_one)
#undef BNA_G_LOOP
    }
    for (int64_t r = 0; r < rows; r++) {
        const uint16_t *xr = x + r * C, *gr = gp + r * C;
        for (int64_t c = 0; c < C; c++) {
            const double g = (double)ocr_bf16_to_f32(gr[c]);
            p1[c] += g;
            p2[c] += g * ((double)ocr_bf16_to_f32(xr[c]) - (double)mean[c]);
        }
    }
}
CPU_VEC_CLONES_FMA(sums_bf16, (double *p1, double *p2, uint16_t *gp, const uint16_t *dy, const uint16_t *x,
                               const float *mean, const float *af, const float *bf, int64_t rows, int64_t C,
                               ocr_activation_t act, float *v, float *w, uint16_t *y),
                   (p1, p2, gp, dy, x, mean, af, bf, rows, C, act, v, w, y))

// Per-thread tile buffers (tr·C elements each; NULL where a pass does not need one).
typedef struct {
    float *x, *dy, *v, *g, *y;
    uint16_t *tmp;
} BnaTile;

typedef struct {
    float *x, *dy, *v, *g, *y;
    uint16_t *tmp;
    size_t per;  // elements per thread
} BnaTiles;

static BnaTiles bna_tiles(CpuScratch *s, int nthr, int64_t tr, int64_t C, int need_x, int need_dy, int need_v,
                          int need_g, int need_y, int need_tmp) {
    BnaTiles t = {0};
    t.per = (size_t)(tr * C);
    const size_t all = (size_t)nthr * t.per;
    if (need_x) t.x = ocr_cpu_scratch_floats(s, all);
    if (need_dy) t.dy = ocr_cpu_scratch_floats(s, all);
    if (need_v) t.v = ocr_cpu_scratch_floats(s, all);
    if (need_g) t.g = ocr_cpu_scratch_floats(s, all);
    if (need_y) t.y = ocr_cpu_scratch_floats(s, all);
    if (need_tmp) t.tmp = ocr_cpu_scratch_bytes(s, all * sizeof(uint16_t));
    return t;
}

static BnaTile bna_tile(const BnaTiles *t) {
    const size_t off = (size_t)omp_get_thread_num() * t->per;
    BnaTile b = {t->x ? t->x + off : NULL, t->dy ? t->dy + off : NULL, t->v ? t->v + off : NULL,
                 t->g ? t->g + off : NULL,  t->y ? t->y + off : NULL,   t->tmp ? t->tmp + off : NULL};
    return b;
}

// The normalise/activate pass over all M rows: out = act(value) with value = (x − mf)·af + bf
// rounded to mid (accumulate: out += act(value) rounded into out's dtype). The forward and
// batchnorm2d_act_apply both run it, so the apply rebuilds the forward's output with the very
// same loops at every vector level.
static void bna_map(OcrTensor *out, const OcrTensor *inp, const BnaCoef *kp, int64_t M, int64_t C,
                    ocr_activation_t act, int accumulate, ocr_dtype_t mid, CpuScratch *sp) {
    const BnaCoef k = *kp;
    const int64_t tr = cpu_tile_rows(C), ntiles = (M + tr - 1) / tr;
    const int par = M * C >= BNA_PAR_MIN;
    const int nthr = par ? omp_get_max_threads() : 1;
    // Per thread: the widened input, the values (read by the activation into y, not in place,
    // so that its loop needs no overlap check), y (unless out is f32) and the rounding buffer.
    // bf16 in and out: the pass converts in registers and needs no tile buffers.
    const int fwd_in_registers = inp->dtype == OCR_BF16 && out->dtype == OCR_BF16;
    const int buffered = !fwd_in_registers;
    // (The in-register pass keeps only its values tile, v.)
    const BnaTiles tb = bna_tiles(sp, nthr, tr, C, buffered && inp->dtype != OCR_F32, 0, 1, 0,
                                  buffered && out->dtype != OCR_F32, buffered && mid != OCR_F32);
#pragma omp parallel for schedule(static) if (par)
    for (int64_t t = 0; t < ntiles; t++) {
        const int64_t r0 = t * tr, rows = (r0 + tr <= M ? tr : M - r0);
        const BnaTile b = bna_tile(&tb);
        if (fwd_in_registers) {
            const size_t off = (size_t)(r0 * C);
            forward_bf16((uint16_t *)out->data + off, (const uint16_t *)inp->data + off, k.mf, k.af, k.bf, rows, C,
                         act, accumulate, b.v);
            continue;
        }
        const float *x = ocr_cpu_rows_in(inp, C, r0, rows, b.x);
        if (act == OCR_ACT_NONE && !accumulate) {
            // Plain batch norm: the value is the output, computed straight into it (no copy).
            float *y = ocr_cpu_rows_dst(out, C, r0, b.y);
            bna_value_tile(y, x, rows, C, &k, mid, b.tmp);
            ocr_cpu_rows_out(out, C, r0, rows, y);
            continue;
        }
        bna_value_tile(b.v, x, rows, C, &k, mid, b.tmp);
        if (accumulate) {
            float *y = (float *)ocr_cpu_rows_in(out, C, r0, rows, b.y);  // out's own memory when it is f32
            ocr_cpu_act_forward_tile(b.v, b.v, rows * C, act);
            ocr_cpu_round_tile(b.v, rows * C, mid, b.tmp);
            ocr_cpu_add_tile(y, y, b.v, rows * C);
            ocr_cpu_rows_out(out, C, r0, rows, y);
            continue;
        }
        float *y = ocr_cpu_rows_dst(out, C, r0, b.y);
        ocr_cpu_act_forward_tile(y, b.v, rows * C, act);
        ocr_cpu_rows_out(out, C, r0, rows, y);
    }
}

// The checks shared by the forward and the apply op; returns C.
static int64_t bna_check_io(const OcrTensor *out, const OcrTensor *inp, ocr_activation_t act, const char *op) {
    CPU_ASSERT_FLOAT(out);
    CPU_ASSERT_FLOAT(inp);
    OCR_ASSERT(ocr_tensor_same_shape(out, inp), "%s: out and inp shapes differ", op);
    OCR_ASSERT((unsigned)act < OCR_ACT_COUNT, "unknown activation %d", (int)act);
    const int64_t C = ocr_tensor_dim(inp, -1);
    OCR_ASSERT(C > 0, "%s: zero channels", op);
    return C;
}

// bna_map into out (inp: ocr_cpu_tiled_in's operand). Under Global.cpu_exact_numerics the
// reference path computes into a whole fp32 copy of out and rounds it once (the same bits; the
// tiles then run on the fp32 copies).
static void bna_map_into(OcrTensor *out, const OcrTensor *inp, const BnaCoef *k, int64_t M, int64_t C,
                         ocr_activation_t act, int accumulate, CpuScratch *s) {
    const ocr_dtype_t mid = out->dtype;
    OcrTensor yv;
    float *y_whole;
    OcrTensor *o = ocr_cpu_tiled_out(s, out, &yv, accumulate, &y_whole);
    bna_map(o, inp, k, M, C, act, accumulate, mid, s);
    if (y_whole) ocr_cpu_f32_store(out, y_whole);
}

// A (C,) statistics output t = v, in t's dtype.
static void bna_store_vec(CpuScratch *s, OcrTensor *t, const float *v, int64_t C) {
    float *d = ocr_cpu_f32_out(s, t, 0);
    memcpy(d, v, (size_t)C * sizeof(float));
    ocr_cpu_f32_store(t, d);
}

// The forward of both entry points below: accumulate 0 writes act(value) into out, 1 adds it
// (rounded into out's dtype first, as a tensor of that dtype would hold it) to out's elements.
static void bna_forward(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd, OcrTensor *save_scale,
                        OcrTensor *running_mean, OcrTensor *running_var, const OcrTensor *inp, const OcrTensor *gamma,
                        const OcrTensor *beta, ocr_activation_t act, float momentum, float eps, int training,
                        const OcrBnSync *sync, int accumulate) {
    const int64_t C = bna_check_io(out, inp, act, "batchnorm_act"), M = ocr_tensor_numel(inp) / C;
    if (gamma) bna_check_vec(gamma, C, "gamma");
    if (beta) bna_check_vec(beta, C, "beta");
    if (save_mean) bna_check_vec(save_mean, C, "save_mean");
    if (save_rstd) bna_check_vec(save_rstd, C, "save_rstd");
    if (save_scale) bna_check_vec(save_scale, C, "save_scale");
    if (running_mean) bna_check_vec(running_mean, C, "running_mean");
    if (running_var) bna_check_vec(running_var, C, "running_var");

    CpuScratch s = {0};
    OcrTensor xv;
    inp = ocr_cpu_tiled_in(&s, inp, &xv);
    const BnaCoef k = bna_coef(&s, inp, M, C, running_mean, running_var, gamma, beta, eps, training, sync);
    bna_map_into(out, inp, &k, M, C, act, accumulate, &s);
    if (save_mean) bna_store_vec(&s, save_mean, k.mf, C);
    if (save_rstd) bna_store_vec(&s, save_rstd, k.rstd, C);
    if (save_scale) bna_store_vec(&s, save_scale, k.af, C);
    if (training && running_mean) {
        float *rm = ocr_cpu_f32_out(&s, running_mean, 1);
        for (int64_t c = 0; c < C; c++) rm[c] = (float)(momentum * (double)rm[c] + (1.0 - momentum) * k.mean[c]);
        ocr_cpu_f32_store(running_mean, rm);
    }
    if (training && running_var) {
        // Paddle keeps the biased batch variance in the running estimate (PyTorch: unbiased).
        float *rv = ocr_cpu_f32_out(&s, running_var, 1);
        for (int64_t c = 0; c < C; c++) rv[c] = (float)(momentum * (double)rv[c] + (1.0 - momentum) * k.var[c]);
        ocr_cpu_f32_store(running_var, rv);
    }
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_batchnorm2d_act_forward(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd,
                                     OcrTensor *save_scale, OcrTensor *running_mean, OcrTensor *running_var,
                                     const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta,
                                     ocr_activation_t act, float momentum, float eps, int training,
                                     const OcrBnSync *sync) {
    bna_forward(out, save_mean, save_rstd, save_scale, running_mean, running_var, inp, gamma, beta, act, momentum,
                eps, training, sync, 0);
}

void ocr_cpu_batchnorm2d_forward_accumulate(OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd,
                                            OcrTensor *running_mean, OcrTensor *running_var, const OcrTensor *inp,
                                            const OcrTensor *gamma, const OcrTensor *beta, float momentum, float eps,
                                            int training) {
    bna_forward(out, save_mean, save_rstd, NULL, running_mean, running_var, inp, gamma, beta, OCR_ACT_NONE, momentum,
                eps, training, NULL, 1);
}

void ocr_cpu_batchnorm2d_act_apply(OcrTensor *out, const OcrTensor *inp, const OcrTensor *save_mean,
                                   const OcrTensor *save_scale, const OcrTensor *beta, ocr_activation_t act) {
    const int64_t C = bna_check_io(out, inp, act, "batchnorm_act_apply"), M = ocr_tensor_numel(inp) / C;
    bna_check_vec(save_mean, C, "save_mean");
    bna_check_vec(save_scale, C, "save_scale");
    if (beta) bna_check_vec(beta, C, "beta");
    // The forward's coefficients are these f32 values themselves (it stored mf and af as they were).
    OCR_ASSERT(save_mean->dtype == OCR_F32 && save_scale->dtype == OCR_F32,
               "batchnorm_act_apply: save_mean and save_scale must be f32");

    CpuScratch s = {0};
    OcrTensor xv;
    inp = ocr_cpu_tiled_in(&s, inp, &xv);  // the forward's path, so the bits stay the forward's
    BnaCoef k = {0};
    float *bf = ocr_cpu_scratch_floats(&s, (size_t)C);
    const float *be = beta ? ocr_cpu_f32_in(&s, beta) : NULL;
    for (int64_t c = 0; c < C; c++) bf[c] = be ? be[c] : 0.0f;
    k.mf = ocr_cpu_f32_in(&s, save_mean);
    k.af = ocr_cpu_f32_in(&s, save_scale);
    k.bf = bf;
    bna_map_into(out, inp, &k, M, C, act, 0, &s);
    ocr_cpu_scratch_free(&s);
}

// g (rows, C) = dout · act'(value) rounded to mid for the widened tiles x, dy, into g; returns g,
// or dy itself for OCR_ACT_NONE. y (NULL: none; act != NONE) receives act(value) in fp32 too, the
// forward's output before its rounding (bna_map's), from the same loop as g.
static inline const float *bna_grad_tile(const BnaTile *b, float *g, float *y, const float *x, const float *dy,
                                         int64_t rows, int64_t C, const BnaCoef *k, ocr_activation_t act,
                                         ocr_dtype_t mid) {
    if (act == OCR_ACT_NONE) return dy;
    bna_value_tile(b->v, x, rows, C, k, mid, b->tmp);
    if (y)
        ocr_cpu_act_forward_backward_tile(y, g, dy, b->v, rows * C, act);
    else
        ocr_cpu_act_backward_tile(g, dy, b->v, rows * C, act);
    ocr_cpu_round_tile(g, rows * C, mid, b->tmp);
    return g;
}

// The backward of both entry points below. out (NULL: none) receives act(value), the forward's
// output (batchnorm2d_act_apply's bits; mid is out's dtype then), formed in the sum pass next to g.
static void bna_backward(OcrTensor *out, OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                         const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta,
                         const OcrTensor *save_mean, const OcrTensor *save_rstd, const OcrTensor *save_scale,
                         ocr_activation_t act, ocr_dtype_t mid, int training, const OcrBnSync *sync) {
    CPU_ASSERT_FLOAT(dout);
    CPU_ASSERT_FLOAT(inp);
    OCR_ASSERT(ocr_tensor_same_shape(dout, inp), "batchnorm_act: dout and inp shapes differ");
    OCR_ASSERT((unsigned)act < OCR_ACT_COUNT, "unknown activation %d", (int)act);
    OCR_ASSERT(ocr_dtype_is_float(mid), "batchnorm_act: mid must be a float dtype");
    if (dinp) {
        CPU_ASSERT_FLOAT(dinp);
        OCR_ASSERT(ocr_tensor_same_shape(dinp, inp), "batchnorm_act: dinp and inp shapes differ");
    }
    const int64_t C = ocr_tensor_dim(inp, -1);
    OCR_ASSERT(C > 0, "batchnorm_act: zero channels");
    const int64_t M = ocr_tensor_numel(inp) / C;
    if (gamma) bna_check_vec(gamma, C, "gamma");
    if (beta) bna_check_vec(beta, C, "beta");
    if (dgamma) bna_check_vec(dgamma, C, "dgamma");
    if (dbeta) bna_check_vec(dbeta, C, "dbeta");
    bna_check_vec(save_mean, C, "save_mean");
    bna_check_vec(save_rstd, C, "save_rstd");
    if (act != OCR_ACT_NONE) {
        OCR_ASSERT(save_scale, "batchnorm_act: the backward of an activation needs save_scale");
        bna_check_vec(save_scale, C, "save_scale");
        OCR_ASSERT(save_mean->dtype == OCR_F32 && save_scale->dtype == OCR_F32,
                   "batchnorm_act: save_mean and save_scale must be f32 (the value is rebuilt from them)");
    }

    const int need_sums = dgamma || dbeta || (training && dinp);
    // The output is formed in the sum pass; without one (or without an activation, where it is
    // the value alone) the apply op's own pass forms it first.
    const int out_in_sums = out && need_sums && act != OCR_ACT_NONE && M > 0;
    if (out && !out_in_sums) ocr_cpu_batchnorm2d_act_apply(out, inp, save_mean, save_scale, beta, act);
    if (out_in_sums) {
        CPU_ASSERT_FLOAT(out);
        OCR_ASSERT(ocr_tensor_same_shape(out, inp), "batchnorm_act: out and inp shapes differ");
        OCR_ASSERT(out->dtype == mid, "batchnorm_act: the rebuilt output's dtype is mid");
    }
    if (!need_sums && !dinp) return;

    CpuScratch s = {0};
    // Global.cpu_exact_numerics: the whole-tensor reference path (as in the forward).
    OcrTensor xv, dyv, dxv, yv;
    OcrTensor *dinp_t = dinp, *out_t = out_in_sums ? out : NULL;
    float *dx_whole = NULL, *y_whole = NULL;
    if (ocr_cpu_exact_numerics()) {
        if (inp->dtype != OCR_F32) xv = ocr_cpu_f32_view(inp, ocr_cpu_f32_in(&s, inp)), inp = &xv;
        if (dout->dtype != OCR_F32) dyv = ocr_cpu_f32_view(dout, ocr_cpu_f32_in(&s, dout)), dout = &dyv;
        if (dinp && dinp->dtype != OCR_F32)
            dx_whole = ocr_cpu_f32_out(&s, dinp, 0), dxv = ocr_cpu_f32_view(dinp, dx_whole), dinp = &dxv;
        if (out_t && out_t->dtype != OCR_F32)
            y_whole = ocr_cpu_f32_out(&s, out_t, 0), yv = ocr_cpu_f32_view(out_t, y_whole), out_t = &yv;
    }
    const float *mean = ocr_cpu_f32_in(&s, save_mean);
    const float *rstd = ocr_cpu_f32_in(&s, save_rstd);
    const float *g = gamma ? ocr_cpu_f32_in(&s, gamma) : NULL;
    // The value's coefficients, exactly the forward's: mf = save_mean, af = save_scale, bf = beta.
    BnaCoef k = {0};
    if (act != OCR_ACT_NONE) {
        float *bf = ocr_cpu_scratch_floats(&s, (size_t)C);
        const float *be = beta ? ocr_cpu_f32_in(&s, beta) : NULL;
        for (int64_t c = 0; c < C; c++) bf[c] = be ? be[c] : 0.0f;
        k.mf = mean;
        k.af = ocr_cpu_f32_in(&s, save_scale);
        k.bf = bf;
    }

    const int64_t tr = cpu_tile_rows(C);
    const int par = M * C >= BNA_PAR_MIN;
    const int nthr = par ? omp_get_max_threads() : 1;
    const int has_act = act != OCR_ACT_NONE;
    // With an activation and dinp wanted, the sum pass parks g in dinp's memory (when dinp's
    // dtype holds the mid-rounded g exactly), where the dx pass reads it back and overwrites it
    // with dx (the one map the op writes anyway), so value and act' are evaluated once per element.
    const int park = has_act && dinp && need_sums && (dinp->dtype == OCR_F32 || dinp->dtype == mid);
    const BnaTiles tb = bna_tiles(&s, nthr, tr, C, inp->dtype != OCR_F32, dout->dtype != OCR_F32, has_act,
                                  has_act, dinp && dinp->dtype != OCR_F32, has_act && mid != OCR_F32);
    // The rebuilt output's fp32 tile per thread (when out is not f32 and the pass is buffered).
    float *out_tiles = out_t && out_t->dtype != OCR_F32 ? ocr_cpu_scratch_floats(&s, (size_t)nthr * tb.per) : NULL;
    int g_parked = 0;

    // Per channel: sdy = Σ g, sdx = Σ g · (x − mean), in double over batchnorm.c's chunks.
    double *sdy = ocr_cpu_scratch_bytes(&s, (size_t)C * sizeof(double));
    double *sdx = ocr_cpu_scratch_bytes(&s, (size_t)C * sizeof(double));
    if (need_sums) {
        const int64_t nch = M > 0 ? ocr_cpu_bn_chunks(M) : 0;
        double *part = ocr_cpu_scratch_bytes(&s, (size_t)(2 * nch * C + 1) * sizeof(double));
        // g parked in a bf16 dinp from bf16 maps: the pass runs in registers (sums_bf16).
        const int sums_in_registers = park && has_act && mid == OCR_BF16 && dinp->dtype == OCR_BF16 &&
                                      inp->dtype == OCR_BF16 && dout->dtype == OCR_BF16 &&
                                      (!out_t || out_t->dtype == OCR_BF16);
        // No activation: g is dout itself, summed straight from the bf16 maps.
        const int plain_sums_in_registers = !has_act && inp->dtype == OCR_BF16 && dout->dtype == OCR_BF16;
#pragma omp parallel for schedule(static) if (par)
        for (int64_t ch = 0; ch < nch; ch++) {
            const BnaTile b = bna_tile(&tb);
            double *p1 = part + 2 * ch * C, *p2 = p1 + C;
            for (int64_t c = 0; c < C; c++) p1[c] = p2[c] = 0.0;
            const int64_t r0 = ch * M / nch, r1 = (ch + 1) * M / nch;
            for (int64_t t0 = r0; t0 < r1; t0 += tr) {
                const int64_t rows = t0 + tr <= r1 ? tr : r1 - t0;
                if (sums_in_registers) {
                    const size_t off = (size_t)(t0 * C);
                    sums_bf16(p1, p2, (uint16_t *)dinp->data + off, (const uint16_t *)dout->data + off,
                              (const uint16_t *)inp->data + off, mean, k.af, k.bf, rows, C, act, b.v, b.g,
                              out_t ? (uint16_t *)out_t->data + off : NULL);
                    continue;
                }
                if (plain_sums_in_registers) {
                    const size_t off = (size_t)(t0 * C);
                    ocr_cpu_bn_sums_tile_bf16(p1, p2, (const uint16_t *)inp->data + off,
                                              (const uint16_t *)dout->data + off, mean, rows, C);
                    continue;
                }
                const float *x = ocr_cpu_rows_in(inp, C, t0, rows, b.x);
                // dinp may be dout's memory (in-place gradients): g overwrites a tile's rows only
                // after they were read (the activation's backward allows g == dy).
                const float *dy = ocr_cpu_rows_in(dout, C, t0, rows, b.dy);
                float *gdst = park ? ocr_cpu_rows_dst(dinp, C, t0, b.g) : b.g;
                float *y = NULL;
                if (out_t) {
                    float *ybuf = out_tiles ? out_tiles + (size_t)omp_get_thread_num() * tb.per : NULL;
                    y = ocr_cpu_rows_dst(out_t, C, t0, ybuf);
                }
                const float *gt = bna_grad_tile(&b, gdst, y, x, dy, rows, C, &k, act, mid);
                ocr_cpu_bn_sums_tile(p1, p2, x, gt, mean, rows, C);
                if (park) ocr_cpu_rows_out(dinp, C, t0, rows, gt);
                if (y) ocr_cpu_rows_out(out_t, C, t0, rows, y);
            }
        }
        cpu_bn_reduce_chunks(sdy, sdx, part, nch, C);
        g_parked = park;
    }

    ocr_cpu_bn_param_grads(&s, dgamma, dbeta, sdy, sdx, rstd, C);

    if (dinp) {
        // dx = a·g + b·(x − mean) + k, batchnorm.c's coefficients.
        float *af, *bf, *kf;
        const double *wdy = sdy, *wdx = sdx;
        int64_t wM = M;
        if (sync && training) {
            // The coefficients take the world's sums and count (dgamma/dbeta above kept ours).
            double *v = ocr_cpu_scratch_bytes(&s, (size_t)(2 * C + 1) * sizeof(double));
            v[0] = (double)M;
            memcpy(v + 1, sdy, (size_t)C * sizeof(double));
            memcpy(v + 1 + C, sdx, (size_t)C * sizeof(double));
            bna_world_sum(sync, v, 2 * C + 1, "the gradient sums");
            wM = (int64_t)v[0];
            wdy = v + 1, wdx = v + 1 + C;
        }
        ocr_cpu_bn_dx_coefs(&s, &af, &bf, &kf, g, rstd, wdy, wdx, C, wM, training);
        const int64_t ntiles = (M + tr - 1) / tr;
        // g ready in memory (parked in dinp, or dout itself without an activation) and every map
        // bf16: the conversions happen in registers (the same bits, fewer passes over the tile).
        const OcrTensor *g_map = g_parked ? dinp : act == OCR_ACT_NONE ? dout : NULL;
        const int in_registers = g_map && g_map->dtype == OCR_BF16 && inp->dtype == OCR_BF16 &&
                                 dinp->dtype == OCR_BF16;
#pragma omp parallel for schedule(static) if (par)
        for (int64_t t = 0; t < ntiles; t++) {
            const BnaTile b = bna_tile(&tb);
            const int64_t r0 = t * tr, rows = r0 + tr <= M ? tr : M - r0;
            if (in_registers) {
                const size_t off = (size_t)(r0 * C);
                ocr_cpu_bn_dx_tile_bf16((uint16_t *)dinp->data + off, (const uint16_t *)g_map->data + off,
                                        (const uint16_t *)inp->data + off, mean, af, bf, kf, rows, C);
                continue;
            }
            const float *x = ocr_cpu_rows_in(inp, C, r0, rows, b.x);
            // g parked by the sum pass (in dinp's rows), or formed here.
            const float *gt;
            if (g_parked) {
                gt = ocr_cpu_rows_in(dinp, C, r0, rows, b.g);
            } else {
                const float *dy = ocr_cpu_rows_in(dout, C, r0, rows, b.dy);
                gt = bna_grad_tile(&b, b.g, NULL, x, dy, rows, C, &k, act, mid);
            }
            float *dx = ocr_cpu_rows_dst(dinp, C, r0, b.y);
            ocr_cpu_bn_dx_tile(dx, gt, x, mean, af, bf, kf, rows, C);
            ocr_cpu_rows_out(dinp, C, r0, rows, dx);
        }
        if (dx_whole) ocr_cpu_f32_store(dinp_t, dx_whole);
    }
    if (y_whole) ocr_cpu_f32_store(out, y_whole);
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_batchnorm2d_act_backward(OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
                                      const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta,
                                      const OcrTensor *save_mean, const OcrTensor *save_rstd,
                                      const OcrTensor *save_scale, ocr_activation_t act, ocr_dtype_t mid, int training,
                                      const OcrBnSync *sync) {
    bna_backward(NULL, dinp, dgamma, dbeta, dout, inp, gamma, beta, save_mean, save_rstd, save_scale, act, mid,
                 training, sync);
}

void ocr_cpu_batchnorm2d_act_backward_rebuild(OcrTensor *out, OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta,
                                              const OcrTensor *dout, const OcrTensor *inp, const OcrTensor *gamma,
                                              const OcrTensor *beta, const OcrTensor *save_mean,
                                              const OcrTensor *save_rstd, const OcrTensor *save_scale,
                                              ocr_activation_t act, int training, const OcrBnSync *sync) {
    OCR_ASSERT(out, "batchnorm_act_backward_rebuild: no output to rebuild");
    bna_backward(out, dinp, dgamma, dbeta, dout, inp, gamma, beta, save_mean, save_rstd, save_scale, act, out->dtype,
                 training, sync);
}

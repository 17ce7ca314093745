// The memory-bound CPU kernels that read and write f16/bf16 maps in their own dtype, a tile of
// rows at a time (batch norm, BN + activation, activations, add / accumulate / scale / SE channel
// gating, depthwise convolution: forward, backward-data, backward-weights), against the emulated reference (Global.cpu_exact_numerics:
// every map widened to an fp32 copy, fp32 loops, one rounding pass over the output), at every
// vector level this CPU has (OCR_CPU_VEC's sse2 / avx2 / avx512, selected through the test
// hook, so the AVX2 and baseline paths run on an AVX-512 machine too) and with the matching
// bulk-conversion paths.
//
// The bound is zero: widening f16/bf16 to fp32 is exact, both paths run the same fp32
// operations in the same order on the same values (same row chunks, same thread ranges), and
// each output element is rounded once by the same round-to-nearest-even conversion. So every
// output (maps, statistics, running estimates, parameter gradients) must match bit for bit.
// The SE gating on bf16 maps (converted in registers) is also checked run against run across the
// levels and at 1 and 2 threads, on inputs with NaNs, infinities, subnormals and rounding ties.
// A further test checks that the vector levels agree with each other in f32 (ISO C compiles
// without FMA contraction, so BN and the activations are the same at all three; the depthwise
// primitive uses FMA at AVX2 and AVX-512, one per lane and term, so those two agree).
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "kernels/cpu/isa.h"
#include "kernels/ops.h"
#include "tests/common/test_util.h"
#include "tests/kernels/tiles_check.h"

// Hooks (not in public headers): kernels/cpu/cpu_common.c, core/half.c.
int ocr_cpu_vec_select(const char *name);
int ocr_half_select_f16_path(const char *name);
int ocr_half_select_bf16_path(const char *name);
void ocr_conv2d_depthwise_set_block_floats(int64_t floats);

static const char *const LEVELS[] = {"sse2", "avx2", "avx512"};
#define NLEVELS 3

// Selects vector level li and the conversion paths of that width; 0 (and a SKIP line) when the
// CPU lacks the level.
static int select_level(int li) {
    if (!ocr_cpu_vec_select(LEVELS[li])) {
        printf("SKIP: this CPU has no %s path\n", LEVELS[li]);
        return 0;
    }
    // The bulk converters at a matching width (each falls back to the best one it has).
    if (li == 0) {
        ocr_half_select_f16_path("scalar");
        ocr_half_select_bf16_path("scalar");
    } else {
        if (!ocr_half_select_f16_path("f16c")) ocr_half_select_f16_path(NULL);
        if (li == 1 || !ocr_half_select_bf16_path("avx512bf16")) ocr_half_select_bf16_path("avx2");
    }
    return 1;
}

static void restore_level(void) {
    ocr_cpu_vec_select(NULL);
    ocr_half_select_f16_path(NULL);
    ocr_half_select_bf16_path(NULL);
}

static uint64_t seed_counter = 7000;

// Values uniform in [lo, hi) per channel offset, so BN's values cover every activation piece.
static OcrTensor rand_tensor(ocr_dtype_t dt, int ndim, const int64_t *shape, float lo, float hi) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    float *v = malloc(sizeof(float) * (size_t)(n + 1));
    ocr_test_fill_uniform(v, n, seed_counter++, lo, hi);
    const int64_t C = shape[ndim - 1];
    for (int64_t i = 0; i < n; i++) v[i] += 0.25f * (float)(i % C % 7) - 0.5f;
    OcrTensor t = ocr_test_tensor(dt, ndim, shape, v);
    free(v);
    return t;
}

// ---- batch norm + activation -----------------------------------------------------------------
typedef struct {
    OcrTensor x, gamma, beta, out, mean, rstd, scale, rmean, rvar;  // forward
    OcrTensor dout, dinp, dgamma, dbeta;                            // backward
    OcrTensor rebuilt;                                              // rebuild: the output again
    ocr_activation_t act;
    ocr_dtype_t mid;
    int training, fused, rebuild;
} BnCase;

static void run_bn_forward(void *vc) {
    BnCase *c = vc;
    if (c->fused)
        ocr_batchnorm2d_act_forward(&c->out, &c->mean, &c->rstd, &c->scale, &c->rmean, &c->rvar, &c->x, &c->gamma,
                                    &c->beta, c->act, 0.9f, 1e-5f, c->training);
    else
        ocr_batchnorm2d_forward(&c->out, &c->mean, &c->rstd, &c->rmean, &c->rvar, &c->x, &c->gamma, &c->beta, 0.9f,
                                1e-5f, c->training);
}

static void run_bn_backward(void *vc) {
    BnCase *c = vc;
    if (c->rebuild)
        ocr_batchnorm2d_act_backward_rebuild(&c->rebuilt, &c->dinp, &c->dgamma, &c->dbeta, &c->dout, &c->x, &c->gamma,
                                             &c->beta, &c->mean, &c->rstd, &c->scale, c->act, c->training, NULL);
    else if (c->fused)
        ocr_batchnorm2d_act_backward(&c->dinp, &c->dgamma, &c->dbeta, &c->dout, &c->x, &c->gamma, &c->beta, &c->mean,
                                     &c->rstd, &c->scale, c->act, c->mid, c->training);
    else
        ocr_batchnorm2d_backward(&c->dinp, &c->dgamma, &c->dbeta, &c->dout, &c->x, &c->gamma, &c->mean, &c->rstd,
                                 c->training);
}

// M = N·H·W rows of C channels; C = 37 leaves a tail at every vector width, and M·C is above the
// kernels' parallel threshold, so two threads split the chunks and tiles.
// rebuild: the backward is batchnorm2d_act_backward_rebuild (mid is then the output's dtype), whose
// rebuilt output is compared too.
// Channels of the BN cases: 37 leaves a tail at every vector width; 24 (the v6 tiny stem) is run
// in groups of two rows by the in-register loops (kernels/cpu/rowwise.h, cpu_group_rows).
static int64_t bn_channels = 37;

static void bn_case_ex(ocr_dtype_t dt, ocr_dtype_t dinp_dt, ocr_dtype_t mid, ocr_activation_t act, int fused,
                       int training, int rebuild, const char *what) {
    const int64_t N = 2, H = 6, W = 97, C = bn_channels;
    BnCase c = {.act = act, .mid = mid, .training = training, .fused = fused, .rebuild = rebuild};
    c.rebuilt = ocr_test_tensor(mid, 4, OCR_SHAPE(N, H, W, C), NULL);
    c.x = rand_tensor(dt, 4, OCR_SHAPE(N, H, W, C), -2.0f, 2.0f);
    c.gamma = rand_tensor(OCR_F32, 1, OCR_SHAPE(C), 0.5f, 2.0f);
    c.beta = rand_tensor(OCR_F32, 1, OCR_SHAPE(C), -1.0f, 1.0f);
    c.out = ocr_test_tensor(mid, 4, OCR_SHAPE(N, H, W, C), NULL);
    c.mean = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), NULL);
    c.rstd = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), NULL);
    c.scale = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(C), NULL);
    c.rmean = rand_tensor(OCR_F32, 1, OCR_SHAPE(C), -0.5f, 0.5f);
    c.rvar = rand_tensor(OCR_F32, 1, OCR_SHAPE(C), 1.0f, 2.0f);
    c.dout = rand_tensor(dt, 4, OCR_SHAPE(N, H, W, C), -1.0f, 1.0f);
    c.dinp = ocr_test_tensor(dinp_dt, 4, OCR_SHAPE(N, H, W, C), NULL);
    c.dgamma = rand_tensor(OCR_F32, 1, OCR_SHAPE(C), -0.1f, 0.1f);
    c.dbeta = rand_tensor(OCR_F32, 1, OCR_SHAPE(C), -0.1f, 0.1f);

    Outs fo = {0};
    outs_add(&fo, &c.out, "out");
    outs_add(&fo, &c.mean, "save_mean");
    outs_add(&fo, &c.rstd, "save_rstd");
    if (fused) outs_add(&fo, &c.scale, "save_scale");
    outs_add(&fo, &c.rmean, "running_mean");
    outs_add(&fo, &c.rvar, "running_var");
    char name[160];
    snprintf(name, sizeof name, "%s forward", what);
    native_vs_reference(&fo, run_bn_forward, &c, name);
    // The backward runs on the forward's saved statistics (its last run, the native one).
    Outs bo = {0};
    outs_add(&bo, &c.dinp, "dinp");
    outs_add(&bo, &c.dgamma, "dgamma");
    outs_add(&bo, &c.dbeta, "dbeta");
    if (rebuild) outs_add(&bo, &c.rebuilt, "rebuilt out");
    snprintf(name, sizeof name, "%s backward", what);
    native_vs_reference(&bo, run_bn_backward, &c, name);
    outs_free(&fo);
    outs_free(&bo);
    OcrTensor *all[] = {&c.x, &c.gamma, &c.beta, &c.out, &c.mean, &c.rstd, &c.scale, &c.rmean, &c.rvar,
                        &c.dout, &c.dinp, &c.dgamma, &c.dbeta, &c.rebuilt};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ocr_tensor_free(all[i]);
}

static void bn_case(ocr_dtype_t dt, ocr_dtype_t dinp_dt, ocr_dtype_t mid, ocr_activation_t act, int fused,
                    int training, const char *what) {
    bn_case_ex(dt, dinp_dt, mid, act, fused, training, 0, what);
}

static const ocr_dtype_t LP[] = {OCR_BF16, OCR_F16};

// _i = level · 2 + dtype index.
START_TEST(test_bn_native_vs_reference) {
    const int li = _i / 2;
    const ocr_dtype_t dt = LP[_i % 2];
    if (!select_level(li)) return;
    omp_set_num_threads(2);
    char what[128];
    // Every activation: with all maps bf16 the passes run bn_act.c's in-register loops.
    const ocr_activation_t acts[] = {OCR_ACT_HARDSWISH, OCR_ACT_SWISH, OCR_ACT_GELU, OCR_ACT_RELU, OCR_ACT_HARDSIGMOID};
    for (int a = 0; a < 5; a++) {
        snprintf(what, sizeof what, "%s %s bn_act %s, g parked in dinp", LEVELS[li], ocr_dtype_name(dt),
                 ocr_activation_name(acts[a]));
        bn_case(dt, dt, dt, acts[a], 1, 1, what);
    }
    for (int a = 0; a < 5; a++) {
        snprintf(what, sizeof what, "%s %s bn_act %s, output rebuilt in the backward", LEVELS[li],
                 ocr_dtype_name(dt), ocr_activation_name(acts[a]));
        bn_case_ex(dt, dt, dt, acts[a], 1, 1, 1, what);
    }
    snprintf(what, sizeof what, "%s %s bn_act GELU, output rebuilt, dinp f32", LEVELS[li], ocr_dtype_name(dt));
    bn_case_ex(dt, OCR_F32, dt, OCR_ACT_GELU, 1, 1, 1, what);
    snprintf(what, sizeof what, "%s %s bn_act, dinp f32", LEVELS[li], ocr_dtype_name(dt));
    bn_case(dt, OCR_F32, dt, OCR_ACT_HARDSWISH, 1, 1, what);
    snprintf(what, sizeof what, "%s %s bn_act, mid f32 (g formed twice)", LEVELS[li], ocr_dtype_name(dt));
    bn_case(dt, dt, OCR_F32, OCR_ACT_HARDSWISH, 1, 1, what);
    snprintf(what, sizeof what, "%s %s bn_act, frozen statistics", LEVELS[li], ocr_dtype_name(dt));
    bn_case(dt, dt, dt, OCR_ACT_HARDSWISH, 1, 0, what);
    snprintf(what, sizeof what, "%s %s batchnorm", LEVELS[li], ocr_dtype_name(dt));
    bn_case(dt, dt, dt, OCR_ACT_NONE, 0, 1, what);
    bn_channels = 24;
    snprintf(what, sizeof what, "%s %s batchnorm, C = 24", LEVELS[li], ocr_dtype_name(dt));
    bn_case(dt, dt, dt, OCR_ACT_NONE, 0, 1, what);
    snprintf(what, sizeof what, "%s %s bn_act GELU, C = 24, output rebuilt", LEVELS[li], ocr_dtype_name(dt));
    bn_case_ex(dt, dt, dt, OCR_ACT_GELU, 1, 1, 1, what);
    bn_channels = 37;
    restore_level();
}
END_TEST

// ---- activations -----------------------------------------------------------------------------
typedef struct {
    OcrTensor x, y, dy, dx;
    ocr_activation_t act;
} ActCase;

static void run_act(void *vc) {
    ActCase *c = vc;
    ocr_activation_forward(&c->y, &c->x, c->act);
    ocr_activation_backward(&c->dx, &c->dy, &c->x, c->act);
}

START_TEST(test_act_native_vs_reference) {
    const int li = _i / 2;
    const ocr_dtype_t dt = LP[_i % 2];
    if (!select_level(li)) return;
    omp_set_num_threads(2);
    for (int a = 1; a < OCR_ACT_COUNT; a++) {
        ActCase c = {.act = (ocr_activation_t)a};
        const int64_t *shape = OCR_SHAPE(3, 101, 211);
        c.x = rand_tensor(dt, 3, shape, -5.0f, 5.0f);
        c.dy = rand_tensor(dt, 3, shape, -1.0f, 1.0f);
        c.y = ocr_test_tensor(dt, 3, shape, NULL);
        c.dx = ocr_test_tensor(dt, 3, shape, NULL);
        Outs o = {0};
        outs_add(&o, &c.y, "out");
        outs_add(&o, &c.dx, "dinp");
        char what[96];
        snprintf(what, sizeof what, "%s %s %s", LEVELS[li], ocr_dtype_name(dt), ocr_activation_name(c.act));
        native_vs_reference(&o, run_act, &c, what);
        outs_free(&o);
        ocr_tensor_free(&c.x), ocr_tensor_free(&c.dy), ocr_tensor_free(&c.y), ocr_tensor_free(&c.dx);
    }
    restore_level();
}
END_TEST

// ---- elementwise: add, accumulate, scale, SE channel gating -----------------------------------
typedef struct {
    OcrTensor a, b, y, acc, sy, x, sc, cy, dy, dx, dsc;
} EwCase;

static void run_ew(void *vc) {
    EwCase *c = vc;
    ocr_add_forward(&c->y, &c->a, &c->b);
    ocr_accumulate(&c->acc, &c->a);
    ocr_scale_forward(&c->sy, &c->a, 0.3f);
    ocr_channel_scale_forward(&c->cy, &c->x, &c->sc);
    ocr_channel_scale_backward(&c->dx, &c->dsc, &c->dy, &c->x, &c->sc);
}

START_TEST(test_elementwise_native_vs_reference) {
    const int li = _i / 2;
    const ocr_dtype_t dt = LP[_i % 2];
    if (!select_level(li)) return;
    omp_set_num_threads(2);
    // 3·29·41·37 elements: several tiles per thread, a partial last one, samples whose rows
    // start inside a tile.
    const int64_t *shape = OCR_SHAPE(3, 29, 41, 37);
    EwCase c;
    c.a = rand_tensor(dt, 4, shape, -2.0f, 2.0f);
    c.b = rand_tensor(dt, 4, shape, -2.0f, 2.0f);
    c.y = ocr_test_tensor(dt, 4, shape, NULL);
    c.acc = rand_tensor(dt, 4, shape, -1.0f, 1.0f);
    c.sy = ocr_test_tensor(dt, 4, shape, NULL);
    c.x = rand_tensor(dt, 4, shape, -2.0f, 2.0f);
    c.sc = rand_tensor(dt, 4, OCR_SHAPE(3, 1, 1, 37), 0.0f, 1.0f);
    c.cy = ocr_test_tensor(dt, 4, shape, NULL);
    c.dy = rand_tensor(dt, 4, shape, -1.0f, 1.0f);
    c.dx = ocr_test_tensor(dt, 4, shape, NULL);
    c.dsc = ocr_test_tensor(dt, 4, OCR_SHAPE(3, 1, 1, 37), NULL);
    Outs o = {0};
    outs_add(&o, &c.y, "add"), outs_add(&o, &c.acc, "accumulate"), outs_add(&o, &c.sy, "scale");
    outs_add(&o, &c.cy, "channel_scale"), outs_add(&o, &c.dx, "channel_scale dinp");
    outs_add(&o, &c.dsc, "channel_scale dscale");
    char what[96];
    snprintf(what, sizeof what, "%s %s elementwise", LEVELS[li], ocr_dtype_name(dt));
    native_vs_reference(&o, run_ew, &c, what);
    outs_free(&o);
    OcrTensor *all[] = {&c.a, &c.b, &c.y, &c.acc, &c.sy, &c.x, &c.sc, &c.cy, &c.dy, &c.dx, &c.dsc};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ocr_tensor_free(all[i]);
    restore_level();
}
END_TEST

// ---- SE channel gating on bf16 maps (converted in registers) -----------------------------------
// Forward (out = inp · scale per sample), backward dinp (dout · scale) and dscale (Σ dout · inp per
// sample and channel, in double) with every map bf16, the scale (and dscale) bf16 or f32: against
// the reference at every level and at 1 and 2 threads, and every run against the first one.
// Shapes: C = 24 and C = 40 run two rows at a time per sample (rowwise.h: cpu_group_rows) with a
// sample's odd row left over, C = 96 fills whole vectors, C = 37 leaves a tail at every width;
// HW = 1 and 3 give samples shorter than a group; the large ones split into tiles that start
// inside a sample and across the threads.
typedef struct {
    OcrTensor x, sc, y, dy, dx, dsc;
} ChCase;

static void run_chscale(void *vc) {
    ChCase *c = vc;
    ocr_channel_scale_forward(&c->y, &c->x, &c->sc);
    ocr_channel_scale_backward(&c->dx, &c->dsc, &c->dy, &c->x, &c->sc);
}

// bf16 patterns for the rounding's corners: quiet and signalling NaNs with payloads, ±inf, −0, the
// smallest subnormal, the largest finite value, and 1 + 2^-7 (odd last bit: times 1.5 a tie).
static const uint16_t CH_SPECIAL[8] = {0x7fc1, 0xff81, 0x7f80, 0xff80, 0x8000, 0x0001, 0x7f7f, 0x3f81};
// Scale values of the last sample: 0, inf, NaN, 1.5 (a tie for every odd-last-bit input), a
// subnormal (products round in the subnormal range).
static const float CH_SCALE_SPECIAL[5] = {0.0f, INFINITY, NAN, 1.5f, 1e-39f};

// Each special value gets its own channel (x: channel k, dout: channel C − 1 − k, scale: channels
// 8.. of the last sample), so no product and no dscale sum meets two NaNs, whose payload would
// then depend on the operand order the compiler picks. Channel C / 2 of every sample starts with
// the products 2^60 and −2^60: summed in row order they cancel before the small terms come, in
// another order the small terms would be lost against 2^60, so dscale pins the order.
static void chscale_specials(ChCase *c, int64_t N, int64_t HW, int64_t C) {
    uint16_t *x = c->x.data, *dy = c->dy.data;
    const uint16_t big = ocr_f32_to_bf16(0x1p30f), nbig = ocr_f32_to_bf16(-0x1p30f);
    for (int64_t n = 0; n < N; n++) {
        for (int k = 0; k < 8; k++) {
            const int64_t row = n * HW + (k + n) % HW;
            x[row * C + k] = CH_SPECIAL[k];
            dy[row * C + C - 1 - k] = CH_SPECIAL[(k + 3) % 8];
        }
        if (HW >= 3) {
            const int64_t i = n * HW * C + C / 2;
            x[i] = big, dy[i] = big;
            x[i + C] = big, dy[i + C] = nbig;
        }
    }
    for (int k = 0; k < 5; k++) {
        const int64_t i = (N - 1) * C + 8 + k;
        if (c->sc.dtype == OCR_F32)
            ((float *)c->sc.data)[i] = CH_SCALE_SPECIAL[k];
        else
            ((uint16_t *)c->sc.data)[i] = ocr_f32_to_bf16(CH_SCALE_SPECIAL[k]);
    }
}

START_TEST(test_chscale_bf16_levels_threads) {
    static const int64_t SHAPES[][4] = {{4, 13, 29, 24}, {3, 5, 40, 96}, {2, 7, 97, 37}, {9, 1, 3, 40}, {6, 1, 1, 37}};
    for (size_t si = 0; si < sizeof SHAPES / sizeof SHAPES[0]; si++)
        for (int sdt = 0; sdt < 2; sdt++) {
            const int64_t N = SHAPES[si][0], H = SHAPES[si][1], W = SHAPES[si][2], C = SHAPES[si][3];
            const ocr_dtype_t st = sdt ? OCR_F32 : OCR_BF16;
            const int64_t *shape = OCR_SHAPE(N, H, W, C);
            ChCase c;
            c.x = rand_tensor(OCR_BF16, 4, shape, -2.0f, 2.0f);
            c.sc = rand_tensor(st, 4, OCR_SHAPE(N, 1, 1, C), 0.0f, 1.0f);
            c.y = ocr_test_tensor(OCR_BF16, 4, shape, NULL);
            c.dy = rand_tensor(OCR_BF16, 4, shape, -1.0f, 1.0f);
            c.dx = ocr_test_tensor(OCR_BF16, 4, shape, NULL);
            c.dsc = ocr_test_tensor(st, 4, OCR_SHAPE(N, 1, 1, C), NULL);
            chscale_specials(&c, N, H * W, C);
            Outs o = {0};
            outs_add(&o, &c.y, "out"), outs_add(&o, &c.dx, "dinp"), outs_add(&o, &c.dsc, "dscale");
            void *first[TILES_MAX_OUT];
            for (int i = 0; i < o.n; i++) first[i] = malloc(ocr_tensor_bytes(o.t[i]) + 1);
            int have_first = 0;
            for (int li = 0; li < NLEVELS; li++) {
                if (!select_level(li)) continue;
                for (int threads = 1; threads <= 2; threads++) {
                    omp_set_num_threads(threads);
                    char what[160];
                    snprintf(what, sizeof what, "channel_scale %lldx%lldx%lldx%lld, scale %s, %s, %d thread(s)",
                             (long long)N, (long long)H, (long long)W, (long long)C, ocr_dtype_name(st), LEVELS[li],
                             threads);
                    native_vs_reference(&o, run_chscale, &c, what);
                    if (!have_first) {
                        outs_keep(&o, first);
                        have_first = 1;
                    }
                    char vs[200];
                    snprintf(vs, sizeof vs, "%s vs the first level and thread count", what);
                    outs_expect(&o, first, vs);
                }
            }
            restore_level();
            omp_set_num_threads(2);
            for (int i = 0; i < o.n; i++) free(first[i]);
            outs_free(&o);
            OcrTensor *all[] = {&c.x, &c.sc, &c.y, &c.dy, &c.dx, &c.dsc};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ocr_tensor_free(all[i]);
        }
}
END_TEST

// ---- depthwise convolution ---------------------------------------------------------------------
typedef struct {
    int N, H, W, C, K, sh, sw, ph, pw;
} DwShape;

// Wide rows (blocks of a few rows, several per image), strided and padded kernels, a window
// reaching past the last row, channel counts with 32-, 8- and scalar tails.
static const DwShape DW_SHAPES[] = {
    {2, 7, 160, 37, 3, 1, 1, 1, 1},
    {2, 9, 41, 40, 5, 2, 2, 2, 2},
    {1, 8, 300, 64, 3, 2, 1, 1, 1},
    {3, 5, 13, 8, 5, 1, 2, 2, 2},
};
#define N_DW ((int)(sizeof DW_SHAPES / sizeof DW_SHAPES[0]))

typedef struct {
    OcrTensor x, w, b, y, dy, dx, dw, db;
    Conv2dParams p;
} DwCase;

static void run_dw_forward(void *vc) {
    DwCase *c = vc;
    ocr_conv2d_forward(&c->y, &c->x, &c->w, &c->b, c->p);
}
static void run_dw_backward(void *vc) {
    DwCase *c = vc;
    ocr_conv2d_backward(&c->dx, &c->dw, &c->db, &c->dy, &c->x, &c->w, c->p);
}

static void dw_case(const DwShape *s, ocr_dtype_t dt, ocr_dtype_t out_dt, ocr_dtype_t wdt, Outs *fo, Outs *bo,
                    DwCase *c) {
    const int Ho = ocr_conv2d_out_size(s->H, s->K, s->sh, s->ph), Wo = ocr_conv2d_out_size(s->W, s->K, s->sw, s->pw);
    c->p = (Conv2dParams){s->sh, s->sw, s->ph, s->pw, s->C};
    c->x = rand_tensor(dt, 4, OCR_SHAPE(s->N, s->H, s->W, s->C), -1.0f, 1.0f);
    c->w = rand_tensor(wdt, 4, OCR_SHAPE(s->C, s->K, s->K, 1), -0.5f, 0.5f);
    c->b = rand_tensor(wdt, 1, OCR_SHAPE(s->C), -0.5f, 0.5f);
    c->y = ocr_test_tensor(out_dt, 4, OCR_SHAPE(s->N, Ho, Wo, s->C), NULL);
    c->dy = rand_tensor(out_dt, 4, OCR_SHAPE(s->N, Ho, Wo, s->C), -1.0f, 1.0f);
    c->dx = ocr_test_tensor(dt, 4, OCR_SHAPE(s->N, s->H, s->W, s->C), NULL);
    c->dw = rand_tensor(wdt, 4, OCR_SHAPE(s->C, s->K, s->K, 1), -0.1f, 0.1f);
    c->db = rand_tensor(wdt, 1, OCR_SHAPE(s->C), -0.1f, 0.1f);
    outs_add(fo, &c->y, "out");
    outs_add(bo, &c->dx, "dinp");
    outs_add(bo, &c->dw, "dweight");
    outs_add(bo, &c->db, "dbias");
}

static void dw_free(DwCase *c, Outs *fo, Outs *bo) {
    outs_free(fo), outs_free(bo);
    OcrTensor *all[] = {&c->x, &c->w, &c->b, &c->y, &c->dy, &c->dx, &c->dw, &c->db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ocr_tensor_free(all[i]);
}

START_TEST(test_depthwise_native_vs_reference) {
    const int li = _i / 2;
    const ocr_dtype_t dt = LP[_i % 2];
    if (!select_level(li)) return;
    // threads 1, 2 with the default block budget (whole images per block here), then 2 threads
    // with blocks of a few rows (images split, neighbouring spans overlapping).
    for (int pass = 0; pass < 3; pass++) {
        const int threads = pass == 0 ? 1 : 2;
        omp_set_num_threads(threads);
        ocr_conv2d_depthwise_set_block_floats(pass == 2 ? 2048 : 0);
        for (int k = 0; k < N_DW; k++) {
            // Maps in dt with f32 parameters (AMP O1/O2), and an f32 output from dt input.
            for (int variant = 0; variant < 2; variant++) {
                DwCase c;
                Outs fo = {0}, bo = {0};
                dw_case(&DW_SHAPES[k], dt, variant ? OCR_F32 : dt, variant ? dt : OCR_F32, &fo, &bo, &c);
                char what[128];
                snprintf(what, sizeof what, "%s %s depthwise shape %d variant %d, %d thread(s)%s", LEVELS[li],
                         ocr_dtype_name(dt), k, variant, threads, pass == 2 ? ", small blocks" : "");
                native_vs_reference(&fo, run_dw_forward, &c, what);
                native_vs_reference(&bo, run_dw_backward, &c, what);
                dw_free(&c, &fo, &bo);
            }
        }
    }
    ocr_conv2d_depthwise_set_block_floats(0);
    omp_set_num_threads(2);
    restore_level();
}
END_TEST

// ---- the vector levels agree in f32 ----------------------------------------------------------------
// Runs run at the best level, keeps the outputs, and expects them at every other level of
// `levels` (a bit mask) the CPU has.
static void levels_agree(Outs *o, run_fn run, void *ctx, unsigned levels, const char *what) {
    ocr_cpu_vec_select(NULL);
    outs_reset(o);
    run(ctx);
    outs_keep(o, o->ref);
    for (int li = 0; li < NLEVELS; li++) {
        if (!(levels & (1u << li)) || !ocr_cpu_vec_select(LEVELS[li])) continue;
        outs_reset(o);
        run(ctx);
        char name[160];
        snprintf(name, sizeof name, "%s at %s vs the best level", what, LEVELS[li]);
        outs_expect(o, o->ref, name);
    }
    ocr_cpu_vec_select(NULL);
}

START_TEST(test_levels_agree_f32) {
    omp_set_num_threads(2);
    BnCase c = {.act = OCR_ACT_SWISH, .mid = OCR_F32, .training = 1, .fused = 1};
    const int64_t *shape = OCR_SHAPE(2, 5, 61, 37);
    c.x = rand_tensor(OCR_F32, 4, shape, -2.0f, 2.0f);
    c.gamma = rand_tensor(OCR_F32, 1, OCR_SHAPE(37), 0.5f, 2.0f);
    c.beta = rand_tensor(OCR_F32, 1, OCR_SHAPE(37), -1.0f, 1.0f);
    c.out = ocr_test_tensor(OCR_F32, 4, shape, NULL);
    c.mean = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(37), NULL);
    c.rstd = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(37), NULL);
    c.scale = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(37), NULL);
    c.rmean = rand_tensor(OCR_F32, 1, OCR_SHAPE(37), -0.5f, 0.5f);
    c.rvar = rand_tensor(OCR_F32, 1, OCR_SHAPE(37), 1.0f, 2.0f);
    c.dout = rand_tensor(OCR_F32, 4, shape, -1.0f, 1.0f);
    c.dinp = ocr_test_tensor(OCR_F32, 4, shape, NULL);
    c.dgamma = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(37), NULL);
    c.dbeta = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(37), NULL);
    Outs fo = {0}, bo = {0};
    outs_add(&fo, &c.out, "out"), outs_add(&fo, &c.mean, "save_mean"), outs_add(&fo, &c.scale, "save_scale");
    outs_add(&fo, &c.rmean, "running_mean"), outs_add(&fo, &c.rvar, "running_var");
    outs_add(&bo, &c.dinp, "dinp"), outs_add(&bo, &c.dgamma, "dgamma"), outs_add(&bo, &c.dbeta, "dbeta");
    levels_agree(&fo, run_bn_forward, &c, 7u, "f32 bn_act swish forward");
    levels_agree(&bo, run_bn_backward, &c, 7u, "f32 bn_act swish backward");
    outs_free(&fo), outs_free(&bo);
    OcrTensor *all[] = {&c.x, &c.gamma, &c.beta, &c.out, &c.mean, &c.rstd, &c.scale, &c.rmean, &c.rvar,
                        &c.dout, &c.dinp, &c.dgamma, &c.dbeta};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ocr_tensor_free(all[i]);

    for (int k = 0; k < N_DW; k++) {
        DwCase d;
        Outs dfo = {0}, dbo = {0};
        dw_case(&DW_SHAPES[k], OCR_F32, OCR_F32, OCR_F32, &dfo, &dbo, &d);
        char what[96];
        snprintf(what, sizeof what, "f32 depthwise shape %d", k);
        // sse2 has no FMA, so only AVX2 must equal AVX-512 here.
        levels_agree(&dfo, run_dw_forward, &d, 2u, what);
        levels_agree(&dbo, run_dw_backward, &d, 2u, what);
        dw_free(&d, &dfo, &dbo);
    }
}
END_TEST

// ---- column sums (bias gradients) ------------------------------------------------------------------
// ocr_cpu_column_sums_add keeps each column's running sum in registers over the rows instead of
// adding row after row into db; every db[j] must still be the row loop's fp32 sum, bit for bit,
// at every level and thread count, for every dtype, with a row stride wider than the row and
// column counts that leave partial blocks (and threads without columns). NaN results need only be
// NaN (which operand's payload an addition keeps is the compiler's choice).
void ocr_cpu_column_sums_add(float *db, const void *d, ocr_dtype_t dt, int64_t R, int64_t C, int64_t ld);

static float colsum_elem(const void *d, ocr_dtype_t dt, int64_t i) {
    if (dt == OCR_F32) return ((const float *)d)[i];
    if (dt == OCR_BF16) return ocr_bf16_to_f32(((const ocr_bf16_t *)d)[i]);
    return ocr_f16_to_f32(((const ocr_f16_t *)d)[i]);
}

START_TEST(test_column_sums_same_bits) {
    static const int64_t shapes[][3] = {{0, 7, 7},   {1, 1, 1},     {5, 2, 3},      {9, 63, 63},   {7, 64, 64},
                                        {37, 130, 133}, {4, 129, 200}, {16, 1000, 1000}, {3, 6906, 6910}};
    static const ocr_dtype_t dts[] = {OCR_F32, OCR_BF16, OCR_F16};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (size_t di = 0; di < 3; di++) {
            const int64_t R = shapes[si][0], C = shapes[si][1], ld = shapes[si][2];
            const ocr_dtype_t dt = dts[di];
            const int64_t n = R * ld > 0 ? R * ld : 1;
            float *v = malloc((size_t)n * sizeof(float)), *db0 = malloc((size_t)C * sizeof(float));
            void *d = malloc((size_t)n * ocr_dtype_size(dt));
            ocr_test_fill_uniform(v, n, 40 + si, -3.0f, 3.0f);
            ocr_test_fill_uniform(db0, C, 90 + si, -1.0f, 1.0f);
            // Specials in the larger cases: infinities, a NaN, a subnormal, a value whose sum rounds.
            if (n > 300) v[5] = INFINITY, v[ld + 5] = -INFINITY, v[77] = NAN, v[130] = 1e-39f, v[200] = 3e4f;
            for (int64_t i = 0; i < n; i++) {
                if (dt == OCR_F32) ((float *)d)[i] = v[i];
                else if (dt == OCR_BF16) ((ocr_bf16_t *)d)[i] = ocr_f32_to_bf16(v[i]);
                else ((ocr_f16_t *)d)[i] = ocr_f32_to_f16(v[i]);
            }
            float *ref = malloc((size_t)C * sizeof(float)), *got = malloc((size_t)C * sizeof(float));
            memcpy(ref, db0, (size_t)C * sizeof(float));
            for (int64_t r = 0; r < R; r++)
                for (int64_t j = 0; j < C; j++) ref[j] += colsum_elem(d, dt, r * ld + j);
            for (int li = 0; li < NLEVELS; li++) {
                if (!select_level(li)) continue;
                for (int threads = 1; threads <= 3; threads++) {
                    omp_set_num_threads(threads);
                    memcpy(got, db0, (size_t)C * sizeof(float));
                    ocr_cpu_column_sums_add(got, d, dt, R, C, ld);
                    for (int64_t j = 0; j < C; j++) {
                        const int same = isnan(ref[j]) ? isnan(got[j]) : memcmp(&ref[j], &got[j], sizeof(float)) == 0;
                        ck_assert_msg(same, "column sums %s R %lld C %lld ld %lld at %s, %d threads: column %lld %.9g, row loop %.9g",
                                      ocr_dtype_name(dt), (long long)R, (long long)C, (long long)ld, LEVELS[li], threads,
                                      (long long)j, (double)got[j], (double)ref[j]);
                    }
                }
                restore_level();
            }
            free(v), free(db0), free(d), free(ref), free(got);
        }
    omp_set_num_threads(2);
}
END_TEST

int main(void) {
    Suite *s = suite_create("cpu_tiles");
    TCase *tc = tcase_create("native_vs_reference");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_bn_native_vs_reference, 0, 2 * NLEVELS);
    tcase_add_loop_test(tc, test_act_native_vs_reference, 0, 2 * NLEVELS);
    tcase_add_loop_test(tc, test_elementwise_native_vs_reference, 0, 2 * NLEVELS);
    tcase_add_test(tc, test_chscale_bf16_levels_threads);
    tcase_add_loop_test(tc, test_depthwise_native_vs_reference, 0, 2 * NLEVELS);
    tcase_add_test(tc, test_levels_agree_f32);
    tcase_add_test(tc, test_column_sums_same_bits);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

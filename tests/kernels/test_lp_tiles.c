// Average pooling, dropout / drop path, the attention core, layer normalisation and the scalar
// affine block on f16/bf16 tensors read and written a tile at a time, against the whole-tensor reference
// (Global.cpu_exact_numerics: every tensor widened to an fp32 copy, fp32 loops, one rounding pass
// over each output).
//
// The bound is zero: widening is exact, both paths run the same fp32 operations in the same
// order on the same values, and each output element is rounded once by the same
// round-to-nearest-even conversion, so every output must match bit for bit. Each case runs on
// one and on two threads (two threads split rows, chunks and (batch, head) pairs, so a thread
// starts inside a batch element another one also works on).
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/isa.h"
#include "kernels/ops.h"
#include "tests/common/test_util.h"
#include "tests/kernels/tiles_check.h"

static uint64_t seed_counter = 9100;

static OcrTensor rand_tensor(ocr_dtype_t dt, int ndim, const int64_t *shape, float lo, float hi) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    float *v = malloc(sizeof(float) * (size_t)(n + 1));
    ocr_test_fill_uniform(v, n, seed_counter++, lo, hi);
    OcrTensor t = ocr_test_tensor(dt, ndim, shape, v);
    free(v);
    return t;
}

static const ocr_dtype_t LP[] = {OCR_BF16, OCR_F16};

// ---- average pooling ---------------------------------------------------------------------------
typedef struct {
    OcrTensor x, y, dy, dx;
    Pool2dParams p;
    int adaptive;
} PoolCase;

static void run_pool_forward(void *vc) {
    PoolCase *c = vc;
    if (c->adaptive)
        ocr_adaptive_avgpool2d_forward(&c->y, &c->x);
    else
        ocr_avgpool2d_forward(&c->y, &c->x, c->p);
}
static void run_pool_backward(void *vc) {
    PoolCase *c = vc;
    if (c->adaptive)
        ocr_adaptive_avgpool2d_backward(&c->dx, &c->dy);
    else
        ocr_avgpool2d_backward(&c->dx, &c->dy, c->p);
}

// Overlapping and padded windows (input rows read by several output rows, gradient rows received
// by several input rows), a window clipped at the border, global and non-global adaptive bins.
typedef struct {
    int N, H, W, C, k, s, pad, adaptive, Ho, Wo;
} PoolShape;
static const PoolShape POOL_SHAPES[] = {
    {3, 9, 41, 37, 3, 1, 1, 0, 0, 0},  {2, 8, 30, 20, 2, 2, 0, 0, 0, 0}, {2, 7, 23, 16, 3, 2, 1, 0, 0, 0},
    {4, 6, 40, 64, 0, 0, 0, 1, 1, 1}, {2, 9, 31, 19, 0, 0, 0, 1, 4, 5},
};

START_TEST(test_pool_native_vs_reference) {
    const ocr_dtype_t dt = LP[_i];
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        for (size_t k = 0; k < sizeof POOL_SHAPES / sizeof POOL_SHAPES[0]; k++) {
            const PoolShape *s = &POOL_SHAPES[k];
            PoolCase c = {.adaptive = s->adaptive};
            int64_t Ho = s->Ho, Wo = s->Wo;
            if (!s->adaptive) {
                c.p = (Pool2dParams){s->k, s->k, s->s, s->s, s->pad, s->pad};
                Ho = (s->H + 2 * s->pad - s->k) / s->s + 1;
                Wo = (s->W + 2 * s->pad - s->k) / s->s + 1;
            }
            c.x = rand_tensor(dt, 4, OCR_SHAPE(s->N, s->H, s->W, s->C), -2.0f, 2.0f);
            c.y = ocr_test_tensor(dt, 4, OCR_SHAPE(s->N, Ho, Wo, s->C), NULL);
            c.dy = rand_tensor(dt, 4, OCR_SHAPE(s->N, Ho, Wo, s->C), -1.0f, 1.0f);
            c.dx = ocr_test_tensor(dt, 4, OCR_SHAPE(s->N, s->H, s->W, s->C), NULL);
            Outs fo = {0}, bo = {0};
            outs_add(&fo, &c.y, "out");
            outs_add(&bo, &c.dx, "dinp");
            char what[128];
            snprintf(what, sizeof what, "%s avgpool shape %zu, %d thread(s)", ocr_dtype_name(dt), k, threads);
            native_vs_reference(&fo, run_pool_forward, &c, what);
            native_vs_reference(&bo, run_pool_backward, &c, what);
            outs_free(&fo), outs_free(&bo);
            ocr_tensor_free(&c.x), ocr_tensor_free(&c.y), ocr_tensor_free(&c.dy), ocr_tensor_free(&c.dx);
        }
    }
    omp_set_num_threads(2);
}
END_TEST

// ---- dropout and drop path ---------------------------------------------------------------------
typedef struct {
    OcrTensor x, y, dy, dx;
    DropoutParams d;
    int path;
} DropCase;

static void run_drop(void *vc) {
    DropCase *c = vc;
    if (c->path) {
        ocr_droppath_forward(&c->y, &c->x, c->d);
        ocr_droppath_backward(&c->dx, &c->dy, c->d);
    } else {
        ocr_dropout_forward(&c->y, &c->x, c->d);
        ocr_dropout_backward(&c->dx, &c->dy, c->d);
    }
}

START_TEST(test_dropout_native_vs_reference) {
    const ocr_dtype_t dt = LP[_i];
    // Training at p = 0.3 in both modes, p = 1, inference with downscale; 5·13·1031 elements: many
    // chunks, a partial last one, draw offsets not on a Philox block.
    const DropoutParams params[] = {
        {0.3f, OCR_DROPOUT_UPSCALE_IN_TRAIN, 1, 17, 3, 5},   {0.3f, OCR_DROPOUT_DOWNSCALE_IN_INFER, 1, 17, 3, 6},
        {1.0f, OCR_DROPOUT_UPSCALE_IN_TRAIN, 1, 17, 3, 0},   {0.25f, OCR_DROPOUT_DOWNSCALE_IN_INFER, 0, 17, 3, 0},
        {0.0f, OCR_DROPOUT_UPSCALE_IN_TRAIN, 1, 17, 3, 0},
    };
    const int64_t *shape = OCR_SHAPE(5, 13, 1031);
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        for (int path = 0; path < 2; path++)
            for (size_t k = 0; k < sizeof params / sizeof params[0]; k++) {
                DropCase c = {.d = params[k], .path = path};
                c.x = rand_tensor(dt, 3, shape, -2.0f, 2.0f);
                c.dy = rand_tensor(dt, 3, shape, -1.0f, 1.0f);
                c.y = ocr_test_tensor(dt, 3, shape, NULL);
                c.dx = ocr_test_tensor(dt, 3, shape, NULL);
                Outs o = {0};
                outs_add(&o, &c.y, "out");
                outs_add(&o, &c.dx, "dinp");
                char what[128];
                snprintf(what, sizeof what, "%s %s params %zu, %d thread(s)", ocr_dtype_name(dt),
                         path ? "droppath" : "dropout", k, threads);
                native_vs_reference(&o, run_drop, &c, what);
                outs_free(&o);
                ocr_tensor_free(&c.x), ocr_tensor_free(&c.dy), ocr_tensor_free(&c.y), ocr_tensor_free(&c.dx);
            }
    }
    omp_set_num_threads(2);
}
END_TEST

// ---- attention core ----------------------------------------------------------------------------
typedef struct {
    OcrTensor qkv, out, probs, dout, dqkv, mask;
    int heads, use_mask;
    DropoutParams d;
} AttnCase;

static void run_attn_forward(void *vc) {
    AttnCase *c = vc;
    ocr_attention_forward(&c->out, &c->probs, &c->qkv, c->use_mask ? &c->mask : NULL, c->heads, 0.35f, c->d);
}
static void run_attn_backward(void *vc) {
    AttnCase *c = vc;
    ocr_attention_backward(&c->dqkv, &c->dout, &c->qkv, &c->probs, c->heads, 0.35f, c->d);
}

START_TEST(test_attention_native_vs_reference) {
    const ocr_dtype_t dt = LP[_i];
    // (B, T, C, heads): heads split between threads inside one batch element (3·5 pairs), and one
    // head large enough for BLAS's own threads (pairs run one at a time).
    const int shapes[][4] = {{3, 23, 40, 5}, {2, 17, 24, 3}, {2, 96, 64, 1}};
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
            for (int variant = 0; variant < 2; variant++) {
                const int64_t B = shapes[k][0], T = shapes[k][1], C = shapes[k][2];
                AttnCase c = {.heads = shapes[k][3], .use_mask = variant};
                c.d = variant ? (DropoutParams){0.2f, OCR_DROPOUT_UPSCALE_IN_TRAIN, 1, 41, 2, 7} : (DropoutParams){0};
                c.qkv = rand_tensor(dt, 3, OCR_SHAPE(B, T, 3 * C), -1.5f, 1.5f);
                c.out = ocr_test_tensor(dt, 3, OCR_SHAPE(B, T, C), NULL);
                c.probs = ocr_test_tensor(dt, 4, OCR_SHAPE(B, c.heads, T, T), NULL);
                c.dout = rand_tensor(dt, 3, OCR_SHAPE(B, T, C), -1.0f, 1.0f);
                c.dqkv = ocr_test_tensor(dt, 3, OCR_SHAPE(B, T, 3 * C), NULL);
                // A banded additive mask (0 near the diagonal, −inf elsewhere).
                float *m = malloc(sizeof(float) * (size_t)(T * T));
                for (int64_t i = 0; i < T; i++)
                    for (int64_t j = 0; j < T; j++) m[i * T + j] = llabs(i - j) <= 4 ? 0.0f : -INFINITY;
                c.mask = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(T, T), m);
                free(m);
                Outs fo = {0}, bo = {0};
                outs_add(&fo, &c.out, "out");
                outs_add(&fo, &c.probs, "probs");
                outs_add(&bo, &c.dqkv, "dqkv");
                char what[128];
                snprintf(what, sizeof what, "%s attention shape %zu variant %d, %d thread(s)", ocr_dtype_name(dt), k,
                         variant, threads);
                native_vs_reference(&fo, run_attn_forward, &c, what);
                native_vs_reference(&bo, run_attn_backward, &c, what);
                outs_free(&fo), outs_free(&bo);
                OcrTensor *all[] = {&c.qkv, &c.out, &c.probs, &c.dout, &c.dqkv, &c.mask};
                for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ocr_tensor_free(all[i]);
            }
    }
    omp_set_num_threads(2);
}
END_TEST

// ---- layer normalisation -----------------------------------------------------------------------
typedef struct {
    OcrTensor x, g, b, y, mean, rstd, dy, dx, dg, db;
    int affine;
} LnCase;

static void run_ln_forward(void *vc) {
    LnCase *c = vc;
    ocr_layernorm_forward(&c->y, &c->mean, &c->rstd, &c->x, c->affine ? &c->g : NULL, c->affine ? &c->b : NULL, 1e-5f);
}
static void run_ln_backward(void *vc) {
    LnCase *c = vc;
    ocr_layernorm_backward(&c->dx, c->affine ? &c->dg : NULL, c->affine ? &c->db : NULL, &c->dy, &c->x,
                           c->affine ? &c->g : NULL, &c->mean, &c->rstd);
}

START_TEST(test_layernorm_native_vs_reference) {
    const ocr_dtype_t dt = LP[_i];
    // Rows of 120 (several tiles per chunk, a partial last tile) and of 5000 (one row a tile).
    const int64_t shapes[][2] = {{37 * 11, 120}, {9, 5000}};
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
            for (int affine = 0; affine < 2; affine++) {
                const int64_t R = shapes[k][0], C = shapes[k][1];
                LnCase c = {.affine = affine};
                c.x = rand_tensor(dt, 2, OCR_SHAPE(R, C), -2.0f, 3.0f);
                c.g = rand_tensor(OCR_F32, 1, OCR_SHAPE(C), 0.5f, 1.5f);
                c.b = rand_tensor(OCR_F32, 1, OCR_SHAPE(C), -0.5f, 0.5f);
                c.y = ocr_test_tensor(dt, 2, OCR_SHAPE(R, C), NULL);
                c.mean = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(R), NULL);
                c.rstd = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(R), NULL);
                c.dy = rand_tensor(dt, 2, OCR_SHAPE(R, C), -1.0f, 1.0f);
                c.dx = ocr_test_tensor(dt, 2, OCR_SHAPE(R, C), NULL);
                c.dg = rand_tensor(OCR_F32, 1, OCR_SHAPE(C), -0.1f, 0.1f);
                c.db = rand_tensor(OCR_F32, 1, OCR_SHAPE(C), -0.1f, 0.1f);
                Outs fo = {0}, bo = {0};
                outs_add(&fo, &c.y, "out"), outs_add(&fo, &c.mean, "mean"), outs_add(&fo, &c.rstd, "rstd");
                outs_add(&bo, &c.dx, "dinp"), outs_add(&bo, &c.dg, "dgamma"), outs_add(&bo, &c.db, "dbeta");
                char what[128];
                snprintf(what, sizeof what, "%s layernorm shape %zu affine %d, %d thread(s)", ocr_dtype_name(dt), k,
                         affine, threads);
                native_vs_reference(&fo, run_ln_forward, &c, what);
                native_vs_reference(&bo, run_ln_backward, &c, what);
                outs_free(&fo), outs_free(&bo);
                OcrTensor *all[] = {&c.x, &c.g, &c.b, &c.y, &c.mean, &c.rstd, &c.dy, &c.dx, &c.dg, &c.db};
                for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ocr_tensor_free(all[i]);
            }
    }
    omp_set_num_threads(2);
}
END_TEST

// ---- scalar affine -----------------------------------------------------------------------------
typedef struct {
    OcrTensor x, y, s, b, dy, dx, ds, db;
} AffCase;

static void run_affine(void *vc) {
    AffCase *c = vc;
    ocr_scalar_affine_forward(&c->y, &c->x, &c->s, &c->b);
    ocr_scalar_affine_backward(&c->dx, &c->ds, &c->db, &c->dy, &c->x, &c->s);
}

// Vector levels (kernels/cpu/cpu_common.h); a level this CPU lacks is skipped with a line.
int ocr_cpu_vec_select(const char *name);
static const char *const VEC_LEVELS[] = {"sse2", "avx2", "avx512"};

START_TEST(test_affine_native_vs_reference) {
    const ocr_dtype_t dt = LP[_i % 2];
    const char *level = VEC_LEVELS[_i / 2];
    if (!ocr_cpu_vec_select(level)) {
        printf("SKIP scalar_affine at %s: this CPU lacks it\n", level);
        return;
    }
    // Below and above the forward's parallel threshold, both with a partial last chunk; bf16
    // maps take the in-register loops, compiled per vector level.
    const int64_t sizes[] = {21001, 5 * 13 * 1031};
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            AffCase c;
            const int64_t *shape = OCR_SHAPE(sizes[k]);
            c.x = rand_tensor(dt, 1, shape, -2.0f, 2.0f);
            c.dy = rand_tensor(dt, 1, shape, -1.0f, 1.0f);
            c.y = ocr_test_tensor(dt, 1, shape, NULL);
            c.dx = ocr_test_tensor(dt, 1, shape, NULL);
            c.s = rand_tensor(OCR_F32, 1, OCR_SHAPE(1), 0.5f, 1.5f);
            c.b = rand_tensor(OCR_F32, 1, OCR_SHAPE(1), -0.5f, 0.5f);
            c.ds = rand_tensor(OCR_F32, 1, OCR_SHAPE(1), -0.1f, 0.1f);
            c.db = rand_tensor(OCR_F32, 1, OCR_SHAPE(1), -0.1f, 0.1f);
            Outs o = {0};
            outs_add(&o, &c.y, "out"), outs_add(&o, &c.dx, "dinp");
            outs_add(&o, &c.ds, "dscale"), outs_add(&o, &c.db, "dbias");
            char what[128];
            snprintf(what, sizeof what, "%s %s scalar_affine size %lld, %d thread(s)", level, ocr_dtype_name(dt),
                     (long long)sizes[k], threads);
            native_vs_reference(&o, run_affine, &c, what);
            outs_free(&o);
            OcrTensor *all[] = {&c.x, &c.y, &c.s, &c.b, &c.dy, &c.dx, &c.ds, &c.db};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ocr_tensor_free(all[i]);
        }
    }
    omp_set_num_threads(2);
    ocr_cpu_vec_select(NULL);
}
END_TEST

int main(void) {
    Suite *s = suite_create("lp_tiles");
    TCase *tc = tcase_create("native_vs_reference");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_pool_native_vs_reference, 0, 2);
    tcase_add_loop_test(tc, test_dropout_native_vs_reference, 0, 2);
    tcase_add_loop_test(tc, test_attention_native_vs_reference, 0, 2);
    tcase_add_loop_test(tc, test_layernorm_native_vs_reference, 0, 2);
    tcase_add_loop_test(tc, test_affine_native_vs_reference, 0, 6);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

// attention_forward/backward against a double-precision reference: outputs and saved probs,
// and dqkv against central finite differences of the reference loss Σ dout·out. Dropout is
// checked with the mask held fixed: the reference regenerates it from the same Philox indices.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "kernels/ops.h"
#include "tests/common/test_util.h"

typedef struct {
    int B, T, H, D;
    float scale;
    int mask_kind;  // 0 none, 1 causal, 2 causal + last key masked, 3 first query row fully masked
    DropoutParams drop;
    ocr_dtype_t qkv_dt, out_dt, probs_dt;
} Cfg;

static int C_of(const Cfg *c) { return c->H * c->D; }
static int64_t qkv_n(const Cfg *c) { return (int64_t)c->B * c->T * 3 * C_of(c); }
static int64_t out_n(const Cfg *c) { return (int64_t)c->B * c->T * C_of(c); }
static int64_t probs_n(const Cfg *c) { return (int64_t)c->B * c->H * c->T * c->T; }

static void make_mask(float *m, const Cfg *c) {
    int T = c->T;
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) {
            float v = 0.0f;
            if (c->mask_kind >= 1 && c->mask_kind <= 2 && j > i) v = -INFINITY;
            if (c->mask_kind == 2 && j == T - 1 && i > 0) v = -INFINITY;
            if (c->mask_kind == 3 && i == 0) v = -INFINITY;
            if (c->mask_kind == 3 && i > 0 && (i + j) % 3 == 0 && j != i) v = -INFINITY;
            m[i * T + j] = v;
        }
}

// The factor each probability is multiplied by (P' = P · F), from regenerated draws.
static void ref_factors(double *F, const Cfg *c) {
    const DropoutParams *d = &c->drop;
    int up = d->mode == OCR_DROPOUT_UPSCALE_IN_TRAIN;
    for (int64_t e = 0; e < probs_n(c); e++) {
        if (!d->training || d->p == 0.0f) {
            F[e] = (!d->training && !up) ? 1.0 - d->p : 1.0;
        } else {
            int keep = ocr_rng_uniform(d->seed, d->stream, d->offset + (uint64_t)e) >= d->p;
            F[e] = keep ? (up ? 1.0 / (1.0 - d->p) : 1.0) : 0.0;
        }
    }
}

typedef struct {
    const Cfg *c;
    const double *mask;  // NULL or (T, T)
    const double *F;
    const double *dout;
    double *out, *P;     // scratch for the loss
} Ref;

static void ref_forward(double *out, double *P, const double *qkv, const Ref *r) {
    const Cfg *c = r->c;
    int T = c->T, H = c->H, D = c->D, C = C_of(c);
    double *s = malloc((size_t)T * sizeof(double));
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < H; h++) {
            double *Pbh = P + ((int64_t)b * H + h) * T * T;
            const double *Fbh = r->F + ((int64_t)b * H + h) * T * T;
            for (int i = 0; i < T; i++) {
                const double *q = qkv + ((int64_t)b * T + i) * 3 * C + h * D;
                double mx = -INFINITY;
                for (int j = 0; j < T; j++) {
                    const double *k = qkv + ((int64_t)b * T + j) * 3 * C + C + h * D;
                    double acc = 0;
                    for (int d = 0; d < D; d++) acc += q[d] * k[d];
                    s[j] = c->scale * acc + (r->mask ? r->mask[i * T + j] : 0.0);
                    if (s[j] > mx) mx = s[j];
                }
                double sum = 0;
                for (int j = 0; j < T; j++) sum += (mx == -INFINITY) ? 0 : exp(s[j] - mx);
                for (int j = 0; j < T; j++) Pbh[i * T + j] = (mx == -INFINITY) ? 0 : exp(s[j] - mx) / sum;
                for (int d = 0; d < D; d++) {
                    double acc = 0;
                    for (int j = 0; j < T; j++)
                        acc += Pbh[i * T + j] * Fbh[i * T + j] * qkv[((int64_t)b * T + j) * 3 * C + 2 * C + h * D + d];
                    out[((int64_t)b * T + i) * C + h * D + d] = acc;
                }
            }
        }
    free(s);
}

static double ref_loss(const double *qkv, void *vctx) {
    Ref *r = vctx;
    ref_forward(r->out, r->P, qkv, r);
    double L = 0;
    for (int64_t i = 0; i < out_n(r->c); i++) L += r->dout[i] * r->out[i];
    return L;
}

typedef struct {
    int check_grad_subset;  // > 0: finite differences on this many random coordinates only
} RunOpts;

static void run_case(const Cfg *c, const char *name, RunOpts o) {
    int T = c->T;
    int64_t nq = qkv_n(c), no = out_n(c), np = probs_n(c);
    float *qs = malloc((size_t)nq * sizeof(float)), *gs = malloc((size_t)no * sizeof(float));
    ocr_test_fill_uniform(qs, nq, 17 + (uint64_t)c->T, -1.5f, 1.5f);
    ocr_test_fill_uniform(gs, no, 29 + (uint64_t)c->H, -1.0f, 1.0f);
    float *maskv = malloc((size_t)T * T * sizeof(float));
    make_mask(maskv, c);
    OcrTensor qkv = ocr_test_tensor(c->qkv_dt, 3, OCR_SHAPE(c->B, T, 3 * C_of(c)), qs);
    OcrTensor out = ocr_test_tensor(c->out_dt, 3, OCR_SHAPE(c->B, T, C_of(c)), NULL);
    OcrTensor out2 = ocr_test_tensor(c->out_dt, 3, OCR_SHAPE(c->B, T, C_of(c)), NULL);
    OcrTensor probs = ocr_test_tensor(c->probs_dt, 4, OCR_SHAPE(c->B, c->H, T, T), NULL);
    OcrTensor dout = ocr_test_tensor(c->out_dt, 3, OCR_SHAPE(c->B, T, C_of(c)), gs);
    OcrTensor dqkv = ocr_test_tensor(c->qkv_dt, 3, OCR_SHAPE(c->B, T, 3 * C_of(c)), NULL);
    OcrTensor mask = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(T, T), maskv);
    const OcrTensor *mp = c->mask_kind ? &mask : NULL;

    ocr_attention_forward(&out, &probs, &qkv, mp, c->H, c->scale, c->drop);
    ocr_attention_forward(&out2, NULL, &qkv, mp, c->H, c->scale, c->drop);  // probs not needed
    ocr_attention_backward(&dqkv, &dout, &qkv, &probs, c->H, c->scale, c->drop);

    double *qd = malloc((size_t)nq * 8), *dd = malloc((size_t)no * 8), *md = malloc((size_t)T * T * 8);
    double *F = malloc((size_t)np * 8), *oref = malloc((size_t)no * 8), *pref = malloc((size_t)np * 8);
    for (int64_t i = 0; i < nq; i++) qd[i] = ocr_tensor_get_f32(&qkv, i);
    for (int64_t i = 0; i < no; i++) dd[i] = ocr_tensor_get_f32(&dout, i);
    for (int i = 0; i < T * T; i++) md[i] = maskv[i];
    ref_factors(F, c);
    Ref r = {c, c->mask_kind ? md : NULL, F, dd, malloc((size_t)no * 8), malloc((size_t)np * 8)};
    ref_forward(oref, pref, qd, &r);

    char what[160];
    float *got = malloc((size_t)(nq > np ? (nq > no ? nq : no) : (np > no ? np : no)) * sizeof(float));
    double eo = ocr_test_dtype_eps(c->out_dt), ep = ocr_test_dtype_eps(c->probs_dt);
    ocr_tensor_to_f32(&out, got);
    snprintf(what, sizeof what, "%s: out", name);
    ck_assert_msg(ocr_test_allclose_f64(got, oref, no, 2 * eo + 2e-6, 2 * eo + 1e-5, what), "%s", what);
    ck_assert_msg(memcmp(out.data, out2.data, ocr_tensor_bytes(&out)) == 0, "%s: out differs without probs", name);
    ocr_tensor_to_f32(&probs, got);
    snprintf(what, sizeof what, "%s: probs", name);
    ck_assert_msg(ocr_test_allclose_f64(got, pref, np, 1e-7, 1.01 * ep + 1e-6, what), "%s", what);

    // Backward against finite differences of the reference loss.
    double *num = malloc((size_t)nq * 8);
    ocr_tensor_to_f32(&dqkv, got);
    for (int64_t i = 0; i < nq; i++) ck_assert_msg(isfinite(got[i]), "%s: dqkv[%lld] = %g", name, (long long)i, got[i]);
    double tol = 1e-5 + 12 * fmax(fmax(ocr_test_dtype_eps(c->qkv_dt), eo), ep);
    if (o.check_grad_subset == 0) {
        ocr_test_numeric_grad(num, qd, nq, ref_loss, &r, 1e-6);
        double err = ocr_test_rel_error(got, num, nq);
        ck_assert_msg(err < tol, "%s: dqkv rel error %g > %g", name, err, tol);
        // Guard against a trivially zero gradient passing a relative test.
        double mx = 0;
        for (int64_t i = 0; i < nq; i++) mx = fmax(mx, fabs(num[i]));
        ck_assert_msg(mx > 1e-3, "%s: degenerate test gradient", name);
    } else {
        OcrRng rng = ocr_rng_make(5, 6);
        float sub_got[64];
        double sub_num[64];
        OCR_ASSERT(o.check_grad_subset <= 64);
        for (int k = 0; k < o.check_grad_subset; k++) {
            int64_t i = ocr_rng_next_int(&rng, 0, nq - 1);
            double saved = qd[i];
            qd[i] = saved + 1e-6;
            double fp = ref_loss(qd, &r);
            qd[i] = saved - 1e-6;
            double fm = ref_loss(qd, &r);
            qd[i] = saved;
            sub_num[k] = (fp - fm) / 2e-6;
            sub_got[k] = got[i];
        }
        double err = ocr_test_rel_error(sub_got, sub_num, o.check_grad_subset);
        ck_assert_msg(err < tol, "%s: dqkv (subset) rel error %g > %g", name, err, tol);
    }
    free(qs);
    free(gs);
    free(maskv);
    free(qd);
    free(dd);
    free(md);
    free(F);
    free(oref);
    free(pref);
    free(r.out);
    free(r.P);
    free(got);
    free(num);
    ocr_tensor_free(&qkv);
    ocr_tensor_free(&out);
    ocr_tensor_free(&out2);
    ocr_tensor_free(&probs);
    ocr_tensor_free(&dout);
    ocr_tensor_free(&dqkv);
    ocr_tensor_free(&mask);
}

static DropoutParams no_dropout(void) {
    DropoutParams d = {0.0f, OCR_DROPOUT_UPSCALE_IN_TRAIN, 1, 0, 0, 0};
    return d;
}

static DropoutParams drop(float p, ocr_dropout_mode_t mode, int training) {
    DropoutParams d = {p, mode, training, 20240601, 3, 10};
    return d;
}

static const RunOpts kFull = {0};

START_TEST(test_attention_f32_no_mask) {
    Cfg c = {2, 7, 2, 3, 0.7f, 0, no_dropout(), OCR_F32, OCR_F32, OCR_F32};
    run_case(&c, "f32 no mask", kFull);
    Cfg c1 = {1, 1, 3, 4, 0.5f, 0, no_dropout(), OCR_F32, OCR_F32, OCR_F32};  // T = 1: P = 1, out = v
    run_case(&c1, "f32 T=1", kFull);
}
END_TEST

START_TEST(test_attention_f32_mask) {
    Cfg c = {2, 9, 3, 5, 1.0f / sqrtf(5.0f), 1, no_dropout(), OCR_F32, OCR_F32, OCR_F32};
    run_case(&c, "f32 causal mask", kFull);
    c.mask_kind = 2;
    c.T = 6;
    c.H = 2;
    run_case(&c, "f32 causal + key mask", kFull);
    c.mask_kind = 3;
    run_case(&c, "f32 fully masked row", kFull);
}
END_TEST

START_TEST(test_attention_dropout) {
    Cfg c = {2, 8, 2, 4, 0.5f, 0, drop(0.3f, OCR_DROPOUT_UPSCALE_IN_TRAIN, 1), OCR_F32, OCR_F32, OCR_F32};
    run_case(&c, "dropout upscale train", kFull);
    c.mask_kind = 2;
    run_case(&c, "dropout upscale train + mask", kFull);
    c.drop = drop(0.3f, OCR_DROPOUT_DOWNSCALE_IN_INFER, 1);
    run_case(&c, "dropout downscale train + mask", kFull);
    c.drop = drop(0.3f, OCR_DROPOUT_DOWNSCALE_IN_INFER, 0);
    run_case(&c, "dropout downscale infer", kFull);
    c.drop = drop(0.3f, OCR_DROPOUT_UPSCALE_IN_TRAIN, 0);
    run_case(&c, "dropout upscale infer", kFull);
}
END_TEST

START_TEST(test_attention_low_precision) {
    Cfg c = {2, 7, 3, 3, 0.6f, 1, no_dropout(), OCR_F16, OCR_F16, OCR_F16};
    run_case(&c, "f16", kFull);
    c.qkv_dt = c.out_dt = c.probs_dt = OCR_BF16;
    c.drop = drop(0.2f, OCR_DROPOUT_UPSCALE_IN_TRAIN, 1);
    run_case(&c, "bf16 + dropout", kFull);
    c.qkv_dt = OCR_BF16;
    c.out_dt = OCR_F32;
    c.probs_dt = OCR_F16;
    run_case(&c, "mixed bf16/f32/f16", kFull);
}
END_TEST

// A batch big enough for the parallel path; gradient checked on a random subset of coordinates.
START_TEST(test_attention_parallel_path) {
    Cfg c = {64, 9, 3, 5, 0.45f, 2, drop(0.25f, OCR_DROPOUT_UPSCALE_IN_TRAIN, 1), OCR_F32, OCR_F32, OCR_F32};
    RunOpts o = {40};
    run_case(&c, "parallel", o);
}
END_TEST

// The network shapes on the per-head small-matrix loops, whose register blocks (32 and 8
// columns, row pairs) the small cases above do not reach: NRTR's causal self-attention (T 11,
// head dim 32) and an SVTR mixer's (T 40, head dim 15).
START_TEST(test_attention_network_shapes) {
    RunOpts o = {40};
    Cfg nrtr = {6, 11, 4, 32, 1.0f / sqrtf(32.0f), 1, drop(0.1f, OCR_DROPOUT_UPSCALE_IN_TRAIN, 1), OCR_F32, OCR_F32,
                OCR_F32};
    run_case(&nrtr, "NRTR self-attention shape", o);
    Cfg svtr = {4, 40, 2, 15, 1.0f / sqrtf(15.0f), 0, no_dropout(), OCR_F32, OCR_F32, OCR_F32};
    run_case(&svtr, "SVTR mixer shape", o);
    svtr.qkv_dt = svtr.out_dt = OCR_BF16;
    run_case(&svtr, "SVTR mixer shape, bf16", o);
}
END_TEST

// Same inputs and dropout parameters: bit-identical outputs for 1 and 2 threads; another
// dropout seed changes the output.
START_TEST(test_attention_reproducible) {
    const int B = 64, T = 9, H = 3, D = 5, C = H * D;
    int64_t nq = (int64_t)B * T * 3 * C;
    float *qs = malloc((size_t)nq * sizeof(float));
    ocr_test_fill_uniform(qs, nq, 3, -1, 1);
    OcrTensor qkv = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, 3 * C), qs);
    OcrTensor o1 = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, C), NULL);
    OcrTensor o2 = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, C), NULL);
    OcrTensor p1 = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(B, H, T, T), NULL);
    OcrTensor d1 = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, 3 * C), NULL);
    OcrTensor d2 = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, 3 * C), NULL);
    DropoutParams d = drop(0.4f, OCR_DROPOUT_UPSCALE_IN_TRAIN, 1);
    omp_set_num_threads(1);
    ocr_attention_forward(&o1, &p1, &qkv, NULL, H, 0.4f, d);
    ocr_attention_backward(&d1, &o1, &qkv, &p1, H, 0.4f, d);  // any dout will do
    omp_set_num_threads(2);
    ocr_attention_forward(&o2, &p1, &qkv, NULL, H, 0.4f, d);
    ocr_attention_backward(&d2, &o1, &qkv, &p1, H, 0.4f, d);
    ck_assert(memcmp(o1.data, o2.data, ocr_tensor_bytes(&o1)) == 0);
    ck_assert(memcmp(d1.data, d2.data, ocr_tensor_bytes(&d1)) == 0);
    d.seed++;
    ocr_attention_forward(&o2, &p1, &qkv, NULL, H, 0.4f, d);
    ck_assert(memcmp(o1.data, o2.data, ocr_tensor_bytes(&o1)) != 0);
    free(qs);
    ocr_tensor_free(&qkv);
    ocr_tensor_free(&o1);
    ocr_tensor_free(&o2);
    ocr_tensor_free(&p1);
    ocr_tensor_free(&d1);
    ocr_tensor_free(&d2);
}
END_TEST

// Every vector level gives the same bits (the softmax's exponentials, the small-matrix loops'
// padded column blocks, the dropout keep masks), on the network shapes with dropout and a mask,
// bf16 included. The hook selects a level below the CPU's best.
int ocr_cpu_vec_select(const char *name);

static void attention_at_level(const char *level, int B, int T, int H, int D, int causal, ocr_dtype_t dt,
                               OcrTensor *out, OcrTensor *probs, OcrTensor *dqkv) {
    const int C = H * D;
    const int64_t nq = (int64_t)B * T * 3 * C, no = (int64_t)B * T * C;
    float *qs = malloc((size_t)nq * sizeof(float)), *gs = malloc((size_t)no * sizeof(float));
    ocr_test_fill_uniform(qs, nq, 11, -2, 2);
    ocr_test_fill_uniform(gs, no, 12, -1, 1);
    OcrTensor q32 = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, 3 * C), qs);
    OcrTensor g32 = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, C), gs);
    OcrTensor qkv = ocr_test_tensor(dt, 3, OCR_SHAPE(B, T, 3 * C), NULL);
    OcrTensor dout = ocr_test_tensor(dt, 3, OCR_SHAPE(B, T, C), NULL);
    ocr_cast_forward(&qkv, &q32);
    ocr_cast_forward(&dout, &g32);
    OcrTensor mask = ocr_test_tensor(OCR_F32, 2, OCR_SHAPE(T, T), NULL);
    float *m = mask.data;
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) m[i * T + j] = j > i ? -INFINITY : 0.0f;
    *out = ocr_test_tensor(dt, 3, OCR_SHAPE(B, T, C), NULL);
    *probs = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(B, H, T, T), NULL);
    *dqkv = ocr_test_tensor(dt, 3, OCR_SHAPE(B, T, 3 * C), NULL);
    DropoutParams d = drop(0.1f, OCR_DROPOUT_UPSCALE_IN_TRAIN, 1);
    ck_assert_msg(ocr_cpu_vec_select(level), "level %s", level);
    ocr_attention_forward(out, probs, &qkv, causal ? &mask : NULL, H, 1.0f / sqrtf((float)D), d);
    ocr_attention_backward(dqkv, &dout, &qkv, probs, H, 1.0f / sqrtf((float)D), d);
    ocr_cpu_vec_select(NULL);
    free(qs), free(gs);
    ocr_tensor_free(&q32), ocr_tensor_free(&g32), ocr_tensor_free(&qkv), ocr_tensor_free(&dout);
    ocr_tensor_free(&mask);
}

START_TEST(test_attention_levels_agree) {
    static const char *const levels[] = {"sse2", "avx2", "avx512"};
    const struct {
        int B, T, H, D, causal;
        ocr_dtype_t dt;
    } cases[] = {{8, 40, 8, 15, 0, OCR_BF16}, {8, 11, 12, 32, 1, OCR_F32}, {3, 13, 2, 21, 1, OCR_F32}};
    omp_set_num_threads(2);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        OcrTensor ro, rp, rd;
        attention_at_level("sse2", cases[k].B, cases[k].T, cases[k].H, cases[k].D, cases[k].causal, cases[k].dt, &ro,
                           &rp, &rd);
        for (int li = 1; li < 3; li++) {
            if (!ocr_cpu_vec_select(levels[li])) {
                printf("SKIP: this CPU has no %s path\n", levels[li]);
                continue;
            }
            ocr_cpu_vec_select(NULL);
            OcrTensor o, p, dq;
            attention_at_level(levels[li], cases[k].B, cases[k].T, cases[k].H, cases[k].D, cases[k].causal,
                               cases[k].dt, &o, &p, &dq);
            ck_assert_msg(memcmp(o.data, ro.data, ocr_tensor_bytes(&o)) == 0, "case %zu out: %s != sse2", k,
                          levels[li]);
            ck_assert_msg(memcmp(p.data, rp.data, ocr_tensor_bytes(&p)) == 0, "case %zu probs: %s != sse2", k,
                          levels[li]);
            ck_assert_msg(memcmp(dq.data, rd.data, ocr_tensor_bytes(&dq)) == 0, "case %zu dqkv: %s != sse2", k,
                          levels[li]);
            ocr_tensor_free(&o), ocr_tensor_free(&p), ocr_tensor_free(&dq);
        }
        ocr_tensor_free(&ro), ocr_tensor_free(&rp), ocr_tensor_free(&rd);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("kernels_attention");
    TCase *tc = tcase_create("attention");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_attention_f32_no_mask);
    tcase_add_test(tc, test_attention_f32_mask);
    tcase_add_test(tc, test_attention_dropout);
    tcase_add_test(tc, test_attention_low_precision);
    tcase_add_test(tc, test_attention_parallel_path);
    tcase_add_test(tc, test_attention_network_shapes);
    tcase_add_test(tc, test_attention_reproducible);
    tcase_add_test(tc, test_attention_levels_agree);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

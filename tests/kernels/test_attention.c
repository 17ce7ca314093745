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

// ---- cross-attention: q (B, Tq, C), kv (B, Tk, 2C) ------------------------------------------------
typedef struct {
    int B, Tq, Tk, H, D;
    float scale;
    DropoutParams drop;
    ocr_dtype_t dt;
} XCfg;

typedef struct {
    const XCfg *c;
    const double *q, *kv, *dout, *F;  // F (B, H, Tq, Tk): the dropout factors
    double *out, *P;
} XRef;

static void xref_forward(const XRef *r, const double *q, const double *kv) {
    const XCfg *c = r->c;
    const int C = c->H * c->D, Tq = c->Tq, Tk = c->Tk, D = c->D;
    double *sc = malloc((size_t)Tk * sizeof(double));
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->H; h++)
            for (int i = 0; i < Tq; i++) {
                const double *qi = q + ((int64_t)b * Tq + i) * C + h * D;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < Tk; j++) {
                    const double *kj = kv + ((int64_t)b * Tk + j) * 2 * C + h * D;
                    double acc = 0;
                    for (int d = 0; d < D; d++) acc += qi[d] * kj[d];
                    sc[j] = c->scale * acc;
                    mx = fmax(mx, sc[j]);
                }
                for (int j = 0; j < Tk; j++) sum += exp(sc[j] - mx);
                const int64_t row = (((int64_t)b * c->H + h) * Tq + i) * Tk;
                for (int j = 0; j < Tk; j++) r->P[row + j] = exp(sc[j] - mx) / sum;
                for (int d = 0; d < D; d++) {
                    double acc = 0;
                    for (int j = 0; j < Tk; j++)
                        acc += r->P[row + j] * r->F[row + j] * kv[((int64_t)b * Tk + j) * 2 * C + C + h * D + d];
                    r->out[((int64_t)b * Tq + i) * C + h * D + d] = acc;
                }
            }
    free(sc);
}

static double xref_loss(const XRef *r, const double *q, const double *kv) {
    xref_forward(r, q, kv);
    double L = 0;
    const int64_t no = (int64_t)r->c->B * r->c->Tq * r->c->H * r->c->D;
    for (int64_t i = 0; i < no; i++) L += r->dout[i] * r->out[i];
    return L;
}
static double xref_loss_q(const double *q, void *ctx) {
    const XRef *r = ctx;
    return xref_loss(r, q, r->kv);
}
static double xref_loss_kv(const double *kv, void *ctx) {
    const XRef *r = ctx;
    return xref_loss(r, r->q, kv);
}

static void run_cross(const XCfg *c, const char *name) {
    const int C = c->H * c->D;
    const int64_t nq = (int64_t)c->B * c->Tq * C, nkv = (int64_t)c->B * c->Tk * 2 * C;
    const int64_t np = (int64_t)c->B * c->H * c->Tq * c->Tk;
    float *qs = malloc((size_t)nq * sizeof(float)), *ks = malloc((size_t)nkv * sizeof(float));
    float *gs = malloc((size_t)nq * sizeof(float));
    ocr_test_fill_uniform(qs, nq, 41 + (uint64_t)c->Tq, -1.5f, 1.5f);
    ocr_test_fill_uniform(ks, nkv, 43 + (uint64_t)c->Tk, -1.5f, 1.5f);
    ocr_test_fill_uniform(gs, nq, 47, -1.0f, 1.0f);
    OcrTensor q = ocr_test_tensor(c->dt, 3, OCR_SHAPE(c->B, c->Tq, C), qs);
    OcrTensor kv = ocr_test_tensor(c->dt, 3, OCR_SHAPE(c->B, c->Tk, 2 * C), ks);
    OcrTensor dout = ocr_test_tensor(c->dt, 3, OCR_SHAPE(c->B, c->Tq, C), gs);
    OcrTensor out = ocr_test_tensor(c->dt, 3, OCR_SHAPE(c->B, c->Tq, C), NULL);
    OcrTensor probs = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(c->B, c->H, c->Tq, c->Tk), NULL);
    OcrTensor dq = ocr_test_tensor(c->dt, 3, OCR_SHAPE(c->B, c->Tq, C), NULL);
    OcrTensor dkv = ocr_test_tensor(c->dt, 3, OCR_SHAPE(c->B, c->Tk, 2 * C), NULL);
    ocr_attention_cross_forward(&out, &probs, &q, &kv, c->H, c->scale, c->drop);
    ocr_attention_cross_backward(&dq, &dkv, &dout, &q, &kv, &probs, c->H, c->scale, c->drop);

    // The reference reads the stored (rounded) operands and regenerates the dropout draws.
    double *qd = malloc((size_t)nq * 8), *kd = malloc((size_t)nkv * 8), *dd = malloc((size_t)nq * 8);
    double *F = malloc((size_t)np * 8);
    for (int64_t i = 0; i < nq; i++) qd[i] = ocr_tensor_get_f32(&q, i), dd[i] = ocr_tensor_get_f32(&dout, i);
    for (int64_t i = 0; i < nkv; i++) kd[i] = ocr_tensor_get_f32(&kv, i);
    const DropoutParams *d = &c->drop;
    for (int64_t e = 0; e < np; e++) {
        const int active = d->training && d->p > 0.0f;
        const int keep = !active || ocr_rng_uniform(d->seed, d->stream, d->offset + (uint64_t)e) >= d->p;
        F[e] = keep ? (active ? 1.0 / (1.0 - d->p) : 1.0) : 0.0;
    }
    XRef r = {c, qd, kd, dd, F, malloc((size_t)nq * 8), malloc((size_t)np * 8)};
    xref_forward(&r, qd, kd);
    const int64_t nmax = nq > nkv ? (nq > np ? nq : np) : (nkv > np ? nkv : np);
    float *got = malloc((size_t)nmax * sizeof(float));
    const double eps = ocr_test_dtype_eps(c->dt);
    char what[160];
    ocr_tensor_to_f32(&out, got);
    snprintf(what, sizeof what, "%s: out", name);
    ck_assert_msg(ocr_test_allclose_f64(got, r.out, nq, 2 * eps + 2e-6, 2 * eps + 1e-5, what), "%s", what);
    ocr_tensor_to_f32(&probs, got);
    snprintf(what, sizeof what, "%s: probs", name);
    ck_assert_msg(ocr_test_allclose_f64(got, r.P, np, 1e-7, 1e-6, what), "%s", what);
    // Gradients against central differences of the reference loss Σ dout·out.
    const double tol = 1e-5 + 12 * eps;
    double *num = malloc((size_t)nmax * 8);
    ocr_test_numeric_grad(num, qd, nq, xref_loss_q, &r, 1e-6);
    ocr_tensor_to_f32(&dq, got);
    double err = ocr_test_rel_error(got, num, nq);
    ck_assert_msg(err < tol, "%s: dq rel error %g > %g", name, err, tol);
    ocr_test_numeric_grad(num, kd, nkv, xref_loss_kv, &r, 1e-6);
    ocr_tensor_to_f32(&dkv, got);
    err = ocr_test_rel_error(got, num, nkv);
    ck_assert_msg(err < tol, "%s: dkv rel error %g > %g", name, err, tol);
    double mx = 0;
    for (int64_t i = 0; i < nkv; i++) mx = fmax(mx, fabs(num[i]));
    ck_assert_msg(mx > 1e-3, "%s: degenerate test gradient", name);
    free(qs), free(ks), free(gs), free(qd), free(kd), free(dd), free(F), free(r.out), free(r.P), free(got), free(num);
    OcrTensor *all[] = {&q, &kv, &dout, &out, &probs, &dq, &dkv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ocr_tensor_free(all[i]);
}

START_TEST(test_attention_cross) {
    XCfg c = {2, 5, 7, 2, 3, 0.6f, no_dropout(), OCR_F32};
    run_cross(&c, "cross f32 Tq 5 Tk 7");
    c.Tq = 9, c.Tk = 4;
    run_cross(&c, "cross f32 Tq 9 Tk 4");
    c.drop = drop(0.3f, OCR_DROPOUT_UPSCALE_IN_TRAIN, 1);
    run_cross(&c, "cross f32 with dropout");
    // NRTR's decoder over the memory (Tq 11, Tk 40, head dim 32), on the small-matrix loops.
    XCfg n = {3, 11, 40, 2, 32, 1.0f / sqrtf(32.0f), no_dropout(), OCR_F32};
    run_cross(&n, "cross NRTR shape");
    n.dt = OCR_BF16;
    run_cross(&n, "cross NRTR shape, bf16");
}
END_TEST

// Cross-attention over kv equal to qkv's [k | v] and q equal to its q gives self-attention's
// results bit for bit (the same loops, other strides).
START_TEST(test_attention_cross_matches_self) {
    const int B = 3, T = 10, H = 2, D = 6, C = H * D;
    const int64_t nq = (int64_t)B * T * 3 * C;
    float *qs = malloc((size_t)nq * sizeof(float)), *gs = malloc((size_t)B * T * C * sizeof(float));
    ocr_test_fill_uniform(qs, nq, 5, -1, 1);
    ocr_test_fill_uniform(gs, (int64_t)B * T * C, 6, -1, 1);
    float *qo = malloc((size_t)B * T * C * sizeof(float)), *kvo = malloc((size_t)B * T * 2 * C * sizeof(float));
    for (int64_t r = 0; r < (int64_t)B * T; r++) {
        memcpy(qo + r * C, qs + r * 3 * C, (size_t)C * sizeof(float));
        memcpy(kvo + r * 2 * C, qs + r * 3 * C + C, (size_t)2 * C * sizeof(float));
    }
    OcrTensor qkv = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, 3 * C), qs);
    OcrTensor q = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, C), qo);
    OcrTensor kv = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, 2 * C), kvo);
    OcrTensor dout = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, C), gs);
    OcrTensor o1 = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, C), NULL);
    OcrTensor o2 = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, C), NULL);
    OcrTensor p1 = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(B, H, T, T), NULL);
    OcrTensor p2 = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(B, H, T, T), NULL);
    OcrTensor dqkv = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, 3 * C), NULL);
    OcrTensor dq = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, C), NULL);
    OcrTensor dkv = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(B, T, 2 * C), NULL);
    DropoutParams d = drop(0.2f, OCR_DROPOUT_UPSCALE_IN_TRAIN, 1);
    ocr_attention_forward(&o1, &p1, &qkv, NULL, H, 0.4f, d);
    ocr_attention_backward(&dqkv, &dout, &qkv, &p1, H, 0.4f, d);
    ocr_attention_cross_forward(&o2, &p2, &q, &kv, H, 0.4f, d);
    ocr_attention_cross_backward(&dq, &dkv, &dout, &q, &kv, &p2, H, 0.4f, d);
    ck_assert(memcmp(o1.data, o2.data, ocr_tensor_bytes(&o1)) == 0);
    ck_assert(memcmp(p1.data, p2.data, ocr_tensor_bytes(&p1)) == 0);
    const float *g = dqkv.data, *gq = dq.data, *gkv = dkv.data;
    for (int64_t r = 0; r < (int64_t)B * T; r++) {
        ck_assert(memcmp(g + r * 3 * C, gq + r * C, (size_t)C * sizeof(float)) == 0);
        ck_assert(memcmp(g + r * 3 * C + C, gkv + r * 2 * C, (size_t)2 * C * sizeof(float)) == 0);
    }
    free(qs), free(gs), free(qo), free(kvo);
    OcrTensor *all[] = {&qkv, &q, &kv, &dout, &o1, &o2, &p1, &p2, &dqkv, &dq, &dkv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ocr_tensor_free(all[i]);
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
    tcase_add_test(tc, test_attention_cross);
    tcase_add_test(tc, test_attention_cross_matches_self);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

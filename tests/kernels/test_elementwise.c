// Elementwise and layout ops: channel_scale (SE gating), add/add_backward, accumulate,
// scale_forward, zero_tensor, concat along the last dim, permute. Forward against double
// references, backward against finite differences of Σ dout·out, dtype combinations,
// aliasing where ops.h allows it, and thread-count invariance.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "tests/common/test_util.h"

static float *fvec(int64_t n) { return malloc((size_t)(n > 0 ? n : 1) * sizeof(float)); }
static double *dvec(int64_t n) { return malloc((size_t)(n > 0 ? n : 1) * sizeof(double)); }
static void to_double(double *d, const float *f, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = f[i];
}
static void fetch(float *dst, const OcrTensor *t) { ocr_tensor_to_f32(t, dst); }
static void round_to(float *v, int64_t n, ocr_dtype_t dt) {
    OcrTensor t = ocr_test_tensor(dt, 1, OCR_SHAPE(n), v);
    ocr_tensor_to_f32(&t, v);
    ocr_tensor_free(&t);
}
static const ocr_dtype_t FLOAT_DTYPES[3] = {OCR_F32, OCR_F16, OCR_BF16};

// ---- channel_scale ----------------------------------------------------------------------

// p = [x (N·HW·C) | s (N·C)]; loss = Σ dout · x · s[n, c].
typedef struct {
    int64_t N, HW, C;
    const double *dout;
} ScaleRef;

static void ref_channel_scale(double *y, const double *p, const ScaleRef *r) {
    const double *x = p, *s = p + r->N * r->HW * r->C;
    for (int64_t n = 0; n < r->N; n++)
        for (int64_t q = 0; q < r->HW; q++)
            for (int64_t c = 0; c < r->C; c++) {
                int64_t i = (n * r->HW + q) * r->C + c;
                y[i] = x[i] * s[n * r->C + c];
            }
}

static double channel_scale_loss(const double *p, void *vctx) {
    const ScaleRef *r = vctx;
    const int64_t n = r->N * r->HW * r->C;
    double *y = dvec(n), l = 0;
    ref_channel_scale(y, p, r);
    for (int64_t i = 0; i < n; i++) l += r->dout[i] * y[i];
    free(y);
    return l;
}

START_TEST(test_channel_scale) {
    const int64_t N = 3, H = 4, W = 5, C = 13, n = N * H * W * C, ns = N * C;
    float *xs = fvec(n), *ss = fvec(ns), *dys = fvec(n), *got = fvec(n), *first = fvec(n);
    double *p = dvec(n + ns), *y = dvec(n), *dyd = dvec(n), *num = dvec(n + ns);
    ocr_test_fill_uniform(xs, n, 1, -2.0f, 2.0f);
    ocr_test_fill_uniform(ss, ns, 2, 0.0f, 1.0f);
    ocr_test_fill_uniform(dys, n, 3, -1.0f, 1.0f);
    to_double(p, xs, n);
    to_double(p + n, ss, ns);
    to_double(dyd, dys, n);
    ScaleRef r = {N, H * W, C, dyd};
    OcrTensor x = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(N, H, W, C), xs);
    OcrTensor s = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(N, 1, 1, C), ss);
    OcrTensor out = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(N, H, W, C), NULL);
    OcrTensor dy = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(N, H, W, C), dys);
    OcrTensor dx = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(N, H, W, C), NULL);
    OcrTensor ds = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(N, 1, 1, C), NULL);
    ocr_channel_scale_forward(&out, &x, &s);
    ref_channel_scale(y, p, &r);
    fetch(got, &out);
    ck_assert(ocr_test_allclose_f64(got, y, n, 1e-7, 1e-6, "channel_scale forward"));

    ocr_test_numeric_grad(num, p, n + ns, channel_scale_loss, &r, 1e-6);
    for (int call = 0; call < 2; call++) {  // both gradients are assigned
        ocr_test_poison(&dx);
        ocr_test_poison(&ds);
        ocr_channel_scale_backward(&dx, &ds, &dy, &x, &s);
        fetch(got, &dx);
        ck_assert_msg(ocr_test_rel_error(got, num, n) < 1e-6, "dinp rel error %g", ocr_test_rel_error(got, num, n));
        ck_assert(ocr_test_allclose_f64(got, num, n, 1e-6, 1e-5, "channel_scale dinp"));
        fetch(got, &ds);
        ck_assert_msg(ocr_test_allclose_f64(got, num + n, ns, 1e-5, 1e-5, "channel_scale dscale"), "call %d", call);
    }
    // Either gradient alone.
    fetch(first, &ds);
    ocr_test_poison(&ds);
    ocr_channel_scale_backward(NULL, &ds, &dy, &x, &s);
    fetch(got, &ds);
    ck_assert(memcmp(got, first, ns * sizeof(float)) == 0);
    fetch(first, &dx);
    ocr_test_poison(&dx);
    ocr_channel_scale_backward(&dx, NULL, &dy, &x, &s);
    fetch(got, &dx);
    ck_assert(memcmp(got, first, n * sizeof(float)) == 0);

    // Low precision (inp/out/dout f16 or bf16, scale in another dtype) vs the f32 kernel.
    for (int k = 1; k < 3; k++) {
        ocr_dtype_t dt = FLOAT_DTYPES[k], st = FLOAT_DTYPES[3 - k];
        float *xr = fvec(n), *sr = fvec(ns), *dr = fvec(n), *ref = fvec(n);
        memcpy(xr, xs, n * sizeof(float));
        memcpy(sr, ss, ns * sizeof(float));
        memcpy(dr, dys, n * sizeof(float));
        round_to(xr, n, dt);
        round_to(sr, ns, st);
        round_to(dr, n, dt);
        OcrTensor t[2][6];  // x s out dy dx ds
        for (int q = 0; q < 2; q++) {
            t[q][0] = ocr_test_tensor(q ? dt : OCR_F32, 4, OCR_SHAPE(N, H, W, C), xr);
            t[q][1] = ocr_test_tensor(q ? st : OCR_F32, 4, OCR_SHAPE(N, 1, 1, C), sr);
            t[q][2] = ocr_test_tensor(q ? dt : OCR_F32, 4, OCR_SHAPE(N, H, W, C), NULL);
            t[q][3] = ocr_test_tensor(q ? dt : OCR_F32, 4, OCR_SHAPE(N, H, W, C), dr);
            t[q][4] = ocr_test_tensor(q ? dt : OCR_F32, 4, OCR_SHAPE(N, H, W, C), NULL);
            t[q][5] = ocr_test_tensor(q ? st : OCR_F32, 4, OCR_SHAPE(N, 1, 1, C), NULL);
            ocr_channel_scale_forward(&t[q][2], &t[q][0], &t[q][1]);
            ocr_channel_scale_backward(&t[q][4], &t[q][5], &t[q][3], &t[q][0], &t[q][1]);
        }
        for (int j = 2; j < 6; j++) {
            if (j == 3) continue;
            int64_t m = j == 5 ? ns : n;
            fetch(ref, &t[0][j]);
            fetch(got, &t[1][j]);
            double u = ocr_test_dtype_eps(t[1][j].dtype);
            ck_assert_msg(ocr_test_allclose_f32(got, ref, m, 1e-7, 1.01 * u, "channel_scale low precision"),
                          "tensor %d dtype %s", j, ocr_dtype_name(t[1][j].dtype));
        }
        for (int q = 0; q < 2; q++)
            for (int j = 0; j < 6; j++) ocr_tensor_free(&t[q][j]);
        free(xr); free(sr); free(dr); free(ref);
    }
    ocr_tensor_free(&x); ocr_tensor_free(&s); ocr_tensor_free(&out); ocr_tensor_free(&dy);
    ocr_tensor_free(&dx); ocr_tensor_free(&ds);
    free(xs); free(ss); free(dys); free(got); free(first); free(p); free(y); free(dyd); free(num);
}
END_TEST

// ---- add, accumulate, scale, zero -------------------------------------------------------

// out = a + b over every dtype combination, then aliasing out == a and out == b.
START_TEST(test_add) {
    const int64_t n = 2 * 3 * 7 * 11;
    const int64_t *shape = OCR_SHAPE(2, 3, 7, 11);
    float *as = fvec(n), *bs = fvec(n), *got = fvec(n);
    double *ref = dvec(n);
    for (int ia = 0; ia < 3; ia++)
        for (int ib = 0; ib < 3; ib++)
            for (int io = 0; io < 3; io++) {
                ocr_test_fill_uniform(as, n, 10 + ia, -2.0f, 2.0f);
                ocr_test_fill_uniform(bs, n, 20 + ib, -2.0f, 2.0f);
                round_to(as, n, FLOAT_DTYPES[ia]);
                round_to(bs, n, FLOAT_DTYPES[ib]);
                for (int64_t i = 0; i < n; i++) ref[i] = (double)(float)((double)as[i] + (double)bs[i]);
                OcrTensor a = ocr_test_tensor(FLOAT_DTYPES[ia], 4, shape, as);
                OcrTensor b = ocr_test_tensor(FLOAT_DTYPES[ib], 4, shape, bs);
                OcrTensor out = ocr_test_tensor(FLOAT_DTYPES[io], 4, shape, NULL);
                ocr_add_forward(&out, &a, &b);
                fetch(got, &out);
                double u = ocr_test_dtype_eps(FLOAT_DTYPES[io]);
                char what[64];
                snprintf(what, sizeof what, "add %d+%d->%d", ia, ib, io);
                ck_assert_msg(ocr_test_allclose_f64(got, ref, n, 0, 1.01 * u, what), "%s", what);
                ocr_tensor_free(&a);
                ocr_tensor_free(&b);
                ocr_tensor_free(&out);
            }
    for (int k = 0; k < 3; k++) {
        ocr_dtype_t dt = FLOAT_DTYPES[k];
        ocr_test_fill_uniform(as, n, 30, -2.0f, 2.0f);
        ocr_test_fill_uniform(bs, n, 31, -2.0f, 2.0f);
        OcrTensor a = ocr_test_tensor(dt, 4, shape, as);
        OcrTensor b = ocr_test_tensor(dt, 4, shape, bs);
        OcrTensor out = ocr_test_tensor(dt, 4, shape, NULL);
        float *expect = fvec(n);
        ocr_add_forward(&out, &a, &b);
        fetch(expect, &out);
        ocr_add_forward(&a, &a, &b);  // out aliases a
        fetch(got, &a);
        ck_assert_msg(memcmp(got, expect, n * sizeof(float)) == 0, "add out==a (%s)", ocr_dtype_name(dt));
        ocr_tensor_free(&a);
        a = ocr_test_tensor(dt, 4, shape, as);
        ocr_add_forward(&b, &a, &b);  // out aliases b
        fetch(got, &b);
        ck_assert_msg(memcmp(got, expect, n * sizeof(float)) == 0, "add out==b (%s)", ocr_dtype_name(dt));
        free(expect);
        ocr_tensor_free(&a);
        ocr_tensor_free(&b);
        ocr_tensor_free(&out);
    }
    free(as); free(bs); free(got); free(ref);
}
END_TEST

// add_backward: da = db = dout (assigned, converted into each gradient's dtype); a NULL side
// is skipped. Checked against finite differences of Σ dout·(a + b).
static double add_loss(const double *p, void *vctx) {
    const double *dout = vctx;
    const int64_t n = 3 * 5 * 9;
    double l = 0;
    for (int64_t i = 0; i < n; i++) l += dout[i] * (p[i] + p[n + i]);
    return l;
}

START_TEST(test_add_backward) {
    const int64_t n = 3 * 5 * 9;
    float *dys = fvec(n), *got = fvec(n);
    double *dyd = dvec(n), *p = dvec(2 * n), *num = dvec(2 * n);
    ocr_test_fill_uniform(dys, n, 40, -2.0f, 2.0f);
    to_double(dyd, dys, n);
    ocr_test_fill_uniform_double(p, 2 * n, 41, -1, 1);
    ocr_test_numeric_grad(num, p, 2 * n, add_loss, dyd, 1e-6);
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 3; j++) {
            OcrTensor dy = ocr_test_tensor(OCR_F32, 3, OCR_SHAPE(3, 5, 9), dys);
            OcrTensor da = ocr_test_tensor(FLOAT_DTYPES[k], 3, OCR_SHAPE(3, 5, 9), NULL);
            OcrTensor db = ocr_test_tensor(FLOAT_DTYPES[j], 3, OCR_SHAPE(3, 5, 9), NULL);
            ocr_add_backward(&da, &db, &dy);
            fetch(got, &da);
            ck_assert(ocr_test_allclose_f64(got, num, n, 1e-6, 1.01 * ocr_test_dtype_eps(da.dtype), "add da"));
            fetch(got, &db);
            ck_assert(ocr_test_allclose_f64(got, num + n, n, 1e-6, 1.01 * ocr_test_dtype_eps(db.dtype), "add db"));
            ocr_test_poison(&da);
            ocr_add_backward(&da, NULL, &dy);
            fetch(got, &da);
            ck_assert(ocr_test_allclose_f64(got, num, n, 1e-6, 1.01 * ocr_test_dtype_eps(da.dtype), "add da alone"));
            ocr_test_poison(&db);
            ocr_add_backward(NULL, &db, &dy);
            fetch(got, &db);
            ck_assert(ocr_test_allclose_f64(got, num + n, n, 1e-6, 1.01 * ocr_test_dtype_eps(db.dtype), "db alone"));
            ocr_tensor_free(&dy);
            ocr_tensor_free(&da);
            ocr_tensor_free(&db);
        }
    // Low-precision dout into a same-dtype gradient is an exact copy (NaN payloads included).
    OcrTensor dy16 = ocr_test_tensor(OCR_F16, 1, OCR_SHAPE(4), (float[]){1.5f, -0.0f, NAN, 65504.0f});
    OcrTensor da16 = ocr_test_tensor(OCR_F16, 1, OCR_SHAPE(4), NULL);
    ocr_add_backward(&da16, NULL, &dy16);
    ck_assert(memcmp(da16.data, dy16.data, 4 * sizeof(uint16_t)) == 0);
    ocr_tensor_free(&dy16);
    ocr_tensor_free(&da16);
    free(dys); free(got); free(dyd); free(p); free(num);
}
END_TEST

// accumulate: dst += src; twice gives 2·src on top of the start value, across dtypes.
START_TEST(test_accumulate) {
    const int64_t n = 4 * 6 * 11;
    float *d0 = fvec(n), *ss = fvec(n), *got = fvec(n);
    double *ref = dvec(n);
    for (int kd = 0; kd < 3; kd++)
        for (int ks = 0; ks < 3; ks++) {
            ocr_test_fill_uniform(d0, n, 50, -1.0f, 1.0f);
            ocr_test_fill_uniform(ss, n, 51, -1.0f, 1.0f);
            round_to(d0, n, FLOAT_DTYPES[kd]);
            round_to(ss, n, FLOAT_DTYPES[ks]);
            OcrTensor dst = ocr_test_tensor(FLOAT_DTYPES[kd], 3, OCR_SHAPE(4, 6, 11), d0);
            OcrTensor src = ocr_test_tensor(FLOAT_DTYPES[ks], 3, OCR_SHAPE(4, 6, 11), ss);
            ocr_accumulate(&dst, &src);
            ocr_accumulate(&dst, &src);
            fetch(got, &dst);
            for (int64_t i = 0; i < n; i++) ref[i] = (double)d0[i] + 2.0 * ss[i];
            // Two roundings into dst's dtype.
            double u = ocr_test_dtype_eps(FLOAT_DTYPES[kd]);
            char what[48];
            snprintf(what, sizeof what, "accumulate %d += %d", kd, ks);
            ck_assert_msg(ocr_test_allclose_f64(got, ref, n, 4 * u, 2.02 * u, what), "%s", what);
            ocr_tensor_free(&dst);
            ocr_tensor_free(&src);
        }
    // dst aliasing src doubles it.
    OcrTensor t = ocr_test_tensor(OCR_F32, 1, OCR_SHAPE(3), (float[]){1, -2, 0.25f});
    ocr_accumulate(&t, &t);
    ck_assert_float_eq(ocr_tensor_get_f32(&t, 0), 2.0f);
    ck_assert_float_eq(ocr_tensor_get_f32(&t, 1), -4.0f);
    ck_assert_float_eq(ocr_tensor_get_f32(&t, 2), 0.5f);
    ocr_tensor_free(&t);
    free(d0); free(ss); free(got); free(ref);
}
END_TEST

// scale_forward: out = alpha·inp (any dtypes, in place allowed); zero_tensor on every dtype.
START_TEST(test_scale_and_zero) {
    const int64_t n = 5 * 13;
    float *xs = fvec(n), *got = fvec(n);
    double *ref = dvec(n);
    ocr_test_fill_uniform(xs, n, 60, -3.0f, 3.0f);
    for (int ki = 0; ki < 3; ki++)
        for (int ko = 0; ko < 3; ko++) {
            float *xr = fvec(n);
            memcpy(xr, xs, n * sizeof(float));
            round_to(xr, n, FLOAT_DTYPES[ki]);
            for (int64_t i = 0; i < n; i++) ref[i] = -0.37 * (double)xr[i];
            OcrTensor x = ocr_test_tensor(FLOAT_DTYPES[ki], 2, OCR_SHAPE(5, 13), xr);
            OcrTensor y = ocr_test_tensor(FLOAT_DTYPES[ko], 2, OCR_SHAPE(5, 13), NULL);
            ocr_scale_forward(&y, &x, -0.37f);
            fetch(got, &y);
            ck_assert(ocr_test_allclose_f64(got, ref, n, 1e-7, 1.01 * ocr_test_dtype_eps(FLOAT_DTYPES[ko]) + 1e-7,
                                            "scale"));
            if (ki == ko) {
                float *expect = fvec(n);
                fetch(expect, &y);
                ocr_scale_forward(&x, &x, -0.37f);
                fetch(got, &x);
                ck_assert_msg(memcmp(got, expect, n * sizeof(float)) == 0, "in-place scale differs");
                free(expect);
            }
            ocr_tensor_free(&x);
            ocr_tensor_free(&y);
            free(xr);
        }
    const ocr_dtype_t all[5] = {OCR_F32, OCR_F16, OCR_BF16, OCR_I32, OCR_U8};
    for (int k = 0; k < 5; k++) {
        OcrTensor t;
        ck_assert(ocr_tensor_alloc(&t, all[k], ocr_cpu(), 2, OCR_SHAPE(3, 7), OCR_MEM_ACTIVATIONS) == OCR_OK);
        ocr_test_poison(&t);
        ocr_zero_tensor(&t);
        for (int64_t i = 0; i < 21; i++)
            ck_assert_msg(ocr_tensor_get_f32(&t, i) == 0.0f, "zero %s", ocr_dtype_name(all[k]));
        const unsigned char *bytes = t.data;
        for (size_t i = 0; i < ocr_tensor_bytes(&t); i++) ck_assert(bytes[i] == 0);
        ocr_tensor_free(&t);
    }
    free(xs); free(got); free(ref);
}
END_TEST

// ---- concat -----------------------------------------------------------------------------

// Three inputs (5, 8 and 3 channels; 3-d and 4-d) in mixed dtypes into each output dtype,
// then the split back, NULL dinputs included, and finite differences.
static double concat_loss(const double *p, void *vctx) {
    // p = [a (R·5) | b (R·8) | c (R·3)], out row = [a | b | c]; dout is (R, 16).
    const double *dout = vctx;
    const int64_t R = 2 * 3 * 4, widths[3] = {5, 8, 3};
    double l = 0;
    int64_t base = 0, off = 0;
    for (int k = 0; k < 3; k++) {
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < widths[k]; c++) l += dout[r * 16 + off + c] * p[base + r * widths[k] + c];
        base += R * widths[k];
        off += widths[k];
    }
    return l;
}

START_TEST(test_concat) {
    const int64_t R = 2 * 3 * 4, widths[3] = {5, 8, 3}, Ct = 16;
    float *vals[3], *got = fvec(R * Ct), *dys = fvec(R * Ct);
    for (int k = 0; k < 3; k++) {
        vals[k] = fvec(R * widths[k]);
        ocr_test_fill_uniform(vals[k], R * widths[k], 70 + k, -2.0f, 2.0f);
    }
    for (int ko = 0; ko < 3; ko++)
        for (int rot = 0; rot < 3; rot++) {
            OcrTensor in[3];
            const OcrTensor *inp[3];
            for (int k = 0; k < 3; k++) {
                ocr_dtype_t dt = FLOAT_DTYPES[(k + rot) % 3];
                in[k] = ocr_test_tensor(dt, 4, OCR_SHAPE(2, 3, 4, widths[k]), vals[k]);
                inp[k] = &in[k];
            }
            OcrTensor out = ocr_test_tensor(FLOAT_DTYPES[ko], 4, OCR_SHAPE(2, 3, 4, Ct), NULL);
            ocr_concat_forward(&out, inp, 3);
            fetch(got, &out);
            for (int64_t r = 0; r < R; r++) {
                int64_t off = 0;
                for (int k = 0; k < 3; k++) {
                    for (int64_t c = 0; c < widths[k]; c++) {
                        // The input's stored value, rounded into the output dtype.
                        float v = ocr_tensor_get_f32(&in[k], r * widths[k] + c);
                        OcrTensor one = ocr_test_tensor(FLOAT_DTYPES[ko], 1, OCR_SHAPE(1), &v);
                        float e = ocr_tensor_get_f32(&one, 0);
                        ocr_tensor_free(&one);
                        ck_assert_msg(got[r * Ct + off + c] == e, "concat row %lld part %d col %lld: %g vs %g",
                                      (long long)r, k, (long long)c, got[r * Ct + off + c], e);
                    }
                    off += widths[k];
                }
            }
            for (int k = 0; k < 3; k++) ocr_tensor_free(&in[k]);
            ocr_tensor_free(&out);
        }

    // Backward: finite differences, every NULL position, mixed dtypes.
    ocr_test_fill_uniform(dys, R * Ct, 80, -1.0f, 1.0f);
    double *dyd = dvec(R * Ct), *p = dvec(R * Ct), *num = dvec(R * Ct);
    to_double(dyd, dys, R * Ct);
    ocr_test_fill_uniform_double(p, R * Ct, 81, -1, 1);
    ocr_test_numeric_grad(num, p, R * Ct, concat_loss, dyd, 1e-6);
    OcrTensor dy = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(2, 3, 4, Ct), dys);
    for (int skip = -1; skip < 3; skip++) {
        OcrTensor d[3];
        OcrTensor *dp[3];
        for (int k = 0; k < 3; k++) {
            d[k] = ocr_test_tensor(FLOAT_DTYPES[k], 4, OCR_SHAPE(2, 3, 4, widths[k]), NULL);
            dp[k] = k == skip ? NULL : &d[k];
        }
        ocr_concat_backward(dp, 3, &dy);
        int64_t base = 0;
        for (int k = 0; k < 3; k++) {
            fetch(got, &d[k]);
            if (k == skip) {
                for (int64_t i = 0; i < R * widths[k]; i++) ck_assert_msg(isnan(got[i]), "skipped dinput written");
            } else {
                ck_assert_msg(ocr_test_allclose_f64(got, num + base, R * widths[k], 1e-6,
                                                    1.01 * ocr_test_dtype_eps(d[k].dtype), "concat backward"),
                              "part %d skip %d", k, skip);
            }
            base += R * widths[k];
            ocr_tensor_free(&d[k]);
        }
    }
    // 2-d inputs with a single part: a plain copy.
    OcrTensor a = ocr_test_tensor(OCR_BF16, 2, OCR_SHAPE(3, 4), vals[0]);
    OcrTensor o = ocr_test_tensor(OCR_BF16, 2, OCR_SHAPE(3, 4), NULL);
    const OcrTensor *one[1] = {&a};
    ocr_concat_forward(&o, one, 1);
    ck_assert(memcmp(o.data, a.data, 12 * sizeof(uint16_t)) == 0);
    ocr_tensor_free(&a);
    ocr_tensor_free(&o);
    ocr_tensor_free(&dy);
    for (int k = 0; k < 3; k++) free(vals[k]);
    free(got); free(dys); free(dyd); free(p); free(num);
}
END_TEST

// ---- permute ----------------------------------------------------------------------------

static int64_t ref_permute_index(const int64_t *ishape, int nd, const int *perm, int64_t oi) {
    // Decompose the output index over out.shape[i] = ishape[perm[i]], then rebuild the input index.
    int64_t coord[4], rem = oi;
    for (int i = nd - 1; i >= 0; i--) {
        coord[i] = rem % ishape[perm[i]];
        rem /= ishape[perm[i]];
    }
    int64_t icoord[4];
    for (int i = 0; i < nd; i++) icoord[perm[i]] = coord[i];
    int64_t idx = 0;
    for (int i = 0; i < nd; i++) idx = idx * ishape[i] + icoord[i];
    return idx;
}

static int next_perm(int *a, int n) {
    int i = n - 2;
    while (i >= 0 && a[i] >= a[i + 1]) i--;
    if (i < 0) return 0;
    int j = n - 1;
    while (a[j] <= a[i]) j--;
    int t = a[i];
    a[i] = a[j];
    a[j] = t;
    for (int l = i + 1, r = n - 1; l < r; l++, r--) {
        t = a[l];
        a[l] = a[r];
        a[r] = t;
    }
    return 1;
}

typedef struct {
    const int64_t *ishape;
    int nd;
    const int *perm;
    const double *dout;
    int64_t n;
} PermRef;

static double permute_loss(const double *x, void *vctx) {
    const PermRef *r = vctx;
    double l = 0;
    for (int64_t o = 0; o < r->n; o++) l += r->dout[o] * x[ref_permute_index(r->ishape, r->nd, r->perm, o)];
    return l;
}

// Every permutation of 2-, 3- and 4-d shapes, same and mixed dtypes; the backward is the
// inverse permutation (finite differences on a few).
START_TEST(test_permute) {
    const int64_t shapes[3][4] = {{5, 7, 1, 1}, {3, 4, 5, 1}, {2, 3, 5, 7}};
    const int nds[3] = {2, 3, 4};
    for (int si = 0; si < 3; si++) {
        const int nd = nds[si];
        const int64_t *ishape = shapes[si];
        int64_t n = 1;
        for (int i = 0; i < nd; i++) n *= ishape[i];
        float *xs = fvec(n), *got = fvec(n), *back = fvec(n), *dys = fvec(n);
        ocr_test_fill_uniform(xs, n, 90 + si, -2.0f, 2.0f);
        ocr_test_fill_uniform(dys, n, 95 + si, -1.0f, 1.0f);
        int perm[4] = {0, 1, 2, 3};
        int count = 0;
        do {
            int64_t oshape[4];
            for (int i = 0; i < nd; i++) oshape[i] = ishape[perm[i]];
            for (int ki = 0; ki < 3; ki++) {
                int ko = (ki + count) % 3;  // same dtype every third case, mixed otherwise
                if (count % 3 == 0) ko = ki;
                float *xr = fvec(n);
                memcpy(xr, xs, n * sizeof(float));
                round_to(xr, n, FLOAT_DTYPES[ki]);
                OcrTensor x = ocr_test_tensor(FLOAT_DTYPES[ki], nd, ishape, xr);
                OcrTensor y = ocr_test_tensor(FLOAT_DTYPES[ko], nd, oshape, NULL);
                ocr_permute_forward(&y, &x, perm);
                fetch(got, &y);
                for (int64_t o = 0; o < n; o++) {
                    float v = xr[ref_permute_index(ishape, nd, perm, o)];
                    OcrTensor one = ocr_test_tensor(FLOAT_DTYPES[ko], 1, OCR_SHAPE(1), &v);
                    float e = ocr_tensor_get_f32(&one, 0);
                    ocr_tensor_free(&one);
                    ck_assert_msg(got[o] == e, "permute nd %d perm %d%d%d%d at %lld", nd, perm[0], perm[1], perm[2],
                                  perm[3], (long long)o);
                }
                // permute_backward maps y back onto x's layout (exactly, when no rounding happened).
                OcrTensor dx = ocr_test_tensor(FLOAT_DTYPES[ki], nd, ishape, NULL);
                ocr_permute_backward(&dx, &y, perm);
                fetch(back, &dx);
                if (FLOAT_DTYPES[ko] == FLOAT_DTYPES[ki] || FLOAT_DTYPES[ko] == OCR_F32)
                    ck_assert_msg(memcmp(back, xr, n * sizeof(float)) == 0, "permute_backward is not the inverse");
                ocr_tensor_free(&x);
                ocr_tensor_free(&y);
                ocr_tensor_free(&dx);
                free(xr);
            }
            if (count % 5 == 0) {
                // Finite differences of Σ dout·permute(x).
                double *xd = dvec(n), *dyd = dvec(n), *num = dvec(n);
                to_double(xd, xs, n);
                to_double(dyd, dys, n);
                PermRef r = {ishape, nd, perm, dyd, n};
                ocr_test_numeric_grad(num, xd, n, permute_loss, &r, 1e-6);
                OcrTensor dy = ocr_test_tensor(OCR_F32, nd, oshape, dys);
                OcrTensor dx = ocr_test_tensor(OCR_F32, nd, ishape, NULL);
                ocr_permute_backward(&dx, &dy, perm);
                fetch(got, &dx);
                ck_assert(ocr_test_allclose_f64(got, num, n, 1e-7, 1e-6, "permute backward"));
                ocr_tensor_free(&dy);
                ocr_tensor_free(&dx);
                free(xd); free(dyd); free(num);
            }
            count++;
        } while (next_perm(perm, nd));
        ck_assert_int_eq(count, nd == 2 ? 2 : nd == 3 ? 6 : 24);
        free(xs); free(got); free(back); free(dys);
    }
}
END_TEST

// ---- thread-count invariance on sizes that take the OpenMP paths ------------------------

START_TEST(test_threads_invariant) {
    const int64_t N = 4, H = 16, W = 40, C = 24, n = N * H * W * C;
    const int64_t *shape = OCR_SHAPE(N, H, W, C);
    float *xs = fvec(n), *ss = fvec(N * C), *res[2][6];
    ocr_test_fill_uniform(xs, n, 100, -2.0f, 2.0f);
    ocr_test_fill_uniform(ss, N * C, 101, 0.0f, 1.0f);
    int saved = omp_get_max_threads();
    for (int q = 0; q < 2; q++) {
        omp_set_num_threads(q ? 3 : 1);
        for (int j = 0; j < 6; j++) res[q][j] = fvec(n);
        OcrTensor x = ocr_test_tensor(OCR_F32, 4, shape, xs);
        OcrTensor xb = ocr_test_tensor(OCR_BF16, 4, shape, xs);
        OcrTensor s = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(N, 1, 1, C), ss);
        OcrTensor y = ocr_test_tensor(OCR_F32, 4, shape, NULL);
        OcrTensor ds = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(N, 1, 1, C), NULL);
        OcrTensor yh = ocr_test_tensor(OCR_F16, 4, shape, NULL);
        ocr_channel_scale_forward(&y, &x, &s);
        fetch(res[q][0], &y);
        ocr_channel_scale_backward(&y, &ds, &x, &x, &s);
        fetch(res[q][1], &ds);
        ocr_add_forward(&yh, &x, &xb);
        fetch(res[q][2], &yh);
        OcrTensor yp = ocr_test_tensor(OCR_F32, 4, OCR_SHAPE(N, C, W, H), NULL);
        ocr_permute_forward(&yp, &x, (const int[]){0, 3, 2, 1});
        fetch(res[q][3], &yp);
        OcrTensor yc = ocr_test_tensor(OCR_F16, 4, OCR_SHAPE(N, H, W, 2 * C), NULL);
        const OcrTensor *parts[2] = {&x, &xb};
        ocr_concat_forward(&yc, parts, 2);
        float *tmp = fvec(2 * n);
        fetch(tmp, &yc);
        memcpy(res[q][4], tmp, n * sizeof(float));  // the two halves of the flat output
        memcpy(res[q][5], tmp + n, n * sizeof(float));
        free(tmp);
        ocr_tensor_free(&x); ocr_tensor_free(&xb); ocr_tensor_free(&s); ocr_tensor_free(&y);
        ocr_tensor_free(&ds); ocr_tensor_free(&yh); ocr_tensor_free(&yp); ocr_tensor_free(&yc);
    }
    omp_set_num_threads(saved);
    const int64_t sizes[6] = {n, N * C, n, n, n, n};
    for (int j = 0; j < 6; j++)
        ck_assert_msg(memcmp(res[0][j], res[1][j], sizes[j] * sizeof(float)) == 0, "result %d depends on threads", j);
    // Spot-check the parallel results against the references.
    for (int64_t i = 0; i < n; i += 97) {
        const int64_t nn = i / (H * W * C), h = i / (W * C) % H, w = i / C % W, c = i % C;
        ck_assert_float_eq(res[1][0][i], xs[i] * ss[nn * C + c]);
        ck_assert_float_eq(res[1][3][((nn * C + c) * W + w) * H + h], xs[i]);
        // concat row (n, h, w) = [x | bf16(x)] in f16: the first C entries of the row.
        const int64_t row = i / C;
        const float *cat = row * 2 * C < n ? res[1][4] + row * 2 * C : res[1][5] + row * 2 * C - n;
        ck_assert_float_eq_tol(cat[c], xs[i], fabsf(xs[i]) * 1e-3f + 1e-7f);
    }
    for (int q = 0; q < 2; q++)
        for (int j = 0; j < 6; j++) free(res[q][j]);
    free(xs); free(ss);
}
END_TEST

int main(void) {
    Suite *s = suite_create("kernels_elementwise");
    TCase *tc = tcase_create("elementwise");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_channel_scale);
    tcase_add_test(tc, test_add);
    tcase_add_test(tc, test_add_backward);
    tcase_add_test(tc, test_accumulate);
    tcase_add_test(tc, test_scale_and_zero);
    tcase_add_test(tc, test_concat);
    tcase_add_test(tc, test_permute);
    tcase_add_test(tc, test_threads_invariant);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

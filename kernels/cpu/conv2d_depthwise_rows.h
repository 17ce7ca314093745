// The row loops of the depthwise convolution (conv2d_depthwise.c), written once for the two kinds
// of map storage and included twice by that file:
//   DW_T float:      fp32 maps used in place, f16/bf16 maps widened a block of rows at a time
//                    into a buffer (ocr_cpu_rows_in) and read from it as fp32;
//   DW_T ocr_bf16_t: bf16 maps read where they lie, each operand widened in registers as the
//                    dot kernels load it (no block buffer, no widening pass).
// Widening is exact and every output lane sees the same FMAs in the same order, so both give the
// same bits. DW_NAME(x) names this instance's functions; DW_ROWS_IN(t, row, r0, rows, buf)
// gives the first of `rows` rows of `row` elements from row r0 of map t; DW_WIDEN(v) is one
// element as fp32. Not a header of its own: include only from conv2d_depthwise.c.

// Kernels of this instance: map · weight (forward, data gradient) and map · map (weight gradient).
typedef void (*DW_NAME(dot_mw_fn))(float *out, const float *init, const DW_T *a, const int64_t *aoff, const float *b,
                                   const int64_t *boff, int64_t n);
typedef void (*DW_NAME(dot2_mw_fn))(float *out0, float *out1, const float *init0, const float *init1, const DW_T *a,
                                    const int64_t *aoff, int64_t as, const float *b, const int64_t *boff, int64_t n);
typedef void (*DW_NAME(dot_mm_fn))(float *out, const float *init, const DW_T *a, const int64_t *aoff, const DW_T *b,
                                   const int64_t *boff, int64_t n);
typedef void (*DW_NAME(dot2_mm_fn))(float *out0, float *out1, const float *init0, const float *init1, const DW_T *a,
                                    const int64_t *aoff, int64_t as, const DW_T *b, const int64_t *boff, int64_t n);
typedef struct {
    DW_NAME(dot_mw_fn) mw32, mw8;
    DW_NAME(dot2_mw_fn) mw32x2, mw8x2;  // NULL: two single calls
    DW_NAME(dot_mm_fn) mm32, mm8;
    DW_NAME(dot2_mm_fn) mm32x2, mm8x2;
    void (*mw_rest)(float *out, const float *init, const DW_T *a, const int64_t *aoff, const float *b,
                    const int64_t *boff, int64_t n, int64_t width);
    void (*mm_rest)(float *out, const float *init, const DW_T *a, const int64_t *aoff, const DW_T *b,
                    const int64_t *boff, int64_t n, int64_t width);
} DW_NAME(Kernels);

// All channels of one pixel: blocks of 32, then of 8, then the scalar rest. X is mw or mm.
#define DW_CHANNELS(X, TB)                                                                                      \
    static inline void DW_NAME(channels_##X)(const DW_NAME(Kernels) * k, int64_t C, float *out, const float *init, \
                                             const DW_T *a, const int64_t *aoff, const TB *b, const int64_t *boff, \
                                             int64_t n) {                                                      \
        int64_t c = 0;                                                                                         \
        for (; c + 32 <= C; c += 32) k->X##32(out + c, OFF(init, c), a + c, aoff, b + c, boff, n);             \
        for (; c + 8 <= C; c += 8) k->X##8(out + c, OFF(init, c), a + c, aoff, b + c, boff, n);                \
        if (c < C) k->X##_rest(out + c, OFF(init, c), a + c, aoff, b + c, boff, n, C - c);                    \
    }                                                                                                          \
    /* Two outputs whose terms differ only by a shift `as` of the a operand. */                               \
    static inline void DW_NAME(channels2_##X)(const DW_NAME(Kernels) * k, int64_t C, float *out0, float *out1,  \
                                              const float *init0, const float *init1, const DW_T *a,          \
                                              const int64_t *aoff, int64_t as, const TB *b, const int64_t *boff, \
                                              int64_t n) {                                                     \
        int64_t c = 0;                                                                                         \
        if (k->X##32x2) {                                                                                      \
            for (; c + 32 <= C; c += 32)                                                                       \
                k->X##32x2(out0 + c, out1 + c, OFF(init0, c), OFF(init1, c), a + c, aoff, as, b + c, boff, n); \
            for (; c + 8 <= C; c += 8)                                                                         \
                k->X##8x2(out0 + c, out1 + c, OFF(init0, c), OFF(init1, c), a + c, aoff, as, b + c, boff, n);  \
        }                                                                                                      \
        if (c < C) {                                                                                           \
            DW_NAME(channels_##X)(k, C - c, out0 + c, OFF(init0, c), a + c, aoff, b + c, boff, n);             \
            DW_NAME(channels_##X)(k, C - c, out1 + c, OFF(init1, c), a + as + c, aoff, b + c, boff, n);        \
        }                                                                                                      \
    }
DW_CHANNELS(mw, float)
DW_CHANNELS(mm, DW_T)
#undef DW_CHANNELS

// ---- forward: output row oh of one image ---------------------------------------------------
// xs holds the image's input rows from row xs_row0 on; y is the output row (Wo·C, fp32).
// The tap list of a pixel depends only on which kernel columns fall inside the image, so it
// is rebuilt only when that range changes (at the borders).
static void DW_NAME(forward_row)(const DW_NAME(Kernels) * k, float *y, const DW_T *xs, int64_t xs_row0,
                                 const float *wt, const float *bias, const DwGeom *g, int64_t oh, int64_t *aoff,
                                 int64_t *boff) {
    const int64_t C = g->C, ih0 = oh * g->sh - g->ph;
    const int64_t kh_lo = max64(0, -ih0), kh_hi = min64(g->KH, g->H - ih0);
    int64_t cached_lo = -1, cached_hi = -1, nt = 0;
    for (int64_t ow = 0; ow < g->Wo; ow++) {
        const int64_t iw0 = ow * g->sw - g->pw;
        const int64_t kw_lo = max64(0, -iw0), kw_hi = min64(g->KW, g->W - iw0);
        float *yp = y + ow * C;
        if (kh_lo >= kh_hi || kw_lo >= kw_hi) {  // window entirely in the padding
            for (int64_t c = 0; c < C; c++) yp[c] = bias ? bias[c] : 0.0f;
            continue;
        }
        // The next pixel with the same tap columns shares the weight loads.
        const int pair = ow + 1 < g->Wo && max64(0, -(iw0 + g->sw)) == kw_lo &&
                         min64(g->KW, g->W - iw0 - g->sw) == kw_hi;
        if (kw_lo != cached_lo || kw_hi != cached_hi) {
            nt = 0;
            for (int64_t kh = kh_lo; kh < kh_hi; kh++)
                for (int64_t kw = kw_lo; kw < kw_hi; kw++, nt++) {
                    aoff[nt] = ((kh - kh_lo) * g->W + (kw - kw_lo)) * C;
                    boff[nt] = (kh * g->KW + kw) * C;
                }
            cached_lo = kw_lo, cached_hi = kw_hi;
        }
        const DW_T *xbase = xs + ((ih0 + kh_lo - xs_row0) * g->W + iw0 + kw_lo) * C;
        if (pair) {
            DW_NAME(channels2_mw)(k, C, yp, yp + C, bias, bias, xbase, aoff, g->sw * C, wt, boff, nt);
            ow++;
        } else {
            DW_NAME(channels_mw)(k, C, yp, bias, xbase, aoff, wt, boff, nt);
        }
    }
}

// Output rows [r0, r1) of the N·Ho rows, in blocks of up to R rows of one image: the block's
// input rows are read through DW_ROWS_IN (xbuf: its widening buffer where it needs one), its
// output rows computed into ybuf and rounded once (ybuf NULL for f32 output, written in place).
static void DW_NAME(forward_rows)(const DW_NAME(Kernels) * k, OcrTensor *out, const OcrTensor *inp,
                                  const float *wt, const float *bias, const DwGeom *g, int64_t r0, int64_t r1,
                                  int64_t R, float *xbuf, float *ybuf, int64_t *aoff, int64_t *boff) {
    const int64_t xrow = g->W * g->C, yrow = g->Wo * g->C;
    (void)xbuf;
    for (int64_t r = r0; r < r1;) {
        const int64_t n = r / g->Ho, oh0 = r % g->Ho;
        const int64_t nb = min64(R, min64(g->Ho - oh0, r1 - r));
        const int64_t lo = max64(0, oh0 * g->sh - g->ph);
        const int64_t hi = min64(g->H, (oh0 + nb - 1) * g->sh - g->ph + g->KH);
        const DW_T *xs = lo < hi ? DW_ROWS_IN(inp, xrow, n * g->H + lo, hi - lo, xbuf) : NULL;
        float *y = ocr_cpu_rows_dst(out, yrow, r, ybuf);
        for (int64_t j = 0; j < nb; j++)
            DW_NAME(forward_row)(k, y + j * yrow, xs, lo, wt, bias, g, oh0 + j, aoff, boff);
        ocr_cpu_rows_out(out, yrow, r, nb, y);
        r += nb;
    }
}

// ---- data gradient: input row ih of one image (gather, assigned) ------------------------------
// dys holds the image's output-gradient rows from row dys_row0 on; dx is the input row (W·C).
// Input pixel (ih, iw) is read by kernel row kh of output row oh = (ih + ph − kh) / sh when
// that divides exactly and lands inside; likewise for columns.
static void DW_NAME(backward_data_row)(const DW_NAME(Kernels) * k, float *dx, const DW_T *dys, int64_t dys_row0,
                                       const float *wt, const DwGeom *g, int64_t ih, int64_t *aoff, int64_t *boff,
                                       int64_t *khs, int64_t *ohs) {
    const int64_t C = g->C;
    int64_t nk = 0;
    for (int64_t kh = (ih + g->ph) % g->sh; kh < g->KH; kh += g->sh) {
        int64_t t = ih + g->ph - kh;
        if (t < 0) break;  // kh only grows
        if (t / g->sh >= g->Ho) continue;
        khs[nk] = kh, ohs[nk] = t / g->sh, nk++;
    }
    // Columns in classes of equal iw mod sw: pixel iw + sw reads the same taps as iw, one
    // output column on, so pairs of them share the weight loads.
    for (int64_t res = 0; res < g->sw && res < g->W; res++) {
        int64_t cached_jlo = -1, cached_jhi = -1, nt = 0;
        for (int64_t iw = res; iw < g->W; iw += g->sw) {
            float *dxp = dx + iw * C;
            // Columns: kw = kw0 + j·sw, ow = q0 − j, valid for j in [j_lo, j_hi).
            int64_t kw0, q0, j_lo, j_hi;
            column_taps(g, iw, &kw0, &q0, &j_lo, &j_hi);
            if (nk == 0 || j_lo >= j_hi) {
                memset(dxp, 0, (size_t)C * sizeof(float));
                continue;
            }
            int pair = 0;
            if (iw + g->sw < g->W) {
                int64_t kw0b, q0b, j_lob, j_hib;
                column_taps(g, iw + g->sw, &kw0b, &q0b, &j_lob, &j_hib);
                pair = kw0b == kw0 && j_lob == j_lo && j_hib == j_hi && q0b == q0 + 1;
            }
            if (j_lo != cached_jlo || j_hi != cached_jhi) {  // kw0 is fixed within the class
                nt = 0;
                for (int64_t a = 0; a < nk; a++)
                    for (int64_t j = j_lo; j < j_hi; j++, nt++) {
                        // Relative to the pixel (ohs[0], q0 − j_lo); ow = q0 − j.
                        aoff[nt] = ((ohs[a] - ohs[0]) * g->Wo - (j - j_lo)) * C;
                        boff[nt] = (khs[a] * g->KW + kw0 + j * g->sw) * C;
                    }
                cached_jlo = j_lo, cached_jhi = j_hi;
            }
            const DW_T *dybase = dys + ((ohs[0] - dys_row0) * g->Wo + q0 - j_lo) * C;
            if (pair) {
                DW_NAME(channels2_mw)(k, C, dxp, dxp + g->sw * C, NULL, NULL, dybase, aoff, C, wt, boff, nt);
                iw += g->sw;
            } else {
                DW_NAME(channels_mw)(k, C, dxp, NULL, dybase, aoff, wt, boff, nt);
            }
        }
    }
}

// Input rows [r0, r1) of the N·H rows in blocks of up to R rows of one image (as forward_rows).
static void DW_NAME(backward_data_rows)(const DW_NAME(Kernels) * k, OcrTensor *dinp, const OcrTensor *dout,
                                        const float *wt, const DwGeom *g, int64_t r0, int64_t r1, int64_t R,
                                        float *dybuf, float *dxbuf, int64_t *aoff, int64_t *boff, int64_t *khs,
                                        int64_t *ohs) {
    const int64_t xrow = g->W * g->C, yrow = g->Wo * g->C;
    (void)dybuf;
    for (int64_t r = r0; r < r1;) {
        const int64_t n = r / g->H, ih0 = r % g->H;
        const int64_t nb = min64(R, min64(g->H - ih0, r1 - r));
        // Output rows the block's input rows receive from: oh = (ih + ph − kh) / sh, kh < KH.
        const int64_t t_lo = ih0 + g->ph - g->KH + 1;
        const int64_t lo = t_lo <= 0 ? 0 : (t_lo + g->sh - 1) / g->sh;
        const int64_t hi = min64(g->Ho, (ih0 + nb - 1 + g->ph) / g->sh + 1);
        const DW_T *dys = lo < hi ? DW_ROWS_IN(dout, yrow, n * g->Ho + lo, hi - lo, dybuf) : NULL;
        float *dx = ocr_cpu_rows_dst(dinp, xrow, r, dxbuf);
        for (int64_t j = 0; j < nb; j++)
            DW_NAME(backward_data_row)(k, dx + j * xrow, dys, lo, wt, g, ih0 + j, aoff, boff, khs, ohs);
        ocr_cpu_rows_out(dinp, xrow, r, nb, dx);
        r += nb;
    }
}

// pt (C) += Σ_{ow in [lo, hi)} dout[ow] · inp[ow·sw − pw + kw] on one input row.
static void DW_NAME(weight_span)(const DW_NAME(Kernels) * k, const DwGeom *g, float *pt, const DW_T *dyrow,
                                 const DW_T *xrow, int64_t kw, int64_t lo, int64_t hi, const int64_t *aoff,
                                 const int64_t *boff) {
    if (lo >= hi) return;
    DW_NAME(channels_mm)(k, g->C, pt, pt, dyrow + lo * g->C, aoff, xrow + (lo * g->sw - g->pw + kw) * g->C, boff,
                         hi - lo);
}

// ---- weight/bias gradient: partial sums over one output row -----------------------------------
// pw (KH·KW, C) += Σ_ow dout[ow] · inp[ow·sw − pw + kw] per tap; pb (C) += Σ dout. dyrow is the
// output-gradient row, xs the image's input rows from row xs_row0 on.
// aoff/boff hold the fixed strides t·C and t·sw·C (t < Wo).
static void DW_NAME(backward_weight_row)(const DW_NAME(Kernels) * k, float *pw, float *pb, const DW_T *dyrow,
                                         const DW_T *xs, int64_t xs_row0, const DwGeom *g, int64_t oh,
                                         const int64_t *aoff, const int64_t *boff) {
    const int64_t C = g->C, ih0 = oh * g->sh - g->ph;
    const int64_t kh_lo = max64(0, -ih0), kh_hi = min64(g->KH, g->H - ih0);
    if (pb) {
        for (int64_t ow = 0; ow < g->Wo; ow++) {
            const DW_T *restrict d = dyrow + ow * C;
            float *restrict acc = pb;
            for (int64_t c = 0; c < C; c++) acc[c] += DW_WIDEN(d[c]);
        }
    }
    if (!pw) return;
    for (int64_t kh = kh_lo; kh < kh_hi; kh++) {
        const DW_T *xrow = xs + (ih0 + kh - xs_row0) * g->W * C;
        // Taps in pairs (kw, kw+1): over the output columns both see, one call shares the
        // dout loads (the input operand of kw+1 is one pixel further, and tap kw+1's
        // partial sums are pt + C); border columns that only one of them sees go alone.
        for (int64_t kw = 0; kw < g->KW; kw += 2) {
            float *pt = pw + (kh * g->KW + kw) * C;
            int64_t lo0, hi0, lo1 = 0, hi1 = 0;
            tap_columns(g, kw, &lo0, &hi0);
            if (kw + 1 < g->KW) tap_columns(g, kw + 1, &lo1, &hi1);
            const int64_t lo = max64(lo0, lo1), hi = min64(hi0, hi1);
            if (kw + 1 < g->KW && lo < hi) {
                DW_NAME(channels2_mm)(k, C, pt, pt + C, pt, pt + C, xrow + (lo * g->sw - g->pw + kw) * C, boff, C,
                                      dyrow + lo * C, aoff, hi - lo);
                DW_NAME(weight_span)(k, g, pt, dyrow, xrow, kw, lo0, lo, aoff, boff);
                DW_NAME(weight_span)(k, g, pt, dyrow, xrow, kw, hi, hi0, aoff, boff);
                DW_NAME(weight_span)(k, g, pt + C, dyrow, xrow, kw + 1, lo1, lo, aoff, boff);
                DW_NAME(weight_span)(k, g, pt + C, dyrow, xrow, kw + 1, hi, hi1, aoff, boff);
            } else {
                DW_NAME(weight_span)(k, g, pt, dyrow, xrow, kw, lo0, hi0, aoff, boff);
                if (kw + 1 < g->KW) DW_NAME(weight_span)(k, g, pt + C, dyrow, xrow, kw + 1, lo1, hi1, aoff, boff);
            }
        }
    }
}

// Output rows [r0, r1) of the N·Ho rows in blocks of up to R rows of one image: the block's
// output-gradient rows and the input rows they see are read once per block.
static void DW_NAME(backward_weight_rows)(const DW_NAME(Kernels) * k, float *pw, float *pb, const OcrTensor *dout,
                                          const OcrTensor *inp, const DwGeom *g, int64_t r0, int64_t r1, int64_t R,
                                          float *dybuf, float *xbuf, const int64_t *aoff, const int64_t *boff) {
    const int64_t xrow = g->W * g->C, yrow = g->Wo * g->C;
    (void)dybuf, (void)xbuf;
    for (int64_t r = r0; r < r1;) {
        const int64_t n = r / g->Ho, oh0 = r % g->Ho;
        const int64_t nb = min64(R, min64(g->Ho - oh0, r1 - r));
        const DW_T *dy = DW_ROWS_IN(dout, yrow, r, nb, dybuf);
        const DW_T *xs = NULL;
        int64_t lo = 0;
        if (pw) {
            lo = max64(0, oh0 * g->sh - g->ph);
            const int64_t hi = min64(g->H, (oh0 + nb - 1) * g->sh - g->ph + g->KH);
            if (lo < hi) xs = DW_ROWS_IN(inp, xrow, n * g->H + lo, hi - lo, xbuf);
        }
        for (int64_t j = 0; j < nb; j++)
            DW_NAME(backward_weight_row)(k, pw, pb, dy + j * yrow, xs, lo, g, oh0 + j, aoff, boff);
        r += nb;
    }
}

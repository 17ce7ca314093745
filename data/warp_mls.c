// WarpMLS and the three TIA warps (PaddleOCR ppocr/data/imaug/text_image_aug/): similarity
// moving-least-squares deformation evaluated on a 100-px grid and interpolated inside
// each cell. See transforms.h for the arithmetic kept from the original.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/transforms.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define MLS_GRID 100

// Sampling (all paths compute exactly this, so results do not depend on the CPU): the
// source position in 1/256 px, p = clamp((X + 128) >> 8) with X in 1/65536 px; taps
// (x0, y0) = p >> 8 and the next pixel when the fraction w = p & 255 is not 0; per channel
// t = (p00·(256 − wx) + p01·wx) >> 1, b likewise for the lower row, out = (t·(256 − wy) + b·wy) >> 15.
static void warp_row_scalar(uint8_t *d, int n, int64_t X, int64_t DX, int64_t Y, int64_t DY, const uint8_t *s,
                            size_t stride, int c, int64_t maxx8, int64_t maxy8) {
    for (int k = 0; k < n; k++, d += c, X += DX, Y += DY) {
        int64_t px = (X + 128) >> 8, py = (Y + 128) >> 8;
        px = px < 0 ? 0 : px > maxx8 ? maxx8 : px;
        py = py < 0 ? 0 : py > maxy8 ? maxy8 : py;
        int x0 = (int)(px >> 8), y0 = (int)(py >> 8), wx = (int)(px & 255), wy = (int)(py & 255);
        int x1 = wx ? x0 + 1 : x0, y1 = wy ? y0 + 1 : y0;
        const uint8_t *r0 = s + (size_t)y0 * stride, *r1 = s + (size_t)y1 * stride;
        const uint8_t *p00 = r0 + (size_t)x0 * c, *p01 = r0 + (size_t)x1 * c;
        const uint8_t *p10 = r1 + (size_t)x0 * c, *p11 = r1 + (size_t)x1 * c;
        int ux = 256 - wx, uy = 256 - wy;
        for (int ch = 0; ch < c; ch++) {
            int t = (p00[ch] * ux + p01[ch] * wx) >> 1, b = (p10[ch] * ux + p11[ch] * wx) >> 1;
            d[ch] = (uint8_t)((t * uy + b * wy) >> 15);
        }
    }
}

#if defined(__SSE2__)
// Clamps 32-bit lanes to [0, hi] (SSE2 has no 32-bit min/max).
static inline __m128i clamp_epi32(__m128i v, __m128i hi) {
    v = _mm_andnot_si128(_mm_cmplt_epi32(v, _mm_setzero_si128()), v);
    __m128i gt = _mm_cmpgt_epi32(v, hi);
    return _mm_or_si128(_mm_and_si128(gt, hi), _mm_andnot_si128(gt, v));
}

// 3 channels, four positions at a time; reads 4 bytes per tap (the source is padded).
// 32-bit lanes: the caller makes sure 16.16 positions fit.
static int warp_row3_sse2(uint8_t *d, int n, int32_t X, int32_t DX, int32_t Y, int32_t DY, const uint8_t *s,
                          size_t stride, int32_t maxx8, int32_t maxy8) {
    __m128i xv = _mm_setr_epi32(X, X + DX, X + 2 * DX, X + 3 * DX);
    __m128i yv = _mm_setr_epi32(Y, Y + DY, Y + 2 * DY, Y + 3 * DY);
    __m128i xs4 = _mm_set1_epi32(4 * DX), ys4 = _mm_set1_epi32(4 * DY);
    __m128i r128 = _mm_set1_epi32(128), mx = _mm_set1_epi32(maxx8), my = _mm_set1_epi32(maxy8);
    const __m128i z = _mm_setzero_si128();
    int k = 0;
    for (; k + 4 <= n; k += 4, xv = _mm_add_epi32(xv, xs4), yv = _mm_add_epi32(yv, ys4)) {
        int32_t pxs[4], pys[4];
        _mm_storeu_si128((__m128i *)pxs, clamp_epi32(_mm_srai_epi32(_mm_add_epi32(xv, r128), 8), mx));
        _mm_storeu_si128((__m128i *)pys, clamp_epi32(_mm_srai_epi32(_mm_add_epi32(yv, r128), 8), my));
        for (int q = 0; q < 4; q++, d += 3) {
            int x0 = pxs[q] >> 8, y0 = pys[q] >> 8, wx = pxs[q] & 255, wy = pys[q] & 255;
            int x1 = wx ? x0 + 1 : x0, y1 = wy ? y0 + 1 : y0;
            const uint8_t *r0 = s + (size_t)y0 * stride, *r1 = s + (size_t)y1 * stride;
            int32_t a, b, c, e;
            memcpy(&a, r0 + 3 * x0, 4), memcpy(&b, r0 + 3 * x1, 4), memcpy(&c, r1 + 3 * x0, 4), memcpy(&e, r1 + 3 * x1, 4);
            __m128i wh = _mm_unpacklo_epi64(_mm_set1_epi16((short)(256 - wx)), _mm_set1_epi16((short)wx));
            __m128i top = _mm_unpacklo_epi8(_mm_unpacklo_epi32(_mm_cvtsi32_si128(a), _mm_cvtsi32_si128(b)), z);
            __m128i bot = _mm_unpacklo_epi8(_mm_unpacklo_epi32(_mm_cvtsi32_si128(c), _mm_cvtsi32_si128(e)), z);
            top = _mm_mullo_epi16(top, wh);
            bot = _mm_mullo_epi16(bot, wh);
            top = _mm_srli_epi16(_mm_add_epi16(top, _mm_srli_si128(top, 8)), 1);  // <= 32640
            bot = _mm_srli_epi16(_mm_add_epi16(bot, _mm_srli_si128(bot, 8)), 1);
            __m128i wv = _mm_set1_epi32((int)((uint32_t)(256 - wy) | ((uint32_t)wy << 16)));
            __m128i v = _mm_srai_epi32(_mm_madd_epi16(_mm_unpacklo_epi16(top, bot), wv), 15);
            v = _mm_packus_epi16(_mm_packs_epi32(v, v), z);
            int32_t o = _mm_cvtsi128_si32(v);
            memcpy(d, &o, 3);
        }
    }
    return k;
}
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define OCR_WARP_AVX2 1
// 3 channels, eight positions at a time with gathers; the same arithmetic.
__attribute__((target("avx2"))) static int warp_row3_avx2(uint8_t *d, int n, int32_t X, int32_t DX, int32_t Y,
                                                            int32_t DY, const uint8_t *s, size_t stride, int32_t maxx8,
                                                            int32_t maxy8) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i xv = _mm256_add_epi32(_mm256_set1_epi32(X), _mm256_mullo_epi32(lane, _mm256_set1_epi32(DX)));
    __m256i yv = _mm256_add_epi32(_mm256_set1_epi32(Y), _mm256_mullo_epi32(lane, _mm256_set1_epi32(DY)));
    const __m256i xs8 = _mm256_set1_epi32(8 * DX), ys8 = _mm256_set1_epi32(8 * DY);
    const __m256i r128 = _mm256_set1_epi32(128), zero = _mm256_setzero_si256();
    const __m256i mx = _mm256_set1_epi32(maxx8), my = _mm256_set1_epi32(maxy8), m255 = _mm256_set1_epi32(255);
    const __m256i one = _mm256_set1_epi32(1), c256 = _mm256_set1_epi32(256), three = _mm256_set1_epi32(3);
    const __m256i vstride = _mm256_set1_epi32((int)stride);
    const __m256i i0 = _mm256_setr_epi32(0, 0, 1, 1, 4, 4, 5, 5), i1 = _mm256_setr_epi32(2, 2, 3, 3, 6, 6, 7, 7);
    const __m256i j0 = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4), j1 = _mm256_setr_epi32(1, 1, 1, 1, 5, 5, 5, 5);
    const __m256i j2 = _mm256_setr_epi32(2, 2, 2, 2, 6, 6, 6, 6), j3 = _mm256_setr_epi32(3, 3, 3, 3, 7, 7, 7, 7);
    int k = 0;
    for (; k + 8 <= n; k += 8, xv = _mm256_add_epi32(xv, xs8), yv = _mm256_add_epi32(yv, ys8)) {
        __m256i px = _mm256_min_epi32(_mm256_max_epi32(_mm256_srai_epi32(_mm256_add_epi32(xv, r128), 8), zero), mx);
        __m256i py = _mm256_min_epi32(_mm256_max_epi32(_mm256_srai_epi32(_mm256_add_epi32(yv, r128), 8), zero), my);
        __m256i x0 = _mm256_srai_epi32(px, 8), y0 = _mm256_srai_epi32(py, 8);
        __m256i wx = _mm256_and_si256(px, m255), wy = _mm256_and_si256(py, m255);
        __m256i x1 = _mm256_add_epi32(x0, _mm256_min_epi32(wx, one)), y1 = _mm256_add_epi32(y0, _mm256_min_epi32(wy, one));
        __m256i o0 = _mm256_mullo_epi32(y0, vstride), o1 = _mm256_mullo_epi32(y1, vstride);
        __m256i c0 = _mm256_mullo_epi32(x0, three), c1 = _mm256_mullo_epi32(x1, three);
        // Loads instead of gathers (faster on the AMD cores measured; same values).
        int32_t a00[8], a01[8], a10[8], a11[8];
        _mm256_storeu_si256((__m256i *)a00, _mm256_add_epi32(o0, c0));
        _mm256_storeu_si256((__m256i *)a01, _mm256_add_epi32(o0, c1));
        _mm256_storeu_si256((__m256i *)a10, _mm256_add_epi32(o1, c0));
        _mm256_storeu_si256((__m256i *)a11, _mm256_add_epi32(o1, c1));
        int32_t v00[8], v01[8], v10[8], v11[8];
        for (int q = 0; q < 8; q++) {
            memcpy(&v00[q], s + a00[q], 4), memcpy(&v01[q], s + a01[q], 4);
            memcpy(&v10[q], s + a10[q], 4), memcpy(&v11[q], s + a11[q], 4);
        }
        __m256i g00 = _mm256_loadu_si256((const __m256i *)v00), g01 = _mm256_loadu_si256((const __m256i *)v01);
        __m256i g10 = _mm256_loadu_si256((const __m256i *)v10), g11 = _mm256_loadu_si256((const __m256i *)v11);
        // Horizontal weights as 16-bit lanes matching the byte unpacking (pixels 0,1|4,5
        // in the low unpack, 2,3|6,7 in the high one, four lanes each).
        __m256i ux2 = _mm256_sub_epi32(c256, wx);
        __m256i U = _mm256_or_si256(ux2, _mm256_slli_epi32(ux2, 16)), Wv = _mm256_or_si256(wx, _mm256_slli_epi32(wx, 16));
        __m256i ulo = _mm256_permutevar8x32_epi32(U, i0), uhi = _mm256_permutevar8x32_epi32(U, i1);
        __m256i wlo = _mm256_permutevar8x32_epi32(Wv, i0), whi = _mm256_permutevar8x32_epi32(Wv, i1);
        __m256i tlo = _mm256_add_epi16(_mm256_mullo_epi16(_mm256_unpacklo_epi8(g00, zero), ulo),
                                       _mm256_mullo_epi16(_mm256_unpacklo_epi8(g01, zero), wlo));
        __m256i thi = _mm256_add_epi16(_mm256_mullo_epi16(_mm256_unpackhi_epi8(g00, zero), uhi),
                                       _mm256_mullo_epi16(_mm256_unpackhi_epi8(g01, zero), whi));
        __m256i blo = _mm256_add_epi16(_mm256_mullo_epi16(_mm256_unpacklo_epi8(g10, zero), ulo),
                                       _mm256_mullo_epi16(_mm256_unpacklo_epi8(g11, zero), wlo));
        __m256i bhi = _mm256_add_epi16(_mm256_mullo_epi16(_mm256_unpackhi_epi8(g10, zero), uhi),
                                       _mm256_mullo_epi16(_mm256_unpackhi_epi8(g11, zero), whi));
        tlo = _mm256_srli_epi16(tlo, 1), thi = _mm256_srli_epi16(thi, 1);
        blo = _mm256_srli_epi16(blo, 1), bhi = _mm256_srli_epi16(bhi, 1);
        // Vertical: (t·uy + b·wy) >> 15 with madd over (t, b) pairs; weights per pixel.
        __m256i Q = _mm256_or_si256(_mm256_sub_epi32(c256, wy), _mm256_slli_epi32(wy, 16));
        __m256i r04 = _mm256_srai_epi32(_mm256_madd_epi16(_mm256_unpacklo_epi16(tlo, blo), _mm256_permutevar8x32_epi32(Q, j0)), 15);
        __m256i r15 = _mm256_srai_epi32(_mm256_madd_epi16(_mm256_unpackhi_epi16(tlo, blo), _mm256_permutevar8x32_epi32(Q, j1)), 15);
        __m256i r26 = _mm256_srai_epi32(_mm256_madd_epi16(_mm256_unpacklo_epi16(thi, bhi), _mm256_permutevar8x32_epi32(Q, j2)), 15);
        __m256i r37 = _mm256_srai_epi32(_mm256_madd_epi16(_mm256_unpackhi_epi16(thi, bhi), _mm256_permutevar8x32_epi32(Q, j3)), 15);
        // Bytes per 128-bit half: pixels 0,1,2,3 | 4,5,6,7, four bytes each (the 4th unused).
        __m256i v = _mm256_packus_epi16(_mm256_packs_epi32(r04, r15), _mm256_packs_epi32(r26, r37));
        int32_t o[8];
        _mm256_storeu_si256((__m256i *)o, v);
        for (int q = 0; q < 8; q++) memcpy(d + 3 * (k + q), &o[q], 3);
    }
    return k;
}
#endif

// Grid positions along one axis: 0, 100, 200, ... below n, plus n − 1.
static int grid_nodes(int n, int *nodes) {
    int k = 0;
    for (int v = 0; v < n; v += MLS_GRID) nodes[k++] = v;
    if (nodes[k - 1] != n - 1) nodes[k++] = n - 1;
    return k;
}

static int node_index(const int *nodes, int count, int v) {
    for (int i = 0; i < count; i++)
        if (nodes[i] == v) return i;
    OCR_ASSERT(0, "grid position %d is not a node", v);
    return 0;
}

// The source position for output pixel (x, y): similarity MLS of dst_pts → src_pts with
// weights 1/|p − v|². A control point that coincides with (x, y) maps exactly to its
// source point, except the last one (the original's loop falls through and leaves it out).
static void mls_point(double x, double y, const OcrPointD *src, const OcrPointD *dst, int n, double *w, double *ox,
                      double *oy) {
    double sw = 0, spx = 0, spy = 0, sqx = 0, sqy = 0;
    int hit = -1;
    for (int k = 0; k < n; k++) {
        if (x == dst[k].x && y == dst[k].y) {
            hit = k;
            break;
        }
        double ddx = x - dst[k].x, ddy = y - dst[k].y;
        w[k] = 1.0 / (ddx * ddx + ddy * ddy);
        sw += w[k];
        spx += w[k] * dst[k].x, spy += w[k] * dst[k].y;
        sqx += w[k] * src[k].x, sqy += w[k] * src[k].y;
    }
    if (hit >= 0 && hit < n - 1) {
        *ox = src[hit].x, *oy = src[hit].y;
        return;
    }
    double psx = spx / sw, psy = spy / sw, qsx = sqx / sw, qsy = sqy / sw;
    double miu = 0;
    for (int k = 0; k < n; k++) {
        if (k == hit) continue;
        double pix = dst[k].x - psx, piy = dst[k].y - psy;
        miu += w[k] * (pix * pix + piy * piy);
    }
    double cx = x - psx, cy = y - psy;  // cur_pt − p*
    double cjx = -cy, cjy = cx;         // its perpendicular
    double nx = 0, ny = 0;
    for (int k = 0; k < n; k++) {
        if (k == hit) continue;
        double pix = dst[k].x - psx, piy = dst[k].y - psy;
        double pjx = -piy, pjy = pix;
        double tx = (pix * cx + piy * cy) * src[k].x - (pjx * cx + pjy * cy) * src[k].y;
        double ty = -(pix * cjx + piy * cjy) * src[k].x + (pjx * cjx + pjy * cjy) * src[k].y;
        double f = w[k] / miu;
        nx += tx * f, ny += ty * f;
    }
    *ox = nx + qsx, *oy = ny + qsy;
}

// A position in 1/65536 px, rounded to nearest.
static int64_t to_fix16(double v) { return (int64_t)(v >= 0 ? v * 65536.0 + 0.5 : v * 65536.0 - 0.5); }

// Rounded to 1/65536 px so that floating-point noise around an exact identity vanishes.
static double snap(double d) { return nearbyint(d * 65536.0) / 65536.0; }

ocr_status_t ocr_warp_mls(OcrImage *dst, const OcrImage *src, const OcrPointD *src_pts, const OcrPointD *dst_pts,
                          int n) {
    int W = src->width, H = src->height, c = src->channels;
    OcrImage out;
    OCR_TRY(ocr_image_alloc(&out, W, H, c));
    if (n < 2) {
        memcpy(out.pixels, src->pixels, (size_t)W * H * c);
        *dst = out;
        return OCR_OK;
    }
    int nxn = W / MLS_GRID + 2, nyn = H / MLS_GRID + 2;
    int *xs = malloc(sizeof(int) * ((size_t)nxn + nyn));
    double *rd = malloc(sizeof(double) * (2 * (size_t)nxn * nyn + n));
    if (!xs || !rd) {
        free(xs);
        free(rd);
        ocr_image_free(&out);
        return ocr_set_error(OCR_ERR_OOM, "WarpMLS: out of memory");
    }
    int *ys = xs + nxn;
    nxn = grid_nodes(W, xs);
    nyn = grid_nodes(H, ys);
    double *rdx = rd, *rdy = rd + (size_t)nxn * nyn, *wk = rdy + (size_t)nxn * nyn;
    for (int a = 0; a < nyn; a++)
        for (int b = 0; b < nxn; b++) {
            double ox, oy;
            mls_point(xs[b], ys[a], src_pts, dst_pts, n, wk, &ox, &oy);
            rdx[a * nxn + b] = snap(ox - xs[b]);
            rdy[a * nxn + b] = snap(oy - ys[a]);
        }
    size_t stride = (size_t)W * c;
    int64_t maxx8 = (int64_t)(W - 1) << 8, maxy8 = (int64_t)(H - 1) << 8;
    // The vector paths read 4 bytes per 3-byte pixel: a padded copy keeps the last one in
    // bounds. They use 32-bit 16.16 positions: fine for images (and displacements) below
    // 4096 px.
    int fits32 = W <= 4096 && H <= 4096;
    uint8_t *padded = NULL;
    const uint8_t *sp = src->pixels;
    if (c == 3 && fits32) {
        padded = malloc(stride * H + 16);
        if (!padded) {
            free(xs);
            free(rd);
            ocr_image_free(&out);
            return ocr_set_error(OCR_ERR_OOM, "WarpMLS: out of memory");
        }
        memcpy(padded, src->pixels, stride * H);
        memset(padded + stride * H, 0, 16);
        sp = padded;
    }
#if defined(OCR_WARP_AVX2)
    int have_avx2 = __builtin_cpu_supports("avx2");
#endif
    for (int i = 0; i < H; i += MLS_GRID) {
        int ni = i + MLS_GRID, h = MLS_GRID;
        if (ni >= H) ni = H - 1, h = ni - i + 1;
        int a0 = node_index(ys, nyn, i), a1 = node_index(ys, nyn, ni);
        for (int j = 0; j < W; j += MLS_GRID) {
            int nj = j + MLS_GRID, w = MLS_GRID;
            if (nj >= W) nj = W - 1, w = nj - j + 1;
            int b0 = node_index(xs, nxn, j), b1 = node_index(xs, nxn, nj);
            double x11 = rdx[a0 * nxn + b0], x12 = rdx[a0 * nxn + b1], x21 = rdx[a1 * nxn + b0],
                   x22 = rdx[a1 * nxn + b1];
            double y11 = rdy[a0 * nxn + b0], y12 = rdy[a0 * nxn + b1], y21 = rdy[a1 * nxn + b0],
                   y22 = rdy[a1 * nxn + b1];
            for (int di = 0; di < h; di++) {
                // The displacement is bilinear in (di/h, dj/w): along a row the source
                // position is linear in dj, so it is stepped in 1/65536 px fixed point and
                // sampled at 1/256 px.
                double fr = (double)di / h;
                double ax = x11 * (1 - fr) + x21 * fr, bx = ((x12 - x11) * (1 - fr) + (x22 - x21) * fr) / w;
                double ay = y11 * (1 - fr) + y21 * fr, by = ((y12 - y11) * (1 - fr) + (y22 - y21) * fr) / w;
                int64_t X = to_fix16(j + ax), DX = to_fix16(1.0 + bx);
                int64_t Y = to_fix16(i + di + ay), DY = to_fix16(by);
                uint8_t *d = out.pixels + (size_t)(i + di) * stride + (size_t)j * c;
                int done = 0;
                if (c == 3 && fits32) {
#if defined(OCR_WARP_AVX2)
                    if (have_avx2)
                        done = warp_row3_avx2(d, w, (int32_t)X, (int32_t)DX, (int32_t)Y, (int32_t)DY, sp, stride,
                                              (int32_t)maxx8, (int32_t)maxy8);
#endif
#if defined(__SSE2__)
                    done += warp_row3_sse2(d + 3 * done, w - done, (int32_t)(X + done * DX), (int32_t)DX,
                                           (int32_t)(Y + done * DY), (int32_t)DY, sp, stride, (int32_t)maxx8,
                                           (int32_t)maxy8);
#endif
                }
                warp_row_scalar(d + (size_t)done * c, w - done, X + done * DX, DX, Y + done * DY, DY, sp, stride, c,
                                maxx8, maxy8);
            }
        }
    }
    free(padded);
    free(xs);
    free(rd);
    *dst = out;
    return OCR_OK;
}

// np.random.randint(t): uniform in [0, t). PaddleOCR raises for t <= 0 (a sample then
// gets replaced); we return 0, i.e. no displacement.
static int randint_below(OcrRng *rng, int t) { return t <= 0 ? 0 : (int)ocr_rng_next_int(rng, 0, t - 1); }

static ocr_status_t warp_replace(OcrImage *img, const OcrPointD *src, const OcrPointD *dst, int n) {
    OcrImage out;
    OCR_TRY(ocr_warp_mls(&out, img, src, dst, n));
    ocr_image_free(img);
    *img = out;
    return OCR_OK;
}

#define TIA_MAX_POINTS (4 + 2 * 5)

ocr_status_t ocr_tia_distort(OcrImage *img, int segment, OcrRng *rng) {
    OCR_ASSERT(segment >= 1 && segment <= 6);
    int w = img->width, h = img->height;
    int cut = w / segment, thresh = cut / 3;
    OcrPointD src[TIA_MAX_POINTS], dst[TIA_MAX_POINTS];
    int n = 0;
    src[0] = (OcrPointD){0, 0}, src[1] = (OcrPointD){w, 0}, src[2] = (OcrPointD){w, h}, src[3] = (OcrPointD){0, h};
    // Draws in the original's evaluation order (left to right, x before y).
    double a, b;
    a = randint_below(rng, thresh), b = randint_below(rng, thresh);
    dst[0] = (OcrPointD){a, b};
    a = w - randint_below(rng, thresh), b = randint_below(rng, thresh);
    dst[1] = (OcrPointD){a, b};
    a = w - randint_below(rng, thresh), b = h - randint_below(rng, thresh);
    dst[2] = (OcrPointD){a, b};
    a = randint_below(rng, thresh), b = h - randint_below(rng, thresh);
    dst[3] = (OcrPointD){a, b};
    n = 4;
    double half = thresh * 0.5;
    for (int ci = 1; ci < segment; ci++) {
        src[n] = (OcrPointD){(double)cut * ci, 0};
        src[n + 1] = (OcrPointD){(double)cut * ci, h};
        a = cut * ci + randint_below(rng, thresh) - half, b = randint_below(rng, thresh) - half;
        dst[n] = (OcrPointD){a, b};
        a = cut * ci + randint_below(rng, thresh) - half, b = h + randint_below(rng, thresh) - half;
        dst[n + 1] = (OcrPointD){a, b};
        n += 2;
    }
    return warp_replace(img, src, dst, n);
}

ocr_status_t ocr_tia_stretch(OcrImage *img, int segment, OcrRng *rng) {
    OCR_ASSERT(segment >= 1 && segment <= 6);
    int w = img->width, h = img->height;
    int cut = w / segment, thresh = cut * 4 / 5;
    OcrPointD src[TIA_MAX_POINTS], dst[TIA_MAX_POINTS];
    src[0] = dst[0] = (OcrPointD){0, 0};
    src[1] = dst[1] = (OcrPointD){w, 0};
    src[2] = dst[2] = (OcrPointD){w, h};
    src[3] = dst[3] = (OcrPointD){0, h};
    int n = 4;
    double half = thresh * 0.5;
    for (int ci = 1; ci < segment; ci++) {
        double move = randint_below(rng, thresh) - half;
        src[n] = (OcrPointD){(double)cut * ci, 0};
        src[n + 1] = (OcrPointD){(double)cut * ci, h};
        dst[n] = (OcrPointD){cut * ci + move, 0};
        dst[n + 1] = (OcrPointD){cut * ci + move, h};
        n += 2;
    }
    return warp_replace(img, src, dst, n);
}

ocr_status_t ocr_tia_perspective(OcrImage *img, OcrRng *rng) {
    int w = img->width, h = img->height;
    int thresh = h / 2;
    OcrPointD src[4] = {{0, 0}, {w, 0}, {w, h}, {0, h}}, dst[4];
    double a;
    a = randint_below(rng, thresh);
    dst[0] = (OcrPointD){0, a};
    a = randint_below(rng, thresh);
    dst[1] = (OcrPointD){w, a};
    a = h - randint_below(rng, thresh);
    dst[2] = (OcrPointD){w, a};
    a = h - randint_below(rng, thresh);
    dst[3] = (OcrPointD){0, a};
    return warp_replace(img, src, dst, 4);
}

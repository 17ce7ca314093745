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

#if defined(__SSE2__)
// Bilinear 3-channel sample with 8-bit weights: ((t·uy' + b·wy') >> 15 with t, b the
// horizontal blends (p·(256−wx) + q·wx) halved so that the 16-bit multiply-add cannot
// overflow. Reads 4 bytes at each tap (the caller keeps the last pixel out of it).
static inline void bilerp3_sse2(uint8_t *d, const uint8_t *p00, const uint8_t *p01, const uint8_t *p10,
                                const uint8_t *p11, int wx, int wy) {
    int32_t a, b, c, e;
    memcpy(&a, p00, 4), memcpy(&b, p01, 4), memcpy(&c, p10, 4), memcpy(&e, p11, 4);
    const __m128i z = _mm_setzero_si128();
    __m128i wh = _mm_unpacklo_epi64(_mm_set1_epi16((short)(256 - wx)), _mm_set1_epi16((short)wx));
    __m128i top = _mm_unpacklo_epi8(_mm_unpacklo_epi32(_mm_cvtsi32_si128(a), _mm_cvtsi32_si128(b)), z);
    __m128i bot = _mm_unpacklo_epi8(_mm_unpacklo_epi32(_mm_cvtsi32_si128(c), _mm_cvtsi32_si128(e)), z);
    top = _mm_mullo_epi16(top, wh);
    bot = _mm_mullo_epi16(bot, wh);
    top = _mm_srli_epi16(_mm_add_epi16(top, _mm_srli_si128(top, 8)), 1);  // ≤ 32640
    bot = _mm_srli_epi16(_mm_add_epi16(bot, _mm_srli_si128(bot, 8)), 1);
    __m128i wv = _mm_set1_epi32((int)((uint32_t)(256 - wy) | ((uint32_t)wy << 16)));
    __m128i v = _mm_srai_epi32(_mm_madd_epi16(_mm_unpacklo_epi16(top, bot), wv), 15);
    v = _mm_packs_epi32(v, v);
    v = _mm_packus_epi16(v, v);
    int32_t out = _mm_cvtsi128_si32(v);
    memcpy(d, &out, 3);
}

// Clamps 32-bit lanes to [0, hi] (SSE2 has no 32-bit min/max).
static inline __m128i clamp_epi32(__m128i v, __m128i hi) {
    v = _mm_andnot_si128(_mm_cmplt_epi32(v, _mm_setzero_si128()), v);
    __m128i gt = _mm_cmpgt_epi32(v, hi);
    return _mm_or_si128(_mm_and_si128(gt, hi), _mm_andnot_si128(gt, v));
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
    const uint8_t *s = src->pixels;
    int64_t maxx8 = (int64_t)(W - 1) << 8, maxy8 = (int64_t)(H - 1) << 8;
    // 16.16 positions of this image, with room for displacements of a few image sizes,
    // fit in 32 bits.
    int simd_ok = W <= 4096 && H <= 4096;
    (void)simd_ok;
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
                int dj = 0;
#if defined(__SSE2__)
                // Four positions at a time in 32-bit lanes (the image is small enough for
                // 16.16 fixed point there); the same rounding and clamping as below.
                if (c == 3 && simd_ok) {
                    __m128i xv = _mm_setr_epi32((int)X, (int)(X + DX), (int)(X + 2 * DX), (int)(X + 3 * DX));
                    __m128i yv = _mm_setr_epi32((int)Y, (int)(Y + DY), (int)(Y + 2 * DY), (int)(Y + 3 * DY));
                    __m128i xs4 = _mm_set1_epi32((int)(4 * DX)), ys4 = _mm_set1_epi32((int)(4 * DY));
                    __m128i r128 = _mm_set1_epi32(128), mx = _mm_set1_epi32((int)maxx8), my = _mm_set1_epi32((int)maxy8);
                    for (; dj + 4 <= w; dj += 4, xv = _mm_add_epi32(xv, xs4), yv = _mm_add_epi32(yv, ys4)) {
                        int32_t pxs[4], pys[4];
                        _mm_storeu_si128((__m128i *)pxs, clamp_epi32(_mm_srai_epi32(_mm_add_epi32(xv, r128), 8), mx));
                        _mm_storeu_si128((__m128i *)pys, clamp_epi32(_mm_srai_epi32(_mm_add_epi32(yv, r128), 8), my));
                        for (int q = 0; q < 4; q++, d += 3) {
                            int x0 = pxs[q] >> 8, y0 = pys[q] >> 8, wx = pxs[q] & 255, wy = pys[q] & 255;
                            int x1 = wx ? x0 + 1 : x0, y1 = wy ? y0 + 1 : y0;
                            const uint8_t *r0 = s + (size_t)y0 * stride, *r1 = s + (size_t)y1 * stride;
                            const uint8_t *p00 = r0 + (size_t)x0 * 3, *p01 = r0 + (size_t)x1 * 3;
                            const uint8_t *p10 = r1 + (size_t)x0 * 3, *p11 = r1 + (size_t)x1 * 3;
                            if (!(x1 == W - 1 && y1 == H - 1)) {
                                bilerp3_sse2(d, p00, p01, p10, p11, wx, wy);
                            } else {
                                int ux = 256 - wx, uy = 256 - wy;
                                for (int k = 0; k < 3; k++) {
                                    int t = (p00[k] * ux + p01[k] * wx) >> 1, b = (p10[k] * ux + p11[k] * wx) >> 1;
                                    d[k] = (uint8_t)((t * uy + b * wy) >> 15);
                                }
                            }
                        }
                    }
                    X += (int64_t)dj * DX;
                    Y += (int64_t)dj * DY;
                }
#endif
                for (; dj < w; dj++, d += c, X += DX, Y += DY) {
                    int64_t px = (X + 128) >> 8, py = (Y + 128) >> 8;  // in 1/256 px, rounded
                    px = px < 0 ? 0 : px > maxx8 ? maxx8 : px;
                    py = py < 0 ? 0 : py > maxy8 ? maxy8 : py;
                    int x0 = (int)(px >> 8), y0 = (int)(py >> 8), wx = (int)(px & 255), wy = (int)(py & 255);
                    int x1 = wx ? x0 + 1 : x0, y1 = wy ? y0 + 1 : y0;
                    const uint8_t *r0 = s + (size_t)y0 * stride, *r1 = s + (size_t)y1 * stride;
                    const uint8_t *p00 = r0 + (size_t)x0 * c, *p01 = r0 + (size_t)x1 * c;
                    const uint8_t *p10 = r1 + (size_t)x0 * c, *p11 = r1 + (size_t)x1 * c;
                    int ux = 256 - wx, uy = 256 - wy;
#if defined(__SSE2__)
                    if (c == 3 && !(x1 == W - 1 && y1 == H - 1)) {
                        bilerp3_sse2(d, p00, p01, p10, p11, wx, wy);
                        continue;
                    }
#endif
                    // The same arithmetic as bilerp3_sse2, so results do not depend on the path.
                    for (int k = 0; k < c; k++) {
                        int t = (p00[k] * ux + p01[k] * wx) >> 1, b = (p10[k] * ux + p11[k] * wx) >> 1;
                        d[k] = (uint8_t)((t * uy + b * wy) >> 15);
                    }
                }
            }
        }
    }
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

// Resize, RecResizeImg, the BaseDataAugmentation pieces of RecAug, RecConAug merging and
// the transform-list config. See transforms.h for the OpenCV/PaddleOCR semantics kept.
#include "data/transforms.h"

#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

// ---- resize -------------------------------------------------------------------------

#define RESIZE_COEF_BITS 11
#define RESIZE_COEF_SCALE (1 << RESIZE_COEF_BITS)

// saturate_cast<short>(float): round to nearest, ties to even (lrintf in the default mode).
static int16_t round_coef(float v) { return (int16_t)lrintf(v); }

// OpenCV's coordinate map for one axis: tap index and the two 11-bit weights per output
// position, fx = (float)((d + 0.5)·scale − 0.5). Horizontally (clamp_weights) a position
// beyond a border takes the border pixel with weight 1; vertically OpenCV keeps the
// weights and only clamps the row index (ofs may be −1 or ssize − 1), which rounds
// differently in the vertical pass because each product is truncated on its own.
static void linear_coeffs(int dsize, int ssize, int clamp_weights, int32_t *ofs, int16_t *alpha) {
    double scale = 1.0 / ((double)dsize / ssize);
    for (int d = 0; d < dsize; d++) {
        float f = (float)((d + 0.5) * scale - 0.5);
        int s = (int)floorf(f);
        f -= (float)s;
        if (clamp_weights) {
            if (s < 0) f = 0.f, s = 0;
            if (s >= ssize - 1) f = 0.f, s = ssize - 1;
        }
        ofs[d] = s;
        alpha[2 * d] = round_coef((1.f - f) * RESIZE_COEF_SCALE);
        alpha[2 * d + 1] = round_coef(f * RESIZE_COEF_SCALE);
    }
}

// One source row resized horizontally into int sums (weights × pixels, scale 2^11).
// x0[x], x1[x]: byte offsets of the two taps of output pixel x (x1 = x0 at the right border);
// simd3: the leading output pixels whose second tap is followed by at least one more byte
// in the row (so a 4-byte load stays inside it) and that are not the last one.
static void hresize_row(int32_t *out, const uint8_t *row, int dw, int c, const int32_t *x0, const int32_t *x1,
                        const int16_t *alpha, int simd3) {
    if (c == 3) {
        int x = 0;
#if defined(__SSE2__)
        // (p0, p1) byte pairs widened to 16 bits, then one multiply-add per channel. The
        // 4th lane writes one value beyond the pixel, which the next pixel overwrites.
        const __m128i z = _mm_setzero_si128();
        for (; x < simd3; x++, out += 3) {
            int32_t a, b;
            memcpy(&a, row + x0[x], 4), memcpy(&b, row + x1[x], 4);
            __m128i pairs = _mm_unpacklo_epi8(_mm_unpacklo_epi8(_mm_cvtsi32_si128(a), _mm_cvtsi32_si128(b)), z);
            int32_t w2;
            memcpy(&w2, alpha + 2 * x, 4);  // (a0, a1) as two int16
            _mm_storeu_si128((__m128i *)out, _mm_madd_epi16(pairs, _mm_set1_epi32(w2)));
        }
#else
        (void)simd3;
#endif
        for (; x < dw; x++, out += 3) {
            int a0 = alpha[2 * x], a1 = alpha[2 * x + 1];
            const uint8_t *p0 = row + x0[x], *p1 = row + x1[x];
            out[0] = p0[0] * a0 + p1[0] * a1;
            out[1] = p0[1] * a0 + p1[1] * a1;
            out[2] = p0[2] * a0 + p1[2] * a1;
        }
    } else {
        for (int x = 0; x < dw; x++)
            for (int k = 0; k < c; k++) out[c * x + k] = row[x0[x] + k] * alpha[2 * x] + row[x1[x] + k] * alpha[2 * x + 1];
    }
}

// The vertical pass as OpenCV's VResizeLinearVec_32s8u: ((b0·(S0>>4))>>16 + (b1·(S1>>4))>>16 + 2)>>2
// with 16-bit high multiplies (S>>4 <= 255·2048/16 fits in int16).
static void vresize_row(uint8_t *d, const int32_t *s0, const int32_t *s1, size_t n, int b0, int b1) {
    size_t i = 0;
#if defined(__SSE2__)
    __m128i vb0 = _mm_set1_epi16((short)b0), vb1 = _mm_set1_epi16((short)b1), two = _mm_set1_epi16(2);
    for (; i + 8 <= n; i += 8) {
        __m128i a = _mm_packs_epi32(_mm_srai_epi32(_mm_loadu_si128((const __m128i *)(s0 + i)), 4),
                                    _mm_srai_epi32(_mm_loadu_si128((const __m128i *)(s0 + i + 4)), 4));
        __m128i b = _mm_packs_epi32(_mm_srai_epi32(_mm_loadu_si128((const __m128i *)(s1 + i)), 4),
                                    _mm_srai_epi32(_mm_loadu_si128((const __m128i *)(s1 + i + 4)), 4));
        __m128i v = _mm_add_epi16(_mm_mulhi_epi16(a, vb0), _mm_mulhi_epi16(b, vb1));
        v = _mm_srai_epi16(_mm_add_epi16(v, two), 2);
        _mm_storel_epi64((__m128i *)(d + i), _mm_packus_epi16(v, v));
    }
#endif
    for (; i < n; i++) {
        int v = (((b0 * (s0[i] >> 4)) >> 16) + ((b1 * (s1[i] >> 4)) >> 16) + 2) >> 2;
        d[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
}

static void resize_area2x(uint8_t *dst, int dw, int dh, const uint8_t *src, int sw, int c) {
    size_t sstride = (size_t)sw * c;
    for (int y = 0; y < dh; y++) {
        const uint8_t *r0 = src + (size_t)(2 * y) * sstride, *r1 = r0 + sstride;
        uint8_t *d = dst + (size_t)y * dw * c;
        for (int x = 0; x < dw; x++)
            for (int k = 0; k < c; k++) {
                int i0 = 2 * x * c + k, i1 = i0 + c;
                d[x * c + k] = (uint8_t)((r0[i0] + r0[i1] + r1[i0] + r1[i1] + 2) >> 2);
            }
    }
}

ocr_status_t ocr_resize_linear(uint8_t *dst, int dw, int dh, const uint8_t *src, int sw, int sh, int c) {
    OCR_ASSERT(dw > 0 && dh > 0 && sw > 0 && sh > 0 && c >= 1 && c <= 4);
    if (dw == sw && dh == sh) {
        memcpy(dst, src, (size_t)dw * dh * c);
        return OCR_OK;
    }
    double scale_x = 1.0 / ((double)dw / sw), scale_y = 1.0 / ((double)dh / sh);
    int iscale_x = (int)lrint(scale_x), iscale_y = (int)lrint(scale_y);
    if (fabs(scale_x - iscale_x) < DBL_EPSILON && fabs(scale_y - iscale_y) < DBL_EPSILON && iscale_x == 2 &&
        iscale_y == 2) {
        resize_area2x(dst, dw, dh, src, sw, c);
        return OCR_OK;
    }
    size_t row = (size_t)dw * c;
    // x0[dw] x1[dw] yofs[dh] rows[2][dw·c] alpha[2dw] beta[2dh]
    size_t bytes = sizeof(int32_t) * (2 * (size_t)dw + dh + 2 * row) + sizeof(int16_t) * 2 * ((size_t)dw + dh);
    char *mem = malloc(bytes);
    if (!mem) return ocr_set_error(OCR_ERR_OOM, "resize %dx%d → %dx%d: out of memory", sw, sh, dw, dh);
    int32_t *x0 = (int32_t *)mem, *x1 = x0 + dw, *yofs = x1 + dw, *rows = yofs + dh;
    int16_t *alpha = (int16_t *)(rows + 2 * row), *beta = alpha + 2 * dw;
    linear_coeffs(dw, sw, 1, x0, alpha);
    linear_coeffs(dh, sh, 0, yofs, beta);
    int simd3 = 0;  // see hresize_row (x1 never decreases, so this is a prefix)
    for (int x = 0; x < dw; x++) {
        x1[x] = (x0[x] + 1 < sw ? x0[x] + 1 : x0[x]) * c;
        x0[x] *= c;
        if (c == 3 && x1[x] + 4 <= 3 * sw && x + 1 < dw) simd3 = x + 1;
    }
    int32_t *buf[2] = {rows, rows + row};
    int have[2] = {-1, -1};  // source row held by buf[i]
    size_t sstride = (size_t)sw * c;
    for (int y = 0; y < dh; y++) {
        int sy0 = yofs[y], sy1 = sy0 + 1;
        sy0 = sy0 < 0 ? 0 : sy0 > sh - 1 ? sh - 1 : sy0;
        sy1 = sy1 < 0 ? 0 : sy1 > sh - 1 ? sh - 1 : sy1;
        // buf[0] holds row sy0; buf[1] row sy1 unless both are the same row. Moving down,
        // the previous sy1 often becomes the new sy0: swap instead of recomputing.
        if (have[0] != sy0) {
            if (have[1] == sy0) {
                int32_t *t = buf[0]; buf[0] = buf[1]; buf[1] = t;
                have[1] = have[0];
                have[0] = sy0;
            } else {
                hresize_row(buf[0], src + (size_t)sy0 * sstride, dw, c, x0, x1, alpha, simd3);
                have[0] = sy0;
            }
        }
        if (sy1 != sy0 && have[1] != sy1) {
            hresize_row(buf[1], src + (size_t)sy1 * sstride, dw, c, x0, x1, alpha, simd3);
            have[1] = sy1;
        }
        vresize_row(dst + (size_t)y * row, buf[0], sy1 != sy0 ? buf[1] : buf[0], row, beta[2 * y], beta[2 * y + 1]);
    }
    free(mem);
    return OCR_OK;
}

ocr_status_t ocr_image_resize(OcrImage *dst, const OcrImage *src, int width, int height) {
    OcrImage out;
    OCR_TRY(ocr_image_alloc(&out, width, height, src->channels));
    ocr_status_t st = ocr_resize_linear(out.pixels, width, height, src->pixels, src->width, src->height, src->channels);
    if (st != OCR_OK) {
        ocr_image_free(&out);
        return st;
    }
    *dst = out;
    return OCR_OK;
}

int ocr_rec_resized_width(int h, int w, int H, int W) {
    double ratio = (double)w / (double)h;  // Python: w / float(h); ceil(imgH * ratio)
    double cw = ceil((double)H * ratio);
    int rw = cw > (double)W ? W : (int)cw;
    return rw < 1 ? 1 : rw;
}

ocr_status_t ocr_rec_resize_pad(uint8_t *dst, int H, int W, int C, const OcrImage *img, int padding, int *resized_w,
                                float *valid_ratio) {
    OCR_ASSERT(C == 1 || C == 3);
    if (img->channels != C && !(img->channels == 1 && C == 3))
        return ocr_set_error(OCR_ERR_INVALID_ARG, "RecResizeImg: a %d-channel image for a %d-channel batch",
                             img->channels, C);
    int rw = padding ? ocr_rec_resized_width(img->height, img->width, H, W) : W;
    size_t stride = (size_t)W * C;
    if (img->channels == C && rw == W) {
        OCR_TRY(ocr_resize_linear(dst, rw, H, img->pixels, img->width, img->height, C));
    } else {
        // Resize into scratch, then copy rows (gray expanded to 3 channels) and pad.
        uint8_t *tmp = malloc((size_t)rw * H * img->channels);
        if (!tmp) return ocr_set_error(OCR_ERR_OOM, "RecResizeImg: out of memory");
        ocr_status_t st = ocr_resize_linear(tmp, rw, H, img->pixels, img->width, img->height, img->channels);
        if (st != OCR_OK) {
            free(tmp);
            return st;
        }
        for (int y = 0; y < H; y++) {
            uint8_t *d = dst + (size_t)y * stride;
            const uint8_t *s = tmp + (size_t)y * rw * img->channels;
            if (img->channels == C) {
                memcpy(d, s, (size_t)rw * C);
            } else {
                for (int x = 0; x < rw; x++) d[3 * x] = d[3 * x + 1] = d[3 * x + 2] = s[x];
            }
            memset(d + (size_t)rw * C, OCR_PAD_VALUE, (size_t)(W - rw) * C);
        }
        free(tmp);
    }
    *resized_w = rw;
    double vr = (double)rw / W;
    *valid_ratio = (float)(vr < 1.0 ? vr : 1.0);
    return OCR_OK;
}

// ---- BaseDataAugmentation -----------------------------------------------------------

ocr_status_t ocr_aug_crop(OcrImage *img, int rows, int from_top) {
    if (rows > img->height - 1) rows = img->height - 1;
    if (rows <= 0) return OCR_OK;
    size_t stride = (size_t)img->width * img->channels;
    int h = img->height - rows;
    if (from_top) memmove(img->pixels, img->pixels + (size_t)rows * stride, (size_t)h * stride);
    img->height = h;  // the buffer keeps its size; only the first h rows are the image
    return OCR_OK;
}

// BORDER_REFLECT_101: ... 2 1 | 0 1 2 ... n-1 | n-2 n-3 ...
static int reflect101(int p, int n) {
    if (n == 1) return 0;
    while (p < 0 || p >= n) p = p < 0 ? -p : 2 * n - 2 - p;
    return p;
}

// getGaussianKernel(5, 1, CV_32F): exp(−x²/2) normalised, as floats (centre, ±1, ±2).
static const float blur_k0 = 0x1.9c4868p-2f, blur_k1 = 0x1.f41fd6p-3f, blur_k2 = 0x1.be5f0ep-5f;

// Round to nearest, ties to even, for 0 <= v < 2^22 (adding 1.5·2^23 leaves no fraction bits).
static inline float round_even(float v) { return (v + 12582912.0f) - 12582912.0f; }

ocr_status_t ocr_aug_blur(OcrImage *img) {
    int w = img->width, h = img->height, c = img->channels;
    size_t row = (size_t)w * c;
    float *tmp = malloc(sizeof(float) * row * h);
    if (!tmp) return ocr_set_error(OCR_ERR_OOM, "blur: out of memory");
    // Row pass. The symmetric pairs are added first (exact integers), then weighted: the
    // order OpenCV's float path uses. Interior values in one flat loop (vectorisable).
    for (int y = 0; y < h; y++) {
        const uint8_t *s = img->pixels + (size_t)y * row;
        float *t = tmp + (size_t)y * row;
        size_t c1 = (size_t)c, c2 = 2 * (size_t)c;
        if (w >= 5)
            for (size_t i = c2; i < row - c2; i++)
                t[i] = blur_k0 * (float)s[i] + blur_k1 * (float)(s[i - c1] + s[i + c1]) +
                       blur_k2 * (float)(s[i - c2] + s[i + c2]);
        // Border columns: x < 2 and x >= w − 2 (all of them when w < 5).
        for (int x = 0; x < w; x = (x == 1 && w - 2 > 2) ? w - 2 : x + 1) {
            int l2 = reflect101(x - 2, w), l1 = reflect101(x - 1, w);
            int r1 = reflect101(x + 1, w), r2 = reflect101(x + 2, w);
            for (int k = 0; k < c; k++)
                t[x * c + k] = blur_k0 * (float)s[x * c + k] + blur_k1 * (float)(s[l1 * c + k] + s[r1 * c + k]) +
                               blur_k2 * (float)(s[l2 * c + k] + s[r2 * c + k]);
        }
    }
    // Column pass, rounded to nearest (even) and saturated.
    for (int y = 0; y < h; y++) {
        const float *r0 = tmp + (size_t)reflect101(y - 2, h) * row, *r1 = tmp + (size_t)reflect101(y - 1, h) * row;
        const float *r2 = tmp + (size_t)y * row;
        const float *r3 = tmp + (size_t)reflect101(y + 1, h) * row, *r4 = tmp + (size_t)reflect101(y + 2, h) * row;
        uint8_t *d = img->pixels + (size_t)y * row;
        for (size_t i = 0; i < row; i++) {
            float v = blur_k0 * r2[i] + blur_k1 * (r1[i] + r3[i]) + blur_k2 * (r0[i] + r4[i]);
            int32_t q = (int32_t)round_even(v);  // the kernel is positive: q >= 0
            d[i] = (uint8_t)(q > 255 ? 255 : q);
        }
    }
    free(tmp);
    return OCR_OK;
}

// OpenCV's vectorised HSV→BGR stores v·255 truncated (its scalar tail rounds instead).
static inline uint8_t trunc_u8(float v) {
    int r = (int)v;
    return (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
}

// Which of OpenCV's tab[0..3] gives B, G, R in each hue sector.
static const uint8_t sector_pick[6][3] = {{1, 3, 0}, {1, 0, 2}, {3, 0, 1}, {0, 2, 1}, {0, 1, 3}, {2, 1, 0}};

void ocr_aug_hsv(OcrImage *img, double delta) {
    size_t n = (size_t)img->width * img->height;
    uint8_t *p = img->pixels;
    double scale = 1.0 + delta;
    // hsv[:, :, 2] = hsv[:, :, 2] * (1 + delta): float64 stored into uint8 truncates.
    uint8_t vnew[256];
    for (int v = 0; v < 256; v++) {
        int t = (int)(v * scale);
        vnew[v] = (uint8_t)(t > 255 ? 255 : t);
    }
    if (img->channels == 1) {
        for (size_t i = 0; i < n; i++) p[i] = vnew[p[i]];
        return;
    }
    // Tables: OpenCV's 8-bit BGR→HSV divisors (hsv_shift 12), and the float values its
    // HSV→BGR starts from: s/255, v/255, the hue sector and fraction of h·6/180.
    enum { SHIFT = 12 };
    int sdiv[256], hdiv[256];
    float sf[256], vf[256], hfrac[256];
    uint8_t hsec[256];
    sdiv[0] = hdiv[0] = 0;
    for (int i = 0; i < 256; i++) {
        if (i) {
            sdiv[i] = (int)lrint((double)(255 << SHIFT) / (1.0 * i));
            hdiv[i] = (int)lrint((double)(180 << SHIFT) / (6.0 * i));
        }
        sf[i] = (float)i * (1.f / 255.f);
        vf[i] = (float)vnew[i] * (1.f / 255.f);
        float h = (float)i * (6.f / 180.f);
        int sec = (int)h;
        hsec[i] = (uint8_t)(sec < 6 ? sec : 0);
        hfrac[i] = sec < 6 ? h - (float)sec : 0.f;
    }
    for (size_t i = 0; i < n; i++, p += 3) {
        // cv2.COLOR_BGR2HSV (8-bit): p[0] = B, p[2] = R.
        int b = p[0], g = p[1], r = p[2];
        int v = b > g ? b : g;
        v = v > r ? v : r;
        int vmin = b < g ? b : g;
        vmin = vmin < r ? vmin : r;
        int diff = v - vmin;
        float V = vf[v];
        if (diff == 0) {  // grey: S = 0, every channel is V
            uint8_t o = trunc_u8(V * 255.f);
            p[0] = p[1] = p[2] = o;
            continue;
        }
        int vr = v == r ? -1 : 0, vg = v == g ? -1 : 0;
        int s = (diff * sdiv[v] + (1 << (SHIFT - 1))) >> SHIFT;
        int hh = (vr & (g - b)) + (~vr & ((vg & (b - r + 2 * diff)) + ((~vg) & (r - g + 4 * diff))));
        hh = (hh * hdiv[diff] + (1 << (SHIFT - 1))) >> SHIFT;
        hh += hh < 0 ? 180 : 0;
        // HSV → BGR as OpenCV's HSV2RGB: tab0 = v, tab1 = v(1 − s), tab2 = v(1 − s·f),
        // tab3 = v(1 − s(1 − f)), picked per sector.
        float S = sf[s], f = hfrac[hh];
        float tab[4] = {V, V * (1.f - S), V * (1.f - S * f), V * (1.f - S * (1.f - f))};
        const uint8_t *sel = sector_pick[hsec[hh]];
        // tab values lie in (−1, 256) after ×255 (V <= 1; S·f can exceed 1 by an ulp), so
        // truncation toward zero lands in [0, 255] without clamping.
        p[0] = (uint8_t)(int)(tab[sel[0]] * 255.f);
        p[1] = (uint8_t)(int)(tab[sel[1]] * 255.f);
        p[2] = (uint8_t)(int)(tab[sel[2]] * 255.f);
    }
}

void ocr_aug_jitter(OcrImage *img, int s) {
    if (s <= 0) return;
    int w = img->width, h = img->height, c = img->channels;
    size_t row = (size_t)w * c;
    // In place, bottom-right to top-left: out[y][x] reads in[y−i][x−i] with i ≥ 0, which
    // is never a pixel already written in this order.
    for (int y = h - 1; y >= 0; y--) {
        uint8_t *d = img->pixels + (size_t)y * row;
        for (int x = w - 1; x >= 0; x--) {
            int i = y < x ? y : x;
            if (i > s - 1) i = s - 1;
            if (i == 0) break;  // i only shrinks as x does: the rest of the row stays
            const uint8_t *src = img->pixels + (size_t)(y - i) * row + (size_t)(x - i) * c;
            memcpy(d + (size_t)x * c, src, (size_t)c);
        }
    }
}

// Spreads 8 bits into the low bit of 8 bytes.
static uint64_t bits_to_bytes(uint32_t bits) {
    uint64_t x = bits & 0xFFu;
    x = (x | (x << 28)) & 0x0000000F0000000Full;
    x = (x | (x << 14)) & 0x0003000300030003ull;
    x = (x | (x << 7)) & 0x0101010101010101ull;
    return x;
}

void ocr_aug_noise(OcrImage *img, OcrRng *rng) {
    size_t n = (size_t)img->width * img->height * img->channels;
    uint8_t *p = img->pixels;
    // One random bit per value (the sign of the noise), 128 bits per Philox call.
    uint32_t key[2] = {(uint32_t)rng->seed, (uint32_t)(rng->seed >> 32)};
    rng->offset = (rng->offset + 3) & ~(uint64_t)3;  // whole Philox blocks, none reused
    size_t i = 0;
    while (i < n) {
        uint32_t ctr[4] = {(uint32_t)(rng->offset / 4), (uint32_t)(rng->offset / 4 >> 32), (uint32_t)rng->stream,
                           (uint32_t)(rng->stream >> 32)};
        uint32_t out[4];
        ocr_philox4x32_10(ctr, key, out);
        rng->offset += 4;  // consumes four 32-bit values of the stream
        for (int lane = 0; lane < 4 && i < n; lane++) {
            uint32_t bits = out[lane];
            for (int q = 0; q < 4 && i < n; q++, bits >>= 8) {
                if (n - i >= 8) {
                    // Eight values at once: subtract the bit from every non-zero byte (no
                    // borrow can cross a byte).
                    uint64_t v;
                    memcpy(&v, p + i, 8);
                    uint64_t nz = ((v & 0x7F7F7F7F7F7F7F7Full) + 0x7F7F7F7F7F7F7F7Full) | v;
                    nz = (nz >> 7) & 0x0101010101010101ull;
                    v -= bits_to_bytes(bits) & nz;
                    memcpy(p + i, &v, 8);
                    i += 8;
                } else {
                    for (int k = 0; k < 8 && i < n; k++, i++) p[i] = (uint8_t)(p[i] - (((bits >> k) & 1u) & (p[i] != 0)));
                }
            }
        }
    }
}

void ocr_aug_invert(OcrImage *img) {
    size_t n = (size_t)img->width * img->height * img->channels;
    uint8_t *p = img->pixels;  // a local pointer: stores through uint8_t* could alias img
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(255 - p[i]);
}

void ocr_rec_aug_defaults(OcrRecAugParams *p) {
    p->tia_prob = p->crop_prob = p->reverse_prob = p->noise_prob = p->jitter_prob = p->blur_prob = p->hsv_aug_prob =
        0.4;
}

// random.random() <= prob, with < so that a probability of 0 never fires.
static int coin(OcrRng *rng, double prob) { return ocr_rng_next_double(rng) < prob; }

ocr_status_t ocr_rec_aug(OcrImage *img, const OcrRecAugParams *p, OcrRng *rng) {
    int h = img->height, w = img->width;
    if (coin(rng, p->tia_prob)) {
        if (h >= 20 && w >= 20) {
            OCR_TRY(ocr_tia_distort(img, (int)ocr_rng_next_int(rng, 3, 6), rng));
            OCR_TRY(ocr_tia_stretch(img, (int)ocr_rng_next_int(rng, 3, 6), rng));
        }
        OCR_TRY(ocr_tia_perspective(img, rng));
    }
    h = img->height, w = img->width;
    if (coin(rng, p->crop_prob) && h >= 20 && w >= 20) {
        int rows = (int)ocr_rng_next_int(rng, 1, 8);
        int from_top = (int)ocr_rng_next_int(rng, 0, 1);
        OCR_TRY(ocr_aug_crop(img, rows, from_top));
    }
    if (coin(rng, p->blur_prob)) OCR_TRY(ocr_aug_blur(img));
    if (coin(rng, p->hsv_aug_prob)) {
        double mag = 0.001 * ocr_rng_next_double(rng);
        double sign = ocr_rng_next_double(rng) > 0.5000001 ? 1.0 : -1.0;  // flag()
        ocr_aug_hsv(img, mag * sign);
    }
    if (coin(rng, p->jitter_prob)) {
        h = img->height, w = img->width;
        if (h > 10 && w > 10) {
            int m = h < w ? h : w;
            ocr_aug_jitter(img, (int)(ocr_rng_next_double(rng) * m * 0.01));
        }
    }
    if (coin(rng, p->noise_prob)) ocr_aug_noise(img, rng);
    if (coin(rng, p->reverse_prob)) ocr_aug_invert(img);
    return OCR_OK;
}

// ---- RecConAug ------------------------------------------------------------------------

int ocr_rec_con_aug_fits(const OcrRecConAugParams *p, int cur_len, int cur_w, int cur_h, int ext_len, int ext_w,
                         int ext_h) {
    if (cur_len + ext_len > p->max_text_length) return 0;
    double ratio = (double)cur_w / cur_h + (double)ext_w / ext_h;
    return !(ratio > (double)p->image_w / p->image_h);
}

// round(w / h · H) with Python's round half to even, at least 1.
static int con_width(int w, int h, int H) {
    double v = rint((double)w / (double)h * (double)H);
    return v < 1.0 ? 1 : (int)v;
}

ocr_status_t ocr_rec_con_aug_merge(OcrImage *img, const OcrImage *ext, int image_h) {
    if (img->channels != ext->channels)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "RecConAug: images with %d and %d channels", img->channels,
                             ext->channels);
    int c = img->channels;
    int w0 = con_width(img->width, img->height, image_h), w1 = con_width(ext->width, ext->height, image_h);
    if ((int64_t)(w0 + w1) * image_h > OCR_IMAGE_MAX_PIXELS)
        return ocr_set_error(OCR_ERR_UNSUPPORTED, "RecConAug: concatenation too large");
    OcrImage out;
    OCR_TRY(ocr_image_alloc(&out, w0 + w1, image_h, c));
    uint8_t *a = malloc((size_t)w0 * image_h * c), *b = malloc((size_t)w1 * image_h * c);
    ocr_status_t st = OCR_OK;
    if (!a || !b) st = ocr_set_error(OCR_ERR_OOM, "RecConAug: out of memory");
    if (st == OCR_OK) st = ocr_resize_linear(a, w0, image_h, img->pixels, img->width, img->height, c);
    if (st == OCR_OK) st = ocr_resize_linear(b, w1, image_h, ext->pixels, ext->width, ext->height, c);
    if (st == OCR_OK) {
        for (int y = 0; y < image_h; y++) {
            uint8_t *d = out.pixels + (size_t)y * (w0 + w1) * c;
            memcpy(d, a + (size_t)y * w0 * c, (size_t)w0 * c);
            memcpy(d + (size_t)w0 * c, b + (size_t)y * w1 * c, (size_t)w1 * c);
        }
    }
    free(a);
    free(b);
    if (st != OCR_OK) {
        ocr_image_free(&out);
        return st;
    }
    ocr_image_free(img);
    *img = out;
    return OCR_OK;
}

// ---- config -----------------------------------------------------------------------------

static ocr_status_t get_prob(const OcrConfig *cfg, const char *base, const char *key, double def, double *out) {
    char path[512];
    snprintf(path, sizeof path, "%s.%s", base, key);
    OCR_TRY(ocr_config_get_double(cfg, path, def, out));
    return ocr_config_check_range(cfg, path, *out, 0.0, 1.0);
}

static ocr_status_t parse_shape(const OcrConfig *cfg, const char *base, int64_t *v, int *n) {
    char path[512];
    snprintf(path, sizeof path, "%s.image_shape", base);
    OCR_TRY(ocr_config_get_int_list(cfg, path, v, 3, n));
    if (*n != 0 && *n != 3)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s must have 3 entries, got %d", ocr_config_source(cfg), path, *n);
    return OCR_OK;
}

static const char *const transform_names[] = {"DecodeImage", "RecConAug", "RecAug",   "CTCLabelEncode",
                                              "RecResizeImg", "KeepKeys", NULL};

ocr_status_t ocr_transforms_parse(OcrTransformList *out, const OcrConfig *cfg, const char *path,
                                  int global_max_text_length) {
    memset(out, 0, sizeof *out);
    out->order = OCR_CHANNELS_BGR;
    out->channels = 3;
    out->padding = 1;
    ocr_rec_aug_defaults(&out->rec_aug);
    const char *src = ocr_config_source(cfg);
    const cJSON *list = ocr_config_node(cfg, path);
    if (!list || cJSON_IsNull(list))
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s is missing (a list of transforms)", src, path);
    if (!cJSON_IsArray(list))
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s must be a list of transforms", src, path);
    int seen[6] = {0};
    int idx = 0, label_at = -1, resize_at = -1, resize_c = 3;
    for (const cJSON *item = list->child; item; item = item->next, idx++) {
        char base[256];
        if (!cJSON_IsObject(item) || !item->child || item->child->next)
            return ocr_set_error(OCR_ERR_CONFIG, "%s: %s.%d must be an object with one key (a transform name)", src,
                                 path, idx);
        const char *name = item->child->string;
        int t = -1;
        for (int i = 0; transform_names[i]; i++)
            if (strcmp(name, transform_names[i]) == 0) t = i;
        // MultiLabelEncode takes CTCLabelEncode's place (one label op per list).
        const int multi_label = strcmp(name, "MultiLabelEncode") == 0;
        if (multi_label) t = 3;
        // PaddleOCR's SVTRRecResizeImg(image_shape, padding=True) is the same resize_norm_img call
        // as RecResizeImg (SVTR's configs use it): one resize op per list either way.
        if (strcmp(name, "SVTRRecResizeImg") == 0) t = 4;
        if (t < 0) {
            if (strcmp(name, "SARLabelEncode") == 0 || strcmp(name, "NRTRLabelEncode") == 0)
                return ocr_set_error(OCR_ERR_CONFIG,
                                     "%s: %s.%d: transform %s is not supported on its own (attention-only "
                                     "recognizers are not trained here): use CTCLabelEncode, or MultiLabelEncode for "
                                     "a MultiHead",
                                     src, path, idx, name);
            return ocr_set_error(OCR_ERR_CONFIG,
                                 "%s: %s.%d: unknown transform %s (known: DecodeImage, RecConAug, RecAug, "
                                 "CTCLabelEncode, MultiLabelEncode, RecResizeImg, SVTRRecResizeImg, KeepKeys)",
                                 src, path, idx, name);
        }
        if (seen[t])
            return ocr_set_error(OCR_ERR_CONFIG, "%s: %s.%d: %s appears twice%s", src, path, idx, name,
                                 t == 3 ? " (one label op: CTCLabelEncode or MultiLabelEncode)" : "");
        seen[t] = 1;
        if (t != 0 && !seen[0])
            return ocr_set_error(OCR_ERR_CONFIG, "%s: %s.%d: %s before DecodeImage (DecodeImage must come first)",
                                 src, path, idx, name);
        snprintf(base, sizeof base, "%s.%d.%s", path, idx, name);
        const cJSON *params = item->child;
        if (!cJSON_IsNull(params) && !cJSON_IsObject(params))
            return ocr_set_error(OCR_ERR_CONFIG, "%s: %s must be an object or null", src, base);
        switch (t) {
        case 0: {  // DecodeImage
            static const char *const keys[] = {"img_mode", "channel_first", "ignore_orientation", NULL};
            OCR_TRY(ocr_config_check_keys(cfg, base, keys));
            char p[300];
            const char *mode;
            snprintf(p, sizeof p, "%s.img_mode", base);
            OCR_TRY(ocr_config_get_string(cfg, p, "BGR", &mode));
            if (strcmp(mode, "BGR") == 0) out->order = OCR_CHANNELS_BGR, out->channels = 3;
            else if (strcmp(mode, "RGB") == 0) out->order = OCR_CHANNELS_RGB, out->channels = 3;
            else if (strcmp(mode, "GRAY") == 0) out->order = OCR_CHANNELS_GRAY, out->channels = 1;
            else
                return ocr_set_error(OCR_ERR_CONFIG, "%s: %s must be BGR, RGB or GRAY, got \"%s\"", src, p, mode);
            int cf;
            snprintf(p, sizeof p, "%s.channel_first", base);
            OCR_TRY(ocr_config_get_bool(cfg, p, 0, &cf));
            if (cf)
                return ocr_set_error(OCR_ERR_CONFIG, "%s: %s must be false (batches are NHWC)", src, p);
            snprintf(p, sizeof p, "%s.ignore_orientation", base);
            OCR_TRY(ocr_config_get_bool(cfg, p, 0, &cf));
            break;
        }
        case 1: {  // RecConAug
            static const char *const keys[] = {"prob", "ext_data_num", "image_shape", "max_text_length", NULL};
            OCR_TRY(ocr_config_check_keys(cfg, base, keys));
            if (label_at >= 0 || resize_at >= 0)
                return ocr_set_error(OCR_ERR_CONFIG, "%s: %s must come before CTCLabelEncode and RecResizeImg", src,
                                     base);
            OcrRecConAugParams *c = &out->con_aug;
            OCR_TRY(get_prob(cfg, base, "prob", 0.5, &c->prob));
            char p[300];
            int64_t v;
            snprintf(p, sizeof p, "%s.ext_data_num", base);
            OCR_TRY(ocr_config_get_int(cfg, p, 1, &v));
            OCR_TRY(ocr_config_check_range(cfg, p, (double)v, 0, 16));
            c->ext_data_num = (int)v;
            snprintf(p, sizeof p, "%s.max_text_length", base);
            OCR_TRY(ocr_config_get_int(cfg, p, 25, &v));
            OCR_TRY(ocr_config_check_range(cfg, p, (double)v, 1, 1000));
            c->max_text_length = global_max_text_length > 0 ? global_max_text_length : (int)v;
            int64_t shape[3];
            int n;
            OCR_TRY(parse_shape(cfg, base, shape, &n));
            if (n == 0) shape[0] = 32, shape[1] = 320, shape[2] = 3;  // the class default (32, 320, 3)
            snprintf(p, sizeof p, "%s.image_shape", base);
            if (shape[0] < 1 || shape[0] > 1024 || shape[1] < 1 || shape[1] > 16384)
                return ocr_set_error(OCR_ERR_CONFIG, "%s: %s must be [H, W, C] with 1 <= H <= 1024, 1 <= W <= 16384",
                                     src, p);
            c->image_h = (int)shape[0], c->image_w = (int)shape[1];
            out->ops[out->num_ops++] = OCR_TOP_REC_CON_AUG;
            break;
        }
        case 2: {  // RecAug
            static const char *const keys[] = {"tia_prob",  "crop_prob", "reverse_prob", "noise_prob",
                                               "jitter_prob", "blur_prob", "hsv_aug_prob", NULL};
            OCR_TRY(ocr_config_check_keys(cfg, base, keys));
            if (label_at >= 0 || resize_at >= 0)
                return ocr_set_error(OCR_ERR_CONFIG, "%s: %s must come before CTCLabelEncode and RecResizeImg", src,
                                     base);
            OcrRecAugParams *a = &out->rec_aug;
            OCR_TRY(get_prob(cfg, base, "tia_prob", 0.4, &a->tia_prob));
            OCR_TRY(get_prob(cfg, base, "crop_prob", 0.4, &a->crop_prob));
            OCR_TRY(get_prob(cfg, base, "reverse_prob", 0.4, &a->reverse_prob));
            OCR_TRY(get_prob(cfg, base, "noise_prob", 0.4, &a->noise_prob));
            OCR_TRY(get_prob(cfg, base, "jitter_prob", 0.4, &a->jitter_prob));
            OCR_TRY(get_prob(cfg, base, "blur_prob", 0.4, &a->blur_prob));
            OCR_TRY(get_prob(cfg, base, "hsv_aug_prob", 0.4, &a->hsv_aug_prob));
            out->ops[out->num_ops++] = OCR_TOP_REC_AUG;
            break;
        }
        case 3: {  // CTCLabelEncode / MultiLabelEncode: the dictionary and max_text_length come from Global
            static const char *const keys[] = {NULL}, *const multi_keys[] = {"gtc_encode", NULL};
            ocr_status_t st = ocr_config_check_keys(cfg, base, multi_label ? multi_keys : keys);
            if (st != OCR_OK)
                return ocr_wrap_error(st, "%s takes its settings from Global (character_dict_path, "
                                          "use_space_char, max_text_length)",
                                      name);
            label_at = idx;
            out->label_encode = OCR_LABEL_ENCODE_CTC;
            if (multi_label) {
                char p[300];
                const char *gtc;
                snprintf(p, sizeof p, "%s.gtc_encode", base);
                OCR_TRY(ocr_config_get_string(cfg, p, NULL, &gtc));
                if (gtc && strcmp(gtc, "NRTRLabelEncode") != 0)
                    return ocr_set_error(OCR_ERR_CONFIG, "%s: %s must be NRTRLabelEncode or null (SAR), got \"%s\"",
                                         src, p, gtc);
                out->label_encode = gtc ? OCR_LABEL_ENCODE_MULTI_NRTR : OCR_LABEL_ENCODE_MULTI_SAR;
                int L = global_max_text_length > 0 ? global_max_text_length : 25;
                if (L < 3)
                    return ocr_set_error(OCR_ERR_CONFIG, "%s: %s needs Global.max_text_length >= 3, got %d", src,
                                         base, L);
                out->label_max_len = L - 2;
            }
            break;
        }
        case 4: {  // RecResizeImg
            static const char *const keys[] = {"image_shape", "padding", "infer_mode", "character_dict_path",
                                               "eval_mode", NULL};
            OCR_TRY(ocr_config_check_keys(cfg, base, keys));
            int64_t shape[3];
            int n;
            OCR_TRY(parse_shape(cfg, base, shape, &n));
            char p[300];
            snprintf(p, sizeof p, "%s.image_shape", base);
            if (n == 0) return ocr_set_error(OCR_ERR_CONFIG, "%s: %s is missing ([C, H, W])", src, p);
            if ((shape[0] != 1 && shape[0] != 3) || shape[1] < 1 || shape[1] > 1024 || shape[2] < 1 ||
                shape[2] > 16384)
                return ocr_set_error(OCR_ERR_CONFIG,
                                     "%s: %s must be [C, H, W] with C 1 or 3, 1 <= H <= 1024, 1 <= W <= 16384", src,
                                     p);
            resize_c = (int)shape[0];
            out->resize_h = (int)shape[1], out->resize_w = (int)shape[2];
            snprintf(p, sizeof p, "%s.padding", base);
            OCR_TRY(ocr_config_get_bool(cfg, p, 1, &out->padding));
            int infer;
            snprintf(p, sizeof p, "%s.infer_mode", base);
            OCR_TRY(ocr_config_get_bool(cfg, p, 0, &infer));
            if (infer)
                return ocr_set_error(OCR_ERR_CONFIG,
                                     "%s: %s: infer_mode (variable width) is not supported in datasets", src, p);
            // eval_mode: PaddleOCR resizes to the widest of image_shape and the image's own aspect
            // (resize_norm_img_chinese), a variable width too.
            snprintf(p, sizeof p, "%s.eval_mode", base);
            OCR_TRY(ocr_config_get_bool(cfg, p, 0, &infer));
            if (infer)
                return ocr_set_error(OCR_ERR_CONFIG,
                                     "%s: %s: eval_mode (variable width) is not supported in datasets; set it to false "
                                     "(every line resized to image_shape)", src, p);
            const char *unused;
            snprintf(p, sizeof p, "%s.character_dict_path", base);
            OCR_TRY(ocr_config_get_string(cfg, p, NULL, &unused));
            out->has_resize = 1;
            resize_at = idx;
            break;
        }
        case 5: {  // KeepKeys
            static const char *const keys[] = {"keep_keys", NULL};
            OCR_TRY(ocr_config_check_keys(cfg, base, keys));
            break;
        }
        }
    }
    if (!seen[0]) return ocr_set_error(OCR_ERR_CONFIG, "%s: %s has no DecodeImage", src, path);
    if (!seen[3])
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s has no label op (CTCLabelEncode or MultiLabelEncode)", src, path);
    // A concatenation (RecConAug) must stay a text MultiLabelEncode keeps.
    if (out->label_max_len && out->con_aug.max_text_length > out->label_max_len)
        out->con_aug.max_text_length = out->label_max_len;
    if (out->has_resize && resize_c != out->channels)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s: RecResizeImg has %d channels but DecodeImage gives %d", src,
                             path, resize_c, out->channels);
    return OCR_OK;
}

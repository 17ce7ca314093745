// Transforms against hand-computed pixels: cv2-style linear resize (fixed-point weights,
// clamped borders, 2× area path), RecResizeImg width/padding/valid_ratio, crop, inversion,
// jitter, the 5-tap Gaussian blur (reflect-101 borders),
// HSV, noise, WarpMLS identity and translation, TIA determinism, RecConAug rules and
// merging, and the transform-list config.
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/rng.h"
#include "data/transforms.h"
#include "tests/common/test_util.h"

static OcrImage make_image(int w, int h, int c, const uint8_t *values) {
    OcrImage img;
    ck_assert_int_eq(ocr_image_alloc(&img, w, h, c), OCR_OK);
    if (values) memcpy(img.pixels, values, (size_t)w * h * c);
    return img;
}

static OcrImage random_image(int w, int h, int c, uint64_t seed) {
    OcrImage img = make_image(w, h, c, NULL);
    OcrRng rng = ocr_rng_make(seed, 1);
    for (size_t i = 0; i < (size_t)w * h * c; i++) img.pixels[i] = (uint8_t)(ocr_rng_next_u32(&rng) & 255);
    return img;
}

static void assert_bytes(const uint8_t *got, const uint8_t *want, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "%s: byte %zu is %d, expected %d", what, i, got[i], want[i]);
}

// ---- resize ----------------------------------------------------------------------------

START_TEST(test_resize_upscale_row) {
    // 2 → 4 columns: fx = (dx + 0.5)/2 − 0.5 = −0.25 (clamped to pixel 0), 0.25, 0.75, 1.25
    // (clamped to pixel 1): 0, 0.75·0 + 0.25·100, 0.25·0 + 0.75·100, 100.
    const uint8_t src[2] = {0, 100};
    uint8_t dst[4];
    ck_assert_int_eq(ocr_resize_linear(dst, 4, 1, src, 2, 1, 1), OCR_OK);
    const uint8_t want[4] = {0, 25, 75, 100};
    assert_bytes(dst, want, 4, "2→4");
}
END_TEST

START_TEST(test_resize_rounding) {
    // 3 → 2 columns (scale 1.5): fx = 0.25 → weights 1536/512 of pixels 0,1; fx = 1.75 →
    // 512/1536 of pixels 1,2. Row: (10, 11, 30). Column 0: 10·1536 + 11·512 = 20992,
    // (2048·(20992>>4))>>16 = 41, (41 + 2)>>2 = 10 (10.25). Column 1: 11·512 + 30·1536 =
    // 51712 → 3232 → 101 → (101+2)>>2 = 25 (25.25).
    const uint8_t src[3] = {10, 11, 30};
    uint8_t dst[2];
    ck_assert_int_eq(ocr_resize_linear(dst, 2, 1, src, 3, 1, 1), OCR_OK);
    const uint8_t want[2] = {10, 25};
    assert_bytes(dst, want, 2, "3→2");
    // Vertical 1 → 2 rows of one column is a copy per row (clamped both ends: fy = −0.25 and 0.25
    // with 1 source row means weight 0 on a second row).
    const uint8_t one[1] = {77};
    uint8_t two[2];
    ck_assert_int_eq(ocr_resize_linear(two, 1, 2, one, 1, 1, 1), OCR_OK);
    ck_assert_int_eq(two[0], 77);
    ck_assert_int_eq(two[1], 77);
    // Vertical 2 → 3 rows (scale 2/3): fy = −1/6 (row 0), 0.5 (rows 0,1 at 1024 each),
    // 7/6 (clamped to row 1). Rows 0 and 1: 0 and 255: middle = ((1024·(522240>>4))>>16 + 2)>>2:
    // 522240 = 255·2048; >>4 = 32640; ·1024 >> 16 = 510; (510 + 2)>>2 = 128.
    const uint8_t col[2] = {0, 255};
    uint8_t three[3];
    ck_assert_int_eq(ocr_resize_linear(three, 1, 3, col, 1, 2, 1), OCR_OK);
    const uint8_t want3[3] = {0, 128, 255};
    assert_bytes(three, want3, 3, "2→3 rows");
    // Vertical weights are not clamped at the borders (OpenCV clamps only the row index):
    // three rows (0, 101) → 3×8. Middle column: S = 101·1024 = 103424, S>>4 = 6464. Row 0 has
    // fy = 0.5·0.375 − 0.5 = −0.3125 → weights 640/1408 on row 0 twice: (640·6464)>>16 = 63,
    // (1408·6464)>>16 = 138, (63 + 138 + 2)>>2 = 50; clamped weights would give 51.
    // Every row is 0, 50, 101 (what cv2.resize returns).
    const uint8_t rows3[6] = {0, 101, 0, 101, 0, 101};
    uint8_t out38[3 * 8];
    ck_assert_int_eq(ocr_resize_linear(out38, 3, 8, rows3, 2, 3, 1), OCR_OK);
    for (int y = 0; y < 8; y++) {
        const uint8_t want_row[3] = {0, 50, 101};
        assert_bytes(out38 + 3 * y, want_row, 3, "border rows");
    }
}
END_TEST

START_TEST(test_resize_area_and_copy) {
    // Exactly half in both directions: OpenCV switches to INTER_AREA, (a+b+c+d+2)>>2.
    const uint8_t src[8] = {10, 20, 30, 40, 50, 62, 70, 81};
    uint8_t dst[2];
    ck_assert_int_eq(ocr_resize_linear(dst, 2, 1, src, 4, 2, 1), OCR_OK);
    const uint8_t want[2] = {(10 + 20 + 50 + 62 + 2) >> 2, (30 + 40 + 70 + 81 + 2) >> 2};  // 36, 55
    assert_bytes(dst, want, 2, "area 2x");
    ck_assert_int_eq(dst[0], 36);
    // Same size: a copy.
    OcrImage img = random_image(7, 5, 3, 3);
    uint8_t out[7 * 5 * 3];
    ck_assert_int_eq(ocr_resize_linear(out, 7, 5, img.pixels, 7, 5, 3), OCR_OK);
    assert_bytes(out, img.pixels, sizeof out, "copy");
    ocr_image_free(&img);
}
END_TEST

START_TEST(test_resize_channels_independent) {
    // A 3-channel resize equals three 1-channel resizes of the planes.
    OcrImage img = random_image(13, 9, 3, 5);
    int dw = 29, dh = 6;
    uint8_t *out = malloc((size_t)dw * dh * 3);
    ck_assert_int_eq(ocr_resize_linear(out, dw, dh, img.pixels, 13, 9, 3), OCR_OK);
    uint8_t plane[13 * 9], po[29 * 6];
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 13 * 9; i++) plane[i] = img.pixels[3 * i + k];
        ck_assert_int_eq(ocr_resize_linear(po, dw, dh, plane, 13, 9, 1), OCR_OK);
        for (int i = 0; i < dw * dh; i++) ck_assert_int_eq(out[3 * i + k], po[i]);
    }
    free(out);
    ocr_image_free(&img);
}
END_TEST

START_TEST(test_rec_resize_width_and_pad) {
    ck_assert_int_eq(ocr_rec_resized_width(32, 100, 48, 320), 150);  // ceil(48·3.125)
    ck_assert_int_eq(ocr_rec_resized_width(30, 100, 48, 320), 160);  // 48·3.333.. = 160.000..
    ck_assert_int_eq(ocr_rec_resized_width(48, 49, 48, 320), 49);
    ck_assert_int_eq(ocr_rec_resized_width(10, 1000, 48, 320), 320);
    ck_assert_int_eq(ocr_rec_resized_width(1000, 1, 48, 320), 1);
    // A 4×2 gray image into a 3-channel 2×8 slot: height unchanged, width ceil(2·4/2) = 4.
    const uint8_t px[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    OcrImage img = make_image(4, 2, 1, px);
    uint8_t slot[2 * 8 * 3];
    memset(slot, 0xEE, sizeof slot);
    int rw;
    float vr;
    ck_assert_int_eq(ocr_rec_resize_pad(slot, 2, 8, 3, &img, 1, &rw, &vr), OCR_OK);
    ck_assert_int_eq(rw, 4);
    ck_assert(vr == 0.5f);
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 8; x++)
            for (int k = 0; k < 3; k++) {
                int want = x < 4 ? px[y * 4 + x] : OCR_PAD_VALUE;
                ck_assert_int_eq(slot[(y * 8 + x) * 3 + k], want);
            }
    // padding = 0 stretches to the full width: valid_ratio 1.
    ck_assert_int_eq(ocr_rec_resize_pad(slot, 2, 8, 3, &img, 0, &rw, &vr), OCR_OK);
    ck_assert_int_eq(rw, 8);
    ck_assert(vr == 1.0f);
    // A colour image into a 1-channel batch is refused.
    OcrImage col = random_image(3, 3, 3, 1);
    ck_assert_int_eq(ocr_rec_resize_pad(slot, 2, 8, 1, &col, 1, &rw, &vr), OCR_ERR_INVALID_ARG);
    ocr_image_free(&col);
    ocr_image_free(&img);
}
END_TEST

// ---- BaseDataAugmentation --------------------------------------------------------------

START_TEST(test_crop_invert_jitter) {
    uint8_t px[5 * 4];
    for (int i = 0; i < 20; i++) px[i] = (uint8_t)(10 * i);
    OcrImage img = make_image(4, 5, 1, px);
    ck_assert_int_eq(ocr_aug_crop(&img, 2, 1), OCR_OK);  // drop the top two rows
    ck_assert_int_eq(img.height, 3);
    assert_bytes(img.pixels, px + 8, 12, "crop top");
    ck_assert_int_eq(ocr_aug_crop(&img, 1, 0), OCR_OK);  // drop the bottom row
    ck_assert_int_eq(img.height, 2);
    assert_bytes(img.pixels, px + 8, 8, "crop bottom");
    ck_assert_int_eq(ocr_aug_crop(&img, 8, 1), OCR_OK);  // capped at h − 1
    ck_assert_int_eq(img.height, 1);
    assert_bytes(img.pixels, px + 12, 4, "crop capped");
    ocr_image_free(&img);

    img = make_image(4, 5, 1, px);
    ocr_aug_invert(&img);
    for (int i = 0; i < 20; i++) ck_assert_int_eq(img.pixels[i], 255 - px[i]);
    ocr_image_free(&img);

    // Jitter s = 2 on a 4×4 image: for i in range(2): img[i:, i:] = src[:4−i, :4−i], so
    // every pixel with y ≥ 1 and x ≥ 1 takes src[y−1][x−1]; row 0 and column 0 stay.
    uint8_t j[16];
    for (int i = 0; i < 16; i++) j[i] = (uint8_t)i;
    img = make_image(4, 4, 1, j);
    ocr_aug_jitter(&img, 2);
    const uint8_t want[16] = {0, 1, 2, 3, 4, 0, 1, 2, 8, 4, 5, 6, 12, 8, 9, 10};
    assert_bytes(img.pixels, want, 16, "jitter 2");
    ocr_image_free(&img);
    // s = 3 on 4×4: i = min(y, x, 2): (2,2) ← src(0,0), (3,3) ← src(1,1), (3,2) ← src(1,0).
    img = make_image(4, 4, 1, j);
    ocr_aug_jitter(&img, 3);
    const uint8_t want3[16] = {0, 1, 2, 3, 4, 0, 1, 2, 8, 4, 0, 1, 12, 8, 4, 5};
    assert_bytes(img.pixels, want3, 16, "jitter 3");
    ocr_aug_jitter(&img, 0);  // no-op
    assert_bytes(img.pixels, want3, 16, "jitter 0");
    ocr_image_free(&img);
}
END_TEST

START_TEST(test_blur_kernel) {
    // Flat images stay flat: the kernel exp(−x²/2)/Σ sums to 1 (within float rounding).
    const int flat[4] = {0, 128, 200, 255};
    for (int t = 0; t < 4; t++) {
        OcrImage img = make_image(6, 7, 3, NULL);
        memset(img.pixels, flat[t], 6 * 7 * 3);
        ck_assert_int_eq(ocr_aug_blur(&img), OCR_OK);
        for (int i = 0; i < 6 * 7 * 3; i++) ck_assert_int_eq(img.pixels[i], flat[t]);
        ocr_image_free(&img);
    }
    // An impulse of 255 at the centre of a 5×5 image, with k0 = 0.40262, k1 = 0.24420,
    // k2 = 0.05449: centre 255·k0² = 41.34 → 41; (2, 1): 255·k0·k1 = 25.07 → 25;
    // (1, 1): 255·k1² = 15.21 → 15; (2, 0): 255·k0·2k2 = 11.19 → 11 (reflect-101 maps
    // column −2 to 2, so the centre enters column 0 twice); corner (0, 0): 255·(2k2)² = 3.03 → 3.
    uint8_t px[25] = {0};
    px[12] = 255;
    OcrImage img = make_image(5, 5, 1, px);
    ck_assert_int_eq(ocr_aug_blur(&img), OCR_OK);
    const uint8_t want[25] = {3, 7, 11, 7, 3, 7, 15, 25, 15, 7, 11, 25, 41, 25, 11, 7, 15, 25, 15, 7, 3, 7, 11, 7, 3};
    assert_bytes(img.pixels, want, 25, "impulse");
    ocr_image_free(&img);
    // A 1-pixel image: reflect-101 of a single column/row is the pixel itself.
    uint8_t one = 100;
    img = make_image(1, 1, 1, &one);
    ck_assert_int_eq(ocr_aug_blur(&img), OCR_OK);
    ck_assert_int_eq(img.pixels[0], 100);
    ocr_image_free(&img);
}
END_TEST

START_TEST(test_hsv) {
    // Pure red in BGR: H 0, S 255, V 255. delta ≥ 0 keeps V (255·1.0005 truncates to 255);
    // delta < 0 makes V 254: red becomes (0, 0, 254).
    const uint8_t red[3] = {0, 0, 255};
    OcrImage img = make_image(1, 1, 3, red);
    ocr_aug_hsv(&img, 0.0005);
    assert_bytes(img.pixels, red, 3, "hsv +");
    ocr_aug_hsv(&img, -0.0005);
    const uint8_t red2[3] = {0, 0, 254};
    assert_bytes(img.pixels, red2, 3, "hsv −");
    ocr_image_free(&img);
    // Grey (S = 0) with delta < 0: every channel becomes v − 1 (0 stays 0).
    const uint8_t grey[6] = {90, 90, 90, 0, 0, 0};
    img = make_image(2, 1, 3, grey);
    ocr_aug_hsv(&img, -0.001);
    const uint8_t grey2[6] = {89, 89, 89, 0, 0, 0};
    assert_bytes(img.pixels, grey2, 6, "hsv grey");
    ocr_image_free(&img);
    // The 8-bit HSV round trip of an arbitrary colour stays close (hue has 30 steps per
    // 60° sector, so a middle channel moves by up to v/60 ≈ 4.3 levels).
    OcrImage r = random_image(64, 8, 3, 11), copy = random_image(64, 8, 3, 11);
    ocr_aug_hsv(&r, 0.0001);
    for (int i = 0; i < 64 * 8 * 3; i++) ck_assert_int_le(abs(r.pixels[i] - copy.pixels[i]), 6);
    ocr_image_free(&r);
    ocr_image_free(&copy);
}
END_TEST

START_TEST(test_noise) {
    OcrImage a = random_image(50, 20, 3, 7), b = random_image(50, 20, 3, 7), orig = random_image(50, 20, 3, 7);
    a.pixels[0] = orig.pixels[0] = b.pixels[0] = 0;
    OcrRng r1 = ocr_rng_make(42, 9), r2 = ocr_rng_make(42, 9);
    ocr_aug_noise(&a, &r1);
    ocr_aug_noise(&b, &r2);
    assert_bytes(a.pixels, b.pixels, 3000, "noise determinism");
    ck_assert(r1.offset == r2.offset && r1.offset > 0);
    int dec = 0;
    for (int i = 0; i < 3000; i++) {
        int d = orig.pixels[i] - a.pixels[i];
        ck_assert(d == 0 || d == 1);
        dec += d;
    }
    ck_assert_int_eq(a.pixels[0], 0);
    // About half decrease (binomial(3000, 1/2): ±6σ is ±164).
    ck_assert_int_gt(dec, 1500 - 164);
    ck_assert_int_lt(dec, 1500 + 164);
    ocr_image_free(&a);
    ocr_image_free(&b);
    ocr_image_free(&orig);
}
END_TEST

// ---- WarpMLS / TIA ---------------------------------------------------------------------

START_TEST(test_warp_identity_and_translation) {
    // The TIA control points with no displacement: an exact copy (250 wide: three cells).
    OcrImage img = random_image(250, 30, 3, 21), out;
    OcrPointD pts[8] = {{0, 0}, {250, 0}, {250, 30}, {0, 30}, {83, 0}, {83, 30}, {166, 0}, {166, 30}};
    ck_assert_int_eq(ocr_warp_mls(&out, &img, pts, pts, 8), OCR_OK);
    ck_assert_int_eq(out.width, 250);
    ck_assert_int_eq(out.height, 30);
    assert_bytes(out.pixels, img.pixels, 250 * 30 * 3, "identity");
    ocr_image_free(&out);
    // Every destination point moved right by 2: the similarity fit is that translation, so
    // out[y][x] = in[y][max(x − 2, 0)].
    OcrPointD moved[8];
    for (int i = 0; i < 8; i++) moved[i] = (OcrPointD){pts[i].x + 2, pts[i].y};
    ck_assert_int_eq(ocr_warp_mls(&out, &img, pts, moved, 8), OCR_OK);
    for (int y = 0; y < 30; y++)
        for (int x = 0; x < 250; x++)
            for (int k = 0; k < 3; k++) {
                int sx = x - 2 < 0 ? 0 : x - 2;
                ck_assert_int_eq(out.pixels[(y * 250 + x) * 3 + k], img.pixels[(y * 250 + sx) * 3 + k]);
            }
    ocr_image_free(&out);
    // A real warp: the 3-channel result equals the three planes warped on their own (the
    // vectorised colour path and the scalar path compute the same thing).
    OcrPointD bent[8];
    for (int i = 0; i < 8; i++) bent[i] = (OcrPointD){pts[i].x + (i % 3) * 1.7 - 2, pts[i].y + (i % 2) * 2.3 - 1};
    ck_assert_int_eq(ocr_warp_mls(&out, &img, pts, bent, 8), OCR_OK);
    for (int k = 0; k < 3; k++) {
        OcrImage plane = make_image(250, 30, 1, NULL), po;
        for (int i = 0; i < 250 * 30; i++) plane.pixels[i] = img.pixels[3 * i + k];
        ck_assert_int_eq(ocr_warp_mls(&po, &plane, pts, bent, 8), OCR_OK);
        for (int i = 0; i < 250 * 30; i++) ck_assert_int_eq(out.pixels[3 * i + k], po.pixels[i]);
        ocr_image_free(&plane);
        ocr_image_free(&po);
    }
    int moved_px = 0;
    for (int i = 0; i < 250 * 30 * 3; i++) moved_px += out.pixels[i] != img.pixels[i];
    ck_assert_int_gt(moved_px, 250 * 30);
    ocr_image_free(&out);
    // Fewer than two points: a copy.
    ck_assert_int_eq(ocr_warp_mls(&out, &img, pts, moved, 1), OCR_OK);
    assert_bytes(out.pixels, img.pixels, 250 * 30 * 3, "n < 2");
    ocr_image_free(&out);
    ocr_image_free(&img);
}
END_TEST

START_TEST(test_tia_deterministic) {
    OcrImage a = random_image(120, 32, 3, 4), b = random_image(120, 32, 3, 4), orig = random_image(120, 32, 3, 4);
    OcrRng r1 = ocr_rng_make(5, 77), r2 = ocr_rng_make(5, 77);
    ck_assert_int_eq(ocr_tia_distort(&a, 4, &r1), OCR_OK);
    ck_assert_int_eq(ocr_tia_stretch(&a, 5, &r1), OCR_OK);
    ck_assert_int_eq(ocr_tia_perspective(&a, &r1), OCR_OK);
    ck_assert_int_eq(ocr_tia_distort(&b, 4, &r2), OCR_OK);
    ck_assert_int_eq(ocr_tia_stretch(&b, 5, &r2), OCR_OK);
    ck_assert_int_eq(ocr_tia_perspective(&b, &r2), OCR_OK);
    ck_assert_int_eq(a.width, 120);
    ck_assert_int_eq(a.height, 32);
    assert_bytes(a.pixels, b.pixels, 120 * 32 * 3, "tia determinism");
    ck_assert(memcmp(a.pixels, orig.pixels, 120 * 32 * 3) != 0);
    // Tiny images never fail: perspective on a 1-row image has no displacement.
    OcrImage t = random_image(3, 1, 1, 2), t0 = random_image(3, 1, 1, 2);
    ck_assert_int_eq(ocr_tia_perspective(&t, &r1), OCR_OK);
    assert_bytes(t.pixels, t0.pixels, 3, "tiny perspective");
    ocr_image_free(&t);
    ocr_image_free(&t0);
    ocr_image_free(&a);
    ocr_image_free(&b);
    ocr_image_free(&orig);
}
END_TEST

START_TEST(test_rec_aug_reproducible) {
    OcrRecAugParams p;
    ocr_rec_aug_defaults(&p);
    int changed = 0;
    for (int s = 0; s < 12; s++) {
        OcrImage a = random_image(90, 32, 3, 100 + s), b = random_image(90, 32, 3, 100 + s);
        OcrRng r1 = ocr_rng_make(3, (uint64_t)s), r2 = ocr_rng_make(3, (uint64_t)s);
        ck_assert_int_eq(ocr_rec_aug(&a, &p, &r1), OCR_OK);
        ck_assert_int_eq(ocr_rec_aug(&b, &p, &r2), OCR_OK);
        ck_assert_int_eq(a.width, b.width);
        ck_assert_int_eq(a.height, b.height);
        assert_bytes(a.pixels, b.pixels, (size_t)a.width * a.height * 3, "rec_aug");
        OcrImage o = random_image(90, 32, 3, 100 + s);
        if (a.height != 32 || memcmp(a.pixels, o.pixels, 90 * 32 * 3) != 0) changed++;
        ocr_image_free(&o);
        ocr_image_free(&a);
        ocr_image_free(&b);
    }
    ck_assert_int_gt(changed, 6);  // P(no op fires) = 0.6^7 ≈ 0.03 per sample
    // All probabilities 0: untouched.
    OcrRecAugParams zero = {0, 0, 0, 0, 0, 0, 0};
    OcrImage a = random_image(90, 32, 3, 1), o = random_image(90, 32, 3, 1);
    OcrRng r = ocr_rng_make(1, 1);
    ck_assert_int_eq(ocr_rec_aug(&a, &zero, &r), OCR_OK);
    assert_bytes(a.pixels, o.pixels, 90 * 32 * 3, "no aug");
    // Inversion only: exact.
    OcrRecAugParams inv = {0, 0, 1, 0, 0, 0, 0};
    ck_assert_int_eq(ocr_rec_aug(&a, &inv, &r), OCR_OK);
    for (int i = 0; i < 90 * 32 * 3; i++) ck_assert_int_eq(a.pixels[i], 255 - o.pixels[i]);
    ocr_image_free(&a);
    ocr_image_free(&o);
}
END_TEST

// ---- RecConAug -------------------------------------------------------------------------

START_TEST(test_con_aug) {
    OcrRecConAugParams p = {0.5, 2, 48, 320, 25};
    ck_assert(ocr_rec_con_aug_fits(&p, 10, 100, 48, 15, 100, 48));    // 25 chars, ratio 4.17
    ck_assert(!ocr_rec_con_aug_fits(&p, 10, 100, 48, 16, 100, 48));   // 26 chars
    ck_assert(ocr_rec_con_aug_fits(&p, 1, 160, 48, 1, 160, 48));      // ratio 6.666.. = 320/48
    ck_assert(!ocr_rec_con_aug_fits(&p, 1, 160, 48, 1, 161, 48));     // just over
    // Widths: round(w/h·48) half to even: 3/96·48 = 1.5 → 2; 5/96·48 = 2.5 → 2; 1/96·48 → 0 → 1.
    OcrImage a = random_image(3, 96, 1, 1), b = random_image(5, 96, 1, 2);
    ck_assert_int_eq(ocr_rec_con_aug_merge(&a, &b, 48), OCR_OK);
    ck_assert_int_eq(a.width, 4);
    ck_assert_int_eq(a.height, 48);
    OcrImage c = random_image(1, 96, 1, 3);
    ck_assert_int_eq(ocr_rec_con_aug_merge(&a, &c, 48), OCR_OK);
    ck_assert_int_eq(a.width, 5);  // 4 (already 48 high) + 1
    ocr_image_free(&a);
    ocr_image_free(&b);
    ocr_image_free(&c);
    // Content: two 48-high images are placed side by side unchanged.
    OcrImage l = random_image(10, 48, 3, 4), r = random_image(7, 48, 3, 5), l0 = random_image(10, 48, 3, 4);
    ck_assert_int_eq(ocr_rec_con_aug_merge(&l, &r, 48), OCR_OK);
    ck_assert_int_eq(l.width, 17);
    for (int y = 0; y < 48; y++) {
        assert_bytes(l.pixels + (size_t)y * 17 * 3, l0.pixels + (size_t)y * 10 * 3, 30, "left");
        assert_bytes(l.pixels + (size_t)y * 17 * 3 + 30, r.pixels + (size_t)y * 7 * 3, 21, "right");
    }
    ocr_image_free(&l);
    ocr_image_free(&r);
    ocr_image_free(&l0);
}
END_TEST

// ---- config ----------------------------------------------------------------------------

static ocr_status_t parse_text(const char *json, OcrTransformList *t, int global_len) {
    OcrConfig *cfg;
    ck_assert_int_eq(ocr_config_parse(&cfg, json, "t.json"), OCR_OK);
    ocr_status_t st = ocr_transforms_parse(t, cfg, "Train.dataset.transforms", global_len);
    ocr_config_free(cfg);
    return st;
}

START_TEST(test_parse_config) {
    char path[1024];
    snprintf(path, sizeof path, "%s/configs/rec_ppocrv3_en.json", OCR_SOURCE_DIR);
    OcrConfig *cfg;
    ck_assert_int_eq(ocr_config_load(&cfg, path), OCR_OK);
    OcrTransformList t;
    ck_assert_int_eq(ocr_transforms_parse(&t, cfg, "Train.dataset.transforms", 25), OCR_OK);
    ck_assert_int_eq(t.order, OCR_CHANNELS_BGR);
    ck_assert_int_eq(t.num_ops, 2);
    ck_assert_int_eq(t.ops[0], OCR_TOP_REC_CON_AUG);
    ck_assert_int_eq(t.ops[1], OCR_TOP_REC_AUG);
    ck_assert(t.con_aug.prob == 0.5);
    ck_assert_int_eq(t.con_aug.ext_data_num, 2);
    ck_assert_int_eq(t.con_aug.image_h, 48);
    ck_assert_int_eq(t.con_aug.image_w, 320);
    ck_assert(t.rec_aug.tia_prob == 0.4 && t.rec_aug.hsv_aug_prob == 0.4);
    ck_assert(t.has_resize);
    ck_assert_int_eq(t.resize_h, 48);
    ck_assert_int_eq(t.resize_w, 320);
    ck_assert_int_eq(ocr_transforms_parse(&t, cfg, "Eval.dataset.transforms", 25), OCR_OK);
    ck_assert_int_eq(t.num_ops, 0);
    ocr_config_free(cfg);

    const char *ok = "{\"Train\":{\"dataset\":{\"transforms\":[{\"DecodeImage\":{\"img_mode\":\"GRAY\"}},"
                     "{\"RecAug\":{\"blur_prob\":0.1}},{\"RecConAug\":{\"max_text_length\":10}},"
                     "{\"CTCLabelEncode\":null},{\"RecResizeImg\":{\"image_shape\":[1,32,100]}}]}}}";
    ck_assert_int_eq(parse_text(ok, &t, 0), OCR_OK);
    ck_assert_int_eq(t.channels, 1);
    ck_assert_int_eq(t.ops[0], OCR_TOP_REC_AUG);
    ck_assert(t.rec_aug.blur_prob == 0.1 && t.rec_aug.crop_prob == 0.4);
    ck_assert_int_eq(t.con_aug.max_text_length, 10);
    ck_assert_int_eq(t.con_aug.image_h, 32);  // the class default image_shape (32, 320, 3)
    ck_assert_int_eq(parse_text(ok, &t, 25), OCR_OK);
    ck_assert_int_eq(t.con_aug.max_text_length, 25);  // Global wins, as in PaddleOCR
    ck_assert_int_eq(t.label_encode, OCR_LABEL_ENCODE_CTC);
    ck_assert_int_eq(t.label_max_len, 0);

    // MultiLabelEncode (MultiHead): texts of max_text_length − 1 known characters or more are
    // rejected, so concatenations stop at max_text_length − 2.
    const char *multi = "{\"Train\":{\"dataset\":{\"transforms\":[{\"DecodeImage\":null},{\"RecConAug\":null},"
                        "{\"MultiLabelEncode\":{\"gtc_encode\":\"NRTRLabelEncode\"}},"
                        "{\"RecResizeImg\":{\"image_shape\":[3,48,320]}}]}}}";
    ck_assert_int_eq(parse_text(multi, &t, 25), OCR_OK);
    ck_assert_int_eq(t.label_encode, OCR_LABEL_ENCODE_MULTI_NRTR);
    ck_assert_int_eq(t.label_max_len, 23);
    ck_assert_int_eq(t.con_aug.max_text_length, 23);
    const char *sar = "{\"Train\":{\"dataset\":{\"transforms\":[{\"DecodeImage\":null},{\"MultiLabelEncode\":null}]}}}";
    ck_assert_int_eq(parse_text(sar, &t, 0), OCR_OK);
    ck_assert_int_eq(t.label_encode, OCR_LABEL_ENCODE_MULTI_SAR);
    ck_assert_int_eq(t.label_max_len, 23);  // Global.max_text_length's default 25
    const char *both = "{\"Train\":{\"dataset\":{\"transforms\":[{\"DecodeImage\":null},{\"CTCLabelEncode\":null},"
                       "{\"MultiLabelEncode\":null}]}}}";
    ck_assert_int_eq(parse_text(both, &t, 0), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "one label op"), "%s", ocr_last_error());
    const char *gtc = "{\"Train\":{\"dataset\":{\"transforms\":[{\"DecodeImage\":null},"
                      "{\"MultiLabelEncode\":{\"gtc_encode\":\"CTCLabelEncode\"}}]}}}";
    ck_assert_int_eq(parse_text(gtc, &t, 0), OCR_ERR_CONFIG);
    ck_assert_msg(strstr(ocr_last_error(), "gtc_encode"), "%s", ocr_last_error());

    // SVTRRecResizeImg is RecResizeImg under SVTR's name (PaddleOCR's resize_norm_img either way);
    // a second resize of either name is refused.
    const char *svtr = "{\"Train\":{\"dataset\":{\"transforms\":[{\"DecodeImage\":null},{\"CTCLabelEncode\":null},"
                       "{\"SVTRRecResizeImg\":{\"image_shape\":[3,32,100],\"padding\":false}}]}}}";
    ck_assert_int_eq(parse_text(svtr, &t, 0), OCR_OK);
    ck_assert(t.has_resize);
    ck_assert_int_eq(t.resize_h, 32);
    ck_assert_int_eq(t.resize_w, 100);
    ck_assert_int_eq(t.padding, 0);
    const char *two = "{\"Train\":{\"dataset\":{\"transforms\":[{\"DecodeImage\":null},{\"CTCLabelEncode\":null},"
                      "{\"SVTRRecResizeImg\":{\"image_shape\":[3,32,100]}},{\"RecResizeImg\":{\"image_shape\":[3,32,100]}}]}}}";
    ck_assert_int_eq(parse_text(two, &t, 0), OCR_ERR_CONFIG);

    const char *bad[] = {
        // unknown transform
        "{\"Train\":{\"dataset\":{\"transforms\":[{\"DecodeImage\":null},{\"Foo\":null},{\"CTCLabelEncode\":null}]}}}",
        // unknown key, a typo
        "{\"Train\":{\"dataset\":{\"transforms\":[{\"DecodeImage\":null},{\"RecAug\":{\"tia_prb\":0.1}},"
        "{\"CTCLabelEncode\":null}]}}}",
        // DecodeImage not first
        "{\"Train\":{\"dataset\":{\"transforms\":[{\"RecAug\":null},{\"DecodeImage\":null},{\"CTCLabelEncode\":null}]}}}",
        // probability out of range
        "{\"Train\":{\"dataset\":{\"transforms\":[{\"DecodeImage\":null},{\"RecAug\":{\"crop_prob\":2}},"
        "{\"CTCLabelEncode\":null}]}}}",
        // augmentation after the resize
        "{\"Train\":{\"dataset\":{\"transforms\":[{\"DecodeImage\":null},{\"CTCLabelEncode\":null},"
        "{\"RecResizeImg\":{\"image_shape\":[3,48,320]}},{\"RecAug\":null}]}}}",
        // channels mismatch
        "{\"Train\":{\"dataset\":{\"transforms\":[{\"DecodeImage\":{\"img_mode\":\"GRAY\"}},{\"CTCLabelEncode\":null},"
        "{\"RecResizeImg\":{\"image_shape\":[3,48,320]}}]}}}",
        // an attention-only label op (MultiLabelEncode is the MultiHead's)
        "{\"Train\":{\"dataset\":{\"transforms\":[{\"DecodeImage\":null},{\"SARLabelEncode\":null}]}}}",
        // no label encoder
        "{\"Train\":{\"dataset\":{\"transforms\":[{\"DecodeImage\":null}]}}}",
        // two keys in one entry
        "{\"Train\":{\"dataset\":{\"transforms\":[{\"DecodeImage\":null,\"RecAug\":null}]}}}",
        // wrong type
        "{\"Train\":{\"dataset\":{\"transforms\":[{\"DecodeImage\":{\"img_mode\":3}},{\"CTCLabelEncode\":null}]}}}",
    };
    const char *expect[] = {"transforms.1: unknown transform Foo", "did you mean tia_prob", "before DecodeImage",
                            "crop_prob", "must come before", "channels", "on its own", "no label op",
                            "one key", "img_mode"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_int_eq(parse_text(bad[i], &t, 0), OCR_ERR_CONFIG);
        ck_assert_msg(strstr(ocr_last_error(), expect[i]) != NULL, "case %zu: '%s' lacks '%s'", i, ocr_last_error(),
                      expect[i]);
        ck_assert_msg(strstr(ocr_last_error(), "t.json") != NULL, "case %zu: no file name in '%s'", i,
                      ocr_last_error());
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("data_transforms");
    TCase *tc = tcase_create("transforms");
    tcase_add_test(tc, test_resize_upscale_row);
    tcase_add_test(tc, test_resize_rounding);
    tcase_add_test(tc, test_resize_area_and_copy);
    tcase_add_test(tc, test_resize_channels_independent);
    tcase_add_test(tc, test_rec_resize_width_and_pad);
    tcase_add_test(tc, test_crop_invert_jitter);
    tcase_add_test(tc, test_blur_kernel);
    tcase_add_test(tc, test_hsv);
    tcase_add_test(tc, test_noise);
    tcase_add_test(tc, test_warp_identity_and_translation);
    tcase_add_test(tc, test_tia_deterministic);
    tcase_add_test(tc, test_rec_aug_reproducible);
    tcase_add_test(tc, test_con_aug);
    tcase_add_test(tc, test_parse_config);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

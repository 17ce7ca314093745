// JPEG decoding: libjpeg-turbo's own test images (../shared/testdata/libjpeg-turbo) against
// the reference PNG, plus JPEGs written here in every coding mode (baseline, progressive,
// arithmetic, restart intervals), gray, CMYK/YCCK with and without the Adobe marker, and
// the refusals (12-bit, truncated, corrupt).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "core/fileio.h"
#include "data/image.h"
#include "tests/common/test_util.h"

// ---- a reference encoder (libjpeg directly, default error handling: inputs are valid) ----

typedef struct {
    int progressive, arith, restart_blocks, restart_rows, quality, optimize;
    int jpeg_space;       // 0 = libjpeg's default for the input
    int adobe_marker;     // -1 = libjpeg's choice, 0/1 = force
    int full_chroma;      // 4:4:4 instead of 4:2:0
} EncOpts;

static uint8_t *encode(const uint8_t *px, int w, int h, int comps, J_COLOR_SPACE in_space, const EncOpts *o,
                       size_t *size) {
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    unsigned long out_size = 0;
    jpeg_mem_dest(&c, &out, &out_size);
    c.image_width = (JDIMENSION)w, c.image_height = (JDIMENSION)h;
    c.input_components = comps, c.in_color_space = in_space;
    jpeg_set_defaults(&c);
    if (o->jpeg_space) jpeg_set_colorspace(&c, (J_COLOR_SPACE)o->jpeg_space);
    if (o->adobe_marker >= 0) c.write_Adobe_marker = (boolean)o->adobe_marker;
    jpeg_set_quality(&c, o->quality ? o->quality : 90, TRUE);
    if (o->full_chroma)
        for (int i = 0; i < c.num_components; i++) c.comp_info[i].h_samp_factor = c.comp_info[i].v_samp_factor = 1;
    if (o->progressive) jpeg_simple_progression(&c);
    c.arith_code = (boolean)o->arith;
    c.optimize_coding = (boolean)o->optimize;
    c.restart_interval = (unsigned)o->restart_blocks;
    c.restart_in_rows = o->restart_rows;
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(px + (size_t)c.next_scanline * w * comps);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    *size = out_size;
    return out;
}

// A smooth RGB test picture (ramps and a slow wave).
static uint8_t *test_picture(int w, int h) {
    uint8_t *px = malloc((size_t)w * h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = px + ((size_t)y * w + x) * 3;
            p[0] = (uint8_t)(x * 255 / (w - 1));
            p[1] = (uint8_t)(y * 255 / (h - 1));
            p[2] = (uint8_t)lround(128 + 90 * sin(x / 5.0) * cos(y / 4.0));
        }
    return px;
}

static double mean_abs_diff(const uint8_t *a, const uint8_t *b, size_t n, int *max_out) {
    double s = 0;
    int mx = 0;
    for (size_t i = 0; i < n; i++) {
        int d = abs(a[i] - b[i]);
        s += d;
        if (d > mx) mx = d;
    }
    if (max_out) *max_out = mx;
    return s / (double)n;
}

static OcrImage decode_ok(const uint8_t *data, size_t size, ocr_channel_order_t order, const char *what) {
    OcrImage img;
    ocr_status_t st = ocr_image_decode(&img, data, size, order, what);
    ck_assert_msg(st == OCR_OK, "%s: %s", what, ocr_last_error());
    return img;
}

// ---- libjpeg-turbo's test images ---------------------------------------------------------------

// testorig.png is the Rec.709 luma of testorig.jpg's RGB decode (checked: within 2 levels),
// so it verifies colour conversion and channel order, not just dimensions.
static void compare_with_reference_png(const OcrImage *rgb, const OcrImage *ref, double max_mean, int max_abs,
                                       const char *what) {
    ck_assert_int_eq(rgb->width, ref->width);
    ck_assert_int_eq(rgb->height, ref->height);
    size_t n = (size_t)rgb->width * rgb->height;
    double s = 0;
    int mx = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = rgb->pixels + 3 * i;
        double luma = 0.2126 * p[0] + 0.7152 * p[1] + 0.0722 * p[2];
        int d = abs((int)lround(luma) - ref->pixels[i]);
        s += d;
        if (d > mx) mx = d;
    }
    printf("  %s vs testorig.png luma: mean %.3f max %d\n", what, s / n, mx);
    ck_assert_msg(s / n <= max_mean && mx <= max_abs, "%s: mean %.3f max %d", what, s / n, mx);
}

START_TEST(test_libjpeg_turbo_images) {
    char dir[1024];
    if (!ocr_test_shared_path("testdata/libjpeg-turbo", dir, sizeof dir)) return;
    char path[2048];
    OcrImage ref;
    snprintf(path, sizeof path, "%s/testorig.png", dir);
    ck_assert_int_eq(ocr_image_load(&ref, path, OCR_CHANNELS_GRAY), OCR_OK);

    // Baseline Huffman.
    snprintf(path, sizeof path, "%s/testorig.jpg", dir);
    OcrImage orig, bgr, gray;
    ck_assert_msg(ocr_image_load(&orig, path, OCR_CHANNELS_RGB) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(orig.width, 227);
    ck_assert_int_eq(orig.height, 149);
    compare_with_reference_png(&orig, &ref, 0.3, 2, "testorig.jpg");
    ck_assert_int_eq(ocr_image_load(&bgr, path, OCR_CHANNELS_BGR), OCR_OK);
    size_t n = (size_t)orig.width * orig.height;
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) bad += bgr.pixels[3 * i + k] != orig.pixels[3 * i + 2 - k];
    ck_assert_int_eq(bad, 0);
    // Gray is libjpeg's Y channel: within a level or two of BT.601 luma of the RGB decode.
    ck_assert_int_eq(ocr_image_load(&gray, path, OCR_CHANNELS_GRAY), OCR_OK);
    ck_assert_int_eq(gray.channels, 1);
    // (Not exact: the RGB decode interpolates and clamps the subsampled chroma.)
    int mx = 0;
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = orig.pixels + 3 * i;
        int d = abs(gray.pixels[i] - ocr_rgb_to_gray(p[0], p[1], p[2]));
        sum += d;
        if (d > mx) mx = d;
    }
    ck_assert_msg(sum / n < 0.5 && mx <= 16, "gray vs luma of RGB: mean %.3f max %d", sum / n, mx);

    // Arithmetic coding, and the integer-DCT re-encode: the same coefficients, so the two
    // decode identically; both are a re-encode of the decoded picture, so they are close.
    OcrImage ari, intg;
    snprintf(path, sizeof path, "%s/testimgari.jpg", dir);
    ck_assert_msg(ocr_image_load(&ari, path, OCR_CHANNELS_RGB) == OCR_OK, "%s", ocr_last_error());
    snprintf(path, sizeof path, "%s/testimgint.jpg", dir);
    ck_assert_msg(ocr_image_load(&intg, path, OCR_CHANNELS_RGB) == OCR_OK, "%s", ocr_last_error());
    ck_assert_mem_eq(ari.pixels, intg.pixels, n * 3);
    compare_with_reference_png(&ari, &ref, 0.6, 8, "testimgari.jpg");
    ck_assert_double_le(mean_abs_diff(ari.pixels, orig.pixels, n * 3, NULL), 1.5);

    // 12-bit: refused cleanly, naming the file and saying why.
    OcrImage twelve;
    snprintf(path, sizeof path, "%s/monkey12.jpg", dir);
    ck_assert_int_eq(ocr_image_load(&twelve, path, OCR_CHANNELS_BGR), OCR_ERR_UNSUPPORTED);
    ck_assert_ptr_null(twelve.pixels);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "12-bit"));
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "monkey12.jpg"));
    printf("  monkey12.jpg: %s\n", ocr_last_error());

    // The 16-bit PNG of the same monkey decodes (149x227, not flat).
    OcrImage m16;
    snprintf(path, sizeof path, "%s/monkey16.png", dir);
    ck_assert_msg(ocr_image_load(&m16, path, OCR_CHANNELS_RGB) == OCR_OK, "%s", ocr_last_error());
    ck_assert(m16.width == 149 && m16.height == 227);
    int lo = 255, hi = 0;
    for (size_t i = 0; i < (size_t)149 * 227 * 3; i++) {
        if (m16.pixels[i] < lo) lo = m16.pixels[i];
        if (m16.pixels[i] > hi) hi = m16.pixels[i];
    }
    ck_assert_int_gt(hi - lo, 100);

    OcrImage *all[] = {&ref, &orig, &bgr, &gray, &ari, &intg, &m16};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ocr_image_free(all[i]);
}
END_TEST

// ---- coding modes ------------------------------------------------------------------------

START_TEST(test_coding_modes_decode_identically) {
    const int w = 45, h = 29;  // not multiples of the MCU size
    uint8_t *px = test_picture(w, h);
    EncOpts base = {.quality = 92, .adobe_marker = -1};
    size_t size0;
    uint8_t *j0 = encode(px, w, h, 3, JCS_RGB, &base, &size0);
    OcrImage ref = decode_ok(j0, size0, OCR_CHANNELS_RGB, "baseline");
    int mx;
    double mean = mean_abs_diff(ref.pixels, px, (size_t)w * h * 3, &mx);
    ck_assert_msg(mean < 4.0, "baseline mean error %.2f", mean);

    // Same quantised coefficients, different entropy coding → bit-identical decodes.
    struct {
        const char *name;
        EncOpts o;
    } modes[] = {
        {"progressive", {.quality = 92, .progressive = 1, .adobe_marker = -1}},
        {"arithmetic", {.quality = 92, .arith = 1, .adobe_marker = -1}},
        {"progressive+arithmetic", {.quality = 92, .progressive = 1, .arith = 1, .adobe_marker = -1}},
        {"restart every MCU", {.quality = 92, .restart_blocks = 1, .adobe_marker = -1}},
        {"restart every row", {.quality = 92, .restart_rows = 1, .adobe_marker = -1}},
        {"optimized Huffman", {.quality = 92, .optimize = 1, .adobe_marker = -1}},
    };
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        size_t size;
        uint8_t *j = encode(px, w, h, 3, JCS_RGB, &modes[m].o, &size);
        if (modes[m].o.restart_blocks || modes[m].o.restart_rows) {
            int rst = 0;
            for (size_t i = 0; i + 1 < size; i++) rst += j[i] == 0xFF && j[i + 1] >= 0xD0 && j[i + 1] <= 0xD7;
            ck_assert_int_ge(rst, (modes[m].o.restart_blocks ? 5 : 1));  // 6 MCUs in 2 MCU rows
        }
        OcrImage img = decode_ok(j, size, OCR_CHANNELS_RGB, modes[m].name);
        ck_assert_msg(memcmp(img.pixels, ref.pixels, (size_t)w * h * 3) == 0, "%s decodes differently", modes[m].name);
        ocr_image_free(&img);
        free(j);
    }
    ocr_image_free(&ref);
    free(j0);
    free(px);
}
END_TEST

START_TEST(test_gray_and_rgb_spaces) {
    const int w = 20, h = 12;
    uint8_t *px = test_picture(w, h);
    // Gray JPEG → BGR replicates, GRAY keeps.
    uint8_t g[20 * 12];
    for (int i = 0; i < w * h; i++) g[i] = px[3 * i];
    EncOpts o = {.quality = 95, .adobe_marker = -1};
    size_t size;
    uint8_t *j = encode(g, w, h, 1, JCS_GRAYSCALE, &o, &size);
    OcrImage gray = decode_ok(j, size, OCR_CHANNELS_GRAY, "gray");
    OcrImage bgr = decode_ok(j, size, OCR_CHANNELS_BGR, "gray→bgr");
    ck_assert_int_eq(gray.channels, 1);
    int mx;
    ck_assert_double_lt(mean_abs_diff(gray.pixels, g, (size_t)w * h, &mx), 2.0);
    int bad = 0;
    for (int i = 0; i < w * h; i++)
        for (int k = 0; k < 3; k++) bad += bgr.pixels[3 * i + k] != gray.pixels[i];
    ck_assert_int_eq(bad, 0);
    ocr_image_free(&gray);
    ocr_image_free(&bgr);
    free(j);

    // An RGB-coded JPEG (no YCbCr transform, Adobe transform 0), 4:4:4.
    EncOpts rgbo = {.quality = 98, .jpeg_space = JCS_RGB, .adobe_marker = -1, .full_chroma = 1};
    j = encode(px, w, h, 3, JCS_RGB, &rgbo, &size);
    OcrImage rgb = decode_ok(j, size, OCR_CHANNELS_RGB, "rgb-coded");
    ck_assert_double_lt(mean_abs_diff(rgb.pixels, px, (size_t)w * h * 3, &mx), 2.5);
    bgr = decode_ok(j, size, OCR_CHANNELS_BGR, "rgb-coded bgr");
    bad = 0;
    for (int i = 0; i < w * h; i++)
        for (int k = 0; k < 3; k++) bad += bgr.pixels[3 * i + k] != rgb.pixels[3 * i + 2 - k];
    ck_assert_int_eq(bad, 0);
    ocr_image_free(&rgb);
    ocr_image_free(&bgr);
    free(j);
    free(px);
}
END_TEST

// Four flat 8x8 quadrants of CMYK ink, written at quality 100 so they come back within a
// level, decoded to RGB with the Adobe rule (inverted storage) or the plain one.
START_TEST(test_cmyk_and_ycck) {
    const int w = 16, h = 16;
    const uint8_t quads[4][4] = {{0, 0, 0, 0}, {255, 0, 0, 0}, {30, 200, 90, 60}, {128, 128, 128, 255}};
    uint8_t px[16 * 16 * 4];
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) memcpy(px + (y * w + x) * 4, quads[(y / 8) * 2 + x / 8], 4);
    struct {
        const char *name;
        int space, adobe, inverted;
    } cases[] = {
        {"CMYK with Adobe marker", JCS_CMYK, -1, 1},
        {"CMYK without Adobe marker", JCS_CMYK, 0, 0},
        {"YCCK", JCS_YCCK, -1, 1},
    };
    for (int c = 0; c < 3; c++) {
        EncOpts o = {.quality = 100, .jpeg_space = cases[c].space, .adobe_marker = cases[c].adobe, .full_chroma = 1};
        size_t size;
        uint8_t *j = encode(px, w, h, 4, JCS_CMYK, &o, &size);
        OcrImage rgb = decode_ok(j, size, OCR_CHANNELS_RGB, cases[c].name);
        OcrImage bgr = decode_ok(j, size, OCR_CHANNELS_BGR, cases[c].name);
        OcrImage gray = decode_ok(j, size, OCR_CHANNELS_GRAY, cases[c].name);
        ck_assert_int_eq(rgb.channels, 3);
        ck_assert_int_eq(gray.channels, 1);
        for (int q = 0; q < 4; q++) {
            int x = (q % 2) * 8 + 3, y = (q / 2) * 8 + 4, i = y * w + x;
            double e[3];
            for (int k = 0; k < 3; k++) {
                double ink = quads[q][k], key = quads[q][3];
                e[k] = cases[c].inverted ? ink * key / 255.0 : (255 - ink) * (255 - key) / 255.0;
            }
            for (int k = 0; k < 3; k++) {
                ck_assert_msg(fabs(rgb.pixels[3 * i + k] - e[k]) <= 2.5, "%s quad %d ch %d: %d vs %.1f", cases[c].name,
                              q, k, rgb.pixels[3 * i + k], e[k]);
                ck_assert_int_eq(bgr.pixels[3 * i + 2 - k], rgb.pixels[3 * i + k]);
            }
            const uint8_t *p = rgb.pixels + 3 * i;
            ck_assert_int_eq(gray.pixels[i], ocr_rgb_to_gray(p[0], p[1], p[2]));
        }
        ocr_image_free(&rgb);
        ocr_image_free(&bgr);
        ocr_image_free(&gray);
        free(j);
    }
}
END_TEST

// ---- refusals ----------------------------------------------------------------------------

START_TEST(test_truncated_and_corrupt_refused) {
    const int w = 40, h = 24;
    uint8_t *px = test_picture(w, h);
    EncOpts modes[3] = {{.quality = 80, .adobe_marker = -1},
                        {.quality = 80, .progressive = 1, .adobe_marker = -1},
                        {.quality = 80, .arith = 1, .adobe_marker = -1}};
    for (int m = 0; m < 3; m++) {
        size_t size;
        uint8_t *j = encode(px, w, h, 3, JCS_RGB, &modes[m], &size);
        // Cut anywhere, even just the last byte of EOI: refused, never grey-filled.
        size_t cuts[] = {2, 3, 20, size / 3, size / 2, size - 10, size - 2, size - 1};
        for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
            OcrImage img;
            ocr_status_t st = ocr_image_decode(&img, j, cuts[c], OCR_CHANNELS_BGR, "cut.jpg");
            ck_assert_msg(st == OCR_ERR_FORMAT, "mode %d cut at %zu/%zu: status %d", m, cuts[c], size, st);
            ck_assert_ptr_null(img.pixels);
            ck_assert_ptr_nonnull(strstr(ocr_last_error(), "cut.jpg"));
        }
        // Garbage in the middle of the entropy-coded data.
        uint8_t *bad = malloc(size);
        memcpy(bad, j, size);
        for (size_t i = size / 2; i < size / 2 + 40 && i < size - 2; i++) bad[i] = 0xFF;
        OcrImage img;
        ocr_status_t st = ocr_image_decode(&img, bad, size, OCR_CHANNELS_BGR, "garbled.jpg");
        ck_assert_msg(st == OCR_ERR_FORMAT, "mode %d garbled: status %d", m, st);
        ck_assert_ptr_nonnull(strstr(ocr_last_error(), "garbled.jpg"));
        free(bad);
        free(j);
    }
    // Only an SOI marker, then nothing / then text.
    OcrImage img;
    ck_assert_int_eq(ocr_image_decode(&img, (const uint8_t *)"\xFF\xD8\xFF", 3, OCR_CHANNELS_BGR, "soi.jpg"),
                     OCR_ERR_FORMAT);
    ck_assert_int_eq(ocr_image_decode(&img, (const uint8_t *)"\xFF\xD8\xFFhello there", 14, OCR_CHANNELS_BGR, "t.jpg"),
                     OCR_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "t.jpg"));
    free(px);
}
END_TEST

// A progressive file of many single-coefficient scans with successive approximation: 200
// scans decode (identically to baseline: same coefficients), 263 exceed the scan limit
// that protects against files made of thousands of tiny scans.
static uint8_t *encode_many_scans(const uint8_t *g, int w, int h, int ac_al, int *num_scans, size_t *size) {
    jpeg_scan_info *scans = calloc(300, sizeof *scans);
    int n = 0;
    const int dc_al = 10;
    scans[n++] = (jpeg_scan_info){1, {0}, 0, 0, 0, dc_al};
    for (int a = dc_al; a >= 1; a--) scans[n++] = (jpeg_scan_info){1, {0}, 0, 0, a, a - 1};
    for (int k = 1; k < 64; k++) {
        scans[n++] = (jpeg_scan_info){1, {0}, k, k, 0, ac_al};
        for (int a = ac_al; a >= 1; a--) scans[n++] = (jpeg_scan_info){1, {0}, k, k, a, a - 1};
    }
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    unsigned long out_size = 0;
    jpeg_mem_dest(&c, &out, &out_size);
    c.image_width = (JDIMENSION)w, c.image_height = (JDIMENSION)h;
    c.input_components = 1, c.in_color_space = JCS_GRAYSCALE;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 90, TRUE);
    c.scan_info = scans, c.num_scans = n;
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(g + (size_t)c.next_scanline * w);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(scans);
    *num_scans = n, *size = out_size;
    return out;
}

START_TEST(test_progressive_scan_limit) {
    const int w = 24, h = 16;
    uint8_t g[24 * 16];
    for (int i = 0; i < w * h; i++) g[i] = (uint8_t)((i * 29) % 251);
    EncOpts o = {.quality = 90, .adobe_marker = -1};
    size_t size;
    uint8_t *base = encode(g, w, h, 1, JCS_GRAYSCALE, &o, &size);
    OcrImage ref = decode_ok(base, size, OCR_CHANNELS_GRAY, "baseline gray");
    int n;
    uint8_t *j = encode_many_scans(g, w, h, 2, &n, &size);
    ck_assert_int_eq(n, 200);
    OcrImage img = decode_ok(j, size, OCR_CHANNELS_GRAY, "200 scans");
    ck_assert_mem_eq(img.pixels, ref.pixels, (size_t)w * h);
    ocr_image_free(&img);
    free(j);
    j = encode_many_scans(g, w, h, 3, &n, &size);
    ck_assert_int_gt(n, OCR_IMAGE_MAX_SCANS);
    ck_assert_int_eq(ocr_image_decode(&img, j, size, OCR_CHANNELS_GRAY, "263scans.jpg"), OCR_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "263scans.jpg"));
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "scans"));
    free(j);
    free(base);
    ocr_image_free(&ref);
}
END_TEST

int main(void) {
    setenv("OCR_SHARED_DIR", OCR_SHARED_DIR, 0);  // test_util.c is built without the macro
    Suite *s = suite_create("data_jpeg");
    TCase *tc = tcase_create("jpeg");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_libjpeg_turbo_images);
    tcase_add_test(tc, test_coding_modes_decode_identically);
    tcase_add_test(tc, test_gray_and_rgb_spaces);
    tcase_add_test(tc, test_cmyk_and_ycck);
    tcase_add_test(tc, test_truncated_and_corrupt_refused);
    tcase_add_test(tc, test_progressive_scan_limit);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

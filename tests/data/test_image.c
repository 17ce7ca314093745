// PNG decoding of every colour type, bit depth and interlacing against pixels computed
// here from the samples written; channel orders; alpha compositing; IO errors; encoders.
#include <dirent.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/fileio.h"
#include "core/rng.h"
#include "data/image.h"
#include "tests/common/test_util.h"

static char *tmpdir;  // a fresh directory per test (setup), removed by teardown

static void setup(void) { tmpdir = ocr_test_tmpdir("image_"); }

static void teardown(void) {
    ocr_test_remove_tree(tmpdir);
    free(tmpdir);
    tmpdir = NULL;
}

// ---- a reference PNG writer and the expected decode, computed independently ---------------

typedef struct {
    int w, h, color_type, bit_depth, interlace;
    uint16_t *s;            // w*h*channels samples (palette: indices)
    uint8_t palette[256][3];
    int npalette;
    uint8_t trns_alpha[256];  // palette tRNS
    int ntrns;                // palette tRNS entries (0 = none)
    int has_trns_color;       // gray/RGB tRNS
    uint16_t trns_color[3];
} SrcPng;

static int src_channels(int color_type) {
    switch (color_type) {
        case PNG_COLOR_TYPE_GRAY: return 1;
        case PNG_COLOR_TYPE_GRAY_ALPHA: return 2;
        case PNG_COLOR_TYPE_RGB: return 3;
        case PNG_COLOR_TYPE_RGB_ALPHA: return 4;
        default: return 1;  // palette
    }
}

typedef struct {
    uint8_t *buf;
    size_t size, cap;
} MemOut;

static void mem_write(png_structp png, png_bytep data, size_t n) {
    MemOut *m = png_get_io_ptr(png);
    if (m->size + n > m->cap) {
        m->cap = (m->size + n) * 2;
        m->buf = realloc(m->buf, m->cap);
        ck_assert_ptr_nonnull(m->buf);
    }
    memcpy(m->buf + m->size, data, n);
    m->size += n;
}
static void mem_flush(png_structp png) { (void)png; }

// Packs the samples (MSB first for depths < 8, big-endian for 16) and writes a PNG.
static uint8_t *write_src_png(const SrcPng *p, size_t *size) {
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    MemOut m = {0};
    ck_assert(!setjmp(png_jmpbuf(png)));
    png_set_write_fn(png, &m, mem_write, mem_flush);
    png_set_IHDR(png, info, p->w, p->h, p->bit_depth, p->color_type, p->interlace, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (p->color_type == PNG_COLOR_TYPE_PALETTE) {
        png_color pal[256];
        for (int i = 0; i < p->npalette; i++)
            pal[i].red = p->palette[i][0], pal[i].green = p->palette[i][1], pal[i].blue = p->palette[i][2];
        png_set_PLTE(png, info, pal, p->npalette);
        if (p->ntrns) png_set_tRNS(png, info, p->trns_alpha, p->ntrns, NULL);
    } else if (p->has_trns_color) {
        png_color_16 c = {0};
        c.gray = p->trns_color[0], c.red = p->trns_color[0], c.green = p->trns_color[1], c.blue = p->trns_color[2];
        png_set_tRNS(png, info, NULL, 0, &c);
    }
    png_write_info(png, info);
    int ch = src_channels(p->color_type);
    size_t rowbytes = ((size_t)p->w * ch * p->bit_depth + 7) / 8;
    uint8_t *rows = calloc(rowbytes * p->h, 1);
    png_bytep *rp = malloc(sizeof(png_bytep) * p->h);
    for (int y = 0; y < p->h; y++) {
        uint8_t *row = rows + rowbytes * y;
        rp[y] = row;
        for (int i = 0; i < p->w * ch; i++) {
            unsigned v = p->s[(size_t)y * p->w * ch + i];
            if (p->bit_depth == 16) {
                row[2 * i] = (uint8_t)(v >> 8), row[2 * i + 1] = (uint8_t)v;
            } else if (p->bit_depth == 8) {
                row[i] = (uint8_t)v;
            } else {
                int bd = p->bit_depth, bit = i * bd;
                row[bit / 8] |= (uint8_t)(v << (8 - bd - bit % 8));
            }
        }
    }
    png_write_image(png, rp);  // handles Adam7 itself
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(rows);
    free(rp);
    *size = m.size;
    return m.buf;
}

// The expected RGB of pixel i, from the spec: low depths scale to 0..255, 16 bits keep the
// high byte, tRNS/alpha composite on white with round(c·a/255 + 255·(1 − a/255)).
static void expected_rgb(const SrcPng *p, int i, uint8_t rgb[3]) {
    int ch = src_channels(p->color_type);
    const uint16_t *s = p->s + (size_t)i * ch;
    double c[3], a = 255;
    int maxv = (1 << p->bit_depth) - 1;
    if (p->color_type == PNG_COLOR_TYPE_PALETTE) {
        for (int k = 0; k < 3; k++) c[k] = p->palette[s[0]][k];
        if (s[0] < p->ntrns) a = p->trns_alpha[s[0]];
    } else {
        int color = p->color_type & PNG_COLOR_MASK_COLOR;
        int ncol = color ? 3 : 1;
        for (int k = 0; k < 3; k++) {
            unsigned v = s[color ? k : 0];
            c[k] = p->bit_depth == 16 ? (v >> 8) : p->bit_depth == 8 ? v : round(v * 255.0 / maxv);
        }
        if (p->color_type & PNG_COLOR_MASK_ALPHA) {
            unsigned v = s[ncol];
            a = p->bit_depth == 16 ? (v >> 8) : v;
        } else if (p->has_trns_color) {
            int same = 1;
            for (int k = 0; k < ncol; k++) same &= s[k] == p->trns_color[k];
            if (same) a = 0;
        }
    }
    for (int k = 0; k < 3; k++) rgb[k] = (uint8_t)lround(c[k] * a / 255.0 + 255.0 * (1.0 - a / 255.0));
}

static void fill_random_src(SrcPng *p, uint64_t seed) {
    OcrRng r = ocr_rng_make(seed, 1);
    int ch = src_channels(p->color_type);
    size_t n = (size_t)p->w * p->h * ch;
    p->s = malloc(sizeof(uint16_t) * n);
    int maxv = (1 << p->bit_depth) - 1;
    if (p->color_type == PNG_COLOR_TYPE_PALETTE) {
        p->npalette = 1 << (p->bit_depth < 8 ? p->bit_depth : 8);
        if (p->npalette > 200) p->npalette = 200;  // not every index used
        for (int i = 0; i < p->npalette; i++)
            for (int k = 0; k < 3; k++) p->palette[i][k] = (uint8_t)ocr_rng_next_int(&r, 0, 255);
        maxv = p->npalette - 1;
    }
    for (size_t i = 0; i < n; i++) p->s[i] = (uint16_t)ocr_rng_next_int(&r, 0, maxv);
    // Alpha channels get the extremes often, so 0 and full opacity are both exercised.
    if (p->color_type & PNG_COLOR_MASK_ALPHA) {
        int amax = (1 << p->bit_depth) - 1;
        for (size_t i = ch - 1; i < n; i += ch) {
            int pick = (int)ocr_rng_next_int(&r, 0, 3);
            if (pick == 0) p->s[i] = 0;
            if (pick == 1) p->s[i] = (uint16_t)amax;
        }
    }
}

static void check_decode(const SrcPng *p, const char *what) {
    size_t size;
    uint8_t *png = write_src_png(p, &size);
    ocr_channel_order_t orders[3] = {OCR_CHANNELS_RGB, OCR_CHANNELS_BGR, OCR_CHANNELS_GRAY};
    for (int o = 0; o < 3; o++) {
        OcrImage img;
        ocr_status_t st = ocr_image_decode(&img, png, size, orders[o], what);
        ck_assert_msg(st == OCR_OK, "%s: %s", what, ocr_last_error());
        ck_assert_int_eq(img.width, p->w);
        ck_assert_int_eq(img.height, p->h);
        ck_assert_int_eq(img.channels, orders[o] == OCR_CHANNELS_GRAY ? 1 : 3);
        // Find the first mismatch and assert once (each Check assertion costs a syscall).
        int bad = -1, got = 0;
        double want = 0;
        for (int i = 0; i < p->w * p->h && bad < 0; i++) {
            uint8_t e[3];
            expected_rgb(p, i, e);
            if (orders[o] == OCR_CHANNELS_GRAY) {
                int gray_src = !(p->color_type & PNG_COLOR_MASK_COLOR);
                // Gray sources keep their value; colour uses OpenCV's weights.
                double y = gray_src ? e[0] : 0.299 * e[0] + 0.587 * e[1] + 0.114 * e[2];
                if (fabs(img.pixels[i] - y) > (gray_src ? 0 : 0.51)) bad = i, got = img.pixels[i], want = y;
            } else {
                for (int k = 0; k < 3 && bad < 0; k++) {
                    int v = img.pixels[3 * i + (orders[o] == OCR_CHANNELS_RGB ? k : 2 - k)];
                    if (v != e[k]) bad = 3 * i + k, got = v, want = e[k];
                }
            }
        }
        ck_assert_msg(bad < 0, "%s order %d: sample %d is %d, expected %.2f", what, o, bad, got, want);
        ocr_image_free(&img);
    }
    free(png);
}

START_TEST(test_png_every_type_depth_interlace) {
    static const struct {
        int color_type, depths[5];
    } types[] = {
        {PNG_COLOR_TYPE_GRAY, {1, 2, 4, 8, 16}},
        {PNG_COLOR_TYPE_GRAY_ALPHA, {8, 16}},
        {PNG_COLOR_TYPE_RGB, {8, 16}},
        {PNG_COLOR_TYPE_RGB_ALPHA, {8, 16}},
        {PNG_COLOR_TYPE_PALETTE, {1, 2, 4, 8}},
    };
    int cases = 0;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        for (int d = 0; d < 5 && types[t].depths[d]; d++) {
            for (int il = 0; il < 2; il++) {
                // Odd sizes so Adam7 passes are partial and low depths end mid-byte.
                SrcPng p = {.w = 13, .h = 9, .color_type = types[t].color_type, .bit_depth = types[t].depths[d]};
                p.interlace = il ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE;
                fill_random_src(&p, 100 + t * 10 + d * 2 + il);
                char what[64];
                snprintf(what, sizeof what, "type%d depth%d il%d", p.color_type, p.bit_depth, il);
                check_decode(&p, what);
                free(p.s);
                cases++;
            }
        }
    }
    ck_assert_int_eq(cases, 30);
}
END_TEST

START_TEST(test_png_trns) {
    // Palette with per-entry alpha (fewer tRNS entries than palette entries).
    SrcPng p = {.w = 11, .h = 5, .color_type = PNG_COLOR_TYPE_PALETTE, .bit_depth = 4};
    fill_random_src(&p, 7);
    p.ntrns = 5;
    uint8_t alphas[5] = {0, 255, 128, 1, 77};
    memcpy(p.trns_alpha, alphas, 5);
    check_decode(&p, "palette tRNS");
    p.interlace = PNG_INTERLACE_ADAM7;
    check_decode(&p, "palette tRNS interlaced");
    free(p.s);

    // Gray and RGB with a transparent colour, at 2, 8 and 16 bits.
    int gray_depths[3] = {2, 8, 16};
    for (int i = 0; i < 3; i++) {
        SrcPng g = {.w = 9, .h = 7, .color_type = PNG_COLOR_TYPE_GRAY, .bit_depth = gray_depths[i]};
        fill_random_src(&g, 20 + i);
        g.has_trns_color = 1;
        g.trns_color[0] = g.s[3];  // make sure some pixels match
        check_decode(&g, "gray tRNS");
        free(g.s);
    }
    for (int bd = 8; bd <= 16; bd += 8) {
        SrcPng c = {.w = 9, .h = 7, .color_type = PNG_COLOR_TYPE_RGB, .bit_depth = bd};
        fill_random_src(&c, 30 + bd);
        c.has_trns_color = 1;
        for (int k = 0; k < 3; k++) c.trns_color[k] = c.s[3 * 4 + k];
        c.s[3 * 10] = c.trns_color[0], c.s[3 * 10 + 1] = c.trns_color[1], c.s[3 * 10 + 2] = c.trns_color[2];
        check_decode(&c, "rgb tRNS");
        free(c.s);
    }
}
END_TEST

START_TEST(test_composite_formula) {
    // The integer formula against the real-valued one over every (c, a).
    int bad = 0;
    for (int c = 0; c < 256; c++)
        for (int a = 0; a < 256; a++) {
            double exact = c * a / 255.0 + 255.0 * (1.0 - a / 255.0);
            if (ocr_composite_white((uint8_t)c, (uint8_t)a) != (int)lround(exact)) bad++;
        }
    ck_assert_int_eq(bad, 0);
    ck_assert_int_eq(ocr_composite_white(0, 0), 255);
    ck_assert_int_eq(ocr_composite_white(0, 255), 0);
    ck_assert_int_eq(ocr_composite_white(100, 128), 177);  // 100·128/255 + 255·127/255 = 50.2 + 127
}
END_TEST

START_TEST(test_rgb_to_gray) {
    ck_assert_int_eq(ocr_rgb_to_gray(255, 255, 255), 255);
    ck_assert_int_eq(ocr_rgb_to_gray(0, 0, 0), 0);
    int bad = 0;
    for (int v = 0; v < 256; v++) bad += ocr_rgb_to_gray((uint8_t)v, (uint8_t)v, (uint8_t)v) != v;
    ck_assert_int_eq(bad, 0);
    ck_assert_int_eq(ocr_rgb_to_gray(255, 0, 0), 76);   // 0.299·255 = 76.2
    ck_assert_int_eq(ocr_rgb_to_gray(0, 255, 0), 150);  // 0.587·255 = 149.7
    ck_assert_int_eq(ocr_rgb_to_gray(0, 0, 255), 29);   // 0.114·255 = 29.1
}
END_TEST

START_TEST(test_encode_decode_roundtrip) {
    OcrImage src;
    ck_assert_int_eq(ocr_image_alloc(&src, 17, 6, 3), OCR_OK);
    for (int i = 0; i < 17 * 6 * 3; i++) src.pixels[i] = (uint8_t)(i * 37 + 11);
    uint8_t *png;
    size_t size;
    ck_assert_int_eq(ocr_image_encode_png(&src, &png, &size), OCR_OK);
    OcrImage rgb, bgr;
    ck_assert_int_eq(ocr_image_decode(&rgb, png, size, OCR_CHANNELS_RGB, "mem"), OCR_OK);
    ck_assert_int_eq(ocr_image_decode(&bgr, png, size, OCR_CHANNELS_BGR, "mem"), OCR_OK);
    ck_assert_mem_eq(rgb.pixels, src.pixels, 17 * 6 * 3);
    for (int i = 0; i < 17 * 6; i++)
        for (int k = 0; k < 3; k++) ck_assert_int_eq(bgr.pixels[3 * i + k], src.pixels[3 * i + 2 - k]);
    ocr_image_free(&rgb);
    ocr_image_free(&bgr);
    free(png);

    OcrImage g;
    ck_assert_int_eq(ocr_image_alloc(&g, 5, 4, 1), OCR_OK);
    for (int i = 0; i < 20; i++) g.pixels[i] = (uint8_t)(i * 13);
    ck_assert_int_eq(ocr_image_encode_png(&g, &png, &size), OCR_OK);
    OcrImage g2, g3;
    ck_assert_int_eq(ocr_image_decode(&g2, png, size, OCR_CHANNELS_GRAY, "mem"), OCR_OK);
    ck_assert_int_eq(g2.channels, 1);
    ck_assert_mem_eq(g2.pixels, g.pixels, 20);
    ck_assert_int_eq(ocr_image_decode(&g3, png, size, OCR_CHANNELS_BGR, "mem"), OCR_OK);
    for (int i = 0; i < 20; i++) ck_assert(g3.pixels[3 * i] == g.pixels[i] && g3.pixels[3 * i + 2] == g.pixels[i]);
    int w, h;
    ck_assert_int_eq(ocr_image_probe(png, size, "mem", &w, &h), OCR_OK);
    ck_assert(w == 5 && h == 4);
    ck_assert_int_eq(ocr_image_detect(png, size), OCR_IMAGE_FORMAT_PNG);
    free(png);
    ocr_image_free(&g2);
    ocr_image_free(&g3);

    // JPEG encoder round trip (lossy): a flat image comes back nearly flat.
    for (int i = 0; i < 17 * 6 * 3; i++) src.pixels[i] = (uint8_t)(i % 3 == 0 ? 200 : i % 3 == 1 ? 100 : 50);
    ck_assert_int_eq(ocr_image_encode_jpeg(&src, 95, &png, &size), OCR_OK);
    ck_assert_int_eq(ocr_image_detect(png, size), OCR_IMAGE_FORMAT_JPEG);
    ck_assert_int_eq(ocr_image_probe(png, size, "mem", &w, &h), OCR_OK);
    ck_assert(w == 17 && h == 6);
    ck_assert_int_eq(ocr_image_decode(&rgb, png, size, OCR_CHANNELS_RGB, "mem"), OCR_OK);
    for (int i = 0; i < 17 * 6 * 3; i++) ck_assert_int_le(abs(rgb.pixels[i] - src.pixels[i]), 3);
    ocr_image_free(&rgb);
    free(png);
    ck_assert_int_eq(ocr_image_encode_jpeg(&src, 0, &png, &size), OCR_ERR_INVALID_ARG);
    ocr_image_free(&src);
    ocr_image_free(&g);
}
END_TEST

START_TEST(test_write_and_load_files) {
    char path[2048];
    snprintf(path, sizeof path, "%s/img.png", tmpdir);
    OcrImage src;
    ck_assert_int_eq(ocr_image_alloc(&src, 3, 2, 3), OCR_OK);
    const uint8_t px[18] = {255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30, 40, 50, 60, 70, 80, 90};
    memcpy(src.pixels, px, 18);
    ck_assert_int_eq(ocr_image_write_png(path, &src), OCR_OK);
    OcrImage img;
    ck_assert_int_eq(ocr_image_load(&img, path, OCR_CHANNELS_BGR), OCR_OK);  // PaddleOCR's order
    ck_assert_int_eq(img.pixels[0], 0);
    ck_assert_int_eq(img.pixels[2], 255);  // red is last in BGR
    ck_assert_int_eq(img.pixels[9], 30);
    ocr_image_free(&img);

    // Missing file: NOT_FOUND naming it.
    char missing[2048];
    snprintf(missing, sizeof missing, "%s/nope.png", tmpdir);
    ck_assert_int_eq(ocr_image_load(&img, missing, OCR_CHANNELS_BGR), OCR_ERR_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), missing));
    ck_assert_ptr_null(img.pixels);

    // Empty file, garbage, BMP: FORMAT / FORMAT / UNSUPPORTED, each naming the file.
    char p2[2048];
    snprintf(p2, sizeof p2, "%s/empty.png", tmpdir);
    ck_assert_int_eq(ocr_write_file_atomic(p2, "", 0), OCR_OK);
    ck_assert_int_eq(ocr_image_load(&img, p2, OCR_CHANNELS_BGR), OCR_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), p2));
    snprintf(p2, sizeof p2, "%s/text.jpg", tmpdir);
    ck_assert_int_eq(ocr_write_file_atomic(p2, "hello world", 11), OCR_OK);
    ck_assert_int_eq(ocr_image_load(&img, p2, OCR_CHANNELS_BGR), OCR_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), p2));
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "68 65 6c 6c"));  // shows the leading bytes
    snprintf(p2, sizeof p2, "%s/x.bmp", tmpdir);
    ck_assert_int_eq(ocr_write_file_atomic(p2, "BM\x36\0\0\0\0\0", 8), OCR_OK);
    ck_assert_int_eq(ocr_image_load(&img, p2, OCR_CHANNELS_BGR), OCR_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "BMP"));
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), p2));

    // A directory is unreadable, not missing.
    ck_assert_int_ne(ocr_image_load(&img, tmpdir, OCR_CHANNELS_BGR), OCR_OK);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), tmpdir));

    // Bad arguments.
    ck_assert_int_eq(ocr_image_write_png(path, &(OcrImage){0}), OCR_ERR_INVALID_ARG);
    ck_assert_int_eq(ocr_image_decode(&img, px, 18, (ocr_channel_order_t)7, "x"), OCR_ERR_INVALID_ARG);
    ck_assert_int_eq(ocr_image_alloc(&img, 0, 3, 3), OCR_ERR_INVALID_ARG);
    ck_assert_int_eq(ocr_image_alloc(&img, 3, 3, 2), OCR_ERR_INVALID_ARG);
    ocr_image_free(&src);
    ocr_image_free(NULL);
}
END_TEST

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

// A PNG whose IHDR promises more pixels than its bytes can hold is refused before any
// large allocation; so is one over the pixel limit.
START_TEST(test_png_size_guards) {
    SrcPng p = {.w = 8, .h = 8, .color_type = PNG_COLOR_TYPE_GRAY, .bit_depth = 8};
    fill_random_src(&p, 3);
    size_t size;
    uint8_t *png = write_src_png(&p, &size);
    // Patch IHDR height to 60000 and fix its CRC.
    png[20] = 0, png[21] = 0, png[22] = 0xEA, png[23] = 0x60;
    uint32_t crc = (uint32_t)crc32(0, png + 12, 17);
    put_be32(png + 29, crc);
    OcrImage img;
    ck_assert_int_eq(ocr_image_decode(&img, png, size, OCR_CHANNELS_RGB, "tall.png"), OCR_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "tall.png"));
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "cannot fit"));
    int w, h;
    ck_assert_int_eq(ocr_image_probe(png, size, "tall.png", &w, &h), OCR_OK);
    ck_assert_int_eq(h, 60000);
    // Width and height 65535 (within libpng's limits) is over our pixel limit.
    png[16] = 0, png[17] = 0, png[18] = 0xFF, png[19] = 0xFF;
    png[20] = 0, png[21] = 0, png[22] = 0xFF, png[23] = 0xFF;
    crc = (uint32_t)crc32(0, png + 12, 17);
    put_be32(png + 29, crc);
    ck_assert_int_eq(ocr_image_decode(&img, png, size, OCR_CHANNELS_RGB, "huge.png"), OCR_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "limit"));
    free(png);
    free(p.s);
}
END_TEST

// libpng's warnings (here: a bad CRC in an ancillary chunk, which libpng skips) must not
// reach stderr, and the image still decodes.
START_TEST(test_png_warnings_are_quiet) {
    SrcPng p = {.w = 4, .h = 4, .color_type = PNG_COLOR_TYPE_GRAY, .bit_depth = 8};
    fill_random_src(&p, 5);
    size_t size;
    uint8_t *png = write_src_png(&p, &size);
    // Insert a tEXt chunk with a wrong CRC after IHDR (8 + 25 bytes).
    const uint8_t text[] = {0, 0, 0, 4, 't', 'E', 'X', 't', 'a', 0, 'b', 'c', 0xDE, 0xAD, 0xBE, 0xEF};
    uint8_t *bad = malloc(size + sizeof text);
    memcpy(bad, png, 33);
    memcpy(bad + 33, text, sizeof text);
    memcpy(bad + 33 + sizeof text, png + 33, size - 33);
    fflush(stderr);
    char errpath[2048];
    snprintf(errpath, sizeof errpath, "%s/stderr.txt", tmpdir);
    int saved = dup(2);
    FILE *f = freopen(errpath, "w", stderr);
    ck_assert_ptr_nonnull(f);
    OcrImage img;
    ocr_status_t st = ocr_image_decode(&img, bad, size + sizeof text, OCR_CHANNELS_GRAY, "warn.png");
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ck_assert_msg(st == OCR_OK, "%s", ocr_last_error());
    for (int i = 0; i < 16; i++) ck_assert_int_eq(img.pixels[i], p.s[i]);
    struct stat sb;
    ck_assert_int_eq(stat(errpath, &sb), 0);
    ck_assert_msg(sb.st_size == 0, "libpng wrote %lld bytes to stderr", (long long)sb.st_size);
    ocr_image_free(&img);
    free(bad);
    free(png);
    free(p.s);
}
END_TEST

START_TEST(test_probe_jpeg_and_errors) {
    // SOI, an APP0 segment, SOF0 with height 0x0102 and width 0x0304.
    const uint8_t j[] = {0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 'J', 'F', 0xFF, 0xC0, 0, 11, 8, 1, 2, 3, 4, 1, 1, 0x11, 0};
    int w, h;
    ck_assert_int_eq(ocr_image_probe(j, sizeof j, "p.jpg", &w, &h), OCR_OK);
    ck_assert_int_eq(w, 0x0304);
    ck_assert_int_eq(h, 0x0102);
    ck_assert_int_eq(ocr_image_probe(j, 6, "p.jpg", &w, &h), OCR_ERR_FORMAT);
    ck_assert_int_eq(ocr_image_probe((const uint8_t *)"abc", 3, "p", &w, &h), OCR_ERR_FORMAT);
    ck_assert_int_eq(ocr_image_detect((const uint8_t *)"\x89PNG\r\n\x1a", 7), OCR_IMAGE_FORMAT_UNKNOWN);
}
END_TEST

int main(void) {
    Suite *s = suite_create("data_image");
    TCase *tc = tcase_create("png");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_png_every_type_depth_interlace);
    tcase_add_test(tc, test_png_trns);
    tcase_add_test(tc, test_composite_formula);
    tcase_add_test(tc, test_rgb_to_gray);
    tcase_add_test(tc, test_encode_decode_roundtrip);
    tcase_add_test(tc, test_write_and_load_files);
    tcase_add_test(tc, test_png_size_guards);
    tcase_add_test(tc, test_png_warnings_are_quiet);
    tcase_add_test(tc, test_probe_jpeg_and_errors);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

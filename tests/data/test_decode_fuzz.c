// Bounded fuzzing of both decoders: every truncation length class of every valid test
// image, random bit flips (PNG flips also with the chunk CRCs repaired, so they reach the
// decoder proper), random bytes behind valid signatures and headers. Nothing may crash,
// hang, leak (run under ASan) or print; truncations must be refused; every failure names
// the input. Deterministic (Philox) and sized to run in a few seconds.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h>
#include <png.h>

#include "core/fileio.h"
#include "core/rng.h"
#include "data/image.h"
#include "tests/common/png_crc.h"
#include "tests/common/test_util.h"

typedef struct {
    char name[64];
    uint8_t *data;
    size_t size;
    int is_png;
} Sample;

#define MAX_SAMPLES 40
static Sample samples[MAX_SAMPLES];
static int num_samples;

static void add_sample(const char *name, uint8_t *data, size_t size) {
    ck_assert_int_lt(num_samples, MAX_SAMPLES);
    Sample *s = &samples[num_samples++];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->data = data, s->size = size;
    s->is_png = ocr_image_detect(data, size) == OCR_IMAGE_FORMAT_PNG;
}

// ---- generated inputs --------------------------------------------------------------

typedef struct {
    uint8_t *buf;
    size_t size, cap;
} MemOut;

static void mem_write(png_structp png, png_bytep data, size_t n) {
    MemOut *m = png_get_io_ptr(png);
    if (m->size + n > m->cap) m->buf = realloc(m->buf, m->cap = (m->size + n) * 2);
    memcpy(m->buf + m->size, data, n);
    m->size += n;
}
static void mem_flush(png_structp png) { (void)png; }

static void add_png(const char *name, int w, int h, int color_type, int depth, int interlace, int trns, OcrRng *r) {
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    MemOut m = {0};
    ck_assert(!setjmp(png_jmpbuf(png)));
    png_set_write_fn(png, &m, mem_write, mem_flush);
    png_set_IHDR(png, info, w, h, depth, color_type, interlace, 0, 0);
    if (color_type == PNG_COLOR_TYPE_PALETTE) {
        png_color pal[16];
        png_byte alpha[16];
        for (int i = 0; i < 16; i++)
            pal[i].red = (png_byte)(i * 16), pal[i].green = (png_byte)(255 - i * 9), pal[i].blue = (png_byte)(i * 5),
            alpha[i] = (png_byte)(i * 17);
        png_set_PLTE(png, info, pal, 1 << (depth < 4 ? depth : 4));
        if (trns) png_set_tRNS(png, info, alpha, 1 << (depth < 4 ? depth : 4), NULL);
    } else if (trns) {
        png_color_16 c = {.gray = 1, .red = 1, .green = 2, .blue = 3};
        png_set_tRNS(png, info, NULL, 0, &c);
    }
    png_write_info(png, info);
    int ch = color_type == PNG_COLOR_TYPE_GRAY || color_type == PNG_COLOR_TYPE_PALETTE ? 1
             : color_type == PNG_COLOR_TYPE_GRAY_ALPHA                                ? 2
             : color_type == PNG_COLOR_TYPE_RGB                                       ? 3
                                                                                      : 4;
    size_t rowbytes = ((size_t)w * ch * depth + 7) / 8;
    uint8_t *rows = malloc(rowbytes * h);
    png_bytep *rp = malloc(sizeof(png_bytep) * h);
    int maxv = color_type == PNG_COLOR_TYPE_PALETTE ? (1 << (depth < 4 ? depth : 4)) - 1 : 255;
    for (size_t i = 0; i < rowbytes * h; i++) rows[i] = (uint8_t)ocr_rng_next_int(r, 0, 255);
    if (color_type == PNG_COLOR_TYPE_PALETTE && depth == 8)
        for (size_t i = 0; i < rowbytes * h; i++) rows[i] = (uint8_t)(rows[i] % (maxv + 1));
    for (int y = 0; y < h; y++) rp[y] = rows + rowbytes * y;
    png_write_image(png, rp);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(rows);
    free(rp);
    add_sample(name, m.buf, m.size);
}

static void add_jpeg(const char *name, int w, int h, int comps, J_COLOR_SPACE space, int progressive, int arith,
                     int restart) {
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    unsigned long size = 0;
    jpeg_mem_dest(&c, &out, &size);
    c.image_width = (JDIMENSION)w, c.image_height = (JDIMENSION)h;
    c.input_components = comps, c.in_color_space = space;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 85, TRUE);
    if (progressive) jpeg_simple_progression(&c);
    c.arith_code = (boolean)arith;
    c.restart_interval = (unsigned)restart;
    jpeg_start_compress(&c, TRUE);
    uint8_t *row = malloc((size_t)w * comps);
    while (c.next_scanline < c.image_height) {
        for (int i = 0; i < w * comps; i++) row[i] = (uint8_t)((i * 7 + c.next_scanline * 13) & 255);
        JSAMPROW rp = row;
        jpeg_write_scanlines(&c, &rp, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(row);
    add_sample(name, out, size);
}

static void add_shared(const char *rel, const char *name) {
    char path[1024];
    if (!ocr_test_shared_path(rel, path, sizeof path)) return;
    char *data;
    size_t size;
    ck_assert_int_eq(ocr_read_file(path, &data, &size), OCR_OK);
    add_sample(name, (uint8_t *)data, size);
}

static void setup(void) {
    OcrRng r = ocr_rng_make(2024, 0);
    num_samples = 0;
    add_png("gray1_adam7.png", 9, 7, PNG_COLOR_TYPE_GRAY, 1, PNG_INTERLACE_ADAM7, 0, &r);
    add_png("gray4_trns.png", 11, 5, PNG_COLOR_TYPE_GRAY, 4, PNG_INTERLACE_NONE, 1, &r);
    add_png("gray16.png", 7, 6, PNG_COLOR_TYPE_GRAY, 16, PNG_INTERLACE_ADAM7, 0, &r);
    add_png("ga8.png", 8, 8, PNG_COLOR_TYPE_GRAY_ALPHA, 8, PNG_INTERLACE_NONE, 0, &r);
    add_png("pal2_trns_adam7.png", 10, 9, PNG_COLOR_TYPE_PALETTE, 2, PNG_INTERLACE_ADAM7, 1, &r);
    add_png("pal8.png", 12, 4, PNG_COLOR_TYPE_PALETTE, 8, PNG_INTERLACE_NONE, 1, &r);
    add_png("rgb8_trns.png", 9, 9, PNG_COLOR_TYPE_RGB, 8, PNG_INTERLACE_NONE, 1, &r);
    add_png("rgb16_adam7.png", 6, 5, PNG_COLOR_TYPE_RGB, 16, PNG_INTERLACE_ADAM7, 0, &r);
    add_png("rgba8.png", 9, 6, PNG_COLOR_TYPE_RGB_ALPHA, 8, PNG_INTERLACE_NONE, 0, &r);
    add_png("rgba16.png", 5, 5, PNG_COLOR_TYPE_RGB_ALPHA, 16, PNG_INTERLACE_NONE, 0, &r);
    add_jpeg("baseline.jpg", 33, 21, 3, JCS_RGB, 0, 0, 0);
    add_jpeg("progressive.jpg", 33, 21, 3, JCS_RGB, 1, 0, 0);
    add_jpeg("arithmetic.jpg", 33, 21, 3, JCS_RGB, 0, 1, 0);
    add_jpeg("prog_arith.jpg", 25, 17, 3, JCS_RGB, 1, 1, 0);
    add_jpeg("restart.jpg", 33, 21, 3, JCS_RGB, 0, 0, 1);
    add_jpeg("gray.jpg", 20, 20, 1, JCS_GRAYSCALE, 0, 0, 0);
    add_jpeg("cmyk.jpg", 16, 16, 4, JCS_CMYK, 0, 0, 0);
    add_shared("testdata/libjpeg-turbo/testorig.jpg", "testorig.jpg");
    add_shared("testdata/libjpeg-turbo/testimgari.jpg", "testimgari.jpg");
    add_shared("testdata/pngsuite/basi3p04.png", "basi3p04.png");
    add_shared("testdata/pngsuite/basi6a16.png", "basi6a16.png");
    add_shared("testdata/pngsuite/tbbn3p08.png", "tbbn3p08.png");
    add_shared("testdata/pngsuite/s09i3p02.png", "s09i3p02.png");
    add_shared("testdata/pngsuite/z09n2c08.png", "z09n2c08.png");
}

static void teardown(void) {
    for (int i = 0; i < num_samples; i++) free(samples[i].data);
    num_samples = 0;
}

// ---- checks -----------------------------------------------------------------------

typedef struct {
    int ok, refused;
} Tally;

// Decodes and checks the outcome is a clean success or a clean, named refusal.
static ocr_status_t try_decode(const uint8_t *data, size_t size, int order, const char *name, Tally *t) {
    OcrImage img;
    ocr_clear_error();
    ocr_status_t st = ocr_image_decode(&img, data, size, (ocr_channel_order_t)order, name);
    if (st == OCR_OK) {
        t->ok++;
        int ch = order == OCR_CHANNELS_GRAY ? 1 : 3;
        ck_assert_msg(img.pixels && img.width > 0 && img.height > 0 && img.channels == ch, "%s: bad image", name);
        ck_assert((long long)img.width * img.height <= OCR_IMAGE_MAX_PIXELS);
        ocr_image_free(&img);
    } else {
        t->refused++;
        ck_assert_msg(st == OCR_ERR_FORMAT || st == OCR_ERR_UNSUPPORTED, "%s: unexpected status %s (%s)", name,
                      ocr_status_name(st), ocr_last_error());
        ck_assert_msg(img.pixels == NULL && img.width == 0, "%s: output not cleared on failure", name);
        ck_assert_msg(strstr(ocr_last_error(), name) != NULL, "%s: message \"%s\" does not name it", name,
                      ocr_last_error());
    }
    return st;
}

START_TEST(test_valid_inputs_decode) {
    ck_assert_int_ge(num_samples, 17);
    Tally t = {0};
    for (int i = 0; i < num_samples; i++)
        for (int o = 0; o < 3; o++)
            ck_assert_msg(try_decode(samples[i].data, samples[i].size, o, samples[i].name, &t) == OCR_OK, "%s: %s",
                          samples[i].name, ocr_last_error());
}
END_TEST

START_TEST(test_truncations_refused) {
    Tally t = {0};
    int cuts = 0;
    for (int i = 0; i < num_samples; i++) {
        const Sample *s = &samples[i];
        for (size_t len = 0; len < s->size; len++) {
            // Every length in the headers, then ~48 spread over the rest, and the last bytes.
            int take = len < 64 || len + 4 > s->size || len % (s->size / 48 + 1) == 0;
            if (!take) continue;
            uint8_t *buf = malloc(len ? len : 1);  // exact size, so ASan sees any over-read
            memcpy(buf, s->data, len);
            char name[96];
            snprintf(name, sizeof name, "%.60s@%zu", s->name, len);
            ocr_status_t st = try_decode(buf, len, (int)(len % 3), name, &t);
            ck_assert_msg(st == OCR_ERR_FORMAT, "%s cut to %zu of %zu bytes: status %s", s->name, len, s->size,
                          ocr_status_name(st));
            free(buf);
            cuts++;
        }
    }
    ck_assert_int_eq(t.ok, 0);
    ck_assert_int_gt(cuts, 1000);
    printf("truncations: %d refused\n", cuts);
}
END_TEST

START_TEST(test_bit_flips) {
    Tally t = {0};
    OcrRng r = ocr_rng_make(77, 1);
    int flips = 0;
    for (int i = 0; i < num_samples; i++) {
        const Sample *s = &samples[i];
        uint8_t *buf = malloc(s->size);
        for (int m = 0; m < 160; m++) {
            memcpy(buf, s->data, s->size);
            int nbits = (int)ocr_rng_next_int(&r, 1, 4);
            for (int b = 0; b < nbits; b++) {
                // Half the flips land in the first 80 bytes (headers, tables).
                size_t hi = ocr_rng_next_int(&r, 0, 1) && s->size > 80 ? 79 : s->size - 1;
                size_t pos = (size_t)ocr_rng_next_int(&r, 0, (int64_t)hi);
                buf[pos] ^= (uint8_t)(1u << ocr_rng_next_int(&r, 0, 7));
            }
            if (s->is_png && (m & 1)) ocr_test_png_repair_crcs(buf, s->size);
            char name[96];
            snprintf(name, sizeof name, "%.60s#flip%d", s->name, m);
            try_decode(buf, s->size, m % 3, name, &t);
            flips++;
        }
        free(buf);
    }
    printf("bit flips: %d decoded, %d refused\n", t.ok, t.refused);
    ck_assert_int_eq(t.ok + t.refused, flips);
    ck_assert_int_gt(t.refused, flips / 10);  // the corruption is noticed, not always decoded
}
END_TEST

START_TEST(test_random_bytes) {
    Tally t = {0};
    OcrRng r = ocr_rng_make(99, 2);
    uint8_t *buf = malloc(4096);
    for (int m = 0; m < 1200; m++) {
        size_t n = (size_t)ocr_rng_next_int(&r, 0, 1500);
        for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)ocr_rng_next_u32(&r);
        size_t prefix = 0;
        const Sample *src = &samples[m % num_samples];
        switch (m % 4) {
            case 0: break;  // pure noise
            case 1:         // a signature, then noise
                prefix = src->is_png ? 8 : 3;
                break;
            case 2:  // a real header (PNG: signature + IHDR; JPEG: everything before the scan data)
                prefix = src->is_png ? 33 : src->size / 2;
                break;
            case 3:  // most of a real file, then noise
                prefix = src->size * 3 / 4;
                break;
        }
        if (prefix > src->size) prefix = src->size;
        if (prefix + n > 4096) n = 4096 - prefix;
        memmove(buf + prefix, buf, n);
        memcpy(buf, src->data, prefix);
        uint8_t *exact = malloc(prefix + n + 1);
        memcpy(exact, buf, prefix + n);
        char name[96];
        snprintf(name, sizeof name, "noise%d", m);
        ocr_status_t st = try_decode(exact, prefix + n, m % 3, name, &t);
        if (m % 4 == 0) ck_assert_msg(st != OCR_OK, "%s: random bytes decoded", name);
        free(exact);
    }
    free(buf);
    printf("random inputs: %d decoded, %d refused\n", t.ok, t.refused);
    ck_assert_int_ge(t.refused, 1100);
}
END_TEST

// Nothing the decoders do may print: libpng and libjpeg warn to stderr by default.
START_TEST(test_nothing_printed) {
    char path[1024];
    snprintf(path, sizeof path, "%s/fuzz_stderr_%ld.txt", OCR_BINARY_DIR, (long)getpid());
    fflush(stderr);
    int saved = dup(2);
    ck_assert_ptr_nonnull(freopen(path, "w", stderr));
    Tally t = {0};
    OcrRng r = ocr_rng_make(5, 3);
    for (int i = 0; i < num_samples; i++) {
        const Sample *s = &samples[i];
        uint8_t *buf = malloc(s->size);
        for (int m = 0; m < 30; m++) {
            memcpy(buf, s->data, s->size);
            buf[ocr_rng_next_int(&r, 8, (int64_t)s->size - 1)] ^= 0x10;
            if (s->is_png) ocr_test_png_repair_crcs(buf, s->size);
            try_decode(buf, s->size, OCR_CHANNELS_BGR, s->name, &t);
            try_decode(buf, s->size / 2, OCR_CHANNELS_BGR, s->name, &t);
        }
        free(buf);
    }
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    char *text = NULL;
    size_t size = 0;
    ocr_read_file(path, &text, &size);
    unlink(path);
    ck_assert_msg(size == 0, "decoders printed: %.300s", text ? text : "");
    free(text);
}
END_TEST

int main(void) {
    setenv("OCR_SHARED_DIR", OCR_SHARED_DIR, 0);  // test_util.c is built without the macro
    Suite *s = suite_create("data_decode_fuzz");
    TCase *tc = tcase_create("fuzz");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_valid_inputs_decode);
    tcase_add_test(tc, test_truncations_refused);
    tcase_add_test(tc, test_bit_flips);
    tcase_add_test(tc, test_random_bytes);
    tcase_add_test(tc, test_nothing_printed);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

// PNG decode and encode through libpng. Rules are in image.h.
//
// libpng reports errors by calling our error function, which must not return: it longjmps
// back to the setjmp in png_read_run/png_write_run. Everything those functions allocate
// lives in a context struct owned by the caller (not in locals of the function that calls
// setjmp, whose values are indeterminate after the longjmp), and the caller frees it on
// both paths.
#include <png.h>
#include <stdlib.h>
#include <string.h>

#include "data/image.h"

#define PNG_MSG_MAX 256

typedef struct {
    png_structp png;
    png_infop info;
    const uint8_t *data;
    size_t size, pos;
    ocr_status_t status;  // what a longjmp means: OCR_ERR_FORMAT unless set before png_error
    char msg[PNG_MSG_MAX];
    char warning[PNG_MSG_MAX];  // first libpng warning, kept for the error message
    uint8_t *buf;               // one row, or the whole image when interlaced
    png_bytep *rows;
    OcrImage out;
} PngReader;

static void png_error_cb(png_structp png, png_const_charp msg) {
    PngReader *r = png_get_error_ptr(png);
    if (msg != r->msg) snprintf(r->msg, sizeof r->msg, "%s", msg ? msg : "unknown libpng error");
    png_longjmp(png, 1);
}

// libpng prints warnings to stderr unless we take them; keep the first for context.
static void png_warning_cb(png_structp png, png_const_charp msg) {
    PngReader *r = png_get_error_ptr(png);
    if (!r->warning[0]) snprintf(r->warning, sizeof r->warning, "%s", msg ? msg : "");
}

static void png_read_cb(png_structp png, png_bytep dst, size_t n) {
    PngReader *r = png_get_io_ptr(png);
    if (n > r->size - r->pos) {
        snprintf(r->msg, sizeof r->msg, "file is truncated (%zu bytes; needed %zu more at offset %zu)", r->size,
                 n, r->pos);
        png_error(png, r->msg);
    }
    memcpy(dst, r->data + r->pos, n);
    r->pos += n;
}

static void reader_fail(PngReader *r, ocr_status_t status, const char *msg) {
    r->status = status;
    snprintf(r->msg, sizeof r->msg, "%s", msg);
    png_error(r->png, r->msg);
}

// One decoded row (8-bit samples, in_ch 1..4: G, GA, RGB, RGBA) into the output order.
static void convert_row(uint8_t *dst, const uint8_t *src, int w, int in_ch, ocr_channel_order_t order) {
    switch (in_ch) {
        case 1:
            if (order == OCR_CHANNELS_GRAY) {
                memcpy(dst, src, (size_t)w);
            } else {
                for (int x = 0; x < w; x++) dst[3 * x] = dst[3 * x + 1] = dst[3 * x + 2] = src[x];
            }
            break;
        case 2:
            for (int x = 0; x < w; x++) {
                uint8_t g = ocr_composite_white(src[2 * x], src[2 * x + 1]);
                if (order == OCR_CHANNELS_GRAY)
                    dst[x] = g;
                else
                    dst[3 * x] = dst[3 * x + 1] = dst[3 * x + 2] = g;
            }
            break;
        case 3:
        case 4:
            for (int x = 0; x < w; x++) {
                const uint8_t *p = src + (size_t)in_ch * x;
                uint8_t rr = p[0], gg = p[1], bb = p[2];
                if (in_ch == 4) {
                    rr = ocr_composite_white(rr, p[3]);
                    gg = ocr_composite_white(gg, p[3]);
                    bb = ocr_composite_white(bb, p[3]);
                }
                if (order == OCR_CHANNELS_GRAY) {
                    dst[x] = ocr_rgb_to_gray(rr, gg, bb);
                } else if (order == OCR_CHANNELS_RGB) {
                    dst[3 * x] = rr, dst[3 * x + 1] = gg, dst[3 * x + 2] = bb;
                } else {
                    dst[3 * x] = bb, dst[3 * x + 1] = gg, dst[3 * x + 2] = rr;
                }
            }
            break;
        default: OCR_ASSERT(0, "libpng gave %d channels", in_ch);
    }
}

static void png_read_run(PngReader *r, ocr_channel_order_t order) {
    png_structp png = r->png;
    png_infop info = r->info;
    if (setjmp(png_jmpbuf(png))) return;

    png_set_read_fn(png, r, png_read_cb);
    png_set_user_limits(png, OCR_IMAGE_MAX_DIM, OCR_IMAGE_MAX_DIM);
    png_read_info(png, info);

    png_uint_32 w = 0, h = 0;
    int bit_depth = 0, color_type = 0, interlace = 0;
    png_get_IHDR(png, info, &w, &h, &bit_depth, &color_type, &interlace, NULL, NULL);
    char why[PNG_MSG_MAX];
    if ((unsigned long long)w * h > (unsigned long long)OCR_IMAGE_MAX_PIXELS) {
        snprintf(why, sizeof why, "%ux%u pixels is over the limit of %lld", (unsigned)w, (unsigned)h,
                 (long long)OCR_IMAGE_MAX_PIXELS);
        reader_fail(r, OCR_ERR_UNSUPPORTED, why);
    }
    // Deflate expands at most 1032:1, so a header promising more pixel data than that is a
    // corrupt or truncated file; refusing it here avoids a huge allocation.
    unsigned long long min_raw =
        (unsigned long long)w * h * png_get_channels(png, info) * (unsigned)bit_depth / 8;
    if (min_raw > 1032ull * r->size + 4096) {
        snprintf(why, sizeof why, "corrupt or truncated: %ux%u pixels cannot fit in %zu bytes", (unsigned)w,
                 (unsigned)h, r->size);
        reader_fail(r, OCR_ERR_FORMAT, why);
    }

    // Everything to 8-bit G, GA, RGB or RGBA; no gamma handling on purpose.
    if (color_type == PNG_COLOR_TYPE_PALETTE || bit_depth < 8 || png_get_valid(png, info, PNG_INFO_tRNS))
        png_set_expand(png);
    if (bit_depth == 16) png_set_strip_16(png);  // the high byte, as cv2 (see image.h)
    int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);
    int in_ch = png_get_channels(png, info);
    size_t rowbytes = png_get_rowbytes(png, info);
    OCR_ASSERT(png_get_bit_depth(png, info) == 8 && in_ch >= 1 && in_ch <= 4 && rowbytes == (size_t)w * in_ch);

    if (ocr_image_alloc(&r->out, (int)w, (int)h, order == OCR_CHANNELS_GRAY ? 1 : 3) != OCR_OK)
        reader_fail(r, OCR_ERR_OOM, "out of memory for the decoded image");
    size_t out_row = (size_t)w * r->out.channels;
    if (passes > 1) {
        // Adam7: every pass touches every row, so the whole image is decoded first.
        r->buf = malloc(rowbytes * h);
        r->rows = malloc(sizeof(png_bytep) * h);
        if (!r->buf || !r->rows) reader_fail(r, OCR_ERR_OOM, "out of memory for the interlaced image");
        for (png_uint_32 y = 0; y < h; y++) r->rows[y] = r->buf + rowbytes * y;
        png_read_image(png, r->rows);
        for (png_uint_32 y = 0; y < h; y++) convert_row(r->out.pixels + out_row * y, r->rows[y], (int)w, in_ch, order);
    } else {
        r->buf = malloc(rowbytes);
        if (!r->buf) reader_fail(r, OCR_ERR_OOM, "out of memory for a row");
        for (png_uint_32 y = 0; y < h; y++) {
            png_read_row(png, r->buf, NULL);
            convert_row(r->out.pixels + out_row * y, r->buf, (int)w, in_ch, order);
        }
    }
    // Read through IEND, so a file cut anywhere, or with a bad CRC after the pixels, is refused.
    png_read_end(png, NULL);
    r->status = OCR_OK;
}

ocr_status_t ocr_image_decode_png(OcrImage *img, const uint8_t *bytes, size_t size, ocr_channel_order_t order,
                                  const char *name) {
    if (!name) name = "<memory>";
    memset(img, 0, sizeof *img);
    if (!bytes || size < 8 || png_sig_cmp(bytes, 0, 8) != 0)
        return ocr_set_error(OCR_ERR_FORMAT, "%s: not a PNG file (bad signature)", name);
    // A chunk that claims more bytes than the file holds is a truncation, refused below anyway;
    // refuse it before libpng sees it: libpng 1.6.39 only warns about an ancillary chunk over
    // its 8 MB limit and then allocates the claimed length (found by fuzz/fuzz_image.c: a
    // 161-byte file whose iTXt chunk claims 1.2 GB made it allocate 1.2 GB).
    for (size_t pos = 8; pos + 8 <= size;) {
        uint32_t len = (uint32_t)bytes[pos] << 24 | (uint32_t)bytes[pos + 1] << 16 | (uint32_t)bytes[pos + 2] << 8 |
                       bytes[pos + 3];
        if (len > size - pos - 8 || size - pos - 8 - len < 4)
            return ocr_set_error(OCR_ERR_FORMAT, "%s: bad PNG: file is truncated (%zu bytes; chunk \"%.4s\" at offset "
                                 "%zu claims %u bytes)", name, size, (const char *)bytes + pos + 4, pos, (unsigned)len);
        if (memcmp(bytes + pos + 4, "IEND", 4) == 0) break;
        pos += 12 + (size_t)len;
    }
    PngReader r;
    memset(&r, 0, sizeof r);
    r.data = bytes, r.size = size, r.status = OCR_ERR_FORMAT;
    r.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &r, png_error_cb, png_warning_cb);
    if (r.png) r.info = png_create_info_struct(r.png);
    if (!r.png || !r.info) {
        png_destroy_read_struct(r.png ? &r.png : NULL, NULL, NULL);
        return ocr_set_error(OCR_ERR_OOM, "%s: cannot create a libpng reader", name);
    }
    png_read_run(&r, order);
    png_destroy_read_struct(&r.png, &r.info, NULL);
    free(r.buf);
    free(r.rows);
    if (r.status != OCR_OK) {
        ocr_image_free(&r.out);
        if (r.warning[0] && strcmp(r.warning, r.msg) != 0)
            return ocr_set_error(r.status, "%s: bad PNG: %s (after warning: %s)", name, r.msg, r.warning);
        return ocr_set_error(r.status, "%s: bad PNG: %s", name, r.msg);
    }
    *img = r.out;
    return OCR_OK;
}

// ---- encoding -----------------------------------------------------------------------

typedef struct {
    png_structp png;
    png_infop info;
    uint8_t *buf;
    size_t size, cap;
    ocr_status_t status;
    char msg[PNG_MSG_MAX];
} PngWriter;

static void png_write_error_cb(png_structp png, png_const_charp msg) {
    PngWriter *w = png_get_error_ptr(png);
    if (msg != w->msg) snprintf(w->msg, sizeof w->msg, "%s", msg ? msg : "unknown libpng error");
    png_longjmp(png, 1);
}

static void png_write_warning_cb(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

static void png_write_cb(png_structp png, png_bytep src, size_t n) {
    PngWriter *w = png_get_io_ptr(png);
    if (n > w->cap - w->size) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap - w->size < n) cap *= 2;
        uint8_t *nb = realloc(w->buf, cap);
        if (!nb) {
            w->status = OCR_ERR_OOM;
            png_error(png, "out of memory for the encoded PNG");
        }
        w->buf = nb, w->cap = cap;
    }
    memcpy(w->buf + w->size, src, n);
    w->size += n;
}

static void png_flush_cb(png_structp png) { (void)png; }

static void png_write_run(PngWriter *w, const OcrImage *img) {
    if (setjmp(png_jmpbuf(w->png))) return;
    png_set_write_fn(w->png, w, png_write_cb, png_flush_cb);
    png_set_IHDR(w->png, w->info, (png_uint_32)img->width, (png_uint_32)img->height, 8,
                 img->channels == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(w->png, w->info);
    size_t stride = (size_t)img->width * img->channels;
    for (int y = 0; y < img->height; y++) png_write_row(w->png, img->pixels + stride * y);
    png_write_end(w->png, NULL);
    w->status = OCR_OK;
}

ocr_status_t ocr_image_encode_png(const OcrImage *img, uint8_t **out, size_t *size) {
    *out = NULL, *size = 0;
    if (!img || !img->pixels || img->width <= 0 || img->height <= 0 || (img->channels != 1 && img->channels != 3))
        return ocr_set_error(OCR_ERR_INVALID_ARG, "PNG encode: need an 8-bit gray or RGB image");
    PngWriter w;
    memset(&w, 0, sizeof w);
    w.status = OCR_ERR_FORMAT;
    w.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &w, png_write_error_cb, png_write_warning_cb);
    if (w.png) w.info = png_create_info_struct(w.png);
    if (!w.png || !w.info) {
        png_destroy_write_struct(w.png ? &w.png : NULL, NULL);
        return ocr_set_error(OCR_ERR_OOM, "PNG encode: cannot create a libpng writer");
    }
    png_write_run(&w, img);
    png_destroy_write_struct(&w.png, &w.info);
    if (w.status != OCR_OK) {
        free(w.buf);
        return ocr_set_error(w.status, "PNG encode (%dx%dx%d): %s", img->width, img->height, img->channels, w.msg);
    }
    *out = w.buf, *size = w.size;
    return OCR_OK;
}

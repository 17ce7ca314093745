// A fast PNG encoding for the synthetic generator: libpng at zlib level 1.
//
// Why not ocr_image_encode_png: it uses libpng's default level (6), which costs ~2.4 ms for a
// noisy 48x500 line here, four times the rendering, and the generator must make 500 lines/s
// on one core. Level 1 without row filters is ~4x faster for ~6% more bytes.
// This goes away once data/image.h offers a compression level (requested in the synth report).
//
// libpng reports errors by longjmp from its error callback; everything that must survive the
// jump lives in the caller-owned context, never in locals of the function that calls setjmp.
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/synth_internal.h"

typedef struct {
    png_structp png;
    png_infop info;
    uint8_t *buf;
    size_t size, cap;
    int oom;
    char msg[160];
} FastPng;

static void fast_error(png_structp png, png_const_charp msg) {
    FastPng *f = png_get_error_ptr(png);
    snprintf(f->msg, sizeof f->msg, "%s", msg ? msg : "libpng error");
    png_longjmp(png, 1);
}

static void fast_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

static void fast_write(png_structp png, png_bytep src, size_t n) {
    FastPng *f = png_get_io_ptr(png);
    if (n > f->cap - f->size) {
        size_t cap = f->cap ? f->cap : 16384;
        while (cap - f->size < n) cap *= 2;
        uint8_t *nb = realloc(f->buf, cap);
        if (!nb) {
            f->oom = 1;
            png_error(png, "out of memory for the encoded PNG");
        }
        f->buf = nb, f->cap = cap;
    }
    memcpy(f->buf + f->size, src, n);
    f->size += n;
}

static void fast_flush(png_structp png) { (void)png; }

static int fast_run(FastPng *f, const OcrImage *img) {
    if (setjmp(png_jmpbuf(f->png))) return 0;
    png_set_write_fn(f->png, f, fast_write, fast_flush);
    png_set_compression_level(f->png, 1);
    // No row filters: on flat paper with grain they save nothing here (measured: same bytes)
    // and trying all five per row costs a third of the encoding time.
    png_set_filter(f->png, PNG_FILTER_TYPE_BASE, PNG_FILTER_NONE);
    png_set_IHDR(f->png, f->info, (png_uint_32)img->width, (png_uint_32)img->height, 8,
                 img->channels == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(f->png, f->info);
    size_t stride = (size_t)img->width * img->channels;
    for (int y = 0; y < img->height; y++) png_write_row(f->png, img->pixels + stride * y);
    png_write_end(f->png, NULL);
    return 1;
}

ocr_status_t synth_encode_png(const OcrImage *img, uint8_t **out, size_t *size) {
    *out = NULL, *size = 0;
    if (!img || !img->pixels || img->width <= 0 || img->height <= 0 || (img->channels != 1 && img->channels != 3))
        return ocr_set_error(OCR_ERR_INVALID_ARG, "synth PNG encode: need an 8-bit gray or RGB image");
    FastPng f;
    memset(&f, 0, sizeof f);
    f.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &f, fast_error, fast_warning);
    if (f.png) f.info = png_create_info_struct(f.png);
    if (!f.png || !f.info) {
        png_destroy_write_struct(f.png ? &f.png : NULL, NULL);
        return ocr_set_error(OCR_ERR_OOM, "synth PNG encode: cannot create a libpng writer");
    }
    int ok = fast_run(&f, img);
    png_destroy_write_struct(&f.png, &f.info);
    if (!ok) {
        free(f.buf);
        return ocr_set_error(f.oom ? OCR_ERR_OOM : OCR_ERR_INTERNAL, "synth PNG encode (%dx%dx%d): %s", img->width,
                             img->height, img->channels, f.msg);
    }
    *out = f.buf, *size = f.size;
    return OCR_OK;
}

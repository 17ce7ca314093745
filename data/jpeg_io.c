// JPEG decode and encode through libjpeg-turbo (8-bit samples). Rules are in image.h.
//
// libjpeg's default error manager prints and calls exit(); ours formats the message and
// longjmps back to the setjmp in jpeg_read_run/jpeg_write_run. As in png_io.c, all state
// that changes after setjmp lives in a caller-owned struct, freed on both paths.
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#include "data/image.h"

// libjpeg's own working memory per image (coefficient buffers of progressive files, ...).
// Beyond this it would need a backing store, which libjpeg-turbo refuses with an error.
#define JPEG_MAX_DECODER_MEMORY (1L << 30)

typedef struct {
    struct jpeg_error_mgr pub;  // first: libjpeg hands us a pointer to it
    jmp_buf jump;
    ocr_status_t status;
    char msg[JMSG_LENGTH_MAX + 96];
    char warning[JMSG_LENGTH_MAX];  // first tolerated warning, for context
} JpegErr;

// Corrupt-data warnings after which libjpeg would carry on with grey or garbage pixels.
static int warning_is_fatal(int code) {
    switch (code) {
        case JWRN_JPEG_EOF:
        case JWRN_HIT_MARKER:
        case JWRN_HUFF_BAD_CODE:
        case JWRN_ARITH_BAD_CODE:
        case JWRN_MUST_RESYNC:
        case JWRN_BOGUS_PROGRESSION:
        case JWRN_NOT_SEQUENTIAL: return 1;
        default: return 0;
    }
}

static void jpeg_error_exit_cb(j_common_ptr cinfo) {
    JpegErr *e = (JpegErr *)cinfo->err;
    char text[JMSG_LENGTH_MAX];
    e->pub.format_message(cinfo, text);
    switch (e->pub.msg_code) {
        case JERR_BAD_PRECISION:
            e->status = OCR_ERR_UNSUPPORTED;
            snprintf(e->msg, sizeof e->msg, "%d-bit JPEG is not supported (8-bit samples only; libjpeg: %s)",
                     e->pub.msg_parm.i[0], text);
            break;
        case JERR_OUT_OF_MEMORY:
            e->status = OCR_ERR_OOM;
            snprintf(e->msg, sizeof e->msg, "out of memory (libjpeg: %s)", text);
            break;
        case JERR_NO_BACKING_STORE:
            e->status = OCR_ERR_UNSUPPORTED;
            snprintf(e->msg, sizeof e->msg, "needs more decoder memory than the %ld MiB limit (libjpeg: %s)",
                     JPEG_MAX_DECODER_MEMORY >> 20, text);
            break;
        case JERR_ARITH_NOTIMPL:
        case JERR_NOT_COMPILED:
            e->status = OCR_ERR_UNSUPPORTED;
            snprintf(e->msg, sizeof e->msg, "%s", text);
            break;
        default:
            e->status = OCR_ERR_FORMAT;
            snprintf(e->msg, sizeof e->msg, "%s", text);
            break;
    }
    longjmp(e->jump, 1);
}

static void jpeg_emit_message_cb(j_common_ptr cinfo, int msg_level) {
    if (msg_level >= 0) return;  // trace messages
    JpegErr *e = (JpegErr *)cinfo->err;
    e->pub.num_warnings++;
    char text[JMSG_LENGTH_MAX];
    e->pub.format_message(cinfo, text);
    if (warning_is_fatal(e->pub.msg_code)) {
        e->status = OCR_ERR_FORMAT;
        snprintf(e->msg, sizeof e->msg, "%s", text);
        longjmp(e->jump, 1);
    }
    if (!e->warning[0]) snprintf(e->warning, sizeof e->warning, "%s", text);
}

static void jpeg_output_message_cb(j_common_ptr cinfo) { (void)cinfo; }  // never print

static void jpeg_progress_cb(j_common_ptr cinfo) {
    if (!cinfo->is_decompressor) return;
    j_decompress_ptr d = (j_decompress_ptr)cinfo;
    // A progressive file can hold thousands of tiny scans that take minutes to decode.
    if (d->input_scan_number > OCR_IMAGE_MAX_SCANS) {
        JpegErr *e = (JpegErr *)cinfo->err;
        e->status = OCR_ERR_FORMAT;
        snprintf(e->msg, sizeof e->msg, "more than %d progressive scans (corrupt or hostile file)",
                 OCR_IMAGE_MAX_SCANS);
        longjmp(e->jump, 1);
    }
}

static void install_error_manager(JpegErr *e) {
    jpeg_std_error(&e->pub);
    e->pub.error_exit = jpeg_error_exit_cb;
    e->pub.emit_message = jpeg_emit_message_cb;
    e->pub.output_message = jpeg_output_message_cb;
    e->status = OCR_ERR_FORMAT;
}

typedef struct {
    struct jpeg_decompress_struct cinfo;
    JpegErr err;
    struct jpeg_progress_mgr progress;
    uint8_t *row;  // CMYK scanline
    OcrImage out;
} JpegReader;

static void jpeg_fail(JpegReader *r, ocr_status_t status, const char *msg) {
    r->err.status = status;
    snprintf(r->err.msg, sizeof r->err.msg, "%s", msg);
    longjmp(r->err.jump, 1);
}

// round(a·b / 255) for a, b in 0..255.
static inline uint8_t mul255(unsigned a, unsigned b) {
    unsigned t = a * b + 128u;
    return (uint8_t)((t + (t >> 8)) >> 8);
}

static void cmyk_row(uint8_t *dst, const uint8_t *src, int w, int inverted, ocr_channel_order_t order) {
    for (int x = 0; x < w; x++) {
        unsigned c = src[4 * x], m = src[4 * x + 1], y = src[4 * x + 2], k = src[4 * x + 3];
        if (!inverted) c = 255 - c, m = 255 - m, y = 255 - y, k = 255 - k;
        uint8_t rr = mul255(c, k), gg = mul255(m, k), bb = mul255(y, k);
        if (order == OCR_CHANNELS_GRAY) {
            dst[x] = ocr_rgb_to_gray(rr, gg, bb);
        } else if (order == OCR_CHANNELS_RGB) {
            dst[3 * x] = rr, dst[3 * x + 1] = gg, dst[3 * x + 2] = bb;
        } else {
            dst[3 * x] = bb, dst[3 * x + 1] = gg, dst[3 * x + 2] = rr;
        }
    }
}

static void jpeg_read_run(JpegReader *r, const uint8_t *bytes, size_t size, ocr_channel_order_t order) {
    j_decompress_ptr cinfo = &r->cinfo;
    if (setjmp(r->err.jump)) return;

    jpeg_create_decompress(cinfo);
    cinfo->mem->max_memory_to_use = JPEG_MAX_DECODER_MEMORY;
    r->progress.progress_monitor = jpeg_progress_cb;
    cinfo->progress = &r->progress;
    jpeg_mem_src(cinfo, bytes, (unsigned long)size);
    jpeg_read_header(cinfo, TRUE);

    char why[160];
    unsigned w = cinfo->image_width, h = cinfo->image_height;
    if ((unsigned long long)w * h > (unsigned long long)OCR_IMAGE_MAX_PIXELS) {
        snprintf(why, sizeof why, "%ux%u pixels is over the limit of %lld", w, h, (long long)OCR_IMAGE_MAX_PIXELS);
        jpeg_fail(r, OCR_ERR_UNSUPPORTED, why);
    }
    int direct = 1;
    switch (cinfo->jpeg_color_space) {
        case JCS_GRAYSCALE:
        case JCS_YCbCr:
        case JCS_RGB:
            cinfo->out_color_space = order == OCR_CHANNELS_GRAY  ? JCS_GRAYSCALE
                                     : order == OCR_CHANNELS_RGB ? JCS_EXT_RGB
                                                                 : JCS_EXT_BGR;
            break;
        case JCS_CMYK:
        case JCS_YCCK:  // libjpeg turns YCCK into (Adobe-inverted) CMYK
            cinfo->out_color_space = JCS_CMYK;
            direct = 0;
            break;
        default:
            snprintf(why, sizeof why, "unsupported colour space (%d components, libjpeg colour space %d)",
                     cinfo->num_components, (int)cinfo->jpeg_color_space);
            jpeg_fail(r, OCR_ERR_UNSUPPORTED, why);
    }
    jpeg_start_decompress(cinfo);
    int out_ch = order == OCR_CHANNELS_GRAY ? 1 : 3;
    OCR_ASSERT(cinfo->output_width == w && cinfo->output_height == h);
    OCR_ASSERT(cinfo->output_components == (direct ? out_ch : 4));
    if (ocr_image_alloc(&r->out, (int)w, (int)h, out_ch) != OCR_OK)
        jpeg_fail(r, OCR_ERR_OOM, "out of memory for the decoded image");
    if (!direct && !(r->row = malloc((size_t)w * 4))) jpeg_fail(r, OCR_ERR_OOM, "out of memory for a row");
    size_t stride = (size_t)w * out_ch;
    int inverted = cinfo->saw_Adobe_marker;
    while (cinfo->output_scanline < h) {
        unsigned y = cinfo->output_scanline;
        JSAMPROW row = direct ? r->out.pixels + stride * y : r->row;
        if (jpeg_read_scanlines(cinfo, &row, 1) != 1) jpeg_fail(r, OCR_ERR_FORMAT, "decoder made no progress");
        if (!direct) cmyk_row(r->out.pixels + stride * y, r->row, (int)w, inverted, order);
    }
    // Reads through EOI, so a file cut after the last scan is refused too.
    jpeg_finish_decompress(cinfo);
    r->err.status = OCR_OK;
}

ocr_status_t ocr_image_decode_jpeg(OcrImage *img, const uint8_t *bytes, size_t size, ocr_channel_order_t order,
                                   const char *name) {
    if (!name) name = "<memory>";
    memset(img, 0, sizeof *img);
    if (!bytes || size < 3) return ocr_set_error(OCR_ERR_FORMAT, "%s: not a JPEG file (too short)", name);
    JpegReader *r = calloc(1, sizeof *r);  // ~1 KB of libjpeg structs; keep them off small thread stacks
    if (!r) return ocr_set_error(OCR_ERR_OOM, "%s: out of memory", name);
    r->cinfo.err = &r->err.pub;
    install_error_manager(&r->err);
    jpeg_read_run(r, bytes, size, order);
    jpeg_destroy_decompress(&r->cinfo);
    free(r->row);
    ocr_status_t st = r->err.status;
    if (st == OCR_OK) {
        *img = r->out;
    } else {
        ocr_image_free(&r->out);
        if (r->err.warning[0])
            ocr_set_error(st, "%s: bad JPEG: %s (after warning: %s)", name, r->err.msg, r->err.warning);
        else
            ocr_set_error(st, "%s: bad JPEG: %s", name, r->err.msg);
    }
    free(r);
    return st;
}

// ---- encoding -----------------------------------------------------------------------

typedef struct {
    struct jpeg_destination_mgr pub;
    uint8_t *buf;
    size_t cap, size;
} JpegDest;

typedef struct {
    struct jpeg_compress_struct cinfo;
    JpegErr err;
    JpegDest dest;
} JpegWriter;

static void dest_init(j_compress_ptr cinfo) {
    JpegDest *d = (JpegDest *)cinfo->dest;
    d->cap = 1 << 16;
    d->buf = malloc(d->cap);
    if (!d->buf) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 0);
    d->pub.next_output_byte = d->buf;
    d->pub.free_in_buffer = d->cap;
}

// Called when the buffer is full (all of it is pending output): grow it.
static boolean dest_empty(j_compress_ptr cinfo) {
    JpegDest *d = (JpegDest *)cinfo->dest;
    uint8_t *nb = realloc(d->buf, d->cap * 2);
    if (!nb) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 1);
    d->buf = nb;
    d->pub.next_output_byte = nb + d->cap;
    d->pub.free_in_buffer = d->cap;
    d->cap *= 2;
    return TRUE;
}

static void dest_term(j_compress_ptr cinfo) {
    JpegDest *d = (JpegDest *)cinfo->dest;
    d->size = d->cap - d->pub.free_in_buffer;
}

static void jpeg_write_run(JpegWriter *w, const OcrImage *img, int quality) {
    j_compress_ptr cinfo = &w->cinfo;
    if (setjmp(w->err.jump)) return;
    jpeg_create_compress(cinfo);
    w->dest.pub.init_destination = dest_init;
    w->dest.pub.empty_output_buffer = dest_empty;
    w->dest.pub.term_destination = dest_term;
    cinfo->dest = &w->dest.pub;
    cinfo->image_width = (JDIMENSION)img->width;
    cinfo->image_height = (JDIMENSION)img->height;
    cinfo->input_components = img->channels;
    cinfo->in_color_space = img->channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(cinfo);
    jpeg_set_quality(cinfo, quality, TRUE);
    jpeg_start_compress(cinfo, TRUE);
    size_t stride = (size_t)img->width * img->channels;
    while (cinfo->next_scanline < cinfo->image_height) {
        JSAMPROW row = img->pixels + stride * cinfo->next_scanline;
        jpeg_write_scanlines(cinfo, &row, 1);
    }
    jpeg_finish_compress(cinfo);
    w->err.status = OCR_OK;
}

ocr_status_t ocr_image_encode_jpeg(const OcrImage *img, int quality, uint8_t **out, size_t *size) {
    *out = NULL, *size = 0;
    if (!img || !img->pixels || img->width <= 0 || img->height <= 0 || img->width > OCR_IMAGE_MAX_DIM ||
        img->height > OCR_IMAGE_MAX_DIM || (img->channels != 1 && img->channels != 3))
        return ocr_set_error(OCR_ERR_INVALID_ARG, "JPEG encode: need an 8-bit gray or RGB image up to 65535 wide");
    if (quality < 1 || quality > 100)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "JPEG encode: quality %d outside 1..100", quality);
    JpegWriter *w = calloc(1, sizeof *w);
    if (!w) return ocr_set_error(OCR_ERR_OOM, "JPEG encode: out of memory");
    w->cinfo.err = &w->err.pub;
    install_error_manager(&w->err);
    jpeg_write_run(w, img, quality);
    jpeg_destroy_compress(&w->cinfo);
    ocr_status_t st = w->err.status;
    if (st == OCR_OK) {
        *out = w->dest.buf, *size = w->dest.size;
    } else {
        free(w->dest.buf);
        ocr_set_error(st, "JPEG encode (%dx%dx%d): %s", img->width, img->height, img->channels, w->err.msg);
    }
    free(w);
    return st;
}

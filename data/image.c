// Format dispatch, file IO and small helpers; the codecs live in png_io.c and jpeg_io.c.
#include "data/image.h"

#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"

void ocr_image_free(OcrImage *img) {
    if (!img) return;
    free(img->pixels);
    memset(img, 0, sizeof *img);
}

ocr_status_t ocr_image_alloc(OcrImage *img, int width, int height, int channels) {
    memset(img, 0, sizeof *img);
    if (width <= 0 || height <= 0 || (channels != 1 && channels != 3))
        return ocr_set_error(OCR_ERR_INVALID_ARG, "image alloc: bad shape %dx%dx%d", width, height, channels);
    size_t bytes = (size_t)width * (size_t)height * (size_t)channels;
    img->pixels = malloc(bytes);
    if (!img->pixels) return ocr_set_error(OCR_ERR_OOM, "image alloc: out of memory (%zu bytes)", bytes);
    img->width = width, img->height = height, img->channels = channels;
    return OCR_OK;
}

static const uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

ocr_image_format_t ocr_image_detect(const uint8_t *bytes, size_t size) {
    if (size >= 8 && memcmp(bytes, png_signature, 8) == 0) return OCR_IMAGE_FORMAT_PNG;
    if (size >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF) return OCR_IMAGE_FORMAT_JPEG;
    return OCR_IMAGE_FORMAT_UNKNOWN;
}

// Names formats that cv2 reads but we do not, so the message says what the file is.
static const char *other_format_name(const uint8_t *b, size_t n) {
    if (n >= 2 && b[0] == 'B' && b[1] == 'M') return "BMP";
    if (n >= 4 && memcmp(b, "GIF8", 4) == 0) return "GIF";
    if (n >= 12 && memcmp(b, "RIFF", 4) == 0 && memcmp(b + 8, "WEBP", 4) == 0) return "WebP";
    if (n >= 4 && (memcmp(b, "II*\0", 4) == 0 || memcmp(b, "MM\0*", 4) == 0)) return "TIFF";
    if (n >= 2 && b[0] == 'P' && b[1] >= '1' && b[1] <= '6') return "PNM";
    return NULL;
}

ocr_status_t ocr_image_decode(OcrImage *img, const uint8_t *bytes, size_t size, ocr_channel_order_t order,
                              const char *name) {
    if (!name) name = "<memory>";
    if (!img) return ocr_set_error(OCR_ERR_INVALID_ARG, "%s: decode: no output image", name);
    memset(img, 0, sizeof *img);
    if (order != OCR_CHANNELS_BGR && order != OCR_CHANNELS_RGB && order != OCR_CHANNELS_GRAY)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "%s: decode: bad channel order %d", name, (int)order);
    if (!bytes || size == 0) return ocr_set_error(OCR_ERR_FORMAT, "%s: empty image file", name);
    switch (ocr_image_detect(bytes, size)) {
        case OCR_IMAGE_FORMAT_PNG: return ocr_image_decode_png(img, bytes, size, order, name);
        case OCR_IMAGE_FORMAT_JPEG: return ocr_image_decode_jpeg(img, bytes, size, order, name);
        default: break;
    }
    const char *other = other_format_name(bytes, size);
    if (other)
        return ocr_set_error(OCR_ERR_UNSUPPORTED, "%s: %s images are not supported (PNG and JPEG only)", name, other);
    char head[3 * 8 + 1] = {0};
    for (size_t i = 0; i < size && i < 8; i++) snprintf(head + 3 * i, 4, "%02x ", bytes[i]);
    if (head[0]) head[strlen(head) - 1] = '\0';
    return ocr_set_error(OCR_ERR_FORMAT, "%s: not a PNG or JPEG file (starts with %s)", name, head);
}

ocr_status_t ocr_image_load(OcrImage *img, const char *path, ocr_channel_order_t order) {
    if (img) memset(img, 0, sizeof *img);
    if (!path || !path[0]) return ocr_set_error(OCR_ERR_INVALID_ARG, "image load: empty path");
    char *data = NULL;
    size_t size = 0;
    OCR_TRY(ocr_read_file(path, &data, &size));  // names the path; NOT_FOUND for a missing file
    ocr_status_t st = ocr_image_decode(img, (const uint8_t *)data, size, order, path);
    free(data);
    return st;
}

ocr_status_t ocr_image_write_png(const char *path, const OcrImage *img) {
    uint8_t *png = NULL;
    size_t size = 0;
    ocr_status_t st = ocr_image_encode_png(img, &png, &size);
    if (st != OCR_OK) return ocr_wrap_error(st, "writing %s", path ? path : "<null>");
    st = ocr_write_file_atomic(path, png, size);
    free(png);
    return st;
}

static unsigned be16(const uint8_t *p) { return (unsigned)p[0] << 8 | p[1]; }
static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

ocr_status_t ocr_image_probe(const uint8_t *bytes, size_t size, const char *name, int *width, int *height) {
    if (!name) name = "<memory>";
    *width = *height = 0;
    ocr_image_format_t fmt = bytes ? ocr_image_detect(bytes, size) : OCR_IMAGE_FORMAT_UNKNOWN;
    if (fmt == OCR_IMAGE_FORMAT_PNG) {
        if (size < 24 || memcmp(bytes + 12, "IHDR", 4) != 0)
            return ocr_set_error(OCR_ERR_FORMAT, "%s: PNG without an IHDR chunk", name);
        uint32_t w = be32(bytes + 16), h = be32(bytes + 20);
        if (w == 0 || h == 0 || w > OCR_IMAGE_MAX_DIM || h > OCR_IMAGE_MAX_DIM)
            return ocr_set_error(OCR_ERR_FORMAT, "%s: PNG size %ux%u out of range", name, (unsigned)w, (unsigned)h);
        *width = (int)w, *height = (int)h;
        return OCR_OK;
    }
    if (fmt == OCR_IMAGE_FORMAT_JPEG) {
        // Walk the marker segments up to the first SOFn.
        size_t i = 2;
        while (i + 4 <= size) {
            // Between segments libjpeg (next_marker) skips any byte that is not 0xFF and any
            // stuffed FF 00 pair with an "extraneous bytes" warning, which the decoder tolerates.
            if (bytes[i] != 0xFF) {
                i++;
                continue;
            }
            uint8_t m = bytes[i + 1];
            if (m == 0xFF) {  // fill byte
                i++;
                continue;
            }
            if (m == 0x00) {
                i += 2;
                continue;
            }
            if (m == 0xD8 || (m >= 0xD0 && m <= 0xD7) || m == 0x01) {  // no length field
                i += 2;
                continue;
            }
            unsigned len = be16(bytes + i + 2);
            if (len < 2) {  // libjpeg skips nothing more for a length below 2 (the SOFn reader refuses it)
                i += 4;
                continue;
            }
            if (i + 2 + len > size) break;
            int is_sof = m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
            if (is_sof) {
                if (len < 7) break;
                unsigned h = be16(bytes + i + 5), w = be16(bytes + i + 7);
                if (w == 0 || h == 0) return ocr_set_error(OCR_ERR_FORMAT, "%s: JPEG size %ux%u", name, w, h);
                *width = (int)w, *height = (int)h;
                return OCR_OK;
            }
            if (m == 0xD9 || m == 0xDA) break;  // EOI or scan data before any SOF
            i += 2 + len;
        }
        return ocr_set_error(OCR_ERR_FORMAT, "%s: JPEG without a readable frame header (SOF)", name);
    }
    return ocr_set_error(OCR_ERR_FORMAT, "%s: not a PNG or JPEG file", name);
}

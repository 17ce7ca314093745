// Decoded images: 8-bit, interleaved, 1 or 3 channels, rows top to bottom.
//
// Decoding rules (shared by PNG and JPEG, and what every later stage assumes):
// - Output is always 8 bits per sample, 1 channel (OCR_CHANNELS_GRAY) or 3 (BGR or RGB).
// - Alpha (PNG alpha channels and tRNS) is composited on white, per 8-bit sample c with
//   8-bit alpha a:  out = round((c·a + 255·(255 − a)) / 255)  (exact integer rounding; 255 is
//   odd so there are no ties). 16-bit images are reduced to 8 bits first, then composited.
//   Note: cv2.imdecode(IMREAD_COLOR), which PaddleOCR uses, drops alpha instead; white is
//   what a text line on a transparent background should look like.
// - 16 → 8 bits: the high byte, v >> 8 (libpng's png_set_strip_16), as cv2.imdecode does.
//   The PngSuite expected decodes in ../shared/testdata agree exactly for every 16-bit
//   colour and gray+alpha file; for 16-bit gray they are within 1 (their README allows it:
//   those were made with a rounding reduction that matches neither libpng method exactly).
// - No gamma correction (gAMA, cHRM, sRGB, iCCP are ignored), as cv2.imdecode does.
// - Colour → gray (OCR_CHANNELS_GRAY from a colour PNG or a CMYK JPEG): OpenCV's
//   cvtColor weights in 14-bit fixed point, Y = (4899·R + 9617·G + 1868·B + 8192) >> 14.
//   A YCbCr or RGB JPEG decoded to gray uses libjpeg's own conversion (its Y channel), as
//   cv2.imread(IMREAD_GRAYSCALE) does.
// - CMYK/YCCK JPEGs are converted to RGB: with an Adobe APP14 marker (Photoshop and libjpeg
//   writers; YCCK always has one) the stored samples are inverted ink, so R = C·K/255;
//   without it R = (255 − C)(255 − K)/255 (rounded), likewise G from M and B from Y.
// - Strict: a file with a CRC error in a critical chunk, truncated anywhere (including its
//   trailing IEND/EOI), with corrupt entropy-coded data that libjpeg reports as a warning
//   (premature end, bad Huffman/arithmetic code, hit marker, resync), or with more than
//   OCR_IMAGE_MAX_SCANS progressive scans is refused. OpenCV would decode some of these
//   with grey or garbage regions; for training we would rather skip the sample.
//   JPEG "extraneous bytes before marker" warnings are tolerated (common in camera files).
// - Size limits: width and height <= OCR_IMAGE_MAX_DIM and width·height <= OCR_IMAGE_MAX_PIXELS;
//   a PNG whose IHDR promises more pixel data than its bytes could hold (deflate expands
//   at most 1032:1) is refused before anything is allocated.
// Thread-safe: no global state; messages go to the calling thread's ocr_last_error().
#ifndef OCR_DATA_IMAGE_H
#define OCR_DATA_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef struct {
    int width, height, channels;  // channels: 1 (gray) or 3 (colour, order per decode options)
    uint8_t *pixels;              // width * height * channels bytes, malloc'd
} OcrImage;

typedef enum { OCR_CHANNELS_BGR = 0, OCR_CHANNELS_RGB, OCR_CHANNELS_GRAY } ocr_channel_order_t;

typedef enum { OCR_IMAGE_FORMAT_UNKNOWN = 0, OCR_IMAGE_FORMAT_PNG, OCR_IMAGE_FORMAT_JPEG } ocr_image_format_t;

#define OCR_IMAGE_MAX_DIM 65535
#define OCR_IMAGE_MAX_PIXELS (1LL << 27)  // 134 M pixels (an A3 page at 600 dpi is 70 M)
#define OCR_IMAGE_MAX_SCANS 256           // progressive JPEG scans (normal files have < 20)

// Decodes a PNG or JPEG (detected from the bytes) into 8-bit colour in the given order
// (PaddleOCR decodes BGR). Alpha is composited on white; 16-bit samples are reduced to 8
// bits (high byte, as cv2 does); palette, gray, gray+alpha and interlaced PNGs are expanded; CMYK/YCCK
// JPEGs are converted. Bad or truncated data returns OCR_ERR_FORMAT with a message naming
// `name` (a path, for messages); never crashes. Other statuses: OCR_ERR_UNSUPPORTED (12-bit
// JPEG, BMP/GIF/TIFF/WebP, over the size limits), OCR_ERR_OOM, OCR_ERR_INVALID_ARG.
// On failure *img is zeroed.
ocr_status_t ocr_image_decode(OcrImage *img, const uint8_t *bytes, size_t size, ocr_channel_order_t order,
                              const char *name);
// Reads and decodes a file. A missing file is OCR_ERR_NOT_FOUND, an unreadable one
// OCR_ERR_IO, an empty one OCR_ERR_FORMAT; every message names the path.
ocr_status_t ocr_image_load(OcrImage *img, const char *path, ocr_channel_order_t order);
// Writes an 8-bit gray or RGB PNG (pixels in RGB order for 3 channels), atomically.
ocr_status_t ocr_image_write_png(const char *path, const OcrImage *img);
void ocr_image_free(OcrImage *img);

// ---- extensions -----------------------------------------------------------------

// Allocates an uninitialised width×height×channels image (channels 1 or 3).
ocr_status_t ocr_image_alloc(OcrImage *img, int width, int height, int channels);
// Format from the leading bytes (PNG signature, JPEG SOI); UNKNOWN otherwise.
ocr_image_format_t ocr_image_detect(const uint8_t *bytes, size_t size);
// Width and height from the header alone (no pixel decoding), for aspect-ratio sorting.
ocr_status_t ocr_image_probe(const uint8_t *bytes, size_t size, const char *name, int *width, int *height);

// The format-specific decoders behind ocr_image_decode (same rules and statuses).
ocr_status_t ocr_image_decode_png(OcrImage *img, const uint8_t *bytes, size_t size, ocr_channel_order_t order,
                                  const char *name);
ocr_status_t ocr_image_decode_jpeg(OcrImage *img, const uint8_t *bytes, size_t size, ocr_channel_order_t order,
                                   const char *name);

// Encoders into a malloc'd buffer (*out, *size), for tests, the synthetic generator and
// benchmarks. The image is gray (1 channel) or RGB-ordered (3 channels).
ocr_status_t ocr_image_encode_png(const OcrImage *img, uint8_t **out, size_t *size);
// quality 1..100, 4:2:0 chroma subsampling for colour (libjpeg's defaults), baseline.
ocr_status_t ocr_image_encode_jpeg(const OcrImage *img, int quality, uint8_t **out, size_t *size);

// Pixel helpers shared by the decoders (exposed for tests and transforms).
// round((c·a + 255·(255 − a)) / 255): c composited over white with alpha a.
static inline uint8_t ocr_composite_white(uint8_t c, uint8_t a) {
    return (uint8_t)(((unsigned)c * a + 255u * (255u - a) + 127u) / 255u);
}
// OpenCV's RGB → gray (14-bit fixed point).
static inline uint8_t ocr_rgb_to_gray(uint8_t r, uint8_t g, uint8_t b) {
    return (uint8_t)((4899u * r + 9617u * g + 1868u * b + 8192u) >> 14);
}

#endif

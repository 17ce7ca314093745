// Decoded images: 8-bit, interleaved, 1 or 3 channels, rows top to bottom.
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

// Decodes a PNG or JPEG (detected from the bytes) into 8-bit colour in the given order
// (PaddleOCR decodes BGR). Alpha is composited on white; 16-bit samples are reduced to 8
// bits with rounding; palette, gray, gray+alpha and interlaced PNGs are expanded; CMYK/YCCK
// JPEGs are converted. Bad or truncated data returns OCR_ERR_FORMAT with a message naming
// `name` (a path, for messages); never crashes.
ocr_status_t ocr_image_decode(OcrImage *img, const uint8_t *bytes, size_t size, ocr_channel_order_t order,
                              const char *name);
// Reads and decodes a file.
ocr_status_t ocr_image_load(OcrImage *img, const char *path, ocr_channel_order_t order);
// Writes an 8-bit gray or RGB PNG (pixels in RGB order for 3 channels), atomically.
ocr_status_t ocr_image_write_png(const char *path, const OcrImage *img);
void ocr_image_free(OcrImage *img);

#endif

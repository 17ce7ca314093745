// PNG and JPEG decoding (data/png_io.c, data/jpeg_io.c, data/image.c): ocr_image_decode and
// ocr_image_probe on the same bytes.
//
// Input: one control byte, then the file. Control bits 0-1 pick the channel order (BGR, RGB,
// gray; 3 is BGR), bit 2 recomputes every PNG chunk CRC first, so that mutations inside
// chunks reach the decoder instead of libpng's CRC check (a campaign without it spends
// nearly all of its time on "CRC error").
// Checked beyond "no crash, no leak, no UB": a decoded image has the probed size, 1 channel
// for gray and 3 otherwise, and every pixel byte is readable (ASan checks the allocation).
#include <stdlib.h>
#include <string.h>

#include "data/image.h"
#include "fuzz/fuzz_util.h"
#include "tests/common/png_crc.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int ctl = data[0];
    ocr_channel_order_t order = (ctl & 3) == 1 ? OCR_CHANNELS_RGB : (ctl & 3) == 2 ? OCR_CHANNELS_GRAY : OCR_CHANNELS_BGR;
    size_t n = size - 1;
    uint8_t *bytes = malloc(n ? n : 1);
    if (!bytes) return 0;
    memcpy(bytes, data + 1, n);
    if ((ctl & 4) && ocr_image_detect(bytes, n) == OCR_IMAGE_FORMAT_PNG) ocr_test_png_repair_crcs(bytes, n);

    int pw = 0, ph = 0;
    ocr_status_t probed = ocr_image_probe(bytes, n, "fuzz-input", &pw, &ph);
    OcrImage img;
    ocr_status_t st = ocr_image_decode(&img, bytes, n, order, "fuzz-input");
    if (st == OCR_OK) {
        OCR_ASSERT(img.width >= 1 && img.height >= 1 && img.pixels, "decoded %dx%d", img.width, img.height);
        OCR_ASSERT(img.channels == (order == OCR_CHANNELS_GRAY ? 1 : 3), "%d channels for order %d", img.channels,
                   (int)order);
        OCR_ASSERT(probed == OCR_OK && pw == img.width && ph == img.height,
                   "probe says %dx%d (status %d), decode %dx%d", pw, ph, (int)probed, img.width, img.height);
        size_t bytes_out = (size_t)img.width * img.height * img.channels;
        unsigned sum = 0;
        for (size_t i = 0; i < bytes_out; i++) sum += img.pixels[i];
        volatile unsigned sink = sum;
        (void)sink;
        ocr_image_free(&img);
    } else {
        OCR_ASSERT(img.pixels == NULL && img.width == 0, "failed decode left an image behind");
        OCR_ASSERT(strstr(ocr_last_error(), "fuzz-input"), "decode failed (status %d) with a message that does not name "
                   "the input: %s", (int)st, ocr_last_error());
    }
    free(bytes);
    return 0;
}

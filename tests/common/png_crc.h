// PNG chunk CRCs for the decoder's fuzz tests (tests/data/test_decode_fuzz.c) and the image
// fuzz harness (fuzz/fuzz_image.c): after bytes are flipped, rewriting every chunk CRC lets the
// damage reach libpng's decoding instead of stopping at its CRC check. Header-only so that the
// fuzz build, which does not link the test utilities, can use it too.
#ifndef OCR_TESTS_PNG_CRC_H
#define OCR_TESTS_PNG_CRC_H

#include <stddef.h>
#include <stdint.h>

// CRC-32 (ISO 3309, PNG's) of n bytes.
static inline uint32_t ocr_test_png_crc32(const uint8_t *p, size_t n) {
    static uint32_t table[256];
    static int ready;
    if (!ready) {
        for (uint32_t k = 0; k < 256; k++) {
            uint32_t c = k;
            for (int b = 0; b < 8; b++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[k] = c;
        }
        ready = 1;
    }
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

// Rewrites, in place, the CRC of every chunk (type + data) that lies wholly within the buffer.
static inline void ocr_test_png_repair_crcs(uint8_t *b, size_t n) {
    size_t pos = 8;
    while (pos + 12 <= n) {
        uint32_t len = (uint32_t)b[pos] << 24 | (uint32_t)b[pos + 1] << 16 | (uint32_t)b[pos + 2] << 8 | b[pos + 3];
        if (len > n - pos - 12) break;
        uint32_t crc = ocr_test_png_crc32(b + pos + 4, (size_t)len + 4);
        uint8_t *c = b + pos + 8 + len;
        c[0] = (uint8_t)(crc >> 24), c[1] = (uint8_t)(crc >> 16), c[2] = (uint8_t)(crc >> 8), c[3] = (uint8_t)crc;
        pos += (size_t)len + 12;
    }
}

#endif

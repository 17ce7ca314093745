#include "data/utf8.h"

int ocr_utf8_decode(const char *s, size_t n, uint32_t *cp) {
    if (n == 0) return 0;
    const unsigned char *u = (const unsigned char *)s;
    unsigned char b0 = u[0];
    if (b0 < 0x80) {
        *cp = b0;
        return 1;
    }
    int len;
    uint32_t min, c;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        len = 2, min = 0x80, c = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
        len = 3, min = 0x800, c = b0 & 0x0F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        len = 4, min = 0x10000, c = b0 & 0x07;
    } else {
        return 0;  // continuation byte, C0/C1 (always overlong) or F5..FF
    }
    if (n < (size_t)len) return 0;
    for (int i = 1; i < len; i++) {
        if ((u[i] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (u[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    return len;
}

int ocr_utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp <= 0x10FFFF) {
        out[0] = (char)(0xF0 | (cp >> 18));
        out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (char)(0x80 | (cp & 0x3F));
        return 4;
    }
    return 0;
}

int ocr_utf8_valid(const char *s, size_t n, size_t *bad_offset) {
    size_t i = 0;
    while (i < n) {
        if ((unsigned char)s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        int k = ocr_utf8_decode(s + i, n - i, &cp);
        if (k == 0) {
            if (bad_offset) *bad_offset = i;
            return 0;
        }
        i += (size_t)k;
    }
    return 1;
}

size_t ocr_utf8_length(const char *s, size_t n) {
    size_t count = 0;
    // Every code point has exactly one byte that is not a continuation byte.
    for (size_t i = 0; i < n; i++) count += ((unsigned char)s[i] & 0xC0) != 0x80;
    return count;
}

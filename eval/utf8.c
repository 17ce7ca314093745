#include "eval/utf8.h"

#include <string.h>

// Length of the well-formed sequence at s[0 .. n) and its code point, or 0 when the
// bytes there do not start one (RFC 3629: no overlongs, no surrogates, max U+10FFFF).
static int decode_one(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned char b0 = s[0];
    if (b0 < 0x80) {
        *cp = b0;
        return 1;
    }
    int len;
    uint32_t v, min;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        len = 2, v = b0 & 0x1F, min = 0x80;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        len = 3, v = b0 & 0x0F, min = 0x800;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        len = 4, v = b0 & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if ((size_t)len > n) return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return len;
}

size_t text_utf8_decode(uint32_t *out, size_t cap, const char *s, size_t len) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, count = 0;
    while (i < len) {
        uint32_t cp;
        int k = decode_one(p + i, len - i, &cp);
        if (k == 0) {
            cp = 0xDC00u + p[i];  // surrogateescape: one code point per invalid byte
            k = 1;
        }
        if (count < cap) out[count] = cp;
        count++;
        i += (size_t)k;
    }
    return count;
}

size_t text_utf8_length(const char *s) { return text_utf8_decode(NULL, 0, s, strlen(s)); }

int text_utf8_encode(char *buf, uint32_t cp) {
    unsigned char *b = (unsigned char *)buf;
    if (cp >= 0xDC80 && cp <= 0xDCFF) {
        b[0] = (unsigned char)(cp - 0xDC00);
        return 1;
    }
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) cp = 0xFFFD;
    if (cp < 0x80) {
        b[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        b[0] = (unsigned char)(0xC0 | (cp >> 6));
        b[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        b[0] = (unsigned char)(0xE0 | (cp >> 12));
        b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    b[0] = (unsigned char)(0xF0 | (cp >> 18));
    b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    b[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

int text_utf8_valid(const char *s, size_t len) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        uint32_t cp;
        int k = decode_one(p + i, len - i, &cp);
        if (k == 0) return 0;
        i += (size_t)k;
    }
    return 1;
}

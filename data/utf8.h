// Strict UTF-8: what Python's bytes.decode("utf-8") accepts (no overlong forms, no
// surrogates, nothing above U+10FFFF), so a label PaddleOCR would reject is rejected here too.
#ifndef OCR_DATA_UTF8_H
#define OCR_DATA_UTF8_H

#include <stddef.h>
#include <stdint.h>

// Decodes one code point from s[0..n). Returns the number of bytes used (1..4), or 0 when
// the bytes there are not valid UTF-8 (or n == 0).
int ocr_utf8_decode(const char *s, size_t n, uint32_t *cp);
// Writes the encoding of cp (<= U+10FFFF, not a surrogate) to out (4 bytes room);
// returns the byte count, or 0 for an invalid code point.
int ocr_utf8_encode(uint32_t cp, char out[4]);
// 1 when s[0..n) is valid UTF-8; otherwise 0 and *bad_offset (may be NULL) is the byte
// offset of the first invalid sequence.
int ocr_utf8_valid(const char *s, size_t n, size_t *bad_offset);
// Number of code points in valid UTF-8 s[0..n) (what Python's len() says).
size_t ocr_utf8_length(const char *s, size_t n);

#endif

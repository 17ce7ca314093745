// UTF-8 helpers for decoding and metrics (prefix text_utf8_; data/utf8.h's strict ocr_utf8_*
// validate labels and reject, these never fail): everything that counts characters counts
// Unicode code points, so a Chinese character is one character, not three bytes.
//
// Invalid input never fails: each byte that is not part of a well-formed sequence
// (stray continuation bytes, truncated or overlong sequences, encoded surrogates, values
// above U+10FFFF) decodes to U+DC80 + byte, Python's "surrogateescape" convention. Two
// different byte strings therefore never decode to the same code points, and the
// encoder turns those values back into the original bytes.
#ifndef OCR_EVAL_UTF8_H
#define OCR_EVAL_UTF8_H

#include <stddef.h>
#include <stdint.h>

// Decodes the first len bytes of s (NUL bytes included) into out[0 .. cap). Returns the
// number of code points in s, which may exceed cap (then only cap are written; out may be
// NULL with cap 0 to count).
size_t text_utf8_decode(uint32_t *out, size_t cap, const char *s, size_t len);

// Number of code points in the NUL-terminated string s.
size_t text_utf8_length(const char *s);

// Writes the encoding of cp into buf (at most 4 bytes, no NUL) and returns its length;
// U+DC80..U+DCFF (escaped bytes) give their single original byte. Code points that cannot
// be encoded (surrogates otherwise, > U+10FFFF) give U+FFFD.
int text_utf8_encode(char *buf, uint32_t cp);

// 1 when the len bytes of s are well-formed UTF-8, else 0.
int text_utf8_valid(const char *s, size_t len);

#endif

// Character dictionaries and CTC label encoding, with PaddleOCR's semantics
// (ppocr/data/imaug/label_ops.py BaseRecLabelEncode/CTCLabelEncode and
// ppocr/postprocess/rec_postprocess.py CTCLabelDecode):
//
// - classes = ["blank"] + the file's lines + [" " if use_space_char]. A line is the file
//   split at '\n' with leading/trailing '\r' and '\n' removed (Python's
//   .strip("\n").strip("\r\n")), so "a\r\n" is "a" and a line holding one space stays " ".
//   A UTF-8 BOM at the very start of the file is removed (PaddleOCR would keep it glued to
//   the first character). A line that is not valid UTF-8 is an error naming file and line.
// - Lookup is by code point, as Python's `for char in text`. A line with zero or several
//   code points still takes a class index (the class count must match PaddleOCR's so that
//   weights line up) but never matches; num_unmatchable counts them.
// - The code point → index map keeps the LAST occurrence: en_dict.txt has a " " line and
//   use_space_char appends another, so " " encodes to 96 of 97 classes.
// - Without a dictionary file: "0123456789abcdefghijklmnopqrstuvwxyz" and the text is
//   lower-cased (ASCII A-Z only) before encoding; use_space_char does not apply (as in
//   PaddleOCR). 37 classes.
// - A path containing "arabic" sets `reverse` (CTCLabelDecode reverses those strings).
//
// An OcrDict is immutable after loading and safe to share between threads.
#ifndef OCR_DATA_DICT_H
#define OCR_DATA_DICT_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef struct {
    int num_classes;              // including the blank at index 0
    const char *const *classes;   // index → NUL-terminated UTF-8 string; classes[0] = "blank"
    int lower;                    // the default charset: ASCII upper case folds to lower
    int reverse;                  // an Arabic dictionary (decoded strings are reversed)
    int num_unmatchable;          // classes that are not exactly one code point
    // private: an open-addressing hash table code point → index, and the string storage
    uint32_t *keys_;
    int32_t *vals_;
    size_t cap_;
    char *storage_;
    char **class_ptrs_;
} OcrDict;

// path NULL or "" → the default charset. Errors: NOT_FOUND/IO for the file, FORMAT for
// invalid UTF-8 (message "<path>:<line>: ...").
ocr_status_t ocr_dict_load(OcrDict *dict, const char *path, int use_space_char);
// The same from an in-memory file image (name is used in messages and for `reverse`).
ocr_status_t ocr_dict_from_buffer(OcrDict *dict, const char *data, size_t size, const char *name,
                                  int use_space_char);
void ocr_dict_free(OcrDict *dict);

// Class index of a code point, or -1 when the dictionary has none (case folding not applied).
int ocr_dict_lookup(const OcrDict *dict, uint32_t codepoint);
// Class index of one UTF-8 character given as a string ("字"), or -1.
int ocr_dict_lookup_utf8(const OcrDict *dict, const char *character);

// ---- counting characters that are missing from the dictionary -------------------------

typedef struct {
    uint32_t codepoint;
    int64_t count;
} OcrCharCount;

// A code point → count multiset (a hash map). Not thread-safe: use one per thread and merge.
typedef struct {
    OcrCharCount *slots_;
    size_t cap_;
    size_t distinct;  // number of different code points
    int64_t total;    // sum of counts
} OcrCharCounter;

void ocr_char_counter_init(OcrCharCounter *c);
void ocr_char_counter_free(OcrCharCounter *c);
ocr_status_t ocr_char_counter_add(OcrCharCounter *c, uint32_t codepoint, int64_t count);
ocr_status_t ocr_char_counter_merge(OcrCharCounter *dst, const OcrCharCounter *src);
int64_t ocr_char_counter_get(const OcrCharCounter *c, uint32_t codepoint);
// A malloc'd array of the distinct entries, most frequent first (ties by code point);
// *n receives the length. NULL with *n = 0 when empty (or on OOM, with the error set).
OcrCharCount *ocr_char_counter_sorted(const OcrCharCounter *c, size_t *n);

// ---- CTCLabelEncode ---------------------------------------------------------------------

typedef enum {
    OCR_LABEL_OK = 0,
    OCR_LABEL_EMPTY,             // "" (before filtering)
    OCR_LABEL_TOO_LONG,          // more than max_text_length code points (before filtering)
    OCR_LABEL_NO_KNOWN_CHARS,    // every character was missing from the dictionary
    OCR_LABEL_BAD_UTF8,
} ocr_label_result_t;

const char *ocr_label_result_name(ocr_label_result_t r);  // "ok", "empty", "too_long", ...

// Encodes text[0..len) into class indices: out[0..*out_len), zero-padded to
// max_text_length (out must hold max_text_length entries). Characters missing from the
// dictionary are dropped and, when `unknown` is not NULL, counted there (also for a text
// that ends up rejected as NO_KNOWN_CHARS; not for EMPTY/TOO_LONG/BAD_UTF8). The length
// test is on code points of the raw text, before lower-casing and filtering, as in
// PaddleOCR. An OOM while counting is ignored (the count is diagnostic).
ocr_label_result_t ocr_dict_encode(const OcrDict *dict, const char *text, size_t len, int max_text_length,
                                   int32_t *out, int *out_len, OcrCharCounter *unknown);

#endif

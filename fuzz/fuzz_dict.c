// Character dictionaries and CTC label encoding (data/dict.c): ocr_dict_from_buffer, the
// lookups and ocr_dict_encode.
//
// Input: one control byte, the dictionary file, then optionally a NUL byte and a label text
// to encode. Control bit 0: use_space_char; bit 1: a name containing "arabic" (the reverse
// flag); bits 2-7: max_text_length - 1.
// Checked: every class string of one code point is found again by ocr_dict_lookup_utf8 at
// an index holding the same string (the last occurrence wins, so not always its own index);
// an encoded label has 1..max_text_length indices, each a real class (never the blank),
// zero padding after it, and counts of unknown characters only for texts that were encoded.
#include <stdlib.h>
#include <string.h>

#include "data/dict.h"
#include "fuzz/fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int ctl = data[0];
    int space = ctl & 1, max_len = (ctl >> 2) + 1;
    size_t dict_size;
    const uint8_t *text;
    size_t text_size;
    fuzz_split(data + 1, size - 1, 0, &dict_size, &text, &text_size);
    const char *name = ctl & 2 ? "fuzz/arabic_dict.txt" : "fuzz/dict.txt";

    OcrDict d;
    ocr_status_t st = ocr_dict_from_buffer(&d, (const char *)data + 1, dict_size, name, space);
    if (st != OCR_OK) {
        OCR_ASSERT(strstr(ocr_last_error(), name), "error without the file name: %s", ocr_last_error());
        return 0;
    }
    OCR_ASSERT(d.num_classes >= 2 && strcmp(d.classes[0], "blank") == 0, "%d classes", d.num_classes);
    OCR_ASSERT(d.reverse == !!(ctl & 2), "reverse %d for %s", d.reverse, name);
    for (int i = 1; i < d.num_classes; i++) {
        int k = ocr_dict_lookup_utf8(&d, d.classes[i]);
        OCR_ASSERT(k == -1 || (k >= 1 && k < d.num_classes && strcmp(d.classes[k], d.classes[i]) == 0),
                   "class %d (%s) looks up to %d", i, d.classes[i], k);
    }
    if (text) {
        int32_t *out = malloc(sizeof(int32_t) * (size_t)max_len);
        int out_len = -1;
        OcrCharCounter unknown;
        ocr_char_counter_init(&unknown);
        ocr_label_result_t r = ocr_dict_encode(&d, (const char *)text, text_size, max_len, out, &out_len, &unknown);
        OCR_ASSERT(ocr_label_result_name(r) != NULL, "result %d", (int)r);
        if (r == OCR_LABEL_OK) {
            OCR_ASSERT(out_len >= 1 && out_len <= max_len, "label length %d of %d", out_len, max_len);
            for (int i = 0; i < max_len; i++)
                OCR_ASSERT(i < out_len ? out[i] >= 1 && out[i] < d.num_classes : out[i] == 0, "index %d is %d", i,
                           out[i]);
        } else if (r != OCR_LABEL_NO_KNOWN_CHARS) {
            OCR_ASSERT(unknown.total == 0, "%lld unknown characters counted for a %s text",
                       (long long)unknown.total, ocr_label_result_name(r));
        }
        size_t n = 0;
        free(ocr_char_counter_sorted(&unknown, &n));
        OCR_ASSERT(n == unknown.distinct, "%zu sorted of %zu distinct", n, unknown.distinct);
        ocr_char_counter_free(&unknown);
        free(out);
    }
    ocr_dict_free(&d);
    return 0;
}

// Dictionaries (PaddleOCR semantics), CTCLabelEncode, the character counter, UTF-8.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/dict.h"
#include "data/utf8.h"
#include "tests/common/test_util.h"

// en_dict.txt as PaddleOCR ships it: printable ASCII in the order digits, :;<=>?@, A-Z,
// [\]^_`, a-z, {|}~!"#$%&'()*+,-./ and a space line last (95 lines).
static char *make_en_dict(size_t *size) {
    const size_t cap = 512;
    char *buf = malloc(cap);
    size_t n = 0;
    const char *ranges[] = {"09", ":@", "AZ", "[`", "az", "{~", "!/", "  "};
    for (int r = 0; r < 8; r++)
        for (int c = ranges[r][0]; c <= ranges[r][1] && n + 2 <= cap; c++) buf[n++] = (char)c, buf[n++] = '\n';
    *size = n;
    return buf;
}

static void check_en_dict(const OcrDict *d) {
    ck_assert_int_eq(d->num_classes, 97);  // blank + 95 lines + use_space_char
    ck_assert_str_eq(d->classes[0], "blank");
    ck_assert_str_eq(d->classes[1], "0");
    ck_assert_str_eq(d->classes[95], " ");
    ck_assert_str_eq(d->classes[96], " ");
    ck_assert_int_eq(ocr_dict_lookup(d, ' '), 96);  // the last occurrence wins
    ck_assert_int_eq(ocr_dict_lookup(d, '0'), 1);
    ck_assert_int_eq(ocr_dict_lookup(d, 'A'), 18);
    ck_assert_int_eq(ocr_dict_lookup(d, 'a'), 18 + 26 + 6);
    ck_assert_int_eq(ocr_dict_lookup(d, 0x4E2D), -1);
    ck_assert_int_eq(d->lower, 0);
    ck_assert_int_eq(d->num_unmatchable, 0);
}

START_TEST(test_en_dict_semantics) {
    size_t size;
    char *buf = make_en_dict(&size);
    OcrDict d;
    ck_assert_int_eq(ocr_dict_from_buffer(&d, buf, size, "en_dict.txt", 1), OCR_OK);
    check_en_dict(&d);
    ocr_dict_free(&d);
    // Without use_space_char the space line still gives " " (index 95).
    ck_assert_int_eq(ocr_dict_from_buffer(&d, buf, size, "en_dict.txt", 0), OCR_OK);
    ck_assert_int_eq(d.num_classes, 96);
    ck_assert_int_eq(ocr_dict_lookup(&d, ' '), 95);
    ocr_dict_free(&d);
    free(buf);
}
END_TEST

START_TEST(test_shared_dicts) {
    char path[1024];
    if (!ocr_test_shared_path("models/dicts/en_dict.txt", path, sizeof path)) return;
    OcrDict d;
    ck_assert_msg(ocr_dict_load(&d, path, 1) == OCR_OK, "%s", ocr_last_error());
    check_en_dict(&d);
    ocr_dict_free(&d);
    if (!ocr_test_shared_path("models/dicts/ppocr_keys_v1.txt", path, sizeof path)) return;
    ck_assert_msg(ocr_dict_load(&d, path, 1) == OCR_OK, "%s", ocr_last_error());
    ck_assert_int_eq(d.num_classes, 6625);  // PP-OCR ch: 6623 lines (last without '\n') + blank + space
    ck_assert_str_eq(d.classes[1], "'");
    ck_assert_int_eq(ocr_dict_lookup_utf8(&d, "疗"), 2);
    ck_assert_int_eq(ocr_dict_lookup(&d, ' '), 6624);
    ck_assert_int_eq(d.num_unmatchable, 0);
    ocr_dict_free(&d);
}
END_TEST

START_TEST(test_line_handling) {
    // BOM, CRLF, a lone "\r\n" line (→ ""), a single-space line, a two-code-point line,
    // a duplicate, a final line without '\n'.
    const char data[] = "\xEF\xBB\xBF" "a\r\n \r\n\r\nb\nxy\na\n中";
    OcrDict d;
    ck_assert_int_eq(ocr_dict_from_buffer(&d, data, sizeof data - 1, "d.txt", 0), OCR_OK);
    ck_assert_int_eq(d.num_classes, 8);
    const char *want[8] = {"blank", "a", " ", "", "b", "xy", "a", "中"};
    for (int i = 0; i < 8; i++) ck_assert_str_eq(d.classes[i], want[i]);
    ck_assert_int_eq(ocr_dict_lookup(&d, 'a'), 6);  // last occurrence
    ck_assert_int_eq(ocr_dict_lookup(&d, ' '), 2);
    ck_assert_int_eq(ocr_dict_lookup_utf8(&d, "中"), 7);
    ck_assert_int_eq(ocr_dict_lookup_utf8(&d, "xy"), -1);
    ck_assert_int_eq(ocr_dict_lookup(&d, 'x'), -1);
    ck_assert_int_eq(d.num_unmatchable, 2);  // "" and "xy"
    ck_assert_int_eq(d.reverse, 0);
    ocr_dict_free(&d);

    // Arabic dictionaries are flagged for reversed decoding (by path, as PaddleOCR).
    ck_assert_int_eq(ocr_dict_from_buffer(&d, "x\n", 2, "dicts/arabic_dict.txt", 0), OCR_OK);
    ck_assert_int_eq(d.reverse, 1);
    ocr_dict_free(&d);
}
END_TEST

START_TEST(test_errors) {
    OcrDict d;
    // Invalid UTF-8 on line 3, named with file and line.
    const char bad[] = "a\nb\n\xC3\x28\n";
    ck_assert_int_eq(ocr_dict_from_buffer(&d, bad, sizeof bad - 1, "bad.txt", 1), OCR_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "bad.txt:3"));
    ck_assert_ptr_null(d.classes);
    const char nul[] = "a\nb\0c\n";
    ck_assert_int_eq(ocr_dict_from_buffer(&d, nul, sizeof nul - 1, "nul.txt", 1), OCR_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "nul.txt:2"));
    ck_assert_int_eq(ocr_dict_from_buffer(&d, "", 0, "empty.txt", 1), OCR_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "empty.txt"));
    ck_assert_int_eq(ocr_dict_from_buffer(&d, "\xEF\xBB\xBF", 3, "bom.txt", 1), OCR_ERR_FORMAT);
    ck_assert_int_eq(ocr_dict_load(&d, "/nonexistent/dict.txt", 1), OCR_ERR_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "/nonexistent/dict.txt"));
}
END_TEST

START_TEST(test_default_charset) {
    OcrDict d;
    ck_assert_int_eq(ocr_dict_load(&d, NULL, 1), OCR_OK);  // use_space_char ignored without a file
    ck_assert_int_eq(d.num_classes, 37);
    ck_assert_int_eq(d.lower, 1);
    ck_assert_str_eq(d.classes[1], "0");
    ck_assert_str_eq(d.classes[36], "z");
    int32_t out[25];
    int n;
    OcrCharCounter unk;
    ocr_char_counter_init(&unk);
    ck_assert_int_eq(ocr_dict_encode(&d, "Ab-9 Z", 6, 25, out, &n, &unk), OCR_LABEL_OK);
    ck_assert_int_eq(n, 4);
    ck_assert_int_eq(out[0], 11);  // a
    ck_assert_int_eq(out[1], 12);  // b
    ck_assert_int_eq(out[2], 10);  // 9
    ck_assert_int_eq(out[3], 36);  // z
    ck_assert_int_eq(out[4], 0);
    ck_assert_int_eq(ocr_char_counter_get(&unk, '-'), 1);
    ck_assert_int_eq(ocr_char_counter_get(&unk, ' '), 1);
    ck_assert_int_eq(unk.total, 2);
    ocr_char_counter_free(&unk);
    ocr_dict_free(&d);
    ck_assert_int_eq(ocr_dict_load(&d, "", 0), OCR_OK);
    ck_assert_int_eq(d.num_classes, 37);
    ocr_dict_free(&d);
}
END_TEST

START_TEST(test_encode_rules) {
    const char data[] = "a\nb\n中\n文\n";
    OcrDict d;
    ck_assert_int_eq(ocr_dict_from_buffer(&d, data, sizeof data - 1, "d.txt", 1), OCR_OK);
    int32_t out[8];
    int n = -1;
    OcrCharCounter unk;
    ocr_char_counter_init(&unk);
    // Unknown characters are dropped and counted; the label is zero-padded.
    const char *t = "a中x文xb ";
    ck_assert_int_eq(ocr_dict_encode(&d, t, strlen(t), 8, out, &n, &unk), OCR_LABEL_OK);
    ck_assert_int_eq(n, 5);
    int32_t want[8] = {1, 3, 4, 2, 5, 0, 0, 0};
    for (int i = 0; i < 8; i++) ck_assert_int_eq(out[i], want[i]);
    ck_assert_int_eq(ocr_char_counter_get(&unk, 'x'), 2);
    // No lower-casing with a dictionary file.
    ck_assert_int_eq(ocr_dict_encode(&d, "A", 1, 8, out, &n, &unk), OCR_LABEL_NO_KNOWN_CHARS);
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(ocr_char_counter_get(&unk, 'A'), 1);
    // The length limit is in code points of the raw text, before filtering: 8 Chinese
    // characters (24 bytes) fit in 8; 9 characters do not, even if some are unknown.
    const char *eight = "中文中文中文中文";
    ck_assert_int_eq(ocr_dict_encode(&d, eight, strlen(eight), 8, out, &n, NULL), OCR_LABEL_OK);
    ck_assert_int_eq(n, 8);
    ck_assert_int_eq(ocr_dict_encode(&d, "axxxxxxxx", 9, 8, out, &n, &unk), OCR_LABEL_TOO_LONG);
    ck_assert_int_eq(ocr_char_counter_get(&unk, 'x'), 2);  // not counted for rejected lengths
    ck_assert_int_eq(ocr_dict_encode(&d, "", 0, 8, out, &n, &unk), OCR_LABEL_EMPTY);
    ck_assert_int_eq(ocr_dict_encode(&d, "a\xFF", 2, 8, out, &n, &unk), OCR_LABEL_BAD_UTF8);
    ck_assert_str_eq(ocr_label_result_name(OCR_LABEL_TOO_LONG), "too_long");
    ck_assert_str_eq(ocr_label_result_name(OCR_LABEL_NO_KNOWN_CHARS), "no_known_chars");
    // The space appended by use_space_char encodes.
    ck_assert_int_eq(ocr_dict_encode(&d, " ", 1, 8, out, &n, NULL), OCR_LABEL_OK);
    ck_assert_int_eq(out[0], 5);
    ocr_char_counter_free(&unk);
    ocr_dict_free(&d);
}
END_TEST

START_TEST(test_char_counter) {
    OcrCharCounter a, b;
    ocr_char_counter_init(&a);
    ocr_char_counter_init(&b);
    // Enough distinct code points to force several rehashes.
    for (uint32_t cp = 0x4E00; cp < 0x4E00 + 1000; cp++)
        ck_assert_int_eq(ocr_char_counter_add(&a, cp, (int64_t)(cp % 7) + 1), OCR_OK);
    ck_assert_int_eq(a.distinct, 1000);
    ck_assert_int_eq(ocr_char_counter_add(&b, 0x4E00, 100), OCR_OK);
    ck_assert_int_eq(ocr_char_counter_add(&b, 'q', 3), OCR_OK);
    ck_assert_int_eq(ocr_char_counter_merge(&a, &b), OCR_OK);
    ck_assert_int_eq(a.distinct, 1001);
    ck_assert_int_eq(ocr_char_counter_get(&a, 0x4E00), 100 + (0x4E00 % 7) + 1);
    ck_assert_int_eq(ocr_char_counter_get(&a, 'q'), 3);
    ck_assert_int_eq(ocr_char_counter_get(&a, 'z'), 0);
    size_t n;
    OcrCharCount *sorted = ocr_char_counter_sorted(&a, &n);
    ck_assert_int_eq(n, 1001);
    ck_assert_int_eq(sorted[0].codepoint, 0x4E00);
    int64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        total += sorted[i].count;
        if (i) ck_assert(sorted[i - 1].count > sorted[i].count ||
                         (sorted[i - 1].count == sorted[i].count && sorted[i - 1].codepoint < sorted[i].codepoint));
    }
    ck_assert_int_eq(total, a.total);
    free(sorted);
    ocr_char_counter_free(&a);
    ocr_char_counter_free(&b);
    ck_assert_ptr_null(ocr_char_counter_sorted(&a, &n));
    ck_assert_int_eq(n, 0);
}
END_TEST

START_TEST(test_utf8) {
    uint32_t cp;
    ck_assert_int_eq(ocr_utf8_decode("A", 1, &cp), 1);
    ck_assert_int_eq(cp, 'A');
    ck_assert_int_eq(ocr_utf8_decode("\xC3\xA9", 2, &cp), 2);
    ck_assert_int_eq(cp, 0xE9);
    ck_assert_int_eq(ocr_utf8_decode("\xE4\xB8\xAD", 3, &cp), 3);
    ck_assert_int_eq(cp, 0x4E2D);
    ck_assert_int_eq(ocr_utf8_decode("\xF0\x9F\x98\x80", 4, &cp), 4);
    ck_assert_int_eq(cp, 0x1F600);
    ck_assert_int_eq(ocr_utf8_decode("\xF4\x8F\xBF\xBF", 4, &cp), 4);  // U+10FFFF
    const char *invalid[] = {"\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xED\xA0\x80", "\xF0\x80\x80\x80",
                             "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\x80", "\xBF", "\xC3", "\xE4\xB8", "\xC3\x28",
                             "\xFF"};
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        ck_assert_msg(ocr_utf8_decode(invalid[i], strlen(invalid[i]), &cp) == 0, "case %zu accepted", i);
        ck_assert(!ocr_utf8_valid(invalid[i], strlen(invalid[i]), NULL));
    }
    size_t bad;
    ck_assert(!ocr_utf8_valid("ab\xE4\xB8", 4, &bad));
    ck_assert_int_eq(bad, 2);
    ck_assert(ocr_utf8_valid("a中😀", strlen("a中😀"), NULL));
    ck_assert_int_eq(ocr_utf8_length("a中😀", strlen("a中😀")), 3);
    // Encode round trip over a spread of code points.
    int mismatches = 0;
    for (uint32_t c = 1; c <= 0x10FFFF; c += 97) {
        char b[4];
        int k = ocr_utf8_encode(c, b);
        if (c >= 0xD800 && c <= 0xDFFF) {
            mismatches += k != 0;
            continue;
        }
        uint32_t back;
        mismatches += k == 0 || ocr_utf8_decode(b, (size_t)k, &back) != k || back != c;
    }
    ck_assert_int_eq(mismatches, 0);
    char b[4];
    ck_assert_int_eq(ocr_utf8_encode(0x110000, b), 0);
}
END_TEST

int main(void) {
    setenv("OCR_SHARED_DIR", OCR_SHARED_DIR, 0);  // test_util.c is built without the macro
    Suite *s = suite_create("data_dict");
    TCase *tc = tcase_create("dict");
    tcase_add_test(tc, test_en_dict_semantics);
    tcase_add_test(tc, test_shared_dicts);
    tcase_add_test(tc, test_line_handling);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_default_charset);
    tcase_add_test(tc, test_encode_rules);
    tcase_add_test(tc, test_char_counter);
    tcase_add_test(tc, test_utf8);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

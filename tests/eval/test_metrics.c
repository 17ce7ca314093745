// Recognition metrics (PaddleOCR RecMetric semantics over code points) and the UTF-8
// helpers, against hand-computed values.
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval/metrics.h"
#include "eval/utf8.h"
#include "tests/common/test_util.h"

static int64_t lev(const char *a, const char *b) {
    uint32_t ca[64], cb[64];
    size_t na = text_utf8_decode(ca, 64, a, strlen(a)), nb = text_utf8_decode(cb, 64, b, strlen(b));
    ck_assert(na <= 64 && nb <= 64);
    return ocr_levenshtein(ca, na, cb, nb);
}

START_TEST(test_utf8) {
    // "a中𝄞": 1 + 3 + 4 bytes, 3 code points.
    const char *s = "a\xe4\xb8\xad\xf0\x9d\x84\x9e";
    uint32_t cp[8];
    ck_assert_uint_eq(text_utf8_decode(cp, 8, s, strlen(s)), 3);
    ck_assert_uint_eq(cp[0], 'a');
    ck_assert_uint_eq(cp[1], 0x4E2D);
    ck_assert_uint_eq(cp[2], 0x1D11E);
    ck_assert_uint_eq(text_utf8_length(s), 3);
    ck_assert(text_utf8_valid(s, strlen(s)));
    char buf[16];
    size_t n = 0;
    for (int i = 0; i < 3; i++) n += (size_t)text_utf8_encode(buf + n, cp[i]);
    ck_assert_uint_eq(n, strlen(s));
    ck_assert(memcmp(buf, s, n) == 0);

    // Invalid bytes: each becomes one U+DC80+byte and encodes back to itself.
    const char *bad[] = {"\xff", "\xc0\xaf", "\xed\xa0\x80", "\xe4\xb8", "\x80", "\xf4\x90\x80\x80"};
    const size_t bad_cps[] = {1, 2, 3, 2, 1, 4};
    for (int i = 0; i < 6; i++) {
        ck_assert_msg(!text_utf8_valid(bad[i], strlen(bad[i])), "case %d accepted", i);
        size_t k = text_utf8_decode(cp, 8, bad[i], strlen(bad[i]));
        ck_assert_uint_eq(k, bad_cps[i]);
        n = 0;
        for (size_t j = 0; j < k; j++) {
            ck_assert(cp[j] >= 0xDC80 && cp[j] <= 0xDCFF);
            n += (size_t)text_utf8_encode(buf + n, cp[j]);
        }
        ck_assert(n == strlen(bad[i]) && memcmp(buf, bad[i], n) == 0);
    }
    // Decoding more than cap: the count is still exact.
    ck_assert_uint_eq(text_utf8_decode(cp, 1, "abc", 3), 3);
    ck_assert_uint_eq(cp[0], 'a');
    ck_assert_int_eq(text_utf8_encode(buf, 0xD800), 3);  // a lone surrogate becomes U+FFFD
    ck_assert(memcmp(buf, "\xef\xbf\xbd", 3) == 0);
}
END_TEST

START_TEST(test_levenshtein) {
    ck_assert_int_eq(lev("kitten", "sitting"), 3);
    ck_assert_int_eq(lev("", "abc"), 3);
    ck_assert_int_eq(lev("abc", ""), 3);
    ck_assert_int_eq(lev("", ""), 0);
    ck_assert_int_eq(lev("flaw", "lawn"), 2);
    // Code points, not bytes: one Chinese character is one edit (3 bytes).
    ck_assert_int_eq(lev("中文", "中"), 1);
    ck_assert_int_eq(lev("中文识别", "中文识列"), 1);
    ck_assert_int_eq(lev("你好世界", "世界你好"), 4);
    ck_assert_int_eq(lev("hello 世界", "hello世界"), 1);

    ck_assert(ocr_normalized_edit_distance("", "") == 0.0);
    ck_assert(ocr_normalized_edit_distance("", "ab") == 1.0);
    ck_assert(fabs(ocr_normalized_edit_distance("kitten", "sitting") - 3.0 / 7.0) < 1e-15);
    ck_assert(fabs(ocr_normalized_edit_distance("中文", "中") - 0.5) < 1e-15);

    // Long strings take the heap path: 300 × 'a' vs 300 × 'a' with every 10th a 'b'.
    uint32_t *a = malloc(sizeof(uint32_t) * 300), *b = malloc(sizeof(uint32_t) * 300);
    for (int i = 0; i < 300; i++) a[i] = 'a', b[i] = i % 10 == 0 ? 'b' : 'a';
    ck_assert_int_eq(ocr_levenshtein(a, 300, b, 300), 30);
    ck_assert_int_eq(ocr_levenshtein(a, 300, b, 280), 48);  // 28 substitutions + 20 insertions
    free(a);
    free(b);
}
END_TEST

START_TEST(test_rec_metric_defaults) {
    RecMetric m;
    rec_metric_init(&m, rec_metric_default_options());
    ck_assert_int_eq(m.opt.ignore_space, 1);
    ck_assert_int_eq(m.opt.is_filter, 0);
    // Spaces are ignored: these two are exact matches.
    ck_assert_int_eq(rec_metric_add(&m, "hello world", "helloworld"), OCR_OK);
    ck_assert_int_eq(rec_metric_add(&m, "中 文", "中文"), OCR_OK);
    // 1 substitution in 3 characters.
    ck_assert_int_eq(rec_metric_add(&m, "abc", "abd"), OCR_OK);
    // 识别 vs 识别率: 1 deletion of 3 (ref) characters; max length 3.
    ck_assert_int_eq(rec_metric_add(&m, "识别", "识别率"), OCR_OK);
    // Case matters without is_filter.
    ck_assert_int_eq(rec_metric_add(&m, "ABC", "abc"), OCR_OK);
    RecMetricResult r = rec_metric_get(&m);
    ck_assert_int_eq(r.count, 5);
    double n = 5 + 1e-5;
    ck_assert(fabs(r.acc - 2.0 / n) < 1e-12);
    ck_assert(fabs(r.norm_edit_dis - (1.0 - (1.0 / 3 + 1.0 / 3 + 1.0) / n)) < 1e-12);
    // CER: edits 0 + 0 + 1 + 1 + 3 over reference characters 10 + 2 + 3 + 3 + 3.
    ck_assert(fabs(r.cer - 5.0 / 21.0) < 1e-12);
    // Reading does not reset; reset does, keeping the options.
    ck_assert_int_eq(rec_metric_get(&m).count, 5);
    rec_metric_reset(&m);
    ck_assert_int_eq(rec_metric_get(&m).count, 0);
    ck_assert_int_eq(m.opt.ignore_space, 1);
    r = rec_metric_get(&m);
    ck_assert(r.acc == 0.0 && r.norm_edit_dis == 1.0 && r.cer == 0.0);
}
END_TEST

START_TEST(test_rec_metric_options) {
    // is_filter: only [0-9a-zA-Z], lower-cased. Chinese and punctuation vanish.
    RecMetric m;
    rec_metric_init(&m, (RecMetricOptions){.ignore_space = 1, .is_filter = 1});
    ck_assert_int_eq(rec_metric_add(&m, "Hello, World!", "helloworld"), OCR_OK);  // match
    ck_assert_int_eq(rec_metric_add(&m, "中文", "文字"), OCR_OK);                  // both empty: match, distance 0
    ck_assert_int_eq(rec_metric_add(&m, "A1-b2", "a1b3"), OCR_OK);                // a1b2 vs a1b3: 1/4
    RecMetricResult r = rec_metric_get(&m);
    double n = 3 + 1e-5;
    ck_assert(fabs(r.acc - 2.0 / n) < 1e-12);
    ck_assert(fabs(r.norm_edit_dis - (1.0 - 0.25 / n)) < 1e-12);
    ck_assert(fabs(r.cer - 1.0 / 14.0) < 1e-12);  // refs: helloworld (10) + "" + a1b3 (4)

    // ignore_space off: spaces are characters.
    rec_metric_init(&m, (RecMetricOptions){.ignore_space = 0, .is_filter = 0});
    ck_assert_int_eq(rec_metric_add(&m, "a b", "ab"), OCR_OK);
    ck_assert_int_eq(rec_metric_add(&m, "中 文", "中 文"), OCR_OK);
    r = rec_metric_get(&m);
    ck_assert(fabs(r.acc - 1.0 / (2 + 1e-5)) < 1e-12);
    ck_assert(fabs(r.norm_edit_dis - (1.0 - (1.0 / 3) / (2 + 1e-5))) < 1e-12);
    ck_assert(fabs(r.cer - 1.0 / 5.0) < 1e-12);

    // Only empty references: CER is the raw edit count.
    rec_metric_init(&m, rec_metric_default_options());
    ck_assert_int_eq(rec_metric_add(&m, "ab", ""), OCR_OK);
    ck_assert(rec_metric_get(&m).cer == 2.0);
    ck_assert(fabs(rec_metric_get(&m).norm_edit_dis - (1.0 - 1.0 / (1 + 1e-5))) < 1e-12);

    // Invalid UTF-8 bytes are characters too, compared exactly.
    rec_metric_init(&m, rec_metric_default_options());
    ck_assert_int_eq(rec_metric_add(&m, "\xff" "a", "\xff" "a"), OCR_OK);
    ck_assert_int_eq(rec_metric_add(&m, "\xff", "\xfe"), OCR_OK);
    r = rec_metric_get(&m);
    ck_assert_int_eq(m.correct, 1);
    ck_assert_int_eq(m.edits, 1);
}
END_TEST

static Suite *metrics_suite(void) {
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("metrics");
    tcase_add_test(tc, test_utf8);
    tcase_add_test(tc, test_levenshtein);
    tcase_add_test(tc, test_rec_metric_defaults);
    tcase_add_test(tc, test_rec_metric_options);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(metrics_suite()); }

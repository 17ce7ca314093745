// Error messages: set, wrap, quote the previous message, truncate, per thread.
#include <check.h>
#include <pthread.h>
#include <string.h>

#include "core/error.h"
#include "tests/common/test_util.h"

START_TEST(test_set_and_read) {
    ck_assert_int_eq(ocr_set_error(OCR_ERR_IO, "cannot open %s (%d)", "a.png", 2), OCR_ERR_IO);
    ck_assert_str_eq(ocr_last_error(), "cannot open a.png (2)");
    ocr_clear_error();
    ck_assert_str_eq(ocr_last_error(), "");
}
END_TEST

// A new message may quote the previous one (ocr_last_error() as an argument): the result is
// the quote, not whatever an overlapping format of a buffer into itself gives.
START_TEST(test_set_quoting_previous) {
    ocr_set_error(OCR_ERR_NOT_FOUND, "0 CUDA devices are usable");
    ck_assert_int_eq(ocr_set_error(OCR_ERR_CONFIG, "Global.device gpu: %s (use cpu)", ocr_last_error()),
                     OCR_ERR_CONFIG);
    ck_assert_str_eq(ocr_last_error(), "Global.device gpu: 0 CUDA devices are usable (use cpu)");
    ocr_set_error(OCR_ERR_IO, "x");
    ocr_set_error(OCR_ERR_IO, "%s%s%s", ocr_last_error(), ocr_last_error(), ocr_last_error());
    ck_assert_str_eq(ocr_last_error(), "xxx");
}
END_TEST

START_TEST(test_wrap) {
    ocr_set_error(OCR_ERR_FORMAT, "bad CRC");
    ck_assert_int_eq(ocr_wrap_error(OCR_ERR_FORMAT, "%s line %d", "labels.txt", 7), OCR_ERR_FORMAT);
    ck_assert_str_eq(ocr_last_error(), "labels.txt line 7: bad CRC");
    ocr_clear_error();
    ocr_wrap_error(OCR_ERR_IO, "only the prefix");
    ck_assert_str_eq(ocr_last_error(), "only the prefix");
}
END_TEST

START_TEST(test_long_message_truncated) {
    char big[5000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ocr_set_error(OCR_ERR_IO, "%s", big);
    size_t n = strlen(ocr_last_error());
    ck_assert(n > 1000 && n < sizeof big - 1);
    ocr_set_error(OCR_ERR_IO, "%s|%s", ocr_last_error(), "tail");  // quoting a full buffer
    ck_assert_uint_eq(strlen(ocr_last_error()), n);
}
END_TEST

static void *other_thread(void *arg) {
    (void)arg;
    ocr_set_error(OCR_ERR_OOM, "thread message");
    return NULL;
}

START_TEST(test_per_thread) {
    ocr_set_error(OCR_ERR_IO, "main message");
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, other_thread, NULL), 0);
    pthread_join(t, NULL);
    ck_assert_str_eq(ocr_last_error(), "main message");
}
END_TEST

static Suite *error_suite(void) {
    Suite *s = suite_create("error");
    TCase *tc = tcase_create("error");
    tcase_add_test(tc, test_set_and_read);
    tcase_add_test(tc, test_set_quoting_previous);
    tcase_add_test(tc, test_wrap);
    tcase_add_test(tc, test_long_message_truncated);
    tcase_add_test(tc, test_per_thread);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(error_suite()); }

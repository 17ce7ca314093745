// Unit tests for the ONNX reader bugs the fuzz campaigns found (docs/RELIABILITY.md,
// "Fuzzing"); the inputs themselves are replayed from fuzz/corpus/onnx/regress-*.
#include <string.h>

#include "models/onnx.h"
#include "tests/common/test_util.h"

// ModelProto { graph (7) { initializer (5) { dims (1) = 2^40, data_type (2) = FLOAT, name (8) = "w" } } }:
// 16 bytes whose dims ask for 4 TiB of floats and hold none. The reader allocated before it
// compared the data with the dims (malloc(4 GB) for dims 1e9); now the data is checked first.
START_TEST(test_tensor_dims_without_data_refused_before_allocating) {
    static const uint8_t model[] = {0x3a, 0x0e, 0x2a, 0x0c, 0x08, 0x80, 0x80, 0x80, 0x80, 0x80,
                                    0x20, 0x10, 0x01, 0x42, 0x01, 'w'};
    OcrOnnxModel *m = NULL;
    ck_assert_int_eq(ocr_onnx_parse(&m, model, sizeof model, "big.onnx"), OCR_ERR_FORMAT);
    const char *msg = ocr_last_error();
    ck_assert_msg(strstr(msg, "big.onnx") && strstr(msg, "0 values for dims holding 1099511627776"), "%s", msg);
    ck_assert_ptr_null(m);
}
END_TEST

// GraphProto.input (11) = ValueInfoProto { name (1) = "x", then field 1 again as a varint }:
// the wire-type error returned without freeing the name read first (LeakSanitizer, in the
// sanitizer build, fails this test if it leaks again).
START_TEST(test_value_info_wire_error_frees_the_name) {
    static const uint8_t model[] = {0x3a, 0x07, 0x5a, 0x05, 0x0a, 0x01, 'x', 0x08, 0x05};
    OcrOnnxModel *m = NULL;
    ck_assert_int_eq(ocr_onnx_parse(&m, model, sizeof model, "vi.onnx"), OCR_ERR_FORMAT);
    ck_assert_msg(strstr(ocr_last_error(), "ValueInfoProto.name"), "%s", ocr_last_error());
    ck_assert_ptr_null(m);
}
END_TEST

int main(void) {
    Suite *s = suite_create("models_fuzz_regressions");
    TCase *tc = tcase_create("onnx");
    tcase_add_test(tc, test_tensor_dims_without_data_refused_before_allocating);
    tcase_add_test(tc, test_value_info_wire_error_frees_the_name);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

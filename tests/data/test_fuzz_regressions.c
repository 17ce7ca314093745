// Unit tests for the parser bugs the fuzz campaigns found (docs/RELIABILITY.md, "Fuzzing");
// the crashing inputs themselves are replayed from fuzz/corpus/<harness>/regress-* by the
// fuzz_<harness> tests.
#include <stdlib.h>
#include <string.h>

#include "data/dataset.h"
#include "data/image.h"
#include "data/lmdb_dataset.h"
#include "tests/common/test_util.h"

// A small gray JPEG from our encoder: SOI, then JFIF APP0, DQT, SOF0, ...
static uint8_t *make_jpeg(size_t *size) {
    OcrImage img;
    ck_assert_int_eq(ocr_image_alloc(&img, 7, 5, 1), OCR_OK);
    for (int i = 0; i < 35; i++) img.pixels[i] = (uint8_t)(i * 7);
    uint8_t *jpg = NULL;
    ck_assert_int_eq(ocr_image_encode_jpeg(&img, 90, &jpg, size), OCR_OK);
    ocr_image_free(&img);
    ck_assert(jpg[0] == 0xFF && jpg[1] == 0xD8 && jpg[2] == 0xFF && jpg[3] == 0xE0);
    return jpg;
}

// jpg with `ins` inserted at offset `at`.
static uint8_t *insert(const uint8_t *jpg, size_t size, size_t at, const uint8_t *ins, size_t n) {
    uint8_t *b = malloc(size + n);
    memcpy(b, jpg, at);
    memcpy(b + at, ins, n);
    memcpy(b + at + n, jpg + at, size - at);
    return b;
}

// Between segments libjpeg skips bytes that are not a marker (with a warning the decoder
// tolerates), FF 00 pairs, and reads nothing more of a segment whose length is below 2. The
// header probe refused all three (fuzz_image: "probe says 0x0, decode 227x149").
START_TEST(test_probe_agrees_with_decoder_on_skipped_bytes) {
    size_t size;
    uint8_t *jpg = make_jpeg(&size);
    size_t app0_end = 4 + ((size_t)jpg[4] << 8 | jpg[5]);  // the marker after APP0
    static const uint8_t garbage[] = {0x01, 0x57, 0x00};
    static const uint8_t stuffed[] = {0xFF, 0x00};
    static const uint8_t short_app1[] = {0xFF, 0xE1, 0x00, 0x01};
    const struct {
        const uint8_t *bytes;
        size_t n;
        const char *what;
    } cases[] = {{garbage, sizeof garbage, "extraneous bytes"}, {stuffed, sizeof stuffed, "FF 00"},
                 {short_app1, sizeof short_app1, "APP1 of length 1"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint8_t *b = insert(jpg, size, app0_end, cases[c].bytes, cases[c].n);
        OcrImage img;
        ck_assert_msg(ocr_image_decode(&img, b, size + cases[c].n, OCR_CHANNELS_GRAY, "t.jpg") == OCR_OK,
                      "%s: %s", cases[c].what, ocr_last_error());
        int w = 0, h = 0;
        ck_assert_msg(ocr_image_probe(b, size + cases[c].n, "t.jpg", &w, &h) == OCR_OK, "%s: %s", cases[c].what,
                      ocr_last_error());
        ck_assert_int_eq(w, img.width);
        ck_assert_int_eq(h, img.height);
        ck_assert_int_eq(w, 7);
        ck_assert_int_eq(h, 5);
        ocr_image_free(&img);
        free(b);
    }
    free(jpg);
}
END_TEST

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

// A chunk whose length runs past the end of the file is a truncation; libpng 1.6.39 only warns
// about an ancillary chunk over its limit and then allocates the claimed length (1.2 GB for a
// 161-byte file). The decoder now refuses it before libpng sees it, naming the chunk.
START_TEST(test_png_chunk_longer_than_file_refused_up_front) {
    uint8_t b[8 + 25 + 12 + 16];
    memset(b, 0, sizeof b);
    memcpy(b, "\x89PNG\r\n\x1a\n", 8);
    put_be32(b + 8, 13);
    memcpy(b + 12, "IHDR", 4);
    put_be32(b + 16, 32), put_be32(b + 20, 32);
    b[24] = 8;  // 8-bit gray; the CRC is not checked before the chunk walk
    put_be32(b + 33, 0x49492A00u);
    memcpy(b + 37, "iTXt", 4);
    OcrImage img;
    ck_assert_int_eq(ocr_image_decode(&img, b, sizeof b, OCR_CHANNELS_BGR, "big.png"), OCR_ERR_FORMAT);
    const char *msg = ocr_last_error();
    ck_assert_msg(strstr(msg, "big.png") && strstr(msg, "truncated") && strstr(msg, "\"iTXt\"") &&
                      strstr(msg, "claims 1229531648 bytes"),
                  "%s", msg);
    ck_assert_ptr_null(img.pixels);

    // A valid file passes the walk (every PngSuite file is checked in data_png_suite too).
    OcrImage src;
    ck_assert_int_eq(ocr_image_alloc(&src, 3, 2, 3), OCR_OK);
    memset(src.pixels, 100, 18);
    uint8_t *png = NULL;
    size_t size = 0;
    ck_assert_int_eq(ocr_image_encode_png(&src, &png, &size), OCR_OK);
    ck_assert_int_eq(ocr_image_decode(&img, png, size, OCR_CHANNELS_RGB, "ok.png"), OCR_OK);
    ck_assert_int_eq(img.width, 3);
    ocr_image_free(&img);
    // ... and the same file cut inside its IDAT is refused by the walk, naming the chunk.
    ck_assert_int_eq(ocr_image_decode(&img, png, size - 20, OCR_CHANNELS_RGB, "cut.png"), OCR_ERR_FORMAT);
    ck_assert_msg(strstr(ocr_last_error(), "truncated"), "%s", ocr_last_error());
    free(png);
    ocr_image_free(&src);
}
END_TEST

// An LMDB "num-samples" of 2,000,000,000 in a 21-byte environment made ocr_dataset_open look
// up two billion absent label keys (minutes); a count above the records held is now refused.
START_TEST(test_lmdb_num_samples_above_records_refused) {
    OcrDict dict;
    ck_assert_int_eq(ocr_dict_from_buffer(&dict, "a\nb\n", 4, "d", 0), OCR_OK);
    const char *keys[] = {"num-samples", "label-000000001"};
    const char *counts[] = {"2000000000", "3", "2"};
    for (int c = 0; c < 3; c++) {
        const uint8_t *vals[] = {(const uint8_t *)counts[c], (const uint8_t *)"ab"};
        const size_t sizes[] = {strlen(counts[c]), 2};
        OcrLmdbTable t = {keys, vals, sizes, 2};
        OcrLmdbReader r = ocr_lmdb_table_reader(&t, "env");
        ck_assert_int_eq(r.records, 2);
        OcrDatasetOptions opt = {.lmdb = 1, .lmdb_readers = &r, .num_lmdb_readers = 1};
        OcrDataset ds;
        ocr_status_t st = ocr_dataset_open(&ds, &opt, &dict);
        if (c < 2) {
            ck_assert_int_eq(st, OCR_ERR_FORMAT);
            ck_assert_msg(strstr(ocr_last_error(), "env: num-samples is") && strstr(ocr_last_error(), "only 2 records"),
                          "%s", ocr_last_error());
        } else {  // as many samples as records: the absent label 2 is skipped and counted
            ck_assert_msg(st == OCR_OK, "%s", ocr_last_error());
            ck_assert_int_eq(ocr_dataset_size(&ds), 1);
            ck_assert_int_eq(ds.skipped.count[OCR_SKIP_EMPTY_LABEL], 1);
            ocr_dataset_close(&ds);
        }
    }
    ocr_dict_free(&dict);
}
END_TEST

int main(void) {
    Suite *s = suite_create("data_fuzz_regressions");
    TCase *tc = tcase_create("image");
    tcase_add_test(tc, test_probe_agrees_with_decoder_on_skipped_bytes);
    tcase_add_test(tc, test_png_chunk_longer_than_file_refused_up_front);
    tcase_add_test(tc, test_lmdb_num_samples_above_records_refused);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

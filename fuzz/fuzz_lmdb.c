// PaddleOCR LMDB datasets (data/lmdb_dataset.c and the LMDBDataSet path of data/dataset.c):
// the records of one environment, served by the in-memory table reader, opened as a dataset;
// then every sample's label and image (decoded from its record, as the loader does).
// liblmdb's own file format (data.mdb) is not fuzzed: it is Debian's library and reading it is
// mmap plus B-tree walking we do not implement; everything that interprets the records is ours.
//
// Input: one control byte (bits 0-4: max_text_length - 1), then records: a key length byte,
// the key, a 2-byte little-endian value length, the value; a record cut short ends the list.
// The keys that matter are "num-samples", "label-%09d" and "image-%09d".
// Checked: every sample of a dataset that opens has 1..max_text_length label indices that are
// real classes, its index (the "line") within num-samples, and an image that either decodes
// or is refused with a skip reason.
#include <stdlib.h>
#include <string.h>

#include "data/dataset.h"
#include "data/lmdb_dataset.h"
#include "fuzz/fuzz_util.h"

#define MAX_RECORDS 64

static OcrDict dict;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_quiet();
    static const char chars[] = "a\nb\nc\n0\n1\n \n\xe5\xad\x97\n";
    OCR_ASSERT(ocr_dict_from_buffer(&dict, chars, sizeof chars - 1, "fuzz-dict", 0) == OCR_OK, "%s", ocr_last_error());
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int max_len = (data[0] & 31) + 1;
    char *keys[MAX_RECORDS];
    const uint8_t *values[MAX_RECORDS];
    size_t sizes[MAX_RECORDS];
    int n = 0;
    size_t pos = 1;
    while (n < MAX_RECORDS && pos < size) {
        size_t kl = data[pos];
        if (kl > size - pos - 1 || size - pos - 1 - kl < 2) break;
        size_t vl = data[pos + 1 + kl] | (size_t)data[pos + 2 + kl] << 8;
        if (vl > size - pos - 3 - kl) break;
        keys[n] = malloc(kl + 1);
        memcpy(keys[n], data + pos + 1, kl);
        keys[n][kl] = '\0';
        values[n] = data + pos + 3 + kl;
        sizes[n] = vl;
        n++;
        pos += 3 + kl + vl;
    }
    OcrLmdbTable table = {(const char *const *)keys, values, sizes, n};
    OcrLmdbReader reader = ocr_lmdb_table_reader(&table, "fuzz-env");
    OcrDatasetOptions opt = {.max_text_length = max_len, .seed = 3, .lmdb = 1, .lmdb_readers = &reader,
                             .num_lmdb_readers = 1};
    OcrDataset ds;
    int64_t declared = -1;
    (void)ocr_lmdb_read_num_samples(&reader, &declared);
    if (ocr_dataset_open(&ds, &opt, &dict) == OCR_OK) {
        int64_t count = ocr_dataset_size(&ds);
        OCR_ASSERT(count >= 1 && count <= declared, "%lld samples of %lld declared", (long long)count,
                   (long long)declared);
        for (int64_t i = 0; i < count; i++) {
            OcrSample s;
            OCR_ASSERT(ocr_dataset_get(&ds, i, &s) == OCR_OK, "%s", ocr_last_error());
            OCR_ASSERT(s.label_len >= 1 && s.label_len <= max_len, "label length %d", s.label_len);
            for (int k = 0; k < s.label_len; k++)
                OCR_ASSERT(s.label[k] >= 1 && s.label[k] < dict.num_classes, "label index %d", s.label[k]);
            OCR_ASSERT(s.line >= 1 && s.line <= declared, "sample %lld of %lld", (long long)s.line, (long long)declared);
            OcrImage img;
            ocr_skip_reason_t why;
            if (ocr_dataset_load_image(&ds, i, OCR_CHANNELS_BGR, &img, &why) == OCR_OK) ocr_image_free(&img);
            else OCR_ASSERT(why < OCR_SKIP_REASON_COUNT, "image failure that is not a data problem: %s", ocr_last_error());
        }
        ocr_dataset_close(&ds);
    } else {
        OCR_ASSERT(strstr(ocr_last_error(), "fuzz-env") || strstr(ocr_last_error(), "LMDB"),
                   "message without the environment: %s", ocr_last_error());
    }
    for (int i = 0; i < n; i++) free(keys[i]);
    return 0;
}

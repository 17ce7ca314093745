// PaddleOCR label files (data/dataset.c): ocr_dataset_open on one label file, then every
// sample of two epochs. The file reaches the parser through a temporary file (the dataset
// only reads paths); no image is loaded.
//
// Input: one control byte, then the label file. Control bits 0-1: delimiter ("\t", " ",
// "||", "\t" again); bit 2: ratio 0.5 instead of 1 (subsets redrawn per epoch); bits 3-7:
// max_text_length - 1 (1..32). The dictionary is fixed: ASCII letters, digits, a space and
// a few multi-byte characters, so unknown-character counting is exercised.
// Checked: every sample has a non-empty path under data_dir, 1..max_text_length label
// indices that are real classes, a line number within the file, and the dataset's size is
// what the ratio promises of its valid lines.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataset.h"
#include "fuzz/fuzz_util.h"

static OcrDict dict;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_quiet();
    static const char chars[] = "a\nb\nc\nx\ny\nz\nA\nB\n0\n1\n2\n9\n.\n-\n \n\xc3\xa9\n\xe5\xad\x97\n\xf0\x9f\x98\x80\n";
    OCR_ASSERT(ocr_dict_from_buffer(&dict, chars, sizeof chars - 1, "fuzz-dict", 1) == OCR_OK, "%s", ocr_last_error());
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int ctl = data[0];
    static const char *const delims[4] = {"\t", " ", "||", "\t"};
    const char *path = fuzz_temp_file("labels.txt", data + 1, size - 1);
    const char *files[1] = {path};
    double ratio = 0.5;
    OcrDatasetOptions opt = {.data_dir = "data/dir",
                             .label_files = files,
                             .num_label_files = 1,
                             .ratios = ctl & 4 ? &ratio : NULL,
                             .num_ratios = ctl & 4 ? 1 : 0,
                             .delimiter = delims[ctl & 3],
                             .max_text_length = (ctl >> 3) + 1,
                             .seed = 7};
    OcrDataset ds;
    ocr_status_t st = ocr_dataset_open(&ds, &opt, &dict);
    if (st != OCR_OK) {
        OCR_ASSERT(st == OCR_ERR_FORMAT && strstr(ocr_last_error(), path), "status %d: %s", (int)st, ocr_last_error());
        return 0;
    }
    int64_t valid = ocr_dataset_num_valid(&ds);
    OCR_ASSERT(valid >= 1 && valid <= ds.notes.lines, "%lld valid of %lld lines", (long long)valid,
               (long long)ds.notes.lines);
    for (uint64_t epoch = 0; epoch < 2; epoch++) {
        ocr_dataset_set_epoch(&ds, epoch);
        int64_t n = ocr_dataset_size(&ds);
        // ratio r of n valid lines: round_half_even(r·n).
        int64_t want = ctl & 4 ? (int64_t)rint(ratio * (double)valid) : valid;
        OCR_ASSERT(n == want, "epoch %llu: %lld samples, expected %lld",
                   (unsigned long long)epoch, (long long)n, (long long)want);
        for (int64_t i = 0; i < n; i++) {
            OcrSample s;
            OCR_ASSERT(ocr_dataset_get(&ds, i, &s) == OCR_OK, "%s", ocr_last_error());
            OCR_ASSERT(s.path && (strncmp(s.path, "data/dir/", 9) == 0 || s.path[0] == '/'),
                       "path %s", s.path ? s.path : "(null)");
            OCR_ASSERT(s.label_len >= 1 && s.label_len <= opt.max_text_length, "label length %d", s.label_len);
            for (int k = 0; k < s.label_len; k++)
                OCR_ASSERT(s.label[k] >= 1 && s.label[k] < dict.num_classes, "label index %d", s.label[k]);
            OCR_ASSERT(s.line >= 1 && s.line <= ds.notes.lines, "line %lld of %lld", (long long)s.line,
                       (long long)ds.notes.lines);
            OCR_ASSERT(strlen(s.text) >= 1, "empty text");
        }
    }
    ocr_dataset_close(&ds);
    return 0;
}

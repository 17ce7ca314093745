// PaddleOCR SimpleDataSet label files (ppocr/data/simple_dataset.py) and the per-reason
// accounting of everything that gets skipped.
//
// Label files hold `image_path<delimiter>label` lines (UTF-8, delimiter "\t" by default).
// What happens to each kind of line (PaddleOCR's behaviour where it is sensible; the
// differences are marked):
// - A UTF-8 BOM at the start of a file is removed (noted, not an error).
// - Lines end at '\n'; trailing '\r' characters are removed (CRLF files; noted). PaddleOCR
//   keeps the '\r' in the label, where it counts toward max_text_length and is then dropped
//   as an unknown character.
// - Empty lines are skipped silently (counted in notes.empty_lines). PaddleOCR fails on
//   them at load time and resamples.
// - No delimiter → skipped, OCR_SKIP_NO_DELIMITER. Invalid UTF-8 or a NUL byte anywhere
//   in the line → OCR_SKIP_BAD_UTF8.
// - More than one delimiter: the label is the second field only, as PaddleOCR's
//   `split(delimiter)[1]` (noted with an example: usually a tab inside the text).
// - The label is kept byte for byte otherwise: leading/trailing spaces stay, as in
//   PaddleOCR, and become space classes when the dictionary has " " (noted with an
//   example, since trailing spaces are usually accidental).
// - The path is joined to data_dir like os.path.join (an absolute path is kept as is). A
//   path starting with '[' that parses as a JSON list of strings is a list of alternatives,
//   one picked per (seed, epoch, sample); an empty list, a list with a non-string or empty
//   entry, or an empty path → OCR_SKIP_BAD_PATH. A '[' path that is not valid JSON is a
//   literal file name (PaddleOCR's `_try_parse_filename_list`).
// - CTCLabelEncode (dict.h): empty label, more than max_text_length code points, or nothing
//   left after dropping unknown characters → OCR_SKIP_EMPTY_LABEL / LABEL_TOO_LONG /
//   NO_KNOWN_CHARS. Dropped characters are counted in unknown_chars.
// - ratio_list: a file with ratio r < 1 contributes round_half_even(r·n) of its n valid
//   samples, re-drawn for every epoch from (seed, epoch) (PaddleOCR re-draws from its raw
//   lines with seed = epoch; we draw from the valid ones, so r is the fraction of usable
//   samples). Ratios must be in (0, 1]; one ratio applies to every file.
// Image problems are found when a sample is loaded (ocr_dataset_load_image) and classified
// into the OCR_SKIP_IMAGE_* reasons.
//
// LMDBDataSet (OcrDatasetOptions.lmdb, data/lmdb_dataset.h): the "files" are the LMDB
// environments found under data_dir (label_files[f] is the environment's directory), each
// sample's "line" is its 1-based index i, and its label is the record label-%09d, encoded
// with the same rules and skip reasons as a label line (invalid UTF-8 or a NUL byte: bad_utf8;
// a missing label record: empty_label). Images are the records image-%09d, decoded when loaded
// (missing: image_missing; undecodable: image_corrupt / image_unsupported). PaddleOCR resamples
// at random where we skip and count. ratio_list does not subsample LMDB datasets (PaddleOCR's
// LMDBDataSet only reads it to set need_reset).
//
// After ocr_dataset_open the dataset is read-only except for ocr_dataset_set_epoch, so
// loader threads may call ocr_dataset_get / ocr_dataset_load_image concurrently.
#ifndef OCR_DATA_DATASET_H
#define OCR_DATA_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/dict.h"
#include "data/image.h"
#include "data/lmdb_dataset.h"

typedef enum {
    OCR_SKIP_NO_DELIMITER = 0,   // label line without the delimiter
    OCR_SKIP_BAD_UTF8,           // label line that is not valid UTF-8 (or holds a NUL byte)
    OCR_SKIP_BAD_PATH,           // empty image path, or a bad JSON list of paths
    OCR_SKIP_EMPTY_LABEL,        // nothing after the delimiter
    OCR_SKIP_LABEL_TOO_LONG,     // more than max_text_length characters
    OCR_SKIP_NO_KNOWN_CHARS,     // no character of the label is in the dictionary
    OCR_SKIP_IMAGE_MISSING,      // the image file does not exist
    OCR_SKIP_IMAGE_UNREADABLE,   // it exists but cannot be read (permissions, IO error)
    OCR_SKIP_IMAGE_CORRUPT,      // truncated, corrupt, or not an image
    OCR_SKIP_IMAGE_UNSUPPORTED,  // a valid file we do not decode (12-bit JPEG, BMP, too large)
    OCR_SKIP_REASON_COUNT
} ocr_skip_reason_t;

// Stable snake_case keys for reports and JSON: "no_delimiter", "bad_utf8", ...
const char *ocr_skip_reason_name(ocr_skip_reason_t reason);
// Maps an image load/decode status to its skip reason. Returns 0 for statuses that are
// not problems with the data (OOM, invalid argument, internal): those should stop a run.
int ocr_skip_reason_for_image_status(ocr_status_t status, ocr_skip_reason_t *reason);

#define OCR_SKIP_EXAMPLE_MAX 400

// Per-reason counts with the first example of each ("file:line: what"). Not thread-safe:
// one per thread, then merge.
typedef struct {
    int64_t count[OCR_SKIP_REASON_COUNT];
    char example[OCR_SKIP_REASON_COUNT][OCR_SKIP_EXAMPLE_MAX];
} OcrSkipStats;

void ocr_skip_stats_add(OcrSkipStats *stats, ocr_skip_reason_t reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void ocr_skip_stats_merge(OcrSkipStats *dst, const OcrSkipStats *src);
int64_t ocr_skip_stats_total(const OcrSkipStats *stats);
// One ocr_log warning per reason that occurred: "<what>: skipped 3 (no_delimiter), e.g. ...".
void ocr_skip_stats_log(const OcrSkipStats *stats, const char *what);

// Things about the label files worth telling the user that are not rejections.
typedef struct {
    int64_t files;                  // label files read
    int64_t lines;                  // lines read, empty ones included
    int64_t empty_lines;            // skipped silently
    int64_t bom_files;              // files that started with a UTF-8 BOM (removed)
    int64_t crlf_lines;             // lines that ended in '\r' (removed)
    int64_t extra_field_lines;      // more than one delimiter (label = second field)
    int64_t trailing_space_labels;  // labels ending in ' ' (kept)
    char extra_field_example[OCR_SKIP_EXAMPLE_MAX];
    char trailing_space_example[OCR_SKIP_EXAMPLE_MAX];
} OcrLabelNotes;

typedef struct {
    const char *data_dir;             // NULL or "" → paths as written
    const char *const *label_files;   // at least one
    int num_label_files;
    const double *ratios;             // NULL → 1.0 for every file; 1 value → every file
    int num_ratios;                   // 0, 1 or num_label_files
    const char *delimiter;            // NULL → "\t"
    int max_text_length;              // 0 → 25
    // MultiLabelEncode (data/transforms.h label_max_len): a label that encodes to more
    // characters is rejected as too long, as PaddleOCR's SAR/NRTR encoders reject it. 0: none.
    int max_encoded_length;
    uint64_t seed;                    // subsets (ratio < 1) and JSON-list picks
    // LMDBDataSet: the environments under data_dir (label_files, ratios and delimiter unused),
    // or, when lmdb_readers is set, those readers (in-memory tables: tests, fuzzing; borrowed,
    // they must outlive the dataset).
    int lmdb;
    const OcrLmdbReader *lmdb_readers;
    int num_lmdb_readers;
} OcrDatasetOptions;

// One entry per valid label line (private layout).
typedef struct {
    int64_t path_off;   // num_paths NUL-terminated joined paths, back to back, in paths_
    int64_t text_off;   // NUL-terminated label text in texts_
    int64_t label_off;  // label_len class indices in labels_
    int64_t line;       // 1-based line number in its label file
    int32_t file;       // index into label_files
    int32_t num_paths;  // > 1 for a JSON list of alternatives
    int32_t label_len;
} OcrDatasetEntry_;

typedef struct {
    const OcrDict *dict;   // borrowed: must outlive the dataset
    int max_text_length;
    int max_encoded_length;  // 0: none (OcrDatasetOptions)
    uint64_t seed;
    uint64_t epoch;
    int num_files;
    char **label_files;    // copies
    double *ratios;        // per file
    // The accounting done by ocr_dataset_open (label files only; image problems are counted
    // by whoever loads images).
    OcrSkipStats skipped;
    OcrLabelNotes notes;
    OcrCharCounter unknown_chars;  // characters dropped because the dictionary lacks them
    // private
    OcrDatasetEntry_ *entries_;
    int64_t num_entries_;
    int64_t *file_first_;  // per file: first entry index, and (file_first_[f+1] - file_first_[f]) entries
    int32_t *active_;      // this epoch's entries, in file order
    int64_t num_active_;
    char *paths_, *texts_;
    int32_t *labels_;
    int lmdb_;                // an LMDBDataSet: num_files readers, no paths_
    OcrLmdbReader *readers_;  // per file
    OcrLmdbEnv **envs_;       // per file, when opened from data_dir (else NULL)
} OcrDataset;

// Reads and validates every label file. Fails (and frees everything) on a missing or
// unreadable label file (NOT_FOUND/IO naming it), bad options (CONFIG), OOM, or when no
// valid sample is left at all (FORMAT, with the skip counts in the message). Starts at epoch 0.
ocr_status_t ocr_dataset_open(OcrDataset *ds, const OcrDatasetOptions *opt, const OcrDict *dict);
void ocr_dataset_close(OcrDataset *ds);

// Re-draws the subsets of files with ratio < 1 and the JSON-list picks for `epoch`.
// Not concurrent with get/load (call it between epochs).
void ocr_dataset_set_epoch(OcrDataset *ds, uint64_t epoch);
// Samples in the current epoch.
int64_t ocr_dataset_size(const OcrDataset *ds);
// Valid label lines in all files (independent of ratios).
int64_t ocr_dataset_num_valid(const OcrDataset *ds);
// Samples of each file in the current epoch (sizes: num_files entries). The epoch's indices hold
// the files back to back, in order (the per-batch mix of data/sampler.h draws from them).
void ocr_dataset_file_sizes(const OcrDataset *ds, int64_t *sizes);

typedef struct {
    const char *path;        // the image path (data_dir joined; one pick of a JSON list); LMDB: its environment
    const char *text;        // the label text as written (minus a trailing '\r')
    const int32_t *label;    // class indices (unknown characters dropped)
    int label_len;           // 1..max_text_length
    const char *label_file;  // where the line is
    int64_t line;            // 1-based
} OcrSample;

// Sample `index` (0 <= index < ocr_dataset_size) of the current epoch. Pointers stay valid
// until ocr_dataset_close.
ocr_status_t ocr_dataset_get(const OcrDataset *ds, int64_t index, OcrSample *sample);
// Loads and decodes the image of sample `index`. On failure the message names the image
// and its label line, and *reason (may be NULL) is the skip reason, or
// OCR_SKIP_REASON_COUNT when the failure is not a data problem (OOM, bad index).
ocr_status_t ocr_dataset_load_image(const OcrDataset *ds, int64_t index, ocr_channel_order_t order, OcrImage *img,
                                    ocr_skip_reason_t *reason);
// The encoded image bytes of sample `index` (the file, or the LMDB record), malloc'd into
// *bytes; errors and *reason as ocr_dataset_load_image (ocrtrain pack --lmdb copies them).
ocr_status_t ocr_dataset_read_image_bytes(const OcrDataset *ds, int64_t index, uint8_t **bytes, size_t *size,
                                          ocr_skip_reason_t *reason);

#endif

// PaddleOCR's LMDBDataSet (ppocr/data/lmdb_dataset.py): the storage side.
//
// Layout of one environment (the common create_lmdb_dataset layout, MJ/ST data_lmdb_release):
//   "num-samples"      ASCII decimal count n
//   "label-%09d"       UTF-8 label of sample i, i = 1..n (1-based)
//   "image-%09d"       the encoded image file (PNG, JPEG) of sample i
// Discovery: os.walk(data_dir + "/"); every directory without sub-directories is one
// environment, opened read-only without a lock file (PaddleOCR: readonly=True, lock=False), so
// read-only datasets work. Directories are visited in sorted name order (os.walk's order is the
// file system's, i.e. unspecified); as in os.walk, symbolic links to directories count as
// sub-directories but are not descended into. A leaf directory that is not an LMDB environment,
// or one without a readable "num-samples", is an error naming it (PaddleOCR fails there too).
//
// The dataset (labels, skip-and-count, images) is data/dataset.h with OcrDatasetOptions.lmdb;
// it reads every environment through an OcrLmdbReader, so the record parsing also runs on
// in-memory tables (tests, fuzzing) without liblmdb or files.
#ifndef OCR_DATA_LMDB_DATASET_H
#define OCR_DATA_LMDB_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

// Where one environment's records come from.
typedef struct {
    // Copies the value of `key` into a malloc'd buffer (*value, *size; freed by the caller):
    // 1 found, 0 absent, -1 failure (message set). Must be callable from several threads.
    int (*get)(void *ctx, const char *key, uint8_t **value, size_t *size);
    void *ctx;
    const char *name;  // the environment (its directory), for messages
    // Records the environment holds (0: unknown). A num-samples above it is refused: every
    // sample has a label record, and a damaged count must not make the reader look up
    // billions of absent keys (found by fuzz/fuzz_lmdb.c: "num-samples" = 2000000000).
    int64_t records;
} OcrLmdbReader;

// The record key of sample `index` ("label" or "image"): "label-000000001". At least 32 bytes.
void ocr_lmdb_key(char *buf, size_t cap, const char *kind, int64_t index);

// The value of "num-samples" as Python's int(bytes) reads it: optional surrounding whitespace,
// an optional sign, decimal digits with single underscores between them. FORMAT naming `where`
// for anything else, a negative count, or more than 2^31 - 1 samples.
ocr_status_t ocr_lmdb_parse_num_samples(const uint8_t *value, size_t size, const char *where, int64_t *count);

// Reads "num-samples" through a reader (NOT_FOUND / FORMAT naming the environment).
ocr_status_t ocr_lmdb_read_num_samples(const OcrLmdbReader *r, int64_t *count);

// The environments under data_dir (see above), as allocated paths in walk order. NOT_FOUND when
// data_dir does not exist or holds no environment; IO on an unreadable directory.
ocr_status_t ocr_lmdb_find_envs(const char *data_dir, char ***dirs, int *count);
void ocr_lmdb_free_dirs(char **dirs, int count);

// One environment opened read-only (MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS | MDB_NORDAHEAD),
// every get in its own read transaction, so any number of loader threads may read at once.
typedef struct OcrLmdbEnv OcrLmdbEnv;
ocr_status_t ocr_lmdb_env_open(OcrLmdbEnv **out, const char *dir);
void ocr_lmdb_env_close(OcrLmdbEnv *env);
OcrLmdbReader ocr_lmdb_env_reader(OcrLmdbEnv *env);

// An in-memory environment: count records, keys sorted or not (borrowed; must outlive the reader).
typedef struct {
    const char *const *keys;
    const uint8_t *const *values;
    const size_t *sizes;
    int count;
} OcrLmdbTable;
OcrLmdbReader ocr_lmdb_table_reader(const OcrLmdbTable *table, const char *name);

// Writes an environment in the layout above (ocrtrain pack --lmdb): records go to DIR.tmp-PID,
// committed every 1,000 records, and the directory is renamed to DIR by finish, so a failed
// run leaves nothing at DIR. DIR must not exist yet (INVALID_ARG naming it otherwise).
typedef struct OcrLmdbWriter OcrLmdbWriter;
ocr_status_t ocr_lmdb_writer_open(OcrLmdbWriter **out, const char *dir);
ocr_status_t ocr_lmdb_writer_put(OcrLmdbWriter *w, const char *key, const void *value, size_t size);
// Commits, closes and renames; frees w in every case.
ocr_status_t ocr_lmdb_writer_finish(OcrLmdbWriter *w);
// Removes the temporary directory; frees w.
void ocr_lmdb_writer_abort(OcrLmdbWriter *w);

#endif

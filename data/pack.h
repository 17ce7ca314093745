// The packed cache: a dataset's images decoded once, resized to one height (aspect ratio
// kept, no padding) and stored as raw uint8 pixels with their label texts in one file,
// read through mmap. It plays the part of PaddleOCR's LMDB datasets: decoding every epoch
// costs more than the augmentation.
//
// Layout (little-endian; offsets from the file start):
//   header   128 bytes: magic "OCRPACK\0", version, height, channels, channel order,
//            counts, section offsets, the source fingerprint, the hashes of the text and
//            index sections, and its own hash (last 8 bytes)
//   pixels   record after record, width × height × channels bytes each
//   texts    the label file names (NUL-terminated, num_files of them), then every
//            record's label text (UTF-8, NUL-terminated)
//   index    40 bytes a record: pixel offset, text offset, pixel hash, width, text
//            length, label file, label line
// The header, the text section and the index are verified when the file is opened (a
// damaged one is refused as a whole); each record's pixels are verified when it is read
// (a damaged record is reported, and the loader skips it). Hashes are ocr_pack_hash64.
// Written through core/fileio.h's atomic writer, so a crash never leaves a torn file.
#ifndef OCR_DATA_PACK_H
#define OCR_DATA_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/dataset.h"
#include "data/image.h"

#define OCR_PACK_VERSION 1
#define OCR_PACK_HEADER_BYTES 128
#define OCR_PACK_INDEX_ENTRY_BYTES 40

// A 64-bit hash for corruption checks (not cryptographic), ~10 GB/s: four multiply-rotate
// lanes over 8-byte words, a byte tail and a final avalanche. Any change of one bit changes it.
uint64_t ocr_pack_hash64(const void *data, size_t size, uint64_t seed);

// What a pack is for: the height its images were normalised to, the channel order they
// were decoded in, and a fingerprint of the sources (see ocr_pack_source_hash; 0 = none).
typedef struct {
    int height;
    ocr_channel_order_t order;
    uint64_t source_hash;
} OcrPackSpec;

// Fingerprint of a dataset's sources: data_dir, then each label file's path and bytes.
// NOT_FOUND/IO when a label file cannot be read.
ocr_status_t ocr_pack_source_hash(const char *data_dir, const char *const *label_files, int num_files,
                                  uint64_t *out);

typedef struct {
    int64_t written;       // records in the file
    OcrSkipStats skipped;  // samples whose image could not be loaded
    int64_t pixel_bytes;
    double seconds;
} OcrPackWriteStats;

// Writes every sample of `ds` (its current epoch's samples: open it without ratios to
// get them all) to `path`: decoded in spec->order, resized to spec->height with width
// ceil(height·w/h) (cv2 INTER_LINEAR, as RecResizeImg), using `threads` threads. Samples
// whose image fails to load are skipped and counted (one warning each); OOM and IO
// errors fail. Nothing is written when no sample could be loaded (FORMAT).
ocr_status_t ocr_pack_write(const char *path, const OcrDataset *ds, const OcrPackSpec *spec, int threads,
                            OcrPackWriteStats *stats);

// Writes every sample of `ds` (its current epoch's samples) as a PaddleOCR LMDB dataset
// (data/lmdb_dataset.h) at `dir`, which must not exist: the image file bytes as they are
// (re-encoded never), the label text as written, indices 1..n in dataset order, num-samples.
// Images that do not decode are skipped and counted in stats->skipped, as create_lmdb_dataset
// does; pixel_bytes counts the encoded bytes written. Nothing is left at `dir` on failure.
ocr_status_t ocr_pack_write_lmdb(const char *dir, const OcrDataset *ds, OcrPackWriteStats *stats);

typedef struct {
    char *path;
    int height, channels;
    ocr_channel_order_t order;
    uint64_t source_hash;
    int64_t num_records;
    int num_files;
    const char **file_names;  // label files the records came from (for messages)
    // private
    const uint8_t *map_;
    size_t map_size_;
    const uint8_t *index_;
    const char *texts_;
    uint64_t text_bytes_;
} OcrPack;

// Maps and validates a pack: FORMAT with a message naming the file for a wrong magic, an
// unknown version, a damaged header, text section or index, or offsets outside the file;
// NOT_FOUND/IO when it cannot be opened.
ocr_status_t ocr_pack_open(OcrPack *pack, const char *path);
void ocr_pack_close(OcrPack *pack);
// Refuses (CONFIG, naming the pack, the section and the rebuild command) a pack built for
// another height, channel order or, when want->source_hash != 0, other label files.
ocr_status_t ocr_pack_check(const OcrPack *pack, const OcrPackSpec *want, const char *what);

typedef struct {
    int width, height, channels;
    const uint8_t *pixels;  // inside the mapping: valid until ocr_pack_close
    const char *text;       // NUL-terminated
    int text_bytes;
    int file;               // index into file_names
    int64_t line;
} OcrPackRecord;

// Record i's metadata (no pixel check): text, file, line, size.
void ocr_pack_record_info(const OcrPack *pack, int64_t i, OcrPackRecord *rec);
// Record i with its pixels verified: FORMAT ("pack.bin: record 12 (labels.txt:13) is
// damaged (checksum mismatch)") when they do not match their hash.
ocr_status_t ocr_pack_record(const OcrPack *pack, int64_t i, OcrPackRecord *rec);

#endif

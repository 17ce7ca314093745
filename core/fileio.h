// Files: atomic writes (temporary file, flush, fsync, rename) and whole-file reads.
#ifndef OCR_CORE_FILEIO_H
#define OCR_CORE_FILEIO_H

#include <stddef.h>
#include <stdio.h>

#include "core/error.h"

// An atomic write: everything goes to "<path>.tmp.<pid>", and commit renames it over
// <path> only after fflush + fsync, so a crash or kill never leaves a torn file.
typedef struct {
    FILE *fp;
    char *path;
    char *tmp_path;
} OcrAtomicFile;

ocr_status_t ocr_atomic_open(OcrAtomicFile *af, const char *path);
// Flushes, syncs, renames, syncs the directory. On failure the temporary is removed.
ocr_status_t ocr_atomic_commit(OcrAtomicFile *af);
// Drops the temporary; the target is left as it was.
void ocr_atomic_abort(OcrAtomicFile *af);
// Writes a whole buffer atomically.
ocr_status_t ocr_write_file_atomic(const char *path, const void *data, size_t size);

// Reads a whole file into a malloc'd buffer with a terminating NUL (not counted in *size).
ocr_status_t ocr_read_file(const char *path, char **data, size_t *size);
int ocr_file_exists(const char *path);
// mkdir -p.
ocr_status_t ocr_make_dirs(const char *path);

// Fault injection for the crash and full-disk tests (tests/training/test_crash.c). Both are read
// from the environment at each call and do nothing when unset, which is every normal run:
//   OCR_TEST_FAIL_WRITE=SUBSTR    an atomic write whose target path contains SUBSTR fails at
//                                 commit as a full disk does (ENOSPC), after its temporary file
//                                 was written: the caller's error path runs as it would for real.
//   OCR_TEST_WRITE_DELAY_MS=N     every atomic commit, and every call of ocr_test_write_pause,
//                                 sleeps N ms before its rename, widening the windows in which a
//                                 kill finds a half-written file or checkpoint directory.
// ocr_test_write_pause is the delay alone, for multi-file writers (checkpoints) to call between
// their own renames.
void ocr_test_write_pause(void);

#endif

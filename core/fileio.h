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

#endif

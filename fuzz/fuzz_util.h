// Shared helpers of the fuzz harnesses (fuzz/fuzz_<name>.c).
//
// Every harness defines LLVMFuzzerTestOneInput (and may define LLVMFuzzerInitialize). Built
// with -DOCR_FUZZ=ON (clang) it links libFuzzer; in the normal build it links fuzz/replay.c,
// which feeds every file of a corpus folder to it, so CI replays the committed corpus.
//
// Parsers that only read from a path get the input through one temporary file per process
// (created once, removed at exit): a rename-free rewrite per input is far cheaper than the
// parsers themselves, and the path stays the same so messages are comparable.
#ifndef OCR_FUZZ_UTIL_H
#define OCR_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

// Silences ocr_log (parsers warn about skipped lines; a fuzzer would print millions).
void fuzz_quiet(void);

// A private temporary directory ($TMPDIR or /tmp), created on first use and removed with
// everything fuzz_temp_file put in it when the process exits normally.
const char *fuzz_temp_dir(void);
// Writes data to <temp dir>/<name> (truncating it) and returns the full path. Aborts on IO
// errors: a harness that cannot write its input must not report the input as harmless.
const char *fuzz_temp_file(const char *name, const void *data, size_t size);

// Splits data at the first `sep` byte: *head_size bytes before it, *tail/*tail_size after
// (tail NULL when there is no separator).
void fuzz_split(const uint8_t *data, size_t size, uint8_t sep, size_t *head_size, const uint8_t **tail,
                size_t *tail_size);

#endif

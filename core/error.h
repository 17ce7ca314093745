// Errors, invariants and logging.
//
// Library code (everything below cli/) never prints to stdout and never exits on bad
// input: a function that can fail returns an ocr_status_t and records a message that the
// caller reads with ocr_last_error(). Broken internal invariants are programming errors:
// OCR_ASSERT aborts with the statement, file and line.
#ifndef OCR_CORE_ERROR_H
#define OCR_CORE_ERROR_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

typedef enum {
    OCR_OK = 0,
    OCR_ERR_INVALID_ARG,  // a caller passed something unusable
    OCR_ERR_IO,           // open/read/write/rename failed
    OCR_ERR_FORMAT,       // a file's contents are malformed
    OCR_ERR_OOM,          // an allocation failed
    OCR_ERR_CONFIG,       // a configuration key is missing, mistyped or out of range
    OCR_ERR_UNSUPPORTED,  // valid but not something we implement (e.g. 12-bit JPEG)
    OCR_ERR_NOT_FOUND,    // a named thing (file, key, tensor) does not exist
    OCR_ERR_CUDA,         // the CUDA runtime or a CUDA library failed
    OCR_ERR_INTERNAL,
} ocr_status_t;

const char *ocr_status_name(ocr_status_t status);

// Records a printf-style message for the calling thread and returns `status`, so that
// `return ocr_set_error(OCR_ERR_IO, "cannot open %s", path);` reads naturally.
ocr_status_t ocr_set_error(ocr_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
// Prepends context to the current message ("loading x.safetensors: <old message>").
ocr_status_t ocr_wrap_error(ocr_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
// The calling thread's last message ("" when none).
const char *ocr_last_error(void);
void ocr_clear_error(void);

// Evaluate a status-returning call; on failure return its status from the enclosing function.
#define OCR_TRY(stmt)                          \
    do {                                       \
        ocr_status_t ocr_try_status_ = (stmt); \
        if (ocr_try_status_ != OCR_OK) return ocr_try_status_; \
    } while (0)

void ocr_abort_(const char *expr, const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 4, 5)));

// Internal invariant: aborts with the failing expression, file, line and an optional message.
#define OCR_ASSERT(cond, ...)                                                   \
    do {                                                                        \
        if (!(cond)) ocr_abort_(#cond, __FILE__, __LINE__, " " __VA_ARGS__);     \
    } while (0)

// ---- logging (stderr) -------------------------------------------------------
typedef enum { OCR_LOG_DEBUG = 0, OCR_LOG_INFO, OCR_LOG_WARN, OCR_LOG_ERROR, OCR_LOG_QUIET } ocr_log_level_t;

// The level starts from the environment variable OCR_LOG_LEVEL (debug|info|warn|error|quiet),
// default info.
void ocr_log_set_level(ocr_log_level_t level);
ocr_log_level_t ocr_log_get_level(void);
int ocr_log_level_from_name(const char *name, ocr_log_level_t *out);
void ocr_log(ocr_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define OCR_LOG_DEBUG_(...) ocr_log(OCR_LOG_DEBUG, __VA_ARGS__)

#endif

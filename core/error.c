#include "core/error.h"

#include <pthread.h>
#include <string.h>
#include <strings.h>

#define OCR_ERROR_MSG_MAX 2048
static _Thread_local char last_error_msg[OCR_ERROR_MSG_MAX];

const char *ocr_status_name(ocr_status_t status) {
    switch (status) {
        case OCR_OK: return "ok";
        case OCR_ERR_INVALID_ARG: return "invalid argument";
        case OCR_ERR_IO: return "i/o error";
        case OCR_ERR_FORMAT: return "format error";
        case OCR_ERR_OOM: return "out of memory";
        case OCR_ERR_CONFIG: return "configuration error";
        case OCR_ERR_UNSUPPORTED: return "unsupported";
        case OCR_ERR_NOT_FOUND: return "not found";
        case OCR_ERR_CUDA: return "cuda error";
        case OCR_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

ocr_status_t ocr_set_error(ocr_status_t status, const char *fmt, ...) {
    // Formatted apart first: an argument may be ocr_last_error() itself (a message that
    // quotes the previous one), and vsnprintf into its own source is undefined.
    char msg[OCR_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(last_error_msg, msg, sizeof msg);
    return status;
}

ocr_status_t ocr_wrap_error(ocr_status_t status, const char *fmt, ...) {
    char prefix[OCR_ERROR_MSG_MAX];
    char old[OCR_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error_msg, sizeof old);
    if (old[0])
        snprintf(last_error_msg, sizeof last_error_msg, "%.1000s: %.1000s", prefix, old);
    else
        snprintf(last_error_msg, sizeof last_error_msg, "%s", prefix);
    return status;
}

const char *ocr_last_error(void) { return last_error_msg; }
void ocr_clear_error(void) { last_error_msg[0] = '\0'; }

void ocr_abort_(const char *expr, const char *file, int line, const char *fmt, ...) {
    fprintf(stderr, "ocrtrain: internal invariant failed: %s\n  at %s:%d\n", expr, file, line);
    // The macro prefixes a space so an empty message is still a valid format.
    if (fmt && fmt[0] && fmt[1]) {
        va_list ap;
        va_start(ap, fmt);
        fputs(" ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
    fflush(stderr);
    abort();
}

static int log_level = -1;
static pthread_mutex_t log_mutex = PTHREAD_MUTEX_INITIALIZER;

int ocr_log_level_from_name(const char *name, ocr_log_level_t *out) {
    static const char *names[] = {"debug", "info", "warn", "error", "quiet"};
    for (int i = 0; i < 5; i++)
        if (strcasecmp(name, names[i]) == 0) {
            *out = (ocr_log_level_t)i;
            return 1;
        }
    return 0;
}

ocr_log_level_t ocr_log_get_level(void) {
    if (log_level < 0) {
        ocr_log_level_t lvl = OCR_LOG_INFO;
        const char *env = getenv("OCR_LOG_LEVEL");
        if (env) ocr_log_level_from_name(env, &lvl);
        log_level = (int)lvl;
    }
    return (ocr_log_level_t)log_level;
}

void ocr_log_set_level(ocr_log_level_t level) { log_level = (int)level; }

void ocr_log(ocr_log_level_t level, const char *fmt, ...) {
    if (level < ocr_log_get_level()) return;
    static const char *tags[] = {"debug", "info", "warning", "error", ""};
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&log_mutex);
    fprintf(stderr, "ocrtrain %s: ", tags[level]);
    vfprintf(stderr, fmt, ap);
    size_t n = strlen(fmt);
    if (n == 0 || fmt[n - 1] != '\n') fputc('\n', stderr);
    fflush(stderr);
    pthread_mutex_unlock(&log_mutex);
    va_end(ap);
}

// Monotonic time for throughput figures and ETAs.
#ifndef OCR_CORE_TIMER_H
#define OCR_CORE_TIMER_H

#include <time.h>

static inline double ocr_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif

#include "fuzz/fuzz_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"

void fuzz_quiet(void) { ocr_log_set_level(OCR_LOG_QUIET); }

#define FUZZ_MAX_FILES 8
static char temp_dir[4096];
static char temp_names[FUZZ_MAX_FILES][64];
static int temp_count;

static void remove_temp(void) {
    char path[4200];
    for (int i = 0; i < temp_count; i++) {
        if (snprintf(path, sizeof path, "%s/%s", temp_dir, temp_names[i]) < (int)sizeof path) unlink(path);
    }
    if (temp_dir[0]) rmdir(temp_dir);
}

const char *fuzz_temp_dir(void) {
    if (temp_dir[0]) return temp_dir;
    const char *base = getenv("TMPDIR");
    if (!base || !base[0]) base = "/tmp";
    snprintf(temp_dir, sizeof temp_dir, "%s/ocr_fuzz_XXXXXX", base);
    if (!mkdtemp(temp_dir)) {
        fprintf(stderr, "fuzz: cannot create a temporary directory under %s: %s\n", base, strerror(errno));
        abort();
    }
    atexit(remove_temp);
    return temp_dir;
}

const char *fuzz_temp_file(const char *name, const void *data, size_t size) {
    static char path[4200];
    const char *dir = fuzz_temp_dir();
    int known = 0;
    for (int i = 0; i < temp_count; i++) known |= strcmp(temp_names[i], name) == 0;
    if (!known) {
        if (temp_count == FUZZ_MAX_FILES || strlen(name) >= sizeof temp_names[0]) {
            fprintf(stderr, "fuzz: temporary file name %s not accepted (at most %d names of < 64 bytes)\n", name,
                    FUZZ_MAX_FILES);
            abort();
        }
        snprintf(temp_names[temp_count++], sizeof temp_names[0], "%s", name);
    }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        fprintf(stderr, "fuzz: cannot write %s: %s\n", path, strerror(errno));
        abort();
    }
    return path;
}

void fuzz_split(const uint8_t *data, size_t size, uint8_t sep, size_t *head_size, const uint8_t **tail,
                size_t *tail_size) {
    const uint8_t *p = size ? memchr(data, sep, size) : NULL;
    if (!p) {
        *head_size = size, *tail = NULL, *tail_size = 0;
        return;
    }
    *head_size = (size_t)(p - data);
    *tail = p + 1;
    *tail_size = size - *head_size - 1;
}

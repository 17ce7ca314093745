// Replays a corpus without libFuzzer: every regular file under the folders (or files) given
// on the command line is passed to LLVMFuzzerTestOneInput once, in name order, so a run is
// reproducible. The normal (gcc) build registers one CTest test per harness with this driver
// over fuzz/corpus/<name>/: a crash, an ASan report (sanitizer builds) or an abort fails it.
// A folder with no file fails too: a replay of nothing would pass for the wrong reason.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz/fuzz_util.h"

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    return 0;
}

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) buf = realloc(buf, cap *= 2);
    }
    int err = ferror(f);
    fclose(f);
    if (!buf || err) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        free(buf);
        return -1;
    }
    // An exactly sized copy, so ASan sees reads past the input's end.
    uint8_t *in = malloc(n ? n : 1);
    memcpy(in, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(in, n);
    free(in);
    return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// Returns the number of files run, or -1 on an IO error.
static long run_path(const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "replay: %s does not exist\n", path);
        return -1;
    }
    if (!S_ISDIR(sb.st_mode)) return run_file(path) == 0 ? 1 : -1;
    DIR *d = opendir(path);
    if (!d) {
        fprintf(stderr, "replay: cannot list %s\n", path);
        return -1;
    }
    char **names = NULL;
    size_t count = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        if (count == cap) names = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
        names[count++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, count, sizeof *names, by_name);
    long total = 0;
    for (size_t i = 0; i < count; i++) {
        char *full = malloc(strlen(path) + strlen(names[i]) + 2);
        sprintf(full, "%s/%s", path, names[i]);
        long r = total >= 0 ? run_path(full) : 0;
        total = r < 0 ? -1 : total + r;
        free(full);
        free(names[i]);
    }
    free(names);
    return total;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
        return 2;
    }
    LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        long n = run_path(argv[i]);
        if (n < 0) return 1;
        if (n == 0) {
            fprintf(stderr, "replay: %s holds no input\n", argv[i]);
            return 1;
        }
        printf("replay: %s: %ld inputs, no crash\n", argv[i], n);
    }
    return 0;
}

#include "core/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static char *dup_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static void atomic_clear(OcrAtomicFile *af) {
    free(af->path);
    free(af->tmp_path);
    af->fp = NULL;
    af->path = NULL;
    af->tmp_path = NULL;
}

ocr_status_t ocr_atomic_open(OcrAtomicFile *af, const char *path) {
    af->fp = NULL;
    af->path = NULL;
    af->tmp_path = NULL;
    if (!path || !path[0]) return ocr_set_error(OCR_ERR_INVALID_ARG, "atomic write: empty path");
    // Same directory as the target, so the final rename never crosses a file system.
    size_t n = strlen(path) + 32;
    af->path = dup_string(path);
    af->tmp_path = malloc(n);
    if (!af->path || !af->tmp_path) {
        atomic_clear(af);
        return ocr_set_error(OCR_ERR_OOM, "%s: out of memory opening for writing", path);
    }
    snprintf(af->tmp_path, n, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(af->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        int e = errno;
        ocr_status_t st = ocr_set_error(OCR_ERR_IO, "%s: cannot create temporary file %s: %s", path, af->tmp_path,
                                        strerror(e));
        atomic_clear(af);
        return st;
    }
    af->fp = fdopen(fd, "wb");
    if (!af->fp) {
        int e = errno;
        close(fd);
        unlink(af->tmp_path);
        ocr_status_t st = ocr_set_error(OCR_ERR_IO, "%s: cannot open temporary file %s: %s", path, af->tmp_path,
                                        strerror(e));
        atomic_clear(af);
        return st;
    }
    return OCR_OK;
}

// Directory part of `path` ("." when there is none), into buf.
static void parent_dir(const char *path, char *buf, size_t bufsize) {
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(buf, bufsize, ".");
    } else if (slash == path) {
        snprintf(buf, bufsize, "/");
    } else {
        snprintf(buf, bufsize, "%.*s", (int)(slash - path), path);
    }
}

void ocr_test_write_pause(void) {
    const char *env = getenv("OCR_TEST_WRITE_DELAY_MS");
    long ms = env ? strtol(env, NULL, 10) : 0;
    if (ms <= 0) return;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    // A signal (the trainer's SIGINT handler) may cut the sleep short; the rest is not needed.
    nanosleep(&ts, NULL);
}

// OCR_TEST_FAIL_WRITE: whether this write is to fail as on a full disk.
static int injected_write_failure(const char *path) {
    const char *env = getenv("OCR_TEST_FAIL_WRITE");
    return env && env[0] && strstr(path, env) != NULL;
}

ocr_status_t ocr_atomic_commit(OcrAtomicFile *af) {
    OCR_ASSERT(af->fp && af->path && af->tmp_path, "commit of an atomic file that is not open");
    const char *what = NULL;
    int err = 0;
    // A write error anywhere earlier sticks in ferror, so one check here covers every fwrite.
    if (fflush(af->fp) != 0) {
        what = "write", err = errno;
    } else if (ferror(af->fp)) {
        what = "write", err = EIO;
    } else if (injected_write_failure(af->path)) {
        what = "write", err = ENOSPC;
    } else if (fsync(fileno(af->fp)) != 0) {
        what = "fsync", err = errno;
    }
    if (fclose(af->fp) != 0 && !what) what = "close", err = errno;
    af->fp = NULL;
    if (!what) ocr_test_write_pause();
    if (!what && rename(af->tmp_path, af->path) != 0) what = "rename", err = errno;
    if (what) {
        unlink(af->tmp_path);
        ocr_status_t st = ocr_set_error(OCR_ERR_IO, "%s: %s of temporary file %s failed: %s", af->path, what,
                                        af->tmp_path, strerror(err));
        atomic_clear(af);
        return st;
    }
    // The rename itself is only durable once the directory entry is on disk.
    char dir[4096];
    parent_dir(af->path, dir, sizeof dir);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ocr_status_t st = OCR_OK;
    if (dfd >= 0) {
        // Some file systems cannot fsync a directory (EINVAL); the data itself is already synced.
        if (fsync(dfd) != 0 && errno != EINVAL && errno != EROFS)
            st = ocr_set_error(OCR_ERR_IO, "%s: written, but fsync of directory %s failed: %s", af->path, dir,
                               strerror(errno));
        close(dfd);
    }
    atomic_clear(af);
    return st;
}

void ocr_atomic_abort(OcrAtomicFile *af) {
    if (af->fp) fclose(af->fp);
    if (af->tmp_path) unlink(af->tmp_path);
    atomic_clear(af);
}

ocr_status_t ocr_write_file_atomic(const char *path, const void *data, size_t size) {
    OcrAtomicFile af;
    OCR_TRY(ocr_atomic_open(&af, path));
    if (size > 0 && fwrite(data, 1, size, af.fp) != size) {
        int e = errno;
        ocr_status_t st = ocr_set_error(OCR_ERR_IO, "%s: write of %zu bytes to %s failed: %s", path, size,
                                        af.tmp_path, strerror(e));
        ocr_atomic_abort(&af);
        return st;
    }
    return ocr_atomic_commit(&af);
}

ocr_status_t ocr_read_file(const char *path, char **data, size_t *size) {
    *data = NULL;
    if (size) *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return ocr_set_error(errno == ENOENT ? OCR_ERR_NOT_FOUND : OCR_ERR_IO, "cannot open %s: %s", path,
                                 strerror(errno));
    // Size from fstat is only a hint: pipes and /proc files report 0, so read until EOF.
    struct stat sb;
    size_t cap = 4096;
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0) cap = (size_t)sb.st_size + 1;
    char *buf = malloc(cap);
    size_t len = 0;
    for (;;) {
        if (!buf) {
            fclose(f);
            return ocr_set_error(OCR_ERR_OOM, "cannot read %s: out of memory (%zu bytes)", path, cap);
        }
        len += fread(buf + len, 1, cap - len - 1, f);
        int c = EOF;
        // Full buffer: peek one byte before growing, so a file whose size was known is not doubled.
        if (!ferror(f) && !feof(f)) c = fgetc(f);
        if (ferror(f)) {
            int e = errno;
            free(buf);
            fclose(f);
            return ocr_set_error(OCR_ERR_IO, "cannot read %s: %s", path, strerror(e));
        }
        if (c == EOF) break;
        cap *= 2;
        char *nb = realloc(buf, cap);
        if (!nb) free(buf);
        buf = nb;
        if (buf) buf[len++] = (char)c;
    }
    fclose(f);
    buf[len] = '\0';
    *data = buf;
    if (size) *size = len;
    return OCR_OK;
}

int ocr_file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && !S_ISDIR(sb.st_mode);
}

ocr_status_t ocr_make_dirs(const char *path) {
    if (!path || !path[0]) return ocr_set_error(OCR_ERR_INVALID_ARG, "make_dirs: empty path");
    size_t n = strlen(path);
    char *p = dup_string(path);
    if (!p) return ocr_set_error(OCR_ERR_OOM, "make_dirs %s: out of memory", path);
    // Create each prefix ending before a '/', then the whole path.
    for (size_t i = 1; i <= n; i++) {
        if (i < n && p[i] != '/') continue;
        char saved = p[i];
        p[i] = '\0';
        if (mkdir(p, 0777) != 0) {
            int e = errno;
            struct stat sb;
            if (e != EEXIST || stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
                ocr_status_t st;
                if (e == EEXIST)
                    st = ocr_set_error(OCR_ERR_IO, "cannot create directory %s: %s exists and is not a directory",
                                       path, p);
                else
                    st = ocr_set_error(OCR_ERR_IO, "cannot create directory %s: mkdir %s: %s", path, p, strerror(e));
                free(p);
                return st;
            }
        }
        p[i] = saved;
    }
    free(p);
    return OCR_OK;
}

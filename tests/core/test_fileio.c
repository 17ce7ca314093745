// Atomic writes, whole-file reads and mkdir -p.
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fileio.h"
#include "tests/common/test_util.h"

// Each test gets a fresh directory under the build tree, removed afterwards.
static char *tmpdir;  // a fresh directory per test (setup), removed by teardown

static void setup(void) { tmpdir = ocr_test_tmpdir("fileio_"); }

static void teardown(void) {
    ocr_test_remove_tree(tmpdir);
    free(tmpdir);
    tmpdir = NULL;
}

static const char *in_tmp(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s", tmpdir, name);
    return buf;
}

static void write_plain(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void assert_content(const char *path, const char *expected) {
    char *data = NULL;
    size_t size = 0;
    ck_assert_msg(ocr_read_file(path, &data, &size) == OCR_OK, "%s", ocr_last_error());
    ck_assert_uint_eq(size, strlen(expected));
    ck_assert_str_eq(data, expected);
    free(data);
}

// Number of entries in tmpdir whose name contains ".tmp.".
static int count_temp_files(void) {
    DIR *d = opendir(tmpdir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

START_TEST(test_write_then_read_binary) {
    char path[4096];
    in_tmp(path, sizeof path, "blob.bin");
    unsigned char blob[300];
    for (int i = 0; i < 300; i++) blob[i] = (unsigned char)(i * 7 + 3);  // includes NUL bytes
    ck_assert_int_eq(ocr_write_file_atomic(path, blob, sizeof blob), OCR_OK);
    char *data = NULL;
    size_t size = 0;
    ck_assert_int_eq(ocr_read_file(path, &data, &size), OCR_OK);
    ck_assert_uint_eq(size, sizeof blob);
    ck_assert_int_eq(memcmp(data, blob, sizeof blob), 0);
    ck_assert_int_eq(data[size], '\0');
    free(data);
    ck_assert_int_eq(count_temp_files(), 0);
}
END_TEST

START_TEST(test_atomic_replaces_content) {
    char path[4096];
    in_tmp(path, sizeof path, "state.json");
    write_plain(path, "old content that is longer than the new one");
    const char *fresh = "{\"step\": 2}";
    ck_assert_int_eq(ocr_write_file_atomic(path, fresh, strlen(fresh)), OCR_OK);
    assert_content(path, fresh);
    ck_assert_int_eq(count_temp_files(), 0);

    // Through the streaming interface too.
    OcrAtomicFile af;
    ck_assert_int_eq(ocr_atomic_open(&af, path), OCR_OK);
    fprintf(af.fp, "line %d\n", 1);
    fprintf(af.fp, "line %d\n", 2);
    ck_assert_int_eq(ocr_atomic_commit(&af), OCR_OK);
    ck_assert_ptr_null(af.fp);
    assert_content(path, "line 1\nline 2\n");
    ck_assert_int_eq(count_temp_files(), 0);
}
END_TEST

START_TEST(test_abort_keeps_old_file) {
    char path[4096];
    in_tmp(path, sizeof path, "weights.bin");
    write_plain(path, "the old checkpoint");
    OcrAtomicFile af;
    ck_assert_int_eq(ocr_atomic_open(&af, path), OCR_OK);
    // The temporary sits next to the target and is named after it and the pid.
    char expected_tmp[4200];
    snprintf(expected_tmp, sizeof expected_tmp, "%s.tmp.%ld", path, (long)getpid());
    ck_assert_str_eq(af.tmp_path, expected_tmp);
    fputs("half of a new checkp", af.fp);
    fflush(af.fp);
    ck_assert(ocr_file_exists(af.tmp_path));
    ck_assert_int_eq(count_temp_files(), 1);
    assert_content(path, "the old checkpoint");  // untouched while the write is in flight
    ocr_atomic_abort(&af);                        // simulated failure mid-write
    assert_content(path, "the old checkpoint");
    ck_assert_int_eq(count_temp_files(), 0);
    ck_assert_ptr_null(af.tmp_path);
    ocr_atomic_abort(&af);  // a second abort is harmless
}
END_TEST

START_TEST(test_commit_failure_removes_temp) {
    // Renaming a file over a non-empty directory fails: commit must report it and clean up.
    char path[4096], inner[4200];
    in_tmp(path, sizeof path, "occupied");
    ck_assert_int_eq(mkdir(path, 0777), 0);
    snprintf(inner, sizeof inner, "%s/keep", path);
    write_plain(inner, "x");
    ocr_status_t st = ocr_write_file_atomic(path, "data", 4);
    ck_assert_int_eq(st, OCR_ERR_IO);
    ck_assert_msg(strstr(ocr_last_error(), path) != NULL, "message: %s", ocr_last_error());
    ck_assert_msg(strstr(ocr_last_error(), "rename") != NULL, "message: %s", ocr_last_error());
    ck_assert_int_eq(count_temp_files(), 0);
    assert_content(inner, "x");
}
END_TEST

// The test hook OCR_TEST_FAIL_WRITE (core/fileio.h) fails the writes whose path contains it as
// a full disk would: the message names the file and the cause, the old content stays, no
// temporary is left; other paths are not affected.
START_TEST(test_injected_full_disk) {
    char path[4096], other[4096];
    in_tmp(path, sizeof path, "model.safetensors");
    in_tmp(other, sizeof other, "state.json");
    write_plain(path, "the old weights");
    setenv("OCR_TEST_FAIL_WRITE", "model.safetensors", 1);
    ocr_status_t st = ocr_write_file_atomic(path, "new weights", 11);
    ocr_status_t st2 = ocr_write_file_atomic(other, "{}", 2);
    unsetenv("OCR_TEST_FAIL_WRITE");
    ck_assert_int_eq(st, OCR_ERR_IO);
    ck_assert_msg(strstr(ocr_last_error(), path) && strstr(ocr_last_error(), strerror(ENOSPC)), "message: %s",
                  ocr_last_error());
    ck_assert_int_eq(st2, OCR_OK);
    assert_content(path, "the old weights");
    assert_content(other, "{}");
    ck_assert_int_eq(count_temp_files(), 0);
}
END_TEST

// OCR_TEST_WRITE_DELAY_MS holds a commit open for that long, the temporary visible meanwhile.
START_TEST(test_write_delay_hook) {
    char path[4096];
    in_tmp(path, sizeof path, "slow.txt");
    setenv("OCR_TEST_WRITE_DELAY_MS", "120", 1);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ocr_status_t st = ocr_write_file_atomic(path, "x", 1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    unsetenv("OCR_TEST_WRITE_DELAY_MS");
    ck_assert_int_eq(st, OCR_OK);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    ck_assert_msg(dt >= 0.12, "the commit took %.3f s", dt);
    assert_content(path, "x");
}
END_TEST

START_TEST(test_open_in_missing_dir_fails) {
    char path[4096];
    in_tmp(path, sizeof path, "no/such/dir/file.txt");
    OcrAtomicFile af;
    ocr_status_t st = ocr_atomic_open(&af, path);
    ck_assert_int_eq(st, OCR_ERR_IO);
    ck_assert_ptr_null(af.fp);
    ck_assert_msg(strstr(ocr_last_error(), path) != NULL, "message: %s", ocr_last_error());
    ck_assert_msg(strstr(ocr_last_error(), strerror(ENOENT)) != NULL, "message: %s", ocr_last_error());
    ck_assert_int_eq(ocr_write_file_atomic(path, "x", 1), OCR_ERR_IO);
}
END_TEST

START_TEST(test_read_missing_file) {
    char path[4096];
    in_tmp(path, sizeof path, "missing.json");
    char *data = (char *)1;
    size_t size = 99;
    ocr_status_t st = ocr_read_file(path, &data, &size);
    ck_assert_int_eq(st, OCR_ERR_NOT_FOUND);
    ck_assert_ptr_null(data);
    ck_assert_msg(strstr(ocr_last_error(), path) != NULL, "message: %s", ocr_last_error());
    ck_assert_msg(strstr(ocr_last_error(), strerror(ENOENT)) != NULL, "message: %s", ocr_last_error());
}
END_TEST

START_TEST(test_read_directory_fails) {
    char *data = NULL;
    size_t size;
    ocr_status_t st = ocr_read_file(tmpdir, &data, &size);
    ck_assert_int_ne(st, OCR_OK);
    ck_assert_ptr_null(data);
    ck_assert_msg(strstr(ocr_last_error(), tmpdir) != NULL, "message: %s", ocr_last_error());
}
END_TEST

START_TEST(test_read_empty_and_large) {
    char path[4096];
    in_tmp(path, sizeof path, "empty");
    write_plain(path, "");
    char *data = NULL;
    size_t size = 7;
    ck_assert_int_eq(ocr_read_file(path, &data, &size), OCR_OK);
    ck_assert_ptr_nonnull(data);
    ck_assert_uint_eq(size, 0);
    ck_assert_int_eq(data[0], '\0');
    free(data);

    // Bigger than the initial buffer, written by stdio, read back in one piece.
    in_tmp(path, sizeof path, "large");
    size_t n = 200001;
    char *big = malloc(n);
    for (size_t i = 0; i < n; i++) big[i] = (char)('a' + i % 26);
    ck_assert_int_eq(ocr_write_file_atomic(path, big, n), OCR_OK);
    ck_assert_int_eq(ocr_read_file(path, &data, &size), OCR_OK);
    ck_assert_uint_eq(size, n);
    ck_assert_int_eq(memcmp(data, big, n), 0);
    free(data);
    free(big);
}
END_TEST

START_TEST(test_read_unsized_file) {
    // /proc files report size 0: the reader must not trust fstat.
    char *data = NULL;
    size_t size = 0;
    ck_assert_int_eq(ocr_read_file("/proc/self/status", &data, &size), OCR_OK);
    ck_assert_uint_gt(size, 0);
    ck_assert_uint_eq(strlen(data), size);
    ck_assert_ptr_nonnull(strstr(data, "Pid:"));
    free(data);
}
END_TEST

START_TEST(test_make_dirs_nested) {
    char path[4096], file[4200];
    in_tmp(path, sizeof path, "a/b/c/d");
    ck_assert(!ocr_file_exists(path));
    ck_assert_int_eq(ocr_make_dirs(path), OCR_OK);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert(S_ISDIR(sb.st_mode));
    ck_assert_int_eq(ocr_make_dirs(path), OCR_OK);  // existing: fine
    in_tmp(path, sizeof path, "a/b//e/");            // doubled and trailing slashes
    ck_assert_int_eq(ocr_make_dirs(path), OCR_OK);
    in_tmp(path, sizeof path, "a/b/e");
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert(S_ISDIR(sb.st_mode));

    // A regular file in the way is an error that names it.
    in_tmp(file, sizeof file, "a/plain");
    write_plain(file, "x");
    in_tmp(path, sizeof path, "a/plain/sub");
    ck_assert_int_eq(ocr_make_dirs(path), OCR_ERR_IO);
    ck_assert_msg(strstr(ocr_last_error(), file) != NULL, "message: %s", ocr_last_error());
    ck_assert_int_ne(ocr_make_dirs(""), OCR_OK);
}
END_TEST

START_TEST(test_file_exists) {
    char path[4096];
    in_tmp(path, sizeof path, "here");
    ck_assert(!ocr_file_exists(path));
    write_plain(path, "1");
    ck_assert(ocr_file_exists(path));
    ck_assert(!ocr_file_exists(tmpdir));  // a directory is not a file
}
END_TEST

static Suite *fileio_suite(void) {
    Suite *s = suite_create("core_fileio");
    TCase *tc = tcase_create("fileio");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_write_then_read_binary);
    tcase_add_test(tc, test_atomic_replaces_content);
    tcase_add_test(tc, test_abort_keeps_old_file);
    tcase_add_test(tc, test_commit_failure_removes_temp);
    tcase_add_test(tc, test_open_in_missing_dir_fails);
    tcase_add_test(tc, test_read_missing_file);
    tcase_add_test(tc, test_read_directory_fails);
    tcase_add_test(tc, test_read_empty_and_large);
    tcase_add_test(tc, test_read_unsized_file);
    tcase_add_test(tc, test_make_dirs_nested);
    tcase_add_test(tc, test_file_exists);
    tcase_add_test(tc, test_injected_full_disk);
    tcase_add_test(tc, test_write_delay_hook);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(fileio_suite()); }

// PngSuite (../shared/testdata/pngsuite): every valid image decodes to its expected pixels
// (expected_rgba8/NAME.rgba composited on white, as our pipeline does), in RGB, BGR and gray;
// every deliberately corrupt x*.png is refused with a message naming it.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "data/image.h"
#include "tests/common/test_util.h"

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// Sorted names of the *.png files in dir (caller frees).
static char **list_pngs(const char *dir, int *n) {
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    char **names = NULL;
    int cap = 0;
    *n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".png") != 0) continue;
        if (*n == cap) names = realloc(names, sizeof(char *) * (cap = cap ? 2 * cap : 256));
        names[(*n)++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)*n, sizeof *names, cmp_str);
    return names;
}

static void free_list(char **names, int n) {
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

START_TEST(test_valid_images_match_expected) {
    char dir[1024];
    if (!ocr_test_shared_path("testdata/pngsuite/expected_rgba8", dir, sizeof dir)) return;
    char root[1024];
    snprintf(root, sizeof root, "%.1000s", dir);
    *strrchr(root, '/') = '\0';
    int n;
    char **names = list_pngs(root, &n);
    int compared = 0, decoded_only = 0, off_by_one = 0;
    for (int i = 0; i < n; i++) {
        if (names[i][0] == 'x') continue;
        char path[2048], exp_path[2048];
        snprintf(path, sizeof path, "%s/%s", root, names[i]);
        snprintf(exp_path, sizeof exp_path, "%s/%.*s.rgba", dir, (int)strlen(names[i]) - 4, names[i]);
        char *file;
        size_t file_size;
        ck_assert_int_eq(ocr_read_file(path, &file, &file_size), OCR_OK);
        // IHDR: bit depth at byte 24, colour type at 25.
        int bit_depth = (uint8_t)file[24], color_type = (uint8_t)file[25];
        free(file);
        OcrImage rgb, bgr, gray;
        ocr_status_t st = ocr_image_load(&rgb, path, OCR_CHANNELS_RGB);
        ck_assert_msg(st == OCR_OK, "%s: %s", names[i], ocr_last_error());
        ck_assert_int_eq(ocr_image_load(&bgr, path, OCR_CHANNELS_BGR), OCR_OK);
        ck_assert_int_eq(ocr_image_load(&gray, path, OCR_CHANNELS_GRAY), OCR_OK);
        char *exp;
        size_t exp_size;
        if (ocr_read_file(exp_path, &exp, &exp_size) != OCR_OK) {
            // basn4a16 & co. have no expected decode in the source; they must still decode.
            ck_assert(rgb.width > 0 && rgb.height > 0);
            decoded_only++;
        } else {
            ck_assert_msg(exp_size == (size_t)rgb.width * rgb.height * 4, "%s: %dx%d vs %zu expected bytes", names[i],
                          rgb.width, rgb.height, exp_size);
            // The expected 16-bit gray decodes come from a rounding reduction, ours keeps the
            // high byte (as cv2 does): those may differ by 1. Everything else is exact.
            int tol = (bit_depth == 16 && color_type == 0) ? 1 : 0;
            // Compare everything first and assert once: each Check assertion costs a syscall.
            int worst = 0, bad_order = 0, bad_gray = -1, first_bad = -1;
            for (int p = 0; p < rgb.width * rgb.height; p++) {
                const uint8_t *e = (const uint8_t *)exp + 4 * p;
                uint8_t c[3];
                for (int k = 0; k < 3; k++) c[k] = ocr_composite_white(e[k], e[3]);
                for (int k = 0; k < 3; k++) {
                    int d = abs(rgb.pixels[3 * p + k] - c[k]);
                    if (d > worst) worst = d;
                    if (d > tol && first_bad < 0) first_bad = 3 * p + k;
                    bad_order += bgr.pixels[3 * p + 2 - k] != rgb.pixels[3 * p + k];
                }
                if (abs(gray.pixels[p] - ocr_rgb_to_gray(c[0], c[1], c[2])) > tol && bad_gray < 0) bad_gray = p;
            }
            ck_assert_msg(first_bad < 0, "%s: pixel %d channel %d differs by more than %d from the expected decode",
                          names[i], first_bad / 3, first_bad % 3, tol);
            ck_assert_msg(bad_order == 0, "%s: BGR is not RGB reversed at %d samples", names[i], bad_order);
            ck_assert_msg(bad_gray < 0, "%s: gray pixel %d", names[i], bad_gray);
            off_by_one += worst > 0;
            free(exp);
            compared++;
        }
        ocr_image_free(&rgb);
        ocr_image_free(&bgr);
        ocr_image_free(&gray);
    }
    printf("PngSuite: %d images match their expected decode (%d of them within 1: 16-bit gray), %d decode without "
           "an expected file\n",
           compared, off_by_one, decoded_only);
    ck_assert_int_ge(compared, 150);  // the suite has 157 valid images with an expected decode
    ck_assert_int_le(off_by_one, 8);
    free_list(names, n);
}
END_TEST

START_TEST(test_corrupt_images_refused) {
    char root[1024];
    if (!ocr_test_shared_path("testdata/pngsuite", root, sizeof root)) return;
    int n;
    char **names = list_pngs(root, &n);
    int refused = 0;
    for (int i = 0; i < n; i++) {
        if (names[i][0] != 'x') continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", root, names[i]);
        for (int o = 0; o < 3; o++) {
            OcrImage img;
            ocr_clear_error();
            ocr_status_t st = ocr_image_load(&img, path, (ocr_channel_order_t)o);
            ck_assert_msg(st == OCR_ERR_FORMAT || st == OCR_ERR_UNSUPPORTED, "%s: status %d (%s)", names[i], st,
                          ocr_last_error());
            ck_assert_ptr_null(img.pixels);
            ck_assert_msg(strstr(ocr_last_error(), names[i]) != NULL, "message \"%s\" does not name the file",
                          ocr_last_error());
        }
        if (refused < 3) printf("  refused %s: %s\n", names[i], ocr_last_error());
        refused++;
    }
    ck_assert_int_eq(refused, 14);  // xc1 xc9 xcr xcs xd0 xd3 xd9 xdt xhd xlf xs1 xs2 xs4 xs7
    free_list(names, n);
}
END_TEST

int main(void) {
    // test_util.c is compiled without OCR_SHARED_DIR (only test executables get it), so
    // hand the configured location over through the environment it reads first.
    setenv("OCR_SHARED_DIR", OCR_SHARED_DIR, 0);
    Suite *s = suite_create("data_png_suite");
    TCase *tc = tcase_create("pngsuite");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_valid_images_match_expected);
    tcase_add_test(tc, test_corrupt_images_refused);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

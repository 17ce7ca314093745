// The synthetic text-line generator: reproducibility (runs, thread counts, single lines),
// labels against the dictionary, decodable images of the right height, what each style
// writes, argument checking, and the messages for missing fonts and corpora.
#define _GNU_SOURCE  // nftw
#include <check.h>
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "data/image.h"
#include "data/synth.h"
#include "data/synth_internal.h"  // the text generator, for many texts without rendering
#include "data/utf8.h"
#include "tests/common/test_util.h"

// ---- helpers --------------------------------------------------------------------------

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static void rm_rf(const char *path) { nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

static char *make_tmpdir(void) {
    return ocr_test_tmpdir("ocr_test_synth_");
}

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", a, b);
    return p;
}

static char *slurp(const char *dir, const char *name, size_t *size) {
    char *path = join(dir, name);
    char *data = NULL;
    size_t n = 0;
    ocr_status_t st = ocr_read_file(path, &data, &n);
    ck_assert_msg(st == OCR_OK, "reading %s: %s", path, ocr_last_error());
    free(path);
    if (size) *size = n;
    return data;
}

// Whether fonts (and corpora) for the style are installed; prints SKIP when not.
static int style_available(ocr_synth_style_t style) {
    OcrSynthOptions opt;
    ocr_synth_default_options(&opt);
    opt.style = style;
    OcrSynth *s = NULL;
    ocr_status_t st = ocr_synth_create(&s, &opt);
    if (st == OCR_OK) {
        ocr_synth_destroy(s);
        return 1;
    }
    ck_assert_msg(st == OCR_ERR_NOT_FOUND || st == OCR_ERR_UNSUPPORTED, "unexpected failure: %s", ocr_last_error());
    printf("SKIP (style %s): %s\n", ocr_synth_style_name(style), ocr_last_error());
    return 0;
}

static OcrSynthOptions options(ocr_synth_style_t style, int64_t count, uint64_t seed, int threads) {
    OcrSynthOptions opt;
    ocr_synth_default_options(&opt);
    opt.style = style, opt.count = count, opt.seed = seed, opt.threads = threads;
    return opt;
}

static void write_ok(const char *dir, const OcrSynthOptions *opt) {
    OcrSynthStats stats;
    ocr_status_t st = ocr_synth_write(dir, opt, &stats);
    ck_assert_msg(st == OCR_OK, "synth write: %s", ocr_last_error());
    ck_assert_int_eq(stats.lines, opt->count);
    ck_assert_int_eq(stats.gray_images + stats.rgb_images, opt->count);
}

static void assert_same_file(const char *a, const char *b, const char *name) {
    size_t na, nb;
    char *da = slurp(a, name, &na), *db = slurp(b, name, &nb);
    ck_assert_msg(na == nb && memcmp(da, db, na) == 0, "%s differs between %s and %s", name, a, b);
    free(da);
    free(db);
}

static void image_name(char *buf, size_t n, int64_t i) { snprintf(buf, n, "images/%08lld.png", (long long)i); }

// Code points of a dict.txt (one per line) as a sorted-free membership list.
typedef struct {
    uint32_t cps[8192];
    int n;
} CpSet;

static int cpset_has(const CpSet *s, uint32_t cp) {
    for (int i = 0; i < s->n; i++)
        if (s->cps[i] == cp) return 1;
    return 0;
}

// strict: every line one character, no repeats (our dictionaries); else lines that are not
// one character are skipped (reference dictionaries).
static void dict_to_set(const char *dict, CpSet *set, int strict) {
    set->n = 0;
    const char *p = dict;
    while (*p) {
        const char *e = strchr(p, '\n');
        if (!strict && !e) e = p + strlen(p);
        ck_assert_msg(e != NULL, "dict.txt must end with a newline");
        uint32_t cp;
        int k = ocr_utf8_decode(p, (size_t)(e - p), &cp);
        if (!strict && !(k > 0 && p + k == e)) {
            p = *e ? e + 1 : e;
            continue;
        }
        ck_assert_msg(k > 0 && p + k == e, "dict line '%.*s' is not one character", (int)(e - p), p);
        ck_assert_msg(!strict || !cpset_has(set, cp), "dict has U+%04X twice", (unsigned)cp);
        ck_assert_int_lt(set->n, 8192);
        set->cps[set->n++] = cp;
        p = *e ? e + 1 : e;
    }
}

// Label rules: 1..25 code points, no tab, no leading/trailing/double spaces, all in the dict.
static void check_text(const char *text, const CpSet *dict, const char *where) {
    size_t len = strlen(text);
    ck_assert_msg(ocr_utf8_valid(text, len, NULL), "%s: invalid UTF-8", where);
    size_t chars = ocr_utf8_length(text, len);
    ck_assert_msg(chars >= 1 && chars <= OCR_SYNTH_MAX_CHARS, "%s: '%s' has %zu characters", where, text, chars);
    ck_assert_msg(text[0] != ' ' && text[len - 1] != ' ' && !strstr(text, "  ") && !strchr(text, '\t'),
                  "%s: bad spacing in '%s'", where, text);
    for (const char *p = text; *p;) {
        uint32_t cp;
        int k = ocr_utf8_decode(p, strlen(p), &cp);
        ck_assert_msg(cpset_has(dict, cp), "%s: U+%04X of '%s' is not in dict.txt", where, (unsigned)cp, text);
        p += k;
    }
}

// ---- reproducibility -------------------------------------------------------------------

START_TEST(test_same_bytes_any_thread_count) {
    if (!style_available(OCR_SYNTH_RECEIPT)) return;
    char *root = make_tmpdir();
    char *a = join(root, "a"), *b = join(root, "b"), *c = join(root, "c");
    const int n = 24;
    OcrSynthOptions o1 = options(OCR_SYNTH_RECEIPT, n, 7, 1), o3 = options(OCR_SYNTH_RECEIPT, n, 7, 3);
    write_ok(a, &o1);
    write_ok(b, &o1);  // the same run twice
    write_ok(c, &o3);  // three threads
    assert_same_file(a, b, "labels.txt");
    assert_same_file(a, c, "labels.txt");
    assert_same_file(a, c, "dict.txt");
    for (int i = 0; i < n; i++) {
        char name[64];
        image_name(name, sizeof name, i);
        assert_same_file(a, b, name);
        assert_same_file(a, c, name);
    }
    rm_rf(root);
    free(a), free(b), free(c), free(root);
}
END_TEST

START_TEST(test_seeds_differ) {
    if (!style_available(OCR_SYNTH_RECEIPT)) return;
    char *root = make_tmpdir();
    char *a = join(root, "a"), *b = join(root, "b");
    OcrSynthOptions oa = options(OCR_SYNTH_RECEIPT, 12, 1, 2), ob = options(OCR_SYNTH_RECEIPT, 12, 2, 2);
    write_ok(a, &oa);
    write_ok(b, &ob);
    size_t na, nb;
    char *la = slurp(a, "labels.txt", &na), *lb = slurp(b, "labels.txt", &nb);
    ck_assert_msg(na != nb || memcmp(la, lb, na) != 0, "seeds 1 and 2 wrote the same labels");
    int same_images = 0;
    for (int i = 0; i < 12; i++) {
        char name[64];
        image_name(name, sizeof name, i);
        size_t sa, sb;
        char *ia = slurp(a, name, &sa), *ib = slurp(b, name, &sb);
        same_images += sa == sb && memcmp(ia, ib, sa) == 0;
        free(ia), free(ib);
    }
    ck_assert_int_eq(same_images, 0);
    free(la), free(lb);
    rm_rf(root);
    free(a), free(b), free(root);
}
END_TEST

// Any line renders alone to the same pixels, in any worker, in any order.
START_TEST(test_single_line_reproducible) {
    if (!style_available(OCR_SYNTH_DOCUMENT)) return;
    OcrSynthOptions opt = options(OCR_SYNTH_DOCUMENT, 100, 99, 1);
    OcrSynth *s;
    ck_assert_int_eq(ocr_synth_create(&s, &opt), OCR_OK);
    OcrSynthWorker *w1, *w2;
    ck_assert_int_eq(ocr_synth_worker_create(&w1, s), OCR_OK);
    ck_assert_int_eq(ocr_synth_worker_create(&w2, s), OCR_OK);
    OcrImage first[5];
    char texts[5][OCR_SYNTH_TEXT_CAP];
    for (int i = 0; i < 5; i++) ck_assert_int_eq(ocr_synth_render(w1, 40 + i, &first[i], texts[i]), OCR_OK);
    for (int i = 4; i >= 0; i--) {  // other worker, reverse order, with its cache filled differently
        OcrImage img;
        char text[OCR_SYNTH_TEXT_CAP];
        ck_assert_int_eq(ocr_synth_render(w2, 40 + i, &img, text), OCR_OK);
        ck_assert_str_eq(text, texts[i]);
        ck_assert_int_eq(img.width, first[i].width);
        ck_assert_int_eq(img.height, first[i].height);
        ck_assert_int_eq(img.channels, first[i].channels);
        ck_assert(memcmp(img.pixels, first[i].pixels, (size_t)img.width * img.height * img.channels) == 0);
        ocr_image_free(&img);
    }
    ck_assert_str_ne(texts[0], texts[1]);
    for (int i = 0; i < 5; i++) ocr_image_free(&first[i]);
    ocr_synth_worker_destroy(w1);
    ocr_synth_worker_destroy(w2);
    ocr_synth_destroy(s);
}
END_TEST

// ---- the written dataset, per style ----------------------------------------------------

START_TEST(test_dataset_per_style) {
    ocr_synth_style_t style = (ocr_synth_style_t)_i;
    if (!style_available(style)) return;
    char *dir = make_tmpdir();
    const int n = 20;
    OcrSynthOptions opt = options(style, n, 3, 2);
    write_ok(dir, &opt);

    char *dict = slurp(dir, "dict.txt", NULL);
    static CpSet set;
    dict_to_set(dict, &set, 1);
    ck_assert_msg(set.n >= 95, "dict.txt has %d characters", set.n);  // printable ASCII and more
    ck_assert_msg(set.cps[set.n - 1] == ' ', "dict.txt must end with the space line");
    char en_path[4096];
    if (style != OCR_SYNTH_ZH && ocr_test_shared_path("models/dicts/en_dict.txt", en_path, sizeof en_path)) {
        // Same characters in the same order as PaddleOCR's en_dict.txt (so class indices match).
        char *en = NULL;
        size_t en_n = 0;
        ck_assert_int_eq(ocr_read_file(en_path, &en, &en_n), OCR_OK);
        ck_assert_str_eq(dict, en);
        free(en);
    }

    char *labels = slurp(dir, "labels.txt", NULL);
    int lines = 0, with_digit = 0, with_lower = 0, with_cjk = 0;
    char *save = NULL;
    for (char *line = strtok_r(labels, "\n", &save); line; line = strtok_r(NULL, "\n", &save), lines++) {
        char expect[64];
        image_name(expect, sizeof expect, lines);
        char *tab = strchr(line, '\t');
        ck_assert_msg(tab != NULL, "line %d has no tab: %s", lines + 1, line);
        *tab = '\0';
        ck_assert_str_eq(line, expect);
        const char *text = tab + 1;
        check_text(text, &set, expect);
        with_digit += strpbrk(text, "0123456789") != NULL;
        with_lower += strpbrk(text, "abcdefghijklmnopqrstuvwxyz") != NULL;
        for (const char *p = text; *p;) {
            uint32_t cp;
            p += ocr_utf8_decode(p, strlen(p), &cp);
            if (cp >= 0x4E00 && cp <= 0x9FFF) {
                with_cjk++;
                break;
            }
        }
        char *path = join(dir, expect);
        OcrImage img;
        ocr_status_t st = ocr_image_load(&img, path, OCR_CHANNELS_RGB);
        ck_assert_msg(st == OCR_OK, "%s: %s", path, ocr_last_error());
        ck_assert_int_eq(img.height, 48);
        ck_assert_msg(img.width >= 8 && img.width <= 640, "%s is %d wide", path, img.width);
        // There is text on it: not a flat image.
        int lo = 255, hi = 0;
        for (size_t k = 0; k < (size_t)img.width * img.height * 3; k++) {
            if (img.pixels[k] < lo) lo = img.pixels[k];
            if (img.pixels[k] > hi) hi = img.pixels[k];
        }
        ck_assert_msg(hi - lo >= 60, "%s has contrast %d", path, hi - lo);
        ocr_image_free(&img);
        free(path);
    }
    ck_assert_int_eq(lines, n);
    if (style == OCR_SYNTH_RECEIPT) ck_assert_msg(with_digit >= n / 2, "receipt lines with digits: %d/%d", with_digit, n);
    if (style == OCR_SYNTH_DOCUMENT) ck_assert_msg(with_lower >= n * 3 / 4, "document lines with lower case: %d/%d", with_lower, n);
    if (style == OCR_SYNTH_ZH) ck_assert_msg(with_cjk >= n * 3 / 4, "zh lines with Chinese: %d/%d", with_cjk, n);

    // Exactly the images, no temporaries left behind.
    char *images = join(dir, "images");
    DIR *d = opendir(images);
    ck_assert_ptr_nonnull(d);
    int files = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        ck_assert_msg(!strstr(e->d_name, ".tmp"), "temporary left: %s", e->d_name);
        files++;
    }
    closedir(d);
    ck_assert_int_eq(files, n);
    free(images), free(labels), free(dict);
    rm_rf(dir);
    free(dir);
}
END_TEST

START_TEST(test_height_option) {
    if (!style_available(OCR_SYNTH_RECEIPT)) return;
    char *dir = make_tmpdir();
    OcrSynthOptions opt = options(OCR_SYNTH_RECEIPT, 10, 5, 1);
    opt.height = 32;
    opt.max_width = 200;
    write_ok(dir, &opt);
    for (int i = 0; i < 10; i++) {
        char name[64];
        image_name(name, sizeof name, i);
        char *path = join(dir, name);
        OcrImage img;
        ck_assert_int_eq(ocr_image_load(&img, path, OCR_CHANNELS_GRAY), OCR_OK);
        ck_assert_int_eq(img.height, 32);
        ck_assert_int_le(img.width, 200);
        ocr_image_free(&img);
        free(path);
    }
    rm_rf(dir);
    free(dir);
}
END_TEST

// Thousands of texts per style (no rendering): the dictionary covers every character, the
// length and spacing rules hold, and each style writes its kind of content.
START_TEST(test_texts_per_style) {
    ocr_synth_style_t style = (ocr_synth_style_t)_i;
    if (!style_available(style)) return;
    OcrSynthOptions opt = options(style, 1, 11, 1);
    OcrSynth *s;
    ck_assert_int_eq(ocr_synth_create(&s, &opt), OCR_OK);
    static CpSet set;
    dict_to_set(ocr_synth_dict_text(s), &set, 1);
    const int n = 6000;
    int digit = 0, lower = 0, cjk = 0, gap = 0, money = 0, date = 0, total_words = 0;
    for (int i = 0; i < n; i++) {
        OcrRng rng = ocr_rng_make(11, OCR_SYNTH_STREAM + (uint64_t)i);
        char raw[OCR_SYNTH_TEXT_CAP], text[OCR_SYNTH_TEXT_CAP];
        synth_text_generate(raw, style, &s->corpus, &rng);
        gap += strchr(raw, '\t') != NULL;
        size_t k = 0;
        for (; raw[k]; k++) text[k] = raw[k] == '\t' ? ' ' : raw[k];
        text[k] = '\0';
        check_text(text, &set, "generated text");
        digit += strpbrk(text, "0123456789") != NULL;
        lower += strpbrk(text, "abcdefghijklmnopqrstuvwxyz") != NULL;
        // "12.34" somewhere: a price
        for (const char *p = text; *p; p++)
            if (p[0] == '.' && p > text && p[-1] >= '0' && p[-1] <= '9' && p[1] >= '0' && p[1] <= '9' &&
                p[2] >= '0' && p[2] <= '9') {
                money++;
                break;
            }
        date += strstr(text, "/20") != NULL || strstr(text, "-20") != NULL || strstr(text, "年") != NULL;
        total_words += strstr(text, "TOTAL") != NULL || strstr(text, "Total") != NULL || strstr(text, "合计") != NULL;
        for (const char *p = text; *p;) {
            uint32_t cp;
            p += ocr_utf8_decode(p, strlen(p), &cp);
            if (cp >= 0x4E00 && cp <= 0x9FFF) {
                cjk++;
                break;
            }
        }
    }
    if (style == OCR_SYNTH_RECEIPT) {
        ck_assert_msg(digit > n * 7 / 10, "receipt texts with digits: %d", digit);
        ck_assert_msg(money > n * 4 / 10, "receipt texts with a price: %d", money);
        ck_assert_msg(gap > n / 5, "receipt texts with a column gap: %d", gap);
        ck_assert_msg(date > n / 50, "receipt dates: %d", date);
        ck_assert_msg(total_words > n / 100, "receipt totals: %d", total_words);
        ck_assert_int_eq(cjk, 0);
    } else if (style == OCR_SYNTH_DOCUMENT) {
        ck_assert_msg(lower > n * 8 / 10, "document texts with lower case: %d", lower);
        ck_assert_msg(digit < n / 3, "document texts with digits: %d", digit);
        ck_assert_int_eq(cjk, 0);
    } else {
        ck_assert_msg(cjk > n * 8 / 10, "zh texts with Chinese: %d", cjk);
        ck_assert_msg(money > n / 5, "zh texts with an amount: %d", money);
        char keys[4096];
        if (ocr_test_shared_path("models/dicts/ppocr_keys_v1.txt", keys, sizeof keys)) {
            // Every character is one PaddleOCR's Chinese dictionary knows (the space is use_space_char's).
            char *kd = NULL;
            size_t kn = 0;
            ck_assert_int_eq(ocr_read_file(keys, &kd, &kn), OCR_OK);
            static CpSet ks;
            dict_to_set(kd, &ks, 0);
            for (int i = 0; i < set.n; i++)
                ck_assert_msg(set.cps[i] == ' ' || cpset_has(&ks, set.cps[i]), "U+%04X is not in ppocr_keys_v1",
                              (unsigned)set.cps[i]);
            free(kd);
        }
    }
    ocr_synth_destroy(s);
}
END_TEST

// ---- bad input -------------------------------------------------------------------------

START_TEST(test_bad_arguments) {
    ocr_synth_style_t style;
    ck_assert_int_eq(ocr_synth_style_from_name("invoice", &style), OCR_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "receipt"));
    ck_assert_int_eq(ocr_synth_style_from_name("zh", &style), OCR_OK);
    ck_assert_int_eq(style, OCR_SYNTH_ZH);

    char *root = make_tmpdir();
    char *out = join(root, "out");
    struct {
        int64_t count;
        int height, threads, max_width, style;
    } bad[] = {{0, 48, 1, 0, 0}, {-5, 48, 1, 0, 0}, {10, 8, 1, 0, 0}, {10, 48, 0, 0, 0},
               {10, 48, 1, 50, 0}, {10, 48, 1, 0, 7}, {OCR_SYNTH_MAX_COUNT + 1LL, 48, 1, 0, 0}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        OcrSynthOptions opt = options((ocr_synth_style_t)bad[i].style, bad[i].count, 1, bad[i].threads);
        opt.height = bad[i].height, opt.max_width = bad[i].max_width;
        ck_assert_int_eq(ocr_synth_write(out, &opt, NULL), OCR_ERR_INVALID_ARG);
        ck_assert_msg(!ocr_file_exists(out), "case %zu created the output directory", i);
    }
    OcrSynthOptions ok = options(OCR_SYNTH_RECEIPT, 2, 1, 1);
    ck_assert_int_eq(ocr_synth_write("", &ok, NULL), OCR_ERR_INVALID_ARG);
    ck_assert_int_eq(ocr_synth_write(NULL, &ok, NULL), OCR_ERR_INVALID_ARG);

    if (style_available(OCR_SYNTH_RECEIPT)) {
        // An output path below a regular file cannot be created (also as root).
        char *file = join(root, "plain");
        ck_assert_int_eq(ocr_write_file_atomic(file, "x", 1), OCR_OK);
        char *under = join(file, "out");
        ck_assert_int_eq(ocr_synth_write(under, &ok, NULL), OCR_ERR_IO);
        ck_assert_ptr_nonnull(strstr(ocr_last_error(), under));
        free(under), free(file);
    }
    rm_rf(root);
    free(out), free(root);
}
END_TEST

START_TEST(test_fonts_missing) {
    char *root = make_tmpdir();
    char *empty = join(root, "no_fonts"), *out = join(root, "out");
    ck_assert_int_eq(ocr_make_dirs(empty), OCR_OK);
    OcrSynthOptions opt = options(OCR_SYNTH_RECEIPT, 5, 1, 1);
    opt.font_dir = empty;
    ocr_status_t st = ocr_synth_write(out, &opt, NULL);
    if (st == OCR_ERR_UNSUPPORTED) {
        printf("SKIP: %s\n", ocr_last_error());  // built without FreeType
    } else {
        ck_assert_int_eq(st, OCR_ERR_NOT_FOUND);
        ck_assert_msg(strstr(ocr_last_error(), "fonts-dejavu-core") && strstr(ocr_last_error(), empty),
                      "message: %s", ocr_last_error());
        ck_assert_msg(!ocr_file_exists(out), "nothing is written without fonts");
        // A directory of fonts without Chinese glyphs is not enough for zh.
        if (style_available(OCR_SYNTH_RECEIPT) && ocr_file_exists("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")) {
            OcrSynthOptions zh = options(OCR_SYNTH_ZH, 5, 1, 1);
            zh.font_dir = "/usr/share/fonts/truetype/dejavu";
            ck_assert_int_eq(ocr_synth_write(out, &zh, NULL), OCR_ERR_NOT_FOUND);
            ck_assert_msg(strstr(ocr_last_error(), "fonts-wqy-microhei") && strstr(ocr_last_error(), "CJK"),
                          "message: %s", ocr_last_error());
            // And font_dir is honoured: the DejaVu directory alone serves receipts.
            OcrSynth *s;
            OcrSynthOptions r = options(OCR_SYNTH_RECEIPT, 5, 1, 1);
            r.font_dir = "/usr/share/fonts/truetype/dejavu";
            ck_assert_int_eq(ocr_synth_create(&s, &r), OCR_OK);
            ck_assert_int_gt(ocr_synth_num_fonts(s), 5);
            ocr_synth_destroy(s);
        }
    }
    rm_rf(root);
    free(empty), free(out), free(root);
}
END_TEST

START_TEST(test_corpus_missing) {
    if (!style_available(OCR_SYNTH_RECEIPT)) return;  // fonts are checked first
    OcrSynthOptions opt = options(OCR_SYNTH_DOCUMENT, 5, 1, 1);
    opt.words_path = "/nonexistent/words";
    opt.fortunes_dir = "/nonexistent/fortunes";
    OcrSynth *s = NULL;
    ck_assert_int_eq(ocr_synth_create(&s, &opt), OCR_ERR_NOT_FOUND);
    ck_assert_msg(strstr(ocr_last_error(), "wamerican") && strstr(ocr_last_error(), "fortunes-min"), "message: %s",
                  ocr_last_error());
    // Receipts need no corpus: they fall back to built-in names.
    opt.style = OCR_SYNTH_RECEIPT;
    ck_assert_int_eq(ocr_synth_create(&s, &opt), OCR_OK);
    OcrSynthWorker *w;
    ck_assert_int_eq(ocr_synth_worker_create(&w, s), OCR_OK);
    OcrImage img;
    char text[OCR_SYNTH_TEXT_CAP];
    ck_assert_int_eq(ocr_synth_render(w, 0, &img, text), OCR_OK);
    ck_assert_int_eq(img.height, 48);
    ocr_image_free(&img);
    ocr_synth_worker_destroy(w);
    ocr_synth_destroy(s);
}
END_TEST

static Suite *synth_suite(void) {
    Suite *s = suite_create("synth");
    TCase *tc = tcase_create("synth");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_same_bytes_any_thread_count);
    tcase_add_test(tc, test_seeds_differ);
    tcase_add_test(tc, test_single_line_reproducible);
    tcase_add_loop_test(tc, test_dataset_per_style, 0, OCR_SYNTH_NUM_STYLES);
    tcase_add_test(tc, test_height_option);
    tcase_add_loop_test(tc, test_texts_per_style, 0, OCR_SYNTH_NUM_STYLES);
    tcase_add_test(tc, test_bad_arguments);
    tcase_add_test(tc, test_fonts_missing);
    tcase_add_test(tc, test_corpus_missing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(synth_suite()); }

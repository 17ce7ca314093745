// SimpleDataSet label files: every kind of line, per-reason accounting with examples,
// data_dir joining, JSON path lists, ratio subsets per epoch, image load failures.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "data/dataset.h"
#include "tests/common/test_util.h"

static char *tmpdir;  // a fresh directory per test (setup), removed by teardown

static void setup(void) { tmpdir = ocr_test_tmpdir("dataset_"); }

static void teardown(void) {
    ocr_test_remove_tree(tmpdir);
    free(tmpdir);
    tmpdir = NULL;
}

static const char *in_tmp(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s", tmpdir, name);
    return buf;
}

static void write_file(const char *name, const char *data, size_t len) {
    char path[2048];
    in_tmp(path, sizeof path, name);
    ck_assert_msg(ocr_write_file_atomic(path, data, len) == OCR_OK, "%s", ocr_last_error());
}

static void make_dict(OcrDict *d) {
    const char text[] = "a\nb\nc\n中\n";
    ck_assert_int_eq(ocr_dict_from_buffer(d, text, sizeof text - 1, "dict.txt", 1), OCR_OK);  // + " " = 6 classes
}

// Line numbers are in the comments; see the expectations below.
static const char kLabels[] =
    "\xEF\xBB\xBFimg/a.png\tab\n"                          // 1 BOM removed; ok
    "img/b.png\tba\r\n"                                    // 2 CRLF; ok "ba"
    "\n"                                                   // 3 empty: silent
    "img/c.png ab\n"                                       // 4 no tab
    "img/d.png\t\xFF" "ab\n"                               // 5 invalid UTF-8
    "img/e.png\t\n"                                        // 6 empty label
    "img/f.png\taaaaaaaaaaaaaaaaaaaaaaaaaa\n"              // 7 26 characters > 25
    "img/g.png\tXYZ\n"                                     // 8 nothing known
    "img/h.png\tab\textra\n"                               // 9 extra field: label "ab"
    "img/i.png\tab \n"                                     // 10 trailing space kept
    "[\"img/j1.png\", \"img/j2.png\", \"img/j3.png\"]\tcab\n"  // 11 JSON list
    "[]\tab\n"                                             // 12 empty list
    "[1, \"x.png\"]\tab\n"                                 // 13 non-string entry
    "[not json\tab\n"                                      // 14 a literal name
    "/abs/path.png\tc中\n"                                 // 15 absolute path kept
    "\tab\n"                                               // 16 empty path
    "img/k.png\ta?b\n"                                     // 17 '?' dropped and counted
    "img/l.png\t中\0\n"                                    // 18 NUL byte
    "img/m.png\tc";                                        // 19 no final newline

static void open_labels(OcrDataset *ds, const OcrDict *dict, const char *data_dir) {
    write_file("train.txt", kLabels, sizeof kLabels - 1);
    char path[2048];
    const char *files[1] = {in_tmp(path, sizeof path, "train.txt")};
    OcrDatasetOptions opt = {.data_dir = data_dir, .label_files = files, .num_label_files = 1, .seed = 7};
    ck_assert_msg(ocr_dataset_open(ds, &opt, dict) == OCR_OK, "%s", ocr_last_error());
}

START_TEST(test_label_lines) {
    OcrDict dict;
    make_dict(&dict);
    OcrDataset ds;
    open_labels(&ds, &dict, tmpdir);

    ck_assert_int_eq(ocr_dataset_size(&ds), 9);
    ck_assert_int_eq(ocr_dataset_num_valid(&ds), 9);
    const OcrSkipStats *sk = &ds.skipped;
    ck_assert_int_eq(sk->count[OCR_SKIP_NO_DELIMITER], 1);
    ck_assert_int_eq(sk->count[OCR_SKIP_BAD_UTF8], 2);
    ck_assert_int_eq(sk->count[OCR_SKIP_EMPTY_LABEL], 1);
    ck_assert_int_eq(sk->count[OCR_SKIP_LABEL_TOO_LONG], 1);
    ck_assert_int_eq(sk->count[OCR_SKIP_NO_KNOWN_CHARS], 1);
    ck_assert_int_eq(sk->count[OCR_SKIP_BAD_PATH], 3);
    ck_assert_int_eq(ocr_skip_stats_total(sk), 9);
    // One example per reason, with file:line of the first occurrence.
    const struct {
        ocr_skip_reason_t r;
        const char *where;
    } ex[] = {{OCR_SKIP_NO_DELIMITER, "train.txt:4:"}, {OCR_SKIP_BAD_UTF8, "train.txt:5:"},
              {OCR_SKIP_EMPTY_LABEL, "train.txt:6:"},  {OCR_SKIP_LABEL_TOO_LONG, "train.txt:7:"},
              {OCR_SKIP_NO_KNOWN_CHARS, "train.txt:8:"}, {OCR_SKIP_BAD_PATH, "train.txt:12:"}};
    for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++)
        ck_assert_msg(strstr(sk->example[ex[i].r], ex[i].where), "%s example \"%s\" lacks %s",
                      ocr_skip_reason_name(ex[i].r), sk->example[ex[i].r], ex[i].where);
    ck_assert_ptr_nonnull(strstr(sk->example[OCR_SKIP_LABEL_TOO_LONG], "26 characters"));
    ck_assert_ptr_nonnull(strstr(sk->example[OCR_SKIP_BAD_UTF8], "\\xff"));  // shown escaped
    ck_assert_str_eq(sk->example[OCR_SKIP_IMAGE_MISSING], "");

    const OcrLabelNotes *nt = &ds.notes;
    ck_assert_int_eq(nt->files, 1);
    ck_assert_int_eq(nt->lines, 19);
    ck_assert_int_eq(nt->empty_lines, 1);
    ck_assert_int_eq(nt->bom_files, 1);
    ck_assert_int_eq(nt->crlf_lines, 1);
    ck_assert_int_eq(nt->extra_field_lines, 1);
    ck_assert_int_eq(nt->trailing_space_labels, 1);
    ck_assert_ptr_nonnull(strstr(nt->extra_field_example, "train.txt:9:"));
    ck_assert_ptr_nonnull(strstr(nt->trailing_space_example, "train.txt:10:"));

    // Characters dropped by the dictionary: XYZ (line 8, rejected) and '?' (line 17).
    ck_assert_int_eq(ocr_char_counter_get(&ds.unknown_chars, 'X'), 1);
    ck_assert_int_eq(ocr_char_counter_get(&ds.unknown_chars, '?'), 1);
    ck_assert_int_eq(ds.unknown_chars.total, 4);

    // The samples, in file order.
    const struct {
        const char *path, *text;
        int64_t line;
        int len;
        int32_t label[4];
    } want[] = {
        {"img/a.png", "ab", 1, 2, {1, 2}},
        {"img/b.png", "ba", 2, 2, {2, 1}},
        {"img/h.png", "ab", 9, 2, {1, 2}},
        {"img/i.png", "ab ", 10, 3, {1, 2, 5}},
        {NULL, "cab", 11, 3, {3, 1, 2}},
        {"[not json", "ab", 14, 2, {1, 2}},
        {"/abs/path.png", "c中", 15, 2, {3, 4}},
        {"img/k.png", "a?b", 17, 2, {1, 2}},
        {"img/m.png", "c", 19, 1, {3}},
    };
    for (int i = 0; i < 9; i++) {
        OcrSample s;
        ck_assert_int_eq(ocr_dataset_get(&ds, i, &s), OCR_OK);
        ck_assert_str_eq(s.text, want[i].text);
        ck_assert_int_eq(s.line, want[i].line);
        ck_assert_int_eq(s.label_len, want[i].len);
        for (int k = 0; k < want[i].len; k++) ck_assert_int_eq(s.label[k], want[i].label[k]);
        ck_assert_ptr_nonnull(strstr(s.label_file, "train.txt"));
        char expect_path[2048];
        if (!want[i].path) {
            snprintf(expect_path, sizeof expect_path, "%s/img/j", tmpdir);
            ck_assert_msg(strncmp(s.path, expect_path, strlen(expect_path)) == 0, "%s", s.path);
        } else if (want[i].path[0] == '/') {
            ck_assert_str_eq(s.path, want[i].path);
        } else {
            snprintf(expect_path, sizeof expect_path, "%s/%s", tmpdir, want[i].path);
            ck_assert_str_eq(s.path, expect_path);
        }
    }
    OcrSample s;
    ck_assert_int_eq(ocr_dataset_get(&ds, 9, &s), OCR_ERR_INVALID_ARG);
    ck_assert_int_eq(ocr_dataset_get(&ds, -1, &s), OCR_ERR_INVALID_ARG);
    ocr_skip_stats_log(&ds.skipped, "test label file");  // one warning line per reason (stderr)
    ocr_dataset_close(&ds);

    // data_dir with a trailing slash, and none at all.
    open_labels(&ds, &dict, "root/");
    ck_assert_int_eq(ocr_dataset_get(&ds, 0, &s), OCR_OK);
    ck_assert_str_eq(s.path, "root/img/a.png");
    ocr_dataset_close(&ds);
    open_labels(&ds, &dict, NULL);
    ck_assert_int_eq(ocr_dataset_get(&ds, 0, &s), OCR_OK);
    ck_assert_str_eq(s.path, "img/a.png");
    ocr_dataset_close(&ds);
    ocr_dict_free(&dict);
}
END_TEST

START_TEST(test_json_path_pick) {
    OcrDict dict;
    make_dict(&dict);
    OcrDataset ds;
    open_labels(&ds, &dict, "d");
    int seen[3] = {0, 0, 0};
    char first_pick[64];
    for (uint64_t epoch = 0; epoch < 40; epoch++) {
        ocr_dataset_set_epoch(&ds, epoch);
        OcrSample s, again;
        ck_assert_int_eq(ocr_dataset_get(&ds, 4, &s), OCR_OK);
        ck_assert_int_eq(ocr_dataset_get(&ds, 4, &again), OCR_OK);
        ck_assert_str_eq(s.path, again.path);  // stable within an epoch
        ck_assert_str_eq(s.text, "cab");
        int k = -1;
        for (int j = 0; j < 3; j++) {
            char p[32];
            snprintf(p, sizeof p, "d/img/j%d.png", j + 1);
            if (!strcmp(s.path, p)) k = j;
        }
        ck_assert_msg(k >= 0, "pick %s is not one of the list", s.path);
        seen[k]++;
        if (epoch == 0) snprintf(first_pick, sizeof first_pick, "%s", s.path);
    }
    ck_assert(seen[0] > 0 && seen[1] > 0 && seen[2] > 0);
    // Reproducible: back at epoch 0, the same pick.
    ocr_dataset_set_epoch(&ds, 0);
    OcrSample s;
    ck_assert_int_eq(ocr_dataset_get(&ds, 4, &s), OCR_OK);
    ck_assert_str_eq(s.path, first_pick);
    ocr_dataset_close(&ds);
    ocr_dict_free(&dict);
}
END_TEST

// n valid lines "f<file>_<i>.png\ta".
static void write_simple_labels(const char *name, int file, int n) {
    char *buf = malloc((size_t)n * 32 + 1);
    size_t len = 0;
    for (int i = 0; i < n; i++) len += (size_t)sprintf(buf + len, "f%d_%d.png\ta\n", file, i);
    write_file(name, buf, len);
    free(buf);
}

START_TEST(test_ratio_subsets) {
    OcrDict dict;
    make_dict(&dict);
    write_simple_labels("a.txt", 0, 10);
    write_simple_labels("b.txt", 1, 7);
    write_simple_labels("c.txt", 2, 5);
    char pa[2048], pb[2048], pc[2048];
    const char *files[3] = {in_tmp(pa, sizeof pa, "a.txt"), in_tmp(pb, sizeof pb, "b.txt"),
                            in_tmp(pc, sizeof pc, "c.txt")};
    const double ratios[3] = {1.0, 0.5, 0.5};
    OcrDatasetOptions opt = {.label_files = files, .num_label_files = 3, .ratios = ratios, .num_ratios = 3, .seed = 11};
    OcrDataset ds;
    ck_assert_msg(ocr_dataset_open(&ds, &opt, &dict) == OCR_OK, "%s", ocr_last_error());
    // 10 + round_half_even(3.5) + round_half_even(2.5) = 10 + 4 + 2
    ck_assert_int_eq(ocr_dataset_size(&ds), 16);
    ck_assert_int_eq(ocr_dataset_num_valid(&ds), 22);

    char subsets[8][256];
    for (int epoch = 0; epoch < 8; epoch++) {
        ocr_dataset_set_epoch(&ds, (uint64_t)epoch);
        ck_assert_int_eq(ocr_dataset_size(&ds), 16);
        size_t o = 0;
        int prev_b = -1, prev_c = -1;
        for (int i = 0; i < 16; i++) {
            OcrSample s;
            ck_assert_int_eq(ocr_dataset_get(&ds, i, &s), OCR_OK);
            int f, k;
            ck_assert_int_eq(sscanf(s.path, "f%d_%d.png", &f, &k), 2);
            if (i < 10) {
                ck_assert(f == 0 && k == i);  // ratio 1: everything, in order
            } else if (i < 14) {
                ck_assert(f == 1 && k > prev_b && k < 7);  // a sorted subset of b
                prev_b = k;
            } else {
                ck_assert(f == 2 && k > prev_c && k < 5);
                prev_c = k;
            }
            if (i >= 10) o += (size_t)snprintf(subsets[epoch] + o, sizeof subsets[epoch] - o, "%d,", k);
        }
    }
    int distinct = 0;
    for (int e = 1; e < 8; e++) distinct += strcmp(subsets[e], subsets[0]) != 0;
    ck_assert_int_ge(distinct, 4);  // re-drawn per epoch
    ocr_dataset_set_epoch(&ds, 3);
    char again[256];
    size_t o = 0;
    for (int i = 10; i < 16; i++) {
        OcrSample s;
        ocr_dataset_get(&ds, i, &s);
        int f, k;
        sscanf(s.path, "f%d_%d.png", &f, &k);
        o += (size_t)snprintf(again + o, sizeof again - o, "%d,", k);
    }
    ck_assert_str_eq(again, subsets[3]);  // a function of (seed, epoch)
    ocr_dataset_close(&ds);

    // One ratio applies to every file: round(5) + round(3.5) + round(2.5) = 5 + 4 + 2.
    const double half = 0.5;
    opt.ratios = &half, opt.num_ratios = 1;
    ck_assert_int_eq(ocr_dataset_open(&ds, &opt, &dict), OCR_OK);
    ck_assert_int_eq(ocr_dataset_size(&ds), 11);
    ocr_dataset_close(&ds);

    // Bad ratio lists.
    opt.ratios = ratios, opt.num_ratios = 2;
    ck_assert_int_eq(ocr_dataset_open(&ds, &opt, &dict), OCR_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "ratio_list"));
    const double bad[3] = {1.0, 1.5, 0.0};
    opt.ratios = bad, opt.num_ratios = 3;
    ck_assert_int_eq(ocr_dataset_open(&ds, &opt, &dict), OCR_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "1.5"));
    ocr_dict_free(&dict);
}
END_TEST

START_TEST(test_open_errors) {
    OcrDict dict;
    make_dict(&dict);
    OcrDataset ds;
    write_simple_labels("ok.txt", 0, 3);
    char p1[2048], p2[2048];
    const char *files[2] = {in_tmp(p1, sizeof p1, "ok.txt"), in_tmp(p2, sizeof p2, "missing.txt")};
    OcrDatasetOptions opt = {.label_files = files, .num_label_files = 2};
    ck_assert_int_eq(ocr_dataset_open(&ds, &opt, &dict), OCR_ERR_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), p2));
    ck_assert_ptr_null(ds.entries_);  // everything freed

    opt.num_label_files = 0;
    ck_assert_int_eq(ocr_dataset_open(&ds, &opt, &dict), OCR_ERR_CONFIG);
    opt.num_label_files = 1;
    opt.delimiter = "";
    ck_assert_int_eq(ocr_dataset_open(&ds, &opt, &dict), OCR_ERR_CONFIG);
    opt.delimiter = NULL;
    opt.max_text_length = -1;
    ck_assert_int_eq(ocr_dataset_open(&ds, &opt, &dict), OCR_ERR_CONFIG);
    opt.max_text_length = 0;
    ck_assert_int_eq(ocr_dataset_open(&ds, &opt, NULL), OCR_ERR_INVALID_ARG);

    // Nothing usable: FORMAT, with the counts in the message.
    const char junk[] = "no tab here\nnor here\nimg.png\t\n";
    write_file("junk.txt", junk, sizeof junk - 1);
    const char *junk_files[1] = {in_tmp(p1, sizeof p1, "junk.txt")};
    opt.label_files = junk_files;
    ck_assert_int_eq(ocr_dataset_open(&ds, &opt, &dict), OCR_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "no_delimiter 2"));
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "empty_label 1"));
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "junk.txt"));
    ocr_dict_free(&dict);
}
END_TEST

START_TEST(test_delimiter_and_default_dict) {
    OcrDict dict;
    ck_assert_int_eq(ocr_dict_load(&dict, NULL, 0), OCR_OK);  // 0-9a-z, lower-cased
    const char lines[] = "x.png | Hello 42\ny.png\tHI\nz.png | !!\n";
    write_file("pipe.txt", lines, sizeof lines - 1);
    char p[2048];
    const char *files[1] = {in_tmp(p, sizeof p, "pipe.txt")};
    OcrDatasetOptions opt = {.label_files = files, .num_label_files = 1, .delimiter = " | ", .max_text_length = 10};
    OcrDataset ds;
    ck_assert_int_eq(ocr_dataset_open(&ds, &opt, &dict), OCR_OK);
    ck_assert_int_eq(ocr_dataset_size(&ds), 1);
    ck_assert_int_eq(ds.skipped.count[OCR_SKIP_NO_DELIMITER], 1);    // the tab line
    ck_assert_int_eq(ds.skipped.count[OCR_SKIP_NO_KNOWN_CHARS], 1);  // "!!"
    ck_assert_ptr_nonnull(strstr(ds.skipped.example[OCR_SKIP_NO_DELIMITER], "\" | \""));
    OcrSample s;
    ck_assert_int_eq(ocr_dataset_get(&ds, 0, &s), OCR_OK);
    ck_assert_str_eq(s.path, "x.png");
    ck_assert_str_eq(s.text, "Hello 42");
    ck_assert_int_eq(s.label_len, 7);  // "hello42": the space is not in the default charset
    ck_assert_int_eq(s.label[0], 10 + ('h' - 'a') + 1);
    ck_assert_int_eq(s.label[6], 3);  // '2'
    ck_assert_int_eq(ocr_char_counter_get(&ds.unknown_chars, ' '), 1);
    ck_assert_int_eq(ocr_char_counter_get(&ds.unknown_chars, '!'), 2);
    ocr_dataset_close(&ds);
    ocr_dict_free(&dict);
}
END_TEST

// MultiLabelEncode's rule (max_encoded_length = max_text_length − 2): a label of more known
// characters is skipped as too long; unknown characters do not count (PaddleOCR encodes first).
START_TEST(test_max_encoded_length) {
    OcrDict dict;
    ck_assert_int_eq(ocr_dict_load(&dict, NULL, 0), OCR_OK);  // 0-9a-z
    const char lines[] = "a.png\tabcd\nb.png\tabcde\nc.png\tab!!!cd\nd.png\tabcdef\n";
    write_file("enc.txt", lines, sizeof lines - 1);
    char p[2048];
    const char *files[1] = {in_tmp(p, sizeof p, "enc.txt")};
    OcrDatasetOptions opt = {.label_files = files, .num_label_files = 1, .max_text_length = 7, .max_encoded_length = 5};
    OcrDataset ds;
    ck_assert_int_eq(ocr_dataset_open(&ds, &opt, &dict), OCR_OK);
    ck_assert_int_eq(ocr_dataset_size(&ds), 3);  // abcd, abcde, ab!!!cd (4 known characters)
    ck_assert_int_eq(ds.skipped.count[OCR_SKIP_LABEL_TOO_LONG], 1);
    ck_assert_ptr_nonnull(strstr(ds.skipped.example[OCR_SKIP_LABEL_TOO_LONG], "enc.txt:4:"));
    ck_assert_ptr_nonnull(strstr(ds.skipped.example[OCR_SKIP_LABEL_TOO_LONG], "MultiLabelEncode"));
    ocr_dataset_close(&ds);
    ocr_dict_free(&dict);
}
END_TEST

START_TEST(test_load_image_reasons) {
    OcrDict dict;
    make_dict(&dict);
    mkdir(in_tmp((char[2048]){0}, 2048, "img"), 0755);
    OcrImage img;
    ck_assert_int_eq(ocr_image_alloc(&img, 6, 4, 3), OCR_OK);
    memset(img.pixels, 90, 6 * 4 * 3);
    char p[2048];
    ck_assert_int_eq(ocr_image_write_png(in_tmp(p, sizeof p, "img/good.png"), &img), OCR_OK);
    ocr_image_free(&img);
    write_file("img/corrupt.png", "\x89PNG\r\n\x1a\nnot really", 18);
    write_file("img/bitmap.png", "BM\x36\0\0\0\0\0\0\0", 10);
    const char labels[] =
        "img/good.png\tab\n"
        "img/absent.png\tab\n"
        "img/corrupt.png\tab\n"
        "img/bitmap.png\tab\n"
        "img\tab\n";  // a directory
    write_file("l.txt", labels, sizeof labels - 1);
    const char *files[1] = {in_tmp(p, sizeof p, "l.txt")};
    OcrDatasetOptions opt = {.data_dir = tmpdir, .label_files = files, .num_label_files = 1};
    OcrDataset ds;
    ck_assert_int_eq(ocr_dataset_open(&ds, &opt, &dict), OCR_OK);
    ck_assert_int_eq(ocr_dataset_size(&ds), 5);

    ocr_skip_reason_t r;
    ck_assert_int_eq(ocr_dataset_load_image(&ds, 0, OCR_CHANNELS_BGR, &img, &r), OCR_OK);
    ck_assert(img.width == 6 && img.height == 4 && img.channels == 3 && img.pixels[5] == 90);
    ocr_image_free(&img);

    OcrSkipStats stats = {0};
    const struct {
        ocr_status_t st;
        ocr_skip_reason_t r;
        const char *file;
    } want[] = {{OCR_ERR_NOT_FOUND, OCR_SKIP_IMAGE_MISSING, "absent.png"},
                {OCR_ERR_FORMAT, OCR_SKIP_IMAGE_CORRUPT, "corrupt.png"},
                {OCR_ERR_UNSUPPORTED, OCR_SKIP_IMAGE_UNSUPPORTED, "bitmap.png"},
                {OCR_ERR_IO, OCR_SKIP_IMAGE_UNREADABLE, "img"}};
    for (int i = 0; i < 4; i++) {
        ocr_status_t st = ocr_dataset_load_image(&ds, i + 1, OCR_CHANNELS_BGR, &img, &r);
        ck_assert_msg(st == want[i].st, "sample %d: status %d (%s)", i + 1, st, ocr_last_error());
        ck_assert_int_eq(r, want[i].r);
        ck_assert_ptr_null(img.pixels);
        char where[64];
        snprintf(where, sizeof where, "l.txt:%d", i + 2);
        ck_assert_msg(strstr(ocr_last_error(), where) && strstr(ocr_last_error(), want[i].file),
                      "message \"%s\" lacks %s or %s", ocr_last_error(), where, want[i].file);
        ocr_skip_stats_add(&stats, r, "%s", ocr_last_error());
    }
    ck_assert_int_eq(ocr_dataset_load_image(&ds, 99, OCR_CHANNELS_BGR, &img, &r), OCR_ERR_INVALID_ARG);
    ck_assert_int_eq(r, OCR_SKIP_REASON_COUNT);

    // Stats merge keeps the first example and adds counts.
    OcrSkipStats total = {0};
    ocr_skip_stats_add(&total, OCR_SKIP_IMAGE_MISSING, "earlier example");
    ocr_skip_stats_merge(&total, &stats);
    ck_assert_int_eq(total.count[OCR_SKIP_IMAGE_MISSING], 2);
    ck_assert_str_eq(total.example[OCR_SKIP_IMAGE_MISSING], "earlier example");
    ck_assert_ptr_nonnull(strstr(total.example[OCR_SKIP_IMAGE_CORRUPT], "corrupt.png"));
    ck_assert_int_eq(ocr_skip_stats_total(&total), 5);
    ck_assert_str_eq(ocr_skip_reason_name(OCR_SKIP_IMAGE_UNSUPPORTED), "image_unsupported");
    ck_assert_int_eq(ocr_skip_reason_for_image_status(OCR_ERR_OOM, &r), 0);
    ocr_dataset_close(&ds);
    ocr_dict_free(&dict);
}
END_TEST

int main(void) {
    Suite *s = suite_create("data_dataset");
    TCase *tc = tcase_create("dataset");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_label_lines);
    tcase_add_test(tc, test_json_path_pick);
    tcase_add_test(tc, test_ratio_subsets);
    tcase_add_test(tc, test_open_errors);
    tcase_add_test(tc, test_delimiter_and_default_dict);
    tcase_add_test(tc, test_load_image_reasons);
    tcase_add_test(tc, test_max_encoded_length);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}

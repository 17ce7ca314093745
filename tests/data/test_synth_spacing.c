// The synthetic generator's spacing and fonts (issue #30):
// - spacing: over thousands of lines per style, the widest gap inside a word stays at most
//   SYNTH_GAP_RATIO times the narrowest gap between words, measured from the renderer's glyph
//   boxes (synth_measure_gaps) and, independently, from the rendered image: the blank column
//   runs of the warped ink coverage (after resampling, perspective and blur, before paper and
//   ink effects that only change tones) between the characters; with the guard off the drawn
//   styles do break the rule (so the test can fail);
// - fonts: the declared set (nothing from other installed packages), fonts.tsv with each file's
//   sha256 (checked against sha256sum), the same seed giving the same images and manifest twice,
//   and a differing manifest (earlier run or --compare-fonts) reported with the faces named.
#define _GNU_SOURCE
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fileio.h"
#include "data/image.h"
#include "data/synth.h"
#include "data/synth_internal.h"
#include "tests/common/test_util.h"

// Whether fonts for the style are installed; prints SKIP when not.
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
    printf("SKIP: style %s: %s\n", ocr_synth_style_name(style), ocr_last_error());
    return 0;
}

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", a, b);
    return p;
}

static char *slurp(const char *path, size_t *size) {
    char *data = NULL;
    size_t n = 0;
    ck_assert_msg(ocr_read_file(path, &data, &n) == OCR_OK, "reading %s: %s", path, ocr_last_error());
    if (size) *size = n;
    return data;
}

// ---- spacing ---------------------------------------------------------------------------

// The image's gaps: for each pair of consecutive inked characters, the longest run of blank
// columns (no coverage >= BLANK_BELOW in the line's band of rows) between the two characters'
// centres, in output pixels. Intra pairs (nothing between them) and word breaks (a space or
// column gap between them) are kept apart, as the label says, not as the renderer does.
#define BLANK_BELOW 48
// The image's gaps lose about a pixel at each edge to bilinear resampling and blur, and
// perspective changes widths along the line; the rule from the glyph boxes (0.6) is checked
// on the image with this allowance.
#define IMAGE_RATIO 0.75f

typedef struct {
    float max_intra, min_inter;
    int n_intra, n_inter;
} ImageGaps;

static void image_gaps(const SynthLineInfo *li, ImageGaps *g) {
    g->max_intra = -1.0f, g->min_inter = 1e9f;
    g->n_intra = g->n_inter = 0;
    int prev = -1, brk = 0;
    for (int i = 0; i < li->n; i++) {
        uint32_t cp = li->box[i].cp;
        if (cp == ' ' || cp == '\t') {
            brk = 1;
            continue;
        }
        if (li->box[i].x1 <= li->box[i].x0) continue;
        if (prev >= 0) {
            float ca = 0.5f * (li->ox0[prev] + li->ox1[prev]), cb = 0.5f * (li->ox0[i] + li->ox1[i]);
            int x0 = (int)ceilf(ca), x1 = (int)floorf(cb);
            float ty = fminf(li->oy0[prev], li->oy0[i]), by = fmaxf(li->oy1[prev], li->oy1[i]);
            int y0 = (int)floorf(ty), y1 = (int)ceilf(by);
            if (y0 < 0) y0 = 0;
            if (y1 > li->height) y1 = li->height;
            if (x0 < 0) x0 = 0;
            if (x1 > li->width) x1 = li->width;
            int run = 0, best = 0;
            for (int x = x0; x < x1; x++) {
                int ink = 0;
                for (int y = y0; y < y1 && !ink; y++) ink = li->coverage[(size_t)y * li->width + x] >= BLANK_BELOW;
                run = ink ? 0 : run + 1;
                if (run > best) best = run;
            }
            if (brk) {
                g->n_inter++;
                if ((float)best < g->min_inter) g->min_inter = (float)best;
            } else {
                g->n_intra++;
                if ((float)best > g->max_intra) g->max_intra = (float)best;
            }
        }
        prev = i, brk = 0;
    }
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

typedef struct {
    int lines, with_breaks;
    int box_bad, image_bad;  // lines breaking the rule by boxes / by the image
    int guard_widened, guard_tracking;
    float *box_ratio, *image_ratio;  // per line with breaks: max intra / min inter
} SpacingRun;

static void run_style(ocr_synth_style_t style, int n, int guard, SpacingRun *out) {
    OcrSynthOptions opt;
    ocr_synth_default_options(&opt);
    opt.style = style, opt.count = n, opt.seed = 30 + (uint64_t)style;
    OcrSynth *s;
    ck_assert_int_eq(ocr_synth_create(&s, &opt), OCR_OK);
    OcrSynthWorker *w;
    ck_assert_int_eq(ocr_synth_worker_create(&w, s), OCR_OK);
    SynthRenderer *r = synth_worker_renderer(w);
    synth_renderer_set_guard(r, guard);
    memset(out, 0, sizeof *out);
    out->box_ratio = calloc((size_t)n, sizeof(float));
    out->image_ratio = calloc((size_t)n, sizeof(float));
    for (int i = 0; i < n; i++) {
        OcrImage img;
        char text[OCR_SYNTH_TEXT_CAP];
        ck_assert_msg(ocr_synth_render(w, i, &img, text) == OCR_OK, "line %d: %s", i, ocr_last_error());
        const SynthLineInfo *li = synth_renderer_last_line(r);
        ck_assert_int_eq(li->width, img.width);
        ck_assert_ptr_nonnull(li->coverage);
        out->lines++;
        // The boxes are the label's characters: as many, spaces where the label has them.
        int chars = 0, spaces = 0, box_spaces = 0;
        for (const char *p = text; *p; p++) chars += ((unsigned char)*p & 0xC0) != 0x80, spaces += *p == ' ';
        ck_assert_int_eq(li->n, chars);
        for (int k = 0; k < li->n; k++) box_spaces += li->box[k].cp == ' ' || li->box[k].cp == '\t';
        ck_assert_int_eq(box_spaces, spaces);
        // The rule from the boxes, recomputed here.
        SynthGaps g;
        synth_measure_gaps(li->box, li->n, &g);
        ck_assert_int_eq(g.max_intra, li->gaps.max_intra);
        ck_assert_int_eq(g.min_inter, li->gaps.min_inter);
        out->guard_widened += li->guard >= 1, out->guard_tracking += li->guard == 2;
        if (g.n_inter > 0) {
            int k = out->with_breaks++;
            out->box_ratio[k] = g.n_intra ? (float)g.max_intra / fmaxf((float)g.min_inter, 0.5f) : 0.0f;
            int ok = synth_gaps_ok(&g);
            out->box_bad += !ok;
            if (guard)
                ck_assert_msg(ok, "%s line %d '%s': widest gap inside a word %d px, narrowest between words %d px",
                              ocr_synth_style_name(style), i, text, g.max_intra, g.min_inter);
            ImageGaps ig;
            image_gaps(li, &ig);
            out->image_ratio[k] = ig.n_intra ? ig.max_intra / fmaxf(ig.min_inter, 0.5f) : 0.0f;
            out->image_bad += ig.n_intra && ig.max_intra > IMAGE_RATIO * ig.min_inter;
        }
        ocr_image_free(&img);
    }
    ocr_synth_worker_destroy(w);
    ocr_synth_destroy(s);
}

static void print_run(const char *what, ocr_synth_style_t style, SpacingRun *r) {
    int k = r->with_breaks;
    if (k == 0) {
        printf("%s %s: %d lines, none with a word break\n", ocr_synth_style_name(style), what, r->lines);
        return;
    }
    qsort(r->box_ratio, (size_t)k, sizeof(float), cmp_float);
    qsort(r->image_ratio, (size_t)k, sizeof(float), cmp_float);
    printf("%-8s %-9s %d lines, %d with word breaks; max intra / min inter gap, boxes: median %.2f p99 %.2f max "
           "%.2f, %d over %.2f; image: median %.2f p99 %.2f max %.2f, %d over %.2f; guard widened %d, cut "
           "tracking %d\n",
           ocr_synth_style_name(style), what, r->lines, k, r->box_ratio[k / 2], r->box_ratio[k * 99 / 100],
           r->box_ratio[k - 1], r->box_bad, SYNTH_GAP_RATIO, r->image_ratio[k / 2], r->image_ratio[k * 99 / 100],
           r->image_ratio[k - 1], r->image_bad, IMAGE_RATIO, r->guard_widened, r->guard_tracking);
}

static const int LINES[OCR_SYNTH_NUM_STYLES] = {3000, 2000, 2000};

START_TEST(test_spacing_per_style) {
    ocr_synth_style_t style = (ocr_synth_style_t)_i;
    if (!style_available(style)) return;
    SpacingRun on, off;
    run_style(style, LINES[style], 1, &on);
    run_style(style, LINES[style] / 2, 0, &off);
    print_run("guarded", style, &on);
    print_run("unguarded", style, &off);
    ck_assert_int_eq(on.box_bad, 0);
    ck_assert_msg(on.with_breaks > LINES[style] / (style == OCR_SYNTH_ZH ? 10 : 2), "%s: %d lines with spaces",
                  ocr_synth_style_name(style), on.with_breaks);
    // The image agrees: at most 0.5% of the lines (glyphs whose own blank columns, as in '"'
    // or a CJK character, are wider than their neighbours' gap) exceed the allowance.
    ck_assert_msg(on.image_bad * 200 <= on.with_breaks, "%s: %d of %d lines break the rule in the image",
                  ocr_synth_style_name(style), on.image_bad, on.with_breaks);
    // Without the guard the styles' own draws (tracking up to 0.3 em, spaces down to 0.8x) break it.
    if (style != OCR_SYNTH_ZH) ck_assert_int_gt(off.box_bad, 0);
    free(on.box_ratio), free(on.image_ratio), free(off.box_ratio), free(off.image_ratio);
}
END_TEST

// The lines, drawn with 400 different streams each (fonts, sizes, tracking up to 0.3 em,
// spaces down to 0.8x): the rule holds on every one, and the guard had work to do on some.
START_TEST(test_receipt_tokens) {
    if (!style_available(OCR_SYNTH_RECEIPT)) return;
    static const char *const TEXTS[] = {"Diet Cola\t2.99", "Diet Cola 2.99", "DATE 12/05/2024 No. 5",
                                        "e.g. 3 X 1.25", "T O T A L ... 10.00", "i.i. l.l 1.1"};
    OcrSynthOptions opt;
    ocr_synth_default_options(&opt);
    OcrSynth *s;
    ck_assert_int_eq(ocr_synth_create(&s, &opt), OCR_OK);
    SynthRenderer *r;
    ck_assert_int_eq(synth_renderer_create(&r, &s->fonts), OCR_OK);
    int guarded = 0;
    for (int t = 0; t < (int)(sizeof TEXTS / sizeof TEXTS[0]); t++)
        for (int k = 0; k < 400; k++) {
            OcrRng rng = ocr_rng_make(7, 1000u * (uint64_t)t + (uint64_t)k);
            OcrImage img;
            ck_assert_int_eq(synth_render_line(r, TEXTS[t], OCR_SYNTH_RECEIPT, 32, 427, &rng, &img), OCR_OK);
            const SynthLineInfo *li = synth_renderer_last_line(r);
            ck_assert_msg(li->gaps.n_inter > 0 && synth_gaps_ok(&li->gaps), "'%s' #%d: intra %d px, inter %d px",
                          TEXTS[t], k, li->gaps.max_intra, li->gaps.min_inter);
            guarded += li->guard > 0;
            ocr_image_free(&img);
        }
    printf("receipt tokens: the guard widened spaces on %d of %d lines\n", guarded, 400 * 6);
    ck_assert_int_gt(guarded, 0);
    synth_renderer_destroy(r);
    ocr_synth_destroy(s);
}
END_TEST

// Prices, dates and abbreviations: punctuation inside a token is never spaced like a word break.
START_TEST(test_measure_gaps) {
    // "2.99 No." with boxes: '2' [0,8) '.' [10,12) '9' [14,22) '9' [23,31) ' ' 'N' [40,48) 'o' [49,55) '.' [57,59)
    SynthCharBox b[] = {{'2', 0, 8}, {'.', 10, 12}, {'9', 14, 22}, {'9', 23, 31}, {' ', 0, 0},
                        {'N', 40, 48}, {'o', 49, 55}, {'.', 57, 59}};
    SynthGaps g;
    synth_measure_gaps(b, 8, &g);
    ck_assert_int_eq(g.n_intra, 5);
    ck_assert_int_eq(g.n_inter, 1);
    ck_assert_int_eq(g.max_intra, 2);
    ck_assert_int_eq(g.min_inter, 9);
    ck_assert(synth_gaps_ok(&g));
    b[1].x1 = 11, b[2].x0 = 17;  // "2. 99": a 6-pixel gap after the point against 9 between words
    synth_measure_gaps(b, 8, &g);
    ck_assert_int_eq(g.max_intra, 6);
    ck_assert(!synth_gaps_ok(&g));
    // No word break: nothing to keep apart.
    synth_measure_gaps(b, 4, &g);
    ck_assert_int_eq(g.n_inter, 0);
    ck_assert(synth_gaps_ok(&g));
    // A tab (column gap) is a word break; touching words are not.
    SynthCharBox t[] = {{'a', 0, 5}, {'\t', 0, 0}, {'b', 5, 9}};
    synth_measure_gaps(t, 3, &g);
    ck_assert_int_eq(g.n_inter, 1);
    ck_assert(!synth_gaps_ok(&g));
}
END_TEST

// ---- fonts -----------------------------------------------------------------------------

START_TEST(test_sha256) {
    char hex[65];
    synth_sha256_hex((const uint8_t *)"", 0, hex);
    ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    synth_sha256_hex((const uint8_t *)"abc", 3, hex);
    ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";  // 56 bytes: two padding blocks
    synth_sha256_hex((const uint8_t *)two, strlen(two), hex);
    ck_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}
END_TEST

// The manifest's rows: family, face, sha256 (as sha256sum computes it), path.
START_TEST(test_manifest_declared_set) {
    ocr_synth_style_t style = (ocr_synth_style_t)_i;
    if (!style_available(style)) return;
    OcrSynthOptions opt;
    ocr_synth_default_options(&opt);
    opt.style = style;
    OcrSynth *s;
    ck_assert_int_eq(ocr_synth_create(&s, &opt), OCR_OK);
    char *m = strdup(ocr_synth_fonts_manifest(s));
    ck_assert_msg(m[0] == '#', "manifest: %s", m);
    int rows = 0, mono = 0, have_sha256sum = system("sha256sum /dev/null >/dev/null 2>&1") == 0;
    char *save = NULL;
    for (char *line = strtok_r(m, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#') continue;
        char family[128], hex[80], path[1024];
        int face;
        ck_assert_msg(sscanf(line, "%127[^\t]\t%d\t%79[^\t]\t%1023[^\n]", family, &face, hex, path) == 4, "row '%s'",
                      line);
        rows++;
        mono += strstr(family, "Mono") != NULL;
        ck_assert_int_eq(strlen(hex), 64);
        // Only the declared packages' files: nothing from fonts-dejavu-extra (condensed, oblique,
        // ExtraLight) even where it is installed.
        ck_assert_msg(!strstr(path, "Condensed") && !strstr(path, "Oblique") && !strstr(path, "ExtraLight") &&
                          !strstr(path, "MathTeX"),
                      "undeclared font %s", path);
        if (strstr(path, "/liberation/"))  // liberation (1.x) only when liberation2 lacks the face
            ck_assert_msg(!ocr_file_exists("/usr/share/fonts/truetype/liberation2/LiberationMono-Regular.ttf"),
                          "%s taken although fonts-liberation2 is installed", path);
        size_t n;
        char *data = slurp(path, &n);
        char mine[65];
        synth_sha256_hex((const uint8_t *)data, n, mine);
        free(data);
        ck_assert_str_eq(hex, mine);
        if (have_sha256sum) {
            char cmd[1100], out[128] = "";
            snprintf(cmd, sizeof cmd, "sha256sum '%s'", path);
            FILE *p = popen(cmd, "r");
            ck_assert_ptr_nonnull(p);
            ck_assert_ptr_nonnull(fgets(out, sizeof out, p));
            pclose(p);
            ck_assert_msg(strncmp(out, hex, 64) == 0, "%s: sha256sum says %.64s, the manifest %s", path, out, hex);
        }
    }
    ck_assert_int_eq(rows, ocr_synth_num_fonts(s));
    if (style == OCR_SYNTH_ZH) {
        ck_assert_int_eq(rows, 2);  // WenQuanYi Micro Hei and its Mono face
    } else {
        ck_assert_int_ge(rows, 6);  // fonts-dejavu-core alone
        ck_assert_int_le(rows, 18);
        ck_assert_int_ge(mono, 2);
    }
    free(m);
    ocr_synth_destroy(s);
}
END_TEST

// A declared table over files of a temporary directory: the first present candidate is taken,
// older candidates are reported as fallbacks and absent faces as missing, and another font file
// appearing (one more package installed) changes nothing, while the newer package does (and the
// manifests say so).
START_TEST(test_declared_table) {
    const char *mono = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf";
    const char *sans = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
    const char *bold = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf";
    if (!ocr_file_exists(mono) || !ocr_file_exists(sans) || !ocr_file_exists(bold)) {
        printf("SKIP: fonts-dejavu-core is not installed\n");
        return;
    }
    char *root = ocr_test_tmpdir("ocr_test_synth_table_");
    char *nd = join(root, "new"), *od = join(root, "old");
    ck_assert_int_eq(ocr_make_dirs(nd), OCR_OK);
    ck_assert_int_eq(ocr_make_dirs(od), OCR_OK);
    char *new_mono = join(nd, "Mono.ttf"), *old_mono = join(od, "Mono.ttf");
    char *new_sans = join(nd, "Sans.ttf"), *old_sans = join(od, "Sans.ttf"), *extra = join(nd, "Extra.ttf");
    char *gone = join(nd, "Gone.ttf");
    ck_assert_int_eq(symlink(mono, new_mono), 0);
    ck_assert_int_eq(symlink(sans, old_mono), 0);  // an "older package" of Mono: other bytes
    ck_assert_int_eq(symlink(sans, old_sans), 0);
    const unsigned latin = 1u << OCR_SYNTH_RECEIPT;
    const SynthDeclaredFont table[] = {{"Mono", latin, 0, {new_mono, old_mono, NULL}},
                                       {"Sans", latin, 0, {new_sans, old_sans, NULL}},
                                       {"Gone", latin, 0, {gone, NULL, NULL}},
                                       {"Han", 1u << OCR_SYNTH_ZH, 0, {new_mono, NULL, NULL}}};
    SynthFontSet fs;
    ocr_status_t st = synth_fonts_load_table(&fs, OCR_SYNTH_RECEIPT, NULL, "abc", table, 4);
    if (st == OCR_ERR_UNSUPPORTED) {
        printf("SKIP: %s\n", ocr_last_error());
    } else {
        ck_assert_msg(st == OCR_OK, "%s", ocr_last_error());
        ck_assert_int_eq(fs.num_fonts, 2);
        ck_assert_int_eq(fs.num_declared, 3);
        ck_assert_str_eq(fs.fonts[0].path, new_mono);
        ck_assert_str_eq(fs.fonts[0].family, "Mono");
        ck_assert_str_eq(fs.fonts[1].path, old_sans);
        ck_assert_str_eq(fs.missing, "Gone");
        ck_assert_str_eq(fs.fallback, "Sans");
        char *first = strdup(fs.manifest);
        synth_fonts_free(&fs);
        // Another font appears next to the declared ones: the same set.
        ck_assert_int_eq(symlink(sans, extra), 0);
        ck_assert_int_eq(synth_fonts_load_table(&fs, OCR_SYNTH_RECEIPT, NULL, "abc", table, 4), OCR_OK);
        ck_assert_str_eq(fs.manifest, first);
        synth_fonts_free(&fs);
        // The newer package of Sans arrives (other bytes than the old one): a new set, named.
        ck_assert_int_eq(symlink(bold, new_sans), 0);
        ck_assert_int_eq(synth_fonts_load_table(&fs, OCR_SYNTH_RECEIPT, NULL, "abc", table, 4), OCR_OK);
        ck_assert_str_eq(fs.fallback, "");
        char msg[1024];
        int differs;
        ck_assert_int_eq(ocr_synth_manifest_diff(first, fs.manifest, msg, sizeof msg, &differs), OCR_OK);
        ck_assert_int_eq(differs, 1);
        ck_assert_msg(strstr(msg, "only before: Sans (") && strstr(msg, "only now: Sans ("), "%s", msg);
        synth_fonts_free(&fs);
        free(first);
        // A face no candidate of which can draw the charset is missing, not an error, unless none is left.
        ck_assert_int_eq(synth_fonts_load_table(&fs, OCR_SYNTH_RECEIPT, NULL, "\xe5\x90\x88", table, 4),
                         OCR_ERR_NOT_FOUND);
    }
    ocr_test_remove_tree(root);
    free(nd), free(od), free(new_mono), free(old_mono), free(new_sans), free(old_sans), free(extra), free(gone);
    free(root);
}
END_TEST

static void write_ok(const char *dir, const OcrSynthOptions *opt, OcrSynthStats *stats) {
    ocr_status_t st = ocr_synth_write(dir, opt, stats);
    ck_assert_msg(st == OCR_OK, "synth write: %s", ocr_last_error());
}

// Same seed twice: the same images and manifest; an earlier run's manifest that differs, or a
// reference manifest that differs, is reported naming the faces.
START_TEST(test_write_manifest_and_differences) {
    if (!style_available(OCR_SYNTH_RECEIPT)) return;
    char *root = ocr_test_tmpdir("ocr_test_synth_fonts_");
    char *a = join(root, "a"), *b = join(root, "b");
    OcrSynthOptions opt;
    ocr_synth_default_options(&opt);
    opt.count = 16, opt.seed = 5, opt.threads = 2;
    OcrSynthStats sa, sb;
    write_ok(a, &opt, &sa);
    write_ok(b, &opt, &sb);
    ck_assert_str_eq(sa.fonts_warning, "");
    ck_assert_str_eq(sb.fonts_warning, "");
    char *fa = join(a, "fonts.tsv"), *fb = join(b, "fonts.tsv");
    char *ma = slurp(fa, NULL), *mb = slurp(fb, NULL);
    ck_assert_str_eq(ma, mb);
    OcrSynth *s;
    ck_assert_int_eq(ocr_synth_create(&s, &opt), OCR_OK);
    ck_assert_str_eq(ma, ocr_synth_fonts_manifest(s));
    ck_assert_int_eq(sa.num_fonts, ocr_synth_num_fonts(s));
    ocr_synth_destroy(s);
    for (int i = 0; i < opt.count; i++) {
        char name[64];
        snprintf(name, sizeof name, "images/%08d.png", i);
        char *pa = join(a, name), *pb = join(b, name);
        size_t na, nb;
        char *da = slurp(pa, &na), *db = slurp(pb, &nb);
        ck_assert_msg(na == nb && memcmp(da, db, na) == 0, "%s differs between two runs", name);
        free(da), free(db), free(pa), free(pb);
    }

    // The same run again into a: nothing to report.
    write_ok(a, &opt, &sa);
    ck_assert_str_eq(sa.fonts_warning, "");
    // Into a with another font set (a font directory of one face): reported, naming what
    // left and what came, and the manifest is the new set.
    if (ocr_file_exists("/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf")) {
        char *fd = join(root, "fonts");
        ck_assert_int_eq(ocr_make_dirs(fd), OCR_OK);
        char *link = join(fd, "Mono.ttf");
        ck_assert_int_eq(symlink("/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf", link), 0);
        OcrSynthOptions o2 = opt;
        o2.font_dir = fd;
        write_ok(a, &o2, &sa);
        // (The face is the declared DejaVu Sans Mono's file: the same bytes are the same face.)
        ck_assert_msg(strstr(sa.fonts_warning, "fonts differ") &&
                          strstr(sa.fonts_warning, " 1 now); only before: DejaVu Sans (") &&
                          strstr(sa.fonts_warning, " more; only now: none"),
                      "warning: %s", sa.fonts_warning);
        ck_assert_str_eq(sa.fonts_missing, "");
        ck_assert_int_eq(sa.num_fonts, 1);
        char *m2 = slurp(fa, NULL);
        ck_assert_ptr_nonnull(strstr(m2, "DejaVu Sans Mono Book\t0\t"));
        ck_assert_ptr_null(strstr(m2, "Liberation"));
        free(m2);
        // b's manifest as the reference for a run of the declared set into a: no difference;
        // for a font_dir run: a difference, said even though a's own manifest matches.
        opt.fonts_reference = fb;
        write_ok(a, &opt, &sa);  // the reference agrees, a's earlier (one-face) manifest does not
        ck_assert_msg(strstr(sa.fonts_warning, "(an earlier run)") &&
                          strstr(sa.fonts_warning, "only before: none; only now: DejaVu Sans ("),
                      "warning: %s", sa.fonts_warning);
        write_ok(a, &opt, &sa);
        ck_assert_str_eq(sa.fonts_warning, "");
        o2.fonts_reference = fb;
        write_ok(b, &o2, &sb);  // both differ: the reference is named
        ck_assert_msg(strstr(sb.fonts_warning, fb) && !strstr(sb.fonts_warning, "earlier run"), "warning: %s",
                      sb.fonts_warning);
        free(link), free(fd);
    }
    // A reference that cannot be read is an error, before anything is written.
    char *c = join(root, "c");
    opt.fonts_reference = "/nonexistent/fonts.tsv";
    ck_assert_int_ne(ocr_synth_write(c, &opt, NULL), OCR_OK);
    ck_assert_ptr_nonnull(strstr(ocr_last_error(), "/nonexistent/fonts.tsv"));
    ck_assert(!ocr_file_exists(c));
    ocr_test_remove_tree(root);
    free(c), free(ma), free(mb), free(fa), free(fb), free(a), free(b), free(root);
}
END_TEST

START_TEST(test_manifest_diff) {
    const char *m1 = "# x\nA\t0\taaaa\t/f/a.ttf\nB\t0\tbbbb\t/f/b.ttf\n";
    const char *m2 = "# y\nA\t0\taaaa\t/g/a.ttf\nB\t0\tbbbb\t/g/b.ttf\n";  // same bytes elsewhere: same set
    const char *m3 = "# y\nA\t0\taaaa\t/f/a.ttf\nB\t0\tcccc\t/f/liberation/b.ttf\n";
    const char *m4 = "B\t0\tbbbb\t/f/b.ttf\nA\t0\taaaa\t/f/a.ttf\n";
    char msg[512];
    int d;
    ck_assert_int_eq(ocr_synth_manifest_diff(m1, m2, msg, sizeof msg, &d), OCR_OK);
    ck_assert_int_eq(d, 0);
    ck_assert_str_eq(msg, "");
    ck_assert_int_eq(ocr_synth_manifest_diff(m1, m3, msg, sizeof msg, &d), OCR_OK);
    ck_assert_int_eq(d, 1);
    ck_assert_str_eq(msg, "font sets differ (2 faces before, 2 now); only before: B (/f/b.ttf); only now: B "
                          "(/f/liberation/b.ttf)");
    ck_assert_int_eq(ocr_synth_manifest_diff(m1, m4, msg, sizeof msg, &d), OCR_OK);
    ck_assert_int_eq(d, 1);  // the order picks the fonts
    ck_assert_ptr_nonnull(strstr(msg, "other order"));
    ck_assert_int_eq(ocr_synth_manifest_diff(m1, "", msg, 40, &d), OCR_OK);  // a short buffer stays terminated
    ck_assert_int_eq(d, 1);
    ck_assert_int_lt(strlen(msg), 40);
}
END_TEST

static Suite *spacing_suite(void) {
    Suite *s = suite_create("synth_spacing");
    TCase *tc = tcase_create("synth_spacing");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_measure_gaps);
    tcase_add_test(tc, test_receipt_tokens);
    tcase_add_loop_test(tc, test_spacing_per_style, 0, OCR_SYNTH_NUM_STYLES);
    tcase_add_test(tc, test_sha256);
    tcase_add_loop_test(tc, test_manifest_declared_set, 0, OCR_SYNTH_NUM_STYLES);
    tcase_add_test(tc, test_declared_table);
    tcase_add_test(tc, test_write_manifest_and_differences);
    tcase_add_test(tc, test_manifest_diff);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(spacing_suite()); }

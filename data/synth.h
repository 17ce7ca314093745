// Synthetic text lines: the built-in default dataset.
//
// `ocr_synth_write` renders `count` text lines of a style into a PaddleOCR dataset:
//   DIR/images/00000000.png ...   8-bit gray (or RGB when a colour was drawn) PNGs, height H
//   DIR/dict.txt                  one character per line, the last line a single space
//   DIR/fonts.tsv                 the faces that drew the images, with their SHA-256 (see Fonts below)
//   DIR/labels.txt                "images/00000000.png<TAB>text" lines, written last
// Styles:
//   receipt   store receipts: items, quantities, prices, totals, dates, ids, phones, masked
//             cards, addresses; thermal-printer looks. Printable ASCII only.
//   document  phrases from the fortunes corpus (fortunes-min) and words (wamerican), plus
//             page/section numbers, dates and amounts. Printable ASCII only.
//   zh        Chinese receipts (合计, 金额, 日期 ...) and frequent characters; needs a CJK font.
// For receipt and document, dict.txt is PaddleOCR's en_dict.txt (same characters, same
// order), so a model trained on it shares en_dict's class indices; train with
// use_space_char true (the space line of en_dict is never used by labels, as in PaddleOCR).
//
// Every line is a pure function of (seed, style, line index, fonts, corpora): its random
// numbers come from the Philox stream OCR_SYNTH_STREAM + index, so the files are
// byte-identical for any thread count and any line can be re-rendered alone.
// Labels hold 1..OCR_SYNTH_MAX_CHARS code points, no tabs, no leading/trailing or double spaces.
//
// Fonts (FreeType): a declared set per style (data/synth_render.c, DECLARED_FONTS), one face per
// entry, each the first present of its candidate files from the Debian packages
// fonts-dejavu-core, fonts-liberation2 (then fonts-liberation) and (zh) fonts-wqy-microhei, so
// installing another font package does not change the data; or every .ttf/.otf/.ttc face in
// `font_dir`, sorted by file name. DIR/fonts.tsv lists the faces used with their SHA-256.
// Spacing: every line keeps the gaps between words clearly wider than any gap inside a word
// (SYNTH_GAP_RATIO in data/synth_internal.h), so the label's spaces are where the image's are.
// Corpora from
// wamerican (/usr/share/dict/american-english) and fortunes-min (/usr/share/games/fortunes).
// A missing font or corpus is OCR_ERR_NOT_FOUND with a message naming the package.
#ifndef OCR_DATA_SYNTH_H
#define OCR_DATA_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/image.h"

typedef enum { OCR_SYNTH_RECEIPT = 0, OCR_SYNTH_DOCUMENT, OCR_SYNTH_ZH, OCR_SYNTH_NUM_STYLES } ocr_synth_style_t;

#define OCR_SYNTH_MAX_CHARS 25                       // PaddleOCR's max_text_length
#define OCR_SYNTH_TEXT_CAP (OCR_SYNTH_MAX_CHARS * 4 + 1)  // UTF-8 bytes + NUL
#define OCR_SYNTH_STREAM 0x53796e7400000000ull       // "Synt" << 32: Philox stream of line 0
#define OCR_SYNTH_MAX_COUNT 100000000                // image names have 8 digits

typedef struct {
    ocr_synth_style_t style;
    int64_t count;             // lines, 1..OCR_SYNTH_MAX_COUNT
    uint64_t seed;
    int height;                // output height in pixels, 16..256 (default 48)
    int max_width;             // widest output; 0: 640·height/48 (twice PP-OCR's 320 at 48)
    int threads;               // worker threads, 1..256 (output does not depend on it)
    const char *font_dir;      // NULL: the Debian font directories
    const char *words_path;    // NULL: /usr/share/dict/american-english
    const char *fortunes_dir;  // NULL: /usr/share/games/fortunes
    const char *fonts_reference;  // NULL or a fonts.tsv to compare the font set with (ocr_synth_write)
} OcrSynthOptions;

// style receipt, count 1000, seed 0, height 48, max_width 0, threads 1, default paths.
void ocr_synth_default_options(OcrSynthOptions *opt);

const char *ocr_synth_style_name(ocr_synth_style_t style);  // "receipt", "document", "zh"
// OCR_ERR_INVALID_ARG naming the valid styles for an unknown name.
ocr_status_t ocr_synth_style_from_name(const char *name, ocr_synth_style_t *style);

// ---- generator: fonts + corpora, immutable after creation, shared by all threads --------
typedef struct OcrSynth OcrSynth;

// Checks the options (INVALID_ARG), loads and checks fonts and corpora (NOT_FOUND naming the
// Debian package, IO, FORMAT, OOM).
ocr_status_t ocr_synth_create(OcrSynth **out, const OcrSynthOptions *opt);
void ocr_synth_destroy(OcrSynth *synth);
// The contents of dict.txt (NUL-terminated) and the number of fonts in use.
const char *ocr_synth_dict_text(const OcrSynth *synth);
int ocr_synth_num_fonts(const OcrSynth *synth);
// fonts.tsv: "# comment" line, then "family<TAB>face index<TAB>sha256<TAB>path" per face in use,
// in the order the generator picks from.
const char *ocr_synth_fonts_manifest(const OcrSynth *synth);
// Declared faces of the style that are not installed ("family, family"; "" when all are, and
// with font_dir), and those taken from an older package than the first candidate (fonts-liberation
// for fonts-liberation2): either way the images differ from those of a machine that has them.
const char *ocr_synth_fonts_missing(const OcrSynth *synth);
const char *ocr_synth_fonts_fallback(const OcrSynth *synth);
// Compares two fonts.tsv texts by face (sha256 + face index, in order): *differs 1 when the sets
// differ, msg then names the faces only in `before` and only in `now` (family and path).
ocr_status_t ocr_synth_manifest_diff(const char *before, const char *now, char *msg, size_t cap, int *differs);

// ---- per-thread renderer: FreeType faces and glyph-bitmap caches --------------------------
typedef struct OcrSynthWorker OcrSynthWorker;

ocr_status_t ocr_synth_worker_create(OcrSynthWorker **out, const OcrSynth *synth);
void ocr_synth_worker_destroy(OcrSynthWorker *worker);
// Renders line `index` (0 <= index < count is not required): *img is allocated (free with
// ocr_image_free), text receives the label.
ocr_status_t ocr_synth_render(OcrSynthWorker *worker, int64_t index, OcrImage *img,
                              char text[OCR_SYNTH_TEXT_CAP]);

// ---- the dataset writer ----------------------------------------------------------------
typedef struct {
    int64_t lines;
    int64_t gray_images, rgb_images;
    int64_t png_bytes;
    double seconds;  // wall time of rendering + encoding + writing
    int num_fonts;   // faces in DIR/fonts.tsv
    char fonts_missing[512];   // ocr_synth_fonts_missing
    char fonts_fallback[512];  // ocr_synth_fonts_fallback
    // When DIR/fonts.tsv of an earlier run, or opt->fonts_reference, lists other faces than
    // this run uses: what differs (ocr_synth_manifest_diff); "" when nothing does.
    char fonts_warning[1536];
} OcrSynthStats;

// Writes the dataset described at the top of this file, and DIR/fonts.tsv. Images go to
// temporary names and are renamed; after all of them the file system is synced once, then
// dict.txt, fonts.tsv and labels.txt are written atomically, so a labels.txt that exists lists
// only complete images. A font set that differs from an earlier DIR/fonts.tsv or from
// opt->fonts_reference is not an error: stats->fonts_warning says what differs. stats may be NULL.
ocr_status_t ocr_synth_write(const char *out_dir, const OcrSynthOptions *opt, OcrSynthStats *stats);

#endif

// Private to data/synth*.c: the generator's shared state and the pieces each file provides
// (synth_text.c: corpora, text and dictionaries; synth_render.c: fonts, glyphs, effects).
#ifndef OCR_DATA_SYNTH_INTERNAL_H
#define OCR_DATA_SYNTH_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/rng.h"
#include "data/synth.h"

// ---- random helpers over the line's Philox stream ---------------------------------------
static inline int synth_int(OcrRng *r, int lo, int hi) { return (int)ocr_rng_next_int(r, lo, hi); }
static inline float synth_unif(OcrRng *r, float lo, float hi) { return lo + (hi - lo) * ocr_rng_next_uniform(r); }
static inline int synth_chance(OcrRng *r, float p) { return ocr_rng_next_uniform(r) < p; }
#define SYNTH_COUNT(arr) ((int)(sizeof(arr) / sizeof((arr)[0])))
#define SYNTH_PICK(r, arr) ((arr)[synth_int((r), 0, SYNTH_COUNT(arr) - 1)])

// ---- text (synth_text.c) ----------------------------------------------------------------
typedef struct {
    const char **words;   // wamerican: lower-case words of letters only
    int64_t num_words;
    const char **names;   // wamerican: capitalised words (places, people)
    int64_t num_names;
    const char **tokens;  // fortunes: whitespace-separated tokens in reading order
    int64_t num_tokens;
    char *storage_;
} SynthCorpus;

// Loads what the style uses: document needs the fortunes or the word list (NOT_FOUND naming
// fortunes-min / wamerican when neither is there); receipt uses the word list when present;
// zh uses neither.
ocr_status_t synth_corpus_load(SynthCorpus *c, ocr_synth_style_t style, const char *words_path,
                               const char *fortunes_dir);
void synth_corpus_free(SynthCorpus *c);

// A line of the style as UTF-8 into out (OCR_SYNTH_TEXT_CAP bytes): 1..25 code points, where a
// '\t' marks a wide column gap (item ... price) that the label writes as one space.
void synth_text_generate(char *out, ocr_synth_style_t style, const SynthCorpus *c, OcrRng *rng);
// dict.txt for the style (malloc'd, NUL-terminated): one character per line, last line " ".
ocr_status_t synth_dict_build(char **out, ocr_synth_style_t style);

// ---- fonts and rendering (synth_render.c) ------------------------------------------------
enum { SYNTH_FONT_MONO = 1, SYNTH_FONT_SERIF = 2, SYNTH_FONT_BOLD = 4, SYNTH_FONT_ITALIC = 8, SYNTH_FONT_CONDENSED = 16 };

typedef struct {
    char *path;
    char *family;          // the declared name, or FreeType's "family style" for font_dir faces
    int face_index;
    unsigned flags;        // SYNTH_FONT_*
    float weight;          // relative probability for the style
    const uint8_t *data;   // the file's bytes (shared by faces of one .ttc)
    size_t size;
} SynthFont;

typedef struct {
    SynthFont *fonts;
    int num_fonts;
    float total_weight;
    uint8_t **files;  // owned file buffers
    int num_files;
    char *manifest;   // fonts.tsv text (see synth_manifest_build)
    char *missing;    // declared faces not found, "family, family" ("" when none)
    char *fallback;   // declared faces taken from a later candidate (an older package), same form
    int num_declared; // faces the style declares (0 with font_dir)
} SynthFontSet;

// The style's font set. Without font_dir: the declared faces of the style (synth_render.c,
// DECLARED_FONTS), each the first of its candidate files that exists and draws every character
// of `charset` (UTF-8); faces with no usable candidate are left out and named in fs->missing.
// With font_dir: every face of every .ttf/.otf/.ttc there (sorted by name) that draws the
// charset. Either way fs->manifest lists what is used.
ocr_status_t synth_fonts_load(SynthFontSet *fs, ocr_synth_style_t style, const char *font_dir, const char *charset);
void synth_fonts_free(SynthFontSet *fs);

// One declared face: the first of `files` that exists and can draw the charset.
typedef struct {
    const char *family;
    unsigned styles;       // bit (1 << style) per style that uses the face
    int face_index;
    const char *files[3];  // candidates, newest package first; unused slots NULL
} SynthDeclaredFont;
// synth_fonts_load with another declared table (tests).
ocr_status_t synth_fonts_load_table(SynthFontSet *fs, ocr_synth_style_t style, const char *font_dir,
                                    const char *charset, const SynthDeclaredFont *table, int n);

// ---- the fonts manifest (synth_manifest.c) -----------------------------------------------
// SHA-256 of data as 64 lower-case hex digits.
void synth_sha256_hex(const uint8_t *data, size_t n, char out[65]);
// fonts.tsv for a font set whose fonts[] are filled (path, face_index, data/size): a comment
// line, then "family<TAB>face<TAB>sha256<TAB>path" per face in use. *out is malloc'd.
ocr_status_t synth_manifest_build(char **out, const SynthFontSet *fs, ocr_synth_style_t style);

struct OcrSynth {
    OcrSynthOptions opt;  // font_dir/words_path/fortunes_dir point into storage below or are NULL
    char *font_dir_, *words_path_, *fortunes_dir_;
    SynthCorpus corpus;
    SynthFontSet fonts;
    char *dict_text;
    char *charset;  // the dict's characters without the space line, concatenated
};

typedef struct SynthRenderer SynthRenderer;
ocr_status_t synth_renderer_create(SynthRenderer **out, const SynthFontSet *fonts);
void synth_renderer_destroy(SynthRenderer *r);
// Draws `text` (with '\t' gaps) for the style with the line's random stream into *img
// (height `height`, width <= max_width).
ocr_status_t synth_render_line(SynthRenderer *r, const char *text, ocr_synth_style_t style, int height,
                               int max_width, OcrRng *rng, OcrImage *img);

// ---- spacing (synth_render.c) ------------------------------------------------------------
// A label's spaces and the image's gaps must agree: the widest ink gap between consecutive
// characters of one word stays at most SYNTH_GAP_RATIO times the narrowest gap between words
// of the same line (a gap that holds a ' ' or '\t'). Why 0.6: in set text a word space is
// roughly 2-4 times the widest letter gap (proportional fonts: letter gaps <= ~0.12 em against
// spaces of ~0.25-0.33 em; monospace: up to ~0.5 em around '.' against >= ~0.6 em), so a
// reader, and a CTC model deciding "space or not" from the gap alone, sees the difference at
// once; 0.6 (word gaps >= 1.67x) keeps that after what happens to the line later: perspective
// changes widths by up to 7% along the line, bilinear resampling and blur eat about an output
// pixel from each gap edge, and small renders round every gap to whole pixels.
#define SYNTH_GAP_RATIO 0.6f

typedef struct {
    uint32_t cp;
    int x0, x1;  // ink columns [x0, x1) in render pixels; x1 <= x0: no ink (spaces, tabs)
} SynthCharBox;

typedef struct {
    int max_intra;  // widest gap between consecutive inked characters of one word (pixels; may be < 0)
    int min_inter;  // narrowest gap between the inked characters around a word break
    int n_intra, n_inter;
} SynthGaps;

// The gaps of one laid-out line from its character boxes (in text order; characters without
// ink other than ' ' and '\t' are skipped and do not break words).
void synth_measure_gaps(const SynthCharBox *boxes, int n, SynthGaps *g);
// Whether the gaps keep the rule above (always true for a line with no word break).
int synth_gaps_ok(const SynthGaps *g);

// What the renderer did with the last line, for tests: the main line's character boxes in
// render pixels and, through the warp along the line's centre, in output columns; the text
// band (output rows) at each character; the warped ink coverage plane before any paper/ink
// effect (W x H bytes, valid until the next line); and what the spacing guard changed.
typedef struct {
    int n;
    SynthCharBox box[OCR_SYNTH_MAX_CHARS];
    float ox0[OCR_SYNTH_MAX_CHARS], ox1[OCR_SYNTH_MAX_CHARS];  // output columns (continuous)
    float oy0[OCR_SYNTH_MAX_CHARS], oy1[OCR_SYNTH_MAX_CHARS];  // output rows of the line's ink band there
    SynthGaps gaps;        // of the final layout
    SynthGaps gaps_drawn;  // of the first layout, before the guard (what the style's draw gave)
    int px;                // render pixels per em
    float spacing;         // final extra advance per glyph, em
    float space_add;       // final extra width of every space and column gap, em
    int guard;             // 0: the drawn layout kept; 1: spaces widened; 2: tracking reduced too
    const uint8_t *coverage;
    int width, height;
} SynthLineInfo;

// Turns the spacing guard off (on is the default; off only to show in tests what it prevents).
void synth_renderer_set_guard(SynthRenderer *r, int on);
const SynthLineInfo *synth_renderer_last_line(const SynthRenderer *r);
// The renderer of a worker (synth.c).
SynthRenderer *synth_worker_renderer(OcrSynthWorker *w);

// PNG bytes at zlib level 1 (see synth_png.c for why not ocr_image_encode_png).
ocr_status_t synth_encode_png(const OcrImage *img, uint8_t **out, size_t *size);

#endif

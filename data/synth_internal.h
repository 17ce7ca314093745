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
} SynthFontSet;

// Finds the fonts that can draw every character of `charset` (UTF-8) for the style, in
// font_dir (every .ttf/.otf/.ttc, sorted by name) or in the Debian font directories.
ocr_status_t synth_fonts_load(SynthFontSet *fs, ocr_synth_style_t style, const char *font_dir, const char *charset);
void synth_fonts_free(SynthFontSet *fs);

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

// PNG bytes at zlib level 1 (see synth_png.c for why not ocr_image_encode_png).
ocr_status_t synth_encode_png(const OcrImage *img, uint8_t **out, size_t *size);

#endif

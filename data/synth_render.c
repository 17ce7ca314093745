// Rendering of synthetic text lines: font discovery, a per-thread glyph cache over FreeType,
// layout, a projective warp into the output, and paper/ink/printer effects.
//
// A line is drawn in three steps. (1) Glyph coverage bitmaps are laid out into a mask at a
// render pixel size px_r; the layout is measured from the glyph boxes and re-laid out with wider
// spaces (or less tracking) until its word gaps are clearly wider than its letter gaps
// (layout_main, SYNTH_GAP_RATIO). (2) Every output pixel maps back into the mask through one projective
// map (scale to the target size, squeeze, shear, rotation, perspective) and samples it
// bilinearly; rendering small and scaling up (px_r < target) gives the soft, blocky look of
// low-resolution scans and 203-dpi thermal prints. (3) Coverage becomes ink over a background
// with gradients, low-frequency stains, fading, streaks and grain.
// All randomness is drawn from the line's stream, so pixels depend only on (seed, line).
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "data/synth_internal.h"
#include "data/utf8.h"

#include <strings.h>

// The build links FreeType when CMake finds it, and only then are its headers on the path.
#if defined(__has_include)
#if __has_include(<ft2build.h>)
#define SYNTH_HAVE_FREETYPE 1
#endif
#endif

#ifdef SYNTH_HAVE_FREETYPE
#include <ft2build.h>
#include FT_FREETYPE_H

#define PI_F 3.14159265358979f

// ---- fonts --------------------------------------------------------------------------------

// The declared font set: one face per entry, the first candidate file that exists (newest
// package first), so the faces, and with them the data of a seed, do not depend on which other
// font packages a machine has. Only the packages scripts/setup.sh installs are declared
// (fonts-dejavu-extra, for instance, would add condensed and oblique DejaVu faces on machines
// that have it and not on others). The order is the order pick_font draws from.
#define DV "/usr/share/fonts/truetype/dejavu/"
#define LIB2 "/usr/share/fonts/truetype/liberation2/"
#define LIB1 "/usr/share/fonts/truetype/liberation/"
#define LATIN ((1u << OCR_SYNTH_RECEIPT) | (1u << OCR_SYNTH_DOCUMENT))
static const SynthDeclaredFont DECLARED_FONTS[] = {
    {"DejaVu Sans", LATIN, 0, {DV "DejaVuSans.ttf"}},  // fonts-dejavu-core
    {"DejaVu Sans Bold", LATIN, 0, {DV "DejaVuSans-Bold.ttf"}},
    {"DejaVu Sans Mono", LATIN, 0, {DV "DejaVuSansMono.ttf"}},
    {"DejaVu Sans Mono Bold", LATIN, 0, {DV "DejaVuSansMono-Bold.ttf"}},
    {"DejaVu Serif", LATIN, 0, {DV "DejaVuSerif.ttf"}},
    {"DejaVu Serif Bold", LATIN, 0, {DV "DejaVuSerif-Bold.ttf"}},
    {"Liberation Mono", LATIN, 0, {LIB2 "LiberationMono-Regular.ttf", LIB1 "LiberationMono-Regular.ttf"}},
    {"Liberation Mono Bold", LATIN, 0, {LIB2 "LiberationMono-Bold.ttf", LIB1 "LiberationMono-Bold.ttf"}},
    {"Liberation Mono Italic", LATIN, 0, {LIB2 "LiberationMono-Italic.ttf", LIB1 "LiberationMono-Italic.ttf"}},
    {"Liberation Mono Bold Italic", LATIN, 0,
     {LIB2 "LiberationMono-BoldItalic.ttf", LIB1 "LiberationMono-BoldItalic.ttf"}},
    {"Liberation Sans", LATIN, 0, {LIB2 "LiberationSans-Regular.ttf", LIB1 "LiberationSans-Regular.ttf"}},
    {"Liberation Sans Bold", LATIN, 0, {LIB2 "LiberationSans-Bold.ttf", LIB1 "LiberationSans-Bold.ttf"}},
    {"Liberation Sans Italic", LATIN, 0, {LIB2 "LiberationSans-Italic.ttf", LIB1 "LiberationSans-Italic.ttf"}},
    {"Liberation Sans Bold Italic", LATIN, 0,
     {LIB2 "LiberationSans-BoldItalic.ttf", LIB1 "LiberationSans-BoldItalic.ttf"}},
    {"Liberation Serif", LATIN, 0, {LIB2 "LiberationSerif-Regular.ttf", LIB1 "LiberationSerif-Regular.ttf"}},
    {"Liberation Serif Bold", LATIN, 0, {LIB2 "LiberationSerif-Bold.ttf", LIB1 "LiberationSerif-Bold.ttf"}},
    {"Liberation Serif Italic", LATIN, 0, {LIB2 "LiberationSerif-Italic.ttf", LIB1 "LiberationSerif-Italic.ttf"}},
    {"Liberation Serif Bold Italic", LATIN, 0,
     {LIB2 "LiberationSerif-BoldItalic.ttf", LIB1 "LiberationSerif-BoldItalic.ttf"}},
    {"WenQuanYi Micro Hei", 1u << OCR_SYNTH_ZH, 0, {"/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"}},
    {"WenQuanYi Micro Hei Mono", 1u << OCR_SYNTH_ZH, 1, {"/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"}},
};
#undef DV
#undef LIB2
#undef LIB1
#undef LATIN

static int has_font_ext(const char *name) {
    const char *dot = strrchr(name, '.');
    if (!dot) return 0;
    return strcasecmp(dot, ".ttf") == 0 || strcasecmp(dot, ".otf") == 0 || strcasecmp(dot, ".ttc") == 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// How likely a face is for a style: receipts are mostly monospaced or condensed sans,
// documents mostly proportional sans and serif.
static float font_weight(ocr_synth_style_t style, unsigned flags) {
    float w = 1.0f;
    if (style == OCR_SYNTH_RECEIPT) {
        w = (flags & SYNTH_FONT_MONO) ? 3.0f : (flags & SYNTH_FONT_SERIF) ? 0.4f : 1.5f;
        if (flags & SYNTH_FONT_ITALIC) w *= 0.06f;
    } else if (style == OCR_SYNTH_DOCUMENT) {
        w = (flags & SYNTH_FONT_MONO) ? 0.6f : 2.0f;
        if (flags & SYNTH_FONT_ITALIC) w *= 0.2f;
        if (flags & SYNTH_FONT_BOLD) w *= 0.5f;
    }
    return w;
}

static unsigned face_flags(FT_Face face) {
    char both[256];
    snprintf(both, sizeof both, "%s %s", face->family_name ? face->family_name : "",
             face->style_name ? face->style_name : "");
    unsigned f = 0;
    if (FT_IS_FIXED_WIDTH(face) || strstr(both, "Mono")) f |= SYNTH_FONT_MONO;
    if (strstr(both, "Serif") && !strstr(both, "Sans")) f |= SYNTH_FONT_SERIF;
    if (strstr(both, "Bold")) f |= SYNTH_FONT_BOLD;
    if (strstr(both, "Italic") || strstr(both, "Oblique")) f |= SYNTH_FONT_ITALIC;
    if (strstr(both, "Condensed")) f |= SYNTH_FONT_CONDENSED;
    return f;
}

static int covers(FT_Face face, const char *charset) {
    size_t n = strlen(charset);
    while (n > 0) {
        uint32_t cp;
        int k = ocr_utf8_decode(charset, n, &cp);
        if (k <= 0) return 0;
        if (FT_Get_Char_Index(face, cp) == 0) return 0;
        charset += k, n -= (size_t)k;
    }
    return 1;
}

void synth_fonts_free(SynthFontSet *fs) {
    if (!fs) return;
    for (int i = 0; i < fs->num_fonts; i++) free(fs->fonts[i].path), free(fs->fonts[i].family);
    for (int i = 0; i < fs->num_files; i++) free(fs->files[i]);
    free(fs->fonts);
    free(fs->files);
    free(fs->manifest);
    free(fs->missing);
    free(fs->fallback);
    memset(fs, 0, sizeof *fs);
}

// Adds the faces of one file that cover the charset: every face (only_face < 0, named by
// FreeType's family and style) or face only_face named `family`. *added counts them. Returns
// OOM only; unreadable or unusable files add nothing.
static ocr_status_t add_font_file(SynthFontSet *fs, FT_Library lib, const char *path, ocr_synth_style_t style,
                                  const char *charset, int only_face, const char *family, int *added) {
    *added = 0;
    char *data = NULL;
    size_t size = 0;
    int shared = 0;  // a second face of a file already read
    for (int i = 0; i < fs->num_fonts && !shared; i++)
        if (strcmp(fs->fonts[i].path, path) == 0)
            data = (char *)fs->fonts[i].data, size = fs->fonts[i].size, shared = 1;
    if (!shared && ocr_read_file(path, &data, &size) != OCR_OK) {
        ocr_clear_error();
        return OCR_OK;
    }
    FT_Face probe;
    long num_faces = 0;
    if (FT_New_Memory_Face(lib, (const FT_Byte *)data, (FT_Long)size, 0, &probe) == 0) {
        num_faces = probe->num_faces;
        FT_Done_Face(probe);
    }
    ocr_status_t st = OCR_OK;
    for (long fi = only_face < 0 ? 0 : only_face; fi < num_faces && fi < 16 && st == OCR_OK; fi++) {
        if (only_face >= 0 && fi != only_face) break;
        FT_Face face;
        if (FT_New_Memory_Face(lib, (const FT_Byte *)data, (FT_Long)size, fi, &face) != 0) continue;
        int ok = FT_IS_SCALABLE(face) && face->units_per_EM > 0 && face->ascender - face->descender > 0 &&
                 covers(face, charset);
        unsigned flags = ok ? face_flags(face) : 0;
        char name[160];
        snprintf(name, sizeof name, "%s %s", face->family_name ? face->family_name : "?",
                 face->style_name ? face->style_name : "");
        FT_Done_Face(face);
        if (!ok) continue;
        SynthFont *nf = realloc(fs->fonts, (size_t)(fs->num_fonts + 1) * sizeof *nf);
        if (!nf) {
            st = ocr_set_error(OCR_ERR_OOM, "synth: out of memory listing fonts");
            break;
        }
        fs->fonts = nf;
        SynthFont *f = &fs->fonts[fs->num_fonts];
        memset(f, 0, sizeof *f);
        f->path = strdup(path);
        f->family = strdup(family ? family : name);
        if (!f->path || !f->family) {
            free(f->path), free(f->family);
            st = ocr_set_error(OCR_ERR_OOM, "synth: out of memory listing fonts");
            break;
        }
        f->face_index = (int)fi;
        f->flags = flags;
        f->weight = font_weight(style, flags);
        f->data = (const uint8_t *)data;
        f->size = size;
        fs->total_weight += f->weight;
        fs->num_fonts++;
        (*added)++;
    }
    if (shared) return st;
    if (*added == 0) {
        free(data);
        return st;
    }
    uint8_t **nfiles = realloc(fs->files, (size_t)(fs->num_files + 1) * sizeof *nfiles);
    if (!nfiles) {  // the faces already point at data: drop them with it
        fs->num_fonts -= *added;
        for (int i = 0; i < *added; i++) {
            SynthFont *f = &fs->fonts[fs->num_fonts + i];
            free(f->path), free(f->family);
        }
        free(data);
        return ocr_set_error(OCR_ERR_OOM, "synth: out of memory listing fonts");
    }
    fs->files = nfiles;
    fs->files[fs->num_files++] = (uint8_t *)data;
    return st;
}

static ocr_status_t scan_dir(SynthFontSet *fs, FT_Library lib, const char *dirpath, ocr_synth_style_t style,
                             const char *charset) {
    DIR *dir = opendir(dirpath);
    if (!dir) return OCR_OK;
    char **names = NULL;
    int n = 0, cap = 0;
    ocr_status_t st = OCR_OK;
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        if (e->d_name[0] == '.' || !has_font_ext(e->d_name)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 32;
            char **nn = realloc(names, (size_t)cap * sizeof *nn);
            if (!nn) {
                st = ocr_set_error(OCR_ERR_OOM, "synth: out of memory listing %s", dirpath);
                break;
            }
            names = nn;
        }
        size_t len = strlen(dirpath) + strlen(e->d_name) + 2;
        names[n] = malloc(len);
        if (!names[n]) {
            st = ocr_set_error(OCR_ERR_OOM, "synth: out of memory listing %s", dirpath);
            break;
        }
        snprintf(names[n], len, "%s/%s", dirpath, e->d_name);
        n++;
    }
    closedir(dir);
    if (st == OCR_OK && n > 1) qsort(names, (size_t)n, sizeof *names, cmp_str);  // readdir order is not stable
    for (int i = 0; i < n && st == OCR_OK; i++) {
        int added;
        st = add_font_file(fs, lib, names[i], style, charset, -1, NULL, &added);
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    return st;
}

// The declared faces of the style; those without a usable candidate go into fs->missing.
static ocr_status_t load_declared(SynthFontSet *fs, FT_Library lib, ocr_synth_style_t style, const char *charset,
                                  const SynthDeclaredFont *table, int n) {
    size_t cap = 1, k = 0;
    for (int i = 0; i < n; i++) cap += strlen(table[i].family) + 2;
    fs->missing = malloc(cap);
    fs->fallback = malloc(cap);
    if (!fs->missing || !fs->fallback) return ocr_set_error(OCR_ERR_OOM, "synth: out of memory listing fonts");
    fs->missing[0] = fs->fallback[0] = '\0';
    size_t kf = 0;
    for (int i = 0; i < n; i++) {
        const SynthDeclaredFont *d = &table[i];
        if (!(d->styles & (1u << style))) continue;
        fs->num_declared++;
        int added = 0, c = 0;
        for (; c < SYNTH_COUNT(d->files) && d->files[c] && !added; c++)
            OCR_TRY(add_font_file(fs, lib, d->files[c], style, charset, d->face_index, d->family, &added));
        if (!added) k += (size_t)snprintf(fs->missing + k, cap - k, "%s%s", k ? ", " : "", d->family);
        else if (c > 1) kf += (size_t)snprintf(fs->fallback + kf, cap - kf, "%s%s", kf ? ", " : "", d->family);
    }
    return OCR_OK;
}

ocr_status_t synth_fonts_load(SynthFontSet *fs, ocr_synth_style_t style, const char *font_dir, const char *charset) {
    return synth_fonts_load_table(fs, style, font_dir, charset, DECLARED_FONTS, SYNTH_COUNT(DECLARED_FONTS));
}

ocr_status_t synth_fonts_load_table(SynthFontSet *fs, ocr_synth_style_t style, const char *font_dir,
                                    const char *charset, const SynthDeclaredFont *table, int n) {
    memset(fs, 0, sizeof *fs);
    FT_Library lib;
    if (FT_Init_FreeType(&lib) != 0) return ocr_set_error(OCR_ERR_INTERNAL, "synth: FreeType failed to start");
    ocr_status_t st =
        font_dir ? scan_dir(fs, lib, font_dir, style, charset) : load_declared(fs, lib, style, charset, table, n);
    FT_Done_FreeType(lib);
    if (st == OCR_OK && fs->num_fonts > 0) st = synth_manifest_build(&fs->manifest, fs, style);
    if (st != OCR_OK) {
        synth_fonts_free(fs);
        return st;
    }
    if (fs->num_fonts > 0) return OCR_OK;
    synth_fonts_free(fs);
    const char *where = font_dir ? font_dir : "/usr/share/fonts/truetype/{dejavu,liberation2,liberation,wqy}";
    if (style == OCR_SYNTH_ZH)
        return ocr_set_error(OCR_ERR_NOT_FOUND,
                             "synth: the zh style needs a CJK font and none in %s can draw its characters: "
                             "install the Debian package fonts-wqy-microhei (scripts/setup.sh does), or point "
                             "--font-dir at a directory with a Chinese .ttf/.ttc font",
                             where);
    return ocr_set_error(OCR_ERR_NOT_FOUND,
                         "synth: no font in %s can draw the %s style's characters (printable ASCII): install the "
                         "Debian packages fonts-dejavu-core and fonts-liberation2 (scripts/setup.sh does), or point "
                         "--font-dir at a directory of .ttf/.otf fonts",
                         where, ocr_synth_style_name(style));
}

// ---- glyph cache ----------------------------------------------------------------------------

typedef struct {
    uint64_t key;  // 0: empty slot
    uint32_t off;  // into the arena
    int16_t w, h, left, top;
    int32_t adv;  // 26.6 pixels
} Glyph;

// Placement of one glyph in render pixels (origin: pen start on the main baseline, y down).
typedef struct {
    Glyph g;
    int x, y;
} Placed;

#define MAX_PLACED 64
#define ARENA_LIMIT (48u << 20)  // cached glyph pixels per thread before the cache starts over

struct SynthRenderer {
    const SynthFontSet *fonts;
    FT_Library lib;
    FT_Face *faces;
    int *face_px;
    Glyph *slots;
    size_t cap, used;
    uint8_t *arena;
    size_t arena_len, arena_cap;
    // scratch, reused from line to line
    uint8_t *mask, *alpha;
    size_t mask_cap, alpha_cap;
    float *col, *row;
    size_t col_cap, row_cap;
    Placed placed[MAX_PLACED];
    int guard_off;        // synth_renderer_set_guard(r, 0): tests only
    SynthLineInfo info;   // the last line (synth_renderer_last_line)
};

void synth_renderer_set_guard(SynthRenderer *r, int on) { r->guard_off = !on; }
const SynthLineInfo *synth_renderer_last_line(const SynthRenderer *r) { return &r->info; }

void synth_renderer_destroy(SynthRenderer *r) {
    if (!r) return;
    if (r->faces)
        for (int i = 0; i < r->fonts->num_fonts; i++)
            if (r->faces[i]) FT_Done_Face(r->faces[i]);
    if (r->lib) FT_Done_FreeType(r->lib);
    free(r->faces);
    free(r->face_px);
    free(r->slots);
    free(r->arena);
    free(r->mask);
    free(r->alpha);
    free(r->col);
    free(r->row);
    free(r);
}

ocr_status_t synth_renderer_create(SynthRenderer **out, const SynthFontSet *fonts) {
    *out = NULL;
    SynthRenderer *r = calloc(1, sizeof *r);
    if (!r) return ocr_set_error(OCR_ERR_OOM, "synth: out of memory");
    r->fonts = fonts;
    if (FT_Init_FreeType(&r->lib) != 0) {
        r->lib = NULL;
        synth_renderer_destroy(r);
        return ocr_set_error(OCR_ERR_INTERNAL, "synth: FreeType failed to start");
    }
    r->faces = calloc((size_t)fonts->num_fonts, sizeof *r->faces);
    r->face_px = calloc((size_t)fonts->num_fonts, sizeof *r->face_px);
    r->cap = 4096;
    r->slots = calloc(r->cap, sizeof *r->slots);
    if (!r->faces || !r->face_px || !r->slots) {
        synth_renderer_destroy(r);
        return ocr_set_error(OCR_ERR_OOM, "synth: out of memory");
    }
    for (int i = 0; i < fonts->num_fonts; i++) {
        const SynthFont *f = &fonts->fonts[i];
        if (FT_New_Memory_Face(r->lib, f->data, (FT_Long)f->size, f->face_index, &r->faces[i]) != 0) {
            r->faces[i] = NULL;
            synth_renderer_destroy(r);
            return ocr_set_error(OCR_ERR_FORMAT, "synth: FreeType cannot open face %d of %s", f->face_index, f->path);
        }
    }
    *out = r;
    return OCR_OK;
}

static size_t slot_of(uint64_t key, size_t cap) { return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1); }

static ocr_status_t cache_grow(SynthRenderer *r) {
    size_t ncap = r->cap * 2;
    Glyph *ns = calloc(ncap, sizeof *ns);
    if (!ns) return ocr_set_error(OCR_ERR_OOM, "synth: out of memory for the glyph cache");
    for (size_t i = 0; i < r->cap; i++) {
        if (!r->slots[i].key) continue;
        size_t j = slot_of(r->slots[i].key, ncap);
        while (ns[j].key) j = (j + 1) & (ncap - 1);
        ns[j] = r->slots[i];
    }
    free(r->slots);
    r->slots = ns, r->cap = ncap;
    return OCR_OK;
}

static void cache_clear(SynthRenderer *r) {
    memset(r->slots, 0, r->cap * sizeof *r->slots);
    r->used = 0;
    r->arena_len = 0;
}

// The coverage bitmap and metrics of code point cp in font f at px pixels per em.
static ocr_status_t glyph_get(SynthRenderer *r, int f, int px, uint32_t cp, Glyph *out) {
    uint64_t key = ((uint64_t)(f + 1) << 40) | ((uint64_t)px << 24) | cp;
    size_t i = slot_of(key, r->cap);
    while (r->slots[i].key) {
        if (r->slots[i].key == key) {
            *out = r->slots[i];
            return OCR_OK;
        }
        i = (i + 1) & (r->cap - 1);
    }
    FT_Face face = r->faces[f];
    if (r->face_px[f] != px) {
        if (FT_Set_Pixel_Sizes(face, 0, (FT_UInt)px) != 0)
            return ocr_set_error(OCR_ERR_FORMAT, "synth: %s cannot be sized to %d px", r->fonts->fonts[f].path, px);
        r->face_px[f] = px;
    }
    FT_UInt gi = FT_Get_Char_Index(face, cp);
    if (FT_Load_Glyph(face, gi, FT_LOAD_NO_BITMAP | FT_LOAD_TARGET_LIGHT) != 0 ||
        FT_Render_Glyph(face->glyph, FT_RENDER_MODE_NORMAL) != 0)
        return ocr_set_error(OCR_ERR_FORMAT, "synth: %s cannot render U+%04X at %d px", r->fonts->fonts[f].path,
                             (unsigned)cp, px);
    FT_GlyphSlot gs = face->glyph;
    const FT_Bitmap *bm = &gs->bitmap;
    Glyph g = {key, (uint32_t)r->arena_len, (int16_t)bm->width, (int16_t)bm->rows, (int16_t)gs->bitmap_left,
               (int16_t)gs->bitmap_top, (int32_t)gs->advance.x};
    if (bm->pixel_mode != FT_PIXEL_MODE_GRAY && bm->pixel_mode != FT_PIXEL_MODE_MONO) g.w = g.h = 0;
    size_t bytes = (size_t)g.w * (size_t)g.h;
    if (r->arena_len + bytes > r->arena_cap) {
        size_t ncap = r->arena_cap ? r->arena_cap : (1u << 20);
        while (ncap < r->arena_len + bytes) ncap *= 2;
        uint8_t *na = realloc(r->arena, ncap);
        if (!na) return ocr_set_error(OCR_ERR_OOM, "synth: out of memory for glyph bitmaps");
        r->arena = na, r->arena_cap = ncap;
    }
    uint8_t *dst = r->arena + r->arena_len;
    for (int y = 0; y < g.h; y++) {
        const uint8_t *src = bm->buffer + (ptrdiff_t)y * bm->pitch;
        for (int x = 0; x < g.w; x++)
            dst[y * g.w + x] = bm->pixel_mode == FT_PIXEL_MODE_GRAY
                                   ? (uint8_t)(bm->num_grays == 256 ? src[x] : src[x] * 255 / (bm->num_grays - 1))
                                   : (uint8_t)((src[x >> 3] >> (7 - (x & 7)) & 1) * 255);
    }
    r->arena_len += bytes;
    if ((r->used + 1) * 2 > r->cap) {
        OCR_TRY(cache_grow(r));
        i = slot_of(key, r->cap);
        while (r->slots[i].key) i = (i + 1) & (r->cap - 1);
    }
    r->slots[i] = g;
    r->used++;
    *out = g;
    return OCR_OK;
}

// ---- layout --------------------------------------------------------------------------------

typedef struct {
    float spacing;     // extra advance per glyph, in em
    float space_scale; // word-space multiplier
    float gap;         // '\t' column gap, in em
    float space_add;   // em added to every space and column gap by the spacing guard
} LayoutStyle;

typedef struct {
    int x0, y0, x1, y1;  // ink box, exclusive max; empty when x1 <= x0
} Box;

// Lays out text starting at (x, baseline) into r->placed[*n...]; returns the ink box of the
// added glyphs, and when cb is given, every character's ink columns into cb[*ncb...].
static ocr_status_t layout(SynthRenderer *r, int f, int px, const char *text, const LayoutStyle *ls, int x,
                           int baseline, int *n, Box *box, SynthCharBox *cb, int *ncb) {
    box->x0 = box->y0 = 1 << 30, box->x1 = box->y1 = -(1 << 30);
    int32_t pen = x * 64;
    int32_t extra = (int32_t)lrintf(ls->spacing * (float)px * 64.0f);
    int32_t add = (int32_t)lrintf(ls->space_add * (float)px * 64.0f);
    size_t len = strlen(text);
    const char *p = text;
    while (len > 0) {
        uint32_t cp;
        int k = ocr_utf8_decode(p, len, &cp);
        if (k <= 0) return ocr_set_error(OCR_ERR_INTERNAL, "synth: generated text is not UTF-8");
        p += k, len -= (size_t)k;
        SynthCharBox *c = cb && *ncb < OCR_SYNTH_MAX_CHARS ? &cb[(*ncb)++] : NULL;
        if (c) c->cp = cp, c->x0 = c->x1 = 0;
        if (cp == '\t') {
            pen += (int32_t)lrintf(ls->gap * (float)px * 64.0f) + add;
            continue;
        }
        Glyph g;
        OCR_TRY(glyph_get(r, f, px, cp, &g));
        if (cp == ' ') {
            // Never narrower than a quarter em: the label has a space, so must the image.
            float adv = fmaxf((float)g.adv * ls->space_scale, 0.25f * 64.0f * (float)px);
            pen += (int32_t)lrintf(adv) + (extra > 0 ? extra : 0) + add;
            continue;
        }
        if (g.w > 0 && g.h > 0 && *n < MAX_PLACED) {
            Placed *pl = &r->placed[(*n)++];
            pl->g = g;
            pl->x = ((pen + 32) >> 6) + g.left;
            pl->y = baseline - g.top;
            if (pl->x < box->x0) box->x0 = pl->x;
            if (pl->y < box->y0) box->y0 = pl->y;
            if (pl->x + g.w > box->x1) box->x1 = pl->x + g.w;
            if (pl->y + g.h > box->y1) box->y1 = pl->y + g.h;
            // Ink columns: the coverage bitmap's columns that hold any coverage.
            if (c) {
                const uint8_t *src = r->arena + g.off;
                int lo = g.w, hi = -1;
                for (int yy = 0; yy < g.h; yy++)
                    for (int xx = 0; xx < g.w; xx++)
                        if (src[yy * g.w + xx]) {
                            if (xx < lo) lo = xx;
                            if (xx > hi) hi = xx;
                        }
                if (hi >= lo) c->x0 = pl->x + lo, c->x1 = pl->x + hi + 1;
            }
        }
        pen += g.adv + extra;
    }
    return OCR_OK;
}

// ---- spacing ---------------------------------------------------------------------------------

void synth_measure_gaps(const SynthCharBox *b, int n, SynthGaps *g) {
    g->max_intra = -(1 << 30), g->min_inter = 1 << 30;
    g->n_intra = g->n_inter = 0;
    int prev = -1, brk = 0;
    for (int i = 0; i < n; i++) {
        if (b[i].cp == ' ' || b[i].cp == '\t') {
            brk = 1;
            continue;
        }
        if (b[i].x1 <= b[i].x0) continue;
        if (prev >= 0) {
            int gap = b[i].x0 - b[prev].x1;
            if (brk) {
                g->n_inter++;
                if (gap < g->min_inter) g->min_inter = gap;
            } else {
                g->n_intra++;
                if (gap > g->max_intra) g->max_intra = gap;
            }
        }
        prev = i, brk = 0;
    }
}

int synth_gaps_ok(const SynthGaps *g) {
    if (g->n_inter == 0) return 1;
    if (g->min_inter < 1) return 0;
    return g->n_intra == 0 || (float)g->max_intra <= SYNTH_GAP_RATIO * (float)g->min_inter;
}

// A word space wider than this (em, with the tracking it carries) reads as a column gap: past
// it the guard reduces the tracking instead of widening spaces further.
#define SPACE_CAP_EM 1.6f

// Lays out the main line at (0, 0) and keeps the spacing rule (SYNTH_GAP_RATIO): while the
// widest gap inside a word is too close to the narrowest gap between words, every space and
// column gap is widened by the shortfall (wide tracking stays, with spaces widened in
// proportion); when that would make spaces wider than SPACE_CAP_EM, the tracking is halved
// instead. Each step re-lays the line out and measures it again from the glyph boxes, so no
// line leaves here violating the rule. ls keeps the changes (in em) for later layouts.
static ocr_status_t layout_main(SynthRenderer *r, int f, int px, const char *text, LayoutStyle *ls, int *n_main,
                                Box *box, int first) {
    SynthLineInfo *li = &r->info;
    for (int iter = 0;; iter++) {
        *n_main = 0, li->n = 0;
        OCR_TRY(layout(r, f, px, text, ls, 0, 0, n_main, box, li->box, &li->n));
        synth_measure_gaps(li->box, li->n, &li->gaps);
        if (first && iter == 0) li->gaps_drawn = li->gaps;
        if (r->guard_off || synth_gaps_ok(&li->gaps)) return OCR_OK;
        if (iter == 40)
            return ocr_set_error(OCR_ERR_INTERNAL, "synth: cannot space '%s' at %d px (intra %d, inter %d px)", text,
                                 px, li->gaps.max_intra, li->gaps.min_inter);
        int intra = li->gaps.n_intra ? (li->gaps.max_intra > 0 ? li->gaps.max_intra : 0) : 0;
        float short_px = (float)intra / SYNTH_GAP_RATIO - (float)li->gaps.min_inter + 1.0f;
        if (short_px < 1.0f) short_px = 1.0f;
        Glyph sp;
        OCR_TRY(glyph_get(r, f, px, ' ', &sp));
        float space_em = fmaxf((float)sp.adv * ls->space_scale / (64.0f * (float)px), 0.25f) + ls->space_add +
                         fmaxf(ls->spacing, 0.0f);
        if (ls->spacing > 0.01f && space_em + short_px / (float)px > SPACE_CAP_EM) {
            ls->spacing *= 0.5f;
            li->guard = 2;
        } else {
            ls->space_add += short_px / (float)px;
            if (li->guard < 1) li->guard = 1;
        }
    }
}

// Output position (continuous pixels) of mask point (u, v) for the warp that maps output
// (xc, yc) around (cx, cy) to mask u = (a1·xc + a2·yc)/w + mcx, v = (b1·xc + b2·yc)/w + mcy,
// w = 1 + pxc·xc + pyc·yc (the inverse of that projective map, by Cramer's rule).
static void warp_forward(const float m[10], float u, float v, float *x, float *y) {
    const float a1 = m[0], a2 = m[1], b1 = m[2], b2 = m[3], pxc = m[4], pyc = m[5];
    float U = u - m[6], V = v - m[7];
    float p = a1 - U * pxc, q = a2 - U * pyc, s = b1 - V * pxc, t = b2 - V * pyc;
    float det = p * t - q * s;
    if (fabsf(det) < 1e-12f) det = 1e-12f;
    *x = (U * t - q * V) / det + m[8];
    *y = (p * V - U * s) / det + m[9];
}

// ---- small fast noise (seeded from the Philox stream; used per pixel) ----------------------

typedef struct {
    uint64_t s;
} Fast;

static Fast fast_seed(OcrRng *rng) {
    uint64_t hi = ocr_rng_next_u32(rng), lo = ocr_rng_next_u32(rng);
    Fast f = {(hi << 32 | lo) | 1};
    return f;
}

static inline uint32_t fast_u32(Fast *f) {  // xorshift64*
    f->s ^= f->s >> 12, f->s ^= f->s << 25, f->s ^= f->s >> 27;
    return (uint32_t)((f->s * 0x2545F4914F6CDD1Dull) >> 32);
}
static inline float fast_unif(Fast *f) { return (float)(fast_u32(f) >> 8) * (1.0f / 16777216.0f); }

// Smooth 1-D value noise in [0, 1] with the given period, n samples.
static void value_noise_1d(float *out, int n, float period, Fast *f) {
    if (period < 2.0f) period = 2.0f;
    float knots[512];
    int nk = (int)((float)n / period) + 3;
    if (nk > 512) nk = 512, period = (float)n / (float)(nk - 3);
    for (int i = 0; i < nk; i++) knots[i] = fast_unif(f);
    float phase = fast_unif(f);
    for (int x = 0; x < n; x++) {
        float t = (float)x / period + phase;
        int i = (int)t;
        float a = t - (float)i;
        a = a * a * (3.0f - 2.0f * a);
        out[x] = knots[i] + (knots[i + 1] - knots[i]) * a;
    }
}

static ocr_status_t grow(void **buf, size_t *cap, size_t need) {
    if (need <= *cap) return OCR_OK;
    void *nb = realloc(*buf, need);
    if (!nb) return ocr_set_error(OCR_ERR_OOM, "synth: out of memory (%zu bytes)", need);
    *buf = nb, *cap = need;
    return OCR_OK;
}

// [1 2 1]/4 blur in both directions, in place (edges replicate).
static void blur121(uint8_t *a, int w, int h, uint8_t *tmp) {
    for (int y = 0; y < h; y++) {
        uint8_t *row = a + (size_t)y * w;
        for (int x = 0; x < w; x++) {
            int l = row[x > 0 ? x - 1 : 0], c = row[x], rr = row[x < w - 1 ? x + 1 : w - 1];
            tmp[(size_t)y * w + x] = (uint8_t)((l + 2 * c + rr + 2) >> 2);
        }
    }
    for (int y = 0; y < h; y++) {
        const uint8_t *up = tmp + (size_t)(y > 0 ? y - 1 : 0) * w, *mid = tmp + (size_t)y * w,
                      *dn = tmp + (size_t)(y < h - 1 ? y + 1 : h - 1) * w;
        for (int x = 0; x < w; x++) a[(size_t)y * w + x] = (uint8_t)((up[x] + 2 * mid[x] + dn[x] + 2) >> 2);
    }
}

// ---- colours --------------------------------------------------------------------------------

typedef struct {
    float ink[3], bg[3];
    int colour;  // 0: both gray → a gray PNG
} Palette;

static float luma(const float c[3]) { return 0.299f * c[0] + 0.587f * c[1] + 0.114f * c[2]; }

static void set_gray(float c[3], float v) { c[0] = c[1] = c[2] = v; }

static void pick_palette(Palette *p, ocr_synth_style_t style, OcrRng *rng) {
    int receipt_like = style == OCR_SYNTH_RECEIPT || (style == OCR_SYNTH_ZH && synth_chance(rng, 0.6f));
    p->colour = 0;
    set_gray(p->bg, synth_unif(rng, 205.0f, 255.0f));
    set_gray(p->ink, synth_unif(rng, 0.0f, 70.0f));
    if (receipt_like) {
        if (synth_chance(rng, 0.2f)) set_gray(p->ink, synth_unif(rng, 70.0f, 135.0f));  // faded thermal print
        if (synth_chance(rng, 0.25f)) {  // warm or grayish paper
            p->colour = 1;
            p->bg[0] += synth_unif(rng, 0.0f, 6.0f);
            p->bg[2] -= synth_unif(rng, 4.0f, 18.0f);
        }
        if (synth_chance(rng, 0.07f)) {  // blue/purple ribbon ink
            p->colour = 1;
            p->ink[0] = synth_unif(rng, 30.0f, 90.0f), p->ink[1] = synth_unif(rng, 20.0f, 60.0f);
            p->ink[2] = synth_unif(rng, 100.0f, 160.0f);
        }
    } else {
        float u = ocr_rng_next_uniform(rng);
        if (u < 0.22f) {  // tinted paper: cream, light blue, light green, light gray
            static const float T[4][3] = {{250, 243, 222}, {228, 236, 248}, {232, 246, 230}, {226, 226, 226}};
            int k = synth_int(rng, 0, 3);
            float d = synth_unif(rng, -12.0f, 5.0f);
            for (int c = 0; c < 3; c++) p->bg[c] = T[k][c] + d;
            p->colour = 1;
        }
        float v = ocr_rng_next_uniform(rng);
        if (v < 0.15f) {  // coloured ink: dark blue, dark red, dark green, brown
            static const float I[4][3] = {{20, 40, 130}, {140, 20, 25}, {20, 90, 40}, {90, 55, 25}};
            int k = synth_int(rng, 0, 3);
            for (int c = 0; c < 3; c++) p->ink[c] = I[k][c] * synth_unif(rng, 0.7f, 1.1f);
            p->colour = 1;
        } else if (v < 0.25f) {
            set_gray(p->ink, synth_unif(rng, 60.0f, 120.0f));  // gray text
        }
    }
    // Reversed print: light text on a dark band.
    if (synth_chance(rng, style == OCR_SYNTH_DOCUMENT ? 0.05f : 0.03f)) {
        float t[3];
        memcpy(t, p->ink, sizeof t);
        memcpy(p->ink, p->bg, sizeof t);
        memcpy(p->bg, t, sizeof t);
    }
    // Keep the text readable: at least 80 levels of luma contrast.
    float li = luma(p->ink), lb = luma(p->bg);
    if (fabsf(li - lb) < 80.0f) {
        float target = lb > 127.0f ? lb - 80.0f : lb + 80.0f;
        for (int c = 0; c < 3; c++) p->ink[c] += target - li;
    }
    for (int c = 0; c < 3; c++) {
        p->ink[c] = fminf(255.0f, fmaxf(0.0f, p->ink[c]));
        p->bg[c] = fminf(255.0f, fmaxf(0.0f, p->bg[c]));
    }
}

// ---- the line --------------------------------------------------------------------------------

static int pick_font(const SynthFontSet *fs, OcrRng *rng) {
    float u = ocr_rng_next_uniform(rng) * fs->total_weight;
    for (int i = 0; i < fs->num_fonts; i++) {
        u -= fs->fonts[i].weight;
        if (u < 0.0f) return i;
    }
    return fs->num_fonts - 1;
}

static inline float sample(const uint8_t *m, int mw, int mh, float u, float v) {
    // Bilinear on pixel centres; the mask has a zero border so outside reads as 0.
    u -= 0.5f, v -= 0.5f;
    if (!(u >= 0.0f && v >= 0.0f && u < (float)(mw - 1) && v < (float)(mh - 1))) return 0.0f;
    int x = (int)u, y = (int)v;
    float fx = u - (float)x, fy = v - (float)y;
    const uint8_t *p = m + (size_t)y * mw + x;
    float top = (float)p[0] + ((float)p[1] - (float)p[0]) * fx;
    float bot = (float)p[mw] + ((float)p[mw + 1] - (float)p[mw]) * fx;
    return top + (bot - top) * fy;
}

ocr_status_t synth_render_line(SynthRenderer *r, const char *text, ocr_synth_style_t style, int height,
                               int max_width, OcrRng *rng, OcrImage *img) {
    memset(img, 0, sizeof *img);
    memset(&r->info, 0, sizeof r->info);
    if (r->arena_len > ARENA_LIMIT) cache_clear(r);
    const SynthFontSet *fs = r->fonts;
    const float H = (float)height;
    int receipt = style == OCR_SYNTH_RECEIPT;

    // Font and the crop: how much of the height the font's ascender..descender takes.
    int f = pick_font(fs, rng);
    FT_Face face = r->faces[f];
    float em_to_h = (float)(face->ascender - face->descender) / (float)face->units_per_EM;
    float u = ocr_rng_next_uniform(rng);
    int loose = 0;
    float font_h, ml, mr;  // target font height and horizontal margins, output pixels
    if (u < 0.3f) {        // tight
        font_h = H * synth_unif(rng, 0.78f, 0.92f);
        ml = H * synth_unif(rng, 0.03f, 0.12f), mr = H * synth_unif(rng, 0.03f, 0.12f);
    } else if (u < 0.8f) {
        font_h = H * synth_unif(rng, 0.6f, 0.8f);
        ml = H * synth_unif(rng, 0.08f, 0.4f), mr = H * synth_unif(rng, 0.08f, 0.4f);
    } else {
        loose = 1;
        font_h = H * synth_unif(rng, 0.45f, 0.62f);
        ml = H * synth_unif(rng, 0.3f, 1.0f), mr = H * synth_unif(rng, 0.3f, 1.0f);
    }
    float lowres = synth_chance(rng, receipt ? 0.3f : 0.15f) ? synth_unif(rng, 0.45f, 0.8f) : 1.0f;
    int binarize = receipt && lowres < 1.0f && synth_chance(rng, 0.5f);  // thermal dots
    LayoutStyle ls;
    ls.spacing = synth_chance(rng, 0.15f) ? synth_unif(rng, 0.08f, 0.3f) : synth_unif(rng, -0.03f, 0.06f);
    ls.space_scale = synth_unif(rng, 0.8f, 1.6f);
    ls.gap = synth_unif(rng, 0.8f, 4.0f);
    ls.space_add = 0.0f;
    float sx = 1.0f;  // horizontal squeeze

    // Layout at the render size; if the line is too wide, shrink it (and squeeze a little).
    int px = 0, n_main = 0;
    float s = 1.0f;  // render → output scale
    Box box;
    if (ml + mr > 0.5f * (float)max_width) {
        float k = 0.5f * (float)max_width / (ml + mr);
        ml *= k, mr *= k;
    }
    for (int attempt = 0; attempt < 3; attempt++) {
        float px_target = font_h / em_to_h;
        px = (int)lrintf(px_target * lowres);
        if (px < 6) px = 6;
        if (px > 400) px = 400;
        s = px_target / (float)px;
        n_main = 0;
        OCR_TRY(layout_main(r, f, px, text, &ls, &n_main, &box, attempt == 0));
        if (box.x1 <= box.x0) box.x0 = 0, box.x1 = 1, box.y0 = -1, box.y1 = 0;
        float room = 0.97f * ((float)max_width - ml - mr);  // 3% for slant and tilt
        float need = room / ((float)(box.x1 - box.x0) * s);
        if (need >= 1.0f) break;
        if (need >= 0.85f || attempt == 2) {
            sx = need;
            break;
        }
        font_h *= need / 0.9f;
        sx = 0.9f;
    }
    float ink_w = (float)(box.x1 - box.x0) * s * sx, ink_h = (float)(box.y1 - box.y0) * s;

    // A sliver of a neighbouring line at the top or bottom of loose crops.
    int n_all = n_main;
    if (loose && synth_chance(rng, 0.4f)) {
        float pitch = font_h / s * synth_unif(rng, 1.1f, 1.45f);
        int dy = (int)lrintf(synth_chance(rng, 0.5f) ? -pitch : pitch);
        int dx = (int)lrintf(synth_unif(rng, -0.3f, 0.3f) * (float)(box.x1 - box.x0));
        size_t tl = strlen(text);
        size_t start = (size_t)synth_int(rng, 0, (int)tl - 1);
        while (start > 0 && ((unsigned char)text[start] & 0xC0) == 0x80) start--;  // a character boundary
        char other[2 * OCR_SYNTH_TEXT_CAP];
        snprintf(other, sizeof other, "%s %s", text + start, text);
        Box b2;
        OCR_TRY(layout(r, f, px, other, &ls, dx, dy, &n_all, &b2, NULL, NULL));
    }

    // Mask: every placed glyph, with a 2-pixel zero border.
    int mx0 = 1 << 30, my0 = 1 << 30, mx1 = -(1 << 30), my1 = -(1 << 30);
    for (int i = 0; i < n_all; i++) {
        const Placed *p = &r->placed[i];
        if (p->x < mx0) mx0 = p->x;
        if (p->y < my0) my0 = p->y;
        if (p->x + p->g.w > mx1) mx1 = p->x + p->g.w;
        if (p->y + p->g.h > my1) my1 = p->y + p->g.h;
    }
    if (n_all == 0) mx0 = box.x0, my0 = box.y0, mx1 = box.x1, my1 = box.y1;
    mx0 -= 2, my0 -= 2, mx1 += 2, my1 += 2;
    int mw = mx1 - mx0, mh = my1 - my0;
    OCR_TRY(grow((void **)&r->mask, &r->mask_cap, (size_t)mw * mh));
    memset(r->mask, 0, (size_t)mw * mh);
    for (int i = 0; i < n_all; i++) {
        const Placed *p = &r->placed[i];
        const uint8_t *src = r->arena + p->g.off;
        for (int y = 0; y < p->g.h; y++) {
            uint8_t *dst = r->mask + (size_t)(p->y - my0 + y) * mw + (p->x - mx0);
            for (int x = 0; x < p->g.w; x++) {
                uint8_t v = src[y * p->g.w + x];
                if (v > dst[x]) dst[x] = v;
            }
        }
    }
    if (binarize) {
        int t = synth_int(rng, 90, 150);
        for (size_t i = 0; i < (size_t)mw * mh; i++) r->mask[i] = r->mask[i] >= t ? 255 : 0;
    }

    // Geometry: rotation within ±2° (less when the tilted line would leave the image),
    // slant, perspective, vertical jitter.
    float theta = synth_chance(rng, 0.5f) ? synth_unif(rng, -2.0f, 2.0f) : synth_unif(rng, -0.4f, 0.4f);
    theta *= PI_F / 180.0f;
    float max_sin = (0.98f * H - ink_h) / fmaxf(ink_w, 1.0f);
    if (max_sin < 0.0f) max_sin = 0.0f;
    if (fabsf(sinf(theta)) > max_sin) theta = copysignf(asinf(fminf(max_sin, 1.0f)), theta);
    float shear = synth_chance(rng, 0.1f) ? synth_unif(rng, -0.1f, 0.1f) : 0.0f;
    float ct = cosf(theta), st = sinf(theta);
    // Perspective: the near end of the line grows by about |persp|/2 of the width.
    float persp = synth_chance(rng, 0.4f) ? synth_unif(rng, -0.07f, 0.07f) : 0.0f;
    float text_w = (ink_w * ct + ink_h * fabsf(st) + fabsf(shear) * ink_h) * (1.0f + 0.5f * fabsf(persp));
    int W = (int)lrintf(text_w + ml + mr);
    if (W < 8) W = 8;
    if (W > max_width) W = max_width;
    float pxc = persp / (float)W;
    float pyc = synth_chance(rng, 0.3f) ? synth_unif(rng, -0.05f, 0.05f) / H : 0.0f;
    float slack = fmaxf(0.0f, (H - ink_h * ct - ink_w * fabsf(st)) * 0.5f);
    float cy = H * 0.5f + fminf(slack, 0.05f * H) * synth_unif(rng, -1.0f, 1.0f);
    float avail = (float)W - text_w;  // what is left for the margins after clamping W
    float cx = (ml + mr > 1e-3f ? avail * ml / (ml + mr) : avail * 0.5f) + text_w * 0.5f;
    float mcx = 0.5f * (float)(box.x0 + box.x1) - (float)mx0, mcy = 0.5f * (float)(box.y0 + box.y1) - (float)my0;
    float inv_sx = 1.0f / (s * sx), inv_s = 1.0f / s;

    // Warp the mask into alpha.
    size_t npix = (size_t)W * height;
    OCR_TRY(grow((void **)&r->alpha, &r->alpha_cap, 2 * npix));
    uint8_t *alpha = r->alpha, *tmp = r->alpha + npix;
    // Output (xc, yc) around (cx, cy) → mask: u = (a1·xc + a2·yc) / w + mcx, v = (b1·xc + b2·yc) / w + mcy,
    // w = 1 + pxc·xc + pyc·yc (perspective, then rotation by −θ, unslant, unscale). All three are
    // linear along a row, and v is monotone there, so rows that miss the mask are skipped.
    const float a1 = (ct + shear * st) * inv_sx, a2 = (st - shear * ct) * inv_sx;
    const float b1 = -st * inv_s, b2 = ct * inv_s;
    {  // where the main line's characters land in the output (for tests)
        SynthLineInfo *li = &r->info;
        const float m[10] = {a1, a2, b1, b2, pxc, pyc, mcx, mcy, cx, cy};
        float v0 = (float)(box.y0 - my0), v1 = (float)(box.y1 - my0), yy;
        for (int i = 0; i < li->n; i++) {
            const SynthCharBox *c = &li->box[i];
            float u0 = (float)(c->x0 - mx0), u1 = (float)(c->x1 - mx0), uc = 0.5f * (u0 + u1);
            warp_forward(m, u0, mcy, &li->ox0[i], &yy);
            warp_forward(m, u1, mcy, &li->ox1[i], &yy);
            warp_forward(m, uc, v0, &yy, &li->oy0[i]);
            warp_forward(m, uc, v1, &yy, &li->oy1[i]);
        }
        li->px = px, li->spacing = ls.spacing, li->space_add = ls.space_add;
        li->width = W, li->height = height;
    }
    for (int y = 0; y < height; y++) {
        uint8_t *arow = alpha + (size_t)y * W;
        float yc = (float)y + 0.5f - cy, xc0 = 0.5f - cx, xc1 = (float)W - 0.5f - cx;
        float nu = a1 * xc0 + a2 * yc, nv = b1 * xc0 + b2 * yc, w = 1.0f + pxc * xc0 + pyc * yc;
        float v0 = nv / w + mcy, v1 = (b1 * xc1 + b2 * yc) / (1.0f + pxc * xc1 + pyc * yc) + mcy;
        if ((v0 < 0.0f && v1 < 0.0f) || (v0 > (float)mh && v1 > (float)mh)) {
            memset(arow, 0, (size_t)W);
            continue;
        }
        for (int x = 0; x < W; x++) {
            float rw = 1.0f / w;
            float a = sample(r->mask, mw, mh, nu * rw + mcx, nv * rw + mcy);
            arow[x] = (uint8_t)(a + 0.5f);
            nu += a1, nv += b1, w += pxc;
        }
    }

    // Ink effects on coverage.
    Fast fr = fast_seed(rng);
    float blur_p = synth_unif(rng, 0.0f, 1.0f);
    if (blur_p < 0.3f) blur121(alpha, W, height, tmp);
    if (blur_p < 0.08f) blur121(alpha, W, height, tmp);
    r->info.coverage = alpha;  // final: what follows reads alpha and writes img
    float gamma = synth_chance(rng, 0.5f) ? synth_unif(rng, 0.6f, 1.5f) : 1.0f;  // <1 bolder, >1 thinner
    float lut[256];
    for (int i = 0; i < 256; i++) lut[i] = powf((float)i / 255.0f, gamma);

    OCR_TRY(grow((void **)&r->col, &r->col_cap, (size_t)W * 2 * sizeof(float)));
    OCR_TRY(grow((void **)&r->row, &r->row_cap, (size_t)height * 2 * sizeof(float)));
    float *col = r->col, *col_bg = r->col + W, *row = r->row, *row_bg = r->row + height;
    for (int x = 0; x < W; x++) col[x] = 1.0f;
    for (int y = 0; y < height; y++) row[y] = 1.0f;
    float drop_p = 0.0f;
    int thermal = (receipt && synth_chance(rng, 0.6f)) || (style == OCR_SYNTH_ZH && synth_chance(rng, 0.35f));
    if (thermal) {
        // Uneven heat along the print head (columns) and along the feed (rows), dead dots.
        float amp = synth_unif(rng, 0.1f, 0.6f);
        value_noise_1d(col_bg, W, H * synth_unif(rng, 0.4f, 3.0f), &fr);
        for (int x = 0; x < W; x++) col[x] = 1.0f - amp * col_bg[x];
        int streaks = synth_int(rng, 0, 3);
        for (int k = 0; k < streaks; k++) {
            int c0 = synth_int(rng, 0, W - 1), cw = synth_int(rng, 1, 3);
            float keep = synth_unif(rng, 0.0f, 0.5f);
            for (int x = c0; x < c0 + cw && x < W; x++) col[x] *= keep;
        }
        float ramp = synth_unif(rng, 0.0f, 0.3f);
        value_noise_1d(row_bg, height, H * synth_unif(rng, 0.2f, 1.0f), &fr);
        for (int y = 0; y < height; y++) row[y] = 1.0f - ramp * row_bg[y];
        drop_p = synth_chance(rng, 0.5f) ? synth_unif(rng, 0.0f, 0.08f) : 0.0f;
    }

    // Background: base colour, linear gradient, low-frequency stains, grain.
    Palette pal;
    pick_palette(&pal, style, rng);
    float gx = synth_unif(rng, -20.0f, 20.0f), gy = synth_unif(rng, -12.0f, 12.0f);
    float stain = synth_chance(rng, 0.5f) ? synth_unif(rng, 0.0f, 16.0f) : 0.0f;
    float grain = synth_chance(rng, 0.7f) ? synth_unif(rng, 0.0f, receipt ? 10.0f : 6.0f) : 0.0f;
    value_noise_1d(col_bg, W, H * synth_unif(rng, 0.5f, 2.5f), &fr);
    value_noise_1d(row_bg, height, H * synth_unif(rng, 0.5f, 2.0f), &fr);
    for (int x = 0; x < W; x++) col_bg[x] = gx * ((float)x / (float)W - 0.5f) + stain * (col_bg[x] - 0.5f);
    for (int y = 0; y < height; y++) row_bg[y] = gy * ((float)y / H - 0.5f) + stain * (row_bg[y] - 0.5f);
    int specks = synth_chance(rng, 0.2f) ? synth_int(rng, 1, 6) : 0;

    int C = pal.colour ? 3 : 1;
    OCR_TRY(ocr_image_alloc(img, W, height, C));
    // Grain: the two 16-bit halves of one draw summed give triangular noise in (-1, 1)
    // (std 0.41), scaled so its std is about 0.58·grain.
    const float gscale = grain * 1.41421356f * (1.0f / 65536.0f);
    for (int y = 0; y < height; y++) {
        const uint8_t *arow = alpha + (size_t)y * W;
        uint8_t *out = img->pixels + (size_t)y * W * C;
        const float ry = row[y], rbg = row_bg[y];
        for (int x = 0; x < W; x++) {
            float a = lut[arow[x]] * col[x] * ry;
            if (drop_p > 0.0f && a > 0.0f && fast_unif(&fr) < drop_p) a *= 0.3f;
            float off = col_bg[x] + rbg;
            if (grain > 0.0f) {
                uint32_t u = fast_u32(&fr);
                off += gscale * (float)((int32_t)(u & 0xffff) + (int32_t)(u >> 16) - 65536);
            }
            if (C == 1) {
                float bg = pal.bg[0] + off;
                float v = bg + (pal.ink[0] + off * 0.3f - bg) * a;
                v = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
                out[x] = (uint8_t)(v + 0.5f);
                continue;
            }
            for (int c = 0; c < 3; c++) {
                float bg = pal.bg[c] + off;
                float v = bg + (pal.ink[c] + off * 0.3f - bg) * a;
                v = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
                out[x * 3 + c] = (uint8_t)(v + 0.5f);
            }
        }
    }
    for (int k = 0; k < specks; k++) {  // dirt and paper fibres
        int x0 = synth_int(rng, 0, W - 1), y0 = synth_int(rng, 0, height - 1);
        int rad = synth_int(rng, 0, 1);
        float dark = synth_unif(rng, 0.3f, 0.8f);
        for (int y = y0 - rad; y <= y0 + rad; y++)
            for (int x = x0 - rad; x <= x0 + rad; x++) {
                if (x < 0 || y < 0 || x >= W || y >= height) continue;
                for (int c = 0; c < C; c++) {
                    uint8_t *p = img->pixels + ((size_t)y * W + x) * C + c;
                    *p = (uint8_t)((float)*p * (1.0f - dark) + pal.ink[c] * dark + 0.5f);
                }
            }
    }
    return OCR_OK;
}

#else  // no FreeType: the generator reports how to get it

void synth_fonts_free(SynthFontSet *fs) { (void)fs; }
ocr_status_t synth_fonts_load(SynthFontSet *fs, ocr_synth_style_t style, const char *font_dir, const char *charset) {
    return synth_fonts_load_table(fs, style, font_dir, charset, NULL, 0);
}
ocr_status_t synth_fonts_load_table(SynthFontSet *fs, ocr_synth_style_t style, const char *font_dir,
                                    const char *charset, const SynthDeclaredFont *table, int n) {
    (void)style, (void)font_dir, (void)charset, (void)table, (void)n;
    memset(fs, 0, sizeof *fs);
    return ocr_set_error(OCR_ERR_UNSUPPORTED, "synth: ocrtrain was built without FreeType: install the Debian "
                                              "package libfreetype-dev and rebuild (scripts/setup.sh does both)");
}
ocr_status_t synth_renderer_create(SynthRenderer **out, const SynthFontSet *fonts) {
    (void)fonts;
    *out = NULL;
    return ocr_set_error(OCR_ERR_UNSUPPORTED, "synth: built without FreeType");
}
void synth_renderer_destroy(SynthRenderer *r) { (void)r; }
ocr_status_t synth_render_line(SynthRenderer *r, const char *text, ocr_synth_style_t style, int height,
                               int max_width, OcrRng *rng, OcrImage *img) {
    (void)r, (void)text, (void)style, (void)height, (void)max_width, (void)rng, (void)img;
    return ocr_set_error(OCR_ERR_UNSUPPORTED, "synth: built without FreeType");
}

#endif

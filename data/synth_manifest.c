// The fonts manifest of a synthetic dataset (DIR/fonts.tsv): which font files drew the images,
// with their SHA-256, so that a dataset can be reproduced (same seed + same fonts = same bytes)
// and a run on a machine with other fonts is noticed instead of silently writing other data.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/synth_internal.h"

// ---- SHA-256 (FIPS 180-4) ---------------------------------------------------------------------

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static inline uint32_t ror32(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha256_compress(uint32_t st[8], const uint8_t blk[64]) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)blk[4 * i] << 24 | (uint32_t)blk[4 * i + 1] << 16 | (uint32_t)blk[4 * i + 2] << 8 |
               (uint32_t)blk[4 * i + 3];
    for (int i = 16; i < 64; i++)
        w[i] = w[i - 16] + (ror32(w[i - 15], 7) ^ ror32(w[i - 15], 18) ^ (w[i - 15] >> 3)) + w[i - 7] +
               (ror32(w[i - 2], 17) ^ ror32(w[i - 2], 19) ^ (w[i - 2] >> 10));
    uint32_t v[8];
    memcpy(v, st, sizeof v);
    for (int i = 0; i < 64; i++) {
        uint32_t e = v[4], a = v[0];
        uint32_t t1 = v[7] + (ror32(e, 6) ^ ror32(e, 11) ^ ror32(e, 25)) + ((e & v[5]) ^ (~e & v[6])) + K256[i] + w[i];
        uint32_t t2 = (ror32(a, 2) ^ ror32(a, 13) ^ ror32(a, 22)) + ((a & v[1]) ^ (a & v[2]) ^ (v[1] & v[2]));
        memmove(v + 1, v, 7 * sizeof *v);
        v[4] += t1;
        v[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++) st[i] += v[i];
}

void synth_sha256_hex(const uint8_t *data, size_t n, char out[65]) {
    uint32_t st[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    size_t whole = n & ~(size_t)63;
    for (size_t i = 0; i < whole; i += 64) sha256_compress(st, data + i);
    uint8_t last[128] = {0};  // the tail, 0x80, zeros and the bit length: one or two blocks
    size_t rest = n - whole;
    if (rest) memcpy(last, data + whole, rest);
    last[rest] = 0x80;
    size_t len = rest < 56 ? 64 : 128;
    uint64_t bits = (uint64_t)n << 3;
    for (int i = 0; i < 8; i++) last[len - 1 - i] = (uint8_t)(bits >> (8 * i));
    sha256_compress(st, last);
    if (len == 128) sha256_compress(st, last + 64);
    for (int i = 0; i < 8; i++) snprintf(out + 8 * i, 9, "%08x", st[i]);
}

// ---- the manifest -------------------------------------------------------------------------------

ocr_status_t synth_manifest_build(char **out, const SynthFontSet *fs, ocr_synth_style_t style) {
    *out = NULL;
    size_t cap = 256;
    for (int i = 0; i < fs->num_fonts; i++) cap += strlen(fs->fonts[i].path) + strlen(fs->fonts[i].family) + 96;
    char *m = malloc(cap);
    if (!m) return ocr_set_error(OCR_ERR_OOM, "synth: out of memory for the fonts manifest");
    size_t k = (size_t)snprintf(m, cap, "# ocrtrain synth fonts (style %s): family\tface\tsha256\tpath\n",
                                ocr_synth_style_name(style));
    for (int i = 0; i < fs->num_fonts; i++) {
        const SynthFont *f = &fs->fonts[i];
        char hex[65];
        synth_sha256_hex(f->data, f->size, hex);
        k += (size_t)snprintf(m + k, cap - k, "%s\t%d\t%s\t%s\n", f->family, f->face_index, hex, f->path);
    }
    *out = m;
    return OCR_OK;
}

// One manifest row: "family<TAB>face<TAB>sha256<TAB>path"; a face is identified by its bytes
// (sha256 + face index), named by its family.
typedef struct {
    char family[128];
    char id[80];  // "sha256#face"
    char path[256];
} Row;

static int parse_rows(const char *text, Row **rows_out) {
    int n = 0, cap = 0;
    Row *rows = NULL;
    for (const char *p = text; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 0 && p[0] != '#') {
            const char *t1 = memchr(p, '\t', len);
            const char *t2 = t1 ? memchr(t1 + 1, '\t', len - (size_t)(t1 + 1 - p)) : NULL;
            if (t2) {
                const char *t3 = memchr(t2 + 1, '\t', len - (size_t)(t2 + 1 - p));
                size_t hl = t3 ? (size_t)(t3 - t2 - 1) : len - (size_t)(t2 + 1 - p);
                if (n == cap) {
                    cap = cap ? 2 * cap : 16;
                    Row *nr = realloc(rows, (size_t)cap * sizeof *nr);
                    if (!nr) {
                        free(rows);
                        return -1;
                    }
                    rows = nr;
                }
                Row *r = &rows[n++];
                snprintf(r->family, sizeof r->family, "%.*s", (int)(t1 - p), p);
                snprintf(r->id, sizeof r->id, "%.*s#%.*s", (int)(hl > 64 ? 64 : hl), t2 + 1, (int)(t2 - t1 - 1),
                         t1 + 1);
                r->path[0] = '\0';
                if (t3) snprintf(r->path, sizeof r->path, "%.*s", (int)(len - (size_t)(t3 + 1 - p)), t3 + 1);
            }
        }
        p = e ? e + 1 : NULL;
    }
    *rows_out = rows;
    return n;
}

static int has_id(const Row *rows, int n, const char *id) {
    for (int i = 0; i < n; i++)
        if (strcmp(rows[i].id, id) == 0) return 1;
    return 0;
}

// Appends "family (path), ..." for the rows of `a` whose face is not in `b` (the first four,
// then how many more); returns how many there are.
static int list_only(char *msg, size_t cap, size_t *k, const Row *a, int na, const Row *b, int nb) {
    int c = 0;
    for (int i = 0; i < na; i++) {
        if (has_id(b, nb, a[i].id)) continue;
        if (c < 4 && *k < cap)
            *k += (size_t)snprintf(msg + *k, cap - *k, "%s%s (%s)", c ? ", " : "", a[i].family, a[i].path);
        c++;
    }
    if (c > 4 && *k < cap) *k += (size_t)snprintf(msg + *k, cap - *k, " and %d more", c - 4);
    if (c == 0 && *k < cap) *k += (size_t)snprintf(msg + *k, cap - *k, "none");
    return c;
}

ocr_status_t ocr_synth_manifest_diff(const char *before, const char *now, char *msg, size_t cap, int *differs) {
    *differs = 0;
    if (cap) msg[0] = '\0';
    Row *a = NULL, *b = NULL;
    int na = parse_rows(before ? before : "", &a), nb = parse_rows(now ? now : "", &b);
    if (na < 0 || nb < 0) {
        free(a), free(b);
        return ocr_set_error(OCR_ERR_OOM, "synth: out of memory comparing fonts manifests");
    }
    int same = na == nb;
    for (int i = 0; same && i < na; i++) same = strcmp(a[i].id, b[i].id) == 0;  // order matters: it picks fonts
    if (!same) {
        *differs = 1;
        size_t k = 0;
        if (cap) {
            k += (size_t)snprintf(msg, cap, "font sets differ (%d faces before, %d now); only before: ", na, nb);
            int gone = list_only(msg, cap, &k, a, na, b, nb);
            if (k < cap) k += (size_t)snprintf(msg + k, cap - k, "; only now: ");
            int came = list_only(msg, cap, &k, b, nb, a, na);
            if (k < cap && gone == 0 && came == 0) snprintf(msg + k, cap - k, " (the same faces in another order)");
        }
    }
    free(a), free(b);
    return OCR_OK;
}

#include "app/text_metric.h"

#include <stdlib.h>
#include <string.h>

// UTF-8 → code points; a byte that does not start a well-formed sequence counts as one
// character (U+DC80 + byte, as Python's surrogateescape), so no input is lost.
static size_t decode(const char *s, uint32_t *out) {
    const unsigned char *p = (const unsigned char *)s;
    size_t n = 0;
    while (*p) {
        uint32_t c = *p;
        int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        int ok = len > 0;
        for (int k = 1; ok && k < len; k++) ok = (p[k] & 0xC0) == 0x80;
        if (ok && len > 1) {
            c &= 0x7Fu >> len;
            for (int k = 1; k < len; k++) c = (c << 6) | (p[k] & 0x3F);
            static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
            ok = c >= min[len] && c <= 0x10FFFF && !(c >= 0xD800 && c <= 0xDFFF);
        }
        if (!ok) {
            out[n++] = 0xDC80 + *p;
            p++;
        } else {
            out[n++] = c;
            p += len;
        }
    }
    return n;
}

static size_t normalise(uint32_t *cp, size_t n, int ignore_space, int is_filter) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = cp[i];
        if (ignore_space && c == ' ') continue;
        if (is_filter) {
            int digit = c >= '0' && c <= '9', upper = c >= 'A' && c <= 'Z', lower = c >= 'a' && c <= 'z';
            if (!digit && !upper && !lower) continue;
            if (upper) c += 'a' - 'A';
        }
        cp[k++] = c;
    }
    return k;
}

static int64_t levenshtein(const uint32_t *a, size_t na, const uint32_t *b, size_t nb, int64_t *row) {
    for (size_t j = 0; j <= nb; j++) row[j] = (int64_t)j;
    for (size_t i = 1; i <= na; i++) {
        int64_t diag = row[0];
        row[0] = (int64_t)i;
        for (size_t j = 1; j <= nb; j++) {
            int64_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[nb];
}

void text_metric_init(TextMetric *m, int ignore_space, int is_filter) {
    memset(m, 0, sizeof *m);
    m->ignore_space = ignore_space;
    m->is_filter = is_filter;
}

ocr_status_t text_metric_add(TextMetric *m, const char *pred, const char *ref) {
    size_t lp = strlen(pred), lr = strlen(ref);
    uint32_t *p = malloc((lp + 1) * sizeof *p), *r = malloc((lr + 1) * sizeof *r);
    int64_t *row = malloc((lr + 2) * sizeof *row);
    if (!p || !r || !row) {
        free(p);
        free(r);
        free(row);
        return ocr_set_error(OCR_ERR_OOM, "metric: out of memory");
    }
    size_t np = normalise(p, decode(pred, p), m->ignore_space, m->is_filter);
    size_t nr = normalise(r, decode(ref, r), m->ignore_space, m->is_filter);
    int64_t d = levenshtein(p, np, r, nr, row);
    size_t mx = np > nr ? np : nr;
    m->count++;
    m->correct += d == 0;
    m->norm_edit_sum += mx ? (double)d / (double)mx : 0.0;
    m->edits += d;
    m->ref_chars += (int64_t)nr;
    free(p);
    free(r);
    free(row);
    return OCR_OK;
}

double text_metric_acc(const TextMetric *m) { return (double)m->correct / ((double)m->count + 1e-5); }
double text_metric_norm_edit_dis(const TextMetric *m) { return 1.0 - m->norm_edit_sum / ((double)m->count + 1e-5); }
double text_metric_cer(const TextMetric *m) {
    return m->ref_chars > 0 ? (double)m->edits / (double)m->ref_chars : (double)m->edits;
}

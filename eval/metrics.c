#include "eval/metrics.h"

#include <stdlib.h>
#include <string.h>

#include "eval/utf8.h"

int64_t ocr_levenshtein(const uint32_t *a, size_t na, const uint32_t *b, size_t nb) {
    // One row over the shorter string.
    if (na < nb) {
        const uint32_t *t = a;
        a = b;
        b = t;
        size_t n = na;
        na = nb;
        nb = n;
    }
    if (nb == 0) return (int64_t)na;
    int64_t stack_row[257];
    int64_t *row = nb + 1 <= 257 ? stack_row : malloc(sizeof(int64_t) * (nb + 1));
    if (!row) return -1;
    for (size_t j = 0; j <= nb; j++) row[j] = (int64_t)j;
    for (size_t i = 1; i <= na; i++) {
        int64_t diag = row[0];  // D[i−1][j−1]
        row[0] = (int64_t)i;
        for (size_t j = 1; j <= nb; j++) {
            int64_t up = row[j];  // D[i−1][j]
            int64_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    int64_t d = row[nb];
    if (row != stack_row) free(row);
    return d;
}

// UTF-8 → code points in a malloc'ed array (at least one element). NULL on OOM.
static uint32_t *decode_alloc(const char *s, size_t *n) {
    size_t len = strlen(s);
    size_t count = text_utf8_decode(NULL, 0, s, len);
    uint32_t *cp = malloc(sizeof(uint32_t) * (count + 1));
    if (!cp) return NULL;
    text_utf8_decode(cp, count, s, len);
    *n = count;
    return cp;
}

static double normalized(int64_t dist, size_t na, size_t nb) {
    size_t mx = na > nb ? na : nb;
    return mx == 0 ? 0.0 : (double)dist / (double)mx;
}

double ocr_normalized_edit_distance(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    uint32_t *ca = decode_alloc(a, &na), *cb = decode_alloc(b, &nb);
    double r = -1.0;
    if (ca && cb) {
        int64_t d = ocr_levenshtein(ca, na, cb, nb);
        if (d >= 0) r = normalized(d, na, nb);
    }
    free(ca);
    free(cb);
    return r;
}

// PaddleOCR's per-pair preprocessing, in place: drop ' ' (ignore_space), then keep only
// [0-9a-zA-Z] lower-cased (is_filter). Returns the new length.
static size_t normalise(uint32_t *cp, size_t n, RecMetricOptions opt) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = cp[i];
        if (opt.ignore_space && c == ' ') continue;
        if (opt.is_filter) {
            int digit = c >= '0' && c <= '9', upper = c >= 'A' && c <= 'Z', lower = c >= 'a' && c <= 'z';
            if (!digit && !upper && !lower) continue;
            if (upper) c += 'a' - 'A';
        }
        cp[k++] = c;
    }
    return k;
}

void rec_metric_init(RecMetric *m, RecMetricOptions opt) {
    memset(m, 0, sizeof *m);
    m->opt = opt;
}

void rec_metric_reset(RecMetric *m) { rec_metric_init(m, m->opt); }

ocr_status_t rec_metric_add(RecMetric *m, const char *pred, const char *ref) {
    size_t np = 0, nr = 0;
    uint32_t *p = decode_alloc(pred, &np), *r = decode_alloc(ref, &nr);
    if (!p || !r) {
        free(p);
        free(r);
        return ocr_set_error(OCR_ERR_OOM, "rec metric: out of memory for strings of %zu and %zu bytes", strlen(pred),
                             strlen(ref));
    }
    np = normalise(p, np, m->opt);
    nr = normalise(r, nr, m->opt);
    int64_t d = ocr_levenshtein(p, np, r, nr);
    free(p);
    free(r);
    if (d < 0) return ocr_set_error(OCR_ERR_OOM, "rec metric: out of memory for the edit distance");
    m->count++;
    m->correct += d == 0;  // distance 0 ⇔ equal strings
    m->norm_edit_sum += normalized(d, np, nr);
    m->edits += d;
    m->ref_chars += (int64_t)nr;
    return OCR_OK;
}

RecMetricResult rec_metric_get(const RecMetric *m) {
    RecMetricResult res;
    res.count = m->count;
    res.acc = (double)m->correct / ((double)m->count + 1e-5);
    res.norm_edit_dis = 1.0 - m->norm_edit_sum / ((double)m->count + 1e-5);
    res.cer = m->ref_chars > 0 ? (double)m->edits / (double)m->ref_chars : (double)m->edits;
    return res;
}

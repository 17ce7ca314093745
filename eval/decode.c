#include "eval/decode.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// ---- per-frame statistics ----------------------------------------------------------------

// First maximum of a row and its probability.
static int frame_argmax(const float *row, int C, int is_logits, float *prob) {
    int best = 0;
    for (int c = 1; c < C; c++)
        if (row[c] > row[best]) best = c;
    if (!is_logits) {
        *prob = row[best];
    } else {
        double s = 0.0;
        for (int c = 0; c < C; c++) s += exp((double)row[c] - row[best]);
        *prob = (float)(1.0 / s);
    }
    return best;
}

// Log-probabilities of one frame (double).
static void frame_log_probs(double *lp, const float *row, int C, int is_logits) {
    if (!is_logits) {
        for (int c = 0; c < C; c++) lp[c] = log((double)row[c]);  // log(0) = −inf: never chosen
        return;
    }
    float m = row[0];
    for (int c = 1; c < C; c++) m = row[c] > m ? row[c] : m;
    double s = 0.0;
    for (int c = 0; c < C; c++) s += exp((double)row[c] - m);
    double lse = (double)m + log(s);
    for (int c = 0; c < C; c++) lp[c] = (double)row[c] - lse;
}

// ---- greedy -------------------------------------------------------------------------------

int ctc_greedy_labels(int *labels, float *probs, const float *scores, int T, int C, int is_logits) {
    int n = 0, prev = -1;
    for (int t = 0; t < T; t++) {
        float p;
        int k = frame_argmax(scores + (size_t)t * C, C, is_logits, &p);
        if (k != prev && k != 0) {
            if (labels) labels[n] = k;
            if (probs) probs[n] = p;
            n++;
        }
        prev = k;
    }
    return n;
}

ocr_status_t ctc_labels_to_text(char *text, size_t text_cap, const int *labels, int n, const char *const *classes,
                                int C) {
    if (text_cap == 0) return ocr_set_error(OCR_ERR_INVALID_ARG, "ctc decode: zero-sized text buffer");
    size_t len = 0;
    text[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (labels[i] < 1 || labels[i] >= C || !classes[labels[i]])
            return ocr_set_error(OCR_ERR_INVALID_ARG, "ctc decode: label %d outside the character list [1, %d)",
                                 labels[i], C);
        size_t k = strlen(classes[labels[i]]);
        if (len + k + 1 > text_cap)
            return ocr_set_error(OCR_ERR_INVALID_ARG, "ctc decode: text needs more than %zu bytes", text_cap);
        memcpy(text + len, classes[labels[i]], k);
        len += k;
    }
    text[len] = '\0';
    return OCR_OK;
}

size_t ctc_text_capacity(int T, const char *const *classes, int C) {
    size_t longest = 0;
    for (int c = 1; c < C; c++) {
        size_t k = classes[c] ? strlen(classes[c]) : 0;
        longest = k > longest ? k : longest;
    }
    return (size_t)(T > 0 ? T : 0) * longest + 1;
}

ocr_status_t ctc_greedy_decode(char *text, size_t text_cap, float *confidence, const float *scores, int T, int C,
                               int is_logits, const char *const *classes) {
    int *labels = malloc(sizeof(int) * (size_t)(T > 0 ? T : 1));
    float *probs = malloc(sizeof(float) * (size_t)(T > 0 ? T : 1));
    if (!labels || !probs) {
        free(labels);
        free(probs);
        return ocr_set_error(OCR_ERR_OOM, "ctc greedy decode: out of memory for %d frames", T);
    }
    int n = ctc_greedy_labels(labels, probs, scores, T, C, is_logits);
    ocr_status_t st = ctc_labels_to_text(text, text_cap, labels, n, classes, C);
    if (confidence) {
        double s = 0.0;
        for (int i = 0; i < n; i++) s += probs[i];
        *confidence = n > 0 ? (float)(s / n) : 0.0f;
    }
    free(labels);
    free(probs);
    return st;
}

// ---- prefix beam search ----------------------------------------------------------------------

// Prefixes form a trie: node 0 is the empty prefix, node k = nodes[k].parent + label.
// Nodes are looked up by (parent, label) before one is created, so a prefix that leaves
// the beam and comes back gets its old node: equal prefixes always have equal node ids.
typedef struct {
    int parent, label;
} TrieNode;

typedef struct {
    TrieNode *nodes;
    int count;
    int *table;  // open addressing: node id or −1; capacity a power of two
    size_t mask;
} Trie;

static size_t trie_hash(int parent, int label) {
    uint64_t x = ((uint64_t)(uint32_t)parent << 32) | (uint32_t)label;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x;
}

static int trie_child(Trie *tr, int parent, int label) {
    size_t i = trie_hash(parent, label) & tr->mask;
    while (tr->table[i] >= 0) {
        const TrieNode *n = &tr->nodes[tr->table[i]];
        if (n->parent == parent && n->label == label) return tr->table[i];
        i = (i + 1) & tr->mask;
    }
    int id = tr->count++;
    tr->nodes[id] = (TrieNode){parent, label};
    tr->table[i] = id;
    return id;
}

typedef struct {
    int node, last;  // last label (0 for the empty prefix)
    double pb, pnb;  // log p(prefix, ending in blank / in its last label)
} Beam;

// A candidate for the next frame's beams. key orders ties: existing prefixes first (by
// beam index), then extensions by (beam, class).
typedef struct {
    double score;
    long key;
    int from, label;  // label 0: the prefix of beam `from` itself; else beam `from` + label
    double pb, pnb;
} Cand;

static inline double log_add(double a, double b) {
    if (a < b) {
        double t = a;
        a = b;
        b = t;
    }
    if (b == -INFINITY) return a;
    return a + log1p(exp(b - a));
}

// a ranks before b.
static inline int cand_better(const Cand *a, const Cand *b) {
    return a->score > b->score || (a->score == b->score && a->key < b->key);
}

// Min-heap (worst on top) of at most cap extension candidates.
static void heap_push(Cand *h, int *n, int cap, Cand c) {
    if (*n == cap) {
        if (!cand_better(&c, &h[0])) return;
        h[0] = c;
        int i = 0;
        for (;;) {
            int l = 2 * i + 1, r = l + 1, w = i;
            if (l < *n && cand_better(&h[w], &h[l])) w = l;
            if (r < *n && cand_better(&h[w], &h[r])) w = r;
            if (w == i) break;
            Cand t = h[i];
            h[i] = h[w];
            h[w] = t;
            i = w;
        }
        return;
    }
    int i = (*n)++;
    h[i] = c;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!cand_better(&h[p], &h[i])) break;
        Cand t = h[i];
        h[i] = h[p];
        h[p] = t;
        i = p;
    }
}

static int cand_cmp(const void *va, const void *vb) {
    const Cand *a = va, *b = vb;
    return cand_better(a, b) ? -1 : cand_better(b, a) ? 1 : 0;
}

ocr_status_t ctc_beam_search(int *labels, int *num_labels, double *log_prob, const float *scores, int T, int C,
                             int is_logits, int beam_width) {
    if (beam_width < 1) return ocr_set_error(OCR_ERR_INVALID_ARG, "ctc beam search: beam width %d < 1", beam_width);
    if (C < 1) return ocr_set_error(OCR_ERR_INVALID_ARG, "ctc beam search: %d classes", C);
    const int W = beam_width;
    size_t max_nodes = 1 + (size_t)(T > 0 ? T : 0) * W;  // each frame creates at most W
    size_t cap = 16;
    while (cap < 2 * max_nodes) cap *= 2;
    Trie tr = {malloc(sizeof(TrieNode) * max_nodes), 1, malloc(sizeof(int) * cap), cap - 1};
    TrieNode *nodes = tr.nodes;
    Beam *beams = malloc(sizeof *beams * W), *next = malloc(sizeof *next * W);
    Cand *cands = malloc(sizeof *cands * 2 * W);
    int *merged = malloc(sizeof(int) * W * W);  // labels whose extension of beam j is already a beam
    int *nmerged = malloc(sizeof(int) * W);
    double *lp = malloc(sizeof(double) * C);
    if (!nodes || !tr.table || !beams || !next || !cands || !merged || !nmerged || !lp) {
        free(nodes), free(tr.table), free(beams), free(next), free(cands), free(merged), free(nmerged), free(lp);
        return ocr_set_error(OCR_ERR_OOM, "ctc beam search: out of memory (T %d, C %d, beam %d)", T, C, W);
    }
    int nb = 1;
    for (size_t i = 0; i < cap; i++) tr.table[i] = -1;
    nodes[0] = (TrieNode){-1, 0};
    beams[0] = (Beam){0, 0, 0.0, -INFINITY};

    for (int t = 0; t < T; t++) {
        frame_log_probs(lp, scores + (size_t)t * C, C, is_logits);
        Cand *stay = cands, *ext = cands + W;
        int next_ext = 0;
        // Existing prefixes: a blank, or a repeat of the last label collapsing into it.
        for (int i = 0; i < nb; i++) {
            const Beam *b = &beams[i];
            double tot = log_add(b->pb, b->pnb);
            stay[i] = (Cand){0, i, i, 0, tot + lp[0], b->last ? b->pnb + lp[b->last] : -INFINITY};
            nmerged[i] = 0;
        }
        // A prefix that is beam j's prefix + label is also reached by extending beam j.
        for (int i = 0; i < nb; i++) {
            int node = beams[i].node;
            if (node == 0) continue;
            for (int j = 0; j < nb; j++) {
                if (beams[j].node != nodes[node].parent) continue;
                int c = nodes[node].label;
                double from = c == beams[j].last ? beams[j].pb : log_add(beams[j].pb, beams[j].pnb);
                stay[i].pnb = log_add(stay[i].pnb, from + lp[c]);
                merged[j * W + nmerged[j]++] = c;
                break;
            }
        }
        for (int i = 0; i < nb; i++) stay[i].score = log_add(stay[i].pb, stay[i].pnb);
        // New prefixes: beam j + c. After a repeated label only the blank-ending part extends.
        for (int j = 0; j < nb; j++) {
            const Beam *b = &beams[j];
            double tot = log_add(b->pb, b->pnb);
            for (int c = 1; c < C; c++) {
                double s = (c == b->last ? b->pb : tot) + lp[c];
                if (s == -INFINITY) continue;
                // Later candidates lose ties, so an equal score is rejected too (before the merge check).
                if (next_ext == W && s <= ext[0].score) continue;
                int dup = 0;
                for (int k = 0; k < nmerged[j]; k++) dup |= merged[j * W + k] == c;
                if (dup) continue;
                heap_push(ext, &next_ext, W, (Cand){s, (long)W + (long)j * C + c, j, c, -INFINITY, s});
            }
        }
        // Keep the best W of the existing and new prefixes.
        int ncand = 0;
        Cand *all = cands;  // stay[0 .. nb) is already at the front; move extensions after it
        memmove(all + nb, ext, sizeof(Cand) * next_ext);
        ncand = nb + next_ext;
        qsort(all, ncand, sizeof(Cand), cand_cmp);
        int keep = 0;
        for (int k = 0; k < ncand && keep < W; k++) {
            const Cand *c = &all[k];
            if (c->score == -INFINITY && keep > 0) break;  // keep one beam even when all are impossible
            Beam nbm;
            if (c->label == 0) {
                nbm = (Beam){beams[c->from].node, beams[c->from].last, c->pb, c->pnb};
            } else {
                nbm = (Beam){trie_child(&tr, beams[c->from].node, c->label), c->label, c->pb, c->pnb};
            }
            next[keep++] = nbm;
        }
        Beam *tmp = beams;
        beams = next;
        next = tmp;
        nb = keep;
    }

    int best = 0;
    double best_lp = log_add(beams[0].pb, beams[0].pnb);
    for (int i = 1; i < nb; i++) {
        double v = log_add(beams[i].pb, beams[i].pnb);
        if (v > best_lp) best = i, best_lp = v;
    }
    int n = 0;
    for (int node = beams[best].node; node > 0; node = nodes[node].parent) n++;
    int k = n;
    for (int node = beams[best].node; node > 0; node = nodes[node].parent) labels[--k] = nodes[node].label;
    *num_labels = n;
    if (log_prob) *log_prob = best_lp;
    free(nodes), free(tr.table), free(beams), free(next), free(cands), free(merged), free(nmerged), free(lp);
    return OCR_OK;
}

ocr_status_t ctc_beam_decode(char *text, size_t text_cap, double *prob, const float *scores, int T, int C,
                             int is_logits, int beam_width, const char *const *classes) {
    int *labels = malloc(sizeof(int) * (size_t)(T > 0 ? T : 1));
    if (!labels) return ocr_set_error(OCR_ERR_OOM, "ctc beam decode: out of memory for %d frames", T);
    int n = 0;
    double lp = 0.0;
    ocr_status_t st = ctc_beam_search(labels, &n, &lp, scores, T, C, is_logits, beam_width);
    if (st == OCR_OK) st = ctc_labels_to_text(text, text_cap, labels, n, classes, C);
    if (st == OCR_OK && prob) *prob = exp(lp);
    free(labels);
    return st;
}

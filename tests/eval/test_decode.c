// CTC decoding: greedy against hand-computed PaddleOCR CTCLabelDecode results (ties,
// repeats, blanks, spaces, Chinese), prefix beam search against greedy and against a
// brute-force search over every labelling.
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "eval/decode.h"
#include "tests/common/test_util.h"

// Index 0 is the blank. "中" and "文" are 3 bytes each in UTF-8.
static const char *const kClasses[] = {"blank", "a", "b", "中", "文", " "};
enum { C6 = 6 };

// A (T, 6) probability matrix whose frame t puts p[t] on class k[t] and spreads the rest
// evenly over the other classes.
static void peaked(float *probs, const int *k, const float *p, int T) {
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C6; c++) probs[t * C6 + c] = c == k[t] ? p[t] : (1.0f - p[t]) / (C6 - 1);
}

START_TEST(test_greedy_paddle_semantics) {
    // argmax:     a    a    -    a    b    b    中   -    文   " "  文
    int k[11] = {1, 1, 0, 1, 2, 2, 3, 0, 4, 5, 4};
    float p[11] = {0.9f, 0.8f, 0.7f, 0.6f, 0.5f, 0.95f, 0.55f, 0.99f, 0.65f, 0.75f, 0.85f};
    float probs[11 * C6];
    peaked(probs, k, p, 11);
    char text[64];
    float conf = -1.0f;
    ck_assert_int_eq(ctc_greedy_decode(text, sizeof text, &conf, probs, 11, C6, 0, kClasses), OCR_OK);
    // Repeats collapse (frames 0-1, 4-5), the blank at 2 separates the two a's; kept frames
    // are 0, 3, 4, 6, 8, 9, 10 (the first frame of each run).
    ck_assert_str_eq(text, "aab中文 文");
    float want = (0.9f + 0.6f + 0.5f + 0.55f + 0.65f + 0.75f + 0.85f) / 7.0f;
    ck_assert_msg(fabsf(conf - want) < 1e-6f, "confidence %g want %g", conf, want);

    int labels[11];
    float kept[11];
    ck_assert_int_eq(ctc_greedy_labels(labels, kept, probs, 11, C6, 0), 7);
    ck_assert_int_eq(labels[2], 2);
    ck_assert_float_eq(kept[2], 0.5f);
}
END_TEST

START_TEST(test_greedy_ties_and_blanks) {
    // Ties take the first maximum: frame 0 ties blank/a (blank wins), frame 1 ties a/b (a
    // wins), frame 2 ties b/中 (b wins).
    char text[32];
    float conf;
    float tie[3 * C6] = {0.4f, 0.4f, 0.1f, 0.1f, 0.0f, 0.0f,  //
                         0.1f, 0.4f, 0.4f, 0.1f, 0.0f, 0.0f,  //
                         0.1f, 0.1f, 0.3f, 0.3f, 0.1f, 0.1f};
    ck_assert_int_eq(ctc_greedy_decode(text, sizeof text, &conf, tie, 3, C6, 0, kClasses), OCR_OK);
    ck_assert_str_eq(text, "ab");
    ck_assert(fabsf(conf - 0.35f) < 1e-6f);  // mean of 0.4 and 0.3

    // All blank: empty text, confidence 0 (PaddleOCR's conf_list = [0]).
    int k[4] = {0, 0, 0, 0};
    float p[4] = {0.9f, 0.8f, 0.99f, 0.6f};
    float allb[4 * C6];
    peaked(allb, k, p, 4);
    conf = -1.0f;
    ck_assert_int_eq(ctc_greedy_decode(text, sizeof text, &conf, allb, 4, C6, 0, kClasses), OCR_OK);
    ck_assert_str_eq(text, "");
    ck_assert_float_eq(conf, 0.0f);

    // No frames at all.
    ck_assert_int_eq(ctc_greedy_decode(text, sizeof text, &conf, allb, 0, C6, 0, kClasses), OCR_OK);
    ck_assert_str_eq(text, "");
    ck_assert_float_eq(conf, 0.0f);

    // Repeats separated by blanks stay separate; a run with no blank collapses.
    int k2[6] = {3, 0, 3, 3, 0, 3};
    float p2[6] = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
    float rep[6 * C6];
    peaked(rep, k2, p2, 6);
    ck_assert_int_eq(ctc_greedy_decode(text, sizeof text, NULL, rep, 6, C6, 0, kClasses), OCR_OK);
    ck_assert_str_eq(text, "中中中");
}
END_TEST

START_TEST(test_greedy_logits) {
    // Logits give the same text; the confidence is the softmax maximum.
    float z[3 * C6] = {0.0f, 2.0f, 0.0f, 0.0f, 0.0f, 0.0f,  //
                       1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f,  //
                       0.0f, 0.0f, 0.0f, 0.0f, 3.0f, 1.0f};
    char text[32];
    float conf;
    ck_assert_int_eq(ctc_greedy_decode(text, sizeof text, &conf, z, 3, C6, 1, kClasses), OCR_OK);
    ck_assert_str_eq(text, "a文");
    double p0 = exp(2.0) / (exp(2.0) + 5.0), p2 = exp(3.0) / (exp(3.0) + exp(1.0) + 4.0);
    ck_assert_msg(fabs(conf - (p0 + p2) / 2.0) < 1e-6, "confidence %g", conf);
}
END_TEST

START_TEST(test_text_buffer) {
    int k[2] = {3, 4};
    float p[2] = {0.9f, 0.9f};
    float probs[2 * C6];
    peaked(probs, k, p, 2);
    char text[7];  // "中文" needs 6 bytes + NUL
    ck_assert_int_eq(ctc_greedy_decode(text, 6, NULL, probs, 2, C6, 0, kClasses), OCR_ERR_INVALID_ARG);
    ck_assert_int_eq(ctc_greedy_decode(text, 7, NULL, probs, 2, C6, 0, kClasses), OCR_OK);
    ck_assert_str_eq(text, "中文");
    ck_assert_uint_eq(ctc_text_capacity(2, kClasses, C6), 2 * 3 + 1);
    int bad[1] = {6};
    ck_assert_int_eq(ctc_labels_to_text(text, sizeof text, bad, 1, kClasses, C6), OCR_ERR_INVALID_ARG);
    int blank[1] = {0};
    ck_assert_int_eq(ctc_labels_to_text(text, sizeof text, blank, 1, kClasses, C6), OCR_ERR_INVALID_ARG);
}
END_TEST

START_TEST(test_beam_beats_greedy) {
    // Two frames, P(blank) = 0.6, P(a) = 0.4 each. Best path: blank blank -> "" (0.36).
    // p("a") = aa + a- + -a = 0.16 + 0.24 + 0.24 = 0.64.
    float probs[2 * 2] = {0.6f, 0.4f, 0.6f, 0.4f};
    const char *const cls[2] = {"blank", "a"};
    char text[8];
    float conf;
    ck_assert_int_eq(ctc_greedy_decode(text, sizeof text, &conf, probs, 2, 2, 0, cls), OCR_OK);
    ck_assert_str_eq(text, "");
    double prob = 0.0;
    for (int w = 2; w <= 4; w++) {
        ck_assert_int_eq(ctc_beam_decode(text, sizeof text, &prob, probs, 2, 2, 0, w, cls), OCR_OK);
        ck_assert_str_eq(text, "a");
        double want = 0.4 * 0.4 + 2 * (double)0.6f * (double)0.4f;
        ck_assert_msg(fabs(prob - want) < 1e-7, "beam %d: prob %.9f want %.9f", w, prob, want);
    }
    ck_assert_int_eq(ctc_beam_decode(text, sizeof text, &prob, probs, 2, 2, 0, 0, cls), OCR_ERR_INVALID_ARG);
}
END_TEST

START_TEST(test_beam_equals_greedy_when_peaked) {
    // One dominant class per frame (p = 0.9): the best path carries almost all the mass,
    // so beam search returns the greedy labelling, for logits and for probabilities.
    OcrRng rng = ocr_rng_make(42, 0);
    for (int trial = 0; trial < 20; trial++) {
        int T = 12, k[12];
        float p[12], probs[12 * C6], logits[12 * C6];
        for (int t = 0; t < T; t++) k[t] = (int)ocr_rng_next_int(&rng, 0, C6 - 1), p[t] = 0.9f;
        peaked(probs, k, p, T);
        for (int i = 0; i < T * C6; i++) logits[i] = logf(probs[i]) + 0.25f;  // shift: softmax unchanged
        char g[64], b[64], bl[64];
        double prob;
        ck_assert_int_eq(ctc_greedy_decode(g, sizeof g, NULL, probs, T, C6, 0, kClasses), OCR_OK);
        ck_assert_int_eq(ctc_beam_decode(b, sizeof b, &prob, probs, T, C6, 0, 5, kClasses), OCR_OK);
        ck_assert_int_eq(ctc_beam_decode(bl, sizeof bl, NULL, logits, T, C6, 1, 5, kClasses), OCR_OK);
        ck_assert_str_eq(b, g);
        ck_assert_str_eq(bl, g);
        ck_assert(prob > pow(0.9, T) * 0.999 && prob <= 1.0);
    }
}
END_TEST

// Brute force: p(labelling) for every labelling by summing all C^T paths; returns the best.
static double brute_best(int *best, int *nbest, const float *probs, int T, int C) {
    enum { MAXL = 8, MAXLAB = 4096 };
    int keys_len[MAXLAB], keys[MAXLAB][MAXL];
    double mass[MAXLAB];
    int nk = 0;
    long npaths = 1;
    for (int t = 0; t < T; t++) npaths *= C;
    for (long code = 0; code < npaths; code++) {
        int path[MAXL], out[MAXL], n = 0;
        long x = code;
        double pr = 1.0;
        for (int t = 0; t < T; t++) path[t] = (int)(x % C), x /= C, pr *= probs[t * C + path[t]];
        for (int t = 0; t < T; t++)
            if (path[t] != 0 && (t == 0 || path[t] != path[t - 1])) out[n++] = path[t];
        int found = -1;
        for (int i = 0; i < nk && found < 0; i++)
            if (keys_len[i] == n && memcmp(keys[i], out, sizeof(int) * n) == 0) found = i;
        if (found < 0) {
            ck_assert(nk < MAXLAB);
            found = nk++;
            keys_len[found] = n;
            memcpy(keys[found], out, sizeof(int) * n);
            mass[found] = 0.0;
        }
        mass[found] += pr;
    }
    int b = 0;
    for (int i = 1; i < nk; i++)
        if (mass[i] > mass[b]) b = i;
    *nbest = keys_len[b];
    memcpy(best, keys[b], sizeof(int) * keys_len[b]);
    return mass[b];
}

START_TEST(test_beam_exact_with_wide_beam) {
    // With a beam wider than the number of prefixes, prefix beam search is exact: the best
    // labelling and its total probability match brute force (this exercises the merging of
    // a prefix reached both by staying and by extension).
    const int T = 6, C = 3;
    for (uint64_t seed = 1; seed <= 25; seed++) {
        float probs[6 * 3];
        ocr_test_fill_uniform(probs, T * C, seed, 0.05f, 1.0f);
        for (int t = 0; t < T; t++) {
            float s = probs[t * C] + probs[t * C + 1] + probs[t * C + 2];
            for (int c = 0; c < C; c++) probs[t * C + c] /= s;
        }
        int want[8], nwant, got[8], ngot;
        double pw = brute_best(want, &nwant, probs, T, C);
        double lp;
        ck_assert_int_eq(ctc_beam_search(got, &ngot, &lp, probs, T, C, 0, 200), OCR_OK);
        ck_assert_int_eq(ngot, nwant);
        for (int i = 0; i < ngot; i++) ck_assert_int_eq(got[i], want[i]);
        ck_assert_msg(fabs(exp(lp) - pw) < 1e-6 * pw, "seed %d: beam %.12g brute %.12g", (int)seed, exp(lp), pw);
    }
}
END_TEST

START_TEST(test_beam_large_vocab) {
    // A 6625-class, 40-frame sample with a clear path: the beam finds it quickly.
    const int T = 40, C = 6625;
    float *z = malloc(sizeof(float) * T * C);
    ocr_test_fill_uniform(z, (int64_t)T * C, 7, -1.0f, 1.0f);
    for (int t = 0; t < T; t++) z[(size_t)t * C + (t % 3 == 2 ? 0 : 1 + (t * 37) % (C - 1))] += 12.0f;
    const char **cls = malloc(sizeof(char *) * C);
    static char names[6625][8];
    for (int c = 0; c < C; c++) {
        snprintf(names[c], sizeof names[c], "<%d>", c);
        cls[c] = names[c];
    }
    size_t cap = ctc_text_capacity(T, cls, C);
    char *g = malloc(cap), *b = malloc(cap);
    ck_assert_int_eq(ctc_greedy_decode(g, cap, NULL, z, T, C, 1, cls), OCR_OK);
    ck_assert_int_eq(ctc_beam_decode(b, cap, NULL, z, T, C, 1, 10, cls), OCR_OK);
    ck_assert_str_eq(b, g);
    free(z), free(cls), free(g), free(b);
}
END_TEST

static Suite *decode_suite(void) {
    Suite *s = suite_create("decode");
    TCase *tc = tcase_create("decode");
    tcase_add_test(tc, test_greedy_paddle_semantics);
    tcase_add_test(tc, test_greedy_ties_and_blanks);
    tcase_add_test(tc, test_greedy_logits);
    tcase_add_test(tc, test_text_buffer);
    tcase_add_test(tc, test_beam_beats_greedy);
    tcase_add_test(tc, test_beam_equals_greedy_when_peaked);
    tcase_add_test(tc, test_beam_exact_with_wide_beam);
    tcase_add_test(tc, test_beam_large_vocab);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ocr_test_run_suite(decode_suite()); }

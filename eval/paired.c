// Paired statistics for FP32-vs-AMP verdicts (see paired.h for the methods and their reasons).
#include "eval/paired.h"

#include <math.h>
#include <stdlib.h>

void paired_table_add(PairedTable *t, int base_correct, int run_correct) {
    if (base_correct && run_correct) t->both_right++;
    else if (base_correct) t->base_only++;
    else if (run_correct) t->run_only++;
    else t->both_wrong++;
}

PairedInterval paired_wilson(double x, double n, double z) {
    if (!(n > 0)) return (PairedInterval){0.0, 1.0};
    double z2 = z * z, p = x / n;
    double centre = (x + z2 / 2) / (n + z2);
    double var = p * (1 - p) * n + z2 / 4;  // x(n − x)/n + z²/4
    double half = z * sqrt(var > 0 ? var : 0) / (n + z2);
    PairedInterval r = {centre - half, centre + half};
    if (r.lo < 0) r.lo = 0;
    if (r.hi > 1) r.hi = 1;
    return r;
}

double paired_acc_delta(const PairedTable *t) {
    int64_t n = paired_n(t);
    return n > 0 ? (double)(t->run_only - t->base_only) / (double)n : 0.0;
}

PairedInterval paired_acc_interval_d(double a, double base_only, double run_only, double d, double z) {
    // Newcombe's notation with the run first: b = run right & baseline wrong, c = the reverse.
    double b = run_only, c = base_only;
    double n = a + b + c + d;
    if (!(n > 0)) return (PairedInterval){-1.0, 1.0};
    double p1 = (a + b) / n, p2 = (a + c) / n, delta = p1 - p2;
    PairedInterval w1 = paired_wilson(a + b, n, z), w2 = paired_wilson(a + c, n, z);
    // phi of the 2×2 table; 0 when a margin is empty (the correlation is undefined there).
    double margins = (a + b) * (c + d) * (a + c) * (b + d);
    double phi = margins > 0 ? (a * d - b * c) / sqrt(margins) : 0.0;
    double dl1 = p1 - w1.lo, du2 = w2.hi - p2, du1 = w1.hi - p1, dl2 = p2 - w2.lo;
    double vl = dl1 * dl1 - 2 * phi * dl1 * du2 + du2 * du2;
    double vu = du1 * du1 - 2 * phi * du1 * dl2 + dl2 * dl2;
    PairedInterval r = {delta - sqrt(vl > 0 ? vl : 0), delta + sqrt(vu > 0 ? vu : 0)};
    if (r.lo < -1) r.lo = -1;
    if (r.hi > 1) r.hi = 1;
    return r;
}

PairedInterval paired_acc_interval(const PairedTable *t, double z) {
    return paired_acc_interval_d((double)t->both_right, (double)t->base_only, (double)t->run_only,
                                 (double)t->both_wrong, z);
}

double paired_mcnemar_p(const PairedTable *t) {
    int64_t d = t->run_only + t->base_only;
    if (d == 0) return 1.0;
    int64_t k = t->run_only < t->base_only ? t->run_only : t->base_only;
    // P(X <= k) for X ~ Binomial(d, 1/2), summed in log space from the largest term down
    // (terms grow with i up to k <= d/2), so large d neither overflows nor underflows to 0.
    double lgd = lgamma((double)d + 1), l2 = (double)d * log(2.0);
    double top = lgd - lgamma((double)k + 1) - lgamma((double)(d - k) + 1) - l2;
    double sum = 0;
    for (int64_t i = k; i >= 0; i--) {
        double li = lgd - lgamma((double)i + 1) - lgamma((double)(d - i) + 1) - l2;
        double term = exp(li - top);
        sum += term;
        if (term < 1e-17 * sum) break;  // the rest cannot change the double
    }
    double p = 2.0 * exp(top) * sum;
    return p < 1.0 ? p : 1.0;
}

paired_verdict_t paired_verdict(PairedInterval ci, double tol, int higher_is_better) {
    double lo = higher_is_better ? ci.lo : -ci.hi, hi = higher_is_better ? ci.hi : -ci.lo;
    // A gate asks "is the run worse by more than tol?" (non-inferiority): an interval above −tol
    // passes whatever its upper edge; one entirely below −tol regresses.
    if (hi < -tol) return PAIRED_REGRESSION;
    if (lo > tol) return PAIRED_BETTER;
    if (lo >= -tol) return PAIRED_PASS;
    return PAIRED_INCONCLUSIVE;
}

const char *paired_verdict_name(paired_verdict_t v) {
    switch (v) {
    case PAIRED_PASS: return "pass";
    case PAIRED_REGRESSION: return "regression";
    case PAIRED_BETTER: return "better";
    default: return "inconclusive";
    }
}

static int acc_conclusive_at(const PairedTable *t, double n, double tol, double z) {
    double s = n / (double)paired_n(t);
    PairedInterval ci = paired_acc_interval_d((double)t->both_right * s, (double)t->base_only * s,
                                              (double)t->run_only * s, (double)t->both_wrong * s, z);
    return paired_verdict(ci, tol, 1) != PAIRED_INCONCLUSIVE;
}

int64_t paired_acc_lines_needed(const PairedTable *t, double tol, double z) {
    int64_t n0 = paired_n(t);
    if (n0 <= 0) return -1;
    if (paired_verdict(paired_acc_interval(t, z), tol, 1) != PAIRED_INCONCLUSIVE) return n0;
    // Doubling, then bisection: the interval narrows around the same delta as n grows.
    const double limit = 1e12;
    double lo = (double)n0, hi = (double)n0;
    while (!acc_conclusive_at(t, hi, tol, z)) {
        lo = hi;
        hi *= 2;
        if (hi > limit) return -1;
    }
    while (hi - lo > 1) {
        double mid = floor((lo + hi) / 2);
        if (acc_conclusive_at(t, mid, tol, z)) hi = mid;
        else lo = mid;
    }
    return (int64_t)hi;
}

double paired_cer_delta(const int32_t *ref, const int32_t *eb, const int32_t *er, int64_t n) {
    int64_t d = 0, r = 0;
    for (int64_t i = 0; i < n; i++) {
        d += (int64_t)er[i] - eb[i];
        r += ref[i];
    }
    return r > 0 ? (double)d / (double)r : (double)d;
}

uint64_t paired_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

ocr_status_t paired_cer_bootstrap(PairedInterval *ci, const int32_t *ref, const int32_t *eb, const int32_t *er,
                                  int64_t n, int B, double alpha, uint64_t seed) {
    if (B < 1) return ocr_set_error(OCR_ERR_INVALID_ARG, "paired bootstrap: %d resamples", B);
    if (!(alpha > 0 && alpha < 1)) return ocr_set_error(OCR_ERR_INVALID_ARG, "paired bootstrap: alpha %g", alpha);
    if (n <= 0) {
        *ci = (PairedInterval){-1.0, 1.0};
        return OCR_OK;
    }
    double *deltas = malloc(sizeof(double) * (size_t)B);
    if (!deltas) return ocr_set_error(OCR_ERR_OOM, "paired bootstrap: out of memory for %d resamples", B);
    uint64_t state = seed;
    for (int b = 0; b < B; b++) {
        int64_t d = 0, r = 0;
        for (int64_t k = 0; k < n; k++) {
            int64_t i = (int64_t)(paired_splitmix64(&state) % (uint64_t)n);
            d += (int64_t)er[i] - eb[i];
            r += ref[i];
        }
        deltas[b] = r > 0 ? (double)d / (double)r : (double)d;
    }
    qsort(deltas, (size_t)B, sizeof *deltas, cmp_double);
    // The inverse empirical distribution function: the ceil(B·q)-th smallest value.
    int ilo = (int)ceil((double)B * alpha / 2) - 1, ihi = (int)ceil((double)B * (1 - alpha / 2)) - 1;
    if (ilo < 0) ilo = 0;
    if (ihi > B - 1) ihi = B - 1;
    ci->lo = deltas[ilo];
    ci->hi = deltas[ihi];
    free(deltas);
    return OCR_OK;
}

int64_t paired_scaled_lines_needed(int64_t n, double delta, PairedInterval ci, double tol, int higher_is_better) {
    if (n <= 0) return -1;
    if (paired_verdict(ci, tol, higher_is_better) != PAIRED_INCONCLUSIVE) return n;
    // In the orientation where worse is negative: the interval [d − hl, d + hu].
    double d = higher_is_better ? delta : -delta;
    double hl = higher_is_better ? delta - ci.lo : ci.hi - delta, hu = higher_is_better ? ci.hi - delta : delta - ci.lo;
    if (hl < 0) hl = 0;
    if (hu < 0) hu = 0;
    // The factor k = √(n / n') the half-widths must shrink by for the nearest conclusive verdict
    // (inconclusive means lo < −tol <= hi).
    double k;
    if (d > -tol) {
        k = hl > 0 ? (d + tol) / hl : INFINITY;  // PASS: the lower edge up to −tol
    } else if (d < -tol) {
        k = hu > 0 ? (-tol - d) / hu : INFINITY;  // REGRESSION: the upper edge below −tol
    } else {
        return -1;  // the delta sits on −tol
    }
    if (!(k > 0) || !isfinite(k)) return -1;
    double need = ceil((double)n / (k * k));
    if (need > 1e12) return -1;
    return need > (double)n ? (int64_t)need : n + 1;
}

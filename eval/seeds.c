// The seed-aware regression verdict (see seeds.h for the model, the interval and their reasons).
#include "eval/seeds.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---- Student's t quantile ------------------------------------------------------------------------

// (M_PI and M_SQRT2 are POSIX, not C11.)
#define SEEDS_PI 3.14159265358979323846
#define SEEDS_SQRT2 1.41421356237309504880

static double norm_lower(double x) { return 0.5 * erfc(-x / SEEDS_SQRT2); }
static double norm_pdf(double x) { return exp(-0.5 * x * x) / sqrt(2.0 * SEEDS_PI); }

// The normal quantile: a rational first guess (Abramowitz & Stegun 26.2.23, |error| < 4.5e-4),
// then Halley steps on the lower tail, where erfc keeps full relative precision.
static double norm_quantile(double p) {
    if (p == 0.5) return 0.0;
    double q = p < 0.5 ? p : 1.0 - p;
    double t = sqrt(-2.0 * log(q));
    double x = -(t - (2.515517 + t * (0.802853 + t * 0.010328)) / (1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))));
    for (int k = 0; k < 6; k++) {
        double f = norm_lower(x) - q, d = norm_pdf(x);
        if (!(d > 0)) break;
        double step = f / (d + x * f / 2);
        x -= step;
        if (fabs(step) <= 1e-16 * fabs(x)) break;
    }
    return p < 0.5 ? x : -x;
}

// The continued fraction of the regularised incomplete beta function I_x(a, b) (DLMF 8.17.22),
// evaluated with the modified Lentz method: returns K with I_x(a, b) = front / (a·K).
static double ibeta_cf(double x, double a, double b) {
    const double tiny = 1e-300;
    double f = 1.0, C = 1.0, D = 0.0;
    for (int j = 1; j < 20000; j++) {
        int m = j / 2;
        double dj = (j & 1) ? -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
                            : m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m));
        D = 1.0 + dj * D;
        if (fabs(D) < tiny) D = tiny;
        D = 1.0 / D;
        C = 1.0 + dj / C;
        if (fabs(C) < tiny) C = tiny;
        double delta = C * D;
        f *= delta;
        if (fabs(delta - 1.0) < 1e-16) break;
    }
    return f;
}

// log Γ(a + ½) − log Γ(a). For large a the two lgamma values are large and nearly equal, so the
// difference comes from its asymptotic series instead: ½·log a + Σ_k (2^(1−k) − 2)·B_k /
// (k(k − 1)·a^(k−1)) over even k (B_k the Bernoulli numbers); to a^−9 the omitted term is below
// 1e-16 from a = 25 on.
static double lgamma_half_ratio(double a) {
    if (a < 25) return lgamma(a + 0.5) - lgamma(a);
    double r = 1 / a, r2 = r * r;
    return 0.5 * log(a) + r * (-1.0 / 8 + r2 * (1.0 / 192 + r2 * (-1.0 / 640 + r2 * (17.0 / 14336 - r2 * 31.0 / 18432))));
}

// I_x(a, b) with y = 1 − x given separately (both computed without cancellation by the caller).
static double ibeta(double x, double y, double a, double b) {
    if (x <= 0) return 0.0;
    if (y <= 0) return 1.0;
    // log B(a, b); b = ½ (the t distribution's case) through the ratio above.
    double lbeta = b == 0.5 ? 0.5 * log(SEEDS_PI) - lgamma_half_ratio(a) : lgamma(a) + lgamma(b) - lgamma(a + b);
    double front = exp(a * log(x) + b * log(y) - lbeta);
    // The fraction converges fast for x below the mean (a + 1)/(a + b + 2); above it, the
    // symmetry I_x(a, b) = 1 − I_y(b, a).
    if (x < (a + 1) / (a + b + 2)) return front / (a * ibeta_cf(x, a, b));
    return 1.0 - front / (b * ibeta_cf(y, b, a));
}

// P(T > t) for t >= 0 with nu degrees of freedom: ½·I_{ν/(ν+t²)}(ν/2, ½).
static double t_upper(double t, double nu) {
    double den = nu + t * t;
    return 0.5 * ibeta(nu / den, t * t / den, nu / 2, 0.5);
}

static double t_pdf(double t, double nu) {
    double l = lgamma_half_ratio(nu / 2) - 0.5 * log(nu * SEEDS_PI) - (nu + 1) / 2 * log1p(t * t / nu);
    return exp(l);
}

double seeds_t_quantile(double p, double nu) {
    if (!(p > 0 && p < 1) || !(nu > 0)) return NAN;
    if (p == 0.5) return 0.0;
    if (p < 0.5) return -seeds_t_quantile(1.0 - p, nu);
    double z = norm_quantile(p);
    if (isinf(nu)) return z;
    if (nu >= 1000) {
        // Abramowitz & Stegun 26.7.5: the first omitted term is below 1e-13 here.
        double z2 = z * z, z3 = z2 * z, z5 = z3 * z2, z7 = z5 * z2, z9 = z7 * z2;
        double g1 = (z3 + z) / 4, g2 = (5 * z5 + 16 * z3 + 3 * z) / 96,
               g3 = (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / 384,
               g4 = (79 * z9 + 776 * z7 + 1482 * z5 - 1920 * z3 - 945 * z) / 92160;
        return z + (g1 + (g2 + (g3 + g4 / nu) / nu) / nu) / nu;
    }
    // Newton on the upper tail, kept inside a bracket [lo, hi] by bisection.
    double target = 1.0 - p, lo = 0.0, hi = 1.0;
    while (t_upper(hi, nu) > target) {
        lo = hi;
        hi *= 2;
        if (hi > 1e300) return INFINITY;
    }
    double t = z > lo && z < hi ? z : (lo + hi) / 2;
    for (int k = 0; k < 400; k++) {
        double q = t_upper(t, nu) - target;
        if (q > 0) lo = t;
        else hi = t;
        double d = t_pdf(t, nu), next = d > 0 ? t + q / d : NAN;
        if (!(next > lo && next < hi)) next = (lo + hi) / 2;  // Newton left the bracket
        if (fabs(next - t) <= 2e-16 * fabs(t) || hi - lo <= 2e-16 * hi) {
            t = next;
            break;
        }
        t = next;
    }
    return t;
}

// ---- the seeds × lines table ---------------------------------------------------------------------

// The two tables of seeds.h as cell functions over the caller's arrays.
typedef struct {
    int S;
    int64_t n;
    const uint8_t *bc, *cc;
    const int32_t *be, *ce, *ref;
    int cer;       // 0: accuracy d, 1: linearised CER z
    double delta;  // CER: Δ
    double scale;  // CER: n / R (n when R = 0)
} Table;

static inline double cell(const Table *t, int s, int64_t i) {
    size_t k = (size_t)s * (size_t)t->n + (size_t)i;
    if (!t->cer) return (double)(t->cc[k] != 0) - (double)(t->bc[k] != 0);
    return ((double)t->ce[k] - (double)t->be[k] - t->delta * (double)t->ref[i]) * t->scale;
}

typedef struct {
    double ms_seed, ms_line, ms_resid;  // NAN where S or n leaves them undefined
    double pooled_var;  // Σ (x − x̄)² / (S·n − 1): the variance of all cells as one sample (0 when S·n = 1)
} Anova;

// Two passes: the seed and line means, then the squared deviations (no SS_total − ... cancellation).
static void anova(Anova *a, const Table *t, double *line_mean) {
    int S = t->S;
    int64_t n = t->n;
    double seed_mean[SEEDS_MAX], total = 0;
    for (int64_t i = 0; i < n; i++) line_mean[i] = 0;
    for (int s = 0; s < S; s++) {
        double sum = 0;
        for (int64_t i = 0; i < n; i++) {
            double x = cell(t, s, i);
            sum += x;
            line_mean[i] += x;
        }
        seed_mean[s] = sum / (double)n;
        total += sum;
    }
    double mean = total / ((double)S * (double)n);
    double ss_seed = 0, ss_line = 0, ss_resid = 0, ss_all = 0;
    for (int64_t i = 0; i < n; i++) {
        line_mean[i] /= S;
        ss_line += (line_mean[i] - mean) * (line_mean[i] - mean);
    }
    for (int s = 0; s < S; s++) {
        ss_seed += (seed_mean[s] - mean) * (seed_mean[s] - mean);
        for (int64_t i = 0; i < n; i++) {
            double x = cell(t, s, i), r = x - seed_mean[s] - line_mean[i] + mean;
            ss_resid += r * r;
            ss_all += (x - mean) * (x - mean);
        }
    }
    a->ms_seed = S > 1 ? (double)n * ss_seed / (S - 1) : NAN;
    a->ms_line = n > 1 ? (double)S * ss_line / (double)(n - 1) : NAN;
    a->ms_resid = S > 1 && n > 1 ? ss_resid / ((double)(S - 1) * (double)(n - 1)) : NAN;
    double sn = (double)S * (double)n;
    a->pooled_var = sn > 1 ? ss_all / (sn - 1) : 0.0;
}

// ---- intervals -----------------------------------------------------------------------------------

#define T975(nu) seeds_t_quantile(0.975, (nu))

// What the interval of one metric depends on, now (at S, n) and at other sizes.
typedef struct {
    int acc;           // accuracy (higher is better, Newcombe floor) or CER
    int one_seed;      // S = 1 rule
    double delta;
    double S0, n0;     // the sizes measured
    // Crossed: the mean squares at the measured sizes; the components for other sizes.
    double ms_seed, ms_line, ms_resid;
    double va, vb, ve;
    double prior_var;  // one seed: 2σ² per pair
    double line_var;   // one seed: the variance of the cells over lines
    double pooled_var; // CER floor: the pooled variance of the cells
    double cells[4];   // accuracy floor: pooled 2×2 table (both right, base only, cand only, both wrong)
} Model;

static PairedInterval hull(PairedInterval a, PairedInterval b, int *floored) {
    int f = 0;
    if (b.lo < a.lo) a.lo = b.lo, f = 1;
    if (b.hi > a.hi) a.hi = b.hi, f = 1;
    if (floored) *floored = f;
    return a;
}

// The pooled (floor) interval at S·n cells, or the one-seed line interval (S = 1).
static PairedInterval pooled_at(const Model *m, double sn) {
    if (m->acc) {
        double k = sn / (m->S0 * m->n0);
        return paired_acc_interval_d(m->cells[0] * k, m->cells[1] * k, m->cells[2] * k, m->cells[3] * k, PAIRED_Z95);
    }
    double h = PAIRED_Z95 * sqrt(m->pooled_var / sn);
    return (PairedInterval){m->delta - h, m->delta + h};
}

// The crossed interval from a seed-part mean square (S − 1 dof) and the line mean squares.
static PairedInterval crossed_interval(const Model *m, double S, double n, double ms_seed, double ms_line,
                                       double ms_resid, int *floored, double *dof_line) {
    double L = n > 1 ? ms_line - ms_resid : 0.0;
    if (!(L > 0)) L = 0.0;
    double qs = T975(S - 1), h2 = qs * qs * ms_seed, f = INFINITY;
    if (L > 0) {
        f = L * L / (ms_line * ms_line / (n - 1) + ms_resid * ms_resid / ((S - 1) * (n - 1)));
        // Below one degree of freedom only when L is within noise of 0, where its share is
        // negligible: capping keeps a near-zero estimate from a near-infinite quantile.
        double ql = T975(f > 1 ? f : 1.0);
        h2 += ql * ql * L;
    }
    if (dof_line) *dof_line = f;
    double h = sqrt(h2 / (S * n));
    PairedInterval ci = {m->delta - h, m->delta + h};
    return hull(ci, pooled_at(m, S * n), floored);
}

// The one-seed interval at n lines: the line interval widened by z·√(2σ²) in quadrature.
static PairedInterval one_seed_interval(const Model *m, double n) {
    double p2 = PAIRED_Z95 * PAIRED_Z95 * m->prior_var;
    PairedInterval line;
    if (m->acc) {
        line = pooled_at(m, n);
    } else {
        double h = PAIRED_Z95 * sqrt(m->line_var / n);
        line = (PairedInterval){m->delta - h, m->delta + h};
    }
    double hl = m->delta - line.lo, hh = line.hi - m->delta;
    if (hl < 0) hl = 0;
    if (hh < 0) hh = 0;
    return (PairedInterval){m->delta - sqrt(hl * hl + p2), m->delta + sqrt(hh * hh + p2)};
}

static PairedInterval clip(PairedInterval ci, int acc) {
    if (acc) {
        if (ci.lo < -1) ci.lo = -1;
        if (ci.hi > 1) ci.hi = 1;
    }
    return ci;
}

// The interval expected at S seeds and n lines from the estimated components (seeds.h).
static PairedInterval interval_at(const Model *m, double S, double n) {
    if (S < 2) return clip(one_seed_interval(m, n), m->acc);
    double ms_seed = m->ve + n * m->va, ms_line = m->ve + S * m->vb, ms_resid = m->ve;
    return clip(crossed_interval(m, S, n, ms_seed, ms_line, ms_resid, NULL, NULL), m->acc);
}

static int conclusive_at(const Model *m, double S, double n, double tol) {
    return paired_verdict(interval_at(m, S, n), tol, m->acc) != PAIRED_INCONCLUSIVE;
}

// The smallest size in (lo, limit] at which the verdict is conclusive, the other size fixed;
// lo is inconclusive. Doubling, then bisection (the expected interval narrows monotonically in
// either size from 2 seeds on).
static int64_t search(const Model *m, int vary_seeds, int64_t lo, int64_t first, int64_t limit, double fixed,
                      double tol) {
#define AT(x) (vary_seeds ? conclusive_at(m, (double)(x), fixed, tol) : conclusive_at(m, fixed, (double)(x), tol))
    int64_t hi = first;
    while (!AT(hi)) {
        if (hi >= limit) return -1;
        lo = hi;
        hi = hi > limit / 2 ? limit : hi * 2;
    }
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (AT(mid)) hi = mid;
        else lo = mid;
    }
    return hi;
#undef AT
}

// ---- the comparison ------------------------------------------------------------------------------

SeedsOptions seeds_default_options(void) {
    SeedsOptions o = {0.005, 0.005, SEEDS_PRIOR_SD_ACC, SEEDS_PRIOR_SD_CER};
    return o;
}

const char *seeds_method_name(seeds_method_t m) { return m == SEEDS_METHOD_CROSSED ? "crossed" : "one_seed"; }

const char *seeds_method_description(seeds_method_t m) {
    if (m == SEEDS_METHOD_CROSSED)
        return "seeds x lines mean squares: t interval with the seed and line parts combined conservatively "
               "(Banerjee), never narrower than the pooled paired interval";
    return "one seed: the per-line paired interval widened by an assumed seed-to-seed SD (training noise not "
           "measured)";
}

static double mean_of(const double *x, int S) {
    double s = 0;
    for (int i = 0; i < S; i++) s += x[i];
    return s / S;
}

static double sd_of(const double *x, int S) {
    if (S < 2) return NAN;
    double m = mean_of(x, S), ss = 0;
    for (int i = 0; i < S; i++) ss += (x[i] - m) * (x[i] - m);
    return sqrt(ss / (S - 1));
}

// Fills one metric from its table statistics.
static void finish_metric(SeedsMetric *o, Model *m, const Anova *a, int S, int64_t n, double tol, double prior_sd) {
    m->S0 = S;
    m->n0 = (double)n;
    m->one_seed = S == 1;
    m->pooled_var = a->pooled_var;
    o->delta = m->delta;
    o->ms_seed = a->ms_seed;
    o->ms_line = a->ms_line;
    o->ms_resid = a->ms_resid;
    double sn = (double)S * (double)n;
    if (S == 1) {
        m->prior_var = 2 * prior_sd * prior_sd;
        m->line_var = n > 1 ? a->ms_line : 0.0;  // S = 1: MS_line is the variance over lines
        // For the predictions: the per-line differences taken as seed-specific (residual), the
        // assumed noise as the whole per-pair variance of the delta (seeds.h).
        m->va = fmax(m->prior_var - m->line_var / (double)n, 0.0);
        m->vb = 0;
        m->ve = m->line_var;
        o->ci = clip(one_seed_interval(m, (double)n), m->acc);
        o->dof_seed = o->dof_line = INFINITY;
        o->var_seed = m->prior_var;
        o->var_line = m->line_var;
        o->var_resid = NAN;
        o->share_seed = m->prior_var;
        o->share_line = m->line_var / (double)n;
        o->share_resid = 0;
        o->floored = 0;
    } else {
        double ms_line = n > 1 ? a->ms_line : 0.0, ms_resid = n > 1 ? a->ms_resid : 0.0;
        double L = ms_line - ms_resid;
        if (!(L > 0)) L = 0;
        m->va = n > 1 ? fmax(a->ms_seed - ms_resid, 0.0) / (double)n : a->ms_seed;
        m->vb = L / S;
        m->ve = ms_resid;
        o->ci = clip(crossed_interval(m, S, (double)n, a->ms_seed, ms_line, ms_resid, &o->floored, &o->dof_line),
                     m->acc);
        o->dof_seed = S - 1;
        o->var_seed = m->va;
        o->var_line = m->vb;
        o->var_resid = m->ve;
        o->share_seed = fmax(a->ms_seed - ms_resid, 0.0) / sn;
        o->share_line = L / sn;
        o->share_resid = fmin(a->ms_seed, ms_resid) / sn;
    }
    o->se = sqrt(o->share_seed + o->share_line + o->share_resid);
    o->verdict = paired_verdict(o->ci, tol, m->acc);
    if (o->verdict != PAIRED_INCONCLUSIVE) {
        o->seeds_needed = S;
        o->lines_needed = n;
    } else {
        o->seeds_needed = search(m, 1, S, S < 2 ? 2 : S + 1, SEEDS_NEEDED_LIMIT, (double)n, tol);
        o->lines_needed = search(m, 0, n, n + 1, SEEDS_LINES_LIMIT, (double)S, tol);
    }
}

ocr_status_t seeds_compare(SeedsResult *out, int S, int64_t n, const uint8_t *base_correct, const uint8_t *cand_correct,
                           const int32_t *base_edits, const int32_t *cand_edits, const int32_t *ref_chars,
                           const SeedsOptions *opt) {
    if (!out || !opt) return ocr_set_error(OCR_ERR_INVALID_ARG, "seeds_compare: no %s", out ? "options" : "result");
    if (S < 1 || S > SEEDS_MAX)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "seeds_compare: %d seed pairs (1 to %d)", S, SEEDS_MAX);
    if (n < 1 || (uint64_t)n > SIZE_MAX / sizeof(double) / SEEDS_MAX)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "seeds_compare: %lld lines", (long long)n);
    if (!base_correct || !cand_correct || !base_edits || !cand_edits || !ref_chars)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "seeds_compare: a per-line array is NULL");
    if (!(opt->acc_tol >= 0) || !(opt->cer_tol >= 0) || !(opt->prior_seed_sd_acc >= 0) ||
        !(opt->prior_seed_sd_cer >= 0) || isinf(opt->acc_tol) || isinf(opt->cer_tol) ||
        isinf(opt->prior_seed_sd_acc) || isinf(opt->prior_seed_sd_cer))
        return ocr_set_error(OCR_ERR_INVALID_ARG,
                             "seeds_compare: tolerances (%g, %g) and prior SDs (%g, %g) must be finite and >= 0",
                             opt->acc_tol, opt->cer_tol, opt->prior_seed_sd_acc, opt->prior_seed_sd_cer);
    int64_t R = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ref_chars[i] < 0)
            return ocr_set_error(OCR_ERR_INVALID_ARG, "seeds_compare: line %lld has %d reference characters",
                                 (long long)i, ref_chars[i]);
        R += ref_chars[i];
    }
    size_t sn = (size_t)S * (size_t)n;
    for (size_t k = 0; k < sn; k++)
        if (base_edits[k] < 0 || cand_edits[k] < 0)
            return ocr_set_error(OCR_ERR_INVALID_ARG, "seeds_compare: seed pair %zu, line %zu has negative edits",
                                 k / (size_t)n, k % (size_t)n);
    double *scratch = malloc(sizeof(double) * (size_t)n);
    if (!scratch) return ocr_set_error(OCR_ERR_OOM, "seeds_compare: out of memory for %lld lines", (long long)n);

    memset(out, 0, sizeof *out);
    out->seeds = S;
    out->lines = n;
    out->ref_chars = R;
    out->method = S == 1 ? SEEDS_METHOD_ONE_SEED : SEEDS_METHOD_CROSSED;
    out->prior_seed_sd_acc = opt->prior_seed_sd_acc;
    out->prior_seed_sd_cer = opt->prior_seed_sd_cer;

    // Per seed pair, and the pooled 2×2 table and edit sums (exact integers).
    int64_t cells[4] = {0, 0, 0, 0}, base_right = 0, cand_right = 0, edit_diff = 0;
    for (int s = 0; s < S; s++) {
        int64_t b = 0, c = 0, eb = 0, ec = 0;
        for (int64_t i = 0; i < n; i++) {
            size_t k = (size_t)s * (size_t)n + (size_t)i;
            int bi = base_correct[k] != 0, ci = cand_correct[k] != 0;
            b += bi;
            c += ci;
            cells[bi && ci ? 0 : bi ? 1 : ci ? 2 : 3]++;
            eb += base_edits[k];
            ec += cand_edits[k];
        }
        base_right += b;
        cand_right += c;
        edit_diff += ec - eb;
        out->base_acc[s] = (double)b / (double)n;
        out->cand_acc[s] = (double)c / (double)n;
        out->acc_delta[s] = (double)(c - b) / (double)n;
        out->base_cer[s] = R > 0 ? (double)eb / (double)R : (double)eb;
        out->cand_cer[s] = R > 0 ? (double)ec / (double)R : (double)ec;
        out->cer_delta[s] = R > 0 ? (double)(ec - eb) / (double)R : (double)(ec - eb);
    }

    Table t = {S, n, base_correct, cand_correct, base_edits, cand_edits, ref_chars, 0, 0.0, 0.0};
    Anova a;
    Model m;
    memset(&m, 0, sizeof m);
    m.acc = 1;
    m.delta = (double)(cand_right - base_right) / ((double)S * (double)n);
    for (int k = 0; k < 4; k++) m.cells[k] = (double)cells[k];
    anova(&a, &t, scratch);
    finish_metric(&out->acc, &m, &a, S, n, opt->acc_tol, opt->prior_seed_sd_acc);
    out->acc.base_mean = mean_of(out->base_acc, S);
    out->acc.cand_mean = mean_of(out->cand_acc, S);
    out->acc.base_sd = sd_of(out->base_acc, S);
    out->acc.cand_sd = sd_of(out->cand_acc, S);

    memset(&m, 0, sizeof m);
    m.acc = 0;
    m.delta = R > 0 ? (double)edit_diff / ((double)S * (double)R) : (double)edit_diff / S;
    t.cer = 1;
    t.delta = R > 0 ? m.delta : 0.0;
    t.scale = R > 0 ? (double)n / (double)R : (double)n;
    anova(&a, &t, scratch);
    finish_metric(&out->cer, &m, &a, S, n, opt->cer_tol, opt->prior_seed_sd_cer);
    out->cer.base_mean = mean_of(out->base_cer, S);
    out->cer.cand_mean = mean_of(out->cand_cer, S);
    out->cer.base_sd = sd_of(out->base_cer, S);
    out->cer.cand_sd = sd_of(out->cand_cer, S);
    free(scratch);

    paired_verdict_t va = out->acc.verdict, vc = out->cer.verdict;
    if (va == PAIRED_REGRESSION || vc == PAIRED_REGRESSION) out->verdict = PAIRED_REGRESSION;
    else if (va == PAIRED_INCONCLUSIVE || vc == PAIRED_INCONCLUSIVE) out->verdict = PAIRED_INCONCLUSIVE;
    else out->verdict = PAIRED_PASS;
    return OCR_OK;
}

#!/usr/bin/env python3
"""Reference values and data for the seed-aware verdict (eval/seeds.h), computed independently.

  python3 tools/seeds_reference.py reference
      writes tests/eval/data/seeds_reference.json for tests/eval/test_seeds.c: Student t quantiles
      (scipy.stats.t.ppf) and, for fixed small tables, every quantity of a SeedsResult. The mean
      squares come from statsmodels' anova_lm on a long-format table (ols x ~ C(seed) + C(line)),
      the quantiles from scipy, Newcombe's interval from the paper's formulas, and "what would
      decide" from a brute-force scan over the seed and line counts (not the C code's doubling and
      bisection).
  python3 tools/seeds_reference.py fp32-tsv OUT SEED=LINES.tsv ...
      turns `ocrtrain eval --lines` files of FP32 runs at several seeds into the recorded-data file
      of tests/eval/test_seeds_calibration.c (format in that test's header). Edits per line are the
      Levenshtein distance between label and prediction over code points after removing every
      U+0020 (eval/metrics.h with the configs' ignore_space: true); the script checks that the
      recomputed exact match agrees with the file's `correct` column on every line.
  python3 tools/seeds_reference.py simulate [--reps R]
      the method comparison of docs/AMP.md ("The seed-aware verdict"): one-sided and two-sided miss
      rates of Satterthwaite's t (the textbook choice) and of the chosen interval, on binary data
      from a crossed latent model with known zero effect.

numpy, scipy and statsmodels (pip install numpy scipy statsmodels); CI never runs this script.
"""
import csv
import json
import math
import os
import sys

import numpy as np
import pandas as pd
from scipy import stats
import statsmodels.formula.api as smf
from statsmodels.stats.anova import anova_lm

Z = stats.norm.ppf(0.975)
SEEDS_NEEDED_LIMIT = 100000
LINES_LIMIT = 10**12
PRIOR_ACC, PRIOR_CER = 0.015, 0.002
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def t975(dof):
    dof = np.asarray(dof, dtype=float)
    return np.where(np.isinf(dof), Z, stats.t.ppf(0.975, np.where(np.isinf(dof), 1.0, dof)))


# ---- Newcombe's hybrid score interval (Stat Med 1998;17:2635, method 10), vectorised --------------

def wilson(x, n, z=Z):
    centre = (x + z * z / 2) / (n + z * z)
    half = z * np.sqrt(np.maximum(x * (n - x) / n + z * z / 4, 0)) / (n + z * z)
    return np.maximum(centre - half, 0.0), np.minimum(centre + half, 1.0)


def newcombe(both_right, base_only, cand_only, both_wrong, z=Z):
    a, b, c, d = (np.asarray(v, dtype=float) for v in (both_right, cand_only, base_only, both_wrong))
    n = a + b + c + d
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson(a + b, n, z)
    l2, u2 = wilson(a + c, n, z)
    den = (a + b) * (c + d) * (a + c) * (b + d)
    phi = np.where(den > 0, (a * d - b * c) / np.sqrt(np.where(den > 0, den, 1.0)), 0.0)
    lo = p1 - p2 - np.sqrt(np.maximum((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2, 0))
    hi = p1 - p2 + np.sqrt(np.maximum((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2, 0))
    return np.maximum(lo, -1.0), np.minimum(hi, 1.0)


def verdict(lo, hi, tol, higher_is_better):
    lo, hi = np.asarray(lo), np.asarray(hi)
    if not higher_is_better:
        lo, hi = -hi, -lo
    return np.where(hi < -tol, "regression", np.where(lo > tol, "better", np.where(lo >= -tol, "pass", "inconclusive")))


# ---- mean squares with statsmodels ----------------------------------------------------------------

def mean_squares(x):
    """MS_seed, MS_line, MS_resid of an S x n table (nan where undefined) and the pooled variance."""
    S, n = x.shape
    pooled = float(np.var(x, ddof=1)) if S * n > 1 else 0.0
    if S > 1 and n > 1:
        df = pd.DataFrame({"x": x.ravel(), "seed": np.repeat(np.arange(S), n), "line": np.tile(np.arange(n), S)})
        table = anova_lm(smf.ols("x ~ C(seed) + C(line)", data=df).fit())
        ms = table["mean_sq"]
        return float(ms["C(seed)"]), float(ms["C(line)"]), float(ms["Residual"]), pooled
    if S > 1:  # one line: the variance of the S cells, times n = 1
        return float(np.var(x[:, 0], ddof=1)), math.nan, math.nan, pooled
    if n > 1:  # one seed: the variance over lines
        return math.nan, float(np.var(x[0], ddof=1)), math.nan, pooled
    return math.nan, math.nan, math.nan, pooled


# ---- the interval model of eval/seeds.h, restated ---------------------------------------------------

class Metric:
    def __init__(self, acc, delta, S, n, ms, prior_sd, cells):
        self.acc, self.delta, self.S0, self.n0 = acc, delta, S, n
        self.ms_seed, self.ms_line, self.ms_resid, self.pooled = ms
        self.cells = cells
        if S == 1:
            self.prior_var = 2 * prior_sd ** 2
            self.line_var = self.ms_line if n > 1 else 0.0
            self.va, self.vb, self.ve = max(self.prior_var - self.line_var / n, 0.0), 0.0, self.line_var
        else:
            ml = self.ms_line if n > 1 else 0.0
            mr = self.ms_resid if n > 1 else 0.0
            self.L = max(ml - mr, 0.0)
            self.va = max(self.ms_seed - mr, 0.0) / n if n > 1 else self.ms_seed
            self.vb = self.L / S
            self.ve = mr

    def pooled_interval(self, sn):
        if self.acc:
            k = sn / (self.S0 * self.n0)
            return newcombe(*(c * k for c in self.cells))
        h = Z * np.sqrt(self.pooled / sn)
        return self.delta - h, self.delta + h

    def crossed(self, S, n, ms_seed, ms_line, ms_resid):
        S, n = np.asarray(S, dtype=float), np.asarray(n, dtype=float)
        L = np.where(n > 1, ms_line - ms_resid, 0.0)
        L = np.where(L > 0, L, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.where(L > 0, L * L / (ms_line ** 2 / (n - 1) + ms_resid ** 2 / ((S - 1) * (n - 1))), np.inf)
        h2 = t975(S - 1) ** 2 * ms_seed + np.where(L > 0, t975(np.maximum(f, 1.0)) ** 2 * L, 0.0)
        h = np.sqrt(h2 / (S * n))
        plo, phi = self.pooled_interval(S * n)
        lo, hi = self.delta - h, self.delta + h
        floored = (plo < lo) | (phi > hi)
        return np.minimum(lo, plo), np.maximum(hi, phi), f, floored

    def one_seed(self, n):
        n = np.asarray(n, dtype=float)
        p2 = Z * Z * self.prior_var
        if self.acc:
            llo, lhi = self.pooled_interval(n)
        else:
            h = Z * np.sqrt(self.line_var / n)
            llo, lhi = self.delta - h, self.delta + h
        hl, hh = np.maximum(self.delta - llo, 0), np.maximum(lhi - self.delta, 0)
        return self.delta - np.sqrt(hl * hl + p2), self.delta + np.sqrt(hh * hh + p2)

    def clip(self, lo, hi):
        if self.acc:
            return np.maximum(lo, -1.0), np.minimum(hi, 1.0)
        return lo, hi

    def at(self, S, n):
        """The expected interval at S >= 2 seeds (arrays allowed), or S = 1 in the one-seed rule."""
        S = np.asarray(S, dtype=float)
        if np.all(S < 2):
            return self.clip(*self.one_seed(n))
        ms_seed = self.ve + np.asarray(n, dtype=float) * self.va
        lo, hi, _, _ = self.crossed(S, n, ms_seed, self.ve + S * self.vb, self.ve)
        return self.clip(lo, hi)

    def observed(self):
        if self.S0 == 1:
            lo, hi = self.clip(*self.one_seed(self.n0))
            return float(lo), float(hi), math.inf, False
        ml = self.ms_line if self.n0 > 1 else 0.0
        mr = self.ms_resid if self.n0 > 1 else 0.0
        lo, hi, f, floored = self.crossed(self.S0, self.n0, self.ms_seed, ml, mr)
        lo, hi = self.clip(lo, hi)
        return float(lo), float(hi), float(f), bool(floored)


def first_conclusive(m, tol, seeds):
    """Brute force: the first conclusive size scanning every count upward (seeds: up to the C limit;
    lines: every count up to 4·10^6, then the limit itself, which must then be inconclusive)."""
    if seeds:
        start = max(m.S0 + 1, 2)
        cand = np.arange(start, SEEDS_NEEDED_LIMIT + 1)
        lo, hi = m.at(cand, m.n0)
    else:
        cand = np.arange(m.n0 + 1, 4_000_001)
        lo, hi = m.at(np.full(cand.shape, m.S0), cand)
    ok = verdict(lo, hi, m.tol, m.acc) != "inconclusive"
    if ok.any():
        return int(cand[np.argmax(ok)])
    if not seeds:
        lo, hi = m.at(m.S0, LINES_LIMIT)
        if verdict(lo, hi, m.tol, m.acc) != "inconclusive":
            raise SystemExit("a case needs more than 4e6 lines: choose another")
    return -1


def reference_metric(acc, x, delta, cells, tol, prior_sd, base_vals, cand_vals):
    S, n = x.shape
    m = Metric(acc, delta, S, n, mean_squares(x), prior_sd, cells)
    m.tol = tol
    lo, hi, f, floored = m.observed()
    v = str(verdict(lo, hi, tol, acc))
    if S == 1:
        share = (m.prior_var, m.line_var / n, 0.0)
        var = (m.prior_var, m.line_var, math.nan)
        dof_seed, dof_line = math.inf, math.inf
    else:
        mr = m.ms_resid if n > 1 else 0.0
        share = (max(m.ms_seed - mr, 0) / (S * n), m.L / (S * n), min(m.ms_seed, mr) / (S * n))
        var = (m.va, m.vb, m.ve)
        dof_seed, dof_line = S - 1, f
    if v == "inconclusive":
        seeds_needed, lines_needed = first_conclusive(m, tol, True), first_conclusive(m, tol, False)
    else:
        seeds_needed, lines_needed = S, n
    return {
        "delta": delta, "lo": lo, "hi": hi, "se": math.sqrt(sum(share)),
        "dof_seed": dof_seed, "dof_line": dof_line,
        "ms_seed": m.ms_seed, "ms_line": m.ms_line, "ms_resid": m.ms_resid,
        "var_seed": var[0], "var_line": var[1], "var_resid": var[2],
        "share_seed": share[0], "share_line": share[1], "share_resid": share[2],
        "floored": int(floored),
        "base_mean": float(np.mean(base_vals)), "cand_mean": float(np.mean(cand_vals)),
        "base_sd": float(np.std(base_vals, ddof=1)) if S > 1 else math.nan,
        "cand_sd": float(np.std(cand_vals, ddof=1)) if S > 1 else math.nan,
        "verdict": v, "seeds_needed": seeds_needed, "lines_needed": lines_needed,
    }


def reference_case(name, bc, cc, be, ce, ref, acc_tol=0.005, cer_tol=0.005, prior_acc=PRIOR_ACC, prior_cer=PRIOR_CER):
    bc, cc = (np.asarray(a, dtype=np.int64) for a in (bc, cc))
    be, ce = (np.asarray(a, dtype=np.int64) for a in (be, ce))
    ref = np.asarray(ref, dtype=np.int64)
    S, n = bc.shape
    R = int(ref.sum())
    base_acc, cand_acc = bc.sum(1) / n, cc.sum(1) / n
    eb, ec = be.sum(1), ce.sum(1)
    base_cer = eb / R if R > 0 else eb.astype(float)
    cand_cer = ec / R if R > 0 else ec.astype(float)
    cer_delta = (ec - eb) / R if R > 0 else (ec - eb).astype(float)
    d = (cc - bc).astype(float)
    cells = [int(np.sum((bc == 1) & (cc == 1))), int(np.sum((bc == 1) & (cc == 0))),
             int(np.sum((bc == 0) & (cc == 1))), int(np.sum((bc == 0) & (cc == 0)))]
    acc_delta = int(cc.sum() - bc.sum()) / (S * n)
    g = ce - be
    cer_mean = int(g.sum()) / (S * R) if R > 0 else int(g.sum()) / S
    # The linearised ratio: z = (g − Δ·r)·n/R (n/R → n and Δ·r → 0 without reference characters).
    z = (g - (cer_mean if R > 0 else 0.0) * ref[None, :]) * (n / R if R > 0 else float(n))
    acc = reference_metric(True, d, acc_delta, cells, acc_tol, prior_acc, base_acc, cand_acc)
    cer = reference_metric(False, z, cer_mean, None, cer_tol, prior_cer, base_cer, cand_cer)
    overall = ("regression" if "regression" in (acc["verdict"], cer["verdict"]) else
               "inconclusive" if "inconclusive" in (acc["verdict"], cer["verdict"]) else "pass")
    return {
        "name": name, "S": S, "n": n,
        "acc_tol": acc_tol, "cer_tol": cer_tol, "prior_sd_acc": prior_acc, "prior_sd_cer": prior_cer,
        "base_correct": bc.ravel().tolist(), "cand_correct": cc.ravel().tolist(),
        "base_edits": be.ravel().tolist(), "cand_edits": ce.ravel().tolist(), "ref_chars": ref.tolist(),
        "expect": {
            "method": "one_seed" if S == 1 else "crossed", "ref_chars": R,
            "base_acc": base_acc.tolist(), "cand_acc": cand_acc.tolist(), "acc_delta": ((cc.sum(1) - bc.sum(1)) / n).tolist(),
            "base_cer": base_cer.tolist(), "cand_cer": cand_cer.tolist(), "cer_delta": cer_delta.tolist(),
            "acc": acc, "cer": cer, "verdict": overall,
        },
    }


# ---- the fixed tables ---------------------------------------------------------------------------------

def synth(rng, S, n, p_base, p_cand, seed_sd=0.0, line_bias=None, pair=0.8, ref_lo=4, ref_hi=30):
    """Binary outcomes and edits from a small latent model (pairs share their uniforms with
    probability `pair`)."""
    logit = lambda p: math.log(p / (1 - p))
    u = rng.normal(0, 2.0, n)
    ab, ac = rng.normal(0, seed_sd, (S, 1)), rng.normal(0, seed_sd, (S, 1))
    lb = line_bias if line_bias is not None else np.zeros(n)
    pb = 1 / (1 + np.exp(-(logit(p_base) + u + ab)))
    pc = 1 / (1 + np.exp(-(logit(p_cand) + u + lb + ac)))
    U = rng.random((S, n))
    U2 = np.where(rng.random((S, n)) < pair, U, rng.random((S, n)))
    bc, cc = (U < pb).astype(int), (U2 < pc).astype(int)
    ref = rng.integers(ref_lo, ref_hi + 1, n)
    def edits(c):
        e = 1 + rng.poisson(0.8, (S, n))
        return np.where(c == 1, 0, np.minimum(e, ref[None, :] + 3))
    return bc, cc, edits(bc), edits(cc), ref


def read_tsv(path):
    """The recorded-data file: ref_chars, then correct:<seed> / edits:<seed> pairs (see the test)."""
    with open(path) as f:
        lines = [l.rstrip("\n") for l in f if not l.startswith("#") and l.strip()]
    head = lines[0].split("\t")
    seeds = [h.split(":", 1)[1] for h in head[1::2]]
    data = np.array([[int(v) for v in l.split("\t")] for l in lines[1:]], dtype=np.int64)
    ref = data[:, 0]
    correct = data[:, 1::2].T
    edits = data[:, 2::2].T
    return seeds, ref, correct, edits


def cases():
    rng = np.random.default_rng(20261206)
    out = []
    bc, cc, be, ce, ref = synth(rng, 3, 12, 0.8, 0.8, seed_sd=0.3)
    out.append(reference_case("small_crossed", bc, cc, be, ce, ref, acc_tol=0.05, cer_tol=0.05))
    bias = np.where(rng.random(60) < 0.15, -3.0, 0.0)
    bc, cc, be, ce, ref = synth(rng, 4, 60, 0.85, 0.85, seed_sd=0.1, line_bias=bias)
    out.append(reference_case("line_effect", bc, cc, be, ce, ref, acc_tol=0.02, cer_tol=0.02))
    bc, cc, be, ce, ref = synth(rng, 5, 40, 0.85, 0.8, seed_sd=0.5, pair=0.5)
    out.append(reference_case("seed_effect", bc, cc, be, ce, ref, acc_tol=0.02, cer_tol=0.01))
    bc, cc, be, ce, ref = synth(rng, 2, 30, 0.7, 0.7, seed_sd=0.2)
    out.append(reference_case("two_seeds", bc, cc, be, ce, ref, acc_tol=0.1, cer_tol=0.05))
    bc, _, be, _, ref = synth(rng, 3, 300, 0.85, 0.85)
    out.append(reference_case("identical_300", bc, bc, be, be, ref))
    bc, _, be, _, ref = synth(rng, 2, 50, 0.85, 0.85)
    out.append(reference_case("identical_50", bc, bc, be, be, ref))
    bc, cc, be, ce, ref = synth(rng, 1, 200, 0.85, 0.05, pair=0.0)
    out.append(reference_case("one_seed_collapse", bc, cc, be, ce, ref))
    bc, cc, be, ce, ref = synth(rng, 3, 100, 0.85, 0.05, pair=0.0)
    out.append(reference_case("collapse_3", bc, cc, be, ce, ref))
    bc, cc, be, ce, ref = synth(rng, 4, 1, 0.6, 0.6, seed_sd=0.5, pair=0.0)
    out.append(reference_case("one_line", bc, cc, be, ce, ref, acc_tol=0.3, cer_tol=0.3))
    bc, cc, be, ce, ref = synth(rng, 1, 1, 0.6, 0.6, pair=0.0)
    out.append(reference_case("one_seed_one_line", bc, cc, be, ce, ref, acc_tol=0.3, cer_tol=0.3))
    # Every line alike within a seed: the line and residual mean squares are 0.
    n = 20
    bc = np.ones((3, n), dtype=int)
    cc = np.array([[1] * n, [0] * n, [1] * n])
    ref = np.full(n, 10)
    be = np.zeros((3, n), dtype=int)
    ce = np.where(cc == 1, 0, 2)
    out.append(reference_case("lines_alike", bc, cc, be, ce, ref, acc_tol=0.1, cer_tol=0.1))
    # No reference characters at all: CER deltas in edits (the metrics' convention).
    bc, cc, be, ce, _ = synth(rng, 3, 15, 0.7, 0.6)
    out.append(reference_case("no_ref_chars", bc, cc, be, ce, np.zeros(15, dtype=int), acc_tol=0.1, cer_tol=0.5))
    bc, cc, be, ce, ref = synth(rng, 4, 200, 0.6, 0.9, seed_sd=0.1)
    out.append(reference_case("better", bc, cc, be, ce, ref))
    # The S = 1 rule on an ordinary difference: two FP32-like runs a couple of points apart.
    bc, cc, be, ce, ref = synth(rng, 1, 800, 0.87, 0.85, pair=0.9)
    out.append(reference_case("one_seed_ordinary", bc, cc, be, ce, ref))
    # Recorded FP32 runs: seeds 1-3 against 4-6 (when the recorded file exists).
    path = os.path.join(ROOT, "tests/eval/data/fp32_seeds_demo.tsv")
    if os.path.exists(path):
        seeds, ref, correct, edits = read_tsv(path)
        out.append(reference_case("fp32_demo_123_vs_456", correct[0:3], correct[3:6], edits[0:3], edits[3:6], ref))
    return out


def tquantiles():
    rows = []
    for p in (0.975, 0.995, 0.9, 0.6, 0.025):
        for dof in (0.5, 1.0, 1.5, 2.0, 3.0, 4.7, 7.0, 10.0, 29.5, 100.0, 500.0, 999.5, 1000.0, 2500.0, 1e5, 1e8, math.inf):
            q = float(stats.norm.ppf(p)) if math.isinf(dof) else float(stats.t.ppf(p, dof))
            rows.append({"p": p, "dof": dof, "q": q})
    return rows


def enc(v):
    """JSON without NaN/Infinity: non-finite numbers as strings."""
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, dict):
        return {k: enc(x) for k, x in v.items()}
    if isinstance(v, list):
        return [enc(x) for x in v]
    if isinstance(v, (np.floating,)):
        return enc(float(v))
    if isinstance(v, (np.integer,)):
        return int(v)
    return v


def cmd_reference():
    doc = {
        "note": "written by tools/seeds_reference.py reference; do not edit",
        "tquantile": tquantiles(),
        "cases": cases(),
    }
    path = os.path.join(ROOT, "tests/eval/data/seeds_reference.json")
    with open(path, "w") as f:
        json.dump(enc(doc), f, separators=(",", ":"), allow_nan=False)
        f.write("\n")
    for c in doc["cases"]:
        e = c["expect"]
        print("%-22s S=%d n=%-4d acc %+.4f [%+.4f, %+.4f] %-12s need %s/%s   cer %+.5f [%+.5f, %+.5f] %-12s -> %s" % (
            c["name"], c["S"], c["n"], e["acc"]["delta"], e["acc"]["lo"], e["acc"]["hi"], e["acc"]["verdict"],
            e["acc"]["seeds_needed"], e["acc"]["lines_needed"], e["cer"]["delta"], e["cer"]["lo"], e["cer"]["hi"],
            e["cer"]["verdict"], e["verdict"]))
    print("wrote", os.path.relpath(path))


# ---- recorded FP32 runs -----------------------------------------------------------------------------

def levenshtein(a, b):
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def cmd_fp32_tsv(out, specs):
    runs = []
    for spec in specs:
        seed, path = spec.split("=", 1)
        with open(path, newline="") as f:
            rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
        head = rows[0]
        col = {k: i for i, k in enumerate(head)}
        recs = []
        for r in rows[1:]:
            label, pred, corr = r[col["label"]], r[col["prediction"]], r[col["correct"]]
            if corr not in ("0", "1"):
                raise SystemExit("%s: line %s was not scored" % (path, r[col["where"]]))
            lab, prd = label.replace(" ", ""), pred.replace(" ", "")
            if (lab == prd) != (corr == "1"):
                raise SystemExit("%s: %s: exact match %s disagrees with correct=%s" % (path, r[col["where"]], lab == prd, corr))
            recs.append((r[col["where"]], len(lab), int(corr), levenshtein(prd, lab)))
        runs.append((seed, recs))
    where = [w for w, *_ in runs[0][1]]
    for seed, recs in runs:
        if [w for w, *_ in recs] != where:
            raise SystemExit("seed %s: the eval lines differ from seed %s's" % (seed, runs[0][0]))
    with open(out, "w") as f:
        f.write("# Per-line results of FP32 runs of the demo recipe (configs/finetune_ppocrv4_receipts.json on\n"
                "# train_data/receipts_v4 as scripts/demo.sh makes it, one epoch, Global.seed = the column's seed),\n"
                "# each scored by `ocrtrain eval --lines` on the same %d eval lines; written by\n"
                "# tools/seeds_reference.py fp32-tsv. Columns: ref_chars (reference code points without spaces),\n"
                "# then per seed correct:<seed> (exact match 0/1) and edits:<seed> (Levenshtein, code points).\n" % len(where))
        f.write("\t".join(["ref_chars"] + sum([["correct:%s" % s, "edits:%s" % s] for s, _ in runs], [])) + "\n")
        for i in range(len(where)):
            row = [str(runs[0][1][i][1])]
            for _, recs in runs:
                row += [str(recs[i][2]), str(recs[i][3])]
            f.write("\t".join(row) + "\n")
    accs = [sum(r[2] for r in recs) / len(recs) for _, recs in runs]
    R = sum(r[1] for r in runs[0][1])
    cers = [sum(r[3] for r in recs) / R for _, recs in runs]
    k = len(runs)
    up = math.sqrt((k - 1) / stats.chi2.ppf(0.05, k - 1))
    print("%d seeds, %d lines: accuracy %.4f +- %.4f (SD; upper 95%% bound %.4f), CER %.5f +- %.5f (upper %.5f)" % (
        k, len(where), np.mean(accs), np.std(accs, ddof=1), np.std(accs, ddof=1) * up, np.mean(cers),
        np.std(cers, ddof=1), np.std(cers, ddof=1) * up))


# ---- the method comparison ------------------------------------------------------------------------------

def simulate(reps):
    rng = np.random.default_rng(2)

    def table(R, S, n, tau, kappa, rho, mu=2.5):
        u = rng.normal(0, 2.0, (R, 1, n))
        vb, vc = rng.normal(0, kappa, (R, 1, n)), rng.normal(0, kappa, (R, 1, n))
        ab, ac = rng.normal(0, tau, (R, S, 1)), rng.normal(0, tau, (R, S, 1))
        pb = 1 / (1 + np.exp(-(mu + u + vb + ab)))
        pc = 1 / (1 + np.exp(-(mu + u + vc + ac)))
        U = rng.random((R, S, n))
        U2 = np.where(rng.random((R, S, n)) < rho, U, rng.random((R, S, n)))
        return (U < pb).astype(float), (U2 < pc).astype(float)

    print("one-sided (upper edge below 0) / two-sided miss rates in %, true delta 0, nominal 2.5 / 5")
    worst = {}
    for S in (2, 3, 4, 6):
        for n in (30, 100, 800):
            for tau in (0.0, 0.15, 0.4):
                for kappa in (0.0, 0.5, 1.0):
                    for rho in (0.0, 0.8, 0.95):
                        b, c = table(reps, S, n, tau, kappa, rho)
                        d = c - b
                        g = d.mean(axis=(1, 2), keepdims=True)
                        sm, lm = d.mean(axis=2, keepdims=True), d.mean(axis=1, keepdims=True)
                        Ms = n * ((sm - g) ** 2).sum(axis=(1, 2)) / (S - 1)
                        Ml = S * ((lm - g) ** 2).sum(axis=(1, 2)) / (n - 1)
                        Mr = ((d - sm - lm + g) ** 2).sum(axis=(1, 2)) / ((S - 1) * (n - 1))
                        mean = g[:, 0, 0]
                        L = np.maximum(Ml - Mr, 0)
                        with np.errstate(divide="ignore", invalid="ignore"):
                            f_sat = (Ms + Ml - Mr) ** 2 / (Ms ** 2 / (S - 1) + Ml ** 2 / (n - 1) + Mr ** 2 / ((S - 1) * (n - 1)))
                            fL = np.where(L > 0, L ** 2 / (Ml ** 2 / (n - 1) + Mr ** 2 / ((S - 1) * (n - 1))), np.inf)
                        # Satterthwaite's t on MS_seed + max(MS_line − MS_resid, 0) (S − 1 dof when the line
                        # part is 0; dof at least 1).
                        f_sat = np.where(L > 0, np.nan_to_num(f_sat, nan=1.0), S - 1)
                        h_sat = t975(np.maximum(f_sat, 1.0)) * np.sqrt((Ms + L) / (S * n))
                        h_ban = np.sqrt((t975(S - 1) ** 2 * Ms + np.where(L > 0, t975(np.maximum(fL, 1)) ** 2, 0) * L) / (S * n))
                        cells = [((b == 1) & (c == 1)).sum(axis=(1, 2)), ((b == 1) & (c == 0)).sum(axis=(1, 2)),
                                 ((b == 0) & (c == 1)).sum(axis=(1, 2)), ((b == 0) & (c == 0)).sum(axis=(1, 2))]
                        nlo, nhi = newcombe(*cells)
                        res = {"satterthwaite": (mean - h_sat, mean + h_sat),
                               "banerjee": (mean - h_ban, mean + h_ban),
                               "chosen": (np.minimum(mean - h_ban, nlo), np.maximum(mean + h_ban, nhi))}
                        line = []
                        for k, (lo, hi) in res.items():
                            one, two = 100 * np.mean(hi < 0), 100 * np.mean((hi < 0) | (lo > 0))
                            w = worst.setdefault((S, k), [0, 0, None])
                            if one > w[0]:
                                w[0], w[2] = one, (n, tau, kappa, rho)
                            w[1] = max(w[1], two)
                            line.append("%s %.2f/%.2f" % (k, one, two))
                        print("S=%d n=%d seed_sd=%.2f line_sd=%.1f pairing=%.2f: %s" % (S, n, tau, kappa, rho, ", ".join(line)), flush=True)
    for (S, k), (one, two, where) in sorted(worst.items()):
        print("S=%d %-13s worst one-sided %.2f %% at (n, seed, line, pairing) = %s; worst two-sided %.2f %%" % (S, k, one, where, two))


def main(argv):
    if len(argv) < 2 or argv[1] == "reference":
        cmd_reference()
    elif argv[1] == "fp32-tsv" and len(argv) >= 4:
        cmd_fp32_tsv(argv[2], argv[3:])
    elif argv[1] == "simulate":
        reps = int(argv[3]) if len(argv) > 3 and argv[2] == "--reps" else 4000
        simulate(reps)
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

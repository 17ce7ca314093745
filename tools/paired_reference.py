#!/usr/bin/env python3
"""Reference values for tests/eval/test_paired.c (eval/paired.c), computed independently.

Run: python3 tools/paired_reference.py   (standard library only)

- Wilson score intervals and Newcombe's hybrid score interval for paired proportions
  (Stat Med 1998;17:2635, method 10), written out from the paper's formulas;
- the exact McNemar p-value from exact binomial sums (fractions, no floating point until the end);
- the lines-needed search by brute force over n (cells scaled proportionally);
- the CER bootstrap with SplitMix64, resampling exactly as the C code documents.
The printed numbers are pasted into the C test; CI never runs this script.
"""
import math
from fractions import Fraction

Z = 1.959963984540054


def wilson(x, n, z=Z):
    if n <= 0:
        return (0.0, 1.0)
    p = x / n
    centre = (x + z * z / 2) / (n + z * z)
    half = z * math.sqrt(x * (n - x) / n + z * z / 4) / (n + z * z)
    return (max(0.0, centre - half), min(1.0, centre + half))


def newcombe10(both_right, base_only, run_only, both_wrong, z=Z):
    # first = run, second = baseline
    a, b, c, d = both_right, run_only, base_only, both_wrong
    n = a + b + c + d
    if n <= 0:
        return (-1.0, 1.0)
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson(a + b, n, z)
    l2, u2 = wilson(a + c, n, z)
    den = (a + b) * (c + d) * (a + c) * (b + d)
    phi = (a * d - b * c) / math.sqrt(den) if den > 0 else 0.0
    delta = p1 - p2
    lo = delta - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    hi = delta + math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return (max(-1.0, lo), min(1.0, hi))


def mcnemar_exact(base_only, run_only):
    d = base_only + run_only
    if d == 0:
        return 1.0
    k = min(base_only, run_only)
    tail = Fraction(sum(math.comb(d, i) for i in range(k + 1)), 2 ** d)
    return float(min(Fraction(1), 2 * tail))


def verdict(lo, hi, tol, higher_is_better=True):
    if not higher_is_better:
        lo, hi = -hi, -lo
    if hi < -tol:
        return "regression"
    if lo > tol:
        return "better"
    if lo >= -tol:
        return "pass"
    return "inconclusive"


def lines_needed_brute(cells, tol, limit=2_000_000):
    n0 = sum(cells)
    for n in range(n0, limit):
        s = n / n0
        lo, hi = newcombe10(*(c * s for c in cells))
        if verdict(lo, hi, tol) != "inconclusive":
            return n
    return -1


MASK = (1 << 64) - 1


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def cer_bootstrap(ref, eb, er, B, alpha, seed):
    n = len(ref)
    state = seed
    deltas = []
    for _ in range(B):
        d = r = 0
        for _ in range(n):
            state, x = splitmix64(state)
            i = x % n
            d += er[i] - eb[i]
            r += ref[i]
        deltas.append(d / r if r > 0 else float(d))
    deltas.sort()
    ilo = max(0, math.ceil(B * alpha / 2) - 1)
    ihi = min(B - 1, math.ceil(B * (1 - alpha / 2)) - 1)
    return deltas[ilo], deltas[ihi]


def main():
    print("wilson 0/10:", "%.17g %.17g" % wilson(0, 10))
    print("wilson 81/263:", "%.17g %.17g" % wilson(81, 263))
    tables = {
        "A (80,3,5,12)": (80, 3, 5, 12),
        "zero discordant (95,0,0,5)": (95, 0, 0, 5),
        "zero discordant (10,0,0,0)": (10, 0, 0, 0),
        "all discordant (0,4,6,0)": (0, 4, 6, 0),
        "n=1 both right": (1, 0, 0, 0),
        "n=1 base only": (0, 1, 0, 0),
        "n=1 run only": (0, 0, 1, 0),
        "gate (1800,6,4,190)": (1800, 6, 4, 190),
        "regression (700,40,10,250)": (700, 40, 10, 250),
    }
    for name, t in tables.items():
        lo, hi = newcombe10(*t)
        n = sum(t)
        print("%-28s delta %.17g  ci %.17g %.17g  mcnemar_p %.17g  verdict(0.005) %s" %
              (name, (t[2] - t[1]) / n, lo, hi, mcnemar_exact(t[1], t[2]), verdict(lo, hi, 0.005)))
    for name in ("A (80,3,5,12)", "zero discordant (95,0,0,5)", "all discordant (0,4,6,0)", "gate (1800,6,4,190)"):
        t = tables[name]
        print("lines needed %-28s tol 0.005: %d   tol 0.05: %d" %
              (name, lines_needed_brute(t, 0.005), lines_needed_brute(t, 0.05)))
    ref = [10, 12, 8, 15, 9, 11, 14, 7, 10, 13, 6, 12]
    eb = [0, 1, 0, 2, 0, 0, 3, 0, 1, 0, 0, 2]
    er = [0, 2, 0, 2, 1, 0, 3, 0, 0, 1, 0, 4]
    d = (sum(er) - sum(eb)) / sum(ref)
    lo, hi = cer_bootstrap(ref, eb, er, 2000, 0.05, 1024)
    print("cer delta %.17g  bootstrap(B=2000, seed 1024) %.17g %.17g" % (d, lo, hi))
    lo, hi = cer_bootstrap(ref, eb, er, 7, 0.05, 7)
    print("cer bootstrap(B=7, seed 7) %.17g %.17g" % (lo, hi))


if __name__ == "__main__":
    main()

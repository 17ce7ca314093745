#!/usr/bin/env python3
"""Writes tests/data/ctc/ctc_reference.bin: CTC losses and gradients from PyTorch's
F.ctc_loss in double precision, read by tests/kernels/test_ctc.c.

Not run by CI. To regenerate (needs torch and numpy, CPU is enough):
    python3 -m venv /tmp/ctcenv && /tmp/ctcenv/bin/pip install numpy torch
    /tmp/ctcenv/bin/python tests/data/ctc/make_ctc_reference.py

Logits are not stored: both sides compute them from a hash (logit_values below and
ctc_ref_logit in the C test), quantised to k/1024 · 2^scale_exp so that they are exact in
fp32 and the reference is computed from exactly the values the C code sees.

File layout (little-endian):
    "OCRCTC01", u32 case count, then per case:
    char name[32]
    i32 B, T, C, S, zero_infinity, scale_exp, ncols, has_focal
    u64 seed
    i32 targets[B*S] (padded with 0), target_lengths[B], input_lengths[B], cols[ncols]
    f64 loss_none[B]                 torch reduction='none' (inf where infeasible)
    f64 loss_mean, loss_sum          torch reduction='mean' / 'sum'
    f64 loss_paddle                  loss_none.mean()  (PaddleOCR's reduction)
    f64 loss_focal                   (loss_none * (1 - exp(-loss_none))**2).mean()
    f32 grad_none[B*T*ncols]         d(sum of loss_none)/d logits at the stored columns
    f32 grad_focal[B*T*ncols]        d(loss_focal)/d logits (only when has_focal)
The script also checks that torch's gradients for 'mean' and 'sum' are grad_none scaled
by 1/(B*max(L,1)) and 1, which the C test relies on.
"""
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F

M64 = (1 << 64) - 1


def splitmix64(x):
    """x: numpy uint64 array. The finaliser of splitmix64 (same constants as the C test)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def logit_values(seed, n, scale_exp):
    i = np.arange(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = np.uint64(seed) * np.uint64(0x100000001B3) + i
    k = (splitmix64(x) >> np.uint64(40)) % np.uint64(2049)
    v = (k.astype(np.int64) - 1024).astype(np.float64) / 1024.0 * (2.0 ** scale_exp)
    assert np.array_equal(v.astype(np.float32).astype(np.float64), v)
    return v


def min_frames(t):
    return len(t) + sum(1 for a, b in zip(t, t[1:]) if a == b)


def run_case(name, seed, C, S, T, targets, input_lengths, zero_infinity, scale_exp, ncols_random=None, focal=True):
    B = len(targets)
    assert len(input_lengths) == B
    tl = [len(t) for t in targets]
    assert max(tl + [0]) <= S
    pad = np.zeros((B, S), dtype=np.int32)
    for b, t in enumerate(targets):
        assert all(1 <= c < C for c in t)
        pad[b, : len(t)] = t
    x = torch.tensor(logit_values(seed, B * T * C, scale_exp).reshape(B, T, C), dtype=torch.float64)
    tgt = torch.tensor(pad, dtype=torch.long)
    il = torch.tensor(input_lengths, dtype=torch.long)
    tlt = torch.tensor(tl, dtype=torch.long)

    def loss_of(xx, reduction):
        lp = xx.log_softmax(2).transpose(0, 1)
        return F.ctc_loss(lp, tgt, il, tlt, blank=0, reduction=reduction, zero_infinity=bool(zero_infinity))

    xg = x.clone().requires_grad_(True)
    lnone = loss_of(xg, "none")
    lnone.sum().backward()
    g_none = xg.grad.clone()
    l_paddle = lnone.detach().mean()

    grads = {}
    vals = {}
    for red in ("mean", "sum"):
        xr = x.clone().requires_grad_(True)
        lr = loss_of(xr, red)
        lr.backward()
        grads[red] = xr.grad.clone()
        vals[red] = lr.item()
    # The C test derives the 'mean' and 'sum' gradients from grad_none; check that is what torch does.
    w = torch.tensor([1.0 / (B * max(l, 1)) for l in tl], dtype=torch.float64).view(B, 1, 1)
    for red, ref in (("mean", g_none * w), ("sum", g_none)):
        got = grads[red]
        ok = torch.isclose(got, ref, rtol=1e-12, atol=1e-15) | (torch.isnan(got) & torch.isnan(ref))
        assert bool(ok.all()), (name, red)

    xf = x.clone().requires_grad_(True)
    lf_none = loss_of(xf, "none")
    lfocal = (lf_none * (1.0 - torch.exp(-lf_none)) ** 2).mean()
    lfocal.backward()
    g_focal = xf.grad.clone()

    if ncols_random is None:
        cols = list(range(C))
    else:
        rng = np.random.default_rng(seed)
        keep = {0} | {c for t in targets for c in t}
        keep |= set(int(c) for c in rng.choice(np.arange(1, C), size=ncols_random, replace=False))
        cols = sorted(keep)
    ci = torch.tensor(cols, dtype=torch.long)

    out = bytearray()
    out += name.encode().ljust(32, b"\0")
    out += struct.pack("<8i", B, T, C, S, int(zero_infinity), scale_exp, len(cols), int(focal))
    out += struct.pack("<Q", seed)
    out += pad.astype("<i4").tobytes()
    out += np.array(tl, dtype="<i4").tobytes()
    out += np.array(input_lengths, dtype="<i4").tobytes()
    out += np.array(cols, dtype="<i4").tobytes()
    out += lnone.detach().numpy().astype("<f8").tobytes()
    out += struct.pack("<4d", vals["mean"], vals["sum"], l_paddle.item(), lfocal.item())
    out += g_none[:, :, ci].numpy().astype("<f4").tobytes()
    if focal:
        out += g_focal[:, :, ci].numpy().astype("<f4").tobytes()
    n_inf = int(torch.isinf(lnone).sum())
    print(f"{name:12s} B={B} T={T} C={C} S={S} zi={zero_infinity} cols={len(cols)} "
          f"infeasible={n_inf} loss_paddle={l_paddle.item():.6f} bytes={len(out)}")
    return bytes(out)


def random_targets(rng, B, C, S, T, min_len=0, repeat_p=0.2):
    targets, lengths = [], []
    for _ in range(B):
        while True:
            L = int(rng.integers(min_len, S + 1))
            t = []
            for _ in range(L):
                if t and rng.random() < repeat_p:
                    t.append(t[-1])
                else:
                    t.append(int(rng.integers(1, C)))
            if min_frames(t) <= T:
                break
        targets.append(t)
        lengths.append(int(rng.integers(max(min_frames(t), 1), T + 1)))
    return targets, lengths


def main():
    rng = np.random.default_rng(20240601)
    cases = []
    # Tiny hand-checkable case: T=1, C=2, target "1".
    cases.append(run_case("tiny", 1, C=2, S=1, T=1, targets=[[1]], input_lengths=[1], zero_infinity=0, scale_exp=0))
    t, il = random_targets(rng, 4, 5, 6, 12)
    cases.append(run_case("small", 2, C=5, S=6, T=12, targets=t, input_lengths=il, zero_infinity=0, scale_exp=1))
    t, il = random_targets(rng, 6, 4, 8, 16, min_len=3, repeat_p=0.6)
    cases.append(run_case("repeats", 3, C=4, S=8, T=16, targets=t, input_lengths=il, zero_infinity=0, scale_exp=1))
    # Infeasible: [1,1,1,1] needs 7 frames of 6; [2,2] fits exactly in 3; [1,2,3,4,1] needs 5 of 4;
    # an empty target with no frames at all (loss 0), a non-empty target with none (infeasible).
    inf_t = [[1, 1, 1, 1], [3, 1, 4], [2, 2], [1, 2, 3, 4, 1], [], [2]]
    inf_il = [6, 6, 3, 4, 0, 0]
    cases.append(run_case("infeas", 4, C=5, S=5, T=6, targets=inf_t, input_lengths=inf_il, zero_infinity=0,
                          scale_exp=1))
    cases.append(run_case("infeas_zi", 4, C=5, S=5, T=6, targets=inf_t, input_lengths=inf_il, zero_infinity=1,
                          scale_exp=1))
    cases.append(run_case("empty", 5, C=6, S=4, T=8, targets=[[], [3, 3], []], input_lengths=[8, 5, 3],
                          zero_infinity=0, scale_exp=1))
    t, il = random_targets(rng, 8, 37, 25, 40, min_len=1)
    cases.append(run_case("en37", 6, C=37, S=25, T=40, targets=t, input_lengths=[40] * 8, zero_infinity=0,
                          scale_exp=2))
    t, il = random_targets(rng, 2, 20, 60, 256, min_len=40)
    cases.append(run_case("long256", 7, C=20, S=60, T=256, targets=t, input_lengths=il, zero_infinity=0,
                          scale_exp=1, focal=False))
    t, il = random_targets(rng, 3, 6625, 25, 40, min_len=1)
    cases.append(run_case("ch6625", 8, C=6625, S=25, T=40, targets=t, input_lengths=[40, il[1], 40],
                          zero_infinity=1, scale_exp=2, ncols_random=96, focal=False))
    t, il = random_targets(rng, 4, 12, 10, 30)
    cases.append(run_case("peaky", 9, C=12, S=10, T=30, targets=t, input_lengths=il, zero_infinity=0, scale_exp=6))
    t, il = random_targets(rng, 2, 7000, 10, 20, min_len=1)
    cases.append(run_case("c7000", 10, C=7000, S=10, T=20, targets=t, input_lengths=il, zero_infinity=0,
                          scale_exp=3, ncols_random=48))
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ctc_reference.bin")
    with open(path, "wb") as f:
        f.write(b"OCRCTC01")
        f.write(struct.pack("<I", len(cases)))
        for c in cases:
            f.write(c)
    print(f"wrote {path}: {os.path.getsize(path)} bytes, torch {torch.__version__}")


if __name__ == "__main__":
    main()

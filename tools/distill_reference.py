#!/usr/bin/env python3
"""Reference values for the distillation losses (kernels/ops.h, "distillation losses").

Evaluates PaddleOCR's own loss classes (DMLLoss, KLDivLoss, KLCTCLogits, DKDLoss, DistanceLoss from
ppocr/losses/basic_loss.py and distillation_loss.py) with paddlepaddle on small random inputs
(fixed seed), in float32 (what a PaddleOCR run computes) and in float64 (the same code without
float32 rounding), and writes inputs, losses and input gradients (paddle autograd) as JSON for
tests/kernels/test_distill.c.

PaddleOCR's code is not part of this repository: point --ppocr at a folder holding a module
ppocr_losses.py with those classes as PaddleOCR defines them (taken from its repository).

    /tmp/pdvenv/bin/python tools/distill_reference.py --ppocr /tmp/ppocr_src \
        --out tests/kernels/data/distill_reference.json
"""
import argparse
import json
import sys

import numpy as np


def f32_list(a):
    # float32 values written with 9 significant digits: they read back bit-exact.
    return [float("%.9g" % v) for v in np.asarray(a, dtype=np.float32).ravel()]


def f64_list(a):
    return [float(repr(float(v))) for v in np.asarray(a, dtype=np.float64).ravel()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ppocr", required=True, help="folder with ppocr_losses.py (PaddleOCR's loss classes)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    sys.path.insert(0, args.ppocr)
    import paddle
    import ppocr_losses as L

    paddle.set_device("cpu")
    rng = np.random.default_rng(20261206)

    def tensor(a, dtype, grad):
        t = paddle.to_tensor(np.asarray(a, dtype=dtype))
        t.stop_gradient = not grad
        return t

    def run(fn, inputs, grads, dtype):
        """fn(*tensors) -> loss tensor; returns (loss values, [gradients of the inputs in grads])."""
        ts = [tensor(a, dtype, i in grads) if not isinstance(a, tuple) else paddle.to_tensor(a[0])
              for i, a in enumerate(inputs)]
        loss = fn(*ts)
        paddle.sum(loss).backward()  # a vector loss (KLJSLoss) backpropagates its sum, as in training
        return loss.numpy().astype(np.float64).ravel(), [ts[i].grad.numpy().astype(np.float64) for i in grads]

    cases = []

    def add(name, kind, params, fn, inputs, grads, targets=None):
        l32, g32 = run(fn, inputs, grads, "float32")
        l64, g64 = run(fn, inputs, grads, "float64")
        c = {"name": name, "loss": kind, "params": params, "shape": list(np.shape(inputs[0])),
             "a": f32_list(inputs[0]), "b": f32_list(inputs[1]),
             "loss32": f64_list(l32), "loss64": f64_list(l64)}
        if targets is not None:
            c["targets"] = [int(v) for v in np.ravel(targets)]
        for k, (g3, g6) in enumerate(zip(g32, g64)):
            c["grad%d_64" % k] = f64_list(g6)
            c["grad%d_dev32" % k] = float(np.max(np.abs(g3 - g6)))
        cases.append(c)

    def logits(*shape, spread=4.0):
        return rng.uniform(-spread, spread, size=shape).astype(np.float32)

    # (a) DML, PP-OCRv3's DistillationDMLLoss: act softmax, use_log true (CTC head (B, T, C), SAR head)
    dml = L.DMLLoss(act="softmax", use_log=True)
    add("dml_ctc", "dml", {"use_log": 1}, lambda a, b: dml(a, b), [logits(2, 5, 9), logits(2, 5, 9)], [0, 1])
    add("dml_sar", "dml", {"use_log": 1}, lambda a, b: dml(a, b), [logits(3, 4, 12, spread=6), logits(3, 4, 12)],
        [0, 1])
    # use_log false: KLJSLoss "kl" with a per-sample mean (the detection form), a (B) vector
    dml_kl = L.DMLLoss(act="softmax", use_log=False)
    add("dml_kljs", "dml", {"use_log": 0}, lambda a, b: dml_kl(a, b), [logits(2, 3, 7), logits(2, 3, 7)], [0, 1])

    # (b) KLDivLoss: no mask (sum / B) and the NRTR non-pad mask (mean over rows whose target != 0)
    kl = L.KLDivLoss()
    add("kl", "kl", {"temperature": 1.0, "pad_id": -1}, lambda s, t: kl(s, t), [logits(2, 4, 9), logits(2, 4, 9)], [0])
    tg = np.array([[5, 3, 0, 0], [2, 7, 1, 0]], dtype=np.int64)
    mask = paddle.to_tensor(tg.reshape(-1) != 0)
    add("kl_mask", "kl", {"temperature": 1.0, "pad_id": 0}, lambda s, t: kl(s, t, mask),
        [logits(2, 4, 9), logits(2, 4, 9)], [0], targets=tg)
    # A temperature is not PaddleOCR's KLDivLoss: the class applied to x/T, times T² (DKD's scaling)
    add("kl_t2", "kl", {"temperature": 2.0, "pad_id": -1}, lambda s, t: kl(s / 2.0, t / 2.0) * 4.0,
        [logits(2, 3, 10), logits(2, 3, 10)], [0])

    # (c) DistillCTCLogits (KLCTCLogits mode "mean"): blank column negated, T = 0.5, time mean.
    # Its `stu_out *= blank_mask` works in place, so it gets copies (x * 1 keeps the gradient).
    ctc = L.KLCTCLogits()
    add("ctc_logits", "ctc_kl", {"temperature": 0.5, "blank": 0}, lambda s, t: ctc(s * 1.0, t * 1.0),
        [logits(2, 6, 8), logits(2, 6, 8)], [0])

    # (d) DKDLoss on NRTR logits (B, L, C) with targets (B, L); PP-OCRv4: T 1, alpha 1, beta 2.
    # PaddleOCR passes the non-pad mask, which DKDLoss.forward ignores: every row counts.
    dtg = np.array([[4, 9, 2, 0, 0], [7, 1, 3, 8, 0]], dtype=np.int64)
    dkd = L.DKDLoss(temperature=1.0, alpha=1.0, beta=2.0)
    tt = paddle.to_tensor(dtg)
    nonpad = paddle.to_tensor(dtg.reshape(-1) != 0)
    add("dkd", "dkd", {"temperature": 1.0, "alpha": 1.0, "beta": 2.0, "pad_id": -1},
        lambda s, t: dkd(s, t, tt, nonpad), [logits(2, 5, 10), logits(2, 5, 10)], [0], targets=dtg)
    dkd2 = L.DKDLoss(temperature=2.0, alpha=0.5, beta=1.5)
    add("dkd_t2", "dkd", {"temperature": 2.0, "alpha": 0.5, "beta": 1.5, "pad_id": -1},
        lambda s, t: dkd2(s, t, tt, nonpad), [logits(2, 5, 10, spread=6), logits(2, 5, 10)], [0], targets=dtg)
    # The mask as evidently intended: DKDLoss's own _kl_div with the mask (a masked mean)
    dkdm = L.DKDLoss(temperature=1.0, alpha=1.0, beta=2.0)
    dkdm._kl_div = lambda x, label, mask=None: L.DKDLoss._kl_div(dkdm, x, label, nonpad)
    add("dkd_mask", "dkd", {"temperature": 1.0, "alpha": 1.0, "beta": 2.0, "pad_id": 0},
        lambda s, t: dkdm(s, t, tt, nonpad), [logits(2, 5, 10), logits(2, 5, 10)], [0], targets=dtg)

    # (e) DistanceLoss (PP-OCRv3: l2 on backbone_out), mean reduction; both inputs get gradients
    for mode in ("l2", "l1", "smooth_l1"):
        d = L.DistanceLoss(mode=mode)
        add("distance_" + mode, "distance", {"mode": mode, "delta": 1.0}, lambda x, y, d=d: d(x, y),
            [logits(2, 3, 4, 5, spread=1.5), logits(2, 3, 4, 5, spread=1.5)], [0, 1])

    with open(args.out, "w") as f:
        json.dump({"generator": "tools/distill_reference.py", "paddle": paddle.__version__, "cases": cases}, f,
                  separators=(",", ":"))
        f.write("\n")
    for c in cases:
        print("%-18s loss32 %.9g loss64 %.12g" % (c["name"], c["loss32"][0], c["loss64"][0]))


if __name__ == "__main__":
    main()

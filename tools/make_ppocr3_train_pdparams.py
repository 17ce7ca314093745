#!/usr/bin/env python3
"""A PaddleOCR 3.x training-form checkpoint made with paddlepaddle, and its import checked by hand.

PaddleOCR 3.x's PP-OCRv5 server and PP-OCRv6 tiny/small/medium recognizers train as MultiHead
(CTC branch + NRTR guidance branch); their *_pretrained.pdparams hold every tensor of that form.
This writes one such file with paddle.save: a state dict of paddle tensors with PaddleOCR's names
and shapes (Paddle layouts: conv weights (OC, C/groups, KH, KW), linear weights (in, out)) read
from tests/models/data/<model>_train_names.txt ("name<TAB>AxBxC<TAB>param|stat"), seeded random
values (variances positive), then runs

  ocrtrain import --pdparams FILE -c configs/rec_<model>.json --out OUT.safetensors

and compares every tensor of OUT.safetensors with the array saved (conv weights transposed to
ocrtrain's (OC, KH, KW, C/groups)), bit for bit. The file is tens of MB (real shapes, NRTR
included), so it is not committed: tests/training/test_weights_names.c checks the same import on a
file our own pdparams writer makes at test time.

Usage: pip install paddlepaddle numpy
       python3 tools/make_ppocr3_train_pdparams.py --model ppocrv6_tiny --ocrtrain build/ocrtrain --out /tmp/x
"""
import argparse
import json
import os
import struct
import subprocess
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def read_names(model):
    rows = []
    with open(os.path.join(ROOT, "tests", "models", "data", model + "_train_names.txt")) as f:
        for line in f:
            name, shape, kind = line.rstrip("\n").split("\t")
            rows.append((name, [int(d) for d in shape.split("x")], kind))
    return rows


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        assert v["dtype"] == "F32", (k, v["dtype"])
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[a:b], dtype="<f4").reshape(v["shape"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="ppocrv6_tiny", help="ppocrv6_tiny, ppocrv6_small, ppocrv6_medium, ppocrv5_server")
    ap.add_argument("--ocrtrain", required=True, help="the ocrtrain binary")
    ap.add_argument("--out", required=True, help="a folder for the .pdparams and the import")
    ap.add_argument("--seed", type=int, default=20261206)
    args = ap.parse_args()
    import paddle

    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    arrays = {}
    for name, shape, kind in read_names(args.model):
        a = rng.standard_normal(shape).astype(np.float32) * 0.05
        if name.endswith("._variance"):
            a = np.abs(a) + 0.5
        arrays[name] = a
    pd = os.path.join(args.out, args.model + "_train.pdparams")
    paddle.save({k: paddle.to_tensor(v) for k, v in arrays.items()}, pd)
    st = os.path.join(args.out, args.model + "_train.safetensors")
    cfg = os.path.join(ROOT, "configs", "rec_" + args.model + ".json")
    r = subprocess.run([args.ocrtrain, "import", "--pdparams", pd, "-c", cfg, "--out", st], cwd=ROOT,
                       capture_output=True, text=True)
    print(r.stdout[-2000:], r.stderr[-2000:])
    if r.returncode != 0:
        sys.exit("import failed")
    got = read_safetensors(st)
    assert set(got) == set(arrays), (sorted(set(arrays) - set(got))[:5], sorted(set(got) - set(arrays))[:5])
    for k, a in arrays.items():
        if a.ndim == 3 and got[k].ndim == 4:  # Conv1D (OC, C/g, K): ours (OC, 1, K, C/g)
            a = a[:, :, None, :]
        want = a.transpose(0, 2, 3, 1) if a.ndim == 4 else a
        g = got[k].reshape(want.shape) if got[k].size == want.size and want.size == 1 else got[k]
        if g.shape != want.shape or not np.array_equal(g, want):
            sys.exit("%s differs: %s vs %s" % (k, g.shape, want.shape))
    print("%s: %d tensors (%d values, NRTR included) equal bit for bit after the import; %s is %.1f MB" %
          (args.model, len(arrays), sum(a.size for a in arrays.values()), pd, os.path.getsize(pd) / 1e6))


if __name__ == "__main__":
    main()

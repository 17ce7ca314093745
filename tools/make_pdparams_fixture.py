#!/usr/bin/env python3
"""Makes the PP-OCRv4 training-form .pdparams fixture of tests/models/test_import_pdparams.c.

Builds PaddleOCR's own PP-OCRv4 recognizer (PPLCNetV3 in its training form, with the rep
branches, + SequenceEncoder svtr + CTCHead) with paddlepaddle from PyPI and PaddleOCR's
ppocr/modeling code, at reduced width so the committed file stays small, gives every BatchNorm
running statistic, BN affine and learnable affine scalar non-trivial seeded values (a fresh
init has mean 0, variance 1, scale 1, bias 0, which would not show a swapped or missing
tensor), saves the state dict with paddle.save, and runs the eval-mode model on fixed inputs.

Writes into --out (default tests/models/data):
  ppocrv4_small.pdparams        paddle.save(model.state_dict()), pickle protocol 4
  ppocrv4_small.input.f32       (B, 3, 48, W) float32 NCHW, normalised like PaddleOCR's input
  ppocrv4_small.logits.f32      (B, T, C) float32: the CTC head's fc output (eval mode)
  ppocrv4_small.probs.f32       (B, T, C) float32: softmax (what PaddleOCR's eval returns)
  ppocrv4_small.json            shapes, architecture, versions, sha256 of each file

Usage (PaddleOCR checkout, e.g. github.com/hoonisone/PaddleOCR or PaddlePaddle/PaddleOCR):
  pip install paddlepaddle numpy
  python3 tools/make_pdparams_fixture.py --paddleocr /path/to/PaddleOCR
Only ppocr/modeling/{backbones/rec_lcnetv3.py, backbones/rec_svtrnet.py, necks/rnn.py,
heads/rec_ctc_head.py} are imported (their package __init__ files, which pull in every model,
are bypassed). The C tests read the committed files; nothing here runs in CI.
"""
import argparse
import hashlib
import json
import os
import sys
import types

import numpy as np

ARCH = {
    "Backbone": {"name": "PPLCNetV3", "scale": 0.35, "conv_kxk_num": 4},
    "Neck": {"name": "SequenceEncoder", "encoder_type": "svtr", "dims": 64, "depth": 2, "hidden_dims": 64,
             "kernel_size": [1, 3], "use_guide": False},
    "Head": {"name": "CTCHead", "out_channels": 97},
}
BATCH, HEIGHT, WIDTH = 2, 48, 128


def stub_packages(root):
    """Registers ppocr's packages as empty namespaces so their __init__ files are not run."""
    for pkg in ["ppocr", "ppocr.modeling", "ppocr.modeling.backbones", "ppocr.modeling.necks", "ppocr.modeling.heads"]:
        mod = types.ModuleType(pkg)
        mod.__path__ = [os.path.join(root, *pkg.split("."))]
        sys.modules[pkg] = mod


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--paddleocr", required=True, help="a PaddleOCR checkout (the folder holding ppocr/)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "models", "data"))
    ap.add_argument("--seed", type=int, default=20240601)
    args = ap.parse_args()

    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    import paddle
    paddle.set_device("cpu")
    paddle.seed(args.seed)
    stub_packages(os.path.abspath(args.paddleocr))
    from ppocr.modeling.backbones.rec_lcnetv3 import PPLCNetV3
    from ppocr.modeling.necks.rnn import SequenceEncoder
    from ppocr.modeling.heads.rec_ctc_head import CTCHead

    class Rec(paddle.nn.Layer):
        # BaseModel's structure and sub-layer names (backbone, neck, head).
        def __init__(self):
            super().__init__()
            b = {k: v for k, v in ARCH["Backbone"].items() if k != "name"}
            self.backbone = PPLCNetV3(**b)
            n = {k: v for k, v in ARCH["Neck"].items() if k != "name"}
            self.neck = SequenceEncoder(self.backbone.out_channels, **n)
            self.head = CTCHead(self.neck.out_channels, ARCH["Head"]["out_channels"])

        def forward(self, x):
            return self.head(self.neck(self.backbone(x)))

    model = Rec()
    rng = np.random.default_rng(args.seed)
    # Non-trivial values for everything a fresh init leaves at 0/1: BN running statistics from
    # training-mode passes over random images (a random rep network's activations grow by
    # orders of magnitude without them), then the BN affines and learnable affine scalars
    # moved off 1 and 0.
    model.train()
    with paddle.no_grad():
        for _ in range(40):
            model(paddle.to_tensor(rng.uniform(-1.0, 1.0, (8, 3, HEIGHT, WIDTH)).astype(np.float32)))
    for name, p in model.state_dict().items():
        v = p.numpy()
        if name.endswith("._mean") or name.endswith("._variance"):
            continue
        elif ".lab." in name or name.endswith("lab.scale") or name.endswith("lab.bias"):
            base = 1.0 if name.endswith("scale") else 0.0
            p.set_value((base + rng.normal(0.0, 0.1, v.shape)).astype(np.float32))
        elif ("bn." in name or "norm" in name or "identity." in name) and v.ndim == 1:
            base = 1.0 if name.endswith("weight") else 0.0
            p.set_value((base + rng.normal(0.0, 0.1, v.shape)).astype(np.float32))
    model.eval()
    x = rng.uniform(-1.0, 1.0, (BATCH, 3, HEIGHT, WIDTH)).astype(np.float32)
    with paddle.no_grad():
        feats = model.neck(model.backbone(paddle.to_tensor(x)))
        logits = model.head.fc(feats).numpy()
        probs = model(paddle.to_tensor(x)).numpy()
    e = np.exp(logits - logits.max(-1, keepdims=True))
    assert np.allclose(probs, e / e.sum(-1, keepdims=True), atol=1e-6)
    print("logits: max |x| %.3g, std %.3g; max prob mean %.3f" % (np.abs(logits).max(), logits.std(), probs.max(-1).mean()))

    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, "ppocrv4_small")
    paddle.save(model.state_dict(), stem + ".pdparams")
    x.tofile(stem + ".input.f32")
    logits.astype(np.float32).tofile(stem + ".logits.f32")
    probs.astype(np.float32).tofile(stem + ".probs.f32")
    sd = model.state_dict()
    meta = {
        "what": "PaddleOCR PP-OCRv4 rec (PPLCNetV3 training form + SVTR neck + CTC), reduced width, seeded "
                "random weights with non-trivial BN statistics (from training-mode passes over random images) and affine scalars; eval-mode outputs",
        "architecture": ARCH,
        "input": {"file": "ppocrv4_small.input.f32", "shape": [BATCH, 3, HEIGHT, WIDTH], "layout": "NCHW float32"},
        "logits": {"file": "ppocrv4_small.logits.f32", "shape": list(logits.shape)},
        "probs": {"file": "ppocrv4_small.probs.f32", "shape": list(probs.shape)},
        "tensors": len(sd),
        "values": int(sum(int(np.prod(v.shape)) for v in sd.values())),
        "seed": args.seed,
        "paddlepaddle": paddle.__version__,
        "numpy": np.__version__,
        "sha256": {os.path.basename(stem + e): sha256(stem + e)
                   for e in [".pdparams", ".input.f32", ".logits.f32", ".probs.f32"]},
    }
    with open(stem + ".json", "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps({k: meta[k] for k in ["tensors", "values", "logits"]}))


if __name__ == "__main__":
    main()

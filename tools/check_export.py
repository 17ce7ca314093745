#!/usr/bin/env python3
"""Checks `ocrtrain export` against onnxruntime, PaddlePaddle running PaddleOCR's model code, and RapidOCR.

For PP-OCRv3 en (MobileNetV1Enhance; the PaddleOCR-trained weights of shared/models/ppocrv3_paddle,
imported with `ocrtrain import --pdparams`) and PP-OCRv4 ch (PPLCNetV3, deploy form; PaddleOCR's
released ch_PP-OCRv4_rec_infer.onnx, imported with `ocrtrain import --onnx`):

 1. `ocrtrain export --onnx --pdparams` twice: the two exports must be byte-identical (sha256);
 2. onnxruntime on the exported .onnx, for every golden input line (shared/models/ppocrv3_paddle/golden,
    shared/golden/ppocrv4_rec), against ocrtrain's own probabilities on the same line
    (`ocrtrain export --probe`): greedy CTC texts equal, max |prob diff| <= 1e-4, or, where two
    float32 evaluations of the network cannot agree that closely, within the rounding bound below;
 2b. the same with `--onnx --fold-bn` (BatchNormalization folded into the convolutions);
 3. the exported .pdparams loaded with paddle.load into PaddleOCR's network (built from the
    Architecture of PaddleOCR's config with ppocr/modeling; every state-dict key present with its
    shape, nothing extra), eval mode, on the same lines: the same comparison;
 4. RapidOCR (pip rapidocr_onnxruntime) with the exported v4 file as its recognizer on the golden
    PNGs, against RapidOCR with its own bundled ch_PP-OCRv4_rec_infer.onnx (same weights): same texts,
    scores within 1e-4 (skipped when rapidocr_onnxruntime is not installed);
 5. MultiHead names: the seeded PP-OCRv4 ch MultiHead (CTC + NRTR, configs/rec_ppocrv4_ch_gtc.json,
    `export --init --pdparams`) loads into PaddleOCR's MultiHead network key for key (PaddleOCR's
    NRTR positional-encoding buffer, which PaddleOCR computes itself, is the one key not written),
    and PaddleOCR's eval-mode output (the CTC branch) has ocrtrain's argmax at every step of a golden
    line (an untrained network with unit BN statistics saturates its softmax, so only the argmax
    says anything there).

Writes a JSON report (--json). Nothing here runs in CI; the numbers go to docs/MODELS.md.

--fixtures DIR (default tests/models/data/export) also writes the golden files of
tests/models/test_export.c: the committed PP-OCRv4 training-form fixture
(tests/models/data/ppocrv4_small.pdparams) exported with `ocrtrain export --weights X.pdparams
--onnx` (twice, byte-identical), onnxruntime's probabilities of that file on
ppocrv4_small.input.f32 (ppocrv4_small.ort_probs.f32, (2, 16, 97) float32) and export.json with
the export's sha256 and size, so the C test can check that its own export is that very file.

Usage:
  python3 tools/check_export.py --ocrtrain build/ocrtrain --paddleocr /tmp/pocr --shared ../shared
(the PaddleOCR tree: `git --git-dir=<mirror of PaddleOCR> archive HEAD ppocr | tar -x -C /tmp/pocr`).
Only ppocr/modeling/{backbones,necks,heads} modules are imported; their package __init__ files are bypassed.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import types

import numpy as np

TOL = 1e-4      # the target for max |prob diff| (the issue's)
U = 2.0 ** -24  # float32 unit roundoff
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run(cmd):
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("failed (%d): %s\n%s%s" % (r.returncode, " ".join(cmd), r.stdout, r.stderr))
    return r.stdout


def read_dict(path):
    with open(path, encoding="utf-8") as f:
        lines = [l.rstrip("\r\n") for l in f]
    return ["<blank>"] + lines + [" "]  # use_space_char, as both configs


def greedy(probs, chars):
    """PaddleOCR's CTCLabelDecode: argmax, collapse repeats, drop the blank."""
    ids = probs.argmax(-1)
    out, prev = [], -1
    for i in ids:
        if i != prev and i != 0:
            out.append(chars[i])
        prev = i
    return "".join(out)


def rounding_bound(onnx_path, T, max_abs_logit):
    """How far two float32 evaluations of the same network may put one probability apart.

    Each dot product of length K (a Conv's C/g*kh*kw, a MatMul's inner size; the attention's head
    size and T) rounds to about sqrt(K)*u relative to its terms, for each of the two
    implementations (factor 2); to first order the relative errors of the layers on the path
    add up; the logits then differ by eps*max|z|, and a softmax output moves by at most half of
    the largest logit change (|dp_i| <= p_i (1 - p_i) 2 max|dz|). Returns max(TOL, that).
    """
    import onnx
    m = onnx.load(onnx_path)
    w = {i.name: list(i.dims) for i in m.graph.initializer}
    total = 0.0
    for n in m.graph.node:
        if n.op_type == "Conv":
            d = w[n.input[1]]
            total += (d[1] * d[2] * d[3]) ** 0.5
        elif n.op_type == "MatMul" and n.input[1] in w:
            total += w[n.input[1]][0] ** 0.5
        elif n.op_type == "MatMul" and n.name.endswith(".scores"):
            # q.k over the head size (EncoderWithSVTR: 8 heads), then p.v over the T keys
            dim = w[n.name[: -len("attn.scores")] + "qkv.weight"][0]
            total += (dim / 8) ** 0.5 + T ** 0.5
    eps = 2.0 * U * total
    return max(TOL, 0.5 * eps * max_abs_logit), total


def stub_packages(root):
    for pkg in ["ppocr", "ppocr.modeling", "ppocr.modeling.backbones", "ppocr.modeling.necks", "ppocr.modeling.heads"]:
        mod = types.ModuleType(pkg)
        mod.__path__ = [os.path.join(root, *pkg.split("."))]
        sys.modules[pkg] = mod


def paddle_model(arch):
    """PaddleOCR's BaseModel structure (backbone, neck, head) from an Architecture dict."""
    import paddle
    from ppocr.modeling.backbones.rec_lcnetv3 import PPLCNetV3
    from ppocr.modeling.backbones.rec_mv1_enhance import MobileNetV1Enhance
    from ppocr.modeling.necks.rnn import SequenceEncoder

    backbones = {"PPLCNetV3": PPLCNetV3, "MobileNetV1Enhance": MobileNetV1Enhance}

    def kw(d):
        return {k: v for k, v in d.items() if k != "name"}

    class Rec(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.backbone = backbones[arch["Backbone"]["name"]](in_channels=3, **kw(arch["Backbone"]))
            self.neck = None
            ch = self.backbone.out_channels
            if arch.get("Neck"):
                self.neck = SequenceEncoder(ch, **kw(arch["Neck"]))
                ch = self.neck.out_channels
            if arch["Head"]["name"] == "MultiHead":
                from ppocr.modeling.heads.rec_multi_head import MultiHead
                self.head = MultiHead(ch, **kw(arch["Head"]))
            else:
                from ppocr.modeling.heads.rec_ctc_head import CTCHead
                self.head = CTCHead(ch, **kw(arch["Head"]))

        def forward(self, x):
            x = self.backbone(x)
            if self.neck is not None:
                x = self.neck(x)
            return self.head(x)

    return Rec()


def load_strict(model, path, may_miss=()):
    """paddle.load + set_state_dict, refusing any missing (except may_miss), extra or reshaped key."""
    import paddle
    sd = paddle.load(path)
    sd.pop("StructuredToParameterName@@", None)
    want = model.state_dict()
    missing = [k for k in want if k not in sd and k not in may_miss]
    extra = [k for k in sd if k not in want]
    shape = [k for k in want if k in sd and list(sd[k].shape) != list(want[k].shape)]
    if missing or extra or shape:
        sys.exit("%s: %d missing (%s), %d extra (%s), %d reshaped (%s)" % (
            path, len(missing), missing[:3], len(extra), extra[:3], len(shape), shape[:3]))
    model.set_state_dict(sd)
    return len(sd)


def check_network(name, a, ocrtrain, work, report):
    print("== %s" % name)
    out = {"config": a["config"], "overrides": a["overrides"]}
    onnx1, onnx2 = os.path.join(work, name + ".onnx"), os.path.join(work, name + ".b.onnx")
    pd1, pd2 = os.path.join(work, name + ".pdparams"), os.path.join(work, name + ".b.pdparams")
    base = [ocrtrain, "export", "-c", a["config"], "--weights", a["weights"]] + sum((["-o", o] for o in a["overrides"]), [])
    log = run(base + ["--onnx", onnx1, "--pdparams", pd1])
    run(base + ["--onnx", onnx2, "--pdparams", pd2])
    print(log.strip())
    out["export_log"] = log.strip().splitlines()
    for kind, p, q in [("onnx", onnx1, onnx2), ("pdparams", pd1, pd2)]:
        s1, s2 = sha256(p), sha256(q)
        if s1 != s2:
            sys.exit("%s: two exports differ (%s vs %s)" % (kind, s1, s2))
        out[kind] = {"bytes": os.path.getsize(p), "sha256": s1}
    chars = read_dict(os.path.join(ROOT, a["dict"]))

    import onnxruntime as ort
    sess = ort.InferenceSession(onnx1, providers=["CPUExecutionProvider"])
    folded = os.path.join(work, name + ".folded.onnx")
    run(base + ["--onnx", folded, "--fold-bn"])
    sess_f = ort.InferenceSession(folded, providers=["CPUExecutionProvider"])
    out["onnx_bn_folded"] = {"bytes": os.path.getsize(folded), "sha256": sha256(folded)}
    import paddle
    paddle.set_device("cpu")
    model = paddle_model(a["arch"])
    out["paddle_tensors"] = load_strict(model, pd1)
    model.eval()

    cases = []
    worst = {"ort": 0.0, "ort_bn_folded": 0.0, "paddle": 0.0, "ort_vs_reference": 0.0, "over_target": 0}
    for cid, inp, ref in a["cases"]:
        x = np.fromfile(inp, dtype=np.float32).reshape(1, 3, 48, -1)
        probe = os.path.join(work, "%s.%s.probe.f32" % (name, cid))
        run(base + ["--probe", inp, "--probe-out", probe, "--probe-logits", probe + ".logits"])
        ours = np.fromfile(probe, dtype=np.float32)
        y = sess.run(None, {"x": x})[0]
        ours = ours.reshape(y.shape)
        zmax = float(np.abs(np.fromfile(probe + ".logits", dtype=np.float32)).max())
        tol, path = rounding_bound(onnx1, y.shape[1], zmax)
        with paddle.no_grad():
            pp = model(paddle.to_tensor(x))
            pp = (pp[0] if isinstance(pp, (list, tuple)) else pp).numpy()
        d_ort, d_pd = float(np.abs(y - ours).max()), float(np.abs(pp - ours).max())
        yf = sess_f.run(None, {"x": x})[0]
        d_fold = float(np.abs(yf - ours).max())
        worst["ort_bn_folded"] = max(worst["ort_bn_folded"], d_fold)
        t_ours, t_ort, t_pd = greedy(ours[0], chars), greedy(y[0], chars), greedy(pp[0], chars)
        c = {"id": cid, "width": int(x.shape[3]), "T": int(y.shape[1]), "text": t_ours, "ort_max_abs": d_ort,
             "paddle_max_abs": d_pd, "ort_text_equal": t_ort == t_ours, "paddle_text_equal": t_pd == t_ours,
             "ort_bn_folded_max_abs": d_fold, "ort_bn_folded_text_equal": greedy(yf[0], chars) == t_ours,
             "max_abs_logit": zmax, "sum_sqrt_k": path, "tolerance": tol}
        if ref is not None and os.path.exists(ref):
            r = np.fromfile(ref, dtype=np.float32).reshape(y.shape)
            c["ort_vs_reference"] = float(np.abs(y - r).max())
            worst["ort_vs_reference"] = max(worst["ort_vs_reference"], c["ort_vs_reference"])
        worst["ort"] = max(worst["ort"], d_ort)
        worst["paddle"] = max(worst["paddle"], d_pd)
        worst["over_target"] += max(d_ort, d_pd) > TOL
        cases.append(c)
        print("  %s W=%d T=%d %r  |ort-ours| %.2e  (BN folded %.2e)  |paddle-ours| %.2e  tol %.2e%s" % (
            cid, c["width"], c["T"], t_ours, d_ort, d_fold, d_pd, tol,
            "  |ort-ref| %.2e" % c["ort_vs_reference"] if "ort_vs_reference" in c else ""))
        if d_ort > tol or d_pd > tol or d_fold > tol or t_ort != t_ours or t_pd != t_ours or \
                not c["ort_bn_folded_text_equal"]:
            sys.exit("%s case %s: outside the tolerance or a different text" % (name, cid))
    # Dynamic batch: all lines of one width in one call equal the single-line runs.
    xs = [np.fromfile(inp, dtype=np.float32).reshape(1, 3, 48, -1) for _, inp, _ in a["cases"]]
    w = min(x.shape[3] for x in xs)
    batch = np.concatenate([x[:, :, :, :w] for x in xs], 0)
    yb = sess.run(None, {"x": batch})[0]
    ys = np.concatenate([sess.run(None, {"x": np.ascontiguousarray(b[None])})[0] for b in batch], 0)
    out["batch"] = {"N": int(batch.shape[0]), "W": int(w), "max_abs_vs_single": float(np.abs(yb - ys).max())}
    print("  batch N=%d W=%d: max |batched - single| %.2e" % (batch.shape[0], w, out["batch"]["max_abs_vs_single"]))
    out["cases"] = cases
    out["worst"] = worst
    report[name] = out
    return onnx1


def check_rapidocr(onnx_path, png_dir, report):
    try:
        from rapidocr_onnxruntime import RapidOCR
    except ImportError:
        print("== rapidocr: rapidocr_onnxruntime is not installed, skipped")
        report["rapidocr"] = "skipped: rapidocr_onnxruntime not installed"
        return
    import cv2
    from importlib.metadata import version
    print("== rapidocr_onnxruntime %s" % version("rapidocr_onnxruntime"))
    ours, theirs = RapidOCR(rec_model_path=onnx_path), RapidOCR()
    pngs = sorted(f for f in os.listdir(png_dir) if f.endswith(".png"))
    rows, worst, same = [], 0.0, 0
    for f in pngs:
        img = cv2.imread(os.path.join(png_dir, f))
        a, _ = ours(img, use_det=False, use_cls=False, use_rec=True)
        b, _ = theirs(img, use_det=False, use_cls=False, use_rec=True)
        (ta, sa), (tb, sb) = a[0], b[0]
        worst = max(worst, abs(float(sa) - float(sb)))
        same += ta == tb
        rows.append({"image": f, "text": ta, "score": float(sa), "bundled_text": tb, "bundled_score": float(sb)})
    print("  %d lines: %d texts equal to the bundled model's, max |score diff| %.2e" % (len(pngs), same, worst))
    report["rapidocr"] = {"version": version("rapidocr_onnxruntime"), "lines": len(pngs), "texts_equal": same, "max_abs_score_diff": worst, "rows": rows}
    if same != len(pngs) or worst > TOL:
        sys.exit("rapidocr: the exported model reads differently from the bundled one")


def make_fixtures(ocrtrain, work, out_dir, report):
    print("== fixtures -> %s" % out_dir)
    data = os.path.join(ROOT, "tests", "models", "data")
    src = os.path.join(data, "ppocrv4_small.pdparams")
    paths = [os.path.join(work, "small.%d.onnx" % k) for k in range(2)]
    for p in paths:
        log = run([ocrtrain, "export", "--weights", src, "--dict", "configs/dicts/en_dict.txt", "--onnx", p])
    print(log.strip())
    if sha256(paths[0]) != sha256(paths[1]):
        sys.exit("fixtures: two exports differ")
    import onnxruntime as ort
    x = np.fromfile(os.path.join(data, "ppocrv4_small.input.f32"), dtype=np.float32).reshape(2, 3, 48, 128)
    y = ort.InferenceSession(paths[0], providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    paddle_probs = np.fromfile(os.path.join(data, "ppocrv4_small.probs.f32"), dtype=np.float32).reshape(y.shape)
    os.makedirs(out_dir, exist_ok=True)
    probs = os.path.join(out_dir, "ppocrv4_small.ort_probs.f32")
    y.astype(np.float32).tofile(probs)
    meta = {
        "source": "tests/models/data/ppocrv4_small.pdparams (training form; the export fuses the rep layers)",
        "command": "ocrtrain export --weights tests/models/data/ppocrv4_small.pdparams --dict configs/dicts/en_dict.txt --onnx F",
        "onnx_bytes": os.path.getsize(paths[0]),
        "onnx_sha256": sha256(paths[0]),
        "producer_version": __import__("onnx").load(paths[0]).producer_version,
        "ort_probs": {"file": "ppocrv4_small.ort_probs.f32", "shape": list(y.shape), "sha256": sha256(probs),
                      "input": "tests/models/data/ppocrv4_small.input.f32 (2, 3, 48, 128)"},
        "ort_vs_paddle_max_abs": float(np.abs(y - paddle_probs).max()),
        "versions": report["versions"],
        "ocrtrain": report["ocrtrain"],
    }
    with open(os.path.join(out_dir, "export.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print("  onnx %d bytes sha256 %s; onnxruntime vs Paddle's probabilities: max |diff| %.2e" % (
        meta["onnx_bytes"], meta["onnx_sha256"], meta["ort_vs_paddle_max_abs"]))
    report["fixtures"] = meta


def check_multihead(ocrtrain, work, report, case):
    print("== multihead names (PP-OCRv4 ch CTC + NRTR, seeded initial weights)")
    cfg = "configs/rec_ppocrv4_ch_gtc.json"
    with open(os.path.join(ROOT, cfg)) as f:
        arch = json.load(f)["Architecture"]
    pd = os.path.join(work, "mh.pdparams")
    base = [ocrtrain, "export", "-c", cfg, "--init"]
    print(run(base + ["--pdparams", pd]).strip())
    import paddle
    sd = paddle.load(pd)
    backbone = {k: v for k, v in arch["Backbone"].items() if k != "deploy"}
    head = dict(arch["Head"])
    head["out_channels_list"] = {"CTCLabelDecode": int(sd["head.ctc_head.fc.weight"].shape[1]),
                                 "NRTRLabelDecode": int(sd["head.gtc_head.tgt_word_prj.weight"].shape[1]) - 1}  # Transformer adds 1
    model = paddle_model({"Backbone": backbone, "Head": head})
    pe = [k for k in model.state_dict() if k.endswith("positional_encoding.pe")]
    n = load_strict(model, pd, may_miss=pe)
    model.eval()
    cid, inp, _ = case
    x = np.fromfile(inp, dtype=np.float32).reshape(1, 3, 48, -1)
    probe = os.path.join(work, "mh.probe.f32")
    run(base + ["--probe", inp, "--probe-out", probe, "--probe-logits", probe + ".logits"])
    with paddle.no_grad():
        pp = model(paddle.to_tensor(x)).numpy()
    ours = np.fromfile(probe, dtype=np.float32).reshape(pp.shape)
    same = int((pp.argmax(-1) == ours.argmax(-1)).sum())
    steps = int(pp.shape[0] * pp.shape[1])
    print("  %d tensors loaded into PaddleOCR's MultiHead, every key and shape (not written: %s); "
          "eval-mode CTC argmax on %s equal to ours at %d of %d steps" % (n, ", ".join(pe), cid, same, steps))
    report["multihead"] = {"config": cfg, "tensors": n, "not_written": pe, "case": cid, "argmax_equal": same,
                           "steps": steps}
    if same != steps:
        sys.exit("multihead: PaddleOCR's CTC branch reads the weights differently")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ocrtrain", default=os.path.join(ROOT, "build", "ocrtrain"))
    ap.add_argument("--paddleocr", required=True, help="a PaddleOCR tree (the folder holding ppocr/)")
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--json", default=None, help="where the report goes (default: print only)")
    ap.add_argument("--work", default=None, help="scratch folder (default: a temporary one)")
    ap.add_argument("--fixtures", default=None, help="write the C test's golden files here (see above)")
    args = ap.parse_args()
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    stub_packages(os.path.abspath(args.paddleocr))
    work = args.work or tempfile.mkdtemp(prefix="check_export.")
    os.makedirs(work, exist_ok=True)
    ocrtrain = os.path.abspath(args.ocrtrain)
    sh = os.path.abspath(args.shared)
    report = {"ocrtrain": run([ocrtrain, "--version"]).strip(), "tolerance": TOL}
    import onnxruntime
    import paddle
    report["versions"] = {"onnxruntime": onnxruntime.__version__, "paddlepaddle": paddle.__version__,
                          "numpy": np.__version__}

    if args.fixtures:
        make_fixtures(ocrtrain, work, os.path.abspath(args.fixtures), report)

    # PP-OCRv3 en: PaddleOCR-trained weights (.pdparams) → ocrtrain weights.
    v3w = os.path.join(work, "v3.safetensors")
    run([ocrtrain, "import", "--pdparams", os.path.join(sh, "models/ppocrv3_paddle/v3_en_ctc_paddle_150steps.pdparams"),
         "--out", v3w])
    g3 = os.path.join(sh, "models/ppocrv3_paddle/golden")
    with open(os.path.join(g3, "index.json")) as f:
        idx = json.load(f)
    v3_cases = [(c["id"], os.path.join(g3, c["input"]["file"]), os.path.join(g3, c["id"] + ".paddle.f32"))
                for c in idx["cases"]]
    v3_arch = {
        "Backbone": {"name": "MobileNetV1Enhance", "scale": 0.5, "last_conv_stride": [1, 2], "last_pool_type": "avg",
                     "last_pool_kernel_size": [2, 2]},
        "Neck": {"name": "SequenceEncoder", "encoder_type": "svtr", "dims": 64, "depth": 2, "hidden_dims": 120,
                 "kernel_size": [3, 3], "use_guide": False},
        "Head": {"name": "CTCHead", "fc_decay": 1e-05, "out_channels": 97},
    }
    check_network("ppocrv3_en", {"config": "configs/rec_ppocrv3_en.json", "overrides": [], "weights": v3w,
                                 "dict": "configs/dicts/en_dict.txt", "arch": v3_arch, "cases": v3_cases},
                  ocrtrain, work, report)

    # PP-OCRv4 ch: PaddleOCR's released inference model (ONNX) → ocrtrain weights (deploy form).
    v4w = os.path.join(work, "v4.safetensors")
    run([ocrtrain, "import", "--onnx", os.path.join(sh, "models/ppocrv4_rec/ch_PP-OCRv4_rec_infer.onnx"), "--out", v4w])
    g4 = os.path.join(sh, "golden/ppocrv4_rec")
    v4_cases = [("img_%02d" % i, os.path.join(g4, "img_%02d.input.f32" % i), os.path.join(g4, "img_%02d.probs.f32" % i))
                for i in range(24)]
    # ch_PP-OCRv4_rec.yml's CTC branch (the MultiHead's ctc_encoder + ctc_head as a plain model).
    v4_arch = {
        "Backbone": {"name": "PPLCNetV3", "scale": 0.95},
        "Neck": {"name": "SequenceEncoder", "encoder_type": "svtr", "dims": 120, "depth": 2, "hidden_dims": 120,
                 "kernel_size": [1, 3], "use_guide": True},
        "Head": {"name": "CTCHead", "fc_decay": 1e-05, "out_channels": 6625},
    }
    v4_onnx = check_network("ppocrv4_ch", {"config": "configs/rec_ppocrv4_ch.json",
                                           "overrides": ["Architecture.Backbone.deploy=true"], "weights": v4w,
                                           "dict": "configs/dicts/ppocr_keys_v1.txt", "arch": v4_arch,
                                           "cases": v4_cases}, ocrtrain, work, report)
    check_rapidocr(v4_onnx, g4, report)
    check_multihead(ocrtrain, work, report, v4_cases[0])
    print("all checks passed")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Checks ocrtrain's PP-OCRv5 server (PPHGNetV2_B4) ONNX export and import by hand.

1. Parity: `ocrtrain export -c configs/rec_ppocrv5_server.json --init --onnx` (the CTC branch in
   deploy form), then for each synthetic line image (`ocrtrain synth --style zh`) ocrtrain's own
   probabilities (`export --probe`) against onnxruntime's on the exported file: the max abs
   probability difference per line and overall, and whether the greedy (argmax) paths agree.
2. Spellings: the export rewritten into other exporters' spellings of the same computation must
   import (`ocrtrain import --onnx`) to byte-identical weights (safetensors sha256 equal to the
   unedited file's): every initializer as a Constant node; the head MatMul as Gemm with transB;
   opset 18 (Squeeze axes as inputs); Paddle's SAME pads as auto_pad SAME_UPPER on the 2x2 convs and
   the stem's max pool; those pads as Pad nodes in front (PyTorch's F.pad, one shared by stem2a and
   the pool); the max pool with ceil_mode 1 (Paddle's ceil_mode=True: the same pool at
   stride 1); LayerNormalization decomposed (opset 11: ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt,
   Div, Mul, Add); an Identity after every Conv; all of them together.
3. Wrong networks must be refused naming a node, with nothing written: stem3 at stride 2; an HG
   layer removed from a block; a block's residual Add removed; the stem's max pool padded
   symmetrically; the Pad-node form padding with 1.

Usage:
  pip install onnx onnxruntime numpy pillow
  python3 tools/check_ppocrv5_server_onnx.py --ocrtrain build/ocrtrain --out /tmp/v5s_check [--lines 8]
"""
import argparse
import copy
import hashlib
import math
import os
import subprocess

import numpy as np
import onnx
from onnx import helper, numpy_helper

ap = argparse.ArgumentParser()
ap.add_argument("--ocrtrain", default="build/ocrtrain")
ap.add_argument("--config", default="configs/rec_ppocrv5_server.json")
ap.add_argument("--out", required=True, help="a scratch folder")
ap.add_argument("--lines", type=int, default=8, help="synthetic lines for the parity check (0: skip it)")
args = ap.parse_args()
BIN, OUT = args.ocrtrain, args.out
os.makedirs(OUT, exist_ok=True)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, (r.stdout + r.stderr).strip().split("\n")


EXPORT = os.path.join(OUT, "v5_server.onnx")
rc, lines = run([BIN, "export", "-c", args.config, "--init", "--onnx", EXPORT])
print("export: rc %d | %s" % (rc, lines[-1][:200]))
assert rc == 0

# ---- 1. parity with onnxruntime ------------------------------------------------------------------------
if args.lines > 0:
    import onnxruntime as ort
    from PIL import Image

    synth = os.path.join(OUT, "zh")
    rc, _ = run([BIN, "synth", "--style", "zh", "--count", str(args.lines), "--out", synth])
    assert rc == 0
    sess = ort.InferenceSession(EXPORT, providers=["CPUExecutionProvider"])
    worst, agree = 0.0, 0
    labels = [l.rstrip("\n").split("\t") for l in open(os.path.join(synth, "labels.txt"), encoding="utf-8") if l.strip()]
    for k, (img, text) in enumerate(labels[: args.lines]):
        im = Image.open(os.path.join(synth, img)).convert("RGB")
        w = max(8, int(math.ceil(48 * im.width / im.height)))
        x = np.asarray(im.resize((w, 48), Image.BILINEAR), np.float32).transpose(2, 0, 1)[None] / 255.0
        x = ((x - 0.5) / 0.5).astype(np.float32)  # PaddleOCR's rec normalisation
        fin, fout = os.path.join(OUT, "line%d.f32" % k), os.path.join(OUT, "line%d.probs.f32" % k)
        x.tofile(fin)
        rc, lines = run([BIN, "export", "-c", args.config, "--init", "--probe", fin, "--probe-out", fout])
        assert rc == 0, lines
        p_ort = sess.run(None, {"x": x})[0]
        p_ours = np.fromfile(fout, np.float32).reshape(p_ort.shape)
        d = float(np.abs(p_ort - p_ours).max())
        same = bool((p_ort.argmax(-1) == p_ours.argmax(-1)).all())
        worst, agree = max(worst, d), agree + same
        print("  line %d (48x%d, T %d, %r): max |p_ocrtrain - p_onnxruntime| = %.3g, greedy paths equal: %s"
              % (k, w, p_ort.shape[1], text, d, same))
    print("parity: %d lines, max abs probability difference %.3g, greedy paths equal on %d/%d" % (len(labels[: args.lines]), worst,
                                                                                                 agree, len(labels[: args.lines])))


# ---- 2. spellings ------------------------------------------------------------------------------------------
def imp(m, tag):
    p = os.path.join(OUT, tag + ".onnx")
    onnx.save(m, p)
    w = os.path.join(OUT, tag + ".safetensors")
    if os.path.exists(w):
        os.remove(w)
    rc, lines = run([BIN, "import", "--onnx", p, "--out", w])
    h = hashlib.sha256(open(w, "rb").read()).hexdigest() if os.path.exists(w) else None
    for f in (p, w):  # 85 MB each
        if os.path.exists(f):
            os.remove(f)
    return rc, lines, h


def inits(m):
    return {i.name: i for i in m.graph.initializer}


def opset(m, v):
    m = copy.deepcopy(m)
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = v
    return m


def attr(n, name):
    a = [x for x in n.attribute if x.name == name]
    return a[0] if a else None


def to_constants(m):
    m = copy.deepcopy(m)
    nodes = [helper.make_node("Constant", [], [i.name], value=i) for i in m.graph.initializer]
    del m.graph.initializer[:]
    new = nodes + list(m.graph.node)
    del m.graph.node[:]
    m.graph.node.extend(new)
    return m


def gemm_head(m):
    m = copy.deepcopy(m)
    I = inits(m)
    mm = [n for n in m.graph.node if n.op_type == "MatMul" and n.input[1] in I][-1]
    w = numpy_helper.to_array(I[mm.input[1]])
    I[mm.input[1]].CopyFrom(numpy_helper.from_array(np.ascontiguousarray(w.T), mm.input[1]))
    mm.op_type = "Gemm"
    mm.attribute.extend([helper.make_attribute("transB", 1)])
    return m


def axes_inputs(m):
    m = opset(m, 18)
    for k, n in enumerate(m.graph.node):
        if n.op_type in ("Squeeze", "Unsqueeze", "ReduceMean"):
            a = attr(n, "axes")
            if a is None:
                continue
            name = "test.axes.%d" % k
            m.graph.initializer.append(numpy_helper.from_array(np.array(a.ints, np.int64), name))
            n.attribute.remove(a)
            n.input.append(name)
    return m


def auto_pad(m):  # the 0-before-1-after pads as auto_pad SAME_UPPER
    m = copy.deepcopy(m)
    for n in m.graph.node:
        p = attr(n, "pads")
        if n.op_type in ("Conv", "MaxPool") and p is not None and list(p.ints) == [0, 0, 1, 1]:
            n.attribute.remove(p)
            n.attribute.extend([helper.make_attribute("auto_pad", "SAME_UPPER")])
    return m


def pad_nodes(m):  # the 0-before-1-after pads as Pad nodes in front (one per tensor, shared as PyTorch's F.pad)
    m = opset(m, 13)
    out, made = [], {}
    for n in m.graph.node:
        p = attr(n, "pads")
        if n.op_type in ("Conv", "MaxPool") and p is not None and list(p.ints) == [0, 0, 1, 1]:
            x = n.input[0]
            if x not in made:
                made[x] = x + ".padded"
                pn = "test.pads.%d" % len(made)
                m.graph.initializer.append(numpy_helper.from_array(np.array([0, 0, 0, 0, 0, 0, 1, 1], np.int64), pn))
                out.append(helper.make_node("Pad", [x, pn], [made[x]], mode="constant"))
            n.input[0] = made[x]
            p.ints[:] = [0, 0, 0, 0]
        out.append(n)
    del m.graph.node[:]
    m.graph.node.extend(out)
    return m


def ceil_pool(m):
    m = copy.deepcopy(m)
    for n in m.graph.node:
        if n.op_type == "MaxPool":
            attr(n, "ceil_mode").i = 1
    return m


def decomposed_ln(m):
    m = opset(m, 11)
    I = inits(m)
    out = []
    for k, n in enumerate(m.graph.node):
        if n.op_type in ("Squeeze", "Unsqueeze") and len(n.input) == 2:  # opset 11: axes an attribute
            n.attribute.extend([helper.make_attribute("axes", [int(v) for v in numpy_helper.to_array(I[n.input[1]])])])
            del n.input[1]
        if n.op_type != "LayerNormalization":
            out.append(n)
            continue
        x, g, b = n.input
        y = n.output[0]
        eps = attr(n, "epsilon").f
        p = "test.ln%d." % k
        m.graph.initializer.extend([numpy_helper.from_array(np.array(2.0, np.float32), p + "two"),
                                    numpy_helper.from_array(np.array(eps, np.float32), p + "eps")])
        out += [helper.make_node("ReduceMean", [x], [p + "mean"], axes=[-1]),
                helper.make_node("Sub", [x, p + "mean"], [p + "c"]),
                helper.make_node("Pow", [p + "c", p + "two"], [p + "sq"]),
                helper.make_node("ReduceMean", [p + "sq"], [p + "var"], axes=[-1]),
                helper.make_node("Add", [p + "var", p + "eps"], [p + "ve"]),
                helper.make_node("Sqrt", [p + "ve"], [p + "sd"]),
                helper.make_node("Div", [p + "c", p + "sd"], [p + "n"]),
                helper.make_node("Mul", [p + "n", g], [p + "s"]),
                helper.make_node("Add", [p + "s", b], [y])]
    del m.graph.node[:]
    m.graph.node.extend(out)
    return m


def identities(m):
    m = copy.deepcopy(m)
    out = []
    for n in m.graph.node:
        out.append(n)
        if n.op_type == "Conv":
            o = n.output[0]
            n.output[0] = o + ".pre"
            out.append(helper.make_node("Identity", [o + ".pre"], [o]))
    del m.graph.node[:]
    m.graph.node.extend(out)
    return m


# ---- 3. wrong networks ---------------------------------------------------------------------------------------
def node_named(m, name):
    return [n for n in m.graph.node if n.name == name][0]


def stem3_stride(m):
    m = copy.deepcopy(m)
    c = node_named(m, "backbone.stem.stem3.conv")
    attr(c, "strides").ints[:] = [2, 2]
    return m, c.name


def drop_nodes(m, keep):
    nodes = [n for n in m.graph.node if keep(n)]
    del m.graph.node[:]
    m.graph.node.extend(nodes)


def layer_removed(m):  # stage 0 block 0's last layer: its nodes and its Concat input gone
    m = copy.deepcopy(m)
    pre = "backbone.stages.0.blocks.0.layers.5."
    cat = node_named(m, "backbone.stages.0.blocks.0.concat")
    last = cat.input[-1]
    del cat.input[-1]
    drop_nodes(m, lambda n: not n.name.startswith(pre))
    assert all(last not in n.input for n in m.graph.node)
    return m, cat.name


def add_removed(m):  # stage 2 block 1's residual Add
    m = copy.deepcopy(m)
    add = node_named(m, "backbone.stages.2.blocks.1.add")
    exc = [i for i in add.input if "excitation" in i][0]
    for n in m.graph.node:
        for k, x in enumerate(n.input):
            if x == add.output[0]:
                n.input[k] = exc
    drop_nodes(m, lambda n: n.name != add.name)
    return m, exc


def pool_pads(m):
    m = copy.deepcopy(m)
    p = [n for n in m.graph.node if n.op_type == "MaxPool"][0]
    attr(p, "pads").ints[:] = [1, 1, 1, 1]
    return m, p.name


def pad_value_1(m):  # the Pad-node form padding with 1 instead of 0
    m = pad_nodes(m)
    p = [n for n in m.graph.node if n.op_type == "Pad"][0]
    m.graph.initializer.append(numpy_helper.from_array(np.array(1.0, np.float32), "test.one"))
    p.input.append("test.one")
    return m, p.output[0]


base = onnx.load(EXPORT)
rc, lines, ref = imp(base, "base")
print("import of the export: rc %d | %s | sha %s" % (rc, lines[0][:140], ref[:12] if ref else None))
forms = {"constants": to_constants, "gemm_head": gemm_head, "axes_inputs_opset18": axes_inputs, "auto_pad_same": auto_pad,
         "pad_nodes": pad_nodes, "maxpool_ceil_mode": ceil_pool, "layernorm_decomposed": decomposed_ln,
         "identities": identities}
# The rewrites compute what the export computes (onnxruntime on one input; the Gemm head, on a 3-D
# input, is a spelling onnxruntime does not run).
try:
    import onnxruntime as ort

    xin = np.random.RandomState(1).uniform(-1, 1, (1, 3, 48, 64)).astype(np.float32)
    run_ort = lambda mm: ort.InferenceSession(mm.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": xin})[0]
    p0 = run_ort(base)
except ImportError:
    run_ort = None
all_m = base
ok = rc == 0
for name, fn in forms.items():
    rc, lines, h = imp(fn(base), "form_" + name)
    ok &= rc == 0 and h == ref
    same = ""
    if run_ort and name != "gemm_head":
        same = ", onnxruntime max |dp| vs the export %.3g" % float(np.abs(run_ort(fn(base)) - p0).max())
    print("  form %-22s rc %d same weights: %s%s%s" % (name, rc, h == ref, same, "" if rc == 0 else " | " + lines[0][:200]))
    if name != "constants":
        all_m = fn(all_m)
rc, lines, h = imp(to_constants(all_m), "form_all")
ok &= rc == 0 and h == ref
print("  form %-22s rc %d same weights: %s%s" % ("all together", rc, h == ref, "" if rc == 0 else " | " + lines[0][:200]))
for name, fn in {"stem3_stride_2": stem3_stride, "hg_layer_removed": layer_removed, "residual_add_removed": add_removed,
                 "maxpool_pads_1111": pool_pads, "pad_node_value_1": pad_value_1}.items():
    mm, where = fn(base)
    rc, lines, h = imp(mm, "bad_" + name)
    named = any("node #" in l or "after tensor" in l for l in lines)
    ok &= rc != 0 and h is None and named
    print("  wrong %-20s rc %d written: %s | %s" % (name, rc, h is not None, " / ".join(lines)[:300]))
print("spellings and refusals: %s" % ("all as expected" if ok else "NOT as expected"))

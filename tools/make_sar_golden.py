#!/usr/bin/env python3
"""Golden outputs of PaddleOCR's SAR guidance head (PP-OCRv3 MultiHead) for tests/models/test_sar.c.

Runs PaddleOCR's own SARHead and SARLoss (imported by file path from a PaddleOCR tree) with the
head.sar_head.* tensors of the REDUCED MultiHead checkpoint in /work/shared, in training mode with
the two dropouts set to 0, on a fixed backbone map, labels and valid ratios, and writes:

  logits.f32        (B, L, 98)    the head's output (PaddleOCR's `sar`, before SARLoss's slice)
  dx.f32            (B, 1, W, C)  d SARLoss / d map, NHWC (ocrtrain's layout)
  grad.<name>.f32                 d SARLoss / d parameter, in ocrtrain's layout (conv: OC, KH, KW, C)
  index.json                      shapes, the loss, the inputs (label_sar, CTC labels, valid ratios)

The map is x[b, c, 0, w] = 0.5·sin(0.37·c + 1.3·w + 2.1·b) + 0.25·cos(0.11·c·w + b), computed in
double and rounded to float32; the C test computes the same values (nothing of it is stored).

usage: tools/make_sar_golden.py --paddleocr TREE [--pdparams FILE] [--out DIR]
(paddlepaddle 3.3.1, CPU, 1 thread; PaddleOCR 2.x ppocr/modeling/heads/rec_sar_head.py and
ppocr/losses/rec_sar_loss.py).
"""
import argparse
import hashlib
import importlib.util
import json
import math
import os

import numpy as np
import paddle

B, C, W, L = 3, 512, 40, 25
CTC_CLASSES = 97  # en_dict.txt + blank + space
# CTC ids (1..96) and lengths; sample 2 has the longest text MultiLabelEncode keeps (L - 2 = 23).
TEXTS = [[5, 17, 33, 2, 96], [61], [(7 * k + 3) % 96 + 1 for k in range(23)]]
VALID = [1.0, 0.4, 0.73]
GRADS = [
    "decoder.conv3x3_1.bias", "decoder.conv1x1_2.weight", "decoder.conv1x1_2.bias", "decoder.conv1x1_1.weight",
    "decoder.prediction.bias", "decoder.embedding.weight", "decoder.rnn_decoder.weight_ih_l1",
    "decoder.rnn_decoder.bias_hh_l0", "encoder.linear.weight", "encoder.rnn_encoder.weight_hh_l0",
    "encoder.rnn_encoder.bias_ih_l1",
]


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def the_map():
    x = np.zeros((B, C, 1, W), np.float64)
    for b in range(B):
        for c in range(C):
            for w in range(W):
                x[b, c, 0, w] = 0.5 * math.sin(0.37 * c + 1.3 * w + 2.1 * b) + 0.25 * math.cos(0.11 * c * w + b)
    return x.astype(np.float32)


def label_sar(ids):
    bos, pad = CTC_CLASSES, CTC_CLASSES + 1
    lab = [bos] + [i - 1 for i in ids] + [bos]
    return lab + [pad] * (L - len(lab))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--paddleocr", required=True, help="PaddleOCR tree (has ppocr/modeling/heads/rec_sar_head.py)")
    ap.add_argument("--pdparams", default="/work/shared/models/ppocrv3_paddle/"
                    "v3_en_multihead_ctc_sar_REDUCED_enc64_dk64_4steps.pdparams")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "models", "data", "sar"))
    a = ap.parse_args()
    paddle.set_device("cpu")
    # With paddle 3.3.1, paddle.shape() is int64 and rec_sar_head.py's
    # paddle.minimum(T, paddle.ceil(vr * T).astype("int32")) refuses int64 with int32 (type
    # promotion error). Shapes are cast to int32, as older Paddle returned them; the values the
    # head computes are the same.
    shape64 = paddle.shape
    paddle.shape = lambda t: shape64(t).astype("int32")
    paddle.set_flags({"FLAGS_use_mkldnn": False})
    heads = load(os.path.join(a.paddleocr, "ppocr/modeling/heads/rec_sar_head.py"), "rec_sar_head")
    losses = load(os.path.join(a.paddleocr, "ppocr/losses/rec_sar_loss.py"), "rec_sar_loss")
    state = paddle.load(a.pdparams)
    pre = "head.sar_head."
    sub = {k[len(pre):]: v for k, v in state.items() if k.startswith(pre)}
    enc_dim = sub["encoder.linear.weight"].shape[0]
    d_k = sub["decoder.conv1x1_1.weight"].shape[1]
    head = heads.SARHead(in_channels=C, out_channels=CTC_CLASSES + 2, enc_dim=enc_dim, max_text_length=L, d_k=d_k)
    missing, unexpected = head.set_state_dict(sub), None
    own = head.state_dict()
    assert sorted(own.keys()) == sorted(sub.keys()), "the checkpoint's SAR keys differ from SARHead's"
    for k, v in own.items():
        assert np.array_equal(v.numpy(), np.asarray(sub[k])), k
    head.train()
    head.encoder.rnn_encoder.dropout = 0.0  # enc_drop_rnn
    head.decoder.pred_dropout.p = 0.0       # pred_dropout
    x = paddle.to_tensor(the_map(), stop_gradient=False)
    labels = np.array([label_sar(t) for t in TEXTS], np.int64)
    vr = paddle.to_tensor(np.array(VALID, np.float32))
    lab = paddle.to_tensor(labels)
    length = paddle.to_tensor(np.array([len(t) for t in TEXTS], np.int64))
    out = head(x, [lab, length, vr])
    loss = losses.SARLoss(ignore_index=CTC_CLASSES + 1)(out, [None, lab, length, vr])["loss"]
    loss.backward()
    os.makedirs(a.out, exist_ok=True)
    files = {}

    def save(name, arr):
        arr = np.ascontiguousarray(arr, np.float32)
        p = os.path.join(a.out, name)
        arr.tofile(p)
        files[name] = {"shape": list(arr.shape), "sha256": hashlib.sha256(arr.tobytes()).hexdigest()}

    save("logits.f32", out.numpy())
    save("dx.f32", x.grad.numpy().transpose(0, 2, 3, 1))
    params = dict(head.named_parameters())
    for n in GRADS:
        g = params[n].grad.numpy()
        if g.ndim == 4:
            g = g.transpose(0, 2, 3, 1)
        save("grad." + n + ".f32", g)
    idx = {
        "what": "PaddleOCR SARHead + SARLoss, REDUCED checkpoint (enc_dim %d, d_k %d), train mode, dropouts 0" % (enc_dim, d_k),
        "paddle": paddle.__version__, "B": B, "C": C, "W": W, "L": L, "enc_dim": enc_dim, "d_k": d_k,
        "ctc_labels": TEXTS, "valid_ratios": VALID, "label_sar": labels.tolist(),
        "loss": float(loss.numpy()), "files": files,
    }
    with open(os.path.join(a.out, "index.json"), "w") as f:
        json.dump(idx, f, indent=1)
    print("loss %.9g, logits |max| %.4g -> %s" % (idx["loss"], float(np.abs(out.numpy()).max()), a.out))


if __name__ == "__main__":
    main()

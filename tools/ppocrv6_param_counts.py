#!/usr/bin/env python3
"""PaddleOCR's parameter names and counts of the PP-OCRv6 tiny, small and medium recognizers
(name lists written for each).

Built by arithmetic from the facts of PaddleOCR's source (PaddleOCR 3.7, read, not imported):
NET_CONFIG_REC of ppocr/modeling/backbones/rec_lcnetv4.py (stem, blocks2..blocks6 as
[k, in, out, stride, se]), its layer classes (Conv2D_BN, ConvBNAct, StemBlock, RepDWConv,
SELayer, LCNetV4Block: which sub-layer owns which tensor), the LightSVTR neck of
ppocr/modeling/necks/rnn.py, the CTC head (guide_layer Conv1D/BN1D stack, fc1/fc2), and MultiHead's
NRTR branch (before_gtc.1.fc, gtc_head Transformer with nrtr_dim, 4 decoder layers, ff 4·dim).

Forms: train / deploy (the MultiHead network as configured: CTC branch and NRTR branch) and
train_ctc / deploy_ctc (the CTC branch alone: what PaddleOCR exports for inference, deploy_ctc).
Writes, per model and form, one line per tensor "name<TAB>shape<TAB>kind" (kind: param for a
trainable parameter, stat for a BN running statistic, Paddle's non-trainable parameters), in
PaddleOCR's layout (Conv2D (OC, C/g, KH, KW), Linear (IN, OUT), Conv1D (OC, C/g, K)), and prints
the counts. Cross-check: --onnx-tiny / --onnx-small sum the initialiser sizes of an exported
(deploy-form, BN statistics included) ONNX file for comparison with the deploy_ctc counts.

usage: tools/ppocrv6_param_counts.py [--out DIR] [--onnx-tiny F] [--onnx-small F]
"""
import argparse
import os

NET_CONFIG_REC = {
    "tiny": {
        "stem": (24, 48), "stem_type": "simple",
        "blocks2": [[3, 48, 48, 1, True]],
        "blocks3": [[3, 48, 48, 1, False]],
        "blocks4": [[3, 48, 96, (2, 1), False], [3, 96, 96, 1, True], [3, 96, 96, 1, False]],
        "blocks5": [[3, 96, 160, (2, 1), False], [3, 160, 160, 1, True], [3, 160, 160, 1, False],
                    [3, 160, 160, 1, False]],
        "blocks6": [],
    },
    "small": {
        "stem": (48, 96), "stem_type": "branch",
        "blocks2": [[3, 96, 96, 1, True]],
        "blocks3": [[3, 96, 96, 1, False], [3, 96, 96, 1, False]],
        "blocks4": [[3, 96, 192, (2, 1), False], [3, 192, 192, 1, True], [3, 192, 192, 1, False],
                    [3, 192, 192, 1, True], [3, 192, 192, 1, False], [3, 192, 192, 1, True],
                    [3, 192, 192, 1, False]],
        "blocks5": [[3, 192, 384, (2, 1), False], [3, 384, 384, 1, True], [3, 384, 384, 1, False]],
        "blocks6": [],
    },
    "medium": {
        "stem": (64, 128), "stem_type": "branch",
        "blocks2": [[3, 128, 128, 1, True]],
        "blocks3": [[3, 128, 256, 1, False], [3, 256, 256, 1, False], [3, 256, 256, 1, True]],
        "blocks4": [[3, 256, 512, (2, 1), False], [3, 512, 512, 1, True], [3, 512, 512, 1, False],
                    [3, 512, 512, 1, True], [3, 512, 512, 1, False], [3, 512, 512, 1, True],
                    [3, 512, 512, 1, False]],
        "blocks5": [[3, 512, 768, (2, 1), False], [3, 768, 768, 1, True], [3, 768, 768, 1, False]],
        "blocks6": [],
    },
}
# The PP-OCRv6 rec configs (configs/rec/PP-OCRv6/*.yml) and dictionaries.
MODELS = {
    "tiny": {"classes": 6904 + 2, "neck": None, "head_mid": 80, "guide": True, "nrtr_dim": 384},
    "small": {"classes": 18708 + 2, "neck": {"dims": 120, "depth": 2, "mlp_ratio": 2.0, "local_kernel": 7},
              "head_mid": None, "guide": False, "nrtr_dim": 384},
    "medium": {"classes": 18708 + 2, "neck": {"dims": 192, "depth": 2, "mlp_ratio": 4.0, "local_kernel": 7},
               "head_mid": None, "guide": False, "nrtr_dim": 512},
}


class Net:
    def __init__(self):
        self.rows = []

    def p(self, name, shape):
        self.rows.append((name, tuple(shape), "param"))

    def s(self, name, shape):
        self.rows.append((name, tuple(shape), "stat"))

    def bn(self, pre, c):
        self.p(pre + ".weight", [c])
        self.p(pre + ".bias", [c])
        self.s(pre + "._mean", [c])
        self.s(pre + "._variance", [c])

    def conv(self, pre, oc, cg, kh, kw, bias):
        self.p(pre + ".weight", [oc, cg, kh, kw])
        if bias:
            self.p(pre + ".bias", [oc])

    def linear(self, pre, i, o, bias=True):
        self.p(pre + ".weight", [i, o])
        if bias:
            self.p(pre + ".bias", [o])

    def ln(self, pre, c):
        self.p(pre + ".weight", [c])
        self.p(pre + ".bias", [c])


def conv2d_bn(n, pre, cin, cout, k, groups, deploy):
    """Conv2D_BN: training conv (no bias) + bn; fuse() returns a Conv2D with bias at `pre`."""
    if deploy:
        n.conv(pre, cout, cin // groups, k, k, True)
    else:
        n.conv(pre + ".conv", cout, cin // groups, k, k, False)
        n.bn(pre + ".bn", cout)


def conv_bn_act(n, pre, cin, cout, k, deploy):
    """ConvBNAct (StemBlock): conv (no bias) + bn; rep() makes conv a Conv2D with bias, drops bn."""
    n.conv(pre + ".conv", cout, cin, k, k, deploy)
    if not deploy:
        n.bn(pre + ".bn", cout)


def backbone(n, size, deploy):
    cfg = NET_CONFIG_REC[size]
    mid, out = cfg["stem"]
    if cfg["stem_type"] == "branch":
        conv_bn_act(n, "backbone.conv1.stem1", 3, mid, 3, deploy)
        conv_bn_act(n, "backbone.conv1.stem2a", mid, mid // 2, 2, deploy)
        conv_bn_act(n, "backbone.conv1.stem2b", mid // 2, mid, 2, deploy)
        conv_bn_act(n, "backbone.conv1.stem3", mid * 2, mid, 3, deploy)
        conv_bn_act(n, "backbone.conv1.stem4", mid, out, 1, deploy)
    else:
        # nn.Sequential(Conv2D_BN, GELU, Conv2D_BN): no rep() (PPLCNetV4.rep skips it).
        conv2d_bn(n, "backbone.conv1.0", 3, mid, 3, 1, False)
        conv2d_bn(n, "backbone.conv1.2", mid, out, 3, 1, False)
    for stage in ("blocks2", "blocks3", "blocks4", "blocks5", "blocks6"):
        for i, (k, cin, cout, stride, se) in enumerate(cfg[stage]):
            pre = "backbone.%s.%d" % (stage, i)
            rep = stride == 1 and cin == cout
            if rep:
                if deploy:
                    n.conv(pre + ".token_mixer.rep_dw.reparam_conv", cin, 1, k, k, True)
                else:
                    conv2d_bn(n, pre + ".token_mixer.rep_dw.conv", cin, cin, k, cin, False)
                    n.conv(pre + ".token_mixer.rep_dw.conv1", cin, 1, 1, 1, False)
                    n.bn(pre + ".token_mixer.rep_dw.bn", cin)
            else:
                conv2d_bn(n, pre + ".token_mixer.dw_conv", cin, cin, k, cin, deploy)
            if se:
                n.conv(pre + ".token_mixer.se.conv1", cin // 4, cin, 1, 1, True)
                n.conv(pre + ".token_mixer.se.conv2", cin, cin // 4, 1, 1, True)
            hid = cin * 2
            conv2d_bn(n, pre + ".channel_mixer.expand", cin, hid, 1, 1, deploy)
            conv2d_bn(n, pre + ".channel_mixer.compress", hid, cout, 1, 1, deploy)
    last = [st for st in ("blocks2", "blocks3", "blocks4", "blocks5", "blocks6") if cfg[st]][-1]
    return cfg[last][-1][2]


def conv_bn_layer(n, pre, cin, cout, kh, kw, groups):
    """rec_svtrnet ConvBNLayer: conv (no bias) + norm (BatchNorm2D) + act."""
    n.conv(pre + ".conv", cout, cin // groups, kh, kw, False)
    n.bn(pre + ".norm", cout)


def lightsvtr(n, pre, cin, dims, depth, mlp_ratio, local_kernel):
    conv_bn_layer(n, pre + ".conv_reduce", cin, dims, 1, 1, 1)
    n.conv(pre + ".local_conv.0", dims, 1, 1, local_kernel, False)
    n.bn(pre + ".local_conv.1", dims)
    hid = int(dims * mlp_ratio)
    for i in range(depth):
        b = "%s.svtr_block.%d" % (pre, i)
        n.ln(b + ".norm1", dims)
        n.linear(b + ".mixer.qkv", dims, 3 * dims)
        n.linear(b + ".mixer.proj", dims, dims)
        n.ln(b + ".norm2", dims)
        n.linear(b + ".mlp.fc1", dims, hid)
        n.linear(b + ".mlp.fc2", hid, dims)
    n.ln(pre + ".norm", dims)
    conv_bn_layer(n, pre + ".skip_conv", cin, dims, 1, 1, 1)
    return dims


def nrtr(n, cin, dim, classes, layers=4):
    vocab = classes + 4  # NRTRLabelDecode's characters (the CTC set + 3 special) + 1 as PaddleOCR sizes it
    n.linear("head.before_gtc.1.fc", cin, dim, bias=False)
    n.p("head.gtc_head.embedding.embedding.weight", [vocab, dim])
    for i in range(layers):
        b = "head.gtc_head.decoder.%d" % i
        n.linear(b + ".self_attn.qkv", dim, 3 * dim)
        n.linear(b + ".self_attn.out_proj", dim, dim)
        n.linear(b + ".cross_attn.q", dim, dim)
        n.linear(b + ".cross_attn.kv", dim, 2 * dim)
        n.linear(b + ".cross_attn.out_proj", dim, dim)
        n.linear(b + ".mlp.fc1", dim, 4 * dim)
        n.linear(b + ".mlp.fc2", 4 * dim, dim)
        n.ln(b + ".norm1", dim)
        n.ln(b + ".norm2", dim)
        n.ln(b + ".norm3", dim)
    n.linear("head.gtc_head.tgt_word_prj", dim, vocab, bias=False)


def build(size, deploy, with_nrtr):
    m = MODELS[size]
    n = Net()
    feat = backbone(n, size, deploy)
    c = feat
    if m["neck"]:
        nk = m["neck"]
        c = lightsvtr(n, "head.ctc_encoder.encoder", feat, nk["dims"], nk["depth"], nk["mlp_ratio"],
                      nk["local_kernel"])
    if m["guide"]:
        n.p("head.ctc_head.guide_layer.0.weight", [c, 1, 5])  # Conv1D depthwise k5, no bias
        n.bn("head.ctc_head.guide_layer.1", c)
        n.p("head.ctc_head.guide_layer.3.weight", [c, c, 1])  # Conv1D 1x1, no bias
        n.bn("head.ctc_head.guide_layer.4", c)
    if m["head_mid"]:
        n.linear("head.ctc_head.fc1", c, m["head_mid"])
        n.linear("head.ctc_head.fc2", m["head_mid"], m["classes"])
    else:
        n.linear("head.ctc_head.fc", c, m["classes"])
    if with_nrtr:
        nrtr(n, feat, m["nrtr_dim"], m["classes"])
    return n


def numel(shape):
    r = 1
    for d in shape:
        r *= d
    return r


def onnx_total(path):
    """Float initialisers with more than one element (weights, biases, BN tensors); scalars (the
    attention scale head_dim^-0.5 among them) and integer shapes left out."""
    import onnx
    g = onnx.load(path).graph
    tensors = list(g.initializer)
    for node in g.node:  # weights stored as Constant nodes by some exporters
        if node.op_type == "Constant":
            tensors += [a.t for a in node.attribute if a.name == "value"]
    return sum(numel(t.dims) for t in tensors if t.data_type == onnx.TensorProto.FLOAT and numel(t.dims) > 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--onnx-tiny")
    ap.add_argument("--onnx-small")
    args = ap.parse_args()
    for size in ("tiny", "small", "medium"):
        for deploy in (False, True):
            for with_nrtr in (True, False):
                n = build(size, deploy, with_nrtr)
                params = sum(numel(s) for _, s, k in n.rows if k == "param")
                stats = sum(numel(s) for _, s, k in n.rows if k == "stat")
                form = ("deploy" if deploy else "train") + ("" if with_nrtr else "_ctc")
                print("%-5s %-9s trainable %9d  BN statistics %6d  all %9d  tensors %d" %
                      (size, form, params, stats, params + stats, len(n.rows)))
                if args.out:
                    fn = os.path.join(args.out, "ppocrv6_%s_%s_names.txt" % (size, form))
                    with open(fn, "w") as f:
                        for name, shape, kind in n.rows:
                            f.write("%s\t%s\t%s\n" % (name, "x".join(str(d) for d in shape), kind))
    for size, path in (("tiny", args.onnx_tiny), ("small", args.onnx_small)):
        if path:
            print("%s ONNX initialisers (deploy form, BN statistics included): %d" % (size, onnx_total(path)))


if __name__ == "__main__":
    main()

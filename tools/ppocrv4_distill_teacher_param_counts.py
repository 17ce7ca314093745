#!/usr/bin/env python3
"""PaddleOCR's parameter names and counts of PP-OCRv4's distillation teacher
(configs/rec/PP-OCRv4/ch_PP-OCRv4_rec_distill.yml, Architecture.Models.Teacher): SVTRNet
(img_size [48, 320], embed_dim [64, 128, 256], depth [3, 6, 3], num_heads [2, 4, 8], mixer 6x Conv
then 6x Global, local_mixer [5, 5] per stage, patch_merging Conv, mlp_ratio 4, prenorm true,
last_stage false, out_channels 192) + MultiHead [CTCHead with the svtr neck (dims 120, depth 2,
hidden 120, kernel [1, 3], use_guide) and fc, NRTRHead nrtr_dim 384], ppocr_keys_v1 (6,623 lines)
+ blank + space = 6,625 classes.

Built by arithmetic from the facts of PaddleOCR's source (read, not imported):
ppocr/modeling/backbones/rec_svtrnet.py: PatchEmbed "pope" with sub_num 2 (two ConvBNLayer 3x3
stride 2, conv with bias since bias_attr=None, BatchNorm2D), pos_embed [1, H/4*W/4, embed_dim[0]],
Block (norm1, mixer, norm2, mlp fc1/fc2; LayerNorm weight+bias); the Conv mixer is ConvMixer, one
Conv2D(dim, dim, local_k, padding k//2, groups=num_heads) with a bias, named mixer.local_mixer; the
Global mixer is Attention (qkv with qkv_bias, proj); SubSample "Conv" (conv 3x3 stride [2, 1] with a
bias, norm LayerNorm); `norm` exists only when prenorm is false, avg_pool/last_conv (1x1,
embed_dim[2] -> out_channels, no bias)/hardswish/dropout only when last_stage is true. MultiHead
builds its heads with in_channels = the backbone's out_channels attribute, which SVTRNet sets to
out_channels (192) whatever last_stage says. The neck and NRTR rows are those of
tools/ppocrv5_server_param_counts.py and tools/ppocrv6_param_counts.py.

Forms: published (last_stage false, what PaddleOCR constructs; its forward then fails: SVTRNet
returns the (B, 240, 256) token sequence and the neck's first Conv2D raises on a 3-D input) and
last_stage (last_stage true, the form this trainer builds: published + backbone.last_conv.weight,
256 x 192 = 49,152 values, feeding the same 192-channel heads).

usage: tools/ppocrv4_distill_teacher_param_counts.py [--out DIR]
  (--out writes ppocrv4_distill_teacher_<form>_names.txt)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ppocrv6_param_counts import Net, conv_bn_layer, nrtr, numel  # noqa: E402
from ppocrv5_server_param_counts import svtr_neck  # noqa: E402

IMG = (48, 320)
EMBED = (64, 128, 256)
DEPTH = (3, 6, 3)
HEADS = (2, 4, 8)
MIXER = ["Conv"] * 6 + ["Global"] * 6
LOCAL = ((5, 5), (5, 5), (5, 5))
MLP_RATIO = 4
OUT_CHANNELS = 192
CLASSES = 6623 + 2
NECK = {"dims": 120, "depth": 2, "hidden": 120, "kernel": (1, 3), "mlp_ratio": 2.0}
NRTR_DIM = 384


def svtrnet(n, prenorm, last_stage):
    e0 = EMBED[0]
    for i, (cin, cout) in enumerate(((3, e0 // 2), (e0 // 2, e0))):
        pre = "backbone.patch_embed.proj.%d" % i
        n.conv(pre + ".conv", cout, cin, 3, 3, True)
        n.bn(pre + ".norm", cout)
    n.p("backbone.pos_embed", [1, (IMG[0] // 4) * (IMG[1] // 4), e0])
    bi = 0
    for st in range(3):
        dim = EMBED[st]
        if st > 0:
            pre = "backbone.sub_sample%d" % st
            n.conv(pre + ".conv", dim, EMBED[st - 1], 3, 3, True)
            n.ln(pre + ".norm", dim)
        for i in range(DEPTH[st]):
            b = "backbone.blocks%d.%d" % (st + 1, i)
            n.ln(b + ".norm1", dim)
            if MIXER[bi] == "Conv":
                kh, kw = LOCAL[st]
                n.conv(b + ".mixer.local_mixer", dim, dim // HEADS[st], kh, kw, True)
            else:
                n.linear(b + ".mixer.qkv", dim, 3 * dim)
                n.linear(b + ".mixer.proj", dim, dim)
            n.ln(b + ".norm2", dim)
            n.linear(b + ".mlp.fc1", dim, dim * MLP_RATIO)
            n.linear(b + ".mlp.fc2", dim * MLP_RATIO, dim)
            bi += 1
    if not prenorm:
        n.ln("backbone.norm", EMBED[2])
    if last_stage:
        n.conv("backbone.last_conv", OUT_CHANNELS, EMBED[2], 1, 1, False)
    return OUT_CHANNELS  # SVTRNet.out_channels, what MultiHead's in_channels is


def build(last_stage):
    n = Net()
    feat = svtrnet(n, prenorm=True, last_stage=last_stage)
    c = svtr_neck(n, "head.ctc_encoder.encoder", feat, NECK["dims"], NECK["depth"], NECK["hidden"], NECK["kernel"],
                  NECK["mlp_ratio"])
    n.linear("head.ctc_head.fc", c, CLASSES)
    nrtr(n, feat, NRTR_DIM, CLASSES)
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    for form, last_stage in (("published", False), ("last_stage", True)):
        n = build(last_stage)
        params = sum(numel(s) for _, s, k in n.rows if k == "param")
        stats = sum(numel(s) for _, s, k in n.rows if k == "stat")
        bb = sum(numel(s) for name, s, k in n.rows if k == "param" and name.startswith("backbone."))
        print("%-10s trainable %9d (backbone %8d)  BN statistics %5d  tensors %d" %
              (form, params, bb, stats, len(n.rows)))
        if args.out:
            fn = os.path.join(args.out, "ppocrv4_distill_teacher_%s_names.txt" % form)
            with open(fn, "w") as f:
                for name, shape, kind in n.rows:
                    f.write("%s\t%s\t%s\n" % (name, "x".join(str(d) for d in shape), kind))


if __name__ == "__main__":
    main()

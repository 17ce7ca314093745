#!/usr/bin/env python3
"""PaddleOCR's parameter names and counts of the PP-OCRv5 server recognizer (PP-OCRv5_server_rec.yml:
PPHGNetV2_B4 text_rec + MultiHead [CTCHead with the svtr neck (dims 120, depth 2, hidden 120,
kernel [1, 3], use_guide) and fc, NRTRHead nrtr_dim 384], 18,383 dictionary lines + blank + space).

Built by arithmetic from the facts of PaddleOCR's source (read, not imported):
ppocr/modeling/backbones/rec_pphgnetv2.py: PPHGNetV2_B4's stem_channels [3, 32, 48] and
stage_config_rec (in, mid, out, blocks, downsample, light, kernel, layers, stride); StemBlock
(stem1 3x3, stem2a/stem2b 2x2, stem3 3x3, stem4 1x1 ConvBNActs); HGV2_Stage (downsample: depthwise
3x3 ConvBNAct) and HGV2_Block (layers: ConvBNAct or LightConvBNAct conv1 1x1 + conv2 depthwise,
aggregation_squeeze_conv to out/2, aggregation_excitation_conv to out); ConvBNAct = conv (no bias)
+ bn; PPHGNetV2.__init__ also builds last_conv (Conv2D 2048 -> class_expand 2048, no bias, since
use_last_conv defaults to True) and fc (Linear 2048 -> class_num 1000) which the text_rec forward
never runs; ppocr/modeling/necks/rnn.py EncoderWithSVTR (conv1 [1,3] to in/8, conv2 1x1 to hidden,
Global blocks, norm, conv3 1x1 back to in, conv4 [1,3] from 2·in to in/8, conv1x1 to dims; each a
ConvBNLayer conv + norm); heads/rec_multi_head.py (ctc_encoder, ctc_head.fc, before_gtc.1.fc,
gtc_head). The NRTR branch's names are tools/ppocrv6_param_counts.py's.

Forms: train (PaddleOCR's model.parameters(): the MultiHead network as configured, the unused
classifier included; what its .pdparams holds), train_ctc (without the NRTR branch), deploy and
deploy_ctc (without last_conv and fc: what PaddleOCR's exported inference program keeps; deploy_ctc
is the inference model). BN statistics are counted apart (kind "stat").

Cross-check (--hf, needs torch and transformers 5.23): Hugging Face's own port of the inference
network (transformers.models.pp_ocrv5_server_rec, default config, random init, nothing downloaded)
counted the same way: its PPOCRV5ServerRecForTextRecognition must equal deploy_ctc (21,043,161
parameters, 51,392 BN statistics) and its backbone (PPOCRV5ServerRecModel) our backbone.* rows, in
total and tensor by tensor (the multisets of shapes).

Parity (--parity DIR, needs torch and transformers 5.23): DIR holds what
`OCR_PPOCRV5_SERVER_DUMP=DIR build/models_ppocrv5_server_arch` writes (our deploy network's weights
with BN randomised and calibrated, an input and our eval probabilities); the weights are renamed to
the port's names, loaded into it, and its probabilities compared with ours as centred logits
(log p minus its mean over the classes), both against the port run in float64: ours must be as close
to that reference as the port's own float32 run (within 4x, and within 1e-3 relative).

usage: tools/ppocrv5_server_param_counts.py [--out DIR] [--hf] [--parity DIR]
  (--out writes ppocrv5_server_<form>_names.txt)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ppocrv6_param_counts import Net, conv_bn_layer, nrtr, numel  # noqa: E402

STEM = (3, 32, 48)
# in, mid, out, blocks, downsample, light, kernel, layers, stride
STAGES = [
    (48, 48, 128, 1, True, False, 3, 6, (2, 1)),
    (128, 96, 512, 1, True, False, 3, 6, (1, 2)),
    (512, 192, 1024, 3, True, True, 5, 6, (2, 1)),
    (1024, 384, 2048, 1, True, True, 5, 6, (2, 1)),
]
CLASSES = 18383 + 2
NECK = {"dims": 120, "depth": 2, "hidden": 120, "kernel": (1, 3), "mlp_ratio": 2.0}
NRTR_DIM = 384


def conv_bn_act(n, pre, cin, cout, k, groups=1):
    n.conv(pre + ".conv", cout, cin // groups, k, k, False)
    n.bn(pre + ".bn", cout)


def backbone(n, deploy):
    cin, mid, out = STEM
    conv_bn_act(n, "backbone.stem.stem1", cin, mid, 3)
    conv_bn_act(n, "backbone.stem.stem2a", mid, mid // 2, 2)
    conv_bn_act(n, "backbone.stem.stem2b", mid // 2, mid, 2)
    conv_bn_act(n, "backbone.stem.stem3", mid * 2, mid, 3)
    conv_bn_act(n, "backbone.stem.stem4", mid, out, 1)
    for i, (c_in, c_mid, c_out, blocks, down, light, k, layers, _stride) in enumerate(STAGES):
        pre = "backbone.stages.%d" % i
        if down:
            conv_bn_act(n, pre + ".downsample", c_in, c_in, 3, groups=c_in)
        for j in range(blocks):
            b = "%s.blocks.%d" % (pre, j)
            bin_ = c_in if j == 0 else c_out
            for l in range(layers):
                lin = bin_ if l == 0 else c_mid
                lp = "%s.layers.%d" % (b, l)
                if light:
                    conv_bn_act(n, lp + ".conv1", lin, c_mid, 1)
                    conv_bn_act(n, lp + ".conv2", c_mid, c_mid, k, groups=c_mid)
                else:
                    conv_bn_act(n, lp, lin, c_mid, k)
            total = bin_ + layers * c_mid
            conv_bn_act(n, b + ".aggregation_squeeze_conv", total, c_out // 2, 1)
            conv_bn_act(n, b + ".aggregation_excitation_conv", c_out // 2, c_out, 1)
    last = STAGES[-1][2]
    if not deploy:
        n.conv("backbone.last_conv", 2048, last, 1, 1, False)  # class_expand 2048
        n.linear("backbone.fc", 2048, 1000)                   # class_num 1000
    return last


def svtr_neck(n, pre, cin, dims, depth, hidden, kernel, mlp_ratio):
    kh, kw = kernel
    conv_bn_layer(n, pre + ".conv1", cin, cin // 8, kh, kw, 1)
    conv_bn_layer(n, pre + ".conv2", cin // 8, hidden, 1, 1, 1)
    hid = int(hidden * mlp_ratio)
    for i in range(depth):
        b = "%s.svtr_block.%d" % (pre, i)
        n.ln(b + ".norm1", hidden)
        n.linear(b + ".mixer.qkv", hidden, 3 * hidden)
        n.linear(b + ".mixer.proj", hidden, hidden)
        n.ln(b + ".norm2", hidden)
        n.linear(b + ".mlp.fc1", hidden, hid)
        n.linear(b + ".mlp.fc2", hid, hidden)
    n.ln(pre + ".norm", hidden)
    conv_bn_layer(n, pre + ".conv3", hidden, cin, 1, 1, 1)
    conv_bn_layer(n, pre + ".conv4", 2 * cin, cin // 8, kh, kw, 1)
    conv_bn_layer(n, pre + ".conv1x1", cin // 8, dims, 1, 1, 1)
    return dims


def build(deploy, with_nrtr):
    n = Net()
    feat = backbone(n, deploy)
    c = svtr_neck(n, "head.ctc_encoder.encoder", feat, NECK["dims"], NECK["depth"], NECK["hidden"], NECK["kernel"],
                  NECK["mlp_ratio"])
    n.linear("head.ctc_head.fc", c, CLASSES)
    if with_nrtr:
        nrtr(n, feat, NRTR_DIM, CLASSES)
    return n


def hf_check(ctc):
    from transformers.models.pp_ocrv5_server_rec import configuration_pp_ocrv5_server_rec as cm
    from transformers.models.pp_ocrv5_server_rec import modeling_pp_ocrv5_server_rec as mm
    cfg = cm.PPOCRV5ServerRecConfig()
    ok = True
    for cls, prefix in ((mm.PPOCRV5ServerRecForTextRecognition, ""), (mm.PPOCRV5ServerRecModel, "backbone.")):
        m = cls(cfg)
        p = sum(t.numel() for t in m.parameters())
        b = sum(t.numel() for name, t in m.named_buffers() if "running_" in name)
        mp = sum(numel(s) for name, s, k in ctc.rows if k == "param" and name.startswith(prefix))
        ms = sum(numel(s) for name, s, k in ctc.rows if k == "stat" and name.startswith(prefix))
        # Tensor by tensor: the multisets of shapes (dims sorted: torch's Linear is (OUT, IN), Paddle's
        # (IN, OUT)) of the port's parameters and BN statistics and of PaddleOCR's rows.
        theirs = sorted(tuple(sorted(t.shape)) for t in m.parameters()) + \
            sorted(tuple(sorted(t.shape)) for name, t in m.named_buffers() if "running_" in name)
        ours = sorted(tuple(sorted(sh)) for name, sh, k in ctc.rows if k == "param" and name.startswith(prefix)) + \
            sorted(tuple(sorted(sh)) for name, sh, k in ctc.rows if k == "stat" and name.startswith(prefix))
        same = p == mp and b == ms and theirs == ours
        ok &= same
        print("transformers %-36s parameters %9d  BN statistics %6d; deploy_ctc %s: %9d / %6d  %s" %
              (cls.__name__, p, b, prefix or "all", mp, ms, "equal" if same else "DIFFERENT"))
    return ok


def hf_name(n):
    """Our (PaddleOCR's) tensor name -> the transformers port's."""
    import re
    if n.startswith("head.ctc_encoder.encoder.norm."):
        return n.replace("head.ctc_encoder.encoder.", "head.encoder.")
    n = n.replace("backbone.stem.", "model.backbone.embedder.")
    n = n.replace("backbone.stages.", "model.backbone.encoder.stages.")
    n = n.replace("aggregation_squeeze_conv", "aggregation.0").replace("aggregation_excitation_conv", "aggregation.1")
    for i, c in enumerate(["conv1", "conv2", "conv3", "conv4", "conv1x1"]):
        n = n.replace("head.ctc_encoder.encoder.%s." % c, "head.encoder.conv_block.%d." % i)
    n = n.replace("head.ctc_encoder.encoder.", "head.encoder.")
    n = n.replace(".mixer.qkv", ".self_attn.qkv").replace(".mixer.proj", ".self_attn.projection")
    n = n.replace(".norm1.", ".layer_norm1.").replace(".norm2.", ".layer_norm2.")
    n = n.replace("head.ctc_head.fc.", "head.head.")
    n = re.sub(r"\.conv\.weight$", ".convolution.weight", n)
    n = re.sub(r"\.(bn|norm)\.(weight|bias)$", r".normalization.\2", n)
    n = re.sub(r"\.(bn|norm)\._mean$", ".normalization.running_mean", n)
    n = re.sub(r"\.(bn|norm)\._variance$", ".normalization.running_var", n)
    return n


def parity(d):
    import numpy as np
    import torch
    from safetensors.numpy import load_file
    from transformers.models.pp_ocrv5_server_rec import configuration_pp_ocrv5_server_rec as cm
    from transformers.models.pp_ocrv5_server_rec import modeling_pp_ocrv5_server_rec as mm
    model = mm.PPOCRV5ServerRecForTextRecognition(cm.PPOCRV5ServerRecConfig()).eval()
    sd = model.state_dict()
    new = {}
    for k, v in load_file(os.path.join(d, "weights.safetensors")).items():
        if k.startswith("head.before_gtc.") or k.startswith("head.gtc_head."):
            continue  # the NRTR branch: not in the inference network
        h = hf_name(k)
        t = v.transpose(0, 3, 1, 2) if v.ndim == 4 else v.T if v.ndim == 2 else v  # our layouts -> torch's
        if h not in sd or tuple(t.shape) != tuple(sd[h].shape):
            sys.exit("parity: %s (%s) has no counterpart %s of that shape in the port" % (k, v.shape, h))
        new[h] = torch.from_numpy(np.ascontiguousarray(t))
    missing = [k for k in sd if k not in new and not k.endswith("num_batches_tracked")]
    if missing:
        sys.exit("parity: the port's %s (and %d more) not in the weights" % (missing[0], len(missing) - 1))
    model.load_state_dict(new, strict=False)
    x = np.fromfile(os.path.join(d, "input_1x48x64x3.f32"), dtype=np.float32).reshape(1, 48, 64, 3)
    xt = torch.from_numpy(x.transpose(0, 3, 1, 2).copy())

    def centred(p):
        lp = np.log(p.astype(np.float64))
        return lp - lp.mean(-1, keepdims=True)

    with torch.no_grad():
        p32 = model(xt).last_hidden_state.numpy()  # the softmax probabilities
        p64 = model.double()(xt.double()).last_hidden_state.numpy()
    ours = np.fromfile(os.path.join(d, "probs.f32"), dtype=np.float32).reshape(p32.shape)
    ref = centred(p64)
    rel = lambda a: np.linalg.norm(a - ref) / np.linalg.norm(ref)  # noqa: E731
    r_ours, r_port = rel(centred(ours)), rel(centred(p32))
    print("parity: %d tensors loaded into transformers' PPOCRV5ServerRecForTextRecognition; probabilities %s" %
          (len(new), "x".join(str(s) for s in p32.shape)))
    print("centred logits vs the port in float64: ours rel L2 %.3g, the port in float32 %.3g; ours vs the port's "
          "float32 max |diff| %.3g of max |logit| %.3g" % (r_ours, r_port, np.abs(centred(ours) - centred(p32)).max(),
                                                           np.abs(ref).max()))
    return r_ours <= max(4 * r_port, 1e-6) and r_ours < 1e-3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--hf", action="store_true")
    ap.add_argument("--parity", metavar="DIR")
    args = ap.parse_args()
    if args.parity:
        sys.exit(0 if parity(args.parity) else 1)
    if args.hf and not hf_check(build(True, False)):
        sys.exit(1)
    for deploy in (False, True):
        for with_nrtr in (True, False):
            n = build(deploy, with_nrtr)
            params = sum(numel(s) for _, s, k in n.rows if k == "param")
            stats = sum(numel(s) for _, s, k in n.rows if k == "stat")
            form = ("deploy" if deploy else "train") + ("" if with_nrtr else "_ctc")
            print("ppocrv5_server %-10s trainable %9d  BN statistics %6d  all %9d  tensors %d" %
                  (form, params, stats, params + stats, len(n.rows)))
            if args.out:
                with open(os.path.join(args.out, "ppocrv5_server_%s_names.txt" % form), "w") as f:
                    for name, shape, kind in n.rows:
                        f.write("%s\t%s\t%s\n" % (name, "x".join(str(d) for d in shape), kind))


if __name__ == "__main__":
    main()

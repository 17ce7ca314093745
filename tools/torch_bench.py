#!/usr/bin/env python3
# The PyTorch side of bench/bench_train_cpu.c: PyTorch twins of ocrtrain's networks in their
# training form, layer for layer, trained one full step at a time (forward, loss, backward, Adam
# with L2 3e-5) on synthetic batches: FP32, BF16 autocast and FP16 autocast (with a GradScaler)
# on the CPU. Weights are random: the time of a step does not depend on them.
#   v3       PP-OCRv3 en: MobileNetV1Enhance 0.5 + SVTR neck dims 64 + CTC, 97 classes
#   v4       PP-OCRv4 ch: PPLCNetV3 0.95 (rep branches, LAB) + SVTR neck dims 120 + CTC, 6625 classes
#            (v3/v4 from the shapes in ../shared/reference/paddleocr_rec_spec.md)
#   v5       PP-OCRv5 mobile: the v4 network with 18,385 classes (configs/rec_ppocrv5_mobile.json)
#   v6tiny   PP-OCRv6 tiny (configs/rec_ppocrv6_tiny.json): PPLCNetV4 tiny (simple stem, RepDWConv
#            three-branch token mixers, BN everywhere), Im2Seq, guided CTC head (dw 1x5 + 1x1 guide
#            layer, fc1 80, fc2), 6906 classes
#   v6small  PP-OCRv6 small (configs/rec_ppocrv6_small.json): PPLCNetV4 small (StemBlock with the
#            "SAME" 2x2 convs and max pool), LightSVTR neck (dims 120, depth 2, local kernel 7), CTC
#            fc, 18,710 classes
#   v6medium PP-OCRv6 medium (configs/rec_ppocrv6_medium.json): PPLCNetV4 medium (StemBlock 64/128,
#            128 -> 256 -> 512 -> 768), LightSVTR (dims 192, MLP x4), CTC fc, 18,710 classes, NRTR
#            width 512 (16 heads, FFN 2048)
#   v5server PP-OCRv5 server (configs/rec_ppocrv5_server.json): PPHGNetV2_B4 text_rec (StemBlock,
#            4 HG stages, the never-run classifier's parameters too), svtr neck from 2048 channels,
#            CTC fc, 18,385 classes, NRTR 384 guidance
#   v6tiny_ctc, v6small_ctc  the same CTC networks without the guidance branch
#            (configs/rec_ppocrv6_{tiny,small}_ctc.json)
# The v6 configs are MultiHead as PaddleOCR ships them, and ocrtrain's step trains both branches,
# so the v6 twins do too: the NRTR guidance branch (before_gtc Linear C->384 without bias, a
# 4-layer post-LN decoder, 12 heads, FFN 1536, embedding x sqrt(384) + sinusoid, dropout 0.1,
# teacher-forced over the batch's longest text + 1 positions, as PaddleOCR trains it) reads the
# backbone map, and the loss is CTC + cross-entropy (smoothing 0.1, padding masked), as
# models/svtr/{lcnetv4,multihead,nrtr} build it (facts checked against PaddleOCR's
# rec_lcnetv4.py and LightSVTR encoder). Each twin's trainable parameter count equals what `ocrtrain info --config CONFIG` prints (PARAMS below; checked
# before every PyTorch measurement, and against `ocrtrain info --json` when BUILD/ocrtrain sits
# beside --ocrtrain's executable; --check does only that).
#
# Each measurement runs in a child process of its own, so peak RSS is per measurement. With
# --ocrtrain BUILD/bench_train_cpu the two frameworks alternate in one session: every round runs
# ocrtrain's and PyTorch's step for each config and precision in turn, and the table gives
# medians over the rounds (the fair comparison on a shared machine).
#
#   python3 tools/torch_bench.py [--ocrtrain build/bench_train_cpu] [--configs v3,v4,v5,v6tiny,v6small]
#       [--precisions fp32,bf16,fp16] [--batch 32] [--threads 2] [--iters 5] [--warmup 2]
#       [--rounds 3] [--channels-last] [--torch-wait-policy ACTIVE] [--json FILE] [--check]
#
# (default configs v3,v4). docs/BENCHMARKS.md ("CPU mixed precision") has the commands and figures.
#
# Developer tool: nothing in the build or the tests needs Python (torch from PyPI).
import argparse, json, os, resource, statistics, subprocess, sys, time

CONFIGS = {"v3": "configs/rec_ppocrv3_en.json", "v4": "configs/rec_ppocrv4_ch.json",
           "v5": "configs/rec_ppocrv5_mobile.json", "v6tiny": "configs/rec_ppocrv6_tiny.json",
           "v6small": "configs/rec_ppocrv6_small.json", "v6tiny_ctc": "configs/rec_ppocrv6_tiny_ctc.json",
           "v6small_ctc": "configs/rec_ppocrv6_small_ctc.json", "v6medium": "configs/rec_ppocrv6_medium.json",
           "v5server": "configs/rec_ppocrv5_server.json"}
# Trainable parameters of each config as `ocrtrain info --config CONFIG` prints them (BN running
# statistics excluded; v6: the CTC branch and the NRTR guidance branch). Every twin must have
# exactly these: checked before each PyTorch measurement, and against `ocrtrain info --json`
# when the ocrtrain executable sits beside --ocrtrain's bench_train_cpu.
PARAMS = {"v3": 2215345, "v4": 6259405, "v5": 7682365, "v6tiny": 15944462, "v6small": 29270246,
          "v6tiny_ctc": 1109774, "v6small_ctc": 5284070, "v6medium": 55527798,
          "v5server": 51662017}
# ocrtrain's precision that matches each PyTorch autocast run (O1: low-precision compute,
# fp32 parameters; O2 has no PyTorch autocast twin and is listed on ocrtrain's side only).
OCR_PRECISIONS = {"fp32": ["fp32"], "bf16": ["bf16-o1", "bf16-o2"], "fp16": ["fp16-o1", "fp16-o2"]}


def build_model(name):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import math

    class ConvBN(nn.Module):
        def __init__(s, cin, cout, k, stride=1, groups=1, pad=None, act=None):
            super().__init__()
            if isinstance(k, int):
                k = (k, k)
            if pad is None:
                pad = ((k[0] - 1) // 2, (k[1] - 1) // 2)
            s.conv = nn.Conv2d(cin, cout, k, stride, pad, groups=groups, bias=False)
            s.bn = nn.BatchNorm2d(cout, momentum=0.1, eps=1e-5)
            s.act = act

        def forward(s, x):
            x = s.bn(s.conv(x))
            return s.act(x) if s.act is not None else x

    class SE(nn.Module):
        def __init__(s, c):
            super().__init__()
            s.c1 = nn.Conv2d(c, c // 4, 1)
            s.c2 = nn.Conv2d(c // 4, c, 1)

        def forward(s, x):
            p = F.adaptive_avg_pool2d(x, 1)
            return x * F.hardsigmoid(s.c2(F.relu(s.c1(p))))

    class MV1Enhance(nn.Module):  # scale 0.5, last_conv_stride (1, 2), avg pool 2x2
        def __init__(s):
            super().__init__()
            s.conv1 = ConvBN(3, 16, 3, 2, act=F.hardswish)
            # (in, dw kernel, stride, out, se)
            cfg = [(16, 3, 1, 32, 0), (32, 3, 1, 64, 0), (64, 3, 1, 64, 0), (64, 3, (2, 1), 128, 0),
                   (128, 3, 1, 128, 0), (128, 3, (2, 1), 256, 0)] + [(256, 5, 1, 256, 0)] * 5 + \
                  [(256, 5, (2, 1), 512, 1), (512, 5, (1, 2), 512, 1)]
            blocks = []
            for cin, k, st, cout, se in cfg:
                blocks += [ConvBN(cin, cin, k, st, groups=cin, act=F.hardswish)]
                if se:
                    blocks += [SE(cin)]
                blocks += [ConvBN(cin, cout, 1, act=F.hardswish)]
            s.blocks = nn.Sequential(*blocks)
            s.out_channels = 512

        def forward(s, x):
            return F.avg_pool2d(s.blocks(s.conv1(x)), 2, 2)

    class Affine(nn.Module):  # LearnableAffineBlock: y = s*x + b, scalars
        def __init__(s):
            super().__init__()
            s.s = nn.Parameter(torch.ones(1))
            s.b = nn.Parameter(torch.zeros(1))

        def forward(s, x):
            return s.s * x + s.b

    class RepLayer(nn.Module):  # LearnableRepLayer, training form, 4 kxk branches
        def __init__(s, cin, cout, k, stride, groups):
            super().__init__()
            s.identity = nn.BatchNorm2d(cin) if cin == cout and stride == 1 else None
            s.branches = nn.ModuleList([ConvBN(cin, cout, k, stride, groups) for _ in range(4)])
            s.conv_1x1 = ConvBN(cin, cout, 1, stride, groups) if k > 1 else None
            s.lab = Affine()
            s.act_lab = Affine()

        def forward(s, x):
            y = sum(b(x) for b in s.branches)
            if s.identity is not None:
                y = y + s.identity(x)
            if s.conv_1x1 is not None:
                y = y + s.conv_1x1(x)
            return s.act_lab(F.hardswish(s.lab(y)))

    class LCNetV3(nn.Module):  # scale 0.95: 256 -> 240, 512 -> 480
        def __init__(s):
            super().__init__()
            s.conv1 = ConvBN(3, 16, 3, 2)
            cfg = [(3, 16, 32, 1, 0), (3, 32, 64, 1, 0), (3, 64, 64, 1, 0), (3, 64, 128, (2, 1), 0),
                   (3, 128, 128, 1, 0), (3, 128, 240, (1, 2), 0)] + [(5, 240, 240, 1, 0)] * 4 + \
                  [(5, 240, 480, (2, 1), 1), (5, 480, 480, 1, 1), (5, 480, 480, (2, 1), 0), (5, 480, 480, 1, 0)]
            blocks = []
            for k, cin, cout, st, se in cfg:
                blocks += [RepLayer(cin, cin, k, st, cin)]
                if se:
                    blocks += [SE(cin)]
                blocks += [RepLayer(cin, cout, 1, 1, 1)]
            s.blocks = nn.Sequential(*blocks)
            s.out_channels = 480

        def forward(s, x):
            return F.adaptive_avg_pool2d(s.blocks(s.conv1(x)), (1, 40))

    class Block(nn.Module):  # pre-LN global mixer, 8 heads, MLP x mlp (2; v6 medium's LightSVTR 4), swish
        def __init__(s, d, mlp=2):
            super().__init__()
            s.n1 = nn.LayerNorm(d, eps=1e-5)
            s.qkv = nn.Linear(d, 3 * d)
            s.proj = nn.Linear(d, d)
            s.n2 = nn.LayerNorm(d, eps=1e-5)
            s.fc1 = nn.Linear(d, mlp * d)
            s.fc2 = nn.Linear(mlp * d, d)
            s.h = 8

        def forward(s, x):
            B, N, C = x.shape
            q, k, v = s.qkv(s.n1(x)).reshape(B, N, 3, s.h, C // s.h).permute(2, 0, 3, 1, 4)
            a = F.dropout(((q * (C // s.h) ** -0.5) @ k.transpose(-2, -1)).softmax(-1), 0.1, s.training)
            x = x + F.dropout(s.proj((a @ v).transpose(1, 2).reshape(B, N, C)), 0.1, s.training)
            m = s.fc2(F.dropout(F.silu(s.fc1(s.n2(x))), 0.1, s.training))
            return x + F.dropout(m, 0.1, s.training)

    class SVTRNeck(nn.Module):
        def __init__(s, cin, dims, k):
            super().__init__()
            pad = (k[0] // 2, k[1] // 2)
            s.conv1 = ConvBN(cin, cin // 8, k, pad=pad, act=F.silu)
            s.conv2 = ConvBN(cin // 8, 120, 1, act=F.silu)
            s.blocks = nn.ModuleList([Block(120) for _ in range(2)])
            s.norm = nn.LayerNorm(120, eps=1e-6)
            s.conv3 = ConvBN(120, cin, 1, act=F.silu)
            s.conv4 = ConvBN(2 * cin, cin // 8, k, pad=pad, act=F.silu)
            s.conv1x1 = ConvBN(cin // 8, dims, 1, act=F.silu)

        def forward(s, x):
            h = x
            z = s.conv2(s.conv1(x))
            B, C, H, W = z.shape
            z = z.flatten(2).transpose(1, 2)
            for b in s.blocks:
                z = b(z)
            z = s.norm(z).transpose(1, 2).reshape(B, C, H, W)
            z = s.conv1x1(s.conv4(torch.cat([h, s.conv3(z)], 1)))
            return z.squeeze(2).transpose(1, 2)  # (B, W, dims)

    # ---- PP-OCRv6: PPLCNetV4 (training form), LightSVTR neck, guided CTC head, NRTR guidance ----
    class ConvBN4(nn.Module):  # conv (no bias) + BN (+ act); explicit asymmetric zero pad ("SAME", even k)
        def __init__(s, cin, cout, k, stride=1, groups=1, act=None, same_even=False, bn_zero=False):
            super().__init__()
            s.same_even = same_even
            s.conv = nn.Conv2d(cin, cout, k, stride, 0 if same_even else (k - 1) // 2, groups=groups, bias=False)
            s.bn = nn.BatchNorm2d(cout)
            if bn_zero:
                nn.init.zeros_(s.bn.weight)
            s.act = act

        def forward(s, x):
            if s.same_even:
                x = F.pad(x, (0, 1, 0, 1))
            x = s.bn(s.conv(x))
            return s.act(x) if s.act is not None else x

    class RepDW(nn.Module):  # bn(dw kxk conv-BN(x) + dw 1x1 conv(x) + x)
        def __init__(s, c, k):
            super().__init__()
            s.conv = ConvBN4(c, c, k, groups=c)
            s.conv1 = nn.Conv2d(c, c, 1, groups=c, bias=False)
            s.bn = nn.BatchNorm2d(c)

        def forward(s, x):
            return s.bn(s.conv(x) + s.conv1(x) + x)

    class V4Block(nn.Module):  # token mixer (RepDW or strided dw conv-BN) [SE], expand x2 GELU, compress
        def __init__(s, k, cin, cout, stride, se):
            super().__init__()
            s.residual = cin == cout and stride == 1
            s.mixer = RepDW(cin, k) if s.residual else ConvBN4(cin, cin, k, (stride, 1), groups=cin)
            s.se = SE(cin) if se else None
            s.expand = ConvBN4(cin, 2 * cin, 1, act=F.gelu)
            s.compress = ConvBN4(2 * cin, cout, 1, bn_zero=s.residual)

        def forward(s, x):
            t = s.mixer(x)
            if s.se is not None:
                t = s.se(t)
            o = s.compress(s.expand(t))
            return t + o if s.residual else o

    V4_REC = {  # stem (mid, out, branch), then blocks2..blocks5 as (k, in, out, stride h, se)
        "tiny": ((24, 48, False), [(3, 48, 48, 1, 1), (3, 48, 48, 1, 0), (3, 48, 96, 2, 0), (3, 96, 96, 1, 1),
                                   (3, 96, 96, 1, 0), (3, 96, 160, 2, 0), (3, 160, 160, 1, 1), (3, 160, 160, 1, 0),
                                   (3, 160, 160, 1, 0)]),
        "small": ((48, 96, True), [(3, 96, 96, 1, 1), (3, 96, 96, 1, 0), (3, 96, 96, 1, 0), (3, 96, 192, 2, 0)] +
                  [(3, 192, 192, 1, 1), (3, 192, 192, 1, 0)] * 3 + [(3, 192, 384, 2, 0), (3, 384, 384, 1, 1),
                                                                  (3, 384, 384, 1, 0)]),
        "medium": ((64, 128, True), [(3, 128, 128, 1, 1), (3, 128, 256, 1, 0), (3, 256, 256, 1, 0),
                                     (3, 256, 256, 1, 1), (3, 256, 512, 2, 0)] +
                   [(3, 512, 512, 1, 1), (3, 512, 512, 1, 0)] * 3 + [(3, 512, 768, 2, 0), (3, 768, 768, 1, 1),
                                                                   (3, 768, 768, 1, 0)]),
    }

    class LCNetV4(nn.Module):
        def __init__(s, size):
            super().__init__()
            (mid, out, branch), blocks = V4_REC[size]
            s.branch = branch
            if branch:  # StemBlock: ConvBNAct (ReLU) layers, 2x2 convs and 2x2/1 max pool padded "SAME"
                s.stem1 = ConvBN4(3, mid, 3, 2, act=F.relu)
                s.stem2a = ConvBN4(mid, mid // 2, 2, act=F.relu, same_even=True)
                s.stem2b = ConvBN4(mid // 2, mid, 2, act=F.relu, same_even=True)
                s.stem3 = ConvBN4(2 * mid, mid, 3, 2, act=F.relu)
                s.stem4 = ConvBN4(mid, out, 1, act=F.relu)
            else:  # Conv2D_BN, GELU, Conv2D_BN
                s.stem = nn.Sequential(ConvBN4(3, mid, 3, 2, act=F.gelu), ConvBN4(mid, out, 3, 2))
            s.blocks = nn.Sequential(*[V4Block(*b) for b in blocks])
            s.out_channels = blocks[-1][2]

        def forward(s, x):
            if s.branch:
                x = s.stem1(x)
                x2 = s.stem2b(s.stem2a(x))
                x1 = F.max_pool2d(F.pad(x, (0, 1, 0, 1), value=float("-inf")), 2, 1)
                x = s.stem4(s.stem3(torch.cat([x1, x2], 1)))
            else:
                x = s.stem(x)
            return F.adaptive_avg_pool2d(s.blocks(x), (1, 40))

    class CtcGuide(nn.Module):  # tiny's guide layer on the (B, C, 1, T) map: dw 1x5, BN, hswish, 1x1, BN, hswish
        def __init__(s, c):
            super().__init__()
            s.dw = ConvBN(c, c, (1, 5), groups=c, act=F.hardswish)
            s.pw = ConvBN(c, c, 1, act=F.hardswish)

        def forward(s, x):
            return s.pw(s.dw(x))

    class LightSVTR(nn.Module):  # z = reduce(x); z = z + local(z); norm(blocks(z)) + skip(x)
        def __init__(s, cin, dims, local_kernel, mlp=2):
            super().__init__()
            s.reduce = ConvBN(cin, dims, 1, act=F.silu)
            s.local = ConvBN(dims, dims, (1, local_kernel), groups=dims, act=F.silu)
            s.blocks = nn.ModuleList([Block(dims, mlp) for _ in range(2)])
            s.norm = nn.LayerNorm(dims, eps=1e-6)
            s.skip = ConvBN(cin, dims, 1, act=F.silu)

        def forward(s, x):
            z = s.reduce(x)
            z = (z + s.local(z)).squeeze(2).transpose(1, 2)  # (B, W, dims)
            for b in s.blocks:
                z = b(z)
            return s.norm(z) + s.skip(x).squeeze(2).transpose(1, 2)

    class NrtrLayer(nn.Module):  # post-LN decoder layer: causal self-attn, cross-attn, ReLU MLP x4
        def __init__(s, d):
            super().__init__()
            s.h = d // 32
            s.qkv, s.self_out, s.n1 = nn.Linear(d, 3 * d), nn.Linear(d, d), nn.LayerNorm(d)
            s.q, s.kv, s.cross_out, s.n2 = nn.Linear(d, d), nn.Linear(d, 2 * d), nn.Linear(d, d), nn.LayerNorm(d)
            s.fc1, s.fc2, s.n3 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d), nn.LayerNorm(d)

        def forward(s, t, mem, mask):
            B, T, C = t.shape
            h, dh = s.h, C // s.h
            dr = lambda v: F.dropout(v, 0.1, s.training)
            q, k, v = s.qkv(t).reshape(B, T, 3, h, dh).permute(2, 0, 3, 1, 4)
            a = ((q * dh ** -0.5) @ k.transpose(-2, -1) + mask).softmax(-1)
            t = s.n1(t + dr(s.self_out((a @ v).transpose(1, 2).reshape(B, T, C))))
            q = s.q(t).reshape(B, T, h, dh).transpose(1, 2)
            k, v = s.kv(mem).reshape(B, mem.shape[1], 2, h, dh).permute(2, 0, 3, 1, 4)
            a = ((q * dh ** -0.5) @ k.transpose(-2, -1)).softmax(-1)
            t = s.n2(t + dr(s.cross_out((a @ v).transpose(1, 2).reshape(B, T, C))))
            return s.n3(t + dr(dr(s.fc2(dr(F.relu(s.fc1(t)))))))

    class NrtrGuide(nn.Module):  # MultiHead's NRTR branch: before_gtc Linear (no bias), 4-layer decoder
        def __init__(s, cin, vocab, d=384, layers=4, steps=24):
            super().__init__()
            s.before = nn.Linear(cin, d, bias=False)
            s.embedding = nn.Embedding(vocab, d)
            s.layers = nn.ModuleList([NrtrLayer(d) for _ in range(layers)])
            s.prj = nn.Linear(d, vocab, bias=False)
            s.d = d
            pos = torch.arange(steps, dtype=torch.float32)[:, None]
            div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
            pe = torch.zeros(steps, d)
            pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
            s.register_buffer("pe", pe[None])
            s.register_buffer("mask", torch.full((steps, steps), float("-inf")).triu(1))

        def forward(s, fmap, tokens):  # fmap (B, C, 1, W), tokens (B, T), T <= steps
            T = tokens.shape[1]
            mem = s.before(fmap.flatten(2).transpose(1, 2))
            t = F.dropout(s.embedding(tokens) * s.d ** 0.5 + s.pe[:, :T], 0.1, s.training)
            for l in s.layers:
                t = l(t, mem, s.mask[:T, :T])
            return s.prj(t)

    # ---- PP-OCRv5 server: PPHGNetV2_B4 (text_rec), as models/svtr/pphgnetv2.c builds it ----
    class CBA(nn.Module):  # ConvBNAct: conv (no bias) + BN (+ ReLU); pad (k-1)/2, or "SAME" 0/1 for k = 2
        def __init__(s, cin, cout, k, stride=1, groups=1, act=True):
            super().__init__()
            s.same = k == 2
            s.conv = nn.Conv2d(cin, cout, k, stride, 0 if s.same else (k - 1) // 2, groups=groups, bias=False)
            s.bn = nn.BatchNorm2d(cout)
            s.act = act

        def forward(s, x):
            if s.same:
                x = F.pad(x, (0, 1, 0, 1))
            x = s.bn(s.conv(x))
            return F.relu(x) if s.act else x

    class HgBlock(nn.Module):  # layers (3x3 CBA, or light: 1x1 CB + dw kxk CBA) chained, concat, squeeze, excite
        def __init__(s, cin, mid, cout, k, n, light, identity):
            super().__init__()
            s.layers = nn.ModuleList()
            for i in range(n):
                c = cin if i == 0 else mid
                s.layers.append(nn.Sequential(CBA(c, mid, 1, act=False), CBA(mid, mid, k, groups=mid)) if light
                                else CBA(c, mid, k))
            s.squeeze = CBA(cin + n * mid, cout // 2, 1)
            s.excite = CBA(cout // 2, cout, 1)
            s.identity = identity

        def forward(s, x):
            outs = [x]
            for l in s.layers:
                outs.append(l(outs[-1]))
            y = s.excite(s.squeeze(torch.cat(outs, 1)))
            return y + x if s.identity else y

    class HGNetV2B4(nn.Module):
        # stage_config_rec: in, mid, out, blocks, light, kernel, layers, downsample stride (h, w)
        STAGES = [(48, 48, 128, 1, False, 3, 6, (2, 1)), (128, 96, 512, 1, False, 3, 6, (1, 2)),
                  (512, 192, 1024, 3, True, 5, 6, (2, 1)), (1024, 384, 2048, 1, True, 5, 6, (2, 1))]

        def __init__(s):
            super().__init__()
            s.stem1 = CBA(3, 32, 3, 2)
            s.stem2a, s.stem2b = CBA(32, 16, 2), CBA(16, 32, 2)
            s.stem3, s.stem4 = CBA(64, 32, 3), CBA(32, 48, 1)
            s.stages = nn.ModuleList()
            for cin, mid, cout, nb, light, k, n, st in s.STAGES:
                s.stages.append(nn.Sequential(CBA(cin, cin, 3, st, groups=cin, act=False),
                                              *[HgBlock(cin if j == 0 else cout, mid, cout, k, n, light, j > 0)
                                                for j in range(nb)]))
            # The classifier PaddleOCR builds and never runs in the recognition form (parameters only).
            s.last_conv = nn.Conv2d(2048, 2048, 1, bias=False)
            s.fc = nn.Linear(2048, 1000)
            s.out_channels = 2048

        def forward(s, x):
            x = s.stem1(x)
            x2 = s.stem2b(s.stem2a(x))
            x1 = F.max_pool2d(F.pad(x, (0, 1, 0, 1), value=float("-inf")), 2, 1)
            x = s.stem4(s.stem3(torch.cat([x1, x2], 1)))
            for st in s.stages:
                x = st(x)
            return F.adaptive_avg_pool2d(x, (1, 40))

    class Net(nn.Module):
        def __init__(s, v):
            super().__init__()
            s.guide = None
            if v == "v5server":  # PPHGNetV2_B4 + svtr neck (dims 120, 1x3) + CTC fc; NRTR 384 guidance
                s.kind, s.classes = "svtr", 18385
                s.backbone = HGNetV2B4()
                s.neck = SVTRNeck(2048, 120, (1, 3))
                s.head = nn.Linear(120, s.classes)
                s.guide = NrtrGuide(2048, s.classes + 4)
                return
            if v.startswith("v6"):
                size = v[2:].split("_")[0]
                s.kind = "v6" + size
                s.backbone = LCNetV4(size)
                c = s.backbone.out_channels
                if size == "tiny":  # Im2Seq, guide layer, CTC fc1 (mid 80) + fc2
                    s.classes = 6906
                    s.neck = CtcGuide(c)
                    s.head = nn.Sequential(nn.Linear(c, 80), nn.Linear(80, s.classes))
                else:  # LightSVTR (small: dims 120, MLP x2; medium: 192, x4), local kernel 7, CTC fc
                    s.classes = 18710
                    dims, mlp = (192, 4) if size == "medium" else (120, 2)
                    s.neck = LightSVTR(c, dims, 7, mlp)
                    s.head = nn.Linear(dims, s.classes)
                if not v.endswith("_ctc"):  # MultiHead: the NRTR guidance branch (medium: width 512)
                    s.guide = NrtrGuide(c, s.classes + 4, d=512 if size == "medium" else 384)
                return
            s.kind = "svtr"
            if v == "v3":
                s.backbone, dims, k, classes = MV1Enhance(), 64, (3, 3), 97
            else:  # v4: 6625 classes; v5 (PP-OCRv5 mobile): the v4 network with 18,385
                s.backbone, dims, k, classes = LCNetV3(), 120, (1, 3), 6625 if v == "v4" else 18385
            s.neck = SVTRNeck(s.backbone.out_channels, dims, k)
            s.head = nn.Linear(dims, classes)
            s.classes = classes

        def forward(s, x, tokens=None):  # -> CTC logits (B, T, classes), guidance logits or None
            f = s.backbone(x)
            if s.kind == "svtr":
                g = s.guide(f, tokens) if s.guide is not None and tokens is not None else None
                return s.head(s.neck(f)), g
            if s.kind == "v6tiny":
                seq = s.neck(f).squeeze(2).transpose(1, 2)
            else:
                seq = s.neck(f)
            g = s.guide(f, tokens) if tokens is not None else None
            return s.head(seq), g

    return Net(name)


def peak_rss_mib():
    # VmHWM, this process's own peak. ru_maxrss after an exec keeps the parent's peak (Linux), and
    # the parent has built every twin, so it would put a floor of ~0.6 GiB under each child.
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def measure(a):
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(0)
    m = build_model(a.one).train()
    n = sum(p.numel() for p in m.parameters())
    if n != PARAMS[a.one]:
        sys.exit("twin %s has %d trainable parameters, ocrtrain's network %d" % (a.one, n, PARAMS[a.one]))
    B, L = a.batch, 10
    x = torch.rand(B, 3, 48, 320) * 2 - 1
    if a.channels_last:
        m = m.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    labels = torch.randint(1, m.classes, (B, L))
    tokens = targets = None
    if m.guide is not None:
        # MultiHead's NRTR labels from the CTC ids: [<s> = 2, c + 3 ..., </s> = 3, pad 0 ...] over
        # max_text_length 25. As PaddleOCR's Transformer.forward in training, the decoder reads
        # label_gtc[:, :1 + max(length)] and NRTRLoss trains it on label_gtc[:, 1:2 + max(length)].
        gtc = torch.zeros(B, 25, dtype=torch.long)
        gtc[:, 0], gtc[:, 1:L + 1], gtc[:, L + 1] = 2, labels + 3, 3
        T = L + 1  # every synthetic text has L characters
        tokens, targets = gtc[:, :T].contiguous(), gtc[:, 1:T + 1].contiguous()
    in_len = torch.full((B,), 40, dtype=torch.long)
    tgt_len = torch.full((B,), L, dtype=torch.long)
    opt = torch.optim.Adam(m.parameters(), lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=3e-5)
    scaler = torch.amp.GradScaler("cpu") if a.prec == "fp16" else None
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.prec)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
            logits, glogits = m(x, tokens)
        lp = F.log_softmax(logits.float(), -1).transpose(0, 1)  # CTC in fp32, (T, B, C)
        loss = F.ctc_loss(lp, labels, in_len, tgt_len, blank=0, reduction="sum", zero_infinity=True) / B
        if glogits is not None:  # NRTRLoss: cross-entropy, smoothing 0.1, padding masked, in fp32
            loss = loss + F.cross_entropy(glogits.float().flatten(0, 1), targets.flatten(), ignore_index=0,
                                          label_smoothing=0.1)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        return float(loss.detach())

    for _ in range(a.warmup):
        step()
    times = []
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(a.iters):
        ts = time.perf_counter()
        step()
        times.append(time.perf_counter() - ts)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss = peak_rss_mib()
    print("RESULT %.4f %.4f %.6f %.1f torch %s" % (B * a.iters / wall, B * a.iters / cpu, statistics.median(times),
                                                   rss, torch.__version__), flush=True)


def run_child(cmd, env=None):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            f = line.split()
            return {"sps": float(f[1]), "spc": float(f[2]), "step": float(f[3]), "rss": float(f[4]),
                    "what": " ".join(f[9 if "fp32:" in line else 5:])}
    sys.stderr.write("child failed: %s\n%s\n" % (" ".join(cmd), p.stderr[-2000:]))
    return None


def check_params(configs, ocrtrain_bench):
    """Builds each twin and compares its trainable parameters with PARAMS and, when BUILD/ocrtrain
    exists beside BUILD/bench_train_cpu, with `ocrtrain info --config CONFIG --json`. Exits on a
    mismatch."""
    info = os.path.join(os.path.dirname(os.path.abspath(ocrtrain_bench)), "ocrtrain") if ocrtrain_bench else None
    bad = 0
    for cfg in configs:
        n = sum(p.numel() for p in build_model(cfg).parameters())
        line = "params %-11s twin %10d  expected %10d" % (cfg, n, PARAMS[cfg])
        wrong = n != PARAMS[cfg]
        if info and os.access(info, os.X_OK):
            p = subprocess.run([info, "info", "--config", CONFIGS[cfg], "--json"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
            got = json.loads(p.stdout)["params_total"] if p.returncode == 0 else None
            line += "  ocrtrain info %s" % got
            wrong = wrong or got != n
        print(line + ("  MISMATCH" if wrong else ""), flush=True)
        bad += wrong
    if bad:
        sys.exit("torch_bench: a twin's parameter count differs from ocrtrain's network")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ocrtrain", help="bench_train_cpu executable: alternate ocrtrain and PyTorch")
    ap.add_argument("--configs", default="v3,v4")
    ap.add_argument("--precisions", default="fp32,bf16,fp16")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--check", action="store_true", help="only compare the twins' parameter counts with ocrtrain's")
    ap.add_argument("--one")
    ap.add_argument("--prec")
    ap.add_argument("--torch-wait-policy", choices=["PASSIVE", "ACTIVE"],
                    help="OMP_WAIT_POLICY for the PyTorch runs only (ACTIVE is libgomp's and so PyTorch's own "
                         "default), so that each framework runs at its default in one session")
    a = ap.parse_args()
    # PyTorch's idle OpenMP workers sleep (PASSIVE) unless --torch-wait-policy says otherwise or
    # OMP_WAIT_POLICY is set: on a shared or oversubscribed machine a spinning worker whose partner
    # is descheduled burns CPU time that is not the step's. ocrtrain's runs get the environment as
    # it is, so its own runtime defaults apply (training/runtime.h) unless the caller set them.
    torch_policy = a.torch_wait_policy or os.environ.get("OMP_WAIT_POLICY") or "PASSIVE"
    if a.one:  # a PyTorch child run directly (the parent passes OMP_WAIT_POLICY itself)
        os.environ.setdefault("OMP_WAIT_POLICY", torch_policy)
    if a.one:
        measure(a)
        return
    unknown = [c for c in a.configs.split(",") if c not in CONFIGS]
    if unknown:
        sys.exit("torch_bench: unknown config %s (known: %s)" % (",".join(unknown), ",".join(CONFIGS)))
    check_params(a.configs.split(","), a.ocrtrain)
    if a.check:
        return
    cells = {}
    order = []
    with open("/proc/loadavg") as f:
        print("load average at start:", f.read().strip())
    for r in range(a.rounds):
        for cfg in a.configs.split(","):
            for prec in a.precisions.split(","):
                runs = [("torch", prec, [sys.executable, __file__, "--one", cfg, "--prec", prec, "--batch",
                                         str(a.batch), "--threads", str(a.threads), "--iters", str(a.iters),
                                         "--warmup", str(a.warmup)] + (["--channels-last"] if a.channels_last else []))]
                if a.ocrtrain:
                    # ocrtrain's precisions (O1, O2) take turns at running first: on a Zen 4 guest,
                    # with O1 always right after PyTorch's run, O1 measured 12-18 % faster than O2
                    # on v6 tiny CTC in every round, while the two alternated on their own agreed
                    # within 2 %.
                    ops = OCR_PRECISIONS[prec] if r % 2 == 0 else OCR_PRECISIONS[prec][::-1]
                    for op in ops:
                        runs.append(("ocrtrain", op, [a.ocrtrain, "--one", CONFIGS[cfg], op, "--batch", str(a.batch),
                                                      "--threads", str(a.threads), "--iters", str(a.iters),
                                                      "--warmup", str(a.warmup)]))
                for who, p, cmd in runs:
                    env = dict(os.environ, OMP_WAIT_POLICY=torch_policy) if who == "torch" else None
                    res = run_child(cmd, env)
                    key = (cfg, who, p)
                    if key not in cells:
                        cells[key] = []
                        order.append(key)
                    if res:
                        cells[key].append(res)
                    sys.stderr.write("round %d %s %s %s: %s\n" % (r + 1, cfg, who, p,
                                                                  "%.2f samples/s" % res["sps"] if res else "failed"))
    with open("/proc/loadavg") as f:
        print("load average at end:", f.read().strip())
    print("%-11s %-9s %-8s %10s %11s %9s %9s  %s" % ("net", "framework", "prec", "samples/s", "per CPU-s", "step ms",
                                                    "RSS MiB", "build"))
    out = []
    for key in order:
        v = cells[key]
        if not v:
            print("%-11s %-9s %-8s failed" % key)
            continue
        med = {k: statistics.median(x[k] for x in v) for k in ("sps", "spc", "step", "rss")}
        print("%-11s %-9s %-8s %10.2f %11.2f %9.1f %9.0f  %s" % (key + (med["sps"], med["spc"], 1e3 * med["step"],
                                                                     med["rss"], v[-1]["what"])))
        out.append(dict(net=key[0], framework=key[1], precision=key[2], rounds=len(v), batch=a.batch,
                        threads=a.threads, channels_last=a.channels_last, **med))
    if a.json:
        with open(a.json, "w") as f:
            for o in out:
                f.write(json.dumps(o) + "\n")


if __name__ == "__main__":
    main()

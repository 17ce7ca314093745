#!/usr/bin/env python3
# The PyTorch side of bench/bench_train_cpu.c: PP-OCRv3 en (MobileNetV1Enhance 0.5 + SVTR neck
# dims 64 + CTC, 97 classes) and PP-OCRv4 ch (PPLCNetV3 0.95 in its training form with the rep
# branches + SVTR neck dims 120 + CTC, 6625 classes) written from the shapes in
# ../shared/reference/paddleocr_rec_spec.md, trained one full step at a time (forward, CTC,
# backward, Adam with L2 3e-5) on synthetic batches: FP32, BF16 autocast and FP16 autocast
# (with a GradScaler) on the CPU. Weights are random: the time of a step does not depend on them.
#
# Each measurement runs in a child process of its own, so peak RSS is per measurement. With
# --ocrtrain BUILD/bench_train_cpu the two frameworks alternate in one session: every round runs
# ocrtrain's and PyTorch's step for each config and precision in turn, and the table gives
# medians over the rounds (the fair comparison on a shared machine).
#
#   python3 tools/torch_bench.py [--ocrtrain build/bench_train_cpu] [--configs v3,v4]
#       [--precisions fp32,bf16,fp16] [--batch 32] [--threads 2] [--iters 5] [--warmup 2]
#       [--rounds 3] [--channels-last] [--json FILE]
#
# Developer tool: nothing in the build or the tests needs Python (torch from PyPI).
import argparse, json, os, resource, statistics, subprocess, sys, time

CONFIGS = {"v3": "configs/rec_ppocrv3_en.json", "v4": "configs/rec_ppocrv4_ch.json"}
# ocrtrain's precision that matches each PyTorch autocast run (O1: low-precision compute,
# fp32 parameters; O2 has no PyTorch autocast twin and is listed on ocrtrain's side only).
OCR_PRECISIONS = {"fp32": ["fp32"], "bf16": ["bf16-o1", "bf16-o2"], "fp16": ["fp16-o1", "fp16-o2"]}


def build_model(name):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

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

    class Block(nn.Module):  # pre-LN global mixer, 8 heads, MLP x2, swish
        def __init__(s, d):
            super().__init__()
            s.n1 = nn.LayerNorm(d, eps=1e-5)
            s.qkv = nn.Linear(d, 3 * d)
            s.proj = nn.Linear(d, d)
            s.n2 = nn.LayerNorm(d, eps=1e-5)
            s.fc1 = nn.Linear(d, 2 * d)
            s.fc2 = nn.Linear(2 * d, d)
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

    class Net(nn.Module):
        def __init__(s, v):
            super().__init__()
            if v == "v3":
                s.backbone, dims, k, classes = MV1Enhance(), 64, (3, 3), 97
            else:
                s.backbone, dims, k, classes = LCNetV3(), 120, (1, 3), 6625
            s.neck = SVTRNeck(s.backbone.out_channels, dims, k)
            s.head = nn.Linear(dims, classes)
            s.classes = classes

        def forward(s, x):
            return s.head(s.neck(s.backbone(x)))

    return Net(name)


def measure(a):
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(0)
    m = build_model(a.one).train()
    B, L = a.batch, 10
    x = torch.rand(B, 3, 48, 320) * 2 - 1
    if a.channels_last:
        m = m.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    labels = torch.randint(1, m.classes, (B, L))
    in_len = torch.full((B,), 40, dtype=torch.long)
    tgt_len = torch.full((B,), L, dtype=torch.long)
    opt = torch.optim.Adam(m.parameters(), lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=3e-5)
    scaler = torch.amp.GradScaler("cpu") if a.prec == "fp16" else None
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.prec)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
            logits = m(x)
        lp = F.log_softmax(logits.float(), -1).transpose(0, 1)  # CTC in fp32, (T, B, C)
        loss = F.ctc_loss(lp, labels, in_len, tgt_len, blank=0, reduction="sum", zero_infinity=True) / B
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        return float(loss)

    for _ in range(a.warmup):
        step()
    times = []
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(a.iters):
        ts = time.perf_counter()
        step()
        times.append(time.perf_counter() - ts)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
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
    ap.add_argument("--one")
    ap.add_argument("--prec")
    ap.add_argument("--torch-wait-policy", choices=["PASSIVE", "ACTIVE"],
                    help="OMP_WAIT_POLICY for the PyTorch runs only (ACTIVE is libgomp's and so PyTorch's own "
                         "default), so that each framework runs at its default in one session")
    a = ap.parse_args()
    # Idle OpenMP workers sleep instead of spinning, as ocrtrain's own runtime defaults have them
    # (training/runtime.h): on a shared or oversubscribed machine a spinning worker whose partner is
    # descheduled burns CPU time that is not the step's. Set it in the environment to override.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if a.one:
        measure(a)
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
                    for op in OCR_PRECISIONS[prec]:
                        runs.append(("ocrtrain", op, [a.ocrtrain, "--one", CONFIGS[cfg], op, "--batch", str(a.batch),
                                                      "--threads", str(a.threads), "--iters", str(a.iters),
                                                      "--warmup", str(a.warmup)]))
                for who, p, cmd in runs:
                    env = None
                    if who == "torch" and a.torch_wait_policy:
                        env = dict(os.environ, OMP_WAIT_POLICY=a.torch_wait_policy)
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
    print("%-4s %-9s %-8s %10s %11s %9s %9s  %s" % ("net", "framework", "prec", "samples/s", "per CPU-s", "step ms",
                                                    "RSS MiB", "build"))
    out = []
    for key in order:
        v = cells[key]
        if not v:
            print("%-4s %-9s %-8s failed" % key)
            continue
        med = {k: statistics.median(x[k] for x in v) for k in ("sps", "spc", "step", "rss")}
        print("%-4s %-9s %-8s %10.2f %11.2f %9.1f %9.0f  %s" % (key + (med["sps"], med["spc"], 1e3 * med["step"],
                                                                     med["rss"], v[-1]["what"])))
        out.append(dict(net=key[0], framework=key[1], precision=key[2], rounds=len(v), batch=a.batch,
                        threads=a.threads, channels_last=a.channels_last, **med))
    if a.json:
        with open(a.json, "w") as f:
            for o in out:
                f.write(json.dumps(o) + "\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Times cuDNN (through PyTorch) on the layers of `layoutkit conv bench`, in NCHW and NHWC
(channels_last), f16 with tensor cores and f32 without them (TF32 off), and prints a Markdown
table: TFLOP/s (FLOP = 2 x MACs) and the minimum bytes each version moves (input, filter and
output read or written once).

The layer list comes from `layoutkit conv bench --list --json`, so both tools time the same
layers. cuDNN picks its algorithm per layer and layout (torch.backends.cudnn.benchmark = True);
times are CUDA events around 10 back-to-back convolutions (divided by 10), median of R after
warm-up.

With --ours it first runs `layoutkit conv bench --device cuda` (our tensor-core kernel, NHWC
f16, the same timing method) and adds its TFLOP/s and the ratio to cuDNN's NHWC.

Usage: bench/torch_conv_bench.py PATH/TO/layoutkit [--batch 64] [--repeats 20] [--filter 3x3] [--ours]
"""
import argparse
import json
import subprocess

import torch
import torch.nn.functional as F


def timed(fn, repeats, launches=10):
    """Median over `repeats` of (CUDA-event time around `launches` back-to-back calls) / launches:
    many layers run in tens of microseconds, where one launch per event pair would mostly time
    the launch gap."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(launches):
            fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1e3 / launches)
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("layoutkit")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--filter", default=None)
    ap.add_argument("--ours", action="store_true",
                    help="also run `layoutkit conv bench --device cuda` first, same GPU: f16 in "
                         "NHWC, NCHW and NC/32HW32, and i8 in NC/32HW32")
    args = ap.parse_args()
    cmd = [args.layoutkit, "conv", "bench", "--list", "--json"]
    if args.filter:
        cmd += ["--filter", args.filter]
    layers = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["layers"]
    ours, kernels = {}, {}
    if args.ours:
        cmd_ours = [args.layoutkit, "conv", "bench", "--device", "cuda", "--batch", str(args.batch),
                    "--repeats", str(args.repeats), "--types", "f16,i8", "--json"]
        if args.filter:
            cmd_ours += ["--filter", args.filter]
        doc = json.loads(subprocess.run(cmd_ours, check=True, capture_output=True, text=True).stdout)
        ours = {(r["layer"], r["layout"], r["dtype"]): r.get("tflops") for r in doc["results"]}
        kernels = {(r["layer"], r["layout"], r["dtype"]): r.get("kernel", "-") for r in doc["results"]}
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    print(f"GPU: {torch.cuda.get_device_name(0)}, PyTorch {torch.__version__}, cuDNN "
          f"{torch.backends.cudnn.version()}, batch {args.batch}\n")
    print("| layer | type | cuDNN NCHW TFLOP/s | cuDNN NHWC TFLOP/s | NHWC / NCHW | MiB moved "
          "| layoutkit NHWC | layoutkit NCHW | layoutkit NC/32HW32 | layoutkit NC/32HW32 i8 (TOPS) "
          "| layoutkit NHWC / cuDNN NHWC | our NHWC f16 kernel |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for l in layers:
        n, c, hw, o, k = args.batch, l["c"], l["hw"], l["o"], l["k"]
        oh = (hw + 2 * l["padding"] - k) // l["stride"] + 1
        flop = 2.0 * n * o * oh * oh * c * k * k
        for dtype in (torch.float16, torch.float32):
            x = torch.randn(n, c, hw, hw, device=dev, dtype=dtype)
            w = torch.randn(o, c, k, k, device=dev, dtype=dtype)
            res = {}
            for fmt, mf in (("NCHW", torch.contiguous_format), ("NHWC", torch.channels_last)):
                xf, wf = x.contiguous(memory_format=mf), w.contiguous(memory_format=mf)
                t = timed(lambda: F.conv2d(xf, wf, stride=l["stride"], padding=l["padding"]), args.repeats)
                res[fmt] = flop / t / 1e12
            size = x.element_size()
            moved = (n * c * hw * hw + o * c * k * k + n * o * oh * oh) * size / 2**20
            name = "f16" if dtype == torch.float16 else "f32"
            def our(layout, t="f16"):
                v = ours.get((l["name"], layout, t)) if dtype == torch.float16 else None
                return f"{v:.1f}" if v else "-"
            lk = ours.get((l["name"], "NHWC", "f16")) if dtype == torch.float16 else None
            ratio = f"{lk / res['NHWC']:.0%}" if lk else "-"
            kernel = kernels.get((l["name"], "NHWC", "f16"), "-") if dtype == torch.float16 else "-"
            lk_cols = (f"{our('NHWC')} | {our('NCHW')} | {our('NC/32HW32')} | "
                       f"{our('NC/32HW32', 'i8')} | {ratio} | {kernel}")
            print(f"| {l['name']} | {name} | {res['NCHW']:.1f} | {res['NHWC']:.1f} | "
                  f"{res['NHWC'] / res['NCHW']:.2f} | {moved:.0f} | {lk_cols} |", flush=True)
            del x, w


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Times PyTorch and `layoutkit bench --device cuda` on the same conversions, in the same run,
on the same GPU, and prints a Markdown table.

PyTorch does each conversion the way its users do: `x.contiguous(memory_format=channels_last)`
for NCHW -> NHWC, `permute(...).contiguous()` for NHWC -> NCHW, view + permute + contiguous for
the blocked layouts, `F.pad` first where the layout pads. Times are CUDA events around each op,
median of R repetitions after warm-up; bandwidth counts bytes read + written. The device copy
(`y.copy_(x)`) of the same number of bytes is the ceiling.

Usage: bench/torch_bench.py PATH/TO/layoutkit [--repeats R]
"""
import argparse
import json
import subprocess
import sys

import torch
import torch.nn.functional as F


def timed(fn, repeats):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    times.sort()
    return times[len(times) // 2]


def torch_ops(x):
    n, c, h, w = x.shape
    return {
        "NCHW->NHWC": lambda: x.contiguous(memory_format=torch.channels_last),
        "NHWC->NCHW": lambda: x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2).contiguous(),
        "NCHW->NCHW32c": lambda: x.view(n, c // 32, 32, h, w).permute(0, 1, 3, 4, 2).contiguous(),
        "NCHW->kHWC8": lambda: F.pad(x, (0, 0, 0, 0, 0, (-c) % 8)).permute(0, 2, 3, 1).contiguous(),
    }


# Every tensor is 256 MiB or more in f16 (issue 6's goal size).
SET = [
    # (conversion, layoutkit from, to, dims)
    ("NCHW->NHWC", "NCHW", "NHWC", "N=256,C=256,H=56,W=56"),
    ("NHWC->NCHW", "NHWC", "NCHW", "N=256,C=256,H=56,W=56"),
    ("NCHW->NCHW32c", "NCHW", "NCHW32c", "N=256,C=256,H=56,W=56"),
    ("NCHW->kHWC8", "NCHW", "kHWC8", "N=64,C=3,H=1024,W=1024"),
    ("OIHW->OIHW16i16o", "OIHW", "OIHW16i16o", "O=4096,I=4096,H=3,W=3"),
    ("NHWC->mace:in_out_channel", "NHWC", "mace:in_out_channel", "N=256,H=56,W=56,C=250"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("layoutkit")
    ap.add_argument("--repeats", type=int, default=50)
    args = ap.parse_args()
    rows = []
    jobs = [(t, t) for t in ["f32", "f16"]] + [("f32", "i8")]
    for st, dt in jobs:
        for conv, src, dst, dims in SET:
            if dt == "i8" and conv != "NCHW->NCHW32c":
                continue
            d = dict(kv.split("=") for kv in dims.split(","))
            tt = {"f32": torch.float32, "f16": torch.float16}[st]
            torch_gbps = None
            if conv in ("NCHW->NHWC", "NHWC->NCHW", "NCHW->NCHW32c", "NCHW->kHWC8"):
                x = torch.randn(int(d["N"]), int(d["C"]), int(d["H"]), int(d["W"]), device="cuda", dtype=tt)
                op = torch_ops(x)[conv]
                if conv == "NHWC->NCHW":
                    xs = x.permute(0, 2, 3, 1).contiguous()
                    op = lambda xs=xs: xs.permute(0, 3, 1, 2).contiguous()
                if dt == "i8":
                    base = op
                    op = lambda base=base: torch.clamp(torch.round(base() / 0.05), -128, 127).to(torch.int8)
                y = op()
                secs = timed(op, args.repeats)
                torch_gbps = (x.numel() * x.element_size() + y.numel() * y.element_size()) / secs / 1e9
            elif conv == "OIHW->OIHW16i16o":
                o, i = int(d["O"]), int(d["I"])
                x = torch.randn(o, i, 3, 3, device="cuda", dtype=tt)
                op = lambda: x.view(o // 16, 16, i // 16, 16, 3, 3).permute(0, 2, 4, 5, 3, 1).contiguous()
                y = op()
                secs = timed(op, args.repeats)
                torch_gbps = (x.numel() * x.element_size() * 2) / secs / 1e9
            else:  # NHWC -> mace:in_out_channel: pad C to 4, then [N, H, C/4, W, 4]
                n, h, w, c = int(d["N"]), int(d["H"]), int(d["W"]), int(d["C"])
                x = torch.randn(n, h, w, c, device="cuda", dtype=tt)
                cp = c + (-c) % 4
                op = lambda: F.pad(x, (0, cp - c)).view(n, h, w, cp // 4, 4).permute(0, 1, 3, 2, 4).contiguous()
                y = op()
                secs = timed(op, args.repeats)
                torch_gbps = (x.numel() * x.element_size() + y.numel() * y.element_size()) / secs / 1e9
            out = subprocess.run(
                [args.layoutkit, "bench", "--device", "cuda", "--from", src, "--to", dst, "--dims", dims,
                 "--dtype", st, "--to-dtype", dt, "--repeats", str(args.repeats), "--json"],
                capture_output=True, text=True)
            if out.returncode != 0:
                print(out.stderr, file=sys.stderr)
                continue
            lk = json.loads(out.stdout)
            rows.append((st if st == dt else f"{st}>{dt}", conv, dims, lk["bytes_moved"] / 2 / 2**20,
                         lk["gbps"], lk["copy_gbps"], lk["ratio_to_copy"], torch_gbps))
            print(f"{st}>{dt} {conv}: layoutkit {lk['gbps']:.0f} GB/s ({100 * lk['ratio_to_copy']:.0f}% of copy), "
                  f"torch {torch_gbps:.0f} GB/s", file=sys.stderr)
    print(f"GPU: {torch.cuda.get_device_name()}, PyTorch {torch.__version__}")
    print()
    print("| type | conversion | dims | MiB | layoutkit GB/s | copy GB/s | layoutkit / copy | PyTorch GB/s | layoutkit / PyTorch |")
    print("|---|---|---|---|---|---|---|---|---|")
    for t, conv, dims, mib, g, c, r, p in rows:
        print(f"| {t} | {conv} | {dims} | {mib:.0f} | {g:.0f} | {c:.0f} | {100 * r:.0f}% | {p:.0f} | {g / p:.2f}x |")


if __name__ == "__main__":
    main()

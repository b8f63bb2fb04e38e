#!/usr/bin/env python3
"""cuDNN's kernels on given layers: for each layer and batch, the layout cuDNN runs fastest
(NCHW or NHWC, benchmark mode, f16; timed as bench/torch_conv_bench.py does: 10 launches in a
CUDA graph, the replays timed with CUDA events), then the kernels one convolution launches in
that layout as torch.profiler names them, with their GPU times.

Usage: cudnn_kernels.py --batches 32,64 --layer C=960,HW=7,O=160,K=1 [--layer ...] --json OUT
"""
import argparse
import json

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile


def graph_timed(fn, repeats=10, launches=10):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(launches):
            fn()
    g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(repeats):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) / 1e3 / launches)
    ts.sort()
    return ts[len(ts) // 2]


def spec(s):
    d = dict(kv.split("=") for kv in s.split(","))
    c, hw, o, k = int(d["C"]), int(d["HW"]), int(d["O"]), int(d["K"])
    return c, hw, o, k, int(d.get("S", 1)), int(d.get("P", k // 2))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="32,64")
    ap.add_argument("--layer", action="append", required=True)
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    out = []
    for n in [int(b) for b in a.batches.split(",")]:
        for ls in a.layer:
            c, hw, o, k, st, p = spec(ls)
            x = torch.randn(n, c, hw, hw, device=dev, dtype=torch.float16)
            w = torch.randn(o, c, k, k, device=dev, dtype=torch.float16)
            oh = (hw + 2 * p - k) // st + 1
            flop = 2.0 * n * o * oh * oh * c * k * k
            res = {}
            for fmt, mf in (("NCHW", torch.contiguous_format), ("NHWC", torch.channels_last)):
                xf, wf = x.contiguous(memory_format=mf), w.contiguous(memory_format=mf)
                fn = lambda: F.conv2d(xf, wf, stride=st, padding=p)
                t = graph_timed(fn)
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    for _ in range(5):
                        fn()
                    torch.cuda.synchronize()
                kern = {}
                for ev in prof.events():
                    if ev.device_type == torch.autograd.DeviceType.CUDA:
                        kern.setdefault(ev.name, []).append(ev.device_time)
                res[fmt] = {"tflops": flop / t / 1e12, "us": t * 1e6,
                            "kernels": {kn: sorted(v)[len(v) // 2] for kn, v in kern.items()}}
            best = max(res, key=lambda f: res[f]["tflops"])
            row = {"batch": n, "layer": ls, "best": best, **res}
            out.append(row)
            print(n, ls, best, "%.1f TFLOP/s %.2f us" % (res[best]["tflops"], res[best]["us"]))
            for kn, us in res[best]["kernels"].items():
                print("    %.2f us  %s" % (us, kn[:160]))
    with open(a.json, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Times PyTorch's CPU convolution (oneDNN) on the layers of `layoutkit conv bench`, f32, in NCHW
and channels_last (NHWC), with the same thread count, and (with --ours) runs `layoutkit conv bench
--device cpu` on the same layer just before, so both sides are measured close in time on a
machine others may share.

Timing, both sides: one call per timed run (output allocated by the call), the fastest of
--repeats runs after one warm-up, and the whole ours-then-torch pass done --rounds times with each
side keeping its fastest. The minimum, not the median: on a machine shared with other work, a
thread that loses its core stalls the call (PyTorch's OpenMP barrier waits a whole scheduler
slice, 20-30 ms), and the minimum is the figure least moved by others' load, for both sides alike.
Each layer's load average is recorded. The baseline is PyTorch's faster layout per layer; ours is our fastest layout
among --layouts (each layout's figure is kept in the JSON).

Usage: bench/torch_conv_cpu_bench.py PATH/TO/layoutkit --net resnet50 --batch 1 --threads 2
       [--ours] [--kernels auto|avx2] [--layouts NCHW16c,NCHW8c,NHWC] [--repeats 7]
       [--rounds 2] [--filter 3x3] [--layer C=32,HW=56,O=64,K=3 ...] [--json-out FILE]

--layer (repeatable) passes a layer of your own to `conv bench --layer` in place of --net's.
"""
import argparse
import json
import math
import os
import subprocess
import time

import torch
import torch.nn.functional as F


def torch_median(x, w, stride, pad, repeats, groups=1):
    """Fastest seconds of one F.conv2d call over `repeats` (after one warm-up)."""
    with torch.no_grad():
        F.conv2d(x, w, stride=stride, padding=pad, groups=groups)
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            F.conv2d(x, w, stride=stride, padding=pad, groups=groups)
            times.append(time.perf_counter() - t)
    return min(times)


def torch_layer(layer, batch, repeats):
    """Fastest seconds in NCHW and in channels_last."""
    c, hw, o, k = layer["c"], layer["hw"], layer["o"], layer["k"]
    g = layer.get("groups", 1)
    x = torch.rand(batch, c, hw, hw) * 2 - 1
    w = torch.rand(o, c // g, k, k) * 2 - 1
    s, p = layer["stride"], layer["padding"]
    nchw = torch_median(x, w, s, p, repeats, g)
    xl = x.contiguous(memory_format=torch.channels_last)
    wl = w.contiguous(memory_format=torch.channels_last)
    nhwc = torch_median(xl, wl, s, p, repeats, g)
    return nchw, nhwc


def layer_args(args):
    return [a for spec in args.layer or [] for a in ("--layer", spec)]


def ours_layer(args, name):
    """Our fastest seconds per layout for layer `name` (exact name)."""
    cmd = [args.layoutkit, "conv", "bench", "--device", "cpu", "--net", args.net] + layer_args(args) + [
           "--filter", name, "--batch", str(args.batch), "--threads", str(args.threads),
           "--repeats", str(args.repeats), "--layouts", args.layouts,
           "--kernels", args.kernels, "--json"]
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return {r["layout"]: r["min_s"] for r in out["results"] if r["layer"] == name}, out["engine"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("layoutkit")
    ap.add_argument("--net", default="resnet50")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--filter", default=None)
    ap.add_argument("--layer", action="append", default=None)
    ap.add_argument("--ours", action="store_true")
    ap.add_argument("--kernels", default="auto")
    ap.add_argument("--layouts", default="NCHW16c,NCHW8c,NHWC")
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cmd = [args.layoutkit, "conv", "bench", "--net", args.net, "--list", "--json"] + layer_args(args)
    if args.filter:
        cmd += ["--filter", args.filter]
    layers = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["layers"]
    rows, engine = [], None
    for layer in layers:
        flop = 2 * args.batch * layer["o"] * (layer["c"] // layer.get("groups", 1)) * layer["k"] ** 2 * (
            (layer["hw"] + 2 * layer["padding"] - layer["k"]) // layer["stride"] + 1) ** 2
        best = {"torch_nchw_s": math.inf, "torch_channels_last_s": math.inf}
        ours = {}
        for _ in range(args.rounds):
            if args.ours:
                got, engine = ours_layer(args, layer["name"])
                for k, v in got.items():
                    ours[k] = min(ours.get(k, math.inf), v)
            nchw, nhwc = torch_layer(layer, args.batch, args.repeats)
            best["torch_nchw_s"] = min(best["torch_nchw_s"], nchw)
            best["torch_channels_last_s"] = min(best["torch_channels_last_s"], nhwc)
        row = {"layer": layer["name"], "flop": flop, **best, "ours_s": ours,
               "loadavg_1min": os.getloadavg()[0]}
        rows.append(row)
        torch_best = min(best.values())
        line = (f"| {layer['name']} | {flop / best['torch_nchw_s'] / 1e9:.1f} | "
                f"{flop / best['torch_channels_last_s'] / 1e9:.1f} |")
        if ours:
            lay, s = min(ours.items(), key=lambda kv: kv[1])
            line += f" {flop / s / 1e9:.1f} ({lay}) | {100 * torch_best / s:.0f}% |"
        print(line, flush=True)
    if args.ours:
        ratios = [min(r["torch_nchw_s"], r["torch_channels_last_s"]) / min(r["ours_s"].values())
                  for r in rows]
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        print(f"geomean {100 * geo:.0f}%, worst {100 * min(ratios):.0f}%")
    doc = {"date": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), "net": args.net, "batch": args.batch, "threads": args.threads, "engine": engine,
           "torch": torch.__version__, "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
           "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA"),
           "mkl_enable_instructions": os.environ.get("MKL_ENABLE_INSTRUCTIONS"), "kernels": args.kernels, "repeats": args.repeats, "rounds": args.rounds,
           "rows": rows}
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()

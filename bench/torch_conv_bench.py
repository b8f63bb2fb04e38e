#!/usr/bin/env python3
"""Our CUDA convolution against cuDNN at its best, layer by layer and batch size by batch size.

cuDNN (through PyTorch, torch.backends.cudnn.benchmark = True, f16 with tensor cores) is timed
in NCHW and in NHWC (channels_last) and the faster of the two is the baseline. Its launches are
captured in a CUDA graph (`launches` back-to-back convolutions per graph) and the graph replays
are timed with CUDA events, so only GPU time counts: eager PyTorch spends 10-30 us of host time
per call, more than a batch-1 convolution takes. Our kernels are timed by `layoutkit conv bench
--device cuda` in the same process run the same way (10 launches captured in a CUDA graph, the
replays timed with CUDA events: GPU time only; with --host-launches, launches queued from the
host instead, which counts our host's launch time where it exceeds the kernel's), in NHWC, NCHW
read in place, and NCHW through NHWC (our conversion of the
input, then the kernel reading NHWC and writing NCHW, timed together), and NCHW as `conv` plans
it (one of those two routes). Medians of --repeats.

The layers come from `layoutkit conv bench --list --json --net NET` (ResNet-50, VGG-16,
MobileNetV2 or all three; grouped and depthwise layers with their groups), or from --layer
specs passed on to it (`C=..,HW=..,O=..,K=..[,S=..][,P=..][,G=..]`, a layer of your own),
so both tools time the same layers. FLOP = 2 x MACs.

Usage:
    bench/torch_conv_bench.py PATH/TO/layoutkit [--batches 1,8,32,64] [--repeats 20]
        [--filter 3x3] [--net all] [--layer C=32,HW=56,O=64,K=3 ...] [--host-launches]
        [--json OUT.json]

Prints, per batch size, a Markdown table (cuDNN NCHW / NHWC / best, ours NHWC / NCHW, ratio to
cuDNN's best, our kernel), the geometric mean of the ratio over the layers and the worst ten.
"""
import argparse
import json
import subprocess

import torch
import torch.nn.functional as F

from fair_table import row_line, summary, table_head


def graph_timed(fn, repeats, launches=10):
    """Median GPU time of one `fn()` call: `launches` calls captured in a CUDA graph, each replay
    timed with CUDA events, divided by `launches`."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # cuDNN's autotuning and workspace allocation happen here
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(launches):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        graph.replay()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1e3 / launches)
    times.sort()
    return times[len(times) // 2]


def layer_args(specs):
    return [a for spec in specs or [] for a in ("--layer", spec)]


def ours_for_batch(exe, batch, repeats, filt, net, host_launches, specs):
    cmd = [exe, "conv", "bench", "--device", "cuda", "--net", net, "--batch", str(batch), "--repeats", str(repeats),
           "--layouts", "NHWC,NCHW,NCHW>NHWC,NCHW-planned", "--types", "f16", "--json"] + layer_args(specs)
    if filt:
        cmd += ["--filter", filt]
    if host_launches:
        cmd += ["--host-launches"]
    doc = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return {(r["layer"], r["layout"]): r for r in doc["results"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("layoutkit")
    ap.add_argument("--batches", default="1,8,32,64")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--filter", default=None)
    ap.add_argument("--net", default="all", help="resnet50, vgg16, mobilenetv2, all or resnext50 (as `conv bench --net`)")
    ap.add_argument("--layer", action="append", default=None,
                    help="a layer of your own in place of --net's, as `conv bench --layer` (repeat for several)")
    ap.add_argument("--json", default=None, help="write every measurement here")
    ap.add_argument("--host-launches", action="store_true",
                    help="time our kernels as launched from the host, not in a CUDA graph")
    args = ap.parse_args()
    cmd = [args.layoutkit, "conv", "bench", "--list", "--json", "--net", args.net] + layer_args(args.layer)
    if args.filter:
        cmd += ["--filter", args.filter]
    layers = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["layers"]
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    print(f"GPU: {torch.cuda.get_device_name(0)}, PyTorch {torch.__version__}, cuDNN "
          f"{torch.backends.cudnn.version()}; f16, TFLOP/s (cuDNN: GPU time only; ours: "
          f"{'launched from the host' if args.host_launches else 'GPU time only'})\n")
    everything = []
    for batch in [int(b) for b in args.batches.split(",")]:
        ours = ours_for_batch(args.layoutkit, batch, args.repeats, args.filter, args.net, args.host_launches,
                              args.layer)
        print(table_head(batch))
        rows = []
        for l in layers:
            n, c, hw, o, k = batch, l["c"], l["hw"], l["o"], l["k"]
            groups = l.get("groups", 1)
            oh = (hw + 2 * l["padding"] - k) // l["stride"] + 1
            flop = 2.0 * n * o * oh * oh * (c // groups) * k * k
            x = torch.randn(n, c, hw, hw, device=dev, dtype=torch.float16)
            w = torch.randn(o, c // groups, k, k, device=dev, dtype=torch.float16)
            cudnn = {}
            for fmt, mf in (("NCHW", torch.contiguous_format), ("NHWC", torch.channels_last)):
                xf, wf = x.contiguous(memory_format=mf), w.contiguous(memory_format=mf)
                t = graph_timed(lambda: F.conv2d(xf, wf, stride=l["stride"], padding=l["padding"],
                                                 groups=groups), args.repeats)
                cudnn[fmt] = flop / t / 1e12
            best_fmt = max(cudnn, key=cudnn.get)
            mine = {fmt: ours.get((l["name"], fmt), {})
                    for fmt in ("NHWC", "NCHW", "NCHW>NHWC", "NCHW-planned")}
            tf = {fmt: mine[fmt].get("tflops") for fmt in mine}
            route = mine["NCHW-planned"].get("route", "-")
            ratio = tf["NHWC"] / cudnn[best_fmt] if tf["NHWC"] else None
            nchw_ratio = tf["NCHW-planned"] / tf["NHWC"] if tf["NCHW-planned"] and tf["NHWC"] else None
            kernel = mine["NHWC"].get("kernel") or mine["NHWC"].get("skipped", "-")
            row = {"batch": batch, "layer": l["name"], "flop": flop, "cudnn_nchw_tflops": cudnn["NCHW"],
                   "cudnn_nhwc_tflops": cudnn["NHWC"], "cudnn_best_layout": best_fmt,
                   "ours_nhwc_tflops": tf["NHWC"], "ours_nchw_in_place_tflops": tf["NCHW"],
                   "ours_nchw_via_nhwc_tflops": tf["NCHW>NHWC"],
                   "ours_nchw_planned_tflops": tf["NCHW-planned"], "nchw_route": route,
                   "ratio_to_cudnn_best": ratio, "nchw_planned_over_nhwc": nchw_ratio, "kernel": kernel}
            print(row_line(row), flush=True)
            rows.append(row)
            everything.append(row)
            del x, w
        print(summary(batch, rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                       "ours_launches": "host" if args.host_launches else "graph",
                       "cudnn": torch.backends.cudnn.version(), "rows": everything}, f, indent=1)


if __name__ == "__main__":
    main()

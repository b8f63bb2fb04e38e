#!/usr/bin/env python3
"""The tables `torch_conv_bench.py` prints, rendered again from its --json file.

Usage: python3 bench/fair_table.py FAIR.json

Prints, per batch, the per-layer table, the geometric mean of ours / cuDNN's best layout, the
layers at 85% or more, NCHW as planned / our NHWC on the 3x3 layers and the worst ten. The
functions below are the ones `torch_conv_bench.py` prints with while it measures, so a run
whose printout was lost can be tabulated from its raw file.
"""
import json
import math
import sys
import raw_json


def geomean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def table_head(batch):
    """The heading and column names of one batch's table."""
    return (f"### batch {batch}\n\n"
            "| layer | cuDNN NCHW | cuDNN NHWC | cuDNN best | ours NHWC | ours NCHW in place "
            "| ours NCHW via NHWC | ours NCHW as planned (route) | ours / cuDNN best "
            "| NCHW planned / ours NHWC | our kernel |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|")


def row_line(r):
    """One layer's table row from its JSON row."""
    fmt_v = lambda v, p=".1f": format(v, p) if v else "-"
    best = r["cudnn_best_layout"]
    best_v = r["cudnn_nchw_tflops"] if best == "NCHW" else r["cudnn_nhwc_tflops"]
    return (f"| {r['layer']} | {r['cudnn_nchw_tflops']:.1f} | {r['cudnn_nhwc_tflops']:.1f} | "
            f"{best_v:.1f} ({best}) | {fmt_v(r['ours_nhwc_tflops'])} | "
            f"{fmt_v(r['ours_nchw_in_place_tflops'])} | {fmt_v(r['ours_nchw_via_nhwc_tflops'])} | "
            f"{fmt_v(r['ours_nchw_planned_tflops'])} ({r['nchw_route']}) | "
            f"{fmt_v(r['ratio_to_cudnn_best'], '.0%')} | "
            f"{fmt_v(r['nchw_planned_over_nhwc'], '.0%')} | {r['kernel']} |")


def summary(batch, rows):
    """The lines after one batch's table: geometric mean, NCHW route, worst ten."""
    covered = [r for r in rows if r["ratio_to_cudnn_best"]]
    out = [f"\nbatch {batch}: geometric mean of ours / cuDNN best over {len(covered)} of {len(rows)} "
           f"layers: {geomean([r['ratio_to_cudnn_best'] for r in covered]):.2f}; "
           f"layers >= 85%: {sum(r['ratio_to_cudnn_best'] >= 0.85 for r in covered)}"]
    via = [r for r in rows if r["nchw_planned_over_nhwc"] and "3x3" in r["layer"]]
    if via:
        out.append(f"batch {batch}: NCHW end to end (as planned) / our NHWC on the 3x3 layers: min "
                   f"{min(r['nchw_planned_over_nhwc'] for r in via):.2f}, geometric mean "
                   f"{geomean([r['nchw_planned_over_nhwc'] for r in via]):.2f}")
    worst = sorted(covered, key=lambda r: r["ratio_to_cudnn_best"])[:10]
    out.append("worst ten: " + "; ".join(f"{r['layer']} {r['ratio_to_cudnn_best']:.2f} ({r['kernel']})"
                                         for r in worst) + "\n")
    return "\n".join(out)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    d = raw_json.load(sys.argv[1])
    launches = "launched from the host" if d.get("ours_launches") == "host" else "GPU time only"
    print(f"GPU: {d['gpu']}, PyTorch {d['torch']}, cuDNN {d['cudnn']}; f16, TFLOP/s (cuDNN: GPU "
          f"time only; ours: {launches})\n")
    batches = []
    for r in d["rows"]:
        if r["batch"] not in batches:
            batches.append(r["batch"])
    for batch in batches:
        rows = [r for r in d["rows"] if r["batch"] == batch]
        print(table_head(batch))
        for r in rows:
            print(row_line(r))
        print(summary(batch, rows))


if __name__ == "__main__":
    main()

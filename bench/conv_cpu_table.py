#!/usr/bin/env python3
"""Markdown tables from the raw JSON files of bench/torch_conv_cpu_bench.py: per configuration,
every layer (PyTorch NCHW and channels_last, our best layout, the ratio to PyTorch's best
layout), the geometric mean and the worst five, and a summary line per configuration.
Files from `layoutkit conv bench --with-conversions --json` give the layout table instead: per
layer and layout, the convolution alone and with its conversions from and to NCHW.

Usage: bench/conv_cpu_table.py RAW.json...
"""
import json
import math
import sys
import raw_json


def gf(flop, s):
    return flop / s / 1e9


def layouts_table(path, d):
    """Milliseconds per layer and layout: alone / with conversions from and to NCHW."""
    layers, layouts, cell = [], [], {}
    for r in d["results"]:
        if r["layer"] not in layers:
            layers.append(r["layer"])
        if r["layout"] not in layouts:
            layouts.append(r["layout"])
        cell[r["layer"], r["layout"]] = (r["median_s"], r["median_with_conversions_s"])
    print(f"\n#### Layouts: batch {d['batch']}, {d['threads']} thread(s), {d['engine']} "
          f"(`{path}`; median ms: convolution alone / with NCHW -> layout -> NCHW conversions)\n")
    print("| layer | " + " | ".join(layouts) + " | fastest alone | fastest with conversions |")
    print("|---|" + "---:|" * (len(layouts) + 2))
    total = {l: [0.0, 0.0] for l in layouts}
    for layer in layers:
        cells = []
        for l in layouts:
            a, c = cell[layer, l]
            total[l][0] += a
            total[l][1] += c
            cells.append(f"{a * 1e3:.3f} / {c * 1e3:.3f}")
        best_a = min(layouts, key=lambda l: cell[layer, l][0])
        best_c = min(layouts, key=lambda l: cell[layer, l][1])
        print(f"| {layer} | " + " | ".join(cells) + f" | {best_a} | {best_c} |")
    print("| **sum** | " + " | ".join(f"{total[l][0] * 1e3:.2f} / {total[l][1] * 1e3:.2f}"
                                     for l in layouts) + " | | |")


def main():
    summary = []
    for path in sys.argv[1:]:
        d = raw_json.load(path)
        if "results" in d:
            layouts_table(path, d)
            continue
        rows = d["rows"]
        print(f"\n#### {d['net']}, batch {d['batch']}, {d['threads']} thread(s), "
              f"ours: {d['engine']}, PyTorch {d['torch']} (oneDNN, ATen {d['torch_cpu_capability']}"
              f"{', ONEDNN_MAX_CPU_ISA=' + d['onednn_max_cpu_isa'] if d.get('onednn_max_cpu_isa') else ''}{', MKL_ENABLE_INSTRUCTIONS=' + d['mkl_enable_instructions'] if d.get('mkl_enable_instructions') else ''})\n")
        print(f"`{path}` ({d['date']} UTC)\n")
        print("| layer | PyTorch NCHW GFLOP/s | PyTorch channels_last GFLOP/s | ours GFLOP/s (layout) "
              "| ours / PyTorch best | load avg |")
        print("|---|---:|---:|---:|---:|---:|")
        ratios = []
        for r in rows:
            tb = min(r["torch_nchw_s"], r["torch_channels_last_s"])
            lay, s = min(r["ours_s"].items(), key=lambda kv: kv[1])
            ratio = tb / s
            ratios.append((ratio, r["layer"]))
            print(f"| {r['layer']} | {gf(r['flop'], r['torch_nchw_s']):.1f} | "
                  f"{gf(r['flop'], r['torch_channels_last_s']):.1f} | {gf(r['flop'], s):.1f} ({lay}) | "
                  f"{100 * ratio:.0f}% | {r.get('loadavg_1min', float('nan')):.1f} |")
        geo = math.exp(sum(math.log(x) for x, _ in ratios) / len(ratios))
        worst = sorted(ratios)[:5]
        print(f"\nGeometric mean {100 * geo:.0f}%; worst five: "
              + ", ".join(f"{n} {100 * x:.0f}%" for x, n in worst) + ".")
        summary.append((d["engine"], d["net"], d["batch"], d["threads"], geo, worst[0][0],
                        sum(1 for x, _ in ratios if x < 0.8), len(ratios)))
    print("\n| build | net | batch | threads | geomean vs PyTorch best | worst layer | layers < 80% |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for e, n, b, t, g, w, below, total in summary:
        print(f"| {e} | {n} | {b} | {t} | {100 * g:.0f}% | {100 * w:.0f}% | {below} of {total} |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""run2's tables: (1) the A/B of our NHWC kernels (build before `base`, this build `new`, two
alternated passes, mean TFLOP/s) on the layer-and-batch pairs whose kernel changed, and the
spread of the unchanged ones; (2) the fair script on the chosen layers: cuDNN's best (mean of
the four runs), ours before and after (mean of two runs each), each over cuDNN's best;
(3) the fair script on the three networks with this build: layers at 85% per batch and those
below."""
import glob
import json
import math
import os
import sys

R = sys.argv[1]


def load(path):
    try:
        return json.load(open(path))
    except Exception as e:  # a run that failed leaves no JSON
        print(f"{os.path.basename(path)}: no JSON ({e})")
        return None


ab = {}
for f in sorted(glob.glob(os.path.join(R, "ab-b*-*-*.json"))):
    _, b, v, _ = os.path.basename(f)[:-5].split("-")
    d = load(f)
    for r in (d or {}).get("results", []):
        if r.get("tflops"):
            e = ab.setdefault((int(b[1:]), r["layer"]), {}).setdefault(v, [[], set()])
            e[0].append(r["tflops"])
            e[1].add(r["kernel"])
print("== A/B, our NHWC kernels (TFLOP/s, mean of two passes each)")
for b in (1, 8, 32, 64):
    same, changed = [], []
    for (bb, layer), v in sorted(ab.items()):
        if bb != b or "base" not in v or "new" not in v:
            continue
        mb, mn = (sum(v[x][0]) / len(v[x][0]) for x in ("base", "new"))
        (changed if v["base"][1] != v["new"][1] else same).append((layer, mb, mn, v))
    rs = [mn / mb for _, mb, mn, _ in same]
    if rs:
        g = math.exp(sum(map(math.log, rs)) / len(rs))
        print(f"batch {b}: {len(same)} layers with the same kernel: new / base {min(rs):.3f}-{max(rs):.3f}, geometric mean {g:.3f}")
    for layer, mb, mn, v in changed:
        print(f"  batch {b} {layer:32} {mb:7.1f} -> {mn:7.1f} {mn / mb:5.2f}x  {'/'.join(sorted(v['base'][1]))} -> {'/'.join(sorted(v['new'][1]))}")

fl = {}
for f in sorted(glob.glob(os.path.join(R, "fair-layers-*-*.json"))):
    _, _, v, _ = os.path.basename(f)[:-5].split("-")
    d = load(f)
    for r in (d or {}).get("rows", []):
        e = fl.setdefault((r["batch"], r["layer"]), {"cudnn": [], "base": [], "new": [], "k": {}})
        e["cudnn"].append(max(r["cudnn_nchw_tflops"], r["cudnn_nhwc_tflops"]))
        if r["ours_nhwc_tflops"]:
            e[v].append(r["ours_nhwc_tflops"])
        e["k"][v] = r["kernel"]
print("\n== fair script on the chosen layers (TFLOP/s; cuDNN best: mean of 4 runs; ours: mean of 2)")
print("| batch | layer | cuDNN best | before | after | before / cuDNN | after / cuDNN | kernel after |")
print("|---|---|---|---|---|---|---|---|")
m = lambda x: sum(x) / len(x) if x else float("nan")
for (b, layer), e in sorted(fl.items()):
    c, mb, mn = m(e["cudnn"]), m(e["base"]), m(e["new"])
    print(f"| {b} | {layer} | {c:.1f} | {mb:.1f} | {mn:.1f} | {mb / c:.2f} | {mn / c:.2f} | {e['k'].get('new', '-')} |")

d = load(os.path.join(R, "fair-3nets.json"))
if d:
    print("\n== fair script, three networks, this build")
    for b in (32, 64):
        rows = [r for r in d["rows"] if r["batch"] == b and r["ratio_to_cudnn_best"]]
        ok = sum(r["ratio_to_cudnn_best"] >= 0.85 for r in rows)
        g = math.exp(sum(math.log(r["ratio_to_cudnn_best"]) for r in rows) / len(rows))
        print(f"batch {b}: {ok} of {len(rows)} layers at 85% or more; geometric mean {g:.3f}")
        for r in sorted(rows, key=lambda r: r["ratio_to_cudnn_best"]):
            if r["ratio_to_cudnn_best"] < 0.85:
                print(f"  {r['layer']:32} {r['ratio_to_cudnn_best']:.3f}  {r['kernel']}")

#!/usr/bin/env python3
"""run2's forced tiles (this build): per layer and batch, each configuration's TFLOP/s and its
ratio to the rule's, fastest first."""
import glob
import json
import os
import sys

rows = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "forced-b*-*.json"))):
    b, name = os.path.basename(f)[len("forced-"):-5].split("-", 1)
    try:
        d = json.load(open(f))
    except Exception as e:
        print(f, "no JSON", e)
        continue
    for r in d["results"]:
        rows.setdefault((int(b[1:]), r["layer"]), {})[name] = (r.get("tflops") or 0.0, r.get("kernel") or r.get("skipped", "")[:60])
for (b, layer), v in sorted(rows.items()):
    ref = v.get("rule", (0, ""))[0]
    print(f"batch {b} {layer}: rule {ref:.1f} ({v.get('rule', (0, '-'))[1]})")
    for n, (t, k) in sorted(v.items(), key=lambda x: -x[1][0]):
        print(f"    {t:7.1f} {t / ref if ref else 0:5.2f}x  {n:14} {k}")

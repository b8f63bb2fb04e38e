#!/usr/bin/env python3
"""Per layer and batch of run1's forced configurations: the rule's TFLOP/s and kernel, then the
ten fastest configurations with their ratio to the rule (mean of `rule` and `rule2`)."""
import glob
import json
import os
import sys

R = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(R, "b*.json"))):
    tag = os.path.basename(f)[:-5]
    b, name = tag.split("-", 1)
    try:
        d = json.load(open(f))
    except Exception as e:  # an empty or cut file: the run failed
        print(tag, "no JSON:", e)
        continue
    for r in d["results"]:
        key = (int(b[1:]), r["layer"])
        rows.setdefault(key, {})[name] = (r.get("tflops") or 0.0, r.get("kernel") or r.get("skipped", "")[:60])
for (b, layer), v in sorted(rows.items()):
    base = [v[n][0] for n in ("rule", "rule2") if n in v and v[n][0]]
    ref = sum(base) / len(base) if base else 0.0
    print(f"batch {b} {layer}: rule {' / '.join('%.1f' % x for x in base)} ({v.get('rule', (0, '-'))[1]})")
    best = sorted(((t, n, k) for n, (t, k) in v.items() if t), reverse=True)[:10]
    for t, n, k in best:
        print(f"    {t:7.1f} {t / ref if ref else 0:5.2f}x  {n:16} {k}")

#!/usr/bin/env python3
"""run1's summary: per layer and batch, the rule with each build (passes alternated), then every
forced configuration of this build, fastest first, with its ratio to the rule (mean of this
build's two rule passes) and its kernel."""
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
    new = [v[n][0] for n in ("rule-new-1", "rule-new-2") if n in v and v[n][0]]
    base = [v[n][0] for n in ("rule-base-1", "rule-base-2") if n in v and v[n][0]]
    ref = sum(new) / len(new) if new else 0.0
    kern = v.get("rule-new-1", (0, "-"))[1]
    print(f"batch {b} {layer}: rule base {' / '.join('%.1f' % x for x in base)}, new {' / '.join('%.1f' % x for x in new)} ({kern})")
    best = sorted(((t, n, k) for n, (t, k) in v.items() if t and not n.startswith("rule-")), reverse=True)
    for t, n, k in best:
        print(f"    {t:7.1f} {t / ref if ref else 0:5.2f}x  {n:14} {k}")
